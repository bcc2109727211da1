"""ExpandMixedKernel: a kernel mixing cube and vector work becomes an AIC kernel, an AIV kernel and a Group
that calls both; the hand-offs between the cores become pipe pushes and pops (PyPTO's pass, in ptoc's
text). The expected programs are written out by hand from the pass's rules."""

import textwrap

import pytest

from ptoc.context import CompileContext
from ptoc.diagnostics import CompileError
from ptoc.frontend.parser import parse_program
from ptoc.ir.printer import print_program
from ptoc.passes.ExpandMixedKernel import ExpandMixedKernel
from ptoc.passes.manager import check_invariants

A2A3 = CompileContext(arch="a2a3")
A5 = CompileContext(arch="a5")
HEAD = "import pypto.language as pl\n\n@pl.program\nclass p:\n"


def prog(text: str) -> str:
    return HEAD + textwrap.indent(textwrap.dedent(text).strip("\n"), "    ") + "\n"


def run(text: str, ctx=A5):
    before = parse_program(prog(text), "before.ir", ctx=ctx)
    after = ExpandMixedKernel().run(before, ctx)
    check_invariants(after, ctx, ExpandMixedKernel())
    return before, after


def assert_same(out, expected: str, ctx=A5):
    want = parse_program(prog(expected), "expected.ir", ctx=ctx)
    assert out == want, f"got:\n{print_program(out)}\nexpected:\n{print_program(want)}"


PARAMS_MM = ("self, x: pl.Tensor[[16, 128], pl.BF16], w: pl.Tensor[[128, 64], pl.BF16], "
             "out: pl.Out[pl.Tensor[[16, 64], pl.FP32]]")
CUBE_PART = """
        x_mat: pl.Tile[[16, 128], pl.BF16, pl.Mem.Mat] = pl.tile.load(x, [0, 0], [16, 128], target_memory=pl.Mem.Mat)
        x_left: pl.Tile[[16, 128], pl.BF16, pl.Mem.Left] = pl.tile.move(x_mat, target_memory=pl.Mem.Left)
        w_mat: pl.Tile[[128, 64], pl.BF16, pl.Mem.Mat] = pl.tile.load(w, [0, 0], [128, 64], target_memory=pl.Mem.Mat)
        w_right: pl.Tile[[128, 64], pl.BF16, pl.Mem.Right] = pl.tile.move(w_mat, target_memory=pl.Mem.Right)
        acc: pl.Tile[[16, 64], pl.FP32, pl.Mem.Acc] = pl.tile.matmul(x_left, w_right)"""

LINEAR_RELU = f"""
@pl.function(type=pl.FunctionType.InCore)
def k({PARAMS_MM}) -> pl.Tensor[[16, 64], pl.FP32]:{CUBE_PART}
        y: pl.Tile[[16, 64], pl.FP32, pl.Mem.Vec] = pl.tile.move(acc, target_memory=pl.Mem.Vec, blayout=pl.TileLayout.row_major, slayout=pl.TileLayout.none_box)
        r: pl.Tile[[16, 64], pl.FP32, pl.Mem.Vec] = pl.tile.relu(y)
        out_1: pl.Tensor[[16, 64], pl.FP32] = pl.tile.store(r, [0, 0], out)
        return out_1
@pl.function(type=pl.FunctionType.Orchestration)
def main({PARAMS_MM}) -> pl.Tensor[[16, 64], pl.FP32]:
    o: pl.Tensor[[16, 64], pl.FP32] = self.k(x, w, out)
    return o
"""


