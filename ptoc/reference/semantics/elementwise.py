"""Reference semantics of the elementwise family: arithmetic, unary math, casts, expands, sel."""

from __future__ import annotations


import numpy as np

from ptoc.ir.dtypes import DType

from ptoc.reference.values import BOOL, Tile, _cast_mode, _is_float, _scalar_cast, _tile, _to_float_dtype, cast_array
from ptoc.reference.semantics.common import (
    _ARITH,
    _OpCtx,
    _SCALAR_FORM,
    _arith,
    _bcast_valid,
    _f64,
    _from_f64,
    _need_tile,
    _op,
    _result_like,
    _scalar_value,
    _to_tile_arg,
)


# --------------------------------------------------------------------------------------------------
# Elementwise, unary, casts
# --------------------------------------------------------------------------------------------------


@_op(*[f"{k}.{n}" for k in ("tile", "tensor") for n in _ARITH + tuple(_SCALAR_FORM)])
def _elementwise(ctx: _OpCtx, a: dict):
    is_tensor = ctx.name.startswith("tensor.")
    kind = ctx.name.split(".", 1)[1]
    kind = _SCALAR_FORM.get(kind, kind)
    x = _need_tile(ctx, _to_tile_arg(a["lhs"]), "lhs")
    y = _to_tile_arg(a["rhs"])
    if isinstance(y, Tile):
        if y.dtype != x.dtype:
            ctx.fault(f"operand dtypes differ ({x.dtype.name} and {y.dtype.name})")
        try:
            shape = np.broadcast_shapes(x.shape, y.shape)
        except ValueError:
            ctx.fault(f"shapes {list(x.shape)} and {list(y.shape)} do not broadcast")
        data = _arith(kind, x.data, y.data, x.dtype)
        valid = _bcast_valid([(x.shape, x.valid), (y.shape, y.valid)], shape)
        r = _tile(np.broadcast_to(data, shape), x.dtype, valid, memory=x.memory, blayout=x.blayout)
    else:
        s = _scalar_value(ctx, y, x.dtype)
        r = _tile(_arith(kind, x.data, s, x.dtype), x.dtype, x.valid, memory=x.memory, blayout=x.blayout)
    return _result_like(is_tensor, r)


def _unary_math(kind: str, x: np.ndarray, dt: DType) -> np.ndarray:
    if kind == "neg":
        if _is_float(dt):
            return _to_float_dtype(-_f64(x), dt, "rint")
        return (-x.astype(np.int64)).astype(x.dtype) if dt.is_signed else (0 - x).astype(x.dtype)
    if kind == "abs":
        if _is_float(dt):
            return _to_float_dtype(np.abs(_f64(x)), dt, "rint")
        return np.abs(x).astype(x.dtype)
    if kind == "relu":
        if _is_float(dt):
            return _to_float_dtype(np.maximum(_f64(x), 0.0), dt, "rint")
        return np.maximum(x, 0).astype(x.dtype)
    v = _f64(x)
    r = {"exp": np.exp, "sqrt": np.sqrt, "log": np.log, "rsqrt": lambda z: 1.0 / np.sqrt(z),
         "recip": lambda z: 1.0 / z}[kind](v)
    return _from_f64(r, dt)


@_op(*[f"{k}.{n}" for k in ("tile", "tensor") for n in ("exp", "neg", "abs", "sqrt", "rsqrt", "recip", "log")],
     "tile.relu")
def _unary(ctx: _OpCtx, a: dict):
    is_tensor = ctx.name.startswith("tensor.")
    kind = ctx.name.split(".", 1)[1]
    x = _need_tile(ctx, _to_tile_arg(a["input"]), "input")
    r = _tile(_unary_math(kind, x.data, x.dtype), x.dtype, x.valid, memory=x.memory, blayout=x.blayout)
    return _result_like(is_tensor, r)


def _packed_axis(t: Tile) -> int:
    if t.rank >= 2 and t.blayout == "col_major" and not (t.shape[1] == 1 and t.shape[0] != 1):
        return t.rank - 2
    return t.rank - 1


@_op("tile.cast", "tensor.cast")
def _cast(ctx: _OpCtx, a: dict):
    is_tensor = ctx.name.startswith("tensor.")
    src = a["input"]
    x = _need_tile(ctx, _to_tile_arg(src), "input")
    dst = a["target_type"]
    if not isinstance(dst, DType):
        ctx.fault("target_type must be a dtype")
    mode = _cast_mode(a["mode"])
    axis = _packed_axis(x)
    data = cast_array(x.data, x.dtype, dst, mode, axis)
    valid = list(x.valid)
    if x.dtype.is_packed_fp4 and not dst.is_packed_fp4:
        valid[axis] *= 2
    elif dst.is_packed_fp4 and not x.dtype.is_packed_fp4:
        valid[axis] = (valid[axis] + 1) // 2
    r = _tile(data, dst, valid, memory=x.memory, blayout=x.blayout)
    return _result_like(is_tensor, r)


@_op("scalar.cast")
def _scalar_cast_op(ctx: _OpCtx, a: dict):
    dst = a["target_type"]
    return _scalar_cast(a["input"], dst, a["mode"], ctx.span)


# row_expand / col_expand, sel -----------------------------------------------------------------------

_EXPAND_KIND = {"add": "add", "sub": "sub", "mul": "mul", "div": "div", "max": "maximum", "min": "minimum"}


@_op(*[f"tile.{d}_expand_{n}" for d in ("row", "col") for n in _EXPAND_KIND])
def _expand(ctx: _OpCtx, a: dict):
    d, _, n = ctx.name.split(".", 1)[1].split("_", 2)
    x = _need_tile(ctx, a["input"], "input")
    v = _need_tile(ctx, a[d], d)
    if x.rank != 2 or v.rank != 2:
        ctx.fault("takes 2-D tiles")
    want = (x.shape[0], 1) if d == "row" else (1, x.shape[1])
    if v.shape != want:
        ctx.fault(f"the {d} operand is {list(v.shape)}, expected {list(want)}")
    data = _arith(_EXPAND_KIND[n], x.data, np.broadcast_to(v.data, x.shape), x.dtype)
    valid = _bcast_valid([(x.shape, x.valid), (v.shape, v.valid)], x.shape)
    return _tile(data, x.dtype, valid, memory=x.memory, blayout=x.blayout)


@_op("tile.sel")
def _sel(ctx: _OpCtx, a: dict):
    m = _need_tile(ctx, a["mask"], "mask")
    x, y = _need_tile(ctx, a["lhs"], "lhs"), _need_tile(ctx, a["rhs"], "rhs")
    if x.dtype != y.dtype:
        ctx.fault("lhs and rhs dtypes differ")
    data = np.where(m.data.astype(bool) if m.dtype == BOOL else (m.data != 0), x.data, y.data)
    valid = _bcast_valid([(m.shape, m.valid), (x.shape, x.valid), (y.shape, y.valid)], x.shape)
    return _tile(data, x.dtype, valid, memory=x.memory, blayout=x.blayout)
