"""Matmul family: tile.matmul / matmul_acc / matmul_bias, tensor.matmul / matmul_acc, boxed tile dims (NZ-1)."""

from __future__ import annotations

import pytest
from optest import codes, diagnostics, types

from ptoc.ir import dtypes
from ptoc.ops.matmul import boxed_dims_problem, inner_box

E = "PTOC-E0202"


def _tiles(lhs: str, rhs: str, dt: str = "FP16", lmem: str = "Left", rmem: str = "Right") -> str:
    return f"l: pl.Tile[{lhs}, pl.{dt}, pl.Mem.{lmem}], r: pl.Tile[{rhs}, pl.{dt}, pl.Mem.{rmem}]"


ACC = "acc: pl.Tile[[16, 32], pl.FP32, pl.Mem.Acc]"

# --------------------------------------------------------------------------------------------------
# tile.matmul
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dt,acc,k", [("FP16", "FP32", 16), ("BF16", "FP32", 16), ("FP32", "FP32", 8),
                                      ("INT8", "INT32", 32)])
def test_tile_matmul_left_by_right_gives_acc_with_accumulator_dtype(dt, acc, k):
    p = _tiles(f"[16, {k}]", f"[{k}, 32]", dt)
    assert types(p, "c = pl.tile.matmul(l, r)")["c"] == f"pl.Tile[[16, 32], pl.{acc}, pl.Mem.Acc]"


@pytest.mark.parametrize("arch", ["a2a3", "a5"])
def test_tile_matmul_fp32_operands_accumulate_in_fp32_on_both_targets(arch):
    p = _tiles("[16, 8]", "[8, 16]", "FP32")
    assert types(p, "c = pl.tile.matmul(l, r)", arch)["c"] == "pl.Tile[[16, 16], pl.FP32, pl.Mem.Acc]"


def test_tile_matmul_result_valid_region_is_lhs_rows_by_rhs_cols():
    p = ("l: pl.Tile[[16, 16], pl.FP16, pl.Mem.Left, pl.TileView(valid_shape=[10, 16])], "
         "r: pl.Tile[[16, 32], pl.FP16, pl.Mem.Right, pl.TileView(valid_shape=[16, 20])]")
    assert types(p, "c = pl.tile.matmul(l, r)")["c"] == \
        "pl.Tile[[16, 32], pl.FP32, pl.Mem.Acc, pl.TileView(valid_shape=[10, 20])]"


def test_tile_matmul_operands_without_memory_space_are_accepted():
    p = "l: pl.Tile[[16, 16], pl.FP16], r: pl.Tile[[16, 32], pl.FP16]"
    assert types(p, "c = pl.tile.matmul(l, r)")["c"] == "pl.Tile[[16, 32], pl.FP32, pl.Mem.Acc]"


def test_tile_matmul_after_moves_from_mat():
    p = "a: pl.Tile[[32, 64], pl.BF16, pl.Mem.Mat], b: pl.Tile[[64, 16], pl.BF16, pl.Mem.Mat]"
    body = """
    l = pl.tile.move(a, target_memory=pl.Mem.Left)
    r = pl.tile.move(b, target_memory=pl.Mem.Right)
    c = pl.tile.matmul(l, r)
    """
    assert types(p, body)["c"] == "pl.Tile[[32, 16], pl.FP32, pl.Mem.Acc]"


def test_tile_matmul_dtype_mismatch_rejected():
    p = "l: pl.Tile[[16, 16], pl.FP16, pl.Mem.Left], r: pl.Tile[[16, 32], pl.BF16, pl.Mem.Right]"
    assert codes(p, "c = pl.tile.matmul(l, r)") == [(E, None)]


def test_tile_matmul_unsupported_dtype_rejected():
    p = _tiles("[16, 16]", "[16, 16]", "INT16")
    d = diagnostics(p, "c = pl.tile.matmul(l, r)")
    assert len(d) == 1 and "INT16" in d[0].message and "INT8->INT32" in d[0].hint


