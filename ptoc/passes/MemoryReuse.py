"""MemoryReuse: let tiles whose lifetimes do not overlap share one on-chip buffer, as PyPTO's pass does.

Purpose
-------
InitMemRef gives every tile writer a buffer of its own (`mem_<space>_<n> = pl.tile.alloc(...)` at the top
of the function), sharing only where the program's meaning requires it (views, destination-passing ops,
loop-carried values; MaterializeSemanticAliases completes the last). This pass coalesces the rest, in
every function that holds tiles: a buffer whose tiles are all dead when another buffer's first tile is
written takes that buffer's place, its `pl.tile.alloc` disappears and its tiles' `pl.MemRef`s name the
surviving buffer. The address planner (AllocateMemoryAddr) then places fewer, larger-lived buffers.

Before (after InitMemRef)::

    mem_vec_2: pl.Ptr = pl.tile.alloc(pl.Mem.Vec, 16384)
    mem_vec_3: pl.Ptr = pl.tile.alloc(pl.Mem.Vec, 16384)
    mem_vec_4: pl.Ptr = pl.tile.alloc(pl.Mem.Vec, 16384)
    a: pl.Tile[[64, 64], pl.FP32, pl.MemRef(mem_vec_2, 0, 16384), pl.Mem.Vec] = pl.tile.load(x, ...)
    b: pl.Tile[[64, 64], pl.FP32, pl.MemRef(mem_vec_3, 0, 16384), pl.Mem.Vec] = pl.tile.exp(a)
    c: pl.Tile[[64, 64], pl.FP32, pl.MemRef(mem_vec_4, 0, 16384), pl.Mem.Vec] = pl.tile.recip(b)

After (`b` may be written over `a`, read for the last time by the exp; a recip never runs in place, so
`c` goes back to `a`'s buffer, which is free by then)::

    mem_vec_2: pl.Ptr = pl.tile.alloc(pl.Mem.Vec, 16384)
    mem_vec_3: pl.Ptr = pl.tile.alloc(pl.Mem.Vec, 16384)
    a: pl.Tile[[64, 64], pl.FP32, pl.MemRef(mem_vec_2, 0, 16384), pl.Mem.Vec] = pl.tile.load(x, ...)
    b: pl.Tile[[64, 64], pl.FP32, pl.MemRef(mem_vec_2, 0, 16384), pl.Mem.Vec] = pl.tile.exp(a)
    c: pl.Tile[[64, 64], pl.FP32, pl.MemRef(mem_vec_3, 0, 16384), pl.Mem.Vec] = pl.tile.recip(b)

Rules
-----
1. Every function that holds tiles (kernels and plain functions), as PyPTO; orchestration holds none. A
   function whose buffers are placed already (an alloc with `addr=`, or, PyPTO's form, a MemRef with an
   offset other than 0) is left alone. The property `coalesced` (nothing left to merge) lets the
   pipeline run this pass on a dump taken after InitMemRef rather than skip it.
2. Positions: the statements are numbered in program order, nested bodies included (then-branch before
   else-branch); an assignment, an expression statement, a `pl.yield_` and a `return` each take one
   position. An if's condition is read at the position of the first statement after it, a loop's
   init values at the position of its body's first statement.
3. A tile lives from the assignment defining it to its last read (an element taken from a tuple of
   tiles, `d = t[0]`, from the statement computing the tuple). A tile read inside a loop it was
   defined before lives to the loop's last position (the loop reads it again). A read of a loop's result
   counts as a read of its init value (the result lives in that buffer), a read of an if's result as a
   read of the values its branches computed for it. iter_args are not tiles of their own here.
4. A buffer is the set of tiles bound to one alloc; it lives from its first definition to its last read.
   Two buffers are compatible when their lifetimes do not overlap; touching is allowed (the last read
   of one at the statement that writes the other: a statement reads its operands before it writes), and
   so is an overlap that only comes from the two values of one if result in opposite branches.
5. Never in place: the result of an op may not share a buffer with the operands the hardware still
   reads while writing it: every operand of tile.move, recip, rsqrt, fmod(s), ands/ors/xors, prelu,
   fillpad_expand, sort32, mrgsort_format1/2, gather(b)/gather_mask/gather_compare/mgather, transpose,
   extract, concat, row_sum/max/min/prod/argmax/argmin, col_argmax/argmin and a widening tile.cast; the
   mask and scratch operands of tile.sel, the mask of tile.sels, the broadcast vector of the
   row_expand* / col_expand* ops (and row_expand_add's scratch). Checked both ways, on the buffer an
   operand sits in after the merges already decided.
6. Packing, per memory space: buffers largest first (alloc bytes; ties by first definition), each joins
   the first surviving buffer all of whose members it is compatible with, else survives itself. The
   survivor (the largest, earliest) keeps its alloc.
7. Rewrite: every MemRef naming a merged buffer names its survivor (offset and size kept), the merged
   allocs are removed, and so is an alloc no tile names any more (MaterializeSemanticAliases may leave
   one); the alloc order is kept. The `pipeline_membership` tags are dropped (in every function).
8. Pipeline stages (PyPTO's capacity-gated guard): a buffer's membership is that of the first of its
   tiles whose defining op carries `attrs={"pipeline_membership": "g:s;..."}` (LowerPipelineLoops). For
   each (space, region g) the slot is its largest tagged buffer and the depth D = min(number of copies,
   capacity // slot), at least 1. Two buffers sharing a region whose copies' ordinals (the copies in
   increasing order, 0, 1, ...) differ modulo D stay apart. After packing a space, while its buffers laid
   one after another (each its survivor's size, aligned, from the end of the space's slot buffers) pass
   its capacity, the region with the largest slot (ties: the lowest g) loses one of depth and the space
   is packed again (at most 256 times); when no region has depth left the space is packed by the plain
   rule: two copies of a region stay apart only outside L0 (Left, Right, Acc, Bias, scales) and when one
   is a `tile.load` / `tile.read`.

Where this pass deliberately differs from PyPTO
----------------------------------------------
- A tile moved onto a larger survivor keeps its own MemRef size (PyPTO writes the survivor's size into
  the tile that joins); the alloc carries the buffer's size either way.
- No Ascend910B load + tpop in-place guard; loop and if values already share one buffer from InitMemRef
  and MaterializeSemanticAliases, so no `tile.move` is inserted at a yield afterwards, except where
  PyPTO's own dump after InitMemRef gives the two branches of an if two buffers: then the else value is
  copied into the then value's buffer as PyPTO does (ptoc/analysis/if_yield_moves.py).
- Rule 8 reports nothing when a region gets less depth than it asked for (PyPTO's PH-MR-001 hint and
  its fallback warning). The property `coalesced` of this pass's own output remembers the pairs rule 8
  kept apart (the tags are gone); a dump printed after this pass and read back has lost them, so the
  pass, run again on it, may merge pipeline copies (still correct, no longer double-buffered).
"""

