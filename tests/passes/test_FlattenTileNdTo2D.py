"""FlattenTileNdTo2D: rank > 2 tiles -> [prod(leading), last], rank 1 -> [1, N]; N-D stores get partitions."""

import textwrap

import pytest

from ptoc.context import CompileContext
from ptoc.diagnostics import CompileError
from ptoc.frontend.parser import parse_program
from ptoc.ir.printer import print_program
from ptoc.passes.FlattenTileNdTo2D import FlattenTileNdTo2D
from ptoc.passes.manager import check_invariants

CTX = CompileContext(arch="a2a3")


def kernel(params: str, ret: str, body: str, dyn: str = "") -> str:
    body = textwrap.indent(textwrap.dedent(body).strip("\n"), " " * 8)
    return (f"{dyn}@pl.program\nclass p:\n    @pl.function(type=pl.FunctionType.InCore)\n"
            f"    def k(self, {params}) -> {ret}:\n{body}\n")


def run(text: str):
    prog = parse_program(text, "before.ir", ctx=CTX)
    out = FlattenTileNdTo2D().run(prog, CTX)
    check_invariants(out, CTX, FlattenTileNdTo2D())
    return prog, out


def assert_same(out, expected_text: str):
    expected = parse_program(expected_text, "expected.ir", ctx=CTX)
    assert out == expected, f"got:\n{print_program(out)}\nexpected:\n{print_program(expected)}"


def rejected(text: str):
    prog = parse_program(text, "before.ir", ctx=CTX)
    with pytest.raises(CompileError) as e:
        FlattenTileNdTo2D().run(prog, CTX)
    (d,) = e.value.diagnostics
    return d


T3 = "pl.Tensor[[2, 16, 64], pl.FP32]"
P3 = f"a: {T3}, b: {T3}, o: pl.Out[{T3}]"


def test_rank3_add_kernel_flattens_to_32_by_64_and_the_store_gets_its_window():
    before = kernel(P3, T3, """
        a_tile: pl.Tile[[2, 16, 64], pl.FP32, pl.Mem.Vec] = pl.tile.load(a, [0, 0, 0], [2, 16, 64], target_memory=pl.Mem.Vec)
        b_tile: pl.Tile[[2, 16, 64], pl.FP32, pl.Mem.Vec] = pl.tile.load(b, [0, 0, 0], [2, 16, 64], target_memory=pl.Mem.Vec)
        c: pl.Tile[[2, 16, 64], pl.FP32, pl.Mem.Vec] = pl.tile.add(a_tile, b_tile)
        c_store: pl.Tensor[[2, 16, 64], pl.FP32] = pl.tile.store(c, [0, 0, 0], o)
        return c_store
    """)
    expected = kernel(P3, T3, """
        a_tile: pl.Tile[[32, 64], pl.FP32, pl.Mem.Vec] = pl.tile.load(a, [0, 0, 0], [2, 16, 64], target_memory=pl.Mem.Vec)
        b_tile: pl.Tile[[32, 64], pl.FP32, pl.Mem.Vec] = pl.tile.load(b, [0, 0, 0], [2, 16, 64], target_memory=pl.Mem.Vec)
        c: pl.Tile[[32, 64], pl.FP32, pl.Mem.Vec] = pl.tile.add(a_tile, b_tile)
        c_store: pl.Tensor[[2, 16, 64], pl.FP32] = pl.tile.store(c, [0, 0, 0], o, [2, 16, 64])
        return c_store
    """)
    _, out = run(before)
    assert_same(out, expected)


T4 = "pl.Tensor[[2, 3, 16, 64], pl.FP16]"


