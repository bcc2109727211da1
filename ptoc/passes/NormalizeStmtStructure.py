"""NormalizeStmtStructure: every statement body in its one canonical form, as PyPTO's pass asks.

PyPTO's pass flattens nested statement sequences (`SeqStmts` inside `SeqStmts`) and unwraps a sequence
of one statement, so that a body is one flat list whose `pl.yield_` (if any) comes last. ptoc's bodies
are flat tuples by construction, so the part left to do here is the statement that stands for "no
statement": a `pass` next to other statements is dropped, and a body left empty by an earlier pass
(an unrolled loop without iterations, a folded `if`) gets a single `pass`, which is how it prints and
parses. The pass produces the `normalized_stmts` property: no body is empty, no `pass` shares a body
with another statement, and a `pl.yield_` is the last statement of its body.

Before::

    for i in pl.range(4):
        pass
        x = pl.add(x, 1.0)

After::

    for i in pl.range(4):
        x = pl.add(x, 1.0)

Deliberate differences from PyPTO: none in effect (ptoc has no nested sequences to flatten).
"""

from __future__ import annotations

import dataclasses

from ptoc.context import CompileContext
from ptoc.ir.nodes import ForStmt, Function, IfStmt, PassStmt, Program, ScopeStmt, Stmt, WhileStmt, YieldStmt
from ptoc.passes.manager import Pass, property_check

_BODIES = {ForStmt: ("body",), WhileStmt: ("body",), ScopeStmt: ("body",), IfStmt: ("then_body", "else_body")}


def _stmt(s: Stmt) -> Stmt:
    fields = _BODIES.get(s.__class__)
    if not fields:
        return s
    changes = {}
    for name in fields:
        old = getattr(s, name)
        new = _block(old, s.span, may_be_empty=name == "else_body")
        if new is not old:
            changes[name] = new
    return dataclasses.replace(s, **changes) if changes else s


def _block(body: tuple[Stmt, ...], span, may_be_empty: bool = False) -> tuple[Stmt, ...]:
    """`body` normalized; an `else` body may stay empty (no else branch)."""
    new = tuple(_stmt(s) for s in body)
    kept = tuple(s for s in new if s.__class__ is not PassStmt)
    if not kept and not may_be_empty:
        kept = (new[0],) if len(new) == 1 else (PassStmt(span=span),)
    if not kept and may_be_empty:
        kept = ()
    if len(kept) == len(body) and all(a is b for a, b in zip(kept, body)):
        return body
    return kept


def _normalize(f: Function) -> Function:
    body = _block(f.body, f.span)
    return f if body is f.body else dataclasses.replace(f, body=body)


def _problems(body: tuple[Stmt, ...], where: str, optional: bool = False) -> list[str]:
    out = []
    if not body and not optional:
        out.append(f"{where}: an empty body")
    if len(body) > 1 and any(s.__class__ is PassStmt for s in body):
        out.append(f"{where}: `pass` next to other statements (line {body[0].span.line})")
    for s in body[:-1]:
        if isinstance(s, YieldStmt):
            out.append(f"{where}: pl.yield_ before the end of its body (line {s.span.line})")
    for s in body:
        for field in _BODIES.get(s.__class__, ()):
            out += _problems(getattr(s, field), where, optional=field == "else_body")
    return out


@property_check("normalized_stmts")
def normalized_violations(program: Program, ctx: CompileContext, cache=None) -> list[str]:
    """Every body is non-empty, holds `pass` only alone, and ends at its `pl.yield_`."""
    return [p for f in program.functions for p in _problems(f.body, f.name)]


class NormalizeStmtStructure(Pass):
    name = "NormalizeStmtStructure"
    stage = "ssa"
    summary = "bodies in canonical form: no `pass` beside other statements, no empty body"
    produces = frozenset({"normalized_stmts"})
    accepts_non_ssa = True  # as PyPTO's: it requires nothing

    def run(self, program: Program, ctx: CompileContext) -> Program:
        funcs = tuple(_normalize(f) for f in program.functions)
        if all(a is b for a, b in zip(funcs, program.functions)):
            return program
        return dataclasses.replace(program, functions=funcs)
