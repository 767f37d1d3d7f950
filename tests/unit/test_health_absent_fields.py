"""Absent evidence never passes (issue 18 items 9, 5 and 6), judged on real published outputs.

- Memory and clocks: a GPU whose nvidia-smi printed no ECC, retired-page, remapped-row,
  slowdown, temperature, power-limit or persistence field is UNJUDGED on those fields, naming
  them; a pass names what it read.
- One rule for pending remaps and remap failures, whichever tool reports them: Xid 63 in the
  kernel log is nvidia-smi's "Pending: Yes" (reset the GPU at the next opportunity), Xid 64 is
  "Remapping Failure Occurred: Yes" (fail, RMA). NVIDIA, GPU Memory Error Management:
  https://docs.nvidia.com/deploy/a100-gpu-mem-error-mgmt/index.html
- NVLink state: a GPU with no active NVLink fails where its siblings show NVLinks or its model's
  catalog entry wires NVLink on the board; on a board without NVLink it passes, saying why.

Expected verdicts were written from those sources before the checks were changed."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from tests.unit.test_health_checks import OUTPUTS, XML, RunFolder

from gpuval.checks.model import Check

SMI = OUTPUTS / "nvidia-smi"
KERNEL = OUTPUTS / "kernel-log"
ALL_INACTIVE = "NVML: Unable to retrieve NVLink information as all links are inActive\n"


@pytest.fixture
def run(tmp_path: Path) -> RunFolder:
    return RunFolder(tmp_path / "run")


def query(run: RunFolder, text: str, ext: str = "txt") -> None:
    """The health role's before and after `nvidia-smi -q` captures, both `text`."""
    run.healthy("node1")
    kind = "nvidia-smi-xml" if ext == "xml" else "nvidia-smi-q"
    for name in ("nvidia-smi-query", "nvidia-smi-query-after"):
        for old in run.root.glob(f"raw/node1/{name}.*"):
            old.unlink()
        run.step("node1", name, text, kind, "health" if "after" in name else "preflight", ext)


def without(xml: str, element: str) -> str:
    """The real XML with every <element>...</element> removed (a field the driver did not
    print)."""
    new, count = re.subn(rf"\s*<{element}>[^<]*</{element}>", "", xml)
    assert count >= 1, element
    return new


# --- item 9: memory ---------------------------------------------------------------------------


def test_titan_v_with_ecc_and_rows_all_na_is_unjudged_naming_the_fields(run: RunFolder) -> None:
    # Real -q of a TITAN V, driver 560: ECC Mode N/A, every ECC count N/A, Retired Pages N/A,
    # Remapped Rows N/A. Nothing says whether an uncorrectable error or a pending retirement
    # waits: unjudged, never "no uncorrectable ECC error".
    query(run, (SMI / "q-gpud-560.35.03-titan-v-single-double-bit-ecc.txt").read_text())
    check = run.health()["health.memory"]
    assert check.status == "unjudged"
    assert "GPU0" in check.reason
    assert "ECC" in check.reason and "retired pages" in check.reason
    assert "remapped rows" in check.reason
    assert "no uncorrectable ECC error" not in check.reason


def test_an_excerpt_without_memory_fields_is_unjudged(run: RunFolder) -> None:
    # Real -q of a GTX 960M (driver 410) as quoted, ending at GPU Operation Mode.
    query(run, (SMI / "q-netdata-4892-410-gtx960m-excerpt.txt").read_text())
    health = run.health()
    assert health["health.memory"].status == "unjudged"
    assert "no uncorrectable" not in health["health.memory"].reason
    clocks = health["health.clocks"]
    assert clocks.status == "unjudged"
    for field in ("slowdown reasons", "temperature", "power limit"):
        assert field in clocks.reason, field
    assert "persistence mode on" not in clocks.reason


def test_a100_in_mig_mode_without_remapped_rows_is_unjudged_on_the_rows(run: RunFolder) -> None:
    # Real -q -x of an A100 SXM4 in MIG mode (driver 515): ECC Enabled, aggregate counts 0,
    # volatile counts N/A, retired pages and remapped rows N/A.
    query(run, (SMI / "xml-netdata-a100-sxm4-mig.xml").read_text(), ext="xml")
    check = run.health()["health.memory"]
    assert check.status == "unjudged"
    assert "remapped rows" in check.reason and "GPU0" in check.reason


def test_healthy_h100_memory_pass_names_what_it_read(run: RunFolder) -> None:
    run.healthy("node1")
    check = run.health()["health.memory"]
    assert check.status == "pass"
    assert "ECC enabled" in check.reason
    assert "uncorrectable errors 0 since the driver loaded and 0 in its life" in check.reason
    assert "remapped rows" in check.reason and "pending No" in check.reason


