"""InitMemRef: bind every tile to an on-chip buffer (`pl.tile.alloc` + `pl.MemRef`).

Purpose
-------
After InferTileMemorySpace every tile names its memory space, but not where it lives. This pass
decides which tiles share one buffer and declares each buffer once, at the top of the function:
`mem_<space>_<n>: pl.Ptr = pl.tile.alloc(pl.Mem.<Space>, <bytes>)`, and every tile bound to the buffer
carries `pl.MemRef(mem_<space>_<n>, 0, <bytes>)` in its type (property `memrefs`). Each static tensor
parameter names its GM region, `pl.MemRef("mem_ddr_<k>", 0, <bytes>)`. Addresses come later
(AllocateMemoryAddr). The allocations are ordinary SSA statements, so the printed IR re-parses and checks.

Before::

    def k(self, a: pl.Tensor[[64, 64], pl.FP32], ...):
        ta: pl.Tile[[64, 64], pl.FP32, pl.Mem.Vec] = pl.tile.load(a, [0, 0], [64, 64], target_memory=pl.Mem.Vec)
        tb: pl.Tile[[64, 64], pl.FP32, pl.Mem.Vec] = pl.tile.exp(ta)

After::

    def k(self, a: pl.Tensor[[64, 64], pl.FP32, pl.MemRef("mem_ddr_0", 0, 16384)], ...):
        mem_vec_1: pl.Ptr = pl.tile.alloc(pl.Mem.Vec, 16384)
        mem_vec_2: pl.Ptr = pl.tile.alloc(pl.Mem.Vec, 16384)
        ta: pl.Tile[[64, 64], pl.FP32, pl.MemRef(mem_vec_1, 0, 16384), pl.Mem.Vec] = pl.tile.load(...)
        tb: pl.Tile[[64, 64], pl.FP32, pl.MemRef(mem_vec_2, 0, 16384), pl.Mem.Vec] = pl.tile.exp(ta)

Rules
-----
0. Kernels (InCore, AIC, AIV) and plain functions (no type) that hold tiles, as PyPTO plans every
   function; an orchestration function holds no tiles and is left alone. A function that already holds
   a `pl.tile.alloc` is planned and left alone (the pass is idempotent). A tile-typed kernel parameter has no on-chip buffer (PTOC-E0384), nor
   a tile a kernel returns (PTOC-E0670).
   A tile computed inside another expression (`pl.tile.exp(pl.tile.sub(a, b))`), or yielded / returned
   straight from a call, first gets a statement of its own (`e_sub: T = pl.tile.sub(a, b)`).
1. Writers get a fresh buffer: tile.load, tile.create, tile.full, tile.move, every compute op result,
   calls returning tiles. A tuple of tiles (e.g. tile.quant_mx) gets one buffer per tile element.
1a. A tile that lives in a pipe slot (a tpop result, and a view or plain copy of one) gets no buffer and
   no MemRef: its data is in the slot buffer the pipe set-up reserves (as PyPTO's InitMemRef). One that
   a loop or an if carries keeps a buffer of its own (the carried buffer must hold it).
2. Views alias their source's buffer (same MemRef): tile.set_validshape, tile.reshape,
   tile.reinterpret_view, tile.slice, a plain copy `y = x`, a tuple element `d = t[0]`.
   Destination-passing ops write their result into one operand's buffer in place: tile.matmul_acc
   (acc), tile.write (tile), tile.scatter / tile.scatter_mask (dst). tile.store returns a tensor: no buffer.
3. Sharing is sound only if no tile of a buffer is read after another tile overwrites it. Reads are
   branch- and loop-aware: a read in the other branch of an if never follows; a tile from outside a loop
   that is read inside it is read again after every write in the loop. A move never runs in place (OP-7),
   nor does an op the hardware runs reading its sources while it writes (recip, reductions, sorts, ...:
   `ptoc.passes.common.NOT_IN_PLACE`).
   A conflict of an in-place op is a user error (PTOC-E0383).
4. Loop-carried tiles keep one buffer "when types allow": a loop's iter_arg, its result, the value
   yielded for it and its init value; an if's result and the values its branches yield. Innermost
   statements first; in an if, values computed in the branch join before values passed through it.
   All must live in one memory space (else PTOC-E0381). A value that cannot join without a conflict
   (rule 3) is copied into the carried buffer instead, by a same-space move where the target has one
   (Vec -> Vec, MOV-6): `n_carry = pl.tile.move(n, ...)` right before the pl.yield_, or
   `z_init = pl.tile.move(z, ...)` right before the loop for its init value. Without such a move (Acc,
   Mat, ...) the conflict is a user error (PTOC-E0382).
5. Size: rows * cols * dtype bytes of the physical shape, Acc rows padded to `acc_row_pad` (16), rounded
   up to the target's alignment (32 bytes); a shared buffer takes its largest tile. A static shape with
   a dynamic valid_shape allocates the static bound; a dynamic physical shape is PTOC-E0380.
6. Placement and names: every alloc goes at the top of the function body (as PyPTO), in the order of
   the first statement defining one of the buffer's tiles. One counter per function numbers the GM
   regions of the tensor parameters first (`"mem_ddr_0"`, ... in parameter order; a tensor with a dynamic
   extent is counted but gets no MemRef, its size being unknown here), then the buffers (`mem_vec_3`,
   `mem_mat_4`, ...). Every statement binding a tile is annotated with its MemRef (an unannotated one
   gets its type written out).

Where ptoc deliberately differs from PyPTO's pass: a loop's iter_arg, its init value, the value yielded
for it and the loop result are one buffer, and so are an if's result and the values its branches yield
(rule 4); PyPTO gives a yielded value a buffer of its own. The `.pto` form has no copy on a loop's back
edge or at an if's join, so a carried value must already sit in the carried buffer (a same-space move
is inserted where sharing would overwrite a live tile).

Not done: a MemRef offset other than 0 (a slice addresses its parent through its view's start_offset);
a while loop's condition is not searched for nested tile calls.
"""

from __future__ import annotations

import math
from dataclasses import replace

