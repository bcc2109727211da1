"""LowerAutoVectorSplit: write a split mixed kernel in its per-lane form, with explicit lane crossings.

Purpose
-------
A mixed InCore kernel carrying a `split` attribute (UP_DOWN: rows, LEFT_RIGHT: columns) runs its vector
part on both vector lanes, each on one half of the split axis. This pass, run just before
ExpandMixedKernel, rewrites the vector part for one lane: the cube -> vector moves become
`tile.aiv_shard` (each lane receives its half), vector -> cube moves become `tile.aic_gather`, vector tiles
loaded or sliced at the full extent take the lane's half, and global-memory offsets on the split axis move
by `subblock_idx * half`. The function is marked `split_aiv`, so ExpandMixedKernel turns the crossings into
split pipe transfers and SplitVectorKernel leaves the body alone.

Before::

    @pl.function(type=pl.FunctionType.InCore, attrs={"split": pl.SplitMode.UP_DOWN})
    def k(self, qk: pl.Tile[[128, 128], pl.FP32, pl.Mem.Mat], out: pl.Out[pl.Tensor[[128, 128], pl.FP32]]):
        v = pl.tile.move(qk, target_memory=pl.Mem.Vec)
        y = pl.tile.add(v, v)
        o = pl.tile.store(y, [0, 0], out)

After::

    @pl.function(type=pl.FunctionType.InCore, attrs={"split": pl.SplitMode.UP_DOWN, "split_aiv": True})
    def k(self, qk: ..., out: ...):
        subblock_idx: pl.Scalar[pl.INDEX] = pl.tile.get_subblock_idx()
        v = pl.tile.aiv_shard(qk, split=1)                       # [64, 128] Vec
        y = pl.tile.add(v, v)
        o = pl.tile.store(y, [0 + subblock_idx * 64, 0], out)

Rules
-----
- Only InCore functions with a `split` attribute of UP_DOWN or LEFT_RIGHT and no `split_aiv` mark change.
- `subblock_idx = tile.get_subblock_idx()` becomes the first statement.
- A `tile.move` of a cube tile (Mat, Acc, ...) into Vec becomes `tile.aiv_shard(src, split=mode)`; the
  lane's stride along the axis is half the box, or, when the source's valid extent V is a constant whose
  halves differ from the box's (ceil(V / 2) != ceil(box / 2)) and the shard is used, `lane_stride=ceil(V / 2)`.
- A `tile.move` of a halved Vec tile into cube memory becomes `tile.aic_gather(src, split=mode)`.
- A Vec `tile.load` or `tile.slice` whose extent on the axis is the even constant box F takes F / 2 and
  starts at `offset + subblock_idx * F / 2`.
  A Vec `tile.load` whose extent F is odd takes the box ceil(F / 2) on both lanes, starts at
  `offset + subblock_idx * box` and narrows the lane's valid extent to `min(max(V, start) - start, box)`.
  A rank-1 load or slice is left whole: it has no split axis until a reshape makes it 2-D.
- A `tile.reshape` / `tile.reinterpret_view` of a lane's tile names the half on the axis in its shape
  (argument, or `shape=`) when the split stays on the same dimension; of a whole Vec tile (a rank-1 load,
  a Vec parameter) it is kept at full size under a fresh name and the lane's half is sliced out of it
  (`tile.slice(view, [.., half, ..], [.., subblock_idx * half, ..])`), so each lane reads its own half.
- A `tile.store` of a halved tile writes at `offset + subblock_idx * stride` on the axis.
- The types of the rewritten statements are inferred again (their annotations are dropped). A kernel whose
  rewritten form does not type (an op taking the full box explicitly, such as a reshape) is PTOC-E0681.
- A kernel whose tiles never cross between the cube memories and Vec (pure vector work) is left alone.

Deliberate differences from PyPTO
---------------------------------
- Only the moves, loads, slices, views and stores above are rewritten; other ops that take explicit
  full-box shapes (tile.create/full/ci) are left replicated on both lanes, where PyPTO localises some of
  them. A reshape that moves the split to another dimension (the [N, 1] <-> [1, N] column reshape PyPTO
  follows) is not followed: PTOC-E0681.
- The valid shape of a shard is the one ptoc's `tile.aiv_shard` type rule gives (the same per-lane rule).
"""

from __future__ import annotations

