"""The `.pto` executor (ptoc.reference.pto_exec) runs what the emitter writes and checks its addressing.

Every example is compiled (level3 with addresses, level2 without), executed on seeded random inputs and
compared with an independent numpy computation. Deliberately corrupted `.pto` text (a swapped NZ stride,
a moved partition offset, overlapping tile addresses) must give wrong results or an executor error, which
shows that the executor really reads shapes, strides, offsets and addresses from the text (pto-format.md
"GlobalTensor", NZ-2..NZ-4, NZ-7, NZ-14).
"""

from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from ptoc.context import CompileContext
from ptoc.driver import compile_program, frontend
from ptoc.reference.pto_exec import PtoExecError, parse_module, run_pto, run_pto_logical

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
BF16 = ml_dtypes.bfloat16
LEVELS = ("level3", "level2")

_CACHE: dict = {}


def compiled(stem: str, level: str = "level3") -> str:
    key = (stem, level)
    if key not in _CACHE:
        path = EXAMPLES / f"{stem}.ir"
        ctx = CompileContext(arch="a2a3", ptoas_version="v0.61")
        prog = frontend(path.read_text(), path.name, ctx)
        _CACHE[key] = compile_program(prog, ctx, path.name, pto_level=level, header=False).pto
    return _CACHE[key]


def corrupt(text: str, old: str, new: str) -> str:
    assert text.count(old) == 1, f"expected exactly one {old!r} in the .pto"
    return text.replace(old, new)


# --------------------------------------------------------------------------------------------------
# the examples, each against an independent numpy computation
# --------------------------------------------------------------------------------------------------

def run_vector_add(text, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((64, 64)).astype(np.float32)
    b = rng.standard_normal((64, 64)).astype(np.float32)
    out = run_pto_logical(text, "add_kernel", {0: (a, "ND"), 1: (b, "ND"), 2: (np.zeros((64, 64), np.float32), "ND")})
    return out[2], a + b


def run_softmax(text, seed=1):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((64, 128)) * 3).astype(np.float32)
    out = run_pto_logical(text, "softmax_kernel", {0: (x, "ND"), 1: (np.zeros((64, 128), np.float32), "ND"),
                                                   2: (np.zeros((64, 1), np.float32), "DN")})
    x64 = x.astype(np.float64)
    m = x64.max(axis=1, keepdims=True)
    e = np.exp(x64 - m)
    return out, e / e.sum(axis=1, keepdims=True), m


def run_matmul_bf16(text, seed=2):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((64, 256)).astype(BF16)
    b = rng.standard_normal((256, 128)).astype(BF16)
    out = run_pto_logical(text, "mm_kernel", {0: (a, "ND"), 1: (b, "ND"), 2: (np.zeros((64, 128), np.float32), "ND")})
    return out[2], a.astype(np.float64) @ b.astype(np.float64)


def run_nz_int8(text, seed=3):
    rng = np.random.default_rng(seed)
    x = rng.integers(-128, 128, (64, 256), dtype=np.int8)
    w = rng.integers(-128, 128, (256, 512), dtype=np.int8)  # logical; the executor packs it to NZ
    out = run_pto_logical(text, "mm_nz", {0: (x, "ND"), 1: (w, "NZ"), 2: (np.zeros((64, 512), np.int32), "ND")})
    return out[2], x.astype(np.int64) @ w.astype(np.int64)


def run_grouped(text, seed=4, blocks=range(8)):
    """The kernel of `for nb in pl.spmd(8)` run once per block (block_idx nb of 8), sharing GM."""
    rng = np.random.default_rng(seed)
    x = rng.integers(-128, 128, (64, 1024), dtype=np.int8)
    w = rng.integers(-128, 128, (1024, 2048), dtype=np.int8)
    shared: dict = {}
    out = {2: np.zeros((64, 2048), np.int32)}
    for b in blocks:
        out = run_pto_logical(text, "gmm_kernel",
                              {0: (x, "ND"), 1: (w, "NZ"), 2: (np.zeros((64, 2048), np.int32), "ND")},
                              shared=shared, keys={0: "x", 1: "w", 2: "out"}, block_idx=b, block_num=8)
    return out[2], x.astype(np.int64) @ w.astype(np.int64)


def run_acc_store_nz(text, seed=5):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((64, 128)).astype(BF16)
    k = rng.standard_normal((128, 16)).astype(BF16)
    out = run_pto_logical(text, "scores", {0: (q, "ND"), 1: (k, "ND"), 2: (np.zeros((64, 16), np.float32), "NZ")})
    return out[2], q.astype(np.float64) @ k.astype(np.float64)


def run_dynamic_rows(text, m, seed=6):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((m, 64)).astype(np.float16)
    alpha = np.float16(-1.375)
    out = run_pto_logical(text, "scale_rows", {0: (x, "ND"), 1: (np.zeros((m, 64), np.float16), "ND")},
                          scalars=[alpha], dyn_dims=[m])
    return out[1], (x.astype(np.float32) * np.float32(alpha)).astype(np.float16)


@pytest.mark.parametrize("level", LEVELS)
def test_vector_add(level):
    got, want = run_vector_add(compiled("vector_add", level))
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("level", LEVELS)
def test_softmax_rows(level):
    out, probs, row_max = run_softmax(compiled("softmax_rows", level))
    np.testing.assert_allclose(out[1], probs, rtol=1e-5, atol=1e-7)
    np.testing.assert_array_equal(out[2], row_max.astype(np.float32))  # DN [64, 1] output


@pytest.mark.parametrize("level", LEVELS)
def test_matmul_bf16(level):
    got, want = run_matmul_bf16(compiled("matmul_bf16", level))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("level", LEVELS)
def test_nz_weight_int8_exact(level):
    got, want = run_nz_int8(compiled("nz_weight_int8", level))
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("level", LEVELS)
def test_grouped_matmul_nz_all_blocks_exact(level):
    got, want = run_grouped(compiled("grouped_matmul_nz", level))
    np.testing.assert_array_equal(got, want)  # all 8 blocks of 256 columns


def test_grouped_matmul_nz_one_block_writes_its_panel_only():
    # block 3 of 8 owns columns 768..1023 (nb * 256); the other panels keep their initial zeros
    got, want = run_grouped(compiled("grouped_matmul_nz"), blocks=[3])
    np.testing.assert_array_equal(got[:, 768:1024], want[:, 768:1024])
    assert not got[:, :768].any() and not got[:, 1024:].any()


@pytest.mark.parametrize("level", LEVELS)
def test_acc_store_nz_fractal_order(level):
    """NZ-7: the Acc tile lands in GM in [1, C/8, R/16, 16, 8] order; unpacked it is q @ k."""
    got, want = run_acc_store_nz(compiled("acc_store_nz", level))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)


