"""Gather, scatter, mask patterns and sorting (spec OP-5, OP-6, OP-9).

- `tensor.gather` has two forms. With `dim=` it indexes along one axis (2-D/3-D, any axis; the result
  takes the index's shape). Without `dim` it is the flat gather `pl.gather(src, index=idx)`, i.e.
  `src.reshape(-1)[idx]` (OP-5): the index is a 2-D INT32 tensor or Vec tile, the result a tensor whose
  shape and valid shape follow the index and whose dtype follows the source (FP16/FP32/INT16/INT32),
  and the index's physical column count must be a positive static multiple of 16 (2-byte sources) or
  8 (4-byte sources) so that index and output rows are 32-byte aligned, a single row included.
- `*.gather_mask` / `*.scatter_mask` use a compile-time mask pattern (OP-9, `mask_pattern=` 1..7 or
  `pl.MaskPattern.P0101`...): gather_mask compacts the marked columns (out cols = cols / stride),
  scatter_mask expands into the marked columns of dst (dst cols = cols * stride).
- `tensor.scatter` is the column-wise inverse of gather (2-D, dim=-1, index shaped like src);
  `tile.scatter` the index form of pto.tscatter with its dtype pairing (OP-6).
- `tile.gather`, `tile.gatherb`, `tile.mgather`, and the sort ops `*.sort32`, `*.mrgsort_format1/2`.

`mask_columns(pattern, cols)` is the pure selection table the numeric reference shares.
"""

from __future__ import annotations

from ptoc.ir import dtypes
from ptoc.ir.nodes import (
    BinOp,
    ConstBool,
    ConstInt,
    DTypeLit,
    EnumLit,
    Expr,
    ListExpr,
    StrLit,
    TensorType,
    TileType,
    TupleExpr,
    Type,
)
from ptoc.ir.types import effective_tile_view
from ptoc.ops.common import (
    c,
    cint,
    const_int_arg,
    enum_arg,
    fmt_shape,
    int_list,
    is_literal,
    new_tensor,
    new_tile,
    shapes_equal,
    static_shape,
    valid_shape_of,
)
from ptoc.target.facts import C0_BYTES, FRACTAL_ROWS
from ptoc.ops.registry import Args, Emitter, NoPto, Pto, declare, kind_of, register, short_name

# --------------------------------------------------------------------------------------------------
# Mask patterns (OP-9)
# --------------------------------------------------------------------------------------------------

# value -> (name, stride, marked residue). Names read right to left: the rightmost bit is column 0.
MASK_PATTERNS: dict[int, tuple[str, int, int]] = {
    1: ("P0101", 2, 0),
    2: ("P1010", 2, 1),
    3: ("P0001", 4, 0),
    4: ("P0010", 4, 1),
    5: ("P0100", 4, 2),
    6: ("P1000", 4, 3),
    7: ("P1111", 1, 0),
}
MASK_BY_NAME = {name: v for v, (name, _, _) in MASK_PATTERNS.items()}


def _pattern_value(pattern: int | str) -> int:
    if isinstance(pattern, str):
        if pattern not in MASK_BY_NAME:
            raise ValueError(f"unknown mask pattern {pattern!r}; one of {', '.join(MASK_BY_NAME)}")
        return MASK_BY_NAME[pattern]
    if pattern not in MASK_PATTERNS:
        raise ValueError(f"mask pattern {pattern} is out of range 1..7")
    return pattern


def mask_stride(pattern: int | str) -> int:
    """Columns per marked column: 2 for P0101/P1010, 4 for P0001..P1000, 1 for P1111 (OP-9)."""
    return MASK_PATTERNS[_pattern_value(pattern)][1]


def mask_columns(pattern: int | str, cols: int) -> list[int]:
    """The columns of a `cols`-wide row that `pattern` (1..7 or its name) marks, in order (OP-9)."""
    _, stride, residue = MASK_PATTERNS[_pattern_value(pattern)]
    return [col for col in range(cols) if col % stride == residue]


def _pattern_arg(args: Args, name: str = "mask_pattern") -> int:
    e = args.get(name)
    names = ", ".join(f"{n}={v}" for n, v in MASK_BY_NAME.items())
    if e is None:
        args.fail(f"{args.op.name} needs {name}= (a mask pattern 1..7)", code="PTOC-E0201", rule="OP-9",
                  hint=f"e.g. {name}=1 (P0101, even columns); patterns: {names}")
    if isinstance(e, EnumLit) and e.family in ("MaskPattern", "tile.MaskPattern"):
        if e.member not in MASK_BY_NAME:
            args.fail(f"{args.op.name}: unknown mask pattern {e.member!r}", name, rule="OP-9",
                      hint=f"patterns: {names}")
        return MASK_BY_NAME[e.member]
    v = cint(e)
    if v is None:
        args.fail(f"{args.op.name}: {name} must be a compile-time mask pattern", name, rule="OP-9",
                  code="PTOC-E0201", hint=f"give an integer 1..7 or a pl.MaskPattern member; {names}")
    if v not in MASK_PATTERNS:
        args.fail(f"{args.op.name}: {name}={v} is out of range; mask patterns are 1..7", name, rule="OP-9",
                  hint=f"patterns: {names}")
    return v


# --------------------------------------------------------------------------------------------------
# Small shape helpers
# --------------------------------------------------------------------------------------------------

GATHER_DTYPES = ("FP16", "FP32", "INT16", "INT32")
SCATTER_DTYPES = ("INT8", "INT16", "INT32", "FP16", "FP32", "BF16")
SORT_DTYPES = ("FP16", "FP32")


