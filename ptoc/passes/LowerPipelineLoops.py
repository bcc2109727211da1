"""LowerPipelineLoops: replicate the body of every `pl.pipeline(..., stage=F)` loop F times.

Purpose
-------
`for i in pl.pipeline(start, stop, step, stage=F)` asks for F iterations in flight: the loop becomes a
`pl.range` over chunks of F iterations whose body holds F copies ("clones") of the original body, clone k
computing iteration `i + k * step`; CanonicalizeIOOrder then puts the loads of all
clones before their computes. Each clone defines its own names, so InitMemRef gives each clone's
tiles their own buffers: with stage=2 the loads of one iteration land in other buffers than the
previous iteration's, which is what lets the hardware overlap them (double buffering).

Rules (PyPTO's LowerPipelineLoops; its tests in tests/ut/ir/transforms/test_lower_pipeline_loops.py)
-----
- The chunked loop stays a `pl.pipeline(..., stage=1)`: CanonicalizeIOOrder, which runs next, orders its
  body (loads of all clones first) and turns it into a `pl.range`. A stage=1 loop is left to it as is.
- A loop with no iterations (static trip count 0) becomes a plain `pl.range` with the same bounds and body.
- Static bounds, trip count T = ceil((stop - start) / step): `pl.range(start, start + (T // F) * F *
  step, F * step)` with F clones, when T >= F; the T % F leftover iterations follow the loop as
  clones at the constant indices `start + (T // F * F + k) * step`, with no loop around them.
- Dynamic bounds: `unroll_main_end = start + T // F * (F * step)` (T written `(stop - start) // F * F`
  when step is 1, else `(stop - start + step - 1) // step`), the main loop to it, then
  `unroll_rem = T - T // F * F` (`stop - unroll_main_end` when step is 1) dispatched by a chain of ifs:
  `if unroll_rem == 1: <1 clone> else: if unroll_rem == 2: <2 clones> else: ...` up to F - 1.
- Clone 0 keeps the original names; every name a later clone binds gets a fresh `<base>_<n>`, `<base>`
  being the name without a `_<n>` suffix (one counter per base across the main loop and the tail, in
  program order).
- Loop-carried values thread through the clones: clone k reads what clone k - 1 yielded; the last
  clone's `pl.yield_` ends the main loop. With a leftover, the main loop's results are renamed
  `<r>_main` and seed the tail; a static tail ends with `r = <value>` for each result, the dynamic
  chain's ifs yield `r` (inner levels `<r>_rem<k>`), the innermost else passing `<r>_main` through.
- Nested pipelines are lowered innermost first. Nothing is simplified here: a copy's `if i + 64 == 0:`
  stays as written until the final Simplify (PyPTO's order).
- Pipeline membership: every tile definition by an op in a copy gets `attrs={"pipeline_membership":
  "g:s"}` appended (`;`-separated after a pair it has already), g the replicated region (one per main
  loop and per tail or remainder branch, numbered per function in the order PyPTO builds them: inner
  pipelines first, a main loop before its tail, the remainder chain from its deepest branch up), s the
  copy within it. A matmul's accumulator (a `tile.matmul*` result in Acc) gets none: the cube finishes
  one before it starts the next. MemoryReuse reads the tags (keeping copies' buffers apart) and drops them.
- The step and the stage must be integer constants (PTOC-E0650).

Where ptoc differs from PyPTO: PyPTO's LowerPipelineToSlots (one body over N-slot buffers, only with
PTOAS planning memory) is not in ptoc: it always replicates; PyPTO's double-buffered-accumulator loops
(`pipeline_double_buffer_c`, whose accumulators are tagged too) are not made by ptoc's AutoTileMatmulL0.
A tail copy's constant index arithmetic (`896 // 16`) is folded as it is copied (PyPTO's parser folds
it when its dump is read back).
"""

from __future__ import annotations

import re

