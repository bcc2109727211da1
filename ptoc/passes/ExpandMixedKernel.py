"""ExpandMixedKernel: split a kernel that mixes cube and vector work into an AIC and an AIV kernel.

Purpose
-------
A kernel runs either on the cube core (AIC) or on a vector core (AIV). A function that does both (a
matmul followed by an activation, a vector pre-processing step feeding a matmul) becomes three
functions: `<f>_aic` with the cube work, `<f>_aiv` with the vector work, and a Group function that keeps
the name `<f>` and calls both, so its callers (the orchestration) now launch the pair. Where data crosses
between the cores, the two kernels exchange it through the cross-core pipe.

Before::

    @pl.function(type=pl.FunctionType.InCore)
    def k(self, x, w, out):
        ...
        acc: pl.Tile[[16, 64], pl.FP32, pl.Mem.Acc] = pl.tile.matmul(x_left, w_right)
        y: pl.Tile[[16, 64], pl.FP32, pl.Mem.Vec] = pl.tile.move(acc, target_memory=pl.Mem.Vec, ...)
        r: pl.Tile[[16, 64], pl.FP32, pl.Mem.Vec] = pl.tile.relu(y)
        out_1 = pl.tile.store(r, [0, 0], out)
        return out_1

After::

    @pl.function(type=pl.FunctionType.AIC)
    def k_aic(self, x, w, out):
        k_c2v_slot_buffer_import: pl.Scalar[pl.INT32] = pl.system.import_peer_buffer(name="k_c2v_slot_buffer", peer_func="k_aiv")
        pl.system.aic_initialize_pipe(k_c2v_slot_buffer_import, 0, dir_mask=1, slot_size=4096, slot_num=2)
        ...
        acc = pl.tile.matmul(x_left, w_right)
        pl.tile.tpush_to_aiv(acc, split=0)

    @pl.function(type=pl.FunctionType.AIV)
    def k_aiv(self, x, w, out) -> ...:
        k_c2v_slot_buffer: pl.Scalar[pl.INT32] = pl.system.reserve_buffer(name="k_c2v_slot_buffer", size=8192, base=-1)
        pl.system.aiv_initialize_pipe(k_c2v_slot_buffer, 0, dir_mask=1, slot_size=4096, slot_num=2)
        y: pl.Tile[[16, 64], pl.FP32, pl.Mem.Vec] = pl.tile.tpop_from_aic(split=0)
        r = pl.tile.relu(y)
        pl.system.tfree_to_aic(y)
        out_1 = pl.tile.store(r, [0, 0], out)
        return out_1

    @pl.function(type=pl.FunctionType.Group)
    def k(self, x, w, out) -> ...:
        self.k_aic(x, w, out)
        self.k_aiv(x, w, out)
        return out

Rules (PyPTO's)
---------------
- Affinity: cube-unit ops (matmul, gemv, ...) are cube work, vector-unit ops vector work; loads, stores,
  moves, creates and the like belong to the side whose memory their tile lives in (a load by its result,
  a store or a same-side move by its source; Mat, Left, Right, Acc, Bias are the cube's, Vec the vector
  core's). Scalar code, calls and control flow are shared: loops and ifs are kept on both sides with
  each side's statements inside.
- A `tile.move` between the sides is a boundary. Cube -> vector (Acc/Mat -> Vec): the AIC pushes the
  source (`tile.tpush_to_aiv`), the AIV pops the moved tile (`tile.tpop_from_aic`, the move's result
  type). Vector -> cube (Vec -> Mat): the AIV pushes (`tile.tpush_to_aic`), the AIC pops into Mat
  (`tile.tpop_from_aiv`); a Vec -> Left/Right move pops into Mat (NZ) and moves on to Left/Right, the
  move naming that space's layout (`blayout=`/`slayout=`, as PyPTO spells it). On A5 the AIV first
  re-lays the tile out as NZ (`<x>_nz = tile.move(x, Vec, col_major/row_major)`): the AIC reads the pipe
  as fractals straight from the AIV's buffer; on A2/A3 the pipe runs through GM and the pop into Mat
  makes the fractals, so the tile is pushed as it is. On A5 a `tile.tpush_to_aic` written by hand (in
  an AIV kernel, or an InCore body this pass makes AIV) of a row-major tile gets the same re-layout.
- Each pop is released (`system.tfree_to_aic` / `tfree_to_aiv`) right after its last use in the block that
  pops it (a nested statement using it counts as a use).
- Dead code is removed per side (repeatedly); a loop-carried value of the other side's memory is dropped
  from the loop; a tensor value the other side wrote (a store result) stands for the tensor it was
  stored into (a loop carrying it yields it unchanged), so the AIC drops its return and the AIV returns
  the output parameters.
- Pipe set-up is prepended to both kernels: the consumer of a direction reserves `<f>_c2v_slot_buffer`
  (AIV) / `<f>_v2c_slot_buffer` (AIC) of `slot_size * slot_num` bytes (base -1: placed later), the
  producer imports it (the V2C buffer first, then the C2V one, as PyPTO orders them), and both initialise
  the pipe with `dir_mask` (1 cube -> vector, 2 vector -> cube, 3 both), `slot_size`, the largest tile
  crossing in bytes, and `slot_num`, the ring depth: the kernel's `attrs={"slot_num": n}`, else 2 (the
  `.pto` reserves what the assembler's ring needs, see ptoc.codegen.cross_core). An AIV body that begins
  with its lane index (`tile.get_subblock_idx()`, from LowerAutoVectorSplit) keeps it first, the set-up
  right after it, as PyPTO orders them.
- An InCore function that is not mixed becomes AIC (cube work only) or AIV (vector work, or neither), as
  ClassifyKernels would make it; other functions are left alone. A function with work of both sides but no
  boundary move and no fenced GM hand-off between them is left to ClassifyKernels, which rejects it
  (PTOC-E0330).
- Data may also cross through global memory: a cube `tile.store` to a tensor (its only cube store) followed,
  in the same body, by a vector `tile.load` of that tensor gets a push of the stored tile after the store
  and a pop (freed at once) before the load, so the load waits for the store. The other way round (a
  vector store read by the cube) is not fenced, as in PyPTO; such a kernel stays rejected.
- On a2a3 the AIV kernel of a function without a split mode gets `dual_aiv_dispatch=True` (its last
  attribute): the runtime starts it on both vector lanes of the core pair, lane 1 with no share of the work
  (SplitVectorKernel gives it a replay of the pipe hand-shakes on empty tiles). A split kernel's lanes share
  the work and SplitVectorKernel marks it; on a5 nothing is marked (PyPTO's 950 backend launches one lane).

Deliberate differences from PyPTO
---------------------------------
- A kernel whose callers are all Group functions gets no Group of its own: each of those Groups calls the
  AIC kernel and then the AIV kernel in place of the kernel (PyPTO's in-place Group rewrite).
- The lane crossings `tile.aiv_shard` / `tile.aic_gather` of LowerAutoVectorSplit become split pipe
  transfers (their `split=` mode): the cube pushes the full tile / pops the gathered one, each lane pops /
  pushes its half. No hand-written Group ABI normalisation, so a hand-written AIC/AIV pair of a Group is
  not marked `dual_aiv_dispatch` here as PyPTO marks it (a hand-written AIV kernel carries the attribute
  itself).
- A vector -> cube move into Left/Right pops Mat with the move's layout instead of a fractal bridge tile,
  and a kernel with a while loop or scope holding both sides' work is rejected (PTOC-E0622).
"""

