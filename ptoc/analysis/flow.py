"""The linear order of a function: every statement numbered in pre-order, every definition and read of
every name placed in it (what the memory planners, InitMemRef and AllocateMemoryAddr, reason about)."""

from __future__ import annotations

from dataclasses import dataclass

from ptoc.ir.nodes import (
    AssignStmt,
    Call,
    ConstBool,
    ConstFloat,
    ConstInt,
    DTypeLit,
    EnumLit,
    EvalStmt,
    Expr,
    ForStmt,
    Function,
    IfStmt,
    ListExpr,
    Node,
    NoneLit,
    ReturnStmt,
    ScopeStmt,
    Stmt,
    StrLit,
    TupleExpr,
    Var,
    WhileStmt,
    YieldStmt,
)
from ptoc.ir.visitor import walk as iter_nodes


@dataclass(frozen=True)
class Site:
    """Where a value is defined or read: the statement's position in the linear order, its source line,
    the loops around it (by their start position, outermost first) and the if branches around it
    ((if start position, 0 for then / 1 for else), outermost first)."""

    pos: float  # an int for a statement; a copy InitMemRef plans sits between two statements
    line: int
    loops: tuple[int, ...] = ()
    branches: tuple[tuple[int, int], ...] = ()


def nested_blocks(s: Stmt) -> tuple[tuple[Stmt, ...], ...]:
    """The bodies nested in a statement, in the one order every walk of this module uses."""
    if isinstance(s, (ForStmt, WhileStmt, ScopeStmt)):
        return (s.body,)
    if isinstance(s, IfStmt):
        return (s.then_body, s.else_body)
    return ()


# Expressions without parts: no name is read in them.
_LEAVES = frozenset({ConstInt, ConstFloat, ConstBool, StrLit, EnumLit, DTypeLit, NoneLit})


def _vars(e: Expr | None) -> list[str]:
    """The names read in `e`, in walk order (each occurrence)."""
    out: list[str] = []
    if e is not None:
        _collect_vars(e, out)
    return out


def _collect_vars(e, out: list[str]) -> None:
    """`_vars` without the generic walk for the common shapes (calls of names, constants and lists)."""
    cls = e.__class__
    if cls is Var:
        out.append(e.name)
    elif cls in _LEAVES:
        return
    elif cls is Call:
        for a in e.args:
            _collect_vars(a, out)
        for _, v in e.kwargs:
            _collect_vars(v, out)
    elif cls is ListExpr or cls is TupleExpr or cls is tuple:
        for a in (e if cls is tuple else e.items):
            _collect_vars(a, out)
    elif isinstance(e, Node):
        out.extend(n.name for n in iter_nodes(e) if isinstance(n, Var))


