"""Views, reshapes and generators: tensor/tile slice, assemble, reshape (OP-8), view and reinterpret_view
(OP-4, NZ-10), transpose, set_validshape, extract, fillpad, ci/arange, tri (OP-6)."""

import pytest
from optest import codes, diagnostics, types

from ptoc.ir.dtypes import INDEX
from ptoc.ir.nodes import ConstInt, Var
from ptoc.ops.layout import RegionError, reshape_valid_region


def rules(params, body, arch="a2a3"):
    return [d.rule for d in diagnostics(params, body, arch)]


def one(params, body):
    d = diagnostics(params, body)
    assert len(d) == 1, d
    return d[0]


def T(shape, valid=None, dt="FP32", extra=""):
    view = f", pl.TensorView(valid_shape={valid}{extra})" if valid is not None else (
        f", pl.TensorView({extra.lstrip(', ')})" if extra else "")
    return f"pl.Tensor[{shape}, pl.{dt}{view}]"


# --------------------------------------------------------------------------------------------------
# OP-8: every example of the spec, for tensor.reshape and tile.reshape
# --------------------------------------------------------------------------------------------------

X516 = f"x: {T([8, 16], [5, 16])}"
X212 = f"x: {T([2, 2, 2], [2, 1, 2])}"
X85 = f"x: {T([8, 16], [8, 5])}"


def _tile_of(params_shape, valid):
    return f"t = pl.tile.load(x, {[0] * len(params_shape)}, {params_shape}, {valid})\n"


def test_op8_reshape_8x16_valid_5x16_to_16x8_valid_10x8():
    assert types(X516, "y = pl.tensor.reshape(x, [16, 8])")["y"] == \
        "pl.Tensor[[16, 8], pl.FP32, pl.TensorView(valid_shape=[10, 8])]"


def test_op8_reshape_8x16_valid_5x16_to_128_valid_80():
    assert types(X516, "y = pl.tensor.reshape(x, [128])")["y"] == \
        "pl.Tensor[[128], pl.FP32, pl.TensorView(valid_shape=[80])]"


def test_op8_reshape_8x16_valid_5x16_to_4x32_rejected():
    d = one(X516, "y = pl.tensor.reshape(x, [4, 32])")
    assert d.rule == "OP-8" and d.code == "PTOC-E0202" and "[4, 32]" in d.message and d.hint


def test_op8_reshape_2x2x2_valid_2x1x2_to_2x4_valid_2x2():
    assert types(X212, "y = pl.tensor.reshape(x, [2, 4])")["y"] == \
        "pl.Tensor[[2, 4], pl.FP32, pl.TensorView(valid_shape=[2, 2])]"


def test_op8_reshape_2x2x2_valid_2x1x2_to_8_rejected():
    assert rules(X212, "y = pl.tensor.reshape(x, [8])") == ["OP-8"]


def test_op8_reshape_8x16_valid_8x5_to_16x8_rejected():
    assert rules(X85, "y = pl.tensor.reshape(x, [16, 8])") == ["OP-8"]


def test_op8_reshape_4x2x8_valid_vx1x8_to_4x16_valid_vx8_symbolic():
    p = f"v: pl.Scalar[pl.INDEX], x: {T([4, 2, 8], '[v, 1, 8]')}"
    assert types(p, "y = pl.tensor.reshape(x, [4, 16])")["y"] == \
        "pl.Tensor[[4, 16], pl.FP32, pl.TensorView(valid_shape=[v, 8])]"


@pytest.mark.parametrize("src,valid,new,expected", [
    ([8, 16], [5, 16], [16, 8], "[10, 8]"),
    ([8, 16], [5, 16], [128], "[80]"),
    ([2, 2, 2], [2, 1, 2], [2, 4], "[2, 2]"),
])
def test_op8_tile_reshape_spec_examples_accepted(src, valid, new, expected):
    t = types(f"x: pl.Tensor[{src}, pl.FP32]", _tile_of(src, valid) + f"y = pl.tile.reshape(t, {new})")
    assert t["y"] == f"pl.Tile[{new}, pl.FP32, pl.Mem.Vec, pl.TileView(valid_shape={expected})]"


@pytest.mark.parametrize("src,valid,new", [
    ([8, 16], [5, 16], [4, 32]),
    ([2, 2, 2], [2, 1, 2], [8]),
    ([8, 16], [8, 5], [16, 8]),
])
def test_op8_tile_reshape_spec_examples_rejected(src, valid, new):
    assert rules(f"x: pl.Tensor[{src}, pl.FP32]", _tile_of(src, valid) + f"y = pl.tile.reshape(t, {new})") == ["OP-8"]


def test_op8_tile_reshape_4x2x8_valid_vx1x8_to_4x16_valid_vx8_symbolic():
    t = types("v: pl.Scalar[pl.INDEX], x: pl.Tensor[[4, 2, 8], pl.FP32]",
              "t = pl.tile.load(x, [0, 0, 0], [4, 2, 8], [v, 1, 8])\ny = pl.tile.reshape(t, [4, 16])")
    assert t["y"] == "pl.Tile[[4, 16], pl.FP32, pl.Mem.Vec, pl.TileView(valid_shape=[v, 8])]"


