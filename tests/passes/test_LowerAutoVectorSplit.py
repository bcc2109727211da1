"""LowerAutoVectorSplit: a mixed InCore kernel with a split attribute is written per lane (cube -> vector
moves become tile.aiv_shard, vector -> cube moves tile.aic_gather, Vec loads/slices take the lane's half,
stores move by subblock_idx * half); pure vector kernels and unsplit kernels are left alone. Expected
programs written out by hand."""

import textwrap

import pytest

from ptoc.context import CompileContext
from ptoc.diagnostics import CompileError
from ptoc.frontend.parser import parse_program
from ptoc.ir.printer import print_program
from ptoc.passes.LowerAutoVectorSplit import LowerAutoVectorSplit
from ptoc.passes.manager import check_invariants

A5 = CompileContext(arch="a5")
HEAD = "import pypto.language as pl\n\n@pl.program\nclass p:\n"


def prog(text: str) -> str:
    return HEAD + textwrap.indent(textwrap.dedent(text).strip("\n"), "    ") + "\n"


def run(text: str):
    b = parse_program(prog(text), "before.ir", ctx=A5)
    a = LowerAutoVectorSplit().run(b, A5)
    check_invariants(a, A5, LowerAutoVectorSplit())
    return b, a


def parsed(text: str):
    return parse_program(prog(text), "expected.ir", ctx=A5)


QK = "qk: pl.Tile[[128, 128], pl.FP32, pl.Mem.Mat]"
OUT = "out: pl.Out[pl.Tensor[[128, 128], pl.FP32]]) -> pl.Tensor[[128, 128], pl.FP32]"


def test_an_up_down_kernel_shards_the_cube_tile_and_stores_at_the_lanes_rows():
    _, out = run(f"""
    @pl.function(type=pl.FunctionType.InCore, attrs={{"split": pl.SplitMode.UP_DOWN}})
    def k(self, {QK}, data: pl.Tensor[[128, 128], pl.FP32], {OUT}:
        v: pl.Tile[[128, 128], pl.FP32, pl.Mem.Vec] = pl.tile.move(qk, target_memory=pl.Mem.Vec)
        d: pl.Tile[[128, 128], pl.FP32, pl.Mem.Vec] = pl.tile.load(data, [0, 0], [128, 128], target_memory=pl.Mem.Vec)
        y: pl.Tile[[128, 128], pl.FP32, pl.Mem.Vec] = pl.tile.add(v, d)
        o: pl.Tensor[[128, 128], pl.FP32] = pl.tile.store(y, [0, 0], out)
        return o
    """)
    want = parsed(f"""
    @pl.function(type=pl.FunctionType.InCore, attrs={{"split": pl.SplitMode.UP_DOWN, "split_aiv": True}})
    def k(self, {QK}, data: pl.Tensor[[128, 128], pl.FP32], {OUT}:
        subblock_idx: pl.Scalar[pl.INDEX] = pl.tile.get_subblock_idx()
        v = pl.tile.aiv_shard(qk, split=1)
        d = pl.tile.load(data, [0 + subblock_idx * 64, 0], [64, 128], target_memory=pl.Mem.Vec)
        y = pl.tile.add(v, d)
        o: pl.Tensor[[128, 128], pl.FP32] = pl.tile.store(y, [0 + subblock_idx * 64, 0], out)
        return o
    """)
    assert out == want, print_program(out)
    y = [s for s in out.functions[0].body if getattr(s, "target", None) is not None and s.target.name == "y"]
    assert y and y[0].annotation is None  # typed again from the halved operands


def test_a_left_right_kernel_gathers_a_lanes_tile_back_for_the_cube():
    _, out = run(f"""
    @pl.function(type=pl.FunctionType.InCore, attrs={{"split": pl.SplitMode.LEFT_RIGHT}})
    def k(self, {QK}, {OUT}:
        v: pl.Tile[[128, 128], pl.FP32, pl.Mem.Vec] = pl.tile.move(qk, target_memory=pl.Mem.Vec)
        m: pl.Tile[[128, 128], pl.FP32, pl.Mem.Mat] = pl.tile.move(v, target_memory=pl.Mem.Mat)
        o: pl.Tensor[[128, 128], pl.FP32] = pl.tile.store(v, [0, 0], out)
        return o
    """)
    want = parsed(f"""
    @pl.function(type=pl.FunctionType.InCore, attrs={{"split": pl.SplitMode.LEFT_RIGHT, "split_aiv": True}})
    def k(self, {QK}, {OUT}:
        subblock_idx: pl.Scalar[pl.INDEX] = pl.tile.get_subblock_idx()
        v = pl.tile.aiv_shard(qk, split=2)
        m_gathered = pl.tile.aic_gather(v, split=2)
        m = pl.tile.move(m_gathered, target_memory=pl.Mem.Mat)
        o: pl.Tensor[[128, 128], pl.FP32] = pl.tile.store(v, [0, 0 + subblock_idx * 64], out)
        return o
    """)
    assert out == want, print_program(out)


