"""The .pto emitter (ptoc/codegen/pto.py): every expected line is spelled as spec/pto-format.md writes it.

Examples go through the real front end and pass pipeline (`ptoc.driver.frontend` + `lower`); tile
addresses are checked against the lowered IR's own `pl.tile.alloc(..., addr=)` + MemRef offset, so these
tests do not depend on the allocator's placement choices. A hand-lowered kernel pins exact addresses.
"""

import os
import re
import subprocess
import sys
import textwrap

import pytest

from ptoc.codegen.pto import emit_module, kernel_functions
from ptoc.context import CompileContext
from ptoc.diagnostics import CODES, CompileError, InternalError
from ptoc.driver import frontend, lower
from ptoc.ir.nodes import AssignStmt, Call, ConstInt, ForStmt, IfStmt, TileType
from ptoc.ir.verifier import function_types

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLES = os.path.join(ROOT, "examples")
A2A3 = CompileContext(arch="a2a3")
A5 = CompileContext(arch="a5")


def tb(loc, dtype, rows, cols, blayout, slayout, fractal=512, v_row=None, v_col=None, pad=0):
    v_row = rows if v_row is None else v_row
    v_col = cols if v_col is None else v_col
    return (f"!pto.tile_buf<loc={loc}, dtype={dtype}, rows={rows}, cols={cols}, v_row={v_row}, v_col={v_col}, "
            f"blayout={blayout}, slayout={slayout}, fractal={fractal}, pad={pad}>")


def vec(dtype, rows, cols, **kw):
    return tb("vec", dtype, rows, cols, "row_major", "none_box", **kw)


def lower_text(text, ctx=A2A3, level="level3", name="t.ir"):
    prog = frontend(text, name, ctx)
    skip = frozenset({"MemoryReuse", "AllocateMemoryAddr"}) if level == "level2" else frozenset()
    return lower(prog, ctx, skip=skip).program


def compile_text(text, ctx=A2A3, level="level3", name="t.ir"):
    low = lower_text(text, ctx, level, name)
    out, skipped = emit_module(low, ctx, pto_level=level)
    return out, skipped, low


def example(name, level="level3", ctx=A2A3):
    path = os.path.join(EXAMPLES, f"{name}.ir")
    with open(path) as f:
        return compile_text(f.read(), ctx, level, path)


def lines_of(text):
    return [ln.strip() for ln in text.splitlines()]


def body_of(text, fn):
    """The lines of func.func @fn, stripped."""
    ls = text.splitlines()
    start = next(i for i, ln in enumerate(ls) if ln.startswith(f"  func.func @{fn}("))
    end = next(i for i in range(start, len(ls)) if ls[i] == "  }")
    return [ln.strip() for ln in ls[start + 1:end]]


def kernel(body, params, ret, ftype="InCore", head=""):
    body = textwrap.indent(textwrap.dedent(body).strip("\n"), " " * 8)
    return (f"{head}@pl.program\nclass p:\n    @pl.function(type=pl.FunctionType.{ftype})\n"
            f"    def k(self, {params}) -> {ret}:\n{body}\n")


def tile_addresses(program):
    """tile name -> byte address (alloc addr + MemRef offset), read from the lowered IR itself."""
    out = {}
    for f in kernel_functions(program):
        allocs = {}

        def walk(body, allocs=allocs):
            for s in body:
                if isinstance(s, AssignStmt):
                    v = s.value
                    if isinstance(v, Call) and v.op == "tile.alloc":
                        allocs[s.target.name] = v.kwarg("addr").value
                    elif isinstance(s.annotation, TileType) and s.annotation.memref is not None:
                        m = s.annotation.memref
                        out[s.target.name] = allocs[m.base.name] + m.offset.value
                elif isinstance(s, ForStmt):
                    walk(s.body)
                elif isinstance(s, IfStmt):
                    walk(s.then_body)
                    walk(s.else_body)

        walk(f.body)
    return out


def check_constants_hoisted(body):
    """Constants come first, each (value, type) once, named per pto-format.md."""
    n = 0
    while n < len(body) and " = arith.constant " in body[n]:
        n += 1
    consts = body[:n]
    assert not any(" = arith.constant " in ln for ln in body[n:]), "a constant after the first other op"
    seen = set()
    for ln in consts:
        m = re.fullmatch(r"%(\w+) = arith\.constant (\S+)(?: : (\w+))?", ln)
        assert m, ln
        name, value, ty = m.groups()
        assert (value, ty) not in seen, f"constant {value} : {ty} emitted twice"
        seen.add((value, ty))
        if ty in ("index", "i64", "i32", "i16", "i8"):
            v = int(value)
            assert name == (f"c{v}_{ty}" if v >= 0 else f"cn{-v}_{ty}"), ln
        elif ty is not None:
            assert re.fullmatch(r"cst(_\d+)?", name), ln
    return consts


# --------------------------------------------------------------------------------------------------
# vector_add: skeleton, arguments, constants, views, partitions, tiles, ops
# --------------------------------------------------------------------------------------------------

V64 = vec("f32", 64, 64)


def test_vector_add_skeleton_and_arguments():
    out, skipped, _ = example("vector_add")
    # the orchestration function is not emitted, and not noted: it is host code the manifest describes
    assert skipped == [] and "@main" not in out
    ls = out.splitlines()
    assert ls[0] == 'module attributes {pto.target_arch = "a2a3"} {'
    assert ls[1] == ("  func.func @add_kernel(%arg0: !pto.ptr<f32>, %arg1: !pto.ptr<f32>, %arg2: !pto.ptr<f32>) "
                     "attributes {pto.kernel_kind = #pto.kernel_kind<vector>} {")
    assert ls[-3:] == ["    return", "  }", "}"]
    assert out.endswith("}\n")
    assert out.count("func.func") == 1


def test_target_arch_a5():
    out, _, _ = example("vector_add", ctx=A5)
    assert out.splitlines()[0] == 'module attributes {pto.target_arch = "a5"} {'


def test_vector_add_constants_views_tiles_and_ops():
    out, _, low = example("vector_add")
    body = body_of(out, "add_kernel")
    consts = check_constants_hoisted(body)
    assert "%c64_index = arith.constant 64 : index" in consts
    assert "%c1_index = arith.constant 1 : index" in consts
    assert "%c0_index = arith.constant 0 : index" in consts
    assert body[len(consts)] == ("%a_view = pto.make_tensor_view %arg0, shape = [%c64_index, %c64_index], "
                                 "strides = [%c64_index, %c1_index] {layout = #pto.layout<nd>} : "
                                 "!pto.tensor_view<?x?xf32>")
    assert body[len(consts) + 2].startswith("%out_view = pto.make_tensor_view %arg2, ")
    assert ("%ta_pview = pto.partition_view %a_view, offsets = [%c0_index, %c0_index], sizes = [%c64_index, "
            "%c64_index] : !pto.tensor_view<?x?xf32> -> !pto.partition_tensor_view<64x64xf32>") in body
    assert f"pto.tload ins(%ta_pview : !pto.partition_tensor_view<64x64xf32>) outs(%ta : {V64})" in body
    # MemoryReuse computes tc in ta's buffer (ta is read for the last time by the add): one handle, %ta
    assert f"pto.tadd ins(%ta, %tb : {V64}, {V64}) outs(%ta : {V64})" in body
    assert ("%out_1_pview = pto.partition_view %out_view, offsets = [%c0_index, %c0_index], sizes = "
            "[%c64_index, %c64_index] : !pto.tensor_view<?x?xf32> -> !pto.partition_tensor_view<64x64xf32>") in body
    assert f"pto.tstore ins(%ta : {V64}) outs(%out_1_pview : !pto.partition_tensor_view<64x64xf32>)" in body
    addrs = tile_addresses(low)
    assert addrs["tc"] == addrs["ta"] != addrs["tb"]
    for t in ("ta", "tb"):
        assert f"%{t} = pto.alloc_tile addr = %c{addrs[t]}_i64 : {V64}" in body
        assert f"%c{addrs[t]}_i64 = arith.constant {addrs[t]} : i64" in consts
    assert not any(ln.startswith("%tc = ") for ln in body)