from __future__ import annotations

import weakref
from operator import attrgetter
from dataclasses import dataclass, field, replace

from ptoc.analysis.if_yield_moves import align_if_yields, split_if_yields
from ptoc.analysis.pipeline_stages import membership_pairs, reserved_end_by_space, without_membership
from ptoc.ir.nodes import (
    AssignStmt,
    BinOp,
    Call,
    ConstBool,
    ConstFloat,
    ConstInt,
    DTypeLit,
    EnumLit,
    EvalStmt,
    Expr,
    ForStmt,
    Function,
    GetItem,
    IfStmt,
    ListExpr,
    MemRef,
    MinMax,
    NoneLit,
    Program,
    ReturnStmt,
    ScopeStmt,
    Stmt,
    StrLit,
    TensorType,
    TileType,
    TupleExpr,
    TupleType,
    Var,
    WhileStmt,
    YieldStmt,
)
from ptoc.ir.visitor import Mutator, child_fields, walk
from ptoc.passes.common import (
    FORBIDDEN_OPERANDS,
    NOT_IN_PLACE,
    align_up,
    allocs,
    forbidden_operands,
    is_alloc,
    memref_bases,
    resolve_op,
)
from ptoc.passes.manager import Pass
from ptoc.passes.properties import KERNEL_TYPES
from ptoc.target.arch import get_arch
from ptoc.ir.verifier import NodeIndex

TILE_FUNCTION_TYPES = (*KERNEL_TYPES, "Opaque")

class MemoryReuse(Pass):
    name = "MemoryReuse"
    stage = "memory"
    summary = "buffers whose tiles' lifetimes do not overlap are coalesced into one (largest first)"
    requires = frozenset({"memrefs"})
    # `coalesced`: a dump after InitMemRef (ptoc's or PyPTO's) has MemRefs but is not coalesced yet, so
    # the pipeline runs this pass on it instead of skipping it
    produces = frozenset({"memrefs", "coalesced"})

    def adopt(self, program: Program, ctx) -> Program:
        """Skipped (the input is coalesced already): the pipeline membership tags are dropped all the same,
        and the pairs of buffers the stage guard keeps apart are remembered for the property check, as `run`
        remembers them (without them, the check would see two tagless buffers it could merge)."""
        tagged = [f for f in program.functions if _has_membership(f, self.cache)]
        if not tagged:
            return program
        env = self.types(program, ctx)
        arch = get_arch(ctx.arch)
        new = {f.name: coalesce(f, env.get(f.name, {}), arch) for f in tagged}
        return replace(program, functions=tuple(new.get(f.name, f) for f in program.functions))

    def run(self, program: Program, ctx) -> Program:
        todo = [f for f in program.functions if f.func_type in TILE_FUNCTION_TYPES and _unplaced(f, self.cache)]
        planned = {id(f) for f in todo}
        tagged = [f for f in program.functions if id(f) not in planned and _has_membership(f, self.cache)]
        if not todo and not tagged:
            return program
        env = self.types(program, ctx) if todo else {}
        arch = get_arch(ctx.arch)
        new: dict[str, Function] = {}
        for f in todo:
            nf = coalesce(f, env.get(f.name, {}), arch, hand=self.hand_over_remapped)
            if nf is not f:
                new[f.name] = nf
        for f in tagged:
            new[f.name] = _rebind_annotations(f, {}, set()) or _Rebind({}, set()).function(f)
            known = self.known_types(program, f)
            if known is not None:  # (the membership tags dropped: no value's type changes)
                self.hand_over(new[f.name], known)
        if not new:
            return program
        return replace(program, functions=tuple(new.get(f.name, f) for f in program.functions))


def _has_membership(f: Function, cache=None) -> bool:
    from ptoc.ir.verifier import NodeIndex

    return any(c.kwarg("attrs") is not None and membership_pairs(c) for c in NodeIndex.get(f, cache).of(Call))


# Buffers the pipeline-stage guard kept apart in a function this pass returned (by the function's id,
# while it lives): the property `coalesced` checks that output without the stage tags it has dropped.
_KEPT_APART: dict[int, tuple[weakref.ref, frozenset]] = {}


