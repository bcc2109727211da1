"""BlockNzTensorViews: logical NZ tensors -> rank-5 blocked views, their loads, Acc stores and slices.

Every expected value comes from the seed (spec/000) or the rules NZ-1..NZ-13 of spec/README.md, worked
by hand: c0 = 256 / bits, `[..., R, C]` -> `[B, C/c0, R/16, 16, c0]`, offsets `[b, k0/c0, r0/16, 0, 0]`.
The GM-gap guard (NZ-12) has its own file, test_nz_gm_gap.py.
"""

import textwrap

import pytest

from ptoc.analysis.arith import PROVABLE_FORMS, eval_int
from ptoc.context import CompileContext
from ptoc.diagnostics import CODES, CompileError
from ptoc.frontend.parser import parse_program
from ptoc.ir.nodes import ConstBool, StrLit
from ptoc.ir.printer import print_program
from ptoc.ir.visitor import walk
from ptoc.passes.BlockNzTensorViews import MARK, BlockNzTensorViews
from ptoc.passes.manager import check_invariants, load_pass
from ptoc.passes.MaterializeTensorStrides import MaterializeTensorStrides

A2A3 = CompileContext(arch="a2a3")
A5 = CompileContext(arch="a5")
ATTR = f'pl.func_attr({{"{MARK}": True}})'


def kernel(params: str, ret: str, body: str, dyn: str = "", extra: str = "", ftype: str = "InCore") -> str:
    body = textwrap.indent(textwrap.dedent(body).strip("\n"), " " * 8)
    arrow = f" -> {ret}" if ret else ""
    return (f"{dyn}@pl.program\nclass p:\n    @pl.function(type=pl.FunctionType.{ftype})\n"
            f"    def k(self, {params}){arrow}:\n{body}\n{extra}")


def parse(text: str, check_ops: bool = True):
    return parse_program(text, "before.ir", ctx=A2A3, check_ops=check_ops)


def run(text: str, ctx: CompileContext = A2A3):
    prog = parse_program(text, "before.ir", ctx=ctx)
    out = BlockNzTensorViews().run(prog, ctx)
    check_invariants(out, ctx, BlockNzTensorViews())
    return out


def assert_same(got, expected_text: str, ctx: CompileContext = A2A3):
    want = parse_program(expected_text, "expected.ir", ctx=ctx)
    assert got == want, f"got:\n{print_program(got)}\nexpected:\n{print_program(want)}"


def assert_blocks(before: str, expected: str, ctx: CompileContext = A2A3):
    assert_same(run(before, ctx), expected, ctx)


def rejected(text: str, ctx: CompileContext = A2A3, check_ops: bool = True):
    prog = parse_program(text, "before.ir", ctx=ctx, check_ops=check_ops)
    with pytest.raises(CompileError) as e:
        BlockNzTensorViews().run(prog, ctx)
    (d,) = e.value.diagnostics
    assert d.code in CODES and d.hint, d
    return d


def line_of(text: str, needle: str) -> int:
    return next(i for i, ln in enumerate(text.splitlines(), start=1) if needle in ln)


# --------------------------------------------------------------------------------------------------
# the pass itself
# --------------------------------------------------------------------------------------------------


def test_pass_declares_its_place_in_the_layout_stage():
    p = load_pass("BlockNzTensorViews")
    assert p is BlockNzTensorViews and p.stage == "layout" and p.summary
    assert p.requires == frozenset({"flat_tiles"}) and p.produces == frozenset({"nz_blocked"})


def test_kernel_without_nz_tensors_is_left_alone_and_unmarked():
    src = kernel("x: pl.Tensor[[64, 64], pl.FP32]", "", """
        t: pl.Tile[[64, 64], pl.FP32, pl.Mem.Vec] = pl.tile.load(x, [0, 0], [64, 64], target_memory=pl.Mem.Vec)
    """)
    prog = parse(src)
    assert BlockNzTensorViews().run(prog, A2A3) is prog


# --------------------------------------------------------------------------------------------------
# NZ-1 / NZ-2: blocked shapes
# --------------------------------------------------------------------------------------------------


def test_nz2_rank3_int8_weight_blocks_to_32_128_128_16_32():
    # seed: [32, 2048, 4096] INT8 (c0 = 32: 4096/32 = 128, 2048/16 = 128)
    assert_blocks(kernel("w: pl.Tensor[[32, 2048, 4096], pl.INT8, pl.NZ]", "", "pass"),
                  kernel("w: pl.Tensor[[32, 128, 128, 16, 32], pl.INT8, pl.NZ]", "", f"{ATTR}\npass"))


def test_nz2_rank2_weight_gets_batch_1():
    # seed: [256, 512] INT8 -> [1, 16, 16, 16, 32]
    assert_blocks(kernel("w: pl.Tensor[[256, 512], pl.INT8, pl.NZ]", "", "pass"),
                  kernel("w: pl.Tensor[[1, 16, 16, 16, 32], pl.INT8, pl.NZ]", "", f"{ATTR}\npass"))


@pytest.mark.parametrize("dtype, logical, blocked", [
    ("pl.FP16", "[64, 64]", "[1, 4, 4, 16, 16]"),  # c0 = 16
    ("pl.BF16", "[32, 128]", "[1, 8, 2, 16, 16]"),  # c0 = 16
    ("pl.FP32", "[64, 16]", "[1, 2, 4, 16, 8]"),  # c0 = 8
    ("pl.INT32", "[16, 8]", "[1, 1, 1, 16, 8]"),  # c0 = 8
    ("pl.UINT8", "[16, 64]", "[1, 2, 1, 16, 32]"),  # c0 = 32
    ("pl.FP8E4M3FN", "[48, 32]", "[1, 1, 3, 16, 32]"),  # c0 = 32
])
def test_nz1_c0_is_elements_per_32_byte_line(dtype, logical, blocked):
    assert_blocks(kernel(f"w: pl.Tensor[{logical}, {dtype}, pl.NZ]", "", "pass"),
                  kernel(f"w: pl.Tensor[{blocked}, {dtype}, pl.NZ]", "", f"{ATTR}\npass"))


def test_nz2_rank3_batch_may_be_dynamic():
    dyn = 'B = pl.dynamic("B")\n'
    assert_blocks(kernel("w: pl.Tensor[[B, 256, 512], pl.INT8, pl.NZ]", "", "pass", dyn),
                  kernel("w: pl.Tensor[[B, 16, 16, 16, 32], pl.INT8, pl.NZ]", "", f"{ATTR}\npass", dyn))


