"""MemoryReuse: buffers whose tiles' lifetimes do not overlap are coalesced into one (one alloc, shared
MemRefs), largest first, in every function holding tiles; an op may write over an operand it reads for the
last time unless the hardware reads that operand while writing (recip, reductions, moves, a widening cast,
the broadcast vector of a row expansion). Expected values are written out by hand from those rules."""

import re
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from ptoc.context import CompileContext
from ptoc.frontend.parser import parse_program
from ptoc.ir.printer import print_program
from ptoc.passes.manager import PIPELINE, check_invariants, run_pipeline
from ptoc.passes.MemoryReuse import MemoryReuse

CTX = CompileContext(arch="a2a3")
PTOC = str(Path(sys.executable).with_name("ptoc"))
T = "pl.Tile[[64, 64], pl.FP32, pl.MemRef({m}, 0, 16384), pl.Mem.Vec]"
H = "pl.Tile[[64, 64], pl.FP16, pl.MemRef({m}, 0, 8192), pl.Mem.Vec]"
C = "pl.Tile[[64, 1], pl.FP32, pl.MemRef({m}, 0, 256), pl.Mem.Vec]"
PARAMS = ("x: pl.Tensor[[64, 64], pl.FP32], y: pl.Tensor[[64, 64], pl.FP32], "
          "out: pl.Out[pl.Tensor[[64, 64], pl.FP32]]")
RET = "pl.Tensor[[64, 64], pl.FP32]"


def kernel(body: str, params: str = PARAMS, ret: str = RET, kind: str = "type=pl.FunctionType.InCore") -> str:
    body = textwrap.indent(textwrap.dedent(body).strip("\n"), " " * 8)
    return (f"@pl.program\nclass p:\n    @pl.function({kind})\n"
            f"    def k(self, {params}) -> {ret}:\n{body}\n")


def t(m: str) -> str:
    return T.format(m=m)


def alloc(m: str, size: int = 16384) -> str:
    return f"{m}: pl.Ptr = pl.tile.alloc(pl.Mem.Vec, {size})"


def run(text: str):
    before = parse_program(text, "before.ir", ctx=CTX)
    after = MemoryReuse().run(before, CTX)
    check_invariants(after, CTX, MemoryReuse())
    return before, after


def assert_same(after, expected_text: str):
    expected = parse_program(expected_text, "expected.ir", ctx=CTX)
    assert after == expected, f"got:\n{print_program(after)}\nexpected:\n{print_program(expected)}"


LOAD_X = "pl.tile.load(x, [0, 0], [64, 64], target_memory=pl.Mem.Vec)"
LOAD_Y = "pl.tile.load(y, [0, 0], [64, 64], target_memory=pl.Mem.Vec)"
ALLOCS4 = "\n        ".join(alloc(f"mem_vec_{i}") for i in range(3, 7))


def test_a_chain_of_element_wise_ops_runs_in_one_buffer_and_a_live_tile_keeps_its_own():
    # a and b are live together; c = a + b is the last read of both, so c takes a's buffer (the largest
    # buffers are equal: the earliest defined survives), d and e follow in it; b's buffer stays apart
    # (a is live when b is loaded), and nothing else is free when c is written but a's buffer comes first.
    before, after = run(kernel(f"""
        {ALLOCS4}
        a: {t("mem_vec_3")} = {LOAD_X}
        b: {t("mem_vec_4")} = {LOAD_Y}
        c: {t("mem_vec_5")} = pl.tile.add(a, b)
        d: {t("mem_vec_6")} = pl.tile.exp(c)
        out_1: {RET} = pl.tile.store(d, [0, 0], out)
        return out_1
    """))
    assert_same(after, kernel(f"""
        {alloc("mem_vec_3")}
        {alloc("mem_vec_4")}
        a: {t("mem_vec_3")} = {LOAD_X}
        b: {t("mem_vec_4")} = {LOAD_Y}
        c: {t("mem_vec_3")} = pl.tile.add(a, b)
        d: {t("mem_vec_3")} = pl.tile.exp(c)
        out_1: {RET} = pl.tile.store(d, [0, 0], out)
        return out_1
    """))


