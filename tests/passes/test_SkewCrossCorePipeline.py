"""SkewCrossCorePipeline: a pl.pipeline loop that pushes a tile to the other core and pops its answer runs
its producing half D iterations ahead (prologue, pl.range steady loop, epilogue); loops it cannot skew
become plain pl.range loops. Expected programs are written by hand from the pass's rules; the attention
program at the end runs through the reference's two-core machine, which checks the hand-off order."""

import re
import textwrap
from pathlib import Path

import numpy as np
import pytest

from ptoc.context import CompileContext
from ptoc.diagnostics import CompileError
from ptoc.driver import frontend, lower
from ptoc.frontend.parser import parse_program
from ptoc.ir.printer import print_program
from ptoc.passes.manager import available_pipeline, check_invariants, run_pipeline
from ptoc.passes.SkewCrossCorePipeline import SkewCrossCorePipeline
from ptoc.reference.interp import run_function
from ptoc.reference.validate import validate_program

CTX = CompileContext()
V = "pl.Tile[[16, 32], pl.FP32, pl.Mem.Vec]"
TT = "pl.Tensor[[96, 32], pl.FP32]"


def aiv(body: str) -> str:
    body = textwrap.indent(textwrap.dedent(body).strip("\n"), " " * 8)
    return ("import pypto.language as pl\n@pl.program\nclass P:\n    @pl.function(type=pl.FunctionType.AIV)\n"
            f"    def k(self, x: {TT}, n: pl.Scalar[pl.INDEX], out: pl.Out[{TT}]) -> {TT}:\n{body}\n"
            "        return res\n")


def run(text: str):
    prog = frontend(text, "before.ir", CTX)
    out = SkewCrossCorePipeline().run(prog, CTX)
    check_invariants(out, CTX, SkewCrossCorePipeline())
    return prog, out


def assert_becomes(before: str, expected: str):
    _, out = run(before)
    want = frontend(expected, "expected.ir", CTX)
    assert out == want, f"got:\n{print_program(out)}\nexpected:\n{print_program(want)}"


# the vector side pushes first (V -> C), then pops the cube core's answer
ROUND_TRIP = f"""
    for i, (o,) in pl.pipeline(LOOP, init_values=(out,)):
        t: {V} = pl.tile.load(x, [i * 16, 0], [16, 32], target_memory=pl.Mem.Vec)
        u: {V} = pl.tile.exp(t)
        pl.tile.tpush_to_aic(u, split=0)
        y: {V} = pl.tile.tpop_from_aic(split=0)
        z: {V} = pl.tile.add(y, y)
        o2: {TT} = pl.tile.store(z, [i * 16, 0], o)
        res = pl.yield_(o2)
"""


def test_a_round_trip_runs_its_pushes_two_iterations_ahead():
    assert_becomes(aiv(ROUND_TRIP.replace("LOOP", "0, 4, 1, stage=2")), aiv(f"""
        t: {V} = pl.tile.load(x, [0 * 16, 0], [16, 32], target_memory=pl.Mem.Vec)
        u: {V} = pl.tile.exp(t)
        pl.tile.tpush_to_aic(u, split=0)
        t_1: {V} = pl.tile.load(x, [1 * 16, 0], [16, 32], target_memory=pl.Mem.Vec)
        u_1: {V} = pl.tile.exp(t_1)
        pl.tile.tpush_to_aic(u_1, split=0)
        for i, (o,) in pl.range(2, 4, 2, init_values=(out,)):
            t_2: {V} = pl.tile.load(x, [i * 16, 0], [16, 32], target_memory=pl.Mem.Vec)
            u_2: {V} = pl.tile.exp(t_2)
            pl.tile.tpush_to_aic(u_2, split=0)
            t_3: {V} = pl.tile.load(x, [(i + 1) * 16, 0], [16, 32], target_memory=pl.Mem.Vec)
            u_3: {V} = pl.tile.exp(t_3)
            pl.tile.tpush_to_aic(u_3, split=0)
            y: {V} = pl.tile.tpop_from_aic(split=0)
            z: {V} = pl.tile.add(y, y)
            o2: {TT} = pl.tile.store(z, [(i - 2) * 16, 0], o)
            y_1: {V} = pl.tile.tpop_from_aic(split=0)
            z_1: {V} = pl.tile.add(y_1, y_1)
            o2_1: {TT} = pl.tile.store(z_1, [(i - 1) * 16, 0], o2)
            res_swp = pl.yield_(o2_1)
        y_2: {V} = pl.tile.tpop_from_aic(split=0)
        z_2: {V} = pl.tile.add(y_2, y_2)
        o2_2: {TT} = pl.tile.store(z_2, [2 * 16, 0], res_swp)
        y_3: {V} = pl.tile.tpop_from_aic(split=0)
        z_3: {V} = pl.tile.add(y_3, y_3)
        o2_3: {TT} = pl.tile.store(z_3, [3 * 16, 0], o2_2)
        res = o2_3
    """))