def test_op8_tensor_and_tile_reshape_share_one_rule():
    from ptoc.ops import layout

    assert "reshape_valid_region" in layout._tensor_reshape.__code__.co_names + \
        layout._region_or_fail.__code__.co_names
    assert "_region_or_fail" in layout._tensor_reshape.__code__.co_names
    assert "_region_or_fail" in layout._tile_reshape.__code__.co_names


# edge cases of the shared function ----------------------------------------------------------------

def _c(*vs):
    return tuple(ConstInt(v, INDEX) if isinstance(v, int) else Var(v) for v in vs)


def test_op8_fully_valid_source_maps_to_the_new_shape():
    assert reshape_valid_region(_c(8, 16), None, _c(128)) is None
    assert reshape_valid_region(_c(8, 16), _c(8, 16), _c(4, 32)) is None


def test_op8_provably_empty_region_gives_zero_box():
    assert reshape_valid_region(_c(8, 16), _c(0, 16), _c(4, 2, 16)) == _c(0, 0, 0)


def test_op8_empty_region_with_symbolic_extent_still_zero_box():
    assert reshape_valid_region(_c(8, 16), _c("v", 0), _c(128)) == _c(0)


def test_op8_unit_axis_added_maps_kept_axes_one_to_one():
    # any box survives adding a unit axis, even one that is not a flat prefix ([8, 5])
    assert reshape_valid_region(_c(8, 16), _c(8, 5), _c(8, 1, 16)) == _c(8, 1, 5)


def test_op8_unit_axis_removed_maps_symbolic_box():
    assert reshape_valid_region(_c(1, 8, 16), _c(1, "r", "k"), _c(8, 16)) == _c("r", "k")


def test_op8_unit_axis_with_symbolic_valid_is_not_removed_blindly():
    # a unit axis whose valid extent may be 0 is not "fully valid": the general rule applies
    with pytest.raises(RegionError):
        reshape_valid_region(_c(1, 8, 16), _c("u", 8, 5), _c(8, 16))


def test_op8_pinned_leading_axis_joins_the_run():
    # [3, 4] valid [1, 2]: elements {0, 1} are a prefix -> [12] valid [2]; [2, 6] valid [1, 2]
    assert reshape_valid_region(_c(3, 4), _c(1, 2), _c(12)) == _c(2)
    assert reshape_valid_region(_c(3, 4), _c(1, 2), _c(2, 6)) == _c(1, 2)


def test_op8_fully_valid_outer_run_may_split_over_several_axes():
    # [4, 8] valid [4, 3]: runs 4 | 8 -> [2, 2, 8] valid [2, 2, 3]
    assert reshape_valid_region(_c(4, 8), _c(4, 3), _c(2, 2, 8)) == _c(2, 2, 3)


def test_op8_prefix_region_to_3d():
    # 384 valid elements of [4, 16, 8] valid [3, 16, 8] as [64, 8]: 48 whole rows
    assert reshape_valid_region(_c(4, 16, 8), _c(3, 16, 8), _c(64, 8)) == _c(48, 8)


def test_op8_symbolic_extent_needs_a_wide_enough_target_axis():
    # [16] valid [v] -> [4, 4]: v may exceed 4, nothing can prove it fits one row
    with pytest.raises(RegionError) as e:
        reshape_valid_region(_c(16), _c("v"), _c(4, 4))
    assert not e.value.definite


def test_op8_symbolic_extent_on_matching_stride_accepted():
    assert reshape_valid_region(_c(16, 8), _c("v", 8), _c(16, 2, 4)) == _c("v", 2, 4)


def test_op8_symbolic_target_shape_rejected_in_general_case():
    with pytest.raises(RegionError):
        reshape_valid_region(_c(8, 16), _c(5, 16), _c("n", 8))


def test_op8_static_non_box_is_a_definite_rejection():
    with pytest.raises(RegionError) as e:
        reshape_valid_region(_c(8, 16), _c(5, 16), _c(4, 32))
    assert e.value.definite


def test_op8_explicit_valid_shape_may_narrow_the_derived_region():
    t = types(X516, "y = pl.tensor.reshape(x, [16, 8], [6, 8])")
    assert t["y"] == "pl.Tensor[[16, 8], pl.FP32, pl.TensorView(valid_shape=[6, 8])]"


def test_op8_explicit_valid_shape_cannot_widen_the_derived_region():
    d = one(X516, "y = pl.tensor.reshape(x, [16, 8], [12, 8])")
    assert d.rule == "OP-8" and "outside" in d.message


def test_op8_explicit_valid_shape_on_fully_valid_source():
    t = types("x: pl.Tensor[[8, 16], pl.FP32]", "y = pl.tensor.reshape(x, [16, 8], [3, 8])")
    assert t["y"] == "pl.Tensor[[16, 8], pl.FP32, pl.TensorView(valid_shape=[3, 8])]"


