"""LowerCompositeOps: tile.sin / tile.cos become range reduction, sign and polynomial in elementwise tile
ops. Before/Expected programs written by hand (the constants are the FP32 values the pass documents), the
numbers checked with the reference interpreter against numpy's sin / cos, and the user errors."""

import textwrap

import numpy as np
import pytest

from ptoc.context import CompileContext
from ptoc.diagnostics import CompileError
from ptoc.frontend.parser import parse_program
from ptoc.ir.printer import print_program
from ptoc.passes.LowerCompositeOps import LowerCompositeOps
from ptoc.passes.manager import run_pipeline

CTX = CompileContext()
V = "pl.Tile[[8, 32], pl.FP32, pl.Mem.Vec]"


def kernel(body: str, dtype: str = "pl.FP32") -> str:
    body = textwrap.indent(textwrap.dedent(body).strip("\n"), " " * 8)
    t = f"pl.Tensor[[8, 32], {dtype}]"
    return ("import pypto.language as pl\n\n@pl.program\nclass p:\n"
            "    @pl.function(type=pl.FunctionType.InCore)\n"
            f"    def k(self, x: {t}, out: pl.Out[{t}]) -> {t}:\n"
            f"        xt = pl.tile.load(x, [0, 0], [8, 32], target_memory=pl.Mem.Vec)\n{body}\n")


def lower(text: str):
    prog = parse_program(text, "before.ir", ctx=CTX)
    return prog, run_pipeline(prog, CTX, passes=[LowerCompositeOps])


SIN_EXPECTED = """
    y_pi_inv_x = pl.tile.muls(xt, 0.31830987334251404)
    y_k_i = pl.tile.cast(y_pi_inv_x, target_type=pl.INT32, mode="round")
    y_k_f = pl.tile.cast(y_k_i, target_type=pl.FP32, mode="none")
    y_k_pi_c0 = pl.tile.muls(y_k_f, 3.140625)
    y_t0 = pl.tile.sub(xt, y_k_pi_c0)
    y_k_pi_c1 = pl.tile.muls(y_k_f, 0.0009670257568359375)
    y_t1 = pl.tile.sub(y_t0, y_k_pi_c1)
    y_k_pi_c2 = pl.tile.muls(y_k_f, 6.2771141529083252e-07)
    y_t2 = pl.tile.sub(y_t1, y_k_pi_c2)
    y_k_pi_c3 = pl.tile.muls(y_k_f, 1.2164491636212915e-10)
    y_t3 = pl.tile.sub(y_t2, y_k_pi_c3)
    y_k_pi_c4 = pl.tile.muls(y_k_f, -1.0290622927356871e-13)
    y_t4 = pl.tile.sub(y_t3, y_k_pi_c4)
    y_half_k = pl.tile.muls(y_k_f, 0.5)
    y_floor_hk_i = pl.tile.cast(y_half_k, target_type=pl.INT32, mode="floor")
    y_floor_hk_f = pl.tile.cast(y_floor_hk_i, target_type=pl.FP32, mode="none")
    y_floor_x4 = pl.tile.muls(y_floor_hk_f, 4.0)
    y_neg2_k = pl.tile.muls(y_k_f, -2.0)
    y_sign_pre = pl.tile.add(y_floor_x4, y_neg2_k)
    y_sign = pl.tile.adds(y_sign_pre, 1.0)
    y_t2sq = pl.tile.mul(y_t4, y_t4)
    y_p_r0 = pl.tile.muls(y_t2sq, 2.6049265215988271e-06)
    y_p_r1 = pl.tile.adds(y_p_r0, -0.00019808944489341229)
    y_p_t2_r1 = pl.tile.mul(y_p_r1, y_t2sq)
    y_p_r2 = pl.tile.adds(y_p_t2_r1, 0.0083330497145652771)
    y_p_t2_r2 = pl.tile.mul(y_p_r2, y_t2sq)
    y_p_r3 = pl.tile.adds(y_p_t2_r2, -0.16666658222675323)
    y_p_t2_r3 = pl.tile.mul(y_p_r3, y_t2sq)
    y_p_one = pl.tile.adds(y_p_t2_r3, 1.0)
    y_t_p = pl.tile.mul(y_t4, y_p_one)
    y = pl.tile.mul(y_sign, y_t_p)
"""


