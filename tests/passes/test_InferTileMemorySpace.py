"""InferTileMemorySpace: every kernel tile gets a memory space; cube operands are moved into Left/Right."""

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ptoc.context import CompileContext
from ptoc.diagnostics import CompileError
from ptoc.frontend.parser import parse_program
from ptoc.ir.nodes import AssignStmt
from ptoc.ir.printer import print_program
from ptoc.passes.InferTileMemorySpace import InferTileMemorySpace
from ptoc.passes.manager import check_invariants

A2A3 = CompileContext(arch="a2a3")
PTOC = Path(sys.executable).with_name("ptoc")

VEC_PARAMS = ("self, x: pl.Tensor[[32, 128], pl.FP32], y: pl.Tensor[[32, 128], pl.FP32], "
              "o: pl.Out[pl.Tensor[[32, 128], pl.FP32]]")
VEC_RET = "pl.Tensor[[32, 128], pl.FP32]"
MM_PARAMS = ("self, x: pl.Tensor[[64, 64], pl.BF16], w: pl.Tensor[[64, 64], pl.BF16], "
             "o: pl.Out[pl.Tensor[[64, 64], pl.FP32]]")
MM_RET = "pl.Tensor[[64, 64], pl.FP32]"


def kernel(body: str, params: str, ret: str) -> str:
    body = textwrap.indent(textwrap.dedent(body).strip("\n"), " " * 8)
    return (f"@pl.program\nclass p:\n    @pl.function(type=pl.FunctionType.InCore)\n"
            f"    def k({params}) -> {ret}:\n{body}\n")


def parse(text: str, check_ops: bool = True):
    # check_ops=False: ptoc's type rules give a load or create without target_memory the Vec default and
    # tile.matmul rejects operands outside Left/Right, so a kernel whose cube spaces are still open (the
    # form this pass exists for) is structurally valid IR that only this pass makes type-correct.
    return parse_program(text, "before.ir", ctx=A2A3, check_ops=check_ops)


def run(prog, ctx=A2A3):
    out = InferTileMemorySpace().run(prog, ctx)
    check_invariants(out, ctx, InferTileMemorySpace())  # verifier with op rules + property memory_spaces
    return out


def assert_same(out, expected_text: str):
    expected = parse_program(expected_text, "expected.ir", ctx=A2A3)
    assert out == expected, f"got:\n{print_program(out)}\nexpected:\n{print_program(expected)}"


def test_load_without_target_feeding_add_lives_in_vec():
    before = kernel("""
        xt: pl.Tile[[32, 128], pl.FP32] = pl.tile.load(x, [0, 0], [32, 128])
        yt: pl.Tile[[32, 128], pl.FP32] = pl.tile.load(y, [0, 0], [32, 128])
        s: pl.Tile[[32, 128], pl.FP32] = pl.tile.add(xt, yt)
        o1: pl.Tensor[[32, 128], pl.FP32] = pl.tile.store(s, [0, 0], o)
        return o1
    """, VEC_PARAMS, VEC_RET)
    expected = kernel("""
        xt: pl.Tile[[32, 128], pl.FP32, pl.Mem.Vec] = pl.tile.load(x, [0, 0], [32, 128], target_memory=pl.Mem.Vec)
        yt: pl.Tile[[32, 128], pl.FP32, pl.Mem.Vec] = pl.tile.load(y, [0, 0], [32, 128], target_memory=pl.Mem.Vec)
        s: pl.Tile[[32, 128], pl.FP32, pl.Mem.Vec] = pl.tile.add(xt, yt)
        o1: pl.Tensor[[32, 128], pl.FP32] = pl.tile.store(s, [0, 0], o)
        return o1
    """, VEC_PARAMS, VEC_RET)
    assert_same(run(parse(before)), expected)


