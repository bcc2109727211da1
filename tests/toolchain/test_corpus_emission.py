"""The corpus programs that use pl.while_ (15), a 2-D pl.tile.transpose without a scratch operand (16) and
pl.system.bar_v (27) go through the real PTOAS and validate on pto-isa's CPU simulator, kernel by kernel,
against the reference interpreter. Skipped when the toolchain variables are unset (see conftest.py)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "corpus" / "raw"
PTOC = Path(sys.executable).with_name("ptoc")
SIM_ROW = "simulator (PTOAS + pto-isa)"
PROGRAMS = ["15_while_chunks", "16_loop_kinds", "27_pass_and_no_return"]


def run(*args, env):
    return subprocess.run([str(PTOC), *map(str, args)], capture_output=True, text=True, env=env, timeout=900,
                          check=False)


@pytest.mark.parametrize("stem", PROGRAMS)
def test_ptoas_assembles_the_corpus_program(stem, ptoas, tmp_path):
    env = dict(os.environ)
    r = run("compile", CORPUS / f"{stem}.ir", "-o", tmp_path / "k.pto", "--assemble", "--ptoas", ptoas, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    cpp = (tmp_path / "k.cpp").read_text()
    if stem == "27_pass_and_no_return":
        assert "pipe_barrier(PIPE_V)" in cpp  # PTOAS's C++ for pto.barrier <PIPE_V>
    if stem == "16_loop_kinds":
        assert "TTRANS(" in cpp


@pytest.mark.parametrize("stem,extra", [
    ("15_while_chunks", ["--scalar", "total=1000"]),   # chunk grows 16 -> 128, step 64: 15 full chunks + 40 rows
    ("15_while_chunks", ["--scalar", "total=7"]),      # one partial chunk
    ("16_loop_kinds", []),
    ("27_pass_and_no_return", []),
])
def test_the_corpus_program_validates_on_the_simulator(stem, extra, sim_env):
    r = run("passes", CORPUS / f"{stem}.ir", "--validate", "--sim", *extra, env=sim_env)
    assert r.returncode == 0, r.stdout + r.stderr
    rows = [ln for ln in r.stdout.splitlines() if ln.startswith("  .pto (emitted)") or ln.startswith(f"  {SIM_ROW}")]
    assert rows and all(ln.split()[2] == "ok" if ln.startswith("  .pto") else
                        ln[len(SIM_ROW) + 3:].split()[0] == "ok" for ln in rows), r.stdout
    assert "every stage agrees with the front end" in r.stdout