# A kernel as the pipeline leaves it, written by hand: exact addresses, a plain InCore function (no
# kernel_kind), a scalar parameter, an in-place tile (same MemRef and type -> the same handle).
LOWERED = '''\
@pl.program
class p:
    @pl.function(type=pl.FunctionType.InCore)
    def k(self, a: pl.Tensor[[32, 32], pl.FP32, pl.TensorView(stride=[32, 1])], s: pl.Scalar[pl.FP32], out: pl.Out[pl.Tensor[[32, 32], pl.FP32, pl.TensorView(stride=[32, 1])]]) -> pl.Tensor[[32, 32], pl.FP32, pl.TensorView(stride=[32, 1])]:
        mem_vec_0: pl.Ptr = pl.tile.alloc(pl.Mem.Vec, 8192, addr=4096)
        t: pl.Tile[[32, 32], pl.FP32, pl.MemRef(mem_vec_0, 0, 4096), pl.Mem.Vec] = pl.tile.load(a, [0, 0], [32, 32], target_memory=pl.Mem.Vec)
        u: pl.Tile[[32, 32], pl.FP32, pl.MemRef(mem_vec_0, 4096, 4096), pl.Mem.Vec] = pl.tile.adds(t, s)
        v: pl.Tile[[32, 32], pl.FP32, pl.MemRef(mem_vec_0, 0, 4096), pl.Mem.Vec] = pl.tile.muls(u, 0.0001220703125)
        out_1: pl.Tensor[[32, 32], pl.FP32, pl.TensorView(stride=[32, 1])] = pl.tile.store(v, [0, 0], out)
        return out_1
'''


def test_hand_lowered_incore_exact_lines():
    prog = frontend(LOWERED, "lowered.ir", A2A3)
    out, skipped = emit_module(prog, A2A3)
    assert skipped == []
    t32 = vec("f32", 32, 32)
    assert out == (
        'module attributes {pto.target_arch = "a2a3"} {\n'
        "  func.func @k(%arg0: !pto.ptr<f32>, %arg1: !pto.ptr<f32>, %arg2: f32) {\n"
        "    %c32_index = arith.constant 32 : index\n"
        "    %c1_index = arith.constant 1 : index\n"
        "    %c4096_i64 = arith.constant 4096 : i64\n"
        "    %c8192_i64 = arith.constant 8192 : i64\n"
        "    %c0_index = arith.constant 0 : index\n"
        "    %cst = arith.constant 1.22070312500000000e-04 : f32\n"
        "    %a_view = pto.make_tensor_view %arg0, shape = [%c32_index, %c32_index], strides = [%c32_index, "
        "%c1_index] {layout = #pto.layout<nd>} : !pto.tensor_view<?x?xf32>\n"
        "    %out_view = pto.make_tensor_view %arg1, shape = [%c32_index, %c32_index], strides = [%c32_index, "
        "%c1_index] {layout = #pto.layout<nd>} : !pto.tensor_view<?x?xf32>\n"
        f"    %t = pto.alloc_tile addr = %c4096_i64 : {t32}\n"
        f"    %u = pto.alloc_tile addr = %c8192_i64 : {t32}\n"
        "    %t_pview = pto.partition_view %a_view, offsets = [%c0_index, %c0_index], sizes = [%c32_index, "
        "%c32_index] : !pto.tensor_view<?x?xf32> -> !pto.partition_tensor_view<32x32xf32>\n"
        f"    pto.tload ins(%t_pview : !pto.partition_tensor_view<32x32xf32>) outs(%t : {t32})\n"
        f"    pto.tadds ins(%t, %arg2 : {t32}, f32) outs(%u : {t32})\n"
        f"    pto.tmuls ins(%u, %cst : {t32}, f32) outs(%t : {t32})\n"
        "    %out_1_pview = pto.partition_view %out_view, offsets = [%c0_index, %c0_index], sizes = "
        "[%c32_index, %c32_index] : !pto.tensor_view<?x?xf32> -> !pto.partition_tensor_view<32x32xf32>\n"
        f"    pto.tstore ins(%t : {t32}) outs(%out_1_pview : !pto.partition_tensor_view<32x32xf32>)\n"
        "    return\n"
        "  }\n"
        "}\n")


def test_level3_needs_addresses():
    text = LOWERED.replace(", addr=4096)", ")")
    with pytest.raises(InternalError, match="addr="):
        emit_module(frontend(text, "t.ir", A2A3), A2A3, pto_level="level3")
    out, _ = emit_module(frontend(text, "t.ir", A2A3), A2A3, pto_level="level2")
    assert "%t = pto.alloc_tile : " in out and "addr" not in out


# --------------------------------------------------------------------------------------------------
# matmul: Mat/Left/Right/Acc tiles, tmov, tmatmul, the accumulator handle carried through scf.for
# --------------------------------------------------------------------------------------------------

MAT_A = tb("mat", "bf16", 64, 64, "col_major", "row_major")
MAT_B = tb("mat", "bf16", 64, 128, "col_major", "row_major")
LEFT = tb("left", "bf16", 64, 64, "col_major", "row_major")
RIGHT = tb("right", "bf16", 64, 128, "row_major", "col_major")
ACC = tb("acc", "f32", 64, 128, "col_major", "row_major", fractal=1024)


def test_matmul_bf16():
    out, _, low = example("matmul_bf16")
    body = body_of(out, "mm_kernel")
    check_constants_hoisted(body)
    assert out.splitlines()[1].endswith("attributes {pto.kernel_kind = #pto.kernel_kind<cube>} {")
    addrs = tile_addresses(low)
    for name, ty in (("a0", MAT_A), ("b0", MAT_B), ("a0_l", LEFT), ("b0_r", RIGHT), ("acc0", ACC)):
        assert f"%{name} = pto.alloc_tile addr = %c{addrs[name]}_i64 : {ty}" in body
    # acc_next / acc_out share acc0's buffer and type: no handle of their own; the loop's tiles ak, bk,
    # ak_l, bk_r reuse the buffers (and handles) of a0, b0, a0_l, b0_r, dead before the loop (MemoryReuse)
    assert sum("pto.alloc_tile" in ln for ln in body) == 5
    assert all(addrs[k] == addrs[f] for k, f in (("ak", "a0"), ("bk", "b0"), ("ak_l", "a0_l"), ("bk_r", "b0_r")))
    assert f"pto.tmov ins(%a0 : {MAT_A}) outs(%a0_l : {LEFT})" in body
    assert f"pto.tmov ins(%b0 : {MAT_B}) outs(%b0_r : {RIGHT})" in body
    assert f"pto.tmatmul ins(%a0_l, %b0_r : {LEFT}, {RIGHT}) outs(%acc0 : {ACC})" in body
    loop = body.index("scf.for %kb = %c1_index to %c4_index step %c1_index {")
    end = body.index("}", loop)
    inner = body[loop + 1:end]
    assert inner[0] == "%k0 = arith.muli %kb, %c64_index : index"
    assert ("%ak_pview = pto.partition_view %a_view, offsets = [%c0_index, %k0], sizes = [%c64_index, "
            "%c64_index] : !pto.tensor_view<?x?xbf16> -> !pto.partition_tensor_view<64x64xbf16>") in inner
    assert f"pto.tmov ins(%a0 : {MAT_A}) outs(%a0_l : {LEFT})" in inner
    assert (f"pto.tmatmul.acc ins(%acc0, %a0_l, %b0_r : {ACC}, {LEFT}, {RIGHT}) outs(%acc0 : {ACC})") in inner
    assert "scf.yield" not in out  # tiles are handles, never iter_args
    assert "iter_args" not in out
    assert body[end + 2] == f"pto.tstore ins(%acc0 : {ACC}) outs(%c_1_pview : !pto.partition_tensor_view<64x128xf32>)"


