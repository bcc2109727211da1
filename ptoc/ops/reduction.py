"""Direction-specific reductions (spec OP-6): row_* fold the last axis, col_* the one before it.

There is no reduction parameterised by an axis: the ISA has only direction-specific instructions
(pto.trowsum, pto.tcolsum, ...), so an `axis=` keyword is rejected with a hint naming the row_/col_ op.
Row reductions of `[M, N]` give `[M, 1]` (a column tile: col_major in Vec by the implicit view), col
reductions give `[1, N]`. tile.row_* take the scratch tile pto.trow* needs: same dtype and rank as the
input, every extent at least the input's.
"""

from __future__ import annotations

from ptoc.ir import dtypes
from ptoc.ir.nodes import Expr, TensorType, TileType, Type
from ptoc.ops.common import ONE, cint, dim_eq, fmt_shape, new_tensor, new_tile, valid_shape_of
from ptoc.ops.registry import Args, Emitter, NoPto, Pto, declare, register, short_name

TENSOR_OPS = ("row_sum", "row_max", "row_min", "col_sum", "col_max", "col_min")
TILE_ROW = ("row_sum", "row_max", "row_min", "row_prod")
TILE_COL = ("col_sum", "col_max", "col_min", "col_prod")
# axis values that name each direction (for the axis= hint)
ROW_AXES = (-1, 1)
COL_AXES = (-2, 0)


def _reject_axis(args: Args, name: str) -> None:
    """OP-6: reductions have no axis parameter; point at the direction-specific op instead."""
    for k, v in args.extra.items():
        if k == "attrs":
            continue
        if k in ("axis", "dim", "axes"):
            kind, _, what = args.op.name.partition(".")
            op = what.split("_", 1)[1]
            a = cint(v)
            if a in ROW_AXES:
                use = f"pl.{kind}.row_{op}(x{', tmp' if kind == 'tile' else ''})"
            elif a in COL_AXES:
                use = f"pl.{kind}.col_{op}(x)"
            else:
                use = f"pl.{kind}.row_{op} (last axis) or pl.{kind}.col_{op} (axis -2)"
            args.fail(f"{args.op.name} has no {k}= parameter: reductions are direction-specific", k,
                      rule="OP-6", code="PTOC-E0201", hint=f"use {use}")
        args.fail(f"{args.op.name} has no parameter {k!r}", k, code="PTOC-E0201")


def _check_dtype(args: Args, dt) -> None:
    if not (dt.is_float or dt.is_int) or dt.sub_byte or dt.name == "INDEX" or dt.is_packed_fp4:
        args.fail(f"{args.op.name} does not reduce dtype {dt.name}", "input", rule="OP-6",
                  hint="cast to FP32 (or INT32) first")


def _reduced(shape: tuple[Expr, ...], valid: tuple[Expr, ...], row: bool):
    if row:
        return shape[:-1] + (ONE,), valid[:-1] + (ONE,)
    return shape[:-2] + (ONE, shape[-1]), valid[:-2] + (ONE, valid[-1])


def _tensor_rule(name: str):
    row = name.startswith("row_")

    def rule(args: Args) -> Type | None:
        _reject_axis(args, name)
        x = args.tensor("input")
        if x is None:
            return None
        if x.rank < 2:
            args.fail(f"{args.op.name} needs rank >= 2, got {fmt_shape(x.shape)}", "input", rule="OP-6",
                      hint="reshape a vector to [1, N] first")
        _check_dtype(args, x.dtype)
        shape, valid = _reduced(x.shape, valid_shape_of(x), row)
        return new_tensor(shape, x.dtype, valid)

    rule.__doc__ = (f"tensor {name.replace('_', ' ')}: [.., M, N] -> "
                    + ("[.., M, 1]" if row else "[.., 1, N]") + " (OP-6)")
    return rule


def _check_tmp(args: Args, x: TileType, tmp: TileType) -> None:
    if tmp.dtype != x.dtype:
        args.fail(f"{args.op.name}: tmp dtype {tmp.dtype.name} differs from the input's {x.dtype.name}", "tmp",
                  rule="OP-6", hint="the scratch tile has the input's dtype")
    if tmp.rank != x.rank:
        args.fail(f"{args.op.name}: tmp rank {tmp.rank} differs from the input's {x.rank}", "tmp", rule="OP-6",
                  hint=f"create the scratch tile with shape {fmt_shape(x.shape)}")
    for i, (a, b) in enumerate(zip(tmp.shape, x.shape)):
        ta, xb = cint(a), cint(b)
        small = (ta < xb) if ta is not None and xb is not None else (dim_eq(a, b) is not True and ta is None)
        if small:
            args.fail(f"{args.op.name}: tmp extent {i} ({fmt_shape((a,))[1:-1]}) is smaller than the input's "
                      f"({fmt_shape((b,))[1:-1]})", "tmp", rule="OP-6",
                      hint=f"create the scratch tile with shape {fmt_shape(x.shape)} or larger")


