"""The GlobalTensor header (codegen/global_tensor.py) against pto-format.md, "What PTOAS makes of a view".

Rules proved here:
- always 5-D, right-aligned: shape = partition sizes | parameter shape, stride = parent strides; a missing
  leading dim gets shape 1 and stride shape[i+1] * stride[i+1] over the parent's shape; runtime values are
  pto::DYNAMIC; element types from the dtype table;
- the three pto-format.md examples (ND, DN, NZ INT8) and seed 000's Acc->NZ store (NZ-7, NZ-14), exactly;
- NZ entries satisfy pto-isa's checks shape[3] == 16 and shape[4] == 32 / sizeof(T);
- every example's header compiles against a pto-isa stand-in (tests/codegen/pto_isa_stub) with
  `g++ -std=c++20 -fsyntax-only`, included twice in one translation unit, every type instantiated;
- user errors are diagnostics (PTOC-E0420 dtype, E0421 rank, E0422 int range), broken invariants are
  InternalErrors; the output is byte-identical across runs and hash seeds.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ptoc import __version__
from ptoc.codegen.global_tensor import GlobalTensorEntry, _check_nz, _pad, emit_header, kernel_types
from ptoc.context import CompileContext
from ptoc.diagnostics import CODES, CompileError, InternalError
from ptoc.driver import frontend, lower
from ptoc.ir import dtypes
from ptoc.ir.nodes import ConstInt, TensorType

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "examples").glob("*.ir"))
STUB = Path(__file__).resolve().parent / "pto_isa_stub"
GXX = shutil.which("g++")
needs_gxx = pytest.mark.skipif(GXX is None, reason="g++ not found on PATH: the generated headers cannot be "
                                                   "compile-checked (install g++ >= 10 to run these tests)")
CTX = CompileContext()
D = None  # pto::DYNAMIC in the expectation tables


def lowered(text: str, name: str = "input.ir", ctx: CompileContext = CTX):
    return lower(frontend(text, name, ctx), ctx).program


def lowered_example(path: Path):
    """The example after the whole pipeline. Every example compiles, so a pipeline failure here is a
    failure of the test, never a skip."""
    return lowered(path.read_text(), f"examples/{path.name}")


def header(text: str, name: str = "input.ir", ctx: CompileContext = CTX) -> str:
    return emit_header(lowered(text, name, ctx), ctx, name, __version__)


def lines(h: str) -> list[str]:
    return h.splitlines()


def kernel(params: str, ret: str, body: str, name: str = "k", ftype: str = "InCore") -> str:
    return ("import pypto.language as pl\n\n@pl.program\nclass t:\n"
            f"    @pl.function(type=pl.FunctionType.{ftype})\n    def {name}(self, {params}) -> {ret}:\n"
            + "".join(f"        {b}\n" for b in body.strip().splitlines()))


# --------------------------------------------------------------------------------------------------
# Expected types, derived by hand from the rules (not from the emitter)
# --------------------------------------------------------------------------------------------------


def nd(rows, cols, win=None):
    """ND [rows, cols] with packed strides [cols, 1]: (shape, stride) of the parameter or a window."""
    r, c = win if win is not None else (rows, cols)
    total = None if rows is None else rows * cols
    return (1, 1, 1, r, c), (total, total, total, cols, 1)


def dn(rows, win_rows=None):
    """[rows, 1] emitted as DN with strides [1, rows]."""
    return (1, 1, 1, win_rows or rows, 1), (rows, rows, rows, 1, rows)


def nz(b, cb, rb, c0, win=None):
    """Blocked NZ [b, cb, rb, 16, c0] with row-major strides (NZ-3)."""
    shape = win if win is not None else (b, cb, rb, 16, c0)
    return shape, (cb * rb * 16 * c0, rb * 16 * c0, 16 * c0, c0, 1)


# example -> kernel namespace -> entry name -> (C++ element type, (shape, stride), layout)
EXPECTED = {
    "vector_add": {"add_kernel": {
        "a": ("float", nd(64, 64), "ND"), "b": ("float", nd(64, 64), "ND"), "out": ("float", nd(64, 64), "ND"),
        "ta_pview": ("float", nd(64, 64), "ND"), "tb_pview": ("float", nd(64, 64), "ND"),
        "out_1_pview": ("float", nd(64, 64), "ND")}},
    # two kernels outlined from the pl.at scopes of one orchestration function
    "scoped_add_scale": {
        "main_incore_0": {
            "a": ("float", nd(64, 128), "ND"), "b": ("float", nd(64, 128), "ND"),
            "s_out": ("float", nd(64, 128), "ND"),
            "a_tile_pview": ("float", nd(64, 128), "ND"), "b_tile_pview": ("float", nd(64, 128), "ND"),
            "s_store_pview": ("float", nd(64, 128), "ND")},
        "main_incore_1": {
            "out": ("float", nd(64, 128), "ND"), "s": ("float", nd(64, 128), "ND"),
            "t_pview": ("float", nd(64, 128, (16, 128)), "ND"),
            "out_2_pview": ("float", nd(64, 128, (16, 128)), "ND")}},
    # the first scope's result reaches the second through the pl.create_tensor buffer `tmp`
    "staged_buffer": {
        "main_incore_0": {
            "tmp": ("float", nd(64, 128), "ND"), "a": ("float", nd(64, 128), "ND"), "b": ("float", nd(64, 128), "ND"),
            "ta_pview": ("float", nd(64, 128, (16, 128)), "ND"), "tb_pview": ("float", nd(64, 128, (16, 128)), "ND"),
            "tmp_2_pview": ("float", nd(64, 128, (16, 128)), "ND")},
        "main_incore_1": {
            "out": ("float", nd(64, 128), "ND"), "tmp_3": ("float", nd(64, 128), "ND"),
            "t_pview": ("float", nd(64, 128, (16, 128)), "ND"),
            "out_2_pview": ("float", nd(64, 128, (16, 128)), "ND")}},
    # a matmul scope (64-wide K chunks, as matmul_bf16) and a vector scope reading its product
    "scoped_matmul_relu": {
        "main_incore_0": {
            "a": ("bfloat16_t", nd(64, 256), "ND"), "b": ("bfloat16_t", nd(256, 128), "ND"),
            "prod": ("float", nd(64, 128), "ND"),
            "a0_pview": ("bfloat16_t", nd(64, 256, (64, 64)), "ND"), "b0_pview": ("bfloat16_t", nd(256, 128, (64, 128)), "ND"),
            "ak_pview": ("bfloat16_t", nd(64, 256, (64, 64)), "ND"), "bk_pview": ("bfloat16_t", nd(256, 128, (64, 128)), "ND"),
            "prod_1_pview": ("float", nd(64, 128), "ND")},
        "main_incore_1": {
            "out": ("float", nd(64, 128), "ND"), "prod_1": ("float", nd(64, 128), "ND"),
            "t_pview": ("float", nd(64, 128, (16, 128)), "ND"),
            "out_2_pview": ("float", nd(64, 128, (16, 128)), "ND")}},
    # one kernel outlined from a pl.at scope whose tile shapes are named constants (CHUNK = 32 rows)
    "scoped_chunked_add": {"main_incore_0": {
        "out": ("float", nd(256, 64), "ND"), "x": ("float", nd(256, 64), "ND"), "y": ("float", nd(256, 64), "ND"),
        "a_pview": ("float", nd(256, 64, (32, 64)), "ND"), "b_pview": ("float", nd(256, 64, (32, 64)), "ND"),
        "out_2_pview": ("float", nd(256, 64, (32, 64)), "ND")}},
    # the mixed scope split into a cube and a vector kernel; both take every parameter of the scope and the
    # a2a3 GM slot buffer (rank 1, [1])
    "linear_relu": {
        "main_incore_0_aic": {
            "x": ("bfloat16_t", nd(16, 128), "ND"), "out": ("float", nd(16, 128), "ND"),
            "w": ("bfloat16_t", nd(128, 128), "ND"), "__gm_pipe_buffer": ("float", nd(1, 1), "ND"),
            "x_mat_pview": ("bfloat16_t", nd(16, 128), "ND"),
            "w_mat_pview": ("bfloat16_t", nd(128, 128, (128, 64)), "ND")},
        "main_incore_0_aiv": {
            "x": ("bfloat16_t", nd(16, 128), "ND"), "out": ("float", nd(16, 128), "ND"),
            "w": ("bfloat16_t", nd(128, 128), "ND"), "__gm_pipe_buffer": ("float", nd(1, 1), "ND"),
            "out_2_pview": ("float", nd(16, 128, (16, 64)), "ND")}},
    # the split pair: the cube kernel as in linear_relu; each vector lane stores an 8 x 64 half of a 16 x 64 block
    "linear_relu_split": {
        "lr_aic": {
            "x": ("bfloat16_t", nd(16, 128), "ND"), "w": ("bfloat16_t", nd(128, 128), "ND"),
            "out": ("float", nd(16, 128), "ND"), "__gm_pipe_buffer": ("float", nd(1, 1), "ND"),
            "x_mat_pview": ("bfloat16_t", nd(16, 128), "ND"),
            "w_mat_pview": ("bfloat16_t", nd(128, 128, (128, 64)), "ND")},
        "lr_aiv": {
            "x": ("bfloat16_t", nd(16, 128), "ND"), "w": ("bfloat16_t", nd(128, 128), "ND"),
            "out": ("float", nd(16, 128), "ND"), "__gm_pipe_buffer": ("float", nd(1, 1), "ND"),
            "o2_pview": ("float", nd(16, 128, (8, 64)), "ND")}},
    # the same pair reached from one mixed kernel with the split attribute
    "linear_relu_auto_split": None,
    # an attention block: the AIC loads and stores every tensor it uses, the AIV only takes the parameters
    "attention_block": {
        "attention_aic": {
            "q": ("half", nd(16, 64), "ND"), "kt": ("half", nd(64, 64), "ND"), "v": ("half", nd(64, 64), "ND"),
            "out": ("float", nd(16, 64), "ND"), "__gm_pipe_buffer": ("float", nd(1, 1), "ND"),
            "q_mat_pview": ("half", nd(16, 64), "ND"), "kt_mat_pview": ("half", nd(64, 64), "ND"),
            "v_mat_pview": ("half", nd(64, 64), "ND"), "out_1_pview": ("float", nd(16, 64), "ND")},
        "attention_aiv": {
            "q": ("half", nd(16, 64), "ND"), "kt": ("half", nd(64, 64), "ND"), "v": ("half", nd(64, 64), "ND"),
            "out": ("float", nd(16, 64), "ND"), "__gm_pipe_buffer": ("float", nd(1, 1), "ND")}},
    # a mixed kernel with an NZ INT8 weight split into its cube and vector kernels
    "quant_linear_nz": {
        "quant_linear_aic": {
            "x": ("int8_t", nd(16, 256), "ND"), "w": ("int8_t", nz(1, 8, 16, 32), "NZ"),
            "scale": ("float", nd(1, 256), "ND"), "out": ("bfloat16_t", nd(16, 256), "ND"),
            "__gm_pipe_buffer": ("float", nd(1, 1), "ND"),
            "x_mat_pview": ("int8_t", nd(16, 256), "ND"),
            "w_mat_pview": ("int8_t", nz(1, 8, 16, 32, (1, 2, 16, 16, 32)), "NZ")},
        "quant_linear_aiv": {
            "x": ("int8_t", nd(16, 256), "ND"), "w": ("int8_t", nz(1, 8, 16, 32), "NZ"),
            "scale": ("float", nd(1, 256), "ND"), "out": ("bfloat16_t", nd(16, 256), "ND"),
            "__gm_pipe_buffer": ("float", nd(1, 1), "ND"),
            "s_pview": ("float", nd(1, 256, (1, 64)), "ND"),
            "out_2_pview": ("bfloat16_t", nd(16, 256, (16, 64)), "ND")}},
    "softmax_rows": {"softmax_kernel": {
        "x": ("float", nd(64, 128), "ND"), "y": ("float", nd(64, 128), "ND"),
        "row_max_out": ("float", dn(64), "DN"),
        "xt_pview": ("float", nd(64, 128, (16, 128)), "ND"),
        "y_store_pview": ("float", nd(64, 128, (16, 128)), "ND"),
        "m_store_pview": ("float", dn(64, 16), "DN")}},
    "matmul_bf16": {"mm_kernel": {
        "a": ("bfloat16_t", nd(64, 256), "ND"), "b": ("bfloat16_t", nd(256, 128), "ND"),
        "c": ("float", nd(64, 128), "ND"),
        "a0_pview": ("bfloat16_t", nd(64, 256, (64, 64)), "ND"), "b0_pview": ("bfloat16_t", nd(256, 128, (64, 128)), "ND"),
        "ak_pview": ("bfloat16_t", nd(64, 256, (64, 64)), "ND"), "bk_pview": ("bfloat16_t", nd(256, 128, (64, 128)), "ND"),
        "c_1_pview": ("float", nd(64, 128), "ND")}},
    "nz_weight_int8": {"mm_nz": {
        # w: logical [256, 512] INT8 -> [1, 512/32, 256/16, 16, 32] (the NZ-14 example);
        # each loop step loads a 256 x 256 window -> [1, 8, 16, 16, 32]
        "x": ("int8_t", nd(64, 256), "ND"), "w": ("int8_t", nz(1, 16, 16, 32), "NZ"),
        "out": ("int32_t", nd(64, 512), "ND"),
        "x_mat_pview": ("int8_t", nd(64, 256), "ND"),
        "w_mat_pview": ("int8_t", nz(1, 16, 16, 32, (1, 8, 16, 16, 32)), "NZ"),
        "out_store_pview": ("int32_t", nd(64, 512, (64, 256)), "ND")}},
    "grouped_matmul_nz": {"gmm_kernel": {
        # w: logical [1024, 2048] INT8 -> [1, 64, 64, 16, 32]; window 128 x 256 -> [1, 8, 8, 16, 32]
        "x": ("int8_t", nd(64, 1024), "ND"), "w": ("int8_t", nz(1, 64, 64, 32), "NZ"),
        "out": ("int32_t", nd(64, 2048), "ND"),
        "x_first_pview": ("int8_t", nd(64, 1024, (64, 128)), "ND"),
        "w_first_pview": ("int8_t", nz(1, 64, 64, 32, (1, 8, 8, 16, 32)), "NZ"),
        "x_mat_pview": ("int8_t", nd(64, 1024, (64, 128)), "ND"),
        "w_mat_pview": ("int8_t", nz(1, 64, 64, 32, (1, 8, 8, 16, 32)), "NZ"),
        # pl.pipeline(stage=2): the second clone of the K-loop body and the one leftover iteration
        "x_mat_1_pview": ("int8_t", nd(64, 1024, (64, 128)), "ND"),
        "w_mat_1_pview": ("int8_t", nz(1, 64, 64, 32, (1, 8, 8, 16, 32)), "NZ"),
        "x_mat_2_pview": ("int8_t", nd(64, 1024, (64, 128)), "ND"),
        "w_mat_2_pview": ("int8_t", nz(1, 64, 64, 32, (1, 8, 8, 16, 32)), "NZ"),
        "out_1_pview": ("int32_t", nd(64, 2048, (64, 256)), "ND")}},
    "acc_store_nz": {"scores": {
        "q": ("bfloat16_t", nd(64, 128), "ND"), "k": ("bfloat16_t", nd(128, 16), "ND"),
        "s": ("float", nz(1, 2, 4, 8), "NZ"),
        "q_mat_pview": ("bfloat16_t", nd(64, 128), "ND"), "k_mat_pview": ("bfloat16_t", nd(128, 16), "ND"),
        "s_1_pview": ("float", nz(1, 2, 4, 8), "NZ")}},
    # AutoTileMatmulL0 splits the [512, 512] result into a2a3's eight [128, 256] blocks (L0C 128 KiB), stored in
    # column-block order: block i at rows (i % 4) * 128, columns (i // 4) * 256; the last store keeps c_1
    "matmul_l0_tiled": {"mm_kernel": {
        "a": ("bfloat16_t", nd(512, 256), "ND"), "b": ("bfloat16_t", nd(256, 512), "ND"),
        "c": ("float", nd(512, 512), "ND"),
        "a_mat_pview": ("bfloat16_t", nd(512, 256), "ND"), "b_mat_pview": ("bfloat16_t", nd(256, 512), "ND"),
        **{f"c_1_t{i}_pview": ("float", nd(512, 512, (128, 256)), "ND") for i in range(7)},
        "c_1_pview": ("float", nd(512, 512, (128, 256)), "ND")}},
    "dynamic_rows": {"scale_rows": {
        "x": ("half", nd(None, 64, (D, 64)), "ND"), "y": ("half", nd(None, 64, (D, 64)), "ND"),
        "xt_pview": ("half", nd(None, 64, (D, 64)), "ND"),
        "y_store_pview": ("half", nd(None, 64, (D, 64)), "ND")}},
}
EXPECTED["linear_relu_auto_split"] = EXPECTED["linear_relu_split"]


def spell(v) -> str:
    return "pto::DYNAMIC" if v is None else str(v)


def spelled_type(cpp: str, shape, stride, layout: str) -> str:
    return (f"pto::GlobalTensor<{cpp}, pto::Shape<{', '.join(map(spell, shape))}>, "
            f"pto::Stride<{', '.join(map(spell, stride))}>, pto::Layout::{layout}>")


def type_checks(ns: str, name: str, cpp: str, shape, stride, layout: str) -> str:
    """C++ that forms the type (member access instantiates it) and compares it with the spelled-out one."""
    g = f"{ns}::{name}_Global"
    out = [f"static_assert(std::is_same_v<{g}, {spelled_type(cpp, shape, stride, layout)}>);",
           f"static_assert(std::is_same_v<{g}::DType, {cpp}>);",
           f"static_assert(std::is_same_v<{g}::Shape, {ns}::{name}_Shape>);",
           f"static_assert(std::is_same_v<{g}::Stride, {ns}::{name}_Stride>);",
           f"static_assert({g}::layout == pto::Layout::{layout});"]
    for i in range(5):
        out.append(f"static_assert({g}::staticShape[{i}] == {spell(shape[i])});")
        out.append(f"static_assert({g}::staticStride[{i}] == {spell(stride[i])});")
    return "\n".join(out) + "\n"


def compile_tu(tmp_path: Path, header_text: str, body: str = "", includes: int = 2):
    (tmp_path / "gen.h").write_text(header_text)
    tu = '#include "gen.h"\n' * includes + "#include <type_traits>\n" + body
    (tmp_path / "tu.cpp").write_text(tu)
    return subprocess.run([GXX, "-std=c++20", "-fsyntax-only", "-I", str(STUB), str(tmp_path / "tu.cpp")],
                          capture_output=True, text=True, timeout=120)


def assert_compiles(tmp_path: Path, header_text: str, body: str = "") -> None:
    r = compile_tu(tmp_path, header_text, body)
    assert r.returncode == 0, f"g++ rejected the header:\n{r.stderr}\n--- header ---\n{header_text}"


# --------------------------------------------------------------------------------------------------
# pto-format.md examples, exactly
# --------------------------------------------------------------------------------------------------

ND_16x8192 = kernel(
    "x: pl.Tensor[[16, 8192], pl.FP32], out: pl.Out[pl.Tensor[[16, 512], pl.FP32]]", "pl.Tensor[[16, 512], pl.FP32]", """
