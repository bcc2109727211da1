"""ExpandManualPhaseFence: one barrier task instead of a full producer x consumer dependency fan.

Purpose
-------
Inside `with pl.manual_scope():` an orchestration function states task dependencies by hand:
`pl.submit(self.k, ..., deps=[tids])` waits for every task whose id the array `tids`
(`pl.Array[n, pl.TASK_ID]`) holds. When a loop launches C such tasks that all wait on the same n
producers, the runtime wires n * C edges. This pass puts one dummy task in front of the loop,
`phase_fence_barrier_<k>_tid = pl.system.task_dummy(deps=[tids])` (n edges in), and makes the C consumers
wait on it instead (`deps=[phase_fence_barrier_<k>_tid]`, C edges out): n + C edges.

Rules (PyPTO's ExpandManualPhaseFence; its tests in tests/ut/ir/transforms/test_expand_manual_phase_fence.py)
-----
- Orchestration functions only; only loops inside a manual runtime scope (`pl.manual_scope()` or
  `pl.scope(mode=pl.ScopeMode.MANUAL)`); every loop of such a scope, nested ones included.
- A consumer is a `pl.submit` / `pl.spmd_submit` whose `deps=` lists exactly one value, a `TASK_ID` array.
  For a loop, its consumers are those directly in its body (and in ifs and whiles there); a sequential
  (`pl.range`) loop also counts those of its nested loops with a constant trip count, times that count.
- A dependency array is left as it is when the loop carries it (an iteration argument of the loop), when it
  is defined inside the loop, or when the loop updates it (`pl.array.update_element` on it, or on an
  iteration argument that starts from it, at any loop depth).
- With P producers (the array's constant extent) and C consumers (the count above, times the loop's
  constant trip count when it has one), the barrier is made when P * C - (P + C) >= 1. A parallel loop
  whose trip count is not a positive constant, and a sequential loop with a constant trip count of 0 or
  less, get none.
- Barriers go right before their loop, one per dependency array in the order the arrays are first used,
  numbered per function from 0. The rewritten consumers keep every other argument.
- Like PyPTO's, the pass needs no single assignment (`ptoc passes --pipeline ExpandManualPhaseFence` takes
  a program as written): a name assigned inside a loop counts as defined there even when it is also
  assigned before it.

Where ptoc differs from PyPTO: PyPTO's barrier call carries its dependency in attributes; ptoc writes
the `deps=[...]` keyword PyPTO's printer shows. When `phase_fence_barrier_<k>_tid` is already a name of the
function, ptoc gives the barrier the next free `<name>_<n>` (names are unique per function in ptoc).
"""

from __future__ import annotations

from dataclasses import replace

from ptoc.ir.names import fresh_name
from ptoc.ir.nodes import (
    ArrayType,
    AssignStmt,
    Call,
    ConstInt,
    EnumLit,
    ForStmt,
    IfStmt,
    ListExpr,
    Program,
    ScopeStmt,
    Stmt,
    TupleExpr,
    Var,
    WhileStmt,
    YieldStmt,
)
from ptoc.ir.verifier import iter_nodes
from ptoc.ir.visitor import Mutator, rebuild_bodies
from ptoc.passes.manager import Pass

SUBMITS = ("submit", "spmd_submit")


def _manual(s: ScopeStmt) -> bool | None:
    """Whether a runtime scope is manual; None when `s` is not a runtime scope."""
    if s.kind == "manual_scope":
        return True
    if s.kind == "scope":
        mode = dict(s.kwargs).get("mode")
        return isinstance(mode, EnumLit) and mode.member == "MANUAL"
    return None


