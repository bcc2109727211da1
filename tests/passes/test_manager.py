"""The pass manager: pinned pipeline order, pass names match their files, dumps re-parse,
`--dump-after` equals the dump file, broken passes are internal errors naming the pass."""

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from ptoc.context import CompileContext
from ptoc.diagnostics import InternalError
from ptoc.frontend.parser import parse_program
from ptoc.ir.nodes import AssignStmt, Var
from ptoc.passes import manager
from ptoc.passes.manager import PIPELINE, Pass, available_pipeline, run_pipeline

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "vector_add.ir"
PTOC = [sys.executable, "-m", "ptoc.cli"]


def test_pipeline_order_is_pinned():
    # InlineFunctions first (no later pass sees an Inline function), then UnrollLoops, CtrlFlowTransform and
    # ConvertToSSA (every later pass needs structured single assignment), Simplify, NormalizeStmtStructure,
    # FlattenCallExpr and the outlining passes in PyPTO's order (after SSA, before ConvertTensorToTileOps);
    # LowerCompositeOps between ConvertTensorToTileOps and FlattenTileNdTo2D (PyPTO's order).
    # NZ-5 fixes BlockNzTensorViews after FlattenTileNdTo2D and before LegalizeTileCast and
    # MaterializeTensorStrides; AutoTileMatmulL0 and CanonicalizeTileSlice right after LegalizeTileCast and
    # MemoryReuse between InitMemRef and AllocateMemoryAddr (PyPTO's order); memory planning comes last, then
    # DeriveCallDirections (PyPTO: after AllocateMemoryAddr), ExpandManualPhaseFence, Simplify again (PyPTO's second
    # run, after its distributed passes: it folds what the split passes wrote, `0 + subblock_idx * 8`) and
    # MaterializeRuntimeScopes; StampTfreeSplit and NormalizeReturnOrder right after SplitVectorKernel;
    # OptimizeOrchTensors and LowerCompositeOps right after ConvertTensorToTileOps; FoldNoOpReshape and
    # FuseCreateAssembleToSlice between AllocateMemoryAddr and DeriveCallDirections, as in PyPTO.
    assert [n for _, n in PIPELINE] == [
        "InlineFunctions", "UnrollLoops", "CtrlFlowTransform", "ConvertToSSA", "Simplify", "NormalizeStmtStructure",
        "FlattenCallExpr", "OutlineHierarchyScopes", "OutlineIncoreScopes",
        "OutlineClusterScopes", "ConvertTensorToTileOps", "OptimizeOrchTensors", "LowerCompositeOps",
        "FlattenTileNdTo2D", "BlockNzTensorViews", "LegalizeTileCast",
        "AutoTileMatmulL0", "CanonicalizeTileSlice",
        "InferTileMemorySpace", "ResolveBackendOpLayouts", "LowerAutoVectorSplit", "ExpandMixedKernel",
        "InjectGmPipeBuffer", "SplitVectorKernel", "StampTfreeSplit", "NormalizeReturnOrder", "ClassifyKernels",
        "SkewCrossCorePipeline", "LowerPipelineLoops", "CanonicalizeIOOrder", "MaterializeTensorStrides", "InitMemRef",
        "MaterializeSemanticAliases", "MemoryReuse", "AllocateMemoryAddr", "FoldNoOpReshape",
        "FuseCreateAssembleToSlice", "DeriveCallDirections", "ExpandManualPhaseFence", "Simplify",
        "MaterializeRuntimeScopes",
    ]


def test_every_pass_name_equals_its_file_and_has_a_summary():
    for cls in available_pipeline():
        assert Path(sys.modules[cls.__module__].__file__).stem == cls.name
        assert cls.summary and cls.stage in ("ssa", "tile", "layout", "memory")


def test_every_pass_file_has_a_test_file():
    for _, name in PIPELINE:
        assert (ROOT / "tests" / "passes" / f"test_{name}.py").exists(), name


def test_produced_properties_are_known():
    manager._import_properties()
    for cls in available_pipeline():
        for prop in cls.produces | cls.requires:
            assert prop in manager.PROPERTIES, (cls.name, prop)


