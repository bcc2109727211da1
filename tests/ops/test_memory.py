"""Data movement and creation ops: tile.load/store (3- and 4-positional forms), create, full, alloc,
element access and core ids."""

from optest import codes, diagnostics, types

X = "x: pl.Tensor[[64, 128], pl.FP16], out: pl.Out[pl.Tensor[[64, 128], pl.FP16]]"


def test_load_three_positional_defaults_to_vec():
    assert types(X, "t = pl.tile.load(x, [0, 0], [32, 128])")["t"] == "pl.Tile[[32, 128], pl.FP16, pl.Mem.Vec]"


def test_load_four_positional_sets_valid_shape_and_target_memory():
    t = types(X, "t = pl.tile.load(x, [0, 0], [32, 128], [16, 128], target_memory=pl.Mem.Mat)")
    assert t["t"] == "pl.Tile[[32, 128], pl.FP16, pl.Mem.Mat, pl.TileView(valid_shape=[16, 128])]"


def test_load_keeps_nd_rank_before_flattening():
    t = types("x: pl.Tensor[[4, 32, 64], pl.FP32]", "t = pl.tile.load(x, [0, 0, 0], [2, 32, 64])")
    assert t["t"] == "pl.Tile[[2, 32, 64], pl.FP32, pl.Mem.Vec]"


def test_load_of_nd_tile_may_be_annotated_in_flattened_2d_form():
    assert codes("x: pl.Tensor[[4, 32, 64], pl.FP32]",
                 "t: pl.Tile[[64, 64], pl.FP32, pl.Mem.Vec] = pl.tile.load(x, [0, 0, 0], [2, 32, 64])") == []


def test_load_of_blocked_nz_view_gives_logical_2d_tile():
    # NZ-4: sizes [1, TC/c0, TR/16, 16, c0] describe a logical [TR, TC] Mat tile (INT8: c0 = 32).
    t = types("w: pl.Tensor[[1, 16, 16, 16, 32], pl.INT8, pl.NZ]",
              "t = pl.tile.load(w, [0, 0, 0, 0, 0], [1, 16, 16, 16, 32], target_memory=pl.Mem.Mat)")
    assert t["t"] == "pl.Tile[[256, 512], pl.INT8, pl.Mem.Mat]"


def test_load_rank_mismatch_rejected():
    d = diagnostics(X, "t = pl.tile.load(x, [0, 0, 0], [1, 32, 128])")
    assert d[0].code == "PTOC-E0202" and "rank 2" in d[0].message


def test_load_offsets_and_shapes_length_mismatch_rejected():
    d = diagnostics(X, "t = pl.tile.load(x, [0, 0], [32])")
    assert d[0].code == "PTOC-E0202" and "offsets" in d[0].message


def test_load_window_out_of_bounds_rejected():
    d = diagnostics(X, "t = pl.tile.load(x, [48, 0], [32, 128])")
    assert d[0].code == "PTOC-E0202" and "exceeds" in d[0].message


def test_load_negative_offset_rejected():
    assert codes(X, "t = pl.tile.load(x, [-16, 0], [32, 128])") == [("PTOC-E0202", None)]


def test_load_into_ddr_rejected():
    assert codes(X, "t = pl.tile.load(x, [0, 0], [32, 128], target_memory=pl.Mem.DDR)") == [("PTOC-E0202", None)]


def test_load_of_a_tile_rejected():
    d = diagnostics(X, "t = pl.tile.load(x, [0, 0], [32, 128])\nu = pl.tile.load(t, [0, 0], [32, 128])")
    assert "must be a tensor" in d[0].message


def test_store_returns_the_tensor_and_keeps_kwargs():
    body = ("t = pl.tile.load(x, [0, 0], [64, 128])\n"
            "o = pl.tile.store(t, [0, 0], out, atomic=pl.AtomicType.Add, attrs={\"st_phase\": \"final\"})")
    assert types(X, body)["o"] == "pl.Tensor[[64, 128], pl.FP16]"


def test_store_with_partition_shape_operand():
    body = "t = pl.tile.load(x, [0, 0], [64, 128])\no = pl.tile.store(t, [0, 0], out, [64, 128])"
    assert types(X, body)["o"] == "pl.Tensor[[64, 128], pl.FP16]"


def test_store_dtype_mismatch_rejected_except_acc():
    p = "x: pl.Tensor[[16, 16], pl.FP32], out: pl.Out[pl.Tensor[[16, 16], pl.FP16]]"
    d = diagnostics(p, "t = pl.tile.load(x, [0, 0], [16, 16])\no = pl.tile.store(t, [0, 0], out)")
    assert d[0].code == "PTOC-E0202" and "differs" in d[0].message
    assert codes(p, "a = pl.tile.create([16, 16], dtype=pl.FP32, target_memory=pl.Mem.Acc)\n"
                    "o = pl.tile.store(a, [0, 0], out)") == []


def test_store_rank_mismatch_rejected():
    d = diagnostics(X, "t = pl.tile.load(x, [0, 0], [64, 128])\no = pl.tile.store(t, [0], out)")
    assert "rank 2" in d[0].message


