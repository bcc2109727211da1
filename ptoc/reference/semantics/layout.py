"""Reference semantics of the layout family: slice, extract, reshape, transpose, set_validshape,
fillpad, reinterpret_view, ci, tri and the tensor views."""

from __future__ import annotations


import numpy as np

from ptoc.ir import dtypes
from ptoc.ir.dtypes import DType

from ptoc.reference.values import (
    BOOL,
    GTensor,
    Scalar,
    Tile,
    _as_int,
    _box_mask,
    _gm_write,
    _is_float,
    _mask_box,
    _new_tensor,
    _np,
    _packed_strides,
    _pad_name,
    _read_logical,
    _row_major,
    _tensor_as_tile,
    _tile,
    _tile_as_tensor,
    _truthy,
    _window_addr,
    cast_array,
)
from ptoc.reference.semantics.common import _OpCtx, _enum_member, _need_tensor, _need_tile, _op, _to_tile_arg


# --------------------------------------------------------------------------------------------------
# Layout: slice, extract, reshape, transpose, set_validshape, fillpad, reinterpret_view, ci, tri
# --------------------------------------------------------------------------------------------------


def _window_valid(valid, offsets, sizes) -> list[int]:
    return [max(0, min(s, v - o)) for v, o, s in zip(valid, offsets, sizes)]


def _tile_window(ctx: _OpCtx, t: Tile, offsets, sizes) -> np.ndarray:
    if len(offsets) != t.rank or len(sizes) != t.rank:
        ctx.fault("the window's rank differs from the tile's")
    for o, s, d in zip(offsets, sizes, t.shape):
        if o < 0 or s < 0 or o + s > d:
            ctx.fault(f"window offsets {list(offsets)} extents {list(sizes)} leave the tile {list(t.shape)}",
                      code="PTOC-E0503")
    return t.data[tuple(slice(o, o + s) for o, s in zip(offsets, sizes))]


@_op("tile.slice")
def _tile_slice(ctx: _OpCtx, a: dict):
    t = _need_tile(ctx, a["tile"], "tile")
    sizes = ctx.frame.ints(a["shape"])
    offs = ctx.frame.ints(a["offset"], "an offset")
    data = _tile_window(ctx, t, offs, sizes)
    valid = _window_valid(t.valid, offs, sizes)
    if a["valid_shape"] is not None:
        ex = ctx.frame.ints(a["valid_shape"], "a valid extent")
        valid = [min(v, e) for v, e in zip(valid, ex)]
    pad = _enum_member(a["pad_value"]) if a["pad_value"] is not None else t.pad
    return _tile(data, t.dtype, valid, pad=_pad_name(pad), memory=t.memory, blayout=t.blayout)


@_op("tile.extract")
def _tile_extract(ctx: _OpCtx, a: dict):
    t = _need_tile(ctx, a["tile"], "tile")
    sizes = ctx.frame.ints(a["shape"])
    offs = (_as_int(a["index_row"], "an index"), _as_int(a["index_col"], "an index"))
    data = _tile_window(ctx, t, offs, sizes)
    return _tile(data, t.dtype, _window_valid(t.valid, offs, sizes), pad=t.pad,
                 memory=_enum_member(a["target_memory"]) or t.memory)


def _reshape_tile(ctx: _OpCtx, t: Tile, shape) -> Tile:
    shape = tuple(shape)
    if int(np.prod(shape, dtype=np.int64)) != t.data.size:
        ctx.fault(f"{list(t.shape)} has {t.data.size} elements, {list(shape)} has a different count")
    mask = _box_mask(t.shape, t.valid).reshape(shape)
    return _tile(t.data.reshape(shape), t.dtype, mask=mask, pad=t.pad, memory=t.memory, blayout=t.blayout)


@_op("tile.reshape")
def _tile_reshape(ctx: _OpCtx, a: dict):
    t = _need_tile(ctx, a["tile"], "tile")
    return _reshape_tile(ctx, t, ctx.frame.ints(a["shape"]))


