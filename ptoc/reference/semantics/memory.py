"""Reference semantics of the memory family: load, store, create, full, read, write, move, alloc,
core ids, synchronisation and cross-core push/pop."""

from __future__ import annotations


import numpy as np

from ptoc.ir import dtypes
from ptoc.ir.dtypes import DType

from ptoc.reference.values import (
    BOOL,
    FRACTAL_ROWS,
    INDEX,
    Ptr,
    Scalar,
    Tile,
    Unsupported,
    _addr,
    _as_int,
    _block,
    _box_mask,
    _clip_valid,
    _fault,
    _gm_read,
    _gm_write,
    _is_float,
    _is_partition,
    _new_tensor,
    _np,
    _scalar,
    _tile,
    _truthy,
    _unblock,
    _window_addr,
    _wrap_int,
    cast_array,
)
from ptoc.reference.semantics.common import _OpCtx, _enum_member, _need_tensor, _need_tile, _op


# --------------------------------------------------------------------------------------------------
# Memory: load, store, create, full, read, write, move, alloc
# --------------------------------------------------------------------------------------------------


@_op("tile.load")
def _load(ctx: _OpCtx, a: dict):
    t = _need_tensor(ctx, a["tensor"], "tensor")
    offs = ctx.frame.ints(a["offsets"], "an offset")
    sizes = ctx.frame.ints(a["shapes"], "an extent")
    vs = ctx.frame.ints(a["valid_shapes"], "a valid extent") if a["valid_shapes"] is not None else sizes
    if len(vs) != len(sizes):
        ctx.fault("valid_shapes and shapes differ in rank")
    addr = _window_addr(t, offs, sizes)
    wmask = _box_mask(sizes, _clip_valid(sizes, vs))
    data = _gm_read(t, addr, wmask, f"pl.tile.load from {t.buf.name or 'a tensor'}", ctx.span)
    if _is_partition(t, sizes):
        data, wmask = _unblock(data), _unblock(wmask)
    if a["transpose"] is not None and _truthy(a["transpose"]) and data.ndim >= 2:
        data, wmask = np.swapaxes(data, -1, -2), np.swapaxes(wmask, -1, -2)
    mem = _enum_member(a["target_memory"]) or "Vec"
    return _tile(data, t.dtype, mask=wmask, pad=t.pad, memory=mem,
                 blayout="col_major" if t.layout == "DN" and mem == "Vec" else None)


def fault_if_uninitialized(ctx: _OpCtx, t: Tile, what: str) -> None:
    """PTOC-E0672: `t` comes straight from tile.create, whose buffer holds whatever was there before."""
    if t.uninit:
        ctx.fault(f"{what} reads a tile that pl.tile.create allocated and nothing has written: its contents "
                  "are undefined on the hardware", code="PTOC-E0672",
                  hint="initialise it first (pl.tile.full(..., value=0.0) for an accumulator), or start the "
                       "accumulation with pl.tile.matmul and continue with pl.tile.matmul_acc")


@_op("tile.store")
def _store(ctx: _OpCtx, a: dict):
    tile = _need_tile(ctx, a["tile"], "tile")
    fault_if_uninitialized(ctx, tile, "the store")
    t = _need_tensor(ctx, a["output"], "output")
    offs = ctx.frame.ints(a["offsets"], "an offset")
    data, mask = tile.data, _box_mask(tile.shape, tile.valid)
    if a["shapes"] is not None:
        sizes = ctx.frame.ints(a["shapes"], "an extent")
    elif tile.rank < t.rank:
        sizes = (1,) * (t.rank - tile.rank) + tile.shape
    elif tile.rank > t.rank and all(d == 1 for d in tile.shape[:tile.rank - t.rank]):
        sizes = tile.shape[tile.rank - t.rank:]  # a [1, n] tile into a rank-1 tensor
    else:
        sizes = tile.shape
    if _is_partition(t, sizes) and tile.rank == 2 and tile.shape == (sizes[2] * FRACTAL_ROWS, sizes[1] * sizes[4]):
        data, mask = _block(data, sizes[4]), _block(mask, sizes[4])
    elif tuple(sizes) != tile.shape:
        if data.size != int(np.prod(sizes, dtype=np.int64)):
            ctx.fault(f"a {list(tile.shape)} tile does not fill the window {list(sizes)}", code="PTOC-E0503")
        data, mask = data.reshape(sizes), mask.reshape(sizes)
    if tile.dtype != t.dtype:
        data = cast_array(data, tile.dtype, t.dtype, "rint")
    atomic = ctx.extra.get("atomic")
    if isinstance(atomic, Scalar):
        atomic_add = bool(atomic.value)
    else:
        member = _enum_member(atomic)
        atomic_add = member is not None and member.lower() not in ("none", "null", "false")
    addr = _window_addr(t, offs, sizes)
    _gm_write(t, addr, mask, data, f"pl.tile.store into {t.buf.name or 'a tensor'}", ctx.span, atomic=atomic_add)
    return t