class _BreaksSSA(Pass):
    name = "BreaksSSA"
    stage = "tile"
    summary = "test-only: assigns a name twice"

    def run(self, program, ctx):
        f = program.functions[0]
        dup = AssignStmt(Var(f.body[0].target.name), f.body[0].value)
        nf = f.__class__(**{**f.__dict__, "body": (f.body[0], dup) + f.body[1:]})
        return program.__class__(**{**program.__dict__, "functions": (nf,) + program.functions[1:]})


class _ClaimsTooMuch(Pass):
    name = "ClaimsTooMuch"
    stage = "tile"
    summary = "test-only: claims tile_ops without doing anything"
    produces = frozenset({"tile_ops"})

    def run(self, program, ctx):
        return program


TENSOR_KERNEL = """
@pl.function(type=pl.FunctionType.InCore)
def k(a: pl.Tensor[[16, 16], pl.FP32], b: pl.Tensor[[16, 16], pl.FP32]) -> pl.Tensor[[16, 16], pl.FP32]:
    c: pl.Tensor[[16, 16], pl.FP32] = pl.tensor.add(a, b)
    return c
"""


def test_pass_breaking_ssa_is_an_internal_error_naming_it():
    prog = parse_program(TENSOR_KERNEL, "k.ir")
    with pytest.raises(InternalError, match="BreaksSSA"):
        run_pipeline(prog, CompileContext(), passes=[_BreaksSSA])


class _DeclaresBreakingSSA(_BreaksSSA):
    name = "DeclaresBreakingSSA"
    accepts_non_ssa = True
    invalidates = frozenset({"ssa"})


class _NeedsSSA(Pass):
    name = "NeedsSSA"
    stage = "tile"
    summary = "test-only: needs single assignment, changes nothing"

    def run(self, program, ctx):
        return program


def test_a_pass_that_declares_it_breaks_ssa_is_checked_without_it_and_conversion_must_follow():
    from ptoc.passes.ConvertToSSA import ConvertToSSA, ssa_violations

    prog = parse_program(TENSOR_KERNEL, "k.ir")
    out = run_pipeline(prog, CompileContext(), passes=[_DeclaresBreakingSSA, ConvertToSSA, _NeedsSSA])
    assert ssa_violations(out) == [] and len(out.functions[0].body) == len(prog.functions[0].body) + 1
    with pytest.raises(InternalError, match=r"NeedsSSA requires \['ssa'\]"):
        run_pipeline(prog, CompileContext(), passes=[_DeclaresBreakingSSA, _NeedsSSA])


def test_pass_claiming_a_property_it_does_not_produce_is_caught():
    prog = parse_program(TENSOR_KERNEL, "k.ir")
    with pytest.raises(InternalError, match="ClaimsTooMuch.*tile_ops"):
        run_pipeline(prog, CompileContext(), passes=[_ClaimsTooMuch])