def test_rank4_load_keeps_its_window_and_the_store_gets_the_partition_shape():
    # The window [1:2, 0:3, 0:16, 0:64] is a [1, 3, 16, 64] tile = [48, 64] in 2-D; unannotated values get
    # the 2-D annotation, and the store names the N-D window it writes.
    before = kernel(f"x: {T4}, y: pl.Out[{T4}]", T4, """
        t = pl.tile.load(x, [1, 0, 0, 0], [1, 3, 16, 64], target_memory=pl.Mem.Vec)
        u = pl.tile.exp(t)
        r: pl.Tensor[[2, 3, 16, 64], pl.FP16] = pl.tile.store(u, [1, 0, 0, 0], y)
        return r
    """)
    expected = kernel(f"x: {T4}, y: pl.Out[{T4}]", T4, """
        t: pl.Tile[[48, 64], pl.FP16, pl.Mem.Vec] = pl.tile.load(x, [1, 0, 0, 0], [1, 3, 16, 64], target_memory=pl.Mem.Vec)
        u: pl.Tile[[48, 64], pl.FP16, pl.Mem.Vec] = pl.tile.exp(t)
        r: pl.Tensor[[2, 3, 16, 64], pl.FP16] = pl.tile.store(u, [1, 0, 0, 0], y, [1, 3, 16, 64])
        return r
    """)
    _, out = run(before)
    assert_same(out, expected)


def test_rank1_tiles_become_one_row():
    # The [1, 64] row is stored through the window [64] of the rank-1 tensor (its own coordinates).
    T1 = "pl.Tensor[[64], pl.FP32]"
    before = kernel(f"o: pl.Out[{T1}]", T1, """
        z: pl.Tile[[64], pl.FP32, pl.Mem.Vec] = pl.tile.full([64], value=0.0, dtype=pl.FP32, target_memory=pl.Mem.Vec)
        w = pl.tile.adds(z, 1.0)
        s = pl.tile.read(w, [5])
        o1: pl.Tensor[[64], pl.FP32] = pl.tile.store(w, [0], o)
        return o1
    """)
    expected = kernel(f"o: pl.Out[{T1}]", T1, """
        z: pl.Tile[[1, 64], pl.FP32, pl.Mem.Vec] = pl.tile.full([1, 64], value=0.0, dtype=pl.FP32, target_memory=pl.Mem.Vec)
        w: pl.Tile[[1, 64], pl.FP32, pl.Mem.Vec] = pl.tile.adds(z, 1.0)
        s = pl.tile.read(w, [0, 5])
        o1: pl.Tensor[[64], pl.FP32] = pl.tile.store(w, [0], o, [64])
        return o1
    """)
    _, out = run(before)
    assert_same(out, expected)


def test_rank1_load_is_annotated_as_one_row():
    T1 = "pl.Tensor[[64], pl.FP32]"
    before = kernel(f"x: {T1}, o: pl.Out[{T1}]", T1, """
        t: pl.Tile[[64], pl.FP32, pl.Mem.Vec] = pl.tile.load(x, [0], [64], target_memory=pl.Mem.Vec)
        o1: pl.Tensor[[64], pl.FP32] = pl.tile.store(t, [0], o)
        return o1
    """)
    expected = kernel(f"x: {T1}, o: pl.Out[{T1}]", T1, """
        t: pl.Tile[[1, 64], pl.FP32, pl.Mem.Vec] = pl.tile.load(x, [0], [64], target_memory=pl.Mem.Vec)
        o1: pl.Tensor[[64], pl.FP32] = pl.tile.store(t, [0], o, [64])
        return o1
    """)
    _, out = run(before)
    assert_same(out, expected)


