"""Distributed ops: the `pld` namespace (`import pypto.language.distributed as pld`).

Cross-rank communication between the devices of one program, as PyPTO defines it
(python/pypto/language/distributed, src/ir/op/distributed). IR names keep the `pld.` prefix.

- Window set-up (host orchestrator): `pld.tensor.alloc_window_buffer(size)` reserves a per-rank
  window of `size` bytes and returns a `pl.Ptr`; `pld.tensor.window(buf, shape, dtype=)` views it as a
  `pld.DistributedTensor[shape, dtype]`.
- Queries: `pld.system.world_size()` (INT64), `pld.system.get_comm_ctx(t)` (a `pld.CommCtx`),
  `pld.system.rank(ctx)` / `pld.system.nranks(ctx)` (INT32).
- Point-to-point: `pld.tile.remote_load` (a tile read from a peer's slice), `pld.tile.remote_store` /
  `pld.tensor.remote_store` (a local tile or tensor written into a peer's slice), `pld.tensor.put/get`
  and their staged tile forms `pld.tile.put/get`.
- Signals: `pld.system.notify`, `pld.system.wait`, `pld.system.defer_wait`.
- Collectives: `pld.tensor.allreduce/barrier/broadcast/reduce_scatter` return their first operand's
  type; `pld.tensor.allgather/all_to_all/all_to_all_v` return their `target`'s.

The front end, the type rules and the passes accept them; codegen has no `.pto` form for them yet
(PTOC-E0400 with a hint).
"""

from __future__ import annotations

from ptoc.ir import dtypes
from ptoc.ir.nodes import (
    CommCtxType,
    DistributedTensorType,
    ListExpr,
    PtrType,
    ScalarType,
    TensorType,
    TileType,
    TupleExpr,
    Type,
)
from ptoc.ops.common import cint, dtype_arg, enum_arg, int_list, new_tile
from ptoc.ops.registry import Args, NoPto, kind_of, register, short_name

_NO_PTO = NoPto("distributed (pld) ops are not supported by ptoc's code generator yet; the program checks "
                "and runs through the passes, but compile it with PyPTO for now")


def _window(args: Args, name: str) -> DistributedTensorType | None:
    """Argument `name` must be a window-bound distributed tensor (or of unknown type)."""
    t = args.types.get(name)
    if t is None:
        return None
    if not isinstance(t, DistributedTensorType):
        what = "a plain tensor" if isinstance(t, TensorType) else f"a {kind_of(t)}"
        args.fail(f"{args.op.name}: {name!r} must be a pld.DistributedTensor, got {what}", name,
                  hint="make it with pld.tensor.window(pld.tensor.alloc_window_buffer(...), shape, dtype=...)")
    return t


def _tensor_like(args: Args, name: str) -> TensorType | None:
    """A plain or distributed tensor (or unknown)."""
    t = args.types.get(name)
    if t is not None and not isinstance(t, TensorType):
        args.fail(f"{args.op.name}: {name!r} must be a tensor or pld.DistributedTensor, got a {kind_of(t)}", name)
    return t


def _int_scalar(args: Args, name: str) -> None:
    t = args.types.get(name)
    if t is None:
        return
    if not isinstance(t, ScalarType) or not t.dtype.is_int:
        args.fail(f"{args.op.name}: {name!r} must be an integer scalar", name)


def _offsets(args: Args, name: str, rank: int | None, what: str = "target") -> tuple | None:
    items = int_list(args, name, required=False)
    if items is not None and rank is not None and len(items) != rank:
        args.fail(f"{args.op.name}: {name} has {len(items)} entries but the {what} has rank {rank}", name,
                  hint=f"give one {name[:-1] if name.endswith('s') else name} per dimension of the {what}")
    return items


