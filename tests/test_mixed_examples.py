"""The mixed cube + vector examples end to end on both targets (linear_relu, quant_linear_nz,
attention_block): each is split into an AIC/AIV pair joined by the cross-core pipe, the .pto assembles with
the real PTOAS, every stage validates, and the numbers equal what numpy computes here."""

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
from ptoc.reference.interp import run_function
from ptoc.reference.validate import validate_program

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "linear_relu.ir"
PTOC = Path(sys.executable).with_name("ptoc")
ARCHES = ["a2a3", "a5"]


def inputs(seed: int = 3):
    rng = np.random.default_rng(seed)
    x = (rng.integers(-16, 16, size=(16, 128)) / 8).astype(np.float32)  # exact in BF16
    w = (rng.integers(-16, 16, size=(128, 128)) / 8).astype(np.float32)
    return x, w, np.maximum(x.astype(np.float64) @ w.astype(np.float64), 0).astype(np.float32)


def module(arch: str) -> str:
    ctx = CompileContext(arch=arch)
    return compile_program(frontend(EXAMPLE.read_text(), EXAMPLE.name, ctx), ctx, EXAMPLE.name).pto


def func(text: str, name: str) -> str:
    start = text.index(f"func.func @{name}(")
    return text[start:text.index("\n  }", start)]


@pytest.mark.parametrize("arch", ARCHES)
def test_the_scope_becomes_a_cube_and_a_vector_kernel_joined_by_the_pipe(arch):
    text = module(arch)
    assert re.findall(r"func\.func @(\w+)", text) == ["main_incore_0_aic", "main_incore_0_aiv"]
    aic, aiv = func(text, "main_incore_0_aic"), func(text, "main_incore_0_aiv")
    assert "#pto.kernel_kind<cube>" in aic and "#pto.kernel_kind<vector>" in aiv
    assert "pto.tmatmul" in aic and "pto.tpush_to_aiv" in aic and "pto.trelu" not in aic
    assert "pto.tpop_from_aic" in aiv and "pto.trelu" in aiv and "pto.tfree_from_aic" in aiv
    assert "pto.tmatmul" not in aiv
    assert ("gm_slot_buffer = " in aic) == (arch == "a2a3")


@pytest.mark.parametrize("arch", ARCHES)
def test_every_stage_validates(arch):
    ctx = CompileContext(arch=arch)
    reports = validate_program(frontend(EXAMPLE.read_text(), EXAMPLE.name, ctx), ctx, seed=5)
    assert [r.kernel for r in reports] == ["main"]
    rows = reports[0].rows
    assert {"ExpandMixedKernel", "InjectGmPipeBuffer", ".pto (emitted)"} <= {r.stage for r in rows}
    assert all(r.ok and r.ran for r in rows), rows


@pytest.mark.parametrize("arch", ARCHES)
def test_the_split_program_computes_relu_of_the_product(arch):
    from ptoc.driver import lower

    ctx = CompileContext(arch=arch)
    x, w, want = inputs()
    low = lower(frontend(EXAMPLE.read_text(), EXAMPLE.name, ctx), ctx).program
    assert low.function("main_incore_0").func_type == "Group"
    got = run_function(low, "main", {"x": x, "w": w}, ctx)["out"]
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_ptoc_run_of_the_program_writes_relu_of_the_product(tmp_path):
    x, w, want = inputs(9)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "w.npy", w)
    r = subprocess.run([str(PTOC), "run", str(EXAMPLE), "--function", "main", "--input", f"x={tmp_path / 'x.npy'}",
                        "--input", f"w={tmp_path / 'w.npy'}", "--output-dir", str(tmp_path / "out")],
                       capture_output=True, text=True, check=False, timeout=300)
    assert r.returncode == 0, r.stderr
    np.testing.assert_allclose(np.load(tmp_path / "out" / "out.npy"), want, rtol=1e-6)


