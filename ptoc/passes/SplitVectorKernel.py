"""SplitVectorKernel: give each split vector kernel its two vector lanes.

Purpose
-------
A cube core is paired with two vector cores (sub-blocks, lanes 0 and 1). When a cross-core pipe carries a
split tile (`split=1` UP_DOWN: rows, `split=2` LEFT_RIGHT: columns) each lane receives one half, and the
vector kernel runs once per lane on half-sized tiles, addressing global memory at its lane's half. This
pass turns a vector kernel written at the full shape into that per-lane form, and marks the kernels the
runtime must launch on both lanes (`dual_aiv_dispatch`).

Before::

    @pl.function(type=pl.FunctionType.AIV, attrs={"split": pl.SplitMode.UP_DOWN})
    def main_aiv(self, out: pl.Out[pl.Tensor[[16, 128], pl.FP32]]) -> pl.Tensor[[16, 128], pl.FP32]:
        z: pl.Tile[[16, 128], pl.FP32, pl.Mem.Vec] = pl.tile.tpop_from_aic(split=1)
        r: pl.Tensor[[16, 128], pl.FP32] = pl.tile.store(z, [0, 0], out)

After::

    @pl.function(type=pl.FunctionType.AIV, attrs={"split": pl.SplitMode.UP_DOWN, "dual_aiv_dispatch": True})
    def main_aiv(self, out: ...) -> ...:
        subblock_idx: pl.Scalar[pl.INDEX] = pl.tile.get_subblock_idx()
        z: pl.Tile[[8, 128], pl.FP32, pl.Mem.Vec] = pl.tile.tpop_from_aic(split=1)
        r: pl.Tensor[[16, 128], pl.FP32] = pl.tile.store(z, [0 + subblock_idx * 8, 0], out)

Rules
-----
- The split mode of an AIC or AIV function is its `split` attribute, else the `split=` of its pipe ops
  (`tpush_to_aiv/_aic`, `tpop_from_aic/_aiv`); all must agree (PTOC-E0680 otherwise).
- A split AIV function gets the attributes `split` (the mode) and `dual_aiv_dispatch=True`; an AIC
  function keeps its body and gets `split`.
- A function marked `split_aiv` is already in the per-lane form: only the attributes are stamped.
- Otherwise the split AIV body is halved along the split axis (rows for UP_DOWN, columns for LEFT_RIGHT):
  `subblock_idx = tile.get_subblock_idx()` is the first statement; a popped tile, a Vec `tile.load`
  (whose offset on the axis moves by `subblock_idx * half`) and every tile computed from a halved tile
  whose extent on the axis is the full one take the half extent; a `tile.store` of a halved tile writes at
  `offset + subblock_idx * half`; `tile.set_validshape` of a halved tile whose extent on the axis is the
  full box takes the half.
- On a2a3, an AIV function marked `dual_aiv_dispatch` without a split mode (ExpandMixedKernel marks every
  unsplit vector kernel of a mixed one) runs on both lanes while only lane 0 does the work: after the
  hoisted pipe set-up, `if subblock_idx == 0:` keeps the body, and the `else` branch replays it for lane 1
  with every name suffixed `_lane1`, so that the pipe hand-shakes still happen. Every tile lane 1 computes
  is empty (its type with `pl.TileView(valid_shape=[0, 0])`, pops included); a `tile.load`, `tile.slice`
  or `tile.transpose` becomes a `tile.create` of its result (shape, dtype, memory); `tile.set_validshape`
  sets extents 0, 0; other ops run on the empty operands (and compute nothing); a `tile.store` is dropped
  and its result is the destination tensor itself.
- Functions of other types, and functions without a split mode or marker, are left unchanged.

Deliberate differences from PyPTO
---------------------------------
- A `set_validshape` whose valid extent on the split axis is not the full box keeps its operand and its
  result type on both lanes (PyPTO narrows the result type per lane with min/max of the lane offset,
  which ptoc's type rules would contradict); so does a tile made by `tile.create`/`tile.full` (it is
  replicated, not split).
- The lane-1 names end in `_lane1` (PyPTO's printer numbers them `_1`).
- Errors are diagnostics (PTOC-E0680) instead of exceptions.
"""

