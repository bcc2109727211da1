"""Fresh SSA names."""

from __future__ import annotations


def fresh_name(base: str, taken: set[str]) -> str:
    """`base`, else `base_1`, `base_2`, ...: the first name not in `taken`, which is then added to it."""
    name, k = base, 1
    while name in taken:
        name = f"{base}_{k}"
        k += 1
    taken.add(name)
    return name
