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


PROGRAMS = {"carried_column": ROOT / "tests" / "passes" / "carried_column.ir",
            "pypto_form_13": ROOT / "tests" / "passes" / "online_softmax_pypto_form.ir"}


@pytest.mark.parametrize("which", ["carried_column", "pypto_form_13"])
def test_row_major_columns_and_carried_views_match_on_the_simulator(which, sim_env):
    # A loop that yields the [64, 1] view of a repaired add, and PyPTO's form of the online softmax (columns
    # declared row-major): PTOAS assembles the kernel and pto-isa's simulator agrees with the reference.
    r = subprocess.run([str(PTOC), "passes", str(PROGRAMS[which]), "--validate", "--sim"], capture_output=True, text=True,
                       env=sim_env, timeout=900, check=False)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "simulator (PTOAS + pto-isa)  ok" in r.stdout and "every stage agrees with the front end" in r.stdout
