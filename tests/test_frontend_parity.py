"""The table-driven LALR loop of the front end (`syntax._drive`) against Lark's own `Lark.parse`.

Both run Lark's tables, lexer, indenter and node builders; only the loop differs. Every corpus file,
example and malformed-input case must give the same syntax nodes (spans included) and the same
diagnostics (codes, messages, positions and hints) either way. `PTOC_LARK_LOOP=1` selects Lark's loop.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ptoc.diagnostics import Span
from ptoc.frontend import syntax

from test_malformed import CASES  # noqa: E402  (tests/ is on sys.path under pytest)

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


def _both(monkeypatch, text: str):
    out = []
    for lark_loop in (False, True):
        if lark_loop:
            monkeypatch.setenv("PTOC_LARK_LOOP", "1")
        else:
            monkeypatch.delenv("PTOC_LARK_LOOP", raising=False)
        nodes, diags = syntax.parse_syntax(text, "in.ir")
        out.append((_dump(nodes), [(d.code, d.message, _span(d.span), d.hint) for d in diags]))
    return out


def test_parity_inputs_are_present():
    assert len(FILES) >= 10
    assert len(CASES) >= 36


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_same_nodes_on_valid_files(monkeypatch, path):
    fast, lark = _both(monkeypatch, path.read_text(encoding="utf-8"))
    assert lark[1] == [] and lark[0] is not None
    assert fast == lark


@pytest.mark.parametrize("src", [c[1] for c in CASES] + EXTRA)
def test_same_diagnostics_on_malformed_input(monkeypatch, src):
    fast, lark = _both(monkeypatch, src)
    assert fast == lark


def test_extra_cases_do_report_errors(monkeypatch):
    # the EXTRA inputs above are meant to fail (except the two empty ones): guard against a list of
    # inputs that parse cleanly and so compare nothing but empty diagnostics
    failing = [src for src in EXTRA if syntax.parse_syntax(src, "in.ir")[1]]
    assert len(failing) == len(EXTRA) - 2
