"""AllocateMemoryAddr: give every on-chip buffer of a kernel a byte address (`addr=`).

Purpose
-------
InitMemRef declares each buffer with `pl.tile.alloc(pl.Mem.<Space>, <bytes>)` and binds tiles to it
through `pl.MemRef`. This pass places the buffers: every alloc gets `addr=<byte offset>` inside its
memory space (property `addresses`), buffers whose lifetimes do not overlap share memory, and a space
that cannot hold what is live at once is a user error.

Before::

    mem_vec_0: pl.Ptr = pl.tile.alloc(pl.Mem.Vec, 16384)
    ta: pl.Tile[[64, 64], pl.FP32, pl.MemRef(mem_vec_0, 0, 16384), pl.Mem.Vec] = pl.tile.load(a, ...)
    mem_vec_1: pl.Ptr = pl.tile.alloc(pl.Mem.Vec, 16384)
    tb: pl.Tile[[64, 64], pl.FP32, pl.MemRef(mem_vec_1, 0, 16384), pl.Mem.Vec] = pl.tile.exp(ta)
    mem_vec_2: pl.Ptr = pl.tile.alloc(pl.Mem.Vec, 16384)
    tc: pl.Tile[[64, 64], pl.FP32, pl.MemRef(mem_vec_2, 0, 16384), pl.Mem.Vec] = pl.tile.exp(tb)

After (ta is dead once tb is computed, so tc takes its place)::

    mem_vec_0: pl.Ptr = pl.tile.alloc(pl.Mem.Vec, 16384, addr=0)
    ...
    mem_vec_1: pl.Ptr = pl.tile.alloc(pl.Mem.Vec, 16384, addr=16384)
    ...
    mem_vec_2: pl.Ptr = pl.tile.alloc(pl.Mem.Vec, 16384, addr=0)

Rules
-----
1. Lifetimes are intervals over the linear statement order (pre-order; a loop or if also has an end
   position after its body). A buffer is live from the first definition of a value bound to it (its
   alloc, at the top of the function, only declares it) to the last read or definition of any value
   bound to it (every name whose type carries `pl.MemRef(<its pointer>, ...)`: tiles, iter_args, loop and
   if results). A read inside a loop of a buffer allocated outside that loop keeps the buffer live to the
   end of the loop, so loop-carried buffers live across the whole loop. An operand and the result of one
   statement overlap: a result never takes its operand's address.
2. First fit, per memory space, buffers in the order of their names as strings (PyPTO's
   `DefaultMemoryAllocatorPolicy::OrderMemRefs`: `mem_vec_10` before `mem_vec_6`): the lowest address, a
   multiple of the target's alignment (32 bytes), where the buffer does not overlap any placed buffer
   whose lifetime overlaps its own. Same input, same addresses. PyPTO lays the buffers one after another
   (its MemoryReuse has already merged the ones that may share); on the buffers MemoryReuse leaves, all
   live at once, first fit in that order gives PyPTO's addresses.
3. The peak (highest end address) of a space must fit its capacity (`ptoc.target.arch`, through the
   context's arch: A2/A3 Vec 184 KiB usable, Acc 128 KiB; A5 Vec 240 KiB, Acc 256 KiB; ...), else
   PTOC-E0390 names the space, the bytes needed, the line of the buffer that reaches the peak and the
   capacity, with the buffers live there as notes. Spaces without a known capacity are not checked.
4. A kernel whose allocs all have an address already is left alone (idempotent; hand-placed buffers are
   kept). Otherwise every alloc is (re)placed. An alloc size must be a constant (PTOC-E0391).
5. PyPTO's form of a placed kernel (what PyPTO prints after its AllocateMemoryAddr, and ptoc with
   `--print-style pypto`): no alloc has `addr=` and the byte offset of each `pl.MemRef` is the address
   itself. When no alloc of a kernel has `addr=` and the MemRef offsets are constants that place the
   buffers (aligned, buffers live at the same time in disjoint byte ranges, within capacity), they are
   taken as the addresses (`adopt`): each alloc gets `addr=` = the lowest offset of the MemRefs on it and
   those MemRefs keep the rest. Such a kernel has the `addresses` property, so the pass manager does not
   re-plan it. Every offset 0 (InitMemRef's output, ptoc's or PyPTO's) is not taken as a placement: the
   planner runs.

6. Slot buffers (`pl.system.reserve_buffer`, the consumer's end of a cross-core pipe), as PyPTO places
   them: in the consumer's space (Mat in an AIC kernel, else Vec), at their `base=` when it is 0 or more,
   the others one after another from 0; each takes the bytes of the ring the toolchain's PTOAS builds,
   `slot_size * 8`, or its `size=` when larger (aligned). The pass writes each base into the IR (`base=`)
   and places that space's buffers from the end of the last ring; a ring and tiles that pass the capacity
   are PTOC-E0620. A PyPTO placement (rule 5) whose buffers overlap such a ring (PyPTO's ring is only the
   IR's `size=`) is not adopted: the MemRef offsets are made relative to their buffers and the buffers
   placed anew.

Not done: hand-placed and planned buffers mixed in one kernel (all are re-placed); branch-aware
lifetimes (a buffer read in either branch of an if is live over both).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from ptoc.diagnostics import CompileError, Diagnostic, Span, sorted_diagnostics
from ptoc.ir.dtypes import INDEX
from ptoc.ir.nodes import (
    AssignStmt,
    Call,
    ConstInt,
    EnumLit,
    ForStmt,
    Function,
    IfStmt,
    MemRef,
    Program,
    ScopeStmt,
    Stmt,
    StrLit,
    TileType,
    TupleType,
    Type,
    Var,
    WhileStmt,
)
from ptoc.analysis.flow import Flow
from ptoc.analysis.pipeline_stages import Reserved, reserved_buffers
from ptoc.ir.visitor import Mutator, rebuild_bodies
from ptoc.passes.common import align_up, allocs, is_alloc, iter_allocs, memref_bases
from ptoc.passes.manager import Pass
from ptoc.passes.properties import KERNEL_TYPES
from ptoc.target.arch import KiB, get_arch
from ptoc.ir.verifier import NodeIndex


@dataclass
class _Buffer:
    name: str
    space: str
    size: int
    start: int
    end: int
    span: Span
    addr: int = 0
    tiles: list[str] = field(default_factory=list)  # values bound to the buffer, in definition order


class AllocateMemoryAddr(Pass):
    name = "AllocateMemoryAddr"
    stage = "memory"
    summary = "give every pl.tile.alloc a 32-byte aligned addr=; buffers with disjoint lifetimes share memory"
    requires = frozenset({"memrefs"})
    produces = frozenset({"addresses"})

    def adopt(self, program: Program, ctx) -> Program:
        """The kernels whose MemRef offsets already place their buffers (rule 5) with `addr=` on their
        allocs; the others unchanged."""
        todo = [f for f in program.functions if f.func_type in KERNEL_TYPES and _needs_addresses(f)
                and placed_by_offsets(f, self.cache)]
        if not todo:
            return program
        arch = get_arch(ctx.arch)
        env = self.types(program, ctx)
        new = {}
        for f in todo:
            placed = _offsets_placement(f, env[f.name], arch, reserved=False)
            if isinstance(placed, dict):
                new[f.name] = _adopt(f, placed)
                if _reserve_clash(f, env[f.name], placed, arch) is not None:
                    # the slot ring this target builds is larger than the one the offsets leave room
                    # for: keep the MemRefs' offsets within their buffers, and place the buffers anew
                    new[f.name] = _drop_addrs(new[f.name])
                # (the MemRefs rebased; addr= on the allocs changes no value's type)
                self.hand_over_remapped(new[f.name], env[f.name], _Rebase(placed).mutate_MemRef)
        return replace(program, functions=tuple(new.get(f.name, f) for f in program.functions)) if new else program

    def run(self, program: Program, ctx) -> Program:
        program = self.adopt(program, ctx)
        todo = [f for f in program.functions if f.func_type in KERNEL_TYPES and _needs_addresses(f)]
        if not todo:
            return program
        arch = get_arch(ctx.arch)
        env = self.types(program, ctx)
        diags: list[Diagnostic] = []
        new: dict[str, Function] = {}
        for f in todo:
            try:
                new[f.name] = _place(f, env[f.name], arch)
                self.hand_over(new[f.name], env[f.name])  # (addr= and base= on calls: no value's type changes)
            except CompileError as e:
                diags.extend(e.diagnostics)
        if diags:
            raise CompileError(sorted_diagnostics(diags))
        return replace(program, functions=tuple(new.get(f.name, f) for f in program.functions))


def _needs_addresses(f: Function) -> bool:
    return any(s.value.kwarg("addr") is None for s in iter_allocs(f.body))  # type: ignore[union-attr]


def _place(f: Function, env: dict[str, Type | None], arch) -> Function:
    flow = Flow(f)
    buffers = _buffers(f, flow, arch)
    _lifetimes(flow, env, buffers)
    reserved = reserved_buffers(f, arch)
    floor: dict[str, int] = {}  # `reserved_end_by_space(f, arch)`, from the slot buffers found once
    for r in reserved:
        floor[r.space] = max(floor.get(r.space, 0), r.base + r.size)
    by_space: dict[str, list[_Buffer]] = {}
    for b in sorted(buffers.values(), key=lambda b: b.name):
        by_space.setdefault(b.space, []).append(b)
    diags: list[Diagnostic] = []
    for space, bs in by_space.items():
        _first_fit(bs, arch, floor.get(space, 0))
        d = _over_capacity(space, bs, arch)
        if d is not None:
            diags.append(_ring_overflow(space, bs, reserved, arch) if floor.get(space) else d)
    for space in sorted(set(floor) - set(by_space)):
        cap = arch.capacity(space)
        if cap is not None and floor[space] > cap:
            diags.append(_ring_overflow(space, [], reserved, arch))
    if diags:
        raise CompileError(sorted_diagnostics(diags))
    bases = {id(r.stmt): r.base for r in reserved}
    return replace(f, body=_with_addrs_top(f.body, buffers, bases))


def _buffers(f: Function, flow: Flow, arch) -> dict[str, _Buffer]:
    """One buffer per pl.tile.alloc, its size aligned, its lifetime starting where it is allocated."""
    diags: list[Diagnostic] = []
    buffers: dict[str, _Buffer] = {}
    for s in allocs(f.body):
        call: Call = s.value  # type: ignore[assignment]
        space_e = call.args[0] if call.args else call.kwarg("memory")
        size_e = call.args[1] if len(call.args) > 1 else call.kwarg("size")
        space = space_e.member if isinstance(space_e, EnumLit) else "Vec"
        if not isinstance(size_e, ConstInt):
            diags.append(Diagnostic(
                "PTOC-E0391", f"the size of buffer {s.target.name!r} is not a constant", s.span,
                hint="allocate the static upper bound in bytes, e.g. pl.tile.alloc(pl.Mem.Vec, 16384)"))
            continue
        pos = flow.defs[s.target.name].pos
        buffers[s.target.name] = _Buffer(s.target.name, space, align_up(size_e.value, arch.alignment_bytes),
                                         pos, pos, s.span)
    if diags:
        raise CompileError(diags)
    return buffers


def _lifetimes(flow: Flow, env: dict[str, Type | None], buffers: dict[str, _Buffer]) -> None:
    """Extend each buffer's lifetime over every definition and read of the tiles bound to it."""

    # (only the values bound to a buffer take part: most values of a kernel are scalars, or tiles in a
    # pipe slot, and are not sorted)
    bases: dict[str, list[_Buffer]] = {}
    for name, t in env.items():
        if t.__class__ is TileType:  # (`memref_bases(t)` of one tile, inline: most bound values are)
            m = t.memref
            b = buffers.get(m.base.name) if m is not None and m.base.__class__ is Var else None
            if b is not None:
                bases[name] = [b]
            continue
        refs = memref_bases(t)
        if refs:
            bound = [buffers[b] for b in dict.fromkeys(refs) if b in buffers]
            if bound:
                bases[name] = bound
    loops = flow.loops
    names = sorted(bases, key=lambda n: (flow.defs[n].pos if n in flow.defs else -1, n))
    # A buffer's lifetime starts at the first definition of a value bound to it, not at its alloc:
    # InitMemRef declares every buffer at the top of the function.
    first: dict[str, int] = {}
    for name in names:
        if name in flow.defs and name not in buffers:
            for b in bases[name]:
                if b.name not in first:
                    first[b.name] = flow.defs[name].pos
    for b in buffers.values():
        if b.name in first:
            b.start = b.end = first[b.name]
    for name in names:
        bound = bases[name]
        if name in buffers:
            continue
        sites = [flow.defs[name]] if name in flow.defs else []
        sites += flow.uses.get(name, [])
        for b in bound:
            b.tiles.append(name)
            start, end = b.start, b.end
            for site in sites:
                reach = site.pos
                for loop in site.loops:  # outermost first: the widest loop that the buffer outlives
                    loop_start, loop_end = loops[loop]
                    if start < loop_start:
                        if loop_end > reach:
                            reach = loop_end
                        break
                if reach > end:
                    end = reach
            b.end = end


