"""A whole program whose orchestration passes an NZ weight to a kernel: after BlockNzTensorViews the kernel's
parameter is the rank-5 blocked view `[1, C/c0, R/16, 16, c0]` while the orchestration keeps the logical
rank-2 tensor, so the reference must hand the kernel the same bytes through the blocked shape. Expected
values: numpy's exact integer product, scaled in float32 and rounded to BF16."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ptoc.context import CompileContext
from ptoc.driver import frontend, lower
from ptoc.reference.interp import run_function

ROOT = Path(__file__).resolve().parents[1]
PTOC = Path(sys.executable).with_name("ptoc")
MAIN = """
    @pl.function(type=pl.FunctionType.Orchestration)
    def main(self, x: pl.Tensor[[16, 256], pl.INT8], w: pl.Tensor[[256, 256], pl.INT8, pl.NZ], scale: pl.Tensor[[1, 256], pl.FP32], out: pl.Out[pl.Tensor[[16, 256], pl.BF16]]) -> pl.Tensor[[16, 256], pl.BF16]:
        r: pl.Tensor[[16, 256], pl.BF16] = self.quant_linear(x, w, scale, out)
        return r
"""


def whole_program() -> str:
    return (ROOT / "examples" / "quant_linear_nz.ir").read_text().rstrip("\n") + "\n" + MAIN


def test_whole_program_with_an_nz_weight_validates(tmp_path):
    src = tmp_path / "whole.ir"
    src.write_text(whole_program())
    r = subprocess.run([str(PTOC), "passes", str(src), "--validate"], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "every stage agrees with the front end" in r.stdout
    assert "window of 5 extents" not in r.stdout


@pytest.mark.parametrize("arch", ["a2a3", "a5"])
def test_lowered_whole_program_computes_the_scaled_product(arch):
    import ml_dtypes

    ctx = CompileContext(arch=arch)
    low = lower(frontend(whole_program(), "whole.ir", ctx), ctx).program
    rng = np.random.default_rng(11)
    x = rng.integers(-128, 128, size=(16, 256), dtype=np.int8)
    w = rng.integers(-128, 128, size=(256, 256), dtype=np.int8)
    scale = (rng.integers(1, 64, size=(1, 256)) / 4096).astype(np.float32)
    got = run_function(low, "main", {"x": x, "w": w, "scale": scale}, ctx)["out"]
    want = ((x.astype(np.int64) @ w.astype(np.int64)).astype(np.float32) * scale).astype(ml_dtypes.bfloat16)
    np.testing.assert_array_equal(np.asarray(got).astype(np.float32), want.astype(np.float32))
