"""An if whose two branches compute its tile result in two different buffers.

PyPTO's InitMemRef gives each branch's value a buffer of its own; its MemoryReuse then copies the else
branch's value into the then branch's buffer (a same-space tile.move before the else branch's
pl.yield_, YieldFixupMutator in src/ir/transforms/memory_reuse_pass.cpp). ptoc must read PyPTO's dumps
taken in between (issue 16); it used to stop there with an internal error (exit 3). The `.pto` is
executed for both values of the condition and compared with numpy: out = 2x when flag > 0, else
x - 1 + 3.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ptoc.context import CompileContext
from ptoc.driver import compile_program, frontend
from ptoc.reference.pto_exec import run_pto_logical

ROOT = Path(__file__).resolve().parent.parent
PTOC = Path(sys.executable).with_name("ptoc")
DUMP = ROOT / "tests" / "passes" / "if_two_buffers_after_initmemref.py"
PYPTO = os.environ.get("PTOC_PYPTO_PYTHON")
PYPTO_COMPILE = Path(os.environ.get("PTOC_PYPTO_COMPILE", ROOT.parent / "shared" / "tools" / "pypto_compile.py"))

# the same kernel as the dump, as a user writes it (no buffers yet)
SOURCE = """\
import pypto.language as pl

@pl.program
class branchy:
    @pl.function(type=pl.FunctionType.AIV)
    def k(self, x: pl.Tensor[[64, 64], pl.FP32], flag: pl.Scalar[pl.INT32], out: pl.Out[pl.Tensor[[64, 64], pl.FP32]]) -> pl.Tensor[[64, 64], pl.FP32]:
        t: pl.Tile[[64, 64], pl.FP32, pl.Mem.Vec] = pl.tile.load(x, [0, 0], [64, 64], [64, 64], target_memory=pl.Mem.Vec)
        if flag > 0:
            a: pl.Tile[[64, 64], pl.FP32, pl.Mem.Vec] = pl.tile.muls(t, 2.0)
            r: pl.Tile[[64, 64], pl.FP32, pl.Mem.Vec] = pl.yield_(a)
        else:
            s: pl.Tile[[64, 64], pl.FP32, pl.Mem.Vec] = pl.tile.adds(t, -1.0)
            b: pl.Tile[[64, 64], pl.FP32, pl.Mem.Vec] = pl.tile.adds(s, 3.0)
            r: pl.Tile[[64, 64], pl.FP32, pl.Mem.Vec] = pl.yield_(b)
        o: pl.Tensor[[64, 64], pl.FP32] = pl.tile.store(r, [0, 0], out)
        return o