def _memrefs(t: Type | None) -> list[MemRef]:
    """The on-chip MemRefs (on an allocation's pointer) in a value's type."""
    if isinstance(t, TupleType):
        return [m for x in t.types for m in _memrefs(x)]
    if isinstance(t, TileType) and t.memref is not None and isinstance(t.memref.base, Var):
        return [t.memref]
    return []


def _offsets_placement(f: Function, env: dict[str, Type | None], arch,
                       reserved: bool = True) -> dict[str, int] | str:
    """Rule 5: alloc name -> the address its MemRef offsets give, or why they do not place the buffers
    (`reserved`: also when a buffer overlaps a slot buffer)."""
    flow = Flow(f)
    try:
        buffers = _buffers(f, flow, arch)
    except CompileError:
        return "an allocation size is not a constant"
    addr: dict[str, int] = {}
    for name, t in env.items():
        for m in _memrefs(t):
            if m.base.name not in buffers:  # type: ignore[union-attr]
                continue
            if not isinstance(m.offset, ConstInt):
                return f"the MemRef offset of {name} is not a constant"
            base = m.base.name  # type: ignore[union-attr]
            addr[base] = min(addr.get(base, m.offset.value), m.offset.value)
    _lifetimes(flow, env, buffers)
    for b in buffers.values():
        b.addr = addr.get(b.name, 0)
        if b.addr % arch.alignment_bytes:
            return f"{b.name} would sit at {b.addr}, not a multiple of {arch.alignment_bytes} bytes"
    bs = sorted(buffers.values(), key=lambda b: (b.start, b.name))
    for i, x in enumerate(bs):
        for y in bs[i + 1:]:
            if x.space == y.space and y.start <= x.end and x.start <= y.end and \
                    x.addr < y.addr + y.size and y.addr < x.addr + x.size:
                return (f"{x.name} and {y.name} ({x.space}) are live at the same time and their offsets "
                        f"{x.addr} and {y.addr} overlap")
    for space in sorted({b.space for b in bs}):
        if _over_capacity(space, [b for b in bs if b.space == space], arch) is not None:
            return f"the offsets exceed the capacity of {space}"
    placed = {b.name: b.addr for b in bs}
    clash = _reserve_clash(f, env, placed, arch) if reserved else None
    return clash if clash is not None else placed


