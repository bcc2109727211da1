"""Packed FP4 types, conversions and MX quantization: FP4-1..FP4-5, OP-6."""

import pytest
from optest import diagnostics, types

from ptoc.ir import dtypes

A5 = "a5"
VEC = "pl.Mem.Vec"


def _rules(params, body, arch=A5):
    return [(d.code, d.rule) for d in diagnostics(params, body, arch)]


# ------------------------------------------------------------------ FP4-1 carriers


@pytest.mark.parametrize("name,alias,pto", [("FP4E2M1X2", "fp4e2m1x2", "!pto.f4E2M1x2"),
                                            ("FP4E1M2X2", "fp4e1m2x2", "!pto.f4E1M2x2")])
def test_fp4_1_one_byte_carries_two_values(name, alias, pto):
    dt = dtypes.BY_NAME[name]
    assert dtypes.BY_NAME[alias] is dt and dt.pto == pto
    assert (dt.bits, dt.bytes, dt.packed_values) == (8, 1, 2)


def test_fp4_1_2x256_carriers_are_512_bytes_and_1024_values():
    dt = dtypes.FP4E2M1X2
    carriers = 2 * 256
    assert carriers * dt.bytes == 512 and carriers * dt.packed_values == 1024


def test_fp4_1_shapes_count_carriers():
    t = types("a: pl.Tensor[[2, 256], pl.FP4E2M1X2]", "x = pl.tile.load(a, [0, 0], [2, 256])", arch=A5)
    assert t["x"] == f"pl.Tile[[2, 256], pl.FP4E2M1X2, {VEC}]"


def test_fp4_1_old_fp4_name_rejected_with_hint():
    d = diagnostics("a: pl.Tensor[[2, 256], pl.FP4]", "pass")
    assert d[0].rule == "FP4-1" and "FP4E2M1X2" in d[0].hint


# ------------------------------------------------------------------ FP4-3 Ascend950 only


def test_fp4_3_tile_create_packed_on_a2a3_rejected():
    d = diagnostics("", "t = pl.tile.create([32, 64], dtype=pl.FP4E2M1X2)", arch="a2a3")
    assert [(x.code, x.rule) for x in d] == [("PTOC-E0203", "FP4-3")]
    assert "--arch a5" in d[0].hint


def test_fp4_3_tile_create_packed_on_a5_accepted():
    t = types("", "t = pl.tile.create([32, 64], dtype=pl.FP4E2M1X2)\nu = pl.tile.create([32, 64], dtype=pl.FP4E1M2X2)",
              arch=A5)
    assert t == {"t": f"pl.Tile[[32, 64], pl.FP4E2M1X2, {VEC}]", "u": f"pl.Tile[[32, 64], pl.FP4E1M2X2, {VEC}]"}


def test_fp4_3_decode_on_a2a3_rejected():
    body = "x = pl.tile.load(a, [0, 0], [32, 64])\ny = pl.tile.cast(x, target_type=pl.BF16)"
    assert ("PTOC-E0203", "FP4-3") in _rules("a: pl.Tensor[[32, 64], pl.FP4E2M1X2]", body, arch="a2a3")


# ------------------------------------------------------------------ FP4-4 conversions


def test_fp4_4_bf16_m_2k_encodes_to_m_k_carriers_and_back():
    body = ("x = pl.tile.load(a, [0, 0], [32, 128])\np = pl.tile.cast(x, target_type=pl.FP4E2M1X2, mode='rint')\n"
            "b = pl.tile.cast(p, target_type=pl.BF16)")
    t = types("a: pl.Tensor[[32, 128], pl.BF16]", body, arch=A5)
    assert t["p"] == f"pl.Tile[[32, 64], pl.FP4E2M1X2, {VEC}]" and t["b"] == f"pl.Tile[[32, 128], pl.BF16, {VEC}]"