def _trip(f: ForStmt) -> int | None:
    vals = [a.value if isinstance(a, ConstInt) else None for a in (f.start, f.stop, f.step)]
    if None in vals or vals[2] == 0:
        return None
    start, stop, step = vals
    return max(0, -(-(stop - start) // step)) if step > 0 else max(0, -(-(start - stop) // -step))


class ExpandManualPhaseFence(Pass):
    name = "ExpandManualPhaseFence"
    stage = "memory"
    summary = "in manual scopes, a loop's submits waiting on one task-id array wait on one barrier task instead"
    requires: frozenset[str] = frozenset()
    produces: frozenset[str] = frozenset()
    # as PyPTO's, it needs no single assignment: a name assigned in a loop and before it counts as defined
    # in the loop (its array is then left alone), which is what the value seen by the loop's launches is
    accepts_non_ssa = True

    def run(self, program: Program, ctx) -> Program:
        funcs = []
        changed = False
        types = None
        for f in program.functions:
            if f.func_type != "Orchestration" or not any(
                    isinstance(n, ScopeStmt) and _manual(n) for n in iter_nodes(f)):
                funcs.append(f)
                continue
            if types is None:
                types = self.types(program, ctx)
            ftypes = types.get(f.name, {})
            taken = set(ftypes) | {p.name for p in f.params}
            body = _Fence(ftypes, taken).block(f.body, False)
            if body is not f.body:
                f = replace(f, body=body)
                changed = True
            funcs.append(f)
        return replace(program, functions=tuple(funcs)) if changed else program


class _Index:
    """What a loop body holds: its consumers per dependency array (first-use order, count, the calls),
    the names it defines and the arrays it updates."""

    def __init__(self):
        self.count: dict[str, int] = {}
        self.calls: dict[str, set[int]] = {}
        self.defined: set[str] = set()
        self.updated: set[str] = set()

    def add(self, key: str, n: int, calls) -> None:
        if key not in self.count:
            self.count[key] = 0
            self.calls[key] = set()
        self.count[key] += n
        self.calls[key] |= calls


class _Fence:
    def __init__(self, types: dict, taken: set[str]):
        self.types = types
        self.taken = taken
        self.aliases: dict[str, set[str]] = {}
        self.counter = 0

    # ------------------------------------------------------------------ analysis
    def _task_array(self, name: str) -> ArrayType | None:
        t = self.types.get(name)
        return t if isinstance(t, ArrayType) and t.dtype.name == "TASK_ID" else None

    def _alias(self, a: str, b: str) -> None:
        sa = self.aliases.setdefault(a, {a})
        sb = self.aliases.setdefault(b, {b})
        if sa is sb:
            return
        sa |= sb
        for n in sb:
            self.aliases[n] = sa

    def _register(self, f: ForStmt) -> None:
        """An iteration argument that starts from a task-id array is the same array to the update check."""
        for arg, init in zip(f.iter_args, f.init_values):
            if self._task_array(arg.name) and isinstance(init, Var) and self._task_array(init.name):
                self._alias(arg.name, init.name)

    def _dep(self, c: Call) -> str | None:
        deps = c.kwarg("deps")
        if not isinstance(deps, (ListExpr, TupleExpr)) or len(deps.items) != 1:
            return None
        d = deps.items[0]
        return d.name if isinstance(d, Var) and self._task_array(d.name) else None

    def index(self, body: tuple[Stmt, ...], nested_consumers: bool) -> _Index:
        ix = _Index()
        self._collect(body, ix, nested_consumers)
        return ix

    def _collect(self, body, ix: _Index, nested_consumers: bool) -> None:
        for s in body:
            if isinstance(s, ForStmt):
                ix.defined.update(a.name for a in s.iter_args)
                ix.defined.update(t.name for t in s.results)
                self._register(s)
                inner = self.index(s.body, s.kind == "range")
                ix.defined |= inner.defined
                ix.updated |= inner.updated
                trip = _trip(s)
                if nested_consumers and trip is not None and trip > 0:
                    for key, n in inner.count.items():
                        ix.add(key, n * trip, inner.calls[key])
                continue
            if isinstance(s, AssignStmt):
                ix.defined.add(s.target.name)
                v = s.value
                if isinstance(v, Call) and v.kind == "op" and v.op == "array.update_element" and v.args \
                        and isinstance(v.args[0], Var):
                    ix.updated |= self.aliases.get(v.args[0].name, {v.args[0].name})
            elif isinstance(s, YieldStmt):
                ix.defined.update(t.name for t in s.targets)
            elif isinstance(s, WhileStmt):
                ix.defined.update(a.name for a in s.iter_args)
            if isinstance(s, (IfStmt, WhileStmt, ScopeStmt)):
                for n in _own_exprs(s):
                    self._consumer(n, ix)
                for sub in _bodies(s):
                    self._collect(sub, ix, nested_consumers)
            else:
                for n in iter_nodes(s):
                    self._consumer(n, ix)

    def _consumer(self, n, ix: _Index) -> None:
        if isinstance(n, Call) and n.kind in SUBMITS:
            key = self._dep(n)
            if key is not None:
                ix.add(key, 1, {id(n)})

    def decisions(self, f: ForStmt) -> list[tuple[str, str, set[int]]]:
        """(dependency array, barrier name, consumer call ids) for each barrier `f` gets."""
        self._register(f)
        trip = _trip(f)
        if f.kind == "parallel" and (trip is None or trip <= 0):
            return []
        if f.kind == "range" and trip is not None and trip <= 0:
            return []
        ix = self.index(f.body, f.kind == "range")
        carried = {a.name for a in f.iter_args}
        out = []
        for key, n in ix.count.items():
            if key in carried or key in ix.defined or key in ix.updated:
                continue
            consumers = n * trip if trip is not None and trip > 0 else n
            extent = self._task_array(key).extent
            producers = extent.value if isinstance(extent, ConstInt) else 0
            if producers <= 0 or consumers <= 0 or producers * consumers - (producers + consumers) < 1:
                continue
            name = fresh_name(f"phase_fence_barrier_{self.counter}_tid", self.taken)
            self.counter += 1
            out.append((key, name, ix.calls[key]))
        return out

    # ------------------------------------------------------------------ rewriting
    def block(self, body: tuple[Stmt, ...], manual: bool) -> tuple[Stmt, ...]:
        out: list[Stmt] = []
        changed = False
        for s in body:
            new = self.stmt(s, manual)
            if isinstance(new, tuple):
                out.extend(new)
                changed = True
            else:
                out.append(new)
                changed |= new is not s
        return tuple(out) if changed else body

    def stmt(self, s: Stmt, manual: bool):
        if isinstance(s, ScopeStmt):
            m = _manual(s)
            inner = manual if m is None else m
            return rebuild_bodies(s, lambda b: self.block(b, inner))
        if isinstance(s, ForStmt):
            found = self.decisions(s) if manual else []
            loop = s
            if found:
                target = {cid: name for _, name, ids in found for cid in ids}
                loop = replace(s, body=_Retarget(target).mutate(s.body))
            loop = rebuild_bodies(loop, lambda b: self.block(b, manual))
            if not found:
                return loop
            barriers = tuple(AssignStmt(Var(name), Call("system.task_dummy", kwargs=(
                ("deps", ListExpr((Var(key),))),))) for key, name, _ in found)
            return barriers + (loop,)
        if isinstance(s, (IfStmt, WhileStmt)):
            return rebuild_bodies(s, lambda b: self.block(b, manual))
        return s


def _bodies(s):
    if isinstance(s, IfStmt):
        return (s.then_body, s.else_body)
    return (s.body,)


def _own_exprs(s):
    """The expressions of a compound statement outside its bodies (an if's condition, a while's)."""
    if isinstance(s, IfStmt):
        return tuple(iter_nodes(s.cond))
    if isinstance(s, WhileStmt):
        return tuple(n for e in (s.cond, *s.init_values) for n in iter_nodes(e))
    return tuple(n for e in s.args for n in iter_nodes(e))


class _Retarget(Mutator):
    """Make the chosen submits wait on their barrier."""

    def __init__(self, target: dict[int, str]):
        self.target = target

    def pre_Call(self, c: Call):
        name = self.target.get(id(c))
        if name is None:
            return None
        kwargs = tuple((k, ListExpr((Var(name),)) if k == "deps" else v) for k, v in c.kwargs)
        return replace(c, kwargs=kwargs)