# --------------------------------------------------------------------------------------------------
# NZ views (NZ-14) and the NZ Acc write-back (NZ-7)
# --------------------------------------------------------------------------------------------------

NZ_KERNEL = kernel(
    """
    x_mat: pl.Tile[[64, 256], pl.INT8, pl.Mem.Mat] = pl.tile.load(x, [0, 0], [64, 256], target_memory=pl.Mem.Mat)
    w_mat: pl.Tile[[256, 512], pl.INT8, pl.Mem.Mat] = pl.tile.load(w, [0, 0], [256, 512], target_memory=pl.Mem.Mat)
    x_left: pl.Tile[[64, 256], pl.INT8, pl.Mem.Left] = pl.tile.move(x_mat, target_memory=pl.Mem.Left)
    w_right: pl.Tile[[256, 256], pl.INT8, pl.Mem.Right] = pl.tile.extract(w_mat, 0, 256, [256, 256], target_memory=pl.Mem.Right)
    acc: pl.Tile[[64, 256], pl.INT32, pl.Mem.Acc] = pl.tile.matmul(x_left, w_right)
    out_1: pl.Tensor[[64, 256], pl.INT32] = pl.tile.store(acc, [0, 0], out)
    return out_1
    """,
    "x: pl.Tensor[[64, 256], pl.INT8], w: pl.Tensor[[256, 512], pl.INT8, pl.NZ], "
    "out: pl.Out[pl.Tensor[[64, 256], pl.INT32]]",
    "pl.Tensor[[64, 256], pl.INT32]")


def test_nz_weight_view_is_rank5_spec_example():
    out, _, _ = compile_text(NZ_KERNEL)
    body = body_of(out, "k")
    # pto-format.md / seed 000, for `w: [256, 512] INT8 NZ` (the second parameter: %arg1)
    assert ("%w_view = pto.make_tensor_view %arg1, shape = [%c1_index, %c16_index, %c16_index, %c16_index, "
            "%c32_index], strides = [%c131072_index, %c8192_index, %c512_index, %c32_index, %c1_index] "
            "{layout = #pto.layout<nz>} : !pto.tensor_view<?x?x?x?x?xi8>") in body
    assert ("%w_mat_pview = pto.partition_view %w_view, offsets = [%c0_index, %c0_index, %c0_index, %c0_index, "
            "%c0_index], sizes = [%c1_index, %c16_index, %c16_index, %c16_index, %c32_index] : "
            "!pto.tensor_view<?x?x?x?x?xi8> -> !pto.partition_tensor_view<1x16x16x16x32xi8>") in body
    w_mat = tb("mat", "i8", 256, 512, "col_major", "row_major")
    w_right = tb("right", "i8", 256, 256, "row_major", "col_major")
    assert f"pto.tload ins(%w_mat_pview : !pto.partition_tensor_view<1x16x16x16x32xi8>) outs(%w_mat : {w_mat})" \
        in body
    assert (f"pto.textract ins(%w_mat, %c0_index, %c256_index : {w_mat}, index, index) "
            f"outs(%w_right : {w_right})") in body


def test_acc_store_nz_partition_seed_000():
    out, _, _ = example("acc_store_nz")
    body = body_of(out, "scores")
    # NZ-7: a 64 x 16 FP32 Acc tile into logical [64, 16] -> partition [1, 2, 4, 16, 8], strides
    # [1024, 512, 128, 8, 1]; st_phase=final kept
    assert ("%s_view = pto.make_tensor_view %arg2, shape = [%c1_index, %c2_index, %c4_index, %c16_index, "
            "%c8_index], strides = [%c1024_index, %c512_index, %c128_index, %c8_index, %c1_index] "
            "{layout = #pto.layout<nz>} : !pto.tensor_view<?x?x?x?x?xf32>") in body
    assert ("%s_1_pview = pto.partition_view %s_view, offsets = [%c0_index, %c0_index, %c0_index, %c0_index, "
            "%c0_index], sizes = [%c1_index, %c2_index, %c4_index, %c16_index, %c8_index] : "
            "!pto.tensor_view<?x?x?x?x?xf32> -> !pto.partition_tensor_view<1x2x4x16x8xf32>") in body
    acc = tb("acc", "f32", 64, 16, "col_major", "row_major", fractal=1024)
    assert (f"pto.tstore ins(%acc : {acc}) outs(%s_1_pview : !pto.partition_tensor_view<1x2x4x16x8xf32>) "
            "{stPhase = #pto<st_phase final>}") in body


def test_grouped_matmul_nz_offsets_and_loops():
    out, _, _ = example("grouped_matmul_nz")
    body = body_of(out, "gmm_kernel")
    check_constants_hoisted(body)
    # `for nb in pl.spmd(8)` is one block per launch: nb is the block index (no loop over blocks);
    # pl.pipeline(128, 1024, 128, stage=2) (the seed's K_TILE, K, K_TILE) becomes the only scf.for: its
    # 7 iterations run as 3 chunks of two copies (step 256, up to 896) and one leftover at 896
    assert not any(ln.startswith("scf.for %nb") for ln in body)
    bidx = body.index("%0 = pto.get_block_idx")
    assert body[bidx + 1:bidx + 3] == ["%nb = arith.index_castui %0 : i64 to index",
                                       "%n0 = arith.muli %nb, %c256_index : index"]
    inner = body.index("scf.for %k0 = %c128_index to %c896_index step %c256_index {")
    assert bidx < inner
    acc_line = next(ln for ln in body if ln.startswith("%acc0 = pto.alloc_tile"))
    assert body.index(acc_line) < bidx  # every buffer is declared at the top of the kernel
    # NZ-9: the blocked offsets are FloorDiv of the whole offset -> arith.floordivsi; the peeled first
    # block has row offset 0 (a constant fractal offset), the loop's window k0 // 16
    fd = [ln for ln in body if "arith.floordivsi" in ln]
    assert fd == ["%1 = arith.floordivsi %n0, %c32_index : index", "%2 = arith.floordivsi %n0, %c32_index : index",
                  "%3 = arith.floordivsi %k0, %c16_index : index", "%5 = arith.floordivsi %n0, %c32_index : index",
                  "%7 = arith.floordivsi %6, %c16_index : index", "%8 = arith.floordivsi %n0, %c32_index : index"]
    # the leftover iteration's fractal row offset is a constant: k0 = 896 -> 896 // 16 = 56 (NZ-9)
    assert any(ln.startswith("%w_mat_2_pview = pto.partition_view %w_view, offsets = [%c0_index, %8, %c56_index, ")
               for ln in body)
    assert "%6 = arith.addi %k0, %c128_index : index" in body  # the second copy's K offset
    assert ("%w_first_pview = pto.partition_view %w_view, offsets = [%c0_index, %1, %c0_index, %c0_index, "
            "%c0_index], sizes = [%c1_index, %c8_index, %c8_index, %c16_index, %c32_index] : "
            "!pto.tensor_view<?x?x?x?x?xi8> -> !pto.partition_tensor_view<1x8x8x16x32xi8>") in body
    assert ("%w_mat_pview = pto.partition_view %w_view, offsets = [%c0_index, %2, %3, %c0_index, %c0_index], "
            "sizes = [%c1_index, %c8_index, %c8_index, %c16_index, %c32_index] : !pto.tensor_view<?x?x?x?x?xi8> -> "
            "!pto.partition_tensor_view<1x8x8x16x32xi8>") in body
    acc = tb("acc", "i32", 64, 256, "col_major", "row_major", fractal=1024)
    assert any(ln.startswith("pto.tmatmul ins(%x_first_l, %w_first_r : ") and ln.endswith(f"outs(%acc0 : {acc})")
               for ln in body)
    # MemoryReuse: the L0 operands of the loop's first copy (stage 0) and of the leftover (another region)
    # reuse the peeled block's buffers and handles, their lifetimes being disjoint; the second copy
    # (stage 1) keeps buffers of its own, apart from the first copy's (double buffering, 8 KiB + 32 KiB
    # per copy fit L0A / L0B twice)
    assert sum(ln.startswith("pto.tmatmul.acc ins(%acc0, %x_first_l, %w_first_r : ") and ln.endswith(
        f"outs(%acc0 : {acc})") for ln in body) == 2
    assert sum(ln.startswith("pto.tmatmul.acc ins(%acc0, %x_left_1, %w_right_1 : ") and ln.endswith(
        f"outs(%acc0 : {acc})") for ln in body) == 1
    assert ("%out_1_pview = pto.partition_view %out_view, offsets = [%c0_index, %n0], sizes = [%c64_index, "
            "%c256_index] : !pto.tensor_view<?x?xi32> -> !pto.partition_tensor_view<64x256xi32>") in body
    assert f"pto.tstore ins(%acc0 : {acc}) outs(%out_1_pview : !pto.partition_tensor_view<64x256xi32>)" in body