from ptoc.diagnostics import CompileError, Diagnostic
from ptoc.ir import dtypes
from ptoc.ir.names import fresh_name
from ptoc.ir.nodes import (
    AssignStmt,
    BinOp,
    Call,
    ConstBool,
    ConstInt,
    EnumLit,
    EvalStmt,
    ForStmt,
    Function,
    IfStmt,
    ListExpr,
    MinMax,
    Program,
    ScalarType,
    ScopeStmt,
    Stmt,
    StrLit,
    TileType,
    TupleExpr,
    Var,
    WhileStmt,
)
from ptoc.ir.visitor import replace, walk
from ptoc.passes.common import op_names
from ptoc.passes.manager import Pass

CUBE_SPACES = ("Mat", "Left", "Right", "Acc", "Bias", "LeftScale", "RightScale")
MODES = {"NONE": 0, "UP_DOWN": 1, "LEFT_RIGHT": 2}
SB = "subblock_idx"


def _attr(f: Function, key: str):
    return f.attr(key)  # the decorator's attrs= or PyPTO's pl.func_attr prologue


def _mode_value(e) -> int | None:
    if isinstance(e, EnumLit):
        return MODES.get(e.member)
    return e.value if isinstance(e, ConstInt) else None


def _true(e) -> bool:
    return isinstance(e, ConstBool) and e.value


def _i(v: int) -> ConstInt:
    return ConstInt(v, dtypes.INDEX)


def _is(c, *ops: str) -> bool:
    return isinstance(c, Call) and c.kind == "op" and not op_names(c.op).isdisjoint(ops)


def _const(e) -> int | None:
    return e.value if isinstance(e, ConstInt) else None


class LowerAutoVectorSplit(Pass):
    name = "LowerAutoVectorSplit"
    stage = "layout"
    summary = "rewrite split mixed kernels per lane: aiv_shard / aic_gather crossings, halved vector tiles"

    def run(self, program: Program, ctx) -> Program:
        todo = [f for f in program.functions if isinstance(f, Function) and f.func_type == "InCore"
                and (_mode_value(_attr(f, "split")) or 0) in (1, 2) and not _true(_attr(f, "split_aiv"))]
        if not todo:
            return program
        types = self.types(program, ctx)
        todo = [f for f in todo if _crosses(f, types.get(f.name, {}))]
        if not todo:
            return program
        out = []
        for f in program.functions:
            if any(f is g for g in todo):
                f = _Lower(f, types.get(f.name, {}), _mode_value(_attr(f, "split"))).run()
            out.append(f)
        new = replace(program, functions=tuple(out))
        from ptoc.ir.verifier import verify_program

        diags = [d for d in verify_program(new, ctx=ctx, cache=self.cache) if d.severity == "error"]
        if diags:
            d = diags[0]
            raise CompileError([Diagnostic(
                "PTOC-E0681", f"the split kernel cannot be written per lane: {d.message}", d.span,
                hint="ptoc halves moves, loads, slices and stores along the split axis; write ops that take the "
                     "full box explicitly (reshape, create) at the lane's half, or drop the split")])
        return new


def _crosses(f: Function, types: dict) -> bool:
    """Whether a tile moves between the cube memories and Vec: only a mixed kernel has lanes to split."""
    for s in walk(f):
        if isinstance(s, AssignStmt) and _is(s.value, "tile.move") and s.value.args:
            src, dst = types.get(getattr(s.value.args[0], "name", None)), types.get(s.target.name)
            if isinstance(src, TileType) and isinstance(dst, TileType) and src.memory and dst.memory and \
                    (src.memory in CUBE_SPACES) != (dst.memory in CUBE_SPACES):
                return True
    return False


