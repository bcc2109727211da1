"""LowerCompositeOps: tile ops the vector unit has no instruction for become chains of ops it has.

Purpose
-------
`pl.tile.sin` and `pl.tile.cos` have no PTO instruction. This pass rewrites each into elementwise
arithmetic on the same tile: a range reduction of x by multiples of pi (Cody-Waite: pi split into five
parts of decreasing size, so that k * part is exact in FP32 and x - k*pi keeps its precision), a sign
(-1)^k computed from k with two casts, and an odd polynomial in the reduced argument t (Horner form):

    sin(x) = (-1)^k * t * (1 + t^2*(r3 + t^2*(r2 + t^2*(r1 + t^2*r0))))    k = round(x / pi), t = x - k*pi

cos(x) is sin(x + pi/2), with k = rint(x / pi + 1/2) and the pi/2 shift folded into the reduction (its
rounding error is added back as a last small constant).

Before::

    y: pl.Tile[[16, 16], pl.FP32, pl.Mem.Vec] = pl.tile.sin(x)

After (abridged)::

    y_pi_inv_x = pl.tile.muls(x, 0.31830987334251404)
    y_k_i = pl.tile.cast(y_pi_inv_x, target_type=pl.INT32, mode="round")
    y_k_f = pl.tile.cast(y_k_i, target_type=pl.FP32, mode="none")
    ...                                       # t = x - k*pi in five steps, the sign, the polynomial
    y = pl.tile.mul(y_sign, y_t_p)

The constants and the order of the operations are PyPTO's (src/ir/transforms/lower_composite_ops_pass.cpp),
so the result is the same program PyPTO's pass produces, up to the names of the temporaries.

Rules
-----
- Every `tile.sin` / `tile.cos` assigned to a name (in any function, at any depth) is rewritten; the
  final op keeps the name. Other statements are untouched; a program without these ops is returned
  unchanged (the same object).
- FP32 tiles only (the constants are FP32's); the op's type rule already rejects integer tiles, and a
  tile of another float type is reported as PTOC-E0741 (cast it to FP32 first).

Deliberate differences from PyPTO: PyPTO's pass also expands the distributed collectives
(`pld.tensor.allreduce`, broadcast, allgather, ...) into mesh / ring schedules of puts, gets and
signal waits; ptoc does not lower those yet (its code generator reports them). Temporaries are named
`<result>_<step>` instead of PyPTO's `<result>__<step>_tmp_v<n>`.
"""

from __future__ import annotations

from dataclasses import replace

from ptoc.context import CompileContext
from ptoc.diagnostics import CompileError, Diagnostic
from ptoc.ir import dtypes
from ptoc.ir.names import fresh_name
from ptoc.ir.nodes import (
    AssignStmt,
    Call,
    ConstFloat,
    DTypeLit,
    Expr,
    ForStmt,
    Function,
    IfStmt,
    Program,
    ScopeStmt,
    Stmt,
    StrLit,
    TileType,
    Var,
    WhileStmt,
)
from ptoc.ir.verifier import NodeIndex
from ptoc.ir.visitor import walk
from ptoc.passes.manager import Pass, property_check

COMPOSITE = ("tile.sin", "tile.cos")

# FP32 constants (as PyPTO's pass writes them)
INV_PI = 0.31830987334251404
PI_PARTS = (3.140625, 0.0009670257568359375, 6.2771141529083252e-07, 1.2164491636212915e-10,
            -1.0290622927356871e-13)
HALF_PI = 1.5707963705062866  # FP32 pi/2 (cos: added after the second reduction step)
HALF_PI_ERR = -4.3711388286737929e-08  # pi/2 - FP32(pi/2): added back at the end of cos's reduction
POLY = (2.6049265215988271e-06, -0.00019808944489341229, 0.0083330497145652771, -0.16666658222675323)


def _f(v: float) -> ConstFloat:
    return ConstFloat(v, dtypes.FP32)


