"""FuseCreateAssembleToSlice: a created tensor assembled once into a larger one becomes a slice of it.

What it does
------------
In an orchestration function, a tensor made by `pl.tensor.create` that is assembled exactly once into a
target (`pl.tensor.assemble(target, r, offsets)`, where `r` is the created buffer or a value in it, e.g.
a kernel result written into it) is instead created as that window of the target:
`t = pl.tensor.slice(target, shape, offsets)`. The kernel then writes into the target directly, and the
assemble goes away (its result is the target). A loop that afterwards only passes a value through
(`pl.yield_(acc)` for its own iter_arg `acc`) stops carrying it: the iter_arg reads its initial value
and the loop's result is that value.

Which buffer a value is (its root) follows PyPTO's rules: a parameter, a create and a slice are their own
roots; an assemble's result is its target's buffer; a call's result is the buffer of the Out/InOut
argument it returns (of its tuple, the k-th such argument for element k); a copy, a loop-carried value
and a branch merge keep the root, and a value with two possible roots (a loop that may run zero times,
an if whose branches differ) has none. Nothing is fused when the created buffer is assembled twice, with
`atomic=` (the add must stay), or when its root cannot be told.

Where ptoc differs from PyPTO: a target or offset that is defined only after the `tensor.create` (so
the slice could not read it there) leaves the pair unfused instead of producing a use before its
definition. A created tensor of lower rank than the target is not fused (PyPTO pads the slice with
leading 1-extents, which changes the created tensor's rank).
"""

from __future__ import annotations

from dataclasses import replace

from ptoc.ir.nodes import (
    AssignStmt,
    Call,
    ConstInt,
    EnumLit,
    ForStmt,
    Function,
    GetItem,
    IfStmt,
    ListExpr,
    Program,
    ScopeStmt,
    Stmt,
    TensorType,
    TupleExpr,
    Var,
    WhileStmt,
    YieldStmt,
)
from ptoc.ir.substitute import substitute
from ptoc.ir.visitor import walk
from ptoc.passes.manager import Pass

CREATE_OPS = ("tensor.create", "create_tensor")
SLICE_OPS = ("tensor.slice", "slice")
ASSEMBLE_OPS = ("tensor.assemble", "assemble")


class FuseCreateAssembleToSlice(Pass):
    name = "FuseCreateAssembleToSlice"
    stage = "memory"
    summary = "a created tensor assembled once into another becomes a slice of it; the assemble goes away"

    def run(self, program: Program, ctx) -> Program:
        funcs, changed = [], False
        for f in program.functions:
            g = f
            if f.func_type == "Orchestration" and any(_is_op(n, CREATE_OPS) for n in walk(f)) \
                    and any(_is_op(n, ASSEMBLE_OPS) for n in walk(f)):
                g = _fuse(f, program)
            changed |= g is not f
            funcs.append(g)
        return replace(program, functions=tuple(funcs)) if changed else program


def _is_op(e, ops) -> bool:
    return isinstance(e, Call) and e.kind == "op" and e.op in ops


def _const(e):
    return e.value if isinstance(e, ConstInt) else None