def test_reshape_element_count_mismatch_rejected():
    assert rules("x: pl.Tensor[[8, 16], pl.FP32]", "y = pl.tensor.reshape(x, [8, 8])") == ["OP-8"]
    assert rules("x: pl.Tensor[[8, 16], pl.FP32]", "t = pl.tile.load(x, [0, 0], [8, 16])\n"
                 "y = pl.tile.reshape(t, [3, 16])") == ["OP-8"]


def test_tensor_reshape_fully_valid_has_no_view():
    assert types("x: pl.Tensor[[8, 16], pl.FP32]", "y = pl.reshape(x, [2, 64])")["y"] == "pl.Tensor[[2, 64], pl.FP32]"


def test_tile_identity_reshape_keeps_layout_and_memory():
    t = types("x: pl.Tensor[[16, 64], pl.FP32]",
              "t = pl.tile.load(x, [0, 0], [16, 64], [16, 60], target_memory=pl.Mem.Mat)\n"
              "y = pl.tile.reshape(t, [16, 64])")
    assert t["y"] == t["t"]


def test_tile_reshape_short_name():
    t = types("x: pl.Tensor[[16, 64], pl.FP32]", "t = pl.tile.load(x, [0, 0], [16, 64])\ny = pl.reshape(t, [64, 16])")
    assert t["y"] == "pl.Tile[[64, 16], pl.FP32, pl.Mem.Vec]"


def test_nz10_reshape_of_nz_to_flat_kept_nd():
    t = types("w: pl.Tensor[[256, 512], pl.INT8, pl.NZ]", "y = pl.tensor.reshape(w, [131072])")
    assert t["y"] == "pl.Tensor[[131072], pl.INT8]"


def test_nz10_reshape_of_nz_to_2d_rejected():
    assert rules("w: pl.Tensor[[256, 512], pl.INT8, pl.NZ]", "y = pl.tensor.reshape(w, [512, 256])") == ["NZ-10"]


def test_fp4_4_reshape_of_packed_fp4_rejected():
    assert rules("x: pl.Tensor[[2, 256], pl.FP4E2M1X2]", "y = pl.tensor.reshape(x, [512])", arch="a5") == ["FP4-4"]


# --------------------------------------------------------------------------------------------------
# OP-4: tensor.view
# --------------------------------------------------------------------------------------------------

X = "x: pl.Tensor[[8, 16], pl.FP32]"


def test_op4_view_reinterprets_shape():
    assert types(X, "y = pl.tensor.view(x, [4, 32])")["y"] == "pl.Tensor[[4, 32], pl.FP32]"


def test_op4_view_short_name():
    assert types(X, "y = pl.view(x, [128])")["y"] == "pl.Tensor[[128], pl.FP32]"


def test_op4_view_layout_flip_swaps_trailing_pair():
    t = types(X, "y = pl.tensor.view(x, layout=pl.TensorLayout.DN)")
    assert t["y"] == "pl.Tensor[[16, 8], pl.FP32, pl.DN]"


def test_op4_view_rank_zero_target_rejected():
    assert rules(X, "y = pl.tensor.view(x, [])") == ["OP-4"]


def test_op4_view_dn_target_needs_rank_2():
    assert rules(X, "y = pl.tensor.view(x, [128], layout=pl.TensorLayout.DN)") == ["OP-4"]


def test_op4_view_layout_flip_of_rank_1_rejected():
    assert rules("x: pl.Tensor[[8], pl.FP32]", "y = pl.tensor.view(x, layout=pl.TensorLayout.DN)") == ["OP-4"]


def test_op4_view_nz_target_layout_rejected():
    assert rules(X, "y = pl.tensor.view(x, layout=pl.TensorLayout.NZ)") == ["OP-4"]


def test_op4_view_needs_shape_or_layout():
    assert rules(X, "y = pl.tensor.view(x)") == ["OP-4"]


def test_op4_view_element_count_must_match():
    assert rules(X, "y = pl.tensor.view(x, [4, 16])") == ["OP-4"]


def test_op4_view_partial_source_folds_leading_dims_to_2d_with_explicit_valid():
    p = f"x: {T([4, 16, 8], [3, 16, 8])}"
    t = types(p, "y = pl.tensor.view(x, [64, 8], valid_shape=[48, 8])")
    assert t["y"] == "pl.Tensor[[64, 8], pl.FP32, pl.TensorView(valid_shape=[48, 8])]"


def test_op4_view_partial_source_flat_prefix_with_explicit_valid():
    t = types(X516, "y = pl.tensor.view(x, [1, 128], valid_shape=[1, 80])")
    assert t["y"] == "pl.Tensor[[1, 128], pl.FP32, pl.TensorView(valid_shape=[1, 80])]"