def _in_bounds(args: Args, name: str, offsets, extent, bound) -> None:
    """The region `offsets` + `extent` lies inside `bound` wherever all three are constants."""
    if len(offsets) != len(bound) or len(extent) != len(bound):
        return
    for i, (o, e, b) in enumerate(zip(offsets, extent, bound)):
        o, e, b = cint(o), cint(e), cint(b)
        if None not in (o, e, b) and (o < 0 or o + e > b):
            args.fail(f"{args.op.name}: the push exceeds the peer's target region: dimension {i} covers "
                      f"[{o}, {o + e}) of an extent {b}", name, hint="keep offset + extent within the target")


def _int_items(args: Args, name: str) -> None:
    """Every entry of the list argument `name` is an integer (no float constants)."""
    from ptoc.ir.nodes import ConstFloat

    for i, e in enumerate(int_list(args, name, required=False) or ()):
        if isinstance(e, ConstFloat):
            args.fail(f"{args.op.name}: offset {i} must be an integer or index scalar", name)


def _rank(t: TensorType | None) -> int | None:
    return len(t.shape) if t is not None else None


def _same_dtype(args: Args, a: str, b: str) -> None:
    ta, tb = args.types.get(a), args.types.get(b)
    da, db = getattr(ta, "dtype", None), getattr(tb, "dtype", None)
    if da is not None and db is not None and da != db:
        args.fail(f"{args.op.name}: {a} has dtype {da.name} but {b} has {db.name}", a,
                  hint="the two sides of a transfer have one dtype")


# ---------------------------------------------------------------------------------------------- windows
@register("pld.tensor.alloc_window_buffer", ("size",), optional=(("dtype", None), ("name", None)),
          unit="any", family="distributed", pto=_NO_PTO)
def _alloc_window_buffer(args: Args) -> Type | None:
    """reserve a per-rank communication window: size in bytes, or a shape with dtype=; a pl.Ptr"""
    shaped = isinstance(args.get("size"), (ListExpr, TupleExpr))
    if args.get("dtype") is not None:
        if not shaped:
            args.fail("pld.tensor.alloc_window_buffer: dtype= is only valid when the first argument is a shape",
                      "dtype", code="PTOC-E0201",
                      hint="give the size in bytes alone, or a shape with dtype=: alloc_window_buffer([256], "
                      "dtype=pl.BF16)")
        dtype_arg(args, "dtype")
        shape = int_list(args, "size") or ()
        if not shape:
            args.fail("pld.tensor.alloc_window_buffer: the shape must be non-empty", "size")
        for d in shape:
            if cint(d) is not None and cint(d) <= 0:
                args.fail(f"pld.tensor.alloc_window_buffer: all dimensions must be positive, got {cint(d)}", "size")
    else:
        if shaped:
            args.fail("pld.tensor.alloc_window_buffer: a shape requires dtype=", "size", code="PTOC-E0201",
                      hint="write pld.alloc_window_buffer([256], dtype=pl.BF16), or the size in bytes")
        _int_scalar(args, "size")
    return PtrType()


@register("pld.tensor.window", ("buf", "shape"), optional=(("dtype", None),), unit="any",
          family="distributed", pto=_NO_PTO)
def _window_op(args: Args) -> Type | None:
    """view a window buffer as a pld.DistributedTensor[shape, dtype]"""
    t = args.types.get("buf")
    if t is not None and not isinstance(t, PtrType):
        args.fail(f"pld.tensor.window: 'buf' must be the pl.Ptr of pld.tensor.alloc_window_buffer, got a "
                  f"{kind_of(t)}", "buf")
    shape = int_list(args, "shape")
    dt = dtype_arg(args, "dtype")
    return DistributedTensorType(tuple(shape or ()), dt)


# ---------------------------------------------------------------------------------------------- queries
@register("pld.system.world_size", (), unit="scalar", family="distributed", pto=_NO_PTO)
def _world_size(args: Args) -> Type | None:
    """the number of ranks (INT64)"""
    return ScalarType(dtypes.INT64)


@register("pld.system.get_comm_ctx", ("dist_tensor",), unit="scalar", family="distributed", pto=_NO_PTO)
def _get_comm_ctx(args: Args) -> Type | None:
    """the communication context of a distributed tensor"""
    _window(args, "dist_tensor")
    return CommCtxType()