class _Roots:
    """The buffer root of every value of an orchestration function (see the module docstring)."""

    def __init__(self, f: Function, program: Program):
        self.program = program
        self.cands: dict[str, tuple[str, ...]] = {}
        self.ambiguous: set[str] = set()
        self.tuples: dict[str, list[tuple[tuple[str, ...], bool]]] = {}
        for p in f.params:
            self.record(p.name, (p.name,))
        self.block(f.body)

    def root(self, name: str) -> str | None:
        c = self.cands.get(name)
        return c[0] if c and name not in self.ambiguous else None

    def of(self, e) -> tuple[tuple[str, ...], bool]:
        if not isinstance(e, Var):
            return (), False
        return self.cands.get(e.name, ()), e.name in self.ambiguous

    def record(self, name: str, roots, unresolved: bool = False) -> None:
        unique = tuple(dict.fromkeys(r for r in roots if r))
        if not unique:
            return
        self.cands[name] = unique
        if unresolved or len(unique) > 1:
            self.ambiguous.add(name)
        else:
            self.ambiguous.discard(name)

    def block(self, body: tuple[Stmt, ...]) -> None:
        for s in body:
            if isinstance(s, AssignStmt):
                self.assign(s)
            elif isinstance(s, (ForStmt, WhileStmt)):
                inits = [self.of(v) for v in s.init_values]
                for a, (rs, amb) in zip(s.iter_args, inits):
                    self.record(a.name, rs, amb)
                self.block(s.body)
                runs = isinstance(s, ForStmt) and _trips(s)
                y = s.body[-1] if s.body and isinstance(s.body[-1], YieldStmt) else None
                if y is None:
                    continue
                for i, (t, v) in enumerate(zip(y.targets, y.values)):
                    rs, amb = self.of(v)
                    unresolved = not rs or amb
                    if not runs and i < len(inits):
                        unresolved = unresolved or not inits[i][0]
                        rs = rs + inits[i][0]
                    self.record(t.name, rs, unresolved)
            elif isinstance(s, IfStmt):
                self.block(s.then_body)
                self.block(s.else_body)
                ty = s.then_body[-1] if s.then_body and isinstance(s.then_body[-1], YieldStmt) else None
                ey = s.else_body[-1] if s.else_body and isinstance(s.else_body[-1], YieldStmt) else None
                if ty is None or ey is None:
                    continue
                for t, a, b in zip(ty.targets, ty.values, ey.values):
                    (ra, aa), (rb, ab) = self.of(a), self.of(b)
                    self.record(t.name, ra + rb, not ra or not rb or aa or ab)
            elif isinstance(s, ScopeStmt):
                self.block(s.body)

    def assign(self, s: AssignStmt) -> None:
        v, name = s.value, s.target.name
        if _is_op(v, CREATE_OPS + SLICE_OPS):
            self.record(name, (name,))
        elif _is_op(v, ASSEMBLE_OPS):
            if len(v.args) == 3:
                rs, amb = self.of(v.args[0])
                self.record(name, rs, amb)
        elif isinstance(v, Call) and v.kind in ("func", "submit"):
            callee = self.program.function(v.op)
            if callee is None:
                return
            outs = [(self.of(a), callee.params[k].type) for k, a in enumerate(v.args[:len(callee.params)])
                    if callee.params[k].direction in ("Out", "InOut")]
            if len(callee.returns) > 1 or v.kind == "submit":
                self.tuples[name] = [info for info, _ in outs]
                return
            if len(outs) == 1:
                self.record(name, *outs[0][0])
            elif outs and callee.returns:
                match = [info for info, t in outs if info[0] and _same_shape(t, callee.returns[0])]
                if match:
                    self.record(name, match[0][0], match[0][1] or any(m != match[0] for m in match))
        elif isinstance(v, GetItem) and isinstance(v.value, Var) and v.value.name in self.tuples:
            k, items = _const(v.index), self.tuples[v.value.name]
            if k is not None and 0 <= k < len(items) and items[k][0]:
                self.record(name, *items[k])
        elif isinstance(v, Var):
            self.record(name, *self.of(v))


def _same_shape(a, b) -> bool:
    return isinstance(a, TensorType) and isinstance(b, TensorType) and a.dtype == b.dtype and a.shape == b.shape


def _trips(s: ForStmt) -> bool:
    start, stop, step = _const(s.start), _const(s.stop), _const(s.step)
    if start is None or stop is None or not step:
        return False
    return len(range(start, stop, step)) > 0


def _atomic(c: Call) -> bool:
    a = c.kwarg("atomic")
    if a is None:
        return False
    if isinstance(a, EnumLit):
        return a.member not in ("None_", "NONE", "None", "none")
    return _const(a) != 0