def test_nz2_rank4_folds_static_leading_axes_into_the_batch():
    # [G, E, N, K] = [2, 3, 256, 512] -> batch G*E = 6
    assert_blocks(kernel("w: pl.Tensor[[2, 3, 256, 512], pl.INT8, pl.NZ]", "", "pass"),
                  kernel("w: pl.Tensor[[6, 16, 16, 16, 32], pl.INT8, pl.NZ]", "", f"{ATTR}\npass"))


def test_nz2_nd_tensors_and_return_types_next_to_nz_ones():
    # every NZ TensorType of the kernel is blocked (parameters, return type, annotations); ND ones stay
    before = kernel("x: pl.Tensor[[64, 64], pl.FP32], o: pl.Out[pl.Tensor[[64, 16], pl.FP32, pl.NZ]]",
                    "pl.Tensor[[64, 16], pl.FP32, pl.NZ]", "return o")
    expected = kernel("x: pl.Tensor[[64, 64], pl.FP32], o: pl.Out[pl.Tensor[[1, 2, 4, 16, 8], pl.FP32, pl.NZ]]",
                      "pl.Tensor[[1, 2, 4, 16, 8], pl.FP32, pl.NZ]", f"{ATTR}\nreturn o")
    assert_blocks(before, expected)


# --------------------------------------------------------------------------------------------------
# NZ-3: strides come from MaterializeTensorStrides' ordinary row-major path
# --------------------------------------------------------------------------------------------------


def test_nz3_strides_of_256x512_int8_after_materialize_tensor_strides():
    out = run(kernel("w: pl.Tensor[[256, 512], pl.INT8, pl.NZ]", "", "pass"))
    out = MaterializeTensorStrides().run(out, A2A3)
    assert_same(out, kernel("w: pl.Tensor[[1, 16, 16, 16, 32], pl.INT8, "
                            "pl.TensorView(stride=[131072, 8192, 512, 32, 1], layout=pl.TensorLayout.NZ)]",
                            "", f"{ATTR}\npass"))


def test_nz3_the_pass_itself_writes_no_strides():
    out = run(kernel("w: pl.Tensor[[256, 512], pl.INT8, pl.NZ]", "", "pass"))
    (w,) = out.functions[0].params
    assert w.type.view.stride is None


# --------------------------------------------------------------------------------------------------
# NZ-4: tile.load
# --------------------------------------------------------------------------------------------------

E_N_K = "w: pl.Tensor[[4, 512, 1024], pl.INT8, pl.NZ]"
E_N_K_BLOCKED = "w: pl.Tensor[[4, 32, 32, 16, 32], pl.INT8, pl.NZ]"


def test_nz4_seed_example_window_1_256_512_of_e_n_k():
    # seed: w[1:2, 256:512, 512:1024] of [E, N, K] INT8 -> offsets [1, 16, 16, 0, 0], sizes [1, 16, 16, 16, 32]
    before = kernel(E_N_K, "", """
        wt: pl.Tile[[256, 512], pl.INT8, pl.Mem.Mat] = pl.tile.load(w, [1, 256, 512], [1, 256, 512], target_memory=pl.Mem.Mat)
    """)
    expected = kernel(E_N_K_BLOCKED, "", f"""
        {ATTR}
        wt: pl.Tile[[256, 512], pl.INT8, pl.Mem.Mat] = pl.tile.load(w, [1, 16, 16, 0, 0], [1, 16, 16, 16, 32], target_memory=pl.Mem.Mat)
    """)
    assert_blocks(before, expected)


def test_nz4_whole_rank2_weight_load_has_zero_offsets():
    before = kernel("w: pl.Tensor[[256, 512], pl.INT8, pl.NZ]", "", """
        wt: pl.Tile[[256, 512], pl.INT8, pl.Mem.Mat] = pl.tile.load(w, [0, 0], [256, 512], target_memory=pl.Mem.Mat)
    """)
    expected = kernel("w: pl.Tensor[[1, 16, 16, 16, 32], pl.INT8, pl.NZ]", "", f"""
        {ATTR}
        wt: pl.Tile[[256, 512], pl.INT8, pl.Mem.Mat] = pl.tile.load(w, [0, 0, 0, 0, 0], [1, 16, 16, 16, 32], target_memory=pl.Mem.Mat)
    """)
    assert_blocks(before, expected)


def test_nz4_rank4_leading_offsets_fold_row_major_constant():
    # [g, e] = [1, 2] of [G, E] = [2, 3] -> b = 1*3 + 2 = 5
    before = kernel("w: pl.Tensor[[2, 3, 256, 512], pl.INT8, pl.NZ]", "", """
        wt: pl.Tile[[128, 256], pl.INT8, pl.Mem.Mat] = pl.tile.load(w, [1, 2, 128, 256], [1, 1, 128, 256], target_memory=pl.Mem.Mat)
    """)
    expected = kernel("w: pl.Tensor[[6, 16, 16, 16, 32], pl.INT8, pl.NZ]", "", f"""
        {ATTR}
        wt: pl.Tile[[128, 256], pl.INT8, pl.Mem.Mat] = pl.tile.load(w, [5, 8, 8, 0, 0], [1, 8, 8, 16, 32], target_memory=pl.Mem.Mat)
    """)
    assert_blocks(before, expected)


def test_nz4_rank4_symbolic_leading_offsets_fold_to_g_times_e_plus_e():
    params = "g: pl.Scalar[pl.INDEX], e: pl.Scalar[pl.INDEX], w: pl.Tensor[[2, 3, 256, 512], pl.INT8, pl.NZ]"
    before = kernel(params, "", """
        wt: pl.Tile[[256, 512], pl.INT8, pl.Mem.Mat] = pl.tile.load(w, [g, e, 0, 0], [1, 1, 256, 512], target_memory=pl.Mem.Mat)
    """)
    expected = kernel(params.replace("[2, 3, 256, 512]", "[6, 16, 16, 16, 32]"), "", f"""
        {ATTR}
        wt: pl.Tile[[256, 512], pl.INT8, pl.Mem.Mat] = pl.tile.load(w, [g * 3 + e, 0, 0, 0, 0], [1, 16, 16, 16, 32], target_memory=pl.Mem.Mat)
    """)
    assert_blocks(before, expected)


