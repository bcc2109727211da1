"""The kernels manifest (`<output>.kernels.json`): what a build script or a runtime needs to wire the kernels
of a whole program — each kernel's name, kind and parameters (with the header's GlobalTensor type for each
tensor) and the orchestration's calls of them in program order. Schema in README.md ("Kernels manifest")."""

from __future__ import annotations

import json

from ptoc.ir.nodes import Call, Function, Program, ScalarType, TensorType, Var
from ptoc.ir.printer import print_expr
from ptoc.ir.visitor import walk

SCHEMA = "ptoc-kernels/1"
KERNEL_TYPES = ("InCore", "AIC", "AIV")


def _dim(e) -> int | str:
    from ptoc.analysis.arith import fold
    from ptoc.ir.nodes import ConstInt

    f = fold(e)
    return f.value if isinstance(f, ConstInt) else print_expr(e)


def _param(p, namespace: str, global_names: set[str]) -> dict:
    t = p.type
    if isinstance(t, TensorType):
        gname = f"{p.name}_Global"
        return {"name": p.name, "kind": "tensor", "direction": p.direction, "dtype": t.dtype.name,
                "shape": [_dim(d) for d in t.shape], "layout": t.layout or "ND",
                "global_tensor": f"{namespace}::{gname}" if gname in global_names else None}
    dtype = t.dtype.name if isinstance(t, ScalarType) else None
    return {"name": p.name, "kind": "scalar", "direction": p.direction, "dtype": dtype}


def _calls(f: Function, kernels: set[str]) -> list[dict]:
    out = []
    for n in walk(f):
        if isinstance(n, Call) and n.kind == "func" and n.op in kernels:
            out.append({"kernel": n.op,
                        "args": [a.name if isinstance(a, Var) else print_expr(a) for a in n.args]})
    return out


def has_orchestration(program: Program) -> bool:
    """The program has a function (not a kernel) that calls a kernel: a whole program."""
    kernels = {f.name for f in program.functions if f.func_type in KERNEL_TYPES}
    return any(_calls(f, kernels) for f in program.functions if f.func_type not in KERNEL_TYPES)


def emit_manifest(program: Program, ctx, source_name: str) -> str:
    """The manifest of the lowered `program` as JSON text (sorted keys, two-space indent, final newline)."""
    from ptoc.codegen.global_tensor import kernel_types

    spaces = {k.function: (k.namespace, {f"{e.name}_Global" for e in k.entries}) for k in kernel_types(program, ctx)}
    kernels = [f for f in program.functions if f.func_type in KERNEL_TYPES]
    names = {f.name for f in kernels}
    doc = {
        "schema": SCHEMA,
        "source": source_name,
        "arch": ctx.arch,
        "kernels": [{"name": f.name, "kind": f.func_type,
                     "params": [_param(p, *spaces.get(f.name, (f.name, set()))) for p in f.params]}
                    for f in kernels],
        "orchestration": [{"function": f.name, "calls": _calls(f, names)}
                          for f in program.functions if f.func_type not in KERNEL_TYPES and _calls(f, names)],
    }
    return json.dumps(doc, indent=2, sort_keys=True) + "\n"