def _remember(f: Function, apart: set[frozenset]) -> None:
    key = id(f)
    _KEPT_APART[key] = (weakref.ref(f, lambda _r: _KEPT_APART.pop(key, None)), frozenset(apart))


def _kept_apart(f: Function) -> frozenset:
    entry = _KEPT_APART.get(id(f))
    return entry[1] if entry is not None and entry[0]() is f else frozenset()


def uncoalesced(program: Program, ctx, cache=None) -> list[str]:
    """The property `coalesced`: no function holds two buffers this pass would still merge (a function
    whose allocs are placed, or that has none, holds)."""
    todo = [f for f in program.functions if f.func_type in TILE_FUNCTION_TYPES and _unplaced(f, cache)]
    if not todo:
        return []
    from ptoc.ir.verifier import function_types

    types = function_types(program, ctx, cache=cache)
    arch = get_arch(ctx.arch)
    bad = []
    for f in todo:
        remap = plan(f, types.get(f.name, {}), arch=arch, apart=_kept_apart(f))
        bad += [f"{f.name}: buffer {m} could share {h}" for m, h in sorted(remap.items())]
        bad += split_if_yields(f, types.get(f.name, {}))
    return bad


def _unplaced(f: Function, cache=None) -> bool:
    """Allocs, none placed: no `addr=`, and every MemRef offset 0 (PyPTO's form after AllocateMemoryAddr
    writes the addresses as MemRef offsets instead). `cache`: the pipeline's, whose node index of `f`
    lists its MemRefs (no walk of the function)."""
    found = allocs(f.body)
    first = next(found, None)
    # (the first alloc decides a placed function, as every function is when the property is checked last)
    if first is None or first.value.kwarg("addr") is not None:  # type: ignore[union-attr]
        return False
    if any(s.value.kwarg("addr") is not None for s in found):  # type: ignore[union-attr]
        return False
    return not any(isinstance(n.base, Var) and not (isinstance(n.offset, ConstInt) and n.offset.value == 0)
                   for n in NodeIndex.get(f, cache).of(MemRef))


# expressions with no node below them that names a value
_NAMELESS = frozenset({ConstInt, ConstFloat, ConstBool, StrLit, NoneLit, DTypeLit, EnumLit})


def _names(e: Expr | None, out: list[str]) -> None:
    """Append the name of every variable under `e` to `out` (a call's arguments and keywords by hand, the
    rarer expressions by `walk`; the order is not walk order)."""
    if e is None:
        return
    cls = e.__class__
    if cls is Var:
        out.append(e.name)  # type: ignore[union-attr]
    elif cls is Call:
        # (a call's arguments are mostly names and constants: those are taken here, not by a call each)
        for a in e.args:  # type: ignore[union-attr]
            c = a.__class__
            if c is Var:
                out.append(a.name)
            elif c not in _NAMELESS:
                _names(a, out)
        for _, v in e.kwargs:  # type: ignore[union-attr]
            c = v.__class__
            if c is Var:
                out.append(v.name)
            elif c not in _NAMELESS:
                _names(v, out)
    elif cls is ListExpr or cls is TupleExpr:  # (a call's offsets and shapes)
        for a in e.items:  # type: ignore[union-attr]
            c = a.__class__
            if c is Var:
                out.append(a.name)
            elif c not in _NAMELESS:
                _names(a, out)
    elif cls is BinOp or cls is MinMax:
        _names(e.lhs, out)  # type: ignore[union-attr]
        _names(e.rhs, out)  # type: ignore[union-attr]
    elif cls is GetItem:
        _names(e.value, out)  # type: ignore[union-attr]
        _names(e.index, out)  # type: ignore[union-attr]
    elif cls not in _NAMELESS:
        out.extend(n.name for n in walk(e) if n.__class__ is Var)


@dataclass
class Lifetimes:
    """Rules 2-3: every tile's definition position and (loop-extended) last read."""

    defs: dict[str, int] = field(default_factory=dict)
    def_stmt: dict[str, AssignStmt] = field(default_factory=dict)
    last: dict[str, int] = field(default_factory=dict)
    families: dict[str, set[int]] = field(default_factory=dict)  # if-result families (rule 4)


