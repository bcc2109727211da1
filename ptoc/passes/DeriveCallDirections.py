"""DeriveCallDirections: every call of a program function states how it uses each argument.

Purpose
-------
A runtime that schedules the kernels of a whole program needs, per call, which tensors the call reads,
which it writes into a buffer that already holds data the call must wait for, and which it only fills.
This pass writes that on every call of a program function as `attrs={"arg_directions": [...]}`, one
`pl.adir.<direction>` per argument, from the callee's parameter directions and from where the
argument's buffer comes from. It runs last, on the lowered program. It also makes the parameter
directions of Group and Spmd functions (which only pass their parameters on) as strong as the calls
inside them need.

Before::

    @pl.function(type=pl.FunctionType.Orchestration)
    def main(self, x: pl.Tensor[[64], pl.FP32], dst: pl.Tensor[[64], pl.FP32]) -> pl.Tensor[[64], pl.FP32]:
        r: pl.Tensor[[64], pl.FP32] = self.kernel(x, dst)       # kernel(x: In, out: Out)
        return r

After::

        r: pl.Tensor[[64], pl.FP32] = self.kernel(x, dst, attrs={"arg_directions": [pl.adir.input,
                                                                                   pl.adir.output_existing]})

Rules
-----
- Which calls: calls of functions of the program (not operators), plain or launched as tasks
  (`pl.submit` / `pl.spmd_submit`, whose launch keywords stay as they are), whose argument count equals
  the callee's parameter count (a launch may leave out Out parameters the runtime allocates: its
  arguments get directions, the left-out parameters none) and that state no `arg_directions` yet,
  in every function.
- A non-tensor argument is `scalar`. A tensor passed to an `In` parameter is `input`, to an `InOut`
  parameter `inout`.
- A tensor passed to an `Out` parameter is `output_existing` (the call only fills the buffer) unless the
  buffer may hold data the call must not overtake, then `inout`: the call is inside a sequential loop
  (`pl.range`, `while`; not `pl.parallel`), or an earlier call of the function (in program order, a loop
  counting as all of its body) already wrote the same buffer, or the buffer is the function's own
  `pl.InOut` parameter. The buffer of a value is found by following stores, assembles, loop-carried
  values, copies, calls returning a parameter and the first value of a task launch whose kernel returns
  a parameter back to a parameter or a `pl.create_tensor`.
- `"arg_direction_overrides": [i, ...]` in the call's attrs makes argument i `no_dep`. An argument
  written `pl.no_dep(x)` is the same marker: the pass passes `x` itself and lists the slot in
  `arg_direction_overrides` (PyPTO's parser does this when it reads the call; ptoc's front end keeps
  the text's `pl.tensor.no_dep(x)` until here, so the dumps before this pass show it).
- Group and Spmd functions: a parameter passed to an inner call's `Out` parameter becomes at least
  `pl.Out`, one passed to an `InOut` parameter `pl.InOut` (repeated until nothing changes, so chains of
  wrappers agree).

Where it differs from PyPTO: PyPTO marks a buffer whose root is ambiguous (two branches yielding
different buffers) `inout`; ptoc follows the first branch's buffer.
"""

from __future__ import annotations

from ptoc.analysis.flow import tensor_aliases
from ptoc.analysis.outline import ASSEMBLE_OPS, returned_param
from ptoc.context import CompileContext
from ptoc.ir.dtypes import INDEX
from ptoc.ir.nodes import (
    AssignStmt,
    Call,
    ConstInt,
    DictExpr,
    EnumLit,
    EvalStmt,
    Expr,
    ForStmt,
    Function,
    GetItem,
    IfStmt,
    ListExpr,
    Param,
    Program,
    ScopeStmt,
    Stmt,
    StrLit,
    TensorType,
    Var,
    WhileStmt,
)
from ptoc.ir.verifier import _submitted_params as submitted_params
from ptoc.ir.visitor import Mutator, replace, walk
from ptoc.passes.manager import Pass

WRAPPERS = ("Group", "Spmd")
# calls of a program function: plain, or launched as a task (the kernel's arguments only, in `args`)
CALL_KINDS = ("func", "submit", "spmd_submit")
NO_DEP = ("no_dep", "tensor.no_dep")  # the marker, by its short name as written or its full name
PARALLEL_LOOPS = ("parallel",)


