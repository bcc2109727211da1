"""Simplify: scalar constants propagated into expressions and types, integer arithmetic folded with loop
and branch ranges, decided `if`s and single-trip loops collapsed, dead scalar code removed. Each test
gives a program and the program it must become (written by hand), compared structurally; the last tests
run programs before and after the pass numerically."""

import textwrap

import numpy as np

from ptoc.context import CompileContext
from ptoc.frontend.parser import parse_program
from ptoc.ir.printer import print_program
from ptoc.passes.ConvertToSSA import ConvertToSSA
from ptoc.passes.manager import run_pipeline
from ptoc.passes.Simplify import Simplify

CTX = CompileContext()
OUT = "out: pl.Tensor[[16], pl.INDEX]"


def fn(body: str, params: str = OUT, ret: str = "", kind: str = "") -> str:
    body = textwrap.indent(textwrap.dedent(body).strip("\n"), " " * 8)
    deco = f"(type=pl.FunctionType.{kind})" if kind else ""
    arrow = f" -> {ret}" if ret else ""
    return (f"import pypto.language as pl\n\n@pl.program\nclass p:\n    @pl.function{deco}\n"
            f"    def main(self, {params}){arrow}:\n{body}\n")


def simplify(text: str):
    return Simplify().run(parse_program(text, "before.ir", ctx=CTX), CTX)


def assert_simplifies(before: str, expected: str) -> None:
    out = simplify(before)
    want = parse_program(expected, "expected.ir", ctx=CTX)
    assert out == want, f"got:\n{print_program(out)}\nexpected:\n{print_program(want)}"


# ------------------------------------------------------------------ constant propagation
def test_a_chunk_constant_reaches_shapes_offsets_and_types_inside_a_scope_and_is_then_dropped():
    params = "x: pl.Tensor[[1024, 64], pl.FP32], y: pl.Out[pl.Tensor[[1024, 64], pl.FP32]]"
    assert_simplifies(fn("""
        ROWS: pl.Scalar[pl.INDEX] = 256
        for c in pl.range(4):
            with pl.at(level=pl.Level.CORE_GROUP):
                t: pl.Tile[[ROWS, 64], pl.FP32] = pl.load(x, [c * ROWS, 0], [ROWS, 64])
                y = pl.store(t, [c * ROWS, 0], y)
        return y
    """, params, "pl.Tensor[[1024, 64], pl.FP32]"), fn("""
        for c in pl.range(4):
            with pl.at(level=pl.Level.CORE_GROUP):
                t: pl.Tile[[256, 64], pl.FP32] = pl.load(x, [c * 256, 0], [256, 64])
                y = pl.store(t, [c * 256, 0], y)
        return y
    """, params, "pl.Tensor[[1024, 64], pl.FP32]"))


def test_a_constant_folds_into_the_expressions_that_use_it_and_the_loop_step():
    assert_simplifies(fn("""
        K: pl.Scalar[pl.INDEX] = 4
        k1: pl.Scalar[pl.INDEX] = K + 1
        pl.tensor.write(out, [0], k1 * 2)
        for i in pl.range(0, 16, K):
            pl.tensor.write(out, [i], i)
    """), fn("""
        pl.tensor.write(out, [0], 10)
        for i in pl.range(0, 16, 4):
            pl.tensor.write(out, [i], i)
    """))


def test_a_name_assigned_twice_or_only_inside_a_branch_is_not_propagated():
    text = fn("""
        k: pl.Scalar[pl.INDEX] = 7
        if flag:
            k = 5
        pl.tensor.write(out, [0], k + 1)
    """, f"flag: pl.Scalar[pl.BOOL], {OUT}")
    prog = parse_program(text, "t.ir", ctx=CTX)
    assert Simplify().run(prog, CTX) == prog
    in_branch = fn("""
        for i in pl.range(4):
            k: pl.Scalar[pl.INDEX] = 3
            pl.tensor.write(out, [i], k)
    """)
    prog = parse_program(in_branch, "t.ir", ctx=CTX)
    assert Simplify().run(prog, CTX) == prog