from ptoc.analysis.pipeline_stages import with_membership
from ptoc.analysis.simplify import fold_constants
from ptoc.diagnostics import CompileError, Diagnostic
from ptoc.ir.dtypes import INDEX
from ptoc.ir.names import fresh_name
from ptoc.ir.nodes import (
    AssignStmt,
    BinOp,
    Call,
    ConstInt,
    Expr,
    ForStmt,
    IfStmt,
    Program,
    ScalarType,
    ScopeStmt,
    Stmt,
    TileType,
    Var,
    WhileStmt,
    YieldStmt,
)
from ptoc.ir.verifier import definitions, iter_type_exprs
from ptoc.ir.visitor import Mutator, rebuild_bodies, replace, walk
from ptoc.passes.common import has_loop_kind
from ptoc.passes.manager import Pass


class LowerPipelineLoops(Pass):
    name = "LowerPipelineLoops"
    stage = "layout"
    summary = "replicate each pl.pipeline(stage=F) body F times (main loop over F-iteration chunks, then a tail)"
    requires: frozenset[str] = frozenset()
    produces: frozenset[str] = frozenset()

    def applies(self, program: Program, ctx) -> bool:
        return any(has_loop_kind(f, "pipeline") for f in program.functions)

    def run(self, program: Program, ctx) -> Program:
        funcs = []
        changed = False
        types = None
        for f in program.functions:
            if not has_loop_kind(f, "pipeline"):
                funcs.append(f)
                continue
            if types is None:
                types = self.function_types(program, ctx)
            names = {p.name for p in f.params} | {n.name for n in self.index(f).of(Var)}
            known = types(f)
            lowering = _Lowering(names, dict(known))
            body = lowering.block(f.body)
            funcs.append(replace(f, body=body))
            handed = _output_types(funcs[-1], known, lowering)
            if handed is not None:
                self.hand_over(funcs[-1], handed)
            changed = True
        if not changed:
            return program
        return replace(program, functions=tuple(funcs))


def _output_types(g, known: dict, lowering: "_Lowering") -> dict | None:
    """The value types of `g`, the lowered function, from those of its input (`known`), when the lowering
    is one whose effect on them is certain; else None (they are left to be inferred). Certain: every lowered
    loop became a main loop alone (a whole number of chunks: no tail, no dynamic remainder), so each clone
    is the body with its names renamed, the loop index read as `i + k * step` (an INDEX, as `i` is) and the
    carried names read as the values the previous clone yields, which have the very types of the carried
    names (checked); and no type of a copied value holds a name (a shape, a valid shape or an offset that
    reads the loop index or a renamed value would change with the copy). Then a clone's value has the type
    of the value it copies, and the names are defined in the order `definitions` gives."""
    if not lowering.exact:
        return None
    for loop in lowering.lowered:
        y = loop.body[-1] if loop.body and isinstance(loop.body[-1], YieldStmt) else None
        for a, v in zip(loop.iter_args, y.values if y is not None else ()):
            if not isinstance(v, Var) or v.name not in known or a.name not in known or known[v.name] != known[a.name]:
                return None
    out = {}
    types = lowering.types
    closed: dict[int, bool] = {}
    for n in definitions(g):
        if n not in types:
            return None
        t = types[n]
        if n not in known:  # a copy: its type must not read any name
            c = closed.get(id(t))
            if c is None:
                c = closed[id(t)] = not any(x.__class__ is Var for e in iter_type_exprs(t) for x in walk(e))
            if not c:
                return None
        out[n] = t
    return out


def _idx(v: int, span=None) -> ConstInt:
    return ConstInt(v, INDEX, span=span)


def _add(a: Expr, b: int) -> Expr:
    if b == 0:
        return a
    if isinstance(a, ConstInt):
        return _idx(a.value + b, a.span)
    return BinOp("+", a, _idx(b, a.span), span=a.span)


def _kwarg(s: ForStmt, name: str) -> Expr | None:
    return next((v for k, v in s.kwargs if k == name), None)


