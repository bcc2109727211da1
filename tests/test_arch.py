"""Target facts (ptoc/target/arch.py): capacities, alignment, c0 (NZ-1), packed FP4 (FP4-3), TMOV tables (MOV-6)."""

from __future__ import annotations

import dataclasses

import pytest

from ptoc.context import ARCHES as CONTEXT_ARCHES
from ptoc.ir import dtypes
from ptoc.target.arch import ARCHES, KiB, get_arch


def test_every_context_arch_has_facts():
    assert set(ARCHES) == set(CONTEXT_ARCHES) == {"a2a3", "a5"}
    for name in CONTEXT_ARCHES:
        assert get_arch(name).name == name


def test_unknown_arch_rejected():
    with pytest.raises(ValueError, match="a2a3"):
        get_arch("a3")


def test_arch_facts_are_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        get_arch("a5").supports_packed_fp4 = False  # type: ignore[misc]


@pytest.mark.parametrize("space,kib", [("Vec", 184), ("Mat", 512), ("Left", 64), ("Right", 64), ("Acc", 128),
                                       ("Bias", 1)])
def test_a2a3_capacities(space, kib):
    assert get_arch("a2a3").capacity(space) == kib * KiB


@pytest.mark.parametrize("space,kib", [("Vec", 240), ("Mat", 512), ("Left", 64), ("Right", 64), ("Acc", 256),
                                       ("Bias", 4)])
def test_a5_capacities(space, kib):
    assert get_arch("a5").capacity(space) == kib * KiB


def test_nz7_l0c_is_128_kib_on_a2a3():
    assert get_arch("a2a3").capacity("Acc") == 128 * 1024


def test_capacity_of_a_space_without_a_figure_is_none():
    assert get_arch("a5").capacity("LeftScale") is None


@pytest.mark.parametrize("arch", ["a2a3", "a5"])
def test_alignment_32_bytes_and_acc_rows_padded_to_16(arch):
    a = get_arch(arch)
    assert a.alignment_bytes == 32
    assert a.fractal_rows == 16
    assert a.acc_row_pad == 16
    # a 1-row FP32 Acc tile of 16 columns occupies 16 padded rows
    assert a.acc_alloc_bytes(1, 16, 4) == 16 * 16 * 4
    assert a.acc_alloc_bytes(16, 16, 4) == 16 * 16 * 4
    assert a.acc_alloc_bytes(17, 16, 4) == 32 * 16 * 4


@pytest.mark.parametrize("dt,c0", [("INT8", 32), ("UINT8", 32), ("FP8E4M3FN", 32), ("FP8E5M2", 32), ("FP16", 16),
                                   ("BF16", 16), ("FP32", 8), ("INT32", 8)])
def test_nz1_c0_is_256_over_bit_width(dt, c0):
    for arch in ("a2a3", "a5"):
        assert get_arch(arch).c0(dtypes.BY_NAME[dt]) == c0
    assert get_arch("a2a3").c0(dtypes.BY_NAME[dt].bits) == c0


def test_nz1_sub_byte_types_have_no_c0():
    assert get_arch("a5").c0(dtypes.BY_NAME["INT4"]) is None


def test_fp4_3_packed_fp4_on_a5_only():
    assert get_arch("a5").supports_packed_fp4 is True
    assert get_arch("a2a3").supports_packed_fp4 is False


@pytest.mark.parametrize("arch", ["a2a3", "a5"])
def test_matmul_accumulator_dtypes(arch):
    a = get_arch(arch)
    assert a.acc_dtype("FP16") == "FP32"
    assert a.acc_dtype("BF16") == "FP32"
    assert a.acc_dtype("FP32") == "FP32"
    assert a.acc_dtype("INT8") == "INT32"
    assert a.acc_dtype("INT16") is None


def test_mov6_a2a3_tmov_paths_are_exactly_the_reference_table():
    assert get_arch("a2a3").tmov.paths == {("Mat", "Left"), ("Mat", "Right"), ("Mat", "Bias"), ("Mat", "Scaling"),
                                           ("Vec", "Vec"), ("Acc", "Mat")}


def test_mov6_a5_tmov_paths_are_exactly_the_reference_table():
    assert get_arch("a5").tmov.paths == {("Mat", "Left"), ("Mat", "Right"), ("Mat", "Bias"), ("Mat", "Scaling"),
                                         ("Mat", "LeftScale"), ("Mat", "RightScale"), ("Vec", "Vec"), ("Vec", "Mat"),
                                         ("Acc", "Vec"), ("Acc", "Mat")}


def test_mov6_targets_listing():
    assert get_arch("a2a3").tmov.targets("Mat") == ("Left", "Right", "Bias", "Scaling")
    assert get_arch("a5").tmov.targets("Acc") == ("Vec", "Mat")
    assert get_arch("a2a3").tmov.targets("Left") == ()


def test_mov6_bias_rules_per_target():
    a2, a5 = get_arch("a2a3").tmov, get_arch("a5").tmov
    assert a2.bias_dtype_pairs == {("INT32", "INT32"), ("FP32", "FP32"), ("FP16", "FP32")}
    assert a5.bias_dtype_pairs == {("INT32", "INT32"), ("FP32", "FP32"), ("FP16", "FP32"), ("BF16", "FP32")}
    assert a2.bias_src_rows == a5.bias_src_rows == 1
    assert a2.bias_cols_align_bytes == a5.bias_cols_align_bytes == 64
    assert a5.bias_max_bytes == 4096


def test_mov6_scaling_rules_per_target():
    a2, a5 = get_arch("a2a3").tmov, get_arch("a5").tmov
    assert a2.scaling_dtypes == {"UINT64", "INT64"}
    assert a2.scaling_cols_align_bytes == a5.scaling_cols_align_bytes == 128
    assert a5.scaling_max_bytes == 4096


def test_mov6_a5_common_and_mx_checks():
    a5 = get_arch("a5").tmov
    assert a5.common_check and not get_arch("a2a3").tmov.common_check
    assert a5.common_dtypes == {"INT8", "HF8", "FP8E5M2", "FP8E4M3FN", "FP16", "BF16", "FP32", "FP4E2M1X2",
                                "FP4E1M2X2"}
    assert a5.mx_dtypes == {"FP8E8M0"}
    assert a5.acc_dst_stride_align_bytes == 32


def test_mov6_cube_vector_boundary_pairs_are_cross_core_only_on_a2a3():
    a2, a5 = get_arch("a2a3").tmov, get_arch("a5").tmov
    assert a2.cross_core_only("Acc", "Vec") and a2.cross_core_only("Vec", "Mat")
    assert not a5.cross_core_only("Acc", "Vec") and not a5.cross_core_only("Vec", "Mat")
    assert not a2.cross_core_only("Mat", "Vec")
