"""Lark front half: text -> a small syntax tree of Python-shaped nodes (`SN`), with spans.

The grammar (`grammar/pypto_ir.lark`) is LALR(1); its tables are built once and cached on disk by
Lark, so later runs only load them. Syntax errors become `Diagnostic`s; after an error the offending
line is blanked and parsing resumes, so several syntax errors in one file are all reported.
"""

from __future__ import annotations

import ast
import os

from lark import Lark, Token, Transformer, v_args
from lark.exceptions import LarkError, UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken
from lark.indenter import DedentError, PythonIndenter

from ptoc.diagnostics import Diagnostic, Span


class SN:
    """A syntax node: a tag, its children and a span. Plain and cheap; the builder gives it meaning."""

    __slots__ = ("k", "a", "span")

    def __init__(self, k: str, a: tuple, span: Span):
        self.k = k
        self.a = a
        self.span = span

    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        return f"SN({self.k}, {self.a!r})"


class _IndentError(LarkError):
    def __init__(self, line: int, col: int, message: str):
        super().__init__(message)
        self.line = line
        self.col = col
        self.message = message


class _Indenter(PythonIndenter):
    """PythonIndenter that reports where a bad dedent happens."""

    def handle_NL(self, token: Token):
        try:
            yield from super().handle_NL(token)
        except DedentError as e:
            indent = token.value.rsplit("\n", 1)[-1]
            raise _IndentError(token.end_line or token.line, len(indent) + 1,
                               "unindent does not match any outer indentation level") from e


_TOKEN_NAMES = {
    "NAME": "a name", "DEC_NUMBER": "a number", "HEX_NUMBER": "a number", "FLOAT_NUMBER": "a number",
    "STRING": "a string", "_NEWLINE": "end of line", "_INDENT": "an indented block",
    "_DEDENT": "end of block", "$END": "end of file", "LPAR": "'('", "RPAR": "')'", "LSQB": "'['",
    "RSQB": "']'", "LBRACE": "'{'", "RBRACE": "'}'", "COMMA": "','", "COLON": "':'", "EQUAL": "'='",
    "DOT": "'.'", "AT": "'@'", "RARROW": "'->'",
}


def _describe_token(t: Token) -> str:
    if t.type == "_NEWLINE":
        return "end of line"
    if t.type == "_INDENT":
        return "unexpected indentation"
    if t.type == "_DEDENT":
        return "end of block"
    if t.type == "$END":
        return "end of file"
    return repr(str(t.value))


def _describe_expected(expected) -> str:
    names = []
    terminals = {t.name: t for t in get_parser().terminals}
    for e in sorted(expected):
        n = _TOKEN_NAMES.get(e)
        if n is None:
            term = terminals.get(e)
            if term is not None and term.pattern.type == "str":
                n = repr(term.pattern.value)
            else:
                continue
        if n not in names:
            names.append(n)
    if not names:
        return ""
    if len(names) > 6:
        names = names[:6] + ["..."]
    return "expected " + ", ".join(names)


def _span_of(tok: Token, file: str) -> Span:
    return Span(file, tok.line, tok.column, tok.end_line or tok.line, tok.end_column or tok.column + 1)


