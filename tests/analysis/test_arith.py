"""Tests of ptoc.analysis.arith: constant folding, the NZ-8 proof table, NZ-9 whole division.

Every provable form of rule NZ-8 has one acceptance test named after it; every unprovable form the
rule names has one rejection test. Functions come from IR text parsed with verification on."""

from __future__ import annotations

import textwrap

import pytest

from ptoc.analysis.arith import (
    MAX_DEPTH,
    PROVABLE_FORMS,
    Facts,
    LoopRange,
    blocked_offset,
    eval_int,
    fold,
    wrap,
)
from ptoc.diagnostics import InternalError
from ptoc.frontend.parser import parse_program
from ptoc.ir import dtypes
from ptoc.ir.dtypes import INDEX, INT8, INT32
from ptoc.ir.nodes import (
    AssignStmt,
    BinOp,
    Call,
    Cast,
    ConstFloat,
    ConstInt,
    ForStmt,
    Function,
    ListExpr,
    MinMax,
    UnaryOp,
    Var,
    YieldStmt,
)

UINT8 = dtypes.BY_NAME["UINT8"]
UINT64 = dtypes.BY_NAME["UINT64"]


def facts_of(body: str, params: str = "") -> Facts:
    """Facts of `def f(self<params>):` with `body`, parsed and verified."""
    text = (
        "import pypto.language as pl\n"
        "@pl.program\n"
        "class p:\n"
        "    @pl.function(type=pl.FunctionType.AIV)\n"
        f"    def f(self{params}):\n"
        + textwrap.indent(textwrap.dedent(body).strip("\n") + "\n", " " * 8)
    )
    prog = parse_program(text, verify=True)
    return Facts.of_function(prog.functions[0])


def c(v: int, dt=INDEX) -> ConstInt:
    return ConstInt(v, dt)


def v(name: str) -> Var:
    return Var(name)


def provable(f: Facts, name: str, d: int) -> tuple[bool, bool]:
    return f.is_multiple_of(v(name), d), f.is_non_negative(v(name))


# --------------------------------------------------------------------------------------------------
# NZ-8: every provable form accepted
# --------------------------------------------------------------------------------------------------


def test_constant_is_multiple_and_non_negative():
    """NZ-8 constants: the value itself is a multiple; non-negative when >= 0."""
    f = facts_of("""
        c: pl.Scalar[pl.INDEX] = 512
    """)
    assert provable(f, "c", 16) == (True, True)
    assert f.is_provable_offset(c(512), 32)
    assert f.is_multiple_of(c(0), 16) and f.is_non_negative(c(0))
    assert not f.is_multiple_of(c(520), 16)


def test_assign_product_with_multiple_factor():
    """NZ-8 AssignStmt product `n0 = nb * 256`: a factor is a multiple; both factors non-negative."""
    f = facts_of("""
        for nb in pl.range(8):
            n0: pl.Scalar[pl.INDEX] = nb * 256
    """)
    assert provable(f, "n0", 16) == (True, True)
    assert f.is_multiple_of(v("n0"), 256)
    assert not f.is_multiple_of(v("n0"), 512)


def test_assign_product_multiple_factor_on_the_left():
    """NZ-8 AssignStmt product: either factor may carry the multiple."""
    f = facts_of("""
        for nb in pl.range(8):
            n0: pl.Scalar[pl.INDEX] = 64 * nb
    """)
    assert provable(f, "n0", 32) == (True, True)


def test_sum_of_provable_offsets():
    """NZ-8: sums compose (multiple if both are; non-negative if both are)."""
    f = facts_of("""
        for nb in pl.range(8):
            n0: pl.Scalar[pl.INDEX] = nb * 256
            for k0 in pl.range(0, 1024, 32):
                s: pl.Scalar[pl.INDEX] = n0 + k0
    """)
    assert provable(f, "s", 32) == (True, True)
    assert not f.is_multiple_of(v("s"), 64)


def test_difference_proves_divisibility():
    """NZ-8: differences can prove divisibility (the sign is another matter, see the rejection)."""
    f = facts_of("""
        for nb in pl.range(8):
            n0: pl.Scalar[pl.INDEX] = nb * 256
            for k0 in pl.range(0, 1024, 32):
                d: pl.Scalar[pl.INDEX] = n0 - k0
    """)
    assert f.is_multiple_of(v("d"), 32)