def test_tile_matmul_inner_dimension_mismatch_rejected():
    assert codes(_tiles("[16, 32]", "[16, 32]"), "c = pl.tile.matmul(l, r)") == [(E, None)]


def test_tile_matmul_lhs_not_in_left_rejected():
    d = diagnostics(_tiles("[16, 16]", "[16, 32]", lmem="Vec"), "c = pl.tile.matmul(l, r)")
    assert len(d) == 1 and "Left" in d[0].message and "pl.tile.move" in d[0].hint


def test_tile_matmul_operand_spaces_are_hardware_rules_left_to_memory_inference():
    # before InferTileMemorySpace a Mat (or any) operand is the one the pass moves into Left / Right
    p = _tiles("[16, 16]", "[16, 32]", lmem="Mat", rmem="Mat")
    assert codes(p, "c = pl.tile.matmul(l, r)", hardware=False) == []
    assert types(p, "c = pl.tile.matmul(l, r)", hardware=False)["c"] == "pl.Tile[[16, 32], pl.FP32, pl.Mem.Acc]"
    assert codes(p, "c = pl.tile.matmul(l, r)") == [(E, None)]  # lhs not in Left (the first rule it breaks)


def test_nz1_is_a_hardware_rule_left_to_memory_inference():
    assert codes(_tiles("[4, 16]", "[16, 16]"), "c = pl.tile.matmul(l, r)", hardware=False) == []
    assert codes(_tiles("[4, 16]", "[16, 16]"), "c = pl.tile.matmul(l, r)") == [(E, "NZ-1")]


def test_tile_matmul_rhs_not_in_right_rejected():
    assert codes(_tiles("[16, 16]", "[16, 32]", rmem="Left"), "c = pl.tile.matmul(l, r)") == [(E, None)]


def test_tile_matmul_rank_3_rejected():
    p = "l: pl.Tile[[2, 16, 16], pl.FP16, pl.Mem.Left], r: pl.Tile[[16, 32], pl.FP16, pl.Mem.Right]"
    assert codes(p, "c = pl.tile.matmul(l, r)") == [(E, None)]


def test_tile_matmul_of_tensors_rejected():
    p = "a: pl.Tensor[[16, 16], pl.FP16], b: pl.Tensor[[16, 16], pl.FP16]"
    assert codes(p, "c = pl.tile.matmul(a, b)")


# --------------------------------------------------------------------------------------------------
# Boxed tile dimensions (NZ-1)
# --------------------------------------------------------------------------------------------------


def test_nz1_fp16_left_16x16_accepted():
    assert codes(_tiles("[16, 16]", "[16, 16]"), "c = pl.tile.matmul(l, r)") == []


def test_nz1_fp16_left_16x8_rejected():
    d = diagnostics(_tiles("[16, 8]", "[8, 16]"), "c = pl.tile.matmul(l, r)")
    assert [(x.code, x.rule) for x in d] == [(E, "NZ-1")]
    assert "columns (8) must be a multiple of 16" in d[0].message
    assert "[16, 16]" in d[0].hint


def test_nz1_left_rows_must_be_a_multiple_of_16():
    assert codes(_tiles("[8, 16]", "[16, 16]"), "c = pl.tile.matmul(l, r)") == [(E, "NZ-1")]


def test_nz1_int8_left_columns_multiple_of_32():
    assert codes(_tiles("[16, 32]", "[32, 16]", "INT8"), "c = pl.tile.matmul(l, r)") == []
    assert codes(_tiles("[16, 16]", "[16, 16]", "INT8"), "c = pl.tile.matmul(l, r)") == [(E, "NZ-1")]


def test_nz1_right_tiles_use_c0_by_16_column_major_fractals():
    # Right is ZN: inner col-major boxes of c0 rows x 16 columns; INT8 c0 = 32
    assert inner_box(dtypes.INT8, "col_major", 512) == (32, 16)
    assert codes(_tiles("[16, 32]", "[32, 16]", "INT8"), "c = pl.tile.matmul(l, r)") == []