def _tile_rule(name: str, tmp_mode: str):
    row = name.startswith("row_")

    def rule(args: Args) -> Type | None:
        _reject_axis(args, name)
        x = args.tile("input")
        tmp = args.tile("tmp") if tmp_mode != "none" else None
        if x is None:
            return None
        if x.rank != 2:
            args.fail(f"{args.op.name} needs a 2-D tile, got {fmt_shape(x.shape)}", "input", rule="OP-6",
                      hint="reshape the tile to [rows, cols] first")
        if (x.memory or "Vec") != "Vec":
            args.fail(f"{args.op.name} reduces Vec tiles, got a {x.memory} tile", "input", rule="OP-6",
                      hint="move the tile to Vec first: pl.tile.move(t, target_memory=pl.Mem.Vec)")
        _check_dtype(args, x.dtype)
        if tmp is not None:
            _check_tmp(args, x, tmp)
        shape, valid = _reduced(x.shape, valid_shape_of(x), row)
        return new_tile(shape, x.dtype, x.memory or "Vec", valid)

    rule.__doc__ = (f"tile {name.replace('_', ' ')}: [M, N] -> " + ("[M, 1] column tile" if row else "[1, N]")
                    + (" (tmp scratch tile)" if tmp_mode == "required" else "") + " (OP-6)")
    return rule


for _n in TENSOR_OPS:
    register(f"tensor.{_n}", ("input",), family="reduction", open_kwargs=True)(_tensor_rule(_n))
for _n in TILE_ROW:
    register(f"tile.{_n}", ("input", "tmp"), family="reduction", open_kwargs=True)(_tile_rule(_n, "required"))
register("tile.col_sum", ("input",), optional=(("tmp", None),), family="reduction",
         open_kwargs=True)(_tile_rule("col_sum", "optional"))
for _n in ("col_max", "col_min", "col_prod"):
    register(f"tile.{_n}", ("input",), family="reduction", open_kwargs=True)(_tile_rule(_n, "none"))

for _n in TILE_ROW + TILE_COL:
    if _n in TENSOR_OPS:
        short_name(_n, tensor=f"tensor.{_n}", tile=f"tile.{_n}")
    else:
        short_name(_n, tile=f"tile.{_n}")

# `.pto` spellings (PTOAS PTOOps.td, destination-passing form)
for _n in TILE_ROW:
    declare(f"tile.{_n}", pto=Pto("t" + _n.replace("_", ""), ("tile:input", "tile:tmp")))
for _n in ("col_max", "col_min", "col_prod"):
    declare(f"tile.{_n}", pto=Pto("t" + _n.replace("_", ""), ("tile:input",)))
declare("tile.col_sum", pto=Emitter("op_col_sum"))

__all__ = ["TensorType"]


# Argmax / argmin (PyPTO src/ir/op/tile_ops/reduction.cpp): the index of the extreme element along the
# reduced axis, INT32, with a scratch tile of the input's shape and dtype. ptoc's .pto emitter has no
# lowering for them yet.
def _arg_rule(name: str):
    base = _tile_rule(name, "required")
    row = name.startswith("row_")

    def rule(args: Args) -> Type | None:
        t = base(args)
        if t is None:
            return None
        return new_tile(t.shape, dtypes.BY_NAME["INT32"], t.memory, valid_shape_of(t))

    rule.__doc__ = (f"tile {name.replace('_', ' ')}: [M, N] -> INT32 " + ("[M, 1]" if row else "[1, N]")
                    + " indices (tmp scratch tile)")
    return rule


for _n in ("row_argmax", "row_argmin", "col_argmax", "col_argmin"):
    register(f"tile.{_n}", ("input", "tmp"), family="reduction",
             pto=NoPto(f"ptoc's .pto emitter has no lowering for tile.{_n} yet"))(_arg_rule(_n))
    short_name(_n, tile=f"tile.{_n}")
