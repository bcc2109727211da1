"""OutlineIncoreScopes: every `pl.at(level=pl.Level.CORE_GROUP)` scope becomes a kernel.

Purpose
-------
Users write kernel code inline, inside `with pl.at(level=pl.Level.CORE_GROUP):` in an orchestration
(or plain) function. The tile pipeline and codegen work on kernel functions, so this pass moves each such
scope into an InCore function of its own and leaves a call to it where the scope was. The function that
held the scope becomes an Orchestration function. It runs on SSA form (after ConvertToSSA), where every
name is assigned once, so "defined in the scope" and "read in the scope" are questions about names.

Before::

    @pl.function
    def main(self, x: pl.Tensor[[64], pl.FP32]) -> pl.Tensor[[64], pl.FP32]:
        with pl.at(level=pl.Level.CORE_GROUP):
            y: pl.Tensor[[64], pl.FP32] = pl.add(x, x)
        return y

After::

    @pl.function(type=pl.FunctionType.InCore)
    def main_incore_0(self, x: pl.Tensor[[64], pl.FP32]) -> pl.Tensor[[64], pl.FP32]:
        y: pl.Tensor[[64], pl.FP32] = pl.add(x, x)
        return y

    @pl.function(type=pl.FunctionType.Orchestration)
    def main(self, x: pl.Tensor[[64], pl.FP32]) -> pl.Tensor[[64], pl.FP32]:
        y: pl.Tensor[[64], pl.FP32] = self.main_incore_0(x)
        return y

Rules
-----
- Which scopes: `pl.at` with `level=pl.Level.CORE_GROUP`, in Opaque and Orchestration functions, at any
  depth of loops, branches and other scopes (those stay where they are). Other functions and other scope
  kinds (`pl.spmd`, `pl.cluster`, other levels) are left as they are.
- A `with pl.spmd(n):` scope whose body does the per-block work itself (it calls `get_block_idx()`, and
  is not one kernel scope already) first gets a CORE_GROUP scope around its body, as PyPTO's parser
  builds it (`Spmd(InCore(body))`, the form `for b in pl.spmd(n):` has too): that body is the kernel the
  launch runs on n blocks. ptoc reads the source as written, so `ptoc fmt` keeps the `with` form.
- Name: `name_hint=` when the scope gives one, else `<function>_incore_<n>`, n counting the function's
  scopes from 0 in program order (a scope nested in an outlined one counts within it); a name that is
  taken becomes `<function>_<name>`, then `_0`, `_1`, ... while that is taken too (PyPTO's rule).
- Parameters: the values the scope reads that are defined before it (parameters of the function or
  earlier statements), in the order of their first read. Directions as PyPTO derives them: a tensor in
  a write slot (a `tile.store` or `tensor.assemble` destination, an Out/InOut parameter of a called
  program function) is written; any other use -- an operand, a loop's initial value, a return -- is a
  read. Written only: `pl.Out`; written and read: `pl.InOut`; else `In`. Only the tensor's own name in a
  write slot is a write: one that reaches its store under another name (a loop's iter_arg) stays `In`
  here, and ConvertTensorToTileOps, following the loop, makes it `Out` or `InOut` (PyPTO's split).
- Results: the values the scope defines that the function reads outside it, in definition order, then
  for every outside tensor the scope stores into, the value of that store (a bare `pl.store(...)`
  statement gets the name `<tensor>_store`). A result that is a parameter's buffer (a store's value, an
  assemble into it) is returned as that parameter, as PyPTO does. One result is returned as it is,
  several as a tuple.
- The call: `y: T = self.f(args)` for one result; for several, `ret = self.f(args)` followed by
  `y = ret[0]`, ...; a scope with no result becomes a call statement. A tensor the scope stored into is
  read after the call through the call's result: later statements of the same block (and the blocks
  nested in them) read the new name, so the order "store, then read" stays visible in SSA form.
- Function order: the outlined functions first, in the order made, then the program's functions.
- Running it again changes nothing: no CORE_GROUP scope is left.

Where ptoc deliberately differs from PyPTO
------------------------------------------
- Several store targets are returned in the order of their stores; PyPTO's order comes from a hash set
  of its IR nodes (not a property of the program).
- A loop result inside the scope that only traces back to a parameter through the loop's initial value
  is returned as the loop result, not as that parameter: the loop computes a new value.
- `pl.submit` / task ids are not produced: the call is a plain call.
"""

