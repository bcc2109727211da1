"""Elementwise arithmetic, unary math and casts: OP-1, OP-3, OP-6."""

from optest import codes, diagnostics, types

T64 = "a: pl.Tensor[[64, 64], pl.FP32], b: pl.Tensor[[64, 64], pl.FP32]"


def test_op1_tensor_add_same_shape():
    assert types(T64, "c = pl.tensor.add(a, b)")["c"] == "pl.Tensor[[64, 64], pl.FP32]"


def test_op1_tensor_add_broadcasts_trailing_axes():
    t = types("a: pl.Tensor[[4, 64, 32], pl.FP16], b: pl.Tensor[[64, 1], pl.FP16]", "c = pl.tensor.mul(a, b)")
    assert t["c"] == "pl.Tensor[[4, 64, 32], pl.FP16]"


def test_op1_tensor_sub_broadcast_mismatch_rejected():
    d = diagnostics("a: pl.Tensor[[64, 32], pl.FP32], b: pl.Tensor[[64, 16], pl.FP32]", "c = pl.tensor.sub(a, b)")
    assert [x.code for x in d] == ["PTOC-E0202"] and d[0].rule == "OP-1"
    assert "do not broadcast" in d[0].message


def test_op1_tensor_div_dtype_mismatch_rejected():
    d = diagnostics("a: pl.Tensor[[8, 8], pl.FP32], b: pl.Tensor[[8, 8], pl.FP16]", "c = pl.tensor.div(a, b)")
    assert d[0].code == "PTOC-E0202" and "dtypes differ" in d[0].message


def test_op1_maximum_with_scalar_rhs_dispatches_to_scalar_form():
    t = types("a: pl.Tensor[[8, 8], pl.FP32], s: pl.Scalar[pl.FP32]", "c = pl.tensor.maximum(a, s)\nd = pl.minimum(a, 0.0)")
    assert t["c"] == "pl.Tensor[[8, 8], pl.FP32]" and t["d"] == "pl.Tensor[[8, 8], pl.FP32]"


def test_short_name_add_resolves_by_argument_kind():
    t = types(T64, "c = pl.add(a, b)\nt = pl.load(a, [0, 0], [16, 64])\nu = pl.add(t, t)\nv = pl.add(t, 2.0)")
    assert t["c"].startswith("pl.Tensor[") and t["u"] == "pl.Tile[[16, 64], pl.FP32, pl.Mem.Vec]"
    assert t["v"] == "pl.Tile[[16, 64], pl.FP32, pl.Mem.Vec]"


def test_op3_tensor_scalar_keeps_valid_shape_drops_layout():
    t = types("a: pl.Tensor[[16, 16], pl.FP32, pl.TensorView(valid_shape=[8, 16], layout=pl.TensorLayout.DN)]",
              "c = pl.tensor.adds(a, 1.0)")
    assert t["c"] == "pl.Tensor[[16, 16], pl.FP32, pl.TensorView(valid_shape=[8, 16])]"


def test_op3_tensor_tensor_equal_regions_kept():
    p = ("a: pl.Tensor[[16, 16], pl.FP32, pl.TensorView(valid_shape=[8, 16])], "
         "b: pl.Tensor[[16, 16], pl.FP32, pl.TensorView(valid_shape=[8, 16])]")
    assert types(p, "c = pl.tensor.add(a, b)")["c"] == "pl.Tensor[[16, 16], pl.FP32, pl.TensorView(valid_shape=[8, 16])]"


def test_op3_tensor_tensor_different_regions_dropped():
    p = ("a: pl.Tensor[[16, 16], pl.FP32, pl.TensorView(valid_shape=[8, 16])], "
         "b: pl.Tensor[[16, 16], pl.FP32, pl.TensorView(valid_shape=[4, 16])]")
    assert types(p, "c = pl.tensor.add(a, b)")["c"] == "pl.Tensor[[16, 16], pl.FP32]"


def test_op3_broadcast_drops_region():
    p = "a: pl.Tensor[[16, 16], pl.FP32, pl.TensorView(valid_shape=[8, 16])], b: pl.Tensor[[1, 16], pl.FP32]"
    assert types(p, "c = pl.tensor.add(a, b)")["c"] == "pl.Tensor[[16, 16], pl.FP32]"


def test_op6_adds_integer_literal_takes_tile_dtype():
    t = types("a: pl.Tensor[[16, 16], pl.INT32]", "t = pl.load(a, [0, 0], [16, 16])\nu = pl.tile.adds(t, 3)")
    assert t["u"] == "pl.Tile[[16, 16], pl.INT32, pl.Mem.Vec]"


