"""Constant propagation and integer folding, as PyPTO's Simplify pass does (the pass is
`ptoc.passes.Simplify`).

Programs name their sizes: `CHUNK: pl.Scalar[pl.INDEX] = 512` and then `[CHUNK, 64]` in shapes, offsets
and loop bounds. Later passes need those as numbers (a tile's shape must be static), so this pass, right
after ConvertToSSA, replaces such names by their values and folds what that makes constant. It keeps a
small integer range analysis (each loop variable lies in its range, an INDEX scalar is never negative, a
branch knows its condition) and uses it to drop work that can never run. In order:

- Constant propagation: a scalar assigned a literal once, at the function's top level (not inside a
  loop or a branch; a `with pl.at(...)` scope counts as top level), is replaced by the literal in every
  later expression and in every type written later (`pl.Tensor[[CHUNK, 64], ...]`, `pl.Tile[...]`).
- Folding, bottom-up: constant operands (`3 + 4` -> 7, comparisons, `not`, `and`/`or`, min/max),
  identities (`x + 0`, `0 + x`, `x - 0`, `x * 1`, `1 * x` -> x; `x * 0`, `x % 1` -> 0; `x // 1` -> x),
  sums that cancel (`k + 0 - k + 8` -> 8) and range facts (`i // 8` -> 0 and `i % 8` -> i for a loop
  variable of `pl.range(8)`; a comparison whose outcome the ranges decide -> True/False).
- PyPTO's rewrite rules for integer `+`, `-`, `*`, unary `-` and comparisons and for `not`, `and`, `or`,
  in PyPTO's order (`_RULES`): constants gathered and moved to the right (`32 + i * 16` -> `i * 16 + 32`,
  `(i + 3) + 5` -> `i + 8`, `i + 4 < 9` -> `i < 5`), `(i + 1) * 64` -> `i * 64 + 64`, equal terms
  cancelled, coefficients collected (`i * 4 + i` -> `i * 5`), `a > b` -> `b < a`, so the folded
  expressions are the ones PyPTO prints.
- An `if` whose condition the ranges decide keeps only the branch that runs (its `pl.yield_` values
  replace the `if`'s results), or vanishes when that branch is an absent `else`. A `pl.range` loop
  without keyword options that provably runs once becomes its body with the loop variable replaced by
  the start and the carried values by their initial values; one that never runs leaves its results
  equal to the initial values.
- Dead code: an unused scalar assignment whose value calls nothing is removed (repeatedly, so chains go
  too); results of an `if` that nothing reads are dropped with their yielded values.

Names assigned more than once (a program not yet in single assignment) are never propagated. Values
assigned inside a loop, a branch or a `pl.spmd` scope only add a range fact, which ends with that body.

Before::

    CHUNK: pl.Scalar[pl.INDEX] = 512
    with pl.at(level=pl.Level.CORE_GROUP):
        t: pl.Tile[[CHUNK, 64], pl.FP32] = pl.load(x, [CHUNK * 0, 0], [CHUNK, 64])

After::

    with pl.at(level=pl.Level.CORE_GROUP):
        t: pl.Tile[[512, 64], pl.FP32] = pl.load(x, [0, 0], [512, 64])

Deliberate differences from PyPTO: ptoc has PyPTO's rewrite rules for `+`, `-`, `*`, unary `-`,
comparisons, `not`, `and` and `or` but not its rules for `//`, `%`, min and max (ptoc's range facts fold
the common cases of those), so an expression only those rules fold stays as written; floating-point
operands are not folded, and `not (a < b)` on floats stays (PyPTO makes it `b <= a`, which a NaN
contradicts). Like PyPTO, a `pl.tensor.view(x,
layout=L)` of a tensor that already has layout L becomes `x`.
"""

from __future__ import annotations

from collections import Counter
from operator import attrgetter

from ptoc.ir import dtypes
from ptoc.ir.nodes import (
    Abs,
    AssignStmt,
    BinOp,
    Call,
    ConstBool,
    ConstFloat,
    ConstInt,
    DTypeLit,
    EnumLit,
    EvalStmt,
    Expr,
    ForStmt,
    Function,
    IfStmt,
    ListExpr,
    MinMax,
    Node,
    PassStmt,
    ReturnStmt,
    ScalarType,
    ScopeStmt,
    Stmt,
    StrLit,
    TensorType,
    UnaryOp,
    Var,
    WhileStmt,
    YieldStmt,
)
from ptoc.ir.substitute import substitute
from ptoc.ir.visitor import Mutator, child_fields, replace, walk
from ptoc.ir.verifier import NodeIndex

Bound = tuple["int | None", "int | None"]  # (lowest, highest); None: unbounded on that side
_ANY: Bound = (None, None)
_NEGATE = {"<": ">=", "<=": ">", ">": "<=", ">=": "<", "==": "!=", "!=": "=="}
_MIRROR = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "==", "!=": "!="}


# ------------------------------------------------------------------------------------ integer ranges
def _add(a: Bound, b: Bound) -> Bound:
    lo = None if a[0] is None or b[0] is None else a[0] + b[0]
    hi = None if a[1] is None or b[1] is None else a[1] + b[1]
    return lo, hi


def _scale(a: Bound, c: int) -> Bound:
    lo = None if a[0] is None else a[0] * c
    hi = None if a[1] is None else a[1] * c
    return (lo, hi) if c >= 0 else (hi, lo)


def _linear(e: Expr, is_int) -> tuple[dict[str, int], int] | None:
    """`e` as sum(coef * name) + const when it is built from integer constants, integer names
    (`is_int(name)`), + - and multiplication by a constant; else None."""
    if isinstance(e, ConstInt):
        return {}, e.value
    if isinstance(e, Var):
        return ({e.name: 1}, 0) if is_int(e.name) else None
    if isinstance(e, UnaryOp) and e.op == "-":
        inner = _linear(e.operand, is_int)
        return None if inner is None else ({k: -v for k, v in inner[0].items()}, -inner[1])
    if isinstance(e, BinOp) and e.op in ("+", "-", "*"):
        a, b = _linear(e.lhs, is_int), _linear(e.rhs, is_int)
        if a is None or b is None:
            return None
        if e.op == "*":
            if a[0] and b[0]:
                return None
            (terms, c), k = (a, b[1]) if not b[0] else (b, a[1])
            return {n: v * k for n, v in terms.items()}, c * k
        sign = 1 if e.op == "+" else -1
        terms = dict(a[0])
        for n, v in b[0].items():
            terms[n] = terms.get(n, 0) + sign * v
        return {n: v for n, v in terms.items() if v}, a[1] + sign * b[1]
    return None


def _min_max(op: str, a: Bound, b: Bound) -> Bound:
    """The range of min(x, y) / max(x, y) for x in `a`, y in `b`. An unbounded side (None) of min's
    lower or max's upper bound stays unbounded; for min's upper bound (max's lower) one known side is
    enough."""
    def both(x, y, f):
        return None if x is None or y is None else f(x, y)

    def either(x, y, f):
        return y if x is None else x if y is None else f(x, y)

    if op == "min":
        return both(a[0], b[0], min), either(a[1], b[1], min)
    return either(a[0], b[0], max), both(a[1], b[1], max)


