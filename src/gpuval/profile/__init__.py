"""Acceptance profiles: YAML files (schema: profile.schema.json) saying what a run measures and
how it is judged - the measuring phases and benchmarks, message sizes, repeats, thresholds
(fractions of the peak, of a baseline), the baseline rules and the health level.

Shipped profiles live in `shipped/` (`gpuval profile list`); `--profile` also takes a file. A
run without a profile is judged with the shipped profile whose hardware matches what the nodes
showed, else with one derived from their topology (defaults, named after the hardware).

A bad profile is a ProfileError naming the file, the line, the key and what it expects.
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import yaml
from jsonschema.exceptions import ValidationError

from gpuval.catalog import find_system, identify_gpu
from gpuval.checks.baseline import DEFAULT_RULES, Rule
from gpuval.checks.thresholds import DEFAULTS, Thresholds, threshold_problems
from gpuval.files.slugs import is_slug
from gpuval.schemas.validation import validator

if TYPE_CHECKING:
    from gpuval.evidence import HostEvidence

SUFFIXES = (".yaml", ".yml")
PAIR_KINDS = ("iperf3", "allreduce", "nccl")


class ProfileError(ValueError):
    """A profile that cannot be used; the message names the file, line and key."""


def _threshold_values(document: dict[str, Any]) -> dict[str, Any]:
    """The profile's thresholds as the judge holds them (YAML lists of codes become tuples)."""
    return {
        key: tuple(value) if isinstance(value, list) else value
        for key, value in document.get("thresholds", {}).items()
    }


@dataclass(frozen=True)
class Hardware:
    gpu_model: str | None = None
    gpus_per_node: int | None = None
    system: str | None = None
    interconnect: str | None = None  # "nvlink" or "pcie"


@dataclass(frozen=True)
class Profile:
    name: str
    description: str
    origin: str  # the file it was read from, or how it was derived
    document: dict[str, Any]  # as written, validated

    @property
    def hardware(self) -> Hardware:
        return Hardware(**self.document.get("hardware", {}))

    @property
    def phases(self) -> tuple[str, ...]:
        return tuple(self.document["phases"])

    @property
    def thresholds(self) -> Thresholds:
        """The judge's thresholds. The pair tries are no threshold: the profile sets
        bench_pairs_max_tries (ansible_vars), run.json records it, the judge reads it there."""
        return dataclasses.replace(DEFAULTS, **_threshold_values(self.document))

    @property
    def rules(self) -> tuple[Rule, ...]:
        section = self.document.get("baseline", {})
        written = tuple(Rule.from_document(r) for r in section.get("rules", []))
        return (DEFAULT_RULES if section.get("default_rules", True) else ()) + written

    @property
    def baseline_name(self) -> str | None:
        name = self.document.get("baseline", {}).get("name")
        return str(name) if name else None

    @property
    def health_level(self) -> str | None:
        level = self.document.get("health", {}).get("level")
        return None if level in (None, False, "off") else str(level)

    def ansible_vars(self) -> dict[str, Any]:
        """The role variables that make the playbook run what the profile says. A phase left
        out runs nothing (its benchmark lists are emptied), so run.json expects no step of it."""
        doc = self.document
        phases = set(self.phases)
        variables: dict[str, Any] = {}
        intranode = doc.get("intranode", {})
        if "intranode" not in phases:
            variables |= {"bench_intranode_collectives": [], "bench_intranode_p2p": False}
        else:
            if "collectives" in intranode:
                variables["bench_intranode_collectives"] = intranode["collectives"]
            if "p2p" in intranode:
                variables["bench_intranode_p2p"] = intranode["p2p"]
        internode = doc.get("internode", {})
        if "internode" not in phases:
            variables["bench_internode_collectives"] = []
        elif "collectives" in internode:
            variables["bench_internode_collectives"] = internode["collectives"]
        pairs = doc.get("pairs", {})
        kinds = (
            set(pairs.get("kinds", ["iperf3", "allreduce", "nccl"])) if "pairs" in phases else set()
        )
        variables |= {
            "bench_pairs_iperf3": "iperf3" in kinds,
            "bench_pairs_allreduce": "auto" if "allreduce" in kinds else "false",
            "bench_pairs_nccl": "auto" if "nccl" in kinds else "false",
        }
        for key, variable in (
            ("mode", "bench_pairs_mode"),
            ("iperf3_seconds", "bench_pairs_iperf3_seconds"),
        ):
            if key in pairs:
                variables[variable] = pairs[key]
        sizes = doc.get("message_sizes", {})
        repeats = doc.get("repeats", {})
        for role in ("bench_intranode", "bench_internode"):
            for key in ("min_bytes", "max_bytes", "step_factor"):
                if key in sizes:
                    variables[f"{role}_{key}"] = sizes[key]
            for key, suffix in (("iterations", "iters"), ("warmup", "warmup_iters")):
                if key in repeats:
                    variables[f"{role}_{suffix}"] = repeats[key]
        for key in ("min_bytes", "max_bytes"):
            if key in sizes:
                variables[f"bench_pairs_nccl_{key}"] = sizes[key]
        if "pair_max_tries" in repeats:
            variables["bench_pairs_max_tries"] = repeats["pair_max_tries"]
        if self.hardware.gpus_per_node:
            variables["gpuval_gpus_per_node"] = self.hardware.gpus_per_node
        if self.health_level:
            variables["health_level"] = self.health_level
        return variables

    def record(self) -> dict[str, Any]:
        """What the run folder keeps (profile.json): the profile as judged, and where from."""
        return {"name": self.name, "origin": self.origin, "profile": self.document}


