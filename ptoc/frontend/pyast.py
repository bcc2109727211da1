"""The fast front half: CPython's own parser (`ast.parse`) read into the syntax nodes the Lark grammar
builds (`syntax.SN`, spans included).

The IR text is a strict subset of Python, so CPython's C parser can do the parsing. `translate` walks
the Python syntax tree and builds exactly the nodes `syntax._ToSN` would build for the same text:
the same tags, children and spans, parentheses (which Python drops) included, found in the text
around each expression. It handles only what the grammar (`grammar/pypto_ir.lark`) accepts and it
reads the same way; on anything else (a Python syntax error, a construct or a spelling the grammar
does not have, a literal the Lark path reports, a tab, a non-ASCII character) it returns None and
`parse_syntax` reads the text with the Lark grammar, which stays the reference and reports every
syntax error with ptoc's diagnostics. `tests/test_frontend_parity.py` compares both paths.

`PTOC_FRONTEND=lark` in the environment skips this path (as do `PTOC_LARK_LEXER` and
`PTOC_LARK_LOOP`, which select parts of the Lark path).

Nothing here imports Lark: a file that reads cleanly never loads it.
"""

from __future__ import annotations

import ast
import os
import re
import sys
import warnings
from bisect import bisect_right
from keyword import iskeyword
from itertools import accumulate

from ptoc.diagnostics import Diagnostic, Span
from ptoc.frontend.sn import SN, gc_paused, normalize_source


_Name = ast.Name
_new = object.__new__


def _span(file: str, line: int, col: int, end_line: int, end_col: int) -> Span:
    """`Span(file, line, col, end_line, end_col)`, made without the frozen dataclass's checked
    `__init__` (a span per node adds up)."""
    sp = _new(Span)
    d = sp.__dict__  # (item by item: a keyword dict for `update` would cost a quarter more)
    d["file"] = file
    d["line"] = line
    d["col"] = col
    d["end_line"] = end_line
    d["end_col"] = end_col
    return sp


if not hasattr(Span, "__dict__") or hasattr(Span, "__slots__") or Span.__init__.__code__.co_argcount != 6:
    _span = Span  # noqa: F811  (a Span made differently: its own constructor)


class _SN(SN):
    """A syntax node whose span is made when first read. The reader builds one node per expression, but
    most of their spans are never read (the attribute chain of `pl.tile.load`, the dtype and memory space
    of an annotation, keyword names): the node keeps its position as a tuple `(file, line, col, end_line,
    end_col)`, much cheaper to make than a `Span`, and `span` turns it into one on first use."""

    __slots__ = ("p",)

    def __init__(self, k: str, a: tuple, p):
        self.k = k
        self.a = a
        self.p = p

    @property
    def span(self) -> Span:
        p = self.p
        if type(p) is tuple:
            p = self.p = _span(*p)
        return p


class _TypeSN(_SN):
    """The node of a type annotation written on one line, `pl.Tile[[32, 128], pl.FP32, pl.Mem.Vec]`, with
    its text as `key`: the builder builds the type of each distinct text once per program and gives the
    later ones a copy with their own spans (`Builder.type`). A program repeats its few annotations
    thousands of times, so an annotation whose text the reader has seen before is not read at all: its
    children (`a`) are read from its text only if something asks for them (a builder that could not
    reuse the type, a test comparing nodes)."""

    __slots__ = ("key", "_a", "_reader", "_at")

    def __init__(self, k: str, a: tuple | None, p, key: str, reader=None, at=None):
        self.k = k
        self._a = a
        self.p = p
        self.key = key
        self._reader = reader
        self._at = at

    @property
    def a(self) -> tuple:
        a = self._a
        if a is None:
            a = self._a = self._reader.reread(self.key, self._at).a
            self._reader = None
        return a


def _pos(sn: _SN) -> tuple:
    """The position tuple of a node this reader built, whether or not its span was made yet."""
    p = sn.p
    return p if type(p) is tuple else (p.file, p.line, p.col, p.end_line, p.end_col)


class _Unsupported(Exception):
    """The text uses something this reader does not translate: the Lark path reads it."""


# The grammar's number and string terminals (grammar/pypto_ir.lark; tests/test_frontend_parity.py
# checks that these are the grammar's own patterns).
DEC_NUMBER = r"0|[1-9][0-9_]*"
HEX_NUMBER = r"0[xX][0-9a-fA-F_]+"
FLOAT_NUMBER = r"([0-9][0-9_]*\.[0-9_]*|\.[0-9][0-9_]*)([eE][-+]?[0-9]+)?|[0-9][0-9_]*[eE][-+]?[0-9]+"
STRING = r""""(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*'"""

_DEC = re.compile(DEC_NUMBER).fullmatch
_HEX = re.compile(HEX_NUMBER).fullmatch
_FLOAT = re.compile(FLOAT_NUMBER).fullmatch
# one or more string tokens, separated by blanks, line ends and comments (inside brackets)
_STRINGS = re.compile(rf"(?:{STRING})(?:(?:[ \n]|#[^\n]*)*(?:{STRING}))*").fullmatch
_DEF_NAME = re.compile(r"def[ ]+").match

_BINOPS = {
    ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%", ast.Pow: "**",
    ast.LShift: "<<", ast.RShift: ">>", ast.BitOr: "|", ast.BitXor: "^", ast.BitAnd: "&",
}
_CMPOPS = {ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">="}
_UNARY = {ast.USub: "-", ast.UAdd: "+", ast.Invert: "~", ast.Not: "not"}
_BOOLOPS = {ast.And: "and", ast.Or: "or"}


