"""tile.move: OP-7 result views, MOV-1..MOV-5 repack forms, MOV-6 TMOV legality per target."""

from __future__ import annotations

import numpy as np
import pytest
from optest import codes, diagnostics, types

from ptoc.ir import dtypes
from ptoc.ir.nodes import ConstInt, MemRef, StrLit, TileType
from ptoc.ir.types import effective_tile_view
from ptoc.ops.move import (
    check_move_not_in_place,
    dn_to_zz_index,
    dn_to_zz_order,
    dn_to_zz_violations,
    move_result_type,
    nd_to_nz_order,
    nd_to_nz_violations,
    nd_to_zn_index,
    nd_to_zn_order,
    nd_to_zn_violations,
    nd_to_zz_index,
    nd_to_zz_order,
    nd_to_zz_tmp_bytes,
    nd_to_zz_violations,
    tmov_dtype_problem,
    tmov_transform,
)
from ptoc.target.arch import get_arch

E = "PTOC-E0202"


def _t(shape, dt, mem):
    return TileType(tuple(ConstInt(d, dtypes.INDEX) for d in shape), dtypes.BY_NAME[dt], None, mem, None)


def _move(params: str, src: str, target: str, arch: str = "a2a3", extra: str = "") -> str:
    return types(params, f"y = pl.tile.move({src}, target_memory=pl.Mem.{target}{extra})", arch)["y"]


def _move_codes(params: str, src: str, target: str, arch: str = "a2a3", extra: str = ""):
    return codes(params, f"y = pl.tile.move({src}, target_memory=pl.Mem.{target}{extra})", arch)


MAT16 = "a: pl.Tile[[16, 16], pl.FP16, pl.Mem.Mat]"

# --------------------------------------------------------------------------------------------------
# OP-7: result view
# --------------------------------------------------------------------------------------------------


def test_op7_mat_to_left_takes_left_implicit_layout():
    assert _move(MAT16, "a", "Left") == "pl.Tile[[16, 16], pl.FP16, pl.Mem.Left]"


def test_op7_mat_to_right_takes_right_implicit_layout():
    assert _move("b: pl.Tile[[16, 32], pl.FP16, pl.Mem.Mat]", "b", "Right") == \
        "pl.Tile[[16, 32], pl.FP16, pl.Mem.Right]"


def test_op7_right_result_is_row_major_even_for_an_n_by_1_tile():
    # seed 002: L0B needs blayout=row_major although the implicit blayout of an [N, 1] shape is col_major
    r = move_result_type(_t([16, 1], "FP16", "Vec"), "Right")
    eff = effective_tile_view(r)
    assert (eff["blayout"], eff["slayout"], eff["fractal"]) == ("row_major", "col_major", 512)


def test_op7_acc_result_view_has_fractal_1024():
    r = move_result_type(_t([16, 16], "FP32", "Mat"), "Acc")
    eff = effective_tile_view(r)
    assert (eff["blayout"], eff["slayout"], eff["fractal"]) == ("col_major", "row_major", 1024)


def test_op7_mx_scale_spaces_have_fractal_32_and_their_own_layout():
    p = "s: pl.Tile[[32, 8], pl.FP8E8M0, pl.Mem.Mat]"
    from ptoc.frontend.parser import parse_program
    from ptoc.ir.types import effective_tile_view
    from ptoc.ir.verifier import function_types
    from ptoc.context import CompileContext
    from optest import kernel

    for space, blayout, slayout in (("LeftScale", "row_major", "row_major"), ("RightScale", "col_major", "col_major")):
        body = f"y = pl.tile.move(s, target_memory=pl.Mem.{space})"
        # the scale spaces' own layout is their implicit view, so the printed type needs no TileView
        assert types(p, body, "a5")["y"] == f"pl.Tile[[32, 8], pl.FP8E8M0, pl.Mem.{space}]"
        ctx = CompileContext(arch="a5")
        y = function_types(parse_program(kernel(p, body), "t.ir", ctx=ctx), ctx)["k"]["y"]
        eff = effective_tile_view(y)
        assert (eff["fractal"], eff["blayout"], eff["slayout"]) == (32, blayout, slayout)


