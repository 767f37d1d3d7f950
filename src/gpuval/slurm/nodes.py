"""The nodes Slurm reports, from any of its forms: `scontrol show nodes --json` and
`sinfo --json` of Slurm 22.05 (state a word plus state_flags, features one string) and of 23.02
and later (data_parser v0.0.39+: state a list, features a list; sinfo groups nodes under
`sinfo[].nodes.nodes`), and the text of `scontrol show nodes` (one line per node or blocks).

Field names: https://slurm.schedmd.com/rest_api.html (v0.0.39+), https://slurm.schedmd.com/scontrol.html.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from typing import Any

from gpuval.parsers.slurm_text import SlurmOutputError as SlurmOutputError
from gpuval.parsers.slurm_text import expand_hostlist as expand_hostlist

# States (base or flag) in which a node takes no job, so it cannot be validated:
# https://slurm.schedmd.com/sinfo.html#SECTION_NODE-STATE-CODES
UNAVAILABLE_STATES = frozenset({
    "DOWN", "DRAIN", "DRAINED", "DRAINING", "FAIL", "FAILING", "FUTURE", "NOT_RESPONDING",
    "POWERED_DOWN", "POWER_DOWN", "POWERING_DOWN", "POWERING_UP", "MAINTENANCE",
    "REBOOT_REQUESTED", "REBOOT_ISSUED", "UNKNOWN", "INVALID", "INVALID_REG", "PLANNED",
})  # fmt: skip


@dataclass(frozen=True)
class SlurmNode:
    name: str  # NodeName: what scontrol and srun call it
    address: str  # NodeAddr: where Slurm (and Ansible) reach it
    hostname: str  # NodeHostName
    states: tuple[str, ...]  # base state first, then its flags, upper case: ("IDLE", "DRAIN")
    gpus: int  # GPUs of its GRES (gpu:8, gpu:h100:8(S:0-1), gpu:a:4,gpu:b:2)
    features: tuple[str, ...]
    partitions: tuple[str, ...]
    reason: str  # why it is drained or down ("" when none), without Slurm's [user@time]

    @property
    def available(self) -> bool:
        return not UNAVAILABLE_STATES.intersection(self.states)


def gres_gpus(gres: str) -> int:
    """The GPU count of a GRES string; 0 when it names none ("", "(null)", "N/A")."""
    total = 0
    for item in re.sub(r"\([^)]*\)", "", gres).split(","):
        parts = item.strip().split(":")
        if parts[0] != "gpu":
            continue
        total += int(parts[-1]) if len(parts) > 1 and parts[-1].isdigit() else 1
    return total


def _words(value: Any, source: str, key: str) -> tuple[str, ...]:
    """A list of strings, or one comma separated string (Slurm 22.05), as a tuple."""
    if isinstance(value, str):
        return tuple(word for word in value.split(",") if word)
    if isinstance(value, list) and all(isinstance(word, str) for word in value):
        return tuple(value)
    raise SlurmOutputError(f"{source}: key {key!r} is neither a string nor a list of strings")


def _states(entry: dict[str, Any], source: str, key: str) -> tuple[str, ...]:
    state = entry.get("state")
    if state is None:
        raise SlurmOutputError(f"{source}: no key '{key}.state'")
    words = _words(state, source, f"{key}.state")
    flags = _words(entry.get("state_flags") or [], source, f"{key}.state_flags")
    return tuple(word.upper() for word in (*words, *flags))


def _text(entry: dict[str, Any], name: str, source: str, key: str) -> str:
    value = entry.get(name, "")
    if isinstance(value, dict):  # sinfo 23.02+: reason {description, time, user}
        value = value.get("description", "")
    if not isinstance(value, str):
        raise SlurmOutputError(f"{source}: key '{key}.{name}' is not a string")
    return value


def _node_from_json(entry: Any, source: str, key: str) -> SlurmNode:
    if not isinstance(entry, dict):
        raise SlurmOutputError(f"{source}: {key} is not an object")
    name = entry.get("name")
    if not isinstance(name, str) or not name:
        raise SlurmOutputError(f"{source}: no key '{key}.name'")
    return SlurmNode(
        name=name,
        address=_text(entry, "address", source, key) or name,
        hostname=_text(entry, "hostname", source, key) or name,
        states=_states(entry, source, key),
        gpus=gres_gpus(_text(entry, "gres", source, key)),
        features=_words(entry.get("features") or "", source, f"{key}.features"),
        partitions=_words(entry.get("partitions") or [], source, f"{key}.partitions"),
        reason=_text(entry, "reason", source, key),
    )


def _object(value: Any, source: str, key: str) -> dict[str, Any]:
    """`value` when it is a JSON object; else an error naming the key."""
    if not isinstance(value, dict):
        raise SlurmOutputError(f"{source}: key {key!r} is not an object")
    return value


def _strings(value: Any, source: str, key: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise SlurmOutputError(f"{source}: key {key!r} is not a list of strings")
    return value


def _nodes_of_sinfo_entry(entry: Any, source: str, key: str) -> list[SlurmNode]:
    """sinfo --json of 23.02+: one entry per group of alike nodes (per node with -N)."""
    entry = _object(entry, source, key)
    nodes_field = _object(entry.get("nodes"), source, f"{key}.nodes")
    if "nodes" not in nodes_field:
        raise SlurmOutputError(f"{source}: no key '{key}.nodes.nodes'")
    node_field = _object(entry.get("node"), source, f"{key}.node")
    if "state" not in node_field:
        raise SlurmOutputError(f"{source}: no key '{key}.node.state'")
    states = tuple(s.upper() for s in _words(node_field["state"], source, f"{key}.node.state"))
    addresses = _strings(nodes_field.get("addresses") or [], source, f"{key}.nodes.addresses")
    hostnames = _strings(nodes_field.get("hostnames") or [], source, f"{key}.nodes.hostnames")
    features = _object(entry.get("features") or {}, source, f"{key}.features")
    gres = _object(entry.get("gres") or {}, source, f"{key}.gres")
    partition = _text(_object(entry.get("partition") or {}, source, f"{key}.partition"), "name",
                      source, f"{key}.partition")  # fmt: skip
    total_gres = gres.get("total", "")
    if not isinstance(total_gres, (str, int)):
        raise SlurmOutputError(f"{source}: key '{key}.gres.total' is not a string")
    nodes = []
    for index, name in enumerate(_words(nodes_field["nodes"], source, f"{key}.nodes.nodes")):
        nodes.append(
            SlurmNode(
                name=name,
                address=addresses[index] if index < len(addresses) else name,
                hostname=hostnames[index] if index < len(hostnames) else name,
                states=states,
                gpus=gres_gpus(str(total_gres)),
                features=_words(features.get("total", ""), source, f"{key}.features.total"),
                partitions=(partition,) if partition else (),
                reason=_text(entry, "reason", source, key),
            )
        )
    return nodes


def parse_nodes_json(text: str, source: str) -> list[SlurmNode]:
    """`scontrol show nodes --json` or `sinfo --json`, of Slurm 22.05 or later."""
    try:
        document = json.loads(text)
    except ValueError as problem:
        raise SlurmOutputError(f"{source}: not JSON ({problem})") from None
    if not isinstance(document, dict):
        raise SlurmOutputError(f"{source}: not a JSON object")
    for error in document.get("errors") or []:
        raise SlurmOutputError(f"{source}: Slurm reports an error: {error}")
    if isinstance(document.get("sinfo"), list):
        merged: dict[str, SlurmNode] = {}
        for index, entry in enumerate(document["sinfo"]):
            for node in _nodes_of_sinfo_entry(entry, source, f"sinfo[{index}]"):
                known = merged.get(node.name)  # a node of several partitions comes once each
                if known is not None:
                    node = replace(known, partitions=known.partitions + node.partitions)
                merged[node.name] = node
        return list(merged.values())
    nodes = document.get("nodes")
    if not isinstance(nodes, list):
        raise SlurmOutputError(f"{source}: no key 'nodes' (nor 'sinfo') holding a list")
    return [_node_from_json(entry, source, f"nodes[{i}]") for i, entry in enumerate(nodes)]


_FIELD = re.compile(r"(?:^|\s)([A-Za-z][A-Za-z_]*)=(\S*)")
_REASON_BY = re.compile(r"\s*\[[^\]]*@[^\]]*\]\s*$")  # Slurm's " [user@2026-11-26T05:00:00]"


def _fields(text: str) -> dict[str, str]:
    """Key=value fields; Reason= takes the rest of its line (it may hold spaces)."""
    found: dict[str, str] = {}
    for line in text.splitlines():
        head, marker, reason = line.partition("Reason=")
        if marker and (not head or head[-1].isspace()):
            found["Reason"] = _REASON_BY.sub("", reason).strip()
            line = head
        found.update(_FIELD.findall(line))
    return found


def parse_nodes_text(text: str, source: str) -> list[SlurmNode]:
    """`scontrol show nodes` text: one node per line (--oneliner) or blocks of lines."""
    blocks = re.split(r"\n(?=NodeName=)", text.strip())
    nodes = []
    for number, block in enumerate(blocks, start=1):
        if not block.strip():
            continue
        fields = _fields(block)
        if "NodeName" not in fields or "State" not in fields:
            missing = "NodeName" if "NodeName" not in fields else "State"
            raise SlurmOutputError(f"{source}: node {number} has no {missing}= field")
        name = fields["NodeName"]
        features = fields.get("AvailableFeatures", "").replace("(null)", "")
        nodes.append(
            SlurmNode(
                name=name,
                address=fields.get("NodeAddr") or name,
                hostname=fields.get("NodeHostName") or name,
                states=tuple(
                    s for s in fields["State"].upper().rstrip("*~#!%$@^-").split("+") if s
                ),
                gpus=gres_gpus(fields.get("Gres", "")),
                features=_words(features, source, "AvailableFeatures"),
                partitions=_words(fields.get("Partitions", ""), source, "Partitions"),
                reason=fields.get("Reason", ""),
            )
        )
    return nodes


def parse_nodes(text: str, source: str) -> list[SlurmNode]:
    """Either form, told apart by its first character."""
    if text.lstrip().startswith("{"):
        return parse_nodes_json(text, source)
    return parse_nodes_text(text, source)


def host_variables(node: SlurmNode) -> dict[str, object]:
    """The Ansible host variables of a node (the slurm inventory plugin sets them)."""
    return {
        "ansible_host": node.address,
        "gpuval_slurm_node": node.name,
        "gpuval_gpus_per_node": node.gpus,
        "slurm_state": "+".join(node.states),
        "slurm_features": list(node.features),
        "slurm_partitions": list(node.partitions),
        "slurm_reason": node.reason,
        "slurm_hostname": node.hostname,
    }
