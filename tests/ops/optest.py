"""Helpers for operator tests: wrap statements in a kernel, check it, read back types/diagnostics.

By default an op is checked with its whole rule, the hardware rules of memory spaces included (as
InferTileMemorySpace checks them once it has decided every space); `hardware=False` checks it as the
front end does, while spaces may still be moved."""

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


def _ctx(arch: str, hardware: bool) -> CompileContext:
    ctx = CompileContext(arch=arch)
    return ctx.with_hardware_rules() if hardware else ctx


def diagnostics(params: str, body: str, arch: str = "a2a3", hardware: bool = True):
    """All diagnostics of the kernel (empty list when it checks)."""
    try:
        parse_program(kernel(params, body), "t.ir", ctx=_ctx(arch, hardware))
    except CompileError as e:
        return e.diagnostics
    return []


def types(params: str, body: str, arch: str = "a2a3", hardware: bool = True) -> dict[str, str]:
    """name -> printed inferred type of every unannotated assignment (the op's result type)."""
    ctx = _ctx(arch, hardware)
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


def codes(params: str, body: str, arch: str = "a2a3", hardware: bool = True) -> list[tuple[str, str | None]]:
    return [(d.code, d.rule) for d in diagnostics(params, body, arch, hardware)]