def test_nz4_rank3_leading_offset_is_the_batch_index_even_when_dynamic():
    dyn = 'B = pl.dynamic("B")\n'
    params = "i: pl.Scalar[pl.INDEX], w: pl.Tensor[[B, 256, 512], pl.INT8, pl.NZ]"
    before = kernel(params, "", """
        wt: pl.Tile[[256, 512], pl.INT8, pl.Mem.Mat] = pl.tile.load(w, [i, 0, 0], [1, 256, 512], target_memory=pl.Mem.Mat)
    """, dyn)
    expected = kernel(params.replace("[B, 256, 512]", "[B, 16, 16, 16, 32]"), "", f"""
        {ATTR}
        wt: pl.Tile[[256, 512], pl.INT8, pl.Mem.Mat] = pl.tile.load(w, [i, 0, 0, 0, 0], [1, 16, 16, 16, 32], target_memory=pl.Mem.Mat)
    """, dyn)
    assert_blocks(before, expected)


def test_nz4_unannotated_load_keeps_its_logical_2d_tile_type():
    before = kernel("w: pl.Tensor[[256, 512], pl.FP16, pl.NZ]", "", """
        wt = pl.tile.load(w, [16, 32], [64, 128], target_memory=pl.Mem.Mat)
    """)
    expected = kernel("w: pl.Tensor[[1, 32, 16, 16, 16], pl.FP16, pl.NZ]", "", f"""
        {ATTR}
        wt: pl.Tile[[64, 128], pl.FP16, pl.Mem.Mat] = pl.tile.load(w, [0, 2, 1, 0, 0], [1, 8, 4, 16, 16], target_memory=pl.Mem.Mat)
    """)
    assert_blocks(before, expected)


def test_nz4_static_valid_shape_blocks_like_the_window():
    before = kernel("w: pl.Tensor[[256, 512], pl.INT8, pl.NZ]", "", """
        wt: pl.Tile[[256, 512], pl.INT8, pl.Mem.Mat, pl.TileView(valid_shape=[240, 480])] = pl.tile.load(w, [0, 0], [256, 512], [240, 480], target_memory=pl.Mem.Mat)
    """)
    expected = kernel("w: pl.Tensor[[1, 16, 16, 16, 32], pl.INT8, pl.NZ]", "", f"""
        {ATTR}
        wt: pl.Tile[[256, 512], pl.INT8, pl.Mem.Mat, pl.TileView(valid_shape=[240, 480])] = pl.tile.load(w, [0, 0, 0, 0, 0], [1, 16, 16, 16, 32], [1, 15, 15, 16, 32], target_memory=pl.Mem.Mat)
    """)
    assert_blocks(before, expected)


def test_nz4_dynamic_valid_rows_provably_multiple_of_16_become_floordiv_rows_16():
    # the ragged last row tile: rows = min(800 - o0, 256) is a multiple of 16 (its sign is not needed)
    before = kernel("w: pl.Tensor[[800, 512], pl.INT8, pl.NZ]", "", """
        for o0 in pl.range(0, 800, 256):
            vr = pl.min(800 - o0, 256)
            wt: pl.Tile[[256, 512], pl.INT8, pl.Mem.Mat, pl.TileView(valid_shape=[vr, 512])] = pl.tile.load(w, [o0, 0], [256, 512], [vr, 512], target_memory=pl.Mem.Mat)
    """)
    expected = kernel("w: pl.Tensor[[1, 16, 50, 16, 32], pl.INT8, pl.NZ]", "", f"""
        {ATTR}
        for o0 in pl.range(0, 800, 256):
            vr = pl.min(800 - o0, 256)
            wt: pl.Tile[[256, 512], pl.INT8, pl.Mem.Mat, pl.TileView(valid_shape=[vr, 512])] = pl.tile.load(w, [0, 0, o0 // 16, 0, 0], [1, 16, 16, 16, 32], [1, 16, vr // 16, 16, 32], target_memory=pl.Mem.Mat)
    """)
    assert_blocks(before, expected)


def test_nz4_short_name_pl_load_is_rewritten_too():
    before = kernel("w: pl.Tensor[[256, 512], pl.INT8, pl.NZ]", "", """
        wt: pl.Tile[[256, 512], pl.INT8, pl.Mem.Mat] = pl.load(w, [0, 0], [256, 512], target_memory=pl.Mem.Mat)
    """)
    expected = kernel("w: pl.Tensor[[1, 16, 16, 16, 32], pl.INT8, pl.NZ]", "", f"""
        {ATTR}
        wt: pl.Tile[[256, 512], pl.INT8, pl.Mem.Mat] = pl.load(w, [0, 0, 0, 0, 0], [1, 16, 16, 16, 32], target_memory=pl.Mem.Mat)
    """)
    assert_blocks(before, expected)


# --------------------------------------------------------------------------------------------------
# NZ-8 / NZ-9: symbolic trailing offsets
# --------------------------------------------------------------------------------------------------


def test_nz8_grouped_matmul_weight_path_of_the_seed_compiles():
    # seed: for nb in pl.spmd(N // N_TILE): n0 = nb * N_TILE; for k0 in pl.pipeline(K_TILE, K, K_TILE, stage=2):
    #       wt = w[n0 : n0 + N_TILE, k0 : k0 + K_TILE]  -> row fractal n0 // 16, C0 block k0 // c0
    # with N = 1024, K = 4096, N_TILE = 256, K_TILE = 512, INT8 (c0 = 32)
    before = kernel("w: pl.Tensor[[1024, 4096], pl.INT8, pl.NZ]", "", """
        for nb in pl.range(4):
            n0 = nb * 256
            for k0 in pl.pipeline(512, 4096, 512, stage=2):
                wt: pl.Tile[[256, 512], pl.INT8, pl.Mem.Mat] = pl.tile.load(w, [n0, k0], [256, 512], target_memory=pl.Mem.Mat)
    """)
    expected = kernel("w: pl.Tensor[[1, 128, 64, 16, 32], pl.INT8, pl.NZ]", "", f"""
        {ATTR}
        for nb in pl.range(4):
            n0 = nb * 256
            for k0 in pl.pipeline(512, 4096, 512, stage=2):
                wt: pl.Tile[[256, 512], pl.INT8, pl.Mem.Mat] = pl.tile.load(w, [0, k0 // 32, n0 // 16, 0, 0], [1, 16, 16, 16, 32], target_memory=pl.Mem.Mat)
    """)
    assert_blocks(before, expected)


