"""InjectGmPipeBuffer: give the cross-core pipes of a2a3 their GM slot buffer.

Purpose
-------
On a2a3 the cube and vector cores have no direct path between their buffers: a tile pushed across a
pipe goes through a ring in global memory, which PTOAS's pipe initialisation takes as its
`gm_slot_buffer`. This pass threads that GM tensor from the orchestration down to the kernels: every
function that initialises a pipe gets an Out parameter `__gm_pipe_buffer: pl.Tensor[[1], pl.FP32]`, its
callers forward their own (and get the parameter too), and an orchestration function creates one per call
(`gm_pipe_buffer_<n> = pl.tensor.create([1], dtype=pl.FP32, layout=pl.TensorLayout.ND, manual_dep=True)`
right before the call; a task launch `pl.submit(self.k, x, out)` passes it alike). On a5 (a direct cube <->
vector path) the pass does nothing.

Before (a2a3)::

    @pl.function(type=pl.FunctionType.AIC)
    def k_aic(self, x, out):
        ...
        pl.system.aic_initialize_pipe(peer, 0, dir_mask=1, slot_size=4096, slot_num=8)
    @pl.function(type=pl.FunctionType.Group)
    def k(self, x, out):
        self.k_aic(x, out)
        ...
    @pl.function(type=pl.FunctionType.Orchestration)
    def main(self, x, out):
        r = self.k(x, out)

After::

    def k_aic(self, x, out, __gm_pipe_buffer: pl.Out[pl.Tensor[[1], pl.FP32]]): ...
    def k(self, x, out, __gm_pipe_buffer: pl.Out[pl.Tensor[[1], pl.FP32]]):
        self.k_aic(x, out, __gm_pipe_buffer)
    def main(self, x, out):
        gm_pipe_buffer_0: pl.Tensor[[1], pl.FP32] = pl.tensor.create([1], dtype=pl.FP32, layout=pl.TensorLayout.ND, manual_dep=True)
        r = self.k(x, out, gm_pipe_buffer_0)

The `[1]` tensor is PyPTO's placeholder, which its host code generation sizes from the pipe set-up; a
host driving ptoc's kernels allocates `slot_size * slot_num` bytes per pipe direction (the kernels
manifest lists the parameter). A function that already has the parameter is left as it is.
"""

from __future__ import annotations

from ptoc.ir import dtypes
from ptoc.ir.nodes import (
    AssignStmt,
    Call,
    ConstBool,
    ConstInt,
    DTypeLit,
    EnumLit,
    EvalStmt,
    ForStmt,
    Function,
    IfStmt,
    ListExpr,
    Param,
    Program,
    ScopeStmt,
    Stmt,
    TensorType,
    Var,
    WhileStmt,
)
from ptoc.ir.visitor import replace
from ptoc.passes.common import op_names
from ptoc.passes.manager import Pass

PARAM = "__gm_pipe_buffer"
INIT_OPS = ("system.aic_initialize_pipe", "system.aiv_initialize_pipe")
# calls of a program function: plain, or launched as a task (`pl.submit` / `pl.spmd_submit`, whose `args`
# are the kernel's arguments, so the buffer is forwarded the same way)
CALL_KINDS = ("func", "submit", "spmd_submit")


def _buffer_type() -> TensorType:
    return TensorType((ConstInt(1, dtypes.INDEX),), dtypes.FP32)


class InjectGmPipeBuffer(Pass):
    name = "InjectGmPipeBuffer"
    stage = "layout"
    summary = "a2a3: thread the GM slot buffer of cross-core pipes from the orchestration to the kernels"
    requires = frozenset()
    produces = frozenset()

    def applies(self, program: Program, ctx) -> bool:
        return getattr(ctx, "arch", "a2a3") == "a2a3" and any(
            op_names(op) & set(INIT_OPS) for f in program.functions for op in self.index(f).ops())

    def run(self, program: Program, ctx) -> Program:
        if getattr(ctx, "arch", "a2a3") != "a2a3":
            return program
        funcs = {f.name: f for f in program.functions}
        seeds = [f.name for f in program.functions
                 if any(op_names(op) & set(INIT_OPS) for op in self.index(f).ops())]
        if not seeds or all(funcs[n].param(PARAM) is not None for n in seeds):
            return program  # nothing to thread, or threaded already (the pass is idempotent)
        # what each function calls, found once (the search below asks it of every function per seed)
        # and, from it, the callers of each function in program order
        callers_of: dict[str, list[Function]] = {}
        for f in program.functions:
            for name in _callees(f, self.index(f).of(Call)):
                callers_of.setdefault(name, []).append(f)
        with_param: set[str] = set()
        orch_callees: set[str] = set()
        work = list(seeds)
        while work:
            name = work.pop(0)
            if name in with_param:
                continue
            with_param.add(name)
            for caller in callers_of.get(name, ()):
                if caller.name == name:
                    continue
                if caller.func_type == "Orchestration":
                    orch_callees.add(name)
                elif caller.name not in with_param:
                    work.append(caller.name)
        out = []
        for f in program.functions:
            g = f
            if f.name in with_param and f.param(PARAM) is None:
                g = replace(g, params=g.params + (Param(PARAM, _buffer_type(), "Out"),))
            if f.func_type == "Orchestration":
                body = _create_per_call(g.body, with_param, [0])
                if not _same(body, g.body):
                    g = replace(g, body=body)
            elif f.name in with_param:
                g = replace(g, body=_forward(g.body, with_param, funcs))
            out.append(g)
            if g is not f and f.func_type != "Orchestration":
                _hand_over(self, program, f, g)
        return replace(program, functions=tuple(out))


