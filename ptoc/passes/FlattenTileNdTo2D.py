"""FlattenTileNdTo2D: every kernel tile is 2-D.

Purpose
-------
pto-isa instructions take 2-D tiles. After ConvertTensorToTileOps a kernel's tiles have the rank of the
tensors they came from, so this pass rewrites every tile type of rank > 2 to `[prod(leading), last]` and
every rank-1 tile `[N]` to `[1, N]`. The data does not move: a row-major N-D tile and its 2-D flattening
are the same bytes.

Before::

    x_tile: pl.Tile[[2, 16, 64], pl.FP32, pl.Mem.Vec] = pl.tile.load(x, [0, 0, 0], [2, 16, 64], target_memory=pl.Mem.Vec)
    y: pl.Tile[[2, 16, 64], pl.FP32, pl.Mem.Vec] = pl.tile.adds(x_tile, 1.0)
    y_store: pl.Tensor[[2, 16, 64], pl.FP32] = pl.tile.store(y, [0, 0, 0], out)

After::

    x_tile: pl.Tile[[32, 64], pl.FP32, pl.Mem.Vec] = pl.tile.load(x, [0, 0, 0], [2, 16, 64], target_memory=pl.Mem.Vec)
    y: pl.Tile[[32, 64], pl.FP32, pl.Mem.Vec] = pl.tile.adds(x_tile, 1.0)
    y_store: pl.Tensor[[2, 16, 64], pl.FP32] = pl.tile.store(y, [0, 0, 0], out, [2, 16, 64])

Rules
-----
- Shapes. Rank > 2: `[d0, ..., dk, n]` -> `[d0 * ... * dk, n]`; the leading extents must be static
  (PTOC-E0310, with a hint to use a static physical shape and a valid_shape). Rank 1: `[n]` -> `[1, n]`.
  Every tile type in a kernel (annotations, parameters, results) is rewritten.
- valid_shape flattens the same way, `[v0, ..., vk, vn]` -> `[v0 * ... * vk, vn]`, when the valid rows
  stay a prefix of the flattened rows: leading axes pinned to one row (valid 1) may precede the first
  partial leading axis, and every leading axis after it must be fully valid. Otherwise PTOC-E0311.
- `tile.load` keeps its N-D offsets, shapes and valid_shapes (the window in the tensor); only its result
  type becomes 2-D (the verifier accepts a 2-D annotation of a rank-N load). No window is collapsed,
  whatever the memory space. For a source tensor with layout NZ this is required: BlockNzTensorViews
  runs after this pass (NZ-5) and folds the leading offsets into the blocked batch axis itself (NZ-4), so
  the load must reach it with its logical N-D window, without any ND2NZ collapse.
- `tile.store` into a tensor of rank > 2, or of rank 1, gets the explicit partition-shape operand (4th
  positional argument): the window the tile covers in the tensor's own coordinates, its original shape
  left-padded with 1s to the tensor rank (`[N]` for a rank-1 tile, now `[1, N]`, stored into a rank-1
  tensor).
  A store that already has it is left alone.
- `tile.create` / `tile.full`: the shape argument is flattened. `tile.read` / `tile.write`: N-D indices
  become `[row, col]` in the flattened tile (row-major linearisation of the leading indices).
- `tile.assemble(target, source, offsets)` into an N-D target: the offset becomes `[row, col]` of the
  flattened target (row-major linearisation of the leading offsets), as PyPTO folds it. The source must
  have the target's rank and its rows must form one contiguous band of the target's rows (every leading
  axis after its first partial one written whole); otherwise PTOC-E0312.
- Short names (`pl.load`, `pl.store`, ...) are the ops they resolve to, by the N-D argument types.
- Every other op keeps its arguments; its operands now have 2-D types. The pass re-checks each op on
  the 2-D operand types and requires the result to be the flattening of the N-D result, so an op whose
  meaning depends on the N-D axes (col reductions, transposes, slices, broadcasting across a leading
  axis, ...) is rejected with PTOC-E0312 instead of silently changing meaning.
- `tile.transpose(t, a, b)` of a 2-D tile without a scratch operand gets one, as PyPTO materialises it
  here: `transpose_tmp = pl.tile.create(<t's shape>, dtype=<t's dtype>, target_memory=<t's memory>)`
  just before it, passed as the 4th positional argument (PTOAS's `pto.ttrans` takes the source and a
  scratch tile of the source's shape). The allocator then gives the scratch a buffer of its own, which
  MemoryReuse keeps apart from the transpose's result. A transpose of an N-D tile is rejected
  (PTOC-E0312, below) where PyPTO splits it into per-page 2-D transposes.
- Idempotent: a kernel whose tiles are all 2-D, whose rank > 2 stores carry their partition shape and
  whose transposes have their scratch tile is returned unchanged.
"""