def test_rtx4090_with_ecc_disabled_passes_saying_ecc_is_off(run: RunFolder) -> None:
    # Real -q, driver 535, 8x RTX 4090: ECC Disabled (counts N/A, the GPU keeps none), remapped
    # rows Pending No, Remapping Failure Occurred No. A GeForce card: ECC off is its default.
    query(run, (SMI / "q-gpud-535.154.05-8x4090-sw-power-cap.txt").read_text())
    check = run.health()["health.memory"]
    assert check.status == "pass"
    assert "8 GPU(s)" in check.reason and "ECC disabled" in check.reason
    assert "no uncorrectable ECC error" not in check.reason


# --- item 9: clocks ---------------------------------------------------------------------------


def test_persistence_mode_not_printed_is_unjudged_not_on(run: RunFolder) -> None:
    # DERIVED: the lent H100's real -q -x without its <persistence_mode> element.
    run.healthy("node1", without(XML, "persistence_mode"))
    check = run.health()["health.clocks"]
    assert check.status == "unjudged"
    assert "GPU0" in check.reason and "persistence mode" in check.reason
    assert "persistence mode on" not in check.reason


def test_persistence_mode_na_on_a_real_output_is_unjudged(run: RunFolder) -> None:
    # Real -q of a GTX 1080 Ti under Windows (driver 442, WDDM): "Persistence Mode : N/A"; the
    # quoted excerpt ends at the Inforom block.
    query(run, (SMI / "q-gputil-38-442-gtx1080ti-wddm-persistence-na-excerpt.txt").read_text())
    check = run.health()["health.clocks"]
    assert check.status == "unjudged"
    assert "persistence mode" in check.reason and "persistence mode on" not in check.reason


def test_healthy_h100_clocks_pass_names_what_it_read(run: RunFolder) -> None:
    run.healthy("node1")
    check = run.health()["health.clocks"]
    assert check.status == "pass"
    assert "33 °C" in check.reason  # the GPU temperature it read
    assert "700 W" in check.reason  # the power limit it read, at its default
    assert "persistence mode Enabled" in check.reason
    assert "slowdown reasons" in check.reason


# --- item 5: one rule for pending remaps and remap failures -----------------------------------


def test_xid63_is_the_same_finding_as_pending_yes_with_the_same_action(run: RunFolder) -> None:
    # Real -q of an A10 (driver 535) with Remapped Rows Pending: Yes (4 uncorrectable).
    query(run, (SMI / "q-gpud-535.129.03-a10.txt").read_text())
    smi = run.health()["health.memory"]
    assert smi.status == "fail" and "row remap pending" in smi.reason
    # Real Xid 63 line (ml-engineering): "Row Remapper: New row marked for remapping, reset gpu
    # to activate." Undated, so judged as current.
    line = (KERNEL / "ml-engineering-debug-xid63-row-remapper.txt").read_text()
    xid = run.after_kernel_log(line)["health.xid.0000:10:1c"]
    assert xid.status == "fail"
    assert "row remap" in xid.reason and "pending" in xid.reason
    assert xid.action and "reset" in xid.action and "while it is idle" in xid.action
    assert "to apply the pending row remap" in xid.action
    assert "to apply the pending row remap" in (smi.action or "")


def test_xid64_fails_as_a_remapping_failure_with_rma(run: RunFolder) -> None:
    text = (KERNEL / "menthos-dataset-sxid-fatal-nonfatal-xid64.txt").read_text()
    check = run.after_kernel_log(text)["health.xid.0000:0f:00"]
    assert check.status == "fail"
    assert "row remapping failed" in check.reason
    assert check.action and "RMA" in check.action


def test_xid64_older_than_the_window_still_fails(run: RunFolder) -> None:
    # Spare rows used up do not come back with time: the failure stays (nvidia-smi keeps
    # printing "Remapping Failure Occurred: Yes").
    line = (
        "2026-11-19T20:00:00+00:00 node1 kernel: NVRM: Xid (PCI:0000:0f:00): 64, pid=57530, "
        "Row Remapper Error: (0x00000005d28c03a0) - All reserved rows for bank are remapped\n"
    )
    assert run.after_kernel_log(line)["health.xid.0000:0f:00"].status == "fail"


# --- item 6: a GPU with no active NVLink ------------------------------------------------------

B200_ACTIVE = "".join(f"\t Link {n}: 53.125 GB/s\n" for n in range(18))