xt: pl.Tile[[16, 512], pl.FP32, pl.Mem.Vec] = pl.tile.load(x, [0, 512], [16, 512], target_memory=pl.Mem.Vec)
out_1: pl.Tensor[[16, 512], pl.FP32] = pl.tile.store(xt, [0, 0], out)
return out_1
""")

DN_512x1 = kernel(
    "v: pl.Tensor[[512, 1], pl.FP32], out: pl.Out[pl.Tensor[[8, 1], pl.FP32]]", "pl.Tensor[[8, 1], pl.FP32]", """
vt: pl.Tile[[8, 1], pl.FP32, pl.Mem.Vec] = pl.tile.load(v, [8, 0], [8, 1], target_memory=pl.Mem.Vec)
out_1: pl.Tensor[[8, 1], pl.FP32] = pl.tile.store(vt, [0, 0], out)
return out_1
""")

NZ_INT8_256x512 = kernel(
    "x: pl.Tensor[[64, 256], pl.INT8], w: pl.Tensor[[256, 512], pl.INT8, pl.NZ], "
    "out: pl.Out[pl.Tensor[[64, 128], pl.INT32]]", "pl.Tensor[[64, 128], pl.INT32]", """
x_mat: pl.Tile[[64, 256], pl.INT8, pl.Mem.Mat] = pl.tile.load(x, [0, 0], [64, 256], target_memory=pl.Mem.Mat)
w_mat: pl.Tile[[256, 128], pl.INT8, pl.Mem.Mat] = pl.tile.load(w, [0, 128], [256, 128], target_memory=pl.Mem.Mat)
x_left: pl.Tile[[64, 256], pl.INT8, pl.Mem.Left] = pl.tile.move(x_mat, target_memory=pl.Mem.Left)
w_right: pl.Tile[[256, 128], pl.INT8, pl.Mem.Right] = pl.tile.move(w_mat, target_memory=pl.Mem.Right)
acc: pl.Tile[[64, 128], pl.INT32, pl.Mem.Acc] = pl.tile.matmul(x_left, w_right)
out_1: pl.Tensor[[64, 128], pl.INT32] = pl.tile.store(acc, [0, 0], out)
return out_1
""")


def test_pto_format_nd_16x8192_window_16x512():
    ls = lines(header(ND_16x8192))
    assert "using xt_pview_Shape = pto::Shape<1, 1, 1, 16, 512>;" in ls
    assert "using xt_pview_Stride = pto::Stride<131072, 131072, 131072, 8192, 1>;" in ls
    assert ("using xt_pview_Global = pto::GlobalTensor<float, xt_pview_Shape, xt_pview_Stride, "
            "pto::Layout::ND>;") in ls
    # the parameter: the whole tensor, same strides
    assert "using x_Shape = pto::Shape<1, 1, 1, 16, 8192>;" in ls
    assert "using x_Stride = pto::Stride<131072, 131072, 131072, 8192, 1>;" in ls


def test_pto_format_dn_512x1_window_8x1_pads_with_parent_shape():
    ls = lines(header(DN_512x1))
    assert "using vt_pview_Shape = pto::Shape<1, 1, 1, 8, 1>;" in ls
    # padded strides come from the parent's 512 rows, not from the 8-row window
    assert "using vt_pview_Stride = pto::Stride<512, 512, 512, 1, 512>;" in ls
    assert "using vt_pview_Global = pto::GlobalTensor<float, vt_pview_Shape, vt_pview_Stride, pto::Layout::DN>;" in ls
    assert "using v_Stride = pto::Stride<512, 512, 512, 1, 512>;" in ls
    # the [8, 1] output is DN too, strides [1, 8]
    assert "using out_Stride = pto::Stride<8, 8, 8, 1, 8>;" in ls


def test_pto_format_nz_int8_logical_256x512():
    ls = lines(header(NZ_INT8_256x512))
    assert "using w_Shape = pto::Shape<1, 16, 16, 16, 32>;" in ls
    assert "using w_Stride = pto::Stride<131072, 8192, 512, 32, 1>;" in ls
    assert "using w_Global = pto::GlobalTensor<int8_t, w_Shape, w_Stride, pto::Layout::NZ>;" in ls
    # the 256 x 128 window at column 128: NZ-4 sizes [1, 128/32, 256/16, 16, 32], parent strides
    assert "using w_mat_pview_Shape = pto::Shape<1, 4, 16, 16, 32>;" in ls
    assert "using w_mat_pview_Stride = pto::Stride<131072, 8192, 512, 32, 1>;" in ls


def test_seed000_acc_store_nz_global_tensor():
    prog = lowered_example(ROOT / "examples" / "acc_store_nz.ir")
    ls = lines(emit_header(prog, CTX, "examples/acc_store_nz.ir", __version__))
    assert "using s_1_pview_Shape = pto::Shape<1, 2, 4, 16, 8>;" in ls
    assert "using s_1_pview_Stride = pto::Stride<1024, 512, 128, 8, 1>;" in ls
    assert "using s_1_pview_Global = pto::GlobalTensor<float, s_1_pview_Shape, s_1_pview_Stride, pto::Layout::NZ>;" in ls


@needs_gxx
def test_pto_format_examples_are_the_spelled_out_types(tmp_path):
    cases = [
        (ND_16x8192, "xt_pview", "pto::GlobalTensor<float, pto::Shape<1, 1, 1, 16, 512>, "
                                 "pto::Stride<131072, 131072, 131072, 8192, 1>, pto::Layout::ND>"),
        (DN_512x1, "vt_pview", "pto::GlobalTensor<float, pto::Shape<1, 1, 1, 8, 1>, "
                               "pto::Stride<512, 512, 512, 1, 512>, pto::Layout::DN>"),
        (NZ_INT8_256x512, "w", "pto::GlobalTensor<int8_t, pto::Shape<1, 16, 16, 16, 32>, "
                               "pto::Stride<131072, 8192, 512, 32, 1>, pto::Layout::NZ>"),
    ]
    for i, (text, name, spelled) in enumerate(cases):
        d = tmp_path / str(i)
        d.mkdir()
        assert_compiles(d, header(text), f"static_assert(std::is_same_v<k::{name}_Global, {spelled}>);\n"
                                         f"static_assert(k::{name}_Global::layout == k::{name}_Global::layout);\n")
    prog = lowered_example(ROOT / "examples" / "acc_store_nz.ir")
    d = tmp_path / "seed000"
    d.mkdir()
    seed000 = ("pto::GlobalTensor<float, pto::Shape<1, 2, 4, 16, 8>, pto::Stride<1024, 512, 128, 8, 1>, "
               "pto::Layout::NZ>")
    assert_compiles(d, emit_header(prog, CTX, "examples/acc_store_nz.ir", __version__),
                    f"static_assert(std::is_same_v<scores::s_1_pview_Global, {seed000}>);\n"
                    "static_assert(scores::s_1_pview_Global::staticShape[3] == 16);\n")


# --------------------------------------------------------------------------------------------------
# Every example: expected entries, NZ checks, compiles
# --------------------------------------------------------------------------------------------------


def test_every_example_has_an_expectation():
    assert sorted(EXPECTED) == sorted(p.stem for p in EXAMPLES)


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_example_entries_match_the_rules(path):
    prog = lowered_example(path)
    got = {k.namespace: {e.name: (e.cpp_type, (e.shape, e.stride), e.layout) for e in k.entries}
           for k in kernel_types(prog, CTX)}
    assert got == EXPECTED[path.stem]


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_example_nz_entries_pass_pto_isa_checks(path):
    prog = lowered_example(path)
    sizes = {d.cpp: d.bytes for d in dtypes.ALL if d.cpp}
    for k in kernel_types(prog, CTX):
        for e in k.entries:
            if e.layout == "NZ":
                assert e.shape[3] == 16, e
                assert e.shape[4] * sizes[e.cpp_type] == 32, e
    # and the table says which examples have NZ entries at all
    has_nz = any(v[2] == "NZ" for ns in EXPECTED[path.stem].values() for v in ns.values())
    assert has_nz == (path.stem in ("nz_weight_int8", "grouped_matmul_nz", "acc_store_nz", "quant_linear_nz"))


@needs_gxx
@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_example_header_compiles_against_pto_isa_stub(path, tmp_path):
    prog = lowered_example(path)
    h = emit_header(prog, CTX, f"examples/{path.name}", __version__)
    body = "".join(type_checks(ns, name, cpp, shape, stride, layout)
                   for ns, entries in EXPECTED[path.stem].items()
                   for name, (cpp, (shape, stride), layout) in entries.items())
    assert_compiles(tmp_path, h, body)


# --------------------------------------------------------------------------------------------------
# The stand-in itself: it must reject what pto-isa rejects, or the compile tests prove nothing
# --------------------------------------------------------------------------------------------------

STUB_PRELUDE = "#pragma once\n#include <cstdint>\n#include <pto/pto-inst.hpp>\n"


@needs_gxx
@pytest.mark.parametrize("bad, message", [
    ("using G = pto::GlobalTensor<int8_t, pto::Shape<1, 16, 16, 8, 32>, pto::Stride<1, 1, 1, 1, 1>, "
     "pto::Layout::NZ>; static_assert(G::layout == pto::Layout::NZ);", "shape[3] must be 16"),
    ("using G = pto::GlobalTensor<float, pto::Shape<1, 2, 4, 16, 16>, pto::Stride<1, 1, 1, 1, 1>, "
     "pto::Layout::NZ>; static_assert(G::layout == pto::Layout::NZ);", "shape[4] must be 32 / sizeof(T)"),
    ("using G = pto::GlobalTensor<half, pto::Shape<1, 2, 4, 16, 32>, pto::Stride<1, 1, 1, 1, 1>, "
     "pto::Layout::NZ>; static_assert(G::layout == pto::Layout::NZ);", "shape[4] must be 32 / sizeof(T)"),
    ("using S = pto::Shape<1, 16, 512>; static_assert(S::staticShape[0] == 1);", "wrong number of template"),
    ("using G = pto::GlobalTensor<float, pto::Stride<1, 1, 1, 1, 1>, pto::Shape<1, 1, 1, 1, 1>, "
     "pto::Layout::ND>; static_assert(G::layout == pto::Layout::ND);", "incomplete"),
])
def test_stub_rejects_what_pto_isa_rejects(tmp_path, bad, message):
    r = compile_tu(tmp_path, STUB_PRELUDE, bad + "\n", includes=1)
    assert r.returncode != 0 and message in r.stderr, r.stderr


@needs_gxx
def test_stub_element_types_have_pto_isa_sizes(tmp_path):
    body = "".join(f"static_assert(sizeof({d.cpp}) == {d.bytes});\n" for d in dtypes.ALL if d.cpp)
    assert_compiles(tmp_path, STUB_PRELUDE, body)


@needs_gxx
def test_header_needs_cstdint_before_pto_isa(tmp_path):
    # the stand-in, like pto-isa's type header, uses uint8_t without including <cstdint>
    r = compile_tu(tmp_path, "#include <pto/pto-inst.hpp>\n", includes=1)
    assert r.returncode != 0 and "uint8_t" in r.stderr


# --------------------------------------------------------------------------------------------------
# Padding, dynamic values, layouts
# --------------------------------------------------------------------------------------------------


def test_pad_rules():
    # rank 2: three leading dims of shape 1, stride shape[i+1] * stride[i+1]
    assert _pad((16, 8192), (8192, 1), (16, 512)) == ((1, 1, 1, 16, 512), (131072, 131072, 131072, 8192, 1))
    # rank 3 DN with a batch axis: [3, 16, 8] strides [128, 1, 16]
    assert _pad((3, 16, 8), (128, 1, 16), (1, 16, 8)) == ((1, 1, 1, 16, 8), (384, 384, 128, 1, 16))
    # rank 5 passes through
    assert _pad((1, 2, 4, 16, 8), (1024, 512, 128, 8, 1), (1, 2, 4, 16, 8)) == \
        ((1, 2, 4, 16, 8), (1024, 512, 128, 8, 1))
    # a dynamic leading dim makes every padded stride above it dynamic, not the strides below
    assert _pad((None, 16, 64), (1024, 64, 1), (1, 16, 64)) == ((1, 1, 1, 16, 64), (None, None, 1024, 64, 1))
    # a dynamic inner stride propagates into the padding
    assert _pad((4, 64), (None, 1), (4, 64)) == ((1, 1, 1, 4, 64), (None, None, None, None, 1))
    # rank 1 and rank 0
    assert _pad((64,), (1,), (16,)) == ((1, 1, 1, 1, 16), (64, 64, 64, 64, 1))
    assert _pad((), (), ()) == ((1, 1, 1, 1, 1), (1, 1, 1, 1, 1))


def test_dynamic_rows_are_pto_dynamic():
    prog = lowered_example(ROOT / "examples" / "dynamic_rows.ir")
    ls = lines(emit_header(prog, CTX, "examples/dynamic_rows.ir", __version__))
    assert "using x_Shape = pto::Shape<1, 1, 1, pto::DYNAMIC, 64>;" in ls
    assert "using x_Stride = pto::Stride<pto::DYNAMIC, pto::DYNAMIC, pto::DYNAMIC, 64, 1>;" in ls
    # the load's valid rows `rows` = min(M - r, 32) is a runtime size
    assert "using xt_pview_Shape = pto::Shape<1, 1, 1, pto::DYNAMIC, 64>;" in ls
    assert "using xt_pview_Global = pto::GlobalTensor<half, xt_pview_Shape, xt_pview_Stride, pto::Layout::ND>;" in ls


def test_rank3_dn_tensor_through_the_pipeline():
    text = kernel(
        "v: pl.Tensor[[3, 16, 8], pl.FP32, pl.TensorView(layout=pl.TensorLayout.DN)], "
        "out: pl.Out[pl.Tensor[[16, 8], pl.FP32]]", "pl.Tensor[[16, 8], pl.FP32]", """