from ptoc.lazy_dataclass import dataclass
from ptoc.ir.names import fresh_name
from ptoc.diagnostics import CompileError, Diagnostic, InternalError, Span, sorted_diagnostics
from ptoc.ir.dtypes import INDEX
from ptoc.ir.nodes import (
    AssignStmt,
    Call,
    ConstInt,
    EnumLit,
    EvalStmt,
    Expr,
    ForStmt,
    Function,
    GetItem,
    IfStmt,
    MemRef,
    Param,
    Program,
    PtrType,
    ReturnStmt,
    ScopeStmt,
    Stmt,
    StrLit,
    TensorType,
    TileType,
    TupleType,
    Type,
    Var,
    WhileStmt,
    YieldStmt,
)
from ptoc.ir.types import normalize_tile_view
from ptoc.ir.verifier import NodeIndex, definitions
from ptoc.analysis.flow import Flow, Site, nested_blocks
from ptoc.passes.common import NOT_IN_PLACE, TIED_OPS, align_up, resolve_by_names
from ptoc.passes.common import operand_named as _operand
from ptoc.passes.manager import Pass
from ptoc.passes.properties import KERNEL_TYPES
from ptoc.target.arch import get_arch
from ptoc.passes.properties import slot_tiles

# Kernels, and plain functions holding tiles (PyPTO plans every function; an orchestration function
# holds no tiles).
TILE_FUNCTION_TYPES = (*KERNEL_TYPES, "Opaque")



# Results that are views of an operand's buffer (no data moves): op -> the operand's parameter name.
VIEW_OPS = {"tile.set_validshape": "tile", "tile.reshape": "tile", "tile.reinterpret_view": "tile",
            "tile.slice": "tile"}
# Destination-passing ops (the result is written into one operand's buffer, in place): TIED_OPS, in common.
# Ops whose result may never share its source's buffer, even when the source dies there: a move (OP-7)
# and every op the hardware runs reading its sources while it writes (ptoc.passes.common.NOT_IN_PLACE).
NO_IN_PLACE = NOT_IN_PLACE


def tile_bytes(t: TileType, arch) -> int | None:
    """Bytes of a tile's physical shape (Acc rows padded), before alignment; None for a dynamic shape."""
    shape = t.shape
    for d in shape:  # (no node class is subclassed: a constant extent is a ConstInt)
        if d.__class__ is not ConstInt:
            return None
    rows, cols = 1, 1
    if shape:
        cols = shape[-1].value  # type: ignore[attr-defined]
        for d in shape[:-1]:
            rows *= d.value  # type: ignore[attr-defined]
    if t.memory == "Acc":
        return arch.acc_alloc_bytes(rows, cols, t.dtype.bytes)
    return rows * cols * t.dtype.bytes  # type: ignore[operator]


def _fmt_shape(t: TileType) -> str:
    from ptoc.ir.printer import print_expr

    return "[" + ", ".join(print_expr(d) for d in t.shape) + "]"


# --------------------------------------------------------------------------------------------------
# The pass
# --------------------------------------------------------------------------------------------------


class InitMemRef(Pass):
    name = "InitMemRef"
    stage = "memory"
    summary = "bind every kernel tile to an on-chip buffer: pl.tile.alloc + pl.MemRef in its type"
    requires = frozenset({"memory_spaces"})
    produces = frozenset({"memrefs"})

    def run(self, program: Program, ctx) -> Program:
        todo = []
        planned = []
        names: dict[int, tuple[Function, set[str]]] = {}  # id(f) -> (f, every name in f): one walk serves all
        for f in program.functions:
            if f.func_type in TILE_FUNCTION_TYPES:
                has_alloc, has_tiles, f_names = _scan(f, self.cache)
                if not has_alloc and has_tiles:
                    todo.append(f)
                    names[id(f)] = (f, f_names)
                elif has_alloc:
                    planned.append(f)
        if planned:
            _refuse_unbound_tiles(planned, self.types(program, ctx), self.cache)
        if not todo:
            return program
        arch = get_arch(ctx.arch)
        env = self.types(program, ctx)
        _refuse_declared_allocations(todo, env)
        # (most functions hold no call inside another expression: `_needs_names` says so from their census)
        named = {f.name: _Namer(f, env[f.name], ctx, names[id(f)][1]).run() if _needs_names(f, self.cache) else f
                 for f in todo}
        if any(named[f.name] is not f for f in todo):  # nested tile calls got names: retype
            program = replace(program, functions=tuple(named.get(f.name, f) for f in program.functions))
            todo = [named[f.name] for f in todo]
            env = self.types(program, ctx)
        diags: list[Diagnostic] = []
        new: dict[str, Function] = {}
        for f in todo:
            try:
                known = names.get(id(f))
                planner = _Planner(f, env[f.name], arch, ctx, known[1] if known and known[0] is f else None,
                                   self.cache)
                new[f.name] = planner.run()
                self.hand_over(new[f.name], _output_types(planner, new[f.name]))
            except CompileError as e:
                diags.extend(e.diagnostics)
        if diags:
            raise CompileError(sorted_diagnostics(diags))
        funcs = tuple(new.get(f.name, f) for f in program.functions)
        return replace(program, functions=funcs)


def _refuse_declared_allocations(funcs: list[Function], env) -> None:
    """A tile bound to an allocation the program declares by name (`pl.MemRef("buf")`) asks for that
    buffer to be shared with every other tile naming it; this pass plans buffers from liveness alone and
    would silently give each tile its own, so such a program is refused (PTOC-E0141) rather than planned
    differently from what it asks."""
    diags = []
    for f in funcs:
        for name, t in sorted(env[f.name].items()):
            m = t.memref if isinstance(t, TileType) else None
            if m is not None and m.declared:
                diags.append(Diagnostic(
                    "PTOC-E0141", f"tile {name!r} of {f.name!r} is bound to the declared allocation "
                    f"{m.base.value!r}: planning declared allocations is not supported yet", m.span or f.span,
                    hint="leave the MemRef out and InitMemRef gives the tile a buffer of its own"))
    if diags:
        raise CompileError(sorted_diagnostics(diags))


