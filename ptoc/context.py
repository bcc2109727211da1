"""The explicit compile context every stage receives (no stage reads globals or the environment)."""

from __future__ import annotations

from dataclasses import dataclass, field

ARCHES = ("a2a3", "a5")


@dataclass(frozen=True)
class CompileContext:
    arch: str = "a2a3"  # "a2a3" (Ascend910B family) or "a5" (Ascend950)
    ptoas_version: str = "v0.61"
    options: tuple[tuple[str, object], ...] = field(default=())

    def option(self, name: str, default=None):
        for k, v in self.options:
            if k == name:
                return v
        return default
