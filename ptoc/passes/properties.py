"""IR properties passes produce, each with the check the pass manager runs after the pass."""

from __future__ import annotations

from ptoc.context import CompileContext
from ptoc.ir.nodes import Call, Function, Program, TensorType, TileType
from ptoc.ir.verifier import NodeIndex
from ptoc.ir.verifier import iter_type_exprs  # noqa: F401  (re-exported for property checks)
from ptoc.passes.manager import property_check

KERNEL_TYPES = ("InCore", "AIC", "AIV")
TENSOR_QUERIES = ("tensor.dim",)  # shape queries on global tensors: allowed in kernels
GM_ELEMENT_OPS = ("tensor.read", "tensor.write")  # one element of a global tensor: allowed in kernels

# Each check takes (program, ctx, cache): `cache` is the pipeline run's VerifyCache (or None), whose
# NodeIndex of a function serves every check and pass that looks at the same function parts.


def kernels(program: Program) -> list[Function]:
    return [f for f in program.functions if f.func_type in KERNEL_TYPES]


def tile_types(f: Function, cache=None) -> list[TileType]:
    return NodeIndex.get(f, cache).of(TileType)


@property_check("ssa")
def _ssa(program: Program, ctx: CompileContext, cache=None) -> list[str]:
    """Every name is assigned once in its function (the two yields of an if bind its results once)."""
    from ptoc.passes.ConvertToSSA import ssa_violations

    return ssa_violations(program)


@property_check("structured")
def _structured(program: Program, ctx: CompileContext, cache=None) -> list[str]:
    """No break or continue outside Orchestration functions (CtrlFlowTransform lowered them)."""
    from ptoc.passes.CtrlFlowTransform import unstructured

    return unstructured(program)


@property_check("tile_ops")
def _tile_ops(program: Program, ctx: CompileContext, cache=None) -> list[str]:
    """Kernels compute on tiles only: no tensor.* operator call survives in them (except the metadata
    queries in TENSOR_QUERIES, which read a global tensor's runtime shape and compute nothing, and the
    element accesses of global tensors in GM_ELEMENT_OPS)."""
    bad = []
    for f in kernels(program):
        for n in NodeIndex.get(f, cache).of(Call):
            if n.kind == "op" and n.op.startswith("tensor.") and n.op not in TENSOR_QUERIES + GM_ELEMENT_OPS:
                bad.append(f"{f.name}: pl.{n.op} at line {n.span.line}")
    return bad


@property_check("flat_tiles")
def _flat_tiles(program: Program, ctx: CompileContext, cache=None) -> list[str]:
    """Every tile in a kernel is at most 2-D."""
    return [f"{f.name}: a rank-{t.rank} tile" for f in kernels(program) for t in tile_types(f, cache) if t.rank > 2]


@property_check("nz_blocked")
def _nz_blocked(program: Program, ctx: CompileContext, cache=None) -> list[str]:
    """No logical NZ tensor survives in a kernel: every NZ view is the rank-5 blocked form."""
    bad = []
    for f in kernels(program):
        for n in NodeIndex.get(f, cache).of(TensorType):
            if n.layout == "NZ" and n.rank != 5:
                bad.append(f"{f.name}: an unblocked rank-{n.rank} NZ tensor")
    return bad


@property_check("memory_spaces")
def _memory_spaces(program: Program, ctx: CompileContext, cache=None) -> list[str]:
    """Every tile in a kernel has a memory space."""
    return [f"{f.name}: a tile without a memory space" for f in kernels(program) for t in tile_types(f, cache)
            if t.memory is None]


@property_check("kernel_kinds")
def _kernel_kinds(program: Program, ctx: CompileContext, cache=None) -> list[str]:
    """No plain InCore function remains: each kernel is AIC (cube) or AIV (vector)."""
    return [f"{f.name} is still InCore" for f in program.functions if f.func_type == "InCore"]


@property_check("strides")
def _strides(program: Program, ctx: CompileContext, cache=None) -> list[str]:
    """Every tensor parameter of a kernel carries explicit strides."""
    bad = []
    for f in kernels(program):
        for p in f.params:
            t = p.type
            if isinstance(t, TensorType) and (t.view is None or not t.view.stride):
                bad.append(f"{f.name}: parameter {p.name} has no strides")
    return bad


@property_check("memrefs")
def _memrefs(program: Program, ctx: CompileContext, cache=None) -> list[str]:
    """Every tile in a kernel is bound to a MemRef."""
    return [f"{f.name}: a tile without a MemRef" for f in kernels(program) for t in tile_types(f, cache)
            if t.memref is None]


@property_check("addresses")
def _addresses(program: Program, ctx: CompileContext, cache=None) -> list[str]:
    """Every on-chip allocation in a kernel has a byte address (`addr=`)."""
    bad = []
    for f in kernels(program):
        for n in NodeIndex.get(f, cache).of(Call):
            if n.op == "tile.alloc" and n.kwarg("addr") is None:
                bad.append(f"{f.name}: tile.alloc at line {n.span.line} has no addr")
    return bad