def _refuse_unbound_tiles(funcs: list[Function], env, cache=None) -> None:
    """A function that already allocates its buffers (`pl.tile.alloc`, as in a dump after InitMemRef) is
    left as it is, so each of its tiles must already be bound to one (a MemRef in its type), except the
    tiles that live in a pipe slot (a tpop result and its views, `slot_tiles`). One that is not is refused
    (PTOC-E0770): planning a single tile into buffers someone else laid out is not attempted."""
    from ptoc.passes.properties import slot_tiles

    diags = []
    for f in funcs:
        vals = env.get(f.name, {})
        missing = sorted(n for n, t in vals.items() if isinstance(t, TileType) and t.memref is None)
        if not missing:
            continue
        slots = slot_tiles(f, cache)[0]
        spans = {s.target.name: s.span for s in NodeIndex.get(f, cache).of(AssignStmt)}
        for n in missing:
            if n not in slots:
                diags.append(Diagnostic(
                    "PTOC-E0770", f"tile {n!r} of {f.name!r} has no MemRef, but {f.name!r} already allocates "
                    "its buffers (pl.tile.alloc), so it is not planned again", spans.get(n) or f.span,
                    hint="bind the tile to one of the function's buffers: pl.MemRef(<buffer>, <offset>, <bytes>) "
                         "in its annotation; or delete every pl.tile.alloc and MemRef of the function so "
                         "InitMemRef plans all of its buffers"))
    if diags:
        raise CompileError(sorted_diagnostics(diags))


class _Namer:
    """Rule 0: a tile computed inside another expression (`pl.tile.exp(pl.tile.sub(a, b))`) or yielded or
    returned straight from a call gets a statement of its own right before its statement, named
    `<target>_<op>` (fresh), annotated with its type, so that it can be bound to a buffer."""

    def __init__(self, f: Function, env: dict[str, Type | None], ctx, names: set[str] | None = None):
        self.f = f
        self.env = env
        self.ctx = ctx
        self.taken = {p.name for p in f.params} | (_var_names(f) if names is None else names)
        self.changed = False

    def run(self) -> Function:
        body = self.block(self.f.body)
        return replace(self.f, body=body) if self.changed else self.f

    def block(self, body: tuple[Stmt, ...]) -> tuple[Stmt, ...]:
        out: list[Stmt] = []
        for s in body:
            pre: list[Stmt] = []
            base = s.target.name if isinstance(s, AssignStmt) else "t"
            if isinstance(s, AssignStmt) and isinstance(s.value, Call):
                s = _set(s, "value", self.args(s.value, pre, base, s))
            elif isinstance(s, AssignStmt) and isinstance(s.value, GetItem):
                s = _set(s, "value", self.expr(s.value, pre, base, s))
            elif isinstance(s, EvalStmt) and isinstance(s.expr, Call):
                s = _set(s, "expr", self.args(s.expr, pre, base, s))
            elif isinstance(s, (YieldStmt, ReturnStmt)):
                if isinstance(s, YieldStmt) and s.targets:
                    base = s.targets[0].name
                s = _set(s, "values", tuple(self.expr(v, pre, base, s) for v in s.values))
            elif isinstance(s, (ForStmt, WhileStmt)):
                if s.iter_args:
                    base = s.iter_args[0].name
                s = _set(s, "init_values", tuple(self.expr(v, pre, base, s) for v in s.init_values))
            for sub_name in ("body", "then_body", "else_body"):
                if hasattr(s, sub_name) and not isinstance(s, YieldStmt):
                    s = _set(s, sub_name, self.block(getattr(s, sub_name)))
            out.extend(pre)
            out.append(s)
        return tuple(out)

    def args(self, call: Call, pre: list[Stmt], base: str, s: Stmt) -> Call:
        """`call` with every tile-valued call among its arguments moved into `pre`."""
        args = tuple(self.expr(a, pre, base, s) for a in call.args)
        kwargs = tuple((k, self.expr(v, pre, base, s)) for k, v in call.kwargs)
        if all(a is b for a, b in zip(args, call.args)) and all(a[1] is b[1] for a, b in zip(kwargs, call.kwargs)):
            return call
        return replace(call, args=args, kwargs=kwargs)

    def expr(self, e: Expr, pre: list[Stmt], base: str, s: Stmt) -> Expr:
        if isinstance(e, GetItem) and isinstance(e.value, Call):
            v = self.expr(e.value, pre, base, s)
            return e if v is e.value else replace(e, value=v)
        if not (isinstance(e, Call) and e.kind == "op"):
            return e
        call = self.args(e, pre, base, s)
        t = self.type_of(call)
        if not _tiles_in(t):
            return call
        name = self.fresh(f"{base}_{call.op.rsplit('.', 1)[-1]}")
        ann = t if not isinstance(t, TileType) else replace(t, view=normalize_tile_view(t.shape, t.memory, t.view))
        pre.append(AssignStmt(Var(name, span=e.span), call, ann, span=s.span))
        self.env[name] = t
        self.changed = True
        return Var(name, span=e.span)

    def type_of(self, e: Expr) -> Type | None:
        from ptoc.ir.nodes import ConstBool, ConstFloat, ScalarType
        from ptoc.ops.registry import infer_call_type

        if isinstance(e, Var):
            return self.env.get(e.name)
        if isinstance(e, (ConstInt, ConstFloat)):
            return ScalarType(e.dtype)
        if isinstance(e, ConstBool):
            from ptoc.ir.dtypes import BOOL

            return ScalarType(BOOL)
        if isinstance(e, Call) and e.kind == "op":
            t, diags = infer_call_type(e, [self.type_of(a) for a in e.args],
                                       {k: self.type_of(v) for k, v in e.kwargs}, self.ctx)
            return None if diags else t
        return None

    def fresh(self, base: str) -> str:
        return fresh_name(base, self.taken)


def _scan(f: Function, cache=None) -> tuple[bool, bool, set[str]]:
    """(does `f` call pl.tile.alloc, does it hold a tile type or a tile op, the names of all its variables)."""
    index = NodeIndex.get(f, cache)
    has_alloc, has_tiles = False, bool(index.of(TileType))
    for n in index.of(Call):
        if n.kind == "op" and n.op.startswith("tile."):
            has_tiles = True
            if n.op == "tile.alloc":
                has_alloc = True
                break
    return has_alloc, has_tiles, {n.name for n in index.of(Var)}