class _Walk:
    def __init__(self, env):
        self.env = env
        self.pos = 0
        self.out = Lifetimes()
        self.raw: dict[str, int] = {}
        self.loops: list[tuple[int, int]] = []
        self.result_init: dict[str, str] = {}  # loop result -> its init value
        self.phi_sources: dict[str, list[str]] = {}  # if result -> branch-local values
        self.tuples: dict[str, int] = {}  # tuple of tiles -> the position of the op writing its elements
        self.next_family = 0

    def read(self, name: str, pos: int) -> None:
        srcs = self.phi_sources.get(name)
        if srcs is not None:
            for s in srcs:
                self.read(s, pos)
            return
        name = self.result_init.get(name, name)
        if name in self.out.defs:
            self.raw[name] = max(self.raw.get(name, pos), pos)

    def reads(self, e: Expr | None, pos: int) -> None:
        # the order of the reads does not matter: a read keeps the latest position
        names: list[str] = []
        _names(e, names)
        # (`self.read` of each name, its common case inline: most names read are no if result)
        phi, result_init, defs, raw = self.phi_sources, self.result_init, self.out.defs, self.raw
        for n in names:
            if n in phi:
                self.read(n, pos)
                continue
            n = result_init.get(n, n)
            if n in defs:
                r = raw.get(n)
                if r is None or r < pos:
                    raw[n] = pos

    def block(self, body: tuple[Stmt, ...]) -> None:
        for s in body:
            self.stmt(s)

    def stmt(self, s: Stmt) -> None:
        if s.__class__ is AssignStmt:  # (most statements; no node class is subclassed)
            pos = self.pos
            self.pos += 1
            t = self.env.get(s.target.name)
            if t.__class__ is TileType and t.memref is not None and not is_alloc(s):
                # an element of a tuple of tiles was written by the op that made the tuple
                src = s.value.value if isinstance(s.value, GetItem) else None
                self.out.defs[s.target.name] = self.tuples.get(src.name, pos) if isinstance(src, Var) else pos
                self.out.def_stmt[s.target.name] = s
            elif isinstance(t, TupleType) and memref_bases(t):
                self.tuples[s.target.name] = pos
            self.reads(s.value, pos)
        elif isinstance(s, EvalStmt):
            self.reads(s.expr, self.pos)
            self.pos += 1
        elif isinstance(s, (YieldStmt, ReturnStmt)):
            pos = self.pos
            self.pos += 1
            for v in s.values:
                self.reads(v, pos)
        elif isinstance(s, IfStmt):
            self._if(s)
        elif isinstance(s, (ForStmt, WhileStmt)):
            for v in s.init_values:
                self.reads(v, self.pos)
            start = self.pos
            self.block(s.body)
            self.loops.append((start, self.pos - 1))
            for r, init in zip(s.results, s.init_values):
                if isinstance(self.env.get(r.name), TileType) and isinstance(init, Var) \
                        and init.name in self.out.defs:
                    self.result_init[r.name] = init.name
        elif isinstance(s, ScopeStmt):
            self.block(s.body)

    def _if(self, s: IfStmt) -> None:
        self.reads(s.cond, self.pos)
        spans = []
        for body in (s.then_body, s.else_body):
            start = self.pos
            self.block(body)
            spans.append((body, start, self.pos - 1))
        for i, r in enumerate(s.results):
            t = self.env.get(r.name)
            if not isinstance(t, TileType) or t.memref is None:
                continue
            family = self.next_family
            self.next_family += 1
            local: list[str] = []
            seen: set[str] = set()
            for body, lo, hi in spans:
                if body and isinstance(body[-1], YieldStmt) and i < len(body[-1].values):
                    v = body[-1].values[i]
                    if isinstance(v, Var):
                        self._source(v.name, lo, hi, family, local, seen)
            if local:
                self.out.families.setdefault(r.name, set()).add(family)
                self.phi_sources[r.name] = local

    def _source(self, name: str, lo: int, hi: int, family: int, local: list[str], seen: set[str]) -> None:
        """Record `name`, yielded by a branch spanning positions lo..hi, as a value of an if result."""
        nested = self.phi_sources.get(name)
        if nested is not None:  # an inner if's result: its own branch-local values
            if name not in seen:
                seen.add(name)
                for n in nested:
                    self._source(n, lo, hi, family, local, seen)
            return
        d = self.out.defs.get(name)
        if d is None or not lo <= d <= hi:
            return  # computed before the if: not this result's own value
        local.append(name)
        self.out.families.setdefault(name, set()).add(family)

    def finish(self) -> Lifetimes:
        for name, d in self.out.defs.items():
            raw = self.raw.get(name, d)
            end = raw
            for lo, hi in self.loops:
                if d < lo <= raw:
                    end = max(end, hi)
            self.out.last[name] = end
        return self.out


def lifetimes(f: Function, env) -> Lifetimes:
    w = _Walk(env)
    w.block(f.body)
    return w.finish()


@dataclass
class _Buffer:
    name: str
    space: str
    size: int
    index: int  # alloc order
    tiles: list[str] = field(default_factory=list)  # in definition order
    start: int = 0
    end: int = 0


def _forbidden(f: Function, env) -> dict[str, list[str]]:
    """Rule 5: tile name -> the operand names its buffer may not share."""
    out: dict[str, list[str]] = {}
    pending: dict[str, list[str]] = {}  # tuple results -> forbidden operands of their elements
    for s in _assigns(f.body):
        if isinstance(s.value, GetItem) and isinstance(s.value.value, Var) and s.value.value.name in pending:
            out.setdefault(s.target.name, []).extend(pending[s.value.value.name])
        if not isinstance(s.value, Call) or s.value.kind != "op" or is_alloc(s):
            continue
        call = s.value
        op = call.op if call.op.startswith("tile.") else getattr(resolve_op(call, env), "name", call.op)
        if op not in NOT_IN_PLACE and op not in FORBIDDEN_OPERANDS and op != "tile.cast":
            continue  # (what `forbidden_operands` answers for any other op: nothing)
        bad = forbidden_operands(op, call.args, env.get(s.target.name), env)
        if not bad:
            continue
        if isinstance(env.get(s.target.name), TupleType):
            pending[s.target.name] = bad
        else:
            out.setdefault(s.target.name, []).extend(bad)
    return out


def _assigns(body: tuple[Stmt, ...]):
    for s in body:
        if isinstance(s, AssignStmt):
            yield s
        elif isinstance(s, (ForStmt, WhileStmt, ScopeStmt)):
            yield from _assigns(s.body)
        elif isinstance(s, IfStmt):
            yield from _assigns(s.then_body)
            yield from _assigns(s.else_body)