def _ctx_query(doc: str):
    def rule(args: Args) -> Type | None:
        t = args.types.get("ctx")
        if t is not None and not isinstance(t, CommCtxType):
            args.fail(f"{args.op.name}: 'ctx' must be a pld.CommCtx, got a {kind_of(t)}", "ctx",
                      hint="get it with pld.system.get_comm_ctx(distributed_tensor)")
        return ScalarType(dtypes.INT32)

    rule.__doc__ = doc
    return rule


register("pld.system.rank", ("ctx",), unit="scalar", family="distributed", pto=_NO_PTO)(
    _ctx_query("this rank's index in the context (INT32)"))
register("pld.system.nranks", ("ctx",), unit="scalar", family="distributed", pto=_NO_PTO)(
    _ctx_query("the number of ranks in the context (INT32)"))


# ---------------------------------------------------------------------------------------------- point to point
@register("pld.tile.remote_load", ("target", "peer", "offsets", "shape"), optional=(("valid_shape", None),),
          unit="mem", family="distributed", pto=_NO_PTO)
def _remote_load(args: Args) -> Type | None:
    """a tile of `shape` read from `peer`'s slice of a distributed tensor at `offsets`"""
    t = _window(args, "target")
    _int_scalar(args, "peer")
    rank = _rank(t)
    _offsets(args, "offsets", rank)
    shape = _offsets(args, "shape", rank)
    valid = _offsets(args, "valid_shape", rank)
    if t is None or shape is None:
        return None
    return new_tile(tuple(shape), t.dtype, None, tuple(valid) if valid is not None else None)


def _remote_store_rule(level: str):
    def rule(args: Args) -> Type | None:
        src = args.types.get("src_tile" if level == "tile" else "src")
        name = "src_tile" if level == "tile" else "src"
        want = TileType if level == "tile" else TensorType
        if src is not None and not isinstance(src, want):
            args.fail(f"{args.op.name}: {name!r} must be a {level}, got a {kind_of(src)}", name,
                      hint="pld.remote_store picks pld.tile.remote_store for a tile and pld.tensor.remote_store "
                      "for a tensor")
        t = _window(args, "target")
        _int_scalar(args, "peer")
        offsets = _offsets(args, "offsets", _rank(t))
        _same_dtype(args, name, "target")
        enum_arg(args, "atomic", "pld.AtomicType")
        if t is not None and offsets is not None and isinstance(src, (TileType, TensorType)):
            _in_bounds(args, "offsets", offsets, src.shape, t.shape)
        return None

    rule.__doc__ = f"write a local {level} into `peer`'s slice of a distributed tensor at `offsets`"
    return rule


register("pld.tile.remote_store", ("src_tile", "target", "peer", "offsets"), optional=(("atomic", None),),
         unit="mem", family="distributed", pto=_NO_PTO)(_remote_store_rule("tile"))
register("pld.tensor.remote_store", ("src", "target", "peer", "offsets"), optional=(("atomic", None),),
         unit="mem", family="distributed", pto=_NO_PTO)(_remote_store_rule("tensor"))
short_name("pld.remote_store", tile="pld.tile.remote_store", tensor="pld.tensor.remote_store")

_TRANSFER = (("dst_offsets", None), ("src_offsets", None), ("shape", None))


def _transfer_rule(direction: str, staged: bool):
    def rule(args: Args) -> Type | None:
        remote, local = ("dst", "src") if direction == "put" else ("src", "dst")
        r = _window(args, remote)
        loc = _tensor_like(args, local)
        _int_scalar(args, "peer")
        _same_dtype(args, "dst", "src")
        shape = int_list(args, "shape", required=False)
        rank = len(shape) if shape is not None else None
        _offsets(args, "dst_offsets", rank if rank is not None else _rank(r if remote == "dst" else loc),
                 "destination")
        _offsets(args, "src_offsets", rank if rank is not None else _rank(r if remote == "src" else loc), "source")
        if staged:
            stage = args.types.get("stage")
            if stage is not None and not isinstance(stage, TileType):
                args.fail(f"{args.op.name}: 'stage' must be a tile (the Vec staging buffer), got a "
                          f"{kind_of(stage)}", "stage")
        if "atomic" in args.values:
            enum_arg(args, "atomic", "pld.AtomicType")
        return None

    rule.__doc__ = (f"{'send a local tensor to' if direction == 'put' else 'fetch a tensor from'} a peer's window"
                    + (" through a Vec staging tile" if staged else ""))
    return rule