def _needs_names(f: Function, cache=None) -> bool:
    """False when `_Namer` would return `f` unchanged for certain: no call is an argument of a call, a
    value yielded or returned or a loop's init value, and no element is taken from a call's result (the
    only places it names a tile). Answered from `f`'s node index, which `_scan` built."""
    index = NodeIndex.get(f, cache)
    for c in index.of(Call):
        if any(a.__class__ is Call for a in c.args) or any(v.__class__ is Call for _, v in c.kwargs):
            return True
    if any(g.value.__class__ is Call for g in index.of(GetItem)):
        return True
    for s in (*index.of(YieldStmt), *index.of(ReturnStmt)):
        if any(v.__class__ is Call for v in s.values):
            return True
    return any(v.__class__ is Call for loop in (*index.of(ForStmt), *index.of(WhileStmt)) for v in loop.init_values)


def _set(s: Stmt, field: str, value) -> Stmt:
    """`s` with `field` set to `value`; `s` itself when nothing changed (the same object, or a tuple of the
    same objects)."""
    old = getattr(s, field)
    if value is old or (isinstance(value, tuple) and len(value) == len(old)
                        and all(a is b for a, b in zip(value, old))):
        return s
    return replace(s, **{field: value})


def _var_names(f: Function, cache=None) -> set[str]:
    return {n.name for n in NodeIndex.get(f, cache).of(Var)}


Slot = tuple[str, "int | None"]  # a tile value, or element k of a tuple value
Key = tuple[int, int]  # (block, index) of a statement, as numbered by Flow


@dataclass
class _Info:
    type: TileType
    kind: str  # "fresh" | "tied" (writers), "alias", "carried", "result"
    op: str | None = None
    stmt: Stmt | None = None


@dataclass(frozen=True)
class _Conflict:
    x: Slot  # the tile whose buffer is overwritten ...
    y: Slot  # ... by this writer ...
    use: Site  # ... while x is still read here


@dataclass
class _Copy:
    name: str
    src: str
    type: TileType


