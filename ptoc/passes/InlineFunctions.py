"""InlineFunctions: the body of every `FunctionType.Inline` function replaces each call to it.

Purpose
-------
An Inline function is a piece of program text shared by several callers; no later pass, emitter or
runtime sees it. This pass, the first of the pipeline, copies its body to every call site and then
drops the Inline functions from the program. It runs on the program as written (names may be assigned
again), before ConvertToSSA.

Before::

    @pl.function(type=pl.FunctionType.Inline)
    def square(self, x: pl.Tensor[[8], pl.FP32]) -> pl.Tensor[[8], pl.FP32]:
        y: pl.Tensor[[8], pl.FP32] = pl.mul(x, x)
        return y

    @pl.function
    def main(self, a: pl.Tensor[[8], pl.FP32]) -> pl.Tensor[[8], pl.FP32]:
        r: pl.Tensor[[8], pl.FP32] = self.square(a)
        return r

After::

    @pl.function
    def main(self, a: pl.Tensor[[8], pl.FP32]) -> pl.Tensor[[8], pl.FP32]:
        y_inline: pl.Tensor[[8], pl.FP32] = pl.mul(a, a)
        r: pl.Tensor[[8], pl.FP32] = y_inline
        return r

Rules
-----
- Call sites: a call that is a whole statement: `r = self.f(...)`, `self.f(...)` and `return self.f(...)`,
  in any block (loop bodies, branches, scopes). A call to an Inline function nested in a larger
  expression is an error (PTOC-E0611), as is an Inline function that calls itself, directly or through
  other Inline functions (PTOC-E0610), and one with a `return` before its last statement (PTOC-E0612).
- Parameters: a parameter the body never assigns is replaced by the argument expression. One the body
  assigns becomes the argument's name when the argument is a name (so `out = pl.assemble(out, ...)` in
  the callee updates the caller's `out` argument, as a `pl.Out` parameter means); when the argument is
  an expression, the body starts with `<param>_inline = <argument>`.
- Locals: every other name the body defines gets a fresh name `<name>_inline` (`_inline_1`, ... when
  taken), so two expansions of one function never share a name.
- Results: `r = self.f(...)` ends with `r = <returned value>` (nothing when the value already is `r`);
  `self.f(...)` drops the returned values; `return self.f(...)` returns them. For a function returning
  several values, `t = self.f(...)` binds nothing: every `t[i]` of the caller reads the i-th returned
  value directly.
- Inline functions calling Inline functions are expanded innermost first; the Inline functions are then
  removed, called or not.

Where it differs from PyPTO: PyPTO names the copies `<name>_inline<k>` with one counter for the whole
process and leaves a call inside a larger expression for its verifier to report; ptoc's names depend
only on the program, and it reports such a call itself (PTOC-E0611).
"""

from __future__ import annotations

from dataclasses import replace

from ptoc.context import CompileContext
from ptoc.diagnostics import CompileError, Diagnostic
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
    Program,
    ReturnStmt,
    ScopeStmt,
    Stmt,
    Var,
    WhileStmt,
    YieldStmt,
)
from ptoc.ir.visitor import Mutator, walk
from ptoc.passes.manager import Pass


def _defined(body: tuple[Stmt, ...]) -> list[str]:
    """Every name a block binds (assignments, loop variables, iter_args, yields, scope names), in order."""
    out: list[str] = []
    for st in body:
        for n in walk(st):
            if isinstance(n, AssignStmt):
                out.append(n.target.name)
            elif isinstance(n, YieldStmt):
                out.extend(t.name for t in n.targets)
            elif isinstance(n, ForStmt):
                out.append(n.var.name)
                out.extend(a.name for a in n.iter_args)
            elif isinstance(n, WhileStmt):
                out.extend(a.name for a in n.iter_args)
            elif isinstance(n, ScopeStmt) and n.var is not None:
                out.append(n.var.name)
    return list(dict.fromkeys(out))


def _names(f: Function) -> set[str]:
    return {p.name for p in f.params} | {n.name for n in walk(f) if isinstance(n, Var)}


class _Substitute(Mutator):
    """Names -> names (also where they are bound) and names -> expressions (where they are read)."""

    def __init__(self, names: dict[str, str], exprs: dict[str, Expr]):
        self.names = names
        self.exprs = exprs

    def pre_Var(self, v: Var):
        if v.name in self.exprs:
            return self.exprs[v.name]
        new = self.names.get(v.name)
        return None if new is None else Var(new, span=v.span)


class _TupleReads(Mutator):
    """`t[i]` of a name bound to the values of a multi-result Inline call -> the i-th value."""

    def __init__(self, values: dict[str, tuple[Expr, ...]]):
        self.values = values

    def mutate_GetItem(self, g: GetItem):
        if isinstance(g.value, Var) and isinstance(g.index, ConstInt) and g.value.name in self.values:
            vals = self.values[g.value.name]
            if 0 <= g.index.value < len(vals):
                return vals[g.index.value]
        return g


def _error(code: str, message: str, span, hint: str) -> CompileError:
    return CompileError([Diagnostic(code, message, span, hint=hint)])