def test_op7_vec_to_vec_keeps_source_layout_valid_shape_and_pad():
    p = ("v: pl.Tile[[16, 32], pl.FP32, pl.Mem.Vec, pl.TileView(valid_shape=[16, 5], "
         "blayout=pl.TileLayout.col_major, pad=pl.PadValue.zero)]")
    assert _move(p, "v", "Vec") == ("pl.Tile[[16, 32], pl.FP32, pl.Mem.Vec, pl.TileView(valid_shape=[16, 5], "
                                     "blayout=pl.TileLayout.col_major, pad=pl.PadValue.zero)]")


def test_op7_stride_start_offset_and_compact_are_dropped():
    p = ("v: pl.Tile[[16, 32], pl.FP32, pl.Mem.Vec, pl.TileView(stride=[64, 1], start_offset=16, "
         "compact=pl.CompactMode.normal)]")
    assert _move(p, "v", "Vec") == "pl.Tile[[16, 32], pl.FP32, pl.Mem.Vec]"


def test_op7_memref_is_not_carried_to_the_result():
    p = 'v: pl.Tile[[16, 16], pl.FP32, pl.MemRef("mem_vec_0", pl.const(0, pl.INT64), 1024), pl.Mem.Vec]'
    assert _move(p, "v", "Vec") == "pl.Tile[[16, 16], pl.FP32, pl.Mem.Vec]"


def test_op7_valid_shape_and_pad_carried_into_a_layout_space():
    p = "a: pl.Tile[[16, 16], pl.FP16, pl.Mem.Mat, pl.TileView(valid_shape=[10, 16], pad=pl.PadValue.zero)]"
    assert _move(p, "a", "Left") == \
        "pl.Tile[[16, 16], pl.FP16, pl.Mem.Left, pl.TileView(valid_shape=[10, 16], pad=pl.PadValue.zero)]"


def test_op7_acc_to_vec_keeps_the_acc_layout_with_fractal_512():
    p = "c: pl.Tile[[16, 16], pl.FP32, pl.Mem.Acc]"
    assert _move(p, "c", "Vec", "a5") == ("pl.Tile[[16, 16], pl.FP32, pl.Mem.Vec, pl.TileView("
                                          "blayout=pl.TileLayout.col_major, slayout=pl.TileLayout.row_major)]")


def test_op7_acc_to_mat_takes_the_mat_layout():
    assert _move("c: pl.Tile[[16, 16], pl.FP32, pl.Mem.Acc]", "c", "Mat") == "pl.Tile[[16, 16], pl.FP32, pl.Mem.Mat]"


def test_op7_vec_to_vec_byte_mx_scale_keeps_its_32_byte_box():
    p = "x: pl.Tile[[16, 32], pl.FP8E8M0, pl.Mem.Vec, pl.TileView(fractal=32)]"
    assert _move(p, "x", "Vec") == "pl.Tile[[16, 32], pl.FP8E8M0, pl.Mem.Vec, pl.TileView(fractal=32)]"


def test_op7_vec_to_mat_byte_mx_scale_keeps_its_32_byte_box():
    p = "x: pl.Tile[[16, 32], pl.FP8E8M0, pl.Mem.Vec, pl.TileView(fractal=32)]"
    assert "fractal=32" in _move(p, "x", "Mat", "a5")


def test_op7_non_byte_tile_gets_fractal_512_on_vec_to_vec():
    p = "x: pl.Tile[[16, 32], pl.FP16, pl.Mem.Vec, pl.TileView(fractal=32)]"
    assert _move(p, "x", "Vec") == "pl.Tile[[16, 32], pl.FP16, pl.Mem.Vec]"


def test_op7_blayout_and_slayout_kwargs_override_the_target_layout():
    out = _move("b: pl.Tile[[16, 32], pl.FP16, pl.Mem.Vec]", "b", "Vec",
                extra=", blayout=pl.TileLayout.col_major")
    assert out == "pl.Tile[[16, 32], pl.FP16, pl.Mem.Vec, pl.TileView(blayout=pl.TileLayout.col_major)]"


