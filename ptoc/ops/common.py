"""Helpers shared by the operator families: constants, shapes, broadcasting, dtype checks."""

from __future__ import annotations

from dataclasses import replace

from ptoc.ir import dtypes
from ptoc.ir.nodes import (
    ConstBool,
    ConstFloat,
    ConstInt,
    DTypeLit,
    EnumLit,
    Expr,
    ListExpr,
    ScalarType,
    StrLit,
    TensorType,
    TensorView,
    TileType,
    TileView,
    TupleExpr,
    Type,
)
from ptoc.ir.types import normalize_tile_view
from ptoc.ops.registry import Args

INDEX = dtypes.INDEX
ONE = ConstInt(1, INDEX)


def cint(e: Expr | None) -> int | None:
    """The value of a constant integer expression (INDEX or any integer dtype), else None."""
    if isinstance(e, ConstInt):
        return e.value
    return None


def c(v: int) -> ConstInt:
    return ConstInt(v, INDEX)


def static_shape(shape: tuple[Expr, ...]) -> tuple[int, ...] | None:
    vals = [cint(d) for d in shape]
    return None if any(v is None for v in vals) else tuple(vals)  # type: ignore[return-value]


def dim_eq(a: Expr, b: Expr) -> bool | None:
    """True/False when provable, None when unknown (different symbolic expressions)."""
    ia, ib = cint(a), cint(b)
    if ia is not None and ib is not None:
        return ia == ib
    if a == b:
        return True
    return None


def shapes_equal(a: tuple[Expr, ...], b: tuple[Expr, ...]) -> bool | None:
    if len(a) != len(b):
        return False
    result: bool | None = True
    for x, y in zip(a, b):
        e = dim_eq(x, y)
        if e is False:
            return False
        if e is None:
            result = None
    return result


def broadcast(args: Args, a: tuple[Expr, ...], b: tuple[Expr, ...], rule: str = "OP-1") -> tuple[Expr, ...]:
    """numpy-style broadcasting of two shapes, right-aligned; size-1 axes stretch."""
    n = max(len(a), len(b))
    pa = (ONE,) * (n - len(a)) + tuple(a)
    pb = (ONE,) * (n - len(b)) + tuple(b)
    out = []
    for i, (x, y) in enumerate(zip(pa, pb)):
        eq = dim_eq(x, y)
        if eq:
            out.append(x)
        elif cint(x) == 1:
            out.append(y)
        elif cint(y) == 1:
            out.append(x)
        elif eq is None:
            args.fail(f"{args.op.name}: cannot prove that axis {i - n} of the operands ({_d(x)} and {_d(y)}) "
                      "are equal or 1", rule=rule, hint="give both operands the same shape expression")
        else:
            args.fail(f"{args.op.name}: shapes {_shape(a)} and {_shape(b)} do not broadcast (axis {i - n}: "
                      f"{_d(x)} vs {_d(y)})", rule=rule,
                      hint="broadcasting stretches only axes of size 1")
    return tuple(out)


def _d(e: Expr) -> str:
    from ptoc.ir.printer import print_expr

    return print_expr(e)


def _shape(s: tuple[Expr, ...]) -> str:
    return "[" + ", ".join(_d(x) for x in s) + "]"


def fmt_shape(s: tuple[Expr, ...]) -> str:
    return _shape(s)


def dtype_arg(args: Args, name: str, required: bool = True) -> dtypes.DType | None:
    e = args.get(name)
    if e is None:
        if required:
            args.fail(f"{args.op.name} needs {name}=pl.<dtype>", code="PTOC-E0201")
        return None
    if isinstance(e, DTypeLit):
        return e.dtype
    args.fail(f"{args.op.name}: {name} must be a dtype such as pl.FP32", name, code="PTOC-E0201")
    return None


def enum_arg(args: Args, name: str, family: str, default: str | None = None) -> str | None:
    e = args.get(name)
    if e is None:
        return default
    if isinstance(e, EnumLit) and e.family == family:
        return e.member
    shown = family if "." in family else f"pl.{family}"  # (pld.ReduceOp and the other distributed enums)
    args.fail(f"{args.op.name}: {name} must be a {shown} member", name, code="PTOC-E0201")
    return None