def _axes(ctx: _OpCtx, a: dict, rank: int) -> tuple[int, int]:
    x, y = _as_int(a["axis1"], "an axis"), _as_int(a["axis2"], "an axis")
    if not (-rank <= x < rank and -rank <= y < rank):
        ctx.fault(f"axes {x}, {y} are out of range for rank {rank}")
    return x % rank, y % rank


@_op("tile.transpose")
def _tile_transpose(ctx: _OpCtx, a: dict):
    t = _need_tile(ctx, a["tile"], "tile")
    i, j = _axes(ctx, a, t.rank)
    valid = list(t.valid)
    valid[i], valid[j] = valid[j], valid[i]
    return _tile(np.swapaxes(t.data, i, j), t.dtype, valid, pad=t.pad, memory=t.memory)


@_op("tile.set_validshape")
def _tile_set_validshape(ctx: _OpCtx, a: dict):
    t = _need_tile(ctx, a["tile"], "tile")
    r, c = _as_int(a["valid_rows"], "a valid extent"), _as_int(a["valid_cols"], "a valid extent")
    if t.rank != 2 or not (0 <= r <= t.shape[0] and 0 <= c <= t.shape[1]):
        ctx.fault(f"valid region [{r}, {c}] does not fit the tile {list(t.shape)}", code="PTOC-E0503")
    return _tile(t.data, t.dtype, (r, c), pad=t.pad, memory=t.memory, blayout=t.blayout)


def _pad_fill(dt: DType, pad: str):
    nd = _np(dt)
    if pad == "zero":
        return np.zeros((), nd)
    if dt == BOOL:
        return np.array(pad == "max")
    if _is_float(dt):
        inf = np.array(np.inf if pad == "max" else -np.inf).astype(nd)
        if np.isinf(inf.astype(np.float64)):
            return inf
        import ml_dtypes

        fi = ml_dtypes.finfo(nd)
        return np.array(fi.max if pad == "max" else fi.min).astype(nd)
    info = np.iinfo(nd) if not dt.is_packed_fp4 else np.iinfo(np.uint8)
    return np.array(info.max if pad == "max" else info.min).astype(nd)


@_op("tile.fillpad")
def _tile_fillpad(ctx: _OpCtx, a: dict):
    t = _need_tile(ctx, a["tile"], "tile")
    pad = _enum_member(a["pad_value"]) or "zero"
    if pad not in ("zero", "max", "min"):
        ctx.fault(f"pad value {pad!r} does not fill")
    data = t.data.copy()
    data[~_box_mask(t.shape, t.valid)] = _pad_fill(t.dtype, pad)
    return Tile(data, t.dtype, t.shape, pad, t.memory, t.blayout)


def _reinterpret(data: np.ndarray, src: DType, dst: DType, col: bool) -> np.ndarray:
    nd = _np(dst)
    if data.ndim == 0:
        return np.ascontiguousarray(data).view(nd)
    if col and data.ndim >= 2:
        sw = np.ascontiguousarray(np.swapaxes(data, -1, -2))
        return np.swapaxes(sw.view(nd), -1, -2)
    return np.ascontiguousarray(data).view(nd)


@_op("tile.reinterpret_view")
def _tile_reinterpret_view(ctx: _OpCtx, a: dict):
    t = _need_tile(ctx, a["tile"], "tile")
    dst = a["dtype"]
    col = t.blayout == "col_major" and t.rank >= 2 and not (t.shape[-1] == 1 and t.shape[-2] != 1)
    ax = t.rank - 2 if col else t.rank - 1
    if (t.shape[ax] * t.dtype.bytes) % dst.bytes:
        ctx.fault(f"axis {ax} of {list(t.shape)} is not a whole number of {dst.name} elements")
    data = _reinterpret(t.data, t.dtype, dst, col)
    valid = list(t.valid)
    valid[ax] = valid[ax] * t.dtype.bytes // dst.bytes
    r = _tile(data, dst, valid, pad=t.pad if t.pad in ("zero", None) else None, memory=t.memory, blayout=t.blayout)
    if a["shape"] is not None:
        r = _reshape_tile(ctx, r, ctx.frame.ints(a["shape"]))
    return r