class _Lower:
    def __init__(self, f: Function, types: dict, mode: int):
        self.f, self.types, self.mode, self.axis = f, types, mode, mode - 1
        self.stride: dict[str, object] = {}  # halved tile -> its lane stride on the axis
        used = [n.name for n in walk(f) if isinstance(n, Var)]
        self.taken = set(used) | {p.name for p in f.params} | {SB}
        self.uses: dict[str, int] = {}
        for n in used:
            self.uses[n] = self.uses.get(n, 0) + 1

    def run(self) -> Function:
        items = self.f.attr_items() + ((StrLit("split_aiv"), ConstBool(True)),)
        sb = AssignStmt(Var(SB), Call("tile.get_subblock_idx"), ScalarType(dtypes.INDEX))
        return replace(self.f.with_attr_items(items), body=(sb,) + self.block(self.f.body))

    def block(self, body):
        return tuple(x for s in body for x in self.stmt(s))

    def memory(self, e) -> str | None:
        t = self.types.get(e.name) if isinstance(e, Var) else None
        return t.memory if isinstance(t, TileType) else None

    def halved(self, e) -> bool:
        return isinstance(e, Var) and e.name in self.stride

    def stmt(self, s: Stmt) -> list[Stmt]:
        if isinstance(s, (ForStmt, WhileStmt, ScopeStmt)):
            return [replace(s, body=self.block(s.body))]
        if isinstance(s, IfStmt):
            return [replace(s, then_body=self.block(s.then_body), else_body=self.block(s.else_body))]
        c = s.value if isinstance(s, AssignStmt) else s.expr if isinstance(s, EvalStmt) else None
        if not isinstance(c, Call):
            return [s]
        if _is(c, "tile.store") and len(c.args) >= 3 and self.halved(c.args[0]):
            c = replace(c, args=(c.args[0], self.shift(c.args[1], self.stride[c.args[0].name])) + c.args[2:])
            return [replace(s, value=c) if isinstance(s, AssignStmt) else replace(s, expr=c)]
        if not isinstance(s, AssignStmt):
            return [s]
        target = s.target.name
        dst = self.types.get(target)
        if _is(c, "tile.move") and c.args and isinstance(dst, TileType):
            src = c.args[0]
            if self.memory(src) in CUBE_SPACES and dst.memory == "Vec":
                return [self.shard(s, src)]
            if self.halved(src) and dst.memory in CUBE_SPACES:
                g = Var(f"{target}_gathered")
                gather = AssignStmt(g, Call("tile.aic_gather", (src,), (("split", _i(self.mode)),), span=c.span),
                                    span=s.span)
                return [gather, replace(s, value=replace(c, args=(g,) + c.args[1:]), annotation=None)]
        if _is(c, "tile.load", "tile.slice") and isinstance(dst, TileType) and dst.memory == "Vec":
            shape_i, off_i = (2, 1) if _is(c, "tile.load") else (1, 2)
            if len(c.args) > max(shape_i, off_i):
                shapes = c.args[shape_i]
                # a rank-1 tile has no split axis yet: the reshape that makes it 2-D takes the lane's half
                full = _const(shapes.items[self.axis]) if isinstance(shapes, (ListExpr, TupleExpr)) \
                    and len(shapes.items) > max(self.axis, 1) else None
                if full and full % 2 == 0 and full > 1:
                    items = list(shapes.items)
                    items[self.axis] = _i(full // 2)
                    args = list(c.args)
                    args[shape_i] = replace(shapes, items=tuple(items))
                    if not self.halved(c.args[0]):  # a slice of a lane's tile is already at the lane
                        args[off_i] = self.shift(c.args[off_i], _i(full // 2))
                    self.stride[target] = _i(full // 2)
                    return [replace(s, value=replace(c, args=tuple(args)), annotation=None)]
                if full and full % 2 and full > 1 and _is(c, "tile.load") and len(c.args) in (3, 4):
                    return [self.odd_load(s, c, full)]
        if _is(c, "tile.reshape", "tile.reinterpret_view") and c.args and isinstance(dst, TileType) \
                and len(dst.shape) > self.axis:
            out = self.view(s, c, dst)
            if out is not None:
                return out
        if any(self.halved(v) for v in walk(c)):
            first = next(v for v in walk(c) if self.halved(v))
            self.stride[target] = self.stride[first.name]
            return [replace(s, annotation=None)]
        return [s]

    def view(self, s: AssignStmt, c: Call, dst: TileType) -> list[Stmt] | None:
        """A reshape or reinterpret_view. Of a lane's tile: the shape it names takes the half on the axis
        (when the axis stays where it is). Of a full tile (a rank-1 load, a Vec parameter): the view is
        taken at full size and each lane slices its half out of it, so the lanes do not both read the
        first half. None: not handled here."""
        full = _const(dst.shape[self.axis])
        if not full or full % 2 or full < 2:
            return None
        half = full // 2
        src = c.args[0]
        if self.halved(src):
            if _is(c, "tile.reshape") and not self.keeps_axis(src, dst):
                return None  # the axis moves to another dimension: not tracked (PTOC-E0681 below)
            if _is(c, "tile.reshape") and len(c.args) > 1:
                c = replace(c, args=(src, self.halve(c.args[1], half)) + c.args[2:])
            else:
                c = replace(c, kwargs=tuple((k, self.halve(v, half) if k == "shape" else v) for k, v in c.kwargs))
            self.stride[s.target.name] = _i(half)
            return [replace(s, value=c, annotation=None)]
        if self.memory(src) != "Vec" or not all(_const(d) for d in dst.shape):
            return None
        whole = Var(fresh_name(s.target.name, self.taken), span=s.target.span)
        shape = ListExpr(tuple(_i(half if k == self.axis else _const(d)) for k, d in enumerate(dst.shape)))
        offsets = ListExpr(tuple(BinOp("*", Var(SB), _i(half)) if k == self.axis else _i(0)
                                 for k in range(len(dst.shape))))
        self.stride[s.target.name] = _i(half)
        cut = AssignStmt(s.target, Call("tile.slice", (whole, shape, offsets), span=c.span), span=s.span)
        return [replace(s, target=whole, annotation=None), cut]

    def odd_load(self, s: AssignStmt, c: Call, full: int) -> AssignStmt:
        """A load whose split extent F is odd: both lanes get the box ceil(F / 2) and start at
        `subblock_idx * box`; the lane's valid extent is min(max(V, start) - start, box) for the load's
        valid extent V (F when not given), so lane 1 holds one row (column) less."""
        box = (full + 1) // 2
        start = BinOp("*", Var(SB), _i(box))
        shapes = c.args[2]
        valid = c.args[3] if len(c.args) > 3 else shapes
        v = valid.items[self.axis] if isinstance(valid, (ListExpr, TupleExpr)) and len(valid.items) > self.axis \
            else _i(full)
        lane_valid = MinMax("min", BinOp("-", MinMax("max", v, start), start), _i(box))
        items = list(valid.items) if isinstance(valid, (ListExpr, TupleExpr)) else list(shapes.items)
        items[self.axis] = lane_valid
        args = (c.args[0], self.shift(c.args[1], _i(box)), self.halve(shapes, box), ListExpr(tuple(items)))
        self.stride[s.target.name] = _i(box)
        return replace(s, value=replace(c, args=args), annotation=None)

    def keeps_axis(self, src: Var, dst: TileType) -> bool:
        """Whether a reshape of a lane's tile keeps the split on the same dimension: the first half of the
        source's axis (row-major, when everything before the axis is 1) is the first half of the
        result's dimension at that index. Shapes it cannot follow keep the axis."""
        t = self.types.get(src.name)
        if not isinstance(t, TileType) or len(t.shape) <= self.axis:
            return True
        dims = [_const(d) for d in t.shape]
        out = [_const(d) for d in dst.shape]
        if None in dims or None in out or any(d != 1 for d in dims[:self.axis]) or dims[self.axis] % 2:
            return True
        inner = 1
        for d in dims[self.axis + 1:]:
            inner *= d
        flat, prefix = dims[self.axis] // 2 * inner, 1
        for k, d in enumerate(out):
            rest = 1
            for e in out[k + 1:]:
                rest *= e
            if prefix == 1 and d % 2 == 0 and d // 2 * rest == flat:
                return k == self.axis
            prefix *= d
        return False

    def halve(self, shape, half: int):
        if not isinstance(shape, (ListExpr, TupleExpr)) or len(shape.items) <= self.axis:
            return shape
        items = list(shape.items)
        items[self.axis] = _i(half)
        return replace(shape, items=tuple(items))

    def shard(self, s: AssignStmt, src: Var) -> AssignStmt:
        t = self.types.get(src.name)
        box = _const(t.shape[self.axis]) if len(t.shape) > self.axis else None
        valid = t.view.valid_shape[self.axis] if t.view is not None and t.view.valid_shape else None
        kwargs = [("split", _i(self.mode))]
        stride = _i((box + 1) // 2) if box is not None else BinOp("//", t.shape[self.axis], _i(2))
        v = _const(valid)
        if box is not None and v is not None and (v + 1) // 2 != (box + 1) // 2 and v > 0 \
                and self.uses.get(s.target.name, 0) > 1:
            stride = _i((v + 1) // 2)
            kwargs.append(("lane_stride", stride))
        self.stride[s.target.name] = stride
        return replace(s, value=Call("tile.aiv_shard", (src,), tuple(kwargs), span=s.value.span), annotation=None)

    def shift(self, offsets, stride):
        if not isinstance(offsets, (ListExpr, TupleExpr)) or len(offsets.items) <= self.axis:
            return offsets
        items = list(offsets.items)
        items[self.axis] = BinOp("+", items[self.axis], BinOp("*", Var(SB), stride))
        return replace(offsets, items=tuple(items))


__all__ = ["LowerAutoVectorSplit"]
