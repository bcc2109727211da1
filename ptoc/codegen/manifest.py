"""The kernels manifest (`<output>.kernels.json`): what a build script or a runtime needs to wire the kernels
of a whole program — each kernel's name, kind and parameters (with the header's GlobalTensor type for each
tensor) and the orchestration's calls of them in program order. Schema in README.md ("Kernels manifest")."""

from __future__ import annotations

import json

from ptoc.ir.nodes import (Call, ConstInt, DictExpr, EnumLit, Function, ListExpr, Program, ScalarType, StrLit,
                           TensorType, Var)
from ptoc.ir.printer import print_expr
from ptoc.ir.nodes import KERNEL_TYPES
# (the names the writer asks for per function or per call imported once here: an import statement in a
# function costs ~1 us each time it runs; none of these modules imports the emitters)
from ptoc.codegen.cross_core import GM_PIPE_PARAM, gm_pipe_buffer_bytes
from ptoc.ir.verifier import NodeIndex

SCHEMA = "ptoc-kernels/1"


def _dim(e) -> int | str:
    if e.__class__ is ConstInt:  # (most extents: what `fold` gives back as it is, without its imports)
        return e.value
    from ptoc.analysis.arith import fold

    f = fold(e)
    return f.value if isinstance(f, ConstInt) else print_expr(e)


def _param(p, namespace: str, global_names: set[str], logical: list | None = None) -> dict:
    t = p.type
    if isinstance(t, TensorType):
        gname = f"{p.name}_Global"
        shape = [_dim(d) for d in t.shape]
        if logical is None:
            logical = _unblocked(shape) if t.layout == "NZ" else shape
        return {"name": p.name, "kind": "tensor", "direction": p.direction, "dtype": t.dtype.name,
                "shape": shape, "logical_shape": logical, "layout": t.layout or "ND",
                "global_tensor": f"{namespace}::{gname}" if gname in global_names else None}
    dtype = t.dtype.name if isinstance(t, ScalarType) else None
    return {"name": p.name, "kind": "scalar", "direction": p.direction, "dtype": dtype}


def _core_num(call: Call):
    """The block count of a call's `attrs={"core_num": n}` (an spmd launch), or None."""
    attrs = call.kwarg("attrs")
    for k, v in attrs.items if isinstance(attrs, DictExpr) else ():
        if isinstance(k, StrLit) and k.value == "core_num":
            return v
    return call.kwarg("core_num")  # pl.spmd_submit(..., core_num=n)


def _nodes(f: Function, cls: type, cache=None) -> list:
    """Every node of class `cls` under `f`, in walk order (from the pipeline's node index with its `cache`)."""
    return NodeIndex.get(f, cache).of(cls)


def _launches(program: Program, cache=None) -> dict[str, int | str]:
    """function name -> the block count its callers launch it with (an outlined pl.spmd block's Spmd
    function is called with `attrs={"core_num": n}`; the kernels it calls run on those n blocks)."""
    out: dict[str, int | str] = {}
    for f in program.functions:
        for n in _nodes(f, Call, cache):
            if n.kind == "func" and (c := _core_num(n)) is not None:
                out.setdefault(n.op, _dim(c))
    return out


# how a function calls a kernel: a plain call, or a task launch (`pl.submit` / `pl.spmd_submit`)
_CALL_KINDS = ("func", "submit", "spmd_submit")


def _calls(f: Function, kernels: set[str], launches: dict | None = None, groups: frozenset = frozenset(),
           cache=None) -> list[dict]:
    """The calls of kernels (and of the Group functions in `groups`, listed as "group") in `f`, plain calls
    and task launches alike; a launch says so in "launch" ("submit" / "spmd_submit") and lists its `deps=`."""
    out = []
    for n in _nodes(f, Call, cache):
        if n.kind in _CALL_KINDS and (n.op in kernels or n.op in groups):
            entry = {"group" if n.op in groups else "kernel": n.op,
                     "args": [a.name if isinstance(a, Var) else print_expr(a) for a in n.args]}
            if n.kind != "func":
                entry["launch"] = n.kind
                deps = n.kwarg("deps")
                if deps is not None:
                    entry["deps"] = [d.name if isinstance(d, Var) else print_expr(d)
                                     for d in (deps.items if isinstance(deps, ListExpr) else (deps,))]
            if launches is not None:
                own = _core_num(n)
                entry["block_num"] = _dim(own) if own is not None else launches.get(f.name, 1)
            dirs = _arg_directions(n)
            if dirs is not None:
                entry["directions"] = dirs
            out.append(entry)
    return out


