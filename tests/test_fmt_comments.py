"""`ptoc fmt` keeps comments: every comment survives byte for byte and in order, the result means the same
IR, and formatting twice changes nothing (printer docstring: the attachment rule).

The comments of a text are read with CPython's `tokenize`, independently of ptoc's own comment scanner.
"""

from __future__ import annotations

import io
import textwrap
import tokenize
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ptoc.frontend.parser import parse_for_format, parse_program
from ptoc.ir.printer import print_program
from test_roundtrip import assert_same_ir

CORPUS = Path(__file__).resolve().parent / "corpus"
PROGRAMS = sorted(CORPUS.glob("raw/*.ir")) + sorted(CORPUS.glob("formatted/*.ir")) + \
    sorted(CORPUS.glob("commented/*.ir"))
COMMENTED = sorted(CORPUS.glob("commented/*.ir"))


def comments_of(text: str) -> list[str]:
    """The comment tokens of `text`, in order, as CPython's tokenizer reads them."""
    if not text.endswith("\n"):
        text += "\n"
    return [t.string for t in tokenize.generate_tokens(io.StringIO(text).readline) if t.type == tokenize.COMMENT]


def fmt(text: str, file: str = "t.ir") -> str:
    prog, comments, _ = parse_for_format(text, file)
    return print_program(prog, comments)


def test_there_are_commented_corpus_variants():
    assert len(COMMENTED) >= 4
    for p in COMMENTED:
        assert len(comments_of(p.read_text())) >= 6, p.name


@pytest.mark.parametrize("path", PROGRAMS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_fmt_keeps_comments_is_idempotent_and_keeps_the_ir(path):
    src = path.read_text()
    once = fmt(src, str(path))
    assert fmt(once, str(path)) == once, "formatting is not idempotent"
    expected = comments_of(src)
    if not any(c.startswith("# pypto.program") for c in expected):
        expected = ["# pypto.program: " + parse_program(src, verify=False).name] + expected
    got = comments_of(once)
    assert sorted(got) == sorted(expected)          # the same comments ...
    if path.parent.name != "commented" or "pypto.program" in src.splitlines()[0]:
        assert got == expected                      # ... in the same order
    else:  # the header naming the program is added just above the import, below the file's header
        assert [c for c in got if not c.startswith("# pypto.program")] == \
            [c for c in expected if not c.startswith("# pypto.program")]
    assert_same_ir(parse_program(src, str(path), verify=False), parse_program(once, str(path), verify=False))


def test_without_comments_fmt_is_the_plain_printer():
    # programs without comments print exactly as before: the canonical form the golden files hold
    for path in PROGRAMS:
        src = path.read_text()
        if comments_of(src) == comments_of(src.split("\n", 1)[0]):  # only the header line, if any
            assert fmt(src) == print_program(parse_program(src, verify=False)), path.name


def test_the_attachment_rule():
    src = textwrap.dedent("""\
        # file header
        import pypto.language as pl  # import

        # about the program
        @pl.program  # program decorator
        class p:
            # about g
            @pl.function(type=pl.FunctionType.AIV)
            # between decorator and def
            def g(
                self,
                n: pl.Scalar[pl.INDEX],  # the count
                m: pl.Scalar[pl.INDEX],
            ) -> pl.Scalar[pl.INDEX]:  # returns a count
                pl.func_attr({"k": 1})  # attrs
                for (i,) in pl.while_(init_values=(0,)):
                    # the condition
                    pl.cond(i < n)  # cond
                    j: pl.Scalar[pl.INDEX] = pl.yield_(
                        i + 1  # step
                    )
                if j < m:  # small
                    k: pl.Scalar[pl.INDEX] = pl.yield_(j)
                # before else
                else:  # large
                    k: pl.Scalar[pl.INDEX] = pl.yield_(m)
                return k
                # after the last statement
        """)
    assert fmt(src) == textwrap.dedent("""\
        # file header
        # pypto.program: p
        import pypto.language as pl  # import

        # about the program
        @pl.program  # program decorator
        class p:
            # about g
            @pl.function(type=pl.FunctionType.AIV)
            # between decorator and def
            # the count
            def g(self, n: pl.Scalar[pl.INDEX], m: pl.Scalar[pl.INDEX]) -> pl.Scalar[pl.INDEX]:  # returns a count
                pl.func_attr({"k": 1})  # attrs
                for (i,) in pl.while_(init_values=(0,)):
                    # the condition
                    pl.cond(i < n)  # cond
                    j: pl.Scalar[pl.INDEX] = pl.yield_(i + 1)  # step
                if j < m:  # small
                    k: pl.Scalar[pl.INDEX] = pl.yield_(j)
                # before else
                else:  # large
                    k: pl.Scalar[pl.INDEX] = pl.yield_(m)
                return k
        # after the last statement
        """)


def test_a_comment_that_looks_like_code_or_holds_quotes_is_kept_verbatim():
    src = ("import pypto.language as pl\n@pl.function\n"
           "def f(x: pl.Scalar[pl.INDEX]) -> pl.Scalar[pl.INDEX]:\n"
           "    y: pl.Scalar[pl.INDEX] = x + 1  #   y = 'x' # \"z\" ( [ {  \u00e9\u4e2d  \n"
           "    return y\n")
    out = fmt(src)
    assert "y: pl.Scalar[pl.INDEX] = x + 1  #   y = 'x' # \"z\" ( [ {  \u00e9\u4e2d  \n" in out
    assert fmt(out) == out


# ------------------------------------------------------------------ random comments


_TEXT = st.text(st.characters(blacklist_categories=("Cc", "Cs", "Zl", "Zp"), blacklist_characters="\x0c\x0b"),
                max_size=12)


@st.composite
def commented_program(draw):
    path = draw(st.sampled_from(PROGRAMS))
    lines = path.read_text().split("\n")
    n = len(lines)
    own = draw(st.lists(st.tuples(st.integers(0, n), st.integers(0, 12), _TEXT), max_size=8))
    trailing = draw(st.lists(st.tuples(st.integers(0, n - 1), _TEXT), max_size=8))
    out = list(lines)
    for i, text in trailing:
        if not out[i].rstrip().endswith("\\"):
            out[i] = out[i] + "  #" + text
    # insert own-line comments from the bottom up so the indices stay valid
    for at, indent, text in sorted(own, key=lambda t: -t[0]):
        out.insert(at, " " * indent + "#" + text)
    return path, "\n".join(out)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(commented_program())
def test_random_comments_all_survive_in_order_and_the_ir_is_unchanged(case):
    path, src = case
    original = parse_program(path.read_text(), str(path), verify=False)
    out = fmt(src, str(path))
    expected = comments_of(src)
    got = comments_of(out)
    if not any(c.startswith("# pypto.program") for c in expected):
        got = [c for c in got if c != "# pypto.program: " + original.name]
    assert got == expected
    assert_same_ir(original, parse_program(out, str(path), verify=False))
    assert fmt(out, str(path)) == out