def test_op7_vec_to_vec_move_is_accepted_it_is_not_in_place_by_itself():
    assert _move("v: pl.Tile[[16, 16], pl.FP32, pl.Mem.Vec]", "v", "Vec") == "pl.Tile[[16, 16], pl.FP32, pl.Mem.Vec]"


def test_op7_in_place_move_same_address_rejected():
    ref = MemRef(StrLit("mem_vec_0"), ConstInt(0, dtypes.INT64), ConstInt(1024, dtypes.INDEX))
    other = MemRef(StrLit("mem_vec_0"), ConstInt(1024, dtypes.INT64), ConstInt(1024, dtypes.INDEX))
    src = TileType(_t([16, 16], "FP32", "Vec").shape, dtypes.FP32, ref, "Vec")
    same = TileType(src.shape, dtypes.FP32, ref, "Vec")
    apart = TileType(src.shape, dtypes.FP32, other, "Vec")
    assert "in place" in check_move_not_in_place(src, same)
    assert check_move_not_in_place(src, apart) is None


def test_op7_missing_target_memory_rejected():
    assert codes(MAT16, "y = pl.tile.move(a)") == [("PTOC-E0201", None)]


def test_op7_move_to_ddr_rejected():
    assert _move_codes(MAT16, "a", "DDR") == [(E, "MOV-6")]


def test_op7_move_of_a_tensor_rejected():
    assert codes("t: pl.Tensor[[16, 16], pl.FP16]", "y = pl.tile.move(t, target_memory=pl.Mem.Vec)")


def test_op7_short_name_move_resolves_to_tile_move():
    assert types(MAT16, "y = pl.move(a, target_memory=pl.Mem.Left)")["y"] == "pl.Tile[[16, 16], pl.FP16, pl.Mem.Left]"


# --------------------------------------------------------------------------------------------------
# MOV-6: TMOV paths and dtype pairs per target
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("src,dst", [("Mat", "Left"), ("Mat", "Right"), ("Vec", "Vec"), ("Acc", "Mat")])
@pytest.mark.parametrize("arch", ["a2a3", "a5"])
def test_mov6_paths_legal_on_both_targets(src, dst, arch):
    p = f"x: pl.Tile[[16, 16], pl.FP32, pl.Mem.{src}]"
    assert _move_codes(p, "x", dst, arch) == []


@pytest.mark.parametrize("src,dst", [("Vec", "Mat"), ("Acc", "Vec")])
@pytest.mark.parametrize("arch", ["a2a3", "a5"])
def test_mov6_cube_vector_boundary_moves_accepted_on_both_targets(src, dst, arch):
    # a TMOV on a5; on a2a3 (no TMOV path) the cross-core transfer of a mixed kernel (seed 002: Vec->Mat 跨核暂存)
    p = f"x: pl.Tile[[16, 16], pl.FP32, pl.Mem.{src}]"
    assert _move_codes(p, "x", dst, arch) == []
    assert get_arch(arch).tmov.cross_core_only(src, dst) == (arch == "a2a3")


@pytest.mark.parametrize("dst", ["Left", "Right"])
@pytest.mark.parametrize("arch", ["a2a3", "a5"])
def test_mov6_vec_to_l0_is_a_cross_core_hand_off_on_both_targets(dst, arch):
    # no TMOV writes L0A/L0B from UB on either target; in a mixed InCore kernel the move is the vector ->
    # cube hand-off (push, pop into Mat, TMOV on to L0), so the op rule accepts it; InferTileMemorySpace
    # rejects it in a one-core (AIC / AIV) kernel (PTOC-E0750)
    p = "x: pl.Tile[[16, 16], pl.FP32, pl.Mem.Vec]"
    assert _move_codes(p, "x", dst, arch) == []
    assert get_arch(arch).tmov.cross_core_only("Vec", dst) and not get_arch(arch).tmov.legal("Vec", dst)


