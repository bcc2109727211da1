"""The buffer of an if's tile result: both branches must yield it in one buffer (part of MemoryReuse).

The `.pto` form has no copy at an if's join: `scf.if` yields only scalars, so a tile result is the buffer
both branches wrote. ptoc's own InitMemRef puts an if's result and the values its branches yield into one
buffer from the start. PyPTO's InitMemRef does not: each branch value keeps a buffer of its own, and its
MemoryReuse ends by copying the else branch's value into the then branch's buffer (a same-space
`tile.move` right before the else branch's `pl.yield_`). A dump PyPTO printed after InitMemRef or
MaterializeSemanticAliases is in that state, so MemoryReuse does the same here:

Before (PyPTO's dump after InitMemRef)::

    if c:
        a: pl.Tile[[64, 64], pl.FP32, pl.MemRef(mem_vec_3, 0, 16384), pl.Mem.Vec] = pl.tile.muls(t, 2.0)
        r: pl.Tile[[64, 64], pl.FP32, pl.MemRef(mem_vec_3, 0, 16384), pl.Mem.Vec] = pl.yield_(a)
    else:
        b: pl.Tile[[64, 64], pl.FP32, pl.MemRef(mem_vec_5, 0, 16384), pl.Mem.Vec] = pl.tile.adds(t, 1.0)
        r: pl.Tile[[64, 64], pl.FP32, pl.MemRef(mem_vec_3, 0, 16384), pl.Mem.Vec] = pl.yield_(b)

After::

    else:
        b: pl.Tile[[64, 64], pl.FP32, pl.MemRef(mem_vec_5, 0, 16384), pl.Mem.Vec] = pl.tile.adds(t, 1.0)
        b_mv: pl.Tile[[64, 64], pl.FP32, pl.MemRef(mem_vec_3, 0, 16384), pl.Mem.Vec] = pl.tile.move(b, ...)
        r: pl.Tile[[64, 64], pl.FP32, pl.MemRef(mem_vec_3, 0, 16384), pl.Mem.Vec] = pl.yield_(b_mv)

Why the copy is safe after MemoryReuse has planned: the then branch's value is computed in that branch
and lives until the last read of the if's result, so in MemoryReuse's numbering (then branch before else
branch) its lifetime covers the whole else branch, and no other tile live at the end of the else branch
shares its buffer. So the target must be computed in its branch; when the then branch passes a value
through (computed before the if) and the else branch computes its own, the then branch gets the copy into
the else value's buffer instead (the same argument, mirrored). Inner ifs first. Left as they are (the
`.pto` emitter reports PTOC-E0870): both values computed before the if, and a memory space without a
same-space copy (Acc, MOV-6).
"""

from __future__ import annotations

from dataclasses import replace

from ptoc.ir.nodes import (
    AssignStmt,
    Call,
    EnumLit,
    ForStmt,
    Function,
    IfStmt,
    MemRef,
    ScopeStmt,
    Stmt,
    TileType,
    Var,
    WhileStmt,
    YieldStmt,
)


def _defined_in(body: tuple[Stmt, ...]) -> set[str]:
    """Every name an assignment or a nested yield in `body` binds (nested bodies included)."""
    out: set[str] = set()
    for s in body:
        if isinstance(s, AssignStmt):
            out.add(s.target.name)
        elif isinstance(s, YieldStmt):
            out.update(t.name for t in s.targets)
        elif isinstance(s, (ForStmt, WhileStmt, ScopeStmt)):
            out |= _defined_in(s.body)
            if isinstance(s, (ForStmt, WhileStmt)):
                out.update(r.name for r in s.results)
        elif isinstance(s, IfStmt):
            out |= _defined_in(s.then_body) | _defined_in(s.else_body)
    return out