def test_cube_to_vector_hand_off_becomes_push_and_pop():
    # 16 x 64 FP32 crosses: 4096-byte slots, 2 of them in the vector core's reserved buffer
    _, out = run(LINEAR_RELU)
    assert_same(out, f"""
    @pl.function(type=pl.FunctionType.AIC)
    def k_aic({PARAMS_MM}):
        k_c2v_slot_buffer_import: pl.Scalar[pl.INT32] = pl.system.import_peer_buffer(name="k_c2v_slot_buffer", peer_func="k_aiv")
        pl.system.aic_initialize_pipe(k_c2v_slot_buffer_import, pl.const(0, pl.INT32), dir_mask=1, slot_size=4096, slot_num=2){CUBE_PART}
        pl.tile.tpush_to_aiv(acc, split=0)
    @pl.function(type=pl.FunctionType.AIV)
    def k_aiv({PARAMS_MM}) -> pl.Tensor[[16, 64], pl.FP32]:
        k_c2v_slot_buffer: pl.Scalar[pl.INT32] = pl.system.reserve_buffer(name="k_c2v_slot_buffer", size=8192, base=-1)
        pl.system.aiv_initialize_pipe(k_c2v_slot_buffer, pl.const(0, pl.INT32), dir_mask=1, slot_size=4096, slot_num=2)
        y: pl.Tile[[16, 64], pl.FP32, pl.Mem.Vec] = pl.tile.tpop_from_aic(split=0)
        r: pl.Tile[[16, 64], pl.FP32, pl.Mem.Vec] = pl.tile.relu(y)
        pl.system.tfree_to_aic(y)
        out_1: pl.Tensor[[16, 64], pl.FP32] = pl.tile.store(r, [0, 0], out)
        return out_1
    @pl.function(type=pl.FunctionType.Group)
    def k({PARAMS_MM}) -> pl.Tensor[[16, 64], pl.FP32]:
        self.k_aic(x, w, out)
        self.k_aiv(x, w, out)
        return out
    @pl.function(type=pl.FunctionType.Orchestration)
    def main({PARAMS_MM}) -> pl.Tensor[[16, 64], pl.FP32]:
        o: pl.Tensor[[16, 64], pl.FP32] = self.k(x, w, out)
        return o
    """)


PARAMS_V2C = ("self, a: pl.Tensor[[16, 128], pl.FP16], w: pl.Tensor[[128, 64], pl.FP16], "
              "out: pl.Out[pl.Tensor[[16, 64], pl.FP32]]")
V2C = f"""
@pl.function(type=pl.FunctionType.InCore)
def k({PARAMS_V2C}) -> pl.Tensor[[16, 64], pl.FP32]:
    ta: pl.Tile[[16, 128], pl.FP16, pl.Mem.Vec] = pl.tile.load(a, [0, 0], [16, 128], target_memory=pl.Mem.Vec)
    s: pl.Tile[[16, 128], pl.FP16, pl.Mem.Vec] = pl.tile.add(ta, ta)
    s_mat: pl.Tile[[16, 128], pl.FP16, pl.Mem.Mat] = pl.tile.move(s, target_memory=pl.Mem.Mat)
    s_left: pl.Tile[[16, 128], pl.FP16, pl.Mem.Left] = pl.tile.move(s_mat, target_memory=pl.Mem.Left)
    w_mat: pl.Tile[[128, 64], pl.FP16, pl.Mem.Mat] = pl.tile.load(w, [0, 0], [128, 64], target_memory=pl.Mem.Mat)
    w_right: pl.Tile[[128, 64], pl.FP16, pl.Mem.Right] = pl.tile.move(w_mat, target_memory=pl.Mem.Right)
    acc: pl.Tile[[16, 64], pl.FP32, pl.Mem.Acc] = pl.tile.matmul(s_left, w_right)
    out_1: pl.Tensor[[16, 64], pl.FP32] = pl.tile.store(acc, [0, 0], out)
    return out_1
"""