t: pl.Tile[[16, 8], pl.FP32, pl.Mem.Vec] = pl.tile.load(v, [1, 0, 0], [1, 16, 8], target_memory=pl.Mem.Vec)
out_1: pl.Tensor[[16, 8], pl.FP32] = pl.tile.store(t, [0, 0], out)
return out_1
""")
    ls = lines(header(text))  # the pipeline takes a rank-3 DN load: a failure is a failure, not a skip
    assert "using v_Shape = pto::Shape<1, 1, 3, 16, 8>;" in ls
    assert "using v_Stride = pto::Stride<384, 384, 128, 1, 16>;" in ls
    assert "using v_Global = pto::GlobalTensor<float, v_Shape, v_Stride, pto::Layout::DN>;" in ls


@pytest.mark.parametrize("dt", [d for d in dtypes.ALL if d.cpp], ids=lambda d: d.name)
def test_element_types_come_from_the_dtype_table(dt):
    text = kernel(f"q: pl.Tensor[[16, 64], pl.{dt.name}], x: pl.Tensor[[16, 64], pl.FP32], "
                  "out: pl.Out[pl.Tensor[[16, 64], pl.FP32]]", "pl.Tensor[[16, 64], pl.FP32]", """
xt: pl.Tile[[16, 64], pl.FP32, pl.Mem.Vec] = pl.tile.load(x, [0, 0], [16, 64], target_memory=pl.Mem.Vec)
out_1: pl.Tensor[[16, 64], pl.FP32] = pl.tile.store(xt, [0, 0], out)
return out_1
""")
    ls = lines(header(text))
    assert f"using q_Global = pto::GlobalTensor<{dt.cpp}, q_Shape, q_Stride, pto::Layout::ND>;" in ls


# --------------------------------------------------------------------------------------------------
# User errors and broken invariants
# --------------------------------------------------------------------------------------------------


def unused_param_kernel(param: str) -> str:
    return kernel(f"q: {param}, x: pl.Tensor[[16, 64], pl.FP32], out: pl.Out[pl.Tensor[[16, 64], pl.FP32]]",
                  "pl.Tensor[[16, 64], pl.FP32]", """
