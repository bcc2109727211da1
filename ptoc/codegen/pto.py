"""The `.pto` emitter: a lowered program -> one PTOAS module (MLIR text in the PTO dialect).

Entry point: `emit_module(program, ctx, pto_level="level3") -> (text, skipped)`. `text` is one
`module attributes {pto.target_arch = "a2a3"|"a5"} { ... }` holding a `func.func` per kernel (AIC, AIV
and plain InCore functions, in program order); `skipped` lists the names of the other functions
(orchestration, opaque, ...), which are not emitted (the driver reports them). `kernel_functions(program)`
returns the functions that are emitted.

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
  scalar results only.

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
import struct
from dataclasses import dataclass

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
    DictExpr,
    DTypeLit,
    EnumLit,
    EvalStmt,
    Expr,
    ForStmt,
    Function,
    IfStmt,
    ListExpr,
    MemRef,
    MinMax,
    NoneLit,
    PassStmt,
    Program,
    ReturnStmt,
    ScalarType,
    ScopeStmt,
    Stmt,
    StrLit,
    TensorType,
    TileType,
    TupleExpr,
    UnaryOp,
    Var,
    WhileStmt,
    YieldStmt,
)
from ptoc.ir.types import effective_tile_view

KERNEL_KIND = {"AIC": "cube", "AIV": "vector", "InCore": None}
LEVELS = ("level3", "level2")

LOC = {"Vec": "vec", "Mat": "mat", "Left": "left", "Right": "right", "Acc": "acc", "Bias": "bias"}
PAD = {"null": 0, "zero": 1, "max": 2, "min": 3}
COMPACT = {"null": None, "normal": 1, "row_plus_one": 2}

ROUND_MODE = {"none": "NONE", "rint": "RINT", "round": "ROUND", "floor": "FLOOR", "ceil": "CEIL",
              "trunc": "TRUNC", "odd": "ODD", "cast_rint": "CAST_RINT"}
ROUND_MODE_BY_INT = dict(enumerate(("NONE", "RINT", "ROUND", "FLOOR", "CEIL", "TRUNC", "ODD", "CAST_RINT")))
CORE_ID = {"tile.get_block_idx": "get_block_idx", "tile.get_block_num": "get_block_num",
           "tile.get_subblock_idx": "get_subblock_idx"}
# ops whose result is a view of their source tile (pto.treshape / pto.subview / set_validshape), never
# a buffer of its own: the prescan does not allocate handles for them
VIEW_OPS = ("tile.set_validshape", "tile.reshape", "tile.reinterpret_view", "tile.slice")

# tstore attributes: IR key -> (PTO attribute, enum mnemonic, IR value -> PTO member)
ST_PHASE = {"unspecified": "unspecified", "partial": "partial", "final": "final"}
ATOMIC = {"none": "atomic_none", "atomic_none": "atomic_none", "add": "atomic_add", "atomic_add": "atomic_add"}
RELU_PRE = {"none": "no_relu", "no_relu": "no_relu", "norelu": "no_relu", "normal": "normal_relu",
            "normal_relu": "normal_relu", "relu": "normal_relu"}
STORE_ATTRS = {
    "st_phase": ("stPhase", "st_phase", ST_PHASE), "stPhase": ("stPhase", "st_phase", ST_PHASE),
    "atomic": ("atomicType", "atomic_type", ATOMIC), "atomic_type": ("atomicType", "atomic_type", ATOMIC),
    "atomicType": ("atomicType", "atomic_type", ATOMIC),
    "relu_pre_mode": ("reluPreMode", "relu_pre_mode", RELU_PRE),
    "reluPreMode": ("reluPreMode", "relu_pre_mode", RELU_PRE),
    "pre_relu": ("reluPreMode", "relu_pre_mode", RELU_PRE),
}


def dynamic_dims(program: Program, fn: Function, defined: set[str] | None = None) -> list[str]:
    """The dynamic dimension symbols of kernel `fn`, in the order of its trailing `index` arguments:
    first seen in the parameter types, then in the body. `defined`: names the body binds itself."""
    from ptoc.ir.verifier import function_types, iter_type_exprs
    from ptoc.ir.visitor import walk

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
            visit(e, True)
    for s in fn.body:
        for node in walk(s):
            if isinstance(node, Var) and node.name in declared and node.name not in defined \
                    and node.name not in seen and node.name not in params:
                seen.append(node.name)
    return seen


def kernel_functions(program: Program) -> list[Function]:
    """The functions `emit_module` emits: AIC, AIV and InCore kernels, in program order."""
    return [f for f in program.functions if f.func_type in KERNEL_KIND]


def emit_module(program: Program, ctx, pto_level: str = "level3") -> tuple[str, list[str]]:
    """The `.pto` module of every kernel of `program` and the names of the functions not emitted."""
    if pto_level not in LEVELS:
        raise InternalError(f"unknown PTO level {pto_level!r}")
    from ptoc.ir.verifier import function_types

    arch = getattr(ctx, "arch", "a2a3")
    types = function_types(program, ctx)
    funcs = []
    skipped = []
    for f in program.functions:
        if f.func_type in KERNEL_KIND:
            funcs.append(_FunctionEmitter(program, f, types.get(f.name, {}), pto_level).run())
        else:
            skipped.append(f.name)
    out = [f'module attributes {{pto.target_arch = "{arch}"}} {{']
    for text in funcs:
        out.extend(text)
    out.append("}")
    return "\n".join(out) + "\n", skipped


def unsupported(what: str, span: Span | None, hint: str | None = None) -> CompileError:
    """The user-facing error for anything without a PTO form: `cannot emit <what> yet`."""
    return CompileError([Diagnostic(
        "PTOC-E0400", f"cannot emit {what} yet", span if span is not None and span.known else span,
        hint or "ptoc's .pto emitter has no PTO form for it; express the computation with supported tile "
        "operations, or report the need")])


# --------------------------------------------------------------------------------------------------
# Values
# --------------------------------------------------------------------------------------------------


@dataclass
class _Scalar:
    ssa: str
    dtype: DType


@dataclass
class _Handle:
    ssa: str
    type: str
    key: tuple
    dynamic: bool
    valid: tuple[str, str] | None  # the valid_row / valid_col values last set (dynamic handles)


@dataclass
class _Tensor:
    root: str


def scalar_type(dt: DType, span: Span | None = None) -> str:
    """The MLIR type of a scalar of dtype `dt` (arith works on signless integers: UINT32 -> i32)."""
    if dt.kind == "index":
        return "index"
    if dt.kind == "bool":
        return "i1"
    if dt.kind in ("int", "uint"):
        return f"i{dt.bits}"
    if dt.pto is None or dt.packed_values != 1:
        raise unsupported(f"a {dt.name} scalar", span)
    return dt.pto


def element_type(dt: DType, span: Span | None = None) -> str:
    if dt.pto is None:
        raise unsupported(f"a {dt.name} tensor or tile", span, hint=f"{dt.name} has no .pto element type")
    return dt.pto


def _int(e: Expr) -> int | None:
    return e.value if isinstance(e, ConstInt) else None


def _float_hex(v: float, t: str) -> str | None:
    """MLIR spells non-finite float constants as their bit pattern."""
    if t == "f32":
        return "0x%08X" % struct.unpack("<I", struct.pack("<f", v))[0]
    if t == "f16":
        return "0x%04X" % struct.unpack("<H", struct.pack("<e", v))[0]
    if t == "bf16":
        return "0x%04X" % (struct.unpack("<I", struct.pack("<f", v))[0] >> 16)
    if t == "f64":
        return "0x%016X" % struct.unpack("<Q", struct.pack("<d", v))[0]
    return None


def _arg(c: Call, i: int, name: str) -> Expr | None:
    """Argument `name` of a call: positional `i`, else the keyword."""
    return c.args[i] if len(c.args) > i else c.kwarg(name)


def _enum_text(e: Expr | None) -> str | None:
    if isinstance(e, StrLit):
        return e.value
    if isinstance(e, EnumLit):
        return e.member
    return None


# --------------------------------------------------------------------------------------------------
# One function
# --------------------------------------------------------------------------------------------------


class _FunctionEmitter:
    def __init__(self, program: Program, fn: Function, types: dict, level: str):
        from ptoc.codegen.views import partitions, tensor_views

        self.program = program
        self.fn = fn
        self.types = types
        self.level = level
        self.views = tensor_views(fn)
        self.parts = {id(p.call): p for p in partitions(fn, types)}
        self.used: set[str] = set()
        self.const_lines: list[str] = []
        self.consts: dict[tuple, str] = {}
        self.nfloat = 0
        self.ntemp = 0
        self.lines: list[str] = []
        self.depth = 2
        self.env: dict[str, object] = {}
        self.handles: dict[tuple, _Handle] = {}
        self.allocs: dict[str, tuple[str, int | None]] = {}  # base name -> (memory, addr)
        self.pending: dict[str, list[tuple[tuple, str, TileType]]] = {}  # base -> static handles to allocate
        self.view_ssa: dict[str, tuple[str, str]] = {}  # tensor param -> (view ssa, view type)

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
        return self.const_int(v, dtypes.INDEX)

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
                    self.pending.setdefault(s.target.name, [])
                    continue
                if isinstance(v, Var) or (isinstance(v, Call) and v.op in VIEW_OPS):
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
        by the op and not spelled in the type."""
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
        dyn = any(_int(x) is None for x in valid)
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
            elif isinstance(e, Call):
                raise unsupported(f"pl.{e.op}" if e.kind == "op" else f"the call self.{e.op}", s.span)
            else:
                raise unsupported("an expression statement", s.span)
        elif isinstance(s, ForStmt):
            self.for_stmt(s)
        elif isinstance(s, IfStmt):
            self.if_stmt(s)
        elif isinstance(s, (ReturnStmt, PassStmt)):
            return  # kernels write their outputs through tstore; the body ends with a bare return
        elif isinstance(s, WhileStmt):
            raise unsupported("pl.while_", s.span, hint="rewrite the loop as a counted pl.range loop")
        elif isinstance(s, ScopeStmt):
            raise unsupported(f"pl.{s.kind} (a scope inside a kernel)", s.span,
                              hint="outline the scope into its own kernel function")
        else:
            raise InternalError(f"unexpected statement {type(s).__name__}")

    def assign(self, s: AssignStmt) -> None:
        v = s.value
        name = s.target.name
        if isinstance(v, Var):
            src = self.env.get(v.name)
            if src is None:
                raise InternalError(f"{v.name} has no value")
            self.env[name] = src
            return
        if isinstance(v, Call) and v.kind == "op" and (v.op.startswith("tile.") and v.op not in CORE_ID):
            self.tile_op(s, v)
            return
        if isinstance(v, Call) and v.kind == "func":
            raise unsupported(f"the call self.{v.op} inside a kernel", s.span)
        t = self.types.get(name)
        if not isinstance(t, ScalarType):
            if isinstance(v, Call):
                raise unsupported(f"pl.{v.op}", s.span)
            raise unsupported("this expression", s.span)
        r = self.expr(v, want=t.dtype, name=name)
        self.env[name] = r

    def tile_op(self, s: AssignStmt, c: Call) -> None:
        """One tile op, by its declaration in its family file (`ptoc/ops/<family>.py`): a plain
        destination-passing form (`Pto`), an emitter method (`Emitter`) or no PTO form (`NoPto`)."""
        from ptoc.ops.registry import Emitter, NoPto, Pto, lookup

        name, span = s.target.name, s.span
        op = lookup(c.op)
        form = op.pto if op is not None else None
        if isinstance(form, Emitter):
            getattr(self, form.method)(name, c, span)
        elif isinstance(form, Pto):
            self.dps_form(name, c, op, form, span)
        elif isinstance(form, NoPto):
            raise unsupported(f"pl.{c.op}", span, hint=form.hint)
        else:
            raise unsupported(f"pl.{c.op}", span)

    def dps_form(self, name: str, c: Call, op, form, span: Span | None) -> _Handle:
        """`pto.<form.name> ins(<operands>) outs(%dst)`, the operands as the declaration lists them."""
        positions = {p: i for i, p in enumerate(op.param_names)}
        values: list[tuple[str, str] | None] = []
        first_tile: Expr | None = None
        for spec in form.operands:
            kind, _, param = spec.partition(":")
            e = _arg(c, positions[param], param)
            absent = e is None or isinstance(e, NoneLit)
            if kind == "tile!" and absent:
                eq = "" if param in op.params else "="
                raise unsupported(f"pl.{c.op} without {param}{eq}", span, hint=form.hint or None)
            if kind == "tile?" and absent:
                continue
            if kind.startswith("tile"):
                first_tile = e if first_tile is None else first_tile
                h = self.tile(e, span)
                values.append((h.ssa, h.type))
            elif kind == "scalar":
                values.append(self.scalar_operand(e, self._tile_dtype(first_tile), span))
            elif kind == "f32":
                values.append(self.f32_operand(e, c.op, span))
            elif kind == "index":
                values.append((self.index_value(e, span), "index"))
            else:
                raise InternalError(f"{c.op}: unknown operand kind {kind!r} in its .pto declaration")
        return self.dps(name, form.name, values, span)

    def f32_operand(self, e: Expr | None, op: str, span: Span | None) -> tuple[str, str]:
        """A scalar operand PTOAS types f32 (e.g. tlrelu's slope): literals become f32 constants."""
        v = self.scalar_operand(e, dtypes.FP32, span)
        if v[1] != "f32":
            raise unsupported(f"pl.{op} with a {v[1]} scalar operand", span,
                              hint="this operand is f32 in PTO: cast it with pl.cast(x, pl.FP32)")
        return v

    # ------------------------------------------------------------------ ops with their own form
    def op_alloc(self, name: str, c: Call, span: Span | None) -> None:
        self._on_alloc(name, span)

    def op_store(self, name: str, c: Call, span: Span | None) -> None:
        self.store(c, span)
        self.env[name] = _Tensor(self.parts[id(c)].tensor)

    def op_load(self, name: str, c: Call, span: Span | None) -> None:
        tr = c.kwarg("transpose")
        if tr is not None and not (isinstance(tr, ConstBool) and not tr.value) and not isinstance(tr, NoneLit):
            raise unsupported("pl.tile.load with transpose=True", span)
        pv, pt = self.partition(c, span)
        h = self.define_tile(name, span)
        self.emit(f"pto.tload ins(%{pv} : {pt}) outs(%{h.ssa} : {h.type})")

    def op_create(self, name: str, c: Call, span: Span | None) -> None:
        self.define_tile(name, span)

    def op_read(self, name: str, c: Call, span: Span | None) -> None:
        t = self.types.get(name)
        if not isinstance(t, ScalarType):
            raise InternalError(f"tile.read result {name} is not a scalar")
        self.env[name] = self.expr(c, want=t.dtype, name=name)

    def op_write(self, name: str, c: Call, span: Span | None) -> None:
        self.tile_write(c, span, name)

    def op_col_sum(self, name: str, c: Call, span: Span | None) -> None:
        a = self.tile(c.args[0], span)
        tmp = _arg(c, 1, "tmp")
        if tmp is None or isinstance(tmp, NoneLit):
            self.dps(name, "tcolsum", [(a.ssa, a.type)], span)
            return
        t = self.tile(tmp, span)
        h = self.define_tile(name, span)
        self.emit(f"pto.tcolsum ins(%{a.ssa}, %{t.ssa} {{isBinary = false}} : {a.type}, {t.type}) "
                  f"outs(%{h.ssa} : {h.type})")

    def op_cast(self, name: str, c: Call, span: Span | None) -> None:
        a = self.tile(c.args[0], span)
        rmode = self.round_mode(_arg(c, 2, "mode"), span)
        h = self.define_tile(name, span)
        self.emit(f"pto.tcvt ins(%{a.ssa} {{rmode = #pto<round_mode {rmode}>}} : {a.type}) "
                  f"outs(%{h.ssa} : {h.type})")

    def op_move(self, name: str, c: Call, span: Span | None) -> None:
        a = self.tile(c.args[0], span)
        h = self.dps(name, "tmov", [(a.ssa, a.type)], span)
        if h.ssa == a.ssa:
            raise InternalError(f"tile.move into its own buffer ({name})")

    def op_matmul_acc(self, name: str, c: Call, span: Span | None) -> None:
        acc, a, b = (self.tile(x, span) for x in c.args[:3])
        h = self.dps(name, "tmatmul.acc", [(acc.ssa, acc.type), (a.ssa, a.type), (b.ssa, b.type)], span)
        if h.ssa != acc.ssa:
            raise InternalError(f"tile.matmul_acc result {name} does not share its accumulator's buffer")

    def op_gather_mask(self, name: str, c: Call, span: Span | None) -> None:
        a = self.tile(c.args[0], span)
        pat = self.mask_pattern(_arg(c, 1, "mask_pattern"), span)
        h = self.define_tile(name, span)
        self.emit(f"pto.tgather ins(%{a.ssa}, {{maskPattern = #pto.mask_pattern<{pat}>}} : {a.type}) "
                  f"outs(%{h.ssa} : {h.type})")

    def op_full(self, name: str, c: Call, span: Span | None) -> None:
        value = c.kwarg("value")
        h = self.define_tile(name, span)
        t = self.types.get(name)
        sc = self.scalar_operand(value, t.dtype, span)
        self.emit(f"pto.texpands ins(%{sc[0]} : {sc[1]}) outs(%{h.ssa} : {h.type})")

    # ------------------------------------------------------------------ gather / scatter / generators
    def scatter(self, name: str, c: Call, span: Span | None) -> None:
        """`out = tile.scatter(dst, src, indexes)`: DPS into dst's buffer (a tmov first when the result
        lives elsewhere); PTOAS TScatterOp index form `ins(%src, %indexes : S, I) outs(%dst : D)`."""
        dst = self.tile(_arg(c, 0, "dst"), span)
        src, idx = self.tile(_arg(c, 1, "src"), span), self.tile(_arg(c, 2, "indexes"), span)
        ts, ti = (self.types.get(e.name) if isinstance(e, Var) else None
                  for e in (_arg(c, 1, "src"), _arg(c, 2, "indexes")))
        if not isinstance(ts, TileType) or not isinstance(ti, TileType):
            raise InternalError("tile.scatter operands have no tile types")
        vs, vi = (tuple(_int(x) for x in effective_tile_view(t)["valid_shape"]) for t in (ts, ti))
        if None in vs or None in vi or vs != vi:
            raise unsupported("pl.tile.scatter whose indexes valid shape differs from the source's", span,
                              hint="PTOAS's tscatter takes one row index per source element: give indexes the "
                              "source's (static) valid shape")
        h = self.define_tile(name, span)
        if h.ssa != dst.ssa:
            self.emit(f"pto.tmov ins(%{dst.ssa} : {dst.type}) outs(%{h.ssa} : {h.type})")
        self.emit(f"pto.tscatter ins(%{src.ssa}, %{idx.ssa} : {src.type}, {idx.type}) outs(%{h.ssa} : {h.type})")

    def ci(self, name: str, c: Call, span: Span | None) -> None:
        """`tile.ci(start, shape)`: PTOAS TCIOp `ins(%start[, %tmp] : iN[, T]) outs(%dst : D)`, with a trailing
        `{descending = true}`. pto-isa's TCI fills row 0 only, so the tile must have one row."""
        t = self.types.get(name)
        if not isinstance(t, TileType) or _int(t.shape[0]) != 1:
            raise unsupported("pl.tile.ci of a tile with more than one row", span,
                              hint="TCI writes the first row only: generate a [1, N] tile")
        start = self.scalar_operand(_arg(c, 0, "start"), t.dtype, span)
        if start[1] != scalar_type(t.dtype):
            raise unsupported(f"pl.tile.ci with a {start[1]} start for a {t.dtype.name} tile", span)
        ins = [start]
        tmp = _arg(c, 2, "tmp")
        if tmp is not None and not isinstance(tmp, NoneLit):
            tt = self.tile(tmp, span)
            ins.append((tt.ssa, tt.type))
        desc = _arg(c, 4, "descending")
        if desc is not None and not isinstance(desc, (ConstBool, NoneLit)):
            raise unsupported("pl.tile.ci with a non-constant descending=", span)
        h = self.define_tile(name, span)
        tail = " {descending = true}" if isinstance(desc, ConstBool) and desc.value else ""
        self.emit(f"pto.tci ins({', '.join('%' + v for v, _ in ins)} : {', '.join(ty for _, ty in ins)}) "
                  f"outs(%{h.ssa} : {h.type}){tail}")

    def tri(self, name: str, c: Call, span: Span | None) -> None:
        """`tile.tri(diagonal, shape)`: PTOAS TTriOp `ins(%d {upperOrLower = 1 : i32} : i32) outs(%dst : D)`
        (the attribute only for upper=True; its default 0 is the lower triangle)."""
        d = _arg(c, 0, "diagonal")
        dt = self.dtype_of(d) if not isinstance(d, ConstInt) else dtypes.INT32
        if not dt.is_int:
            raise unsupported(f"pl.tile.tri with a {dt.name} diagonal", span)
        dv = self.expr(d, want=dt)
        upper = _arg(c, 4, "upper")
        if upper is not None and not isinstance(upper, (ConstBool, NoneLit)):
            raise unsupported("pl.tile.tri with a non-constant upper=", span)
        attr = " {upperOrLower = 1 : i32}" if isinstance(upper, ConstBool) and upper.value else ""
        h = self.define_tile(name, span)
        self.emit(f"pto.ttri ins(%{dv.ssa}{attr} : {scalar_type(dt)}) outs(%{h.ssa} : {h.type})")

    # ------------------------------------------------------------------ scalar element access
    def element_offset(self, c: Call, span: Span | None) -> tuple[_Handle, TileType, str]:
        """The handle, type and `index` storage offset of the element `tile.read` / `tile.write` address
        (PTOAS tgetval / tsetval take a linear offset in [0, rows * cols))."""
        src = _arg(c, 0, "tile")
        h = self.tile(src, span)
        t = self.types.get(src.name) if isinstance(src, Var) else None
        if not isinstance(t, TileType) or t.rank != 2:
            raise unsupported(f"pl.{c.op} of a tile that is not 2-D", span)
        eff = effective_tile_view(t)
        rows, cols = _int(t.shape[0]), _int(t.shape[1])
        if (t.memory or "Vec") != "Vec" or eff["slayout"] != "none_box" or eff["stride"] or \
                (eff["blayout"] != "row_major" and cols != 1 and rows != 1):
            raise unsupported(f"pl.{c.op} of a {t.memory or 'Vec'} {eff['blayout']}/{eff['slayout']} tile", span,
                              hint="tgetval / tsetval address a Vec tile by its row-major storage offset")
        if element_type(t.dtype, span) != scalar_type(t.dtype, span):
            raise unsupported(f"pl.{c.op} of a {t.dtype.name} tile", span,
                              hint="tgetval / tsetval take signless integer or float elements")
        idx = _arg(c, 1, "indices")
        items = idx.items if isinstance(idx, (ListExpr, TupleExpr)) else None
        if items is None or len(items) != 2:
            raise unsupported(f"pl.{c.op} without two constant-length indices", span)
        r, col = items
        if _int(r) is not None and _int(col) is not None:
            return h, t, self.index(_int(r) * cols + _int(col))
        rv, cv = self.index_value(r, span), self.index_value(col, span)
        if _int(r) == 0:
            return h, t, cv
        scaled = self.temp()
        self.emit(f"%{scaled} = arith.muli %{rv}, %{self.index(cols)} : index")
        if _int(col) == 0:
            return h, t, scaled
        off = self.temp()
        self.emit(f"%{off} = arith.addi %{scaled}, %{cv} : index")
        return h, t, off

    def tile_read(self, c: Call, name: str | None) -> _Scalar:
        h, t, off = self.element_offset(c, c.span)
        out = self._name(name)
        self.emit(f"%{out} = pto.tgetval ins(%{h.ssa}, %{off} : {h.type}, index) outs : {scalar_type(t.dtype)}")
        return _Scalar(out, t.dtype)

    def tile_write(self, c: Call, span: Span | None, name: str | None = None) -> None:
        """`tile.write(t, [i, j], v)`: `pto.tsetval ins(%off, %v : index, T) outs(%t : ...)`; with a result
        in another buffer, the tile is first copied there (tmov)."""
        src, t, off = self.element_offset(c, span)
        v = self.expr(_arg(c, 2, "value"), want=t.dtype)
        h = src
        if name is not None:
            h = self.define_tile(name, span)
            if h.ssa != src.ssa:
                self.emit(f"pto.tmov ins(%{src.ssa} : {src.type}) outs(%{h.ssa} : {h.type})")
        self.emit(f"pto.tsetval ins(%{off}, %{v.ssa} : index, {scalar_type(t.dtype)}) outs(%{h.ssa} : {h.type})")

    # ------------------------------------------------------------------ views: treshape, subview
    def reshape(self, name: str, c: Call, span: Span | None) -> None:
        """`tile.reshape` / `tile.reinterpret_view`: `%r = pto.treshape %src : S -> R` (an SSA view of the
        same bytes); a dynamic valid shape of the result is then set with pto.set_validshape."""
        src = self.tile(c.args[0], span)
        t = self.types.get(name)
        if not isinstance(t, TileType) or t.memref is None:
            raise InternalError(f"tile {name} has no MemRef (run InitMemRef)")
        tstr, dyn = self.tile_type(t, span)
        key = self._key(t.memref, tstr)
        if tstr == src.type and not dyn:
            self.env[name] = src
            return
        ssa = self.fresh(name)
        self.emit(f"%{ssa} = pto.treshape %{src.ssa} : {src.type} -> {tstr}")
        h = _Handle(ssa, tstr, key, dyn, None)
        if dyn:
            valid = self._valid_values(t, span)
            self.emit(f"pto.set_validshape %{ssa}, %{valid[0]}, %{valid[1]} : {tstr}")
            h.valid = valid
        self.handles[key] = h
        self.env[name] = h

    def subview(self, name: str, c: Call, span: Span | None) -> None:
        """`tile.slice(t, shape, offset)`: `%s = pto.subview %t[%r, %c] sizes [R, C] [valid [%vr, %vc]] : T -> S`
        for an unboxed tile; the result keeps the parent's layout, fractal and pad."""
        src = self.tile(c.args[0], span)
        t = self.types.get(name)
        pt = self.types.get(c.args[0].name) if isinstance(c.args[0], Var) else None
        if not isinstance(t, TileType) or not isinstance(pt, TileType) or t.rank != 2 or pt.rank != 2:
            raise unsupported("pl.tile.slice of a tile that is not 2-D", span)
        e, pe = effective_tile_view(t), effective_tile_view(pt)
        if pe["slayout"] != "none_box":
            raise unsupported("pl.tile.slice of a boxed (fractal) tile", span)
        if any(str(e[k]) != str(pe[k]) for k in ("blayout", "slayout", "fractal", "pad", "compact")):
            raise unsupported("pl.tile.slice that changes the layout or pad value", span,
                              hint="pto.subview keeps the parent's tile config; drop pad_value=")
        tstr, dyn = self.tile_type(t, span, view=True)
        offs = _arg(c, 2, "offset")
        items = offs.items if isinstance(offs, (ListExpr, TupleExpr)) else None
        if items is None or len(items) != 2:
            raise unsupported("pl.tile.slice without a 2-D offset list", span)
        ov = [self.index_value(x, span) for x in items]
        valid = ""
        vals = None
        if dyn:
            vals = self._valid_values(t, span)
            valid = f" valid [%{vals[0]}, %{vals[1]}]"
        ssa = self.fresh(name)
        self.emit(f"%{ssa} = pto.subview %{src.ssa}[%{ov[0]}, %{ov[1]}] sizes [{_int(t.shape[0])}, "
                  f"{_int(t.shape[1])}]{valid} : {src.type} -> {tstr}")
        self.env[name] = _Handle(ssa, tstr, ("subview", ssa), dyn, vals)

    def dps(self, name: str, pto_op: str, ins: list[tuple[str, str]], span: Span | None) -> _Handle:
        h = self.define_tile(name, span)
        self.emit(f"pto.{pto_op} ins({', '.join('%' + s for s, _ in ins)} : {', '.join(t for _, t in ins)}) "
                  f"outs(%{h.ssa} : {h.type})")
        return h

    def _tile_dtype(self, e: Expr) -> DType:
        t = self.types.get(e.name) if isinstance(e, Var) else None
        if not isinstance(t, TileType):
            raise InternalError(f"operand {e} has no tile type")
        return t.dtype

    def scalar_operand(self, e: Expr | None, tile_dtype: DType, span: Span | None) -> tuple[str, str]:
        """A scalar operand of a tile op: a value keeps its own type; a literal takes the tile's dtype,
        except a float literal on an integer tile, which stays FP32 (OP-6)."""
        if e is None:
            raise InternalError("missing scalar operand")
        if isinstance(e, ConstFloat) and not tile_dtype.is_float:
            return self.const_float(e.value, dtypes.FP32), "f32"
        if isinstance(e, (ConstInt, ConstFloat, ConstBool)):
            r = self.expr(e, want=tile_dtype)
            return r.ssa, scalar_type(tile_dtype, span)
        r = self.expr(e)
        return r.ssa, scalar_type(r.dtype, span)

    def round_mode(self, mode: Expr | None, span: Span | None) -> str:
        if mode is None or isinstance(mode, NoneLit):
            return "ROUND"  # PyPTO's default rounding mode of pl.cast
        if isinstance(mode, ConstInt) and mode.value in ROUND_MODE_BY_INT:
            return ROUND_MODE_BY_INT[mode.value]
        text = _enum_text(mode)
        if text is not None and text.lower() in ROUND_MODE:
            return ROUND_MODE[text.lower()]
        raise unsupported(f"pl.tile.cast with rounding mode {mode}", span)

    def mask_pattern(self, e: Expr | None, span: Span | None) -> str:
        from ptoc.ops.gather import MASK_BY_NAME, MASK_PATTERNS

        if isinstance(e, EnumLit) and e.member in MASK_BY_NAME:
            return e.member
        if isinstance(e, StrLit) and e.value in MASK_BY_NAME:
            return e.value
        v = _int(e) if e is not None else None
        if v in MASK_PATTERNS:
            return MASK_PATTERNS[v][0]
        raise unsupported("pl.tile.gather_mask without a constant mask pattern", span)

    def set_validshape(self, name: str, c: Call, span: Span | None) -> None:
        """`x = tile.set_validshape(t, r, c)`: updates the valid shape of t's handle in place when t's
        handle already has a dynamic (`?`) valid shape; otherwise x is a second handle on t's bytes
        (level3: an alloc at the same addr; level2: a `pto.treshape` view of t's handle)."""
        self.tile(c.args[0], span)  # the source must be a tile handle
        t = self.types.get(name)
        if not isinstance(t, TileType) or t.memref is None:
            raise InternalError(f"tile {name} has no MemRef (run InitMemRef)")
        tstr, dyn = self.tile_type(t, span)
        key = self._key(t.memref, tstr)
        h = self.handles.get(key)
        if h is not None and h.dynamic:
            valid = (self.index_value(c.args[1], span), self.index_value(c.args[2], span))
            self.emit(f"pto.set_validshape %{h.ssa}, %{valid[0]}, %{valid[1]} : {h.type}")
            h.valid = valid
            self.env[name] = h
            return
        if h is not None:
            self.env[name] = h  # same static valid shape: nothing changes
            return
        if self.level == "level2":
            # no addresses to share: an aliasing view of the source (pto.treshape), its valid shape set
            # with pto.set_validshape when it is dynamic
            self.reshape(name, c, span)
            return
        self._alloc(key, name, t, tstr, dyn, span)
        self.env[name] = self.handles[key]

    def _on_alloc(self, name: str, span: Span | None) -> None:
        for key, first, t in self.pending.get(name, ()):
            if key not in self.handles:
                tstr, dyn = self.tile_type(t, span)
                self._alloc(key, first, t, tstr, dyn, span)

    def store(self, c: Call, span: Span | None) -> None:
        a = self.tile(c.args[0], span)
        attrs = self.store_attrs(c, span)
        pv, pt = self.partition(c, span)
        tail = f" {{{', '.join(f'{k} = {v}' for k, v in sorted(attrs.items()))}}}" if attrs else ""
        self.emit(f"pto.tstore ins(%{a.ssa} : {a.type}) outs(%{pv} : {pt}){tail}")

    def store_attrs(self, c: Call, span: Span | None) -> dict[str, str]:
        items: list[tuple[str, Expr]] = []
        for k, v in c.kwargs:
            if k == "attrs":
                if not isinstance(v, DictExpr):
                    raise unsupported("pl.tile.store attrs= that is not a dict", span)
                for dk, dv in v.items:
                    if not isinstance(dk, StrLit):
                        raise unsupported("pl.tile.store attrs= with a non-string key", span)
                    items.append((dk.value, dv))
            elif k != "shapes":
                items.append((k, v))
        out: dict[str, str] = {}
        for k, v in items:
            spec = STORE_ATTRS.get(k)
            if spec is None:
                raise unsupported(f"pl.tile.store with {k}=", span)
            attr, mnemonic, table = spec
            if isinstance(v, NoneLit):
                continue
            if isinstance(v, ConstBool):
                text = ("add" if v.value else "none") if attr == "atomicType" else \
                    ("normal" if v.value else "none") if attr == "reluPreMode" else None
            else:
                text = _enum_text(v)
            member = table.get(text.lower()) if text is not None else None
            if member is None:
                raise unsupported(f"pl.tile.store with {k}={v}", span)
            out[attr] = f"#pto<{mnemonic} {member}>"
        return out

    # ------------------------------------------------------------------ control flow
    def for_stmt(self, s: ForStmt) -> None:
        # pl.range, and also pl.parallel / pl.unroll / pl.pipeline / pl.spmd loops: each becomes a plain
        # scf.for (PTOAS schedules pipelining and unrolling itself; an spmd loop inside a kernel runs its
        # iterations one after the other on this core).
        if s.kind == "split_aiv":
            raise unsupported("pl.split_aiv", s.span, hint="outline the AIV split into its own kernel")
        if _int(s.step) is not None and _int(s.step) <= 0:
            raise unsupported(f"a pl.{s.kind} loop with step {_int(s.step)}", s.span,
                              hint="scf.for needs a positive step: count upwards and compute the index")
        lb = self.index_value(s.start, s.span)
        ub = self.index_value(s.stop, s.span)
        st = self.index_value(s.step, s.span)
        carried: list[tuple[int, DType]] = []
        inits: list[str] = []
        for i, (a, init) in enumerate(zip(s.iter_args, s.init_values)):
            t = self.types.get(a.name)
            if isinstance(t, ScalarType):
                carried.append((i, t.dtype))
                inits.append(self.expr(init, want=t.dtype).ssa)
            else:
                self.env[a.name] = self.value_of(init, s.span)
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
        for i, r in enumerate(results):
            if i in res_names:
                self.env[r.name] = _Scalar(res_names[i], dict(carried)[i])
            elif i < len(s.iter_args):
                init = self.env[s.iter_args[i].name]
                if y is not None and i < len(y.values):
                    self._same_handle(init, y.values[i], r.name, s.span)
                self.env[r.name] = init
            else:
                raise InternalError(f"loop result {r.name} has no loop-carried value")

    def _same_handle(self, init, yielded: Expr, result: str, span: Span | None) -> None:
        if not isinstance(init, _Handle):
            return
        y = self.value_of(yielded, span)
        if isinstance(y, _Handle) and y.ssa != init.ssa:
            raise InternalError(f"loop-carried tile {result} changes buffer inside the loop "
                                f"({init.ssa} -> {y.ssa}); InitMemRef must give it one buffer")

    def if_stmt(self, s: IfStmt) -> None:
        cond = self.expr(s.cond)
        c = cond.ssa
        if cond.dtype.kind != "bool":
            zero = self.zero(cond.dtype)
            c = self.temp()
            pred = "une" if cond.dtype.is_float else "ne"
            self.emit(f"%{c} = arith.{'cmpf' if cond.dtype.is_float else 'cmpi'} {pred}, %{cond.ssa}, %{zero} : "
                      f"{scalar_type(cond.dtype)}")
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
        self.emit("}")
        for i, r in enumerate(results):
            if i in res_names:
                self.env[r.name] = _Scalar(res_names[i], dict(scalars)[i])
                continue
            then_v = self.value_of(yields[0].values[i], s.span)
            if len(yields) > 1 and yields[1] is not None:
                else_v = self.value_of(yields[1].values[i], s.span)
                if isinstance(then_v, _Handle) and isinstance(else_v, _Handle) and then_v.ssa != else_v.ssa:
                    raise InternalError(f"if result {r.name} comes from two different buffers "
                                        f"({then_v.ssa}, {else_v.ssa}); InitMemRef must give it one buffer")
            self.env[r.name] = then_v

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
        raise unsupported(self._describe(e), e.span)

    @staticmethod
    def _describe(e: Expr) -> str:
        if isinstance(e, Call):
            return f"pl.{e.op}" if e.kind == "op" else f"the call self.{e.op}"
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
            dt = want or self.dtype_of(e)
            v = e.value
            if dt.is_float:
                return _Scalar(self.const_float(float(v), dt), dt)
            if isinstance(v, float):
                if not v.is_integer():
                    raise unsupported(f"the float literal {v} as a {dt.name} value", e.span)
                v = int(v)
            return _Scalar(self.const_int(int(v), dt), dt)
        if isinstance(e, Var):
            v = self.env.get(e.name)
            if not isinstance(v, _Scalar):
                raise InternalError(f"{e.name} is not a scalar value")
            return self.convert(v, want, name)
        own = self.dtype_of(e)
        # the final op takes `name` unless a conversion to `want` follows it
        inner = name if want is None or scalar_type(want) == scalar_type(own) else None
        if isinstance(e, BinOp):
            r = self.binop(e, inner)
        elif isinstance(e, UnaryOp):
            r = self.unary(e, inner)
        elif isinstance(e, MinMax):
            a, b = self.expr(e.lhs, own), self.expr(e.rhs, own)
            op = ("minimumf" if e.op == "min" else "maximumf") if own.is_float else \
                (("minui" if e.op == "min" else "maxui") if own.kind == "uint" else
                 ("minsi" if e.op == "min" else "maxsi"))
            out = self._name(inner)
            self.emit(f"%{out} = arith.{op} %{a.ssa}, %{b.ssa} : {scalar_type(own)}")
            r = _Scalar(out, own)
        elif isinstance(e, Abs):
            r = self.absolute(self.expr(e.operand, own), inner)
        elif isinstance(e, Cast):
            r = self.convert(self.expr(e.operand), e.dtype, inner)
        elif isinstance(e, Call) and e.kind == "op" and e.op == "scalar.cast":
            r = self.convert(self.expr(e.args[0]), own, inner)
        elif isinstance(e, Call) and e.kind == "op" and e.op in CORE_ID:
            out = self._name(inner)
            self.emit(f"%{out} = pto.{CORE_ID[e.op]}")
            r = _Scalar(out, own)
        elif isinstance(e, Call) and e.kind == "op" and e.op == "tile.read":
            r = self.tile_read(e, inner)
        else:
            raise unsupported(self._describe(e), e.span)
        return self.convert(r, want, name) if want is not None else r

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
