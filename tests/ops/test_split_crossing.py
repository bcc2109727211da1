"""The split-axis crossings tile.aiv_shard / tile.aic_gather and their tensor forms: a shard gives each
vector lane a box of ceil(extent / 2) of the split axis (split=1: rows, split=2: columns) in Vec; a gather doubles
it back in Mat; split=0 keeps the shape. The expected types below are worked out by hand from that rule."""

import subprocess
import sys
from pathlib import Path

from optest import codes, diagnostics, types

MAT = "qk: pl.Tile[[128, 64], pl.FP32, pl.Mem.Mat]"
PTOC = str(Path(sys.executable).with_name("ptoc"))


def test_shard_halves_the_split_axis_into_vec():
    t = types(MAT, "a = pl.tile.aiv_shard(qk, split=1)\nb = pl.tile.aiv_shard(qk, split=2)\n"
                   "n = pl.tile.aiv_shard(qk, split=0)\nc = pl.aiv_shard(qk, split=1)")
    assert t["a"] == t["c"] == "pl.Tile[[64, 64], pl.FP32, pl.Mem.Vec]"
    assert t["b"] == "pl.Tile[[128, 32], pl.FP32, pl.Mem.Vec]"
    assert t["n"] == "pl.Tile[[128, 64], pl.FP32, pl.Mem.Vec]"


def test_shard_of_an_odd_extent_takes_the_ceiling_half():
    t = types("qk: pl.Tile[[127, 64], pl.FP32, pl.Mem.Mat]", "a = pl.tile.aiv_shard(qk, split=1)")
    assert t["a"] == "pl.Tile[[64, 64], pl.FP32, pl.Mem.Vec]"


def test_shard_of_partial_rows_bounds_the_valid_rows_by_lane_0():
    # box half H = 64; lane 0 holds min(V, 64) rows, lane 1 min(max(V, 64) - 64, 64): the type is the larger
    t = types("qk: pl.Tile[[128, 64], pl.FP32, pl.Mem.Mat, pl.TileView(valid_shape=[99, 64])]",
              "a = pl.tile.aiv_shard(qk, split=1)")
    assert t["a"] == "pl.Tile[[64, 64], pl.FP32, pl.Mem.Vec]"  # lane 0: 64 rows, lane 1: 35
    t = types("qk: pl.Tile[[128, 64], pl.FP32, pl.Mem.Mat, pl.TileView(valid_shape=[40, 64])]",
              "a = pl.tile.aiv_shard(qk, split=1)")
    assert t["a"] == "pl.Tile[[64, 64], pl.FP32, pl.Mem.Vec, pl.TileView(valid_shape=[40, 64])]"  # lane 1: 0
    t = types("qk: pl.Tile[[128, 64], pl.FP32, pl.Mem.Mat, pl.TileView(valid_shape=[40, 64])]",
              "a = pl.tile.aiv_shard(qk, split=1, lane_stride=32)")
    assert t["a"] == "pl.Tile[[64, 64], pl.FP32, pl.Mem.Vec, pl.TileView(valid_shape=[32, 64])]"  # lane 1: 8


def test_gather_doubles_the_split_axis_into_mat():
    t = types("v: pl.Tile[[64, 64], pl.FP32, pl.Mem.Vec]",
              "a = pl.tile.aic_gather(v, split=1)\nb = pl.aic_gather(v, split=2)")
    assert t["a"] == "pl.Tile[[128, 64], pl.FP32, pl.Mem.Mat]"
    assert t["b"] == "pl.Tile[[64, 128], pl.FP32, pl.Mem.Mat]"


def test_tensor_form_halves_the_tensor():
    t = types("x: pl.Tensor[[128, 64], pl.FP16]",
              "a = pl.tensor.aiv_shard(x, split=1)\nb = pl.aiv_shard(x, split=2)\nn = pl.aiv_shard(x, split=0)")
    assert t["a"] == "pl.Tensor[[64, 64], pl.FP16]"
    assert t["b"] == "pl.Tensor[[128, 32], pl.FP16]"
    assert t["n"] == "pl.Tensor[[128, 64], pl.FP16]"
    g = types("x: pl.Tensor[[64, 64], pl.FP16]", "a = pl.tensor.aic_gather(x, split=1)")
    assert g["a"] == "pl.Tensor[[128, 64], pl.FP16]"