def test_nz1_dynamic_extents_are_not_checked():
    p = "l: pl.Tile[[M, 16], pl.FP16, pl.Mem.Left], r: pl.Tile[[16, 32], pl.FP16, pl.Mem.Right]"
    assert types(p, "c = pl.tile.matmul(l, r)")["c"] == "pl.Tile[[M, 32], pl.FP32, pl.Mem.Acc]"


def test_nz1_boxed_dims_problem_per_box():
    assert inner_box(dtypes.FP16, "row_major", 512) == (16, 16)
    assert inner_box(dtypes.FP32, "row_major", 512) == (16, 8)
    assert inner_box(dtypes.FP32, "row_major", 1024) == (16, 16)
    assert inner_box(dtypes.FP16, "none_box", 512) is None
    assert boxed_dims_problem(16, 16, dtypes.FP16, "row_major", 512) is None
    assert boxed_dims_problem(16, 8, dtypes.FP16, "row_major", 512) is not None
    assert boxed_dims_problem(16, 16, dtypes.FP32, "row_major", 1024) is None
    assert boxed_dims_problem(16, 8, dtypes.FP32, "row_major", 1024) is not None  # Acc box 16 x 16
    assert boxed_dims_problem(None, 8, dtypes.FP32, "row_major", 512) is None


# --------------------------------------------------------------------------------------------------
# tile.matmul_acc / tile.matmul_bias
# --------------------------------------------------------------------------------------------------


def test_tile_matmul_acc_returns_the_accumulator():
    p = _tiles("[16, 16]", "[16, 32]") + ", " + ACC
    assert types(p, "c = pl.tile.matmul_acc(acc, l, r)")["c"] == "pl.Tile[[16, 32], pl.FP32, pl.Mem.Acc]"


def test_tile_matmul_acc_dtype_must_be_the_accumulator_dtype():
    p = _tiles("[16, 32]", "[32, 32]", "INT8") + ", " + ACC
    assert codes(p, "c = pl.tile.matmul_acc(acc, l, r)") == [(E, None)]


def test_tile_matmul_acc_shape_must_match_the_product():
    p = _tiles("[16, 16]", "[16, 16]") + ", " + ACC
    assert codes(p, "c = pl.tile.matmul_acc(acc, l, r)") == [(E, None)]


def test_tile_matmul_acc_accumulator_not_in_acc_rejected():
    p = _tiles("[16, 16]", "[16, 32]") + ", acc: pl.Tile[[16, 32], pl.FP32, pl.Mem.Vec]"
    assert codes(p, "c = pl.tile.matmul_acc(acc, l, r)") == [(E, None)]


def test_tile_matmul_bias_adds_a_bias_row():
    p = _tiles("[16, 16]", "[16, 32]") + ", b: pl.Tile[[1, 32], pl.FP32, pl.Mem.Bias]"
    assert types(p, "c = pl.tile.matmul_bias(l, r, b)")["c"] == "pl.Tile[[16, 32], pl.FP32, pl.Mem.Acc]"


@pytest.mark.parametrize("bias", ["[[2, 32], pl.FP32, pl.Mem.Bias]", "[[1, 16], pl.FP32, pl.Mem.Bias]",
                                  "[[1, 32], pl.FP16, pl.Mem.Bias]", "[[1, 32], pl.FP32, pl.Mem.Vec]"])
def test_tile_matmul_bias_wrong_bias_rejected(bias):
    p = _tiles("[16, 16]", "[16, 32]") + f", b: pl.Tile{bias}"
    assert codes(p, "c = pl.tile.matmul_bias(l, r, b)") == [(E, None)]


# --------------------------------------------------------------------------------------------------
# tensor.matmul / tensor.matmul_acc and the short names
# --------------------------------------------------------------------------------------------------

T = "a: pl.Tensor[[64, 128], pl.FP16], b: pl.Tensor[[128, 256], pl.FP16]"


def test_tensor_matmul_fp16_gives_fp32():
    assert types(T, "c = pl.tensor.matmul(a, b)")["c"] == "pl.Tensor[[64, 256], pl.FP32]"


