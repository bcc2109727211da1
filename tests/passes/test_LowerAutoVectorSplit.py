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
