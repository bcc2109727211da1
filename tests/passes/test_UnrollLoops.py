"""UnrollLoops: each `pl.unroll` loop becomes one copy of its body per iteration with the loop variable
replaced by that iteration's value. Each test gives a program and the program it must become (written by
hand), compared structurally; errors are the user's diagnostics; one test runs both forms numerically."""

import textwrap

import numpy as np
import pytest

from ptoc.context import CompileContext
from ptoc.diagnostics import CompileError
from ptoc.frontend.parser import parse_program
from ptoc.ir.printer import print_program
from ptoc.passes.ConvertToSSA import ConvertToSSA
from ptoc.passes.manager import run_pipeline
from ptoc.passes.UnrollLoops import UnrollLoops

CTX = CompileContext()
T = "pl.Tensor[[64], pl.FP32]"


def fn(body: str, params: str = f"x: {T}, n: pl.Scalar[pl.INDEX]") -> str:
    body = textwrap.indent(textwrap.dedent(body).strip("\n"), " " * 8)
    return (f"import pypto.language as pl\n\n@pl.program\nclass p:\n    @pl.function\n"
            f"    def main(self, {params}) -> {T}:\n{body}\n")


def unroll(text: str):
    return UnrollLoops().run(parse_program(text, "before.ir", ctx=CTX), CTX)


def assert_unrolls(before: str, expected: str) -> None:
    out = unroll(before)
    want = parse_program(expected, "expected.ir", ctx=CTX)
    assert out == want, f"got:\n{print_program(out)}\nexpected:\n{print_program(want)}"


def test_each_iteration_gets_a_copy_with_the_loop_variable_replaced():
    assert_unrolls(fn("""
        for i in pl.unroll(3):
            x = pl.add(x, pl.cast(i, pl.INT32))
        return x
    """), fn("""
        x = pl.add(x, pl.cast(0, pl.INT32))
        x = pl.add(x, pl.cast(1, pl.INT32))
        x = pl.add(x, pl.cast(2, pl.INT32))
        return x
    """))


def test_start_stop_and_a_negative_step_give_the_iterations_in_order():
    assert_unrolls(fn("""
        for i in pl.unroll(6, 0, -2):
            x = pl.add(x, pl.cast(i, pl.INT32))
        return x
    """), fn("""
        x = pl.add(x, pl.cast(6, pl.INT32))
        x = pl.add(x, pl.cast(4, pl.INT32))
        x = pl.add(x, pl.cast(2, pl.INT32))
        return x
    """))


def test_an_unroll_inside_a_range_loop_expands_in_place_and_the_range_loop_stays():
    assert_unrolls(fn("""
        for j in pl.range(n):
            for i in pl.unroll(1, 5, 3):
                x = pl.mul(x, pl.cast(i + j, pl.INT32))
        return x
    """), fn("""
        for j in pl.range(n):
            x = pl.mul(x, pl.cast(1 + j, pl.INT32))
            x = pl.mul(x, pl.cast(4 + j, pl.INT32))
        return x
    """))


def test_nested_unroll_loops_expand_inner_copies_inside_each_outer_copy():
    assert_unrolls(fn("""
        for a in pl.unroll(2):
            for b in pl.unroll(2):
                x = pl.add(x, pl.cast(a * 10 + b, pl.INT32))
        return x
    """), fn("""
        x = pl.add(x, pl.cast(0 * 10 + 0, pl.INT32))
        x = pl.add(x, pl.cast(0 * 10 + 1, pl.INT32))
        x = pl.add(x, pl.cast(1 * 10 + 0, pl.INT32))
        x = pl.add(x, pl.cast(1 * 10 + 1, pl.INT32))
        return x
    """))


def test_a_loop_without_iterations_disappears_and_an_emptied_body_holds_pass():
    assert_unrolls(fn("""
        for j in pl.range(n):
            for i in pl.unroll(0, 0, 1):
                x = pl.add(x, 1.0)
        return x
    """), fn("""
        for j in pl.range(n):
            pass
        return x
    """))


def test_other_loop_kinds_are_left_alone():
    text = fn("""
        for i in pl.range(4):
            x = pl.add(x, 1.0)
        for k in pl.parallel(2):
            x = pl.add(x, 2.0)
        return x
    """)
    prog = parse_program(text, "t.ir", ctx=CTX)
    assert UnrollLoops().run(prog, CTX) is prog


def test_a_loop_with_its_own_break_is_not_expanded():
    text = fn("""
        for j in pl.range(n):
            for i in pl.unroll(4):
                if i > 1:
                    break
                x = pl.add(x, 1.0)
        return x
    """)
    prog = parse_program(text, "t.ir", ctx=CTX)
    assert UnrollLoops().run(prog, CTX) is prog


@pytest.mark.parametrize("loop, code", [
    ("pl.unroll(n)", "PTOC-E0600"),
    ("pl.unroll(0, 8, 0)", "PTOC-E0601"),
    ("pl.unroll(2000)", "PTOC-E0602"),
])
def test_bounds_that_cannot_be_unrolled_are_user_errors(loop, code):
    text = fn(f"""
        for i in {loop}:
            x = pl.add(x, 1.0)
        return x
    """)
    with pytest.raises(CompileError) as e:
        unroll(text)
    d = e.value.diagnostics[0]
    assert d.code == code and d.span.line == 7 and d.hint