def test_nz_weight_int8_example():
    out, _, _ = example("nz_weight_int8")
    body = body_of(out, "mm_nz")
    # the same [256, 512] INT8 NZ weight as the spec example; windows [256, 256] at column n0
    assert ("%w_view = pto.make_tensor_view %arg1, shape = [%c1_index, %c16_index, %c16_index, %c16_index, "
            "%c32_index], strides = [%c131072_index, %c8192_index, %c512_index, %c32_index, %c1_index] "
            "{layout = #pto.layout<nz>} : !pto.tensor_view<?x?x?x?x?xi8>") in body
    assert "%0 = arith.floordivsi %n0, %c32_index : index" in body
    assert ("%w_mat_pview = pto.partition_view %w_view, offsets = [%c0_index, %0, %c0_index, %c0_index, "
            "%c0_index], sizes = [%c1_index, %c8_index, %c16_index, %c16_index, %c32_index] : "
            "!pto.tensor_view<?x?x?x?x?xi8> -> !pto.partition_tensor_view<1x8x16x16x32xi8>") in body


# --------------------------------------------------------------------------------------------------
# softmax: DN views, reductions, row expansion; dynamic rows: dyn-dim argument and valid shapes
# --------------------------------------------------------------------------------------------------


def test_softmax_rows_dn_view_reductions_and_row_expand():
    out, _, _ = example("softmax_rows")
    body = body_of(out, "softmax_kernel")
    check_constants_hoisted(body)
    # an [M, 1] tensor is emitted as DN with strides [1, M]
    assert ("%row_max_out_view = pto.make_tensor_view %arg2, shape = [%c64_index, %c1_index], strides = "
            "[%c1_index, %c64_index] {layout = #pto.layout<dn>} : !pto.tensor_view<?x?xf32>") in body
    t = vec("f32", 16, 128)
    col = tb("vec", "f32", 16, 1, "col_major", "none_box")
    assert f"pto.trowmax ins(%xt, %tmp : {t}, {t}) outs(%row_max : {col})" in body
    # shifted, e and probs are computed in xt's buffer (each reads the previous one for the last time;
    # the broadcast column row_max / row_sum never shares): one handle, %xt
    assert f"pto.trowexpandsub ins(%xt, %row_max : {t}, {col}) outs(%xt : {t})" in body
    assert f"pto.texp ins(%xt : {t}) outs(%xt : {t})" in body
    assert f"pto.trowsum ins(%xt, %tmp : {t}, {t}) outs(%row_sum : {col})" in body
    assert f"pto.trowexpanddiv ins(%xt, %row_sum : {t}, {col}) outs(%xt : {t})" in body
    assert ("%m_store_pview = pto.partition_view %row_max_out_view, offsets = [%r, %c0_index], sizes = "
            "[%c16_index, %c1_index] : !pto.tensor_view<?x?xf32> -> !pto.partition_tensor_view<16x1xf32>") in body
    assert "scf.for %r = %c0_index to %c64_index step %c16_index {" in body


def test_dynamic_rows_arguments_and_valid_shapes():
    out, _, low = example("dynamic_rows")
    ls = out.splitlines()
    # tensors, then the scalar alpha (f16), then the dynamic dimension M (index)
    assert ls[1] == ("  func.func @scale_rows(%arg0: !pto.ptr<f16>, %arg1: !pto.ptr<f16>, %arg2: f16, %arg3: index) "
                     "attributes {pto.kernel_kind = #pto.kernel_kind<vector>} {")
    body = body_of(out, "scale_rows")
    check_constants_hoisted(body)
    assert ("%x_view = pto.make_tensor_view %arg0, shape = [%arg3, %c64_index], strides = [%c64_index, %c1_index] "
            "{layout = #pto.layout<nd>} : !pto.tensor_view<?x?xf16>") in body
    assert "scf.for %r = %c0_index to %arg3 step %c32_index {" in body
    assert "%rows = arith.minsi %0, %c32_index : index" in body
    assert "%0 = arith.subi %arg3, %r : index" in body
    assert ("%xt_pview = pto.partition_view %x_view, offsets = [%r, %c0_index], sizes = [%rows, %c64_index] : "
            "!pto.tensor_view<?x?xf16> -> !pto.partition_tensor_view<?x64xf16>") in body
    dyn = vec("f16", 32, 64, v_row="?", v_col="?")
    addrs = tile_addresses(low)
    assert (f"%xt = pto.alloc_tile addr = %c{addrs['xt']}_i64 valid_row = %rows valid_col = %c64_index : {dyn}") \
        in body
    # yt is computed over xt (MemoryReuse), with the same type and valid shape: xt's handle
    assert f"pto.tmuls ins(%xt, %arg2 : {dyn}, f16) outs(%xt : {dyn})" in body
    assert f"pto.tstore ins(%xt : {dyn}) outs(%y_store_pview : !pto.partition_tensor_view<?x64xf16>)" in body


# --------------------------------------------------------------------------------------------------
# level2, determinism
# --------------------------------------------------------------------------------------------------


def test_level2_has_no_addr():
    out, _, _ = example("matmul_bf16", level="level2")
    assert "addr" not in out
    assert "_i64 = arith.constant" not in out
    body = body_of(out, "mm_kernel")
    assert f"%acc0 = pto.alloc_tile : {ACC}" in body
    assert f"%a0 = pto.alloc_tile : {MAT_A}" in body
    out3, _, _ = example("matmul_bf16")
    # PTOAS plans lifetimes at level2 (MemoryReuse skipped, as PyPTO's PTOAS planner): 9 handles, 5 at level3
    assert out.count("pto.alloc_tile : ") == 9 and out3.count("pto.alloc_tile addr = ") == 5


EMITTABLE = ("vector_add", "softmax_rows", "matmul_bf16", "grouped_matmul_nz", "acc_store_nz", "dynamic_rows")

SCRIPT = """
import os, sys
from ptoc.context import CompileContext
from ptoc.driver import frontend, lower
from ptoc.codegen.pto import emit_module
ctx = CompileContext()
for name in sys.argv[1:]:
    path = os.path.join({examples!r}, name + ".ir")
    prog = frontend(open(path).read(), path, ctx)
    sys.stdout.write(emit_module(lower(prog, ctx).program, ctx)[0])
"""


