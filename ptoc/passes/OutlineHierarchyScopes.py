"""OutlineHierarchyScopes: every `pl.at(level=...)` scope of a level other than CORE_GROUP becomes a function.

Purpose
-------
`with pl.at(level=pl.Level.HOST, role=pl.Role.Orchestrator):` (any level but CORE_GROUP, with or without
a role) marks code that runs at that level of the machine. This pass moves each such scope of a plain
(Opaque) function into a function of its own that carries the level and role in its decorator, and
leaves a call where the scope was. It runs after ConvertToSSA and before OutlineIncoreScopes, so a
CORE_GROUP scope inside a HOST scope ends up in the HOST function and is outlined from there.

Before::

    @pl.function
    def main(self, x: pl.Tensor[[64], pl.FP32]) -> pl.Tensor[[64], pl.FP32]:
        with pl.at(level=pl.Level.HOST, role=pl.Role.Orchestrator):
            y: pl.Tensor[[64], pl.FP32] = pl.add(x, x)
        return y

After::

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def main_host_orch_0(self, x: pl.Tensor[[64], pl.FP32]) -> pl.Tensor[[64], pl.FP32]:
        y: pl.Tensor[[64], pl.FP32] = pl.add(x, x)
        return y

    @pl.function
    def main(self, x: pl.Tensor[[64], pl.FP32]) -> pl.Tensor[[64], pl.FP32]:
        y: pl.Tensor[[64], pl.FP32] = self.main_host_orch_0(x)
        return y

Rules
-----
- Which scopes: `pl.at` whose level is not CORE_GROUP, in Opaque functions only, at any depth of loops,
  branches and other scopes. The function holding them keeps its type.
- Name: `<function>_<level>[_orch | _sub_worker]_<n>` (level in lower case, `CLUSTER_0` as `cluster0`),
  n counting the function's scopes from 0; `name_hint="s"` names it `s`. A scope nested in another
  one is named after the outer function (`main_global_orch_0_host_orch_0`), counting from 0 again. A
  name the function already uses gets `_0`, `_1`, ...; one another function has is prefixed with the
  function's name.
- Parameters: the values the scope reads that are defined before it, in first-read order; a tensor
  the scope writes (store or assemble destination) is `pl.Out`, or `pl.InOut` when it also reads it.
- Results: the values the scope defines that are read after it, in definition order; one whose buffer
  is a parameter's is returned as that parameter. A tensor the scope only stores into is not a result:
  the caller sees the store through the buffer it passed. A scope without results gives a function
  without a return statement, called as a statement.
- Function order: the outlined functions first (inner before outer), then the program's functions.

- A scope with a task id (`with pl.at(...) as tid:`) is submitted, as PyPTO does:
  `ret = pl.submit(self.f, args)` (with the scope's `deps=[...]` as the submit's `deps=`), then each
  result `y = ret[k]` and last the task id `tid = ret[n]`, also for one result or none.
"""

from __future__ import annotations

from dataclasses import replace

from ptoc.analysis.outline import OutlineStyle, ScopeOutliner, has_scope, scope_kwarg
from ptoc.context import CompileContext
from ptoc.ir.nodes import EnumLit, Function, Program, ScopeStmt
from ptoc.passes.common import is_hierarchy_scope
from ptoc.passes.manager import Pass

ROLE_SUFFIX = {"Orchestrator": "_orch", "SubWorker": "_sub_worker"}


def _suffix(scope: ScopeStmt) -> str:
    level = scope_kwarg(scope, "level", 0)
    role = scope_kwarg(scope, "role", 1)
    name = level.member.lower().replace("cluster_", "cluster") if isinstance(level, EnumLit) else "undefined"
    if isinstance(role, EnumLit):
        name += ROLE_SUFFIX.get(role.member, "_" + role.member.lower())
    return f"_{name}_"


def _decorator(scope: ScopeStmt) -> tuple:
    out = [("level", scope_kwarg(scope, "level", 0))]
    role = scope_kwarg(scope, "role", 1)
    if role is not None:
        out.append(("role", role))
    return tuple(out)


STYLE = OutlineStyle(matches=is_hierarchy_scope, func_type="Opaque", suffix=_suffix, decorator_kwargs=_decorator,
                     pypto_names=True, return_stores=False, return_params=True, call_directions=True,
                     submit_task_ids=True)


class OutlineHierarchyScopes(Pass):
    name = "OutlineHierarchyScopes"
    stage = "ssa"
    summary = "move each pl.at scope of a level other than CORE_GROUP into a function carrying its level and role"
    requires = frozenset({"ssa"})
    produces = frozenset()

    def run(self, program: Program, ctx: CompileContext) -> Program:
        todo = {f.name for f in program.functions if f.func_type == "Opaque" and has_scope(f.body, is_hierarchy_scope)}
        if not todo:
            return program
        types = self.types(program, ctx)
        taken = {f.name for f in program.functions}
        made: list[Function] = []
        funcs: list[Function] = []
        for f in program.functions:
            if f.name not in todo:
                funcs.append(f)
                continue
            o = ScopeOutliner(f, types.get(f.name, {}), taken, STYLE)
            body = o.block(f.body, set())
            made.extend(o.made)
            funcs.append(replace(f, body=body))
        return replace(program, functions=(*made, *funcs))
