"""FlattenCallExpr: no call nested inside another expression, as PyPTO's pass does (three-address form).

A call that is an argument of another call, an operand of scalar arithmetic, a comparison, a cast, an
`if` or `while` condition, a `for` bound, a returned or a yielded value moves into an assignment of its
own just before the statement that used it, to a fresh name `t__tmp_v<N>` (numbered per function, in
the order the calls are evaluated: an argument's own nested calls before the argument, arguments left
to right). A call that is the whole right-hand side of an assignment, or a statement by itself, stays.
Calls inside list and tuple literals (shapes, offsets) and keyword arguments stay too, as in PyPTO.
The pass produces the `flat_calls` property that checks exactly this.

Before::

    result: pl.Tensor[[64], pl.FP32] = pl.mul(pl.add(x, 1.0), 2.0)
    return pl.exp(result)

After::

    t__tmp_v0 = pl.add(x, 1.0)
    result: pl.Tensor[[64], pl.FP32] = pl.mul(t__tmp_v0, 2.0)
    t__tmp_v1 = pl.exp(result)
    return t__tmp_v1

Temporaries carry no annotation: their types follow from the calls (the verifier infers them).
Deliberate difference from PyPTO: a call in a `while` condition that reads a value the loop carries is
left in place (PyPTO moves every condition call before the loop, where that value does not exist yet);
a call in the condition that reads no carried value moves before the loop, as in PyPTO.
"""

from __future__ import annotations

import dataclasses

from ptoc.context import CompileContext
from ptoc.ir.names import fresh_name
from ptoc.ir.nodes import (
    Abs,
    AssignStmt,
    BinOp,
    Call,
    Cast,
    ConstBool,
    ConstFloat,
    ConstInt,
    DTypeLit,
    EnumLit,
    EvalStmt,
    Expr,
    ForStmt,
    Function,
    GetItem,
    IfStmt,
    ListExpr,
    MinMax,
    Program,
    ReturnStmt,
    ScopeStmt,
    Stmt,
    StrLit,
    TupleExpr,
    UnaryOp,
    Var,
    WhileStmt,
    YieldStmt,
)
from ptoc.ir.visitor import walk
from ptoc.passes.manager import Pass, property_check


class _Flatten:
    def __init__(self, f: Function):
        self.taken = {p.name for p in f.params} | {n.name for n in walk(f) if n.__class__ is Var}
        self.counter = 0
        self.pending: list[Stmt] = []

    # ------------------------------------------------------------------ expressions
    def temp(self, e: Expr) -> Expr:
        """`e` itself, or (a call) a fresh name assigned `e` just before the current statement."""
        if not isinstance(e, Call):
            return e
        while f"t__tmp_v{self.counter}" in self.taken:
            self.counter += 1
        name = fresh_name(f"t__tmp_v{self.counter}", self.taken)
        self.counter += 1
        self.pending.append(AssignStmt(Var(name, span=e.span), e, span=e.span))
        return Var(name, span=e.span)

    def expr(self, e: Expr) -> Expr:
        """`e` with every call below it that may not stay nested moved out (`e` itself may be a call)."""
        if isinstance(e, Call):
            args = []
            for a in e.args:
                args.append(self.temp(self.expr(a)))
            args = tuple(args)
            return e if args == e.args else dataclasses.replace(e, args=args)
        if isinstance(e, (BinOp, MinMax)):
            lhs, rhs = self.expr(e.lhs), self.expr(e.rhs)
            lhs, rhs = self.temp(lhs), self.temp(rhs)
            return e if lhs is e.lhs and rhs is e.rhs else dataclasses.replace(e, lhs=lhs, rhs=rhs)
        if isinstance(e, (UnaryOp, Abs, Cast)):
            x = self.temp(self.expr(e.operand))
            return e if x is e.operand else dataclasses.replace(e, operand=x)
        if isinstance(e, (ListExpr, TupleExpr)):
            items = tuple(self.expr(x) for x in e.items)
            return e if items == e.items else dataclasses.replace(e, items=items)
        if isinstance(e, GetItem):
            value = self.expr(e.value)
            return e if value is e.value else dataclasses.replace(e, value=value)
        return e

    def atoms(self, values: tuple[Expr, ...]) -> tuple[Expr, ...]:
        out = tuple(self.temp(self.expr(v)) for v in values)
        return values if out == values else out

    # ------------------------------------------------------------------ statements
    def block(self, body: tuple[Stmt, ...]) -> tuple[Stmt, ...]:
        outer, out = self.pending, []
        for s in body:
            self.pending = []
            new = self.stmt(s)
            out += self.pending
            out.append(new)
        self.pending = outer
        return body if len(out) == len(body) and all(a is b for a, b in zip(out, body)) else tuple(out)

    def stmt(self, s: Stmt) -> Stmt:
        if isinstance(s, AssignStmt):
            value = self.expr(s.value)
            return s if value is s.value else dataclasses.replace(s, value=value)
        if isinstance(s, EvalStmt):
            x = self.expr(s.expr)
            return s if x is s.expr else dataclasses.replace(s, expr=x)
        if isinstance(s, (ReturnStmt, YieldStmt)):
            values = self.atoms(s.values)
            return s if values is s.values else dataclasses.replace(s, values=values)
        if isinstance(s, IfStmt):
            cond = self.temp(self.expr(s.cond))
            return dataclasses.replace(s, cond=cond, then_body=self.block(s.then_body),
                                       else_body=self.block(s.else_body))
        if isinstance(s, ForStmt):
            return dataclasses.replace(s, args=self.atoms(s.args), body=self.block(s.body))
        if isinstance(s, WhileStmt):
            return dataclasses.replace(s, cond=self.while_cond(s), body=self.block(s.body))
        if isinstance(s, ScopeStmt):
            return dataclasses.replace(s, body=self.block(s.body))
        return s

    def while_cond(self, s: WhileStmt) -> Expr:
        carried = {a.name for a in s.iter_args}
        mark, counter = len(self.pending), self.counter
        cond = self.temp(self.expr(s.cond))
        hoisted = self.pending[mark:]
        if any(n.__class__ is Var and n.name in carried for h in hoisted for n in walk(h)):
            for h in hoisted:
                self.taken.discard(h.target.name)
            del self.pending[mark:]
            self.counter = counter
            return s.cond
        return cond


