"""AutoTileMatmulL0: a matmul whose operands or accumulator exceed L0A / L0B / L0C becomes L0-sized steps.

L0 capacities (ptoc/target/arch.py): L0A = L0B = 64 KiB on both targets; L0C = 128 KiB (a2a3), 256 KiB (a5).
Every expected tile shape below is worked out by hand in a comment from those numbers."""

import subprocess
import sys
import textwrap
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from ptoc.context import CompileContext
from ptoc.frontend.parser import parse_program
from ptoc.ir.printer import print_program
from ptoc.passes.AutoTileMatmulL0 import AutoTileMatmulL0, choose_l0_tile
from ptoc.passes.manager import PIPELINE, check_invariants, run_pipeline
from ptoc.target.arch import A2A3, A5

ROOT = Path(__file__).resolve().parents[2]
PTOC = str(Path(sys.executable).with_name("ptoc"))
CTX_A5 = CompileContext(arch="a5")
CTX_A2 = CompileContext(arch="a2a3")


def program(params: str, ret: str, body: str) -> str:
    body = textwrap.indent(textwrap.dedent(body).strip("\n"), " " * 8)
    return (f"@pl.program\nclass p:\n    @pl.function(type=pl.FunctionType.InCore)\n"
            f"    def kernel(self, {params}) -> {ret}:\n{body}\n")


def run(text: str, ctx: CompileContext):
    before = parse_program(text, "before.ir", ctx=ctx)
    after = AutoTileMatmulL0().run(before, ctx)
    check_invariants(after, ctx, AutoTileMatmulL0())
    return before, after


def assert_same(after, expected_text: str, ctx: CompileContext):
    expected = parse_program(expected_text, "expected.ir", ctx=ctx)
    assert after == expected, f"got:\n{print_program(after)}\nexpected:\n{print_program(expected)}"


SKINNY_PARAMS = ("lhs: pl.Tensor[[16, 2048], pl.BF16], rhs: pl.Tensor[[2048, 64], pl.BF16], "
                 "out: pl.Out[pl.Tensor[[16, 64], pl.FP32]]")
SKINNY_LOADS = """
    lhs_mat: pl.Tile[[16, 2048], pl.BF16, pl.Mem.Mat] = pl.tile.load(lhs, [0, 0], [16, 2048], target_memory=pl.Mem.Mat)
    rhs_mat: pl.Tile[[2048, 64], pl.BF16, pl.Mem.Mat] = pl.tile.load(rhs, [0, 0], [2048, 64], target_memory=pl.Mem.Mat)
"""
LEFT = "pl.Mem.Left, pl.TileView(blayout=pl.TileLayout.row_major)"  # TEXTRACT's L0A format (OP-6)


def test_chooser_follows_the_capacities():
    # [16, 64] FP32 = 4 KiB fits L0C; the whole K does not fit L0B (2048 * 64 * 2 B = 256 KiB), so k is the
    # largest divisor of 2048 with two [k, 64] BF16 blocks in 64 KiB: k * 64 * 2 * 2 <= 65536 -> k = 256.
    t = choose_l0_tile(A5, 16, 64, 2048, 2, 2, 4)
    assert (t.m, t.n, t.k) == (16, 64, 256)
    # [512, 512] FP32 = 1 MiB > 256 KiB: the largest divisor block that fits is 256 x 256 (256 KiB);
    # two [256, k] FP32 blocks in 64 KiB -> k <= 32.
    t = choose_l0_tile(A5, 512, 512, 512, 4, 4, 4)
    assert (t.m, t.n, t.k) == (256, 256, 32)
    # a2a3 holds 128 KiB of L0C: 32768 FP32 elements -> 128 x 256 (equal area to 256 x 128, equally
    # square; the wider block wins); two [k, 256] BF16 blocks in 64 KiB -> k <= 64.
    t = choose_l0_tile(A2A3, 512, 512, 256, 2, 2, 4)
    assert (t.m, t.n, t.k) == (128, 256, 64)
    # everything fits: the matmul stays as it is
    t = choose_l0_tile(A5, 64, 64, 128, 2, 2, 4)
    assert (t.m, t.n, t.k) == (64, 64, 128)
    # K not a multiple of the 16-wide cube fractal and too large for L0: no legal tile
    assert choose_l0_tile(A5, 16, 64, 2056, 2, 2, 4) is None


