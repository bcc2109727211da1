"""CanonicalizeIOOrder: in pipeline loop bodies, scalar math first, then loads, computes, stores (a stable
topological sort that never reorders two accesses of one tensor when one of them writes); pipeline loops
become ranges. Expected programs are written by hand from those rules."""

import textwrap

from ptoc.context import CompileContext
from ptoc.frontend.parser import parse_program
from ptoc.ir.printer import print_program
from ptoc.passes.CanonicalizeIOOrder import CanonicalizeIOOrder
from ptoc.passes.manager import check_invariants
from ptoc.reference.validate import validate_program

CTX = CompileContext()
T = "pl.Tile[[16, 64], pl.FP32, pl.Mem.Vec]"
TENSOR = "pl.Tensor[[64, 64], pl.FP32]"


def kernel(body: str, loop: str = "pl.pipeline(0, 2, 1, stage=1, init_values=(out,))") -> str:
    body = textwrap.indent(textwrap.dedent(body).strip("\n"), " " * 12)
    return ("import pypto.language as pl\n@pl.program\nclass P:\n    @pl.function(type=pl.FunctionType.AIV)\n"
            f"    def k(self, x: {TENSOR}, out: pl.Out[{TENSOR}]) -> {TENSOR}:\n"
            f"        for i, (o,) in {loop}:\n{body}\n        return res\n")


def run(text: str):
    prog = parse_program(text, "before.ir", ctx=CTX)
    out = CanonicalizeIOOrder().run(prog, CTX)
    check_invariants(out, CTX, CanonicalizeIOOrder())
    return prog, out


def assert_becomes(before: str, expected: str):
    _, out = run(before)
    want = parse_program(expected, "expected.ir", ctx=CTX)
    assert out == want, f"got:\n{print_program(out)}\nexpected:\n{print_program(want)}"


def test_two_copies_issue_both_loads_then_both_computes_then_both_stores():
    before = kernel(f"""
        a: {T} = pl.tile.load(x, [0, 0], [16, 64], target_memory=pl.Mem.Vec)
        b: {T} = pl.tile.exp(a)
        o1: {TENSOR} = pl.tile.store(b, [0, 0], o)
        c: {T} = pl.tile.load(x, [16, 0], [16, 64], target_memory=pl.Mem.Vec)
        d: {T} = pl.tile.exp(c)
        o2: {TENSOR} = pl.tile.store(d, [16, 0], o1)
        res = pl.yield_(o2)
    """)
    assert_becomes(before, kernel(f"""
        a: {T} = pl.tile.load(x, [0, 0], [16, 64], target_memory=pl.Mem.Vec)
        c: {T} = pl.tile.load(x, [16, 0], [16, 64], target_memory=pl.Mem.Vec)
        b: {T} = pl.tile.exp(a)
        d: {T} = pl.tile.exp(c)
        o1: {TENSOR} = pl.tile.store(b, [0, 0], o)
        o2: {TENSOR} = pl.tile.store(d, [16, 0], o1)
        res = pl.yield_(o2)
    """, loop="pl.range(0, 2, 1, init_values=(out,))"))


def test_scalar_offsets_rise_above_the_loads_that_need_them():
    before = kernel(f"""
        a: {T} = pl.tile.load(x, [0, 0], [16, 64], target_memory=pl.Mem.Vec)
        r: pl.Scalar[pl.INDEX] = i * 16
        b: {T} = pl.tile.load(x, [r, 0], [16, 64], target_memory=pl.Mem.Vec)
        c: {T} = pl.tile.add(a, b)
        o1: {TENSOR} = pl.tile.store(c, [r, 0], o)
        res = pl.yield_(o1)
    """)
    assert_becomes(before, kernel(f"""
        r: pl.Scalar[pl.INDEX] = i * 16
        a: {T} = pl.tile.load(x, [0, 0], [16, 64], target_memory=pl.Mem.Vec)
        b: {T} = pl.tile.load(x, [r, 0], [16, 64], target_memory=pl.Mem.Vec)
        c: {T} = pl.tile.add(a, b)
        o1: {TENSOR} = pl.tile.store(c, [r, 0], o)
        res = pl.yield_(o1)
    """, loop="pl.range(0, 2, 1, init_values=(out,))"))


def test_a_load_of_a_tensor_stays_after_an_earlier_store_into_it():
    # `o` is read after the store into it wrote o1 (same memory): the load must not rise above the store.
    before = kernel(f"""
        a: {T} = pl.tile.load(x, [0, 0], [16, 64], target_memory=pl.Mem.Vec)
        o1: {TENSOR} = pl.tile.store(a, [0, 0], o)
        b: {T} = pl.tile.load(o, [0, 0], [16, 64], target_memory=pl.Mem.Vec)
        c: {T} = pl.tile.exp(b)
        o2: {TENSOR} = pl.tile.store(c, [16, 0], o1)
        res = pl.yield_(o2)
    """)
    prog, out = run(before)
    text = print_program(out)
    assert text.index("pl.tile.store(a,") < text.index("pl.tile.load(o,")
    (rep,) = validate_program(prog, CTX, seed=1)
    assert rep.first_failure is None, rep.rows


def test_a_plain_range_is_not_reordered_and_pipelines_are_gone_after():
    body = f"""
        a: {T} = pl.tile.load(x, [0, 0], [16, 64], target_memory=pl.Mem.Vec)
        o1: {TENSOR} = pl.tile.store(a, [0, 0], o)
        c: {T} = pl.tile.load(x, [16, 0], [16, 64], target_memory=pl.Mem.Vec)
        o2: {TENSOR} = pl.tile.store(c, [16, 0], o1)
        res = pl.yield_(o2)
    """
    prog, out = run(kernel(body, loop="pl.range(0, 2, 1, init_values=(out,))"))
    assert out is prog
    _, out = run(kernel(body))
    assert "pl.pipeline" not in print_program(out)


def test_pipelined_kernel_validates_after_reordering():
    prog = parse_program(kernel(f"""
        r: pl.Scalar[pl.INDEX] = i * 32
        a: {T} = pl.tile.load(x, [r, 0], [16, 64], target_memory=pl.Mem.Vec)
        b: {T} = pl.tile.muls(a, 2.0)
        o1: {TENSOR} = pl.tile.store(b, [r, 0], o)
        r2: pl.Scalar[pl.INDEX] = r + 16
        c: {T} = pl.tile.load(o1, [r, 0], [16, 64], target_memory=pl.Mem.Vec)
        d: {T} = pl.tile.adds(c, 1.0)
        o2: {TENSOR} = pl.tile.store(d, [r2, 0], o1)
        res = pl.yield_(o2)
    """), "k.ir", ctx=CTX)
    (rep,) = validate_program(prog, CTX, seed=5)
    assert rep.first_failure is None, rep.rows
