"""tile.matmul_bias on the real toolchain: pto-isa's TMATMUL_BIAS needs a row-major single-row Bias tile
(cpu/TMatmul.hpp CheckBiasValid), so the kernel must assemble, compile and agree with the reference on both
targets. Skipped without the tools (see conftest.py)."""

import subprocess
import sys
from pathlib import Path

import pytest

PTOC = Path(sys.executable).with_name("ptoc")
KERNEL = """import pypto.language as pl

@pl.program
class p:
    @pl.function(type=pl.FunctionType.AIC)
    def k(self, a: pl.Tensor[[16, 32], pl.FP16], b: pl.Tensor[[32, 32], pl.FP16], bias: pl.Tensor[[1, 32], pl.FP32],
          out: pl.Out[pl.Tensor[[16, 32], pl.FP32]]) -> pl.Tensor[[16, 32], pl.FP32]:
        am: pl.Tile[[16, 32], pl.FP16, pl.Mem.Mat] = pl.tile.load(a, [0, 0], [16, 32], target_memory=pl.Mem.Mat)
        bm: pl.Tile[[32, 32], pl.FP16, pl.Mem.Mat] = pl.tile.load(b, [0, 0], [32, 32], target_memory=pl.Mem.Mat)
        cm: pl.Tile[[1, 32], pl.FP32, pl.Mem.Mat] = pl.tile.load(bias, [0, 0], [1, 32], target_memory=pl.Mem.Mat)
        al: pl.Tile[[16, 32], pl.FP16, pl.Mem.Left] = pl.tile.move(am, target_memory=pl.Mem.Left)
        br: pl.Tile[[32, 32], pl.FP16, pl.Mem.Right] = pl.tile.move(bm, target_memory=pl.Mem.Right)
        cb: pl.Tile[[1, 32], pl.FP32, pl.Mem.Bias] = pl.tile.move(cm, target_memory=pl.Mem.Bias)
        acc: pl.Tile[[16, 32], pl.FP32, pl.Mem.Acc] = pl.tile.matmul_bias(al, br, cb)
        o: pl.Tensor[[16, 32], pl.FP32] = pl.tile.store(acc, [0, 0], out)
        return o
"""


@pytest.mark.parametrize("arch", ["a2a3", "a5"])
def test_matmul_bias_runs_on_the_simulator(arch, tmp_path, sim_env):
    src = tmp_path / "k.ir"
    src.write_text(KERNEL)
    r = subprocess.run([str(PTOC), "passes", str(src), "--arch", arch, "--validate", "--sim"], capture_output=True,
                       text=True, env=sim_env, timeout=900, check=False)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "every stage agrees with the front end" in r.stdout