def nvlink_run(run: RunFolder, text: str, declared: dict[str, object] | None = None) -> None:
    run.step("node1", "nvidia-smi-nvlink", text, "nvidia-smi-nvlink", "preflight")
    document: dict[str, object] = {"run_id": "t", "started_at": "2026-11-22T10:00:00Z",
                                   "hosts": ["node1"],
                                   "expected": {"node1": ["nvidia-smi-nvlink"]}}  # fmt: skip
    if declared:
        document["declared"] = {"node1": declared}
    (run.root / "run.json").write_text(json.dumps(document))


def nvlink_state(run: RunFolder) -> Check:
    return next(c for c in run.checks() if c.check_id == "topology.nvlink-state")


def test_b200_all_links_inactive_among_active_siblings_fails_naming_it(run: RunFolder) -> None:
    # DERIVED: GPU 2's real lines (gpud issue 1085: "NVML: Unable to retrieve NVLink information
    # as all links are inActive") among seven B200 whose 18 links are up, in the per-link
    # figure GB200 prints (k8s-test-infra issue 371). No topology, no declared system.
    real = (SMI / "nvlink-gpud-1085-b200-all-links-inactive.txt").read_text()
    active = "".join(f"GPU {n}: NVIDIA B200 (UUID: GPU-xxx)\n{B200_ACTIVE}" for n in (0, 1))
    rest = "".join(f"GPU {n}: NVIDIA B200 (UUID: GPU-xxx)\n{B200_ACTIVE}" for n in range(3, 8))
    nvlink_run(run, active + real + rest)
    check = nvlink_state(run)
    assert check.status == "fail"
    assert "GPU2" in check.reason and "no active NVLink" in check.reason
    assert "GPU3" not in check.reason


def test_b200_alone_with_all_links_inactive_fails_by_its_catalog_entry(run: RunFolder) -> None:
    # The real gpud 1085 output alone: one B200, an SXM module whose NVLinks its board always
    # wires (catalog: nvlink5, not optional), on a declared 8-GPU node.
    real = (SMI / "nvlink-gpud-1085-b200-all-links-inactive.txt").read_text()
    nvlink_run(run, real, {"gpu_model": "B200", "gpus_per_node": 8})
    check = nvlink_state(run)
    assert check.status == "fail"
    assert "GPU2" in check.reason and "B200" in check.reason


def test_pcie_cards_without_bridges_pass_saying_why(run: RunFolder) -> None:
    # CONSTRUCTED in the real line format of gpud 1085: two H100 PCIe, neither with an active
    # NVLink. H100 PCIe reaches a peer over NVLink only through an optional bridge; with no
    # GPU of the node showing one, the node has none fitted.
    text = "".join(f"GPU {n}: NVIDIA H100 PCIe (UUID: GPU-xxx)\n{ALL_INACTIVE}" for n in (0, 1))
    nvlink_run(run, text)
    check = nvlink_state(run)
    assert check.status == "pass"
    assert "bridge" in check.reason and "H100 PCIe" in check.reason


def test_l40s_without_nvlink_passes_saying_it_has_none(run: RunFolder) -> None:
    # CONSTRUCTED in the same real format: an L40S, which has no NVLink at all.
    text = "GPU 0: NVIDIA L40S (UUID: GPU-xxx)\n" + ALL_INACTIVE
    nvlink_run(run, text)
    check = nvlink_state(run)
    assert check.status == "pass"
    assert "the L40S has no NVLink" in check.reason


def test_v100_with_some_links_inactive_still_warns_without_a_board(run: RunFolder) -> None:
    # Real azhpc-diagnostics 73 output: GPU 3 has links 3 and 5 inactive, the rest up. With no
    # system known, a partly wired GPU is not a lost link for certain: warn, as before.
    text = (SMI / "nvlink-azhpc-diagnostics-73-v100-inactive.txt").read_text()
    nvlink_run(run, text)
    check = nvlink_state(run)
    assert check.status == "warn"
    assert "GPU3" in check.reason


def test_rtx4090_clocks_pass_names_the_power_cap_it_read_active(run: RunFolder) -> None:
    # Real -q, driver 535, 8x RTX 4090: one loaded GPU prints "SW Power Cap : Active", which
    # this check does not judge (the GPU holds its power limit); the pass must not say that no
    # reason is active.
    query(run, (SMI / "q-gpud-535.154.05-8x4090-sw-power-cap.txt").read_text())
    check = run.health()["health.clocks"]
    assert check.status == "pass"
    assert "(active: " in check.reason and "sw_power_cap" in check.reason
    assert "8 GPU(s)" in check.reason and "450 W" in check.reason