from __future__ import annotations

from ptoc.diagnostics import CompileError, Diagnostic
from ptoc.ir import dtypes
from ptoc.ir.nodes import (
    AssignStmt,
    Call,
    ConstBool,
    ConstInt,
    DictExpr,
    EnumLit,
    EvalStmt,
    ForStmt,
    Function,
    GetItem,
    IfStmt,
    Program,
    ReturnStmt,
    ScalarType,
    ScopeStmt,
    Stmt,
    StrLit,
    TensorType,
    TileType,
    TileView,
    Var,
    WhileStmt,
    YieldStmt,
)
from ptoc.ir.names import fresh_name
from ptoc.ir.types import effective_tile_view
from ptoc.ir.visitor import replace, var_names, walk
from ptoc.passes.common import op_names, resolve_op, split_mode_code
from ptoc.passes.manager import Pass

CUBE_SPACES = ("Mat", "Left", "Right", "Acc", "Bias", "LeftScale", "RightScale")
SLOT_NUM = 2  # PyPTO's default ring depth
C2V, V2C = 1, 2
# ops with an effect beyond their result: never removed as dead code
EFFECTS = ("tile.store", "tile.write", "tile.tpush_to_aiv", "tile.tpush_to_aic", "tile.tpop_from_aic",
           "tile.tpop_from_aiv", "system.")


def _is(c, *ops: str) -> bool:
    return isinstance(c, Call) and c.kind == "op" and not op_names(c.op).isdisjoint(ops)


def _i(v: int) -> ConstInt:
    return ConstInt(v, dtypes.INDEX)


class ExpandMixedKernel(Pass):
    name = "ExpandMixedKernel"
    stage = "layout"
    summary = "split a kernel mixing cube and vector work into AIC + AIV kernels joined by a cross-core pipe"
    requires = frozenset({"memory_spaces"})
    produces = frozenset()

    def run(self, program: Program, ctx) -> Program:
        arch = getattr(ctx, "arch", "a2a3")
        if not any(f.func_type == "InCore" for f in program.functions) and not (
                arch in NZ_PUSH_ARCHS and any(f.func_type == "AIV" and _pushes(f) for f in program.functions)):
            return program
        types = self.types(program, ctx)
        out: list[Function] = []
        changed = False
        split_names: dict[str, tuple[str, str]] = {}  # split kernel -> (aic, aiv)
        callers_of: dict[str, list[Function]] | None = None  # function -> its callers in program order, found once
        for f in program.functions:
            if f.func_type != "InCore":
                out.append(f)
                continue
            splitter = _Splitter(f, types.get(f.name, {}), arch)
            split = splitter.run()
            if split is not None:
                if callers_of is None:
                    callers_of = {}
                    for g in program.functions:
                        for name in _callees(g, self.index(g).of(Call)):
                            callers_of.setdefault(name, []).append(g)
                callers = [g for g in callers_of.get(f.name, ()) if g.name != f.name]
                if callers and all(g.func_type == "Group" for g in callers):
                    split = split[:2]  # its Groups launch the pair themselves
                    split_names[f.name] = (split[0].name, split[1].name)
                out.extend(split)
                changed = True
            elif splitter.kind is not None:
                out.append(replace(f, func_type=splitter.kind))
                changed = True
            else:
                out.append(f)
        if split_names:
            out = [_launch_pairs(g, split_names) if g.func_type == "Group" else g for g in out]
        if arch in NZ_PUSH_ARCHS:  # pushes written by hand (an AIV function, or an InCore body made AIV here)
            src = {f.name: f.name for f in program.functions}
            src.update({aiv: k for k, (_, aiv) in split_names.items()})
            adapted = [_nz_pushes(f, types.get(src.get(f.name, ""), {})) if f.func_type == "AIV" else f for f in out]
            changed |= any(a is not b for a, b in zip(adapted, out))
            out = adapted
        return replace(program, functions=tuple(out)) if changed else program


