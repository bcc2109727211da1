"""Reference semantics of the reduction family."""

from __future__ import annotations


import numpy as np


from ptoc.reference.values import Tile, _box, _is_float, _np, _tile, _to_float_dtype, _undefined
from ptoc.reference.semantics.common import _OpCtx, _need_tile, _op, _result_like, _to_tile_arg


# --------------------------------------------------------------------------------------------------
# Reductions
# --------------------------------------------------------------------------------------------------


def _reduce(ctx: _OpCtx, x: Tile, how: str, axis: int) -> Tile:
    if x.rank < 2:
        ctx.fault(f"needs rank >= 2, got {list(x.shape)}")
    ax = axis % x.rank
    region = x.data[_box(x.valid)]
    dt = x.dtype
    if how == "sum":
        r = region.astype(np.float64).sum(axis=ax, keepdims=True) if _is_float(dt) else \
            region.astype(np.int64).sum(axis=ax, keepdims=True)
    elif how == "prod":
        r = region.astype(np.float64).prod(axis=ax, keepdims=True) if _is_float(dt) else \
            region.astype(np.int64).prod(axis=ax, keepdims=True)
    elif region.shape[ax] == 0:
        r = np.full(region.shape[:ax] + (1,) + region.shape[ax + 1:], np.nan)
    else:
        r = (region.max if how == "max" else region.min)(axis=ax, keepdims=True)
        r = r.astype(np.float64) if _is_float(dt) else r.astype(np.int64)
    if _is_float(dt):
        r = _to_float_dtype(r, dt, "rint")
    else:
        r = r.astype(_np(dt))
    shape = list(x.shape)
    shape[ax] = 1
    out = _undefined(shape, dt)
    valid = list(x.valid)
    valid[ax] = 1 if x.valid[ax] > 0 or how in ("sum", "prod") else 0
    out[_box(r.shape)] = r
    return _tile(out, dt, valid, memory=x.memory or "Vec")


@_op(*[f"{k}.{d}_{h}" for k in ("tile", "tensor") for d in ("row", "col") for h in ("sum", "max", "min", "prod")])
def _reduction(ctx: _OpCtx, a: dict):
    is_tensor = ctx.name.startswith("tensor.")
    d, h = ctx.name.split(".", 1)[1].split("_")
    x = _need_tile(ctx, _to_tile_arg(a["input"]), "input")
    return _result_like(is_tensor, _reduce(ctx, x, h, -1 if d == "row" else -2))