def test_op4_view_partial_source_needs_explicit_valid_shape():
    d = one(X516, "y = pl.tensor.view(x, [1, 128])")
    assert d.rule == "OP-4" and "valid_shape" in d.message


def test_op4_view_partial_source_other_shapes_rejected():
    assert rules(X516, "y = pl.tensor.view(x, [16, 8], valid_shape=[10, 8])") == ["OP-4"]


def test_op4_view_partial_source_valid_must_not_exceed_the_source_region():
    assert rules(X516, "y = pl.tensor.view(x, [1, 128], valid_shape=[1, 96])") == ["OP-4"]


def test_op4_view_partial_dn_source_rejected():
    p = "x: pl.Tensor[[8, 16], pl.FP32, pl.TensorView(valid_shape=[8, 5], layout=pl.TensorLayout.DN)]"
    assert rules(p, "y = pl.tensor.view(x, [1, 128], valid_shape=[1, 40])") == ["OP-4"]


def test_op4_view_strided_source_shape_change_rejected():
    p = "x: pl.Tensor[[8, 16], pl.FP32, pl.TensorView(stride=[32, 1])]"
    assert rules(p, "y = pl.tensor.view(x, [128])") == ["OP-4"]


def test_nz10_view_of_nz_tensor_rejected_at_construction():
    d = one("w: pl.Tensor[[256, 512], pl.INT8, pl.NZ]", "y = pl.tensor.view(w, [512, 256])")
    assert d.rule == "NZ-10" and d.hint


def test_nz10_reinterpret_view_of_nz_tensor_rejected():
    assert rules("w: pl.Tensor[[256, 512], pl.INT8, pl.NZ]",
                 "y = pl.tensor.reinterpret_view(w, pl.UINT8)") == ["NZ-10"]


# --------------------------------------------------------------------------------------------------
# OP-4: reinterpret_view
# --------------------------------------------------------------------------------------------------

def test_op4_reinterpret_nd_scales_last_axis_narrowing():
    # FP32 (4 bytes) as FP16 (2 bytes): last axis x2
    assert types(X, "y = pl.tensor.reinterpret_view(x, pl.FP16)")["y"] == "pl.Tensor[[8, 32], pl.FP16]"


def test_op4_reinterpret_nd_scales_last_axis_widening():
    assert types("x: pl.Tensor[[8, 16], pl.INT8]", "y = pl.reinterpret_view(x, pl.INT32)")["y"] == \
        "pl.Tensor[[8, 4], pl.INT32]"


def test_op4_reinterpret_dn_scales_second_to_last_axis():
    p = "x: pl.Tensor[[8, 16], pl.FP16, pl.DN]"
    assert types(p, "y = pl.tensor.reinterpret_view(x, pl.INT32)")["y"] == \
        "pl.Tensor[[4, 16], pl.INT32, pl.DN]"


def test_op4_reinterpret_explicit_shape_with_equal_bytes():
    assert types(X, "y = pl.tensor.reinterpret_view(x, pl.FP16, shape=[16, 16])")["y"] == \
        "pl.Tensor[[16, 16], pl.FP16]"


def test_op4_reinterpret_explicit_shape_with_other_bytes_rejected():
    d = one(X, "y = pl.tensor.reinterpret_view(x, pl.FP16, shape=[8, 16])")
    assert d.rule == "OP-4" and "bytes" in d.message


def test_op4_reinterpret_explicit_symbolic_shape_must_equal_derived():
    p = "n: pl.Scalar[pl.INDEX], x: pl.Tensor[[n, 16], pl.FP32]"
    assert types(p, "y = pl.tensor.reinterpret_view(x, pl.INT32, shape=[n, 16])")["y"] == \
        "pl.Tensor[[n, 16], pl.INT32]"
    assert rules(p, "y = pl.tensor.reinterpret_view(x, pl.FP16, shape=[n, 8, 4])") == ["OP-4"]


def test_op4_reinterpret_unaligned_last_axis_rejected():
    assert rules("x: pl.Tensor[[8, 3], pl.INT8]", "y = pl.tensor.reinterpret_view(x, pl.INT16)") == ["OP-4"]


def test_op4_reinterpret_unsupported_dtype_rejected():
    assert rules(X, "y = pl.tensor.reinterpret_view(x, pl.FP8E5M2)") == ["OP-4"]


def test_op4_reinterpret_mx_aliases_allowed():
    t = types("x: pl.Tensor[[8, 32], pl.INT8], s: pl.Tensor[[8, 32], pl.UINT8]",
              "y = pl.tensor.reinterpret_view(x, pl.FP8E4M3FN)\nz = pl.tensor.reinterpret_view(s, pl.FP8E8M0)")
    assert t == {"y": "pl.Tensor[[8, 32], pl.FP8E4M3FN]", "z": "pl.Tensor[[8, 32], pl.FP8E8M0]"}


def test_op4_reinterpret_same_dtype_rejected():
    assert rules(X, "y = pl.tensor.reinterpret_view(x, pl.FP32)") == ["OP-4"]


