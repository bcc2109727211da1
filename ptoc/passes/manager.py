"""The staged pass manager.

A pass is one class in one file (`ptoc/passes/<PassName>.py`, file name = pass name) declaring its
`name`, `stage`, the IR properties it `requires` and `produces`, and a one-line `summary`. `PIPELINE`
below is the one ordered list of passes. After every pass the manager checks the structural
invariants (types, SSA, use-after-def: `ptoc.ir.verifier`) and every property the pass claims to
produce; a failure names the pass and is an `InternalError` (a ptoc bug), never a user error. (The
compiler's own runs check the structure once at the end and replay checked on a failure: `check_once`.)
The IR is immutable, so a function a pass returns unchanged is not checked again: one `VerifyCache`
per run remembers what the verifier found (also the value types passes ask for with `Pass.types`), down
to single statements, so a pass that changes a few statements costs the typing of those (the driver's
cache is the one the front end's check filled; helpers that ask without it get it while the run lasts).

The input may be IR at any stage (a dump of ptoc's or of PyPTO's): a pass is skipped when every property
it produces already holds on the IR it would get (`input_properties`: the property checks, and for an
input read from a file the stricter `input_check`s on every value's inferred type); its `adopt` hook reads
PyPTO's form of its products. `ptoc passes --list FILE` shows what runs and what is skipped.

Instruments observe the run: IR dumps (`00_frontend.ir`, `NN_after_<PassName>.ir`, each re-parseable),
timings (a table and `pipeline_profile.json`) and an optional print -> parse -> equal check.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from ptoc.context import CompileContext
from ptoc.diagnostics import CompileError, InternalError
from ptoc.ir.nodes import MemRef, Program, TileType, TupleType
from ptoc.ir.verifier import NodeIndex
from ptoc.ops import registry as _op_rules  # noqa: F401  (installs the type rules the verifier asks)

# The pipeline: (stage, pass name). The module ptoc.passes.<name> defines class <name>.
PIPELINE: list[tuple[str, str]] = [
    ("ssa", "InlineFunctions"),
    ("ssa", "UnrollLoops"),
    ("ssa", "CtrlFlowTransform"),
    ("ssa", "ConvertToSSA"),
    ("ssa", "Simplify"),
    ("ssa", "NormalizeStmtStructure"),
    ("ssa", "FlattenCallExpr"),
    ("ssa", "OutlineHierarchyScopes"),
    ("ssa", "OutlineIncoreScopes"),
    ("ssa", "OutlineClusterScopes"),
    ("tile", "ConvertTensorToTileOps"),
    ("tile", "OptimizeOrchTensors"),
    ("tile", "LowerCompositeOps"),
    ("tile", "FlattenTileNdTo2D"),
    ("layout", "BlockNzTensorViews"),
    ("layout", "LegalizeTileCast"),
    ("layout", "AutoTileMatmulL0"),
    ("layout", "CanonicalizeTileSlice"),
    ("layout", "InferTileMemorySpace"),
    ("layout", "ResolveBackendOpLayouts"),
    ("layout", "LowerAutoVectorSplit"),
    ("layout", "ExpandMixedKernel"),
    ("layout", "InjectGmPipeBuffer"),
    ("layout", "SplitVectorKernel"),
    ("layout", "StampTfreeSplit"),
    ("layout", "NormalizeReturnOrder"),
    ("layout", "ClassifyKernels"),
    ("layout", "SkewCrossCorePipeline"),
    ("layout", "LowerPipelineLoops"),
    ("layout", "CanonicalizeIOOrder"),
    ("layout", "MaterializeTensorStrides"),
    ("memory", "InitMemRef"),
    ("memory", "MaterializeSemanticAliases"),
    ("memory", "MemoryReuse"),
    ("memory", "AllocateMemoryAddr"),
    ("memory", "FoldNoOpReshape"),
    ("memory", "FuseCreateAssembleToSlice"),
    ("memory", "DeriveCallDirections"),
    ("memory", "ExpandManualPhaseFence"),
    ("memory", "Simplify"),
    ("memory", "MaterializeRuntimeScopes"),
]


class Pass:
    """Base class. Subclasses set the class attributes and implement `run`."""

    name: str = ""
    stage: str = ""
    summary: str = ""
    requires: frozenset[str] = frozenset()
    produces: frozenset[str] = frozenset()
    # Every pass needs the `ssa` property (each name assigned once) unless it sets this (CtrlFlowTransform,
    # ConvertToSSA: they run on the program as written).
    accepts_non_ssa: bool = False
    # Properties the pass's output may no longer have when it changed the program (UnrollLoops: the
    # copies of a loop body assign the same names, as PyPTO's do, until ConvertToSSA names them apart).
    invalidates: frozenset[str] = frozenset()
    # The pipeline run's verifier cache (`ptoc.ir.verifier.VerifyCache`), set by `run_pipeline`; None
    # when the pass runs on its own. Passes hand it to `function_types` (see `types`).
    cache = None

    def types(self, program: Program, ctx: CompileContext) -> dict:
        """`ptoc.ir.verifier.function_types` of `program`, reusing what this pipeline run already inferred."""
        from ptoc.ir.verifier import function_types

        return function_types(program, ctx, cache=self.cache)

    def function_types(self, program: Program, ctx: CompileContext):
        """`types` one function at a time: a callable `f -> value types of f` (for a function `f` of
        `program`), for a pass that needs the types of a few functions only."""
        from ptoc.ir.verifier import ProgramTypes

        return ProgramTypes(program, ctx, cache=self.cache)

    def hand_over(self, f, types: dict) -> None:
        """Tell the pipeline the value types of `f`, a function this pass returns, so that nothing infers
        them again: a pass that rewrites a function in a way whose effect on the types it knows (it gives
        tiles their MemRefs, say) derives them from the types of its input (`types`). The order is the
        verifier's: the order the names are defined in. In the checked modes (`PTOC_VERIFY_EACH_PASS`, a
        run checked after every pass, `PTOC_CHECK_HANDED_TYPES` which the tests set) the manager compares
        them with a fresh inference and a difference is an `InternalError` naming the pass; otherwise they
        stand for `f`'s types, and when the pass's input version of `f` verified clean the pipeline's
        check does not look at `f` again (`_take_types`). Without the pipeline's cache (the pass run on its
        own) nothing is handed over."""
        if self.cache is not None:
            self.__dict__.setdefault("_handed", []).append((f, types))

    def hand_over_remapped(self, f, types: dict, new_ref: Callable[[MemRef], MemRef],
                           dropped: frozenset[str] | set[str] = frozenset()) -> None:
        """`hand_over` for a pass whose rewrite of `f` changes only the tiles' MemRefs (MemoryReuse renames
        merged buffers, AllocateMemoryAddr rebases offsets, MaterializeSemanticAliases retargets yielded
        tiles) and drops the definitions named in `dropped`: `f`'s value types are `types` (its input's,
        in their order) with every tile's MemRef `m` replaced by `new_ref(m)` (`remap_memrefs`)."""
        if self.cache is not None:
            self.hand_over(f, remap_memrefs(types, new_ref, dropped))

    def known_types(self, program: Program, f) -> dict | None:
        """The value types of `f`, a function of `program`, when this pipeline run knows them already (it
        inferred them, or a pass handed them over); None when it would have to infer them. For a pass
        that derives its output's types from its input's (`hand_over`) only when that costs no inference."""
        if self.cache is None:
            return None
        known = self.cache.lookup(f, program, self.cache.token(program))
        return known[0] if known is not None else None

    def index(self, f):
        """The `ptoc.ir.verifier.NodeIndex` of function `f` (its nodes by class, its census of operators and
        loop kinds), shared through this pipeline run's cache by every pass that sees the same function."""
        return NodeIndex.get(f, self.cache)

    def applies(self, program: Program, ctx: CompileContext) -> bool:
        """False only when `run` would return `program` itself (nothing to do, nothing to report): the
        manager then does not call `run`. A pass answers from the functions' censuses (`index`), which a
        function the passes before left unchanged does not build again. By default True."""
        return True

    def run(self, program: Program, ctx: CompileContext) -> Program:  # pragma: no cover - abstract
        raise NotImplementedError

    def adopt(self, program: Program, ctx: CompileContext) -> Program:
        """Called instead of `run` when the pipeline skips the pass because its input already has every
        property it produces: bring a form of those products ptoc reads but does not print (PyPTO's)
        to ptoc's own. By default the program unchanged."""
        return program