def test_passes_list_prints_every_pass_in_order():
    r = subprocess.run(PTOC + ["passes", "--list"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.strip().splitlines()
    assert [ln.split()[2] for ln in lines] == [n for _, n in PIPELINE]
    assert [ln.split()[0] for ln in lines] == [str(i) for i in range(1, len(PIPELINE) + 1)]


def test_dump_all_files_reparse_and_dump_after_matches_the_file(tmp_path):
    r = subprocess.run(PTOC + ["passes", str(EXAMPLE), "--dump-after", "all", "--dump-dir", str(tmp_path),
                               "--timings"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    names = sorted(os.listdir(tmp_path))
    expected = ["00_frontend.ir"] + [f"{i:02d}_after_{n}.ir" for i, (_, n) in enumerate(PIPELINE, start=1)]
    assert [n for n in names if n.endswith(".ir")] == expected
    for n in expected:
        parse_program((tmp_path / n).read_text(), n, check_ops=False)
    profile = json.loads((tmp_path / "pipeline_profile.json").read_text())
    assert [p["pass"] for p in profile["passes"]] == [n for _, n in PIPELINE]
    assert "total" in r.stderr
    seen = set()
    for i, (_, n) in enumerate(PIPELINE, start=1):
        if n in seen:  # a pass that runs twice (Simplify): --dump-after NAME stops after its first run
            continue
        seen.add(n)
        one = subprocess.run(PTOC + ["passes", str(EXAMPLE), "--dump-after", n], capture_output=True, text=True,
                             timeout=120)
        assert one.returncode == 0, one.stderr
        assert one.stdout == (tmp_path / f"{i:02d}_after_{n}.ir").read_text(), n


def test_unknown_pass_name_is_a_usage_error():
    r = subprocess.run(PTOC + ["passes", str(EXAMPLE), "--dump-after", "NoSuchPass"], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 2 and "NoSuchPass" in r.stderr


# --------------------------------------------------------------------------------------------------
# The verifier cache: the IR is immutable, so a function a pass returns unchanged is not checked again
# (DESIGN "Speed is a feature"); every change, and every signature change a call depends on, still is.
# --------------------------------------------------------------------------------------------------

KERNEL_AND_CALLER = """
import pypto.language as pl

@pl.program
class two:
    @pl.function(type=pl.FunctionType.InCore)
    def k(self, a: pl.Tensor[[16, 16], pl.FP32], out: pl.Out[pl.Tensor[[16, 16], pl.FP32]]) -> pl.Tensor[[16, 16], pl.FP32]:
        t: pl.Tile[[16, 16], pl.FP32, pl.Mem.Vec] = pl.tile.load(a, [0, 0], [16, 16], [16, 16], target_memory=pl.Mem.Vec)
        r: pl.Tensor[[16, 16], pl.FP32] = pl.tile.store(t, [0, 0], out)
        return r
    @pl.function(type=pl.FunctionType.InCore)
    def k2(self, a: pl.Tensor[[16, 16], pl.FP32], out: pl.Out[pl.Tensor[[16, 16], pl.FP32]]) -> pl.Tensor[[16, 16], pl.FP32]:
        t: pl.Tile[[16, 16], pl.FP32, pl.Mem.Vec] = pl.tile.load(a, [0, 0], [16, 16], [16, 16], target_memory=pl.Mem.Vec)
        r: pl.Tensor[[16, 16], pl.FP32] = pl.tile.store(t, [0, 0], out)
        return r
    @pl.function(type=pl.FunctionType.Orchestration)
    def main(self, a: pl.Tensor[[16, 16], pl.FP32]) -> pl.Tensor[[16, 16], pl.FP32]:
        out: pl.Tensor[[16, 16], pl.FP32] = pl.tensor.create([16, 16], dtype=pl.FP32, layout=pl.TensorLayout.ND)
        y: pl.Tensor[[16, 16], pl.FP32] = self.k(a, out)
        return y
"""


class _Unchanged(Pass):
    name = "Unchanged"
    stage = "tile"
    summary = "test-only: returns the program as it is"

    def run(self, program, ctx):
        return program


class _Rebuilt(Pass):
    name = "Rebuilt"
    stage = "tile"
    summary = "test-only: a new program object holding the very same functions"

    def run(self, program, ctx):
        return replace(program, functions=tuple(program.functions))


class _AsksTypes(Pass):
    name = "AsksTypes"
    stage = "tile"
    summary = "test-only: asks for every value's type, changes nothing"

    def run(self, program, ctx):
        assert "t" in self.types(program, ctx)["k"]
        return program


class _TouchesK2(Pass):
    name = "TouchesK2"
    stage = "tile"
    summary = "test-only: rebuilds the first statement of k2 (an equal copy: a new object to check)"

    def run(self, program, ctx):
        def touch(f):
            return replace(f, body=(replace(f.body[0]),) + f.body[1:])

        return replace(program, functions=tuple(touch(f) if f.name == "k2" else f for f in program.functions))


class _RetypesK(Pass):
    name = "RetypesK"
    stage = "tile"
    summary = "test-only: gives k a third parameter; its caller main is left as it was"

    def run(self, program, ctx):
        def grow(f):
            return replace(f, params=f.params + (replace(f.params[0], name="extra"),))

        return replace(program, functions=tuple(grow(f) if f.name == "k" else f for f in program.functions))


@pytest.fixture
def checked(monkeypatch):
    """The names of the functions the verifier checks, in order."""
    from ptoc.ir.verifier import Verifier

    seen: list[str] = []
    original = Verifier.function

    def counting(self, f):
        seen.append(f.name)
        return original(self, f)

    monkeypatch.setattr(Verifier, "function", counting)
    return seen


def test_unchanged_functions_are_not_verified_again(checked):
    prog = parse_program(KERNEL_AND_CALLER, "two.ir")
    checked.clear()
    run_pipeline(prog, CompileContext(), passes=[_Unchanged, _Rebuilt, _Unchanged, _AsksTypes])
    assert checked == ["k", "k2", "main"]  # once, after the first pass; the later passes reuse it


def test_only_the_changed_function_is_verified_again(checked):
    prog = parse_program(KERNEL_AND_CALLER, "two.ir")
    checked.clear()
    run_pipeline(prog, CompileContext(), passes=[_Unchanged, _TouchesK2, _Unchanged])
    assert checked == ["k", "k2", "main", "k2"]


def test_each_pipeline_run_verifies_afresh(checked):
    prog = parse_program(KERNEL_AND_CALLER, "two.ir")
    checked.clear()
    run_pipeline(prog, CompileContext(), passes=[_Unchanged])
    run_pipeline(prog, CompileContext(), passes=[_Unchanged])
    assert checked == ["k", "k2", "main"] * 2  # the cache lives in one run_pipeline call, not in a global


def test_breaking_ssa_after_cached_passes_is_still_caught():
    prog = parse_program(TENSOR_KERNEL, "k.ir")
    with pytest.raises(InternalError, match="BreaksSSA.*more than once"):
        run_pipeline(prog, CompileContext(), passes=[_Unchanged, _Unchanged, _BreaksSSA])


def test_a_callee_signature_change_reverifies_the_unchanged_caller(checked):
    # main is the very same object after RetypesK, but it now calls k with too few arguments
    prog = parse_program(KERNEL_AND_CALLER, "two.ir")
    with pytest.raises(InternalError, match=r"RetypesK.*'k' takes 3 argument\(s\)"):
        run_pipeline(prog, CompileContext(), passes=[_Unchanged, _RetypesK])
    assert checked.count("main") == 3  # parse, after Unchanged, after RetypesK
    assert checked.count("k2") == 2  # k2 calls nothing: another function's signature cannot matter to it


class _RenamesKind(Pass):
    name = "RenamesKind"
    stage = "tile"
    summary = "test-only: marks k an AIV kernel (its kind only; what the verifier reads is untouched)"

    def run(self, program, ctx):
        return replace(program, functions=tuple(replace(f, func_type="AIV") if f.name == "k" else f
                                                for f in program.functions))


def test_a_kind_change_alone_is_not_verified_again(checked):
    prog = parse_program(KERNEL_AND_CALLER, "two.ir")
    checked.clear()
    out = run_pipeline(prog, CompileContext(), passes=[_Unchanged, _RenamesKind])
    assert out.function("k").func_type == "AIV"
    assert checked == ["k", "k2", "main"]


class _DropsLoad(Pass):
    name = "DropsLoad"
    stage = "tile"
    summary = "test-only: deletes the definition of t in k; the statement reading t stays the same object"

    def run(self, program, ctx):
        return replace(program, functions=tuple(replace(f, body=f.body[1:]) if f.name == "k" else f
                                                for f in program.functions))


def test_an_unchanged_statement_whose_input_vanished_is_still_caught():
    # the store of t was checked clean after Unchanged; its check is remembered, but only for as long as
    # every name it reads is still in scope with the very same type
    prog = parse_program(KERNEL_AND_CALLER, "two.ir")
    with pytest.raises(InternalError, match="DropsLoad.*undefined name 't'"):
        run_pipeline(prog, CompileContext(), passes=[_Unchanged, _DropsLoad])


SHORT_TENSOR_KERNEL = """
@pl.function(type=pl.FunctionType.InCore)
def k(a: pl.Tensor[[16, 16], pl.FP32], b: pl.Tensor[[16, 16], pl.FP32]) -> pl.Tensor[[16, 16], pl.FP32]:
    c = pl.add(a, b)
    return c
"""


def test_a_pass_leaving_a_tensor_op_by_its_short_name_in_a_kernel_is_caught_by_the_inferred_types(monkeypatch):
    # `pl.add(a, b)` names no namespace and `c` has no annotation: only the types the verifier infers for a
    # and b say it is tensor.add. A ConvertTensorToTileOps that leaves the kernel as it is must not pass its
    # own `tile_ops` check.
    from ptoc.passes.ConvertTensorToTileOps import ConvertTensorToTileOps

    monkeypatch.setattr(ConvertTensorToTileOps, "run", lambda self, program, ctx: program)
    prog = parse_program(SHORT_TENSOR_KERNEL, "k.ir")
    with pytest.raises(InternalError, match=r"pass ConvertTensorToTileOps claims 'tile_ops' but: k: pl\.add on a "
                                            r"tensor at line 4"):
        run_pipeline(prog, CompileContext(), passes=[ConvertTensorToTileOps])


def test_the_real_pass_converts_the_short_named_tensor_op_and_passes_the_check():
    from ptoc.passes.ConvertTensorToTileOps import ConvertTensorToTileOps

    from ptoc.ir.nodes import Call
    from ptoc.ir.visitor import walk

    out = run_pipeline(parse_program(SHORT_TENSOR_KERNEL, "k.ir"), CompileContext(), passes=[ConvertTensorToTileOps])
    ops = [n.op for n in walk(out.function("k")) if isinstance(n, Call) and n.kind == "op"]
    assert "tile.add" in ops and "add" not in ops


def test_a_function_left_unchanged_by_many_passes_is_checked_once(checked):
    # the checks are run once, at the end (check_once); between the two passes that ask for types, three
    # passes neither change nor ask anything: the types of the very same functions are still remembered
    prog = parse_program(KERNEL_AND_CALLER, "two.ir")
    checked.clear()
    run_pipeline(prog, CompileContext(), passes=[_AsksTypes, _Unchanged, _Rebuilt, _Unchanged, _AsksTypes],
                 check_once=True)
    assert sorted(checked) == ["k", "k2", "main"]


def test_only_a_changed_function_is_checked_again_after_many_passes(checked):
    prog = parse_program(KERNEL_AND_CALLER, "two.ir")
    checked.clear()
    run_pipeline(prog, CompileContext(), passes=[_AsksTypes, _Unchanged, _TouchesK2, _Unchanged, _AsksTypes],
                 check_once=True)
    assert sorted(checked) == ["k", "k2", "k2", "main"]


class _NeverApplies(Pass):
    name = "NeverApplies"
    stage = "tile"
    summary = "test-only: says it has nothing to do; its run would fail"

    def applies(self, program, ctx):
        return True if ctx is None else False

    def run(self, program, ctx):
        raise AssertionError("run called although applies said there is nothing to do")


def test_a_pass_that_does_not_apply_is_not_run_but_is_observed():
    prog = parse_program(KERNEL_AND_CALLER, "two.ir")
    timings = manager.Timings()
    out = run_pipeline(prog, CompileContext(), passes=[_Unchanged, _NeverApplies], instruments=[timings])
    assert out is prog
    assert [r[0] for r in timings.rows] == ["Unchanged", "NeverApplies"]


class _AppliesAgreesWithRun(manager.Instrument):
    """Before every pass of the pipeline: when the pass says it does not apply, its run must return the
    very program it was given."""

    def __init__(self, ctx):
        self.ctx = ctx
        self.answers: list[tuple[str, bool]] = []

    def before_pass(self, index, p, program):
        applies = p.applies(program, self.ctx)
        self.answers.append((p.name, applies))
        if not applies:
            assert p.run(program, self.ctx) is program, f"{p.name} does not apply but changes the program"


@pytest.mark.parametrize("path", sorted((ROOT / "examples").glob("*.ir")) + [
    ROOT / "tests" / "passes" / "attention_blocks_pipeline.ir"], ids=lambda p: p.name)
def test_applies_false_means_run_returns_the_program(path):
    from ptoc.driver import frontend

    ctx = CompileContext()
    prog = frontend(path.read_text(), str(path), ctx)
    check = _AppliesAgreesWithRun(ctx)
    run_pipeline(prog, ctx, instruments=[check])
    said = dict(check.answers)
    text = path.read_text()
    assert said["UnrollLoops"] == ("pl.unroll(" in text)
    if "pl.pipeline(" in text:  # (the L0 tiling of a matmul writes pipeline loops of its own)
        assert said["SkewCrossCorePipeline"]  # (it is the first to look for them)
    assert not all(said.values())  # some pass had nothing to do, and its run agreed
