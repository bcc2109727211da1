"""Data movement between GM and on-chip memory, creation, allocation, element access, core ids.

tile.load reads a window of a tensor into a tile (3- and 4-positional forms: tensor, offsets,
shapes[, valid_shapes], `target_memory=`, default Vec); tile.store writes a tile into a tensor at
offsets (optional 4th partition-shape operand, kwargs such as `atomic=` and attrs such as `st_phase`)
and returns the tensor. tile.move lives with the TMOV rules in `move.py`.
"""

from __future__ import annotations

from ptoc.ir import dtypes
from ptoc.ir.nodes import BinOp, ConstInt, PtrType, ScalarType, TensorType, TileType, Type
from ptoc.ops.common import (
    cint,
    const_int_arg,
    dtype_arg,
    enum_arg,
    int_list,
    new_tensor,
    new_tile,
    static_shape,
)
from ptoc.ops.registry import Args, Emitter, NoPto, declare, register, short_name

MEM_SPACES = ("Vec", "Mat", "Left", "Right", "Acc", "Bias", "LeftScale", "RightScale")
# The buffers TSTORE reads (pto-isa TStore: Vec, Mat, Acc); applied with the hardware rules.
STORE_SOURCES = ("Vec", "Mat", "Acc")


def blocked_nz_logical(t: TensorType, sizes) -> tuple | None:
    """A rank-5 NZ partition `[1, C/c0, R/16, 16, c0]` describes a logical `[R, C]` tile (NZ-4). A dynamic
    extent is the count of fractal rows (columns) times 16 (c0); BlockNzTensorViews writes a dynamic
    valid extent `v` as `v // 16` (`v // c0`) only when it proved `v` a multiple of it (NZ-10), and that
    form reads back as `v`."""
    if t.layout != "NZ" or len(t.shape) != 5 or len(sizes) != 5:
        return None
    s = [cint(x) for x in sizes]
    if s[3] is None or s[4] is None:
        return None
    return (_blocks_times(sizes[2], s[2], s[3]), _blocks_times(sizes[1], s[1], s[4]))


def _blocks_times(blocks, value: int | None, factor: int):
    if value is not None:
        return ConstInt(value * factor, dtypes.INDEX)
    if isinstance(blocks, BinOp) and blocks.op == "//" and cint(blocks.rhs) == factor:
        return blocks.lhs
    return BinOp("*", blocks, ConstInt(factor, dtypes.INDEX))


@register("tile.load", ("tensor", "offsets", "shapes"),
          optional=(("valid_shapes", None), ("target_memory", None), ("transpose", None)), unit="mem")
def _load(args: Args) -> Type | None:
    """GM tensor window -> tile (default memory Vec)"""
    t = args.tensor("tensor")
    offsets = int_list(args, "offsets")
    shapes = int_list(args, "shapes")
    valid = int_list(args, "valid_shapes", required=False)
    mem = enum_arg(args, "target_memory", "Mem", "Vec")
    if mem == "DDR":
        args.fail("tile.load cannot target DDR", "target_memory", hint="load into Vec or Mat")
    if len(offsets) != len(shapes):
        args.fail(f"tile.load: {len(offsets)} offsets but {len(shapes)} shape extents", "shapes",
                  hint="give one offset and one extent per tensor axis")
    if valid is not None and len(valid) != len(shapes):
        args.fail(f"tile.load: {len(valid)} valid extents but {len(shapes)} shape extents", "valid_shapes")
    for i, x in enumerate(shapes):
        v = cint(x)
        if v is not None and v <= 0:
            args.fail(f"tile.load: shape extent {i} is {v}; extents must be positive", "shapes")
    for i, x in enumerate(offsets):
        v = cint(x)
        if v is not None and v < 0:
            args.fail(f"tile.load: offset {i} is {v}; offsets must be non-negative", "offsets")
    if t is None:
        return None
    if len(offsets) != t.rank:
        args.fail(f"tile.load: the tensor has rank {t.rank} but the load gives {len(offsets)} offsets",
                  "offsets", hint="give one offset and one extent per tensor axis")
    st, ss = static_shape(t.shape), static_shape(shapes)
    so = [cint(o) for o in offsets]
    if st is not None and ss is not None and t.layout != "NZ":
        for i, (o, s, d) in enumerate(zip(so, ss, st)):
            if o is not None and o + s > d:
                args.fail(f"tile.load: window [{o}, {o + s}) of axis {i} exceeds the tensor extent {d}",
                          "shapes", hint="shrink the window or its offset")
    logical = blocked_nz_logical(t, shapes)
    if logical is not None and all(isinstance(d, ConstInt) for d in logical):
        vl = blocked_nz_logical(t, valid) if valid is not None else None
        return new_tile(logical, t.dtype, mem, vl)
    return new_tile(shapes, t.dtype, mem, valid)