def remap_memrefs(types: dict, new_ref: Callable[[MemRef], MemRef],
                  dropped: frozenset[str] | set[str] = frozenset()) -> dict:
    """`types` (value name -> type) without the names in `dropped`, each tile's MemRef `m` (a tuple's
    elements' too) replaced by `new_ref(m)`. A type whose MemRefs `new_ref` returns unchanged (the very
    object) stays the very object, so what the pipeline's cache remembers of the statements reading it
    still holds."""
    done: dict[int, object] = {}

    def remap(t):
        cls = t.__class__
        if cls is TileType:
            m = t.memref
            if m is None:
                return t
            n = new_ref(m)
            return t if n is m else replace(t, memref=n)
        if cls is TupleType:
            xs = tuple([remap(x) for x in t.types])
            return t if all(a is b for a, b in zip(xs, t.types)) else replace(t, types=xs)
        return t

    out = {}
    for name, t in types.items():
        if name in dropped:
            continue
        if t is not None:
            r = done.get(id(t))
            if r is None:
                r = done[id(t)] = remap(t)
            t = r
        out[name] = t
    return out


def load_pass(name: str) -> type[Pass]:
    mod = importlib.import_module(f"ptoc.passes.{name}")
    cls = getattr(mod, name)
    if not (isinstance(cls, type) and issubclass(cls, Pass)) or cls.name != name:
        raise InternalError(f"ptoc.passes.{name} does not define pass class {name}")
    return cls