NZ_PUSH_ARCHS = ("a5",)  # the AIC reads a pushed tile as fractal (NZ) data straight from the AIV's buffer
DUAL_DISPATCH_ARCHS = ("a2a3",)  # a vector kernel whose pipe is not split still runs on both vector lanes


def _with_dual_dispatch(f: Function) -> Function:
    """`f` with the attribute `dual_aiv_dispatch=True` (last, replacing one already there)."""
    items = tuple((k, v) for k, v in f.attr_items() if not (isinstance(k, StrLit) and k.value == "dual_aiv_dispatch"))
    return f.with_attr_items(items + ((StrLit("dual_aiv_dispatch"), ConstBool(True)),))


def _pushes(f: Function) -> bool:
    return any(isinstance(n, Call) and n.op == "tile.tpush_to_aic" for n in walk(f))


def _nz(t) -> bool:
    if not isinstance(t, TileType):
        return True  # not known: left as written
    eff = effective_tile_view(t)
    return eff["blayout"] == "col_major" and eff["slayout"] == "row_major"


def _nz_pushes(f: Function, types: dict) -> Function:
    """A `tile.tpush_to_aic(x)` of a row-major Vec tile gets `x_nz = tile.move(x, Vec, col_major/row_major)`
    first and pushes that, as the split's own vector -> cube hand-offs do."""
    if not _pushes(f):
        return f
    taken = {p.name for p in f.params} | {n.name for n in walk(f) if isinstance(n, Var)}

    def block(body: tuple[Stmt, ...]) -> tuple[Stmt, ...]:
        out: list[Stmt] = []
        for s in body:
            c = s.expr if isinstance(s, EvalStmt) else None
            if isinstance(c, Call) and c.op == "tile.tpush_to_aic" and c.args and isinstance(c.args[0], Var) \
                    and not _nz(types.get(c.args[0].name)):
                x = c.args[0]
                t = types[x.name]
                nz = Var(fresh_name(f"{x.name}_nz", taken), span=x.span)
                kw = (("target_memory", EnumLit("Mem", "Vec")), ("blayout", EnumLit("TileLayout", "col_major")),
                      ("slayout", EnumLit("TileLayout", "row_major")))
                nz_t = TileType(t.shape, t.dtype, None, "Vec", TileView(blayout="col_major", slayout="row_major"))
                out.append(AssignStmt(nz, Call("tile.move", (x,), kw, span=c.span), nz_t, span=s.span))
                out.append(replace(s, expr=replace(c, args=(nz,) + c.args[1:])))
                continue
            if isinstance(s, (ForStmt, WhileStmt, ScopeStmt)):
                b = block(s.body)
                out.append(s if b is s.body else replace(s, body=b))
            elif isinstance(s, IfStmt):
                tb, eb = block(s.then_body), block(s.else_body)
                out.append(s if tb is s.then_body and eb is s.else_body else replace(s, then_body=tb, else_body=eb))
            else:
                out.append(s)
        return body if all(a is b for a, b in zip(out, body)) and len(out) == len(body) else tuple(out)

    body = block(f.body)
    return f if body is f.body else replace(f, body=body)


def _callees(f: Function, calls) -> frozenset[str]:
    """The functions `f` calls (`calls`: its calls, its node index's)."""
    return frozenset(n.op for n in calls if n.kind == "func")


def _launch_pairs(g: Function, split: dict[str, tuple[str, str]]) -> Function:
    """An existing Group calling a split kernel calls its AIC kernel, then its AIV kernel in its place."""
    body: list[Stmt] = []
    for s in g.body:
        c = s.value if isinstance(s, AssignStmt) else s.expr if isinstance(s, EvalStmt) else None
        if isinstance(c, Call) and c.kind == "func" and c.op in split:
            aic, aiv = split[c.op]
            body.append(EvalStmt(replace(c, op=aic), span=s.span))
            body.append(replace(s, value=replace(c, op=aiv)) if isinstance(s, AssignStmt)
                        else replace(s, expr=replace(c, op=aiv)))
            continue
        body.append(s)
    return replace(g, body=tuple(body))


