"""`with_value_layout` and `layout_as_annotated` answer at once when the annotation and the value share their
very TileView object (most of the comparisons the verifier makes): the answers are those of the general
field-by-field forms, compared on every call the verifier makes while every example and corpus program
is compiled (the very object where the general form returns one of its arguments)."""

from __future__ import annotations

from pathlib import Path

from ptoc.context import CompileContext
from ptoc.diagnostics import CompileError
from ptoc.frontend.parser import parse_program
from ptoc.ir import type_match, verifier
from ptoc.ir.nodes import TileType
from ptoc.passes.manager import run_pipeline

ROOT = Path(__file__).resolve().parents[1]
PROGRAMS = sorted((ROOT / "examples").glob("*.ir")) + sorted((ROOT / "tests" / "corpus" / "raw").glob("*.ir"))


def _same(got, want, a, b) -> bool:
    if want is a or want is b:
        return got is want
    return got == want


def test_the_fast_answers_are_the_general_ones_on_every_example_and_corpus_program(monkeypatch):
    seen = {"with_value_layout": 0, "layout_as_annotated": 0, "shared view": 0}

    def spy(name, fast, general):
        def check(a, b):
            got = fast(a, b)
            if isinstance(a, TileType) and isinstance(b, TileType) and len(a.shape) == len(b.shape):
                want = general(a, b)
                assert _same(got, want, a, b), (name, a, b)
                seen[name] += 1
                seen["shared view"] += a.view is b.view
            return got
        return check

    monkeypatch.setattr(verifier, "with_value_layout",
                        spy("with_value_layout", type_match.with_value_layout, type_match._with_value_layout))
    monkeypatch.setattr(verifier, "layout_as_annotated",
                        spy("layout_as_annotated", type_match.layout_as_annotated, type_match._layout_as_annotated))
    for path in PROGRAMS:
        ctx = CompileContext(arch="a5" if "fp4" in path.name or "mx" in path.name else "a2a3")
        try:
            run_pipeline(parse_program(path.read_text(encoding="utf-8"), path.name, ctx=ctx), ctx, check_once=True)
        except CompileError:
            pass  # what was compared up to the user's error stands
    # both forms were asked often, and the shared view (the fast answer) is among what was compared
    assert seen["with_value_layout"] > 500 and seen["layout_as_annotated"] > 500 and seen["shared view"] > 500, seen


def test_a_shared_view_is_answered_as_the_general_form_answers_it():
    from dataclasses import replace

    from ptoc.ir import dtypes
    from ptoc.ir.nodes import ConstInt, TileView

    dims = (ConstInt(16, dtypes.INDEX), ConstInt(16, dtypes.INDEX))
    view = TileView(valid_shape=dims, blayout="RowMajor")
    vec = TileType(dims, dtypes.FP32, memory="Vec", view=view)
    bare = replace(vec, memory=None)  # an annotation without a space takes the value's: not the fast answer
    for a, b in ((vec, vec), (vec, replace(vec)), (bare, vec), (vec, bare)):
        assert _same(type_match.with_value_layout(a, b), type_match._with_value_layout(a, b), a, b)
        assert _same(type_match.layout_as_annotated(a, b), type_match._layout_as_annotated(a, b), a, b)
    assert type_match.with_value_layout(bare, vec).memory == "Vec"
