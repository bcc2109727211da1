"""InferTileMemorySpace reads each value's own type, its tile annotations set aside (`_value_types`). A
kernel whose annotations give no value another type than its own is not typed a second time without
them (`_annotations_neutral`). The oracle is that second typing itself: on every example and corpus
program the types must be the ones the annotation-free typing gives, and a kernel whose annotation does
change a type (a space the value does not have yet) must take the second typing."""

from __future__ import annotations

from pathlib import Path

import pytest

import ptoc.passes.InferTileMemorySpace as itms
from ptoc.context import CompileContext
from ptoc.diagnostics import CompileError
from ptoc.driver import frontend
from ptoc.ir.verifier import VerifyCache, function_types
from ptoc.passes.manager import run_pipeline

ROOT = Path(__file__).resolve().parents[2]
PROGRAMS = sorted((ROOT / "examples").glob("*.ir")) + sorted((ROOT / "tests" / "corpus" / "raw").glob("*.ir"))

HEAD = "import pypto.language as pl\n@pl.program\nclass p:\n    @pl.function(type=pl.FunctionType.InCore)\n"

# every annotation names the space its value is made in: nothing to set aside
WRITTEN_AS_MADE = HEAD + """\
    def k(self, x: pl.Tensor[[16, 64], pl.FP32], o: pl.Out[pl.Tensor[[16, 64], pl.FP32]]) -> pl.Tensor[[16, 64], pl.FP32]:
        a: pl.Tile[[16, 64], pl.FP32, pl.Mem.Vec] = pl.tile.load(x, [0, 0], [16, 64], target_memory=pl.Mem.Vec)
        b: pl.Tile[[16, 64], pl.FP32, pl.Mem.Vec] = pl.tile.add(a, a)
        o1: pl.Tensor[[16, 64], pl.FP32] = pl.tile.store(b, [0, 0], o)
        return o1
"""

def _before_pass(text: str, arch: str = "a2a3"):
    ctx = CompileContext(arch=arch)
    cache = VerifyCache(ctx)
    prog = run_pipeline(frontend(text, "k.ir", ctx), ctx, stop_after="CanonicalizeTileSlice", cache=cache)
    return prog, ctx, cache


def _slow_value_types(prog, ctx, cache, monkeypatch):
    """`_value_types` with every kernel typed again without its tile annotations."""
    with monkeypatch.context() as m:
        m.setattr(itms, "_annotations_neutral", lambda *a: False)
        return itms._value_types(prog, ctx, cache, {})


@pytest.mark.parametrize("arch", ["a2a3", "a5"])
@pytest.mark.parametrize("path", PROGRAMS, ids=[f"{p.parent.name}/{p.stem}" for p in PROGRAMS])
def test_value_types_equal_the_annotation_free_typing(path, arch, monkeypatch):
    try:
        prog, ctx, cache = _before_pass(path.read_text(), arch)
    except CompileError as e:  # a program for the other target
        pytest.skip(f"rejected before InferTileMemorySpace on {arch}: {e.diagnostics[0].code}")
    if not any(f.func_type in itms.KERNEL_TYPES for f in prog.functions):
        pytest.skip("no kernel")
    slow = _slow_value_types(prog, ctx, cache, monkeypatch)
    assert itms._value_types(prog, ctx, cache, {}) == slow


def test_examples_take_the_short_way():
    """The shortcut applies to ordinary kernels (else the test above would only compare the slow way
    with itself)."""
    neutral = 0
    for path in sorted((ROOT / "examples").glob("*.ir")):
        try:
            prog, ctx, cache = _before_pass(path.read_text())
        except CompileError:
            continue
        types = function_types(prog, ctx, cache)
        neutral += sum(itms._annotations_neutral(f, prog, ctx, cache, types[f.name]) for f in prog.functions
                       if f.func_type in itms.KERNEL_TYPES)
    assert neutral >= 5


def test_annotations_as_made_are_neutral(monkeypatch):
    prog, ctx, cache = _before_pass(WRITTEN_AS_MADE)
    (k,) = prog.functions
    assert itms._annotations_neutral(k, prog, ctx, cache, function_types(prog, ctx, cache)["k"]) is True
    assert itms._value_types(prog, ctx, cache, {}) == _slow_value_types(prog, ctx, cache, monkeypatch)


def test_a_type_only_the_annotation_gives_is_set_aside(monkeypatch):
    """tile.tpop_from_aic has no result type of its own (the pipe's tile is what the annotation says):
    typed without its annotation, the popped tile and what reads it have other types."""
    prog, ctx, cache = _before_pass((ROOT / "examples" / "linear_relu_split.ir").read_text())
    written = function_types(prog, ctx, cache)
    popping = [f for f in prog.functions if f.func_type in itms.KERNEL_TYPES
               and "tile.tpop_from_aic" in {c.op for c in itms.NodeIndex.get(f, cache).of(itms.Call)}]
    assert popping
    for f in popping:
        assert itms._annotations_neutral(f, prog, ctx, cache, written[f.name]) is False
    assert itms._value_types(prog, ctx, cache, {}) == _slow_value_types(prog, ctx, cache, monkeypatch)
