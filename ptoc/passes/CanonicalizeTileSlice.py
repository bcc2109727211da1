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
- Vec slices (rule 4 below) are copied out only on A5: TEXTRACT's UB-to-UB copy is an A5 path (PTOAS
  rejects a vec source on A2/A3), so there ptoc keeps the slice a `pto.subview` with explicit strides and
  start offset.
- A Vec window of one column (`[N, 1]`, N > 1) stays a view: its copy would be a col-major tile, and
  PTOAS takes a Vec -> Vec TEXTRACT only between ND tiles ("expects A5 vec->vec textract src/dst to use
  ND layout"); PyPTO copies it into a col-major tile, which PTOAS rejects.
- A slice read through a plain alias (`b = a`) is copied out under its own name; the alias stays.

Rule 4 (A5): Vec slices a vector instruction cannot read in place
------------------------------------------------------------------
A `tile.slice` of a row-major Vec tile (or one whose space is still open) becomes
`tile.extract(src, r, c, shape, target_memory=pl.Mem.Vec)` -- a dense tile of its own -- when
- its first element is not provably on a 32-byte boundary: a vector instruction's tile operand starts
  there (the row offset times the row's bytes plus the column's bytes; a constant name counts as its
  value, `k * 8` as a multiple of 8, anything else as unknown), or
- a `tile.col_expand_*` op reads it and its offset is dynamic or its window is not contiguous (several
  rows of a part of each row): that op reads its operand as one dense block.
The slice's name is kept, so every reader (an op, a yield, a loop's initial value) reads the copy.
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

    def applies(self, program: Program, ctx) -> bool:
        return any(self.index(f).has_op("tile.slice", "slice") for f in program.functions)

    def run(self, program: Program, ctx) -> Program:
        types = None
        funcs = []
        changed = False
        for f in program.functions:
            if not self.index(f).has_op("tile.slice", "slice"):
                funcs.append(f)
                continue
            if types is None:
                types = self.types(program, ctx)
            nf = f
            if getattr(ctx, "arch", None) in VEC_EXTRACT_ARCHS:
                nf = _materialize_vec_slices(nf, types.get(f.name, {}), ctx)
            nf = _Rewriter(nf, types.get(f.name, {}), ctx).run()
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


# --------------------------------------------------------------------------------------------------
# Vec slices a vector instruction cannot read in place
# --------------------------------------------------------------------------------------------------

VEC_EXTRACT_ARCHS = ("a5",)  # targets with a Vec -> Vec TEXTRACT (ptoc.ops.layout.EXTRACT_PAIRS_BY_ARCH)
UB_ALIGN = 32  # bytes: where a vector instruction's tile operand starts, and a row-major row's multiple


def _known_ints(f: Function) -> dict[str, int]:
    """Names bound to an integer constant (`k = 1`)."""
    return {n.target.name: n.value.value for n in iter_nodes(f)
            if isinstance(n, AssignStmt) and isinstance(n.value, ConstInt)}


def _multiple(e: Expr, known: dict[str, int]) -> int:
    """A number `e` is provably a multiple of (its value when it is a constant)."""
    if isinstance(e, ConstInt):
        return e.value
    if isinstance(e, Var) and e.name in known:
        return known[e.name]
    if isinstance(e, BinOp) and e.op == "*":
        return _multiple(e.lhs, known) * _multiple(e.rhs, known)
    return 1


def _materialize_vec_slices(f: Function, types: dict, ctx) -> Function:
    """Rule 4: the Vec slices that become a `tile.extract(..., target_memory=pl.Mem.Vec)` of their own."""
    from ptoc.ir.types import effective_tile_view

    known = _known_ints(f)
    col_expand_reads = {a.name for n in iter_nodes(f) if isinstance(n, Call) and n.kind == "op"
                        and "col_expand_" in n.op for a in n.args if isinstance(a, Var)}
    todo: dict[str, Call] = {}
    for n in iter_nodes(f):
        if not (isinstance(n, AssignStmt) and isinstance(n.value, Call) and n.value.kind == "op"):
            continue
        call = n.value
        op = resolve_op(call, types)
        if op is None or op.name != "tile.slice" or len(call.args) != 3 or call.kwargs:
            continue
        src, shape, offset = call.args
        t = types.get(src.name) if isinstance(src, Var) else None
        if not isinstance(t, TileType) or t.memory not in (None, "Vec") or len(t.shape) != 2 \
                or not all(isinstance(d, ConstInt) for d in t.shape):
            continue
        eff = effective_tile_view(t)
        so = eff["start_offset"]
        if eff["blayout"] != "row_major" or eff["slayout"] != "none_box" or eff["stride"] \
                or not (so is None or (isinstance(so, ConstInt) and so.value == 0)):
            continue
        if not (isinstance(shape, ListExpr) and len(shape.items) == 2
                and all(isinstance(d, ConstInt) for d in shape.items)
                and isinstance(offset, ListExpr) and len(offset.items) == 2):
            continue
        rows, cols = shape.items[0].value, shape.items[1].value  # type: ignore[union-attr]
        width = max(t.dtype.bits // 8, 1)
        if (rows > 1 and cols == 1) or (cols * width) % UB_ALIGN:
            continue  # the copy would be a col-major [N, 1] tile or no legal row-major tile: left a view
        r, c = (ConstInt(known[e.name], dtypes.INDEX, span=e.span) if isinstance(e, Var) and e.name in known else e
                for e in offset.items)
        row_bytes = t.shape[1].value * width  # type: ignore[union-attr]
        aligned = (_multiple(r, known) * row_bytes) % UB_ALIGN == 0 and (_multiple(c, known) * width) % UB_ALIGN == 0
        dynamic = not (isinstance(r, ConstInt) and isinstance(c, ConstInt))
        contiguous = rows == 1 or cols == t.shape[1].value  # type: ignore[union-attr]
        if aligned and not (n.target.name in col_expand_reads and (dynamic or not contiguous)):
            continue
        todo[n.target.name] = Call("tile.extract", (src, r, c, shape),
                                   (("target_memory", EnumLit("Mem", "Vec", span=call.span)),), span=call.span)
    if not todo:
        return f

    from ptoc.ops.registry import infer_call_type

    def one(s: Stmt) -> Stmt:
        if isinstance(s, AssignStmt) and s.target.name in todo:
            ext = todo[s.target.name]
            ann = None
            if s.annotation is not None:  # the copy's own type (dense: no stride or start offset of the view)
                ann, _ = infer_call_type(ext, [types.get(a.name) if isinstance(a, Var) else None for a in ext.args],
                                         {k: None for k, _ in ext.kwargs}, ctx)
            return replace(s, value=ext, annotation=ann)
        return rebuild_bodies(s, lambda b: tuple(one(x) for x in b))

    return replace(f, body=tuple(one(s) for s in f.body))


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
