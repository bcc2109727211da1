"""Per-pass validation end to end: every example agrees with itself at every stage and as emitted .pto;
a deliberately broken blocking pass is caught and named; random NZ load windows read exactly their
logical window when the emitted .pto runs; the Acc -> NZ store writes the NZ-packed bytes."""

import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ptoc.context import CompileContext
from ptoc.driver import compile_program, frontend
from ptoc.ir.nodes import Call, ListExpr
from ptoc.ir.visitor import Mutator
from ptoc.passes.manager import PIPELINE, Pass
from ptoc.reference.packers import pack
from ptoc.reference.pto_exec import run_pto, run_pto_logical
from ptoc.reference.validate import validate_program

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "examples").glob("*.ir"))
CTX = CompileContext()


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_every_example_validates_through_every_pass_and_the_emitted_pto(path):
    prog = frontend(path.read_text(), path.name, CTX)
    reports = validate_program(prog, CTX, seed=7, dims={"M": 80})
    assert reports
    for rep in reports:
        assert [r.stage for r in rep.rows][0] == "frontend" and rep.rows[-1].stage == ".pto (emitted)"
        assert len(rep.rows) == len(PIPELINE) + 2  # the front end, every pass, the emitted .pto
        assert rep.first_failure is None, rep.rows


class SwapBlockedAxes(Pass):
    """Test-only: swaps the column-block and row-fractal offsets of every blocked NZ load (a classic
    blocking bug: [b, k0/c0, r0/16, 0, 0] written as [b, r0/16, k0/c0, 0, 0])."""

    name = "SwapBlockedAxes"
    stage = "layout"
    summary = "test-only broken blocking"

    def run(self, program, ctx):
        class M(Mutator):
            def mutate_Call(self, c: Call):
                if c.op == "tile.load" and isinstance(c.args[1], ListExpr) and len(c.args[1].items) == 5:
                    o = c.args[1].items
                    swapped = ListExpr((o[0], o[2], o[1], o[3], o[4]))
                    return replace(c, args=(c.args[0], swapped) + c.args[2:])
                return c

        return M().mutate(program)


def test_broken_blocking_is_caught_and_attributed_to_its_pass():
    path = ROOT / "examples" / "nz_weight_int8.ir"
    prog = frontend(path.read_text(), path.name, CTX)
    reports = validate_program(prog, CTX, seed=3, broken_pass=SwapBlockedAxes)
    (rep,) = reports
    stages = [r.stage for r in rep.rows]
    assert stages.index("SwapBlockedAxes") == stages.index("BlockNzTensorViews") + 1
    assert rep.first_failure is not None and rep.first_failure.stage == "SwapBlockedAxes"
    assert all(r.ok for r in rep.rows[: stages.index("SwapBlockedAxes")])


def test_cli_validate_prints_the_table_and_exits_0(tmp_path):
    r = subprocess.run([sys.executable, "-m", "ptoc.cli", "passes", str(ROOT / "examples" / "acc_store_nz.ir"),
                        "--validate", "--seed", "5"], capture_output=True, text=True, timeout=300, check=False)
    assert r.returncode == 0, r.stderr
    assert "BlockNzTensorViews" in r.stdout and ".pto (emitted)" in r.stdout
    assert "every stage agrees with the front end" in r.stdout


def test_cli_run_writes_outputs_for_ir_stage_and_pto(tmp_path):
    a = np.arange(64 * 64, dtype=np.float32).reshape(64, 64)
    b = np.full((64, 64), 0.5, dtype=np.float32)
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "b.npy", b)
    ptoc = [sys.executable, "-m", "ptoc.cli"]
    src = ROOT / "examples" / "vector_add.ir"
    for extra, out in (([], "o1"), (["--stage", "frontend"], "o2"), (["--stage", "BlockNzTensorViews"], "o3")):
        r = subprocess.run(ptoc + ["run", str(src), "--function", "add_kernel", "--input", f"a={tmp_path / 'a.npy'}",
                                   "--input", f"b={tmp_path / 'b.npy'}", "--output-dir", str(tmp_path / out)] + extra,
                           capture_output=True, text=True, timeout=120, check=False)
        assert r.returncode == 0, r.stderr
        assert np.array_equal(np.load(tmp_path / out / "out.npy"), a + b)
    assert subprocess.run(ptoc + ["compile", str(src), "-o", str(tmp_path / "k.pto")], check=False,
                          capture_output=True).returncode == 0
    r = subprocess.run(ptoc + ["run", str(src), "--function", "add_kernel", "--input", f"a={tmp_path / 'a.npy'}",
                               "--input", f"b={tmp_path / 'b.npy'}", "--pto", str(tmp_path / "k.pto"),
                               "--output-dir", str(tmp_path / "o4")], capture_output=True, text=True, timeout=120,
                       check=False)
    assert r.returncode == 0, r.stderr
    assert np.array_equal(np.load(tmp_path / "o4" / "out.npy"), a + b)