def test_k_only_matmul_becomes_a_pipelined_accumulation_loop():
    before = program(SKINNY_PARAMS, "pl.Tensor[[16, 64], pl.FP32]", SKINNY_LOADS + """
    c: pl.Tile[[16, 64], pl.FP32, pl.Mem.Acc] = pl.tile.matmul(lhs_mat, rhs_mat)
    out_1: pl.Tensor[[16, 64], pl.FP32] = pl.tile.store(c, [0, 0], out)
    return out_1
    """)
    expected = program(SKINNY_PARAMS, "pl.Tensor[[16, 64], pl.FP32]", SKINNY_LOADS + f"""
    c_init: pl.Tile[[16, 64], pl.FP32, pl.Mem.Acc] = pl.tile.create([16, 64], dtype=pl.FP32, target_memory=pl.Mem.Acc)
    for ko, (c_iter,) in pl.pipeline(0, 2048, 256, stage=2, init_values=(c_init,)):
        sa: pl.Tile[[16, 256], pl.BF16, {LEFT}] = pl.tile.extract(lhs_mat, 0, ko, shape=[16, 256], target_memory=pl.Mem.Left)
        sb: pl.Tile[[256, 64], pl.BF16, pl.Mem.Right] = pl.tile.extract(rhs_mat, ko, 0, shape=[256, 64], target_memory=pl.Mem.Right)
        if ko == 0:
            c_first: pl.Tile[[16, 64], pl.FP32, pl.Mem.Acc] = pl.tile.matmul(sa, sb)
            c_phi: pl.Tile[[16, 64], pl.FP32, pl.Mem.Acc] = pl.yield_(c_first)
        else:
            c_acc: pl.Tile[[16, 64], pl.FP32, pl.Mem.Acc] = pl.tile.matmul_acc(c_iter, sa, sb)
            c_phi: pl.Tile[[16, 64], pl.FP32, pl.Mem.Acc] = pl.yield_(c_acc)
        c: pl.Tile[[16, 64], pl.FP32, pl.Mem.Acc] = pl.yield_(c_phi)
    out_1: pl.Tensor[[16, 64], pl.FP32] = pl.tile.store(c, [0, 0], out)
    return out_1
    """)
    for ctx in (CTX_A5, CTX_A2):  # L0A/L0B are 64 KiB on both targets: the same loop
        _, after = run(before, ctx)
        assert_same(after, expected, ctx)


def test_matmul_acc_accumulates_into_the_given_accumulator_every_iteration():
    params = SKINNY_PARAMS.replace("out:", "acc0: pl.Tile[[16, 64], pl.FP32, pl.Mem.Acc], out:")
    before = program(params, "pl.Tensor[[16, 64], pl.FP32]", SKINNY_LOADS + """
    c: pl.Tile[[16, 64], pl.FP32, pl.Mem.Acc] = pl.tile.matmul_acc(acc0, lhs_mat, rhs_mat)
    out_1: pl.Tensor[[16, 64], pl.FP32] = pl.tile.store(c, [0, 0], out)
    return out_1
    """)
    expected = program(params, "pl.Tensor[[16, 64], pl.FP32]", SKINNY_LOADS + f"""
    for ko, (c_iter,) in pl.pipeline(0, 2048, 256, stage=2, init_values=(acc0,)):
        sa: pl.Tile[[16, 256], pl.BF16, {LEFT}] = pl.tile.extract(lhs_mat, 0, ko, shape=[16, 256], target_memory=pl.Mem.Left)
        sb: pl.Tile[[256, 64], pl.BF16, pl.Mem.Right] = pl.tile.extract(rhs_mat, ko, 0, shape=[256, 64], target_memory=pl.Mem.Right)
        c_acc: pl.Tile[[16, 64], pl.FP32, pl.Mem.Acc] = pl.tile.matmul_acc(c_iter, sa, sb)
        c: pl.Tile[[16, 64], pl.FP32, pl.Mem.Acc] = pl.yield_(c_acc)
    out_1: pl.Tensor[[16, 64], pl.FP32] = pl.tile.store(c, [0, 0], out)
    return out_1
    """)
    _, after = run(before, CTX_A5)
    assert_same(after, expected, CTX_A5)