class Flow:
    """Numbers a function's statements in pre-order: a statement gets one position; a loop, if or scope
    gets a start position before its bodies and an end position after them. Records every definition
    (site and block path) and every read (site) of every name, each loop's (start, end) and, per block
    (numbered in walk order, the function body is 0), each statement's start position.

    A definition's path is ((block, index), ...) from the function body down to the statement that
    defines it; iter_args and the results of loops and ifs are defined by their compound statement."""

    def __init__(self, f: Function):
        self.defs: dict[str, Site] = {}
        self.paths: dict[str, tuple[tuple[int, int], ...]] = {}
        self.def_stmt: dict[str, Stmt] = {}
        self.uses: dict[str, list[Site]] = {}
        self.loops: dict[int, tuple[int, int]] = {}
        self.stmt_pos: dict[tuple[int, int], int] = {}
        self.stmt_at: dict[tuple[int, int], Stmt] = {}
        self.site_at: dict[tuple[int, int], Site] = {}  # (block, index) -> the statement's start site
        self.path_at: dict[tuple[int, int], tuple[tuple[int, int], ...]] = {}
        self.body_keys: dict[tuple[int, int], tuple[int, ...]] = {}  # blocks nested in a statement
        self._pos = 0
        self._blocks = 0
        for p in f.params:
            self._def(p.name, Site(-1, f.span.line), (), None)
        self._block(f.body, (), (), ())

    def _next(self) -> int:
        self._pos += 1
        return self._pos

    def _def(self, name: str, site: Site, path, stmt: Stmt | None) -> None:
        self.defs[name] = site
        self.paths[name] = path
        if stmt is not None:
            self.def_stmt[name] = stmt

    def _use(self, names: list[str], site: Site) -> None:
        for n in names:
            self.uses.setdefault(n, []).append(site)

    def _block(self, body: tuple[Stmt, ...], path, loops, branches) -> int:
        key = self._blocks
        self._blocks += 1
        for i, s in enumerate(body):
            self._stmt(s, key, i, path + ((key, i),), loops, branches)
        return key

    def _stmt(self, s: Stmt, key: int, i: int, path, loops, branches) -> None:
        start = self._next()
        self.stmt_pos[(key, i)] = start
        self.stmt_at[(key, i)] = s
        self.path_at[(key, i)] = path
        line = s.span.line
        here = Site(start, line, loops, branches)
        self.site_at[(key, i)] = here
        if isinstance(s, AssignStmt):
            self._use(_vars(s.value), here)
            self._def(s.target.name, here, path, s)
        elif isinstance(s, EvalStmt):
            self._use(_vars(s.expr), here)
        elif isinstance(s, (ReturnStmt, YieldStmt)):
            for v in s.values:
                self._use(_vars(v), here)
        elif isinstance(s, (ForStmt, WhileStmt)):
            header = list(s.args) if isinstance(s, ForStmt) else []
            header += list(s.init_values) + [v for _, v in s.kwargs]
            for e in header:
                self._use(_vars(e), here)
            inner = loops + (start,)
            if isinstance(s, ForStmt):
                self._def(s.var.name, Site(start, line, inner, branches), path, s)
            for a in s.iter_args:
                self._def(a.name, Site(start, line, inner, branches), path, s)
            if isinstance(s, WhileStmt):  # the condition runs once per iteration
                self._use(_vars(s.cond), Site(start, line, inner, branches))
            self.body_keys[(key, i)] = (self._block(s.body, path, inner, branches),)
            end = self._next()
            self.loops[start] = (start, end)
            for r in s.results:
                self._def(r.name, Site(end, line, loops, branches), path, s)
        elif isinstance(s, IfStmt):
            self._use(_vars(s.cond), here)
            self.body_keys[(key, i)] = (self._block(s.then_body, path, loops, branches + ((start, 0),)),
                                        self._block(s.else_body, path, loops, branches + ((start, 1),)))
            end = self._next()
            for r in s.results:
                self._def(r.name, Site(end, line, loops, branches), path, s)
        elif isinstance(s, ScopeStmt):
            for e in list(s.args) + [v for _, v in s.kwargs]:
                self._use(_vars(e), here)
            if s.var is not None:
                self._def(s.var.name, here, path, s)
            self.body_keys[(key, i)] = (self._block(s.body, path, loops, branches),)
            self._next()


STORE_OPS = ("tile.store", "store")


def store_destination(c: Expr) -> str | None:
    """The destination tensor's name when `c` is a `tile.store` / `store` call into a named tensor."""
    if not (isinstance(c, Call) and c.kind == "op" and c.op in STORE_OPS):
        return None
    dst = c.args[2] if len(c.args) >= 3 else c.kwarg("output_tensor")
    return dst.name if isinstance(dst, Var) else None


def tensor_aliases(body: tuple[Stmt, ...]) -> dict[str, str]:
    """name -> the name it is another SSA name of, followed to the first: a store's result is its
    destination, a loop's iter_arg its initial value, a yield's target the value yielded, `b = a` is `a`.
    (Both branches of an if yield values of the same tensor in the programs this is asked about; the
    first branch decides.)"""
    out: dict[str, str] = {}

    def visit(stmts: tuple[Stmt, ...]) -> None:
        for s in stmts:
            if isinstance(s, AssignStmt):
                dst = store_destination(s.value)
                if dst is not None:
                    out.setdefault(s.target.name, dst)
                elif isinstance(s.value, Var):
                    out.setdefault(s.target.name, s.value.name)
            elif isinstance(s, YieldStmt):
                for t, v in zip(s.targets, s.values):
                    if isinstance(v, Var):
                        out.setdefault(t.name, v.name)
            elif isinstance(s, (ForStmt, WhileStmt)):
                for a, v in zip(s.iter_args, s.init_values):
                    if isinstance(v, Var):
                        out.setdefault(a.name, v.name)
            for b in nested_blocks(s):
                visit(b)

    visit(body)

    def root(n: str) -> str:
        seen = set()
        while n in out and n not in seen:
            seen.add(n)
            n = out[n]
        return n

    return {k: root(k) for k in out}


__all__ = ["Flow", "STORE_OPS", "Site", "nested_blocks", "store_destination", "tensor_aliases"]
