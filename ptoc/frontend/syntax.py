"""Lark front half: text -> a small syntax tree of Python-shaped nodes (`SN`), with spans.

The grammar (`grammar/pypto_ir.lark`) is LALR(1); its tables are built once and cached on disk by
Lark, so later runs only load them. The syntax nodes are built inline with the parser (`_ToSN`, Lark's
`transformer=`), with spans taken from tokens: no parse tree is built. Syntax errors become
`Diagnostic`s; after an error the offending line is blanked and parsing resumes, so several syntax
errors in one file are all reported.
"""

from __future__ import annotations

import ast
import os
import warnings

from lark import Lark, Token
from lark.exceptions import (
    UnexpectedCharacters,
    UnexpectedEOF,
    UnexpectedInput,
    UnexpectedToken,
    VisitError,
)
from lark.indenter import DedentError, PythonIndenter

from ptoc.diagnostics import Diagnostic, Span
from ptoc.frontend.lexer import FastLexer
from ptoc.frontend.lexer import IndentError as _IndentError
from ptoc.frontend.sn import SN, gc_paused, normalize_source  # noqa: F401  (SN and gc_paused: re-exported)


class _Indenter(PythonIndenter):
    """PythonIndenter that reports where a bad dedent or a tab in the indentation happens, and keeps
    the token before the one the parser is looking at: the last token shifted (see `_ToSN`)."""

    last: Token | None = None

    def process(self, stream):
        self.last = cur = None
        for t in super().process(stream):
            self.last = cur
            cur = t
            yield t
        self.last = cur  # the stream is done: the parser reduces what is left on $END

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


class Comment:
    """A `# ...` comment of the source: its 1-based line and column, its text from `#` to the end of the
    line (byte for byte), and whether it stands on a line of its own outside any bracket (`own_line`)
    rather than after code or inside a bracketed expression that continues over several lines."""

    __slots__ = ("line", "col", "text", "own_line")

    def __init__(self, line: int, col: int, text: str, own_line: bool):
        self.line = line
        self.col = col
        self.text = text
        self.own_line = own_line

    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        return f"Comment({self.line}:{self.col} {self.text!r}{' own' if self.own_line else ''})"


def scan_comments(text: str) -> list[Comment]:
    """Every comment of `text` in source order, found with the lexer's rules: a `#` outside a string
    literal starts a comment that runs to the end of its line. Lines and columns are those the parser
    reports (see `normalize_source`)."""
    text = normalize_source(text)
    out: list[Comment] = []
    depth = 0
    line, line_start = 1, 0
    code_on_line = False
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == "\n":
            line += 1
            line_start = i + 1
            code_on_line = False
        elif c == "#":
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(Comment(line, i - line_start + 1, text[i:j], depth == 0 and not code_on_line))
            i = j
            continue
        elif c == '"' or c == "'":
            code_on_line = True
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" and j + 1 < n and text[j + 1] != "\n" else 1
            i = j + 1 if j < n and text[j] == c else j
            continue
        elif c in _OPEN:
            depth += 1
            code_on_line = True
        elif c in _CLOSE:
            depth = max(0, depth - 1)
            code_on_line = True
        elif c not in " \t\f\\":
            code_on_line = True
        i += 1
    return out


class _LiteralError(Exception):
    """A literal the grammar accepts but Python cannot evaluate (a bad escape, an absurdly long number)."""

    def __init__(self, message: str, span: Span, hint: str | None = None):
        super().__init__(message)
        self.message = message
        self.span = span
        self.hint = hint


def _span_of(tok: Token, file: str) -> Span:
    return Span(file, tok.line, tok.column, tok.end_line or tok.line, tok.end_column or tok.column + 1)


