"""Structural checks of a program: names, single assignment, yields, arities, annotations.

The front end runs it on every parsed program (user errors with spans); the pass manager runs it
after every pass (a failure there is a bug in the pass). It walks each function once, in order,
with a scope stack, so its cost is linear in the size of the program. Within one pipeline run a
`VerifyCache` remembers the function objects already checked, so a pass that leaves a function alone
does not pay for checking it again.
"""

from __future__ import annotations

import contextlib
import contextvars
import difflib
from collections.abc import Callable, Iterator

from ptoc.diagnostics import Diagnostic, Span
from ptoc.ir import dtypes
from ptoc.ir.nodes import (
    ArrayType,
    Abs,
    AssignStmt,
    BreakStmt,
    ContinueStmt,
    BinOp,
    Call,
    Cast,
    ConstBool,
    ConstFloat,
    ConstInt,
    DictExpr,
    DTypeLit,
    EnumLit,
    EvalStmt,
    Expr,
    ForStmt,
    Function,
    GetItem,
    IfStmt,
    ListExpr,
    MemRef,
    MinMax,
    Node,
    NoneLit,
    Program,
    ReturnStmt,
    ScalarType,
    ScopeStmt,
    Stmt,
    StrLit,
    TensorType,
    TileType,
    TupleExpr,
    TupleType,
    Type,
    TypeLit,
    UnaryOp,
    Var,
    WhileStmt,
    YieldStmt,
)
from ptoc.ir.printer import print_type
from ptoc.ir.type_match import VALID_SHAPE_MISMATCH, layout_as_annotated, type_mismatch, with_value_layout
from ptoc.ir.types import as_empty_tile, is_empty_tile
from ptoc.ir.type_match import kind_of as _kind
from ptoc.ir.visitor import Mutator, group_by_class, walk

# An operator typing hook: (call, positional arg types, keyword arg types, context) ->
# (result type or None when unknown, diagnostics).
OpTyper = Callable[[Call, list, dict, object], "tuple[Type | None, list[Diagnostic]]"]


def iter_type_exprs(t: Type | None) -> Iterator[Expr]:
    """Every expression inside a type (dims, views, memrefs)."""
    if t is None:
        return
    if isinstance(t, TupleType):
        for x in t.types:
            yield from iter_type_exprs(x)
        return
    if isinstance(t, (TensorType, TileType)):
        yield from t.shape
        v = t.view
        if v is not None:
            if v.valid_shape:
                yield from v.valid_shape
            if v.stride:
                yield from v.stride
            so = getattr(v, "start_offset", None)
            if so is not None:
                yield so
        if t.memref is not None:
            yield from _memref_exprs(t.memref)


def _memref_exprs(m: MemRef) -> Iterator[Expr]:
    yield m.base
    yield m.offset
    yield m.size


def iter_subexprs(e: Expr) -> Iterator[Expr]:
    """Direct children of an expression."""
    if isinstance(e, BinOp):
        yield e.lhs
        yield e.rhs
    elif isinstance(e, (UnaryOp, Abs, Cast)):
        yield e.operand
    elif isinstance(e, MinMax):
        yield e.lhs
        yield e.rhs
    elif isinstance(e, Call):
        yield from e.args
        for _, v in e.kwargs:
            yield v
    elif isinstance(e, (ListExpr, TupleExpr)):
        yield from e.items
    elif isinstance(e, DictExpr):
        for k, v in e.items:
            yield k
            yield v
    elif isinstance(e, GetItem):
        yield e.value
        yield e.index


class NodeIndex:
    """One walk of a function (`iter_nodes`): the nodes under it grouped by class, each in walk order.
    Passes and property checks that look for calls, variables or types ask it instead of walking the
    function again; with the pipeline's `VerifyCache` one index serves every pass that sees the same
    function parts. `of(cls)` holds the instances of `cls` and of its subclasses (a DistributedTensorType
    is a TensorType)."""

    __slots__ = ("_by_class", "_ops", "_for_kinds")

    def __init__(self, f: Function):
        by = group_by_class(f)
        own = by[f.__class__]  # the function itself is not among the nodes under it
        if len(own) == 1:
            del by[f.__class__]
        else:
            del own[0]
        self._by_class = by
        self._ops: frozenset[str] | None = None
        self._for_kinds: frozenset[str] | None = None

    def of(self, cls: type) -> list:
        """Every node of class `cls` or of a subclass of it, in walk order within each class, the class's
        own first (do not change the list)."""
        group = self._by_class.get(cls, _NO_NODES)
        subs = _NODE_SUBCLASSES.get(cls)
        if subs is None:
            subs = _NODE_SUBCLASSES[cls] = _subclasses(cls)
        if subs:
            more = [n for sub in subs for n in self._by_class.get(sub, _NO_NODES)]
            if more:
                return group + more
        return group

    def ops(self) -> frozenset[str]:
        """The census of operators: the `op` of every operator call (`kind == "op"`) under the function, in
        the spelling it has there. A pass that acts only on some operators asks this before it walks."""
        if self._ops is None:
            self._ops = frozenset(n.op for n in self.of(Call) if n.kind == "op")
        return self._ops

    def has_op(self, *names: str) -> bool:
        """An operator call to one of `names` is under the function."""
        ops = self.ops()
        return any(n in ops for n in names)

    def for_kinds(self) -> frozenset[str]:
        """The `kind` of every `for` loop under the function (`range`, `unroll`, `pipeline`, ...)."""
        if self._for_kinds is None:
            self._for_kinds = frozenset(n.kind for n in self.of(ForStmt))
        return self._for_kinds

    @staticmethod
    def get(f: Function, cache: VerifyCache | None = None) -> NodeIndex:
        """The index of `f`: the cache's when it has one for the same parts, else a fresh one. Without a
        `cache`, the running pipeline's (`VerifyCache.running`): an index depends on nothing but `f`."""
        if cache is None:
            cache = _RUNNING.get()
        return cache.node_index(f) if cache is not None else NodeIndex(f)


_NO_NODES: list = []
_NODE_SUBCLASSES: dict[type, tuple[type, ...]] = {}  # class -> its subclasses, all levels (`NodeIndex.of`)


def _subclasses(cls: type) -> tuple[type, ...]:
    out: list[type] = []
    todo = list(cls.__subclasses__())
    while todo:
        sub = todo.pop(0)
        out.append(sub)
        todo.extend(sub.__subclasses__())
    return tuple(out)


# The fast traversal is the visitor's own; the names stay for the passes that import them from here.
iter_nodes = walk
FastMutator = Mutator


# Keywords of a `self.<function>(...)` call that are call metadata, not arguments: PyPTO prints
# `attrs={"arg_directions": [...]}` and `device=...` on cross-function calls.
_CALL_METADATA = ("attrs", "device")
# keywords of pl.submit / pl.spmd_submit that configure the task, not the kernel's parameters
_SUBMIT_OPTIONS = ("deps", "dumps", "core_num", "sync_start", "allow_early_resolve", "predicate")


# Expressions whose check inside a type can find nothing wrong: a constant, or a name (a dimension
# may name a dynamic dimension or a value; an unknown one reads as an index). `check_type` skips them.
_QUIET_IN_TYPE = (ConstInt, ConstFloat, ConstBool, Var)

_SCALARS: dict[int, tuple[dtypes.DType, ScalarType]] = {}


def _scalar(dt: dtypes.DType) -> ScalarType:
    """The (shared, immutable) scalar type of dtype `dt`."""
    hit = _SCALARS.get(id(dt))
    if hit is not None and hit[0] is dt:
        return hit[1]
    t = ScalarType(dt)
    _SCALARS[id(dt)] = (dt, t)
    return t