xt: pl.Tile[[16, 64], pl.FP32, pl.Mem.Vec] = pl.tile.load(x, [0, 0], [16, 64], target_memory=pl.Mem.Vec)
out_1: pl.Tensor[[16, 64], pl.FP32] = pl.tile.store(xt, [0, 0], out)
return out_1
""")


@pytest.mark.parametrize("dt", [d.name for d in dtypes.ALL if d.cpp is None])
def test_dtype_without_cpp_spelling_is_e0420(dt):
    with pytest.raises(CompileError) as ei:
        header(unused_param_kernel(f"pl.Tensor[[16, 64], pl.{dt}]"), "bad.ir")
    (d,) = ei.value.diagnostics
    assert d.code == "PTOC-E0420" and d.code in CODES
    assert f"pl.{dt}" in d.message and "q" in d.message
    assert d.span is not None and d.span.file == "bad.ir" and d.span.line == 6
    assert d.hint


def test_rank6_tensor_is_e0421():
    with pytest.raises(CompileError) as ei:
        header(unused_param_kernel("pl.Tensor[[2, 2, 2, 2, 16, 64], pl.FP32]"))
    (d,) = ei.value.diagnostics
    assert d.code == "PTOC-E0421" and d.code in CODES and "rank 6" in d.message


def test_stride_beyond_int_is_e0422_once_per_tensor():
    # [65536, 65536] INT8: the padded strides are 65536 * 65536 = 2**32, which no C++ int holds
    text = kernel("x: pl.Tensor[[65536, 65536], pl.INT8], out: pl.Out[pl.Tensor[[16, 64], pl.INT8]]",
                  "pl.Tensor[[16, 64], pl.INT8]", """