class _ToSN:
    """Builds the syntax nodes inline with the LALR parser (Lark's `transformer=`): each method runs when
    its rule is reduced, so no parse tree is built and no Lark position bookkeeping runs.

    Spans are taken from tokens. A node starts where its first child starts (the grammar names the
    keywords and brackets that open a node, so the parser keeps them as children) and ends where the
    last token the parser shifted before reducing it ends (`_Indenter.last`): all of a rule's tokens
    are shifted before the lookahead token that triggers its reduction. These are the spans Lark's
    `propagate_positions` computes.

    A literal Python cannot evaluate is recorded, not raised, so that syntax errors found later in the
    file are still reported first, as they would be if the tree were built before it is transformed.
    """

    def __init__(self, indenter: "_Indenter"):
        self.ind = indenter
        self.file = "<input>"
        self.literal_errors: list[_LiteralError] = []

    def reset(self, file: str) -> None:
        self.file = file
        self.literal_errors = []

    def _sp(self, first) -> Span:
        """From the start of `first` (a token or a syntax node) to the end of the last shifted token."""
        last = self.ind.last
        if isinstance(first, Token):
            return Span(self.file, first.line, first.column, last.end_line, last.end_column)
        s = first.span
        return Span(self.file, s.line, s.col, last.end_line, last.end_column)

    def _tok(self, t: Token) -> Span:
        return _span_of(t, self.file)

    def _bad_literal(self, err: _LiteralError, kind: str, value) -> SN:
        self.literal_errors.append(err)
        return SN(kind, (value,), err.span)

    # -- atoms
    def name(self, ch):
        t = ch[0]
        return SN("name", (str(t),), self._tok(t))

    def int_lit(self, ch):
        t = ch[0]
        digits = str(t).replace("_", "")
        if len(digits) > 40:  # far beyond any 64-bit value; also keeps int() clear of its digit limit
            return self._bad_literal(_LiteralError(f"integer literal of {len(digits)} digits is out of range",
                                                   self._tok(t), hint="IR integers are 64-bit at most"), "int", 0)
        return SN("int", (int(digits),), self._tok(t))

    def hex_lit(self, ch):
        t = ch[0]
        return SN("int", (int(str(t).replace("_", ""), 16),), self._tok(t))

    def float_lit(self, ch):
        t = ch[0]
        value = float(str(t).replace("_", ""))
        if value in (float("inf"), float("-inf")):
            return self._bad_literal(_LiteralError(f"float literal {str(t)} is out of range", self._tok(t),
                                                   hint="the largest finite float is about 1.8e308"), "float", 0.0)
        return SN("float", (value,), self._tok(t))

    def string(self, toks):
        parts = []
        for t in toks:
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # invalid escapes warn on newer Pythons
                    parts.append(ast.literal_eval(str(t)))
            except (SyntaxError, ValueError) as e:
                why = getattr(e, "msg", None) or str(e)
                return self._bad_literal(_LiteralError(f"malformed string literal: {why}", self._tok(t),
                                                       hint="check the backslash escapes in the string"), "str", "")
        return SN("str", ("".join(parts),), self._sp(toks[0]))

    def true(self, ch):
        return SN("true", (), self._sp(ch[0]))

    def false(self, ch):
        return SN("false", (), self._sp(ch[0]))

    def none(self, ch):
        return SN("none", (), self._sp(ch[0]))

    def empty_tuple(self, ch):
        return SN("tuple", (), self._sp(ch[0]))

    def paren(self, ch):
        return SN("paren", (ch[1],), self._sp(ch[0]))

    def tuple(self, ch):
        return SN("tuple", tuple(i for i in ch[1:] if i is not None), self._sp(ch[0]))

    def list(self, ch):
        return SN("list", tuple(i for i in ch[1:] if i is not None), self._sp(ch[0]))

    def dict(self, ch):
        return SN("dict", tuple(i for i in ch[1:] if i is not None), self._sp(ch[0]))

    def dict_item(self, ch):
        return (ch[0], ch[1])

    # -- postfix
    def call(self, ch):
        func = ch[0]
        args = ch[1] if len(ch) > 1 and ch[1] is not None else ()
        return SN("call", (func, args), self._sp(func))

    def arguments(self, ch):
        return tuple(c for c in ch if c is not None)

    def argument(self, ch):
        if len(ch) > 1 and ch[1] is not None:
            return (ch[0], ch[1])  # keyword: (name SN, value)
        return (None, ch[0])

    def getitem(self, ch):
        return SN("getitem", (ch[0], ch[1]), self._sp(ch[0]))

    def subscript_list(self, ch):
        return tuple(c for c in ch if c is not None)

    def sub_index(self, ch):
        return ch[0]

    def sub_slice(self, ch):
        lo, colon, hi = ch
        return SN("slice", (lo, hi), self._sp(lo if lo is not None else colon))

    def getattr(self, ch):
        base, attr = ch
        return SN("attr", (base, str(attr)), self._sp(base))

    # -- operators
    def binop(self, ch):
        lhs, op, rhs = ch
        return SN("bin", (str(op), lhs, rhs), self._sp(lhs))

    def compare(self, ch):
        lhs, op, rhs = ch
        return SN("cmp", (str(op), lhs, rhs), self._sp(lhs))

    def or_expr(self, ch):
        lhs, rhs = ch
        return SN("bin", ("or", lhs, rhs), self._sp(lhs))

    def and_expr(self, ch):
        lhs, rhs = ch
        return SN("bin", ("and", lhs, rhs), self._sp(lhs))

    def not_expr(self, ch):
        return SN("unary", ("not", ch[1]), self._sp(ch[0]))

    def unary(self, ch):
        op, x = ch
        return SN("unary", (str(op), x), self._sp(op))

    # -- statements
    def exprlist(self, ch):
        items = tuple(c for c in ch if c is not None)
        return SN("exprlist", items, self._sp(items[0]))

    def simple_stmt(self, ch):
        return ch[0]

    def expr_stmt(self, ch):
        e = ch[0]
        return SN("expr_stmt", (e,), self._sp(e))

    def assign(self, ch):
        lhs, rhs = ch
        return SN("assign", (lhs, rhs), self._sp(lhs))

    def ann_assign(self, ch):
        target, ann, value = ch
        return SN("ann_assign", (target, ann, value), self._sp(target))

    def return_stmt(self, ch):
        return SN("return", (ch[1],), self._sp(ch[0]))

    def pass_stmt(self, ch):
        return SN("pass", (), self._sp(ch[0]))

    def dotted_name(self, ch):
        return ".".join(str(c) for c in ch)

    def import_stmt(self, ch):
        return SN("import", (ch[1], str(ch[2]) if len(ch) > 2 and ch[2] is not None else None), self._sp(ch[0]))

    def from_import_stmt(self, ch):
        alias = str(ch[3]) if len(ch) > 3 and ch[3] is not None else None
        return SN("from_import", (ch[1], str(ch[2]), alias), self._sp(ch[0]))

    def decorated(self, ch):
        *decos, target = ch
        return SN(target.k, target.a[:-1] + (tuple(decos),), target.span)

    def decorator(self, ch):
        return ch[0]

    def classdef(self, ch):
        kw, name = ch[0], str(ch[1])
        return SN("class", (name, ch[-1], ()), Span(self.file, kw.line, kw.column, kw.line, kw.column + 5 + len(name)))

    def funcdef(self, ch):
        name, params, ret, body = ch
        return SN("def", (str(name), params or (), ret, body, ()), self._tok(name))

    def parameters(self, ch):
        return tuple(c for c in ch if c is not None)

    def param(self, ch):
        return SN("param", (str(ch[0]), ch[1] if len(ch) > 1 else None), self._sp(ch[0]))

    def suite(self, ch):
        return tuple(ch)

    def for_stmt(self, ch):
        kw, target, it, body = ch
        return SN("for", (target, it, body), self._sp(kw))

    def while_stmt(self, ch):
        kw, cond, body = ch
        return SN("while", (cond, body), self._sp(kw))

    def target_name(self, ch):
        n = ch[0]
        return ("name", str(n), None, self._tok(n))

    def target_name_iter(self, ch):
        n, names = ch
        return ("name_iter", str(n), names, self._tok(n))

    def target_iter(self, ch):
        return ("iter", None, ch[1], self._sp(ch[0]))

    def target_bare_iter(self, ch):
        # `for a, b in pl.while_(...)`: ruff drops the parentheses of a bare tuple target
        return ("iter", None, tuple((str(c), self._tok(c)) for c in ch if c is not None), self._sp(ch[0]))

    def name_list(self, ch):
        return tuple((str(c), self._tok(c)) for c in ch if c is not None)

    def if_stmt(self, ch):
        kw, cond, body = ch[0], ch[1], ch[2]
        elifs = [c for c in ch[3:-2] if c is not None]
        else_kw, orelse = ch[-2], ch[-1]
        # the `else` keyword's span: the formatter keeps comments on the `else:` line with it
        else_span = self._tok(else_kw) if else_kw is not None else None
        return SN("if", (cond, body, tuple(elifs), orelse, else_span), self._sp(kw))

    def elif_clause(self, ch):
        kw, cond, body = ch
        return SN("elif", (cond, body), self._sp(kw))

    def with_stmt(self, ch):
        kw, expr, alias, body = ch
        return SN("with", (expr, (str(alias), self._tok(alias)) if alias is not None else None, body),
                  self._sp(kw))

    def start(self, ch):
        return tuple(c for c in ch if isinstance(c, SN))