class _Planner:
    def __init__(self, f: Function, env: dict[str, Type | None], arch, ctx, names: set[str] | None = None,
                 cache=None):
        self.f = f
        self.env = dict(env)
        self.arch = arch
        self.ctx = ctx
        self.flow = Flow(f)
        self.sites: dict[str, Site] = dict(self.flow.defs)
        self.paths: dict[str, tuple] = dict(self.flow.paths)
        self.uses: dict[str, list[Site]] = {k: list(v) for k, v in self.flow.uses.items()}
        self.info: dict[Slot, _Info] = {}
        self.parent: dict[Slot, Slot] = {}
        self.group: dict[Slot, _Group] = {}  # union-find root -> its members and their summary
        self.slots_named: dict[str, list[Slot]] = {}
        self.diags: list[Diagnostic] = []
        self.taken = ({p.name for p in f.params} | set(self.flow.defs)
                      | (_var_names(f, cache) if names is None else names))
        self.copies: dict[Key, list[_Copy]] = {}
        self.subst: dict[tuple[Key, str], dict[int, str]] = {}  # (statement, "yield"|"init") -> k -> name
        self.nudge = 0
        self.in_slot = _unbuffered_slot_tiles(f, cache)
        self._bound: dict[str, tuple[Type, Type]] = {}  # name -> (its type, bound to its buffer): `bind`

    # ---------------------------------------------------------------- run
    def run(self) -> Function:
        for p in self.f.params:
            if _tiles_in(p.type):
                self.diags.append(Diagnostic(
                    "PTOC-E0384", f"kernel parameter {p.name!r} is a tile; a kernel has no on-chip buffer for it",
                    p.span, hint="pass a pl.Tensor and load the tile in the kernel with pl.tile.load"))
        for i, t in enumerate(self.f.returns):
            if _tiles_in(t):
                self.diags.append(Diagnostic(
                    "PTOC-E0670", f"kernel {self.f.name!r} returns a tile (return value {i}); a kernel hands its "
                    "results back through global memory, as tensors", getattr(t, "span", None) or self.f.span,
                    hint="add a pl.Out tensor parameter, pl.tile.store the tile into it and return the tensor "
                         "(or make the function pl.FunctionType.Inline)"))
        self.collect(self.f.body, 0)
        self.raise_if_errors()
        self.carry(self.f.body, 0)
        self.raise_if_errors()
        plans = [self.plan(g) for g in self.groups()]
        self.raise_if_errors()
        return self.rewrite(plans)

    def raise_if_errors(self) -> None:
        if self.diags:
            raise CompileError(sorted_diagnostics(self.diags))

    # ---------------------------------------------------------------- union-find
    def find(self, s: Slot) -> Slot:
        root = s
        while self.parent[root] != root:
            root = self.parent[root]
        while self.parent[s] != root:
            self.parent[s], s = root, self.parent[s]
        return root

    def _order(self, s: Slot):
        return (self.sites[s[0]].pos, s[0], -1 if s[1] is None else s[1])

    def union(self, a: Slot, b: Slot, stmt: Stmt, role: str) -> _Conflict | None:
        """Merge the buffers of a and b unless a value of one is read after a writer of the other
        overwrites it; returns that conflict instead (nothing merged). Different memory spaces are an
        error (PTOC-E0381)."""
        ta, tb = self.info[a].type, self.info[b].type
        if (ta.memory or "Vec") != (tb.memory or "Vec"):
            self.diags.append(Diagnostic(
                "PTOC-E0381", f"{_slot_name(a)!r} lives in {ta.memory} but {_slot_name(b)!r}, which {role}, "
                f"lives in {tb.memory}; one buffer cannot be in two memory spaces", stmt.span,
                hint="make both values live in the same memory space: pl.tile.move one of them first"))
            return None
        ra, rb = self.find(a), self.find(b)
        if ra == rb:
            return None
        ga, gb = self.group[ra], self.group[rb]
        if not (ga.cannot_overwrite(gb) and gb.cannot_overwrite(ga)):  # else neither cross finds anything
            ma, mb = sorted(ga.members, key=self._order), sorted(gb.members, key=self._order)
            c = self.cross(ma, mb) or self.cross(mb, ma)
            if c is not None:
                return c
        first, second = sorted((ra, rb), key=self._order)
        self.parent[second] = first
        self.group[first] = ga.merge(gb) if first == ra else gb.merge(ga)
        del self.group[second]
        return None

    def cross(self, writers: list[Slot], others: list[Slot]) -> _Conflict | None:
        for y in writers:
            iy = self.info[y]
            if iy.kind not in ("fresh", "tied"):
                continue
            dy = self.sites[y[0]]
            for x in others:
                if x[0] == y[0] or self.sites[x[0]].pos >= dy.pos:
                    continue
                u = self.read_after(x[0], dy, iy.op)
                if u is not None:
                    return _Conflict(x, y, u)
        return None

    def read_after(self, x: str, dy: Site, op: str | None) -> Site | None:
        """A read of `x` that can run after the statement at `dy` wrote over x's buffer."""
        dx = self.sites[x]
        for u in self.uses.get(x, []):
            # a value from outside a loop that is read inside it is needed again in the next iteration
            if any(L in dy.loops and L not in dx.loops for L in u.loops):
                return u
            if u.pos == dy.pos:  # read by the writing statement itself: in place
                if op in NO_IN_PLACE:
                    return u
                continue
            if u.pos > dy.pos and not _other_branch(u, dy):
                return u
        return None

    # ---------------------------------------------------------------- 1. slots; views and in-place ops
    def add(self, slot: Slot, t: TileType, kind: str, op: str | None, stmt: Stmt | None) -> None:
        self.info[slot] = _Info(t, kind, op, stmt)
        self.parent[slot] = slot
        self.group[slot] = _Group(slot, self.sites[slot[0]], kind in ("fresh", "tied"), op in NO_IN_PLACE,
                                  self.uses.get(slot[0], ()))
        self.slots_named.setdefault(slot[0], []).append(slot)

    def add_use(self, name: str, u: Site) -> None:
        """Record one more read of `name` (and keep the summaries of its buffer groups up to date)."""
        self.uses.setdefault(name, []).append(u)
        d = self.sites[name]
        for slot in self.slots_named.get(name, ()):
            self.group[self.find(slot)].note_use(u, d)

    def slots_of(self, name: str) -> list[tuple[Slot, TileType]]:
        t = self.env.get(name)
        if isinstance(t, TileType):
            return [((name, None), t)]
        if isinstance(t, TupleType):
            return [((name, k), x) for k, x in enumerate(t.types) if isinstance(x, TileType)]
        return []

    def slot(self, e: Expr | None) -> Slot | None:
        if isinstance(e, Var) and isinstance(self.env.get(e.name), TileType):
            return (e.name, None)
        return None

    def collect(self, body: tuple[Stmt, ...], key: int) -> None:
        for i, s in enumerate(body):
            if s.__class__ is AssignStmt:  # (most statements: no body, no results; no node class is subclassed)
                self.assign(s)
                continue
            if isinstance(s, (ForStmt, WhileStmt)):
                for a in s.iter_args:
                    for slot, t in self.slots_of(a.name):
                        self.add(slot, t, "carried", None, s)
            for sub, k in zip(nested_blocks(s), self.flow.body_keys.get((key, i), ())):
                self.collect(sub, k)
            if isinstance(s, (ForStmt, WhileStmt, IfStmt)):
                for r in s.results:
                    for slot, t in self.slots_of(r.name):
                        self.add(slot, t, "result", None, s)

    def assign(self, s: AssignStmt) -> None:
        name = s.target.name
        slots = [] if name in self.in_slot else self.slots_of(name)
        if not slots:
            return
        v = s.value
        src: list[Slot] = []
        kind, op = "fresh", None
        if isinstance(v, Var):
            kind, src = "alias", [x for x, _ in self.slots_of(v.name)]
        elif isinstance(v, GetItem) and isinstance(v.value, Var) and isinstance(v.index, ConstInt):
            kind, src = "alias", [(v.value.name, v.index.value)]
        elif isinstance(v, Call):
            op = self.resolve(v) if v.kind == "op" else None
            opname = op.name if op is not None else v.op
            if opname in VIEW_OPS or opname in TIED_OPS:
                operand = self.slot(_operand(op, v, VIEW_OPS.get(opname) or TIED_OPS[opname]))
                if operand is not None:
                    kind, src = ("alias" if opname in VIEW_OPS else "tied"), [operand]
            op = opname
        for j, (slot, t) in enumerate(slots):
            self.add(slot, t, kind if j < len(src) and src[j] in self.info else "fresh", op, s)
            if j < len(src) and src[j] in self.info:
                c = self.union(slot, src[j], s, "it is a view of" if kind == "alias" else "is written in place")
                if c is not None:
                    self.report(c, s, None, in_place=True)  # only an in-place writer can conflict here

    def resolve(self, call: Call):
        return resolve_by_names(call, self.env)

    # ---------------------------------------------------------------- 2. loops and ifs, innermost first
    def carry(self, body: tuple[Stmt, ...], key: int) -> None:
        for i, s in enumerate(body):
            if s.__class__ not in _COMPOUND:  # (no nested body: nothing carried)
                continue
            keys = self.flow.body_keys.get((key, i), ())
            for sub, k in zip(nested_blocks(s), keys):
                self.carry(sub, k)
            if isinstance(s, (ForStmt, WhileStmt)):
                self.carry_loop(s, (key, i), keys[0])
            elif isinstance(s, IfStmt):
                self.carry_if(s, keys)

    def carry_loop(self, s: ForStmt | WhileStmt, at: Key, body_key: int) -> None:
        ys = s.body[-1].values if s.results else ()
        for k, a in enumerate(s.iter_args):
            sa = self.slot(a)
            if sa is None:
                continue
            if k < len(s.results) and self.slot(s.results[k]) is not None:
                c = self.union(sa, self.slot(s.results[k]), s, "is the loop's result")
                if c is not None:
                    self.report(c, s, None)
            if k < len(ys) and self.slot(ys[k]) is not None:
                self.join(sa, ys[k].name, s, (body_key, len(s.body) - 1), "yield", k, "is yielded for it")
            init = s.init_values[k] if k < len(s.init_values) else None
            if self.slot(init) is not None:
                self.join(sa, init.name, s, at, "init", k, "is its init value")

    def carry_if(self, s: IfStmt, keys: tuple[int, ...]) -> None:
        branches = []
        for b, (body, bk) in enumerate(zip((s.then_body, s.else_body), keys)):
            if body and isinstance(body[-1], YieldStmt):
                branches.append((b, body, bk))
        for k, r in enumerate(s.results):
            sr = self.slot(r)
            if sr is None:
                continue
            todo = []
            for b, body, bk in branches:
                v = body[-1].values[k] if k < len(body[-1].values) else None
                if self.slot(v) is not None:
                    local = any(blk == bk for blk, _ in self.paths.get(v.name, ()))
                    todo.append((0 if local else 1, b, v.name, (bk, len(body) - 1)))
            for _, _, v, at in sorted(todo):  # values computed in the branch first, pass-through values last
                self.join(sr, v, s, at, "yield", k, "is yielded for it")

    def join(self, carried: Slot, value: str, s: Stmt, at: Key, what: str, k: int, role: str) -> None:
        """Put `value` into the buffer of `carried`; when a read would see it overwritten, copy `value`
        into that buffer instead (a same-space move right before statement `at`)."""
        c = self.union(carried, (value, None), s, role)
        if c is None:
            return
        t = self.info[(value, None)].type
        space = t.memory or "Vec"
        copy = self.copy_type(t, space) if self.arch.tmov.legal(space, space) else None
        if copy is None:
            self.report(c, s, f"{space} has no same-space copy on this target")
            return
        base = f"{value}_{'init' if what == 'init' else 'carry'}"
        name, n = base, 1
        while name in self.taken:
            name, n = f"{base}_{n}", n + 1
        self.taken.add(name)
        site = self.flow.site_at[at]
        self.nudge += 1
        csite = site._replace(pos=site.pos - 0.5 + self.nudge * 1e-6)
        self.env[name] = copy
        self.sites[name] = csite
        self.paths[name] = self.flow.path_at[at]
        self.add_use(value, csite)
        self.uses[name] = [site]  # read by the yield or the loop header
        self.add((name, None), copy, "fresh", "tile.move", self.flow.stmt_at[at])
        self.copies.setdefault(at, []).append(_Copy(name, value, copy))
        self.subst.setdefault((at, what), {})[k] = name
        c2 = self.union(carried, (name, None), s, role)
        if c2 is not None:
            self.report(c2, s, None)

    def copy_type(self, t: TileType, space: str) -> TileType | None:
        from ptoc.ops.registry import infer_call_type

        call = Call("tile.move", (Var("_"),), (("target_memory", EnumLit("Mem", space)),))
        mt, diags = infer_call_type(call, [replace(t, memref=None)], {"target_memory": None}, self.ctx)
        return mt if not diags and isinstance(mt, TileType) else None

    def report(self, c: _Conflict, s: Stmt, why_no_copy: str | None, in_place: bool = False) -> None:
        iy = self.info[c.y]
        xn, yn = _slot_name(c.x), _slot_name(c.y)
        dy = self.sites[c.y[0]]
        span = iy.stmt.span if iy.stmt is not None else s.span
        if in_place:
            self.diags.append(Diagnostic(
                "PTOC-E0383", f"{iy.op} writes {yn!r} in place into the buffer of {xn!r}, but {xn!r} is read "
                f"again at line {c.use.line}", span,
                hint=f"finish every read of {xn!r} before line {dy.line}; after it use {yn!r} instead"))
            return
        what = "loop" if isinstance(s, (ForStmt, WhileStmt)) else "if"
        keeps = ("keeps its carried tile in one buffer" if what == "loop"
                 else "keeps the tiles its branches yield in one buffer")
        if iy.op in NO_IN_PLACE and c.use.pos == dy.pos:
            detail = f"{iy.op} cannot write {yn!r} over its own source {xn!r} (a move never runs in place)"
        else:
            detail = f"{yn!r} (line {dy.line}) would overwrite {xn!r}, which is read again at line {c.use.line}"
        reason = f"; {why_no_copy}" if why_no_copy else ""
        self.diags.append(Diagnostic(
            "PTOC-E0382", f"the {what} at line {s.span.line} {keeps}: {detail}{reason}", span,
            hint=f"read {xn!r} for the last time before {yn!r} is computed, or give the {what} a tile of its own "
            f"(a separate init value, or a copy made just before pl.yield_)"))

    # ---------------------------------------------------------------- 3. sizes and placement
    def groups(self) -> list[list[Slot]]:
        roots: dict[Slot, list[Slot]] = {}
        for slot in sorted(self.info, key=self._order):
            roots.setdefault(self.find(slot), []).append(slot)
        return list(roots.values())

    def plan(self, slots: list[Slot]) -> dict:
        size = 0
        space = None
        for slot in slots:
            i = self.info[slot]
            space = space or i.type.memory or "Vec"
            b = tile_bytes(i.type, self.arch)
            if b is None:
                if i.kind == "fresh":
                    self.diags.append(Diagnostic(
                        "PTOC-E0380", f"tile {_slot_name(slot)!r} has the dynamic shape {_fmt_shape(i.type)}; "
                        "an on-chip buffer needs a static size", i.stmt.span if i.stmt else None,
                        hint="give the tile a static shape and a dynamic valid_shape, e.g. "
                        "pl.tile.load(x, [0, 0], [64, 64], [m, 64]) for up to 64 rows"))
                continue
            size = max(size, b)
        paths = [self.paths[s[0]] for s in slots]
        # k: the length of the block path all of them share (the first path's prefix every other one has)
        first = paths[0]
        k = len(first)
        for p in paths[1:]:
            n = min(k, len(p))
            j = 0
            while j < n and p[j][0] == first[j][0]:
                j += 1
            k = j
        if k == 0:
            raise InternalError(f"InitMemRef: no common block for the tiles {[_slot_name(s) for s in slots]}")
        where = (first[k - 1][0], min(p[k - 1][1] for p in paths))
        writer = next((i for i in map(self.info.__getitem__, slots) if i.kind in ("fresh", "tied")
                       and i.stmt is not None), None)
        at = writer.stmt if writer is not None else self.flow.stmt_at[where]
        return {"slots": slots, "space": space, "size": align_up(max(size, 1), self.arch.alignment_bytes),
                "where": where, "order": (self.flow.stmt_pos[where], self._order(slots[0])), "span": at.span}

    # ---------------------------------------------------------------- 4. rewrite
    def rewrite(self, plans: list[dict]) -> Function:
        plans.sort(key=lambda p: p["order"])
        params, counter = _ddr_params(self.f, self.arch)
        self.f = replace(self.f, params=params)
        self.memref: dict[Slot, MemRef] = {}
        self.allocs: dict[Key, list[Stmt]] = {}
        allocs = self.allocs.setdefault((0, 0), [])  # every buffer is declared at the top
        # (the parts every buffer of a space has alike are made once: nodes are values, never mutated)
        zero, ptr, spaces = ConstInt(0, INDEX), PtrType(), {}
        for p in plans:
            space = p["space"]
            while True:
                name = f"mem_{space.lower()}_{counter}"
                counter += 1
                if name not in self.taken:
                    break
            self.taken.add(name)
            span = p["span"] or Span.unknown()
            size = ConstInt(p["size"], INDEX)
            mem = spaces.get(space)
            if mem is None:
                mem = spaces[space] = EnumLit("Mem", space)
            alloc = AssignStmt(Var(name, span=span), Call("tile.alloc", (mem, size), span=span), ptr, span=span)
            allocs.append(alloc)
            ref = MemRef(Var(name), zero, size)
            for slot in p["slots"]:
                self.memref[slot] = ref
        return replace(self.f, body=self.block(self.f.body, 0))

    def block(self, body: tuple[Stmt, ...], key: int) -> tuple[Stmt, ...]:
        out: list[Stmt] = []
        for i, s in enumerate(body):
            at = (key, i)
            out.extend(self.allocs.get(at, ()))
            for c in self.copies.get(at, ()):
                space = EnumLit("Mem", c.type.memory or "Vec")
                call = Call("tile.move", (Var(c.src, span=s.span),), (("target_memory", space),), span=s.span)
                out.append(AssignStmt(Var(c.name, span=s.span), call, self.bind(c.name, None), span=s.span))
            out.append(self.stmt(s, at))
        return tuple(out)

    def stmt(self, s: Stmt, at: Key) -> Stmt:
        if s.__class__ is AssignStmt:  # (most statements; none of the branches below is for one)
            ann = self.bind(s.target.name, s.annotation)  # type: ignore[union-attr]
            # (`replace(s, annotation=ann)`, built directly: most statements bind a tile)
            return s if ann is s.annotation else AssignStmt(s.target, s.value, ann, span=s.span)  # type: ignore[union-attr]
        keys = self.flow.body_keys.get(at, ())
        if isinstance(s, (ForStmt, WhileStmt, ScopeStmt)):
            s = replace(s, body=self.block(s.body, keys[0]))
        elif isinstance(s, IfStmt):
            s = replace(s, then_body=self.block(s.then_body, keys[0]), else_body=self.block(s.else_body, keys[1]))
        if isinstance(s, (ForStmt, WhileStmt)) and (at, "init") in self.subst:
            sub = self.subst[(at, "init")]
            s = replace(s, init_values=tuple(Var(sub[k], span=v.span) if k in sub else v
                                             for k, v in enumerate(s.init_values)))
        if isinstance(s, YieldStmt) and (at, "yield") in self.subst:
            sub = self.subst[(at, "yield")]
            s = replace(s, values=tuple(Var(sub[k], span=v.span) if k in sub else v for k, v in enumerate(s.values)))
        if isinstance(s, AssignStmt):
            ann = self.bind(s.target.name, s.annotation)
            # (`replace(s, annotation=ann)`, built directly: most statements bind a tile)
            return s if ann is s.annotation else AssignStmt(s.target, s.value, ann, span=s.span)
        if isinstance(s, YieldStmt) and len(s.targets) == 1 and s.annotation is not None:
            ann = self.bind(s.targets[0].name, s.annotation)
            return s if ann is s.annotation else replace(s, annotation=ann)
        return s

    def bind(self, name: str, ann: Type | None) -> Type | None:
        """The annotation of `name` with its MemRef(s); an unannotated tile gets its type written out.
        (Asked twice per name, for its statement and for the types handed over, with the same type
        object: the second answer is the first, `_bound`.)"""
        et = self.env.get(name)
        if et.__class__ is TileType and (ann is None or ann.__class__ is TileType):
            # (the common case, one tile, as the general form below does it without the slot list)
            ref = self.memref.get((name, None))
            if ref is None:
                return ann
            t = et if ann is None else ann
            hit = self._bound.get(name)
            if hit is not None and hit[0] is t:
                return hit[1]
            out = _with_memref(t, ref)
            self._bound[name] = (t, out)
            return out
        return self.bind_general(name, ann)

    def bind_general(self, name: str, ann: Type | None) -> Type | None:
        """`bind` for any value: a tile, a tuple holding tiles, or neither."""
        slots = self.slots_of(name)
        if not slots or not all(s in self.memref for s, _ in slots):
            return ann
        t = ann if ann is not None and _tiles_in(ann) else self.env.get(name)
        hit = self._bound.get(name)
        if hit is not None and hit[0] is t:
            return hit[1]
        if isinstance(t, TileType):
            out = _with_memref(t, self.memref[(name, None)])
        elif isinstance(t, TupleType):
            out = replace(t, types=tuple(_with_memref(x, self.memref[(name, k)]) if isinstance(x, TileType)
                                         else x for k, x in enumerate(t.types)))
        else:
            return ann
        self._bound[name] = (t, out)
        return out