def _attrs(call: Call) -> dict[str, Expr]:
    a = call.kwarg("attrs")
    if not isinstance(a, DictExpr):
        return {}
    return {k.value: v for k, v in a.items if isinstance(k, StrLit)}


def _wrapper_directions(program: Program) -> Program:
    """Group/Spmd parameters raised to what the calls inside them do with them, to a fixed point."""
    wrappers = {f.name: f for f in program.functions if f.func_type in WRAPPERS}
    if not wrappers:
        return program
    funcs_by_name = _by_name(program)
    dirs = {n: [p.direction for p in f.params] for n, f in wrappers.items()}
    rank = {"In": 0, "Out": 1, "InOut": 2}
    changed = True
    while changed:
        changed = False
        for name, f in wrappers.items():
            index = {p.name: k for k, p in enumerate(f.params)}
            for n in walk(f):
                if not (isinstance(n, Call) and n.kind in CALL_KINDS):
                    continue
                callee = funcs_by_name.get(n.op)
                if callee is None:
                    continue
                inner = dirs.get(n.op) or [p.direction for p in callee.params]
                for a, d in zip(n.args, inner):
                    k = index.get(a.name) if isinstance(a, Var) else None
                    if k is not None and rank[d] > rank[dirs[name][k]] and d != "In":
                        dirs[name][k] = d
                        changed = True
    funcs = []
    for f in program.functions:
        if f.name in wrappers and dirs[f.name] != [p.direction for p in f.params]:
            f = replace(f, params=tuple(Param(p.name, p.type, d, span=p.span) for p, d in zip(f.params, dirs[f.name])))
        funcs.append(f)
    if all(a is b for a, b in zip(funcs, program.functions)):
        return program
    return replace(program, functions=tuple(funcs))


def _by_name(program: Program) -> dict[str, Function]:
    """name -> function, as `Program.function` finds it (the first of the name), in one dict."""
    out: dict[str, Function] = {}
    for f in program.functions:
        out.setdefault(f.name, f)
    return out


class _Roots:
    """The buffer each tensor name of a function is: a parameter, a local allocation, or itself."""

    def __init__(self, f: Function, program: Program, funcs: dict[str, Function], assigns: list[AssignStmt]):
        self.alias = tensor_aliases(f.body)
        self.defs: dict[str, Expr] = {}
        for n in assigns:
            self.defs.setdefault(n.target.name, n.value)
        self.params = {p.name for p in f.params}
        self.program = program
        self.funcs = funcs
        self.cache: dict[str, str] = {}

    def root(self, name: str) -> str:
        if name in self.cache:
            return self.cache[name]
        seen: set[str] = set()
        n = name
        while n not in seen:
            seen.add(n)
            if n in self.params:
                break
            if self.alias.get(n, n) != n:
                n = self.alias[n]
                continue
            v = self.defs.get(n)
            nxt = None
            if isinstance(v, Call) and v.kind == "op" and v.op in ASSEMBLE_OPS and v.args:
                nxt = v.args[0]
            elif isinstance(v, Call) and v.kind == "func":
                callee = self.funcs.get(v.op)
                k = returned_param(callee, self.program) if callee is not None else None
                nxt = v.args[k] if k is not None and k < len(v.args) else None
            elif isinstance(v, GetItem) and isinstance(v.value, Var) and v.index == ConstInt(0, INDEX):
                nxt = self.launched_result(self.defs.get(v.value.name))
            if not isinstance(nxt, Var):
                break
            n = nxt.name
        self.cache[name] = n
        return n


    def launched_result(self, launch) -> Expr | None:
        """The argument whose buffer a task launch's first value is (`o, tid = pl.submit(self.k, x, y)`:
        y when k returns its Out parameter), or None."""
        if not (isinstance(launch, Call) and launch.kind in ("submit", "spmd_submit")):
            return None
        callee = self.funcs.get(launch.op)
        k = returned_param(callee, self.program) if callee is not None else None
        params = _params_of(launch, callee) if k is not None else None
        if not params or callee.params[k] not in params:
            return None
        return _unmarked(launch.args[params.index(callee.params[k])])