def test_op4_reinterpret_partial_valid_scales_and_keeps_zero_pad():
    p = "x: pl.Tensor[[8, 16], pl.FP32, pl.TensorView(valid_shape=[5, 10], pad=pl.PadValue.zero)]"
    assert types(p, "y = pl.tensor.reinterpret_view(x, pl.FP16)")["y"] == \
        "pl.Tensor[[8, 32], pl.FP16, pl.TensorView(valid_shape=[5, 20], pad=pl.PadValue.zero)]"


def test_op4_reinterpret_clears_dtype_dependent_max_pad():
    p = "x: pl.Tensor[[8, 16], pl.FP32, pl.TensorView(valid_shape=[5, 10], pad=pl.PadValue.max)]"
    assert types(p, "y = pl.tensor.reinterpret_view(x, pl.INT32)")["y"] == \
        "pl.Tensor[[8, 16], pl.INT32, pl.TensorView(valid_shape=[5, 10])]"


def test_op4_reinterpret_partial_valid_needs_derived_shape():
    assert rules(X516, "y = pl.tensor.reinterpret_view(x, pl.FP16, shape=[16, 16])") == ["OP-4"]


def test_op4_tile_reinterpret_row_major_scales_last_axis():
    t = types("x: pl.Tensor[[16, 64], pl.FP16]",
              "t = pl.tile.load(x, [0, 0], [16, 64])\ny = pl.tile.reinterpret_view(t, pl.INT32)")
    assert t["y"] == "pl.Tile[[16, 32], pl.INT32, pl.Mem.Vec]"


def test_op4_tile_reinterpret_col_major_column_scales_second_to_last_axis():
    # a Vec [R, 1] tile is col_major by its implicit view
    t = types("x: pl.Tensor[[64, 1], pl.FP32]",
              "t = pl.tile.load(x, [0, 0], [64, 1])\ny = pl.reinterpret_view(t, pl.FP16)")
    assert t["y"] == "pl.Tile[[128, 1], pl.FP16, pl.Mem.Vec]"


def test_op4_tile_reinterpret_boxed_tile_rejected():
    assert rules("x: pl.Tensor[[16, 64], pl.FP16]",
                 "t = pl.tile.load(x, [0, 0], [16, 64], target_memory=pl.Mem.Mat)\n"
                 "y = pl.tile.reinterpret_view(t, pl.INT16)") == ["OP-4"]


# --------------------------------------------------------------------------------------------------
# tensor.slice / assemble / transpose / set_validshape
# --------------------------------------------------------------------------------------------------

def test_tensor_slice_window_of_fully_valid_tensor():
    assert types("x: pl.Tensor[[64, 128], pl.FP32]", "y = pl.tensor.slice(x, [16, 64], [16, 64])")["y"] == \
        "pl.Tensor[[16, 64], pl.FP32]"


def test_tensor_slice_cuts_source_valid_region_to_window():
    # valid [40, 128]; rows [32, 48) hold 8 valid rows
    p = f"x: {T([64, 128], [40, 128])}"
    assert types(p, "y = pl.slice(x, [16, 128], [32, 0])")["y"] == \
        "pl.Tensor[[16, 128], pl.FP32, pl.TensorView(valid_shape=[8, 128])]"


def test_tensor_slice_explicit_valid_shape_narrows_but_never_widens():
    p = f"x: {T([64, 128], [40, 128])}"
    t = types(p, "y = pl.tensor.slice(x, [16, 128], [32, 0], [12, 100])\nz = pl.tensor.slice(x, [16, 128], [32, 0], [4, 100])")
    assert t["y"] == "pl.Tensor[[16, 128], pl.FP32, pl.TensorView(valid_shape=[8, 100])]"
    assert t["z"] == "pl.Tensor[[16, 128], pl.FP32, pl.TensorView(valid_shape=[4, 100])]"


def test_tensor_slice_symbolic_offset():
    t = types("x: pl.Tensor[[1024, 64], pl.FP32], b: pl.Scalar[pl.INDEX]", "y = pl.tensor.slice(x, [1, 64], [b, 0])")
    assert t["y"] == "pl.Tensor[[1, 64], pl.FP32]"


def test_tensor_slice_out_of_bounds_rejected():
    d = one("x: pl.Tensor[[64, 128], pl.FP32]", "y = pl.tensor.slice(x, [16, 64], [56, 0])")
    assert "exceeds" in d.message


def test_tensor_slice_rank_mismatch_rejected():
    assert codes("x: pl.Tensor[[64, 128], pl.FP32]", "y = pl.tensor.slice(x, [16], [0])") == [("PTOC-E0202", None)]


def test_tensor_slice_drop_dims():
    t = types("x: pl.Tensor[[4, 64, 128], pl.FP32]", "y = pl.tensor.slice(x, [1, 64, 128], [2, 0, 0], [], [0])")
    assert t["y"] == "pl.Tensor[[64, 128], pl.FP32]"