register("pld.tensor.put", ("dst", "peer", "src"),
         optional=_TRANSFER + (("atomic", None), ("chunk_rows", None), ("chunk_cols", None), ("pipeline", None)),
         unit="mem", family="distributed", pto=_NO_PTO)(_transfer_rule("put", False))
register("pld.tensor.get", ("dst", "peer", "src"),
         optional=_TRANSFER + (("chunk_rows", None), ("chunk_cols", None), ("pipeline", None)),
         unit="mem", family="distributed", pto=_NO_PTO)(_transfer_rule("get", False))
register("pld.tile.put", ("dst", "peer", "src", "stage"), optional=(("stage2", None),) + _TRANSFER + (
    ("atomic", None),), unit="mem", family="distributed", pto=_NO_PTO)(_transfer_rule("put", True))
register("pld.tile.get", ("dst", "peer", "src", "stage"), optional=(("stage2", None),) + _TRANSFER,
         unit="mem", family="distributed", pto=_NO_PTO)(_transfer_rule("get", True))


# ---------------------------------------------------------------------------------------------- signals
@register("pld.system.notify", ("target", "peer", "offsets", "value"), optional=(("op", None),), unit="sync",
          family="distributed", pto=_NO_PTO)
def _notify(args: Args) -> Type | None:
    """deposit `value` into `peer`'s signal slot (op= Set or AtomicAdd)"""
    t = _window(args, "target")
    _int_scalar(args, "peer")
    _offsets(args, "offsets", _rank(t))
    if args.get("op") is None:
        args.fail("pld.system.notify needs op=pld.NotifyOp.Set or pld.NotifyOp.AtomicAdd", code="PTOC-E0201")
    enum_arg(args, "op", "pld.NotifyOp")
    return None


def _wait_rule(doc: str, deferred: bool = False):
    def rule(args: Args) -> Type | None:
        t = _window(args, "signal")
        _offsets(args, "offsets", _rank(t), "signal")
        _int_items(args, "offsets")
        from ptoc.ir.nodes import ConstFloat

        if isinstance(args.get("expected"), ConstFloat):
            args.fail(f"{args.op.name}: expected must be an integer or index scalar", "expected")
        _int_scalar(args, "expected")
        if args.get("cmp") is None:
            args.fail(f"{args.op.name} needs cmp=pld.WaitCmp.Eq or pld.WaitCmp.Ge", code="PTOC-E0201")
        cmp = enum_arg(args, "cmp", "pld.WaitCmp")
        if deferred:
            if t is not None and t.dtype != dtypes.INT32:
                args.fail(f"{args.op.name}: the signal must be INT32, got {t.dtype.name}", "signal")
            if cmp != "Ge":
                args.fail(f"{args.op.name} only supports WaitCmp.Ge (a deferred wait is a counter threshold)",
                          "cmp", hint="write cmp=pld.WaitCmp.Ge")
        return None

    rule.__doc__ = doc
    return rule


register("pld.system.wait", ("signal", "offsets", "expected"), optional=(("cmp", None),), unit="sync",
         family="distributed", pto=_NO_PTO)(_wait_rule("block until the local signal slot compares to `expected`"))
register("pld.system.defer_wait", ("signal", "offsets", "expected"), optional=(("cmp", None),), unit="sync",
         family="distributed", pto=_NO_PTO)(
    _wait_rule("make the next task wait until the local signal slot reaches `expected`", deferred=True))


