"""Generic traversal of the immutable IR.

`Visitor` walks every node once (pre-order) and calls `visit_<ClassName>` where defined.
`Mutator` rebuilds bottom-up and returns the very same object when nothing below it changed, so a
pass that touches one load copies only the spine above it. Subclasses override `mutate_<ClassName>`
(called after the node's children were mutated) to replace a node.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

from ptoc.ir.nodes import Node

_FIELDS: dict[type, tuple[str, ...]] = {}


def child_fields(cls: type) -> tuple[str, ...]:
    f = _FIELDS.get(cls)
    if f is None:
        f = tuple(x.name for x in dataclasses.fields(cls) if x.name != "span")
        _FIELDS[cls] = f
    return f


def _children(value) -> Iterator[Node]:
    if isinstance(value, Node):
        yield value
    elif isinstance(value, tuple):
        for v in value:
            yield from _children(v)


def walk(node: Node) -> Iterator[Node]:
    """Every node under `node` (inclusive), pre-order, iteratively (no recursion limit)."""
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        kids = []
        for name in child_fields(type(n)):
            kids.extend(_children(getattr(n, name)))
        stack.extend(reversed(kids))


class Visitor:
    def visit(self, node: Node) -> None:
        for n in walk(node):
            fn = getattr(self, f"visit_{type(n).__name__}", None)
            if fn is not None:
                fn(n)


class Mutator:
    """Rebuild-what-changes mutation. Override `mutate_<ClassName>(node) -> node`."""

    def mutate(self, node):
        if isinstance(node, tuple):
            new = tuple(self.mutate(x) for x in node)
            return node if all(a is b for a, b in zip(new, node)) else new
        if not isinstance(node, Node):
            return node
        pre = getattr(self, f"pre_{type(node).__name__}", None)
        if pre is not None:
            r = pre(node)
            if r is not None:
                return r
        changes = {}
        for name in child_fields(type(node)):
            old = getattr(node, name)
            if isinstance(old, (Node, tuple)):
                new = self.mutate(old)
                if new is not old:
                    changes[name] = new
        if changes:
            node = dataclasses.replace(node, **changes)
        post = getattr(self, f"mutate_{type(node).__name__}", None)
        return post(node) if post is not None else node


def rebuild_bodies(s, block):
    """`s` with `block` (a function from a statement tuple to a statement tuple) applied to each of its
    nested bodies (loop, while, scope bodies; both if branches); the same object when nothing changed."""
    from ptoc.ir.nodes import ForStmt, IfStmt, ScopeStmt, WhileStmt

    if isinstance(s, (ForStmt, WhileStmt, ScopeStmt)):
        body = block(s.body)
        return s if body is s.body else dataclasses.replace(s, body=body)
    if isinstance(s, IfStmt):
        then_body, else_body = block(s.then_body), block(s.else_body)
        if then_body is s.then_body and else_body is s.else_body:
            return s
        return dataclasses.replace(s, then_body=then_body, else_body=else_body)
    return s