def _fill_value(ctx: _OpCtx, v, dt: DType):
    if isinstance(v, Scalar):
        v = v.value
    if v is None:
        ctx.fault("needs value=")
    if dt.is_packed_fp4:
        return _wrap_int(int(v), dtypes.UINT8)
    return _scalar(v, dt).value


@_op("tile.create")
def _tile_create(ctx: _OpCtx, a: dict):
    shape = ctx.frame.ints(a["shape"])
    dt = a["dtype"]
    if not isinstance(dt, DType):
        ctx.fault("needs dtype=")
    # PyPTO's tile.create allocates a buffer and emits no instruction (its PTO codegen writes nothing):
    # the contents are whatever the buffer held. The tile is marked so that an op reading it as data
    # (an accumulator, a stored tile) is reported; as a destination or scratch operand it is fine.
    t = _tile(np.zeros(shape, dtype=_np(dt)), dt, memory=_enum_member(a["target_memory"]) or "Vec")
    t.uninit = True
    return t


@_op("tile.full")
def _tile_full(ctx: _OpCtx, a: dict):
    shape = ctx.frame.ints(a["shape"])
    dt = a["dtype"]
    if not isinstance(dt, DType):
        ctx.fault("needs dtype=")
    return _tile(np.full(shape, _fill_value(ctx, a["value"], dt), dtype=_np(dt)), dt,
                 memory=_enum_member(a["target_memory"]) or "Vec")


@_op("tensor.create")
def _tensor_create(ctx: _OpCtx, a: dict):
    shape = ctx.frame.ints(a["shape"])
    dt = a["dtype"]
    if not isinstance(dt, DType):
        ctx.fault("needs dtype=")
    layout = _enum_member(a["layout"]) or "ND"
    if layout != "ND":
        raise Unsupported("tensor.create", f"layout {layout}", ctx.span)
    return _new_tensor(shape, dt, fill=np.zeros((), _np(dt)))


@_op("tensor.full")
def _tensor_full(ctx: _OpCtx, a: dict):
    shape = ctx.frame.ints(a["shape"])
    dt = a["dtype"]
    if not isinstance(dt, DType):
        ctx.fault("needs dtype=")
    return _new_tensor(shape, dt, fill=_fill_value(ctx, a["value"], dt))


@_op("tile.alloc", "tensor.alloc")
def _alloc(ctx: _OpCtx, a: dict):
    return Ptr()


def _index_tuple(ctx: _OpCtx, v, shape) -> tuple[int, ...]:
    idx = ctx.frame.ints(v, "an index")
    if len(idx) != len(shape) or any(not 0 <= i < s for i, s in zip(idx, shape)):
        ctx.fault(f"index {list(idx)} is outside the shape {list(shape)}", code="PTOC-E0503")
    return idx


@_op("tile.read")
def _tile_read(ctx: _OpCtx, a: dict):
    t = _need_tile(ctx, a["tile"], "tile")
    idx = _index_tuple(ctx, a["indices"], t.shape)
    v = t.data[idx]
    return Scalar(float(v) if _is_float(t.dtype) else (bool(v) if t.dtype == BOOL else int(v)), t.dtype)


@_op("tile.write")
def _tile_write(ctx: _OpCtx, a: dict):
    t = _need_tile(ctx, a["tile"], "tile")
    idx = _index_tuple(ctx, a["indices"], t.shape)
    data = t.data.copy()
    data[idx] = _fill_value(ctx, a["value"], t.dtype)
    return Tile(data, t.dtype, t.valid, t.pad, t.memory, t.blayout)


@_op("tensor.read")
def _tensor_read(ctx: _OpCtx, a: dict):
    t = _need_tensor(ctx, a["tensor"], "tensor")
    idx = _index_tuple(ctx, a["indices"], t.shape)
    addr = _addr(t, [np.array([i], dtype=np.int64) for i in idx])
    v = _gm_read(t, addr.reshape(1), None, "pl.tensor.read", ctx.span)[0]
    return Scalar(float(v) if _is_float(t.dtype) else (bool(v) if t.dtype == BOOL else int(v)), t.dtype)


