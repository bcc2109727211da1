"""Synchronisation, barriers and cross-core transfer (AIC <-> AIV pipes).

ptoc carries these ops through: each is declared with its positional arity and accepts its
keyword attributes (`split=`, `id=`, `set_pipe=`, `event_id=`, ...) unchecked (`open_kwargs`). They
return nothing, except the pops, whose tile type comes from the statement's annotation (the IR text
always annotates them).

Names follow PyPTO: `system.bar_v/bar_m/bar_all/fence/sync_src/sync_dst/sync_set/sync_wait/set_ffts/
cacheinvalid/syncall`, the pipe set-up `system.aic_initialize_pipe/aiv_initialize_pipe/reserve_buffer/
import_peer_buffer`, the transfers `tile.tpush_to_aiv/tpush_to_aic/tpop_from_aic/tpop_from_aiv` and the
slot releases `system.tfree_to_aic/tfree_to_aiv`, reachable as `pl.tpush_to_aic(...)` etc.
The split-axis crossings `tile.aiv_shard` (cube -> vector: halve along the split axis) and
`tile.aic_gather` (vector -> cube: rejoin the halves), and their tensor forms, are typed here.
`pl.split(mode)` is the descriptor that `with pl.at(..., optimizations=[pl.split(...)])` carries.
"""

from __future__ import annotations

from ptoc.ir.nodes import BinOp, ConstInt, Expr, Type
from ptoc.ops.common import c, cint, const_int_arg, fmt_shape, new_tensor, new_tile, valid_shape_of
from ptoc.ops.registry import Args, NoPto, declare, register, short_name


def _nothing(doc: str):
    def rule(args: Args) -> Type | None:
        return None

    rule.__doc__ = doc
    return rule


def _takes_tile(doc: str, name: str = "tile"):
    def rule(args: Args) -> Type | None:
        args.tile(name)  # a tile, or unknown
        return None

    rule.__doc__ = doc
    return rule


def _takes_tensor(doc: str, name: str):
    def rule(args: Args) -> Type | None:
        args.tensor(name)
        return None

    rule.__doc__ = doc
    return rule


_SYNC = {
    "system.bar_v": "barrier on the vector pipe",
    "system.bar_m": "barrier on the matrix (cube) pipe",
    "system.bar_all": "barrier on all pipes",
    "system.fence": "memory fence",
    "system.sync_src": "set flag (set_pipe=, wait_pipe=, event_id=)",
    "system.sync_dst": "wait flag (set_pipe=, wait_pipe=, event_id=)",
    "system.syncall": "cross-core all-participant barrier (core_type=, mode=, ...)",
    "system.reserve_buffer": "reserve a named cross-core buffer (name=, size=, base=)",
    "system.import_peer_buffer": "import a peer core's reserved buffer (name=, ...)",
    "tile.tpop_from_aic": "pop a tile pushed by the cube core (split=, id=); typed by its annotation",
    "tile.tpop_from_aiv": "pop a tile pushed by a vector core (split=, id=); typed by its annotation",
}
for _name, _doc in _SYNC.items():
    register(_name, (), unit="sync", family="system", open_kwargs=True)(_nothing(_doc))



def _pipe_init(doc: str):
    def rule(args: Args) -> Type | None:
        for name in ("c2v_consumer_buf", "v2c_consumer_buf"):
            t = args.types.get(name)
            v = args.get(name)
            if v is not None and not isinstance(v, ConstInt) and t is not None and (
                    getattr(t, "dtype", None) is None or not t.dtype.is_int):
                args.fail(f"{args.op.name}: {name} is a buffer base address, an integer scalar", name,
                          hint="pass the base of a reserved or imported buffer, or 0")
        for key in ("dir_mask", "slot_size"):
            if key not in args.extra:
                args.fail(f"{args.op.name} needs {key}=", code="PTOC-E0201",
                          hint="e.g. dir_mask=1, slot_size=4096")
        return None

    rule.__doc__ = doc
    return rule


# PyPTO: the two consumer buffer bases are the op's arguments (positional, each 0 when left out), the
# pipe's geometry its attributes (dir_mask=, slot_size= required; slot_num=, local_slot_num=, id=)
for _name, _side in (("system.aic_initialize_pipe", "cube"), ("system.aiv_initialize_pipe", "vector")):
    register(_name, (), optional=(("c2v_consumer_buf", None), ("v2c_consumer_buf", None)), unit="sync",
             family="system", open_kwargs=True)(
        _pipe_init(f"set up the {_side} side of a cross-core pipe (c2v_consumer_buf, v2c_consumer_buf, "
                   "dir_mask=, slot_size=, slot_num=, local_slot_num=, id=)"))

register("system.sync_set", ("event_id",), unit="sync", family="system", open_kwargs=True)(
    _nothing("raise a cross-core event (pipe=, ffts_mode=, core_type=)"))
