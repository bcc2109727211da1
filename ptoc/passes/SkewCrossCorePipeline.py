"""SkewCrossCorePipeline: a pipeline loop that sends a tile to the other core and waits for its answer runs
its sending part D iterations ahead.

Purpose
-------
In a split kernel the cube core (AIC) of an attention-like loop pushes a tile to the vector core
(`pl.tile.tpush_to_aiv`) and pops the vector core's answer (`pl.tile.tpop_from_aiv`) in the same
iteration. Run as written, each core waits for the other once per iteration. With
`for i in pl.pipeline(start, stop, step, stage=F):` this pass lets the core that pushes first run its
producing part D iterations ahead: a prologue produces iterations 0..D-1, a `pl.range` loop produces D
iterations and consumes the D iterations before them per trip, and an epilogue consumes the last D. The
pipes deliver tiles in order and every iteration still pushes once and pops once, in the same order as
before, so the other core sees the same sequence of hand-offs.

Rules (PyPTO's SkewCrossCorePipeline; its tests in tests/ut/ir/transforms/test_skew_cross_core_pipeline.py)
-----
- Only `pl.pipeline` loops with a constant `stage=F` whose body holds, among its own statements, both a
  tpush (`tile.tpush_to_aiv` / `tile.tpush_to_aic`) and a tpop (`tile.tpop_from_aic` / `tile.tpop_from_aiv`).
  Other pipeline loops are left to LowerPipelineLoops. Nested pipelines are handled innermost first.
  Every loop this pass touches leaves it a `pl.range` without `stage=`.
- F == 1, a step or bounds that are not constants, fewer than 2 iterations: the loop becomes a `pl.range`
  with its body as it is ("demoted"). (A non-constant step with F > 1 is left for LowerPipelineLoops to
  report, PTOC-E0650.)
- The producing part is the first cross-core statement of the body and every body statement it needs
  (through the names it uses, transitively); the rest is the consuming part. The loop is demoted when the
  producing part reads a loop-carried value or a name the consuming part defines, when the body pushes or
  pops more than once (moving only the first message ahead would reorder the pipe), or when the consuming
  part reads a value the producing part makes that is not a scalar computed by arithmetic from the loop
  index and values from outside the loop. Such a scalar is computed again in each consuming copy.
  A body whose first cross-core statement is a pop (the consumer's side) thus is demoted, its popped tile
  being read by the rest.
- Depth D: the largest d <= max(2, F - 1) with trip % d == 0 and trip >= 2 * d (d = 1 always qualifies).
  Prologue: produce(start + i * step), i < D. Loop `k in pl.range(start + D*step, start + trip*step, D*step)`:
  produce(k + i * step) for i < D, then consume(k - (D - i) * step) for i < D, the loop-carried values
  threading through the consuming copies. Epilogue: consume(start + (trip - D + i) * step), i < D. The
  loop's results are then assigned from the epilogue's last values (the steady loop's results are named
  `<result>_swp`).
- Copies bind fresh names (`<name>_<n>`; the first copy of a statement keeps the original names); indices
  are substituted as written, without folding (`0 * 16` stays).

Where ptoc differs from PyPTO: PyPTO also tags the tiles of each copy with a `pipeline_membership`
attribute so its MemoryReuse keeps the copies' load buffers apart; ptoc has no such attribute: every copy
binds its own names and so gets its own buffers from InitMemRef.
"""

from __future__ import annotations

import re
from dataclasses import replace

from ptoc.ir.dtypes import INDEX
from ptoc.ir.names import fresh_name
from ptoc.ir.nodes import (
    AssignStmt,
    BinOp,
    Call,
    ConstInt,
    EvalStmt,
    Expr,
    ForStmt,
    Program,
    ScalarType,
    ScopeStmt,
    Stmt,
    Var,
    WhileStmt,
    YieldStmt,
)
from ptoc.ir.verifier import iter_nodes
from ptoc.ir.visitor import Mutator, rebuild_bodies
from ptoc.passes.common import has_loop_kind
from ptoc.passes.manager import Pass

PUSHES = ("tile.tpush_to_aiv", "tile.tpush_to_aic")
POPS = ("tile.tpop_from_aic", "tile.tpop_from_aiv")


def _call(s: Stmt) -> Call | None:
    v = s.value if isinstance(s, AssignStmt) else s.expr if isinstance(s, EvalStmt) else None
    return v if isinstance(v, Call) else None