def test_split_is_required_and_must_be_a_mode_code():
    d = diagnostics(MAT, "a = pl.tile.aiv_shard(qk)")
    assert d[0].code == "PTOC-E0201" and "split=" in d[0].message
    d = diagnostics(MAT, "a = pl.tile.aiv_shard(qk, split=3)")
    assert d[0].code == "PTOC-E0202" and "0, 1 or 2" in d[0].message


def test_lane_stride_must_be_positive():
    assert codes(MAT, "a = pl.tile.aiv_shard(qk, split=1, lane_stride=0)") == [("PTOC-E0202", None)]
    assert codes(MAT, "a = pl.tile.aiv_shard(qk, split=1, lane_stride=64)") == []


def test_split_needs_a_2d_operand():
    d = diagnostics("x: pl.Tensor[[2, 64, 64], pl.FP16]", "a = pl.tensor.aiv_shard(x, split=1)")
    assert d[0].code == "PTOC-E0202" and "2-D" in d[0].message
    assert codes("x: pl.Tensor[[2, 64, 64], pl.FP16]", "a = pl.tensor.aiv_shard(x, split=0)") == []


def test_left_right_shard_of_partial_columns_rejected():
    part = "qk: pl.Tile[[128, 64], pl.FP32, pl.Mem.Mat, pl.TileView(valid_shape=[128, 40])]"
    d = diagnostics(part, "a = pl.tile.aiv_shard(qk, split=2)")
    assert d[0].code == "PTOC-E0202" and "LEFT_RIGHT" in d[0].message and "set_validshape" in d[0].hint
    assert codes(part, "a = pl.tile.aiv_shard(qk, split=1)") == []  # static narrowed columns, full rows


def test_up_down_shard_of_partial_rows_and_columns_rejected():
    part = "qk: pl.Tile[[128, 64], pl.FP32, pl.Mem.Mat, pl.TileView(valid_shape=[100, 40])]"
    d = diagnostics(part, "a = pl.tile.aiv_shard(qk, split=1)")
    assert d[0].code == "PTOC-E0202" and "rows are partially valid" in d[0].message


def test_shard_of_a_scalar_rejected():
    d = diagnostics("s: pl.Scalar[pl.FP32]", "a = pl.tile.aiv_shard(s, split=1)")
    assert d[0].code == "PTOC-E0202" and "must be a tile" in d[0].message


def test_codegen_names_the_crossing_as_unsupported(tmp_path):
    src = tmp_path / "k.ir"
    src.write_text("import pypto.language as pl\n@pl.program\nclass p:\n"
                   "    @pl.function(type=pl.FunctionType.AIV)\n"
                   "    def k(self, x: pl.Tensor[[128, 64], pl.FP32], out: pl.Out[pl.Tensor[[64, 64], pl.FP32]])"
                   " -> pl.Tensor[[64, 64], pl.FP32]:\n"
                   "        t: pl.Tile[[128, 64], pl.FP32, pl.Mem.Vec] = pl.tile.load(x, [0, 0], [128, 64])\n"
                   "        a: pl.Tile[[64, 64], pl.FP32, pl.Mem.Vec] = pl.tile.aiv_shard(t, split=1)\n"
                   "        o: pl.Tensor[[64, 64], pl.FP32] = pl.tile.store(a, [0, 0], out)\n"
                   "        return o\n")
    r = subprocess.run([PTOC, "check", str(src)], capture_output=True, text=True)
    assert r.returncode == 1, r.stderr
    assert "PTOC-E0400" in r.stderr and "tile.aiv_shard" in r.stderr and "tpush" in r.stderr


