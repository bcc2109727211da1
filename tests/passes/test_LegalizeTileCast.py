"""LegalizeTileCast: non-native tile.cast -> shortest chain of native TCVTs (ptoc/target/casts.py)."""

import itertools
import textwrap

import pytest

from ptoc.context import CompileContext
from ptoc.diagnostics import CompileError
from ptoc.frontend.parser import parse_program
from ptoc.ir.printer import print_program
from ptoc.passes.LegalizeTileCast import LegalizeTileCast
from ptoc.passes.manager import check_invariants
from ptoc.target.casts import cast_chain, is_native

A2A3 = CompileContext(arch="a2a3")
A5 = CompileContext(arch="a5")


def kernel(body: str, params: str = "self, x: pl.Tensor[[64, 256], pl.FP32], "
                                     "y: pl.Out[pl.Tensor[[64, 256], pl.INT8]]",
           ret: str = "pl.Tensor[[64, 256], pl.INT8]") -> str:
    body = textwrap.indent(textwrap.dedent(body).strip("\n"), " " * 8)
    return (f"@pl.program\nclass p:\n    @pl.function(type=pl.FunctionType.InCore)\n"
            f"    def k({params}) -> {ret}:\n{body}\n")


def run(text: str, ctx: CompileContext):
    prog = parse_program(text, "before.ir", ctx=ctx)
    out = LegalizeTileCast().run(prog, ctx)
    check_invariants(out, ctx, LegalizeTileCast())
    return prog, out


def assert_same(out, expected_text: str, ctx: CompileContext):
    expected = parse_program(expected_text, "expected.ir", ctx=ctx)
    assert out == expected, f"got:\n{print_program(out)}\nexpected:\n{print_program(expected)}"


LOAD = 'xt: pl.Tile[[64, 256], pl.FP32, pl.Mem.Vec] = pl.tile.load(x, [0, 0], [64, 256], target_memory=pl.Mem.Vec)'


def test_native_cast_is_left_untouched():
    # FP32 -> FP16 is one TCVT on both targets.
    text = kernel(f"""
        {LOAD}
        h: pl.Tile[[64, 256], pl.FP16, pl.Mem.Vec] = pl.tile.cast(xt, target_type=pl.FP16, mode="round")
        q: pl.Tile[[64, 256], pl.INT8, pl.Mem.Vec] = pl.tile.cast(h, target_type=pl.INT8, mode="round")
        y1: pl.Tensor[[64, 256], pl.INT8] = pl.tile.store(q, [0, 0], y)
        return y1
    """)
    for ctx in (A2A3, A5):
        prog, out = run(text, ctx)
        assert out is prog


def test_fp32_to_int8_becomes_two_native_steps_keeping_the_mode():
    # FP32 -> INT8 has no TCVT; FP16 -> INT8 is the only native way into INT8 from a float.
    before = kernel(f"""
        {LOAD}
        q: pl.Tile[[64, 256], pl.INT8, pl.Mem.Vec] = pl.tile.cast(xt, target_type=pl.INT8, mode="round")
        y1: pl.Tensor[[64, 256], pl.INT8] = pl.tile.store(q, [0, 0], y)
        return y1
    """)
    expected = kernel(f"""
        {LOAD}
        q_cvt1: pl.Tile[[64, 256], pl.FP16, pl.Mem.Vec] = pl.tile.cast(xt, target_type=pl.FP16, mode="round")
        q: pl.Tile[[64, 256], pl.INT8, pl.Mem.Vec] = pl.tile.cast(q_cvt1, target_type=pl.INT8, mode="round")
        y1: pl.Tensor[[64, 256], pl.INT8] = pl.tile.store(q, [0, 0], y)
        return y1
    """)
    for ctx in (A2A3, A5):
        _, out = run(before, ctx)
        assert_same(out, expected, ctx)


