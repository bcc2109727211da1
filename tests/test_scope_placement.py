"""Runtime scope placement checked on the program as written (PTOC-E0810..E0812), and front-end warnings
reaching the user through the real `ptoc` script: `check` and `compile` print them and exit 0."""

from __future__ import annotations

import json
from pathlib import Path

from test_cli import run

KERNEL = """\
import pypto.language as pl
@pl.program
class p:
    @pl.function(type=pl.FunctionType.InCore)
    def k(self, a: pl.Tensor[[16, 16], pl.FP32], out: pl.Out[pl.Tensor[[16, 16], pl.FP32]]) -> pl.Tensor[[16, 16], pl.FP32]:
        t: pl.Tile[[16, 16], pl.FP32, pl.Mem.Vec] = pl.tile.load(a, [0, 0], [16, 16], [16, 16], target_memory=pl.Mem.Vec)
        o: pl.Tensor[[16, 16], pl.FP32] = pl.tile.store(t, [0, 0], out)
        return o
"""


def program(decorator: str, *scopes: str) -> str:
    """An orchestration function calling the kernel inside the given `with` lines, nested in order."""
    lines = [f"    @pl.function({decorator})",
             "    def main(self, a: pl.Tensor[[16, 16], pl.FP32], out: pl.Out[pl.Tensor[[16, 16], pl.FP32]])"
             " -> pl.Tensor[[16, 16], pl.FP32]:"]
    indent = 8
    for s in scopes:
        lines.append(" " * indent + f"with {s}:")
        indent += 4
    lines.append(" " * indent + "r: pl.Tensor[[16, 16], pl.FP32] = self.k(a, out)")
    lines.append("        return r")
    return KERNEL + "\n".join(lines) + "\n"


ORCH = "type=pl.FunctionType.Orchestration"
MANUAL_PLACEMENT = ORCH + ", auto_scope=False"


def check_json(tmp_path: Path, text: str):
    f = tmp_path / "p.ir"
    f.write_text(text)
    p = run("check", str(f), "--diagnostics", "json")
    return p.returncode, [json.loads(line) for line in p.stdout.splitlines() if line.startswith("{")]


def test_hand_placed_auto_scope_warns_and_the_check_passes(tmp_path):
    f = tmp_path / "p.ir"
    f.write_text(program(ORCH, "pl.scope()"))
    p = run("check", str(f))
    assert p.returncode == 0
    assert f"{f}:11:9: warning[PTOC-E0810]: 'main' places an automatic `with pl.scope():` by hand" in p.stderr
    assert "hint: write `@pl.function(..., auto_scope=False)` on 'main'" in p.stderr
    assert p.stderr.rstrip().endswith("0 errors, 1 warning")


def test_compile_prints_the_front_end_warning_and_writes_its_outputs(tmp_path):
    f = tmp_path / "p.ir"
    f.write_text(program(ORCH, "pl.scope()"))
    out = tmp_path / "p.pto"
    p = run("compile", str(f), "-o", str(out))
    assert p.returncode == 0, p.stderr
    assert "warning[PTOC-E0810]" in p.stderr
    assert out.read_text().strip()


def test_batch_compile_prints_the_front_end_warning(tmp_path):
    f = tmp_path / "p.ir"
    f.write_text(program(ORCH, "pl.scope()"))
    p = run("compile", str(f), "--output-dir", str(tmp_path / "o"))
    assert p.returncode == 0, p.stderr
    assert p.stderr.count("warning[PTOC-E0810]") == 1
    assert (tmp_path / "o" / "p.pto").exists()


def test_auto_scope_false_places_scopes_by_hand_without_a_warning(tmp_path):
    status, diags = check_json(tmp_path, program(MANUAL_PLACEMENT, "pl.scope()"))
    assert (status, diags) == (0, [])


def test_manual_scopes_need_no_auto_scope_false(tmp_path):
    for scope in ("pl.manual_scope()", "pl.scope(mode=pl.ScopeMode.MANUAL)"):
        status, diags = check_json(tmp_path, program(ORCH, scope))
        assert (status, diags) == (0, []), scope


def test_manual_inside_manual_is_an_error(tmp_path):
    status, diags = check_json(tmp_path, program(ORCH, "pl.manual_scope()", "pl.scope(mode=pl.ScopeMode.MANUAL)"))
    assert status == 1
    assert [(d["code"], d["severity"], d["line"]) for d in diags] == [("PTOC-E0811", "error", 12)]


def test_auto_inside_manual_is_an_error(tmp_path):
    status, diags = check_json(tmp_path, program(MANUAL_PLACEMENT, "pl.manual_scope()", "pl.scope()"))
    assert status == 1
    assert [(d["code"], d["line"]) for d in diags] == [("PTOC-E0812", 12)]


def test_auto_inside_auto_and_manual_inside_auto_are_allowed(tmp_path):
    status, diags = check_json(tmp_path, program(MANUAL_PLACEMENT, "pl.scope()", "pl.scope()", "pl.manual_scope()"))
    assert (status, diags) == (0, [])


def test_the_placement_check_walks_only_programs_that_write_a_runtime_scope(monkeypatch):
    """check_scopes reports on runtime scopes only: a program the builder built none in is not walked."""
    from ptoc.frontend import scopes
    from ptoc.frontend.parser import parse_program

    walked = []
    real = scopes.check_scopes
    monkeypatch.setattr(scopes, "check_scopes", lambda prog: walked.append(prog) or real(prog))
    parse_program(program(ORCH, "pl.at(level=pl.Level.CORE_GROUP)"), "p.ir")
    assert walked == []
    warned: list = []
    parse_program(program(ORCH, "pl.at(level=pl.Level.CORE_GROUP)", "pl.scope()"), "p.ir", warnings=warned)
    assert len(walked) == 1 and [d.code for d in warned] == ["PTOC-E0810"]
