"""StampTfreeSplit: each tfree gets the split= (and id=) of the tpop that made its tile. Expected programs
are written by hand from that rule; the malformed frees are diagnostics."""

import textwrap

import pytest

from ptoc.context import CompileContext
from ptoc.diagnostics import CompileError
from ptoc.driver import frontend
from ptoc.ir.printer import print_program
from ptoc.passes.manager import check_invariants
from ptoc.passes.StampTfreeSplit import StampTfreeSplit

CTX = CompileContext()
V = "pl.Tile[[16, 32], pl.FP32, pl.Mem.Vec]"
M = "pl.Tile[[16, 32], pl.FP16, pl.Mem.Mat]"


def aiv(body: str, setup: str = "dir_mask=1") -> str:
    body = textwrap.indent(textwrap.dedent(body).strip("\n"), " " * 8)
    return ("import pypto.language as pl\n@pl.program\nclass P:\n    @pl.function(type=pl.FunctionType.AIV)\n"
            "    def k(self, out: pl.Out[pl.Tensor[[16, 32], pl.FP32]]) -> pl.Tensor[[16, 32], pl.FP32]:\n"
            "        ring: pl.Scalar[pl.INT32] = pl.system.reserve_buffer(name=\"c2v\", size=8192, base=-1)\n"
            f"        pl.system.aiv_initialize_pipe(c2v_consumer_buf=ring, {setup}, slot_size=2048)\n"
            f"{body}\n        return o\n")


def run(text: str):
    prog = frontend(text, "before.ir", CTX)
    out = StampTfreeSplit().run(prog, CTX)
    check_invariants(out, CTX, StampTfreeSplit())
    return prog, out


def assert_becomes(before: str, expected: str):
    _, out = run(before)
    want = frontend(expected, "expected.ir", CTX)
    assert out == want, f"got:\n{print_program(out)}\nexpected:\n{print_program(want)}"


def test_a_free_takes_the_split_of_its_pop():
    assert_becomes(aiv(f"""
        y: {V} = pl.tile.tpop_from_aic(split=1)
        o: pl.Tensor[[16, 32], pl.FP32] = pl.tile.store(y, [0, 0], out)
        pl.system.tfree_to_aic(y)
    """), aiv(f"""
        y: {V} = pl.tile.tpop_from_aic(split=1)
        o: pl.Tensor[[16, 32], pl.FP32] = pl.tile.store(y, [0, 0], out)
        pl.system.tfree_to_aic(y, split=1)
    """))


def test_a_pop_without_split_gives_split_0_and_its_pipe_id_follows():
    assert_becomes(aiv(f"""
        y: {V} = pl.tile.tpop_from_aic(id=2)
        o: pl.Tensor[[16, 32], pl.FP32] = pl.tile.store(y, [0, 0], out)
        pl.system.tfree_to_aic(y)
    """, setup="dir_mask=1, id=2"), aiv(f"""
        y: {V} = pl.tile.tpop_from_aic(id=2)
        o: pl.Tensor[[16, 32], pl.FP32] = pl.tile.store(y, [0, 0], out)
        pl.system.tfree_to_aic(y, split=0, id=2)
    """, setup="dir_mask=1, id=2"))


def test_frees_inside_a_loop_are_stamped_from_the_pop_of_the_same_iteration():
    loop = f"""
        for i, (acc,) in pl.range(2, init_values=(out,)):
            y: {V} = pl.tile.tpop_from_aic(split=2)
            r: pl.Tensor[[16, 32], pl.FP32] = pl.tile.store(y, [0, 0], acc)
            pl.system.tfree_to_aic(y{{}})
            o = pl.yield_(r)
    """
    assert_becomes(aiv(loop.format("")), aiv(loop.format(", split=2")))


def test_a_free_already_naming_its_pops_id_keeps_it():
    text = aiv(f"""
        y: {V} = pl.tile.tpop_from_aic(split=0, id=1)
        o: pl.Tensor[[16, 32], pl.FP32] = pl.tile.store(y, [0, 0], out)
        pl.system.tfree_to_aic(y, id=1)
    """, setup="dir_mask=1, id=1")
    _, out = run(text)
    assert "pl.system.tfree_to_aic(y, split=0, id=1)" in print_program(out)


def test_a_function_without_frees_is_returned_as_it_is():
    prog, out = run(aiv(f"""
        y: {V} = pl.tile.tpop_from_aic(split=0)
        o: pl.Tensor[[16, 32], pl.FP32] = pl.tile.store(y, [0, 0], out)
    """))
    assert out is prog


def diagnostic(text: str):
    with pytest.raises(CompileError) as e:
        run(text)
    return e.value.diagnostics[0]


def test_a_free_of_a_tile_no_pop_made_is_reported():
    d = diagnostic(aiv(f"""
        y: {V} = pl.tile.create([16, 32], dtype=pl.FP32, target_memory=pl.Mem.Vec)
        o: pl.Tensor[[16, 32], pl.FP32] = pl.tile.store(y, [0, 0], out)
        pl.system.tfree_to_aic(y)
    """))
    assert d.code == "PTOC-E0720" and "no such pop" in d.message and d.span.line == 10


def test_a_free_toward_the_wrong_core_is_reported():
    d = diagnostic(aiv(f"""
        y: {M} = pl.tile.tpop_from_aiv(split=0)
        pl.system.tfree_to_aic(y)
        o: pl.Tensor[[16, 32], pl.FP32] = out
    """))
    assert d.code == "PTOC-E0720" and "comes from tile.tpop_from_aiv" in d.message


def test_a_free_naming_another_pipe_is_reported():
    d = diagnostic(aiv(f"""
        y: {V} = pl.tile.tpop_from_aic(split=0, id=1)
        o: pl.Tensor[[16, 32], pl.FP32] = pl.tile.store(y, [0, 0], out)
        pl.system.tfree_to_aic(y, id=0)
    """, setup="dir_mask=1, id=1"))
    assert d.code == "PTOC-E0721" and "pipe id 0 differs from the id 1" in d.message


def test_the_emitted_pto_of_a_split_example_is_unchanged_by_the_stamp():
    # the .pto emitter already read a free's split from its pop: stamping it on the free changes nothing
    from pathlib import Path

    from ptoc.codegen.pto import emit_module
    from ptoc.driver import lower
    from ptoc.passes.manager import PIPELINE

    text = (Path(__file__).resolve().parents[2] / "examples" / "linear_relu_split.ir").read_text()
    a5 = CompileContext(arch="a5")
    stamped = lower(frontend(text, "x.ir", a5), a5).program
    kept = list(PIPELINE)
    try:
        PIPELINE.remove(("layout", "StampTfreeSplit"))
        unstamped = lower(frontend(text, "x.ir", a5), a5).program
    finally:
        PIPELINE[:] = kept
    assert "tfree_to_aic(" in print_program(unstamped) and "split=1" not in "".join(
        ln for ln in print_program(unstamped).splitlines() if "tfree" in ln)
    with_stamp, without = emit_module(stamped, a5)[0], emit_module(unstamped, a5)[0]
    assert "tfree_from_aic {split = 1}" in with_stamp
    assert with_stamp == without

