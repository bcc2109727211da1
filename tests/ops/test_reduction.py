"""Direction-specific reductions (OP-6): tensor/tile row_* and col_*, no axis parameter, tmp tile rules."""

import textwrap

import pytest
from optest import codes, diagnostics, kernel, types

from ptoc.context import CompileContext
from ptoc.frontend.parser import parse_program
from ptoc.ir.types import effective_tile_view
from ptoc.ir.verifier import Verifier
from ptoc.ops.registry import infer_call_type

X = "x: pl.Tensor[[64, 128], pl.FP32]"
LOAD = "t = pl.tile.load(x, [0, 0], [64, 128])\ntmp = pl.tile.create([64, 128], dtype=pl.FP32)\n"


def one(params, body):
    d = diagnostics(params, body)
    assert len(d) == 1, d
    return d[0]


def type_objects(params, body):
    ctx = CompileContext(arch="a2a3")
    prog = parse_program(kernel(params, textwrap.dedent(body)), "t.ir", ctx=ctx)
    v = Verifier(prog, ctx, infer_call_type)
    v.run()
    return v.types


@pytest.mark.parametrize("op", ["row_sum", "row_max", "row_min"])
def test_op6_tensor_row_reduction_gives_m_by_1(op):
    assert types(X, f"y = pl.tensor.{op}(x)")["y"] == "pl.Tensor[[64, 1], pl.FP32]"


@pytest.mark.parametrize("op", ["col_sum", "col_max", "col_min"])
def test_op6_tensor_col_reduction_gives_1_by_n(op):
    assert types(X, f"y = pl.tensor.{op}(x)")["y"] == "pl.Tensor[[1, 128], pl.FP32]"


def test_op6_tensor_reduction_keeps_leading_axes_and_valid_rows():
    p = "x: pl.Tensor[[4, 64, 128], pl.FP16, pl.TensorView(valid_shape=[4, 40, 100])]"
    t = types(p, "r = pl.tensor.row_max(x)\nc = pl.tensor.col_sum(x)")
    assert t["r"] == "pl.Tensor[[4, 64, 1], pl.FP16, pl.TensorView(valid_shape=[4, 40, 1])]"
    assert t["c"] == "pl.Tensor[[4, 1, 128], pl.FP16, pl.TensorView(valid_shape=[4, 1, 100])]"


def test_op6_tensor_reduction_short_names():
    t = types(X, "r = pl.row_sum(x)\nc = pl.col_max(x)")
    assert t == {"r": "pl.Tensor[[64, 1], pl.FP32]", "c": "pl.Tensor[[1, 128], pl.FP32]"}


def test_op6_tensor_reduction_of_rank_1_rejected():
    assert codes("x: pl.Tensor[[128], pl.FP32]", "y = pl.tensor.row_sum(x)") == [("PTOC-E0202", "OP-6")]


@pytest.mark.parametrize("op", ["row_sum", "row_max", "row_min", "row_prod"])
def test_op6_tile_row_reduction_gives_column_tile(op):
    assert types(X, LOAD + f"y = pl.tile.{op}(t, tmp)")["y"] == "pl.Tile[[64, 1], pl.FP32, pl.Mem.Vec]"


def test_op6_tile_row_reduction_result_is_col_major_in_vec():
    ty = type_objects(X, LOAD + "y = pl.tile.row_sum(t, tmp)")["y"]
    assert effective_tile_view(ty)["blayout"] == "col_major"


@pytest.mark.parametrize("op", ["col_sum", "col_max", "col_min", "col_prod"])
def test_op6_tile_col_reduction_gives_row_tile(op):
    assert types(X, LOAD + f"y = pl.tile.{op}(t)")["y"] == "pl.Tile[[1, 128], pl.FP32, pl.Mem.Vec]"


def test_op6_tile_col_sum_takes_optional_tmp():
    assert types(X, LOAD + "y = pl.tile.col_sum(t, tmp)")["y"] == "pl.Tile[[1, 128], pl.FP32, pl.Mem.Vec]"