def test_an_odd_valid_extent_sets_the_lane_stride_of_a_used_shard():
    _, out = run("""
    @pl.function(type=pl.FunctionType.InCore, attrs={"split": pl.SplitMode.UP_DOWN})
    def k(self, qk: pl.Tile[[16, 128], pl.FP32, pl.Mem.Mat, pl.TileView(valid_shape=[13, 128])], out: pl.Out[pl.Tensor[[16, 128], pl.FP32]]) -> pl.Tensor[[16, 128], pl.FP32]:
        v = pl.tile.move(qk, target_memory=pl.Mem.Vec)
        o: pl.Tensor[[16, 128], pl.FP32] = pl.tile.store(v, [0, 0], out)
        return o
    """)
    text = print_program(out)
    # ceil(13 / 2) = 7 rows per lane, not ceil(16 / 2) = 8: lane 1 starts at row 7
    assert "pl.tile.aiv_shard(qk, split=1, lane_stride=7)" in text
    assert "pl.tile.store(v, [0 + subblock_idx * 7, 0], out)" in text


def test_pure_vector_and_unsplit_kernels_are_the_same_objects():
    b, a = run("""
    @pl.function(type=pl.FunctionType.InCore, attrs={"split": pl.SplitMode.UP_DOWN})
    def k(self, x: pl.Tensor[[128, 128], pl.FP32], out: pl.Out[pl.Tensor[[128, 128], pl.FP32]]) -> pl.Tensor[[128, 128], pl.FP32]:
        t: pl.Tile[[128, 128], pl.FP32, pl.Mem.Vec] = pl.tile.load(x, [0, 0], [128, 128], target_memory=pl.Mem.Vec)
        o: pl.Tensor[[128, 128], pl.FP32] = pl.tile.store(t, [0, 0], out)
        return o
    @pl.function(type=pl.FunctionType.InCore)
    def u(self, qk: pl.Tile[[128, 128], pl.FP32, pl.Mem.Mat], out: pl.Out[pl.Tensor[[128, 128], pl.FP32]]) -> pl.Tensor[[128, 128], pl.FP32]:
        v: pl.Tile[[128, 128], pl.FP32, pl.Mem.Vec] = pl.tile.move(qk, target_memory=pl.Mem.Vec)
        o: pl.Tensor[[128, 128], pl.FP32] = pl.tile.store(v, [0, 0], out)
        return o
    """)
    assert a is b


def test_an_op_taking_the_full_box_explicitly_is_an_error_not_a_crash():
    text = f"""
    @pl.function(type=pl.FunctionType.InCore, attrs={{"split": pl.SplitMode.UP_DOWN}})
    def k(self, {QK}, out: pl.Out[pl.Tensor[[1, 16384], pl.FP32]]) -> pl.Tensor[[1, 16384], pl.FP32]:
        v: pl.Tile[[128, 128], pl.FP32, pl.Mem.Vec] = pl.tile.move(qk, target_memory=pl.Mem.Vec)
        r: pl.Tile[[1, 16384], pl.FP32, pl.Mem.Vec] = pl.tile.reshape(v, [1, 16384])
        o: pl.Tensor[[1, 16384], pl.FP32] = pl.tile.store(r, [0, 0], out)
        return o
    """
    with pytest.raises(CompileError) as e:
        run(text)
    assert [d.code for d in e.value.diagnostics] == ["PTOC-E0681"]


SEED = "seed: pl.Tile[[128, 128], pl.FP32, pl.Mem.Mat]"
COLUMN = """
    @pl.function(type=pl.FunctionType.InCore, attrs={{"split": pl.SplitMode.UP_DOWN}})
    def k(self, {seed}, scale: pl.Tensor[[128], pl.FP32], out: pl.Out[pl.Tensor[[128, 1], pl.FP32]]) -> pl.Tensor[[128, 1], pl.FP32]:
        v: pl.Tile[[128, 128], pl.FP32, pl.Mem.Vec] = pl.tile.move(seed, target_memory=pl.Mem.Vec)
        row: pl.Tile[[128], pl.FP32, pl.Mem.Vec] = pl.tile.load(scale, [0], [128], target_memory=pl.Mem.Vec)
        col: pl.Tile[[128, 1], pl.FP32, pl.Mem.Vec] = pl.tile.reshape(row, [128, 1])
        o: pl.Tensor[[128, 1], pl.FP32] = pl.tile.store(col, [0, 0], out)
        return o
"""


