"""The one place that wires the front end, the pass pipeline and (later) codegen together."""

from __future__ import annotations

from dataclasses import dataclass, field

from ptoc.context import CompileContext
from ptoc.ir.nodes import KERNEL_TYPES, Program
from ptoc.ops import registry as _op_rules  # noqa: F401  (installs the type rules the verifier asks)


@dataclass
class LowerResult:
    program: Program
    dumps: list[tuple[str, str, str | None]] = field(default_factory=list)  # (file name, IR text, pass)
    before: dict[str, str] = field(default_factory=dict)  # pass name -> IR text before it
    profile: dict | None = None
    timings_table: str | None = None
    # the pipeline's verifier cache: what it inferred about the functions of `program` (see function_types)
    verified: object | None = field(default=None, repr=False, compare=False)

    def function_types(self, ctx: CompileContext) -> dict:
        """`ptoc.ir.verifier.function_types` of the lowered program, from what the pipeline already inferred."""
        from ptoc.ir.verifier import function_types

        return function_types(self.program, ctx, self.verified)  # type: ignore[arg-type]


def frontend(text: str, file: str, ctx: CompileContext, warnings: list | None = None) -> Program:
    """The program as written, checked; `warnings` (a list) receives the front end's warnings. The program
    carries what its check learned (`keep_types`): the pipeline that lowers it with the same `ctx` goes on
    from there instead of typing every statement again."""
    from ptoc.frontend.parser import parse_program
    from ptoc.ir.verifier import VerifyCache, keep_types
    from ptoc.passes.manager import gc_paused

    from ptoc.frontend.short_names import full_op_names

    cache = VerifyCache(ctx)
    made: set = set()  # the op names the parser built (full_op_names need not search a program for them)
    with gc_paused():  # (parse_program pauses it too; this one also spares the parse tree a rescan)
        # the program as written (parse_program keeps its spelling, so it prints back as written), then
        # one spelling per op for everything after the front end: pl.load -> tile.load
        with cache.running():
            program = full_op_names(parse_program(text, file, ctx=ctx, warnings=warnings, cache=cache, made=made),
                                    ctx, made)
    keep_types(program, cache)
    return program


def check_source(text: str, file: str, ctx: CompileContext) -> Program:
    """The language-level check: the program as written (a name may be assigned again), then, after
    CtrlFlowTransform and ConvertToSSA, single assignment and that values leave loops and branches only through their
    yields. Returns the program in SSA form; raises `CompileError` with what is wrong. (`ptoc check` goes further:
    it runs the whole pipeline and the emitters, as compile does; the conformance harness and tests use this.)"""
    from ptoc.diagnostics import CompileError
    from ptoc.ir.verifier import verify_program
    from ptoc.passes.ConvertToSSA import ConvertToSSA
    from ptoc.passes.CtrlFlowTransform import CtrlFlowTransform

    prog = frontend(text, file, ctx)
    ssa = ConvertToSSA().run(CtrlFlowTransform().run(prog, ctx), ctx)
    if ssa is not prog:
        errors = [d for d in verify_program(ssa, ctx=ctx, ssa=True) if d.severity == "error"]
        if errors:
            raise CompileError(errors)
    return ssa


def lower(program: Program, ctx: CompileContext, stop_after: str | None = None, dumps: bool = False,
          timings: bool = False, roundtrip: bool = False, skip: frozenset[str] = frozenset(),
          passes: list | None = None) -> LowerResult:
    """Run the pipeline, or with `passes` exactly those pass classes in that order (a sub-pipeline:
    the input's own properties stand in for the passes that did not run)."""
    from ptoc.passes.manager import gc_paused

    with gc_paused():
        return _lower(program, ctx, stop_after, dumps, timings, roundtrip, skip, passes)


def _lower(program: Program, ctx: CompileContext, stop_after: str | None, dumps: bool, timings: bool,
           roundtrip: bool, skip: frozenset[str], passes: list | None = None) -> LowerResult:
    from ptoc.ir.verifier import VerifyCache, keep_types, kept_types
    from ptoc.passes.manager import Dumps, RoundTrip, Timings, input_properties, run_pipeline

    instruments = []
    d = Dumps() if dumps else None
    t = Timings() if timings else None
    for ins in (d, t, RoundTrip() if roundtrip else None):
        if ins is not None:
            instruments.append(ins)
    # this compile's: the front end's when it made `program` (`frontend`), handed on to the emitters
    cache = kept_types(program, ctx) or VerifyCache(ctx)
    given = input_properties(program, ctx) if passes is not None else None
    out = run_pipeline(program, ctx, passes=passes, stop_after=stop_after, instruments=instruments, skip=skip,
                       cache=cache, given=given, check_once=True)
    keep_types(out, cache)  # the task manifest's function_types(out, ctx) reuses the run's types
    return LowerResult(out, d.texts if d else [], d.before if d else {},
                       t.profile() if t else None, t.table() if t else None, cache)


@dataclass
class Artifacts:
    pto: str
    header: str | None
    skipped: list[str]  # functions that are not kernels (orchestration, ...): reported, not emitted
    # the pipeline's result; None when the program was compiled in shards (`ptoc.parallel`), whose workers
    # send back only their outputs
    lowered: LowerResult | None
    # the GlobalTensor types of the kernels (`ptoc.codegen.global_tensor.kernel_types`) the header was made
    # from; None without a header, and when compiled in shards (the workers send the header's text)
    kernel_types: list | None = None
    # the kernels manifest (`ptoc.codegen.manifest`), when it was asked for and the program is a whole
    # program (a function that is not a kernel calls one)
    manifest: str | None = None