def _ci_values(ctx: _OpCtx, a: dict) -> Tile:
    shape = ctx.frame.ints(a["shape"])
    dt = a["dtype"] if isinstance(a["dtype"], DType) else dtypes.INT32
    start = _as_int(a["start"], "a start value")
    desc = a["descending"] is not None and _truthy(a["descending"])
    k = np.arange(int(np.prod(shape, dtype=np.int64)), dtype=np.int64).reshape(shape)
    v = start - k if desc else start + k
    return _tile(v.astype(_np(dt)), dt, memory="Vec")


@_op("tile.ci")
def _tile_ci(ctx: _OpCtx, a: dict):
    return _ci_values(ctx, a)


@_op("tensor.ci", "tensor.arange")
def _tensor_ci(ctx: _OpCtx, a: dict):
    return _tile_as_tensor(_ci_values(ctx, a))


@_op("tile.tri")
def _tile_tri(ctx: _OpCtx, a: dict):
    shape = ctx.frame.ints(a["shape"])
    dt = a["dtype"] if isinstance(a["dtype"], DType) else dtypes.INT32
    d = _as_int(a["diagonal"], "a diagonal offset")
    upper = a["upper"] is not None and _truthy(a["upper"])
    i = np.arange(shape[0])[:, None]
    j = np.arange(shape[1])[None, :]
    m = (j >= i + d) if upper else (j <= i + d)
    valid = ctx.frame.ints(a["valid_shape"]) if a["valid_shape"] is not None else shape
    return _tile(m.astype(_np(dt)), dt, valid, memory="Vec")


# tensor views ------------------------------------------------------------------------------------------

def _view(t: GTensor, **kw) -> GTensor:
    fields = dict(buf=t.buf, dtype=t.dtype, shape=t.shape, strides=t.strides, base=t.base, layout=t.layout,
                  valid=t.valid, pad=t.pad, nz=t.nz, blocked=t.blocked)
    fields.update(kw)
    return GTensor(**fields)


def _is_packed(t: GTensor) -> bool:
    return t.nz is None and not t.blocked and t.strides == _packed_strides(t.shape, t.layout)


def _materialize(t: GTensor) -> GTensor:
    """A packed ND copy of `t` (its logical elements, valid region kept)."""
    arr = _read_logical(t, t.shape)
    n = _new_tensor(t.shape, t.dtype)
    n.buf.elems(t.dtype)[:arr.size] = arr.reshape(-1)
    n.valid, n.pad = t.valid, t.pad
    return n


def _window_view(ctx: _OpCtx, t: GTensor, offs, sizes, valid) -> GTensor:
    """The view of window (offs, sizes) of `t`: NZ tensors by whole [R, C] planes, others by strides."""
    if t.nz is not None:
        lead, rows, cols, c0 = t.nz
        if tuple(offs[-2:]) != (0, 0) or tuple(sizes[-2:]) != t.shape[-2:]:
            ctx.fault("a slice of an NZ tensor must keep the whole [R, C] plane")
        base = t.base + sum(o * s for o, s in zip(offs[:-2], lead)) * rows * cols * t.dtype.bytes
    else:
        base = t.base + sum(o * s for o, s in zip(offs, t.strides)) * t.dtype.bytes
    return _view(t, shape=tuple(sizes), base=base, valid=tuple(valid))