def test_a_plain_function_is_coalesced_too():
    # PyPTO plans every function holding tiles, not only kernels
    before, after = run(kernel(f"""
        {alloc("mem_vec_3")}
        {alloc("mem_vec_4")}
        a: {t("mem_vec_3")} = {LOAD_X}
        b: {t("mem_vec_4")} = pl.tile.neg(a)
        out_1: {RET} = pl.tile.store(b, [0, 0], out)
        return out_1
    """, kind=""))
    text = print_program(after)
    assert "mem_vec_4" not in text and text.count("MemRef(mem_vec_3, 0, 16384)") == 2, text


@pytest.mark.parametrize("op", ["pl.tile.recip(a)", "pl.tile.rsqrt(a)", "pl.tile.move(a, target_memory=pl.Mem.Vec)"])
def test_an_op_reading_its_source_while_writing_never_writes_over_it(op):
    before, after = run(kernel(f"""
        {alloc("mem_vec_3")}
        {alloc("mem_vec_4")}
        a: {t("mem_vec_3")} = {LOAD_X}
        b: {t("mem_vec_4")} = {op}
        out_1: {RET} = pl.tile.store(b, [0, 0], out)
        return out_1
    """))
    assert after is before


def test_a_reduction_result_is_kept_off_its_source_but_a_later_tile_reuses_the_source():
    # row_max reads all of `a` (and the scratch) while writing m: never in place. m's buffer is smaller;
    # packed largest first, the three 16 KiB buffers come first: e = row_expand_sub(a, m) may write over a
    # (its last read) but never over m (the broadcast vector, re-read for every row); the scratch s is
    # dead after the row_max, so nothing blocks e from it either, but a comes first.
    body = f"""
        {alloc("mem_vec_3")}
        {alloc("mem_vec_4")}
        {alloc("mem_vec_5", 256)}
        {alloc("mem_vec_6")}
        a: {t("mem_vec_3")} = {LOAD_X}
        s: {t("mem_vec_4")} = pl.tile.create([64, 64], dtype=pl.FP32, target_memory=pl.Mem.Vec)
        m: {C.format(m="mem_vec_5")} = pl.tile.row_max(a, s)
        e: {t("mem_vec_6")} = pl.tile.row_expand_sub(a, m)
        out_1: {RET} = pl.tile.store(e, [0, 0], out)
        return out_1
    """
    before, after = run(kernel(body))
    assert_same(after, kernel(body.replace(f"{alloc('mem_vec_6')}\n        ", "").replace(
        f"e: {t('mem_vec_6')}", f"e: {t('mem_vec_3')}")))


def test_a_widening_cast_is_not_in_place_a_narrowing_one_is():
    # FP16 -> FP32 writes 4 bytes per element over 2 read: it would overtake its source. The 16 KiB buffers
    # are packed first: w (FP32) cannot take h's smaller buffer anyway; n = cast(w) back to FP16 may take
    # w's buffer (narrowing, w read for the last time), so its own 8 KiB alloc goes; h (8 KiB) is live
    # with w, so it stays.
    params = ("x: pl.Tensor[[64, 64], pl.FP16], out: pl.Out[pl.Tensor[[64, 64], pl.FP16]]")
    ret = "pl.Tensor[[64, 64], pl.FP16]"
    h = H.format
    before, after = run(kernel(f"""
        {alloc("mem_vec_2", 8192)}
        {alloc("mem_vec_3")}
        {alloc("mem_vec_4", 8192)}
        a: {h(m="mem_vec_2")} = pl.tile.load(x, [0, 0], [64, 64], target_memory=pl.Mem.Vec)
        w: {t("mem_vec_3")} = pl.tile.cast(a, target_type=pl.FP32)
        n: {h(m="mem_vec_4")} = pl.tile.cast(w, target_type=pl.FP16)
        out_1: {ret} = pl.tile.store(n, [0, 0], out)
        return out_1
    """, params, ret))
    text = print_program(after)
    assert "mem_vec_4" not in text, text
    assert f"w: {t('mem_vec_3')}" in text and f"n: {h(m='mem_vec_3')}" in text and \
        f"a: {h(m='mem_vec_2')}" in text, text


