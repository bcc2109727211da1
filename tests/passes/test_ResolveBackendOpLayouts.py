"""ResolveBackendOpLayouts: row-major-only vector ops get row-major operands and results; every original name
keeps its type. Expected programs are written from the pass's contract (a col-major [N, 1] column is the
same N contiguous elements as a row-major [1, N] row, so it is reshaped; any other layout is moved)."""

import subprocess
import sys
import textwrap
from pathlib import Path

from ptoc.context import CompileContext
from ptoc.frontend.parser import parse_program
from ptoc.ir.printer import print_program
from ptoc.passes.manager import check_invariants
from ptoc.passes.ResolveBackendOpLayouts import ResolveBackendOpLayouts
from ptoc.target.facts import ROW_MAJOR_OPERANDS

CTX = CompileContext(arch="a2a3")
ROOT = Path(__file__).resolve().parents[2]
PTOC = Path(sys.executable).with_name("ptoc")

PARAMS = "self, x: pl.Tensor[[16, 256], pl.FP32], out: pl.Out[pl.Tensor[[16, 1], pl.FP32]]"
RET = "pl.Tensor[[16, 1], pl.FP32]"
COL = "pl.Tile[[16, 1], pl.FP32, pl.Mem.Vec]"
ROW = "pl.Tile[[1, 16], pl.FP32, pl.Mem.Vec]"
LOAD = ("xt: pl.Tile[[16, 256], pl.FP32, pl.Mem.Vec] = pl.tile.load(x, [0, 0], [16, 256], target_memory=pl.Mem.Vec)\n"
        "tmp: pl.Tile[[16, 256], pl.FP32, pl.Mem.Vec] = pl.tile.create([16, 256], dtype=pl.FP32, "
        "target_memory=pl.Mem.Vec)\n")


def kernel(body: str, ftype: str = "InCore") -> str:
    body = textwrap.indent(LOAD + textwrap.dedent(body).strip("\n"), " " * 8)
    return (f"import pypto.language as pl\n@pl.program\nclass p:\n    @pl.function(type=pl.FunctionType.{ftype})\n"
            f"    def k({PARAMS}) -> {RET}:\n{body}\n")


def run(text: str):
    prog = parse_program(text, "before.ir", ctx=CTX)
    out = ResolveBackendOpLayouts().run(prog, CTX)
    check_invariants(out, CTX, ResolveBackendOpLayouts())
    return prog, out


def assert_same(out, expected_text: str):
    expected = parse_program(expected_text, "expected.ir", ctx=CTX)
    assert out == expected, f"got:\n{print_program(out)}\nexpected:\n{print_program(expected)}"


def test_column_add_goes_through_row_major_reshapes():
    _, out = run(kernel(f"""
        a: {COL} = pl.tile.row_sum(xt, tmp)
        b: {COL} = pl.tile.row_max(xt, tmp)
        s: {COL} = pl.tile.add(a, b)
        o: {RET} = pl.tile.store(s, [0, 0], out)
        return o
    """))
    assert_same(out, kernel(f"""
        a: {COL} = pl.tile.row_sum(xt, tmp)
        b: {COL} = pl.tile.row_max(xt, tmp)
        s_rm_a0: {ROW} = pl.tile.reshape(a, [1, 16])
        s_rm_a1: {ROW} = pl.tile.reshape(b, [1, 16])
        s_rm: {ROW} = pl.tile.add(s_rm_a0, s_rm_a1)
        s: {COL} = pl.tile.reshape(s_rm, [16, 1])
        o: {RET} = pl.tile.store(s, [0, 0], out)
        return o
    """))


def test_full_column_is_filled_as_a_row_then_reshaped():
    _, out = run(kernel(f"""
        z: {COL} = pl.tile.full([16, 1], dtype=pl.FP32, value=1.0)
        o: {RET} = pl.tile.store(z, [0, 0], out)
        return o
    """))
    assert_same(out, kernel(f"""
        z_rm: {ROW} = pl.tile.full([1, 16], dtype=pl.FP32, value=1.0)
        z: {COL} = pl.tile.reshape(z_rm, [16, 1])
        o: {RET} = pl.tile.store(z, [0, 0], out)
        return o
    """))