def _reserve_clash(f: Function, env: dict[str, Type | None], placed: dict[str, int], arch) -> str | None:
    """Why buffers placed at `placed` overlap a slot buffer of `f` (rule 6), or None."""
    reserved = reserved_buffers(f, arch)
    if not reserved:
        return None
    for s in allocs(f.body):
        call: Call = s.value  # type: ignore[assignment]
        space_e = call.args[0] if call.args else call.kwarg("memory")
        size_e = call.args[1] if len(call.args) > 1 else call.kwarg("size")
        space = space_e.member if isinstance(space_e, EnumLit) else "Vec"
        lo = placed.get(s.target.name)
        if lo is None or not isinstance(size_e, ConstInt):
            continue
        for r in reserved:
            if r.space == space and lo < r.base + r.size and r.base < lo + size_e.value:
                return (f"{s.target.name} at {lo} overlaps the slot buffer at {r.base} "
                        f"({r.size} bytes in {space})")
    return None


def _drop_addrs(f: Function) -> Function:
    """`f` with no `addr=` on its allocs (the planner places them)."""

    def strip(s: Stmt) -> Stmt:
        if is_alloc(s):
            call: Call = s.value  # type: ignore[union-attr, assignment]
            return replace(s, value=replace(call, kwargs=tuple((k, v) for k, v in call.kwargs if k != "addr")))
        return rebuild_bodies(s, lambda b: tuple(strip(x) for x in b))

    return replace(f, body=tuple(strip(s) for s in f.body))


