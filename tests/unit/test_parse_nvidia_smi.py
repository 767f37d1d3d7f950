"""nvidia-smi parsers (table, -q -x XML, --query-gpu csv, nvlink -s), on real published outputs."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuval.parsers import nvidia_smi
from gpuval.records.base import ParseResult
from gpuval.records.nvidia_smi import NvidiaSmiRun, PcieLink
from gpuval.schemas.validation import validate

DATA = Path(__file__).resolve().parents[1] / "data" / "outputs" / "nvidia-smi"
FILES = sorted(p for p in DATA.glob("*.txt") if "topo" not in p.name)
TOOL_BY_PREFIX = {
    "csv": "nvidia-smi-csv",
    "q-": "nvidia-smi-q",
    "nvlink": "nvidia-smi-nvlink",
    "xml": "nvidia-smi-xml",
    "nvidia-smi": "nvidia-smi",
    "shared-lambda": "nvidia-smi",
}


def parse_file(name: str) -> tuple[ParseResult, NvidiaSmiRun]:
    result = nvidia_smi.parse((DATA / name).read_text(), source=name)
    assert len(result.runs) == 1
    return result, result.runs[0]


def expected_tool(path: Path) -> str:
    return next(tool for prefix, tool in TOOL_BY_PREFIX.items() if path.name.startswith(prefix))


def test_collapsed_driver_570_table() -> None:
    result, run = parse_file("shared-lambda-4xH100-nvidia-smi-collapsed.txt")
    assert result.tool == "nvidia-smi"
    assert (run.driver_version, run.cuda_version) == ("570.148.08", "12.8")
    assert [g.index for g in run.gpus] == [0, 1, 2, 3]
    gpu = run.gpus[2]
    assert gpu.name == "NVIDIA H100 80GB HBM3"
    assert gpu.pci_bus_id == "00000000:08:00.0"
    assert gpu.persistence_mode == "On"
    assert gpu.ecc_volatile_uncorrected == "0"
    assert gpu.mig_mode == "Disabled"
    assert (gpu.fan_percent, gpu.temperature_c, gpu.performance_state) == (None, 29.0, "P0")
    assert (gpu.power_draw_w, gpu.power_limit_w) == (70.0, 700.0)
    assert (gpu.memory_used_mib, gpu.memory_total_mib) == (0.0, 81559.0)
    assert (gpu.utilization_gpu_percent, gpu.compute_mode) == (0.0, "Default")
    assert gpu.pcie is None and gpu.nvlinks is None
    assert result.warnings == []


def test_driver_418_two_row_table_and_old_process_rows() -> None:
    _, run = parse_file("nvidia-smi-system76-76-418-old-table-processes.txt")
    assert run.timestamp == "Fri May 10 14:25:45 2019"
    assert (run.driver_version, run.cuda_version) == ("418.56", "10.1")
    gpu = run.gpus[0]
    assert gpu.name == "GeForce GTX 105..."  # truncated by nvidia-smi itself
    assert (gpu.persistence_mode, gpu.ecc_volatile_uncorrected, gpu.mig_mode) == ("Off", None, None)
    assert (gpu.power_draw_w, gpu.power_limit_w, gpu.memory_used_mib) == (None, None, 327.0)
    assert [(p.gpu, p.pid, p.type, p.name, p.memory_mib) for p in run.processes] == [
        (0, 1906, "G", "/usr/lib/xorg/Xorg", 144.0),
        (0, 2016, "G", "/usr/bin/gnome-shell", 94.0),
    ]


def test_driver_550_table_with_fan_and_cuda_not_available() -> None:
    _, run = parse_file("nvidia-smi-pve-14-550-table.txt")
    assert (run.driver_version, run.cuda_version) == ("550.54.10", None)
    gpu = run.gpus[0]
    assert (gpu.fan_percent, gpu.temperature_c, gpu.power_draw_w, gpu.power_limit_w) == (
        54.0,
        59.0,
        53.0,
        120.0,
    )
    assert (gpu.memory_used_mib, gpu.memory_total_mib, gpu.utilization_gpu_percent) == (
        2079.0,
        6144.0,
        15.0,
    )


# Layout of drivers 470+ with MIG enabled (written for this test, after that layout).
MIG_TABLE = """\
+-----------------------------------------------------------------------------+
| NVIDIA-SMI 470.57.02    Driver Version: 470.57.02    CUDA Version: 11.4     |
|-------------------------------+----------------------+----------------------+
| GPU  Name        Persistence-M| Bus-Id        Disp.A | Volatile Uncorr. ECC |
| Fan  Temp  Perf  Pwr:Usage/Cap|         Memory-Usage | GPU-Util  Compute M. |
|                               |                      |               MIG M. |
|===============================+======================+======================|
|   0  NVIDIA A100-SXM...  On   | 00000000:07:00.0 Off |                    0 |
| N/A   33C    P0    61W / 400W |     19MiB / 40536MiB |     N/A      Default |
|                               |                      |              Enabled |
+-------------------------------+----------------------+----------------------+

