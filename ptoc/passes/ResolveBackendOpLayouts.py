"""ResolveBackendOpLayouts: give the vector ops that only work on row-major tiles row-major tiles.

Purpose
-------
Many vector instructions of pto-isa take row-major tiles only: TADD, TEXP, TMULS, ... check
`isRowMajor` on every operand at compile time, and PTOAS rejects TEXPANDS (`tile.full`) into a
col-major Vec tile on A2/A3. A Vec tile of shape `[N, 1]` is col-major by default (the reductions
`row_max`/`row_sum` produce it, pto-format.md "Implicit layout per memory space"), so `m = pl.tile.maximum(m_i,
m_cur)` on two `[64, 1]` columns is valid IR that no NPU compiler accepts. `ptoc.target.facts.
ROW_MAJOR_OPERANDS` lists the ops and which operands (and whether the result) must be row-major.

This pass rewrites every such op in an InCore/AIC/AIV function:

- a col-major `[N, 1]` operand is reshaped to `[1, N]` (`tile.reshape`: the N elements are
  contiguous either way, so the reshape is a view, `pto.treshape`, and moves no data);
- any other non-row-major operand is copied to a row-major tile of its memory space (`tile.move`
  with `blayout=row_major, slayout=none_box`);
- when the result must be row-major and its type is not, the op computes a row-major result
  `<name>_rm` and the original name is bound to its reshape (column vectors) or to a `tile.move` back
  to the original layout; `tile.full` of a column gets the shape `[1, N]` for its row-major result.

The pass needs no decided memory spaces: the ops it repairs run on the vector unit, so their operands
are Vec tiles (or tiles whose space is still open, which InferTileMemorySpace makes Vec); it runs on its
own (`ptoc passes --pipeline ResolveBackendOpLayouts`) as well as after InferTileMemorySpace.

Every name keeps its type, so loops, yields and the later passes see the program they saw before.
New names are `<result>_rm_a<i>` for operand i and `<result>_rm` for the row-major result (fresh
when taken).

Before (a2a3)::

    m0: pl.Tile[[64, 1], pl.FP32, pl.Mem.Vec] = pl.tile.full([64, 1], dtype=pl.FP32, value=0.0)
    s: pl.Tile[[64, 1], pl.FP32, pl.Mem.Vec] = pl.tile.add(m0, r)

After::

    m0_rm: pl.Tile[[1, 64], pl.FP32, pl.Mem.Vec] = pl.tile.full([1, 64], dtype=pl.FP32, value=0.0)
    m0: pl.Tile[[64, 1], pl.FP32, pl.Mem.Vec] = pl.tile.reshape(m0_rm, [64, 1])
    s_rm_a0: pl.Tile[[1, 64], pl.FP32, pl.Mem.Vec] = pl.tile.reshape(m0, [1, 64])
    s_rm_a1: pl.Tile[[1, 64], pl.FP32, pl.Mem.Vec] = pl.tile.reshape(r, [1, 64])
    s_rm: pl.Tile[[1, 64], pl.FP32, pl.Mem.Vec] = pl.tile.add(s_rm_a0, s_rm_a1)
    s: pl.Tile[[64, 1], pl.FP32, pl.Mem.Vec] = pl.tile.reshape(s_rm, [64, 1])

Where ptoc differs from PyPTO's pass of the same name: PyPTO's `tile.full`/`tile.create` already give
`[N, 1]` tiles an explicit row-major view, so a yield can merge a row-major and a col-major column;
ptoc keeps the one implicit layout per shape and repairs `tile.full` here instead. Reading PyPTO's
dumps, the pass first drops `blayout=row_major` from every Vec `[N, 1]` annotation (the same N
contiguous elements), and when an op's result is a column and one operand is a col-major column, every
`[N, 1]` operand becomes `[1, N]`, a row-major one too: PyPTO reshapes only the col-major operands
(`IsColumnVectorColMajor` in src/ir/transforms/resolve_backend_op_layouts_pass.cpp) and leaves
`pl.tile.maximum(m_i, m_cur_row)` with a `[N, 1]` and a `[1, N]` operand, which ptoc's types read as a
broadcast to `[N, N]` (so ptoc rejects PyPTO's dumps after this pass with PTOC-E0105). Names use the
`_rm` suffixes above rather than PyPTO's `__rm_a<i>_tmp_v<k>`.
"""