def _unblocked(shape: list) -> list:
    """The logical `[rows, cols]` (with the batch axis in front when it is not 1) of a blocked rank-5 NZ
    shape `[batch, cols/c0, rows/16, 16, c0]` (NZ-2), when its extents are numbers."""
    if len(shape) != 5 or not all(isinstance(d, int) for d in shape):
        return shape
    b, cb, rb, r0, c0 = shape
    return ([b] if b != 1 else []) + [rb * r0, cb * c0]


def _logical_shapes(program: Program, ctx, kernels: set[str], cache=None) -> dict[tuple[str, str], list]:
    """(kernel, parameter) -> the logical shape of each NZ tensor parameter: the type of the argument the
    orchestration passes (its tensors keep their logical shape; only kernel parameters are blocked)."""
    from ptoc.ir.verifier import function_types

    out: dict[tuple[str, str], list] = {}
    by_name: dict[str, Function] = {}
    for f in program.functions:
        by_name.setdefault(f.name, f)  # as Program.function finds it
    callers = [f for f in program.functions if f.func_type not in KERNEL_TYPES]
    nz_calls = [(f, n) for f in callers for n in _nodes(f, Call, cache) if n.kind == "func"
                and n.op in kernels and any(isinstance(p.type, TensorType) and p.type.layout == "NZ"
                                            for p in by_name[n.op].params)]
    if not nz_calls:
        return out
    types = function_types(program, ctx, cache)
    for f, call in nz_calls:
        for p, a in zip(by_name[call.op].params, call.args):
            t = types.get(f.name, {}).get(a.name) if isinstance(a, Var) else None
            if isinstance(p.type, TensorType) and p.type.layout == "NZ" and isinstance(t, TensorType) \
                    and len(t.shape) != len(p.type.shape):
                out.setdefault((call.op, p.name), [_dim(d) for d in t.shape])
    return out


def _arg_directions(call: Call) -> list[str] | None:
    """The call's `attrs={"arg_directions": [pl.adir.<d>, ...]}` (DeriveCallDirections) as ["<d>", ...]."""
    attrs = call.kwarg("attrs")
    for k, v in attrs.items if isinstance(attrs, DictExpr) else ():
        if isinstance(k, StrLit) and k.value == "arg_directions" and isinstance(v, ListExpr):
            return [d.member if isinstance(d, EnumLit) else print_expr(d) for d in v.items]
    return None


def _gm_ring(f: Function, cache=None) -> dict:
    """`gm_pipe_buffer_bytes` for a kernel whose cross-core pipe runs through a GM ring (a2a3): the bytes
    the caller must allocate for its `__gm_pipe_buffer`, which the IR types as one element. (It reads the
    calls off the pipeline's node index with its `cache` instead of walking the kernel again.)"""
    n = gm_pipe_buffer_bytes(f, _nodes(f, Call, cache)) if f.param(GM_PIPE_PARAM) is not None else 0
    return {"gm_pipe_buffer_bytes": n} if n else {}


def has_orchestration(program: Program, cache=None) -> bool:
    """The program has a function (not a kernel) that calls a kernel: a whole program. `cache`: the
    pipeline's verifier cache (`LowerResult.verified`), whose node indexes it reads."""
    kernels = {f.name for f in program.functions if f.func_type in KERNEL_TYPES}
    return any(_calls(f, kernels, cache=cache) for f in program.functions if f.func_type not in KERNEL_TYPES)


def emit_manifest(program: Program, ctx, source_name: str, cache=None, kernel_types=None) -> str:
    """The manifest of the lowered `program` as JSON text (sorted keys, two-space indent, final newline).
    `cache`: the pipeline's verifier cache (`LowerResult.verified`): the value types and node indexes it
    has are not derived again. `kernel_types`: `ptoc.codegen.global_tensor.kernel_types(program, ctx)`
    when the caller already has it (`Artifacts.kernel_types`, which the header was made from)."""
    from ptoc.passes.manager import gc_paused

    with gc_paused():  # as the driver's emitters: a large acyclic heap the collector need not rescan
        return json_text(manifest_doc(program, ctx, source_name, cache, kernel_types)) + "\n"