_GRAMMAR_CACHE: dict[str, object] = {}


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
        indenter = _Indenter()
        builder = _ToSN(indenter)
        # The builder runs inline with the parser: no parse tree, no propagate_positions.
        kwargs = dict(parser="lalr", postlex=indenter, transformer=builder, maybe_placeholders=True,
                      start="start")
        text = _grammar_text()
        try:
            p = Lark(text, cache=_cache_path(), **kwargs)
        except Exception:  # a broken or unwritable cache must never stop a compile
            p = Lark(text, **kwargs)
        _GRAMMAR_CACHE["p"] = p
        _GRAMMAR_CACHE["b"] = builder
    return p  # type: ignore[return-value]


class _ParserPosition:
    """What Lark's contextual lexer asks of the parser: the state on top of the stack."""

    __slots__ = ("stack",)

    def __init__(self, stack: list):
        self.stack = stack

    @property
    def position(self):
        return self.stack[-1]


def _driver_tables(parser: Lark) -> tuple:
    """Lark's LALR tables recast for `_drive`: for every state, terminal or rule name -> (shift?, next
    state, reduction), a reduction being (number of symbols, callback, name of the rule's left side);
    the callback is None for a `?rule` of one symbol, whose value passes through unchanged (Lark's
    `ExpandSingleChild` of one child). This spares the loop Lark's per-step rule hashing, attribute
    look-ups and the many pass-through calls of the expression precedence chain; the tables and the
    callbacks (`_ToSN`) are Lark's own, so nodes and errors are the same."""
    from lark.parse_tree_builder import ExpandSingleChild
    from lark.parsers.lalr_analysis import Shift

    inner = parser.parser.parser.parser  # Lark -> ParsingFrontend -> LALR_Parser -> _Parser
    table, callbacks = inner.parse_table, inner.callbacks
    reductions: dict = {}
    states: dict = {}
    for st, actions in table.states.items():
        row = {}
        for sym, (action, arg) in actions.items():
            if action is Shift:
                row[sym] = (True, arg, None)
            else:
                r = reductions.get(arg)
                if r is None:
                    cb = callbacks[arg]
                    if len(arg.expansion) == 1 and type(cb) is ExpandSingleChild:
                        cb = None  # `?rule: one_symbol`: the value passes through, only the state changes
                    r = reductions[arg] = (len(arg.expansion), cb, arg.origin.name)
                row[sym] = (False, None, r)
        states[st] = row
    token_callbacks = {k: v for k, v in callbacks.items() if isinstance(k, str)}
    return states, table.start_states["start"], table.end_states["start"], token_callbacks, {}


