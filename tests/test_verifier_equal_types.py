"""A check of a new version of a function gives a value whose type it works out again, and finds equal to
the type the value had in the version checked (or handed over) before, that very type object
(`Verifier.define`), so the statements after it that read the value are not checked again. The check's
verdicts and types are those of a check without any cache."""

from __future__ import annotations

from dataclasses import replace

from ptoc.context import CompileContext
from ptoc.diagnostics import CompileError
from ptoc.frontend.parser import parse_program
from ptoc.ir import verifier
from ptoc.ir.dtypes import INDEX
from ptoc.ir.nodes import ConstInt, ListExpr
from ptoc.ir.verifier import Verifier, VerifyCache, function_types
from ptoc.passes.manager import run_pipeline

from bundled_programs import PROGRAMS, program_arch  # (tests/ is on sys.path: tests/conftest.py)

T = "pl.Tile[[32, 128], pl.FP32, pl.Mem.Vec]"
G = "pl.Tensor[[32, 128], pl.FP32]"
TEXT = (
    "import pypto.language as pl\n\n@pl.program\nclass p:\n"
    "    @pl.function(type=pl.FunctionType.AIV)\n"
    f"    def k(self, x: {G}, out: pl.Out[{G}]) -> {G}:\n"
    "        a = pl.tile.load(x, [0, 0], [32, 128], target_memory=pl.Mem.Vec)\n"
    "        b = pl.tile.add(a, a)\n"
    "        c = pl.tile.mul(b, a)\n"
    f"        o: {G} = pl.tile.store(c, [0, 0], out)\n"
    "        return o\n"
)


def _counting_typer(monkeypatch) -> list:
    """Count the operator typer's answers (the cache and every check get the same counting typer)."""
    calls = []
    real = verifier._default_op_typer()

    def typer(call, args, kwargs, ctx):
        calls.append(call.op)
        return real(call, args, kwargs, ctx)

    monkeypatch.setattr(verifier, "_default_op_typer", lambda: typer)
    return calls


def _checked_once(monkeypatch):
    """TEXT parsed and checked once through a fresh cache, with a counting typer: (its calls, the context, the
    program, the cache, the types of `k`)."""
    calls = _counting_typer(monkeypatch)
    ctx = CompileContext()
    prog = parse_program(TEXT, "k.ir", ctx=ctx)
    cache = VerifyCache(ctx)
    calls.clear()  # (the front end's own check)
    return calls, ctx, prog, cache, function_types(prog, ctx, cache)["k"]


def test_a_rewritten_statement_of_an_equal_type_leaves_the_statements_after_it_unchecked(monkeypatch):
    calls, ctx, prog, cache, before = _checked_once(monkeypatch)
    assert calls == ["tile.load", "tile.add", "tile.mul", "tile.store"]
    # a pass rewrites the load's offsets (`[0, 0]` -> `[0 + 0, 0]` would do as well): a new statement
    k = prog.functions[0]
    load = k.body[0]
    offsets = ListExpr((ConstInt(0, INDEX), ConstInt(0, INDEX)))
    k2 = replace(k, body=(replace(load, value=replace(load.value, args=(load.value.args[0], offsets)
                                                      + load.value.args[2:])),) + k.body[1:])
    prog2 = replace(prog, functions=(k2,))
    calls.clear()
    after = function_types(prog2, ctx, cache)["k"]
    assert calls == ["tile.load"]  # the load alone is typed again: add, mul and store are remembered
    assert after["a"] is before["a"]
    assert after == before == Verifier(prog2, ctx, verifier._default_op_typer()).function_types(k2)


def test_an_unequal_type_is_not_reused(monkeypatch):
    calls, ctx, prog, cache, before = _checked_once(monkeypatch)
    k = prog.functions[0]
    load = k.body[0]
    shapes = ListExpr((ConstInt(16, INDEX), ConstInt(128, INDEX)))  # a smaller tile: a type of its own
    k2 = replace(k, body=(replace(load, value=replace(load.value, args=load.value.args[:2] + (shapes,))),)
                 + k.body[1:])
    prog2 = replace(prog, functions=(k2,))
    calls.clear()
    after = function_types(prog2, ctx, cache)["k"]
    assert calls == ["tile.load", "tile.add", "tile.mul", "tile.store"]
    assert after["a"] != before["a"]
    assert after == Verifier(prog2, ctx, verifier._default_op_typer()).function_types(k2)


def test_the_pipelines_types_are_a_fresh_inferences_on_every_example_and_corpus_program():
    """The pipeline's cache (whose checks reuse equal types of earlier versions) holds, for every function of
    its output, the types a check without any cache infers, and so do the checks of the front end."""
    functions = 0
    for path in PROGRAMS:
        ctx = CompileContext(arch=program_arch(path))
        try:
            prog = parse_program(path.read_text(encoding="utf-8"), path.name, ctx=ctx)
            cache = VerifyCache(ctx)
            out = run_pipeline(prog, ctx, check_once=True, cache=cache)
        except CompileError:
            continue
        got = function_types(out, ctx, cache)
        fresh = Verifier(out, ctx, verifier._default_op_typer())
        for f in out.functions:
            assert list(got[f.name].items()) == list(fresh.function_types(f).items()), (path.name, f.name)
            functions += 1
    assert functions > 80