def test_deterministic_in_process_and_across_hash_seeds():
    texts = [example(n)[0] for n in EMITTABLE]
    again = [example(n)[0] for n in EMITTABLE]
    assert texts == again
    script = SCRIPT.format(examples=EXAMPLES)
    outs = []
    for seed in ("1", "987654"):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        r = subprocess.run([sys.executable, "-c", script, *EMITTABLE], capture_output=True, text=True, env=env,
                           cwd=ROOT, timeout=300)
        assert r.returncode == 0, r.stderr
        outs.append(r.stdout)
    assert outs[0] == outs[1] == "".join(texts)


# --------------------------------------------------------------------------------------------------
# scalars and control flow, scalar operands, casts, gathers, stores attributes
# --------------------------------------------------------------------------------------------------

CONTROL = kernel(
    """
    for i, (acc,) in pl.range(0, 4, 1, init_values=(0,)):
        q: pl.Scalar[pl.INDEX] = i % 3
        acc_next: pl.Scalar[pl.INDEX] = acc + q
        acc_out: pl.Scalar[pl.INDEX] = pl.yield_(acc_next)
    if acc_out > 2:
        o: pl.Scalar[pl.INDEX] = pl.yield_(0)
    else:
        o: pl.Scalar[pl.INDEX] = pl.yield_(16)
    d: pl.Scalar[pl.INDEX] = n // 4
    xt: pl.Tile[[16, 64], pl.FP32, pl.Mem.Vec] = pl.tile.load(x, [o, d], [16, 64], target_memory=pl.Mem.Vec)
    a: pl.Tile[[16, 64], pl.FP32, pl.Mem.Vec] = pl.tile.adds(xt, 2)
    b: pl.Tile[[16, 64], pl.FP32, pl.Mem.Vec] = pl.tile.muls(a, 0.5)
    h: pl.Tile[[16, 64], pl.FP16, pl.Mem.Vec] = pl.tile.cast(b, target_type=pl.FP16, mode="round")
    y_1: pl.Tensor[[32, 128], pl.FP16] = pl.tile.store(h, [0, 0], y, attrs={"st_phase": "partial"})
    g: pl.Tile[[16, 32], pl.FP32, pl.Mem.Vec] = pl.tile.gather_mask(b, mask_pattern=1)
    z_1: pl.Tensor[[16, 32], pl.FP32] = pl.tile.store(g, [0, 0], z)
    return y_1, z_1
    """,
    "x: pl.Tensor[[32, 128], pl.FP32], n: pl.Scalar[pl.INT32], y: pl.Out[pl.Tensor[[32, 128], pl.FP16]], "
    "z: pl.Out[pl.Tensor[[16, 32], pl.FP32]]",
    "tuple[pl.Tensor[[32, 128], pl.FP16], pl.Tensor[[16, 32], pl.FP32]]")


def test_scalar_iter_args_if_results_and_scalar_arith():
    out, _, _ = compile_text(CONTROL)
    ls = out.splitlines()
    assert ls[1].startswith("  func.func @k(%arg0: !pto.ptr<f32>, %arg1: !pto.ptr<f16>, %arg2: !pto.ptr<f32>, "
                            "%arg3: i32) attributes {pto.kernel_kind = #pto.kernel_kind<vector>} {")
    body = body_of(out, "k")
    check_constants_hoisted(body)
    i = body.index("%acc_out = scf.for %i = %c0_index to %c4_index step %c1_index "
                   "iter_args(%acc = %c0_index) -> (index) {")
    # i % 3: floor modulo (seed 000): remsi, plus the divisor when the remainder is negative
    assert body[i + 1:i + 8] == [
        "%0 = arith.remsi %i, %c3_index : index",
        "%1 = arith.cmpi slt, %0, %c0_index : index",
        "%2 = arith.addi %0, %c3_index : index",
        "%q = arith.select %1, %2, %0 : index",
        "%acc_next = arith.addi %acc, %q : index",
        "scf.yield %acc_next : index",
        "}",
    ]
    # Simplify writes `acc_out > 2` as `2 < acc_out`, as PyPTO's does
    j = body.index("%3 = arith.cmpi slt, %c2_index, %acc_out : index")
    assert body[j + 1:j + 6] == ["%o = scf.if %3 -> (index) {", "scf.yield %c0_index : index", "} else {",
                                 "scf.yield %c16_index : index", "}"]
    # n // 4 on INT32 is FloorDiv -> arith.floordivsi; the INDEX-typed d is its index_cast
    assert "%4 = arith.floordivsi %arg3, %c4_i32 : i32" in body
    assert "%d = arith.index_cast %4 : i32 to index" in body
    assert "%xt_pview = pto.partition_view %x_view, offsets = [%o, %d], sizes = [%c16_index, %c64_index] : " \
           "!pto.tensor_view<?x?xf32> -> !pto.partition_tensor_view<16x64xf32>" in body


def test_scalar_operands_cast_gather_and_store_phase():
    # level2: no MemoryReuse, so every result keeps a handle of its own name (level3 computes a and b over xt)
    out, _, _ = compile_text(CONTROL, level="level2")
    body = body_of(out, "k")
    t, h = vec("f32", 16, 64), vec("f16", 16, 64)
    # OP-6: a literal scalar takes the tile dtype (2 on an FP32 tile is 2.0 : f32)
    assert "%cst = arith.constant 2.00000000000000000e+00 : f32" in body
    assert "%cst_1 = arith.constant 5.00000000000000000e-01 : f32" in body
    assert f"pto.tadds ins(%xt, %cst : {t}, f32) outs(%a : {t})" in body
    assert f"pto.tmuls ins(%a, %cst_1 : {t}, f32) outs(%b : {t})" in body
    assert f"pto.tcvt ins(%b {{rmode = #pto<round_mode ROUND>}} : {t}) outs(%h : {h})" in body
    g = vec("f32", 16, 32)
    assert f"pto.tgather ins(%b, {{maskPattern = #pto.mask_pattern<P0101>}} : {t}) outs(%g : {g})" in body
    assert (f"pto.tstore ins(%h : {h}) outs(%y_1_pview : !pto.partition_tensor_view<16x64xf16>) "
            "{stPhase = #pto<st_phase partial>}") in body
    assert f"pto.tstore ins(%g : {g}) outs(%z_1_pview : !pto.partition_tensor_view<16x32xf32>)" in body


def test_integer_tile_literals():
    text = kernel(
        """
        t: pl.Tile[[16, 64], pl.INT32, pl.Mem.Vec] = pl.tile.load(x, [0, 0], [16, 64], target_memory=pl.Mem.Vec)
        u: pl.Tile[[16, 64], pl.INT32, pl.Mem.Vec] = pl.tile.adds(t, 3)
        v: pl.Tile[[16, 64], pl.INT32, pl.Mem.Vec] = pl.tile.maximums(u, -1)
        out_1: pl.Tensor[[16, 64], pl.INT32] = pl.tile.store(v, [0, 0], out)
        return out_1
        """,
        "x: pl.Tensor[[16, 64], pl.INT32], out: pl.Out[pl.Tensor[[16, 64], pl.INT32]]",
        "pl.Tensor[[16, 64], pl.INT32]")
    out, _, _ = compile_text(text, level="level2")  # every result its own handle (no MemoryReuse)
    body = body_of(out, "k")
    t = vec("i32", 16, 64)
    assert "%c3_i32 = arith.constant 3 : i32" in body
    assert "%cn1_i32 = arith.constant -1 : i32" in body
    assert f"pto.tadds ins(%t, %c3_i32 : {t}, i32) outs(%u : {t})" in body
    assert f"pto.tmaxs ins(%u, %cn1_i32 : {t}, i32) outs(%v : {t})" in body