from __future__ import annotations

from ptoc.diagnostics import CompileError, Diagnostic
from ptoc.ir import dtypes
from ptoc.ir.nodes import (
    AssignStmt,
    BinOp,
    Call,
    ConstBool,
    ConstInt,
    DictExpr,
    EnumLit,
    EvalStmt,
    Expr,
    ForStmt,
    Function,
    IfStmt,
    ListExpr,
    Program,
    ReturnStmt,
    ScalarType,
    ScopeStmt,
    Stmt,
    StrLit,
    TensorType,
    TileType,
    TupleExpr,
    Var,
    WhileStmt,
    YieldStmt,
)
from ptoc.ir.substitute import substitute
from ptoc.ir.types import as_empty_tile
from ptoc.ir.visitor import replace, walk
from ptoc.passes.common import op_names
from ptoc.passes.manager import Pass

MODES = {"NONE": 0, "UP_DOWN": 1, "LEFT_RIGHT": 2}
PIPE_OPS = ("tile.tpush_to_aiv", "tile.tpush_to_aic", "tile.tpop_from_aic", "tile.tpop_from_aiv")
POPS = ("tile.tpop_from_aic", "tile.tpop_from_aiv")
SETUP_OPS = ("system.reserve_buffer", "system.import_peer_buffer", "system.aic_initialize_pipe",
             "system.aiv_initialize_pipe")
SB = "subblock_idx"


def _i(v: int) -> ConstInt:
    return ConstInt(v, dtypes.INDEX)


def _is(c, *ops: str) -> bool:
    return isinstance(c, Call) and c.kind == "op" and not op_names(c.op).isdisjoint(ops)


def _call_of(s: Stmt):
    if isinstance(s, AssignStmt):
        return s.value
    if isinstance(s, EvalStmt):
        return s.expr
    return None


def _mode_value(e: Expr | None) -> int | None:
    if isinstance(e, EnumLit):
        return MODES.get(e.member)
    if isinstance(e, ConstInt):
        return e.value
    return None


def _attr_dict(f: Function) -> DictExpr | None:
    """The function's attributes (decorator `attrs=` and PyPTO's `pl.func_attr` prologue) as one dict."""
    items = f.attr_items()
    return DictExpr(items, span=f.span) if items else None


def _attr(f: Function, key: str) -> Expr | None:
    d = _attr_dict(f)
    for k, v in (d.items if d else ()):
        if isinstance(k, StrLit) and k.value == key:
            return v
    return None


def _true(e: Expr | None) -> bool:
    return isinstance(e, ConstBool) and e.value


def _with_attrs(f: Function, mode: int, aiv: bool) -> Function:
    d = _attr_dict(f)
    items = [(k, v) for k, v in (d.items if d else ())
             if not (isinstance(k, StrLit) and k.value in ("split", "dual_aiv_dispatch"))]
    if mode:
        items.append((StrLit("split"), EnumLit("SplitMode", next(n for n, c in MODES.items() if c == mode))))
        if aiv:
            items.append((StrLit("dual_aiv_dispatch"), ConstBool(True)))
    elif _true(_attr(f, "dual_aiv_dispatch")):
        items.append((StrLit("dual_aiv_dispatch"), ConstBool(True)))
    if tuple(items) == (d.items if d else ()):
        return f
    return f.with_attr_items(tuple(items))