def test_fp4_4_seed_decode_example_32x256_carriers_to_32x512_bf16():
    body = "payload = pl.tile.load(packed, [0, 0], [32, 256])\ndecoded = pl.cast(payload, pl.BF16)"
    t = types("packed: pl.Tensor[[32, 256], pl.fp4e2m1x2]", body, arch=A5)
    assert t["decoded"] == f"pl.Tile[[32, 512], pl.BF16, {VEC}]"


def test_fp4_4_tensor_cast_halves_and_doubles_the_last_axis():
    p = "w: pl.Tensor[[4, 8, 64], pl.BF16], q: pl.Tensor[[16, 16], pl.FP4E1M2X2]"
    t = types(p, "a = pl.tensor.cast(w, target_type=pl.FP4E1M2X2)\nb = pl.tensor.cast(q, target_type=pl.BF16)", arch=A5)
    assert t == {"a": "pl.Tensor[[4, 8, 32], pl.FP4E1M2X2]", "b": "pl.Tensor[[16, 32], pl.BF16]"}


def test_fp4_4_valid_shape_follows_the_packed_axis():
    p = "w: pl.Tensor[[8, 64], pl.BF16, pl.TensorView(valid_shape=[5, 40])]"
    t = types(p, "a = pl.tensor.cast(w, target_type=pl.FP4E2M1X2)", arch=A5)
    assert t["a"] == "pl.Tensor[[8, 32], pl.FP4E2M1X2, pl.TensorView(valid_shape=[5, 20])]"


def test_fp4_4_packing_odd_value_count_rejected():
    d = diagnostics("w: pl.Tensor[[8, 63], pl.BF16]", "a = pl.tensor.cast(w, target_type=pl.FP4E2M1X2)", A5)
    assert [(x.code, x.rule) for x in d] == [("PTOC-E0202", "FP4-4")] and "pairs" in d[0].message


def test_fp4_4_packing_odd_valid_extent_rejected():
    p = "w: pl.Tensor[[8, 64], pl.BF16, pl.TensorView(valid_shape=[8, 33])]"
    assert _rules(p, "a = pl.tensor.cast(w, target_type=pl.FP4E2M1X2)") == [("PTOC-E0202", "FP4-4")]


def test_fp4_4_dynamic_extent_provably_even_accepted():
    p = "w: pl.Tensor[[8, n * 2], pl.BF16]"
    t = types(p, "a = pl.tensor.cast(w, target_type=pl.FP4E2M1X2)", arch=A5)
    assert t["a"] == "pl.Tensor[[8, n], pl.FP4E2M1X2]"


def test_fp4_4_dynamic_extent_not_provably_even_rejected():
    assert _rules("w: pl.Tensor[[8, n], pl.BF16]", "a = pl.tensor.cast(w, target_type=pl.FP4E2M1X2)") == [
        ("PTOC-E0202", "FP4-4")]


def test_fp4_4_decoding_needs_no_even_extent():
    t = types("q: pl.Tensor[[8, 7], pl.FP4E2M1X2]", "a = pl.tensor.cast(q, target_type=pl.BF16)", arch=A5)
    assert t["a"] == "pl.Tensor[[8, 14], pl.BF16]"


def test_fp4_4_dn_carriers_decode_to_2m_by_k():
    p = "q: pl.Tensor[[16, 64], pl.FP4E2M1X2, pl.TensorView(layout=pl.TensorLayout.DN)]"
    t = types(p, "a = pl.tensor.cast(q, target_type=pl.BF16)", arch=A5)
    assert t["a"] == "pl.Tensor[[32, 64], pl.BF16]"


def test_fp4_4_dn_bf16_encodes_along_rows():
    p = "w: pl.Tensor[[32, 64], pl.BF16, pl.TensorView(layout=pl.TensorLayout.DN)]"
    t = types(p, "a = pl.tensor.cast(w, target_type=pl.FP4E1M2X2)", arch=A5)
    assert t["a"] == "pl.Tensor[[16, 64], pl.FP4E1M2X2]"