class _Scope:
    __slots__ = ("names", "parent")

    def __init__(self, parent: _Scope | None):
        self.names: dict[str, Type | None] = {}
        self.parent = parent

    def lookup(self, name: str) -> tuple[bool, Type | None]:
        s: _Scope | None = self
        while s is not None:
            if name in s.names:
                return True, s.names[name]
            s = s.parent
        return False, None


_UNKNOWN = object()  # VerifyCache.assigned_type: not known


_INDEXES_KEPT = 3  # node indexes kept per function name (`_FunctionMemo.indexes`)


class _FunctionMemo:
    """What the cache learned about the functions of one name: the checks of whole functions, their
    assignments' checks, the operator typer's answers, the annotations as the values fill them in and the
    type comparisons (`VerifyCache.memo`), in the current generation and the one before. It ages only
    when a function of the name was checked since it last aged, so what was learned about a function
    that many passes in a row leave alone (or change in a few statements) is still there when a later
    pass asks; aging twice drops what two checks in a row did not use. Keys: ("fn", ids of the body,
    parameters, returns); id(assignment); ("op", id(call), ids of the argument types); ("fill",
    id(annotation), id(value type)); ("diff", id(annotated), id(actual)). Each entry holds the objects
    whose ids make its key, so no other object takes those ids while it is there. Apart from them, the
    node indexes of the last few versions of the function (`indexes`: (a function with the parts a walk
    visits, their NodeIndex), the newest first), which passes ask for far more often than for types, and the value
    types last handed over (`handed`: see `VerifyCache.hand_over`)."""

    __slots__ = ("cur", "old", "used", "indexes", "handed", "last")

    def __init__(self):
        self.cur: dict = {}
        self.old: dict = {}
        self.used = False
        self.indexes: list = []
        # the last hand-over (`VerifyCache.hand_over`), while it waits: [the ids of the assignments whose
        # entries are still to make -> the assignment (None until first asked), the function, its types]
        self.handed: list | None = None
        # the value types of the version of the function checked or handed over last (`VerifyCache.store`):
        # a check of the next version gives a value whose type it works out again, equal to the one it had
        # there, that very type object (`Verifier.define`)
        self.last: dict = {}

    def age(self) -> None:
        if self.used:
            self.old, self.cur, self.used = self.cur, {}, False

    def get(self, key):
        e = self.cur.get(key)
        if e is None:
            e = self.old.get(key)
            if e is not None:
                self.cur[key] = e
        return e


