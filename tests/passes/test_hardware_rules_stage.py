"""Hardware rules of memory spaces are checked where the spaces are decided (InferTileMemorySpace), not
by the front end: a matmul on Mat operands (the form before memory inference) is accepted and its
operands are moved into Left/Right; a move with no TMOV path (Mat -> Vec) and a Left tile that is not
whole 16-row fractals are accepted by the front end and still rejected by `ptoc check` / `compile`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ptoc.context import CompileContext
from ptoc.diagnostics import CompileError
from ptoc.driver import check_source, frontend, lower

PTOC = str(Path(sys.executable).with_name("ptoc"))

HEAD = "import pypto.language as pl\n@pl.program\nclass p:\n    @pl.function(type=pl.FunctionType.InCore)\n"

MAT_MATMUL = HEAD + """\
    def k(self, x: pl.Tensor[[64, 64], pl.BF16], w: pl.Tensor[[64, 64], pl.BF16], o: pl.Out[pl.Tensor[[64, 64], pl.FP32]]) -> pl.Tensor[[64, 64], pl.FP32]:
        a: pl.Tile[[64, 64], pl.BF16, pl.Mem.Mat] = pl.tile.load(x, [0, 0], [64, 64], target_memory=pl.Mem.Mat)
        b: pl.Tile[[64, 64], pl.BF16, pl.Mem.Mat] = pl.tile.load(w, [0, 0], [64, 64], target_memory=pl.Mem.Mat)
        c = pl.tile.matmul(a, b)
        o1: pl.Tensor[[64, 64], pl.FP32] = pl.tile.store(c, [0, 0], o)
        return o1
"""

MAT_TO_VEC = HEAD + """\
    def k(self, x: pl.Tensor[[64, 64], pl.FP16], o: pl.Out[pl.Tensor[[64, 64], pl.FP16]]) -> pl.Tensor[[64, 64], pl.FP16]:
        a: pl.Tile[[64, 64], pl.FP16, pl.Mem.Mat] = pl.tile.load(x, [0, 0], [64, 64], target_memory=pl.Mem.Mat)
        v = pl.tile.move(a, target_memory=pl.Mem.Vec)
        o1: pl.Tensor[[64, 64], pl.FP16] = pl.tile.store(v, [0, 0], o)
        return o1
"""

GEMV_LEFT = HEAD + """\
    def k(self, x: pl.Tensor[[4, 128], pl.BF16], w: pl.Tensor[[128, 64], pl.BF16], o: pl.Out[pl.Tensor[[4, 64], pl.FP32]]) -> pl.Tensor[[4, 64], pl.FP32]:
        a: pl.Tile[[4, 128], pl.BF16, pl.Mem.Mat] = pl.tile.load(x, [0, 0], [4, 128], target_memory=pl.Mem.Mat)
        b: pl.Tile[[128, 64], pl.BF16, pl.Mem.Mat] = pl.tile.load(w, [0, 0], [128, 64], target_memory=pl.Mem.Mat)
        al = pl.tile.move(a, target_memory=pl.Mem.Left)
        br = pl.tile.move(b, target_memory=pl.Mem.Right)
        c = pl.tile.matmul(al, br)
        o1: pl.Tensor[[4, 64], pl.FP32] = pl.tile.store(c, [0, 0], o)
        return o1
"""

CTX = CompileContext(arch="a2a3")


def _check_json(tmp_path, text: str, arch: str = "a2a3"):
    f = tmp_path / "k.ir"
    f.write_text(text)
    r = subprocess.run([PTOC, "check", str(f), "--arch", arch, "--diagnostics", "json"], capture_output=True,
                       text=True)
    return r.returncode, [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]


@pytest.mark.parametrize("text", [MAT_MATMUL, MAT_TO_VEC, GEMV_LEFT])
def test_front_end_accepts_what_only_the_decided_spaces_make_wrong(text):
    check_source(text, "k.ir", CTX)  # raises CompileError on any error


def test_matmul_on_mat_operands_gets_its_moves_at_infer_tile_memory_space():
    prog = frontend(MAT_MATMUL, "k.ir", CTX)
    out = lower(prog, CTX, stop_after="InferTileMemorySpace").program
    from ptoc.ir.printer import print_program

    text = print_program(out)
    assert "pl.tile.move(a, target_memory=pl.Mem.Left)" in text
    assert "pl.tile.move(b, target_memory=pl.Mem.Right)" in text
    assert "pl.tile.matmul(a_left, b_right)" in text


def test_matmul_on_mat_operands_compiles(tmp_path):
    status, diags = _check_json(tmp_path, MAT_MATMUL)
    assert status == 0 and [d for d in diags if d["severity"] == "error"] == []


@pytest.mark.parametrize("arch", ["a2a3", "a5"])
def test_mat_to_vec_move_is_rejected_by_check_at_infer_tile_memory_space(tmp_path, arch):
    with pytest.raises(CompileError) as e:
        lower(frontend(MAT_TO_VEC, "k.ir", CompileContext(arch=arch)), CompileContext(arch=arch),
              stop_after="InferTileMemorySpace")
    (d,) = e.value.diagnostics
    assert (d.code, d.rule, d.span.line) == ("PTOC-E0202", "MOV-6", 7)
    status, diags = _check_json(tmp_path, MAT_TO_VEC, arch)
    assert status == 1 and [(x["code"], x["rule"], x["line"]) for x in diags] == [("PTOC-E0202", "MOV-6", 7)]
    assert "Mat -> Vec" in diags[0]["message"]


def test_left_tile_of_four_rows_is_rejected_by_check_with_the_fractal_rule(tmp_path):
    status, diags = _check_json(tmp_path, GEMV_LEFT)
    assert status == 1
    assert [(x["code"], x["rule"], x["line"]) for x in diags] == [("PTOC-E0202", "NZ-1", 8)]
    assert "rows (4) must be a multiple of 16" in diags[0]["message"]


def test_context_option_turns_the_hardware_rules_on_once():
    hw = CTX.with_hardware_rules()
    assert not CTX.hardware_rules and hw.hardware_rules
    assert hw.with_hardware_rules() is hw and hw.arch == CTX.arch
