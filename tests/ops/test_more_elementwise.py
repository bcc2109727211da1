"""PyPTO's further elementwise ops: sin/cos, cmp/cmps (packed predicate masks), rem/rems, fmod/fmods,
addc/subc/addsc/subsc, prelu. Expected types are worked out by hand from PyPTO's definitions
(src/ir/op/tile_ops/elementwise.cpp, unary.cpp; python/pypto/language/op/unified_ops.py); numbers
for the interpreter come from numpy applied to the definition."""

import numpy as np
import pytest
from optest import codes, diagnostics, types

V = "pl.Tile[[16, 64], pl.FP32, pl.Mem.Vec]"
X = "x: pl.Tensor[[16, 64], pl.FP32], y: pl.Tensor[[16, 64], pl.FP32], z: pl.Tensor[[16, 64], pl.FP32], s: pl.Scalar[pl.FP32]"
LOADS = ("a = pl.tile.load(x, [0, 0], [16, 64])\nb = pl.tile.load(y, [0, 0], [16, 64])\n"
         "c = pl.tile.load(z, [0, 0], [16, 64])\n")


@pytest.mark.parametrize("op", ["sin", "cos"])
def test_trig_keeps_the_operand_type(op):
    assert types(X, LOADS + f"r = pl.{op}(a)\nq = pl.tile.{op}(a)")["r"] == V
    assert types(X, f"t = pl.{op}(x)")["t"] == "pl.Tensor[[16, 64], pl.FP32]"


def test_trig_needs_a_float_operand():
    d = diagnostics("x: pl.Tensor[[16, 64], pl.INT32]", "a = pl.tile.load(x, [0, 0], [16, 64])\nr = pl.tile.sin(a)")
    assert d[0].code == "PTOC-E0202" and "floating-point" in d[0].message


def test_cmp_gives_a_packed_uint8_mask():
    # 64 columns -> ceil(64 / 8) = 8 bytes, rounded up to 32; valid columns 8
    t = types(X, LOADS + "m = pl.cmp(a, b, cmp_type=2)\nn = pl.cmp(a, 0.5, cmp_type=4)\no = pl.tile.cmps(a, s)")
    want = "pl.Tile[[16, 32], pl.UINT8, pl.Mem.Vec, pl.TileView(valid_shape=[16, 8])]"
    assert t["m"] == t["n"] == t["o"] == want


def test_cmp_mask_of_a_narrow_valid_region():
    # [8, 300] box valid on [8, 257]: ceil(300 / 8) = 38 -> 64 bytes; valid ceil(257 / 8) = 33
    t = types("x: pl.Tensor[[8, 300], pl.FP16]",
              "a = pl.tile.load(x, [0, 0], [8, 300], [8, 257])\nm = pl.tile.cmps(a, 0.0, cmp_type=0)")
    assert t["m"] == "pl.Tile[[8, 64], pl.UINT8, pl.Mem.Vec, pl.TileView(valid_shape=[8, 33])]"


def test_cmp_type_out_of_range_and_tensor_form():
    assert codes(X, LOADS + "m = pl.tile.cmp(a, b, cmp_type=6)") == [("PTOC-E0202", None)]
    assert types(X, "t = pl.cmp(x, y, cmp_type=1)")["t"] == "pl.Tensor[[16, 64], pl.FP32]"


def test_cmps_rejects_a_tile_rhs():
    assert codes(X, LOADS + "m = pl.tile.cmps(a, b)") == [("PTOC-E0202", None)]


@pytest.mark.parametrize("call", ["pl.rem(a, b, c)", "pl.tile.rem(a, b, c)", "pl.rems(a, s, c)", "pl.fmod(a, b)",
                                  "pl.fmods(a, 2.0)", "pl.addc(a, b, c)", "pl.subc(a, b, c)", "pl.addsc(a, s, c)",
                                  "pl.subsc(a, 1.0, c)"])
def test_three_operand_and_remainder_forms_keep_the_tile_type(call):
    assert types(X, LOADS + f"r = {call}")["r"] == V