def test_nz8_block_index_modulo_times_multiple_is_a_provable_column_offset():
    # seed table: (blk % 2) * 512 -- divisibility carried by 512, sign by the block index; the blocked offset
    # is the whole expression divided in its own dtype (UINT64, the block index's)
    before = kernel("w: pl.Tensor[[256, 1024], pl.INT8, pl.NZ]", "", """
        blk = pl.tile.get_block_idx()
        k0 = blk % 2 * 512
        wt: pl.Tile[[256, 512], pl.INT8, pl.Mem.Mat] = pl.tile.load(w, [0, k0], [256, 512], target_memory=pl.Mem.Mat)
    """)
    expected = kernel("w: pl.Tensor[[1, 32, 16, 16, 32], pl.INT8, pl.NZ]", "", f"""
        {ATTR}
        blk = pl.tile.get_block_idx()
        k0 = blk % 2 * 512
        wt: pl.Tile[[256, 512], pl.INT8, pl.Mem.Mat] = pl.tile.load(w, [0, k0 // pl.const(32, pl.UINT64), 0, 0, 0], [1, 16, 16, 16, 32], target_memory=pl.Mem.Mat)
    """)
    assert_blocks(before, expected)


def test_nz9_blocked_offset_divides_the_whole_expression_and_keeps_its_wraparound():
    # spec: x: INT32 = 1 << 24; (x * 256) // 16 == 0 (x * 256 wraps to 0 in i32), x * (256 // 16) == 268435456
    body = """
        x: pl.Scalar[pl.INT32] = pl.const(16777216, pl.INT32)
        wt: pl.Tile[[256, 512], pl.INT8, pl.Mem.Mat] = pl.tile.load(w, [x * pl.const(256, pl.INT32), 0], [256, 512], target_memory=pl.Mem.Mat)
    """
    out = run(kernel("w: pl.Tensor[[512, 512], pl.INT8, pl.NZ]", "", body))
    expected = kernel("w: pl.Tensor[[1, 16, 32, 16, 32], pl.INT8, pl.NZ]", "", f"""
        {ATTR}
        x: pl.Scalar[pl.INT32] = pl.const(16777216, pl.INT32)
        wt: pl.Tile[[256, 512], pl.INT8, pl.Mem.Mat] = pl.tile.load(w, [0, 0, x * pl.const(256, pl.INT32) // pl.const(16, pl.INT32), 0, 0], [1, 16, 16, 16, 32], target_memory=pl.Mem.Mat)
    """)
    assert_same(out, expected)
    load = next(n for n in walk(out) if getattr(n, "op", None) == "tile.load")
    row_fractal = load.args[1].items[2]
    assert eval_int(row_fractal, {"x": 1 << 24}, dtype_bits=32) == 0  # the IR's own wrap-around
    reassociated = parse_program(kernel("x: pl.Scalar[pl.INT32]", "", "y = x * pl.const(16, pl.INT32)"), "r.ir")
    y = reassociated.functions[0].body[0].value
    assert eval_int(y, {"x": 1 << 24}, dtype_bits=32) == 268435456  # the wrong fractal a re-association reads


def test_nz8_unprovable_symbolic_offset_is_rejected_listing_the_provable_forms():
    src = kernel("r0: pl.Scalar[pl.INDEX], w: pl.Tensor[[512, 512], pl.INT8, pl.NZ]", "", """
        wt: pl.Tile[[256, 512], pl.INT8, pl.Mem.Mat] = pl.tile.load(w, [r0, 0], [256, 512], target_memory=pl.Mem.Mat)
    """)
    d = rejected(src)
    assert d.code == "PTOC-E0348" and d.rule == "NZ-8" and d.span.line == line_of(src, "pl.tile.load")
    assert "multiple of 16" in d.message and all(f in d.message for f in PROVABLE_FORMS)


def test_nz8_difference_proves_divisibility_but_never_sign():
    src = kernel("w: pl.Tensor[[512, 512], pl.INT8, pl.NZ]", "", """
        for i in pl.range(2):
            r0 = 256 - i * 256
            wt: pl.Tile[[256, 512], pl.INT8, pl.Mem.Mat] = pl.tile.load(w, [r0, 0], [256, 512], target_memory=pl.Mem.Mat)
    """)
    d = rejected(src)
    assert d.code == "PTOC-E0348" and d.rule == "NZ-8" and "non-negative" in d.message


def test_nz8_iteration_arguments_are_never_resolved():
    src = kernel("w: pl.Tensor[[512, 512], pl.INT8, pl.NZ]", "", """
        for i, (k0,) in pl.range(2, init_values=(0,)):
            wt: pl.Tile[[256, 256], pl.INT8, pl.Mem.Mat] = pl.tile.load(w, [0, k0], [256, 256], target_memory=pl.Mem.Mat)
            k1 = k0 + 256
            k2: pl.Scalar[pl.INDEX] = pl.yield_(k1)
    """)
    d = rejected(src)
    assert d.code == "PTOC-E0348" and "column offset `k0`" in d.message


# --------------------------------------------------------------------------------------------------
# NZ-7: the Acc write-back
# --------------------------------------------------------------------------------------------------

ACC = "a: pl.Tile[[64, 16], pl.FP32, pl.Mem.Acc]"


def test_nz7_seed_example_64x16_acc_store_gets_offsets_zero_and_partition_1_2_4_16_8():
    before = kernel(f"{ACC}, o: pl.Out[pl.Tensor[[64, 16], pl.FP32, pl.NZ]]", "pl.Tensor[[64, 16], pl.FP32, pl.NZ]", """
        r: pl.Tensor[[64, 16], pl.FP32, pl.NZ] = pl.tile.store(a, [0, 0], o, attrs={"st_phase": "Final"})
        return r
    """)
    expected = kernel(f"{ACC}, o: pl.Out[pl.Tensor[[1, 2, 4, 16, 8], pl.FP32, pl.NZ]]",
                      "pl.Tensor[[1, 2, 4, 16, 8], pl.FP32, pl.NZ]", f"""
        {ATTR}
        r: pl.Tensor[[1, 2, 4, 16, 8], pl.FP32, pl.NZ] = pl.tile.store(a, [0, 0, 0, 0, 0], o, [1, 2, 4, 16, 8], attrs={{"st_phase": "Final"}})
        return r
    """)
    out = run(before)
    assert_same(out, expected)
    # ... and MaterializeTensorStrides gives the seed's NzStride<1024, 512, 128, 8, 1>
    strided = MaterializeTensorStrides().run(out, A2A3)
    o = strided.functions[0].params[1].type
    assert [s.value for s in o.view.stride] == [1024, 512, 128, 8, 1]