def test_op6_non_constant_index_scalar_rejected_with_cast_hint():
    d = diagnostics("a: pl.Tensor[[16, 16], pl.FP16], n: pl.Scalar[pl.INDEX]",
                    "t = pl.load(a, [0, 0], [16, 16])\nu = pl.tile.muls(t, n)")
    assert (d[0].code, d[0].rule) == ("PTOC-E0202", "OP-6")
    assert "pl.cast(x, pl.FP16)" in d[0].hint


def test_op6_non_index_scalar_accepted():
    assert codes("a: pl.Tensor[[16, 16], pl.FP16], s: pl.Scalar[pl.FP16]",
                 "t = pl.load(a, [0, 0], [16, 16])\nu = pl.tile.subs(t, s)") == []


def test_tile_divs_rejects_tile_rhs():
    d = diagnostics(T64, "t = pl.load(a, [0, 0], [16, 64])\nu = pl.tile.divs(t, t)")
    assert d[0].code == "PTOC-E0202" and "must be a scalar" in d[0].message


def test_unary_exp_keeps_type():
    t = types(T64, "t = pl.load(a, [0, 0], [16, 64])\nu = pl.tile.exp(t)\nv = pl.tensor.sqrt(a)\nw = pl.tile.relu(t)")
    assert t["u"] == "pl.Tile[[16, 64], pl.FP32, pl.Mem.Vec]" and t["v"] == "pl.Tensor[[64, 64], pl.FP32]"
    assert t["w"] == t["u"]


def test_unary_float_only_ops_reject_integers():
    for op in ("exp", "sqrt", "rsqrt", "recip", "log"):
        d = diagnostics("a: pl.Tensor[[8, 8], pl.INT32]", f"c = pl.tensor.{op}(a)")
        assert d and d[0].code == "PTOC-E0202" and "floating-point" in d[0].message, op


def test_neg_and_abs_accept_integers():
    t = types("a: pl.Tensor[[8, 8], pl.INT16]", "c = pl.tensor.neg(a)\nd = pl.abs(a)")
    assert t["c"] == "pl.Tensor[[8, 8], pl.INT16]" and t["d"] == "pl.Tensor[[8, 8], pl.INT16]"


def test_cast_changes_dtype_and_keeps_shape():
    t = types(T64, "t = pl.load(a, [0, 0], [16, 64])\nu = pl.tile.cast(t, target_type=pl.BF16, mode='round')"
              "\nv = pl.cast(a, pl.FP16)")
    assert t["u"] == "pl.Tile[[16, 64], pl.BF16, pl.Mem.Vec]" and t["v"] == "pl.Tensor[[64, 64], pl.FP16]"


def test_cast_unknown_rounding_mode_rejected():
    d = diagnostics(T64, "v = pl.tensor.cast(a, pl.FP16, mode='sideways')")
    assert d[0].code == "PTOC-E0201" and "rounding mode" in d[0].message


def test_scalar_cast_of_untyped_value():
    t = types("n: pl.Scalar[pl.INDEX]", "m = n * 2\nk = pl.cast(m, pl.INT32)")
    assert t["k"] == "pl.Scalar[pl.INT32]"


def test_unknown_op_names_closest():
    d = diagnostics(T64, "c = pl.tensor.ad(a, b)")
    assert d[0].code == "PTOC-E0200" and "pl.tensor.add" in d[0].hint


def test_wrong_argument_count_reports_signature():
    d = diagnostics(T64, "c = pl.tensor.add(a)")
    assert d[0].code == "PTOC-E0201" and "rhs" in d[0].message and "pl.tensor.add(lhs, rhs)" in d[0].hint


def test_unknown_keyword_rejected():
    d = diagnostics(T64, "c = pl.tensor.add(a, b, alpha=2)")
    assert d[0].code == "PTOC-E0201" and "alpha" in d[0].message


import pytest  # noqa: E402

TILE_P = "a: pl.Tensor[[16, 32], pl.FP32], b: pl.Tensor[[16, 32], pl.FP32]"
LOADS = "t = pl.load(a, [0, 0], [16, 32])\nu = pl.load(b, [0, 0], [16, 32])\n"
TILE_T = "pl.Tile[[16, 32], pl.FP32, pl.Mem.Vec]"