def test_mat_loads_feeding_matmul_get_moves_to_left_and_right():
    # x is loaded into Mat explicitly; w has no target, and the matmul's Right demand stages it in Mat.
    before = kernel("""
        a: pl.Tile[[64, 64], pl.BF16, pl.Mem.Mat] = pl.tile.load(x, [0, 0], [64, 64], target_memory=pl.Mem.Mat)
        b: pl.Tile[[64, 64], pl.BF16] = pl.tile.load(w, [0, 0], [64, 64])
        c: pl.Tile[[64, 64], pl.FP32] = pl.tile.matmul(a, b)
        o1: pl.Tensor[[64, 64], pl.FP32] = pl.tile.store(c, [0, 0], o)
        return o1
    """, MM_PARAMS, MM_RET)
    expected = kernel("""
        a: pl.Tile[[64, 64], pl.BF16, pl.Mem.Mat] = pl.tile.load(x, [0, 0], [64, 64], target_memory=pl.Mem.Mat)
        b: pl.Tile[[64, 64], pl.BF16, pl.Mem.Mat] = pl.tile.load(w, [0, 0], [64, 64], target_memory=pl.Mem.Mat)
        a_left: pl.Tile[[64, 64], pl.BF16, pl.Mem.Left] = pl.tile.move(a, target_memory=pl.Mem.Left)
        b_right: pl.Tile[[64, 64], pl.BF16, pl.Mem.Right] = pl.tile.move(b, target_memory=pl.Mem.Right)
        c: pl.Tile[[64, 64], pl.FP32, pl.Mem.Acc] = pl.tile.matmul(a_left, b_right)
        o1: pl.Tensor[[64, 64], pl.FP32] = pl.tile.store(c, [0, 0], o)
        return o1
    """, MM_PARAMS, MM_RET)
    assert_same(run(parse(before, check_ops=False)), expected)


def test_explicit_left_and_right_operands_are_kept():
    before = kernel("""
        a_mat: pl.Tile[[64, 64], pl.BF16, pl.Mem.Mat] = pl.tile.load(x, [0, 0], [64, 64], target_memory=pl.Mem.Mat)
        b_mat: pl.Tile[[64, 64], pl.BF16, pl.Mem.Mat] = pl.tile.load(w, [0, 0], [64, 64], target_memory=pl.Mem.Mat)
        a_l: pl.Tile[[64, 64], pl.BF16, pl.Mem.Left] = pl.tile.move(a_mat, target_memory=pl.Mem.Left)
        b_r: pl.Tile[[64, 64], pl.BF16, pl.Mem.Right] = pl.tile.move(b_mat, target_memory=pl.Mem.Right)
        c: pl.Tile[[64, 64], pl.FP32] = pl.tile.matmul(a_l, b_r)
        o1: pl.Tensor[[64, 64], pl.FP32] = pl.tile.store(c, [0, 0], o)
        return o1
    """, MM_PARAMS, MM_RET)
    expected = kernel("""
        a_mat: pl.Tile[[64, 64], pl.BF16, pl.Mem.Mat] = pl.tile.load(x, [0, 0], [64, 64], target_memory=pl.Mem.Mat)
        b_mat: pl.Tile[[64, 64], pl.BF16, pl.Mem.Mat] = pl.tile.load(w, [0, 0], [64, 64], target_memory=pl.Mem.Mat)
        a_l: pl.Tile[[64, 64], pl.BF16, pl.Mem.Left] = pl.tile.move(a_mat, target_memory=pl.Mem.Left)
        b_r: pl.Tile[[64, 64], pl.BF16, pl.Mem.Right] = pl.tile.move(b_mat, target_memory=pl.Mem.Right)
        c: pl.Tile[[64, 64], pl.FP32, pl.Mem.Acc] = pl.tile.matmul(a_l, b_r)
        o1: pl.Tensor[[64, 64], pl.FP32] = pl.tile.store(c, [0, 0], o)
        return o1
    """, MM_PARAMS, MM_RET)
    assert_same(run(parse(before)), expected)