class _Splitter:
    def __init__(self, f: Function, types: dict, arch: str):
        self.f = f
        self.arch = arch
        self.types = types
        self.boundary: dict[int, int] = {}  # id(stmt) -> C2V / V2C
        self.store_dest: dict[str, object] = {}  # store result -> the tensor it was stored into
        self.dirs: set[int] = set()
        self.slot = 0
        self.kind: str | None = None  # a kernel that is not mixed: "AIC" or "AIV"
        self.fence_push: dict[int, Var] = {}  # id(cube store) -> the stored tile, pushed after the store
        self.fence_pop: dict[int, TileType] = {}  # id(vector load) -> the token popped before the load
        self._sides: dict[int, tuple[Stmt, str]] = {}  # id(statement) -> (it, its `side`)

    # ------------------------------------------------------------------ affinity
    def side(self, s: Stmt) -> str:
        """"cube", "vector", "shared", "mixed" (a boundary move or a compound holding both)."""
        # Asked again and again of the same statements (a loop's side is its body's, and the split asks
        # each nested statement once more): the first answer is kept. What the first call records on the
        # way (`boundary`, `store_dest`) a second one would record again unchanged. (The entry holds the
        # statement, so its id names no other.)
        hit = self._sides.get(id(s))
        if hit is not None and hit[0] is s:
            return hit[1]
        k = self._side(s)
        self._sides[id(s)] = (s, k)
        return k

    def _side(self, s: Stmt) -> str:
        if isinstance(s, (AssignStmt, EvalStmt)):
            c = s.value if isinstance(s, AssignStmt) else s.expr
            if isinstance(s, AssignStmt) and isinstance(c, Var):
                return self._space_side(self.types.get(c.name))
            if not isinstance(c, Call) or c.kind != "op":
                return "shared"
            if isinstance(s, AssignStmt) and _is(c, "tile.store"):
                src = self.types.get(c.args[0].name) if c.args and isinstance(c.args[0], Var) else None
                if len(c.args) >= 3:
                    self.store_dest[s.target.name] = c.args[2]
                return self._space_side(src)
            return self._call_side(s, c)
        if isinstance(s, (ForStmt, WhileStmt, ScopeStmt, IfStmt)):
            if isinstance(s, ForStmt):
                for r, init in zip(s.results, s.init_values):
                    if isinstance(self.types.get(r.name), TensorType):
                        self.store_dest.setdefault(r.name, init)  # a tensor carried through the loop
            bodies = (s.then_body, s.else_body) if isinstance(s, IfStmt) else (s.body,)
            sides = {self.side(x) for b in bodies for x in b} - {"shared"}
            if not sides:
                return "shared"
            return sides.pop() if len(sides) == 1 else "mixed"
        return "shared"

    def _space_side(self, t) -> str:
        if not isinstance(t, TileType) or t.memory is None:
            return "shared"
        return "cube" if t.memory in CUBE_SPACES else "vector"

    def _call_side(self, s: Stmt, c: Call) -> str:
        op = resolve_op(c, self.types)
        if op is None:
            return "shared"
        if op.name == "tile.move" and c.args and isinstance(c.args[0], Var) and isinstance(s, AssignStmt):
            src = self._space_side(self.types.get(c.args[0].name))
            dst = self._space_side(self.types.get(s.target.name))
            if src != dst and "shared" not in (src, dst):
                self.boundary[id(s)] = C2V if src == "cube" else V2C
                return "mixed"
            return src
        if op.name in ("tile.aiv_shard", "tile.aic_gather") and c.args and isinstance(c.args[0], Var) \
                and isinstance(s, AssignStmt):
            # a lane crossing of LowerAutoVectorSplit: a split pipe transfer (its split= mode)
            src = self._space_side(self.types.get(c.args[0].name))
            want = "cube" if op.name == "tile.aiv_shard" else "vector"
            if src == want:
                self.boundary[id(s)] = C2V if want == "cube" else V2C
                return "mixed"
            return src
        if op.name.startswith(("tile.tpush", "tile.tpop", "system.tfree")):
            return "shared"
        if op.unit == "cube":
            return "cube"
        if op.unit == "vector":
            return "vector"
        res = self.types.get(s.target.name) if isinstance(s, AssignStmt) else None
        if isinstance(res, TileType):
            return self._space_side(res)
        for a in c.args:
            if isinstance(a, Var) and isinstance(self.types.get(a.name), TileType):
                return self._space_side(self.types.get(a.name))
        return "shared"

    # ------------------------------------------------------------------ the split
    def run(self) -> list[Function] | None:
        f = self.f
        sides = {self.side(s) for s in f.body} - {"shared"}
        if not self.boundary and len(sides) <= 1:
            self.kind = "AIC" if sides == {"cube"} else "AIV"
            return None
        self.gm_fences(f.body)
        if not self.boundary and not self.fence_push:
            return None  # both kinds of work but nothing crosses: ClassifyKernels reports it
        for s in walk_stmts(f.body):
            if isinstance(s, (WhileStmt, ScopeStmt)) and self.side(s) == "mixed":
                raise CompileError([Diagnostic(
                    "PTOC-E0622", f"kernel {f.name!r}: a {'while loop' if isinstance(s, WhileStmt) else 'scope'} "
                    "holds both cube and vector work, which ExpandMixedKernel cannot split yet", s.span,
                    hint="use a counted pl.range loop, or move the cube work out of the loop")])
        aic_name, aiv_name = f"{f.name}_aic", f"{f.name}_aiv"
        aic_body = self.side_body(f.body, "cube")
        aiv_body = self.side_body(f.body, "vector")
        memo: dict = {}  # the `_uses` of statements, shared by both sides' clean-ups (they see the same ones)
        aic_body = _dce(_free_pops(_fix_dangling(aic_body, self.f, self.store_dest, drop_return=True), memo), memo)
        aiv_body = _dce(_free_pops(_fix_dangling(aiv_body, self.f, self.store_dest, drop_return=False), memo), memo)
        aic_setup, aiv_setup = self.setup(aic_name, aiv_name)
        aic = replace(f, name=aic_name, func_type="AIC", returns=(), returns_tuple=False,
                      body=aic_setup + aic_body)
        lead = 1 if aiv_body and isinstance(aiv_body[0], AssignStmt) and _is(aiv_body[0].value, "tile.get_subblock_idx") else 0
        aiv = replace(f, name=aiv_name, func_type="AIV", body=aiv_body[:lead] + aiv_setup + aiv_body[lead:])
        if self.arch in DUAL_DISPATCH_ARCHS and not split_mode_code(f.attr("split")):
            aiv = _with_dual_dispatch(aiv)
        return [aic, aiv, self.group(aic, aiv, aiv_body)]

    # ------------------------------------------------------------------ GM-mediated hand-offs
    def origin(self, e):
        """The tensor a value stands for: store results and loop results followed back."""
        seen = 0
        while isinstance(e, Var) and e.name in self.store_dest and seen < 64:
            e, seen = self.store_dest[e.name], seen + 1
        return e.name if isinstance(e, Var) else None

    def gm_fences(self, body: tuple[Stmt, ...]) -> None:
        """A cube store and a later vector load of the same GM tensor in the same body (the only cube store
        of that tensor): the data goes through GM, a push after the store and a pop before the load order
        the load after the store."""
        stores: dict[str, int] = {}
        for s in walk_stmts(self.f.body):
            if isinstance(s, AssignStmt) and _is(s.value, "tile.store") and self.side(s) == "cube":
                o = self.origin(s.target)
                stores[o] = stores.get(o, 0) + 1
        self._fence_body(body, {o for o, n in stores.items() if n == 1})

    def _fence_body(self, body: tuple[Stmt, ...], single: set[str]) -> None:
        stored: dict[str, Var] = {}
        for s in body:
            if isinstance(s, ForStmt):
                self._fence_body(s.body, single)
            elif isinstance(s, IfStmt):
                self._fence_body(s.then_body, single)
                self._fence_body(s.else_body, single)
            elif isinstance(s, AssignStmt) and _is(s.value, "tile.store") and self.side(s) == "cube":
                o = self.origin(s.target)
                if o in single and s.value.args and isinstance(s.value.args[0], Var):
                    stored[o] = s.value.args[0]
                    self._pending = getattr(self, "_pending", {})
                    self._pending[o] = s
            elif isinstance(s, AssignStmt) and _is(s.value, "tile.load") and self.side(s) == "vector":
                src = s.value.args[0] if s.value.args else None
                o = self.origin(src)
                if o in stored:
                    tile = stored.pop(o)
                    store = self._pending.pop(o)
                    self.fence_push[id(store)] = tile
                    t = self.types.get(tile.name)
                    self.fence_pop[id(s)] = TileType(t.shape, t.dtype, None, "Vec", None)
                    self.dirs.add(C2V)
                    self.slot = max(self.slot, _bytes(t))

    def side_body(self, body: tuple[Stmt, ...], side: str) -> tuple[Stmt, ...]:
        out: list[Stmt] = []
        for s in body:
            d = self.boundary.get(id(s))
            if d is not None:
                out.extend(self.hand_off(s, side, d))
                continue
            k = self.side(s)
            if k not in ("shared", "mixed", side):
                continue
            if id(s) in self.fence_push:
                out.extend([s, EvalStmt(Call("tile.tpush_to_aiv", (self.fence_push[id(s)],), (("split", _i(0)),)),
                                        span=s.span)])
                continue
            if id(s) in self.fence_pop:
                tok = Var(f"{s.target.name}_ready")
                out.extend([AssignStmt(tok, Call("tile.tpop_from_aic", (), (("split", _i(0)),)),
                                       self.fence_pop[id(s)], span=s.span), s])
                continue
            if isinstance(s, ForStmt):
                out.append(self._loop(s, side))
            elif isinstance(s, IfStmt):
                out.append(self._if(s, side))
            else:
                out.append(s)
        return tuple(out)

    def _loop(self, s: ForStmt, side: str) -> ForStmt:
        body = self.side_body(s.body, side)
        keep = [i for i, a in enumerate(s.iter_args) if self._space_side(self.types.get(a.name)) in ("shared", side)]
        if len(keep) == len(s.iter_args):
            return replace(s, body=body)
        y = body[-1] if body and isinstance(body[-1], YieldStmt) else None
        if y is not None and not keep:
            body = body[:-1]
        elif y is not None:
            body = body[:-1] + (replace(y, targets=tuple(y.targets[i] for i in keep),
                                        values=tuple(y.values[i] for i in keep),
                                        annotation=y.annotation if len(keep) == 1 else None),)
        return replace(s, body=body, iter_args=tuple(s.iter_args[i] for i in keep),
                       init_values=tuple(s.init_values[i] for i in keep))

    def _if(self, s: IfStmt, side: str) -> IfStmt:
        then_body, else_body = self.side_body(s.then_body, side), self.side_body(s.else_body, side)
        keep = [i for i, r in enumerate(s.results) if self._space_side(self.types.get(r.name)) in ("shared", side)]
        if len(keep) == len(s.results):
            return replace(s, then_body=then_body, else_body=else_body)

        def cut(body: tuple[Stmt, ...]) -> tuple[Stmt, ...]:
            y = body[-1] if body and isinstance(body[-1], YieldStmt) else None
            if y is None:
                return body
            if not keep:
                return body[:-1]
            return body[:-1] + (replace(y, targets=tuple(y.targets[i] for i in keep),
                                        values=tuple(y.values[i] for i in keep),
                                        annotation=y.annotation if len(keep) == 1 else None),)

        return replace(s, then_body=cut(then_body), else_body=cut(else_body))

    def hand_off(self, s: AssignStmt, side: str, d: int) -> list[Stmt]:
        c = s.value
        src = c.args[0]
        dst_t = self.types.get(s.target.name)
        src_t = self.types.get(src.name)
        self.dirs.add(d)
        self.slot = max(self.slot, _bytes(src_t), _bytes(dst_t))
        crossing = _is(c, "tile.aiv_shard", "tile.aic_gather")
        split = (("split", c.kwarg("split") if crossing and c.kwarg("split") is not None else _i(0)),)
        if crossing and d == V2C and side == "cube":  # the gathered tile is the popped Mat tile
            return [AssignStmt(s.target, Call("tile.tpop_from_aiv", (), split, span=c.span), dst_t, span=s.span)]
        if d == C2V:
            if side == "cube":
                return [EvalStmt(Call("tile.tpush_to_aiv", (src,), split), span=s.span)]
            return [AssignStmt(s.target, Call("tile.tpop_from_aic", (), split, span=c.span), dst_t, span=s.span)]
        if side == "vector":
            if self.arch == "a2a3":  # through GM: the cube side's pop into Mat lays the rows out as fractals
                return [EvalStmt(Call("tile.tpush_to_aic", (src,), split), span=s.span)]
            # the cube side reads the pipe as fractal (NZ) data: re-lay the tile out first
            nz = Var(f"{src.name}_nz")
            nz_kw = (("target_memory", EnumLit("Mem", "Vec")), ("blayout", EnumLit("TileLayout", "col_major")),
                     ("slayout", EnumLit("TileLayout", "row_major")))
            nz_t = TileType(src_t.shape, src_t.dtype, None, "Vec",
                            TileView(blayout="col_major", slayout="row_major"))
            return [AssignStmt(nz, Call("tile.move", (src,), nz_kw, span=c.span), nz_t, span=s.span),
                    EvalStmt(Call("tile.tpush_to_aic", (nz,), split), span=s.span)]
        if dst_t.memory == "Mat":
            return [AssignStmt(s.target, Call("tile.tpop_from_aiv", (), split, span=c.span), dst_t, span=s.span)]
        mat = Var(f"{s.target.name}_mat")
        mat_t = TileType(dst_t.shape, dst_t.dtype, None, "Mat", None)
        self.types[mat.name] = mat_t
        # the move on from Mat names the L0 layout it writes (the space's own: no change of type), as PyPTO does
        kw = tuple((k, v) for k, v in c.kwargs if k not in ("blayout", "slayout"))
        eff = effective_tile_view(dst_t)
        kw += (("blayout", EnumLit("TileLayout", eff["blayout"])), ("slayout", EnumLit("TileLayout", eff["slayout"])))
        return [AssignStmt(mat, Call("tile.tpop_from_aiv", (), split, span=c.span), mat_t, span=s.span),
                AssignStmt(s.target, replace(c, args=(mat,) + c.args[1:], kwargs=kw), s.annotation, span=s.span)]

    def setup(self, aic_name: str, aiv_name: str) -> tuple[tuple[Stmt, ...], tuple[Stmt, ...]]:
        f = self.f
        mask = sum(self.dirs)
        i32 = ConstInt(0, dtypes.INT32)
        slots = _slot_num(f)
        size = self.slot * slots
        aic: dict[str, list[Stmt]] = {"import": [], "reserve": []}
        aiv: dict[str, list[Stmt]] = {"import": [], "reserve": []}
        bufs = {"aic": [i32, i32], "aiv": [i32, i32]}
        order: dict[str, list[Stmt]] = {"aic": [], "aiv": []}  # PyPTO's order: the V2C pipe's buffer first
        for d, tag, consumer, producer, peer in ((V2C, "v2c", aic, aiv, aic_name), (C2V, "c2v", aiv, aic, aiv_name)):
            if d not in self.dirs:
                continue
            name = f"{f.name}_{tag}_slot_buffer"
            res, imp = Var(name), Var(f"{name}_import")
            # the ring is the kernel's: a diagnostic about it (PTOC-E0620) points at the kernel
            order["aiv" if consumer is aiv else "aic"].append(AssignStmt(res, Call("system.reserve_buffer", (), (
                ("name", StrLit(name)), ("size", _i(size)), ("base", _i(-1))), span=f.span), _INT32, span=f.span))
            order["aic" if producer is aic else "aiv"].append(AssignStmt(imp, Call("system.import_peer_buffer", (), (
                ("name", StrLit(name)), ("peer_func", StrLit(peer)))), _INT32))
            pos = 0 if d == C2V else 1
            bufs["aiv" if consumer is aiv else "aic"][pos] = res
            bufs["aic" if producer is aic else "aiv"][pos] = imp
        kw = (("dir_mask", _i(mask)), ("slot_size", _i(self.slot)), ("slot_num", _i(slots)))
        aic_init = EvalStmt(Call("system.aic_initialize_pipe", tuple(bufs["aic"]), kw))
        aiv_init = EvalStmt(Call("system.aiv_initialize_pipe", tuple(bufs["aiv"]), kw))
        return tuple(order["aic"] + [aic_init]), tuple(order["aiv"] + [aiv_init])

    def lineage(self, v, params: set[str]):
        """The parameter a returned value was stored into (through any chain of stores), else the value."""
        e, seen = v, 0
        while isinstance(e, Var) and e.name not in params and e.name in self.store_dest and seen < 64:
            e, seen = self.store_dest[e.name], seen + 1
        return e if isinstance(e, Var) and e.name in params else v

    def group(self, aic: Function, aiv: Function, aiv_body: tuple[Stmt, ...]) -> Function:
        f = self.f
        args = tuple(Var(p.name) for p in f.params)
        ret = next((s for s in aiv_body if isinstance(s, ReturnStmt)), None)
        params = {p.name for p in f.params}
        if ret is not None:
            ret = replace(ret, values=tuple(self.lineage(v, params) for v in ret.values))
        body: list[Stmt] = [EvalStmt(Call(aic.name, args, (), "func"))]
        if ret is None or not ret.values:
            body.append(EvalStmt(Call(aiv.name, args, (), "func")))
        elif all(isinstance(v, Var) and v.name in params for v in ret.values):
            body.append(EvalStmt(Call(aiv.name, args, (), "func")))
            body.append(ReturnStmt(ret.values))
        else:
            names = [Var(f"{f.name}_result_{i}") for i in range(len(f.returns))]
            if len(names) == 1:
                body.append(AssignStmt(names[0], Call(aiv.name, args, (), "func"), f.returns[0]))
            else:
                tup = Var(f"{f.name}_result")
                body.append(AssignStmt(tup, Call(aiv.name, args, (), "func")))
                for i, n in enumerate(names):
                    body.append(AssignStmt(n, GetItem(tup, _i(i)), f.returns[i]))
            body.append(ReturnStmt(tuple(names)))
        if not f.returns:
            body = [s for s in body if not isinstance(s, ReturnStmt)]
        return replace(f, func_type="Group", body=tuple(body))