def test_nz7_panel_store_into_rank3_target_any_batch_offset():
    # one [64, 16] panel of [PANELS, R, C] = [4, 64, 16] at panel p; FlattenTileNdTo2D gave the store its
    # logical partition [1, 64, 16]
    params = f"p: pl.Scalar[pl.INDEX], {ACC}, o: pl.Out[pl.Tensor[[4, 64, 16], pl.FP32, pl.NZ]]"
    before = kernel(params, "pl.Tensor[[4, 64, 16], pl.FP32, pl.NZ]", """
        r: pl.Tensor[[4, 64, 16], pl.FP32, pl.NZ] = pl.tile.store(a, [p, 0, 0], o, [1, 64, 16])
        return r
    """)
    expected = kernel(params.replace("[4, 64, 16]", "[4, 2, 4, 16, 8]"), "pl.Tensor[[4, 2, 4, 16, 8], pl.FP32, pl.NZ]", f"""
        {ATTR}
        r: pl.Tensor[[4, 2, 4, 16, 8], pl.FP32, pl.NZ] = pl.tile.store(a, [p, 0, 0, 0, 0], o, [1, 2, 4, 16, 8])
        return r
    """)
    assert_blocks(before, expected)


def test_nz7_column_blocks_stored_in_a_loop_carrying_the_nz_output():
    # 64 x 16 column blocks of a [64, 64] output at n0 = nb * 16 (provably a non-negative multiple of 8)
    T = "pl.Tensor[[64, 64], pl.FP32, pl.NZ]"
    TB = "pl.Tensor[[1, 8, 4, 16, 8], pl.FP32, pl.NZ]"
    before = kernel(f"{ACC}, o: pl.Out[{T}]", T, f"""
        for nb, (oc,) in pl.range(4, init_values=(o,)):
            n0 = nb * 16
            r: {T} = pl.tile.store(a, [0, n0], oc)
            r2: {T} = pl.yield_(r)
        return r2
    """)
    expected = kernel(f"{ACC}, o: pl.Out[{TB}]", TB, f"""
        {ATTR}
        for nb, (oc,) in pl.range(4, init_values=(o,)):
            n0 = nb * 16
            r: {TB} = pl.tile.store(a, [0, n0 // 8, 0, 0, 0], oc, [1, 2, 4, 16, 8])
            r2: {TB} = pl.yield_(r)
        return r2
    """)
    assert_blocks(before, expected)


def store_src(tile: str = ACC, target: str = "[64, 16]", offsets: str = "[0, 0]", extra: str = "",
              dtype: str = "pl.FP32", params: str = "", dyn: str = "") -> str:
    T = f"pl.Tensor[{target}, {dtype}, pl.NZ]"
    return kernel(f"{params}{tile}, o: pl.Out[{T}]", T, f"""
        r: {T} = pl.tile.store(a, {offsets}, o{extra})
        return r
    """, dyn)


def test_nz7_a5_has_no_nz_write_back():
    d = rejected(store_src(), A5)
    assert d.code == "PTOC-E0355" and d.rule == "NZ-7"


@pytest.mark.parametrize("space", ["Vec", "Mat"])
def test_nz7_vec_and_mat_sources_are_rejected(space):
    d = rejected(store_src(tile=f"a: pl.Tile[[64, 16], pl.FP32, pl.Mem.{space}]"))
    assert d.code == "PTOC-E0356" and d.rule == "NZ-7" and space in d.message


def test_nz7_dtype_conversion_on_the_write_back_is_rejected():
    d = rejected(store_src(dtype="pl.FP16"))
    assert d.code == "PTOC-E0357" and d.rule == "NZ-7"


@pytest.mark.parametrize("kw", ["atomic=pl.AtomicType.Add", "pre_quant=True", "pre_relu=True",
                                'attrs={"pre_relu": True}'])
def test_nz7_atomic_pre_quant_pre_relu_are_rejected(kw):
    d = rejected(store_src(extra=f", {kw}"))
    assert d.code == "PTOC-E0358" and d.rule == "NZ-7"


def test_nz7_dynamic_tile_is_rejected():
    d = rejected(store_src(tile="a: pl.Tile[[M, 16], pl.FP32, pl.Mem.Acc]", dyn='M = pl.dynamic("M")\n'))
    assert d.code == "PTOC-E0359" and "static" in d.message


def test_nz7_partially_valid_tile_is_rejected():
    d = rejected(store_src(tile="a: pl.Tile[[64, 16], pl.FP32, pl.Mem.Acc, pl.TileView(valid_shape=[48, 16])]"))
    assert d.code == "PTOC-E0359" and "fully valid" in d.message


def test_nz7_rows_and_cols_must_be_multiples_of_16_even_though_c0_is_8():
    d = rejected(store_src(tile="a: pl.Tile[[64, 8], pl.FP32, pl.Mem.Acc]", target="[64, 8]"))
    assert d.code == "PTOC-E0359" and "multiples of 16" in d.message


def test_nz7_store_extent_above_4095_columns_is_rejected():
    d = rejected(store_src(tile="a: pl.Tile[[16, 4096], pl.FP32, pl.Mem.Acc]", target="[16, 4096]"))
    assert d.code == "PTOC-E0360" and "4095" in d.message


def test_nz7_acc_tile_larger_than_l0c_is_rejected():
    # seed: a 64 x 1024 FP32 output is 256 KiB; A2/A3 L0C is 128 KiB
    d = rejected(store_src(tile="a: pl.Tile[[64, 1024], pl.FP32, pl.Mem.Acc]", target="[64, 1024]"))
    assert d.code == "PTOC-E0361" and "262144" in d.message and "131072" in d.message


def test_nz7_row_sub_window_is_rejected():
    # seed: 64 x 16 into a [128, 32] parent would be written with the wrong column-block distance
    d = rejected(store_src(target="[128, 32]"))
    assert d.code == "PTOC-E0362" and d.rule == "NZ-7" and "whole row axis" in d.message


def test_nz7_more_than_one_panel_per_store_is_rejected():
    # a flattened [2, 64, 16] Acc tile stored as one [2, 64, 16] partition of [4, 64, 16]
    d = rejected(store_src(tile="a: pl.Tile[[128, 16], pl.FP32, pl.Mem.Acc]", target="[4, 64, 16]",
                           offsets="[0, 0, 0]", extra=", [2, 64, 16]"))
    assert d.code == "PTOC-E0363" and "batch extent 1" in d.message


@pytest.mark.parametrize("offset, code, words", [
    ("[0, 4]", "PTOC-E0364", "multiple of 8"),
    ("[0, 24]", "PTOC-E0364", "exceed"),
    ("[0, c]", "PTOC-E0348", "multiple of 8"),
])
def test_nz7_column_offset_must_be_provably_aligned_and_in_range(offset, code, words):
    d = rejected(store_src(target="[64, 32]", offsets=offset, params="c: pl.Scalar[pl.INDEX], "))
    assert d.code == code and words in d.message