class _Expander:
    """Splices the (already expanded) Inline functions into the blocks of one function."""

    def __init__(self, inline: dict[str, Function], taken: set[str]):
        self.inline = inline
        self.taken = taken
        self.tuples: dict[str, tuple[Expr, ...]] = {}

    def callee(self, e: Expr | None) -> Function | None:
        if isinstance(e, Call) and e.kind == "func":
            return self.inline.get(e.op)
        return None

    def block(self, body: tuple[Stmt, ...]) -> tuple[Stmt, ...]:
        out: list[Stmt] = []
        for st in body:
            if isinstance(st, AssignStmt) and self.callee(st.value) is not None:
                out.extend(self.assign(st))
            elif isinstance(st, EvalStmt) and self.callee(st.expr) is not None:
                out.extend(self.copy(self.callee(st.expr), st.expr)[0])
            elif isinstance(st, ReturnStmt) and len(st.values) == 1 and self.callee(st.values[0]) is not None:
                stmts, values = self.copy(self.callee(st.values[0]), st.values[0])
                out.extend(stmts)
                out.append(ReturnStmt(values, span=st.span))
            else:
                out.append(self.nested(st))
        return tuple(out)

    def nested(self, st: Stmt) -> Stmt:
        if isinstance(st, (ForStmt, WhileStmt, ScopeStmt)):
            new = self.block(st.body)
            return st if new == st.body else replace(st, body=new)
        if isinstance(st, IfStmt):
            t, e = self.block(st.then_body), self.block(st.else_body)
            return st if (t, e) == (st.then_body, st.else_body) else replace(st, then_body=t, else_body=e)
        return st

    def assign(self, st: AssignStmt) -> list[Stmt]:
        f = self.callee(st.value)
        stmts, values = self.copy(f, st.value)
        if len(values) != 1 or f.returns_tuple:
            self.tuples[st.target.name] = values
            return stmts
        v = values[0]
        if not (isinstance(v, Var) and v.name == st.target.name):
            stmts.append(AssignStmt(st.target, v, st.annotation, span=st.span))
        return stmts

    def copy(self, f: Function, call: Call) -> tuple[list[Stmt], tuple[Expr, ...]]:
        """The statements of `f`'s body for this call (its trailing return left out) and the values it returns."""
        if len(call.args) != len(f.params) or call.kwargs:
            raise _error("PTOC-E0611", f"call to Inline function {f.name} with {len(call.args)} positional "
                         f"argument(s); it has {len(f.params)} parameter(s)", call.span,
                         hint="pass every parameter of an Inline function positionally")
        body = f.body
        ret = body[-1] if body and isinstance(body[-1], ReturnStmt) else None
        if ret is not None:
            body = body[:-1]
        early = next((n for st in body for n in walk(st) if isinstance(n, ReturnStmt)), None)
        if early is not None:
            raise _error("PTOC-E0612", f"Inline function {f.name} returns before its last statement",
                         early.span, hint="compute the result in both branches and return once, at the end")
        assigned = set(_defined(body))
        names: dict[str, str] = {}
        exprs: dict[str, Expr] = {}
        prologue: list[Stmt] = []
        for prm, arg in zip(f.params, call.args):
            if prm.name not in assigned:
                exprs[prm.name] = arg
            elif isinstance(arg, Var):
                names[prm.name] = arg.name
            else:
                names[prm.name] = fresh_name(f"{prm.name}_inline", self.taken)
                prologue.append(AssignStmt(Var(names[prm.name], span=call.span), arg, prm.type, span=call.span))
        for n in _defined(body):
            if n not in names and f.param(n) is None:
                names[n] = fresh_name(f"{n}_inline", self.taken)
        sub = _Substitute(names, exprs)
        stmts = prologue + [sub.mutate(st) for st in body]
        values = tuple(sub.mutate(v) for v in ret.values) if ret is not None else ()
        return stmts, values


def _order(inline: dict[str, Function]) -> list[str]:
    """The Inline functions, each after the Inline functions it calls; PTOC-E0610 on a cycle."""
    done: list[str] = []
    state: dict[str, str] = {}

    def calls(f: Function) -> list[str]:
        return list(dict.fromkeys(n.op for n in walk(f) if isinstance(n, Call) and n.kind == "func"
                                  and n.op in inline))

    def visit(name: str, path: list[str]) -> None:
        state[name] = "open"
        for c in calls(inline[name]):
            if state.get(c) == "open":
                cycle = " -> ".join(path[path.index(c):] + [c]) if c in path else f"{name} -> {c}"
                raise _error("PTOC-E0610", f"Inline functions call each other in a cycle: {cycle}",
                             inline[name].span, hint="an Inline function is copied into its callers, so it "
                             "cannot call itself; make one of them an ordinary function")
            if c not in state:
                visit(c, path + [c])
        state[name] = "done"
        done.append(name)

    for name in inline:
        if name not in state:
            visit(name, [name])
    return done


def _expand(f: Function, inline: dict[str, Function]) -> Function:
    e = _Expander(inline, _names(f))
    body = e.block(f.body)
    if e.tuples:
        body = _TupleReads(e.tuples).mutate(body)
    for n in walk(Function(f.name, (), (), body)):
        if isinstance(n, Call) and n.kind == "func" and n.op in inline:
            raise _error("PTOC-E0611", f"call to Inline function {n.op} inside an expression", n.span,
                         hint="assign the call's result to a name first: `t = self.f(...)`")
    return f if body == f.body else replace(f, body=body)


class InlineFunctions(Pass):
    name = "InlineFunctions"
    stage = "ssa"
    summary = "copy the body of every Inline function to its call sites and drop the Inline functions"
    requires = frozenset()
    produces = frozenset()
    accepts_non_ssa = True

    def run(self, program: Program, ctx: CompileContext) -> Program:
        inline = {f.name: f for f in program.functions if f.func_type == "Inline"}
        if not inline:
            return program
        for name in _order(inline):
            inline[name] = _expand(inline[name], inline)
        funcs = tuple(_expand(f, inline) for f in program.functions if f.func_type != "Inline")
        return replace(program, functions=funcs)
