"""Target facts for code that has no compile context at hand (type-rule helpers, the GlobalTensor
header, the numeric reference). Every fact is read from `ptoc.target.arch`; those asked here are the
same on every target, which `_same_everywhere` checks when the module loads.

    FRACTAL_ROWS            rows of an NZ fractal (NZ-1)
    C0_BYTES                bytes of one C0 line (NZ-1)
    c0(dtype) -> int|None   elements per C0 line for a DType or a bit width; None for sub-byte types
"""

from __future__ import annotations

from ptoc.target.arch import ARCHES, get_arch


def _same_everywhere(fact):
    values = {fact(get_arch(name)) for name in ARCHES}
    if len(values) != 1:  # pragma: no cover - a new target that differs must pass its arch explicitly
        raise RuntimeError(f"target fact differs between targets: {values}")
    return values.pop()


FRACTAL_ROWS: int = _same_everywhere(lambda a: a.fractal_rows)
C0_BYTES: int = _same_everywhere(lambda a: a.alignment_bytes)


def c0(dtype, arch: str = "a2a3") -> int | None:
    """NZ-1: elements per 32-byte C0 line of `dtype` (a DType or a bit width) on `arch`."""
    return get_arch(arch).c0(dtype)