def v2c_expected(aiv_push: str) -> str:
    return f"""
    @pl.function(type=pl.FunctionType.AIC)
    def k_aic({PARAMS_V2C}):
        k_v2c_slot_buffer: pl.Scalar[pl.INT32] = pl.system.reserve_buffer(name="k_v2c_slot_buffer", size=8192, base=-1)
        pl.system.aic_initialize_pipe(pl.const(0, pl.INT32), k_v2c_slot_buffer, dir_mask=2, slot_size=4096, slot_num=2)
        s_mat: pl.Tile[[16, 128], pl.FP16, pl.Mem.Mat] = pl.tile.tpop_from_aiv(split=0)
        s_left: pl.Tile[[16, 128], pl.FP16, pl.Mem.Left] = pl.tile.move(s_mat, target_memory=pl.Mem.Left)
        pl.system.tfree_to_aiv(s_mat)
        w_mat: pl.Tile[[128, 64], pl.FP16, pl.Mem.Mat] = pl.tile.load(w, [0, 0], [128, 64], target_memory=pl.Mem.Mat)
        w_right: pl.Tile[[128, 64], pl.FP16, pl.Mem.Right] = pl.tile.move(w_mat, target_memory=pl.Mem.Right)
        acc: pl.Tile[[16, 64], pl.FP32, pl.Mem.Acc] = pl.tile.matmul(s_left, w_right)
        out_1: pl.Tensor[[16, 64], pl.FP32] = pl.tile.store(acc, [0, 0], out)
    @pl.function(type=pl.FunctionType.AIV)
    def k_aiv({PARAMS_V2C}) -> pl.Tensor[[16, 64], pl.FP32]:
        k_v2c_slot_buffer_import: pl.Scalar[pl.INT32] = pl.system.import_peer_buffer(name="k_v2c_slot_buffer", peer_func="k_aic")
        pl.system.aiv_initialize_pipe(pl.const(0, pl.INT32), k_v2c_slot_buffer_import, dir_mask=2, slot_size=4096, slot_num=2)
        ta: pl.Tile[[16, 128], pl.FP16, pl.Mem.Vec] = pl.tile.load(a, [0, 0], [16, 128], target_memory=pl.Mem.Vec)
        s: pl.Tile[[16, 128], pl.FP16, pl.Mem.Vec] = pl.tile.add(ta, ta){aiv_push}
        return out
    @pl.function(type=pl.FunctionType.Group)
    def k({PARAMS_V2C}) -> pl.Tensor[[16, 64], pl.FP32]:
        self.k_aic(a, w, out)
        self.k_aiv(a, w, out)
        return out
    """


def test_vector_to_cube_on_a5_relays_the_tile_out_as_nz_before_the_push():
    # the AIC stores the result, so the AIV returns the output parameter the store wrote
    _, out = run(V2C, A5)
    assert_same(out, v2c_expected("""
        s_nz: pl.Tile[[16, 128], pl.FP16, pl.Mem.Vec, pl.TileView(blayout=pl.TileLayout.col_major, slayout=pl.TileLayout.row_major)] = pl.tile.move(s, target_memory=pl.Mem.Vec, blayout=pl.TileLayout.col_major, slayout=pl.TileLayout.row_major)
        pl.tile.tpush_to_aic(s_nz, split=0)"""), A5)


def on_both_lanes(expected: str) -> str:
    """An expected a2a3 program: its unsplit AIV kernel is marked for dispatch on both vector lanes."""
    return (expected.replace("@pl.function(type=pl.FunctionType.AIV)",
                             '@pl.function(type=pl.FunctionType.AIV, attrs={"dual_aiv_dispatch": True})')
            .replace('@pl.function(type=pl.FunctionType.AIV, attrs={"slot_num": 4})',
                     '@pl.function(type=pl.FunctionType.AIV, attrs={"slot_num": 4, "dual_aiv_dispatch": True})'))


def test_vector_to_mat_on_a2a3_pushes_the_tile_as_it_is():
    _, out = run(V2C, A2A3)
    assert_same(out, on_both_lanes(v2c_expected("""
        pl.tile.tpush_to_aic(s, split=0)""")), A2A3)


