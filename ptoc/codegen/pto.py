"""The `.pto` emitter: a lowered program -> one PTOAS module (MLIR text in the PTO dialect).

Entry point: `emit_module(program, ctx, pto_level="level3") -> (text, skipped)`. `text` is one
`module attributes {pto.target_arch = "a2a3"|"a5"} { ... }` holding a `func.func` per kernel (AIC, AIV
and plain InCore functions, in program order); `skipped` lists the names of the functions that are not
emitted and whose absence is not self-evident (an Opaque function without `type=`, ...; the driver notes
them): orchestration, Group and Spmd functions are host code, described by the kernels manifest.
`kernel_functions(program)` returns the functions that are emitted.

The spelling follows `spec/pto-format.md` exactly:
- arguments: GM tensor params as `!pto.ptr<T>` (in parameter order), then scalar params, then one `index`
  argument per dynamic dimension symbol (first-seen order: parameter types, then the body); all named
  `%argN`. `pto.kernel_kind` is `cube` for AIC, `vector` for AIV and absent for InCore; the body ends
  with a bare `return`.
- constants are hoisted to the top of the body and de-duplicated per (value, type): `%c16_index`,
  `%c2048_i64`, `%cn1_index`, `%true`, floats `%cst`, `%cst_1`, ... printed with `%.17e`.
- one `pto.make_tensor_view` per tensor parameter (`%<param>_view`; shape, strides and layout from
  `ptoc.codegen.views.tensor_views`, which the GlobalTensor header shares), one `pto.partition_view`
  per load / store window (`ptoc.codegen.views.partitions`).
- tiles are handles written in place: a tile value whose MemRef (base, offset) and `tile_buf` type equal
  an existing handle's reuses that handle. This is how loop-carried tiles and matmul accumulators work
  (`pto.tmatmul.acc ins(%acc, ...) outs(%acc ...)`). A handle with a static valid shape is allocated
  (`pto.alloc_tile`) where its buffer is (`pl.tile.alloc`), so it dominates every tile that shares the
  buffer (loop bodies, both branches of an if); a handle with a dynamic valid shape is allocated where
  its first tile is defined, since its `valid_row`/`valid_col` operands are computed there. At level3
  every alloc has `addr` (the buffer's `addr=` plus the MemRef offset); at level2 PTOAS plans memory.
- loops become `scf.for` over `index` bounds; loop-carried scalars go through `iter_args`/`scf.yield`,
  loop-carried tiles and tensors do not (the loop result is the init's handle / view); `scf.if` carries
  scalar results only. `pl.while_` becomes `scf.while` the same way: its scalars are the operands, the
  "before" region computes `pl.cond` and ends in `scf.condition`, the "do" region (`^bb0(...)`) runs the
  body. The pipe barriers `pl.system.bar_v/bar_m/bar_all()` are `pto.barrier <PIPE_V|PIPE_M|PIPE_ALL>`.

- views are SSA values of their source's storage, never buffers of their own: `tile.reshape` /
  `tile.reinterpret_view` (and a level2 `tile.set_validshape` of a static tile) become `pto.treshape`,
  `tile.slice` of an unboxed tile `pto.subview`; `tile.read` / `tile.write` become `pto.tgetval` /
  `pto.tsetval` at the element's row-major storage offset. Gather / scatter / generators follow PTOAS's op
  definitions: `pto.tgather` (index form with tmp, mask form), `pto.tscatter` (index form), `pto.tgatherb`,
  `pto.tci` (one-row tiles, as pto-isa's TCI fills row 0), `pto.ttri`.

Anything the emitter has no PTO form for is a `PTOC-E0400` diagnostic naming the op, never dropped
(e.g. `tile.sel`: pto.tsel reads a packed-bit mask; `tile.scatter_mask`; `tile.mgather`).
Output is deterministic: every table is filled and read in program order.
"""

from __future__ import annotations

import math
import operator

from ptoc.ir.names import fresh_name
from ptoc.diagnostics import CompileError, Diagnostic, InternalError, Span
from ptoc.ir import dtypes
from ptoc.ir.dtypes import DType
from ptoc.ir.nodes import (
    Abs,
    AssignStmt,
    BinOp,
    Call,
    Cast,
    ConstBool,
    ConstFloat,
    ConstInt,
    DTypeLit,
    EvalStmt,
    Expr,
    ForStmt,
    Function,
    IfStmt,
    MemRef,
    MinMax,
    PassStmt,
    Program,
    ReturnStmt,
    ScalarType,
    ScopeStmt,
    Stmt,
    StrLit,
    TensorType,
    TileType,
    UnaryOp,
    Var,
    WhileStmt,
    YieldStmt,
)
from ptoc.ir.types import effective_tile_view, is_empty_tile
from ptoc.codegen.pto_forms import (
    COMPACT,
    CORE_ID,
    KERNEL_KIND,
    LEVELS,
    LOC,
    PAD,
    PIPE_BARRIERS,
    VIEW_OPS,
    _Handle,
    _Scalar,
    _Tensor,
    _arg,
    _enum_text,
    _float_hex,
    _int,
    element_type,
    scalar_type,
    unsupported,
)
from ptoc.codegen.tile_ops import TileOpEmitter
# (imported once here rather than in each kernel's writer: none of these imports the emitters)
from ptoc.codegen.views import views_of
from ptoc.ir.verifier import _KEPT, NodeIndex, function_types, iter_type_exprs
from ptoc.ir.visitor import walk
from ptoc.codegen.cross_core import POP_OPS, CrossCoreEmitter, cross_core_op


def dynamic_dims(program: Program, fn: Function, defined: set[str] | None = None) -> list[str]:
    """The dynamic dimension symbols of kernel `fn`, in the order of its trailing `index` arguments:
    first seen in the parameter types, then in the body. `defined`: names the body binds itself."""
    if defined is None:
        defined = set(function_types(program).get(fn.name, {}))
    params = {p.name for p in fn.params}
    declared = {d.name for d in program.dynamic_dims}
    seen: list[str] = []

    def visit(e: Expr, in_type: bool) -> None:
        for node in walk(e):
            if isinstance(node, Var) and node.name not in params and node.name not in seen and (
                    in_type or node.name in declared):
                seen.append(node.name)

    for p in fn.params:
        for e in iter_type_exprs(p.type):
            cls = e.__class__
            if cls is ConstInt:
                continue  # (most dimensions and strides: no name in them, no walk needed)
            if cls is Var:
                if e.name not in params and e.name not in seen:
                    seen.append(e.name)
                continue
            visit(e, True)
    open_dims = declared - defined - params  # what the body may read without binding it
    if not open_dims:
        return seen
    kept = program.__dict__.get(_KEPT)
    if kept is not None:
        # the pipeline's node index of `fn` (no walk): when no name it lists is an open dimension not
        # seen yet, the body adds none
        open_dims = open_dims.difference(seen)
        if open_dims.isdisjoint(map(_NAME, NodeIndex.get(fn, kept).of(Var))):
            return seen
    for s in fn.body:
        for node in walk(s):
            if isinstance(node, Var) and node.name in open_dims and node.name not in seen:
                seen.append(node.name)
    return seen


