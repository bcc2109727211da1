"""Moving a `with pl.<scope>(...):` block into a function of its own and calling it where the block was:
the machinery the outlining passes (OutlineIncoreScopes, OutlineHierarchyScopes, OutlineClusterScopes)
share. It works on SSA form, where every name is assigned once, so "defined in the scope" and "read in
the scope" are questions about names.

What differs between the passes is an `OutlineStyle`: which scopes, the kind of the new function, its
name, its decorator keywords, and two choices PyPTO's outliner makes for some scope kinds only (whether
a tensor the scope stores into is returned, and whether a returned tensor that is a parameter's buffer
is returned as that parameter).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import field, replace

from ptoc.lazy_dataclass import dataclass
from ptoc.analysis.flow import STORE_OPS, store_destination, tensor_aliases
from ptoc.ir.names import fresh_name
from ptoc.ir.nodes import (
    AssignStmt,
    Call,
    ConstInt,
    EvalStmt,
    Expr,
    ForStmt,
    Function,
    GetItem,
    IfStmt,
    Param,
    Program,
    ReturnStmt,
    ScopeStmt,
    Stmt,
    StrLit,
    TensorType,
    Var,
    WhileStmt,
    YieldStmt,
)
from ptoc.ir.visitor import Mutator, rebuild_bodies, walk

# ops whose first argument is a destination the result is another name of (besides the stores)
ASSEMBLE_OPS = ("tensor.assemble", "assemble")


def block_defs(body: tuple[Stmt, ...]) -> list[str]:
    """Every name a block defines, at any depth, in program order."""
    out: list[str] = []
    for s in body:
        if isinstance(s, AssignStmt):
            out.append(s.target.name)
        elif isinstance(s, YieldStmt):
            out.extend(t.name for t in s.targets)
        elif isinstance(s, ForStmt):
            out.append(s.var.name)
            out.extend(a.name for a in s.iter_args)
            out.extend(block_defs(s.body))
        elif isinstance(s, WhileStmt):
            out.extend(a.name for a in s.iter_args)
            out.extend(block_defs(s.body))
        elif isinstance(s, IfStmt):
            out.extend(block_defs(s.then_body))
            out.extend(block_defs(s.else_body))
        elif isinstance(s, ScopeStmt):
            if s.var is not None:
                out.append(s.var.name)
            out.extend(block_defs(s.body))
    return out


def block_reads(node) -> list[str]:
    """Names read anywhere under `node` (statement or block), first occurrence order, targets excluded."""
    seen: dict[str, None] = {}
    stmts = node if isinstance(node, tuple) else (node,)
    for s in stmts:
        _stmt_reads(s, seen)
    return list(seen)


def _expr_reads(e: Expr | None, seen: dict[str, None]) -> None:
    if e is None:
        return
    for n in walk(e):
        if isinstance(n, Var):
            seen.setdefault(n.name, None)


def _stmt_reads(s: Stmt, seen: dict[str, None]) -> None:
    if isinstance(s, AssignStmt):
        _expr_reads(s.value, seen)
    elif isinstance(s, EvalStmt):
        _expr_reads(s.expr, seen)
    elif isinstance(s, (ReturnStmt, YieldStmt)):
        for v in s.values:
            _expr_reads(v, seen)
    elif isinstance(s, ForStmt):
        for e in (*s.args, *s.init_values, *(v for _, v in s.kwargs)):
            _expr_reads(e, seen)
        for b in s.body:
            _stmt_reads(b, seen)
    elif isinstance(s, WhileStmt):
        for e in s.init_values:
            _expr_reads(e, seen)
        _expr_reads(s.cond, seen)
        for b in s.body:
            _stmt_reads(b, seen)
    elif isinstance(s, IfStmt):
        _expr_reads(s.cond, seen)
        for b in (*s.then_body, *s.else_body):
            _stmt_reads(b, seen)
    elif isinstance(s, ScopeStmt):
        for e in (*s.args, *(v for _, v in s.kwargs)):
            _expr_reads(e, seen)
        for b in s.body:
            _stmt_reads(b, seen)


def store_calls(body: tuple[Stmt, ...]):
    """(statement, call) of every store in a block, at any depth."""
    for s in body:
        if isinstance(s, AssignStmt) and isinstance(s.value, Call) and s.value.op in STORE_OPS:
            yield s, s.value
        elif isinstance(s, EvalStmt) and isinstance(s.expr, Call) and s.expr.op in STORE_OPS:
            yield s, s.expr
        elif isinstance(s, (ForStmt, WhileStmt, ScopeStmt)):
            yield from store_calls(s.body)
        elif isinstance(s, IfStmt):
            yield from store_calls(s.then_body)
            yield from store_calls(s.else_body)


class Rename(Mutator):
    """Names -> names, wherever they occur."""

    def __init__(self, names: dict[str, str]):
        self.names = names

    def mutate_Var(self, v: Var) -> Var:
        new = self.names.get(v.name)
        return v if new is None else Var(new, span=v.span)


class _NameStores(Mutator):
    """A bare store into an outside tensor becomes `<tensor>_store = store(...)` so its value can be
    returned."""

    def __init__(self, names: dict[str, str]):
        self.names = names  # outside tensor -> the name of its store's value

    def pre_EvalStmt(self, s: EvalStmt):
        c = s.expr
        if isinstance(c, Call) and c.op in STORE_OPS and store_destination(c) in self.names:
            return AssignStmt(Var(self.names[store_destination(c)], span=s.span), c, span=s.span)
        return None


class _NameEachStore(Mutator):
    """A bare store into one of `tensors` becomes `<tensor>_store = store(...)`, a fresh name each."""

    def __init__(self, tensors: set[str], taken: set[str]):
        self.tensors = tensors
        self.taken = taken

    def pre_EvalStmt(self, s: EvalStmt):
        dst = store_destination(s.expr)
        if dst in self.tensors:
            return AssignStmt(Var(fresh_name(f"{dst}_store", self.taken), span=s.span), s.expr, span=s.span)
        return None


def _copy_store_values(body: tuple[Stmt, ...], outside: set[str], named: set[str],
                       taken: set[str]) -> tuple[Stmt, ...]:
    """After each `v = store(..., t)` the user wrote (`v` in `named`, `t` an outside tensor named as it
    is, at any depth), the copy `t_store = v`: PyPTO's outliner binds every store into a captured tensor
    to a result name of its own (`StoreEvalToAssignMutator`; a bare store is given that name directly)
    and keeps it although the function returns the parameter. The copy is dead; it is another name of
    `t`'s buffer (`tensor_aliases`), not a buffer of its own."""

    def block(stmts: tuple[Stmt, ...]) -> tuple[Stmt, ...]:
        out: list[Stmt] = []
        for s in stmts:
            s = rebuild_bodies(s, block)
            out.append(s)
            if isinstance(s, AssignStmt) and isinstance(s.value, Call) and s.value.op in STORE_OPS:
                dst = store_destination(s.value)
                if dst in outside and s.target.name in named and s.target.name != dst:
                    copy = Var(fresh_name(f"{dst}_store", taken), span=s.span)
                    out.append(AssignStmt(copy, Var(s.target.name, span=s.span), s.annotation, span=s.span))
        return tuple(out) if len(out) != len(stmts) or any(a is not b for a, b in zip(out, stmts)) else stmts

    return block(body)