def test_on_a2a3_an_unsplit_aiv_kernel_is_marked_for_both_vector_lanes():
    # the a2a3 runtime starts the vector kernel on both lanes of the core pair whenever a cube kernel feeds
    # it; with no split mode, lane 1 has no share of the work (SplitVectorKernel gives it a replay)
    _, a2a3 = run(LINEAR_RELU, A2A3)
    aiv = next(f for f in a2a3.functions if f.name == "k_aiv")
    assert [(k.value, v.value) for k, v in aiv.attr_items()] == [("dual_aiv_dispatch", True)]
    assert all(not f.attr_items() for f in a2a3.functions if f.name != "k_aiv")
    _, a5 = run(LINEAR_RELU, A5)  # a5 launches one vector lane for an unsplit kernel
    assert all(not f.attr_items() for f in a5.functions)


def test_a_kernel_with_a_split_mode_is_not_marked_here():
    # a split kernel's lanes share the work; SplitVectorKernel marks it when it halves the body
    split = LINEAR_RELU.replace("@pl.function(type=pl.FunctionType.InCore)",
                                '@pl.function(type=pl.FunctionType.InCore, attrs={"split": pl.SplitMode.UP_DOWN})')
    _, out = run(split, A2A3)
    aiv = next(f for f in out.functions if f.name == "k_aiv")
    assert aiv.attr("dual_aiv_dispatch") is None
    assert aiv.attr("split").member == "UP_DOWN"


LOOP = """
@pl.function(type=pl.FunctionType.InCore)
def k(self, x: pl.Tensor[[16, 128], pl.BF16], w: pl.Tensor[[128, 256], pl.BF16], out: pl.Out[pl.Tensor[[16, 256], pl.FP32]]) -> pl.Tensor[[16, 256], pl.FP32]:
    x_mat: pl.Tile[[16, 128], pl.BF16, pl.Mem.Mat] = pl.tile.load(x, [0, 0], [16, 128], target_memory=pl.Mem.Mat)
    x_left: pl.Tile[[16, 128], pl.BF16, pl.Mem.Left] = pl.tile.move(x_mat, target_memory=pl.Mem.Left)
    for n, (o,) in pl.range(4, init_values=(out,)):
        c: pl.Scalar[pl.INDEX] = n * 64
        w_mat: pl.Tile[[128, 64], pl.BF16, pl.Mem.Mat] = pl.tile.load(w, [0, c], [128, 64], target_memory=pl.Mem.Mat)
        w_right: pl.Tile[[128, 64], pl.BF16, pl.Mem.Right] = pl.tile.move(w_mat, target_memory=pl.Mem.Right)
        acc: pl.Tile[[16, 64], pl.FP32, pl.Mem.Acc] = pl.tile.matmul(x_left, w_right)
        y: pl.Tile[[16, 64], pl.FP32, pl.Mem.Vec] = pl.tile.move(acc, target_memory=pl.Mem.Vec, blayout=pl.TileLayout.row_major, slayout=pl.TileLayout.none_box)
        r: pl.Tile[[16, 64], pl.FP32, pl.Mem.Vec] = pl.tile.muls(y, 0.5)
        o2: pl.Tensor[[16, 256], pl.FP32] = pl.tile.store(r, [0, c], o)
        o_out: pl.Tensor[[16, 256], pl.FP32] = pl.yield_(o2)
    return o_out
"""


