"""NormalizeReturnOrder: a kernel returns its output parameters themselves, in parameter order.

What it does
------------
1. In every kernel (InCore, AIC, AIV) and every launch wrapper (Group, Spmd), each returned tensor that
   is the buffer of a tensor parameter (followed through stores, assembles, loop-carried values, copies
   and calls of functions that return a parameter: `ptoc.analysis.outline.trace_to_param`) is returned
   as that parameter: `out_1 = pl.tile.store(t, [0], out); return out_1` becomes `... return out`.
   A wrapper that returns the whole tuple of a call (`r = self.kernel(x, a, b); return r`) while
   declaring one result per element (`-> tuple[T1, T2]`) returns the parameters one by one instead, when
   every element is one; a wrapper declaring one `pl.Tuple[...]` result keeps its single value.
2. In a kernel whose return statement closes its body, the returned values are permuted so the k-th
   value is the k-th Out/InOut parameter (its declared result types move with them), when every
   Out/InOut parameter is returned exactly once.
3. Every other function reads the results of calls (and `pl.submit`s) of a permuted kernel at the
   permuted positions: `a = r[0]` becomes `a = r[1]`. A submit's trailing task id stays last.

The call's positional arguments are unchanged: only the order of the results changes, so the caller
binds every result to the buffer it always was.

Where ptoc differs from PyPTO: the lineage follows assembles into a parameter too (PyPTO stops at
them), so `return pl.assemble(out, t, [0, 0])` is returned as `out` as well; the value is the same
buffer with the same shape. Otherwise as PyPTO.
"""

from __future__ import annotations

from ptoc.analysis.flow import tensor_aliases
from ptoc.analysis.handing import calls_any, hand_over_same
from ptoc.analysis.outline import trace_to_param
from ptoc.ir.nodes import (
    AssignStmt,
    Call,
    ConstInt,
    Function,
    GetItem,
    Program,
    ReturnStmt,
    Stmt,
    TensorType,
    TupleExpr,
    Var,
)
from ptoc.ir.visitor import Mutator, replace, walk
from ptoc.passes.common import statements
from ptoc.passes.manager import Pass
from ptoc.ir.nodes import KERNEL_TYPES as KERNELS

WRAPPERS = ("Group", "Spmd")


class NormalizeReturnOrder(Pass):
    name = "NormalizeReturnOrder"
    stage = "layout"
    summary = "kernels return their output parameters themselves, in parameter order; callers follow"

    def run(self, program: Program, ctx) -> Program:
        perms: dict[str, list[int]] = {}
        funcs: list[Function] = []
        changed = False
        a = _Analysis()
        for f in program.functions:
            if f.func_type not in KERNELS + WRAPPERS or not a.nodes(f, ReturnStmt):
                funcs.append(f)
                continue
            g = _explicit_returns(f, program, a)
            if f.func_type in KERNELS:
                perm = _permutation(g)
                if perm is not None:
                    g = _reorder(g, perm)
                    perms[g.name] = perm
            changed |= g is not f
            funcs.append(g)
        if not changed:
            return program
        if perms:
            funcs = [f if f.func_type in KERNELS else _remap_results(f, perms) for f in funcs]
        # a function rebuilt here defines what it defined before, with the same types (a return statement
        # defines nothing), unless it calls a kernel whose results were permuted: hand its types over
        for f, g in zip(program.functions, funcs):
            if g is not f and not calls_any(g, perms):
                hand_over_same(self, program, f, g)
        return replace(program, functions=tuple(funcs))


class _Analysis:
    """What the pass reads of the functions of one program, each found once: their statements by class
    and what `trace_to_param` reads of a body."""

    def __init__(self):
        self._facts: dict[int, tuple[Function, tuple]] = {}
        self._stmts: dict[int, tuple[Function, dict[type, list]]] = {}

    def nodes(self, f: Function, cls: type) -> list:
        """The statements of class `cls` in `f`, in program order. (The pass asks for statements only: a
        look at the bodies, not the function's node index, which walks every expression and type and which
        the passes after it, changing most of these functions again, would not use.)"""
        known = self._stmts.get(id(f))
        if known is None or known[0] is not f:
            by: dict[type, list] = {}
            for n in statements(f.body):
                by.setdefault(n.__class__, []).append(n)
            known = self._stmts[id(f)] = (f, by)
        return known[1].get(cls, [])

    def facts(self, f: Function) -> tuple:
        """`body_facts(f.body)`, its definitions read off the statements."""
        known = self._facts.get(id(f))
        if known is None or known[0] is not f:
            known = self._facts[id(f)] = (f, (_defs(f, self), tensor_aliases(f.body)))
        return known[1]


def _first_return(f: Function, a: _Analysis) -> ReturnStmt | None:
    rets = a.nodes(f, ReturnStmt)
    return rets[0] if rets else None


def _defs(f: Function, a: _Analysis) -> dict[str, object]:
    out: dict[str, object] = {}
    for n in a.nodes(f, AssignStmt):
        out.setdefault(n.target.name, n.value)
    return out


