"""LegalizeTileCast: split every tile.cast the target cannot do in one TCVT into a chain of native casts.

Purpose
-------
pto-isa's TCVT converts only certain (source, destination) dtype pairs, and the set differs between
A2/A3 and A5 (`ptoc/target/casts.py` holds both tables and where they come from). A `tile.cast`
whose pair is native stays as it is. Any other cast becomes the shortest chain of native casts:
a breadth-first search over the target's native pairs; among equally short chains the one with the
highest-precision intermediates wins (an intermediate that holds the source exactly first, then the
one with more significant bits). Each intermediate is a new SSA tile named `<result>_cvt<N>`
(N = 1, 2, ...), annotated when the original statement was. Every step keeps the original call's
other arguments, in particular the rounding `mode` and any `attrs`.

Before (a2a3, where FP32 -> INT8 is not one TCVT)::

    q: pl.Tile[[64, 256], pl.INT8, pl.Mem.Vec] = pl.tile.cast(x, target_type=pl.INT8, mode="round")

After::

    q_cvt1: pl.Tile[[64, 256], pl.FP16, pl.Mem.Vec] = pl.tile.cast(x, target_type=pl.FP16, mode="round")
    q: pl.Tile[[64, 256], pl.INT8, pl.Mem.Vec] = pl.tile.cast(q_cvt1, target_type=pl.INT8, mode="round")

Rules
-----
- A native cast, and a cast to the source's own dtype, are left untouched; so the pass is idempotent.
- Packed FP4 (FP4-2, FP4-4): on A5 the only conversions touching FP4E2M1X2 / FP4E1M2X2 are
  BF16 <-> packed, so other FP4 casts chain through BF16 (the packed axis contracts or expands at
  that step, as the type rule of tile.cast says). On a target with no packed-FP4 conversion any FP4
  cast is rejected (PTOC-E0321, rule FP4-3).
- A cast with no chain at all is a user error (PTOC-E0320) naming the source dtype, the target dtype
  and the arch, with the dtypes the source does convert to.
- Only statement-level casts (`r = pl.tile.cast(...)`, also written `pl.cast`) of a tile whose type
  is known are rewritten; the printer writes every call as its own statement.
"""

from __future__ import annotations

from dataclasses import replace

from ptoc.ir.visitor import rebuild_bodies
from ptoc.ir.names import fresh_name
from ptoc.diagnostics import CompileError, Diagnostic, InternalError
from ptoc.ir import dtypes
from ptoc.ir.nodes import (
    AssignStmt,
    Call,
    DTypeLit,
    ForStmt,
    Function,
    IfStmt,
    Program,
    ScopeStmt,
    Stmt,
    TileType,
    Var,
    WhileStmt,
)
from ptoc.ir.verifier import NodeIndex, iter_nodes
from ptoc.passes.manager import Pass
from ptoc.target import casts


class LegalizeTileCast(Pass):
    name = "LegalizeTileCast"
    stage = "layout"
    summary = "split tile.cast into the shortest chain of casts the target's TCVT supports"
    requires = frozenset({"tile_ops"})
    produces: frozenset[str] = frozenset()

    def run(self, program: Program, ctx) -> Program:
        arch = ctx.arch
        types = None
        funcs = []
        changed = False
        for f in program.functions:
            if not _has_cast(f, self.cache):
                funcs.append(f)
                continue
            if types is None:
                types = self.types(program, ctx)
            nf = _Rewriter(f, types.get(f.name, {}), arch, ctx).run()
            changed |= nf is not f
            funcs.append(nf)
        return replace(program, functions=tuple(funcs)) if changed else program


def _has_cast(f: Function, cache=None) -> bool:
    return any(n.kind == "op" and n.op in ("tile.cast", "cast") for n in NodeIndex.get(f, cache).of(Call))


