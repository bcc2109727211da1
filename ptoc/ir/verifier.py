"""Structural checks of a program: names, single assignment, yields, arities, annotations.

The front end runs it on every parsed program (user errors with spans); the pass manager runs it
after every pass (a failure there is a bug in the pass). It walks each function once, in order,
with a scope stack, so its cost is linear in the size of the program.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterator

from ptoc.diagnostics import Diagnostic, Span
from ptoc.ir import dtypes
from ptoc.ir.nodes import (
    Abs,
    AssignStmt,
    BinOp,
    Call,
    Cast,
    ConstBool,
    ConstFloat,
    ConstInt,
    DictExpr,
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
    Program,
    ReturnStmt,
    ScalarType,
    ScopeStmt,
    Stmt,
    TensorType,
    TileType,
    TupleExpr,
    TupleType,
    Type,
    UnaryOp,
    Var,
    WhileStmt,
    YieldStmt,
)
from ptoc.ir.printer import print_type

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


def type_mismatch(annotated: Type, actual: Type) -> str | None:
    """Why `annotated` contradicts `actual` (None when they agree where both are known)."""
    a, b = annotated, actual
    if type(a) is not type(b):
        return f"the value is a {_kind(b)}, the annotation says {_kind(a)}"
    if isinstance(a, ScalarType):
        da, db = a.dtype, b.dtype  # type: ignore[union-attr]
        if da.is_int and db.is_int and "INDEX" in (da.name, db.name):
            return None  # INDEX converts to and from every integer scalar
        if a.dtype != b.dtype:  # type: ignore[union-attr]
            return f"the value has dtype {b.dtype.name}, the annotation says {a.dtype.name}"  # type: ignore
        return None
    if isinstance(a, TupleType):
        if len(a.types) != len(b.types):  # type: ignore[union-attr]
            return f"the value is a tuple of {len(b.types)}, the annotation says {len(a.types)}"  # type: ignore
        for x, y in zip(a.types, b.types):  # type: ignore[union-attr]
            r = type_mismatch(x, y)
            if r:
                return r
        return None
    if isinstance(a, (TensorType, TileType)):
        if a.dtype != b.dtype:  # type: ignore[union-attr]
            return f"the value has dtype {b.dtype.name}, the annotation says {a.dtype.name}"  # type: ignore
        if isinstance(a, TensorType) and a.layout == b.layout == "NZ" and len(a.shape) != len(b.shape):  # type: ignore
            # a logical NZ type and the blocked rank-5 form BlockNzTensorViews gave it (NZ-2, NZ-16)
            from ptoc.ir.types import nz_blocked_static_shape

            logical, blocked = (a, b) if len(b.shape) == 5 else (b, a)
            want = nz_blocked_static_shape(logical.shape, logical.dtype.c0)  # type: ignore[union-attr]
            have = tuple(d.value if isinstance(d, ConstInt) else None for d in blocked.shape)  # type: ignore
            if want is None or len(blocked.shape) != 5 or want == have:  # type: ignore[union-attr]
                return None
            return f"the blocked NZ shape {list(have)} is not the blocking of the logical shape"
        flattened = isinstance(a, TileType) and _is_2d_flattening(a.shape, b.shape)  # type: ignore[union-attr]
        # (FlattenTileNdTo2D: a rank-N tile may be annotated as its 2-D form [prod(leading), last])
        if not flattened and len(a.shape) != len(b.shape):  # type: ignore[union-attr]
            return f"the value has rank {len(b.shape)}, the annotation says rank {len(a.shape)}"  # type: ignore
        for i, (x, y) in enumerate(zip(a.shape, b.shape) if not flattened else ()):  # type: ignore[union-attr]
            if isinstance(x, ConstInt) and isinstance(y, ConstInt) and x.value != y.value:
                return f"dimension {i} of the value is {y.value}, the annotation says {x.value}"
        if isinstance(a, TileType) and a.memory and b.memory and a.memory != b.memory:  # type: ignore
            return f"the value lives in {b.memory}, the annotation says {a.memory}"  # type: ignore
        if isinstance(a, TensorType) and a.layout != b.layout:  # type: ignore[union-attr]
            return f"the value has layout {b.layout}, the annotation says {a.layout}"  # type: ignore
    return None


def _is_2d_flattening(flat: tuple[Expr, ...], nd: tuple[Expr, ...]) -> bool:
    """Is `flat` the 2-D form [prod(leading), last] of the static shape `nd` (rank 1: [1, N])?"""
    if len(flat) != 2 or len(nd) == 2 or not nd:
        return False
    vals = [d.value if isinstance(d, ConstInt) else None for d in nd]
    f = [d.value if isinstance(d, ConstInt) else None for d in flat]
    if None in vals or None in f:
        return False
    lead = 1
    for v in vals[:-1]:
        lead *= v  # type: ignore[operator]
    return f[0] == lead and f[1] == vals[-1]


def _kind(t: Type) -> str:
    return {"ScalarType": "scalar", "TensorType": "tensor", "TileType": "tile", "PtrType": "pointer",
            "TupleType": "tuple"}.get(type(t).__name__, type(t).__name__)


# Keywords of a `self.<function>(...)` call that are call metadata, not arguments: PyPTO prints
# `attrs={"arg_directions": [...]}` and `device=...` on cross-function calls.
_CALL_METADATA = ("attrs", "device")


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


class Verifier:
    def __init__(self, program: Program, ctx=None, op_typer: OpTyper | None = None):
        self.program = program
        self.ctx = ctx
        self.op_typer = op_typer
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
            try:
                self.function(f)
            except RecursionError:
                self.err("PTOC-E0114", f"function {f.name!r} is nested too deeply for ptoc", f,
                         hint="split deep expressions into several statements with intermediate names")
        return self.diags

    def function(self, f: Function) -> None:
        self.types = {}
        self.defined_at = {}
        self.region_of = {}
        self.quiet = set()
        scope = _Scope(None)
        for p in f.params:
            self.check_type(p.type, scope)
            self.define(p.name, p.type, p, scope)
        for t in f.returns:
            self.check_type(t, scope)
        self.block(f.body, scope, f, ctx="function")

    # ------------------------------------------------------------------ definitions and uses
    def define(self, name: str, t: Type | None, node: Node, scope: _Scope) -> None:
        if name in self.defined_at:
            first = self.defined_at[name]
            self.err("PTOC-E0102", f"{name!r} is assigned more than once (first at line {first.line})",
                     node, hint=f"IR is in SSA form: give the new value a new name, e.g. {name}_1")
            scope.names[name] = t
            return
        self.defined_at[name] = node.span
        self.types[name] = t
        scope.names[name] = t

    def use(self, v: Var, scope: _Scope, in_type: bool = False) -> Type | None:
        found, t = scope.lookup(v.name)
        if found:
            return t
        if v.name in self.dyn or in_type:
            return ScalarType(dtypes.INDEX)
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
            self.expr(e, scope, in_type=True)

    # ------------------------------------------------------------------ expressions
    def expr(self, e: Expr, scope: _Scope, in_type: bool = False) -> Type | None:
        if isinstance(e, Var):
            return self.use(e, scope, in_type)
        if isinstance(e, ConstInt):
            return ScalarType(e.dtype)
        if isinstance(e, ConstFloat):
            return ScalarType(e.dtype)
        if isinstance(e, ConstBool):
            return ScalarType(dtypes.BOOL)
        if isinstance(e, Call):
            arg_types = [self.expr(a, scope, in_type) for a in e.args]
            kwarg_types = {k: self.expr(v, scope, in_type) for k, v in e.kwargs}
            if e.kind == "func":
                return self.func_call(e)
            if self.op_typer is not None and not in_type:
                t, diags = self.op_typer(e, arg_types, kwarg_types, self.ctx)
                self.diags.extend(diags)
                return t
            return None
        sub = [self.expr(x, scope, in_type) for x in iter_subexprs(e)]
        if isinstance(e, BinOp):
            lt, rt = sub
            if e.op in ("==", "!=", "<", "<=", ">", ">=", "and", "or"):
                return ScalarType(dtypes.BOOL)
            if isinstance(lt, ScalarType) and isinstance(rt, ScalarType):
                return lt if lt.dtype == rt.dtype or rt.dtype.name == "INDEX" else (
                    rt if lt.dtype.name == "INDEX" else lt)
            return None
        if isinstance(e, UnaryOp):
            return ScalarType(dtypes.BOOL) if e.op == "not" else sub[0]
        if isinstance(e, (MinMax, Abs)):
            return sub[0]
        if isinstance(e, Cast):
            return ScalarType(e.dtype)
        if isinstance(e, GetItem):
            base = sub[0]
            if isinstance(base, TupleType) and isinstance(e.index, ConstInt):
                if not 0 <= e.index.value < len(base.types):
                    self.err("PTOC-E0113", f"index {e.index.value} is out of range for a tuple of "
                             f"{len(base.types)}", e.index)
                    return None
                return base.types[e.index.value]
            if base is not None and not isinstance(base, TupleType):
                self.err("PTOC-E0114", f"only tuple values can be indexed; this value is a {_kind(base)}", e,
                         hint="t[i] reads element i of a tuple returned by a call; read tensor and tile "
                         "elements with pl.tensor.read / pl.tile.read")
            return None
        return None

    def func_call(self, e: Call) -> Type | None:
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
        if not f.returns:
            return None
        if len(f.returns) == 1 and not f.returns_tuple:
            return f.returns[0]
        return TupleType(tuple(f.returns))

    # ------------------------------------------------------------------ statements
    def annotate(self, ann: Type | None, actual: Type | None, at: Node, scope: _Scope) -> Type | None:
        if ann is None:
            return actual
        self.check_type(ann, scope)
        if actual is not None:
            why = type_mismatch(ann, actual)
            if why:
                self.err("PTOC-E0105", f"annotation contradicts the value: {why}", at,
                         hint=f"the value's type is {print_type(actual)}")
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
        if isinstance(s, AssignStmt):
            vt = self.expr(s.value, scope)
            t = self.annotate(s.annotation, vt, s.annotation or s, scope)
            self.define(s.target.name, t, s.target, scope)
        elif isinstance(s, EvalStmt):
            self.expr(s.expr, scope)
        elif isinstance(s, ReturnStmt):
            ts = [self.expr(v, scope) for v in s.values]
            if f.returns and len(ts) != len(f.returns):
                self.err("PTOC-E0113", f"{f.name!r} returns {len(f.returns)} value(s) but this returns "
                         f"{len(ts)}", s)
            elif not f.returns and ts and f.func_type != "Opaque":
                pass  # functions without a declared return type may still return (printer leniency)
            for decl, t in zip(f.returns, ts):
                if t is not None:
                    why = type_mismatch(decl, t)
                    if why:
                        self.err("PTOC-E0105", f"returned value contradicts the declared return type: {why}", s)
        elif isinstance(s, ForStmt):
            for a in s.args:
                self.expr(a, scope)
            for _, v in s.kwargs:
                self.expr(v, scope)
            init_types = [self.expr(v, scope) for v in s.init_values]
            if len(s.iter_args) != len(s.init_values):
                self.err("PTOC-E0104", f"{len(s.iter_args)} loop-carried name(s) but {len(s.init_values)} "
                         "init value(s)", s, hint="give one initial value per carried name")
            inner = _Scope(scope)
            self.define(s.var.name, ScalarType(dtypes.INDEX), s.var, inner)
            for a, t in zip(s.iter_args, init_types + [None] * len(s.iter_args)):
                self.define(a.name, t, a, inner)
            ys = self.block(s.body, inner, f, "loop", carried=len(s.iter_args), owner=s)
            self._leave(inner, f"the body of the loop at line {s.span.line}")
            self._bind_results(s.results, ys, init_types, s, scope)
        elif isinstance(s, WhileStmt):
            init_types = [self.expr(v, scope) for v in s.init_values]
            if len(s.iter_args) != len(s.init_values):
                self.err("PTOC-E0104", f"{len(s.iter_args)} loop-carried name(s) but {len(s.init_values)} "
                         "init value(s)", s, hint="give one initial value per carried name")
            inner = _Scope(scope)
            for a, t in zip(s.iter_args, init_types + [None] * len(s.iter_args)):
                self.define(a.name, t, a, inner)
            self.expr(s.cond, inner)
            ys = self.block(s.body, inner, f, "loop", carried=len(s.iter_args), owner=s)
            self._leave(inner, f"the body of the while loop at line {s.span.line}")
            self._bind_results(s.results, ys, init_types, s, scope)
        elif isinstance(s, IfStmt):
            self.expr(s.cond, scope)
            then_scope = _Scope(scope)
            ty = self.block(s.then_body, then_scope, f, "branch")
            self._leave(then_scope, f"the if branch at line {s.span.line}")
            else_scope = _Scope(scope)
            ey = self.block(s.else_body, else_scope, f, "branch") if s.else_body else None
            self._leave(else_scope, f"the else branch of the if at line {s.span.line}")
            tn = tuple(v.name for v in s.results)
            en = tuple(v.name for v in (s.else_body[-1].targets if s.else_body
                                        and isinstance(s.else_body[-1], YieldStmt) else ()))
            if tn or en:
                if not s.else_body:
                    self.err("PTOC-E0103", "an if that yields values needs an else branch that yields them too",
                             s, hint=f"add `else:` ending with `{', '.join(tn)} = pl.yield_(...)`")
                elif tn != en:
                    self.err("PTOC-E0103", f"the branches yield different names: ({', '.join(tn)}) and "
                             f"({', '.join(en)})", s, hint="both branches must end with pl.yield_ into the same "
                             "names")
                    self.quiet.update(n for n in en if n not in tn)
            types = ty if ty is not None else ey
            for i, v in enumerate(s.results):
                t = types[i] if types is not None and i < len(types) else None
                self.define(v.name, t, v, scope)
        elif isinstance(s, ScopeStmt):
            for a in s.args:
                self.expr(a, scope)
            for _, v in s.kwargs:
                self.expr(v, scope)
            # A scope is a region of the same function: names it defines stay visible after it.
            if s.var is not None:
                self.define(s.var.name, ScalarType(dtypes.INDEX), s.var, scope)
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


def function_types(program: Program, ctx=None) -> dict[str, dict[str, Type | None]]:
    """function name -> (value name -> inferred type) for every function: what passes use to know the
    type of any value. Types come from parameters, annotations and operator type rules."""
    v = Verifier(program, ctx, _default_op_typer())
    out: dict[str, dict[str, Type | None]] = {}
    for f in program.functions:
        v.function(f)
        out[f.name] = dict(v.types)
    return out


def verify_program(program: Program, ctx=None, op_typer: OpTyper | None = None,
                   check_ops: bool = True) -> list[Diagnostic]:
    """Structural checks, plus operator type rules when `check_ops` (formatting does not need them:
    any `pl.<namespace>.<op>(...)` call is valid IR text)."""
    if op_typer is None and check_ops:
        op_typer = _default_op_typer()
    return Verifier(program, ctx, op_typer).run()


def _default_op_typer() -> OpTyper | None:
    try:
        from ptoc.ops.registry import infer_call_type
    except ImportError:  # the operator registry is optional for structural checks
        return None
    return infer_call_type