class VerifyCache:
    """What the verifier learned about functions during one pipeline run (`run_pipeline` makes one, or
    takes the driver's, which hands it on to the emitters of the same compile; it is never global). It
    also remembers, for identical objects, operator typer answers, type comparisons and the checks of
    single assignments (`assigned_type`), and one `NodeIndex` per function, all by function name
    (`_FunctionMemo`); it forgets what two rounds that looked at a function did not use (`age`).

    The IR is immutable, and the check of a function reads nothing but its name, parameters, return
    types and body, the program's dynamic dimensions, the context, the operator typer and, only when the
    body calls a function of the program, the signatures of the program's functions. A function whose
    parts are the identical (`is`) objects of one checked before, under those same inputs, has the same
    diagnostics and the same value types: when it verified clean it is not verified again, and
    `function_types` reuses its types. (So a pass that returns a function unchanged, or changes only
    its kind or attributes, costs no second check.)"""

    def __init__(self, ctx=None):
        self.ctx = ctx
        self.op_typer = _default_op_typer()  # the checks it caches: structure plus operator type rules
        # function entries in the memos: ("fn", id(body), id(params), id(returns)) -> (body, params,
        # returns, returns_tuple, name, dynamic dims, signature token or None (no calls), value types,
        # verified clean)
        self._sigs: list[tuple[tuple, int]] = []  # the signatures seen so far, each with its token
        # the two programs asked last, each with its token, the newest first (a pass's hand-overs ask for
        # its output's and its input's, in turn)
        self._last_tokens: list[tuple[Program, int]] = []
        self.checked = 0  # functions checked (not served from the cache): for tests and profiling
        self.op_hits = 0  # operator typer answers given again
        self._memos: dict[str, _FunctionMemo] = {}  # function name -> what its checks found (`memo`)
        self._derived: tuple[Program, dict] | None = None  # `derived`: the program asked last, its answers

    def age(self, program: Program | None = None) -> None:
        """A round (a pass and what it asked) is over: every function memo used in it ages (`_FunctionMemo`),
        so memory stays near two versions of each function. `program`: the IR the next round starts from;
        the memos of names it no longer has go."""
        memos = self._memos
        names = {f.name for f in program.functions} if program is not None else None
        gone = []
        for name, m in memos.items():
            if names is not None and name not in names:
                gone.append(name)
            elif m.used:
                m.old, m.cur, m.used = m.cur, {}, False
        for name in gone:
            del memos[name]

    def node_index(self, f: Function) -> NodeIndex:
        """`NodeIndex(f)`, shared by every function with the identical (`is`) parts (a walk of a function
        visits its parameters, return types, body, decorator keywords and attributes, nothing else)."""
        m = self._memos.get(f.name)
        if m is None:
            m = self._memos[f.name] = _FunctionMemo()
        # (asked tens of times per version of a function: the very function object answers first, then
        # its parts compared one by one, without a generator)
        params, returns, body, kwargs, attrs = f.params, f.returns, f.body, f.decorator_kwargs, f.attrs
        for g, index in m.indexes:
            if g is f or (g.body is body and g.params is params and g.returns is returns
                          and g.decorator_kwargs is kwargs and g.attrs is attrs):
                return index
        index = NodeIndex(f)
        m.indexes = [(f, index)] + m.indexes[:_INDEXES_KEPT - 1]
        return index

    def derived(self, program: Program, key: str, make: Callable[[], object]):
        """`make()`, remembered under `key` for the very program object `program` until another program is
        asked for: what several checks of one program derive alike (the property checks' value tiles). The
        caller must not change the answer."""
        d = self._derived
        if d is None or d[0] is not program:
            d = self._derived = (program, {})
        answer = d[1].get(key, _UNKNOWN)
        if answer is _UNKNOWN:
            answer = d[1][key] = make()
        return answer

    def memo(self, fname: str) -> _FunctionMemo:
        """The memo of the checks of function `fname` (made when there is none), marked used."""
        m = self._memos.get(fname)
        if m is None:
            m = self._memos[fname] = _FunctionMemo()
        m.used = True
        return m

    def op_type(self, call: Call, arg_types: list, kwarg_types: dict,
                memo: _FunctionMemo) -> tuple[Type | None, list[Diagnostic]]:
        """The operator typer's answer for `call` with these argument types. The typer is a pure function
        of the call node, the argument types and the context, so the answer for the identical (`is`)
        call node and argument type objects is remembered (in the `memo` of the function checked) and
        given again: the very same result type object, so what reads it is not checked again either."""
        kw = tuple(kwarg_types.values())  # the call's keywords, in its order
        key = ("op", id(call), *map(id, arg_types), *map(id, kw))
        e = memo.get(key)
        if e is not None:  # the entry holds the objects whose ids make its key: the very same objects
            self.op_hits += 1
            return e[3]
        answer = self.op_typer(call, arg_types, kwarg_types, self.ctx)  # type: ignore[misc]
        memo.cur[key] = (call, tuple(arg_types), kw, answer)
        return answer

    def annotation_check(self, annotated: Type, actual: Type, memo: _FunctionMemo) -> tuple[Type, str | None]:
        """`_annotation_check`, remembered for the identical pair of type objects: the same type object
        again (an annotation the value fills in is a new object each time it is computed)."""
        key = ("fill", id(annotated), id(actual))
        e = memo.get(key)
        if e is not None:
            return e[2]
        answer = _annotation_check(annotated, actual)
        memo.cur[key] = (annotated, actual, answer)
        return answer

    def type_mismatch(self, annotated: Type, actual: Type, memo: _FunctionMemo) -> str | None:
        """`type_mismatch`, remembered for the identical pair of type objects."""
        if annotated is actual:
            return None  # a type always agrees with itself
        key = ("diff", id(annotated), id(actual))
        e = memo.get(key)
        if e is not None:  # (the entry holds both objects: ids of live objects are theirs alone)
            return e[2]
        why = type_mismatch(annotated, actual)
        memo.cur[key] = (annotated, actual, why)
        return why

    def assigned_type(self, s: AssignStmt, scope: _Scope, memo: _FunctionMemo):
        """The type an assignment checked before in the function of `memo` gave its target, when the very
        same statement reads names of the very same types here (then its check finds the same: nothing
        wrong, that type); else `_UNKNOWN`."""
        if memo.handed is not None:
            _take_handed(s, memo)
        e = memo.get(id(s))
        if e is None:
            return _UNKNOWN
        for name, t in e[1]:
            found, now = scope.lookup(name)
            if not found or now is not t:
                return _UNKNOWN
        return e[2]

    def remember_assign(self, s: AssignStmt, reads: list[tuple[str, Type | None]], t: Type | None,
                        memo: _FunctionMemo) -> None:
        """An assignment (of the function of `memo`) checked clean, reading only names in scope and calling
        no function of the program."""
        memo.cur[id(s)] = (s, reads, t)

    @contextlib.contextmanager
    def running(self):
        """While the block runs (a pipeline run), `function_types` asked without a cache uses this one
        when its context is this cache's, and `NodeIndex.get` without a cache uses it always (a helper of a
        pass that does not hand on `Pass.cache`). It is
        the running pipeline's alone: a nested run sets its own, and the block's end restores the outer."""
        token = _RUNNING.set(self)
        try:
            yield self
        finally:
            _RUNNING.reset(token)

    def usable(self, ctx, op_typer: OpTyper | None) -> bool:
        return ctx is self.ctx and op_typer is self.op_typer

    def token(self, program: Program) -> int:
        """A number for the program's function signatures, the same for every program whose signatures
        are the identical objects (compared by identity: conservative)."""
        for known_program, tok in self._last_tokens:
            if known_program is program:
                return tok
        sig = tuple(x for f in program.functions for x in (f.name, f.params, f.returns, f.returns_tuple))
        tok = next((t for known, t in self._sigs
                    if len(known) == len(sig) and all(a is b for a, b in zip(known, sig))), None)
        if tok is None:
            tok = len(self._sigs)
            self._sigs.append((sig, tok))
        # (a pass asks once per function it hands over: not a walk each time)
        self._last_tokens = [(program, tok)] + self._last_tokens[:1]
        return tok

    def lookup(self, f: Function, program: Program, token: int) -> tuple[dict[str, Type | None], bool] | None:
        """(value types, verified clean) of `f` as a function of `program` (signature `token`), or None."""
        m = self._memos.get(f.name)
        if m is None:
            return None
        e = m.get(("fn", id(f.body), id(f.params), id(f.returns)))
        if (e is None or e[0] is not f.body or e[1] is not f.params or e[2] is not f.returns
                or e[3] != f.returns_tuple or e[4] != f.name or e[5] is not program.dynamic_dims
                or (e[6] is not None and e[6] != token)):
            return None
        return e[7], e[8]

    def verified_clean(self, f: Function, program: Program) -> bool:
        """`f`, a function of `program`, verified clean before (or was handed over clean): its check is
        remembered and found no error."""
        known = self.lookup(f, program, self.token(program))
        return known is not None and known[1]

    def hand_over(self, f: Function, program: Program, types: dict[str, Type | None],
                  clean: bool = False) -> None:
        """Take `types` as the value types of `f`, a function of `program`, without inferring them: a pass
        that rewrote `f` derived them from the types of its input (`Pass.hand_over`). They serve
        `function_types`, and each assignment is remembered as its check would remember it
        (`remember_assign`: the types of the names it reads, its target's type), so a later check of a
        function holding the same statement, reading values of the same types, takes its target's type
        from here. An assignment that reads a name `types` does not hold (a dynamic dimension) or calls a
        function of the program is not remembered. `clean`: `f` counts as verified clean, so `verify_program`
        does not check it again (the pipeline says so only when `f`'s check would find nothing: see
        `manager._take_types`); else it still checks `f`.

        The assignments' entries are made when a check first asks for the statement (`assigned_type`,
        `_take_handed`), not here: most versions handed over are replaced by the next pass's before any
        check looks at a statement of theirs. Only the last hand-over of a name waits for that: a statement
        of the version it replaces that it does not hold is gone from the program (forgetting it costs a
        check of that statement at most, never a wrong type)."""
        self.store(f, program, self.token(program), types, clean)
        self.memo(f.name).handed = [None, f, types]

    def handed_mismatch(self, f: Function, program: Program, types: dict[str, Type | None]) -> str | None:
        """What a fresh inference of `f` (a function of `program`) finds different from the handed-over
        `types` (names, their order or a type), or None; the inference replaces the hand-over in the cache."""
        fresh = Verifier(program, self.ctx, self.op_typer, self).checked_function(f)
        if list(fresh) != list(types):
            missing = [n for n in fresh if n not in types]
            extra = [n for n in types if n not in fresh]
            if missing or extra:
                return (f"values {missing} not handed over" if missing else "") + \
                    ("; " if missing and extra else "") + (f"values {extra} not in the function" if extra else "")
            return f"the values are handed over in the order {list(types)}, defined in the order {list(fresh)}"
        for name, t in fresh.items():
            if types[name] != t:
                shown = [print_type(x) if x is not None else "no type" for x in (types[name], t)]
                return f"value {name!r} handed over as {shown[0]}, inferred {shown[1]}"
        return None

    def store(self, f: Function, program: Program, token: int | None, types: dict[str, Type | None],
              clean: bool) -> None:
        """Remember a check of `f`; `token` None: its body calls no function (signatures do not matter)."""
        m = self.memo(f.name)
        m.last = types
        m.cur[("fn", id(f.body), id(f.params), id(f.returns))] = (
            f.body, f.params, f.returns, f.returns_tuple, f.name, program.dynamic_dims, token, types, clean)


