"""Property tests of ptoc.analysis.arith (rule NZ-8 soundness, folding).

Random functions bind loop variables (random start, step, stop; starts and steps may be earlier names),
a block index with a random non-negative value, an unknown parameter, an iteration argument, and
assignments built from + - * // % min max, constants and block-index calls. Every free name gets a
random in-range value; whatever the analysis proves must hold of the evaluated values."""

from __future__ import annotations

import functools

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from ptoc.analysis.arith import Facts, eval_int, fold
from ptoc.ir.dtypes import INDEX, INT32
from ptoc.ir.nodes import (
    AssignStmt,
    BinOp,
    Call,
    ConstInt,
    Expr,
    ForStmt,
    Function,
    MinMax,
    Param,
    ScalarType,
    Var,
    YieldStmt,
)

FACTORS = (1, 2, 3, 4, 8, 16, 32, 64, 512)
POW2 = tuple(d for d in FACTORS if d & (d - 1) == 0)
CONSTS = st.one_of(
    st.sampled_from([0, 1, 2, 3, 7, 8, 16, 24, 32, 48, 64, 256, 512, -1, -16, -32, -48]),
    st.integers(-600, 600),
)
NONZERO = st.one_of(st.sampled_from([1, 2, 3, 4, 16, 32, -2, -16]), st.integers(-64, 64).filter(bool))
BLOCK_OPS = ("tile.get_block_idx", "tile.get_block_num", "tile.get_subblock_idx")


@functools.cache
def _expr_strategy(names: tuple[str, ...]) -> st.SearchStrategy[Expr]:
    atoms = [CONSTS.map(lambda n: ConstInt(n, INDEX)), st.sampled_from(BLOCK_OPS).map(Call)]
    if names:
        atoms.append(st.sampled_from(names).map(Var))
    leaf = st.one_of(*atoms)

    def extend(sub):
        return st.one_of(
            st.builds(BinOp, st.sampled_from(["+", "-", "*"]), sub, sub),
            st.builds(BinOp, st.sampled_from(["//", "%"]), sub, NONZERO.map(lambda n: ConstInt(n, INDEX))),
            st.builds(BinOp, st.sampled_from(["//", "%"]), sub, sub),  # symbolic divisor (may be 0)
            st.builds(MinMax, st.sampled_from(["min", "max"]), sub, sub),
        )

    return st.recursive(leaf, extend, max_leaves=6)


def expr_strategy(names: list[str]) -> st.SearchStrategy[Expr]:
    """Expressions over `names` (strategies are built once per name list: building is slow)."""
    return _expr_strategy(tuple(names))


@st.composite
def scenario(draw):
    """(function, values of the free names) for a random function."""
    env: dict[str, int] = {
        "p": draw(st.integers(-1000, 1000)),  # unknown parameter
        "acc": draw(st.integers(-1000, 1000)),  # iteration argument: any value at some iteration
        "tile.get_block_idx": draw(st.integers(0, 64)),
        "tile.get_block_num": draw(st.integers(1, 64)),
        "tile.get_subblock_idx": draw(st.integers(0, 1)),
    }
    names = ["p", "acc", "blk"]
    head = [AssignStmt(Var("blk"), Call("tile.get_block_idx"))]
    loops: list[tuple[str, Expr, Expr, int]] = []  # name, start, step, iteration index
    for i in range(draw(st.integers(1, 3))):
        start = draw(st.one_of(CONSTS.map(lambda n: ConstInt(n, INDEX)), expr_strategy(names)))
        step = draw(st.one_of(NONZERO.map(lambda n: ConstInt(n, INDEX)), expr_strategy(names)))
        loops.append((f"l{i}", start, step, draw(st.integers(0, 6))))
        names.append(f"l{i}")
    assigns = []
    for i in range(draw(st.integers(1, 6))):
        assigns.append((f"a{i}", draw(expr_strategy(names))))
        names.append(f"a{i}")

    body: list = [AssignStmt(Var(n), e, ScalarType(INDEX)) for n, e in assigns]
    for depth, (name, start, step, _it) in reversed(list(enumerate(loops))):
        stop = ConstInt(10_000, INDEX)  # the proofs never read stop; the values are start + it * step
        if depth == 0:  # the outermost loop carries `acc`
            body.append(YieldStmt((Var("acc_out"),), (Var("acc"),)))
            body = [ForStmt("range", Var(name), (start, stop, step), tuple(body),
                            iter_args=(Var("acc"),), init_values=(ConstInt(0, INDEX),))]
        else:
            body = [ForStmt("range", Var(name), (start, stop, step), tuple(body))]
    fn = Function("f", (Param("p", ScalarType(INDEX)),), (), tuple(head + body))
    return fn, env, loops, assigns


def evaluate(env0, loops, assigns, bits):
    """Values of every name: block index, loop variables (start + it * step), assignments."""
    env = dict(env0)
    env["blk"] = env["tile.get_block_idx"]
    for name, start, step, it in loops:
        env[name] = eval_int(BinOp("+", start, BinOp("*", ConstInt(it, INDEX), step)), env, bits)
    for name, e in assigns:
        env[name] = eval_int(e, env, bits)
    return env


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenario())
def test_nz8_proofs_are_sound(case):
    """NZ-8 soundness: "multiple of d" and "non-negative" hold of the evaluated values (unbounded
    integers, floor semantics); power-of-two multiples also survive 64-bit wrap-around."""
    fn, env0, loops, assigns = case
    try:
        env = evaluate(env0, loops, assigns, None)
        wrapped = evaluate(env0, loops, assigns, 64)
    except ZeroDivisionError:
        assume(False)
        return
    facts = Facts.of_function(fn)
    assert "acc" in facts.unresolved and "p" in facts.params
    exprs = [(Var(n), env[n], wrapped[n]) for n in env if n in facts.assigns or n in facts.loops]
    exprs += [(e, env[n], wrapped[n]) for n, e in assigns]  # the expressions themselves
    for e, value, wvalue in exprs:
        for d in FACTORS:
            if facts.is_multiple_of(e, d):
                assert value % d == 0, (e, d, value)
                if d in POW2:
                    assert wvalue % d == 0, (e, d, wvalue)
        if facts.is_non_negative(e):
            assert value >= 0, (e, value)


def const_expr_strategy() -> st.SearchStrategy[Expr]:
    leaf = st.integers(-(1 << 31), (1 << 31) - 1).map(lambda n: ConstInt(n, INT32))

    def extend(sub):
        return st.one_of(
            st.builds(BinOp, st.sampled_from(["+", "-", "*", "//", "%", "&", "|", "^"]), sub, sub),
            st.builds(MinMax, st.sampled_from(["min", "max"]), sub, sub),
        )

    return st.recursive(leaf, extend, max_leaves=8)


@settings(max_examples=300, deadline=None)
@given(const_expr_strategy())
def test_fold_agrees_with_wrapping_evaluation(e):
    """fold wraps at the declared width (INT32 here) exactly as a 32-bit evaluation does."""
    try:
        expected = eval_int(e, {}, 32)
    except ZeroDivisionError:
        assert fold(e) is e or isinstance(e, ConstInt)
        return
    assert fold(e) == ConstInt(expected, INT32)
