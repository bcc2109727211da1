"""CtrlFlowTransform: `continue` becomes an if/else around the rest of the body, `break` a flag that
ends a `while` loop. Each test gives the program as written and the structured program it must
become (written by hand), compared structurally; one test runs a lowered loop numerically."""

import textwrap

import numpy as np
import pytest

from ptoc.context import CompileContext
from ptoc.diagnostics import CompileError
from ptoc.frontend.parser import parse_program
from ptoc.ir.printer import print_program
from ptoc.passes.ConvertToSSA import ConvertToSSA
from ptoc.passes.CtrlFlowTransform import CtrlFlowTransform, unstructured
from ptoc.passes.manager import check_invariants, run_pipeline

CTX = CompileContext()
T = "pl.Tensor[[64], pl.FP32]"
PARAMS = f"x: {T}, n: pl.Scalar[pl.INDEX]"


def fn(body: str, params: str = PARAMS, kind: str = "InCore") -> str:
    body = textwrap.indent(textwrap.dedent(body).strip("\n"), " " * 8)
    return (f"@pl.program\nclass p:\n    @pl.function(type=pl.FunctionType.{kind})\n"
            f"    def main(self, {params}) -> {T}:\n{body}\n")


def lower(before: str):
    prog = parse_program(before, "before.ir", ctx=CTX)
    out = CtrlFlowTransform().run(prog, CTX)
    check_invariants(out, CTX, CtrlFlowTransform(), ssa=False)  # checks the `structured` property
    return prog, out


def assert_lowers(before: str, expected: str) -> None:
    _, out = lower(before)
    want = parse_program(expected, "expected.ir", ctx=CTX)
    assert out == want, f"got:\n{print_program(out)}\nexpected:\n{print_program(want)}"


def test_continue_moves_the_rest_of_the_body_into_the_else_branch():
    assert_lowers(fn("""
        for i in pl.range(n):
            if i > 5:
                continue
            x = pl.add(x, 1.0)
            x = pl.mul(x, 2.0)
        return x
    """), fn("""
        for i in pl.range(n):
            if i > 5:
                pass
            else:
                x = pl.add(x, 1.0)
                x = pl.mul(x, 2.0)
        return x
    """))


def test_continue_in_the_else_branch_moves_the_rest_into_the_then_branch():
    assert_lowers(fn("""
        for i in pl.range(n):
            if i > 5:
                x = pl.add(x, 1.0)
            else:
                x = pl.mul(x, 3.0)
                continue
            x = pl.mul(x, 2.0)
        return x
    """), fn("""
        for i in pl.range(n):
            if i > 5:
                x = pl.add(x, 1.0)
                x = pl.mul(x, 2.0)
            else:
                x = pl.mul(x, 3.0)
        return x
    """))


def test_break_in_a_range_loop_becomes_a_flagged_while_loop():
    assert_lowers(fn("""
        for i in pl.range(2, n, 3):
            if i > 5:
                break
            x = pl.add(x, 1.0)
        return x
    """), fn("""
        i: pl.Scalar[pl.INDEX] = 2
        brk: pl.Scalar[pl.BOOL] = False
        while i < n and not brk:
            if i > 5:
                brk: pl.Scalar[pl.BOOL] = True
                pl.yield_()
            else:
                x = pl.add(x, 1.0)
                pl.yield_()
            if not brk:
                i = i + 3
        return x
    """))


def test_a_negative_step_counts_down_and_an_unconditional_break_drops_the_rest():
    assert_lowers(fn("""
        for i in pl.range(10, 0, -2):
            x = pl.add(x, 1.0)
            break
            x = pl.mul(x, 2.0)
        return x
    """), fn("""
        i: pl.Scalar[pl.INDEX] = 10
        brk: pl.Scalar[pl.BOOL] = False
        while i > 0 and not brk:
            x = pl.add(x, 1.0)
            brk: pl.Scalar[pl.BOOL] = True
            if not brk:
                i = i + -2
        return x
    """))


def test_continue_is_lowered_before_break_in_the_same_loop():
    assert_lowers(fn("""
        for i in pl.range(n):
            if i > 10:
                break
            x = pl.add(x, 1.0)
            if i > 5:
                continue
            x = pl.mul(x, 2.0)
        return x
    """), fn("""
        i: pl.Scalar[pl.INDEX] = 0
        brk: pl.Scalar[pl.BOOL] = False
        while i < n and not brk:
            if i > 10:
                brk: pl.Scalar[pl.BOOL] = True
                pl.yield_()
            else:
                x = pl.add(x, 1.0)
                if i > 5:
                    pass
                else:
                    x = pl.mul(x, 2.0)
                pl.yield_()
            if not brk:
                i = i + 1
        return x
    """))