def test_for_loop_constant_start_and_step():
    """NZ-8 ForStmt `for k0 in pl.pipeline(512, 4096, 512)`: start and step both multiples /
    both non-negative."""
    f = facts_of("""
        for k0 in pl.pipeline(512, 4096, 512, stage=2):
            pass
    """)
    assert provable(f, "k0", 16) == (True, True)
    assert f.is_multiple_of(v("k0"), 512)
    assert f.loops["k0"] == LoopRange(c(512), c(512), c(4096))


def test_for_loop_default_start_and_step():
    """NZ-8 ForStmt `pl.range(N)`: start 0, step 1: non-negative, a multiple of 1 only."""
    f = facts_of("""
        for nb in pl.range(2048 // 256):
            pass
    """)
    assert provable(f, "nb", 1) == (True, True)
    assert not f.is_multiple_of(v("nb"), 2)


def test_for_loop_symbolic_start_recurses():
    """NZ-8 ForStmt with a symbolic start `for ob in pl.range(core, TILES, CORES)`: the proof recurses
    into start and step."""
    f = facts_of("""
        core: pl.Scalar[pl.INDEX] = pl.tile.get_block_idx()
        for ob in pl.range(core, 64, 8):
            o0: pl.Scalar[pl.INDEX] = ob * 16
        base: pl.Scalar[pl.INDEX] = core * 32
        for j in pl.range(base, 4096, 64):
            pass
    """)
    assert f.is_non_negative(v("ob"))
    assert provable(f, "o0", 16) == (True, True)
    assert provable(f, "j", 32) == (True, True)
    assert not f.is_multiple_of(v("j"), 64)  # the start is only a multiple of 32


def test_min_of_multiples():
    """NZ-8 pl.min: multiple when both operands are; non-negative when both are."""
    f = facts_of("""
        for k0 in pl.range(0, 4096, 512):
            rows: pl.Scalar[pl.INDEX] = pl.min(k0, 256)
    """)
    assert provable(f, "rows", 16) == (True, True)


def test_max_needs_one_non_negative_operand():
    """NZ-8 pl.max: multiple when both operands are; non-negative when either is."""
    f = facts_of("""
        for nb in pl.range(8):
            n0: pl.Scalar[pl.INDEX] = nb * 256
            for k0 in pl.range(0, 1024, 32):
                m: pl.Scalar[pl.INDEX] = pl.max(n0 - k0, 0)
    """)
    assert provable(f, "m", 32) == (True, True)


def test_block_idx_num_and_subblock_idx_are_non_negative():
    """NZ-8 tile.get_block_idx / get_block_num / get_subblock_idx: lane numbers are never negative;
    they are multiples of nothing but 1."""
    f = facts_of("""
        blk: pl.Scalar[pl.UINT64] = pl.tile.get_block_idx()
        num: pl.Scalar[pl.UINT64] = pl.tile.get_block_num()
        sub: pl.Scalar[pl.UINT64] = pl.tile.get_subblock_idx()
    """)
    for name in ("blk", "num", "sub"):
        assert provable(f, name, 1) == (True, True)
        assert not f.is_multiple_of(v(name), 2)
    assert f.is_non_negative(Call("get_block_idx"))  # the short spelling


def test_modulo_by_positive_constant_in_a_product():
    """NZ-8 `(blk % 2) * 512`: the other factor carries divisibility; the dividend is non-negative."""
    f = facts_of("""
        blk: pl.Scalar[pl.INDEX] = pl.tile.get_block_idx()
        half: pl.Scalar[pl.INDEX] = blk % 2
        a: pl.Scalar[pl.INDEX] = (blk % 2) * 512
    """)
    assert provable(f, "a", 512) == (True, True)
    assert provable(f, "half", 1) == (True, True)
    assert not f.is_multiple_of(v("half"), 2)


def test_floordiv_by_positive_constant_in_a_product():
    """NZ-8 `(blk // 4) * 64`: floor-div by a positive constant of a non-negative dividend."""
    f = facts_of("""
        blk: pl.Scalar[pl.INDEX] = pl.tile.get_block_idx()
        a: pl.Scalar[pl.INDEX] = (blk // 4) * 64
    """)
    assert provable(f, "a", 64) == (True, True)


