"""Generic traversal of the immutable IR.

`Visitor` walks every node once (pre-order) and calls `visit_<ClassName>` where defined.
`Mutator` rebuilds bottom-up and returns the very same object when nothing below it changed, so a
pass that touches one load copies only the spine above it. Subclasses override `mutate_<ClassName>`
(called after the node's children were mutated) to replace a node.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator

from ptoc.ir.dtypes import DType
from ptoc.ir.nodes import (
    AssignStmt,
    BreakStmt,
    ConstBool,
    ConstFloat,
    ConstInt,
    ContinueStmt,
    DTypeLit,
    EnumLit,
    EvalStmt,
    ForStmt,
    IfStmt,
    Node,
    PassStmt,
    ReturnStmt,
    ScopeStmt,
    StrLit,
    Var,
    WhileStmt,
    YieldStmt,
)

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
    iterative (no recursion limit). (The traversal generated from the node classes' fields, `_traversal`;
    `plain_walk` is the same in its obvious form.)"""
    if not _WALK:
        _WALK.append(_traversal("walk", "yield n", "yield n"))
    if not isinstance(root, Node):
        return plain_walk(root)  # (yields the root whatever it is)
    return _WALK[0](root)


_WALK: list[Callable] = []  # the generated body of `walk`, made on its first call


def var_names(roots: tuple, skip: frozenset[int] | set[int] = frozenset()) -> set[str]:
    """`{n.name for r in roots for n in walk(r) if isinstance(n, Var) and id(n) not in skip}` (each root a
    node, a tuple of nodes or None), gathered by one loop over the fields that hold nodes: passes ask this
    of every statement, often again for nested bodies, and a generator step and a class test per node
    (types included) was most of their time. A name is no node subclass (tests/test_rewrite_fast.py
    compares both forms on every example and corpus program)."""
    leaves, fields = _NAME_LEAVES, _NAME_FIELDS
    out: set[str] = set()
    add = out.add
    stack = list(roots)
    pop, push = stack.pop, stack.append
    while stack:
        n = pop()
        cls = n.__class__
        if cls is Var:
            if id(n) not in skip:
                add(n.name)
            continue
        if cls is tuple:
            for x in n:
                c = x.__class__
                if c is Var:
                    if id(x) not in skip:
                        add(x.name)
                elif c not in leaves:
                    push(x)
            continue
        if cls in leaves:
            continue
        names = fields.get(cls)
        if names is None:
            if not isinstance(n, Node):
                continue  # (a walk looks only into nodes and tuples)
            names = fields[cls] = child_fields(cls)
        for name in names:
            v = getattr(n, name)
            if v.__class__ not in leaves:
                push(v)
    return out


# Nodes with no parts, and the values that are not nodes: `var_names` does not look into them.
_NAME_LEAVES = frozenset({ConstInt, ConstFloat, ConstBool, StrLit, EnumLit, DTypeLit, str, int, float, bool,
                          type(None)})
_NAME_FIELDS: dict[type, tuple[str, ...]] = {}  # node class -> its `child_fields`


def plain_walk(root: Node) -> Iterator[Node]:
    """`walk`, written out: what the generated traversal must do (tests compare them)."""
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


# The node classes most nodes of a program belong to, the most frequent first (measured on kernels: the
# integer literals and names of shapes, offsets and memrefs are over half the nodes). The generated
# traversals (`_traversal`) test for these in this order (`group_by_class` keeps their groups in local
# lists); every other class goes the generic way.
_COMMON_CLASSES = ("ConstInt", "Var", "Call", "AssignStmt", "TileType", "MemRef", "EnumLit", "ListExpr",
                   "TensorType", "StrLit", "TensorView", "Param", "BinOp", "YieldStmt", "PtrType", "TileView",
                   "ScalarType", "EvalStmt", "ForStmt", "DTypeLit", "DictExpr", "IfStmt", "ReturnStmt", "ConstBool")
_GROUPER: list[Callable] = []  # the generated body of `group_by_class`, made on its first call


def group_by_class(root: Node) -> dict[type, list[Node]]:
    """Every node under `root` (inclusive) in `walk`'s order, grouped by exact class: class -> its nodes in
    walk order. The same result as appending each node `plain_walk(root)` yields to its class's list,
    made without a generator and without looking fields up by name for the common classes (a program's
    node indexes are built many times during a compile)."""
    if not _GROUPER:
        _GROUPER.append(_make_grouper())
    groups: dict[type, list[Node]] = {}
    for cls, nodes in _GROUPER[0](root, groups):
        if nodes:
            groups[cls] = nodes
    return groups


