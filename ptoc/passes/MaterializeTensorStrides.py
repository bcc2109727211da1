"""MaterializeTensorStrides: give every kernel (and plain function) tensor its explicit, packed strides.

Purpose
    Codegen writes `pto.make_tensor_view ... strides = [...]` and the GlobalTensor header from the
    tensor's strides, so every tensor type in a kernel must carry them explicitly. Tensors that already
    declare strides keep them.

Rules
    - ND: row-major, `stride[i] = prod(shape[i+1:])`, innermost stride 1.
    - DN (column-major in the last two axes): `stride[-2] = 1`, `stride[-1] = shape[-2]`, leading axes
      row-major over the `[R, C]` plane (`stride[i] = prod(shape[i+1:])`).
    - NZ: the blocked rank-5 shape `[B, C/c0, R/16, 16, c0]` made by BlockNzTensorViews takes plain
      row-major strides, which are exactly pto-isa's NZ strides `[C*R, R*c0, 16*c0, c0, 1]` (NZ-3).
      An NZ view that is not rank 5 here means BlockNzTensorViews did not run: an internal error.
    - Dynamic extents give stride expressions (`N * 64`); constants fold.

Functions
    Kernels and plain functions (no type), as PyPTO. PyPTO also rewrites orchestration functions;
    ptoc leaves them as written: their tensors are the runtime's, described by the kernels' views and
    the generated GlobalTensor header, and a stride there would only repeat the packed default.

Example
    before: `w: pl.Tensor[[1, 16, 16, 16, 32], pl.INT8, pl.NZ]`
    after:  `w: pl.Tensor[[1, 16, 16, 16, 32], pl.INT8,
                 pl.TensorView(stride=[131072, 8192, 512, 32, 1], layout=pl.TensorLayout.NZ)]`
"""

from __future__ import annotations

from ptoc.context import CompileContext
from ptoc.diagnostics import InternalError
from ptoc.ir import dtypes
from ptoc.ir.nodes import (
    AssignStmt,
    BinOp,
    Call,
    ConstBool,
    ConstFloat,
    ConstInt,
    DTypeLit,
    EnumLit,
    Expr,
    Function,
    NoneLit,
    Program,
    PtrType,
    ScalarType,
    StrLit,
    TensorType,
    TensorView,
    TileType,
    TupleType,
    Var,
)
from ptoc.ir.verifier import FastMutator, definitions
from ptoc.ir.visitor import replace
from ptoc.passes.manager import Pass
from ptoc.passes.properties import KERNEL_TYPES


def _mul(a: Expr, b: Expr) -> Expr:
    if isinstance(a, ConstInt) and isinstance(b, ConstInt):
        return ConstInt(a.value * b.value, dtypes.INDEX)
    if isinstance(a, ConstInt) and a.value == 1:
        return b
    if isinstance(b, ConstInt) and b.value == 1:
        return a
    return BinOp("*", a, b)


def row_major_strides(shape: tuple[Expr, ...]) -> tuple[Expr, ...]:
    out: list[Expr] = []
    acc: Expr = ConstInt(1, dtypes.INDEX)
    for d in reversed(shape):
        out.append(acc)
        acc = _mul(d, acc)
    return tuple(reversed(out))


def packed_strides(t: TensorType) -> tuple[Expr, ...]:
    layout = t.layout
    if layout == "NZ":
        if t.rank != 5:
            raise InternalError(f"MaterializeTensorStrides: an unblocked rank-{t.rank} NZ view reached it "
                                "(BlockNzTensorViews must run first; NZ-3)")
        return row_major_strides(t.shape)
    if layout == "DN" and t.rank >= 2:
        r = t.shape[-2]
        plane = _mul(r, t.shape[-1])
        lead = row_major_strides(t.shape[:-2] + (ConstInt(1, dtypes.INDEX),))[:-1]
        lead = tuple(_mul(s, plane) for s in lead)
        return lead + (ConstInt(1, dtypes.INDEX), r)
    return row_major_strides(t.shape)


# Nodes that hold no tensor type: the mutation does not look inside them.
_NO_TENSOR_TYPE = frozenset({Var, ConstInt, ConstFloat, ConstBool, StrLit, EnumLit, DTypeLit, NoneLit, TileType,
                             ScalarType, PtrType, str})