def test_a_trip_count_depth_two_does_not_divide_runs_one_ahead():
    # stage=3 asks for depth 2; 5 iterations are not a multiple of 2, so depth 1: the steady loop steps by 2
    # from 2 (start 0, step 2, 5 iterations up to 10)
    assert_becomes(aiv(ROUND_TRIP.replace("LOOP", "0, 10, 2, stage=3")), aiv(f"""
        t: {V} = pl.tile.load(x, [0 * 16, 0], [16, 32], target_memory=pl.Mem.Vec)
        u: {V} = pl.tile.exp(t)
        pl.tile.tpush_to_aic(u, split=0)
        for i, (o,) in pl.range(2, 10, 2, init_values=(out,)):
            t_1: {V} = pl.tile.load(x, [i * 16, 0], [16, 32], target_memory=pl.Mem.Vec)
            u_1: {V} = pl.tile.exp(t_1)
            pl.tile.tpush_to_aic(u_1, split=0)
            y: {V} = pl.tile.tpop_from_aic(split=0)
            z: {V} = pl.tile.add(y, y)
            o2: {TT} = pl.tile.store(z, [(i - 2) * 16, 0], o)
            res_swp = pl.yield_(o2)
        y_1: {V} = pl.tile.tpop_from_aic(split=0)
        z_1: {V} = pl.tile.add(y_1, y_1)
        o2_1: {TT} = pl.tile.store(z_1, [8 * 16, 0], res_swp)
        res = o2_1
    """))


def test_an_offset_both_halves_use_is_computed_again_in_the_consuming_half():
    assert_becomes(aiv(f"""
        for i, (o,) in pl.pipeline(0, 2, 1, stage=2, init_values=(out,)):
            r: pl.Scalar[pl.INDEX] = i * 16
            t: {V} = pl.tile.load(x, [r, 0], [16, 32], target_memory=pl.Mem.Vec)
            pl.tile.tpush_to_aic(t, split=0)
            y: {V} = pl.tile.tpop_from_aic(split=0)
            o2: {TT} = pl.tile.store(y, [r, 0], o)
            res = pl.yield_(o2)
    """), aiv(f"""
        r: pl.Scalar[pl.INDEX] = 0 * 16
        t: {V} = pl.tile.load(x, [r, 0], [16, 32], target_memory=pl.Mem.Vec)
        pl.tile.tpush_to_aic(t, split=0)
        for i, (o,) in pl.range(1, 2, 1, init_values=(out,)):
            r_1: pl.Scalar[pl.INDEX] = i * 16
            t_1: {V} = pl.tile.load(x, [r_1, 0], [16, 32], target_memory=pl.Mem.Vec)
            pl.tile.tpush_to_aic(t_1, split=0)
            r_2: pl.Scalar[pl.INDEX] = (i - 1) * 16
            y: {V} = pl.tile.tpop_from_aic(split=0)
            o2: {TT} = pl.tile.store(y, [r_2, 0], o)
            res_swp = pl.yield_(o2)
        r_3: pl.Scalar[pl.INDEX] = 1 * 16
        y_1: {V} = pl.tile.tpop_from_aic(split=0)
        o2_1: {TT} = pl.tile.store(y_1, [r_3, 0], res_swp)
        res = o2_1
    """))


def test_a_producing_half_with_an_inner_loop_and_an_if_is_copied_whole_with_fresh_names():
    _, out = run(aiv(f"""
        for i, (o,) in pl.pipeline(0, 4, 1, stage=2, init_values=(out,)):
            t: {V} = pl.tile.load(x, [i * 16, 0], [16, 32], target_memory=pl.Mem.Vec)
            for j, (a,) in pl.range(2, init_values=(t,)):
                a2: {V} = pl.tile.add(a, t)
                s = pl.yield_(a2)
            if i == 0:
                w: {V} = pl.tile.exp(s)
                m = pl.yield_(w)
            else:
                m = pl.yield_(s)
            pl.tile.tpush_to_aic(m, split=0)
            y: {V} = pl.tile.tpop_from_aic(split=0)
            o2: {TT} = pl.tile.store(y, [i * 16, 0], o)
            res = pl.yield_(o2)
    """))
    text = print_program(out)
    # each of the 4 produce copies has its own inner loop and if, binding their own names
    assert re.findall(r"pl\.tile\.tpush_to_aic\((\w+)", text) == ["m", "m_1", "m_2", "m_3"]
    assert re.findall(r"for (j\w*),", text) == ["j", "j_1", "j_2", "j_3"]
    assert re.findall(r"if (.*) == 0:", text) == ["0", "1", "i", "i + 1"]