def enabled() -> bool:
    env = os.environ
    return not (env.get("PTOC_FRONTEND") == "lark" or env.get("PTOC_LARK_LEXER") or env.get("PTOC_LARK_LOOP"))


def parse_syntax(text: str, file: str) -> tuple[tuple[SN, ...] | None, list[Diagnostic]]:
    """Parse IR text into syntax nodes: (nodes, []) or (None, syntax diagnostics). CPython's parser
    when it reads the text as the grammar does; the Lark grammar otherwise (and for every error)."""
    with gc_paused():
        if enabled():
            nodes = translate(text, file)
            if nodes is not None:
                return nodes, []
        from ptoc.frontend import syntax

        return syntax.parse_syntax(text, file)


def translate(text: str, file: str) -> tuple[SN, ...] | None:
    """The syntax nodes of `text` as the Lark path builds them, or None when this reader leaves the
    text to the Lark path."""
    text = normalize_source(text)
    if "\t" in text or "\f" in text or "\\\n" in text or "\x00" in text:
        return None
    ascii_only = text.isascii()
    if not ascii_only and not _STRINGS_AND_COMMENTS.sub("", text).isascii():
        return None  # a non-ASCII name (the grammar's names are ASCII) or stray character
    if ascii_only:
        parsed, holes = _annotation_holes(text)
        if holes:
            nodes = _read(text, file, parsed, holes, ascii_only)
            if nodes is not None:
                return nodes
            # not read with the holes: the text as it is decides (the Lark path's, or a hole stood
            # where the reader reads no expression)
    return _read(text, file, text, None, ascii_only)


def _read(text: str, file: str, parsed: str, holes: dict[int, int] | None, ascii_only: bool):
    """`translate` of `text`, CPython parsing `parsed` (the text, or the text with `holes`): the nodes, or
    None. With holes, None too unless the reader read every hole as an expression."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # invalid escapes warn; the Lark path reads them silently
            tree = _parse_by_method(parsed, ascii_only)
            if tree is None:
                tree = ast.parse(parsed)
                if not ascii_only:
                    _columns_in_characters(tree, text)
        reader = _Reader(text, file, holes)
        nodes = reader.module(tree)
        if holes and len(reader.filled) != len(holes):
            return None
        return nodes
    except (SyntaxError, ValueError, MemoryError, RecursionError, OverflowError):
        return None
    except _Unsupported:
        return None


# A program writes a few type annotations thousands of times, and CPython's parser spends about half
# of its time on them (`pl.Tile[[32, 128], pl.FP32, pl.Mem.Vec]` is 13 nodes of Python's tree).
# `_annotation_holes` hands CPython a copy of the text in which each one-line annotation written
# `name: ANNOTATION` before ` =`, `,` or `)` is a name of the same length (a "hole", `____...`): every
# other token keeps its line and column, and the reader reads the annotation's own text where it finds
# a hole (`_Reader.annotation`; `_Reader.ex` for a hole anywhere else). A hole stands only for a
# subscript of a dotted name followed by none of `.`, `[`, `(`: a whole expression, so Python's tree
# of the copy is the text's tree with that subtree replaced by a name. A text the reader does not read
# with its holes, every hole read as an expression, is read again as it is (`translate`): an annotation
# that does not parse on its own, a hole where the reader reads no expression, a text for the Lark path.
# The dotted names right after `=` and before `(`, `,` or `)` are holes too (`= pl.tile.load(`,
# `target_memory=pl.Mem.Vec)`): an operand, a call's callee or a keyword's value, whose nodes the reader
# makes from the text (`_Reader.dotted`); one with a Python keyword in it (`a.if`) is left as it is.
# (brackets nested three deep at most; possessive runs, so a line that does not match fails fast)
_INNER = r"[^\[\]()#'\"\n=]"  # a character inside an annotation's brackets that is no bracket
if sys.version_info >= (3, 11):
    _BRACKETS = rf"\[(?:{_INNER}++|\[(?:{_INNER}++|\[{_INNER}*+\])*+\])*+\]"
else:  # (no possessive quantifiers before 3.11: one character at a time, which matches the same text and,
    # each step having one way to go, cannot backtrack badly either)
    _BRACKETS = rf"\[(?:{_INNER}|\[(?:{_INNER}|\[{_INNER}*\])*\])*\]"
# group 1: an annotation; group 2: a dotted name (no look-behind: it keeps the regex from its fast search)
# The lists of names and numbers written as a call's argument (`pl.tile.load(x, [0, c0], [64, 128])`) are
# holes too (group 3: after `(` or `, `, before `,` or `)`; a list of one line, items `, `-separated, none a
# keyword): `_Reader.ex` makes their nodes from the text (`_Reader.listed`).
_LIST_ITEM = r"(?:0|[1-9][0-9]{0,17}|[A-Za-z_]\w*)"
_HOLE = re.compile(rf": ([A-Za-z_][\w.]*{_BRACKETS})(?=,|\)| =)|= ?([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+)(?=[,)(])"
                   rf"|(?:\(|, )(\[{_LIST_ITEM}(?:, {_LIST_ITEM})*\])(?=[,)])", re.ASCII)
_COMMENT = re.compile(r"#[^\n]*")
_WORDS = re.compile(r"\w+", re.ASCII)  # the names (and numbers) of a dotted name or a list hole


def _annotation_holes(text: str) -> tuple[str, dict[int, int] | None]:
    """The text to hand CPython's parser, and the holes in it (start offset -> end offset), or None
    when there are none. Annotations are looked for in the code only: the text's strings and comments
    masked by `#` (which no annotation pattern holds or touches); so only texts without triple quotes
    (whose strings may span lines, which the one-line string pattern does not see)."""
    if '"""' in text or "'''" in text:
        return text, None
    if '"' in text or "'" in text:
        code = _STRINGS_AND_COMMENTS.sub(_masked, text)
    else:
        code = _COMMENT.sub(_masked, text) if "#" in text else text
    holes: dict[int, int] = {}
    parts: list[str] = []
    last = 0
    plain: dict[str, bool] = {}  # dotted name or list -> none of its words is a keyword
    for m in _HOLE.finditer(code):
        s, e = m.span(1)
        if s < 0:
            s, e = m.span(2)
            if s < 0:
                s, e = m.span(3)
            name = code[s:e]
            ok = plain.get(name)
            if ok is None:
                ok = plain[name] = not any(map(iskeyword, _WORDS.findall(name)))
            if not ok:
                continue
        holes[s] = e
        parts.append(text[last:s])
        parts.append("_" * (e - s))
        last = e
    if not holes:
        return text, None
    parts.append(text[last:])
    return "".join(parts), holes


