"""Gather, scatter, mask patterns and sorting: OP-5, OP-6, OP-9."""

import pytest
from optest import codes, diagnostics, types

from ptoc.ops.gather import MASK_PATTERNS, mask_columns, mask_stride

FP16_SRC = "s: pl.Tensor[[1024, 64], pl.FP16]"
VEC = "pl.Mem.Vec"


def _rules(params, body, arch="a2a3"):
    return [(d.code, d.rule) for d in diagnostics(params, body, arch)]


# ------------------------------------------------------------------ OP-5 flat gather


def test_op5_fp16_index_physical_1x16_valid_1x8_accepted():
    # The spec example: eight valid FP16 columns use a physical [1, 16] index narrowed to [1, 8].
    p = FP16_SRC + ", i: pl.Tensor[[1, 16], pl.INT32, pl.TensorView(valid_shape=[1, 8])]"
    assert types(p, "o = pl.gather(s, index=i)")["o"] == "pl.Tensor[[1, 16], pl.FP16, pl.TensorView(valid_shape=[1, 8])]"


def test_op5_spec_example_with_set_validshape():
    p = FP16_SRC + ", padded: pl.Tensor[[1, 16], pl.INT32]"
    body = "indices = pl.set_validshape(padded, 1, 8)\nvalues = pl.gather(s, index=indices)"
    assert diagnostics(p, body) == []  # set_validshape is a registered op: no skip if it went missing
    assert types(p, body)["values"] == "pl.Tensor[[1, 16], pl.FP16, pl.TensorView(valid_shape=[1, 8])]"


def test_op5_fp16_index_physical_1x8_rejected_with_pad_hint():
    d = diagnostics(FP16_SRC + ", i: pl.Tensor[[1, 8], pl.INT32]", "o = pl.gather(s, index=i)")
    assert [(x.code, x.rule) for x in d] == [("PTOC-E0202", "OP-5")]
    assert "multiple of 16" in d[0].message and "single row" in d[0].message
    assert "[1, 16]" in d[0].hint and "pl.set_validshape" in d[0].hint


def test_op5_positional_index_is_the_same_flat_gather():
    p = FP16_SRC + ", i: pl.Tensor[[2, 32], pl.INT32]"
    assert types(p, "o = pl.gather(s, i)")["o"] == "pl.Tensor[[2, 32], pl.FP16]"


def test_op5_fp32_source_needs_multiple_of_8_columns():
    p = "t: pl.Tensor[[1024, 64], pl.FP32], ids: pl.Tensor[[1, 64], pl.INT32], j: pl.Tensor[[1, 8], pl.INT32]"
    t = types(p, "rows = pl.gather(t, index=ids)\none = pl.gather(t, index=j)")
    assert t == {"rows": "pl.Tensor[[1, 64], pl.FP32]", "one": "pl.Tensor[[1, 8], pl.FP32]"}


def test_op5_fp32_source_index_12_columns_rejected():
    d = diagnostics("t: pl.Tensor[[64, 64], pl.FP32], j: pl.Tensor[[2, 12], pl.INT32]", "o = pl.gather(t, index=j)")
    assert d[0].rule == "OP-5" and "multiple of 8" in d[0].message and "[2, 16]" in d[0].hint


def test_op5_int16_source_needs_multiple_of_16_and_int32_of_8():
    ok = ("a: pl.Tensor[[64, 64], pl.INT16], b: pl.Tensor[[64, 64], pl.INT32], "
          "i16: pl.Tensor[[4, 16], pl.INT32], i8: pl.Tensor[[4, 8], pl.INT32]")
    t = types(ok, "x = pl.gather(a, index=i16)\ny = pl.gather(b, index=i8)")
    assert t == {"x": "pl.Tensor[[4, 16], pl.INT16]", "y": "pl.Tensor[[4, 8], pl.INT32]"}
    assert _rules(ok, "z = pl.gather(a, index=i8)") == [("PTOC-E0202", "OP-5")]