class _Derive(Mutator):
    """Walks one function in program order: which buffers earlier calls wrote, how deep in sequential loops
    each call is, and the directions of every call of a program function."""

    def __init__(self, f: Function, program: Program, types: dict, funcs: dict[str, Function] | None = None,
                 assigns: list[AssignStmt] | None = None):
        self.f = f
        self.program = program
        self.funcs = _by_name(program) if funcs is None else funcs
        self.types = types
        if assigns is None:
            assigns = [n for n in walk(f) if isinstance(n, AssignStmt)]
        self.roots = _Roots(f, program, self.funcs, assigns)
        self.inout_params = {p.name for p in f.params if p.direction == "InOut"}

    def written(self, body: tuple[Stmt, ...]) -> set[str]:
        """The buffers the calls of a block write (Out/InOut arguments), at any depth."""
        out: set[str] = set()
        for n in (m for s in body for m in walk(s)):
            if isinstance(n, Call) and n.kind in CALL_KINDS and self.funcs.get(n.op) is not None:
                for p, a in zip(_params_of(n, self.funcs[n.op]) or (), map(_unmarked, n.args)):
                    if p.direction != "In" and isinstance(a, Var):
                        out.add(self.roots.root(a.name))
        return out

    def block(self, body: tuple[Stmt, ...], seen: set[str], depth: int) -> tuple[Stmt, ...]:
        out = []
        for s in body:
            out.append(self.stmt(s, seen, depth))
        return tuple(out)

    def stmt(self, s: Stmt, seen: set[str], depth: int) -> Stmt:
        if isinstance(s, ForStmt):
            inner = depth if s.kind in PARALLEL_LOOPS else depth + 1
            body = self.block(s.body, set(seen), inner)
            seen |= self.written(s.body)
            return s if body == s.body else replace(s, body=body)
        if isinstance(s, WhileStmt):
            body = self.block(s.body, set(seen), depth + 1)
            seen |= self.written(s.body)
            return s if body == s.body else replace(s, body=body)
        if isinstance(s, IfStmt):
            then_b = self.block(s.then_body, set(seen), depth)
            else_b = self.block(s.else_body, set(seen), depth)
            seen |= self.written(s.then_body) | self.written(s.else_body)
            return s if (then_b, else_b) == (s.then_body, s.else_body) else replace(s, then_body=then_b,
                                                                                     else_body=else_b)
        if isinstance(s, ScopeStmt):
            body = self.block(s.body, seen, depth)
            return s if body == s.body else replace(s, body=body)
        top = s.value if isinstance(s, AssignStmt) else s.expr if isinstance(s, EvalStmt) else None
        first = self.first_writes(top, seen) if isinstance(top, Call) else set()
        new = _CallDirections(self, first, depth).mutate(s)
        if isinstance(top, Call):
            seen |= self.written((EvalStmt(top),))
        return new

    def first_writes(self, call: Call, seen: set[str]) -> set[str]:
        """The buffers this statement's call writes through Out parameters that no earlier call wrote."""
        callee = self.funcs.get(call.op) if call.kind in CALL_KINDS else None
        if callee is None:
            return set()
        return {self.roots.root(a.name) for p, a in zip(_params_of(call, callee) or (), map(_unmarked, call.args))
                if p.direction == "Out" and isinstance(a, Var) and self.roots.root(a.name) not in seen}

    def directions(self, call: Call, first: set[str], depth: int) -> list[str] | None:
        """The call's directions, its arguments with no `pl.no_dep` marker left out"""
        callee = self.funcs.get(call.op)
        if callee is None or "arg_directions" in _attrs(call):
            return None
        params = _params_of(call, callee)
        if params is None:
            return None
        out = []
        for p, a in zip(params, map(_unmarked, call.args)):
            t = self.types.get(a.name) if isinstance(a, Var) else None
            if not isinstance(t, TensorType):
                out.append("scalar")
            elif p.direction == "In":
                out.append("input")
            elif p.direction == "InOut":
                out.append("inout")
            else:
                root = self.roots.root(a.name)
                keep = depth == 0 and root in first and root not in self.inout_params
                out.append("output_existing" if keep else "inout")
        over = _attrs(call).get("arg_direction_overrides")
        if isinstance(over, ListExpr):
            for i in over.items:
                if isinstance(i, ConstInt) and 0 <= i.value < len(out):
                    out[i.value] = "no_dep"
        return out


