"""The front end checks a program as written; a function of it that its SSA form's check would check the
same way (no name assigned twice, no name read where only the program as written sees it) keeps that
check in the compile's cache, so the pipeline's first steps (its input properties, the first passes) do
not infer its value types again. What is kept must be exactly what a fresh check of the SSA form finds."""

from __future__ import annotations

from pathlib import Path

import pytest

from ptoc.context import CompileContext
from ptoc.driver import frontend
from ptoc.ir.verifier import Verifier, _default_op_typer, kept_types, verify_program
from ptoc.passes.manager import input_properties

ROOT = Path(__file__).resolve().parent.parent
PROGRAMS = sorted((ROOT / "examples").glob("*.ir")) + sorted((ROOT / "tests" / "corpus" / "raw").glob("*.ir"))

_T = "pl.Tile[[32, 128], pl.FP32, pl.Mem.Vec]"
_G = "pl.Tensor[[128, 128], pl.FP32]"
_SIG = f"(self, a: {_G}, n: pl.INDEX, out: pl.Out[{_G}]) -> {_G}:"
_LOAD = "pl.tile.load(a, [{}, 0], [32, 128], [32, 128], target_memory=pl.Mem.Vec)"
_STORE = f"        o: {_G} = pl.tile.store(t, [0, 0], out)\n        return o\n"


def _fn(name: str, body: str) -> str:
    return f"    @pl.function(type=pl.FunctionType.InCore)\n    def {name}{_SIG}\n{body}"


# Functions valid as written whose SSA form's check differs: each reads `t` where only the program as
# written sees it, or assigns it twice (ConvertToSSA renames them apart).
AS_WRITTEN = {
    "after_loop": (f"        for i in pl.range(0, 128, 32):\n            t: {_T} = {_LOAD.format('i')}\n" + _STORE,
                   "PTOC-E0101"),
    "after_if": (f"        if n > 0:\n            t: {_T} = {_LOAD.format(0)}\n"
                 f"        else:\n            t: {_T} = {_LOAD.format(32)}\n" + _STORE, "PTOC-E0102"),
    "after_then": (f"        if n > 0:\n            t: {_T} = {_LOAD.format(0)}\n" + _STORE, "PTOC-E0101"),
    "twice": (f"        t: {_T} = {_LOAD.format(0)}\n        t: {_T} = pl.tile.add(t, t)\n" + _STORE, "PTOC-E0102"),
}
# the same shapes of code, in SSA form: checked the same either way
SSA = {
    "loop_inside": (f"        for i in pl.range(0, 128, 32):\n            u: {_T} = {_LOAD.format('i')}\n"
                    f"            v: {_T} = pl.tile.add(u, u)\n        t: {_T} = {_LOAD.format(0)}\n" + _STORE),
    "branches_inside": (f"        if n > 0:\n            u: {_T} = {_LOAD.format(0)}\n"
                        f"        else:\n            w: {_T} = {_LOAD.format(32)}\n"
                        f"        t: {_T} = {_LOAD.format(0)}\n" + _STORE),
}


def _program() -> str:
    funcs = [_fn(n, b) for n, (b, _) in AS_WRITTEN.items()] + [_fn(n, b) for n, b in SSA.items()]
    return "import pypto.language as pl\n\n@pl.program\nclass p:\n" + "".join(funcs)


def _kept(program, ctx) -> dict:
    """function name -> the value types the front end's check left in the compile's cache for it"""
    cache = kept_types(program, ctx)
    assert cache is not None
    token = cache.token(program)
    out = {}
    for f in program.functions:
        known = cache.lookup(f, program, token)
        if known is not None:
            assert known[1]  # kept only when its SSA check is clean
            out[f.name] = known[0]
    return out


def _lines(name: str, body: str) -> range:
    """The line numbers of the body of function `name` in `_program()`."""
    start = next(i for i, ln in enumerate(_program().split("\n"), 1) if f"def {name}(" in ln)
    return range(start + 1, start + 1 + body.count("\n"))


def test_only_functions_checked_alike_in_ssa_form_are_kept():
    ctx = CompileContext()
    prog = frontend(_program(), "p.ir", ctx)
    assert sorted(_kept(prog, ctx)) == sorted(SSA)
    # why the others are not: the SSA form's check of the program as written reports them, and not the kept
    diags = [d for d in verify_program(prog, ctx=ctx, ssa=True) if d.severity == "error"]
    for name, (body, code) in AS_WRITTEN.items():
        assert any(d.code == code and d.span.line in _lines(name, body) for d in diags), name
    for name, body in SSA.items():
        assert not any(d.span.line in _lines(name, body) for d in diags), name


@pytest.mark.parametrize("path", PROGRAMS, ids=lambda p: p.name)
def test_kept_types_are_those_a_fresh_ssa_check_finds(path: Path):
    ctx = CompileContext()
    try:
        prog = frontend(path.read_text(), str(path), ctx)
    except Exception:  # noqa: BLE001  (a program the front end rejects keeps nothing)
        pytest.skip("the front end rejects it")
    kept = _kept(prog, ctx)
    fresh = Verifier(prog, ctx, _default_op_typer(), None, ssa=True)  # no cache: inferred from scratch
    for f in prog.functions:
        if f.name not in kept:
            continue
        first = len(fresh.diags)
        types = dict(fresh.checked_function(f))
        assert not [d for d in fresh.diags[first:] if d.severity == "error"], f.name
        assert list(types) == list(kept[f.name]), f.name
        assert types == kept[f.name], f.name


def test_the_pipeline_input_properties_infer_nothing_again():
    ctx = CompileContext()
    prog = frontend((ROOT / "examples" / "nz_weight_int8.ir").read_text(), "nz.ir", ctx)
    cache = kept_types(prog, ctx)
    kernels = [f.name for f in prog.functions if f.func_type in ("InCore", "AIC", "AIV")]
    assert kernels and set(kernels) <= set(_kept(prog, ctx))
    before = cache.checked
    with cache.running():
        have = input_properties(prog, ctx, cache)
    assert "structured" in have
    assert cache.checked == before  # every value type came from the front end's check
