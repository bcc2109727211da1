"""The front end's lexer: one combined regular expression over the grammar's terminals, with the
indentation tokens made inline.

It produces exactly the token stream of Lark's contextual lexer followed by the indentation post-lexer
(`syntax._Indenter`), at a fraction of the cost:

- The regular expression is built from the terminals of the loaded grammar (`grammar/pypto_ir.lark`),
  in the order Lark's lexer tries them (priority, then longest possible match, then longest
  pattern, then name), so the first alternative that matches is the token Lark's lexer would take.
  Keywords the NAME pattern also matches are recognised the way Lark does it: a NAME match whose text
  is a keyword takes the keyword's type. Nothing here names a terminal of the grammar, so terminals
  added to the grammar are lexed without a change here.
- Lark's lexer is contextual: in each parser state it tries only the terminals that state accepts. A
  token this lexer finds is the one the contextual lexer finds whenever the parser state's lexer knows
  its type (the contextual lexer's choices are a subsequence of the same ordered alternatives). When it
  does not (a keyword used as a name, a character no terminal matches, an error), this lexer hands that
  one position to Lark's lexer for the state, so tokens and errors (`UnexpectedCharacters`,
  `UnexpectedToken` with the same expected set) are Lark's own.
- Newline tokens inside brackets are dropped; outside, the indentation after them yields INDENT and
  DEDENT tokens (the indenter's token names, tab width and bracket types are read from the post-lexer
  the grammar was loaded with). A tab in the indentation and an unindent to no enclosing level raise
  `IndentError`, as `syntax._Indenter` does.

`last` is the token before the one the parser is looking at (the last token shifted), which the node
builders use for spans; at the end of the stream it is the last token.
"""

from __future__ import annotations

from lark import Token
from lark.exceptions import LarkError, UnexpectedCharacters, UnexpectedToken
from lark.lexer import LexerState, LineCounter, UnlessCallback

try:  # Lark 1.2 and later hand their lexers a TextSlice; earlier ones the text itself
    from lark.utils import TextSlice
except ImportError:  # pragma: no cover - depends on the installed Lark
    TextSlice = None


class IndentError(LarkError):
    """A tab in the indentation, or an unindent that matches no enclosing block."""

    def __init__(self, line: int, col: int, message: str, start: int = 1,
                 hint: str = "indent with 4 spaces per level, matching an enclosing block"):
        super().__init__(message)
        self.line = line
        self.col = col  # exclusive end column of the span
        self.start = start
        self.message = message
        self.hint = hint


def indent_error(token: Token, indent: str, dedent: bool) -> IndentError:
    """The error for the indentation `indent` that follows the newline token `token`: a tab in it, or
    (`dedent`) an unindent that matches no enclosing level."""
    line = token.end_line or token.line
    tab = indent.find("\t")
    if not dedent and tab >= 0:
        return IndentError(line, tab + 2, "tab in indentation", start=tab + 1,
                           hint="indent with spaces only (4 per level), not tabs")
    return IndentError(line, len(indent) + 1, "unindent does not match any outer indentation level")


class _Position:
    """What Lark's state lexers ask of the parser: the state on top of the stack."""

    __slots__ = ("stack",)

    def __init__(self, stack: list):
        self.stack = stack

    @property
    def position(self):
        return self.stack[-1]


_new = str.__new__


def _token(ty: str, value: str, pos: int, line: int, col: int, end_line: int, end_col: int, end_pos: int) -> Token:
    t = _new(Token, value)
    t.type = ty
    t.value = value
    t.start_pos = pos
    t.line = line
    t.column = col
    t.end_line = end_line
    t.end_column = end_col
    t.end_pos = end_pos
    return t


def _borrow(ty: str, value: str, t: Token) -> Token:
    return _token(ty, value, t.start_pos, t.line, t.column, t.end_line, t.end_column, t.end_pos)


