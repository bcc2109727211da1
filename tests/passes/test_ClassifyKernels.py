"""ClassifyKernels: InCore -> AIC (cube work) or AIV (vector work); mixed kernels are rejected."""

import textwrap

import pytest

from ptoc.context import CompileContext
from ptoc.diagnostics import CompileError
from ptoc.frontend.parser import parse_program
from ptoc.ir.printer import print_program
from ptoc.passes.ClassifyKernels import ClassifyKernels
from ptoc.passes.manager import check_invariants

A2A3 = CompileContext(arch="a2a3")

VEC_PARAMS = ("self, a: pl.Tensor[[32, 128], pl.FP32], b: pl.Tensor[[32, 128], pl.FP32], "
              "out: pl.Out[pl.Tensor[[32, 128], pl.FP32]]")
VEC_RET = "pl.Tensor[[32, 128], pl.FP32]"
VEC_BODY = """
    ta: pl.Tile[[32, 128], pl.FP32, pl.Mem.Vec] = pl.tile.load(a, [0, 0], [32, 128], target_memory=pl.Mem.Vec)
    tb: pl.Tile[[32, 128], pl.FP32, pl.Mem.Vec] = pl.tile.load(b, [0, 0], [32, 128], target_memory=pl.Mem.Vec)
    tc: pl.Tile[[32, 128], pl.FP32, pl.Mem.Vec] = pl.tile.add(ta, tb)
    o1: pl.Tensor[[32, 128], pl.FP32] = pl.tile.store(tc, [0, 0], out)
    return o1
"""

MM_PARAMS = ("self, x: pl.Tensor[[64, 64], pl.BF16], w: pl.Tensor[[64, 64], pl.BF16], "
             "o: pl.Out[pl.Tensor[[64, 64], pl.FP32]]")
MM_RET = "pl.Tensor[[64, 64], pl.FP32]"
MM_BODY = """
    a: pl.Tile[[64, 64], pl.BF16, pl.Mem.Mat] = pl.tile.load(x, [0, 0], [64, 64], target_memory=pl.Mem.Mat)
    b: pl.Tile[[64, 64], pl.BF16, pl.Mem.Mat] = pl.tile.load(w, [0, 0], [64, 64], target_memory=pl.Mem.Mat)
    a_left: pl.Tile[[64, 64], pl.BF16, pl.Mem.Left] = pl.tile.move(a, target_memory=pl.Mem.Left)
    b_right: pl.Tile[[64, 64], pl.BF16, pl.Mem.Right] = pl.tile.move(b, target_memory=pl.Mem.Right)
    c: pl.Tile[[64, 64], pl.FP32, pl.Mem.Acc] = pl.tile.matmul(a_left, b_right)
    o1: pl.Tensor[[64, 64], pl.FP32] = pl.tile.store(c, [0, 0], o)
    return o1
"""


def kernel(body: str, params: str, ret: str, kind: str = "InCore") -> str:
    body = textwrap.indent(textwrap.dedent(body).strip("\n"), " " * 8)
    return (f"@pl.program\nclass p:\n    @pl.function(type=pl.FunctionType.{kind})\n"
            f"    def k({params}) -> {ret}:\n{body}\n")


def run(text: str):
    prog = parse_program(text, "before.ir", ctx=A2A3)
    out = ClassifyKernels().run(prog, A2A3)
    check_invariants(out, A2A3, ClassifyKernels())  # property kernel_kinds: no InCore left
    return prog, out


def assert_same(out, expected_text: str):
    expected = parse_program(expected_text, "expected.ir", ctx=A2A3)
    assert out == expected, f"got:\n{print_program(out)}\nexpected:\n{print_program(expected)}"


def test_vector_kernel_becomes_aiv():
    _, out = run(kernel(VEC_BODY, VEC_PARAMS, VEC_RET))
    assert_same(out, kernel(VEC_BODY, VEC_PARAMS, VEC_RET, kind="AIV"))


def test_matmul_kernel_becomes_aic():
    _, out = run(kernel(MM_BODY, MM_PARAMS, MM_RET))
    assert_same(out, kernel(MM_BODY, MM_PARAMS, MM_RET, kind="AIC"))