def test_op5_dynamic_index_columns_rejected():
    d = diagnostics("t: pl.Tensor[[64, 64], pl.FP32], j: pl.Tensor[[1, N], pl.INT32]", "o = pl.gather(t, index=j)")
    assert d[0].rule == "OP-5" and "dynamic" in d[0].message


def test_op5_index_must_be_int32():
    d = diagnostics("t: pl.Tensor[[64, 64], pl.FP32], j: pl.Tensor[[1, 8], pl.INT64]", "o = pl.gather(t, index=j)")
    assert d[0].rule == "OP-5" and "INT32" in d[0].message


def test_op5_index_must_be_2d():
    d = diagnostics("t: pl.Tensor[[64, 64], pl.FP32], j: pl.Tensor[[8], pl.INT32]", "o = pl.gather(t, index=j)")
    assert d[0].rule == "OP-5" and "2-D" in d[0].message


def test_op5_source_dtype_bf16_rejected():
    d = diagnostics("t: pl.Tensor[[64, 64], pl.BF16], j: pl.Tensor[[1, 16], pl.INT32]", "o = pl.gather(t, index=j)")
    assert d[0].rule == "OP-5" and "FP16, FP32, INT16, INT32" in d[0].message


def test_op5_result_is_a_tensor_for_a_vec_tile_index():
    p = "t: pl.Tensor[[64, 64], pl.FP32], j: pl.Tensor[[1, 8], pl.INT32]"
    body = "jt = pl.tile.load(j, [0, 0], [1, 8])\no = pl.gather(t, index=jt)"
    assert types(p, body)["o"] == "pl.Tensor[[1, 8], pl.FP32]"


def test_op5_tile_index_outside_vec_rejected():
    p = "t: pl.Tensor[[64, 64], pl.FP32], j: pl.Tensor[[16, 8], pl.INT32]"
    body = "jt = pl.tile.load(j, [0, 0], [16, 8], target_memory=pl.Mem.Mat)\no = pl.gather(t, index=jt)"
    d = diagnostics(p, body)
    assert d[0].rule == "OP-5" and "Vec" in d[0].message and "pl.move" in d[0].hint


def test_op5_on_chip_source_rows_must_be_32_byte_aligned():
    p = "t: pl.Tensor[[4, 8], pl.FP16], j: pl.Tensor[[1, 16], pl.INT32]"
    body = "st = pl.tile.load(t, [0, 0], [4, 8])\no = pl.gather(st, index=j)"
    d = diagnostics(p, body)
    assert d[0].rule == "OP-5" and "32-byte" in d[0].message


def test_op5_on_chip_single_row_source_needs_no_row_alignment():
    p = "t: pl.Tensor[[1, 8], pl.FP16], j: pl.Tensor[[1, 16], pl.INT32]"
    body = "st = pl.tile.load(t, [0, 0], [1, 8])\no = pl.gather(st, index=j)"
    assert types(p, body)["o"] == "pl.Tensor[[1, 16], pl.FP16]"


def test_gather_without_index_rejected():
    assert codes(FP16_SRC, "o = pl.gather(s)") == [("PTOC-E0201", None)]


# ------------------------------------------------------------------ per-axis gather (dim=)


def test_gather_dim_last_axis_takes_index_shape():
    p = "x: pl.Tensor[[8, 32], pl.FP32], i: pl.Tensor[[8, 4], pl.INT32]"
    assert types(p, "o = pl.tensor.gather(x, i, dim=-1)")["o"] == "pl.Tensor[[8, 4], pl.FP32]"


def test_gather_dim_any_axis_of_3d():
    p = "x: pl.Tensor[[4, 8, 16], pl.INT16], i: pl.Tensor[[2, 8, 16], pl.INT32]"
    assert types(p, "o = pl.gather(x, index=i, dim=0)")["o"] == "pl.Tensor[[2, 8, 16], pl.INT16]"


def test_gather_dim_out_of_range_rejected():
    p = "x: pl.Tensor[[8, 32], pl.FP32], i: pl.Tensor[[8, 4], pl.INT32]"
    d = diagnostics(p, "o = pl.tensor.gather(x, i, dim=2)")
    assert d[0].rule == "OP-5" and "out of range" in d[0].message


