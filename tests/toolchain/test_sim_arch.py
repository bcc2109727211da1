"""The simulator runs an a5 kernel on pto-isa's A5 memory model: the CPU simulator sizes L0C (Acc) at
128 KiB for A2/A3 and 256 KiB for A5 (cpu/NPUMemoryModel.hpp) and takes the A5 sizes only after
`pto::NPU_MEMORY_INIT(pto::NPUArch::A5)`. A 256 x 192 FP32 accumulator (192 KiB) fits A5's L0C only.
Skipped without the tools (see conftest.py)."""

import subprocess
import sys
from pathlib import Path

import pytest

from ptoc.reference import sim

PTOC = Path(sys.executable).with_name("ptoc")
BIG_ACC = """import pypto.language as pl

@pl.program
class p:
    @pl.function(type=pl.FunctionType.AIC)
    def k(self, a: pl.Tensor[[256, 32], pl.FP16], b: pl.Tensor[[32, 192], pl.FP16],
          out: pl.Out[pl.Tensor[[256, 192], pl.FP32]]) -> pl.Tensor[[256, 192], pl.FP32]:
        am: pl.Tile[[256, 32], pl.FP16, pl.Mem.Mat] = pl.tile.load(a, [0, 0], [256, 32], target_memory=pl.Mem.Mat)
        bm: pl.Tile[[32, 192], pl.FP16, pl.Mem.Mat] = pl.tile.load(b, [0, 0], [32, 192], target_memory=pl.Mem.Mat)
        al: pl.Tile[[256, 32], pl.FP16, pl.Mem.Left] = pl.tile.move(am, target_memory=pl.Mem.Left)
        br: pl.Tile[[32, 192], pl.FP16, pl.Mem.Right] = pl.tile.move(bm, target_memory=pl.Mem.Right)
        acc: pl.Tile[[256, 192], pl.FP32, pl.Mem.Acc] = pl.tile.matmul(al, br)
        o: pl.Tensor[[256, 192], pl.FP32] = pl.tile.store(acc, [0, 0], out)
        return o
"""


@pytest.mark.parametrize(("arch", "model"), [("a2a3", "A2A3"), ("a5", "A5")])
def test_harness_selects_the_memory_model_of_the_target(arch, model):
    src = sim.generate_harness("void k(float* x) {}", "k", [sim.KernelParam("float", "x", True)], arch)
    assert f"pto::NPU_MEMORY_INIT(pto::NPUArch::{model});" in src


def test_a5_kernel_with_a_192_kib_accumulator_runs_on_the_simulator(tmp_path, sim_env):
    src = tmp_path / "k.ir"
    src.write_text(BIG_ACC)
    r = subprocess.run([str(PTOC), "passes", str(src), "--arch", "a5", "--validate", "--sim"], capture_output=True,
                       text=True, env=sim_env, timeout=900, check=False)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "every stage agrees with the front end" in r.stdout
