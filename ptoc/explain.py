"""`ptoc explain CODE|RULE`: the entries of docs/rules.md (shipped in the wheel as `ptoc.docs`).

docs/rules.md holds one `### ID: title` section per diagnostic code (`PTOC-E0202`) and per specification
rule (`NZ-8`); an entry runs to the next heading.
"""

from __future__ import annotations

import difflib
import re

_HEADING = re.compile(r"^### (\S+): (.*)$")
_QUERY = re.compile(r"^(?:PTOC-)?([EI])(\d{1,4})$|^(NZ|OP|MOV|FP4)-?(\d+)$")


def read_rules_text() -> str:
    from ptoc.resources import read_text

    return read_text("ptoc.docs", "rules.md")


def entries(text: str) -> dict[str, tuple[str, str]]:
    """ID -> (title, the entry's text from its heading up to the next heading)."""
    out: dict[str, tuple[str, str]] = {}
    current: str | None = None
    lines: list[str] = []
    title = ""

    def close() -> None:
        if current is not None:
            out[current] = (title, "\n".join(lines).strip("\n") + "\n")

    for line in text.split("\n"):
        m = _HEADING.match(line)
        if m or line.startswith("## "):
            close()
            current, lines = None, []
        if m:
            current, title = m.group(1), m.group(2)
            lines = [line]
        elif current is not None:
            lines.append(line)
    close()
    return out


def normalize(query: str) -> str:
    """`e202`, `E0202`, `ptoc-e0202` -> `PTOC-E0202`; `nz8`, `nz-8` -> `NZ-8`; anything else upper-cased."""
    q = query.strip().upper()
    m = _QUERY.match(q)
    if m is None:
        return q
    if m.group(1):
        return f"PTOC-{m.group(1)}{int(m.group(2)):04d}"
    return f"{m.group(3)}-{int(m.group(4))}"


def close_ids(query: str, ids) -> list[str]:
    return difflib.get_close_matches(normalize(query), list(ids), n=3, cutoff=0.6)