def _pass_through(states: dict, key: tuple, end_state) -> object:
    """The top state after the run of pass-through reductions that `key` = (state below the top, top
    state, lookahead terminal) starts: each replaces the top state by the goto of the state below on
    the rule's left side, which stays below throughout. The run stops where the lookahead asks for
    anything else (or the parse is accepted); `_drive` remembers the result per key."""
    below, top, ty = key
    while True:
        act = states[top].get(ty)
        if act is None or act[0] or act[2][1] is not None or (ty == "$END" and top == end_state):
            return top
        top = states[below][act[2][2]][1]


def _drive(parser: Lark, text: str):
    """Parse `text` with Lark's tables, lexer and callbacks in one tight loop (what `Lark.parse` does,
    without its per-token method calls). Raises the same `UnexpectedToken` Lark raises."""
    from lark.lexer import LexerThread

    tables = _GRAMMAR_CACHE.get("t")
    if tables is None:
        tables = _GRAMMAR_CACHE["t"] = _driver_tables(parser)
    states, start_state, end_state, token_callbacks, passes = tables
    state_stack = [start_state]
    value_stack: list = []
    push_state, push_value = state_stack.append, value_stack.append
    builder: _ToSN = _GRAMMAR_CACHE["b"]  # type: ignore[assignment]
    fast = _GRAMMAR_CACHE.get("l")
    if fast is None:
        try:
            fast = FastLexer(parser, states)
        except (AttributeError, TypeError, KeyError):  # a Lark without the parts it reads: Lark's own lexer
            fast = False
        _GRAMMAR_CACHE["l"] = fast
    if not fast or os.environ.get("PTOC_LARK_LEXER"):  # Lark's contextual lexer and indenter
        builder.ind = parser.options.postlex
        stream = _with_end(LexerThread.from_text(parser.parser.lexer, text).lex(_ParserPosition(state_stack)))
    else:
        builder.ind = fast
        stream = fast.tokens(text, state_stack)  # ends with $END
    token = None
    is_end = False
    for token in stream:
        ty = token.type
        if ty == "$END":
            is_end = True
        while True:
            try:
                shift, nxt, red = states[state_stack[-1]][ty]
            except KeyError:
                expected = {s for s in states[state_stack[-1]] if s.isupper()}
                raise UnexpectedToken(token, expected, state=None, interactive_parser=None) from None
            if shift:
                push_state(nxt)
                push_value(token if ty not in token_callbacks else token_callbacks[ty](token))
                break
            size, callback, origin = red
            if callback is None:  # pass-through rules: replace the top state, keep the value
                key = (state_stack[-2], state_stack[-1], ty)
                top = passes.get(key)
                if top is None:
                    top = passes[key] = _pass_through(states, key, end_state)
                state_stack[-1] = top
                if is_end and top == end_state:
                    return value_stack[-1]
                continue
            if size:
                children = value_stack[-size:]
                del state_stack[-size:]
                del value_stack[-size:]
            else:
                children = []
            push_value(callback(children))
            push_state(states[state_stack[-1]][origin][1])
            if is_end and state_stack[-1] == end_state:
                return value_stack[-1]
    raise AssertionError("the LALR tables did not accept at end of input")  # pragma: no cover