@register("tile.store", ("tile", "offsets", "output"), optional=(("shapes", None),), unit="mem",
          open_kwargs=True)
def _store(args: Args) -> Type | None:
    """tile -> GM tensor window; returns the tensor (kwargs atomic=, attrs st_phase, ...)"""
    tile = args.tile("tile")
    out = args.tensor("output")
    offsets = int_list(args, "offsets")
    shapes = int_list(args, "shapes", required=False)
    for i, x in enumerate(offsets):
        v = cint(x)
        if v is not None and v < 0:
            args.fail(f"tile.store: offset {i} is {v}; offsets must be non-negative", "offsets")
    if args.hardware and tile is not None and tile.memory not in (None, *STORE_SOURCES):
        args.fail(f"tile.store: a {tile.memory} tile cannot be stored; TSTORE writes Vec, Mat and Acc tiles to "
                  "global memory", "tile", code="PTOC-E0365",
                  hint="store the tile it was moved from, or compute the value in Vec or Acc")
    if out is None:
        return None
    if len(offsets) != out.rank:
        args.fail(f"tile.store: the tensor has rank {out.rank} but the store gives {len(offsets)} offsets",
                  "offsets", hint="give one offset per tensor axis")
    if shapes is not None and len(shapes) != out.rank:
        args.fail(f"tile.store: the partition shape has {len(shapes)} extents, the tensor rank is {out.rank}",
                  "shapes")
    if tile is not None and tile.dtype != out.dtype and tile.memory != "Acc":
        args.fail(f"tile.store: tile dtype {tile.dtype.name} differs from tensor dtype {out.dtype.name}",
                  hint="cast the tile first (only Acc tiles convert on store)")
    return out


@register("tile.create", ("shape",), optional=(("dtype", None), ("target_memory", None)), unit="any")
def _tile_create(args: Args) -> Type | None:
    """a new uninitialised tile"""
    shape = int_list(args, "shape")
    dt = dtype_arg(args, "dtype")
    mem = enum_arg(args, "target_memory", "Mem", "Vec")
    return new_tile(shape, dt, mem)


@register("tile.full", ("shape",), optional=(("value", None), ("dtype", None), ("target_memory", None)))
def _tile_full(args: Args) -> Type | None:
    """a new tile filled with one value"""
    shape = int_list(args, "shape")
    dt = dtype_arg(args, "dtype")
    if args.get("value") is None:
        args.fail("tile.full needs value=", code="PTOC-E0201")
    mem = enum_arg(args, "target_memory", "Mem", "Vec")
    if args.hardware and mem in ("Acc", "Left", "Right"):
        args.fail(f"tile.full cannot fill a tile in {mem}: ptoc emits it as TEXPANDS, a vector instruction, "
                  f"and {mem} is written by the cube unit and its moves; fill a Vec tile and move it, or start "
                  "an accumulator from tile.matmul", "target_memory")
    return new_tile(shape, dt, mem)


@register("tile.alloc", ("memory", "size"), optional=(("addr", None),), unit="any")
def _tile_alloc(args: Args) -> Type | None:
    """reserve bytes in a memory space; the pointer feeds pl.MemRef(ptr, offset, size)"""
    enum_arg(args, "memory", "Mem")
    size = cint(args.get("size"))
    if size is not None and size <= 0:
        args.fail("tile.alloc: the size must be positive", "size")
    return PtrType()


@register("tensor.alloc", ("memory", "size"), unit="any")
def _tensor_alloc(args: Args) -> Type | None:
    """reserve bytes of GM (pl.Mem.DDR); the pointer feeds pl.MemRef(ptr, offset, size)"""
    enum_arg(args, "memory", "Mem")
    size = cint(args.get("size"))
    if size is not None and size <= 0:
        args.fail("tensor.alloc: the size must be positive", "size")
    return PtrType()