class Verifier:
    def __init__(self, program: Program, ctx=None, op_typer: OpTyper | None = None,
                 cache: VerifyCache | None = None, ssa: bool = True):
        self.program = program
        self.ctx = ctx
        self.op_typer = op_typer
        # ssa False: the program as written, before ConvertToSSA: a name may be assigned again, and
        # a name both branches of an if assign is visible after the if
        self.ssa = ssa
        # the cache's memos of statements, operator answers and type comparisons hold in either form; its
        # checks of whole functions (`entries`) are of the SSA form's (its scoping and value types)
        self.cache = cache if cache is not None and cache.usable(ctx, op_typer) else None
        self.entries = self.cache if ssa else None
        # the program as written: a function whose check finds no error, assigns no name twice and reads
        # no name where it is visible only as written (after the loop or if that assigns it: `leaked`)
        # is checked exactly as its SSA form's check would check it, which would find the same value types
        # and no error; that check is remembered for the pipeline (`checked_function`), whose first steps
        # ask for the value types of the very same functions
        self.keeps = self.cache if not ssa else None
        self.token = self.cache.token(program) if self.cache is not None else -1
        self.leaked: set[str] = set()  # the names visible only as written (not ssa): loops' and ifs'
        self.as_ssa = True  # not ssa: the current function is checked as its SSA form's check would
        self.calls = False  # the current function calls a function of the program
        self.reads: list[tuple[str, Type | None]] | None = None  # names (and types) read by the statement
        self.diags: list[Diagnostic] = []
        self.funcs = {f.name: f for f in program.functions}
        self.dyn = {d.name for d in program.dynamic_dims}
        self.types: dict[str, Type | None] = {}  # every name of the current function -> its type
        self.defined_at: dict[str, Span] = {}
        self.region_of: dict[str, str] = {}  # names defined inside a region -> a word for it
        # names bound by a misplaced or mismatched pl.yield_: already reported, so their uses stay quiet
        self.quiet: set[str] = set()

    def err(self, code: str, msg: str, node: Node | Span | None, hint: str | None = None,
            rule: str | None = None) -> None:
        span = node if isinstance(node, Span) or node is None else node.span
        self.diags.append(Diagnostic(code, msg, span, hint, rule))

    # ------------------------------------------------------------------ entry
    def run(self) -> list[Diagnostic]:
        for f in self.program.functions:
            if self.entries is not None:
                known = self.entries.lookup(f, self.program, self.token)
                if known is not None and known[1]:
                    continue  # this very function verified clean in a program with these signatures
            try:
                self.checked_function(f)
            except RecursionError:
                self.err("PTOC-E0114", f"function {f.name!r} is nested too deeply for ptoc", f,
                         hint="split deep expressions into several statements with intermediate names")
        return self.diags

    def checked_function(self, f: Function) -> dict[str, Type | None]:
        """Check `f` (appending to `diags`), remember the result in the cache, return its value types."""
        first = len(self.diags)
        self.function(f)
        if self.entries is not None:
            self.entries.checked += 1
            clean = not any(d.severity == "error" for d in self.diags[first:])
            self.entries.store(f, self.program, self.token if self.calls else None, self.types, clean)
        elif self.keeps is not None and self.as_ssa and not any(d.severity == "error" for d in self.diags[first:]):
            self.keeps.store(f, self.program, self.token if self.calls else None, self.types, True)
        return self.types

    def function_types(self, f: Function) -> dict[str, Type | None]:
        """The value types of `f` (the cache's when it has them); the caller must not change the dict."""
        if self.entries is not None:
            known = self.entries.lookup(f, self.program, self.token)
            if known is not None:
                return known[0]
        return self.checked_function(f)

    def function(self, f: Function) -> None:
        self.types = {}
        self.defined_at = {}
        self.region_of = {}
        self.quiet = set()
        self.bad_index: set[str] = set()  # values already reported for being indexed though not tuples
        self.calls = False
        self.loop_depth = 0  # loops around the current statement (where break/continue may stand)
        self.leaked = set()
        self.as_ssa = True
        self.memo = self.cache.memo(f.name) if self.cache is not None else None
        self.last = self.memo.last if self.memo is not None else {}
        scope = _Scope(None)
        for p in f.params:
            self.check_type(p.type, scope)
            self.define(p.name, p.type, p, scope)
        for t in f.returns:
            self.check_type(t, scope)
        self.block(f.body, scope, f, ctx="function")

    # ------------------------------------------------------------------ definitions and uses
    def define(self, name: str, t: Type | None, node: Node, scope: _Scope) -> None:
        if not self.ssa and name in self.defined_at:
            scope.names[name] = t  # a new value of the name (ConvertToSSA gives it a name of its own)
            self.as_ssa = False
            return
        if name in self.defined_at:
            first = self.defined_at[name]
            self.err("PTOC-E0102", f"{name!r} is assigned more than once (first at line {first.line})",
                     node, hint=f"IR is in SSA form: give the new value a new name, e.g. {name}_1")
            scope.names[name] = t
            return
        self.defined_at[name] = node.span
        if t is not None:
            old = self.last.get(name)
            if old is not None and old is not t and old.__class__ is t.__class__ and old == t:
                # The value had an equal type in the version of the function checked (or handed over) last,
                # e.g. before a pass rewrote the offsets of the statement that defines it: that very object,
                # so the statements after it that read the value find it as their remembered checks had it
                # and are not checked again (`assigned_type`). Types are immutable values: equal ones mean
                # the same.
                t = old
        self.types[name] = t
        scope.names[name] = t

    def use(self, v: Var, scope: _Scope, in_type: bool = False) -> Type | None:
        found, t = scope.lookup(v.name)
        if found:
            if self.leaked and v.name in self.leaked:
                self.as_ssa = False  # visible here only as written
            if self.reads is not None:
                self.reads.append((v.name, t))
            return t
        self.reads = None  # a name from outside the scopes: the statement is not remembered
        if v.name in self.dyn or in_type:
            return _scalar(dtypes.INDEX)
        if v.name in self.quiet:
            return None
        if v.name in self.defined_at:
            where = self.region_of.get(v.name, "an inner block")
            self.err("PTOC-E0101", f"{v.name!r} is defined inside {where} and is not visible here", v,
                     hint="values leave a loop or branch only through pl.yield_; yield it and use the "
                     "yielded name")
            return self.types.get(v.name)
        cands = self.dyn | set(self._visible(scope))  # suggest only names that would be valid here
        near = difflib.get_close_matches(v.name, sorted(cands), n=1, cutoff=0.6)
        self.err("PTOC-E0101", f"undefined name {v.name!r}", v,
                 hint=f"did you mean {near[0]!r}?" if near else "define it before this use")
        return None

    @staticmethod
    def _visible(scope: _Scope) -> Iterator[str]:
        s: _Scope | None = scope
        while s is not None:
            yield from s.names
            s = s.parent

    def check_type(self, t: Type | None, scope: _Scope) -> None:
        for e in iter_type_exprs(t):
            if e.__class__ not in _QUIET_IN_TYPE:
                self.expr(e, scope, in_type=True)

    # ------------------------------------------------------------------ expressions
    def expr(self, e: Expr, scope: _Scope, in_type: bool = False) -> Type | None:
        cls = e.__class__
        if cls is Var:
            return self.use(e, scope, in_type)
        if cls is ConstInt or cls is ConstFloat:
            return _scalar(e.dtype)  # type: ignore[attr-defined]
        if cls is ConstBool:
            return _scalar(dtypes.BOOL)
        if cls is Call:
            return self._call(e, scope, in_type)  # type: ignore[arg-type]
        if cls is ListExpr or cls is TupleExpr:  # (a list or tuple value has no type of its own here)
            for x in e.items:  # type: ignore[attr-defined]
                if x.__class__ is not ConstInt:  # a constant item checks nothing
                    self.expr(x, scope, in_type)
            return None
        sub = [self.expr(x, scope, in_type) for x in iter_subexprs(e)]
        if isinstance(e, BinOp):
            return _binop_type(e, sub[0], sub[1])
        if isinstance(e, UnaryOp):
            return _scalar(dtypes.BOOL) if e.op == "not" else sub[0]
        if isinstance(e, (MinMax, Abs)):
            return sub[0]
        if isinstance(e, Cast):
            return _scalar(e.dtype)
        if isinstance(e, GetItem):
            return self._getitem(e, sub[0])
        return None

    def _call(self, e: Call, scope: _Scope, in_type: bool) -> Type | None:
        arg_types = [self.expr(a, scope, in_type) for a in e.args]
        kwarg_types = {k: self.expr(v, scope, in_type) for k, v in e.kwargs}
        if e.kind == "func":
            return self.func_call(e, arg_types, kwarg_types)
        if e.kind in ("submit", "spmd_submit"):
            return self.submit(e, arg_types, kwarg_types)
        if self.op_typer is None or in_type:
            return None
        if self.cache is not None:
            t, diags = self.cache.op_type(e, arg_types, kwarg_types, self.memo)
        else:
            t, diags = self.op_typer(e, arg_types, kwarg_types, self.ctx)
        self.diags.extend(diags)
        return t

    def _getitem(self, e: GetItem, base: Type | None) -> Type | None:
        if isinstance(base, TupleType) and isinstance(e.index, ConstInt):
            if not 0 <= e.index.value < len(base.types):
                self.err("PTOC-E0113", f"index {e.index.value} is out of range for a tuple of "
                         f"{len(base.types)}", e.index)
                return None
            return base.types[e.index.value]
        if isinstance(base, ArrayType):  # `arr[i]` reads an element, as pl.array.get_element does
            return ScalarType(base.dtype)
        if isinstance(base, TensorType) and len(base.shape) >= 2 and self.op_typer is not None:
            # PyPTO: t[i] of a tensor is the slice at i of its first axis, that axis dropped
            t, diags = self.op_typer(tensor_index_as_slice(e, base), [base, None, None], {"drop_dims": None},
                                     self.ctx)
            self.diags.extend(diags)
            return t
        if isinstance(base, TensorType) and len(base.shape) == 1 and self.op_typer is not None:
            # PyPTO: a full-rank index of scalars reads one element (tensor.read)
            t, diags = self.op_typer(tensor_index_as_read(e), [base, None], {}, self.ctx)
            self.diags.extend(diags)
            return t
        if base is not None and not isinstance(base, TupleType):
            if isinstance(e.value, Var):  # once per value: `a, b = f(x)` of a non-tuple reports once
                if e.value.name in self.bad_index:
                    self.reads = None  # (quiet only after the report: the statement is not remembered)
                    return None
                self.bad_index.add(e.value.name)
            self.err("PTOC-E0114", f"only tuple values can be indexed or unpacked; this value is a {_kind(base)}", e,
                     hint="t[i] reads element i of a tuple returned by a call; read tensor and tile "
                     "elements with pl.tensor.read / pl.tile.read")
        return None

    def func_call(self, e: Call, arg_types: list | None = None, kwarg_types: dict | None = None) -> Type | None:
        self.calls = True
        f = self.funcs.get(e.op)
        if f is None:
            near = difflib.get_close_matches(e.op, sorted(self.funcs), n=1, cutoff=0.6)
            self.err("PTOC-E0106", f"call of unknown function {e.op!r}", e,
                     hint=f"did you mean self.{near[0]}?" if near else
                     "call a function defined in this program, or an op as pl.<namespace>.<op>(...)")
            return None
        sig = f"{f.name}({', '.join(p.name for p in f.params)})"
        kwargs = [(k, v) for k, v in e.kwargs if k not in _CALL_METADATA]
        if len(e.args) + len(kwargs) != len(f.params):
            self.err("PTOC-E0113", f"{e.op!r} takes {len(f.params)} argument(s), the call passes "
                     f"{len(e.args) + len(kwargs)}", e, hint=f"the function is {sig}")
        names = {p.name for p in f.params}
        for k, _ in kwargs:
            if k not in names:
                near = difflib.get_close_matches(k, sorted(names), n=1, cutoff=0.6)
                self.err("PTOC-E0113", f"{e.op!r} has no parameter {k!r}", e,
                         hint=f"did you mean {near[0]}=?" if near else f"the function is {sig}")
        if arg_types is not None:
            by_name = {p.name: p for p in f.params}
            passed = [(p, a, t) for p, a, t in zip(f.params, e.args, arg_types)]
            passed += [(by_name[k], v, (kwarg_types or {}).get(k)) for k, v in kwargs if k in by_name]
            for p, a, t in passed:
                self._check_argument(f, p, a, t)
        if not f.returns:
            return None
        if len(f.returns) == 1 and not f.returns_tuple:
            return f.returns[0]
        return TupleType(tuple(f.returns))

    def submit(self, e: Call, arg_types: list, kwarg_types: dict) -> Type | None:
        """`pl.submit(self.kernel, *args, deps=[...])`: the kernel is called as a task; the value is its
        results followed by the task id, a tuple (PyPTO's Submit type)."""
        launch = tuple((k, v) for k, v in e.kwargs if k not in _SUBMIT_OPTIONS and k not in _CALL_METADATA)
        f = self.funcs.get(e.op)
        if f is not None and not launch and len(e.args) < len(f.params):
            # a task launch may leave out pl.Out / pl.InOut parameters (the task makes those outputs):
            # the arguments go, in order, to the parameters left once enough outputs are skipped
            self.calls = True
            params = _submitted_params(f.params, len(e.args))
            inputs = sum(1 for p in f.params if p.direction not in ("Out", "InOut"))
            if len(params) != len(e.args) or len(e.args) < inputs:
                sig = f"{f.name}({', '.join(p.name for p in f.params)})"
                self.err("PTOC-E0113", f"{e.op!r} takes {len(f.params)} argument(s) (its pl.Out parameters may "
                         f"be left out of a pl.submit), the call passes {len(e.args)}", e,
                         hint=f"the function is {sig}")
            for p, a, t in zip(params, e.args, arg_types):
                self._check_argument(f, p, a, t)
        else:
            call = Call(e.op, e.args, launch, kind="func", span=e.span)
            self.func_call(call, arg_types, {k: kwarg_types.get(k) for k, _ in launch})
        if f is None:
            return None
        return TupleType(tuple(f.returns) + (_scalar(dtypes.TASK_ID),))

    def _check_argument(self, f: Function, p, a: Expr, t: Type | None) -> None:
        """An argument agrees with its parameter's type: dtype, shape (where both are static), layout and,
        for tiles, the whole TileView. A logical NZ tensor may meet its blocked form (NZ-16)."""
        if t is None or p.type is None:
            return
        if isinstance(p.type, ScalarType) and isinstance(a, (ConstInt, ConstFloat)) and (
                p.type.dtype.is_float or (p.type.dtype.is_int and isinstance(a, ConstInt))):
            return  # a number takes the scalar parameter's dtype (as a constant scalar takes the tile's, OP-6)
        why = type_mismatch(p.type, t) if self.cache is None else self.cache.type_mismatch(p.type, t, self.memo)
        if not why:
            return
        da, db = getattr(p.type, "dtype", None), getattr(t, "dtype", None)
        fp4 = da != db and any(d is not None and d.is_packed_fp4 for d in (da, db))
        hint = f"pass a value of type {print_type(p.type)}"
        if fp4:
            hint += "; packed FP4 types never convert at a call: convert through BF16 with pl.cast"
        why = why.replace("the annotation says", "the parameter says").replace("the annotation's", "the parameter's")
        self.err("PTOC-E0120", f"argument {p.name!r} of {f.name!r} contradicts the parameter: {why}", a,
                 hint=hint, rule="FP4-2" if fp4 else None)

    # ------------------------------------------------------------------ statements
    def annotate(self, ann: Type | None, actual: Type | None, at: Node, scope: _Scope) -> Type | None:
        if ann is None:
            return actual
        self.check_type(ann, scope)
        if actual is not None:
            if is_empty_tile(ann) and isinstance(actual, TileType):
                actual = as_empty_tile(actual)  # any tile may be declared empty (a lane-1 replay's)
            cache = self.cache
            if cache is None:
                ann, why = _annotation_check(ann, actual)
            else:
                ann, why = cache.annotation_check(ann, actual, self.memo)
            if why:
                hint = f"the value's type is {print_type(actual)}"
                if why.startswith(VALID_SHAPE_MISMATCH) and isinstance(actual, TileType):
                    hint = (f"annotate it as {print_type(actual)}: the valid shape is part of a tile's type and "
                            "decides what tload and tstore move (pto-isa's TLOAD requires the tile's valid rows "
                            "to be the loaded partition's rows, validRow == shape2*shape3; a store writes the "
                            "valid rows only)")
                self.err("PTOC-E0105", f"annotation contradicts the value: {why}", at, hint=hint)
                return actual  # reported once; later uses see the value's real type, not a second error
        return ann

    def block(self, body: tuple[Stmt, ...], scope: _Scope, f: Function, ctx: str,
              carried: int | None = None, owner: Node | None = None) -> tuple[Type | None, ...] | None:
        """Check a body. `ctx`: "function", "loop", "branch", "scope". Returns the types yielded.
        `owner`: the loop or branch statement, where an error about an empty body points."""
        yielded: tuple[Type | None, ...] | None = None
        for i, s in enumerate(body):
            last = i == len(body) - 1
            if isinstance(s, YieldStmt):
                if ctx not in ("loop", "branch") or not last:
                    where = "the last statement of a loop body or an if branch"
                    self.err("PTOC-E0111", f"pl.yield_ must be {where}", s,
                             hint="move it to the end of its loop or branch" if ctx in ("loop", "branch")
                             else "only loops and if branches yield values")
                    self.quiet.update(t.name for t in s.targets)  # bound nowhere; do not report each use
                vts = tuple(self.expr(v, scope) for v in s.values)
                if s.annotation is not None and len(vts) == 1:
                    vts = (self.annotate(s.annotation, vts[0], s.annotation, scope),)
                if s.targets and len(s.targets) != len(s.values):
                    self.err("PTOC-E0103", f"{len(s.targets)} name(s) receive {len(s.values)} yielded value(s)",
                             s, hint="bind one name per yielded value")
                if carried is not None and len(s.values) != carried:
                    self.err("PTOC-E0103", f"the loop carries {carried} value(s) but pl.yield_ passes "
                             f"{len(s.values)}", s, hint="yield exactly one value per loop-carried name")
                yielded = vts
                continue
            self.stmt(s, scope, f)
        if carried and yielded is None and ctx == "loop":
            at = body[-1] if body else owner
            self.err("PTOC-E0103", f"the loop carries {carried} value(s) but its body does not end with "
                     "pl.yield_", at, hint="end the body with `x_out = pl.yield_(x_next)`")
        return yielded

    def stmt(self, s: Stmt, scope: _Scope, f: Function) -> None:
        check = _STMT_CHECKS.get(type(s))
        if check is not None:
            check(self, s, scope, f)

    def _assign(self, s: AssignStmt, scope: _Scope, f: Function) -> None:
        cache = self.cache
        if cache is None:
            vt = _created_where_annotated(s, self.expr(s.value, scope))
            t = self.annotate(s.annotation, vt, s.annotation or s, scope)
        else:
            t = cache.assigned_type(s, scope, self.memo)
            if t is not _UNKNOWN and self.leaked and any(n in self.leaked for n, _ in self.memo.get(id(s))[1]):
                self.as_ssa = False  # the remembered check read a name visible here only as written
            if t is _UNKNOWN:
                first, calls = len(self.diags), self.calls
                self.calls, self.reads = False, []
                vt = _created_where_annotated(s, self.expr(s.value, scope))
                t = self.annotate(s.annotation, vt, s.annotation or s, scope)
                if self.reads is not None and not self.calls and len(self.diags) == first:
                    cache.remember_assign(s, self.reads, t, self.memo)
                self.calls, self.reads = self.calls or calls, None
        self.define(s.target.name, t, s.target, scope)

    def _eval(self, s: EvalStmt, scope: _Scope, f: Function) -> None:
        self.expr(s.expr, scope)

    def _return(self, s: ReturnStmt, scope: _Scope, f: Function) -> None:
        ts = [self.expr(v, scope) for v in s.values]
        if len(ts) == 1 and len(f.returns) > 1 and isinstance(ts[0], TupleType) \
                and len(ts[0].types) == len(f.returns):
            ts = list(ts[0].types)  # `return self.g(...)` passes on the results of a call that returns as many
        if f.returns and len(ts) != len(f.returns):
            self.err("PTOC-E0113", f"{f.name!r} returns {len(f.returns)} value(s) but this returns "
                     f"{len(ts)}", s)
        # (functions without a declared return type may still return: printer leniency)
        # PyPTO's parser builds the return statement without comparing it with the declared type: callers
        # see the declared type, and a returned value of the same kind that differs in dtype, shape, layout
        # or valid shape is accepted as PyPTO accepts it. A value of another kind (a tile where a tensor is
        # declared, a tuple for a scalar) has no meaning for the callers and stays an error.
        for decl, t in zip(f.returns, ts):
            if t is not None:
                why = type_mismatch(decl, t)
                if why and why.startswith("the value is a "):  # another kind of value
                    self.err("PTOC-E0105", f"returned value contradicts the declared return type: {why}", s)

    def _carried(self, s: ForStmt | WhileStmt, scope: _Scope) -> tuple[list, _Scope]:
        """The init values' types and the loop body's scope holding the carried names."""
        init_types = [self.expr(v, scope) for v in s.init_values]
        if len(s.iter_args) != len(s.init_values):
            self.err("PTOC-E0104", f"{len(s.iter_args)} loop-carried name(s) but {len(s.init_values)} "
                     "init value(s)", s, hint="give one initial value per carried name")
        inner = _Scope(scope)
        if isinstance(s, ForStmt):
            self.define(s.var.name, _scalar(dtypes.INDEX), s.var, inner)
        for a, t in zip(s.iter_args, init_types + [None] * len(s.iter_args)):
            self.define(a.name, t, a, inner)
        return init_types, inner

    def _loop_body(self, s: ForStmt | WhileStmt, inner: _Scope, init_types: list, scope: _Scope, f: Function,
                   what: str) -> None:
        self.loop_depth += 1
        ys = self.block(s.body, inner, f, "loop", carried=len(s.iter_args), owner=s)
        self.loop_depth -= 1
        self._leave(inner, f"the body of the {what} at line {s.span.line}")
        if not self.ssa or (isinstance(s, ForStmt) and s.kind == "split_aiv"):
            # as written, a name the body assigns is visible after the loop (ConvertToSSA carries it out
            # as a result); a pl.split_aiv loop is a region of the function, its names visible after it
            own = {a.name for a in s.iter_args} | ({s.var.name} if isinstance(s, ForStmt) else set())
            for name, t in inner.names.items():
                if name not in own:
                    scope.names[name] = t
                    if not self.ssa and not (isinstance(s, ForStmt) and s.kind == "split_aiv"):
                        self.leaked.add(name)
        self._bind_results(s.results, ys, init_types, s, scope)

    def _for(self, s: ForStmt, scope: _Scope, f: Function) -> None:
        for a in s.args:
            self.expr(a, scope)
        for _, v in s.kwargs:
            self.expr(v, scope)
        init_types, inner = self._carried(s, scope)
        self._loop_body(s, inner, init_types, scope, f, "loop")

    def _while(self, s: WhileStmt, scope: _Scope, f: Function) -> None:
        init_types, inner = self._carried(s, scope)
        self.expr(s.cond, inner)
        self._loop_body(s, inner, init_types, scope, f, "while loop")

    def _if(self, s: IfStmt, scope: _Scope, f: Function) -> None:
        self.expr(s.cond, scope)
        then_scope = _Scope(scope)
        ty = self.block(s.then_body, then_scope, f, "branch")
        self._leave(then_scope, f"the if branch at line {s.span.line}")
        else_scope = _Scope(scope)
        ey = self.block(s.else_body, else_scope, f, "branch") if s.else_body else None
        self._leave(else_scope, f"the else branch of the if at line {s.span.line}")
        if not self.ssa:  # as written, a name both branches assign is assigned after the if
            self.leaked.update(_join_branches(s, then_scope, else_scope, scope))
        self._check_if_yields(s)
        types = ty if ty is not None else ey
        for i, v in enumerate(s.results):
            t = types[i] if types is not None and i < len(types) else None
            self.define(v.name, t, v, scope)

    def _check_if_yields(self, s: IfStmt) -> None:
        tn = tuple(v.name for v in s.results)
        en = tuple(v.name for v in (s.else_body[-1].targets if s.else_body
                                    and isinstance(s.else_body[-1], YieldStmt) else ()))
        if not (tn or en):
            return
        if not s.else_body:
            self.err("PTOC-E0103", "an if that yields values needs an else branch that yields them too",
                     s, hint=f"add `else:` ending with `{', '.join(tn)} = pl.yield_(...)`")
        elif tn != en:
            self.err("PTOC-E0103", f"the branches yield different names: ({', '.join(tn)}) and "
                     f"({', '.join(en)})", s, hint="both branches must end with pl.yield_ into the same "
                     "names")
            self.quiet.update(n for n in en if n not in tn)

    def _jump(self, s: BreakStmt | ContinueStmt, scope: _Scope, f: Function) -> None:
        if not self.loop_depth:
            word = "break" if isinstance(s, BreakStmt) else "continue"
            self.err("PTOC-E0111", f"`{word}` outside a loop", s, hint="use it inside a for or while loop body")

    def _scope(self, s: ScopeStmt, scope: _Scope, f: Function) -> None:
        for a in s.args:
            self.expr(a, scope)
        for _, v in s.kwargs:
            self.expr(v, scope)
        # A scope is a region of the same function: names it defines stay visible after it.
        if s.var is not None:
            self.define(s.var.name, _scalar(dtypes.INDEX), s.var, scope)
        self.block(s.body, scope, f, "scope")

    def _leave(self, inner: _Scope, where: str) -> None:
        for name in inner.names:
            self.region_of.setdefault(name, where)


    def _bind_results(self, results, yielded, init_types, s: Stmt, scope: _Scope) -> None:
        for i, v in enumerate(results):
            t = None
            if yielded is not None and i < len(yielded):
                t = yielded[i]
            if t is None and i < len(init_types):
                t = init_types[i]
            self.define(v.name, t, v, scope)