# --------------------------------------------------------------------------------------------------
# unsupported ops: PTOC-E0400 naming the op
# --------------------------------------------------------------------------------------------------


def test_unsupported_op_is_e0400_naming_it():
    assert "PTOC-E0400" in CODES
    text = kernel(
        """
        a: pl.Tile[[16, 64], pl.FP32, pl.Mem.Vec] = pl.tile.load(x, [0, 0], [16, 64], target_memory=pl.Mem.Vec)
        c: pl.Tile[[16, 64], pl.FP32, pl.Mem.Vec] = pl.tile.sel(a, a, a)
        out_1: pl.Tensor[[16, 64], pl.FP32] = pl.tile.store(c, [0, 0], out)
        return out_1
        """,
        "x: pl.Tensor[[16, 64], pl.FP32], out: pl.Out[pl.Tensor[[16, 64], pl.FP32]]",
        "pl.Tensor[[16, 64], pl.FP32]")
    try:
        low = lower_text(text)
    except CompileError as e:  # the op must reach codegen for this test to mean anything
        pytest.fail(f"lowering failed: {e}")
    with pytest.raises(CompileError) as ei:
        emit_module(low, A2A3)
    (d,) = ei.value.diagnostics
    assert d.code == "PTOC-E0400"
    assert d.message == "cannot emit pl.tile.sel yet"
    assert d.span is not None and d.span.line == 6
    assert d.hint


def test_unsupported_statement_call_is_e0400():
    text = LOWERED.replace("        out_1: pl.Tensor", "        pl.system.fence()\n        out_1: pl.Tensor")
    with pytest.raises(CompileError) as ei:
        emit_module(frontend(text, "t.ir", A2A3), A2A3)
    assert ei.value.diagnostics[0].code == "PTOC-E0400"
    assert "pl.system.fence" in ei.value.diagnostics[0].message


def test_function_types_cover_emitted_kernels():
    _, _, low = example("vector_add")
    types = function_types(low)
    assert [f.name for f in kernel_functions(low)] == ["add_kernel"]
    assert isinstance(types["add_kernel"]["ta"], TileType)
    assert isinstance(low.function("add_kernel").body[0].value.kwarg("addr"), ConstInt)


def test_store_statement_without_result_gets_a_window():
    text = LOWERED.replace("        out_1: pl.Tensor[[32, 32], pl.FP32, pl.TensorView(stride=[32, 1])] = "
                           "pl.tile.store(v, [0, 0], out)\n        return out_1\n",
                           "        pl.tile.store(v, [0, 0], out)\n        return out\n")
    assert "out_1" not in text
    out, _ = emit_module(frontend(text, "t.ir", A2A3), A2A3)
    t32 = vec("f32", 32, 32)
    body = body_of(out, "k")
    assert ("%out_pview = pto.partition_view %out_view, offsets = [%c0_index, %c0_index], sizes = [%c32_index, "
            "%c32_index] : !pto.tensor_view<?x?xf32> -> !pto.partition_tensor_view<32x32xf32>") in body
    assert f"pto.tstore ins(%t : {t32}) outs(%out_pview : !pto.partition_tensor_view<32x32xf32>)" in body


def test_non_positive_step_is_e0400():
    text = kernel(
        """
        for i in pl.range(4, 0, -1):
            pass
        return out
        """,
        "out: pl.Out[pl.Tensor[[16, 64], pl.FP32, pl.TensorView(stride=[64, 1])]]",
        "pl.Tensor[[16, 64], pl.FP32, pl.TensorView(stride=[64, 1])]", ftype="AIV")
    with pytest.raises(CompileError) as ei:
        emit_module(frontend(text, "t.ir", A2A3), A2A3)
    assert ei.value.diagnostics[0].code == "PTOC-E0400"
    assert "step -1" in ei.value.diagnostics[0].message


# --------------------------------------------------------------------------------------------------
# gather / scatter, generators, scalar element access and views (PTOAS TGatherOp, TScatterOp,
# TGatherBOp, TCIOp, TTriOp, TGetValOp, TSetValOp, TReshapeOp, SubViewOp)
# --------------------------------------------------------------------------------------------------

GATHER_KERNEL = kernel(
    """
    s: pl.Tile[[16, 64], pl.FP32, pl.Mem.Vec] = pl.tile.load(x, [0, 0], [16, 64], target_memory=pl.Mem.Vec)
    i: pl.Tile[[4, 16], pl.INT32, pl.Mem.Vec] = pl.tile.load(ix, [0, 0], [4, 16], target_memory=pl.Mem.Vec)
    t: pl.Tile[[4, 16], pl.INT32, pl.Mem.Vec] = pl.tile.create([4, 16], dtype=pl.INT32, target_memory=pl.Mem.Vec)
    g: pl.Tile[[4, 16], pl.FP32, pl.Mem.Vec] = pl.tile.gather(s, i, t)
    src: pl.Tile[[4, 64], pl.FP32, pl.Mem.Vec] = pl.tile.load(x, [4, 0], [4, 64], target_memory=pl.Mem.Vec)
    k: pl.Tile[[4, 64], pl.INT32, pl.Mem.Vec] = pl.tile.load(kx, [0, 0], [4, 64], target_memory=pl.Mem.Vec)
    o: pl.Tile[[16, 64], pl.FP32, pl.Mem.Vec] = pl.tile.scatter(s, src, k)
    b: pl.Tile[[4, 8], pl.UINT32, pl.Mem.Vec] = pl.tile.load(bx, [0, 0], [4, 8], target_memory=pl.Mem.Vec)
    gb: pl.Tile[[4, 64], pl.FP32, pl.Mem.Vec] = pl.tile.gatherb(o, b)
    m: pl.Tile[[4, 32], pl.INT32, pl.Mem.Vec] = pl.tile.gather_mask(gb, mask_pattern=1, output_dtype=pl.INT32)
    y_1: pl.Tensor[[4, 16], pl.FP32] = pl.tile.store(g, [0, 0], y)
    z_1: pl.Tensor[[4, 32], pl.INT32] = pl.tile.store(m, [0, 0], z)
    return y_1, z_1
    """,
    "x: pl.Tensor[[16, 64], pl.FP32], ix: pl.Tensor[[4, 16], pl.INT32], kx: pl.Tensor[[4, 64], pl.INT32], "
    "bx: pl.Tensor[[4, 8], pl.UINT32], y: pl.Out[pl.Tensor[[4, 16], pl.FP32]], z: pl.Out[pl.Tensor[[4, 32], pl.INT32]]",
    "tuple[pl.Tensor[[4, 16], pl.FP32], pl.Tensor[[4, 32], pl.INT32]]")


@pytest.mark.parametrize("level", ["level3", "level2"])
def test_gather_index_scatter_gatherb_exact_lines(level):
    out, _, _ = compile_text(GATHER_KERNEL, level=level)
    body = body_of(out, "k")
    s16, i4, f4 = vec("f32", 16, 64), vec("i32", 4, 16), vec("f32", 4, 16)
    # TGatherOp index form: ins(%src, %indices, %tmp : S, I, T) outs(%dst : D)
    assert f"pto.tgather ins(%s, %i, %t : {s16}, {i4}, {i4}) outs(%g : {f4})" in body
    # TScatterOp index form, DPS into the destination (the result shares s's buffer: no copy)
    assert (f"pto.tscatter ins(%src, %k : {vec('f32', 4, 64)}, {vec('i32', 4, 64)}) outs(%s : {s16})") in body
    assert not any(ln.startswith("pto.tmov") for ln in body)
    # TGatherBOp: ins(%src, %offsets : S, O) outs(%dst : D); offsets are ui32 byte offsets. At level3
    # MemoryReuse computes gb in src's buffer (same type: src's handle), src being dead after the scatter
    gb = "%gb" if level == "level2" else "%src"
    assert (f"pto.tgatherb ins(%s, %b : {s16}, {vec('ui32', 4, 8)}) outs({gb} : {vec('f32', 4, 64)})") in body
    # mask form with output_dtype: the destination type carries the reinterpreted dtype
    assert (f"pto.tgather ins({gb}, {{maskPattern = #pto.mask_pattern<P0101>}} : {vec('f32', 4, 64)}) "
            f"outs(%m : {vec('i32', 4, 32)})") in body


