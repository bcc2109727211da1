"""Reference semantics of the matmul family."""

from __future__ import annotations


import numpy as np

from ptoc.ir import dtypes
from ptoc.ir.dtypes import DType

from ptoc.reference.values import (
    BOOL,
    Tile,
    _is_float,
    _np,
    _tensor_as_tile,
    _tile,
    _tile_as_tensor,
    _to_float_dtype,
    _truthy,
    cast_array,
    decode_fp4,
)
from ptoc.reference.semantics.common import _OpCtx, _need_tensor, _need_tile, _op
from ptoc.reference.semantics.memory import fault_if_uninitialized


# --------------------------------------------------------------------------------------------------
# Matrix multiplication
# --------------------------------------------------------------------------------------------------


def _acc_dtype(dt: DType) -> DType:
    if dt.is_int:
        return dtypes.INT32
    return dtypes.FP32


def _mm_values(x: np.ndarray, dt: DType, axis: int = -1) -> np.ndarray:
    if dt.is_packed_fp4:
        return decode_fp4(x, dt, axis)
    if dt.is_int or dt == BOOL:
        return x.astype(np.int64)
    return x.astype(np.float64)


def _product(lhs: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    if lhs.dtype == np.int64 and rhs.dtype == np.int64:
        return np.matmul(lhs, rhs)
    return np.matmul(lhs.astype(np.float64), rhs.astype(np.float64))


def _acc_result(p: np.ndarray, dt: DType, acc: np.ndarray | None = None) -> np.ndarray:
    if dt.is_int:
        r = p if acc is None else acc.astype(np.int64) + p
        return r.astype(_np(dt))
    r = p if acc is None else acc.astype(np.float64) + p
    return _to_float_dtype(r, dt, "rint")


def _mm_check(ctx: _OpCtx, lhs: Tile, rhs: Tile) -> None:
    if lhs.rank != 2 or rhs.rank != 2:
        ctx.fault("operands must be 2-D")
    if lhs.dtype != rhs.dtype:
        ctx.fault(f"lhs is {lhs.dtype.name} but rhs is {rhs.dtype.name}")
    if lhs.shape[1] != rhs.shape[0]:
        ctx.fault(f"inner dimensions differ: {list(lhs.shape)} x {list(rhs.shape)}")


@_op("tile.matmul")
def _tile_matmul(ctx: _OpCtx, a: dict):
    lhs, rhs = _need_tile(ctx, a["lhs"], "lhs"), _need_tile(ctx, a["rhs"], "rhs")
    _mm_check(ctx, lhs, rhs)
    acc = _acc_dtype(lhs.dtype)
    p = _product(_mm_values(lhs.data, lhs.dtype), _mm_values(rhs.data, rhs.dtype))
    return _tile(_acc_result(p, acc), acc, (lhs.valid[0], rhs.valid[1]), memory="Acc")


@_op("tile.matmul_acc")
def _tile_matmul_acc(ctx: _OpCtx, a: dict):
    acc_t = _need_tile(ctx, a["acc"], "acc")
    fault_if_uninitialized(ctx, acc_t, "the accumulation")
    lhs, rhs = _need_tile(ctx, a["lhs"], "lhs"), _need_tile(ctx, a["rhs"], "rhs")
    _mm_check(ctx, lhs, rhs)
    if acc_t.shape != (lhs.shape[0], rhs.shape[1]):
        ctx.fault(f"the accumulator is {list(acc_t.shape)}, the product {[lhs.shape[0], rhs.shape[1]]}")
    p = _product(_mm_values(lhs.data, lhs.dtype), _mm_values(rhs.data, rhs.dtype))
    return _tile(_acc_result(p, acc_t.dtype, acc_t.data), acc_t.dtype, acc_t.valid, memory=acc_t.memory or "Acc")


@_op("tile.matmul_bias")
def _tile_matmul_bias(ctx: _OpCtx, a: dict):
    lhs, rhs = _need_tile(ctx, a["lhs"], "lhs"), _need_tile(ctx, a["rhs"], "rhs")
    bias = _need_tile(ctx, a["bias"], "bias")
    _mm_check(ctx, lhs, rhs)
    acc = _acc_dtype(lhs.dtype)
    p = _product(_mm_values(lhs.data, lhs.dtype), _mm_values(rhs.data, rhs.dtype))
    b = np.broadcast_to(_mm_values(bias.data, bias.dtype), p.shape)
    valid = (lhs.valid[0], min(rhs.valid[1], bias.valid[1]))
    return _tile(_acc_result(p, acc, b), acc, valid, memory="Acc")


@_op("tile.matmul_mx")
def _tile_matmul_mx(ctx: _OpCtx, a: dict):
    lhs, rhs = _need_tile(ctx, a["lhs"], "lhs"), _need_tile(ctx, a["rhs"], "rhs")
    ls, rs = _need_tile(ctx, a["lhs_scale"], "lhs_scale"), _need_tile(ctx, a["rhs_scale"], "rhs_scale")
    x = _mm_values(lhs.data, lhs.dtype)
    w = _mm_values(rhs.data, rhs.dtype)
    if x.shape[1] != w.shape[0] or x.shape[1] % 32:
        ctx.fault(f"lhs holds K = {x.shape[1]} values per row, rhs {w.shape[0]} rows (K % 32 == 0)")
    sx = np.repeat(ls.data.astype(np.float64), 32, axis=1)
    sw = np.repeat(rs.data.astype(np.float64), 32, axis=0)
    if sx.shape != x.shape or sw.shape != w.shape:
        ctx.fault("the scales do not match the operands (one FP8E8M0 scale per 32 values along K)")
    p = np.matmul(x * sx, w * sw)
    valid = (lhs.valid[0], rhs.valid[1] * rhs.dtype.packed_values)
    return _tile(_to_float_dtype(p, dtypes.FP32, "rint"), dtypes.FP32, valid, memory="Acc")


def _bool(v) -> bool:
    return v is not None and _truthy(v)


def _tensor_product(ctx: _OpCtx, a: dict):
    lhs, rhs = _need_tensor(ctx, a["lhs"], "lhs"), _need_tensor(ctx, a["rhs"], "rhs")
    x, y = _tensor_as_tile(lhs), _tensor_as_tile(rhs)
    xv, yv = _mm_values(x.data, x.dtype), _mm_values(y.data, y.dtype)
    lv, rv = list(x.valid), list(y.valid)
    if _bool(a["a_trans"]):
        xv = np.swapaxes(xv, -1, -2)
        lv[-1], lv[-2] = lv[-2], lv[-1]
    if _bool(a["b_trans"]):
        yv = np.swapaxes(yv, -1, -2)
        rv[-1], rv[-2] = rv[-2], rv[-1]
    if xv.shape[-1] != yv.shape[-2]:
        ctx.fault(f"inner dimensions differ: {list(xv.shape)} x {list(yv.shape)}")
    p = _product(xv, yv)
    valid = tuple(p.shape[:-2]) + (lv[-2], rv[-1])
    return p, valid, x.dtype


@_op("tensor.matmul")
def _tensor_matmul(ctx: _OpCtx, a: dict):
    p, valid, dt = _tensor_product(ctx, a)
    out = a["out_dtype"] if isinstance(a["out_dtype"], DType) else _acc_dtype(dt)
    acc = _acc_dtype(dt)
    r = _acc_result(p, acc)
    if out != acc:
        r = cast_array(r, acc, out, "rint")
    return _tile_as_tensor(_tile(r, out, valid))


@_op("tensor.matmul_acc")
def _tensor_matmul_acc(ctx: _OpCtx, a: dict):
    acc_t = _need_tensor(ctx, a["acc"], "acc")
    acc = _tensor_as_tile(acc_t)
    p, _valid, dt = _tensor_product(ctx, a)
    if p.shape != acc.shape:
        ctx.fault(f"the accumulator is {list(acc.shape)}, the product {list(p.shape)}")
    r = _acc_result(p, acc.dtype, acc.data) if acc.dtype == _acc_dtype(dt) else cast_array(
        _acc_result(p, _acc_dtype(dt), acc.data.astype(np.float64 if _is_float(acc.dtype) else np.int64)),
        _acc_dtype(dt), acc.dtype, "rint")
    return _tile_as_tensor(_tile(r, acc.dtype, acc.valid))