def placed_by_offsets(f: Function, cache=None) -> bool:
    """Whether kernel `f` may be in PyPTO's placed form: some MemRef on an allocation has an offset other
    than the constant 0 (InitMemRef's output has only 0; all offsets 0 is left to the planner, which
    then gives every buffer 0 too when none overlaps another)."""
    return any(isinstance(m.base, Var) and not (isinstance(m.offset, ConstInt) and m.offset.value == 0)
               for m in NodeIndex.get(f, cache).of(MemRef))


def offsets_placement_problem(f: Function, env, ctx, cache=None) -> str | None:
    """None when the MemRef offsets of kernel `f` (no alloc with `addr=`) place its buffers (rule 5), else
    why not. `env`: its value types, or a function that gives them, asked only when the offsets are not
    all 0 (the types of a kernel InitMemRef just bound cost more than the answer needs)."""
    if not placed_by_offsets(f, cache):
        return "every MemRef offset is 0 (not placed yet)"
    placed = _offsets_placement(f, env() if callable(env) else env, get_arch(ctx.arch))
    return placed if isinstance(placed, str) else None


class _Rebase(Mutator):
    """addr= on the allocs of `addrs`; the MemRefs on them keep their offset less that address."""

    def __init__(self, addrs: dict[str, int]):
        self.addrs = addrs

    def mutate_MemRef(self, m: MemRef) -> MemRef:
        a = self.addrs.get(m.base.name) if isinstance(m.base, Var) else None
        if not a or not isinstance(m.offset, ConstInt):
            return m
        return replace(m, offset=replace(m.offset, value=m.offset.value - a))

    def mutate_AssignStmt(self, s: AssignStmt) -> AssignStmt:
        if is_alloc(s) and s.target.name in self.addrs:
            call: Call = s.value  # type: ignore[assignment]
            kwargs = call.kwargs + (("addr", ConstInt(self.addrs[s.target.name], INDEX)),)
            return replace(s, value=replace(call, kwargs=kwargs))
        return s