+-----------------------------------------------------------------------------+
| MIG devices:                                                                |
+------------------+----------------------+-----------+-----------------------+
| GPU  GI  CI  MIG |         Memory-Usage |        Vol|         Shared        |
|      ID  ID  Dev |           BAR1-Usage | SM     Unc| CE  ENC  DEC  OFA  JPG|
|                  |                      |        ECC|                       |
|==================+======================+===========+=======================|
|  0    1   0   0  |     13MiB / 20096MiB | 42      0 |  3   0    2    0    0 |
|                  |      0MiB / 32767MiB |           |                       |
+------------------+----------------------+-----------+-----------------------+

+-----------------------------------------------------------------------------+
| Processes:                                                                  |
|  GPU   GI   CI        PID   Type   Process name                  GPU Memory |
|        ID   ID                                                   Usage      |
|=============================================================================|
|    0    1    0      41211      C   python                           1234MiB |
+-----------------------------------------------------------------------------+
"""


def test_mig_section_and_gi_ci_process_rows() -> None:
    result = nvidia_smi.parse(MIG_TABLE)
    run = result.runs[0]
    assert run.gpus[0].mig_mode == "Enabled"
    assert run.gpus[0].utilization_gpu_percent is None
    device = run.mig_devices[0]
    assert (device.gpu, device.gi, device.ci, device.mig_dev) == (0, 1, 0, 0)
    assert (device.memory_used_mib, device.memory_total_mib) == (13.0, 20096.0)
    process = run.processes[0]
    assert (process.gpu, process.gi, process.ci, process.pid, process.type) == (
        0,
        "1",
        "0",
        41211,
        "C",
    )
    assert (process.name, process.memory_mib) == ("python", 1234.0)
    assert result.warnings == []


# Element names as in NVIDIA's nvsmi DTD; no real published dump with the link block was found.
XML_TWO_ERAS = """<?xml version="1.0" ?>
<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v12.dtd">
<nvidia_smi_log>
  <driver_version>535.129.03</driver_version>
  <cuda_version>12.2</cuda_version>
  <attached_gpus>2</attached_gpus>
  <gpu id="00000000:18:00.0">
    <product_name>NVIDIA H100 80GB HBM3</product_name>
    <persistence_mode>Enabled</persistence_mode>
    <mig_mode><current_mig>Disabled</current_mig></mig_mode>
    <uuid>GPU-0a1b</uuid>
    <pci>
      <pci_bus_id>00000000:18:00.0</pci_bus_id>
      <pci_gpu_link_info>
        <pcie_gen>
          <max_link_gen>5</max_link_gen>
          <current_link_gen>5</current_link_gen>
          <device_current_link_gen>5</device_current_link_gen>
          <max_device_link_gen>5</max_device_link_gen>
          <max_host_link_gen>5</max_host_link_gen>
        </pcie_gen>
        <link_widths>
          <max_link_width>16x</max_link_width>
          <current_link_width>8x</current_link_width>
        </link_widths>
      </pci_gpu_link_info>
    </pci>
    <fb_memory_usage><total>81559 MiB</total><used>1 MiB</used></fb_memory_usage>
    <ecc_mode><current_ecc>Enabled</current_ecc></ecc_mode>
    <gpu_power_readings>
      <power_draw>N/A</power_draw>
      <instant_power_draw>71.22 W</instant_power_draw>
      <current_power_limit>700.00 W</current_power_limit>
    </gpu_power_readings>
  </gpu>
  <gpu id="00000000:3B:00.0">
    <product_name>Tesla V100-SXM2-16GB</product_name>
    <pci>
      <pci_gpu_link_info>
        <pcie_gen><max_link_gen>3</max_link_gen><current_link_gen>1</current_link_gen></pcie_gen>
        <link_widths><max_link_width>16x</max_link_width><current_link_width>16x</current_link_width></link_widths>
      </pci_gpu_link_info>
    </pci>
    <power_readings>
      <power_draw>43.10 W</power_draw><power_limit>300.00 W</power_limit>
    </power_readings>
  </gpu>
