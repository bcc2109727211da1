"""CPython's parser is handed a copy of the text whose one-line annotations are names of the same length
(`pyast._annotation_holes`); the reader reads each annotation's own text. The syntax nodes, spans
included, must be exactly those of parsing the text as it is, wherever such a "hole" stands."""

import sys
from pathlib import Path

import pytest

from ptoc.diagnostics import CompileError
from ptoc.frontend import pyast
from ptoc.frontend.parser import parse_program

ROOT = Path(__file__).resolve().parent.parent
FILES = sorted((ROOT / "examples").glob("*.ir")) + sorted((ROOT / "tests" / "corpus").rglob("*.ir"))


def _dump(n):
    """Every node's tag, children (lazily read annotations read) and span."""
    if isinstance(n, pyast.SN):
        return (n.k, _dump(n.a), _dump(n.span))
    if isinstance(n, (tuple, list)):
        return tuple(_dump(x) for x in n)
    if hasattr(n, "end_col"):
        return (n.file, n.line, n.col, n.end_line, n.end_col)
    return n


def _with_and_without_holes(text: str, monkeypatch):
    holed = pyast.translate(text, "t.ir")
    with monkeypatch.context() as m:
        m.setattr(pyast, "_annotation_holes", lambda text: (text, None))
        plain = pyast.translate(text, "t.ir")
    return holed, plain


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_every_example_reads_to_the_same_nodes(path, monkeypatch):
    holed, plain = _with_and_without_holes(path.read_text(), monkeypatch)
    assert _dump(holed) == _dump(plain)


def test_the_examples_have_holes():
    texts = [pyast.normalize_source(p.read_text()) for p in FILES]
    holed = [t for t in texts if pyast._annotation_holes(t)[1]]
    assert len(holed) > len(texts) // 2


_PROGRAM = """import pypto.language as pl

@pl.program
class p:
    @pl.function(type=pl.FunctionType.InCore)
    def k(self, x: pl.Tensor[[16, 16], pl.FP32], n: pl.Scalar[pl.INDEX]) -> pl.Tensor[[16, 16], pl.FP32]:
        t: pl.Tile[[16, 16], pl.FP32] = pl.load(x, [0, 0], [16, 16])
        u: pl.Tile[[16, 16], pl.FP32] = pl.load(x, [0, 0], [16, 16])
        v: pl.Tile[[16, 16], pl.FP32] = pl.foo(t, {1: u[0], 2: t[1]}, x[0: u[2], 0:16])
        s: pl.Scalar[pl.INDEX] = pl.bar("x: t[1], y", u)  # x: u[1], here
        o: pl.Tensor[[16, 16], pl.FP32] = pl.store(t, [0, 0], x)
        return o
"""


def _holes_at(text: str) -> list[str]:
    _, holes = pyast._annotation_holes(text)
    return [text[s:e] for s, e in sorted((holes or {}).items())]


def test_holes_stand_for_annotations_dict_values_slice_bounds_and_dotted_names_not_strings_or_comments():
    assert _holes_at(_PROGRAM) == [
        "pl.FunctionType.InCore",  # a keyword's value
        "pl.Tensor[[16, 16], pl.FP32]", "pl.Scalar[pl.INDEX]",
        "pl.Tile[[16, 16], pl.FP32]", "pl.load", "[0, 0]", "[16, 16]",  # callees after `=`, list arguments
        "pl.Tile[[16, 16], pl.FP32]", "pl.load", "[0, 0]", "[16, 16]",
        "pl.Tile[[16, 16], pl.FP32]", "pl.foo",
        "u[0]", "u[2]",  # a dict value and a slice bound: read as values, the same nodes
        "pl.Scalar[pl.INDEX]", "pl.bar", "pl.Tensor[[16, 16], pl.FP32]", "pl.store", "[0, 0]"]
    # (not `t[1]` in the string nor `u[1]` after `#`)