def _drop_dims(v: GTensor, drop: set[int], rank: int) -> None:
    keep = [i for i in range(rank) if i not in drop]
    v.shape = tuple(v.shape[i] for i in keep)
    v.valid = tuple(v.valid[i] for i in keep)
    if v.nz is not None:
        lead = [v.nz[0][i] for i in keep if i < rank - 2]
        v.nz = (tuple(lead),) + tuple(v.nz[1:])
    else:
        v.strides = tuple(v.strides[i] for i in keep)


@_op("tensor.slice")
def _tensor_slice(ctx: _OpCtx, a: dict):
    t = _need_tensor(ctx, a["tensor"], "tensor")
    sizes = ctx.frame.ints(a["shape"])
    offs = ctx.frame.ints(a["offset"], "an offset")
    if len(sizes) != t.rank or len(offs) != t.rank:
        ctx.fault("the window's rank differs from the tensor's")
    clamp = a["clamp"] is not None and _truthy(a["clamp"])
    for o, s, d in zip(offs, sizes, t.shape):
        if o < 0 or (not clamp and o + s > d):
            ctx.fault(f"window offsets {list(offs)} extents {list(sizes)} leave the tensor {list(t.shape)}",
                      code="PTOC-E0503")
    valid = _window_valid(t.valid or t.shape, offs, sizes)
    if a["valid_shape"] is not None and len(a["valid_shape"]):
        ex = ctx.frame.ints(a["valid_shape"], "a valid extent")
        valid = [min(v, e) for v, e in zip(valid, ex)]
    v = _window_view(ctx, t, offs, sizes, valid)
    if a["drop_dims"] is not None:
        _drop_dims(v, {d % len(sizes) for d in ctx.frame.ints(a["drop_dims"], "an axis")}, len(sizes))
    if v.valid == v.shape:
        v.valid = None
    pad = _enum_member(a["pad_value"])
    if pad is not None:
        v.pad = _pad_name(pad)
    return v


@_op("tensor.assemble")
def _tensor_assemble(ctx: _OpCtx, a: dict):
    t = _need_tensor(ctx, a["target"], "target")
    src = _to_tile_arg(a["source"])
    src = _need_tile(ctx, src, "source")
    offs = ctx.frame.ints(a["offset"], "an offset")
    if src.rank != t.rank:
        ctx.fault("source and target ranks differ")
    addr = _window_addr(t, offs, src.shape)
    data = src.data if src.dtype == t.dtype else cast_array(src.data, src.dtype, t.dtype, "rint")
    atomic = a["atomic"] is not None and _truthy(a["atomic"]) if isinstance(a["atomic"], Scalar) else False
    _gm_write(t, addr, _box_mask(src.shape, src.valid), data, "pl.tensor.assemble", ctx.span, atomic=atomic)
    return t


def _region_after_reshape(shape, valid, new_shape) -> tuple[int, ...] | None:
    if valid is None:
        return None
    return _mask_box(_box_mask(shape, valid).reshape(new_shape))


@_op("tensor.reshape")
def _tensor_reshape(ctx: _OpCtx, a: dict):
    t = _need_tensor(ctx, a["tensor"], "tensor")
    shape = ctx.frame.ints(a["shape"])
    if int(np.prod(shape, dtype=np.int64)) != int(np.prod(t.shape, dtype=np.int64)):
        ctx.fault(f"{list(t.shape)} and {list(shape)} hold different element counts")
    if t.nz is not None:
        if len(shape) != 1:
            ctx.fault("an NZ tensor reshapes only to the flat [N] (kept ND)")
        return GTensor(t.buf, t.dtype, tuple(shape), (1,), t.base, "ND")
    src = t if (t.layout == "ND" and _is_packed(t)) else _materialize(t)
    valid = _region_after_reshape(t.shape, t.valid, shape)
    if a["valid_shape"] is not None:
        ex = ctx.frame.ints(a["valid_shape"], "a valid extent")
        valid = tuple(min(v, e) for v, e in zip(valid or shape, ex))
    return GTensor(src.buf, t.dtype, tuple(shape), _row_major(shape), src.base, "ND",
                   valid if valid != tuple(shape) else None, t.pad)