# --------------------------------------------------------------------------------------------------
# NZ-10: rejections
# --------------------------------------------------------------------------------------------------


def param_src(t: str, dyn: str = "") -> str:
    return kernel(f"w: {t}", "", "pass", dyn)


@pytest.mark.parametrize("t, code, words", [
    ("pl.Tensor[[100, 512], pl.INT8, pl.NZ]", "PTOC-E0340", "shape[-2] = 100"),
    ("pl.Tensor[[256, 100], pl.INT8, pl.NZ]", "PTOC-E0340", "c0 = 32"),
    ("pl.Tensor[[16, 12], pl.FP32, pl.NZ]", "PTOC-E0340", "c0 = 8"),
    ("pl.Tensor[[M, 512], pl.INT8, pl.NZ]", "PTOC-E0341", "rows"),
    ("pl.Tensor[[256, M], pl.INT8, pl.NZ]", "PTOC-E0341", "columns"),
    ("pl.Tensor[[512], pl.INT8, pl.NZ]", "PTOC-E0342", "rank >= 2"),
    ("pl.Tensor[[M, 3, 256, 512], pl.INT8, pl.NZ]", "PTOC-E0343", "static"),
    ("pl.Tensor[[256, 512], pl.INT8, pl.TensorView(stride=[512, 1], layout=pl.TensorLayout.NZ)]", "PTOC-E0345",
     "strides"),
    ("pl.Tensor[[256, 512], pl.INT8, pl.TensorView(valid_shape=[200, 512], layout=pl.TensorLayout.NZ)]",
     "PTOC-E0345", "partially valid"),
])
def test_nz10_unblockable_tensor_types_are_rejected(t, code, words):
    src = param_src(t, 'M = pl.dynamic("M")\n')
    d = rejected(src)
    assert d.code == code and d.rule == "NZ-10" and words in d.message, d
    assert d.span.line == line_of(src, "def k")


@pytest.mark.parametrize("dtype", ["pl.INT4", "pl.UINT4", "pl.HF4", "pl.BOOL", "pl.FP4E2M1X2"])
def test_nz10_sub_byte_and_packed_fp4_dtypes_are_rejected(dtype):
    d = rejected(param_src(f"pl.Tensor[[256, 512], {dtype}, pl.NZ]"))
    assert d.code == "PTOC-E0344" and d.rule == "NZ-10"


def test_nz10_full_tensor_valid_shape_is_accepted_and_dropped():
    assert_blocks(param_src("pl.Tensor[[256, 512], pl.INT8, pl.TensorView(valid_shape=[256, 512], "
                            "layout=pl.TensorLayout.NZ)]"),
                  kernel("w: pl.Tensor[[1, 16, 16, 16, 32], pl.INT8, pl.NZ]", "", f"{ATTR}\npass"))


def load_src(load: str, t: str = "pl.Tensor[[512, 512], pl.INT8, pl.NZ]", params: str = "") -> str:
    return kernel(f"{params}w: {t}", "", f"wt = {load}")


@pytest.mark.parametrize("mem", [", target_memory=pl.Mem.Vec", ""])
def test_nz10_load_into_anything_but_mat_is_rejected(mem):
    src = load_src(f"pl.tile.load(w, [0, 0], [256, 512]{mem})")
    d = rejected(src)
    assert d.code == "PTOC-E0346" and d.rule == "NZ-10" and "Mat" in d.hint
    assert d.span.line == line_of(src, "pl.tile.load")


@pytest.mark.parametrize("offsets, words", [("[8, 0]", "row offset 8"), ("[0, 16]", "column offset 16")])
def test_nz10_unaligned_constant_offsets_are_rejected(offsets, words):
    d = rejected(load_src(f"pl.tile.load(w, {offsets}, [256, 256], target_memory=pl.Mem.Mat)"))
    assert d.code == "PTOC-E0347" and d.rule == "NZ-10" and words in d.message


def test_nz10_window_that_is_not_whole_fractals_is_rejected():
    d = rejected(load_src("pl.tile.load(w, [0, 0], [250, 512], target_memory=pl.Mem.Mat)"))
    assert d.code == "PTOC-E0347" and "fractals" in d.message


def test_nz10_window_past_the_tensor_is_rejected():
    d = rejected(load_src("pl.tile.load(w, [384, 0], [256, 512], target_memory=pl.Mem.Mat)"))
    assert d.code == "PTOC-E0347" and "exceeds" in d.message


def test_nz10_leading_offset_past_the_last_panel_is_rejected():
    d = rejected(load_src("pl.tile.load(w, [4, 0, 0], [1, 256, 512], target_memory=pl.Mem.Mat)",
                          t="pl.Tensor[[4, 256, 512], pl.INT8, pl.NZ]"))
    assert d.code == "PTOC-E0347" and "leading offset 0 = 4" in d.message


def test_nz10_valid_rows_that_may_end_inside_a_fractal_are_rejected():
    d = rejected(load_src("pl.tile.load(w, [0, 0], [256, 512], [v, 512], target_memory=pl.Mem.Mat)",
                          params="v: pl.Scalar[pl.INDEX], "))
    assert d.code == "PTOC-E0349" and d.rule == "NZ-10" and "multiple of 16" in d.message


def test_nz10_constant_valid_rows_inside_a_fractal_are_rejected():
    d = rejected(load_src("pl.tile.load(w, [0, 0], [256, 512], [200, 512], target_memory=pl.Mem.Mat)"))
    assert d.code == "PTOC-E0349"


def test_nz10_load_of_more_than_one_batch_panel_is_rejected():
    d = rejected(load_src("pl.tile.load(w, [0, 0, 0], [2, 256, 512], target_memory=pl.Mem.Mat)",
                          t="pl.Tensor[[4, 256, 512], pl.INT8, pl.NZ]"))
    assert d.code == "PTOC-E0350" and d.rule == "NZ-10"


def test_nz10_other_consumers_of_an_nz_tensor_are_rejected():
    src = kernel("w: pl.Tensor[[256, 512], pl.INT8, pl.NZ]", "", "x = pl.tensor.read(w, [0, 0])")
    d = rejected(src)
    assert d.code == "PTOC-E0353" and d.rule == "NZ-10" and "'w'" in d.message
    assert d.span.line == line_of(src, "tensor.read")


def test_nz10_nz_tensor_created_inside_a_kernel_is_rejected():
    src = kernel("x: pl.Tensor[[16, 16], pl.FP32]", "", """
        t = pl.tensor.create([256, 512], dtype=pl.INT8, layout=pl.TensorLayout.NZ)
    """)
    d = rejected(src)
    assert d.code == "PTOC-E0353" and "produces an NZ tensor" in d.message