def _annotation_check(ann: Type, actual: Type) -> tuple[Type, str | None]:
    """(the annotation as the value fills it in, what contradicts it or None)."""
    ann = with_value_layout(ann, actual)
    return ann, type_mismatch(ann, layout_as_annotated(ann, actual))


# ops that fill a new tile from scalars alone: nothing ties the result to a memory space
_FILLED_TILE_OPS = frozenset({"tile.full", "full"})


def _created_where_annotated(s: AssignStmt, vt: Type | None) -> Type | None:
    """The type of a tile that `tile.full` creates, in the memory space the annotation names. PyPTO's
    parser gives an annotated assignment the annotation's memory space over the value's (a full tile
    annotated `pl.Mem.Acc` is the accumulator a matmul_acc loop starts from); for a tile read from another
    a different space stays a contradiction (a move is what changes it)."""
    a, v = s.annotation, s.value
    if not (isinstance(a, TileType) and isinstance(vt, TileType) and a.memory and vt.memory
            and a.memory != vt.memory and isinstance(v, Call) and v.kind == "op" and v.op in _FILLED_TILE_OPS):
        return vt
    from dataclasses import replace

    from ptoc.ir.types import normalize_tile_view

    return replace(vt, memory=a.memory, view=normalize_tile_view(vt.shape, a.memory, vt.view))


