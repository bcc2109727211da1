"""The one place that wires the front end, the pass pipeline and (later) codegen together."""

from __future__ import annotations

from dataclasses import dataclass, field

from ptoc.context import CompileContext
from ptoc.ir.nodes import Program


@dataclass
class LowerResult:
    program: Program
    dumps: list[tuple[str, str, str | None]] = field(default_factory=list)  # (file name, IR text, pass)
    before: dict[str, str] = field(default_factory=dict)  # pass name -> IR text before it
    profile: dict | None = None
    timings_table: str | None = None


def frontend(text: str, file: str, ctx: CompileContext) -> Program:
    from ptoc.frontend.parser import parse_program

    return parse_program(text, file, ctx=ctx)


def lower(program: Program, ctx: CompileContext, stop_after: str | None = None, dumps: bool = False,
          timings: bool = False, roundtrip: bool = False, skip: frozenset[str] = frozenset()) -> LowerResult:
    from ptoc.passes.manager import Dumps, RoundTrip, Timings, run_pipeline

    instruments = []
    d = Dumps() if dumps else None
    t = Timings() if timings else None
    for ins in (d, t, RoundTrip() if roundtrip else None):
        if ins is not None:
            instruments.append(ins)
    out = run_pipeline(program, ctx, stop_after=stop_after, instruments=instruments, skip=skip)
    return LowerResult(out, d.texts if d else [], d.before if d else {},
                       t.profile() if t else None, t.table() if t else None)
