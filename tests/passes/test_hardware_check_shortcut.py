"""InferTileMemorySpace's hardware-rule check answers "nothing wrong" without a second whole verification
when the operator rules, asked again with the hardware rules on, accept every operator call
(`_hardware_clean`). The oracle here is that whole verification (`verify_program` with the hardware
rules on): the shortcut may only say "clean" where it finds no error, and must not say so where it does."""

from __future__ import annotations

from pathlib import Path

import pytest

from ptoc.context import CompileContext
from ptoc.diagnostics import CompileError
from ptoc.driver import frontend
from ptoc.ir.verifier import VerifyCache, verify_program
from ptoc.passes.InferTileMemorySpace import InferTileMemorySpace, _hardware_clean
from ptoc.passes.manager import run_pipeline

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "examples").glob("*.ir")) + sorted((ROOT / "tests" / "corpus" / "raw").glob("*.ir"))

HEAD = "import pypto.language as pl\n@pl.program\nclass p:\n    @pl.function(type=pl.FunctionType.InCore)\n"

# a Mat -> Vec move: no TMOV path on either target (MOV-6), accepted until the spaces are decided
MAT_TO_VEC = HEAD + """\
    def k(self, x: pl.Tensor[[64, 64], pl.FP16], o: pl.Out[pl.Tensor[[64, 64], pl.FP16]]) -> pl.Tensor[[64, 64], pl.FP16]:
        a: pl.Tile[[64, 64], pl.FP16, pl.Mem.Mat] = pl.tile.load(x, [0, 0], [64, 64], target_memory=pl.Mem.Mat)
        v = pl.tile.move(a, target_memory=pl.Mem.Vec)
        o1: pl.Tensor[[64, 64], pl.FP16] = pl.tile.store(v, [0, 0], o)
        return o1
"""

# a BF16 vector add: A2/A3's vector unit has no BF16 (a hardware rule of the target), A5's has
BF16_ADD = HEAD + """\
    def k(self, x: pl.Tensor[[16, 64], pl.BF16], o: pl.Out[pl.Tensor[[16, 64], pl.BF16]]) -> pl.Tensor[[16, 64], pl.BF16]:
        a: pl.Tile[[16, 64], pl.BF16] = pl.tile.load(x, [0, 0], [16, 64])
        b: pl.Tile[[16, 64], pl.BF16] = pl.tile.add(a, a)
        o1: pl.Tensor[[16, 64], pl.BF16] = pl.tile.store(b, [0, 0], o)
        return o1
"""


# two kernels with the very same statement text (equal call nodes), once on FP32 tiles and once on BF16
# ones: only the second breaks A2/A3's no-BF16 vector rule, so the check must not take the first's answer
SAME_CALL_TWO_TYPES = HEAD + BF16_ADD.split(HEAD)[1].replace("pl.BF16", "pl.FP32") + \
    "    @pl.function(type=pl.FunctionType.InCore)\n" + BF16_ADD.split(HEAD)[1].replace("def k(", "def k2(")


def _before_infer_tile_memory_space(text: str, arch: str):
    """The program InferTileMemorySpace gets (the pass before it has run) and the run's verifier cache."""
    ctx = CompileContext(arch=arch)
    cache = VerifyCache(ctx)
    prog = run_pipeline(frontend(text, "k.ir", ctx), ctx, stop_after="CanonicalizeTileSlice", cache=cache)
    p = InferTileMemorySpace()
    p.cache = cache
    return prog, ctx, p


def _hardware_errors(prog, ctx) -> list:
    return [d for d in verify_program(prog, ctx=ctx.with_hardware_rules()) if d.severity == "error"]


@pytest.mark.parametrize("arch", ["a2a3", "a5"])
@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_shortcut_agrees_with_the_whole_check_on_the_examples(path, arch):
    try:
        prog, ctx, p = _before_infer_tile_memory_space(path.read_text(), arch)
    except CompileError as e:  # a program for the other target (e.g. an NZ write-back on A5)
        pytest.skip(f"rejected before InferTileMemorySpace on {arch}: {e.diagnostics[0].code}")
    prog = p.run(prog, ctx) if not _hardware_errors(prog, ctx) else prog
    clean = _hardware_clean(prog, ctx, p)
    errors = _hardware_errors(prog, ctx)
    assert not (clean and errors)
    if not errors and path.parent.name == "examples":
        assert clean  # the examples are in the simple form the shortcut reads (not every corpus program is)


@pytest.mark.parametrize("arch", ["a2a3", "a5"])
def test_shortcut_does_not_pass_a_move_without_a_tmov_path(arch):
    prog, ctx, p = _before_infer_tile_memory_space(MAT_TO_VEC, arch)
    assert [d.rule for d in _hardware_errors(prog, ctx)] == ["MOV-6"]
    assert _hardware_clean(prog, ctx, p) is False


def test_shortcut_follows_the_target_of_a_bf16_vector_op():
    prog, ctx, p = _before_infer_tile_memory_space(BF16_ADD, "a2a3")
    assert [d.code for d in _hardware_errors(prog, ctx)] == ["PTOC-E0671"]
    assert _hardware_clean(prog, ctx, p) is False
    prog, ctx, p = _before_infer_tile_memory_space(BF16_ADD, "a5")
    assert _hardware_errors(prog, ctx) == []
    assert _hardware_clean(prog, ctx, p) is True


def test_an_equal_call_on_other_argument_types_is_asked_again():
    prog, ctx, p = _before_infer_tile_memory_space(SAME_CALL_TWO_TYPES, "a2a3")
    errors = _hardware_errors(prog, ctx)
    assert [d.code for d in errors] == ["PTOC-E0671"]
    assert _hardware_clean(prog, ctx, p) is False
    # without the BF16 kernel the same calls are clean
    fp32_only = SAME_CALL_TWO_TYPES.split("    @pl.function(type=pl.FunctionType.InCore)\n    def k2")[0]
    prog, ctx, p = _before_infer_tile_memory_space(fp32_only, "a2a3")
    assert _hardware_errors(prog, ctx) == [] and _hardware_clean(prog, ctx, p) is True


def test_shortcut_cannot_tell_without_the_pipeline_cache():
    prog, ctx, _ = _before_infer_tile_memory_space(BF16_ADD, "a5")
    assert _hardware_clean(prog, ctx, InferTileMemorySpace()) is False