register("system.sync_wait", ("event_id",), unit="sync", family="system", open_kwargs=True)(
    _nothing("wait for a cross-core event (pipe=, core_type=)"))
register("system.set_ffts", ("workspace",), unit="sync", family="system", open_kwargs=True)(
    _takes_tensor("declare the A3 FFTS set-up workspace tensor", "workspace"))
register("system.cacheinvalid", (), optional=(("tensor", None), ("shapes", None), ("offsets", None)),
         unit="sync", family="system", open_kwargs=True)(
    _takes_tensor("invalidate the whole GM cache, or the line at a tensor window's base", "tensor"))

for _name, _doc in {
    "tile.tpush_to_aiv": "push a tile from the cube core to the vector cores (split=, id=, lane_stride=)",
    "tile.tpush_to_aic": "push a tile from a vector core to the cube core (split=, id=)",
    "system.tfree_to_aic": "release a popped slot back to the cube producer",
    "system.tfree_to_aiv": "release a popped slot back to the vector producer",
}.items():
    register(_name, ("tile",), unit="sync", family="system", open_kwargs=True)(_takes_tile(_doc))

register("split", ("mode",), unit="any", family="system", open_kwargs=True)(
    _nothing("split-mode descriptor of `with pl.at(..., optimizations=[pl.split(mode)])`"))

# ---------------------------------------------------------------------------------------------------
# Split-axis crossings. `split` is the mode code: 0 no split axis (the shape is kept), 1 UP_DOWN (axis
# 0), 2 LEFT_RIGHT (axis 1). A shard gives each of the two vector lanes a box of ceil(extent / 2) of
# the split axis, its valid extent bounded by lane 0's (see _lane_bound); a gather doubles it. The
# result is a fresh tile (no inherited layout) in the consuming lane's memory: Vec for a shard, Mat for
# a gather.
# ---------------------------------------------------------------------------------------------------

_SPLIT_MODES = {0: "NONE", 1: "UP_DOWN", 2: "LEFT_RIGHT"}


def _split_code(args: Args) -> int:
    if args.get("split") is None:
        args.fail(f"{args.op.name} needs split= (0 = NONE, 1 = UP_DOWN, 2 = LEFT_RIGHT)", code="PTOC-E0201",
                  hint=f"write pl.{args.op.name}(x, split=1) with the mode of the enclosing pl.split_aiv")
    split = const_int_arg(args, "split")
    if split not in _SPLIT_MODES:
        args.fail(f"{args.op.name}: split must be 0, 1 or 2, got {split}", "split",
                  hint="0 = NONE (no split axis), 1 = UP_DOWN (rows), 2 = LEFT_RIGHT (columns)")
    stride = args.get("lane_stride")
    if stride is not None and (cint(stride) is None or cint(stride) <= 0):
        args.fail(f"{args.op.name}: lane_stride must be a positive constant", "lane_stride")
    return split