def test_op6_tile_row_reduction_carries_valid_rows():
    t = types(X, "t = pl.tile.load(x, [0, 0], [64, 128], [40, 100])\ntmp = pl.tile.create([64, 128], dtype=pl.FP32)\n"
                 "y = pl.tile.row_max(t, tmp)\nc = pl.tile.col_max(t)")
    assert t["y"] == "pl.Tile[[64, 1], pl.FP32, pl.Mem.Vec, pl.TileView(valid_shape=[40, 1])]"
    assert t["c"] == "pl.Tile[[1, 128], pl.FP32, pl.Mem.Vec, pl.TileView(valid_shape=[1, 100])]"


def test_op6_tile_reduction_short_names():
    t = types(X, LOAD + "r = pl.row_sum(t, tmp)\np = pl.row_prod(t, tmp)\nc = pl.col_prod(t)")
    assert t["r"] == t["p"] == "pl.Tile[[64, 1], pl.FP32, pl.Mem.Vec]"
    assert t["c"] == "pl.Tile[[1, 128], pl.FP32, pl.Mem.Vec]"


def test_op6_tile_row_reduction_larger_tmp_accepted():
    assert codes(X, "t = pl.tile.load(x, [0, 0], [64, 128])\ntmp = pl.tile.create([64, 256], dtype=pl.FP32)\n"
                    "y = pl.tile.row_sum(t, tmp)") == []


def test_op6_tile_row_reduction_needs_tmp():
    assert codes(X, LOAD + "y = pl.tile.row_sum(t)") == [("PTOC-E0201", None)]


def test_op6_tile_row_reduction_smaller_tmp_rejected():
    d = one(X, "t = pl.tile.load(x, [0, 0], [64, 128])\ntmp = pl.tile.create([32, 128], dtype=pl.FP32)\n"
               "y = pl.tile.row_sum(t, tmp)")
    assert d.rule == "OP-6" and "tmp" in d.message and d.hint


def test_op6_tile_row_reduction_tmp_dtype_mismatch_rejected():
    d = one(X, "t = pl.tile.load(x, [0, 0], [64, 128])\ntmp = pl.tile.create([64, 128], dtype=pl.FP16)\n"
               "y = pl.tile.row_max(t, tmp)")
    assert d.rule == "OP-6" and "dtype" in d.message


def test_op6_tile_row_reduction_tmp_rank_mismatch_rejected():
    d = one(X, "t = pl.tile.load(x, [0, 0], [64, 128])\ntmp = pl.tile.create([8192], dtype=pl.FP32)\n"
               "y = pl.tile.row_min(t, tmp)")
    assert d.rule == "OP-6" and "rank" in d.message


def test_op6_tile_reduction_outside_vec_rejected():
    assert codes(X, "t = pl.tile.load(x, [0, 0], [64, 128], target_memory=pl.Mem.Mat)\n"
                    "y = pl.tile.col_max(t)") == [("PTOC-E0202", "OP-6")]


def test_op6_reduction_axis_keyword_rejected_with_row_hint():
    d = one(X, "y = pl.tensor.col_sum(x, axis=1)")
    assert d.rule == "OP-6" and "axis" in d.message and "pl.tensor.row_sum" in d.hint


def test_op6_reduction_axis_keyword_rejected_with_col_hint():
    d = one(X, LOAD + "y = pl.tile.row_max(t, tmp, axis=0)")
    assert d.rule == "OP-6" and "pl.tile.col_max" in d.hint


def test_op6_reduction_axis_keyword_rejected_on_short_name():
    d = one(X, "y = pl.row_sum(x, axis=-1)")
    assert d.rule == "OP-6" and "pl.tensor.row_sum" in d.hint


def test_op6_reduction_unknown_keyword_rejected():
    assert codes(X, "y = pl.tensor.row_sum(x, keepdim=True)") == [("PTOC-E0201", None)]


def test_op6_reduction_of_bool_rejected():
    assert codes("x: pl.Tensor[[64, 128], pl.BOOL]", "y = pl.tensor.row_sum(x)") == [("PTOC-E0202", "OP-6")]
