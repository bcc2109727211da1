"""CanonicalizeTileSlice: a slice of a Mat tile read by tile.extract or a matmul becomes one TEXTRACT from the
loaded Mat tile, its offset added into the extract's indices."""

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ptoc.context import CompileContext
from ptoc.frontend.parser import parse_program
from ptoc.ir.printer import print_program
from ptoc.passes.CanonicalizeTileSlice import CanonicalizeTileSlice
from ptoc.passes.manager import check_invariants

CTX = CompileContext(arch="a5")
PTOC = str(Path(sys.executable).with_name("ptoc"))
LEFT = "pl.Mem.Left, pl.TileView(blayout=pl.TileLayout.row_major)"  # TEXTRACT's L0A format (OP-6)
PARAMS = ("lhs: pl.Tensor[[32, 256], pl.BF16], rhs: pl.Tensor[[256, 64], pl.BF16], "
          "out: pl.Out[pl.Tensor[[16, 64], pl.FP32]]")
RET = "pl.Tensor[[16, 64], pl.FP32]"
LOADS = """
    lhs_mat: pl.Tile[[32, 256], pl.BF16, pl.Mem.Mat] = pl.tile.load(lhs, [0, 0], [32, 256], target_memory=pl.Mem.Mat)
    rhs_mat: pl.Tile[[256, 64], pl.BF16, pl.Mem.Mat] = pl.tile.load(rhs, [0, 0], [256, 64], target_memory=pl.Mem.Mat)
"""
TAIL = """
    c: pl.Tile[[16, 64], pl.FP32, pl.Mem.Acc] = pl.tile.matmul(a, b)
    out_1: pl.Tensor[[16, 64], pl.FP32] = pl.tile.store(c, [0, 0], out)
    return out_1
"""


def program(body: str, params: str = PARAMS, ret: str = RET) -> str:
    body = textwrap.indent(textwrap.dedent(body).strip("\n"), " " * 8)
    return (f"@pl.program\nclass p:\n    @pl.function(type=pl.FunctionType.InCore)\n"
            f"    def kernel(self, {params}) -> {ret}:\n{body}\n")


def run(text: str):
    before = parse_program(text, "before.ir", ctx=CTX)
    after = CanonicalizeTileSlice().run(before, CTX)
    check_invariants(after, CTX, CanonicalizeTileSlice())
    return before, after


def assert_same(after, expected_text: str):
    expected = parse_program(expected_text, "expected.ir", ctx=CTX)
    assert after == expected, f"got:\n{print_program(after)}\nexpected:\n{print_program(expected)}"


def extract(name: str, src: str, r, c, shape: str, mem: str) -> str:
    ann = LEFT if mem == "Left" else "pl.Mem.Right"
    dt = "pl.BF16"
    return (f"{name}: pl.Tile[{shape}, {dt}, {ann}] = pl.tile.extract({src}, {r}, {c}, shape={shape}, "
            f"target_memory=pl.Mem.{mem})")


def test_chained_slice_offsets_add_into_the_extract_index():
    # rows: 8 (outer slice) + 4 (inner slice) + 0 (extract) = 12; columns 0 + 0 + 0
    before = program(LOADS + f"""
    s1: pl.Tile[[24, 256], pl.BF16, pl.Mem.Mat] = pl.tile.slice(lhs_mat, [24, 256], [8, 0])
    s2: pl.Tile[[16, 256], pl.BF16, pl.Mem.Mat] = pl.tile.slice(s1, [16, 256], [4, 0])
    {extract("a", "s2", 0, 0, "[16, 256]", "Left")}
    {extract("b", "rhs_mat", 0, 0, "[256, 64]", "Right")}
    """ + TAIL)
    expected = program(LOADS + f"""
    {extract("a", "lhs_mat", 12, 0, "[16, 256]", "Left")}
    {extract("b", "rhs_mat", 0, 0, "[256, 64]", "Right")}
    """ + TAIL)
    _, after = run(before)
    assert_same(after, expected)


def test_a_symbolic_extract_index_gets_the_constant_offset_added():
    params = ("lhs: pl.Tensor[[16, 1024], pl.BF16], rhs: pl.Tensor[[512, 64], pl.BF16], "
              "out: pl.Out[pl.Tensor[[16, 64], pl.FP32]]")
    loads = """
    lhs_mat: pl.Tile[[16, 1024], pl.BF16, pl.Mem.Mat] = pl.tile.load(lhs, [0, 0], [16, 1024], target_memory=pl.Mem.Mat)
    rhs_mat: pl.Tile[[512, 64], pl.BF16, pl.Mem.Mat] = pl.tile.load(rhs, [0, 0], [512, 64], target_memory=pl.Mem.Mat)
    c_init: pl.Tile[[16, 64], pl.FP32, pl.Mem.Acc] = pl.tile.create([16, 64], dtype=pl.FP32, target_memory=pl.Mem.Acc)
    """
    loop = """
    for ko, (c_iter,) in pl.pipeline(0, 512, 256, stage=2, init_values=(c_init,)):
        {a}
        {b}
        c_acc: pl.Tile[[16, 64], pl.FP32, pl.Mem.Acc] = pl.tile.matmul_acc(c_iter, a, b)
        c: pl.Tile[[16, 64], pl.FP32, pl.Mem.Acc] = pl.yield_(c_acc)
    out_1: pl.Tensor[[16, 64], pl.FP32] = pl.tile.store(c, [0, 0], out)
    return out_1
    """
    b = extract("b", "rhs_mat", "ko", 0, "[256, 64]", "Right")
    before = program(loads + """
    hi: pl.Tile[[16, 512], pl.BF16, pl.Mem.Mat] = pl.tile.slice(lhs_mat, [16, 512], [0, 256])
    """ + loop.format(a=extract("a", "hi", 0, "ko", "[16, 256]", "Left"), b=b), params)
    expected = program(loads + loop.format(a=extract("a", "lhs_mat", 0, "ko + 256", "[16, 256]", "Left"), b=b),
                       params)
    _, after = run(before)
    assert_same(after, expected)


