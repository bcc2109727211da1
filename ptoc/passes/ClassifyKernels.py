"""ClassifyKernels: turn every InCore function into an AIC (cube) or AIV (vector) kernel.

Purpose
-------
An Ascend AI core pairs one cube core (AIC: L1/L0 buffers, the matrix unit, fixpipe) with vector
cores (AIV: the unified buffer and the vector unit). A kernel runs on one of them, and the `.pto`
function says which (`pto.kernel_kind`). This pass reads each InCore function's work and sets its
function type: AIC when everything it does belongs to the cube core, AIV when everything belongs
to the vector core.

Before::

    @pl.function(type=pl.FunctionType.InCore)
    def vadd(self, a: pl.Tensor[[32, 128], pl.FP32], ...) -> ...:
        ta: pl.Tile[[32, 128], pl.FP32, pl.Mem.Vec] = pl.tile.load(a, [0, 0], [32, 128], target_memory=pl.Mem.Vec)
        ...

After::

    @pl.function(type=pl.FunctionType.AIV)
    def vadd(self, a: pl.Tensor[[32, 128], pl.FP32], ...) -> ...:
        ...

Rules
-----
- Each operator call is cube or vector work by its unit in the operator registry: "cube" ops
  (tile.matmul, ...) are cube work, "vector" ops (elementwise, reductions, casts, ...) vector work.
- Ops of the other units ("mem", "scalar", "any", "sync": loads, stores, moves, creates, ...) belong
  to the side whose buffers their tiles live in: Mat, Left, Right, Acc, Bias, LeftScale, RightScale
  are the cube core's, Vec is the vector core's. The tile that decides is the op's result tile, else
  its first tile operand; a tile.move is done by the core owning its source (Acc -> Vec is the cube's
  fixpipe). Ops touching no tile (scalars, sync) belong to neither.
- Only cube work -> AIC; only vector work -> AIV; neither (scalar code only) -> AIV.
- Both -> a user error (PTOC-E0330) listing the cube ops and the vector ops with their lines. Kernels
  whose two sides hand data over (a tile.move between the cores, a cube store the vector core loads)
  were split by ExpandMixedKernel before this pass; what reaches it mixed has no such hand-off.
- Functions already AIC or AIV, and non-kernel functions, are left as they are (idempotent).
"""

from __future__ import annotations

from dataclasses import replace

from ptoc.diagnostics import CompileError, Diagnostic
from ptoc.ir.nodes import AssignStmt, Call, Function, Program, TileType, Var
from ptoc.ir.verifier import NodeIndex
from ptoc.passes.manager import Pass

CUBE_SPACES = ("Mat", "Left", "Right", "Acc", "Bias", "LeftScale", "RightScale")
VECTOR_SPACES = ("Vec",)
MAX_LISTED = 12  # ops listed per side in the mixed-kernel message


class ClassifyKernels(Pass):
    name = "ClassifyKernels"
    stage = "layout"
    summary = "mark each InCore function AIC (cube work) or AIV (vector work); reject mixed kernels"
    requires = frozenset({"memory_spaces"})
    produces = frozenset({"kernel_kinds"})

    def run(self, program: Program, ctx) -> Program:
        if not any(f.func_type == "InCore" for f in program.functions):
            return program
        types = self.types(program, ctx)
        funcs = tuple(_classify(f, types.get(f.name, {}), self.cache) if f.func_type == "InCore" else f
                      for f in program.functions)
        return replace(program, functions=funcs)


def _classify(f: Function, types: dict, cache=None) -> Function:
    from ptoc.ops.registry import resolve

    index = NodeIndex.get(f, cache)
    results = {id(n.value): types.get(n.target.name) for n in index.of(AssignStmt) if isinstance(n.value, Call)}
    cube: list[tuple[str, int]] = []
    vector: list[tuple[str, int]] = []
    for n in index.of(Call):
        if n.kind != "op":
            continue
        arg_types = [types.get(a.name) if isinstance(a, Var) else None for a in n.args]
        op, _ = resolve(n, arg_types)
        if op is None:
            continue
        side = _side(op, n, results.get(id(n)), arg_types, types)
        if side == "cube":
            cube.append((op.name, n.span.line))
        elif side == "vector":
            vector.append((op.name, n.span.line))
    if cube and vector:
        raise CompileError([Diagnostic(
            "PTOC-E0330",
            f"kernel {f.name!r} mixes cube and vector work with no hand-off between them that can be split "
            f"(a tile.move between the cores, or a cube store the vector core loads). cube: {_listing(cube)}; "
            f"vector: {_listing(vector)}",
            f.span,
            hint="hand tiles between the cores with pl.tile.move (Acc -> Vec, Vec -> Mat), or split "
                 f"{f.name!r} by hand into AIC and AIV functions joined by a pipe (pl.tpush_to_aiv / "
                 "pl.tpop_from_aic)")])
    return replace(f, func_type="AIC" if cube else "AIV")


def _side(op, call: Call, result, arg_types: list, types: dict) -> str | None:
    if op.unit == "cube":
        return "cube"
    if op.unit == "vector":
        return "vector"
    tiles = [t for t in arg_types if isinstance(t, TileType)]
    tiles += [types.get(v.name) for k, v in call.kwargs if isinstance(v, Var)
              and isinstance(types.get(v.name), TileType)]
    if op.name == "tile.move" and tiles:
        decider = tiles[0]  # the core owning the source does the move
    elif isinstance(result, TileType):
        decider = result
    else:
        decider = tiles[0] if tiles else None
    if decider is None or decider.memory is None:
        return None
    if decider.memory in CUBE_SPACES:
        return "cube"
    if decider.memory in VECTOR_SPACES:
        return "vector"
    return None


def _listing(ops: list[tuple[str, int]]) -> str:
    shown = ", ".join(f"{name} (line {line})" for name, line in ops[:MAX_LISTED])
    if len(ops) > MAX_LISTED:
        shown += f", and {len(ops) - MAX_LISTED} more"
    return shown