def test_a_dotted_name_with_a_keyword_is_no_hole_and_the_text_reads_as_without_holes(monkeypatch):
    text = _PROGRAM.replace("= pl.foo(", "= pl.if.foo(")
    assert "pl.foo" not in _holes_at(text) and not any("if" in h for h in _holes_at(text))
    assert pyast.translate(text, "t.ir") is None  # Python's parser rejects it: the Lark path reports it


def test_values_in_holes_read_as_without_them(monkeypatch):
    holed, plain = _with_and_without_holes(_PROGRAM, monkeypatch)
    assert plain is not None and _dump(holed) == _dump(plain)
    call = holed[-1].a[1][0].a[3][2].a[2].a[0]  # the value of `v: ... = pl.foo(...)`
    assert call.k == "call" and call.a[1][1][1].a[0][1].k == "getitem"  # `{1: u[0], ...}`: u[0] is a subscript


def test_an_annotation_that_is_not_python_goes_to_the_lark_path_and_reports_as_before(monkeypatch):
    text = _PROGRAM.replace("u: pl.Tile[[16, 16], pl.FP32]", "u: pl.Tile[[16,, 16], pl.FP32]")
    assert "pl.Tile[[16,, 16], pl.FP32]" in _holes_at(text)  # the parse of the copy does not see it
    assert pyast.translate(text, "t.ir") is None
    with pytest.raises(CompileError) as holed:
        parse_program(text, "t.ir")
    monkeypatch.setenv("PTOC_FRONTEND", "lark")
    with pytest.raises(CompileError) as lark:
        parse_program(text, "t.ir")
    assert [(d.code, d.message, d.span) for d in holed.value.diagnostics] == \
        [(d.code, d.message, d.span) for d in lark.value.diagnostics]
    assert holed.value.diagnostics[0].span.line == 8


def test_a_hole_whose_text_is_no_subscript_reads_as_without_it(monkeypatch):
    text = _PROGRAM.replace("u: pl.Tile[[16, 16], pl.FP32] =", "u: not[16] =")
    assert "not[16]" in _holes_at(text)
    holed, plain = _with_and_without_holes(text, monkeypatch)
    assert plain is not None and _dump(holed) == _dump(plain)
    assert holed[-1].a[1][0].a[3][1].a[1].k == "unary"


def test_a_hole_the_reader_does_not_read_as_an_expression_sends_the_text_to_be_read_as_it_is(monkeypatch):
    """A hole where no expression is read (here a parameter's name, made a hole on purpose) is never
    trusted: the text is read again without holes, and gives the nodes it gives as it is."""
    real = pyast._annotation_holes
    text = pyast.normalize_source(_PROGRAM)
    name = text.index("n: pl.Scalar[pl.INDEX]) ->")

    def with_a_name_hole(t):
        parsed, holes = real(t)
        return parsed[:name] + "_" + parsed[name + 1:], {**holes, name: name + 1}  # `n` -> `_`

    monkeypatch.setattr(pyast, "_annotation_holes", with_a_name_hole)
    reads = []
    real_read = pyast._read
    monkeypatch.setattr(pyast, "_read", lambda *a: reads.append(a[3] is not None) or real_read(*a))
    holed = pyast.translate(_PROGRAM, "t.ir")
    assert reads == [True, False]  # read with the holes, refused, read as it is
    monkeypatch.setattr(pyast, "_annotation_holes", lambda t: (t, None))
    assert _dump(holed) == _dump(pyast.translate(_PROGRAM, "t.ir"))
    params = holed[-1].a[1][0].a[1]
    assert [p.a[0] for p in params] == ["self", "x", "n"]