class _Aligner:
    def __init__(self, types: dict, remap: dict[str, str], legal, taken: set[str]):
        self.types = types  # name -> type, MemRef bases as before the remap
        self.remap = remap  # merged buffer -> its survivor
        self.legal = legal  # space -> whether a same-space tile.move exists
        self.taken = taken
        self.changed = False

    def tile(self, e) -> TileType | None:
        """The type of `e` with its MemRef naming the surviving buffer, or None (not a planned tile)."""
        if not isinstance(e, Var):
            return None
        t = self.types.get(e.name)
        if not isinstance(t, TileType) or t.memref is None or not isinstance(t.memref.base, Var):
            return None
        new = self.remap.get(t.memref.base.name)
        return replace(t, memref=replace(t.memref, base=Var(new))) if new is not None else t

    def block(self, body: tuple[Stmt, ...]) -> tuple[Stmt, ...]:
        out = []
        for s in body:
            if isinstance(s, (ForStmt, WhileStmt, ScopeStmt)):
                s = replace(s, body=self.block(s.body))
            elif isinstance(s, IfStmt):
                s = self.if_stmt(replace(s, then_body=self.block(s.then_body), else_body=self.block(s.else_body)))
            out.append(s)
        return tuple(out)

    def if_stmt(self, s: IfStmt) -> IfStmt:
        bodies = [s.then_body, s.else_body]
        if not all(b and isinstance(b[-1], YieldStmt) for b in bodies) or not s.results:
            return s
        local = [_defined_in(b) for b in bodies]
        for k, r in enumerate(s.results):
            vals = [b[-1].values[k] if k < len(b[-1].values) else None for b in bodies]
            tys = [self.tile(v) for v in vals]
            if tys[0] is None or tys[1] is None or tys[0].memref.base.name == tys[1].memref.base.name:
                continue
            # the target: the then branch's own value, else the else branch's own value
            own = [isinstance(v, Var) and v.name in loc for v, loc in zip(vals, local)]
            dst = 0 if own[0] else 1 if own[1] else None
            src = 1 - dst if dst is not None else None
            space = tys[dst].memory if dst is not None else None
            if dst is None or tys[src].memory != space or not self.legal(space or "Vec"):
                continue
            target = tys[dst]
            name = self.fresh(f"{vals[src].name}_mv")
            moved = replace(tys[src], memref=target.memref)
            call = Call("tile.move", (vals[src],), (("target_memory", EnumLit("Mem", space or "Vec")),),
                        span=bodies[src][-1].span)
            move = AssignStmt(Var(name, span=bodies[src][-1].span), call, moved, span=bodies[src][-1].span)
            self.types[name] = moved
            for b in (0, 1):
                y = bodies[b][-1]
                values = tuple(Var(name, span=v.span) if (b == src and i == k) else v for i, v in enumerate(y.values))
                ann = y.annotation
                if len(y.targets) == 1 and isinstance(ann, TileType) and isinstance(ann.memref, MemRef):
                    ann = replace(ann, memref=target.memref)
                y = replace(y, values=values, annotation=ann)
                bodies[b] = (*bodies[b][:-1], move, y) if b == src else (*bodies[b][:-1], y)
            self.types[r.name] = target
            self.changed = True
        if not self.changed:
            return s
        return replace(s, then_body=bodies[0], else_body=bodies[1])

    def fresh(self, base: str) -> str:
        name, n = base, 1
        while name in self.taken:
            name, n = f"{base}_{n}", n + 1
        self.taken.add(name)
        return name


def align_if_yields(f: Function, types: dict, remap: dict[str, str], legal) -> Function:
    """`f` (its buffers already rebound by `remap`) with a same-space `tile.move` wherever the two branches
    of an if yield one tile result from two buffers (see the module docstring). `types`: the tile types
    of `f`'s values before the rebinding; `legal(space)`: whether `space` has a same-space copy."""
    taken = set(types) | _defined_in(f.body) | {p.name for p in f.params}
    a = _Aligner(dict(types), remap, legal, taken)
    body = a.block(f.body)
    return replace(f, body=body) if a.changed else f


def split_if_yields(f: Function, types: dict) -> list[str]:
    """The if results of `f` whose branches yield tiles in two different buffers (the property `coalesced`
    fails on them: MemoryReuse still has to copy one into the other's buffer)."""
    out: list[str] = []

    def walk(body: tuple[Stmt, ...]) -> None:
        for s in body:
            cls = s.__class__
            if cls is AssignStmt:  # (most statements; no node class is subclassed)
                continue
            if cls is ForStmt or cls is WhileStmt or cls is ScopeStmt:
                walk(s.body)
            elif cls is IfStmt:
                walk(s.then_body)
                walk(s.else_body)
                bodies = (s.then_body, s.else_body)
                if not all(b and isinstance(b[-1], YieldStmt) for b in bodies):
                    continue
                for k, r in enumerate(s.results):
                    bases = []
                    for b in bodies:
                        v = b[-1].values[k] if k < len(b[-1].values) else None
                        t = types.get(v.name) if isinstance(v, Var) else None
                        if isinstance(t, TileType) and t.memref is not None and isinstance(t.memref.base, Var):
                            bases.append(t.memref.base.name)
                    if len(bases) == 2 and bases[0] != bases[1]:
                        out.append(f"{f.name}: if result {r.name} is yielded from buffers {bases[0]} and {bases[1]}")

    walk(f.body)
    return out
