"""StampTfreeSplit: every cross-core slot release names the split mode and pipe of the pop it releases.

Purpose
-------
A `pl.system.tfree_to_aic(t)` / `tfree_to_aiv(t)` gives back the pipe slot `t` was popped from. The split
mode (`split=`: 0 none, 1 UP_DOWN, 2 LEFT_RIGHT) and the pipe (`id=`) of that slot are written on the pop
(`t = pl.tile.tpop_from_aic(split=..., id=...)`), not on the free. This pass copies them onto the free, so
the free states on its own which pipe and which split it releases, and a later pass that clones or moves
pops and frees (SkewCrossCorePipeline, LowerPipelineLoops) carries them along.

Rules (PyPTO's StampTfreeSplit)
-----
- Every function. A free's tile argument must be the value of a pop earlier in the same function:
  `tfree_to_aic` of a `tpop_from_aic` result, `tfree_to_aiv` of a `tpop_from_aiv` result; anything else is
  PTOC-E0720.
- The free gets `split=<the pop's split, 0 when the pop has none>`, then `id=<the pop's id>` when the pop
  has one. A free that already has `id=` keeps it when it equals the pop's id (0 when the pop has none);
  a different id is PTOC-E0721. Any `split=` already on the free is replaced by the pop's.
- A function with no free is returned unchanged.

Where ptoc differs from PyPTO: none in the result. PyPTO raises a plain error for the two malformed cases;
ptoc reports them as diagnostics with a location and a hint. ptoc's `.pto` emitter also reads a free's
split from its pop when the free has none, so the emitted code does not change.
"""

from __future__ import annotations

from ptoc.diagnostics import CompileError, Diagnostic
from ptoc.ir.dtypes import INDEX
from ptoc.ir.nodes import AssignStmt, Call, ConstInt, EvalStmt, Expr, Program, Stmt, Var
from ptoc.ir.visitor import rebuild_bodies, replace
from ptoc.passes.common import statements
from ptoc.passes.manager import Pass

POPS = ("tpop_from_aic", "tpop_from_aiv")
FREES = {"tfree_to_aic": "tpop_from_aic", "tfree_to_aiv": "tpop_from_aiv"}  # free -> the pop it releases


def _base(c: Call) -> str:
    """The op's name without its namespace (`tile.tpop_from_aic` and `tpop_from_aic` alike)."""
    return c.op.rsplit(".", 1)[-1] if c.kind == "op" else ""


def _is_free(n) -> bool:
    return isinstance(n, EvalStmt) and isinstance(n.expr, Call) and _base(n.expr) in FREES


def _frees(f) -> bool:
    """`f` releases a pipe slot: a look at its statements (the passes before it changed most functions, and
    their node indexes, which walk every expression and type, would serve nothing else)."""
    return any(_is_free(n) for n in statements(f.body) if n.__class__ is EvalStmt)


class StampTfreeSplit(Pass):
    name = "StampTfreeSplit"
    stage = "layout"
    summary = "copy each tpop's split= and id= onto the tfree that releases its slot"
    requires: frozenset[str] = frozenset()
    produces: frozenset[str] = frozenset()

    def applies(self, program: Program, ctx) -> bool:
        return any(_frees(f) for f in program.functions)

    def run(self, program: Program, ctx) -> Program:
        funcs = []
        changed = False
        for f in program.functions:
            if not _frees(f):
                funcs.append(f)
                continue
            body = _Stamp().block(f.body)
            if body is not f.body:
                f = replace(f, body=body)
                changed = True
            funcs.append(f)
        return replace(program, functions=tuple(funcs)) if changed else program


def _int(e: Expr | None) -> int | None:
    return e.value if isinstance(e, ConstInt) else None


class _Stamp:
    """Walks a function body in program order: remembers each pop's (op, split, id), stamps each free.
    Only statements are looked at (the hooks are for assignments and evaluations, which no expression or
    type holds): each body in order, a loop's or scope's body, an if's then and else branches; the
    statements it leaves as they are come back as the very objects, as a `Mutator`'s would (the tests
    compare both on every example and corpus program)."""

    def __init__(self):
        self.pops: dict[str, tuple[str, Expr | None, Expr | None]] = {}

    def block(self, body: tuple[Stmt, ...]) -> tuple[Stmt, ...]:
        out = None
        for i, s in enumerate(body):
            cls = s.__class__
            if cls is AssignStmt:
                new = self.mutate_AssignStmt(s)
            elif cls is EvalStmt:
                new = self.mutate_EvalStmt(s)
            else:
                new = rebuild_bodies(s, self.block)
            if new is not s:
                if out is None:
                    out = list(body)
                out[i] = new
        return body if out is None else tuple(out)

    def mutate_AssignStmt(self, s: AssignStmt) -> AssignStmt:
        if isinstance(s.value, Call) and _base(s.value) in POPS:
            self.pops[s.target.name] = (_base(s.value), s.value.kwarg("split"), s.value.kwarg("id"))
        return s

    def mutate_EvalStmt(self, s: EvalStmt) -> EvalStmt:
        c = s.expr
        if not (isinstance(c, Call) and _base(c) in FREES and c.args):
            return s
        tile = c.args[0]
        if not isinstance(tile, Var):
            return s
        want = FREES[_base(c)]
        pop = self.pops.get(tile.name)
        if pop is None:
            raise CompileError([Diagnostic(
                "PTOC-E0720", f"{c.op}: its tile must be the value of a tile.{want} earlier in the function, "
                "and no such pop made it", c.span or s.span,
                hint=f"free the tile a `t = pl.tile.{want}(...)` returned: `pl.{c.op}(t)`")])
        op, split, pipe = pop
        if op != want:
            raise CompileError([Diagnostic(
                "PTOC-E0720", f"{c.op} releases a slot of tile.{want}, but '{tile.name}' comes from tile.{op}",
                c.span or s.span, hint=f"a tile popped with tile.{op} is released with "
                f"system.{'tfree_to_aic' if op == 'tpop_from_aic' else 'tfree_to_aiv'}")])
        own = c.kwarg("id")
        if own is not None:
            pop_id = _int(pipe) if pipe is not None else 0
            if _int(own) != pop_id:
                raise CompileError([Diagnostic(
                    "PTOC-E0721", f"{c.op}: pipe id {_show(own)} differs from the id {pop_id} of the "
                    f"tile.{op} that made '{tile.name}'", c.span or s.span,
                    hint="leave id= off the free (it takes its pop's), or give both the same id")])
            pipe = own
        kwargs: tuple = (("split", split if split is not None else ConstInt(0, INDEX)),)
        if pipe is not None:
            kwargs += (("id", pipe),)
        new = replace(c, kwargs=kwargs)
        return s if new == c else replace(s, expr=new)


def _show(e: Expr) -> str:
    v = _int(e)
    return str(v) if v is not None else "(not a constant)"