def _with_end(tokens):
    """The token stream followed by Lark's `$END` token (placed where Lark places it)."""
    token = None
    for token in tokens:
        yield token
    yield Token.new_borrow_pos("$END", "", token) if token is not None else Token("$END", "", 0, 1, 1)


def _parse_nodes(text: str, file: str) -> tuple[SN, ...]:
    parser = get_parser()
    builder: _ToSN = _GRAMMAR_CACHE["b"]  # type: ignore[assignment]
    builder.reset(file)
    if os.environ.get("PTOC_LARK_LOOP"):  # Lark's own loop, lexer and indenter (for comparison)
        builder.ind = parser.options.postlex
        nodes = parser.parse(text)
    else:
        nodes = _drive(parser, text)
    if builder.literal_errors:
        raise builder.literal_errors[0]
    return nodes


def parse_syntax(text: str, file: str) -> tuple[tuple[SN, ...] | None, list[Diagnostic]]:
    """Parse IR text into syntax nodes. Returns (nodes, []) or (None, syntax diagnostics)."""
    with gc_paused():
        return _parse_syntax(text, file)


def _parse_syntax(text: str, file: str) -> tuple[tuple[SN, ...] | None, list[Diagnostic]]:
    # a UTF-8 byte order mark is dropped; CRLF and lone-CR line ends read as LF (columns do not move)
    text = normalize_source(text)
    get_parser()
    diags: list[Diagnostic] = []
    lines = text.split("\n")
    seen: set[int] = set()
    for _attempt in range(50):
        stop = False  # True: later errors would be echoes of this one
        current = "\n".join(lines)
        try:
            nodes = _parse_nodes(current, file)
            if diags:
                return None, diags
            return nodes, []
        except _IndentError as e:
            d = Diagnostic("PTOC-E0003", e.message, Span(file, e.line, e.start, e.line, e.col), hint=e.hint)
        except UnexpectedCharacters as e:
            d = _character_error(e, file)
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


_CHARACTER_HINTS = {
    "\t": "use spaces, not tabs",
    ";": "put each statement on its own line",
    "!": "this character has no meaning in the IR text",
    "?": "this character has no meaning in the IR text",
    "$": "this character has no meaning in the IR text",
    "`": "this character has no meaning in the IR text",
}


def _character_error(e: UnexpectedCharacters, file: str) -> Diagnostic:
    """A character no token starts with: a tab, a `;`, an unterminated string, a stray symbol."""
    ch = e.char if hasattr(e, "char") else "?"
    at = Span(file, e.line, e.column, e.line, e.column + 1)
    if ch in ("'", '"'):
        return Diagnostic("PTOC-E0002", "unterminated string literal", at,
                          hint=f"close the string with {ch} on the same line")
    return Diagnostic("PTOC-E0002", f"unexpected character {ch!r}", at, hint=_CHARACTER_HINTS.get(ch))


