"""tile.gather_row and tile.mscatter with PyPTO's type rules (src/ir/op/tile_ops/paged_gather.cpp,
tile_ops/memory.cpp); expected types written by hand from those definitions."""

import pytest
from optest import codes, types

from ptoc.ops.registry import NoPto, lookup

GR = "src: pl.Tensor[[256, 128], pl.BF16]"
MAT = "pl.Tile[[16, 128], pl.BF16, pl.Mem.Mat]"


def test_gather_row_is_the_destination_written_in_place():
    body = ("kv0 = pl.tile.create([16, 128], dtype=pl.BF16, target_memory=pl.Mem.Mat)\n"
            "kv1 = pl.tile.gather_row(kv0, src, [0, 0], [0, 0], [1, 128])\n"
            "kv2 = pl.gather_row(kv1, src, [1, 0], [5, 0], [4, 128], valid_shape=[3, 128], transpose=False)")
    t = types(GR, body)
    assert t["kv1"] == t["kv2"] == MAT
    assert isinstance(lookup("tile.gather_row").pto, NoPto)


@pytest.mark.parametrize("call", ["pl.tile.gather_row(kv0, src, [0], [0, 0], [1, 128])",
                                  "pl.tile.gather_row(kv0, src, [0, 0], [0, 0], [1, 128], [1, 128, 1])",
                                  "pl.tile.gather_row(kv0, kv0, [0, 0], [0, 0], [1, 128])"])
def test_gather_row_rejections(call):
    body = f"kv0 = pl.tile.create([16, 128], dtype=pl.BF16, target_memory=pl.Mem.Mat)\nr = {call}"
    assert codes(GR, body) == [("PTOC-E0202", None)]


def test_gather_row_dtype_must_match():
    body = ("kv0 = pl.tile.create([16, 128], dtype=pl.FP16, target_memory=pl.Mem.Mat)\n"
            "r = pl.tile.gather_row(kv0, src, [0, 0], [0, 0], [1, 128])")
    assert codes(GR, body) == [("PTOC-E0202", None)]


MS = "out: pl.Tensor[[1024], pl.FP32], a: pl.Tensor[[8, 32], pl.FP32], i: pl.Tensor[[8, 32], pl.INT32]"
LOADS = "s = pl.tile.load(a, [0, 0], [8, 32])\nx = pl.tile.load(i, [0, 0], [8, 32])\n"


def test_mscatter_is_the_output_tensor():
    assert types(MS, LOADS + "r = pl.tile.mscatter(s, x, out)\nq = pl.mscatter(s, x, out)")["r"] == \
        "pl.Tensor[[1024], pl.FP32]"
    assert isinstance(lookup("tile.mscatter").pto, NoPto)


@pytest.mark.parametrize("call", ["pl.tile.mscatter(s, s, out)",      # FP32 indices
                                  "pl.tile.mscatter(x, x, out)"])     # INT32 payload into an FP32 tensor
def test_mscatter_rejections(call):
    assert [c for c, _ in codes(MS, LOADS + f"r = {call}")] == ["PTOC-E0202"]


PG = ("pool: pl.Tensor[[1024, 128], pl.BF16], idx: pl.Tensor[[64], pl.INT32], "
      "bt: pl.Tensor[[1, 8], pl.INT32]")


def test_paged_gather_shape_is_max_indices_by_size():
    t = types(PG, "g = pl.paged_gather(pool, idx, bt, block_size=128, size=64, max_indices=32)\n"
                  "h = pl.tensor.paged_gather(pool, idx, bt, block_size=128, size=64, max_indices=32, col_off=64, "
                  "is_trans=True)")
    assert t["g"] == "pl.Tensor[[32, 64], pl.BF16]" and t["h"] == "pl.Tensor[[64, 32], pl.BF16]"


@pytest.mark.parametrize("call, code", [
    ("pl.tensor.paged_gather(pool, idx, bt, block_size=128, size=64)", "PTOC-E0201"),             # max_indices
    ("pl.tensor.paged_gather(pool, idx, bt, block_size=128, size=100, max_indices=8, col_off=64)",  # past D
     "PTOC-E0202"),
    ("pl.tensor.paged_gather(pool, bt, pool, block_size=128, size=64, max_indices=8)", "PTOC-E0202"),
])
def test_paged_gather_rejections(call, code):
    assert [c for c, _ in codes(PG, f"g = {call}")] == [code]


def test_create_l1_and_tensor_gather_row():
    t = types(GR, "kv0 = pl.create_l1([16, 128], pl.BF16)\nkv1 = pl.gather_row(kv0, src, [0, 0], [0, 0], [4, 128])\n"
                  "kv2 = pl.tensor.gather_row(kv1, src, [4, 0], [9, 0], [4, 128], valid_shape=[3, 128])\n"
                  "kv3 = pl.tensor.create_l1([128, 16], dtype=pl.BF16, transpose=True)")
    assert t["kv0"] == t["kv1"] == t["kv2"] == "pl.Tensor[[16, 128], pl.BF16]"
    assert t["kv3"] == "pl.Tensor[[128, 16], pl.BF16]"


@pytest.mark.parametrize("call", [
    "pl.gather_row(kv, src, [0, 0], [0, 0], [4, 128], valid_shape=[5, 128])",     # valid beyond the window
    "pl.gather_row(kv, src, [0, 0], [0, 0], [4, 128], valid_shape=[1.5, 128])",   # not an integer extent
    "pl.gather_row(kv, src, [0, 0], [0, 0], [r, 128])",                           # dynamic window
    "pl.gather_row(kv, src, [0, 0], [0, 0], [4, 128], valid_shape=[r, 128], transpose=True)",
])
def test_gather_row_window_rules(call):
    body = f"kv = pl.create_l1([16, 128], pl.BF16)\ng = {call}"
    assert [c for c, _ in codes(GR + ", r: pl.Scalar[pl.INDEX]", body)] == ["PTOC-E0202"]
