"""CanonicalizeIOOrder: inside pipeline loops, issue the loads first and the stores last.

Purpose
-------
A `pl.pipeline` loop asks for its iterations to overlap. After LowerPipelineLoops the body of the chunked
loop holds F clones of the original body, one after the other: `load_0 compute_0 store_0 load_1 ...`.
This pass reorders every such body (and every `pl.pipeline(..., stage=1)` body written by hand) so the
data movement engines run ahead of the compute units: scalar arithmetic first (it computes the offsets
the loads need), then the loads, then the computes, then the stores:
`load_0 load_1 compute_0 compute_1 store_0 store_1`. Then the loop becomes a plain `pl.range` (the
`stage` keyword is dropped); every `pl.pipeline` is gone after this pass.

Rules
-----
- Only the statements of a pipeline loop's body move, each as a whole (a nested loop or if moves as one
  statement); a body's final `pl.yield_` (or return, break, continue) stays last.
- The order is a stable topological sort: a statement comes after every statement defining a name it
  uses, and after every earlier statement touching a tensor or tile it writes (`tile.store` into a
  tensor, `tile.write` into a tile), reads after earlier writes of the same tensor or tile likewise. Calls
  of other functions and ops outside the table below keep their order relative to each other and to
  every load and store.
- Among the statements ready to go, the lowest tier goes first, then the original position:
  tier 0: scalar results; tier 1: `tile.load`, `tile.read` and an L1 -> L0 `tile.extract` (a Mat tile
  extracted into Left or Right); tier 2: other compute, then (`tile.store`, `tile.write`) last.
- Nested pipelines are reordered innermost first.

Where ptoc differs from PyPTO: PyPTO tags each clone's tiles with a pipeline stage and orders the compute
tier by stage (`compute_0 store_0 compute_1 store_1`); ptoc has no stage tags and stores after all
computes. Both orders compute the same values; PyPTO's frees output buffers earlier. PyPTO's cross-core
(`tpush`/`tpop`) and double-buffered-accumulator schedules are not modelled.
"""

from __future__ import annotations

import heapq
from dataclasses import replace

from ptoc.ir.nodes import (
    AssignStmt,
    BreakStmt,
    Call,
    ContinueStmt,
    EnumLit,
    EvalStmt,
    ForStmt,
    Program,
    ReturnStmt,
    ScalarType,
    ScopeStmt,
    Stmt,
    TileType,
    Var,
    WhileStmt,
    YieldStmt,
)
from ptoc.ir.verifier import definitions, iter_nodes
from ptoc.ir.visitor import rebuild_bodies
from ptoc.passes.common import has_loop_kind
from ptoc.passes.manager import Pass

LOADS = {"tile.load", "load", "tile.read", "read"}
STORES = {"tile.store": 2, "store": 2, "tile.write": 0, "write": 0}  # op -> the operand it writes
PURE_ROOTS = ("tile.", "tensor.")  # other op families: compute, no hidden effect on memory
TERMINATORS = (YieldStmt, ReturnStmt, BreakStmt, ContinueStmt)


class CanonicalizeIOOrder(Pass):
    name = "CanonicalizeIOOrder"
    stage = "layout"
    summary = "in pipeline loop bodies: scalar math, then loads, computes, stores; pipeline loops become ranges"
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
            known = types(f)
            nf = replace(f, body=_Reorder(known).block(f.body, False))
            funcs.append(nf)
            changed = True
            # The statements only move (and a pipeline loop becomes a range): every value keeps its type, and
            # only the order the names are defined in changes, so the output's types are the input's in the
            # output's order rather than a second inference of the function.
            order = definitions(nf)
            if order.keys() == known.keys():
                self.hand_over(nf, {name: known[name] for name in order})
        return replace(program, functions=tuple(funcs)) if changed else program


def _op(s: Stmt) -> Call | None:
    v = s.value if isinstance(s, AssignStmt) else s.expr if isinstance(s, EvalStmt) else None
    return v if isinstance(v, Call) else None


def _defs(s: Stmt, nodes: list | None = None) -> set[str]:
    """The names `s` defines. `nodes`: the nodes under `s` (`iter_nodes`), when the caller has them."""
    out: set[str] = set()
    if isinstance(s, (AssignStmt, EvalStmt)):
        nodes = []
    elif nodes is None:
        nodes = list(iter_nodes(s))
    for n in nodes:
        if isinstance(n, AssignStmt):
            out.add(n.target.name)
        elif isinstance(n, YieldStmt):
            out.update(t.name for t in n.targets)
        elif isinstance(n, (ForStmt, WhileStmt)):
            out.update(a.name for a in n.iter_args)
            if isinstance(n, ForStmt):
                out.add(n.var.name)
        elif isinstance(n, ScopeStmt) and n.var is not None:
            out.add(n.var.name)
    if isinstance(s, AssignStmt):
        out.add(s.target.name)
    return out