def _adopt(f: Function, addrs: dict[str, int]) -> Function:
    return _Rebase(addrs).mutate(f)


def _first_fit(bs: list[_Buffer], arch, floor: int = 0) -> None:
    """Give each buffer of one space (in start order) the lowest aligned address from `floor` (the end of
    the space's slot buffers) free for its lifetime."""
    placed: list[_Buffer] = []
    for b in bs:
        # buffers come in start order: one that ends before this one starts is free for every later one
        # too, so it leaves `placed` for good (first fit over the live buffers only, not all so far)
        placed = [p for p in placed if p.end >= b.start]
        busy = sorted((p.addr, p.addr + p.size) for p in placed)
        addr = floor
        for lo, hi in busy:
            if addr + b.size <= lo:
                break
            addr = max(addr, align_up(hi, arch.alignment_bytes))
        b.addr = addr
        placed.append(b)


def _over_capacity(space: str, bs: list[_Buffer], arch) -> Diagnostic | None:
    """PTOC-E0390 when the placed buffers of `space` peak above the target's capacity of it."""
    cap = arch.capacity(space)
    peak = max(b.addr + b.size for b in bs)
    if cap is None or peak <= cap:
        return None
    top = next(b for b in bs if b.addr + b.size == peak)
    live = [p for p in bs if p.start <= top.start <= p.end]
    where = f" at line {top.span.line}" if top.span.known else ""
    usable = " usable" if space == "Vec" else ""
    return Diagnostic(
        "PTOC-E0390", f"{space} needs {peak} bytes{where} but holds {cap} ({cap // KiB} KiB{usable})",
        top.span,
        hint=f"keep fewer or smaller {space} tiles live at once: split the work into smaller tiles "
        "processed in a loop, or finish using a tile before the next one is created",
        notes=tuple((f"{', '.join(p.tiles) or p.name} ({p.name}): {p.size} bytes at offset {p.addr}",
                     p.span) for p in live))


