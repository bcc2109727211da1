"""Where runtime scopes may be written (`with pl.scope():`, `pl.scope(mode=pl.ScopeMode.MANUAL)`,
`pl.manual_scope()`), checked on the program as written.

PyPTO's parser enforces three placement rules, and so does this check:
- a manual scope inside another manual scope is an error (PTOC-E0811): the runtime has no nested manual
  scopes;
- an automatic scope inside a manual scope is an error (PTOC-E0812): the runtime cannot start dependency
  tracking inside a region that turned it off;
- an automatic scope written by hand in a function that leaves scope placement to the compiler (the
  default; `@pl.function(..., auto_scope=False)` turns it off) is a warning here (PTOC-E0810), where PyPTO
  rejects it. ptoc deliberately accepts such a program: the scope has a meaning (one more runtime scope
  around its statements) and MaterializeRuntimeScopes keeps it, so the program compiles; the warning says
  the program is not portable to PyPTO and how to make it so.
"""

from __future__ import annotations

from ptoc.diagnostics import Diagnostic
from ptoc.ir.nodes import ConstBool, EnumLit, Function, Node, Program, ScopeStmt, Stmt
from ptoc.ir.visitor import child_fields


def _mode(s: ScopeStmt) -> str | None:
    """"MANUAL" / "AUTO" for a runtime scope written by hand; None for any other `with` block."""
    if s.kind == "manual_scope":
        return "MANUAL"
    if s.kind != "scope":
        return None
    mode = dict(s.kwargs).get("mode")
    if isinstance(mode, EnumLit) and mode.member == "MANUAL":
        return "MANUAL"
    return "AUTO"


def _compiler_places_scopes(f: Function) -> bool:
    v = dict(f.decorator_kwargs).get("auto_scope")
    return not (isinstance(v, ConstBool) and not v.value)


def check_scopes(program: Program) -> list[Diagnostic]:
    out: list[Diagnostic] = []
    for f in program.functions:
        auto = _compiler_places_scopes(f)
        stack: list[tuple[Node, int]] = [(s, 0) for s in reversed(f.body)]
        while stack:
            n, manual = stack.pop()
            if isinstance(n, ScopeStmt):
                mode = _mode(n)
                if mode == "MANUAL":
                    if manual:
                        out.append(Diagnostic(
                            "PTOC-E0811", "a manual scope may not be nested inside another manual scope", n.span,
                            hint="the runtime has no nested manual scopes: merge this scope into the enclosing "
                            "one, or move it outside"))
                    manual += 1
                elif mode == "AUTO":
                    if manual:
                        out.append(Diagnostic(
                            "PTOC-E0812", "an automatic scope may not be nested inside a manual scope", n.span,
                            hint="the runtime does not track dependencies again inside a manual scope: move "
                            "this scope out of the manual one, or drop it"))
                    elif auto:
                        out.append(Diagnostic(
                            "PTOC-E0810", f"'{f.name}' places an automatic `with pl.scope():` by hand, but the "
                            "compiler places its automatic scopes; PyPTO rejects this program", n.span,
                            hint=f"write `@pl.function(..., auto_scope=False)` on '{f.name}' to place scopes "
                            "yourself, or use `pl.scope(mode=pl.ScopeMode.MANUAL)`, or drop the scope",
                            severity="warning"))
            kids: list[Node] = []
            for name in child_fields(type(n)):
                v = getattr(n, name)
                if isinstance(v, tuple):
                    kids.extend(x for x in v if isinstance(x, Stmt))
                elif isinstance(v, Stmt):
                    kids.append(v)
            stack.extend((k, manual) for k in reversed(kids))
    return out
