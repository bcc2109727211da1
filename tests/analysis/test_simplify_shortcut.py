"""`simplify_function` leaves a function's statements to the dead-code step alone when its node index
shows nothing the rewriting could change (`_nothing_to_fold`). The oracle is the rewriting itself
(`_Simplifier`): wherever the shortcut says "nothing", the rewriting must return every statement as the
very same object; and loops that run once or never, literals and foldable operators must not be taken
for nothing."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from ptoc.analysis.simplify import _nothing_to_fold, _Simplifier, simplify_function
from ptoc.context import CompileContext
from ptoc.driver import frontend, lower
from ptoc.frontend.parser import parse_program
from ptoc.ir.verifier import NodeIndex, function_types

CTX = CompileContext()
EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "examples").glob("*.ir"))


def fn(body: str) -> str:
    body = textwrap.indent(textwrap.dedent(body).strip("\n"), " " * 8)
    return ("import pypto.language as pl\n\n@pl.program\nclass p:\n    @pl.function\n"
            f"    def main(self, out: pl.Tensor[[16], pl.INDEX]):\n{body}\n")


def _agrees(program) -> int:
    """How many functions the shortcut skipped; asserts the rewriting changes none of them."""
    types = function_types(program, CTX)
    skipped = 0
    for f in program.functions:
        if _nothing_to_fold(NodeIndex(f)):
            skipped += 1
            body = _Simplifier(f, types.get(f.name, {})).block(f.body)
            assert len(body) == len(f.body) and all(a is b for a, b in zip(body, f.body)), f.name
    return skipped


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_shortcut_agrees_with_the_rewriting_at_both_positions(path):
    program = frontend(path.read_text(), path.name, CTX)
    first = lower(program, CTX, stop_after="ConvertToSSA").program
    last = lower(program, CTX, stop_after="ExpandManualPhaseFence").program
    _agrees(first)
    _agrees(last)


def test_the_examples_have_functions_the_shortcut_skips():
    skipped = sum(_agrees(lower(frontend(p.read_text(), p.name, CTX), CTX).program) for p in EXAMPLES)
    assert skipped > 0


@pytest.mark.parametrize("body", [
    "for i in pl.range(0, 1):\n    pl.tensor.write(out, [i], i)",  # runs once: replaced by its body
    "for i in pl.range(3, 3):\n    pl.tensor.write(out, [0], i)",  # never runs
    "for i in pl.range(0, 8, 8):\n    pl.tensor.write(out, [i], i)",  # once, by its step
    "c: pl.Scalar[pl.INDEX] = 4\npl.tensor.write(out, [c], c)",  # a literal to propagate
    "pl.tensor.write(out, [2 + 3], 0)",  # an operator to fold
    "if True:\n    pl.tensor.write(out, [0], 1)",  # an if on a literal
])
def test_what_the_rewriting_changes_is_not_skipped(body):
    program = parse_program(fn(body), "k.ir", ctx=CTX)
    f = program.functions[0]
    assert not _nothing_to_fold(NodeIndex(f))
    assert simplify_function(f, function_types(program, CTX)["main"]) != f


def test_a_loop_of_several_trips_is_skipped_and_kept():
    program = parse_program(fn("for i in pl.range(0, 8):\n    pl.tensor.write(out, [i], i)"), "k.ir", ctx=CTX)
    f = program.functions[0]
    assert _nothing_to_fold(NodeIndex(f))
    assert simplify_function(f, function_types(program, CTX)["main"]) is f
