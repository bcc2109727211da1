"""Elementwise arithmetic, unary math and casts (spec OP-1, OP-3, OP-6; FP4-2/FP4-4 for casts).

tensor.* binary ops broadcast over N-D shapes (OP-1); tile.* binary ops take equal shapes or the
same broadcasting. A scalar right-hand side selects the `*s` form. Results keep the operand's valid
region where OP-3 says so and drop every other view field (they are new storage).
"""

from __future__ import annotations

from ptoc.ir import dtypes
from ptoc.ir.nodes import ConstFloat, ConstInt, ScalarType, StrLit, TensorType, TileType, Type
from ptoc.ops.common import (
    FLOATS,
    broadcast,
    dtype_arg,
    is_literal,
    new_tensor,
    new_tile,
    same_dtype,
    shapes_equal,
    valid_shape_of,
)
from ptoc.ops.registry import Args, Emitter, NoPto, Pto, TileScalarKernel, UnaryKernel, declare, register, short_name

ARITH = ("add", "sub", "mul", "div", "maximum", "minimum")
SCALAR_FORM = {"add": "adds", "sub": "subs", "mul": "muls", "div": "divs", "maximum": "maximums",
               "minimum": "minimums"}
UNARY = ("exp", "neg", "abs", "sqrt", "rsqrt", "recip", "log")
FLOAT_ONLY_UNARY = ("exp", "sqrt", "rsqrt", "recip", "log")
CAST_MODES = ("none", "rint", "round", "floor", "ceil", "trunc", "odd")


def _result(args: Args, kind: str, lhs, shape, dt, valid) -> Type:
    if kind == "tensor":
        return new_tensor(shape, dt, valid)
    return new_tile(shape, dt, lhs.memory, valid)


def binary_result(args: Args, kind: str, keep_equal_regions: bool = True) -> Type | None:
    """Tensor-tensor / tile-tile elementwise result (OP-1 broadcasting, OP-3 valid regions)."""
    get = args.tensor if kind == "tensor" else args.tile
    lhs, rhs = get("lhs"), get("rhs")
    if lhs is None or rhs is None:
        return None
    same_dtype(args, lhs, rhs, rule="OP-1")
    shape = broadcast(args, lhs.shape, rhs.shape)
    valid = None
    if keep_equal_regions and shapes_equal(lhs.shape, rhs.shape) is True:
        vl, vr = valid_shape_of(lhs), valid_shape_of(rhs)
        if shapes_equal(vl, vr) is True:
            valid = vl
    return _result(args, kind, lhs, shape, lhs.dtype, valid)


def scalar_operand_dtype(args: Args, target: dtypes.DType, name: str = "rhs") -> dtypes.DType:
    """OP-6: the dtype a scalar operand of an `adds`-style op takes. A literal takes the tile dtype,
    except a float literal on an integer tile, which stays FP32; an explicit pl.const keeps its
    dtype; a non-constant INDEX scalar is rejected."""
    e = args.get(name)
    t = args.type(name)
    if isinstance(e, ConstInt) and e.dtype == dtypes.INDEX:
        return target
    if isinstance(e, ConstFloat) and e.dtype == dtypes.FP32:
        return target if target.is_float else dtypes.FP32
    if is_literal(e):
        return getattr(e, "dtype", target)
    if isinstance(t, ScalarType) and t.dtype == dtypes.INDEX:
        args.fail(f"{args.op.name}: the scalar operand is a non-constant INDEX value; no pto.t*s instruction "
                  "takes an index", name, rule="OP-6",
                  hint=f"convert it first: pl.cast(x, pl.{target.name})")
    if isinstance(t, ScalarType):
        return t.dtype
    return target


def scalar_result(args: Args, kind: str) -> Type | None:
    """Tensor-scalar / tile-scalar result: keeps the effective valid region, drops other metadata (OP-3)."""
    get = args.tensor if kind == "tensor" else args.tile
    lhs = get("lhs")
    rt = args.type("rhs")
    if rt is not None and not isinstance(rt, ScalarType):
        args.fail(f"{args.op.name}: the right operand must be a scalar, got a {type(rt).__name__}", "rhs",
                  hint=f"use {args.op.name[:-1]} for two {kind}s")
    if lhs is None:
        return None
    scalar_operand_dtype(args, lhs.dtype)
    return _result(args, kind, lhs, lhs.shape, lhs.dtype, valid_shape_of(lhs))