_INT32 = ScalarType(dtypes.INT32)


def _slot_num(f: Function) -> int:
    """The pipe's ring depth: the function's `attrs={"slot_num": n}` when given, else SLOT_NUM."""
    for k, v in f.decorator_kwargs:
        if k == "attrs" and isinstance(v, DictExpr):
            for key, val in v.items:
                if isinstance(key, StrLit) and key.value == "slot_num" and isinstance(val, ConstInt) and val.value > 0:
                    return val.value
    return SLOT_NUM


def _bytes(t) -> int:
    if not isinstance(t, TileType):
        return 0
    n = 1
    for d in t.shape:
        if not isinstance(d, ConstInt):
            return 0
        n *= d.value
    return n * t.dtype.bits // 8


def walk_stmts(body: tuple[Stmt, ...]):
    for s in body:
        yield s
        if isinstance(s, (ForStmt, WhileStmt, ScopeStmt)):
            yield from walk_stmts(s.body)
        elif isinstance(s, IfStmt):
            yield from walk_stmts(s.then_body)
            yield from walk_stmts(s.else_body)


def _defs(body: tuple[Stmt, ...], out: set[str]) -> set[str]:
    for s in walk_stmts(body):
        if isinstance(s, AssignStmt):
            out.add(s.target.name)
        elif isinstance(s, YieldStmt):
            out.update(t.name for t in s.targets)
        elif isinstance(s, ForStmt):
            out.add(s.var.name)
            out.update(a.name for a in s.iter_args)
        elif isinstance(s, WhileStmt):
            out.update(a.name for a in s.iter_args)
    return out