from __future__ import annotations

from dataclasses import replace

from ptoc.analysis.outline import OutlineStyle, ScopeOutliner, has_scope
from ptoc.context import CompileContext
from ptoc.ir.nodes import Call, EnumLit, Function, Program, ScopeStmt, Stmt
from ptoc.ir.visitor import rebuild_bodies, walk
from ptoc.passes.common import is_incore_scope
from ptoc.passes.manager import Pass

OUTER_KINDS = ("Opaque", "Orchestration")
STYLE = OutlineStyle(matches=is_incore_scope, func_type="InCore", suffix=lambda s: "_incore_", pypto_names=True,
                     return_params=True, call_directions=True, direct_writes=True)


class OutlineIncoreScopes(Pass):
    name = "OutlineIncoreScopes"
    stage = "ssa"
    summary = "move each pl.at(level=CORE_GROUP) scope into an InCore function called from an Orchestration one"
    requires = frozenset({"ssa"})
    produces = frozenset({"outlined"})

    def run(self, program: Program, ctx: CompileContext) -> Program:
        program = _wrap_inline_spmd_bodies(program)
        if not any(f.func_type in OUTER_KINDS and _has_scope(f.body) for f in program.functions):
            return program
        types = self.types(program, ctx)
        taken = {f.name for f in program.functions}
        made: list[Function] = []
        funcs: list[Function] = []
        for f in program.functions:
            if f.func_type not in OUTER_KINDS or not _has_scope(f.body):
                funcs.append(f)
                continue
            o = ScopeOutliner(f, types.get(f.name, {}), taken, STYLE)
            body = o.block(f.body, set())
            made.extend(o.made)
            funcs.append(replace(f, body=body, func_type="Orchestration"))
        return replace(program, functions=(*made, *funcs))


def _has_scope(body: tuple[Stmt, ...]) -> bool:
    return has_scope(body, is_incore_scope)


def _wrap_inline_spmd_bodies(program: Program) -> Program:
    """Each `with pl.spmd(n):` body that reads the block index itself gets a CORE_GROUP scope around it, the
    per-block kernel this pass then outlines (the form `for b in pl.spmd(n):` parses to)."""
    def block(body: tuple[Stmt, ...]) -> tuple[Stmt, ...]:
        out = tuple(_wrapped(rebuild_bodies(s, block)) for s in body)
        return body if all(a is b for a, b in zip(out, body)) else out

    funcs = []
    for f in program.functions:
        body = block(f.body) if f.func_type in OUTER_KINDS else f.body
        funcs.append(f if body is f.body else replace(f, body=body))
    if all(a is b for a, b in zip(funcs, program.functions)):
        return program
    return replace(program, functions=tuple(funcs))


def _wrapped(s: Stmt) -> Stmt:
    if not is_inline_spmd_scope(s):
        return s
    at = ScopeStmt("at", (), s.body, (("level", EnumLit("Level", "CORE_GROUP", span=s.span)),), span=s.span)
    return replace(s, body=(at,))


def is_inline_spmd_scope(s) -> bool:
    """A `with pl.spmd(n):` whose body calls `get_block_idx()` (at any depth) and is not one kernel scope
    already: PyPTO's parser makes such a body the per-block kernel. A body that only dispatches a kernel
    (which reads the index itself) stays the launch."""
    if not (isinstance(s, ScopeStmt) and s.kind == "spmd"):
        return False
    if len(s.body) == 1 and is_incore_scope(s.body[0]):
        return False
    return any(isinstance(x, Call) and x.op.rsplit(".", 1)[-1] == "get_block_idx" for b in s.body for x in walk(b))