# ------------------------------------------------------------------ folding
def test_identities_constants_and_cancelling_sums_fold():
    params = f"k: pl.Scalar[pl.INDEX], {OUT}"
    assert_simplifies(fn("""
        for i in pl.range(16):
            a: pl.Scalar[pl.INDEX] = i + 0
            b: pl.Scalar[pl.INDEX] = 1 * i
            c: pl.Scalar[pl.INDEX] = k + 0 - k + 8
            d: pl.Scalar[pl.INDEX] = (2 + 3) * 4 - i * 0
            pl.tensor.write(out, [a], b + c + d)
    """, params), fn("""
        for i in pl.range(16):
            a: pl.Scalar[pl.INDEX] = i
            b: pl.Scalar[pl.INDEX] = i
            c: pl.Scalar[pl.INDEX] = 8
            d: pl.Scalar[pl.INDEX] = 20
            pl.tensor.write(out, [a], b + c + d)
    """, params))


def test_loop_ranges_decide_floor_division_and_modulo():
    assert_simplifies(fn("""
        for i in pl.range(8):
            q: pl.Scalar[pl.INDEX] = i // 8
            r: pl.Scalar[pl.INDEX] = i % 8
            h: pl.Scalar[pl.INDEX] = i // 4
            pl.tensor.write(out, [r], q + h)
    """), fn("""
        for i in pl.range(8):
            q: pl.Scalar[pl.INDEX] = 0
            r: pl.Scalar[pl.INDEX] = i
            h: pl.Scalar[pl.INDEX] = i // 4
            pl.tensor.write(out, [r], q + h)
    """))


def test_a_branch_knows_its_condition_and_the_else_branch_its_negation():
    assert_simplifies(fn("""
        for i in pl.range(16):
            if i < 8:
                lo: pl.Scalar[pl.INDEX] = i // 8
                pl.tensor.write(out, [i], lo)
            else:
                hi: pl.Scalar[pl.INDEX] = i // 8
                pl.tensor.write(out, [i], hi)
    """), fn("""
        for i in pl.range(16):
            if i < 8:
                lo: pl.Scalar[pl.INDEX] = 0
                pl.tensor.write(out, [i], lo)
            else:
                hi: pl.Scalar[pl.INDEX] = 1
                pl.tensor.write(out, [i], hi)
    """))


# ------------------------------------------------------------------ control flow folds
def test_an_if_the_ranges_decide_keeps_only_the_branch_that_runs():
    assert_simplifies(fn("""
        for i in pl.range(0, 16, 4):
            if i < 100:
                pl.tensor.write(out, [i], i + 1)
            else:
                pl.tensor.write(out, [i], 99)
            off: pl.Scalar[pl.INDEX] = i * 16 + 16
            if off == 0:
                pl.tensor.write(out, [i], 7)
            pl.tensor.write(out, [i], off)
    """), fn("""
        for i in pl.range(0, 16, 4):
            pl.tensor.write(out, [i], i + 1)
            off: pl.Scalar[pl.INDEX] = i * 16 + 16
            pl.tensor.write(out, [i], off)
    """))


def test_an_index_scalar_is_never_negative():
    params = f"a: pl.Scalar[pl.INDEX], b: pl.Scalar[pl.INDEX], {OUT}"
    assert_simplifies(fn("""
        d: pl.Scalar[pl.INDEX] = a - b
        if d < 0:
            pl.tensor.write(out, [0], a)
        else:
            pl.tensor.write(out, [0], d)
    """, params), fn("""
        d: pl.Scalar[pl.INDEX] = a - b
        pl.tensor.write(out, [0], d)
    """, params))


def test_a_decided_if_that_yields_hands_its_values_to_the_code_after_it():
    params = "x: pl.Tensor[[16], pl.FP32]"
    ret = "pl.Tensor[[16], pl.FP32]"
    assert_simplifies(fn("""
        for i, (acc,) in pl.range(4, init_values=(x,)):
            if i >= 0:
                a1: pl.Tensor[[16], pl.FP32] = pl.add(acc, 1.0)
                r: pl.Tensor[[16], pl.FP32] = pl.yield_(a1)
            else:
                r: pl.Tensor[[16], pl.FP32] = pl.yield_(acc)
            acc_out: pl.Tensor[[16], pl.FP32] = pl.yield_(r)
        return acc_out
    """, params, ret), fn("""
        for i, (acc,) in pl.range(4, init_values=(x,)):
            a1: pl.Tensor[[16], pl.FP32] = pl.add(acc, 1.0)
            acc_out: pl.Tensor[[16], pl.FP32] = pl.yield_(a1)
        return acc_out
    """, params, ret))