# Each vector lane's part of a shard, executed by the reference. PyPTO's per-lane rule
# (src/ir/transforms/utils/split_axis_utils.cpp): the box is H = ceil(extent / 2); lane L starts at
# L * H and holds min(max(V, L * H) - L * H, H) valid cells of the split axis. For V = 127 rows of a
# 128-row box that is 64 rows on lane 0 and 63 on lane 1 (not ceil(127 / 2) = 64 on both).
SHARD_KERNEL = """import pypto.language as pl

@pl.program
class p:
    @pl.function(type=pl.FunctionType.AIV)
    def k(self, x: pl.Tensor[[128, 16], pl.FP32], out: pl.InOut[pl.Tensor[[64, 16], pl.FP32]]) -> pl.Tensor[[64, 16], pl.FP32]:
        t: pl.Tile[[128, 16], pl.FP32, pl.Mem.Vec, pl.TileView(valid_shape=[@V@, 16])] = pl.tile.load(x, [0, 0], [128, 16], valid_shapes=[@V@, 16])
        a: pl.Tile[[64, 16], pl.FP32, pl.Mem.Vec, pl.TileView(valid_shape=[@VH@, 16])] = pl.tile.aiv_shard(t, split=1)
        o: pl.Tensor[[64, 16], pl.FP32] = pl.tile.store(a, [0, 0], out)
        return o
"""


def _run_shard_lane(valid_rows: int, lane: int):
    import numpy as np

    from ptoc.context import CompileContext
    from ptoc.frontend.parser import parse_program
    from ptoc.reference.interp import run_function

    ctx = CompileContext(arch="a2a3")
    src = SHARD_KERNEL.replace("@VH@", str(min(valid_rows, 64))).replace("@V@", str(valid_rows))
    prog = parse_program(src, "k.ir", ctx=ctx)
    x = np.arange(128 * 16, dtype=np.float32).reshape(128, 16)
    out0 = np.full((64, 16), -1, np.float32)  # rows the lane does not hold stay -1
    out = run_function(prog, "k", {"x": x, "out": out0}, ctx, subblock_idx=lane)["out"]
    return x, out


def test_reference_shard_of_127_rows_gives_lane_1_only_63_rows():
    import numpy as np

    x, lane0 = _run_shard_lane(127, 0)
    np.testing.assert_array_equal(lane0, x[0:64])
    x, lane1 = _run_shard_lane(127, 1)
    np.testing.assert_array_equal(lane1[:63], x[64:127])
    assert (lane1[63] == -1).all()  # lane 1 holds no 64th row: its store leaves that row alone


def test_reference_shard_of_a_short_extent_leaves_lane_1_empty():
    import numpy as np

    x, lane0 = _run_shard_lane(40, 0)
    np.testing.assert_array_equal(lane0[:40], x[:40])
    assert (lane0[40:] == -1).all()
    _, lane1 = _run_shard_lane(40, 1)
    assert (lane1 == -1).all()


def test_reference_split_push_of_an_odd_box_halves_at_the_ceiling():
    # an UP_DOWN push of a 127-row box: lane 0 takes rows 0..63 (64), lane 1 rows 64..126 (63); no row is lost
    import numpy as np

    from ptoc.context import CompileContext
    from ptoc.frontend.parser import parse_program
    from ptoc.reference.interp import run_function

    src = """import pypto.language as pl

@pl.program
class p:
    @pl.function(type=pl.FunctionType.AIV)
    def k(self, x: pl.Tensor[[127, 16], pl.FP32], out: pl.InOut[pl.Tensor[[128, 16], pl.FP32]]) -> pl.Tensor[[128, 16], pl.FP32]:
        t: pl.Tile[[127, 16], pl.FP32, pl.Mem.Vec] = pl.tile.load(x, [0, 0], [127, 16])
        pl.tile.tpush_to_aic(t, split=1)
        a: pl.Tile[[64, 16], pl.FP32, pl.Mem.Vec] = pl.tile.tpop_from_aic(split=1)
        b: pl.Tile[[64, 16], pl.FP32, pl.Mem.Vec, pl.TileView(valid_shape=[63, 16])] = pl.tile.tpop_from_aic(split=1)
        o1: pl.Tensor[[128, 16], pl.FP32] = pl.tile.store(a, [0, 0], out)
        o2: pl.Tensor[[128, 16], pl.FP32] = pl.tile.store(b, [64, 0], o1)
        return o2
"""
    ctx = CompileContext(arch="a2a3")
    prog = parse_program(src, "k.ir", ctx=ctx)
    x = np.arange(127 * 16, dtype=np.float32).reshape(127, 16)
    got = run_function(prog, "k", {"x": x, "out": np.full((128, 16), -1, np.float32)}, ctx)["out"]
    np.testing.assert_array_equal(got[:127], x)
    assert (got[127] == -1).all()
