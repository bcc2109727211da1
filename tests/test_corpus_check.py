"""Every corpus program parses and checks (operator rules included) on its target."""

import re
from pathlib import Path

import pytest

from ptoc.context import CompileContext
from ptoc.frontend.parser import parse_program

CORPUS = Path(__file__).resolve().parent / "corpus"
FILES = sorted((CORPUS / "raw").glob("*.ir")) + sorted((CORPUS / "formatted").glob("*.ir"))


def arch_of(path: Path) -> str:
    # packed FP4 and quant_mx run on Ascend950 only (FP4-3, OP-6)
    return "a5" if "fp4" in path.name or "mx" in path.name else "a2a3"


def test_corpus_has_at_least_20_programs_in_both_forms():
    raw = {p.name for p in (CORPUS / "raw").glob("*.ir")}
    formatted = {p.name for p in (CORPUS / "formatted").glob("*.ir")}
    assert len(raw) >= 20 and raw == formatted


@pytest.mark.parametrize("path", FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_corpus_program_checks(path):
    text = path.read_text()
    prog = parse_program(text, str(path), ctx=CompileContext(arch=arch_of(path)))
    # every function the file defines is in the checked program, in order (nothing dropped or invented)
    assert [f.name for f in prog.functions] == re.findall(r"^\s*def (\w+)\(", text, re.M)


@pytest.mark.parametrize("each", [False, True], ids=["checked-once", "checked-after-every-pass"])
@pytest.mark.parametrize("path", sorted((CORPUS / "raw").glob("*.ir")), ids=lambda p: p.name)
def test_corpus_program_lowers_or_reports_a_user_error(path, each, monkeypatch):
    """The whole pipeline on every corpus program ends in a program or in diagnostics, never in an internal
    error (a pass claiming a property its output does not have). Corpus 05's pipeline loop once did: a
    skipped MemoryReuse dropped the stage tags and forgot which buffers the stage guard keeps apart."""
    from ptoc.diagnostics import CompileError
    from ptoc.driver import frontend, lower

    if each:
        monkeypatch.setenv("PTOC_VERIFY_EACH_PASS", "1")
    ctx = CompileContext(arch=arch_of(path))
    try:
        low = lower(frontend(path.read_text(), str(path), ctx), ctx)
    except CompileError as e:
        assert e.diagnostics and all(d.code.startswith("PTOC-") for d in e.diagnostics)
        return
    assert low.program.functions