def _split_mode(f: Function, calls=None) -> int:
    """The function's split mode: its `split` attribute, else its pipe ops' `split=` (all must agree).
    `calls`: the function's calls in walk order (its `NodeIndex`'s), when the caller has them."""
    found: dict[int, object] = {}
    for n in walk(f) if calls is None else calls:
        if _is(n, *PIPE_OPS):
            m = _mode_value(dict(n.kwargs).get("split"))
            if m:
                found.setdefault(m, n.span)
    declared = _mode_value(_attr(f, "split")) or 0
    if len(found) > 1:
        raise CompileError([Diagnostic(
            "PTOC-E0680", f"kernel {f.name!r}: its cross-core pipe ops use different split modes "
            f"({', '.join(sorted(str(m) for m in found))})", list(found.values())[1],
            hint="one kernel has one split mode: give every tpush/tpop of the kernel the same split=")])
    if declared and found and declared not in found:
        raise CompileError([Diagnostic(
            "PTOC-E0680", f"kernel {f.name!r}: its split attribute ({declared}) contradicts the split= of its "
            f"pipe ops ({next(iter(found))})", next(iter(found.values())),
            hint="make the function's split attribute and the pipe ops' split= the same mode")])
    return declared or (next(iter(found)) if found else 0)


class SplitVectorKernel(Pass):
    name = "SplitVectorKernel"
    stage = "layout"
    summary = "halve split vector kernels per lane (subblock_idx), mark dual-lane dispatch"

    def run(self, program: Program, ctx) -> Program:
        arch = getattr(ctx, "arch", "a2a3")
        out = []
        found: list = []
        by_name = {f.name: f for f in program.functions}

        def types(name: str) -> dict:  # the value types of a lane replay's function, and of no other
            # (inferring every function here would be wasted on the many a later pass changes again)
            if not found:
                found.append(self.function_types(program, ctx))
            return found[0](by_name[name])

        for f in program.functions:
            out.append(self._function(f, arch, self.index(f).of(Call), types) if isinstance(f, Function)
                       and f.func_type in ("AIV", "AIC") else f)
        if all(a is b for a, b in zip(out, program.functions)):
            return program
        return replace(program, functions=tuple(out))

    def _function(self, f: Function, arch: str, calls=None, types=lambda name: {}) -> Function:
        if f.func_type not in ("AIV", "AIC"):
            return f
        aiv = f.func_type == "AIV"
        mode = _split_mode(f, calls)
        marked = _true(_attr(f, "split_aiv"))
        dual = _true(_attr(f, "dual_aiv_dispatch"))
        if not mode and not (marked and aiv):
            if aiv and dual and arch == "a2a3" and f.body and not _already_halved(f):
                return replace(f, body=_LaneReplay(f, types(f.name)).run())
            return f
        g = _with_attrs(f, mode, aiv)
        if marked and aiv and not mode:
            items = [(k, v) for k, v in _attr_dict(g).items if not (isinstance(k, StrLit)
                                                                  and k.value == "dual_aiv_dispatch")]
            items.append((StrLit("dual_aiv_dispatch"), ConstBool(True)))
            g = g.with_attr_items(tuple(items))
        if aiv and not marked and g.body and not _already_halved(g):
            g = replace(g, body=_Halver(mode - 1).run(g.body))
        return g


def _already_halved(f: Function) -> bool:
    """The body reads its lane at the top level (`subblock_idx = tile.get_subblock_idx()`, in ptoc's dumps the
    first statement, in PyPTO's after the allocations): this pass, or PyPTO's, halved it or wrote its lane
    replay already (the pass is idempotent, so a dump taken after it compiles like its source)."""
    return any(isinstance(s, AssignStmt) and isinstance(s.value, Call) and s.value.kind == "op"
               and s.value.op in ("tile.get_subblock_idx", "get_subblock_idx") for s in f.body)


# --------------------------------------------------------------------------------------------------
# The per-lane halving of a split AIV body
# --------------------------------------------------------------------------------------------------

