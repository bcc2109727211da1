"""MaterializeSemanticAliases: a loop's carried tile is written in the loop's own buffer.

Purpose
-------
A loop-carried tile (an iter_arg, its init value, the value yielded for it, the loop's result) must live
in one buffer: the next iteration reads what this one yielded from where the iter_arg lives. PyPTO's
InitMemRef gives the iter_arg and the result the init value's MemRef but the computation producing the
yielded value a fresh one; this pass (between InitMemRef and MemoryReuse, as in PyPTO) retargets that
producer onto the carried buffer, so it writes the next value in place. ptoc's InitMemRef already binds
what it can this way (its rule 4), so on ptoc's own IR the pass changes nothing; it brings IR in PyPTO's
form (a dump after PyPTO's InitMemRef, `ptoc passes --pipeline MaterializeSemanticAliases,...`) to
ptoc's.

Before (PyPTO's InitMemRef)::

    mem_vec_2: pl.Ptr = pl.tile.alloc(pl.Mem.Vec, 16384)
    mem_vec_3: pl.Ptr = pl.tile.alloc(pl.Mem.Vec, 16384)
    x0: pl.Tile[[64, 64], pl.FP32, pl.MemRef(mem_vec_2, 0, 16384), pl.Mem.Vec] = pl.tile.load(a, ...)
    for i, (acc,) in pl.range(4, init_values=(x0,)):
        nxt: pl.Tile[[64, 64], pl.FP32, pl.MemRef(mem_vec_3, 0, 16384), pl.Mem.Vec] = pl.tile.add(acc, acc)
        out: pl.Tile[[64, 64], pl.FP32, pl.MemRef(mem_vec_2, 0, 16384), pl.Mem.Vec] = pl.yield_(nxt)

After::

        nxt: pl.Tile[[64, 64], pl.FP32, pl.MemRef(mem_vec_2, 0, 16384), pl.Mem.Vec] = pl.tile.add(acc, acc)

Rules
-----
1. Loops are visited outermost first; for each carried tile whose yielded value sits in another buffer
   than the iter_arg, the value is retargeted onto the iter_arg's MemRef:
   - a value computed by an op inside the loop takes the MemRef, unless the op may not write over one
     of its operands living in that buffer (`ptoc.passes.common.NOT_IN_PLACE` / `forbidden_operands`,
     e.g. tile.mrgsort_format1 reading the iter_arg), the carried buffer is read or written after it in
     the loop body (the iter_arg's old value is still needed), or it is a view (its buffer is its
     operand's);
   - a destination-passing result written in place (tile.matmul_acc, tile.write, tile.scatter, ...:
     `ptoc.passes.common.TIED_OPS`, in its destination operand's buffer) moves with that operand: the operand
     is retargeted by these same rules (an if's result, a seed matmul, the iter_arg itself), as PyPTO's
     MemoryReuse pushes a carried buffer through an in-place accumulator onto its input
     (`PropagateFromForStmt`, `CoalesceAccumulatorIfPhis`); one in another buffer than its operand is
     declined;
   - an if's result is retargeted when the values both branches yield for it can be (all or nothing),
     and then takes the MemRef itself.
   All or nothing per carried tile: it is declined (stays where it is) also when a computed tile not
   retargeted with it (a view of it, say) shares the buffer it would leave.
2. Only MemRefs change: no alloc is added or removed (an alloc left without tiles is removed by
   MemoryReuse), no statement moves.

Where this pass deliberately differs from PyPTO
----------------------------------------------
- A declined value keeps its buffer and no copy is inserted here: ptoc's InitMemRef inserts the
  same-space move (`pl.tile.move` before the `pl.yield_`) where a carried value cannot be written in
  place, PyPTO's MemoryReuse does it afterwards (YieldFixup).
- PyPTO does this in its MemoryReuse, after its own MaterializeSemanticAliases; here it is one pass, so a
  dump after PyPTO's InitMemRef of a loop whose first K step is peeled into an if (matmul_l0_tiled) keeps
  one Acc buffer per loop, as PyPTO's MemoryReuse does (before, two: past the Acc capacity, PTOC-E0390).
"""

from __future__ import annotations

from dataclasses import replace

from ptoc.ir.nodes import (
    AssignStmt,
    Call,
    ForStmt,
    Function,
    IfStmt,
    MemRef,
    Program,
    ScopeStmt,
    Stmt,
    TileType,
    Var,
    WhileStmt,
    YieldStmt,
)
from ptoc.ir.visitor import walk
from ptoc.passes.common import TIED_OPS, forbidden_operands, iter_allocs, memref_bases, operand_named, resolve_op
from ptoc.passes.manager import Pass
from ptoc.passes.properties import KERNEL_TYPES

