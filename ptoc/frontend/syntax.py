"""Lark front half: text -> a small syntax tree of Python-shaped nodes (`SN`), with spans.

The grammar (`grammar/pypto_ir.lark`) is LALR(1); its tables are built once and cached on disk by
Lark, so later runs only load them. Syntax errors become `Diagnostic`s; after an error the offending
line is blanked and parsing resumes, so several syntax errors in one file are all reported.
"""

from __future__ import annotations

import ast
import os
import warnings

from lark import Lark, Token, Transformer, v_args
from lark.exceptions import (
    LarkError,
    UnexpectedCharacters,
    UnexpectedEOF,
    UnexpectedInput,
    UnexpectedToken,
    VisitError,
)
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
    def __init__(self, line: int, col: int, message: str, start: int = 1,
                 hint: str = "indent with 4 spaces per level, matching an enclosing block"):
        super().__init__(message)
        self.line = line
        self.col = col  # exclusive end column of the span
        self.start = start
        self.message = message
        self.hint = hint


class _Indenter(PythonIndenter):
    """PythonIndenter that reports where a bad dedent or a tab in the indentation happens."""

    def handle_NL(self, token: Token):
        if self.paren_level == 0:
            indent = token.value.rsplit("\n", 1)[-1]
            tab = indent.find("\t")
            if tab >= 0:
                line = token.end_line or token.line
                raise _IndentError(line, tab + 2, "tab in indentation", start=tab + 1,
                                   hint="indent with spaces only (4 per level), not tabs")
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


_FIRST_EXPECTED = ("RPAR", "RSQB", "RBRACE", "COMMA", "COLON", "EQUAL", "_NEWLINE", "_INDENT", "NAME",
                   "DEC_NUMBER", "STRING", "LPAR", "LSQB", "LBRACE", "DOT")
_OPERATOR_VALUES = frozenset(("or", "and", "not", "in", "==", "!=", "<", "<=", ">", ">=", "|", "^", "&", "<<",
                              ">>", "+", "-", "*", "/", "//", "%", "**", "~"))


_CLOSER_TERMS = {")": "RPAR", "]": "RSQB", "}": "RBRACE"}


def _describe_expected(expected, inside: str | None = None) -> str:
    """The tokens the parser could take, the useful ones first: closing brackets and separators, then
    names and literals, then keywords; the many operators that could continue an expression are
    summarised as "an operator". `inside`: the innermost open bracket at the error ("" for none); the
    LALR tables merge contexts, so closers of other brackets (and line ends inside brackets) are dropped."""
    names: list[str] = []
    operators = False
    terminals = {t.name: t for t in get_parser().terminals}
    rank = {name: i for i, name in enumerate(_FIRST_EXPECTED)}
    if inside is not None:
        keep = _CLOSER_TERMS.get(_OPEN.get(inside, ""))
        drop = {t for t in _CLOSER_TERMS.values() if t != keep}
        if inside:
            drop.add("_NEWLINE")
        expected = [x for x in expected if x not in drop]
    for e in sorted(expected, key=lambda x: (rank.get(x, len(rank)), x)):
        n = _TOKEN_NAMES.get(e)
        if n is None:
            term = terminals.get(e)
            if term is None or term.pattern.type != "str":
                continue
            if term.pattern.value in _OPERATOR_VALUES:
                operators = True
                continue
            n = repr(term.pattern.value)
        if n not in names:
            names.append(n)
    if len(names) > 6:
        names = names[:6] + ["..."]
    if operators:
        names.append("an operator")
    if not names:
        return ""
    if len(names) == 1:
        return "expected " + names[0]
    return "expected " + ", ".join(names[:-1]) + " or " + names[-1]


_OPEN = {"(": ")", "[": "]", "{": "}"}
_CLOSE = {")": "(", "]": "[", "}": "{"}


def _scan_brackets(text: str):
    """Brackets of `text` outside strings and comments.

    Returns (pairs, stray): `pairs` lists [open char, line, column, offset, offset of the matching close
    or None] in text order; `stray` is the first closing bracket that closes nothing or the wrong kind,
    as (char, line, column, offset, index in `pairs` of the bracket it contradicts or None), or None.
    """
    pairs: list[list] = []
    stack: list[int] = []
    stray = None
    line, line_start = 1, 0
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == "\n":
            line += 1
            line_start = i + 1
        elif c == "#":
            j = text.find("\n", i)
            i = n if j < 0 else j
            continue
        elif c == '"' or c == "'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" and j + 1 < n and text[j + 1] != "\n" else 1
            i = j + 1 if j < n and text[j] == c else j
            continue
        elif c in _OPEN:
            stack.append(len(pairs))
            pairs.append([c, line, i - line_start + 1, i, None])
        elif c in _CLOSE:
            if stack and pairs[stack[-1]][0] == _CLOSE[c]:
                pairs[stack.pop()][4] = i
            elif stray is None:
                stray = (c, line, i - line_start + 1, i, stack[-1] if stack else None)
        i += 1
    return pairs, stray


