"""MaterializeTensorStrides: packed strides for ND, DN and blocked NZ views (NZ-3)."""

import pytest

from ptoc.context import CompileContext
from ptoc.diagnostics import InternalError
from ptoc.frontend.parser import parse_program
from ptoc.ir.printer import print_program
from ptoc.passes.manager import check_invariants
from ptoc.passes.MaterializeTensorStrides import MaterializeTensorStrides

CTX = CompileContext()


def run(text: str):
    prog = parse_program(text, "before.ir")
    out = MaterializeTensorStrides().run(prog, CTX)
    check_invariants(out, CTX, MaterializeTensorStrides())
    return out


def kernel(params: str, ret: str = "") -> str:
    return f"@pl.function(type=pl.FunctionType.InCore)\ndef k({params}){ret}:\n    pass\n"


def assert_same(before: str, expected: str):
    got = run(before)
    want = parse_program(expected, "expected.ir")
    assert got == want, f"got:\n{print_program(got)}\nwant:\n{print_program(want)}"


def test_nd_row_major_strides():
    assert_same(kernel("x: pl.Tensor[[16, 8192], pl.FP32]"),
                kernel("x: pl.Tensor[[16, 8192], pl.FP32, pl.TensorView(stride=[8192, 1])]"))


def test_nd_rank3_strides():
    assert_same(kernel("x: pl.Tensor[[4, 32, 64], pl.FP16]"),
                kernel("x: pl.Tensor[[4, 32, 64], pl.FP16, pl.TensorView(stride=[2048, 64, 1])]"))


def test_dn_column_vector_strides_follow_pto_format():
    # pto-format.md: DN [512, 1] has strides [1, 512]
    assert_same(kernel("x: pl.Tensor[[512, 1], pl.FP32, pl.TensorView(layout=pl.TensorLayout.DN)]"),
                kernel("x: pl.Tensor[[512, 1], pl.FP32, pl.TensorView(stride=[1, 512], layout=pl.TensorLayout.DN)]"))


def test_dn_with_batch_axis():
    assert_same(kernel("x: pl.Tensor[[3, 16, 8], pl.FP32, pl.TensorView(layout=pl.TensorLayout.DN)]"),
                kernel("x: pl.Tensor[[3, 16, 8], pl.FP32, "
                       "pl.TensorView(stride=[128, 1, 16], layout=pl.TensorLayout.DN)]"))


def test_nz3_blocked_int8_256x512():
    # NZ-3: [256, 512] INT8 blocks to [1, 16, 16, 16, 32] with strides [131072, 8192, 512, 32, 1]
    assert_same(kernel("w: pl.Tensor[[1, 16, 16, 16, 32], pl.INT8, pl.NZ]"),
                kernel("w: pl.Tensor[[1, 16, 16, 16, 32], pl.INT8, "
                       "pl.TensorView(stride=[131072, 8192, 512, 32, 1], layout=pl.TensorLayout.NZ)]"))


def test_nz3_blocked_fp32_64x16_matches_seed_store_example():
    # seed 000: Acc store into logical [64, 16] FP32 NZ -> strides [1024, 512, 128, 8, 1]
    assert_same(kernel("o: pl.Tensor[[1, 2, 4, 16, 8], pl.FP32, pl.NZ]"),
                kernel("o: pl.Tensor[[1, 2, 4, 16, 8], pl.FP32, "
                       "pl.TensorView(stride=[1024, 512, 128, 8, 1], layout=pl.TensorLayout.NZ)]"))


def test_dynamic_extent_gives_stride_expression():
    assert_same(kernel("x: pl.Tensor[[M, N], pl.FP32]"),
                kernel("x: pl.Tensor[[M, N], pl.FP32, pl.TensorView(stride=[N, 1])]"))


def test_explicit_strides_are_kept():
    src = kernel("x: pl.Tensor[[16, 16], pl.FP32, pl.TensorView(stride=[32, 1])]")
    assert_same(src, src)


def test_orchestration_functions_untouched():
    src = "@pl.function(type=pl.FunctionType.Orchestration)\ndef main(x: pl.Tensor[[16, 16], pl.FP32]):\n    pass\n"
    assert_same(src, src)


def test_plain_function_gets_strides_like_a_kernel():
    # A function without a type is rewritten too (PyPTO materializes every function's tensors).
    assert_same("@pl.function\ndef f(x: pl.Tensor[[4, 8, 32], pl.FP16]):\n    pass\n",
                "@pl.function\ndef f(x: pl.Tensor[[4, 8, 32], pl.FP16, pl.TensorView(stride=[256, 32, 1])]):\n    pass\n")


def test_unblocked_nz_view_is_an_internal_error():
    with pytest.raises(InternalError, match="unblocked rank-2 NZ"):
        run(kernel("w: pl.Tensor[[256, 512], pl.INT8, pl.NZ]"))


def test_idempotent():
    once = run(kernel("x: pl.Tensor[[16, 8192], pl.FP32]"))
    assert MaterializeTensorStrides().run(once, CTX) is once
