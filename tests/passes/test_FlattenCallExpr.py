"""FlattenCallExpr: every call nested in another expression moves into an assignment of its own, right
before the statement that used it. Each test gives a program and the program it must become (written by
hand), compared structurally; the property check and a numeric run close the file."""

import textwrap

import numpy as np

from ptoc.context import CompileContext
from ptoc.frontend.parser import parse_program
from ptoc.ir.printer import print_program
from ptoc.passes.FlattenCallExpr import FlattenCallExpr, nested_calls
from ptoc.passes.manager import check_invariants

CTX = CompileContext()
T = "pl.Tensor[[64], pl.FP32]"


def fn(body: str, params: str = f"x: {T}, y: {T}") -> str:
    body = textwrap.indent(textwrap.dedent(body).strip("\n"), " " * 8)
    return (f"import pypto.language as pl\n\n@pl.program\nclass p:\n    @pl.function\n"
            f"    def main(self, {params}) -> {T}:\n{body}\n")


def flatten(prog):
    out = FlattenCallExpr().run(prog, CTX)
    check_invariants(out, CTX, FlattenCallExpr())  # checks the flat_calls property
    return out


def assert_flattens(before: str, expected: str) -> None:
    out = flatten(parse_program(before, "before.ir", ctx=CTX))
    want = parse_program(expected, "expected.ir", ctx=CTX)
    assert out == want, f"got:\n{print_program(out)}\nexpected:\n{print_program(want)}"


def test_nested_arguments_move_out_innermost_first_and_left_to_right():
    assert_flattens(fn("""
        r: pl.Tensor[[64], pl.FP32] = pl.add(pl.mul(pl.exp(x), 2.0), pl.mul(y, 3.0))
        return r
    """), fn("""
        t__tmp_v0 = pl.exp(x)
        t__tmp_v1 = pl.mul(t__tmp_v0, 2.0)
        t__tmp_v2 = pl.mul(y, 3.0)
        r: pl.Tensor[[64], pl.FP32] = pl.add(t__tmp_v1, t__tmp_v2)
        return r
    """))


def test_a_returned_call_gets_a_name_and_a_statement_call_stays():
    assert_flattens(fn("""
        pl.tensor.write(y, [0], pl.tensor.read(x, [1]))
        return pl.sub(x, y)
    """), fn("""
        t__tmp_v0 = pl.tensor.read(x, [1])
        pl.tensor.write(y, [0], t__tmp_v0)
        t__tmp_v1 = pl.sub(x, y)
        return t__tmp_v1
    """))


def test_calls_in_conditions_loop_bounds_and_yields_go_before_their_statement():
    params = f"x: {T}, n: pl.Scalar[pl.INDEX]"
    assert_flattens(fn("""
        for i, (acc,) in pl.range(pl.tile.get_block_idx(), n, init_values=(x,)):
            if pl.tile.get_block_num() > i:
                r: pl.Tensor[[64], pl.FP32] = pl.yield_(pl.add(acc, 1.0))
            else:
                r: pl.Tensor[[64], pl.FP32] = pl.yield_(acc)
            out: pl.Tensor[[64], pl.FP32] = pl.yield_(pl.mul(r, 2.0))
        return out
    """, params), fn("""
        t__tmp_v0 = pl.tile.get_block_idx()
        for i, (acc,) in pl.range(t__tmp_v0, n, init_values=(x,)):
            t__tmp_v1 = pl.tile.get_block_num()
            if t__tmp_v1 > i:
                t__tmp_v2 = pl.add(acc, 1.0)
                r: pl.Tensor[[64], pl.FP32] = pl.yield_(t__tmp_v2)
            else:
                r: pl.Tensor[[64], pl.FP32] = pl.yield_(acc)
            t__tmp_v3 = pl.mul(r, 2.0)
            out: pl.Tensor[[64], pl.FP32] = pl.yield_(t__tmp_v3)
        return out
    """, params))


def test_scalar_arithmetic_operands_and_scope_bodies_are_flattened_too():
    params = f"x: {T}"
    assert_flattens(fn("""
        with pl.at(level=pl.Level.CORE_GROUP):
            s: pl.Scalar[pl.FP32] = pl.tensor.read(x, [0]) * 2.0 + pl.tensor.read(x, [1])
            z = pl.tensor.muls(x, s)
        return z
    """, params), fn("""
        with pl.at(level=pl.Level.CORE_GROUP):
            t__tmp_v0 = pl.tensor.read(x, [0])
            t__tmp_v1 = pl.tensor.read(x, [1])
            s: pl.Scalar[pl.FP32] = t__tmp_v0 * 2.0 + t__tmp_v1
            z = pl.tensor.muls(x, s)
        return z
    """, params))


def test_fresh_names_avoid_names_the_function_already_uses():
    assert_flattens(fn("""
        t__tmp_v0: pl.Tensor[[64], pl.FP32] = pl.add(x, y)
        r: pl.Tensor[[64], pl.FP32] = pl.exp(pl.neg(t__tmp_v0))
        return r
    """), fn("""
        t__tmp_v0: pl.Tensor[[64], pl.FP32] = pl.add(x, y)
        t__tmp_v1 = pl.neg(t__tmp_v0)
        r: pl.Tensor[[64], pl.FP32] = pl.exp(t__tmp_v1)
        return r
    """))


def test_flat_code_is_returned_as_it_is_and_nested_calls_are_reported_by_the_property_check():
    flat = parse_program(fn("""
        a: pl.Tensor[[64], pl.FP32] = pl.add(x, y)
        return a
    """), "t.ir", ctx=CTX)
    assert FlattenCallExpr().run(flat, CTX) is flat
    assert nested_calls(flat) == []
    nested = parse_program(fn("""
        a: pl.Tensor[[64], pl.FP32] = pl.add(pl.exp(x), y)
        return a
    """), "t.ir", ctx=CTX)
    assert nested_calls(nested) == ["main: pl.exp nested at line 7"]


def test_the_property_check_looks_into_loops_and_branches_and_reports_in_source_order():
    nested = parse_program(fn("""
        for i in pl.range(4):
            a: pl.Tensor[[64], pl.FP32] = pl.add(pl.exp(x), y)
            if i == 0:
                b: pl.Tensor[[64], pl.FP32] = pl.add(pl.mul(x, 2.0), y)
            else:
                c: pl.Tensor[[64], pl.FP32] = pl.add(pl.sub(y, x), x)
        return pl.add(pl.exp(x), y)
    """), "t.ir", ctx=CTX)
    assert nested_calls(nested) == [
        "main: pl.exp nested at line 8",
        "main: pl.mul nested at line 10",
        "main: pl.sub nested at line 12",
        "main: pl.add nested at line 13",
        "main: pl.exp nested at line 13",
    ]


def test_the_flattened_program_computes_what_the_nested_one_computes():
    from ptoc.reference.interp import run_function

    prog = parse_program(fn("""
        r: pl.Tensor[[64], pl.FP32] = pl.add(pl.mul(x, 2.0), pl.sub(y, x))
        return pl.mul(r, r)
    """), "k.ir", ctx=CTX)
    out = flatten(prog)
    x = np.linspace(-1, 1, 64, dtype=np.float32)
    y = np.linspace(3, 0, 64, dtype=np.float32)
    want = (2 * x + (y - x)) ** 2  # computed here: (2x + (y - x))^2
    for p in (prog, out):
        got = np.asarray(run_function(p, "main", {"x": x, "y": y})["return[0]"])
        np.testing.assert_allclose(got, want, rtol=1e-6)