def test_carried_values_on_an_unroll_loop_are_a_user_error():
    text = fn("""
        for i, (acc,) in pl.unroll(3, init_values=(x,)):
            acc2 = pl.add(acc, 1.0)
            out = pl.yield_(acc2)
        return out
    """)
    with pytest.raises(CompileError) as e:
        unroll(text)
    assert e.value.diagnostics[0].code == "PTOC-E0603"


def test_the_unrolled_program_computes_what_the_loop_computes():
    from ptoc.reference.interp import run_function

    text = fn("""
        for i in pl.unroll(1, 4):
            x = pl.add(pl.mul(x, 2.0), pl.cast(i, pl.FP32))
        return x
    """)
    prog = parse_program(text, "k.ir", ctx=CTX)
    low = run_pipeline(prog, CTX, passes=[UnrollLoops, ConvertToSSA])
    assert not any("unroll" in line for line in print_program(low).splitlines())
    x = np.linspace(-2.0, 2.0, 64, dtype=np.float32)
    got = np.asarray(run_function(low, "main", {"x": x, "n": 0})["return[0]"])
    want = x.copy()
    for i in (1, 2, 3):  # computed here by hand: x = 2x + i, three times
        want = want * 2 + i
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_names_bound_in_the_body_keep_their_name_in_every_copy():
    # PyPTO clones the body keeping its variables: r0 is assigned by each copy in turn (the program is
    # not in single assignment again until ConvertToSSA)
    assert_unrolls(fn("""
        for i in pl.unroll(3):
            r0: pl.Scalar[pl.INDEX] = i * 16
            pl.tensor.write(x, [r0], 1.0)
        return x
    """), fn("""
        r0: pl.Scalar[pl.INDEX] = 0 * 16
        pl.tensor.write(x, [r0], 1.0)
        r0: pl.Scalar[pl.INDEX] = 1 * 16
        pl.tensor.write(x, [r0], 1.0)
        r0: pl.Scalar[pl.INDEX] = 2 * 16
        pl.tensor.write(x, [r0], 1.0)
        return x
    """))


def test_convert_to_ssa_names_the_copies_apart():
    from ptoc.passes.ConvertToSSA import ssa_violations

    text = fn("""
        for i in pl.unroll(2):
            r0: pl.Scalar[pl.INDEX] = i * 16
            t = pl.tensor.read(x, [r0])
            pl.tensor.write(x, [r0 + 32], t)
        return x
    """)
    prog = parse_program(text, "k.ir", ctx=CTX)
    assert ssa_violations(prog) == []
    assert ssa_violations(UnrollLoops().run(prog, CTX)) != []
    low = run_pipeline(prog, CTX, passes=[UnrollLoops, ConvertToSSA])
    assert ssa_violations(low) == []
    # four distinct names for the two copies' r0 and t, each assigned once
    names = [s.target.name for s in low.functions[0].body if hasattr(s, "target")]
    assert len(names) == 4 and len(set(names)) == 4


def test_the_whole_pipeline_takes_a_program_written_in_single_assignment_with_an_unroll_loop():
    # the input has the `ssa` property, which UnrollLoops' copies lose: the checks after it must not
    # ask for single assignment, and ConvertToSSA must run (not be skipped as already satisfied)
    text = fn("""
        for i in pl.unroll(2):
            r0: pl.Scalar[pl.INDEX] = i * 16
            t = pl.tensor.read(x, [r0])
            pl.tensor.write(x, [r0 + 32], t)
        return x
    """)
    from ptoc.passes.ConvertToSSA import ssa_violations

    low = run_pipeline(parse_program(text, "k.ir", ctx=CTX), CTX, stop_after="Simplify")
    assert ssa_violations(low) == []


def test_nested_unrolls_with_names_bound_in_the_body_compute_the_same():
    from ptoc.reference.interp import run_function

    text = fn("""
        for a in pl.unroll(2):
            for b in pl.unroll(3):
                k: pl.Scalar[pl.INDEX] = a * 3 + b
                s: pl.Scalar[pl.FP32] = pl.tensor.read(x, [k])
                pl.tensor.write(x, [k + 32], s * 2.0)
        return x
    """)
    prog = parse_program(text, "k.ir", ctx=CTX)
    out = UnrollLoops().run(prog, CTX)
    printed = print_program(out)
    assert printed.count("pl.tensor.write(") == 6 and "unroll" not in printed
    low = run_pipeline(prog, CTX, passes=[UnrollLoops, ConvertToSSA])
    x = np.arange(64, dtype=np.float32)
    got = np.asarray(run_function(low, "main", {"x": x.copy(), "n": 0})["return[0]"])
    want = x.copy()
    want[32:38] = x[0:6] * 2  # k = 3a + b runs over 0..5
    np.testing.assert_array_equal(got, want)


def test_a_body_name_read_after_the_loop_is_the_last_copys_value():
    from ptoc.reference.interp import run_function

    text = fn("""
        for i in pl.unroll(3):
            r = pl.adds(x, pl.cast(i, pl.FP32))
        return r
    """)
    prog = parse_program(text, "k.ir", ctx=CTX)
    low = run_pipeline(prog, CTX, passes=[UnrollLoops, ConvertToSSA])
    x = np.linspace(-2.0, 2.0, 64, dtype=np.float32)
    got = np.asarray(run_function(low, "main", {"x": x, "n": 0})["return[0]"])
    np.testing.assert_allclose(got, x + 2.0, rtol=1e-6)  # the last iteration, i = 2