def _make_binary(kind: str, name: str):
    def rule(args: Args) -> Type | None:
        rt = args.type("rhs")
        if isinstance(rt, ScalarType) or (rt is None and is_literal(args.get("rhs"))):
            return scalar_result(args, kind)  # OP-1: a scalar rhs dispatches to the *s form
        return binary_result(args, kind)

    rule.__doc__ = f"{kind} elementwise {name} (OP-1, OP-3)"
    return rule


def _make_scalar(kind: str, name: str):
    def rule(args: Args) -> Type | None:
        return scalar_result(args, kind)

    rule.__doc__ = f"{kind}-scalar {name} (OP-3, OP-6)"
    return rule


def _make_unary(kind: str, name: str):
    def rule(args: Args) -> Type | None:
        x = args.tensor("input") if kind == "tensor" else args.tile("input")
        if x is None:
            return None
        if name in FLOAT_ONLY_UNARY and x.dtype.name not in FLOATS:
            args.fail(f"{args.op.name} needs a floating-point operand, got {x.dtype.name}", "input",
                      hint="cast it first: pl.cast(x, target_type=pl.FP32)")
        if not (x.dtype.is_float or x.dtype.is_int):
            args.fail(f"{args.op.name} does not accept dtype {x.dtype.name}", "input")
        return _result(args, kind, x, x.shape, x.dtype, valid_shape_of(x))

    rule.__doc__ = f"{kind} elementwise {name}"
    return rule


for _kind in ("tensor", "tile"):
    for _n in ARITH:
        register(f"{_kind}.{_n}", ("lhs", "rhs"), family="elementwise")(_make_binary(_kind, _n))
        register(f"{_kind}.{SCALAR_FORM[_n]}", ("lhs", "rhs"), family="elementwise")(_make_scalar(_kind, _n))
    for _n in UNARY:
        # PyPTO's tile.rsqrt takes an optional scratch tile for its high-precision path
        register(f"{_kind}.{_n}", ("input",), optional=(("tmp", None),) if (_kind, _n) == ("tile", "rsqrt") else (),
                 family="elementwise")(_make_unary(_kind, _n))
register("tile.relu", ("input",), family="elementwise")(_make_unary("tile", "relu"))

for _n in ARITH:
    short_name(_n, tensor=f"tensor.{_n}", tile=f"tile.{_n}", tensor_scalar=f"tensor.{SCALAR_FORM[_n]}",
               tile_scalar=f"tile.{SCALAR_FORM[_n]}")
    short_name(SCALAR_FORM[_n], tensor=f"tensor.{SCALAR_FORM[_n]}", tile=f"tile.{SCALAR_FORM[_n]}")
for _n in UNARY:
    short_name(_n, tensor=f"tensor.{_n}", tile=f"tile.{_n}")
short_name("relu", tile="tile.relu")


def _cast_rule(kind: str):
    def rule(args: Args) -> Type | None:
        x = args.tensor("input") if kind == "tensor" else args.tile("input")
        dst = dtype_arg(args, "target_type")
        mode = args.get("mode")
        if mode is not None and not (isinstance(mode, StrLit) and mode.value in CAST_MODES) and \
                not isinstance(mode, ConstInt):
            args.fail(f"{args.op.name}: unknown rounding mode", "mode", code="PTOC-E0201",
                      hint="one of " + ", ".join(repr(m) for m in CAST_MODES))
        if x is None or dst is None:
            return None
        try:
            from ptoc.ops.fp4 import check_fp4_cast
        except ImportError:  # pragma: no cover - the FP4 family is part of the package
            check_fp4_cast = None
        shape, valid = x.shape, valid_shape_of(x)
        if check_fp4_cast is not None:
            shape, valid = check_fp4_cast(args, x, dst)
        if kind == "tensor":
            return new_tensor(shape, dst, valid)
        assert isinstance(x, TileType)
        return new_tile(shape, dst, x.memory, valid)

    rule.__doc__ = f"{kind} dtype conversion with a rounding mode"
    return rule