class _CallDirections(Mutator):
    def __init__(self, d: _Derive, first: set[str], depth: int):
        self.d = d
        self.first = first
        self.depth = depth

    def mutate_Call(self, c: Call):
        if c.kind not in CALL_KINDS:
            return c
        c = _overrides_from_markers(c)
        dirs = self.d.directions(c, self.first, self.depth)
        if dirs is None:
            return c
        entry = (StrLit("arg_directions"), ListExpr(tuple(EnumLit("adir", d) for d in dirs)))
        old = c.kwarg("attrs")
        items = (entry, *old.items) if isinstance(old, DictExpr) else (entry,)
        kwargs = tuple(kv for kv in c.kwargs if kv[0] != "attrs") + (("attrs", DictExpr(items, span=c.span)),)
        return replace(c, kwargs=kwargs)


def _params_of(call: Call, callee: Function) -> list[Param] | None:
    """The callee's parameters the call's arguments bind to, in order; None when they do not fit. A task
    launch may leave out Out/InOut parameters (the runtime allocates them; ptoc's verifier pairs the
    arguments as PyPTO does), and its left-out parameters get no direction."""
    if len(call.args) == len(callee.params):
        return list(callee.params)
    if call.kind in ("submit", "spmd_submit") and len(call.args) < len(callee.params):
        return submitted_params(callee.params, len(call.args))
    return None


def _unmarked(a: Expr) -> Expr:
    """The tensor an argument passes: `x` for `pl.no_dep(x)`"""
    if isinstance(a, Call) and a.kind == "op" and a.op in NO_DEP and len(a.args) == 1:
        return a.args[0]
    return a


def _overrides_from_markers(c: Call) -> Call:
    """`k(a, pl.no_dep(b))` as `k(a, b, attrs={"arg_direction_overrides": [1]})` (slots already listed kept,
    the list in slot order)."""
    marked = [i for i, a in enumerate(c.args) if _unmarked(a) is not a]
    if not marked:
        return c
    old = c.kwarg("attrs")
    items = list(old.items) if isinstance(old, DictExpr) else []
    listed = [i.value for k, v in items if isinstance(k, StrLit) and k.value == "arg_direction_overrides"
              and isinstance(v, ListExpr) for i in v.items if isinstance(i, ConstInt)]
    slots = ListExpr(tuple(ConstInt(i, INDEX) for i in sorted(set(listed) | set(marked))), span=c.span)
    entry = (StrLit("arg_direction_overrides"), slots)
    at = [n for n, (k, _) in enumerate(items) if isinstance(k, StrLit) and k.value == "arg_direction_overrides"]
    if at:
        items[at[0]] = entry
    else:
        items.append(entry)
    kwargs = tuple(kv for kv in c.kwargs if kv[0] != "attrs") + (("attrs", DictExpr(tuple(items), span=c.span)),)
    return replace(c, args=tuple(map(_unmarked, c.args)), kwargs=kwargs)


class DeriveCallDirections(Pass):
    name = "DeriveCallDirections"
    stage = "memory"
    summary = "write on every call of a program function how it uses each argument (arg_directions)"
    requires = frozenset()
    produces = frozenset()
    # it reads names and calls only: it works as well on a program whose names are assigned again
    accepts_non_ssa = True

    def applies(self, program: Program, ctx: CompileContext) -> bool:
        return any(self._calls(f) for f in program.functions)

    def _calls(self, f: Function) -> bool:
        """`f` calls a function of the program (a call of one of `CALL_KINDS`)."""
        return any(n.kind in CALL_KINDS for n in self.index(f).of(Call))

    def run(self, program: Program, ctx: CompileContext) -> Program:
        if not self.applies(program, ctx):
            return program
        program = _wrapper_directions(program)
        types = self.types(program, ctx)
        by_name = _by_name(program)
        funcs = []
        for f in program.functions:
            if not self._calls(f):
                funcs.append(f)
                continue
            d = _Derive(f, program, types.get(f.name, {}), by_name, self.index(f).of(AssignStmt))
            body = d.block(f.body, set(), 0)
            funcs.append(f if body == f.body else replace(f, body=body))
        if all(a is b for a, b in zip(funcs, program.functions)):
            return program
        return replace(program, functions=tuple(funcs))