@_op("tensor.write")
def _tensor_write(ctx: _OpCtx, a: dict):
    t = _need_tensor(ctx, a["tensor"], "tensor")
    idx = _index_tuple(ctx, a["indices"], t.shape)
    addr = _addr(t, [np.array([i], dtype=np.int64) for i in idx])
    value = np.array([_fill_value(ctx, a["value"], t.dtype)], dtype=_np(t.dtype))
    _gm_write(t, addr.reshape(1), None, value, "pl.tensor.write", ctx.span)
    return t


@_op("tensor.dim")
def _tensor_dim(ctx: _OpCtx, a: dict):
    t = _need_tensor(ctx, a["tensor"], "tensor")
    ax = _as_int(a["axis"], "an axis")
    if not -t.rank <= ax < t.rank:
        ctx.fault(f"axis {ax} is out of range for rank {t.rank}")
    return Scalar(t.shape[ax], INDEX)


@_op("tile.move")
def _move(ctx: _OpCtx, a: dict):
    t = _need_tile(ctx, a["tile"], "tile")
    mem = _enum_member(a["target_memory"]) or t.memory
    return Tile(t.data.copy(), t.dtype, t.valid, t.pad, mem, _enum_member(a["blayout"]) or t.blayout)


@_op("tile.get_block_idx")
def _block_idx(ctx: _OpCtx, a: dict):
    return Scalar(ctx.frame.m.block_idx, dtypes.BY_NAME["UINT64"])


@_op("tile.get_block_num")
def _block_num(ctx: _OpCtx, a: dict):
    return Scalar(ctx.frame.m.block_num, dtypes.BY_NAME["UINT64"])


@_op("tile.get_subblock_idx")
def _subblock_idx(ctx: _OpCtx, a: dict):
    from ptoc.reference import pipes

    run = pipes.current()
    lane = run[0].lane(run[1]) if run is not None else ctx.frame.m.subblock_idx
    return Scalar(lane, dtypes.BY_NAME["UINT64"])


# synchronisation: nothing to do ------------------------------------------------------------------------

@_op("system.bar_v", "system.bar_m", "system.bar_all", "system.fence", "system.sync_src", "system.sync_dst",
     "system.syncall", "system.sync_set", "system.sync_wait", "system.set_ffts", "system.cacheinvalid", "split")
def _nothing(ctx: _OpCtx, a: dict):
    return None


@_op("system.reserve_buffer", "system.import_peer_buffer")
def _pipe_buffer(ctx: _OpCtx, a: dict):
    return Scalar(0, dtypes.INT32)


@_op("system.aic_initialize_pipe", "system.aiv_initialize_pipe")
def _init_pipe(ctx: _OpCtx, a: dict):
    from ptoc.reference import pipes

    run = pipes.current()
    if run is not None:
        slots = ctx.extra.get("slot_num")
        run[0].init(_as_int(slots, "slot_num") if slots is not None else None)
    return None


@_op("system.tfree_to_aic", "system.tfree_to_aiv")
def _tfree(ctx: _OpCtx, a: dict):
    from ptoc.reference import pipes

    run = pipes.current()
    if run is not None:
        _pipe_call(ctx, lambda: run[0].free(run[1], ctx.name))
        # the freed slot is the producer's again: the tile popped from it (this operand) is garbage now
        pipes.poison(a.get("tile"))
    return None


def _pipe_call(ctx: _OpCtx, fn):
    from ptoc.reference import pipes

    try:
        return fn()
    except pipes.PipeFault as e:
        _fault(str(e), ctx.span, code="PTOC-E0504")


def _split_mode(v) -> int:
    if v is None:
        return 0
    m = _enum_member(v)
    if m is not None:
        return {"NONE": 0, "UP_DOWN": 1, "LEFT_RIGHT": 2}.get(m, 0)
    return _as_int(v, "a split mode")


def _lane_part(t: Tile, split: int, lane: int) -> Tile:
    """Lane `lane`'s part of a tile a cube push hands to two vector lanes: the half along the split axis
    (its valid extent the part of the valid region inside the half), or a copy for split 0."""
    if split not in (1, 2) or t.rank != 2:
        return Tile(t.data.copy(), t.dtype, t.valid, t.pad, t.memory, t.blayout)
    ax = 0 if split == 1 else 1
    h = (t.shape[ax] + 1) // 2  # the ceiling half: an odd extent leaves lane 1 one cell short
    sl = [slice(None), slice(None)]
    sl[ax] = slice(lane * h, (lane + 1) * h)
    part = t.data[tuple(sl)].copy()
    if part.shape[ax] < h:
        pad_width = [(0, 0), (0, 0)]
        pad_width[ax] = (0, h - part.shape[ax])
        part = np.pad(part, pad_width)
    valid = list(t.valid)
    valid[ax] = _lane_extent(t.valid[ax], h, lane)
    return _tile(part, t.dtype, valid, pad=t.pad, memory=t.memory)