def test_acc_store_nz_raw_bytes_are_fractal():
    """The same check on raw GM bytes: element (r, c) sits at (c//8)*64*8 + r*8 + c%8 (64 rows, c0 = 8)."""
    text = compiled("acc_store_nz")
    rng = np.random.default_rng(7)
    q = rng.standard_normal((64, 128)).astype(BF16)
    k = rng.standard_normal((128, 16)).astype(BF16)
    out = run_pto(text, "scores", [q.tobytes(), k.tobytes(), bytes(64 * 16 * 4)])
    flat = np.frombuffer(out[2], np.float32)
    want = (q.astype(np.float64) @ k.astype(np.float64))
    r, c = np.meshgrid(np.arange(64), np.arange(16), indexing="ij")
    np.testing.assert_allclose(flat[(c // 8) * 512 + r * 8 + c % 8], want, rtol=1e-5, atol=1e-4)
    assert out[0] == q.tobytes() and out[1] == k.tobytes()  # inputs untouched


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("m", [96, 50])
def test_dynamic_rows(level, m):
    got, want = run_dynamic_rows(compiled("dynamic_rows", level), m)
    np.testing.assert_array_equal(got, want)


def test_golden_files_execute_like_the_compiler_output():
    for stem, fn in (("vector_add", run_vector_add), ("nz_weight_int8", run_nz_int8)):
        golden = (ROOT / "tests" / "golden" / f"{stem}.pto").read_text()
        got, want = fn(golden)
        np.testing.assert_array_equal(got, want)


# --------------------------------------------------------------------------------------------------
# corrupted .pto: the executor must notice (wrong results or an error)
# --------------------------------------------------------------------------------------------------

def _fails(fn, text, compare) -> bool:
    try:
        got, want = fn(text)
    except PtoExecError:
        return True
    return not compare(got, want)


def test_swapped_nz_strides_give_wrong_results():
    text = compiled("nz_weight_int8")
    bad = corrupt(text, "strides = [%c131072_index, %c8192_index, %c512_index, %c32_index, %c1_index]",
                  "strides = [%c131072_index, %c512_index, %c8192_index, %c32_index, %c1_index]")
    got, want = run_nz_int8(bad)  # in range, so it runs ...
    assert not np.array_equal(got, want)  # ... and the comparison fails


def test_nz_strides_of_an_nd_weight_give_wrong_results():
    """A weight addressed as if it were ND (strides [.., 512, 1] over the NZ shape) reads the wrong bytes."""
    text = compiled("nz_weight_int8")
    bad = corrupt(text, "strides = [%c131072_index, %c8192_index, %c512_index, %c32_index, %c1_index]",
                  "strides = [%c131072_index, %c32_index, %c8192_index, %c512_index, %c1_index]")
    assert _fails(run_nz_int8, bad, np.array_equal)


def test_partition_offset_out_of_range_is_an_error_with_its_line():
    text = compiled("vector_add")
    old = "%tb_pview = pto.partition_view %b_view, offsets = [%c0_index, %c0_index]"
    bad = corrupt(text, old, "%tb_pview = pto.partition_view %b_view, offsets = [%c1_index, %c0_index]")
    line = next(i + 1 for i, s in enumerate(bad.splitlines()) if "pto.tload ins(%tb_pview" in s)
    with pytest.raises(PtoExecError, match=f"line {line}: .*out of range"):
        run_vector_add(bad)


def test_partition_offset_in_range_gives_wrong_results():
    text = compiled("grouped_matmul_nz")
    bad = corrupt(text, "offsets = [%c0_index, %k0]", "offsets = [%c0_index, %c0_index]")
    got, want = run_grouped(bad)
    assert not np.array_equal(got, want)


def test_nz_partition_offset_changed():
    text = compiled("nz_weight_int8")
    bad = corrupt(text, "offsets = [%c0_index, %0, %c0_index, %c0_index, %c0_index]",
                  "offsets = [%c0_index, %c0_index, %c0_index, %c0_index, %c0_index]")
    got, want = run_nz_int8(bad)
    np.testing.assert_array_equal(got[:, :256], want[:, :256])  # block 0 is still right
    assert not np.array_equal(got[:, 256:], want[:, 256:])


def test_nz_partition_beyond_the_buffer_is_an_error():
    text = compiled("nz_weight_int8")
    bad = corrupt(text, "%0 = arith.floordivsi %n0, %c32_index : index", "%0 = arith.floordivsi %n0, %c16_index : index")
    with pytest.raises(PtoExecError, match="out of range"):
        run_nz_int8(bad)


def test_nz_partition_not_fractal_shaped_is_an_error():
    """pto-isa's NZ checks: shape[3] == 16 and shape[4] == 32 / sizeof(T)."""
    text = compiled("nz_weight_int8")
    bad = corrupt(text, "sizes = [%c1_index, %c8_index, %c16_index, %c16_index, %c32_index] : "
                  "!pto.tensor_view<?x?x?x?x?xi8> -> !pto.partition_tensor_view<1x8x16x16x32xi8>",
                  "sizes = [%c1_index, %c16_index, %c16_index, %c8_index, %c32_index] : "
                  "!pto.tensor_view<?x?x?x?x?xi8> -> !pto.partition_tensor_view<1x16x16x8x32xi8>")
    with pytest.raises(PtoExecError, match="NZ partition"):
        run_nz_int8(bad)


def test_acc_nz_store_with_swapped_strides_gives_wrong_results():
    text = compiled("acc_store_nz")
    bad = corrupt(text, "strides = [%c1024_index, %c512_index, %c128_index, %c8_index, %c1_index]",
                  "strides = [%c1024_index, %c128_index, %c512_index, %c8_index, %c1_index]")
    assert _fails(run_acc_store_nz, bad, lambda g, w: np.allclose(g, w, rtol=1e-5, atol=1e-4))


def test_partition_size_must_match_the_tile_valid_shape():
    text = compiled("dynamic_rows")
    bad = corrupt(text, "%xt_pview = pto.partition_view %x_view, offsets = [%r, %c0_index], sizes = [%rows, %c64_index]",
                  "%xt_pview = pto.partition_view %x_view, offsets = [%r, %c0_index], sizes = [%c32_index, %c64_index]")
    with pytest.raises(PtoExecError):
        run_dynamic_rows(bad, 50)


def test_overlapping_tile_addresses_corrupt_vector_add():
    text = compiled("vector_add")
    bad = corrupt(text, "%c16384_i64 = arith.constant 16384 : i64", "%c16384_i64 = arith.constant 0 : i64")
    got, want = run_vector_add(bad)  # tb now sits on ta: the kernel computes b + b
    assert not np.array_equal(got, want)


def test_overlapping_tile_addresses_corrupt_matmul():
    text = compiled("matmul_bf16")
    bad = corrupt(text, "%c8192_i64 = arith.constant 8192 : i64", "%c8192_i64 = arith.constant 4096 : i64")
    got, want = run_matmul_bf16(bad)
    assert not np.allclose(got, want, rtol=1e-5, atol=1e-4)


def test_overlapping_tile_addresses_corrupt_softmax():
    text = compiled("softmax_rows")
    bad = corrupt(text, "%c16384_i64 = arith.constant 16384 : i64", "%c16384_i64 = arith.constant 8192 : i64")
    out, probs, _ = run_softmax(bad)  # row_max overwrites the first row of xt while xt is still live
    assert not np.allclose(out[1], probs, rtol=1e-5, atol=1e-7)


def test_tile_beyond_its_memory_is_an_error():
    text = compiled("vector_add")
    bad = corrupt(text, "%c16384_i64 = arith.constant 16384 : i64", "%c16384_i64 = arith.constant 180224 : i64")
    with pytest.raises(PtoExecError, match="does not fit"):
        run_vector_add(bad)


def test_unknown_op_names_op_and_line():
    text = compiled("vector_add").replace("pto.tadd ins", "pto.tfrobnicate ins")
    line = next(i + 1 for i, s in enumerate(text.splitlines()) if "pto.tfrobnicate" in s)
    with pytest.raises(PtoExecError, match=f"line {line}: unsupported op pto.tfrobnicate"):
        run_vector_add(text)


# --------------------------------------------------------------------------------------------------
# hand-written kernels for the ops the examples do not reach
# --------------------------------------------------------------------------------------------------

def vec(dt="f32", rows=8, cols=16, vr=None, vc=None, pad=0, layout="row_major"):
    vr = rows if vr is None else vr
    vc = cols if vc is None else vc
    return (f"!pto.tile_buf<loc=vec, dtype={dt}, rows={rows}, cols={cols}, v_row={vr}, v_col={vc}, "
            f"blayout={layout}, slayout=none_box, fractal=512, pad={pad}>")


def kernel(args: str, body: str, consts: str = "") -> str:
    base = """    %c0_index = arith.constant 0 : index
    %c1_index = arith.constant 1 : index
    %c8_index = arith.constant 8 : index
    %c16_index = arith.constant 16 : index
    %c0_i64 = arith.constant 0 : i64
    %c1024_i64 = arith.constant 1024 : i64
    %c2048_i64 = arith.constant 2048 : i64
    %c4096_i64 = arith.constant 4096 : i64
"""
    return (f'module attributes {{pto.target_arch = "a2a3"}} {{\n  func.func @k({args}) '
            f'attributes {{pto.kernel_kind = #pto.kernel_kind<vector>}} {{\n{base}{consts}{body}    return\n  }}\n}}\n')


IO = """    %x_view = pto.make_tensor_view %arg0, shape = [%c8_index, %c16_index], strides = [%c16_index, %c1_index] {layout = #pto.layout<nd>} : !pto.tensor_view<?x?xT>
    %y_view = pto.make_tensor_view %arg1, shape = [%c8_index, %c16_index], strides = [%c16_index, %c1_index] {layout = #pto.layout<nd>} : !pto.tensor_view<?x?xT>
    %xp = pto.partition_view %x_view, offsets = [%c0_index, %c0_index], sizes = [%c8_index, %c16_index] : !pto.tensor_view<?x?xT> -> !pto.partition_tensor_view<8x16xT>
    %yp = pto.partition_view %y_view, offsets = [%c0_index, %c0_index], sizes = [%c8_index, %c16_index] : !pto.tensor_view<?x?xT> -> !pto.partition_tensor_view<8x16xT>
    %x = pto.alloc_tile addr = %c0_i64 : TILE
    pto.tload ins(%xp : !pto.partition_tensor_view<8x16xT>) outs(%x : TILE)
"""


def unary_kernel(op_line: str, dt="f32", out_dt=None, consts="", extra="") -> str:
    out_dt = out_dt or dt
    io = IO.replace("TILE", vec(dt)).replace("xT>", f"x{dt}>")
    io = io.replace("%y_view = pto.make_tensor_view %arg1, shape = [%c8_index, %c16_index], strides = [%c16_index, "
                    f"%c1_index] {{layout = #pto.layout<nd>}} : !pto.tensor_view<?x?x{dt}>",
                    "%y_view = pto.make_tensor_view %arg1, shape = [%c8_index, %c16_index], strides = [%c16_index, "
                    f"%c1_index] {{layout = #pto.layout<nd>}} : !pto.tensor_view<?x?x{out_dt}>")
    io = io.replace(f"!pto.tensor_view<?x?x{dt}> -> !pto.partition_tensor_view<8x16x{dt}>\n    %x =",
                    f"!pto.tensor_view<?x?x{out_dt}> -> !pto.partition_tensor_view<8x16x{out_dt}>\n    %x =")
    body = io + extra + f"    %y = pto.alloc_tile addr = %c1024_i64 : {vec(out_dt)}\n" + op_line.replace(
        "X", vec(dt)).replace("Y", vec(out_dt)) + "\n" + \
        f"    pto.tstore ins(%y : {vec(out_dt)}) outs(%yp : !pto.partition_tensor_view<8x16x{out_dt}>)\n"
    return kernel(f"%arg0: !pto.ptr<{dt}>, %arg1: !pto.ptr<{out_dt}>", body, consts)


def run1(text, x, out_dtype=None):
    out_dtype = out_dtype or x.dtype
    out = run_pto_logical(text, "k", {0: (x, "ND"), 1: (np.zeros(x.shape, out_dtype), "ND")})
    return out[1]


@pytest.mark.parametrize("op,fn", [
    ("texp", np.exp), ("tsqrt", np.sqrt), ("tabs", np.abs), ("tneg", np.negative),
    ("trelu", lambda v: np.maximum(v, 0)), ("tlog", np.log), ("trecip", lambda v: 1 / v),
    ("trsqrt", lambda v: 1 / np.sqrt(v)),
])
def test_unary_ops(op, fn):
    rng = np.random.default_rng(10)
    x = rng.uniform(0.1, 4, (8, 16)).astype(np.float32) * np.where(op in ("tabs", "tneg", "trelu"), -1, 1)
    text = unary_kernel(f"    pto.{op} ins(%x : X) outs(%y : Y)")
    np.testing.assert_allclose(run1(text, x.astype(np.float32)), fn(x.astype(np.float64)), rtol=1e-6)


@pytest.mark.parametrize("op,fn", [("tadds", np.add), ("tsubs", np.subtract), ("tmuls", np.multiply),
                                   ("tdivs", np.divide), ("tmaxs", np.maximum), ("tmins", np.minimum)])
def test_scalar_ops(op, fn):
    x = np.random.default_rng(11).standard_normal((8, 16)).astype(np.float32)
    text = unary_kernel(f"    pto.{op} ins(%x, %cst : X, f32) outs(%y : Y)",
                        consts="    %cst = arith.constant 2.50000000000000000e-01 : f32\n")
    np.testing.assert_array_equal(run1(text, x), fn(x, np.float32(0.25)).astype(np.float32))


@pytest.mark.parametrize("op,fn", [("tand", np.bitwise_and), ("tor", np.bitwise_or), ("tmax", np.maximum),
                                   ("tsub", np.subtract), ("tmul", np.multiply), ("tshr", np.right_shift)])
def test_binary_int_ops(op, fn):
    x = np.random.default_rng(12).integers(-1000, 1000, (8, 16), dtype=np.int32)
    b_const = "    %c3_i32 = arith.constant 3 : i32\n"
    extra = (f"    %b = pto.alloc_tile addr = %c2048_i64 : {vec('i32')}\n"
             f"    pto.texpands ins(%c3_i32 : i32) outs(%b : {vec('i32')})\n")
    text = unary_kernel(f"    pto.{op} ins(%x, %b : X, X) outs(%y : Y)", dt="i32", consts=b_const, extra=extra)
    np.testing.assert_array_equal(run1(text, x), fn(x, np.int32(3)))


def test_txor_with_tmp():
    x = np.random.default_rng(13).integers(-1000, 1000, (8, 16), dtype=np.int32)
    extra = f"    %t = pto.alloc_tile addr = %c2048_i64 : {vec('i32')}\n"
    text = unary_kernel("    pto.txors ins(%x, %c5_i32, %t : X, i32, X) outs(%y : Y)", dt="i32",
                        consts="    %c5_i32 = arith.constant 5 : i32\n", extra=extra)
    np.testing.assert_array_equal(run1(text, x), x ^ 5)


@pytest.mark.parametrize("mode,want", [
    ("RINT", [2, 2, -2, -2, 3, -3]), ("ROUND", [3, 2, -3, -2, 3, -3]), ("FLOOR", [2, 2, -3, -3, 2, -3]),
    ("CEIL", [3, 3, -2, -2, 3, -2]), ("TRUNC", [2, 2, -2, -2, 2, -2]),
])
def test_tcvt_float_to_int_round_modes(mode, want):
    x = np.zeros((8, 16), np.float32)
    x[0, :6] = [2.5, 2.25, -2.5, -2.25, 2.75, -2.75]
    text = unary_kernel(f"    pto.tcvt ins(%x {{rmode = #pto<round_mode {mode}>}} : X) outs(%y : Y)",
                        dt="f32", out_dt="i32")
    got = run1(text, x, np.int32)
    assert got[0, :6].tolist() == want


def test_tcvt_f32_to_bf16_modes():
    one_third = np.float32(1 / 3)
    x = np.full((8, 16), one_third, np.float32)
    rne = run1(unary_kernel("    pto.tcvt ins(%x {rmode = #pto<round_mode RINT>} : X) outs(%y : Y)",
                            dt="f32", out_dt="bf16"), x, BF16)
    fl = run1(unary_kernel("    pto.tcvt ins(%x {rmode = #pto<round_mode FLOOR>} : X) outs(%y : Y)",
                           dt="f32", out_dt="bf16"), x, BF16)
    ce = run1(unary_kernel("    pto.tcvt ins(%x {rmode = #pto<round_mode CEIL>} : X) outs(%y : Y)",
                           dt="f32", out_dt="bf16"), x, BF16)
    assert rne[0, 0] == one_third.astype(BF16)
    assert float(fl[0, 0]) < float(one_third) < float(ce[0, 0])
    assert {float(fl[0, 0]), float(ce[0, 0])} >= {float(rne[0, 0])}


def test_row_and_col_reductions_and_expands():
    x = np.random.default_rng(14).standard_normal((8, 16)).astype(np.float32)
    t81 = vec("f32", 8, 1, layout="col_major")
    t116 = vec("f32", 1, 16)
    extra = (f"    %tmp = pto.alloc_tile addr = %c2048_i64 : {vec()}\n"
             f"    %rs = pto.alloc_tile addr = %c4096_i64 : {t81}\n"
             f"    pto.trowmin ins(%x, %tmp : {vec()}, {vec()}) outs(%rs : {t81})\n"
             f"    %cs = pto.alloc_tile addr = %c4160_i64 : {t116}\n"
             f"    pto.tcolmax ins(%x : {vec()}) outs(%cs : {t116})\n"
             f"    %z = pto.alloc_tile addr = %c4224_i64 : {vec()}\n"
             f"    pto.trowexpandmul ins(%x, %rs : {vec()}, {t81}) outs(%z : {vec()})\n")
    consts = "    %c4160_i64 = arith.constant 4160 : i64\n    %c4224_i64 = arith.constant 4224 : i64\n"
    text = unary_kernel(f"    pto.tcolexpandsub ins(%z, %cs : X, {t116}) outs(%y : Y)", consts=consts, extra=extra)
    want = x * x.min(axis=1, keepdims=True) - x.max(axis=0, keepdims=True)
    np.testing.assert_allclose(run1(text, x), want, rtol=1e-6)


def test_tgather_ttrans_and_fillpad():
    x = np.arange(128, dtype=np.float32).reshape(8, 16)
    # gather the odd columns (P1010), transpose an 8x8 tile, store into the left half
    t88 = vec("f32", 8, 8)
    extra = (f"    %g = pto.alloc_tile addr = %c2048_i64 : {t88}\n"
             f"    pto.tgather ins(%x, {{maskPattern = #pto.mask_pattern<P1010>}} : {vec()}) outs(%g : {t88})\n"
             f"    %tmp = pto.alloc_tile addr = %c4096_i64 : {t88}\n"
             f"    %tr = pto.alloc_tile addr = %c4352_i64 : {t88}\n"
             f"    pto.ttrans ins(%g, %tmp : {t88}, {t88}) outs(%tr : {t88})\n"
             f"    %part = pto.alloc_tile addr = %c4608_i64 valid_row = %c8_index valid_col = %c4_index : "
             f"{vec('f32', 8, 16, '?', '?')}\n"
             f"    pto.tmov ins(%tr : {t88}) outs(%part : {vec('f32', 8, 16, '?', '?')})\n")
    consts = ("    %c4352_i64 = arith.constant 4352 : i64\n    %c4608_i64 = arith.constant 4608 : i64\n"
              "    %c4_index = arith.constant 4 : index\n")
    text = unary_kernel(f"    pto.tfillpad ins(%part : {vec('f32', 8, 16, '?', '?')}) outs(%y : {vec(pad=2)})",
                        consts=consts, extra=extra)
    text = text.replace(f"%y = pto.alloc_tile addr = %c1024_i64 : {vec()}", f"%y = pto.alloc_tile addr = %c1024_i64 : {vec(pad=2)}")
    text = text.replace(f"pto.tstore ins(%y : {vec()})", f"pto.tstore ins(%y : {vec(pad=2)})")
    got = run1(text, x)
    g = x[:, 1::2]
    want = np.full((8, 16), np.inf, np.float32)
    want[:, :4] = g.T[:, :4]
    np.testing.assert_array_equal(got, want)


def test_set_validshape_and_textract():
    x = np.random.default_rng(15).standard_normal((8, 16)).astype(np.float32)
    dyn = vec("f32", 8, 16, "?", "?")
    extra = (f"    %d = pto.alloc_tile addr = %c2048_i64 valid_row = %c8_index valid_col = %c16_index : {dyn}\n"
             f"    pto.tadds ins(%x, %cst : {vec()}, f32) outs(%d : {dyn})\n"
             f"    pto.set_validshape %d, %c4_index, %c8_index : {dyn}\n"
             f"    pto.texpands ins(%cst : f32) outs(%d : {dyn})\n"
             f"    pto.set_validshape %d, %c8_index, %c16_index : {dyn}\n")
    consts = ("    %cst = arith.constant 1.00000000000000000e+00 : f32\n    %c4_index = arith.constant 4 : index\n"
              "    %c2_index = arith.constant 2 : index\n")
    text = unary_kernel(f"    pto.textract ins(%d, %c0_index, %c0_index : {dyn}, index, index) outs(%y : Y)",
                        consts=consts, extra=extra)
    want = x + 1
    want[:4, :8] = 1
    np.testing.assert_array_equal(run1(text, x), want)


def test_tstore_atomic_add_adds():
    x = np.random.default_rng(16).standard_normal((8, 16)).astype(np.float32)
    text = unary_kernel("    pto.tmov ins(%x : X) outs(%y : Y)")
    text = text.replace("outs(%yp : !pto.partition_tensor_view<8x16xf32>)",
                        "outs(%yp : !pto.partition_tensor_view<8x16xf32>) {atomicType = #pto<atomic_type atomic_add>}")
    y0 = np.full((8, 16), 10, np.float32)
    out = run_pto_logical(text, "k", {0: (x, "ND"), 1: (y0, "ND")})
    np.testing.assert_array_equal(out[1], x + 10)


def test_scalar_arith_control_flow_and_iter_args():
    """arith semantics (floordivsi vs divsi vs remsi on negatives), scf.if and scf.for iter_args."""
    body = """    %c5_index = arith.constant 5 : index
    %cn7_index = arith.constant -7 : index
    %c2_index = arith.constant 2 : index
    %a = arith.floordivsi %cn7_index, %c2_index : index
    %b = arith.divsi %cn7_index, %c2_index : index
    %r = arith.remsi %cn7_index, %c2_index : index
    %s = scf.for %i = %c0_index to %c5_index step %c1_index iter_args(%acc = %c0_index) -> (index) {
      %sq = arith.muli %i, %i : index
      %n = arith.addi %acc, %sq : index
      scf.yield %n : index
    }
    %lt = arith.cmpi slt, %a, %b : index
    %pick = scf.if %lt -> (index) {
      scf.yield %s : index
    } else {
      scf.yield %r : index
    }
    %f = arith.index_cast %pick : index to i64
    %ff = arith.sitofp %f : i64 to f32
    %v_view = pto.make_tensor_view %arg0, shape = [%c1_index, %c16_index], strides = [%c16_index, %c1_index] {layout = #pto.layout<nd>} : !pto.tensor_view<?x?xf32>
    %vp = pto.partition_view %v_view, offsets = [%c0_index, %c0_index], sizes = [%c1_index, %c16_index] : !pto.tensor_view<?x?xf32> -> !pto.partition_tensor_view<1x16xf32>
    %t = pto.alloc_tile addr = %c0_i64 : TILE
    pto.texpands ins(%ff : f32) outs(%t : TILE)
    pto.tstore ins(%t : TILE) outs(%vp : !pto.partition_tensor_view<1x16xf32>)
""".replace("TILE", vec("f32", 1, 16))
    text = kernel("%arg0: !pto.ptr<f32>", body)
    out = run_pto(text, "k", [bytes(64)])
    assert np.frombuffer(out[0], np.float32).tolist() == [30.0] * 16  # -4 < -3, so 0+1+4+9+16


def test_tmatmul_bias_and_level2_separate_handles():
    left = "!pto.tile_buf<loc=left, dtype=i8, rows=16, cols=32, v_row=16, v_col=32, blayout=col_major, slayout=row_major, fractal=512, pad=0>"
    right = "!pto.tile_buf<loc=right, dtype=i8, rows=32, cols=16, v_row=32, v_col=16, blayout=row_major, slayout=col_major, fractal=512, pad=0>"
    bias = "!pto.tile_buf<loc=bias, dtype=i32, rows=1, cols=16, v_row=1, v_col=16, blayout=row_major, slayout=none_box, fractal=512, pad=0>"
    acc = "!pto.tile_buf<loc=acc, dtype=i32, rows=16, cols=16, v_row=16, v_col=16, blayout=col_major, slayout=row_major, fractal=1024, pad=0>"
    matl = left.replace("loc=left", "loc=mat")
    matr = right.replace("loc=right", "loc=mat").replace("blayout=row_major, slayout=col_major", "blayout=col_major, slayout=row_major")
    body = f"""    %c32_index = arith.constant 32 : index
    %a_view = pto.make_tensor_view %arg0, shape = [%c16_index, %c32_index], strides = [%c32_index, %c1_index] {{layout = #pto.layout<nd>}} : !pto.tensor_view<?x?xi8>
    %b_view = pto.make_tensor_view %arg1, shape = [%c32_index, %c16_index], strides = [%c16_index, %c1_index] {{layout = #pto.layout<nd>}} : !pto.tensor_view<?x?xi8>
    %o_view = pto.make_tensor_view %arg2, shape = [%c16_index, %c16_index], strides = [%c16_index, %c1_index] {{layout = #pto.layout<nd>}} : !pto.tensor_view<?x?xi32>
    %ap = pto.partition_view %a_view, offsets = [%c0_index, %c0_index], sizes = [%c16_index, %c32_index] : !pto.tensor_view<?x?xi8> -> !pto.partition_tensor_view<16x32xi8>
    %bp = pto.partition_view %b_view, offsets = [%c0_index, %c0_index], sizes = [%c32_index, %c16_index] : !pto.tensor_view<?x?xi8> -> !pto.partition_tensor_view<32x16xi8>
    %op = pto.partition_view %o_view, offsets = [%c0_index, %c0_index], sizes = [%c16_index, %c16_index] : !pto.tensor_view<?x?xi32> -> !pto.partition_tensor_view<16x16xi32>
    %am = pto.alloc_tile : {matl}
    %bm = pto.alloc_tile : {matr}
    pto.tload ins(%ap : !pto.partition_tensor_view<16x32xi8>) outs(%am : {matl})
    pto.tload ins(%bp : !pto.partition_tensor_view<32x16xi8>) outs(%bm : {matr})
    %al = pto.alloc_tile : {left}
    %br = pto.alloc_tile : {right}
    pto.tmov ins(%am : {matl}) outs(%al : {left})
    pto.tmov ins(%bm : {matr}) outs(%br : {right})
    %bias = pto.alloc_tile : {bias}
    pto.texpands ins(%c7_i32 : i32) outs(%bias : {bias})
    %acc = pto.alloc_tile : {acc}
    pto.tmatmul.bias ins(%al, %br, %bias : {left}, {right}, {bias}) outs(%acc : {acc})
    pto.tstore ins(%acc : {acc}) outs(%op : !pto.partition_tensor_view<16x16xi32>)
"""
    text = kernel("%arg0: !pto.ptr<i8>, %arg1: !pto.ptr<i8>, %arg2: !pto.ptr<i32>", body,
                  "    %c7_i32 = arith.constant 7 : i32\n")
    rng = np.random.default_rng(17)
    a = rng.integers(-128, 128, (16, 32), dtype=np.int8)
    b = rng.integers(-128, 128, (32, 16), dtype=np.int8)
    out = run_pto_logical(text, "k", {0: (a, "ND"), 1: (b, "ND"), 2: (np.zeros((16, 16), np.int32), "ND")})
    np.testing.assert_array_equal(out[2], a.astype(np.int64) @ b.astype(np.int64) + 7)


def test_run_pto_argument_checks():
    text = compiled("dynamic_rows")
    x = np.ones((50, 64), np.float16)
    with pytest.raises(PtoExecError, match="takes 4 arguments"):
        run_pto(text, "scale_rows", [x.tobytes(), bytes(x.nbytes), 2.0])  # dynamic dim missing
    with pytest.raises(PtoExecError, match="no func.func @nope"):
        run_pto(text, "nope", [])
    with pytest.raises(PtoExecError, match="bytes-like"):
        run_pto(text, "scale_rows", [1, 2, 3.0], [50])
    out = run_pto(text, "scale_rows", [x.tobytes(), bytes(x.nbytes), 2.0], [50])
    assert np.frombuffer(out[1], np.float16).tolist() == [2.0] * (50 * 64)


def test_parse_module_structure():
    m = parse_module(compiled("grouped_matmul_nz"))
    f = m.funcs["gmm_kernel"]
    assert m.arch == "a2a3"
    assert [t for _, t in f.args] == ["!pto.ptr<i8>", "!pto.ptr<i8>", "!pto.ptr<i32>"]
    # one block per launch: the block index is read, the K loop is the only loop (no loop over blocks)
    assert any(op.name == "pto.get_block_idx" for op in f.body)
    loops = [op for op in f.body if op.name == "scf.for"]
    assert len(loops) == 1 and not any(op.name == "scf.for" for op in loops[0].regions[0])


# --------------------------------------------------------------------------------------------------
# IR kernels for the gather / scatter, generator, element-access and view families: compiled through
# the front end and the pipeline, executed, and checked against independent numpy computations
# --------------------------------------------------------------------------------------------------

CTX = CompileContext(arch="a2a3", ptoas_version="v0.61")


def ir_kernel(body: str, params: str, ret: str) -> str:
    lines = "\n".join("        " + ln.strip() for ln in body.strip().splitlines())
    return (f"@pl.program\nclass p:\n    @pl.function(type=pl.FunctionType.InCore)\n"
            f"    def k(self, {params}) -> {ret}:\n{lines}\n")


def compile_ir(text: str, level: str) -> str:
    prog = frontend(text, "t.ir", CTX)
    return compile_program(prog, CTX, "t.ir", pto_level=level, header=False).pto


GATHER_SCATTER_IR = ir_kernel(
    """
    s: pl.Tile[[16, 64], pl.FP32, pl.Mem.Vec] = pl.tile.load(x, [0, 0], [16, 64], target_memory=pl.Mem.Vec)
    i: pl.Tile[[4, 16], pl.INT32, pl.Mem.Vec] = pl.tile.load(ix, [0, 0], [4, 16], target_memory=pl.Mem.Vec)
    t: pl.Tile[[4, 16], pl.INT32, pl.Mem.Vec] = pl.tile.create([4, 16], dtype=pl.INT32, target_memory=pl.Mem.Vec)
    g: pl.Tile[[4, 16], pl.FP32, pl.Mem.Vec] = pl.tile.gather(s, i, t)
    src: pl.Tile[[4, 64], pl.FP32, pl.Mem.Vec] = pl.tile.load(x, [4, 0], [4, 64], target_memory=pl.Mem.Vec)
    k: pl.Tile[[4, 64], pl.INT32, pl.Mem.Vec] = pl.tile.load(kx, [0, 0], [4, 64], target_memory=pl.Mem.Vec)
    o: pl.Tile[[16, 64], pl.FP32, pl.Mem.Vec] = pl.tile.scatter(s, src, k)
    b: pl.Tile[[4, 8], pl.UINT32, pl.Mem.Vec] = pl.tile.load(bx, [0, 0], [4, 8], target_memory=pl.Mem.Vec)
    gb: pl.Tile[[4, 64], pl.FP32, pl.Mem.Vec] = pl.tile.gatherb(o, b)
    m: pl.Tile[[4, 32], pl.INT32, pl.Mem.Vec] = pl.tile.gather_mask(gb, mask_pattern=2, output_dtype=pl.INT32)
    y_1: pl.Tensor[[4, 16], pl.FP32] = pl.tile.store(g, [0, 0], y)
    z_1: pl.Tensor[[4, 32], pl.INT32] = pl.tile.store(m, [0, 0], z)
    w_1: pl.Tensor[[16, 64], pl.FP32] = pl.tile.store(o, [0, 0], w)
    return y_1, z_1, w_1
    """,
    "x: pl.Tensor[[16, 64], pl.FP32], ix: pl.Tensor[[4, 16], pl.INT32], kx: pl.Tensor[[4, 64], pl.INT32], "
    "bx: pl.Tensor[[4, 8], pl.UINT32], y: pl.Out[pl.Tensor[[4, 16], pl.FP32]], "
    "z: pl.Out[pl.Tensor[[4, 32], pl.INT32]], w: pl.Out[pl.Tensor[[16, 64], pl.FP32]]",
    "tuple[pl.Tensor[[4, 16], pl.FP32], pl.Tensor[[4, 32], pl.INT32], pl.Tensor[[16, 64], pl.FP32]]")


def run_gather_scatter(text, seed=20):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((16, 64)).astype(np.float32)
    ix = rng.integers(0, 16 * 64, (4, 16)).astype(np.int32)
    kx = rng.integers(0, 16, (4, 64)).astype(np.int32)
    bx = (rng.integers(0, 16 * 64 * 4 // 32, (4, 8)) * 32).astype(np.uint32)  # 32-byte blocks of o
    out = run_pto_logical(text, "k", {0: (x, "ND"), 1: (ix, "ND"), 2: (kx, "ND"), 3: (bx, "ND"),
                                      4: (np.zeros((4, 16), np.float32), "ND"),
                                      5: (np.zeros((4, 32), np.int32), "ND"),
                                      6: (np.zeros((16, 64), np.float32), "ND")})
    gather = x.reshape(-1)[ix]  # flat index into the 16 x 64 source
    scattered = x.copy()
    for i in range(4):  # one destination row per element, row-major order (the last writer wins)
        for j in range(64):
            scattered[kx[i, j], j] = x[4 + i, j]
    blocks = scattered.reshape(-1).view(np.uint8)
    gb = np.stack([np.concatenate([blocks[o:o + 32].view(np.float32) for o in row]) for row in bx])
    mask = np.ascontiguousarray(gb[:, 1::2]).view(np.int32)  # P1010: odd columns, bits as INT32
    return out, gather, mask, scattered


@pytest.mark.parametrize("level", LEVELS)
def test_gather_index_scatter_gatherb_and_mask_bits(level):
    out, gather, mask, scattered = run_gather_scatter(compile_ir(GATHER_SCATTER_IR, level))
    np.testing.assert_array_equal(out[4], gather)
    np.testing.assert_array_equal(out[6], scattered)
    np.testing.assert_array_equal(out[5], mask)


def test_gather_index_out_of_range_is_an_error():
    text = compile_ir(GATHER_SCATTER_IR, "level3")
    x = np.zeros((16, 64), np.float32)
    ix = np.full((4, 16), 16 * 64, np.int32)  # one past the source tile
    line = next(i + 1 for i, s in enumerate(text.splitlines()) if "pto.tgather ins(%s, %i, %t" in s)
    with pytest.raises(PtoExecError, match=f"line {line}: tgather index 1024 is outside"):
        run_pto_logical(text, "k", {0: (x, "ND"), 1: (ix, "ND"), 2: (np.zeros((4, 64), np.int32), "ND"),
                                    3: (np.zeros((4, 8), np.uint32), "ND"), 4: (np.zeros((4, 16), np.float32), "ND"),
                                    5: (np.zeros((4, 32), np.int32), "ND"), 6: (x, "ND")})


def test_scatter_row_index_out_of_range_is_an_error():
    text = compile_ir(GATHER_SCATTER_IR, "level2")
    x = np.zeros((16, 64), np.float32)
    with pytest.raises(PtoExecError, match="tscatter row index 16 is outside the 16-row destination"):
        run_pto_logical(text, "k", {0: (x, "ND"), 1: (np.zeros((4, 16), np.int32), "ND"),
                                    2: (np.full((4, 64), 16, np.int32), "ND"), 3: (np.zeros((4, 8), np.uint32), "ND"),
                                    4: (np.zeros((4, 16), np.float32), "ND"), 5: (np.zeros((4, 32), np.int32), "ND"),
                                    6: (x, "ND")})


GENERATOR_IR = ir_kernel(
    """
    c: pl.Tile[[1, 64], pl.INT32, pl.Mem.Vec] = pl.tile.ci(5, [1, 64], dtype=pl.INT32, descending=True)
    a: pl.Tile[[1, 32], pl.INT16, pl.Mem.Vec] = pl.tile.ci(n, [1, 32], dtype=pl.INT16)
    u: pl.Tile[[16, 16], pl.FP32, pl.Mem.Vec] = pl.tile.tri(1, [16, 16], dtype=pl.FP32, upper=True)
    l: pl.Tile[[16, 16], pl.INT32, pl.Mem.Vec] = pl.tile.tri(-2, [16, 16], dtype=pl.INT32)
    y_1: pl.Tensor[[1, 64], pl.INT32] = pl.tile.store(c, [0, 0], y)
    z_1: pl.Tensor[[1, 32], pl.INT16] = pl.tile.store(a, [0, 0], z)
    w_1: pl.Tensor[[16, 16], pl.FP32] = pl.tile.store(u, [0, 0], w)
    v_1: pl.Tensor[[16, 16], pl.INT32] = pl.tile.store(l, [0, 0], v)
    return y_1, z_1, w_1, v_1
    """,
    "n: pl.Scalar[pl.INT16], y: pl.Out[pl.Tensor[[1, 64], pl.INT32]], z: pl.Out[pl.Tensor[[1, 32], pl.INT16]], "
    "w: pl.Out[pl.Tensor[[16, 16], pl.FP32]], v: pl.Out[pl.Tensor[[16, 16], pl.INT32]]",
    "tuple[pl.Tensor[[1, 64], pl.INT32], pl.Tensor[[1, 32], pl.INT16], pl.Tensor[[16, 16], pl.FP32], "
    "pl.Tensor[[16, 16], pl.INT32]]")


@pytest.mark.parametrize("level", LEVELS)
def test_ci_and_tri(level):
    text = compile_ir(GENERATOR_IR, level)
    out = run_pto_logical(text, "k", {0: (np.zeros((1, 64), np.int32), "ND"), 1: (np.zeros((1, 32), np.int16), "ND"),
                                      2: (np.zeros((16, 16), np.float32), "ND"),
                                      3: (np.zeros((16, 16), np.int32), "ND")}, scalars=[32760])
    np.testing.assert_array_equal(out[0][0], 5 - np.arange(64))
    np.testing.assert_array_equal(out[1][0], (32760 + np.arange(32)).astype(np.int16))  # wraps at 16 bits
    i, j = np.meshgrid(np.arange(16), np.arange(16), indexing="ij")
    np.testing.assert_array_equal(out[2], np.triu(np.ones((16, 16)), 1).astype(np.float32))
    np.testing.assert_array_equal(out[2], (j >= i + 1).astype(np.float32))
    np.testing.assert_array_equal(out[3], np.tril(np.ones((16, 16)), -2).astype(np.int32))


ELEMENT_IR = ir_kernel(
    """
    t: pl.Tile[[8, 64], pl.FP32, pl.Mem.Vec] = pl.tile.load(x, [0, 0], [8, 64], target_memory=pl.Mem.Vec)
    a: pl.Scalar[pl.FP32] = pl.tile.read(t, [1, 2])
    b: pl.Scalar[pl.FP32] = pl.tile.read(t, [r, 3]) * a
    u: pl.Tile[[8, 64], pl.FP32, pl.Mem.Vec] = pl.tile.write(t, [0, 5], b)
    pl.tile.write(u, [r, 0], 2.5)
    y_1: pl.Tensor[[8, 64], pl.FP32] = pl.tile.store(u, [0, 0], y)
    return y_1
    """,
    "x: pl.Tensor[[8, 64], pl.FP32], r: pl.Scalar[pl.INDEX], y: pl.Out[pl.Tensor[[8, 64], pl.FP32]]",
    "pl.Tensor[[8, 64], pl.FP32]")


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("r", [0, 6])
def test_tile_read_and_write(level, r):
    x = np.random.default_rng(21).standard_normal((8, 64)).astype(np.float32)
    out = run_pto_logical(compile_ir(ELEMENT_IR, level), "k", {0: (x, "ND"), 1: (np.zeros((8, 64), np.float32), "ND")},
                          scalars=[r])
    want = x.copy()
    want[0, 5] = x[r, 3] * x[1, 2]
    want[r, 0] = 2.5
    np.testing.assert_array_equal(out[1], want)


VIEW_IR = ir_kernel(
    """
    a: pl.Tile[[16, 64], pl.FP32, pl.Mem.Vec] = pl.tile.load(x, [0, 0], [16, 64], target_memory=pl.Mem.Vec)
    b: pl.Tile[[64, 16], pl.FP32, pl.Mem.Vec] = pl.tile.reshape(a, [64, 16])
    c: pl.Tile[[64, 16], pl.FP32, pl.Mem.Vec] = pl.tile.adds(b, 1.0)
    s = pl.tile.slice(c, [8, 8], [4, 8])
    d = pl.tile.slice(c, [8, 16], [16, 0], valid_shape=[n, 16])
    e: pl.Tile[[8, 8], pl.FP32, pl.Mem.Vec] = pl.tile.muls(s, 2.0)
    f = pl.tile.muls(d, 3.0)
    g = pl.tile.set_validshape(c, n, 8)
    y_1 = pl.tile.store(e, [0, 0], y)
    z_1 = pl.tile.store(f, [0, 0], z)
    w_1 = pl.tile.store(g, [0, 0], w)
    return y_1, z_1, w_1
    """,
    "x: pl.Tensor[[16, 64], pl.FP32], n: pl.Scalar[pl.INDEX], y: pl.Out[pl.Tensor[[8, 8], pl.FP32]], "
    "z: pl.Out[pl.Tensor[[8, 16], pl.FP32]], w: pl.Out[pl.Tensor[[64, 16], pl.FP32]]",
    "tuple[pl.Tensor[[8, 8], pl.FP32], pl.Tensor[[8, 16], pl.FP32], pl.Tensor[[64, 16], pl.FP32]]")


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("n", [8, 3])
def test_reshape_slice_and_set_validshape_views(level, n):
    x = np.random.default_rng(22).standard_normal((16, 64)).astype(np.float32)
    y0, z0, w0 = np.full((8, 8), 7, np.float32), np.full((8, 16), 7, np.float32), np.full((64, 16), 7, np.float32)
    out = run_pto_logical(compile_ir(VIEW_IR, level), "k", {0: (x, "ND"), 1: (y0, "ND"), 2: (z0, "ND"), 3: (w0, "ND")},
                          scalars=[n])
    c = x.reshape(64, 16) + np.float32(1)  # row-major reshape of the same bytes
    np.testing.assert_array_equal(out[1], c[4:12, 8:16] * np.float32(2))
    z = z0.copy()
    z[:n] = c[16:16 + n] * np.float32(3)  # only the dynamic valid rows are stored
    np.testing.assert_array_equal(out[2], z)
    w = w0.copy()
    w[:n, :8] = c[:n, :8]
    np.testing.assert_array_equal(out[3], w)


EXTRACT_IR = ir_kernel(
    """
    am: pl.Tile[[32, 64], pl.FP16, pl.Mem.Mat] = pl.tile.load(a, [0, 0], [32, 64], target_memory=pl.Mem.Mat)
    bm: pl.Tile[[64, 32], pl.FP16, pl.Mem.Mat] = pl.tile.load(b, [0, 0], [64, 32], target_memory=pl.Mem.Mat)
    al: pl.Tile[[32, 32], pl.FP16, pl.Mem.Left, pl.TileView(blayout=pl.TileLayout.row_major)] = pl.tile.extract(am, 0, 32, [32, 32], target_memory=pl.Mem.Left)
    br: pl.Tile[[32, 16], pl.FP16, pl.Mem.Right] = pl.tile.extract(bm, 32, 16, [32, 16], target_memory=pl.Mem.Right)
    acc: pl.Tile[[32, 16], pl.FP32, pl.Mem.Acc] = pl.tile.matmul(al, br)
    c_1: pl.Tensor[[32, 16], pl.FP32] = pl.tile.store(acc, [0, 0], c)
    return c_1
    """,
    "a: pl.Tensor[[32, 64], pl.FP16], b: pl.Tensor[[64, 32], pl.FP16], c: pl.Out[pl.Tensor[[32, 16], pl.FP32]]",
    "pl.Tensor[[32, 16], pl.FP32]")


@pytest.mark.parametrize("level", LEVELS)
def test_extract_into_left_and_right_windows(level):
    rng = np.random.default_rng(23)
    a = rng.standard_normal((32, 64)).astype(np.float16)
    b = rng.standard_normal((64, 32)).astype(np.float16)
    out = run_pto_logical(compile_ir(EXTRACT_IR, level), "k",
                          {0: (a, "ND"), 1: (b, "ND"), 2: (np.zeros((32, 16), np.float32), "ND")})
    want = a[:, 32:].astype(np.float64) @ b[32:, 16:].astype(np.float64)
    np.testing.assert_allclose(out[2], want, rtol=1e-5, atol=1e-4)


REINTERPRET_IR = ir_kernel(
    """
    a: pl.Tile[[16, 64], pl.FP32, pl.Mem.Vec] = pl.tile.load(x, [0, 0], [16, 64], target_memory=pl.Mem.Vec)
    r = pl.tile.reinterpret_view(a, pl.INT32)
    q = pl.tile.ands(r, 2147483647)
    y_1 = pl.tile.store(q, [0, 0], y)
    return y_1
    """,
    "x: pl.Tensor[[16, 64], pl.FP32], y: pl.Out[pl.Tensor[[16, 64], pl.INT32]]", "pl.Tensor[[16, 64], pl.INT32]")


@pytest.mark.parametrize("level", LEVELS)
def test_reinterpret_view_is_a_treshape_of_the_same_bits(level):
    text = compile_ir(REINTERPRET_IR, level)
    assert "%r = pto.treshape %a : " in text
    x = np.random.default_rng(24).standard_normal((16, 64)).astype(np.float32)
    out = run_pto_logical(text, "k", {0: (x, "ND"), 1: (np.zeros((16, 64), np.int32), "ND")})
    np.testing.assert_array_equal(out[1], np.abs(x).view(np.int32))  # sign bit cleared