def test_gather_dim_rank_4_rejected():
    p = "x: pl.Tensor[[2, 2, 8, 32], pl.FP32], i: pl.Tensor[[2, 2, 8, 4], pl.INT32]"
    assert _rules(p, "o = pl.tensor.gather(x, i, dim=-1)") == [("PTOC-E0202", "OP-5")]


def test_gather_dim_index_wider_than_source_off_axis_rejected():
    p = "x: pl.Tensor[[8, 32], pl.FP32], i: pl.Tensor[[16, 4], pl.INT32]"
    d = diagnostics(p, "o = pl.tensor.gather(x, i, dim=1)")
    assert d[0].rule == "OP-5" and "axis 0" in d[0].message


# ------------------------------------------------------------------ OP-9 mask patterns


@pytest.mark.parametrize("value,name,stride,first", [
    (1, "P0101", 2, [0, 2, 4]), (2, "P1010", 2, [1, 3, 5]), (3, "P0001", 4, [0, 4, 8]),
    (4, "P0010", 4, [1, 5, 9]), (5, "P0100", 4, [2, 6, 10]), (6, "P1000", 4, [3, 7, 11]),
    (7, "P1111", 1, [0, 1, 2]),
])
def test_op9_mask_table(value, name, stride, first):
    assert MASK_PATTERNS[value][0] == name and mask_stride(value) == stride == mask_stride(name)
    assert mask_columns(value, 12)[:3] == first == mask_columns(name, 12)[:3]
    assert len(mask_columns(value, 12)) == 12 // stride


def test_op9_gather_p0101_of_eight_selects_a0_a2_a4_a6():
    row = ["a0", "a1", "a2", "a3", "a4", "a5", "a6", "a7"]
    assert [row[i] for i in mask_columns(1, 8)] == ["a0", "a2", "a4", "a6"]


def test_op9_scatter_p0101_of_four_lands_on_even_columns_of_eight():
    dst = ["."] * 8
    for s, col in zip(["s0", "s1", "s2", "s3"], mask_columns("P0101", 4 * mask_stride(1))):
        dst[col] = s
    assert dst == ["s0", ".", "s1", ".", "s2", ".", "s3", "."]


def test_op9_mask_columns_rejects_unknown_pattern():
    with pytest.raises(ValueError):
        mask_columns(8, 8)


@pytest.mark.parametrize("pattern,cols", [(1, 32), (2, 32), (3, 16), (4, 16), (5, 16), (6, 16), (7, 64)])
def test_op9_tile_gather_mask_out_cols_is_cols_over_stride(pattern, cols):
    t = types("a: pl.Tensor[[16, 64], pl.FP32]", f"x = pl.load(a, [0, 0], [16, 64])\no = pl.tile.gather_mask(x, mask_pattern={pattern})")
    assert t["o"] == f"pl.Tile[[16, {cols}], pl.FP32, {VEC}]"


def test_op9_tensor_gather_mask_and_enum_spelling():
    t = types("a: pl.Tensor[[8, 64], pl.INT16]",
              "o = pl.tensor.gather_mask(a, mask_pattern=pl.MaskPattern.P0001)\np = pl.gather_mask(a, mask_pattern=7)")
    assert t == {"o": "pl.Tensor[[8, 16], pl.INT16]", "p": "pl.Tensor[[8, 64], pl.INT16]"}


def test_op9_gather_with_mask_pattern_is_the_mask_form():
    assert types("a: pl.Tensor[[8, 64], pl.FP16]", "o = pl.gather(a, mask_pattern=2)")["o"] == "pl.Tensor[[8, 32], pl.FP16]"


def test_op9_last_dim_not_divisible_by_stride_rejected():
    d = diagnostics("a: pl.Tensor[[8, 6], pl.FP32]", "o = pl.tensor.gather_mask(a, mask_pattern=3)")
    assert d[0].rule == "OP-9" and "divisible by 4" in d[0].hint


