"""Data files shipped with ptoc (the grammar, the toolchain pins, the rules reference docs/rules.md).

In an installed ptoc they live in the packages `ptoc.grammar`, `ptoc.toolchain` and `ptoc.docs`; in a
source checkout they are the top-level `grammar/`, `toolchain/` and `docs/` folders, which the installed
packages are built from.
"""

from __future__ import annotations

import os

_CHECKOUT_DIRS = {"ptoc.grammar": "grammar", "ptoc.toolchain": "toolchain", "ptoc.docs": "docs"}
_HERE = os.path.dirname(os.path.abspath(__file__))


def read_text(package: str, name: str) -> str:
    # The package's folder beside this file (an installed ptoc), else the checkout's top-level folder
    # (a source checkout, an editable install): plain files, read without importlib.resources, whose
    # import costs a compile's start-up more than the read. Other installs (a zip) go through it.
    for folder in (os.path.join(_HERE, package.split(".", 1)[1]), os.path.join(os.path.dirname(_HERE),
                                                                                _CHECKOUT_DIRS[package])):
        path = os.path.join(folder, name)
        if os.path.isfile(path):
            with open(path, encoding="utf-8") as fh:
                return fh.read()
    from importlib import resources

    return resources.files(package).joinpath(name).read_text(encoding="utf-8")