def _make_grouper() -> Callable:
    """The traversal of `group_by_class` (`_traversal`): each node is appended to its class's group."""
    return _traversal("grouper", "a{i}(n)", "g = get(cls)\nif g is None:\n    other[cls] = [n]\nelse:\n    g.append(n)")


def _traversal(name: str, common: str, generic: str) -> Callable:
    """`walk`'s traversal as a function `name(root)` generated from the fields of the common node classes
    (`_COMMON_CLASSES`): one branch per class runs `common` on the node `n` and pushes the node's
    children (the last field first, a tuple reversed) straight onto the stack; a node of another class
    runs `generic` (its class is `cls`) and takes `plain_walk`'s step. When `common` names `{i}` (the
    class's number), the function is `name(root, other)` and has a list `g{i}` of its own per common
    class (`a{i}`: its `append`), returned with the class at the end; `other` is a dict for `generic`
    (`get`: its `get`). Whatever a field holds, the order is `plain_walk`'s: a value pushed that is no
    node is dealt with when it is popped (a tuple is flattened in place, anything else is dropped), as
    `plain_walk` flattens tuples and skips other values; the fields' annotations only pick the shorter
    code (no tuple test for a field that holds one node). `group_by_class`'s traversal groups the integer
    literals and names that lead a node's first field at once, without the stack (the same order)."""
    from ptoc.ir import nodes

    classes = [getattr(nodes, x) for x in _COMMON_CLASSES]
    ns: dict = {"Node": Node, "child_fields": child_fields, "_flatten_nodes": _flatten_nodes}
    groups = "{i}" in common
    # (the classes, `tuple` and `str` are default values of parameters: local names, which the tests below read
    # faster than the function's globals and builtins)
    consts = "".join(f", C{i}=C{i}" for i in range(len(classes))) + ", tuple=tuple, str=str"
    lines = [f"def {name}(root, other{consts}):" if groups else f"def {name}(root{consts}):"]
    for i, cls in enumerate(classes):
        ns[f"C{i}"] = cls
        if groups:
            lines.append(f"    g{i} = []; a{i} = g{i}.append")
    if groups:
        lines.append("    get = other.get")
    lines += ["    stack = [root]",
              "    pop, push, extend = stack.pop, stack.append, stack.extend",
              "    while stack:",
              "        n = pop()",
              "        cls = n.__class__"]
    for i, cls in enumerate(classes):
        lines += [f"        {'if' if i == 0 else 'elif'} cls is C{i}:", f"            {common.format(i=i)}"]
        annotations = {f.name: str(f.type) for f in dataclasses.fields(cls)}
        fields = child_fields(cls)
        for field in reversed(fields):
            ann = annotations[field]
            if groups and field == fields[0]:
                # The walk visits the first field's values right after `n`: while they are integer literals
                # or names (the commonest classes, with no fields holding nodes: most of shapes, operands,
                # targets), each is grouped at once, as popping it next would do, without the stack; from
                # the first other value on, the rest of the tuple is pushed (above the later fields, so
                # popped before them, as when the whole field is pushed).
                lines += [f"            v = n.{field}", "            c = v.__class__"]
                if ann.startswith("tuple["):
                    lines += ["            if c is tuple:",
                              "                j = 0",
                              "                for x in v:",
                              "                    c = x.__class__",
                              "                    if c is C0: a0(x)",
                              "                    elif c is C1: a1(x)",
                              "                    else:",
                              "                        extend(v[:j - 1 if j else None:-1])",  # (v[j:] reversed)
                              "                        break",
                              "                    j += 1",
                              "            elif v is not None: push(v)"]
                else:
                    lines += ["            if c is C0: a0(v)",
                              "            elif c is C1: a1(v)",
                              "            elif v is not None: push(v)"]
            elif ann.startswith("tuple[tuple["):
                # pairs (keyword arguments, dict items): each pair's values pushed at once, not the pair (a
                # tuple is tested for last, after every node class), and a name (a str: no node) dropped
                lines += [f"            v = n.{field}",
                          "            if v.__class__ is tuple:",
                          "                for p in v[::-1]:",
                          "                    if p.__class__ is tuple:",
                          "                        for x in p[::-1]:",
                          "                            if x.__class__ is not str: push(x)",
                          "                    else: push(p)",
                          "            elif v is not None: push(v)"]
            elif ann.startswith("tuple["):
                lines += [f"            v = n.{field}",
                          "            if v.__class__ is tuple: extend(v[::-1])",
                          "            elif v is not None: push(v)"]
            elif ann.endswith(" | None"):
                lines += [f"            v = n.{field}", "            if v is not None: push(v)"]
            else:
                lines.append(f"            push(n.{field})")
    lines += ["        elif isinstance(n, tuple):",  # a tuple inside a tuple field (keyword pairs)
              "            extend(n[::-1])",
              "        elif isinstance(n, Node):"]  # any other class: `walk`'s own step
    lines += ["            " + x for x in generic.split("\n")]
    lines += ["            kids = []",
              "            for f in child_fields(cls):",
              "                v = getattr(n, f)",
              "                if isinstance(v, Node):",
              "                    kids.append(v)",
              "                elif isinstance(v, tuple) and v:",
              "                    _flatten_nodes(v, kids)",
              "            kids.reverse()",
              "            extend(kids)"]
    if groups:
        lines.append("    return (" + " ".join(f"(C{i}, g{i})," for i in range(len(classes))) + ")")
    exec(compile("\n".join(lines) + "\n", f"<{name}>", "exec"), ns)  # noqa: S102
    return ns[name]