class _Reorder:
    def __init__(self, types: dict):
        self.types = types

    def block(self, body: tuple[Stmt, ...], in_pipeline: bool) -> tuple[Stmt, ...]:
        out = []
        for s in body:
            if isinstance(s, ForStmt) and s.kind == "pipeline":
                inner = self.block(s.body, True)
                s = replace(s, kind="range", body=inner, kwargs=tuple((k, v) for k, v in s.kwargs if k != "stage"))
            else:
                s = rebuild_bodies(s, lambda b: self.block(b, in_pipeline))
            out.append(s)
        out_t = tuple(out)
        return self.reorder(out_t) if in_pipeline else out_t

    # ------------------------------------------------------------------ one region
    def tier(self, s: Stmt) -> tuple[int, int]:
        call = _op(s)
        if call is not None and call.kind == "op":
            if call.op in LOADS or self.l1_to_l0(call):
                return 1, 0
            if call.op in STORES:
                return 2, 1
        if isinstance(s, AssignStmt) and isinstance(self.types.get(s.target.name), ScalarType):
            return 0, 0
        return 2, 0

    def l1_to_l0(self, call: Call) -> bool:
        if call.op != "tile.extract" or not call.args:
            return False
        src = self.types.get(call.args[0].name) if isinstance(call.args[0], Var) else None
        target = call.kwarg("target_memory")
        return (isinstance(src, TileType) and src.memory == "Mat" and isinstance(target, EnumLit)
                and target.member in ("Left", "Right"))

    def effects(self, s: Stmt, root: dict[str, str], nodes: list | None = None,
                uses: set[str] | None = None) -> tuple[set[str], set[str], bool]:
        """(roots read, roots written, ordered): `ordered` for statements whose effects are not known.
        `nodes`, `uses`: the nodes under `s` and the names among them, when the caller has them."""
        nodes = list(iter_nodes(s)) if nodes is None else nodes
        if uses is None:
            uses = {n.name for n in nodes if isinstance(n, Var)}
        reads = {root.get(u, u) for u in uses}
        writes: set[str] = set()
        ordered = False
        for n in nodes:
            if not isinstance(n, Call):
                continue
            if n.kind != "op" or not n.op.startswith(PURE_ROOTS) and n.op not in LOADS and n.op not in STORES:
                ordered = True
            k = STORES.get(n.op) if n.kind == "op" else None
            if k is not None and k < len(n.args) and isinstance(n.args[k], Var):
                writes.add(root.get(n.args[k].name, n.args[k].name))
        return reads, writes, ordered

    def reorder(self, body: tuple[Stmt, ...]) -> tuple[Stmt, ...]:
        end = len(body) - 1 if body and isinstance(body[-1], TERMINATORS) else len(body)
        stmts = body[:end]
        if len(stmts) < 2:
            return body
        root: dict[str, str] = {}
        defined_by: dict[str, int] = {}
        preds: list[set[int]] = [set() for _ in stmts]
        last_writer: dict[str, int] = {}
        readers: dict[str, list[int]] = {}
        last_ordered = -1
        touching: list[int] = []  # loads, stores and ordered statements so far
        tiers = [self.tier(s) for s in stmts]  # (each statement's tier is asked again by the sort below)
        for j, s in enumerate(stmts):
            nodes = list(iter_nodes(s))
            uses = {n.name for n in nodes if isinstance(n, Var)}
            preds[j].update(defined_by[u] for u in uses if u in defined_by and defined_by[u] != j)
            reads, writes, ordered = self.effects(s, root, nodes, uses)
            for r in reads:
                if r in last_writer:
                    preds[j].add(last_writer[r])
            for w in writes:
                preds[j].update(readers.get(w, ()))
                if w in last_writer:
                    preds[j].add(last_writer[w])
            io = ordered or bool(writes) or tiers[j][0] == 1
            if ordered:
                preds[j].update(touching)
            elif io and last_ordered >= 0:
                preds[j].add(last_ordered)
            for r in reads:
                readers.setdefault(r, []).append(j)
            for w in writes:
                last_writer[w] = j
            if ordered:
                last_ordered = j
            if io:
                touching.append(j)
            call = _op(s)
            for d in _defs(s, nodes):
                defined_by[d] = j
                k = STORES.get(call.op) if call is not None and call.kind == "op" else None
                if isinstance(s, AssignStmt) and k is not None and k < len(call.args) and isinstance(call.args[k], Var):
                    root[d] = root.get(call.args[k].name, call.args[k].name)
                elif isinstance(s, AssignStmt) and isinstance(s.value, Var):
                    root[d] = root.get(s.value.name, s.value.name)
            preds[j].discard(j)
        succs: list[list[int]] = [[] for _ in stmts]
        remaining = [len(p) for p in preds]
        for j, p in enumerate(preds):
            for i in p:
                succs[i].append(j)
        ready = [(*tiers[i], i) for i in range(len(stmts)) if not preds[i]]
        heapq.heapify(ready)
        order: list[int] = []
        while ready:
            *_, i = heapq.heappop(ready)
            order.append(i)
            for j in succs[i]:
                remaining[j] -= 1
                if remaining[j] == 0:
                    heapq.heappush(ready, (*tiers[j], j))
        if order == list(range(len(stmts))):
            return body
        return tuple(stmts[i] for i in order) + body[end:]
