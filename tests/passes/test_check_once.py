"""The compiler's pipeline runs check the IR's structure once, after the last pass (`run_pipeline(...,
check_once=True)`, what `ptoc compile` and `ptoc check` use); a run that finds a broken invariant, or in
which a pass raises, is run again checked after every pass, so the error is the one a run checked
throughout gives."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from ptoc.context import CompileContext
from ptoc.diagnostics import CompileError, Diagnostic, InternalError
from ptoc.frontend.parser import parse_program
from ptoc.ir.nodes import AssignStmt, Var
from ptoc.ir.printer import print_program
from ptoc.passes.manager import Instrument, Pass, run_pipeline

ROOT = Path(__file__).resolve().parents[2]

KERNEL = """
@pl.function(type=pl.FunctionType.InCore)
def k(a: pl.Tensor[[16, 16], pl.FP32], b: pl.Tensor[[16, 16], pl.FP32]) -> pl.Tensor[[16, 16], pl.FP32]:
    c: pl.Tensor[[16, 16], pl.FP32] = pl.tensor.add(a, b)
    return c
"""

RUNS: list[str] = []  # the passes that ran, in order


class _Keeps(Pass):
    name = "Keeps"
    stage = "tile"
    summary = "test-only: returns the program as it is"

    def run(self, program, ctx):
        RUNS.append(self.name)
        return program


class _Doubles(Pass):
    name = "Doubles"
    stage = "tile"
    summary = "test-only: assigns the first name of the first function a second time"

    def run(self, program, ctx):
        RUNS.append(self.name)
        f = program.functions[0]
        dup = AssignStmt(Var(f.body[0].target.name), f.body[0].value)
        return replace(program, functions=(replace(f, body=(f.body[0], dup) + f.body[1:]),) + program.functions[1:])


class _Undoes(Pass):
    name = "Undoes"
    stage = "tile"
    summary = "test-only: drops the second statement again (repairs what Doubles broke)"

    def run(self, program, ctx):
        RUNS.append(self.name)
        f = program.functions[0]
        return replace(program, functions=(replace(f, body=(f.body[0],) + f.body[2:]),) + program.functions[1:])


class _Rejects(Pass):
    name = "Rejects"
    stage = "tile"
    summary = "test-only: reports a user error"

    def run(self, program, ctx):
        RUNS.append(self.name)
        raise CompileError([Diagnostic("PTOC-E0290", "rejected", None)])


@pytest.fixture(autouse=True)
def _fresh(monkeypatch):
    monkeypatch.delenv("PTOC_VERIFY_EACH_PASS", raising=False)
    RUNS.clear()


def _prog():
    return parse_program(KERNEL, "k.ir")


def test_a_clean_run_checks_once_and_runs_each_pass_once():
    from ptoc.ir.verifier import Verifier

    seen = []
    original = Verifier.function

    def counting(self, f):
        seen.append(f.name)
        return original(self, f)

    with pytest.MonkeyPatch.context() as m:
        m.setattr(Verifier, "function", counting)
        run_pipeline(_prog(), CompileContext(), passes=[_Keeps, _Doubles, _Undoes], verify=False)
        unchecked = len(seen)  # what reading the input's properties verifies
        RUNS.clear()
        seen.clear()
        run_pipeline(_prog(), CompileContext(), passes=[_Keeps, _Doubles, _Undoes], check_once=True)
        assert RUNS == ["Keeps", "Doubles", "Undoes"] and len(seen) == unchecked + 1 and seen[-1] == "k"
        RUNS.clear()
        seen.clear()
        with pytest.raises(InternalError, match="after pass Doubles"):  # checked after every pass
            run_pipeline(_prog(), CompileContext(), passes=[_Keeps, _Doubles, _Undoes])
        assert RUNS == ["Keeps", "Doubles"] and len(seen) == unchecked + 1  # after Doubles (Keeps changed nothing)


def test_a_broken_invariant_is_reported_naming_the_pass_as_when_checked_throughout():
    with pytest.raises(InternalError) as once:
        run_pipeline(_prog(), CompileContext(), passes=[_Keeps, _Doubles, _Keeps], check_once=True)
    assert RUNS == ["Keeps", "Doubles", "Keeps", "Keeps", "Doubles"]  # once unchecked, then again up to the error
    RUNS.clear()
    with pytest.raises(InternalError) as each:
        run_pipeline(_prog(), CompileContext(), passes=[_Keeps, _Doubles, _Keeps])
    assert str(once.value) == str(each.value) and "after pass Doubles" in str(each.value)


def test_a_pass_after_a_broken_invariant_does_not_hide_it():
    with pytest.raises(InternalError, match="after pass Doubles"):
        run_pipeline(_prog(), CompileContext(), passes=[_Doubles, _Rejects], check_once=True)


def test_a_user_error_of_a_pass_is_the_same():
    with pytest.raises(CompileError) as once:
        run_pipeline(_prog(), CompileContext(), passes=[_Keeps, _Rejects], check_once=True)
    with pytest.raises(CompileError) as each:
        run_pipeline(_prog(), CompileContext(), passes=[_Keeps, _Rejects])
    assert once.value.diagnostics == each.value.diagnostics


def test_the_environment_restores_checks_after_every_pass(monkeypatch):
    monkeypatch.setenv("PTOC_VERIFY_EACH_PASS", "1")
    with pytest.raises(InternalError, match="after pass Doubles"):
        run_pipeline(_prog(), CompileContext(), passes=[_Keeps, _Doubles, _Undoes], check_once=True)
    assert RUNS == ["Keeps", "Doubles"]


@pytest.mark.parametrize("path", sorted((ROOT / "examples").glob("*.ir")), ids=lambda p: p.name)
def test_the_whole_pipeline_gives_the_same_program_either_way(path):
    prog = parse_program(path.read_text(encoding="utf-8"), path.name)
    ctx = CompileContext()
    assert print_program(run_pipeline(prog, ctx, check_once=True)) == print_program(run_pipeline(prog, ctx))


def test_timings_keep_the_checks_for_the_end():
    # a timed run checks once as the compiler's own runs do: the bad state Doubles leaves, which Undoes
    # repairs, goes unnoticed, and every pass has one row
    from ptoc.passes.manager import Dumps, Timings

    timings = Timings()
    run_pipeline(_prog(), CompileContext(), passes=[_Keeps, _Doubles, _Undoes], check_once=True,
                 instruments=[timings])
    assert RUNS == ["Keeps", "Doubles", "Undoes"]
    assert [r[0] for r in timings.rows] == ["Keeps", "Doubles", "Undoes"]
    # an instrument that reads the IR after every pass still turns it off
    RUNS.clear()
    with pytest.raises(InternalError, match="after pass Doubles"):
        run_pipeline(_prog(), CompileContext(), passes=[_Keeps, _Doubles, _Undoes], check_once=True,
                     instruments=[Timings(), Dumps()])
    assert RUNS == ["Keeps", "Doubles"]


def test_a_timed_run_replayed_after_an_error_has_the_replays_rows():
    from ptoc.passes.manager import Timings

    timings = Timings()
    with pytest.raises(InternalError, match="after pass Doubles"):
        run_pipeline(_prog(), CompileContext(), passes=[_Keeps, _Doubles, _Keeps], check_once=True,
                     instruments=[timings])
    assert RUNS == ["Keeps", "Doubles", "Keeps", "Keeps", "Doubles"]
    assert [r[0] for r in timings.rows] == ["Keeps"]  # the replay stopped at Doubles' check, before its row


class _SsaImplied(Instrument):
    """For the input and after every pass: a program the structural check in single-assignment mode finds
    nothing wrong in has the `ssa` property (its own check finds nothing), which the check at the end of a
    `check_once` run relies on to leave that property's check out."""

    def __init__(self):
        self.clean = 0
        self.broken = 0

    def before_pipeline(self, program, ctx):
        self.ctx = ctx
        self.compare(program)

    def after_pass(self, index, p, program, seconds):
        self.compare(program)

    def skipped_pass(self, index, p, program, reason):
        self.compare(program)

    def compare(self, program):
        from ptoc.ir.verifier import verify_program
        from ptoc.passes.manager import PROPERTIES, _import_properties

        _import_properties()
        violations = PROPERTIES["ssa"](program, self.ctx, None)
        if not any(d.severity == "error" for d in verify_program(program, ctx=self.ctx, ssa=True)):
            assert violations == []
            self.clean += 1
        else:
            self.broken += bool(violations)