def test_a_loop_holding_both_sides_is_kept_on_both_with_each_sides_work():
    # the AIC keeps the loop (index arithmetic is shared) but not the tensor the AIV stores into: its
    # yield of the AIV's store result becomes the loop-carried value itself, which nothing reads, so the
    # loop stops carrying it; dead code goes
    _, out = run(LOOP)
    text = print_program(out)
    aic = out.function("k_aic")
    aiv = out.function("k_aiv")
    assert aic.func_type == "AIC" and aiv.func_type == "AIV" and out.function("k").func_type == "Group"
    aic_text = print_program(type(out)(out.name, (aic,)))
    aiv_text = print_program(type(out)(out.name, (aiv,)))
    assert "pl.tile.tpush_to_aiv(acc, split=0)" in aic_text
    assert "pl.tile.store" not in aic_text and "pl.tile.muls" not in aic_text
    assert "for n in pl.range(4):" in aic_text and "pl.yield_" not in aic_text
    assert "y: pl.Tile[[16, 64], pl.FP32, pl.Mem.Vec] = pl.tile.tpop_from_aic(split=0)" in aiv_text
    assert "pl.tile.matmul" not in aiv_text and "x_mat" not in aiv_text
    # the pop is freed after its last use (muls), inside the loop body
    lines = [ln.strip() for ln in aiv_text.splitlines()]
    i_pop = lines.index("y: pl.Tile[[16, 64], pl.FP32, pl.Mem.Vec] = pl.tile.tpop_from_aic(split=0)")
    assert lines[i_pop + 2] == "pl.system.tfree_to_aic(y)"
    assert "return o_out" in text


def test_kernels_that_are_not_mixed_only_get_their_kind():
    only_vector = f"""
    @pl.function(type=pl.FunctionType.InCore)
    def k({PARAMS_V2C}) -> pl.Tensor[[16, 64], pl.FP32]:
        ta: pl.Tile[[16, 64], pl.FP32, pl.Mem.Vec] = pl.tile.load(out, [0, 0], [16, 64], target_memory=pl.Mem.Vec)
        out_1: pl.Tensor[[16, 64], pl.FP32] = pl.tile.store(ta, [0, 0], out)
        return out_1
    """
    before, after = run(only_vector)
    assert [f.func_type for f in after.functions] == ["AIV"]
    assert after.functions[0].body == before.functions[0].body


def test_expanding_twice_changes_nothing():
    _, once = run(LINEAR_RELU)
    assert ExpandMixedKernel().run(once, A5) is once


def test_a_while_loop_holding_both_sides_is_e0622():
    text = f"""
    @pl.function(type=pl.FunctionType.InCore)
    def k({PARAMS_MM}) -> pl.Tensor[[16, 64], pl.FP32]:{CUBE_PART}
        for (i,) in pl.while_(init_values=(0,)):
            pl.cond(i < 2)
            y: pl.Tile[[16, 64], pl.FP32, pl.Mem.Vec] = pl.tile.move(acc, target_memory=pl.Mem.Vec, blayout=pl.TileLayout.row_major, slayout=pl.TileLayout.none_box)
            out_1: pl.Tensor[[16, 64], pl.FP32] = pl.tile.store(y, [0, 0], out)
            i2: pl.Scalar[pl.INDEX] = i + 1
            i_out: pl.Scalar[pl.INDEX] = pl.yield_(i2)
        return out
    """
    with pytest.raises(CompileError) as e:
        run(text)
    assert e.value.diagnostics[0].code == "PTOC-E0622"


def test_a_kernel_launched_by_groups_is_replaced_in_them_by_the_pair():
    text = LINEAR_RELU.replace("@pl.function(type=pl.FunctionType.Orchestration)\ndef main", (
        "@pl.function(type=pl.FunctionType.Group)\ndef g"))
    _, out = run(text)
    assert [f.name for f in out.functions] == ["k_aic", "k_aiv", "g"]  # no Group of k's own
    g = print_program(type(out)(out.name, (out.function("g"),)))
    assert "self.k_aic(x, w, out)\n        o: pl.Tensor[[16, 64], pl.FP32] = self.k_aiv(x, w, out)" in g