@register("tensor.create", ("shape",), optional=(("dtype", None), ("layout", None), ("manual_dep", None),
                                                 ("init_value", None)), unit="any")
def _tensor_create(args: Args) -> Type | None:
    """a new GM tensor"""
    shape = int_list(args, "shape")
    dt = dtype_arg(args, "dtype")
    layout = enum_arg(args, "layout", "TensorLayout", "ND")
    t = new_tensor(shape, dt)
    if layout != "ND":
        from dataclasses import replace

        from ptoc.ir.nodes import TensorView

        t = replace(t, view=TensorView(layout=layout))
    return t


@register("tensor.full", ("shape",), optional=(("value", None), ("dtype", None)), unit="any")
def _tensor_full(args: Args) -> Type | None:
    """a new GM tensor filled with one value"""
    shape = int_list(args, "shape")
    dt = dtype_arg(args, "dtype")
    if args.get("value") is None:
        args.fail("tensor.full needs value=", code="PTOC-E0201")
    return new_tensor(shape, dt)


def _index_count(args: Args, rank: int) -> None:
    idx = int_list(args, "indices")
    if len(idx) != rank:
        args.fail(f"{args.op.name}: {len(idx)} indices for rank {rank}", "indices",
                  hint="give one index per axis")


@register("tile.read", ("tile", "indices"), unit="scalar")
def _tile_read(args: Args) -> Type | None:
    """one element of a tile as a scalar"""
    t = args.tile("tile")
    if t is None:
        return None
    _index_count(args, t.rank)
    return ScalarType(t.dtype)


@register("tile.write", ("tile", "indices", "value"), unit="scalar")
def _tile_write(args: Args) -> Type | None:
    """write one element of a tile; returns the tile"""
    t = args.tile("tile")
    if t is None:
        return None
    _index_count(args, t.rank)
    return t


@register("tensor.read", ("tensor", "indices"), unit="scalar")
def _tensor_read(args: Args) -> Type | None:
    """one element of a GM tensor as a scalar"""
    t = args.tensor("tensor")
    if t is None:
        return None
    _index_count(args, t.rank)
    return ScalarType(t.dtype)


@register("tensor.write", ("tensor", "indices", "value"), unit="scalar")
def _tensor_write(args: Args) -> Type | None:
    """write one element of a GM tensor (a scalar store); returns the tensor"""
    t = args.tensor("tensor")
    if t is None:
        return None
    _index_count(args, t.rank)
    v = args.scalar("value")
    if v is not None and v.dtype != t.dtype:
        args.fail(f"tensor.write: the value is {v.dtype.name} but the tensor holds {t.dtype.name}", "value",
                  hint=f"cast the value first: pl.cast(value, pl.{t.dtype.name})")
    return t


@register("tensor.dim", ("tensor", "axis"), unit="scalar")
def _tensor_dim(args: Args) -> Type | None:
    """the extent of one axis (INDEX)"""
    t = args.tensor("tensor")
    axis = const_int_arg(args, "axis")
    if t is not None and axis is not None and not -t.rank <= axis < t.rank:
        args.fail(f"tensor.dim: axis {axis} is out of range for rank {t.rank}", "axis")
    return ScalarType(dtypes.INDEX)


def _core_id(doc: str):
    def rule(args: Args) -> Type | None:
        return ScalarType(dtypes.BY_NAME["UINT64"])

    rule.__doc__ = doc
    return rule


register("tile.get_block_idx", (), unit="scalar")(_core_id("this core's block index (UINT64)"))
register("tile.get_block_num", (), unit="scalar")(_core_id("the number of blocks (UINT64)"))
register("tile.get_subblock_idx", (), unit="scalar")(_core_id("the sub-block (AIV lane) index (UINT64)"))

# the tensor-scope aliases of the core queries (PyPTO: INDEX scalars; ConvertTensorToTileOps gives the tile op)
for _q, _what in (("get_block_idx", "this core's block index"), ("get_block_num", "the number of blocks"),
                  ("get_subblock_idx", "the sub-block (AIV lane) index")):
    register(f"tensor.{_q}", (), unit="scalar", summary=f"{_what} (INDEX; the tensor-scope tile.{_q})")(
        lambda args: ScalarType(dtypes.INDEX))