def test_fp4_4_dn_tile_col_major_decodes_along_rows():
    p = "q: pl.Tile[[16, 64], pl.FP4E2M1X2, pl.Mem.Vec, pl.TileView(blayout=pl.TileLayout.col_major)]"
    t = types(p, "a = pl.tile.cast(q, target_type=pl.BF16)", arch=A5)
    assert t["a"] == f"pl.Tile[[32, 64], pl.BF16, {VEC}]"


def test_fp4_4_dn_partially_valid_rejected():
    p = "q: pl.Tensor[[16, 64], pl.FP4E2M1X2, pl.TensorView(valid_shape=[8, 64], layout=pl.TensorLayout.DN)]"
    d = diagnostics(p, "a = pl.tensor.cast(q, target_type=pl.BF16)", A5)
    assert d[0].rule == "FP4-4" and "partially valid" in d[0].message


def test_fp4_4_dn_dynamic_or_rank_3_rejected():
    assert _rules("q: pl.Tensor[[m, 64], pl.FP4E2M1X2, pl.TensorView(layout=pl.TensorLayout.DN)]",
                  "a = pl.tensor.cast(q, target_type=pl.BF16)") == [("PTOC-E0202", "FP4-4")]
    assert _rules("q: pl.Tensor[[2, 16, 64], pl.FP4E2M1X2, pl.TensorView(layout=pl.TensorLayout.DN)]",
                  "a = pl.tensor.cast(q, target_type=pl.BF16)") == [("PTOC-E0202", "FP4-4")]


def test_fp4_4_dn_to_non_bf16_rejected():
    p = "q: pl.Tensor[[16, 64], pl.FP4E2M1X2, pl.TensorView(layout=pl.TensorLayout.DN)]"
    assert _rules(p, "a = pl.tensor.cast(q, target_type=pl.FP32)") == [("PTOC-E0202", "FP4-4")]


def test_fp4_4_encoding_from_fp16_rejected_with_bf16_hint():
    d = diagnostics("w: pl.Tensor[[8, 64], pl.FP16]", "a = pl.tensor.cast(w, target_type=pl.FP4E2M1X2)", A5)
    assert d[0].rule == "FP4-4" and "pl.BF16" in d[0].hint


def test_fp4_4_encoding_rounding_mode_odd_rejected():
    d = diagnostics("w: pl.Tensor[[8, 64], pl.BF16]", "a = pl.tensor.cast(w, target_type=pl.FP4E2M1X2, mode='odd')", A5)
    assert d[0].rule == "FP4-4" and "odd" in d[0].message


def test_fp4_4_decoding_to_fp32_goes_through_bf16():
    t = types("q: pl.Tensor[[8, 32], pl.FP4E2M1X2]", "a = pl.tensor.cast(q, target_type=pl.FP32)", arch=A5)
    assert t["a"] == "pl.Tensor[[8, 64], pl.FP32]"


def test_fp4_4_decoding_to_int32_rejected():
    assert _rules("q: pl.Tensor[[8, 32], pl.FP4E2M1X2]", "a = pl.tensor.cast(q, target_type=pl.INT32)") == [
        ("PTOC-E0202", "FP4-4")]


def test_fp4_4_packed_conversion_in_mat_rejected():
    p = "q: pl.Tensor[[16, 64], pl.FP4E2M1X2]"
    body = "m = pl.tile.load(q, [0, 0], [16, 64], target_memory=pl.Mem.Mat)\na = pl.tile.cast(m, target_type=pl.BF16)"
    d = diagnostics(p, body, A5)
    assert d[0].rule == "FP4-4" and "none_box" in d[0].message


def test_fp4_2_an_annotation_never_converts_between_the_formats():
    load = "t: pl.Tile[[32, 64], {dt}, pl.Mem.Vec] = pl.tile.load(src, [0, 0], [32, 64])"
    params = "src: pl.Tensor[[32, 64], pl.FP4E1M2X2]"
    d = diagnostics(params, load.format(dt="pl.FP4E2M1X2"), A5)
    assert [x.code for x in d] == ["PTOC-E0105"]
    assert d[0].message.endswith("the value has dtype FP4E1M2X2, the annotation says FP4E2M1X2")
    assert diagnostics(params, load.format(dt="pl.FP4E1M2X2"), A5) == []  # the same format is accepted