def test_created_accumulator_takes_its_consumers_space_through_the_loop_carry():
    # acc0 has no target; it is the init of the carry that matmul_acc reads as acc, so it is born in Acc.
    # One Left/Right move per operand, inside the loop body where the operands are loaded.
    before = kernel("""
        acc0: pl.Tile[[64, 64], pl.FP32] = pl.tile.create([64, 64], dtype=pl.FP32)
        for kb, (acc,) in pl.range(0, 4, init_values=(acc0,)):
            a: pl.Tile[[64, 64], pl.BF16] = pl.tile.load(x, [0, 0], [64, 64])
            b: pl.Tile[[64, 64], pl.BF16] = pl.tile.load(w, [0, 0], [64, 64])
            acc_next: pl.Tile[[64, 64], pl.FP32] = pl.tile.matmul_acc(acc, a, b)
            acc_out: pl.Tile[[64, 64], pl.FP32] = pl.yield_(acc_next)
        o1: pl.Tensor[[64, 64], pl.FP32] = pl.tile.store(acc_out, [0, 0], o)
        return o1
    """, MM_PARAMS, MM_RET)
    expected = kernel("""
        acc0: pl.Tile[[64, 64], pl.FP32, pl.Mem.Acc] = pl.tile.create([64, 64], dtype=pl.FP32, target_memory=pl.Mem.Acc)
        for kb, (acc,) in pl.range(0, 4, init_values=(acc0,)):
            a: pl.Tile[[64, 64], pl.BF16, pl.Mem.Mat] = pl.tile.load(x, [0, 0], [64, 64], target_memory=pl.Mem.Mat)
            b: pl.Tile[[64, 64], pl.BF16, pl.Mem.Mat] = pl.tile.load(w, [0, 0], [64, 64], target_memory=pl.Mem.Mat)
            a_left: pl.Tile[[64, 64], pl.BF16, pl.Mem.Left] = pl.tile.move(a, target_memory=pl.Mem.Left)
            b_right: pl.Tile[[64, 64], pl.BF16, pl.Mem.Right] = pl.tile.move(b, target_memory=pl.Mem.Right)
            acc_next: pl.Tile[[64, 64], pl.FP32, pl.Mem.Acc] = pl.tile.matmul_acc(acc, a_left, b_right)
            acc_out: pl.Tile[[64, 64], pl.FP32, pl.Mem.Acc] = pl.yield_(acc_next)
        o1: pl.Tensor[[64, 64], pl.FP32] = pl.tile.store(acc_out, [0, 0], o)
        return o1
    """, MM_PARAMS, MM_RET)
    assert_same(run(parse(before, check_ops=False)), expected)


def test_created_tile_without_cube_consumer_defaults_to_vec():
    params = "self, x: pl.Tensor[[32, 128], pl.FP32], o: pl.Out[pl.Tensor[[32, 1], pl.FP32]]"
    ret = "pl.Tensor[[32, 1], pl.FP32]"
    before = kernel("""
        xt: pl.Tile[[32, 128], pl.FP32, pl.Mem.Vec] = pl.tile.load(x, [0, 0], [32, 128], target_memory=pl.Mem.Vec)
        tmp: pl.Tile[[32, 128], pl.FP32] = pl.tile.create([32, 128], dtype=pl.FP32)
        m: pl.Tile[[32, 1], pl.FP32] = pl.tile.row_max(xt, tmp)
        o1: pl.Tensor[[32, 1], pl.FP32] = pl.tile.store(m, [0, 0], o)
        return o1
    """, params, ret)
    expected = kernel("""
        xt: pl.Tile[[32, 128], pl.FP32, pl.Mem.Vec] = pl.tile.load(x, [0, 0], [32, 128], target_memory=pl.Mem.Vec)
        tmp: pl.Tile[[32, 128], pl.FP32, pl.Mem.Vec] = pl.tile.create([32, 128], dtype=pl.FP32, target_memory=pl.Mem.Vec)
        m: pl.Tile[[32, 1], pl.FP32, pl.Mem.Vec] = pl.tile.row_max(xt, tmp)
        o1: pl.Tensor[[32, 1], pl.FP32] = pl.tile.store(m, [0, 0], o)
        return o1
    """, params, ret)
    assert_same(run(parse(before)), expected)


def test_one_move_serves_every_use_of_a_tile_in_its_block():
    before = kernel("""
        a: pl.Tile[[64, 64], pl.BF16, pl.Mem.Mat] = pl.tile.load(x, [0, 0], [64, 64], target_memory=pl.Mem.Mat)
        b: pl.Tile[[64, 64], pl.BF16, pl.Mem.Mat] = pl.tile.load(w, [0, 0], [64, 64], target_memory=pl.Mem.Mat)
        c: pl.Tile[[64, 64], pl.FP32] = pl.tile.matmul(a, b)
        d: pl.Tile[[64, 64], pl.FP32] = pl.tile.matmul_acc(c, a, b)
        o1: pl.Tensor[[64, 64], pl.FP32] = pl.tile.store(d, [0, 0], o)
        return o1
    """, MM_PARAMS, MM_RET)
    expected = kernel("""
        a: pl.Tile[[64, 64], pl.BF16, pl.Mem.Mat] = pl.tile.load(x, [0, 0], [64, 64], target_memory=pl.Mem.Mat)
        b: pl.Tile[[64, 64], pl.BF16, pl.Mem.Mat] = pl.tile.load(w, [0, 0], [64, 64], target_memory=pl.Mem.Mat)
        a_left: pl.Tile[[64, 64], pl.BF16, pl.Mem.Left] = pl.tile.move(a, target_memory=pl.Mem.Left)
        b_right: pl.Tile[[64, 64], pl.BF16, pl.Mem.Right] = pl.tile.move(b, target_memory=pl.Mem.Right)
        c: pl.Tile[[64, 64], pl.FP32, pl.Mem.Acc] = pl.tile.matmul(a_left, b_right)
        d: pl.Tile[[64, 64], pl.FP32, pl.Mem.Acc] = pl.tile.matmul_acc(c, a_left, b_right)
        o1: pl.Tensor[[64, 64], pl.FP32] = pl.tile.store(d, [0, 0], o)
        return o1
    """, MM_PARAMS, MM_RET)
    assert_same(run(parse(before, check_ops=False)), expected)


