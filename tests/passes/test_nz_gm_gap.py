"""NZ-12: the temporary GM-gap guard of BlockNzTensorViews (pto-isa#317).

Delete this file together with `check_nz_gm_gap` once pto-isa#317 is fixed. Every row of the seed's table
is a test: gap = R - TR in 32-byte blocks (dtype-independent), at most 65535, for loads spanning more than
one column block; TR is measured on valid_shape when the load has one, a dynamic row extent at 0 rows.
"""

import textwrap

import pytest

from ptoc.context import CompileContext
from ptoc.diagnostics import CompileError
from ptoc.frontend.parser import parse_program
from ptoc.ir.printer import print_program
from ptoc.passes.BlockNzTensorViews import MARK, BlockNzTensorViews, check_nz_gm_gap
from ptoc.passes.manager import check_invariants

CTX = CompileContext(arch="a2a3")
ATTR = f'pl.func_attr({{"{MARK}": True}})'


def kernel(w: str, body: str) -> str:
    body = textwrap.indent(textwrap.dedent(body).strip("\n"), " " * 8)
    return f"@pl.program\nclass p:\n    @pl.function(type=pl.FunctionType.InCore)\n    def k(self, w: {w}):\n{body}\n"


def load(w: str, window: str, tile: str) -> str:
    return kernel(w, f"wt: pl.Tile[{tile}, pl.INT8, pl.Mem.Mat] = pl.tile.load(w, [0, 0], {window}, "
                     "target_memory=pl.Mem.Mat)")


def run(text: str):
    prog = parse_program(text, "before.ir", ctx=CTX)
    out = BlockNzTensorViews().run(prog, CTX)
    check_invariants(out, CTX, BlockNzTensorViews())
    return out


def load_window(out) -> tuple[list, list | None]:
    """(blocked sizes, blocked valid sizes or None) of the kernel's one tile.load after the pass."""
    (stmt,) = [s for s in out.functions[0].body if getattr(getattr(s, "value", None), "op", None) == "tile.load"]
    args = stmt.value.args
    return [d.value for d in args[2].items], ([d.value for d in args[3].items] if len(args) > 3 else None)


def rejected(text: str):
    prog = parse_program(text, "before.ir", ctx=CTX)
    with pytest.raises(CompileError) as e:
        BlockNzTensorViews().run(prog, CTX)
    (d,) = e.value.diagnostics
    assert d.code == "PTOC-E0370" and d.rule == "NZ-12"
    assert "row tiles" in d.hint and "[LAYERS, K, N]" in d.hint
    return d


def test_gm_gap_65520_accepted_r65536_tr16():
    out = run(load("pl.Tensor[[65536, 64], pl.INT8, pl.NZ]", "[16, 64]", "[16, 64]"))
    expected = parse_program(kernel("pl.Tensor[[1, 2, 4096, 16, 32], pl.INT8, pl.NZ]", f"""
        {ATTR}
        wt: pl.Tile[[16, 64], pl.INT8, pl.Mem.Mat] = pl.tile.load(w, [0, 0, 0, 0, 0], [1, 2, 1, 16, 32], target_memory=pl.Mem.Mat)
    """), "expected.ir", ctx=CTX)
    assert out == expected, f"got:\n{print_program(out)}\nexpected:\n{print_program(expected)}"


def test_gm_gap_65536_rejected_r65552_tr16():
    d = rejected(load("pl.Tensor[[65552, 64], pl.INT8, pl.NZ]", "[16, 64]", "[16, 64]"))
    assert "65552 - 16 = 65536" in d.message and "65535" in d.message


def test_gm_gap_65520_accepted_r65552_tr32_same_tensor_wider_tile():
    out = run(load("pl.Tensor[[65552, 64], pl.INT8, pl.NZ]", "[32, 64]", "[32, 64]"))
    assert load_window(out) == ([1, 2, 2, 16, 32], None)  # two column blocks of 32 rows: gap 65520


def test_gm_gap_measured_on_valid_shape_partition_1x2x1x16x32_rejected():
    # shapes [32, 64] alone would give 65520; valid_shape [16, 64] is the emitted window: gap 65536
    src = kernel("pl.Tensor[[65552, 64], pl.INT8, pl.NZ]",
                 "wt: pl.Tile[[32, 64], pl.INT8, pl.Mem.Mat, pl.TileView(valid_shape=[16, 64])] = "
                 "pl.tile.load(w, [0, 0], [32, 64], [16, 64], target_memory=pl.Mem.Mat)")
    d = rejected(src)
    assert "65536" in d.message


def test_gm_gap_single_column_block_load_is_never_limited():
    # [65552, 32] INT8 has one column block: the truncated gmGap field is never read
    out = run(load("pl.Tensor[[65552, 32], pl.INT8, pl.NZ]", "[16, 32]", "[16, 32]"))
    assert load_window(out) == ([1, 1, 1, 16, 32], None)


def test_gm_gap_single_column_block_by_valid_shape_is_not_limited():
    src = kernel("pl.Tensor[[65552, 64], pl.INT8, pl.NZ]",
                 "wt: pl.Tile[[16, 64], pl.INT8, pl.Mem.Mat, pl.TileView(valid_shape=[16, 32])] = "
                 "pl.tile.load(w, [0, 0], [16, 64], [16, 32], target_memory=pl.Mem.Mat)")
    assert load_window(run(src)) == ([1, 2, 1, 16, 32], [1, 1, 1, 16, 32])  # one valid column block


def test_gm_gap_dynamic_row_extent_is_checked_at_zero_rows():
    body = """
        for o0 in pl.range(0, {R}, 256):
            vr = pl.min({R} - o0, 256)
            wt: pl.Tile[[256, 64], pl.INT8, pl.Mem.Mat, pl.TileView(valid_shape=[vr, 64])] = pl.tile.load(w, [o0, 0], [256, 64], [vr, 64], target_memory=pl.Mem.Mat)
    """
    d = rejected(kernel("pl.Tensor[[65536, 64], pl.INT8, pl.NZ]", body.format(R=65536)))
    assert "dynamic row extent" in d.message and "65536 - 0 = 65536" in d.message
    run(kernel("pl.Tensor[[65520, 64], pl.INT8, pl.NZ]", body.format(R=65520)))  # worst case 65520: fine


@pytest.mark.parametrize("dtype, cols", [("pl.FP16", 32), ("pl.FP32", 16)])
def test_gm_gap_limit_is_dtype_independent(dtype, cols):
    # c0 * sizeof(T) == 32 for every NZ dtype, so the same R - TR decides
    src = kernel(f"pl.Tensor[[65552, {cols}], {dtype}, pl.NZ]",
                 f"wt: pl.Tile[[16, {cols}], {dtype}, pl.Mem.Mat] = pl.tile.load(w, [0, 0], [16, {cols}], "
                 "target_memory=pl.Mem.Mat)")
    rejected(src)


@pytest.mark.parametrize("rows, window, blocks, ok", [
    (65536, 16, 2, True),
    (65552, 16, 2, False),
    (65552, 32, 2, True),
    (65552, 16, 1, True),
    (65552, 16, None, False),  # unknown column blocks: assumed several
    (65535, None, 2, True),  # dynamic window, worst case 65535
    (65536, None, 2, False),
])
def test_check_nz_gm_gap_directly(rows, window, blocks, ok):
    if ok:
        check_nz_gm_gap(rows, window, blocks)
    else:
        with pytest.raises(CompileError):
            check_nz_gm_gap(rows, window, blocks)