def test_binding_chain_is_walked():
    """NZ-8: the proof walks SSA bindings through any number of names."""
    f = facts_of("""
        for nb in pl.range(8):
            n0: pl.Scalar[pl.INDEX] = nb * 256
            a: pl.Scalar[pl.INDEX] = n0
            for k0 in pl.range(0, 1024, 32):
                b: pl.Scalar[pl.INDEX] = a + k0
                e: pl.Scalar[pl.INDEX] = b
    """)
    assert provable(f, "e", 32) == (True, True)


def test_long_binding_chain_is_proved_without_recursion_error():
    """NZ-8 bindings chained far deeper than the recursion budget are still proved."""
    n = 3 * MAX_DEPTH
    assigns = {"a0": c(0)} | {f"a{i}": BinOp("+", v(f"a{i - 1}"), c(16)) for i in range(1, n)}
    f = Facts(assigns=assigns, order=list(assigns))
    assert f.is_provable_offset(v(f"a{n - 1}"), 16)


def test_grouped_matmul_seed_example():
    """NZ-8 seed example: `for nb in pl.spmd(N // N_TILE): n0 = nb * N_TILE;
    for k0 in pl.pipeline(K_TILE, K, K_TILE, stage=2)`: the row offset n0 is a multiple of 16, the
    column offset k0 a multiple of c0 = 32 (INT8), both non-negative."""
    text = textwrap.dedent("""
        import pypto.language as pl
        @pl.program
        class gmm:
            @pl.function(type=pl.FunctionType.AIC)
            def weights(self, w: pl.Tensor[[2048, 1024], pl.INT8, pl.NZ]):
                for nb in pl.range(2048 // 256):
                    n0: pl.Scalar[pl.INDEX] = nb * 256
                    for k0 in pl.pipeline(128, 1024, 128, stage=2):
                        wt: pl.Tile[[256, 128], pl.INT8, pl.Mem.Mat] = pl.tile.load(w, [n0, k0], [256, 128], [256, 128], target_memory=pl.Mem.Mat)
    """)
    fn = parse_program(text, verify=True).functions[0]
    f = Facts.of_function(fn)
    load = f.assigns["wt"]
    assert isinstance(load, Call) and isinstance(load.args[1], ListExpr)
    row, col = load.args[1].items
    assert INT8.c0 == 32
    assert f.is_multiple_of(row, 16) and f.is_non_negative(row)
    assert f.is_multiple_of(col, INT8.c0) and f.is_non_negative(col)
    assert blocked_offset(row, 16, facts=f) == BinOp("//", v("n0"), c(16))
    assert blocked_offset(col, INT8.c0, facts=f) == BinOp("//", v("k0"), c(32))


def test_provable_forms_are_listed_for_diagnostics():
    """NZ-8: an unprovable offset is rejected with a list of the provable forms."""
    assert len(PROVABLE_FORMS) >= 6 and all(isinstance(s, str) and s for s in PROVABLE_FORMS)


# --------------------------------------------------------------------------------------------------
# NZ-8: every unprovable form rejected
# --------------------------------------------------------------------------------------------------


def test_difference_never_proves_sign():
    """NZ-8: differences never prove a sign, even of two non-negative multiples."""
    f = facts_of("""
        for nb in pl.range(8):
            n0: pl.Scalar[pl.INDEX] = nb * 256
            for k0 in pl.range(0, 1024, 32):
                d: pl.Scalar[pl.INDEX] = n0 - k0
                z: pl.Scalar[pl.INDEX] = k0 - 0
    """)
    assert provable(f, "d", 32) == (True, False)
    assert not f.is_provable_offset(v("d"), 32)
    assert not f.is_non_negative(v("z"))
    assert f.is_non_negative(BinOp("-", c(48), c(16)))  # a constant difference is a constant


def test_unknown_param_rejected():
    """NZ-8: a scalar parameter's value is unknown: neither a multiple nor non-negative."""
    f = facts_of("""
        a: pl.Scalar[pl.INDEX] = n * 16
    """, params=", n: pl.Scalar[pl.INDEX]")
    assert provable(f, "n", 16) == (False, False)
    assert provable(f, "a", 16) == (True, False)  # the constant factor carries divisibility, not sign
    assert not f.is_provable_offset(v("a"), 16)