TILE_FUNCTION_TYPES = (*KERNEL_TYPES, "Opaque")
# Results that are their operand's buffer: a view, or a destination-passing op writing into an operand.
NOT_RETARGETED = frozenset({"tile.set_validshape", "tile.reshape", "tile.reinterpret_view", "tile.slice",
                            "tile.matmul_acc", "tile.write", "tile.scatter", "tile.scatter_mask",
                            "tile.gather_row"})


class MaterializeSemanticAliases(Pass):
    name = "MaterializeSemanticAliases"
    stage = "memory"
    summary = "a loop's yielded tile is computed in the carried buffer (loop-carried must-alias)"
    requires = frozenset({"memrefs"})
    produces = frozenset({"memrefs"})

    def run(self, program: Program, ctx) -> Program:
        todo = [f for f in program.functions if f.func_type in TILE_FUNCTION_TYPES and _has_carried_tiles(f)]
        if not todo:
            return program
        env = self.types(program, ctx)
        new = {}
        for f in todo:
            nf = materialize(f, env.get(f.name, {}), self.hand_over)
            if nf is not f:
                new[f.name] = nf
        if not new:
            return program
        return replace(program, functions=tuple(new.get(f.name, f) for f in program.functions))

    def adopt(self, program: Program, ctx) -> Program:
        # a dump after PyPTO's InitMemRef has MemRefs, but its yielded values are not retargeted yet
        return self.run(program, ctx)


def _has_carried_tiles(f: Function) -> bool:
    """`f` allocates a buffer and has a loop carrying values. (A walk that stops at the first such loop:
    the functions are new since InitMemRef, and no later pass shares a node index of them.)"""
    if next(iter_allocs(f.body), None) is None:
        return False
    return _carries(f.body)


def _carries(body: tuple[Stmt, ...]) -> bool:
    """A loop with iter_args is among the statements of `body` or of the bodies nested in them (loops are
    statements: the expressions and types a walk of the whole function would visit hold none)."""
    for s in body:
        cls = s.__class__
        if cls is ForStmt or cls is WhileStmt:
            if s.iter_args or _carries(s.body):  # type: ignore[union-attr]
                return True
        elif cls is IfStmt:
            if _carries(s.then_body) or _carries(s.else_body):  # type: ignore[union-attr]
                return True
        elif cls is ScopeStmt and _carries(s.body):  # type: ignore[union-attr]
            return True
    return False


def _base(t) -> str | None:
    bases = memref_bases(t)
    return bases[0] if bases else None


def _reads(s: Stmt) -> set[str]:
    return {n.name for n in walk(s) if isinstance(n, Var)}


def _defs(s: Stmt) -> list[str]:
    if isinstance(s, AssignStmt):
        return [s.target.name]
    if isinstance(s, YieldStmt):
        return [t.name for t in s.targets]
    out = []
    for n in walk(s):
        if isinstance(n, AssignStmt):
            out.append(n.target.name)
        elif isinstance(n, YieldStmt):
            out.extend(t.name for t in n.targets)
    return out