def parse_version(text: str) -> tuple[int, ...]:
    """'v0.61' / '0.61.2' -> (0, 61[, 2]); ValueError when malformed."""
    t = text.strip()
    t = t[1:] if t[:1] in ("v", "V") else t
    parts = t.split(".")
    if not parts or not all(p.isdigit() for p in parts):
        raise ValueError(f"not a version: {text!r}")
    return tuple(int(p) for p in parts)


NZ_MIN_PTOAS = (0, 61)


def check_assembler_version(program: Program, ctx: CompileContext) -> None:
    """NZ-15: PTOAS <= 0.60 infers a view's layout from its structure and rejects every explicit NZ view."""
    from ptoc.diagnostics import CompileError, Diagnostic
    from ptoc.ir.nodes import TensorType
    from ptoc.ir.visitor import walk

    if parse_version(ctx.ptoas_version) >= NZ_MIN_PTOAS:
        return
    diags = []
    for f in program.functions:
        if f.func_type not in KERNEL_TYPES:
            continue
        for p in f.params:
            if any(isinstance(n, TensorType) and n.layout == "NZ" for n in walk(p.type)):
                diags.append(Diagnostic(
                    "PTOC-E0410",
                    f"{f.name}: parameter {p.name} is an NZ tensor, which PTOAS {ctx.ptoas_version} cannot assemble: "
                    "it infers the layout of a view from its structure and reports `layout mismatch: "
                    "user-specified layout=nz but inferred=nd`",
                    p.span, rule="NZ-15",
                    hint="target PTOAS v0.61 or newer (--ptoas-version v0.61, the pinned default), or drop pl.NZ "
                    "and store the weight in ND order"))
    if diags:
        raise CompileError(diags)


_KIND_WORDS = {"Orchestration": "an orchestration function", "Opaque": "an Opaque function (no type=)",
               "Inline": "an Inline function", "Group": "a Group function", "Spmd": "an Spmd launcher"}


def require_kernel(lowered: Program, source: Program) -> None:
    """A compile that would emit an empty module is an error that says why: the lowered program has no
    InCore, AIC or AIV function."""
    from ptoc.codegen.pto import KERNEL_KIND
    from ptoc.diagnostics import CompileError, Diagnostic

    if any(f.func_type in KERNEL_KIND for f in lowered.functions):
        return
    why = "; ".join(f"{f.name} is {_KIND_WORDS.get(f.func_type, f'a {f.func_type} function')}"
                    for f in source.functions) or "the program has no function"
    at = source.functions[0].span if source.functions else source.span
    raise CompileError([Diagnostic(
        "PTOC-E0405", f"nothing to emit: no kernel (InCore, AIC or AIV function): {why}", at,
        hint="mark the function that runs on the device as a kernel, e.g. "
        "@pl.function(type=pl.FunctionType.InCore); orchestration functions only call kernels")])


def passes_skipped(pto_level: str) -> frozenset[str]:
    """The passes a compile at `pto_level` leaves out. level2: PTOAS plans memory (addresses and lifetime
    reuse), as PyPTO's memory_planner=PTOAS drops both."""
    return frozenset({"MemoryReuse", "AllocateMemoryAddr"}) if pto_level == "level2" else frozenset()


def compile_program(program: Program, ctx: CompileContext, source_name: str, pto_level: str = "level3",
                    header: bool = True, dumps: bool = False, timings: bool = False, jobs: int = 1,
                    manifest: bool = False) -> Artifacts:
    """Lower a checked program and emit the .pto module (and the GlobalTensor header, and with `manifest`
    the kernels manifest of a whole program). `jobs` > 1: lower and emit the program's independent groups
    of functions in up to that many processes (`ptoc.parallel`; not with `dumps` or `timings`, which
    follow the whole program pass by pass)."""
    from ptoc import __version__
    from ptoc.codegen.global_tensor import emit_header, kernel_types
    from ptoc.codegen.pto import emit_module

    from ptoc.passes.manager import gc_paused

    check_assembler_version(program, ctx)
    skip = passes_skipped(pto_level)
    with gc_paused():
        if jobs > 1 and not dumps and not timings:
            from ptoc.parallel import compile_in_shards

            art = compile_in_shards(program, ctx, jobs, skip, pto_level, header, manifest, source_name)
            if art is not None:  # lowered and emitted shard by shard
                return art
        low = lower(program, ctx, dumps=dumps, timings=timings, skip=skip)
        types = low.function_types(ctx)  # what the pipeline's last check inferred: not inferred again
        # (emission first: its PTOC-E0406, tile work left in a host function, is the reason when no kernel is left)
        memo: dict = {}  # (the .pto writer and the header read the same tensor views)
        text, skipped = emit_module(low.program, ctx, pto_level=pto_level, types=types, memo=memo)
        require_kernel(low.program, program)
        kernels = kernel_types(low.program, ctx, types, memo) if header or manifest else None
        hdr = emit_header(low.program, ctx, source_name, __version__, kernels=kernels) if header else None
        doc = None
        if manifest:
            from ptoc.codegen.manifest import emit_manifest, has_orchestration

            if has_orchestration(low.program, low.verified):
                doc = emit_manifest(low.program, ctx, source_name, low.verified, kernels)
    return Artifacts(text, hdr, list(skipped), low, kernels if header else None, doc)