def _masked(m) -> str:
    return "#" * (m.end() - m.start())


# Python's syntax tree of a long program takes far more memory than the program: CPython's tree of
# 10k lines of IR is ~150 MiB. A program is one class whose methods are independent, so
# `_parse_by_method` parses the text one method at a time, each with its true line numbers and columns,
# and `_Reader.block` drops each method's tree once it has read it: the peak is one method's tree.
_CLASS_LINE = re.compile(r"class \w+\s*:\s*(#.*)?$")


def _parse_by_method(text: str, ascii_only: bool):
    """The module tree of `text` with the class's body parsed lazily, method by method (`_LazyBody`), or
    None when the text is not one top-level class of 4-space-indented members this can split safely
    (the caller then parses the whole text). A method that does not parse raises SyntaxError."""
    if '"""' in text or "'''" in text:
        return None  # a string may span lines: the line-wise split below would not see it
    lines = text.split("\n")
    cls = [i for i, line in enumerate(lines) if line.startswith("class ")]
    if len(cls) != 1 or not _CLASS_LINE.match(lines[cls[0]]):
        return None
    top = cls[0]
    starts: list[int] = []  # 0-based lines where a class member (its decorators first) begins
    depth = 0
    after_decorator = False
    for i in range(top + 1, len(lines)):
        line = lines[i]
        code = _STRINGS_AND_COMMENTS.sub("", line) if "#" in line or '"' in line or "'" in line else line
        if depth == 0 and code.strip():
            if not line.startswith("    ") or line.startswith("     "):
                if not line.startswith("    "):
                    return None  # something after the class at the top level
            else:
                decorator = line.startswith("    @")
                if not after_decorator:
                    starts.append(i)
                after_decorator = decorator
        if "(" in code or ")" in code or "[" in code or "]" in code or "{" in code or "}" in code:
            # the depth is checked at the end of each line only: the counts do what a walk would
            depth += (code.count("(") + code.count("[") + code.count("{")
                      - code.count(")") - code.count("]") - code.count("}"))
        if depth < 0:
            return None
    if depth != 0 or len(starts) < 2:
        return None
    head = ast.parse("\n".join(lines[:top + 1]) + "\n    pass")
    klass = head.body[-1]
    if not isinstance(klass, ast.ClassDef):
        return None
    klass.body = _LazyBody(text, lines, starts, ascii_only)
    return head


class _LazyBody:
    """A class body whose members are parsed when iterated, a group of lines at a time (each parsed
    inside a dummy class so columns stay the text's), and forgotten when `_Reader.block` clears them."""

    def __init__(self, text: str, lines: list[str], starts: list[int], ascii_only: bool):
        self.text, self.lines, self.starts, self.ascii_only = text, lines, starts, ascii_only

    def __iter__(self):
        lines, starts = self.lines, self.starts
        bounds = starts + [len(lines)]
        k = 0
        while k < len(starts):
            # a group of members of ~1000 lines: few parses, each tree small; blank lines in front give
            # the group its line numbers (cheaper than renumbering every node)
            first = bounds[k]
            k += 1
            while k < len(starts) and bounds[k] - first < 1000:
                k += 1
            tree = ast.parse("\n" * (first - 1) + "class _:\n" + "\n".join(lines[first:bounds[k]]))
            body = tree.body[0].body
            if not self.ascii_only:
                _columns_in_characters(ast.Module(body=body, type_ignores=[]), self.text)
            del tree
            body.reverse()
            while body:
                yield body.pop()

    def __setitem__(self, i, value) -> None:
        pass  # `_Reader.block` lets go of each statement it read; the iterator already did


_STRINGS_AND_COMMENTS = re.compile(rf"{STRING}|#[^\n]*")


