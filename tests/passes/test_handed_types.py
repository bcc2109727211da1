"""A pass that rewrites a function in a way whose effect on the value types it knows hands the pipeline
the types of its output (`Pass.hand_over`) instead of having them inferred again. In the checked modes
(a run checked after every pass, `PTOC_CHECK_HANDED_TYPES`) the manager compares them with a fresh
inference, so a wrong hand-over is an internal error naming the pass; the verifier's own inference is
the oracle in these tests, never the pass's derivation."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from ptoc.context import CompileContext
from ptoc.diagnostics import InternalError
from ptoc.frontend.parser import parse_program
from ptoc.ir import dtypes
from ptoc.ir.nodes import ScalarType
from ptoc.ir.verifier import VerifyCache, definitions, function_types
from ptoc.passes.manager import CHECK_HANDED, Pass, run_pipeline

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "examples").glob("*.ir"))

KERNEL = """
@pl.function(type=pl.FunctionType.InCore)
def k(a: pl.Tensor[[16, 16], pl.FP32], b: pl.Tensor[[16, 16], pl.FP32]) -> pl.Tensor[[16, 16], pl.FP32]:
    n: pl.Scalar[pl.INDEX] = 4
    c: pl.Tensor[[16, 16], pl.FP32] = pl.tensor.add(a, b)
    return c
"""


class _HandsOver(Pass):
    """Test-only: rebuilds the first function (a new body tuple, the same statements) and hands over the
    types of its input, with the type of `n` replaced by `WRONG` when that is set."""

    name = "HandsOver"
    stage = "tile"
    summary = "test-only: hands over the value types of a rebuilt function"
    WRONG: ScalarType | None = None

    def run(self, program, ctx):
        f = program.functions[0]
        types = dict(self.types(program, ctx)[f.name])
        if self.WRONG is not None:
            types["n"] = self.WRONG
        g = replace(f, body=tuple(f.body))
        g = replace(g, body=g.body[:1] + g.body[1:])  # a body object of its own: the types are not cached yet
        self.hand_over(g, types)
        return replace(program, functions=(g,) + program.functions[1:])


@pytest.fixture(autouse=True)
def _unchecked(monkeypatch):
    monkeypatch.delenv("PTOC_VERIFY_EACH_PASS", raising=False)
    monkeypatch.delenv(CHECK_HANDED, raising=False)
    _HandsOver.WRONG = None


def _prog():
    return parse_program(KERNEL, "k.ir")


def test_a_wrong_hand_over_is_caught_when_checked_after_every_pass():
    _HandsOver.WRONG = ScalarType(dtypes.INT32)  # `n` is an INDEX
    with pytest.raises(InternalError, match=r"pass HandsOver handed over wrong value types for 'k': value 'n' "
                       r"handed over as pl.Scalar\[pl.INT32\], inferred pl.Scalar\[pl.INDEX\]"):
        run_pipeline(_prog(), CompileContext(), passes=[_HandsOver])


def test_a_wrong_hand_over_is_caught_with_the_environment_in_a_run_checked_once(monkeypatch):
    _HandsOver.WRONG = ScalarType(dtypes.INT32)
    monkeypatch.setenv(CHECK_HANDED, "1")
    with pytest.raises(InternalError, match="pass HandsOver handed over wrong value types"):
        run_pipeline(_prog(), CompileContext(), passes=[_HandsOver], check_once=True)


def test_unchecked_the_handed_types_are_taken_as_they_are():
    # what makes the check above necessary: a run checked once trusts a hand-over; the types it serves
    # are the handed ones, which a fresh inference contradicts
    _HandsOver.WRONG = ScalarType(dtypes.INT32)
    ctx = CompileContext()
    cache = VerifyCache(ctx)
    out = run_pipeline(_prog(), ctx, passes=[_HandsOver], check_once=True, cache=cache)
    assert function_types(out, ctx, cache)["k"]["n"] == ScalarType(dtypes.INT32)
    assert function_types(out, ctx, VerifyCache(ctx))["k"]["n"] == ScalarType(dtypes.INDEX)


def test_a_right_hand_over_passes_the_check_and_is_not_inferred_again():
    ctx = CompileContext()
    cache = VerifyCache(ctx)
    run_pipeline(_prog(), ctx, passes=[_HandsOver], cache=cache)  # checked: compared with an inference
    checked = cache.checked
    cache2 = VerifyCache(ctx)
    out = run_pipeline(_prog(), ctx, passes=[_HandsOver], check_once=True, verify=False, cache=cache2)
    before = cache2.checked
    assert function_types(out, ctx, cache2)["k"] == function_types(out, ctx, VerifyCache(ctx))["k"]
    assert cache2.checked == before and checked >= 1  # served from the hand-over, not inferred


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_definitions_are_in_the_order_of_the_inferred_types(path):
    ctx = CompileContext()
    prog = run_pipeline(parse_program(path.read_text(encoding="utf-8"), path.name), ctx, check_once=True)
    types = function_types(prog, ctx, VerifyCache(ctx))
    for f in prog.functions:
        assert list(definitions(f)) == list(types[f.name]), f.name


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_the_types_handed_over_up_to_init_memref_are_those_a_fresh_inference_gives(path):
    # MaterializeTensorStrides (where it knows its input's types) and InitMemRef (every kernel it plans)
    from ptoc.ir.verifier import Verifier

    ctx = CompileContext()
    cache = VerifyCache(ctx)
    prog = parse_program(path.read_text(encoding="utf-8"), path.name)
    handed = []
    original = VerifyCache.hand_over

    def spy(self, f, program, types):
        handed.append((f, types))
        return original(self, f, program, types)

    with pytest.MonkeyPatch.context() as m:
        m.setattr(VerifyCache, "hand_over", spy)
        out = run_pipeline(prog, ctx, stop_after="InitMemRef", check_once=True, cache=cache)
    kernels = [f for f in out.functions if any(s.__class__.__name__ == "AssignStmt" and getattr(s.value, "op", "")
                                                 == "tile.alloc" for s in f.body)]
    final = [(f, types) for f, types in handed if any(g is f for g in out.functions)]  # (not those replaced since)
    assert {f.name for f in kernels} <= {f.name for f, _ in final} and kernels
    for f, types in final:
        fresh = Verifier(out, ctx, cache.op_typer).function_types(f)  # no cache: inferred from scratch
        assert list(types.items()) == list(fresh.items()), f.name
    # and the statements remembered from the hand-over give what a check without them gives
    again = run_pipeline(prog, ctx, check_once=True, cache=VerifyCache(ctx))
    assert again == run_pipeline(prog, ctx, check_once=True, cache=cache)