def test_a_cube_store_the_vector_core_loads_is_fenced_by_a_push_and_a_pop():
    text = f"""
    @pl.function(type=pl.FunctionType.InCore)
    def k(self, x: pl.Tensor[[16, 128], pl.BF16], w: pl.Tensor[[128, 64], pl.BF16], mid: pl.Out[pl.Tensor[[16, 64], pl.FP32]], out: pl.Out[pl.Tensor[[16, 64], pl.FP32]]) -> pl.Tensor[[16, 64], pl.FP32]:{CUBE_PART}
        mid_1: pl.Tensor[[16, 64], pl.FP32] = pl.tile.store(acc, [0, 0], mid)
        t: pl.Tile[[16, 64], pl.FP32, pl.Mem.Vec] = pl.tile.load(mid_1, [0, 0], [16, 64], target_memory=pl.Mem.Vec)
        e: pl.Tile[[16, 64], pl.FP32, pl.Mem.Vec] = pl.tile.exp(t)
        out_1: pl.Tensor[[16, 64], pl.FP32] = pl.tile.store(e, [0, 0], out)
        return out_1
    """
    _, out = run(text)
    aic = print_program(type(out)(out.name, (out.function("k_aic"),)))
    aiv = print_program(type(out)(out.name, (out.function("k_aiv"),)))
    # the AIC pushes the stored tile right after the store; the AIV pops it (and frees it at once) right
    # before its load, which reads the tensor itself (the AIC's store result is not defined on the AIV)
    assert ("mid_1: pl.Tensor[[16, 64], pl.FP32] = pl.tile.store(acc, [0, 0], mid)\n"
            "        pl.tile.tpush_to_aiv(acc, split=0)") in aic
    assert ("t_ready: pl.Tile[[16, 64], pl.FP32, pl.Mem.Vec] = pl.tile.tpop_from_aic(split=0)\n"
            "        pl.system.tfree_to_aic(t_ready)\n"
            "        t: pl.Tile[[16, 64], pl.FP32, pl.Mem.Vec] = pl.tile.load(mid, [0, 0], [16, 64], "
            "target_memory=pl.Mem.Vec)") in aiv


# a Vec tile moved straight to Left (PyPTO's direct vector -> cube boundary) and a C2V hand-off back
DIRECT_LEFT = f"""
@pl.function(type=pl.FunctionType.InCore, attrs={{"slot_num": 4}})
def k({PARAMS_V2C}) -> pl.Tensor[[16, 64], pl.FP32]:
    ta: pl.Tile[[16, 128], pl.FP16, pl.Mem.Vec] = pl.tile.load(a, [0, 0], [16, 128], target_memory=pl.Mem.Vec)
    s_left: pl.Tile[[16, 128], pl.FP16, pl.Mem.Left] = pl.tile.move(ta, target_memory=pl.Mem.Left)
    w_mat: pl.Tile[[128, 64], pl.FP16, pl.Mem.Mat] = pl.tile.load(w, [0, 0], [128, 64], target_memory=pl.Mem.Mat)
    w_right: pl.Tile[[128, 64], pl.FP16, pl.Mem.Right] = pl.tile.move(w_mat, target_memory=pl.Mem.Right)
    acc: pl.Tile[[16, 64], pl.FP32, pl.Mem.Acc] = pl.tile.matmul(s_left, w_right)
    y: pl.Tile[[16, 64], pl.FP32, pl.Mem.Vec] = pl.tile.move(acc, target_memory=pl.Mem.Vec, blayout=pl.TileLayout.row_major, slayout=pl.TileLayout.none_box)
    out_1: pl.Tensor[[16, 64], pl.FP32] = pl.tile.store(y, [0, 0], out)
    return out_1
"""