def test_nz10_distributed_remote_load_is_rejected():
    src = load_src("pl.tile.remote_load(w, [0, 0], [256, 512], peer=1)")
    d = rejected(src, check_ops=False)
    assert d.code == "PTOC-E0353" and "distributed" in d.message


@pytest.mark.parametrize("call", ["pl.tensor.view(w, [512, 256])",
                                  "pl.tensor.reinterpret_view(w, pl.INT16)"])
def test_nz10_view_and_reinterpret_view_are_rejected_at_op_construction_and_by_the_pass(call):
    src = kernel("w: pl.Tensor[[256, 512], pl.INT8, pl.NZ]", "", f"x = {call}")
    with pytest.raises(CompileError) as e:  # the op registry rejects them when the program is checked
        parse(src)
    assert any(d.code == "PTOC-E0202" for d in e.value.diagnostics)
    d = rejected(src, check_ops=False)  # and an unchecked program meets the pass's consumer rule
    assert d.code == "PTOC-E0353"


def test_nz10_slice_windowing_the_trailing_plane_is_rejected():
    src = kernel("w: pl.Tensor[[4, 256, 512], pl.INT8, pl.NZ]", "", "s = pl.tensor.slice(w, [1, 128, 512], [0, 128, 0])")
    with pytest.raises(CompileError) as e:
        parse(src)
    assert e.value.diagnostics[0].rule == "NZ-10"
    d = rejected(src, check_ops=False)
    assert d.code == "PTOC-E0351" and d.rule == "NZ-10" and "[256, 512]" in d.message


def test_nz10_reshape_to_anything_but_flat_n_is_rejected():
    src = kernel("w: pl.Tensor[[256, 512], pl.INT8, pl.NZ]", "", "x = pl.tensor.reshape(w, [128, 1024])")
    with pytest.raises(CompileError) as e:
        parse(src)
    assert e.value.diagnostics[0].rule == "NZ-10"
    d = rejected(src, check_ops=False)
    assert d.code == "PTOC-E0352" and d.rule == "NZ-10"


def test_nz10_whole_tensor_flat_reshape_is_kept_as_nd():
    body = "x: pl.Tensor[[131072], pl.INT8] = pl.tensor.reshape(w, [131072])"
    assert_blocks(kernel("w: pl.Tensor[[256, 512], pl.INT8, pl.NZ]", "", body),
                  kernel("w: pl.Tensor[[1, 16, 16, 16, 32], pl.INT8, pl.NZ]", "", f"{ATTR}\n{body}"))


def test_nz10_every_rejection_code_is_registered():
    for code in ("PTOC-E0340", "PTOC-E0341", "PTOC-E0342", "PTOC-E0343", "PTOC-E0344", "PTOC-E0345",
                 "PTOC-E0346", "PTOC-E0347", "PTOC-E0348", "PTOC-E0349", "PTOC-E0350", "PTOC-E0351",
                 "PTOC-E0352", "PTOC-E0353", "PTOC-E0355", "PTOC-E0356", "PTOC-E0357", "PTOC-E0358",
                 "PTOC-E0359", "PTOC-E0360", "PTOC-E0361", "PTOC-E0362", "PTOC-E0363", "PTOC-E0364",
                 "PTOC-E0370"):
        assert code in CODES


# --------------------------------------------------------------------------------------------------
# NZ-11: slices of leading axes; tensor.dim
# --------------------------------------------------------------------------------------------------


def test_nz11_leading_axis_slice_is_blocked_like_a_load():
    before = kernel("w: pl.Tensor[[4, 256, 512], pl.INT8, pl.NZ]", "", """
        s: pl.Tensor[[1, 256, 512], pl.INT8, pl.NZ] = pl.tensor.slice(w, [1, 256, 512], [2, 0, 0])
        wt: pl.Tile[[256, 256], pl.INT8, pl.Mem.Mat] = pl.tile.load(s, [0, 0, 256], [1, 256, 256], target_memory=pl.Mem.Mat)
    """)
    expected = kernel("w: pl.Tensor[[4, 16, 16, 16, 32], pl.INT8, pl.NZ]", "", f"""
        {ATTR}
        s: pl.Tensor[[1, 16, 16, 16, 32], pl.INT8, pl.NZ] = pl.tensor.slice(w, [1, 16, 16, 16, 32], [2, 0, 0, 0, 0])
        wt: pl.Tile[[256, 256], pl.INT8, pl.Mem.Mat] = pl.tile.load(s, [0, 8, 0, 0, 0], [1, 8, 16, 16, 32], target_memory=pl.Mem.Mat)
    """)
    assert_blocks(before, expected)


def test_nz11_scalar_index_of_a_leading_axis_needs_no_drop_dims_after_folding():
    # w[1] of [2, 3, 256, 512]: the [3, 256, 512] layer stack starts at batch 1*3 + 0 = 3
    before = kernel("w: pl.Tensor[[2, 3, 256, 512], pl.INT8, pl.NZ]", "", """
        s: pl.Tensor[[3, 256, 512], pl.INT8, pl.NZ] = pl.tensor.slice(w, [1, 3, 256, 512], [1, 0, 0, 0], drop_dims=[0])
        wt: pl.Tile[[256, 512], pl.INT8, pl.Mem.Mat] = pl.tile.load(s, [2, 0, 0], [1, 256, 512], target_memory=pl.Mem.Mat)
    """)
    expected = kernel("w: pl.Tensor[[6, 16, 16, 16, 32], pl.INT8, pl.NZ]", "", f"""
        {ATTR}
        s: pl.Tensor[[3, 16, 16, 16, 32], pl.INT8, pl.NZ] = pl.tensor.slice(w, [3, 16, 16, 16, 32], [3, 0, 0, 0, 0])
        wt: pl.Tile[[256, 512], pl.INT8, pl.Mem.Mat] = pl.tile.load(s, [2, 0, 0, 0, 0], [1, 16, 16, 16, 32], target_memory=pl.Mem.Mat)
    """)
    assert_blocks(before, expected)


def test_nz11_leading_window_that_is_not_one_run_of_panels_is_rejected():
    src = kernel("w: pl.Tensor[[2, 3, 256, 512], pl.INT8, pl.NZ]", "",
                 "s = pl.tensor.slice(w, [2, 1, 256, 512], [0, 1, 0, 0])")
    d = rejected(src)
    assert d.code == "PTOC-E0351" and "contiguous" in d.message


