"""Host packers (ptoc.reference.packers): logical numpy array <-> the bytes a kernel reads from GM.

Rules: NZ-1..NZ-3 (c0, blocked shape, strides), NZ-10 (rejections), MOV-2 (ND->ZN), MOV-3 (ND->ZZ),
MOV-4 (DN->ZZ), FP4-1 (packed FP4 carriers count as bytes). Round trips are bit-exact (random bit
patterns, NaN payloads included).
"""

import io
import itertools
import math
import os

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ptoc.ir import dtypes as D
from ptoc.reference import nz_pack
from ptoc.reference import packers as P

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _np(name):
    return D.numpy_dtype(D.BY_NAME[name])


def _random(shape, name, seed):
    """Random bit patterns of dtype `name` (NaNs, infinities and subnormals included for floats)."""
    dt = _np(name)
    n = math.prod(shape)
    raw = np.random.default_rng(seed).integers(0, 256, size=n * dt.itemsize, dtype=np.uint8)
    return np.frombuffer(raw.tobytes(), dtype=dt).reshape(shape)


def _bits_equal(a, b):
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()


def _row_major_strides(shape):
    out, acc = [], 1
    for d in reversed(shape):
        out.append(acc)
        acc *= d
    return list(reversed(out))


# --------------------------------------------------------------------------------------------------
# strategies: a dtype, a layout and a shape the layout accepts
# --------------------------------------------------------------------------------------------------

seeds = st.integers(0, 2**32 - 1)
small = st.integers(1, 3)


@st.composite
def nd_case(draw):
    name = draw(st.sampled_from(P.SUPPORTED_DTYPES))
    shape = tuple(draw(st.lists(st.integers(0, 5), min_size=0, max_size=4)))
    return name, shape


@st.composite
def dn_case(draw):
    name = draw(st.sampled_from(P.SUPPORTED_DTYPES))
    shape = tuple(draw(st.lists(st.integers(1, 5), min_size=2, max_size=4)))
    return name, shape


@st.composite
def nz_case(draw, rank=None):
    name = draw(st.sampled_from(P.SUPPORTED_DTYPES))
    c0 = D.BY_NAME[name].c0
    rank = draw(st.integers(2, 4)) if rank is None else rank
    lead = tuple(draw(st.lists(small, min_size=rank - 2, max_size=rank - 2)))
    return name, lead + (16 * draw(small), c0 * draw(small))


@st.composite
def zn_case(draw):
    name = draw(st.sampled_from(P.ZN_DTYPES))
    k0 = 32 // _np(name).itemsize
    return name, (k0 * draw(small), 16 * draw(small))


@st.composite
def zz_case(draw):
    name = draw(st.sampled_from(P.ZZ_DTYPES))
    return name, (16 * draw(small), 2 * draw(st.integers(1, 4)))


@st.composite
def zz_dn_case(draw):
    name = draw(st.sampled_from(P.ZZ_DTYPES))
    return name, (2 * draw(st.integers(1, 4)), 16 * draw(small))


CASES = {"ND": nd_case(), "DN": dn_case(), "NZ": nz_case(), "ZN": zn_case(), "ZZ": zz_case(),
         "ZZ_DN": zz_dn_case()}


# --------------------------------------------------------------------------------------------------
# round trips (every layout, every supported dtype)
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("layout", P.LAYOUTS)
@SETTINGS
@given(data=st.data(), seed=seeds)
def test_round_trip_is_bit_exact(layout, data, seed):
    name, shape = data.draw(CASES[layout])
    x = _random(shape, name, seed)
    packed = P.pack(x, layout, name)
    assert isinstance(packed, bytes) and len(packed) == x.nbytes
    back = P.unpack(packed, layout, name, shape)
    assert _bits_equal(back, x)
    assert back.flags.writeable and back.flags.c_contiguous
    # a permutation of whole elements: the same multiset of element bit patterns
    ints = np.dtype(f"u{x.itemsize}")
    assert np.array_equal(np.sort(np.frombuffer(packed, ints)), np.sort(x.view(ints).ravel()))
    assert math.prod(P.blocked_shape(shape, name, layout)) == x.size