def test_data_movement_through_vec_only_becomes_aiv():
    body = """
        t: pl.Tile[[32, 128], pl.FP32, pl.Mem.Vec] = pl.tile.load(a, [0, 0], [32, 128], target_memory=pl.Mem.Vec)
        o1: pl.Tensor[[32, 128], pl.FP32] = pl.tile.store(t, [0, 0], out)
        return o1
    """
    _, out = run(kernel(body, VEC_PARAMS, VEC_RET))
    assert_same(out, kernel(body, VEC_PARAMS, VEC_RET, kind="AIV"))


def test_mixed_kernel_rejected_listing_cube_and_vector_ops_with_lines():
    params = MM_PARAMS.replace("o: pl.Out[pl.Tensor[[64, 64], pl.FP32]]",
                               "bias: pl.Tensor[[64, 64], pl.FP32], o: pl.Out[pl.Tensor[[64, 64], pl.FP32]]")
    body = """
        a: pl.Tile[[64, 64], pl.BF16, pl.Mem.Mat] = pl.tile.load(x, [0, 0], [64, 64], target_memory=pl.Mem.Mat)
        b: pl.Tile[[64, 64], pl.BF16, pl.Mem.Mat] = pl.tile.load(w, [0, 0], [64, 64], target_memory=pl.Mem.Mat)
        a_left: pl.Tile[[64, 64], pl.BF16, pl.Mem.Left] = pl.tile.move(a, target_memory=pl.Mem.Left)
        b_right: pl.Tile[[64, 64], pl.BF16, pl.Mem.Right] = pl.tile.move(b, target_memory=pl.Mem.Right)
        c: pl.Tile[[64, 64], pl.FP32, pl.Mem.Acc] = pl.tile.matmul(a_left, b_right)
        o1: pl.Tensor[[64, 64], pl.FP32] = pl.tile.store(c, [0, 0], o)
        t: pl.Tile[[64, 64], pl.FP32, pl.Mem.Vec] = pl.tile.load(o1, [0, 0], [64, 64], target_memory=pl.Mem.Vec)
        bt: pl.Tile[[64, 64], pl.FP32, pl.Mem.Vec] = pl.tile.load(bias, [0, 0], [64, 64], target_memory=pl.Mem.Vec)
        s: pl.Tile[[64, 64], pl.FP32, pl.Mem.Vec] = pl.tile.add(t, bt)
        o2: pl.Tensor[[64, 64], pl.FP32] = pl.tile.store(s, [0, 0], o1)
        return o2
    """
    prog = parse_program(kernel(body, params, MM_RET), "before.ir", ctx=A2A3)
    with pytest.raises(CompileError) as e:
        ClassifyKernels().run(prog, A2A3)
    (d,) = e.value.diagnostics
    assert d.code == "PTOC-E0330" and d.span.line == 4  # the def line
    cube_part, vector_part = d.message.split("cube: ")[1].split("; vector: ")
    assert "tile.matmul (line 9)" in cube_part and "tile.load (line 5)" in cube_part
    assert "tile.move (line 7)" in cube_part and "tile.store (line 10)" in cube_part
    assert "tile.add (line 13)" in vector_part and "tile.load (line 11)" in vector_part
    assert "tile.store (line 14)" in vector_part and "tile.matmul" not in vector_part
    assert "no hand-off between them" in d.message
    assert "AIC" in d.hint and "AIV" in d.hint


def test_already_classified_and_non_kernel_functions_are_untouched():
    text = kernel(MM_BODY, MM_PARAMS, MM_RET, kind="AIC").replace(
        "class p:\n", "class p:\n    @pl.function(type=pl.FunctionType.Orchestration)\n"
        "    def main(self, a: pl.Tensor[[16, 16], pl.FP32]) -> pl.Tensor[[16, 16], pl.FP32]:\n"
        "        return a\n")
    prog, out = run(text)
    assert out is prog


def test_idempotent():
    _, once = run(kernel(VEC_BODY, VEC_PARAMS, VEC_RET))
    assert ClassifyKernels().run(once, A2A3) is once