def scope_kwarg(s: ScopeStmt, key: str, position: int | None = None) -> Expr | None:
    """A keyword of a scope, or its positional argument `position` when the keyword is not given."""
    v = dict(s.kwargs).get(key)
    if v is None and position is not None and len(s.args) > position:
        v = s.args[position]
    return v


def _written_slots(call: Call, program: Program | None) -> dict[int, str]:
    """Argument position -> "Out"/"InOut" for the slots a call writes: a store's destination, an assemble's
    destination, a program function's Out/InOut parameters."""
    if call.kind == "op":
        if call.op in STORE_OPS and len(call.args) >= 3:
            return {2: "Out"}
        if call.op in ASSEMBLE_OPS and call.args:
            return {0: "Out"}
        return {}
    callee = program.function(call.op) if program is not None else None
    if callee is None:
        return {}
    return {k: p.direction for k, p in enumerate(callee.params) if p.direction != "In"}


def returned_param(f: Function, program: Program | None, seen: frozenset[str] = frozenset()) -> int | None:
    """The position of the parameter whose buffer a single-result function returns, if it returns one."""
    if f.name in seen or len(f.returns) != 1 or not f.body or not isinstance(f.body[-1], ReturnStmt):
        return None
    ret = f.body[-1].values
    if len(ret) != 1 or not isinstance(ret[0], Var):
        return None
    root = trace_to_param(ret[0].name, f.body, [p.name for p in f.params], program, seen | {f.name})
    return None if root is None else [p.name for p in f.params].index(root)