@pytest.mark.parametrize("arch", ARCHES)
def test_the_real_ptoas_assembles_both_targets(arch, tmp_path):
    exe = os.environ.get("PTOC_PTOAS")
    if not exe:
        pytest.skip("$PTOC_PTOAS is unset: run `eval \"$(bash ../shared/tools/setup.sh)\"` first")
    r = subprocess.run([str(PTOC), "compile", str(EXAMPLE), "--arch", arch, "-o", str(tmp_path / "k.pto"),
                        "--assemble"], capture_output=True, text=True, check=False, timeout=600,
                       env=dict(os.environ, PTOC_PTOAS=exe))
    assert r.returncode == 0, r.stderr
    cpp = (tmp_path / "k.cpp").read_text()
    assert re.search(r"\bvoid main_incore_0_aic\(", cpp) and re.search(r"\bvoid main_incore_0_aiv\(", cpp)
    assert "TPUSH<TPipe<0, Direction::DIR_C2V, 4096, 8" in cpp and "TPOP<" in cpp and "TFREE<" in cpp


QUANT = ROOT / "examples" / "quant_linear_nz.ir"


@pytest.mark.parametrize("arch", ARCHES)
def test_the_quantised_linear_example_splits_validates_and_computes_the_scaled_product(arch):
    """examples/quant_linear_nz.ir: INT8 x NZ INT8 -> INT32 on the cube core, then FP32, scale, BF16 on the
    vector core; expected: numpy's exact integer product, converted and scaled in float32, rounded to BF16."""
    import ml_dtypes

    from ptoc.driver import lower

    ctx = CompileContext(arch=arch)
    prog = frontend(QUANT.read_text(), QUANT.name, ctx)
    reports = validate_program(prog, ctx, seed=2)
    assert all(r.ok and r.ran for rep in reports for r in rep.rows), reports
    low = lower(prog, ctx).program
    assert [f.func_type for f in low.functions] == ["AIC", "AIV", "Group"]
    rng = np.random.default_rng(4)
    x = rng.integers(-128, 128, size=(16, 256), dtype=np.int8)
    w = rng.integers(-128, 128, size=(256, 256), dtype=np.int8)
    scale = (rng.integers(1, 64, size=(1, 256)) / 4096).astype(np.float32)
    got = run_function(low, "quant_linear", {"x": x, "w": w, "scale": scale}, ctx)["out"]
    acc = x.astype(np.int64) @ w.astype(np.int64)
    want = (acc.astype(np.float32) * scale).astype(ml_dtypes.bfloat16)
    np.testing.assert_array_equal(np.asarray(got).astype(np.float32), want.astype(np.float32))


ATTENTION = ROOT / "examples" / "attention_block.ir"


@pytest.mark.parametrize("arch", ARCHES)
def test_the_attention_example_hands_scores_over_and_probabilities_back(arch):
    """examples/attention_block.ir: the scores cross cube -> vector, the FP16 probabilities vector -> cube
    (one two-way pipe, dir_mask 3); the result is softmax(q @ kt) @ v computed here with numpy."""
    from ptoc.driver import lower

    ctx = CompileContext(arch=arch)
    prog = frontend(ATTENTION.read_text(), ATTENTION.name, ctx)
    reports = validate_program(prog, ctx, seed=6)
    assert all(r.ok and r.ran for rep in reports for r in rep.rows), reports
    text = compile_program(prog, ctx, ATTENTION.name).pto
    aic, aiv = func(text, "attention_aic"), func(text, "attention_aiv")
    assert "{dir_mask = 3, slot_size = 4096}" in aic and "{dir_mask = 3, slot_size = 4096}" in aiv
    assert "pto.tpush_to_aiv" in aic and "pto.tpop_from_aiv" in aic and "pto.tfree_from_aiv" in aic
    assert "pto.tpop_from_aic" in aiv and "pto.tpush_to_aic" in aiv and "pto.texp" in aiv
    rng = np.random.default_rng(8)
    q, kt, v = (rng.standard_normal(s).astype(np.float16) for s in ((16, 64), (64, 64), (64, 64)))
    low = lower(prog, ctx).program
    got = run_function(low, "attention", {"q": q, "kt": kt, "v": v}, ctx)["out"]
    s = q.astype(np.float64) @ kt.astype(np.float64)
    p = np.exp(s - s.max(axis=1, keepdims=True))
    p = (p / p.sum(axis=1, keepdims=True)).astype(np.float16)
    want = p.astype(np.float64) @ v.astype(np.float64)
    np.testing.assert_allclose(got, want, rtol=1e-2, atol=2e-3)
