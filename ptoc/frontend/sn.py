"""The syntax nodes both readers of the IR text build (`pyast` with CPython's parser, `syntax` with the
Lark grammar), and the helpers they share."""

from __future__ import annotations

import contextlib
import gc

from ptoc.diagnostics import Span


class SN:
    """A syntax node: a tag, its children and a span. Plain and cheap; the builder gives it meaning."""

    __slots__ = ("k", "a", "span")

    # the text of a type annotation the builder may build once for all its copies (`pyast._TypeSN`)
    key: str | None = None

    def __init__(self, k: str, a: tuple, span: Span):
        self.k = k
        self.a = a
        self.span = span

    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        return f"SN({self.k}, {self.a!r})"


def normalize_source(text: str) -> str:
    """The text as the lexer reads it: no byte order mark, LF line ends, a final newline."""
    if text.startswith("\ufeff"):
        text = text[1:]
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    if not text.endswith("\n"):
        text += "\n"
    return text


@contextlib.contextmanager
def gc_paused():
    """Pause Python's cyclic garbage collector. The front end allocates several objects per token and
    creates no reference cycles; left on, the collector rescans the growing heap again and again (about
    half of the parse time of a large file). Reference counting still frees everything as usual."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
