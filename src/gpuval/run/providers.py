"""Where `gpuval run --provision NAME` gets its nodes: a provider rents them, hands back an
inventory for the run, and gives them back however the run ends.

No provider ships yet; one registers itself with `register(name, factory)` (for example a
cloud's API client), and `gpuval run --provision NAME` then needs no `-i`.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from gpuval.profile import Profile


@dataclass(frozen=True)
class ProvisionRequest:
    run_id: str
    run_dir: Path  # the provider keeps its state here (instances, their costs)
    profile: Profile | None  # the hardware wanted (profile.hardware), when one was named


class Provider(Protocol):
    def cluster(self, request: ProvisionRequest) -> AbstractContextManager[Path]:
        """Nodes for the run: the context yields their inventory file and releases them when
        it ends (also after an error or Ctrl-C)."""
        ...


PROVIDERS: dict[str, Callable[[], Provider]] = {}


def register(name: str, factory: Callable[[], Provider]) -> None:
    PROVIDERS[name] = factory


def provider(name: str) -> Provider:
    if name not in PROVIDERS:
        known = ", ".join(sorted(PROVIDERS)) or "none is installed"
        raise KeyError(f"no provisioning provider {name!r} (known: {known})")
    return PROVIDERS[name]()
