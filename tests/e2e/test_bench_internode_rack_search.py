"""roles/bench_internode's rack search (tasks/racks.yml, rack_search_stage.yml,
rack_search_round.yml) through ansible-playbook, four trays of one NVL72 rack on this machine
(connection local), mpirun replaced by a double that prints a real GB200 rack output, slowed
(DERIVED, tests/unit/test_rack_search.slowed) whenever tray03 is among the run's hosts.

Expected, from the search's rules: the rack test (all four) fails; the halves tray01+tray02
(passes) and tray03+tray04 (fails) run at once; tray03 and tray04 are suspects, each paired with
tray01 and tray02 in two rounds of disjoint pairs; tray03 fails with both and is flagged, tray04
passes with both and is cleared. No GPU: nothing here measures NVLink.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from gpuval.checks import judge_run
from gpuval.checks.thresholds import DEFAULTS
from gpuval.evidence import build_evidence
from gpuval.runfolder import read_run_folder
from tests.e2e.local_playbook import run_locally
from tests.unit.test_rack_search import HEALTHY, slowed

TRAYS = ["tray01", "tray02", "tray03", "tray04"]
BAD = "tray03"
DOUBLE = """#!{python}
import sys
hosts = sys.argv[sys.argv.index("--host") + 1].split(",")
trays = [h.split(":")[0] for h in hosts]
print(open({slow!r} if {bad!r} in trays else {healthy!r}).read(), end="")
"""


def test_the_role_searches_the_failing_rack_and_names_the_tray(tmp_path: Path) -> None:
    (tmp_path / "healthy.txt").write_text(HEALTHY)
    (tmp_path / "slow.txt").write_text(slowed(HEALTHY, 0.4))
    double = tmp_path / "mpirun"
    double.write_text(DOUBLE.format(python=sys.executable, slow=str(tmp_path / "slow.txt"),
                                    bad=BAD, healthy=str(tmp_path / "healthy.txt")))  # fmt: skip
    double.chmod(0o755)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    declared = {t: {"gpu_model": "GB200", "nvl_domain": "nvl72-a",
                    "system": "GB200 NVL72 compute tray"} for t in TRAYS}  # fmt: skip
    # run.json as run_context writes it before the benchmarks.
    (run_dir / "run.json").write_text(json.dumps(
        {"run_id": "rack-search", "started_at": None, "hosts": TRAYS, "declared": declared}
    ))  # fmt: skip
    completed = run_locally(tmp_path, TRAYS, {
        "name": "rack search", "gather_facts": False,
        "vars": {
            "gpuval_node_run_dir": str(tmp_path / "node" / "{{ inventory_hostname }}"),
            "bench_internode_run_dir": str(run_dir), "bench_internode_group": "all",
            "nccl_tests_bin_dir": "/opt/nccl-tests/build",
        },
        "tasks": [
            {"name": "Declare the rack and what preflight found", "ansible.builtin.set_fact": {
                "gpuval_nvl_domain": "nvl72-a", "gpuval_gpu_model": "GB200",
                "preflight_gpu_count": 4,
                "openmpi_launch": {"mpirun": str(double), "args": [], "env": {}, "export": [],
                                   "addresses": {}},
            }},
            # The IMEX channel the rack test looks for is not on this machine: the double runs
            # whatever the rack test's skip reason says, so it is left out here.
            {"name": "Run the rack tests", "ansible.builtin.include_role": {
                "name": str(Path(__file__).resolve().parents[2] / "roles/bench_internode"),
                "tasks_from": "racks.yml",
            }, "vars": {"bench_internode_imex_channel": {"stat": {"exists": True}}}},
        ],
    }, forks=4)  # fmt: skip
    assert completed.returncode == 0, completed.stdout[-6000:] + completed.stderr[-3000:]
    raw = run_dir / "raw"
    assert sorted(p.name for p in raw.rglob("rack-search-*.txt")) == [
        "rack-search-nccl-all_reduce-r2.txt", "rack-search-nccl-all_reduce-r2.txt",
        "rack-search-nccl-all_reduce-r3.txt", "rack-search-nccl-all_reduce-r3.txt",
        "rack-search-nccl-all_reduce-r4.txt", "rack-search-nccl-all_reduce-r4.txt",
    ]  # fmt: skip
    checks = judge_run(build_evidence(read_run_folder(run_dir)), DEFAULTS).checks
    search = {c.host: c.status for c in checks if c.check_id.endswith(".rack-search")}
    assert search == {"tray01": "pass", "tray02": "pass", "tray03": "fail", "tray04": "pass"}