def test_a_smaller_buffer_defined_first_joins_a_larger_one_defined_later():
    # largest first: the 16 KiB buffer of b survives and takes the 8 KiB buffer of a (dead before b is
    # loaded); the smaller alloc goes although it comes first
    params = "x: pl.Tensor[[64, 64], pl.FP16], y: pl.Tensor[[64, 64], pl.FP32], " \
             "o1: pl.Out[pl.Tensor[[64, 64], pl.FP16]], out: pl.Out[pl.Tensor[[64, 64], pl.FP32]]"
    before, after = run(kernel(f"""
        {alloc("mem_vec_4", 8192)}
        {alloc("mem_vec_5")}
        a: {H.format(m="mem_vec_4")} = pl.tile.load(x, [0, 0], [64, 64], target_memory=pl.Mem.Vec)
        r1: pl.Tensor[[64, 64], pl.FP16] = pl.tile.store(a, [0, 0], o1)
        b: {t("mem_vec_5")} = {LOAD_Y}
        out_1: {RET} = pl.tile.store(b, [0, 0], out)
        return out_1
    """, params))
    text = print_program(after)
    assert "mem_vec_4" not in text and f"a: {H.format(m='mem_vec_5')}" in text, text


def test_a_tile_read_in_a_loop_lives_to_the_loops_end():
    # a is read in every iteration: the tile computed in the loop body must not take its buffer (a later
    # iteration reads a again); c after the loop may
    before, after = run(kernel(f"""
        {ALLOCS4}
        a: {t("mem_vec_3")} = {LOAD_X}
        for i, (acc,) in pl.range(0, 4, 1, init_values=(out,)):
            b: {t("mem_vec_4")} = pl.tile.exp(a)
            st: {RET} = pl.tile.store(b, [0, 0], acc)
            o: {RET} = pl.yield_(st)
        c: {t("mem_vec_5")} = {LOAD_Y}
        out_1: {RET} = pl.tile.store(c, [0, 0], o)
        return out_1
    """.replace(ALLOCS4, "\n        ".join(alloc(f"mem_vec_{i}") for i in range(3, 6)))))
    text = print_program(after)
    assert "mem_vec_5" not in text and f"b: {t('mem_vec_4')}" in text and f"c: {t('mem_vec_3')}" in text, text


def test_an_if_result_keeps_its_branch_values_live_and_branches_are_numbered_in_sequence():
    # positions: a 0, (cond 1) p 1, yield 2, q 3, yield 4, e 5. The else branch's read of a comes after the
    # then branch in that numbering, so a counts as live while p is written: p and q keep their buffer.
    # r (read by e) keeps p and q live to position 5, where e reads it for the last time; e then takes
    # a's buffer (a's last read, 3, is before 5), not r's (touching would allow it, but a's buffer is
    # the first, and the equal-size buffers are visited in definition order).
    params = PARAMS + ", n: pl.Scalar[pl.INDEX]"
    before, after = run(kernel(f"""
        {ALLOCS4}
        a: {t("mem_vec_3")} = {LOAD_X}
        if n < 2:
            p: {t("mem_vec_4")} = pl.tile.exp(a)
            r: {t("mem_vec_4")} = pl.yield_(p)
        else:
            q: {t("mem_vec_4")} = pl.tile.neg(a)
            r: {t("mem_vec_4")} = pl.yield_(q)
        e: {t("mem_vec_5")} = pl.tile.exp(r)
        out_1: {RET} = pl.tile.store(e, [0, 0], out)
        return out_1
    """.replace(ALLOCS4, "\n        ".join(alloc(f"mem_vec_{i}") for i in range(3, 6))), params))
    text = print_program(after)
    assert "mem_vec_5" not in text and f"e: {t('mem_vec_3')}" in text, text
    assert text.count("MemRef(mem_vec_4, 0, 16384)") == 4, text


