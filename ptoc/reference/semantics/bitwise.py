"""Reference semantics of the bitwise family (OP-2)."""

from __future__ import annotations


import numpy as np

from ptoc.ir.dtypes import DType

from ptoc.reference.values import Scalar, Tile, _np, _tile, _wrap_int
from ptoc.reference.semantics.common import _OpCtx, _bcast_valid, _need_tile, _op, _result_like, _to_tile_arg


# --------------------------------------------------------------------------------------------------
# Bitwise and shifts (OP-2)
# --------------------------------------------------------------------------------------------------


def _shift(x: np.ndarray, s, dt: DType, left: bool) -> np.ndarray:
    nd = _np(dt)
    s = np.asarray(s).astype(np.int64)
    bits = dt.bits
    big = (s < 0) | (s >= bits)
    sc = np.clip(s, 0, bits - 1).astype(np.uint64)
    if left:
        r = (x.astype(np.int64).astype(np.uint64) << sc).astype(nd)
        return np.where(big, np.zeros((), nd), r).astype(nd)
    if dt.is_signed:
        xi = x.astype(np.int64)
        r = (xi >> sc.astype(np.int64)).astype(nd)
        return np.where(big, np.where(xi < 0, -1, 0).astype(nd), r).astype(nd)
    r = (x.astype(np.uint64) >> sc).astype(nd)
    return np.where(big, np.zeros((), nd), r).astype(nd)


def _bitwise(kind: str, x: np.ndarray, y, dt: DType) -> np.ndarray:
    nd = _np(dt)
    if not isinstance(y, np.ndarray):
        y = np.array(_wrap_int(int(y), dt) if kind not in ("shl", "shr") else int(y)).astype(
            nd if kind not in ("shl", "shr") else np.int64)
    if kind == "and_":
        return np.bitwise_and(x, y.astype(nd))
    if kind == "or_":
        return np.bitwise_or(x, y.astype(nd))
    if kind == "xor":
        return np.bitwise_xor(x, y.astype(nd))
    return _shift(x, y, dt, kind == "shl")


_BIT_SCALAR = {"ands": "and_", "ors": "or_", "xors": "xor", "shls": "shl", "shrs": "shr"}


@_op(*[f"{k}.{n}" for k in ("tile", "tensor") for n in ("and_", "or_", "xor", "shl", "shr") + tuple(_BIT_SCALAR)])
def _bitwise_op(ctx: _OpCtx, a: dict):
    is_tensor = ctx.name.startswith("tensor.")
    kind = ctx.name.split(".", 1)[1]
    kind = _BIT_SCALAR.get(kind, kind)
    x = _need_tile(ctx, _to_tile_arg(a["lhs"]), "lhs")
    if not x.dtype.is_int:
        ctx.fault(f"works on integers only, got {x.dtype.name}")
    y = _to_tile_arg(a["rhs"])
    if isinstance(y, Tile):
        if y.shape != x.shape:
            ctx.fault("operand shapes must be identical")
        data = _bitwise(kind, x.data, y.data, x.dtype)
        valid = _bcast_valid([(x.shape, x.valid), (y.shape, y.valid)], x.shape)
    else:
        if not isinstance(y, Scalar):
            ctx.fault("the right operand must be a scalar")
        data = _bitwise(kind, x.data, int(y.value), x.dtype)
        valid = x.valid
    return _result_like(is_tensor, _tile(data, x.dtype, valid, memory=x.memory, blayout=x.blayout))


@_op("tile.not_", "tensor.not_")
def _not(ctx: _OpCtx, a: dict):
    is_tensor = ctx.name.startswith("tensor.")
    x = _need_tile(ctx, _to_tile_arg(a["input"]), "input")
    if not x.dtype.is_int:
        ctx.fault(f"works on integers only, got {x.dtype.name}")
    return _result_like(is_tensor, _tile(np.invert(x.data), x.dtype, x.valid, memory=x.memory, blayout=x.blayout))
