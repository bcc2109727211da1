"""The pass manager: pinned pipeline order, pass names match their files, dumps re-parse,
`--dump-after` equals the dump file, broken passes are internal errors naming the pass."""

import json
import os
import subprocess
import sys
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
    # NZ-5 fixes BlockNzTensorViews after FlattenTileNdTo2D and before LegalizeTileCast and
    # MaterializeTensorStrides; memory planning comes last.
    assert [n for _, n in PIPELINE] == [
        "ConvertTensorToTileOps", "FlattenTileNdTo2D", "BlockNzTensorViews", "LegalizeTileCast",
        "InferTileMemorySpace", "ClassifyKernels", "MaterializeTensorStrides", "InitMemRef", "AllocateMemoryAddr",
    ]


def test_every_pass_name_equals_its_file_and_has_a_summary():
    for cls in available_pipeline():
        assert Path(sys.modules[cls.__module__].__file__).stem == cls.name
        assert cls.summary and cls.stage in ("tile", "layout", "memory")


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
    for i, (_, n) in enumerate(PIPELINE, start=1):
        one = subprocess.run(PTOC + ["passes", str(EXAMPLE), "--dump-after", n], capture_output=True, text=True,
                             timeout=120)
        assert one.returncode == 0, one.stderr
        assert one.stdout == (tmp_path / f"{i:02d}_after_{n}.ir").read_text(), n


def test_unknown_pass_name_is_a_usage_error():
    r = subprocess.run(PTOC + ["passes", str(EXAMPLE), "--dump-after", "NoSuchPass"], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 2 and "NoSuchPass" in r.stderr
