"""The split vector kernel end to end (examples/linear_relu_split.ir, UP_DOWN): SplitVectorKernel halves the
vector kernel per lane, the reference runs both lanes (lane 0 rows 0..7, lane 1 rows 8..15) at every stage
and as emitted .pto, the real PTOAS assembles the split pipe, and the numbers are numpy's relu(x @ w).
A kernel whose lanes write the wrong rows gives wrong numbers."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ptoc.context import CompileContext
from ptoc.driver import frontend, lower
from ptoc.frontend.parser import parse_program
from ptoc.ir.printer import print_program
from ptoc.reference.interp import run_function
from ptoc.reference.validate import validate_program

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "linear_relu_split.ir"
PTOC = Path(sys.executable).with_name("ptoc")
ARCHES = ["a2a3", "a5"]


def inputs(seed: int = 5):
    rng = np.random.default_rng(seed)
    x = (rng.integers(-16, 16, size=(16, 128)) / 8).astype(np.float32)  # exact in BF16
    w = (rng.integers(-16, 16, size=(128, 128)) / 8).astype(np.float32)
    return x, w, np.maximum(x.astype(np.float64) @ w.astype(np.float64), 0).astype(np.float32)


def lowered(arch: str):
    ctx = CompileContext(arch=arch)
    return lower(frontend(EXAMPLE.read_text(), EXAMPLE.name, ctx), ctx).program, ctx


@pytest.mark.parametrize("arch", ARCHES)
def test_every_stage_and_the_emitted_pto_run_both_lanes_and_agree(arch):
    ctx = CompileContext(arch=arch)
    reports = validate_program(frontend(EXAMPLE.read_text(), EXAMPLE.name, ctx), ctx, seed=1)
    rows = [r for rep in reports for r in rep.rows]
    assert rows and all(r.ok and r.ran for r in rows), reports
    emitted = [r for r in rows if "emitted" in r.stage]
    assert emitted and "lr_aiv, lr_aiv" in emitted[0].detail  # the .pto ran the vector kernel on two lanes


@pytest.mark.parametrize("arch", ARCHES)
def test_the_split_pair_computes_relu_of_the_product(arch):
    prog, ctx = lowered(arch)
    aiv = prog.function("lr_aiv")
    text = print_program(prog)
    assert re.search(r"y: pl\.Tile\[\[8, 64\], pl\.FP32, [^=]*= pl\.tile\.tpop_from_aic\(split=1\)", text)
    assert '"dual_aiv_dispatch": True' in text and "subblock_idx * 8" in text
    assert aiv is not None
    x, w, want = inputs()
    got = run_function(prog, "main", {"x": x, "w": w, "out": np.zeros((16, 128), np.float32)}, ctx)["out"]
    np.testing.assert_array_equal(np.asarray(got, dtype=np.float32), want)


@pytest.mark.parametrize("wrong, rows_lost", [("0 + subblock_idx * 8", slice(8, 16)), ("8 - subblock_idx * 8", None)])
def test_lanes_writing_the_wrong_rows_give_wrong_numbers(wrong, rows_lost):
    """Both lanes at rows 0..7 leave rows 8..15 unwritten; swapped lanes put each half in the other's rows."""
    prog, ctx = lowered("a5")
    text = print_program(prog)
    assert "[subblock_idx * 8, c0]" in text  # the split passes' 0 + subblock_idx * 8, folded by the late Simplify
    bad = parse_program(text.replace("[subblock_idx * 8, c0]", "[0, c0]" if rows_lost else f"[{wrong}, c0]"),
                        "bad.ir", ctx=ctx)
    x, w, want = inputs()
    got = np.asarray(run_function(bad, "main", {"x": x, "w": w, "out": np.zeros((16, 128), np.float32)}, ctx)["out"])
    if rows_lost is not None:
        assert not got[rows_lost].any() and want[rows_lost].any()
    else:
        np.testing.assert_array_equal(got[:8], want[8:])
        np.testing.assert_array_equal(got[8:], want[:8])
    assert not np.array_equal(got, want)


