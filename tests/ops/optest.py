"""Helpers for operator tests: wrap statements in a kernel, check it, read back types/diagnostics."""

from __future__ import annotations

import textwrap

from ptoc.context import CompileContext
from ptoc.diagnostics import CompileError
from ptoc.frontend.parser import parse_program
from ptoc.ir.nodes import AssignStmt
from ptoc.ir.printer import print_type
from ptoc.ir.verifier import Verifier
from ptoc.ops.registry import infer_call_type


def kernel(params: str, body: str) -> str:
    """A one-function program: `params` is the parameter list, `body` the statements (any indent)."""
    body = textwrap.indent(textwrap.dedent(body).strip("\n"), "    ")
    return f"@pl.function(type=pl.FunctionType.InCore)\ndef k({params}):\n{body}\n"


def diagnostics(params: str, body: str, arch: str = "a2a3"):
    """All diagnostics of the kernel (empty list when it checks)."""
    try:
        parse_program(kernel(params, body), "t.ir", ctx=CompileContext(arch=arch))
    except CompileError as e:
        return e.diagnostics
    return []


def types(params: str, body: str, arch: str = "a2a3") -> dict[str, str]:
    """name -> printed inferred type of every unannotated assignment (the op's result type)."""
    ctx = CompileContext(arch=arch)
    prog = parse_program(kernel(params, body), "t.ir", ctx=ctx)
    out: dict[str, str] = {}
    f = prog.functions[0]
    v = Verifier(prog, ctx, infer_call_type)
    v.run()
    for s in f.body:
        if isinstance(s, AssignStmt):
            t = v.types.get(s.target.name)
            out[s.target.name] = print_type(t) if t is not None else None
    return out


def codes(params: str, body: str, arch: str = "a2a3") -> list[tuple[str, str | None]]:
    return [(d.code, d.rule) for d in diagnostics(params, body, arch)]
