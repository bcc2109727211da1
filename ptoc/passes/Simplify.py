"""Simplify: propagate scalar constants and fold integer arithmetic, as PyPTO's pass does.

The rules (constant propagation, folding with integer ranges, branches and loops the ranges decide, dead
scalar code), an example and where ptoc differs from PyPTO are in `ptoc.analysis.simplify`. The second
run is also where the tests LowerPipelineLoops copies (`if ko + 64 == 0:`) are decided, as in PyPTO.

It runs twice, at PyPTO's two positions: after ConvertToSSA, and again at the end of the pipeline (PyPTO
runs it after its distributed passes), where it folds what later passes wrote in PyPTO's unfolded form,
such as the split passes' lane offset `0 + subblock_idx * 8`; so a dump read back (whose first Simplify
folds it) compiles to the same kernel as its source.
"""

from __future__ import annotations

from ptoc.analysis.simplify import simplify_function
from ptoc.context import CompileContext
from ptoc.ir.nodes import Program
from ptoc.ir.visitor import replace
from ptoc.passes.manager import Pass


class Simplify(Pass):
    name = "Simplify"
    stage = "ssa"
    summary = "propagate scalar constants into shapes and offsets, fold arithmetic, drop dead scalar code"
    accepts_non_ssa = True  # as PyPTO's: names assigned more than once are left alone

    def run(self, program: Program, ctx: CompileContext) -> Program:
        types = self.types(program, ctx)
        funcs = tuple(simplify_function(f, types.get(f.name, {}), self.cache) for f in program.functions)
        if all(a is b for a, b in zip(funcs, program.functions)):
            return program
        return replace(program, functions=funcs)