def _fix_dangling(body: tuple[Stmt, ...], f: Function, store_dest: dict, drop_return: bool) -> tuple[Stmt, ...]:
    """Uses of values this side does not define: a store result of the other side stands for the tensor it
    was stored into (followed back to a defined value); a loop yield of an undefined value yields its
    iter_arg; the AIC drops its return."""
    defined = _defs(body, {p.name for p in f.params})

    def sub(e):
        seen = 0
        while isinstance(e, Var) and e.name not in defined and e.name in store_dest and seen < 64:
            e = store_dest[e.name]
            seen += 1
        return e

    def fix(stmts: tuple[Stmt, ...], loop: ForStmt | None) -> tuple[Stmt, ...]:
        out: list[Stmt] = []
        for s in stmts:
            if isinstance(s, ReturnStmt):
                if not drop_return:
                    out.append(replace(s, values=tuple(sub(v) for v in s.values)))
                continue
            if isinstance(s, YieldStmt) and loop is not None:
                vals = []
                for i, v in enumerate(s.values):
                    v2 = sub(v)
                    if isinstance(v2, Var) and v2.name not in defined and i < len(loop.iter_args):
                        v2 = loop.iter_args[i]
                    vals.append(v2)
                out.append(replace(s, values=tuple(vals)))
                continue
            if isinstance(s, YieldStmt):
                out.append(replace(s, values=tuple(sub(v) for v in s.values)))
                continue
            if isinstance(s, ForStmt):
                out.append(replace(s, init_values=tuple(sub(v) for v in s.init_values), body=fix(s.body, s)))
                continue
            if isinstance(s, IfStmt):
                out.append(replace(s, then_body=fix(s.then_body, None), else_body=fix(s.else_body, None)))
                continue
            if isinstance(s, AssignStmt) and isinstance(s.value, Call) and s.value.kind == "op":
                c = s.value
                out.append(replace(s, value=replace(c, args=tuple(sub(a) for a in c.args))))
                continue
            out.append(s)
        return tuple(out)

    return fix(body, None)