def test_nz11_tensor_dim_of_a_logical_axis():
    dyn = 'B = pl.dynamic("B")\n'
    before = kernel("w: pl.Tensor[[B, 256, 512], pl.INT8, pl.NZ]", "", """
        b = pl.tensor.dim(w, 0)
        r = pl.tensor.dim(w, 1)
        c = pl.tensor.dim(w, -1)
    """, dyn)
    expected = kernel("w: pl.Tensor[[B, 16, 16, 16, 32], pl.INT8, pl.NZ]", "", f"""
        {ATTR}
        b = pl.tensor.dim(w, 0)
        r = 256
        c = 512
    """, dyn)
    assert_blocks(before, expected)


# --------------------------------------------------------------------------------------------------
# NZ-13: idempotence
# --------------------------------------------------------------------------------------------------


def test_nz13_rewritten_function_is_marked_and_a_second_run_changes_nothing():
    once = run(kernel("w: pl.Tensor[[256, 512], pl.INT8, pl.NZ]", "", """
        wt: pl.Tile[[256, 512], pl.INT8, pl.Mem.Mat] = pl.tile.load(w, [0, 0], [256, 512], target_memory=pl.Mem.Mat)
    """))
    f = once.functions[0]
    assert f.attrs == ((StrLit(MARK), ConstBool(True)),)
    assert BlockNzTensorViews().run(once, A2A3) is once


def test_nz13_marked_function_is_never_reblocked_even_if_its_shape_looks_logical():
    # [16, 32] could be a logical INT8 plane, but the mark says this function was blocked already
    src = kernel("w: pl.Tensor[[1, 1, 1, 16, 32], pl.INT8, pl.NZ]", "", f"{ATTR}\npass")
    prog = parse(src)
    assert BlockNzTensorViews().run(prog, A2A3) is prog


def test_nz13_existing_func_attrs_are_kept_and_the_mark_appended():
    before = kernel("w: pl.Tensor[[256, 512], pl.INT8, pl.NZ]", "", 'pl.func_attr({"tag": 1})\npass')
    expected = kernel("w: pl.Tensor[[1, 16, 16, 16, 32], pl.INT8, pl.NZ]", "",
                      f'pl.func_attr({{"tag": 1, "{MARK}": True}})\npass')
    assert_blocks(before, expected)


# --------------------------------------------------------------------------------------------------
# NZ-16: orchestration functions keep the logical shapes
# --------------------------------------------------------------------------------------------------

ORCH = """    @pl.function(type=pl.FunctionType.Orchestration)
    def main(self, w: pl.Tensor[[256, 512], pl.INT8, pl.NZ], o: pl.Out[pl.Tensor[[64, 16], pl.FP32, pl.NZ]]) -> pl.Tensor[[64, 16], pl.FP32, pl.NZ]:
{call}
"""


def test_nz16_orchestration_is_unchanged_and_its_call_of_the_blocked_kernel_still_verifies():
    # the verifier checks a call's argument count, not its types: logical tensors reach the blocked kernel
    # (the orchestration entry re-describes them in blocked form at run time, metadata only)
    call = "        self.k(w, o)\n        return o"
    params = "w: pl.Tensor[[256, 512], pl.INT8, pl.NZ], o: pl.Out[pl.Tensor[[64, 16], pl.FP32, pl.NZ]]"
    before = kernel(params, "", "pass", extra=ORCH.format(call=call))
    out = run(before)
    assert out.functions[1] == parse(before).functions[1]
    assert out.functions[0].params[0].type.rank == 5


def test_nz16_orchestration_may_annotate_a_kernel_nz_result_with_its_logical_type():
    call = ("        r: pl.Tensor[[64, 16], pl.FP32, pl.NZ] = self.k(w, o)\n        return r")
    params = "w: pl.Tensor[[256, 512], pl.INT8, pl.NZ], o: pl.Out[pl.Tensor[[64, 16], pl.FP32, pl.NZ]]"
    out = run(kernel(params, "pl.Tensor[[64, 16], pl.FP32, pl.NZ]", "return o", extra=ORCH.format(call=call)))
    k, orch = out.functions
    assert [d.value for d in k.returns[0].shape] == [1, 2, 4, 16, 8]  # the kernel's result is blocked (NZ-2)
    (r,) = [s for s in orch.body if getattr(s, "target", None) is not None and s.target.name == "r"]
    assert [d.value for d in r.annotation.shape] == [64, 16] and r.annotation.layout == "NZ"  # still logical


DISTRIBUTED_NZ = """import pypto.language as pl
import pypto.language.distributed as pld

@pl.program
class p:
    @pl.function(type=pl.FunctionType.AIC)
    def k(self, w: WEIGHT, out: pl.Out[pl.Tensor[[64, 32], pl.FP16]]) -> pl.Tensor[[64, 32], pl.FP16]:
        t: pl.Tile[[64, 32], pl.FP16, pl.Mem.Mat] = pl.tile.load(w, [0, 0], [64, 32], target_memory=pl.Mem.Mat)
        o: pl.Tensor[[64, 32], pl.FP16] = pl.tile.store(t, [0, 0], out)
        return o
"""


def test_an_nz_distributed_tensor_is_blocked_as_an_nz_tensor_is():
    """A `pld.DistributedTensor` is a tensor wherever a tensor is expected: annotated NZ, it is blocked
    (NZ-1) and addressed exactly as the same `pl.Tensor` (it was left unblocked, an internal error)."""
    from ptoc.codegen.pto import emit_module
    from ptoc.driver import frontend, lower

    outs = []
    for weight in ("pld.DistributedTensor[[64, 32], pl.FP16, pl.NZ]", "pl.Tensor[[64, 32], pl.FP16, pl.NZ]"):
        ctx = CompileContext(arch="a2a3")
        low = lower(frontend(DISTRIBUTED_NZ.replace("WEIGHT", weight), "d.ir", ctx), ctx)
        outs.append(emit_module(low.program, ctx)[0])
    assert outs[0] == outs[1]
    # [64, 32] FP16 NZ (c0 = 256 / 16 = 16) -> [1, 32/16, 64/16, 16, 16], strides [2*4*256, 4*256, 256, 16, 1]
    view = next(line for line in outs[0].splitlines() if "%w_view = pto.make_tensor_view" in line)
    assert "shape = [%c1_index, %c2_index, %c4_index, %c16_index, %c16_index]" in view
    assert "strides = [%c2048_index, %c1024_index, %c256_index, %c16_index, %c1_index]" in view
    assert "#pto.layout<nz>" in view