xt: pl.Tile[[16, 64], pl.INT8, pl.Mem.Vec] = pl.tile.load(x, [0, 0], [16, 64], target_memory=pl.Mem.Vec)
out_1: pl.Tensor[[16, 64], pl.INT8] = pl.tile.store(xt, [0, 0], out)
return out_1
""")
    with pytest.raises(CompileError) as ei:
        header(text)
    (d,) = ei.value.diagnostics  # not again for the xt window of the same tensor
    assert d.code == "PTOC-E0422" and d.code in CODES and str(2**32) in d.message


def test_nz_check_violations_are_internal_errors():
    good = GlobalTensorEntry("w", "", "float", (1, 2, 4, 16, 8), (1024, 512, 128, 8, 1), "NZ")
    _check_nz(good, dtypes.FP32, "k")
    for shape in [(1, 2, 4, 8, 8), (1, 2, 4, 16, 16), (1, 2, 4, None, 8), (1, 2, 4, 16, None)]:
        with pytest.raises(InternalError, match="shape\\[3\\] == 16"):
            _check_nz(dataclasses.replace(good, shape=shape), dtypes.FP32, "k")
    # FP16: c0 = 16
    with pytest.raises(InternalError):
        _check_nz(dataclasses.replace(good, cpp_type="half"), dtypes.FP16, "k")


def test_nz_parameter_with_wrong_c0_reaches_emitter_as_internal_error():
    prog = lowered_example(ROOT / "examples" / "acc_store_nz.ir")
    fn = prog.function("scores")
    s = fn.param("s")
    bad_shape = tuple(ConstInt(v, dtypes.INDEX) for v in (1, 1, 4, 16, 16))  # FP32 needs c0 = 8
    params = tuple(dataclasses.replace(p, type=dataclasses.replace(s.type, shape=bad_shape)) if p.name == "s" else p
                   for p in fn.params)
    assert isinstance(s.type, TensorType) and s.type.layout == "NZ"
    prog = dataclasses.replace(prog, functions=tuple(dataclasses.replace(f, params=params) if f.name == "scores"
                                                     else f for f in prog.functions))
    with pytest.raises(InternalError, match="NZ GlobalTensor s "):
        emit_header(prog, CTX, "x.ir", __version__)


# --------------------------------------------------------------------------------------------------
# Names
# --------------------------------------------------------------------------------------------------


@needs_gxx
def test_kernel_names_that_are_not_cpp_namespaces_are_renamed(tmp_path):
    body = """