def _uses(s: Stmt, memo: dict | None = None) -> set[str]:
    """Names `s` reads (the targets it binds excluded). `memo`: id(statement) -> (it, its answer), kept for
    the statements asked again (the pops' frees and the dead-code rounds ask of the same ones; the caller
    must not change the answer)."""
    if memo is not None:
        hit = memo.get(id(s))
        if hit is not None and hit[0] is s:
            return hit[1]
        out = _uses(s)
        memo[id(s)] = (s, out)
        return out
    skip: set[int] = set()
    if isinstance(s, AssignStmt):
        skip.add(id(s.target))
    if isinstance(s, YieldStmt):
        skip.update(id(t) for t in s.targets)
    if isinstance(s, ForStmt):
        skip.add(id(s.var))
        skip.update(id(a) for a in s.iter_args)
    return var_names((s,), skip)


def _free_pops(body: tuple[Stmt, ...], memo: dict | None = None) -> tuple[Stmt, ...]:
    """A `tfree` after the last statement of the block that uses each tile popped in it. `memo`: `_uses`'."""
    memo = {} if memo is None else memo
    out: list[Stmt] = []
    for s in body:
        if isinstance(s, ForStmt):
            s = replace(s, body=_free_pops(s.body, memo))
        elif isinstance(s, IfStmt):
            s = replace(s, then_body=_free_pops(s.then_body, memo), else_body=_free_pops(s.else_body, memo))
        out.append(s)
    for i in range(len(out) - 1, -1, -1):
        s = out[i]
        if not (isinstance(s, AssignStmt) and _is(s.value, "tile.tpop_from_aic", "tile.tpop_from_aiv")):
            continue
        free = "system.tfree_to_aic" if _is(s.value, "tile.tpop_from_aic") else "system.tfree_to_aiv"
        name = s.target.name
        last = i
        for j in range(i + 1, len(out)):
            if isinstance(out[j], (YieldStmt, ReturnStmt)):
                break
            if name in _uses(out[j], memo):
                last = j
        out.insert(last + 1, EvalStmt(Call(free, (Var(name),)), span=s.span))
    return tuple(out)


