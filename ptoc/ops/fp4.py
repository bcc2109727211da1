"""Packed FP4 conversions and MX quantization (spec FP4-1..FP4-5, OP-6).

FP4E2M1X2 and FP4E1M2X2 are byte carriers holding two values each (FP4-1): shapes count carriers.
`check_fp4_cast` is the part of `tensor.cast` / `tile.cast` (elementwise.py) that knows the packed
types (FP4-2, FP4-4):

- BF16 -> packed contracts the packed axis 2:1, packed -> BF16 expands it 1:2. The packed axis is the
  last one (ND), or the second-to-last for DN (col-major) operands: DN `[M, K]` carriers decode to
  BF16 `[2M, K]`.
- Packing needs whole value pairs: the packed source extent must be a positive even number, or a
  dynamic extent provably even (`2 * n`). Decoding needs no evenness.
- DN conversions need a full static contiguous 2-D rectangle with BF16 or packed FP4 at both ends.
- Packed storage must be unboxed (none_box) Vec for tiles.
- The two formats are distinct types; a cast between them converts numerically through BF16 and
  keeps the carrier shape. Encoding from FP16/FP32 or wide integers is rejected (two roundings):
  cast to BF16 first. Decoding to wider float types goes through the lossless BF16 step.
- Every pair without a packed type passes through unchanged.

The registry rejects any op touching a packed type on A2/A3 (FP4-3, `registry._check_packed_fp4_target`).

quant_mx (`tensor.quant_mx`, `tile.quant_mx`, `pl.quant_mx`; Ascend950 only, OP-6/FP4-5) quantizes
groups of 32 values and returns a tuple (data, FP8E8M0 scale):
axis=1 `[M, K]` -> data `[M, K/2]` (FP4) or `[M, K]` (FP8), scale `[M, K/32]`;
axis=0 `[N, K]` -> data `[K, N/2]` / `[K, N]`, scale `[K/32, N]`.
"""

from __future__ import annotations

from ptoc.ir import dtypes
from ptoc.ir.nodes import (
    BinOp,
    DTypeLit,
    Expr,
    StrLit,
    TensorType,
    TileType,
    TileView,
    TupleType,
    Type,
)
from ptoc.ir.types import effective_tile_view
from ptoc.ops.common import (
    c,
    cint,
    const_int_arg,
    fmt_shape,
    has_partial_valid,
    new_tensor,
    new_tile,
    static_shape,
    valid_shape_of,
)
from ptoc.ops.registry import Args, register, short_name

BF16 = dtypes.BF16
# Sources whose values BF16 holds exactly: encoding through BF16 rounds once (FP4-4).
EXACT_IN_BF16 = ("BF16", "INT8", "UINT8", "FP8E4M3FN", "FP8E5M2", "HF8")
# Targets a decoded value reaches losslessly through BF16.
DECODE_TARGETS = ("BF16", "FP16", "FP32", "FP8E4M3FN", "FP8E5M2")
ENCODE_MODES = ("none", "rint", "round", "floor", "ceil", "trunc")


def provably_even(e: Expr) -> bool:
    """Is `e` provably a multiple of 2 (constants, products with an even factor, sums of evens)?"""
    v = cint(e)
    if v is not None:
        return v % 2 == 0
    if isinstance(e, BinOp):
        if e.op == "*":
            return provably_even(e.lhs) or provably_even(e.rhs)
        if e.op in ("+", "-"):
            return provably_even(e.lhs) and provably_even(e.rhs)
    return False