xt: pl.Tile[[16, 64], pl.FP32, pl.Mem.Vec] = pl.tile.load(x, [0, 0], [16, 64], target_memory=pl.Mem.Vec)
out_1: pl.Tensor[[16, 64], pl.FP32] = pl.tile.store(xt, [0, 0], out)
return out_1
"""
    params = "x: pl.Tensor[[16, 64], pl.FP32], out: pl.Out[pl.Tensor[[16, 64], pl.FP32]]"
    funcs = [kernel(params, "pl.Tensor[[16, 64], pl.FP32]", body, name=n).split("class t:\n")[1]
             for n in ("int", "half", "pto", "int_kernel", "plain")]
    text = "import pypto.language as pl\n\n@pl.program\nclass t:\n" + "".join(funcs)
    h = header(text)
    namespaces = re.findall(r"^namespace (\w+) \{$", h, re.M)
    assert namespaces == ["int_kernel_1", "half_kernel", "pto_kernel", "int_kernel", "plain"]
    assert "// kernel int (renamed: not usable as a C++ namespace name)" in lines(h)
    assert_compiles(tmp_path, h, "static_assert(std::is_same_v<int_kernel_1::x_Global::DType, float>);\n"
                                 "static_assert(std::is_same_v<half_kernel::x_Global::DType, float>);\n"
                                 "static_assert(std::is_same_v<pto_kernel::xt_pview_Global::DType, float>);\n")


@needs_gxx
def test_parameter_and_partition_names_do_not_clash(tmp_path):
    text = kernel("xt_pview: pl.Tensor[[16, 64], pl.FP32], out: pl.Out[pl.Tensor[[16, 64], pl.FP32]]",
                  "pl.Tensor[[16, 64], pl.FP32]", """