def _strip_annotations(prog):
    import dataclasses

    from ptoc.ir.nodes import AssignStmt
    from ptoc.ir.visitor import Mutator

    class Strip(Mutator):
        def mutate_AssignStmt(self, s: AssignStmt):
            return dataclasses.replace(s, annotation=None)

    return Strip().mutate(prog)


def test_sin_becomes_the_reduction_the_sign_and_the_polynomial():
    _, out = lower(kernel("""
        y = pl.tile.sin(xt)
        r = pl.tile.store(y, [0, 0], out)
        return r
    """))
    body = textwrap.dedent(SIN_EXPECTED).strip("\n") + "\nr = pl.tile.store(y, [0, 0], out)\nreturn r\n"
    want = parse_program(kernel(body), "expected.ir", ctx=CTX)
    assert _strip_annotations(out) == _strip_annotations(want), print_program(out)


def test_cos_adds_half_pi_inside_the_reduction_and_its_rounding_error_at_the_end():
    _, out = lower(kernel("""
        y = pl.tile.cos(xt)
        r = pl.tile.store(y, [0, 0], out)
        return r
    """))
    text = print_program(out)
    lines = [ln.split(":", 1)[0].strip() + " = " + ln.split("=", 1)[1].strip() for ln in text.splitlines()
             if ln.strip().startswith("y")]
    assert lines[:3] == [
        "y_pi_inv_x = pl.tile.muls(xt, 0.31830987334251404)",
        "y_k_pre = pl.tile.adds(y_pi_inv_x, 0.5)",
        'y_k_i = pl.tile.cast(y_k_pre, target_type=pl.INT32, mode="rint")',
    ]
    assert "y_t1h = pl.tile.adds(y_t1, 1.5707963705062866)" in lines
    assert lines.index("y_t1h = pl.tile.adds(y_t1, 1.5707963705062866)") == lines.index(
        "y_t1 = pl.tile.sub(y_t0, y_k_pi_c1)") + 1
    assert "y_t2 = pl.tile.sub(y_t1h, y_k_pi_c2)" in lines
    assert "y_t4t = pl.tile.adds(y_t4, -4.371138828673793e-08)" in lines
    assert "y_t2sq = pl.tile.mul(y_t4t, y_t4t)" in lines
    assert lines[-1] == "y = pl.tile.mul(y_sign, y_t_p)"


@pytest.mark.parametrize("op,ref", [("sin", np.sin), ("cos", np.cos)])
def test_the_lowered_program_computes_sin_and_cos(op, ref):
    from ptoc.reference.interp import run_function

    prog, out = lower(kernel(f"""
        y = pl.tile.{op}(xt)
        r = pl.tile.store(y, [0, 0], out)
        return r
    """))
    assert f"tile.{op}(" not in print_program(out)
    x = np.linspace(-40.0, 40.0, 256, dtype=np.float32).reshape(8, 32)
    got = np.asarray(run_function(out, "k", {"x": x, "out": np.zeros((8, 32), np.float32)})["out"])
    # |error| of the FP32 reduction and degree-9 polynomial: a few units in the last place of 1
    np.testing.assert_allclose(got, ref(x.astype(np.float64)), atol=2e-6, rtol=0)


def test_a_program_without_sin_or_cos_is_returned_unchanged():
    prog, out = lower(kernel("""
        y = pl.tile.exp(xt)
        r = pl.tile.store(y, [0, 0], out)
        return r
    """))
    assert out is prog


def test_sin_inside_a_loop_is_lowered_in_place():
    _, out = lower(kernel("""
        for i, (acc,) in pl.range(2, init_values=(xt,)):
            y = pl.tile.sin(acc)
            acc_next = pl.yield_(y)
        r = pl.tile.store(acc_next, [0, 0], out)
        return r
    """))
    text = print_program(out)
    assert "tile.sin" not in text and "y_pi_inv_x" in text and "pl.tile.muls(acc, 0.31830987334251404)" in text


def test_sin_of_an_fp16_tile_is_a_user_error():
    with pytest.raises(CompileError) as e:
        lower(kernel("""
            y = pl.tile.sin(xt)
            r = pl.tile.store(y, [0, 0], out)
            return r
        """, dtype="pl.FP16"))
    (d,) = e.value.diagnostics
    assert d.code == "PTOC-E0741" and "FP16" in d.message and d.span.line == 8