def test_op9_gather_mask_same_width_output_dtype():
    t = types("a: pl.Tensor[[8, 64], pl.FP32]", "o = pl.tensor.gather_mask(a, mask_pattern=1, output_dtype=pl.UINT32)")
    assert t["o"] == "pl.Tensor[[8, 32], pl.UINT32]"


def test_op9_gather_mask_output_dtype_of_other_width_rejected():
    d = diagnostics("a: pl.Tensor[[8, 64], pl.FP32]", "o = pl.tensor.gather_mask(a, mask_pattern=1, output_dtype=pl.FP16)")
    assert d[0].rule == "OP-9" and "width" in d[0].message


def test_op9_gather_mask_valid_columns_are_the_marked_valid_columns():
    p = "a: pl.Tensor[[8, 16], pl.FP32, pl.TensorView(valid_shape=[8, 10])]"
    t = types(p, "o = pl.tensor.gather_mask(a, mask_pattern=1)\nq = pl.tensor.gather_mask(a, mask_pattern=4)")
    assert t["o"] == "pl.Tensor[[8, 8], pl.FP32, pl.TensorView(valid_shape=[8, 5])]"  # 0, 2, 4, 6, 8
    assert t["q"] == "pl.Tensor[[8, 4], pl.FP32, pl.TensorView(valid_shape=[8, 3])]"  # 1, 5, 9


@pytest.mark.parametrize("pattern", ["0", "8", "-1"])
def test_op9_pattern_out_of_range_rejected(pattern):
    d = diagnostics("a: pl.Tensor[[8, 64], pl.FP32]", f"o = pl.tensor.gather_mask(a, mask_pattern={pattern})")
    assert d[0].rule == "OP-9" and "1..7" in d[0].message


def test_op9_missing_or_unknown_pattern_rejected():
    assert _rules("a: pl.Tensor[[8, 64], pl.FP32]", "o = pl.tensor.gather_mask(a)") == [("PTOC-E0201", "OP-9")]
    d = diagnostics("a: pl.Tensor[[8, 64], pl.FP32]", "o = pl.tensor.gather_mask(a, mask_pattern=pl.MaskPattern.P0110)")
    assert d[0].rule == "OP-9" and "P0110" in d[0].message


def test_op9_gather_mask_rejects_bf16_and_rank_3():
    assert _rules("a: pl.Tensor[[8, 64], pl.BF16]", "o = pl.tensor.gather_mask(a, mask_pattern=1)")[0][1] == "OP-9"
    assert _rules("a: pl.Tensor[[2, 8, 64], pl.FP32]", "o = pl.tensor.gather_mask(a, mask_pattern=1)")[0][1] == "OP-9"


def test_op9_tile_scatter_mask_dst_cols_is_cols_times_stride():
    p = "a: pl.Tensor[[16, 64], pl.FP16], b: pl.Tensor[[16, 32], pl.FP16]"
    body = ("d = pl.load(a, [0, 0], [16, 64])\ns = pl.load(b, [0, 0], [16, 32])\n"
            "o = pl.tile.scatter_mask(d, s, mask_pattern=2)")
    assert types(p, body)["o"] == f"pl.Tile[[16, 64], pl.FP16, {VEC}]"


def test_op9_tile_scatter_mask_wrong_dst_width_rejected():
    p = "a: pl.Tensor[[16, 48], pl.FP16], b: pl.Tensor[[16, 32], pl.FP16]"
    body = ("d = pl.load(a, [0, 0], [16, 48])\ns = pl.load(b, [0, 0], [16, 32])\n"
            "o = pl.tile.scatter_mask(d, s, mask_pattern=1)")
    d = diagnostics(p, body)
    assert d[0].rule == "OP-9" and "64" in d[0].message


def test_op9_tensor_scatter_mask_stride_4():
    p = "x: pl.Tensor[[16, 16], pl.BF16], d: pl.Tensor[[16, 64], pl.BF16]"
    assert types(p, "o = pl.tensor.scatter_mask(x, d, mask_pattern=6)")["o"] == "pl.Tensor[[16, 64], pl.BF16]"


