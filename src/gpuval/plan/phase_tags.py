"""Which phases of benchmark.yml a run's --tags and --skip-tags leave in, decided per play as
Ansible decides: a play with a skipped tag does not run; with --tags, a play runs when it has
one of them, or `always`. The plan reads them as Ansible names them for a play's variables
(ansible_run_tags, ansible_skip_tags); `gpuval plan --tags/--skip-tags` sets the same names."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

RUN_TAGS = "ansible_run_tags"
SKIP_TAGS = "ansible_skip_tags"

# Per phase of the plan, the tags of each of its plays (playbooks/phases/*.yml).
PHASE_PLAYS: dict[str, tuple[tuple[str, ...], ...]] = {
    "start": (("always",),),
    "preflight": (("preflight",),),
    "health": (("health",),),
    "install": (("install",),),
    "openmpi": (("install",),),
    "build": (("build",),),
    "intranode": (("intranode",),),
    "mpi-preflight": (("mpi-preflight",),),
    "internode": (("internode",),),
    "pairs": (("pairs",),),
    "report": (("collect",), ("collect", "cleanup"), ("report",)),
}


def _words(value: Any) -> tuple[str, ...]:
    """A tag list as Ansible holds it, or a comma-separated string as the command line gives it."""
    if value is None:
        return ()
    items = value.split(",") if isinstance(value, str) else value
    return tuple(str(item).strip() for item in items if str(item).strip())


@dataclass(frozen=True)
class TagSelection:
    run: tuple[str, ...] = ("all",)
    skip: tuple[str, ...] = ()

    @classmethod
    def of(cls, variables: Mapping[str, Any]) -> TagSelection:
        return cls(_words(variables.get(RUN_TAGS)) or ("all",), _words(variables.get(SKIP_TAGS)))

    def play_runs(self, tags: Sequence[str]) -> bool:
        if set(tags) & set(self.skip):
            return False
        if "always" in tags:
            return True
        return bool({"all", "tagged", *tags} & set(self.run))

    def phase_runs(self, phase: str) -> bool:
        return any(self.play_runs(tags) for tags in PHASE_PLAYS.get(phase, (("always",),)))

    def __str__(self) -> str:
        words = [] if self.run == ("all",) else [f"--tags {','.join(self.run)}"]
        return " ".join(words + ([f"--skip-tags {','.join(self.skip)}"] if self.skip else []))
