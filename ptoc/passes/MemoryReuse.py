"""MemoryReuse: let tiles whose lifetimes do not overlap share one on-chip buffer.

Purpose
-------
InitMemRef gives every tile writer a buffer of its own (`mem_<space>_<n> = pl.tile.alloc(...)`), sharing
only where the program's meaning requires it (views, in-place ops, loop-carried values). This pass
coalesces the rest: a buffer whose tiles are all dead before another buffer's first tile is written
takes that buffer's place, so its `pl.tile.alloc` disappears and its tiles' `pl.MemRef`s name the
surviving buffer. Beyond what the address planner (AllocateMemoryAddr) can do on its own, it lets an
element-wise op write its result over an operand read for the last time by that very op (in place,
as the vector unit allows for element-wise instructions): a kernel needing three buffers at the
statement `c = pl.tile.add(a, b)` needs two after it.

Before::

    mem_vec_0: pl.Ptr = pl.tile.alloc(pl.Mem.Vec, 65536)
    a: pl.Tile[[128, 128], pl.FP32, pl.MemRef(mem_vec_0, 0, 65536), pl.Mem.Vec] = pl.tile.load(x, ...)
    mem_vec_1: pl.Ptr = pl.tile.alloc(pl.Mem.Vec, 65536)
    b: pl.Tile[[128, 128], pl.FP32, pl.MemRef(mem_vec_1, 0, 65536), pl.Mem.Vec] = pl.tile.load(y, ...)
    mem_vec_2: pl.Ptr = pl.tile.alloc(pl.Mem.Vec, 65536)
    c: pl.Tile[[128, 128], pl.FP32, pl.MemRef(mem_vec_2, 0, 65536), pl.Mem.Vec] = pl.tile.add(a, b)

After (`a` is last read by the add, which may write over it)::

    mem_vec_0: pl.Ptr = pl.tile.alloc(pl.Mem.Vec, 65536)
    a: pl.Tile[[128, 128], pl.FP32, pl.MemRef(mem_vec_0, 0, 65536), pl.Mem.Vec] = pl.tile.load(x, ...)
    mem_vec_1: pl.Ptr = pl.tile.alloc(pl.Mem.Vec, 65536)
    b: pl.Tile[[128, 128], pl.FP32, pl.MemRef(mem_vec_1, 0, 65536), pl.Mem.Vec] = pl.tile.load(y, ...)
    c: pl.Tile[[128, 128], pl.FP32, pl.MemRef(mem_vec_0, 0, 65536), pl.Mem.Vec] = pl.tile.add(a, b)

Rules
-----
0. Only where it is needed: a memory space is coalesced when the address planner's own placement (first
   fit over the lifetimes below, AllocateMemoryAddr rule 2) would exceed the target's capacity of it
   (`ptoc/target/arch.py`). Elsewhere AllocateMemoryAddr already lets buffers with disjoint lifetimes
   share addresses, and keeping their handles apart spares the hardware pipelines the false
   dependencies that one shared buffer brings (PyPTO makes the same point about declared buffers).
1. Kernels only, before addresses are placed (a kernel whose allocs carry `addr=` is left alone).
2. Lifetimes as AllocateMemoryAddr computes them (`ptoc.analysis.flow`): a buffer lives from its alloc to
   the last definition or read of any value bound to it; a read inside a loop of a buffer allocated
   outside it keeps the buffer live to the loop's end (so loop-carried buffers live across the loop).
3. Buffers are visited in alloc order. Each joins the first earlier group (a surviving buffer and the
   buffers merged into it) of the same memory space and the same byte size whose members' lifetimes are
   all disjoint from its own, and whose alloc is in scope where it is needed (in the same block or an
   enclosing one). "Disjoint" also admits touching in place: a member last read by the statement that
   first writes the buffer, when that statement is an element-wise op from the in-place list below whose
   operand bound to the member has the result's shape, dtype width and TileView (so element i of the
   result lands exactly on element i of the operand).
4. In place: tile.add/sub/mul/div/maximum/minimum, their scalar forms (adds, subs, muls, divs, maximums,
   minimums), tile.exp/log/abs/neg/relu/sqrt. Never in place: moves, extracts, matmuls, reductions,
   broadcasts, gathers, casts and everything else (PyPTO marks recip, rsqrt, fmod, and/or/xor, prelu,
   move, extract, transpose, concat, gathers, sorts and reductions not in-place safe; ptoc uses a list of
   the safe ones instead, so a new op is never in place by accident).
5. Deterministic: the same input gives the same groups; buffer names are kept, merged allocs removed.

Where this pass deliberately differs from PyPTO
----------------------------------------------
- PyPTO also places allocations at the top of the function and gives parameters DDR MemRefs (InitMemRef's
  form there); ptoc keeps InitMemRef's placement: an alloc right before its first tile.
- PyPTO's loop-carry / if-phi retargeting (MaterializeSemanticAliases) is InitMemRef's rule 4 in ptoc.
- No pipeline-stage separation or capacity-driven shedding (PyPTO keeps double-buffered stages apart when
  they fit): ptoc has no LowerPipelineLoops yet, so every merge here is a pure saving.
- PyPTO coalesces every kernel; ptoc only a memory space that does not fit otherwise (rule 0).
- Buffers of different byte sizes are never merged (AllocateMemoryAddr still lets them share addresses
  over disjoint lifetimes).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from ptoc.analysis.flow import Flow, Site
from ptoc.ir.nodes import (
    AssignStmt,
    Call,
    ConstInt,
    EnumLit,
    ForStmt,
    Function,
    IfStmt,
    Program,
    ScopeStmt,
    Stmt,
    TileType,
    Var,
    WhileStmt,
)
from ptoc.ir.visitor import Mutator
from ptoc.passes.common import align_up, allocs, is_alloc, memref_bases, resolve_op
from ptoc.passes.manager import Pass
from ptoc.passes.properties import KERNEL_TYPES
from ptoc.target.arch import get_arch

INPLACE_SAFE = frozenset({
    "tile.add", "tile.sub", "tile.mul", "tile.div", "tile.maximum", "tile.minimum",
    "tile.adds", "tile.subs", "tile.muls", "tile.divs", "tile.maximums", "tile.minimums",
    "tile.exp", "tile.log", "tile.abs", "tile.neg", "tile.relu", "tile.sqrt",
})


class MemoryReuse(Pass):
    name = "MemoryReuse"
    stage = "memory"
    summary = "tiles with disjoint lifetimes share one buffer (element-wise ops may write over a dying operand)"
    requires = frozenset({"memrefs"})
    produces = frozenset({"memrefs"})

    def run(self, program: Program, ctx) -> Program:
        todo = [f for f in program.functions if f.func_type in KERNEL_TYPES and _unplaced(f)]
        if not todo:
            return program
        env = self.types(program, ctx)
        arch = get_arch(ctx.arch)
        new: dict[str, Function] = {}
        for f in todo:
            nf = _coalesce(f, env.get(f.name, {}), arch)
            if nf is not f:
                new[f.name] = nf
        if not new:
            return program
        return replace(program, functions=tuple(new.get(f.name, f) for f in program.functions))


@dataclass
class _Buffer:
    name: str
    space: str
    size: int
    start: int
    path: tuple[tuple[int, int], ...]
    end: int = 0
    tiles: list[str] = field(default_factory=list)
    members: list[_Buffer] = field(default_factory=list)  # for a surviving buffer: itself and those merged in


def _unplaced(f: Function) -> bool:
    found = list(allocs(f.body))
    return bool(found) and all(s.value.kwarg("addr") is None for s in found)  # type: ignore[union-attr]


def _buffers(f: Function, flow: Flow, env) -> list[_Buffer]:
    out: dict[str, _Buffer] = {}
    for s in allocs(f.body):
        call: Call = s.value  # type: ignore[assignment]
        space_e = call.args[0] if call.args else call.kwarg("memory")
        size_e = call.args[1] if len(call.args) > 1 else call.kwarg("size")
        if not isinstance(size_e, ConstInt):
            continue  # AllocateMemoryAddr reports it
        name = s.target.name  # type: ignore[union-attr]
        pos = int(flow.defs[name].pos)
        out[name] = _Buffer(name, space_e.member if isinstance(space_e, EnumLit) else "Vec", size_e.value, pos,
                            flow.paths[name], pos)

    def reach(site: Site, b: _Buffer) -> float:
        for loop in site.loops:  # outermost first: the widest loop the buffer outlives
            start, end = flow.loops[loop]
            if b.start < start:
                return max(site.pos, end)
        return site.pos

    for name in sorted(env, key=lambda n: (flow.defs[n].pos if n in flow.defs else -1, n)):
        bound = [out[b] for b in dict.fromkeys(memref_bases(env[name])) if b in out]
        if not bound or name in out:
            continue
        sites = ([flow.defs[name]] if name in flow.defs else []) + flow.uses.get(name, [])
        for b in bound:
            b.tiles.append(name)
            for site in sites:
                b.end = max(b.end, int(reach(site, b)))
    return sorted(out.values(), key=lambda b: b.start)


def _in_scope(target: _Buffer, b: _Buffer) -> bool:
    """`target`'s alloc is visible where `b`'s alloc stands: in the same block, or a block enclosing it."""
    depth = len(target.path)
    if len(b.path) < depth or b.path[:depth - 1] != target.path[:depth - 1]:
        return False
    return b.path[depth - 1][0] == target.path[-1][0]


def _peak(bs: list[_Buffer], align: int) -> int:
    """The highest end address when `bs` (one space, in start order) are placed first fit over their
    lifetimes: the address planner's own placement (AllocateMemoryAddr rule 2)."""
    placed: list[tuple[int, int, int]] = []  # (end of lifetime, address, size)
    peak = 0
    for b in bs:
        placed = [p for p in placed if p[0] >= b.start]
        addr = 0
        for lo, hi in sorted((a, a + n) for _, a, n in placed):
            if addr + b.size <= lo:
                break
            addr = max(addr, align_up(hi, align))
        placed.append((b.end, addr, b.size))
        peak = max(peak, addr + b.size)
    return peak