class Visitor:
    def visit(self, node: Node) -> None:
        for n in walk(node):
            fn = getattr(self, f"visit_{type(n).__name__}", None)
            if fn is not None:
                fn(n)


class Mutator:
    """Rebuild-what-changes mutation. Override `mutate_<ClassName>(node) -> node` (called after the
    node's children were mutated) or `pre_<ClassName>(node)` (called first; a non-None result replaces
    the node without visiting below it). Hooks are looked up once per node class.

    A subclass that overrides `mutate` itself is asked about every value, unless it names in `leaves`
    the classes whose values its `mutate` returns as they are (the traversal then skips them without
    the call)."""

    leaves: frozenset = frozenset()

    def mutate(self, node):
        cls = node.__class__
        if cls is tuple:
            return self._mutate_tuple(node)
        plans = self.__dict__.get("_plans")
        if plans is None:
            plans = self._start()
        plan = plans.get(cls)
        if plan is None:
            if not isinstance(node, Node):
                return node
            plan = self._plan(cls)
        pre, post, names, make = plan
        if pre is not None:
            r = pre(self, node)
            if r is not None:
                return r
        changes = None
        if names:
            inert = self.__dict__["_inert"]
            for name in names:
                old = getattr(node, name)
                c = old.__class__
                if c in inert:  # (a leaf no hook changes, or no node: its mutation is itself)
                    continue
                if c is tuple:
                    # (most tuples are shapes and offsets of literals and names: tested here, without
                    # the call, that no element is other than a leaf)
                    for x in old:
                        if x.__class__ not in inert:
                            break
                    else:
                        continue
                    new = self._mutate_tuple(old)
                elif isinstance(old, Node):
                    new = self.mutate(old)
                else:
                    continue
                if new is not old:
                    if changes is None:
                        changes = {}
                    changes[name] = new
        if changes:
            node = make(node, changes)
        return post(self, node) if post is not None else node

    def _mutate_tuple(self, node: tuple) -> tuple:
        """The tuple with each element mutated; the very tuple when no element changed."""
        inert = self.__dict__.get("_inert")
        if inert is None:
            self._start()
            inert = self.__dict__["_inert"]
        out = None
        mutate = self.mutate
        for i, x in enumerate(node):
            if x.__class__ in inert:
                continue
            y = mutate(x)
            if y is not x:
                if out is None:
                    out = list(node)
                out[i] = y
        return node if out is None else tuple(out)

    def _start(self) -> dict:
        """The per-class plans of this mutator's class, and the classes whose values it leaves as they
        are without looking (`_inert`): when `mutate` is not overridden, values that are no node (names,
        numbers, dtypes) and node classes with no hook and no fields holding nodes. The generic traversal
        then does not call `mutate` for them (which would return them unchanged); a subclass that
        overrides `mutate` sees every value, as before. Both are kept on the mutator's class, in its own
        `__dict__` (not inherited: a subclass has other hooks), since they depend only on the class's
        hooks: a pass makes a mutator per function or statement, and working the plans out again for
        each one cost more than the traversal they serve (26k plans on a 10k-line program). The
        instance holds them too, for the look-up on every node."""
        mine = self.__class__
        plans = mine.__dict__.get("_class_plans")
        if plans is None:
            plans = {}
            type.__setattr__(mine, "_class_inert", set(mine.leaves) if mine.mutate is not Mutator.mutate else
                             {str, int, float, bool, type(None), DType, *mine.leaves})
            type.__setattr__(mine, "_class_plans", plans)
        self.__dict__["_plans"] = plans
        self.__dict__["_inert"] = mine.__dict__["_class_inert"]
        return plans

    def _plan(self, cls: type) -> tuple:
        """`(pre, post, names, make)` for node class `cls`: the class's hooks as plain functions (called
        with the mutator first), its fields holding nodes, its `node_replacer`."""
        mine = self.__class__
        pre, post = _hook(mine, "pre", cls), _hook(mine, "mutate", cls)
        names = _NODE_FIELDS.get(cls)
        if names is None:
            names = child_fields(cls)
        plan = (pre, post, names, node_replacer(cls))
        self.__dict__["_plans"][cls] = plan
        if pre is None and post is None and not names and mine.mutate is Mutator.mutate:
            self.__dict__["_inert"].add(cls)
        return plan