VEC_LHS = """
        a: pl.Tile[[64, 64], pl.BF16, pl.Mem.Vec] = pl.tile.load(x, [0, 0], [64, 64], target_memory=pl.Mem.Vec)
        b: pl.Tile[[64, 64], pl.BF16, pl.Mem.Mat] = pl.tile.load(w, [0, 0], [64, 64], target_memory=pl.Mem.Mat)
        c: pl.Tile[[64, 64], pl.FP32] = pl.tile.matmul(a, b)
        o1: pl.Tensor[[64, 64], pl.FP32] = pl.tile.store(c, [0, 0], o)
        return o1
"""


def test_vec_operand_of_matmul_in_an_aic_kernel_rejected():
    # MOV-6: TMOV has no Vec -> Left path on A2/A3 (nor A5), and an AIC kernel has no vector core to hand the
    # operand over from: it must be staged in Mat.
    before = kernel(VEC_LHS, MM_PARAMS, MM_RET).replace("FunctionType.InCore", "FunctionType.AIC")
    for ctx in (A2A3, CompileContext(arch="a5")):
        with pytest.raises(CompileError) as e:
            InferTileMemorySpace().run(parse(before, check_ops=False), ctx)
        (d,) = e.value.diagnostics
        assert (d.code, d.rule, d.span.line) == ("PTOC-E0325", "MOV-6", 7)
        assert "'a'" in d.message and "Vec" in d.message and "Left" in d.message and "AIC kernel" in d.message
        assert "target_memory=pl.Mem.Mat" in d.hint


def test_vec_operand_of_matmul_in_an_incore_kernel_is_a_vector_to_cube_hand_off(tmp_path):
    # As in PyPTO: the move to Left is inserted, and it is the boundary ExpandMixedKernel splits at (the
    # AIV kernel pushes `a`, the AIC kernel pops it into Mat and moves it on to Left); the split program
    # computes what the front end's program computes.
    before = kernel(VEC_LHS, MM_PARAMS, MM_RET)
    out = InferTileMemorySpace().run(parse(before, check_ops=False), A2A3)
    moves = [s for s in out.function("k").body if isinstance(s, AssignStmt) and getattr(s.value, "op", "") == "tile.move"]
    assert [(s.value.args[0].name, s.value.kwarg("target_memory").member) for s in moves] == [("a", "Left"),
                                                                                            ("b", "Right")]
    src = tmp_path / "k.ir"
    src.write_text("import pypto.language as pl\n" + before)
    for arch in ("a2a3", "a5"):
        r = subprocess.run([str(PTOC), "passes", str(src), "--arch", arch, "--validate"], capture_output=True,
                           text=True, timeout=300, check=False)
        assert r.returncode == 0, r.stdout + r.stderr
        ran = "k_aiv, k_aiv, k_aic" if arch == "a2a3" else "k_aiv, k_aic"  # a2a3: the AIV kernel on both lanes
        assert f"kernels run: {ran}" in r.stdout and "every stage agrees with the front end" in r.stdout


