"""The front end's own lexer and LALR loop against Lark's.

Three ways to read a file must agree: the default (`ptoc.frontend.lexer.FastLexer` feeding the
table-driven loop `syntax._drive`), Lark's contextual lexer and indenter feeding the same loop
(`PTOC_LARK_LEXER=1`), and Lark's own `Lark.parse` with its lexer (`PTOC_LARK_LOOP=1`). Every corpus
file, example, malformed-input case, program extracted from PyPTO's tests (when present), randomly
generated program and random token soup must give the same syntax nodes (spans included) and the same
diagnostics (codes, messages, positions and hints) all three ways, and the two lexers the same tokens
(types, text and positions).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ptoc.diagnostics import Span
from ptoc.frontend import syntax
from ptoc.frontend.lexer import FastLexer

from ptoc.ir.printer import print_program
from test_malformed import CASES  # noqa: E402  (tests/ is on sys.path under pytest)
from test_roundtrip_hypothesis import programs  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
FILES = sorted((ROOT / "tests" / "corpus").rglob("*.ir")) + sorted((ROOT / "examples").glob("*.ir"))

# Syntax errors the malformed cases do not cover: several errors in one file, a bad indent, a tab,
# an unclosed bracket at the end of the file, a stray closer, a bad string literal.
EXTRA = [
    "x = (1,\n",
    "def f(:\n    pass\nx = ]\ny = 1 +\n",
    "if x:\n  a = 1\n    b = 2\n",
    "if x:\n    a = 1\n  b = 2\n",
    "if x:\n\ta = 1\n",
    "a = [1, 2)\n",
    "s = 'ab\\q' + '\n",
    "for i in range(3):\nx = 1\n",
    "a = 1 $ 2\nb = 3 ; c = 4\n",
    "",
    "\n\n# only a comment\n",
]


def _dump(n):
    if isinstance(n, syntax.SN):
        return (n.k, _dump(n.a), _span(n.span))
    if isinstance(n, (tuple, list)):
        return tuple(_dump(x) for x in n)
    if hasattr(n, "line") and hasattr(n, "column") and hasattr(n, "type"):
        return ("tok", n.type, str(n), n.line, n.column)
    if isinstance(n, Span):
        return _span(n)
    return n


def _span(s):
    return None if s is None else (s.file, s.line, s.col, s.end_line, s.end_col)


_MODES = {"fast": {}, "lark lexer": {"PTOC_LARK_LEXER": "1"}, "lark loop": {"PTOC_LARK_LOOP": "1"}}


def _read(monkeypatch, text: str, mode: str):
    for var in ("PTOC_LARK_LEXER", "PTOC_LARK_LOOP"):
        monkeypatch.delenv(var, raising=False)
    for var, val in _MODES[mode].items():
        monkeypatch.setenv(var, val)
    nodes, diags = syntax.parse_syntax(text, "in.ir")
    return _dump(nodes), [(d.code, d.message, _span(d.span), d.hint) for d in diags]


def _all(monkeypatch, text: str) -> dict:
    return {mode: _read(monkeypatch, text, mode) for mode in _MODES}


def _both(monkeypatch, text: str):
    out = _all(monkeypatch, text)
    assert out["lark lexer"] == out["lark loop"]
    return out["fast"], out["lark loop"]


def _tok(t):
    return (t.type, str(t), t.start_pos, t.line, t.column, t.end_line, t.end_column, t.end_pos)


def _token_streams(monkeypatch, text: str):
    """The tokens the LALR loop takes from each lexer (up to the first error), and each run's result."""
    seen: dict[str, list] = {"fast": [], "lark lexer": []}
    fast_tokens, with_end = FastLexer.tokens, syntax._with_end

    def record(name, stream):
        for t in stream:
            seen[name].append(_tok(t))
            yield t

    results = {}
    with monkeypatch.context() as m:
        m.setattr(FastLexer, "tokens", lambda self, text, stack: record("fast", fast_tokens(self, text, stack)))
        m.setattr(syntax, "_with_end", lambda stream: record("lark lexer", with_end(stream)))
        for mode in ("fast", "lark lexer"):
            results[mode] = _read(monkeypatch, syntax.normalize_source(text), mode)
    return seen, results


def _same_everywhere(monkeypatch, text: str) -> None:
    out = _all(monkeypatch, text)
    assert out["fast"] == out["lark loop"]
    assert out["lark lexer"] == out["lark loop"]
    seen, _ = _token_streams(monkeypatch, text)
    assert seen["fast"] == seen["lark lexer"]


def test_parity_inputs_are_present():
    assert len(FILES) >= 10
    assert len(CASES) >= 36


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_same_nodes_on_valid_files(monkeypatch, path):
    text = path.read_text(encoding="utf-8")
    fast, lark = _both(monkeypatch, text)
    assert lark[1] == [] and lark[0] is not None
    assert fast == lark
    seen, _ = _token_streams(monkeypatch, text)
    assert seen["fast"] == seen["lark lexer"] and len(seen["fast"]) > 20