@pytest.mark.parametrize("name", ["softmax_rows", "vector_add"])
def test_a_lifetime_ended_too_early_gives_wrong_numbers_that_validation_catches(monkeypatch, name):
    # The reference interpreter keeps every value apart (it ignores MemRefs), the .pto executor gives each
    # tile the bytes at its address: a buffer shared while a tile still lives there shows as a wrong result
    # of the emitted kernel. With the real analysis every stage and the .pto agree; with every tile made to
    # die where it is written (all buffers of a size merge) the emitted .pto computes something else.
    from ptoc.driver import frontend
    from ptoc.passes import MemoryReuse as mr
    from ptoc.reference.validate import validate_program

    path = Path(__file__).resolve().parents[2] / "examples" / f"{name}.ir"
    prog = frontend(path.read_text(), path.name, CTX)
    assert all(rep.first_failure is None for rep in validate_program(prog, CTX, seed=1))
    finish = mr._Walk.finish

    def too_early(self):
        out = finish(self)
        out.last = dict(out.defs)
        return out

    monkeypatch.setattr(mr._Walk, "finish", too_early)
    reports = validate_program(prog, CTX, seed=1)
    failed = [rep.first_failure for rep in reports if rep.first_failure is not None]
    assert failed and all(f.stage == ".pto (emitted)" and "differ" in f.detail for f in failed), \
        [(f.stage, f.detail) for f in failed]


def test_the_pass_is_idempotent_and_skips_placed_kernels():
    text = kernel(f"""
        {alloc("mem_vec_0")}
        a: {t("mem_vec_0")} = {LOAD_X}
        {alloc("mem_vec_1")}
        b: {t("mem_vec_1")} = {LOAD_Y}
        {alloc("mem_vec_2")}
        c: {t("mem_vec_2")} = pl.tile.add(a, b)
        out_1: {RET} = pl.tile.store(c, [0, 0], out)
        return out_1
    """)
    before, once = run(text)
    assert once is not before and "mem_vec_2" not in print_program(once)
    assert MemoryReuse().run(once, CTX) is once
    placed = text.replace("16384)\n", "16384, addr=0)\n", 1)
    before, after = run(placed)
    assert after is before


FIT = Path(__file__).with_name("memory_reuse_fit.ir")


@pytest.mark.parametrize("arch", ["a2a3", "a5"])
def test_a_kernel_that_overflows_the_vector_buffer_fits_after_reuse(arch):
    # three [128, 176] FP32 tiles (88 KiB each) are live at `c = a + b` without reuse: 264 KiB > 184 KiB (a2a3)
    # and > 240 KiB (a5). With c written over a, two are live: 176 KiB fits both.
    others = ",".join(n for _, n in PIPELINE if n != "MemoryReuse")
    r = subprocess.run([PTOC, "passes", str(FIT), "--arch", arch, "--pipeline", others], capture_output=True,
                       text=True, timeout=300, check=False)
    assert r.returncode == 1 and "PTOC-E0390" in r.stderr and "Vec needs 270336 bytes" in r.stderr, r.stderr
    r = subprocess.run([PTOC, "passes", str(FIT), "--arch", arch, "--validate"], capture_output=True, text=True,
                       timeout=300, check=False)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "MemoryReuse                  ok" in r.stdout and "every stage agrees with the front end" in r.stdout


def test_the_fitting_kernel_computes_what_numpy_computes():
    from ptoc.driver import frontend
    from ptoc.reference.interp import run_function

    ctx = CompileContext(arch="a2a3")
    prog = frontend(FIT.read_text(), FIT.name, ctx)
    lowered = run_pipeline(prog, ctx)
    rng = np.random.default_rng(3)
    x, y = (rng.standard_normal((128, 176)).astype(np.float32) for _ in range(2))
    want = np.exp((x + y) * y)  # numpy, independently of ptoc
    got = run_function(lowered, "k", {"x": x, "y": y, "out": np.zeros((128, 176), np.float32)}, ctx)
    np.testing.assert_allclose(got["out"], want, rtol=1e-5)


