"""MaterializeRuntimeScopes: the runtime's task scopes of an orchestration function, written in the IR.

Purpose
-------
The runtime that runs an orchestration function frees the buffers of the tasks it launched at the end
of each task scope. An orchestration function has one scope around its whole body and one around the
body of every `for` loop and every branch of every `if`, unless the function places its scopes itself
(`@pl.function(..., auto_scope=False)`). This pass writes those scopes as `with pl.scope():` blocks, so
the dump shows what the runtime does, and marks the function `auto_scope=False`: its scopes are now all
written (a second run changes nothing).

Before::

    @pl.function(type=pl.FunctionType.Orchestration)
    def orch(self, a: A, out: pl.Out[A]) -> A:
        for i in pl.range(4):
            out = self.kernel(a, out)
        return out

After::

    @pl.function(type=pl.FunctionType.Orchestration, auto_scope=False)
    def orch(self, a: A, out: pl.Out[A]) -> A:
        with pl.scope():
            for i in pl.range(4):
                with pl.scope():
                    out = self.kernel(a, out)
            return out

Rules
-----
- Only Orchestration functions, and only those not marked `auto_scope=False`; every other function is
  returned as it is.
- The function body is wrapped in one scope (unless it is one automatic scope already). Each `for`
  loop body and each `if` branch is wrapped too, unless it is one already; `while` bodies are not.
- Inside a manual scope (`with pl.manual_scope():`, `with pl.scope(mode=pl.ScopeMode.MANUAL):`) no
  scope is added at any depth: the runtime allows no automatic scope within a manual one.
- A loop body or branch ending in `pl.yield_` keeps the yield after its scope (ptoc's one spelling of a
  body whose last scope ends in the yield: the front end reads PyPTO's yield-inside-the-scope that
  way); a body that is only the yield gets no scope.

Where it differs from PyPTO: PyPTO also turns a loop whose calls a dependency analysis has marked as
candidates (`__compiler_auto_manual_scope_candidate`) into a manual scope; ptoc has no pass that marks
them, so every added scope is automatic.
"""

from __future__ import annotations

from dataclasses import replace

from ptoc.context import CompileContext
from ptoc.ir.nodes import (
    ConstBool,
    EnumLit,
    ForStmt,
    Function,
    IfStmt,
    Program,
    ScopeStmt,
    Stmt,
    WhileStmt,
    YieldStmt,
)
from ptoc.passes.manager import Pass


def _auto_scope(f: Function) -> bool:
    """The function leaves its scopes to the compiler (no `auto_scope=False`)."""
    v = dict(f.decorator_kwargs).get("auto_scope")
    return not (isinstance(v, ConstBool) and not v.value)


def is_manual(s: Stmt) -> bool:
    if not isinstance(s, ScopeStmt):
        return False
    return s.kind == "manual_scope" or (
        s.kind == "scope" and dict(s.kwargs).get("mode") == EnumLit("ScopeMode", "MANUAL"))


def is_auto(s: Stmt) -> bool:
    if not isinstance(s, ScopeStmt) or s.args or s.var is not None:
        return False
    if s.kind == "auto_scope":
        return not s.kwargs
    mode = dict(s.kwargs).get("mode")
    return s.kind == "scope" and len(s.kwargs) == (mode is not None) and mode in (None, EnumLit("ScopeMode", "AUTO"))


def _wrapped(body: tuple[Stmt, ...]) -> tuple[Stmt, ...]:
    """A loop body or branch in one automatic scope, its trailing yield after the scope."""
    end = len(body) - 1 if body and isinstance(body[-1], YieldStmt) else len(body)
    inner, tail = body[:end], body[end:]
    if not inner or (len(inner) == 1 and is_auto(inner[0])):
        return body
    span = inner[0].span
    return (ScopeStmt("scope", (), inner, span=span), *tail)


def _stmt(s: Stmt, manual: bool) -> Stmt:
    if isinstance(s, ScopeStmt):
        body = _block(s.body, manual or is_manual(s))
        return s if body == s.body else replace(s, body=body)
    if isinstance(s, ForStmt):
        body = _block(s.body, manual)
        if not manual:
            body = _wrapped(body)
        return s if body == s.body else replace(s, body=body)
    if isinstance(s, WhileStmt):
        body = _block(s.body, manual)
        return s if body == s.body else replace(s, body=body)
    if isinstance(s, IfStmt):
        then_b, else_b = _block(s.then_body, manual), _block(s.else_body, manual)
        if not manual:
            then_b, else_b = _wrapped(then_b), _wrapped(else_b)
        return s if (then_b, else_b) == (s.then_body, s.else_body) else replace(s, then_body=then_b,
                                                                                 else_body=else_b)
    return s


def _block(body: tuple[Stmt, ...], manual: bool) -> tuple[Stmt, ...]:
    out = tuple(_stmt(s, manual) for s in body)
    return body if all(a is b for a, b in zip(out, body)) else out


def materialize(f: Function) -> Function:
    body = _block(f.body, False)
    if body and not (len(body) == 1 and is_auto(body[0])):
        body = (ScopeStmt("scope", (), body, span=body[0].span),)
    kw = tuple((k, v) for k, v in f.decorator_kwargs if k != "auto_scope") + (("auto_scope", ConstBool(False)),)
    return replace(f, body=body, decorator_kwargs=kw)


class MaterializeRuntimeScopes(Pass):
    name = "MaterializeRuntimeScopes"
    stage = "memory"
    summary = "write the runtime's task scopes of orchestration functions as `with pl.scope():` blocks"
    requires = frozenset()
    produces = frozenset()
    # it wraps statements and reads no values: names assigned again are no concern
    accepts_non_ssa = True

    def run(self, program: Program, ctx: CompileContext) -> Program:
        if not any(f.func_type == "Orchestration" and _auto_scope(f) for f in program.functions):
            return program
        funcs = tuple(materialize(f) if f.func_type == "Orchestration" and _auto_scope(f) else f
                      for f in program.functions)
        return replace(program, functions=funcs)