def direct_left_expected(aiv_push: str) -> str:
    # both directions: each side sets up the V2C pipe's buffer first, then the C2V one; the ring depth is the
    # function's slot_num (4: 4 x 4096 bytes reserved); the AIC's move on from Mat names Left's own layout
    a = 'attrs={"slot_num": 4}'
    return f"""
    @pl.function(type=pl.FunctionType.AIC, {a})
    def k_aic({PARAMS_V2C}):
        k_v2c_slot_buffer: pl.Scalar[pl.INT32] = pl.system.reserve_buffer(name="k_v2c_slot_buffer", size=16384, base=-1)
        k_c2v_slot_buffer_import: pl.Scalar[pl.INT32] = pl.system.import_peer_buffer(name="k_c2v_slot_buffer", peer_func="k_aiv")
        pl.system.aic_initialize_pipe(k_c2v_slot_buffer_import, k_v2c_slot_buffer, dir_mask=3, slot_size=4096, slot_num=4)
        s_left_mat: pl.Tile[[16, 128], pl.FP16, pl.Mem.Mat] = pl.tile.tpop_from_aiv(split=0)
        s_left: pl.Tile[[16, 128], pl.FP16, pl.Mem.Left] = pl.tile.move(s_left_mat, target_memory=pl.Mem.Left, blayout=pl.TileLayout.col_major, slayout=pl.TileLayout.row_major)
        pl.system.tfree_to_aiv(s_left_mat)
        w_mat: pl.Tile[[128, 64], pl.FP16, pl.Mem.Mat] = pl.tile.load(w, [0, 0], [128, 64], target_memory=pl.Mem.Mat)
        w_right: pl.Tile[[128, 64], pl.FP16, pl.Mem.Right] = pl.tile.move(w_mat, target_memory=pl.Mem.Right)
        acc: pl.Tile[[16, 64], pl.FP32, pl.Mem.Acc] = pl.tile.matmul(s_left, w_right)
        pl.tile.tpush_to_aiv(acc, split=0)
    @pl.function(type=pl.FunctionType.AIV, {a})
    def k_aiv({PARAMS_V2C}) -> pl.Tensor[[16, 64], pl.FP32]:
        k_v2c_slot_buffer_import: pl.Scalar[pl.INT32] = pl.system.import_peer_buffer(name="k_v2c_slot_buffer", peer_func="k_aic")
        k_c2v_slot_buffer: pl.Scalar[pl.INT32] = pl.system.reserve_buffer(name="k_c2v_slot_buffer", size=16384, base=-1)
        pl.system.aiv_initialize_pipe(k_c2v_slot_buffer, k_v2c_slot_buffer_import, dir_mask=3, slot_size=4096, slot_num=4)
        ta: pl.Tile[[16, 128], pl.FP16, pl.Mem.Vec] = pl.tile.load(a, [0, 0], [16, 128], target_memory=pl.Mem.Vec){aiv_push}
        y: pl.Tile[[16, 64], pl.FP32, pl.Mem.Vec] = pl.tile.tpop_from_aic(split=0)
        out_1: pl.Tensor[[16, 64], pl.FP32] = pl.tile.store(y, [0, 0], out)
        pl.system.tfree_to_aic(y)
        return out_1
    @pl.function(type=pl.FunctionType.Group, {a})
    def k({PARAMS_V2C}) -> pl.Tensor[[16, 64], pl.FP32]:
        self.k_aic(a, w, out)
        self.k_aiv(a, w, out)
        return out
    """


def test_a_vec_tile_moved_to_left_pops_into_mat_then_moves_on_in_left_layout():
    # A5: the AIV re-lays the tile out as NZ before the push; A2/A3: the pipe runs through GM, and the cube
    # side's pop into Mat lays the rows out as fractals, so the tile is pushed as it is
    _, out = run(DIRECT_LEFT, A5)
    assert_same(out, direct_left_expected("""
        ta_nz: pl.Tile[[16, 128], pl.FP16, pl.Mem.Vec, pl.TileView(blayout=pl.TileLayout.col_major, slayout=pl.TileLayout.row_major)] = pl.tile.move(ta, target_memory=pl.Mem.Vec, blayout=pl.TileLayout.col_major, slayout=pl.TileLayout.row_major)
        pl.tile.tpush_to_aic(ta_nz, split=0)"""), A5)
    _, out = run(DIRECT_LEFT, A2A3)
    assert_same(out, on_both_lanes(direct_left_expected("""
        pl.tile.tpush_to_aic(ta, split=0)""")), A2A3)