class _Subst(Mutator):
    """Replace names: loop index -> expression, carried values -> the previous clone's, bound names -> fresh."""

    def __init__(self, mapping: dict[str, Expr]):
        self.mapping = mapping

    def mutate_BinOp(self, b: BinOp) -> Expr:
        """Fold integer arithmetic the substitution made constant (a tail copy's `896 // 16`), as Simplify does
        when the dump is read back; comparisons are left to Simplify."""
        if b.op in ("+", "-", "*", "//", "%"):
            return fold_constants(b) or b
        return b

    def mutate_Var(self, v: Var) -> Expr:
        e = self.mapping.get(v.name)
        if e is None:
            return v
        # (a renamed Var is built directly: `dataclasses.replace` costs several times as much, once per use)
        return Var(e.name, span=v.span) if e.__class__ is Var else replace(e, span=v.span) if isinstance(e, Var) else e


def _bound(body: tuple[Stmt, ...]) -> list[str]:
    """Every name `body` binds, in program order (assignments, yields, loop indices, iter_args, scope vars)."""
    out: list[str] = []
    for s in body:
        if isinstance(s, AssignStmt):
            out.append(s.target.name)
        elif isinstance(s, YieldStmt):
            out.extend(t.name for t in s.targets)
        if isinstance(s, ForStmt):
            out.append(s.var.name)
        if isinstance(s, (ForStmt, WhileStmt)):
            out.extend(a.name for a in s.iter_args)
        if isinstance(s, ScopeStmt) and s.var is not None:
            out.append(s.var.name)
        if isinstance(s, IfStmt):
            out.extend(_bound(s.then_body))
            out.extend(_bound(s.else_body))
        elif isinstance(s, (ForStmt, WhileStmt, ScopeStmt)):
            out.extend(_bound(s.body))
    return out


def _is_cube_accumulator(op: str, t: TileType) -> bool:
    """A matmul's accumulator: written by the one cube unit, which finishes one MAD before the next, so the
    accumulators of two stages are never live together and get no membership."""
    return op.split(".")[-1].startswith("matmul") and t.memory == "Acc"