def test_iter_arg_never_resolved():
    """NZ-8: iteration arguments are never resolved (their value changes every iteration), whatever
    the initial value or the yielded update; nor are loop results."""
    f = facts_of("""
        for i, (off,) in pl.range(0, 8, 1, init_values=(0,)):
            nxt: pl.Scalar[pl.INDEX] = off + 16
            res: pl.Scalar[pl.INDEX] = pl.yield_(nxt)
        for (pos,) in pl.while_(init_values=(0,)):
            pl.cond(pos < 1024)
            pos_next: pl.Scalar[pl.INDEX] = pl.yield_(pos + 64)
    """)
    for name in ("off", "res", "pos", "pos_next"):
        assert name in f.unresolved
        assert provable(f, name, 16) == (False, False)
    assert provable(f, "nxt", 16) == (False, False)


def test_min_with_possibly_negative_operand_rejected():
    """NZ-8 pl.min needs both operands non-negative (`min(800 - o0, 256)` is rejected)."""
    f = facts_of("""
        for k0 in pl.range(0, 4096, 64):
            rows: pl.Scalar[pl.INDEX] = pl.min(k0 - 64, 256)
            cols: pl.Scalar[pl.INDEX] = pl.max(k0 - 64, 0 - 64)
    """)
    assert provable(f, "rows", 64) == (True, False)
    assert provable(f, "cols", 64) == (True, False)


def test_modulo_of_possibly_negative_dividend_rejected():
    """NZ-8 modulo / floor-div: the dividend must be provably non-negative."""
    f = facts_of("""
        for k0 in pl.range(0, 4096, 64):
            a: pl.Scalar[pl.INDEX] = ((k0 - 64) % 2) * 512
            b: pl.Scalar[pl.INDEX] = (n % 2) * 512
            q: pl.Scalar[pl.INDEX] = ((k0 - 64) // 4) * 512
    """, params=", n: pl.Scalar[pl.INDEX]")
    for name in ("a", "b", "q"):
        assert provable(f, name, 512) == (True, False)


def test_division_by_non_positive_or_symbolic_divisor_rejected():
    """NZ-8 only covers modulo / floor-div by a positive constant."""
    blk = Call("tile.get_block_idx")
    f = Facts(assigns={"n": c(8)})
    for divisor in (c(-2), c(0), v("n"), Call("tile.get_block_num")):
        for op in ("//", "%"):
            e = BinOp(op, blk, divisor)
            assert not f.is_non_negative(e)
            assert not f.is_multiple_of(e, 1)


def test_non_multiple_step_rejected():
    """NZ-8 loop variable: the step must be a multiple too."""
    f = facts_of("""
        for i in pl.range(0, 256, 8):
            pass
    """)
    assert provable(f, "i", 8) == (True, True)
    assert not f.is_multiple_of(v("i"), 16)


def test_non_multiple_start_rejected():
    """NZ-8 loop variable: the start must be a multiple too."""
    f = facts_of("""
        for i in pl.range(8, 256, 16):
            pass
    """)
    assert not f.is_multiple_of(v("i"), 16)


def test_negative_step_rejected_for_sign():
    """NZ-8 loop variable: non-negative only when start and step both are."""
    f = facts_of("""
        for i in pl.range(256, 0, -16):
            pass
    """)
    assert provable(f, "i", 16) == (True, False)


def test_negative_constant_rejected_for_sign():
    """NZ-8 constants: -16 is a multiple of 16 but FloorDiv(-16, 16) = -1 would be clamped to fractal 0."""
    f = facts_of("""
        m: pl.Scalar[pl.INDEX] = -16
    """)
    assert provable(f, "m", 16) == (True, False)


def test_constant_binding_takes_its_annotated_dtype():
    """NZ-8 constants: `a: INT8 = 200` holds -56, which is not non-negative."""
    f = facts_of("""
        a: pl.Scalar[pl.INT8] = 200
    """)
    assert provable(f, "a", 8) == (True, False)