class _Lowering:
    def __init__(self, f: Function, program: Program, ctx: CompileContext, types: dict):
        self.ctx = ctx
        self.types = dict(types)
        self.names = {p.name for p in f.params} | {d.name for d in program.dynamic_dims}
        self.names |= {n.name for n in walk(f) if n.__class__ is Var}

    def body(self, stmts: tuple[Stmt, ...]) -> tuple[Stmt, ...]:
        out: list[Stmt] = []
        for s in stmts:
            cls = s.__class__
            if cls is AssignStmt and isinstance(s.value, Call) and s.value.kind == "op" and s.value.op in COMPOSITE:
                self.expand(s, out)
            elif cls is ForStmt or cls is WhileStmt or cls is ScopeStmt:
                out.append(replace(s, body=self.body(s.body)))
            elif cls is IfStmt:
                out.append(replace(s, then_body=self.body(s.then_body), else_body=self.body(s.else_body)))
            else:
                out.append(s)
        return tuple(out)

    def expand(self, s: AssignStmt, out: list[Stmt]) -> None:
        call: Call = s.value  # type: ignore[assignment]
        x = call.args[0] if call.args else call.kwarg("input")
        t = self.types.get(x.name) if isinstance(x, Var) else None
        if not isinstance(t, TileType) or t.dtype != dtypes.FP32:
            got = t.dtype.name if isinstance(t, TileType) else "a non-tile value"
            raise CompileError([Diagnostic(
                "PTOC-E0741", f"pl.{call.op} is lowered for FP32 tiles only, got {got}", call.span,
                f"cast the operand to FP32 with pl.tile.cast before pl.{call.op}")])
        target = s.target.name
        span = s.span

        def op(step: str | None, name: str, *args: Expr, **kw: Expr) -> Var:
            v = Var(target if step is None else fresh_name(f"{target}_{step}", self.names), span=span)
            c = Call(f"tile.{name}", tuple(args), tuple(kw.items()), span=span)
            ty = self.type_of(c, s)
            self.types[v.name] = ty
            out.append(AssignStmt(v, c, ty, span=span))
            return v

        def cast(step: str, v: Var, dt: dtypes.DType, mode: str) -> Var:
            return op(step, "cast", v, target_type=DTypeLit(dt), mode=StrLit(mode))

        cos = call.op == "tile.cos"
        scaled = op("pi_inv_x", "muls", x, _f(INV_PI))
        if cos:
            k_i = cast("k_i", op("k_pre", "adds", scaled, _f(0.5)), dtypes.INT32, "rint")
        else:
            k_i = cast("k_i", scaled, dtypes.INT32, "round")
        k = cast("k_f", k_i, dtypes.FP32, "none")
        r: Var = x  # type: ignore[assignment]
        for i, part in enumerate(PI_PARTS):
            r = op(f"t{i}", "sub", r, op(f"k_pi_c{i}", "muls", k, _f(part)))
            if cos and i == 1:
                r = op("t1h", "adds", r, _f(HALF_PI))
        if cos:
            r = op("t4t", "adds", r, _f(HALF_PI_ERR))
        # (-1)^k = 4*floor(k/2) - 2k + 1
        half = cast("floor_hk_f", cast("floor_hk_i", op("half_k", "muls", k, _f(0.5)), dtypes.INT32, "floor"),
                    dtypes.FP32, "none")
        sign = op("sign", "adds", op("sign_pre", "add", op("floor_x4", "muls", half, _f(4.0)),
                                     op("neg2_k", "muls", k, _f(-2.0))), _f(1.0))
        sq = op("t2sq", "mul", r, r)
        p = op("p_r0", "muls", sq, _f(POLY[0]))
        for i, c in enumerate(POLY[1:], start=1):
            p = op(f"p_r{i}", "adds", p, _f(c))
            p = op(f"p_t2_r{i}", "mul", p, sq)
        p = op("p_one", "adds", p, _f(1.0))
        op(None, "mul", sign, op("t_p", "mul", r, p))

    def type_of(self, c: Call, at: Stmt):
        from ptoc.ops.registry import infer_call_type
        from ptoc.passes.common import expr_type

        t, diags = infer_call_type(c, [expr_type(a, self.types) for a in c.args],
                                   {k: expr_type(v, self.types) for k, v in c.kwargs}, self.ctx)
        if diags:
            raise CompileError([replace(d, span=at.span) for d in diags])
        return t


def _has_composite(f: Function, cache=None) -> bool:
    return NodeIndex.get(f, cache).has_op(*COMPOSITE)


@property_check("composites_lowered")
def _composites_lowered(program: Program, ctx: CompileContext, cache=None) -> list[str]:
    """No tile.sin / tile.cos is left: each is a chain of ops the vector unit has."""
    return [f"{f.name}: pl.{n.op} at line {n.span.line}" for f in program.functions
            if NodeIndex.get(f, cache).has_op(*COMPOSITE)
            for n in NodeIndex.get(f, cache).of(Call) if n.kind == "op" and n.op in COMPOSITE]


class LowerCompositeOps(Pass):
    name = "LowerCompositeOps"
    stage = "tile"
    summary = "tile.sin / tile.cos -> range reduction, sign and polynomial in elementwise tile ops"
    requires = frozenset({"tile_ops"})
    produces = frozenset({"composites_lowered"})

    def applies(self, program: Program, ctx: CompileContext) -> bool:
        return any(_has_composite(f, self.cache) for f in program.functions)

    def run(self, program: Program, ctx: CompileContext) -> Program:
        funcs = list(program.functions)
        types = None
        for i, f in enumerate(funcs):
            if not _has_composite(f, self.cache):
                continue
            if types is None:
                types = self.types(program, ctx)
            funcs[i] = replace(f, body=_Lowering(f, program, ctx, types[f.name]).body(f.body))
        if types is None:
            return program
        return replace(program, functions=tuple(funcs))


__all__ = ["LowerCompositeOps"]
