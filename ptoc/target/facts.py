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


# Vector ops whose pto-isa instruction takes row-major tiles only (e.g. TADD static_asserts
# `isRowMajor` on every operand; on A2/A3 PTOAS rejects TEXPANDS into a col-major Vec tile): op ->
# (indices of the tile operands that must be row-major, whether the result must be). The same set on
# every target. ResolveBackendOpLayouts repairs other layouts around these ops.
_ALL = tuple(range(4))
ROW_MAJOR_OPERANDS: dict[str, tuple[tuple[int, ...], bool]] = {
    **{op: (_ALL, True) for op in (
        "tile.add", "tile.sub", "tile.mul", "tile.div", "tile.maximum", "tile.minimum", "tile.rem", "tile.fmod",
        "tile.and", "tile.and_", "tile.or", "tile.or_", "tile.xor", "tile.shl", "tile.shr",
        "tile.part_add", "tile.part_max", "tile.part_min", "tile.part_mul",
        "tile.abs", "tile.exp", "tile.sqrt", "tile.rsqrt", "tile.log", "tile.recip", "tile.not", "tile.not_",
        "tile.relu", "tile.prelu", "tile.lrelu",
        "tile.adds", "tile.subs", "tile.muls", "tile.divs", "tile.fmods", "tile.maximums",
        "tile.addsc", "tile.subsc", "tile.sel", "tile.sels", "tile.gatherb",
        "tile.sort32", "tile.mrgsort_format2")},
    "tile.cast": ((0,), True),
    "tile.cmps": ((0,), True),
    "tile.mrgsort_format1": ((0,), True),
    "tile.full": ((), True),
    "tile.tri": ((), True),
    "tile.random": ((), True),
    "tile.mscatter": ((0, 1), False),
}