def test_tensor_scatter_mask_form_is_scatter_mask():
    # PyPTO's pl.tensor.scatter(input, mask_pattern=, dst=) builds tensor.scatter_mask: P1000 is stride 4
    p = "x: pl.Tensor[[16, 16], pl.BF16], d: pl.Tensor[[16, 64], pl.BF16]"
    assert types(p, "o = pl.tensor.scatter(x, mask_pattern=6, dst=d)")["o"] == "pl.Tensor[[16, 64], pl.BF16]"
    # and the mask form's OP-9 width rule applies to it (stride 4: 16 columns scatter into 64, not 32)
    narrow = "x: pl.Tensor[[16, 16], pl.BF16], d: pl.Tensor[[16, 32], pl.BF16]"
    assert _rules(narrow, "o = pl.tensor.scatter(x, mask_pattern=6, dst=d)")[0][1] == "OP-9"


def test_op9_scatter_mask_dtype_mismatch_and_row_mismatch_rejected():
    assert _rules("x: pl.Tensor[[16, 16], pl.FP16], d: pl.Tensor[[16, 64], pl.FP32]",
                  "o = pl.tensor.scatter_mask(x, d, mask_pattern=3)")[0][1] == "OP-9"
    assert _rules("x: pl.Tensor[[8, 16], pl.FP32], d: pl.Tensor[[16, 64], pl.FP32]",
                  "o = pl.tensor.scatter_mask(x, d, mask_pattern=3)")[0][1] == "OP-9"


# ------------------------------------------------------------------ scatter (index forms)


def test_tensor_scatter_keeps_input_shape():
    p = "x: pl.Tensor[[8, 64], pl.FP32], i: pl.Tensor[[8, 16], pl.INT32], s: pl.Tensor[[8, 16], pl.FP32]"
    assert types(p, "o = pl.tensor.scatter(x, i, s, dim=-1)")["o"] == "pl.Tensor[[8, 64], pl.FP32]"


def test_tensor_scatter_dim_0_rejected():
    p = "x: pl.Tensor[[8, 64], pl.FP32], i: pl.Tensor[[8, 16], pl.INT32], s: pl.Tensor[[8, 16], pl.FP32]"
    d = diagnostics(p, "o = pl.tensor.scatter(x, i, s, dim=0)")
    assert d[0].rule == "OP-6" and "dim=-1" in d[0].message


def test_tensor_scatter_index_shape_must_match_src():
    p = "x: pl.Tensor[[8, 64], pl.FP32], i: pl.Tensor[[8, 8], pl.INT32], s: pl.Tensor[[8, 16], pl.FP32]"
    assert _rules(p, "o = pl.scatter(x, i, s)") == [("PTOC-E0202", "OP-6")]


@pytest.mark.parametrize("dst,idx", [("FP32", "INT32"), ("INT32", "INT32"), ("FP16", "INT16"), ("BF16", "INT16"),
                                     ("INT16", "INT16"), ("INT8", "INT16")])
def test_op6_tile_scatter_dtype_pairing_accepted(dst, idx):
    p = f"a: pl.Tensor[[8, 64], pl.{dst}], b: pl.Tensor[[4, 64], pl.{dst}], c: pl.Tensor[[4, 64], pl.{idx}]"
    body = ("d = pl.load(a, [0, 0], [8, 64])\ns = pl.load(b, [0, 0], [4, 64])\nk = pl.load(c, [0, 0], [4, 64])\n"
            "o = pl.tile.scatter(d, s, k)")
    assert types(p, body)["o"] == f"pl.Tile[[8, 64], pl.{dst}, {VEC}]"