class _LiteralError(Exception):
    """A literal the grammar accepts but Python cannot evaluate (a bad escape, an absurdly long number)."""

    def __init__(self, message: str, span: Span, hint: str | None = None):
        super().__init__(message)
        self.message = message
        self.span = span
        self.hint = hint


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
        digits = str(t).replace("_", "")
        if len(digits) > 40:  # far beyond any 64-bit value; also keeps int() clear of its digit limit
            raise _LiteralError(f"integer literal of {len(digits)} digits is out of range", self._tok(t),
                                hint="IR integers are 64-bit at most")
        return SN("int", (int(digits),), self._tok(t))

    @v_args(meta=True, inline=True)
    def hex_lit(self, meta, t):
        return SN("int", (int(str(t).replace("_", ""), 16),), self._tok(t))

    @v_args(meta=True, inline=True)
    def float_lit(self, meta, t):
        value = float(str(t).replace("_", ""))
        if value in (float("inf"), float("-inf")):
            raise _LiteralError(f"float literal {str(t)} is out of range", self._tok(t),
                                hint="the largest finite float is about 1.8e308")
        return SN("float", (value,), self._tok(t))

    @v_args(meta=True)
    def string(self, meta, toks):
        parts = []
        for t in toks:
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # invalid escapes warn on newer Pythons
                    parts.append(ast.literal_eval(str(t)))
            except (SyntaxError, ValueError) as e:
                why = getattr(e, "msg", None) or str(e)
                raise _LiteralError(f"malformed string literal: {why}", self._tok(t),
                                    hint="check the backslash escapes in the string") from None
        return SN("str", ("".join(parts),), self._sp(meta))

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
    def target_bare_iter(self, meta, ch):
        # `for a, b in pl.while_(...)`: ruff drops the parentheses of a bare tuple target
        return ("iter", None, tuple((str(c), self._tok(c)) for c in ch if c is not None), self._sp(meta))

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
    if text.startswith("\ufeff"):  # a UTF-8 byte order mark read as text
        text = text[1:]
    if "\r" in text:  # CRLF and lone-CR line ends read as LF; columns do not move
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    if not text.endswith("\n"):
        text += "\n"
    parser = get_parser()
    diags: list[Diagnostic] = []
    lines = text.split("\n")
    seen: set[int] = set()
    for _attempt in range(50):
        stop = False  # True: later errors would be echoes of this one
        current = "\n".join(lines)
        try:
            tree = parser.parse(current)
            nodes = _ToSN(file).transform(tree)
            if diags:
                return None, diags
            return nodes, []
        except _IndentError as e:
            d = Diagnostic("PTOC-E0003", e.message, Span(file, e.line, e.start, e.line, e.col), hint=e.hint)
        except UnexpectedCharacters as e:
            ch = e.char if hasattr(e, "char") else "?"
            hint = None
            msg = f"unexpected character {ch!r}"
            if ch == "\t":
                hint = "use spaces, not tabs"
            elif ch in (";",):
                hint = "put each statement on its own line"
            elif ch in ("'", '"'):
                msg = "unterminated string literal"
                hint = f"close the string with {ch} on the same line"
            elif ch in ("!", "?", "$", "`"):
                hint = "this character has no meaning in the IR text"
            d = Diagnostic("PTOC-E0002", msg, Span(file, e.line, e.column, e.line, e.column + 1), hint=hint)
        except UnexpectedToken as e:
            d, stop = _token_error(e, current, lines, file)
        except UnexpectedEOF:
            d = Diagnostic("PTOC-E0001", "unexpected end of file", Span(file, len(lines), 1, len(lines), 2),
                           hint="close every bracket and finish the last statement")
            stop = True
        except (_LiteralError, VisitError, RecursionError) as e:
            err = e.orig_exc if isinstance(e, VisitError) else e
            if isinstance(err, _LiteralError):
                d = Diagnostic("PTOC-E0001", err.message, err.span, hint=err.hint)
            elif isinstance(err, RecursionError):
                d = Diagnostic("PTOC-E0114", "an expression is nested too deeply for ptoc",
                               _deepest_line(current, file),
                               hint="split it into several statements with intermediate names")
                stop = True
            else:
                raise err from None  # a bug in a tree builder: the CLI reports it as an internal error
        except UnexpectedInput as e:  # pragma: no cover - other Lark input errors
            line = getattr(e, "line", 1) or 1
            d = Diagnostic("PTOC-E0001", "syntax error", Span(file, line, 1, line, 2))
        diags.append(d)
        line_no = d.span.line if d.span else 0
        # Resume: blank the offending line (and any line once blanked), keep its indentation.
        if stop or line_no in seen or not (1 <= line_no <= len(lines)):
            break
        seen.add(line_no)
        bad = lines[line_no - 1]
        indent = bad[: len(bad) - len(bad.lstrip(" "))]
        lines[line_no - 1] = indent + "pass" if bad.strip() else bad
        if d.code == "PTOC-E0003" or any(c in bad for c in "([{"):
            break  # structural damage: later errors would be echoes of this one
    return None, diags