def test_scalar_op_on_a_column_and_a_nested_call_are_repaired_innermost_first():
    _, out = run(kernel(f"""
        a: {COL} = pl.tile.row_sum(xt, tmp)
        e: {COL} = pl.tile.exp(pl.tile.muls(a, 0.5))
        o: {RET} = pl.tile.store(e, [0, 0], out)
        return o
    """))
    assert_same(out, kernel(f"""
        a: {COL} = pl.tile.row_sum(xt, tmp)
        e_a0_rm_a0: {ROW} = pl.tile.reshape(a, [1, 16])
        e_a0_rm: {ROW} = pl.tile.muls(e_a0_rm_a0, 0.5)
        e_a0: {COL} = pl.tile.reshape(e_a0_rm, [16, 1])
        e_rm_a0: {ROW} = pl.tile.reshape(e_a0, [1, 16])
        e_rm: {ROW} = pl.tile.exp(e_rm_a0)
        e: {COL} = pl.tile.reshape(e_rm, [16, 1])
        o: {RET} = pl.tile.store(e, [0, 0], out)
        return o
    """))


def test_row_major_tiles_and_unconstrained_ops_are_left_alone():
    # row_expand_sub takes the col-major column as it is (it is not in the table); xt is row-major.
    text = kernel(f"""
        a: {COL} = pl.tile.row_max(xt, tmp)
        d: pl.Tile[[16, 256], pl.FP32, pl.Mem.Vec] = pl.tile.row_expand_sub(xt, a)
        e: pl.Tile[[16, 256], pl.FP32, pl.Mem.Vec] = pl.tile.exp(d)
        r: {COL} = pl.tile.row_sum(e, tmp)
        o: {RET} = pl.tile.store(r, [0, 0], out)
        return o
    """)
    prog, out = run(text)
    assert out is prog
    assert "tile.row_expand_sub" not in ROW_MAJOR_OPERANDS and "tile.exp" in ROW_MAJOR_OPERANDS


def test_the_pass_is_idempotent_and_skips_orchestration_functions():
    text = kernel(f"""
        a: {COL} = pl.tile.row_sum(xt, tmp)
        s: {COL} = pl.tile.adds(a, 1.0)
        o: {RET} = pl.tile.store(s, [0, 0], out)
        return o
    """)
    _, once = run(text)
    twice = ResolveBackendOpLayouts().run(once, CTX)
    assert twice is once
    orch = ("import pypto.language as pl\n@pl.program\nclass p:\n    @pl.function(type=pl.FunctionType.Orchestration)\n"
            "    def main(self, x: pl.Tensor[[16, 1], pl.FP32]) -> pl.Tensor[[16, 1], pl.FP32]:\n"
            "        y: pl.Tensor[[16, 1], pl.FP32] = pl.tensor.adds(x, 1.0)\n        return y\n")
    prog = parse_program(orch, "orch.ir", ctx=CTX)
    assert ResolveBackendOpLayouts().run(prog, CTX) is prog


def test_online_softmax_columns_validate_after_the_repair():
    # The corpus program that carries [64, 1] columns through an if and a loop; every stage must agree
    # with the front end's numbers (the reshapes move no data, the repaired ops compute the same values).
    src = ROOT / "tests" / "corpus" / "raw" / "13_online_softmax_if_yield.ir"
    r = subprocess.run([str(PTOC), "passes", str(src), "--validate"], capture_output=True, text=True, timeout=300,
                       check=False)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "every stage agrees with the front end" in r.stdout


