"""The numeric reference interpreter (ptoc.reference.interp).

1. Every example kernel, run at the frontend stage, matches an independent numpy computation.
2. The same kernel lowered through every prefix of the pipeline gives identical outputs (bit for bit: the
   reference computes the same ops in the same order at every stage) -- the core of per-pass validation.
3. Unit tests of op semantics: integer wrap-around, floor division, casts and rounding modes, all 16 FP4
   codes of both formats, valid regions (loads fill and stores write only the valid region), NZ addressing
   (NZ-2..NZ-4, NZ-7), and PTOC-E0500 for an op the reference does not execute.
"""

from __future__ import annotations

import textwrap

import ml_dtypes
import numpy as np
import pytest

from ptoc.context import CompileContext
from ptoc.diagnostics import CODES
from ptoc.driver import frontend, lower
from ptoc.frontend.parser import parse_program
from ptoc.ir import dtypes
from ptoc.passes.manager import PIPELINE
from ptoc.reference import nz_pack
from ptoc.reference.interp import (
    FP4_E1M2_VALUES,
    FP4_E2M1_VALUES,
    ReferenceFault,
    Unsupported,
    cast_array,
    compare_outputs,
    decode_fp4,
    encode_fp4,
    quant_mx_array,
    run_function,
)

CTX = CompileContext(arch="a2a3")
A5 = CompileContext(arch="a5")
BF16 = np.dtype(ml_dtypes.bfloat16)
PASSES = [name for _, name in PIPELINE]


def example(name: str):
    with open(f"examples/{name}.ir", encoding="utf-8") as f:
        return frontend(f.read(), f"{name}.ir", CTX)


def kernel(body: str, ctx: CompileContext = CTX, dyn: str = ""):
    text = "import pypto.language as pl\n" + dyn + "@pl.program\nclass p:\n" + textwrap.indent(
        textwrap.dedent(body).strip("\n"), "    ") + "\n"
    return parse_program(text, "t.ir", ctx=ctx)


def rng(seed: int = 0):
    return np.random.default_rng(seed)


# --------------------------------------------------------------------------------------------------
# 1 + 2. Examples: frontend against numpy, then every pass against the frontend
# --------------------------------------------------------------------------------------------------


def _vector_add():
    r = rng(1)
    a, b = (r.standard_normal((64, 64)).astype(np.float32) for _ in range(2))
    return "vector_add", "add_kernel", dict(a=a, b=b), {"out": a + b}


def _softmax():
    x = rng(2).standard_normal((64, 128)).astype(np.float32)
    m = x.max(axis=1, keepdims=True)
    e = np.exp(x - m)
    return "softmax_rows", "softmax_kernel", dict(x=x), {"y": e / e.sum(axis=1, keepdims=True), "row_max_out": m}


def _matmul_bf16():
    r = rng(3)
    a = r.standard_normal((64, 256)).astype(BF16)
    b = r.standard_normal((256, 128)).astype(BF16)
    return "matmul_bf16", "mm_kernel", dict(a=a, b=b), {"c": a.astype(np.float32) @ b.astype(np.float32)}


def _nz_weight_int8():
    r = rng(4)
    x = r.integers(-128, 128, (64, 256)).astype(np.int8)
    w = r.integers(-128, 128, (256, 512)).astype(np.int8)
    return "nz_weight_int8", "mm_nz", dict(x=x, w=w), {"out": x.astype(np.int32) @ w.astype(np.int32)}


def _grouped_matmul_nz():
    r = rng(5)
    x = r.integers(-128, 128, (64, 1024)).astype(np.int8)
    w = r.integers(-128, 128, (1024, 2048)).astype(np.int8)
    return "grouped_matmul_nz", "gmm", dict(x=x, w=w), {"out": x.astype(np.int32) @ w.astype(np.int32)}


def _acc_store_nz():
    r = rng(6)
    q = r.standard_normal((64, 128)).astype(BF16)
    k = r.standard_normal((128, 16)).astype(BF16)
    return "acc_store_nz", "scores", dict(q=q, k=k), {"s": q.astype(np.float32) @ k.astype(np.float32)}


def _dynamic_rows(m: int):
    def make():
        x = rng(7 + m).standard_normal((m, 64)).astype(np.float16)
        alpha = np.float16(1.375)
        return "dynamic_rows", "scale_rows", dict(x=x, alpha=alpha), {"y": alpha * x}

    make.__name__ = f"_dynamic_rows_{m}"
    return make