def _lane_join(parts: list, split: int) -> Tile:
    """The tile a cube pop receives from the two lanes: the halves side by side along the split axis (the
    valid region lane 0's extent plus lane 1's when lane 0's half is full), or lane 0's tile for split 0."""
    a, b = parts[0], parts[1]
    if split not in (1, 2) or a.rank != 2:
        return a
    ax = 0 if split == 1 else 1
    valid = list(a.valid)
    valid[ax] = a.valid[ax] + (b.valid[ax] if a.valid[ax] == a.shape[ax] else 0)
    return _tile(np.concatenate([a.data, b.data], axis=ax), a.dtype, valid, pad=a.pad, memory=a.memory)


@_op("tile.tpush_to_aiv", "tile.tpush_to_aic")
def _tpush(ctx: _OpCtx, a: dict):
    from ptoc.reference import pipes

    t = _need_tile(ctx, a["tile"], "tile")
    split = _split_mode(ctx.extra.get("split"))
    run = pipes.current()
    if run is not None:
        copy = Tile(t.data.copy(), t.dtype, t.valid, t.pad, t.memory, t.blayout)
        _pipe_call(ctx, lambda: run[0].push(run[1], ctx.name, copy, part=lambda v, i: _lane_part(v, split, i)))
        return None
    if split in (1, 2) and t.rank == 2:
        for i in range(2):
            ctx.frame.m.fifo.append(_lane_part(t, split, i))
    else:
        ctx.frame.m.fifo.append(t)
    return None


def _lane_extent(valid: int, step: int, lane: int) -> int:
    """Valid extent of the split axis on vector lane `lane` when lane L starts at L * step:
    min(max(V, L * step) - L * step, step), PyPTO's per-lane clamp (LowerAutoVectorSplit)."""
    start = lane * step
    return min(max(valid, start) - start, step)


@_op("tile.aiv_shard")
def _aiv_shard(ctx: _OpCtx, a: dict):
    """This vector lane's half of a cube tile: the box is ceil(extent / 2) along the split axis, lane L
    reads from L * step (step = lane_stride=, else the box half) and holds the clamped valid extent."""
    t = _need_tile(ctx, a["tile"], "tile")
    split = _split_mode(a.get("split") if a.get("split") is not None else ctx.extra.get("split"))
    if split == 0 or t.rank != 2:
        return Tile(t.data.copy(), t.dtype, t.valid, t.pad, "Vec", t.blayout)
    ax = 0 if split == 1 else 1
    half = (t.shape[ax] + 1) // 2
    stride = a.get("lane_stride") if a.get("lane_stride") is not None else ctx.extra.get("lane_stride")
    step = half if stride is None else _as_int(stride, "a lane stride")
    lane = ctx.frame.m.subblock_idx
    start = lane * step
    shape = list(t.shape)
    shape[ax] = half
    data = np.zeros(shape, dtype=t.data.dtype)
    take = max(0, min(half, t.shape[ax] - start))
    src = [slice(None), slice(None)]
    src[ax] = slice(start, start + take)
    dst = [slice(None), slice(None)]
    dst[ax] = slice(0, take)
    data[tuple(dst)] = t.data[tuple(src)]
    valid = list(t.valid)
    valid[ax] = min(_lane_extent(t.valid[ax], step, lane), half)
    return _tile(data, t.dtype, valid, pad=t.pad, memory="Vec")


@_op("tile.tpop_from_aic", "tile.tpop_from_aiv")
def _tpop(ctx: _OpCtx, a: dict):
    from ptoc.reference import pipes

    run = pipes.current()
    if run is not None:
        split = _split_mode(ctx.extra.get("split"))
        t = _pipe_call(ctx, lambda: run[0].pop(run[1], ctx.name, join=lambda ps: _lane_join(ps, split)))
        # the popped tile is the slot itself: freeing the slot overwrites it
        t.memory = "Vec" if ctx.name.endswith("aic") else "Mat"
        return t
    if not ctx.frame.m.fifo:
        raise Unsupported(ctx.name, "nothing was pushed in this run: the producer runs in another kernel", ctx.span)
    t = ctx.frame.m.fifo.pop(0)
    return Tile(t.data.copy(), t.dtype, t.valid, t.pad, "Vec" if ctx.name.endswith("aic") else "Mat", t.blayout)