def test_a_block_too_wide_for_any_k_gives_way_to_a_narrower_one():
    # [64, 2048] FP32 on a5: the accumulator (512 KiB) exceeds L0C (256 KiB). The largest fitting block,
    # 64 x 1024, leaves no K tile: two [16, 1024] FP32 blocks are 128 KiB > 64 KiB L0B. The next, 64 x 512
    # (128 KiB), takes the whole K = 32: [64, 32] FP32 = 8 KiB <= L0A, [32, 512] FP32 = 64 KiB <= L0B.
    t = choose_l0_tile(A5, 64, 2048, 32, 4, 4, 4)
    assert (t.m, t.n, t.k) == (64, 512, 32)


def test_output_blocks_with_the_whole_k_are_straight_matmuls_chaining_the_stores():
    # [64, 1024] FP16 x -> FP32: the accumulator is 256 KiB > 128 KiB (a2a3). Blocks with at most 32768
    # elements dividing [64, 1024]: 64 x 512 (area 32768; 32 x 1024 is as large but less square).
    # Whole K = 32: [64, 32] FP16 = 4 KiB fits L0A, [32, 512] FP16 = 32 KiB fits L0B -> k = K.
    params = ("a: pl.Tensor[[64, 32], pl.FP16], b: pl.Tensor[[32, 1024], pl.FP16], "
              "out: pl.Out[pl.Tensor[[64, 1024], pl.FP32]]")
    loads = """
    a_mat: pl.Tile[[64, 32], pl.FP16, pl.Mem.Mat] = pl.tile.load(a, [0, 0], [64, 32], target_memory=pl.Mem.Mat)
    b_mat: pl.Tile[[32, 1024], pl.FP16, pl.Mem.Mat] = pl.tile.load(b, [0, 0], [32, 1024], target_memory=pl.Mem.Mat)
    """
    before = program(params, "pl.Tensor[[64, 1024], pl.FP32]", loads + """
    c: pl.Tile[[64, 1024], pl.FP32, pl.Mem.Acc] = pl.tile.matmul(a_mat, b_mat)
    out_1: pl.Tensor[[64, 1024], pl.FP32] = pl.tile.store(c, [0, 0], out)
    return out_1
    """)
    expected = program(params, "pl.Tensor[[64, 1024], pl.FP32]", loads + f"""
    a0: pl.Tile[[64, 32], pl.FP16, {LEFT}] = pl.tile.extract(a_mat, 0, 0, shape=[64, 32], target_memory=pl.Mem.Left)
    b0: pl.Tile[[32, 512], pl.FP16, pl.Mem.Right] = pl.tile.extract(b_mat, 0, 0, shape=[32, 512], target_memory=pl.Mem.Right)
    c0: pl.Tile[[64, 512], pl.FP32, pl.Mem.Acc] = pl.tile.matmul(a0, b0)
    out_1_t0: pl.Tensor[[64, 1024], pl.FP32] = pl.tile.store(c0, [0, 0], out)
    a1: pl.Tile[[64, 32], pl.FP16, {LEFT}] = pl.tile.extract(a_mat, 0, 0, shape=[64, 32], target_memory=pl.Mem.Left)
    b1: pl.Tile[[32, 512], pl.FP16, pl.Mem.Right] = pl.tile.extract(b_mat, 0, 512, shape=[32, 512], target_memory=pl.Mem.Right)
    c1: pl.Tile[[64, 512], pl.FP32, pl.Mem.Acc] = pl.tile.matmul(a1, b1)
    out_1: pl.Tensor[[64, 1024], pl.FP32] = pl.tile.store(c1, [0, 512], out_1_t0)
    return out_1
    """)
    _, after = run(before, CTX_A2)
    assert_same(after, expected, CTX_A2)
    # a5's L0C holds the whole [64, 1024] FP32 accumulator (256 KiB): nothing to do
    b5, a5 = run(before, CTX_A5)
    assert a5 is b5


