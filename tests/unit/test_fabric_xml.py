"""The Fabric block of `nvidia-smi -q -x`, read from its real tag names.

The tags come from two published `-q -x` excerpts (tests/data/outputs/nvidia-smi/fabric-blocks,
README there: 1Panel-dev/1Panel#11910 and #10990): `<fabric>` holds `<state>`, `<status>`,
`<cliqueId>`, `<clusterUuid>` and `<health>` with snake_case children. No published XML shows a
filled block, so the tests fill those tags with the values of the published text blocks (the
GB200 ones of test_health_fabric) and hold the XML form to what the text form concludes: the
same fields, and a GPU out of its NVLink domain failing with the same status and reason.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from tests.run_folders import write_run_json, write_step
from tests.unit.test_health_fabric import (
    BLOCKS,
    IN_PROGRESS,
    INSUFFICIENT,
    OUTPUTS,
    UNHEALTHY,
    block,
    healthy_gb200_block,
    parsed_fabrics,
    q_with,
)

from gpuval.checks import judge_run
from gpuval.checks.model import Check
from gpuval.checks.thresholds import DEFAULTS
from gpuval.evidence import build_evidence
from gpuval.parsers import nvidia_smi
from gpuval.records.nvidia_smi import SmiFabric
from gpuval.runfolder import read_run_folder

EXCERPTS = ("xml-fabric-1panel-11910-identity-excerpt.xml",
            "xml-fabric-1panel-10990-l20-health-excerpt.xml")  # fmt: skip
RTX_XML = (OUTPUTS / "nvidia-smi" / "xml-netdata-rtx-4090-driver-535.xml").read_text()
RTX_FABRIC = re.compile(r"(?s)\n( *)<fabric>.*?</fabric>")


def published_tags() -> list[str]:
    """The Fabric block's tags as the excerpts print them, in order, each once."""
    text = "".join((BLOCKS / name).read_text() for name in EXCERPTS)
    return list(dict.fromkeys(re.findall(r"<([A-Za-z_]+)>", text)))


def _plain(label: str) -> str:
    return re.sub(r"[^a-z]", "", label.lower())


def xml_fabric(text_block: str, indent: str) -> str:
    """A `-q` text Fabric block as `-q -x` prints it: each field under its published tag, in
    the published order; a field the text block does not print is left out here too."""
    printed = {_plain(label): value.strip() for label, value in
               re.findall(r"(?m)^ *([^:\n]+?) *: (.*)$", text_block)}  # fmt: skip
    fabric, *fields = published_tags()
    health = fields.index("health")
    lines = [f"{indent}<{fabric}>"]
    for tag in fields[:health]:
        if _plain(tag) in printed:
            lines.append(f"{indent}    <{tag}>{printed[_plain(tag)]}</{tag}>")
    lines.append(f"{indent}    <health>")
    for tag in fields[health + 1 :]:
        if _plain(tag) in printed:
            lines.append(f"{indent}        <{tag}>{printed[_plain(tag)]}</{tag}>")
    lines += [f"{indent}    </health>", f"{indent}</{fabric}>"]
    return "\n" + "\n".join(lines)


def xml_with(text_blocks: list[str], name: str = "NVIDIA GB200") -> str:
    """The real RTX 4090 `-q -x`, its one GPU repeated per block, named `name`, each with the
    block's Fabric under the published tags."""
    head, rest = RTX_XML.split("<gpu id=", 1)
    gpu, tail = rest.split("</gpu>", 1)
    head = re.sub(r"<attached_gpus>\d+<", f"<attached_gpus>{len(text_blocks)}<", head)
    product = re.search(r"<product_name>(.*?)</product_name>", gpu)
    assert product is not None
    gpus = []
    for index, text_block in enumerate(text_blocks):
        one = RTX_FABRIC.sub(lambda m, b=text_block: xml_fabric(b, m.group(1)), gpu, count=1)
        one = one.replace(product.group(0), f"<product_name>{name}</product_name>")
        one = re.sub(r"<minor_number>\d+<", f"<minor_number>{index}<", one)
        gpus.append(f"<gpu id={one}</gpu>")
    return head + "\n    ".join(gpus) + tail


