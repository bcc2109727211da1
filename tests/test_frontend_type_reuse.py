"""A type annotation written the same way many times is read and built once per program; every copy must
still be exactly the type the annotation at its own place builds: the same nodes, each span pointing at
its own text, and the same diagnostics, each at its own line."""

from __future__ import annotations

import ast
import dataclasses

import pytest

from ptoc.diagnostics import CompileError, Span
from ptoc.frontend import pyast
from ptoc.frontend.parser import parse_program

T = "pl.Tile[[32, 128], pl.FP32, pl.Mem.Vec]"
G = "pl.Tensor[[M, 128], pl.FP32]"


def _program(tile: str = T, tensor: str = G) -> str:
    return (
        "import pypto.language as pl\n\nM = pl.dynamic(\"M\")\n\n@pl.program\nclass p:\n"
        "    @pl.function(type=pl.FunctionType.AIV)\n"
        f"    def k(self, x: {tensor}, out: pl.Out[{tensor}]) -> {tensor}:\n"
        f"        a: {tile} = pl.tile.load(x, [0, 0], [32, 128], [32, 128], target_memory=pl.Mem.Vec)\n"
        f"        b: {tile} = pl.tile.add(a, a)\n"
        f"        c:   {tile} = pl.tile.mul(b, a)\n"
        f"        o: {tensor} = pl.tile.store(c, [0, 0], out)\n"
        "        return o\n"
        "    @pl.function(type=pl.FunctionType.AIV)\n"
        f"    def k2(self, y: {tensor}, out: pl.Out[{tensor}]) -> {tensor}:\n"
        f"        d: {tile} = pl.tile.load(y, [0, 0], [32, 128], [32, 128], target_memory=pl.Mem.Vec)\n"
        f"        r: {tensor} = pl.tile.store(d, [0, 0], out)\n"
        "        return r\n"
    )


def _spans(x, out: list) -> list:
    """Every span in the node tree `x`, in field order."""
    if isinstance(x, Span):
        out.append((x.line, x.col, x.end_line, x.end_col))
    elif dataclasses.is_dataclass(x) and not isinstance(x, type):
        for f in dataclasses.fields(x):
            _spans(getattr(x, f.name), out)
    elif isinstance(x, tuple):
        for v in x:
            _spans(v, out)
    return out


def test_each_copy_of_an_annotation_has_the_spans_of_its_own_text():
    text = _program()
    lines = text.split("\n")
    prog = parse_program(text, "t.ir")
    stmts = [st for f in prog.functions for st in f.body if getattr(st, "annotation", None) is not None]
    tiles = [st for st in stmts if type(st.annotation).__name__ == "TileType"]
    assert [st.target.name for st in tiles] == ["a", "b", "c", "d"]
    for st in tiles:
        line = st.span.line
        col = lines[line - 1].index(T) + 1  # where the annotation is written (independent of the parser)
        assert st.annotation.span == Span("t.ir", line, col, line, col + len(T))
        c32 = lines[line - 1].index("32", col - 1) + 1
        c128 = lines[line - 1].index("128", col - 1) + 1
        assert [(d.value, d.span) for d in st.annotation.shape] == [
            (32, Span("t.ir", line, c32, line, c32 + 2)), (128, Span("t.ir", line, c128, line, c128 + 3))]
    # the tensor parameters: the name M in the shape of each copy is a Var at its own place
    for f in prog.functions:
        for p in f.params:
            line = p.span.line
            m = p.type.shape[0]
            assert m.name == "M" and m.span.line == line
            assert lines[line - 1][m.span.col - 1:m.span.end_col - 1] == "M"


def test_copies_are_the_nodes_the_lark_path_builds(monkeypatch):
    """The Lark path reads every annotation on its own: both programs, spans included, are the same."""
    text = _program()
    fast = parse_program(text, "t.ir")
    monkeypatch.setenv("PTOC_FRONTEND", "lark")
    slow = parse_program(text, "t.ir")
    assert fast == slow
    assert _spans(fast, []) == _spans(slow, [])


def test_an_error_in_a_repeated_annotation_is_reported_at_each_place():
    bad = "pl.Tile[[32, 128], pl.FP33, pl.Mem.Vec]"
    text = _program(tile=bad)
    with pytest.raises(CompileError) as e:
        parse_program(text, "t.ir")
    lines = text.split("\n")
    where = [i + 1 for i, line in enumerate(lines) if bad in line]
    got = [(d.code, d.span.line, d.span.col) for d in e.value.diagnostics if d.code == "PTOC-E0107"]
    assert got == [(("PTOC-E0107"), line, lines[line - 1].index("pl.FP33") + 1) for line in where]


