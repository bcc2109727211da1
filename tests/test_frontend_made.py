"""The parser records, as it builds, the op names of the op calls it made and whether it made an element
read (`parse_program(made=...)`); `full_op_names` skips its search of the program's nodes when nothing in
that record can need a rewrite. The record must never miss a call the built program holds: it is compared
here with a walk of the built program (the obvious census) on every example and corpus program and on
programs written to reach each place the builder makes a call, and the fast path's result with the general
one's."""

from __future__ import annotations

from pathlib import Path

import pytest

from ptoc.context import CompileContext
from ptoc.diagnostics import CompileError
from ptoc.frontend.parser import parse_program
from ptoc.frontend.short_names import _full_op_names, full_op_names, may_rewrite
from ptoc.ir.nodes import Call, GetItem
from ptoc.ir.visitor import plain_walk

ROOT = Path(__file__).resolve().parents[1]
FILES = sorted((ROOT / "examples").glob("*.ir")) + sorted((ROOT / "tests" / "corpus").rglob("*.ir"))


def _census(program) -> set:
    """The op names of the program's op calls, and GetItem when it has an element read: from a walk of
    every node of every function (types included)."""
    out: set = set()
    for f in program.functions:
        for n in plain_walk(f):
            if isinstance(n, Call) and n.kind == "op":
                out.add(n.op)
            elif isinstance(n, GetItem):
                out.add(GetItem)
    return out


def _exact_needs(program) -> bool:
    """The search `full_op_names` makes without the record (`_full_op_names` returns the program itself
    exactly when nothing in it is rewritten)."""
    return _full_op_names(program, CompileContext()) is not program


def _parsed(text: str, verify: bool = True):
    made: set = set()
    return parse_program(text, "t.ir", verify=verify, made=made), made


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_record_holds_every_built_call_of_the_examples_and_corpus(path):
    try:
        prog, made = _parsed(path.read_text())
    except CompileError:
        pytest.skip("a program with errors: the front end stops before full_op_names")
    census = _census(prog)
    assert census, "every example and corpus program makes op calls"
    assert census <= made, census - made
    if _exact_needs(prog):
        assert may_rewrite(made)
    ctx = CompileContext()
    assert full_op_names(prog, ctx, made) == full_op_names(prog, ctx)


def test_the_examples_and_corpus_have_both_kinds():
    """The comparison above meets programs the fast path skips and programs it must rewrite."""
    skipped = rewritten = 0
    for path in FILES:
        try:
            prog, made = _parsed(path.read_text())
        except CompileError:
            continue
        if may_rewrite(made):
            rewritten += _exact_needs(prog)
        else:
            skipped += 1
    assert skipped >= 5 and rewritten >= 3, (skipped, rewritten)


HEAD = "import pypto.language as pl\nimport pypto.language.distributed as pld\n\n@pl.program\nclass p:\n"

# each builds a call (or an element read) at a place of its own in the builder
SITES = {
    "element read": """
    @pl.function
    def f(self, t: pl.Tensor[[16], pl.INT32]) -> pl.Scalar[pl.INT32]:
        v: pl.Scalar[pl.INT32] = t[3]
        return v
""",
    "slice read": """
    @pl.function
    def f(self, t: pl.Tensor[[64, 64], pl.FP32]) -> pl.Tensor[[16, 16], pl.FP32]:
        s: pl.Tensor[[16, 16], pl.FP32] = t[0:16, 16:32]
        return s
""",
    "subscript write": """
    @pl.function
    def f(self, t: pl.Tensor[[64, 64], pl.FP32], u: pl.Tensor[[16, 16], pl.FP32]) -> pl.Tensor[[64, 64], pl.FP32]:
        t[0:16, 16:32] = u
        return t
""",
    "array update": """
    @pl.function
    def f(self, a: pl.Array[4, pl.INT32]) -> pl.Array[4, pl.INT32]:
        a[2] = 7
        return a
""",
    "unpacking": """
    @pl.function
    def g(self, x: pl.Scalar[pl.INDEX]) -> tuple[pl.Scalar[pl.INDEX], pl.Scalar[pl.INDEX]]:
        return x, x
    @pl.function
    def f(self, x: pl.Scalar[pl.INDEX]) -> pl.Scalar[pl.INDEX]:
        a, b = self.g(x)
        return a
""",
    "distributed op": """
    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def f(self) -> pl.Scalar[pl.INDEX]:
        n: pl.Scalar[pl.INDEX] = pld.world_size()
        return n
""",
    "spmd loop": """
    @pl.function
    def f(self, t: pl.Tensor[[64], pl.FP32]) -> pl.Tensor[[64], pl.FP32]:
        for i in pl.spmd(4):
            x: pl.Tile[[16], pl.FP32] = pl.tile.load(t, [0], [16])
        return t
""",
    "short name and keyword alias": """
    @pl.function
    def f(self, t: pl.Tensor[[16, 16], pl.FP32]) -> pl.Tile[[16, 16], pl.FP32]:
        x: pl.Tile[[16, 16], pl.FP32] = pl.load(t, [0, 0], [16, 16], valid_shape=[16, 16])
        return x
""",
    "op in a type": """
    @pl.function
    def f(self, t: pl.Tensor[[pl.tile.get_block_idx()], pl.FP32]) -> pl.Tensor[[pl.tile.get_block_idx()], pl.FP32]:
        return t
""",
}


@pytest.mark.parametrize("name", sorted(SITES))
def test_record_holds_the_call_each_builder_site_makes(name):
    prog, made = _parsed(HEAD + SITES[name], verify=False)  # (the record is what was built, checked or not)
    census = _census(prog)
    assert census, "each snippet builds a call or an element read"
    assert census <= made, census - made
    if _exact_needs(prog):
        assert may_rewrite(made)