def _is(s: Stmt, ops) -> bool:
    c = _call(s)
    return c is not None and c.kind == "op" and c.op in ops


def _split_yield(body: tuple[Stmt, ...]) -> tuple[tuple[Stmt, ...], tuple[Expr, ...] | None]:
    if body and isinstance(body[-1], YieldStmt):
        return body[:-1], body[-1].values
    return body, None


def _has_pair(body: tuple[Stmt, ...]) -> bool:
    stmts, _ = _split_yield(body)
    return any(_is(s, PUSHES) for s in stmts) and any(_is(s, POPS) for s in stmts)


def _bound(s: Stmt) -> list[str]:
    """The names a statement binds, nested bodies included, in program order."""
    out: list[str] = []
    for n in iter_nodes(s):
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
    return out


def _uses(s: Stmt) -> set[str]:
    """The names a statement reads (every name in it but the targets of its assignments and yields)."""
    targets: set[int] = set()
    for n in iter_nodes(s):
        if isinstance(n, AssignStmt):
            targets.add(id(n.target))
        elif isinstance(n, YieldStmt):
            targets.update(id(t) for t in n.targets)
    return {n.name for n in iter_nodes(s) if isinstance(n, Var) and id(n) not in targets}


def _idx(v: int) -> ConstInt:
    return ConstInt(v, INDEX)


def _offset(base: Expr, by: int) -> Expr:
    if by == 0:
        return base
    if isinstance(base, ConstInt):
        return _idx(base.value + by)
    return BinOp("+", base, _idx(by))


