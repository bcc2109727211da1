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

A loop that already carries values (`for i, (x,) in pl.range(..., init_values=...)` ending with
`x_out = pl.yield_(v)`) keeps them: each `if` that held an exit yields fresh `<x>_phi` values, the
path that exits yields the value the body would have yielded when that name is already defined on
the path, else the iter_arg's current value (PyPTO's rule), and the loop's final yield passes the
phis on; with `break` the loop becomes `for (x,) in pl.while_(...)` with the same carried values.

Deliberate differences from PyPTO. PyPTO decides whether a value is "defined on the path" by looking
only at plain assignments in the statements before the exit, so a value produced by a loop or an if
(its results) counts as undefined and the path yields the stale iter_arg instead: its Expected output
then throws away the work of an inner loop (`x_outer_phi = pl.yield_(x_outer)` after the inner loop
that computed `x_inner`) or of an if, and in a few cases (`if c: continue` nested under other ifs, or
after an if that assigns) yields the iteration's starting value on the path that does not exit, so the
loop computes nothing. ptoc counts loop and if results as defined and moves the statements after an if
that holds an exit into its branches, so the program computes what Python computes; its output for
those cases (ten of PyPTO's CtrlFlowTransform tests) differs from PyPTO's on purpose.

Not supported (PTOC-E0291, with a hint): an exit inside a `with` scope or inside an `if` that itself
yields values, a `break` in a loop kind other than `pl.range` (parallel, unrolled and pipelined loops
run every iteration), and a `break` in a `pl.range` whose step is not a constant.
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
        _check_exits(s, body, has_break)
        carried = s.iter_args
        known = frozenset(a.name for a in carried) | ({s.var.name} if isinstance(s, ForStmt) else set())
        if has_continue:
            body = self.lower_exits(body, ContinueStmt, None, carried, known)
        if not has_break:
            return [replace(s, body=body)]
        flag = Var(fresh_name("brk", self.taken), span=s.span)
        body = self.lower_exits(body, BreakStmt, flag, carried, known)
        bool_t = ScalarType(dtypes.BOOL)
        init = AssignStmt(flag, ConstBool(False, span=s.span), bool_t, span=s.span)
        not_flag = UnaryOp("not", flag, span=s.span)
        if isinstance(s, WhileStmt):
            return [init, replace(s, cond=BinOp("and", s.cond, not_flag, span=s.span), body=body)]
        return _range_to_while(s, body, init, not_flag)

    def lower_exits(self, body: tuple[Stmt, ...], cls: type, flag: Var | None, carried: tuple[Var, ...],
                    known: frozenset[str]) -> tuple[Stmt, ...]:
        """`body` of a loop without its `cls` exits. With `carried` iter_args the body ends with their
        pl.yield_, and each if that held an exit yields, per carried value, what the path produces."""
        if not carried:
            return self.cut(body, cls, flag, None)[0]
        y = body[-1]
        stmts, values = self.cut(body[:-1], cls, flag, (carried, y.values, known))
        return stmts + (replace(y, values=tuple(values)),)

    def cut(self, body: tuple[Stmt, ...], cls: type, flag: Var | None, ssa) -> tuple[tuple[Stmt, ...], list | None]:
        """`body` without its `cls` exits: the statements after an exit move into the paths that do not
        take it. `flag`: for `break`, the flag the exit sets. `ssa`: None for a loop without iter_args
        (each if that held a break ends its branches with an empty `pl.yield_()`); else (the carried
        iter_args, the values the body yields at its end, the names defined so far[, the values an exit
        falls back to, when not the carried ones]): each such if yields one fresh `<iter_arg>_phi` per
        carried value, and a path that exits yields, per value, the yielded name when it is already
        defined on that path, else the iter_arg (PyPTO's rule).
        Returns the statements and the values the sequence ends with (None without `ssa`)."""
        defined = set(ssa[2]) if ssa is not None else set()
        for k, s in enumerate(body):
            if isinstance(s, cls):
                return _at_exit(body[:k], s, flag, ssa, defined)
            if isinstance(s, IfStmt) and (_holds(s.then_body, cls) or _holds(s.else_body, cls)):
                if s.results:
                    return self.cut_yielding_if(body, k, s, cls, flag, ssa, defined)
                return self.cut_if(body, k, s, cls, flag, ssa, defined)
            defined.update(_defines(s))
        return body, (list(ssa[1]) if ssa is not None else None)

    def cut_yielding_if(self, body, k: int, s: IfStmt, cls: type, flag: Var | None, ssa, defined: set):
        """An if that yields values (e.g. one a lowered `continue` made): each branch ends with its yield;
        the exit stays inside its branch, whose yield becomes the phi of the path taken."""
        if body[k + 1:] or ssa is None:
            raise _fail("`break` inside an if that yields values, followed by more statements, is "
                        "not supported", s, "move the statements after the if into its branches")
        branches = []
        for b in (s.then_body, s.else_body):
            y = b[-1]
            # a path that exits before the branch's value exists yields the loop's iter_arg at that
            # position (the value the iteration started with), as PyPTO does
            fallback = tuple(ssa[0][j] if j < len(ssa[0]) else v for j, v in enumerate(y.values))
            sub = (y.values, y.values, frozenset(defined), fallback)
            stmts, vals = self.cut(b[:-1], cls, flag, sub) if _holds(b, cls) else (b[:-1], list(y.values))
            branches.append(stmts + (replace(y, values=tuple(vals)),))
        return body[:k] + (replace(s, then_body=branches[0], else_body=branches[1]),), list(ssa[1])

    def cut_if(self, body, k: int, s: IfStmt, cls: type, flag: Var | None, ssa, defined: set):
        """An if holding an exit: the statements after it move into both branches."""
        rest = body[k + 1:]
        sub = (ssa[0], ssa[1], frozenset(defined)) + tuple(ssa[3:]) if ssa is not None else None
        then_body, then_vals = self.cut(s.then_body + rest, cls, flag, sub)
        else_body, else_vals = self.cut(s.else_body + rest, cls, flag, sub)
        if ssa is None:
            if flag is not None:
                then_body += (YieldStmt((), (), span=s.span),)
                else_body += (YieldStmt((), (), span=s.span),)
            elif not then_body:
                then_body = (PassStmt(span=s.span),)
            return body[:k] + (replace(s, then_body=then_body, else_body=else_body),), None
        phis = tuple(Var(fresh_name(f"{a.name}_phi" if isinstance(a, Var) else "phi", self.taken),
                         span=s.span) for a in ssa[0])
        then_body = _drop_pass(then_body) + (YieldStmt(phis, tuple(then_vals), span=s.span),)
        else_body = _drop_pass(else_body) + (YieldStmt(phis, tuple(else_vals), span=s.span),)
        return body[:k] + (replace(s, then_body=then_body, else_body=else_body),), list(phis)


def _at_exit(head: tuple[Stmt, ...], s: Stmt, flag: Var | None, ssa, defined: set):
    """The statements before an exit (plus the flag it sets) and, with `ssa`, the values its path yields."""
    if flag is not None:
        head += (AssignStmt(flag, ConstBool(True, span=s.span), ScalarType(dtypes.BOOL), span=s.span),)
    if ssa is None:
        return head, None
    out = []
    for v, a in zip(ssa[1], ssa[3] if len(ssa) > 3 else ssa[0]):
        if isinstance(v, Var) and v.name in defined:
            out.append(v)
        elif isinstance(a, Var) and a.name in defined:
            out.append(a)
        else:
            raise _fail(f"`{'break' if flag is not None else 'continue'}` here leaves no value for "
                        "what its if yields", s, "assign the yielded value before the exit")
    return head, out


def _check_exits(s: ForStmt | WhileStmt, body: tuple[Stmt, ...], has_break: bool) -> None:
    """The loops whose exits can be lowered: none inside a scope, no break in a parallel loop, a carried
    loop's body ends with its yield."""
    word = "break" if has_break else "continue"
    if any(isinstance(x, ScopeStmt) and _holds(x.body, _EXIT) for x in walk_ifs(body)):
        raise _fail(f"`{word}` inside a `with` scope is not supported", s, "move the exit out of the scope")
    if has_break and isinstance(s, ForStmt) and s.kind != "range":
        raise _fail(f"`break` in a pl.{s.kind} loop is not supported: it runs every iteration", s,
                    "use pl.range for a loop that can stop early")
    if s.iter_args and not (body and isinstance(body[-1], YieldStmt)):
        raise _fail(f"`{word}` in a loop whose body does not end with pl.yield_", s,
                    "end the body with the pl.yield_ of its loop-carried values")


def _range_to_while(s: ForStmt, body: tuple[Stmt, ...], init: AssignStmt, not_flag: UnaryOp) -> list[Stmt]:
    """A pl.range loop with a break as a while loop over its counter that also stops on the flag."""
    carried = s.iter_args
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
    if carried:  # the counter steps before the body's final yield
        body = body[:-1] + (step_up, body[-1])
    else:
        body = body + (step_up,)
    return [start, init, WhileStmt(carried, s.init_values, cond, body, s.kwargs, span=s.span)]


def _drop_pass(body: tuple[Stmt, ...]) -> tuple[Stmt, ...]:
    return tuple(s for s in body if not isinstance(s, PassStmt))


def _defines(s: Stmt) -> list[str]:
    """The names statement `s` binds for the statements after it."""
    if isinstance(s, AssignStmt):
        return [s.target.name]
    if isinstance(s, (ForStmt, WhileStmt, IfStmt)):
        return [v.name for v in s.results]
    if isinstance(s, ScopeStmt):
        return [n for x in s.body for n in _defines(x)]
    return []


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