def test_mov6_rejection_hint_names_the_target_that_has_the_path():
    d = diagnostics("x: pl.Tile[[32, 8], pl.FP8E8M0, pl.Mem.Mat]", "y = pl.tile.move(x, target_memory=pl.Mem.LeftScale)")
    assert "Mat -> LeftScale" in d[0].message and "a5" in d[0].hint and "Left" in d[0].hint


@pytest.mark.parametrize("src,dst", [("Mat", "Vec"), ("Mat", "Mat"), ("Left", "Acc"), ("Left", "Right"),
                                     ("Right", "Vec"), ("Bias", "Vec")])
@pytest.mark.parametrize("arch", ["a2a3", "a5"])
def test_mov6_paths_without_tmov_rejected(src, dst, arch):
    p = f"x: pl.Tile[[16, 16], pl.FP32, pl.Mem.{src}]"
    assert _move_codes(p, "x", dst, arch) == [(E, "MOV-6")]


@pytest.mark.parametrize("arch", ["a2a3", "a5"])
def test_mov6_is_a_hardware_rule_left_to_memory_inference(arch):
    # the front end types a Mat -> Vec move (OP-7); the path is judged once spaces are decided
    p = "x: pl.Tile[[16, 16], pl.FP32, pl.Mem.Mat]"
    body = "y = pl.tile.move(x, target_memory=pl.Mem.Vec)"
    assert codes(p, body, arch, hardware=False) == []
    # OP-7: a flat destination keeps the source's (Mat: NZ) layout
    assert types(p, body, arch, hardware=False)["y"] == ("pl.Tile[[16, 16], pl.FP32, pl.Mem.Vec, pl.TileView("
                                                         "blayout=pl.TileLayout.col_major, slayout=pl.TileLayout.row_major)]")
    assert codes(p, body, arch) == [(E, "MOV-6")]


def test_mov6_mx_scale_moves_exist_on_a5_only():
    p = "s: pl.Tile[[32, 8], pl.FP8E8M0, pl.Mem.Mat]"
    assert _move_codes(p, "s", "LeftScale", "a2a3") == [(E, "MOV-6")]
    assert _move_codes(p, "s", "LeftScale", "a5") == []
    assert _move_codes(p, "s", "RightScale", "a5") == []


def test_mov6_a5_mx_scale_move_accepts_fp8e8m0_only():
    assert _move_codes("s: pl.Tile[[32, 16], pl.FP16, pl.Mem.Mat]", "s", "LeftScale", "a5") == [(E, "MOV-6")]


@pytest.mark.parametrize("arch", ["a2a3", "a5"])
@pytest.mark.parametrize("dt", ["FP32", "INT32"])
def test_mov6_mat_to_bias_same_dtype_pairs_accepted(arch, dt):
    assert _move_codes(f"b: pl.Tile[[1, 64], pl.{dt}, pl.Mem.Mat]", "b", "Bias", arch) == []


def test_mov6_mat_to_bias_result_type_is_row_major():
    # pto-isa's TMATMUL_BIAS accepts only a row-major Bias tile (cpu/TMatmul.hpp CheckBiasValid:
    # TileBias::isRowMajor): the result takes Bias's own row_major / none_box layout (pto-format.md), not
    # the col-major boxes of its Mat source, so the type spells out no view
    assert _move("b: pl.Tile[[1, 64], pl.FP32, pl.Mem.Mat]", "b", "Bias") == "pl.Tile[[1, 64], pl.FP32, pl.Mem.Bias]"


def test_mov6_mat_to_bias_fp16_rejected_move_keeps_the_dtype():
    d = diagnostics("b: pl.Tile[[1, 64], pl.FP16, pl.Mem.Mat]", "y = pl.tile.move(b, target_memory=pl.Mem.Bias)")
    assert [(x.code, x.rule) for x in d] == [(E, "MOV-6")]
    assert "FP32" in d[0].hint


def test_mov6_bias_dtype_pairs_per_target():
    a2, a5 = get_arch("a2a3"), get_arch("a5")
    assert tmov_dtype_problem(a2, "Mat", "Bias", "FP16", "FP32") is None
    assert tmov_dtype_problem(a2, "Mat", "Bias", "BF16", "FP32") is not None
    assert tmov_dtype_problem(a5, "Mat", "Bias", "BF16", "FP32") is None
    assert tmov_dtype_problem(a5, "Mat", "Bias", "INT32", "INT32") is None
    assert tmov_dtype_problem(a5, "Mat", "Bias", "FP32", "FP16") is not None


