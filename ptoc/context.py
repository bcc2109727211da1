"""The explicit compile context every stage receives (no stage reads globals or the environment)."""

from __future__ import annotations

from dataclasses import field, replace
from ptoc.lazy_dataclass import dataclass  # (the standard one, its methods compiled on first use)

ARCHES = ("a2a3", "a5")
# Option: operator type rules also check the hardware rules of the tiles' memory spaces (cube operand
# spaces, TMOV paths MOV-1..MOV-6, whole fractals NZ-1). Off while spaces are still open (the front end
# and the passes before InferTileMemorySpace); InferTileMemorySpace checks them once it has decided.
HARDWARE_RULES = "hardware_rules"


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

    @property
    def hardware_rules(self) -> bool:
        """Whether operator type rules check the hardware rules of memory spaces (see HARDWARE_RULES)."""
        return bool(self.option(HARDWARE_RULES, False))

    def with_hardware_rules(self) -> CompileContext:
        """This context with the hardware rules of memory spaces checked."""
        if self.hardware_rules:
            return self
        return replace(self, options=tuple(o for o in self.options if o[0] != HARDWARE_RULES)
                       + ((HARDWARE_RULES, True),))
