"""Broadcasts (tile.row_expand, col_expand, expands, row/col_expand_expdif) and arg-reductions
(tile.row/col_argmax/argmin), typed as PyPTO defines them (src/ir/op/tile_ops/broadcast.cpp,
reduction.cpp). Expected types are written by hand from those definitions."""

import pytest
from optest import codes, types

from ptoc.ops.registry import NoPto, lookup

P = ("x: pl.Tensor[[32, 64], pl.FP32], r: pl.Tensor[[32, 1], pl.FP32], c: pl.Tensor[[1, 64], pl.FP32], "
     "s: pl.Scalar[pl.FP32]")
L = ("t = pl.tile.load(x, [0, 0], [32, 64], [32, 40])\nrv = pl.tile.load(r, [0, 0], [32, 1])\n"
     "cv = pl.tile.load(c, [0, 0], [1, 64])\n")
TARGET = "pl.Tile[[32, 64], pl.FP32, pl.Mem.Vec, pl.TileView(valid_shape=[32, 40])]"


@pytest.mark.parametrize("call", ["pl.row_expand(t, rv)", "pl.tile.row_expand(t, rv)", "pl.col_expand(t, cv)",
                                  "pl.tile.col_expand(t, cv)", "pl.expands(t, s)", "pl.tile.expands(t, 2.0)",
                                  "pl.row_expand_expdif(t, rv)", "pl.tile.row_expand_expdif(t, rv)",
                                  "pl.col_expand_expdif(t, cv)", "pl.tile.col_expand_expdif(t, cv)"])
def test_broadcast_has_the_targets_type(call):
    # the target's shape, dtype and valid region
    assert types(P, L + f"b = {call}")["b"] == TARGET


@pytest.mark.parametrize("call", ["pl.tile.row_expand(t, cv)", "pl.tile.col_expand(t, rv)",
                                  "pl.tile.expands(t, rv)"])
def test_broadcast_rejects_the_wrong_vector(call):
    assert codes(P, L + f"b = {call}") == [("PTOC-E0202", None)]


@pytest.mark.parametrize("op, shape", [("row_argmax", "[32, 1]"), ("row_argmin", "[32, 1]"),
                                       ("col_argmax", "[1, 64]"), ("col_argmin", "[1, 64]")])
def test_arg_reductions_give_int32_indices(op, shape):
    t = types("x: pl.Tensor[[32, 64], pl.FP32]", "t = pl.tile.load(x, [0, 0], [32, 64])\n"
              f"w = pl.tile.create([32, 64], dtype=pl.FP32)\na = pl.{op}(t, w)\nb = pl.tile.{op}(t, w)")
    assert t["a"] == t["b"] == f"pl.Tile[{shape}, pl.INT32, pl.Mem.Vec]"
    assert isinstance(lookup(f"tile.{op}").pto, NoPto)


def test_arg_reduction_scratch_must_match_the_input():
    assert codes("x: pl.Tensor[[32, 64], pl.FP32]", "t = pl.tile.load(x, [0, 0], [32, 64])\n"
                 "w = pl.tile.create([32, 64], dtype=pl.FP16)\na = pl.tile.row_argmax(t, w)") != []
