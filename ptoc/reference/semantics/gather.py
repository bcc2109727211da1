"""Reference semantics of the gather family: gather, scatter, masks, sorts (OP-5, OP-9)."""

from __future__ import annotations


import numpy as np

from ptoc.ir.dtypes import DType
from ptoc.ir.nodes import (
    EnumLit,
)
from ptoc.reference.values import (
    GTensor,
    Tile,
    Unsupported,
    _as_int,
    _box_mask,
    _np,
    _read_logical,
    _tile,
    _tile_as_tensor,
    _undefined,
)
from ptoc.reference.semantics.common import (
    _OpCtx,
    _enum_member,
    _need_tensor,
    _need_tile,
    _op,
    _result_like,
    _to_tile_arg,
)


# --------------------------------------------------------------------------------------------------
# Gather, scatter, masks (OP-5, OP-9)
# --------------------------------------------------------------------------------------------------


def _pattern(ctx: _OpCtx, v) -> int:
    from ptoc.ops.gather import MASK_BY_NAME

    if isinstance(v, EnumLit):
        if v.member not in MASK_BY_NAME:
            ctx.fault(f"unknown mask pattern {v.member!r}")
        return MASK_BY_NAME[v.member]
    if v is None:
        ctx.fault("needs mask_pattern=")
    return _as_int(v, "a mask pattern")


def _gather_mask_tile(ctx: _OpCtx, x: Tile, pattern: int, out_dt) -> Tile:
    from ptoc.ops.gather import mask_columns

    cols = mask_columns(pattern, x.shape[-1])
    data = x.data[..., cols]
    valid = list(x.valid)
    valid[-1] = len(mask_columns(pattern, x.valid[-1]))
    dt = x.dtype
    if isinstance(out_dt, DType) and out_dt != dt:
        if out_dt.bits != dt.bits:
            ctx.fault(f"output_dtype {out_dt.name} must have the source's width")
        data = np.ascontiguousarray(data).view(_np(out_dt))
        dt = out_dt
    return _tile(data, dt, valid, memory=x.memory, blayout=x.blayout)


@_op("tile.gather_mask", "tensor.gather_mask")
def _gather_mask(ctx: _OpCtx, a: dict):
    name = "src" if ctx.name.startswith("tile.") else "input"
    src = a[name]
    x = _need_tile(ctx, _to_tile_arg(src), name)
    r = _gather_mask_tile(ctx, x, _pattern(ctx, a["mask_pattern"]), a["output_dtype"])
    return _result_like(isinstance(src, GTensor), r)


def _scatter_mask_tile(ctx: _OpCtx, dst: Tile, src: Tile, pattern: int) -> Tile:
    from ptoc.ops.gather import mask_columns

    if dst.dtype != src.dtype:
        ctx.fault("src and dst dtypes differ")
    cols = mask_columns(pattern, dst.shape[-1])
    if len(cols) != src.shape[-1] or src.shape[0] != dst.shape[0]:
        ctx.fault(f"pattern {pattern} expands {src.shape[-1]} columns, dst has {dst.shape[-1]}")
    data = dst.data.copy()
    data[..., cols] = src.data
    return _tile(data, dst.dtype, dst.valid, pad=dst.pad, memory=dst.memory, blayout=dst.blayout)


@_op("tile.scatter_mask")
def _tile_scatter_mask(ctx: _OpCtx, a: dict):
    dst, src = _need_tile(ctx, a["dst"], "dst"), _need_tile(ctx, a["src"], "src")
    return _scatter_mask_tile(ctx, dst, src, _pattern(ctx, a["mask_pattern"]))


@_op("tensor.scatter_mask")
def _tensor_scatter_mask(ctx: _OpCtx, a: dict):
    src = _need_tile(ctx, _to_tile_arg(a["input"]), "input")
    dst = _need_tile(ctx, _to_tile_arg(a["dst"]), "dst")
    return _tile_as_tensor(_scatter_mask_tile(ctx, dst, src, _pattern(ctx, a["mask_pattern"])))


