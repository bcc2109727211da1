"""Empty tiles (valid shape zero on every axis): the lane-1 replay of an unsplit vector kernel that the a2a3
runtime starts on both vector lanes (PyPTO's dual AIV dispatch). Type rules, the `.pto` form, and the
reference running both lanes of the examples."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ptoc.context import CompileContext
from ptoc.diagnostics import CompileError
from ptoc.driver import compile_program, frontend
from ptoc.ir.verifier import function_types

ROOT = Path(__file__).resolve().parent.parent
PTOC = Path(sys.executable).with_name("ptoc")
HEAD = "import pypto.language as pl\n\n@pl.program\nclass p:\n"
EMPTY = "pl.TileView(valid_shape=[0, 0])"


def prog(body: str) -> str:
    fn = f"""
    @pl.function(type=pl.FunctionType.AIV)
    def k(self, a: pl.Tensor[[16, 64], pl.FP32], out: pl.Out[pl.Tensor[[16, 64], pl.FP32]]) -> pl.Tensor[[16, 64], pl.FP32]:
{textwrap.indent(textwrap.dedent(body).strip(chr(10)), " " * 8)}
        return out
    """
    return HEAD + textwrap.indent(textwrap.dedent(fn).strip("\n"), "    ") + "\n"


def types_of(body: str) -> dict:
    ctx = CompileContext()
    program = frontend(prog(body), "k.ir", ctx)
    return function_types(program, ctx)["k"]


def valid(t) -> list[int] | None:
    vs = t.view.valid_shape if t.view is not None else None
    return None if vs is None else [v.value for v in vs]


def test_any_tile_may_be_declared_empty_and_ops_on_it_give_empty_tiles():
    t = types_of(f"""
        c: pl.Tile[[16, 64], pl.FP32, pl.Mem.Vec, {EMPTY}] = pl.tile.create([16, 64], dtype=pl.FP32, target_memory=pl.Mem.Vec)
        x: pl.Tile[[16, 64], pl.FP32, pl.Mem.Vec, {EMPTY}] = pl.tile.load(a, [0, 0], [16, 64], target_memory=pl.Mem.Vec)
        m: pl.Tile[[16, 1], pl.FP32, pl.Mem.Vec, {EMPTY}] = pl.tile.row_max(c, x)
        s = pl.tile.add(c, x)
        e = pl.tile.exp(s)
        r = pl.tile.row_expand_sub(e, m)
    """)
    # declared: a created tile (valid [16, 64]) and a row reduction (valid [16, 1]) may be annotated empty
    assert valid(t["c"]) == [0, 0] and valid(t["x"]) == [0, 0] and valid(t["m"]) == [0, 0]
    # inferred: an elementwise op, a unary op and a broadcast of empty operands compute nothing
    assert valid(t["s"]) == [0, 0] and valid(t["e"]) == [0, 0] and valid(t["r"]) == [0, 0]
    assert [d.value for d in t["m"].shape] == [16, 1]  # the physical shape stays the op's


def test_an_empty_value_contradicts_an_annotation_of_another_valid_shape():
    # a plain annotation is the value's type (PyPTO's parser); one stating another valid shape contradicts it
    body = f"""
        c: pl.Tile[[16, 64], pl.FP32, pl.Mem.Vec, {EMPTY}] = pl.tile.create([16, 64], dtype=pl.FP32, target_memory=pl.Mem.Vec)
        r: pl.Tile[[16, 64], pl.FP32, pl.Mem.Vec] = pl.tile.relu(c)
    """
    assert valid(types_of(body)["r"]) == [0, 0]
    with pytest.raises(CompileError) as e:
        types_of(body.replace("pl.Mem.Vec] = pl.tile.relu", "pl.Mem.Vec, pl.TileView(valid_shape=[8, 64])] = pl.tile.relu"))
    assert [d.code for d in e.value.diagnostics] == ["PTOC-E0105"]
    assert "valid shape" in e.value.diagnostics[0].message


def test_an_empty_annotation_still_checks_shape_dtype_and_memory():
    with pytest.raises(CompileError) as e:
        types_of(f"""
            c: pl.Tile[[16, 32], pl.FP32, pl.Mem.Vec, {EMPTY}] = pl.tile.create([16, 64], dtype=pl.FP32, target_memory=pl.Mem.Vec)
        """)
    assert [d.code for d in e.value.diagnostics] == ["PTOC-E0105"]


def test_set_validshape_of_an_empty_tile_sets_the_extents_it_is_given():
    t = types_of(f"""
        c: pl.Tile[[16, 64], pl.FP32, pl.Mem.Vec, {EMPTY}] = pl.tile.create([16, 64], dtype=pl.FP32, target_memory=pl.Mem.Vec)
        v = pl.tile.set_validshape(c, 8, 64)
    """)
    assert valid(t["v"]) == [8, 64]


def _kernel(name: str, arch: str = "a2a3") -> str:
    ctx = CompileContext(arch=arch)
    text = (ROOT / "examples" / f"{name}.ir").read_text()
    return compile_program(frontend(text, f"{name}.ir", ctx), ctx, f"{name}.ir").pto


def test_empty_tiles_are_written_with_runtime_zero_extents():
    # pto-isa's Tile has no static zero valid extent (PTOAS takes v_row=0, the C++ compiler does not): an
    # empty tile is v_row=?, v_col=? with %c0 operands, the pop of one names them too (PyPTO's form)
    pto = _kernel("linear_relu")
    assert "v_row=0" not in pto and "v_col=0" not in pto
    else_part = pto[pto.index("} else {"):]
    pop = next(ln for ln in else_part.splitlines() if "pto.tpop_from_aic" in ln)
    assert re.search(r"= pto\.tpop_from_aic\(%c0_index, %c0_index\) \{split = 0\} -> "
                     r"!pto\.tile_buf<loc=vec, dtype=f32, rows=16, cols=64, v_row=\?, v_col=\?,", pop), pop
    alloc = next(ln for ln in else_part.splitlines() if "pto.alloc_tile" in ln)
    assert "valid_row = %c0_index valid_col = %c0_index" in alloc and "v_row=?, v_col=?" in alloc
    assert "pto.tstore" not in else_part  # lane 1 writes nothing
    lane0 = pto[pto.index("scf.if"):pto.index("} else {")]
    assert "pto.tstore" in lane0 and "v_row=16, v_col=64" in lane0


def test_a5_kernels_have_no_lane_replay():
    pto = _kernel("linear_relu", "a5")
    assert "get_subblock_idx" not in pto and "scf.if" not in pto


@pytest.mark.parametrize("arch", ["a2a3", "a5"])
@pytest.mark.parametrize("name", ["linear_relu", "attention_block"])
def test_the_reference_runs_both_lanes_and_every_stage_agrees(name, arch):
    r = subprocess.run([str(PTOC), "passes", str(ROOT / "examples" / f"{name}.ir"), "--validate", "--arch", arch],
                       capture_output=True, text=True, timeout=600, check=False)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "every stage agrees with the front end" in r.stdout
    emitted = next(ln for ln in r.stdout.splitlines() if ln.startswith("  .pto (emitted)"))
    aiv = re.findall(r"\b\w+_aiv\b", emitted)
    assert len(aiv) == (2 if arch == "a2a3" else 1), emitted  # a2a3: lane 0 and lane 1 ran