register("tensor.cast", ("input", "target_type"), optional=(("mode", None),),
         family="elementwise")(_cast_rule("tensor"))
register("tile.cast", ("input", "target_type"), optional=(("mode", None),),
         family="elementwise")(_cast_rule("tile"))
short_name("cast", tensor="tensor.cast", tile="tile.cast", scalar="scalar.cast")


@register("scalar.cast", ("input", "target_type"), optional=(("mode", None),), unit="scalar",
          family="elementwise")
def _scalar_cast(args: Args) -> Type | None:
    """scalar dtype conversion (`pl.cast(x, pl.INT32)` on a scalar)"""
    args.scalar("input")
    dst = dtype_arg(args, "target_type")
    return ScalarType(dst) if dst is not None else None

EXPAND = ("add", "sub", "mul", "div", "max", "min")


def _expand(axis: str, name: str):
    def rule(args: Args) -> Type | None:
        x, v = args.tile("input"), args.tile(axis)
        if x is None or v is None:
            return None
        same_dtype(args, x, v)
        if len(x.shape) != 2 or len(v.shape) != 2:
            args.fail(f"{args.op.name} takes 2-D tiles", "input")
        want = (x.shape[0], 1) if axis == "row" else (1, x.shape[1])
        from ptoc.ops.common import cint

        if cint(v.shape[0 if axis == "row" else 1]) is not None and cint(x.shape[0 if axis == "row" else 1]) \
                is not None and (cint(v.shape[0 if axis == "row" else 1]) != cint(x.shape[0 if axis == "row" else 1])
                                 or cint(v.shape[1 if axis == "row" else 0]) != 1):
            args.fail(f"{args.op.name}: the {axis} operand must have shape "
                      f"[{'M, 1' if axis == 'row' else '1, N'}] matching the input", axis,
                      hint=f"expected [{', '.join(str(cint(d)) if cint(d) is not None else '?' for d in want)}]")
        return new_tile(x.shape, x.dtype, x.memory, valid_shape_of(x))

    rule.__doc__ = f"{name} of a tile with a broadcast {axis} vector"
    return rule


for _n in EXPAND:
    register(f"tile.row_expand_{_n}", ("input", "row"), family="elementwise")(_expand("row", _n))
    register(f"tile.col_expand_{_n}", ("input", "col"), family="elementwise")(_expand("col", _n))
    short_name(f"row_expand_{_n}", tile=f"tile.row_expand_{_n}")
    short_name(f"col_expand_{_n}", tile=f"tile.col_expand_{_n}")


@register("tile.sel", ("mask", "lhs", "rhs"), optional=(("tmp", None),), family="elementwise")
def _sel(args: Args) -> Type | None:
    """elementwise select: mask ? lhs : rhs"""
    m, a, b = args.tile("mask"), args.tile("lhs"), args.tile("rhs")
    if a is None or b is None:
        return None
    same_dtype(args, a, b)
    if shapes_equal(a.shape, b.shape) is False or (m is not None and shapes_equal(m.shape, a.shape) is False):
        args.fail("tile.sel: mask and operands need the same shape")
    return new_tile(a.shape, a.dtype, a.memory, valid_shape_of(a))


short_name("sel", tile="tile.sel")

# `.pto` spellings (PTOAS PTOOps.td, destination-passing form)
_PTO_ARITH = {"add": "tadd", "sub": "tsub", "mul": "tmul", "div": "tdiv", "maximum": "tmax", "minimum": "tmin"}
_PTO_UNARY = {"exp": "texp", "sqrt": "tsqrt", "abs": "tabs", "neg": "tneg", "relu": "trelu", "log": "tlog",
              "recip": "trecip", "rsqrt": "trsqrt"}