def test_a_loop_that_runs_once_becomes_its_body_and_one_that_never_runs_its_initial_values():
    params = "x: pl.Tensor[[16], pl.FP32]"
    ret = "pl.Tensor[[16], pl.FP32]"
    assert_simplifies(fn("""
        for k, (acc,) in pl.range(0, 128, 128, init_values=(x,)):
            if k == 0:
                a1: pl.Tensor[[16], pl.FP32] = pl.mul(acc, 2.0)
                r: pl.Tensor[[16], pl.FP32] = pl.yield_(a1)
            else:
                r: pl.Tensor[[16], pl.FP32] = pl.yield_(acc)
            once: pl.Tensor[[16], pl.FP32] = pl.yield_(r)
        for j, (acc2,) in pl.range(5, 5, init_values=(once,)):
            b1: pl.Tensor[[16], pl.FP32] = pl.add(acc2, 1.0)
            never: pl.Tensor[[16], pl.FP32] = pl.yield_(b1)
        return never
    """, params, ret), fn("""
        a1: pl.Tensor[[16], pl.FP32] = pl.mul(x, 2.0)
        never = a1
        return never
    """, params, ret))


def test_parallel_and_multi_trip_loops_are_not_collapsed():
    text = fn("""
        for i in pl.parallel(1):
            pl.tensor.write(out, [i], 1)
        for j in pl.range(2):
            pl.tensor.write(out, [j], 2)
    """)
    prog = parse_program(text, "t.ir", ctx=CTX)
    assert Simplify().run(prog, CTX) == prog


# ------------------------------------------------------------------ dead code
def test_unused_scalars_go_in_chains_but_calls_stay():
    assert_simplifies(fn("""
        a: pl.Scalar[pl.INDEX] = 5
        b: pl.Scalar[pl.INDEX] = a + 1
        n: pl.Scalar[pl.INDEX] = pl.tensor.dim(out, 0)
        t: pl.Tensor[[4], pl.FP32] = pl.tensor.create([4], dtype=pl.FP32)
        with pl.at(level=pl.Level.CORE_GROUP):
            dead: pl.Scalar[pl.INDEX] = 7
            t2: pl.Tensor[[4], pl.FP32] = pl.tensor.create([4], dtype=pl.FP32)
    """), fn("""
        n: pl.Scalar[pl.INDEX] = pl.tensor.dim(out, 0)
        t: pl.Tensor[[4], pl.FP32] = pl.tensor.create([4], dtype=pl.FP32)
        with pl.at(level=pl.Level.CORE_GROUP):
            t2: pl.Tensor[[4], pl.FP32] = pl.tensor.create([4], dtype=pl.FP32)
    """))


def test_an_if_result_nothing_reads_is_dropped_with_its_yields():
    params = f"flag: pl.Scalar[pl.BOOL], {OUT}"
    assert_simplifies(fn("""
        if flag:
            one: pl.Scalar[pl.INDEX] = 1
            pl.tensor.write(out, [0], one)
            v: pl.Scalar[pl.INDEX] = pl.yield_(one)
        else:
            two: pl.Scalar[pl.INDEX] = 2
            pl.tensor.write(out, [0], two)
            v: pl.Scalar[pl.INDEX] = pl.yield_(two)
    """, params), fn("""
        if flag:
            one: pl.Scalar[pl.INDEX] = 1
            pl.tensor.write(out, [0], one)
        else:
            two: pl.Scalar[pl.INDEX] = 2
            pl.tensor.write(out, [0], two)
    """, params))  # constants inside a branch are not propagated (they only narrow ranges)


# ------------------------------------------------------------------ numbers
def test_simplified_programs_compute_what_they_computed_before():
    from ptoc.reference.interp import run_function

    text = """\
import pypto.language as pl

@pl.program
class p:
    @pl.function
    def main(self, x: pl.Tensor[[64], pl.FP32], y: pl.Out[pl.Tensor[[64], pl.FP32]]) -> pl.Tensor[[64], pl.FP32]:
        C: pl.Scalar[pl.INDEX] = 16
        for c in pl.range(4):
            with pl.at(level=pl.Level.CORE_GROUP):
                t: pl.Tile[[C], pl.FP32] = pl.load(x, [c * C + 0], [C])
                if c // 4 == 0:
                    s: pl.Tile[[C], pl.FP32] = pl.tile.muls(t, 3.0)
                    u: pl.Tile[[C], pl.FP32] = pl.yield_(s)
                else:
                    u: pl.Tile[[C], pl.FP32] = pl.yield_(t)
                y = pl.store(u, [c * C], y)
        return y
"""
    before = run_pipeline(parse_program(text, "k.ir", ctx=CTX), CTX, passes=[ConvertToSSA])
    after = run_pipeline(before, CTX, passes=[Simplify])
    printed = print_program(after)
    assert "if " not in printed and "[16]" in printed and "C" not in printed.replace("CORE", "")
    x = np.arange(64, dtype=np.float32) - 20
    for prog in (before, after):
        got = np.asarray(run_function(prog, "main", {"x": x, "y": np.zeros(64, np.float32)})["y"])
        np.testing.assert_array_equal(got, x * 3)  # every chunk is scaled: c // 4 == 0 for c < 4