def test_nz_source_load_keeps_its_window_nz5():
    # NZ-5: BlockNzTensorViews runs after this pass and folds the leading offsets into the blocked batch
    # axis (NZ-4), so the NZ load keeps its N-D offsets and shapes; only the tile type becomes 2-D.
    W = "pl.Tensor[[4, 256, 512], pl.INT8, pl.NZ]"
    O = "pl.Tensor[[256, 512], pl.INT8]"
    before = kernel(f"w: {W}, o: pl.Out[{O}]", O, """
        wm: pl.Tile[[1, 256, 512], pl.INT8, pl.Mem.Mat] = pl.tile.load(w, [1, 0, 0], [1, 256, 512], target_memory=pl.Mem.Mat)
        return o
    """)
    expected = kernel(f"w: {W}, o: pl.Out[{O}]", O, """
        wm: pl.Tile[[256, 512], pl.INT8, pl.Mem.Mat] = pl.tile.load(w, [1, 0, 0], [1, 256, 512], target_memory=pl.Mem.Mat)
        return o
    """)
    _, out = run(before)
    assert_same(out, expected)


def test_partial_leading_axis_flattens_the_valid_region():
    before = kernel(f"a: {T3}, n: pl.Scalar[pl.INDEX], o: pl.Out[{T3}]", T3, """
        t = pl.tile.load(a, [0, 0, 0], [2, 16, 64], [n, 16, 48], target_memory=pl.Mem.Vec)
        u = pl.tile.load(a, [0, 0, 0], [2, 16, 64], [1, 8, 64], target_memory=pl.Mem.Vec)
        r = pl.tile.store(t, [0, 0, 0], o)
        return r
    """)
    expected = kernel(f"a: {T3}, n: pl.Scalar[pl.INDEX], o: pl.Out[{T3}]", T3, """
        t: pl.Tile[[32, 64], pl.FP32, pl.Mem.Vec, pl.TileView(valid_shape=[n * 16, 48])] = pl.tile.load(a, [0, 0, 0], [2, 16, 64], [n, 16, 48], target_memory=pl.Mem.Vec)
        u: pl.Tile[[32, 64], pl.FP32, pl.Mem.Vec, pl.TileView(valid_shape=[8, 64])] = pl.tile.load(a, [0, 0, 0], [2, 16, 64], [1, 8, 64], target_memory=pl.Mem.Vec)
        r = pl.tile.store(t, [0, 0, 0], o, [2, 16, 64])
        return r
    """)
    _, out = run(before)
    assert_same(out, expected)


def test_valid_region_that_is_not_whole_rows_is_rejected():
    d = rejected(kernel(f"a: {T3}, o: pl.Out[{T3}]", T3, """
        t = pl.tile.load(a, [0, 0, 0], [2, 16, 64], [2, 8, 64], target_memory=pl.Mem.Vec)
        r = pl.tile.store(t, [0, 0, 0], o)
        return r
    """))
    assert (d.code, d.span.line) == ("PTOC-E0311", 5)


def test_dynamic_leading_dim_is_rejected_with_a_hint():
    TB = "pl.Tensor[[B, 16, 64], pl.FP32]"
    d = rejected(kernel(f"a: {TB}, o: pl.Out[{TB}]", TB, """
        t = pl.tile.load(a, [0, 0, 0], [B, 16, 64], target_memory=pl.Mem.Vec)
        r = pl.tile.store(t, [0, 0, 0], o)
        return r
    """, dyn='B = pl.dynamic("B")\n'))
    assert (d.code, d.span.line) == ("PTOC-E0310", 6)
    assert "dynamic leading extent" in d.message and "valid_shape" in d.hint


def test_broadcast_across_a_leading_axis_has_no_2d_form():
    d = rejected(kernel(f"a: {T3}, b: pl.Tensor[[16, 64], pl.FP32], o: pl.Out[{T3}]", T3, """
        t = pl.tile.load(a, [0, 0, 0], [2, 16, 64], target_memory=pl.Mem.Vec)
        u = pl.tile.load(b, [0, 0], [16, 64], target_memory=pl.Mem.Vec)
        v = pl.tile.add(t, u)
        r = pl.tile.store(v, [0, 0, 0], o)
        return r
    """))
    assert (d.code, d.span.line) == ("PTOC-E0312", 7)
    assert "pl.tile.add" in d.message