def test_a_repeated_annotation_with_a_call_is_built_each_time():
    """pl.MemRef(...) declares an allocation: such an annotation is not copied; each one is checked."""
    tile = 'pl.Tile[[32, 128], pl.FP32, pl.MemRef("buf", slots=2)[0], pl.Mem.Vec]'
    other = 'pl.Tile[[32, 128], pl.FP32, pl.MemRef("buf", slots=3)[0], pl.Mem.Vec]'
    text = _program(tile=tile).replace(f"c:   {tile}", f"c:   {other}")
    with pytest.raises(CompileError) as e:
        parse_program(text, "t.ir")
    assert [d.code for d in e.value.diagnostics] == ["PTOC-E0140"]
    assert e.value.diagnostics[0].span.line == next(
        i + 1 for i, line in enumerate(text.split("\n")) if "slots=3" in line)


def test_a_repeated_annotation_is_read_lazily_but_reads_the_same_nodes():
    text = _program()
    nodes = pyast.translate(text, "t.ir")
    reader = pyast._Reader(pyast.normalize_source(text), "t.ir")
    reader.annotation = reader.ex  # this reader reads every annotation in full
    whole = reader.module(ast.parse(text))

    lazy = []

    def dump(n):
        if isinstance(n, pyast.SN):
            if isinstance(n, pyast._TypeSN) and n._a is None:
                lazy.append(n.key)
            return (n.k, dump(n.a), n.span)
        if isinstance(n, tuple):
            return tuple(dump(x) for x in n)
        return n

    assert dump(nodes) == dump(whole)
    assert lazy.count(T) == 3 and lazy.count(G) == 3 and lazy.count(f"pl.Out[{G}]") == 1  # all but the first


def _fields_in_order(x):
    """A node tree as nested (class, [(field, value)...]) in the order its fields were set, spans included."""
    if isinstance(x, Span):
        return ("span", x.file, x.line, x.col, x.end_line, x.end_col)
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return (type(x), [(k, _fields_in_order(v)) for k, v in vars(x).items()])
    if isinstance(x, tuple):
        return tuple(_fields_in_order(v) for v in x)
    return x


def test_the_written_out_copier_makes_what_the_plan_walk_makes(monkeypatch):
    """`parser._copier` (straight-line code per annotation) against `parser._copy_moved` (the walk of the
    plan) on every copy of every annotation of the examples and the corpus."""
    from pathlib import Path

    from ptoc.frontend import parser

    root = Path(__file__).resolve().parent.parent
    files = sorted((root / "examples").glob("*.ir")) + sorted((root / "tests" / "corpus").rglob("*.ir"))
    made = []
    written_out = parser._copier

    def both(plan, old):
        copy = written_out(plan, old)

        def checked(new, dc):
            got = copy(new, dc)
            want = parser._copy_moved(plan, old, new, dc)
            assert _fields_in_order(got) == _fields_in_order(want)
            made.append(got)
            return got
        return checked

    monkeypatch.setattr(parser, "_copier", both)
    for path in files:
        try:
            parse_program(path.read_text(), str(path))
        except CompileError:
            pass  # (the corpus holds programs with errors: their annotations are copied all the same)
    assert len(made) > 500


def test_nodes_made_without_init_are_the_nodes_init_makes(monkeypatch):
    """`parser._maker`'s node makers against the dataclasses' own constructors: every example and corpus
    program builds to the same nodes, attributes set in the same order, spans included."""
    from pathlib import Path

    from ptoc.frontend import parser
    from ptoc.ir import nodes

    root = Path(__file__).resolve().parent.parent
    files = sorted((root / "examples").glob("*.ir")) + sorted((root / "tests" / "corpus").rglob("*.ir"))

    def build_all():
        out = []
        for path in files:
            try:
                out.append(_fields_in_order(parse_program(path.read_text(), str(path), verify=False)))
            except CompileError as e:
                out.append([(d.code, d.message, d.span) for d in e.diagnostics])
        return out

    made = parser._mk_call(Span("f", 1, 2, 1, 9), "tile.add", (), (), "op")
    assert type(made) is nodes.Call and list(vars(made)) == ["span", "op", "args", "kwargs", "kind"]
    assert made == nodes.Call("tile.add", span=Span("f", 1, 2, 1, 9))
    fast = build_all()
    for name, cls in (("_mk_var", nodes.Var), ("_mk_int", nodes.ConstInt), ("_mk_call", nodes.Call),
                      ("_mk_list", nodes.ListExpr), ("_mk_enum", nodes.EnumLit), ("_mk_assign", nodes.AssignStmt)):
        monkeypatch.setattr(parser, name, lambda span, *values, cls=cls: cls(*values, span=span))
    assert build_all() == fast