class _ToSN(Transformer):
    """Lark tree -> SN. Runs inline with the LALR parser (no intermediate tree)."""

    def __init__(self, file: str):
        super().__init__(visit_tokens=False)
        self.file = file

    def _sp(self, meta) -> Span:
        if getattr(meta, "empty", True):
            return Span(self.file, 0, 0, 0, 0)
        return Span(self.file, meta.line, meta.column, meta.end_line, meta.end_column)

    def _tok(self, t: Token) -> Span:
        return _span_of(t, self.file)

    # -- atoms
    @v_args(meta=True, inline=True)
    def name(self, meta, t):
        return SN("name", (str(t),), self._tok(t))

    @v_args(meta=True, inline=True)
    def int_lit(self, meta, t):
        return SN("int", (int(str(t).replace("_", "")),), self._tok(t))

    @v_args(meta=True, inline=True)
    def hex_lit(self, meta, t):
        return SN("int", (int(str(t).replace("_", ""), 16),), self._tok(t))

    @v_args(meta=True, inline=True)
    def float_lit(self, meta, t):
        return SN("float", (float(str(t).replace("_", "")),), self._tok(t))

    @v_args(meta=True)
    def string(self, meta, toks):
        value = "".join(ast.literal_eval(str(t)) for t in toks)
        return SN("str", (value,), self._sp(meta))

    @v_args(meta=True)
    def true(self, meta, _):
        return SN("true", (), self._sp(meta))

    @v_args(meta=True)
    def false(self, meta, _):
        return SN("false", (), self._sp(meta))

    @v_args(meta=True)
    def none(self, meta, _):
        return SN("none", (), self._sp(meta))

    @v_args(meta=True)
    def empty_tuple(self, meta, _):
        return SN("tuple", (), self._sp(meta))

    @v_args(meta=True, inline=True)
    def paren(self, meta, x):
        return SN("paren", (x,), self._sp(meta))

    @v_args(meta=True)
    def tuple(self, meta, items):
        return SN("tuple", tuple(i for i in items if i is not None), self._sp(meta))

    @v_args(meta=True)
    def list(self, meta, items):
        return SN("list", tuple(i for i in items if i is not None), self._sp(meta))

    @v_args(meta=True)
    def dict(self, meta, items):
        return SN("dict", tuple(i for i in items if i is not None), self._sp(meta))

    @v_args(meta=True, inline=True)
    def dict_item(self, meta, k, v):
        return (k, v)

    # -- postfix
    @v_args(meta=True)
    def call(self, meta, ch):
        func = ch[0]
        args = ch[1] if len(ch) > 1 and ch[1] is not None else ()
        return SN("call", (func, args), self._sp(meta))

    @v_args(meta=True)
    def arguments(self, meta, ch):
        return tuple(c for c in ch if c is not None)

    @v_args(meta=True)
    def argument(self, meta, ch):
        if len(ch) > 1 and ch[1] is not None:
            return (ch[0], ch[1])  # keyword: (name SN, value)
        return (None, ch[0])

    @v_args(meta=True)
    def getitem(self, meta, ch):
        return SN("getitem", (ch[0], ch[1]), self._sp(meta))

    @v_args(meta=True)
    def subscript_list(self, meta, ch):
        return tuple(c for c in ch if c is not None)

    @v_args(meta=True)
    def sub_index(self, meta, ch):
        return ch[0]

    @v_args(meta=True)
    def sub_slice(self, meta, ch):
        return SN("slice", tuple(ch), self._sp(meta))

    @v_args(meta=True, inline=True)
    def getattr(self, meta, base, attr):
        return SN("attr", (base, str(attr)), self._sp(meta))

    # -- operators
    @v_args(meta=True, inline=True)
    def binop(self, meta, lhs, op, rhs):
        return SN("bin", (str(op), lhs, rhs), self._sp(meta))

    @v_args(meta=True, inline=True)
    def compare(self, meta, lhs, op, rhs):
        return SN("cmp", (str(op), lhs, rhs), self._sp(meta))

    @v_args(meta=True, inline=True)
    def or_expr(self, meta, lhs, rhs):
        return SN("bin", ("or", lhs, rhs), self._sp(meta))

    @v_args(meta=True, inline=True)
    def and_expr(self, meta, lhs, rhs):
        return SN("bin", ("and", lhs, rhs), self._sp(meta))

    @v_args(meta=True, inline=True)
    def not_expr(self, meta, x):
        return SN("unary", ("not", x), self._sp(meta))

    @v_args(meta=True, inline=True)
    def unary(self, meta, op, x):
        return SN("unary", (str(op), x), self._sp(meta))

    # -- statements
    @v_args(meta=True)
    def exprlist(self, meta, ch):
        items = tuple(c for c in ch if c is not None)
        return SN("exprlist", items, self._sp(meta))

    @v_args(meta=True, inline=True)
    def simple_stmt(self, meta, s):
        return s

    @v_args(meta=True, inline=True)
    def expr_stmt(self, meta, e):
        return SN("expr_stmt", (e,), self._sp(meta))

    @v_args(meta=True, inline=True)
    def assign(self, meta, lhs, rhs):
        return SN("assign", (lhs, rhs), self._sp(meta))

    @v_args(meta=True, inline=True)
    def ann_assign(self, meta, target, ann, value):
        return SN("ann_assign", (target, ann, value), self._sp(meta))

    @v_args(meta=True, inline=True)
    def return_stmt(self, meta, value=None):
        return SN("return", (value,), self._sp(meta))

    @v_args(meta=True)
    def pass_stmt(self, meta, _):
        return SN("pass", (), self._sp(meta))

    @v_args(meta=True)
    def dotted_name(self, meta, ch):
        return ".".join(str(c) for c in ch)

    @v_args(meta=True)
    def import_stmt(self, meta, ch):
        return SN("import", (ch[0], str(ch[1]) if len(ch) > 1 and ch[1] is not None else None), self._sp(meta))

    @v_args(meta=True)
    def from_import_stmt(self, meta, ch):
        alias = str(ch[2]) if len(ch) > 2 and ch[2] is not None else None
        return SN("from_import", (ch[0], str(ch[1]), alias), self._sp(meta))

    @v_args(meta=True)
    def decorated(self, meta, ch):
        *decos, target = ch
        return SN(target.k, target.a[:-1] + (tuple(decos),), target.span)

    @v_args(meta=True, inline=True)
    def decorator(self, meta, e):
        return e

    @v_args(meta=True)
    def classdef(self, meta, ch):
        return SN("class", (str(ch[0]), ch[-1], ()), Span(self.file, meta.line, meta.column,
                                                          meta.line, meta.column + 5 + len(str(ch[0]))))

    @v_args(meta=True)
    def funcdef(self, meta, ch):
        name, params, ret, body = ch
        return SN("def", (str(name), params or (), ret, body, ()), self._tok(name))

    @v_args(meta=True)
    def parameters(self, meta, ch):
        return tuple(c for c in ch if c is not None)

    @v_args(meta=True)
    def param(self, meta, ch):
        return SN("param", (str(ch[0]), ch[1] if len(ch) > 1 else None), self._sp(meta))

    @v_args(meta=True)
    def suite(self, meta, ch):
        return tuple(ch)

    @v_args(meta=True, inline=True)
    def for_stmt(self, meta, target, it, body):
        return SN("for", (target, it, body), self._sp(meta))

    @v_args(meta=True, inline=True)
    def target_name(self, meta, n):
        return ("name", str(n), None, self._tok(n))

    @v_args(meta=True, inline=True)
    def target_name_iter(self, meta, n, names):
        return ("name_iter", str(n), names, self._tok(n))

    @v_args(meta=True, inline=True)
    def target_iter(self, meta, names):
        return ("iter", None, names, self._sp(meta))

    @v_args(meta=True)
    def name_list(self, meta, ch):
        return tuple((str(c), self._tok(c)) for c in ch if c is not None)

    @v_args(meta=True)
    def if_stmt(self, meta, ch):
        cond, body = ch[0], ch[1]
        elifs = [c for c in ch[2:-1] if c is not None]
        orelse = ch[-1] if len(ch) > 2 else None
        return SN("if", (cond, body, tuple(elifs), orelse), self._sp(meta))

    @v_args(meta=True, inline=True)
    def elif_clause(self, meta, cond, body):
        return SN("elif", (cond, body), self._sp(meta))

    @v_args(meta=True)
    def with_stmt(self, meta, ch):
        expr, alias, body = ch
        return SN("with", (expr, (str(alias), self._tok(alias)) if alias is not None else None, body),
                  self._sp(meta))

    def start(self, ch):
        return tuple(c for c in ch if isinstance(c, SN))