@pytest.mark.parametrize("arch", ARCHES)
def test_the_real_ptoas_assembles_the_split_pipe(arch, tmp_path):
    exe = os.environ.get("PTOC_PTOAS")
    if not exe:
        pytest.skip("$PTOC_PTOAS is unset: run `eval \"$(bash ../shared/tools/setup.sh)\"` first")
    r = subprocess.run([str(PTOC), "compile", str(EXAMPLE), "--arch", arch, "-o", str(tmp_path / "k.pto"),
                        "--assemble"], capture_output=True, text=True, check=False, timeout=600,
                       env=dict(os.environ, PTOC_PTOAS=exe))
    assert r.returncode == 0, r.stderr
    pto = (tmp_path / "k.pto").read_text()
    assert "pto.tpop_from_aic {split = 1}" in pto and "pto.tfree_from_aic {split = 1}" in pto
    assert "pto.get_subblock_idx" in pto
    cpp = (tmp_path / "k.cpp").read_text()
    assert re.search(r"TPOP<TPipe<0, Direction::DIR_C2V[^;]*Tile<TileType::Vec, float, 8, 64[^;]*TILE_UP_DOWN>", cpp)
    assert re.search(r"TFREE<TPipe<0, Direction::DIR_C2V[^;]*TILE_UP_DOWN>", cpp) and "get_subblockid()" in cpp


AUTO = ROOT / "examples" / "linear_relu_auto_split.ir"


@pytest.mark.parametrize("arch", ARCHES)
def test_the_auto_split_kernel_lowers_per_lane_validates_and_computes_relu_of_the_product(arch):
    """examples/linear_relu_auto_split.ir: one mixed InCore kernel with split=UP_DOWN becomes an AIC kernel
    pushing with split=1 and a dual-lane AIV kernel popping 8 x 64 halves; every stage (the per-lane InCore
    kernel run once per lane, the pair run as three programs) and the .pto agree, and equal numpy."""
    ctx = CompileContext(arch=arch)
    prog = frontend(AUTO.read_text(), AUTO.name, ctx)
    reports = validate_program(prog, ctx, seed=2)
    rows = [r for rep in reports for r in rep.rows]
    assert rows and all(r.ok and r.ran for r in rows), reports
    low = lower(prog, ctx).program
    text = print_program(low)
    assert "pl.tile.tpush_to_aiv(acc, split=1)" in text and "pl.tile.tpop_from_aic(split=1)" in text
    assert '"split_aiv": True' in text and '"dual_aiv_dispatch": True' in text
    x, w, want = inputs(7)
    got = run_function(low, "main", {"x": x, "w": w, "out": np.zeros((16, 128), np.float32)}, ctx)["out"]
    np.testing.assert_array_equal(np.asarray(got, dtype=np.float32), want)


@pytest.mark.parametrize("arch", ARCHES)
def test_the_real_ptoas_assembles_the_auto_split_pair(arch, tmp_path):
    exe = os.environ.get("PTOC_PTOAS")
    if not exe:
        pytest.skip("$PTOC_PTOAS is unset: run `eval \"$(bash ../shared/tools/setup.sh)\"` first")
    r = subprocess.run([str(PTOC), "compile", str(AUTO), "--arch", arch, "-o", str(tmp_path / "k.pto"),
                        "--assemble"], capture_output=True, text=True, check=False, timeout=600,
                       env=dict(os.environ, PTOC_PTOAS=exe))
    assert r.returncode == 0, r.stderr
    cpp = (tmp_path / "k.cpp").read_text()
    assert re.search(r"TPUSH<TPipe<0, Direction::DIR_C2V[^;]*TILE_UP_DOWN>", cpp)
    assert re.search(r"TPOP<TPipe<0, Direction::DIR_C2V[^;]*Tile<TileType::Vec, float, 8, 64[^;]*TILE_UP_DOWN>", cpp)