for _n, _p in _PTO_ARITH.items():
    declare(f"tile.{_n}", pto=Pto(_p, ("tile:lhs", "tile:rhs")))
    declare(f"tile.{SCALAR_FORM[_n]}", pto=Pto(_p + "s", ("tile:lhs", "scalar:rhs")))
for _n, _p in _PTO_UNARY.items():
    declare(f"tile.{_n}", pto=Pto(_p, ("tile:input",)))
for _n in EXPAND:
    declare(f"tile.row_expand_{_n}", pto=Pto(f"trowexpand{_n}", ("tile:input", "tile:row")))
    declare(f"tile.col_expand_{_n}", pto=Pto(f"tcolexpand{_n}", ("tile:input", "tile:col")))
declare("tile.cast", pto=Emitter("op_cast"))
declare("tile.sel", pto=NoPto("pto.tsel reads its mask as packed predicate bits (one bit per column), while "
                              "pl.tile.sel selects by a same-shaped element mask; ptoc has no lowering between "
                              "the two encodings yet"))



# tile.lrelu: leaky ReLU with a scalar slope. Everything about the op is here: signature, type rule,
# `.pto` spelling (PTOAS TLReluOp: `pto.tlrelu ins(%src, %slope : T, f32) outs(%dst : T)`, f16/f32 Vec
# tiles, an f32 slope) and the semantics the numeric reference runs (pto-isa TLRELU:
# dst = src > 0 ? src : src * slope, over the valid region).
@register("tile.lrelu", ("tile", "slope"), family="elementwise",
          pto=Pto("tlrelu", ("tile:tile", "f32:slope")),
          interp=TileScalarKernel(lambda np, x, s: np.where(x > 0, x, x * s)))
def _lrelu(args: Args) -> Type | None:
    """leaky ReLU with a scalar slope: x > 0 ? x : x * slope (FP16/FP32 Vec tiles)"""
    x = args.tile("tile")
    st = args.type("slope")
    if st is not None and not isinstance(st, ScalarType):
        args.fail("tile.lrelu: the slope must be a scalar", "slope", hint="pass a number or a scalar value")
    if isinstance(st, ScalarType) and not (st.dtype.is_float or st.dtype.is_int):
        args.fail(f"tile.lrelu: the slope must be a number, got {st.dtype.name}", "slope")
    if x is None:
        return None
    if x.dtype.name not in ("FP16", "FP32"):
        args.fail(f"tile.lrelu supports FP16 and FP32 tiles (like TLRELU), got {x.dtype.name}", "tile",
                  hint="cast the tile first: pl.cast(t, target_type=pl.FP32)")
    if (x.memory or "Vec") != "Vec":
        args.fail(f"tile.lrelu runs on Vec tiles, got a {x.memory} tile", "tile",
                  hint="move the tile to Vec first: pl.tile.move(t, target_memory=pl.Mem.Vec)")
    return new_tile(x.shape, x.dtype, x.memory, valid_shape_of(x))


short_name("lrelu", tile="tile.lrelu")

__all__ = ["binary_result", "scalar_result", "scalar_operand_dtype", "TensorType"]


# ---------------------------------------------------------------------------------------------------
# PyPTO's further elementwise ops (src/ir/op/tile_ops/elementwise.cpp, unary.cpp). Their type rules are
# here; ptoc's `.pto` emitter has no lowering for them yet (NoPto: codegen says so with PTOC-E0400).
# ---------------------------------------------------------------------------------------------------

_NOT_YET = "ptoc's .pto emitter has no lowering for {op} yet; the op is parsed, typed and checked only"


def _not_yet(op: str) -> NoPto:
    return NoPto(_NOT_YET.format(op=op))


def _trig(kind: str, name: str):
    def rule(args: Args) -> Type | None:
        x = args.tensor("input") if kind == "tensor" else args.tile("input")
        if x is None:
            return None
        if not x.dtype.is_float:
            args.fail(f"{args.op.name} needs a floating-point operand, got {x.dtype.name}", "input",
                      hint="cast it first: pl.cast(x, target_type=pl.FP32)")
        return _result(args, kind, x, x.shape, x.dtype, valid_shape_of(x))

    rule.__doc__ = f"{kind} elementwise {name} (floating point)"
    return rule