def demoted(before: str) -> str:
    return re.sub(r"pl\.pipeline\(([^)]*?), stage=\d+", r"pl.range(\1", before)


@pytest.mark.parametrize("body", [
    # pop first (the consumer's side): the popped tile feeds the rest
    f"""
    for i, (o,) in pl.pipeline(0, 4, 1, stage=2, init_values=(out,)):
        y: {V} = pl.tile.tpop_from_aic(split=0)
        z: {V} = pl.tile.exp(y)
        pl.tile.tpush_to_aic(z, split=0)
        o2: {TT} = pl.tile.store(z, [i * 16, 0], o)
        res = pl.yield_(o2)
    """,
    # two messages one way per iteration: moving only the first ahead would reorder the pipe
    f"""
    for i, (o,) in pl.pipeline(0, 4, 1, stage=2, init_values=(out,)):
        t: {V} = pl.tile.load(x, [i * 16, 0], [16, 32], target_memory=pl.Mem.Vec)
        pl.tile.tpush_to_aic(t, split=0)
        y: {V} = pl.tile.tpop_from_aic(split=0)
        pl.tile.tpush_to_aic(y, split=0)
        y2: {V} = pl.tile.tpop_from_aic(split=0)
        o2: {TT} = pl.tile.store(y2, [i * 16, 0], o)
        res = pl.yield_(o2)
    """,
    # the consuming half reads a tile the producing half loaded: it cannot run ahead of it
    f"""
    for i, (o,) in pl.pipeline(0, 4, 1, stage=2, init_values=(out,)):
        t: {V} = pl.tile.load(x, [i * 16, 0], [16, 32], target_memory=pl.Mem.Vec)
        pl.tile.tpush_to_aic(t, split=0)
        y: {V} = pl.tile.tpop_from_aic(split=0)
        z: {V} = pl.tile.add(y, t)
        o2: {TT} = pl.tile.store(z, [i * 16, 0], o)
        res = pl.yield_(o2)
    """,
    # bounds known only at run time; a single iteration; stage=1
    ROUND_TRIP.replace("LOOP", "0, n, 1, stage=2"),
    ROUND_TRIP.replace("LOOP", "0, 1, 1, stage=2"),
    ROUND_TRIP.replace("LOOP", "0, 4, 1, stage=1"),
], ids=["pop-first", "two-round-trips", "tile-carry", "dynamic-bounds", "one-iteration", "stage-1"])
def test_a_loop_it_cannot_skew_becomes_a_range_with_its_body_as_it_is(body):
    assert_becomes(aiv(body), demoted(aiv(body)))


def test_a_pipeline_without_a_round_trip_is_left_to_lower_pipeline_loops():
    one_way = aiv(f"""
        for i, (o,) in pl.pipeline(0, 4, 1, stage=2, init_values=(out,)):
            t: {V} = pl.tile.load(x, [i * 16, 0], [16, 32], target_memory=pl.Mem.Vec)
            pl.tile.tpush_to_aic(t, split=0)
            o2: {TT} = pl.tile.store(t, [i * 16, 0], o)
            res = pl.yield_(o2)
    """)
    prog, out = run(one_way)
    assert out is prog


# ---------------------------------------------------------------------------------------------------
# The attention blocks: both cores in the reference's two-thread machine over the bounded pipes.
# ---------------------------------------------------------------------------------------------------

ATTENTION = Path(__file__).with_name("attention_blocks_pipeline.ir")


def attention_inputs():
    rng = np.random.default_rng(11)
    q = rng.standard_normal((16, 64)).astype(np.float16)
    kt = rng.standard_normal((64, 256)).astype(np.float16)
    v = rng.standard_normal((256, 64)).astype(np.float16)
    want = np.zeros((64, 64))
    for b in range(4):
        s = q.astype(np.float64) @ kt[:, 64 * b:64 * b + 64].astype(np.float64)
        p = np.exp(s - s.max(axis=1, keepdims=True))
        p = (p / p.sum(axis=1, keepdims=True)).astype(np.float16)
        want[16 * b:16 * b + 16] = p.astype(np.float64) @ v[64 * b:64 * b + 64].astype(np.float64)
    return {"q": q, "kt": kt, "v": v}, want