def available_pipeline() -> list[type[Pass]]:
    """The pipeline's pass classes, in order."""
    return [load_pass(n) for _, n in PIPELINE]


# --------------------------------------------------------------------------------------------------
# Properties a pass can produce, each with a checker: program -> list of violations.
# --------------------------------------------------------------------------------------------------

PropertyCheck = Callable[[Program, CompileContext, object], list[str]]  # (program, ctx, VerifyCache | None)
PROPERTIES: dict[str, PropertyCheck] = {}


def property_check(name: str):
    def deco(fn: PropertyCheck) -> PropertyCheck:
        PROPERTIES[name] = fn
        return fn

    return deco


# Stricter checks of some properties, for an input read from a file (see `input_properties`).
INPUT_CHECKS: dict[str, list[PropertyCheck]] = {}


def input_check(name: str):
    def deco(fn: PropertyCheck) -> PropertyCheck:
        INPUT_CHECKS.setdefault(name, []).append(fn)
        return fn

    return deco


def _import_properties() -> None:
    importlib.import_module("ptoc.passes.properties")


# --------------------------------------------------------------------------------------------------
# Instruments
# --------------------------------------------------------------------------------------------------


class Instrument:
    # True for an instrument that only observes what each pass costs (`Timings`): the pipeline may then
    # keep its checks for the end (`run_pipeline`'s `check_once`), as the compiler's own runs do, so it
    # times the mode `ptoc compile` runs in. Instruments that read the IR after every pass leave it False.
    keeps_check_once: bool = False

    def before_pipeline(self, program: Program, ctx: CompileContext) -> None:
        pass

    def before_pass(self, index: int, p: Pass, program: Program) -> None:
        pass

    def after_pass(self, index: int, p: Pass, program: Program, seconds: float) -> None:
        pass

    def skipped_pass(self, index: int, p: Pass, program: Program, reason: str) -> None:
        """`p` did not run: its products were already there (`reason` says which). By default it is
        observed as a pass that ran in no time and left the IR as it was."""
        self.after_pass(index, p, program, 0.0)


