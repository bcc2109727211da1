"""CtrlFlowTransform: lower `break` and `continue` to structured control flow, as PyPTO's pass does.

Purpose
-------
Kernels run loops whose every iteration reaches the end of the body: the later passes, the reference
interpreter and the code generator know only structured `for`, `while` and `if`. Users write early
exits; this pass, the first of the pipeline (before ConvertToSSA, on the program as written), turns
them into that form:

- `continue`: the rest of the body after an `if` whose branch continues moves into the other paths.
  `if c: continue` followed by `S` becomes `if c: pass else: S`; statements after a `continue` in
  its own branch are dropped (they never run). An unconditional `continue` drops the rest of the body.
- `break`: a boolean flag (`brk`, a fresh name) starts `False` before the loop, the branch that
  breaks sets it `True`, and the rest of the body moves into the other paths as for `continue`; each
  `if` that held a break ends both branches with an empty `pl.yield_()` (PyPTO's printed form). The
  loop stops when the flag is set: a `while cond:` gets `while cond and not brk:`; a
  `for i in pl.range(start, stop, step)` becomes `i = start`, `while i < stop and not brk:` (`>` for a
  negative constant step) with `if not brk: i = i + step` at the end of its body. `continue` is lowered
  first, then `break`; inner loops before outer ones (each `break`/`continue` belongs to its innermost
  loop).

Orchestration functions are left alone (their loops run on the host, where early exits are native),
like PyPTO. ConvertToSSA then carries the flag and the loop values through the resulting `while`.

Before::

    for i in pl.range(n):
        if i > 5:
            break
        x = pl.add(x, 1.0)

After::

    i: pl.Scalar[pl.INDEX] = 0
    brk: pl.Scalar[pl.BOOL] = False
    while i < n and not brk:
        if i > 5:
            brk: pl.Scalar[pl.BOOL] = True
            pl.yield_()
        else:
            x = pl.add(x, 1.0)
            pl.yield_()
        if not brk:
            i = i + 1

Not supported (PTOC-E0291, with a hint): `break` or `continue` in a loop that carries values with
explicit `pl.yield_` (write the loop without iter_args: ConvertToSSA carries what it updates), in a
`with` scope inside the loop, a `break` in a loop kind other than `pl.range` (parallel, unrolled and
pipelined loops run every iteration), and a `break` in a `pl.range` whose step is not a constant.
"""

from __future__ import annotations

from dataclasses import replace

from ptoc.context import CompileContext
from ptoc.diagnostics import CompileError, Diagnostic
from ptoc.ir import dtypes
from ptoc.ir.names import fresh_name
from ptoc.ir.nodes import (
    AssignStmt,
    BinOp,
    BreakStmt,
    ConstBool,
    ConstInt,
    ContinueStmt,
    ForStmt,
    Function,
    IfStmt,
    PassStmt,
    Program,
    ScalarType,
    ScopeStmt,
    Stmt,
    UnaryOp,
    Var,
    WhileStmt,
    YieldStmt,
)
from ptoc.ir.visitor import walk
from ptoc.passes.manager import Pass

_EXIT = (BreakStmt, ContinueStmt)


def _holds(body: tuple[Stmt, ...], cls: type) -> bool:
    """`body` has a `cls` statement that belongs to the loop around it (not to a loop inside it)."""
    for s in body:
        if isinstance(s, cls):
            return True
        if isinstance(s, IfStmt) and (_holds(s.then_body, cls) or _holds(s.else_body, cls)):
            return True
        if isinstance(s, ScopeStmt) and _holds(s.body, cls):
            return True
    return False


def unstructured(program: Program) -> list[str]:
    """The `break`/`continue` statements left in functions that must be structured (not Orchestration)."""
    bad = []
    for f in program.functions:
        if f.func_type == "Orchestration":
            continue
        for n in walk(f):
            if isinstance(n, _EXIT):
                word = "break" if isinstance(n, BreakStmt) else "continue"
                bad.append(f"{f.name}: `{word}` at line {n.span.line}")
    return bad


def _fail(msg: str, at: Stmt, hint: str) -> CompileError:
    return CompileError([Diagnostic("PTOC-E0291", msg, at.span, hint)])


