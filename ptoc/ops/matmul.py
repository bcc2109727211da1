"""Matrix multiplication on the cube unit: tile.matmul / matmul_acc / matmul_bias, tensor.matmul / matmul_acc.

Tile forms (pto-isa TMATMUL, `pto-format.md`): Left [M, K] x Right [K, N] -> Acc [M, N]; matmul_acc adds
into an Acc tile in place (the result is the accumulator); matmul_bias adds a Bias [1, N] row.
Operand memory spaces and whole fractals (NZ-1) are hardware rules: checked once InferTileMemorySpace has
decided every space (`Args.hardware`); before, a Mat operand is the operand the pass moves into Left/Right.

Dtypes: both operands share one dtype; the accumulator dtype comes from the target's table
(`Arch.matmul_dtypes`): FP16/BF16/FP32 -> FP32, INT8 -> INT32.

Tensor forms: `pl.tensor.matmul(lhs, rhs, out_dtype=None, a_trans=False, b_trans=False, c_matrix_nz=False)`,
`pl.tensor.matmul_acc(acc, lhs, rhs, a_trans=False, b_trans=False, out_dtype=None, c_matrix_nz=False)`;
a_trans / b_trans transpose the last two axes of an operand; leading (batch) axes broadcast.
`pl.matmul` / `pl.matmul_acc` pick the tensor or tile op by the kind of their arguments.

Boxed tiles (NZ-1): a tile of Mat/Left/Right/Acc with a boxed slayout is stored as whole fractals, so its
static rows and columns are multiples of the fractal box: 16 x c0 for an inner row-major box (Mat, Left),
c0 x 16 for an inner column-major box (Right, ZN), 16 x 16 for Acc's 1024-byte box (4-byte elements).
`check_boxed_tile_dims` is the shared check.
"""

from __future__ import annotations

from ptoc.ir import dtypes
from ptoc.ir.nodes import ConstBool, StrLit, TensorType, TileType, Type
from ptoc.ir.types import effective_tile_view
from ptoc.ops.common import (
    FLOATS,
    broadcast,
    c,
    cint,
    dim_eq,
    dtype_arg,
    fmt_shape,
    new_tensor,
    new_tile,
    valid_shape_of,
)
from ptoc.target.facts import FRACTAL_ROWS, c0 as c0_of
from ptoc.ops.registry import Args, Emitter, NoPto, Pto, declare, register, short_name
from ptoc.target.arch import get_arch

BOXED_SPACES = ("Mat", "Left", "Right", "Acc")
# Result dtypes tensor.matmul's out_dtype may ask for (the Acc -> GM store converts on the way out)
FLOAT_OUT = ("FP32", "FP16", "BF16")
INT_OUT = ("INT32",)


# --------------------------------------------------------------------------------------------------
# Boxed tile dimensions (NZ-1)
# --------------------------------------------------------------------------------------------------


def inner_box(dtype: dtypes.DType, slayout: str | None, fractal: int | None) -> tuple[int, int] | None:
    """(rows, cols) of one fractal box of a boxed tile; None for flat tiles, MX scale boxes and sub-byte types.
    512-byte box: 16 x c0 (inner row-major) or c0 x 16 (inner column-major); 1024-byte Acc box: 16 x 16."""
    if slayout in (None, "none_box"):
        return None
    if fractal == 1024:
        return (FRACTAL_ROWS, FRACTAL_ROWS)
    if fractal not in (None, 512):
        return None
    c0 = c0_of(dtype)
    if c0 is None:
        return None
    return (FRACTAL_ROWS, c0) if slayout == "row_major" else (c0, FRACTAL_ROWS)


def boxed_dims_problem(rows: int | None, cols: int | None, dtype: dtypes.DType, slayout: str | None,
                       fractal: int | None) -> str | None:
    """Why a [rows, cols] boxed tile is not whole fractals (None when it is or cannot be told)."""
    box = inner_box(dtype, slayout, fractal)
    if box is None:
        return None
    br, bc = box
    bad = []
    if rows is not None and rows % br:
        bad.append(f"its rows ({rows}) must be a multiple of {br}")
    if cols is not None and cols % bc:
        bad.append(f"its columns ({cols}) must be a multiple of {bc}")
    if not bad:
        return None
    return f"it is stored as {br} x {bc} fractals of {dtype.name}: " + " and ".join(bad)