@pytest.mark.parametrize("call", ["pl.tile.rems(a, s, c)", "pl.tile.fmod(a, b)", "pl.tile.fmods(a, s)",
                                  "pl.tile.subc(a, b, c)", "pl.tile.subsc(a, s, c)", "pl.tile.addsc(a, s, c)"])
def test_full_names(call):
    assert types(X, LOADS + f"r = {call}")["r"] == V
    assert types(X, "t = pl.tensor.cmp(x, s, cmp_type=0)")["t"] == "pl.Tensor[[16, 64], pl.FP32]"


def test_rem_dtypes_and_mixed_operands():
    # TREM: INT16, INT32, FP16, FP32 only
    assert codes("x: pl.Tensor[[16, 64], pl.INT8]",
                 "a = pl.tile.load(x, [0, 0], [16, 64])\nr = pl.tile.rem(a, a, a)") == [("PTOC-E0202", None)]
    assert codes(X + ", w: pl.Tensor[[16, 64], pl.FP16]", LOADS + "d = pl.tile.load(w, [0, 0], [16, 64])\n"
                 "r = pl.tile.addc(a, b, d)") == [("PTOC-E0202", None)]
    assert codes(X, LOADS + "r = pl.tile.addsc(a, b, c)") == [("PTOC-E0202", None)]


def test_prelu_takes_a_slope_tile_of_the_same_shape():
    assert types(X, LOADS + "r = pl.prelu(a, b, c)")["r"] == V
    # the scratch tile is raw bytes: any dtype, 2-D
    assert types(X, LOADS + "u = pl.tile.create([16, 256], dtype=pl.UINT8)\nr = pl.prelu(a, b, u)")["r"] == V
    assert codes(X + ", w: pl.Tensor[[4, 16, 64], pl.FP32]", LOADS + "d = pl.tile.load(w, [0, 0, 0], [4, 16, 64])\n"
                 "r = pl.tile.prelu(a, b, d)") == [("PTOC-E0202", None)]
    assert codes(X + ", w: pl.Tensor[[16, 32], pl.FP32]",
                 LOADS + "d = pl.tile.load(w, [0, 0], [16, 32])\nr = pl.tile.prelu(a, d, c)") == [("PTOC-E0202", None)]
    assert codes("x: pl.Tensor[[16, 64], pl.INT32]",
                 "a = pl.tile.load(x, [0, 0], [16, 64])\nr = pl.tile.prelu(a, a, a)") == [("PTOC-E0202", None)]


@pytest.mark.parametrize("op", ["tile.sin", "tile.cmp", "tile.rem", "tile.prelu", "tile.addc"])
def test_codegen_says_not_supported_yet(op, tmp_path):
    from ptoc.ops.registry import NoPto, lookup

    form = lookup(op).pto
    assert isinstance(form, NoPto) and "no lowering" in form.hint


def test_interpreter_sin_cos_fmods_match_numpy():
    from ptoc.ops.registry import lookup

    x = np.linspace(-3.0, 3.0, 12)
    assert np.allclose(lookup("tile.sin").interp.fn(np, x), np.sin(x))
    assert np.allclose(lookup("tile.cos").interp.fn(np, x), np.cos(x))
    # C fmod keeps the dividend's sign: fmod(-7, 3) = -1 (Python's % would give 2)
    assert lookup("tile.fmods").interp.fn(np, np.array([-7.0, 7.0, 5.5]), 3.0).tolist() == [-1.0, 1.0, 2.5]


def test_rsqrt_and_sel_take_pyptos_scratch_tile():
    # PyPTO: tile.rsqrt(tile, tmp=None) (a scratch tile for the high-precision path); tile.sel(mask, lhs, rhs,
    # tmp) (TSEL's scratch)
    body = LOADS + ("u = pl.tile.create([1, 32], dtype=pl.UINT8)\nr = pl.tile.rsqrt(a, tmp=b)\n"
                    "q = pl.tile.sel(c, a, b, u)")
    t = types(X, body)
    assert t["r"] == t["q"] == V