def test_a_program_the_ssa_structural_check_passes_has_the_ssa_property_on_every_program_after_every_pass():
    from bundled_programs import PROGRAMS  # (tests/ is on sys.path: tests/conftest.py)

    seen = _SsaImplied()
    for path in PROGRAMS:
        ctx = CompileContext()
        try:
            run_pipeline(parse_program(path.read_text(encoding="utf-8"), path.name, ctx=ctx), ctx,
                         instruments=[seen])
        except CompileError:
            pass
    # the pipeline's programs pass; programs as written that assign a name twice or read it after its loop fail
    # both checks
    assert seen.clean > 1000 and seen.broken > 0, (seen.clean, seen.broken)


@pytest.mark.parametrize("body", [
    "x = pl.add(a, b)\nx = pl.add(x, b)\nreturn x",
    "for i in pl.range(4):\n    last = pl.add(a, b)\nreturn last",
], ids=["assigned twice", "read after its loop"])
def test_the_ssa_structural_check_rejects_what_the_ssa_property_rejects(body):
    from ptoc.ir.verifier import verify_program
    from ptoc.passes.manager import PROPERTIES, _import_properties

    text = ("import pypto.language as pl\n@pl.program\nclass P:\n    @pl.function\n"
            "    def main(self, a: pl.Tensor[[16], pl.FP32], b: pl.Tensor[[16], pl.FP32]) -> pl.Tensor[[16], pl.FP32]:\n"
            + "".join(f"        {line}\n" for line in body.splitlines()))
    ctx = CompileContext()
    prog = parse_program(text, "p.ir", ctx=ctx)
    _import_properties()
    assert PROPERTIES["ssa"](prog, ctx, None)
    assert any(d.severity == "error" for d in verify_program(prog, ctx=ctx, ssa=True))
