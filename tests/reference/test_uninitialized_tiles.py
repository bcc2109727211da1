"""pl.tile.create allocates and writes nothing (PyPTO's PTO codegen of tile.create emits no instruction), so
a kernel that accumulates into a created Acc tile reads undefined memory on the hardware. The reference
reports it (PTOC-E0672) instead of computing with zeros; a created tile used only as a destination or
scratch operand, or an accumulator started with pl.tile.full, still runs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ptoc.context import CompileContext
from ptoc.frontend.parser import parse_program
from ptoc.reference.interp import run_function
from ptoc.reference.values import ReferenceFault

ROOT = Path(__file__).resolve().parents[2]
PTOC = Path(sys.executable).with_name("ptoc")
KERNEL = """import pypto.language as pl

@pl.program
class p:
    @pl.function(type=pl.FunctionType.AIC)
    def k(self, a: pl.Tensor[[16, 32], pl.FP16], b: pl.Tensor[[32, 32], pl.FP16],
          out: pl.Out[pl.Tensor[[16, 32], pl.FP32]]) -> pl.Tensor[[16, 32], pl.FP32]:
        am: pl.Tile[[16, 32], pl.FP16, pl.Mem.Mat] = pl.tile.load(a, [0, 0], [16, 32], target_memory=pl.Mem.Mat)
        bm: pl.Tile[[32, 32], pl.FP16, pl.Mem.Mat] = pl.tile.load(b, [0, 0], [32, 32], target_memory=pl.Mem.Mat)
        al: pl.Tile[[16, 32], pl.FP16, pl.Mem.Left] = pl.tile.move(am, target_memory=pl.Mem.Left)
        br: pl.Tile[[32, 32], pl.FP16, pl.Mem.Right] = pl.tile.move(bm, target_memory=pl.Mem.Right)
        acc0: pl.Tile[[16, 32], pl.FP32, pl.Mem.Acc] = INIT
        acc: pl.Tile[[16, 32], pl.FP32, pl.Mem.Acc] = pl.tile.matmul_acc(acc0, al, br)
        o: pl.Tensor[[16, 32], pl.FP32] = pl.tile.store(acc, [0, 0], out)
        return o
"""
CREATE = "pl.tile.create([16, 32], dtype=pl.FP32, target_memory=pl.Mem.Acc)"
FULL = "pl.tile.full([16, 32], dtype=pl.FP32, value=0.0, target_memory=pl.Mem.Acc)"


def _run(init: str):
    ctx = CompileContext(arch="a2a3")
    prog = parse_program(KERNEL.replace("INIT", init), "k.ir", ctx=ctx)
    rng = np.random.default_rng(1)
    a = rng.integers(-4, 4, size=(16, 32)).astype(np.float16)
    b = rng.integers(-4, 4, size=(32, 32)).astype(np.float16)
    return a, b, lambda: run_function(prog, "k", {"a": a, "b": b}, ctx)


def test_accumulating_into_a_created_tile_is_reported():
    _, _, run = _run(CREATE)
    with pytest.raises(ReferenceFault) as e:
        run()
    assert [d.code for d in e.value.diagnostics] == ["PTOC-E0672"]
    assert "tile.create" in e.value.diagnostics[0].message


def test_accumulating_into_a_zero_filled_tile_computes_the_product():
    a, b, run = _run(FULL)
    got = run()["out"]
    np.testing.assert_array_equal(got, a.astype(np.float32) @ b.astype(np.float32))


def test_validating_the_ragged_projection_dump_names_the_uninitialized_accumulator():
    src = ROOT / "tests" / "corpus" / "raw" / "29_ragged_proj_dump.ir"
    r = subprocess.run([str(PTOC), "passes", str(src), "--validate", "--dim", "T_DYN=64"], capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "PTOC-E0672" in r.stdout + r.stderr and "matmul_acc" in r.stdout + r.stderr
    assert "nan" not in r.stdout