from __future__ import annotations

from ptoc.diagnostics import CompileError, InternalError
from ptoc.ir.names import fresh_name
from ptoc.ir.nodes import (
    AssignStmt,
    Call,
    ConstInt,
    EnumLit,
    EvalStmt,
    ForStmt,
    Function,
    IfStmt,
    ListExpr,
    Program,
    ScopeStmt,
    Stmt,
    TileType,
    Var,
    WhileStmt,
    YieldStmt,
)
from ptoc.ir.types import effective_tile_view, normalize_tile_view
from ptoc.ir.verifier import iter_nodes
from ptoc.ir.visitor import rebuild_bodies, replace
from ptoc.passes.common import op_names
from ptoc.passes.manager import Pass
from ptoc.passes.properties import KERNEL_TYPES
from ptoc.target.facts import ROW_MAJOR_OPERANDS
from ptoc.ops.registry import resolve



class ResolveBackendOpLayouts(Pass):
    name = "ResolveBackendOpLayouts"
    stage = "layout"
    summary = "reshape or move the operands and results of row-major-only vector ops into row-major tiles"
    requires = frozenset({"tile_ops"})
    produces: frozenset[str] = frozenset()

    def run(self, program: Program, ctx) -> Program:
        types = None
        funcs = []
        changed = False
        for f in program.functions:
            # the operator census of the function (its node index, which the passes before built): no
            # operator call, nothing to do; none that can name a row-major-only op, nothing to repair
            ops = self.index(f).ops() if f.func_type in KERNEL_TYPES else ()
            if not ops:
                funcs.append(f)
                continue
            g = _implicit_columns(f)
            if g is not f:
                types = None
                program = replace(program, functions=tuple(h if h is not f else g for h in program.functions))
                f = g
                changed = True
            if not any(op_names(op) & _CONSTRAINED for op in ops):
                funcs.append(f)
                continue
            if types is None:
                types = self.types(program, ctx)
            nf = _Rewriter(f, types.get(f.name, {}), ctx).run()
            changed |= nf is not f
            funcs.append(nf)
        return replace(program, functions=tuple(funcs)) if changed else program


def _implicit_columns(f: Function) -> Function:
    """Drop `blayout=row_major` from the annotation of every Vec `[N, 1]` tile (PyPTO's front end writes it
    on `tile.full` and on elementwise results): a column keeps ptoc's one implicit layout, col-major, whose
    N elements sit where the row-major column's do, and the ops below repair it like any other column."""

    def fix(t):
        if (not isinstance(t, TileType) or t.view is None or t.view.blayout != "row_major"
                or t.memory not in (None, "Vec") or not _column_shape(t) or
                (isinstance(t.shape[0], ConstInt) and t.shape[0].value == 1)):
            return t
        return replace(t, view=normalize_tile_view(t.shape, t.memory, replace(t.view, blayout=None)))

    def block(body: tuple[Stmt, ...]) -> tuple[Stmt, ...]:
        out = []
        for s in body:
            if isinstance(s, (AssignStmt, YieldStmt)) and s.annotation is not None:
                ann = fix(s.annotation)
                if ann is not s.annotation:
                    s = replace(s, annotation=ann)
            elif isinstance(s, (ForStmt, WhileStmt, ScopeStmt, IfStmt)):
                s = rebuild_bodies(s, block)
            out.append(s)
        return body if all(a is b for a, b in zip(out, body)) else tuple(out)

    body = block(f.body)
    return f if body is f.body else replace(f, body=body)


_CONSTRAINED = frozenset(ROW_MAJOR_OPERANDS)  # the ops whose calls `_Rewriter` repairs


def _one():
    from ptoc.ir.dtypes import INDEX

    return ConstInt(1, INDEX)


def _row_major(t: TileType) -> bool:
    return effective_tile_view(t)["blayout"] == "row_major"


def _column(t: TileType) -> bool:
    """A col-major `[N, 1]` tile: the same bytes as the row-major `[1, N]` tile."""
    return (len(t.shape) == 2 and isinstance(t.shape[1], ConstInt) and t.shape[1].value == 1
            and effective_tile_view(t)["blayout"] == "col_major")