def check_boxed_tile_dims(args: Args, tile: TileType | None, name: str, what: str | None = None) -> None:
    """NZ-1: a Mat/Left/Right/Acc tile with a boxed slayout must have static rows and columns that are
    multiples of its fractal box (16 rows x c0 columns for NZ, c0 x 16 for ZN, 16 x 16 for Acc).
    Dynamic extents and tiles of other spaces pass. `name` is the argument to point at; `what` names
    the tile in the message (default: the argument name)."""
    if tile is None or tile.rank != 2 or tile.memory not in BOXED_SPACES or not args.hardware:
        return
    eff = effective_tile_view(tile)
    problem = boxed_dims_problem(cint(tile.shape[0]), cint(tile.shape[1]), tile.dtype, eff["slayout"],
                                 eff["fractal"])  # type: ignore[arg-type]
    if problem is None:
        return
    box = inner_box(tile.dtype, eff["slayout"], eff["fractal"])  # type: ignore[arg-type]
    hint = None
    if box is not None:
        dims = [fmt_shape((d,))[1:-1] for d in tile.shape]
        padded = [str(-(-v // b) * b) if v is not None else d
                  for v, b, d in zip((cint(x) for x in tile.shape), box, dims)]
        hint = (f"pad the physical shape to [{', '.join(padded)}] and narrow the valid region with "
                f"valid_shape (pl.TileView(valid_shape=[{', '.join(dims)}]))")
    args.fail(f"{args.op.name}: {what or name} is a {tile.memory} tile of {fmt_shape(tile.shape)} "
              f"{tile.dtype.name}; {problem}", name, rule="NZ-1", hint=hint)


# --------------------------------------------------------------------------------------------------
# Shared operand rules
# --------------------------------------------------------------------------------------------------


def _acc_dtype(args: Args, lhs, rhs) -> dtypes.DType:
    if lhs.dtype != rhs.dtype:
        args.fail(f"{args.op.name}: lhs is {lhs.dtype.name} but rhs is {rhs.dtype.name}; both operands "
                  "need one dtype", "rhs", hint="cast one operand first")
    arch = get_arch(args.arch)
    acc = arch.acc_dtype(lhs.dtype.name)
    if acc is None:
        names = ", ".join(f"{a}->{c}" for a, c in arch.matmul_dtypes)
        args.fail(f"{args.op.name}: the cube unit of {arch.title} does not multiply {lhs.dtype.name}", "lhs",
                  hint=f"supported operand -> accumulator dtypes: {names}")
    return dtypes.BY_NAME[acc]


def _space(args: Args, tile: TileType, name: str, want: str) -> None:
    """A cube operand is read from its own buffer. Before memory spaces are decided any space is
    accepted: InferTileMemorySpace moves the operand there (or reports why it cannot)."""
    if args.hardware and tile.memory is not None and tile.memory != want:
        args.fail(f"{args.op.name}: {name} must be in memory space {want}, got a {tile.memory} tile", name,
                  hint=f"move it first: pl.tile.move({name}, target_memory=pl.Mem.{want})")


def _rank2(args: Args, t, name: str) -> None:
    if t.rank != 2:
        args.fail(f"{args.op.name}: {name} must be 2-D, got rank {t.rank}", name,
                  hint="reshape the tile to [rows, cols]")


def _inner(args: Args, k_lhs, k_rhs, lhs_shape, rhs_shape) -> None:
    if dim_eq(k_lhs, k_rhs) is False:
        args.fail(f"{args.op.name}: inner dimensions differ: lhs {fmt_shape(lhs_shape)} x rhs "
                  f"{fmt_shape(rhs_shape)} (K {fmt_shape((k_lhs,))[1:-1]} vs {fmt_shape((k_rhs,))[1:-1]})", "rhs",
                  hint="[M, K] x [K, N] -> [M, N]")


def _tile_product(args: Args):
    """(shape [M, N], valid, accumulator dtype) of lhs x rhs tiles, or None when a type is unknown."""
    lhs, rhs = args.tile("lhs"), args.tile("rhs")
    if lhs is None or rhs is None:
        return None
    _rank2(args, lhs, "lhs")
    _rank2(args, rhs, "rhs")
    _space(args, lhs, "lhs", "Left")
    _space(args, rhs, "rhs", "Right")
    acc = _acc_dtype(args, lhs, rhs)
    _inner(args, lhs.shape[1], rhs.shape[0], lhs.shape, rhs.shape)
    check_boxed_tile_dims(args, lhs, "lhs")
    check_boxed_tile_dims(args, rhs, "rhs")
    shape = (lhs.shape[0], rhs.shape[1])
    valid = (valid_shape_of(lhs)[0], valid_shape_of(rhs)[1])
    return shape, valid, acc


# --------------------------------------------------------------------------------------------------
# Tile ops
# --------------------------------------------------------------------------------------------------


@register("tile.matmul", ("lhs", "rhs"), unit="cube")
def _tile_matmul(args: Args) -> Type | None:
    """Left [M, K] x Right [K, N] -> Acc [M, N] (FP16/BF16/FP32 -> FP32, INT8 -> INT32)"""
    prod = _tile_product(args)
    if prod is None:
        return None
    shape, valid, acc = prod
    return new_tile(shape, acc, "Acc", valid)


@register("tile.matmul_acc", ("acc", "lhs", "rhs"), unit="cube")
def _tile_matmul_acc(args: Args) -> Type | None:
    """acc += Left x Right, in place; returns the accumulator"""
    acc_t = args.tile("acc")
    prod = _tile_product(args)
    if acc_t is None or prod is None:
        return acc_t
    shape, _valid, acc_dt = prod
    _space(args, acc_t, "acc", "Acc")
    _rank2(args, acc_t, "acc")
    if acc_t.dtype != acc_dt:
        args.fail(f"{args.op.name}: the accumulator is {acc_t.dtype.name} but a product of "
                  f"{args.tile('lhs').dtype.name} operands accumulates in {acc_dt.name}", "acc",
                  hint=f"create the accumulator as {acc_dt.name}")
    if any(dim_eq(a, b) is False for a, b in zip(acc_t.shape, shape)):
        args.fail(f"{args.op.name}: the accumulator is {fmt_shape(acc_t.shape)} but the product is "
                  f"{fmt_shape(shape)}", "acc", hint="the accumulator has shape [M, N] of lhs [M, K] x rhs [K, N]")
    return acc_t


@register("tile.matmul_bias", ("lhs", "rhs", "bias"), unit="cube")
def _tile_matmul_bias(args: Args) -> Type | None:
    """Left [M, K] x Right [K, N] + Bias [1, N] -> Acc [M, N]"""
    bias = args.tile("bias")
    prod = _tile_product(args)
    if prod is None:
        return None
    shape, valid, acc = prod
    if bias is not None:
        _space(args, bias, "bias", "Bias")
        _rank2(args, bias, "bias")
        if bias.dtype != acc:
            args.fail(f"{args.op.name}: the bias is {bias.dtype.name} but the product accumulates in "
                      f"{acc.name}", "bias", hint=f"the bias row has the accumulator dtype {acc.name}")
        if cint(bias.shape[0]) not in (None, 1) or dim_eq(bias.shape[1], shape[1]) is False:
            args.fail(f"{args.op.name}: the bias is {fmt_shape(bias.shape)}; it must be one row [1, N] with "
                      f"N = {fmt_shape((shape[1],))[1:-1]}", "bias", hint="give a [1, N] bias row")
    return new_tile(shape, acc, "Acc", valid)


# --------------------------------------------------------------------------------------------------
# Tensor ops
# --------------------------------------------------------------------------------------------------


def _bool_arg(args: Args, name: str) -> bool:
    e = args.get(name)
    if e is None:
        return False
    if isinstance(e, ConstBool):
        return e.value
    args.fail(f"{args.op.name}: {name} must be True or False", name, code="PTOC-E0201")
    return False


def _out_dtype(args: Args, operand: dtypes.DType, acc: dtypes.DType) -> dtypes.DType:
    out = dtype_arg(args, "out_dtype", required=False)
    if out is None:
        return acc
    allowed = FLOAT_OUT if operand.name in FLOATS else INT_OUT
    if out.name not in allowed:
        args.fail(f"{args.op.name}: out_dtype {out.name} is not a result of a {operand.name} matmul", "out_dtype",
                  hint=f"accepted: {', '.join(allowed)}")
    return out


def _tensor_product(args: Args):
    """(shape, valid or None, accumulator dtype, operand dtype) of lhs x rhs tensors, or None."""
    lhs, rhs = args.tensor("lhs"), args.tensor("rhs")
    a_trans, b_trans = _bool_arg(args, "a_trans"), _bool_arg(args, "b_trans")
    _bool_arg(args, "c_matrix_nz")
    if lhs is None or rhs is None:
        return None
    for t, name in ((lhs, "lhs"), (rhs, "rhs")):
        if t.rank < 2:
            args.fail(f"{args.op.name}: {name} must have rank >= 2, got {t.rank}", name,
                      hint="a matrix operand is [..., rows, cols]")
    acc = _acc_dtype(args, lhs, rhs)

    def mat(t: TensorType, trans: bool):
        s, v = t.shape, valid_shape_of(t)
        if trans:
            s = s[:-2] + (s[-1], s[-2])
            v = v[:-2] + (v[-1], v[-2])
        return s, v

    ls, lv = mat(lhs, a_trans)
    rs, rv = mat(rhs, b_trans)
    _inner(args, ls[-1], rs[-2], ls, rs)
    lead = broadcast(args, ls[:-2], rs[:-2], rule=None) if (len(ls) > 2 or len(rs) > 2) else ()
    shape = tuple(lead) + (ls[-2], rs[-1])
    valid = None
    if len(shape) == 2:
        valid = (lv[-2], rv[-1])
    elif ls[:-2] == lv[:-2] and rs[:-2] == rv[:-2]:
        valid = tuple(lead) + (lv[-2], rv[-1])
    return shape, valid, acc, lhs.dtype


@register("tensor.matmul", ("lhs", "rhs"),
          optional=(("out_dtype", None), ("a_trans", None), ("b_trans", None), ("c_matrix_nz", None)),
          unit="cube")
def _tensor_matmul(args: Args) -> Type | None:
    """[..., M, K] x [..., K, N] -> [..., M, N]; a_trans / b_trans transpose an operand; out_dtype converts"""
    prod = _tensor_product(args)
    if prod is None:
        return None
    shape, valid, acc, operand = prod
    return new_tensor(shape, _out_dtype(args, operand, acc), valid)


@register("tensor.matmul_acc", ("acc", "lhs", "rhs"),
          optional=(("a_trans", None), ("b_trans", None), ("out_dtype", None), ("c_matrix_nz", None)),
          unit="cube")
def _tensor_matmul_acc(args: Args) -> Type | None:
    """acc + lhs x rhs -> a tensor of acc's shape and dtype"""
    acc_t = args.tensor("acc")
    prod = _tensor_product(args)
    if acc_t is None or prod is None:
        return None
    shape, _valid, acc, operand = prod
    out = _out_dtype(args, operand, acc)
    if args.get("out_dtype") is None:
        allowed = FLOAT_OUT if operand.name in FLOATS else INT_OUT
        if acc_t.dtype.name not in allowed:
            args.fail(f"{args.op.name}: the accumulator is {acc_t.dtype.name}, not a result dtype of a "
                      f"{operand.name} matmul", "acc", hint=f"accepted: {', '.join(allowed)}")
    elif out != acc_t.dtype:
        args.fail(f"{args.op.name}: out_dtype {out.name} differs from the accumulator's {acc_t.dtype.name}",
                  "out_dtype", hint="drop out_dtype; the result has the accumulator's dtype")
    if acc_t.rank != len(shape) or any(dim_eq(a, b) is False for a, b in zip(acc_t.shape, shape)):
        args.fail(f"{args.op.name}: the accumulator is {fmt_shape(acc_t.shape)} but the product is "
                  f"{fmt_shape(shape)}", "acc", hint="the accumulator has the product's shape [..., M, N]")
    return new_tensor(acc_t.shape, acc_t.dtype, valid_shape_of(acc_t))


def _mx_operands(args: Args, lhs, rhs, ls, rs) -> None:
    """tile.matmul_mx operands: 2-D tiles in Left / Right / LeftScale / RightScale, MX data and E8M0 scales."""
    for t, n, want in ((lhs, "lhs", "Left"), (rhs, "rhs", "Right"), (ls, "lhs_scale", "LeftScale"),
                       (rs, "rhs_scale", "RightScale")):
        if t is not None:
            _rank2(args, t, n)
            _space(args, t, n, want)
    data_ok = ("FP8E4M3FN", "FP8E5M2", "FP4E2M1X2", "FP4E1M2X2")
    for t, n in ((lhs, "lhs"), (rhs, "rhs")):
        if t.dtype.name not in data_ok:
            args.fail(f"tile.matmul_mx: {n} must be MX data ({', '.join(data_ok)}), got {t.dtype.name}", n)
    for t, n in ((ls, "lhs_scale"), (rs, "rhs_scale")):
        if t is not None and t.dtype.name != "FP8E8M0":
            args.fail(f"tile.matmul_mx: {n} must be FP8E8M0 scales, got {t.dtype.name}", n)


@register("tile.matmul_mx", ("lhs", "lhs_scale", "rhs", "rhs_scale"), unit="cube")
def _tile_matmul_mx(args: Args) -> Type | None:
    """MX block-scaled matmul (Ascend950): Left x Right with FP8E8M0 scales per 32 values -> FP32 Acc"""
    from ptoc.ops.common import cint

    if not args.target.supports_mx:
        args.fail("tile.matmul_mx (MX block-scaled matmul) is supported on Ascend950 (a5) only", rule="OP-6",
                  code="PTOC-E0203", hint="compile with --arch a5")
    lhs, rhs = args.tile("lhs"), args.tile("rhs")
    ls, rs = args.tile("lhs_scale"), args.tile("rhs_scale")
    if lhs is None or rhs is None:
        return None
    _mx_operands(args, lhs, rhs, ls, rs)
    m, kc, kr, nc = (cint(lhs.shape[0]), cint(lhs.shape[1]), cint(rhs.shape[0]), cint(rhs.shape[1]))
    k = kc * lhs.dtype.packed_values if kc is not None else None
    n_vals = nc * rhs.dtype.packed_values if nc is not None else None
    if k is not None and kr is not None and k != kr:
        args.fail(f"tile.matmul_mx: lhs holds K = {k} values per row but rhs has {kr} rows", "rhs",
                  hint="packed FP4 lhs [M, K/2] carriers pair with rhs [K, N/2]; FP8 lhs [M, K] with rhs [K, N]")
    if k is not None and k % 32:
        args.fail(f"tile.matmul_mx: K = {k} is not a multiple of the MX group size 32", "lhs")
    if ls is not None and k is not None and m is not None and (cint(ls.shape[0]), cint(ls.shape[1])) != (m, k // 32):
        args.fail(f"tile.matmul_mx: lhs_scale must be [{m}, {k // 32}] (one scale per 32 values)", "lhs_scale")
    if rs is not None and k is not None and n_vals is not None and \
            (cint(rs.shape[0]), cint(rs.shape[1])) != (k // 32, n_vals):
        args.fail(f"tile.matmul_mx: rhs_scale must be [{k // 32}, {n_vals}] (one scale per 32 values)", "rhs_scale")
    from ptoc.ir.nodes import ConstInt as _C

    n_expr = _C(n_vals, dtypes.INDEX) if n_vals is not None else rhs.shape[1]
    return new_tile((lhs.shape[0], n_expr), dtypes.FP32, "Acc")


@register("tile.matmul_mx_acc", ("acc", "lhs", "lhs_scale", "rhs", "rhs_scale"), unit="cube")
def _tile_matmul_mx_acc(args: Args) -> Type | None:
    """MX block-scaled matmul added into an FP32 Acc accumulator of the product's shape (Ascend950)"""
    prod = _tile_matmul_mx(args)
    acc = args.tile("acc")
    if acc is None or not isinstance(prod, TileType):
        return prod
    if acc.dtype != dtypes.FP32:
        args.fail(f"tile.matmul_mx_acc: the accumulator is {acc.dtype.name}; the MX product accumulates in FP32",
                  "acc", hint="create the accumulator as FP32")
    if acc.rank != 2 or any(dim_eq(a, b) is False for a, b in zip(acc.shape, prod.shape)):
        args.fail(f"tile.matmul_mx_acc: the accumulator is {fmt_shape(acc.shape)} but the product is "
                  f"{fmt_shape(prod.shape)}", "acc", hint="the accumulator has the product's shape [M, N]")
    _space(args, acc, "acc", "Acc")
    return new_tile(acc.shape, dtypes.FP32, "Acc", valid_shape_of(acc))


# --------------------------------------------------------------------------------------------------
# Batched tile forms: [...B, M, K] x [...B, K, N] -> Acc [...B', M, N], the batch axes broadcast
# --------------------------------------------------------------------------------------------------


def _batch_product(args: Args):
    """(shape [...B, M, N], accumulator dtype) of batched lhs x rhs tiles, or None when a type is unknown."""
    lhs, rhs = args.tile("lhs"), args.tile("rhs")
    if lhs is None or rhs is None:
        return None
    for name, t in (("lhs", lhs), ("rhs", rhs)):
        if t.rank < 2:
            args.fail(f"{args.op.name}: {name} must have rank >= 2, got rank {t.rank}", name,
                      hint="[..., M, K] x [..., K, N]")
    acc = _acc_dtype(args, lhs, rhs)
    _inner(args, lhs.shape[-1], rhs.shape[-2], lhs.shape, rhs.shape)
    batch = broadcast(args, lhs.shape[:-2], rhs.shape[:-2])
    return batch + (lhs.shape[-2], rhs.shape[-1]), acc


@register("tile.batch_matmul", ("lhs", "rhs"), unit="cube")
def _tile_batch_matmul(args: Args) -> Type | None:
    """[...B, M, K] x [...B, K, N] -> Acc [...B, M, N]: one matmul per batch index, batch axes broadcast"""
    prod = _batch_product(args)
    if prod is None:
        return None
    shape, acc = prod
    return new_tile(shape, acc, "Acc")


@register("tile.batch_matmul_acc", ("acc", "lhs", "rhs"), unit="cube")
def _tile_batch_matmul_acc(args: Args) -> Type | None:
    """acc[...B, M, N] += lhs x rhs per batch index, in place; returns the accumulator"""
    acc_t = args.tile("acc")
    prod = _batch_product(args)
    if acc_t is None or prod is None:
        return acc_t
    shape, acc_dt = prod
    if acc_t.dtype != acc_dt:
        args.fail(f"{args.op.name}: the accumulator is {acc_t.dtype.name} but the product accumulates in "
                  f"{acc_dt.name}", "acc", hint=f"create the accumulator as {acc_dt.name}")
    if len(acc_t.shape) != len(shape) or any(dim_eq(a, b) is False for a, b in zip(acc_t.shape, shape)):
        args.fail(f"{args.op.name}: the accumulator is {fmt_shape(acc_t.shape)} but the product is "
                  f"{fmt_shape(shape)}", "acc", hint="the accumulator is not broadcast: give it the product's shape")
    return acc_t


short_name("matmul", tensor="tensor.matmul", tile="tile.matmul")
short_name("matmul_acc", tensor="tensor.matmul_acc", tile="tile.matmul_acc")
short_name("matmul_bias", tile="tile.matmul_bias")
short_name("matmul_mx", tile="tile.matmul_mx")
short_name("matmul_mx_acc", tile="tile.matmul_mx_acc")
short_name("batch_matmul", tile="tile.batch_matmul")
short_name("batch_matmul_acc", tile="tile.batch_matmul_acc")

# `.pto` spellings (PTOAS PTOOps.td, destination-passing form)
declare("tile.matmul", pto=Pto("tmatmul", ("tile:lhs", "tile:rhs")))
_NO_BATCH_PTO = NoPto("a batched matmul is not lowered yet; loop over the batch index with pl.tile.matmul on "
                      "2-D slices")
declare("tile.batch_matmul", pto=_NO_BATCH_PTO)
declare("tile.batch_matmul_acc", pto=_NO_BATCH_PTO)
declare("tile.matmul_acc", pto=Emitter("op_matmul_acc"))
declare("tile.matmul_bias", pto=Pto("tmatmul.bias", ("tile:lhs", "tile:rhs", "tile:bias")))

__all__ = ["boxed_dims_problem", "check_boxed_tile_dims", "inner_box"]

from ptoc.ops import move  # noqa: F401, E402  (tile.move loads with the matmul family)


# --------------------------------------------------------------------------------------------------
# GEMV (PyPTO src/ir/op/tile_ops/matmul.cpp): a row vector [1, K] times [K, N]. The result is an Acc
# tile of 16 physical rows (one cube fractal) of which one is valid: [16, N] valid [1, N_valid].
# ptoc's .pto emitter has no lowering for it yet.
# --------------------------------------------------------------------------------------------------

_GEMV_IN = {"INT8": "INT32", "FP16": "FP32", "BF16": "FP32", "FP32": "FP32"}
_GEMV_PHASES = ("unspecified", "partial", "final")


def _gemv_product(args: Args):
    lhs, rhs = args.tile("lhs"), args.tile("rhs")
    phase = args.get("acc_phase")
    if phase is not None and not (isinstance(phase, StrLit) and phase.value in _GEMV_PHASES):
        args.fail(f"{args.op.name}: acc_phase must be one of {', '.join(_GEMV_PHASES)}", "acc_phase")
    if lhs is None or rhs is None:
        return None
    _rank2(args, lhs, "lhs")
    _rank2(args, rhs, "rhs")
    _space(args, lhs, "lhs", "Left")
    _space(args, rhs, "rhs", "Right")
    if lhs.dtype != rhs.dtype:
        args.fail(f"{args.op.name}: lhs is {lhs.dtype.name} but rhs is {rhs.dtype.name}; both operands need one "
                  "dtype", "rhs", hint="cast one operand first")
    acc = _GEMV_IN.get(lhs.dtype.name)
    if acc is None:
        args.fail(f"{args.op.name} multiplies INT8 (-> INT32) and FP16/BF16/FP32 (-> FP32), got {lhs.dtype.name}",
                  "lhs")
    if cint(lhs.shape[0]) != 1:
        args.fail(f"{args.op.name}: lhs must be one row [1, K], got {fmt_shape(lhs.shape)}", "lhs",
                  hint="use tile.matmul for more rows")
    lv, rv = valid_shape_of(lhs), valid_shape_of(rhs)
    k_l, k_r = cint(lv[1]), cint(rv[0])
    if k_l is not None and k_r is not None and k_l > k_r:
        args.fail(f"{args.op.name}: rhs covers K = {k_r} but lhs has K = {k_l}", "rhs")
    return (c(16), rhs.shape[1]), (lv[0], rv[1]), dtypes.BY_NAME[acc]


@register("tile.gemv", ("lhs", "rhs"), optional=(("acc_phase", None),), unit="cube")
def _tile_gemv(args: Args) -> Type | None:
    """row vector Left [1, K] x Right [K, N] -> Acc [16, N] valid [1, N] (INT8 -> INT32, else FP32)"""
    prod = _gemv_product(args)
    if prod is None:
        return None
    shape, valid, acc = prod
    return new_tile(shape, acc, "Acc", valid)


@register("tile.gemv_acc", ("acc", "lhs", "rhs"), optional=(("acc_phase", None),), unit="cube")
def _tile_gemv_acc(args: Args) -> Type | None:
    """acc += Left [1, K] x Right [K, N]; the accumulator is the GEMV result type"""
    acc_t = args.tile("acc")
    prod = _gemv_product(args)
    if acc_t is None or prod is None:
        return None
    shape, valid, acc = prod
    _rank2(args, acc_t, "acc")
    if acc_t.dtype != acc:
        args.fail(f"{args.op.name}: the accumulator is {acc_t.dtype.name}, the product accumulates in {acc.name}",
                  "acc")
    if dim_eq(acc_t.shape[1], shape[1]) is False:
        args.fail(f"{args.op.name}: the accumulator has {fmt_shape(acc_t.shape)}, the product N is "
                  f"{fmt_shape((shape[1],))[1:-1]}", "acc")
    return new_tile(shape, acc, "Acc", valid)


@register("tile.gemv_bias", ("lhs", "rhs", "bias"), optional=(("acc_phase", None),), unit="cube")
def _tile_gemv_bias(args: Args) -> Type | None:
    """Left [1, K] x Right [K, N] + Bias [1, N] -> Acc [16, N] valid [1, N]"""
    bias = args.tile("bias")
    prod = _gemv_product(args)
    if prod is None:
        return None
    shape, valid, acc = prod
    if bias is not None:
        _space(args, bias, "bias", "Bias")
        if bias.dtype != acc:
            args.fail(f"{args.op.name}: the bias is {bias.dtype.name}, the product accumulates in {acc.name}", "bias")
        if cint(valid_shape_of(bias)[0]) not in (None, 1):
            args.fail(f"{args.op.name}: the bias must be one row [1, N]", "bias")
    return new_tile(shape, acc, "Acc", valid)


short_name("gemv", tile="tile.gemv")
short_name("gemv_acc", tile="tile.gemv_acc")
short_name("gemv_bias", tile="tile.gemv_bias")
for _g in ("tile.gemv", "tile.gemv_acc", "tile.gemv_bias"):
    declare(_g, pto=NoPto(f"ptoc's .pto emitter has no lowering for {_g} yet (PTOAS TGEMV); use tile.matmul "
                          "on a 16-row Left tile"))
