"""roles/bench_pairs/tasks/rdma.yml through ansible-playbook, both nodes of a pair on this machine
(connection local), ib_write_bw replaced by a double: the servers start in one call and listen,
the first node measures every rail's host-memory lane together, then every rail's GPU-memory
lane, and each lane keeps its own raw file and sidecar.

The double's client prints a published ib_write_bw output (tests/data/outputs/ib_write_bw,
REAL) byte for byte, so a raw file is checked whole; it exits 1 unless every lane of its memory
has started (a marker file per lane), so the lanes can only succeed when run at the same time.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from gpuval.plan import pair_rounds
from gpuval.plan.pair_plan import NodeFacts, PairPlan, PairSettings
from tests.e2e.local_playbook import REPO, run_locally

PUBLISHED = REPO / "tests/data/outputs/ib_write_bw/roce-100g-bidirectional-cpufreq-warning.txt"
RAILS = 2

DOUBLE = """#!{python}
import os, pathlib, socket, sys, time
args = sys.argv[1:]
port = int(args[args.index("-p") + 1])
if args[-1] != "127.0.0.1":  # a server: wait for one client, then end
    with socket.create_server(("127.0.0.1", port)) as server:
        server.settimeout(60)
        connection, _ = server.accept()
        connection.recv(1)
    print("server done")
    sys.exit(0)
memory = "cuda" if any(a.startswith("--use_cuda") for a in args) else "host"
markers = pathlib.Path({markers!r})
(markers / f"{{memory}}-{{port}}").touch()
for _ in range(200):
    if len(list(markers.glob(memory + "-*"))) >= {rails}:
        break
    time.sleep(0.1)
else:
    print("not every lane of this memory started", file=sys.stderr)
    sys.exit(1)
socket.create_connection(("127.0.0.1", port)).close()
sys.stdout.buffer.write(pathlib.Path({published!r}).read_bytes())
"""


def test_rdma_tasks_measure_the_rails_together_each_lane_with_its_own_files(
    tmp_path: Path,
) -> None:
    markers = tmp_path / "markers"
    markers.mkdir()
    double = tmp_path / "ib_write_bw"
    double.write_text(
        DOUBLE.format(
            python=sys.executable, markers=str(markers), rails=RAILS, published=str(PUBLISHED)
        )
    )
    double.chmod(0o755)
    hcas = tuple(f"mlx5_{i}" for i in range(RAILS))
    nodes = {
        h: NodeFacts(address="127.0.0.1", has_gpu=True, gpu_count=RAILS, rdma_hcas=hcas,
                     has_rdma_binary=True)
        for h in ("node1", "node2")
    }  # fmt: skip
    settings = PairSettings(rdma="required", rdma_binary=str(double), rdma_port_base=28515)
    plan = PairPlan(settings, nodes, list(nodes))
    entry = plan.with_commands(pair_rounds.entry(1, "node1", "node2", {"rdma": 1}, plan.lanes))
    run_dir, peer_dir = tmp_path / "run", tmp_path / "peers"
    completed = run_locally(tmp_path, ["node1", "node2"], {
        "name": "One RDMA pair", "gather_facts": False,
        "vars": {
            "bench_pairs_entry": entry,
            "bench_pairs_first": "{{ inventory_hostname == 'node1' }}",
            "bench_pairs_partner_lost": False,
            "bench_pairs_lost_reason": "",
            "bench_pairs_peer_dir": str(peer_dir),
            "gpuval_node_run_dir": str(run_dir),
        },
        "tasks": [{"name": "Measure the pair", "ansible.builtin.include_tasks": str(
            REPO / "roles/bench_pairs/tasks/rdma.yml"
        )}],
    })  # fmt: skip
    assert completed.returncode == 0, completed.stdout + completed.stderr
    clients = entry["run"]["rdma"]["clients"]
    assert [c["group"] for c in clients] == ["host"] * RAILS + ["cuda"] * RAILS
    for client in clients:
        sidecar = json.loads((run_dir / f"{client['name']}.meta.json").read_text())
        assert (sidecar["exit_code"], sidecar["timed_out"]) == (0, False), client["name"]
        assert sidecar["command"].split()[0] == str(double)
        raw = run_dir / f"{client['name']}.txt"
        assert raw.read_bytes() == PUBLISHED.read_bytes(), client["name"]
    servers = sorted(p.name for p in peer_dir.glob("*.meta.json"))
    assert servers == sorted(f"{n}.meta.json" for n in entry["peers"]["rdma"])
    for server in servers:
        assert json.loads((peer_dir / server).read_text())["exit_code"] == 0, server