def _hook(mutator: type, kind: str, cls: type):
    """Mutator class `mutator`'s hook `<kind>_<name>` for node class `cls`, else for its nearest node base
    class (`pld.DistributedTensor` is a tensor), as a plain function; None when it has none."""
    for c in cls.__mro__:
        if c is Node:
            return None
        fn = getattr(mutator, f"{kind}_{c.__name__}", None)
        if fn is not None:
            return fn
    return None


_REPLACERS: dict[type, Callable] = {}


def node_replacer(cls: type) -> Callable:
    """`dataclasses.replace` for node class `cls` as a function `(node, changes) -> node`, made once per
    class: it calls the class with every field (the changed ones from the dict `changes`, which must name
    fields), as `replace` does, without looking the fields up again on every call (a rebuild of the IR
    replaces many nodes)."""
    fn = _REPLACERS.get(cls)
    if fn is None:
        fields = dataclasses.fields(cls)
        args = [f"c[{f.name!r}] if {f.name!r} in c else n.{f.name}" for f in fields if not f.kw_only]
        args += [f"{f.name}=c[{f.name!r}] if {f.name!r} in c else n.{f.name}" for f in fields if f.kw_only]
        src = f"def replace_{cls.__name__}(n, c):\n    return cls({', '.join(args)})\n"
        ns: dict = {"cls": cls}
        exec(compile(src, f"<replace {cls.__name__}>", "exec"), ns)  # noqa: S102
        fn = _REPLACERS[cls] = ns[f"replace_{cls.__name__}"]
    return fn


_MISSING = object()  # a field `replace` was not given
_KW_REPLACERS: dict[type, Callable] = {}


def replace(node, /, **changes):
    """`dataclasses.replace(node, **changes)` for an IR node (or any dataclass whose fields are all
    `__init__` parameters): a new node of the same class, the given fields changed, the others the
    node's; a name that is no field is a TypeError, as there. The passes rebuild nodes this way tens of
    thousands of times per compile; `dataclasses.replace` looks the class's fields up and sorts them out
    on every call, this calls a function made once per class (tests compare both on every node of the
    examples and corpus programs)."""
    fn = _KW_REPLACERS.get(node.__class__)
    if fn is None:
        fn = _kw_replacer(node.__class__)
    return fn(node, **changes)


def _kw_replacer(cls: type) -> Callable:
    """`replace` for class `cls`: `(node, **changes) -> node`, one keyword parameter per field."""
    fields = dataclasses.fields(cls)
    if not all(f.init for f in fields):  # (no node class has such a field)
        fn = dataclasses.replace
    else:
        def arg(f):
            return f"_node_.{f.name} if {f.name} is _MISSING else {f.name}"

        args = [arg(f) for f in fields if not f.kw_only]
        args += [f"{f.name}=" + arg(f) for f in fields if f.kw_only]
        params = ", ".join(f"{f.name}=_MISSING" for f in fields)
        src = f"def replace_{cls.__name__}(_node_, /, *, {params}):\n    return _cls_({', '.join(args)})\n"
        ns: dict = {"_cls_": cls, "_MISSING": _MISSING}
        exec(compile(src, f"<replace {cls.__name__}>", "exec"), ns)  # noqa: S102
        fn = ns[f"replace_{cls.__name__}"]
    _KW_REPLACERS[cls] = fn
    return fn


def rebuild_bodies(s, block):
    """`s` with `block` (a function from a statement tuple to a statement tuple) applied to each of its
    nested bodies (loop, while, scope bodies; both if branches); the same object when nothing changed."""
    if s.__class__ in _NO_BODIES:  # (most statements: answered without the class tests below)
        return s
    if isinstance(s, (ForStmt, WhileStmt, ScopeStmt)):
        body = block(s.body)
        return s if body is s.body else node_replacer(s.__class__)(s, {"body": body})
    if isinstance(s, IfStmt):
        then_body, else_body = block(s.then_body), block(s.else_body)
        if then_body is s.then_body and else_body is s.else_body:
            return s
        return node_replacer(IfStmt)(s, {"then_body": then_body, "else_body": else_body})
    return s


_NO_BODIES = frozenset({AssignStmt, EvalStmt, YieldStmt, ReturnStmt, PassStmt, BreakStmt, ContinueStmt})