_NAME = operator.attrgetter("name")


def kernel_functions(program: Program) -> list[Function]:
    """The functions `emit_module` emits: AIC, AIV and InCore kernels, in program order."""
    return [f for f in program.functions if f.func_type in KERNEL_KIND]


# Functions that run on the host and launch kernels: not emitted, and not noted as skipped (the kernels
# manifest lists their calls).
HOST_FUNCTION_TYPES = ("Orchestration", "Group", "Spmd")


def emit_module(program: Program, ctx, pto_level: str = "level3", types: dict | None = None,
                memo: dict | None = None) -> tuple[str, list[str]]:
    """The `.pto` module of every kernel of `program` and the names of the functions not emitted.
    `types`: `ptoc.ir.verifier.function_types` of `program` when the caller has it (the driver's, from
    the pipeline's verifier cache), so it is not inferred again. `memo`: one the header's `kernel_types`
    shares (`ptoc.codegen.views.views_of`)."""
    if pto_level not in LEVELS:
        raise InternalError(f"unknown PTO level {pto_level!r}")
    from ptoc.ir.verifier import function_types

    from ptoc.codegen.host_work import require_no_host_tile_work

    require_no_host_tile_work(program)
    arch = getattr(ctx, "arch", "a2a3")
    if types is None:
        types = function_types(program, ctx)
    funcs = []
    skipped = []  # a successful compile of a whole program is quiet: its host functions are expected
    spellings: dict = {}  # the tile types' spellings, shared by the kernels (`_FunctionEmitter.tile_type`)
    for f in program.functions:
        if f.func_type in KERNEL_KIND:
            funcs.append(_FunctionEmitter(program, f, types.get(f.name, {}), pto_level, arch, memo,
                                          spellings).run())
        elif f.func_type not in HOST_FUNCTION_TYPES:
            skipped.append(f.name)
    out = [f'module attributes {{pto.target_arch = "{arch}"}} {{']
    for text in funcs:
        out.extend(text)
    out.append("}")
    return "\n".join(out) + "\n", skipped