EXAMPLES = [_vector_add, _softmax, _matmul_bf16, _nz_weight_int8, _grouped_matmul_nz, _acc_store_nz,
            _dynamic_rows(96), _dynamic_rows(50)]
EXAMPLE_IDS = [f.__name__.lstrip("_") for f in EXAMPLES]


@pytest.mark.parametrize("make", EXAMPLES, ids=EXAMPLE_IDS)
def test_example_at_frontend_matches_numpy(make):
    name, fn, inputs, want = make()
    out = run_function(example(name), fn, inputs, CTX)
    for key, expected in want.items():
        got = out[key]
        assert got.shape == expected.shape and got.dtype == expected.dtype, key
        if np.issubdtype(expected.dtype, np.integer):
            assert np.array_equal(got, expected), key  # INT8 x INT8 -> INT32 is exact
        else:
            np.testing.assert_allclose(got.astype(np.float64), expected.astype(np.float64), rtol=1e-5,
                                       atol=1e-5, err_msg=key)
    assert "return[0]" in out  # the returned tensor is the written output


@pytest.mark.parametrize("make", EXAMPLES, ids=EXAMPLE_IDS)
def test_example_gives_identical_outputs_after_every_pass(make):
    name, fn, inputs, _ = make()
    program = example(name)
    ref = run_function(program, fn, inputs, CTX)
    for pass_name in PASSES:
        lowered = lower(program, CTX, stop_after=pass_name).program
        out = run_function(lowered, fn, inputs, CTX)
        assert compare_outputs(ref, out, exact=True) == [], f"after {pass_name}"


def test_acc_store_nz_writes_the_fractal_bytes_of_the_logical_result():
    # NZ-7: after BlockNzTensorViews the Acc store writes the partition [1, 2, 4, 16, 8]; the bytes in GM
    # are the NZ image (nz_pack, an independent packer) of the logical FP32 product -- at every stage.
    _, fn, inputs, want = _acc_store_nz()
    image = np.frombuffer(nz_pack.pack_bytes(want["s"].astype(np.float32)), dtype=np.float32)
    for stage in (None, "BlockNzTensorViews", "AllocateMemoryAddr"):
        program = example("acc_store_nz") if stage is None else lower(example("acc_store_nz"), CTX,
                                                                     stop_after=stage).program
        raw = run_function(program, fn, inputs, CTX, layout_bytes=True)["s"]
        assert raw.dtype == np.uint8 and raw.size == 64 * 16 * 4
        np.testing.assert_allclose(raw.view(np.float32), image, rtol=1e-5, atol=1e-5, err_msg=str(stage))


def test_nz_input_given_as_its_byte_image_equals_the_logical_input():
    _, fn, inputs, want = _nz_weight_int8()
    program = lower(example("nz_weight_int8"), CTX).program
    out = run_function(program, fn, dict(inputs, w=nz_pack.pack_bytes(inputs["w"])), CTX)
    assert np.array_equal(out["out"], want["out"])


def test_nz_weight_input_is_packed_in_blocked_order_at_every_stage():
    # The same logical weight gives the same product before (logical NZ offsets) and after
    # BlockNzTensorViews (rank-5 blocked offsets, NZ-4) and MaterializeTensorStrides (explicit strides).
    _, fn, inputs, want = _nz_weight_int8()
    for stage in ("FlattenTileNdTo2D", "BlockNzTensorViews", "MaterializeTensorStrides"):
        out = run_function(lower(example("nz_weight_int8"), CTX, stop_after=stage).program, fn, inputs, CTX)
        assert np.array_equal(out["out"], want["out"]), stage


# --------------------------------------------------------------------------------------------------
# Tensor-level kernels (before ConvertTensorToTileOps) and control flow
# --------------------------------------------------------------------------------------------------

T = "pl.Tensor[[64, 128], pl.FP32]"


def test_tensor_ops_kernel_matches_numpy_and_its_tile_lowering():
    prog = kernel(f"""
        @pl.function(type=pl.FunctionType.InCore)
        def k(self, a: {T}, b: {T}, out: pl.Out[{T}]) -> {T}:
            c: {T} = pl.tensor.add(a, b)
            d: {T} = pl.tensor.maximum(c, 0.0)
            e: {T} = pl.tensor.muls(d, 2.0)
            return e
    """)
    r = rng(8)
    a, b = (r.standard_normal((64, 128)).astype(np.float32) for _ in range(2))
    ref = run_function(prog, "k", dict(a=a, b=b), CTX)
    np.testing.assert_array_equal(ref["return[0]"], np.maximum(a + b, 0) * 2)
    assert "out" in ref  # an Out parameter is reported even when the tensor-level kernel leaves it alone
    assert ref.unwritten == {"out"}  # the tensor-level kernel returns a fresh tensor
    low = run_function(lower(prog, CTX).program, "k", dict(a=a, b=b), CTX)
    np.testing.assert_array_equal(low["out"], ref["return[0]"])  # ConvertTensorToTileOps stores into out
    assert compare_outputs(ref, low, exact=True) == []
    # a stage that stops writing an output the previous stage wrote is caught
    diff = compare_outputs(low, ref, exact=True)
    assert len(diff) == 1 and diff[0].startswith(f"out: {64 * 128} element(s) differ")


