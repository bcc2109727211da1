"""Helpers for passes that hand the value types of the functions they rebuild over to the pipeline
(`Pass.hand_over`) instead of leaving them to be inferred again by the next pass that asks."""

from __future__ import annotations

from ptoc.ir.nodes import Call, Function, Program
from ptoc.ir.visitor import walk


def calls_any(f: Function, names) -> bool:
    """Whether `f` calls (or submits) a function named in `names` anywhere: a value of such a call takes
    its type from the callee's signature, so a pass that changed that signature cannot hand over the
    caller's types from before. A walk of every node: for a pass that asks only when it changed some
    signature."""
    if not names:
        return False
    for n in walk(f):
        if n.__class__ is Call and n.kind != "op" and n.op in names:  # type: ignore[attr-defined]
            return True
    return False


def hand_over_same(p, program: Program, f: Function, g: Function) -> None:
    """`p` (a pass) rebuilt `f`, a function of its input `program`, as `g` defining the very same names
    with the very same types in the same order (it changed only what defines no value: a return
    statement, attributes, the order of declared results): hand over `f`'s value types for `g`, when the
    pipeline knows them (nothing is inferred to find them)."""
    if g.body is f.body and g.params is f.params and g.returns is f.returns:
        return  # the pipeline knows the types of these very parts already (a hand-over would tie them to the
        # program's signatures, which a function that calls none does not need)
    known = p.known_types(program, f)
    if known is not None:
        p.hand_over(g, known)