def _flat_gather(ctx: _OpCtx, src: np.ndarray, idx: Tile) -> np.ndarray:
    flat = src.reshape(-1)
    m = _box_mask(idx.shape, idx.valid)
    ids = idx.data[m].astype(np.int64)
    if ids.size and (ids.min() < 0 or ids.max() >= flat.size):
        bad = int(ids[(ids < 0) | (ids >= flat.size)][0])
        ctx.fault(f"index {bad} is outside the {flat.size}-element source", code="PTOC-E0503")
    out = np.full(idx.shape, _undef_value_for(src), dtype=src.dtype)
    out[m] = flat[ids]
    return out


def _undef_value_for(arr: np.ndarray):
    if arr.dtype == np.bool_:
        return False
    if arr.dtype.kind in "iu":
        return np.frombuffer(bytes([0xA5]) * arr.dtype.itemsize, dtype=arr.dtype)[0]
    return np.array(np.nan).astype(arr.dtype)[()]


@_op("tensor.gather")
def _tensor_gather(ctx: _OpCtx, a: dict):
    src = a["input"]
    if a["mask_pattern"] is not None:
        x = _need_tile(ctx, _to_tile_arg(src), "input")
        return _tile_as_tensor(_gather_mask_tile(ctx, x, _pattern(ctx, a["mask_pattern"]), a["output_dtype"]))
    x = _need_tile(ctx, _to_tile_arg(src), "input")
    idx = _need_tile(ctx, _to_tile_arg(a["index"]), "index")
    if a["dim"] is None:
        return _tile_as_tensor(_tile(_flat_gather(ctx, x.data, idx), x.dtype, idx.valid))
    dim = _as_int(a["dim"], "an axis") % x.rank
    if idx.rank != x.rank:
        ctx.fault("the index rank differs from the source's")
    sl = tuple(slice(0, idx.shape[k]) if k != dim else slice(None) for k in range(x.rank))
    part = x.data[sl]
    m = _box_mask(idx.shape, idx.valid)
    ids = np.where(m, idx.data.astype(np.int64), 0)
    if (ids < 0).any() or (ids >= part.shape[dim]).any():
        ctx.fault(f"an index is outside axis {dim} of extent {part.shape[dim]}", code="PTOC-E0503")
    out = np.take_along_axis(part, ids, axis=dim)
    return _tile_as_tensor(_tile(out, x.dtype, idx.valid))


@_op("tile.gather")
def _tile_gather(ctx: _OpCtx, a: dict):
    x = _need_tile(ctx, a["src"], "src")
    idx = _need_tile(ctx, a["indices"], "indices")
    return _tile(_flat_gather(ctx, x.data, idx), x.dtype, idx.valid, memory="Vec")


@_op("tensor.scatter")
def _tensor_scatter(ctx: _OpCtx, a: dict):
    inp = _need_tile(ctx, _to_tile_arg(a["input"]), "input")
    idx = _need_tile(ctx, _to_tile_arg(a["index"]), "index")
    src = _need_tile(ctx, _to_tile_arg(a["src"]), "src")
    out = inp.data.copy()
    m = _box_mask(src.shape, src.valid) & _box_mask(idx.shape, idx.valid)
    rows, ks = np.nonzero(m)
    cols = idx.data[rows, ks].astype(np.int64)
    if cols.size and (cols.min() < 0 or cols.max() >= out.shape[1]):
        ctx.fault("an index is outside the input's columns", code="PTOC-E0503")
    out[rows, cols] = src.data[rows, ks]
    return _tile_as_tensor(_tile(out, inp.dtype, inp.valid))


