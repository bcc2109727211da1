"""tensor.expand_clone, tensor/tile.scatter_update and tensor/tile.concat with PyPTO's type rules
(src/ir/op/tensor_ops/broadcast.cpp, scatter_update.cpp; tile_ops/transform.cpp). Expected types are
written by hand from those definitions."""

import pytest
from optest import codes, types

from ptoc.frontend.parser import parse_program
from ptoc.ir.nodes import Call, ConstInt
from ptoc.ir.visitor import walk


def test_expand_clone_broadcasts_one_unit_axis():
    p = "s: pl.Tensor[[2, 1, 8], pl.FP16], t: pl.Tensor[[2, 4, 8], pl.FP16]"
    assert types(p, "y = pl.expand_clone(s, t)\nz = pl.tensor.expand_clone(s, t)")["y"] == "pl.Tensor[[2, 4, 8], pl.FP16]"


@pytest.mark.parametrize("src", ["pl.Tensor[[1, 1, 8], pl.FP16]",    # two axes broadcast
                                 "pl.Tensor[[2, 3, 8], pl.FP16]",    # 3 -> 4 is no broadcast
                                 "pl.Tensor[[2, 4, 8], pl.FP32]",    # dtype
                                 "pl.Tensor[[4, 8], pl.FP16]"])      # rank 2
def test_expand_clone_rejections(src):
    assert codes(f"s: {src}, t: pl.Tensor[[2, 4, 8], pl.FP16]", "y = pl.tensor.expand_clone(s, t)") == [
        ("PTOC-E0202", None)]


SU = "b: pl.Tensor[[16, 64], pl.FP16], i: pl.Tensor[[2, 4], pl.INT32], s: pl.Tensor[[8, 64], pl.FP16]"


def test_scatter_update_is_the_updated_destination():
    t = types(SU, "r = pl.scatter_update(b, -2, i, s)\nq = pl.tensor.scatter_update(b, i, s, dim=-2)")
    assert t["r"] == t["q"] == "pl.Tensor[[16, 64], pl.FP16]"


def test_scatter_update_language_order_becomes_the_ops_attribute():
    # the language writes (input, dim, index, src); the op takes (input, index, src) and dim=
    text = "import pypto.language as pl\n@pl.function(type=pl.FunctionType.Orchestration)\n" \
           f"def k({SU}):\n    r = pl.scatter_update(b, -2, i, s)\n"
    (call,) = [n for n in walk(parse_program(text, "t.ir")) if isinstance(n, Call)]
    dim = call.kwarg("dim")
    assert len(call.args) == 3 and call.args[1].name == "i" and isinstance(dim, ConstInt) and dim.value == -2


@pytest.mark.parametrize("body", ["r = pl.tensor.scatter_update(b, i, s, dim=0)",
                                  "r = pl.tensor.scatter_update(b, s, s)",
                                  "r = pl.tensor.scatter_update(b, i, i)"])
def test_scatter_update_rejections(body):
    assert codes(SU, body) == [("PTOC-E0202", None)]


def test_concat_joins_columns():
    p = "a: pl.Tensor[[32, 16], pl.FP32], b: pl.Tensor[[32, 48], pl.FP32]"
    t = types(p, "x = pl.tile.load(a, [0, 0], [32, 16])\ny = pl.tile.load(b, [0, 0], [32, 48])\n"
                 "z = pl.concat(x, y)\nw = pl.tile.concat(x, y)\nv = pl.tensor.concat(a, b)")
    assert t["z"] == t["w"] == "pl.Tile[[32, 64], pl.FP32, pl.Mem.Vec]"
    assert t["v"] == "pl.Tensor[[32, 64], pl.FP32]"


def test_concat_rows_must_match():
    p = "a: pl.Tensor[[32, 16], pl.FP32], b: pl.Tensor[[16, 16], pl.FP32]"
    assert codes(p, "v = pl.tensor.concat(a, b)") == [("PTOC-E0202", None)]
    assert codes(p, "x = pl.tile.load(a, [0, 0], [32, 16])\ny = pl.tile.load(b, [0, 0], [16, 16])\n"
                    "z = pl.tile.scatter_update(x, y, y)") == [("PTOC-E0202", None)]