def _resize(e: Expr, halve: bool, ceil: bool) -> Expr:
    v = cint(e)
    if v is not None:
        return ConstInt((v + 1) // 2 if halve else v * 2, e.dtype if isinstance(e, ConstInt) else c(0).dtype)
    if not halve:
        return BinOp("*", e, c(2))
    return BinOp("//", BinOp("+", e, c(1)) if ceil else e, c(2))


def _lane_bound(args: Args, valid: Expr, box: Expr) -> Expr:
    """The shard's valid extent on the split axis, one type for both lanes. Lane L starts at L * S
    (S = lane_stride=, else the box half H) and holds min(max(V, L * S) - L * S, S) cells, so lane 0
    holds the most: min(V, S, H). That bound is the type; the reference gives each lane its own
    extent (lane 1 of V = 127, H = 64 holds 63). PyPTO's deducer writes ceil(V / 2) here and
    re-derives the lanes' extents later; for V < 2H that under-states lane 0 (V = 40: 20, not 40),
    which ptoc, without that later pass, cannot afford. A runtime V keeps the ceil-div."""
    v, h = cint(valid), cint(box)
    if v is None or h is None:
        return _resize(valid, True, True)
    stride = cint(args.get("lane_stride")) if args.get("lane_stride") is not None else None
    bound = min(v, h, stride) if stride is not None else min(v, h)
    return ConstInt(bound, valid.dtype if isinstance(valid, ConstInt) else c(0).dtype)


def _full(valid: Expr, extent: Expr) -> bool:
    return valid == extent or (cint(valid) is not None and cint(valid) == cint(extent))


def _check_columns(args: Args, shape, valid, axis: int | None) -> None:
    """A shard moves the whole column box through the cube -> vector FIFO; a narrower valid column
    extent is restored afterwards only as a static, lane-independent extent."""
    if len(shape) != 2 or _full(valid[1], shape[1]):
        return
    what = f"{args.op.name}: the valid columns ({fmt_shape(valid)} of {fmt_shape(shape)})"
    hint = "make the columns fully valid before the crossing (pl.set_validshape(x, rows, cols))"
    if axis == 1:
        args.fail(f"{what} do not cover the box, so a LEFT_RIGHT split would give the lanes different "
                  "amounts of data", "tile", hint=hint)
    if cint(valid[1]) is None:
        args.fail(f"{what} are a runtime extent narrower than the box", "tile", hint=hint)
    if axis == 0 and not _full(valid[0], shape[0]):
        args.fail(f"{what} are narrowed while the split rows are partially valid too", "tile", hint=hint)
    if cint(valid[0]) is None:
        args.fail(f"{what} are narrowed while the valid rows are a runtime extent", "tile", hint=hint)


def _split_reshape(args: Args, halve: bool) -> Type | None:
    split = _split_code(args)
    t = args.type("tile")
    if t is None:
        return None
    tensor_form = args.op.name.startswith("tensor.")
    t = args.tensor("tile") if tensor_form else args.tile("tile")
    shape, valid = tuple(t.shape), tuple(valid_shape_of(t))
    axis = None if split == 0 else split - 1
    if axis is not None and len(shape) != 2:
        args.fail(f"{args.op.name}: a {_SPLIT_MODES[split]} split needs a 2-D operand, got rank {len(shape)}",
                  "tile", hint="reshape the operand to 2-D before the crossing")
    if halve:
        _check_columns(args, shape, valid, axis)
    if axis is not None:
        box = _resize(shape[axis], halve, False)
        shape = shape[:axis] + (box,) + shape[axis + 1:]
        valid = valid[:axis] + (_lane_bound(args, valid[axis], box) if halve else _resize(valid[axis], False, True),
                                ) + valid[axis + 1:]
    if tensor_form:
        return t if split == 0 else new_tensor(shape, t.dtype, valid)
    return new_tile(shape, t.dtype, "Vec" if halve else "Mat", valid)


def _shard(args: Args) -> Type | None:
    """cross from the cube to the vector lanes, halving the split axis (split=0: shape kept); Vec result"""
    return _split_reshape(args, True)


def _gather(args: Args) -> Type | None:
    """cross from the vector lanes to the cube, rejoining the split axis (split=0: shape kept); Mat result"""
    return _split_reshape(args, False)


_SPLIT_OPTS = (("split", None), ("lane_stride", None))
register("tile.aiv_shard", ("tile",), optional=_SPLIT_OPTS, unit="sync", family="system")(_shard)
register("tile.aic_gather", ("tile",), optional=_SPLIT_OPTS, unit="sync", family="system")(_gather)
register("tensor.aiv_shard", ("tile",), optional=_SPLIT_OPTS, unit="any", family="system")(_shard)
register("tensor.aic_gather", ("tile",), optional=_SPLIT_OPTS, unit="any", family="system")(_gather)
_NO_SPLIT_PTO = NoPto("a split-axis crossing becomes a tpush/tpop pair once the mixed kernel is split into "
                      "its cube and vector parts; write those (pl.tpush_to_aiv / pl.tpop_from_aic) instead")
declare("tile.aiv_shard", pto=_NO_SPLIT_PTO)
declare("tile.aic_gather", pto=_NO_SPLIT_PTO)
short_name("aiv_shard", tile="tile.aiv_shard", tensor="tensor.aiv_shard")
short_name("aic_gather", tile="tile.aic_gather", tensor="tensor.aic_gather")

for _short in ("tpush_to_aiv", "tpush_to_aic", "tpop_from_aic", "tpop_from_aiv"):
    short_name(_short, tile=f"tile.{_short}")
for _short in ("tfree_to_aic", "tfree_to_aiv"):
    short_name(_short, tile=f"system.{_short}")
for _short in ("aic_initialize_pipe", "aiv_initialize_pipe", "reserve_buffer", "import_peer_buffer"):
    short_name(_short, tile=f"system.{_short}")

__all__: list[str] = []


# Orchestration markers of PyPTO's language (python/pypto/language/op/tensor_ops.py); `pl.no_dep(t)` is
# `tensor.no_dep` of the task family (ptoc/ops/task.py). `pl.dump_tag(t)` asks the runtime to dump `t` at
# every later kernel dispatch that reads it. Both are the tensor itself as a value; ptoc keeps them as
# calls. They concern the runtime of an orchestration function only: no kernel code comes from them.
def _marker(doc: str):
    def rule(args: Args) -> Type | None:
        return args.tensor("tensor")

    rule.__doc__ = doc
    return rule


register("dump_tag", ("tensor",), unit="any", family="system",
         pto=NoPto("pl.dump_tag marks a tensor for the orchestration runtime's dump; a kernel has no use "
                   "for it"))(_marker("mark a tensor to be dumped at every later kernel dispatch reading it"))