_GRAMMAR_CACHE: dict[str, Lark] = {}


def _grammar_text() -> str:
    from ptoc.resources import read_text

    return read_text("ptoc.grammar", "pypto_ir.lark")


def _cache_path() -> str | bool:
    """Where Lark keeps the analysed grammar; False disables the on-disk cache."""
    base = os.path.join(os.path.expanduser("~"), ".cache", "ptoc")
    try:
        os.makedirs(base, exist_ok=True)
        import lark

        return os.path.join(base, f"grammar-{lark.__version__}.cache")
    except OSError:
        return True  # Lark's default temp-dir cache


def get_parser() -> Lark:
    p = _GRAMMAR_CACHE.get("p")
    if p is None:
        kwargs = dict(parser="lalr", postlex=_Indenter(), propagate_positions=True,
                      maybe_placeholders=True, start="start")
        text = _grammar_text()
        try:
            p = Lark(text, cache=_cache_path(), **kwargs)
        except Exception:  # a broken or unwritable cache must never stop a compile
            p = Lark(text, **kwargs)
        _GRAMMAR_CACHE["p"] = p
    return p


def parse_syntax(text: str, file: str) -> tuple[tuple[SN, ...] | None, list[Diagnostic]]:
    """Parse IR text into syntax nodes. Returns (nodes, []) or (None, syntax diagnostics)."""
    if not text.endswith("\n"):
        text += "\n"
    parser = get_parser()
    diags: list[Diagnostic] = []
    lines = text.split("\n")
    seen: set[int] = set()
    for _attempt in range(50):
        try:
            tree = parser.parse("\n".join(lines))
            nodes = _ToSN(file).transform(tree)
            if diags:
                return None, diags
            return nodes, []
        except _IndentError as e:
            d = Diagnostic("PTOC-E0003", e.message, Span(file, e.line, 1, e.line, e.col),
                           hint="indent with 4 spaces per level, matching an enclosing block")
        except UnexpectedCharacters as e:
            ch = e.char if hasattr(e, "char") else "?"
            hint = None
            if ch == "\t":
                hint = "use spaces, not tabs"
            elif ch in (";",):
                hint = "put each statement on its own line"
            d = Diagnostic("PTOC-E0002", f"unexpected character {ch!r}",
                           Span(file, e.line, e.column, e.line, e.column + 1), hint=hint)
        except UnexpectedToken as e:
            tok = e.token
            exp = _describe_expected(e.expected) if e.expected else ""
            line = tok.line if tok.line is not None else e.line
            col = tok.column if tok.column is not None else e.column
            if tok.type in ("$END", "_DEDENT") or line is None or line < 1:
                line = line if line and line > 0 else len(lines)
            msg = f"unexpected {_describe_token(tok)}"
            if tok.type == "_INDENT":
                msg = "unexpected indentation"
                d = Diagnostic("PTOC-E0003", msg, Span(file, line, col or 1, line, (col or 1) + 1),
                               hint="this line is indented deeper than the block it belongs to")
            else:
                if exp:
                    msg += f"; {exp}"
                end = tok.end_column if getattr(tok, "end_column", None) else (col or 1) + 1
                if tok.type in ("_NEWLINE", "_DEDENT", "$END"):
                    end = (col or 1) + 1
                d = Diagnostic("PTOC-E0001", msg, Span(file, line, col or 1, line, end))
        except UnexpectedEOF:
            d = Diagnostic("PTOC-E0001", "unexpected end of file", Span(file, len(lines), 1, len(lines), 2),
                           hint="close every bracket and finish the last statement")
        except UnexpectedInput as e:  # pragma: no cover - other Lark input errors
            line = getattr(e, "line", 1) or 1
            d = Diagnostic("PTOC-E0001", "syntax error", Span(file, line, 1, line, 2))
        diags.append(d)
        line_no = d.span.line if d.span else 0
        # Resume: blank the offending line (and any line once blanked), keep its indentation.
        if line_no in seen or not (1 <= line_no <= len(lines)):
            break
        seen.add(line_no)
        bad = lines[line_no - 1]
        indent = bad[: len(bad) - len(bad.lstrip(" "))]
        lines[line_no - 1] = indent + "pass" if bad.strip() else bad
        if d.code == "PTOC-E0003" or any(c in bad for c in "([{"):
            break  # structural damage: later errors would be echoes of this one
    return None, diags