def test_fitting_matmuls_and_unsupported_forms_are_left_as_written():
    fits = program("a: pl.Tensor[[64, 128], pl.BF16], b: pl.Tensor[[128, 64], pl.BF16], "
                   "out: pl.Out[pl.Tensor[[64, 64], pl.FP32]]", "pl.Tensor[[64, 64], pl.FP32]", """
    a_mat: pl.Tile[[64, 128], pl.BF16, pl.Mem.Mat] = pl.tile.load(a, [0, 0], [64, 128], target_memory=pl.Mem.Mat)
    b_mat: pl.Tile[[128, 64], pl.BF16, pl.Mem.Mat] = pl.tile.load(b, [0, 0], [128, 64], target_memory=pl.Mem.Mat)
    c: pl.Tile[[64, 64], pl.FP32, pl.Mem.Acc] = pl.tile.matmul(a_mat, b_mat)
    out_1: pl.Tensor[[64, 64], pl.FP32] = pl.tile.store(c, [0, 0], out)
    return out_1
    """)
    # the accumulator exceeds L0C but is read by something other than one store: no output blocks
    two_uses = program("a: pl.Tensor[[64, 32], pl.FP32], b: pl.Tensor[[32, 1024], pl.FP32], "
                       "out: pl.Out[pl.Tensor[[64, 1024], pl.FP32]]", "pl.Tensor[[64, 1024], pl.FP32]", """
    a_mat: pl.Tile[[64, 32], pl.FP32, pl.Mem.Mat] = pl.tile.load(a, [0, 0], [64, 32], target_memory=pl.Mem.Mat)
    b_mat: pl.Tile[[32, 1024], pl.FP32, pl.Mem.Mat] = pl.tile.load(b, [0, 0], [32, 1024], target_memory=pl.Mem.Mat)
    c: pl.Tile[[64, 1024], pl.FP32, pl.Mem.Acc] = pl.tile.matmul(a_mat, b_mat)
    out_1: pl.Tensor[[64, 1024], pl.FP32] = pl.tile.store(c, [0, 0], out)
    out_2: pl.Tensor[[64, 1024], pl.FP32] = pl.tile.store(c, [0, 0], out_1)
    return out_2
    """)
    for text in (fits, two_uses):
        before, after = run(text, CTX_A2)
        assert after is before


def test_the_pass_is_idempotent():
    text = program(SKINNY_PARAMS, "pl.Tensor[[16, 64], pl.FP32]", SKINNY_LOADS + """
    c: pl.Tile[[16, 64], pl.FP32, pl.Mem.Acc] = pl.tile.matmul(lhs_mat, rhs_mat)
    out_1: pl.Tensor[[16, 64], pl.FP32] = pl.tile.store(c, [0, 0], out)
    return out_1
    """)
    _, once = run(text, CTX_A5)
    assert AutoTileMatmulL0().run(once, CTX_A5) is once