def test_scatter_needs_indexes_shaped_like_the_source():
    text = GATHER_KERNEL.replace("k: pl.Tile[[4, 64], pl.INT32, pl.Mem.Vec] = pl.tile.load(kx, [0, 0], [4, 64], "
                                 "target_memory=pl.Mem.Vec)",
                                 "k = pl.tile.load(kx, [0, 0], [4, 64], [4, 8], target_memory=pl.Mem.Vec)")
    assert text != GATHER_KERNEL
    with pytest.raises(CompileError) as ei:
        compile_text(text)
    (d,) = ei.value.diagnostics
    assert d.code == "PTOC-E0400" and "pl.tile.scatter" in d.message and "indexes" in d.hint


GENERATOR_KERNEL = kernel(
    """
    c: pl.Tile[[1, 64], pl.INT32, pl.Mem.Vec] = pl.tile.ci(5, [1, 64], dtype=pl.INT32, descending=True)
    a: pl.Tile[[1, 64], pl.INT32, pl.Mem.Vec] = pl.tile.ci(n, [1, 64], dtype=pl.INT32)
    u: pl.Tile[[16, 16], pl.FP32, pl.Mem.Vec] = pl.tile.tri(1, [16, 16], dtype=pl.FP32, upper=True)
    l: pl.Tile[[16, 16], pl.INT32, pl.Mem.Vec] = pl.tile.tri(-2, [16, 16], dtype=pl.INT32)
    y_1: pl.Tensor[[1, 64], pl.INT32] = pl.tile.store(c, [0, 0], y)
    z_1: pl.Tensor[[1, 64], pl.INT32] = pl.tile.store(a, [0, 0], z)
    w_1: pl.Tensor[[16, 16], pl.FP32] = pl.tile.store(u, [0, 0], w)
    v_1: pl.Tensor[[16, 16], pl.INT32] = pl.tile.store(l, [0, 0], v)
    return y_1, z_1, w_1, v_1
    """,
    "n: pl.Scalar[pl.INT32], y: pl.Out[pl.Tensor[[1, 64], pl.INT32]], z: pl.Out[pl.Tensor[[1, 64], pl.INT32]], "
    "w: pl.Out[pl.Tensor[[16, 16], pl.FP32]], v: pl.Out[pl.Tensor[[16, 16], pl.INT32]]",
    "tuple[pl.Tensor[[1, 64], pl.INT32], pl.Tensor[[1, 64], pl.INT32], pl.Tensor[[16, 16], pl.FP32], "
    "pl.Tensor[[16, 16], pl.INT32]]")


def test_ci_and_tri_exact_lines():
    out, _, _ = compile_text(GENERATOR_KERNEL)
    body = body_of(out, "k")
    r64 = vec("i32", 1, 64)
    # TCIOp: ins(%start : iN) outs(%dst : D), descending as a trailing attribute dict
    assert "%c5_i32 = arith.constant 5 : i32" in body
    assert f"pto.tci ins(%c5_i32 : i32) outs(%c : {r64}) {{descending = true}}" in body
    assert f"pto.tci ins(%arg4 : i32) outs(%a : {r64})" in body
    # TTriOp: ins(%diagonal attr-dict : i32) outs(%dst : D); upperOrLower defaults to 0 (lower)
    assert f"pto.ttri ins(%c1_i32 {{upperOrLower = 1 : i32}} : i32) outs(%u : {vec('f32', 16, 16)})" in body
    assert f"pto.ttri ins(%cn2_i32 : i32) outs(%l : {vec('i32', 16, 16)})" in body


def test_ci_with_several_rows_is_e0400():
    text = GENERATOR_KERNEL.replace("pl.tile.ci(5, [1, 64], dtype=pl.INT32, descending=True)",
                                    "pl.tile.ci(5, [2, 32], dtype=pl.INT32, descending=True)").replace(
        "c: pl.Tile[[1, 64], pl.INT32, pl.Mem.Vec]", "c: pl.Tile[[2, 32], pl.INT32, pl.Mem.Vec]").replace(
        "y_1: pl.Tensor[[1, 64], pl.INT32] = pl.tile.store(c, [0, 0], y)", "y_1 = pl.tile.store(c, [0, 0], y)").replace(
        "y: pl.Out[pl.Tensor[[1, 64], pl.INT32]]", "y: pl.Out[pl.Tensor[[2, 32], pl.INT32]]").replace(
        "tuple[pl.Tensor[[1, 64], pl.INT32], pl.Tensor[[1, 64]", "tuple[pl.Tensor[[2, 32], pl.INT32], pl.Tensor[[1, 64]")
    with pytest.raises(CompileError) as ei:
        compile_text(text)
    (d,) = ei.value.diagnostics
    assert d.code == "PTOC-E0400" and d.message == "cannot emit pl.tile.ci of a tile with more than one row yet"


ELEMENT_KERNEL = kernel(
    """
    t: pl.Tile[[8, 64], pl.FP32, pl.Mem.Vec] = pl.tile.load(x, [0, 0], [8, 64], target_memory=pl.Mem.Vec)
    a: pl.Scalar[pl.FP32] = pl.tile.read(t, [1, 2])
    b: pl.Scalar[pl.FP32] = pl.tile.read(t, [r, 3]) * a
    u: pl.Tile[[8, 64], pl.FP32, pl.Mem.Vec] = pl.tile.write(t, [0, 5], b)
    pl.tile.write(u, [r, 0], 2.5)
    y_1: pl.Tensor[[8, 64], pl.FP32] = pl.tile.store(u, [0, 0], y)
    return y_1
    """,
    "x: pl.Tensor[[8, 64], pl.FP32], r: pl.Scalar[pl.INDEX], y: pl.Out[pl.Tensor[[8, 64], pl.FP32]]",
    "pl.Tensor[[8, 64], pl.FP32]")


def test_tile_read_write_exact_lines():
    out, _, _ = compile_text(ELEMENT_KERNEL)
    body = body_of(out, "k")
    t = vec("f32", 8, 64)
    # TGetValOp: %v = pto.tgetval ins(%src, %offset : T, index) outs : dtype; the offset is r * cols + c
    assert f"%a = pto.tgetval ins(%t, %c66_index : {t}, index) outs : f32" in body
    i = body.index("%0 = arith.muli %arg2, %c64_index : index")
    # FlattenCallExpr gave the read nested in `... * a` a name of its own (t__tmp_v0)
    assert body[i + 1:i + 4] == ["%1 = arith.addi %0, %c3_index : index",
                                 f"%t__tmp_v0 = pto.tgetval ins(%t, %1 : {t}, index) outs : f32",
                                 "%b = arith.mulf %t__tmp_v0, %a : f32"]
    # TSetValOp: pto.tsetval ins(%offset, %value : index, dtype) outs(%dst : T); u shares t's buffer
    assert f"pto.tsetval ins(%c5_index, %b : index, f32) outs(%t : {t})" in body
    assert "%cst = arith.constant 2.50000000000000000e+00 : f32" in body
    assert f"pto.tsetval ins(%2, %cst : index, f32) outs(%t : {t})" in body