def xml_fabrics(text: str) -> list[SmiFabric | None]:
    run = nvidia_smi.parse(text, tool="nvidia-smi-xml").runs[0]
    return [gpu.health.fabric if gpu.health else None for gpu in run.gpus]


def test_the_excerpts_name_the_fabric_tags_the_parser_reads() -> None:
    assert published_tags() == [
        "fabric", "state", "status", "cliqueId", "clusterUuid", "health", "summary",
        "bandwidth", "route_recovery_in_progress", "route_unhealthy",
        "access_timeout_recovery", "incorrect_configuration",
    ]  # fmt: skip
    all_na = "\n".join(f"{label} : N/A" for label in ("State", "Status", "CliqueId",
                       "ClusterUUID", "Summary", "Bandwidth", "Route Recovery in progress",
                       "Route Unhealthy", "Access Timeout Recovery",
                       "Incorrect Configuration"))  # fmt: skip
    (fabric,) = xml_fabrics(xml_with([all_na], "NVIDIA L20"))
    assert fabric is not None and fabric.state is None and fabric.cluster_uuid is None
    assert set(fabric.health) == set(published_tags()[6:])
    assert all(value is None for value in fabric.health.values())


@pytest.mark.parametrize("name", [INSUFFICIENT, IN_PROGRESS, UNHEALTHY, "healthy GB200"])
def test_xml_reads_every_fabric_field_the_text_form_reads(name: str) -> None:
    text_block = healthy_gb200_block() if name == "healthy GB200" else block(name)
    (from_text,) = parsed_fabrics(q_with([text_block]))
    (from_xml,) = xml_fabrics(xml_with([text_block]))
    assert from_text is not None and from_xml is not None
    assert (from_xml.state, from_xml.status, from_xml.clique_id, from_xml.cluster_uuid) == (
        from_text.state, from_text.status, from_text.clique_id, from_text.cluster_uuid)  # fmt: skip
    # Partition Assigned (580's text) has no published XML tag: compared where both print.
    assert from_xml.health == {k: v for k, v in from_text.health.items() if k in from_xml.health}
    assert from_xml.health or not from_text.health


def _checks(tmp_path: Path, form: str, trays: dict[str, list[str]]) -> list[Check]:
    run = tmp_path / form
    for host, blocks in trays.items():
        if form == "xml":
            write_step(run, host, "nvidia-smi-query", xml_with(blocks), tool="nvidia-smi-xml",
                       phase="preflight", raw_ext="xml")  # fmt: skip
        else:
            write_step(run, host, "nvidia-smi-query", q_with(blocks), tool="nvidia-smi-q",
                       phase="preflight")  # fmt: skip
    write_run_json(run, "fabric-xml", list(trays), declared={
        h: {"gpu_model": "GB200", "nvl_domain": "nvl72-a"} for h in trays})  # fmt: skip
    return judge_run(build_evidence(read_run_folder(run)), DEFAULTS).checks


def test_a_gpu_out_of_the_fabric_fails_exactly_as_from_the_text_form(tmp_path: Path) -> None:
    healthy = healthy_gb200_block()
    broken = [healthy, healthy, block(INSUFFICIENT), healthy]
    trays = {"tray1": [healthy] * 4, "tray2": broken, "tray3": [healthy] * 4}
    wanted = {"health.nvlink.fabric", "racks.domain", "racks.trays"}
    judged = {form: sorted((c.host, c.check_id, c.status, c.reason)
                           for c in _checks(tmp_path, form, trays) if c.check_id in wanted)
              for form in ("text", "xml")}  # fmt: skip
    assert judged["xml"] == judged["text"]
    fabric = next(c for c in judged["xml"] if c[:2] == ("tray2", "health.nvlink.fabric"))
    assert fabric[2] == "fail" and "GPU2" in fabric[3] and "Insufficient Resources" in fabric[3]
    assert ("tray2", "racks.domain", "fail") in {c[:3] for c in judged["xml"]}
