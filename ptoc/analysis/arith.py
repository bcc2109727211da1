"""Integer arithmetic facts: constant folding, provable multiples, provable non-negativity.

Three services, all pure and read-only over the immutable IR:

* `fold(expr)` folds an integer expression whose leaves are all constants into one `ConstInt`,
  wrapping around at the declared bit width of the dtype (INDEX is 64-bit signed). Anything that is
  not entirely constant comes back unchanged (the very same node).
* `Facts.of_function(fn)` records, in ONE linear read-only scan of a function, the bindings the
  proofs of rule NZ-8 may walk: `AssignStmt` (name -> value) and `ForStmt` loop variables
  (name -> `LoopRange(start, step, stop)`). Iteration arguments, loop/branch results, scope variables
  and names bound more than once are recorded as never resolved (an IterArg's value changes every
  iteration, so no binding describes the value one use sees). `facts.is_multiple_of(expr, d)` and
  `facts.is_non_negative(expr)` implement exactly the NZ-8 table; whatever the table does not prove
  is `False` (unprovable means rejected, never assumed).
* `blocked_offset(expr, divisor)` is the NZ-9 blocked offset: `FloorDiv(expr, divisor)` of the WHOLE
  offset expression in its own dtype, never re-associated (`(nb*256)//16` is not `nb*16`: the IR's
  arithmetic wraps at its declared width and the re-associated form does not wrap at the same place).
  `eval_int` evaluates an expression with that wrap-around, which is how the tests show the difference.

The NZ-8 table (spec/000, "符号形式的末尾 offset"):

| binding form                                  | multiple of d                 | non-negative                |
|-----------------------------------------------|-------------------------------|-----------------------------|
| constant                                      | the value is                  | the value >= 0              |
| `a * b`                                       | a factor is                   | both factors are            |
| `a + b`                                       | both are                      | both are                    |
| `a - b`                                       | both are                      | never (rejected)            |
| loop variable `for i in pl.range(s, e, st)`   | start and step are (recurse)  | start and step are (recurse)|
| `pl.min(a, b)` / `pl.max(a, b)`               | both are                      | min: both; max: either      |
| `tile.get_block_idx/_num/get_subblock_idx()`  | only d == 1                   | always                      |
| `a // c`, `a % c` (c a positive constant)     | only d == 1 (a product's      | a is                        |
|                                               | other factor carries it)      |                             |
| `x` bound by `x = e`                          | e is                          | e is                        |
| param, iter arg, loop/branch result, other    | no                            | no                          |

Soundness is with respect to mathematical integers. Under wrap-around at width W a multiple of d is
still a multiple of d after reduction mod 2^W exactly when d divides 2^W, i.e. d is a power of two; the
NZ divisors (16 and c0) are, and `blocked_offset` checks it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import NamedTuple

from ptoc.diagnostics import InternalError
from ptoc.ir import dtypes
from ptoc.ir.dtypes import DType
from ptoc.ir.nodes import (
    Abs,
    AssignStmt,
    BinOp,
    Call,
    Cast,
    ConstInt,
    Expr,
    ForStmt,
    Function,
    IfStmt,
    MinMax,
    ScalarType,
    ScopeStmt,
    Stmt,
    UnaryOp,
    Var,
    WhileStmt,
    YieldStmt,
)

__all__ = [
    "BLOCK_ID_OPS",
    "PROVABLE_FORMS",
    "Facts",
    "LoopRange",
    "blocked_offset",
    "eval_int",
    "fold",
    "result_dtype",
    "wrap",
]

# Calls whose value is a lane / block number: never negative (NZ-8).
BLOCK_ID_OPS = frozenset({
    "tile.get_block_idx", "tile.get_block_num", "tile.get_subblock_idx",
    "get_block_idx", "get_block_num", "get_subblock_idx",  # short spellings
})

# What a rejection lists as provable (NZ-8: "Unprovable -> rejection that lists the provable forms").
PROVABLE_FORMS = (
    "a non-negative constant that is a multiple of the factor",
    "a product `x * c` where one factor is a multiple (and both factors are non-negative)",
    "a sum of provable offsets",
    "a loop variable whose start and step are both provable (`for k0 in pl.range(0, K, 32)`)",
    "pl.min of two provable offsets, or pl.max of two multiples with one non-negative",
    "tile.get_block_idx() / get_block_num() / get_subblock_idx() as a non-negative factor",
    "`(x % c) * m` or `(x // c) * m` with c a positive constant, x non-negative, m a multiple",
)

# Recursion budget of one proof (expression levels plus binding hops). Deeper chains of bindings are
# handled by warming the memo in definition order; deeper single expressions are unprovable.
MAX_DEPTH = 150


class LoopRange(NamedTuple):
    """The range of a loop variable: `start + i * step` for i = 0, 1, ... while before `stop`."""

    start: Expr
    step: Expr
    stop: Expr


class _TooDeep(Exception):
    pass


# --------------------------------------------------------------------------------------------------
# Wrap-around and dtypes
# --------------------------------------------------------------------------------------------------


def wrap(value: int, dtype: DType) -> int:
    """`value` reduced to the range of integer `dtype` (two's complement for signed kinds)."""
    bits = dtype.bits
    mask = (1 << bits) - 1
    v = value & mask
    if dtype.is_signed and v >> (bits - 1):
        v -= 1 << bits
    return v


def _wrap_bits(value: int, bits: int | None, signed: bool) -> int:
    if bits is None:
        return value
    v = value & ((1 << bits) - 1)
    if signed and v >> (bits - 1):
        v -= 1 << bits
    return v


def result_dtype(lhs: DType, rhs: DType) -> DType:
    """The dtype of a binary scalar operation (the verifier's rule): an INDEX operand adopts the other
    operand's dtype; otherwise the left operand's dtype wins."""
    if lhs == rhs or rhs.name == "INDEX":
        return lhs
    if lhs.name == "INDEX":
        return rhs
    return lhs


def _children(e: Expr) -> tuple[Expr, ...]:
    if isinstance(e, (BinOp, MinMax)):
        return (e.lhs, e.rhs)
    if isinstance(e, (UnaryOp, Abs, Cast)):
        return (e.operand,)
    return ()


def _postorder(root: Expr, leaf: Callable[[Expr], object], node: Callable[[Expr, list], object],
               cache: dict[int, tuple[Expr, object]] | None = None):
    """Evaluate `root` bottom-up without recursion (expressions of any depth). `leaf` maps a node
    without children to a value; `node` maps a node and its children's values to its value. With
    `cache` (id -> (node, value)), cached nodes are not re-entered and computed ones are recorded."""
    vals: dict[int, object] = {}
    stack: list[tuple[Expr, bool]] = [(root, False)]
    while stack:
        e, ready = stack.pop()
        kids = _children(e)
        if cache is not None and not ready:
            hit = cache.get(id(e))
            if hit is not None and hit[0] is e:
                vals[id(e)] = hit[1]
                continue
        if not kids:
            vals[id(e)] = leaf(e)
        elif ready:
            vals[id(e)] = node(e, [vals[id(k)] for k in kids])
            if cache is not None:
                cache[id(e)] = (e, vals[id(e)])
        else:
            stack.append((e, True))
            stack.extend((k, False) for k in reversed(kids))
    return vals[id(root)]


# --------------------------------------------------------------------------------------------------
# Integer semantics shared by folding and evaluation (floor division and modulo, as codegen lowers
# FloorDiv to arith.floordivsi and FloorMod to a floor-corrected remsi)
# --------------------------------------------------------------------------------------------------


def _apply_binary(op: str, a: int, b: int, bits: int | None) -> int | None:
    """`a op b` on integers; None when the operation is undefined or not integer arithmetic."""
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    if op in ("//", "%"):
        if b == 0:
            return None
        return a // b if op == "//" else a % b
    if op in ("<<", ">>"):
        if b < 0 or (bits is not None and b >= bits):
            return None
        return a << b if op == "<<" else a >> b
    if op == "&":
        return a & b
    if op == "|":
        return a | b
    if op == "^":
        return a ^ b
    if op == "**":
        if b < 0:
            return None
        if bits is None:
            return a ** b if b <= 64 else None
        return pow(a, b, 1 << bits)
    return None


def _apply_unary(op: str, a: int) -> int | None:
    if op == "-":
        return -a
    if op == "~":
        return ~a
    return None


# --------------------------------------------------------------------------------------------------
# Constant folding
# --------------------------------------------------------------------------------------------------


def _fold_node(e: Expr, kids: list) -> tuple[int, DType] | None:
    if any(k is None for k in kids):
        return None
    if isinstance(e, Cast):
        (a, _), dt = kids[0], e.dtype
        return (wrap(a, dt), dt) if dt.is_int else None
    if isinstance(e, UnaryOp):
        a, dt = kids[0]
        v = _apply_unary(e.op, a)
        return None if v is None else (wrap(v, dt), dt)
    if isinstance(e, Abs):
        a, dt = kids[0]
        return wrap(abs(a), dt), dt
    (a, da), (b, db) = kids
    if isinstance(e, MinMax):
        dt = da  # the verifier types pl.min / pl.max by their first operand
        a, b = wrap(a, dt), wrap(b, dt)
        return ((min if e.op == "min" else max)(a, b), dt) if e.op in ("min", "max") else None
    dt = result_dtype(da, db)
    a, b = wrap(a, dt), wrap(b, dt)
    v = _apply_binary(e.op, a, b, dt.bits)
    return None if v is None else (wrap(v, dt), dt)


def _fold_leaf(e: Expr) -> tuple[int, DType] | None:
    if isinstance(e, ConstInt) and e.dtype.is_int:
        return e.value, e.dtype
    return None


def fold(expr: Expr) -> Expr:
    """`expr` as one `ConstInt` when every leaf is an integer constant, else `expr` itself.

    Arithmetic wraps at the declared width of the result dtype (INDEX: 64-bit signed; an INDEX
    literal combined with another integer dtype takes that dtype, as in the verifier); `//` and `%`
    round toward negative infinity. Division by zero, shifts by a negative amount or by the width or
    more, `/`, comparisons and non-integer leaves are not folded."""
    if isinstance(expr, ConstInt) or not _children(expr):
        return expr
    r = _postorder(expr, _fold_leaf, _fold_node)
    if r is None:
        return expr
    value, dt = r
    return ConstInt(value, dt, span=expr.span)




# --------------------------------------------------------------------------------------------------
# Evaluation with wrap-around
# --------------------------------------------------------------------------------------------------


def eval_int(expr: Expr, env: Mapping[str, int], dtype_bits: int | None = None, signed: bool = True) -> int:
    """Evaluate an integer expression. `env` maps variable names (and, for calls without arguments
    such as `tile.get_block_idx`, op names) to values. With `dtype_bits`, every leaf and every
    intermediate result wraps at that width (two's complement when `signed`), as IR arithmetic does;
    with None the evaluation uses unbounded integers. `//` and `%` are floor division and modulo.
    Raises ZeroDivisionError on division by zero and ValueError on anything else it cannot evaluate."""

    def w(v: int) -> int:
        return _wrap_bits(v, dtype_bits, signed)

    def leaf(e: Expr) -> int:
        if isinstance(e, ConstInt):
            return w(e.value)
        if isinstance(e, Var):
            if e.name not in env:
                raise ValueError(f"eval_int: no value for {e.name!r}")
            return w(env[e.name])
        if isinstance(e, Call) and not e.args and e.op in env:
            return w(env[e.op])
        raise ValueError(f"eval_int: cannot evaluate {type(e).__name__}")

    def node(e: Expr, kids: list) -> int:
        if isinstance(e, Cast):
            if not e.dtype.is_int:
                raise ValueError("eval_int: cast to a non-integer dtype")
            return w(wrap(kids[0], e.dtype))
        if isinstance(e, UnaryOp):
            v = _apply_unary(e.op, kids[0])
        elif isinstance(e, Abs):
            v = abs(kids[0])
        elif isinstance(e, MinMax):
            v = min(kids) if e.op == "min" else max(kids) if e.op == "max" else None
        else:
            a, b = kids
            if e.op in ("//", "%") and b == 0:
                raise ZeroDivisionError(f"eval_int: {e.op} by zero")
            v = _apply_binary(e.op, a, b, dtype_bits)
        if v is None:
            raise ValueError(f"eval_int: cannot evaluate {getattr(e, 'op', type(e).__name__)!r}")
        return w(v)

    return _postorder(expr, leaf, node)


# --------------------------------------------------------------------------------------------------
# NZ-9: the blocked offset
# --------------------------------------------------------------------------------------------------


def blocked_offset(expr: Expr, divisor: int, dtype: DType | None = None, facts: Facts | None = None) -> Expr:
    """NZ-9: `FloorDiv(expr, divisor)` of the whole offset expression, in the offset's own dtype.

    Never re-associated (`(nb*256)//16` stays that, not `nb*16`): the IR wraps at its declared width
    and a re-associated form does not wrap at the same place. Folded only when `expr` is a constant.
    The dtype is `dtype` if given, else the expression's dtype (variables typed through `facts`),
    else INDEX. `divisor` must be a positive power of two (it divides 2^W, which is why a proof of
    divisibility survives wrap-around); anything else is an internal error."""
    if isinstance(divisor, bool) or not isinstance(divisor, int) or divisor <= 0 or divisor & (divisor - 1):
        raise InternalError(f"blocked_offset: divisor {divisor!r} is not a positive power of two")
    dt = dtype or (facts.dtype_of(expr) if facts is not None else _static_dtype(expr)) or dtypes.INDEX
    return fold(BinOp("//", expr, ConstInt(divisor, dt), span=expr.span))


def _static_dtype(expr: Expr) -> DType | None:
    return Facts().dtype_of(expr)


# --------------------------------------------------------------------------------------------------
# Facts: the bindings of one function and the NZ-8 proofs over them
# --------------------------------------------------------------------------------------------------


class Facts:
    """The scalar bindings of one function and what can be proved about them (rule NZ-8).

    `assigns`: name -> value of an `AssignStmt`; `loops`: loop variable -> `LoopRange`;
    `unresolved`: names that are bound but never resolved (iteration arguments, loop and branch
    results, scope variables, names bound more than once); `params`: the function's parameters
    (unknown values); `dtypes`: the declared scalar dtype of a name where one is known;
    `order`: assigned and loop names in definition order."""

    def __init__(self, assigns: Mapping[str, Expr] | None = None,
                 loops: Mapping[str, LoopRange | tuple[Expr, Expr, Expr]] | None = None,
                 unresolved=(), params=(), dtypes: Mapping[str, DType] | None = None,
                 order=None):
        self.assigns: dict[str, Expr] = dict(assigns or {})
        self.loops: dict[str, LoopRange] = {k: LoopRange(*v) for k, v in (loops or {}).items()}
        self.unresolved: frozenset[str] = frozenset(unresolved)
        self.params: frozenset[str] = frozenset(params)
        self.dtypes: dict[str, DType] = dict(dtypes or {})
        for name in self.unresolved:  # a name that is never resolved wins over any binding
            self.assigns.pop(name, None)
            self.loops.pop(name, None)
        if order is None:
            order = list(self.loops) + list(self.assigns)
        self.order: tuple[str, ...] = tuple(n for n in order if n in self.assigns or n in self.loops)
        self._mult_memo: dict[tuple[str, int], bool] = {}
        self._nonneg_memo: dict[str, bool] = {}
        self._active: set[tuple[str, int]] = set()  # (name, d) in progress; d = 0 for non-negativity
        self._warmed: set[int] = set()
        self._const_cache: dict[int, tuple[Expr, object]] = {}  # fold results of compound nodes

    # ------------------------------------------------------------------ the one scan
    @classmethod
    def of_function(cls, fn: Function) -> Facts:
        """Record the bindings of `fn` in one linear read-only scan of its statements."""
        assigns: dict[str, Expr] = {}
        loops: dict[str, LoopRange] = {}
        unresolved: set[str] = set()
        types: dict[str, DType] = {}
        order: list[str] = []
        seen: set[str] = set()
        params = {p.name for p in fn.params}
        for p in fn.params:
            seen.add(p.name)
            if isinstance(p.type, ScalarType):
                types[p.name] = p.type.dtype

        def bind(name: str) -> bool:
            """Claim `name`; a second binding makes it unresolved (SSA is broken: which value?)."""
            if name in seen:
                unresolved.add(name)
                return False
            seen.add(name)
            return True

        stack: list[Stmt] = list(reversed(fn.body))
        while stack:
            s = stack.pop()
            body: tuple[Stmt, ...] = ()
            if isinstance(s, AssignStmt):
                name = s.target.name
                if bind(name):
                    ann = s.annotation
                    if isinstance(ann, ScalarType) and not ann.dtype.is_int:
                        unresolved.add(name)  # a float/bool scalar is no integer offset
                    else:
                        assigns[name] = s.value
                        order.append(name)
                        if isinstance(ann, ScalarType):
                            types[name] = ann.dtype
            elif isinstance(s, ForStmt):
                if bind(s.var.name):
                    loops[s.var.name] = LoopRange(s.start, s.step, s.stop)
                    order.append(s.var.name)
                    types[s.var.name] = dtypes.INDEX
                for a in s.iter_args:
                    bind(a.name)
                    unresolved.add(a.name)
                body = s.body
            elif isinstance(s, WhileStmt):
                for a in s.iter_args:
                    bind(a.name)
                    unresolved.add(a.name)
                body = s.body
            elif isinstance(s, IfStmt):
                body = s.then_body + s.else_body
            elif isinstance(s, ScopeStmt):
                if s.var is not None:
                    bind(s.var.name)
                    unresolved.add(s.var.name)
                body = s.body
            elif isinstance(s, YieldStmt):
                for t in s.targets:  # loop and branch results: the last iteration's / a branch's value
                    bind(t.name)
                    unresolved.add(t.name)
            stack.extend(reversed(body))
        return cls(assigns, loops, unresolved, params, types, order)

    # ------------------------------------------------------------------ public queries
    def is_multiple_of(self, expr: Expr, d: int) -> bool:
        """True only if `expr` is provably a multiple of `d` (> 0) by the NZ-8 table."""
        if isinstance(d, bool) or not isinstance(d, int) or d <= 0:
            raise ValueError(f"is_multiple_of: the factor must be a positive integer, not {d!r}")
        return self._run(lambda: self._mult(expr, d, 0), lambda: self._warm(d))

    def is_non_negative(self, expr: Expr) -> bool:
        """True only if `expr` is provably >= 0 by the NZ-8 table (a difference never is)."""
        return self._run(lambda: self._nonneg(expr, 0), lambda: self._warm(0))

    def is_provable_offset(self, expr: Expr, d: int) -> bool:
        """NZ-8 acceptance of a symbolic trailing offset: a multiple of `d` AND non-negative."""
        return self.is_multiple_of(expr, d) and self.is_non_negative(expr)

    def dtype_of(self, expr: Expr) -> DType | None:
        """The scalar dtype of an integer expression where it is known (None otherwise)."""
        seen: set[str] = set()

        def leaf(e: Expr) -> DType | None:
            if isinstance(e, ConstInt):
                return e.dtype
            if isinstance(e, Var):
                if e.name in self.dtypes:
                    return self.dtypes[e.name]
                if e.name in self.assigns and e.name not in seen and len(seen) < MAX_DEPTH:
                    seen.add(e.name)
                    return _postorder(self.assigns[e.name], leaf, node)
                return None
            if isinstance(e, Call) and e.op in BLOCK_ID_OPS:
                return dtypes.BY_NAME["UINT64"]
            return None

        def node(e: Expr, kids: list) -> DType | None:
            if isinstance(e, Cast):
                return e.dtype
            if isinstance(e, BinOp):
                if e.op in ("==", "!=", "<", "<=", ">", ">=", "and", "or"):
                    return dtypes.BOOL
                a, b = kids
                return result_dtype(a, b) if a is not None and b is not None else None
            if isinstance(e, UnaryOp) and e.op == "not":
                return dtypes.BOOL
            return kids[0]

        return _postorder(expr, leaf, node)

    # ------------------------------------------------------------------ machinery
    def _run(self, query: Callable[[], bool], warm: Callable[[], None]) -> bool:
        try:
            try:
                return query()
            except _TooDeep:
                warm()  # a long chain of bindings: prove them in definition order, then retry
                return query()
        except (_TooDeep, RecursionError):
            return False

    def _warm(self, d: int) -> None:
        """Memoize every binding in definition order (d = 0: non-negativity), so a later proof
        finds each name it walks already settled and recursion stays as deep as one expression."""
        if d in self._warmed:
            return
        self._warmed.add(d)
        for name in self.order:
            try:
                if d:
                    self._mult_var(name, d, 0)
                else:
                    self._nonneg_var(name, 0)
            except (_TooDeep, RecursionError):
                pass

    def _resolved(self, name: str) -> Expr | LoopRange | None:
        """The binding a proof may walk for `name`: a value, a loop range, or None (unknown)."""
        if name in self.unresolved:
            return None
        if name in self.loops:
            return self.loops[name]
        if name in self.assigns:
            value = self.assigns[name]
            dt = self.dtypes.get(name)
            c = fold(value)
            if isinstance(c, ConstInt) and c.dtype.is_int and dt is not None and dt.is_int:
                return ConstInt(wrap(c.value, dt), dt)  # the constant as the annotated dtype holds it
            return value
        return None

    def _const(self, e: Expr) -> int | None:
        """The folded value of `e` if it is an integer constant (memoized per node, so a proof that
        descends an expression folds each node once)."""
        if isinstance(e, ConstInt):
            return e.value if e.dtype.is_int else None
        if not _children(e):
            return None
        r = _postorder(e, _fold_leaf, _fold_node, self._const_cache)
        return None if r is None else r[0]

    def _positive_const(self, e: Expr) -> bool:
        c = self._const(e)
        return c is not None and c > 0

    # -- multiples ---------------------------------------------------------------------------------
    def _mult_var(self, name: str, d: int, depth: int) -> bool:
        key = (name, d)
        if key in self._mult_memo:
            return self._mult_memo[key]
        if key in self._active:
            return False  # a cycle of bindings (invalid IR) proves nothing
        b = self._resolved(name)
        if b is None:
            return False
        self._active.add(key)
        try:
            if isinstance(b, LoopRange):
                r = self._mult(b.start, d, depth + 1) and self._mult(b.step, d, depth + 1)
            else:
                r = self._mult(b, d, depth + 1)
        finally:
            self._active.discard(key)
        self._mult_memo[key] = r
        return r

    def _mult(self, e: Expr, d: int, depth: int) -> bool:
        if depth > MAX_DEPTH:
            raise _TooDeep
        c = self._const(e)
        if c is not None:
            return c % d == 0
        if isinstance(e, Var):
            return self._mult_var(e.name, d, depth)
        if isinstance(e, BinOp):
            if e.op in ("+", "-"):  # a difference proves divisibility (but never sign)
                return self._mult(e.lhs, d, depth + 1) and self._mult(e.rhs, d, depth + 1)
            if e.op == "*":
                return self._mult(e.lhs, d, depth + 1) or self._mult(e.rhs, d, depth + 1)
            if e.op in ("//", "%"):
                # the quotient / remainder itself carries no factor: in a product the other factor does
                return d == 1 and self._positive_const(e.rhs)
            return False
        if isinstance(e, MinMax) and e.op in ("min", "max"):
            return self._mult(e.lhs, d, depth + 1) and self._mult(e.rhs, d, depth + 1)
        if _is_block_id(e):
            return d == 1
        return False

    # -- signs -------------------------------------------------------------------------------------
    def _nonneg_var(self, name: str, depth: int) -> bool:
        if name in self._nonneg_memo:
            return self._nonneg_memo[name]
        key = (name, 0)
        if key in self._active:
            return False
        b = self._resolved(name)
        if b is None:
            return False
        self._active.add(key)
        try:
            if isinstance(b, LoopRange):
                r = self._nonneg(b.start, depth + 1) and self._nonneg(b.step, depth + 1)
            else:
                r = self._nonneg(b, depth + 1)
        finally:
            self._active.discard(key)
        self._nonneg_memo[name] = r
        return r

    def _nonneg(self, e: Expr, depth: int) -> bool:
        if depth > MAX_DEPTH:
            raise _TooDeep
        c = self._const(e)
        if c is not None:
            return c >= 0
        if isinstance(e, Var):
            return self._nonneg_var(e.name, depth)
        if isinstance(e, BinOp):
            if e.op in ("+", "*"):
                return self._nonneg(e.lhs, depth + 1) and self._nonneg(e.rhs, depth + 1)
            if e.op in ("//", "%"):
                # floor by a positive constant keeps the sign; the proof conservatively also requires a
                # non-negative dividend for `%` (spec/000: "被除数也必须非负")
                return self._positive_const(e.rhs) and self._nonneg(e.lhs, depth + 1)
            return False  # "-" never proves a sign; other operators are not in the table
        if isinstance(e, MinMax):
            if e.op == "min":
                return self._nonneg(e.lhs, depth + 1) and self._nonneg(e.rhs, depth + 1)
            if e.op == "max":
                return self._nonneg(e.lhs, depth + 1) or self._nonneg(e.rhs, depth + 1)
            return False
        return _is_block_id(e)


def _is_block_id(e: Expr) -> bool:
    return isinstance(e, Call) and e.kind == "op" and e.op in BLOCK_ID_OPS and not e.args