@dataclass
class Timings(Instrument):
    """Each pass's wall time (its `applies` and `run`; not the pipeline's checks, which with `check_once`
    run once at the end). A run replayed with checks after every pass (`run_pipeline`) starts the rows
    again, so they are the replay's."""

    rows: list[tuple[str, str, float]] = field(default_factory=list)
    keeps_check_once = True

    def before_pipeline(self, program, ctx):
        self.rows = []

    def after_pass(self, index, p, program, seconds):
        self.rows.append((p.name, p.stage, seconds))

    def table(self) -> str:
        total = sum(s for _, _, s in self.rows)
        lines = [f"{'pass':28} {'stage':8} {'seconds':>10}"]
        for name, stage, s in self.rows:
            lines.append(f"{name:28} {stage:8} {s:10.6f}")
        lines.append(f"{'total':28} {'':8} {total:10.6f}")
        return "\n".join(lines)

    def profile(self) -> dict:
        return {"passes": [{"pass": n, "stage": st, "seconds": round(s, 6)} for n, st, s in self.rows],
                "total_seconds": round(sum(s for _, _, s in self.rows), 6)}


def dump_name(index: int, pass_name: str | None) -> str:
    return "00_frontend.ir" if pass_name is None else f"{index:02d}_after_{pass_name}.ir"


@dataclass
class Dumps(Instrument):
    """Collects the printed IR: before the pipeline and after every pass."""

    texts: list[tuple[str, str, str | None]] = field(default_factory=list)  # (file name, text, pass)
    before: dict[str, str] = field(default_factory=dict)  # pass name -> IR text just before it

    def before_pipeline(self, program, ctx):
        from ptoc.ir.printer import print_program

        self.texts.append((dump_name(0, None), print_program(program), None))

    def before_pass(self, index, p, program):
        from ptoc.ir.printer import print_program

        self.before[p.name] = print_program(program)

    def after_pass(self, index, p, program, seconds):
        from ptoc.ir.printer import print_program

        self.texts.append((dump_name(index, p.name), print_program(program), p.name))

    def skipped_pass(self, index, p, program, reason):  # the IR "after" a skipped pass is its input
        self.before_pass(index, p, program)
        self.after_pass(index, p, program, 0.0)


class RoundTrip(Instrument):
    """After every pass: print -> parse -> structurally equal, else an internal error naming the pass."""

    def after_pass(self, index, p, program, seconds):
        from ptoc.frontend.parser import parse_program
        from ptoc.ir.printer import print_program

        text = print_program(program)
        try:
            again = parse_program(text, f"<after {p.name}>", check_ops=False)
        except CompileError as e:
            raise InternalError(f"the IR after {p.name} does not re-parse: {e}") from e
        if again != program:
            raise InternalError(f"the IR after {p.name} does not round-trip through its printed form")


# --------------------------------------------------------------------------------------------------
# Running
# --------------------------------------------------------------------------------------------------


def check_invariants(program: Program, ctx: CompileContext, p: Pass | None, cache=None, ssa: bool = True) -> None:
    """The structural checks and `p`'s produced properties. `cache`: the pipeline run's `VerifyCache`
    (functions a pass returned unchanged are not checked again). `ssa`: the program has the `ssa`
    property, so single assignment is checked too."""
    from ptoc.ir.verifier import verify_program

    who = f"after pass {p.name}" if p is not None else "before the pipeline"
    diags = [d for d in verify_program(program, ctx=ctx, cache=cache, ssa=ssa) if d.severity == "error"]
    if diags:
        first = diags[0]
        where = f" at {first.span}" if first.span is not None and first.span.known else ""
        raise InternalError(f"IR invariant broken {who}: {first.code} {first.message}{where}")
    if p is not None:
        _check_claims(program, ctx, cache, sorted(p.produces), f"pass {p.name} claims")


