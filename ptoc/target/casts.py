"""Native TCVT conversions per target, and the shortest chain of them between two dtypes.

A `tile.cast` lowers to one pto-isa `TCVT` (`pto.tcvt` in `.pto`) only when the target implements
that (source, destination) element-type pair; `LegalizeTileCast` rewrites every other cast into a
chain of native ones (`cast_chain`). The pass reaches these tables through the compile context's
arch name; it never tests an arch name itself.

Where the facts come from: the dtype pairs TCVT dispatches to a conversion instruction in pto-isa's
NPU implementations, `include/pto/npu/a2a3/TCvt.hpp` (the `GenCastCall` dispatcher and its special
cases) and `include/pto/npu/a5/TCvt.hpp` (the `castData_1D_NoPostUpdate` overload set, one overload
per supported pair), as published in the hw-native-sys/pto-isa repository; the summary table of
`docs/isa/tile/ops/elementwise-tile-tile/tcvt.md` agrees on the common float pairs. A pair that
header does not dispatch is not native, even where the ISA page lists it in general terms (e.g.
FP16 -> BF16 on A2/A3). Same-dtype FP32 -> FP32 (rounding to an integral value) is native on both.

Packed FP4 (spec FP4-2/FP4-4): on A5 the only conversions that touch FP4E2M1X2 / FP4E1M2X2 are
BF16 <-> packed, so every other FP4 conversion chains through BF16. A2/A3 has none (FP4-3).
"""

from __future__ import annotations

from collections import deque

# --------------------------------------------------------------------------------------------------
# Native pairs (source dtype name, destination dtype name), `ptoc.ir.dtypes` spelling
# --------------------------------------------------------------------------------------------------

_A2A3 = (
    ("FP32", "FP32"), ("FP32", "FP16"), ("FP32", "BF16"), ("FP32", "INT16"), ("FP32", "INT32"), ("FP32", "INT64"),
    ("FP16", "FP32"), ("FP16", "INT32"), ("FP16", "INT16"), ("FP16", "INT8"), ("FP16", "UINT8"), ("FP16", "INT4"),
    ("BF16", "FP32"), ("BF16", "INT32"),
    ("INT4", "FP16"),
    ("INT8", "FP16"), ("UINT8", "FP16"),
    ("INT16", "FP16"), ("INT16", "FP32"),
    ("INT32", "FP32"), ("INT32", "FP16"), ("INT32", "INT16"), ("INT32", "INT64"),
    ("INT64", "FP32"), ("INT64", "INT32"),
)

_A5 = (
    ("UINT8", "FP16"), ("UINT8", "UINT16"),
    ("INT8", "FP16"), ("INT8", "INT16"), ("INT8", "INT32"),
    ("FP8E4M3FN", "FP32"), ("FP8E5M2", "FP32"), ("HF8", "FP32"),
    ("FP16", "FP32"), ("FP16", "INT32"), ("FP16", "INT16"), ("FP16", "INT8"), ("FP16", "UINT8"), ("FP16", "HF8"),
    ("BF16", "FP32"), ("BF16", "INT32"), ("BF16", "FP16"), ("BF16", "FP4E2M1X2"), ("BF16", "FP4E1M2X2"),
    ("FP4E2M1X2", "BF16"), ("FP4E1M2X2", "BF16"),
    ("INT16", "UINT8"), ("INT16", "FP16"), ("INT16", "FP32"), ("INT16", "INT32"), ("INT16", "UINT32"),
    ("FP32", "FP32"), ("FP32", "FP16"), ("FP32", "BF16"), ("FP32", "INT16"), ("FP32", "INT32"), ("FP32", "INT64"),
    ("FP32", "FP8E4M3FN"), ("FP32", "FP8E5M2"), ("FP32", "HF8"),
    ("INT32", "FP32"), ("INT32", "INT16"), ("INT32", "UINT16"), ("INT32", "INT64"), ("INT32", "UINT8"),
    ("UINT32", "UINT8"), ("UINT32", "UINT16"), ("UINT32", "INT16"),
    ("INT64", "FP32"), ("INT64", "INT32"),
)

NATIVE_CASTS: dict[str, frozenset[tuple[str, str]]] = {
    "a2a3": frozenset(_A2A3),
    "a5": frozenset(_A5),
}

PACKED_FP4 = ("FP4E2M1X2", "FP4E1M2X2")


def native_pairs(arch: str) -> frozenset[tuple[str, str]]:
    try:
        return NATIVE_CASTS[arch]
    except KeyError:
        raise ValueError(f"no cast table for target arch {arch!r}; known: {', '.join(NATIVE_CASTS)}") from None


def is_native(arch: str, src: str, dst: str) -> bool:
    """One TCVT converts `src` to `dst` on `arch`."""
    return (src, dst) in native_pairs(arch)