# ----------------------------------------------------------------------------- reading


def _shipped_dir() -> Traversable:
    return resources.files("gpuval.profile").joinpath("shipped")


def shipped_names() -> list[str]:
    return sorted(
        entry.name.rsplit(".", 1)[0]
        for entry in _shipped_dir().iterdir()
        if entry.name.endswith(SUFFIXES)
    )


def _node_at(root: yaml.Node, path: Iterable[Any]) -> yaml.Node:
    """The deepest YAML node along `path` (keys and list indices), for its line."""
    node = root
    for part in path:
        if isinstance(node, yaml.MappingNode):
            match = [v for k, v in node.value if k.value == part]
            if not match:
                return node
            node = match[0]
        elif (
            isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value)
        ):
            node = node.value[part]
        else:
            return node
    return node


def _key_name(path: Iterable[Any]) -> str:
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else f".{part}" if text else str(part)
    return text or "<top level>"


def _explain(problem: ValidationError) -> tuple[list[Any], str]:
    """(the key path, what is wrong and what is expected) of one schema violation."""
    path = list(problem.absolute_path)
    schema = problem.schema if isinstance(problem.schema, dict) else {}
    if problem.validator == "additionalProperties":
        known = sorted(schema.get("properties", {}))
        unknown = sorted(set(cast(dict[str, Any], problem.instance)) - set(known))
        return [*path, unknown[0]], f"unknown key; known keys here: {', '.join(known)}"
    if problem.validator == "required":
        missing = str(problem.message).split("'")[1]
        described = schema.get("properties", {}).get(missing, {}).get("description", "")
        return path, f"missing key {missing!r}" + (f" ({described})" if described else "")
    if problem.validator == "anyOf":
        options = cast(list[dict[str, Any]], problem.validator_value)
        needed = [key for option in options for key in option.get("required", [])]
        return path, f"needs at least one of {', '.join(needed)}"
    expected = schema.get("description")
    wrong = f"{problem.instance!r} is not allowed: {problem.message}"
    return path, wrong + (f"; expects {expected}" if expected else "")


def _semantic_problems(document: dict[str, Any]) -> list[tuple[list[Any], str]]:
    """What the schema cannot say: catalog names, ordered bands, ordered sizes."""
    found: list[tuple[list[Any], str]] = []
    hardware = document.get("hardware", {})
    if "gpu_model" in hardware and identify_gpu(hardware["gpu_model"]) is None:
        model = hardware["gpu_model"]
        found.append(
            (["hardware", "gpu_model"], f'{model!r} is not a catalog GPU model ("H100 SXM")')
        )
    if "system" in hardware and find_system(hardware["system"]) is None:
        system = hardware["system"]
        found.append(
            (["hardware", "system"], f'{system!r} is not a catalog system ("HGX A100 8-GPU")')
        )
    found += [
        (["thresholds", key], what)
        for key, what in threshold_problems(document.get("thresholds", {}))
    ]
    for index, rule in enumerate(document.get("baseline", {}).get("rules", [])):
        found += [
            (
                ["baseline", "rules", index, key],
                f"{value!r} is not allowed: a bound is a finite number",
            )
            for key, value in rule.items()
            if isinstance(value, float) and not math.isfinite(value)
        ]
    sizes = document.get("message_sizes", {})
    if size_bytes(sizes.get("min_bytes", "1")) > size_bytes(sizes.get("max_bytes", "1G")):
        found.append((["message_sizes", "min_bytes"], "must not exceed max_bytes"))
    return found


def size_bytes(text: str) -> int:
    """nccl-tests' size notation: "8" -> 8, "256M" -> 268435456, "16G" -> 17179869184."""
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1], 1)
    return int(text.rstrip("KMG")) * scale


