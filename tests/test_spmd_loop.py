"""`for b in pl.spmd(n):` -- the loop form of an spmd launch, as PyPTO's parser reads it: an spmd scope around a
kernel scope whose first statement binds the block index; the body runs once per block, and what it assigns
is visible after the loop. Expected structures and names are PyPTO's (its parser and its OutlineIncoreScopes /
OutlineClusterScopes dumps of the same programs); expected numbers are numpy's."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ptoc.context import CompileContext
from ptoc.diagnostics import CompileError
from ptoc.driver import frontend, lower
from ptoc.frontend.parser import parse_program
from ptoc.ir import dtypes
from ptoc.ir.nodes import AssignStmt, Call, ConstInt, EnumLit, ScalarType, ScopeStmt, StrLit
from ptoc.reference.interp import run_function

PTOC = Path(sys.executable).with_name("ptoc")
CTX = CompileContext(arch="a2a3", ptoas_version="v0.61")

PROGRAM = """\
import pypto.language as pl
@pl.program
class p:
    @pl.function
    def main(self, x: pl.Tensor[[64, 256], pl.FP32], out: pl.Out[pl.Tensor[[64, 256], pl.FP32]]) -> pl.Tensor[[64, 256], pl.FP32]:
        for b in pl.spmd(4{kw}):
            t: pl.Tile[[64, 64], pl.FP32, pl.Mem.Vec] = pl.tile.load(x, [0, b * 64], [64, 64], target_memory=pl.Mem.Vec)
            u: pl.Tile[[64, 64], pl.FP32, pl.Mem.Vec] = pl.tile.add(t, t)
            out = pl.tile.store(u, [0, b * 64], out)
        return out
"""


def program(kw: str = "") -> str:
    return PROGRAM.format(kw=kw)


def test_the_loop_is_an_spmd_scope_around_a_kernel_scope_binding_the_block_index():
    main = parse_program(program()).function("main")
    spmd = main.body[0]
    assert isinstance(spmd, ScopeStmt) and spmd.kind == "spmd" and spmd.args == (ConstInt(4, dtypes.INDEX),)
    (kernel,) = spmd.body
    assert isinstance(kernel, ScopeStmt) and kernel.kind == "at"
    assert kernel.kwargs == (("level", EnumLit("Level", "CORE_GROUP")),)
    bind = kernel.body[0]
    assert isinstance(bind, AssignStmt) and bind.target.name == "b"
    assert bind.value == Call("tile.get_block_idx") and bind.annotation == ScalarType(dtypes.INDEX)
    assert len(kernel.body) == 4  # the binding, then the three statements of the loop body


@pytest.mark.parametrize("hint", ["gmm", "gmm_spmd"])
def test_name_hint_names_the_kernel_and_its_spmd_launcher(hint):
    # PyPTO: name_hint="q_proj" (or "q_proj_spmd") -> Spmd function q_proj_spmd, kernel q_proj
    spmd = parse_program(program(f', name_hint="{hint}"')).function("main").body[0]
    assert dict(spmd.kwargs)["name_hint"] == StrLit("gmm_spmd")
    assert dict(spmd.body[0].kwargs)["name_hint"] == StrLit("gmm")
    names = [f.name for f in lower(frontend(program(f', name_hint="{hint}"'), "p.ir", CTX), CTX,
                                   stop_after="OutlineClusterScopes").program.functions]
    assert names == ["gmm_spmd", "gmm", "main"]


def test_outlined_as_pypto_outlines_it():
    # PyPTO's dump after OutlineClusterScopes of this program: InCore main_incore_0 (first statement the
    # block index), Spmd main_spmd_0 calling it, main launching main_spmd_0 with core_num 4
    prog = lower(frontend(program(), "p.ir", CTX), CTX, stop_after="OutlineClusterScopes").program
    assert [(f.name, f.func_type) for f in prog.functions] == [
        ("main_spmd_0", "Spmd"), ("main_incore_0", "InCore"), ("main", "Orchestration")]
    first = prog.function("main_incore_0").body[0]
    assert isinstance(first, AssignStmt) and first.value == Call("tile.get_block_idx")
    (launch,) = [s.value for s in prog.function("main").body if isinstance(s, AssignStmt)]
    assert launch.op == "main_spmd_0" and "core_num" in str(launch.kwarg("attrs"))


def test_every_block_runs_its_panel():
    x = np.random.default_rng(1).standard_normal((64, 256)).astype(np.float32)
    out = run_function(frontend(program(), "p.ir", CTX), "main", {"x": x}, CTX)
    np.testing.assert_array_equal(out["out"], x + x)  # four blocks, each 64 columns at b * 64


def test_validates_at_every_stage_and_the_emitted_kernel_runs_once_per_block(tmp_path):
    src = tmp_path / "p.ir"
    src.write_text(program())
    r = subprocess.run([str(PTOC), "passes", str(src), "--validate"], capture_output=True, text=True, timeout=300,
                       check=False)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "kernels run: " + ", ".join(["main_incore_0"] * 4) in r.stdout
    assert "every stage agrees with the front end" in r.stdout
    r = subprocess.run([str(PTOC), "compile", str(src), "-o", str(tmp_path / "p.pto")], capture_output=True,
                       text=True, timeout=300, check=False)
    assert r.returncode == 0, r.stderr
    doc = json.loads((tmp_path / "p.kernels.json").read_text())
    assert [c["block_num"] for o in doc["orchestration"] for c in o["calls"]] == [4]
    assert "pto.get_block_idx" in (tmp_path / "p.pto").read_text()


@pytest.mark.parametrize("loop, code", [
    ("for b, (o,) in pl.spmd(4, init_values=(out,)):", "PTOC-E0690"),  # PyPTO: no init_values= on the loop form
    ("for b in pl.spmd(4, stage=2):", "PTOC-E0690"),
    ("for b in pl.spmd(0, 4):", "PTOC-E0690"),  # one block count, not a range
])
def test_malformed_loops_are_refused(loop, code):
    text = program().replace("for b in pl.spmd(4):", loop)
    with pytest.raises(CompileError) as e:
        parse_program(text)
    assert [d.code for d in e.value.diagnostics] == [code]


def test_a_loop_inside_a_kernel_is_refused_on_the_command_line(tmp_path):
    src = tmp_path / "k.ir"
    src.write_text(program().replace("    @pl.function\n", "    @pl.function(type=pl.FunctionType.InCore)\n"))
    r = subprocess.run([str(PTOC), "check", str(src)], capture_output=True, text=True, timeout=120, check=False)
    assert r.returncode == 1
    assert "PTOC-E0691" in r.stderr and "k.ir:6:9" in r.stderr and "Traceback" not in r.stderr
