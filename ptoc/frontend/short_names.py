"""One spelling per op: short names written as `pl.load(...)`, `pl.add(...)` become the full names
(`tile.load`, `tensor.add` / `tile.add`) they resolve to, once, right after the front end has checked
the program (`ptoc.driver.frontend`, which compile, check and passes read programs through).

A short name picks its op by the kind of its first tensor or tile argument (`ptoc.ops.registry.resolve`),
which the type rules know only after the program is typed. The passes then match `tile.load`, not
`load`: without this step `pl.load` on a rank-3 tile slipped past FlattenTileNdTo2D while
`pl.tile.load` was flattened. PyPTO's parser resolves the name to the op when it builds the call, and
its printer writes the full name; so do ptoc's dumps after this step. `parse_program` and `ptoc fmt`
keep the spelling as written, so a program prints back as it was written.

A call whose kind cannot be decided (its arguments' types are unknown) keeps its short name; the
checks that run on it already report why. `t[i]` of a tensor becomes the slice op it stands for
(`ptoc.ir.verifier.tensor_index_as_slice`), so the passes meet element reads of tuples only.
"""

from __future__ import annotations

from dataclasses import replace

from ptoc.ir import dtypes
from ptoc.ir.nodes import (
    KERNEL_TYPES,
    AssignStmt,
    Call,
    Cast,
    ConstBool,
    ConstFloat,
    ConstInt,
    DTypeLit,
    EnumLit,
    Expr,
    GetItem,
    ListExpr,
    Program,
    ScalarType,
    TensorType,
    TileType,
    Type,
    Var,
)
from ptoc.ir.visitor import Mutator
from ptoc.ops import registry


class _FullNames(Mutator):
    def __init__(self, env: dict[str, Type | None], ctx):
        self.env = env
        self.ctx = ctx

    def type_of(self, e: Expr) -> Type | None:
        if isinstance(e, Var):
            return self.env.get(e.name)
        if isinstance(e, ConstInt):
            return ScalarType(e.dtype)
        if isinstance(e, ConstFloat):
            return ScalarType(e.dtype)
        if isinstance(e, ConstBool):
            return ScalarType(dtypes.BY_NAME["BOOL"])
        if isinstance(e, Call) and e.kind == "op":
            t, diags = registry.infer_call_type(e, [self.type_of(a) for a in e.args],
                                                {k: self.type_of(v) for k, v in e.kwargs}, self.ctx)
            return None if diags else t
        return None

    def mutate_GetItem(self, e: GetItem) -> Expr:
        from ptoc.ir.verifier import tensor_index_as_read, tensor_index_as_slice

        base = self.type_of(e.value)
        if isinstance(base, TensorType) and len(base.shape) >= 2:
            return tensor_index_as_slice(e, base)
        if isinstance(base, TensorType) and len(base.shape) == 1:
            return tensor_index_as_read(e)
        return e

    def mutate_AssignStmt(self, s: AssignStmt) -> AssignStmt:
        # `x: pl.Tile[..., pl.Mem.Acc] = pl.tile.full(...)`: the annotation chooses where the filled tile is
        # created (PyPTO's parser takes the annotation's space); the passes read it from target_memory=
        mem = _annotated_fill_space(s)
        if mem is None:
            return s
        return replace(s, value=replace(s.value, op="tile.full",
                                        kwargs=s.value.kwargs + (("target_memory", EnumLit("Mem", mem)),)))

    def mutate_Call(self, call: Call) -> Call:
        if call.kind != "op" or call.op not in registry.SHORT:
            return self._whole_offsets(call)
        op, _ = registry.resolve(call, [self.type_of(a) for a in call.args])
        if op is None or op.name == call.op:
            return self._whole_offsets(call)
        if op.name == "scalar.cast" and len(call.args) == 2 and not call.kwargs and isinstance(call.args[1], DTypeLit):
            # the form the parser gives `pl.cast(s, dtype)` of a scalar it knows: one form for both
            return Cast(call.args[0], call.args[1].dtype, span=call.span)
        return self._whole_offsets(replace(call, op=op.name))

    def _whole_offsets(self, call: Call) -> Call:
        """`tensor.assemble` with one offset per target axis: those the program left out start at 0."""
        if call.op != "tensor.assemble" or len(call.args) < 3 or not isinstance(call.args[2], ListExpr):
            return call
        tgt, offs = self.type_of(call.args[0]), call.args[2]
        if not isinstance(tgt, TensorType) or len(offs.items) >= len(tgt.shape):
            return call
        pad = tuple(ConstInt(0, dtypes.INDEX, span=offs.span) for _ in range(len(tgt.shape) - len(offs.items)))
        return replace(call, args=(call.args[0], call.args[1], replace(offs, items=offs.items + pad), *call.args[3:]))


def _annotated_fill_space(s) -> str | None:
    """The memory space the annotation of `x: pl.Tile[...] = tile.full(...)` names when the call leaves
    it open and it is not the call's own (Vec), else None."""
    a, v = s.annotation, s.value
    if not (isinstance(a, TileType) and a.memory and a.memory != "Vec" and isinstance(v, Call)
            and v.kind == "op" and v.op in ("tile.full", "full") and v.kwarg("target_memory") is None):
        return None
    return a.memory