def test_runs_alone_on_tiles_whose_space_is_left_open(tmp_path):
    # A vector op's operands are Vec tiles whatever the load says, so the repair does not wait for
    # InferTileMemorySpace: `--pipeline ResolveBackendOpLayouts` rewrites a kernel whose load names no
    # space, and leaves that load as it was.
    src = tmp_path / "open.ir"
    src.write_text(textwrap.dedent(f"""\
        import pypto.language as pl
        @pl.program
        class p:
            @pl.function(type=pl.FunctionType.InCore)
            def k({PARAMS}) -> {RET}:
                xt: pl.Tile[[16, 256], pl.FP32] = pl.tile.load(x, [0, 0], [16, 256])
                tmp: {COL.replace("[16, 1]", "[16, 256]")} = pl.tile.create([16, 256], dtype=pl.FP32, target_memory=pl.Mem.Vec)
                a: {COL} = pl.tile.row_sum(xt, tmp)
                s: {COL} = pl.tile.abs(a)
                o: {RET} = pl.tile.store(s, [0, 0], out)
                return o
        """))
    r = subprocess.run([str(PTOC), "passes", str(src), "--pipeline", "ResolveBackendOpLayouts", "--dump-after",
                        "ResolveBackendOpLayouts"],
                       capture_output=True, text=True, timeout=120, check=False)
    assert r.returncode == 0, r.stdout + r.stderr
    lines = [ln.strip() for ln in r.stdout.splitlines()]
    assert "xt: pl.Tile[[16, 256], pl.FP32] = pl.tile.load(x, [0, 0], [16, 256])" in lines, r.stdout
    want = [f"s_rm_a0: {ROW} = pl.tile.reshape(a, [1, 16])", f"s_rm: {ROW} = pl.tile.abs(s_rm_a0)",
            f"s: {COL} = pl.tile.reshape(s_rm, [16, 1])"]
    at = [lines.index(w) for w in want if w in lines]
    assert len(at) == 3 and at == sorted(at), r.stdout


RMCOL = "pl.Tile[[16, 1], pl.FP32, pl.Mem.Vec, pl.TileView(blayout=pl.TileLayout.row_major)]"


def test_columns_declared_row_major_take_the_implicit_layout():
    # PyPTO's front end declares the columns of tile.full and of elementwise ops row-major; the pass
    # drops that layout so they are ptoc's col-major columns (same N contiguous elements) and repairs
    # them as such: the fill becomes a row, and the add sees two [1, 16] rows.
    _, out = run(kernel(f"""
        m0: {RMCOL} = pl.tile.full([16, 1], dtype=pl.FP32, value=0.0)
        a: {COL} = pl.tile.row_max(xt, tmp)
        s: {RMCOL} = pl.tile.add(m0, a)
        o: {RET} = pl.tile.store(s, [0, 0], out)
        return o
    """))
    assert_same(out, kernel(f"""
        m0_rm: {ROW} = pl.tile.full([1, 16], dtype=pl.FP32, value=0.0)
        m0: {COL} = pl.tile.reshape(m0_rm, [16, 1])
        a: {COL} = pl.tile.row_max(xt, tmp)
        s_rm_a0: {ROW} = pl.tile.reshape(m0, [1, 16])
        s_rm_a1: {ROW} = pl.tile.reshape(a, [1, 16])
        s_rm: {ROW} = pl.tile.add(s_rm_a0, s_rm_a1)
        s: {COL} = pl.tile.reshape(s_rm, [16, 1])
        o: {RET} = pl.tile.store(s, [0, 0], out)
        return o
    """))


def test_a_row_major_column_beside_a_col_major_one_is_reshaped_too():
    # An unannotated move gives a row-major [16, 1] column; reshaping only the col-major operand would
    # leave a [16, 1] and a [1, 16] operand (a broadcast to [16, 16]). Both become [1, 16].
    _, out = run(kernel(f"""
        a: {COL} = pl.tile.row_max(xt, tmp)
        r = pl.tile.move(a, target_memory=pl.Mem.Vec, blayout=pl.TileLayout.row_major)
        s: {COL} = pl.tile.maximum(r, a)
        o: {RET} = pl.tile.store(s, [0, 0], out)
        return o
    """))
    assert_same(out, kernel(f"""
        a: {COL} = pl.tile.row_max(xt, tmp)
        r = pl.tile.move(a, target_memory=pl.Mem.Vec, blayout=pl.TileLayout.row_major)
        s_rm_a0: {ROW} = pl.tile.reshape(r, [1, 16])
        s_rm_a1: {ROW} = pl.tile.reshape(a, [1, 16])
        s_rm: {ROW} = pl.tile.maximum(s_rm_a0, s_rm_a1)
        s: {COL} = pl.tile.reshape(s_rm, [16, 1])
        o: {RET} = pl.tile.store(s, [0, 0], out)
        return o
    """))