def test_nz11_slice_of_nz_leading_axes_accepted():
    t = types("w: pl.Tensor[[8, 256, 512], pl.INT8, pl.NZ]", "y = pl.tensor.slice(w, [1, 256, 512], [3, 0, 0])")
    assert t["y"] == "pl.Tensor[[1, 256, 512], pl.INT8, pl.NZ]"


def test_nz10_slice_windowing_nz_trailing_plane_rejected():
    assert rules("w: pl.Tensor[[256, 512], pl.INT8, pl.NZ]", "y = pl.tensor.slice(w, [128, 512], [0, 0])") == ["NZ-10"]


def test_tensor_assemble_returns_target():
    t = types("a: pl.Tensor[[64, 128], pl.FP32], b: pl.Tensor[[16, 128], pl.FP32]",
              "y = pl.tensor.assemble(a, b, [16, 0])\nz = pl.assemble(a, b, [48, 0])")
    assert t == {"y": "pl.Tensor[[64, 128], pl.FP32]", "z": "pl.Tensor[[64, 128], pl.FP32]"}


def test_tensor_assemble_dtype_mismatch_rejected():
    d = one("a: pl.Tensor[[64, 128], pl.FP32], b: pl.Tensor[[16, 128], pl.FP16]", "y = pl.tensor.assemble(a, b, [0, 0])")
    assert "dtype" in d.message


def test_tensor_assemble_out_of_bounds_rejected():
    d = one("a: pl.Tensor[[64, 128], pl.FP32], b: pl.Tensor[[16, 128], pl.FP32]", "y = pl.tensor.assemble(a, b, [56, 0])")
    assert "exceeds" in d.message


def test_tensor_transpose_swaps_shape_and_valid():
    p = f"x: {T([64, 128], [40, 100])}"
    assert types(p, "y = pl.tensor.transpose(x, 0, 1)")["y"] == \
        "pl.Tensor[[128, 64], pl.FP32, pl.TensorView(valid_shape=[100, 40])]"
    assert types(p, "y = pl.transpose(x, -1, -2)")["y"] == \
        "pl.Tensor[[128, 64], pl.FP32, pl.TensorView(valid_shape=[100, 40])]"


def test_tensor_transpose_axis_out_of_range_rejected():
    d = one("x: pl.Tensor[[64, 128], pl.FP32]", "y = pl.tensor.transpose(x, 0, 2)")
    assert "out of range" in d.message


def test_tensor_set_validshape_sets_metadata():
    t = types("x: pl.Tensor[[1, 16], pl.INT32]", "y = pl.tensor.set_validshape(x, 1, 8)\nz = pl.set_validshape(x, 1, 16)")
    assert t == {"y": "pl.Tensor[[1, 16], pl.INT32, pl.TensorView(valid_shape=[1, 8])]", "z": "pl.Tensor[[1, 16], pl.INT32]"}


def test_tensor_set_validshape_beyond_shape_rejected():
    d = one("x: pl.Tensor[[1, 16], pl.INT32]", "y = pl.tensor.set_validshape(x, 1, 32)")
    assert "exceeds" in d.message


def test_tensor_set_validshape_needs_2d():
    assert codes("x: pl.Tensor[[4, 1, 16], pl.INT32]", "y = pl.tensor.set_validshape(x, 1, 8)") == [("PTOC-E0202", None)]


# --------------------------------------------------------------------------------------------------
# OP-6: ci / arange / tri
# --------------------------------------------------------------------------------------------------

def test_op6_tensor_ci_int32():
    assert types("", "y = pl.tensor.ci(0, [1, 64], dtype=pl.INT32)")["y"] == "pl.Tensor[[1, 64], pl.INT32]"


def test_op6_tensor_arange_alias_and_short_name():
    t = types("", "y = pl.tensor.arange(0, [1, 32], dtype=pl.INT16)\nz = pl.arange(5, [1, 16], dtype=pl.INT32)")
    assert t == {"y": "pl.Tensor[[1, 32], pl.INT16]", "z": "pl.Tensor[[1, 16], pl.INT32]"}


def test_op6_tile_ci_gives_vec_tile():
    assert types("", "y = pl.tile.ci(0, [1, 128], dtype=pl.INT32, descending=True)")["y"] == \
        "pl.Tile[[1, 128], pl.INT32, pl.Mem.Vec]"


@pytest.mark.parametrize("op", ["pl.tensor.ci", "pl.tile.ci", "pl.arange"])
def test_op6_ci_float_dtype_rejected(op):
    assert rules("", f"y = {op}(0, [1, 64], dtype=pl.FP32)") == ["OP-6"]


@pytest.mark.parametrize("op", ["pl.tensor.ci", "pl.tile.ci"])
def test_op6_ci_innermost_dim_1_rejected(op):
    d = one("", f"y = {op}(0, [64, 1], dtype=pl.INT32)")
    assert d.rule == "OP-6" and "innermost" in d.message


