"""Replace the uses of names by expressions.

`substitute(node, mapping)` rewrites every `Var` whose name is a key of `mapping` where it is read
(operands, call arguments, loop bounds, types written in annotations and parameters) and leaves the
places that bind a name alone (assignment and yield targets, loop variables, iter_args, `with ... as`
names). Used where a pass knows a name's value: an unrolled loop's variable, a scalar constant.
"""

from __future__ import annotations

from collections.abc import Mapping

from ptoc.ir.nodes import AssignStmt, Expr, ForStmt, ScopeStmt, Var, WhileStmt, YieldStmt
from ptoc.ir.visitor import Mutator, replace


class _Substitute(Mutator):
    def __init__(self, mapping: Mapping[str, Expr]):
        self.mapping = mapping

    def pre_Var(self, v: Var):
        new = self.mapping.get(v.name)
        return v if new is None else new

    def pre_AssignStmt(self, s: AssignStmt):
        value, ann = self.mutate(s.value), self.mutate(s.annotation)
        if value is s.value and ann is s.annotation:
            return s
        return replace(s, value=value, annotation=ann)

    def pre_YieldStmt(self, s: YieldStmt):
        values, ann = self.mutate(s.values), self.mutate(s.annotation)
        if values is s.values and ann is s.annotation:
            return s
        return replace(s, values=values, annotation=ann)

    def pre_ForStmt(self, s: ForStmt):
        args, init, kwargs, body = (self.mutate(s.args), self.mutate(s.init_values), self.mutate(s.kwargs),
                                    self.mutate(s.body))
        if args is s.args and init is s.init_values and kwargs is s.kwargs and body is s.body:
            return s
        return replace(s, args=args, init_values=init, kwargs=kwargs, body=body)

    def pre_WhileStmt(self, s: WhileStmt):
        init, cond, kwargs, body = (self.mutate(s.init_values), self.mutate(s.cond), self.mutate(s.kwargs),
                                    self.mutate(s.body))
        if init is s.init_values and cond is s.cond and kwargs is s.kwargs and body is s.body:
            return s
        return replace(s, init_values=init, cond=cond, kwargs=kwargs, body=body)

    def pre_ScopeStmt(self, s: ScopeStmt):
        args, kwargs, body = self.mutate(s.args), self.mutate(s.kwargs), self.mutate(s.body)
        if args is s.args and kwargs is s.kwargs and body is s.body:
            return s
        return replace(s, args=args, kwargs=kwargs, body=body)


def substitute(node, mapping: Mapping[str, Expr]):
    """`node` (a node or a tuple of nodes) with every read of a name in `mapping` replaced by its
    expression; the same object when nothing changed."""
    if not mapping:
        return node
    return _Substitute(mapping).mutate(node)


__all__ = ["substitute"]
