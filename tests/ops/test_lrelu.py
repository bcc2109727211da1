"""tile.lrelu, declared once in ptoc/ops/elementwise.py: type rule, `.pto` form, reference semantics, and
the `.pto` executor's own reading of pto.tlrelu.

Expected values come from the definitions, not from ptoc: PyPTO's `tile.lrelu(tile, slope)` signature,
PTOAS's TLReluOp (`pto.tlrelu ins(%src, %slope : T, f32) outs(%dst : T)`, f16/f32 Vec tiles) and pto-isa's
TLRELU (`dst = src > 0 ? src : src * slope`), computed here with numpy.
"""

import numpy as np
import pytest
from optest import codes, diagnostics, types

from ptoc.context import CompileContext
from ptoc.diagnostics import CompileError
from ptoc.driver import compile_program, frontend
from ptoc.reference.interp import run_function
from ptoc.reference.pto_exec import PtoExecError, run_pto_logical

CTX = CompileContext(arch="a2a3", ptoas_version="v0.61")


def program(dtype: str = "FP32", slope: str = "0.25", extra_param: str = "") -> str:
    return f"""import pypto.language as pl

@pl.program
class p:
    @pl.function(type=pl.FunctionType.InCore)
    def k(self, x: pl.Tensor[[16, 64], pl.{dtype}],{extra_param}
          out: pl.Out[pl.Tensor[[16, 64], pl.{dtype}]]) -> pl.Tensor[[16, 64], pl.{dtype}]:
        t: pl.Tile[[16, 64], pl.{dtype}] = pl.tile.load(x, [0, 0], [16, 64])
        r: pl.Tile[[16, 64], pl.{dtype}] = pl.tile.lrelu(t, {slope})
        out = pl.tile.store(r, [0, 0], out)
        return out
"""


def leaky(x: np.ndarray, slope: float) -> np.ndarray:
    """pto-isa TLRELU on float32 data with an f32 slope (one f32 multiply)."""
    x = x.astype(np.float32)
    return np.where(x > 0, x, x * np.float32(slope)).astype(np.float32)


def data(seed: int = 0, dtype=np.float32) -> np.ndarray:
    x = np.random.default_rng(seed).standard_normal((16, 64)).astype(dtype)
    x[0, :4] = [0.0, -0.0, np.inf, -np.inf]
    return x


# --------------------------------------------------------------------------------------------------
# type rule
# --------------------------------------------------------------------------------------------------

TILE = "a: pl.Tensor[[16, 64], pl.{}]"


@pytest.mark.parametrize("dt", ["FP32", "FP16"])
def test_type_rule_keeps_shape_dtype_and_memory(dt):
    t = types(TILE.format(dt), "t = pl.tile.load(a, [0, 0], [16, 64])\nr = pl.tile.lrelu(t, 0.1)\n"
              "s = pl.lrelu(t, 2)")
    assert t["r"] == t["s"] == f"pl.Tile[[16, 64], pl.{dt}, pl.Mem.Vec]"


def test_type_rule_rejects_integer_tiles():
    d = diagnostics(TILE.format("INT32"), "t = pl.tile.load(a, [0, 0], [16, 64])\nr = pl.tile.lrelu(t, 1)")
    assert d[0].code == "PTOC-E0202" and "FP16 and FP32" in d[0].message


def test_type_rule_rejects_a_tile_slope_and_a_missing_slope():
    body = "t = pl.tile.load(a, [0, 0], [16, 64])\nr = pl.tile.lrelu(t, t)"
    d = diagnostics(TILE.format("FP32"), body)
    assert d[0].code == "PTOC-E0202" and "slope must be a scalar" in d[0].message
    assert codes(TILE.format("FP32"), "t = pl.tile.load(a, [0, 0], [16, 64])\nr = pl.tile.lrelu(t)") == \
        [("PTOC-E0201", None)]


def test_type_rule_rejects_non_vec_tiles():
    body = "t = pl.tile.load(a, [0, 0], [16, 64], target_memory=pl.Mem.Mat)\nr = pl.tile.lrelu(t, 0.5)"
    d = diagnostics(TILE.format("FP16"), body)
    assert d[0].code == "PTOC-E0202" and "Vec tiles" in d[0].message


# --------------------------------------------------------------------------------------------------
# codegen
# --------------------------------------------------------------------------------------------------

def emitted(text: str) -> str:
    return compile_program(frontend(text, "t.ir", CTX), CTX, "t.ir", header=False).pto


def test_codegen_spells_tlrelu_with_an_f32_slope():
    tile = ("!pto.tile_buf<loc=vec, dtype=f32, rows=16, cols=64, v_row=16, v_col=64, blayout=row_major, "
            "slayout=none_box, fractal=512, pad=0>")
    pto = emitted(program())
    assert "%cst = arith.constant 2.50000000000000000e-01 : f32" in pto
    # r is computed over t (read there for the last time; MemoryReuse): the same handle
    assert f"pto.tlrelu ins(%t, %cst : {tile}, f32) outs(%t : {tile})" in pto


def test_codegen_fp16_tile_still_takes_an_f32_slope():
    pto = emitted(program("FP16", "1"))
    line = next(x for x in pto.splitlines() if "pto.tlrelu" in x)
    assert "dtype=f16" in line and ", f32) outs(" in line
    assert "arith.constant 1.00000000000000000e+00 : f32" in pto


def test_codegen_rejects_a_slope_that_is_not_f32():
    text = program("FP32", "s", " s: pl.Scalar[pl.FP16],")
    with pytest.raises(CompileError) as e:
        emitted(text)
    d = e.value.diagnostics[0]
    assert d.code == "PTOC-E0400" and "f16" in d.message and "pl.cast" in d.hint


# --------------------------------------------------------------------------------------------------
# numeric reference (interpreter) and the .pto executor
# --------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("slope", [0.25, 0.1, 3.0])
def test_interpreter_computes_leaky_relu(slope):
    x = data(1)
    out = run_function(frontend(program(slope=repr(slope)), "t.ir", CTX), "k", {"x": x}, CTX)
    np.testing.assert_array_equal(out["out"], leaky(x, slope))


def test_interpreter_fp16_with_an_exact_slope():
    x = data(2, np.float16)
    out = run_function(frontend(program("FP16", "0.5"), "t.ir", CTX), "k", {"x": x}, CTX)
    want = np.where(x > 0, x, x * np.float16(0.5)).astype(np.float16)
    np.testing.assert_array_equal(out["out"], want)


@pytest.mark.parametrize("slope", [0.25, 0.1, 3.0])
def test_pto_executor_computes_leaky_relu(slope):
    x = data(3)
    pto = emitted(program(slope=repr(slope)))
    out = run_pto_logical(pto, "k", {0: (x, "ND"), 1: (np.zeros((16, 64), np.float32), "ND")})
    np.testing.assert_array_equal(out[1], leaky(x, slope))


def test_pto_executor_rejects_a_non_f32_slope():
    pto = emitted(program())
    bad = pto.replace("%cst = arith.constant 2.50000000000000000e-01 : f32",
                      "%cst = arith.constant 2.50000000000000000e-01 : f16")
    line = next(x for x in bad.splitlines() if "pto.tlrelu" in x)
    bad = bad.replace(line, line.replace(", f32) outs(", ", f16) outs("))
    with pytest.raises(PtoExecError, match="f32"):
        run_pto_logical(bad, "k", {0: (data(), "ND"), 1: (np.zeros((16, 64), np.float32), "ND")})