def test_float_scalars_keep_their_arithmetic():
    # x * 0 is not 0 for an infinite or NaN x, and an integer 0 would change the value's dtype
    text = fn("""
        z: pl.Scalar[pl.FP32] = f * 0
        w: pl.Scalar[pl.FP32] = f + 0 - f
        pl.tensor.write(out, [0], z + w)
    """, "f: pl.Scalar[pl.FP32], out: pl.Tensor[[16], pl.FP32]")
    prog = parse_program(text, "t.ir", ctx=CTX)
    assert Simplify().run(prog, CTX) == prog


def test_the_dump_after_simplify_shows_the_example_chunk_sizes_as_numbers():
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    ptoc = Path(sys.executable).with_name("ptoc")
    p = subprocess.run([str(ptoc), "passes", str(root / "examples" / "scoped_chunked_add.ir"), "--dump-after",
                        "Simplify"], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert "pl.Tile[[32, 64], pl.FP32, pl.Mem.Vec] = pl.tile.load(x, [row, 0], [32, 64]" in p.stdout
    assert "pl.range(8, init_values=" in p.stdout  # 256 // CHUNK
    assert "CHUNK" not in p.stdout and "COLS" not in p.stdout


def test_min_and_max_narrow_ranges_even_with_an_unbounded_side():
    params = f"n: pl.Scalar[pl.INDEX], {OUT}"
    assert_simplifies(fn("""
        for i in pl.range(8):
            a: pl.Scalar[pl.INDEX] = pl.min(i + 20, 3) // 4
            b: pl.Scalar[pl.INDEX] = pl.min(n, 5) // 8
            c: pl.Scalar[pl.INDEX] = pl.max(n, 5) // 8
            d: pl.Scalar[pl.INDEX] = pl.max(i, 9) // 16
            pl.tensor.write(out, [a + b], c + d)
    """, params), fn("""
        for i in pl.range(8):
            a: pl.Scalar[pl.INDEX] = 0
            b: pl.Scalar[pl.INDEX] = 0
            c: pl.Scalar[pl.INDEX] = pl.max(n, 5) // 8
            d: pl.Scalar[pl.INDEX] = 0
            pl.tensor.write(out, [a + b], c + d)
    """, params))  # n is an INDEX (0 or more) without an upper bound: max(n, 5) // 8 is unknown


# ------------------------------------------------------------------ PyPTO's canonical order
# PyPTO's Simplify rewrites integer `+`, `-`, `*` and unary `-` by an ordered list of rules: constants
# gathered and written to the right of `+` and `*`, `(x + c1) * c2` distributed, equal terms cancelled,
# coefficients collected. The expected forms are what PyPTO's Simplify prints for the same program.
CANON = [  # (written, as PyPTO's Simplify leaves it)
    ("32 + i * 16", "i * 16 + 32"),
    ("16 * i", "i * 16"),
    ("(i + 1) * 64", "i * 64 + 64"),
    ("(i + 3) + 5", "i + 8"),
    ("(i + 4) - k", "(i - k) + 4"),
    ("i - (k + 4)", "(i - k) + -4"),
    ("i + i", "i * 2"),
    ("i * 4 + i", "i * 5"),
    ("10 - (i + 4)", "6 - i"),
    ("-(i - k)", "k - i"),
    ("(i - k) * -2", "(k - i) * 2"),
    ("k + (3 - i)", "(k - i) + 3"),
    ("(k + 2) + i", "(k + i) + 2"),
    ("i * k + k * 3", "(i + 3) * k"),
    ("i - (k - 5)", "(i - k) + 5"),
    ("2 * (3 * i)", "i * 6"),
    ("(i + k) - i", "k"),
]


def test_integer_arithmetic_takes_pypto_canonical_order():
    params = f"k: pl.Scalar[pl.INDEX], {OUT}"
    before = "\n".join(f"pl.tensor.write(out, [{n}], {w})" for n, (w, _) in enumerate(CANON))
    after = "\n".join(f"pl.tensor.write(out, [{n}], {c})" for n, (_, c) in enumerate(CANON))
    assert_simplifies(fn("for i in pl.range(16):\n" + textwrap.indent(before, "    "), params),
                      fn("for i in pl.range(16):\n" + textwrap.indent(after, "    "), params))


def test_canonical_order_keeps_the_values():
    from ptoc.reference.interp import run_function

    params = f"i: pl.Scalar[pl.INDEX], k: pl.Scalar[pl.INDEX], {OUT}"
    body = "\n".join(f"pl.tensor.write(out, [{n}], {w})" for n, (w, _) in enumerate(CANON[:16]))
    before = run_pipeline(parse_program(fn(body, params), "k.ir", ctx=CTX), CTX, passes=[ConvertToSSA])
    after = run_pipeline(before, CTX, passes=[Simplify])
    assert "i * 16 + 32" in print_program(after) and "32 + i * 16" in print_program(before)
    i, k = 3, 7
    want = [eval(w, {"i": i, "k": k}) for w, _ in CANON[:16]]  # Python's own arithmetic
    for prog in (before, after):
        got = np.asarray(run_function(prog, "main", {"i": i, "k": k, "out": np.zeros(16, np.int64)})["out"])
        assert got.tolist() == want


def test_constants_a_rule_makes_take_the_expressions_integer_type():
    params = "k: pl.Scalar[pl.INT32], out: pl.Tensor[[16], pl.INT32]"
    assert_simplifies(fn("""
        pl.tensor.write(out, [0], k + k)
        pl.tensor.write(out, [1], k - k)
    """, params), fn("""
        pl.tensor.write(out, [0], k * pl.const(2, pl.INT32))
        pl.tensor.write(out, [1], pl.const(0, pl.INT32))
    """, params))


def test_float_arithmetic_keeps_its_order():
    # PyPTO applies its rewrite rules to integer expressions only
    text = fn("""
        pl.tensor.write(out, [0], 1.0 + f * 2.0)
        pl.tensor.write(out, [1], 3.0 * f)
    """, "f: pl.Scalar[pl.FP32], out: pl.Tensor[[16], pl.FP32]")
    prog = parse_program(text, "t.ir", ctx=CTX)
    assert Simplify().run(prog, CTX) == prog


CONDITIONS = [  # (written, as PyPTO's Simplify leaves it; None: decided False, the `if` goes)
    ("i > k", "k < i"),
    ("i + 4 < 9", "i < 5"),
    ("3 == k", "k == 3"),
    ("k >= i + 2", "i + 2 <= k"),
    ("k - 2 <= 5", "k <= 7"),
    ("pl.min(k, i) < 3", "k < 3 or i < 3"),
    ("i // 4 < 2", "i < 8"),
    ("k * 2 < i * 2", "k < i"),
    ("not k < m", "m <= k"),
    ("k < m or m < k", "k != m"),
    ("k < 4 or k == 4", "k <= 4"),
    ("k > 2 and k < 3", None),
    ("not (k == m or k < 2)", "k != m and 2 <= k"),
    ("10 - k <= 4", "6 <= k"),
    ("k + m == m + 5", "k == 5"),
    ("pl.max(k, m) < 6", "k < 6 and m < 6"),
    ("k >= 1 and (m < 2 and k < m)", "(1 <= k and m < 2) and k < m"),
]


def test_conditions_take_pypto_canonical_order():
    params = f"k: pl.Scalar[pl.INDEX], m: pl.Scalar[pl.INDEX], {OUT}"

    def ifs(conds):
        return "\n".join(f"if {c}:\n    pl.tensor.write(out, [{n}], k)" for n, c in enumerate(conds) if c)

    loop = "for i in pl.range(m):\n"
    assert_simplifies(fn(loop + textwrap.indent(ifs(w for w, _ in CONDITIONS), "    "), params),
                      fn(loop + textwrap.indent(ifs(c for _, c in CONDITIONS), "    "), params))


def test_a_float_comparison_under_not_keeps_its_form():
    # `not (f < g)` is not `g <= f` when f is a NaN
    text = fn("""
        if not f < g:
            pl.tensor.write(out, [0], f)
    """, "f: pl.Scalar[pl.FP32], g: pl.Scalar[pl.FP32], out: pl.Tensor[[16], pl.FP32]")
    prog = parse_program(text, "t.ir", ctx=CTX)
    assert Simplify().run(prog, CTX) == prog