def test_an_element_of_a_tuple_of_tiles_lives_from_the_op_that_wrote_it():
    # quant_mx writes both elements of q at once; y is loaded and stored before d = q[0] is taken out. y
    # may not take d's buffer (the same size): d's data is there since the quant_mx, not since `d = q[0]`.
    a5 = CompileContext(arch="a5")
    params = ("x: pl.Tensor[[16, 64], pl.BF16], b: pl.Tensor[[16, 64], pl.FP8E4M3FN], "
              "o1: pl.Out[pl.Tensor[[16, 64], pl.FP8E4M3FN]], out: pl.Out[pl.Tensor[[16, 64], pl.FP8E4M3FN]]")
    ret = "pl.Tensor[[16, 64], pl.FP8E4M3FN]"
    text = kernel("""
        t: pl.Tile[[16, 64], pl.BF16, pl.Mem.Vec] = pl.tile.load(x, [0, 0], [16, 64], target_memory=pl.Mem.Vec)
        q = pl.tile.quant_mx(t, axis=1, dtype=pl.FP8E4M3FN)
        y: pl.Tile[[16, 64], pl.FP8E4M3FN, pl.Mem.Vec] = pl.tile.load(b, [0, 0], [16, 64], target_memory=pl.Mem.Vec)
        r1: pl.Tensor[[16, 64], pl.FP8E4M3FN] = pl.tile.store(y, [0, 0], o1)
        d = q[0]
        r2: pl.Tensor[[16, 64], pl.FP8E4M3FN] = pl.tile.store(d, [0, 0], out)
        return r2
    """, params, ret)
    from ptoc.driver import frontend

    planned = run_pipeline(frontend(text, "k.ir", a5), a5, stop_after="MemoryReuse")
    env_text = print_program(planned)
    ref = {n: re.search(rf"\b{n}: pl.Tile\[[^=]*?MemRef\((\w+),", env_text).group(1) for n in ("y", "d")}
    assert ref["y"] != ref["d"], env_text


# ---------------------------------------------------------------------------------------------------
# The pipeline-stage guard: tiles of different copies (stages) of one pl.pipeline region stay in
# different buffers where the memory space holds them; the `pipeline_membership` tags are then dropped
# ---------------------------------------------------------------------------------------------------

def stage(g: int, s: int) -> str:
    return f', attrs={{"pipeline_membership": "{g}:{s}"}}'


def copies(allocs: str, m0: str, m1: str, m2: str, m3: str, tags: bool = True) -> str:
    """Two copies of `load, adds, store`, one after the other (each copy's tiles dead before the next)."""
    s0, s1 = (stage(0, 0), stage(0, 1)) if tags else ("", "")
    return kernel(f"""
        {allocs}
        a: {t(m0)} = pl.tile.load(x, [0, 0], [64, 64], target_memory=pl.Mem.Vec{s0})
        b: {t(m1)} = pl.tile.adds(a, 1.0{s0})
        o1: {RET} = pl.tile.store(b, [0, 0], out)
        a_1: {t(m2)} = pl.tile.load(y, [0, 0], [64, 64], target_memory=pl.Mem.Vec{s1})
        b_1: {t(m3)} = pl.tile.adds(a_1, 1.0{s1})
        o2: {RET} = pl.tile.store(b_1, [0, 0], o1)
        return o2
    """)


def test_pipeline_copies_keep_apart_and_the_tags_are_dropped():
    # without tags the four tiles chain through one buffer; tagged as stages 0 and 1 of region 0, each
    # copy keeps its own (2 x 16 KiB fits Vec), b still runs in place of a within its copy
    _, untagged = run(copies(ALLOCS4, "mem_vec_3", "mem_vec_4", "mem_vec_5", "mem_vec_6", tags=False))
    assert_same(untagged, copies(alloc("mem_vec_3"), "mem_vec_3", "mem_vec_3", "mem_vec_3", "mem_vec_3", tags=False))
    _, tagged = run(copies(ALLOCS4, "mem_vec_3", "mem_vec_4", "mem_vec_5", "mem_vec_6"))
    assert_same(tagged, copies(f"{alloc('mem_vec_3')}\n        {alloc('mem_vec_5')}",
                               "mem_vec_3", "mem_vec_3", "mem_vec_5", "mem_vec_5", tags=False))


def test_copies_of_different_regions_or_the_same_stage_may_share():
    _, out = run(copies(ALLOCS4, "mem_vec_3", "mem_vec_4", "mem_vec_5", "mem_vec_6").replace('"0:1"', '"1:0"'))
    assert_same(out, copies(alloc("mem_vec_3"), "mem_vec_3", "mem_vec_3", "mem_vec_3", "mem_vec_3", tags=False))


BIG = "pl.Tile[[128, 128], pl.FP32, pl.MemRef({m}, 0, 65536), pl.Mem.Vec]"