def test_a_rank1_load_stays_whole_and_its_2d_reshape_is_sliced_per_lane():
    # a rank-1 tile has no split axis; the reshape that gives it one is followed by the lane's slice
    _, out = run(COLUMN.format(seed=SEED))
    want = parsed(f"""
    @pl.function(type=pl.FunctionType.InCore, attrs={{"split": pl.SplitMode.UP_DOWN, "split_aiv": True}})
    def k(self, {SEED}, scale: pl.Tensor[[128], pl.FP32], out: pl.Out[pl.Tensor[[128, 1], pl.FP32]]) -> pl.Tensor[[128, 1], pl.FP32]:
        subblock_idx: pl.Scalar[pl.INDEX] = pl.tile.get_subblock_idx()
        v = pl.tile.aiv_shard(seed, split=1)
        row: pl.Tile[[128], pl.FP32, pl.Mem.Vec] = pl.tile.load(scale, [0], [128], target_memory=pl.Mem.Vec)
        col_1 = pl.tile.reshape(row, [128, 1])
        col = pl.tile.slice(col_1, [64, 1], [subblock_idx * 64, 0])
        o: pl.Tensor[[128, 1], pl.FP32] = pl.tile.store(col, [0 + subblock_idx * 64, 0], out)
        return o
    """)
    assert out == want, print_program(out)


def test_the_two_lanes_together_store_a_reshaped_rank1_load_whole():
    import numpy as np

    from ptoc.reference.interp import run_function

    _, out = run(COLUMN.format(seed=SEED))
    scale = np.arange(128, dtype=np.float32) * 0.5 + 1.0
    # the reference runs a split_aiv kernel once per lane; a lane that sliced lane 0's rows would write
    # scale[0:64] into rows 64..127
    got = run_function(out, "k", {"seed": np.zeros((128, 128), np.float32), "scale": scale,
                                  "out": np.zeros((128, 1), np.float32)}, A5)["out"]
    np.testing.assert_array_equal(got[:, 0], scale)


def test_a_reshape_of_a_lanes_tile_names_the_half_and_a_reinterpret_shape_too():
    _, out = run(f"""
    @pl.function(type=pl.FunctionType.InCore, attrs={{"split": pl.SplitMode.UP_DOWN}})
    def k(self, {SEED}, data: pl.Tensor[[16, 16], pl.FP32], out: pl.Out[pl.Tensor[[256, 1], pl.FP32]], bits_out: pl.Out[pl.Tensor[[16, 32], pl.INT16]]) -> pl.Tensor[[256, 1], pl.FP32]:
        v: pl.Tile[[128, 128], pl.FP32, pl.Mem.Vec] = pl.tile.move(seed, target_memory=pl.Mem.Vec)
        t: pl.Tile[[16, 16], pl.FP32, pl.Mem.Vec] = pl.tile.load(data, [0, 0], [16, 16], target_memory=pl.Mem.Vec)
        flat: pl.Tile[[256, 1], pl.FP32, pl.Mem.Vec] = pl.tile.reshape(t, [256, 1])
        bits: pl.Tile[[16, 32], pl.INT16, pl.Mem.Vec] = pl.tile.reinterpret_view(t, dtype=pl.INT16, shape=[16, 32])
        b: pl.Tensor[[16, 32], pl.INT16] = pl.tile.store(bits, [0, 0], bits_out)
        o: pl.Tensor[[256, 1], pl.FP32] = pl.tile.store(flat, [0, 0], out)
        return o
    """)
    want = parsed(f"""
    @pl.function(type=pl.FunctionType.InCore, attrs={{"split": pl.SplitMode.UP_DOWN, "split_aiv": True}})
    def k(self, {SEED}, data: pl.Tensor[[16, 16], pl.FP32], out: pl.Out[pl.Tensor[[256, 1], pl.FP32]], bits_out: pl.Out[pl.Tensor[[16, 32], pl.INT16]]) -> pl.Tensor[[256, 1], pl.FP32]:
        subblock_idx: pl.Scalar[pl.INDEX] = pl.tile.get_subblock_idx()
        v = pl.tile.aiv_shard(seed, split=1)
        t = pl.tile.load(data, [0 + subblock_idx * 8, 0], [8, 16], target_memory=pl.Mem.Vec)
        flat = pl.tile.reshape(t, [128, 1])
        bits = pl.tile.reinterpret_view(t, dtype=pl.INT16, shape=[8, 32])
        b: pl.Tensor[[16, 32], pl.INT16] = pl.tile.store(bits, [0 + subblock_idx * 8, 0], bits_out)
        o: pl.Tensor[[256, 1], pl.FP32] = pl.tile.store(flat, [0 + subblock_idx * 128, 0], out)
        return o
    """)
    assert out == want, print_program(out)