def test_three_step_chain_prefers_the_exact_fp32_intermediate():
    # a2a3: BF16 -> INT8 needs BF16 -> FP32 -> FP16 -> INT8; BF16 -> INT32 -> FP16 -> INT8 is as short,
    # but FP32 holds every BF16 value and INT32 does not.
    params = "self, x: pl.Tensor[[16, 64], pl.BF16], y: pl.Out[pl.Tensor[[16, 64], pl.INT8]]"
    ret = "pl.Tensor[[16, 64], pl.INT8]"
    load = "xt: pl.Tile[[16, 64], pl.BF16, pl.Mem.Vec] = pl.tile.load(x, [0, 0], [16, 64], target_memory=pl.Mem.Vec)"
    before = kernel(f"""
        {load}
        q: pl.Tile[[16, 64], pl.INT8, pl.Mem.Vec] = pl.tile.cast(xt, target_type=pl.INT8, mode="trunc")
        y1: pl.Tensor[[16, 64], pl.INT8] = pl.tile.store(q, [0, 0], y)
        return y1
    """, params, ret)
    expected = kernel(f"""
        {load}
        q_cvt1: pl.Tile[[16, 64], pl.FP32, pl.Mem.Vec] = pl.tile.cast(xt, target_type=pl.FP32, mode="trunc")
        q_cvt2: pl.Tile[[16, 64], pl.FP16, pl.Mem.Vec] = pl.tile.cast(q_cvt1, target_type=pl.FP16, mode="trunc")
        q: pl.Tile[[16, 64], pl.INT8, pl.Mem.Vec] = pl.tile.cast(q_cvt2, target_type=pl.INT8, mode="trunc")
        y1: pl.Tensor[[16, 64], pl.INT8] = pl.tile.store(q, [0, 0], y)
        return y1
    """, params, ret)
    _, out = run(before, A2A3)
    assert_same(out, expected, A2A3)


def test_chain_inside_a_loop_body_and_unannotated_form():
    before = kernel("""
        for i, (acc,) in pl.range(0, 64, 16, init_values=(y,)):
            xt = pl.tile.load(x, [i, 0], [16, 256], target_memory=pl.Mem.Vec)
            q = pl.tile.cast(xt, target_type=pl.INT8)
            acc1 = pl.tile.store(q, [i, 0], acc)
            acc_out: pl.Tensor[[64, 256], pl.INT8] = pl.yield_(acc1)
        return acc_out
    """)
    expected = kernel("""
        for i, (acc,) in pl.range(0, 64, 16, init_values=(y,)):
            xt = pl.tile.load(x, [i, 0], [16, 256], target_memory=pl.Mem.Vec)
            q_cvt1 = pl.tile.cast(xt, target_type=pl.FP16)
            q = pl.tile.cast(q_cvt1, target_type=pl.INT8)
            acc1 = pl.tile.store(q, [i, 0], acc)
            acc_out: pl.Tensor[[64, 256], pl.INT8] = pl.yield_(acc1)
        return acc_out
    """)
    _, out = run(before, A2A3)
    assert_same(out, expected, A2A3)


def test_impossible_cast_on_a2a3_names_both_dtypes_and_the_arch():
    # FP8 does not exist on A2/A3: nothing converts into FP8E4M3FN there (A5 has FP32 -> FP8E4M3FN).
    params = "self, x: pl.Tensor[[64, 256], pl.FP32], y: pl.Out[pl.Tensor[[64, 256], pl.FP8E4M3FN]]"
    ret = "pl.Tensor[[64, 256], pl.FP8E4M3FN]"
    text = kernel(f"""
        {LOAD}
        q: pl.Tile[[64, 256], pl.FP8E4M3FN, pl.Mem.Vec] = pl.tile.cast(xt, target_type=pl.FP8E4M3FN)
        y1: pl.Tensor[[64, 256], pl.FP8E4M3FN] = pl.tile.store(q, [0, 0], y)
        return y1
    """, params, ret)
    prog = parse_program(text, "before.ir", ctx=A2A3)
    with pytest.raises(CompileError) as e:
        LegalizeTileCast().run(prog, A2A3)
    (d,) = e.value.diagnostics
    assert d.code == "PTOC-E0320"
    assert "FP32" in d.message and "FP8E4M3FN" in d.message and "a2a3" in d.message
    assert d.span.line == 6  # the cast's line
    assert "FP16" in d.hint  # what FP32 does convert to
    # the same cast is one native TCVT on A5
    prog5, out5 = run(text, A5)
    assert out5 is prog5


def test_fp4_cast_rejected_on_a2a3_with_rule_fp4_3():
    params = "self, x: pl.Tensor[[16, 64], pl.BF16], y: pl.Out[pl.Tensor[[16, 32], pl.FP4E2M1X2]]"
    ret = "pl.Tensor[[16, 32], pl.FP4E2M1X2]"
    text = kernel("""
        xt: pl.Tile[[16, 64], pl.BF16, pl.Mem.Vec] = pl.tile.load(x, [0, 0], [16, 64], target_memory=pl.Mem.Vec)
        q: pl.Tile[[16, 32], pl.FP4E2M1X2, pl.Mem.Vec] = pl.tile.cast(xt, target_type=pl.FP4E2M1X2)
        y1: pl.Tensor[[16, 32], pl.FP4E2M1X2] = pl.tile.store(q, [0, 0], y)
        return y1
    """, params, ret)
    prog = parse_program(text, "before.ir", ctx=A5)  # the text is valid a5 input
    with pytest.raises(CompileError) as e:
        LegalizeTileCast().run(prog, A2A3)
    (d,) = e.value.diagnostics
    assert (d.code, d.rule, d.span.line) == ("PTOC-E0321", "FP4-3", 6)
    assert "FP4E2M1X2" in d.message and "a2a3" in d.message
    # BF16 -> packed is native on A5 (FP4-4)
    prog5, out5 = run(text, A5)
    assert out5 is prog5