@pytest.mark.parametrize("ctx", [CTX_A5, CTX_A2], ids=["a5", "a2a3"])
def test_tiled_kernel_computes_the_matmul(ctx):
    from ptoc.reference.interp import run_function

    params = ("a: pl.Tensor[[128, 512], pl.FP16], b: pl.Tensor[[512, 256], pl.FP16], "
              "out: pl.Out[pl.Tensor[[128, 256], pl.FP32]]")
    text = program(params, "pl.Tensor[[128, 256], pl.FP32]", """
    a_mat: pl.Tile[[128, 512], pl.FP16, pl.Mem.Mat] = pl.tile.load(a, [0, 0], [128, 512], target_memory=pl.Mem.Mat)
    b_mat: pl.Tile[[512, 256], pl.FP16, pl.Mem.Mat] = pl.tile.load(b, [0, 0], [512, 256], target_memory=pl.Mem.Mat)
    c: pl.Tile[[128, 256], pl.FP32, pl.Mem.Acc] = pl.tile.matmul(a_mat, b_mat)
    out_1: pl.Tensor[[128, 256], pl.FP32] = pl.tile.store(c, [0, 0], out)
    return out_1
    """)
    before, after = run(text, ctx)
    assert after is not before
    rng = np.random.default_rng(7)
    a = rng.standard_normal((128, 512)).astype(np.float16)
    b = rng.standard_normal((512, 256)).astype(np.float16)
    want = a.astype(np.float64) @ b.astype(np.float64)  # numpy, independently of ptoc
    for prog in (before, after, run_pipeline(before, ctx)):
        got = run_function(prog, "kernel", {"a": a, "b": b, "out": np.zeros((128, 256), np.float32)}, ctx)
        np.testing.assert_allclose(got["out"], want, rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("arch", ["a5", "a2a3"])
def test_the_example_fits_only_after_tiling_and_validates_at_every_stage(arch, tmp_path):
    ex = ROOT / "examples" / "matmul_l0_tiled.ir"
    r = subprocess.run([PTOC, "passes", str(ex), "--arch", arch, "--validate"], capture_output=True, text=True,
                       timeout=600, check=False)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "AutoTileMatmulL0             ok" in r.stdout and "every stage agrees with the front end" in r.stdout
    # without the pass the [512, 512] FP32 accumulator (1 MiB) cannot be placed in L0C
    others = ",".join(n for _, n in PIPELINE if n != "AutoTileMatmulL0")
    r = subprocess.run([PTOC, "passes", str(ex), "--arch", arch, "--pipeline", others], capture_output=True,
                       text=True, timeout=300, check=False)
    assert r.returncode == 1 and "PTOC-E0390" in r.stderr, r.stderr


def test_matmul_bias_adds_its_bias_in_the_first_k_block_only():
    from ptoc.reference.interp import run_function

    params = SKINNY_PARAMS.replace("out:", "bias: pl.Tensor[[1, 64], pl.FP32], out:")
    loads = SKINNY_LOADS + """
    bias_mat: pl.Tile[[1, 64], pl.FP32, pl.Mem.Mat] = pl.tile.load(bias, [0, 0], [1, 64], target_memory=pl.Mem.Mat)
    """
    before = program(params, "pl.Tensor[[16, 64], pl.FP32]", loads + """
    c: pl.Tile[[16, 64], pl.FP32, pl.Mem.Acc] = pl.tile.matmul_bias(lhs_mat, rhs_mat, bias_mat)
    out_1: pl.Tensor[[16, 64], pl.FP32] = pl.tile.store(c, [0, 0], out)
    return out_1
    """)
    expected = program(params, "pl.Tensor[[16, 64], pl.FP32]", loads + f"""
    c_init: pl.Tile[[16, 64], pl.FP32, pl.Mem.Acc] = pl.tile.create([16, 64], dtype=pl.FP32, target_memory=pl.Mem.Acc)
    for ko, (c_iter,) in pl.pipeline(0, 2048, 256, stage=2, init_values=(c_init,)):
        sa: pl.Tile[[16, 256], pl.BF16, {LEFT}] = pl.tile.extract(lhs_mat, 0, ko, shape=[16, 256], target_memory=pl.Mem.Left)
        sb: pl.Tile[[256, 64], pl.BF16, pl.Mem.Right] = pl.tile.extract(rhs_mat, ko, 0, shape=[256, 64], target_memory=pl.Mem.Right)
        if ko == 0:
            c_first: pl.Tile[[16, 64], pl.FP32, pl.Mem.Acc] = pl.tile.matmul_bias(sa, sb, bias_mat)
            c_phi: pl.Tile[[16, 64], pl.FP32, pl.Mem.Acc] = pl.yield_(c_first)
        else:
            c_acc: pl.Tile[[16, 64], pl.FP32, pl.Mem.Acc] = pl.tile.matmul_acc(c_iter, sa, sb)
            c_phi: pl.Tile[[16, 64], pl.FP32, pl.Mem.Acc] = pl.yield_(c_acc)
        c: pl.Tile[[16, 64], pl.FP32, pl.Mem.Acc] = pl.yield_(c_phi)
    out_1: pl.Tensor[[16, 64], pl.FP32] = pl.tile.store(c, [0, 0], out)
    return out_1
    """)
    for ctx in (CTX_A2, CTX_A5):
        b, after = run(before, ctx)
        assert_same(after, expected, ctx)
        rng = np.random.default_rng(5)
        x = rng.standard_normal((16, 2048)).astype(ml_dtypes.bfloat16)
        w = rng.standard_normal((2048, 64)).astype(ml_dtypes.bfloat16)
        bias = rng.standard_normal((1, 64)).astype(np.float32)
        want = x.astype(np.float64) @ w.astype(np.float64) + bias  # the bias once, not once per K block
        for prog in (b, after, run_pipeline(b, ctx)):
            got = run_function(prog, "kernel", {"lhs": x, "rhs": w, "bias": bias,
                                                "out": np.zeros((16, 64), np.float32)}, ctx)
            np.testing.assert_allclose(got["out"], want, rtol=1e-3, atol=1e-2)