for _kind in ("tensor", "tile"):
    register(f"{_kind}.sin", ("input",), family="elementwise",
             interp=UnaryKernel(lambda np, x: np.sin(x)) if _kind == "tile" else None)(_trig(_kind, "sine"))
    register(f"{_kind}.cos", ("input",), family="elementwise",
             interp=UnaryKernel(lambda np, x: np.cos(x)) if _kind == "tile" else None)(_trig(_kind, "cosine"))
for _n in ("sin", "cos"):
    short_name(_n, tensor=f"tensor.{_n}", tile=f"tile.{_n}")
    declare(f"tile.{_n}", pto=_not_yet(f"tile.{_n}"))


def _mask_shape(shape, valid):
    """PyPTO's packed predicate mask: the last axis holds one bit per element, ceil(n / 8) bytes,
    rounded up to a multiple of 32 bytes; its valid extent is ceil(valid / 8) bytes."""
    from ptoc.ir.nodes import BinOp

    from ptoc.ops.common import c, cint

    def ceil8(e):
        v = cint(e)
        return c((v + 7) // 8) if v is not None else BinOp("//", BinOp("+", e, c(7)), c(8))

    last = ceil8(shape[-1])
    lv = cint(last)
    box = c((lv + 31) // 32 * 32) if lv is not None else BinOp("*", BinOp("//", BinOp("+", last, c(31)), c(32)), c(32))
    return tuple(shape[:-1]) + (box,), tuple(valid[:-1]) + (ceil8(valid[-1]),)


def _cmp_type(args: Args) -> None:
    from ptoc.ops.common import const_int_arg

    if args.get("cmp_type") is None:
        return  # PyPTO's DSL default: 0 (eq)
    v = const_int_arg(args, "cmp_type")
    if v not in range(6):
        args.fail(f"{args.op.name}: cmp_type must be 0..5 (eq, ne, lt, le, gt, ge), got {v}", "cmp_type")


def _cmp(scalar_rhs: bool):
    def rule(args: Args) -> Type | None:
        _cmp_type(args)
        x = args.tile("lhs")
        if scalar_rhs:
            rt = args.type("rhs")
            if rt is not None and not isinstance(rt, ScalarType):
                args.fail(f"{args.op.name}: the right operand must be a scalar, got a {type(rt).__name__}", "rhs",
                          hint="use tile.cmp for two tiles")
            shape = x.shape if x is not None else None
        else:
            y = args.tile("rhs")
            if x is None or y is None:
                return None
            shape = broadcast(args, x.shape, y.shape)
        if x is None:
            return None
        mask, valid = _mask_shape(tuple(shape), valid_shape_of(x))
        return new_tile(mask, dtypes.BY_NAME["UINT8"], x.memory or "Vec", valid)

    rule.__doc__ = ("compare a tile with a " + ("scalar" if scalar_rhs else "tile") + " (cmp_type 0..5: eq ne lt le "
                    "gt ge); a packed UINT8 predicate mask, one bit per element, rows padded to 32 bytes")
    return rule


register("tile.cmp", ("lhs", "rhs"), optional=(("cmp_type", None),), family="elementwise",
         pto=_not_yet("tile.cmp"))(_cmp(False))
register("tile.cmps", ("lhs", "rhs"), optional=(("cmp_type", None),), family="elementwise",
         pto=_not_yet("tile.cmps"))(_cmp(True))


@register("tensor.cmp", ("lhs", "rhs"), optional=(("cmp_type", None),), family="elementwise")
def _tensor_cmp(args: Args) -> Type | None:
    """compare a tensor with a tensor or a scalar (cmp_type 0..5); the result has the operand's dtype"""
    _cmp_type(args)
    rt = args.type("rhs")
    if isinstance(rt, ScalarType) or (rt is None and is_literal(args.get("rhs"))):
        return scalar_result(args, "tensor")
    return binary_result(args, "tensor")


short_name("cmp", tensor="tensor.cmp", tile="tile.cmp", tile_scalar="tile.cmps")
short_name("cmps", tile="tile.cmps")


def _tmp_ok(args: Args, x) -> None:
    """PyPTO asks of the scratch tile only that it is a 2-D tile (any dtype: it is raw scratch bytes)."""
    tmp = args.tile("tmp") if args.has("tmp") else None
    if tmp is not None and len(tmp.shape) != 2:
        args.fail(f"{args.op.name}: the scratch tile must be 2-D, got rank {len(tmp.shape)}", "tmp")


def _tiles_rule(names: tuple[str, ...], scalar: str | None, doc: str, dts=None):
    """Tiles `names` of one dtype broadcast together (a scalar operand `scalar` between them); the result
    has the first tile's dtype and memory."""
    def rule(args: Args) -> Type | None:
        if scalar is not None:
            st = args.type(scalar)
            if st is not None and not isinstance(st, ScalarType):
                args.fail(f"{args.op.name}: {scalar!r} must be a scalar, got a {type(st).__name__}", scalar)
        ts = [args.tile(n) for n in names]
        if any(t is None for t in ts):
            return None
        first = ts[0]
        shape = first.shape
        for t in ts[1:]:
            same_dtype(args, first, t)
            shape = broadcast(args, shape, t.shape)
        if dts is not None and first.dtype.name not in dts:
            args.fail(f"{args.op.name} supports {', '.join(dts)}, got {first.dtype.name}", names[0])
        _tmp_ok(args, first)
        valid = valid_shape_of(first) if shapes_equal(shape, first.shape) is True else None
        return new_tile(shape, first.dtype, first.memory, valid)

    rule.__doc__ = doc
    return rule


_TDIV = ("INT16", "INT32", "FP16", "FP32")
register("tile.rem", ("lhs", "rhs"), optional=(("tmp", None),), family="elementwise", pto=_not_yet("tile.rem"))(
    _tiles_rule(("lhs", "rhs"), None, "elementwise remainder of two tiles (scratch tile tmp)", _TDIV))
register("tile.rems", ("lhs", "rhs"), optional=(("tmp", None),), family="elementwise", pto=_not_yet("tile.rems"))(
    _tiles_rule(("lhs",), "rhs", "elementwise remainder of a tile by a scalar (scratch tile tmp)", _TDIV))
register("tile.fmod", ("lhs", "rhs"), family="elementwise", pto=_not_yet("tile.fmod"))(
    _tiles_rule(("lhs", "rhs"), None, "elementwise C fmod of two tiles (the sign of the dividend)"))
register("tile.fmods", ("lhs", "rhs"), family="elementwise", pto=_not_yet("tile.fmods"),
         interp=TileScalarKernel(lambda np, x, s: np.fmod(x, s)))(
    _tiles_rule(("lhs",), "rhs", "elementwise C fmod of a tile by a scalar (the sign of the dividend)"))
register("tile.addc", ("lhs", "rhs", "rhs2"), family="elementwise", pto=_not_yet("tile.addc"))(
    _tiles_rule(("lhs", "rhs", "rhs2"), None, "lhs + rhs + rhs2 over three tiles"))
register("tile.subc", ("lhs", "rhs", "rhs2"), family="elementwise", pto=_not_yet("tile.subc"))(
    _tiles_rule(("lhs", "rhs", "rhs2"), None, "lhs - rhs + rhs2 over three tiles"))
register("tile.addsc", ("lhs", "rhs", "rhs2"), family="elementwise", pto=_not_yet("tile.addsc"))(
    _tiles_rule(("lhs", "rhs2"), "rhs", "lhs + scalar + rhs2"))
register("tile.subsc", ("lhs", "rhs", "rhs2"), family="elementwise", pto=_not_yet("tile.subsc"))(
    _tiles_rule(("lhs", "rhs2"), "rhs", "lhs - scalar + rhs2"))
for _n in ("rem", "fmod"):
    short_name(_n, tile=f"tile.{_n}", tile_scalar=f"tile.{_n}s")
    short_name(f"{_n}s", tile=f"tile.{_n}s")
for _n in ("addc", "subc", "addsc", "subsc"):
    short_name(_n, tile=f"tile.{_n}")


@register("tile.prelu", ("tile", "slope"), optional=(("tmp", None),), family="elementwise",
          pto=_not_yet("tile.prelu"))
def _prelu(args: Args) -> Type | None:
    """parametric ReLU: x > 0 ? x : x * slope, with a slope tile of the input's shape (FP16/FP32, 2-D)"""
    x, s = args.tile("tile"), args.tile("slope")
    if x is None or s is None:
        return None
    if x.dtype.name not in ("FP16", "FP32"):
        args.fail(f"tile.prelu supports FP16 and FP32 tiles, got {x.dtype.name}", "tile")
    same_dtype(args, x, s)
    if len(x.shape) != 2:
        args.fail(f"tile.prelu takes a 2-D tile, got rank {len(x.shape)}", "tile")
    if shapes_equal(x.shape, s.shape) is False:
        args.fail("tile.prelu: the slope tile needs the input's shape", "slope")
    _tmp_ok(args, x)
    return new_tile(x.shape, x.dtype, x.memory, valid_shape_of(x))


short_name("prelu", tile="tile.prelu")


# Broadcasts of PyPTO (src/ir/op/tile_ops/broadcast.cpp): the result has the target's shape, dtype and
# valid region. row_expand / col_expand copy a [M, 1] / [1, N] vector across the target; expands fills it
# with a scalar; row/col_expand_expdif compute exp(x - v) against the broadcast vector.
def _broadcast_to_target(axis: str | None, vec: str):
    def rule(args: Args) -> Type | None:
        x = args.tile("target")
        if axis is None:
            st = args.type(vec)
            if st is not None and not isinstance(st, ScalarType):
                args.fail(f"{args.op.name}: {vec!r} must be a scalar, got a {type(st).__name__}", vec)
            if x is None:
                return None
            return new_tile(x.shape, x.dtype, x.memory, valid_shape_of(x))
        v = args.tile(vec)
        if x is None or v is None:
            return None
        same_dtype(args, x, v)
        if len(x.shape) < 2 or len(v.shape) < 2:
            args.fail(f"{args.op.name} takes tiles of rank 2 or more", "target")
        from ptoc.ops.common import cint

        keep, one = (-2, -1) if axis == "row" else (-1, -2)
        if cint(v.shape[one]) not in (None, 1) or (
                cint(v.shape[keep]) is not None and cint(x.shape[keep]) is not None
                and cint(v.shape[keep]) != cint(x.shape[keep])):
            args.fail(f"{args.op.name}: the {axis} vector must be [{'M, 1' if axis == 'row' else '1, N'}] of the "
                      "target", vec)
        return new_tile(x.shape, x.dtype, x.memory, valid_shape_of(x))

    rule.__doc__ = {"row": "copy a [M, 1] vector across every column of the target's shape",
                    "col": "copy a [1, N] vector down every row of the target's shape",
                    None: "a tile of the target's shape filled with a scalar"}[axis]
    return rule


register("tile.row_expand", ("target", "row_vec"), family="elementwise", pto=_not_yet("tile.row_expand"))(
    _broadcast_to_target("row", "row_vec"))
register("tile.col_expand", ("target", "col_tile"), family="elementwise", pto=_not_yet("tile.col_expand"))(
    _broadcast_to_target("col", "col_tile"))
register("tile.expands", ("target", "scalar"), family="elementwise", pto=_not_yet("tile.expands"))(
    _broadcast_to_target(None, "scalar"))
register("tile.row_expand_expdif", ("input", "row"), family="elementwise",
         pto=_not_yet("tile.row_expand_expdif"))(_expand("row", "exp(x - v)"))
register("tile.col_expand_expdif", ("input", "col"), family="elementwise",
         pto=_not_yet("tile.col_expand_expdif"))(_expand("col", "exp(x - v)"))
for _n in ("row_expand", "col_expand", "expands", "row_expand_expdif", "col_expand_expdif"):
    short_name(_n, tile=f"tile.{_n}")