def test_unknown_names_scope_vars_and_other_operators_rejected():
    """NZ-8: forms outside the table prove nothing (shifts, casts, negation, floats, unknown names,
    scope variables)."""
    f = facts_of("""
        blk: pl.Scalar[pl.INDEX] = pl.tile.get_block_idx()
        sh: pl.Scalar[pl.INDEX] = blk << 4
        ca: pl.Scalar[pl.INDEX] = pl.cast(blk, pl.INDEX)
        fl: pl.Scalar[pl.FP32] = 16.0
        with pl.at(0) as z:
            pass
    """)
    for name in ("sh", "ca", "fl", "z", "nowhere"):
        assert provable(f, name, 16) == (False, False)
    assert not f.is_non_negative(UnaryOp("-", v("blk")))
    assert not f.is_multiple_of(ConstFloat(16.0, dtypes.FP32), 16)
    assert not f.is_non_negative(Cast(v("blk"), INT32))


def test_name_bound_twice_is_never_resolved():
    """NZ-8 walks SSA bindings: a name bound twice (broken SSA) has no single binding to walk."""
    fn = Function("f", (), (), (
        AssignStmt(v("a"), c(16)),
        AssignStmt(v("a"), c(-3)),
    ))
    f = Facts.of_function(fn)
    assert "a" in f.unresolved
    assert provable(f, "a", 1) == (False, False)


def test_cycle_of_bindings_terminates_unprovable():
    """A cycle of bindings (invalid IR) proves nothing and does not hang."""
    f = Facts(assigns={"a": BinOp("+", v("b"), c(16)), "b": v("a")})
    assert provable(f, "a", 16) == (False, False)
    f2 = Facts(loops={"i": (v("i"), c(16), c(64))})
    assert provable(f2, "i", 16) == (False, False)


def test_deep_expression_does_not_crash():
    """An expression deeper than the recursion budget is unprovable, never a RecursionError; fold
    handles any depth."""
    e = c(1)
    for _ in range(5000):
        e = BinOp("+", e, c(1))
    assert fold(e) == c(5001)
    deep = Call("tile.get_block_idx")
    for _ in range(5000):
        deep = BinOp("+", deep, c(16))
    f = Facts()
    assert f.is_multiple_of(deep, 1) is False
    assert f.is_non_negative(deep) is False


def test_factor_must_be_positive():
    with pytest.raises(ValueError):
        Facts().is_multiple_of(c(16), 0)


def test_loop_results_and_body_order_recorded():
    """Facts.of_function: one scan records loop ranges, assignments in definition order, dtypes."""
    fn = Function("f", (), (), (
        AssignStmt(v("x"), c(3)),
        ForStmt("range", v("i"), (c(0), c(64), c(16)), (
            AssignStmt(v("y"), BinOp("*", v("i"), c(2))),
            YieldStmt((v("r"),), (v("acc"),)),
        ), iter_args=(v("acc"),), init_values=(c(0),)),
    ))
    f = Facts.of_function(fn)
    assert f.order == ("x", "i", "y")
    assert f.loops["i"] == LoopRange(c(0), c(16), c(64))
    assert {"acc", "r"} <= f.unresolved
    assert f.dtypes["i"] == INDEX


# --------------------------------------------------------------------------------------------------
# Constant folding with wrap-around
# --------------------------------------------------------------------------------------------------


def test_fold_wraps_at_the_declared_width():
    assert fold(BinOp("+", c(127, INT8), c(1, INT8))) == c(-128, INT8)
    assert fold(BinOp("-", c(0, UINT8), c(1, UINT8))) == c(255, UINT8)
    assert fold(BinOp("*", c(1 << 62), c(4))) == c(0)  # INDEX is 64-bit signed
    assert fold(BinOp("*", c(1 << 24, INT32), c(256))) == c(0, INT32)  # INDEX literal takes INT32
    assert fold(BinOp("<<", c(1, INT32), c(31))) == c(-(1 << 31), INT32)
    assert wrap(1 << 63, INDEX) == -(1 << 63) and wrap(-1, UINT64) == (1 << 64) - 1


def test_fold_floor_division_and_modulo():
    assert fold(BinOp("//", c(-7), c(2))) == c(-4)
    assert fold(BinOp("%", c(-7), c(2))) == c(1)
    assert fold(BinOp("//", c(-(1 << 31), INT32), c(-1, INT32))) == c(-(1 << 31), INT32)