def _submitted_params(params, n_args: int) -> list:
    """The parameters `n_args` positional arguments of a pl.submit bind to: an Out/InOut parameter is
    skipped while the arguments left would still fill every later non-output parameter (PyPTO's pairing)."""
    out = []
    left = n_args
    for i, p in enumerate(params):
        if left == 0:
            break
        if p.direction in ("Out", "InOut"):
            later_inputs = sum(1 for q in params[i + 1:] if q.direction not in ("Out", "InOut"))
            if left <= later_inputs:
                continue
        out.append(p)
        left -= 1
    return out


def _binop_type(e: BinOp, lt: Type | None, rt: Type | None) -> Type | None:
    if e.op in ("==", "!=", "<", "<=", ">", ">=", "and", "or"):
        return _scalar(dtypes.BOOL)
    if isinstance(lt, ScalarType) and isinstance(rt, ScalarType):
        return lt if lt.dtype == rt.dtype or rt.dtype.name == "INDEX" else (
            rt if lt.dtype.name == "INDEX" else lt)
    return None


_STMT_CHECKS: dict[type, Callable] = {
    AssignStmt: Verifier._assign,
    EvalStmt: Verifier._eval,
    ReturnStmt: Verifier._return,
    ForStmt: Verifier._for,
    WhileStmt: Verifier._while,
    IfStmt: Verifier._if,
    BreakStmt: Verifier._jump,
    ContinueStmt: Verifier._jump,
    ScopeStmt: Verifier._scope,
}