VIEW_KERNEL = kernel(
    """
    a: pl.Tile[[16, 64], pl.FP32, pl.Mem.Vec] = pl.tile.load(x, [0, 0], [16, 64], target_memory=pl.Mem.Vec)
    b: pl.Tile[[64, 16], pl.FP32, pl.Mem.Vec] = pl.tile.reshape(a, [64, 16])
    c: pl.Tile[[64, 16], pl.FP32, pl.Mem.Vec] = pl.tile.adds(b, 1.0)
    s = pl.tile.slice(c, [8, 8], [4, 8])
    d = pl.tile.slice(c, [8, 16], [16, 0], valid_shape=[n, 16])
    e: pl.Tile[[8, 8], pl.FP32, pl.Mem.Vec] = pl.tile.muls(s, 2.0)
    f = pl.tile.muls(d, 3.0)
    g = pl.tile.set_validshape(c, 64, 8)
    y_1 = pl.tile.store(e, [0, 0], y)
    z_1 = pl.tile.store(f, [0, 0], z)
    w_1 = pl.tile.store(g, [0, 0], w)
    return y_1, z_1, w_1
    """,
    "x: pl.Tensor[[16, 64], pl.FP32], n: pl.Scalar[pl.INDEX], y: pl.Out[pl.Tensor[[8, 8], pl.FP32]], "
    "z: pl.Out[pl.Tensor[[8, 16], pl.FP32]], w: pl.Out[pl.Tensor[[64, 16], pl.FP32]]",
    "tuple[pl.Tensor[[8, 8], pl.FP32], pl.Tensor[[8, 16], pl.FP32], pl.Tensor[[64, 16], pl.FP32]]")


@pytest.mark.parametrize("level", ["level3", "level2"])
def test_reshape_slice_views_exact_lines(level):
    out, _, _ = compile_text(VIEW_KERNEL, level=level)
    body = body_of(out, "k")
    a, b = vec("f32", 16, 64), vec("f32", 64, 16)
    # TReshapeOp: an SSA view of the same bytes, no buffer of its own
    if level == "level2":
        assert f"%b = pto.treshape %a : {a} -> {b}" in body
    else:  # MemoryReuse computes c over b (a's buffer): b and c are then one handle of c's type at a's address
        a_addr = next(ln for ln in body if ln.startswith("%a = pto.alloc_tile addr = ")).split(" ")[5]
        assert f"%c = pto.alloc_tile addr = {a_addr} : {b}" in body
        assert f"pto.tadds ins(%c, %cst : {b}, f32) outs(%c : {b})" in body
    assert not any(ln.startswith("%b = pto.alloc_tile") for ln in body)
    # SubViewOp: %r = pto.subview %src[offsets] sizes [R, C] [valid [%vr, %vc]] : S -> R (parent's config)
    assert f"%s = pto.subview %c[%c4_index, %c8_index] sizes [8, 8] : {b} -> {vec('f32', 8, 8)}" in body
    assert (f"%d = pto.subview %c[%c16_index, %c0_index] sizes [8, 16] valid [%arg4, %c16_index] : {b} -> "
            f"{vec('f32', 8, 16, v_row='?', v_col='?')}") in body
    assert f"pto.tmuls ins(%s, %cst_1 : {vec('f32', 8, 8)}, f32) outs(%e : {vec('f32', 8, 8)})" in body
    g = vec("f32", 64, 16, v_col=8)
    if level == "level3":  # a second handle at c's address
        c_alloc = next(ln for ln in body if ln.startswith("%c = pto.alloc_tile addr = "))
        addr = c_alloc.split("addr = ")[1].split(" ")[0]
        assert f"%g = pto.alloc_tile addr = {addr} : {g}" in body
    else:  # no addresses: an aliasing treshape of c's handle
        assert f"%g = pto.treshape %c : {b} -> {g}" in body


def test_set_validshape_level2_dynamic_is_treshape_then_set_validshape():
    text = VIEW_KERNEL.replace("g = pl.tile.set_validshape(c, 64, 8)", "g = pl.tile.set_validshape(c, n, 8)")
    out, _, _ = compile_text(text, level="level2")
    body = body_of(out, "k")
    dyn = vec("f32", 64, 16, v_row="?", v_col="?")
    i = body.index(f"%g = pto.treshape %c : {vec('f32', 64, 16)} -> {dyn}")
    assert body[i + 1] == f"pto.set_validshape %g, %arg4, %c8_index : {dyn}"


@pytest.mark.parametrize("op,what", [("pl.tile.sel(a, a, a)", "pl.tile.sel"),
                                     ("pl.tile.scatter_mask(a, h, mask_pattern=1)", "pl.tile.scatter_mask")])
def test_sel_and_scatter_mask_stay_e0400_with_a_reason(op, what):
    text = kernel(
        f"""
        a: pl.Tile[[16, 64], pl.FP32, pl.Mem.Vec] = pl.tile.load(x, [0, 0], [16, 64], target_memory=pl.Mem.Vec)
        h: pl.Tile[[16, 32], pl.FP32, pl.Mem.Vec] = pl.tile.load(x, [0, 0], [16, 32], target_memory=pl.Mem.Vec)
        c: pl.Tile[[16, 64], pl.FP32, pl.Mem.Vec] = {op}
        out_1: pl.Tensor[[16, 64], pl.FP32] = pl.tile.store(c, [0, 0], out)
        return out_1
        """,
        "x: pl.Tensor[[16, 64], pl.FP32], out: pl.Out[pl.Tensor[[16, 64], pl.FP32]]",
        "pl.Tensor[[16, 64], pl.FP32]")
    with pytest.raises(CompileError) as ei:
        compile_text(text)
    (d,) = ei.value.diagnostics
    assert d.code == "PTOC-E0400" and d.message == f"cannot emit {what} yet"
    assert "pto.tsel" in d.hint or "pto.tscatter" in d.hint


SCATTER_LOWERED = '''\
@pl.program
class p:
    @pl.function(type=pl.FunctionType.InCore)
    def k(self, x: pl.Tensor[[4, 64], pl.FP32, pl.TensorView(stride=[64, 1])], kx: pl.Tensor[[4, 64], pl.INT32, pl.TensorView(stride=[64, 1])], out: pl.Out[pl.Tensor[[4, 64], pl.FP32, pl.TensorView(stride=[64, 1])]]) -> pl.Tensor[[4, 64], pl.FP32, pl.TensorView(stride=[64, 1])]:
        mem_vec_0: pl.Ptr = pl.tile.alloc(pl.Mem.Vec, 3072, addr=0)
        d: pl.Tile[[4, 64], pl.FP32, pl.MemRef(mem_vec_0, 0, 1024), pl.Mem.Vec] = pl.tile.load(x, [0, 0], [4, 64], target_memory=pl.Mem.Vec)
        k: pl.Tile[[4, 64], pl.INT32, pl.MemRef(mem_vec_0, 1024, 1024), pl.Mem.Vec] = pl.tile.load(kx, [0, 0], [4, 64], target_memory=pl.Mem.Vec)
        o: pl.Tile[[4, 64], pl.FP32, pl.MemRef(mem_vec_0, 2048, 1024), pl.Mem.Vec] = pl.tile.scatter(d, d, k)
        out_1: pl.Tensor[[4, 64], pl.FP32, pl.TensorView(stride=[64, 1])] = pl.tile.store(o, [0, 0], out)
        return out_1
'''


def test_scatter_into_another_buffer_copies_the_destination_first():
    out, _ = emit_module(frontend(SCATTER_LOWERED, "t.ir", A2A3), A2A3)
    body = body_of(out, "k")
    f, i = vec("f32", 4, 64), vec("i32", 4, 64)
    j = body.index(f"pto.tmov ins(%d : {f}) outs(%o : {f})")
    assert body[j + 1] == f"pto.tscatter ins(%d, %k : {f}, {i}) outs(%o : {f})"
    assert f"%o = pto.alloc_tile addr = %c2048_i64 : {f}" in body