def test_acc_store_into_nz_writes_the_nz_packed_bytes():
    # seed 000: a 64 x 16 FP32 Acc tile stored into logical [64, 16] NZ (partition 1x2x4x16x8)
    path = ROOT / "examples" / "acc_store_nz.ir"
    prog = frontend(path.read_text(), path.name, CTX)
    art = compile_program(prog, CTX, path.name)
    rng = np.random.default_rng(0)
    q = rng.standard_normal((64, 128)).astype(np.float32)
    k = rng.standard_normal((128, 16)).astype(np.float32)
    import ml_dtypes

    qb, kb = q.astype(ml_dtypes.bfloat16), k.astype(ml_dtypes.bfloat16)
    out = run_pto(art.pto, "scores", [pack(qb, "ND", "BF16"), pack(kb, "ND", "BF16"), bytes(64 * 16 * 4)])
    expected = qb.astype(np.float32) @ kb.astype(np.float32)
    want = np.frombuffer(pack(expected.astype(np.float32), "NZ", "FP32"), dtype=np.float32)
    got = np.frombuffer(out[2], dtype=np.float32)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    # element (r, c) of the logical result sits at (c // 8) * 512 + (r // 16) * 128 + (r % 16) * 8 + c % 8
    assert np.isclose(got[(9 // 8) * 512 + (37 // 16) * 128 + (37 % 16) * 8 + 9 % 8], expected[37, 9], rtol=1e-5)


# --------------------------------------------------------------------------------------------------
# random NZ load windows: the emitted .pto reads exactly the logical window
# --------------------------------------------------------------------------------------------------

C0 = {"INT8": 32, "FP16": 16, "BF16": 16}
ACC = {"INT8": "INT32", "FP16": "FP32", "BF16": "FP32"}


@st.composite
def windows(draw):
    dt = draw(st.sampled_from(sorted(C0)))
    c0 = C0[dt]
    rank = draw(st.integers(2, 4))
    lead = [draw(st.integers(1, 3)) for _ in range(rank - 2)]
    tr = max(16, c0) * draw(st.integers(1, 2))  # Left [TR, TR] / Right [TR, TC] are whole fractals
    tc = c0 * draw(st.integers(1, 2))
    nr = draw(st.integers(1, 2))  # row blocks the loop walks (symbolic offset r0 + i * TR)
    r_blocks = draw(st.integers(nr * tr // 16, nr * tr // 16 + 2))
    c_blocks = draw(st.integers(tc // c0, tc // c0 + 2))
    R, C = 16 * r_blocks, c0 * c_blocks
    r0 = 16 * draw(st.integers(0, (R - nr * tr) // 16))
    k0 = c0 * draw(st.integers(0, (C - tc) // c0))
    lead_off = [draw(st.integers(0, n - 1)) for n in lead]
    return dt, lead, R, C, tr, tc, nr, r0, k0, lead_off


def kernel_text(dt, lead, R, C, tr, tc, nr, r0, k0, lead_off) -> str:
    acc = ACC[dt]
    shape = ", ".join(str(x) for x in lead + [R, C])
    lo = ", ".join(str(x) for x in lead_off)
    lo = lo + ", " if lo else ""
    ones = "1, " * len(lead)
    rows = nr * tr
    return f"""
@pl.function(type=pl.FunctionType.InCore)
def window(eye: pl.Tensor[[{tr}, {tr}], pl.{dt}], w: pl.Tensor[[{shape}], pl.{dt}, pl.NZ], out: pl.Out[pl.Tensor[[{rows}, {tc}], pl.{acc}]]) -> pl.Tensor[[{rows}, {tc}], pl.{acc}]:
    e_mat: pl.Tile[[{tr}, {tr}], pl.{dt}, pl.Mem.Mat] = pl.tile.load(eye, [0, 0], [{tr}, {tr}], target_memory=pl.Mem.Mat)
    e_left: pl.Tile[[{tr}, {tr}], pl.{dt}, pl.Mem.Left] = pl.tile.move(e_mat, target_memory=pl.Mem.Left)
    for i, (o_iter,) in pl.range({nr}, init_values=(out,)):
        r: pl.Scalar[pl.INDEX] = {r0} + i * {tr}
        w_mat: pl.Tile[[{tr}, {tc}], pl.{dt}, pl.Mem.Mat] = pl.tile.load(w, [{lo}r, {k0}], [{ones}{tr}, {tc}], target_memory=pl.Mem.Mat)
        w_right: pl.Tile[[{tr}, {tc}], pl.{dt}, pl.Mem.Right] = pl.tile.move(w_mat, target_memory=pl.Mem.Right)
        acc: pl.Tile[[{tr}, {tc}], pl.{acc}, pl.Mem.Acc] = pl.tile.matmul(e_left, w_right)
        o_row: pl.Scalar[pl.INDEX] = i * {tr}
        o_store: pl.Tensor[[{rows}, {tc}], pl.{acc}] = pl.tile.store(acc, [o_row, 0], o_iter)
        o_next: pl.Tensor[[{rows}, {tc}], pl.{acc}] = pl.yield_(o_store)
    return o_next
"""


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(windows(), st.integers(0, 2**31 - 1))
def test_random_nz_windows_read_exactly_the_logical_window(case, seed):
    import ml_dtypes

    dt, lead, R, C, tr, tc, nr, r0, k0, lead_off = case
    prog = frontend(kernel_text(*case), "window.ir", CTX)
    art = compile_program(prog, CTX, "window.ir")
    rng = np.random.default_rng(seed)
    npd = {"INT8": np.int8, "FP16": np.float16, "BF16": ml_dtypes.bfloat16}[dt]
    if dt == "INT8":
        w = rng.integers(-100, 100, size=tuple(lead) + (R, C)).astype(np.int8)
    else:
        w = rng.integers(-64, 64, size=tuple(lead) + (R, C)).astype(np.float32).astype(npd)  # exact in fp32
    eye = np.eye(tr).astype(npd)
    out_dt = np.int32 if dt == "INT8" else np.float32
    res = run_pto_logical(art.pto, "window", {0: (eye, "ND"), 1: (w, "NZ"),
                                              2: (np.zeros((nr * tr, tc), dtype=out_dt), "ND")})
    expected = w[tuple(lead_off)][r0:r0 + nr * tr, k0:k0 + tc].astype(out_dt)
    assert np.array_equal(res[2], expected)


# --------------------------------------------------------------------------------------------------
# Independence: a wrong fact or stride in the compiler is named at the stage that made it, because the
# reference packs the logical tensors itself (ptoc.reference.packers) instead of trusting the types.
# --------------------------------------------------------------------------------------------------


def _column_major_strides(t):
    """Test-only fault: ND strides written column-major in the last two axes (a transposed stride bug)."""
    from ptoc.passes import MaterializeTensorStrides as mts

    good = mts.row_major_strides(t.shape) if t.layout == "ND" else _ORIGINAL_PACKED(t)
    if t.layout != "ND" or t.rank < 2:
        return good
    return good[:-2] + (ConstInt(1, dtypes.INDEX), t.shape[-2])


from ptoc.ir import dtypes  # noqa: E402
from ptoc.ir.nodes import ConstInt  # noqa: E402
from ptoc.passes import MaterializeTensorStrides as _mts  # noqa: E402

_ORIGINAL_PACKED = _mts.packed_strides


def _stages_that_differ(path, **kw):
    prog = frontend(path.read_text(), path.name, CTX)
    (rep,) = [r for r in validate_program(prog, CTX, seed=5, **kw) if r.label == "kernel"]
    return rep, [r.stage for r in rep.rows if not r.ok]


def test_wrong_strides_are_named_at_materialize_tensor_strides(monkeypatch):
    monkeypatch.setattr(_mts, "packed_strides", _column_major_strides)
    rep, differ = _stages_that_differ(ROOT / "examples" / "vector_add.ir")
    assert rep.first_failure.stage == "MaterializeTensorStrides"
    assert "strides" in rep.first_failure.detail and "packed ND strides" in rep.first_failure.detail
    assert all(r.ok for r in rep.rows[:[r.stage for r in rep.rows].index("MaterializeTensorStrides")])


def test_wrong_c0_is_named_at_block_nz_tensor_views(monkeypatch):
    from ptoc.target import arch

    monkeypatch.setattr(arch, "C0_BYTES", 16)  # the compiler's C0 line halved: INT8 c0 = 16, not 32
    rep, differ = _stages_that_differ(ROOT / "examples" / "nz_weight_int8.ir")
    assert rep.first_failure.stage == "BlockNzTensorViews"
    # the reference's own c0 (32 bytes / 1 byte): [256, 512] INT8 blocks to [1, 16, 16, 16, 32] (NZ-2)
    assert "[1, 16, 16, 16, 32]" in rep.first_failure.detail
    assert all(r.ok for r in rep.rows[:[r.stage for r in rep.rows].index("BlockNzTensorViews")])


def test_without_the_layout_check_the_faults_are_blamed_on_the_emitter_or_missed(monkeypatch):
    """What the check buys: the interpreter alone runs a stage on the layout its types give, so the stage
    agrees with itself. The wrong c0 then shows only on the emitted .pto row; the column-major strides of
    an elementwise add on square tensors show nowhere."""
    from ptoc.reference import validate
    from ptoc.target import arch

    monkeypatch.setattr(validate, "layout_problems", lambda *a: [])
    monkeypatch.setattr(arch, "C0_BYTES", 16)
    _, differ = _stages_that_differ(ROOT / "examples" / "nz_weight_int8.ir")
    assert differ == [".pto (emitted)"]
    monkeypatch.setattr(arch, "C0_BYTES", 32)
    monkeypatch.setattr(_mts, "packed_strides", _column_major_strides)
    _, differ = _stages_that_differ(ROOT / "examples" / "vector_add.ir")
    assert differ == []