def test_dn_and_strided_parameters_are_packed_in_their_layout():
    prog = kernel("""
        @pl.function(type=pl.FunctionType.AIV)
        def k(self, kt: pl.Tensor[[64, 128], pl.FP16, pl.DN], src: pl.Tensor[[32, 128], pl.FP32, pl.TensorView(stride=[256, 1], layout=pl.TensorLayout.ND)], o1: pl.Out[pl.Tensor[[64, 128], pl.FP16]], o2: pl.Out[pl.Tensor[[32, 64], pl.FP32]]) -> tuple[pl.Tensor[[64, 128], pl.FP16], pl.Tensor[[32, 64], pl.FP32]]:
            t: pl.Tile[[64, 128], pl.FP16, pl.Mem.Vec] = pl.tile.load(kt, [0, 0], [64, 128], target_memory=pl.Mem.Vec)
            a: pl.Tensor[[64, 128], pl.FP16] = pl.tile.store(t, [0, 0], o1)
            u: pl.Tile[[32, 64], pl.FP32, pl.Mem.Vec] = pl.tile.load(src, [0, 64], [32, 64], target_memory=pl.Mem.Vec)
            b: pl.Tensor[[32, 64], pl.FP32] = pl.tile.store(u, [0, 0], o2)
            return a, b
    """)
    r = rng(16)
    kt = r.standard_normal((64, 128)).astype(np.float16)
    src = r.standard_normal((32, 128)).astype(np.float32)
    for stage in (None, "MaterializeTensorStrides", "AllocateMemoryAddr"):
        p = prog if stage is None else lower(prog, CTX, stop_after=stage).program
        out = run_function(p, "k", dict(kt=kt, src=src), CTX)
        assert np.array_equal(out["o1"], kt) and np.array_equal(out["o2"], src[:, 64:]), stage
    raw = run_function(prog, "k", dict(kt=kt, src=src), CTX, layout_bytes=True)
    assert "kt" not in raw  # an In parameter the kernel does not write is not an output
    dn = kt.T.copy()  # DN: column-major in the last two axes
    assert bytes(run_function(prog, "k", dict(kt=dn.T, src=src), CTX, layout_bytes=True)["o1"]) == kt.tobytes()
    assert bytes(run_function(prog, "k", dict(kt=dn.tobytes(), src=src), CTX, layout_bytes=True)["o1"]) == \
        kt.tobytes()


def test_while_if_and_scalar_loops():
    prog = kernel("""
        @pl.function(type=pl.FunctionType.AIV)
        def k(self, src: pl.Tensor[[256, 32], pl.FP32], total: pl.Scalar[pl.INDEX],
              dst: pl.Out[pl.Tensor[[256, 32], pl.FP32]]) -> pl.Tensor[[256, 32], pl.FP32]:
            for (chunk,) in pl.while_(init_values=(16,)):
                pl.cond(chunk * 4 < total)
                chunk_next: pl.Scalar[pl.INDEX] = pl.yield_(chunk * 2)
            step: pl.Scalar[pl.INDEX] = pl.min(chunk_next, 64)
            for (pos, dst_w) in pl.while_(init_values=(0, dst)):
                pl.cond(pos < total)
                rows: pl.Scalar[pl.INDEX] = pl.min(total - pos, step)
                t: pl.Tile[[64, 32], pl.FP32, pl.Mem.Vec, pl.TileView(valid_shape=[rows, 32])] = pl.tile.load(src, [pos, 0], [64, 32], [rows, 32], target_memory=pl.Mem.Vec)
                if pos % 2 == 0:
                    u: pl.Tile[[64, 32], pl.FP32, pl.Mem.Vec, pl.TileView(valid_shape=[rows, 32])] = pl.tile.adds(t, 1.0)
                    v: pl.Tile[[64, 32], pl.FP32, pl.Mem.Vec, pl.TileView(valid_shape=[rows, 32])] = pl.yield_(u)
                else:
                    v: pl.Tile[[64, 32], pl.FP32, pl.Mem.Vec, pl.TileView(valid_shape=[rows, 32])] = pl.yield_(t)
                dst_store: pl.Tensor[[256, 32], pl.FP32] = pl.tile.store(v, [pos, 0], dst_w)
                pos_next, dst_next = pl.yield_(pos + step, dst_store)
            return dst_next
    """)
    src = np.arange(256 * 32, dtype=np.float32).reshape(256, 32)
    init = np.full((256, 32), -7.0, dtype=np.float32)
    out = run_function(prog, "k", dict(src=src, total=200, dst=init), CTX)
    # chunk grows 16 -> 32 -> 64 (64 * 4 >= 200); step 64; every chunk starts at an even row: +1
    want = init.copy()
    want[:200] = src[:200] + 1
    np.testing.assert_array_equal(out["dst"], want)  # rows 200.. keep the initial contents


