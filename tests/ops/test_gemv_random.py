"""tile.gemv / gemv_acc / gemv_bias and tile.random / tensor.random, typed as PyPTO defines them
(src/ir/op/tile_ops/matmul.cpp BuildGemvResultType; tile_ops/memory.cpp and tensor_ops/memory.cpp
for the random ops). Expected types are written out by hand from those definitions."""

import pytest
from optest import codes, diagnostics, types

from ptoc.ops.registry import NoPto, lookup

P = "a: pl.Tensor[[1, 64], pl.BF16], b: pl.Tensor[[64, 128], pl.BF16], bias: pl.Tensor[[1, 128], pl.FP32]"
OPS = ("l = pl.tile.load(a, [0, 0], [1, 64], target_memory=pl.Mem.Mat)\n"
       "r = pl.tile.load(b, [0, 0], [64, 128], target_memory=pl.Mem.Mat)\n")
# PyPTO: [1, K] x [K, N] -> 16 physical rows (a cube fractal), one valid: [16, N] valid [1, N], BF16 -> FP32
GEMV = "pl.Tile[[16, 128], pl.FP32, pl.Mem.Acc, pl.TileView(valid_shape=[1, 128])]"


def test_gemv_result_is_a_16_row_acc_tile_with_one_valid_row():
    t = types(P, OPS + "g = pl.gemv(l, r)\nh = pl.tile.gemv(l, r, acc_phase=\"final\")", hardware=False)
    assert t["g"] == t["h"] == GEMV


def test_gemv_acc_and_bias():
    body = OPS + ("g = pl.tile.gemv(l, r)\nh = pl.tile.gemv_acc(g, l, r)\n"
                  "bb = pl.tile.load(bias, [0, 0], [1, 128], target_memory=pl.Mem.Mat)\nk = pl.gemv_bias(l, r, bb)\n"
                  "k2 = pl.tile.gemv_bias(l, r, bb)\nh2 = pl.gemv_acc(g, l, r)")
    t = types(P, body, hardware=False)
    assert t["h"] == t["k"] == t["k2"] == t["h2"] == GEMV


def test_int8_gemv_accumulates_in_int32():
    t = types("a: pl.Tensor[[1, 32], pl.INT8], b: pl.Tensor[[32, 64], pl.INT8]",
              "l = pl.tile.load(a, [0, 0], [1, 32])\nr = pl.tile.load(b, [0, 0], [32, 64])\ng = pl.tile.gemv(l, r)",
              hardware=False)
    assert t["g"] == "pl.Tile[[16, 64], pl.INT32, pl.Mem.Acc, pl.TileView(valid_shape=[1, 64])]"


@pytest.mark.parametrize("params, body", [
    ("a: pl.Tensor[[2, 64], pl.BF16], b: pl.Tensor[[64, 128], pl.BF16]",  # two rows: not a vector
     "l = pl.tile.load(a, [0, 0], [2, 64])\nr = pl.tile.load(b, [0, 0], [64, 128])\ng = pl.tile.gemv(l, r)"),
    ("a: pl.Tensor[[1, 64], pl.BF16], b: pl.Tensor[[64, 128], pl.FP16]",  # mixed dtypes
     "l = pl.tile.load(a, [0, 0], [1, 64])\nr = pl.tile.load(b, [0, 0], [64, 128])\ng = pl.tile.gemv(l, r)"),
    ("a: pl.Tensor[[1, 64], pl.INT16], b: pl.Tensor[[64, 128], pl.INT16]",  # no INT16 GEMV
     "l = pl.tile.load(a, [0, 0], [1, 64])\nr = pl.tile.load(b, [0, 0], [64, 128])\ng = pl.tile.gemv(l, r)"),
    (P, OPS + 'g = pl.tile.gemv(l, r, acc_phase="middle")'),
])
def test_gemv_rejections(params, body):
    assert codes(params, body, hardware=False) == [("PTOC-E0202", None)]


def test_gemv_has_no_pto_form_yet():
    for op in ("tile.gemv", "tile.gemv_acc", "tile.gemv_bias", "tile.random"):
        assert isinstance(lookup(op).pto, NoPto)


SEEDS = "k: pl.Scalar[pl.INT32]"


def test_tile_random_types():
    t = types(SEEDS, "r = pl.tile.random(k, k, 0, 0, 0, 0, [16, 64])\n"
                     "s = pl.tile.random(k, 1, 2, 3, 4, 5, [16, 64], [16, 40], dtype=pl.INT32, rounds=7)")
    assert t["r"] == "pl.Tile[[16, 64], pl.UINT32, pl.Mem.Vec]"
    assert t["s"] == "pl.Tile[[16, 64], pl.INT32, pl.Mem.Vec, pl.TileView(valid_shape=[16, 40])]"


def test_tensor_random_is_pl_random():
    t = types(SEEDS, "r = pl.random(k, k, 0, 0, 0, 0, [8, 32], dtype=pl.INT32)\n"
                     "q = pl.tensor.random(k, k, 0, 0, 0, 0, [8, 32], dtype=pl.UINT32)")
    assert t["r"] == "pl.Tensor[[8, 32], pl.INT32]" and t["q"] == "pl.Tensor[[8, 32], pl.UINT32]"


@pytest.mark.parametrize("call", [
    "pl.tile.random(k, k, 0, 0, 0, 0, [16, 64], dtype=pl.FP32)",     # 32-bit integer lanes only
    "pl.tile.random(k, k, 0, 0, 0, 0, [16, 64], rounds=8)",          # 7 or 10 rounds
    "pl.tile.random(k, k, 0, 0, 0, 0, [16, 64], [16, 65])",          # valid beyond the shape
    "pl.tile.random(k, k, 0, 0, 0, 0, [4, 16, 64])",                 # 2-D only
    "pl.tile.random(x, k, 0, 0, 0, 0, [16, 64])",                    # a tensor is no seed
])
def test_random_rejections(call):
    d = diagnostics(SEEDS + ", x: pl.Tensor[[4], pl.INT32]", f"r = {call}")
    assert [x.code for x in d] == ["PTOC-E0202"]