def test_fold_other_forms():
    assert fold(MinMax("min", c(3), c(-2))) == c(-2)
    assert fold(MinMax("max", c(3), c(-2))) == c(3)
    assert fold(UnaryOp("-", c(-128, INT8))) == c(-128, INT8)
    assert fold(Cast(c(300), INT8)) == c(44, INT8)
    assert fold(BinOp("&", c(0xF0), c(0x3C))) == c(0x30)


def test_fold_leaves_non_constant_and_undefined_unchanged():
    for e in (
        BinOp("+", v("x"), c(1)),
        BinOp("//", c(4), c(0)),
        BinOp("%", c(4), c(0)),
        BinOp("<<", c(1, INT32), c(32)),
        BinOp("/", c(4), c(2)),
        BinOp("<", c(4), c(2)),
    ):
        assert fold(e) is e


# --------------------------------------------------------------------------------------------------
# NZ-9: whole-expression division
# --------------------------------------------------------------------------------------------------


def test_blocked_offset_divides_the_whole_expression():
    """NZ-9: FloorDiv(offset, divisor) of the whole offset, never re-associated into nb * 16."""
    off = BinOp("*", v("nb"), c(256))
    got = blocked_offset(off, 16)
    assert got == BinOp("//", off, c(16))
    assert got.lhs is off


def test_blocked_offset_keeps_the_offset_dtype():
    """NZ-9: the divisor takes the offset's own dtype."""
    f = facts_of("""
        x: pl.Scalar[pl.INT32] = pl.const(1, pl.INT32) << 24
        off: pl.Scalar[pl.INT32] = x * 256
    """)
    got = blocked_offset(f.assigns["off"], 16, facts=f)
    assert got.rhs == c(16, INT32)
    assert blocked_offset(v("k0"), 32, dtype=INT32).rhs == c(32, INT32)
    assert blocked_offset(v("k0"), 32).rhs == c(32, INDEX)


def test_blocked_offset_folds_only_constants():
    assert blocked_offset(c(512), 16) == c(32)
    assert blocked_offset(BinOp("*", c(2), c(256)), 16) == c(32)


def test_blocked_offset_divisor_must_be_a_power_of_two():
    """NZ-9: the proof survives wrap-around only because the divisor divides 2^W."""
    for bad in (0, -16, 24, 3):
        with pytest.raises(InternalError):
            blocked_offset(v("k0"), bad)


def test_reassociation_differs_under_wraparound():
    """NZ-9 seed example: x: INT32 = 1 << 24; (x * 256) // 16 == 0 in 32-bit wrap-around, while the
    re-associated x * (256 // 16) == 268435456: whole division is the only correct blocked offset."""
    f = facts_of("""
        x: pl.Scalar[pl.INT32] = pl.const(1, pl.INT32) << 24
        off: pl.Scalar[pl.INT32] = x * 256
    """)
    x = fold(f.assigns["x"])
    assert x == c(1 << 24, INT32)
    env = {"x": x.value}
    off = f.assigns["off"]
    whole = blocked_offset(off, 16, facts=f)
    reassociated = BinOp("*", v("x"), BinOp("//", c(256), c(16)))
    assert eval_int(whole, env, 32) == 0
    assert eval_int(reassociated, env, 32) == 268435456
    # the proof of divisibility still holds under wrap-around: 0 is a multiple of 16
    assert f.is_multiple_of(v("off"), 16) and eval_int(off, env, 32) % 16 == 0
    # without wrap-around the two agree: the bit width is what makes re-association wrong
    assert eval_int(whole, env) == eval_int(reassociated, env) == 268435456


def test_eval_int_semantics():
    env = {"a": -7, "tile.get_block_idx": 5}
    assert eval_int(BinOp("//", v("a"), c(2)), env) == -4
    assert eval_int(BinOp("%", v("a"), c(2)), env) == 1
    assert eval_int(MinMax("max", Call("tile.get_block_idx"), v("a")), env) == 5
    assert eval_int(BinOp("+", c(127), c(1)), {}, 8) == -128
    assert eval_int(BinOp("+", c(255), c(1)), {}, 8, signed=False) == 0
    with pytest.raises(ZeroDivisionError):
        eval_int(BinOp("%", v("a"), c(0)), env)
    with pytest.raises(ValueError):
        eval_int(v("missing"), env)