def _columns_in_characters(tree, text: str) -> None:
    """CPython counts columns in UTF-8 bytes, the grammar in characters: recount them on the lines
    that are not ASCII (their non-ASCII characters are in strings and comments)."""
    lines = text.split("\n")
    wide = {i + 1 for i, line in enumerate(lines) if not line.isascii()}
    cache: dict = {}

    def chars(line: int, col: int) -> int:
        key = (line, col)
        c = cache.get(key)
        if c is None:
            c = cache[key] = len(lines[line - 1].encode("utf-8")[:col].decode("utf-8", "replace"))
        return c

    for node in ast.walk(tree):
        line = getattr(node, "lineno", None)
        if line is None:
            continue
        if line in wide:
            node.col_offset = chars(line, node.col_offset)
        end = node.end_lineno
        if end in wide and node.end_col_offset is not None:
            node.end_col_offset = chars(end, node.end_col_offset)


class _Reader:
    def __init__(self, text: str, file: str, holes: dict[int, int] | None = None):
        self.text = text
        self.holes = holes or {}  # where the parsed copy has a name for an annotation (`_annotation_holes`)
        self.filled: set[int] = set()  # the holes read (as annotations or as values), by offset
        self.file = file
        self.lines = lines = text.split("\n")
        self.starts = list(accumulate((len(x) + 1 for x in lines), initial=0))
        self.semicolons = ";" in text
        self.types: dict[str, str] = {}  # the text of each one-line annotation read so far (see _TypeSN)
        self.readers = {
            ast.Attribute: self._attribute, ast.Call: self._call, ast.Subscript: self._getitem,
            ast.Constant: self._constant, ast.BinOp: self._binop, ast.UnaryOp: self._unary,
            ast.Compare: self._compare, ast.BoolOp: self._boolop, ast.Tuple: self._tuple_expr,
            ast.List: self._list, ast.Dict: self._dict,
        }

    # ---- positions ----------------------------------------------------------------------------
    def _at(self, off: int) -> tuple[int, int]:
        """1-based line and column of the text offset `off`."""
        i = bisect_right(self.starts, off) - 1
        return i + 1, off - self.starts[i] + 1

    def _skip(self, p: int) -> int:
        """The offset of the next character at or after `p` that is not a blank, a line end or in a comment."""
        text = self.text
        n = len(text)
        while p < n:
            c = text[p]
            if c == " " or c == "\n":
                p += 1
            elif c == "#":
                q = text.find("\n", p)
                p = n if q < 0 else q
            else:
                break
        return p

    def _opens(self, lo: int, s: int) -> list[int]:
        """Offsets of the `(` between `lo` and `s` that are not in a comment."""
        text = self.text
        out = []
        p = lo
        while p < s:
            c = text[p]
            if c == "(":
                out.append(p)
            elif c == "#":
                q = text.find("\n", p)
                p = s if q < 0 else q
                continue
            p += 1
        return out

    def _parens(self, sn: SN, lo: int, s: int, e: int, own: int = 0) -> tuple[SN, int]:
        """`sn` (read from the text between offsets `s` and `e`) inside the parentheses that open between
        `lo` and `s` (less the first `own`, which belong to the enclosing construct): (node, offset
        after its last closing parenthesis)."""
        opens = self._opens(lo, s)
        if own:
            if len(opens) < own:
                raise _Unsupported
            opens = opens[own:]
        text = self.text
        file = self.file
        p = e
        for o in reversed(opens):
            p = self._skip(p)
            if p >= len(text) or text[p] != ")":
                raise _Unsupported  # `with (a as b):` and the like
            line, col = self._at(o)
            end_line, end_col = self._at(p)
            p += 1
            sn = _SN("paren", (sn,), (file, line, col, end_line, end_col + 1))
        return sn, p

    def _span(self, n) -> Span:
        return _span(self.file, n.lineno, n.col_offset + 1, n.end_lineno, n.end_col_offset + 1)

    def _pos(self, n) -> tuple:
        """The position tuple (see `_SN`) of the Python node `n`."""
        return (self.file, n.lineno, n.col_offset + 1, n.end_lineno, n.end_col_offset + 1)

    def _start(self, n) -> int:
        return self.starts[n.lineno - 1] + n.col_offset

    def _end(self, n) -> int:
        return self.starts[n.end_lineno - 1] + n.end_col_offset

    def _next_code(self, line: int) -> tuple[int, int]:
        """Line and column of the first code after line `line` (1-based): where the newline token that
        ends a block ends (blank and comment lines belong to it); the end of the text if none."""
        lines = self.lines
        for j in range(line, len(lines)):
            raw = lines[j]
            body = raw.lstrip(" ")
            if body and body[0] != "#":
                return j + 1, len(raw) - len(body) + 1
        return len(lines), 1

    # ---- expressions --------------------------------------------------------------------------
    def ex(self, n, lo: int, own: int = 0) -> tuple[SN, int]:
        """The node of the expression `n` whose parentheses may open after offset `lo`; and the offset
        after it (after its closing parentheses)."""
        starts = self.starts
        line, col, end_line, end_col = n.lineno, n.col_offset, n.end_lineno, n.end_col_offset
        s = starts[line - 1] + col
        e = starts[end_line - 1] + end_col
        pos = (self.file, line, col + 1, end_line, end_col + 1)
        t = type(n)
        if t is _Name:
            if self.holes.get(s) == e:  # a hole (`_annotation_holes`): read its text
                self.filled.add(s)
                if self.text[s] == "[":
                    sn = self.listed(s, e, line, col, pos)
                elif self.text[e - 1] == "]":  # an annotation where a value stands
                    sn = self.reread(self.text[s:e], (line, col, s))
                else:
                    sn = self.dotted(s, e, line, col)
            else:
                sn = _SN("name", (n.id,), pos)
        else:
            read = self.readers.get(t)
            if read is None:
                raise _Unsupported
            sn = read(n, s, e, pos)
        if lo < s:
            text = self.text
            i = text.find("(", lo, s)
            if i >= 0:
                if own == 1 and text.find("(", i + 1, s) < 0 and text.find("#", lo, s) < 0:
                    return sn, e  # a call's first argument: the one parenthesis is the call's (`_parens` would agree)
                return self._parens(sn, lo, s, e, own)
        if own:
            raise _Unsupported
        return sn, e

    def annotation(self, n, lo: int) -> tuple[SN, int]:
        """`ex` for a type annotation: a subscript on one line (without parentheses, comments or strings)
        becomes a `_TypeSN` keyed by its text, read only the first time that text appears."""
        line = n.lineno
        if type(n) is _Name and self.holes:
            start = self.starts[line - 1]
            s = start + n.col_offset
            e = start + n.end_col_offset
            if self.holes.get(s) == e and self.text[e - 1] == "]":
                return self._hole_annotation(line, n.col_offset, s, e), e
        if type(n) is not ast.Subscript or n.end_lineno != line:
            return self.ex(n, lo)
        start = self.starts[line - 1]
        s = start + n.col_offset
        e = start + n.end_col_offset
        text = self.text
        if lo < s and text.find("(", lo, s) >= 0:
            return self.ex(n, lo)
        key = text[s:e]
        pos = (self.file, line, n.col_offset + 1, line, n.end_col_offset + 1)
        seen = self.types.get(key)
        if seen is not None:
            return _TypeSN("getitem", None, pos, seen, self, (line, n.col_offset, s)), e
        sn, p = self.ex(n, lo)
        if "#" in key or '"' in key or "'" in key or not key.isascii():
            return sn, p
        self.types[key] = key
        return _TypeSN("getitem", sn.a, pos, key), p

    def _hole_annotation(self, line: int, col: int, s: int, e: int) -> SN:
        """The node `annotation` reads from the annotation whose hole (`_annotation_holes`) is at text offsets
        `s`..`e` (line `line`, 0-based column `col`): its text parsed on its own the first time it is seen
        (`: ` stands before it, so no parenthesis opens around it), later ones read only if asked."""
        self.filled.add(s)
        key = self.text[s:e]
        pos = (self.file, line, col + 1, line, col + 1 + e - s)
        seen = self.types.get(key)
        if seen is not None:
            return _TypeSN("getitem", None, pos, seen, self, (line, col, s))
        sn = self.reread(key, (line, col, s))
        if sn.k != "getitem":  # (`not[1]`: Python's tree of the text holds no subscript there)
            return sn
        self.types[key] = key
        return _TypeSN("getitem", sn.a, pos, key)

    def dotted(self, s: int, e: int, line: int, col: int) -> SN:
        """The node `ex` reads from the dotted name `a.b.c` at text offsets `s`..`e` (line `line`, 0-based
        column `col`; no blank in it): `_attribute`'s nodes, each spanning from `a` to the end of its name."""
        file = self.file
        names = self.text[s:e].split(".")
        c = col + 1
        end = c + len(names[0])
        sn = _SN("name", (names[0],), (file, line, c, line, end))
        for name in names[1:]:
            end += 1 + len(name)
            sn = _SN("attr", (sn, name), (file, line, c, line, end))
        return sn

    def listed(self, s: int, e: int, line: int, col: int, pos: tuple) -> SN:
        """The node `ex` reads from the list `[a, 0, 16]` of names and decimal numbers at text offsets `s`..`e`
        (line `line`, 0-based column `col`; items separated by `, `, none a keyword; see `_HOLE`): `_list`'s
        node, its items `_constant`'s and `ex`'s nodes for the numbers and names."""
        file = self.file
        items = []
        c = col + 2  # (1-based column of the first item)
        for x in self.text[s + 1:e - 1].split(", "):
            end = c + len(x)
            items.append(_SN("int", (int(x),), (file, line, c, line, end)) if x[0].isdigit()
                         else _SN("name", (x,), (file, line, c, line, end)))
            c = end + 2
        return _SN("list", tuple(items), pos)

    def reread(self, key: str, at: tuple) -> SN:
        """The node `ex` reads from the annotation `key` written at (line, column, offset) `at`: its text
        parsed again, positions moved to where it stands."""
        line, col, s = at
        n = ast.parse(key, mode="eval").body
        for x in ast.walk(n):
            if hasattr(x, "lineno"):
                x.lineno = x.end_lineno = line
                x.col_offset += col
                x.end_col_offset += col
        sn, _ = self.ex(n, s)
        return sn

    def _attribute(self, n, s: int, e: int, pos: tuple) -> SN:
        v = n.value
        if type(v) is _Name and v.col_offset == n.col_offset and v.lineno == n.lineno:
            # `pl.x`: the name starts where the attribute does, so no parenthesis can open before it;
            # the node `ex` would make, without the call
            base = _SN("name", (v.id,), (self.file, v.lineno, v.col_offset + 1, v.end_lineno, v.end_col_offset + 1))
        else:
            base, _ = self.ex(v, s)
        return _SN("attr", (base, n.attr), pos)

    def _getitem(self, n, s: int, e: int, pos: tuple) -> SN:
        base, p = self.ex(n.value, s)
        return _SN("getitem", (base, self._subscripts(n.slice, p)), pos)

    def _binop(self, n, s: int, e: int, pos: tuple) -> SN:
        op = _BINOPS.get(type(n.op))
        if op is None:
            raise _Unsupported  # `@`
        lhs, p = self.ex(n.left, s)
        rhs, _ = self.ex(n.right, p)
        return _SN("bin", (op, lhs, rhs), pos)

    def _unary(self, n, s: int, e: int, pos: tuple) -> SN:
        x, _ = self.ex(n.operand, s)
        return _SN("unary", (_UNARY[type(n.op)], x), pos)

    def _compare(self, n, s: int, e: int, pos: tuple) -> SN:
        """`a < b < c` reads as the grammar's left-nested `(a < b) < c`, each part spanning its operands."""
        sn, p = self.ex(n.left, s)
        start = _pos(sn)
        for op, right in zip(n.ops, n.comparators):
            o = _CMPOPS.get(type(op))
            if o is None:
                raise _Unsupported  # `in`, `is`
            rhs, p = self.ex(right, p)
            end = _pos(rhs)
            sn = _SN("cmp", (o, sn, rhs), (self.file, start[1], start[2], end[3], end[4]))
        return sn

    def _boolop(self, n, s: int, e: int, pos: tuple) -> SN:
        """`a and b and c` reads as the grammar's left-nested `(a and b) and c`."""
        op = _BOOLOPS[type(n.op)]
        values = n.values
        sn, p = self.ex(values[0], s)
        start = _pos(sn)
        for v in values[1:]:
            rhs, p = self.ex(v, p)
            end = _pos(rhs)
            sn = _SN("bin", (op, sn, rhs), (self.file, start[1], start[2], end[3], end[4]))
        return sn

    def _tuple_expr(self, n, s: int, e: int, pos: tuple) -> SN:
        if not self._own_parens(n, s):
            raise _Unsupported  # a tuple without parentheses where the grammar takes one expression
        return _SN("tuple", self._items(n.elts, s + 1)[0], pos)

    def _list(self, n, s: int, e: int, pos: tuple) -> SN:
        return _SN("list", self._items(n.elts, s)[0], pos)

    def _dict(self, n, s: int, e: int, pos: tuple) -> SN:
        items = []
        p = s
        for k, v in zip(n.keys, n.values):
            if k is None:
                raise _Unsupported  # `**mapping`
            key, p = self.ex(k, p)
            val, p = self.ex(v, p)
            items.append((key, val))
        return _SN("dict", tuple(items), pos)

    def _call(self, n, s: int, e: int, pos: tuple) -> SN:
        func, p = self.ex(n.func, s)
        args = []
        own = 1
        for a in n.args:
            if type(a) is ast.Starred:
                raise _Unsupported
            v, p = self.ex(a, p, own)
            own = 0
            args.append((None, v))
        for k in n.keywords:
            if k.arg is None:
                raise _Unsupported  # `**kwargs`
            line, col = k.lineno, k.col_offset + 1
            name = _SN("name", (k.arg,), (self.file, line, col, line, col + len(k.arg)))
            v, _ = self.ex(k.value, self._start(k))
            p = self._end(k)
            args.append((name, v))
        return _SN("call", (func, tuple(args)), pos)

    def _own_parens(self, n, s: int) -> bool:
        """Whether the tuple `n` (which starts at offset `s`) is written in parentheses of its own
        (`(a, b)`), not only around its first item (`(a), b`)."""
        elts = n.elts
        if not elts:
            return True
        text = self.text
        if text[s] != "(":
            return False
        opens = len(self._opens(s, self._start(elts[0])))
        p = self._end(elts[0])
        closes = 0
        n_text = len(text)
        while closes < opens:
            p = self._skip(p)
            if p >= n_text or text[p] != ")":
                break
            closes += 1
            p += 1
        own = opens - closes
        if own not in (0, 1):
            raise _Unsupported
        return own == 1

    def _items(self, elts, lo: int) -> tuple[tuple, int]:
        items = []
        p = lo
        for x in elts:
            if type(x) is ast.Starred:
                raise _Unsupported
            item, p = self.ex(x, p)
            items.append(item)
        return tuple(items), p

    def _subscripts(self, x, lo: int) -> tuple:
        if type(x) is ast.Tuple and not self._own_parens(x, self._start(x)):
            out = []
            p = lo
            for elt in x.elts:
                if type(elt) is ast.Starred:
                    raise _Unsupported
                item, p = self._subscript(elt, p)
                out.append(item)
            return tuple(out)
        item, _ = self._subscript(x, lo)
        return (item,)

    def _subscript(self, x, lo: int) -> tuple[SN, int]:
        if type(x) is not ast.Slice:
            return self.ex(x, lo)
        if x.step is not None:
            raise _Unsupported
        s, e = self._start(x), self._end(x)
        lower = upper = None
        p = s
        if x.lower is not None:
            lower, p = self.ex(x.lower, lo)
        text = self.text
        if x.upper is not None:
            us = self._start(x.upper)
            if text.count(":", p, us) != 1:
                raise _Unsupported
            upper, q = self.ex(x.upper, p)
            if q != e:
                raise _Unsupported  # `a:b:`
        elif text.count(":", p, e) != 1 or "#" in text[p:e]:
            raise _Unsupported  # `a::`
        return _SN("slice", (lower, upper), self._pos(x)), e

    def _constant(self, n, s: int, e: int, pos: tuple) -> SN:
        v = n.value
        t = type(v)
        if v is True:
            return _SN("true", (), pos)
        if v is False:
            return _SN("false", (), pos)
        if v is None:
            return _SN("none", (), pos)
        src = self.text[s:e]
        if t is int:
            if src.isdigit() and len(src) <= 40 and (src[0] != "0" or len(src) == 1):
                return _SN("int", (v,), pos)  # the common case of the checks below, without a regex
            if _DEC(src):
                if len(src.replace("_", "")) > 40:
                    raise _Unsupported  # the Lark path reports it
            elif not _HEX(src):
                raise _Unsupported  # octal, binary, `00`
            return _SN("int", (v,), pos)
        if t is float:
            if not _FLOAT(src) or v == float("inf"):
                raise _Unsupported
            return _SN("float", (v,), pos)
        if t is str:
            if n.kind is not None or not _STRINGS(src):
                raise _Unsupported  # prefixes, triple quotes
            return _SN("str", (v,), pos)
        raise _Unsupported  # bytes, complex numbers, `...`

    def exprlist(self, n, lo: int) -> tuple[SN, int]:
        """An `exprlist` of the grammar: a tuple without parentheses gives its items."""
        if type(n) is ast.Tuple and not self._own_parens(n, self._start(n)):
            items, _ = self._items(n.elts, lo)
            first = _pos(items[0])
            return (_SN("exprlist", items, (self.file, first[1], first[2], n.end_lineno, n.end_col_offset + 1)),
                    self._end(n))
        item, p = self.ex(n, lo)
        return _SN("exprlist", (item,), item.p), p

    # ---- statements ---------------------------------------------------------------------------
    def module(self, tree) -> tuple[SN, ...]:
        return self.block(tree.body)

    def block(self, body: list) -> tuple[SN, ...]:
        """The statements of `body`, each dropped from Python's tree once read (the tree and the nodes
        built from it are not all in memory at once)."""
        out = []
        last = 0
        for i, st in enumerate(body):
            if st.lineno <= last:
                raise _Unsupported  # `a; b`
            out.append(self.stmt(st))
            last = st.end_lineno
            body[i] = None
        return tuple(out)

    def _simple_end(self, n) -> None:
        """A statement ended by `;` is left to the Lark path."""
        if self.semicolons:
            e = self._end(n)
            rest = self.text[e:self.text.find("\n", e)]
            if ";" in rest.split("#", 1)[0]:
                raise _Unsupported

    def stmt(self, n) -> SN:
        t = type(n)
        s = self._start(n)
        if t is ast.AnnAssign:
            self._simple_end(n)
            if n.value is None:
                raise _Unsupported
            target, p = self.ex(n.target, s)
            ann, p = self.annotation(n.annotation, p)
            value, _ = self.exprlist(n.value, p)
            a, b = _pos(target), _pos(value)
            return _SN("ann_assign", (target, ann, value), (self.file, a[1], a[2], b[3], b[4]))
        if t is ast.Assign:
            self._simple_end(n)
            if len(n.targets) != 1:
                raise _Unsupported
            lhs, p = self.exprlist(n.targets[0], s)
            rhs, _ = self.exprlist(n.value, p)
            a, b = _pos(lhs), _pos(rhs)
            return _SN("assign", (lhs, rhs), (self.file, a[1], a[2], b[3], b[4]))
        if t is ast.Expr:
            self._simple_end(n)
            e, _ = self.exprlist(n.value, s)
            return _SN("expr_stmt", (e,), e.p)
        if t is ast.For:
            return self._for(n, s)
        if t is ast.If:
            return self._if(n, s)
        if t is ast.Return:
            self._simple_end(n)
            value = None
            if n.value is not None:
                value, _ = self.exprlist(n.value, s)
            return _SN("return", (value,), self._pos(n))
        if t is ast.FunctionDef:
            return self._def(n, s)
        if t is ast.ClassDef:
            return self._class(n)
        if t is ast.Pass:
            self._simple_end(n)
            return SN("pass", (), self._span(n))
        if t is ast.While:
            if n.orelse:
                raise _Unsupported
            cond, _ = self.ex(n.test, s)
            return SN("while", (cond, self.block(n.body)), self._compound_span(n))
        if t is ast.With:
            return self._with(n, s)
        if t is ast.Import:
            self._simple_end(n)
            if len(n.names) != 1:
                raise _Unsupported
            a = n.names[0]
            return SN("import", (a.name, a.asname), self._span(n))
        if t is ast.ImportFrom:
            self._simple_end(n)
            if n.level or n.module is None or len(n.names) != 1 or "(" in self.text[s:self._end(n)]:
                raise _Unsupported
            a = n.names[0]
            if a.name == "*":
                raise _Unsupported
            return SN("from_import", (n.module, a.name, a.asname), self._span(n))
        raise _Unsupported

    def _compound_span(self, n) -> Span:
        """From the statement's keyword to the end of the newline token after its last line."""
        end_line, end_col = self._next_code(n.end_lineno)
        return _span(self.file, n.lineno, n.col_offset + 1, end_line, end_col)

    def _for(self, n, s: int) -> SN:
        if n.orelse:
            raise _Unsupported
        target, p = self._for_target(n.target, s)
        it, _ = self.ex(n.iter, p)
        return SN("for", (target, it, self.block(n.body)), self._compound_span(n))

    def _names(self, elts, lo: int) -> tuple[tuple, int]:
        """(name, span) of each plain name in `elts` (no parentheses around any)."""
        out = []
        p = lo
        for x in elts:
            if type(x) is not ast.Name:
                raise _Unsupported
            sn, q = self.ex(x, p)
            if sn.k != "name":
                raise _Unsupported
            out.append((x.id, sn.span))
            p = q
        return tuple(out), p

    def _for_target(self, x, lo: int) -> tuple[tuple, int]:
        t = type(x)
        if t is ast.Name:
            sn, p = self.ex(x, lo)
            if sn.k == "name":
                return ("name", x.id, None, sn.span), p
            if sn.a[0].k == "name":  # `for (a) in`: one parenthesised name
                return ("iter", None, ((x.id, sn.a[0].span),), sn.span), p
            raise _Unsupported
        if t is not ast.Tuple or not x.elts:
            raise _Unsupported
        s = self._start(x)
        if self.text.find("(", lo, s) >= 0:
            raise _Unsupported
        if self._own_parens(x, s):  # `for (a, b) in`
            names, _ = self._names(x.elts, s + 1)
            return ("iter", None, names, self._span(x)), self._end(x)
        items, p = self._items(x.elts, lo)
        e = self._end(x)
        kinds = [i.k for i in items]
        if all(k == "name" for k in kinds):  # `for a, b in`
            first = items[0].span
            end_line, end_col = self._at(e)
            return ("iter", None, tuple((i.a[0], i.span) for i in items),
                    _span(self.file, first.line, first.col, end_line, end_col)), e
        if len(items) == 2 and kinds[0] == "name" and p == e:  # `for i, (a, b) in`
            second = items[1]
            if second.k == "tuple" and all(i.k == "name" for i in second.a) and second.a:
                names = tuple((i.a[0], i.span) for i in second.a)
            elif second.k == "paren" and second.a[0].k == "name":
                names = ((second.a[0].a[0], second.a[0].span),)
            else:
                raise _Unsupported
            return ("name_iter", items[0].a[0], names, items[0].span), e
        raise _Unsupported

    def _if(self, n, s: int) -> SN:
        cond, _ = self.ex(n.test, s)
        body_end = n.body[-1].end_lineno  # the line the last suite read so far ends on
        body = self.block(n.body)
        elifs = []
        orelse = None
        else_span = None
        cur = n
        while cur.orelse:
            o = cur.orelse
            if len(o) == 1 and type(o[0]) is ast.If and self.text.startswith("elif", self._start(o[0])):
                e = o[0]
                econd, _ = self.ex(e.test, self._start(e))
                body_end = e.body[-1].end_lineno
                end_line, end_col = self._next_code(body_end)
                elifs.append(SN("elif", (econd, self.block(e.body)),
                                _span(self.file, e.lineno, e.col_offset + 1, end_line, end_col)))
                cur = e
                continue
            line, col = self._next_code(body_end)
            if not self.lines[line - 1].startswith("else", col - 1):
                raise _Unsupported  # pragma: no cover - Python puts `else` there
            else_span = _span(self.file, line, col, line, col + 4)
            orelse = self.block(o)
            break
        return SN("if", (cond, body, tuple(elifs), orelse, else_span), self._compound_span(n))

    def _with(self, n, s: int) -> SN:
        if len(n.items) != 1:
            raise _Unsupported
        item = n.items[0]
        expr, p = self.ex(item.context_expr, s)
        alias = None
        v = item.optional_vars
        if v is not None:
            if type(v) is not ast.Name or self.text.find("(", p, self._start(v)) >= 0:
                raise _Unsupported
            alias = (v.id, self._span(v))
        return SN("with", (expr, alias, self.block(n.body)), self._compound_span(n))

    def _decorators(self, n) -> tuple:
        out = []
        lines = self.lines
        for d in n.decorator_list:
            at = d.lineno - 1  # the line of the `@`: its expression may start on a later line
            while not lines[at].lstrip(" ").startswith("@"):
                at -= 1
            sn, _ = self.ex(d, self.starts[at])
            out.append(sn)
        return tuple(out)

    def _def(self, n, s: int) -> SN:
        a = n.args
        if (a.posonlyargs or a.vararg or a.kwonlyargs or a.kw_defaults or a.kwarg or a.defaults
                or getattr(n, "type_params", None)):
            raise _Unsupported
        m = _DEF_NAME(self.text, s)
        if m is None:
            raise _Unsupported
        line, col = self._at(m.end())
        name_span = _span(self.file, line, col, line, col + len(n.name))
        params = []
        p = m.end() + len(n.name)
        for arg in a.args:
            ann = None
            if arg.annotation is not None:
                ann, _ = self.annotation(arg.annotation, self._start(arg))
            params.append(_SN("param", (arg.arg, ann), self._pos(arg)))
            p = self._end(arg)
        ret = None
        if n.returns is not None:
            ret, _ = self.ex(n.returns, p, own=0 if a.args else 1)
        decos = self._decorators(n)
        return SN("def", (n.name, tuple(params), ret, self.block(n.body), decos), name_span)

    def _class(self, n) -> SN:
        if n.bases or n.keywords or getattr(n, "type_params", None):
            raise _Unsupported
        decos = self._decorators(n)
        line, col = n.lineno, n.col_offset + 1
        return SN("class", (n.name, self.block(n.body), decos),
                  _span(self.file, line, col, line, col + 5 + len(n.name)))