def _buffers(f: Function, env, life: Lifetimes) -> dict[str, _Buffer]:
    out: dict[str, _Buffer] = {}
    for i, s in enumerate(allocs(f.body)):
        call: Call = s.value  # type: ignore[assignment]
        space_e = call.args[0] if call.args else call.kwarg("memory")
        size_e = call.args[1] if len(call.args) > 1 else call.kwarg("size")
        if not isinstance(size_e, ConstInt):
            continue  # AllocateMemoryAddr reports it
        out[s.target.name] = _Buffer(s.target.name, space_e.member if isinstance(space_e, EnumLit) else "Vec",
                                     size_e.value, i)
    for name in sorted(life.defs, key=life.defs.__getitem__):
        for b in dict.fromkeys(memref_bases(env.get(name))):
            if b in out:
                out[b].tiles.append(name)
    for b in out.values():
        if b.tiles:
            b.start = min(life.defs[t] for t in b.tiles)
            b.end = max(life.last[t] for t in b.tiles)
    return out


def plan(f: Function, env, life: Lifetimes | None = None, arch=None, apart: frozenset = frozenset(),
         separated: set | None = None) -> dict[str, str]:
    """Rules 6-7: merged buffer -> surviving buffer. `apart`: pairs of buffers never to merge; `separated`
    collects the pairs the pipeline-stage guard kept apart in the packing returned."""
    return _Planner(f, env, life if life is not None else lifetimes(f, env), arch, apart).plan(separated)


class _Planner:
    def __init__(self, f: Function, env, life: Lifetimes, arch, apart: frozenset):
        self.f, self.env, self.life, self.arch, self.apart = f, env, life, arch, apart

    def plan(self, separated: set | None) -> dict[str, str]:
        f, env, life = self.f, self.env, self.life
        buffers = _buffers(f, env, life)
        forbidden = _forbidden(f, env)
        base_of = {t: b.name for b in buffers.values() for t in b.tiles}
        # buffer -> the buffers (as InitMemRef bound them) of the operands its tiles may not share one with:
        # an operand's own buffer does not change while packing, only where that buffer went (`physical`)
        forbid_by_buffer: dict[str, list[str]] = {}
        for t, ops in forbidden.items():
            if t in base_of:
                bases = forbid_by_buffer.setdefault(base_of[t], [])
                for o in ops:
                    ob = memref_bases(env.get(o))
                    if ob and ob[0] not in bases:
                        bases.append(ob[0])
        remap: dict[str, str] = {}

        def physical(buf: str | None) -> str | None:
            while buf is not None and buf in remap:
                buf = remap[buf]
            return buf

        def var_overlap(x: str, y: str) -> bool:
            return not (life.last[x] <= life.defs[y] or life.last[y] <= life.defs[x])

        def overlap_blocks(a: _Buffer, b: _Buffer) -> bool:
            family = False
            for x in a.tiles:
                fx = life.families.get(x, set())
                for y in b.tiles:
                    if fx & life.families.get(y, set()):
                        family = True
                    elif var_overlap(x, y):
                        return True
            return not family

        def forbid_blocks(writer: _Buffer, occupant: _Buffer) -> bool:
            bases = forbid_by_buffer.get(writer.name)
            if not bases:
                return False
            occ = physical(occupant.name)
            for b in bases:
                if physical(b) == occ:
                    return True
            return False

        stages = _Stages(buffers, life, self.arch, self.f)

        def can_share(cand: _Buffer, member: _Buffer) -> bool:
            if not (cand.end <= member.start or member.end <= cand.start) and overlap_blocks(cand, member):
                return False
            if forbid_blocks(cand, member) or forbid_blocks(member, cand):
                return False
            if self.apart and frozenset((cand.name, member.name)) in self.apart:
                return False
            return not stages.blocks(cand, member)

        def pack(order: list[_Buffer]) -> list[list[_Buffer]]:
            groups: list[list[_Buffer]] = []
            for cand in order:
                host = next((g for g in groups if all(can_share(cand, m) for m in g)), None)
                if host is None:
                    groups.append([cand])
                else:
                    host.append(cand)
            return groups

        spaces: dict[str, list[_Buffer]] = {}
        for b in buffers.values():
            if b.tiles:
                spaces.setdefault(b.space, []).append(b)
        for space in sorted(spaces):
            order = sorted(spaces[space], key=lambda b: (-b.size, b.start, b.index))
            groups = pack(order)
            repacks = 0
            while stages.overflows(space, groups):
                repacks += 1
                if repacks > MAX_SHED_REPACKS or not stages.shed(space):
                    stages.legacy.add(space)  # no depth fits: the packing without the capacity gate
                    groups = pack(order)
                    break
                groups = pack(order)
            for g in groups:
                for m in g[1:]:
                    remap[m.name] = g[0].name
            if separated is not None:
                separated.update(stages.kept_apart(groups))
        return remap


MAX_SHED_REPACKS = 256  # a bound on the re-packs of one space (PyPTO's)
L0_SPACES = frozenset({"Left", "Right", "Acc", "Bias", "LeftScale", "RightScale"})
LOAD_OPS = frozenset({"tile.load", "load", "tile.read", "read"})