@pytest.mark.parametrize("dst,idx", [("FP32", "INT16"), ("FP16", "INT32"), ("INT8", "INT32"), ("FP16", "UINT16")])
def test_op6_tile_scatter_dtype_pairing_rejected(dst, idx):
    p = f"a: pl.Tensor[[8, 64], pl.{dst}], b: pl.Tensor[[4, 64], pl.{dst}], c: pl.Tensor[[4, 64], pl.{idx}]"
    body = ("d = pl.load(a, [0, 0], [8, 64])\ns = pl.load(b, [0, 0], [4, 64])\nk = pl.load(c, [0, 0], [4, 64])\n"
            "o = pl.tile.scatter(d, s, k)")
    assert _rules(p, body) == [("PTOC-E0202", "OP-6")]


def test_op6_tile_scatter_rejects_uint8_payload():
    p = "a: pl.Tensor[[8, 64], pl.UINT8], c: pl.Tensor[[4, 64], pl.INT16]"
    body = "d = pl.load(a, [0, 0], [8, 64])\nk = pl.load(c, [0, 0], [4, 64])\no = pl.tile.scatter(d, d, k)"
    assert _rules(p, body)[0][1] == "OP-6"


# ------------------------------------------------------------------ tile.gather, gatherb, mgather


def test_tile_gather_takes_indices_shape_and_src_dtype():
    p = "a: pl.Tensor[[16, 64], pl.FP16], b: pl.Tensor[[4, 16], pl.INT32]"
    body = ("s = pl.load(a, [0, 0], [16, 64])\ni = pl.load(b, [0, 0], [4, 16])\nt = pl.load(b, [0, 0], [4, 16])\n"
            "o = pl.tile.gather(s, i, t)")
    assert types(p, body)["o"] == f"pl.Tile[[4, 16], pl.FP16, {VEC}]"


def test_tile_gather_int16_indices_rejected():
    p = "a: pl.Tensor[[16, 64], pl.FP16], b: pl.Tensor[[4, 16], pl.INT16]"
    body = "s = pl.load(a, [0, 0], [16, 64])\ni = pl.load(b, [0, 0], [4, 16])\no = pl.tile.gather(s, i, i)"
    assert _rules(p, body)[0] == ("PTOC-E0202", "OP-5")


def test_op6_gatherb_offset_columns_expand_to_32_byte_blocks():
    p = "a: pl.Tensor[[1, 256], pl.FP32], b: pl.Tensor[[4, 8], pl.UINT32]"
    body = ("s = pl.load(a, [0, 0], [1, 256])\nk = pl.load(b, [0, 0], [4, 8])\no = pl.tile.gatherb(s, k)\n"
            "h = pl.tile.gatherb(s, k, output_dtype=pl.FP16)")
    t = types(p, body)
    assert t["o"] == f"pl.Tile[[4, 64], pl.FP32, {VEC}]" and t["h"] == f"pl.Tile[[4, 128], pl.FP16, {VEC}]"


def test_op6_gatherb_valid_shape_scales_with_the_offsets():
    p = "a: pl.Tensor[[1, 256], pl.FP32], b: pl.Tensor[[4, 8], pl.UINT32]"
    body = "s = pl.load(a, [0, 0], [1, 256])\nk = pl.load(b, [0, 0], [4, 8], [4, 3])\no = pl.tile.gatherb(s, k)"
    assert types(p, body)["o"] == f"pl.Tile[[4, 64], pl.FP32, {VEC}, pl.TileView(valid_shape=[4, 24])]"


def test_op6_gatherb_offsets_must_be_uint32_in_groups_of_8():
    p = "a: pl.Tensor[[1, 256], pl.FP32], b: pl.Tensor[[4, 8], pl.INT32], c: pl.Tensor[[4, 4], pl.UINT32]"
    assert _rules(p, "s = pl.load(a, [0, 0], [1, 256])\nk = pl.load(b, [0, 0], [4, 8])\no = pl.tile.gatherb(s, k)")[0][1] == "OP-6"
    d = diagnostics(p, "s = pl.load(a, [0, 0], [1, 256])\nk = pl.load(c, [0, 0], [4, 4])\no = pl.tile.gatherb(s, k)")
    assert d[0].rule == "OP-6" and "8-entry" in d[0].message