# --------------------------------------------------------------------------------------------------
# 3. Op semantics
# --------------------------------------------------------------------------------------------------


def test_scalar_integer_wraparound_floor_division_and_modulo():
    prog = kernel("""
        @pl.function(type=pl.FunctionType.AIV)
        def k(self, a: pl.Scalar[pl.INT8], b: pl.Scalar[pl.INDEX], c: pl.Scalar[pl.UINT16]) -> tuple[pl.Scalar[pl.INT8], pl.Scalar[pl.INDEX], pl.Scalar[pl.INDEX], pl.Scalar[pl.INDEX], pl.Scalar[pl.UINT16], pl.Scalar[pl.INDEX]]:
            s: pl.Scalar[pl.INT8] = a + pl.const(100, pl.INT8)
            q: pl.Scalar[pl.INDEX] = b // 4
            r: pl.Scalar[pl.INDEX] = b % 4
            big: pl.Scalar[pl.INDEX] = pl.const(9223372036854775807, pl.INDEX) + 1
            u: pl.Scalar[pl.UINT16] = c - pl.const(1, pl.UINT16)
            sh: pl.Scalar[pl.INDEX] = b >> 1
            return s, q, r, big, u, sh
    """)
    out = run_function(prog, "k", dict(a=100, b=-7, c=0), CTX)
    assert int(out["return[0]"]) == -56  # 200 wraps in INT8
    assert int(out["return[1]"]) == -2 and int(out["return[2]"]) == 1  # floor semantics
    assert int(out["return[3]"]) == -(2 ** 63)  # INDEX is 64-bit signed
    assert int(out["return[4]"]) == 65535 and out["return[4]"].dtype == np.uint16
    assert int(out["return[5]"]) == -4  # arithmetic shift