def _floordiv_bound(a: Bound, c: int) -> Bound:
    return (None if a[0] is None else a[0] // c, None if a[1] is None else a[1] // c)


_INDEX_SCALAR = ScalarType(dtypes.INDEX)  # the type of a name without one (made once: `is_int` asks often)


class _Ranges:
    """What is known about integer names: constant values (substituted) and ranges (only consulted)."""

    def __init__(self, types: dict):
        self.types = types
        self.bounds: dict[str, Bound] = {}

    def is_int(self, name: str) -> bool:
        """An integer scalar (a name without a known type is a dynamic dimension: INDEX)."""
        t = self.types.get(name, _INDEX_SCALAR)
        return isinstance(t, ScalarType) and t.dtype.is_int

    def int_expr(self, e: Expr) -> bool:
        """`e` computes an integer (so folding it to an integer constant keeps its kind)."""
        if isinstance(e, ConstInt):
            return True
        if isinstance(e, Var):
            return self.is_int(e.name)
        if isinstance(e, BinOp) and e.op in ("+", "-", "*", "//", "%"):
            return self.int_expr(e.lhs) and self.int_expr(e.rhs)
        if isinstance(e, Abs):
            return self.int_expr(e.operand)
        if isinstance(e, MinMax):
            return self.int_expr(e.lhs) and self.int_expr(e.rhs)
        if isinstance(e, UnaryOp):
            return e.op == "-" and self.int_expr(e.operand)
        return False

    def int_dtype(self, e: Expr):
        """The integer dtype of `e` (an `int_expr`): a constant operand takes the other operand's."""
        while True:
            if isinstance(e, ConstInt):
                return e.dtype
            if isinstance(e, Var):
                t = self.types.get(e.name)
                return t.dtype if isinstance(t, ScalarType) else dtypes.INDEX
            if isinstance(e, (BinOp, MinMax)):
                e = e.rhs if isinstance(e.lhs, ConstInt) and not isinstance(e.rhs, ConstInt) else e.lhs
            elif isinstance(e, (UnaryOp, Abs)):
                e = e.operand
            else:
                return dtypes.INDEX

    def default(self, name: str) -> Bound:
        t = self.types.get(name)
        if isinstance(t, ScalarType) and t.dtype.name == "INDEX":
            return 0, None
        return _ANY

    def of_name(self, name: str) -> Bound:
        return self.bounds.get(name) or self.default(name)

    def of(self, e: Expr) -> Bound:
        if isinstance(e, ConstBool):
            return int(e.value), int(e.value)
        lin = _linear(e, self.is_int)
        if lin is not None:
            return self.of_linear(lin)
        if isinstance(e, BinOp) and isinstance(e.rhs, ConstInt) and e.rhs.value > 0:
            if e.op == "//":
                return _floordiv_bound(self.of(e.lhs), e.rhs.value)
            if e.op == "%":
                a = self.of(e.lhs)
                if a[0] is not None and a[1] is not None and a[0] >= 0 and a[1] < e.rhs.value:
                    return a
                return 0, e.rhs.value - 1
        if isinstance(e, MinMax):
            return _min_max(e.op, self.of(e.lhs), self.of(e.rhs))
        return _ANY

    def of_linear(self, lin: tuple[dict[str, int], int]) -> Bound:
        """The range of the sum `lin` (a `_linear` form)."""
        out: Bound = (lin[1], lin[1])
        for n, c in lin[0].items():
            out = _add(out, _scale(self.of_name(n), c))
        return out

    def decide(self, e: Expr) -> bool | None:
        """True/False when the ranges decide the condition `e`, else None."""
        if isinstance(e, ConstBool):
            return e.value
        if isinstance(e, UnaryOp) and e.op == "not":
            inner = self.decide(e.operand)
            return None if inner is None else not inner
        if isinstance(e, BinOp) and e.op in ("and", "or"):
            a, b = self.decide(e.lhs), self.decide(e.rhs)
            if e.op == "and":
                return False if False in (a, b) else (True if a is True and b is True else None)
            return True if True in (a, b) else (False if a is False and b is False else None)
        if isinstance(e, BinOp) and e.op in _NEGATE:
            lin = _linear(BinOp("-", e.lhs, e.rhs), self.is_int)  # (`of` the difference, its form found once)
            if lin is not None:
                lo, hi = self.of_linear(lin)
            else:  # not a sum: compare the two ranges instead
                a, b = self.of(e.lhs), self.of(e.rhs)
                lo = None if a[0] is None or b[1] is None else a[0] - b[1]
                hi = None if a[1] is None or b[0] is None else a[1] - b[0]
            return _decide_difference(e.op, lo, hi)
        return None

    def constrain(self, cond: Expr, holds: bool) -> list[tuple[str, Bound | None]]:
        """Tighten ranges by `cond` being `holds`; returns what to restore afterwards."""
        saved: list[tuple[str, Bound | None]] = []
        for name, op, c in _facts(cond, holds):
            lo, hi = self.of_name(name)
            if op in ("<", "<="):
                hi2 = c - 1 if op == "<" else c
                hi = hi2 if hi is None else min(hi, hi2)
            elif op in (">", ">="):
                lo2 = c + 1 if op == ">" else c
                lo = lo2 if lo is None else max(lo, lo2)
            elif op == "==":
                lo, hi = c, c
            else:
                continue
            saved.append((name, self.bounds.get(name)))
            self.bounds[name] = (lo, hi)
        return saved

    def restore(self, saved: list[tuple[str, Bound | None]]) -> None:
        for name, old in reversed(saved):
            if old is None:
                self.bounds.pop(name, None)
            else:
                self.bounds[name] = old


def _decide_difference(op: str, lo: int | None, hi: int | None) -> bool | None:
    """The outcome of `d <op> 0` for d in [lo, hi], when the range decides it."""
    def known(x):
        return x is not None
    if op == "<":
        return True if known(hi) and hi < 0 else (False if known(lo) and lo >= 0 else None)
    if op == "<=":
        return True if known(hi) and hi <= 0 else (False if known(lo) and lo > 0 else None)
    if op == ">":
        return True if known(lo) and lo > 0 else (False if known(hi) and hi <= 0 else None)
    if op == ">=":
        return True if known(lo) and lo >= 0 else (False if known(hi) and hi < 0 else None)
    outside = (known(lo) and lo > 0) or (known(hi) and hi < 0)
    exact = lo == 0 and hi == 0
    if op == "==":
        return True if exact else (False if outside else None)
    return False if exact else (True if outside else None)


def _facts(cond: Expr, holds: bool) -> list[tuple[str, str, int]]:
    """(name, op, constant) facts that follow from `cond` being `holds`."""
    if isinstance(cond, UnaryOp) and cond.op == "not":
        return _facts(cond.operand, not holds)
    if isinstance(cond, BinOp) and cond.op == "and" and holds:
        return _facts(cond.lhs, True) + _facts(cond.rhs, True)
    if isinstance(cond, BinOp) and cond.op == "or" and not holds:
        return _facts(cond.lhs, False) + _facts(cond.rhs, False)
    if isinstance(cond, BinOp) and cond.op in _NEGATE:
        op = cond.op if holds else _NEGATE[cond.op]
        if isinstance(cond.lhs, Var) and isinstance(cond.rhs, ConstInt):
            return [(cond.lhs.name, op, cond.rhs.value)]
        if isinstance(cond.rhs, Var) and isinstance(cond.lhs, ConstInt):
            return [(cond.rhs.name, _MIRROR[op], cond.lhs.value)]
    return []


# ------------------------------------------------------------------------------------ expressions
def _int(v: int, like: Expr) -> ConstInt:
    dt = like.dtype if isinstance(like, ConstInt) else dtypes.INDEX
    return ConstInt(v, dt, span=like.span)


def fold_constants(e: BinOp) -> Expr | None:
    """`e` with constant operands folded (integers, comparisons, `and`/`or`); None when it does not fold."""
    a, b = e.lhs, e.rhs
    if isinstance(a, ConstInt) and isinstance(b, ConstInt):
        x, y = a.value, b.value
        if e.op in ("+", "-", "*"):
            return _int(x + y if e.op == "+" else x - y if e.op == "-" else x * y, a)
        if e.op in ("//", "%") and y != 0:
            return _int(x // y if e.op == "//" else x % y, a)
        if e.op in _NEGATE:
            return ConstBool(_decide_difference(e.op, x - y, x - y), span=e.span)
        return None
    if isinstance(a, ConstBool) and isinstance(b, ConstBool) and e.op in ("and", "or", "==", "!="):
        r = {"and": a.value and b.value, "or": a.value or b.value, "==": a.value == b.value,
             "!=": a.value != b.value}[e.op]
        return ConstBool(r, span=e.span)
    if e.op in ("and", "or"):
        for c, other in ((a, b), (b, a)):
            if isinstance(c, ConstBool):
                absorbing = c.value is (e.op == "or")
                return c if absorbing else other
    return None


def _is_int(e: Expr, v: int) -> bool:
    return isinstance(e, ConstInt) and e.value == v


def _identity(e: BinOp) -> Expr | None:
    a, b = e.lhs, e.rhs
    if e.op == "+":
        return b if _is_int(a, 0) else a if _is_int(b, 0) else None
    if e.op == "-":
        return a if _is_int(b, 0) else None
    if e.op == "*":
        if _is_int(a, 1) or _is_int(b, 1):
            return b if _is_int(a, 1) else a
        if _is_int(a, 0) or _is_int(b, 0):
            return a if _is_int(a, 0) else b
        return None
    if e.op == "//" and _is_int(b, 1):
        return a
    if e.op == "%" and _is_int(b, 1):
        return _int(0, b)
    return None


# ------------------------------------------------------------------------------------ PyPTO's rewrite rules
def _C1_NONZERO(c):  # noqa: N802  (the conditions of rules, named like the constants they test)
    return c["c1"] != 0


def _C1_NEGATIVE(c):  # noqa: N802
    return c["c1"] < 0


def _C1_POSITIVE(c):  # noqa: N802
    return c["c1"] > 0


def _C2_POSITIVE(c):  # noqa: N802
    return c["c2"] > 0


# PyPTO's Simplify rewrites every integer `+`, `-`, `*`, unary `-` and comparison, and every `not`, `and`
# and `or`, with an ordered list of pattern rules per operator (its arithmetic rewrite simplifier); the
# first rule that matches gives the result, which is rewritten again (at most 5 levels deep). The same
# rules, in the same order, make ptoc's folded expressions the ones PyPTO prints: constants reassociated
# and moved to the right of `+`, `*` and `==` (`32 + i * 16` -> `i * 16 + 32`, `(i + 1) * 64` ->
# `i * 64 + 64`, `i + 4 < 9` -> `i < 5`), equal terms cancelled, coefficients collected, `a > b` written
# `b < a`. PyPTO's rules for `//`, `%`, min and max themselves are not here.
#
# A pattern is a tuple (operator, operands...): "+", "-", "*", "//", "%", "min", "max", comparisons,
# "and", "or" take two, "neg" (unary `-`) and "not" one; a name matches any expression ("x", "y", "z";
# a name seen twice must match equal expressions) or an integer constant only ("c1", "c2"). A result is
# built the same way (an int is a constant of the expression's type, a bool a boolean) and folds where
# its operands are constants, as PyPTO builds its results. A third element is a condition on the
# constants' values.
_RULES: dict[str, list[tuple]] = {
    "+": [
        (("+", ("+", "x", "c1"), "c2"), ("+", "x", ("+", "c1", "c2"))),   # constants together
        (("+", ("+", "c1", "x"), "c2"), ("+", "x", ("+", "c1", "c2"))),
        (("+", ("-", "x", "y"), "y"), "x"),                                # cancellation
        (("+", "x", ("-", "y", "x")), "y"),
        (("+", ("-", "x", "y"), ("-", "y", "z")), ("-", "x", "z")),
        (("+", ("-", "x", "y"), ("-", "z", "x")), ("-", "z", "y")),
        (("+", "x", "x"), ("*", "x", 2)),                                  # coefficients
        (("+", ("*", "x", "y"), "x"), ("*", ("+", "y", 1), "x")),
        (("+", "x", ("*", "x", "y")), ("*", ("+", "y", 1), "x")),
        (("+", ("*", "x", "y"), ("*", "x", "z")), ("*", ("+", "y", "z"), "x")),
        (("+", ("*", "y", "x"), ("*", "x", "z")), ("*", ("+", "y", "z"), "x")),
        (("+", ("*", "x", "y"), ("*", "z", "x")), ("*", ("+", "y", "z"), "x")),
        (("+", ("*", "y", "x"), ("*", "z", "x")), ("*", ("+", "y", "z"), "x")),
        (("+", ("*", ("//", "x", "y"), "y"), ("%", "x", "y")), "x"),       # x // y * y + x % y
        (("+", ("%", "x", "y"), ("*", ("//", "x", "y"), "y")), "x"),
        (("+", ("*", "y", ("//", "x", "y")), ("%", "x", "y")), "x"),
        (("+", ("%", "x", "y"), ("*", "y", ("//", "x", "y"))), "x"),
        (("+", ("min", "x", ("-", "y", "z")), "z"), ("min", ("+", "x", "z"), "y")),  # min/max
        (("+", ("min", ("-", "x", "z"), "y"), "z"), ("min", "x", ("+", "y", "z"))),
        (("+", "z", ("min", "x", ("-", "y", "z"))), ("min", ("+", "x", "z"), "y")),
        (("+", ("max", "x", ("-", "y", "z")), "z"), ("max", ("+", "x", "z"), "y")),
        (("+", ("max", ("-", "x", "z"), "y"), "z"), ("max", "x", ("+", "y", "z"))),
        (("+", "z", ("max", "x", ("-", "y", "z"))), ("max", ("+", "x", "z"), "y")),
        (("+", ("max", "x", "y"), ("min", "x", "y")), ("+", "x", "y")),
        (("+", ("min", "x", "y"), ("max", "x", "y")), ("+", "x", "y")),
        (("+", ("max", "x", "y"), ("min", "y", "x")), ("+", "x", "y")),
        (("+", ("min", "x", "y"), ("max", "y", "x")), ("+", "x", "y")),
        (("+", "c1", "x"), ("+", "x", "c1")),                              # constants to the right
        (("+", "x", ("-", "c1", "y")), ("+", ("-", "x", "y"), "c1")),
        (("+", ("-", "c1", "y"), "x"), ("+", ("-", "x", "y"), "c1")),
        (("+", ("+", "x", "c1"), "y"), ("+", ("+", "x", "y"), "c1")),
    ],
    "-": [
        (("-", "x", "x"), 0),
        (("-", ("+", "x", "y"), "y"), "x"),                                # cancellation
        (("-", ("+", "x", "y"), "x"), "y"),
        (("-", ("+", "y", "x"), "x"), "y"),
        (("-", "x", ("+", "x", "y")), ("neg", "y")),
        (("-", "x", ("+", "y", "x")), ("neg", "y")),
        (("-", ("+", "x", "c1"), "c2"), ("+", "x", ("-", "c1", "c2"))),   # constants together
        (("-", ("+", "c1", "x"), "c2"), ("+", "x", ("-", "c1", "c2"))),
        (("-", "c1", ("-", "c2", "x")), ("+", "x", ("-", "c1", "c2"))),
        (("-", "c1", ("+", "x", "c2")), ("-", ("-", "c1", "c2"), "x")),
        (("-", "c1", ("+", "c2", "x")), ("-", ("-", "c1", "c2"), "x")),
        (("-", ("-", "c1", "x"), ("-", "c2", "y")), ("+", ("-", "y", "x"), ("-", "c1", "c2"))),
        (("-", ("-", "x", "y"), ("-", "x", "z")), ("-", "z", "y")),
        (("-", ("+", "x", "y"), ("+", "x", "z")), ("-", "y", "z")),
        (("-", ("+", "y", "x"), ("+", "x", "z")), ("-", "y", "z")),
        (("-", ("+", "x", "y"), ("+", "z", "x")), ("-", "y", "z")),
        (("-", ("+", "y", "x"), ("+", "z", "x")), ("-", "y", "z")),
        (("-", ("*", "x", "y"), "x"), ("*", ("-", "y", 1), "x")),         # coefficients
        (("-", "x", ("*", "x", "y")), ("*", ("-", 1, "y"), "x")),
        (("-", ("*", "x", "y"), ("*", "x", "z")), ("*", ("-", "y", "z"), "x")),
        (("-", ("*", "y", "x"), ("*", "x", "z")), ("*", ("-", "y", "z"), "x")),
        (("-", ("*", "x", "y"), ("*", "z", "x")), ("*", ("-", "y", "z"), "x")),
        (("-", ("*", "y", "x"), ("*", "z", "x")), ("*", ("-", "y", "z"), "x")),
        (("-", "x", ("*", ("//", "x", "c1"), "c1")), ("%", "x", "c1"), _C1_NONZERO),
        (("-", "x", ("*", "c1", ("//", "x", "c1"))), ("%", "x", "c1"), _C1_NONZERO),
        (("-", ("*", ("//", "x", "c1"), "c1"), "x"), ("-", 0, ("%", "x", "c1")), _C1_NONZERO),
        (("-", "x", ("*", ("//", ("+", "x", "y"), "c1"), "c1")), ("-", ("%", ("+", "x", "y"), "c1"), "y"), _C1_NONZERO),
        (("-", ("*", ("//", ("+", "x", "y"), "c1"), "c1"), "x"), ("-", "y", ("%", ("+", "x", "y"), "c1")), _C1_NONZERO),
        (("-", "x", ("*", ("//", ("-", "x", "y"), "c1"), "c1")), ("+", ("%", ("-", "x", "y"), "c1"), "y"), _C1_NONZERO),
        (("-", ("*", ("//", ("-", "x", "y"), "c1"), "c1"), "x"),
         ("-", ("-", 0, ("%", ("-", "x", "y"), "c1")), "y"), _C1_NONZERO),
        (("-", ("min", "x", "y"), "x"), ("min", 0, ("-", "y", "x"))),     # min/max
        (("-", ("min", "x", "y"), "y"), ("min", ("-", "x", "y"), 0)),
        (("-", ("max", "x", "y"), "x"), ("max", 0, ("-", "y", "x"))),
        (("-", ("max", "x", "y"), "y"), ("max", ("-", "x", "y"), 0)),
        (("-", "x", ("min", "x", "y")), ("max", 0, ("-", "x", "y"))),
        (("-", "x", ("max", "x", "y")), ("min", 0, ("-", "x", "y"))),
        (("-", ("min", ("+", "x", "y"), "z"), "x"), ("min", "y", ("-", "z", "x"))),
        (("-", ("min", ("+", "y", "x"), "z"), "x"), ("min", "y", ("-", "z", "x"))),
        (("-", ("min", "z", ("+", "x", "y")), "x"), ("min", ("-", "z", "x"), "y")),
        (("-", ("min", "z", ("+", "y", "x")), "x"), ("min", ("-", "z", "x"), "y")),
        (("-", ("max", ("+", "x", "y"), "z"), "x"), ("max", "y", ("-", "z", "x"))),
        (("-", ("max", ("+", "y", "x"), "z"), "x"), ("max", "y", ("-", "z", "x"))),
        (("-", ("max", "z", ("+", "x", "y")), "x"), ("max", ("-", "z", "x"), "y")),
        (("-", ("max", "z", ("+", "y", "x")), "x"), ("max", ("-", "z", "x"), "y")),
        (("-", "x", ("min", ("+", "x", "y"), "z")), ("max", ("-", 0, "y"), ("-", "x", "z"))),
        (("-", "x", ("min", ("+", "y", "x"), "z")), ("max", ("-", 0, "y"), ("-", "x", "z"))),
        (("-", "x", ("min", "z", ("+", "x", "y"))), ("max", ("-", "x", "z"), ("-", 0, "y"))),
        (("-", "x", ("min", "z", ("+", "y", "x"))), ("max", ("-", "x", "z"), ("-", 0, "y"))),
        (("-", "x", ("max", ("+", "x", "y"), "z")), ("min", ("-", 0, "y"), ("-", "x", "z"))),
        (("-", "x", ("max", ("+", "y", "x"), "z")), ("min", ("-", 0, "y"), ("-", "x", "z"))),
        (("-", "x", ("max", "z", ("+", "x", "y"))), ("min", ("-", "x", "z"), ("-", 0, "y"))),
        (("-", "x", ("max", "z", ("+", "y", "x"))), ("min", ("-", "x", "z"), ("-", 0, "y"))),
        (("-", ("min", "x", "y"), ("min", "y", "x")), 0),
        (("-", ("max", "x", "y"), ("max", "y", "x")), 0),
        (("-", "x", ("+", "y", "c1")), ("+", ("-", "x", "y"), ("-", 0, "c1"))),  # constants to the right
        (("-", ("+", "x", "c1"), "y"), ("+", ("-", "x", "y"), "c1")),
        (("-", "x", ("-", "y", "z")), ("-", ("+", "x", "z"), "y")),
    ],
    "*": [
        (("*", ("*", "x", "c1"), "c2"), ("*", "x", ("*", "c1", "c2"))),   # constants together
        (("*", ("*", "c1", "x"), "c2"), ("*", "x", ("*", "c1", "c2"))),
        (("*", ("min", "x", "y"), ("max", "x", "y")), ("*", "x", "y")),
        (("*", ("max", "x", "y"), ("min", "x", "y")), ("*", "x", "y")),
        (("*", "c1", "x"), ("*", "x", "c1")),                              # constants to the right
        (("*", "x", ("*", "c1", "y")), ("*", ("*", "x", "y"), "c1")),
        (("*", ("+", "x", "c1"), "c2"), ("+", ("*", "x", "c2"), ("*", "c1", "c2"))),  # distribute
        (("*", ("-", "x", "y"), "c1"), ("*", ("-", "y", "x"), ("-", 0, "c1")), _C1_NEGATIVE),
    ],
    "neg": [
        (("neg", ("neg", "x")), "x"),
        (("neg", ("-", "x", "y")), ("-", "y", "x")),
    ],
    # comparisons of integers (`>` and `>=` are first written as `<` and `<=` with the sides swapped)
    "==": [
        (("==", "x", "x"), True),
        (("==", ("+", "x", "y"), ("+", "x", "z")), ("==", "y", "z")),
        (("==", ("+", "y", "x"), ("+", "x", "z")), ("==", "y", "z")),
        (("==", ("+", "x", "y"), ("+", "z", "x")), ("==", "y", "z")),
        (("==", ("+", "y", "x"), ("+", "z", "x")), ("==", "y", "z")),
        (("==", ("-", "x", "c1"), "c2"), ("==", "x", ("+", "c1", "c2"))),
        (("==", ("+", "x", "c1"), "c2"), ("==", "x", ("-", "c2", "c1"))),
        (("==", ("-", "c1", "x"), "c2"), ("==", "x", ("-", "c1", "c2"))),
        (("==", "c1", "x"), ("==", "x", "c1")),
    ],
    "!=": [
        (("!=", "x", "x"), False),
        (("!=", ("+", "x", "y"), ("+", "x", "z")), ("!=", "y", "z")),
        (("!=", ("+", "y", "x"), ("+", "x", "z")), ("!=", "y", "z")),
        (("!=", ("+", "x", "y"), ("+", "z", "x")), ("!=", "y", "z")),
        (("!=", ("+", "y", "x"), ("+", "z", "x")), ("!=", "y", "z")),
        (("!=", ("-", "x", "c1"), "c2"), ("!=", "x", ("+", "c1", "c2"))),
        (("!=", ("+", "x", "c1"), "c2"), ("!=", "x", ("-", "c2", "c1"))),
        (("!=", "c1", "x"), ("!=", "x", "c1")),
    ],
    "<": [
        (("<", "x", "x"), False),
        (("<", ("+", "x", "y"), ("+", "x", "z")), ("<", "y", "z")),
        (("<", ("+", "y", "x"), ("+", "x", "z")), ("<", "y", "z")),
        (("<", ("+", "x", "y"), ("+", "z", "x")), ("<", "y", "z")),
        (("<", ("+", "y", "x"), ("+", "z", "x")), ("<", "y", "z")),
        (("<", ("-", "y", "x"), ("-", "z", "x")), ("<", "y", "z")),
        (("<", ("-", "x", "y"), ("-", "x", "z")), ("<", "z", "y")),
        (("<", "x", ("+", "x", "z")), ("<", 0, "z")),
        (("<", "x", ("+", "z", "x")), ("<", 0, "z")),
        (("<", "x", ("-", "x", "z")), ("<", "z", 0)),
        (("<", ("+", "x", "c1"), "c2"), ("<", "x", ("-", "c2", "c1"))),
        (("<", ("-", "x", "c1"), "c2"), ("<", "x", ("+", "c2", "c1"))),
        (("<", ("-", "c1", "x"), "c2"), ("<", ("-", "c1", "c2"), "x")),
        (("<", "c1", ("+", "x", "c2")), ("<", ("-", "c1", "c2"), "x")),
        (("<", "c1", ("-", "x", "c2")), ("<", ("+", "c1", "c2"), "x")),
        (("<", ("*", "x", "c1"), ("*", "y", "c1")), ("<", "x", "y"), _C1_POSITIVE),
        (("<", ("*", "x", "c1"), ("*", "y", "c1")), ("<", "y", "x"), _C1_NEGATIVE),
        (("<", ("//", "x", "c1"), "c2"), ("<", "x", ("*", "c1", "c2")), _C1_POSITIVE),
        (("<", "c1", ("//", "x", "c2")), ("<", ("-", ("*", ("+", "c1", 1), "c2"), 1), "x"), _C2_POSITIVE),
        (("<", ("*", ("//", "x", "c1"), "c1"), "x"), ("<", 0, ("%", "x", "c1")), _C1_POSITIVE),
        (("<", ("*", ("//", "x", "c1"), "c1"), ("+", "x", "y")), ("<", 0, ("+", ("%", "x", "c1"), "y")), _C1_POSITIVE),
        (("<", ("*", ("//", "x", "c1"), "c1"), ("-", "x", "y")), ("<", "y", ("%", "x", "c1")), _C1_POSITIVE),
        (("<", ("min", "x", "y"), "z"), ("or", ("<", "x", "z"), ("<", "y", "z"))),
        (("<", ("max", "x", "y"), "z"), ("and", ("<", "x", "z"), ("<", "y", "z"))),
        (("<", "z", ("min", "x", "y")), ("and", ("<", "z", "x"), ("<", "z", "y"))),
        (("<", "z", ("max", "x", "y")), ("or", ("<", "z", "x"), ("<", "z", "y"))),
    ],
    "<=": [
        (("<=", "x", "x"), True),
        (("<=", ("+", "x", "y"), ("+", "x", "z")), ("<=", "y", "z")),
        (("<=", ("+", "y", "x"), ("+", "x", "z")), ("<=", "y", "z")),
        (("<=", ("+", "x", "y"), ("+", "z", "x")), ("<=", "y", "z")),
        (("<=", ("+", "y", "x"), ("+", "z", "x")), ("<=", "y", "z")),
        (("<=", ("-", "y", "x"), ("-", "z", "x")), ("<=", "y", "z")),
        (("<=", ("-", "x", "y"), ("-", "x", "z")), ("<=", "z", "y")),
        (("<=", ("+", "x", "c1"), "c2"), ("<=", "x", ("-", "c2", "c1"))),
        (("<=", ("-", "x", "c1"), "c2"), ("<=", "x", ("+", "c2", "c1"))),
        (("<=", "c1", ("+", "x", "c2")), ("<=", ("-", "c1", "c2"), "x")),
        (("<=", "c1", ("-", "x", "c2")), ("<=", ("+", "c1", "c2"), "x")),
        (("<=", ("-", "c1", "x"), "c2"), ("<=", ("-", "c1", "c2"), "x")),
        (("<=", ("*", "x", "c1"), ("*", "y", "c1")), ("<=", "x", "y"), _C1_POSITIVE),
        (("<=", ("*", "x", "c1"), ("*", "y", "c1")), ("<=", "y", "x"), _C1_NEGATIVE),
    ],
    # `not`, `and`, `or`
    "not": [
        (("not", ("not", "x")), "x"),
        (("not", ("<", "x", "y")), ("<=", "y", "x")),
        (("not", ("<=", "x", "y")), ("<", "y", "x")),
        (("not", ("==", "x", "y")), ("!=", "x", "y")),
        (("not", ("!=", "x", "y")), ("==", "x", "y")),
        (("not", ("or", "x", "y")), ("and", ("not", "x"), ("not", "y"))),
        (("not", ("and", "x", "y")), ("or", ("not", "x"), ("not", "y"))),
    ],
    "and": [
        (("and", "x", "x"), "x"),
        (("and", "x", ("not", "x")), False),
        (("and", ("not", "x"), "x"), False),
        (("and", ("==", "x", "y"), ("!=", "x", "y")), False),
        (("and", ("!=", "x", "y"), ("==", "x", "y")), False),
        (("and", ("<=", "x", "y"), ("<", "y", "x")), False),
        (("and", ("<", "y", "x"), ("<=", "x", "y")), False),
        (("and", ("<", "x", "c1"), ("<", "c2", "x")), False, lambda c: c["c2"] + 1 >= c["c1"]),
        (("and", ("<", "c2", "x"), ("<", "x", "c1")), False, lambda c: c["c2"] + 1 >= c["c1"]),
        (("and", ("<=", "x", "c1"), ("<=", "c2", "x")), False, lambda c: c["c2"] > c["c1"]),
        (("and", ("<=", "c2", "x"), ("<=", "x", "c1")), False, lambda c: c["c2"] > c["c1"]),
        (("and", "x", ("and", "y", "z")), ("and", ("and", "x", "y"), "z")),
    ],
    "or": [
        (("or", "x", "x"), "x"),
        (("or", "x", ("not", "x")), True),
        (("or", ("not", "x"), "x"), True),
        (("or", ("==", "x", "y"), ("!=", "x", "y")), True),
        (("or", ("!=", "x", "y"), ("==", "x", "y")), True),
        (("or", ("<=", "x", "y"), ("<", "y", "x")), True),
        (("or", ("<", "y", "x"), ("<=", "x", "y")), True),
        (("or", ("<", "x", "y"), ("<", "y", "x")), ("!=", "x", "y")),
        (("or", ("<", "x", "c1"), ("<", "c2", "x")), True, lambda c: c["c2"] < c["c1"]),
        (("or", ("<", "c2", "x"), ("<", "x", "c1")), True, lambda c: c["c2"] < c["c1"]),
        (("or", ("<=", "x", "c1"), ("<=", "c2", "x")), True, lambda c: c["c2"] <= c["c1"] + 1),
        (("or", ("<=", "c2", "x"), ("<=", "x", "c1")), True, lambda c: c["c2"] <= c["c1"] + 1),
        (("or", ("<", "x", "y"), ("==", "x", "y")), ("<=", "x", "y")),
        (("or", ("<", "x", "y"), ("==", "y", "x")), ("<=", "x", "y")),
        (("or", ("==", "x", "y"), ("<", "x", "y")), ("<=", "x", "y")),
        (("or", ("==", "y", "x"), ("<", "x", "y")), ("<=", "x", "y")),
        (("or", "x", ("or", "y", "z")), ("or", ("or", "x", "y"), "z")),
    ],
}
_MAX_REWRITE_DEPTH = 5  # PyPTO's limit on rewriting a rule's result again


def _match(p, e: Expr, env: dict) -> bool:
    """`e` matches pattern `p`; the names it binds go into `env`."""
    if p.__class__ is str:
        if p[0] == "c" and e.__class__ is not ConstInt:
            return False
        seen = env.get(p)
        if seen is None:
            env[p] = e
            return True
        return seen == e
    op = p[0]
    if op == "neg" or op == "not":
        return (e.__class__ is UnaryOp and e.op == ("-" if op == "neg" else "not")
                and _match(p[1], e.operand, env))
    cls = MinMax if op in ("min", "max") else BinOp
    return (e.__class__ is cls and e.op == op and _match(p[1], e.lhs, env)
            and _match(p[2], e.rhs, env))


def _build(t, env: dict, like: Expr, dtype) -> Expr:
    """The result `t` with `env`'s expressions put in (an int: a constant of `dtype`, the rewritten
    expression's); operators whose operands are constants fold."""
    if t.__class__ is str:
        return env[t]
    if t.__class__ is int:
        return ConstInt(t, dtype, span=like.span)
    if t.__class__ is bool:
        return ConstBool(t, span=like.span)
    parts = [_build(x, env, like, dtype) for x in t[1:]]
    if t[0] == "neg":
        x = parts[0]
        return _int(-x.value, x) if x.__class__ is ConstInt else UnaryOp("-", x, span=like.span)
    if t[0] == "not":
        x = parts[0]
        return ConstBool(not x.value, span=like.span) if x.__class__ is ConstBool else UnaryOp("not", x, span=like.span)
    if t[0] in ("min", "max"):
        a, b = parts
        if a.__class__ is ConstInt and b.__class__ is ConstInt:
            return _int(min(a.value, b.value) if t[0] == "min" else max(a.value, b.value), a)
        return a if a == b else MinMax(t[0], a, b, span=like.span)
    e = BinOp(t[0], parts[0], parts[1], span=like.span)
    return fold_constants(e) or _identity(e) or e


def _shape(x) -> object:
    """What the top of a rule's operand pattern can ask of the operand `x`: its operator, or that it is
    an integer constant ("c"); None for anything else (only a plain name matches it)."""
    c = x.__class__
    if c is ConstInt:
        return "c"
    if c is BinOp or c is MinMax or c is UnaryOp:
        return c, x.op
    return None


def _fits(p, shape) -> bool:
    """The top of operand pattern `p` can match an operand of `_shape` `shape` (`_match`'s first test)."""
    if p.__class__ is str:
        return p[0] != "c" or shape == "c"
    op = p[0]
    if op == "neg" or op == "not":
        return shape == (UnaryOp, "-" if op == "neg" else "not")
    return shape == (MinMax if op in ("min", "max") else BinOp, op)


# (operator, shapes of the operands) -> the operator's rules whose operand patterns fit those shapes, in
# `_RULES`' order: most rules fail on an operand's operator, so `rewrite` tries only these. Filled as
# shapes come up; it depends on nothing but the fixed `_RULES`.
_RULES_FOR_SHAPES: dict[tuple, list[tuple]] = {}


def rewrite(e: Expr, dtype=dtypes.INDEX) -> Expr | None:
    """The result of the first of PyPTO's rules for `e`'s operator that matches `e` (an integer
    expression of `dtype` whose operands are already simplified), not yet rewritten again; None when
    none does."""
    if e.__class__ is UnaryOp:
        op, shapes = "neg" if e.op == "-" else e.op, (_shape(e.operand),)
    else:
        op, shapes = e.op, (_shape(e.lhs), _shape(e.rhs))
    rules = _RULES_FOR_SHAPES.get((op, shapes))
    if rules is None:
        every = _RULES.get(op)
        if every is None:
            return None
        rules = _RULES_FOR_SHAPES[(op, shapes)] = [
            r for r in every if all(_fits(p, sh) for p, sh in zip(r[0][1:], shapes))]
    for rule in rules:
        env: dict = {}
        if _match(rule[0], e, env) and (len(rule) == 2 or rule[2]({k: v.value for k, v in env.items()
                                                                    if k[0] == "c"})):
            return _build(rule[1], env, e, dtype)
    return None


# Nodes without parts that `_Fold` has no rule for: they stay as they are.
_UNFOLDED = frozenset({ConstInt, ConstFloat, ConstBool, EnumLit, StrLit, DTypeLit, str, int, float, bool, type(None)})


# Nodes `_Fold` may replace whatever their parts are: the operators its rules fold.
_OPERATORS = frozenset({BinOp, UnaryOp, MinMax, Abs})
_FIELDS: dict[type, tuple[str, ...]] = {}  # node class -> `child_fields` (the fields `_Fold.inert` scans)


class _Fold(Mutator):
    """Bottom-up: names replaced by known values, then each operator node folded."""

    leaves = _UNFOLDED  # (`mutate` returns them as they are: the traversal skips them)

    def __init__(self, values: dict[str, Expr], ranges: _Ranges):
        self.values = values
        self.ranges = ranges
        self.depth = 0  # how many rule results deep `rewritten` is

    def inert(self, node) -> bool:
        """`mutate(node)` would return `node` itself: nothing under it is an operator (`_OPERATORS`), a
        `tensor.view` call or a name with a known value. Most statements' values and types are so (tile
        operations on names, shapes of constants); this scan, without the traversal's calls and hooks per
        node, answers them at a fraction of the cost (conservatively: an operator is never looked into)."""
        values = self.values
        stack = [node]
        pop, push = stack.pop, stack.append
        while stack:
            n = pop()
            cls = n.__class__
            if cls is tuple:
                for x in n:
                    c = x.__class__
                    if c in _UNFOLDED:
                        continue
                    if c is Var:
                        if x.name in values:
                            return False
                        continue
                    push(x)
                continue
            if cls in _UNFOLDED:
                continue
            if cls is Var:
                if n.name in values:
                    return False
                continue
            if cls in _OPERATORS:
                return False
            if cls is Call:
                if n.op == "tensor.view" and n.kind == "op":
                    return False
                push(n.args)
                push(n.kwargs)
                continue
            names = _FIELDS.get(cls)
            if names is None:
                if not isinstance(n, Node):
                    continue  # (the traversal leaves what is not a node as it is)
                names = _FIELDS[cls] = child_fields(cls)
            for name in names:
                v = getattr(n, name)
                if v.__class__ not in _UNFOLDED:
                    push(v)
        return True

    def mutate(self, node):
        """`Mutator.mutate`, with the nodes no rule rewrites (literals) and names answered at once."""
        cls = node.__class__
        if cls in _UNFOLDED:
            return node
        if cls is Var:
            return self.values.get(node.name, node)
        if cls is tuple:
            new = [self.mutate(x) for x in node]
            for a, b in zip(new, node):
                if a is not b:
                    return tuple(new)
            return node
        if cls is Call:  # (its parts, then `mutate_Call`, as the generic traversal does)
            args, kwargs = self.mutate(node.args), self.mutate(node.kwargs)
            if args is not node.args or kwargs is not node.kwargs:
                node = replace(node, args=args, kwargs=kwargs)
            return self.mutate_Call(node)
        if cls is ListExpr:
            items = self.mutate(node.items)
            return node if items is node.items else replace(node, items=items)
        return Mutator.mutate(self, node)

    def pre_Var(self, v: Var):
        return self.values.get(v.name, v)

    def mutate_BinOp(self, e: BinOp) -> Expr:
        r = fold_constants(e)
        if r is None and self.ranges.int_expr(e):
            r = _identity(e)
        if r is not None:
            return r
        if e.op in ("+", "-"):
            lin = _linear(e, self.ranges.is_int)
            if lin is not None and not lin[0]:
                return ConstInt(lin[1], self.ranges.int_dtype(e), span=e.span)
            if lin is not None and lin[1] == 0 and list(lin[0].values()) == [1]:
                return Var(next(iter(lin[0])), span=e.span)
        if e.op in ("//", "%") and isinstance(e.rhs, ConstInt) and e.rhs.value > 0:
            lo, hi = self.ranges.of(e.lhs)
            if lo is not None and hi is not None:
                c = e.rhs.value
                if e.op == "//" and lo // c == hi // c:
                    return _int(lo // c, e.rhs)
                if e.op == "%" and lo >= 0 and hi < c:
                    return e.lhs
        if e.op in _NEGATE:
            d = self.ranges.decide(e)
            if d is not None:
                return ConstBool(d, span=e.span)
        if e.op in ("+", "-", "*") and self.ranges.int_expr(e):
            return self.rewritten(e)
        if e.op in (">", ">="):  # PyPTO writes `a > b` as `b < a`, `a >= b` as `b <= a`, whatever the type
            return self.mutate(BinOp("<" if e.op == ">" else "<=", e.rhs, e.lhs, span=e.span))
        if (e.op in ("==", "!=", "<", "<=") and self.ranges.int_expr(e.lhs)) or e.op in ("and", "or"):
            return self.rewritten(e)
        return e

    def mutate_UnaryOp(self, e: UnaryOp) -> Expr:
        x = e.operand
        if e.op == "not" and isinstance(x, ConstBool):
            return ConstBool(not x.value, span=e.span)
        if e.op == "-" and isinstance(x, ConstInt):
            return _int(-x.value, x)
        if e.op == "-" and self.ranges.int_expr(x):
            return self.rewritten(e)
        if e.op == "not" and not (isinstance(x, BinOp) and x.op in _NEGATE and not self.ranges.int_expr(x.lhs)):
            # (`not (a < b)` is `b <= a` for integers only: not for a NaN)
            return self.rewritten(e)
        return e

    def rewritten(self, e: Expr) -> Expr:
        """`e` after the first of PyPTO's rules that matches it, the result simplified again (as PyPTO
        does, at most `_MAX_REWRITE_DEPTH` results deep)."""
        r = rewrite(e, self.ranges.int_dtype(e))
        if r is None or self.depth >= _MAX_REWRITE_DEPTH:
            return e if r is None else r
        self.depth += 1
        try:
            return self.mutate(r)
        finally:
            self.depth -= 1

    def mutate_MinMax(self, e: MinMax) -> Expr:
        if isinstance(e.lhs, ConstInt) and isinstance(e.rhs, ConstInt):
            pick = min if e.op == "min" else max
            return _int(pick(e.lhs.value, e.rhs.value), e.lhs)
        return e

    def mutate_Call(self, e: Call) -> Expr:
        """`pl.tensor.view(x, layout=L)` where `x` already has layout L is `x` (a view that changes nothing)."""
        if e.kind != "op" or e.op != "tensor.view" or len(e.args) != 1 or not isinstance(e.args[0], Var):
            return e
        layout = e.kwarg("layout")
        src = self.ranges.types.get(e.args[0].name)
        if len(e.kwargs) != 1 or not isinstance(layout, EnumLit) or not isinstance(src, TensorType):
            return e
        return e.args[0] if (src.view.layout if src.view is not None else "ND") == layout.member else e

    def mutate_Abs(self, e: Abs) -> Expr:
        return _int(abs(e.operand.value), e.operand) if isinstance(e.operand, ConstInt) else e


# ------------------------------------------------------------------------------------ statements
def _index(f: Function, cache=None):
    """The `ptoc.ir.verifier.NodeIndex` of `f` (the pipeline's, through `cache`, when there is one)."""
    return NodeIndex.get(f, cache)


def _assigned_names(f: Function, cache=None, index=None) -> set[str]:
    """Names it is unsafe to treat as one value: assigned more than once, or also bound otherwise."""
    index = _index(f, cache) if index is None else index
    names = _bound_names(index)
    names.extend(map(_NAME, f.params))
    if len(set(names)) == len(names):  # (the usual case, in SSA form: no name twice)
        return set()
    return {n for n, k in Counter(names).items() if k > 1}


_NAME = attrgetter("name")


def _bound_names(index) -> list[str]:
    """The names the assignments, yields, loops and `pl.spmd` scopes of the function whose node index is
    `index` bind, once per binding (parameters not included). (Lists and `map`, which a `Counter` then
    counts in one call: counting name by name cost more than the walk that found them.)"""
    names = [s.target.name for s in index.of(AssignStmt)]
    extend = names.extend
    for s in index.of(YieldStmt):
        extend(map(_NAME, s.targets))
    for s in index.of(ForStmt):
        names.append(s.var.name)
        extend(map(_NAME, s.iter_args))
    for s in index.of(WhileStmt):
        extend(map(_NAME, s.iter_args))
    return names


def _same(new: list[Stmt], old: tuple[Stmt, ...]) -> bool:
    """`new` holds exactly the statements of `old` (the very objects, in order)."""
    return len(new) == len(old) and all(a is b for a, b in zip(new, old))


def _lift(body: list[Stmt], results: tuple[Var, ...], values: dict[str, Expr]) -> list[Stmt]:
    """`body` without its final `pl.yield_`, whose values then stand for `results`."""
    if body and isinstance(body[-1], YieldStmt):
        y = body[-1]
        for t, v in zip(y.targets, y.values):
            values[t.name] = v
        body = body[:-1]
    return [s for s in body if not isinstance(s, PassStmt)]


class _Simplifier:
    """Statements it leaves as they were come back as the very same objects (so an unchanged function is
    the same function, whose node index the pipeline's cache already has)."""

    def __init__(self, f: Function, types: dict, cache=None, index=None):
        self.types = types
        self.multi = _assigned_names(f, cache, index)
        self.values: dict[str, Expr] = {}  # name -> the expression that replaces it
        self.ranges = _Ranges(types)
        self.fold = _Fold(self.values, self.ranges)
        self.depth = 0

    def e(self, x):
        # (the quick scan first: most values and types have nothing to fold, see `_Fold.inert`)
        return x if self.fold.inert(x) else self.fold.mutate(x)

    def scalar(self, s: AssignStmt) -> bool:
        t = s.annotation if s.annotation is not None else self.types.get(s.target.name)
        return isinstance(t, ScalarType)

    def region(self, body: tuple[Stmt, ...]) -> list[Stmt]:
        """A nested body (loop, branch, pl.spmd): constants assigned in it only narrow ranges, and what
        it learns about names ends with it."""
        saved_values, saved_bounds = dict(self.values), dict(self.ranges.bounds)
        self.depth += 1
        try:
            return self.block(body)
        finally:
            self.depth -= 1
            self.values.clear()
            self.values.update(saved_values)
            self.ranges.bounds = saved_bounds

    def block(self, body) -> list[Stmt]:
        out: list[Stmt] = []
        for s in body:
            out.extend(self.stmt(s))
        return out

    def stmt(self, s: Stmt) -> list[Stmt]:
        if isinstance(s, AssignStmt):
            return [self.assign(s)]
        if isinstance(s, ForStmt):
            return self.for_(s)
        if isinstance(s, WhileStmt):
            init, cond = self.e(s.init_values), self.e(s.cond)
            new = self.region(s.body)
            if init is s.init_values and cond is s.cond and _same(new, s.body):
                return [s]
            body = tuple(new) or (PassStmt(span=s.span),)
            return [replace(s, init_values=init, cond=cond, body=body)]
        if isinstance(s, IfStmt):
            return self.if_(s)
        if isinstance(s, ScopeStmt):
            args, kwargs = self.e(s.args), self.e(s.kwargs)
            body = self.region(s.body) if s.kind == "spmd" else self.block(s.body)  # pl.at: still top level
            if args is s.args and kwargs is s.kwargs and _same(body, s.body):
                return [s]
            return [replace(s, args=args, kwargs=kwargs, body=tuple(body) or (PassStmt(span=s.span),))]
        if isinstance(s, YieldStmt):
            values, ann = self.e(s.values), self.e(s.annotation)
            if values is s.values and ann is s.annotation:
                return [s]
            return [replace(s, values=values, annotation=ann)]
        if isinstance(s, (ReturnStmt, EvalStmt)):
            return [self.e(s)]
        return [s]

    def assign(self, s: AssignStmt) -> Stmt:
        value, ann = self.e(s.value), self.e(s.annotation)
        name = s.target.name
        if self.scalar(s) and name not in self.multi:
            if isinstance(value, (ConstInt, ConstFloat, ConstBool)) and self.depth == 0:
                self.values[name] = value
            else:
                lo, hi = self.ranges.of(value)
                dlo, dhi = self.ranges.default(name)
                lo = dlo if lo is None else (lo if dlo is None else max(lo, dlo))
                hi = dhi if hi is None else (hi if dhi is None else min(hi, dhi))
                if lo is None or hi is None or lo <= hi:
                    self.ranges.bounds[name] = (lo, hi)
        if value is s.value and ann is s.annotation:
            return s
        return replace(s, value=value, annotation=ann)

    def for_(self, s: ForStmt) -> list[Stmt]:
        args, init, kwargs = self.e(s.args), self.e(s.init_values), self.e(s.kwargs)
        if args is not s.args or init is not s.init_values or kwargs is not s.kwargs:
            s = replace(s, args=args, init_values=init, kwargs=kwargs)
        start, stop, step = s.start, s.stop, s.step
        if s.kind == "range" and not s.kwargs and self._trip(start, stop, step, 0):
            if self._trip(start, stop, step, 1):
                results = s.results
                return [AssignStmt(r, v, span=s.span) for r, v in zip(results, init)]
            if self._trip(start, stop, step, 2):
                mapping = {s.var.name: start, **{a.name: v for a, v in zip(s.iter_args, init)}}
                body = self.block(substitute(s.body, mapping))
                return _lift(body, s.results, self.values)
        saved = dict(self.ranges.bounds)
        if isinstance(start, ConstInt) and isinstance(stop, ConstInt) and stop.value > start.value:
            self.ranges.bounds[s.var.name] = (start.value, stop.value - 1)
        body = self.region(s.body)
        self.ranges.bounds = saved
        if _same(body, s.body):
            return [s]
        return [replace(s, body=tuple(body) or (PassStmt(span=s.span),))]

    def _trip(self, start: Expr, stop: Expr, step: Expr, question: int) -> bool | None:
        """What the ranges decide about a `pl.range(start, stop, step)` loop: (0) the step is at least 1,
        (1) it runs no iteration, (2) it runs exactly one. For constant bounds, as most loops have, the
        integer comparisons the ranges' answer comes to (without building the conditions; the tests
        compare both on every loop of the examples and corpus programs)."""
        if start.__class__ is ConstInt and stop.__class__ is ConstInt and step.__class__ is ConstInt:
            a, b, c = start.value, stop.value, step.value
            return c >= 1 if question == 0 else b <= a if question == 1 else a < b <= a + c
        return self.ranges.decide(_trip_condition(start, stop, step, question))

    def if_(self, s: IfStmt) -> list[Stmt]:
        cond = self.e(s.cond)
        branches = []
        for body, holds in ((s.then_body, True), (s.else_body, False)):
            saved = self.ranges.constrain(cond, holds)
            branches.append(self.region(body) if body else [])
            self.ranges.restore(saved)
        verdict = self.ranges.decide(cond)
        if verdict is True or (verdict is False and s.else_body):
            return _lift(branches[0] if verdict else branches[1], s.results, self.values)
        if verdict is False:
            return []
        if cond is s.cond and _same(branches[0], s.then_body) and _same(branches[1], s.else_body):
            return [s]
        then_body = tuple(branches[0]) or (PassStmt(span=s.span),)
        return [replace(s, cond=cond, then_body=then_body, else_body=tuple(branches[1]))]


def _trip_condition(start: Expr, stop: Expr, step: Expr, question: int) -> Expr:
    """The condition `_Simplifier._trip` asks the ranges to decide (`question`: 0, 1 or 2)."""
    if question == 0:
        return BinOp(">=", step, _int(1, step))
    if question == 1:
        return BinOp("<=", stop, start)
    return BinOp("and", BinOp("<", start, stop), BinOp("<=", stop, BinOp("+", start, step)))


# ------------------------------------------------------------------------------------ dead code
def _reads(f: Function, cache=None, index=None) -> Counter[str]:
    """How often each name is read in `f` (binding places excluded)."""
    index = _index(f, cache) if index is None else index
    count: Counter[str] = Counter(map(_NAME, index.of(Var)))
    bound = _bound_names(index)
    bound.extend([s.var.name for s in index.of(ScopeStmt) if s.var is not None])
    count.subtract(bound)
    return count


def _calls(e: Expr) -> bool:
    return any(isinstance(n, Call) for n in walk(e))


class _DeadCode:
    def __init__(self, f: Function, types: dict, cache=None, index=None):
        self.types = types
        self.reads = _reads(f, cache, index)
        self.changed = False

    def dead_scalar(self, s: Stmt) -> bool:
        if not isinstance(s, AssignStmt) or self.reads[s.target.name] > 0 or _calls(s.value):
            return False
        t = s.annotation if s.annotation is not None else self.types.get(s.target.name)
        return isinstance(t, ScalarType)

    def block(self, body: tuple[Stmt, ...], allow_empty: bool = False) -> tuple[Stmt, ...]:
        out = []
        for s in body:
            if self.dead_scalar(s):
                self.changed = True
                continue
            out.append(self.stmt(s))
        if not out and body and not allow_empty:
            out = [PassStmt(span=body[0].span)]
        return tuple(out)

    def stmt(self, s: Stmt) -> Stmt:
        # (a statement whose bodies come back as they were is kept: the very object, not a copy)
        if isinstance(s, IfStmt):
            s = self.prune_results(s)
            then_body, else_body = self.block(s.then_body), self.block(s.else_body, allow_empty=True)
            if _same(then_body, s.then_body) and _same(else_body, s.else_body):
                return s
            return replace(s, then_body=then_body, else_body=else_body)
        if isinstance(s, (ForStmt, WhileStmt, ScopeStmt)):
            body = self.block(s.body)
            return s if _same(body, s.body) else replace(s, body=body)
        return s

    def prune_results(self, s: IfStmt) -> IfStmt:
        results = s.results
        keep = [k for k, r in enumerate(results) if self.reads[r.name] > 0]
        if not results or len(keep) == len(results):
            return s
        self.changed = True

        def cut(body: tuple[Stmt, ...]) -> tuple[Stmt, ...]:
            if not body or not isinstance(body[-1], YieldStmt):
                return body
            y = body[-1]
            if not keep:
                return body[:-1] or (PassStmt(span=y.span),)
            y = replace(y, targets=tuple(y.targets[k] for k in keep),
                        values=tuple(y.values[k] for k in keep),
                        annotation=y.annotation if len(keep) == len(y.targets) else None)
            return body[:-1] + (y,)

        return replace(s, then_body=cut(s.then_body), else_body=cut(s.else_body))


def _eliminate(f: Function, types: dict, cache=None, index=None) -> Function:
    """`index`: the node index of `f` when the caller has it."""
    while True:
        index = _index(f, cache) if index is None else index
        d = _DeadCode(f, types, cache, index)
        if not _may_be_dead(d, index):
            return f
        index = None
        body = d.block(f.body, allow_empty=True)
        if not d.changed:
            return f
        f = replace(f, body=body)


def _may_be_dead(d: _DeadCode, index) -> bool:
    """`d`'s walk might remove something from the function whose node index is `index`: some assignment
    of a name nobody reads, or an `if` with a result nobody reads. (Every statement the walk looks at is
    among the index's, so when none is, the walk would change nothing: it is not made.)"""
    reads = d.reads
    return (any(reads[s.target.name] <= 0 for s in index.of(AssignStmt))
            or any(reads[r.name] <= 0 for s in index.of(IfStmt) for r in s.results))


def _nothing_to_fold(index) -> bool:
    """The rewriting of `_Simplifier` would leave every statement of the function as it is (read off its
    node index `index`), so only the dead-code step can change it: no operator node to fold (`_Fold`'s
    rules: BinOp, UnaryOp, MinMax, Abs, tensor.view), no literal assigned (so no name gets a value to
    substitute), no `if` on a literal, and every `pl.range` loop without options runs a constant number
    of times, at least two (one that runs once or never is replaced)."""
    if index.of(BinOp) or index.of(UnaryOp) or index.of(MinMax) or index.of(Abs):
        return False
    if any(c.op == "tensor.view" for c in index.of(Call)):
        return False
    if any(s.value.__class__ in (ConstInt, ConstFloat, ConstBool) for s in index.of(AssignStmt)):
        return False
    if any(s.cond.__class__ is ConstBool for s in index.of(IfStmt)):
        return False
    for s in index.of(ForStmt):
        if s.kind == "range" and not s.kwargs:
            start, stop, step = s.start, s.stop, s.step
            if not (start.__class__ is ConstInt and stop.__class__ is ConstInt and step.__class__ is ConstInt):
                return False  # the ranges of names may decide how often it runs
            if step.value >= 1 and stop.value <= start.value + step.value:
                return False
    return True


def simplify_function(f: Function, types: dict, cache=None) -> Function:
    """`f` simplified (the very same object when nothing changes). `cache`: the pipeline's verifier cache,
    whose node index of a function serves the counts of its names."""
    index = _index(f, cache)
    if _nothing_to_fold(index):
        new = f
    else:
        body = _Simplifier(f, types, cache, index).block(f.body)
        new = f if _same(body, f.body) else replace(f, body=tuple(body))
    new = _eliminate(new, types, cache, index if new is f else None)
    return new if new.body else replace(new, body=(PassStmt(span=f.span),))  # as it prints