def converts_packed_fp4(arch: str) -> bool:
    """Does any native conversion of `arch` touch a packed FP4 type (FP4-3: only A5)?"""
    return any(a in PACKED_FP4 or b in PACKED_FP4 for a, b in native_pairs(arch))


def targets_of(arch: str, src: str) -> tuple[str, ...]:
    """Dtypes one native TCVT produces from `src` (sorted, `src` itself excluded)."""
    return tuple(sorted(b for a, b in native_pairs(arch) if a == src and b != src))


def sources_of(arch: str, dst: str) -> tuple[str, ...]:
    """Dtypes one native TCVT converts into `dst` (sorted, `dst` itself excluded)."""
    return tuple(sorted(a for a, b in native_pairs(arch) if b == dst and a != dst))


# --------------------------------------------------------------------------------------------------
# Precision facts for the tie-break between equally short chains
# --------------------------------------------------------------------------------------------------

# floats: (significand bits incl. the implicit one, exponent bits)
_FLOAT_BITS: dict[str, tuple[int, int]] = {
    "FP32": (24, 8), "FP16": (11, 5), "BF16": (8, 8), "HF8": (4, 5), "FP8E4M3FN": (4, 4), "FP8E5M2": (3, 5),
    "FP8E8M0": (1, 8), "FP4E1M2X2": (3, 1), "FP4E2M1X2": (2, 2), "HF4": (2, 2),
}
# integers: (value bits, signed)
_INT_BITS: dict[str, tuple[int, bool]] = {
    "INT64": (63, True), "UINT64": (64, False), "INT32": (31, True), "UINT32": (32, False),
    "INT16": (15, True), "UINT16": (16, False), "INT8": (7, True), "UINT8": (8, False),
    "INT4": (3, True), "UINT4": (4, False), "BOOL": (1, False),
}


def precision_bits(name: str) -> int:
    """Significant bits a value of `name` carries (significand for floats, value bits for integers)."""
    if name in _FLOAT_BITS:
        return _FLOAT_BITS[name][0]
    if name in _INT_BITS:
        return _INT_BITS[name][0]
    return 0


def holds_exactly(wide: str, narrow: str) -> bool:
    """Does every value of dtype `narrow` have an exact representation in dtype `wide`?"""
    if narrow in _INT_BITS:
        nbits, nsigned = _INT_BITS[narrow]
        if wide in _INT_BITS:
            wbits, wsigned = _INT_BITS[wide]
            if nsigned and not wsigned:
                return False
            return wbits >= nbits
        if wide in _FLOAT_BITS:
            return _FLOAT_BITS[wide][0] >= nbits
        return False
    if narrow in _FLOAT_BITS and wide in _FLOAT_BITS:
        (ws, we), (ns, ne) = _FLOAT_BITS[wide], _FLOAT_BITS[narrow]
        return ws >= ns and we >= ne
    return False


def _rank(mid: str, src: str) -> tuple:
    """Sort key of an intermediate dtype, best first: it holds the source exactly, then more
    significant bits, then wider exponent, then name (for a total, deterministic order)."""
    exp = _FLOAT_BITS.get(mid, (0, 0))[1]
    return (not holds_exactly(mid, src), -precision_bits(mid), -exp, mid)


# --------------------------------------------------------------------------------------------------
# Shortest chain
# --------------------------------------------------------------------------------------------------


def cast_chain(arch: str, src: str, dst: str) -> tuple[str, ...] | None:
    """The dtypes of the shortest chain of native TCVTs from `src` to `dst` on `arch`, both ends
    included (`(src, dst)` for a native cast, `(src,)` when they are equal); None when no chain exists.

    Breadth-first search over the native pairs. Among equally short chains the one whose first
    intermediate ranks best wins, then the second, and so on (`_rank`: prefer an intermediate that
    holds the source exactly, then the highest precision)."""
    if src == dst:
        return (src,)
    pairs = native_pairs(arch)
    preds: dict[str, list[str]] = {}
    succs: dict[str, list[str]] = {}
    for a, b in pairs:
        if a != b:
            succs.setdefault(a, []).append(b)
            preds.setdefault(b, []).append(a)
    # distance of every dtype to dst, by a backward breadth-first search
    dist = {dst: 0}
    queue = deque([dst])
    while queue:
        n = queue.popleft()
        for p in preds.get(n, ()):
            if p not in dist:
                dist[p] = dist[n] + 1
                queue.append(p)
    if src not in dist:
        return None
    chain = [src]
    cur = src
    while cur != dst:
        steps = [n for n in succs.get(cur, ()) if dist.get(n) == dist[cur] - 1]
        if dst in steps:
            cur = dst
        else:
            cur = min(steps, key=lambda m: _rank(m, src))
        chain.append(cur)
    return tuple(chain)


__all__ = ["NATIVE_CASTS", "PACKED_FP4", "cast_chain", "converts_packed_fp4", "holds_exactly", "is_native",
           "native_pairs", "precision_bits", "sources_of", "targets_of"]