@SETTINGS
@given(case=nz_case(rank=4), seed=seeds)
def test_nz_rank4_folds_leading_axes_row_major_into_the_batch(case, seed):
    name, shape = case
    x = _random(shape, name, seed)
    g, e, rows, cols = shape
    c0 = D.BY_NAME[name].c0
    assert P.blocked_shape(shape, name) == (g * e, cols // c0, rows // 16, 16, c0)
    phys = np.frombuffer(P.pack(x, "NZ", name), dtype=x.dtype).reshape(P.blocked_shape(shape, name))
    for i, j in itertools.product(range(g), range(e)):  # panel b = i*E + j is the NZ image of x[i, j]
        assert phys[i * e + j].tobytes() == P.pack(x[i, j], "NZ", name)


@SETTINGS
@given(case=nz_case(rank=3), seed=seeds)
def test_nz_rank3_uses_the_leading_axis_as_batch(case, seed):
    name, shape = case
    x = _random(shape, name, seed)
    assert P.blocked_shape(shape, name)[0] == shape[0]
    per_panel = x[0].nbytes
    data = P.pack(x, "NZ", name)
    for b in range(shape[0]):
        assert data[b * per_panel:(b + 1) * per_panel] == P.pack(x[b], "NZ", name)


# --------------------------------------------------------------------------------------------------
# NZ against the spec's strides (NZ-2, NZ-3)
# --------------------------------------------------------------------------------------------------


def _check_nz_strides(shape, name, blocked, strides):
    assert P.blocked_shape(shape, name) == blocked
    assert _row_major_strides(blocked) == strides
    x = _random(shape, name, 7)
    flat = np.frombuffer(P.pack(x, "NZ", name), dtype=x.dtype)
    c0 = blocked[-1]
    for r, c in itertools.product(range(shape[0]), range(shape[1])):
        blocked_index = (0, c // c0, r // 16, r % 16, c % c0)
        off = sum(i * s for i, s in zip(blocked_index, strides))
        assert P.nz_offset((r, c), shape, name) == off
        assert flat[off].tobytes() == x[r, c].tobytes()


def test_nz_256x512_int8_matches_the_spec_strides():
    # NZ-2/NZ-3: [256, 512] INT8 -> [1, 16, 16, 16, 32], strides [131072, 8192, 512, 32, 1]
    _check_nz_strides((256, 512), "INT8", (1, 16, 16, 16, 32), [131072, 8192, 512, 32, 1])
    for r, c in [(0, 0), (15, 31), (16, 0), (17, 33), (255, 511), (100, 300)]:
        assert P.nz_offset((r, c), (256, 512), "int8") == (c // 32) * 8192 + (r // 16) * 512 + (r % 16) * 32 + c % 32
    assert P.nz_offset((17, 33), (256, 512), "INT8") == 8192 + 512 + 32 + 1


def test_nz_64x16_fp32_matches_the_acc_write_back_example():
    # NZ-7 example: logical [64, 16] FP32 -> partition [1, 2, 4, 16, 8], strides [1024, 512, 128, 8, 1]
    _check_nz_strides((64, 16), "FP32", (1, 2, 4, 16, 8), [1024, 512, 128, 8, 1])


def test_nz_blocked_shapes_of_the_spec_examples():
    assert P.blocked_shape((32, 2048, 4096), "INT8") == (32, 128, 128, 16, 32)  # NZ-2
    assert P.blocked_shape([256, 512], D.INT8) == (1, 16, 16, 16, 32)
    assert P.blocked_shape((2, 3, 32, 32), "fp16") == (6, 2, 2, 16, 16)
    assert P.blocked_shape((2, 3, 4, 16, 8), "FP32") == (24, 1, 1, 16, 8)
    assert P.blocked_shape((16, 64), "fp4e2m1x2") == (1, 2, 1, 16, 32)  # FP4-1: carriers, c0 = 32
    assert P.blocked_shape((16, 8), "INT64") == (1, 2, 1, 16, 4)  # c0 = 256 / 64


def test_nz_one_fractal_is_row_major():
    x = np.arange(16 * 8, dtype=np.float32).reshape(16, 8)
    assert P.pack(x, "NZ", "FP32") == x.tobytes()


@SETTINGS
@given(case=nz_case(), seed=seeds)
def test_nz_offset_matches_the_seed_formula_for_every_element(case, seed):
    name, shape = case
    x = _random(shape, name, seed)
    flat = np.frombuffer(P.pack(x, "NZ", name), dtype=x.dtype)
    c0 = D.BY_NAME[name].c0
    *lead, rows, cols = shape
    for idx in itertools.islice(np.ndindex(*shape), 0, None, 7):
        *li, r, c = idx
        b = int(np.ravel_multi_index(li, lead)) if lead else 0
        off = b * cols * rows + (c // c0) * rows * c0 + (r // 16) * 16 * c0 + (r % 16) * c0 + c % c0
        assert P.nz_offset(idx, shape, name) == off
        assert flat[off].tobytes() == x[idx].tobytes()


@SETTINGS
@given(case=nz_case(), seed=seeds)
def test_nz_agrees_with_the_nz_pack_reference(case, seed):
    name, shape = case
    x = _random(shape, name, seed)
    if x.itemsize not in (1, 2, 4):  # nz_pack has no 8-byte form
        with pytest.raises(ValueError):
            nz_pack.pack_bytes(x)
        return
    data = P.pack(x, "NZ", name)
    assert data == nz_pack.pack_bytes(x)
    assert _bits_equal(nz_pack.unpack_bytes(data, shape, x.dtype), x)
    assert _bits_equal(P.unpack(nz_pack.pack_bytes(x), "NZ", name, shape), x)
    assert P.blocked_shape(shape, name) == nz_pack.blocked_shape(shape, nz_pack.c0_of(x.dtype))


# --------------------------------------------------------------------------------------------------
# DN, ZN, ZZ by hand
# --------------------------------------------------------------------------------------------------


def test_dn_3x2_by_hand():
    x = np.array([[10, 11], [20, 21], [30, 31]], dtype=np.int8)
    assert list(P.pack(x, "DN", "int8")) == [10, 20, 30, 11, 21, 31]
    assert P.blocked_shape((3, 2), "int8", "DN") == (2, 3)
    assert np.array_equal(P.unpack(bytes([10, 20, 30, 11, 21, 31]), "DN", "INT8", (3, 2)), x)


def test_dn_leading_axes_stay_row_major():
    x = np.arange(12, dtype=np.uint16).reshape(2, 3, 2)
    assert list(np.frombuffer(P.pack(x, "DN", "UINT16"), np.uint16)) == [0, 2, 4, 1, 3, 5, 6, 8, 10, 7, 9, 11]


def test_nd_is_the_plain_row_major_image():
    x = _random((3, 5, 7), "BF16", 1)
    assert P.pack(x, "ND", "BF16") == x.tobytes()


def test_zz_nd_mov3_by_hand():
    # MOV-3: D_ZZ[rb, c, q, d] = D_ND[16*rb + d][2*c + q]; X[r][col] = 4*r + col on a [16, 4] exponent tile
    x = (4 * np.arange(16)[:, None] + np.arange(4)[None, :]).astype(np.uint8)
    expected = ([0, 4, 8, 12, 16, 20, 24, 28, 32, 36, 40, 44, 48, 52, 56, 60]   # c=0, q=0: column 0
                + [1, 5, 9, 13, 17, 21, 25, 29, 33, 37, 41, 45, 49, 53, 57, 61]  # c=0, q=1: column 1
                + [2, 6, 10, 14, 18, 22, 26, 30, 34, 38, 42, 46, 50, 54, 58, 62]  # c=1, q=0: column 2
                + [3, 7, 11, 15, 19, 23, 27, 31, 35, 39, 43, 47, 51, 55, 59, 63])  # c=1, q=1: column 3
    assert list(P.pack(x, "ZZ", "UINT8")) == expected
    assert P.blocked_shape((16, 4), "uint8", "ZZ") == (1, 2, 2, 16)
    # two row blocks: [32, 2], X[r][col] = 2*r + col -> rb=0 (rows 0..15) comes first
    y = (2 * np.arange(32)[:, None] + np.arange(2)[None, :]).astype(np.uint8)
    assert list(P.pack(y, "ZZ", "UINT8")) == (list(range(0, 32, 2)) + list(range(1, 32, 2))
                                              + list(range(32, 64, 2)) + list(range(33, 64, 2)))
    z = P.unpack(bytes(expected), "ND->ZZ", "FP8E8M0", (16, 4))  # the alias; E8M0 exponents
    assert z.dtype == np.dtype(ml_dtypes.float8_e8m0fnu) and z.view(np.uint8).tobytes() == x.tobytes()


def test_zz_dn_mov4_by_hand():
    # MOV-4: E_ZZ[cb, p, q, d] = E_DN[2*p + d][16*cb + q]; E[r][col] = 16*r + col on a [2, 16] tile
    e = (16 * np.arange(2)[:, None] + np.arange(16)[None, :]).astype(np.uint8)
    assert list(P.pack(e, "ZZ_DN", "UINT8")) == [0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23,
                                                 8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31]
    # [4, 32], E[r][col] = 32*r + col: boxes (cb, p) = (0, 0), (0, 1), (1, 0), (1, 1)
    f = (32 * np.arange(4)[:, None] + np.arange(32)[None, :]).astype(np.uint8)
    data = list(P.pack(f, "DN->ZZ", "uint8"))
    assert data[:6] == [0, 32, 1, 33, 2, 34]          # (0, 0): rows 0 and 1, columns 0..15
    assert data[32:38] == [64, 96, 65, 97, 66, 98]    # (0, 1): rows 2 and 3
    assert data[64:70] == [16, 48, 17, 49, 18, 50]    # (1, 0): columns 16..31
    assert data[96:] == [v for q in range(16, 32) for v in (64 + q, 96 + q)]
    assert P.blocked_shape((4, 32), "FP8E8M0", "ZZ_DN") == (2, 2, 16, 2)


def test_zn_mov2_one_fractal_is_the_transpose():
    # MOV-2: D_ZN[k1, n1, j, i] = S_ND[k1*K0 + i][n1*16 + j]; INT32 K0 = 8, one [8, 16] fractal
    s = np.arange(8 * 16, dtype=np.int32).reshape(8, 16)
    flat = np.frombuffer(P.pack(s, "ZN", "INT32"), np.int32)
    assert list(flat[:10]) == [0, 16, 32, 48, 64, 80, 96, 112, 1, 17]
    assert flat.tobytes() == s.T.tobytes()
    assert P.blocked_shape((32, 32), "INT8", "ZN") == (1, 2, 16, 32)  # [K/K0, N/16, 16, K0]


@pytest.mark.parametrize("layout,order_fn,shape,dims", [
    ("ZN", "nd_to_zn_order", (64, 48), "kn"),
    ("ZZ", "nd_to_zz_order", (32, 6), "rc"),
    ("ZZ_DN", "dn_to_zz_order", (4, 32), "mn"),
])
def test_tile_layouts_agree_with_the_move_index_maps(layout, order_fn, shape, dims):
    from ptoc.ops import move

    name = "UINT8"
    x = _random(shape, name, 3)
    fn = getattr(move, order_fn)
    order = fn(shape[0], shape[1], 32) if layout == "ZN" else fn(shape[0], shape[1])
    expected = bytes(int(x[r, c]) for r, c in order)
    assert P.pack(x, layout, name) == expected


# --------------------------------------------------------------------------------------------------
# dtypes and conversions
# --------------------------------------------------------------------------------------------------


def test_fp4_carriers_are_bytes():
    x = np.arange(2 * 256, dtype=np.uint8).reshape(2, 256)  # FP4-1: [2, 256] = 512 bytes = 1024 values
    for name in ("FP4E2M1X2", "fp4e1m2x2", "pl.FP4E2M1X2"):
        assert P.pack(x, "ND", name) == x.tobytes()
        assert P.unpack(x.tobytes(), "ND", name, (2, 256)).dtype == np.uint8


def test_exact_conversions_are_accepted():
    assert P.pack(np.arange(4, dtype=np.int64), "ND", "INT8") == bytes([0, 1, 2, 3])
    assert P.pack([[1.5, 2.0]], "ND", "BF16") == np.array([[1.5, 2.0]], dtype=ml_dtypes.bfloat16).tobytes()
    big = np.arange(4, dtype=">i4")
    assert P.pack(big, "ND", "INT32") == np.arange(4, dtype="<i4").tobytes()


@pytest.mark.parametrize("values,name", [
    (np.array([300], dtype=np.int64), "INT8"),
    (np.array([-1], dtype=np.int32), "UINT32"),
    (np.array([0.1], dtype=np.float64), "FP32"),
    (np.array([1.5], dtype=np.float32), "INT32"),
    (np.array([np.nan], dtype=np.float32), "INT16"),
    (np.array([256.0], dtype=np.float32), "FP4E2M1X2"),
    (np.array(["a"]), "INT8"),
    (np.zeros(2, dtype="V3"), "INT8"),
])
def test_lossy_conversions_are_rejected(values, name):
    with pytest.raises(ValueError, match="convert|records|not numbers"):
        P.pack(values, "ND", name)


# --------------------------------------------------------------------------------------------------
# rejections
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["INT4", "UINT4", "HF4", "BOOL"])
def test_sub_byte_dtypes_are_rejected_for_nz(name):
    with pytest.raises(ValueError, match="sub-byte.*NZ-10"):
        P.pack(np.zeros((16, 32), dtype=np.uint8), "NZ", name)
    with pytest.raises(ValueError, match="sub-byte"):
        P.blocked_shape((16, 32), name)
    with pytest.raises(ValueError, match="sub-byte"):
        P.unpack(bytes(512), "NZ", name, (16, 32))


@pytest.mark.parametrize("name,match", [
    ("HF8", "no numpy type.*UINT8"), ("INDEX", "scalar type"), ("FP64", "unknown dtype"),
    ("FP4", "removed.*FP4E2M1X2"), ("fp4", "removed"), ("", "unknown dtype"), (None, "dtype name"),
])
def test_unsupported_dtypes_are_rejected(name, match):
    with pytest.raises(ValueError, match=match):
        P.pack(np.zeros((16, 32), dtype=np.uint8), "ND", name)


@pytest.mark.parametrize("layout", ["XY", "nz2", "", None, "ZZ DN"])
def test_unknown_layouts_are_rejected(layout):
    with pytest.raises(ValueError, match="layout"):
        P.pack(np.zeros((16, 32), dtype=np.int8), layout, "INT8")


def test_layout_names_are_case_insensitive():
    x = _random((16, 32), "INT8", 5)
    assert P.pack(x, "nz", "int8") == P.pack(x, "ND->NZ", "INT8") == P.pack(x, "NZ", "Int8")


@pytest.mark.parametrize("shape,name,match", [
    ((24, 32), "INT8", r"shape\[-2\] = 24 is not a positive multiple of 16"),
    ((16, 48), "INT8", r"shape\[-1\] = 48 is not a positive multiple of c0 = 32"),
    ((16, 12), "FP32", r"c0 = 8"),
    ((16, 8), "FP16", r"c0 = 16"),
    ((0, 32), "INT8", "positive multiple of 16"),
    ((16, 0), "INT8", "positive multiple of c0"),
    ((512,), "INT8", "rank >= 2"),
    ((), "INT8", "rank >= 2"),
    ((2, 17, 32), "INT8", "NZ-10"),
])
def test_nz_rejects_shapes_that_are_not_whole_fractals(shape, name, match):
    with pytest.raises(ValueError, match=match):
        P.blocked_shape(shape, name)
    with pytest.raises(ValueError, match=match):
        P.pack(np.zeros(shape, dtype=_np(name)), "NZ", name)
    with pytest.raises(ValueError, match=match):
        P.unpack(b"", "NZ", name, shape)


@pytest.mark.parametrize("layout,shape,name,match", [
    ("ZN", (24, 16), "INT8", "K0 = 32"),
    ("ZN", (32, 8), "INT8", "multiple of 16"),
    ("ZN", (2, 32, 16), "INT8", "2-D arrays only"),
    ("ZN", (32, 16), "INT64", "does not take INT64"),
    ("ZN", (32, 16), "UINT16", "does not take UINT16"),
    ("ZZ", (8, 2), "UINT8", "multiple of 16"),
    ("ZZ", (16, 3), "UINT8", "not even"),
    ("ZZ", (16, 2), "FP16", "does not take FP16"),
    ("ZZ", (16,), "UINT8", "2-D arrays only"),
    ("ZZ_DN", (3, 16), "UINT8", "not even"),
    ("ZZ_DN", (2, 8), "FP8E8M0", "multiple of 16"),
    ("ZZ_DN", (2, 16), "INT8", "does not take INT8"),
    ("DN", (5,), "INT8", "rank >= 2"),
])
def test_tile_layouts_reject_undefined_shapes(layout, shape, name, match):
    with pytest.raises(ValueError, match=match):
        P.blocked_shape(shape, name, layout)
    with pytest.raises(ValueError, match=match):
        P.pack(np.zeros(shape, dtype=_np(name)), layout, name)


def test_unpack_rejects_a_size_mismatch():
    with pytest.raises(ValueError, match="size mismatch: .* takes 16384 bytes, the data has 16383"):
        P.unpack(bytes(16383), "NZ", "FP32", (64, 64))
    with pytest.raises(ValueError, match="bytes-like"):
        P.unpack("abc", "ND", "INT8", (3,))
    assert P.unpack(bytearray(4), "ND", "INT8", (4,)).tolist() == [0, 0, 0, 0]


@pytest.mark.parametrize("shape,match", [((16, -32), "non-negative"), ((16, 2.0), "integer"), (7, "sequence"),
                                         ((True, 32), "integer"), ("16;32", "malformed shape")])
def test_bad_shapes_are_rejected(shape, match):
    with pytest.raises(ValueError, match=match):
        P.unpack(b"", "ND", "INT8", shape)


def test_parse_shape_forms():
    assert P.parse_shape("256,512") == (256, 512)
    assert P.parse_shape("[2, 3, 4]") == (2, 3, 4)
    assert P.parse_shape("16x32") == (16, 32)
    for bad in ("", "a,b", "1,-2", "[]"):
        with pytest.raises(ValueError, match="malformed shape"):
            P.parse_shape(bad)


@pytest.mark.parametrize("index,match", [((256, 0), "out of range"), ((0, -1), "out of range"),
                                         ((0,), "one integer per axis"), ((0, 0, 0), "one integer per axis"),
                                         (5, "one integer per axis"), ((0.0, 1), "one integer per axis")])
def test_nz_offset_rejects_bad_indices(index, match):
    with pytest.raises(ValueError, match=match):
        P.nz_offset(index, (256, 512), "INT8")


def test_nz_offset_rejects_shapes_nz_cannot_hold():
    with pytest.raises(ValueError, match="NZ-10"):
        P.nz_offset((0, 0), (16, 16), "INT8")


# --------------------------------------------------------------------------------------------------
# files (the work behind `ptoc pack` / `ptoc unpack`)
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("layout,name,shape", [("NZ", "INT8", (2, 32, 64)), ("NZ", "BF16", (2, 2, 16, 32)),
                                               ("DN", "FP32", (3, 5)), ("ZZ", "FP8E8M0", (32, 4)),
                                               ("ZN", "FP8E4M3FN", (32, 16)), ("ND", "UINT64", (4, 3))])
def test_pack_file_and_unpack_file_round_trip(tmp_path, layout, name, shape):
    x = _random(shape, name, 11)
    src = tmp_path / "in.npy"
    P.save_npy(src, x)
    res = P.pack_file(src, tmp_path / "out.bin", layout, name.lower())
    assert res.nbytes == x.nbytes and res.physical_shape == P.blocked_shape(shape, name, layout)
    assert res.logical_shape == shape and res.layout == layout and res.dtype == name
    P.pack_file(str(src), str(tmp_path / "out.npy"), layout, name)
    raw = (tmp_path / "out.bin").read_bytes()
    assert raw == P.pack(x, layout, name)
    flat = P.load_npy(tmp_path / "out.npy")
    assert flat.ndim == 1 and flat.size == x.size and flat.tobytes() == raw  # byte-exact, packed order
    for packed in ("out.bin", "out.npy"):
        P.unpack_file(tmp_path / packed, tmp_path / "back.npy", layout, name, ",".join(map(str, shape)))
        back = P.load_npy(tmp_path / "back.npy")
        assert back.shape == shape and back.tobytes() == x.tobytes()
    P.unpack_file(tmp_path / "out.bin", tmp_path / "back2.npy", layout, name, list(shape))
    assert P.load_npy(tmp_path / "back2.npy").tobytes() == x.tobytes()


def test_save_npy_keeps_the_name_and_save_bin_writes_raw_bytes(tmp_path):
    P.save_npy(tmp_path / "a.data", np.arange(3, dtype=np.int16))
    assert (tmp_path / "a.data").exists() and not (tmp_path / "a.data.npy").exists()
    P.save_bin(tmp_path / "b.bin", b"\x01\x02")
    assert (tmp_path / "b.bin").read_bytes() == b"\x01\x02"
    assert not [p for p in os.listdir(tmp_path) if p.endswith(".tmp")]


def test_file_errors_are_user_facing(tmp_path):
    good = tmp_path / "x.npy"
    P.save_npy(good, np.zeros((16, 32), dtype=np.int8))
    with pytest.raises(ValueError, match="no such file"):
        P.pack_file(tmp_path / "missing.npy", tmp_path / "o.bin", "NZ", "int8")
    with pytest.raises(ValueError, match="no such file"):
        P.load_npy(tmp_path / "missing.npy")
    junk = tmp_path / "junk.npy"
    junk.write_bytes(b"not an npy file")
    with pytest.raises(ValueError, match="cannot read .*junk.npy"):
        P.pack_file(junk, tmp_path / "o.bin", "NZ", "int8")
    with pytest.raises(ValueError, match="directory"):
        P.load_npy(tmp_path)
    npz = tmp_path / "z.npy"
    with open(npz, "wb") as f:
        np.savez(f, a=np.zeros(2))
    with pytest.raises(ValueError, match="npz"):
        P.load_npy(npz)
    pickled = tmp_path / "p.npy"
    with open(pickled, "wb") as f:
        np.save(f, np.array([{}], dtype=object), allow_pickle=True)
    with pytest.raises(ValueError, match="cannot read"):
        P.load_npy(pickled)
    with pytest.raises(ValueError, match=r"output .*o.txt must end in \.bin .* or \.npy"):
        P.pack_file(good, tmp_path / "o.txt", "NZ", "int8")
    with pytest.raises(ValueError, match=r"input .* must end in \.npy"):
        P.pack_file(tmp_path / "x.bin", tmp_path / "o.bin", "NZ", "int8")
    with pytest.raises(ValueError, match=r"must end in \.npy"):
        P.unpack_file(good, tmp_path / "o.bin", "ND", "int8", "16,32")
    with pytest.raises(ValueError, match=r"must end in \.bin .* or \.npy"):
        P.unpack_file(tmp_path / "x.dat", tmp_path / "o.npy", "ND", "int8", "16,32")
    with pytest.raises(ValueError, match="cannot write"):
        P.pack_file(good, tmp_path / "no" / "such" / "dir.bin", "NZ", "int8")
    with pytest.raises(ValueError, match="unknown layout"):
        P.pack_file(good, tmp_path / "o.bin", "QQ", "int8")
    with pytest.raises(ValueError, match="unknown dtype"):
        P.unpack_file(good, tmp_path / "o.npy", "NZ", "int9", "16,32")
    with pytest.raises(ValueError, match="NZ-10"):
        P.unpack_file(good, tmp_path / "o.npy", "NZ", "int8", "16,16")


def test_unpack_file_checks_sizes_and_element_types(tmp_path):
    packed = tmp_path / "p.bin"
    packed.write_bytes(bytes(511))
    with pytest.raises(ValueError, match="size mismatch"):
        P.unpack_file(packed, tmp_path / "o.npy", "NZ", "INT8", "16,32")
    wrong = tmp_path / "w.npy"
    P.save_npy(wrong, np.zeros(128, dtype=np.float32))
    with pytest.raises(ValueError, match="holds float32 elements but dtype INT8 needs int8"):
        P.unpack_file(wrong, tmp_path / "o.npy", "NZ", "INT8", "16,32")
    assert not (tmp_path / "o.npy").exists()  # a failed unpack writes nothing


def test_failed_write_keeps_an_existing_output(tmp_path):
    out = tmp_path / "o.bin"
    out.write_bytes(b"keep")
    bad = tmp_path / "bad.npy"
    P.save_npy(bad, np.zeros((24, 32), dtype=np.int8))
    with pytest.raises(ValueError, match="NZ-10"):
        P.pack_file(bad, out, "NZ", "INT8")
    assert out.read_bytes() == b"keep"


def test_bf16_survives_npy_files_as_raw_records(tmp_path):
    x = _random((16, 16), "BF16", 2)
    buf = io.BytesIO()
    np.save(buf, x)  # numpy stores ml_dtypes as |V2
    path = tmp_path / "bf.npy"
    path.write_bytes(buf.getvalue())
    assert P.pack(P.load_npy(path), "NZ", "BF16") == P.pack(x, "NZ", "BF16")
    with pytest.raises(ValueError, match="raw 2-byte records"):
        P.pack(P.load_npy(path), "NZ", "FP32")


def test_packed_strides_follow_the_spec_formulas():
    # NZ-3: a blocked [B, C/c0, R/16, 16, c0] tensor has strides [C*R, R*c0, 16*c0, c0, 1];
    # [256, 512] INT8: C*R = 131072, R*c0 = 8192, 16*c0 = 512, c0 = 32
    from ptoc.reference.packers import packed_strides

    assert packed_strides((1, 16, 16, 16, 32), "NZ") == (131072, 8192, 512, 32, 1)
    assert packed_strides((4, 8), "ND") == (8, 1)
    # DN [2, 16, 64]: column-major planes of 16 rows, 1024 elements a plane
    assert packed_strides((2, 16, 64), "DN") == (1024, 1, 16)


def test_the_reference_c0_does_not_follow_the_compiler_c0(monkeypatch):
    from ptoc.reference.packers import blocked_shape
    from ptoc.target import arch

    monkeypatch.setattr(arch, "C0_BYTES", 16)  # a wrong compiler fact
    assert arch.c0_of(D.INT8) == 16
    assert blocked_shape((256, 512), "int8") == (1, 16, 16, 16, 32)  # NZ-1: 32 bytes / 1 byte