def _pure(s: AssignStmt) -> bool:
    v = s.value
    if not isinstance(v, Call):
        return True
    return v.kind == "op" and not any(n.startswith(EFFECTS) for n in op_names(v.op))


def _dce(body: tuple[Stmt, ...], memo: dict | None = None) -> tuple[Stmt, ...]:
    """Remove assignments (and loops) whose results nothing reads, until nothing changes. `memo`: `_uses`'."""
    memo = {} if memo is None else memo
    known: dict[int, tuple[Stmt, set[str]]] = {}  # id(statement) -> (it, what it reads): a statement the
    # last round kept is not walked again (the entry holds it, so its id names no other statement)
    while True:
        used: set[str] = set()
        for s in walk_stmts(body):
            hit = known.get(id(s))
            if hit is None or hit[0] is not s:
                hit = known[id(s)] = (s, _head_uses(s) if isinstance(s, (ForStmt, IfStmt, WhileStmt, ScopeStmt))
                                      else _uses(s, memo))
            used |= hit[1]
        new = _dce_block(body, used, memo)
        if new == body:
            return body
        body = new


def _head_uses(s: Stmt) -> set[str]:
    if isinstance(s, ForStmt):
        return var_names((s.args, s.init_values))
    if isinstance(s, IfStmt):
        return var_names((s.cond,))
    if isinstance(s, WhileStmt):
        return var_names((s.cond, s.init_values))
    return set()


def _drop_dead_iter_args(s: ForStmt, used: set[str], memo: dict) -> ForStmt:
    """Loop-carried values nothing reads after the loop and the body only passes on unchanged."""
    y = s.body[-1] if s.body and isinstance(s.body[-1], YieldStmt) else None
    if y is None:
        return s
    inner = set()
    for x in s.body[:-1]:
        inner |= _head_uses(x) if isinstance(x, (ForStmt, IfStmt, WhileStmt, ScopeStmt)) else _uses(x, memo)
        if isinstance(x, (ForStmt, IfStmt, WhileStmt, ScopeStmt)):
            inner |= var_names((x,))  # (every statement under `x` is in its walk)
    keep = [i for i, (a, r, v) in enumerate(zip(s.iter_args, y.targets, y.values))
            if r.name in used or a.name in inner or not (isinstance(v, Var) and v.name == a.name)]
    if len(keep) == len(s.iter_args):
        return s
    y2 = replace(y, targets=tuple(y.targets[i] for i in keep), values=tuple(y.values[i] for i in keep),
                 annotation=y.annotation if len(keep) == 1 else None)
    body = s.body[:-1] + ((y2,) if keep else ())
    return replace(s, body=body, iter_args=tuple(s.iter_args[i] for i in keep),
                   init_values=tuple(s.init_values[i] for i in keep))


def _dce_block(body: tuple[Stmt, ...], used: set[str], memo: dict) -> tuple[Stmt, ...]:
    out: list[Stmt] = []
    for s in body:
        if isinstance(s, AssignStmt) and s.target.name not in used and _pure(s):
            continue
        if isinstance(s, ForStmt):
            s = _drop_dead_iter_args(s, used, memo)
            inner = _dce_block(s.body, used, memo)
            if not inner or all(isinstance(x, YieldStmt) for x in inner):
                results = inner[-1].targets if inner and isinstance(inner[-1], YieldStmt) else ()
                if not any(r.name in used for r in results):
                    continue
            if not _same(inner, s.body):
                s = replace(s, body=inner)
        elif isinstance(s, IfStmt):
            then_body, else_body = _dce_block(s.then_body, used, memo), _dce_block(s.else_body, used, memo)
            if not (_same(then_body, s.then_body) and _same(else_body, s.else_body)):
                s = replace(s, then_body=then_body, else_body=else_body)
        out.append(s)
    return tuple(out)


def _same(a: tuple, b: tuple) -> bool:
    """The two statement tuples hold the identical statements (a rebuilt statement would compare equal:
    keeping the old one spares `_dce` comparing whole bodies field by field)."""
    return len(a) == len(b) and all(x is y for x, y in zip(a, b))


__all__ = ["ExpandMixedKernel"]
