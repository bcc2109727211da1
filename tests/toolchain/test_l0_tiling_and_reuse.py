"""The real toolchain on the L0-tiled matmul example and the kernel that fits the vector buffer only through
MemoryReuse: PTOAS assembles both on a2a3 and a5, and pto-isa's CPU simulator computes what the reference
interpreter computes. Skipped (saying why) without $PTOC_PTOAS / $PTOC_PTO_ISA / $PTOC_CXX.

The tiled matmul runs on the simulator for a2a3 with every example (test_sim_examples.py). Not for a5: the
simulator harness does not select pto-isa's A5 memory model, so its L0C holds 128 KiB and a5's [256, 256]
FP32 accumulator block (256 KiB) trips the CPU model's bounds check."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PTOC = Path(sys.executable).with_name("ptoc")
TILED = ROOT / "examples" / "matmul_l0_tiled.ir"
FIT = ROOT / "tests" / "passes" / "memory_reuse_fit.ir"


def run(*args, env=None):
    return subprocess.run([str(PTOC), *map(str, args)], capture_output=True, text=True, env=env, timeout=900,
                          check=False)


@pytest.mark.parametrize("arch", ["a2a3", "a5"])
@pytest.mark.parametrize("src", [TILED, FIT], ids=["matmul_l0_tiled", "memory_reuse_fit"])
def test_assembles_with_the_real_ptoas(tmp_path, ptoas, src, arch):
    import os

    env = dict(os.environ, PTOC_PTOAS=ptoas)
    r = run("compile", src, "--arch", arch, "-o", tmp_path / "k.pto", "--assemble", env=env)
    assert r.returncode == 0, r.stderr
    pto = (tmp_path / "k.pto").read_text()
    if src == TILED:  # one accumulation loop per output block: 2 x 2 blocks on a5, 4 x 2 on a2a3
        assert pto.count("scf.for") == (4 if arch == "a5" else 8)
    else:  # c = a + b written over a
        assert "pto.tadd ins(%a, %b" in pto and "outs(%a :" in pto
    assert (tmp_path / "k.cpp").exists()


@pytest.mark.parametrize("arch", ["a2a3", "a5"])
def test_memory_reuse_kernel_runs_on_the_simulator(sim_env, arch):
    r = run("passes", FIT, "--arch", arch, "--validate", "--sim", env=sim_env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "simulator (PTOAS + pto-isa)  ok" in r.stdout and "every stage agrees with the front end" in r.stdout