def test_mov6_scaling_dtypes_per_target():
    assert tmov_dtype_problem(get_arch("a2a3"), "Mat", "Scaling", "UINT64", "UINT64") is None
    assert tmov_dtype_problem(get_arch("a2a3"), "Mat", "Scaling", "FP32", "FP32") is not None
    assert tmov_dtype_problem(get_arch("a2a3"), "Mat", "Scaling", "INT64", "UINT64") is not None


def test_mov6_mat_to_bias_needs_one_source_row():
    assert _move_codes("b: pl.Tile[[2, 64], pl.FP32, pl.Mem.Mat]", "b", "Bias") == [(E, "MOV-6")]


def test_mov6_mat_to_bias_row_must_be_64_byte_aligned():
    # 8 x 4 bytes = 32 bytes
    assert _move_codes("b: pl.Tile[[1, 8], pl.FP32, pl.Mem.Mat]", "b", "Bias") == [(E, "MOV-6")]
    assert _move_codes("b: pl.Tile[[1, 16], pl.FP32, pl.Mem.Mat]", "b", "Bias") == []


def test_mov6_bias_footprint_limit_per_target():
    # [1, 512] FP32 = 2048 bytes: over A2/A3's 1 KiB bias table, within A5's 4096 bytes
    p = "b: pl.Tile[[1, 512], pl.FP32, pl.Mem.Mat]"
    assert _move_codes(p, "b", "Bias", "a2a3") == [(E, "MOV-6")]
    assert _move_codes(p, "b", "Bias", "a5") == []
    assert _move_codes("b: pl.Tile[[1, 2048], pl.FP32, pl.Mem.Mat]", "b", "Bias", "a5") == [(E, "MOV-6")]


def test_mov6_a5_mat_to_left_element_types():
    # A5 CommonCheck lists no INT32; A2/A3 has no such list
    p = "x: pl.Tile[[16, 16], pl.INT32, pl.Mem.Mat]"
    assert _move_codes(p, "x", "Left", "a5") == [(E, "MOV-6")]
    assert _move_codes(p, "x", "Left", "a2a3") == []
    assert _move_codes("x: pl.Tile[[16, 32], pl.INT8, pl.Mem.Mat]", "x", "Left", "a5") == []


def test_mov6_a5_source_layout_col_major_needs_row_major_fractals():
    p = ("x: pl.Tile[[16, 16], pl.FP16, pl.Mem.Mat, pl.TileView(blayout=pl.TileLayout.col_major, "
         "slayout=pl.TileLayout.col_major)]")
    assert _move_codes(p, "x", "Left", "a5") == [(E, "MOV-6")]
    p_rm = "x: pl.Tile[[16, 16], pl.FP16, pl.Mem.Mat, pl.TileView(blayout=pl.TileLayout.row_major)]"
    assert _move_codes(p_rm, "x", "Left", "a5") == []


def test_mov6_a2a3_cross_core_hand_off_skips_the_a5_tmov_stride_rule():
    over = ", blayout=pl.TileLayout.row_major, slayout=pl.TileLayout.none_box"
    assert _move_codes("c: pl.Tile[[16, 4], pl.FP32, pl.Mem.Acc]", "c", "Vec", "a2a3", over) == []


def test_mov6_a5_acc_to_flat_vec_destination_stride_32_byte_aligned():
    over = ", blayout=pl.TileLayout.row_major, slayout=pl.TileLayout.none_box"
    assert _move_codes("c: pl.Tile[[16, 4], pl.FP32, pl.Mem.Acc]", "c", "Vec", "a5", over) == [(E, "MOV-6")]
    assert _move_codes("c: pl.Tile[[16, 16], pl.FP32, pl.Mem.Acc]", "c", "Vec", "a5", over) == []


