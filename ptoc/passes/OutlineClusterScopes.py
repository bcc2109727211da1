"""OutlineClusterScopes: `pl.cluster()` scopes become Group functions, `pl.spmd(n)` scopes Spmd functions.

Purpose
-------
`with pl.cluster():` groups the work of one cluster of cores (typically a cube and a vector kernel that
cooperate); `with pl.spmd(n):` launches its body on n blocks. This pass moves each such scope of a plain
or orchestration function into a function of its own (FunctionType.Group for a cluster, FunctionType.Spmd
for an spmd block) and leaves a call where the scope was. The launch (`core_num`, `sync_start`) belongs
to the call, not to the function: it is written as the call's `attrs={"core_num": n, ...}`. It runs
after OutlineIncoreScopes, so the CORE_GROUP scopes inside a cluster are kernel calls already.

Before::

    @pl.function(type=pl.FunctionType.Orchestration)
    def main(self, x: pl.Tensor[[64], pl.FP32], out: pl.Out[pl.Tensor[[64], pl.FP32]]) -> pl.Tensor[[64], pl.FP32]:
        with pl.spmd(4):
            out = self.kernel(x, out)
        return out

After::

    @pl.function(type=pl.FunctionType.Spmd)
    def main_spmd_0(self, x: pl.Tensor[[64], pl.FP32], out: pl.Out[pl.Tensor[[64], pl.FP32]]) -> pl.Tensor[[64], pl.FP32]:
        out_1 = self.kernel(x, out)
        return out

    @pl.function(type=pl.FunctionType.Orchestration)
    def main(self, x: pl.Tensor[[64], pl.FP32], out: pl.Out[pl.Tensor[[64], pl.FP32]]) -> pl.Tensor[[64], pl.FP32]:
        out_1 = self.main_spmd_0(x, out, attrs={"core_num": 4})
        return out_1

Rules
-----
- Which scopes: `pl.cluster(...)` first, then `pl.spmd(...)`, in Opaque and Orchestration functions, at
  any depth of loops, branches and other scopes. The function holding them keeps its type.
- A `pl.spmd(n)` block inside a cluster is not outlined on its own: its body stays in the Group function
  (marked `attrs={"spmd_unwrapped": True}`) and the Group's call carries the launch. At most one spmd
  block per cluster (PTOC-E0613).
- Names: `<function>_cluster_<n>` and `<function>_spmd_<n>` (each kind counting from 0), or the scope's
  `name_hint=`; a name the function already uses gets `_0`, `_1`, ...
- Parameters: the values the scope reads that are defined before it, in first-read order. A tensor the
  body writes (store or assemble destination, or passed to a program function's Out/InOut parameter) is
  `pl.Out`, or `pl.InOut` when the body also reads it.
- Results: the values the scope defines that are read after it (in definition order), then every tensor
  from outside it stores into. A result whose buffer is a parameter's is returned as that parameter;
  the caller reads the call's value where it read the tensor after the scope. A scope without results
  gives a function without a return statement, called as a statement.
- Launch: `attrs={"core_num": n}` on the call, with `"sync_start": True` when the scope says so.
- Function order: the Group functions, then the Spmd functions, then the program's functions.

The loop form `for b in pl.spmd(n):` reaches this pass as the front end reads it, the way PyPTO's parser does:
`with pl.spmd(n):` around a CORE_GROUP kernel scope whose first statement is `b = pl.tile.get_block_idx()`;
OutlineIncoreScopes has made that kernel scope a kernel call, so the Spmd function calls the kernel.

Where it differs from PyPTO: `with pl.spmd(...) as tid:` (task ids, `deps=`) is not outlined here.
"""

from __future__ import annotations

from dataclasses import replace

from ptoc.analysis.outline import OutlineStyle, ScopeOutliner, has_scope, scope_kwarg
from ptoc.context import CompileContext
from ptoc.diagnostics import CompileError, Diagnostic
from ptoc.ir.nodes import (
    Call,
    ConstBool,
    DictExpr,
    Expr,
    ForStmt,
    Function,
    IfStmt,
    Program,
    ScopeStmt,
    Stmt,
    StrLit,
    WhileStmt,
)
from ptoc.ir.visitor import Mutator
from ptoc.passes.manager import Pass

OUTER_KINDS = ("Opaque", "Orchestration")


def _is(kind: str):
    return lambda s: isinstance(s, ScopeStmt) and s.kind == kind