def str_arg(args: Args, name: str, default: str | None = None) -> str | None:
    e = args.get(name)
    if e is None:
        return default
    if isinstance(e, StrLit):
        return e.value
    args.fail(f"{args.op.name}: {name} must be a string", name, code="PTOC-E0201")
    return None


def int_list(args: Args, name: str, required: bool = True) -> tuple[Expr, ...] | None:
    """A list/tuple argument of index expressions (offsets, shapes)."""
    e = args.get(name)
    if e is None:
        if required:
            args.fail(f"{args.op.name} needs {name}", code="PTOC-E0201")
        return None
    if isinstance(e, (ListExpr, TupleExpr)):
        return e.items
    args.fail(f"{args.op.name}: {name} must be a list such as [0, 0]", name, code="PTOC-E0201")
    return None


def const_int_arg(args: Args, name: str, default: int | None = None) -> int | None:
    e = args.get(name)
    if e is None:
        return default
    v = cint(e)
    if v is None:
        args.fail(f"{args.op.name}: {name} must be a constant integer", name, code="PTOC-E0201")
    return v


def is_literal(e: Expr | None) -> bool:
    return isinstance(e, (ConstInt, ConstFloat, ConstBool))


def valid_shape_of(t: TensorType | TileType) -> tuple[Expr, ...]:
    if t.view is not None and t.view.valid_shape is not None:
        return t.view.valid_shape
    return t.shape


def has_partial_valid(t: TensorType | TileType) -> bool:
    return t.view is not None and t.view.valid_shape is not None and shapes_equal(t.view.valid_shape,
                                                                                    t.shape) is not True


def new_tensor(shape: tuple[Expr, ...], dt: dtypes.DType, valid: tuple[Expr, ...] | None = None) -> TensorType:
    view = None
    if valid is not None and shapes_equal(valid, shape) is not True:
        view = TensorView(valid_shape=tuple(valid))
    return TensorType(tuple(shape), dt, view)


def new_tile(shape: tuple[Expr, ...], dt: dtypes.DType, memory: str | None,
             valid: tuple[Expr, ...] | None = None, base_view: TileView | None = None) -> TileType:
    view = base_view
    if valid is not None and shapes_equal(valid, shape) is not True:
        view = replace(view or TileView(), valid_shape=tuple(valid))
    elif view is not None:
        view = replace(view, valid_shape=None)
    return TileType(tuple(shape), dt, None, memory, normalize_tile_view(tuple(shape), memory, view))


def require_dtypes(args: Args, name: str, dt: dtypes.DType, allowed, what: str, rule: str | None = None) -> None:
    if dt not in allowed and dt.name not in allowed:
        names = ", ".join(sorted(a if isinstance(a, str) else a.name for a in allowed))
        args.fail(f"{args.op.name}: {what} does not accept dtype {dt.name}", name, rule=rule,
                  hint=f"accepted: {names}")


def same_dtype(args: Args, a: Type, b: Type, rule: str | None = None) -> None:
    da, db = getattr(a, "dtype", None), getattr(b, "dtype", None)
    if da is not None and db is not None and da != db:
        args.fail(f"{args.op.name}: operand dtypes differ ({da.name} and {db.name})", rule=rule,
                  hint="cast one operand with pl.cast(x, target_type=...) first")


FLOATS = ("FP16", "FP32", "BF16")
INTS = ("INT8", "INT16", "INT32", "INT64", "UINT8", "UINT16", "UINT32", "UINT64")


def scalar_dtype_of_literal(e: Expr) -> dtypes.DType | None:
    if isinstance(e, ConstInt):
        return e.dtype
    if isinstance(e, ConstFloat):
        return e.dtype
    if isinstance(e, ConstBool):
        return dtypes.BOOL
    return None


def is_scalar(t: Type | None) -> bool:
    return isinstance(t, ScalarType)