def _token_error(e: UnexpectedToken, text: str, lines: list[str], file: str) -> tuple[Diagnostic, bool]:
    """The diagnostic for an unexpected token, and whether parsing should stop after it.

    Brackets get Python-style messages: a bracket that is never closed is reported where it opens
    (the parser only notices it lines later), a closing bracket that matches nothing where it stands.
    """
    tok = e.token
    line = tok.line if tok.line is not None else e.line
    col = tok.column if tok.column is not None else e.column
    if line is None or line < 1:
        line = len(lines)
    col = col or 1
    if tok.type == "_INDENT":
        line = tok.end_line or line
        return Diagnostic("PTOC-E0003", "unexpected indentation", Span(file, line, 1, line, len(tok.value) + 1),
                          hint="this line is indented deeper than the block it belongs to"), True
    pos = getattr(tok, "start_pos", None)
    if pos is None or tok.type in ("$END",):
        pos = len(text)
    pairs, stray = _scan_brackets(text)
    if stray is not None and stray[3] == pos:
        ch, sline, scol, _, opener = stray
        if opener is None:
            return Diagnostic("PTOC-E0001", f"unmatched {ch!r}", Span(file, sline, scol, sline, scol + 1),
                              hint=f"delete it, or add the {_CLOSE[ch]!r} it should close"), True
        o = pairs[opener]
        return Diagnostic("PTOC-E0001", f"closing {ch!r} does not match {o[0]!r} opened at line {o[1]}, "
                          f"column {o[2]}", Span(file, sline, scol, sline, scol + 1),
                          hint=f"close {o[0]!r} with {_OPEN[o[0]]!r}"), True
    open_here = [p for p in pairs if p[3] < pos and (p[4] is None or p[4] >= pos)]
    if open_here:
        o = open_here[-1]
        if o[4] is None and (tok.type in ("_NEWLINE", "_DEDENT", "$END") or line > o[1]):
            return Diagnostic("PTOC-E0001", f"{o[0]!r} was never closed", Span(file, o[1], o[2], o[1], o[2] + 1),
                              hint=f"add the matching {_OPEN[o[0]]!r}"), True
    end = tok.end_column if getattr(tok, "end_column", None) else col + 1
    if tok.type in ("_NEWLINE", "_DEDENT", "$END") or (tok.end_line or line) != line:
        end = col + 1
    # A block header (`def ...:`, `for ...:`, `if ...:`) whose body is missing: the file ends after it,
    # or the next statement is not indented deeper.
    header = None if open_here else _header_without_body(tok, lines)
    if header is not None or (e.expected and "_INDENT" in e.expected and tok.type in ("_NEWLINE", "_DEDENT", "$END")):
        where = f"line {header}" if header is not None else "this line"
        return Diagnostic("PTOC-E0003", f"expected an indented block after {where}", Span(file, line, col, line, end),
                          hint="indent the block's statements one level (4 spaces) deeper, or write `pass`"), True
    exp = _describe_expected(e.expected, open_here[-1][0] if open_here else "") if e.expected else ""
    msg = f"unexpected {_describe_token(tok)}"
    if exp:
        msg += f"; {exp}"
    hint = None
    if open_here and "COMMA" in (e.expected or ()) and tok.type in (
            "NAME", "DEC_NUMBER", "HEX_NUMBER", "FLOAT_NUMBER", "STRING", "LPAR", "LSQB", "LBRACE"):
        hint = "is a ',' missing before it?"
    return Diagnostic("PTOC-E0001", msg, Span(file, line, col, line, end), hint=hint), bool(open_here)


def _header_without_body(tok: Token, lines: list[str]) -> int | None:
    """The line of the block header right before `tok` when `tok` starts a line that should have been
    indented under it (`for ...:` followed by a line at the same depth); otherwise None."""
    if tok.type in ("_NEWLINE", "_INDENT", "_DEDENT", "$END") or not tok.line or tok.line < 2:
        return None
    here = lines[tok.line - 1] if tok.line <= len(lines) else ""
    if here[: tok.column - 1].strip():
        return None  # not the first token of its line
    for k in range(tok.line - 2, -1, -1):
        prev = lines[k]
        code = prev.split("#", 1)[0].rstrip() if "'" not in prev and '"' not in prev else prev.rstrip()
        if not code.strip():
            continue  # blank or comment-only line
        indent = len(prev) - len(prev.lstrip(" "))
        if code.endswith(":") and tok.column - 1 <= indent:
            return k + 1
        return None
    return None


def _deepest_line(text: str, file: str) -> Span:
    """Where the most deeply nested expression probably is: the line with the most brackets and
    operators (for the rare input that exhausts the recursion of the tree builders)."""
    best, best_line = -1, 1
    for i, raw in enumerate(text.split("\n"), 1):
        score = sum(raw.count(c) for c in "([{-+*/~")
        if score > best:
            best, best_line = score, i
    return Span(file, best_line, 1, best_line, 2)