class FastLexer:
    """The token stream of one Lark LALR parser (built with a contextual lexer and an `Indenter`
    post-lexer), made with one regular expression. `accepts`: parser state -> the terminal names its
    row of the parse table holds (see `syntax._driver_tables`)."""

    def __init__(self, parser, accepts: dict):
        contextual = parser.parser.lexer.lexer  # Lark -> ParsingFrontend -> PostLexConnector -> ContextualLexer
        post = parser.options.postlex
        root = contextual.root_lexer
        scanner = root.scanner
        flags = parser.lexer_conf.g_regex_flags
        self.contextual = contextual
        self.root = root
        self.ignore = frozenset(root.ignore_types)
        self.newline_types = frozenset(root.newline_types)
        always = frozenset(getattr(post, "always_accept", ()))
        # the terminal names each state's lexer knows: what it accepts, the ignored ones, the newline
        self.known = {st: frozenset(row) | self.ignore | always for st, row in accepts.items()}
        self.regex = parser.lexer_conf.re_module.compile(
            "|".join(f"(?P<{t.name}>{t.pattern.to_regexp()})" for t in scanner.terminals), flags)
        # keywords: the type a whole match of a regexp terminal takes (Lark's `UnlessCallback`)
        self.keywords: dict[str, dict[str, str]] = {}
        self.callbacks: dict = {}
        for name, cb in root.callback.items():
            if isinstance(cb, UnlessCallback) and all(t.pattern.type == "str" and not t.pattern.flags
                                                      for t in cb.scanner.terminals):
                self.keywords[name] = {t.pattern.value: t.name for t in cb.scanner.terminals}
            else:
                self.callbacks[name] = cb
        self.nl_type = post.NL_type
        self.indent_type = post.INDENT_type
        self.dedent_type = post.DEDENT_type
        self.open_types = frozenset(post.OPEN_PAREN_types)
        self.close_types = frozenset(post.CLOSE_PAREN_types)
        self.tab_len = post.tab_len
        self.last: Token | None = None

    # -------------------------------------------------------------------------------------------
    def _slow(self, text: str, pos: int, line: int, line_start: int, prev: Token | None, stack: list):
        """Lark's contextual lexer for one token at `pos`: (token or None at the end, new position,
        line, line start). Raises what Lark raises there."""
        counter = LineCounter(b"\n" if isinstance(text, bytes) else "\n")
        counter.char_pos = pos
        counter.line = line
        counter.column = pos - line_start + 1
        counter.line_start_pos = line_start
        state = LexerState(TextSlice.cast_from(text) if TextSlice is not None else text, counter, prev)
        where = _Position(stack)
        try:
            tok = self.contextual.lexers[stack[-1]].next_token(state, where)
        except EOFError:
            return None, counter.char_pos, counter.line, counter.line_start_pos
        except UnexpectedCharacters as e:  # as ContextualLexer.lex: a token of another context is named
            before = state.last_token
            try:
                tok = self.root.next_token(state, where)
            except UnexpectedCharacters:
                raise e from None
            raise UnexpectedToken(tok, e.allowed, state=where, token_history=[before],
                                  terminals_by_name=self.root.terminals_by_name) from None
        return tok, counter.char_pos, counter.line, counter.line_start_pos

    def tokens(self, text: str, stack: list):
        """The parser's token stream for `text`, ending with Lark's `$END` token; `stack` is the
        parser's state stack (its top decides which terminals the lexer may take)."""
        match = self.regex.match
        ignore, newline_types, known, keywords = self.ignore, self.newline_types, self.known, self.keywords
        callbacks = self.callbacks
        nl, indent_t, dedent_t = self.nl_type, self.indent_type, self.dedent_type
        opens, closes, tab_len = self.open_types, self.close_types, self.tab_len
        new, token_cls = _new, Token
        levels = [0]
        depth = 0
        self.last = cur = None
        pos, line, line_start, n = 0, 1, 0, len(text)
        tok = None  # the last token lexed
        while pos < n:
            # ---- one token: the combined expression, or Lark's lexer for the state where it must decide
            m = match(text, pos)
            ty = m.lastgroup if m is not None else None
            fast = False
            if ty is not None:
                end = m.end()
                if ty in ignore:
                    if ty in newline_types:
                        value = m.group()
                        k = value.count("\n")
                        if k:
                            line += k
                            line_start = pos + value.rindex("\n") + 1
                    pos = end
                    continue
                ok = known[stack[-1]]
                if ty in ok:
                    value = m.group()
                    kw = keywords.get(ty)
                    if kw is not None:
                        ty = kw.get(value, ty)
                    fast = ty in ok and ty not in callbacks
            if fast:
                tok = new(token_cls, value)
                tok.type = ty
                tok.value = value
                tok.start_pos = pos
                tok.line = line
                tok.column = pos - line_start + 1
                if ty in newline_types and "\n" in value:
                    line += value.count("\n")
                    line_start = pos + value.rindex("\n") + 1
                tok.end_line = line
                tok.end_column = end - line_start + 1
                tok.end_pos = pos = end
            else:
                t, pos, line, line_start = self._slow(text, pos, line, line_start, tok, stack)
                if t is None:
                    break
                tok = t
                ty = t.type
            # ---- the indentation tokens
            if ty == nl:
                if depth:
                    continue
                indent = tok.value.rsplit("\n", 1)[1]
                if "\t" in indent:
                    raise indent_error(tok, indent, dedent=False)
                self.last, cur = cur, tok
                yield tok
                width = indent.count(" ") + indent.count("\t") * tab_len
                if width > levels[-1]:
                    levels.append(width)
                    self.last, cur = cur, _borrow(indent_t, indent, tok)
                    yield cur
                elif width < levels[-1]:
                    while width < levels[-1]:
                        levels.pop()
                        self.last, cur = cur, _borrow(dedent_t, indent, tok)
                        yield cur
                    if width != levels[-1]:
                        raise indent_error(tok, indent, dedent=True)
                continue
            self.last, cur = cur, tok
            yield tok
            if ty in opens:
                depth += 1
            elif ty in closes:
                depth -= 1
                assert depth >= 0
        while len(levels) > 1:
            levels.pop()
            end_tok = _borrow(dedent_t, "", tok) if tok is not None else Token(dedent_t, "", 0, 0, 0, 0, 0, 0)
            self.last, cur = cur, end_tok
            yield cur
        self.last = cur
        yield Token.new_borrow_pos("$END", "", cur) if cur is not None else Token("$END", "", 0, 1, 1)