"""


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(PTOC), *args], capture_output=True, text=True, timeout=300)


def _bases(dump: str) -> dict[str, str]:
    """name -> the buffer its MemRef names, for every tile assignment of a printed dump."""
    return dict(re.findall(r"^\s*(\w+): pl\.Tile\[.*?pl\.MemRef\((\w+),", dump, re.M))


def _execute(pto: str, flag: int) -> tuple[np.ndarray, np.ndarray]:
    x = np.random.default_rng(7).standard_normal((64, 64)).astype(np.float32)
    out = run_pto_logical(pto, "k", {0: (x, "ND"), 1: (np.zeros((64, 64), np.float32), "ND")}, scalars=[flag])
    return out[1], (x * 2.0 if flag > 0 else x - 1.0 + 3.0)


def test_pypto_dump_after_init_mem_ref_compiles(tmp_path):
    r = _run("compile", str(DUMP), "-o", str(tmp_path / "k.pto"))
    assert r.returncode == 0, r.stderr
    assert "internal error" not in r.stderr


def test_memory_reuse_copies_the_else_value_into_the_then_buffer_as_pypto():
    r = _run("passes", str(DUMP), "--dump-after", "MemoryReuse")
    assert r.returncode == 0, r.stderr
    b = _bases(r.stdout)
    else_branch = r.stdout[r.stdout.index("else:"):r.stdout.index("pl.tile.store")]
    move = re.search(r"^\s*(\w+): pl\.Tile\[.*= pl\.tile\.move\(b, target_memory=pl\.Mem\.Vec\)", else_branch, re.M)
    assert move, else_branch
    assert b[move.group(1)] == b["a"] != b["b"]  # into the then branch's buffer, out of b's own
    assert re.search(rf"pl\.yield_\({move.group(1)}\)", else_branch)
    assert "pl.tile.move" not in r.stdout[:r.stdout.index("else:")]  # the then branch is the target


def test_pypto_dump_validates_numerically():
    r = _run("passes", str(DUMP), "--validate")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "every stage agrees with the front end" in r.stdout + r.stderr


@pytest.mark.parametrize("flag", [1, 0])
def test_kernel_of_the_dump_computes_both_branches(flag):
    ctx = CompileContext(arch="a2a3", ptoas_version="v0.61")
    pto = compile_program(frontend(DUMP.read_text(), DUMP.name, ctx), ctx, DUMP.name, header=False).pto
    got, want = _execute(pto, flag)
    np.testing.assert_allclose(got, want, rtol=1e-6)


@pytest.mark.parametrize("flag", [1, 0])
def test_own_pipeline_keeps_both_branch_values_in_one_buffer(flag, tmp_path):
    """ptoc's InitMemRef puts the if's result and both yielded values into one buffer: no copy needed."""
    src = tmp_path / "branchy.ir"
    src.write_text(SOURCE)
    r = _run("passes", str(src), "--dump-after", "MemoryReuse")
    assert r.returncode == 0, r.stderr
    b = _bases(r.stdout)
    assert b["a"] == b["b"] == b["r"]
    assert "pl.tile.move" not in r.stdout
    ctx = CompileContext(arch="a2a3", ptoas_version="v0.61")
    pto = compile_program(frontend(SOURCE, "branchy.ir", ctx), ctx, "branchy.ir", header=False).pto
    got, want = _execute(pto, flag)
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_placed_buffers_without_the_copy_are_a_user_error(tmp_path):
    """With the addresses placed (MemRef offsets, PyPTO's form after AllocateMemoryAddr) nothing may move
    a buffer any more: the missing copy is reported with a fix, not an internal error."""
    text = DUMP.read_text()
    for buf, off in (("mem_vec_3", 16384), ("mem_vec_4", 32768), ("mem_vec_5", 49152)):
        text = text.replace(f"pl.MemRef({buf}, pl.const(0, pl.INT64)", f"pl.MemRef({buf}, pl.const({off}, pl.INT64)")
    f = tmp_path / "placed.py"
    f.write_text(text)
    r = _run("compile", str(f), "-o", str(tmp_path / "placed.pto"))
    assert r.returncode == 1, r.stderr
    assert "PTOC-E0870" in r.stderr and "internal error" not in r.stderr
    assert "pl.tile.move(b" in r.stderr  # the hint says what to add


needs_pypto = pytest.mark.skipif(not PYPTO or not Path(PYPTO).exists() or not PYPTO_COMPILE.exists(),
                                 reason="PTOC_PYPTO_PYTHON does not name the Python of a PyPTO build")


@needs_pypto
def test_pypto_dumps_of_such_an_if_compile_validate_and_reuse_as_pypto(tmp_path):
    """PyPTO's dumps of SOURCE: each from InitMemRef on compiles and validates, and ptoc's MemoryReuse on
    PyPTO's InitMemRef dump binds every tile (the copy included) to the buffer PyPTO's MemoryReuse does."""
    src = tmp_path / "branchy.ir"
    src.write_text(SOURCE)
    r = subprocess.run([PYPTO, str(PYPTO_COMPILE), str(src), "-o", str(tmp_path / "out"), "--dump"],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    dumps = sorted((tmp_path / "out" / "passes_dump").glob("*.py"))
    init = next(d for d in dumps if d.name.endswith("_after_InitMemRef.py"))
    theirs = _bases(next(d for d in dumps if d.name.endswith("_after_MemoryReuse.py")).read_text())
    for d in dumps:
        if d.name[:2] >= init.name[:2]:
            r = _run("passes", str(d), "--validate")
            assert r.returncode == 0, (d.name, r.stdout[-1500:], r.stderr[-1500:])
    ours = _run("passes", str(init), "--dump-after", "MemoryReuse")
    assert ours.returncode == 0, ours.stderr
    assert any(n.endswith("_mv") for n in theirs)
    assert _bases(ours.stdout) == theirs


THROUGH = ROOT / "tests" / "passes" / "if_pass_through_after_initmemref.py"


@pytest.mark.parametrize("flag", [1, 0])
def test_a_passed_through_value_is_copied_not_overwritten(flag):
    """The then branch yields t, computed before the if and stored again after it: copying b into t's
    buffer would overwrite t, so t is copied into b's buffer in the then branch (out2 is always x)."""
    ctx = CompileContext(arch="a2a3", ptoas_version="v0.61")
    pto = compile_program(frontend(THROUGH.read_text(), THROUGH.name, ctx), ctx, THROUGH.name, header=False).pto
    x = np.random.default_rng(11).standard_normal((64, 64)).astype(np.float32)
    zeros = np.zeros((64, 64), np.float32)
    out = run_pto_logical(pto, "k", {0: (x, "ND"), 1: (zeros, "ND"), 2: (zeros.copy(), "ND")}, scalars=[flag])
    np.testing.assert_allclose(out[1], x if flag > 0 else x + 1.0, rtol=1e-6)
    np.testing.assert_array_equal(out[2], x)