def test_the_two_lanes_together_store_a_reshaped_lane_tile_whole():
    import numpy as np

    from ptoc.reference.interp import run_function

    _, out = run(f"""
    @pl.function(type=pl.FunctionType.InCore, attrs={{"split": pl.SplitMode.UP_DOWN}})
    def k(self, {SEED}, data: pl.Tensor[[16, 16], pl.FP32], out: pl.Out[pl.Tensor[[256, 1], pl.FP32]]) -> pl.Tensor[[256, 1], pl.FP32]:
        v: pl.Tile[[128, 128], pl.FP32, pl.Mem.Vec] = pl.tile.move(seed, target_memory=pl.Mem.Vec)
        t: pl.Tile[[16, 16], pl.FP32, pl.Mem.Vec] = pl.tile.load(data, [0, 0], [16, 16], target_memory=pl.Mem.Vec)
        flat: pl.Tile[[256, 1], pl.FP32, pl.Mem.Vec] = pl.tile.reshape(t, [256, 1])
        o: pl.Tensor[[256, 1], pl.FP32] = pl.tile.store(flat, [0, 0], out)
        return o
    """)
    data = np.arange(256, dtype=np.float32).reshape(16, 16) - 100.0
    got = run_function(out, "k", {"seed": np.zeros((128, 128), np.float32), "data": data,
                                  "out": np.zeros((256, 1), np.float32)}, A5)["out"]
    np.testing.assert_array_equal(got, data.reshape(256, 1))  # row-major: lane 1's rows are flat 128..255


ODD = """
    @pl.function(type=pl.FunctionType.InCore, attrs={{"split": pl.SplitMode.{mode}}})
    def k(self, {seed}, data: pl.Tensor[{shape}, pl.FP32], out: pl.Out[pl.Tensor[{shape}, pl.FP32]]) -> pl.Tensor[{shape}, pl.FP32]:
        v: pl.Tile[[128, 128], pl.FP32, pl.Mem.Vec] = pl.tile.move(seed, target_memory=pl.Mem.Vec)
        t: pl.Tile[{shape}, pl.FP32, pl.Mem.Vec] = pl.tile.load(data, [0, 0], {shape}, target_memory=pl.Mem.Vec)
        o: pl.Tensor[{shape}, pl.FP32] = pl.tile.store(t, [0, 0], out)
        return o
"""


def test_an_odd_split_extent_gives_both_lanes_the_ceil_box_and_lane_1_one_row_less():
    _, out = run(ODD.format(mode="UP_DOWN", seed=SEED, shape="[15, 32]"))
    want = parsed(f"""
    @pl.function(type=pl.FunctionType.InCore, attrs={{"split": pl.SplitMode.UP_DOWN, "split_aiv": True}})
    def k(self, {SEED}, data: pl.Tensor[[15, 32], pl.FP32], out: pl.Out[pl.Tensor[[15, 32], pl.FP32]]) -> pl.Tensor[[15, 32], pl.FP32]:
        subblock_idx: pl.Scalar[pl.INDEX] = pl.tile.get_subblock_idx()
        v = pl.tile.aiv_shard(seed, split=1)
        t = pl.tile.load(data, [0 + subblock_idx * 8, 0], [8, 32], [pl.min(pl.max(15, subblock_idx * 8) - subblock_idx * 8, 8), 32], target_memory=pl.Mem.Vec)
        o: pl.Tensor[[15, 32], pl.FP32] = pl.tile.store(t, [0 + subblock_idx * 8, 0], out)
        return o
    """)
    assert out == want, print_program(out)


@pytest.mark.parametrize("mode, shape", [("UP_DOWN", (15, 32)), ("LEFT_RIGHT", (32, 15))])
def test_the_two_lanes_of_an_odd_split_store_the_tile_once_whole(mode, shape):
    import numpy as np

    from ptoc.reference.interp import run_function

    _, out = run(ODD.format(mode=mode, seed=SEED, shape=list(shape)))
    data = np.arange(15 * 32, dtype=np.float32).reshape(shape) + 1.0
    got = run_function(out, "k", {"seed": np.zeros((128, 128), np.float32), "data": data,
                                  "out": np.zeros(shape, np.float32)}, A5)["out"]
    np.testing.assert_array_equal(got, data)  # lane 1's 7 rows (columns) follow lane 0's 8
