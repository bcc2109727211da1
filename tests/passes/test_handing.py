"""Passes that rebuild functions hand the pipeline the value types of their output where they know them
(`Pass.hand_over`): NormalizeReturnOrder (a return statement defines no value), InjectGmPipeBuffer (one
more parameter), LowerPipelineLoops (each copy of a loop body has the types of the values it copies).
The oracle is always the verifier's own inference of the very function handed over, without any cache;
the test suite's environment also compares every hand-over with an inference inside the pipeline
(`PTOC_CHECK_HANDED_TYPES`), so a wrong derivation fails any test that compiles such a program."""

from __future__ import annotations

import textwrap
from collections import Counter
from pathlib import Path

import pytest

from ptoc.context import CompileContext
from ptoc.frontend.parser import parse_program
from ptoc.ir.verifier import Verifier, VerifyCache
from ptoc.passes import manager
from ptoc.passes.LowerPipelineLoops import LowerPipelineLoops
from ptoc.passes.manager import run_pipeline

ROOT = Path(__file__).resolve().parents[2]
PROGRAMS = sorted((ROOT / "examples").glob("*.ir")) + sorted((ROOT / "tests" / "corpus" / "raw").glob("*.ir"))
PASSES = ("NormalizeReturnOrder", "InjectGmPipeBuffer", "LowerPipelineLoops")


def _spy_hand_overs(monkeypatch, ctx):
    """Record every hand-over the pipeline takes as (pass name, function, handed types, freshly inferred
    types): the inference is of the pass's output program, with no cache."""
    seen = []
    original = manager._take_types

    def take(program, cache, p, handed, check, source):
        for f, types in handed:
            if program.function(f.name) is f:
                fresh = Verifier(program, cache.ctx, cache.op_typer).function_types(f)
                seen.append((p.name, f, types, dict(fresh)))
        return original(program, cache, p, handed, check, source)

    monkeypatch.setattr(manager, "_take_types", take)
    return seen


def _compiles(text: str, name: str, ctx: CompileContext):
    try:
        return run_pipeline(parse_program(text, name, ctx=ctx), ctx, check_once=True, cache=VerifyCache(ctx))
    except Exception:  # noqa: BLE001  (a program the compiler rejects hands nothing over that matters here)
        return None


def test_the_handed_types_are_those_a_fresh_inference_gives_on_every_example_and_corpus_program(monkeypatch):
    ctx = CompileContext()
    seen = _spy_hand_overs(monkeypatch, ctx)
    for path in PROGRAMS:
        _compiles(path.read_text(encoding="utf-8"), path.name, ctx)
    by_pass = Counter(name for name, *_ in seen)
    for name, f, types, fresh in seen:
        assert list(types.items()) == list(fresh.items()), (name, f.name)
    # the programs exercise the hand-overs of this file's passes (else the comparison above proves nothing)
    for name in ("NormalizeReturnOrder", "InjectGmPipeBuffer", "LowerPipelineLoops"):
        assert by_pass[name] >= 1, (name, by_pass)


# --------------------------------------------------------------------------------------------------
# LowerPipelineLoops: which lowerings hand over
# --------------------------------------------------------------------------------------------------

TILE = "pl.Tile[[64, 64], pl.FP32, pl.Mem.Vec]"


def _kernel(loop: str, params: str = "") -> str:
    body = textwrap.indent(textwrap.dedent(loop).strip("\n"), " " * 8)
    return (f"import pypto.language as pl\n@pl.program\nclass P:\n    @pl.function(type=pl.FunctionType.InCore)\n"
            f"    def main(self, x: pl.Tensor[[512, 64], pl.FP32], out: pl.Out[pl.Tensor[[64, 64], pl.FP32]]{params})"
            f" -> pl.Tensor[[64, 64], pl.FP32]:\n"
            f"        acc0: {TILE} = pl.tile.load(x, [0, 0], [64, 64], target_memory=pl.Mem.Vec)\n{body}\n"
            f"        out_1: pl.Tensor[[64, 64], pl.FP32] = pl.tile.store(acc, [0, 0], out)\n"
            f"        return out_1\n")


def _lowered(text: str, monkeypatch):
    """(whether LowerPipelineLoops handed `main` over, its output program); the run is checked after every
    pass, so a hand-over that differs from an inference raises."""
    ctx = CompileContext()
    seen = _spy_hand_overs(monkeypatch, ctx)
    out = run_pipeline(parse_program(text, "k.ir", ctx=ctx), ctx, passes=[LowerPipelineLoops], cache=VerifyCache(ctx))
    mine = [(types, fresh) for name, f, types, fresh in seen if name == "LowerPipelineLoops" and f.name == "main"]
    for types, fresh in mine:
        assert list(types.items()) == list(fresh.items())
    return bool(mine), out


CARRIED = f"""
for k, (a,) in pl.pipeline(64, {{stop}}, 64, stage=2, init_values=(acc0,)):
    t: {TILE} = pl.tile.load(x, [k, 0], [64, 64], target_memory=pl.Mem.Vec)
    s: {TILE} = pl.tile.add(a, t)
    acc = pl.yield_(s)
"""


def test_a_whole_number_of_chunks_is_handed_over(monkeypatch):
    handed, out = _lowered(_kernel(CARRIED.format(stop=320)), monkeypatch)  # 4 iterations, stage 2
    assert handed
    assert "s_1" in {n for f in out.functions for n in Verifier(out).function_types(f)}  # the clone's value


def test_nested_pipelines_of_whole_chunks_are_handed_over(monkeypatch):
    loop = f"""
    for j, (b,) in pl.pipeline(0, 4, 1, stage=2, init_values=(acc0,)):
        for k, (a,) in pl.pipeline(64, 320, 64, stage=2, init_values=(b,)):
            t: {TILE} = pl.tile.load(x, [k, 0], [64, 64], target_memory=pl.Mem.Vec)
            s: {TILE} = pl.tile.add(a, t)
            inner = pl.yield_(s)
        acc = pl.yield_(inner)
    """
    handed, _ = _lowered(_kernel(loop), monkeypatch)
    assert handed


@pytest.mark.parametrize("text", [
    _kernel(CARRIED.format(stop=256)),  # 3 iterations, stage 2: one left over after the chunks
    _kernel(CARRIED.format(stop="n"), params=", n: pl.Scalar[pl.INDEX]"),  # a dynamic remainder
], ids=["tail", "dynamic"])
def test_a_lowering_with_left_over_iterations_is_left_to_inference(text, monkeypatch):
    handed, _ = _lowered(text, monkeypatch)
    assert not handed


def test_a_copied_type_that_reads_a_name_is_left_to_inference(monkeypatch):
    # the valid extent of `t` reads the loop index: each copy's type reads its own index
    loop = f"""
    for k, (a,) in pl.pipeline(0, 4, 1, stage=2, init_values=(acc0,)):
        t: {TILE} = pl.tile.load(x, [0, 0], [64, 64], target_memory=pl.Mem.Vec)
        v = pl.tile.set_validshape(t, k, 64)
        s: {TILE} = pl.tile.add(a, v)
        acc = pl.yield_(s)
    """
    handed, _ = _lowered(_kernel(loop), monkeypatch)
    assert not handed
