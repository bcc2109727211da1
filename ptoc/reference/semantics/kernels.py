"""The numeric reference's driver for semantics an op's family file declares as one formula
(`ptoc.ops.registry.UnaryKernel`, `TileScalarKernel`): the formula is evaluated over the whole tile
(float64 for float dtypes, then rounded once to the tile dtype, as every float op of the reference is),
and the result keeps the operand's valid region, memory and layout."""

from __future__ import annotations

import numpy as np

from ptoc.reference.semantics.common import _OpCtx, _f64, _from_f64, _need_tile, _result_like, _to_tile_arg
from ptoc.reference.values import Scalar, _is_float, _tile


def run_declared(kernel, ctx: _OpCtx, a: dict):
    from ptoc.ops.registry import TileScalarKernel, UnaryKernel

    names = list(a)
    src = a[names[0]]
    x = _need_tile(ctx, _to_tile_arg(src), names[0])
    values = _f64(x.data) if _is_float(x.dtype) else x.data
    if isinstance(kernel, UnaryKernel):
        r = kernel.fn(np, values)
    elif isinstance(kernel, TileScalarKernel):
        s = a[names[1]]
        if not isinstance(s, Scalar):
            ctx.fault(f"the {names[1]} operand must be a scalar")
        r = kernel.fn(np, values, float(s.value) if _is_float(x.dtype) else s.value)
    else:
        raise TypeError(f"{ctx.name}: unknown kernel declaration {kernel!r}")
    data = _from_f64(np.asarray(r, dtype=np.float64), x.dtype) if _is_float(x.dtype) else \
        np.asarray(r).astype(x.data.dtype)
    return _result_like(ctx.name.startswith("tensor."), _tile(data, x.dtype, x.valid, memory=x.memory,
                                                              blayout=x.blayout))
