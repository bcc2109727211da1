"""Row-major-only vector ops on [N, 1] columns (ResolveBackendOpLayouts) on the real toolchain: PTOAS accepts
the kernel on both targets (on A2/A3 it rejects TEXPANDS into a col-major Vec tile) and pto-isa's simulator
agrees with the reference. Skipped without the tools (see conftest.py)."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PTOC = Path(sys.executable).with_name("ptoc")
SOFTMAX = ROOT / "tests" / "corpus" / "raw" / "13_online_softmax_if_yield.ir"


@pytest.mark.parametrize("arch", ["a2a3", "a5"])
def test_online_softmax_columns_assemble(arch, tmp_path, ptoas):
    r = subprocess.run([str(PTOC), "compile", str(SOFTMAX), "--arch", arch, "-o", str(tmp_path / "k.pto"),
                        "--assemble"], capture_output=True, text=True, timeout=600, check=False)
    assert r.returncode == 0, r.stderr
    text = (tmp_path / "k.pto").read_text()
    fills = [ln for ln in text.splitlines() if "pto.texpands" in ln]
    assert fills and all("blayout=row_major" in ln for ln in fills)


def test_online_softmax_columns_match_on_the_simulator(sim_env):
    r = subprocess.run([str(PTOC), "passes", str(SOFTMAX), "--validate", "--sim"], capture_output=True, text=True,
                       env=sim_env, timeout=900, check=False)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "every stage agrees with the front end" in r.stdout


CARRIED_COLUMN = """\
import pypto.language as pl
@pl.program
class p:
    @pl.function(type=pl.FunctionType.AIV)
    def k(self, s: pl.Tensor[[64, 256], pl.FP32], l_out: pl.Out[pl.Tensor[[64, 1], pl.FP32]]) -> pl.Tensor[[64, 1], pl.FP32]:
        tmp: pl.Tile[[64, 128], pl.FP32, pl.Mem.Vec] = pl.tile.create([64, 128], dtype=pl.FP32, target_memory=pl.Mem.Vec)
        l0: pl.Tile[[64, 1], pl.FP32, pl.Mem.Vec] = pl.tile.full([64, 1], dtype=pl.FP32, value=0.0)
        for j, (l_i,) in pl.range(2, init_values=(l0,)):
            c0: pl.Scalar[pl.INDEX] = j * 128
            s_j: pl.Tile[[64, 128], pl.FP32, pl.Mem.Vec] = pl.tile.load(s, [0, c0], [64, 128], [64, 128], target_memory=pl.Mem.Vec)
            l_cur: pl.Tile[[64, 1], pl.FP32, pl.Mem.Vec] = pl.tile.row_sum(s_j, tmp)
            l_sum: pl.Tile[[64, 1], pl.FP32, pl.Mem.Vec] = pl.tile.add(l_i, l_cur)
            l_next = pl.yield_(l_sum)
        o: pl.Tensor[[64, 1], pl.FP32] = pl.tile.store(l_next, [0, 0], l_out)
        return o
"""


def _pypto_form_13() -> str:
    sys.path.insert(0, str(ROOT / "tests" / "passes"))
    try:
        from test_ResolveBackendOpLayouts import PYPTO_FORM_13
    finally:
        sys.path.pop(0)
    return PYPTO_FORM_13


@pytest.mark.parametrize("which", ["carried_column", "pypto_form_13"])
def test_row_major_columns_and_carried_views_match_on_the_simulator(which, sim_env, tmp_path):
    # A loop that yields the [64, 1] view of a repaired add, and PyPTO's form of the online softmax (columns
    # declared row-major): PTOAS assembles the kernel and pto-isa's simulator agrees with the reference.
    src = tmp_path / f"{which}.py"
    src.write_text(CARRIED_COLUMN if which == "carried_column" else _pypto_form_13())
    r = subprocess.run([str(PTOC), "passes", str(src), "--validate", "--sim"], capture_output=True, text=True,
                       env=sim_env, timeout=900, check=False)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "simulator (PTOAS + pto-isa)  ok" in r.stdout and "every stage agrees with the front end" in r.stdout