def test_loop_carried_rank3_tile_is_flattened():
    before = kernel(P3, T3, """
        a_tile: pl.Tile[[2, 16, 64], pl.FP32, pl.Mem.Vec] = pl.tile.load(a, [0, 0, 0], [2, 16, 64], target_memory=pl.Mem.Vec)
        for i, (acc,) in pl.range(3, init_values=(a_tile,)):
            nxt = pl.tile.muls(acc, 2.0)
            acc_out: pl.Tile[[2, 16, 64], pl.FP32, pl.Mem.Vec] = pl.yield_(nxt)
        r: pl.Tensor[[2, 16, 64], pl.FP32] = pl.tile.store(acc_out, [0, 0, 0], o)
        return r
    """)
    expected = kernel(P3, T3, """
        a_tile: pl.Tile[[32, 64], pl.FP32, pl.Mem.Vec] = pl.tile.load(a, [0, 0, 0], [2, 16, 64], target_memory=pl.Mem.Vec)
        for i, (acc,) in pl.range(3, init_values=(a_tile,)):
            nxt: pl.Tile[[32, 64], pl.FP32, pl.Mem.Vec] = pl.tile.muls(acc, 2.0)
            acc_out: pl.Tile[[32, 64], pl.FP32, pl.Mem.Vec] = pl.yield_(nxt)
        r: pl.Tensor[[2, 16, 64], pl.FP32] = pl.tile.store(acc_out, [0, 0, 0], o, [2, 16, 64])
        return r
    """)
    _, out = run(before)
    assert_same(out, expected)


def test_running_twice_changes_nothing():
    before = kernel(f"x: {T4}, y: pl.Out[{T4}]", T4, """
        t = pl.tile.load(x, [1, 0, 0, 0], [1, 3, 16, 64], target_memory=pl.Mem.Vec)
        c: pl.Tile[[3, 16, 64], pl.FP16, pl.Mem.Vec] = pl.tile.create([3, 16, 64], dtype=pl.FP16, target_memory=pl.Mem.Vec)
        s = pl.tile.read(t, [0, 2, 5, 7])
        r: pl.Tensor[[2, 3, 16, 64], pl.FP16] = pl.tile.store(t, [1, 0, 0, 0], y)
        return r
    """)
    _, once = run(before)
    twice = FlattenTileNdTo2D().run(once, CTX)
    assert twice is once
    # [0, 2, 5, 7] of a [1, 3, 16, 64] tile is row (0 * 3 + 2) * 16 + 5 = 37 of the [48, 64] tile
    assert "pl.tile.read(t, [37, 7])" in print_program(once)
    assert "pl.tile.create([48, 64]" in print_program(once)


def test_a_2d_kernel_passes_through_unchanged():
    T2 = "pl.Tensor[[16, 64], pl.FP32]"
    text = kernel(f"x: {T2}, o: pl.Out[{T2}]", T2, """
        t: pl.Tile[[16, 64], pl.FP32, pl.Mem.Vec] = pl.tile.load(x, [0, 0], [16, 64], target_memory=pl.Mem.Vec)
        r: pl.Tensor[[16, 64], pl.FP32] = pl.tile.store(t, [0, 0], o)
        return r
    """)
    prog, out = run(text)
    assert out is prog


T3B = "pl.Tensor[[4, 8, 16], pl.FP32]"


def test_short_names_flatten_like_the_full_ones():
    # pl.load / pl.store name tile.load / tile.store: the store still gets its N-D window.
    before = kernel(f"a: {T3}, o: pl.Out[{T3}]", T3, """
        t: pl.Tile[[2, 16, 64], pl.FP32, pl.Mem.Vec] = pl.load(a, [0, 0, 0], [2, 16, 64])
        u: pl.Tile[[2, 16, 64], pl.FP32, pl.Mem.Vec] = pl.tile.exp(t)
        r: pl.Tensor[[2, 16, 64], pl.FP32] = pl.store(u, [0, 0, 0], o)
        return r
    """)
    expected = kernel(f"a: {T3}, o: pl.Out[{T3}]", T3, """
        t: pl.Tile[[32, 64], pl.FP32, pl.Mem.Vec] = pl.load(a, [0, 0, 0], [2, 16, 64])
        u: pl.Tile[[32, 64], pl.FP32, pl.Mem.Vec] = pl.tile.exp(t)
        r: pl.Tensor[[2, 16, 64], pl.FP32] = pl.store(u, [0, 0, 0], o, [2, 16, 64])
        return r
    """)
    _, out = run(before)
    assert_same(out, expected)