def _coalesce(f: Function, env, arch) -> Function:
    flow = Flow(f)
    buffers = _buffers(f, flow, env)
    for b in buffers:
        b.size = align_up(b.size, arch.alignment_bytes)
    spaces = sorted({b.space for b in buffers})
    tight = {sp for sp in spaces if (cap := arch.capacity(sp)) is not None
             and _peak([b for b in buffers if b.space == sp], arch.alignment_bytes) > cap}
    buffers = [b for b in buffers if b.space in tight]
    if not buffers:
        return f
    by_name = {b.name: b for b in buffers}
    bound_to: dict[str, str] = {}
    for b in buffers:
        for t in b.tiles:
            bound_to.setdefault(t, b.name)
    groups: list[_Buffer] = []
    remap: dict[str, str] = {}
    for b in buffers:
        if not b.tiles:
            continue
        first_def = min((flow.defs[t] for t in b.tiles if t in flow.defs), key=lambda s: s.pos, default=None)
        inplace_from = _inplace_operands(flow, b, first_def, env, bound_to, by_name)
        host = None
        for g in groups:
            if g.space != b.space or g.size != b.size or not _in_scope(g, b):
                continue
            if all(m.end < b.start or (first_def is not None and m.end == first_def.pos and m.name in inplace_from)
                   or m.start > b.end for m in g.members):
                host = g
                break
        if host is None:
            b.members = [b]
            groups.append(b)
        else:
            host.members.append(b)
            remap[b.name] = host.name
    if not remap:
        return f
    return _Rebind(remap).function(f)