def test_when_a_live_tile_leaves_room_for_one_copy_the_copies_share():
    # Vec holds 184 KiB on a2a3: a 64 KiB tile `keep` live across both copies plus two 64 KiB copies is
    # 192 KiB, so the region's depth is lowered to 1 and the copies share one buffer (keep keeps its own)
    def text(allocs: str, mk: str, m0: str, m1: str, tags: bool) -> str:
        s0, s1 = (stage(0, 0), stage(0, 1)) if tags else ("", "")
        big = "pl.Tensor[[128, 128], pl.FP32]"
        return kernel(f"""
            {allocs}
            keep: {BIG.format(m=mk)} = pl.tile.load(x, [0, 0], [128, 128], target_memory=pl.Mem.Vec)
            a: {BIG.format(m=m0)} = pl.tile.load(y, [0, 0], [128, 128], target_memory=pl.Mem.Vec{s0})
            o1: {big} = pl.tile.store(a, [0, 0], out)
            a_1: {BIG.format(m=m1)} = pl.tile.load(y, [0, 0], [128, 128], target_memory=pl.Mem.Vec{s1})
            o2: {big} = pl.tile.store(a_1, [0, 0], o1)
            o3: {big} = pl.tile.store(keep, [0, 0], o2)
            return o3
        """, params="x: pl.Tensor[[128, 128], pl.FP32], y: pl.Tensor[[128, 128], pl.FP32], "
                    "out: pl.Out[pl.Tensor[[128, 128], pl.FP32]]", ret="pl.Tensor[[128, 128], pl.FP32]")

    allocs3 = "\n            ".join(alloc(f"mem_vec_{i}", 65536) for i in range(3))
    _, out = run(text(allocs3, "mem_vec_0", "mem_vec_1", "mem_vec_2", tags=True))
    allocs2 = "\n            ".join(alloc(f"mem_vec_{i}", 65536) for i in range(2))
    assert_same(out, text(allocs2, "mem_vec_0", "mem_vec_1", "mem_vec_1", tags=False))


def _allocs_by_space(program) -> dict[str, int]:
    return {s: len(re.findall(rf"pl\.tile\.alloc\(pl\.Mem\.{s},", print_program(program))) for s in
            ("Left", "Right", "Acc")}


def test_double_buffered_l0_operands_as_pypto_plans_them():
    # matmul_l0_tiled on a2a3: eight accumulation loops of two copies each; PyPTO's MemoryReuse leaves
    # two Left and two Right buffers (one per copy) and one accumulator (read from its dump after the pass)
    from ptoc.driver import frontend

    src = Path(__file__).resolve().parents[2] / "examples" / "matmul_l0_tiled.ir"
    prog = frontend(src.read_text(), src.name, CTX)
    out = run_pipeline(prog, CTX, stop_after="MemoryReuse")
    assert _allocs_by_space(out) == {"Left": 2, "Right": 2, "Acc": 1}
    assert "pipeline_membership" not in print_program(out)
    # the tags read back from a dump after LowerPipelineLoops give the same plan
    mid = run_pipeline(prog, CTX, stop_after="LowerPipelineLoops")
    text = print_program(mid)
    assert text.count("pipeline_membership") == 32
    again = parse_program(text, "mid.ir", ctx=CTX)
    from ptoc.passes.manager import available_pipeline

    names = [n for _, n in PIPELINE]
    lo, hi = names.index("LowerPipelineLoops"), names.index("MemoryReuse")
    rest = available_pipeline()[lo + 1:hi + 1]
    assert _allocs_by_space(run_pipeline(again, CTX, passes=rest)) == {"Left": 2, "Right": 2, "Acc": 1}


def test_a_coalesced_input_skips_the_pass_and_still_loses_its_tags():
    # one buffer only: nothing to merge (the input has `coalesced`), the pipeline skips the pass and its
    # adopt step drops the tags as the pass would
    from ptoc.passes.manager import input_properties

    text = copies(alloc("mem_vec_3"), "mem_vec_3", "mem_vec_3", "mem_vec_3", "mem_vec_3")
    prog = parse_program(text, "in.ir", ctx=CTX)
    assert "pipeline_membership" in print_program(prog)
    assert {"memrefs", "coalesced"} <= input_properties(prog, CTX)
    out = MemoryReuse().adopt(prog, CTX)
    assert_same(out, copies(alloc("mem_vec_3"), "mem_vec_3", "mem_vec_3", "mem_vec_3", "mem_vec_3", tags=False))