class _Halver:
    def __init__(self, axis: int):
        self.axis = axis
        self.full: dict[str, int] = {}  # halved tile -> its full extent on the axis

    def run(self, body: tuple[Stmt, ...]) -> tuple[Stmt, ...]:
        sb = AssignStmt(Var(SB), Call("tile.get_subblock_idx"), ScalarType(dtypes.INDEX))
        return (sb,) + self.block(body)

    def block(self, body):
        return tuple(x for s in body for x in self.stmt(s))

    def stmt(self, s: Stmt) -> list[Stmt]:
        if isinstance(s, (ForStmt, WhileStmt, ScopeStmt)):
            return [replace(s, body=self.block(s.body))]
        if isinstance(s, IfStmt):
            return [replace(s, then_body=self.block(s.then_body), else_body=self.block(s.else_body))]
        c = _call_of(s)
        if _is(c, "tile.store") and len(c.args) >= 3:
            src = c.args[0]
            if isinstance(src, Var) and src.name in self.full:
                c = replace(c, args=(src, self._shift(c.args[1], self.full[src.name] // 2)) + c.args[2:])
                return [replace(s, value=c) if isinstance(s, AssignStmt) else replace(s, expr=c)]
            return [s]
        if not isinstance(s, AssignStmt):
            return [s]
        ann = s.annotation
        if not isinstance(ann, TileType) or len(ann.shape) != 2:
            return [s]
        ext = ann.shape[self.axis]
        if not isinstance(ext, ConstInt) or ext.value % 2:
            return [s]
        full, half = ext.value, ext.value // 2
        if _is(c, *POPS):
            return [self._halved(s, c, full)]
        if _is(c, "tile.load") and ann.memory == "Vec" and len(c.args) >= 3:
            shapes = c.args[2]
            if isinstance(shapes, (ListExpr, TupleExpr)) and _const(shapes.items[self.axis]) == full:
                items = list(shapes.items)
                items[self.axis] = _i(half)
                c = replace(c, args=(c.args[0], self._shift(c.args[1], half), replace(shapes, items=tuple(items)))
                            + c.args[3:])
                return [self._halved(s, c, full)]
            return [s]
        if _is(c, "tile.set_validshape") and isinstance(c.args[0], Var) and c.args[0].name in self.full:
            args = list(c.args)
            if 1 + self.axis < len(args) and _const(args[1 + self.axis]) == full:
                args[1 + self.axis] = _i(half)
            return [self._halved(s, replace(c, args=tuple(args)), full)]
        if any(isinstance(v, Var) and self.full.get(v.name) == full for v in walk(c)):
            return [self._halved(s, c, full)]
        return [s]

    def _halved(self, s: AssignStmt, c: Call, full: int) -> AssignStmt:
        t: TileType = s.annotation
        shape = list(t.shape)
        shape[self.axis] = _i(full // 2)
        view = t.view
        if view is not None and view.valid_shape is not None:
            valid = list(view.valid_shape)
            if _const(valid[self.axis]) == full:
                valid[self.axis] = _i(full // 2)
            view = replace(view, valid_shape=tuple(valid))
        self.full[s.target.name] = full
        return replace(s, value=c, annotation=replace(t, shape=tuple(shape), view=view))

    def _shift(self, offsets: Expr, half: int) -> Expr:
        if not isinstance(offsets, (ListExpr, TupleExpr)) or len(offsets.items) <= self.axis:
            return offsets
        items = list(offsets.items)
        items[self.axis] = BinOp("+", items[self.axis], BinOp("*", Var(SB), _i(half)))
        return replace(offsets, items=tuple(items))


def _const(e) -> int | None:
    return e.value if isinstance(e, ConstInt) else None


# --------------------------------------------------------------------------------------------------
# The lane-1 replay of an unsplit dual-dispatch AIV body (a2a3)
# --------------------------------------------------------------------------------------------------

class _LaneReplay:
    def __init__(self, f: Function, types: dict):
        self.f = f
        self.types = types  # the function's value types (the lane-0 names)
        self.names: dict[str, Expr] = {}

    def run(self) -> tuple[Stmt, ...]:
        body = list(self.f.body)
        head = []
        while body and _is(_call_of(body[0]), *SETUP_OPS):
            head.append(body.pop(0))
        sb = AssignStmt(Var(SB), Call("tile.get_subblock_idx"), ScalarType(dtypes.INDEX))
        lane1 = self.block(tuple(body))
        cond = BinOp("==", Var(SB), _i(0))
        return (sb, *head, IfStmt(cond, tuple(body), lane1))

    def rename(self, v: Var) -> Var:
        new = Var(f"{v.name}_lane1", span=v.span)
        self.names[v.name] = new
        return new

    def empty(self, name: str, ann) -> TileType | None:
        """The lane-1 type of tile value `name`: its type with an all-zero valid shape."""
        t = ann if isinstance(ann, TileType) else self.types.get(name)
        return as_empty_tile(t) if isinstance(t, TileType) else None

    def block(self, body):
        return tuple(x for s in body for x in self.stmt(s))

    def stmt(self, s: Stmt) -> list[Stmt]:
        if isinstance(s, ForStmt):
            args, init = substitute(s.args, self.names), substitute(s.init_values, self.names)
            var = self.rename(s.var)
            its = tuple(self.rename(v) for v in s.iter_args)
            return [replace(s, var=var, iter_args=its, args=args, init_values=init, body=self.block(s.body))]
        if isinstance(s, WhileStmt):
            init = substitute(s.init_values, self.names)
            its = tuple(self.rename(v) for v in s.iter_args)
            cond = substitute(s.cond, self.names)
            return [replace(s, iter_args=its, init_values=init, cond=cond, body=self.block(s.body))]
        if isinstance(s, IfStmt):
            cond = substitute(s.cond, self.names)
            return [replace(s, cond=cond, then_body=self.block(s.then_body), else_body=self.block(s.else_body))]
        if isinstance(s, ScopeStmt):
            return [replace(s, args=substitute(s.args, self.names), body=self.block(s.body))]
        if isinstance(s, YieldStmt):
            values = substitute(s.values, self.names)
            return [replace(s, values=values, targets=tuple(self.rename(t) for t in s.targets),
                            annotation=None if isinstance(s.annotation, TileType) else s.annotation)]
        if isinstance(s, ReturnStmt):
            return [replace(s, values=substitute(s.values, self.names))]
        if isinstance(s, EvalStmt):
            if _is(s.expr, "tile.store"):
                return []  # lane 1 writes nothing
            return [replace(s, expr=self.call(s.expr, None))]
        if not isinstance(s, AssignStmt):
            return [substitute(s, self.names)]
        c = s.value
        if _is(c, "tile.store") and len(c.args) >= 3:
            dst = substitute(c.args[2], self.names)
            new = self.rename(s.target)
            self.names[s.target.name] = dst
            return [AssignStmt(new, dst, s.annotation if isinstance(s.annotation, TensorType) else None,
                               span=s.span)]
        empty = self.empty(s.target.name, s.annotation)
        value = self.call(c, empty)
        if empty is not None:
            ann = empty
        else:
            ann = substitute(s.annotation, self.names) if s.annotation is not None else None
        return [AssignStmt(self.rename(s.target), value, ann, span=s.span)]

    def call(self, c, empty: TileType | None):
        """The lane-1 form of call `c` whose result is `empty` (a tile) or not a tile (None): an op that reads
        global memory or only views a tile (load, slice, transpose) becomes a `tile.create` of the result; a
        `tile.set_validshape` sets zero extents; any other op runs on its replayed (empty) operands."""
        c = substitute(c, self.names)
        if empty is not None and _is(c, "tile.load", "tile.slice", "tile.transpose"):
            if _is(c, "tile.load") and len(c.args) >= 3:
                shape = c.args[2]
            elif _is(c, "tile.slice") and len(c.args) >= 2:
                shape = c.args[1]
            else:
                shape = ListExpr(tuple(empty.shape))
            return Call("tile.create", (shape,), (("dtype", _dtype_lit(empty)),
                                                  ("target_memory", EnumLit("Mem", empty.memory or "Vec"))),
                        span=c.span)
        if _is(c, "tile.set_validshape") and len(c.args) == 3:
            return replace(c, args=(c.args[0], _i(0), _i(0)))
        return c


def _dtype_lit(t: TileType):
    from ptoc.ir.nodes import DTypeLit

    return DTypeLit(t.dtype)


__all__ = ["SplitVectorKernel"]
