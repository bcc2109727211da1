"""Tile work left in a host function after the pipeline (PTOC-E0406).

A host function (orchestration, Group, Spmd) runs on the host and only launches kernels; `emit_module`
writes kernels only. Tile work that no pass outlined into a kernel (e.g. tile ops written directly in a
`with pl.cluster():` scope) would vanish from the output without a word, so the emitter rejects it.
"""

from __future__ import annotations

from ptoc.diagnostics import CompileError, Diagnostic
from ptoc.ir.nodes import Call, Program
from ptoc.ir.visitor import walk
from ptoc.codegen.cross_core import kept_calls

_KIND = {"Orchestration": "an orchestration function", "Group": "a Group function", "Spmd": "an Spmd launcher"}
_WHERE = {"Orchestration": "an orchestration function", "Group": "a `with pl.cluster():` scope or Group function",
          "Spmd": "a `with pl.spmd(...)` scope or Spmd launcher"}


def require_no_host_tile_work(program: Program) -> None:
    """Raise PTOC-E0406 at the first tile op of every host function that holds one."""
    found = []
    for f in program.functions:
        if f.func_type not in _KIND:
            continue
        calls = kept_calls(program, f)  # (the pipeline's node index when it kept one: no walk of the function)
        op = next((n for n in (walk(f) if calls is None else calls)
                   if isinstance(n, Call) and n.kind != "func" and n.op.startswith("tile.")), None)
        if op is None:
            continue
        found.append(Diagnostic(
            "PTOC-E0406", f"{op.op} runs in {f.name}, {_KIND[f.func_type]}: a host function only launches "
            "kernels, so this tile work would not be emitted", op.span if op.span is not None else f.span,
            hint=f"tile work in {_WHERE[f.func_type]} must be inside a kernel: put it in "
            "`with pl.at(level=pl.Level.CORE_GROUP):` (outlined into an InCore kernel) or in an "
            "@pl.function(type=pl.FunctionType.InCore) it calls"))
    if found:
        raise CompileError(found)