class _Lowering:
    def __init__(self, f: Function, program: Program):
        self.taken = {d.name for d in program.dynamic_dims} | {p.name for p in f.params}
        for n in walk(f):
            if n.__class__ is Var:
                self.taken.add(n.name)

    # ---------------------------------------------------------------- bodies
    def block(self, body: tuple[Stmt, ...]) -> tuple[Stmt, ...]:
        out: list[Stmt] = []
        for s in body:
            if isinstance(s, (ForStmt, WhileStmt)):
                out.extend(self.loop(s))
            elif isinstance(s, IfStmt):
                out.append(replace(s, then_body=self.block(s.then_body), else_body=self.block(s.else_body)))
            elif isinstance(s, ScopeStmt):
                out.append(replace(s, body=self.block(s.body)))
            else:
                out.append(s)
        return tuple(out)

    def loop(self, s: ForStmt | WhileStmt) -> list[Stmt]:
        body = self.block(s.body)  # inner loops first: their exits are their own
        has_continue, has_break = _holds(body, ContinueStmt), _holds(body, BreakStmt)
        if not (has_continue or has_break):
            return [s if body is s.body else replace(s, body=body)]
        word = "break" if has_break else "continue"
        if s.iter_args:
            raise _fail(f"`{word}` in a loop that carries values through pl.yield_ is not supported", s,
                        "write the loop without iter_args and update the names directly; ConvertToSSA "
                        "makes them loop-carried")
        if any(isinstance(x, ScopeStmt) and _holds(x.body, _EXIT) for x in walk_ifs(body)):
            raise _fail(f"`{word}` inside a `with` scope is not supported", s,
                        "move the exit out of the scope")
        if has_continue:
            body = self.cut(body, ContinueStmt, None)
        if not has_break:
            return [replace(s, body=body)]
        if isinstance(s, ForStmt) and s.kind != "range":
            raise _fail(f"`break` in a pl.{s.kind} loop is not supported: it runs every iteration", s,
                        "use pl.range for a loop that can stop early")
        flag = Var(fresh_name("brk", self.taken), span=s.span)
        body = self.cut(body, BreakStmt, flag)
        bool_t = ScalarType(dtypes.BOOL)
        init = AssignStmt(flag, ConstBool(False, span=s.span), bool_t, span=s.span)
        not_flag = UnaryOp("not", flag, span=s.span)
        if isinstance(s, WhileStmt):
            return [init, replace(s, cond=BinOp("and", s.cond, not_flag, span=s.span), body=body)]
        step = s.step
        sign = step.value if isinstance(step, ConstInt) else None
        if isinstance(step, UnaryOp) and step.op == "-" and isinstance(step.operand, ConstInt):
            sign = -step.operand.value
        if not sign:
            raise _fail("`break` in a pl.range whose step is not a non-zero constant is not supported", s,
                        "give the loop a constant step")
        i = s.var
        start = AssignStmt(i, s.start, ScalarType(dtypes.INDEX) if isinstance(s.start, ConstInt) else None,
                           span=s.span)
        cond = BinOp("and", BinOp("<" if sign > 0 else ">", i, s.stop, span=s.span), not_flag, span=s.span)
        step_up = IfStmt(not_flag, (AssignStmt(i, BinOp("+", i, step, span=s.span), span=s.span),), (),
                         span=s.span)
        return [start, init, WhileStmt((), (), cond, body + (step_up,), s.kwargs, span=s.span)]

    def cut(self, body: tuple[Stmt, ...], cls: type, flag: Var | None) -> tuple[Stmt, ...]:
        """`body` without its `cls` exits: the statements after an exit move into the paths that do not
        take it. `flag`: for `break`, the flag the exit sets (and the branches end with `pl.yield_()`)."""
        for k, s in enumerate(body):
            if isinstance(s, cls):
                head = body[:k]
                if flag is not None:
                    head += (AssignStmt(flag, ConstBool(True, span=s.span), ScalarType(dtypes.BOOL),
                                        span=s.span),)
                return head
            if isinstance(s, IfStmt) and (_holds(s.then_body, cls) or _holds(s.else_body, cls)):
                rest = body[k + 1:]
                then_body = self.cut(s.then_body + rest, cls, flag)
                else_body = self.cut(s.else_body + rest, cls, flag)
                if flag is not None:
                    then_body += (YieldStmt((), (), span=s.span),)
                    else_body += (YieldStmt((), (), span=s.span),)
                elif not then_body:
                    then_body = (PassStmt(span=s.span),)
                return body[:k] + (replace(s, then_body=then_body, else_body=else_body),)
        return body


def walk_ifs(body: tuple[Stmt, ...]):
    """The statements of `body` and of the if branches inside it (not inside nested loops)."""
    for s in body:
        yield s
        if isinstance(s, IfStmt):
            yield from walk_ifs(s.then_body)
            yield from walk_ifs(s.else_body)


class CtrlFlowTransform(Pass):
    name = "CtrlFlowTransform"
    stage = "ssa"
    summary = "lower break and continue to structured if/while (a flag for break)"
    produces = frozenset({"structured"})
    accepts_non_ssa = True

    def run(self, program: Program, ctx: CompileContext) -> Program:
        funcs = []
        for f in program.functions:
            if f.func_type == "Orchestration" or not any(isinstance(n, _EXIT) for n in walk(f)):
                funcs.append(f)
                continue
            funcs.append(replace(f, body=_Lowering(f, program).block(f.body)))
        if all(a is b for a, b in zip(funcs, program.functions)):
            return program
        return replace(program, functions=tuple(funcs))