# ---------------------------------------------------------------------------------------------- collectives
def _collective(doc: str, windows: tuple[str, ...], result: str, reduce: bool = False):
    def rule(args: Args) -> Type | None:
        for name in windows:
            if args.values.get(name) is not None:
                _window(args, name)
        for name in ("input", "local_data", "send_counts"):
            if name in args.values:
                _tensor_like(args, name)
        if reduce:
            enum_arg(args, "op", "pld.ReduceOp")
        signal = args.types.get("signal")
        if isinstance(signal, TensorType) and signal.dtype != dtypes.INT32:
            args.fail(f"{args.op.name}: the signal must be INT32 (a counter), got {signal.dtype.name}", "signal")
        target = args.types.get("target")
        if args.op.name == "pld.tensor.allreduce" and isinstance(target, TensorType) and \
                target.dtype not in (dtypes.FP16, dtypes.FP32):
            args.fail(f"pld.tensor.allreduce: the target dtype must be FP16 or FP32, got {target.dtype.name}",
                      "target", hint="reduce in FP32 and cast afterwards")
        return args.types.get(result)

    rule.__doc__ = doc
    return rule


register("pld.tensor.allreduce", ("target",), optional=(("signal", None), ("op", None), ("mode", None),
                                                         ("core_num", None)),
         unit="mem", family="distributed", pto=_NO_PTO)(
    _collective("reduce `target` across all ranks in place (op= Sum, Max, Min or Prod)", ("target", "signal"),
                "target", reduce=True))
register("pld.tensor.barrier", ("signal",), unit="sync", family="distributed", pto=_NO_PTO)(
    _collective("wait until every rank reaches the barrier", ("signal",), "signal"))
register("pld.tensor.broadcast", ("target", "signal"), optional=(("root", None),), unit="mem",
         family="distributed", pto=_NO_PTO)(
    _collective("copy `root`'s `target` to every rank", ("target", "signal"), "target"))
register("pld.tensor.reduce_scatter", ("target", "signal"), optional=(("op", None),), unit="mem",
         family="distributed", pto=_NO_PTO)(
    _collective("reduce across ranks, each rank keeping its own chunk", ("target", "signal"), "target",
                reduce=True))
register("pld.tensor.allgather", ("local_data", "target", "signal"), unit="mem", family="distributed",
         pto=_NO_PTO)(_collective("gather every rank's `local_data` into `target`", ("target", "signal"), "target"))
register("pld.tensor.all_to_all", ("input", "target", "signal"), unit="mem", family="distributed", pto=_NO_PTO)(
    _collective("exchange equal chunks between every pair of ranks", ("target", "signal"), "target"))
register("pld.tensor.all_to_all_v", ("input", "target", "signal", "send_counts", "recv_counts"), unit="mem",
         family="distributed", pto=_NO_PTO)(
    _collective("exchange chunks of per-rank counts between every pair of ranks",
                ("target", "signal", "recv_counts"), "target"))


# ---------------------------------------------------------------------------------------------- views of a window
def _keeps_window(name: str) -> None:
    """A view, slice or assembly of a distributed tensor is still a view of the same window: PyPTO's
    tensor.view / tensor.slice / tensor.assemble keep the pld.DistributedTensor kind of their first operand.
    The tensor op's own rule decides the shape and view; this only keeps the kind."""
    import dataclasses

    from ptoc.ops.registry import REGISTRY

    op = REGISTRY.get(name)
    if op is None or op.rule is None:
        return
    inner = op.rule
    first = op.params[0]

    def rule(args: Args) -> Type | None:
        t = inner(args)
        if isinstance(args.types.get(first), DistributedTensorType) and type(t) is TensorType:
            return DistributedTensorType(t.shape, t.dtype, t.view, t.memref)
        return t

    rule.__doc__ = inner.__doc__
    REGISTRY[name] = dataclasses.replace(op, rule=rule)


for _name in ("tensor.view", "tensor.slice", "tensor.assemble"):
    _keeps_window(_name)