# Lists of names and numbers as call arguments are holes (`pl.load(x, [0, c], [16, 16])`); each line: a
# statement, and the list texts that are holes in it.
_LISTS = [
    ("y = pl.f([a], [0, 16], [b1, 0, 128], k=[1, 2])", ["[a]", "[0, 16]", "[b1, 0, 128]"]),  # (not after `=`)
    ("y = pl.f(([1, 2]), [ 1, 2], [1,2], [1, 2,], [1, 2] , [01, 2], [1_0], [0x1], [-1], [1.5], [])", ["[1, 2]"]),
    ("y = pl.f(x, [True, 1], [None], [if, 1], [a, not], [a.b], [a[0]], [f(1)])", []),  # keywords, no plain items
    ("y = pl.f(x, [1, 2][0], [1, 2].a, [1, 2](3), [1, 2] + [3], [[1, 2], [3, 4]])", []),  # not a whole argument
    ("y = pl.f(x, [123456789012345678], [1234567890123456789])", ["[123456789012345678]"]),
    ("y = pl.f(x, [a, 0], # c\n    [b, 1],\n    [c, 2]\n)", ["[a, 0]"]),  # (after `, ` only: not at a line's start)
    ("y = pl.f(x, '[a, 0]', g([1]))  # ([2], [3])", ["[1]"]),  # (not in a string nor after `#`)
    ("for i in pl.range([1, 2], [3]):\n    pass", ["[1, 2]", "[3]"]),
]


@pytest.mark.parametrize("stmt,lists", _LISTS)
def test_list_arguments_are_holes_that_read_as_without_them(stmt, lists, monkeypatch):
    text = _PROGRAM.replace("        return o\n", "".join(f"        {line}\n" for line in stmt.split("\n"))
                            + "        return o\n")
    found = _holes_at(text)
    assert [h for h in found[found.index("pl.store") + 2:] if h.startswith("[")] == lists
    holed, plain = _with_and_without_holes(text, monkeypatch)
    assert _dump(holed) == _dump(plain)
    if plain is not None:
        reads = []
        real_read = pyast._read
        monkeypatch.setattr(pyast, "_read", lambda *a: reads.append(a[3] is not None) or real_read(*a))
        pyast.translate(text, "t.ir")
        assert reads == [True]  # read with its holes, not again as it is


def test_a_list_hole_where_a_parameter_stands_sends_the_text_to_be_read_as_it_is():
    """Python takes no list where a parameter's name stands; in the copy the hole is a name and parses: the
    reader reads no expression there and reads the text again as it is (which Python's parser rejects)."""
    text = _PROGRAM.replace("def k(self, x:", "def k(self, [a], x:")
    assert "[a]" in _holes_at(text)
    assert pyast.translate(text, "t.ir") is None


def test_the_list_holes_of_the_examples_read_to_the_same_nodes(monkeypatch):
    """(every example's nodes are compared above; here: the examples do have list holes)"""
    texts = [pyast.normalize_source(p.read_text()) for p in FILES]
    lists = [h for t in texts for h in _holes_at(t) if h.startswith("[")]
    assert len(lists) > 100


@pytest.mark.skipif(sys.version_info < (3, 11), reason="the possessive form needs Python 3.11's re: the runs on "
                    "3.11 and later compare both forms; here the stepwise form is checked by the other tests")
def test_the_bracket_pattern_without_possessive_runs_matches_the_same_text():
    """Before Python 3.11 `re` has no possessive quantifiers, so the hole finder's bracket pattern is
    written one character at a time there (`pyast._BRACKETS`); both forms must find the very same
    matches, on every annotation-like string of brackets, names, commas, quotes and newlines up to a
    length, and on the examples' and corpus programs' text."""
    import itertools
    import re

    inner = pyast._INNER
    possessive = re.compile(rf"\[(?:{inner}++|\[(?:{inner}++|\[{inner}*+\])*+\])*+\]")
    stepwise = re.compile(rf"\[(?:{inner}|\[(?:{inner}|\[{inner}*\])*\])*\]")
    alphabet = "[]a,=(#'\n"
    seen = 0
    for n in range(1, 8):
        for chars in itertools.product(alphabet, repeat=n):
            text = "".join(chars)
            got = [m.span() for m in stepwise.finditer(text)]
            assert got == [m.span() for m in possessive.finditer(text)], text
            seen += bool(got)
    for path in FILES:
        text = path.read_text()
        assert [m.span() for m in stepwise.finditer(text)] == [m.span() for m in possessive.finditer(text)]
    assert seen > 1000  # the strings did put both to the test
