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
