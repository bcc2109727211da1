"""UnrollLoops: expand every `pl.unroll` loop into copies of its body, as PyPTO's pass does.

`for i in pl.unroll(start, stop, step):` with constant bounds becomes one copy of the body per
iteration, in iteration order, each with the loop variable replaced by that iteration's value (an
INDEX constant). A loop without iterations disappears. Nested `pl.unroll` loops expand too (inner copies
inside each outer copy); other loop kinds are left alone. The pass runs first among ptoc's passes, on
the program as written, and every copy keeps the names the body binds, as PyPTO's pass does: a
name the body assigns (`x = pl.add(x, 1.0)`, or a name bound only inside the body) is assigned
again by each copy, a read after the loop sees the last copy's value, and ConvertToSSA (which always
runs after this pass) gives every copy's value its own name. The output of a program written in
single assignment is therefore not in it until ConvertToSSA (`invalidates`).

Before::

    for i in pl.unroll(0, 6, 2):
        x = pl.add(x, pl.cast(i, pl.INT32))

After::

    x = pl.add(x, pl.cast(0, pl.INT32))
    x = pl.add(x, pl.cast(2, pl.INT32))
    x = pl.add(x, pl.cast(4, pl.INT32))

Errors (the user's): bounds that are not integer constants (PTOC-E0600), a step of 0 (PTOC-E0601),
more than 1024 iterations (PTOC-E0602, PyPTO's limit), and `init_values` on a `pl.unroll` loop
(PTOC-E0603; PyPTO's parser refuses it).

Deliberate differences from PyPTO: a `pl.unroll` loop whose body holds its own `break` or `continue` is
not expanded (PyPTO would leave the exit in the enclosing loop, where it means something else);
CtrlFlowTransform then reports it (PTOC-E0291), as it did before this pass existed.
"""

from __future__ import annotations

import dataclasses

from ptoc.context import CompileContext
from ptoc.diagnostics import CompileError, Diagnostic
from ptoc.ir import dtypes
from ptoc.ir.nodes import (
    BreakStmt,
    ConstInt,
    ContinueStmt,
    Expr,
    ForStmt,
    IfStmt,
    PassStmt,
    Program,
    ScopeStmt,
    Stmt,
    UnaryOp,
)
from ptoc.ir.substitute import substitute
from ptoc.ir.visitor import rebuild_bodies
from ptoc.passes.manager import Pass

MAX_UNROLL = 1024


def _const(e: Expr) -> int | None:
    if isinstance(e, ConstInt):
        return e.value
    if isinstance(e, UnaryOp) and e.op == "-" and isinstance(e.operand, ConstInt):
        return -e.operand.value
    return None


def _own_exit(body: tuple[Stmt, ...]) -> bool:
    """`body` holds a `break`/`continue` of its own loop (not of a loop nested in it)."""
    for s in body:
        if isinstance(s, (BreakStmt, ContinueStmt)):
            return True
        if isinstance(s, IfStmt) and (_own_exit(s.then_body) or _own_exit(s.else_body)):
            return True
        if isinstance(s, ScopeStmt) and _own_exit(s.body):
            return True
    return False


def _fail(code: str, msg: str, s: Stmt, hint: str) -> CompileError:
    return CompileError([Diagnostic(code, msg, s.span, hint)])


def iterations(s: ForStmt) -> list[int]:
    """The loop variable's values of a `pl.unroll` loop, in order (errors as the module says)."""
    if s.init_values or s.iter_args:
        raise _fail("PTOC-E0603", "a pl.unroll loop cannot carry values (init_values)", s,
                    "use pl.range for a loop that carries values, or assign the names in the body instead")
    bounds = [_const(e) for e in (s.start, s.stop, s.step)]
    if any(b is None for b in bounds):
        raise _fail("PTOC-E0600", "pl.unroll needs integer constants for its start, stop and step", s,
                    "write the bounds as integer literals, or use pl.range for a loop with computed bounds")
    start, stop, step = bounds
    if step == 0:
        raise _fail("PTOC-E0601", "pl.unroll step is 0", s, "give a positive or negative step")
    values = range(start, stop, step)
    if len(values) > MAX_UNROLL:
        raise _fail("PTOC-E0602", f"pl.unroll loop has {len(values)} iterations, more than the {MAX_UNROLL} "
                    "that can be unrolled", s, "reduce the range or use pl.range")
    return list(values)


class _Unroller:
    """One function's unrolling. Every copy keeps the names the body binds, as PyPTO's pass does (it
    clones the body keeping its variables): the copies assign the same names one after another and
    ConvertToSSA, which always runs after this pass, names each copy's values apart. A read after the
    loop sees the last copy's value, as it saw the last iteration's."""

    def expand(self, loop: ForStmt) -> list[Stmt]:
        """`loop` (its inner unroll loops already expanded) as copies."""
        out: list[Stmt] = []
        for i in iterations(loop):
            out.extend(substitute(loop.body, {loop.var.name: ConstInt(i, dtypes.INDEX, span=loop.var.span)}))
        return out

    def block(self, body: tuple[Stmt, ...]) -> tuple[Stmt, ...]:
        out: list[Stmt] = []
        changed = False
        for s in body:
            new = rebuild_bodies(s, self.block)
            if isinstance(new, ForStmt) and new.kind == "unroll" and not _own_exit(new.body):
                out.extend(self.expand(new))
                changed = True
                continue
            changed |= new is not s
            out.append(new)
        if not changed:
            return body
        return tuple(out) if out else (PassStmt(span=body[0].span),)


class UnrollLoops(Pass):
    name = "UnrollLoops"
    stage = "ssa"
    summary = "expand pl.unroll loops with constant bounds into one body copy per iteration"
    accepts_non_ssa = True
    invalidates = frozenset({"ssa"})  # the copies assign the same names (until ConvertToSSA)

    def applies(self, program: Program, ctx: CompileContext) -> bool:
        return any("unroll" in self.index(f).for_kinds() for f in program.functions)

    def run(self, program: Program, ctx: CompileContext) -> Program:
        funcs = []
        for f in program.functions:
            if "unroll" not in self.index(f).for_kinds():  # no unroll loop: the function stays as it is
                funcs.append(f)
                continue
            body = _Unroller().block(f.body)
            funcs.append(f if body is f.body else dataclasses.replace(f, body=body))
        if all(a is b for a, b in zip(funcs, program.functions)):
            return program
        return dataclasses.replace(program, functions=tuple(funcs))
