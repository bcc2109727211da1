"""Helpers more than one pass uses. A pass module imports shared code from here (or from ptoc.analysis),
never from another pass module."""

from __future__ import annotations

from collections.abc import Mapping

from ptoc.ir import dtypes
from ptoc.ir.nodes import (
    Abs,
    AssignStmt,
    BinOp,
    Call,
    Cast,
    ConstBool,
    ConstFloat,
    ConstInt,
    EnumLit,
    Expr,
    ForStmt,
    IfStmt,
    MinMax,
    ScalarType,
    ScopeStmt,
    Stmt,
    TileType,
    TupleType,
    Type,
    UnaryOp,
    Var,
    WhileStmt,
)
from ptoc.ops.registry import SHORT, lookup, resolve

TypeEnv = Mapping[str, "Type | None"]  # anything with .get(name): a dict or an overlay of one


def is_incore_scope(s: Stmt) -> bool:
    """`with pl.at(level=pl.Level.CORE_GROUP):`: a scope OutlineIncoreScopes turns into a kernel."""
    if not isinstance(s, ScopeStmt) or s.kind != "at":
        return False
    level = dict(s.kwargs).get("level")
    if level is None and s.args:
        level = s.args[0]
    return isinstance(level, EnumLit) and level.member == "CORE_GROUP"


def is_hierarchy_scope(s: Stmt) -> bool:
    """`with pl.at(level=<any level but CORE_GROUP>[, role=...]):`: a scope OutlineHierarchyScopes outlines."""
    if not isinstance(s, ScopeStmt) or s.kind != "at":
        return False
    level = dict(s.kwargs).get("level")
    if level is None and s.args:
        level = s.args[0]
    return isinstance(level, EnumLit) and level.family == "Level" and level.member != "CORE_GROUP"