def test_nd_assemble_offset_becomes_the_first_row_of_its_band():
    # A [1, 8, 16] page at [2, 0, 0] of a [4, 8, 16] tile is rows 2 * 8 = 16 .. 23 of the [32, 16] tile.
    before = kernel(f"o: pl.Out[{T3B}]", T3B, """
        page: pl.Tile[[1, 8, 16], pl.FP32, pl.Mem.Vec] = pl.tile.full([1, 8, 16], dtype=pl.FP32, value=1.0, target_memory=pl.Mem.Vec)
        buf: pl.Tile[[4, 8, 16], pl.FP32, pl.Mem.Vec] = pl.tile.create([4, 8, 16], dtype=pl.FP32, target_memory=pl.Mem.Vec)
        full: pl.Tile[[4, 8, 16], pl.FP32, pl.Mem.Vec] = pl.tile.assemble(buf, page, [2, 0, 0])
        r: pl.Tensor[[4, 8, 16], pl.FP32] = pl.tile.store(full, [0, 0, 0], o)
        return r
    """)
    expected = kernel(f"o: pl.Out[{T3B}]", T3B, """
        page: pl.Tile[[8, 16], pl.FP32, pl.Mem.Vec] = pl.tile.full([8, 16], dtype=pl.FP32, value=1.0, target_memory=pl.Mem.Vec)
        buf: pl.Tile[[32, 16], pl.FP32, pl.Mem.Vec] = pl.tile.create([32, 16], dtype=pl.FP32, target_memory=pl.Mem.Vec)
        full: pl.Tile[[32, 16], pl.FP32, pl.Mem.Vec] = pl.tile.assemble(buf, page, [16, 0])
        r: pl.Tensor[[4, 8, 16], pl.FP32] = pl.tile.store(full, [0, 0, 0], o, [4, 8, 16])
        return r
    """)
    _, out = run(before)
    assert_same(out, expected)


def test_nd_assemble_that_is_not_one_row_band_is_rejected():
    # A [2, 4, 16] block covers rows 0..3 and 8..11 of the flattened [32, 16] tile: no single 2-D insert.
    d = rejected(kernel(f"o: pl.Out[{T3B}]", T3B, """
        blk: pl.Tile[[2, 4, 16], pl.FP32, pl.Mem.Vec] = pl.tile.full([2, 4, 16], dtype=pl.FP32, value=1.0, target_memory=pl.Mem.Vec)
        buf: pl.Tile[[4, 8, 16], pl.FP32, pl.Mem.Vec] = pl.tile.create([4, 8, 16], dtype=pl.FP32, target_memory=pl.Mem.Vec)
        full: pl.Tile[[4, 8, 16], pl.FP32, pl.Mem.Vec] = pl.tile.assemble(buf, blk, [0, 0, 0])
        r: pl.Tensor[[4, 8, 16], pl.FP32] = pl.tile.store(full, [0, 0, 0], o)
        return r
    """))
    assert d.code == "PTOC-E0312" and "contiguous band" in d.message and d.span.line == 7


