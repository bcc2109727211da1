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
from ptoc.passes.manager import CHECK_HANDED, Instrument, Pass, run_pipeline

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


class _Duplicates(_HandsOver):
    """Test-only: as `_HandsOver`, but the rebuilt function assigns `n` twice (a broken invariant the
    right types do not show: the check of the function finds it, a comparison of the types does not)."""

    name = "Duplicates"

    def run(self, program, ctx):
        f = program.functions[0]
        types = dict(self.types(program, ctx)[f.name])
        g = replace(f, body=f.body[:1] + f.body)
        self.hand_over(g, types)
        return replace(program, functions=(g,) + program.functions[1:])


def _checks(monkeypatch) -> list[str]:
    """The names of the functions the verifier checks from now on (not served from the cache)."""
    from ptoc.ir.verifier import Verifier

    seen: list[str] = []
    original = Verifier.checked_function

    def spy(self, f):
        seen.append(f.name)
        return original(self, f)

    monkeypatch.setattr(Verifier, "checked_function", spy)
    return seen


def test_a_function_handed_over_from_a_clean_one_is_not_checked_again_at_the_end(monkeypatch):
    ctx = CompileContext()
    cache = VerifyCache(ctx)
    prog = _prog()
    seen = _checks(monkeypatch)
    out = run_pipeline(prog, ctx, passes=[_HandsOver], check_once=True, cache=cache)
    # the pass's own question (its input's types) is the only check; the final one skips the hand-over
    assert seen == ["k"] and cache.verified_clean(out.functions[0], out)


def test_a_function_handed_over_from_one_not_known_clean_is_checked_at_the_end(monkeypatch):
    ctx = CompileContext()
    cache = VerifyCache(ctx)
    prog = _prog()
    f = prog.functions[0]
    g = replace(f, body=f.body[:1] + f.body[1:])  # the function the pass gets: never checked
    prog = replace(prog, functions=(g,))
    seen = _checks(monkeypatch)

    class _GivenTypes(_HandsOver):
        def types(self, program, ctx):  # the types without a check of the input (as a pass may know them)
            return {"k": dict(definitions(program.functions[0]))}

    run_pipeline(prog, ctx, passes=[_GivenTypes], check_once=True, cache=cache, verify=True)
    assert seen == ["k"]  # the final check's: the input was not known clean


def test_checked_a_function_handed_over_is_clean_only_when_the_fresh_inference_finds_no_error(monkeypatch):
    # the right types of a broken function: the checked modes find the break exactly as before (the
    # fresh inference that compares the types checks the function; it is not marked clean)
    monkeypatch.setenv(CHECK_HANDED, "1")
    with pytest.raises(InternalError, match=r"IR invariant broken .*PTOC-E0102 'n' is assigned more than once"):
        run_pipeline(_prog(), CompileContext(), passes=[_Duplicates], check_once=True)
    monkeypatch.delenv(CHECK_HANDED)
    with pytest.raises(InternalError, match=r"IR invariant broken after pass Duplicates: PTOC-E0102 'n'"):
        run_pipeline(_prog(), CompileContext(), passes=[_Duplicates])


def test_unchecked_a_function_handed_over_from_a_clean_one_is_trusted():
    # what the checked modes are for: a run checked once takes the pass's word for the function it hands
    # over from a clean one (the break is not looked for), where a run that checks finds it (above)
    out = run_pipeline(_prog(), CompileContext(), passes=[_Duplicates], check_once=True)
    assert [s.target.name for s in out.functions[0].body[:2]] == ["n", "n"]


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

    def spy(self, f, program, types, clean=False):
        handed.append((f, types))
        return original(self, f, program, types, clean)

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


class _Programs(Instrument):
    """Each pass's input and output program, by pass name (the last run of a name)."""

    keeps_check_once = True

    def __init__(self):
        self.seen: dict[str, tuple] = {}
        self._before = None

    def before_pass(self, index, p, program):
        self._before = program

    def after_pass(self, index, p, program, seconds):
        self.seen[p.name] = (self._before, program)


def _spied_run(prog, ctx, cache, **kw):
    """`run_pipeline` (unchecked: nothing compares the hand-overs) with every hand-over the pipeline takes
    recorded as (function, program it is a function of, types), and each pass's input and output."""
    handed = []
    original = VerifyCache.hand_over

    def spy(self, f, program, types, clean=False):
        handed.append((f, program, types))
        return original(self, f, program, types, clean)

    programs = _Programs()
    with pytest.MonkeyPatch.context() as m:
        m.setattr(VerifyCache, "hand_over", spy)
        out = run_pipeline(prog, ctx, check_once=True, cache=cache, instruments=[programs], **kw)
    return out, handed, programs.seen


def _assert_fresh(handed, ctx, cache) -> None:
    from ptoc.ir.verifier import Verifier

    for f, program, types in handed:
        fresh = Verifier(program, ctx, cache.op_typer).function_types(f)  # no cache: inferred from scratch
        assert list(types.items()) == list(fresh.items()), f.name


def _changed(seen, name) -> set[str]:
    before, after = seen[name]
    old = {f.name: f for f in before.functions}
    return {f.name for f in after.functions if old.get(f.name) is not f}