def test_fp4_2_storing_one_format_into_the_other_is_rejected():
    body = "t = pl.tile.load(src, [0, 0], [32, 64])\no = pl.tile.store(t, [0, 0], dst)"
    d = diagnostics("src: pl.Tensor[[32, 64], pl.FP4E1M2X2], dst: pl.Tensor[[32, 64], pl.FP4E2M1X2]", body, A5)
    assert [x.code for x in d] == ["PTOC-E0202"] and "FP4E1M2X2" in d[0].message and "FP4E2M1X2" in d[0].message
    same = "src: pl.Tensor[[32, 64], pl.FP4E2M1X2], dst: pl.Tensor[[32, 64], pl.FP4E2M1X2]"
    assert diagnostics(same, body, A5) == []


def test_fp4_2_cast_between_formats_keeps_the_carrier_shape():
    # Seed 004: E2M1 <-> E1M2 converts numerically through BF16; the carrier shape is unchanged.
    body = "t = pl.tile.load(src, [0, 0], [32, 64])\nu = pl.tile.cast(t, target_type=pl.FP4E2M1X2, mode='rint')"
    t = types("src: pl.Tensor[[32, 64], pl.fp4e1m2x2]", body, arch=A5)
    assert t["u"] == f"pl.Tile[[32, 64], pl.FP4E2M1X2, {VEC}]"


def test_fp4_2_corpus_repack_through_bf16():
    body = ("t = pl.tile.load(src, [0, 0], [32, 64])\nwide = pl.tile.cast(t, target_type=pl.BF16, mode='none')\n"
            "packed = pl.tile.cast(wide, target_type=pl.FP4E2M1X2, mode='rint')")
    t = types("src: pl.Tensor[[32, 64], pl.fp4e1m2x2]", body, arch=A5)
    assert t["wide"] == f"pl.Tile[[32, 128], pl.BF16, {VEC}]"
    assert t["packed"] == f"pl.Tile[[32, 64], pl.FP4E2M1X2, {VEC}]"


def test_non_packed_casts_pass_through_unchanged():
    t = types("w: pl.Tensor[[8, 63], pl.FP16]", "a = pl.tensor.cast(w, target_type=pl.FP32)")
    assert t["a"] == "pl.Tensor[[8, 63], pl.FP32]"


# ------------------------------------------------------------------ FP4-5 quant_mx


def test_fp4_5_quant_mx_axis1_fp4():
    body = "xt = pl.tile.load(x, [0, 0], [64, 256])\nq = pl.tile.quant_mx(xt, axis=1, target_type=pl.FP4E2M1X2)"
    t = types("x: pl.Tensor[[64, 256], pl.BF16]", body, arch=A5)
    assert t["q"] == (f"pl.Tuple[pl.Tile[[64, 128], pl.FP4E2M1X2, {VEC}], "
                      f"pl.Tile[[64, 8], pl.FP8E8M0, {VEC}, pl.TileView(fractal=32)]]")


def test_fp4_5_quant_mx_axis0_fp4_transposes():
    body = "xt = pl.tile.load(x, [0, 0], [128, 64])\nq = pl.quant_mx(xt, axis=0, dtype=pl.fp4e2m1x2)"
    t = types("x: pl.Tensor[[128, 64], pl.FP16]", body, arch=A5)
    assert t["q"] == (f"pl.Tuple[pl.Tile[[64, 64], pl.FP4E2M1X2, {VEC}], "
                      f"pl.Tile[[2, 128], pl.FP8E8M0, {VEC}, pl.TileView(fractal=32)]]")


def test_fp4_5_tensor_quant_mx_fp8_keeps_k():
    t = types("x: pl.Tensor[[32, 128], pl.BF16]", "q = pl.tensor.quant_mx(x, axis=1, dtype=pl.FP8E4M3FN)", arch=A5)
    assert t["q"] == "pl.Tuple[pl.Tensor[[32, 128], pl.FP8E4M3FN], pl.Tensor[[32, 4], pl.FP8E8M0]]"