def half(e: Expr) -> Expr:
    v = cint(e)
    if v is not None:
        return c(v // 2)
    if isinstance(e, BinOp) and e.op == "*":
        for a, b in ((e.lhs, e.rhs), (e.rhs, e.lhs)):
            va = cint(a)
            if va is not None and va % 2 == 0:
                return b if va == 2 else BinOp("*", c(va // 2), b)
    return BinOp("//", e, c(2))


def double(e: Expr) -> Expr:
    v = cint(e)
    if v is not None:
        return c(v * 2)
    return BinOp("*", c(2), e)


def _is_dn(t: TensorType | TileType) -> bool:
    if isinstance(t, TensorType):
        return t.layout == "DN"
    return effective_tile_view(t)["blayout"] == "col_major" and t.rank == 2 and not (
        cint(t.shape[1]) == 1 and cint(t.shape[0]) != 1)  # an [R, 1] column tile is implicitly col-major


def _check_dn(args: Args, t: TensorType | TileType, other: dtypes.DType) -> None:
    """FP4-4: DN conversions need a full static contiguous 2-D rectangle, BF16 or packed at both ends."""
    problems = []
    if t.rank != 2 or static_shape(t.shape) is None:
        problems.append(f"shape {fmt_shape(t.shape)} is not static 2-D")
    if has_partial_valid(t):
        problems.append("it is partially valid")
    if isinstance(t, TensorType) and t.view is not None and t.view.stride:
        problems.append("it has explicit strides")
    if isinstance(t, TileType):
        eff = effective_tile_view(t)
        if eff["stride"]:
            problems.append("it has explicit strides")
        if eff["start_offset"] is not None and cint(eff["start_offset"]) != 0:
            problems.append("its start offset is not zero")
        if eff["pad"] not in (None, "null"):
            problems.append("it is padded")
    for dt in (t.dtype, other):
        if dt != BF16 and not dt.is_packed_fp4:
            problems.append(f"{dt.name} is neither BF16 nor packed FP4")
    if problems:
        args.fail(f"{args.op.name}: a DN (col-major) packed-FP4 conversion needs a full static contiguous 2-D "
                  f"rectangle with BF16 or packed FP4 at both ends; here {'; '.join(problems)}", "input",
                  rule="FP4-4", hint="convert a full static tile, or convert in ND (row-major) layout")


def _check_unboxed(args: Args, t: TensorType | TileType) -> None:
    if isinstance(t, TileType):
        eff = effective_tile_view(t)
        if (t.memory or "Vec") != "Vec" or eff["slayout"] != "none_box":
            args.fail(f"{args.op.name}: packed FP4 conversions run on unboxed (none_box) Vec tiles; this tile "
                      f"is {t.memory or 'Vec'} with slayout {eff['slayout']}", "input", rule="FP4-4",
                      hint="move the data into a plain Vec tile first")


def _mode(args: Args) -> str | None:
    e = args.get("mode")
    return e.value if isinstance(e, StrLit) else None


def check_fp4_cast(args: Args, src_type: TensorType | TileType, dst_dtype: dtypes.DType):
    """Shape and valid shape of a cast's result, enforcing the packed-FP4 rules (FP4-2, FP4-4).
    Returns (shape, valid_shape); pairs without a packed type pass through unchanged."""
    src = src_type.dtype
    shape, valid = tuple(src_type.shape), tuple(valid_shape_of(src_type))
    if not (src.is_packed_fp4 or dst_dtype.is_packed_fp4) or src == dst_dtype:
        return shape, valid
    _check_unboxed(args, src_type)
    dn = _is_dn(src_type)
    if dn:
        _check_dn(args, src_type, dst_dtype)
    axis = src_type.rank - 2 if dn else src_type.rank - 1
    if src_type.rank < 1 or axis < 0:
        args.fail(f"{args.op.name}: a packed-FP4 conversion needs a tensor of rank >= 1", "input", rule="FP4-4")
    if src.is_packed_fp4 and dst_dtype.is_packed_fp4:
        # FP4-2: distinct formats; the numeric conversion goes through BF16 and keeps the carrier shape.
        return shape, valid
    if dst_dtype.is_packed_fp4:  # encode: contract the packed axis 2:1
        if src.name not in EXACT_IN_BF16:
            args.fail(f"{args.op.name}: encoding {src.name} to {dst_dtype.name} would round twice (through BF16)",
                      "input", rule="FP4-4",
                      hint=f"cast to BF16 first: pl.cast(x, target_type=pl.BF16), then to pl.{dst_dtype.name}")
        if src != BF16 and dn:
            args.fail(f"{args.op.name}: DN conversions to packed FP4 take BF16 sources", "input", rule="FP4-4")
        if _mode(args) == "odd":
            args.fail(f"{args.op.name}: rounding mode 'odd' is not supported when encoding packed FP4", "mode",
                      rule="FP4-4", hint="use one of rint, round, floor, ceil, trunc")
        for what, e in (("extent", shape[axis]), ("valid extent", valid[axis])):
            v = cint(e)
            if (v is not None and (v <= 0 or v % 2)) or (v is None and not provably_even(e)):
                args.fail(f"{args.op.name}: packing needs whole value pairs, but the packed axis {what} is "
                          f"{fmt_shape((e,))[1:-1]}", "input", rule="FP4-4",
                          hint="make the packed axis a positive even extent (a dynamic one as 2 * n)")
        shape = shape[:axis] + (half(shape[axis]),) + shape[axis + 1:]
        valid = valid[:axis] + (half(valid[axis]),) + valid[axis + 1:]
        return shape, valid
    # decode: expand the packed axis 1:2
    if dst_dtype.name not in DECODE_TARGETS:
        args.fail(f"{args.op.name}: decoding {src.name} to {dst_dtype.name} is not supported", "target_type",
                  rule="FP4-4", hint="decode to BF16 (lossless), then convert explicitly")
    if dn and dst_dtype != BF16:
        args.fail(f"{args.op.name}: DN conversions from packed FP4 produce BF16", "target_type", rule="FP4-4")
    shape = shape[:axis] + (double(shape[axis]),) + shape[axis + 1:]
    valid = valid[:axis] + (double(valid[axis]),) + valid[axis + 1:]
    return shape, valid


# --------------------------------------------------------------------------------------------------
# quant_mx (FP4-5, OP-6)
# --------------------------------------------------------------------------------------------------

MX_GROUP = 32
SCALE_FRACTAL = 32  # OP-7: MX scale tiles keep a fractal of 32


def _quant_dtype(args: Args) -> dtypes.DType:
    e = args.get("dtype") if args.get("dtype") is not None else args.get("target_type")
    if args.get("dtype") is not None and args.get("target_type") is not None:
        args.fail(f"{args.op.name}: give dtype= or target_type=, not both", "target_type", code="PTOC-E0201")
    if e is None:
        return dtypes.BY_NAME["FP8E4M3FN"]
    if not isinstance(e, DTypeLit):
        args.fail(f"{args.op.name}: dtype must be a dtype such as pl.FP4E2M1X2", code="PTOC-E0201")
    dt = e.dtype
    if dt == dtypes.FP4E1M2X2:
        args.fail(f"{args.op.name}: E1M2 quantization is not supported (FP4E1M2X2)", rule="FP4-5",
                  hint="quantize to pl.FP4E2M1X2 (MXFP4) or pl.FP8E4M3FN (MXFP8)")
    if dt.name not in ("FP8E4M3FN", "FP4E2M1X2"):
        args.fail(f"{args.op.name}: quantization targets FP8E4M3FN or FP4E2M1X2, got {dt.name}", rule="FP4-5",
                  hint="use dtype=pl.FP4E2M1X2 or dtype=pl.FP8E4M3FN")
    return dt


def _quant_rule(kind: str):
    def rule(args: Args) -> Type | None:
        x = args.tensor("input") if kind == "tensor" else args.tile("input")
        axis_name = "group_axis" if args.get("group_axis") is not None else "axis"
        if args.get("group_axis") is not None and args.get("axis") is not None:
            args.fail(f"{args.op.name}: give axis= or group_axis=, not both", "group_axis", code="PTOC-E0201")
        axis = const_int_arg(args, axis_name, 1)
        if axis not in (0, 1):
            args.fail(f"{args.op.name}: axis must be 0 or 1, got {axis}", axis_name, rule="FP4-5",
                      hint="axis=1 groups along K of an [M, K] A operand; axis=0 along K of an [N, K] B operand")
        alg = args.get("quant_scale_alg")
        if alg is not None and not (isinstance(alg, StrLit) and alg.value in ("ocp", "nv")):
            args.fail(f"{args.op.name}: quant_scale_alg must be 'ocp' or 'nv'", "quant_scale_alg",
                      code="PTOC-E0201")
        dt = _quant_dtype(args)
        if not args.target.supports_mx:
            args.fail(f"{args.op.name} is supported on Ascend950 (a5) only; the target is {args.arch}", rule="OP-6",
                      hint="compile with --arch a5")
        if x is None:
            return None
        fp4 = dt.is_packed_fp4
        allowed = ("FP16", "BF16") if fp4 else ("FP16", "BF16", "FP32")
        if x.dtype.name not in allowed:
            args.fail(f"{args.op.name}: quantizes {'/'.join(allowed)} values, got {x.dtype.name}", "input",
                      rule="FP4-5", hint="cast to BF16 first")
        st = static_shape(x.shape)
        if x.rank != 2 or st is None or st[0] <= 0 or st[1] <= 0:
            args.fail(f"{args.op.name}: needs a static positive 2-D input, got {fmt_shape(x.shape)}", "input",
                      rule="FP4-5")
        if has_partial_valid(x):
            args.fail(f"{args.op.name}: the input must be fully valid", "input", rule="FP4-5",
                      hint="quantize a full tile; pad the data instead of narrowing the valid region")
        if isinstance(x, TileType) and (x.memory or "Vec") != "Vec":
            args.fail(f"{args.op.name}: the input tile must live in Vec, not {x.memory}", "input", rule="FP4-5")
        if alg is not None and alg.value == "nv" and axis == 1:
            args.fail(f"{args.op.name}: the 'nv' scale algorithm supports axis=0 only", "quant_scale_alg",
                      rule="FP4-5")
        d0, k = st
        if k % 64:
            args.fail(f"{args.op.name}: K = {k} must be a multiple of 64", "input", rule="FP4-5")
        if axis == 1 and d0 % 16:
            args.fail(f"{args.op.name}: axis=1 needs M % 16 == 0, got M = {d0}", "input", rule="FP4-5")
        n_mult = 64 if fp4 else 32
        if axis == 0 and d0 % n_mult:
            args.fail(f"{args.op.name}: axis=0 {'FP4' if fp4 else 'FP8'} quantization needs N % {n_mult} == 0, "
                      f"got N = {d0}", "input", rule="FP4-5",
                      hint="FP4 carrier rows must span whole 32-byte blocks" if fp4 else None)
        per = 2 if fp4 else 1
        if axis == 1:
            data, scale = (d0, k // per), (d0, k // MX_GROUP)
        else:
            data, scale = (k, d0 // per), (k // MX_GROUP, d0)
        e8m0 = dtypes.BY_NAME["FP8E8M0"]
        if kind == "tensor":
            return TupleType((new_tensor(tuple(c(v) for v in data), dt),
                              new_tensor(tuple(c(v) for v in scale), e8m0)))
        mem = x.memory or "Vec"
        return TupleType((new_tile(tuple(c(v) for v in data), dt, mem),
                          new_tile(tuple(c(v) for v in scale), e8m0, mem,
                                   base_view=TileView(fractal=SCALE_FRACTAL))))

    rule.__doc__ = f"{kind} MX block-32 quantization -> (data, FP8E8M0 scale); Ascend950 only (FP4-5, OP-6)"
    return rule


_QUANT_OPTS = (("axis", None), ("group_axis", None), ("dtype", None), ("target_type", None),
               ("quant_scale_alg", None))
register("tensor.quant_mx", ("input",), optional=_QUANT_OPTS, family="fp4")(_quant_rule("tensor"))
register("tile.quant_mx", ("input",), optional=_QUANT_OPTS, family="fp4")(_quant_rule("tile"))
register("tile.tquant_mx", ("input",), optional=_QUANT_OPTS, family="fp4")(_quant_rule("tile"))
short_name("quant_mx", tensor="tensor.quant_mx", tile="tile.quant_mx")

__all__ = ["check_fp4_cast", "provably_even"]