@pytest.mark.parametrize("op", ["tile.add", "tile.sub", "tile.mul", "tile.div", "tile.maximum", "tile.minimum"])
def test_op1_tile_tile_arithmetic_result_type(op):
    assert types(TILE_P, LOADS + f"r = pl.{op}(t, u)")["r"] == TILE_T


@pytest.mark.parametrize("op", ["tile.adds", "tile.subs", "tile.muls", "tile.divs", "tile.maximums",
                                "tile.minimums", "tensor.subs", "tensor.muls", "tensor.divs", "tensor.maximums",
                                "tensor.minimums"])
def test_op6_scalar_forms_result_type(op):
    t = types(TILE_P, LOADS + f"r = pl.{op}({'t' if op.startswith('tile') else 'a'}, 2.0)")
    assert t["r"] == (TILE_T if op.startswith("tile") else "pl.Tensor[[16, 32], pl.FP32]")


@pytest.mark.parametrize("op", ["tile.adds", "tensor.minimums"])
def test_op6_scalar_forms_reject_index_variable(op):
    d = diagnostics(TILE_P + ", n: pl.Scalar[pl.INDEX]", LOADS + f"r = pl.{op}({'t' if op.startswith('tile') else 'a'}, n)")
    assert (d[0].code, d[0].rule) == ("PTOC-E0202", "OP-6")


def test_op1_tensor_minimum_tensor_form():
    assert types(TILE_P, "r = pl.tensor.minimum(a, b)")["r"] == "pl.Tensor[[16, 32], pl.FP32]"


@pytest.mark.parametrize("op", ["tile.neg", "tile.abs", "tensor.abs"])
def test_sign_ops_result_type(op):
    t = types(TILE_P, LOADS + f"r = pl.{op}({'t' if op.startswith('tile') else 'a'})")
    assert t["r"] == (TILE_T if op.startswith("tile") else "pl.Tensor[[16, 32], pl.FP32]")


def test_sign_ops_reject_bool():
    assert codes("a: pl.Tensor[[16, 32], pl.BOOL]", "r = pl.tensor.abs(a)") == [("PTOC-E0202", None)]


@pytest.mark.parametrize("name", [
    "tile.row_expand_add", "tile.row_expand_sub", "tile.row_expand_mul", "tile.row_expand_div",
    "tile.row_expand_max", "tile.row_expand_min", "tile.col_expand_add", "tile.col_expand_sub",
    "tile.col_expand_mul", "tile.col_expand_div", "tile.col_expand_max", "tile.col_expand_min"])
def test_expand_ops_broadcast_a_row_or_column_vector(name):
    vec = "[16, 1]" if ".row_" in name else "[1, 32]"
    body = LOADS + f"v = pl.tile.create({vec}, dtype=pl.FP32)\nr = pl.{name}(t, v)"
    assert types(TILE_P, body)["r"] == TILE_T


@pytest.mark.parametrize("name", ["tile.row_expand_sub", "tile.col_expand_mul"])
def test_expand_ops_reject_wrong_vector_shape(name):
    body = LOADS + f"v = pl.tile.create([16, 32], dtype=pl.FP32)\nr = pl.{name}(t, v)"
    assert codes(TILE_P, body) == [("PTOC-E0202", None)]


def test_sel_result_type_and_shape_check():
    body = LOADS + "m = pl.tile.create([16, 32], dtype=pl.UINT8)\nr = pl.tile.sel(m, t, u)"
    assert types(TILE_P, body)["r"] == TILE_T
    bad = LOADS + "m = pl.tile.create([8, 32], dtype=pl.UINT8)\nr = pl.tile.sel(m, t, u)"
    assert codes(TILE_P, bad) == [("PTOC-E0202", None)]


def test_tile_not_int16_and_rejects_float():
    p = "a: pl.Tensor[[16, 16], pl.INT16]"
    assert types(p, "t = pl.load(a, [0, 0], [16, 16])\nr = pl.tile.not_(t)")["r"] == "pl.Tile[[16, 16], pl.INT16, pl.Mem.Vec]"
    assert codes(TILE_P, LOADS + "r = pl.tile.not_(t)") == [("PTOC-E0202", "OP-2")]


def test_scalar_cast_rejects_tile_operand_by_name():
    d = diagnostics(TILE_P, LOADS + 'r = pl.scalar.cast(t, pl.INT32)')
    assert d[0].code == "PTOC-E0202" and "must be a scalar" in d[0].message


