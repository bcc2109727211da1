"""Bitwise and shift ops: OP-2 (and OP-3 regions)."""

import pytest
from optest import codes, diagnostics, types

I32 = "a: pl.Tensor[[16, 16], pl.INT32], b: pl.Tensor[[16, 16], pl.INT32]"


@pytest.mark.parametrize("op", ["and_", "or_", "xor", "shl", "shr"])
def test_op2_tensor_tensor_result_type(op):
    assert types(I32, f"c = pl.tensor.{op}(a, b)")["c"] == "pl.Tensor[[16, 16], pl.INT32]"


@pytest.mark.parametrize("op", ["ands", "ors", "xors", "shls", "shrs"])
def test_op2_tensor_scalar_result_type(op):
    assert types(I32, f"c = pl.tensor.{op}(a, 3)")["c"] == "pl.Tensor[[16, 16], pl.INT32]"


def test_op2_tile_forms_and_xor_tmp():
    body = """t = pl.load(a, [0, 0], [16, 16])
u = pl.load(b, [0, 0], [16, 16])
tmp = pl.tile.create([16, 16], dtype=pl.INT32)
x = pl.tile.xor(t, u, tmp)
y = pl.tile.xors(t, 1, tmp)
z = pl.tile.and_(t, u)
w = pl.tile.shls(t, 2)"""
    t = types(I32, body)
    for n in "xyzw":
        assert t[n] == "pl.Tile[[16, 16], pl.INT32, pl.Mem.Vec]", n


def test_op2_float_operands_rejected():
    d = diagnostics("a: pl.Tensor[[16, 16], pl.FP32], b: pl.Tensor[[16, 16], pl.FP32]", "c = pl.tensor.and_(a, b)")
    assert (d[0].code, d[0].rule) == ("PTOC-E0202", "OP-2") and "integers only" in d[0].message


def test_op2_broadcasting_rejected():
    d = diagnostics("a: pl.Tensor[[16, 16], pl.INT32], b: pl.Tensor[[16, 1], pl.INT32]", "c = pl.tensor.or_(a, b)")
    assert d[0].rule == "OP-2" and "identical" in d[0].message


def test_op2_not_only_int16_uint16():
    assert codes("a: pl.Tensor[[16, 16], pl.INT16]", "c = pl.tensor.not_(a)") == []
    assert codes("a: pl.Tensor[[16, 16], pl.UINT16]", "c = pl.tensor.not_(a)") == []
    assert codes("a: pl.Tensor[[16, 16], pl.INT32]", "c = pl.tensor.not_(a)") == [("PTOC-E0202", "OP-2")]
    assert codes("a: pl.Tensor[[16, 16], pl.INT8]", "c = pl.not_(a)") == [("PTOC-E0202", "OP-2")]


def test_op2_shift_keeps_lhs_dtype():
    t = types("a: pl.Tensor[[16, 16], pl.UINT8], b: pl.Tensor[[16, 16], pl.INT32]", "c = pl.tensor.shl(a, b)")
    assert t["c"] == "pl.Tensor[[16, 16], pl.UINT8]"


def test_op2_and_needs_same_dtype():
    d = diagnostics("a: pl.Tensor[[16, 16], pl.INT16], b: pl.Tensor[[16, 16], pl.UINT16]", "c = pl.tensor.xor(a, b)")
    assert d[0].rule == "OP-2" and "same dtype" in d[0].message


def test_op2_and_rejects_64_bit():
    d = diagnostics("a: pl.Tensor[[16, 16], pl.INT64], b: pl.Tensor[[16, 16], pl.INT64]", "c = pl.tensor.and_(a, b)")
    assert d[0].rule == "OP-2" and "8/16/32-bit" in d[0].message


def test_op3_xor_drops_region_and_keeps_it_for_and():
    p = ("a: pl.Tensor[[16, 16], pl.INT32, pl.TensorView(valid_shape=[8, 16])], "
         "b: pl.Tensor[[16, 16], pl.INT32, pl.TensorView(valid_shape=[8, 16])]")
    t = types(p, "c = pl.tensor.and_(a, b)\nd = pl.tensor.xor(a, b)\ne = pl.tensor.ands(a, 1)\nf = pl.tensor.xors(a, 1)")
    assert t["c"] == t["e"] == "pl.Tensor[[16, 16], pl.INT32, pl.TensorView(valid_shape=[8, 16])]"
    assert t["d"] == t["f"] == "pl.Tensor[[16, 16], pl.INT32]"


def test_op2_keyword_names_print_with_underscore():
    from ptoc.frontend.parser import parse_program
    from ptoc.ir.printer import print_program
    from optest import kernel

    text = print_program(parse_program(kernel(I32, "c = pl.tensor.and_(a, b)\nd = pl.tensor.or_(a, b)"), "t.ir"))
    assert "pl.tensor.and_(a, b)" in text and "pl.tensor.or_(a, b)" in text
