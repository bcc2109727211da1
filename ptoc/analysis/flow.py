"""The linear order of a function: every statement numbered in pre-order, every definition and read of
every name placed in it (what the memory planners, InitMemRef and AllocateMemoryAddr, reason about)."""

from __future__ import annotations

from typing import NamedTuple

from ptoc.ir.nodes import (
    AssignStmt,
    BinOp,
    Call,
    ConstBool,
    ConstFloat,
    ConstInt,
    DictExpr,
    DTypeLit,
    EnumLit,
    EvalStmt,
    Expr,
    ForStmt,
    Function,
    IfStmt,
    ListExpr,
    MinMax,
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


class Site(NamedTuple):
    """Where a value is defined or read: the statement's position in the linear order, its source line,
    the loops around it (by their start position, outermost first) and the if branches around it
    ((if start position, 0 for then / 1 for else), outermost first). (A named tuple: one is made for
    every statement of every function the memory planners see, and a tuple is the cheapest to make.)"""

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


# `Site(...)` without the named tuple's Python-level constructor (one site is made per statement)
_new_site = tuple.__new__

# Expressions without parts: no name is read in them.
_LEAVES = frozenset({ConstInt, ConstFloat, ConstBool, StrLit, EnumLit, DTypeLit, NoneLit})


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

    def _def(self, name: str, site: Site, path, stmt: Stmt | None) -> None:
        self.defs[name] = site
        self.paths[name] = path
        if stmt is not None:
            self.def_stmt[name] = stmt

    def _reads(self, e, site: Site) -> None:
        """Record `site` as a read of every name read in `e` (each occurrence, in walk order). The common
        shapes (names, constants, calls, lists) are taken apart here; the rest by the generic walk."""
        uses = self.uses
        cls = e.__class__
        if cls is Var:
            u = uses.get(e.name)
            if u is None:
                uses[e.name] = [site]
            else:
                u.append(site)
        elif cls in _LEAVES or e is None:
            return
        elif cls is Call:
            self._reads_all(e.args, site)
            for _, v in e.kwargs:
                if v.__class__ not in _LEAVES:
                    self._reads(v, site)
        elif cls is ListExpr or cls is TupleExpr:
            self._reads_all(e.items, site)
        elif cls is tuple:
            self._reads_all(e, site)
        elif cls is BinOp or cls is MinMax:  # (index arithmetic)
            self._reads(e.lhs, site)
            self._reads(e.rhs, site)
        elif cls is DictExpr:  # (a call's attributes)
            for k, v in e.items:
                self._reads(k, site)
                self._reads(v, site)
        elif isinstance(e, Node):
            for n in iter_nodes(e):
                if isinstance(n, Var):
                    uses.setdefault(n.name, []).append(site)

    def _reads_all(self, items: tuple, site: Site) -> None:
        """`_reads` of each of `items` (names and constants, the common ones, done inline)."""
        uses = self.uses
        for a in items:
            cls = a.__class__
            if cls is Var:
                u = uses.get(a.name)
                if u is None:
                    uses[a.name] = [site]
                else:
                    u.append(site)
            elif cls not in _LEAVES:
                self._reads(a, site)

    def _block(self, body: tuple[Stmt, ...], path, loops, branches) -> int:
        key = self._blocks
        self._blocks += 1
        stmt_pos, stmt_at, path_at, site_at = self.stmt_pos, self.stmt_at, self.path_at, self.site_at
        defs, paths, def_stmt, uses = self.defs, self.paths, self.def_stmt, self.uses
        for i, s in enumerate(body):
            at = (key, i)
            here_path = path + (at,)
            self._pos += 1
            start = self._pos
            stmt_pos[at] = start
            stmt_at[at] = s
            path_at[at] = here_path
            here = _new_site(Site, (start, s.span.line, loops, branches))
            site_at[at] = here
            if s.__class__ is AssignStmt:  # (most statements: done inline; no node class is subclassed)
                v = s.value
                if v.__class__ is Call:  # (`self._reads(v, here)` of a call, its usual arguments inline)
                    for a in v.args:
                        cls = a.__class__
                        if cls is Var:
                            u = uses.get(a.name)
                            if u is None:
                                uses[a.name] = [here]
                            else:
                                u.append(here)
                        elif cls is ListExpr or cls is TupleExpr:
                            self._reads_all(a.items, here)
                        elif cls not in _LEAVES:
                            self._reads(a, here)
                    for _, a in v.kwargs:
                        if a.__class__ not in _LEAVES:
                            self._reads(a, here)
                else:
                    self._reads(v, here)
                name = s.target.name
                defs[name] = here
                paths[name] = here_path
                def_stmt[name] = s
            else:
                self._stmt(s, at, here, here_path, loops, branches)
        return key

    def _stmt(self, s: Stmt, at: tuple[int, int], here: Site, path, loops, branches) -> None:
        start, line = here.pos, here.line
        if isinstance(s, AssignStmt):
            self._reads(s.value, here)
            self._def(s.target.name, here, path, s)
        elif isinstance(s, EvalStmt):
            self._reads(s.expr, here)
        elif isinstance(s, (ReturnStmt, YieldStmt)):
            for v in s.values:
                self._reads(v, here)
        elif isinstance(s, (ForStmt, WhileStmt)):
            if isinstance(s, ForStmt):
                for e in s.args:
                    self._reads(e, here)
            for e in s.init_values:
                self._reads(e, here)
            for _, e in s.kwargs:
                self._reads(e, here)
            inner = loops + (start,)
            head = Site(start, line, inner, branches)  # the loop variable, iter_args, a while's condition
            if isinstance(s, ForStmt):
                self._def(s.var.name, head, path, s)
            for a in s.iter_args:
                self._def(a.name, head, path, s)
            if isinstance(s, WhileStmt):  # the condition runs once per iteration
                self._reads(s.cond, head)
            self.body_keys[at] = (self._block(s.body, path, inner, branches),)
            self._pos += 1
            end = self._pos
            self.loops[start] = (start, end)
            if s.results:
                tail = Site(end, line, loops, branches)
                for r in s.results:
                    self._def(r.name, tail, path, s)
        elif isinstance(s, IfStmt):
            self._reads(s.cond, here)
            self.body_keys[at] = (self._block(s.then_body, path, loops, branches + ((start, 0),)),
                                  self._block(s.else_body, path, loops, branches + ((start, 1),)))
            self._pos += 1
            if s.results:
                tail = Site(self._pos, line, loops, branches)
                for r in s.results:
                    self._def(r.name, tail, path, s)
        elif isinstance(s, ScopeStmt):
            for e in s.args:
                self._reads(e, here)
            for _, e in s.kwargs:
                self._reads(e, here)
            if s.var is not None:
                self._def(s.var.name, here, path, s)
            self.body_keys[at] = (self._block(s.body, path, loops, branches),)
            self._pos += 1


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