def body_facts(body: tuple[Stmt, ...]) -> tuple[dict[str, Expr], dict[str, str]]:
    """What `trace_to_param` reads of `body`: each name's first assigned value, and `tensor_aliases`. A
    caller tracing several names of one body computes it once and hands it over."""
    defs: dict[str, Expr] = {}
    for st in body:
        for n in walk(st):
            if isinstance(n, AssignStmt):
                defs.setdefault(n.target.name, n.value)
    return defs, tensor_aliases(body)


def trace_to_param(name: str, body: tuple[Stmt, ...], params: list[str], program: Program | None,
                   seen: frozenset[str] = frozenset(),
                   facts: tuple[dict[str, Expr], dict[str, str]] | None = None) -> str | None:
    """The parameter among `params` whose buffer the tensor `name` of `body` is: followed through stores,
    assembles, loop-carried values, copies and calls of program functions returning a parameter.
    `facts`: `body_facts(body)` when the caller has it."""
    defs, alias = body_facts(body) if facts is None else facts
    visited: set[str] = set()
    while name not in visited:
        visited.add(name)
        if name in params:
            return name
        if alias.get(name, name) != name:
            name = alias[name]
            continue
        value = defs.get(name)
        if isinstance(value, Call) and value.kind == "op" and value.op in ASSEMBLE_OPS and value.args \
                and isinstance(value.args[0], Var):
            name = value.args[0].name
            continue
        if isinstance(value, Call) and value.kind == "func" and program is not None:
            callee = program.function(value.op)
            k = returned_param(callee, program, seen) if callee is not None else None
            if k is not None and k < len(value.args) and isinstance(value.args[k], Var):
                name = value.args[k].name
                continue
        return None
    return None


@dataclass(frozen=True)
class OutlineStyle:
    """How one outlining pass outlines."""

    matches: Callable[[Stmt], bool]  # the scopes to outline
    func_type: str  # of the new functions
    suffix: Callable[[ScopeStmt], str]  # `<function><suffix><n>`
    decorator_kwargs: Callable[[ScopeStmt], tuple] = lambda s: ()
    # PyPTO's naming: `name_hint=` names the function, a scope nested in an outlined one is named after it
    # (`<outer><suffix><n>`, counting from 0 again), a taken name gets `_0`, `_1`, ...
    pypto_names: bool = False
    return_stores: bool = True  # a tensor the scope stores into is a result of the function
    # a returned tensor that is a parameter's buffer is returned as the parameter (PyPTO's #1702), and a
    # scope without results has no return statement
    return_params: bool = False
    # directions from what the body does with each tensor (stores, assembles, program functions' Out
    # parameters) rather than from the stores alone
    call_directions: bool = False
    # with call_directions: only the tensor's own name in a write slot is a write (PyPTO's outliner), not a
    # name it reaches the slot under (a loop's iter_arg, a copy); ConvertTensorToTileOps upgrades the rest
    direct_writes: bool = False
    call_kwargs: Callable[[ScopeStmt], tuple] = lambda s: ()  # keywords of the call that replaces the scope
    # `with ... as tid:` becomes `tmp = pl.submit(self.f, args[, deps=...])`, then each result and last the
    # task id read out of tmp (PyPTO's form, even for one result or none)
    submit_task_ids: bool = False