def _trip(start: int, stop: int, step: int) -> int:
    return max(0, -(-(stop - start) // step)) if step > 0 else max(0, -(-(start - stop) // -step))


class SkewCrossCorePipeline(Pass):
    name = "SkewCrossCorePipeline"
    stage = "layout"
    summary = "run the producing half of a tpush/tpop pipeline loop D iterations ahead; such loops become pl.range"
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
            body = _Skew(names, types(f)).block(f.body)
            if body is not f.body:
                f = replace(f, body=body)
                changed = True
            funcs.append(f)
        return replace(program, functions=tuple(funcs)) if changed else program


class _Subst(Mutator):
    """Loop index and carried values -> expressions, bound names -> fresh ones."""

    def __init__(self, mapping: dict[str, Expr]):
        self.mapping = mapping

    def mutate_Var(self, v: Var) -> Expr:
        e = self.mapping.get(v.name)
        if e is None:
            return v
        # (a renamed Var is built directly: `dataclasses.replace` costs several times as much, once per use)
        return Var(e.name, span=v.span) if e.__class__ is Var else replace(e, span=v.span) if isinstance(e, Var) else e


class _Skew:
    def __init__(self, names: set[str], types: dict):
        self.names = names
        self.types = types
        self.emitted: set[str] = set()  # original names some copy already kept

    def fresh(self, base: str) -> str:
        if base not in self.emitted:
            self.emitted.add(base)
            return base
        return fresh_name(re.sub(r"_\d+$", "", base) or base, self.names)

    def block(self, body: tuple[Stmt, ...]) -> tuple[Stmt, ...]:
        out: list[Stmt] = []
        changed = False
        for s in body:
            new = rebuild_bodies(s, self.block)  # inner pipelines first
            if isinstance(new, ForStmt) and new.kind == "pipeline":
                lowered = self.loop(new)
                if lowered is not None:
                    out.extend(lowered)
                    changed = True
                    continue
            out.append(new)
            changed |= new is not s
        return tuple(out) if changed else body

    @staticmethod
    def demote(s: ForStmt) -> list[Stmt]:
        return [replace(s, kind="range", kwargs=tuple((k, v) for k, v in s.kwargs if k != "stage"))]

    def loop(self, s: ForStmt) -> list[Stmt] | None:
        stage = dict(s.kwargs).get("stage")
        if not isinstance(stage, ConstInt) or stage.value < 1 or not _has_pair(s.body):
            return None
        if stage.value == 1:
            return self.demote(s)
        if not isinstance(s.step, ConstInt) or s.step.value == 0:
            return None  # LowerPipelineLoops reports it (PTOC-E0650)
        if not (isinstance(s.start, ConstInt) and isinstance(s.stop, ConstInt)):
            return self.demote(s)
        depth = max(2, stage.value - 1)
        skewed = self.skew(s, s.start.value, s.stop.value, s.step.value, depth)
        return skewed if skewed is not None else self.demote(s)

    # ------------------------------------------------------------------ the skew
    def skew(self, s: ForStmt, start: int, stop: int, step: int, depth: int) -> list[Stmt] | None:
        trip = _trip(start, stop, step)
        if trip < 2:
            return None
        stmts, yields = _split_yield(s.body)
        lead = next((i for i, st in enumerate(stmts) if _is(st, PUSHES) or _is(st, POPS)), None)
        n_push = sum(_is(st, PUSHES) for st in stmts)
        n_pop = sum(_is(st, POPS) for st in stmts)
        if lead is None or not n_push or not n_pop:
            return None
        def_idx: dict[str, int] = {}
        for i, st in enumerate(stmts):
            for n in _bound(st):
                def_idx[n] = i
        uses = [_uses(st) for st in stmts]
        produce: set[int] = set()
        work = [lead]
        while work:
            i = work.pop()
            if i in produce:
                continue
            produce.add(i)
            work.extend(def_idx[n] for n in uses[i] if n in def_idx)
        if len(produce) == len(stmts):
            return None
        carried_args = {a.name for a in s.iter_args}
        if any(uses[i] & carried_args for i in produce):
            return None
        consume = set(range(len(stmts))) - produce
        consume_defs = {n for i in consume for n in _bound(stmts[i])}
        consume_uses = set().union(*(uses[i] for i in consume))
        if any(uses[i] & consume_defs for i in produce):
            return None
        carried: list[str] = []
        for i in sorted(produce):
            for n in _bound(stmts[i]):
                if n in consume_uses and n not in carried:
                    carried.append(n)
        if n_push != 1 or n_pop != 1:
            return None
        for n in carried:
            again = self.recomputable(n, stmts, def_idx, uses)
            if again is None:
                return None
            consume |= again

        d = next(d for d in range(depth, 0, -1) if trip % d == 0 and trip >= 2 * d)
        init = s.init_values

        def half(which: set[int], index: Expr, carried_in: tuple[Expr, ...]):
            sel = [stmts[i] for i in sorted(which)]
            mapping: dict[str, Expr] = {s.var.name: index}
            mapping.update({a.name: v for a, v in zip(s.iter_args, carried_in)})
            for st in sel:
                for n in _bound(st):
                    if n not in mapping:  # (an if binds its result in both branches)
                        mapping[n] = Var(self.fresh(n))
            sub = _Subst(mapping)
            out = list(sub.mutate(tuple(sel)))
            values = tuple(sub.mutate(v) for v in yields) if yields is not None else ()
            return out, values

        out: list[Stmt] = []
        for i in range(d):  # prologue
            out.extend(half(produce, _idx(start + i * step), init)[0])
        k = Var(self.fresh(s.var.name))
        steady_args = tuple(Var(self.fresh(a.name)) for a in s.iter_args)
        body: list[Stmt] = []
        for i in range(d):
            body.extend(half(produce, _offset(k, i * step), steady_args)[0])
        values: tuple[Expr, ...] = steady_args
        for i in range(d):
            part, values = half(consume, BinOp("-", k, _idx((d - i) * step)), values)
            body.extend(part)
        results = s.results
        steady_results = tuple(Var(fresh_name(f"{r.name}_swp", self.names)) for r in results)
        if yields is not None:
            body.append(YieldStmt(steady_results, values))
        out.append(replace(s, kind="range", var=k,
                           args=(_idx(start + d * step), _idx(start + trip * step), _idx(d * step)),
                           body=tuple(body), iter_args=steady_args,
                           kwargs=tuple((key, v) for key, v in s.kwargs if key != "stage")))
        values = steady_results if results else init
        for i in range(d):  # epilogue
            part, values = half(consume, _idx(start + (trip - d + i) * step), values)
            out.extend(part)
        out.extend(AssignStmt(Var(r.name, span=r.span), v, span=r.span) for r, v in zip(results, values))
        return out

    def recomputable(self, name: str, stmts, def_idx: dict[str, int], uses) -> set[int] | None:
        """The body statements computing scalar `name` from the loop index and outside values, or None
        when a tile, a call or a nested statement is among them."""
        found: set[int] = set()
        work = [name]
        while work:
            n = work.pop()
            i = def_idx.get(n)
            if i is None or i in found:
                continue
            st = stmts[i]
            if not isinstance(st, AssignStmt) or isinstance(st.value, Call) \
                    or not isinstance(self.types.get(st.target.name), ScalarType):
                return None
            found.add(i)
            work.extend(uses[i])
        return found