class _Lowering:
    def __init__(self, names: set[str], types: dict):
        self.names = names
        self.types = types  # name -> type; a clone's fresh name gets the type of the name it copies
        self.groups = 0  # one membership group per replicated region, numbered in the order they are built
        # the pipeline loops lowered (as written, inner ones lowered first), and whether each became a main
        # loop alone (`_output_types`)
        self.lowered: list[ForStmt] = []
        self.exact = True

    def group(self) -> int:
        self.groups += 1
        return self.groups - 1

    def tag(self, stmts, group: int, stage: int) -> list[Stmt]:
        """Append `group:stage` to the membership of every tile definition by an op in `stmts`, nested
        bodies included, matmul accumulators excepted."""
        out = []
        for s in stmts:
            if isinstance(s, AssignStmt) and isinstance(s.value, Call) and s.value.kind == "op":
                t = s.annotation if isinstance(s.annotation, TileType) else self.types.get(s.target.name)
                if isinstance(t, TileType) and not _is_cube_accumulator(s.value.op, t):
                    s = replace(s, value=with_membership(s.value, group, stage))
            out.append(rebuild_bodies(s, lambda b: tuple(self.tag(b, group, stage))))
        return out

    def fresh(self, base: str) -> str:
        """A new name from `base` without its `_<n>` suffix: clones of `y` and of `y_1` are `y_2`, `y_3`, ..."""
        return fresh_name(re.sub(r"_\d+$", "", base) or base, self.names)

    def block(self, body: tuple[Stmt, ...]) -> tuple[Stmt, ...]:
        out: list[Stmt] = []
        for s in body:
            s = rebuild_bodies(s, self.block)  # inner pipelines first
            if isinstance(s, ForStmt) and s.kind == "pipeline":
                out.extend(self.lower(s))
            else:
                out.append(s)
        return tuple(out)

    # ------------------------------------------------------------------ one loop
    def lower(self, s: ForStmt) -> list[Stmt]:
        stage = _kwarg(s, "stage")
        if not isinstance(stage, ConstInt) or stage.value < 1:
            raise CompileError([Diagnostic("PTOC-E0650", "pl.pipeline needs stage=<a positive integer constant>",
                                           stage.span if stage is not None else s.span,
                                           hint="e.g. pl.pipeline(0, n, 1, stage=2)")])
        step = s.step
        if not isinstance(step, ConstInt) or step.value <= 0:
            raise CompileError([Diagnostic("PTOC-E0650", "pl.pipeline needs a positive integer constant step",
                                           step.span or s.span, hint="replicating the body needs to know the "
                                           "distance between iterations; write the step as a literal")])
        factor, st = stage.value, step.value
        if factor == 1:
            return [s]  # already one clone per iteration: CanonicalizeIOOrder orders its body
        self.lowered.append(s)
        marker = replace(s, kwargs=tuple((k, _idx(1, v.span) if k == "stage" else v) for k, v in s.kwargs))
        start, stop = s.start, s.stop
        if isinstance(start, ConstInt) and isinstance(stop, ConstInt):
            trip = max(0, -(-(stop.value - start.value) // st))
            if trip == 0:
                return [replace(s, kind="range", kwargs=tuple((k, v) for k, v in s.kwargs if k != "stage"))]
            self.exact &= trip % factor == 0
            return self.static(marker, factor, st, start.value, trip)
        self.exact = False
        return self.dynamic(marker, factor, st)

    def clones(self, loop: ForStmt, index_of, count: int, carried: tuple[Expr, ...],
               keep_first: bool = False, group: int | None = None, first_stage: int = 0) -> tuple[list[Stmt], tuple]:
        """`count` copies of the loop body, clone k at index `index_of(k)`, the first reading `carried` for
        the iter_args; returns the statements (yields removed) and the values the last clone yields.
        `keep_first`: clone 0 keeps the body's names (no other copy of the body is emitted). The copies are
        tagged as stages `first_stage`, `first_stage + 1`, ... of membership group `group` (a new group
        when None)."""
        if group is None:
            group = self.group()
        body = loop.body
        y = body[-1] if body and isinstance(body[-1], YieldStmt) else None
        stmts = body[:-1] if y is not None else body
        out: list[Stmt] = []
        values = carried
        for k in range(count):
            mapping: dict[str, Expr] = {loop.var.name: index_of(k)}
            mapping.update({a.name: v for a, v in zip(loop.iter_args, values)})
            renamed = {} if keep_first and k == 0 else {n: Var(self.fresh(n)) for n in dict.fromkeys(_bound(stmts))}
            for old, new in renamed.items():
                if old in self.types:
                    self.types[new.name] = self.types[old]
            mapping.update(renamed)
            sub = _Subst(mapping)
            out.extend(self.tag(sub.mutate(stmts), group, first_stage + k))
            values = tuple(sub.mutate(v) for v in y.values) if y is not None else ()
        return out, values

    def static(self, loop: ForStmt, factor: int, st: int, start: int, trip: int) -> list[Stmt]:
        main_iters, rem = divmod(trip, factor)
        results = loop.results
        out: list[Stmt] = []
        carried: tuple[Expr, ...] = loop.init_values
        if main_iters:
            main = self.main_loop(loop, factor, st, _idx(start + main_iters * factor * st), rename=bool(rem))
            out.append(main)
            carried = tuple(main.results)
        if rem:
            base = start + main_iters * factor * st
            tail, values = self.clones(loop, lambda k: _idx(base + k * st), rem, carried, keep_first=not main_iters)
            out.extend(tail)
            out.extend(AssignStmt(Var(r.name, span=r.span), v, span=r.span) for r, v in zip(results, values))
        return out

    def main_loop(self, loop: ForStmt, factor: int, st: int, end: Expr, rename: bool) -> ForStmt:
        """The chunked loop: F clones per iteration; its results renamed `<r>_main` when a tail follows."""
        body = loop.body
        y = body[-1] if body and isinstance(body[-1], YieldStmt) else None
        # clone 0 keeps every name: reserve them so later clones get fresh ones
        stmts, values = self.clones_after_first(loop, factor, st)
        if y is not None:
            targets = tuple(Var(self.fresh(f"{t.name}_main"), span=t.span) if rename else t for t in y.targets)
            stmts.append(replace(y, targets=targets, values=values))
        args = (loop.start, end, _idx(factor * st, loop.step.span))
        return replace(loop, args=args, body=tuple(stmts))

    def clones_after_first(self, loop: ForStmt, factor: int, st: int) -> tuple[list[Stmt], tuple]:
        body = loop.body
        y = body[-1] if body and isinstance(body[-1], YieldStmt) else None
        group = self.group()
        first = self.tag(body[:-1] if y is not None else body, group, 0)
        values = tuple(y.values) if y is not None else ()
        if factor == 1:
            return first, values
        rest, values = self.clones(loop, lambda k: _add(Var(loop.var.name, span=loop.var.span), (k + 1) * st),
                                   factor - 1, values, group=group, first_stage=1)
        return first + rest, values

    def dynamic(self, loop: ForStmt, factor: int, st: int) -> list[Stmt]:
        start, stop = loop.start, loop.stop
        span = loop.span
        idx_t = ScalarType(INDEX)
        span_expr = BinOp("-", stop, start, span=span)
        if st == 1:
            main_end_val = BinOp("+", start, BinOp("*", BinOp("//", span_expr, _idx(factor)), _idx(factor)), span=span)
        else:
            trips = BinOp("//", BinOp("+", span_expr, _idx(st - 1)), _idx(st))
            main_end_val = BinOp("+", start, BinOp("*", BinOp("//", trips, _idx(factor)), _idx(factor * st)),
                                 span=span)
        main_end = Var(self.fresh("unroll_main_end"), span=span)
        out: list[Stmt] = [AssignStmt(main_end, main_end_val, idx_t, span=span)]
        results = loop.results
        main = self.main_loop(loop, factor, st, main_end, rename=bool(results))
        out.append(main)
        if st == 1:
            rem_val: Expr = BinOp("-", stop, main_end, span=span)
        else:
            trips = BinOp("//", BinOp("+", BinOp("-", stop, start), _idx(st - 1)), _idx(st))
            rem_val = BinOp("-", trips, BinOp("*", BinOp("//", trips, _idx(factor)), _idx(factor)), span=span)
        rem = Var(self.fresh("unroll_rem"), span=span)
        out.append(AssignStmt(rem, rem_val, idx_t, span=span))
        # PyPTO builds the chain innermost first: the copies for `unroll_rem == F - 1` form the first group
        self.tail_groups = self.groups
        self.groups += factor - 1
        out.append(self.cascade(loop, 1, factor, st, rem, main_end, tuple(main.results), results))
        return out

    def cascade(self, loop: ForStmt, k: int, factor: int, st: int, rem: Var, main_end: Var,
                carried: tuple, targets: tuple[Var, ...]) -> IfStmt:
        """`if rem == k: <k clones> else: <the same for k + 1>`; the last else passes `carried` through."""
        span = loop.span
        stmts, values = self.clones(loop, lambda j: _add(Var(main_end.name, span=span), j * st), k, carried,
                                    group=self.tail_groups + factor - 1 - k)
        then_body = tuple(stmts) + ((YieldStmt(targets, values, span=span),) if targets else ())
        if k + 1 < factor:
            inner_targets = tuple(Var(self.fresh(f"{t.name}_rem{k + 1}"), span=t.span) for t in targets)
            inner = self.cascade(loop, k + 1, factor, st, rem, main_end, carried, inner_targets)
            else_body: tuple[Stmt, ...] = (inner,) + ((YieldStmt(targets, inner_targets, span=span),) if targets else ())
        else:
            else_body = (YieldStmt(targets, carried, span=span),) if targets else ()
        cond = BinOp("==", Var(rem.name, span=span), _idx(k), span=span)
        return IfStmt(cond, then_body, else_body, span=span)