def _column_shape(t: TileType) -> bool:
    """A `[N, 1]` tile of any layout."""
    return len(t.shape) == 2 and isinstance(t.shape[1], ConstInt) and t.shape[1].value == 1


class _Rewriter:
    def __init__(self, f: Function, types: dict, ctx):
        self.f = f
        self.types = types
        self.ctx = ctx
        self._names: set[str] | None = None

    def run(self) -> Function:
        body = self.block(self.f.body)
        return self.f if body is self.f.body else replace(self.f, body=body)

    def block(self, body: tuple[Stmt, ...]) -> tuple[Stmt, ...]:
        out: list[Stmt] = []
        changed = False
        for s in body:
            new = self.stmt(s)
            if len(new) != 1 or new[0] is not s:
                changed = True
            out.extend(new)
        return tuple(out) if changed else body

    def stmt(self, s: Stmt) -> list[Stmt]:
        if isinstance(s, AssignStmt) and isinstance(s.value, Call) and s.value.kind == "op":
            pre, call = self.hoist(s, s.value, s.target.name)
            s = s if call is s.value else replace(s, value=call)
            return pre + self.repair(s, call, s.target)
        if isinstance(s, EvalStmt) and isinstance(s.expr, Call) and s.expr.kind == "op":
            pre, call = self.hoist(s, s.expr, "layout_fix")
            s = s if call is s.expr else replace(s, expr=call)
            return pre + self.repair(s, call, None)
        if isinstance(s, (ForStmt, WhileStmt, ScopeStmt, IfStmt)):
            return [rebuild_bodies(s, self.block)]
        return [s]

    # ------------------------------------------------------------------ one op
    def constrained(self, call: Call) -> bool:
        """Whether `call` or an op call nested in its operands is one the pass may rewrite."""
        return self.op_name(call) in ROW_MAJOR_OPERANDS or any(
            isinstance(a, Call) and a.kind == "op" and self.constrained(a) for a in call.args)

    def hoist(self, s: Stmt, call: Call, base: str) -> tuple[list[Stmt], Call]:
        """Name the nested op calls that need a repair (`<base>_a<i>`), repaired first, in operand order."""
        pre: list[Stmt] = []
        args = list(call.args)
        annotate = isinstance(s, AssignStmt) and s.annotation is not None
        for i, a in enumerate(call.args):
            if not (isinstance(a, Call) and a.kind == "op" and self.constrained(a)):
                continue
            name = self.fresh(f"{base}_a{i}")
            inner = self.assign(name, a, annotate, s)
            pre.extend(self.stmt(inner))
            args[i] = Var(name, span=a.span)
        return (pre, replace(call, args=tuple(args))) if pre else (pre, call)

    def op_name(self, call: Call) -> str | None:

        op, _ = resolve(call, [self.arg_type(a) for a in call.args])
        return op.name if op is not None else None

    def repair(self, s: Stmt, call: Call, target: Var | None) -> list[Stmt]:
        name = self.op_name(call)
        spec = ROW_MAJOR_OPERANDS.get(name or "")
        if spec is None:
            return [s]
        inputs, output = spec
        result_t = self.types.get(target.name) if target is not None else None
        if name == "tile.full" and isinstance(result_t, TileType) and result_t.memory == "Mat":
            return [s]  # TEXPANDS fills a Mat tile's whole buffer with the one value: any layout holds it
        fix_out = output and isinstance(result_t, TileType) and not _row_major(result_t)
        # A column result computed from a col-major column: every `[N, 1]` operand and the result become
        # `[1, N]`, row-major `[N, 1]` ones too (a dump of PyPTO's declares some columns row-major), so the
        # op sees one shape; a `[N, 1]` row-major tile holds the same N contiguous elements.
        columns = (output and isinstance(result_t, TileType) and _column_shape(result_t) and any(
            _column(self.arg_type(call.args[i])) for i in inputs
            if i < len(call.args) and isinstance(call.args[i], Var) and isinstance(self.arg_type(call.args[i]), TileType)))
        fix_out = fix_out or columns
        base = target.name if target is not None else "layout_fix"
        out: list[Stmt] = []
        args = list(call.args)
        annotate = isinstance(s, AssignStmt) and s.annotation is not None
        for i in inputs:
            if i >= len(args) or not isinstance(args[i], Var):
                continue
            t = self.arg_type(args[i])
            as_row = isinstance(t, TileType) and (_column(t) or (columns and _column_shape(t)))
            if not isinstance(t, TileType) or (_row_major(t) and not as_row):
                continue
            fixed = self.fresh(f"{base}_rm_a{i}")
            value = (_reshape(args[i], (_one(), t.shape[0]), call.span) if as_row
                     else _move(args[i], t.memory, "row_major", "none_box", call.span))
            out.append(self.assign(fixed, value, annotate, s))
            args[i] = Var(fixed, span=args[i].span)
        new_call = replace(call, args=tuple(args))
        if not fix_out:
            if not out:
                return [s]
            if isinstance(s, AssignStmt):
                return out + [replace(s, value=new_call)]
            return out + [replace(s, expr=new_call)]
        assert isinstance(s, AssignStmt) and isinstance(result_t, TileType) and target is not None
        if name == "tile.full" and _column(result_t):
            new_call = _with_shape(new_call, (_one(), result_t.shape[0]))
        rm = self.fresh(f"{base}_rm")
        out.append(self.assign(rm, new_call, annotate, s))
        rm_t = self.types[rm]
        if not _row_major(rm_t):
            raise InternalError(f"ResolveBackendOpLayouts: {name} still gives a {effective_tile_view(rm_t)['blayout']} "
                                f"result for {target.name} at {call.span}")
        if _column(result_t) or columns:
            back = _reshape(Var(rm, span=target.span), tuple(result_t.shape), call.span)
        else:
            eff = effective_tile_view(result_t)
            back = _move(Var(rm, span=target.span), result_t.memory, eff["blayout"], eff["slayout"], call.span)
        out.append(replace(s, value=back))
        return out

    def assign(self, name: str, value: Call, annotate: bool, s: Stmt) -> AssignStmt:
        t = self.infer(value)
        self.types[name] = t
        return AssignStmt(Var(name, span=s.span), value, t if annotate else None, span=s.span)

    def infer(self, call: Call) -> TileType:
        t = self.infer_any(call)
        if not isinstance(t, TileType):
            raise InternalError(f"ResolveBackendOpLayouts: no tile type for {call.op} at {call.span}")
        return t

    def arg_type(self, e):
        """The type of an operand: a name's, or a nested op call's by its type rule."""
        if isinstance(e, Var):
            return self.types.get(e.name)
        if isinstance(e, Call) and e.kind == "op":
            return self.infer_any(e)
        return None

    def infer_any(self, call: Call):
        from ptoc.ops.registry import infer_call_type

        t, diags = infer_call_type(call, [self.arg_type(a) for a in call.args],
                                   {k: self.arg_type(v) for k, v in call.kwargs}, self.ctx)
        if diags:
            raise CompileError(diags)
        return t

    def fresh(self, base: str) -> str:
        if self._names is None:
            self._names = {p.name for p in self.f.params} | {n.name for n in iter_nodes(self.f) if isinstance(n, Var)}
        return fresh_name(base, self._names)


def _reshape(src: Var, shape: tuple, span) -> Call:
    return Call("tile.reshape", (src, ListExpr(tuple(shape), span=span)), span=span)


def _move(src: Var, memory: str | None, blayout: str, slayout: str, span) -> Call:
    kwargs = (("target_memory", EnumLit("Mem", memory or "Vec")), ("blayout", EnumLit("TileLayout", blayout)),
              ("slayout", EnumLit("TileLayout", slayout)))
    return Call("tile.move", (src,), kwargs, span=span)


def _with_shape(call: Call, shape: tuple) -> Call:
    """`tile.full` with another shape (positional or keyword)."""
    lst = ListExpr(tuple(shape), span=call.span)
    if call.kwarg("shape") is not None:
        return replace(call, kwargs=tuple((k, lst if k == "shape" else v) for k, v in call.kwargs))
    return replace(call, args=(lst,) + call.args[1:])