def skewed(arch: str) -> str:
    """The program right after SkewCrossCorePipeline, as text."""
    ctx = CompileContext(arch=arch)
    passes = available_pipeline()
    upto = [p for p in passes[:[p.name for p in passes].index("SkewCrossCorePipeline") + 1]]
    return print_program(run_pipeline(frontend(ATTENTION.read_text(), ATTENTION.name, ctx), ctx, passes=upto))


def run_text(text: str, arch: str):
    ctx = CompileContext(arch=arch)
    args, _ = attention_inputs()
    return run_function(parse_program(text, "skewed.ir", ctx=ctx), "attention", args, ctx)["out"]


@pytest.mark.parametrize("arch", ["a2a3", "a5"])
def test_the_cube_core_runs_two_blocks_ahead_and_every_stage_gives_the_attention_numbers(arch):
    ctx = CompileContext(arch=arch)
    prog = frontend(ATTENTION.read_text(), ATTENTION.name, ctx)
    reports = validate_program(prog, ctx, seed=4)
    assert all(r.ok and r.ran for rep in reports for r in rep.rows), reports
    low = lower(prog, ctx).program
    aic = print_program(low).split("def attention_aiv")[0]
    ops = re.findall(r"tile\.(tpush_to_aiv|tpop_from_aiv)", aic)
    # prologue: two pushes; steady loop: two pushes, then two pops; epilogue: two pops
    assert ops == ["tpush_to_aiv"] * 4 + ["tpop_from_aiv"] * 4, ops
    args, want = attention_inputs()
    got = run_function(low, "attention", args, ctx)["out"]
    np.testing.assert_allclose(got, want, rtol=1e-2, atol=2e-3)


def test_a_skew_pairing_a_pop_with_the_wrong_iteration_gives_wrong_numbers():
    text = skewed("a5")
    _, want = attention_inputs()
    np.testing.assert_allclose(run_text(text, "a5"), want, rtol=1e-2, atol=2e-3)
    # the steady loop's two consuming copies with their iterations swapped: each pop's probabilities meet
    # the other block's values and land in the other block's rows
    assert text.count("(b - 2)") == 2 and text.count("(b - 1)") == 2
    swapped = text.replace("(b - 2)", "(b - X)").replace("(b - 1)", "(b - 2)").replace("(b - X)", "(b - 1)")
    got = run_text(swapped, "a5")
    # the steady loop consumes blocks 0 and 1 (wrong now), the epilogue blocks 2 and 3 (still right)
    assert not np.allclose(got[:16], want[:16], rtol=1e-2, atol=2e-3)
    assert not np.allclose(got[16:32], want[16:32], rtol=1e-2, atol=2e-3)
    np.testing.assert_allclose(got[32:], want[32:], rtol=1e-2, atol=2e-3)


def test_a_skew_that_pops_before_the_other_core_could_push_is_a_deadlock():
    lines = skewed("a5").splitlines()
    # drop the cube core's prologue (the two pushes before its loop): it pops answers for blocks it never sent
    first_loop = next(i for i, ln in enumerate(lines) if ln.strip().startswith("for b"))
    assert sum("tpush_to_aiv" in ln for ln in lines[:first_loop]) == 2
    broken = "\n".join(ln for i, ln in enumerate(lines) if not (i < first_loop and "tpush_to_aiv" in ln)) + "\n"
    with pytest.raises(CompileError) as e:
        run_text(broken, "a5")
    assert "cross-core deadlock" in e.value.diagnostics[0].message


@pytest.mark.parametrize("arch", ["a2a3", "a5"])
def test_the_real_ptoas_accepts_the_skewed_pair(arch, tmp_path):
    import os
    import subprocess
    import sys

    exe = os.environ.get("PTOC_PTOAS")
    if not exe:
        pytest.skip("$PTOC_PTOAS is unset: run `eval \"$(bash ../shared/tools/setup.sh)\"` first")
    ptoc = Path(sys.executable).with_name("ptoc")
    r = subprocess.run([str(ptoc), "compile", str(ATTENTION), "--arch", arch, "-o", str(tmp_path / "k.pto"),
                        "--assemble"], capture_output=True, text=True, check=False, timeout=600,
                       env=dict(os.environ, PTOC_PTOAS=exe))
    assert r.returncode == 0, r.stderr
    pto = (tmp_path / "k.pto").read_text()
    aic = pto[pto.index("func.func @attention_aic("):pto.index("func.func @attention_aiv(")]
    assert aic.count("pto.tpush_to_aiv") == 4 and aic.count("pto.tpop_from_aiv") == 4
    cpp = (tmp_path / "k.cpp").read_text()
    assert re.search(r"\bvoid attention_aic\(", cpp) and "TPUSH<" in cpp and "TPOP<" in cpp