class _FunctionEmitter(TileOpEmitter, CrossCoreEmitter):
    def __init__(self, program: Program, fn: Function, types: dict, level: str, arch: str = "a2a3",
                 memo: dict | None = None, spellings: dict | None = None):
        self.program = program
        self.fn = fn
        self.types = types
        self.level = level
        self.arch = arch
        self.alloc_sizes: dict[str, int] = {}  # buffer -> bytes
        self.gm_ptr: dict[str, str] = {}  # tensor param -> its !pto.ptr argument
        self.views, parts = views_of(fn, types, memo)
        self.parts = {id(p.call): p for p in parts}
        self.used: set[str] = set()
        self.const_lines: list[str] = []
        self.consts: dict[tuple, str] = {}
        self.index_names: dict[int, str] = {}  # see index
        self.nfloat = 0
        self.ntemp = 0
        self.lines: list[str] = []
        self.depth = 2
        self.env: dict[str, object] = {}
        self.handles: dict[tuple, _Handle] = {}
        self.view_handles: set[str] = set()  # SSA names of handles made by pto.treshape (defined where the view is)
        self.allocs: dict[str, tuple[str, int | None]] = {}  # base name -> (memory, addr)
        self.pending: dict[str, list[tuple[tuple, str, TileType]]] = {}  # base -> static handles to allocate
        self.view_ssa: dict[str, tuple[str, str]] = {}  # tensor param -> (view ssa, view type)
        self.tile_types: dict[tuple[int, bool], tuple[TileType, tuple[str, bool]]] = {}  # see tile_type
        self.spellings: dict[tuple, tuple[str, bool]] = {} if spellings is None else spellings  # see tile_type

    # ------------------------------------------------------------------ text helpers
    def fresh(self, base: str) -> str:
        return fresh_name(base, self.used)

    def temp(self) -> str:
        while str(self.ntemp) in self.used:
            self.ntemp += 1
        name = str(self.ntemp)
        self.used.add(name)
        self.ntemp += 1
        return name

    def emit(self, line: str) -> None:
        self.lines.append("  " * self.depth + line)

    def const_int(self, v: int, dt: DType) -> str:
        t = scalar_type(dt)
        if t == "i1":
            key = ("b", bool(v))
            if key not in self.consts:
                name = self.fresh("true" if v else "false")
                self.consts[key] = name
                self.const_lines.append(f"    %{name} = arith.constant {'true' if v else 'false'}")
            return self.consts[key]
        key = ("i", int(v), t)
        if key not in self.consts:
            name = self.fresh(f"c{v}_{t}" if v >= 0 else f"cn{-v}_{t}")
            self.consts[key] = name
            self.const_lines.append(f"    %{name} = arith.constant {v} : {t}")
        return self.consts[key]

    def const_float(self, v: float, dt: DType) -> str:
        t = scalar_type(dt)
        if math.isfinite(v):
            text = f"{v:.17e}"
            key = ("f", text, t)
        else:
            text = _float_hex(v, t)
            if text is None:
                raise unsupported(f"a non-finite {t} constant", None)
            key = ("f", text, t)
        if key not in self.consts:
            name = self.fresh("cst" if self.nfloat == 0 else f"cst_{self.nfloat}")
            self.nfloat += 1
            self.consts[key] = name
            self.const_lines.append(f"    %{name} = arith.constant {text} : {t}")
        return self.consts[key]

    def index(self, v: int) -> str:
        # (`const_int(v, dtypes.INDEX)`, remembered by value: most constants the writer asks for are
        # indexes, the same few many times over)
        name = self.index_names.get(v)
        if name is None:
            name = self.index_names[v] = self.const_int(v, dtypes.INDEX)
        return name

    # ------------------------------------------------------------------ the function
    def run(self) -> list[str]:
        fn = self.fn
        args: list[str] = []
        n = 0
        tensor_params = [p for p in fn.params if isinstance(p.type, TensorType)]
        scalar_params = []
        for p in fn.params:
            if isinstance(p.type, TensorType):
                continue
            if not isinstance(p.type, ScalarType):
                raise unsupported(f"the parameter {p.name} of {fn.name} (neither a tensor nor a scalar)", p.span)
            scalar_params.append(p)
        names_in_order = [f"arg{i}" for i in range(len(tensor_params) + len(scalar_params))]
        for a in names_in_order:
            self.used.add(a)
        ptr_of: dict[str, str] = {}
        for p in tensor_params:
            name = f"arg{n}"
            n += 1
            ptr_of[p.name] = name
            self.env[p.name] = _Tensor(p.name)
            args.append(f"%{name}: !pto.ptr<{element_type(p.type.dtype, p.span)}>")
        for p in scalar_params:
            name = f"arg{n}"
            n += 1
            self.env[p.name] = _Scalar(name, p.type.dtype)
            args.append(f"%{name}: {scalar_type(p.type.dtype, p.span)}")
        for d in self._dynamic_dims():
            name = self.fresh(f"arg{n}")
            n += 1
            self.env[d] = _Scalar(name, dtypes.INDEX)
            args.append(f"%{name}: index")
        self.gm_ptr = ptr_of
        self._prescan(fn.body)
        self._make_views(ptr_of)
        self.block(fn.body)
        kind = KERNEL_KIND[fn.func_type]
        attrs = f" attributes {{pto.kernel_kind = #pto.kernel_kind<{kind}>}}" if kind else ""
        out = [f"  func.func @{fn.name}({', '.join(args)}){attrs} {{"]
        out.extend(self.const_lines)
        out.extend(self.lines)
        out.append("    return")
        out.append("  }")
        return out

    def _dynamic_dims(self) -> list[str]:
        return dynamic_dims(self.program, self.fn, set(self.types))

    # ------------------------------------------------------------------ prescan: buffers and their handles
    def _prescan(self, body: tuple[Stmt, ...]) -> None:
        for s in body:
            if isinstance(s, AssignStmt):
                v = s.value
                if isinstance(v, Call) and v.kind == "op" and v.op == "tile.alloc":
                    mem = _enum_text(v.args[0]) if v.args else None
                    addr = v.kwarg("addr")
                    self.allocs[s.target.name] = (mem or "", _int(addr) if addr is not None else None)
                    size = v.args[1] if len(v.args) > 1 else v.kwarg("size")
                    self.alloc_sizes[s.target.name] = _int(size) or 0 if size is not None else 0
                    self.pending.setdefault(s.target.name, [])
                    continue
                if isinstance(v, Var) or (isinstance(v, Call) and (v.op in VIEW_OPS or cross_core_op(v.op) in POP_OPS)):
                    continue
                t = self.types.get(s.target.name)
                if not isinstance(t, TileType) or t.memref is None or not isinstance(t.memref.base, Var):
                    continue
                try:
                    tstr, dyn = self.tile_type(t, s.span)
                    key = self._key(t.memref, tstr)
                except (CompileError, InternalError):
                    continue  # reported where the tile is defined
                base = t.memref.base.name
                if not dyn and base in self.pending and all(k != key for k, _, _ in self.pending[base]):
                    self.pending[base].append((key, s.target.name, t))
            elif isinstance(s, (ForStmt, WhileStmt, ScopeStmt)):
                self._prescan(s.body)
            elif isinstance(s, IfStmt):
                self._prescan(s.then_body)
                self._prescan(s.else_body)

    @staticmethod
    def _key(m: MemRef, tstr: str) -> tuple:
        off = _int(m.offset)
        if off is None:
            raise InternalError("a tile MemRef offset is not a constant")
        base = m.base.name if isinstance(m.base, Var) else f'"{m.base.value}"' if isinstance(m.base, StrLit) else None
        if base is None:
            raise InternalError("a tile MemRef base is neither a buffer nor a named region")
        return (base, off, tstr)

    # ------------------------------------------------------------------ GM views
    def _make_views(self, ptr_of: dict[str, str]) -> None:
        for v in self.views:
            if v.layout.startswith("MX_"):  # PyPTO's packed MX scale layouts (MX_A_ZZ, MX_B_NN)
                at = next((p.span for p in self.fn.params if p.name == v.param), None)
                raise unsupported(f"a GM tensor of layout {v.layout} ({v.param})", at,
                                  "the MX scale layouts are parsed and typed; ptoc's .pto emitter has no view "
                                  "for them yet")
            shape = [self.index_value(e, None) for e in v.shape]
            strides = [self.index_value(e, None) for e in v.strides]
            vt = f"!pto.tensor_view<{'x'.join('?' for _ in v.shape)}x{element_type(v.dtype)}>"
            name = self.fresh(f"{v.param}_view")
            self.view_ssa[v.param] = (name, vt)
            shape_text = ", ".join("%" + x for x in shape)
            stride_text = ", ".join("%" + x for x in strides)
            self.emit(f"%{name} = pto.make_tensor_view %{ptr_of[v.param]}, shape = [{shape_text}], "
                      f"strides = [{stride_text}] {{layout = #pto.layout<{v.layout.lower()}>}} : {vt}")

    def partition(self, call: Call, span: Span | None) -> tuple[str, str]:
        p = self.parts.get(id(call))
        if p is None:
            raise InternalError(f"no GM window recorded for a {call.op}")
        view, vt = self.view_ssa[p.tensor]
        dt = next(v.dtype for v in self.views if v.param == p.tensor)
        offs = [self.index_value(e, span) for e in p.offsets]
        sizes = [self.index_value(e, span) for e in p.sizes]
        dims = "x".join(str(_int(e)) if _int(e) is not None else "?" for e in p.sizes)
        pt = f"!pto.partition_tensor_view<{dims}x{element_type(dt)}>"
        name = self.fresh(p.name)
        self.emit(f"%{name} = pto.partition_view %{view}, offsets = [{', '.join('%' + o for o in offs)}], "
                  f"sizes = [{', '.join('%' + s for s in sizes)}] : {vt} -> {pt}")
        return name, pt

    # ------------------------------------------------------------------ tiles
    def tile_type(self, t: TileType, span: Span | None, view: bool = False) -> tuple[str, bool]:
        """The `!pto.tile_buf<...>` spelling of a tile type and whether its valid shape is dynamic.
        `view`: the type of a `pto.subview` result, whose stride / start offset (the parent's) are implied
        by the op and not spelled in the type. (Worked out once per type object of the function.)

        The spelling reads every part of the type but its MemRef, and each tile has a MemRef of its own:
        a module's thousands of tile type objects have a few dozen spellings. So they are remembered by
        the value of those parts too (`spellings`, which the writers of a module's kernels share)."""
        known = self.tile_types.get((id(t), view))
        if known is not None and known[0] is t:
            return known[1]
        key = (t.shape, t.dtype, t.memory, t.view, view)
        answer = self.spellings.get(key)
        if answer is None:
            answer = self.spellings[key] = self._tile_type(t, span, view)
        self.tile_types[(id(t), view)] = (t, answer)
        return answer

    def _tile_type(self, t: TileType, span: Span | None, view: bool) -> tuple[str, bool]:
        if t.rank != 2:
            raise InternalError(f"a rank-{t.rank} tile reached codegen (FlattenTileNdTo2D makes tiles 2-D)")
        rows, cols = _int(t.shape[0]), _int(t.shape[1])
        if rows is None or cols is None:
            raise unsupported("a tile with a dynamic physical shape", span,
                              hint="give the tile a static shape and a dynamic valid_shape")
        mem = t.memory or "Vec"
        loc = LOC.get(mem)
        if loc is None:
            raise unsupported(f"a {mem} tile", span)
        eff = effective_tile_view(t)
        if not view and (eff["stride"] or (eff["start_offset"] is not None and _int(eff["start_offset"]) != 0)):
            raise unsupported("a tile view with an explicit stride or start offset", span)
        valid = tuple(eff["valid_shape"])
        # An empty tile is written `?` with zero operands: pto-isa's Tile has no static-zero valid extent
        dyn = any(_int(x) is None for x in valid) or is_empty_tile(t)
        vr, vc = ("?", "?") if dyn else (str(_int(valid[0])), str(_int(valid[1])))
        compact = COMPACT.get(str(eff["compact"]))
        text = (f"!pto.tile_buf<loc={loc}, dtype={element_type(t.dtype, span)}, rows={rows}, cols={cols}, "
                f"v_row={vr}, v_col={vc}, blayout={eff['blayout']}, slayout={eff['slayout']}, "
                f"fractal={eff['fractal']}, pad={PAD[str(eff['pad'])]}"
                + (f", compact={compact}" if compact is not None else "") + ">")
        return text, dyn

    def _valid_values(self, t: TileType, span: Span | None) -> tuple[str, str]:
        valid = tuple(effective_tile_view(t)["valid_shape"])
        return self.index_value(valid[0], span), self.index_value(valid[1], span)

    def _alloc(self, key: tuple, name: str, t: TileType, tstr: str, dyn: bool, span: Span | None) -> _Handle:
        parts = ["pto.alloc_tile"]
        if self.level == "level3":
            parts.append(f"addr = %{self.const_int(self._addr(t.memref, name), dtypes.INT64)}")
        valid = None
        if dyn:
            valid = self._valid_values(t, span)
            parts.append(f"valid_row = %{valid[0]} valid_col = %{valid[1]}")
        ssa = self.fresh(name)
        self.emit(f"%{ssa} = {' '.join(parts)} : {tstr}")
        h = _Handle(ssa, tstr, key, dyn, valid)
        self.handles[key] = h
        return h

    def _addr(self, m: MemRef | None, name: str) -> int:
        if m is None or not isinstance(m.base, Var) or m.base.name not in self.allocs:
            raise InternalError(f"tile {name} has no MemRef bound to a pl.tile.alloc (run InitMemRef)")
        addr = self.allocs[m.base.name][1]
        off = _int(m.offset)
        if addr is None or off is None:
            raise InternalError(f"buffer {m.base.name} has no constant addr= at --pto-level level3 "
                                "(run AllocateMemoryAddr)")
        return addr + off

    def define_tile(self, name: str, span: Span | None) -> _Handle:
        """The handle a newly defined tile value `name` writes into (allocated if it is new)."""
        t = self.types.get(name)
        if not isinstance(t, TileType):
            raise InternalError(f"tile {name} has no tile type")
        tstr, dyn = self.tile_type(t, span)
        if t.memref is None:
            raise InternalError(f"tile {name} has no MemRef (run InitMemRef)")
        key = self._key(t.memref, tstr)
        h = self.handles.get(key)
        if h is None:
            h = self._alloc(key, name, t, tstr, dyn, span)
        elif dyn:
            valid = self._valid_values(t, span)
            if valid != h.valid:
                self.emit(f"pto.set_validshape %{h.ssa}, %{valid[0]}, %{valid[1]} : {h.type}")
                h.valid = valid
        self.env[name] = h
        return h

    def tile(self, e: Expr, span: Span | None) -> _Handle:
        v = self.env.get(e.name) if isinstance(e, Var) else None
        if not isinstance(v, _Handle):
            raise InternalError(f"operand {e} is not a tile handle")
        return v

    # ------------------------------------------------------------------ statements
    def block(self, body: tuple[Stmt, ...]) -> YieldStmt | None:
        y = None
        for s in body:
            if isinstance(s, YieldStmt):
                y = s
                continue
            self.stmt(s)
        return y

    def stmt(self, s: Stmt) -> None:
        if isinstance(s, AssignStmt):
            self.assign(s)
        elif isinstance(s, EvalStmt):
            e = s.expr
            if isinstance(e, Call) and e.kind == "op" and e.op == "tile.store":
                self.store(e, s.span)
            elif isinstance(e, Call) and e.kind == "op" and e.op == "tile.write":
                self.tile_write(e, s.span)
            elif isinstance(e, Call) and e.kind == "op" and cross_core_op(e.op):
                self.cross_core(None, e, s.span)
            elif isinstance(e, Call) and e.kind == "op" and e.op in PIPE_BARRIERS:
                self.pipe_barrier(e, s.span)
            elif isinstance(e, Call):
                raise unsupported(self._describe(e), s.span, _no_pto_hint(e))
            else:
                raise unsupported("an expression statement", s.span)
        elif isinstance(s, ForStmt):
            self.for_stmt(s)
        elif isinstance(s, IfStmt):
            self.if_stmt(s)
        elif isinstance(s, (ReturnStmt, PassStmt)):
            return  # kernels write their outputs through tstore; the body ends with a bare return
        elif isinstance(s, WhileStmt):
            self.while_stmt(s)
        elif isinstance(s, ScopeStmt):
            raise unsupported(f"pl.{s.kind} (a scope inside a kernel)", s.span,
                              hint="outline the scope into its own kernel function")
        else:
            raise InternalError(f"unexpected statement {type(s).__name__}")

    def pipe_barrier(self, e: Call, span: Span | None) -> None:
        """`pl.system.bar_v/bar_m/bar_all()`: `pto.barrier <PIPE_x>`, the wait for every instruction issued
        so far on that pipe (all pipes) to finish. It takes no operands and changes no data."""
        if e.args or e.kwargs:
            raise unsupported(f"pl.{e.op} with arguments", span, hint="the pipe barriers take no arguments")
        self.emit(f"pto.barrier <{PIPE_BARRIERS[e.op]}>")

    def assign(self, s: AssignStmt) -> None:
        v = s.value
        name = s.target.name
        if isinstance(v, Var):
            src = self.env.get(v.name)
            if src is None:
                raise InternalError(f"{v.name} has no value")
            self.env[name] = src
            return
        if isinstance(v, Call) and v.kind == "op" and cross_core_op(v.op):
            self.cross_core(name, v, s.span)
            return
        if isinstance(v, Call) and v.kind == "op" and (v.op.startswith("tile.") and v.op not in CORE_ID):
            self.tile_op(s, v)
            return
        if isinstance(v, Call) and v.kind == "func":
            raise unsupported(f"the call self.{v.op} inside a kernel", s.span)
        t = self.types.get(name)
        if not isinstance(t, ScalarType):
            if isinstance(v, Call):
                raise unsupported(self._describe(v), s.span, _no_pto_hint(v))
            raise unsupported("this expression", s.span)
        r = self.expr(v, want=t.dtype, name=name)
        self.env[name] = r


    # ------------------------------------------------------------------ control flow
    def for_stmt(self, s: ForStmt) -> None:
        # pl.range, and also pl.parallel / pl.unroll / pl.pipeline / pl.spmd loops: each becomes a plain
        # scf.for (PTOAS schedules pipelining and unrolling itself; the front end reads `for b in pl.spmd(n)`
        # as a launch on n blocks, so an spmd loop here comes from IR built otherwise and runs its iterations
        # one after the other on this core).
        if s.kind == "split_aiv":
            raise unsupported("pl.split_aiv", s.span, hint="outline the AIV split into its own kernel")
        if _int(s.step) is not None and _int(s.step) <= 0:
            raise unsupported(f"a pl.{s.kind} loop with step {_int(s.step)}", s.span,
                              hint="scf.for needs a positive step: count upwards and compute the index")
        lb = self.index_value(s.start, s.span)
        ub = self.index_value(s.stop, s.span)
        st = self.index_value(s.step, s.span)
        carried, inits = self._loop_inits(s)
        iv = self.fresh(s.var.name)
        header = f"scf.for %{iv} = %{lb} to %{ub} step %{st}"
        results = s.results
        res_names: dict[int, str] = {}
        prefix = ""
        if carried:
            iters = []
            for (i, dt), init in zip(carried, inits):
                a = self.fresh(s.iter_args[i].name)
                self.env[s.iter_args[i].name] = _Scalar(a, dt)
                iters.append(f"%{a} = %{init}")
            header += f" iter_args({', '.join(iters)}) -> ({', '.join(scalar_type(dt) for _, dt in carried)})"
            first = results[carried[0][0]].name if len(results) > carried[0][0] else f"{s.var.name}_res"
            r = self.fresh(first)
            prefix = f"%{r} = " if len(carried) == 1 else f"%{r}:{len(carried)} = "
            for k, (i, _) in enumerate(carried):
                res_names[i] = r if len(carried) == 1 else f"{r}#{k}"
        self.env[s.var.name] = _Scalar(iv, dtypes.INDEX)
        self.emit(prefix + header + " {")
        self.depth += 1
        y = self.block(s.body)
        if carried:
            if y is None:
                raise InternalError("a loop with loop-carried scalars has no pl.yield_")
            vals = [self.expr(y.values[i], want=dt).ssa for i, dt in carried]
            types = ", ".join(scalar_type(dt) for _, dt in carried)
            self.emit(f"scf.yield {', '.join('%' + v for v in vals)} : {types}")
        self.depth -= 1
        self.emit("}")
        self._bind_loop_results(s, results, res_names, carried, y, "loop")

    def _loop_inits(self, s) -> tuple[list[tuple[int, DType]], list[str]]:
        """A loop's carried scalars ((index, dtype) of each, and the SSA values of their initial values), the
        operands of its `scf.for` / `scf.while`; a carried tile or tensor is bound to its initial value's handle
        or view instead (written in place, outside the op's signature)."""
        carried: list[tuple[int, DType]] = []
        inits: list[str] = []
        for i, (a, init) in enumerate(zip(s.iter_args, s.init_values)):
            t = self.types.get(a.name)
            if isinstance(t, ScalarType):
                carried.append((i, t.dtype))
                inits.append(self.expr(init, want=t.dtype).ssa)
            else:
                self.env[a.name] = self.value_of(init, s.span)
        return carried, inits

    def while_stmt(self, s: WhileStmt) -> None:
        """`pl.while_` -> `scf.while`. The loop-carried scalars are the op's operands: the "before" region
        receives them, computes `pl.cond` and passes them on unchanged with `scf.condition`; the "do"
        region receives them again as block arguments, runs the body and yields the next values. The op's
        results are the values the condition last saw, which is what the loop's results hold (the final
        iter_args; the inits when the body never runs). Carried tiles and tensors stay out of the
        signature, as in `scf.for`: they are written in place through their handle / view."""
        carried, inits = self._loop_inits(s)
        types = ", ".join(scalar_type(dt) for _, dt in carried)
        before = [self.fresh(s.iter_args[i].name) for i, _ in carried]
        results = s.results
        prefix = ""
        res_names: dict[int, str] = {}
        if carried:
            first = results[carried[0][0]].name if len(results) > carried[0][0] else f"{s.iter_args[0].name}_res"
            r = self.fresh(first)
            prefix = f"%{r} = " if len(carried) == 1 else f"%{r}:{len(carried)} = "
            for k, (i, _) in enumerate(carried):
                res_names[i] = r if len(carried) == 1 else f"{r}#{k}"
        operands = ", ".join(f"%{b} = %{init}" for b, init in zip(before, inits))
        self.emit(f"{prefix}scf.while ({operands}) : ({types}) -> ({types}) {{")
        self.depth += 1
        for (i, dt), b in zip(carried, before):
            self.env[s.iter_args[i].name] = _Scalar(b, dt)
        c = self.predicate(self.expr(s.cond))
        passed = "".join(f" %{b}" if k == 0 else f", %{b}" for k, b in enumerate(before))
        self.emit(f"scf.condition(%{c}){passed}" + (f" : {types}" if carried else ""))
        self.depth -= 1
        self.emit("} do {")
        self.depth += 1
        after = [self.fresh(s.iter_args[i].name) for i, _ in carried]
        for (i, dt), a in zip(carried, after):
            self.env[s.iter_args[i].name] = _Scalar(a, dt)
        self.emit("^bb0(" + ", ".join(f"%{a} : {scalar_type(dt)}" for a, (_, dt) in zip(after, carried)) + "):")
        y = self.block(s.body)
        if carried:
            if y is None:
                raise InternalError("a while loop with loop-carried scalars has no pl.yield_")
            vals = [self.expr(y.values[i], want=dt).ssa for i, dt in carried]
            self.emit(f"scf.yield {', '.join('%' + v for v in vals)} : {types}")
        else:
            self.emit("scf.yield")
        self.depth -= 1
        self.emit("}")
        self._bind_loop_results(s, results, res_names, carried, y, "while-loop")

    def _bind_loop_results(self, s, results, res_names: dict, carried, y, what: str) -> None:
        """A loop's results: a carried scalar names the loop's own result value; a carried tensor or tile
        is the handle it started as (what the body yields must be that handle, `_same_handle`)."""
        for i, r in enumerate(results):
            if i in res_names:
                self.env[r.name] = _Scalar(res_names[i], dict(carried)[i])
            elif i < len(s.iter_args):
                init = self.env[s.iter_args[i].name]
                if y is not None and i < len(y.values):
                    self._same_handle(init, y.values[i], r.name, s.span)
                self.env[r.name] = init
            else:
                raise InternalError(f"{what} result {r.name} has no loop-carried value")

    def _same_handle(self, init, yielded: Expr, result: str, span: Span | None) -> None:
        if not isinstance(init, _Handle):
            return
        y = self.value_of(yielded, span)
        # a view made in the body (pto.treshape) of the carried buffer, typed as the carried tile: the
        # bytes are already where the loop result's handle points
        if isinstance(y, _Handle) and y.ssa != init.ssa and not (y.key == init.key and not y.dynamic):
            raise InternalError(f"loop-carried tile {result} changes buffer inside the loop "
                                f"({init.ssa} -> {y.ssa}); InitMemRef must give it one buffer")

    def if_stmt(self, s: IfStmt) -> None:
        c = self.predicate(self.expr(s.cond))
        results = s.results
        scalars = [(i, self.types[r.name].dtype) for i, r in enumerate(results)
                   if isinstance(self.types.get(r.name), ScalarType)]
        prefix = ""
        res_names: dict[int, str] = {}
        if scalars:
            r = self.fresh(results[scalars[0][0]].name)
            prefix = f"%{r} = " if len(scalars) == 1 else f"%{r}:{len(scalars)} = "
            for k, (i, _) in enumerate(scalars):
                res_names[i] = r if len(scalars) == 1 else f"{r}#{k}"
        rtypes = f" -> ({', '.join(scalar_type(dt) for _, dt in scalars)})" if scalars else ""
        self.emit(f"{prefix}scf.if %{c}{rtypes} {{")
        yields = self.if_branches(s, scalars)
        self.emit("}")
        for i, r in enumerate(results):
            if i in res_names:
                self.env[r.name] = _Scalar(res_names[i], dict(scalars)[i])
            else:
                self.env[r.name] = self.if_result(r.name, i, yields, s.span)

    def predicate(self, cond: _Scalar) -> str:
        """An i1 SSA value for the condition `cond` (a non-bool value is compared with zero)."""
        if cond.dtype.kind == "bool":
            return cond.ssa
        zero = self.zero(cond.dtype)
        c = self.temp()
        pred = "une" if cond.dtype.is_float else "ne"
        self.emit(f"%{c} = arith.{'cmpf' if cond.dtype.is_float else 'cmpi'} {pred}, %{cond.ssa}, %{zero} : "
                  f"{scalar_type(cond.dtype)}")
        return c

    def if_branches(self, s: IfStmt, scalars: list[tuple[int, DType]]) -> list[YieldStmt | None]:
        """Emit the then / else bodies (each ending in scf.yield of the scalar results); their yields."""
        yields = []
        for k, body in enumerate((s.then_body, s.else_body)):
            if k == 1:
                if not body and not scalars:
                    break
                self.emit("} else {")
            self.depth += 1
            y = self.block(body)
            yields.append(y)
            if scalars:
                if y is None:
                    raise InternalError("an if with results has a branch without pl.yield_")
                vals = [self.expr(y.values[i], want=dt).ssa for i, dt in scalars]
                self.emit(f"scf.yield {', '.join('%' + v for v in vals)} : "
                          f"{', '.join(scalar_type(dt) for _, dt in scalars)}")
            self.depth -= 1
        return yields

    def if_result(self, name: str, i: int, yields: list[YieldStmt | None], span: Span | None):
        """A tile or tensor result of an if: the handle both branches yield (they must share it)."""
        then_v = self.value_of(yields[0].values[i], span)
        if len(yields) > 1 and yields[1] is not None:
            else_v = self.value_of(yields[1].values[i], span)
            if isinstance(then_v, _Handle) and isinstance(else_v, _Handle) and then_v.ssa != else_v.ssa:
                # ptoc's InitMemRef and MemoryReuse never leave this; an input whose buffers are already
                # placed can (a hand-written or edited dump): `scf.if` yields no tiles, so nothing copies
                a, b = (getattr(y.values[i], "name", "?") for y in yields)
                raise CompileError([Diagnostic(
                    "PTOC-E0870", f"the if yields its tile result {name!r} from two buffers ({a!r} in the "
                    f"then branch, {b!r} in the else branch), but its buffers are placed already and the "
                    f"generated code has no copy at the join", span,
                    hint=f"put both in one buffer: before the else branch's pl.yield_ add "
                         f"`{b}_mv: <{b}'s tile type with {a}'s pl.MemRef> = pl.tile.move({b}, "
                         f"target_memory=...)` and yield {b}_mv (what PyPTO's MemoryReuse adds), or "
                         f"compile the program from a dump taken before MemoryReuse")])
        return then_v

    def value_of(self, e: Expr, span: Span | None):
        if isinstance(e, Var) and e.name in self.env:
            return self.env[e.name]
        if isinstance(e, Var) and e.name in self.view_ssa:
            return _Tensor(e.name)
        return self.expr(e)

    # ------------------------------------------------------------------ scalar expressions
    def index_value(self, e: Expr, span: Span | None) -> str:
        """`e` as an `index` SSA value (constants hoisted; other integer types cast)."""
        if isinstance(e, ConstInt):
            return self.index(e.value)
        if isinstance(e, Var) and e.name in self.view_ssa:
            raise InternalError(f"tensor {e.name} used as an index")
        return self.expr(e, want=dtypes.INDEX).ssa

    def dtype_of(self, e: Expr) -> DType:
        if isinstance(e, Var):
            v = self.env.get(e.name)
            if isinstance(v, _Scalar):
                return v.dtype
            t = self.types.get(e.name)
            if isinstance(t, ScalarType):
                return t.dtype
            raise InternalError(f"{e.name} is not a scalar")
        if isinstance(e, (ConstInt, ConstFloat)):
            return e.dtype
        if isinstance(e, ConstBool):
            return dtypes.BOOL
        if isinstance(e, BinOp):
            if e.op in ("==", "!=", "<", "<=", ">", ">=", "and", "or"):
                return dtypes.BOOL
            return self._common(self.dtype_of(e.lhs), self.dtype_of(e.rhs))
        if isinstance(e, UnaryOp):
            return dtypes.BOOL if e.op == "not" else self.dtype_of(e.operand)
        if isinstance(e, (MinMax,)):
            return self._common(self.dtype_of(e.lhs), self.dtype_of(e.rhs))
        if isinstance(e, Abs):
            return self.dtype_of(e.operand)
        if isinstance(e, Cast):
            return e.dtype
        if isinstance(e, Call) and e.kind == "op" and e.op in CORE_ID:
            return dtypes.BY_NAME["UINT64"]
        if isinstance(e, Call) and e.kind == "op" and e.op == "tile.read":
            return self._tile_dtype(_arg(e, 0, "tile"))
        if isinstance(e, Call) and e.kind == "op" and e.op == "scalar.cast" and len(e.args) > 1 and \
                isinstance(e.args[1], DTypeLit):
            return e.args[1].dtype
        raise unsupported(self._describe(e), e.span, _no_pto_hint(e))

    @staticmethod
    def _describe(e: Expr) -> str:
        if isinstance(e, Call):
            from ptoc.ops.registry import shown_op

            if e.kind in ("submit", "spmd_submit"):
                return f"the task launch pl.{e.kind}(self.{e.op}, ...)"
            return shown_op(e.op) if e.kind == "op" else f"the call self.{e.op}"
        return f"the expression {type(e).__name__}"

    @staticmethod
    def _common(a: DType, b: DType) -> DType:
        # the verifier's rule: equal types, or the non-INDEX side wins
        if a == b or b.name == "INDEX":
            return a
        if a.name == "INDEX":
            return b
        return a

    def zero(self, dt: DType) -> str:
        return self.const_float(0.0, dt) if dt.is_float else self.const_int(0, dt)

    def _name(self, name: str | None) -> str:
        return self.fresh(name) if name else self.temp()

    def expr(self, e: Expr, want: DType | None = None, name: str | None = None) -> _Scalar:
        """Emit `e`; convert it to `want` when given. `name`: the SSA name of the final op (a leaf that
        needs no op is returned as it is)."""
        if isinstance(e, (ConstInt, ConstFloat, ConstBool)):
            return self.literal(e, want or self.dtype_of(e))
        if isinstance(e, Var):
            v = self.env.get(e.name)
            if not isinstance(v, _Scalar):
                raise InternalError(f"{e.name} is not a scalar value")
            return self.convert(v, want, name)
        own = self.dtype_of(e)
        # the final op takes `name` unless a conversion to `want` follows it
        inner = name if want is None or scalar_type(want) == scalar_type(own) else None
        r = self.compound(e, own, inner)
        return self.convert(r, want, name) if want is not None else r

    def literal(self, e: ConstInt | ConstFloat | ConstBool, dt: DType) -> _Scalar:
        v = e.value
        if dt.is_float:
            return _Scalar(self.const_float(float(v), dt), dt)
        if isinstance(v, float):
            if not v.is_integer():
                raise unsupported(f"the float literal {v} as a {dt.name} value", e.span)
            v = int(v)
        return _Scalar(self.const_int(int(v), dt), dt)

    def compound(self, e: Expr, own: DType, inner: str | None) -> _Scalar:
        """A scalar expression that needs an op, computed in its own dtype `own`; `inner` names the op."""
        if isinstance(e, BinOp):
            return self.binop(e, inner)
        if isinstance(e, UnaryOp):
            return self.unary(e, inner)
        if isinstance(e, MinMax):
            return self.minmax(e, own, inner)
        if isinstance(e, Abs):
            return self.absolute(self.expr(e.operand, own), inner)
        if isinstance(e, Cast):
            return self.convert(self.expr(e.operand), e.dtype, inner)
        if isinstance(e, Call) and e.kind == "op":
            if e.op == "scalar.cast":
                return self.convert(self.expr(e.args[0]), own, inner)
            if e.op in CORE_ID:
                out = self._name(inner)
                self.emit(f"%{out} = pto.{CORE_ID[e.op]}")
                return _Scalar(out, own)
            if e.op == "tile.read":
                return self.tile_read(e, inner)
        raise unsupported(self._describe(e), e.span, _no_pto_hint(e))

    def minmax(self, e: MinMax, own: DType, inner: str | None) -> _Scalar:
        a, b = self.expr(e.lhs, own), self.expr(e.rhs, own)
        op = ("minimumf" if e.op == "min" else "maximumf") if own.is_float else \
            (("minui" if e.op == "min" else "maxui") if own.kind == "uint" else
             ("minsi" if e.op == "min" else "maxsi"))
        out = self._name(inner)
        self.emit(f"%{out} = arith.{op} %{a.ssa}, %{b.ssa} : {scalar_type(own)}")
        return _Scalar(out, own)

    def convert(self, v: _Scalar, to: DType | None, name: str | None = None) -> _Scalar:
        """`v` as a value of dtype `to` (no op when the MLIR types agree)."""
        if to is None:
            return v
        src, dst = scalar_type(v.dtype), scalar_type(to)
        if src == dst:
            return _Scalar(v.ssa, to)
        sk, dk = v.dtype, to
        out = self._name(name)

        def line(op: str, a: str, t_from: str, t_to: str) -> None:
            self.emit(f"%{out} = arith.{op} %{a} : {t_from} to {t_to}")

        unsigned = sk.kind in ("uint", "bool")
        if sk.is_float and dk.is_float:
            if sk.bits == dk.bits:  # f16 <-> bf16: through f32
                mid = self.temp()
                self.emit(f"%{mid} = arith.extf %{v.ssa} : {src} to f32")
                line("truncf", mid, "f32", dst)
            else:
                line("extf" if dk.bits > sk.bits else "truncf", v.ssa, src, dst)
        elif sk.is_float:
            op = "fptoui" if dk.kind in ("uint", "bool") else "fptosi"
            if dst == "index":
                mid = self.temp()
                self.emit(f"%{mid} = arith.{op} %{v.ssa} : {src} to i64")
                line("index_cast", mid, "i64", "index")
            else:
                line(op, v.ssa, src, dst)
        elif dk.is_float:
            op = "uitofp" if unsigned else "sitofp"
            if src == "index":
                mid = self.temp()
                self.emit(f"%{mid} = arith.index_cast %{v.ssa} : index to i64")
                line(op, mid, "i64", dst)
            else:
                line(op, v.ssa, src, dst)
        elif src == "index" or dst == "index":
            line("index_castui" if unsigned and src != "index" else "index_cast", v.ssa, src, dst)
        else:
            sb, db = int(src[1:]), int(dst[1:])
            line(("extui" if unsigned else "extsi") if db > sb else "trunci", v.ssa, src, dst)
        return _Scalar(out, to)

    def binop(self, e: BinOp, name: str | None) -> _Scalar:
        op = e.op
        if op in ("and", "or"):
            a, b = self.expr(e.lhs, dtypes.BOOL), self.expr(e.rhs, dtypes.BOOL)
            out = self._name(name)
            self.emit(f"%{out} = arith.{'andi' if op == 'and' else 'ori'} %{a.ssa}, %{b.ssa} : i1")
            return _Scalar(out, dtypes.BOOL)
        dt = self._common(self.dtype_of(e.lhs), self.dtype_of(e.rhs))
        a, b = self.expr(e.lhs, dt), self.expr(e.rhs, dt)
        t = scalar_type(dt)
        fl, uns = dt.is_float, dt.kind in ("uint", "bool")
        if op in ("==", "!=", "<", "<=", ">", ">="):
            if fl:
                pred = {"==": "oeq", "!=": "une", "<": "olt", "<=": "ole", ">": "ogt", ">=": "oge"}[op]
            else:
                pred = {"==": "eq", "!=": "ne", "<": "ult" if uns else "slt", "<=": "ule" if uns else "sle",
                        ">": "ugt" if uns else "sgt", ">=": "uge" if uns else "sge"}[op]
            out = self._name(name)
            self.emit(f"%{out} = arith.{'cmpf' if fl else 'cmpi'} {pred}, %{a.ssa}, %{b.ssa} : {t}")
            return _Scalar(out, dtypes.BOOL)
        if op == "%" and not fl and not uns:
            return self.floor_mod(a, b, dt, name, isinstance(e.rhs, ConstInt) and e.rhs.value > 0)
        table_int = {"+": "addi", "-": "subi", "*": "muli", "/": "divui" if uns else "divsi",
                     "//": "divui" if uns else "floordivsi", "%": "remui", "<<": "shli",
                     ">>": "shrui" if uns else "shrsi", "&": "andi", "|": "ori", "^": "xori"}
        table_float = {"+": "addf", "-": "subf", "*": "mulf", "/": "divf", "%": "remf"}
        ar = (table_float if fl else table_int).get(op)
        if ar is None:
            raise unsupported(f"the scalar operator {op} on {dt.name}", e.span)
        out = self._name(name)
        self.emit(f"%{out} = arith.{ar} %{a.ssa}, %{b.ssa} : {t}")
        return _Scalar(out, dt)

    def floor_mod(self, a: _Scalar, b: _Scalar, dt: DType, name: str | None, positive: bool) -> _Scalar:
        """Python / PyPTO `%` on signed integers rounds toward negative infinity (seed 000): arith.remsi,
        corrected by adding the divisor when the remainder is non-zero and its sign differs from the
        divisor's (for a positive constant divisor: when the remainder is negative)."""
        t = scalar_type(dt)
        zero = self.const_int(0, dt)
        r = self.temp()
        self.emit(f"%{r} = arith.remsi %{a.ssa}, %{b.ssa} : {t}")
        if positive:
            fix = self.temp()
            self.emit(f"%{fix} = arith.cmpi slt, %{r}, %{zero} : {t}")
        else:
            ne, rneg, bneg, diff, fix = (self.temp() for _ in range(5))
            self.emit(f"%{ne} = arith.cmpi ne, %{r}, %{zero} : {t}")
            self.emit(f"%{rneg} = arith.cmpi slt, %{r}, %{zero} : {t}")
            self.emit(f"%{bneg} = arith.cmpi slt, %{b.ssa}, %{zero} : {t}")
            self.emit(f"%{diff} = arith.xori %{rneg}, %{bneg} : i1")
            self.emit(f"%{fix} = arith.andi %{ne}, %{diff} : i1")
        adj = self.temp()
        self.emit(f"%{adj} = arith.addi %{r}, %{b.ssa} : {t}")
        out = self._name(name)
        self.emit(f"%{out} = arith.select %{fix}, %{adj}, %{r} : {t}")
        return _Scalar(out, dt)

    def unary(self, e: UnaryOp, name: str | None) -> _Scalar:
        if e.op == "not":
            a = self.expr(e.operand, dtypes.BOOL)
            out = self._name(name)
            self.emit(f"%{out} = arith.xori %{a.ssa}, %{self.const_int(1, dtypes.BOOL)} : i1")
            return _Scalar(out, dtypes.BOOL)
        dt = self.dtype_of(e.operand)
        a = self.expr(e.operand, dt)
        t = scalar_type(dt)
        out = self._name(name)
        if e.op == "-":
            if dt.is_float:
                self.emit(f"%{out} = arith.negf %{a.ssa} : {t}")
            else:
                self.emit(f"%{out} = arith.subi %{self.zero(dt)}, %{a.ssa} : {t}")
        elif e.op == "~" and not dt.is_float:
            self.emit(f"%{out} = arith.xori %{a.ssa}, %{self.const_int(-1, dt)} : {t}")
        else:
            raise unsupported(f"the scalar operator {e.op} on {dt.name}", e.span)
        return _Scalar(out, dt)

    def absolute(self, a: _Scalar, name: str | None) -> _Scalar:
        dt = a.dtype
        t = scalar_type(dt)
        if dt.kind in ("uint", "bool"):
            return a
        neg, lt = self.temp(), self.temp()
        if dt.is_float:
            self.emit(f"%{neg} = arith.negf %{a.ssa} : {t}")
            self.emit(f"%{lt} = arith.cmpf olt, %{a.ssa}, %{self.zero(dt)} : {t}")
        else:
            self.emit(f"%{neg} = arith.subi %{self.zero(dt)}, %{a.ssa} : {t}")
            self.emit(f"%{lt} = arith.cmpi slt, %{a.ssa}, %{self.zero(dt)} : {t}")
        out = self._name(name)
        self.emit(f"%{out} = arith.select %{lt}, %{neg}, %{a.ssa} : {t}")
        return _Scalar(out, dt)


__all__ = ["emit_module", "kernel_functions", "unsupported", "scalar_type", "KERNEL_KIND"]


def _no_pto_hint(e: Expr) -> str | None:
    """The hint an op declares for having no `.pto` form (`NoPto`), for the op a call names or any op its
    short name may resolve to; None for other calls (the generic hint then)."""
    from ptoc.ops.registry import REGISTRY, SHORT, NoPto, load_all

    if not isinstance(e, Call):
        return None
    if e.kind in ("submit", "spmd_submit"):
        return "task launches belong to orchestration code, which ptoc does not compile to .pto"
    if e.kind != "op":
        return None
    load_all()
    for name in (e.op, *sorted(SHORT.get(e.op, {}).values())):
        op = REGISTRY.get(name)
        if op is not None and isinstance(op.pto, NoPto):
            return op.pto.hint
    return None