@dataclass
class ScopeOutliner:
    """Outlines the matching scopes of one function: `block(func.body, set())` returns the new body and
    leaves the new functions in `made`, inner ones first."""

    func: Function
    types: dict
    taken_funcs: set[str]
    style: OutlineStyle
    program: Program | None = None
    made: list[Function] = field(default_factory=list)
    counter: int = 0

    def __post_init__(self):
        self.all_defs = {p.name for p in self.func.params} | set(block_defs(self.func.body))
        self.names = set(self.all_defs)
        self.base = self.func.name
        self.local_funcs: set[str] = set()

    def block(self, body: tuple[Stmt, ...], outside_reads: set[str]) -> tuple[Stmt, ...]:
        out: list[Stmt] = []
        renames: dict[str, str] = {}
        for i, s in enumerate(body):
            if renames:
                s = Rename(renames).mutate(s)
            if self.style.matches(s):
                later = set(block_reads(tuple(body[i + 1:]))) | outside_reads
                stmts, new_names = self.outline(s, later)
                out.extend(stmts)
                renames.update(new_names)
                continue
            out.append(self.nested(s, outside_reads | set(block_reads(tuple(body[i + 1:])))))
        return tuple(out)

    def nested(self, s: Stmt, outside: set[str]) -> Stmt:
        # a value leaves a loop body or branch only through its yield, which is in the block itself
        if isinstance(s, (ForStmt, WhileStmt, ScopeStmt)):
            new = self.block(s.body, outside)
            return s if new == s.body else replace(s, body=new)
        if isinstance(s, IfStmt):
            then_b, else_b = self.block(s.then_body, outside), self.block(s.else_body, outside)
            if then_b == s.then_body and else_b == s.else_body:
                return s
            return replace(s, then_body=then_b, else_body=else_b)
        return s

    def name(self, scope: ScopeStmt) -> str:
        hint = scope_kwarg(scope, "name_hint")
        if not self.style.pypto_names:
            named = isinstance(hint, StrLit) and hint.value  # `name_hint=` names the function, as in PyPTO
            base = hint.value if named else f"{self.func.name}{self.style.suffix(scope)}{self.counter}"
            name = fresh_name(base, self.taken_funcs)
            self.counter += 1
            return name
        if isinstance(hint, StrLit) and hint.value:
            cand = hint.value
        else:
            cand = f"{self.base}{self.style.suffix(scope)}{self.counter}"
        self.counter += 1
        local = self.names | self.local_funcs
        if cand in local or cand in self.taken_funcs:
            base = cand if cand in local else f"{self.func.name}_{cand}"
            if base in local or base in self.taken_funcs:
                k = 0
                while f"{base}_{k}" in local or f"{base}_{k}" in self.taken_funcs:
                    k += 1
                base = f"{base}_{k}"
            cand = base
        self.taken_funcs.add(cand)
        self.local_funcs.add(cand)
        return cand

    def outline(self, scope: ScopeStmt, later: set[str]) -> tuple[list[Stmt], dict[str, str]]:
        if self.style.pypto_names:
            fname = self.name(scope)
            saved = (self.base, self.counter)
            self.base, self.counter = fname, 0
            body = self.block(scope.body, later)  # a matching scope nested in this one is outlined first
            self.base, self.counter = saved
        else:
            body = self.block(scope.body, later)
            fname = ""
        inner_defs = list(dict.fromkeys(block_defs(body)))  # both branches of an if define its results
        defined = set(inner_defs)
        inputs = [n for n in block_reads(body) if n not in defined and n in self.all_defs]
        alias = tensor_aliases(body)
        outputs = [n for n in inner_defs if n in later]
        exported = {alias.get(n, n) for n in outputs}
        written: set[str] = set()
        store_value: dict[str, str] = {}  # outside tensor -> the name its stored value gets
        local = set(defined) | set(inputs)
        for st, call in store_calls(body):
            dst = alias.get(store_destination(call), store_destination(call))
            if dst is None or dst in defined:
                continue
            written.add(dst)
            if not self.style.return_stores or dst in exported:
                continue
            if st not in body:  # inside a loop or branch: its value is not visible at the end
                if self.style.return_params and dst not in store_value:
                    store_value[dst] = fresh_name(f"{dst}_store", local | self.names)
                continue
            store_value[dst] = st.target.name if isinstance(st, AssignStmt) else fresh_name(f"{dst}_store", local)
        copies = self.style.return_params and self.style.return_stores  # PyPTO's dead copies of store values
        named = {st.target.name for st, _ in store_calls(body) if isinstance(st, AssignStmt)} if copies else set()
        body = _NameStores(store_value).mutate(body)
        if self.style.return_params and self.style.return_stores:  # every other bare store gets a name too
            body = _NameEachStore(written, local).mutate(body)
        outputs += [n for n in store_value.values() if n not in outputs]
        params = tuple(self.param(n, body, alias, n in written) for n in inputs)
        if named:  # after the directions: PyPTO derives them from the body as written, without the copies
            body = _copy_store_values(body, {n for n in inputs if n not in defined}, named, local)
        if not fname:
            fname = self.name(scope)
        value_of = {v: d for d, v in store_value.items()}
        rtypes = tuple(self.types.get(n) or self.types.get(value_of.get(n, n)) for n in outputs)
        returned = [self.returned(n, body, inputs, value_of) for n in outputs]
        tail: tuple[Stmt, ...] = ()
        if outputs or not self.style.return_params:
            tail = (ReturnStmt(tuple(Var(n, span=scope.span) for n in returned), span=scope.span),)
        self.made.append(Function(fname, params, rtypes, (*body, *tail), func_type=self.style.func_type,
                                  decorator_kwargs=self.style.decorator_kwargs(scope),
                                  returns_tuple=len(outputs) > 1, span=scope.span))
        call = Call(fname, tuple(Var(n, span=scope.span) for n in inputs), self.style.call_kwargs(scope),
                    kind="func", span=scope.span)
        # reads of a stored tensor after the call go to the call's value of it
        renames = {alias.get(n, n): n for n in outputs if alias.get(n, n) in written}
        renames.update(store_value)
        return self.call_site(call, outputs, rtypes, renames, scope)

    def returned(self, n: str, body: tuple[Stmt, ...], inputs: list[str], value_of: dict[str, str]) -> str:
        """What the new function returns for its result `n`."""
        if not self.style.return_params:
            return n
        if n in value_of and value_of[n] in inputs:
            return value_of[n]
        if isinstance(self.types.get(n), TensorType):
            root = trace_to_param(n, body, inputs, self.program)
            if root is not None:
                return root
        return n

    def param(self, name: str, body: tuple[Stmt, ...], alias: dict[str, str], written: bool) -> Param:
        """In, or Out for a tensor the scope only writes, InOut for one it writes and reads."""
        t = self.types.get(name)
        if self.style.call_directions:
            return Param(name, t, self.direction(name, body, alias) if isinstance(t, TensorType) else "In")
        if not written or not isinstance(t, TensorType):
            return Param(name, t)
        for s in body:
            for n in walk(s):
                if not isinstance(n, Call):
                    continue
                args = [a for k, a in enumerate(n.args) if not (k == 2 and n.op in STORE_OPS)]
                args += [v for k, v in n.kwargs if not (k == "output_tensor" and n.op in STORE_OPS)]
                if any(isinstance(m, Var) and alias.get(m.name, m.name) == name for e in args for m in walk(e)):
                    return Param(name, t, "InOut")
        return Param(name, t, "Out")

    def direction(self, name: str, body: tuple[Stmt, ...], alias: dict[str, str]) -> str:
        """PyPTO's rule: a tensor passed to a write slot (store or assemble destination, a program
        function's Out/InOut parameter) is written; any other use is a read (an InOut slot is both)."""
        read = written = False

        def mine(e: Expr) -> bool:
            if self.style.direct_writes:
                return isinstance(e, Var) and e.name == name
            return isinstance(e, Var) and alias.get(e.name, e.name) == name

        for st in body:
            for n in walk(st):
                if isinstance(n, Call):
                    slots = _written_slots(n, self.program)
                    for k, a in enumerate(n.args):
                        if mine(a):
                            if k in slots:
                                written = True
                                read = read or slots[k] == "InOut"
                            else:
                                read = True
                    if any(mine(m) for _, v in n.kwargs for m in walk(v)):
                        read = True
                elif isinstance(n, (ReturnStmt, YieldStmt)):
                    read = read or any(mine(v) for v in n.values)
                elif isinstance(n, AssignStmt) and mine(n.value):
                    read = True
                elif isinstance(n, (ForStmt, WhileStmt)):
                    read = read or any(mine(v) for v in n.init_values)
        return ("InOut" if read else "Out") if written else "In"

    def call_site(self, call: Call, outputs: list[str], rtypes, renames: dict[str, str],
                  scope: ScopeStmt) -> tuple[list[Stmt], dict[str, str]]:
        sp = scope.span
        self.names.update(outputs)
        if self.style.submit_task_ids and scope.var is not None:
            deps = scope_kwarg(scope, "deps")
            call = replace(call, kind="submit", kwargs=call.kwargs + ((("deps", deps),) if deps is not None else ()))
            tup = fresh_name("ret", self.names)
            stmts = [AssignStmt(Var(tup, span=sp), call, None, span=sp)]
            for k, n in enumerate([*outputs, scope.var.name]):
                stmts.append(AssignStmt(Var(n, span=sp), GetItem(Var(tup, span=sp), ConstInt(k, _index())),
                                        None, span=sp))
            return stmts, renames
        if not outputs:
            return [EvalStmt(call, span=sp)], renames
        if len(outputs) == 1:
            return [AssignStmt(Var(outputs[0], span=sp), call, rtypes[0], span=sp)], renames
        tup = fresh_name("ret", self.names)
        stmts: list[Stmt] = [AssignStmt(Var(tup, span=sp), call, None, span=sp)]
        for k, n in enumerate(outputs):
            stmts.append(AssignStmt(Var(n, span=sp), GetItem(Var(tup, span=sp), ConstInt(k, _index())),
                                    None, span=sp))
        return stmts, renames


def _index():
    from ptoc.ir.dtypes import INDEX

    return INDEX


def has_scope(body: tuple[Stmt, ...], matches: Callable[[Stmt], bool]) -> bool:
    return any(matches(n) for s in body for n in walk(s))


__all__ = ["OutlineStyle", "Rename", "ScopeOutliner", "block_defs", "block_reads", "has_scope", "returned_param",
           "scope_kwarg", "store_calls", "trace_to_param"]