def test_tensor_matmul_int8_gives_int32():
    p = "a: pl.Tensor[[64, 128], pl.INT8], b: pl.Tensor[[128, 256], pl.INT8]"
    assert types(p, "c = pl.tensor.matmul(a, b)")["c"] == "pl.Tensor[[64, 256], pl.INT32]"


def test_tensor_matmul_out_dtype():
    assert types(T, "c = pl.tensor.matmul(a, b, out_dtype=pl.BF16)")["c"] == "pl.Tensor[[64, 256], pl.BF16]"


def test_tensor_matmul_out_dtype_int_for_float_operands_rejected():
    assert codes(T, "c = pl.tensor.matmul(a, b, out_dtype=pl.INT32)") == [(E, None)]


def test_tensor_matmul_a_trans_and_b_trans():
    p = "a: pl.Tensor[[128, 64], pl.FP16], b: pl.Tensor[[256, 128], pl.FP16]"
    assert types(p, "c = pl.tensor.matmul(a, b, a_trans=True, b_trans=True)")["c"] == "pl.Tensor[[64, 256], pl.FP32]"


def test_tensor_matmul_trans_flag_must_be_a_bool():
    assert codes(T, "c = pl.tensor.matmul(a, b, a_trans=1)") == [("PTOC-E0201", None)]


def test_tensor_matmul_batched_leading_axes_broadcast():
    p = "a: pl.Tensor[[2, 64, 128], pl.FP16], b: pl.Tensor[[128, 256], pl.FP16]"
    assert types(p, "c = pl.tensor.matmul(a, b)")["c"] == "pl.Tensor[[2, 64, 256], pl.FP32]"


def test_tensor_matmul_inner_dimension_mismatch_rejected():
    p = "a: pl.Tensor[[64, 128], pl.FP16], b: pl.Tensor[[64, 256], pl.FP16]"
    assert codes(p, "c = pl.tensor.matmul(a, b)") == [(E, None)]


def test_tensor_matmul_rank_1_rejected():
    p = "a: pl.Tensor[[128], pl.FP16], b: pl.Tensor[[128, 256], pl.FP16]"
    assert codes(p, "c = pl.tensor.matmul(a, b)") == [(E, None)]


def test_tensor_matmul_valid_region_follows_operands():
    p = "a: pl.Tensor[[64, 128], pl.FP16, pl.TensorView(valid_shape=[40, 128])], b: pl.Tensor[[128, 256], pl.FP16]"
    assert types(p, "c = pl.tensor.matmul(a, b)")["c"] == \
        "pl.Tensor[[64, 256], pl.FP32, pl.TensorView(valid_shape=[40, 256])]"


def test_tensor_matmul_acc_keeps_the_accumulator_type():
    p = T + ", acc: pl.Tensor[[64, 256], pl.FP32]"
    assert types(p, "c = pl.tensor.matmul_acc(acc, a, b)")["c"] == "pl.Tensor[[64, 256], pl.FP32]"


def test_tensor_matmul_acc_shape_mismatch_rejected():
    p = T + ", acc: pl.Tensor[[64, 128], pl.FP32]"
    assert codes(p, "c = pl.tensor.matmul_acc(acc, a, b)") == [(E, None)]


def test_tensor_matmul_acc_int_accumulator_for_float_operands_rejected():
    p = T + ", acc: pl.Tensor[[64, 256], pl.INT32]"
    assert codes(p, "c = pl.tensor.matmul_acc(acc, a, b)") == [(E, None)]


def test_short_name_matmul_resolves_by_argument_kind():
    assert types(T, "c = pl.matmul(a, b)")["c"] == "pl.Tensor[[64, 256], pl.FP32]"
    assert types(_tiles("[16, 16]", "[16, 32]"), "c = pl.matmul(l, r)")["c"] == \
        "pl.Tile[[16, 32], pl.FP32, pl.Mem.Acc]"