def _ring_overflow(space: str, bs: list[_Buffer], reserved: list[Reserved], arch) -> Diagnostic:
    """PTOC-E0620: the slot buffers of `space` and the tiles placed after them pass its capacity."""
    ring = next(r for r in reserved if r.space == space)
    cap = arch.capacity(space) or 0
    peak = max([b.addr + b.size for b in bs] + [r.base + r.size for r in reserved if r.space == space])
    name = ring.stmt.value.kwarg("name")  # type: ignore[union-attr]
    label = repr(name.value) if isinstance(name, StrLit) else ring.stmt.target.name  # type: ignore[union-attr]
    return Diagnostic(
        "PTOC-E0620", f"the cross-core slot buffer {label} ({ring.size} bytes at {ring.base} in {space}) "
        f"does not fit beside the kernel's {space} tiles ({peak} bytes of {cap})", ring.stmt.span,
        hint="make the tiles crossing between the cores smaller (fewer bytes per slot), or the "
             "kernel's own tiles smaller",
        notes=tuple((f"{', '.join(b.tiles) or b.name} ({b.name}): {b.size} bytes at offset {b.addr}", b.span)
                    for b in bs))


def _with_addr(s: Stmt, buffers: dict[str, _Buffer], bases: dict[int, int]) -> Stmt:
    """`s` with addr= on every pl.tile.alloc it holds and base= on every slot buffer (`bases`, by the id of
    its statement)."""
    if is_alloc(s) and s.target.name in buffers:  # type: ignore[union-attr]
        call: Call = s.value  # type: ignore[union-attr, assignment]
        kwargs = tuple((k, v) for k, v in call.kwargs if k != "addr")
        kwargs += (("addr", ConstInt(buffers[s.target.name].addr, INDEX)),)  # type: ignore[union-attr]
        # (`replace(s, value=replace(call, kwargs=kwargs))`, built directly: one per buffer of the program)
        return AssignStmt(s.target, Call(call.op, call.args, kwargs, call.kind, span=call.span),  # type: ignore[union-attr]
                          s.annotation, span=s.span)  # type: ignore[union-attr]
    if id(s) in bases:
        call = s.value  # type: ignore[union-attr, assignment]
        base = ConstInt(bases[id(s)], INDEX, span=call.span)
        kwargs = tuple((k, base if k == "base" else v) for k, v in call.kwargs)
        if call.kwarg("base") is None:
            kwargs += (("base", base),)
        return replace(s, value=replace(call, kwargs=kwargs))
    cls = s.__class__
    if cls is ForStmt or cls is WhileStmt or cls is ScopeStmt:
        body = _with_addrs(s.body, buffers, bases)  # type: ignore[union-attr]
        return s if body is s.body else replace(s, body=body)  # type: ignore[union-attr]
    if cls is IfStmt:
        then_body = _with_addrs(s.then_body, buffers, bases)  # type: ignore[union-attr]
        else_body = _with_addrs(s.else_body, buffers, bases)  # type: ignore[union-attr]
        if then_body is s.then_body and else_body is s.else_body:  # type: ignore[union-attr]
            return s
        return replace(s, then_body=then_body, else_body=else_body)
    return s


def _with_addrs(body: tuple[Stmt, ...], buffers: dict[str, _Buffer], bases: dict[int, int]) -> tuple[Stmt, ...]:
    """`_with_addr` of each statement of `body`; `body` itself when none changed (the allocs sit at the top
    of the function: the nested bodies are mostly kept as they are)."""
    new = [_with_addr(s, buffers, bases) for s in body]
    return body if all(a is b for a, b in zip(new, body)) else tuple(new)


def _with_addrs_top(body: tuple[Stmt, ...], buffers: dict[str, _Buffer], bases: dict[int, int]) -> tuple[Stmt, ...]:
    """`_with_addrs(body, ...)` for a function's body: InitMemRef declares every buffer at the top of the
    function, and the slot buffers sit there too, so once the top-level statements seen hold every alloc
    of `buffers` and every slot buffer of `bases`, the statements after them are kept as they are without
    a walk of their bodies (single assignment: one statement per buffer name)."""
    wanted = len(buffers) + len(bases)
    out = list(body)
    for i, s in enumerate(body):
        if not wanted:
            break
        if (is_alloc(s) and s.target.name in buffers) or id(s) in bases:  # type: ignore[union-attr]
            wanted -= 1
        out[i] = _with_addr(s, buffers, bases)
    return body if all(a is b for a, b in zip(out, body)) else tuple(out)
