"""UnrollLoops: expand every `pl.unroll` loop into copies of its body, as PyPTO's pass does.

`for i in pl.unroll(start, stop, step):` with constant bounds becomes one copy of the body per
iteration, in iteration order, each with the loop variable replaced by that iteration's value (an
INDEX constant). A loop without iterations disappears. Nested `pl.unroll` loops expand too (inner copies
inside each outer copy); other loop kinds are left alone. The pass runs first among ptoc's passes, on
the program as written: a name the body shares with the code around the loop (`x = pl.add(x, 1.0)`)
is reassigned by each copy and ConvertToSSA later gives every copy's value its own name; a name bound
only inside the body gets a fresh name in each copy after the first (`r0`, `r0_1`, ...), so a program
already in single assignment stays in it, unless the name is read after the loop: then every copy
assigns it, and the read after the loop sees the last copy's value (ConvertToSSA names the copies apart).

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
from collections import Counter

from ptoc.context import CompileContext
from ptoc.diagnostics import CompileError, Diagnostic
from ptoc.ir import dtypes
from ptoc.ir.names import fresh_name
from ptoc.ir.nodes import (
    AssignStmt,
    BreakStmt,
    ConstInt,
    ContinueStmt,
    Expr,
    ForStmt,
    Function,
    IfStmt,
    PassStmt,
    Program,
    ScopeStmt,
    Stmt,
    UnaryOp,
    Var,
    WhileStmt,
    YieldStmt,
)
from ptoc.ir.substitute import substitute
from ptoc.ir.visitor import Mutator, rebuild_bodies, walk
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


def _definitions(node) -> Counter[str]:
    """How often each name is bound under `node` (assignments, yields, loop variables, iter_args)."""
    count: Counter[str] = Counter()
    for n in (x for root in (node if isinstance(node, tuple) else (node,)) for x in walk(root)):
        if isinstance(n, AssignStmt):
            count[n.target.name] += 1
        elif isinstance(n, YieldStmt):
            count.update(t.name for t in n.targets)
        elif isinstance(n, ForStmt):
            count.update([n.var.name, *(a.name for a in n.iter_args)])
        elif isinstance(n, WhileStmt):
            count.update(a.name for a in n.iter_args)
        elif isinstance(n, ScopeStmt) and n.var is not None:
            count[n.var.name] += 1
    return count


class _Rename(Mutator):
    def __init__(self, mapping: dict[str, str]):
        self.mapping = mapping

    def pre_Var(self, v: Var):
        new = self.mapping.get(v.name)
        return v if new is None else dataclasses.replace(v, name=new)


class _Unroller:
    """One function's unrolling. Names bound only inside an unrolled body are local to each copy: the
    copies after the first get fresh names for them (`r0`, `r0_1`, ...), so a program in single
    assignment stays so. A name the body assigns that is also bound outside it (a program as written,
    `x = pl.add(x, 1.0)`) keeps its name in every copy: each copy updates it, as the loop did."""

    def __init__(self, f: Function):
        self.defs = _definitions(f)
        self.defs.update(p.name for p in f.params)
        self.occurrences = Counter(n.name for n in walk(f) if n.__class__ is Var)
        self.taken = set(self.occurrences) | {p.name for p in f.params}

    def expand(self, loop: ForStmt, original: ForStmt) -> list[Stmt]:
        """`loop` (its inner unroll loops already expanded) as copies; `original` as it was in the
        function, whose bindings decide which names are local to it."""
        inner = _definitions(original.body)
        # bound only inside the loop as written, or made by expanding an unroll loop nested in it
        local = sorted(n for n in _definitions(loop.body) if n not in self.defs or self.defs[n] == inner[n])
        # a local name read after the loop keeps its name in every copy: the read after it sees the last
        # copy's value (ConvertToSSA then names each copy's value apart), as the loop as written meant
        inside = Counter(n.name for n in walk(original) if n.__class__ is Var)
        local = [n for n in local if self.occurrences[n] <= inside[n]]
        out: list[Stmt] = []
        for k, i in enumerate(iterations(loop)):
            body = substitute(loop.body, {loop.var.name: ConstInt(i, dtypes.INDEX, span=loop.var.span)})
            if k and local:
                body = _Rename({n: fresh_name(n, self.taken) for n in local}).mutate(body)
            out.extend(body)
        return out

    def block(self, body: tuple[Stmt, ...]) -> tuple[Stmt, ...]:
        out: list[Stmt] = []
        changed = False
        for s in body:
            new = rebuild_bodies(s, self.block)
            if isinstance(new, ForStmt) and new.kind == "unroll" and not _own_exit(new.body):
                out.extend(self.expand(new, s))
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

    def applies(self, program: Program, ctx: CompileContext) -> bool:
        return any("unroll" in self.index(f).for_kinds() for f in program.functions)

    def run(self, program: Program, ctx: CompileContext) -> Program:
        funcs = []
        for f in program.functions:
            if "unroll" not in self.index(f).for_kinds():  # no unroll loop: the function stays as it is
                funcs.append(f)
                continue
            body = _Unroller(f).block(f.body)
            funcs.append(f if body is f.body else dataclasses.replace(f, body=body))
        if all(a is b for a, b in zip(funcs, program.functions)):
            return program
        return dataclasses.replace(program, functions=tuple(funcs))