class _Stages:
    """Rule 8, the pipeline-stage guard: the membership of each buffer (from the first of its tiles whose
    defining op has one) and the double-buffering depth each (space, group) can afford."""

    def __init__(self, buffers: dict[str, _Buffer], life: Lifetimes, arch, f: Function):
        self.arch = arch
        self.members: dict[str, list[tuple[int, int]]] = {}
        self.loads: set[str] = set()
        self.legacy: set[str] = set()  # spaces packed without the capacity gate
        for b in buffers.values():
            for t in b.tiles:
                s = life.def_stmt.get(t)
                pairs = membership_pairs(s.value) if s is not None and isinstance(s.value, Call) else []
                if pairs:
                    self.members[b.name] = pairs
                    if s.value.op in LOAD_OPS:  # type: ignore[union-attr]
                        self.loads.add(b.name)
                    break
        self.slot: dict[tuple[str, int], int] = {}
        seen: dict[tuple[str, int], set[int]] = {}
        for name, pairs in self.members.items():
            b = buffers[name]
            for g, st in pairs:
                key = (b.space, g)
                self.slot[key] = max(self.slot.get(key, 0), b.size)
                seen.setdefault(key, set()).add(st)
        self.depth: dict[tuple[str, int], int] = {}
        self.ordinal: dict[tuple[str, int], dict[int, int]] = {}
        self.gated: set[str] = set()  # spaces of known capacity
        for key, slot in self.slot.items():
            cap = self._cap(key[0])
            d = 1
            if cap and slot:
                d = max(1, min(len(seen[key]), cap // slot))
                self.gated.add(key[0])
            self.depth[key] = d
            self.ordinal[key] = {st: i for i, st in enumerate(sorted(seen[key]))}
        self.floor: dict[str, int] = {}
        if self.members and arch is not None and f.func_type in KERNEL_TYPES:
            self.floor = reserved_end_by_space(f, arch)

    def _cap(self, space: str) -> int:
        return (self.arch.capacity(space) or 0) if self.arch is not None else 0

    def blocks(self, a: _Buffer, b: _Buffer) -> bool:
        """Whether a and b (of one space) must stay apart: copies of one pipeline the hardware overlaps."""
        pa, pb = self.members.get(a.name), self.members.get(b.name)
        if not pa or not pb:
            return False
        if a.space in self.gated and a.space not in self.legacy:
            for ga, sa in pa:
                for gb, sb in pb:
                    if ga != gb:
                        continue
                    key = (a.space, ga)
                    k = max(1, self.depth.get(key, 1))
                    o = self.ordinal.get(key, {})
                    if o.get(sa, sa) % k != o.get(sb, sb) % k:
                        return True
            return False
        if a.space in L0_SPACES:
            return False
        if not any(ga == gb and sa != sb for ga, sa in pa for gb, sb in pb):
            return False
        return a.name in self.loads or b.name in self.loads

    def overflows(self, space: str, groups: list[list[_Buffer]]) -> bool:
        """Whether the buffers of `groups`, one after another from the end of the space's slot buffers (each
        as large as its largest member, aligned), pass the space's capacity."""
        cap = self._cap(space)
        if not cap or not self.members or space in self.legacy:
            return False
        end = self.floor.get(space, 0)
        for g in groups:
            end = align_up(end + max(b.size for b in g), self.arch.alignment_bytes)
        return end > cap

    def shed(self, space: str) -> bool:
        """Lower by one the depth of the group of `space` with the largest slot (ties: the lowest group);
        False when every group of the space is at depth 1."""
        todo = [(-align_up(self.slot[key], self.arch.alignment_bytes), key[1]) for key, d in self.depth.items()
                if key[0] == space and d > 1]
        if not todo:
            return False
        self.depth[(space, min(todo)[1])] -= 1
        return True

    def kept_apart(self, groups: list[list[_Buffer]]) -> set[frozenset]:
        """The pairs of surviving buffers this guard keeps apart in `groups`."""
        out: set[frozenset] = set()
        tagged = [(g, [b for b in g if b.name in self.members]) for g in groups]
        tagged = [(g, ms) for g, ms in tagged if ms]
        for i, (g, ms) in enumerate(tagged):
            for h, ns in tagged[i + 1:]:
                if any(self.blocks(x, y) for x in ms for y in ns):
                    out.add(frozenset((g[0].name, h[0].name)))
        return out


def coalesce(f: Function, env, arch=None, hand=None) -> Function:
    """`f` with its coalesced buffers merged. `hand`: `Pass.hand_over_remapped`, told the value types of the
    result (those of `env` with every MemRef on a merged buffer naming its survivor, the dropped allocs'
    names gone) when `f` changed, unless if-yield copies were added (their values are new: the pipeline
    infers that function's types)."""
    separated: set[frozenset] = set()
    remap = plan(f, env, arch=arch, separated=separated)
    used = set()
    for t in env.values():  # (`memref_bases` of each value, a tile's inline: most values are tiles or scalars)
        cls = t.__class__
        if cls is TileType:
            m = t.memref
            if m is not None and m.base.__class__ is Var:
                used.add(m.base.name)
        elif cls is TupleType:
            used.update(memref_bases(t))
    unused = {s.target.name for s in allocs(f.body)} - used  # type: ignore[union-attr]
    split = split_if_yields(f, env)
    if not remap and not unused and not split and not _has_membership(f):
        return f
    out = _rebind_annotations(f, remap, unused) or _Rebind(remap, unused).function(f)
    if split:  # PyPTO's form after InitMemRef: copy one branch's value into the other's buffer
        out = align_if_yields(out, env, remap, lambda space: arch is None or arch.tmov.legal(space, space))
    if separated:
        _remember(out, separated)
    if hand is not None and not split:  # (the copies align_if_yields adds are new values: typed afresh)
        renamed: dict[int, tuple[MemRef, MemRef]] = {}  # id(MemRef) -> (it, renamed): a buffer's tiles share one

        def new_ref(m: MemRef) -> MemRef:
            hit = renamed.get(id(m))
            if hit is None or hit[0] is not m:
                hit = renamed[id(m)] = (m, _renamed(m, remap))
            return hit[1]

        hand(out, env, new_ref, unused.union(remap))
    return out


def _renamed(m: MemRef, remap: dict[str, str]) -> MemRef:
    """`m` naming the survivor of its buffer when that was merged (as `_Rebind` renames it)."""
    base = m.base
    if base.__class__ is Var and base.name in remap:  # type: ignore[attr-defined]
        # (`replace(m, base=replace(base, name=...))`, built directly: asked for most tiles of a kernel)
        return MemRef(Var(remap[base.name], span=base.span), m.offset, m.size, m.declared, m.slots,  # type: ignore[attr-defined]
                      m.slot, span=m.span)
    return m


def _rebind_annotations(f: Function, remap: dict[str, str], unused: set[str]) -> Function | None:
    """`_Rebind(remap, unused).function(f)` when the merged buffers are named nowhere but in the MemRefs of
    the statements' annotations (and their own allocs), as in InitMemRef's output, and every call with
    attributes (a pipeline tag) is a statement's value: then only those annotations and calls change, and
    the other statements are not traversed. None when that does not hold (found by counting: the places
    a merged buffer's name is read here, and the calls with attributes met, must be every one the
    function's node index lists)."""
    from ptoc.ir.verifier import NodeIndex

    index = NodeIndex.get(f)
    with_attrs = sum(1 for c in index.of(Call) if c.kwargs and c.kwarg("attrs") is not None)
    expected = sum(map(remap.__contains__, map(_NAME, index.of(Var)))) if remap else 0  # (counted in C)
    rebind = _Rebind(remap, unused)
    done: dict[int, tuple] = {}  # id(type or MemRef) -> (it, rewritten, the merged names read in it)
    hits = 0

    def count(node) -> int:
        return _count_named(node, remap)

    def memref_hits(m: MemRef) -> int:
        e = done.get(id(m))
        if e is None or e[0] is not m:
            e = done[id(m)] = (m, None, count(m))
        return e[2]

    def retype(t):
        e = done.get(id(t))
        if e is None or e[0] is not t:
            if t.__class__ is TileType:
                n_shape = 0
                for d in t.shape:  # (most extents are constants)
                    if d.__class__ is not ConstInt:
                        n_shape += count(d)
                n_ref = memref_hits(t.memref) if t.memref is not None else 0
                n_view = count(t.view) if t.view is not None else 0
                n = n_shape + n_ref + n_view
                if n and not n_shape and not n_view:
                    # (only the MemRef names a merged buffer, as nearly always: `rebind.mutate(t)` would
                    # give the shape and the view back as they are, after traversing them)
                    new = TileType(t.shape, t.dtype, rebind.mutate(t.memref), t.memory, t.view, span=t.span)
                else:
                    new = rebind.mutate(t) if n else t
            else:
                n = count(t)
                new = rebind.mutate(t) if n else t
            e = done[id(t)] = (t, new, n)
        return e

    def block(body: tuple[Stmt, ...]) -> tuple[Stmt, ...]:
        nonlocal hits, tagged
        out = []
        changed = False
        for s in body:
            cls = s.__class__
            if cls is AssignStmt and (s.target.name in remap or s.target.name in unused) and is_alloc(s):  # type: ignore[union-attr]
                hits += s.target.name in remap  # type: ignore[union-attr]
                changed = True
                continue
            if with_attrs and (cls is AssignStmt or cls is EvalStmt):  # (`_Rebind.mutate_Call` of its value)
                field_name = "value" if cls is AssignStmt else "expr"
                v = getattr(s, field_name)
                if v.__class__ is Call and v.kwarg("attrs") is not None:  # type: ignore[union-attr]
                    tagged += 1
                    nv = without_membership(v)  # type: ignore[arg-type]
                    if nv is not v:
                        s = replace(s, **{field_name: nv})
                        changed = True
            if (cls is AssignStmt or cls is YieldStmt) and s.annotation is not None:  # type: ignore[union-attr]
                _, ann, n = retype(s.annotation)  # type: ignore[union-attr]
                if n:
                    hits += n
                    # (`replace(s, annotation=ann)`, built directly: most statements of a kernel bind a tile)
                    s = AssignStmt(s.target, s.value, ann, span=s.span) if cls is AssignStmt else \
                        YieldStmt(s.targets, s.values, ann, span=s.span)  # type: ignore[union-attr]
                    changed = True
            elif cls in _BODY_FIELDS:
                new = {name: block(getattr(s, name)) for name in _BODY_FIELDS[cls]}
                new = {k: v for k, v in new.items() if v is not getattr(s, k)}
                if new:
                    s = replace(s, **new)
                    changed = True
            out.append(s)
        return tuple(out) if changed else body

    tagged = 0
    body = block(f.body)
    return replace(f, body=body) if hits == expected and tagged == with_attrs else None


_NAME = attrgetter("name")


def _count_named(node, names) -> int:
    """How many variables under `node` (itself included) are named in `names`: `walk`'s count, with the
    parts of a MemRef (a name and constants, in nearly every annotation) taken apart here."""
    cls = node.__class__
    if cls is Var:
        return 1 if node.name in names else 0
    if cls in _NAMELESS:
        return 0
    if cls is MemRef:
        n = _count_named(node.base, names) + _count_named(node.offset, names) + _count_named(node.size, names)
        return n if node.slot is None else n + _count_named(node.slot, names)
    return sum(1 for n in walk(node) if n.__class__ is Var and n.name in names)  # type: ignore[attr-defined]


class _Rebind(Mutator):
    """Every reference to a merged buffer names its survivor; the merged allocs are dropped.

    Most statements of a function hold no merged buffer's name and no pipeline tag, so the rewrite keeps
    them (and every body holding only such statements) as the very objects: a statement is rebuilt only
    where something under it changed, a loop or an if only when its header or a body changed. A tile type
    with a MemRef is done by hand, and each type object once (`_types`, by identity): the annotations
    are most of what a generic traversal of the statements would visit."""

    def __init__(self, remap: dict[str, str], unused: set[str]):
        self.remap = remap
        self.unused = unused
        self._types: dict[int, tuple] = {}  # id(type) -> (type, the type rewritten)

    def function(self, f: Function) -> Function:
        return replace(f, body=self.block(f.body))

    def block(self, body: tuple[Stmt, ...]) -> tuple[Stmt, ...]:
        out = []
        changed = False
        for s in body:
            if is_alloc(s) and (s.target.name in self.remap or s.target.name in self.unused):  # type: ignore[union-attr]
                changed = True
                continue
            cls = s.__class__
            if cls in _BODY_FIELDS:
                n = self._compound(s, _BODY_FIELDS[cls])
            else:
                n = self.mutate(s)
            if n is not s:
                changed = True
            out.append(n)
        return tuple(out) if changed else body

    def _compound(self, s: Stmt, bodies: tuple[str, ...]) -> Stmt:
        """A loop, if or scope: its header as `mutate` does it, its bodies by `block`; `s` when neither changed."""
        changes = {}
        for name in child_fields(s.__class__):
            old = getattr(s, name)
            new = self.block(old) if name in bodies else self.mutate(old)
            if new is not old:
                changes[name] = new
        return replace(s, **changes) if changes else s

    def mutate(self, node):
        # `Mutator.mutate` with the nodes most statements are made of done here directly (names, constants,
        # calls and their argument tuples, types); the rest goes to the generic traversal
        cls = node.__class__
        if cls is Var:
            new = self.remap.get(node.name)
            return Var(new, span=node.span) if new is not None else node
        if cls in _NAMELESS:
            return node
        if cls is Call:
            args = self._items(node.args)
            kwargs = node.kwargs
            if kwargs:
                kwargs = tuple([kv if (v := self.mutate(kv[1])) is kv[1] else (kv[0], v) for kv in kwargs])
                if all(a is b for a, b in zip(kwargs, node.kwargs)):
                    kwargs = node.kwargs
            if args is not node.args or kwargs is not node.kwargs:
                node = replace(node, args=args, kwargs=kwargs)
            return self.mutate_Call(node)
        if cls is AssignStmt:
            target, value = self.mutate(node.target), self.mutate(node.value)
            ann = self.mutate(node.annotation) if node.annotation is not None else None
            if target is node.target and value is node.value and ann is node.annotation:
                return node
            return AssignStmt(target, value, ann, span=node.span)  # (`replace`, built directly)
        if cls in _TYPES_BY_HAND:
            hit = self._types.get(id(node))
            if hit is not None and hit[0] is node:
                return hit[1]
            if cls is TileType:
                new = self._tile_type(node)
            elif cls is MemRef:
                new = self._memref(node)
            else:
                new = super().mutate(node)
            self._types[id(node)] = (node, new)
            return new
        return super().mutate(node)

    def _tile_type(self, t: TileType) -> TileType:
        """`Mutator.mutate` of a tile type: its shape, MemRef (base, offset, size, slot) and view."""
        shape = self._items(t.shape)
        m = self.mutate(t.memref) if t.memref is not None else None
        view = self.mutate(t.view) if t.view is not None else None
        if shape is t.shape and m is t.memref and view is t.view:
            return t
        return TileType(shape, t.dtype, m, t.memory, view, span=t.span)  # (`replace`, built directly)

    def _memref(self, m: MemRef) -> MemRef:
        """`Mutator.mutate` of a MemRef (one object serves every tile of a buffer InitMemRef bound)."""
        base, offset, size = self.mutate(m.base), self.mutate(m.offset), self.mutate(m.size)
        slot = self.mutate(m.slot) if m.slot is not None else None
        if base is m.base and offset is m.offset and size is m.size and slot is m.slot:
            return m
        return MemRef(base, offset, size, m.declared, m.slots, slot, span=m.span)  # (`replace`, built directly)

    def _items(self, items: tuple) -> tuple:
        new = tuple([self.mutate(x) for x in items])
        return items if all(a is b for a, b in zip(new, items)) else new

    def pre_Var(self, v: Var):
        new = self.remap.get(v.name)
        return replace(v, name=new) if new is not None else v

    def mutate_Call(self, c: Call):
        """The pipeline membership has done its work here: it is dropped (rule 7)."""
        return without_membership(c) if c.kwarg("attrs") is not None else c


# The statements holding bodies, and those fields (`_Rebind` rewrites a body statement by statement).
_BODY_FIELDS: dict[type, tuple[str, ...]] = {ForStmt: ("body",), WhileStmt: ("body",), ScopeStmt: ("body",),
                                             IfStmt: ("then_body", "else_body")}
# Types (and MemRefs) `_Rebind` rewrites once per object (a tile type and a MemRef by hand, the others
# through the generic traversal).
_TYPES_BY_HAND = frozenset({TileType, TupleType, TensorType, MemRef})