def test_op6_ci_start_dtype_must_match():
    assert rules("s: pl.Scalar[pl.INT16]", "y = pl.tensor.ci(s, [1, 64], dtype=pl.INT32)") == ["OP-6"]


def test_op6_tile_tri_mask():
    t = types("", "y = pl.tile.tri(0, [16, 16], dtype=pl.FP32, upper=True)\n"
                  "z = pl.tile.tri(1, [16, 16], [8, 16], dtype=pl.INT32, upper=False)")
    assert t == {"y": "pl.Tile[[16, 16], pl.FP32, pl.Mem.Vec]",
                 "z": "pl.Tile[[16, 16], pl.INT32, pl.Mem.Vec, pl.TileView(valid_shape=[8, 16])]"}


def test_op6_tile_tri_valid_beyond_shape_rejected():
    assert rules("", "y = pl.tile.tri(0, [16, 16], [32, 16], dtype=pl.FP32)") == ["OP-6"]


def test_op6_tile_tri_bad_dtype_rejected():
    assert rules("", "y = pl.tile.tri(0, [16, 16], dtype=pl.INT8)") == ["OP-6"]


# --------------------------------------------------------------------------------------------------
# OP-6: tile.slice / extract / transpose / set_validshape / fillpad
# --------------------------------------------------------------------------------------------------

TX = "x: pl.Tensor[[32, 128], pl.FP32]"
TLOAD = "t = pl.tile.load(x, [0, 0], [32, 128])\n"


def test_op6_tile_slice_column_window_keeps_parent_stride():
    # the corpus form (25_tensor_tile_views): [32, 64] at [0, 64] of [32, 128]
    assert types(TX, TLOAD + "y = pl.tile.slice(t, [32, 64], [0, 64])")["y"] == \
        "pl.Tile[[32, 64], pl.FP32, pl.Mem.Vec, pl.TileView(stride=[128, 1], start_offset=64)]"


def test_op6_tile_slice_row_window_is_contiguous():
    assert types(TX, TLOAD + "y = pl.slice(t, [16, 128], [16, 0])")["y"] == \
        "pl.Tile[[16, 128], pl.FP32, pl.Mem.Vec, pl.TileView(start_offset=2048)]"


def test_op6_tile_slice_dynamic_valid_shape():
    t = types(TX + ", v: pl.Scalar[pl.INDEX]", TLOAD + "y = pl.tile.slice(t, [16, 128], [0, 0], [v, 128])")
    assert t["y"] == "pl.Tile[[16, 128], pl.FP32, pl.Mem.Vec, pl.TileView(valid_shape=[v, 128])]"


def test_op6_tile_slice_dynamic_shape_rejected():
    assert rules(TX + ", v: pl.Scalar[pl.INDEX]", TLOAD + "y = pl.tile.slice(t, [v, 128], [0, 0])") == ["OP-6"]


def test_op6_tile_slice_out_of_bounds_rejected():
    assert rules(TX, TLOAD + "y = pl.tile.slice(t, [32, 64], [0, 96])") == ["OP-6"]


def test_op6_tile_extract_mat_to_left_uses_textract_l0_format():
    t = types("a: pl.Tensor[[16, 512], pl.BF16], v: pl.Scalar[pl.INDEX]",
              "m = pl.tile.load(a, [0, 0], [16, 512], [v, 512], target_memory=pl.Mem.Mat)\n"
              "l = pl.tile.extract(m, 0, 256, [16, 256], target_memory=pl.Mem.Left)")
    # the type PyPTO gives the same extract (corpus 29): a partial window into L0 is compact
    assert t["l"] == ("pl.Tile[[16, 256], pl.BF16, pl.Mem.Left, pl.TileView(valid_shape=[v, 256], "
                      "blayout=pl.TileLayout.row_major, compact=pl.CompactMode.normal)]")


def test_op6_tile_extract_mat_to_right():
    t = types("b: pl.Tensor[[512, 64], pl.BF16]",
              "m = pl.tile.load(b, [0, 0], [512, 64], target_memory=pl.Mem.Mat)\n"
              "r = pl.extract(m, 256, 0, [256, 64], target_memory=pl.Mem.Right)")
    assert t["r"] == "pl.Tile[[256, 64], pl.BF16, pl.Mem.Right]"


def test_op6_tile_extract_from_vec_rejected():
    d = one(TX, TLOAD + "y = pl.tile.extract(t, 0, 0, [16, 64], target_memory=pl.Mem.Left)")
    assert d.rule == "OP-6" and "TEXTRACT" in d.message