def test_short_name_matmul_acc_resolves_by_argument_kind():
    p = T + ", acc: pl.Tensor[[64, 256], pl.FP32]"
    assert types(p, "c = pl.matmul_acc(acc, a, b)")["c"] == "pl.Tensor[[64, 256], pl.FP32]"
    p = _tiles("[16, 16]", "[16, 32]") + ", " + ACC
    assert types(p, "c = pl.matmul_acc(acc, l, r)")["c"] == "pl.Tile[[16, 32], pl.FP32, pl.Mem.Acc]"


def test_short_name_matmul_on_tiles_rejects_tensor_kwargs():
    assert codes(_tiles("[16, 16]", "[16, 32]"), "c = pl.matmul(l, r, out_dtype=pl.FP32)") == [("PTOC-E0201", None)]


# --------------------------------------------------------------------------------------------------
# Batched tile forms
# --------------------------------------------------------------------------------------------------

BATCH = ("a: pl.Tile[[4, 16, 32], pl.FP16, pl.Mem.Mat], b: pl.Tile[[4, 32, 64], pl.FP16, pl.Mem.Mat], "
         "s: pl.Tile[[1, 32, 64], pl.FP16, pl.Mem.Mat], q: pl.Tile[[32, 64], pl.FP16, pl.Mem.Mat]")


def test_batch_matmul_result_is_acc_with_broadcast_batch_axes():
    t = types(BATCH, "c = pl.tile.batch_matmul(a, b)\nd = pl.batch_matmul(a, s)\ne = pl.tile.batch_matmul(a, q)")
    assert t["c"] == t["d"] == t["e"] == "pl.Tile[[4, 16, 64], pl.FP32, pl.Mem.Acc]"


def test_batch_matmul_of_int8_accumulates_in_int32():
    t = types("a: pl.Tile[[2, 16, 32], pl.INT8, pl.Mem.Mat], b: pl.Tile[[2, 32, 32], pl.INT8, pl.Mem.Mat]",
              "c = pl.tile.batch_matmul(a, b)")
    assert t["c"] == "pl.Tile[[2, 16, 32], pl.INT32, pl.Mem.Acc]"


def test_batch_matmul_acc_returns_the_accumulator():
    t = types(BATCH + ", acc: pl.Tile[[4, 16, 64], pl.FP32, pl.Mem.Acc]", "c = pl.tile.batch_matmul_acc(acc, a, b)")
    assert t["c"] == "pl.Tile[[4, 16, 64], pl.FP32, pl.Mem.Acc]"


def test_batch_matmul_inner_dimension_mismatch_rejected():
    d = diagnostics(BATCH, "c = pl.tile.batch_matmul(b, a)")
    assert d[0].code == E and "inner dimensions differ" in d[0].message


def test_batch_matmul_batch_axes_must_broadcast():
    d = diagnostics(BATCH + ", r: pl.Tile[[3, 32, 64], pl.FP16, pl.Mem.Mat]", "c = pl.tile.batch_matmul(a, r)")
    assert d[0].code == E and "do not broadcast" in d[0].message


def test_batch_matmul_dtype_mismatch_and_rank_1_rejected():
    p = BATCH + ", f: pl.Tile[[4, 32, 64], pl.BF16, pl.Mem.Mat], v: pl.Tile[[32], pl.FP16, pl.Mem.Mat]"
    assert "both operands need one dtype" in diagnostics(p, "c = pl.tile.batch_matmul(a, f)")[0].message
    assert "rank >= 2" in diagnostics(p, "c = pl.tile.batch_matmul(a, v)")[0].message


def test_batch_matmul_acc_shape_and_dtype_rejected():
    p = BATCH + ", w: pl.Tile[[1, 16, 64], pl.FP32, pl.Mem.Acc], i: pl.Tile[[4, 16, 64], pl.INT32, pl.Mem.Acc]"
    assert "is not broadcast" in diagnostics(p, "c = pl.tile.batch_matmul_acc(w, a, b)")[0].hint
    assert "accumulates in FP32" in diagnostics(p, "c = pl.tile.batch_matmul_acc(i, a, b)")[0].message