def test_tile_integer_arithmetic_wraps_and_divides_by_flooring():
    prog = kernel("""
        @pl.function(type=pl.FunctionType.AIV)
        def k(self, x: pl.Tensor[[16, 32], pl.INT8], y: pl.Tensor[[16, 32], pl.INT8],
              s: pl.Out[pl.Tensor[[16, 32], pl.INT8]], d: pl.Out[pl.Tensor[[16, 32], pl.INT8]]) -> tuple[pl.Tensor[[16, 32], pl.INT8], pl.Tensor[[16, 32], pl.INT8]]:
            a: pl.Tile[[16, 32], pl.INT8, pl.Mem.Vec] = pl.tile.load(x, [0, 0], [16, 32], target_memory=pl.Mem.Vec)
            b: pl.Tile[[16, 32], pl.INT8, pl.Mem.Vec] = pl.tile.load(y, [0, 0], [16, 32], target_memory=pl.Mem.Vec)
            t: pl.Tile[[16, 32], pl.INT8, pl.Mem.Vec] = pl.tile.add(a, b)
            q: pl.Tile[[16, 32], pl.INT8, pl.Mem.Vec] = pl.tile.div(a, b)
            s1: pl.Tensor[[16, 32], pl.INT8] = pl.tile.store(t, [0, 0], s)
            d1: pl.Tensor[[16, 32], pl.INT8] = pl.tile.store(q, [0, 0], d)
            return s1, d1
    """)
    r = rng(9)
    x = r.integers(-128, 128, (16, 32)).astype(np.int8)
    y = r.integers(1, 128, (16, 32)).astype(np.int8) * np.where(r.random((16, 32)) < 0.5, -1, 1).astype(np.int8)
    out = run_function(prog, "k", dict(x=x, y=y), CTX)
    np.testing.assert_array_equal(out["s"], ((x.astype(np.int64) + y + 128) % 256 - 128).astype(np.int8))
    np.testing.assert_array_equal(out["d"], (x.astype(np.int64) // y.astype(np.int64)).astype(np.int8))


@pytest.mark.parametrize("mode,want", [
    ("rint", [2, 2, -2, -2, 0, 1]),
    ("none", [2, 2, -2, -2, 0, 1]),
    ("round", [3, 2, -3, -2, 1, 1]),
    ("floor", [2, 2, -3, -3, 0, 1]),
    ("ceil", [3, 3, -2, -2, 1, 1]),
    ("trunc", [2, 2, -2, -2, 0, 1]),
])
def test_float_to_int_rounding_modes(mode, want):
    x = np.array([2.5, 2.25, -2.5, -2.25, 0.5, 1.0], dtype=np.float32)
    assert cast_array(x, dtypes.FP32, dtypes.INT32, mode).tolist() == want


def test_float_to_int_saturates_and_maps_nan_to_zero():
    x = np.array([1e10, -1e10, np.nan, 127.6], dtype=np.float32)
    assert cast_array(x, dtypes.FP32, dtypes.INT8, "rint").tolist() == [127, -128, 0, 127]


def test_int_to_int_wraps():
    x = np.array([300, -129, 65535], dtype=np.int32)
    assert cast_array(x, dtypes.INT32, dtypes.INT8).tolist() == [44, 127, -1]


def test_fp32_to_fp16_directed_rounding_brackets_the_value():
    x = rng(10).standard_normal(1000).astype(np.float32) * 100
    lo = cast_array(x, dtypes.FP32, dtypes.FP16, "floor").astype(np.float64)
    hi = cast_array(x, dtypes.FP32, dtypes.FP16, "ceil").astype(np.float64)
    near = cast_array(x, dtypes.FP32, dtypes.FP16, "rint")
    assert (lo <= x).all() and (hi >= x).all()
    assert np.array_equal(near, x.astype(np.float16))  # nearest-even matches numpy
    step = np.spacing(np.abs(x).astype(np.float16)).astype(np.float64)
    assert (hi - lo <= step * 2).all()
    tr = cast_array(x, dtypes.FP32, dtypes.FP16, "trunc").astype(np.float64)
    assert (np.abs(tr) <= np.abs(x)).all()


def test_bf16_cast_is_nearest_even_and_exact_back():
    x = np.array([1.0, 1.00390625, 1.01171875, -3.3e38, 1e-40], dtype=np.float32)
    b = cast_array(x, dtypes.FP32, dtypes.BF16, "rint")
    assert b.dtype == BF16
    np.testing.assert_array_equal(b, x.astype(BF16))
    np.testing.assert_array_equal(cast_array(b, dtypes.BF16, dtypes.FP32), b.astype(np.float32))


def test_fp8_cast_round_trip():
    x = np.array([0.5, 448.0, -3.0, 0.0], dtype=np.float32)
    f8 = cast_array(x, dtypes.FP32, dtypes.BY_NAME["FP8E4M3FN"], "rint")
    np.testing.assert_array_equal(f8.astype(np.float32), x)


@pytest.mark.parametrize("dt,table", [(dtypes.FP4E2M1X2, FP4_E2M1_VALUES), (dtypes.FP4E1M2X2, FP4_E1M2_VALUES)])
def test_fp4_decode_of_all_16_codes(dt, table):
    # FP4-1: a byte carries two values; the low nibble is element 2k, the high nibble element 2k+1.
    codes = np.arange(16, dtype=np.uint8)
    carriers = (codes | (codes[::-1] << 4)).reshape(1, 16)
    vals = decode_fp4(carriers, dt)
    want = [(-1.0 if c >= 8 else 1.0) * table[c & 7] for c in range(16)]
    assert vals.shape == (1, 32)
    assert vals[0, 0::2].tolist() == want
    assert vals[0, 1::2].tolist() == want[::-1]
    assert np.signbit(vals[0, 16])  # code 8 is -0


def test_fp4_e2m1_is_the_ocp_table():
    assert FP4_E2M1_VALUES == (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)
    assert FP4_E1M2_VALUES == (0.0, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 1.75)
    e2m1 = np.arange(16, dtype=np.uint8)
    ml = e2m1.view(ml_dtypes.float4_e2m1fn) if hasattr(ml_dtypes, "float4_e2m1fn") else None
    if ml is not None:  # ml_dtypes agrees on the E2M1 code -> value map
        vals = decode_fp4((e2m1 | (e2m1 << 4)).reshape(1, 16), dtypes.FP4E2M1X2)[0, 0::2]
        np.testing.assert_array_equal(vals, ml.astype(np.float64))


@pytest.mark.parametrize("dt", [dtypes.FP4E2M1X2, dtypes.FP4E1M2X2])
def test_fp4_encode_round_trips_every_value_and_rounds_ties_to_even(dt):
    carriers = np.arange(256, dtype=np.uint8).reshape(16, 16)
    vals = decode_fp4(carriers, dt)
    back = encode_fp4(vals, dt)
    # -0 and +0 both decode to zero; everything else round-trips exactly
    assert np.array_equal(decode_fp4(back, dt), vals)
    if dt == dtypes.FP4E2M1X2:
        x = np.array([[2.5, 5.0, 7.0, 100.0, -0.25, 0.75]])
        assert decode_fp4(encode_fp4(x, dt), dt).tolist() == [[2.0, 4.0, 6.0, 6.0, -0.0, 1.0]]
        assert decode_fp4(encode_fp4(x, dt, "ceil"), dt).tolist() == [[3.0, 6.0, 6.0, 6.0, -0.0, 1.0]]


def test_fp4_cast_through_bf16_in_a_kernel():
    # FP4-2/FP4-4: packed -> BF16 expands the packed axis 2:1, BF16 -> packed contracts it.
    prog = kernel("""
        @pl.function(type=pl.FunctionType.AIV)
        def k(self, src: pl.Tensor[[32, 64], pl.FP4E1M2X2], wide: pl.Out[pl.Tensor[[32, 128], pl.BF16]], dst: pl.Out[pl.Tensor[[32, 64], pl.FP4E2M1X2]]) -> tuple[pl.Tensor[[32, 128], pl.BF16], pl.Tensor[[32, 64], pl.FP4E2M1X2]]:
            t: pl.Tile[[32, 64], pl.FP4E1M2X2, pl.Mem.Vec] = pl.tile.load(src, [0, 0], [32, 64], target_memory=pl.Mem.Vec)
            w: pl.Tile[[32, 128], pl.BF16, pl.Mem.Vec] = pl.tile.cast(t, target_type=pl.BF16, mode='none')
            p: pl.Tile[[32, 64], pl.FP4E2M1X2, pl.Mem.Vec] = pl.tile.cast(w, target_type=pl.FP4E2M1X2, mode='rint')
            w1: pl.Tensor[[32, 128], pl.BF16] = pl.tile.store(w, [0, 0], wide)
            d1: pl.Tensor[[32, 64], pl.FP4E2M1X2] = pl.tile.store(p, [0, 0], dst)
            return w1, d1
    """, ctx=A5)
    src = rng(11).integers(0, 256, (32, 64)).astype(np.uint8)
    out = run_function(prog, "k", dict(src=src), A5)
    vals = decode_fp4(src, dtypes.FP4E1M2X2)
    np.testing.assert_array_equal(out["wide"].astype(np.float64), vals)
    np.testing.assert_array_equal(decode_fp4(out["dst"], dtypes.FP4E2M1X2),
                                  decode_fp4(encode_fp4(vals, dtypes.FP4E2M1X2), dtypes.FP4E2M1X2))


def test_quant_mx_group_32_scales_and_dequantizes_within_half_a_step():
    x = rng(12).standard_normal((16, 64)) * 10
    data, codes = quant_mx_array(x, dtypes.BY_NAME["FP8E4M3FN"], axis=1)
    assert data.shape == (16, 64) and codes.shape == (16, 2)
    scale = np.exp2(codes.astype(np.float64) - 127)
    deq = data.astype(np.float64) * np.repeat(scale, 32, axis=1)
    assert np.allclose(deq, x, rtol=2 ** -3, atol=0)  # E4M3: 3 mantissa bits
    amax = np.abs(x.reshape(16, 2, 32)).max(axis=-1)
    assert np.array_equal(codes.astype(np.int64) - 127, np.floor(np.log2(amax)).astype(np.int64) - 8)
    d4, c4 = quant_mx_array(x, dtypes.FP4E2M1X2, axis=0)
    assert d4.shape == (64, 8) and c4.shape == (2, 16)  # axis 0: [N, K] -> data [K, N/2], scale [K/32, N]


def test_load_fills_only_the_valid_region_and_store_writes_only_it():
    prog = kernel("""
        @pl.function(type=pl.FunctionType.AIV)
        def k(self, x: pl.Tensor[[40, 64], pl.FP32], rows: pl.Scalar[pl.INDEX], y: pl.Out[pl.Tensor[[40, 64], pl.FP32]], raw: pl.Out[pl.Tensor[[32, 64], pl.FP32]]) -> pl.Tensor[[40, 64], pl.FP32]:
            t: pl.Tile[[32, 64], pl.FP32, pl.Mem.Vec, pl.TileView(valid_shape=[rows, 64])] = pl.tile.load(x, [8, 0], [32, 64], [rows, 64], target_memory=pl.Mem.Vec)
            u: pl.Tile[[32, 64], pl.FP32, pl.Mem.Vec, pl.TileView(valid_shape=[rows, 64])] = pl.tile.muls(t, 2.0)
            y1: pl.Tensor[[40, 64], pl.FP32] = pl.tile.store(u, [8, 0], y)
            full: pl.Tile[[32, 64], pl.FP32, pl.Mem.Vec] = pl.tile.set_validshape(u, 32, 64)
            r1: pl.Tensor[[32, 64], pl.FP32] = pl.tile.store(full, [0, 0], raw)
            return y1
    """)
    x = rng(13).standard_normal((40, 64)).astype(np.float32)
    y0 = np.zeros((40, 64), np.float32)
    out = run_function(prog, "k", dict(x=x, rows=10, y=y0), CTX)
    want = y0.copy()
    want[8:18] = 2 * x[8:18]
    np.testing.assert_array_equal(out["y"], want)
    # growing the valid region exposes the undefined rows: NaN, never data
    assert np.array_equal(out["raw"][:10], 2 * x[8:18])
    assert np.isnan(out["raw"][10:]).all()


def test_undefined_elements_compare_equal_to_each_other_but_not_to_data():
    a = {"y": np.array([1.0, np.nan], np.float32)}
    assert compare_outputs(a, {"y": np.array([1.0, np.nan], np.float32)}, exact=True) == []
    assert compare_outputs(a, {"y": np.array([1.0, 0.0], np.float32)})
    assert compare_outputs(a, {}) == ["y: missing from the second run"]


def test_gather_mask_and_row_reductions():
    prog = kernel("""
        @pl.function(type=pl.FunctionType.AIV)
        def k(self, x: pl.Tensor[[16, 64], pl.FP32], g: pl.Out[pl.Tensor[[16, 32], pl.FP32]], s: pl.Out[pl.Tensor[[16, 1], pl.FP32]], c: pl.Out[pl.Tensor[[1, 64], pl.FP32]]) -> tuple[pl.Tensor[[16, 32], pl.FP32], pl.Tensor[[16, 1], pl.FP32], pl.Tensor[[1, 64], pl.FP32]]:
            t: pl.Tile[[16, 64], pl.FP32, pl.Mem.Vec] = pl.tile.load(x, [0, 0], [16, 64], target_memory=pl.Mem.Vec)
            tmp: pl.Tile[[16, 64], pl.FP32, pl.Mem.Vec] = pl.tile.create([16, 64], dtype=pl.FP32, target_memory=pl.Mem.Vec)
            odd: pl.Tile[[16, 32], pl.FP32, pl.Mem.Vec] = pl.tile.gather_mask(t, mask_pattern=2)
            rs: pl.Tile[[16, 1], pl.FP32, pl.Mem.Vec] = pl.tile.row_sum(t, tmp)
            cm: pl.Tile[[1, 64], pl.FP32, pl.Mem.Vec] = pl.tile.col_max(t)
            g1: pl.Tensor[[16, 32], pl.FP32] = pl.tile.store(odd, [0, 0], g)
            s1: pl.Tensor[[16, 1], pl.FP32] = pl.tile.store(rs, [0, 0], s)
            c1: pl.Tensor[[1, 64], pl.FP32] = pl.tile.store(cm, [0, 0], c)
            return g1, s1, c1
    """)
    x = rng(14).standard_normal((16, 64)).astype(np.float32)
    out = run_function(prog, "k", dict(x=x), CTX)
    np.testing.assert_array_equal(out["g"], x[:, 1::2])  # OP-9 P1010: odd columns
    np.testing.assert_allclose(out["s"], x.sum(axis=1, keepdims=True), rtol=1e-6)
    np.testing.assert_array_equal(out["c"], x.max(axis=0, keepdims=True))


def test_block_idx_is_a_run_parameter():
    prog = kernel("""
        @pl.function(type=pl.FunctionType.AIV)
        def k(self, t: pl.Tensor[[64, 32], pl.FP32], out: pl.Out[pl.Tensor[[64, 32], pl.FP32]]) -> pl.Tensor[[64, 32], pl.FP32]:
            blk: pl.Scalar[pl.UINT64] = pl.tile.get_block_idx()
            r0: pl.Scalar[pl.INDEX] = blk * 16
            x: pl.Tile[[16, 32], pl.FP32, pl.Mem.Vec] = pl.tile.load(t, [r0, 0], [16, 32], target_memory=pl.Mem.Vec)
            o: pl.Tensor[[64, 32], pl.FP32] = pl.tile.store(x, [r0, 0], out)
            return o
    """)
    t = rng(15).standard_normal((64, 32)).astype(np.float32)
    one = run_function(prog, "k", dict(t=t), CTX, block_idx=2)
    assert np.array_equal(one["out"][32:48], t[32:48]) and np.isnan(one["out"][:32]).all()
    every = run_function(prog, "k", dict(t=t), CTX, block_num=4, all_blocks=True)
    assert np.array_equal(every["out"], t)


def test_out_of_bounds_store_is_a_fault():
    prog = kernel("""
        @pl.function(type=pl.FunctionType.AIV)
        def k(self, t: pl.Tensor[[16, 32], pl.FP32], r: pl.Scalar[pl.INDEX], out: pl.Out[pl.Tensor[[16, 32], pl.FP32]]) -> pl.Tensor[[16, 32], pl.FP32]:
            x: pl.Tile[[16, 32], pl.FP32, pl.Mem.Vec] = pl.tile.load(t, [0, 0], [16, 32], target_memory=pl.Mem.Vec)
            o: pl.Tensor[[16, 32], pl.FP32] = pl.tile.store(x, [r, 0], out)
            return o
    """)
    t = np.zeros((16, 32), np.float32)
    run_function(prog, "k", dict(t=t, r=0), CTX)
    with pytest.raises(ReferenceFault) as e:
        run_function(prog, "k", dict(t=t, r=8), CTX)
    assert e.value.diagnostics[0].code == "PTOC-E0503"


def test_unsupported_op_raises_e0500_naming_it():
    prog = kernel("""
        @pl.function(type=pl.FunctionType.AIV)
        def k(self, x: pl.Tensor[[1, 32], pl.FP32], i: pl.Tensor[[1, 32], pl.UINT32], out: pl.Out[pl.Tensor[[1, 64], pl.FP32]]) -> pl.Tensor[[1, 64], pl.FP32]:
            t: pl.Tile[[1, 32], pl.FP32, pl.Mem.Vec] = pl.tile.load(x, [0, 0], [1, 32], target_memory=pl.Mem.Vec)
            ti: pl.Tile[[1, 32], pl.UINT32, pl.Mem.Vec] = pl.tile.load(i, [0, 0], [1, 32], target_memory=pl.Mem.Vec)
            s: pl.Tile[[1, 64], pl.FP32, pl.Mem.Vec] = pl.tile.sort32(t, ti)
            o: pl.Tensor[[1, 64], pl.FP32] = pl.tile.store(s, [0, 0], out)
            return o
    """)
    with pytest.raises(Unsupported) as e:
        run_function(prog, "k", dict(x=np.zeros((1, 32), np.float32), i=np.zeros((1, 32), np.uint32)), CTX)
    d = e.value.diagnostics[0]
    assert d.code == "PTOC-E0500" and "pl.tile.sort32" in d.message
    assert e.value.op_name == "tile.sort32"
    assert "PTOC-E0500" in CODES


def test_missing_scalar_input_is_an_input_error():
    _, fn, inputs, _ = _dynamic_rows(50)()
    with pytest.raises(ReferenceFault) as e:
        run_function(example("dynamic_rows"), fn, {"x": inputs["x"]}, CTX)
    assert e.value.diagnostics[0].code == "PTOC-E0502"


def test_tensor_write_stores_one_element_and_leaves_the_rest():
    prog = kernel("""
        @pl.function(type=pl.FunctionType.InCore)
        def k(self, a: pl.Tensor[[4, 8], pl.FP32], out: pl.Out[pl.Tensor[[4, 8], pl.FP32]]) -> pl.Tensor[[4, 8], pl.FP32]:
            v: pl.Scalar[pl.FP32] = pl.tensor.read(a, [2, 5])
            w: pl.Tensor[[4, 8], pl.FP32] = pl.tensor.write(out, [1, 3], v)
            return w
    """)
    a = np.arange(32, dtype=np.float32).reshape(4, 8)
    ref = run_function(prog, "k", dict(a=a, out=np.zeros((4, 8), np.float32)), CTX)
    expect = np.zeros((4, 8), np.float32)
    expect[1, 3] = a[2, 5]
    np.testing.assert_array_equal(ref["out"], expect)