_LINE_END_TOKENS = ("_NEWLINE", "_DEDENT", "$END")
_ITEM_START_TOKENS = ("NAME", "DEC_NUMBER", "HEX_NUMBER", "FLOAT_NUMBER", "STRING", "LPAR", "LSQB", "LBRACE")


def _token_error(e: UnexpectedToken, text: str, lines: list[str], file: str) -> tuple[Diagnostic, bool]:
    """The diagnostic for an unexpected token, and whether parsing should stop after it.

    Brackets get Python-style messages: a bracket that is never closed is reported where it opens
    (the parser only notices it lines later), a closing bracket that matches nothing where it stands.
    """
    tok = e.token
    line, col = _token_position(e, lines)
    if tok.type == "_INDENT":
        line = tok.end_line or line
        return Diagnostic("PTOC-E0003", "unexpected indentation", Span(file, line, 1, line, len(tok.value) + 1),
                          hint="this line is indented deeper than the block it belongs to"), True
    pos = getattr(tok, "start_pos", None)
    if pos is None or tok.type in ("$END",):
        pos = len(text)
    pairs, stray = _scan_brackets(text)
    if stray is not None and stray[3] == pos:
        return _stray_bracket(stray, pairs, file), True
    open_here = [p for p in pairs if p[3] < pos and (p[4] is None or p[4] >= pos)]
    never_closed = _never_closed(open_here, tok, line, file)
    if never_closed is not None:
        return never_closed, True
    end = tok.end_column if getattr(tok, "end_column", None) else col + 1
    if tok.type in _LINE_END_TOKENS or (tok.end_line or line) != line:
        end = col + 1
    span = Span(file, line, col, line, end)
    # A block header (`def ...:`, `for ...:`, `if ...:`) whose body is missing: the file ends after it,
    # or the next statement is not indented deeper.
    header = None if open_here else _header_without_body(tok, lines)
    if header is not None or (e.expected and "_INDENT" in e.expected and tok.type in _LINE_END_TOKENS):
        where = f"line {header}" if header is not None else "this line"
        return Diagnostic("PTOC-E0003", f"expected an indented block after {where}", span,
                          hint="indent the block's statements one level (4 spaces) deeper, or write `pass`"), True
    return _unexpected(e, open_here, span), bool(open_here)


def _token_position(e: UnexpectedToken, lines: list[str]) -> tuple[int, int]:
    """Line and column of the unexpected token (the last line when the token has none)."""
    tok = e.token
    line = tok.line if tok.line is not None else e.line
    col = tok.column if tok.column is not None else e.column
    if line is None or line < 1:
        line = len(lines)
    return line, col or 1


def _never_closed(open_here: list, tok: Token, line: int, file: str) -> Diagnostic | None:
    """The innermost bracket open at the token, when it is never closed and the parser has run past it."""
    if not open_here:
        return None
    o = open_here[-1]
    if o[4] is None and (tok.type in _LINE_END_TOKENS or line > o[1]):
        return Diagnostic("PTOC-E0001", f"{o[0]!r} was never closed", Span(file, o[1], o[2], o[1], o[2] + 1),
                          hint=f"add the matching {_OPEN[o[0]]!r}")
    return None


def _stray_bracket(stray, pairs, file: str) -> Diagnostic:
    """A closing bracket that closes nothing, or closes a bracket of another kind."""
    ch, sline, scol, _, opener = stray
    at = Span(file, sline, scol, sline, scol + 1)
    if opener is None:
        return Diagnostic("PTOC-E0001", f"unmatched {ch!r}", at,
                          hint=f"delete it, or add the {_CLOSE[ch]!r} it should close")
    o = pairs[opener]
    return Diagnostic("PTOC-E0001", f"closing {ch!r} does not match {o[0]!r} opened at line {o[1]}, column {o[2]}",
                      at, hint=f"close {o[0]!r} with {_OPEN[o[0]]!r}")


def _unexpected(e: UnexpectedToken, open_here: list, span: Span) -> Diagnostic:
    """The general case: which token was found and what the grammar expected there."""
    tok = e.token
    exp = _describe_expected(e.expected, open_here[-1][0] if open_here else "") if e.expected else ""
    msg = f"unexpected {_describe_token(tok)}"
    if exp:
        msg += f"; {exp}"
    hint = None
    if open_here and "COMMA" in (e.expected or ()) and tok.type in _ITEM_START_TOKENS:
        hint = "is a ',' missing before it?"
    return Diagnostic("PTOC-E0001", msg, span, hint=hint)


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
