"""The 2-D form of an N-D tile type (what FlattenTileNdTo2D writes, and what the verifier accepts as
the annotation of a rank-N value).

A rank > 2 tile `[d0, ..., dk, n]` becomes `[d0 * ... * dk, n]` (static leading extents, PTOC-E0310),
rank 1 `[n]` becomes `[1, n]`; a valid shape flattens the same way when its valid rows stay a prefix of
the flattened rows (PTOC-E0311).
"""

from __future__ import annotations

from dataclasses import replace

from ptoc.diagnostics import CompileError, Diagnostic
from ptoc.ir import dtypes
from ptoc.ir.nodes import BinOp, ConstInt, Expr, Node, TileType, TupleType, Type
from ptoc.ir.types import normalize_tile_view

INDEX = dtypes.INDEX


def compile_error(code: str, message: str, at: Node | None, hint: str | None = None, rule: str | None = None):
    return CompileError([Diagnostic(code, message, at.span if at is not None else None, hint, rule)])


def const_value(e: Expr) -> int | None:
    return e.value if isinstance(e, ConstInt) else None


def _product(exprs) -> Expr:
    """The product of index expressions, constants folded (`v * 16`, `32`)."""
    const = 1
    syms: list[Expr] = []
    for e in exprs:
        v = const_value(e)
        if v is None:
            syms.append(e)
        else:
            const *= v
    if not syms:
        return ConstInt(const, INDEX)
    out = syms[0]
    for s in syms[1:]:
        out = BinOp("*", out, s)
    return out if const == 1 else BinOp("*", out, ConstInt(const, INDEX))


def _same(a: Expr, b: Expr) -> bool:
    va, vb = const_value(a), const_value(b)
    return va == vb if va is not None and vb is not None else a == b


def flat_shape(shape: tuple[Expr, ...], at: Node, what: str = "tile") -> tuple[Expr, ...]:
    if len(shape) == 1:
        return (ConstInt(1, INDEX), shape[0])
    if len(shape) <= 2:
        return shape
    for i, d in enumerate(shape[:-1]):
        if const_value(d) is None:
            raise compile_error("PTOC-E0310", f"the rank-{len(shape)} {what} has a dynamic leading extent (axis {i}); "
                         "it cannot be flattened to 2-D", at,
                         hint="give the tile a static physical shape and describe the dynamic extent with "
                         "valid_shape")
    return (_product(shape[:-1]), shape[-1])


def flat_valid(shape: tuple[Expr, ...], valid: tuple[Expr, ...], at: Node) -> tuple[Expr, ...]:
    if len(shape) == 1:
        return (ConstInt(1, INDEX), valid[0])
    free = None  # the first leading axis whose valid extent is not a single row
    for i, (d, v) in enumerate(zip(shape[:-1], valid[:-1])):
        if free is None:
            if const_value(v) != 1:
                free = i
        elif not _same(v, d):
            raise compile_error("PTOC-E0311", f"the valid region {_fmt(valid)} of a {_fmt(shape)} tile is not "
                                f"a block of whole rows once flattened: axis {free} keeps more than one index, "
                                f"so axis {i} would have to be fully valid", at,
                                hint="only the leading-most axes may be partial: split the tile so that every "
                                "axis after the first partial one is fully valid")
    return (_product(valid[:-1]), valid[-1])


def _fmt(s) -> str:
    from ptoc.ir.printer import print_expr

    return "[" + ", ".join(print_expr(x) for x in s) + "]"


def flat_tile(t: TileType, at: Node) -> TileType:
    if t.rank == 2 or t.rank == 0:
        return t
    shape = flat_shape(t.shape, at)
    view = t.view
    if view is not None:
        if view.stride:
            raise compile_error("PTOC-E0311", f"a strided rank-{t.rank} tile cannot be flattened to 2-D", at,
                         hint="flatten a dense tile")
        if view.valid_shape is not None:
            view = replace(view, valid_shape=flat_valid(t.shape, view.valid_shape, at))
    return TileType(shape, t.dtype, t.memref, t.memory, normalize_tile_view(shape, t.memory, view), span=t.span)


def flat_type(t: Type | None, at: Node) -> Type | None:
    if isinstance(t, TileType):
        return flat_tile(t, at)
    if isinstance(t, TupleType):
        items = tuple(flat_type(x, at) for x in t.types)
        return t if all(a is b for a, b in zip(items, t.types)) else replace(t, types=items)
    return t


__all__ = ["flat_shape", "flat_tile", "flat_type", "flat_valid"]