def test_break_in_a_while_loop_joins_its_condition_and_a_taken_name_is_not_reused():
    assert_lowers(fn("""
        brk = pl.add(x, 0.0)
        k: pl.Scalar[pl.INDEX] = 0
        while k < n:
            if k == 3:
                break
            k = k + 1
        return brk
    """), fn("""
        brk = pl.add(x, 0.0)
        k: pl.Scalar[pl.INDEX] = 0
        brk_1: pl.Scalar[pl.BOOL] = False
        while k < n and not brk_1:
            if k == 3:
                brk_1: pl.Scalar[pl.BOOL] = True
                pl.yield_()
            else:
                k = k + 1
                pl.yield_()
        return brk
    """))


def test_only_the_inner_loop_that_breaks_is_lowered():
    assert_lowers(fn("""
        for j in pl.range(n):
            for i in pl.range(4):
                if i == j:
                    break
                x = pl.add(x, 1.0)
            x = pl.mul(x, 2.0)
        return x
    """), fn("""
        for j in pl.range(n):
            i: pl.Scalar[pl.INDEX] = 0
            brk: pl.Scalar[pl.BOOL] = False
            while i < 4 and not brk:
                if i == j:
                    brk: pl.Scalar[pl.BOOL] = True
                    pl.yield_()
                else:
                    x = pl.add(x, 1.0)
                    pl.yield_()
                if not brk:
                    i = i + 1
            x = pl.mul(x, 2.0)
        return x
    """))


def test_orchestration_functions_and_loops_without_exits_are_unchanged():
    text = fn("""
        for i in pl.range(n):
            if i > 5:
                break
            x = pl.add(x, 1.0)
        return x
    """, kind="Orchestration")
    prog, out = lower(text)
    assert out is prog
    prog, out = lower(fn("""
        for i in pl.range(n):
            x = pl.add(x, 1.0)
        return x
    """))
    assert out is prog


def test_continue_in_a_loop_with_iter_args_yields_phis_and_the_exit_keeps_the_current_values():
    # the exit path yields y (already defined when it continues) for a, and the iter_arg b for b
    assert_lowers(fn("""
        for i, (a, b) in pl.range(10, init_values=(x, x)):
            y = pl.add(a, b)
            if i < 5:
                continue
            z = pl.mul(b, 2.0)
            a2, b2 = pl.yield_(y, z)
        return a2
    """), fn("""
        for i, (a, b) in pl.range(10, init_values=(x, x)):
            y = pl.add(a, b)
            if i < 5:
                a_phi, b_phi = pl.yield_(y, b)
            else:
                z = pl.mul(b, 2.0)
                a_phi, b_phi = pl.yield_(y, z)
            a2, b2 = pl.yield_(a_phi, b_phi)
        return a2
    """))


def test_break_after_continue_in_a_loop_with_iter_args_becomes_pl_while_with_nested_phis():
    assert_lowers(fn("""
        for i, (acc,) in pl.range(0, 10, 1, init_values=(x,)):
            if i < 3:
                continue
            y = pl.add(acc, acc)
            if i > 7:
                break
            out = pl.yield_(y)
        return out
    """), fn("""
        i: pl.Scalar[pl.INDEX] = 0
        brk: pl.Scalar[pl.BOOL] = False
        for (acc,) in pl.while_(init_values=(x,)):
            pl.cond(i < 10 and not brk)
            if i < 3:
                acc_phi = pl.yield_(acc)
            else:
                y = pl.add(acc, acc)
                if i > 7:
                    brk: pl.Scalar[pl.BOOL] = True
                    y_phi = pl.yield_(y)
                else:
                    y_phi = pl.yield_(y)
                acc_phi = pl.yield_(y_phi)
            if not brk:
                i = i + 1
            out = pl.yield_(acc_phi)
        return out
    """))


def test_break_in_a_parallel_loop_is_rejected():
    prog = parse_program(fn("""
        for i in pl.parallel(8):
            if i > 5:
                break
            x = pl.add(x, 1.0)
        return x
    """), "t.ir", ctx=CTX)
    with pytest.raises(CompileError) as e:
        CtrlFlowTransform().run(prog, CTX)
    d = e.value.diagnostics[0]
    assert (d.code, d.span.line) == ("PTOC-E0291", 5)  # the loop's line
    assert "pl.parallel" in d.message


def test_the_structured_property_names_what_is_left():
    prog = parse_program(fn("""
        for i in pl.range(n):
            if i > 5:
                continue
            x = pl.add(x, 1.0)
        return x
    """), "t.ir", ctx=CTX)
    assert unstructured(prog) == ["main: `continue` at line 7"]
    assert unstructured(CtrlFlowTransform().run(prog, CTX)) == []


def test_a_loop_with_iter_args_that_breaks_computes_what_python_computes():
    from ptoc.reference.interp import run_function

    text = """\
import pypto.language as pl

@pl.program
class p:
    @pl.function
    def main(self, n: pl.Scalar[pl.INDEX]) -> pl.Scalar[pl.INDEX]:
        s0: pl.Scalar[pl.INDEX] = 1
        for i, (s,) in pl.range(n, init_values=(s0,)):
            t: pl.Scalar[pl.INDEX] = s * 3 + i
            if t > 200:
                break
            s_next = pl.yield_(t)
        return s_next
"""

    def python(n: int) -> int:
        s = 1
        for i in range(n):
            t = s * 3 + i
            if t > 200:
                break  # the path that breaks yields t: defined before the break (PyPTO's rule)
            s = t
        else:
            return s
        return t

    prog = parse_program(text, "k.ir", ctx=CTX)
    low = run_pipeline(prog, CTX, passes=[CtrlFlowTransform, ConvertToSSA])
    for n in (0, 2, 4, 9):
        got = run_function(low, "main", {"n": n})
        assert int(np.asarray(got["return[0]"])) == python(n), n