xt: pl.Tile[[16, 64], pl.FP32, pl.Mem.Vec] = pl.tile.load(xt_pview, [0, 0], [16, 64], target_memory=pl.Mem.Vec)
out_1: pl.Tensor[[16, 64], pl.FP32] = pl.tile.store(xt, [0, 0], out)
return out_1
""")
    h = header(text)
    assert "// xt_pview: GM tensor parameter, ND, pl.FP32" in lines(h)
    assert "using xt_pview_1_Global = pto::GlobalTensor<float, xt_pview_1_Shape, xt_pview_1_Stride, pto::Layout::ND>;" \
        in lines(h)
    assert_compiles(tmp_path, h)


def test_no_kernel_no_namespace():
    text = ("import pypto.language as pl\n\n@pl.program\nclass t:\n"
            "    @pl.function(type=pl.FunctionType.Orchestration)\n"
            "    def main(self, a: pl.Tensor[[64], pl.FP32]) -> pl.Tensor[[64], pl.FP32]:\n        return a\n")
    h = header(text)
    assert "namespace" not in h and h.startswith("#pragma once\n")


# --------------------------------------------------------------------------------------------------
# Preamble and determinism
# --------------------------------------------------------------------------------------------------


def test_preamble_names_source_version_arch_and_ptoas():
    prog = lowered_example(ROOT / "examples" / "vector_add.ir")
    h = emit_header(prog, CompileContext(arch="a2a3", ptoas_version="v0.61"), "examples/vector_add.ir", "0.1.0")
    assert lines(h)[:5] == [
        "#pragma once",
        '// pto-isa GlobalTensor types for "examples/vector_add.ir"',
        "// generated by ptoc 0.1.0 for arch a2a3, PTOAS v0.61",
        "#include <cstdint>  // pto-isa's type header uses uint8_t without including it",
        "#include <pto/pto-inst.hpp>",
    ]
    h5 = emit_header(prog, CompileContext(arch="a5", ptoas_version="v0.63"), "examples/vector_add.ir", "9.9")
    assert lines(h5)[2] == "// generated by ptoc 9.9 for arch a5, PTOAS v0.63"
    assert lines(h5)[3:] == lines(h)[3:]


@needs_gxx
def test_hostile_source_name_stays_inside_its_comment(tmp_path):
    prog = lowered_example(ROOT / "examples" / "vector_add.ir")
    # a newline or a trailing backslash (line splice) must not carry text out of the comment
    h = emit_header(prog, CTX, 'C:\\kernels\\\n#error "escaped"\\', __version__)
    ls = lines(h)
    assert ls[1] == '// pto-isa GlobalTensor types for "C:\\\\kernels\\\\\\n#error \\"escaped\\"\\\\"'
    assert ls[2].startswith("// generated by ptoc") and ls[3].startswith("#include <cstdint>")
    assert "\n#error" not in h and h.isascii()
    assert_compiles(tmp_path, h)


def test_output_is_deterministic_within_a_process():
    for path in EXAMPLES:
        try:
            a = emit_header(lowered(path.read_text(), path.name), CTX, path.name, __version__)
        except CompileError:
            continue
        b = emit_header(lowered(path.read_text(), path.name), CTX, path.name, __version__)
        assert a == b


def test_output_is_byte_identical_across_hash_seeds():
    script = (
        "import sys\n"
        "from pathlib import Path\n"
        "from ptoc.context import CompileContext\n"
        "from ptoc.diagnostics import CompileError\n"
        "from ptoc.driver import frontend, lower\n"
        "from ptoc.codegen.global_tensor import emit_header\n"
        "ctx = CompileContext()\n"
        "for p in sorted(Path('examples').glob('*.ir')):\n"
        "    try:\n"
        "        prog = lower(frontend(p.read_text(), str(p), ctx), ctx).program\n"
        "    except CompileError:\n"
        "        continue\n"
        "    sys.stdout.write(emit_header(prog, ctx, str(p), '0.1.0'))\n"
    )
    outs = []
    for seed in ("0", "1", "4242"):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        r = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, timeout=300)
        assert r.returncode == 0, r.stderr.decode()
        outs.append(r.stdout)
    assert outs[0] and outs[0] == outs[1] == outs[2]
    assert b"namespace add_kernel {" in outs[0]