def test_op6_tile_extract_space_pairs_are_a_hardware_rule_checked_per_target():
    vv = TLOAD + "y = pl.tile.extract(t, 0, 64, [16, 64], target_memory=pl.Mem.Vec)"
    ma = ("m = pl.tile.load(x, [0, 0], [32, 128], target_memory=pl.Mem.Mat)\n"
          "y = pl.tile.extract(m, 0, 0, [16, 128], target_memory=pl.Mem.Acc)")
    # before InferTileMemorySpace decides the spaces, the front end accepts any pair (PyPTO's IR does)
    for body in (vv, ma):
        for arch in ("a2a3", "a5"):
            assert codes(TX, body, arch=arch, hardware=False) == []
    # the UB-to-UB copy is a TEXTRACT of A5 only (PTOAS: "expects A2/A3 textract src to use loc=mat")
    assert codes(TX, vv, arch="a5") == []
    assert types(TX, vv, arch="a5")["y"] == "pl.Tile[[16, 64], pl.FP32, pl.Mem.Vec]"
    d = one(TX, vv)
    assert d.rule == "OP-6" and "Vec -> Vec is not a TEXTRACT path on" in d.message and "A2/A3" in d.message
    # no TEXTRACT writes L0C
    for arch in ("a2a3", "a5"):
        assert codes(TX, ma, arch=arch) == [("PTOC-E0202", "OP-6")]


def test_op6_tile_transpose_swaps_axes():
    t = types(TX, "t = pl.tile.load(x, [0, 0], [32, 128], [20, 128])\ny = pl.tile.transpose(t, 0, 1)")
    assert t["y"] == "pl.Tile[[128, 32], pl.FP32, pl.Mem.Vec, pl.TileView(valid_shape=[128, 20])]"


def test_op6_tile_transpose_same_axis_rejected():
    assert codes(TX, TLOAD + "y = pl.tile.transpose(t, 1, 1)") == [("PTOC-E0202", None)]


def test_op6_tile_set_validshape_keeps_stride_and_start_offset():
    # corpus 25: set_validshape(right, 32, 60) on the [32, 64] column window
    t = types(TX, TLOAD + "r = pl.tile.slice(t, [32, 64], [0, 64])\ny = pl.tile.set_validshape(r, 32, 60)")
    assert t["y"] == ("pl.Tile[[32, 64], pl.FP32, pl.Mem.Vec, pl.TileView(valid_shape=[32, 60], "
                      "stride=[128, 1], start_offset=64)]")


def test_op6_tile_set_validshape_dynamic_rows():
    t = types(TX + ", n: pl.Scalar[pl.INDEX]", TLOAD + "y = pl.set_validshape(t, n, 128)")
    assert t["y"] == "pl.Tile[[32, 128], pl.FP32, pl.Mem.Vec, pl.TileView(valid_shape=[n, 128])]"


def test_op6_tile_set_validshape_beyond_shape_rejected():
    d = one(TX, TLOAD + "y = pl.tile.set_validshape(t, 64, 128)")
    assert "exceeds" in d.message


def test_op6_tile_fillpad_makes_tile_fully_valid():
    t = types(TX, "t = pl.tile.load(x, [0, 0], [32, 128], [32, 100])\ny = pl.tile.fillpad(t, pad_value=pl.PadValue.zero)")
    assert t["y"] == "pl.Tile[[32, 128], pl.FP32, pl.Mem.Vec, pl.TileView(pad=pl.PadValue.zero)]"


def test_op6_tile_fillpad_null_rejected():
    assert rules(TX, TLOAD + "y = pl.tile.fillpad(t, pad_value=pl.PadValue.null)") == ["OP-6"]


def test_op6_tile_fillpad_outside_vec_rejected():
    assert rules(TX, "t = pl.tile.load(x, [0, 0], [32, 128], target_memory=pl.Mem.Mat)\n"
                     "y = pl.tile.fillpad(t, pad_value=pl.PadValue.min)") == ["OP-6"]


# PyPTO's tile.fillpad_inplace (the padding filled in the tile itself) and tile.fillpad_expand (copied into
# a larger tile of `shape`, the new area filled): both fully valid, pad recorded (tile_ops/elementwise.cpp)
def test_fillpad_inplace_and_expand():
    t = types(TX, "t = pl.tile.load(x, [0, 0], [32, 128], [32, 100])\n"
                  "y = pl.tile.fillpad_inplace(t, pad_value=pl.PadValue.max)\n"
                  "z = pl.tile.fillpad_expand(t, [64, 128], pad_value=pl.PadValue.zero)\nw = pl.fillpad_expand(t, [32, 256])")
    assert t["y"] == "pl.Tile[[32, 128], pl.FP32, pl.Mem.Vec, pl.TileView(pad=pl.PadValue.max)]"
    assert t["z"] == "pl.Tile[[64, 128], pl.FP32, pl.Mem.Vec, pl.TileView(pad=pl.PadValue.zero)]"
    assert t["w"] == "pl.Tile[[32, 256], pl.FP32, pl.Mem.Vec, pl.TileView(pad=pl.PadValue.zero)]"


def test_fillpad_expand_must_cover_the_source():
    d = diagnostics(TX, TLOAD + "z = pl.tile.fillpad_expand(t, [16, 128])")
    assert [x.code for x in d] == ["PTOC-E0202"] and "must cover" in d[0].message