def _div(e: Expr, k: int) -> Expr:
    """e / k for an e known (or assumed) divisible by k; constants fold, `k * n` simplifies to n."""
    if k == 1:
        return e
    v = cint(e)
    if v is not None:
        return c(v // k)
    if isinstance(e, BinOp) and e.op == "*":
        for a, b in ((e.lhs, e.rhs), (e.rhs, e.lhs)):
            va = cint(a)
            if va is not None and va % k == 0:
                return b if va == k else BinOp("*", c(va // k), b)
    return BinOp("//", e, c(k))


def _mul(e: Expr, k: int) -> Expr:
    if k == 1:
        return e
    v = cint(e)
    if v is not None:
        return c(v * k)
    return BinOp("*", e, c(k))


def _operand(args: Args, name: str) -> TensorType | TileType | None:
    t = args.type(name)
    if t is None:
        return None
    if not isinstance(t, (TensorType, TileType)):
        args.fail(f"{args.op.name}: argument {name!r} must be a tensor or a tile, got a {kind_of(t)}", name)
    return t


def _dtype_in(args: Args, name: str, t, allowed, what: str, rule: str) -> None:
    if t.dtype.name not in allowed:
        args.fail(f"{args.op.name}: {what} dtype must be one of {', '.join(allowed)}, got {t.dtype.name}", name,
                  rule=rule, hint="cast it first: pl.cast(x, target_type=pl.FP32)"
                  if t.dtype.is_float else None)


def _rank(args: Args, name: str, t, ranks: tuple[int, ...], rule: str) -> None:
    if t.rank not in ranks:
        want = " or ".join(str(r) for r in ranks)
        args.fail(f"{args.op.name}: {name} must have rank {want}, got rank {t.rank} {fmt_shape(t.shape)}", name,
                  rule=rule)


def _same_kind_result(kind_src, shape, dt, valid, memory: str | None = "Vec"):
    if isinstance(kind_src, TileType):
        return new_tile(shape, dt, memory, valid)
    return new_tensor(shape, dt, valid)


# --------------------------------------------------------------------------------------------------
# tensor.gather: per-axis and flat (OP-5)
# --------------------------------------------------------------------------------------------------


@register("tensor.gather", ("input",), optional=(("index", None), ("dim", None), ("mask_pattern", None),
                                                 ("output_dtype", None)), family="gather")
def _tensor_gather(args: Args) -> Type | None:
    """gather: per axis with dim= (2-D/3-D), flat `src.reshape(-1)[index]` without (OP-5), or by mask (OP-9)"""
    if args.get("mask_pattern") is not None:
        if args.has("index") or args.has("dim"):
            args.fail("pl.gather takes either index= or mask_pattern=, not both", "mask_pattern",
                      code="PTOC-E0201", hint="the mask form is pl.gather(src, mask_pattern=...)")
        return _gather_mask_rule(args, "input")
    if not args.has("index"):
        args.fail("pl.gather needs index= (or mask_pattern=)", code="PTOC-E0201",
                  hint="flat form: pl.gather(src, index=idx); per-axis form: pl.gather(src, idx, dim=-1)")
    if args.get("output_dtype") is not None:
        args.fail("pl.gather: output_dtype= belongs to the mask form", "output_dtype", code="PTOC-E0201")
    if args.get("dim") is not None:
        return _gather_dim(args)
    return _gather_flat(args)


def _gather_dim(args: Args) -> Type | None:
    src = args.tensor("input")
    idx = args.tensor("index")
    dim = const_int_arg(args, "dim")
    if src is None or idx is None:
        return None
    _dtype_in(args, "input", src, GATHER_DTYPES, "the source", "OP-5")
    _rank(args, "input", src, (2, 3), "OP-5")
    if idx.dtype != dtypes.INT32:
        args.fail(f"tensor.gather: the index must be INT32, got {idx.dtype.name}", "index", rule="OP-5",
                  hint="convert it: pl.cast(idx, target_type=pl.INT32)")
    if idx.rank != src.rank:
        args.fail(f"tensor.gather: the index has rank {idx.rank} but the source rank {src.rank}", "index",
                  rule="OP-5", hint="the per-axis form needs an index of the source's rank")
    if not -src.rank <= dim < src.rank:
        args.fail(f"tensor.gather: dim={dim} is out of range for rank {src.rank}", "dim", rule="OP-5",
                  hint=f"use -{src.rank} <= dim < {src.rank}")
    axis = dim % src.rank
    for i, (a, b) in enumerate(zip(idx.shape, src.shape)):
        va, vb = cint(a), cint(b)
        if i != axis and va is not None and vb is not None and va > vb:
            args.fail(f"tensor.gather: index axis {i} has extent {va}, larger than the source's {vb}", "index",
                      rule="OP-5", hint="outside the gathered axis the index may not exceed the source")
    return new_tensor(idx.shape, src.dtype, valid_shape_of(idx))


def _gather_flat(args: Args) -> Type | None:
    src = _operand(args, "input")
    idx = _operand(args, "index")
    if src is not None:
        _dtype_in(args, "input", src, GATHER_DTYPES, "the flat-gather source", "OP-5")
        if isinstance(src, TileType):
            _check_onchip_source(args, src)
    if idx is None:
        return None
    if idx.dtype != dtypes.INT32:
        args.fail(f"pl.gather: the index must be INT32, got {idx.dtype.name}", "index", rule="OP-5",
                  hint="convert it: pl.cast(idx, target_type=pl.INT32)")
    if idx.rank != 2:
        args.fail(f"pl.gather: the flat-gather index must be 2-D, got rank {idx.rank} {fmt_shape(idx.shape)}",
                  "index", rule="OP-5", hint="reshape the index to [rows, cols]")
    if isinstance(idx, TileType):
        _check_tile_index(args, idx)
    if src is None:
        return None
    multiple = 16 if src.dtype.bytes == 2 else 8
    cols = cint(idx.shape[1])
    if cols is None or cols <= 0 or cols % multiple != 0:
        got = "a dynamic column count" if cols is None else f"{cols} physical columns"
        rows = cint(idx.shape[0])
        padded = multiple if cols is None or cols <= 0 else -(-cols // multiple) * multiple
        want_cols = "cols" if cols is None else str(cols)
        args.fail(f"pl.gather: the index has {got}; an {src.dtype.name} source needs a positive static multiple of "
                  f"{multiple} (32-byte rows of index and output, a single row included)", "index", rule="OP-5",
                  hint=f"pad the index to [{rows if rows is not None else 'rows'}, {padded}] physical columns and "
                  f"narrow its valid region: idx = pl.set_validshape(padded_idx, "
                  f"{rows if rows is not None else 'rows'}, {want_cols})")
    return new_tensor(idx.shape, src.dtype, valid_shape_of(idx))


def _check_tile_index(args: Args, idx: TileType) -> None:
    if (idx.memory or "Vec") != "Vec":
        args.fail(f"pl.gather: a tile index must live in Vec, this one lives in {idx.memory}", "index", rule="OP-5",
                  hint="move it first: pl.move(idx, target_memory=pl.Mem.Vec)")
    eff = effective_tile_view(idx)
    if eff["blayout"] != "row_major" or eff["slayout"] != "none_box":
        args.fail("pl.gather: a tile index must be row-major without fractals "
                  f"(blayout={eff['blayout']}, slayout={eff['slayout']})", "index", rule="OP-5",
                  hint="materialise a row-major Vec copy of the index first")


def _check_onchip_source(args: Args, src: TileType) -> None:
    eff = effective_tile_view(src)
    shape = static_shape(src.shape)
    ok = ((src.memory or "Vec") == "Vec" and shape is not None and len(shape) == 2
          and eff["blayout"] == "row_major" and eff["slayout"] == "none_box")
    if not ok:
        args.fail("pl.gather: an on-chip source must be a static 2-D row-major Vec tile, got "
                  f"{fmt_shape(src.shape)} in {src.memory or 'Vec'} ({eff['blayout']}/{eff['slayout']})", "input",
                  rule="OP-5", hint="load or move the source into a static row-major Vec tile")
    rows, cols = shape
    if rows != 1 and (cols * src.dtype.bytes) % 32 != 0:
        args.fail(f"pl.gather: each row of a multi-row on-chip source must be 32-byte aligned; {cols} "
                  f"{src.dtype.name} columns are {cols * src.dtype.bytes} bytes", "input", rule="OP-5",
                  hint=f"pad the source rows to a multiple of {32 // src.dtype.bytes} columns")


# --------------------------------------------------------------------------------------------------
# gather_mask / scatter_mask (OP-9)
# --------------------------------------------------------------------------------------------------


def _gather_mask_rule(args: Args, name: str) -> Type | None:
    pattern = _pattern_arg(args)
    src = args.tensor(name) if args.op.name.startswith("tensor.") else args.tile(name)
    out_dt_e = args.get("output_dtype")
    if out_dt_e is not None and not isinstance(out_dt_e, DTypeLit):
        args.fail(f"{args.op.name}: output_dtype must be a dtype such as pl.UINT32", "output_dtype",
                  code="PTOC-E0201")
    if src is None:
        return None
    _dtype_in(args, name, src, GATHER_DTYPES, "the source", "OP-9")
    _rank(args, name, src, (2,), "OP-9")
    out_dt = src.dtype
    if isinstance(out_dt_e, DTypeLit):
        out_dt = out_dt_e.dtype
        if out_dt.bits != src.dtype.bits or out_dt.is_packed_fp4:
            args.fail(f"{args.op.name}: output_dtype {out_dt.name} ({out_dt.bits} bits) must have the source's "
                      f"width ({src.dtype.name}, {src.dtype.bits} bits)", "output_dtype", rule="OP-9",
                      hint="output_dtype reinterprets the selected bits; it does not convert values")
    stride = mask_stride(pattern)
    cols = src.shape[1]
    vc = cint(cols)
    if vc is not None and vc % stride != 0:
        args.fail(f"{args.op.name}: mask pattern {MASK_PATTERNS[pattern][0]} has stride {stride} but the last "
                  f"axis has {vc} columns", name, rule="OP-9",
                  hint=f"the last axis must be divisible by {stride}")
    out_shape = (src.shape[0], _div(cols, stride))
    valid = valid_shape_of(src)
    out_valid = None
    vvc = cint(valid[1])
    if vvc is not None:  # the valid columns that the pattern marks
        out_valid = (valid[0], c(len(mask_columns(pattern, vvc))))
    elif valid[1] == cols:
        out_valid = (valid[0], out_shape[1])
    return _same_kind_result(src, out_shape, out_dt, out_valid, getattr(src, "memory", None) or "Vec")


def _make_gather_mask(name: str):
    def rule(args: Args) -> Type | None:
        return _gather_mask_rule(args, name)

    rule.__doc__ = "select the mask-marked columns and compact them: out cols = cols / stride (OP-9)"
    return rule


register("tensor.gather_mask", ("input",), optional=(("mask_pattern", None), ("output_dtype", None)),
         family="gather")(_make_gather_mask("input"))
register("tile.gather_mask", ("src",), optional=(("mask_pattern", None), ("output_dtype", None)),
         family="gather")(_make_gather_mask("src"))


def _scatter_mask_rule(args: Args, src_name: str, dst_name: str) -> Type | None:
    pattern = _pattern_arg(args)
    get = args.tensor if args.op.name.startswith("tensor.") else args.tile
    src, dst = get(src_name), get(dst_name)
    for n, t in ((src_name, src), (dst_name, dst)):
        if t is not None:
            _dtype_in(args, n, t, SCATTER_DTYPES, f"the {n}", "OP-9")
            _rank(args, n, t, (2,), "OP-9")
    if src is None or dst is None:
        return None
    if src.dtype != dst.dtype:
        args.fail(f"{args.op.name}: {src_name} ({src.dtype.name}) and {dst_name} ({dst.dtype.name}) dtypes differ",
                  rule="OP-9", hint="cast the compact input to the destination dtype first")
    rs, rd = cint(src.shape[0]), cint(dst.shape[0])
    if rs is not None and rd is not None and rs != rd:
        args.fail(f"{args.op.name}: {src_name} has {rs} rows, {dst_name} {rd}", rule="OP-9",
                  hint="scatter_mask expands each row in place; the row counts must match")
    stride = mask_stride(pattern)
    cs, cd = cint(src.shape[1]), cint(dst.shape[1])
    if cd is not None and cd % stride != 0:
        args.fail(f"{args.op.name}: mask pattern {MASK_PATTERNS[pattern][0]} has stride {stride} but {dst_name} "
                  f"has {cd} columns", dst_name, rule="OP-9", hint=f"the last axis must be divisible by {stride}")
    if cs is not None and cd is not None and cd != cs * stride:
        args.fail(f"{args.op.name}: mask pattern {MASK_PATTERNS[pattern][0]} expands {cs} columns into "
                  f"{cs * stride}, but {dst_name} has {cd}", dst_name, rule="OP-9",
                  hint=f"dst columns = {src_name} columns * {stride}")
    if isinstance(dst, TileType):
        return dst  # DPS: the result is the destination, unmarked columns keep their values
    return new_tensor(dst.shape, dst.dtype, valid_shape_of(dst))


@register("tensor.scatter_mask", ("input", "dst"), optional=(("mask_pattern", None),), family="gather")
def _tensor_scatter_mask(args: Args) -> Type | None:
    """write the compact input into the mask-marked columns of dst: dst cols = cols * stride (OP-9)"""
    return _scatter_mask_rule(args, "input", "dst")


@register("tile.scatter_mask", ("dst", "src"), optional=(("mask_pattern", None),), family="gather")
def _tile_scatter_mask(args: Args) -> Type | None:
    """write src rows into the mask-marked columns of dst (DPS, result aliases dst) (OP-9)"""
    return _scatter_mask_rule(args, "src", "dst")


# --------------------------------------------------------------------------------------------------
# scatter (index forms)
# --------------------------------------------------------------------------------------------------


def _index_width(args: Args, dst, idx, idx_name: str) -> None:
    """OP-6: 4-byte dst <-> INT32 index, 2-byte dst <-> INT16, 1-byte dst <-> INT16."""
    if idx.dtype.name not in ("INT16", "INT32"):
        args.fail(f"{args.op.name}: the index dtype must be INT16 or INT32, got {idx.dtype.name}", idx_name,
                  rule="OP-6")
    need = dtypes.INT32 if dst.dtype.bytes == 4 else dtypes.INT16
    if idx.dtype != need:
        args.fail(f"{args.op.name}: a {dst.dtype.bytes}-byte destination ({dst.dtype.name}) needs {need.name} "
                  f"indexes, got {idx.dtype.name}", idx_name, rule="OP-6",
                  hint="index width follows the destination: 4-byte dst -> INT32, 2- and 1-byte dst -> INT16")


@register("tensor.scatter", ("input", "index", "src"), optional=(("dim", None),), family="gather")
def _tensor_scatter(args: Args) -> Type | None:
    """column scatter out[b, index[b, k]] = src[b, k] (2-D, dim=-1, index shaped like src)"""
    inp, idx, src = args.tensor("input"), args.tensor("index"), args.tensor("src")
    dim = const_int_arg(args, "dim", -1)
    if inp is None:
        return None
    _dtype_in(args, "input", inp, SCATTER_DTYPES, "the input", "OP-6")
    _rank(args, "input", inp, (2,), "OP-6")
    if dim not in (-1, 1):
        args.fail(f"tensor.scatter supports dim=-1 (the last axis) only, got dim={dim}", "dim", rule="OP-6",
                  hint="transpose so that the scattered axis is last")
    if src is not None:
        if src.dtype != inp.dtype:
            args.fail(f"tensor.scatter: src dtype {src.dtype.name} differs from input dtype {inp.dtype.name}", "src",
                      rule="OP-6", hint="cast src to the input dtype first")
        _rank(args, "src", src, (2,), "OP-6")
    if idx is not None:
        _index_width(args, inp, idx, "index")
        _rank(args, "index", idx, (2,), "OP-6")
    if src is not None and idx is not None:
        for i, what in ((0, "rows"), (1, "columns")):
            a, b = cint(idx.shape[i]), cint(src.shape[i])
            if a is not None and b is not None and a != b:
                args.fail(f"tensor.scatter: the index has {a} {what}, src {b}; the index has src's shape", "index",
                          rule="OP-6", hint="index[b, k] names the destination column of src[b, k]")
    if src is not None:
        for i, what in ((0, "rows"), (1, "columns")):
            a, b = cint(src.shape[i]), cint(inp.shape[i])
            if a is not None and b is not None and a > b:
                args.fail(f"tensor.scatter: src has {a} {what}, more than the input's {b}", "src", rule="OP-6")
    return new_tensor(inp.shape, inp.dtype)


@register("tile.scatter", ("dst", "src", "indexes"), family="gather")
def _tile_scatter(args: Args) -> Type | None:
    """index scatter into dst (pto.tscatter; DPS: the result aliases dst); dtype pairing per OP-6"""
    dst, src, idx = args.tile("dst"), args.tile("src"), args.tile("indexes")
    if dst is None:
        return None
    _dtype_in(args, "dst", dst, SCATTER_DTYPES, "the destination", "OP-6")
    _rank(args, "dst", dst, (2,), "OP-6")
    if src is not None:
        _dtype_in(args, "src", src, SCATTER_DTYPES, "the source", "OP-6")
        _rank(args, "src", src, (2,), "OP-6")
        if src.dtype != dst.dtype:
            args.fail(f"tile.scatter: src dtype {src.dtype.name} differs from dst dtype {dst.dtype.name}", "src",
                      rule="OP-6", hint="cast src to the destination dtype first")
        a, b = cint(src.shape[1]), cint(dst.shape[1])
        if a is not None and b is not None and a != b:
            args.fail(f"tile.scatter: src has {a} columns, dst {b}; whole rows are scattered", "src", rule="OP-6")
    if idx is not None:
        _index_width(args, dst, idx, "indexes")
        _rank(args, "indexes", idx, (2,), "OP-6")
        if src is not None:
            a, b = cint(idx.shape[0]), cint(src.shape[0])
            if a is not None and b is not None and a != b:
                args.fail(f"tile.scatter: indexes has {a} rows, src {b}; one destination per source row",
                          "indexes", rule="OP-6")
    return dst


# --------------------------------------------------------------------------------------------------
# tile.gather, tile.gatherb, tile.mgather
# --------------------------------------------------------------------------------------------------


@register("tile.gather", ("src", "indices", "tmp"), family="gather")
def _tile_gather(args: Args) -> Type | None:
    """index gather (pto.tgather): shape and valid shape of the indices, dtype of src"""
    src, idx, tmp = args.tile("src"), args.tile("indices"), args.tile("tmp")
    if src is not None:
        _dtype_in(args, "src", src, GATHER_DTYPES, "the source", "OP-5")
    for n, t in (("indices", idx), ("tmp", tmp)):
        if t is not None and t.dtype != dtypes.INT32:
            args.fail(f"tile.gather: {n} must be INT32, got {t.dtype.name}", n, rule="OP-5")
    if idx is not None and tmp is not None and idx.rank != tmp.rank:
        args.fail(f"tile.gather: tmp has rank {tmp.rank}, the indices rank {idx.rank}", "tmp", rule="OP-5",
                  hint="give tmp the shape of the indices")
    if src is None or idx is None:
        return None
    return new_tile(idx.shape, src.dtype, "Vec", valid_shape_of(idx))


@register("tile.gatherb", ("src", "offsets"), optional=(("output_dtype", None),), family="gather")
def _tile_gatherb(args: Args) -> Type | None:
    """gather 32-byte source blocks by UINT32 byte offsets; each offset column yields 32/sizeof(out) elements"""
    src, off = args.tile("src"), args.tile("offsets")
    out_e = args.get("output_dtype")
    if out_e is not None and not isinstance(out_e, DTypeLit):
        args.fail("tile.gatherb: output_dtype must be a dtype such as pl.FP32", "output_dtype", code="PTOC-E0201")
    if off is not None:
        if off.dtype.name != "UINT32":
            args.fail(f"tile.gatherb: the offsets must be UINT32 byte offsets, got {off.dtype.name}", "offsets",
                      rule="OP-6")
        _rank(args, "offsets", off, (2,), "OP-6")
        oc = cint(off.shape[1])
        if oc is None or oc <= 0 or oc % 8 != 0:
            args.fail(f"tile.gatherb: each offsets row must hold a positive whole number of 8-entry groups, got "
                      f"{'a dynamic count' if oc is None else oc}", "offsets", rule="OP-6",
                      hint="pad the offsets to a multiple of 8 columns and narrow the valid region")
    if src is None or off is None:
        return None
    out = out_e.dtype if isinstance(out_e, DTypeLit) else src.dtype
    if out.sub_byte or out.is_packed_fp4 or out.bytes not in (1, 2, 4):
        args.fail(f"tile.gatherb: output_dtype {out.name} is not a byte interpretation gatherb supports",
                  "output_dtype", rule="OP-6", hint="use a 1-, 2- or 4-byte dtype")
    per = 32 // out.bytes
    shape = (off.shape[0], _mul(off.shape[1], per))
    v = valid_shape_of(off)
    return new_tile(shape, out, "Vec", (v[0], _mul(v[1], per)))


MGATHER_DTYPES = ("INT8", "UINT8", "INT16", "UINT16", "INT32", "UINT32", "FP16", "BF16", "FP32")
MGATHER_A5_DTYPES = ("FP8E4M3FN", "FP8E5M2", "HF8")
MGATHER_OOB = ("undefined", "clamp", "wrap", "zero")


def _choice(args: Args, name: str, options: tuple[str, ...], default: str) -> str:
    e = args.get(name)
    if e is None:
        return default
    if isinstance(e, StrLit) and e.value in options:
        return e.value
    v = cint(e)
    if v is not None and 0 <= v < len(options):
        return options[v]
    args.fail(f"{args.op.name}: {name} must be one of {', '.join(repr(o) for o in options)}", name,
              code="PTOC-E0201")
    return default


@register("tile.mgather", ("mem", "idx"), optional=(("scratch", None), ("valid_shape", None), ("coalesce", None),
                                                    ("gather_oob", None), ("target_memory", None)),
          unit="mem", family="gather")
def _tile_mgather(args: Args) -> Type | None:
    """gather rows ("row") or elements ("elem") of a GM tensor into a new Vec or Mat tile"""
    mem = args.tensor("mem")
    coalesce = _choice(args, "coalesce", ("row", "elem"), "row")
    _choice(args, "gather_oob", MGATHER_OOB, "undefined")
    target = enum_arg(args, "target_memory", "Mem", "Vec")
    if target not in ("Vec", "Mat"):
        args.fail(f"tile.mgather gathers into Vec or Mat, not {target}", "target_memory", rule="OP-6")
    if mem is None:
        return None
    dt = mem.dtype
    if dt.name in MGATHER_A5_DTYPES:
        if not args.target.supports_wide_mgather:
            args.fail(f"tile.mgather: {dt.name} payloads are supported on Ascend950 (a5) only", "mem", rule="OP-6",
                      hint="compile with --arch a5")
    elif dt.name not in MGATHER_DTYPES:
        args.fail(f"tile.mgather: payload dtype {dt.name} is not supported", "mem", rule="OP-6",
                  hint="supported: " + ", ".join(MGATHER_DTYPES + MGATHER_A5_DTYPES))
    if target == "Vec":
        return _mgather_vec(args, mem, coalesce)
    return _mgather_mat(args, mem, coalesce)


def _mgather_vec(args: Args, mem: TensorType, coalesce: str) -> Type | None:
    if args.has("scratch") or args.has("valid_shape"):
        args.fail("tile.mgather: scratch and valid_shape belong to Mat output", "scratch" if args.has("scratch")
                  else "valid_shape", rule="OP-6", hint="drop them, or gather into target_memory=pl.Mem.Mat")
    idx = args.tile("idx")
    if idx is None:
        return None
    if idx.dtype != dtypes.INT32:
        args.fail(f"tile.mgather: the index tile must be INT32, got {idx.dtype.name}", "idx", rule="OP-6")
    _rank(args, "idx", idx, (2,), "OP-6")
    v = valid_shape_of(idx)
    if coalesce == "elem":
        return new_tile(idx.shape, mem.dtype, "Vec", v)
    if mem.rank < 2:
        args.fail("tile.mgather: row mode needs a source of rank >= 2 (rows of elements)", "mem", rule="OP-6")
    r0, r1 = cint(idx.shape[0]), cint(idx.shape[1])
    if r0 == 1:
        axis = 1
    elif r1 == 1 and r0 is not None:
        if not args.target.supports_wide_mgather:
            args.fail(f"tile.mgather: an [{r0}, 1] index is supported on Ascend950 (a5) only", "idx", rule="OP-6",
                      hint=f"use a [1, {r0}] index tile")
        axis = 0
    else:
        args.fail(f"tile.mgather: row mode needs a static [1, R] index tile, got {fmt_shape(idx.shape)}", "idx",
                  rule="OP-6")
    return new_tile((idx.shape[axis], mem.shape[-1]), mem.dtype, "Vec", (v[axis], mem.shape[-1]))


def _mgather_mat(args: Args, mem: TensorType, coalesce: str) -> Type | None:
    if mem.layout != "ND":
        args.fail("tile.mgather: Mat output needs an ND source tensor", "mem", rule="OP-6")
    idx = args.tensor("idx")
    if idx is None:
        return None
    if idx.dtype != dtypes.INT32 or idx.rank != 2 or idx.layout != "ND":
        args.fail(f"tile.mgather: Mat output needs a 2-D ND INT32 index tensor, got {idx.dtype.name} "
                  f"{fmt_shape(idx.shape)}", "idx", rule="OP-6")
    shape = _mgather_elem_shape(args, mem, idx) if coalesce == "elem" else _mgather_row_shape(args, mem, idx)
    st = static_shape(shape)
    c0 = C0_BYTES // mem.dtype.bytes
    if st is None or st[0] % FRACTAL_ROWS != 0 or st[1] % c0 != 0:
        args.fail(f"tile.mgather: a Mat output must be static with rows a multiple of {FRACTAL_ROWS} and columns "
                  f"a multiple of {c0}, got {fmt_shape(shape)}", "idx", rule="OP-6",
                  hint="pad the output and give the written region with valid_shape=[rows, cols]")
    if coalesce == "elem" and args.tensor("scratch") is not None:
        ss = static_shape(args.tensor("scratch").shape)
        need = st[0] * st[1]
        if ss is None or _prod(ss) < need:
            args.fail(f"tile.mgather: the scratch tensor needs at least {need} elements", "scratch", rule="OP-6")
    return new_tile(shape, mem.dtype, "Mat", _mgather_valid(args, st))


def _mgather_elem_shape(args: Args, mem: TensorType, idx: TensorType):
    """Mat elem mode: one element per index, staged through a GM scratch tensor; the output is idx's shape."""
    scratch = args.tensor("scratch")
    if scratch is None:
        args.fail("tile.mgather: Mat elem mode needs a GM scratch= tensor", rule="OP-6",
                  hint="pass a contiguous ND tensor of the source dtype with at least as many elements")
    if scratch.dtype != mem.dtype or scratch.layout != "ND" or (scratch.view is not None and scratch.view.stride):
        args.fail("tile.mgather: the scratch tensor must be a contiguous ND tensor of the source dtype",
                  "scratch", rule="OP-6")
    return idx.shape


def _mgather_row_shape(args: Args, mem: TensorType, idx: TensorType):
    """Mat row mode: a [1, R] index tensor gathers R rows of the source."""
    if args.has("scratch") and not args.has("valid_shape") and isinstance(args.get("scratch"),
                                                                            (ListExpr, TupleExpr)):
        args.values["valid_shape"] = args.values.pop("scratch")  # positional [rows, cols] in row mode
    elif args.has("scratch"):
        args.fail("tile.mgather: scratch= belongs to Mat elem mode", "scratch", rule="OP-6")
    if mem.rank < 2 or cint(idx.shape[0]) != 1:
        args.fail("tile.mgather: Mat row mode needs a [1, R] index tensor and a source of rank >= 2", "idx",
                  rule="OP-6")
    return (idx.shape[1], mem.shape[-1])


def _mgather_valid(args: Args, st) -> tuple | None:
    if not args.has("valid_shape"):
        return None
    e = args.get("valid_shape")
    items = e.items if isinstance(e, (ListExpr, TupleExpr)) else None
    vals = [cint(x) for x in items] if items is not None else None
    if vals is None or len(vals) != 2 or any(v is None for v in vals) or not all(
            0 < v <= p for v, p in zip(vals, st)):
        args.fail(f"tile.mgather: valid_shape must be two constants within (0, {st[0]}] x (0, {st[1]}]",
                  "valid_shape", rule="OP-6")
    return tuple(items)


def _prod(xs) -> int:
    p = 1
    for x in xs:
        p *= x
    return p


# --------------------------------------------------------------------------------------------------
# Sorting: sort32 (value/index pairs double the last axis), mrgsort format1/format2
# --------------------------------------------------------------------------------------------------


def _sort32(kind: str):
    def rule(args: Args) -> Type | None:
        get = args.tensor if kind == "tensor" else args.tile
        src = get("src")
        get("idx")
        if src is None:
            return None
        _dtype_in(args, "src", src, SORT_DTYPES, "the source", "OP-6")
        if src.rank < 1:
            args.fail(f"{args.op.name} needs a source of rank >= 1", "src")
        shape = tuple(src.shape[:-1]) + (_mul(src.shape[-1], 2),)
        return _same_kind_result(src, shape, src.dtype, None)

    rule.__doc__ = f"{kind} sort of 32-element blocks; (value, index) pairs double the last axis"
    return rule


def _mrgsort1(kind: str):
    def rule(args: Args) -> Type | None:
        get = args.tensor if kind == "tensor" else args.tile
        src = get("src")
        bt = args.scalar("block_len")
        if bt is not None and not bt.dtype.is_int:
            args.fail(f"{args.op.name}: block_len must be an integer, got {bt.dtype.name}", "block_len")
        v = cint(args.get("block_len"))
        if v is not None and (v <= 0 or v % 64 != 0):
            args.fail(f"{args.op.name}: block_len must be a positive multiple of 64, got {v}", "block_len",
                      hint="runs are merged in blocks of 64-element multiples")
        if src is None:
            return None
        _dtype_in(args, "src", src, SORT_DTYPES, "the source", "OP-6")
        return _same_kind_result(src, src.shape, src.dtype, None)

    rule.__doc__ = f"{kind} single-list merge sort (format1): the result has the source's shape"
    return rule


def _mrgsort2(kind: str):
    """PyPTO's format2 merges 2..4 sorted lists: the tile form takes its destination workspace `tmp` as
    its last tile argument (so `src2` / `src3` may hold it) and returns tmp's shape; the tensor form takes
    no workspace and returns the lists joined along the last axis. An `executed` tile after tmp (the
    six-operand form) keeps tmp as the fifth argument."""
    def rule(args: Args) -> Type | None:
        get = args.tensor if kind == "tensor" else args.tile
        names = [n for n in ("src0", "src1", "src2", "src3", "tmp") if args.has(n)]
        if args.has("executed"):
            get("executed")
            if "tmp" not in names:
                args.fail(f"{args.op.name}: the six-operand form needs src0..src3 and tmp", "executed")
            srcs, tmp_name = [n for n in names if n != "tmp"], "tmp"
        elif kind == "tile":
            if len(names) < 3:
                args.fail(f"{args.op.name} merges 2 to 4 sorted tiles and takes the destination workspace last",
                          code="PTOC-E0201", hint="write pl.tile.mrgsort_format2(a, b, tmp)")
            srcs, tmp_name = names[:-1], names[-1]
        else:
            if "tmp" in names:
                args.fail(f"{args.op.name}: the tensor form has no workspace", "tmp", code="PTOC-E0201")
            srcs, tmp_name = names, None
        ts = [get(n) for n in srcs]
        tmp = get(tmp_name) if tmp_name else None
        s0 = ts[0]
        if s0 is not None:
            _dtype_in(args, "src0", s0, SORT_DTYPES, "the source", "OP-6")
            for n, t in zip(srcs[1:], ts[1:]):
                if t is not None and t.dtype != s0.dtype:
                    args.fail(f"{args.op.name}: {n} is {t.dtype.name}, src0 {s0.dtype.name}; the lists share one "
                              "dtype", n)
        if s0 is None:
            return None
        if tmp_name is not None:
            return None if tmp is None else _same_kind_result(s0, tmp.shape, s0.dtype, None)
        if any(t is None for t in ts):
            return None
        lasts = [cint(t.shape[-1]) for t in ts]
        last = c(sum(lasts)) if None not in lasts else None
        if last is None:
            from ptoc.ir.nodes import BinOp

            last = ts[0].shape[-1]
            for t in ts[1:]:
                last = BinOp("+", last, t.shape[-1])
        return _same_kind_result(s0, tuple(s0.shape[:-1]) + (last,), s0.dtype, None)

    rule.__doc__ = f"{kind} merge of 2..4 sorted lists (format2)"
    return rule


for _k in ("tensor", "tile"):
    register(f"{_k}.sort32", ("src", "idx"), family="gather")(_sort32(_k))
    register(f"{_k}.mrgsort_format1", ("src", "block_len"), family="gather")(_mrgsort1(_k))
    register(f"{_k}.mrgsort_format2", ("src0", "src1"), optional=(("src2", None), ("src3", None), ("tmp", None),
                                                                   ("executed", None), ("exhausted", None)),
             family="gather")(_mrgsort2(_k))
    short_name("sort32", **{_k: f"{_k}.sort32"})
    short_name("mrgsort_format1", **{_k: f"{_k}.mrgsort_format1"})
    short_name("mrgsort_format2", **{_k: f"{_k}.mrgsort_format2"})

# PyPTO's tile.gather_row (src/ir/op/tile_ops/paged_gather.cpp): copy a GM row window [r, c] of `src` at
# src_offset into `dst` at dst_offset, in place; the result is `dst`. tile.mscatter (tile_ops/memory.cpp):
# write the elements of `src` to the positions of `output_tensor` that `idx` (INT32, src's shape) names;
# the result is the output tensor. No .pto lowering yet.
@register("tile.gather_row", ("dst", "src", "dst_offset", "src_offset", "shapes"),
          optional=(("valid_shape", None), ("transpose", None)), unit="mem", family="gather",
          pto=NoPto("ptoc's .pto emitter has no lowering for tile.gather_row yet"))
def _tile_gather_row(args: Args) -> Type | None:
    """copy a GM row window [r, c] of src into dst at dst_offset (in place); the result is dst"""
    dst = args.tensor("dst") if args.op.name.startswith("tensor.") else args.tile("dst")
    src = args.tensor("src")
    for name in ("dst_offset", "src_offset", "shapes"):
        if len(int_list(args, name)) != 2:
            args.fail(f"tile.gather_row: {name} is a [row, col] pair", name)
    valid = int_list(args, "valid_shape", required=False)
    if valid is not None and len(valid) != 2:
        args.fail("tile.gather_row: valid_shape is a [row, col] pair", "valid_shape")
    shapes = int_list(args, "shapes")
    if any(cint(d) is None for d in shapes):
        args.fail(f"{args.op.name}: the window shape is static; pass a runtime row count through valid_shape",
                  "shapes")
    for i, (v, d) in enumerate(zip(valid or (), shapes)):
        if not isinstance(v, ConstInt) and (is_literal(v) or getattr(v, "dtype", None) is not None
                                            and not v.dtype.is_int):
            args.fail(f"{args.op.name}: valid_shape[{i}] must be an integer extent", "valid_shape")
        if cint(v) is not None and cint(v) > cint(d):
            args.fail(f"{args.op.name}: valid_shape[{i}] = {cint(v)} exceeds the window extent {cint(d)}",
                      "valid_shape")
    trans = args.get("transpose")
    if isinstance(trans, ConstBool) and trans.value and valid is not None and any(cint(v) is None for v in valid):
        args.fail(f"{args.op.name} does not take a dynamic valid_shape together with transpose=True", "valid_shape")
    if dst is None or src is None:
        return dst
    if dst.dtype != src.dtype:
        args.fail(f"tile.gather_row: dst is {dst.dtype.name}, src {src.dtype.name}", "src")
    return dst


@register("tile.mscatter", ("src", "idx", "output_tensor"), unit="mem", family="gather",
          pto=NoPto("ptoc's .pto emitter has no lowering for tile.mscatter yet"))
def _tile_mscatter(args: Args) -> Type | None:
    """write each element of src to the element of output_tensor idx names (INT32, src's shape)"""
    src, idx, out = args.tile("src"), args.tile("idx"), args.tensor("output_tensor")
    if src is not None:
        _dtype_in(args, "src", src, ("FP16", "FP32", "INT16", "INT32"), "the source", "OP-5")
    if idx is not None:
        _dtype_in(args, "idx", idx, ("INT32",), "the index", "OP-5")
        if src is not None and (idx.rank != src.rank or shapes_equal(idx.shape, src.shape) is False):
            args.fail("tile.mscatter: the index tile needs the source's shape", "idx")
    if out is not None and src is not None and out.dtype != src.dtype:
        args.fail(f"tile.mscatter: the output is {out.dtype.name}, the source {src.dtype.name}", "output_tensor")
    return out


register("tensor.gather_row", ("dst", "src", "dst_offset", "src_offset", "shapes"),
         optional=(("valid_shape", None), ("transpose", None)), unit="any", family="gather",
         summary="tensor.gather_row: the same row copy into a tensor-typed L1 buffer (tensor.create_l1)")(
    _tile_gather_row)
short_name("gather_row", tile="tile.gather_row", tensor="tensor.gather_row")
short_name("mscatter", tile="tile.mscatter")

# pl.gather: the flat and per-axis forms take a tensor or an on-chip source and return a tensor (OP-5).
short_name("gather", tensor="tensor.gather", tile="tensor.gather")
short_name("gather_mask", tensor="tensor.gather_mask", tile="tile.gather_mask")
short_name("scatter_mask", tensor="tensor.scatter_mask", tile="tile.scatter_mask")
short_name("scatter", tensor="tensor.scatter", tile="tile.scatter")
short_name("gatherb", tile="tile.gatherb")
short_name("mgather", tensor="tile.mgather", tile="tile.mgather")

# `.pto` spellings (PTOAS PTOOps.td, destination-passing form)
declare("tile.gather", pto=Pto("tgather", ("tile:src", "tile:indices", "tile!:tmp"),
                                "PTOAS's index-form tgather needs a scratch tile like the indices"))
declare("tile.gather_mask", pto=Emitter("op_gather_mask"))
declare("tile.scatter", pto=Emitter("scatter"))
declare("tile.gatherb", pto=Pto("tgatherb", ("tile:src", "tile:offsets")))
declare("tile.scatter_mask", pto=NoPto("PTOAS's mask-form pto.tscatter does not keep the unmarked destination "
                                       "columns the way pl.tile.scatter_mask defines; use pl.tile.scatter with "
                                       "explicit indexes"))

__all__ = ["MASK_PATTERNS", "mask_columns", "mask_stride"]


# PyPTO's tensor.paged_gather (src/ir/op/tensor_ops/paged_gather.cpp): gather the rows `indices` names
# from a paged pool `src` ([pages * block_size, D]) through `block_table`, `size` elements of each from
# col_off; the result is [max_indices, size] ([size, max_indices] with is_trans=True). tensor.create_l1:
# a tensor-typed on-chip (L1) buffer of `shape`, the accumulator tensor.gather_row fills.
@register("tensor.paged_gather", ("src", "indices", "block_table"),
          optional=(("block_size", None), ("size", None), ("max_indices", None), ("col_off", None),
                    ("is_trans", None), ("space", None)), unit="any", family="gather")
def _tensor_paged_gather(args: Args) -> Type | None:
    """rows of a paged pool gathered through a block table: [max_indices, size] (is_trans: [size, max_indices])"""
    src, idx, bt = args.tensor("src"), args.tensor("indices"), args.tensor("block_table")
    vals = {}
    for name in ("block_size", "size", "max_indices"):
        v = cint(args.get(name)) if args.get(name) is not None else None
        if v is None or v <= 0:
            args.fail(f"tensor.paged_gather needs {name}= as a positive constant", name, code="PTOC-E0201")
        vals[name] = v
    off = args.get("col_off")
    if off is not None and (cint(off) is None or cint(off) < 0):
        args.fail("tensor.paged_gather: col_off is a non-negative constant", "col_off")
    for name, t in (("indices", idx), ("block_table", bt)):
        if t is not None and (t.dtype.name != "INT32" or t.rank not in (1, 2)):
            args.fail(f"tensor.paged_gather: {name} is an INT32 tensor [n] or [1, n]", name)
    if src is None:
        return None
    _dtype_in(args, "src", src, ("FP16", "BF16", "FP32", "INT8"), "the pool", "OP-5")
    if src.rank != 2:
        args.fail("tensor.paged_gather: the pool is 2-D [rows, D]", "src")
    cols = cint(src.shape[1])
    if cols is not None and vals["size"] + (cint(off) or 0) > cols:
        args.fail(f"tensor.paged_gather: size {vals['size']} from col_off exceeds the {cols} columns", "size")
    trans = args.get("is_trans")
    rows, size = c(vals["max_indices"]), c(vals["size"])
    shape = (size, rows) if isinstance(trans, ConstBool) and trans.value else (rows, size)
    return new_tensor(shape, src.dtype)


@register("tensor.create_l1", ("shape",), optional=(("dtype", None), ("transpose", None)), unit="any",
          family="gather")
def _tensor_create_l1(args: Args) -> Type | None:
    """a tensor-typed on-chip (L1) buffer of a static shape, filled by tensor.gather_row"""
    from ptoc.ops.common import dtype_arg

    shape = int_list(args, "shape")
    if not shape or any(cint(d) is None or cint(d) <= 0 for d in shape):
        args.fail("tensor.create_l1: the shape is made of positive constants", "shape")
    dt = dtype_arg(args, "dtype")
    return None if dt is None else new_tensor(tuple(shape), dt)


short_name("paged_gather", tensor="tensor.paged_gather")
short_name("create_l1", tensor="tensor.create_l1")