def test_op6_mgather_vec_row_mode():
    p = "m: pl.Tensor[[64, 32], pl.FP32], i: pl.Tensor[[1, 16], pl.INT32]"
    body = "k = pl.load(i, [0, 0], [1, 16], [1, 10])\no = pl.tile.mgather(m, k)\ne = pl.tile.mgather(m, k, coalesce='elem')"
    t = types(p, body)
    assert t["o"] == f"pl.Tile[[16, 32], pl.FP32, {VEC}, pl.TileView(valid_shape=[10, 32])]"
    assert t["e"] == f"pl.Tile[[1, 16], pl.FP32, {VEC}, pl.TileView(valid_shape=[1, 10])]"


def test_op6_mgather_column_index_is_a5_only():
    p = "m: pl.Tensor[[64, 32], pl.FP32], i: pl.Tensor[[16, 1], pl.INT32]"
    body = "k = pl.load(i, [0, 0], [16, 1])\no = pl.tile.mgather(m, k, coalesce='row')"
    assert _rules(p, body) == [("PTOC-E0202", "OP-6")]
    assert types(p, body, arch="a5")["o"] == f"pl.Tile[[16, 32], pl.FP32, {VEC}]"


def test_op6_mgather_fp8_payload_is_a5_only():
    p = "m: pl.Tensor[[64, 32], pl.FP8E4M3FN], i: pl.Tensor[[1, 16], pl.INT32]"
    body = "k = pl.load(i, [0, 0], [1, 16])\no = pl.tile.mgather(m, k)"
    assert _rules(p, body) == [("PTOC-E0202", "OP-6")]
    assert types(p, body, arch="a5")["o"] == f"pl.Tile[[16, 32], pl.FP8E4M3FN, {VEC}]"


def test_op6_mgather_mat_elem_mode_with_scratch():
    p = ("m: pl.Tensor[[512], pl.FP32], i: pl.Tensor[[16, 32], pl.INT32], "
         "scratch: pl.Out[pl.Tensor[[512], pl.FP32]]")
    body = "g = pl.tile.mgather(m, i, coalesce='elem', target_memory=pl.Mem.Mat, scratch=scratch)"
    assert types(p, body)["g"] == "pl.Tile[[16, 32], pl.FP32, pl.Mem.Mat]"


def test_op6_mgather_mat_rows_must_be_multiple_of_16():
    p = "m: pl.Tensor[[64, 32], pl.FP32], i: pl.Tensor[[1, 12], pl.INT32]"
    d = diagnostics(p, "g = pl.tile.mgather(m, i, target_memory=pl.Mem.Mat)")
    assert d[0].rule == "OP-6" and "multiple of 16" in d[0].message


def test_op6_mgather_mat_row_mode_valid_shape():
    p = "m: pl.Tensor[[64, 32], pl.FP32], i: pl.Tensor[[1, 16], pl.INT32]"
    body = "g = pl.tile.mgather(m, i, valid_shape=[12, 32], target_memory=pl.Mem.Mat)"
    assert types(p, body)["g"] == "pl.Tile[[16, 32], pl.FP32, pl.Mem.Mat, pl.TileView(valid_shape=[12, 32])]"


# ------------------------------------------------------------------ sorting


def test_sort32_doubles_the_last_axis():
    p = "a: pl.Tensor[[4, 32], pl.FP32], i: pl.Tensor[[4, 32], pl.UINT32]"
    body = "s = pl.load(a, [0, 0], [4, 32])\nk = pl.load(i, [0, 0], [4, 32])\no = pl.tile.sort32(s, k)\nt = pl.tensor.sort32(a, i)"
    t = types(p, body)
    assert t["o"] == f"pl.Tile[[4, 64], pl.FP32, {VEC}]" and t["t"] == "pl.Tensor[[4, 64], pl.FP32]"


def test_sort32_int32_rejected():
    assert _rules("a: pl.Tensor[[4, 32], pl.INT32]", "t = pl.tensor.sort32(a, a)")[0][1] == "OP-6"


