"""A kernel over rank-1 tensors on the real toolchain: PTOAS assembles its one-axis windows and pto-isa's CPU
simulator computes what the reference computes. Skipped without the tools (see conftest.py)."""

import subprocess
import sys
from pathlib import Path

PTOC = Path(sys.executable).with_name("ptoc")

RANK1 = """import pypto.language as pl

@pl.program
class P:
    @pl.function(type=pl.FunctionType.InCore)
    def k(self, x: pl.Tensor[[512], pl.FP32], y: pl.Tensor[[512], pl.FP32],
          out: pl.Out[pl.Tensor[[512], pl.FP32]]) -> pl.Tensor[[512], pl.FP32]:
        a: pl.Tile[[256], pl.FP32] = pl.tile.load(x, [256], [256])
        b: pl.Tile[[256], pl.FP32] = pl.tile.load(y, [0], [256])
        c: pl.Tile[[256], pl.FP32] = pl.tile.sub(a, b)
        out = pl.tile.store(c, [64], out)
        return out
"""


def test_rank1_kernel_assembles_and_matches_on_the_simulator(tmp_path, sim_env):
    src = tmp_path / "k.ir"
    src.write_text(RANK1)
    r = subprocess.run([str(PTOC), "compile", str(src), "-o", str(tmp_path / "k.pto"), "--assemble"],
                       capture_output=True, text=True, env=sim_env, timeout=600, check=False)
    assert r.returncode == 0, r.stderr
    r = subprocess.run([str(PTOC), "passes", str(src), "--validate", "--sim"], capture_output=True, text=True,
                       env=sim_env, timeout=900, check=False)
    assert r.returncode == 0, r.stdout + r.stderr
    sim = [ln for ln in r.stdout.splitlines() if ln.startswith("  simulator (PTOAS + pto-isa)")]
    assert len(sim) == 1 and sim[0].split()[4] == "ok", r.stdout
