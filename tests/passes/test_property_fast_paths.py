"""The property checks' fast routes give the verdicts of the general ones they replace: the `ssa` property's
test for names read after their loop (`properties.escapes`, which gathers the reads per loop nest) against
ConvertToSSA's own walk (`_has_escapes`), on hand-written cases whose answer follows from the rule, and
on every function of the examples and corpus programs after every pass of the pipeline."""

from __future__ import annotations

import textwrap

import pytest

from ptoc.context import CompileContext
from ptoc.diagnostics import CompileError
from ptoc.frontend.parser import parse_program
from ptoc.passes.ConvertToSSA import _has_escapes, ssa_violations
from ptoc.passes.manager import PROPERTIES, Instrument, _import_properties, run_pipeline
from ptoc.passes.properties import escapes

from bundled_programs import PROGRAMS  # (tests/ is on sys.path: tests/conftest.py)

CTX = CompileContext()
T = "pl.Tensor[[64], pl.FP32]"


def fn(body: str, params: str = f"x: {T}", ret: str = T) -> str:
    body = textwrap.indent(textwrap.dedent(body).strip("\n"), " " * 8)
    return f"@pl.program\nclass p:\n    @pl.function\n    def main(self, {params}) -> {ret}:\n{body}\n"


def main_of(text: str):
    prog = parse_program(text, "p.ir", ctx=CTX)
    return prog, next(f for f in prog.functions if f.name == "main")


# (body, a name assigned inside a loop is read outside it), decided by reading each program
CASES = {
    "read after its loop": ("""
        for i in pl.range(4):
            last = pl.add(x, x)
        return last
    """, True),
    "read inside its loop only": ("""
        for i, (acc,) in pl.range(4, init_values=(x,)):
            t = pl.add(acc, x)
            u = pl.mul(t, t)
            acc_1 = pl.yield_(u)
        return acc_1
    """, False),
    "no loop": ("""
        t = pl.add(x, x)
        return t
    """, False),
    "read in the outer loop, after the inner loop that assigns it": ("""
        for i, (acc,) in pl.range(2, init_values=(x,)):
            for j in pl.range(3):
                v = pl.add(acc, x)
            w = pl.mul(v, x)
            acc_1 = pl.yield_(w)
        return acc_1
    """, True),
    "assigned in the outer loop, read in the inner one": ("""
        for i, (acc,) in pl.range(2, init_values=(x,)):
            v = pl.add(acc, x)
            for j, (b,) in pl.range(3, init_values=(v,)):
                w = pl.mul(v, b)
                b_1 = pl.yield_(w)
            acc_1 = pl.yield_(b_1)
        return acc_1
    """, False),
    "read by a later loop's bounds": ("""
        for i in pl.range(4):
            n = 2
        for j, (acc,) in pl.range(n, init_values=(x,)):
            acc_1 = pl.yield_(acc)
        return acc_1
    """, True),
    "read in the yield of an if after the loop": ("""
        for i in pl.range(4):
            v = pl.add(x, x)
        if 1 > 0:
            r = pl.yield_(v)
        else:
            r = pl.yield_(x)
        return r
    """, True),
    "a name a split_aiv region assigns, read after it": ("""
        for lane in pl.split_aiv(2, mode=pl.SplitMode.UP_DOWN):
            v = pl.add(x, x)
        return v
    """, False),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_names_read_after_their_loop(name):
    body, expected = CASES[name]
    prog, main = main_of(fn(body))
    assert escapes(main) is expected
    assert _has_escapes(main) is expected
    _import_properties()
    assert PROPERTIES["ssa"](prog, CTX, None) == ssa_violations(prog)


def test_the_ssa_check_names_a_name_assigned_twice_before_any_escape():
    prog, _ = main_of(fn("""
        for i in pl.range(4):
            last = pl.add(x, x)
        last = pl.add(last, x)
        return last
    """))
    _import_properties()
    got = PROPERTIES["ssa"](prog, CTX, None)
    assert got == ["main: 'last' is assigned more than once (line 7)"] == ssa_violations(prog)


class _Compare(Instrument):
    """After every pass (and for the input): both routes agree on every function."""

    def __init__(self):
        self.functions = 0
        self.escaping = 0

    def before_pipeline(self, program, ctx):
        self.compare(program)

    def after_pass(self, index, p, program, seconds):
        self.compare(program)

    def skipped_pass(self, index, p, program, reason):
        self.compare(program)

    def compare(self, program):
        for f in program.functions:
            want = _has_escapes(f)
            assert escapes(f) is want, f.name
            self.functions += 1
            self.escaping += want
        assert PROPERTIES["ssa"](program, CTX, None) == ssa_violations(program)


def _accepted_programs():
    """(program, its context) of each example and corpus program the front end accepts."""
    assert len(PROGRAMS) > 30
    for path in PROGRAMS:
        ctx = CompileContext()
        try:
            yield parse_program(path.read_text(), str(path), ctx=ctx), ctx
        except CompileError:
            continue  # (a corpus program the front end rejects)


def test_both_routes_agree_on_the_examples_and_the_corpus_after_every_pass():
    _import_properties()
    seen = _Compare()
    for prog, ctx in _accepted_programs():
        try:
            run_pipeline(prog, ctx, instruments=[seen])
        except CompileError:
            pass  # what the pipeline compared up to the user's error stands
    # programs as written carry names out of loops; the pipeline's output does not
    assert seen.functions > 1000 and seen.escaping > 0


class _CompareValueTiles(Instrument):
    """After every pass (and for the input): the property checks' value types (the kernels', typed alone)
    and value tiles (remembered per program in the pipeline's cache) equal those read off a whole-program
    `function_types` with a cache of their own, as the checks read them before."""

    keeps_check_once = True

    def __init__(self):
        self.tiles = 0
        self.cache = None

    def before_pipeline(self, program, ctx):
        self.compare(program, ctx)

    def after_pass(self, index, p, program, seconds):
        self.compare(program, ctx=self.ctx)

    def skipped_pass(self, index, p, program, reason):
        self.compare(program, ctx=self.ctx)

    def compare(self, program, ctx):
        from ptoc.ir.nodes import TileType
        from ptoc.ir.verifier import VerifyCache, function_types
        from ptoc.passes.properties import _flat, kernels, value_tiles, value_types

        self.ctx = ctx
        env = function_types(program, ctx, VerifyCache(ctx))
        want_types = {f.name: env[f.name] for f in kernels(program)}
        want_tiles = [(k, n, t) for k, vals in want_types.items() for n, ty in vals.items() for t in _flat(ty)
                      if isinstance(t, TileType)]
        assert value_types(program, ctx, self.cache) == want_types
        first = value_tiles(program, ctx, self.cache)
        assert first == want_tiles and value_tiles(program, ctx, self.cache) == want_tiles
        assert value_tiles(program, ctx, None) == want_tiles
        self.tiles += len(want_tiles)


def test_value_types_and_tiles_agree_with_the_whole_programs_types_on_the_examples_and_the_corpus():
    from ptoc.ir.verifier import VerifyCache

    seen = _CompareValueTiles()
    for prog, ctx in _accepted_programs():
        seen.cache = VerifyCache(ctx)
        try:
            run_pipeline(prog, ctx, instruments=[seen], cache=seen.cache, check_once=True)
        except CompileError:
            pass  # what was compared up to the user's error stands
    assert seen.tiles > 1000