HAND_WRITTEN_PUSH = """
@pl.function(type=pl.FunctionType.AIV)
def v(self, a: pl.Tensor[[16, 16], pl.FP32]):
    peer: pl.Scalar[pl.INT32] = pl.system.import_peer_buffer(name="buf", peer_func="c")
    pl.system.aiv_initialize_pipe(pl.const(0, pl.INT32), peer, dir_mask=2, slot_size=1024)
    t: pl.Tile[[16, 16], pl.FP32, pl.Mem.Vec] = pl.tile.load(a, [0, 0], [16, 16], target_memory=pl.Mem.Vec)
    for i in pl.range(2):
        pl.tile.tpush_to_aic(t, split=0)
"""


def test_a_push_written_by_hand_in_an_aiv_kernel_is_relaid_out_as_nz_on_a5_only():
    _, out = run(HAND_WRITTEN_PUSH, A5)
    assert_same(out, """
    @pl.function(type=pl.FunctionType.AIV)
    def v(self, a: pl.Tensor[[16, 16], pl.FP32]):
        peer: pl.Scalar[pl.INT32] = pl.system.import_peer_buffer(name="buf", peer_func="c")
        pl.system.aiv_initialize_pipe(pl.const(0, pl.INT32), peer, dir_mask=2, slot_size=1024)
        t: pl.Tile[[16, 16], pl.FP32, pl.Mem.Vec] = pl.tile.load(a, [0, 0], [16, 16], target_memory=pl.Mem.Vec)
        for i in pl.range(2):
            t_nz: pl.Tile[[16, 16], pl.FP32, pl.Mem.Vec, pl.TileView(blayout=pl.TileLayout.col_major, slayout=pl.TileLayout.row_major)] = pl.tile.move(t, target_memory=pl.Mem.Vec, blayout=pl.TileLayout.col_major, slayout=pl.TileLayout.row_major)
            pl.tile.tpush_to_aic(t_nz, split=0)
    """, A5)
    before, out = run(HAND_WRITTEN_PUSH, A2A3)
    assert out is before
    again = ExpandMixedKernel().run(run(HAND_WRITTEN_PUSH, A5)[1], A5)
    assert print_program(again) == print_program(run(HAND_WRITTEN_PUSH, A5)[1])  # an NZ tile is pushed as it is


def test_a_leading_lane_index_stays_above_the_aiv_pipe_set_up():
    # LowerAutoVectorSplit starts the kernel with its lane index; the AIV kernel keeps that line first and
    # reserves and initialises its pipe right after it (PyPTO's order), while the AIC kernel, whose body
    # does not use the index, starts with its set-up.
    split = LINEAR_RELU.replace(
        f"def k({PARAMS_MM}) -> pl.Tensor[[16, 64], pl.FP32]:",
        f"def k({PARAMS_MM}) -> pl.Tensor[[16, 64], pl.FP32]:\n"
        "        sb: pl.Scalar[pl.INDEX] = pl.tile.get_subblock_idx()")
    split = split.replace("pl.tile.store(r, [0, 0], out)", "pl.tile.store(r, [sb * 0, 0], out)")
    _, after = run(split)
    aiv = next(f for f in after.functions if f.name == "k_aiv")
    ops = [s.value.op if hasattr(s, "value") else s.expr.op for s in aiv.body[:3]]
    assert ops == ["tile.get_subblock_idx", "system.reserve_buffer", "system.aiv_initialize_pipe"], ops
    aic = next(f for f in after.functions if f.name == "k_aic")
    assert aic.body[0].value.op == "system.import_peer_buffer"
