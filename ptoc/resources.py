"""Data files shipped with ptoc (the grammar, the toolchain pins, the rules reference docs/rules.md).

In an installed ptoc they live in the packages `ptoc.grammar`, `ptoc.toolchain` and `ptoc.docs`; in a
source checkout they are the top-level `grammar/`, `toolchain/` and `docs/` folders, which the installed
packages are built from.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

_CHECKOUT_DIRS = {"ptoc.grammar": "grammar", "ptoc.toolchain": "toolchain", "ptoc.docs": "docs"}


def read_text(package: str, name: str) -> str:
    try:
        return resources.files(package).joinpath(name).read_text(encoding="utf-8")
    except (ModuleNotFoundError, FileNotFoundError, TypeError):
        checkout = Path(__file__).resolve().parent.parent / _CHECKOUT_DIRS[package] / name
        return checkout.read_text(encoding="utf-8")