MX = ("a: pl.Tile[[64, 128], pl.FP4E2M1X2, pl.Mem.Left], asc: pl.Tile[[64, 8], pl.FP8E8M0, pl.Mem.LeftScale], "
      "b: pl.Tile[[256, 64], pl.FP4E2M1X2, pl.Mem.Right], bsc: pl.Tile[[8, 128], pl.FP8E8M0, pl.Mem.RightScale]")


def test_matmul_mx_fp4_result_is_fp32_acc_m_by_n_values():
    t = types(MX, "r = pl.tile.matmul_mx(a, asc, b, bsc)", arch="a5")
    assert t["r"] == "pl.Tile[[64, 128], pl.FP32, pl.Mem.Acc]"


def test_matmul_mx_rejected_on_a2a3():
    d = diagnostics(MX, "r = pl.tile.matmul_mx(a, asc, b, bsc)", arch="a2a3")
    assert any(x.code == "PTOC-E0203" for x in d)


def test_matmul_mx_scale_shape_checked():
    bad = MX.replace("[64, 8], pl.FP8E8M0", "[64, 4], pl.FP8E8M0")
    d = diagnostics(bad, "r = pl.tile.matmul_mx(a, asc, b, bsc)", arch="a5")
    assert d[0].code == "PTOC-E0202" and "lhs_scale must be [64, 8]" in d[0].message


# tile.matmul_mx_acc (PyPTO tile_ops.matmul_mx_acc(acc, lhs, lhs_scale, rhs, rhs_scale)): the MX product of
# MX above is [64, 128] FP32, added into an accumulator of that shape in Acc
MX_ACC = MX + ", c: pl.Tile[[64, 128], pl.FP32, pl.Mem.Acc]"


def test_matmul_mx_acc_result_is_the_accumulator_type():
    t = types(MX_ACC, "r = pl.matmul_mx_acc(c, a, asc, b, bsc)", arch="a5")
    assert t["r"] == "pl.Tile[[64, 128], pl.FP32, pl.Mem.Acc]"


def test_matmul_mx_acc_accumulator_must_match_the_product():
    bad = MX_ACC.replace("c: pl.Tile[[64, 128], pl.FP32", "c: pl.Tile[[64, 64], pl.FP32")
    d = diagnostics(bad, "r = pl.tile.matmul_mx_acc(c, a, asc, b, bsc)", arch="a5")
    assert d[0].code == "PTOC-E0202" and "the accumulator is [64, 64] but the product is [64, 128]" in d[0].message
    bf = MX_ACC.replace("c: pl.Tile[[64, 128], pl.FP32", "c: pl.Tile[[64, 128], pl.BF16")
    d = diagnostics(bf, "r = pl.tile.matmul_mx_acc(c, a, asc, b, bsc)", arch="a5")
    assert d[0].code == "PTOC-E0202" and "accumulates in FP32" in d[0].message


def test_matmul_mx_acc_rejected_on_a2a3():
    d = diagnostics(MX_ACC, "r = pl.tile.matmul_mx_acc(c, a, asc, b, bsc)", arch="a2a3")
    assert any(x.code == "PTOC-E0203" for x in d)


# pto-isa's a2a3 TAdd / TExp / TRowReduceOps static_asserts (and PTOAS: "expects A2/A3 tadd element type to
# be i32/i16/f16/f32") leave BF16 out; a5's TAdd lists bfloat16_t.
BF16_TILE = "t: pl.Tile[[16, 64], pl.BF16, pl.Mem.Vec]"


@pytest.mark.parametrize("stmt", ["s = pl.tile.add(t, t)", "s = pl.tile.muls(t, 2.0)", "s = pl.tile.exp(t)",
                                  "s = pl.tile.row_sum(t, tmp)"])
def test_bf16_vector_compute_rejected_on_a2a3(stmt):
    params = BF16_TILE + ", tmp: pl.Tile[[16, 64], pl.BF16, pl.Mem.Vec]"
    d = diagnostics(params, stmt, arch="a2a3")
    assert [x.code for x in d] == ["PTOC-E0671"]
    assert "BF16" in d[0].message and "pl.FP32" in d[0].hint
    assert codes(params, stmt, arch="a5") == []


def test_bf16_tiles_still_cast_on_a2a3_and_fp16_still_adds():
    assert codes(BF16_TILE, "f = pl.tile.cast(t, target_type=pl.FP32)", arch="a2a3") == []
    assert codes("t: pl.Tile[[16, 64], pl.FP16, pl.Mem.Vec]", "s = pl.tile.add(t, t)", arch="a2a3") == []