def test_rank1_kernel_compiles_to_rank1_partitions():
    # A rank-1 kernel through the whole pipeline: the [1, 64] tile is loaded from and stored into rank-1
    # windows of 64 elements (one offset, one size each).
    import subprocess
    import sys
    from pathlib import Path

    ptoc = Path(sys.executable).with_name("ptoc")
    src = kernel("x: pl.Tensor[[64], pl.FP32], o: pl.Out[pl.Tensor[[64], pl.FP32]]", "pl.Tensor[[64], pl.FP32]", """
        t: pl.Tile[[64], pl.FP32, pl.Mem.Vec] = pl.tile.load(x, [0], [64], target_memory=pl.Mem.Vec)
        u: pl.Tile[[64], pl.FP32, pl.Mem.Vec] = pl.tile.muls(t, 2.0)
        o1: pl.Tensor[[64], pl.FP32] = pl.tile.store(u, [0], o)
        return o1
    """)
    r = subprocess.run([str(ptoc), "compile", "-", "-o", "-", "--no-header"], input=src, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    views = [ln.strip() for ln in r.stdout.splitlines() if "pto.partition_view" in ln]
    assert len(views) == 2
    assert all("offsets = [%c0_index], sizes = [%c64_index]" in v and v.endswith("<64xf32>") for v in views)


# ------------------------------------------------------------------ tile.transpose gets its scratch tile
T2 = "pl.Tensor[[32, 64], pl.FP32]"
T2T = "pl.Tensor[[64, 32], pl.FP32]"


def test_2d_transpose_gets_a_scratch_tile_of_the_source_shape_before_it():
    # PTOAS's pto.ttrans reads (source, scratch); the scratch has the source's shape [32, 64], not the
    # result's [64, 32], and the source's memory space and dtype.
    before = kernel(f"a: {T2}, o: pl.Out[{T2T}]", T2T, """
        t: pl.Tile[[32, 64], pl.FP32, pl.Mem.Vec] = pl.tile.load(a, [0, 0], [32, 64], target_memory=pl.Mem.Vec)
        u: pl.Tile[[64, 32], pl.FP32, pl.Mem.Vec] = pl.tile.transpose(t, 0, 1)
        s: pl.Tensor[[64, 32], pl.FP32] = pl.tile.store(u, [0, 0], o)
        return s
    """)
    expected = kernel(f"a: {T2}, o: pl.Out[{T2T}]", T2T, """
        t: pl.Tile[[32, 64], pl.FP32, pl.Mem.Vec] = pl.tile.load(a, [0, 0], [32, 64], target_memory=pl.Mem.Vec)
        transpose_tmp: pl.Tile[[32, 64], pl.FP32, pl.Mem.Vec] = pl.tile.create([32, 64], dtype=pl.FP32, target_memory=pl.Mem.Vec)
        u: pl.Tile[[64, 32], pl.FP32, pl.Mem.Vec] = pl.tile.transpose(t, 0, 1, transpose_tmp)
        s: pl.Tensor[[64, 32], pl.FP32] = pl.tile.store(u, [0, 0], o)
        return s
    """)
    _, out = run(before)
    assert_same(out, expected)
    again = FlattenTileNdTo2D().run(out, CTX)
    assert again is out  # idempotent: the scratch is there now


def test_each_transpose_in_a_loop_gets_a_fresh_scratch_name():
    before = kernel(f"a: {T2}, o: pl.Out[{T2T}]", T2T, """
        for i, (o_i,) in pl.range(2, init_values=(o,)):
            transpose_tmp: pl.Tile[[32, 64], pl.FP32, pl.Mem.Vec] = pl.tile.load(a, [0, 0], [32, 64], target_memory=pl.Mem.Vec)
            u: pl.Tile[[64, 32], pl.FP32, pl.Mem.Vec] = pl.tile.transpose(transpose_tmp, 0, 1)
            w: pl.Tile[[32, 64], pl.FP32, pl.Mem.Vec] = pl.tile.transpose(u, 0, 1)
            v: pl.Tile[[64, 32], pl.FP32, pl.Mem.Vec] = pl.tile.transpose(w, 0, 1)
            s: pl.Tensor[[64, 32], pl.FP32] = pl.tile.store(v, [0, 0], o_i)
            o_n: pl.Tensor[[64, 32], pl.FP32] = pl.yield_(s)
        return o_n
    """)
    expected = kernel(f"a: {T2}, o: pl.Out[{T2T}]", T2T, """
        for i, (o_i,) in pl.range(2, init_values=(o,)):
            transpose_tmp: pl.Tile[[32, 64], pl.FP32, pl.Mem.Vec] = pl.tile.load(a, [0, 0], [32, 64], target_memory=pl.Mem.Vec)
            transpose_tmp_1: pl.Tile[[32, 64], pl.FP32, pl.Mem.Vec] = pl.tile.create([32, 64], dtype=pl.FP32, target_memory=pl.Mem.Vec)
            u: pl.Tile[[64, 32], pl.FP32, pl.Mem.Vec] = pl.tile.transpose(transpose_tmp, 0, 1, transpose_tmp_1)
            transpose_tmp_2: pl.Tile[[64, 32], pl.FP32, pl.Mem.Vec] = pl.tile.create([64, 32], dtype=pl.FP32, target_memory=pl.Mem.Vec)
            w: pl.Tile[[32, 64], pl.FP32, pl.Mem.Vec] = pl.tile.transpose(u, 0, 1, transpose_tmp_2)
            transpose_tmp_3: pl.Tile[[32, 64], pl.FP32, pl.Mem.Vec] = pl.tile.create([32, 64], dtype=pl.FP32, target_memory=pl.Mem.Vec)
            v: pl.Tile[[64, 32], pl.FP32, pl.Mem.Vec] = pl.tile.transpose(w, 0, 1, transpose_tmp_3)
            s: pl.Tensor[[64, 32], pl.FP32] = pl.tile.store(v, [0, 0], o_i)
            o_n: pl.Tensor[[64, 32], pl.FP32] = pl.yield_(s)
        return o_n
    """)
    _, out = run(before)
    assert_same(out, expected)


def test_a_transpose_that_names_its_scratch_is_left_alone():
    body = """
        t: pl.Tile[[32, 64], pl.FP32, pl.Mem.Vec] = pl.tile.load(a, [0, 0], [32, 64], target_memory=pl.Mem.Vec)
        x: pl.Tile[[32, 64], pl.FP32, pl.Mem.Vec] = pl.tile.create([32, 64], dtype=pl.FP32, target_memory=pl.Mem.Vec)
        u: pl.Tile[[64, 32], pl.FP32, pl.Mem.Vec] = pl.tile.transpose(t, 0, 1, tmp=x)
        s: pl.Tensor[[64, 32], pl.FP32] = pl.tile.store(u, [0, 0], o)
        return s
    """
    prog, out = run(kernel(f"a: {T2}, o: pl.Out[{T2T}]", T2T, body))
    assert out is prog


def test_the_pipeline_runs_the_pass_on_2d_kernels_that_lack_a_transpose_scratch():
    # The kernel's tiles are all 2-D already: only the missing scratch makes the pass necessary.
    from ptoc.passes.properties import _flat_values

    prog = parse_program(kernel(f"a: {T2}, o: pl.Out[{T2T}]", T2T, """
        t: pl.Tile[[32, 64], pl.FP32, pl.Mem.Vec] = pl.tile.load(a, [0, 0], [32, 64], target_memory=pl.Mem.Vec)
        u: pl.Tile[[64, 32], pl.FP32, pl.Mem.Vec] = pl.tile.transpose(t, 0, 1)
        s: pl.Tensor[[64, 32], pl.FP32] = pl.tile.store(u, [0, 0], o)
        return s
    """), "before.ir", ctx=CTX)
    why = _flat_values(prog, CTX)
    assert why == ["k: pl.tile.transpose without its scratch tile at line 6"]  # line 6: the transpose
    assert _flat_values(FlattenTileNdTo2D().run(prog, CTX), CTX) == []
