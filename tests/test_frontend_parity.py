"""The front end's readers against each other and against Lark's own.

Four ways to read a file must agree: the default (CPython's parser translated by
`ptoc.frontend.pyast`, which leaves what it does not read to the Lark path), the Lark path
(`PTOC_FRONTEND=lark`: `ptoc.frontend.lexer.FastLexer` feeding the table-driven loop `syntax._drive`),
Lark's contextual lexer and indenter feeding the same loop (`PTOC_LARK_LEXER=1`), and Lark's own
`Lark.parse` with its lexer (`PTOC_LARK_LOOP=1`). Every corpus file, example, malformed-input case,
program extracted from PyPTO's tests (when present), randomly generated program and random token soup
must give the same syntax nodes (spans included) and the same diagnostics (codes, messages, positions
and hints) all four ways, and the two lexers the same tokens (types, text and positions).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ptoc.diagnostics import Span
from ptoc.frontend import pyast, syntax
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


_MODES = {"ast": {}, "fast": {"PTOC_FRONTEND": "lark"}, "lark lexer": {"PTOC_LARK_LEXER": "1"},
          "lark loop": {"PTOC_LARK_LOOP": "1"}}


def _read(monkeypatch, text: str, mode: str):
    for var in ("PTOC_LARK_LEXER", "PTOC_LARK_LOOP", "PTOC_FRONTEND"):
        monkeypatch.delenv(var, raising=False)
    for var, val in _MODES[mode].items():
        monkeypatch.setenv(var, val)
    nodes, diags = pyast.parse_syntax(text, "in.ir")
    return _dump(nodes), [(d.code, d.message, _span(d.span), d.hint) for d in diags]


def _all(monkeypatch, text: str) -> dict:
    return {mode: _read(monkeypatch, text, mode) for mode in _MODES}


def _both(monkeypatch, text: str):
    out = _all(monkeypatch, text)
    assert out["lark lexer"] == out["lark loop"]
    assert out["ast"] == out["lark loop"]
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
    assert out["ast"] == out["lark loop"]
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
        assert out["ast"] == out["fast"] == out["lark loop"] == out["lark lexer"], path.name
        seen, _ = _token_streams(monkeypatch, text)
        assert seen["fast"] == seen["lark lexer"], path.name


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                                                 HealthCheck.function_scoped_fixture])
@given(programs())
def test_same_nodes_and_tokens_on_random_programs(monkeypatch, prog):
    text = print_program(prog)
    out = _all(monkeypatch, text)
    assert out["fast"][1] == [], out["fast"][1]
    assert out["ast"] == out["fast"] == out["lark loop"] == out["lark lexer"]
    assert pyast.translate(text, "in.ir") is not None  # the printer's output is read by CPython's parser
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


# ---- CPython's parser (`pyast`) against the Lark path -------------------------------------------------

def _compiled(monkeypatch, text: str, lark: bool):
    """The program `parse_program` builds (printed) and its diagnostics, by either path."""
    from ptoc.diagnostics import CompileError
    from ptoc.frontend.parser import parse_program

    monkeypatch.delenv("PTOC_FRONTEND", raising=False)
    if lark:
        monkeypatch.setenv("PTOC_FRONTEND", "lark")
    try:
        prog = parse_program(text, "in.ir")
    except CompileError as e:
        return None, [(d.code, d.message, _span(d.span), d.hint) for d in e.diagnostics]
    return print_program(prog), []


_ALL_INPUTS = [p.read_text(encoding="utf-8") for p in FILES] + [c[1] for c in CASES] + EXTRA


@pytest.mark.parametrize("src", _ALL_INPUTS, ids=[f"input{i}" for i in range(len(_ALL_INPUTS))])
def test_same_ir_and_diagnostics_by_both_paths(monkeypatch, src):
    assert _compiled(monkeypatch, src, lark=False) == _compiled(monkeypatch, src, lark=True)


def test_both_paths_compared_on_programs_and_on_errors(monkeypatch):
    results = [_compiled(monkeypatch, src, lark=False) for src in _ALL_INPUTS]
    assert sum(1 for text, _ in results if text) >= 60
    assert sum(1 for _, diags in results if diags) >= 30


def test_the_ast_path_reads_the_grammars_own_terminals():
    # (Lark keeps `\n` in a pattern as the line feed itself: the same regular expression)
    terminals = {t.name: t.pattern.value.replace("\n", "\\n") for t in syntax.get_parser().terminals}
    for name in ("DEC_NUMBER", "HEX_NUMBER", "FLOAT_NUMBER", "STRING"):
        assert getattr(pyast, name) == terminals[name], name


def test_ptoc_frontend_lark_skips_the_ast_path(monkeypatch):
    text = FILES[0].read_text(encoding="utf-8")

    def refuse(*_args):
        raise AssertionError("the ast path ran")

    monkeypatch.setattr(pyast, "translate", refuse)
    monkeypatch.setenv("PTOC_FRONTEND", "lark")
    nodes, diags = pyast.parse_syntax(text, "in.ir")
    assert nodes is not None and diags == []


def test_a_clean_file_is_read_without_loading_lark():
    import subprocess
    import sys

    code = ("import sys; from ptoc.frontend.parser import parse_program; "
            "parse_program(open(sys.argv[1], encoding='utf-8').read(), 'in.ir'); print('lark' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code, str(FILES[0])], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# Python the grammar does not read, or reads differently: CPython accepts each of these, so the ast path
# must notice and leave the text to the Lark path (whose diagnostics or nodes are then the answer).
_PYTHON_ONLY = [
    "x = 0o17\n", "x = 0b1\n", "x = 00\n", "x = 1e1_0\n", "x = 1j\n", "x = 1e999\n", "x = " + "9" * 45 + "\n",
    "x = r'a'\n", "x = b'a'\n", "x = f'a'\n", "x = u'a'\n", "x = ...\n",
    "x = 1; y = 2\n", "x = 1;\n", "if a: x = 1; y = 2\n", "x = a if b else c\n", "x = lambda: 1\n",
    "x = [a for a in b]\n", "x = {a}\n", "x = (yield)\n", "x = a @ b\n", "x = a in b\n", "x = a is b\n",
    "x = a not in b\n", "x = f(*a)\n", "x = f(**a)\n", "x = {**a}\n", "x = [*a]\n", "x = a[1:2:3]\n",
    "x = a[1:2:]\n", "x = a[::]\n", "x = a[1::]\n", "x += 1\n", "x = y = 1\n", "x: int\n", "del x\n",
    "global x\n", "assert x\n", "break\n", "continue\n", "raise x\n", "import a, b\n", "from . import a\n",
    "from a import (b)\n", "from a import *\n", "from a import b, c\n", "for a, (b), in c:\n    pass\n",
    "for ((a)) in c:\n    pass\n", "for a.b in c:\n    pass\n", "for a, b.c in d:\n    pass\n",
    "for (a), b in c:\n    pass\n", "for a in b, c:\n    pass\n", "for a, (b, c), in d:\n    pass\n",
    "for a, ((b, c)) in d:\n    pass\n", "for a, () in d:\n    pass\n", "for () in d:\n    pass\n",
    "for a in b:\n    pass\nelse:\n    pass\n", "while a:\n    pass\nelse:\n    pass\n",
    "with a, b:\n    pass\n", "with (a as b):\n    pass\n", "with a as (b):\n    pass\n",
    "with a as b.c:\n    pass\n", "def f(a=1):\n    pass\n", "def f(*a):\n    pass\n",
    "def f(a, /):\n    pass\n", "async def f():\n    pass\n", "class C(B):\n    pass\n",
    "try:\n    pass\nexcept E:\n    pass\n", "if a:\n\tx = 1\n", "x = 1 + \\\n    2\n", "x = 'a\\\nb'\n",
    "caf\u00e9 = 1\n", "x = a.caf\u00e9\n", "\ufb01 = 1\n", "match x:\n    case 1:\n        pass\n",
    "x = (a := 1)\n", "x = f(a for a in b)\n", "x = a < b not in c\n", "x = not a in b\n",
    "@a @ b\ndef f():\n    pass\n", "x = a\f+ b\n",
]


@pytest.mark.parametrize("src", _PYTHON_ONLY)
def test_python_outside_the_grammar_goes_to_the_lark_path(monkeypatch, src):
    import ast

    ast.parse(src)  # valid Python: only the ast path can notice that the grammar reads it otherwise
    out = _all(monkeypatch, src)
    assert out["ast"] == out["fast"] == out["lark loop"]
    assert pyast.translate(src, "in.ir") is None


# Spellings the grammar reads and the ast path must reproduce node for node: parentheses everywhere
# (Python's tree drops them), comments and line breaks inside brackets, trailing commas, every for
# target, implicit string concatenation, chained comparisons and boolean operators, elif/else chains,
# decorators over several lines, blocks ending in comments and blank lines, non-ASCII strings.
_SHAPES = [
    "x = ((a)) + (b)\n", "x = (a), b\n", "x = a, b,\n", "x = (a, b)\n", "x = ((a, b))\n", "x = ()\n",
    "x = (())\n", "x = (a,)\n", "(x) = 1\n", "(x): T = 1\n", "x: (T) = (1), 2\n", "return (a),\n",
    "x = f((a), (b), k=(c))\n", "x = (f)(a)\n", "x = f(\n    a,  # c (\n    b,\n)\n", "x = a[(1):(2), :3, 4:]\n",
    "x = a[((1, 2))]\n", "x = a[(1, 2), 3]\n", "x = a[i,]\n", "x = a[()]\n", "x = 'a' 'b'\n",
    "x = ('a'\n     # c\n     'b')\n", "x = a < b < c\n", "x = a and b and c or d\n", "x = not (a == b)\n",
    "x = -(a) ** -(b)\n", "x = (a).b[(c)]\n", "x = {(a): (b), c: d}\n", "x = [(a), (b,)]\n",
    "x = 0x_1F + 1_000 + 1.5e-3 + .5 + 1.\n", "x = 'a\\qb'\n", "for i in (r):\n    pass\n",
    "for (i) in r:\n    pass\n", "for (i, j) in r:\n    pass\n", "for (i, j,) in r:\n    pass\n",
    "for i, j in r:\n    pass\n", "for i, j, in r:\n    pass\n", "for i, in r:\n    pass\n",
    "for i, (j) in r:\n    pass\n", "for i, (j, k) in r:\n    pass\n", "for i, (j,) in r: pass\n",
    "if a:\n    pass\nelif (b):\n    pass\n  # c\n\nelif c: pass\nelse:\n    x = 1\n# end\n",
    "if a:\n    pass\nelse:\n    if b:\n        pass\n", "while (a):\n    pass\n\n\n",
    "with (a) as b:\n    pass\n", "with (a, b) as c:\n    pass\n", "with a:\n    pass\n",
    "@a(\n    (b),\n)\n@(c)\ndef f(self, x: (T), y) -> (U):\n    pass\n", "def f() -> (U):\n    pass\n",
    "def f(\n    x,\n) -> U: return x\n", "class C():\n    pass\n", "@d\nclass C:\n    x = 1\n    # c\n",
    "import a.b as c\nfrom a.b import c as d\nimport a . b\n", "def f():\n    return\n",
    "x = f(a)(b)[c].d\n", "x = None.x + True\n", "x = 1 .real\n", "x = '\u00e9\U0001d4d5' + f('\u00e9', (b))  # \u00e9\n",
    "x = (  # \u00e9\n    a, '\U0001d4d5'.b)\n",
    # three strings to the grammar (`''` `'a'` `''`): the same node
    "x = '''a'''\n", 'x = """a"""\n',
]


@pytest.mark.parametrize("src", _SHAPES)
def test_shapes_the_ast_path_reproduces(monkeypatch, src):
    out = _all(monkeypatch, src)
    assert out["ast"] == out["fast"] == out["lark loop"]
    assert pyast.translate(src, "in.ir") is not None


# Random Python-shaped programs: mostly the grammar's own language, written with parentheses, comments,
# line breaks and trailing commas wherever Python allows them, with a few constructs outside the grammar.
_ATOMS = ["a", "pl", "self", "x_1", "0", "1", "1_000", "0x1F", "1.5", ".5", "2e-3", "'s'", '"t"', "'a' 'b'",
          "True", "False", "None", "00", "1j", "r'x'"]
_BIN = ["+", "-", "*", "/", "//", "%", "**", "<<", ">>", "|", "^", "&", "==", "!=", "<", "<=", ">", ">=",
        "and", "or", "in", "@"]


def _gap(rnd, depth: int) -> str:
    if depth and rnd.random() < 0.15:
        return rnd.choice(["\n", "  # c (\n", "\n\n    "])
    return rnd.choice(["", " "])


def _expr(rnd, d: int = 0, depth: int = 0) -> str:
    r = rnd.random()

    def g() -> str:
        return _gap(rnd, depth + 1)

    if d > 3 or r < 0.25:
        return rnd.choice(_ATOMS)
    if r < 0.35:
        return f"{_expr(rnd, d + 1, depth)} {rnd.choice(_BIN)} {_expr(rnd, d + 1, depth)}"
    if r < 0.4:
        return rnd.choice(["-", "+", "~", "not "]) + _expr(rnd, d + 1, depth)
    base = rnd.choice(["a", "pl.tile", "self", "(a)"])
    if r < 0.55:
        args = [_expr(rnd, d + 1, depth + 1) for _ in range(rnd.randint(0, 2))]
        args += ["k=" + _expr(rnd, d + 1, depth + 1) for _ in range(rnd.randint(0, 1))]
        return f"{base}({g()}{(',' + g()).join(args)}{rnd.choice(['', ','] if args else [''])}{g()})"
    if r < 0.65:
        items = [rnd.choice([_expr(rnd, d + 1, depth + 1), "1:", ":2", "(a):(b)", ":", "1:2:"])
                 for _ in range(rnd.randint(1, 2))]
        return f"{base}[{g()}{(',' + g()).join(items)}{g()}]"
    if r < 0.7:
        return f"{base}.{rnd.choice(['x', 'y'])}"
    if r < 0.82:
        k = rnd.randint(1, 2)
        return "(" * k + g() + _expr(rnd, d + 1, depth + 1) + g() + ")" * k
    if r < 0.92:
        n = rnd.randint(0, 3)
        return "(" + g() + ", ".join(_expr(rnd, d + 1, depth + 1) for _ in range(n)) + ("," if n == 1 else "") + ")"
    if r < 0.97:
        return "[" + ", ".join(_expr(rnd, d + 1, depth + 1) for _ in range(rnd.randint(0, 2))) + "]"
    return "{" + ", ".join(f"{_expr(rnd, d + 1, depth + 1)}: a" for _ in range(rnd.randint(0, 2))) + "}"


_TARGETS = ["i", "(i)", "i, j", "(i, j)", "i, (j, k)", "i, (j)", "i, j,"]


def _stmts(rnd, ind: str, depth: int) -> list[str]:
    out = []
    for _ in range(rnd.randint(1, 3)):
        if depth > 2 or rnd.random() < 0.55:
            k = rnd.random()
            if k < 0.3:
                line = f"{rnd.choice(['x', 'a.b', 'a[i]', '(x)'])}: {_expr(rnd)} = {_expr(rnd)}"
            elif k < 0.6:
                line = f"{rnd.choice(['x', 'x, y', 'a[i]', '(x, y)', 'x,'])} = {_expr(rnd)}{rnd.choice(['', ', b'])}"
            elif k < 0.7:
                line = "return" + rnd.choice(["", " " + _expr(rnd), " a, b,"])
            elif k < 0.75:
                line = rnd.choice(["pass", "pass  # c", "import a.b as c", "x += 1", "pass; pass"])
            else:
                line = _expr(rnd)
            out.append(ind + line)
            continue
        head = rnd.choice([f"for {rnd.choice(_TARGETS)} in {_expr(rnd)}:", f"if {_expr(rnd)}:",
                           f"while {_expr(rnd)}:", f"with {_expr(rnd)} as n:",
                           f"def f(self, x: {_expr(rnd)}) -> {_expr(rnd)}:", "class C:"])
        if head.startswith(("def", "class")) and rnd.random() < 0.5:
            out.append(f"{ind}@{_expr(rnd)}")
        out.append(ind + head)
        out += _stmts(rnd, ind + "    ", depth + 1)
        if head.startswith("if") and rnd.random() < 0.5:
            out.append(ind + rnd.choice(["elif a:", "else:"]))
            out += _stmts(rnd, ind + "    ", depth + 1)
        if rnd.random() < 0.1:
            out.append(rnd.choice(["", "# c", ind + "  # c"]))
    return out


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.randoms(use_true_random=False))
def test_same_result_on_random_python_shaped_programs(monkeypatch, rnd):
    text = "\n".join(_stmts(rnd, "", 0)) + rnd.choice(["\n", "", "\n\n# end\n"])
    out = _all(monkeypatch, text)
    assert out["ast"] == out["fast"] == out["lark loop"]


def test_random_python_shaped_programs_mostly_take_the_ast_path():
    # the comparison above must mostly compare the ast path, not its fallback
    import random

    rnd = random.Random(7)
    texts = ["\n".join(_stmts(rnd, "", 0)) + "\n" for _ in range(200)]
    read = sum(1 for t in texts if pyast.translate(t, "in.ir") is not None)
    assert read >= 40