_COMPOUND = frozenset({ForStmt, WhileStmt, IfStmt, ScopeStmt})  # the statements with nested bodies


class _Group:
    """A buffer group of the union-find (its root's): its members, unordered (`union` sorts them when it
    must scan them), and a summary that lets `union` skip the scan when no writer of one group can
    overwrite a value of the other that is read later (`cannot_overwrite`): the members' definition
    positions, the writers' first and last positions and loops, the last read of any member and the
    loops that read a member defined outside them."""

    __slots__ = ("members", "dmin", "wmin", "wmax", "wloops", "no_in_place", "umax", "lset")

    def __init__(self, slot: Slot, d: Site, writer: bool, no_in_place: bool, uses) -> None:
        self.members = [slot]
        self.dmin = d.pos
        self.wmin = d.pos if writer else math.inf
        self.wmax = d.pos if writer else -math.inf
        self.wloops = set(d.loops) if writer else set()
        self.no_in_place = writer and no_in_place
        # (`self.note_use(u, d)` of each read, inline: one group is made per tile)
        umax = -math.inf
        lset: set[int] = set()
        dloops = d.loops
        for u in uses:
            if u.pos > umax:
                umax = u.pos
            for loop in u.loops:
                if loop not in dloops:
                    lset.add(loop)
        self.umax = umax
        self.lset = lset

    def note_use(self, u: Site, d: Site) -> None:
        """A read `u` of a member defined at `d`."""
        if u.pos > self.umax:
            self.umax = u.pos
        for loop in u.loops:
            if loop not in d.loops:
                self.lset.add(loop)

    def cannot_overwrite(self, others: _Group) -> bool:
        """True when `_Planner.cross(self's members, others' members)` finds no conflict for certain: no
        writer here comes after a member there; or every read there is at or before every writer here
        (exactly at: only an in-place writer that may run in place) and no read there sits in a loop around a
        writer here that the read value comes from outside of. (False: scan to find out.)"""
        if self.wmax == -math.inf or others.dmin >= self.wmax:
            return True
        if others.umax > self.wmin or (others.umax == self.wmin and self.no_in_place):
            return False
        return not (others.lset & self.wloops)

    def merge(self, other: _Group) -> _Group:
        a, b = (self.members, other.members) if len(self.members) >= len(other.members) else \
            (other.members, self.members)
        a.extend(b)
        self.members = a
        self.dmin = min(self.dmin, other.dmin)
        self.wmin = min(self.wmin, other.wmin)
        self.wmax = max(self.wmax, other.wmax)
        self.wloops = _union(self.wloops, other.wloops)
        self.no_in_place = self.no_in_place or other.no_in_place
        self.umax = max(self.umax, other.umax)
        self.lset = _union(self.lset, other.lset)
        return self