</nvidia_smi_log>
"""


def test_xml_pcie_link_and_both_power_layouts() -> None:
    result = nvidia_smi.parse(XML_TWO_ERAS)
    assert result.tool == "nvidia-smi-xml" and result.warnings == [] and result.errors == []
    run = result.runs[0]
    assert (run.driver_version, run.cuda_version, run.attached_gpus) == ("535.129.03", "12.2", 2)
    h100, v100 = run.gpus
    assert h100.pcie == PcieLink(
        gen_current=5, gen_max=5, width_current=8, width_max=16, gen_device_max=5, gen_host_max=5
    )
    assert (h100.power_draw_w, h100.power_limit_w) == (71.22, 700.0)
    assert (h100.ecc_mode, h100.mig_mode, h100.memory_total_mib) == ("Enabled", "Disabled", 81559.0)
    assert v100.pcie == PcieLink(gen_current=1, gen_max=3, width_current=16, width_max=16)
    assert (v100.index, v100.pci_bus_id, v100.power_draw_w) == (1, "00000000:3B:00.0", 43.1)


def test_truncated_real_xml_keeps_what_came_before() -> None:
    result, run = parse_file("xml-cpu-x-115-gtx1660ti-truncated.txt")
    assert (run.driver_version, run.cuda_version, run.attached_gpus) == ("430.64", "10.1", 1)
    gpu = run.gpus[0]
    assert (gpu.name, gpu.pci_bus_id) == ("GeForce GTX 1660 Ti", "00000000:29:00.0")
    assert gpu.uuid == "GPU-e189fb8d-1627-f8f0-2ba3-c0585a8e9e85"
    assert gpu.pcie is None
    assert [e.line for e in result.errors] == [23]


def test_csv_pcie_link_columns() -> None:
    result, run = parse_file("csv-l40s-8gpu-pcie-link.txt")
    assert result.tool == "nvidia-smi-csv"
    assert [g.index for g in run.gpus] == list(range(8))
    assert run.gpus[7].pcie == PcieLink(gen_current=1, gen_max=4, width_current=16, width_max=16)
    assert run.csv_columns[1] == "pcie.link.gen.current"


def test_csv_names_and_a_narrowed_link() -> None:
    _, run = parse_file("csv-2x5060ti-index-name-pcie.txt")
    assert run.gpus[1].name == "NVIDIA GeForce RTX 5060 Ti"
    assert run.gpus[1].pcie is not None and run.gpus[1].pcie.width_max == 16
    assert run.gpus[0].fields["pcie.link.width.current"] == "8"


def test_csv_with_units_and_not_available_values() -> None:
    text = (
        "name, pci.bus_id, driver_version, memory.total [MiB], power.draw [W], "
        "pcie.link.gen.gpumax, pcie.link.gen.hostmax\n"
        "NVIDIA H100 80GB HBM3, 00000000:18:00.0, 550.54.15, 81559 MiB, [N/A], 5, 4\n"
        "NVIDIA H100 80GB HBM3, 00000000:2A:00.0, 550.54.15, 81559 MiB, 72.10 W\n"
    )
    result = nvidia_smi.parse(text)
    run = result.runs[0]
    assert run.driver_version == "550.54.15"
    assert run.csv_columns[3] == "memory.total"
    gpu = run.gpus[0]
    assert (gpu.memory_total_mib, gpu.power_draw_w, gpu.fields["power.draw"]) == (
        81559.0,
        None,
        None,
    )
    assert gpu.pcie is not None and (gpu.pcie.gen_device_max, gpu.pcie.gen_host_max) == (5, 4)
    assert len(run.gpus) == 1 and [w.line for w in result.warnings] == [3]


def test_csv_noheader_takes_columns_from_the_command_line() -> None:
    text = (
        "$ nvidia-smi --query-gpu=index,pcie.link.gen.current,pcie.link.width.current "
        "--format=csv,noheader,nounits\n"
        "0, 4, 16\n"
        "1, 4, 8\n"
    )
    run = nvidia_smi.parse(text, tool="nvidia-smi-csv").runs[0]
    assert [(g.index, g.pcie.width_current if g.pcie else None) for g in run.gpus] == [
        (0, 16),
        (1, 8),
    ]


def test_csv_noheader_without_command_is_an_error() -> None:
    result = nvidia_smi.parse("0, 4, 16\n", tool="nvidia-smi-csv")
    assert result.runs == [] and result.errors


def test_nvlink_inactive_links_and_elision() -> None:
    result, run = parse_file("nvlink-azhpc-diagnostics-73-v100-inactive.txt")
    gpu = run.gpus[0]
    assert (gpu.index, gpu.name) == (3, "Tesla V100-SXM2-32GB")
    assert gpu.nvlinks is not None
    assert [(n.link, n.speed_gbps, n.state) for n in gpu.nvlinks][2:4] == [
        (2, 25.781, "active"),
        (3, None, "inactive"),
    ]
    assert [w.line for w in result.warnings] == [2]


def test_nvlink_gb200_eighteen_links() -> None:
    _, run = parse_file("nvlink-k8s-test-infra-371-gb200-elided.txt")
    first = run.gpus[0]
    assert first.uuid == "GPU-d1b93026-6d5b-03bd-3a71-f85b47a61bde"
    assert first.nvlinks is not None and len(first.nvlinks) == 18
    assert {n.speed_gbps for n in first.nvlinks} == {53.125}
    assert run.gpus[1].nvlinks is not None and len(run.gpus[1].nvlinks) == 2


@pytest.mark.parametrize("tool", nvidia_smi.TOOLS)
@pytest.mark.parametrize("text", ["", "garbage\n", "| 0 x | y | z |\n", "<nvidia_smi_log><gpu>"])
def test_never_raises(tool: str, text: str) -> None:
    result = nvidia_smi.parse(text, tool=tool)
    validate(result.to_dict(), "parse-result")


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_every_real_output_is_detected_and_validates(path: Path) -> None:
    text = path.read_text()
    found = nvidia_smi.detect(text)
    assert found is not None and found[0] == expected_tool(path)
    validate(nvidia_smi.parse(text, source=str(path)).to_dict(), "parse-result")


# Driver 319 layout (2013): no persistence column after the name, memory labelled "MB".
DRIVER_319_TABLE = """\
+------------------------------------------------------+
| NVIDIA-SMI 319.37     Driver Version: 319.37         |
|-------------------------------+----------------------+----------------------+
| GPU  Name                     | Bus-Id        Disp.  | Volatile Uncorr. ECC |
| Fan  Temp  Perf  Pwr:Usage/Cap|         Memory-Usage | GPU-Util  Compute M. |
|===============================+======================+======================|
|   0  Tesla K20m               | 0000:02:00.0     Off |                    0 |
| N/A   31C    P0    48W / 225W |       11MB /  4799MB |      0%      Default |
+-------------------------------+----------------------+----------------------+
"""


def test_driver_319_table_without_persistence_column() -> None:
    result = nvidia_smi.parse(DRIVER_319_TABLE)
    gpu = result.runs[0].gpus[0]
    assert (gpu.name, gpu.persistence_mode, gpu.pci_bus_id) == ("Tesla K20m", None, "0000:02:00.0")
    assert (gpu.memory_used_mib, gpu.memory_total_mib, gpu.power_limit_w) == (11.0, 4799.0, 225.0)
    assert result.runs[0].driver_version == "319.37" and result.warnings == []


def test_tables_one_after_another_are_separate_runs() -> None:
    text = (DATA / "nvidia-smi-pve-14-550-table.txt").read_text()
    result = nvidia_smi.parse(text + text.replace("Thu Apr 24 10:35:58", "Thu Apr 24 10:36:03"))
    assert [run.timestamp for run in result.runs] == [
        "Thu Apr 24 10:35:58 2025",
        "Thu Apr 24 10:36:03 2025",
    ]
    assert [len(run.gpus) for run in result.runs] == [1, 1]