def test_mrgsort_format1_keeps_shape_and_checks_block_len():
    p = "a: pl.Tensor[[1, 256], pl.FP16]"
    assert types(p, "t = pl.tensor.mrgsort_format1(a, 64)")["t"] == "pl.Tensor[[1, 256], pl.FP16]"
    d = diagnostics(p, "t = pl.tensor.mrgsort_format1(a, 100)")
    assert "multiple of 64" in d[0].message


def test_mrgsort_format2_takes_tmp_shape():
    p = "a: pl.Tensor[[1, 64], pl.FP32], tmp: pl.Tensor[[1, 256], pl.FP32], ex: pl.Tensor[[1, 4], pl.INT32]"
    t = types(p, "t = pl.tensor.mrgsort_format2(a, a, a, a, tmp, ex, exhausted=False)")
    assert t["t"] == "pl.Tensor[[1, 256], pl.FP32]"


def test_mrgsort_format2_mixed_dtypes_rejected():
    p = ("a: pl.Tensor[[1, 64], pl.FP32], b: pl.Tensor[[1, 64], pl.FP16], tmp: pl.Tensor[[1, 256], pl.FP32], "
         "ex: pl.Tensor[[1, 4], pl.INT32]")
    d = diagnostics(p, "t = pl.tensor.mrgsort_format2(a, b, a, a, tmp, ex)")
    assert "share one dtype" in d[0].message


def test_tile_mrgsort_forms():
    p = "a: pl.Tensor[[1, 256], pl.FP32], e: pl.Tensor[[1, 8], pl.INT32]"
    body = ("s = pl.load(a, [0, 0], [1, 256])\nx = pl.load(e, [0, 0], [1, 8])\no = pl.tile.mrgsort_format1(s, 128)\n"
            "q = pl.tile.mrgsort_format2(s, s, s, s, s, x)")
    t = types(p, body)
    assert t["o"] == t["q"] == f"pl.Tile[[1, 256], pl.FP32, {VEC}]"
    assert _rules(p, "s = pl.load(a, [0, 0], [1, 256])\no = pl.tile.mrgsort_format1(s, 0)")[0][0] == "PTOC-E0202"


# PyPTO's merge sort as the language writes it (python/pypto/language/op/unified_ops.py mrgsort): block_len=
# selects format1 (one list of sorted runs); otherwise format2 merges 2..4 lists. The tile form takes its
# workspace last and has its shape; the tensor form joins the lists along the last axis.
def test_language_mrgsort_picks_the_format():
    p = "a: pl.Tensor[[1, 128], pl.FP32]"
    t = types(p, "s = pl.load(a, [0, 0], [1, 128])\nw = pl.tile.create([1, 512], dtype=pl.FP32)\n"
                 "o = pl.mrgsort(s, block_len=64)\nq = pl.tile.mrgsort(s, s, s, s, w)\nr = pl.tile.mrgsort(s, s, w)\n"
                 "u = pl.mrgsort(a, block_len=64)\nv = pl.tensor.mrgsort(a, a, a, a)\nz = pl.tensor.mrgsort(a, a)")
    assert t["o"] == f"pl.Tile[[1, 128], pl.FP32, {VEC}]"
    assert t["q"] == t["r"] == f"pl.Tile[[1, 512], pl.FP32, {VEC}]"
    assert t["u"] == "pl.Tensor[[1, 128], pl.FP32]"
    assert t["v"] == "pl.Tensor[[1, 512], pl.FP32]" and t["z"] == "pl.Tensor[[1, 256], pl.FP32]"


def test_tile_mrgsort_format2_needs_its_workspace():
    p = "a: pl.Tensor[[1, 128], pl.FP32]"
    assert _rules(p, "s = pl.load(a, [0, 0], [1, 128])\nq = pl.tile.mrgsort_format2(s, s)")[0][0] == "PTOC-E0201"
    assert _rules(p, "v = pl.tensor.mrgsort_format2(a, a, tmp=a)")[0][0] == "PTOC-E0201"