def test_mov6_tile_without_memory_space_is_not_path_checked():
    assert _move_codes("x: pl.Tile[[16, 16], pl.FP16]", "x", "Left") == []


def test_mov6_result_in_a_boxed_space_must_be_whole_fractals():
    # Mat [16, 8] FP16 -> Left: NZ fractals of 16 x 16 (NZ-1)
    assert _move_codes("x: pl.Tile[[16, 8], pl.FP16, pl.Mem.Mat]", "x", "Left") == [(E, "NZ-1")]


# --------------------------------------------------------------------------------------------------
# MOV-1..MOV-5: repack forms
# --------------------------------------------------------------------------------------------------


def test_mov_forms_classified_by_source_and_destination_layout():
    assert tmov_transform("row_major", "none_box", "col_major", "row_major") == "ND->NZ"
    assert tmov_transform("row_major", "none_box", "row_major", "col_major") == "ND->ZN"
    assert tmov_transform("row_major", "none_box", "row_major", "row_major") == "ND->ZZ"
    assert tmov_transform("col_major", "none_box", "row_major", "row_major") == "DN->ZZ"
    assert tmov_transform("row_major", "none_box", "row_major", "none_box") is None
    assert tmov_transform("col_major", "row_major", "col_major", "row_major") is None


def test_mov1_reference_example_128x256_bf16_vec_to_mat_nz_accepted():
    p = "s: pl.Tile[[128, 256], pl.BF16, pl.Mem.Vec]"
    assert _move(p, "s", "Mat", "a5") == "pl.Tile[[128, 256], pl.BF16, pl.Mem.Mat]"


def test_mov1_nd_to_nz_conditions():
    assert nd_to_nz_violations(128, 256, 16) == []
    assert len(nd_to_nz_violations(8, 256, 16)) == 1
    assert len(nd_to_nz_violations(16, 24, 16)) == 1
    assert nd_to_nz_violations(16, 32, 32) == []


def test_mov1_nd_to_nz_move_of_partial_fractals_rejected():
    assert _move_codes("s: pl.Tile[[16, 8], pl.FP16, pl.Mem.Vec]", "s", "Mat", "a5") == [(E, "MOV-1")]
    assert _move_codes("s: pl.Tile[[8, 16], pl.FP16, pl.Mem.Vec]", "s", "Mat", "a5") == [(E, "MOV-1")]


