"""tile.assemble (write a whole tile into another at an offset; the valid region becomes the union when
that is one box) and tile.transpose_view (the same bytes read transposed: trailing axes swap, each layout
flips its major order). Expected types are worked out by hand from those definitions."""

import subprocess
import sys
from pathlib import Path

from optest import codes, diagnostics, types

PTOC = str(Path(sys.executable).with_name("ptoc"))
MATS = "a: pl.Tile[[64, 32], pl.BF16, pl.Mem.Mat], b: pl.Tile[[16, 32], pl.BF16, pl.Mem.Mat]"


def test_assemble_returns_the_target_type():
    t = types(MATS, "w = pl.tile.assemble(a, b, [16, 0])\nx = pl.assemble(a, b, [48, 0])")
    assert t["w"] == t["x"] == "pl.Tile[[64, 32], pl.BF16, pl.Mem.Mat]"


def test_assemble_of_fp32_accumulator_into_bf16_is_the_fixpipe_downcast():
    t = types("a: pl.Tile[[64, 32], pl.BF16, pl.Mem.Mat], c: pl.Tile[[16, 32], pl.FP32, pl.Mem.Acc]",
              "w = pl.tile.assemble(a, c, [0, 0])")
    assert t["w"] == "pl.Tile[[64, 32], pl.BF16, pl.Mem.Mat]"


def test_assemble_other_dtype_mismatch_rejected():
    d = diagnostics("a: pl.Tile[[64, 32], pl.FP32, pl.Mem.Vec], c: pl.Tile[[16, 32], pl.FP16, pl.Mem.Vec]",
                    "w = pl.tile.assemble(a, c, [0, 0])")
    assert d[0].code == "PTOC-E0202" and "FP16" in d[0].message and "FP32" in d[0].message


def test_assemble_source_must_fit_in_the_target():
    d = diagnostics(MATS, "w = pl.tile.assemble(a, b, [56, 0])")
    assert d[0].code == "PTOC-E0202" and "[56, 72) of axis 0 exceeds the extent 64" in d[0].message


def test_assemble_grows_a_partial_target_along_one_axis():
    part = "a: pl.Tile[[64, 32], pl.FP32, pl.Mem.Vec, pl.TileView(valid_shape=[16, 32])], " \
           "b: pl.Tile[[16, 32], pl.FP32, pl.Mem.Vec]"
    t = types(part, "w = pl.tile.assemble(a, b, [16, 0])\nx = pl.tile.assemble(a, b, [0, 0])")
    assert t["w"] == "pl.Tile[[64, 32], pl.FP32, pl.Mem.Vec, pl.TileView(valid_shape=[32, 32])]"
    assert t["x"] == "pl.Tile[[64, 32], pl.FP32, pl.Mem.Vec, pl.TileView(valid_shape=[16, 32])]"


def test_assemble_leaving_a_gap_rejected():
    part = "a: pl.Tile[[64, 32], pl.FP32, pl.Mem.Vec, pl.TileView(valid_shape=[16, 32])], " \
           "b: pl.Tile[[16, 32], pl.FP32, pl.Mem.Vec]"
    d = diagnostics(part, "w = pl.tile.assemble(a, b, [32, 0])")
    assert d[0].code == "PTOC-E0202" and "not one box" in d[0].message


def test_assemble_of_a_tensor_rejected():
    d = diagnostics("x: pl.Tensor[[64, 32], pl.BF16], b: pl.Tile[[16, 32], pl.BF16, pl.Mem.Mat]",
                    "w = pl.tile.assemble(x, b, [0, 0])")
    assert d[0].code == "PTOC-E0202" and "must be a tile" in d[0].message


def test_transpose_view_swaps_the_trailing_axes_and_flips_the_layout():
    # a Mat tile is NZ (blayout col_major, slayout row_major) implicitly; its transpose is ZN
    t = types("a: pl.Tile[[64, 32], pl.BF16, pl.Mem.Mat]", "v = pl.tile.transpose_view(a)")
    assert t["v"] == ("pl.Tile[[32, 64], pl.BF16, pl.Mem.Mat, pl.TileView(blayout=pl.TileLayout.row_major, "
                      "slayout=pl.TileLayout.col_major)]")


def test_transpose_view_of_partial_vec_tile_swaps_the_valid_region():
    t = types("a: pl.Tile[[16, 64], pl.FP32, pl.Mem.Vec, pl.TileView(valid_shape=[8, 64])]",
              "v = pl.transpose_view(a)")
    assert t["v"] == ("pl.Tile[[64, 16], pl.FP32, pl.Mem.Vec, pl.TileView(valid_shape=[64, 8], "
                      "blayout=pl.TileLayout.col_major)]")


def test_transpose_view_needs_rank_two():
    assert codes("x: pl.Tensor[[64], pl.FP32]", "t = pl.tile.load(x, [0], [64])\nv = pl.tile.transpose_view(t)") \
        == [("PTOC-E0202", None)]


def test_codegen_names_assemble_as_unsupported(tmp_path):
    src = tmp_path / "k.ir"
    src.write_text("import pypto.language as pl\n@pl.program\nclass p:\n"
                   "    @pl.function(type=pl.FunctionType.AIV)\n"
                   "    def k(self, x: pl.Tensor[[64, 32], pl.FP32], out: pl.Out[pl.Tensor[[64, 32], pl.FP32]])"
                   " -> pl.Tensor[[64, 32], pl.FP32]:\n"
                   "        t: pl.Tile[[64, 32], pl.FP32, pl.Mem.Vec] = pl.tile.load(x, [0, 0], [64, 32])\n"
                   "        u: pl.Tile[[16, 32], pl.FP32, pl.Mem.Vec] = pl.tile.load(x, [0, 0], [16, 32])\n"
                   "        w: pl.Tile[[64, 32], pl.FP32, pl.Mem.Vec] = pl.tile.assemble(t, u, [16, 0])\n"
                   "        o: pl.Tensor[[64, 32], pl.FP32] = pl.tile.store(w, [0, 0], out)\n"
                   "        return o\n")
    r = subprocess.run([PTOC, "check", str(src)], capture_output=True, text=True)
    assert r.returncode == 1, r.stderr
    assert "PTOC-E0400" in r.stderr and "tile.assemble" in r.stderr