@_op("tensor.view")
def _tensor_view(ctx: _OpCtx, a: dict):
    t = _need_tensor(ctx, a["tensor"], "tensor")
    layout = _enum_member(a["layout"]) or t.layout
    if t.nz is not None or t.blocked:
        ctx.fault("an NZ tensor has no view")
    if a["shape"] is None:
        if layout == t.layout:
            return t
        shape = t.shape[:-2] + (t.shape[-1], t.shape[-2])
        strides = t.strides[:-2] + (t.strides[-1], t.strides[-2])
        valid = None if t.valid is None else t.valid[:-2] + (t.valid[-1], t.valid[-2])
        v = _view(t, shape=shape, strides=strides, layout=layout, valid=valid)
    else:
        shape = ctx.frame.ints(a["shape"])
        if tuple(shape) == t.shape and layout == t.layout:
            v = _view(t)
        else:
            if not _is_packed(t):
                ctx.fault("a strided tensor cannot be shape-reinterpreted")
            v = _view(t, shape=tuple(shape), strides=_packed_strides(shape, layout), layout=layout,
                      valid=_region_after_reshape(t.shape, t.valid, shape) if layout == t.layout == "ND" else None)
    if a["valid_shape"] is not None:
        v.valid = ctx.frame.ints(a["valid_shape"], "a valid extent")
    return v


@_op("tensor.reinterpret_view")
def _tensor_reinterpret_view(ctx: _OpCtx, a: dict):
    t = _need_tensor(ctx, a["tensor"], "tensor")
    dst = a["dtype"]
    if not _is_packed(t):
        ctx.fault("the source must be packed")
    ax = t.rank - 2 if t.layout == "DN" else t.rank - 1
    shape = list(t.shape)
    if (shape[ax] * t.dtype.bytes) % dst.bytes:
        ctx.fault(f"axis {ax} is not a whole number of {dst.name} elements")
    shape[ax] = shape[ax] * t.dtype.bytes // dst.bytes
    if a["shape"] is not None:
        shape = list(ctx.frame.ints(a["shape"]))
    valid = None
    if t.valid is not None:
        valid = list(t.valid)
        valid[ax] = valid[ax] * t.dtype.bytes // dst.bytes
    if t.base % dst.bytes:
        ctx.fault("the view starts inside a target element", code="PTOC-E0503")
    return GTensor(t.buf, dst, tuple(shape), _packed_strides(shape, t.layout), t.base, t.layout,
                   tuple(valid) if valid else None, t.pad if t.pad in ("zero", None) else None)


@_op("tensor.transpose")
def _tensor_transpose(ctx: _OpCtx, a: dict):
    t = _need_tensor(ctx, a["tensor"], "tensor")
    x = _tensor_as_tile(t)
    i, j = _axes(ctx, a, x.rank)
    valid = list(x.valid)
    valid[i], valid[j] = valid[j], valid[i]
    if a["valid_shape"] is not None:
        ex = ctx.frame.ints(a["valid_shape"], "a valid extent")
        valid = [min(v, e) for v, e in zip(valid, ex)]
    return _tile_as_tensor(_tile(np.swapaxes(x.data, i, j), x.dtype, valid))


@_op("tensor.set_validshape")
def _tensor_set_validshape(ctx: _OpCtx, a: dict):
    t = _need_tensor(ctx, a["tensor"], "tensor")
    r, c = _as_int(a["valid_rows"], "a valid extent"), _as_int(a["valid_cols"], "a valid extent")
    if t.rank != 2 or not (0 <= r <= t.shape[0] and 0 <= c <= t.shape[1]):
        ctx.fault(f"valid region [{r}, {c}] does not fit the tensor {list(t.shape)}", code="PTOC-E0503")
    return _view(t, valid=None if (r, c) == t.shape else (r, c))
