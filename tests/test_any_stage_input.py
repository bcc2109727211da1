"""IR at any stage as input: ptoc's own dumps (both print styles) and PyPTO's.

A dump after pass N already has the products of the passes before it; the pipeline skips a pass whose
products all hold on the IR it would get, so compiling the dump gives the kernel compiling the source
gives. PyPTO's form of a placed kernel (allocations at the top, no `addr=`, the address in each
MemRef's byte offset) keeps its addresses."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from ptoc.context import CompileContext
from ptoc.driver import compile_program, frontend
from ptoc.ir.printer import print_style
from ptoc.passes.manager import PIPELINE, Dumps, run_pipeline

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = sorted((ROOT / "examples").glob("*.ir"))
PTOC = Path(sys.executable).with_name("ptoc")
PYPTO = os.environ.get("PTOC_PYPTO_PYTHON")
PYPTO_COMPILE = Path(os.environ.get("PTOC_PYPTO_COMPILE", ROOT.parent / "shared" / "tools" / "pypto_compile.py"))


def _pto(text: str, name: str) -> str:
    ctx = CompileContext()
    return compile_program(frontend(text, name, ctx), ctx, "kernel.ir").pto


def _dumps(text: str, name: str, style: str) -> list[tuple[str, str]]:
    ctx = CompileContext()
    d = Dumps()
    with print_style(style):
        run_pipeline(frontend(text, name, ctx), ctx, instruments=[d])
    return [(n, body) for n, body, _ in d.texts]


def _alloc_lines_apart(pto: str) -> tuple[list[str], list[str]]:
    """(the other lines in order, the pto.alloc_tile and arith.constant lines sorted): PyPTO's form
    allocates every buffer at the top of the function, so the alloc_tile lines (and the constants they
    use first) move up, out of the loops they were in; nothing else may change."""
    lines = [ln.strip() for ln in pto.splitlines()]
    moved = sorted(ln for ln in lines if "pto.alloc_tile" in ln or "arith.constant" in ln)
    return [ln for ln in lines if "pto.alloc_tile" not in ln and "arith.constant" not in ln], moved


# The split passes write a lane's row offset in PyPTO's form `0 + subblock_idx * 8`; the late Simplify
# (PyPTO's second run, at the end of the pipeline) folds it, so a dump read back, whose first Simplify
# folds it, gives the same kernel (the split examples were strict xfails before the late Simplify).
EXAMPLE_PARAMS = EXAMPLES


@pytest.mark.parametrize("path", EXAMPLE_PARAMS, ids=lambda p: p.stem)
def test_every_ptoc_dump_compiles_to_the_kernel_of_its_source(path):
    text = path.read_text()
    want = _pto(text, str(path))
    dumps = _dumps(text, str(path), "ptoc")
    assert len(dumps) == 1 + len(PIPELINE)
    for name, body in dumps:
        assert _pto(body, name) == want, f"{path.name}: compiling {name} gives another kernel"


@pytest.mark.parametrize("path", EXAMPLE_PARAMS, ids=lambda p: p.stem)
def test_every_pypto_style_dump_compiles_to_the_kernel_of_its_source(path):
    text = path.read_text()
    want = _alloc_lines_apart(_pto(text, str(path)))
    for name, body in _dumps(text, str(path), "pypto"):
        assert _alloc_lines_apart(_pto(body, name)) == want, f"{path.name}: compiling {name} gives another kernel"


# PyPTO's printed form after its AllocateMemoryAddr (the shape of its dumps, written by hand): the
# buffers at the top, the addresses 0 / 16384 / 32768 only in the MemRef offsets. ptoc's own planner
# would put tc at 0 (ta is dead once tb exists), so 32768 can only come from the offsets.
PYPTO_PLACED = """\
# pypto.program: p
import pypto.language as pl


@pl.program
class p:
    @pl.function(type=pl.FunctionType.AIV, level=pl.Level.AIV, role=pl.Role.SubWorker)
    def k(
        x__ssa_v0: pl.Tensor[[64, 64], pl.FP32, pl.MemRef("mem_ddr_0", pl.const(0, pl.INT64), 16384)],
        y__ssa_v0: pl.Out[pl.Tensor[[64, 64], pl.FP32, pl.MemRef("mem_ddr_1", pl.const(0, pl.INT64), 16384)]],
    ) -> pl.Tensor[[64, 64], pl.FP32]:
        mem_vec_2: pl.Ptr = pl.tile.alloc(pl.Mem.Vec, 16384)
        mem_vec_3: pl.Ptr = pl.tile.alloc(pl.Mem.Vec, 16384)
        mem_vec_4: pl.Ptr = pl.tile.alloc(pl.Mem.Vec, 16384)
        ta: pl.Tile[[64, 64], pl.FP32, pl.MemRef(mem_vec_2, pl.const(0, pl.INT64), 16384), pl.Mem.Vec] = pl.tile.load(x__ssa_v0, [0, 0], [64, 64], [64, 64], target_memory=pl.Mem.Vec)
        tb: pl.Tile[[64, 64], pl.FP32, pl.MemRef(mem_vec_3, pl.const(16384, pl.INT64), 16384), pl.Mem.Vec] = pl.tile.exp(ta)
        tc: pl.Tile[[64, 64], pl.FP32, pl.MemRef(mem_vec_4, pl.const(32768, pl.INT64), 16384), pl.Mem.Vec] = pl.tile.exp(tb)
        y_1: pl.Tensor[[64, 64], pl.FP32, pl.MemRef("mem_ddr_1", pl.const(0, pl.INT64), 16384)] = pl.tile.store(tc, [0, 0], y__ssa_v0)
        return y_1