def _unbuffered_slot_tiles(f: Function, cache=None) -> set[str]:
    """Rule 1a: the tiles of `f` that live in a pipe slot (a tpop result, a view or copy of one:
    `slot_tiles`) and so get no buffer, as in PyPTO. One that a loop or an if carries (yielded, a loop's
    init value) keeps a buffer: the carried buffer must hold it, and nothing copies it there."""
    names = slot_tiles(f, cache)[0]
    if not names:
        return names
    index = NodeIndex.get(f, cache)
    carried: set[str] = set()
    for node in index.of(YieldStmt):
        carried.update(v.name for v in node.values if isinstance(v, Var))
    for loop in (*index.of(ForStmt), *index.of(WhileStmt)):
        carried.update(v.name for v in loop.init_values if isinstance(v, Var))
    return names - carried


def _union(a: set, b: set) -> set:
    """a | b, updating the larger set in place."""
    if len(a) < len(b):
        a, b = b, a
    a |= b
    return a


def _ddr_params(f: Function, arch) -> tuple[tuple, int]:
    """The parameters with `pl.MemRef("mem_ddr_<k>", 0, <bytes>)` in every static tensor type (k counts
    the tensor parameters in order; the on-chip buffers are numbered on from there), and that count."""
    out, k = [], 0
    zero = None  # (one zero offset for every region: nodes are values, never mutated)
    for p in f.params:
        t = p.type
        if isinstance(t, TensorType) and t.memref is None:
            dims = [d.value if isinstance(d, ConstInt) else None for d in t.shape]
            if all(d is not None for d in dims):
                size = (math.prod(dims) * t.dtype.bits + 7) // 8
                if zero is None:
                    zero = ConstInt(0, INDEX)
                ref = MemRef(StrLit(f"mem_ddr_{k}"), zero, ConstInt(size, INDEX))
                # (`replace(p, type=replace(t, memref=ref))`, built directly; `t` may be a distributed tensor)
                p = Param(p.name, t.__class__(t.shape, t.dtype, t.view, ref, span=t.span), p.direction, span=p.span)
            k += 1
        out.append(p)
    return tuple(out), k