class _Retarget:
    def __init__(self, f: Function, env):
        self.env = env
        self.memref: dict[str, MemRef] = {}  # committed retypes
        self.where: dict[str, tuple[Stmt, list[tuple[tuple[Stmt, ...], int]]]] = {}  # name -> (stmt, chain)
        self.tiles_on: dict[str, list[str]] = {}
        for name, t in env.items():
            b = _base(t)
            if b is not None and isinstance(t, TileType):
                self.tiles_on.setdefault(b, []).append(name)
        self._index(f.body, [])

    def _index(self, body: tuple[Stmt, ...], chain) -> None:
        for i, s in enumerate(body):
            here = chain + [(body, i)]
            if isinstance(s, AssignStmt):
                self.where[s.target.name] = (s, here)
            elif isinstance(s, IfStmt):
                for r in s.results:
                    self.where[r.name] = (s, here)
                self._index(s.then_body, here)
                self._index(s.else_body, here)
            elif isinstance(s, (ForStmt, WhileStmt, ScopeStmt)):
                self._index(s.body, here)

    def current(self, name: str) -> MemRef | None:
        if name in self.memref:
            return self.memref[name]
        t = self.env.get(name)
        return t.memref if isinstance(t, TileType) else None

    def base_of(self, name: str) -> str | None:
        m = self.current(name)
        return m.base.name if m is not None and isinstance(m.base, Var) else None

    def visit(self, body: tuple[Stmt, ...]) -> None:
        for s in body:
            if isinstance(s, (ForStmt, WhileStmt)):
                self.loop(s)
                self.visit(s.body)
            elif isinstance(s, IfStmt):
                self.visit(s.then_body)
                self.visit(s.else_body)
            elif isinstance(s, ScopeStmt):
                self.visit(s.body)

    def loop(self, s: ForStmt | WhileStmt) -> None:
        if not s.body or not isinstance(s.body[-1], YieldStmt):
            return
        for ia, v in zip(s.iter_args, s.body[-1].values):
            target = self.current(ia.name)
            if target is None or not isinstance(target.base, Var) or not isinstance(v, Var):
                continue
            plan: dict[str, MemRef] = {}
            if self.plan(v.name, target, s, plan) and not self._left_behind(plan):
                self.memref.update(plan)

    def plan(self, name: str, target: MemRef, loop, plan: dict[str, MemRef]) -> bool:
        """Retype `name` (and what produces it) onto `target`; False when it must be declined."""
        if self.base_of(name) == target.base.name:  # type: ignore[union-attr]
            return True
        at = self.where.get(name)
        if at is None or not self._inside(at[1], loop):
            return False
        stmt, chain = at
        if isinstance(stmt, IfStmt):
            i = [r.name for r in stmt.results].index(name)
            for body in (stmt.then_body, stmt.else_body):
                if not body or not isinstance(body[-1], YieldStmt) or not isinstance(body[-1].values[i], Var):
                    return False
                if not self.plan(body[-1].values[i].name, target, loop, plan):  # type: ignore[union-attr]
                    return False
            plan[name] = target
            return True
        if not isinstance(stmt, AssignStmt) or not isinstance(stmt.value, Call) or stmt.value.kind != "op":
            return False
        call = stmt.value
        resolved = resolve_op(call, self.env)
        op = call.op if call.op.startswith("tile.") else getattr(resolved, "name", call.op)
        if op in TIED_OPS and resolved is not None:
            # written in place into its destination operand: that operand moves with it (PyPTO's
            # MemoryReuse pushes a carried buffer through an in-place accumulator onto its input, and
            # through an if onto both branches' values)
            dst = operand_named(resolved, call, TIED_OPS[op])
            if not isinstance(dst, Var) or self.base_of(dst.name) != self.base_of(name) \
                    or not self.plan(dst.name, target, loop, plan):
                return False
        elif op in NOT_RETARGETED:
            return False
        tb = target.base.name  # type: ignore[union-attr]
        if any(self.base_of(o) == tb for o in forbidden_operands(op, call.args, self.env.get(name), self.env)):
            return False
        if self._read_later(chain, loop, tb):
            return False
        plan[name] = target
        return True

    def _left_behind(self, plan: dict[str, MemRef]) -> bool:
        """Would a computed tile (a view, another value) stay on a buffer the plan moves tiles off?"""
        for name in plan:
            own = self.base_of(name)
            if own is not None and any(t not in plan and isinstance(self.where.get(t, (None,))[0], AssignStmt)
                                       for t in self.tiles_on.get(own, ())):
                return True
        return False

    @staticmethod
    def _inside(chain, loop) -> bool:
        return any(block[i] is loop for block, i in chain)

    def _read_later(self, chain, loop, base: str) -> bool:
        """Is `base` read or written by a statement after the one `chain` ends at, up to the loop's end?"""
        for block, i in reversed(chain):
            if block[i] is loop:
                return False
            for s in block[i + 1:]:
                names = _reads(s) | set(_defs(s))
                if isinstance(s, YieldStmt) and block is loop.body:
                    names = {v.name for v in s.values if isinstance(v, Var)}
                if any(self.base_of(n) == base for n in names if n in self.env):
                    return True
        return False


def materialize(f: Function, env, hand=None) -> Function:
    """`f` with its yielded tiles retargeted. `hand`: `Pass.hand_over`, told the value types of the result
    (those of `env`, each retargeted value's its new annotation) when `f` changed."""
    r = _Retarget(f, env)
    r.visit(f.body)
    if not r.memref:
        return f
    retyped: dict[str, TileType] = {}
    out = replace(f, body=_retype(f.body, r.memref, env, retyped))
    if hand is not None:
        hand(out, {name: retyped.get(name, t) for name, t in env.items()})
    return out


def _retype(body: tuple[Stmt, ...], memref: dict[str, MemRef], env, retyped: dict) -> tuple[Stmt, ...]:
    """`body` with the values of `memref` annotated with their new MemRef (each new annotation in `retyped`)."""
    out = []
    for s in body:
        if isinstance(s, AssignStmt) and s.target.name in memref:
            t = s.annotation if isinstance(s.annotation, TileType) else env.get(s.target.name)
            s = replace(s, annotation=replace(t, memref=memref[s.target.name]))
            retyped[s.target.name] = s.annotation
        elif isinstance(s, YieldStmt) and len(s.targets) == 1 and s.targets[0].name in memref:
            t = s.annotation if isinstance(s.annotation, TileType) else env.get(s.targets[0].name)
            s = replace(s, annotation=replace(t, memref=memref[s.targets[0].name]))
            retyped[s.targets[0].name] = s.annotation
        elif isinstance(s, (ForStmt, WhileStmt, ScopeStmt)):
            s = replace(s, body=_retype(s.body, memref, env, retyped))
        elif isinstance(s, IfStmt):
            s = replace(s, then_body=_retype(s.then_body, memref, env, retyped),
                        else_body=_retype(s.else_body, memref, env, retyped))
        out.append(s)
    return tuple(out)
