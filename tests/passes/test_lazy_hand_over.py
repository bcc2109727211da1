"""`VerifyCache.hand_over` takes a pass's value types for a function at once, but makes the entry of each of
its assignments (what a check of the statement would remember: the types of the names it reads, its
target's type) only when a check first asks for that statement. The oracles: a fresh inference of the
handed function without any cache (every entry made must agree with it), and the eager form (every
entry made at the hand-over), which must lower every example and corpus program to the same program."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from ptoc.context import CompileContext
from ptoc.diagnostics import CompileError
from ptoc.frontend.parser import parse_program
from ptoc.ir import verifier
from ptoc.ir.printer import print_program
from ptoc.ir.verifier import _UNKNOWN, Verifier, VerifyCache, _assignments, _Scope
from ptoc.passes.manager import CHECK_HANDED, run_pipeline

from bundled_programs import PROGRAMS, program_arch  # (tests/ is on sys.path: tests/conftest.py)


KERNEL = """
@pl.function(type=pl.FunctionType.InCore)
def k(a: pl.Tensor[[16, 16], pl.FP32], b: pl.Tensor[[16, 16], pl.FP32]) -> pl.Tensor[[16, 16], pl.FP32]:
    c: pl.Tensor[[16, 16], pl.FP32] = pl.tensor.add(a, b)
    d: pl.Tensor[[16, 16], pl.FP32] = pl.tensor.mul(c, a)
    return d
"""


@pytest.fixture(autouse=True)
def _as_the_compiler_runs(monkeypatch):
    # the compiler's own mode: checked once at the end, hand-overs trusted (the checked modes compare
    # each hand-over with an inference, which asks for every statement at once)
    monkeypatch.delenv("PTOC_VERIFY_EACH_PASS", raising=False)
    monkeypatch.delenv(CHECK_HANDED, raising=False)


def test_an_entry_is_made_when_a_check_asks_and_holds_the_handed_types():
    ctx = CompileContext()
    program = parse_program(KERNEL, "k.ir")
    f = program.functions[0]
    cache = VerifyCache(ctx)
    types = Verifier(program, ctx, cache.op_typer).function_types(f)  # (no cache: nothing remembered)
    c_stmt, d_stmt = list(_assignments(f.body))
    cache.hand_over(f, program, types)
    memo = cache.memo("k")
    assert memo.get(id(c_stmt)) is None and memo.get(id(d_stmt)) is None  # nothing made yet
    scope = _Scope(None)
    scope.names.update(types)
    # asked with the handed types in scope: the handed target type, the very object
    assert cache.assigned_type(d_stmt, scope, memo) is types["d"]
    reads = memo.get(id(d_stmt))[1]
    assert sorted(n for n, _ in reads) == ["a", "c"] and all(t is types[n] for n, t in reads)
    # a read of another type object: not known (the statement is checked as usual)
    other = _Scope(None)
    other.names.update(types, c=replace(types["c"]))  # an equal type, another object
    assert other.names["c"] is not types["c"]
    assert cache.assigned_type(d_stmt, other, memo) is _UNKNOWN
    # the other statement is made when asked, from the same hand-over
    assert cache.assigned_type(c_stmt, scope, memo) is types["c"]


def _lower(path: Path, monkeypatch, eager: bool):
    ctx = CompileContext(arch=program_arch(path))
    made: list = []  # (statement, entry made, function handed over, program it was a function of)
    programs: dict[int, object] = {}
    original_hand_over, original_take = VerifyCache.hand_over, verifier._take_handed

    def hand_over(self, f, prog, types, clean=False):
        programs[id(f)] = (f, prog)
        original_hand_over(self, f, prog, types, clean)
        if eager:  # the eager form: every assignment's entry made now
            memo = self.memo(f.name)
            for s in list(_assignments(f.body)):
                if memo.handed is not None:
                    verifier._take_handed(s, memo)

    def take(s, memo):
        f = memo.handed[1]
        before = memo.cur.get(id(s))
        original_take(s, memo)
        after = memo.cur.get(id(s))
        if after is not None and after is not before:
            made.append((s, after, f, programs[id(f)][1]))

    monkeypatch.setattr(VerifyCache, "hand_over", hand_over)
    monkeypatch.setattr(verifier, "_take_handed", take)
    try:
        program = parse_program(path.read_text(encoding="utf-8"), path.name, ctx=ctx)
        cache = VerifyCache(ctx)
        out = run_pipeline(program, ctx, check_once=True, cache=cache)
        # a check of every function of the output, as the pipeline's own final check made of each before it
        # skipped the functions handed over clean: it asks for every statement still waiting
        for f in out.functions:
            Verifier(out, ctx, cache.op_typer, cache).checked_function(f)
    except CompileError as e:
        out = sorted((d.code, str(d.span)) for d in e.diagnostics)
    monkeypatch.undo()
    return ctx, out, made


@pytest.mark.parametrize("path", PROGRAMS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_the_entries_made_from_a_hand_over_agree_with_a_fresh_inference(path, monkeypatch):
    ctx, out, made = _lower(path, monkeypatch, eager=False)
    if isinstance(out, list):
        pytest.skip("the program has user errors on this target")
    fresh: dict[int, dict] = {}
    for s, (_, reads, target_type), f, prog in made:
        if id(f) not in fresh:
            fresh[id(f)] = Verifier(prog, ctx, VerifyCache(ctx).op_typer).function_types(f)
        types = fresh[id(f)]
        assert types[s.target.name] == target_type, (f.name, s.target.name)
        assert all(types[n] == t for n, t in reads), (f.name, s.target.name)
    if path.parent.name == "examples":
        assert made  # (every example has a kernel whose memory is planned: InitMemRef hands its types over)


@pytest.mark.parametrize("path", PROGRAMS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_made_when_asked_or_at_the_hand_over_the_program_lowers_alike(path, monkeypatch):
    _, lazy, _ = _lower(path, monkeypatch, eager=False)
    _, eager, _ = _lower(path, monkeypatch, eager=True)
    if isinstance(lazy, list):
        assert lazy == eager
    else:
        assert not isinstance(eager, list) and print_program(lazy) == print_program(eager) and lazy == eager