short_name("load", tile="tile.load", tensor="tile.load")
short_name("store", tile="tile.store", tensor="tile.store")
short_name("create", tile="tile.create")
short_name("create_tensor", tensor="tensor.create")
short_name("full", tensor="tensor.full")  # PyPTO: pl.full is the tensor op (no operand to dispatch on)
short_name("read", tile="tile.read", tensor="tensor.read")
short_name("write", tile="tile.write", tensor="tensor.write")
short_name("dim", tensor="tensor.dim")
short_name("get_block_idx", scalar="tile.get_block_idx")
short_name("get_block_num", scalar="tile.get_block_num")
short_name("get_subblock_idx", scalar="tile.get_subblock_idx")

# `.pto` spellings (PTOAS PTOOps.td, destination-passing form)
declare("tile.load", pto=Emitter("op_load"))
declare("tile.store", pto=Emitter("op_store"))
declare("tile.create", pto=Emitter("op_create"))
declare("tile.alloc", pto=Emitter("op_alloc"))
declare("tile.full", pto=Emitter("op_full"))
declare("tile.read", pto=Emitter("op_read"))
declare("tile.write", pto=Emitter("op_write"))

__all__ = ["MEM_SPACES", "TileType", "blocked_nz_logical"]


# Counter-based random numbers (PyPTO tile.random / tensor.random, pto.trandom): a 64-bit key (key0,
# key1) and a 128-bit counter (counter0..3), each an INT32 scalar, give every element a reproducible
# 32-bit value. dtype= INT32 or UINT32 (default UINT32 in the language), rounds= 7 or 10 (default 10).
_RANDOM_SEEDS = ("key0", "key1", "counter0", "counter1", "counter2", "counter3")


def _random_common(args: Args) -> dtypes.DType | None:
    for name in _RANDOM_SEEDS:
        t = args.type(name)
        if t is not None and not (isinstance(t, ScalarType) and t.dtype.is_int):
            args.fail(f"{args.op.name}: {name} is an INT32 seed word, got a {type(t).__name__}", name)
    dt = dtype_arg(args, "dtype", required=False) or dtypes.BY_NAME["UINT32"]
    if dt.name not in ("INT32", "UINT32"):
        args.fail(f"{args.op.name} makes INT32 or UINT32 values (32-bit lanes), got {dt.name}", "dtype")
    rounds = args.get("rounds")
    if rounds is not None and (cint(rounds) not in (7, 10)):
        args.fail(f"{args.op.name}: rounds must be 7 or 10", "rounds")
    return dt


@register("tile.random", _RANDOM_SEEDS + ("shape",), optional=(("valid_shape", None), ("dtype", None),
                                                                  ("rounds", None)), unit="vector")
def _tile_random(args: Args) -> Type | None:
    """a 2-D tile of counter-based random INT32/UINT32 values (key0, key1, counter0..3: INT32 seeds)"""
    dt = _random_common(args)
    shape = int_list(args, "shape")
    if len(shape) != 2 or any(cint(d) is None or cint(d) <= 0 for d in shape):
        args.fail("tile.random: shape must be two positive constants", "shape")
    valid = int_list(args, "valid_shape", required=False)
    if valid is not None:
        if len(valid) != 2 or any(cint(v) is None or not 0 < cint(v) <= cint(d) for v, d in zip(valid, shape)):
            args.fail("tile.random: valid_shape must be two constants in (0, shape]", "valid_shape")
    return new_tile(shape, dt, "Vec", valid)  # pto.trandom writes a vector tile


@register("tensor.random", _RANDOM_SEEDS + ("shape",), optional=(("dtype", None), ("rounds", None)), unit="any")
def _tensor_random(args: Args) -> Type | None:
    """a tensor of counter-based random INT32/UINT32 values (key0, key1, counter0..3: INT32 seeds)"""
    dt = _random_common(args)
    return new_tensor(int_list(args, "shape"), dt)


short_name("random", tensor="tensor.random")  # PyPTO: pl.random is the tensor op
declare("tile.random", pto=NoPto("ptoc's .pto emitter has no lowering for tile.random (pto.trandom) yet"))