from __future__ import annotations

from dataclasses import replace

from ptoc.context import CompileContext
from ptoc.ir import dtypes
from ptoc.ir.nodes import (
    AssignStmt,
    BinOp,
    Call,
    ConstInt,
    DTypeLit,
    EnumLit,
    EvalStmt,
    Expr,
    ForStmt,
    Function,
    IfStmt,
    ListExpr,
    Node,
    Program,
    ScopeStmt,
    Stmt,
    TensorType,
    TileType,
    TupleExpr,
    TupleType,
    Type,
    Var,
    WhileStmt,
    YieldStmt,
)
from ptoc.ir.names import fresh_name
from ptoc.ir.visitor import walk
from ptoc.ir.printer import print_type
from ptoc.ir.flatten import compile_error as _error
from ptoc.ir.flatten import const_value as _cint
from ptoc.ir.flatten import flat_shape, flat_tile, flat_type, flat_valid
from ptoc.passes.common import expr_type, resolve_op
from ptoc.passes.manager import Pass
from ptoc.passes.properties import KERNEL_TYPES

INDEX = dtypes.INDEX
SHAPE_OPS = ("tile.create", "tile.full")
INDEX_OPS = ("tile.read", "tile.write")


def _linear(indices, shape) -> Expr:
    """Row-major linear index of `indices` in `shape`: ((i0 * d1 + i1) * d2 + i2) ..."""
    out: Expr | None = None
    for i, d in zip(indices, shape):
        if out is None:
            out = i
            continue
        ov, dv, iv = _cint(out), _cint(d), _cint(i)
        if ov is not None and dv is not None and iv is not None:
            out = ConstInt(ov * dv + iv, INDEX)
            continue
        scaled = out if dv == 1 else (ConstInt(0, INDEX) if ov == 0 else BinOp("*", out, d))
        out = i if _cint(scaled) == 0 else (scaled if iv == 0 else BinOp("+", scaled, i))
    return out if out is not None else ConstInt(0, INDEX)


def _needs(t: Type | None) -> bool:
    if isinstance(t, TileType):
        return t.rank not in (0, 2)
    if isinstance(t, TupleType):
        return any(_needs(x) for x in t.types)
    return False


