"""The dtype table against the spec: names, bits, c0 (NZ-1), .pto and C++ spellings (pto-format.md),
packed FP4 carriers (FP4-1)."""

import pytest

from ptoc.ir import dtypes

SPEC_NAMES = ["BOOL", "INT4", "INT8", "INT16", "INT32", "INT64", "UINT4", "UINT8", "UINT16", "UINT32", "UINT64",
              "INDEX", "FP8E4M3FN", "FP8E5M2", "FP8E8M0", "FP16", "FP32", "BF16", "HF4", "HF8", "FP4E2M1X2",
              "FP4E1M2X2"]
# PyPTO's DataType.TASK_ID (the id of a submitted task): a scalar-only type of orchestration code, with no
# .pto, C++ or numpy spelling
ORCHESTRATION_NAMES = ["TASK_ID"]


def test_every_spec_dtype_is_in_the_table():
    assert sorted(d.name for d in dtypes.ALL) == sorted(SPEC_NAMES + ORCHESTRATION_NAMES)


def test_task_id_is_a_scalar_only_type():
    t = dtypes.BY_NAME["TASK_ID"]
    assert (t.pto, t.cpp, t.numpy) == (None, None, None)
    assert not t.is_int and not t.is_float


@pytest.mark.parametrize("name,c0", [("INT8", 32), ("UINT8", 32), ("FP8E4M3FN", 32), ("FP8E5M2", 32),
                                     ("FP16", 16), ("BF16", 16), ("FP32", 8), ("INT32", 8)])
def test_nz1_c0_is_elements_per_32_byte_line(name, c0):
    assert dtypes.BY_NAME[name].c0 == c0


@pytest.mark.parametrize("name", ["INT4", "UINT4", "HF4", "BOOL"])
def test_sub_byte_types_have_no_c0(name):
    assert dtypes.BY_NAME[name].c0 is None


@pytest.mark.parametrize("name,pto,cpp", [
    ("FP32", "f32", "float"), ("FP16", "f16", "half"), ("BF16", "bf16", "bfloat16_t"),
    ("INT8", "i8", "int8_t"), ("INT16", "i16", "int16_t"), ("INT32", "i32", "int32_t"), ("INT64", "i64", "int64_t"),
    ("UINT8", "ui8", "uint8_t"), ("UINT16", "ui16", "uint16_t"), ("UINT32", "ui32", "uint32_t"),
    ("UINT64", "ui64", "uint64_t"), ("BOOL", "i1", "bool"), ("INDEX", "index", None),
    ("FP8E4M3FN", "f8E4M3FN", "float8_e4m3_t"), ("FP8E5M2", "f8E5M2", "float8_e5m2_t"),
    ("FP8E8M0", "!pto.f8E8M0", "float8_e8m0_t"), ("HF8", "!pto.hif8", "hifloat8_t"),
    ("FP4E2M1X2", "!pto.f4E2M1x2", "float4_e2m1x2_t"), ("FP4E1M2X2", "!pto.f4E1M2x2", "float4_e1m2x2_t"),
])
def test_pto_and_cpp_spellings_follow_pto_format(name, pto, cpp):
    d = dtypes.BY_NAME[name]
    assert (d.pto, d.cpp) == (pto, cpp)


def test_fp4_1_packed_carriers_are_one_byte_holding_two_values():
    for name in ("FP4E2M1X2", "FP4E1M2X2"):
        d = dtypes.BY_NAME[name]
        assert (d.bits, d.bytes, d.packed_values) == (8, 1, 2)
    # [2, 256] carriers = 512 bytes = 1024 values
    d = dtypes.FP4E2M1X2
    assert 2 * 256 * d.bytes == 512 and 2 * 256 * d.packed_values == 1024


def test_fp4_1_lower_case_aliases():
    assert dtypes.lookup("fp4e2m1x2") is dtypes.FP4E2M1X2 and dtypes.lookup("fp4e1m2x2") is dtypes.FP4E1M2X2


def test_fp4_1_old_name_is_removed():
    assert dtypes.lookup("FP4") is None and dtypes.REMOVED["FP4"] == "FP4E2M1X2"


def test_numpy_types_exist_where_declared():
    np = pytest.importorskip("numpy")
    pytest.importorskip("ml_dtypes")
    assert dtypes.numpy_dtype(dtypes.FP32) == np.float32
    assert dtypes.numpy_dtype(dtypes.BF16).itemsize == 2
    assert dtypes.numpy_dtype(dtypes.BY_NAME["FP8E4M3FN"]).itemsize == 1
    for d in dtypes.ALL:
        nd = dtypes.numpy_dtype(d)
        if nd is not None and not d.sub_byte:
            assert nd.itemsize == d.bytes, d.name