def test_a_cross_core_move_written_in_an_aiv_kernel_is_rejected(tmp_path):
    src = tmp_path / "k.ir"
    src.write_text("import pypto.language as pl\n" + kernel("""
        a: pl.Tile[[64, 64], pl.BF16, pl.Mem.Vec] = pl.tile.load(x, [0, 0], [64, 64], target_memory=pl.Mem.Vec)
        m: pl.Tile[[64, 64], pl.BF16, pl.Mem.Mat] = pl.tile.move(a, target_memory=pl.Mem.Mat)
        o1: pl.Tensor[[64, 64], pl.BF16] = pl.tile.store(m, [0, 0], x)
        return o1
    """, MM_PARAMS, "pl.Tensor[[64, 64], pl.BF16]").replace("FunctionType.InCore", "FunctionType.AIV"))
    # Vec -> Mat is a TMOV of A5; on A2/A3 only a mixed kernel's hand-off makes it
    r = subprocess.run([str(PTOC), "check", str(src), "--arch", "a2a3"], capture_output=True, text=True,
                       timeout=120, check=False)
    assert r.returncode == 1 and "PTOC-E0750" in r.stderr and "AIV kernel runs on one core" in r.stderr, r.stderr


def test_loaded_accumulator_rejected():
    before = kernel("""
        c0: pl.Tile[[64, 64], pl.FP32] = pl.tile.load(o, [0, 0], [64, 64])
        a: pl.Tile[[64, 64], pl.BF16, pl.Mem.Mat] = pl.tile.load(x, [0, 0], [64, 64], target_memory=pl.Mem.Mat)
        b: pl.Tile[[64, 64], pl.BF16, pl.Mem.Mat] = pl.tile.load(w, [0, 0], [64, 64], target_memory=pl.Mem.Mat)
        c: pl.Tile[[64, 64], pl.FP32] = pl.tile.matmul_acc(c0, a, b)
        o1: pl.Tensor[[64, 64], pl.FP32] = pl.tile.store(c, [0, 0], o)
        return o1
    """, MM_PARAMS, MM_RET)
    with pytest.raises(CompileError) as e:
        InferTileMemorySpace().run(parse(before, check_ops=False), A2A3)
    (d,) = e.value.diagnostics
    assert (d.code, d.span.line) == ("PTOC-E0326", 5)
    assert "c0" in d.message and "target_memory=pl.Mem.Acc" in d.hint


def test_idempotent():
    before = kernel("""
        acc0: pl.Tile[[64, 64], pl.FP32] = pl.tile.create([64, 64], dtype=pl.FP32)
        for kb, (acc,) in pl.range(0, 4, init_values=(acc0,)):
            a: pl.Tile[[64, 64], pl.BF16] = pl.tile.load(x, [0, 0], [64, 64])
            b: pl.Tile[[64, 64], pl.BF16] = pl.tile.load(w, [0, 0], [64, 64])
            acc_next: pl.Tile[[64, 64], pl.FP32] = pl.tile.matmul_acc(acc, a, b)
            acc_out: pl.Tile[[64, 64], pl.FP32] = pl.yield_(acc_next)
        o1: pl.Tensor[[64, 64], pl.FP32] = pl.tile.store(acc_out, [0, 0], o)
        return o1
    """, MM_PARAMS, MM_RET)
    once = run(parse(before, check_ops=False))
    assert InferTileMemorySpace().run(once, A2A3) is once


def test_non_kernel_functions_are_untouched():
    text = ("@pl.program\nclass p:\n    @pl.function(type=pl.FunctionType.Orchestration)\n"
            "    def main(self, a: pl.Tensor[[16, 16], pl.FP32]) -> pl.Tensor[[16, 16], pl.FP32]:\n"
            "        return a\n")
    prog = parse(text)
    assert InferTileMemorySpace().run(prog, A2A3) is prog


