"""How the `nvidia-smi -q` text reader places each line in its tree: by indentation, the
first of a repeated label winning, a repeated section adding to the first, a label's own "/"
never read as a section path, the same line read anew in every section it stands in, and a
value printed N/A leaving the field to the next place it may be printed."""

from __future__ import annotations

from gpuval.parsers import nvidia_smi
from gpuval.records.nvidia_smi import SmiGpu, SmiHealth

# Two GPUs printed alike line for line, except where noted: the reader remembers lines.
_GPU = """\
GPU 00000000:{bus}.0
    Product Name                          : NVIDIA H100 80GB HBM3
    Serial Number                         : N/A
    PCI
        Bus Id                            : 00000000:{bus}.0
        GPU Link Info
            PCIe Generation
                Max                       : 5
                Current                   : 5
            Link Width
                Max                       : 16x
{width}
    ECC Errors
        Volatile
            Single Bit/Total              : 7
            SRAM Correctable              : 0
            SRAM Correctable              : 9
            Double Bit
                Total                     : 2
    GPU Power Readings
        Power Draw                        : N/A
        Instantaneous Power Draw          : 70.00 W
    ECC Errors
        Volatile
            DRAM Correctable              : 3
"""
_TEXT = (
    "==============NVSMI LOG==============\n\n"
    "Driver Version                            : 580.159.04\n"
    "Attached GPUs                             : 2\n"
    + _GPU.format(bus="18:00", width="                Current                   : 16x")
    # The line that is PCIe Generation's Current above, here under Link Width.
    + _GPU.format(bus="2A:00", width="                Current                   : 5")
)


def _gpus() -> list[SmiGpu]:
    result = nvidia_smi.parse(_TEXT, tool=nvidia_smi.QUERY)
    assert result.errors == [] and result.warnings == []
    (run,) = result.runs
    return run.gpus


def _health(gpu: SmiGpu) -> SmiHealth:
    assert gpu.health is not None
    return gpu.health


def test_a_line_is_placed_in_the_section_it_stands_in_for_every_gpu() -> None:
    first, second = _gpus()
    assert (first.pci_bus_id, second.pci_bus_id) == ("00000000:18:00.0", "00000000:2A:00.0")
    assert first.pcie is not None and second.pcie is not None
    assert (first.pcie.gen_current, first.pcie.width_current) == (5, 16)
    assert (second.pcie.gen_current, second.pcie.width_current) == (5, 5)
    assert first.name == second.name == "NVIDIA H100 80GB HBM3"


def test_first_repeated_label_wins_and_a_repeated_section_adds_to_the_first() -> None:
    for gpu in _gpus():
        volatile = _health(gpu).ecc_volatile
        assert (volatile.sram_correctable, volatile.dram_correctable) == (0, 3)
        assert volatile.uncorrected_total == 2


def test_a_slash_in_a_label_is_no_section_path() -> None:
    for gpu in _gpus():
        # "Single Bit/Total" is one label of Volatile, not Total under a Single Bit section.
        assert _health(gpu).ecc_volatile.corrected_total is None


def test_a_value_printed_not_available_leaves_the_field_to_its_next_path() -> None:
    for gpu in _gpus():
        health = _health(gpu)
        assert health.serial is None
        assert (gpu.power_draw_w, health.power.draw_w, health.power.instant_draw_w) == (
            70.0,
            None,
            70.0,
        )