def _param_index(f: Function, e, program: Program, a: _Analysis) -> int | None:
    """The position of the tensor parameter whose buffer the returned `e` is, if any."""
    if not isinstance(e, Var):
        return None
    names = [p.name for p in f.params]
    root = trace_to_param(e.name, f.body, names, program, facts=a.facts(f))
    if root is None:
        return None
    k = names.index(root)
    return k if isinstance(f.params[k].type, TensorType) else None


def _forwarded(f: Function, value, program: Program, a: _Analysis) -> list[int | None] | None:
    """For `return r` where `r` is the whole tuple of a call (or a tuple written out), the parameter
    each element is; None when `r` is not such a value."""
    defs = _defs(f, a)
    seen: set[str] = set()
    while isinstance(value, Var) and value.name not in seen:
        seen.add(value.name)
        value = defs.get(value.name)
    if isinstance(value, TupleExpr):
        return [_param_index(f, v, program, a) for v in value.items]
    if not (isinstance(value, Call) and value.kind in ("func", "submit")):
        return None
    callee = program.function(value.op)
    if callee is None:
        return None
    inner = _returned_params(callee, program, a)
    out: list[int | None] = []
    for k in inner:
        arg = value.args[k] if k is not None and k < len(value.args) else None
        out.append(_param_index(f, arg, program, a))
    return out


def _returned_params(f: Function, program: Program, a: _Analysis) -> list[int | None]:
    ret = _first_return(f, a)
    if ret is None:
        return []
    if len(ret.values) == 1 and len(f.returns) > 1:
        return _forwarded(f, ret.values[0], program, a) or [None]
    return [_param_index(f, v, program, a) for v in ret.values]


class _ReplaceFirstReturn(Mutator):
    def __init__(self, new: ReturnStmt):
        self.new = new
        self.done = False

    def pre_ReturnStmt(self, s: ReturnStmt):
        if self.done:
            return s
        self.done = True
        return self.new


def _explicit_returns(f: Function, program: Program, a: _Analysis) -> Function:
    ret = _first_return(f, a)
    if ret is None or not ret.values:
        return f
    mapping = _returned_params(f, program, a)
    if len(ret.values) == 1 and len(mapping) > 1:
        # a wrapper forwarding a call's whole tuple: one value per declared result, when each is a parameter
        if len(f.returns) != len(mapping) or any(k is None for k in mapping):
            return f
        values = tuple(Var(f.params[k].name, span=ret.span) for k in mapping)
    else:
        if len(mapping) != len(ret.values):
            return f
        values = tuple(v if k is None or isinstance(v, Var) and v.name == f.params[k].name
                       else Var(f.params[k].name, span=v.span) for v, k in zip(ret.values, mapping))
    if values == ret.values:
        return f
    new = ReturnStmt(values, span=ret.span)
    if f.body and f.body[-1] is ret:  # the first return is the last statement: nothing else to rebuild
        return replace(f, body=f.body[:-1] + (new,))
    return replace(f, body=_ReplaceFirstReturn(new).mutate(f.body))


def _permutation(f: Function) -> list[int] | None:
    """perm[i] = the position the i-th returned value moves to; None when nothing moves or the returns
    do not map one to one onto the Out/InOut parameters."""
    if not f.body or not isinstance(f.body[-1], ReturnStmt):
        return None
    ret = f.body[-1]
    outs = [k for k, p in enumerate(f.params) if p.direction in ("Out", "InOut")]
    if not outs or len(outs) > len(ret.values):
        return None
    names = [p.name for p in f.params]
    pos = {k: i for i, k in enumerate(outs)}
    perm = []
    for i, v in enumerate(ret.values):
        k = names.index(v.name) if isinstance(v, Var) and v.name in names else None
        perm.append(pos.get(k, i) if k is not None else i)
    if sorted(perm) != list(range(len(perm))) or perm == list(range(len(perm))):
        return None
    return perm


def _reorder(f: Function, perm: list[int]) -> Function:
    ret = f.body[-1]
    values: list = [None] * len(perm)
    for i, j in enumerate(perm):
        values[j] = ret.values[i]
    returns = f.returns
    if len(returns) == len(perm):
        new_types: list = [None] * len(perm)
        for i, j in enumerate(perm):
            new_types[j] = returns[i]
        returns = tuple(new_types)
    body = f.body[:-1] + (ReturnStmt(tuple(values), span=ret.span),)
    return replace(f, body=body, returns=returns)


def _remap_results(f: Function, perms: dict[str, list[int]]) -> Function:
    """`f` reading the results of calls of permuted kernels at their new positions."""
    results: dict[str, list[int]] = {}
    for n in walk(f):
        if isinstance(n, AssignStmt) and isinstance(n.value, Call) and n.value.kind in ("func", "submit") \
                and n.value.op in perms:
            results[n.target.name] = perms[n.value.op]
    if not results:
        return f

    class _Remap(Mutator):
        def mutate_GetItem(self, e: GetItem):
            perm = results.get(e.value.name) if isinstance(e.value, Var) else None
            if perm is None or not isinstance(e.index, ConstInt) or not 0 <= e.index.value < len(perm):
                return e
            return replace(e, index=replace(e.index, value=perm[e.index.value]))

    body: tuple[Stmt, ...] = _Remap().mutate(f.body)
    return f if body is f.body else replace(f, body=body)