@_op("tile.scatter")
def _tile_scatter(ctx: _OpCtx, a: dict):
    dst, src = _need_tile(ctx, a["dst"], "dst"), _need_tile(ctx, a["src"], "src")
    idx = _need_tile(ctx, a["indexes"], "indexes")
    out = dst.data.copy()
    if idx.shape[1] == 1 and src.shape[1] != 1:  # one destination row per source row
        for i in range(min(src.valid[0], idx.valid[0])):
            r = int(idx.data[i, 0])
            if not 0 <= r < out.shape[0]:
                ctx.fault(f"row index {r} is outside the destination", code="PTOC-E0503")
            out[r, :src.valid[1]] = src.data[i, :src.valid[1]]
    else:
        m = _box_mask(src.shape, src.valid) & _box_mask(idx.shape, idx.valid)
        ii, jj = np.nonzero(m)
        rr = idx.data[ii, jj].astype(np.int64)
        if rr.size and (rr.min() < 0 or rr.max() >= out.shape[0]):
            ctx.fault("a row index is outside the destination", code="PTOC-E0503")
        out[rr, jj] = src.data[ii, jj]
    return _tile(out, dst.dtype, dst.valid, pad=dst.pad, memory=dst.memory, blayout=dst.blayout)


@_op("tile.gatherb")
def _tile_gatherb(ctx: _OpCtx, a: dict):
    x = _need_tile(ctx, a["src"], "src")
    off = _need_tile(ctx, a["offsets"], "offsets")
    out_dt = a["output_dtype"] if isinstance(a["output_dtype"], DType) else x.dtype
    raw = np.ascontiguousarray(x.data).view(np.uint8).reshape(-1)
    per = 32 // out_dt.bytes
    out = _undefined((off.shape[0], off.shape[1] * per), out_dt)
    for i in range(off.valid[0]):
        for j in range(off.valid[1]):
            o = int(off.data[i, j])
            if o < 0 or o + 32 > raw.size:
                ctx.fault(f"byte offset {o} reads outside the {raw.size}-byte source", code="PTOC-E0503")
            out[i, j * per:(j + 1) * per] = raw[o:o + 32].view(_np(out_dt))
    return _tile(out, out_dt, (off.valid[0], off.valid[1] * per), memory="Vec")


@_op("tile.mgather")
def _tile_mgather(ctx: _OpCtx, a: dict):
    mem = _need_tensor(ctx, a["mem"], "mem")
    idx = _need_tile(ctx, _to_tile_arg(a["idx"]), "idx")
    coalesce = a["coalesce"] if isinstance(a["coalesce"], str) else ("elem" if _as_int(a["coalesce"] or 0) else "row") \
        if a["coalesce"] is not None else "row"
    oob = a["gather_oob"] if isinstance(a["gather_oob"], str) else "undefined"
    target = _enum_member(a["target_memory"]) or "Vec"
    src = _read_logical(mem, mem.shape, "pl.tile.mgather")
    m = _box_mask(idx.shape, idx.valid)
    if coalesce == "elem":
        table = src.reshape(-1)
        ids, out_shape = idx.data.astype(np.int64), idx.shape
    else:
        table = src.reshape(-1, src.shape[-1])
        ids = idx.data.reshape(-1).astype(np.int64)
        m = m.reshape(-1)
        out_shape = (ids.size, table.shape[-1])
    n = table.shape[0]
    zero = np.zeros(ids.shape, dtype=bool)
    if oob == "clamp":
        ids = np.clip(ids, 0, n - 1)
    elif oob == "wrap":
        ids = np.mod(ids, n)
    elif oob == "zero":
        zero = (ids < 0) | (ids >= n)
        ids = np.where(zero, 0, ids)
    bad = m & ((ids < 0) | (ids >= n))
    if bad.any():
        ctx.fault(f"index {int(ids[bad][0])} is outside the {n} gathered units of the source", code="PTOC-E0503")
    out = _undefined(out_shape, mem.dtype)
    out[m] = table[ids[m]]
    if zero.any():
        out[zero & m] = 0
    if coalesce == "elem":
        valid = idx.valid
    else:
        valid = (int(m.sum()), table.shape[-1])
        if a["valid_shape"] is not None and target == "Mat":
            valid = ctx.frame.ints(a["valid_shape"])
    return _tile(out, mem.dtype, valid, memory=target)


@_op("tile.sort32", "tensor.sort32", "tile.mrgsort_format1", "tensor.mrgsort_format1", "tile.mrgsort_format2",
     "tensor.mrgsort_format2")
def _sort(ctx: _OpCtx, a: dict):
    raise Unsupported(ctx.name, "sorting is not modelled", ctx.span)