def parse_profile(text: str, origin: str) -> Profile:
    """A profile from YAML text; ProfileError naming `origin`, the line and the key."""
    try:
        loader = yaml.SafeLoader(text)
        try:
            root = loader.get_single_node()
            document = loader.construct_document(root) if root is not None else None
        finally:
            loader.dispose()
    except yaml.YAMLError as problem:
        mark = getattr(problem, "problem_mark", None)
        where = f"{origin}:{mark.line + 1}" if mark is not None else origin
        raise ProfileError(
            f"{where}: not valid YAML: {getattr(problem, 'problem', problem)}"
        ) from problem
    if root is None or not isinstance(document, dict):
        raise ProfileError(
            f"{origin}: a profile is a YAML mapping (name, description, phases, ...)"
        )
    problems = [_explain(p) for p in validator("profile").iter_errors(document)]
    if not problems:
        problems = _semantic_problems(document)
    if problems:
        lines = [
            f"{origin}:{_node_at(root, path).start_mark.line + 1}: key {_key_name(path)}: {what}"
            for path, what in sorted(problems, key=lambda p: _node_at(root, p[0]).start_mark.line)
        ]
        raise ProfileError("\n".join(lines))
    return Profile(str(document["name"]), str(document["description"]), origin, document)


def load_profile(reference: str) -> Profile:
    """A shipped profile by name, or a YAML file by path."""
    path = Path(reference)
    if path.suffix in SUFFIXES or path.exists():
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as problem:
            raise ProfileError(f"{path}: cannot read: {problem.strerror or problem}") from problem
        except UnicodeDecodeError as problem:
            line = problem.object[: problem.start].count(b"\n") + 1
            raise ProfileError(
                f"{path}:{line}: not UTF-8 text; save the profile as UTF-8"
            ) from problem
        return parse_profile(text, str(path))
    # a shipped name names a file of shipped/: only a slug, so it cannot reach outside it
    entry = _shipped_dir().joinpath(f"{reference}.yaml")
    if not is_slug(reference) or not entry.is_file():
        raise ProfileError(
            f"no profile {reference!r}: name a shipped one ({', '.join(shipped_names())}) "
            "or a YAML file"
        )
    return parse_profile(entry.read_text(encoding="utf-8"), f"shipped:{reference}.yaml")


def shipped_profiles() -> list[Profile]:
    return [load_profile(name) for name in shipped_names()]


# ------------------------------------------------------------------ choosing one for a run


@dataclass(frozen=True)
class NodeShape:
    """What the judge saw of one node: its catalog GPU model, GPU count and interconnect."""

    gpu_model: str | None
    gpu_count: int | None
    interconnect: str | None  # "nvlink" when any GPU pair is an NV# cell, "pcie" otherwise


def node_shape(host: HostEvidence) -> NodeShape:
    """A host's shape from its evidence: model judged against, GPU count, and NVLink when any
    GPU pair of its `nvidia-smi topo -m` is an NV# cell (PCIe otherwise; None: no matrix)."""
    interconnect = None
    if host.topology is not None:
        cells = [cell for row in host.topology.links for cell in row]
        interconnect = "nvlink" if any(c.upper().startswith("NV") for c in cells) else "pcie"
    return NodeShape(host.model.model if host.model else None, host.gpu_count, interconnect)


def fits(profile: Profile, shape: NodeShape) -> bool:
    """Whether a node of this shape is what the profile is meant for."""
    return _fits(profile.hardware, shape)


def _fits(hardware: Hardware, shape: NodeShape) -> bool:
    if hardware.gpu_model and hardware.gpu_model != shape.gpu_model:
        return False
    if hardware.gpus_per_node and hardware.gpus_per_node != shape.gpu_count:
        return False
    return not hardware.interconnect or hardware.interconnect == shape.interconnect


def _specificity(hardware: Hardware) -> int:
    return sum(value is not None for value in dataclasses.astuple(hardware))


def profile_for(shapes: list[NodeShape]) -> Profile:
    """The shipped profile that fits the most common node shape (the most specific one), else a
    profile derived from it: defaults, named after the hardware."""
    gpu_shapes = [s for s in shapes if s.gpu_model and s.gpu_count]
    if gpu_shapes:
        shape = Counter(gpu_shapes).most_common(1)[0][0]
        fitting = [p for p in shipped_profiles() if _fits(p.hardware, shape)]
        if fitting:
            return max(fitting, key=lambda p: _specificity(p.hardware))
        model = (shape.gpu_model or "gpu").lower().replace(" ", "-")
        name = f"derived-{shape.gpu_count}x-{model}-{shape.interconnect or 'unknown'}"
        description = (
            f"derived from the detected topology: {shape.gpu_count}x {shape.gpu_model} over "
            f"{shape.interconnect or 'an unknown interconnect'}; gpuval's default thresholds"
        )
        hardware = {
            "gpu_model": shape.gpu_model,
            "gpus_per_node": shape.gpu_count,
            **({"interconnect": shape.interconnect} if shape.interconnect else {}),
        }
    else:
        name, hardware = "derived-no-gpu", {}
        description = "derived: no GPU detected on any node; gpuval's default thresholds"
    document = {
        "name": name,
        "description": description,
        "hardware": hardware,
        "phases": ["intranode", "internode", "pairs"],
    }
    return Profile(name, description, "derived from the detected hardware", document)