def test_a_loop_that_breaks_computes_what_python_computes():
    # s doubles while adding i until i reaches the limit; the loop stops at the first i with i * i > 20
    from ptoc.reference.interp import run_function

    text = """\
import pypto.language as pl

@pl.program
class p:
    @pl.function
    def main(self, n: pl.Scalar[pl.INDEX]) -> pl.Scalar[pl.INDEX]:
        s: pl.Scalar[pl.INDEX] = 1
        for i in pl.range(n):
            if i * i > 20:
                break
            if i % 2 == 1:
                continue
            s = s * 2 + i
        return s
"""

    def python(n: int) -> int:
        s = 1
        for i in range(n):
            if i * i > 20:
                break
            if i % 2 == 1:
                continue
            s = s * 2 + i
        return s

    prog = parse_program(text, "k.ir", ctx=CTX)
    low = run_pipeline(prog, CTX, passes=[CtrlFlowTransform, ConvertToSSA])
    for n in (0, 3, 4, 10):
        got = run_function(low, "main", {"n": n})
        assert int(np.asarray(got["return[0]"])) == python(n), n


def test_a_name_assigned_in_the_branch_that_does_not_exit_is_visible_after_the_if():
    from ptoc.driver import check_source

    text = fn("""
        for i in pl.range(n):
            if i < 7:
                y = pl.add(x, 1.0)
            else:
                continue
            x = pl.mul(y, 2.0)
        return x
    """)
    prog = check_source(text, "k.ir", CTX)  # accepted as written; lowered, then made single-assignment
    loop = prog.function("main").body[0]
    branch = loop.body[0]
    assert [type(s).__name__ for s in branch.then_body] == ["AssignStmt", "AssignStmt", "YieldStmt"]
    assert [type(s).__name__ for s in branch.else_body] == ["YieldStmt"]


def test_break_and_continue_print_as_written_and_parse_back():
    text = "# pypto.program: p\nimport pypto.language as pl\n\n" + fn("""
        for i in pl.range(n):
            if i > 5:
                break
            if i == 2:
                continue
            x = pl.add(x, 1.0)
        return x
    """)
    assert print_program(parse_program(text, "k.ir", ctx=CTX)) == text


def test_a_break_before_the_value_of_a_continue_if_exists_yields_the_iter_arg():
    # continue is lowered first: its if yields y from the else branch; the break inside that branch
    # comes before y is computed, so its path yields the value the iteration started with
    assert_lowers(fn("""
        for i, (acc,) in pl.range(0, 8, 1, init_values=(x,)):
            if i < 2:
                continue
            if i > 5:
                break
            y = pl.add(acc, acc)
            out = pl.yield_(y)
        return out
    """), fn("""
        i: pl.Scalar[pl.INDEX] = 0
        brk: pl.Scalar[pl.BOOL] = False
        for (acc,) in pl.while_(init_values=(x,)):
            pl.cond(i < 8 and not brk)
            if i < 2:
                acc_phi = pl.yield_(acc)
            else:
                if i > 5:
                    brk: pl.Scalar[pl.BOOL] = True
                    y_phi = pl.yield_(acc)
                else:
                    y = pl.add(acc, acc)
                    y_phi = pl.yield_(y)
                acc_phi = pl.yield_(y_phi)
            if not brk:
                i = i + 1
            out = pl.yield_(acc_phi)
        return out
    """))


def test_a_loop_with_continue_then_break_before_the_value_computes_what_python_computes():
    from ptoc.reference.interp import run_function

    text = """\
import pypto.language as pl

@pl.program
class p:
    @pl.function
    def main(self, n: pl.Scalar[pl.INDEX]) -> pl.Scalar[pl.INDEX]:
        s0: pl.Scalar[pl.INDEX] = 1
        for i, (s,) in pl.range(n, init_values=(s0,)):
            if i < 2:
                continue
            if s > 40:
                break
            t: pl.Scalar[pl.INDEX] = s * 2 + i
            s_next = pl.yield_(t)
        return s_next
"""

    def python(n: int) -> int:
        s = 1
        for i in range(n):
            if i < 2:
                continue
            if s > 40:
                break
            s = s * 2 + i
        return s

    prog = parse_program(text, "k.ir", ctx=CTX)
    low = run_pipeline(prog, CTX, passes=[CtrlFlowTransform, ConvertToSSA])
    for n in (0, 1, 3, 5, 8, 12):
        got = run_function(low, "main", {"n": n})
        assert int(np.asarray(got["return[0]"])) == python(n), n
