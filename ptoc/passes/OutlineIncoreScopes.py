"""OutlineIncoreScopes: every `pl.at(level=pl.Level.CORE_GROUP)` scope becomes a kernel.

Purpose
-------
Users write kernel code inline, inside `with pl.at(level=pl.Level.CORE_GROUP):` in an orchestration
(or plain) function. The tile pipeline and codegen work on kernel functions, so this pass moves each such
scope into an InCore function of its own and leaves a call to it where the scope was. The function that
held the scope becomes an Orchestration function. It runs on SSA form (after ConvertToSSA), where every
name is assigned once, so "defined in the scope" and "read in the scope" are questions about names.

Before::

    @pl.function
    def main(self, x: pl.Tensor[[64], pl.FP32]) -> pl.Tensor[[64], pl.FP32]:
        with pl.at(level=pl.Level.CORE_GROUP):
            y: pl.Tensor[[64], pl.FP32] = pl.add(x, x)
        return y

After::

    @pl.function(type=pl.FunctionType.InCore)
    def main_incore_0(self, x: pl.Tensor[[64], pl.FP32]) -> pl.Tensor[[64], pl.FP32]:
        y: pl.Tensor[[64], pl.FP32] = pl.add(x, x)
        return y

    @pl.function(type=pl.FunctionType.Orchestration)
    def main(self, x: pl.Tensor[[64], pl.FP32]) -> pl.Tensor[[64], pl.FP32]:
        y: pl.Tensor[[64], pl.FP32] = self.main_incore_0(x)
        return y

Rules
-----
- Which scopes: `pl.at` with `level=pl.Level.CORE_GROUP`, in Opaque and Orchestration functions, at any
  depth of loops, branches and other scopes (those stay where they are). Other functions and other scope
  kinds (`pl.spmd`, `pl.cluster`, other levels) are left as they are.
- Name: `<function>_incore_<n>`, n counting the function's scopes from 0 in program order; a name
  another function already has gets a `_1`, `_2`, ... suffix.
- Parameters: the values the scope reads that are defined before it (parameters of the function or
  earlier statements), in the order of their first read. A tensor the scope only writes (the
  destination of a `tile.store`) is a `pl.Out` parameter; one it writes and also reads is `pl.InOut`;
  everything else is `In`.
- Results: the values the scope defines that the function reads outside it, in definition order, then
  for every outside tensor the scope stores into, the value of that store (a bare `pl.store(...)`
  statement gets the name `<tensor>_store`). One result is returned as it is, several as a tuple.
- The call: `y: T = self.f(args)` for one result; for several, `ret = self.f(args)` followed by
  `y = ret[0]`, ...; a scope with no result becomes a call statement. A tensor the scope stored into is
  read after the call through the call's result: later statements of the same block (and the blocks
  nested in them) read the new name, so the order "store, then read" stays visible in SSA form.
- Function order: the outlined functions first, in the order made, then the program's functions.
- Running it again changes nothing: no CORE_GROUP scope is left.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from ptoc.analysis.flow import STORE_OPS, store_destination, tensor_aliases
from ptoc.context import CompileContext
from ptoc.ir.names import fresh_name
from ptoc.ir.nodes import (
    AssignStmt,
    Call,
    ConstInt,
    EvalStmt,
    Expr,
    ForStmt,
    Function,
    GetItem,
    IfStmt,
    Param,
    Program,
    ReturnStmt,
    ScopeStmt,
    Stmt,
    TensorType,
    Var,
    WhileStmt,
    YieldStmt,
)
from ptoc.ir.visitor import Mutator, walk
from ptoc.passes.common import is_incore_scope
from ptoc.passes.manager import Pass

OUTER_KINDS = ("Opaque", "Orchestration")


def _defs(body: tuple[Stmt, ...]) -> list[str]:
    """Every name a block defines, at any depth, in program order."""
    out: list[str] = []
    for s in body:
        if isinstance(s, AssignStmt):
            out.append(s.target.name)
        elif isinstance(s, YieldStmt):
            out.extend(t.name for t in s.targets)
        elif isinstance(s, ForStmt):
            out.append(s.var.name)
            out.extend(a.name for a in s.iter_args)
            out.extend(_defs(s.body))
        elif isinstance(s, WhileStmt):
            out.extend(a.name for a in s.iter_args)
            out.extend(_defs(s.body))
        elif isinstance(s, IfStmt):
            out.extend(_defs(s.then_body))
            out.extend(_defs(s.else_body))
        elif isinstance(s, ScopeStmt):
            if s.var is not None:
                out.append(s.var.name)
            out.extend(_defs(s.body))
    return out


def _reads(node) -> list[str]:
    """Names read anywhere under `node` (statement or block), first occurrence order, targets excluded."""
    seen: dict[str, None] = {}
    stmts = node if isinstance(node, tuple) else (node,)
    for s in stmts:
        _stmt_reads(s, seen)
    return list(seen)


def _expr_reads(e: Expr | None, seen: dict[str, None]) -> None:
    if e is None:
        return
    for n in walk(e):
        if isinstance(n, Var):
            seen.setdefault(n.name, None)


def _stmt_reads(s: Stmt, seen: dict[str, None]) -> None:
    if isinstance(s, AssignStmt):
        _expr_reads(s.value, seen)
    elif isinstance(s, EvalStmt):
        _expr_reads(s.expr, seen)
    elif isinstance(s, (ReturnStmt, YieldStmt)):
        for v in s.values:
            _expr_reads(v, seen)
    elif isinstance(s, ForStmt):
        for e in (*s.args, *s.init_values, *(v for _, v in s.kwargs)):
            _expr_reads(e, seen)
        for b in s.body:
            _stmt_reads(b, seen)
    elif isinstance(s, WhileStmt):
        for e in s.init_values:
            _expr_reads(e, seen)
        _expr_reads(s.cond, seen)
        for b in s.body:
            _stmt_reads(b, seen)
    elif isinstance(s, IfStmt):
        _expr_reads(s.cond, seen)
        for b in (*s.then_body, *s.else_body):
            _stmt_reads(b, seen)
    elif isinstance(s, ScopeStmt):
        for e in (*s.args, *(v for _, v in s.kwargs)):
            _expr_reads(e, seen)
        for b in s.body:
            _stmt_reads(b, seen)


def _store_calls(body: tuple[Stmt, ...]):
    """(statement, call) of every store in a block, at any depth."""
    for s in body:
        if isinstance(s, AssignStmt) and isinstance(s.value, Call) and s.value.op in STORE_OPS:
            yield s, s.value
        elif isinstance(s, EvalStmt) and isinstance(s.expr, Call) and s.expr.op in STORE_OPS:
            yield s, s.expr
        elif isinstance(s, (ForStmt, WhileStmt, ScopeStmt)):
            yield from _store_calls(s.body)
        elif isinstance(s, IfStmt):
            yield from _store_calls(s.then_body)
            yield from _store_calls(s.else_body)


def _store_target(call: Call) -> str | None:
    return store_destination(call)


class _Rename(Mutator):
    def __init__(self, names: dict[str, str]):
        self.names = names

    def mutate_Var(self, v: Var) -> Var:
        new = self.names.get(v.name)
        return v if new is None else Var(new, span=v.span)


class _NameStores(Mutator):
    """A bare store into an outside tensor becomes `<tensor>_store = store(...)` so its value can be
    returned."""

    def __init__(self, names: dict[str, str]):
        self.names = names  # outside tensor -> the name of its store's value

    def pre_EvalStmt(self, s: EvalStmt):
        c = s.expr
        if isinstance(c, Call) and c.op in STORE_OPS and _store_target(c) in self.names:
            return AssignStmt(Var(self.names[_store_target(c)], span=s.span), c, span=s.span)
        return None


@dataclass
class _Outliner:
    """Outlines the CORE_GROUP scopes of one function."""

    func: Function
    types: dict
    taken_funcs: set[str]
    made: list[Function] = field(default_factory=list)
    counter: int = 0

    def __post_init__(self):
        self.all_defs = {p.name for p in self.func.params} | set(_defs(self.func.body))
        self.names = set(self.all_defs)

    def block(self, body: tuple[Stmt, ...], outside_reads: set[str]) -> tuple[Stmt, ...]:
        out: list[Stmt] = []
        renames: dict[str, str] = {}
        for i, s in enumerate(body):
            if renames:
                s = _Rename(renames).mutate(s)
            if is_incore_scope(s):
                later = set(_reads(tuple(body[i + 1:]))) | outside_reads
                stmts, new_names = self.outline(s, later)
                out.extend(stmts)
                renames.update(new_names)
                continue
            out.append(self.nested(s, outside_reads | set(_reads(tuple(body[i + 1:])))))
        return tuple(out)

    def nested(self, s: Stmt, outside: set[str]) -> Stmt:
        # a value leaves a loop body or branch only through its yield, which is in the block itself
        if isinstance(s, (ForStmt, WhileStmt, ScopeStmt)):
            new = self.block(s.body, outside)
            return s if new == s.body else replace(s, body=new)
        if isinstance(s, IfStmt):
            then_b, else_b = self.block(s.then_body, outside), self.block(s.else_body, outside)
            if then_b == s.then_body and else_b == s.else_body:
                return s
            return replace(s, then_body=then_b, else_body=else_b)
        return s

    def outline(self, scope: ScopeStmt, later: set[str]) -> tuple[list[Stmt], dict[str, str]]:
        body = self.block(scope.body, later)  # a CORE_GROUP scope nested in this one is outlined first
        inner_defs = list(dict.fromkeys(_defs(body)))  # both branches of an if define its results
        defined = set(inner_defs)
        inputs = [n for n in _reads(body) if n not in defined and n in self.all_defs]
        alias = tensor_aliases(body)
        outputs = [n for n in inner_defs if n in later]
        exported = {alias.get(n, n) for n in outputs}
        written: set[str] = set()
        store_value: dict[str, str] = {}  # outside tensor -> the name its stored value gets
        local = set(defined) | set(inputs)
        for st, call in _store_calls(body):
            dst = alias.get(_store_target(call), _store_target(call))
            if dst is None or dst in defined:
                continue
            written.add(dst)
            if dst in exported or st not in body:
                continue
            store_value[dst] = st.target.name if isinstance(st, AssignStmt) else fresh_name(f"{dst}_store", local)
        body = _NameStores(store_value).mutate(body)
        outputs += [n for n in store_value.values() if n not in outputs]
        params = tuple(self.param(n, body, alias, n in written) for n in inputs)
        fname = fresh_name(f"{self.func.name}_incore_{self.counter}", self.taken_funcs)
        self.counter += 1
        value_of = {v: d for d, v in store_value.items()}
        rtypes = tuple(self.types.get(n) or self.types.get(value_of.get(n, n)) for n in outputs)
        ret = ReturnStmt(tuple(Var(n, span=scope.span) for n in outputs), span=scope.span)
        self.made.append(Function(fname, params, rtypes, (*body, ret), func_type="InCore",
                                  returns_tuple=len(outputs) > 1, span=scope.span))
        call = Call(fname, tuple(Var(n, span=scope.span) for n in inputs), kind="func", span=scope.span)
        # reads of a stored tensor after the call go to the call's value of it
        renames = {alias.get(n, n): n for n in outputs if alias.get(n, n) in written}
        renames.update(store_value)
        return self.call_site(call, outputs, rtypes, renames, scope)

    def param(self, name: str, body: tuple[Stmt, ...], alias: dict[str, str], written: bool) -> Param:
        """In, or Out for a tensor the scope only stores into, InOut for one it stores into and reads."""
        t = self.types.get(name)
        if not written or not isinstance(t, TensorType):
            return Param(name, t)
        for s in body:
            for n in walk(s):
                if not isinstance(n, Call):
                    continue
                args = [a for k, a in enumerate(n.args) if not (k == 2 and n.op in STORE_OPS)]
                args += [v for k, v in n.kwargs if not (k == "output_tensor" and n.op in STORE_OPS)]
                if any(isinstance(m, Var) and alias.get(m.name, m.name) == name for e in args for m in walk(e)):
                    return Param(name, t, "InOut")
        return Param(name, t, "Out")

    def call_site(self, call: Call, outputs: list[str], rtypes, renames: dict[str, str],
                  scope: ScopeStmt) -> tuple[list[Stmt], dict[str, str]]:
        sp = scope.span
        self.names.update(outputs)
        if not outputs:
            return [EvalStmt(call, span=sp)], renames
        if len(outputs) == 1:
            return [AssignStmt(Var(outputs[0], span=sp), call, rtypes[0], span=sp)], renames
        tup = fresh_name("ret", self.names)
        stmts: list[Stmt] = [AssignStmt(Var(tup, span=sp), call, None, span=sp)]
        for k, n in enumerate(outputs):
            stmts.append(AssignStmt(Var(n, span=sp), GetItem(Var(tup, span=sp), ConstInt(k, _index())),
                                    None, span=sp))
        return stmts, renames


def _index():
    from ptoc.ir.dtypes import INDEX

    return INDEX


class OutlineIncoreScopes(Pass):
    name = "OutlineIncoreScopes"
    stage = "ssa"
    summary = "move each pl.at(level=CORE_GROUP) scope into an InCore function called from an Orchestration one"
    requires = frozenset({"ssa"})
    produces = frozenset({"outlined"})

    def run(self, program: Program, ctx: CompileContext) -> Program:
        if not any(f.func_type in OUTER_KINDS and _has_scope(f.body) for f in program.functions):
            return program
        types = self.types(program, ctx)
        taken = {f.name for f in program.functions}
        made: list[Function] = []
        funcs: list[Function] = []
        for f in program.functions:
            if f.func_type not in OUTER_KINDS or not _has_scope(f.body):
                funcs.append(f)
                continue
            o = _Outliner(f, types.get(f.name, {}), taken)
            body = o.block(f.body, set())
            made.extend(o.made)
            funcs.append(replace(f, body=body, func_type="Orchestration"))
        return replace(program, functions=(*made, *funcs))


def _has_scope(body: tuple[Stmt, ...]) -> bool:
    return any(is_incore_scope(n) for s in body for n in walk(s))