def _fuse(f: Function, program: Program) -> Function:
    roots = _Roots(f, program)
    order: dict[str, int] = {p.name: -1 for p in f.params}
    creates: dict[str, tuple[int, AssignStmt]] = {}
    tuples: dict[str, object] = {}
    fusible: dict[str, tuple] = {}
    blocked: set[str] = set()
    nodes = [n for s in f.body for n in walk(s)]
    for i, n in enumerate(nodes):
        if isinstance(n, ForStmt):
            order[n.var.name] = i
        if isinstance(n, (ForStmt, WhileStmt)):
            order.update({a.name: i for a in n.iter_args})
        elif isinstance(n, YieldStmt):
            order.update({t.name: i for t in n.targets})
        elif isinstance(n, ScopeStmt) and n.var is not None:
            order[n.var.name] = i
        if not isinstance(n, AssignStmt):
            continue
        order[n.target.name] = i
        v = n.value
        if isinstance(v, (ListExpr, TupleExpr)):
            tuples[n.target.name] = v
        elif isinstance(v, Var) and v.name in tuples:
            tuples[n.target.name] = tuples[v.name]
        elif _is_op(v, CREATE_OPS) and roots.root(n.target.name) == n.target.name:
            creates[n.target.name] = (i, n)
        elif _is_op(v, ASSEMBLE_OPS) and len(v.args) == 3:
            src = roots.root(v.args[1].name) if isinstance(v.args[1], Var) else None
            offsets = v.args[2] if isinstance(v.args[2], (ListExpr, TupleExpr)) else \
                tuples.get(v.args[2].name) if isinstance(v.args[2], Var) else None
            if src is None or offsets is None or src not in creates or src in blocked:
                continue
            if _atomic(v) or src in fusible:
                fusible.pop(src, None)
                blocked.add(src)
                continue
            fusible[src] = (v.args[0], offsets)
    # the slice stands where the create stood: what it reads must be defined there already
    for src, (target, offsets) in list(fusible.items()):
        at, create = creates[src]
        shape = create.value.args[0] if create.value.args else None
        reads = [m.name for e in (target, offsets) for m in walk(e) if isinstance(m, Var)]
        if any(order.get(r, at) >= at for r in reads) or not isinstance(shape, (ListExpr, TupleExpr)) \
                or len(shape.items) != len(offsets.items):
            del fusible[src]
    if not fusible:
        return f
    remap: dict[str, object] = {}
    body = _Rewrite(roots, fusible, remap).block(f.body)
    return replace(f, body=body)


class _Rewrite:
    def __init__(self, roots: _Roots, fusible: dict, remap: dict):
        self.roots, self.fusible, self.remap = roots, fusible, remap

    def alias(self, name: str, value) -> None:
        self.remap[name] = substitute(value, self.remap)

    def block(self, body: tuple[Stmt, ...]) -> tuple[Stmt, ...]:
        out: list[Stmt] = []
        for s in body:
            if isinstance(s, AssignStmt):
                v = s.value
                if _is_op(v, CREATE_OPS) and s.target.name in self.fusible:
                    target, offsets = self.fusible[s.target.name]
                    call = Call("tensor.slice", (substitute(target, self.remap), v.args[0],
                                                 substitute(offsets, self.remap)), span=v.span)
                    out.append(replace(s, value=call))
                    continue
                if _is_op(v, ASSEMBLE_OPS) and len(v.args) == 3 and isinstance(v.args[1], Var) \
                        and self.roots.root(v.args[1].name) in self.fusible:
                    self.alias(s.target.name, v.args[0])
                    continue
                out.append(substitute(s, self.remap))
            elif isinstance(s, (ForStmt, WhileStmt)):
                out.append(self.loop(substitute(replace(s, body=()), self.remap), s.body))
            elif isinstance(s, IfStmt):
                head = substitute(replace(s, then_body=(), else_body=()), self.remap)
                out.append(replace(head, then_body=self.block(s.then_body), else_body=self.block(s.else_body)))
            elif isinstance(s, ScopeStmt):
                head = substitute(replace(s, body=()), self.remap)
                out.append(replace(head, body=self.block(s.body)))
            else:
                out.append(substitute(s, self.remap))
        return tuple(out)

    def loop(self, head, body: tuple[Stmt, ...]):
        body = self.block(body)
        y = body[-1] if body and isinstance(body[-1], YieldStmt) else None
        if y is None or len(y.values) != len(head.iter_args):
            return replace(head, body=body)
        through = [i for i, (a, v) in enumerate(zip(head.iter_args, y.values))
                   if isinstance(v, Var) and v.name == a.name]
        if not through:
            return replace(head, body=body)
        inner = {head.iter_args[i].name: head.init_values[i] for i in through}
        for i in through:
            self.alias(y.targets[i].name, head.init_values[i])
        keep = [i for i in range(len(head.iter_args)) if i not in through]
        new_y = replace(y, targets=tuple(y.targets[i] for i in keep), values=tuple(y.values[i] for i in keep),
                        annotation=y.annotation if len(keep) == 1 else None)
        body = substitute(body[:-1] + ((new_y,) if keep else ()), inner)
        return replace(head, body=body, iter_args=tuple(head.iter_args[i] for i in keep),
                       init_values=tuple(head.init_values[i] for i in keep))