def _check_claims(program: Program, ctx: CompileContext, cache, claimed, who: str) -> None:
    """Every property in `claimed` holds on `program`, else an internal error: `who` {prop!r} but: why."""
    _import_properties()
    for prop in claimed:
        check = PROPERTIES.get(prop)
        if check is None:
            raise InternalError(f"{who} unknown property {prop!r}")
        bad = check(program, ctx, cache)
        if bad:
            raise InternalError(f"{who} {prop!r} but: {bad[0]}")


@contextlib.contextmanager
def gc_paused():
    """Pause Python's cyclic garbage collector while a stage runs (as the front end's parser does): each
    stage builds a large acyclic heap (the IR) that the collector would rescan again and again. When it
    resumes, the stage's survivors go straight to its oldest generation (`gc.freeze` + `gc.unfreeze`,
    unless someone else keeps objects frozen) instead of all being scanned once more as young objects;
    the few cycles among them (nested helper functions of the passes) wait for the next full collection.
    Nested pauses do nothing: only the outermost resumes."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            if gc.get_freeze_count() == 0:
                gc.freeze()
                gc.unfreeze()
            gc.enable()


def written_properties(program: Program) -> frozenset[str]:
    """The properties a program can have as written: `structured` (no break/continue where they must
    be lowered) and, with it, `ssa` (every name assigned once)."""
    from ptoc.passes.ConvertToSSA import ssa_violations
    from ptoc.passes.CtrlFlowTransform import unstructured

    if unstructured(program):
        return frozenset()
    return frozenset({"structured", "ssa"}) if not ssa_violations(program) else frozenset({"structured"})


def _has(name: str, program: Program, ctx: CompileContext, cache) -> bool:
    """`program`, read from a file, has the property: its check and its input checks find nothing."""
    return not PROPERTIES[name](program, ctx, cache) and not any(c(program, ctx, cache)
                                                                for c in INPUT_CHECKS.get(name, ()))


def input_properties(program: Program, ctx: CompileContext, cache=None) -> frozenset[str]:
    """The properties `program` already has: those whose checks (and input checks) find nothing wrong
    (`ssa` only with `structured`)."""
    _import_properties()
    have = frozenset(name for name in PROPERTIES if _has(name, program, ctx, cache))
    return have if "structured" in have else have - {"ssa"}


def _holds(props: frozenset[str], program: Program, ctx: CompileContext, cache) -> bool:
    _import_properties()
    return all(_has(x, program, ctx, cache) for x in sorted(props))


def parse_pipeline(spec: str) -> list[type[Pass]]:
    """`A,B,...` -> those pass classes in that order; `ValueError` naming an unknown pass."""
    known = [n for _, n in PIPELINE]
    names = [n.strip() for n in spec.split(",") if n.strip()]
    if not names:
        raise ValueError("the pipeline is empty: give pass names separated by commas")
    for n in names:
        if n not in known:
            raise ValueError(f"unknown pass {n!r}; passes: {', '.join(known)}")
    return [load_pass(n) for n in names]


def run_pipeline(program: Program, ctx: CompileContext, passes: list[type[Pass]] | None = None,
                 stop_after: str | None = None, instruments: list[Instrument] | None = None,
                 verify: bool = True, skip: frozenset[str] = frozenset(), cache=None,
                 given: frozenset[str] | None = None, check_once: bool = False) -> Program:
    """Run the passes in order (up to and including `stop_after`). User errors found by a pass raise
    `CompileError`; broken invariants raise `InternalError`. `cache`: the `VerifyCache` to fill (by
    default one of this run's own, dropped when it returns; the driver passes its own to reuse the
    inferred types when it emits). `given`: the properties the input has (`input_properties`) when
    the passes are a chosen sub-pipeline (`ptoc passes --pipeline`); a pass whose requirement is
    neither given nor produced by an earlier pass is then the user's error (`CompileError`).

    `check_once` (the compiler's own runs, with no instrument but timings): the structural checks and the checks of
    the properties the passes claim, which after every pass cost about a third of a compile, run once
    after the last pass; when that check fails, or
    any pass raises, the pipeline runs again checking after every pass, so the error is the very one a
    run checked throughout gives (naming the pass that broke an invariant). Passes are deterministic
    and the IR immutable: the second run repeats the first up to where it stops.
    `PTOC_VERIFY_EACH_PASS=1` in the environment turns it off."""
    with gc_paused():
        if (check_once and verify and all(ins.keeps_check_once for ins in instruments or ())
                and not os.environ.get("PTOC_VERIFY_EACH_PASS")):
            try:
                return _run_pipeline(program, ctx, passes, stop_after, instruments, verify, skip, cache, given,
                                     each=False)
            except Exception:  # noqa: BLE001  (replayed below, where it is raised as it would be)
                pass
        return _run_pipeline(program, ctx, passes, stop_after, instruments, verify, skip, cache, given)


def _requires(p: Pass) -> frozenset[str]:
    """What `p` needs before it runs: its `requires`, and single assignment unless it makes it."""
    return p.requires if p.accepts_non_ssa else p.requires | {"ssa"}


def _run_pipeline(program: Program, ctx: CompileContext, passes: list[type[Pass]] | None,
                  stop_after: str | None, instruments: list[Instrument] | None, verify: bool,
                  skip: frozenset[str], cache, given: frozenset[str] | None = None, each: bool = True) -> Program:
    """`each` False: the structural checks run once, after the last pass (see `run_pipeline`)."""
    from ptoc.ir.verifier import VerifyCache

    # the whole pipeline skips the passes whose products the input already has (a dump of any stage);
    # an explicit list of passes runs exactly those (`ptoc passes --pipeline A,B`)
    whole = passes is None
    passes = available_pipeline() if passes is None else passes
    instruments = instruments or []
    cache = VerifyCache(ctx) if cache is None else cache  # never global: one compile's at most
    with cache.running():  # (helpers of the passes that ask for types without the cache use it too)
        return _run_passes(program, ctx, passes, whole, cache, stop_after, instruments, verify, skip, given,
                           each)


def _run_passes(program: Program, ctx: CompileContext, passes: list[type[Pass]], whole: bool, cache,
                stop_after: str | None, instruments: list[Instrument], verify: bool, skip: frozenset[str],
                given: frozenset[str] | None, each: bool) -> Program:
    from ptoc.diagnostics import Diagnostic

    names = [p.name for p in passes]
    if stop_after is not None and stop_after not in names:
        raise ValueError(f"unknown pass {stop_after!r}")
    start = program
    claimed: list[str] = []  # `each` False: the properties the passes produced, checked at the end
    held = input_properties(program, ctx, cache) if given is None else frozenset()
    have: set[str] = set(given) if given is not None else set(held)
    for ins in instruments:
        ins.before_pipeline(program, ctx)
    for i, cls in enumerate(passes, start=1):
        p = cls()
        if p.name in skip:
            continue
        p.cache = cache
        cache.age(program)  # what neither the last pass nor its check used, nor its output holds, goes
        if whole and p.produces and p.produces <= held and (program is start or _holds(p.produces, program, ctx, cache)):
            program = _skip(i, p, program, ctx, cache, instruments, verify, "ssa" in have)
            have |= p.produces
            if p.name == stop_after:
                break
            continue
        missing = _requires(p) - have
        if missing and given is not None:
            raise CompileError([Diagnostic(
                "PTOC-E0290", f"pass {p.name} needs the IR property {sorted(missing)[0]!r}, which the input "
                "does not have and no earlier pass of the pipeline produces", None,
                hint="start the pipeline earlier: `ptoc passes --list` shows which pass produces it")])
        if missing:
            raise InternalError(f"pass {p.name} requires {sorted(missing)} which no earlier pass produced")
        for ins in instruments:
            ins.before_pass(i, p, program)
        t0 = time.perf_counter()
        before = program
        try:
            if p.applies(program, ctx):
                program = p.run(program, ctx)
        except (CompileError, InternalError):
            raise
        except RecursionError as e:
            raise InternalError(f"pass {p.name} recursed too deeply") from e
        seconds = time.perf_counter() - t0
        handed = p.__dict__.pop("_handed", None)
        if handed:
            _take_types(program, cache, p, handed, check=(verify and each) or bool(os.environ.get(CHECK_HANDED)),
                        source=before)
        have |= p.produces
        if program is not before:
            have -= p.invalidates
        if verify and each:
            check_invariants(program, ctx, p, cache, ssa="ssa" in have)
        elif verify:
            claimed.extend(prop for prop in sorted(p.produces) if prop not in claimed)
        for ins in instruments:
            ins.after_pass(i, p, program, seconds)
        if p.name == stop_after:
            break
    if verify and not each:
        # once, on the final program: the structure, and every property a pass claimed (they are kept by
        # the passes after it); a failure replays the run checking after every pass (`run_pipeline`)
        ssa = "ssa" in have
        check_invariants(program, ctx, None, cache, ssa=ssa)
        # (a program the structural check with `ssa` finds nothing wrong in has the `ssa` property: each name
        # defined once in its function, none read outside the loop body that defines it; its own check, a
        # walk of every function, is left out; tests/passes/test_check_once.py compares both verdicts)
        _check_claims(program, ctx, cache, [x for x in claimed if not (ssa and x == "ssa")],
                      "the pipeline's passes claim")
    cache.age(program)  # keep only what the last check used and the final program's
    return program


CHECK_HANDED = "PTOC_CHECK_HANDED_TYPES"  # set: every hand-over of types is compared with a fresh inference


def _take_types(program: Program, cache, p: Pass, handed: list, check: bool, source: Program) -> None:
    """The value types `p` handed over (`Pass.hand_over`) for functions of its output `program` go into the
    pipeline's cache; with `check`, each is first compared with a fresh inference (an `InternalError` when
    they differ: names, their order, any type). A hand-over for a function the output does not hold (the pass changed it again) is dropped.

    A function handed over counts as verified clean (the pipeline's check does not look at it again) when
    its check would find nothing: checked, when the fresh inference found no error; unchecked, when the
    function of the same name in the pass's input `source` verified clean (or was handed over clean): the
    pass claims its rewrite keeps the types it hands over, and the checked modes hold it to that claim."""
    output = {f.name: f for f in program.functions}
    inputs = None
    for f, types in handed:
        if output.get(f.name) is not f:
            continue
        if check:
            why = cache.handed_mismatch(f, program, types)
            if why is not None:
                raise InternalError(f"pass {p.name} handed over wrong value types for {f.name!r}: {why}")
            clean = cache.verified_clean(f, program)  # what the fresh inference found
        else:
            if inputs is None:
                inputs = {g.name: g for g in source.functions}
            g = inputs.get(f.name)
            clean = g is not None and cache.verified_clean(g, source)
        # (checked, the handed objects still replace the inferred ones: the passes after, and the types they
        # derive in turn, see what they see in a run that does not check)
        cache.hand_over(f, program, types, clean)


def _skip(i: int, p: Pass, program: Program, ctx: CompileContext, cache, instruments, verify: bool,
          ssa: bool) -> Program:
    """`p` skipped: its products are there; `adopt` them, check, tell the instruments."""
    adopted = p.adopt(program, ctx)
    handed = p.__dict__.pop("_handed", None)
    if handed and adopted is not program:
        _take_types(adopted, cache, p, handed, check=verify or bool(os.environ.get(CHECK_HANDED)), source=program)
    if adopted is not program and verify:
        check_invariants(adopted, ctx, p, cache, ssa=ssa)
    reason = "the input already has " + ", ".join(repr(x) for x in sorted(p.produces))
    if adopted is not program:
        reason += " (read from PyPTO's form)"
    for ins in instruments:
        ins.skipped_pass(i, p, adopted, reason)
    return adopted
