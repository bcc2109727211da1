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

# Field annotations that never hold a node: the traversal does not look into such fields.
_ATOM_FIELDS = frozenset({"str", "bool", "int", "float", "DType", "str | None", "int | None", "bool | None"})
_NODE_FIELDS: dict[type, tuple[str, ...]] = {}


def child_fields(cls: type) -> tuple[str, ...]:
    """The fields of node class `cls` that can hold nodes (not the span, names, dtypes or flags)."""
    names = _NODE_FIELDS.get(cls)
    if names is None:
        names = tuple(x.name for x in dataclasses.fields(cls) if x.name != "span" and x.type not in _ATOM_FIELDS)
        _NODE_FIELDS[cls] = names
    return names


def _flatten_nodes(items: tuple, out: list) -> None:
    for x in items:
        if isinstance(x, Node):
            out.append(x)
        elif isinstance(x, tuple):
            _flatten_nodes(x, out)


def walk(root: Node) -> Iterator[Node]:
    """Every node under `root` (inclusive), pre-order, fields in declaration order, tuples flattened;
    iterative (no recursion limit)."""
    stack = [root]
    pop = stack.pop
    push = stack.extend
    while stack:
        n = pop()
        yield n
        names = _NODE_FIELDS.get(n.__class__)
        if names is None:
            names = child_fields(n.__class__)
        if not names:
            continue
        kids: list[Node] = []
        for name in names:
            v = getattr(n, name)
            if isinstance(v, Node):
                kids.append(v)
            elif isinstance(v, tuple) and v:
                _flatten_nodes(v, kids)
        if kids:
            kids.reverse()
            push(kids)


class Visitor:
    def visit(self, node: Node) -> None:
        for n in walk(node):
            fn = getattr(self, f"visit_{type(n).__name__}", None)
            if fn is not None:
                fn(n)


class Mutator:
    """Rebuild-what-changes mutation. Override `mutate_<ClassName>(node) -> node` (called after the
    node's children were mutated) or `pre_<ClassName>(node)` (called first; a non-None result replaces
    the node without visiting below it). Hooks are looked up once per node class."""

    def mutate(self, node):
        cls = node.__class__
        if cls is tuple:
            new = tuple([self.mutate(x) for x in node])
            for a, b in zip(new, node):
                if a is not b:
                    return new
            return node
        if not isinstance(node, Node):
            return node
        hooks = self.__dict__.get("_hooks")
        if hooks is None:
            hooks = self.__dict__["_hooks"] = {}
        pair = hooks.get(cls)
        if pair is None:
            pair = hooks[cls] = (self._hook("pre", cls), self._hook("mutate", cls))
        pre, post = pair
        if pre is not None:
            r = pre(node)
            if r is not None:
                return r
        names = _NODE_FIELDS.get(cls)
        if names is None:
            names = child_fields(cls)
        changes = None
        for name in names:
            old = getattr(node, name)
            if isinstance(old, (Node, tuple)):
                new = self.mutate(old)
                if new is not old:
                    if changes is None:
                        changes = {}
                    changes[name] = new
        if changes:
            node = dataclasses.replace(node, **changes)
        return post(node) if post is not None else node


    def _hook(self, kind: str, cls: type):
        """The hook for `cls`, else for its nearest node base class (`pld.DistributedTensor` is a tensor)."""
        for c in cls.__mro__:
            if c is Node:
                return None
            fn = getattr(self, f"{kind}_{c.__name__}", None)
            if fn is not None:
                return fn
        return None


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