def test_matmul_operand_slices_become_left_and_right_extracts():
    before = program(LOADS + """
    ls: pl.Tile[[16, 128], pl.BF16, pl.Mem.Mat] = pl.tile.slice(lhs_mat, [16, 128], [16, 128])
    rs: pl.Tile[[128, 64], pl.BF16, pl.Mem.Mat] = pl.tile.slice(rhs_mat, [128, 64], [128, 0])
    c: pl.Tile[[16, 64], pl.FP32, pl.Mem.Acc] = pl.tile.matmul(ls, rs)
    out_1: pl.Tensor[[16, 64], pl.FP32] = pl.tile.store(c, [0, 0], out)
    return out_1
    """)
    expected = program(LOADS + f"""
    {extract("ls_left", "lhs_mat", 16, 128, "[16, 128]", "Left")}
    {extract("rs_right", "rhs_mat", 128, 0, "[128, 64]", "Right")}
    c: pl.Tile[[16, 64], pl.FP32, pl.Mem.Acc] = pl.tile.matmul(ls_left, rs_right)
    out_1: pl.Tensor[[16, 64], pl.FP32] = pl.tile.store(c, [0, 0], out)
    return out_1
    """)
    _, after = run(before)
    assert_same(after, expected)


def test_vec_slices_and_slices_with_other_readers_are_kept():
    params = "x: pl.Tensor[[32, 64], pl.FP32], out: pl.Out[pl.Tensor[[16, 64], pl.FP32]]"
    vec = program("""
    xt: pl.Tile[[32, 64], pl.FP32, pl.Mem.Vec] = pl.tile.load(x, [0, 0], [32, 64], target_memory=pl.Mem.Vec)
    s: pl.Tile[[16, 64], pl.FP32, pl.Mem.Vec, pl.TileView(start_offset=1024)] = pl.tile.slice(xt, [16, 64], [16, 0])
    out_1: pl.Tensor[[16, 64], pl.FP32] = pl.tile.store(s, [0, 0], out)
    return out_1
    """, params, RET)
    before, after = run(vec)
    assert after is before
    # the slice is also moved into Left as a whole: that reader keeps it; the extract reads lhs_mat directly
    both = program(LOADS + f"""
    s: pl.Tile[[16, 256], pl.BF16, pl.Mem.Mat] = pl.tile.slice(lhs_mat, [16, 256], [16, 0])
    {extract("a", "s", 0, 0, "[16, 256]", "Left")}
    {extract("b", "rhs_mat", 0, 0, "[256, 64]", "Right")}
    a2: pl.Tile[[16, 256], pl.BF16, pl.Mem.Left] = pl.tile.move(s, target_memory=pl.Mem.Left)
    """ + TAIL)
    _, after = run(both)
    got = print_program(after)
    assert "pl.tile.slice(lhs_mat, [16, 256], [16, 0])" in got and "pl.tile.extract(lhs_mat, 16, 0," in got


def test_the_pass_is_idempotent():
    text = program(LOADS + f"""
    s: pl.Tile[[16, 256], pl.BF16, pl.Mem.Mat] = pl.tile.slice(lhs_mat, [16, 256], [16, 0])
    {extract("a", "s", 0, 0, "[16, 256]", "Left")}
    {extract("b", "rhs_mat", 0, 0, "[256, 64]", "Right")}
    """ + TAIL)
    _, once = run(text)
    assert CanonicalizeTileSlice().run(once, CTX) is once


@pytest.mark.parametrize("arch", ["a2a3", "a5"])
def test_folded_kernel_validates_at_every_stage(arch, tmp_path):
    src = tmp_path / "k.ir"
    src.write_text("import pypto.language as pl\n\n" + program(LOADS + """
    s1: pl.Tile[[32, 128], pl.BF16, pl.Mem.Mat] = pl.tile.slice(lhs_mat, [32, 128], [0, 128])
    ls: pl.Tile[[16, 128], pl.BF16, pl.Mem.Mat] = pl.tile.slice(s1, [16, 128], [16, 0])
    rs: pl.Tile[[128, 64], pl.BF16, pl.Mem.Mat] = pl.tile.slice(rhs_mat, [128, 64], [128, 0])
    c: pl.Tile[[16, 64], pl.FP32, pl.Mem.Acc] = pl.tile.matmul(ls, rs)
    out_1: pl.Tensor[[16, 64], pl.FP32] = pl.tile.store(c, [0, 0], out)
    return out_1
    """))
    r = subprocess.run([PTOC, "passes", str(src), "--arch", arch, "--validate"], capture_output=True, text=True,
                       timeout=300, check=False)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "CanonicalizeTileSlice        ok" in r.stdout and "every stage agrees with the front end" in r.stdout