class _Rewriter:
    def __init__(self, f: Function, types: dict, arch: str, ctx):
        self.f = f
        self.types = types
        self.arch = arch
        self.ctx = ctx
        self._names: set[str] | None = None  # every name in f: computed on the first fresh name

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
        if isinstance(s, AssignStmt) and isinstance(s.value, Call):
            return self.cast(s)
        if isinstance(s, (ForStmt, WhileStmt, ScopeStmt, IfStmt)):
            return [rebuild_bodies(s, self.block)]
        return [s]

    # ------------------------------------------------------------------ one cast
    def cast(self, s: AssignStmt) -> list[Stmt]:
        call = s.value
        assert isinstance(call, Call)
        if call.kind != "op" or call.op not in ("tile.cast", "cast") or not call.args:
            return [s]
        src_expr = call.args[0]
        src_t = self.types.get(src_expr.name) if isinstance(src_expr, Var) else None
        dst = _target_dtype(call)
        if not isinstance(src_t, TileType) or dst is None:
            return [s]
        src = src_t.dtype.name
        if src == dst.name or casts.is_native(self.arch, src, dst.name):
            return [s]
        if (src in casts.PACKED_FP4 or dst.name in casts.PACKED_FP4) and not casts.converts_packed_fp4(self.arch):
            packed = src if src in casts.PACKED_FP4 else dst.name
            raise CompileError([Diagnostic(
                "PTOC-E0321",
                f"tile.cast from {src} to {dst.name}: packed FP4 ({packed}) is converted on Ascend950 (a5) "
                f"only; the target is {self.arch}", call.span,
                hint="compile with --arch a5, or keep the data in BF16 on this target", rule="FP4-3")])
        chain = casts.cast_chain(self.arch, src, dst.name)
        if chain is None:
            reach = casts.targets_of(self.arch, src)
            hint = (f"on {self.arch}, {src} converts natively to {', '.join(reach)}; pick a target dtype reachable "
                    "from it" if reach else f"{src} has no native conversion on {self.arch}")
            raise CompileError([Diagnostic(
                "PTOC-E0320",
                f"tile.cast from {src} to {dst.name} is not possible on {self.arch}: no chain of native TCVT "
                "conversions connects the two dtypes", call.span, hint=hint)])
        out: list[Stmt] = []
        cur_expr, cur_t = src_expr, src_t
        for i, mid in enumerate(chain[1:-1], start=1):
            name = self.fresh(f"{s.target.name}_cvt{i}")
            step = _retarget(call, cur_expr, dtypes.BY_NAME[mid])
            step_t = self.infer(step, cur_t)
            out.append(AssignStmt(Var(name, span=s.target.span), step,
                                  step_t if s.annotation is not None else None, span=s.span))
            cur_expr, cur_t = Var(name, span=src_expr.span), step_t
        out.append(replace(s, value=_retarget(call, cur_expr, dst)))
        return out

    def fresh(self, base: str) -> str:
        if self._names is None:
            self._names = {p.name for p in self.f.params} | {n.name for n in iter_nodes(self.f) if isinstance(n, Var)}
        return fresh_name(base, self._names)

    def infer(self, step: Call, src_t: TileType) -> TileType:
        """The type of one chain step, by the tile.cast type rule (packed-FP4 steps change the shape)."""
        from ptoc.ops.registry import infer_call_type

        arg_types = [src_t] + [None] * (len(step.args) - 1)
        t, diags = infer_call_type(step, arg_types, {k: None for k, _ in step.kwargs}, self.ctx)
        if diags:
            raise CompileError(diags)
        if not isinstance(t, TileType):
            raise InternalError(f"LegalizeTileCast: no tile type for the chain step {step.op} at {step.span}")
        return t


def _target_dtype(call: Call) -> dtypes.DType | None:
    e = call.kwarg("target_type")
    if e is None and len(call.args) >= 2:
        e = call.args[1]
    return e.dtype if isinstance(e, DTypeLit) else None


def _retarget(call: Call, src, dt: dtypes.DType) -> Call:
    """The same call (op spelling, mode, attrs) converting `src` into `dt`."""
    lit = DTypeLit(dt)
    args = (src,) + call.args[1:]
    if call.kwarg("target_type") is None and len(args) >= 2:
        args = (src, lit) + args[2:]
    kwargs = tuple((k, lit if k == "target_type" else v) for k, v in call.kwargs)
    return replace(call, args=args, kwargs=kwargs)