def _same(a: tuple, b: tuple) -> bool:
    """The very same statements: an orchestration function that calls no pipe user is kept as it is (its
    value types, known to the pipeline, stay known)."""
    return len(a) == len(b) and all(x is y for x, y in zip(a, b))


def _hand_over(p: Pass, program: Program, f: Function, g: Function) -> None:
    """Hand over the value types of `g`, `f` with the buffer parameter (and forwarding it to its calls):
    `f`'s, with the parameter's after the other parameters'. A call's value keeps its type (the callee's
    results did not change). Nothing when the pipeline does not know `f`'s types."""
    known = p.known_types(program, f)
    if known is None or (PARAM in known and f.param(PARAM) is None):
        return
    if f.param(PARAM) is not None:
        p.hand_over(g, known)
        return
    items = list(known.items())
    n = len(f.params)
    p.hand_over(g, dict(items[:n] + [(PARAM, g.params[-1].type)] + items[n:]))


def _callees(f: Function, calls) -> frozenset[str]:
    """The functions `f` calls: `calls` are its calls (its node index's)."""
    return frozenset(n.op for n in calls if n.kind in CALL_KINDS)


def _add_arg(c: Call, arg) -> Call:
    return replace(c, args=c.args + (arg,))


def _forward(body: tuple[Stmt, ...], targets: set[str], funcs: dict) -> tuple[Stmt, ...]:
    out = []
    for s in body:
        c = s.value if isinstance(s, AssignStmt) else s.expr if isinstance(s, EvalStmt) else None
        if isinstance(c, Call) and c.kind in CALL_KINDS and c.op in targets and not _has_param(funcs.get(c.op), c):
            c2 = _add_arg(c, Var(PARAM))
            s = replace(s, value=c2) if isinstance(s, AssignStmt) else replace(s, expr=c2)
        elif isinstance(s, (ForStmt, WhileStmt, ScopeStmt)):
            s = replace(s, body=_forward(s.body, targets, funcs))
        elif isinstance(s, IfStmt):
            s = replace(s, then_body=_forward(s.then_body, targets, funcs),
                        else_body=_forward(s.else_body, targets, funcs))
        out.append(s)
    return tuple(out)


def _has_param(f: Function | None, c: Call) -> bool:
    """The call already passes the buffer (the callee declared it before this pass)."""
    return f is not None and f.param(PARAM) is not None and len(c.args) >= len(f.params)


def _create_per_call(body: tuple[Stmt, ...], targets: set[str], counter: list[int]) -> tuple[Stmt, ...]:
    out: list[Stmt] = []
    for s in body:
        c = s.value if isinstance(s, AssignStmt) else s.expr if isinstance(s, EvalStmt) else None
        if isinstance(c, Call) and c.kind in CALL_KINDS and c.op in targets:
            buf = Var(f"gm_pipe_buffer_{counter[0]}")
            counter[0] += 1
            create = Call("tensor.create", (ListExpr((ConstInt(1, dtypes.INDEX),)),), (
                ("dtype", DTypeLit(dtypes.FP32)), ("layout", EnumLit("TensorLayout", "ND")),
                ("manual_dep", ConstBool(True))))
            out.append(AssignStmt(buf, create, _buffer_type(), span=s.span))
            c2 = _add_arg(c, buf)
            s = replace(s, value=c2) if isinstance(s, AssignStmt) else replace(s, expr=c2)
        elif isinstance(s, (ForStmt, WhileStmt, ScopeStmt)):
            s = replace(s, body=_create_per_call(s.body, targets, counter))
        elif isinstance(s, IfStmt):
            s = replace(s, then_body=_create_per_call(s.then_body, targets, counter),
                        else_body=_create_per_call(s.else_body, targets, counter))
        out.append(s)
    return tuple(out)


__all__ = ["InjectGmPipeBuffer"]