def test_fp4_decode_to_fp32_goes_through_bf16_on_a5():
    # FP4-2/FP4-4: packed FP4 converts only to BF16; the packed axis expands 1:2 at that step.
    params = "self, x: pl.Tensor[[16, 32], pl.FP4E2M1X2], y: pl.Out[pl.Tensor[[16, 64], pl.FP32]]"
    ret = "pl.Tensor[[16, 64], pl.FP32]"
    load = ("xt: pl.Tile[[16, 32], pl.FP4E2M1X2, pl.Mem.Vec] = "
            "pl.tile.load(x, [0, 0], [16, 32], target_memory=pl.Mem.Vec)")
    before = kernel(f"""
        {load}
        f: pl.Tile[[16, 64], pl.FP32, pl.Mem.Vec] = pl.tile.cast(xt, target_type=pl.FP32)
        y1: pl.Tensor[[16, 64], pl.FP32] = pl.tile.store(f, [0, 0], y)
        return y1
    """, params, ret)
    expected = kernel(f"""
        {load}
        f_cvt1: pl.Tile[[16, 64], pl.BF16, pl.Mem.Vec] = pl.tile.cast(xt, target_type=pl.BF16)
        f: pl.Tile[[16, 64], pl.FP32, pl.Mem.Vec] = pl.tile.cast(f_cvt1, target_type=pl.FP32)
        y1: pl.Tensor[[16, 64], pl.FP32] = pl.tile.store(f, [0, 0], y)
        return y1
    """, params, ret)
    _, out = run(before, A5)
    assert_same(out, expected, A5)


def test_fresh_intermediate_name_avoids_existing_names():
    before = kernel(f"""
        {LOAD}
        q_cvt1: pl.Tile[[64, 256], pl.FP32, pl.Mem.Vec] = pl.tile.abs(xt)
        q: pl.Tile[[64, 256], pl.INT8, pl.Mem.Vec] = pl.tile.cast(q_cvt1, target_type=pl.INT8)
        y1: pl.Tensor[[64, 256], pl.INT8] = pl.tile.store(q, [0, 0], y)
        return y1
    """)
    expected = kernel(f"""
        {LOAD}
        q_cvt1: pl.Tile[[64, 256], pl.FP32, pl.Mem.Vec] = pl.tile.abs(xt)
        q_cvt1_1: pl.Tile[[64, 256], pl.FP16, pl.Mem.Vec] = pl.tile.cast(q_cvt1, target_type=pl.FP16)
        q: pl.Tile[[64, 256], pl.INT8, pl.Mem.Vec] = pl.tile.cast(q_cvt1_1, target_type=pl.INT8)
        y1: pl.Tensor[[64, 256], pl.INT8] = pl.tile.store(q, [0, 0], y)
        return y1
    """)
    _, out = run(before, A2A3)
    assert_same(out, expected, A2A3)


def test_idempotent():
    before = kernel(f"""
        {LOAD}
        q: pl.Tile[[64, 256], pl.INT8, pl.Mem.Vec] = pl.tile.cast(xt, target_type=pl.INT8, mode="round")
        y1: pl.Tensor[[64, 256], pl.INT8] = pl.tile.store(q, [0, 0], y)
        return y1
    """)
    for ctx in (A2A3, A5):
        _, once = run(before, ctx)
        twice = LegalizeTileCast().run(once, ctx)
        assert twice is once


def test_every_chain_step_is_native_and_chains_are_shortest():
    # Property of the tables: a chain exists exactly when the BFS reaches the target, and each hop is native.
    names = ("FP32", "FP16", "BF16", "INT8", "UINT8", "INT16", "INT32", "INT64", "FP8E4M3FN", "FP4E2M1X2")
    for arch in ("a2a3", "a5"):
        for s in names:
            for d in names:
                chain = cast_chain(arch, s, d)
                if chain is None or s == d:
                    continue
                assert chain[0] == s and chain[-1] == d
                assert all(is_native(arch, a, b) for a, b in itertools.pairwise(chain))
                if len(chain) > 2:
                    assert not is_native(arch, s, d)
    assert cast_chain("a2a3", "FP16", "BF16") == ("FP16", "FP32", "BF16")
    assert cast_chain("a5", "BF16", "FP16") == ("BF16", "FP16")
    assert cast_chain("a2a3", "INT64", "INT16") == ("INT64", "INT32", "INT16")  # INT32 beats FP32 for integers
    assert cast_chain("a2a3", "UINT4", "FP16") is None