def _inplace_operands(flow: Flow, b: _Buffer, first_def: Site | None, env, bound_to, by_name) -> set[str]:
    """Buffers whose tile `b`'s first writer may overwrite in place (rule 3)."""
    if first_def is None:
        return set()
    writer = next((flow.def_stmt[t] for t in b.tiles if t in flow.def_stmt and flow.defs[t] == first_def), None)
    if not isinstance(writer, AssignStmt) or not isinstance(writer.value, Call):
        return set()
    op = resolve_op(writer.value, env)
    if op is None or op.name not in INPLACE_SAFE:
        return set()
    result = env.get(writer.target.name)
    if not isinstance(result, TileType):
        return set()
    out = set()
    for a in writer.value.args:
        if not isinstance(a, Var):
            continue
        t = env.get(a.name)
        if isinstance(t, TileType) and t.shape == result.shape and t.dtype.bits == result.dtype.bits \
                and t.view == result.view and a.name in bound_to:  # same element layout: index i is index i
            out.add(bound_to[a.name])
    return out


class _Rebind(Mutator):
    """Every reference to a merged buffer names its host; the merged allocs are dropped."""

    def __init__(self, remap: dict[str, str]):
        self.remap = remap

    def function(self, f: Function) -> Function:
        return replace(f, body=self.block(f.body))

    def block(self, body: tuple[Stmt, ...]) -> tuple[Stmt, ...]:
        out = []
        for s in body:
            if is_alloc(s) and s.target.name in self.remap:  # type: ignore[union-attr]
                continue
            if isinstance(s, (ForStmt, WhileStmt, ScopeStmt)):
                s = replace(self.mutate(replace(s, body=())), body=self.block(s.body))
            elif isinstance(s, IfStmt):
                s = replace(self.mutate(replace(s, then_body=(), else_body=())),
                            then_body=self.block(s.then_body), else_body=self.block(s.else_body))
            else:
                s = self.mutate(s)
            out.append(s)
        return tuple(out)

    def pre_Var(self, v: Var):
        new = self.remap.get(v.name)
        return replace(v, name=new) if new is not None else v