def _join_branches(s: IfStmt, then_scope: _Scope, else_scope: _Scope, scope: _Scope):
    """As written (before SSA), a name either branch assigns is visible after the if (ConvertToSSA merges
    it); a branch that breaks or continues does not reach the end, so the other branch's names are.
    Returns those names."""
    after = then_scope.names.keys() | else_scope.names.keys()  # (ConvertToSSA decides what one branch leaves)
    if _exits(s.else_body):
        after = then_scope.names.keys()
    elif _exits(s.then_body):
        after = else_scope.names.keys()
    for name in after:
        scope.names[name] = then_scope.names.get(name, else_scope.names.get(name))
    return after


def _exits(body: tuple[Stmt, ...]) -> bool:
    """The body ends with `break` or `continue` (before CtrlFlowTransform)."""
    return bool(body) and isinstance(body[-1], (BreakStmt, ContinueStmt))


def tensor_index_as_slice(e: GetItem, base: TensorType) -> Call:
    """`t[i]` of a rank >= 2 tensor written as the op PyPTO's parser makes of it: the window [1, ...] at
    [i, 0, ...] with its first axis dropped (`pl.tensor.slice(t, [1, d1, ...], [i, 0, ...], drop_dims=[0])`)."""
    one = ConstInt(1, dtypes.INDEX, span=e.span)
    zero = ConstInt(0, dtypes.INDEX, span=e.span)
    shape = ListExpr((one, *base.shape[1:]), span=e.span)
    offset = ListExpr((e.index, *(zero for _ in base.shape[1:])), span=e.span)
    return Call("tensor.slice", (e.value, shape, offset), (("drop_dims", ListExpr((zero,), span=e.span)),),
                span=e.span)


def tensor_index_as_read(e: GetItem) -> Call:
    """`t[i]` of a rank-1 tensor as PyPTO's parser makes it: the element read `pl.tensor.read(t, [i])`."""
    return Call("tensor.read", (e.value, ListExpr((e.index,), span=e.span)), span=e.span)