class _Kernel:
    def __init__(self, f: Function, types: dict[str, Type | None], ctx: CompileContext):
        self.f = f
        self.types = types  # original (N-D) types
        self.new: dict[str, Type | None] = {}  # flattened types
        self.ctx = ctx
        self.taken: set[str] | None = None  # every name of the function, once a fresh one is needed

    def define(self, name: str, at: Node) -> None:
        t = self.types.get(name)
        self.new[name] = flat_type(t, at) if _needs(t) else t

    def run(self) -> Function:
        for p in self.f.params:
            self.define(p.name, p)
        params = tuple(replace(p, type=self.new[p.name]) if _needs(p.type) else p for p in self.f.params)
        returns = tuple(flat_type(t, self.f) if _needs(t) else t for t in self.f.returns)
        body = self.block(self.f.body)
        if all(a is b for a, b in zip(params, self.f.params)) and all(a is b for a, b in zip(returns, self.f.returns)) \
                and len(body) == len(self.f.body) and all(a is b for a, b in zip(body, self.f.body)):
            return self.f
        return replace(self.f, params=params, returns=returns, body=body)

    def block(self, body: tuple[Stmt, ...]) -> tuple[Stmt, ...]:
        out: list[Stmt] = []
        for s in body:
            r = self.stmt(s)
            out.extend(r if isinstance(r, tuple) else (r,))
        return tuple(out)

    def stmt(self, s: Stmt) -> Stmt:
        handler = getattr(self, "stmt_" + type(s).__name__, None)
        return handler(s) if handler is not None else s

    def stmt_AssignStmt(self, s: AssignStmt) -> Stmt:
        value = self.rewrite(s.value, s) if isinstance(s.value, Call) else s.value
        self.define(s.target.name, s)
        orig = self.types.get(s.target.name)
        ann = s.annotation
        if ann is not None and _needs(ann):
            ann = flat_type(ann, s)
        elif ann is None and _needs(orig):
            ann = self.new[s.target.name]  # the value's own rule would give the N-D type
        if isinstance(value, Call) and value.kind == "op":
            self.check(value, orig, s)
        scratch = self.transpose_scratch(value, s) if isinstance(value, Call) and value.kind == "op" else None
        if scratch is not None:
            value = replace(value, args=value.args + (scratch.target,))
        if value is s.value and ann is s.annotation:
            return s
        out = replace(s, value=value, annotation=ann)
        return (scratch, out) if scratch is not None else out

    def transpose_scratch(self, call: Call, at: AssignStmt) -> AssignStmt | None:
        """The `transpose_tmp = pl.tile.create(...)` a 2-D `tile.transpose` without scratch needs, or None."""
        from ptoc.ops.registry import infer_call_type

        if self.op_name(call) != "tile.transpose" or len(call.args) != 3 or call.kwarg("tmp") is not None:
            return None
        src = expr_type(call.args[0], self.new)
        if not isinstance(src, TileType) or src.rank != 2:
            return None
        create = Call("tile.create", (ListExpr(tuple(src.shape)),),
                      (("dtype", DTypeLit(src.dtype)), ("target_memory", EnumLit("Mem", src.memory or "Vec"))),
                      span=at.span)
        t, diags = infer_call_type(create, [None], {"dtype": None, "target_memory": None}, self.ctx)
        if diags or not isinstance(t, TileType):
            return None
        if self.taken is None:
            self.taken = {n.name for n in walk(self.f) if isinstance(n, Var)} | {p.name for p in self.f.params}
        name = fresh_name("transpose_tmp", self.taken)
        self.new[name] = t
        return AssignStmt(Var(name, span=at.span), create, t, span=at.span)

    def stmt_EvalStmt(self, s: EvalStmt) -> Stmt:
        if not isinstance(s.expr, Call):
            return s
        e = self.rewrite(s.expr, s)
        if e.kind == "op":
            self.check(e, None, s)
        return s if e is s.expr else replace(s, expr=e)

    def stmt_YieldStmt(self, s: YieldStmt) -> Stmt:
        for t in s.targets:
            self.define(t.name, s)
        if s.annotation is not None and _needs(s.annotation):
            return replace(s, annotation=flat_type(s.annotation, s))
        if s.annotation is None and len(s.targets) == 1 and _needs(self.types.get(s.targets[0].name)):
            return replace(s, annotation=self.new[s.targets[0].name])
        return s

    def stmt_ForStmt(self, s: ForStmt) -> Stmt:
        self.define(s.var.name, s)
        return self.stmt_WhileStmt(s)  # type: ignore[arg-type]

    def stmt_WhileStmt(self, s: WhileStmt) -> Stmt:
        for a in s.iter_args:
            self.define(a.name, s)
        body = self.block(s.body)
        return s if all(a is b for a, b in zip(body, s.body)) else replace(s, body=body)

    def stmt_IfStmt(self, s: IfStmt) -> Stmt:
        then_b, else_b = self.block(s.then_body), self.block(s.else_body)
        if all(a is b for a, b in zip(then_b, s.then_body)) and all(a is b for a, b in zip(else_b, s.else_body)):
            return s
        return replace(s, then_body=then_b, else_body=else_b)

    def stmt_ScopeStmt(self, s: ScopeStmt) -> Stmt:
        if s.var is not None:
            self.define(s.var.name, s)
        body = self.block(s.body)
        return s if all(a is b for a, b in zip(body, s.body)) else replace(s, body=body)

    # ------------------------------------------------------------------ calls
    def orig_of(self, e: Expr) -> Type | None:
        return expr_type(e, self.types)

    def op_name(self, call: Call) -> str:
        """The registered op a call names: short names (`pl.store`, `pl.load`) resolved by the N-D types."""
        op = resolve_op(call, self.types)
        return op.name if op is not None else call.op

    def rewrite(self, call: Call, at: Stmt) -> Call:
        if call.kind != "op":
            return call
        name = self.op_name(call)
        if name == "tile.assemble":
            return self.assemble(call, at)
        if name in SHAPE_OPS and call.args and isinstance(call.args[0], (ListExpr, TupleExpr)):
            shape = call.args[0].items
            if len(shape) != 2 and len(shape) > 0:
                new_shape = replace(call.args[0], items=flat_shape(tuple(shape), at))
                return replace(call, args=(new_shape,) + call.args[1:])
            return call
        if name in INDEX_OPS and len(call.args) >= 2 and isinstance(call.args[1], (ListExpr, TupleExpr)):
            t = self.orig_of(call.args[0])
            idx = call.args[1].items
            if isinstance(t, TileType) and t.rank != 2 and len(idx) == t.rank:
                flat_shape(t.shape, at)
                if t.rank == 1:
                    new_idx = (ConstInt(0, INDEX), idx[0])
                else:
                    new_idx = (_linear(idx[:-1], t.shape[:-1]), idx[-1])
                return replace(call, args=(call.args[0], replace(call.args[1], items=new_idx)) + call.args[2:])
            return call
        # tile.load keeps its N-D window (offsets, shapes, valid_shapes) for every source, NZ included
        # (NZ-5): only its result type is flattened, by the annotation.
        if name == "tile.store" and len(call.args) == 3 and call.kwarg("shapes") is None:
            tile_t, out_t = self.orig_of(call.args[0]), self.orig_of(call.args[2])
            if isinstance(tile_t, TileType) and isinstance(out_t, TensorType) and out_t.rank != 2 \
                    and tile_t.rank <= out_t.rank:
                window = (ConstInt(1, INDEX),) * (out_t.rank - tile_t.rank) + tuple(tile_t.shape)
                return replace(call, args=call.args + (ListExpr(window),))
        return call

    def assemble(self, call: Call, at: Stmt) -> Call:
        """`tile.assemble(target, source, offsets)` into an N-D target: the N-D offset becomes the 2-D
        `[row, col]` of the flattened target. One 2-D insert writes the same elements only when the source
        rows form one contiguous band of the target's rows: every leading axis after the source's first
        partial one is written whole."""
        if len(call.args) != 3 or not isinstance(call.args[2], (ListExpr, TupleExpr)):
            return call
        tt, st = self.orig_of(call.args[0]), self.orig_of(call.args[1])
        if not (isinstance(tt, TileType) and tt.rank > 2):
            return call
        offsets = call.args[2].items
        if not isinstance(st, TileType) or st.rank != tt.rank or len(offsets) != tt.rank:
            raise _error("PTOC-E0312", f"pl.tile.assemble into a rank-{tt.rank} tile needs a rank-{tt.rank} source "
                         f"and {tt.rank} offsets to have a 2-D form", at,
                         hint="reshape the source to the target's rank before assembling")
        lead_s, lead_t = [_cint(d) for d in st.shape[:-1]], [_cint(d) for d in tt.shape[:-1]]
        first = next((i for i, d in enumerate(lead_s) if d != 1), len(lead_s))
        if any(a is None or b is None or a != b for a, b in zip(lead_s[first + 1:], lead_t[first + 1:])):
            raise _error("PTOC-E0312", f"pl.tile.assemble writes a {print_type(st)} region into a {print_type(tt)}: "
                         "flattened to 2-D, its rows are not one contiguous band of the target's rows", at,
                         hint="assemble one whole page of the inner axes per call (loop over the outer axis)")
        row = _linear(offsets[:-1], tt.shape[:-1])
        return replace(call, args=call.args[:2] + (replace(call.args[2], items=(row, offsets[-1])),))

    def check(self, call: Call, orig: Type | None, at: Stmt) -> None:
        """The op on the flattened operand types must give the flattening of its N-D result."""
        from ptoc.ops.registry import infer_call_type

        touched = _needs(orig) or any(_needs(self.orig_of(a)) for a in call.args) or \
            any(_needs(self.orig_of(v)) for _, v in call.kwargs)
        if not touched:
            return
        arg_types = [expr_type(a, self.new) for a in call.args]
        kw_types = {k: expr_type(v, self.new) for k, v in call.kwargs}
        got, diags = infer_call_type(call, arg_types, kw_types, self.ctx)
        why = diags[0].message if diags else None
        if why is None and self.op_name(call) != "tile.load" and isinstance(orig, TileType):
            want = flat_tile(orig, at)
            if not isinstance(got, TileType) or got.shape != want.shape or got.dtype != want.dtype \
                    or (got.memory or "Vec") != (want.memory or "Vec"):
                why = f"it gives {print_type(got) if got is not None else 'no tile'}, not {print_type(want)}"
        if why is not None:
            nd = ", ".join(f"rank {t.rank}" for t in (self.orig_of(a) for a in call.args) if isinstance(t, TileType))
            raise _error("PTOC-E0312", f"pl.{call.op} on N-D tiles ({nd}) has no 2-D form: {why}", at,
                         hint="keep this op on 2-D tiles: reshape the data to [rows, cols] before the kernel")


class FlattenTileNdTo2D(Pass):
    name = "FlattenTileNdTo2D"
    stage = "tile"
    summary = "kernel tiles become 2-D: rank > 2 -> [prod(leading), last], rank 1 -> [1, N]; stores get partitions"
    requires = frozenset({"tile_ops"})
    produces = frozenset({"flat_tiles"})

    def run(self, program: Program, ctx: CompileContext) -> Program:
        types = None
        funcs = []
        for f in program.functions:
            if f.func_type in KERNEL_TYPES:
                if types is None:
                    types = self.types(program, ctx)
                f = _Kernel(f, types[f.name], ctx).run()
            funcs.append(f)
        if all(a is b for a, b in zip(funcs, program.functions)):
            return program
        return replace(program, functions=tuple(funcs))


__all__ = ["FlattenTileNdTo2D", "flat_shape", "flat_tile", "flat_valid"]