# ------------------------------------------------------------------------------ Vec slices (rule 4, A5)

VPARAMS = ("x: pl.Tensor[[16, 128], pl.FP32], g: pl.Tensor[[1, 64], pl.FP32], k: pl.Scalar[pl.INDEX], "
           "out: pl.Out[pl.Tensor[[16, 64], pl.FP32]]")
VRET = "pl.Tensor[[16, 64], pl.FP32]"
W = "pl.Tile[[16, 64], pl.FP32, pl.Mem.Vec]"


def vec_kernel(window: str, use: str = "pl.tile.muls(w, 2.0)") -> str:
    return program(f"""
        t: pl.Tile[[16, 128], pl.FP32, pl.Mem.Vec] = pl.tile.load(x, [0, 0], [16, 128], target_memory=pl.Mem.Vec)
        gt: pl.Tile[[1, 64], pl.FP32, pl.Mem.Vec] = pl.tile.load(g, [0, 0], [1, 64], target_memory=pl.Mem.Vec)
        w: {W} = {window}
        y: {W} = {use}
        out_1: {VRET} = pl.tile.store(y, [0, 0], out)
        return out_1
    """, VPARAMS, VRET)


def test_a_vec_window_not_on_a_32_byte_boundary_is_copied_out_with_a_vec_extract():
    # column 4 of FP32 rows: the window starts 16 bytes into an aligned row, where no vector instruction can
    # read a tile operand; the copy is a dense [16, 64] tile of its own
    _, after = run(vec_kernel("pl.tile.slice(t, [16, 64], [0, 4])"))
    assert_same(after, vec_kernel("pl.tile.extract(t, 0, 4, [16, 64], target_memory=pl.Mem.Vec)"))
    # column 8 (32 bytes) and a dynamic row times the 512-byte row: provably aligned, the view stays
    for window in ("pl.tile.slice(t, [16, 64], [0, 8])", "pl.tile.slice(t, [8, 64], [k * 8, 0])"):
        text = vec_kernel(window).replace(f"w: {W}", "w").replace(f"y: {W}", "y")
        before, after = run(text)
        assert after is before


def test_a_col_expand_operand_with_a_dynamic_offset_or_a_strided_window_is_copied_out():
    use = "pl.tile.col_expand_mul(w, gt)"
    _, after = run(vec_kernel("pl.tile.slice(t, [16, 64], [0, 64])", use))  # aligned, but rows are strided
    assert_same(after, vec_kernel("pl.tile.extract(t, 0, 64, [16, 64], target_memory=pl.Mem.Vec)", use))
    # a whole-row window at a known constant offset reads in place
    text = vec_kernel("pl.tile.slice(t, [16, 64], [0, 64])", "pl.tile.muls(w, 2.0)")
    before, after = run(text)
    assert after is before


def test_vec_slices_stay_views_on_a2a3_and_as_columns(tmp_path):
    text = vec_kernel("pl.tile.slice(t, [16, 64], [0, 4])")
    a2 = CompileContext(arch="a2a3")
    before = parse_program(text, "b.ir", ctx=a2)
    assert CanonicalizeTileSlice().run(before, a2) is before  # PTOAS takes no vec-source TEXTRACT on A2/A3
    col = program("""
        t: pl.Tile[[16, 128], pl.FP32, pl.Mem.Vec] = pl.tile.load(x, [0, 0], [16, 128], target_memory=pl.Mem.Vec)
        c: pl.Tile[[16, 1], pl.FP32, pl.Mem.Vec] = pl.tile.slice(t, [16, 1], [0, 3])
        y: pl.Tile[[16, 1], pl.FP32, pl.Mem.Vec] = pl.tile.muls(c, 2.0)
        out_1: pl.Tensor[[16, 1], pl.FP32] = pl.tile.store(y, [0, 0], out)
        return out_1
    """, "x: pl.Tensor[[16, 128], pl.FP32], out: pl.Out[pl.Tensor[[16, 1], pl.FP32]]", "pl.Tensor[[16, 1], pl.FP32]")
    before, after = run(col)
    assert after is before  # a [16, 1] copy would be col-major, and TEXTRACT copies ND to ND only
    # the copied-out window computes what the view computed, at every stage
    src = tmp_path / "k.ir"
    src.write_text("import pypto.language as pl\n" + text)
    r = subprocess.run([PTOC, "passes", str(src), "--arch", "a5", "--validate"], capture_output=True, text=True,
                       timeout=300, check=False)
    assert r.returncode == 0 and "every stage agrees with the front end" in r.stdout, r.stdout + r.stderr