def test_matmul_result_read_by_a_vector_op_is_moved_to_vec_as_nd_rows():
    # The product lives in Acc; the vector unit reads Vec. The cube -> vector path un-fractalises the data,
    # so the moved tile is row-major and unboxed whatever Acc's own layout is.
    before = kernel("""
        a: pl.Tile[[64, 64], pl.BF16, pl.Mem.Mat] = pl.tile.load(x, [0, 0], [64, 64], target_memory=pl.Mem.Mat)
        b: pl.Tile[[64, 64], pl.BF16, pl.Mem.Mat] = pl.tile.load(w, [0, 0], [64, 64], target_memory=pl.Mem.Mat)
        c: pl.Tile[[64, 64], pl.FP32] = pl.tile.matmul(a, b)
        d: pl.Tile[[64, 64], pl.FP32] = pl.tile.exp(c)
        e: pl.Tile[[64, 64], pl.FP32] = pl.tile.add(d, c)
        o1: pl.Tensor[[64, 64], pl.FP32] = pl.tile.store(e, [0, 0], o)
        return o1
    """, MM_PARAMS, MM_RET)
    expected = kernel("""
        a: pl.Tile[[64, 64], pl.BF16, pl.Mem.Mat] = pl.tile.load(x, [0, 0], [64, 64], target_memory=pl.Mem.Mat)
        b: pl.Tile[[64, 64], pl.BF16, pl.Mem.Mat] = pl.tile.load(w, [0, 0], [64, 64], target_memory=pl.Mem.Mat)
        a_left: pl.Tile[[64, 64], pl.BF16, pl.Mem.Left] = pl.tile.move(a, target_memory=pl.Mem.Left)
        b_right: pl.Tile[[64, 64], pl.BF16, pl.Mem.Right] = pl.tile.move(b, target_memory=pl.Mem.Right)
        c: pl.Tile[[64, 64], pl.FP32, pl.Mem.Acc] = pl.tile.matmul(a_left, b_right)
        c_vec: pl.Tile[[64, 64], pl.FP32, pl.Mem.Vec] = pl.tile.move(c, target_memory=pl.Mem.Vec, blayout=pl.TileLayout.row_major, slayout=pl.TileLayout.none_box)
        d: pl.Tile[[64, 64], pl.FP32, pl.Mem.Vec] = pl.tile.exp(c_vec)
        e: pl.Tile[[64, 64], pl.FP32, pl.Mem.Vec] = pl.tile.add(d, c_vec)
        o1: pl.Tensor[[64, 64], pl.FP32] = pl.tile.store(e, [0, 0], o)
        return o1
    """, MM_PARAMS, MM_RET)
    assert_same(run(parse(before, check_ops=False)), expected)


def test_acc_tile_stored_directly_needs_no_move():
    # tile.store reads Vec or Acc (TSTORE writes L0C to GM with the FP32 -> output dtype conversion).
    before = kernel("""
        a: pl.Tile[[64, 64], pl.BF16, pl.Mem.Mat] = pl.tile.load(x, [0, 0], [64, 64], target_memory=pl.Mem.Mat)
        b: pl.Tile[[64, 64], pl.BF16, pl.Mem.Mat] = pl.tile.load(w, [0, 0], [64, 64], target_memory=pl.Mem.Mat)
        c: pl.Tile[[64, 64], pl.FP32] = pl.tile.matmul(a, b)
        o1: pl.Tensor[[64, 64], pl.FP32] = pl.tile.store(c, [0, 0], o)
        return o1
    """, MM_PARAMS, MM_RET)
    out = print_program(run(parse(before, check_ops=False)))
    assert "target_memory=pl.Mem.Vec" not in out
    assert "pl.tile.store(c, [0, 0], o)" in out


BF_PARAMS = "self, x: pl.Tensor[[16, 128], pl.BF16], o: pl.Out[pl.Tensor[[16, 128], pl.BF16]]"
BF_RET = "pl.Tensor[[16, 128], pl.BF16]"


def test_mat_tile_is_stored_from_mat():
    # TSTORE reads Mat tiles, and no TMOV path goes Mat -> Vec: the store stays as written.
    before = kernel("""
        t: pl.Tile[[16, 128], pl.BF16, pl.Mem.Mat] = pl.tile.load(x, [0, 0], [16, 128], target_memory=pl.Mem.Mat)
        o1: pl.Tensor[[16, 128], pl.BF16] = pl.tile.store(t, [0, 0], o)
        return o1
    """, BF_PARAMS, BF_RET)
    prog = parse(before)
    assert run(prog) == prog


def test_left_tile_store_accepted_by_the_front_end_and_rejected_here():
    before = kernel("""
        t: pl.Tile[[16, 128], pl.BF16, pl.Mem.Mat] = pl.tile.load(x, [0, 0], [16, 128], target_memory=pl.Mem.Mat)
        u: pl.Tile[[16, 128], pl.BF16, pl.Mem.Left] = pl.tile.move(t, target_memory=pl.Mem.Left)
        o1: pl.Tensor[[16, 128], pl.BF16] = pl.tile.store(u, [0, 0], o)
        return o1
    """, BF_PARAMS, BF_RET)
    prog = parse(before)  # the operator checks before memory inference: no complaint
    with pytest.raises(CompileError) as e:
        InferTileMemorySpace().run(prog, A2A3)
    (d,) = e.value.diagnostics
    assert (d.code, d.span.line) == ("PTOC-E0365", 7)
    assert "Left tile cannot be stored" in d.message