@pytest.mark.parametrize("src", [c[1] for c in CASES] + EXTRA)
def test_same_diagnostics_on_malformed_input(monkeypatch, src):
    fast, lark = _both(monkeypatch, src)
    assert fast == lark
    seen, _ = _token_streams(monkeypatch, src)
    assert seen["fast"] == seen["lark lexer"]


def test_extra_cases_do_report_errors(monkeypatch):
    # the EXTRA inputs above are meant to fail (except the two empty ones): guard against a list of
    # inputs that parse cleanly and so compare nothing but empty diagnostics
    failing = [src for src in EXTRA if syntax.parse_syntax(src, "in.ir")[1]]
    assert len(failing) == len(EXTRA) - 2


# Programs extracted from PyPTO's own tests by `python benchmarks/pypto_conformance.py PYPTO_CHECKOUT
# --out-dir DIR`; they are not part of this repository: set PTOC_PARITY_DIR=DIR to compare on them.
_PARITY_DIR = os.environ.get("PTOC_PARITY_DIR")


@pytest.mark.skipif(not _PARITY_DIR or not Path(_PARITY_DIR).is_dir(),
                    reason="PTOC_PARITY_DIR (a folder of .ir files) is not set")
def test_same_nodes_and_tokens_on_extracted_programs(monkeypatch):
    files = sorted(Path(_PARITY_DIR).glob("*.ir"))
    assert files, f"no .ir files in {_PARITY_DIR}"
    for path in files:
        text = path.read_text(encoding="utf-8")
        out = _all(monkeypatch, text)
        assert out["fast"] == out["lark loop"] == out["lark lexer"], path.name
        seen, _ = _token_streams(monkeypatch, text)
        assert seen["fast"] == seen["lark lexer"], path.name


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                                                 HealthCheck.function_scoped_fixture])
@given(programs())
def test_same_nodes_and_tokens_on_random_programs(monkeypatch, prog):
    text = print_program(prog)
    out = _all(monkeypatch, text)
    assert out["fast"][1] == [], out["fast"][1]
    assert out["fast"] == out["lark loop"] == out["lark lexer"]
    seen, _ = _token_streams(monkeypatch, text)
    assert seen["fast"] == seen["lark lexer"]


# Token soup: fragments of the IR's lexical classes in random order, with keywords where names are
# expected (`pl.tile.not`), operators that share a prefix (`**`, `*`, `->`, `-`), unterminated strings,
# tabs, backslash continuations, comments, characters no terminal matches and every kind of indentation.
_FRAGMENTS = [
    "pl", "x", "_y1", ".", ",", ":", "=", "==", "!=", "<", "<=", "<<", ">", ">=", ">>", "+", "-", "->", "*", "**",
    "/", "//", "%", "&", "|", "^", "~", "@", "(", ")", "[", "]", "{", "}", "0", "7", "1_000", "0x1F", "1.5",
    ".5e3", "2e-3", "'s'", '"t"', "'un", '"\\q"', "#c", " ", "  ", "\t", "\\\n", "\n", "\n    ", "\n  ", "\n\t",
    "\n        ", "$", ";", "?", "!", "`", "if", "elif", "else", "for", "in", "while", "with", "as", "def", "class",
    "return", "pass", "import", "from", "and", "or", "not", "True", "False", "None", "iff", "notx", "in_",
]
_SEEDS = ["import pypto.language as pl\n", "x = pl.tile.not(a)\n", "def f(self, a: pl.Tensor[[4], pl.FP32]) -> x:\n",
          "for i in pl.range(4):\n    ", "y = a.if + b.in\n", "if x:\n    pass\nelse:\n    "]


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.sampled_from(_SEEDS), st.lists(st.sampled_from(_FRAGMENTS), max_size=40))
def test_same_result_on_token_soup(monkeypatch, seed, parts):
    _same_everywhere(monkeypatch, seed + " ".join(parts) + "\n")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.sampled_from(_SEEDS), st.lists(st.sampled_from(_FRAGMENTS), max_size=40))
def test_same_result_on_token_soup_without_spaces(monkeypatch, seed, parts):
    _same_everywhere(monkeypatch, seed + "".join(parts))


def test_keywords_as_attribute_names_read_as_names():
    # the contextual case the combined expression hands to Lark's state lexer: after `.` only NAME fits
    nodes, diags = syntax.parse_syntax("y = a.if + b.not\n", "in.ir")
    assert diags == []
    rhs = nodes[0].a[1].a[0]
    assert (rhs.k, rhs.a[1].k, rhs.a[1].a[1], rhs.a[2].k, rhs.a[2].a[1]) == ("bin", "attr", "if", "attr", "not")


def test_a_lark_without_the_parts_the_lexer_reads_falls_back_to_larks_lexer(monkeypatch):
    text = FILES[0].read_text(encoding="utf-8")
    expected = _read(monkeypatch, text, "fast")

    def unusable(*_args):
        raise AttributeError("no root_lexer")

    monkeypatch.setattr(syntax, "FastLexer", unusable)
    monkeypatch.delitem(syntax._GRAMMAR_CACHE, "l", raising=False)
    seen, results = _token_streams(monkeypatch, text)
    assert syntax._GRAMMAR_CACHE["l"] is False
    assert results["fast"] == expected and seen["fast"] == [] and len(seen["lark lexer"]) > 20
