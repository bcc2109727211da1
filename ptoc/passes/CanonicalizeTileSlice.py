"""CanonicalizeTileSlice: read a window of an L1 (Mat) tile with one TEXTRACT instead of a slice view.

Purpose
-------
A `tile.slice` of a `Mat` tile is a view: the cube unit never reads it directly, a `tile.extract` (TEXTRACT)
or a matmul operand does. This pass folds the view into its readers, so that every read of a Mat window
is one `tile.extract` from the loaded Mat tile itself:

- `tile.extract(s, i, j, ...)` where `s = tile.slice(src, shape, [r, c])` becomes
  `tile.extract(src, i + r, j + c, ...)` (constant offsets are added up; `ko + 256` otherwise; a slice of
  a slice is followed to its root, the offsets accumulating);
- a slice used as a matmul operand (`tile.matmul` lhs / rhs, `tile.matmul_acc` lhs / rhs, `tile.matmul_bias`
  lhs / rhs) becomes `<slice>_left = tile.extract(src, r, c, shape=<shape>, target_memory=pl.Mem.Left)`
  (`_right`, `pl.Mem.Right` for the right operand) right before the matmul, which then reads it;
- a slice nothing reads any more is dropped.

Before::

    s: pl.Tile[[16, 256], pl.BF16, pl.Mem.Mat] = pl.tile.slice(lhs_mat, [16, 256], [16, 0])
    a = pl.tile.extract(s, 0, 0, shape=[16, 256], target_memory=pl.Mem.Left)

After::

    a = pl.tile.extract(lhs_mat, 16, 0, shape=[16, 256], target_memory=pl.Mem.Left)

Rules
-----
- Only 2-D slices of a `Mat` tile with a static shape and no `valid_shape` / `pad_value` of their own (a
  slice that narrows the valid region changes what the reader sees; it is left as written).
- Other readers of a slice (a store, a move, ...) keep it; the slice then stays in the program.
- Idempotent: a program with no Mat slice feeding an extract or a matmul is returned as it is.

Where this pass deliberately differs from PyPTO
----------------------------------------------
- PyPTO also rewrites Vec slices feeding `tile.col_expand_*` and element-wise ops into a materialising
  `tile.extract(..., target_memory=Vec)` when the slice's offset is dynamic or its window is not
  contiguous (its own codegen's lazy TEXTRACT would read the wrong bytes). ptoc emits a Vec slice as a
  `pto.subview` with explicit strides and start offset (pto-format.md), which reads the right window
  without a copy, so Vec slices are left alone here.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

from ptoc.diagnostics import CompileError, InternalError
from ptoc.ir import dtypes
from ptoc.ir.names import fresh_name
from ptoc.ir.nodes import (
    AssignStmt,
    BinOp,
    Call,
    ConstInt,
    EnumLit,
    Expr,
    Function,
    ListExpr,
    Program,
    Stmt,
    TileType,
    Var,
)
from ptoc.ir.verifier import iter_nodes
from ptoc.ir.visitor import rebuild_bodies
from ptoc.passes.common import resolve_op
from ptoc.passes.manager import Pass

# matmul-family op -> argument positions of its (left, right) operands
_OPERANDS = {"tile.matmul": (0, 1), "tile.matmul_acc": (1, 2), "tile.matmul_bias": (0, 1)}


class CanonicalizeTileSlice(Pass):
    name = "CanonicalizeTileSlice"
    stage = "layout"
    summary = "fold Mat tile.slice views into the tile.extract (TEXTRACT) of their readers and matmul operands"
    requires = frozenset({"tile_ops"})
    produces: frozenset[str] = frozenset()

    def run(self, program: Program, ctx) -> Program:
        types = None
        funcs = []
        changed = False
        for f in program.functions:
            if not any(isinstance(n, Call) and n.kind == "op" and n.op in ("tile.slice", "slice")
                       for n in iter_nodes(f)):
                funcs.append(f)
                continue
            if types is None:
                types = self.types(program, ctx)
            nf = _Rewriter(f, types.get(f.name, {}), ctx).run()
            changed |= nf is not f
            funcs.append(nf)
        return replace(program, functions=tuple(funcs)) if changed else program


def _add(a: Expr, b: Expr) -> Expr:
    if isinstance(b, ConstInt) and b.value == 0:
        return a
    if isinstance(a, ConstInt) and a.value == 0:
        return b
    if isinstance(a, ConstInt) and isinstance(b, ConstInt):
        return ConstInt(a.value + b.value, a.dtype, span=a.span)
    return BinOp("+", a, b, span=a.span)


class _Rewriter:
    def __init__(self, f: Function, types: dict, ctx):
        self.f = f
        self.types = dict(types)
        self.ctx = ctx
        self.names = {p.name for p in f.params} | {n.name for n in iter_nodes(f) if isinstance(n, Var)}
        # slice name -> (root Mat tile, row offset, column offset, static shape)
        self.slices: dict[str, tuple[Var, Expr, Expr, tuple[int, int]]] = {}
        for st in f.body:
            for n in iter_nodes(st):
                if isinstance(n, AssignStmt):
                    self.note_slice(n)
        self.changed = False

    def note_slice(self, s: AssignStmt) -> None:
        call = s.value
        if not isinstance(call, Call):
            return
        op = resolve_op(call, self.types)
        if op is None or op.name != "tile.slice" or len(call.args) != 3 or call.kwargs:
            return
        src, shape, offset = call.args
        t = self.types.get(src.name) if isinstance(src, Var) else None
        if not isinstance(t, TileType) or t.memory != "Mat" or len(t.shape) != 2:
            return
        if not (isinstance(shape, ListExpr) and len(shape.items) == 2
                and all(isinstance(d, ConstInt) for d in shape.items)):
            return
        if not (isinstance(offset, ListExpr) and len(offset.items) == 2):
            return
        if t.view is not None and t.view.valid_shape is not None and tuple(t.view.valid_shape) != tuple(t.shape):
            return
        assert isinstance(src, Var)
        r, c = offset.items
        if src.name in self.slices:
            root, r0, c0, _ = self.slices[src.name]
            r, c, src = _add(r0, r), _add(c0, c), root
        dims = (shape.items[0].value, shape.items[1].value)  # type: ignore[union-attr]
        self.slices[s.target.name] = (src, r, c, dims)

    def run(self) -> Function:
        if not self.slices:
            return self.f
        body = self.block(self.f.body)
        if not self.changed:
            return self.f
        body = self.drop_dead(body)
        return replace(self.f, body=body)

    def block(self, body: tuple[Stmt, ...]) -> tuple[Stmt, ...]:
        out: list[Stmt] = []
        for s in body:
            out.extend(self.stmt(s))
        return tuple(out)

    def stmt(self, s: Stmt) -> list[Stmt]:
        if not isinstance(s, AssignStmt) or not isinstance(s.value, Call):
            return [rebuild_bodies(s, self.block)]
        call = s.value
        op = resolve_op(call, self.types)
        if op is None:
            return [s]
        if op.name == "tile.extract" and call.args and isinstance(call.args[0], Var) \
                and call.args[0].name in self.slices and len(call.args) >= 3:
            root, r, c, _ = self.slices[call.args[0].name]
            self.changed = True
            args = (root, _add(call.args[1], r), _add(call.args[2], c)) + call.args[3:]
            return [replace(s, value=replace(call, args=args))]
        if op.name in _OPERANDS:
            pre: list[Stmt] = []
            args = list(call.args)
            for pos, mem, suffix in zip(_OPERANDS[op.name], ("Left", "Right"), ("left", "right")):
                if pos >= len(args) or not isinstance(args[pos], Var) or args[pos].name not in self.slices:
                    continue
                sl = args[pos]
                root, r, c, dims = self.slices[sl.name]
                name = fresh_name(f"{sl.name}_{suffix}", self.names)
                span = sl.span
                ext = Call("tile.extract", (root, r, c),
                           (("shape", ListExpr(tuple(ConstInt(d, dtypes.INDEX, span=span) for d in dims), span=span)),
                            ("target_memory", EnumLit("Mem", mem, span=span))), span=span)
                t = self.infer(ext)
                self.types[name] = t
                pre.append(AssignStmt(Var(name, span=span), ext, t, span=s.span))
                args[pos] = Var(name, span=span)
            if pre:
                self.changed = True
                return pre + [replace(s, value=replace(call, args=tuple(args)))]
        return [s]

    def infer(self, call: Call) -> TileType:
        from ptoc.ops.registry import infer_call_type

        arg_types = [self.types.get(a.name) if isinstance(a, Var) else None for a in call.args]
        t, diags = infer_call_type(call, arg_types, {k: None for k, _ in call.kwargs}, self.ctx)
        if diags:
            raise CompileError(diags)
        if not isinstance(t, TileType):
            raise InternalError(f"CanonicalizeTileSlice: no tile type for {call.op} at {call.span}")
        return t

    def drop_dead(self, body: tuple[Stmt, ...]) -> tuple[Stmt, ...]:
        """Drop slice statements nothing reads (repeated: a slice read only by a dropped slice goes too)."""
        while True:
            uses: Counter[str] = Counter()
            for st in body:
                for n in iter_nodes(st):
                    if isinstance(n, Var):
                        uses[n.name] += 1
            dead = {name for name in self.slices if uses[name] == 1}  # only its own definition names it
            if not dead:
                return body
            body = self.without(body, dead)
            for name in dead:
                del self.slices[name]

    def without(self, body: tuple[Stmt, ...], dead: set[str]) -> tuple[Stmt, ...]:
        out = []
        for s in body:
            if isinstance(s, AssignStmt) and s.target.name in dead:
                continue
            out.append(rebuild_bodies(s, lambda b: self.without(b, dead)))
        return tuple(out)