def align_up(n: int, unit: int) -> int:
    return -(-n // unit) * unit


def expr_type(e: Expr, env: TypeEnv) -> Type | None:
    """The type of a simple expression: names from `env`, constants, scalar arithmetic."""
    if isinstance(e, Var):
        return env.get(e.name)
    if isinstance(e, (ConstInt, ConstFloat)):
        return ScalarType(e.dtype)
    if isinstance(e, ConstBool):
        return ScalarType(dtypes.BOOL)
    if isinstance(e, Cast):
        return ScalarType(e.dtype)
    if isinstance(e, BinOp):
        if e.op in ("==", "!=", "<", "<=", ">", ">=", "and", "or"):
            return ScalarType(dtypes.BOOL)
        lt, rt = expr_type(e.lhs, env), expr_type(e.rhs, env)
        if isinstance(lt, ScalarType) and isinstance(rt, ScalarType):
            return rt if lt.dtype.name == "INDEX" and rt.dtype.name != "INDEX" else lt
        return None
    if isinstance(e, UnaryOp):
        return ScalarType(dtypes.BOOL) if e.op == "not" else expr_type(e.operand, env)
    if isinstance(e, MinMax):
        return expr_type(e.lhs, env)
    if isinstance(e, Abs):
        return expr_type(e.operand, env)
    return None


def resolve_op(call: Call, env: TypeEnv):
    """The registered op a call names (short names resolved by argument types), or None."""
    if call.kind != "op":
        return None
    op = lookup(call.op)  # (a full name, as most are: `resolve` would not look at the argument types)
    if op is not None:
        return op
    op, _ = resolve(call, [expr_type(a, env) for a in call.args])
    return op


def resolve_by_names(call: Call, env: Mapping[str, Type | None]):
    """The registered op an op call names, or None: a full name (most are) found at once; a short one
    resolved by the types `env` gives its arguments that are names (what a planner's type table knows)."""
    op = lookup(call.op)  # (`resolve` would not look at the argument types of a full name)
    if op is not None:
        return op
    op, _ = resolve(call, [env.get(a.name) if isinstance(a, Var) else None for a in call.args])
    return op


def op_names(op: str) -> set[str]:
    """`op` and every registered op its short name can stand for (`store` -> tile.store, tensor.store)."""
    short = SHORT.get(op)  # (asked for every call the passes look at: most names are full ones, no set union)
    return {op, *short.values()} if short else {op}


__all__ = ["TypeEnv", "align_up", "expr_type", "op_names", "resolve_op"]


def has_loop_kind(f, kind: str) -> bool:
    """A `for` loop of `kind` (`pipeline`, ...) is in function `f`: its `NodeIndex.for_kinds()`, from a look
    at the statements alone. Loops are statements, so nothing is missed; the node index would walk every
    expression and type of `f`, which the passes asking this before they run (most functions have no such
    loop, and the next pass changes them again) would not use otherwise."""
    stack = [f.body]
    while stack:
        for s in stack.pop():
            cls = s.__class__
            if cls is ForStmt:
                if s.kind == kind:
                    return True
                stack.append(s.body)
            elif cls is WhileStmt or cls is ScopeStmt:
                stack.append(s.body)
            elif cls is IfStmt:
                stack.append(s.then_body)
                stack.append(s.else_body)
    return False


def statements(body: tuple[Stmt, ...]):
    """Every statement of `body` and of its nested bodies (each loop, scope and if branch), depth first in
    program order, a compound statement before the statements under it (the order a `NodeIndex` lists
    them in). For a pass that looks for statements only: no walk of their expressions and types."""
    stack = [iter(body)]
    while stack:
        for s in stack[-1]:
            yield s
            cls = s.__class__
            if cls is ForStmt or cls is WhileStmt or cls is ScopeStmt:
                stack.append(iter(s.body))
                break
            if cls is IfStmt:
                stack.append(iter(s.else_body))
                stack.append(iter(s.then_body))
                break
        else:
            stack.pop()


def is_alloc(s: Stmt) -> bool:
    """`name = pl.tile.alloc(...)`: an on-chip buffer InitMemRef declared."""
    return isinstance(s, AssignStmt) and isinstance(s.value, Call) and s.value.kind == "op" \
        and s.value.op == "tile.alloc"


def allocs(body: tuple[Stmt, ...]):
    """Every `pl.tile.alloc` statement of `body` and its nested bodies, in program order (an iterator).
    (`is_alloc` of each statement, tested inline and collected into a list by plain recursion: the
    memory passes ask this of every function several times; no node class is subclassed.)"""
    out: list[Stmt] = []
    _allocs_into(body, out)
    return iter(out)


def _allocs_into(body: tuple[Stmt, ...], out: list[Stmt]) -> None:
    for s in body:
        cls = s.__class__
        if cls is AssignStmt:
            v = s.value  # type: ignore[attr-defined]
            if v.__class__ is Call and v.op == "tile.alloc" and v.kind == "op":
                out.append(s)
        elif cls is ForStmt or cls is WhileStmt or cls is ScopeStmt:
            _allocs_into(s.body, out)  # type: ignore[attr-defined]
        elif cls is IfStmt:
            _allocs_into(s.then_body, out)  # type: ignore[attr-defined]
            _allocs_into(s.else_body, out)  # type: ignore[attr-defined]


def iter_allocs(body: tuple[Stmt, ...]):
    """`allocs(body)` found lazily, for a caller that may stop at the first ones (InitMemRef declares
    every buffer at the top of the function, so a question about the first alloc, or about any one that
    is not placed yet, is answered without a look at the rest of the body)."""
    for s in body:
        cls = s.__class__
        if cls is AssignStmt:
            v = s.value  # type: ignore[attr-defined]
            if v.__class__ is Call and v.op == "tile.alloc" and v.kind == "op":
                yield s
        elif cls is ForStmt or cls is WhileStmt or cls is ScopeStmt:
            yield from iter_allocs(s.body)  # type: ignore[attr-defined]
        elif cls is IfStmt:
            yield from iter_allocs(s.then_body)  # type: ignore[attr-defined]
            yield from iter_allocs(s.else_body)  # type: ignore[attr-defined]


def memref_bases(t: Type | None) -> list[str]:
    """The buffer (pointer) names a value's type binds it to: its MemRef's base, every element's for a tuple."""
    if t.__class__ is TileType:  # (the common case, asked ~10 times per tile by the memory passes; no
        m = t.memref  # node class is subclassed, so this is the isinstance test below)
        return [m.base.name] if m is not None and m.base.__class__ is Var else []  # type: ignore[union-attr]
    if isinstance(t, TupleType):
        return [n for x in t.types for n in memref_bases(x)]
    if isinstance(t, TileType) and t.memref is not None and isinstance(t.memref.base, Var):
        return [t.memref.base.name]
    return []


# Ops whose result may share no operand's buffer: the hardware still reads the operands while it writes the
# result (TMOV needs distinct addresses (OP-7); the reductions, gathers, sorts, transposes and the
# high-precision recip/rsqrt read a scratch or the whole source; fmod re-reads its dividend; a widening
# tile.cast is handled by `forbidden_operands`). PyPTO marks the same ops `not_inplace_safe`.
NOT_IN_PLACE = frozenset({
    "tile.move", "tile.recip", "tile.rsqrt", "tile.fmod", "tile.fmods", "tile.ands", "tile.ors", "tile.xors",
    "tile.prelu", "tile.fillpad_expand", "tile.sort32", "tile.mrgsort_format1", "tile.mrgsort_format2",
    "tile.gather", "tile.gatherb", "tile.gather_mask", "tile.gather_compare", "tile.mgather", "tile.transpose",
    "tile.extract", "tile.concat", "tile.row_sum", "tile.row_max", "tile.row_min", "tile.row_prod",
    "tile.row_argmax", "tile.row_argmin", "tile.col_argmax", "tile.col_argmin",
})
# Ops whose result may overwrite some operands but not these (positional indices): tile.sel's mask and
# scratch, tile.sels' mask, the broadcast vector of a row/col expansion (re-read for every row or column).
FORBIDDEN_OPERANDS: dict[str, tuple[int, ...]] = {
    "tile.sel": (0, 3), "tile.sels": (0,),
    **{f"tile.{axis}_expand{suffix}": (1,) for axis in ("row", "col")
       for suffix in ("", "_sub", "_div", "_mul", "_add", "_max", "_min", "_expdif")},
    "tile.row_expand_add": (1, 2),
}


def forbidden_operands(op: str, args: tuple[Expr, ...], result: Type | None, env: TypeEnv) -> list[str]:
    """The names among `args` (a call of `op` producing a value of type `result`) whose buffer the result
    may not share."""
    names = [a.name if isinstance(a, Var) else None for a in args]
    if op in NOT_IN_PLACE:
        return [n for n in names if n]
    bad = [names[i] for i in FORBIDDEN_OPERANDS.get(op, ()) if i < len(names) and names[i]]
    if op == "tile.cast" and names and names[0]:  # a widening cast writes ahead of what it has read
        src = env.get(names[0])
        if isinstance(src, TileType) and isinstance(result, TileType) and result.dtype.bits > src.dtype.bits:
            bad.append(names[0])
    return bad


SPLIT_MODES = {"NONE": 0, "UP_DOWN": 1, "LEFT_RIGHT": 2}  # pl.SplitMode member -> its code


def split_mode_code(e: Expr | None) -> int:
    """A `split` attribute (`pl.SplitMode.X` or its code) as its code; 0 (none) when absent or unknown."""
    if isinstance(e, EnumLit):
        return SPLIT_MODES.get(e.member, 0)
    if isinstance(e, ConstInt):
        return e.value
    return 0


def runs_a_lane_replay(f) -> bool:
    """An unsplit AIV kernel marked `dual_aiv_dispatch` (a2a3): lane 1 only replays its pipe hand-shakes on
    empty tiles (SplitVectorKernel)."""
    dual, aiv_split = f.attr("dual_aiv_dispatch"), f.attr("split_aiv")
    return (f.func_type == "AIV" and isinstance(dual, ConstBool) and dual.value
            and not split_mode_code(f.attr("split")) and not (isinstance(aiv_split, ConstBool) and aiv_split.value))


# Destination-passing ops: the result is written into this operand's buffer (parameter name), in place.
TIED_OPS = {"tile.matmul_acc": "acc", "tile.write": "tile", "tile.scatter": "dst", "tile.scatter_mask": "dst",
            "tile.gather_row": "dst"}


def operand_named(op, call: Call, pname: str) -> Expr | None:
    """The argument of `call` (of the resolved op `op`) for its parameter `pname`, positional or keyword."""
    names = op.param_names
    for i, a in enumerate(call.args):
        if i < len(names) and names[i] == pname:
            return a
    return call.kwarg(pname)