def test_short_names_load_and_store():
    t = types(X, "t = pl.load(x, [0, 0], [64, 128])\no = pl.store(t, [0, 0], out)")
    assert t["t"] == "pl.Tile[[64, 128], pl.FP16, pl.Mem.Vec]" and t["o"] == "pl.Tensor[[64, 128], pl.FP16]"


def test_create_full_alloc():
    body = ("a = pl.tile.create([16, 32], dtype=pl.BF16, target_memory=pl.Mem.Mat)\n"
            "b = pl.tile.full([16, 32], dtype=pl.FP32, value=1.0)\n"
            "p = pl.tile.alloc(pl.Mem.Vec, 4096)\n"
            "q = pl.tensor.alloc(pl.Mem.DDR, 4096)\n"
            "g = pl.tensor.create([8, 8], dtype=pl.INT32)\n"
            "h = pl.tensor.full([8, 8], value=0, dtype=pl.INT32)")
    t = types("x: pl.Scalar[pl.INDEX]", body)
    assert t["a"] == "pl.Tile[[16, 32], pl.BF16, pl.Mem.Mat]"
    assert t["b"] == "pl.Tile[[16, 32], pl.FP32, pl.Mem.Vec]"
    assert t["p"] == t["q"] == "pl.Ptr"
    assert t["g"] == t["h"] == "pl.Tensor[[8, 8], pl.INT32]"


def test_create_without_dtype_rejected():
    assert codes("x: pl.Scalar[pl.INDEX]", "a = pl.tile.create([16, 32])") == [("PTOC-E0201", None)]


def test_full_without_value_rejected():
    assert codes("x: pl.Scalar[pl.INDEX]", "a = pl.tile.full([16, 32], dtype=pl.FP32)") == [("PTOC-E0201", None)]


def test_alloc_non_positive_size_rejected():
    assert codes("x: pl.Scalar[pl.INDEX]", "p = pl.tile.alloc(pl.Mem.Vec, 0)") == [("PTOC-E0202", None)]


def test_read_write_dim():
    body = ("t = pl.load(x, [0, 0], [64, 128])\n"
            "v = pl.tile.read(t, [0, 1])\n"
            "u = pl.tile.write(t, [0, 1], v)\n"
            "w = pl.tensor.read(x, [3, 4])\n"
            "n = pl.tensor.dim(x, 1)")
    t = types(X, body)
    assert t["v"] == t["w"] == "pl.Scalar[pl.FP16]"
    assert t["u"] == "pl.Tile[[64, 128], pl.FP16, pl.Mem.Vec]" and t["n"] == "pl.Scalar[pl.INDEX]"


def test_read_index_count_and_dim_axis_rejected():
    assert codes(X, "w = pl.tensor.read(x, [3])") == [("PTOC-E0202", None)]
    assert codes(X, "n = pl.tensor.dim(x, 2)") == [("PTOC-E0202", None)]


def test_core_ids_are_uint64_scalars():
    t = types("x: pl.Scalar[pl.INDEX]", "a = pl.tile.get_block_idx()\nb = pl.tile.get_block_num()\n"
                                        "c = pl.tile.get_subblock_idx()\nd = pl.get_block_idx()")
    assert t["a"] == t["b"] == t["c"] == t["d"] == "pl.Scalar[pl.UINT64]"


def test_core_id_takes_no_arguments():
    assert codes("x: pl.Scalar[pl.INDEX]", "a = pl.tile.get_block_idx(x)") == [("PTOC-E0201", None)]


def test_tensor_write_returns_the_tensor():
    body = "v = pl.tensor.read(x, [0, 1])\nw = pl.tensor.write(out, [3, 4], v)\nu = pl.write(out, [0, 0], v)"
    t = types(X, body)
    assert t["w"] == t["u"] == "pl.Tensor[[64, 128], pl.FP16]"


def test_tensor_write_as_a_statement_is_accepted():
    assert codes(X, "v = pl.tensor.read(x, [0, 1])\npl.tensor.write(out, [3, 4], v)") == []


def test_tensor_write_index_count_rejected():
    d = diagnostics(X, "v = pl.tensor.read(x, [0, 1])\nw = pl.tensor.write(out, [3], v)")
    assert d[0].code == "PTOC-E0202" and "1 indices for rank 2" in d[0].message


def test_tensor_write_value_dtype_must_match():
    d = diagnostics(X + ", s: pl.Scalar[pl.FP32]", "w = pl.tensor.write(out, [3, 4], s)")
    assert d[0].code == "PTOC-E0202" and "FP32" in d[0].message and "FP16" in d[0].message


def test_tensor_write_of_a_tile_rejected():
    d = diagnostics(X, "t = pl.load(x, [0, 0], [64, 128])\nv = pl.tile.read(t, [0, 0])\n"
                       "w = pl.tensor.write(t, [0, 0], v)")
    assert d[0].code == "PTOC-E0202" and "must be a tensor" in d[0].message