_NO_CALLS = frozenset({Var, ConstInt, ConstFloat, ConstBool, StrLit, EnumLit, DTypeLit})  # (nothing nested)


def nested_calls(program: Program) -> list[str]:
    """Calls that stand where FlattenCallExpr leaves none (see the module docstring)."""
    bad: list[str] = []

    def check(e: Expr, where: str, top_ok: bool) -> None:
        if isinstance(e, Call):
            if not top_ok:
                bad.append(f"{where}: pl.{e.op} nested at line {e.span.line}")
            for a in e.args:
                if a.__class__ not in _NO_CALLS:  # (most arguments: nothing to look into)
                    check(a, where, False)
        elif isinstance(e, (BinOp, MinMax)):
            check(e.lhs, where, False)
            check(e.rhs, where, False)
        elif isinstance(e, (UnaryOp, Abs, Cast)):
            check(e.operand, where, False)

    def block(body: tuple[Stmt, ...], where: str) -> None:
        # the statements in the order a walk of the function meets them; a walk's visits of every
        # expression and type node in between would find nothing more (statements are only in bodies)
        for n in body:
            if isinstance(n, AssignStmt):
                check(n.value, where, True)
            elif isinstance(n, EvalStmt):
                check(n.expr, where, True)
            elif isinstance(n, (ReturnStmt, YieldStmt)):
                for v in n.values:
                    check(v, where, False)
            elif isinstance(n, IfStmt):
                check(n.cond, where, False)
                block(n.then_body, where)
                block(n.else_body, where)
            elif isinstance(n, ForStmt):
                for a in n.args:
                    check(a, where, False)
                block(n.body, where)
            elif isinstance(n, (WhileStmt, ScopeStmt)):
                block(n.body, where)

    for f in program.functions:
        block(f.body, f.name)
    return bad


@property_check("flat_calls")
def _flat_calls(program: Program, ctx: CompileContext, cache=None) -> list[str]:
    """No call is an argument, an operand, a condition, a loop bound, a returned or a yielded value."""
    return nested_calls(program)


class FlattenCallExpr(Pass):
    name = "FlattenCallExpr"
    stage = "ssa"
    summary = "move calls nested in other expressions into assignments of their own (three-address form)"
    produces = frozenset({"flat_calls"})

    def run(self, program: Program, ctx: CompileContext) -> Program:
        funcs = []
        for f in program.functions:
            body = _Flatten(f).block(f.body)
            funcs.append(f if body is f.body else dataclasses.replace(f, body=body))
        if all(a is b for a, b in zip(funcs, program.functions)):
            return program
        return dataclasses.replace(program, functions=tuple(funcs))