# The online softmax of tests/corpus/raw/13 as PyPTO's printer writes it before its own
# ResolveBackendOpLayouts (no `self`, level/role, row-major columns from tile.full and the
# elementwise ops, an if that yields a col-major column in one branch and a row-major one in the other).
# PyPTO's form of corpus 13 after InferTileMemorySpace (columns declared row-major)
PYPTO_FORM_13 = Path(__file__).with_name("online_softmax_pypto_form.ir")


def test_pypto_form_of_the_online_softmax_compiles_and_validates():
    # Before the fix the pass left m_i a [64, 1] row and reshaped m_cur to [1, 64]: the maximum broadcast
    # to [64, 64] and ptoc stopped with an internal error (exit 3). Now every stage agrees numerically with
    # the front end's reference.
    r = subprocess.run([str(PTOC), "passes", str(PYPTO_FORM_13), "--validate"], capture_output=True, text=True, timeout=300,
                       check=False)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "every stage agrees with the front end" in r.stdout


def test_a_column_a_loop_adds_to_stays_in_its_buffer():
    # l = l + row_sum(...) on [64, 1] columns: the repaired add writes the carried buffer through a
    # [1, 64] row and yields its [64, 1] view. The emitter used to stop with an internal error (exit 3)
    # because that view is a new pto.treshape handle of the carried buffer; it is the same bytes and type.
    src = Path(__file__).with_name("carried_column.ir")
    r = subprocess.run([str(PTOC), "passes", str(src), "--validate"], capture_output=True, text=True, timeout=300,
                       check=False)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "every stage agrees with the front end" in r.stdout


MAT_FULL = """\
import pypto.language as pl
@pl.program
class p:
    @pl.function(type=pl.FunctionType.InCore)
    def k(self, x: pl.Tensor[[16, 64], pl.FP32], o: pl.Out[pl.Tensor[[16, 64], pl.FP32]]) -> pl.Tensor[[16, 64], pl.FP32]:
        a: pl.Tile[[16, 64], pl.FP32, pl.Mem.Vec] = pl.tile.load(x, [0, 0], [16, 64])
        z: pl.Tile[[16, 64], pl.FP32, pl.Mem.Mat] = pl.tile.full([16, 64], dtype=pl.FP32, value=0.0)
        b: pl.Tile[[16, 64], pl.FP32, pl.Mem.Vec] = pl.tile.add(a, a)
        o1: pl.Tensor[[16, 64], pl.FP32] = pl.tile.store(b, [0, 0], o)
        return o1
"""


def test_a_fill_of_a_mat_tile_keeps_its_layout(tmp_path):
    # pto-isa's TEXPANDS has a Mat form that writes every byte of the tile's buffer with the value, so a
    # col-major Mat tile is filled as it is (this was an internal error, exit 3)
    prog, out = run(MAT_FULL)
    assert print_program(out) == print_program(prog)
    src = tmp_path / "k.ir"
    src.write_text(MAT_FULL)
    r = subprocess.run([str(PTOC), "compile", str(src), "-o", str(tmp_path / "k.pto")], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    pto = (tmp_path / "k.pto").read_text()
    assert "pto.texpands ins(%cst : f32) outs(%z : !pto.tile_buf<loc=mat, dtype=f32, rows=16, cols=64" in pto
    assert "blayout=col_major" in pto.split("outs(%z")[1].split("\n")[0]