def _take_handed(s: AssignStmt, memo: _FunctionMemo) -> None:
    """Make the entry of assignment `s` that the waiting hand-over (`VerifyCache.hand_over`) of `memo` holds,
    as `remember_assign` would: the names `s` reads with their handed types, its target's handed type.
    Once for each statement (asked again, a check finds the entry, or what it remembered since)."""
    waiting = memo.handed
    ids = waiting[0]
    if ids is None:
        ids = waiting[0] = {id(x): x for x in _assignments(waiting[1].body)}
    if ids.pop(id(s), None) is not s:
        return
    if not ids:
        memo.handed = None  # every statement was asked
    types = waiting[2]
    target = s.target.name
    if target not in types:
        return
    e = memo.cur.get(id(s)) or memo.old.get(id(s))
    if e is not None:
        # the very statement was remembered before (checked, or handed over): the names it reads are those
        names = [n for n, _ in e[1]]
    else:
        names = []
        if not _value_reads(s.value, names):
            return
        if s.annotation is not None:
            for x in iter_type_exprs(s.annotation):
                if x.__class__ not in _QUIET_IN_TYPE and not _value_reads(x, names):
                    return
    reads = []
    for n in names:
        if n not in types:
            return
        reads.append((n, types[n]))
    memo.cur[id(s)] = (s, reads, types[target])


def _assignments(body: tuple[Stmt, ...]) -> Iterator[AssignStmt]:
    """The assignments of a body, those in nested bodies included."""
    for s in body:
        cls = s.__class__
        if cls is AssignStmt:
            yield s  # type: ignore[misc]
        elif cls is IfStmt:
            yield from _assignments(s.then_body)  # type: ignore[attr-defined]
            yield from _assignments(s.else_body)  # type: ignore[attr-defined]
        elif cls is ForStmt or cls is WhileStmt or cls is ScopeStmt:
            yield from _assignments(s.body)  # type: ignore[attr-defined]


_NO_READS = frozenset({ConstInt, ConstFloat, ConstBool, StrLit, EnumLit, DTypeLit, NoneLit, TypeLit})


def _value_reads(e: Expr, names: list[str]) -> bool:
    """Append the names the check of expression `e` reads (`Verifier.expr`: a name inside a literal type
    is not one); False when `e` calls a function of the program (a check that does is not remembered)."""
    stack = [e]
    pop, push = stack.pop, stack.extend
    while stack:
        x = pop()
        cls = x.__class__
        if cls is Var:
            names.append(x.name)  # type: ignore[attr-defined]
        elif cls is Call:
            if x.kind != "op":  # type: ignore[attr-defined]
                return False
            push(x.args)  # type: ignore[attr-defined]
            if x.kwargs:  # type: ignore[attr-defined]
                push([v for _, v in x.kwargs])  # type: ignore[attr-defined]
        elif cls is ListExpr or cls is TupleExpr:
            push(x.items)  # type: ignore[attr-defined]
        elif cls not in _NO_READS:
            push(iter_subexprs(x))
    return True


def definitions(f: Function) -> dict[str, Type | None]:
    """The names of `f` in the order the verifier defines them, which is the order of `function_types`'s
    dict (the parameters, then each statement's in turn: a loop's variable and carried names before its
    body, its results after; an if's results after both branches; an assignment's target), each with the
    type written where it is defined: a parameter's, an assignment's annotation, a result's `pl.yield_`
    annotation; None when none is written. For a pass that hands its output's value types over
    (`Pass.hand_over`)."""
    out: dict[str, Type | None] = {p.name: p.type for p in f.params}

    def results(s: Stmt, last: tuple[Stmt, ...]) -> None:
        y = last[-1] if last else None
        ann = y.annotation if isinstance(y, YieldStmt) and len(y.targets) == 1 else None
        for r in s.results:  # type: ignore[attr-defined]
            out.setdefault(r.name, ann)

    def block(body: tuple[Stmt, ...]) -> None:
        for s in body:
            cls = s.__class__
            if cls is AssignStmt:
                out.setdefault(s.target.name, s.annotation)  # type: ignore[attr-defined]
            elif cls is ForStmt or cls is WhileStmt:
                if cls is ForStmt:
                    out.setdefault(s.var.name, None)  # type: ignore[attr-defined]
                for a in s.iter_args:  # type: ignore[attr-defined]
                    out.setdefault(a.name, None)
                block(s.body)  # type: ignore[attr-defined]
                results(s, s.body)  # type: ignore[attr-defined]
            elif cls is IfStmt:
                block(s.then_body)  # type: ignore[attr-defined]
                block(s.else_body)  # type: ignore[attr-defined]
                results(s, s.then_body)  # type: ignore[attr-defined]
            elif cls is ScopeStmt:
                if s.var is not None:  # type: ignore[attr-defined]
                    out.setdefault(s.var.name, None)  # type: ignore[attr-defined]
                block(s.body)  # type: ignore[attr-defined]

    block(f.body)
    return out


def function_types(program: Program, ctx=None,
                   cache: VerifyCache | None = None) -> dict[str, dict[str, Type | None]]:
    """function name -> (value name -> inferred type) for every function: what passes use to know the
    type of any value. Types come from parameters, annotations and operator type rules. With the
    pipeline's `cache`, functions inferred before are not inferred again; without one, a program a
    pipeline run returned uses that run's (`keep_types`), and a question asked while a pipeline runs
    uses the running one's (`VerifyCache.running`). Each dict is the caller's own."""
    of = ProgramTypes(program, ctx, cache)
    return {f.name: of(f) for f in program.functions}


class ProgramTypes:
    """`function_types` one function at a time: `ProgramTypes(program, ctx, cache)(f)` is
    `function_types(program, ctx, cache)[f.name]` for a function `f` of `program`, inferring `f` alone
    (a pass that needs the types of a few functions does not pay for the others)."""

    __slots__ = ("_v",)

    def __init__(self, program: Program, ctx=None, cache: VerifyCache | None = None):
        if cache is None:
            cache = program.__dict__.get(_KEPT) or _RUNNING.get()
        self._v = Verifier(program, ctx, _default_op_typer(), cache)

    def __call__(self, f: Function) -> dict[str, Type | None]:
        return dict(self._v.function_types(f))


_KEPT = "_verify_cache"  # the attribute of a program that `keep_types` sets
_RUNNING: contextvars.ContextVar[VerifyCache | None] = contextvars.ContextVar("ptoc_running_verify_cache",
                                                                              default=None)


def keep_types(program: Program, cache: VerifyCache) -> None:
    """Tie the pipeline run's `cache` to `program`, its result: a later `function_types(program, ctx)` with
    the same `ctx` and no cache of its own (the emitters, the task manifest) reuses the types the run
    inferred instead of inferring them again. The attribute is no field of the node: it takes no part in
    comparing, printing or rebuilding the program, and a program made from it (`replace`) does not have it."""
    object.__setattr__(program, _KEPT, cache)


def kept_types(program: Program, ctx) -> VerifyCache | None:
    """The cache `keep_types` tied to `program`, when it is for `ctx`; else None."""
    cache = program.__dict__.get(_KEPT)
    return cache if cache is not None and cache.ctx is ctx else None


def verify_program(program: Program, ctx=None, op_typer: OpTyper | None = None,
                   check_ops: bool = True, cache: VerifyCache | None = None, ssa: bool = True) -> list[Diagnostic]:
    """Structural checks, plus operator type rules when `check_ops` (formatting does not need them:
    any `pl.<namespace>.<op>(...)` call is valid IR text). With the pipeline's `cache`, a function that
    verified clean before (same parts, same signatures) is not checked again (nor are its warnings
    repeated: the pipeline looks at errors only). `ssa`: also check single assignment and that values
    leave loops and branches only through `pl.yield_` (false for the program as written, which
    ConvertToSSA has not seen yet)."""
    if op_typer is None and check_ops:
        op_typer = _default_op_typer()
    return Verifier(program, ctx, op_typer, cache, ssa).run()


def _default_op_typer() -> OpTyper | None:
    """The operator type rules the operator package registered (`ptoc.ir.typing_registry`)."""
    from ptoc.ir.typing_registry import op_typer

    return op_typer()