MEMORY_PASSES = ("MemoryReuse", "AllocateMemoryAddr")


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_the_memory_passes_hand_over_every_function_they_change_with_the_types_a_fresh_inference_gives(path):
    ctx = CompileContext()
    cache = VerifyCache(ctx)
    prog = parse_program(path.read_text(encoding="utf-8"), path.name)
    out, handed, seen = _spied_run(prog, ctx, cache)
    _assert_fresh(handed, ctx, cache)
    for name in MEMORY_PASSES:
        after = seen[name][1]
        assert _changed(seen, name) <= {f.name for f, program, _ in handed if program is after}, name
    assert _changed(seen, "AllocateMemoryAddr")  # every example has a kernel to place
    assert out == run_pipeline(prog, ctx, check_once=True, cache=VerifyCache(ctx))


ALIAS_KERNEL = """
@pl.program
class p:
    @pl.function(type=pl.FunctionType.AIV)
    def k(self, x: pl.Tensor[[64, 64], pl.FP32], out: pl.Out[pl.Tensor[[64, 64], pl.FP32]]) -> pl.Tensor[[64, 64], pl.FP32]:
        mem_vec_2: pl.Ptr = pl.tile.alloc(pl.Mem.Vec, 16384)
        mem_vec_3: pl.Ptr = pl.tile.alloc(pl.Mem.Vec, 16384)
        x0: pl.Tile[[64, 64], pl.FP32, pl.MemRef(mem_vec_2, 0, 16384), pl.Mem.Vec] = pl.tile.load(x, [0, 0], [64, 64], target_memory=pl.Mem.Vec)
        for i, (acc,) in pl.range(0, 4, 1, init_values=(x0,)):
            nxt: pl.Tile[[64, 64], pl.FP32, pl.MemRef(mem_vec_3, 0, 16384), pl.Mem.Vec] = pl.tile.add(acc, acc)
            carried: pl.Tile[[64, 64], pl.FP32, pl.MemRef(mem_vec_2, 0, 16384), pl.Mem.Vec] = pl.yield_(nxt)
        out_1: pl.Tensor[[64, 64], pl.FP32] = pl.tile.store(carried, [0, 0], out)
        return out_1
"""


def _alias_passes():
    from ptoc.passes.manager import load_pass

    return [load_pass(n) for n in ("MaterializeSemanticAliases", *MEMORY_PASSES)]


def test_the_aliases_retargeted_are_handed_over_with_the_types_a_fresh_inference_gives():
    # (PyPTO's form after its InitMemRef: the loop's yielded tile in a buffer of its own)
    ctx = CompileContext()
    cache = VerifyCache(ctx)
    out, handed, seen = _spied_run(parse_program(ALIAS_KERNEL, "k.ir"), ctx, cache, passes=_alias_passes())
    _assert_fresh(handed, ctx, cache)
    for name in ("MaterializeSemanticAliases", *MEMORY_PASSES):
        after = seen[name][1]
        assert _changed(seen, name) == {"k"}, name
        assert any(program is after for _, program, _ in handed), name


def _corrupt_memory_reuse(m):
    import ptoc.passes.MemoryReuse as mod

    m.setattr(mod, "_renamed", lambda ref, remap: ref)  # the merged buffers' names left in the types


def _corrupt_allocate_memory_addr(m):
    import ptoc.passes.AllocateMemoryAddr as mod

    place = mod._place

    def moved(f, env, arch):  # a placement that also moves a tile's MemRef, which the hand-over ignores
        g = place(f, env, arch)
        return mod._Rebase({b: -32 for b in {s.target.name for s in mod.allocs(g.body)}}).mutate(g)

    m.setattr(mod, "_place", moved)


def _corrupt_materialize_semantic_aliases(m):
    import ptoc.passes.MaterializeSemanticAliases as mod

    retype = mod._retype
    m.setattr(mod, "_retype", lambda body, memref, env, retyped: retype(body, memref, env, {}))


@pytest.mark.parametrize(("name", "corrupt", "text"), [
    ("MemoryReuse", _corrupt_memory_reuse, (ROOT / "examples" / "vector_add.ir").read_text(encoding="utf-8")),
    ("AllocateMemoryAddr", _corrupt_allocate_memory_addr,
     (ROOT / "examples" / "vector_add.ir").read_text(encoding="utf-8")),
    ("MaterializeSemanticAliases", _corrupt_materialize_semantic_aliases, ALIAS_KERNEL),
])
@pytest.mark.parametrize("checked", ["each pass", "environment"])
def test_a_wrong_hand_over_from_a_memory_pass_is_caught(monkeypatch, name, corrupt, text, checked):
    corrupt(monkeypatch)
    passes = _alias_passes() if text is ALIAS_KERNEL else None
    if checked == "environment":
        monkeypatch.setenv(CHECK_HANDED, "1")
    with pytest.raises(InternalError, match=rf"pass {name} handed over wrong value types for '\w+': value '\w+' "
                       r"handed over as pl.Tile\["):
        run_pipeline(parse_program(text, "k.ir"), CompileContext(), passes=passes,
                     check_once=checked == "environment")