class _Strides(FastMutator):
    """The mutation. Calls and assignments, most of what a function is made of, are taken apart here rather
    than by the generic traversal, and each tensor type object is done once (`_done`, by identity)."""

    leaves = _NO_TENSOR_TYPE  # (`mutate` returns them as they are: the traversal skips them)

    def __init__(self):
        self._done: dict[int, tuple] = {}  # id(tensor type) -> (it, with strides)

    def mutate(self, node):
        cls = node.__class__
        if cls in _NO_TENSOR_TYPE:
            return node
        if cls is Call:
            args = node.args
            for x in args:  # (no list made for a call whose arguments are all leaves, as most are)
                if x.__class__ not in _NO_TENSOR_TYPE:
                    args = self._items(args)
                    break
            kwargs = node.kwargs
            for kv in kwargs:  # (likewise keyword values)
                if kv[1].__class__ not in _NO_TENSOR_TYPE:
                    new = tuple([kv if kv[1].__class__ in _NO_TENSOR_TYPE or (v := self.mutate(kv[1])) is kv[1]
                                 else (kv[0], v) for kv in kwargs])
                    if any(a is not b for a, b in zip(new, kwargs)):
                        kwargs = new
                    break
            if args is node.args and kwargs is node.kwargs:
                return node
            return replace(node, args=args, kwargs=kwargs)
        if cls is AssignStmt:
            value = self.mutate(node.value)
            ann = node.annotation
            if ann.__class__ not in _NO_TENSOR_TYPE and ann is not None:
                ann = self.mutate(ann)
            if value is node.value and ann is node.annotation:
                return node
            return replace(node, value=value, annotation=ann)
        if cls is TensorType:
            hit = self._done.get(id(node))
            if hit is None or hit[0] is not node:
                hit = self._done[id(node)] = (node, FastMutator.mutate(self, node))
            return hit[1]
        return FastMutator.mutate(self, node)

    def _items(self, items: tuple) -> tuple:
        # (the leaves, most arguments, are not passed to `mutate`, which would return them as they are)
        new = [x if x.__class__ in _NO_TENSOR_TYPE else self.mutate(x) for x in items]
        return items if all(a is b for a, b in zip(new, items)) else tuple(new)

    def mutate_TensorType(self, t: TensorType) -> TensorType:
        if t.view is not None and t.view.stride:
            return t
        strides = packed_strides(t)
        view = replace(t.view, stride=strides) if t.view is not None else TensorView(stride=strides)
        return replace(t, view=view)


class MaterializeTensorStrides(Pass):
    name = "MaterializeTensorStrides"
    stage = "layout"
    summary = "give every kernel tensor explicit packed strides (ND, DN, blocked NZ: NZ-3)"
    requires = frozenset({"nz_blocked"})
    produces = frozenset({"strides"})

    def run(self, program: Program, ctx: CompileContext) -> Program:
        m = _Strides()
        funcs: list[Function] = []
        for f in program.functions:
            funcs.append(m.mutate(f) if f.func_type in (*KERNEL_TYPES, "Opaque") else f)
            if funcs[-1] is not f:
                handed = _output_types(f, self.known_types(program, f), m)
                if handed is not None:
                    self.hand_over(funcs[-1], handed)
        if all(a is b for a, b in zip(funcs, program.functions)):
            return program
        return replace(program, functions=tuple(funcs))


def _output_types(f: Function, types: dict | None, m: _Strides) -> dict | None:
    """The value types of `f` once its tensor types have strides, from its value types before (`types`;
    None: not known, and nothing is derived): a type written in `f` (a parameter's, an annotation) gains
    the strides, and so does a value that carries one of those very types (a loop carrying a parameter).
    None when a value's tensor type comes from elsewhere (an operator's result, a call's): what the
    operator makes of strided arguments is the operator rules' to say."""
    if types is None:
        return None
    written = definitions(f)
    own = {id(types[n]) for n, ann in written.items() if ann is not None and n in types}
    for n, t in types.items():
        if written.get(n) is None and t is not None and id(t) not in own and _has_tensor(t):
            return None
    done: dict[int, object] = {}  # id(type before) -> after: a type two values share stays shared

    def strided(t):
        if t is None:
            return None
        if id(t) not in done:
            done[id(t)] = m.mutate(t)
        return done[id(t)]

    return {n: strided(t) for n, t in types.items()}


def _has_tensor(t) -> bool:
    if isinstance(t, TupleType):
        return any(_has_tensor(x) for x in t.types)
    return isinstance(t, TensorType)