def test_mov1_nd_to_nz_index_map_matches_numpy_blocking():
    r, c, c0 = 32, 64, 16
    a = np.arange(r * c).reshape(r, c)
    want = a.reshape(r // 16, 16, c // c0, c0).transpose(2, 0, 1, 3).ravel()
    got = [a[i, j] for i, j in nd_to_nz_order(r, c, c0)]
    assert np.array_equal(got, want)


def test_mov2_nd_to_zn_conditions_k_multiple_of_k0_n_multiple_of_16():
    assert nd_to_zn_violations(32, 16, 32) == []
    assert len(nd_to_zn_violations(16, 16, 32)) == 1  # INT8: K0 = 32
    assert len(nd_to_zn_violations(16, 8, 16)) == 1  # N % 16
    assert len(nd_to_zn_violations(12, 8, 8)) == 2


def test_mov2_nd_to_zn_move_checks_k0_and_n():
    zn = ", blayout=pl.TileLayout.row_major, slayout=pl.TileLayout.col_major"
    assert _move_codes("s: pl.Tile[[32, 16], pl.INT8, pl.Mem.Vec]", "s", "Mat", "a5", zn) == []
    assert _move_codes("s: pl.Tile[[16, 16], pl.INT8, pl.Mem.Vec]", "s", "Mat", "a5", zn) == [(E, "MOV-2")]
    assert _move_codes("s: pl.Tile[[16, 8], pl.FP16, pl.Mem.Vec]", "s", "Mat", "a5", zn) == [(E, "MOV-2")]


def test_mov2_nd_to_zn_index_map_is_a_transpose_inside_each_fractal():
    k, n, k0 = 64, 32, 16
    s = np.arange(k * n).reshape(k, n)
    want = s.reshape(k // k0, k0, n // 16, 16).transpose(0, 2, 3, 1).ravel()
    got = [s[i, j] for i, j in nd_to_zn_order(k, n, k0)]
    assert np.array_equal(got, want)
    assert nd_to_zn_index(1, 2, 3, 4, 16) == (1 * 16 + 4, 2 * 16 + 3)


def test_mov3_nd_to_zz_index_map_from_the_reference():
    # D_ZZ[rb, c, q, d] = D_ND[16*rb + d][2*c + q]
    assert nd_to_zz_index(2, 3, 1, 5) == (16 * 2 + 5, 2 * 3 + 1)


def test_mov3_nd_to_zz_order_matches_numpy():
    r, c = 48, 8
    a = np.arange(r * c).reshape(r, c)
    want = a.reshape(r // 16, 16, c // 2, 2).transpose(0, 2, 3, 1).ravel()
    got = [a[i, j] for i, j in nd_to_zz_order(r, c)]
    assert np.array_equal(got, want)


def test_mov3_nd_to_zz_conditions():
    assert nd_to_zz_violations(128, 8) == []  # exponent tile of the M=128, N=256 example
    assert len(nd_to_zz_violations(128, 7)) == 1
    assert len(nd_to_zz_violations(24, 8)) == 1


def test_mov3_nd_to_zz_move_with_odd_columns_rejected():
    zz = ", blayout=pl.TileLayout.row_major, slayout=pl.TileLayout.row_major"
    ok = "x: pl.Tile[[128, 8], pl.FP8E8M0, pl.Mem.Vec, pl.TileView(fractal=32)]"
    bad = "x: pl.Tile[[128, 7], pl.FP8E8M0, pl.Mem.Vec, pl.TileView(fractal=32)]"
    assert _move_codes(ok, "x", "Mat", "a5", zz) == []
    assert _move_codes(bad, "x", "Mat", "a5", zz) == [(E, "MOV-3")]


def test_mov4_dn_to_zz_index_map_from_the_reference():
    # E_ZZ[cb, p, q, d] = E_DN[2*p + d][16*cb + q]
    assert dn_to_zz_index(3, 1, 7, 1) == (2 * 1 + 1, 16 * 3 + 7)


def test_mov4_dn_to_zz_order_matches_numpy_transpose_then_nd_to_zz():
    mhat, n = 4, 256  # the reference's MXFP8 DN pipeline: M = 128 -> M^ = 4, N = 256
    e = np.arange(mhat * n).reshape(mhat, n)
    want = e.reshape(mhat // 2, 2, n // 16, 16).transpose(2, 0, 3, 1).ravel()
    got = [e[i, j] for i, j in dn_to_zz_order(mhat, n)]
    assert np.array_equal(got, want)


def test_mov4_dn_to_zz_conditions():
    assert dn_to_zz_violations(4, 256) == []
    assert len(dn_to_zz_violations(3, 256)) == 1
    assert len(dn_to_zz_violations(4, 40)) == 1


def test_mov4_dn_to_zz_move_checks_row_pairs():
    zz = ", blayout=pl.TileLayout.row_major, slayout=pl.TileLayout.row_major"
    dn = "x: pl.Tile[[{r}, 256], pl.FP8E8M0, pl.Mem.Vec, pl.TileView(blayout=pl.TileLayout.col_major, fractal=32)]"
    assert _move_codes(dn.format(r=4), "x", "Mat", "a5", zz) == []
    assert _move_codes(dn.format(r=3), "x", "Mat", "a5", zz) == [(E, "MOV-4")]


def test_mov5_nd_to_zz_tmp_bytes_reference_example_m128_n256_is_128():
    assert nd_to_zz_tmp_bytes(128, 256) == 128


def test_mov5_nd_to_zz_tmp_bytes_rounds_row_blocks_up():
    # (32 + ceil(17/16) * 64/64) * 2
    assert nd_to_zz_tmp_bytes(17, 64) == (32 + 2 * 1) * 2


def test_mov5_nd_to_zz_tmp_bytes_needs_whole_group_pairs():
    with pytest.raises(ValueError):
        nd_to_zz_tmp_bytes(128, 96)

