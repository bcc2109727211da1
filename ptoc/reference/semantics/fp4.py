"""Reference semantics of the FP4 family: MX quantization (FP4-5, OP-6)."""

from __future__ import annotations


import numpy as np

from ptoc.ir import dtypes
from ptoc.ir.dtypes import DType

from ptoc.reference.values import GTensor, Unsupported, _as_int, _np, _tile, _to_float_dtype, encode_fp4
from ptoc.reference.semantics.common import _OpCtx, _need_tile, _op, _result_like, _to_tile_arg


# --------------------------------------------------------------------------------------------------
# MX quantization (FP4-5, OP-6)
# --------------------------------------------------------------------------------------------------

_ELEM_EMAX = {"FP4E2M1X2": 2, "FP8E4M3FN": 8}
_ELEM_MAX = {"FP4E2M1X2": 6.0, "FP8E4M3FN": 448.0}


def quant_mx_array(x: np.ndarray, dt: DType, axis: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """OCP MX quantization of a 2-D float array in groups of 32 along K -> (data, E8M0 scale codes)."""
    v = np.asarray(x, dtype=np.float64)
    if axis == 0:
        v = v  # [N, K]: groups along K too; the outputs are transposed below
    rows, k = v.shape
    g = v.reshape(rows, k // 32, 32)
    amax = np.nanmax(np.abs(g), axis=-1)
    with np.errstate(all="ignore"):
        e = np.where(amax > 0, np.floor(np.log2(np.where(amax > 0, amax, 1.0))) - _ELEM_EMAX[dt.name], -127)
    e = np.clip(e, -127, 127).astype(np.int64)
    scaled = g / np.exp2(e)[..., None]
    scaled = np.clip(scaled, -_ELEM_MAX[dt.name], _ELEM_MAX[dt.name]).reshape(rows, k)
    codes = (e + 127).astype(np.uint8)
    if axis == 0:
        scaled, codes = scaled.T, codes.T
    if dt.is_packed_fp4:
        data = encode_fp4(scaled, dt, "rint", -1)
    else:
        data = _to_float_dtype(scaled, dt, "rint")
    return data, codes


def _quant(ctx: _OpCtx, a: dict):
    src = a["input"]
    x = _need_tile(ctx, _to_tile_arg(src), "input")
    dt = a["dtype"] if isinstance(a["dtype"], DType) else a["target_type"]
    dt = dt if isinstance(dt, DType) else dtypes.BY_NAME["FP8E4M3FN"]
    if dt.name not in _ELEM_EMAX:
        raise Unsupported(ctx.name, f"quantization to {dt.name}", ctx.span)
    if a["quant_scale_alg"] not in (None, "ocp"):
        raise Unsupported(ctx.name, f"quant_scale_alg={a['quant_scale_alg']!r}", ctx.span)
    axis = _as_int(a["group_axis"] if a["group_axis"] is not None else (a["axis"] if a["axis"] is not None else 1))
    if x.rank != 2 or x.shape[1] % 32:
        ctx.fault("needs a 2-D input whose K is a multiple of 32")
    data, codes = quant_mx_array(x.data, dt, axis)
    e8m0 = dtypes.BY_NAME["FP8E8M0"]
    d = _tile(data, dt, memory=x.memory or "Vec")
    s = _tile(codes.view(_np(e8m0)), e8m0, memory=x.memory or "Vec")
    return _result_like(isinstance(src, GTensor), (d, s))


_op("tile.quant_mx", "tile.tquant_mx", "tensor.quant_mx")(_quant)