def full_op_names(program: Program, ctx, made: set | None = None) -> Program:
    """`program` with every short op name that resolves replaced by its full name (the same object when
    there is none), and each bare `pl.split_aiv` region in its core scope (`_core_split_aiv`). `made`: what
    the parser recorded as it built `program` (`parse_program(made=...)`: the op names of its op calls, and
    `GetItem` when it built an element read); when given and none of it can need a rewrite, the program's
    nodes are not searched for one."""
    if made is not None and not may_rewrite(made):
        return _core_split_aiv(program)
    return _core_split_aiv(_full_op_names(program, ctx))


def may_rewrite(made: set) -> bool:
    """Whether a program whose op calls have the names in `made` (and which has an element read when
    `GetItem` is in it) may hold something `_full_op_names` rewrites: a short op name, a `tensor.assemble`,
    a `t[i]`, a `tile.full` (or `full`) whose annotation may pick its memory. (The parser records these as
    it builds, which costs nothing; searching every function's nodes for them cost a node index per function,
    mostly for programs, written with full names, that have nothing to rewrite.)"""
    return GetItem in made or any(op in registry.SHORT or op in _REWRITTEN for op in made if op is not GetItem)


_REWRITTEN = frozenset({"tensor.assemble", "tile.full", "full"})


def _core_split_aiv(program: Program) -> Program:
    """A `for ... in pl.split_aiv(...)` region outside any `pl.at(level=CORE_GROUP)` scope of a function that is
    not a kernel runs on the cores all the same: PyPTO's parser puts it in such a scope of its own (which
    OutlineIncoreScopes makes a kernel). The same here, once, after the check."""
    from ptoc.ir.nodes import ForStmt, IfStmt, ScopeStmt, WhileStmt

    def is_incore_scope(st) -> bool:  # `with pl.at(level=pl.Level.CORE_GROUP):`
        level = dict(st.kwargs).get("level", st.args[0] if st.args else None)
        return st.kind == "at" and isinstance(level, EnumLit) and level.member == "CORE_GROUP"

    if not any(isinstance(n, ForStmt) and n.kind == "split_aiv" for n in _loops(program)):
        return program

    def body(stmts: tuple, inside: bool) -> tuple:
        out = []
        for st in stmts:
            if isinstance(st, ForStmt) and st.kind == "split_aiv" and not inside:
                st = ScopeStmt("at", (), (st,), (("level", EnumLit("Level", "CORE_GROUP")),), span=st.span)
            elif isinstance(st, (ForStmt, WhileStmt)):
                st = replace(st, body=body(st.body, inside))
            elif isinstance(st, IfStmt):
                st = replace(st, then_body=body(st.then_body, inside), else_body=body(st.else_body, inside))
            elif isinstance(st, ScopeStmt):
                st = replace(st, body=body(st.body, inside or is_incore_scope(st)))
            out.append(st)
        return tuple(out)

    funcs = tuple(f if f.func_type in KERNEL_TYPES else replace(f, body=body(f.body, False))
                  for f in program.functions)
    return replace(program, functions=funcs)


def _loops(program: Program):
    """Every for statement of the program (statements only: expressions are not visited)."""
    from ptoc.ir.nodes import ForStmt, IfStmt, ScopeStmt, WhileStmt

    stack = [st for f in program.functions for st in f.body if f.func_type not in KERNEL_TYPES]
    while stack:
        st = stack.pop()
        if isinstance(st, ForStmt):
            yield st
        if isinstance(st, (ForStmt, WhileStmt, ScopeStmt)):
            stack.extend(st.body)
        elif isinstance(st, IfStmt):
            stack.extend(st.then_body + st.else_body)


def _full_op_names(program: Program, ctx) -> Program:
    if not any((isinstance(n, Call) and n.kind == "op" and (n.op in registry.SHORT or n.op == "tensor.assemble"))
               or isinstance(n, GetItem)
               or (isinstance(n, AssignStmt) and _annotated_fill_space(n)) for n in _calls(program)):
        return program
    from ptoc.ir.verifier import function_types

    types = function_types(program, ctx)
    funcs = []
    for f in program.functions:
        funcs.append(_FullNames(types.get(f.name, {}), ctx).mutate(f))
    if all(a is b for a, b in zip(funcs, program.functions)):
        return program
    return replace(program, functions=tuple(funcs))


def _calls(program: Program):
    """The calls, element reads and assignments of the program's functions (nothing else holds them)."""
    from ptoc.ir.verifier import NodeIndex

    # each function's node index rather than a walk: the front end runs this under the compile's cache,
    # whose indexes the pipeline's input checks and first passes take on for the functions left unchanged
    for f in program.functions:
        index = NodeIndex.get(f)
        yield from index.of(Call)
        yield from index.of(GetItem)
        yield from index.of(AssignStmt)


__all__ = ["full_op_names"]