def test_fp4_5_quant_mx_default_is_mxfp8_and_tquant_mx_spelling():
    body = "xt = pl.tile.load(x, [0, 0], [32, 128])\nq = pl.tile.tquant_mx(xt, group_axis=0)"
    t = types("x: pl.Tensor[[32, 128], pl.BF16]", body, arch=A5)
    assert t["q"] == (f"pl.Tuple[pl.Tile[[128, 32], pl.FP8E4M3FN, {VEC}], "
                      f"pl.Tile[[4, 32], pl.FP8E8M0, {VEC}, pl.TileView(fractal=32)]]")


def test_fp4_5_k_not_multiple_of_64_rejected():
    d = diagnostics("x: pl.Tensor[[32, 96], pl.BF16]", "q = pl.tensor.quant_mx(x, axis=1, dtype=pl.FP4E2M1X2)", A5)
    assert d[0].rule == "FP4-5" and "64" in d[0].message


def test_fp4_5_axis1_m_not_multiple_of_16_rejected():
    assert _rules("x: pl.Tensor[[24, 128], pl.BF16]", "q = pl.tensor.quant_mx(x, axis=1, dtype=pl.FP4E2M1X2)") == [
        ("PTOC-E0202", "FP4-5")]


def test_fp4_5_fp4_axis0_n_not_multiple_of_64_rejected_fp8_accepted():
    assert _rules("x: pl.Tensor[[32, 128], pl.BF16]", "q = pl.tensor.quant_mx(x, axis=0, dtype=pl.FP4E2M1X2)") == [
        ("PTOC-E0202", "FP4-5")]
    assert _rules("x: pl.Tensor[[32, 128], pl.BF16]", "q = pl.tensor.quant_mx(x, axis=0, dtype=pl.FP8E4M3FN)") == []


def test_fp4_5_e1m2_quantization_rejected():
    d = diagnostics("x: pl.Tensor[[64, 128], pl.BF16]", "q = pl.tensor.quant_mx(x, axis=1, dtype=pl.FP4E1M2X2)", A5)
    assert d[0].rule == "FP4-5" and "E1M2" in d[0].message


def test_fp4_5_fp32_source_of_mxfp4_rejected():
    assert _rules("x: pl.Tensor[[64, 128], pl.FP32]", "q = pl.tensor.quant_mx(x, axis=1, dtype=pl.FP4E2M1X2)") == [
        ("PTOC-E0202", "FP4-5")]


def test_fp4_5_partially_valid_source_rejected():
    p = "x: pl.Tensor[[64, 128], pl.BF16, pl.TensorView(valid_shape=[60, 128])]"
    assert _rules(p, "q = pl.tensor.quant_mx(x, axis=1, dtype=pl.FP4E2M1X2)") == [("PTOC-E0202", "FP4-5")]


def test_op6_quant_mx_on_a2a3_rejected():
    d = diagnostics("x: pl.Tensor[[64, 128], pl.BF16]", "q = pl.tensor.quant_mx(x, axis=1)", "a2a3")
    assert [(x.code, x.rule) for x in d] == [("PTOC-E0202", "OP-6")] and "--arch a5" in d[0].hint


def test_fp4_5_bad_axis_rejected():
    assert _rules("x: pl.Tensor[[64, 128], pl.BF16]", "q = pl.tensor.quant_mx(x, axis=2)") == [("PTOC-E0202", "FP4-5")]


def test_fp4_5_tuple_elements_read_back():
    body = ("xt = pl.tile.load(x, [0, 0], [64, 256])\nq = pl.tile.quant_mx(xt, axis=1, target_type=pl.FP4E2M1X2)\n"
            "data = q[0]\nscale = q[1]")
    t = types("x: pl.Tensor[[64, 256], pl.BF16]", body, arch=A5)
    assert t["data"] == f"pl.Tile[[64, 128], pl.FP4E2M1X2, {VEC}]"
    assert t["scale"].startswith("pl.Tile[[64, 8], pl.FP8E8M0")