def _with_memref(t: TileType, ref: MemRef) -> TileType:
    # (`replace(t, memref=ref, view=...)`, built directly: one call per tile of the program)
    return TileType(t.shape, t.dtype, ref, t.memory, normalize_tile_view(t.shape, t.memory, t.view), span=t.span)


def _tiles_in(t: Type | None) -> bool:
    if isinstance(t, TupleType):
        return any(_tiles_in(x) for x in t.types)
    return isinstance(t, TileType)


def _slot_name(s: Slot) -> str:
    return s[0] if s[1] is None else f"{s[0]}[{s[1]}]"


def _other_branch(u: Site, d: Site) -> bool:
    """Do `u` and `d` sit in different branches of one if (so one never runs after the other)?"""
    mine = dict(d.branches)
    return any(k in mine and mine[k] != b for k, b in u.branches)


def _output_types(planner: _Planner, f: Function) -> dict[str, Type | None]:
    """The value types of `f`, the planned function, from those of its input (`planner.env`, with the
    copies' types): a tile bound to a buffer has its MemRef (`_Planner.bind`), a parameter its new type,
    a buffer the pointer type its `pl.tile.alloc` is annotated with. A value without an annotation that
    had a parameter's type (the very object: a loop carrying the parameter, a plain copy of it) has the
    parameter's new type; every other value keeps its type."""
    old: dict[int, Type | None] = {}  # id(a parameter's type before) -> its type now
    for p in f.params:
        t = planner.env.get(p.name)
        if t is not None and t is not p.type:
            old[id(t)] = p.type
    allocs = {s.target.name: s.annotation for stmts in planner.allocs.values() for s in stmts}
    out: dict[str, Type | None] = {}
    for name, ann in definitions(f).items():
        if name in allocs:
            out[name] = allocs[name]
            continue
        t = planner.env.get(name)
        bound = planner.bind(name, t)
        if bound is not t:
            out[name] = bound
        elif ann is None and t is not None:
            out[name] = old.get(id(t), t)
        else:
            out[name] = t
    for p in f.params:
        out[p.name] = p.type
    return out