def launch(scope: ScopeStmt) -> tuple[tuple[str, Expr], ...]:
    """`attrs={"core_num": n[, "sync_start": True]}` for the call that launches an spmd block."""
    items: list[tuple[Expr, Expr]] = [(StrLit("core_num"), scope_kwarg(scope, "core_num", 0))]
    sync = scope_kwarg(scope, "sync_start")
    if isinstance(sync, ConstBool) and sync.value:
        items.append((StrLit("sync_start"), ConstBool(True)))
    return (("attrs", DictExpr(tuple(items), span=scope.span)),)


CLUSTER = OutlineStyle(matches=_is("cluster"), func_type="Group", suffix=lambda s: "_cluster_", pypto_names=True,
                       return_params=True, call_directions=True)
SPMD = OutlineStyle(matches=_is("spmd"), func_type="Spmd", suffix=lambda s: "_spmd_", pypto_names=True,
                    return_params=True, call_directions=True, call_kwargs=launch)


def _unwrap_spmd(body: tuple[Stmt, ...], found: list[ScopeStmt]) -> tuple[Stmt, ...]:
    """`body` with every spmd scope replaced by its statements; the scopes go to `found`."""
    out: list[Stmt] = []
    for s in body:
        if isinstance(s, ScopeStmt) and s.kind == "spmd":
            found.append(s)
            out.extend(_unwrap_spmd(s.body, found))
        elif isinstance(s, (ForStmt, WhileStmt, ScopeStmt)):
            out.append(replace(s, body=_unwrap_spmd(s.body, found)))
        elif isinstance(s, IfStmt):
            out.append(replace(s, then_body=_unwrap_spmd(s.then_body, found),
                               else_body=_unwrap_spmd(s.else_body, found)))
        else:
            out.append(s)
    return tuple(out)


class _StampLaunch(Mutator):
    """Calls of the Group functions whose spmd block was unwrapped get the block's launch."""

    def __init__(self, launches: dict[str, tuple]):
        self.launches = launches

    def mutate_Call(self, c: Call):
        kw = self.launches.get(c.op) if c.kind == "func" else None
        return c if kw is None else replace(c, kwargs=(*c.kwargs, *kw))


class OutlineClusterScopes(Pass):
    name = "OutlineClusterScopes"
    stage = "ssa"
    summary = "move each pl.cluster scope into a Group function and each pl.spmd scope into an Spmd function"
    requires = frozenset({"ssa"})
    produces = frozenset()

    def run(self, program: Program, ctx: CompileContext) -> Program:
        def todo(f: Function) -> bool:
            return f.func_type in OUTER_KINDS and (has_scope(f.body, CLUSTER.matches) or has_scope(f.body, SPMD.matches))

        if not any(todo(f) for f in program.functions):
            return program
        types = self.types(program, ctx)
        taken = {f.name for f in program.functions}
        made: list[Function] = []
        funcs: list[Function] = []
        for f in program.functions:
            if not todo(f):
                funcs.append(f)
                continue
            groups = ScopeOutliner(f, types.get(f.name, {}), taken, CLUSTER, program)
            body = groups.block(f.body, set())
            launches: dict[str, tuple] = {}
            for k, g in enumerate(groups.made):
                found: list[ScopeStmt] = []
                inner = _unwrap_spmd(g.body, found)
                if not found:
                    continue
                if len(found) > 1:
                    raise CompileError([Diagnostic(
                        "PTOC-E0613", f"a pl.cluster() scope holds {len(found)} pl.spmd() blocks; it may hold one",
                        found[1].span, hint="give each spmd block a cluster of its own")])
                attrs = ("attrs", DictExpr(((StrLit("spmd_unwrapped"), ConstBool(True)),), span=g.span))
                groups.made[k] = replace(g, body=inner, decorator_kwargs=(*g.decorator_kwargs, attrs))
                launches[g.name] = launch(found[0])
            if launches:
                body = _StampLaunch(launches).mutate(body)
            made.extend(groups.made)
            lookup = replace(program, functions=(*program.functions, *groups.made))
            staged = replace(f, body=body)
            spmd = ScopeOutliner(staged, types.get(f.name, {}), taken, SPMD, lookup)
            body = spmd.block(body, set())
            made.extend(spmd.made)
            funcs.append(replace(f, body=body))
        return replace(program, functions=(*made, *funcs))