"""


def _addresses(pto: str) -> list[int]:
    consts = dict(re.findall(r"(%\w+) = arith.constant (\d+) : i64", pto))
    return [int(consts[a]) for a in re.findall(r"pto\.alloc_tile addr = (%\w+)", pto)]


def test_pypto_placed_kernel_keeps_its_addresses():
    assert _addresses(_pto(PYPTO_PLACED, "placed.py")) == [0, 16384, 32768]


def test_offsets_that_overlap_live_buffers_are_planned_again():
    """All three offsets 0 (PyPTO's form after InitMemRef): ta and tb are live together, so the offsets
    place nothing and memory is planned again: MemoryReuse computes tb over ta (its last read) and tc over
    tb, one buffer at 0."""
    text = re.sub(r"pl\.const\((16384|32768), pl\.INT64\)", "pl.const(0, pl.INT64)", PYPTO_PLACED)
    assert _addresses(_pto(text, "unplaced.py")) == [0]
    recip = text.replace("pl.tile.exp(", "pl.tile.recip(")  # never in place: ta 0, tb 16384, tc in ta's buffer
    assert _addresses(_pto(recip, "unplaced.py")) == [0, 16384]


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(PTOC), *args], capture_output=True, text=True, timeout=120)


def test_cli_compiles_a_dump_after_allocate_memory_addr_like_its_source(tmp_path):
    src = ROOT / "examples" / "softmax_rows.ir"
    r = _run("passes", str(src), "--dump-after", "all", "--dump-dir", str(tmp_path / "d"))
    assert r.returncode == 0, r.stderr
    (dump,) = (tmp_path / "d").glob("*_after_AllocateMemoryAddr.ir")
    for f, out in ((src, "a.pto"), (dump, "b.pto")):
        r = _run("compile", str(f), "-o", str(tmp_path / out), "--no-header")
        assert r.returncode == 0, r.stderr
    a, b = ((tmp_path / n).read_text() for n in ("a.pto", "b.pto"))
    assert a.replace(str(src), "X") == b.replace(str(dump), "X")


def test_cli_list_for_a_file_says_which_passes_run(tmp_path):
    f = tmp_path / "placed.py"
    f.write_text(PYPTO_PLACED)
    r = _run("passes", "--list", str(f))
    assert r.returncode == 0, r.stderr
    lines = [ln.split() for ln in r.stdout.splitlines() if ln[:2].strip().isdigit()]
    assert [ln[2] for ln in lines] == [n for _, n in PIPELINE]  # Simplify twice, as PyPTO runs it
    rows = {ln[2]: ln[3] for ln in lines}
    assert rows["AllocateMemoryAddr"] == "skip" and rows["InitMemRef"] == "skip"
    assert rows["InferTileMemorySpace"] == "skip" and rows["ConvertTensorToTileOps"] == "skip"
    assert rows["MaterializeTensorStrides"] == "run"  # PyPTO prints no strides: they are derived again
    assert rows["OutlineIncoreScopes"] == "skip" and rows["CtrlFlowTransform"] == "skip"
    assert "read from PyPTO's form" in r.stdout
    r = _run("passes", "--list", str(ROOT / "examples" / "scoped_add_scale.ir"))
    rows = {ln.split()[2]: ln.split()[3] for ln in r.stdout.splitlines() if ln[:2].strip().isdigit()}
    assert rows["OutlineIncoreScopes"] == "run" and rows["ConvertTensorToTileOps"] == "run"
    assert rows["InitMemRef"] == "run" and rows["AllocateMemoryAddr"] == "run"


@pytest.mark.skipif(not PYPTO or not Path(PYPTO).exists() or not PYPTO_COMPILE.exists(),
                    reason="PTOC_PYPTO_PYTHON does not name the Python of a PyPTO build")
@pytest.mark.parametrize("name", ["matmul_bf16", "softmax_rows", "vector_add"])
def test_pypto_dumps_after_its_memory_reuse_compile_with_its_addresses(name, tmp_path):
    """PyPTO's own dumps: every one compiles; from MemoryReuse on (the buffers PyPTO merged, then placed)
    ptoc's kernel has exactly the addresses of PyPTO's kernel."""
    r = subprocess.run([PYPTO, str(PYPTO_COMPILE), str(ROOT / "examples" / f"{name}.ir"), "-o", str(tmp_path),
                        "--dump"], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    theirs = sorted(set(_addresses("".join(p.read_text() for p in sorted(tmp_path.glob("kernels/**/*.pto"))))))
    assert theirs
    dumps = sorted(tmp_path.glob("passes_dump/*.py"))
    after = [d for d in dumps if int(d.name[:2]) >= next(int(x.name[:2]) for x in dumps
                                                         if x.name.endswith("_after_MemoryReuse.py"))]
    assert len(after) >= 2
    for d in dumps:
        pto = _pto(d.read_text(), str(d))
        if d in after:
            assert sorted(set(_addresses(pto))) == theirs, d.name


KERNEL = """\
import pypto.language as pl

@pl.program
class p:
    @pl.function(type=pl.FunctionType.InCore)
    def k(self, a: pl.Tensor[[64, 64], pl.BF16], b: pl.Tensor[[64, 64], pl.BF16], o: pl.Out[pl.Tensor[[64, 64], pl.ODT]]) -> pl.Tensor[[64, 64], pl.ODT]:
BODY
        return o1
"""


def _props(body: str, out_dtype: str = "BF16") -> frozenset[str]:
    from ptoc.passes.manager import input_properties

    ctx = CompileContext()
    return input_properties(frontend(KERNEL.replace("BODY", body).replace("ODT", out_dtype), "k.ir", ctx), ctx)


def test_a_short_name_on_tensors_is_not_a_tile_op():
    """`pl.add` on two tensors is tensor.add: ConvertTensorToTileOps still has work, though no op is
    spelled `tensor.`; the same kernel written with tiles has the property."""
    tensors = "        s: pl.Tensor[[64, 64], pl.BF16] = pl.add(a, b)\n        o1 = pl.tile.store(pl.tile.load(s, [0, 0], [64, 64]), [0, 0], o)"
    tiles = ("        ta = pl.tile.load(a, [0, 0], [64, 64])\n        tb = pl.tile.load(b, [0, 0], [64, 64])\n"
             "        s = pl.tile.add(ta, tb)\n        o1 = pl.tile.store(s, [0, 0], o)")
    assert "tile_ops" not in _props(tensors)
    assert "tile_ops" in _props(tiles)


def test_matmul_operands_in_mat_leave_memory_spaces_to_decide():
    """Every tile has a space, but the cube operands are in Mat: InferTileMemorySpace must move them."""
    mat = ("        ta: pl.Tile[[64, 64], pl.BF16, pl.Mem.Mat] = pl.tile.load(a, [0, 0], [64, 64], target_memory=pl.Mem.Mat)\n"
           "        tb: pl.Tile[[64, 64], pl.BF16, pl.Mem.Mat] = pl.tile.load(b, [0, 0], [64, 64], target_memory=pl.Mem.Mat)\n"
           "        c: pl.Tile[[64, 64], pl.FP32, pl.Mem.Acc] = pl.tile.matmul(ta, tb)\n"
           "        o1 = pl.tile.store(c, [0, 0], o)")
    moved = mat.replace("pl.tile.matmul(ta, tb)", "pl.tile.matmul(tl, tr)").replace(
        "        c:", "        tl: pl.Tile[[64, 64], pl.BF16, pl.Mem.Left] = pl.tile.move(ta, target_memory=pl.Mem.Left)\n"
        "        tr: pl.Tile[[64, 64], pl.BF16, pl.Mem.Right] = pl.tile.move(tb, target_memory=pl.Mem.Right)\n        c:")
    assert "memory_spaces" not in _props(mat, "FP32")
    assert "memory_spaces" in _props(moved, "FP32")


def test_pypto_placed_form_has_memrefs_and_addresses():
    from ptoc.passes.manager import input_properties

    ctx = CompileContext()
    have = input_properties(frontend(PYPTO_PLACED, "placed.py", ctx), ctx)
    assert {"memrefs", "addresses", "memory_spaces", "kernel_kinds", "outlined", "ssa"} <= have
    unplaced = re.sub(r"pl\.const\((16384|32768), pl\.INT64\)", "pl.const(0, pl.INT64)", PYPTO_PLACED)
    have = input_properties(frontend(unplaced, "unplaced.py", ctx), ctx)
    assert "memrefs" in have and "addresses" not in have