def manifest_doc(program: Program, ctx, source_name: str, cache=None, known=None) -> dict:
    """The manifest of `program` as the document `emit_manifest` writes (its "kernels" and "orchestration"
    lists hold one entry per function, in the program's order)."""
    from ptoc.codegen.global_tensor import kernel_types
    from ptoc.ir.verifier import function_types

    kernels = [f for f in program.functions if f.func_type in KERNEL_TYPES]
    if known is None:
        types = function_types(program, ctx, cache) if kernels else None
        known = kernel_types(program, ctx, types)
    spaces = {k.function: (k.namespace, {f"{e.name}_Global" for e in k.entries}) for k in known}
    names = {f.name for f in kernels}
    logical = _logical_shapes(program, ctx, names, cache)
    launches = _launches(program, cache)
    # a Group function launches its kernels at once, on the cores of one cluster (a split AIC/AIV pair)
    groups = frozenset(f.name for f in program.functions if f.func_type == "Group")
    doc = {
        "schema": SCHEMA,
        "source": source_name,
        "arch": ctx.arch,
        "kernels": [{"name": f.name, "kind": f.func_type,
                     "params": [_param(p, *spaces.get(f.name, (f.name, set())), logical.get((f.name, p.name)))
                                for p in f.params],
                     **_gm_ring(f, cache)}
                    for f in kernels],
        "orchestration": [{"function": f.name, "calls": calls,
                           **({"launch": "together"} if f.func_type == "Group" else {})}
                          for f in program.functions
                          if f.func_type not in KERNEL_TYPES and (calls := _calls(f, names, launches, groups, cache))],
    }
    return doc


_STR = json.encoder.encode_basestring_ascii


def json_text(doc) -> str:
    """`json.dumps(doc, indent=2, sort_keys=True)` for a document of dicts with string keys, lists,
    strings, integers, booleans and None: the same text, with the standard library's C string encoder
    and none of its pure-Python indenting encoder. Anything else goes to `json.dumps` itself."""
    out: list[str] = []
    try:
        _json_value(doc, "\n", out)
    except TypeError:
        return json.dumps(doc, indent=2, sort_keys=True)
    return "".join(out)


def _json_value(o, nl: str, out: list[str]) -> None:
    """Append the indented JSON text of `o` to `out`; `nl`: a line end and the indent of `o`'s line."""
    cls = o.__class__
    if cls is dict:
        if not o:
            out.append("{}")
            return
        inner = nl + "  "
        sep = "{" + inner
        for k in sorted(o):
            if k.__class__ is not str:
                raise TypeError(k)
            v = o[k]
            # (most values are strings and numbers: written here, without a call per value)
            c = v.__class__
            if c is str:
                out.append(f"{sep}{_STR(k)}: {_STR(v)}")
            elif c is not dict and c is not list and (leaf := _leaf(v)) is not None:
                out.append(f"{sep}{_STR(k)}: {leaf}")
            else:
                out.append(f"{sep}{_STR(k)}: ")
                _json_value(v, inner, out)
            sep = "," + inner
        out.append(nl + "}")
    elif cls is list or cls is tuple:
        if not o:
            out.append("[]")
            return
        inner = nl + "  "
        sep = "[" + inner
        for x in o:
            c = x.__class__
            if c is str:
                out.append(sep + _STR(x))
            elif c is not dict and c is not list and (leaf := _leaf(x)) is not None:
                out.append(sep + leaf)
            else:
                out.append(sep)
                _json_value(x, inner, out)
            sep = "," + inner
        out.append(nl + "]")
    else:
        leaf = _leaf(o)
        if leaf is None:
            raise TypeError(o)  # floats and the rest: the standard library's spelling
        out.append(leaf)


def _leaf(o) -> str | None:
    """The JSON text of a string, integer, boolean or None; None for anything else (containers are
    written by `_json_value`; floats and the rest raise there)."""
    cls = o.__class__
    if cls is str:
        return _STR(o)
    if cls is int:
        return int.__repr__(o)
    if o is None:
        return "null"
    if o is True:
        return "true"
    if o is False:
        return "false"
    return None
