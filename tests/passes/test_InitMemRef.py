"""InitMemRef: every kernel tile is bound to a buffer declared by `pl.tile.alloc` and named in its
`pl.MemRef`; views, in-place ops, loop carries and if results share their buffer."""

import textwrap

import pytest

from ptoc.context import CompileContext
from ptoc.diagnostics import CODES, CompileError
from ptoc.frontend.parser import parse_program
from ptoc.ir.printer import print_program
from ptoc.passes.InitMemRef import InitMemRef
from ptoc.passes.manager import check_invariants

A2A3 = CompileContext(arch="a2a3")
A5 = CompileContext(arch="a5")

VEC_PARAMS = ("self, a: pl.Tensor[[64, 64], pl.FP32], b: pl.Tensor[[64, 64], pl.FP32], "
              "out: pl.Out[pl.Tensor[[64, 64], pl.FP32]]")
VEC_RET = "pl.Tensor[[64, 64], pl.FP32]"
MM_PARAMS = ("self, a: pl.Tensor[[16, 32], pl.BF16], b: pl.Tensor[[32, 32], pl.BF16], "
             "out: pl.Out[pl.Tensor[[16, 32], pl.FP32]]")
MM_RET = "pl.Tensor[[16, 32], pl.FP32]"

# The same parameters as InitMemRef gives them: every static tensor parameter names its GM region
# (64 x 64 FP32 = 16384 bytes; [16, 32] BF16 = 1024, [32, 32] BF16 = 2048, [16, 32] FP32 = 2048).
VEC_PARAMS_MEM = ('self, a: pl.Tensor[[64, 64], pl.FP32, pl.MemRef("mem_ddr_0", 0, 16384)], '
                  'b: pl.Tensor[[64, 64], pl.FP32, pl.MemRef("mem_ddr_1", 0, 16384)], '
                  'out: pl.Out[pl.Tensor[[64, 64], pl.FP32, pl.MemRef("mem_ddr_2", 0, 16384)]]')
MM_PARAMS_MEM = ('self, a: pl.Tensor[[16, 32], pl.BF16, pl.MemRef("mem_ddr_0", 0, 1024)], '
                 'b: pl.Tensor[[32, 32], pl.BF16, pl.MemRef("mem_ddr_1", 0, 2048)], '
                 'out: pl.Out[pl.Tensor[[16, 32], pl.FP32, pl.MemRef("mem_ddr_2", 0, 2048)]]')

T64 = "pl.Tile[[64, 64], pl.FP32, pl.Mem.Vec]"


def kernel(body: str, params: str = VEC_PARAMS, ret: str = VEC_RET, ftype: str = "AIV", head: str = "") -> str:
    """A one-kernel program; the first body line is line 5 (6 with `head`)."""
    body = textwrap.indent(textwrap.dedent(body).strip("\n"), " " * 8)
    return (f"{head}@pl.program\nclass p:\n    @pl.function(type=pl.FunctionType.{ftype})\n"
            f"    def k({params}) -> {ret}:\n{body}\n")


def parse(text: str, ctx=A2A3):
    return parse_program(text, "test.ir", ctx=ctx)


def run(prog, ctx=A2A3):
    out = InitMemRef().run(prog, ctx)
    check_invariants(out, ctx, InitMemRef())  # verifier with op rules + property `memrefs`
    return out


def assert_same(out, expected_text: str, ctx=A2A3):
    expected = parse(expected_text, ctx)
    assert out == expected, f"got:\n{print_program(out)}\nexpected:\n{print_program(expected)}"


def rejected(text: str, code: str, ctx=A2A3):
    with pytest.raises(CompileError) as e:
        run(parse(text, ctx), ctx)
    d = e.value.diagnostics[0]
    assert d.code == code, e.value
    assert code in CODES
    assert d.hint
    return d


# --------------------------------------------------------------------------------------------------
# buffers per tile
# --------------------------------------------------------------------------------------------------


def test_vector_add_gets_one_vec_buffer_per_tile_and_none_for_the_store():
    # 64 x 64 FP32 = 16384 bytes each; tile.store returns a tensor and needs no buffer.
    before = kernel(f"""
        ta: {T64} = pl.tile.load(a, [0, 0], [64, 64], target_memory=pl.Mem.Vec)
        tb: {T64} = pl.tile.load(b, [0, 0], [64, 64], target_memory=pl.Mem.Vec)
        tc: {T64} = pl.tile.add(ta, tb)
        out_1: pl.Tensor[[64, 64], pl.FP32] = pl.tile.store(tc, [0, 0], out)
        return out_1
    """)
    expected = kernel("""
        mem_vec_3: pl.Ptr = pl.tile.alloc(pl.Mem.Vec, 16384)
        mem_vec_4: pl.Ptr = pl.tile.alloc(pl.Mem.Vec, 16384)
        mem_vec_5: pl.Ptr = pl.tile.alloc(pl.Mem.Vec, 16384)
        ta: pl.Tile[[64, 64], pl.FP32, pl.MemRef(mem_vec_3, 0, 16384), pl.Mem.Vec] = pl.tile.load(a, [0, 0], [64, 64], target_memory=pl.Mem.Vec)
        tb: pl.Tile[[64, 64], pl.FP32, pl.MemRef(mem_vec_4, 0, 16384), pl.Mem.Vec] = pl.tile.load(b, [0, 0], [64, 64], target_memory=pl.Mem.Vec)
        tc: pl.Tile[[64, 64], pl.FP32, pl.MemRef(mem_vec_5, 0, 16384), pl.Mem.Vec] = pl.tile.add(ta, tb)
        out_1: pl.Tensor[[64, 64], pl.FP32] = pl.tile.store(tc, [0, 0], out)
        return out_1
    """, VEC_PARAMS_MEM)
    assert_same(run(parse(before)), expected)


def test_matmul_kernel_gets_mat_left_right_and_acc_buffers():
    # Mat x [16, 32] BF16 = 1024, Mat w [32, 32] BF16 = 2048, Left 1024, Right 2048,
    # Acc [16, 32] FP32 = 16 rows (already a multiple of 16) * 32 * 4 = 2048.
    before = kernel("""
        x: pl.Tile[[16, 32], pl.BF16, pl.Mem.Mat] = pl.tile.load(a, [0, 0], [16, 32], target_memory=pl.Mem.Mat)
        w: pl.Tile[[32, 32], pl.BF16, pl.Mem.Mat] = pl.tile.load(b, [0, 0], [32, 32], target_memory=pl.Mem.Mat)
        xl: pl.Tile[[16, 32], pl.BF16, pl.Mem.Left] = pl.tile.move(x, target_memory=pl.Mem.Left)
        wr: pl.Tile[[32, 32], pl.BF16, pl.Mem.Right] = pl.tile.move(w, target_memory=pl.Mem.Right)
        c: pl.Tile[[16, 32], pl.FP32, pl.Mem.Acc] = pl.tile.matmul(xl, wr)
        o: pl.Tensor[[16, 32], pl.FP32] = pl.tile.store(c, [0, 0], out)
        return o
    """, MM_PARAMS, MM_RET, "AIC")
    expected = kernel("""
        mem_mat_3: pl.Ptr = pl.tile.alloc(pl.Mem.Mat, 1024)
        mem_mat_4: pl.Ptr = pl.tile.alloc(pl.Mem.Mat, 2048)
        mem_left_5: pl.Ptr = pl.tile.alloc(pl.Mem.Left, 1024)
        mem_right_6: pl.Ptr = pl.tile.alloc(pl.Mem.Right, 2048)
        mem_acc_7: pl.Ptr = pl.tile.alloc(pl.Mem.Acc, 2048)
        x: pl.Tile[[16, 32], pl.BF16, pl.MemRef(mem_mat_3, 0, 1024), pl.Mem.Mat] = pl.tile.load(a, [0, 0], [16, 32], target_memory=pl.Mem.Mat)
        w: pl.Tile[[32, 32], pl.BF16, pl.MemRef(mem_mat_4, 0, 2048), pl.Mem.Mat] = pl.tile.load(b, [0, 0], [32, 32], target_memory=pl.Mem.Mat)
        xl: pl.Tile[[16, 32], pl.BF16, pl.MemRef(mem_left_5, 0, 1024), pl.Mem.Left] = pl.tile.move(x, target_memory=pl.Mem.Left)
        wr: pl.Tile[[32, 32], pl.BF16, pl.MemRef(mem_right_6, 0, 2048), pl.Mem.Right] = pl.tile.move(w, target_memory=pl.Mem.Right)
        c: pl.Tile[[16, 32], pl.FP32, pl.MemRef(mem_acc_7, 0, 2048), pl.Mem.Acc] = pl.tile.matmul(xl, wr)
        o: pl.Tensor[[16, 32], pl.FP32] = pl.tile.store(c, [0, 0], out)
        return o
    """, MM_PARAMS_MEM, MM_RET, "AIC")
    assert_same(run(parse(before)), expected)


def test_acc_rows_are_padded_to_16():
    # [8, 16] FP32 in Acc occupies 16 * 16 * 4 = 1024 bytes (not 8 * 16 * 4 = 512); Vec is not padded.
    params = "self, out: pl.Out[pl.Tensor[[8, 16], pl.FP32]]"
    ret = "pl.Tensor[[8, 16], pl.FP32]"
    params_mem = 'self, out: pl.Out[pl.Tensor[[8, 16], pl.FP32, pl.MemRef("mem_ddr_0", 0, 512)]]'
    before = kernel("""
        c: pl.Tile[[8, 16], pl.FP32, pl.Mem.Acc] = pl.tile.create([8, 16], dtype=pl.FP32, target_memory=pl.Mem.Acc)
        o: pl.Tensor[[8, 16], pl.FP32] = pl.tile.store(c, [0, 0], out)
        return o
    """, params, ret, "AIC")
    expected = kernel("""
        mem_acc_1: pl.Ptr = pl.tile.alloc(pl.Mem.Acc, 1024)
        c: pl.Tile[[8, 16], pl.FP32, pl.MemRef(mem_acc_1, 0, 1024), pl.Mem.Acc] = pl.tile.create([8, 16], dtype=pl.FP32, target_memory=pl.Mem.Acc)
        o: pl.Tensor[[8, 16], pl.FP32] = pl.tile.store(c, [0, 0], out)
        return o
    """, params_mem, ret, "AIC")
    assert_same(run(parse(before)), expected)


def test_odd_sized_tile_is_rounded_up_to_32_bytes():
    # [3, 5] FP16 = 30 bytes -> 32; the next buffer is a separate 32-byte allocation.
    before = kernel("""
        t: pl.Tile[[3, 5], pl.FP16, pl.Mem.Vec] = pl.tile.full([3, 5], value=0.0, dtype=pl.FP16, target_memory=pl.Mem.Vec)
        u: pl.Tile[[3, 5], pl.FP16, pl.Mem.Vec] = pl.tile.neg(t)
        return out
    """)
    expected = kernel("""
        mem_vec_3: pl.Ptr = pl.tile.alloc(pl.Mem.Vec, 32)
        mem_vec_4: pl.Ptr = pl.tile.alloc(pl.Mem.Vec, 32)
        t: pl.Tile[[3, 5], pl.FP16, pl.MemRef(mem_vec_3, 0, 32), pl.Mem.Vec] = pl.tile.full([3, 5], value=0.0, dtype=pl.FP16, target_memory=pl.Mem.Vec)
        u: pl.Tile[[3, 5], pl.FP16, pl.MemRef(mem_vec_4, 0, 32), pl.Mem.Vec] = pl.tile.neg(t)
        return out
    """, VEC_PARAMS_MEM)
    assert_same(run(parse(before)), expected)


def test_unannotated_tile_statement_gets_its_type_with_memref_written_out():
    before = kernel(f"""
        ta: {T64} = pl.tile.load(a, [0, 0], [64, 64], target_memory=pl.Mem.Vec)
        e = pl.tile.exp(ta)
        out_1: pl.Tensor[[64, 64], pl.FP32] = pl.tile.store(e, [0, 0], out)
        return out_1
    """)
    expected = kernel("""
        mem_vec_3: pl.Ptr = pl.tile.alloc(pl.Mem.Vec, 16384)
        mem_vec_4: pl.Ptr = pl.tile.alloc(pl.Mem.Vec, 16384)
        ta: pl.Tile[[64, 64], pl.FP32, pl.MemRef(mem_vec_3, 0, 16384), pl.Mem.Vec] = pl.tile.load(a, [0, 0], [64, 64], target_memory=pl.Mem.Vec)
        e: pl.Tile[[64, 64], pl.FP32, pl.MemRef(mem_vec_4, 0, 16384), pl.Mem.Vec] = pl.tile.exp(ta)
        out_1: pl.Tensor[[64, 64], pl.FP32] = pl.tile.store(e, [0, 0], out)
        return out_1
    """, VEC_PARAMS_MEM)
    assert_same(run(parse(before)), expected)


# --------------------------------------------------------------------------------------------------
# dynamic shapes
# --------------------------------------------------------------------------------------------------


def test_dynamic_valid_shape_allocates_the_static_bound():
    # [64, 64] FP32 with valid rows M: 16384 bytes, whatever M is at run time.
    params = "self, a: pl.Tensor[[M, 64], pl.FP32], out: pl.Out[pl.Tensor[[M, 64], pl.FP32]]"
    ret = "pl.Tensor[[M, 64], pl.FP32]"
    head = 'M = pl.dynamic("M")\n'
    view = "pl.TileView(valid_shape=[M, 64])"
    before = kernel(f"""
        t: pl.Tile[[64, 64], pl.FP32, pl.Mem.Vec, {view}] = pl.tile.load(a, [0, 0], [64, 64], [M, 64], target_memory=pl.Mem.Vec)
        o: pl.Tensor[[M, 64], pl.FP32] = pl.tile.store(t, [0, 0], out)
        return o
    """, params, ret, head=head)
    expected = kernel(f"""
        mem_vec_2: pl.Ptr = pl.tile.alloc(pl.Mem.Vec, 16384)
        t: pl.Tile[[64, 64], pl.FP32, pl.MemRef(mem_vec_2, 0, 16384), pl.Mem.Vec, {view}] = pl.tile.load(a, [0, 0], [64, 64], [M, 64], target_memory=pl.Mem.Vec)
        o: pl.Tensor[[M, 64], pl.FP32] = pl.tile.store(t, [0, 0], out)
        return o
    """, params, ret, head=head)
    assert_same(run(parse(before)), expected)


def test_dynamic_physical_shape_rejected_with_a_hint_to_use_valid_shape():
    params = "self, a: pl.Tensor[[M, 64], pl.FP32], out: pl.Out[pl.Tensor[[M, 64], pl.FP32]]"
    text = kernel("""
        t: pl.Tile[[M, 64], pl.FP32, pl.Mem.Vec] = pl.tile.load(a, [0, 0], [M, 64], target_memory=pl.Mem.Vec)
        o: pl.Tensor[[M, 64], pl.FP32] = pl.tile.store(t, [0, 0], out)
        return o
    """, params, "pl.Tensor[[M, 64], pl.FP32]", head='M = pl.dynamic("M")\n')
    d = rejected(text, "PTOC-E0380")
    assert d.span.line == 6
    assert "'t'" in d.message and "[M, 64]" in d.message
    assert "static shape" in d.hint and "valid_shape" in d.hint


# --------------------------------------------------------------------------------------------------
# shared buffers: views, in-place ops, loops, ifs
# --------------------------------------------------------------------------------------------------


def test_views_alias_their_source_buffer():
    # reshape and set_validshape move no data: same MemRef as the loaded tile; exp writes a new buffer.
    params = "self, a: pl.Tensor[[16, 64], pl.FP32], out: pl.Out[pl.Tensor[[64, 16], pl.FP32]]"
    ret = "pl.Tensor[[64, 16], pl.FP32]"
    params_mem = ('self, a: pl.Tensor[[16, 64], pl.FP32, pl.MemRef("mem_ddr_0", 0, 4096)], '
                  'out: pl.Out[pl.Tensor[[64, 16], pl.FP32, pl.MemRef("mem_ddr_1", 0, 4096)]]')
    before = kernel("""
        t: pl.Tile[[16, 64], pl.FP32, pl.Mem.Vec] = pl.tile.load(a, [0, 0], [16, 64], target_memory=pl.Mem.Vec)
        r: pl.Tile[[64, 16], pl.FP32, pl.Mem.Vec] = pl.tile.reshape(t, [64, 16])
        v: pl.Tile[[64, 16], pl.FP32, pl.Mem.Vec, pl.TileView(valid_shape=[32, 16])] = pl.tile.set_validshape(r, 32, 16)
        e: pl.Tile[[64, 16], pl.FP32, pl.Mem.Vec, pl.TileView(valid_shape=[32, 16])] = pl.tile.exp(v)
        o: pl.Tensor[[64, 16], pl.FP32] = pl.tile.store(e, [0, 0], out)
        return o
    """, params, ret)
    expected = kernel("""
        mem_vec_2: pl.Ptr = pl.tile.alloc(pl.Mem.Vec, 4096)
        mem_vec_3: pl.Ptr = pl.tile.alloc(pl.Mem.Vec, 4096)
        t: pl.Tile[[16, 64], pl.FP32, pl.MemRef(mem_vec_2, 0, 4096), pl.Mem.Vec] = pl.tile.load(a, [0, 0], [16, 64], target_memory=pl.Mem.Vec)
        r: pl.Tile[[64, 16], pl.FP32, pl.MemRef(mem_vec_2, 0, 4096), pl.Mem.Vec] = pl.tile.reshape(t, [64, 16])
        v: pl.Tile[[64, 16], pl.FP32, pl.MemRef(mem_vec_2, 0, 4096), pl.Mem.Vec, pl.TileView(valid_shape=[32, 16])] = pl.tile.set_validshape(r, 32, 16)
        e: pl.Tile[[64, 16], pl.FP32, pl.MemRef(mem_vec_3, 0, 4096), pl.Mem.Vec, pl.TileView(valid_shape=[32, 16])] = pl.tile.exp(v)
        o: pl.Tensor[[64, 16], pl.FP32] = pl.tile.store(e, [0, 0], out)
        return o
    """, params_mem, ret)
    assert_same(run(parse(before)), expected)


def test_loop_carried_vector_accumulator_keeps_the_buffer_of_its_init_value():
    # z (init), acc (iter_arg), n (yielded) and s (loop result) are one buffer; the tile loaded in the
    # body gets its own buffer. Every buffer is declared at the top of the function, in order of first use.
    before = kernel(f"""
        z: {T64} = pl.tile.full([64, 64], value=0.0, dtype=pl.FP32, target_memory=pl.Mem.Vec)
        for i, (acc,) in pl.range(4, init_values=(z,)):
            x: {T64} = pl.tile.load(a, [0, 0], [64, 64], target_memory=pl.Mem.Vec)
            n: {T64} = pl.tile.add(acc, x)
            s: {T64} = pl.yield_(n)
        o: pl.Tensor[[64, 64], pl.FP32] = pl.tile.store(s, [0, 0], out)
        return o
    """)
    ref0 = "pl.MemRef(mem_vec_3, 0, 16384)"
    expected = kernel(f"""
        mem_vec_3: pl.Ptr = pl.tile.alloc(pl.Mem.Vec, 16384)
        mem_vec_4: pl.Ptr = pl.tile.alloc(pl.Mem.Vec, 16384)
        z: pl.Tile[[64, 64], pl.FP32, {ref0}, pl.Mem.Vec] = pl.tile.full([64, 64], value=0.0, dtype=pl.FP32, target_memory=pl.Mem.Vec)
        for i, (acc,) in pl.range(4, init_values=(z,)):
            x: pl.Tile[[64, 64], pl.FP32, pl.MemRef(mem_vec_4, 0, 16384), pl.Mem.Vec] = pl.tile.load(a, [0, 0], [64, 64], target_memory=pl.Mem.Vec)
            n: pl.Tile[[64, 64], pl.FP32, {ref0}, pl.Mem.Vec] = pl.tile.add(acc, x)
            s: pl.Tile[[64, 64], pl.FP32, {ref0}, pl.Mem.Vec] = pl.yield_(n)
        o: pl.Tensor[[64, 64], pl.FP32] = pl.tile.store(s, [0, 0], out)
        return o
    """, VEC_PARAMS_MEM)
    assert_same(run(parse(before)), expected)


def test_matmul_acc_accumulates_in_place_across_the_loop():
    # matmul_acc writes into its accumulator's buffer (DPS); with the loop carry, c0, acc, c1 and cs
    # are one Acc buffer of 16 * 32 * 4 = 2048 bytes.
    mm = """
        x: pl.Tile[[16, 32], pl.BF16{0}, pl.Mem.Mat] = pl.tile.load(a, [0, 0], [16, 32], target_memory=pl.Mem.Mat)
        w: pl.Tile[[32, 32], pl.BF16{1}, pl.Mem.Mat] = pl.tile.load(b, [0, 0], [32, 32], target_memory=pl.Mem.Mat)
        xl: pl.Tile[[16, 32], pl.BF16{2}, pl.Mem.Left] = pl.tile.move(x, target_memory=pl.Mem.Left)
        wr: pl.Tile[[32, 32], pl.BF16{3}, pl.Mem.Right] = pl.tile.move(w, target_memory=pl.Mem.Right)
        c0: pl.Tile[[16, 32], pl.FP32{4}, pl.Mem.Acc] = pl.tile.matmul(xl, wr)
        for i, (acc,) in pl.range(3, init_values=(c0,)):
            c1: pl.Tile[[16, 32], pl.FP32{4}, pl.Mem.Acc] = pl.tile.matmul_acc(acc, xl, wr)
            cs: pl.Tile[[16, 32], pl.FP32{4}, pl.Mem.Acc] = pl.yield_(c1)
        o: pl.Tensor[[16, 32], pl.FP32] = pl.tile.store(cs, [0, 0], out)
        return o
    """
    before = kernel(mm.format("", "", "", "", ""), MM_PARAMS, MM_RET, "AIC")
    refs = [", pl.MemRef(mem_mat_3, 0, 1024)", ", pl.MemRef(mem_mat_4, 0, 2048)", ", pl.MemRef(mem_left_5, 0, 1024)",
            ", pl.MemRef(mem_right_6, 0, 2048)", ", pl.MemRef(mem_acc_7, 0, 2048)"]
    lines = mm.format(*refs).strip("\n").split("\n")
    allocs = ["mem_mat_3: pl.Ptr = pl.tile.alloc(pl.Mem.Mat, 1024)",
              "mem_mat_4: pl.Ptr = pl.tile.alloc(pl.Mem.Mat, 2048)",
              "mem_left_5: pl.Ptr = pl.tile.alloc(pl.Mem.Left, 1024)",
              "mem_right_6: pl.Ptr = pl.tile.alloc(pl.Mem.Right, 2048)",
              "mem_acc_7: pl.Ptr = pl.tile.alloc(pl.Mem.Acc, 2048)"]
    body = [" " * 8 + a for a in allocs] + lines
    expected = kernel("\n".join(body), MM_PARAMS_MEM, MM_RET, "AIC")
    assert_same(run(parse(before)), expected)


def test_if_result_and_both_yielded_values_share_one_buffer():
    params = VEC_PARAMS + ", n: pl.Scalar[pl.INDEX]"
    before = kernel(f"""
        t: {T64} = pl.tile.load(a, [0, 0], [64, 64], target_memory=pl.Mem.Vec)
        if n > 0:
            p1: {T64} = pl.tile.exp(t)
            r: {T64} = pl.yield_(p1)
        else:
            p2: {T64} = pl.tile.neg(t)
            r: {T64} = pl.yield_(p2)
        o: pl.Tensor[[64, 64], pl.FP32] = pl.tile.store(r, [0, 0], out)
        return o
    """, params)
    ref1 = "pl.MemRef(mem_vec_4, 0, 16384)"
    expected = kernel(f"""
        mem_vec_3: pl.Ptr = pl.tile.alloc(pl.Mem.Vec, 16384)
        mem_vec_4: pl.Ptr = pl.tile.alloc(pl.Mem.Vec, 16384)
        t: pl.Tile[[64, 64], pl.FP32, pl.MemRef(mem_vec_3, 0, 16384), pl.Mem.Vec] = pl.tile.load(a, [0, 0], [64, 64], target_memory=pl.Mem.Vec)
        if n > 0:
            p1: pl.Tile[[64, 64], pl.FP32, {ref1}, pl.Mem.Vec] = pl.tile.exp(t)
            r: pl.Tile[[64, 64], pl.FP32, {ref1}, pl.Mem.Vec] = pl.yield_(p1)
        else:
            p2: pl.Tile[[64, 64], pl.FP32, {ref1}, pl.Mem.Vec] = pl.tile.neg(t)
            r: pl.Tile[[64, 64], pl.FP32, {ref1}, pl.Mem.Vec] = pl.yield_(p2)
        o: pl.Tensor[[64, 64], pl.FP32] = pl.tile.store(r, [0, 0], out)
        return o
    """, VEC_PARAMS_MEM + ", n: pl.Scalar[pl.INDEX]")
    assert_same(run(parse(before)), expected)


def test_if_branch_yielding_an_outer_tile_updated_in_the_other_branch_in_place():
    # `r = t + t` in one branch, `r = t` in the other: t, p1 and r share t's buffer. The read of t in
    # the else branch never runs after p1 overwrites it, so this is accepted.
    params = VEC_PARAMS + ", n: pl.Scalar[pl.INDEX]"
    before = kernel(f"""
        t: {T64} = pl.tile.load(a, [0, 0], [64, 64], target_memory=pl.Mem.Vec)
        if n > 0:
            p1: {T64} = pl.tile.add(t, t)
            r: {T64} = pl.yield_(p1)
        else:
            r: {T64} = pl.yield_(t)
        o: pl.Tensor[[64, 64], pl.FP32] = pl.tile.store(r, [0, 0], out)
        return o
    """, params)
    out = run(parse(before))
    text = print_program(out)
    assert text.count("pl.tile.alloc(") == 1
    assert text.count("pl.MemRef(mem_vec_3, 0, 16384)") == 4


# --------------------------------------------------------------------------------------------------
# rejections
# --------------------------------------------------------------------------------------------------


def test_carried_tile_read_after_its_next_value_is_computed_is_copied_at_the_yield():
    # n cannot be computed into the carried buffer: acc is read again by m. n gets a buffer of its own
    # and a Vec -> Vec move copies it into the carried buffer right before pl.yield_.
    before = kernel(f"""
        z: {T64} = pl.tile.full([64, 64], value=0.0, dtype=pl.FP32, target_memory=pl.Mem.Vec)
        for i, (acc,) in pl.range(4, init_values=(z,)):
            n: {T64} = pl.tile.add(acc, acc)
            m: {T64} = pl.tile.mul(acc, n)
            s: {T64} = pl.yield_(n)
        o: pl.Tensor[[64, 64], pl.FP32] = pl.tile.store(s, [0, 0], out)
        return o
    """)
    ref0 = "pl.MemRef(mem_vec_3, 0, 16384)"
    expected = kernel(f"""
        mem_vec_3: pl.Ptr = pl.tile.alloc(pl.Mem.Vec, 16384)
        mem_vec_4: pl.Ptr = pl.tile.alloc(pl.Mem.Vec, 16384)
        mem_vec_5: pl.Ptr = pl.tile.alloc(pl.Mem.Vec, 16384)
        z: pl.Tile[[64, 64], pl.FP32, {ref0}, pl.Mem.Vec] = pl.tile.full([64, 64], value=0.0, dtype=pl.FP32, target_memory=pl.Mem.Vec)
        for i, (acc,) in pl.range(4, init_values=(z,)):
            n: pl.Tile[[64, 64], pl.FP32, pl.MemRef(mem_vec_4, 0, 16384), pl.Mem.Vec] = pl.tile.add(acc, acc)
            m: pl.Tile[[64, 64], pl.FP32, pl.MemRef(mem_vec_5, 0, 16384), pl.Mem.Vec] = pl.tile.mul(acc, n)
            n_carry: pl.Tile[[64, 64], pl.FP32, {ref0}, pl.Mem.Vec] = pl.tile.move(n, target_memory=pl.Mem.Vec)
            s: pl.Tile[[64, 64], pl.FP32, {ref0}, pl.Mem.Vec] = pl.yield_(n_carry)
        o: pl.Tensor[[64, 64], pl.FP32] = pl.tile.store(s, [0, 0], out)
        return o
    """, VEC_PARAMS_MEM)
    assert_same(run(parse(before)), expected)


def test_init_value_read_inside_its_loop_is_copied_before_the_loop():
    # z is read in every iteration, so the loop cannot accumulate in z's buffer: a copy z_init made
    # before the loop becomes the carried buffer.
    before = kernel(f"""
        z: {T64} = pl.tile.full([64, 64], value=0.0, dtype=pl.FP32, target_memory=pl.Mem.Vec)
        for i, (acc,) in pl.range(4, init_values=(z,)):
            n: {T64} = pl.tile.add(acc, z)
            s: {T64} = pl.yield_(n)
        o: pl.Tensor[[64, 64], pl.FP32] = pl.tile.store(s, [0, 0], out)
        return o
    """)
    ref1 = "pl.MemRef(mem_vec_4, 0, 16384)"
    expected = kernel(f"""
        mem_vec_3: pl.Ptr = pl.tile.alloc(pl.Mem.Vec, 16384)
        mem_vec_4: pl.Ptr = pl.tile.alloc(pl.Mem.Vec, 16384)
        z: pl.Tile[[64, 64], pl.FP32, pl.MemRef(mem_vec_3, 0, 16384), pl.Mem.Vec] = pl.tile.full([64, 64], value=0.0, dtype=pl.FP32, target_memory=pl.Mem.Vec)
        z_init: pl.Tile[[64, 64], pl.FP32, {ref1}, pl.Mem.Vec] = pl.tile.move(z, target_memory=pl.Mem.Vec)
        for i, (acc,) in pl.range(4, init_values=(z_init,)):
            n: pl.Tile[[64, 64], pl.FP32, {ref1}, pl.Mem.Vec] = pl.tile.add(acc, z)
            s: pl.Tile[[64, 64], pl.FP32, {ref1}, pl.Mem.Vec] = pl.yield_(n)
        o: pl.Tensor[[64, 64], pl.FP32] = pl.tile.store(s, [0, 0], out)
        return o
    """, VEC_PARAMS_MEM)
    assert_same(run(parse(before)), expected)


def test_loop_invariant_tile_yielded_by_an_if_inside_the_loop_is_copied_in_its_branch():
    # (online softmax) `alpha` is `ones` in one branch and a fresh exp in the other. ones lives outside
    # the loop and is read in every iteration, so the exp may not overwrite it: the branch that yields
    # ones yields a copy instead, and the if result shares the exp's buffer.
    params = VEC_PARAMS + ", n: pl.Scalar[pl.INDEX]"
    before = kernel(f"""
        ones: {T64} = pl.tile.full([64, 64], value=1.0, dtype=pl.FP32, target_memory=pl.Mem.Vec)
        for i, (o_i,) in pl.range(4, init_values=(out,)):
            if i == 0:
                alpha: {T64} = pl.yield_(ones)
            else:
                x: {T64} = pl.tile.load(a, [0, 0], [64, 64], target_memory=pl.Mem.Vec)
                e: {T64} = pl.tile.exp(x)
                alpha: {T64} = pl.yield_(e)
            o_n: pl.Tensor[[64, 64], pl.FP32] = pl.tile.store(alpha, [0, 0], o_i)
            o_r: pl.Tensor[[64, 64], pl.FP32] = pl.yield_(o_n)
        return o_r
    """, params)
    ref2 = "pl.MemRef(mem_vec_4, 0, 16384)"
    expected = kernel(f"""
        mem_vec_3: pl.Ptr = pl.tile.alloc(pl.Mem.Vec, 16384)
        mem_vec_4: pl.Ptr = pl.tile.alloc(pl.Mem.Vec, 16384)
        mem_vec_5: pl.Ptr = pl.tile.alloc(pl.Mem.Vec, 16384)
        ones: pl.Tile[[64, 64], pl.FP32, pl.MemRef(mem_vec_3, 0, 16384), pl.Mem.Vec] = pl.tile.full([64, 64], value=1.0, dtype=pl.FP32, target_memory=pl.Mem.Vec)
        for i, (o_i,) in pl.range(4, init_values=(out,)):
            if i == 0:
                ones_carry: pl.Tile[[64, 64], pl.FP32, {ref2}, pl.Mem.Vec] = pl.tile.move(ones, target_memory=pl.Mem.Vec)
                alpha: pl.Tile[[64, 64], pl.FP32, {ref2}, pl.Mem.Vec] = pl.yield_(ones_carry)
            else:
                x: pl.Tile[[64, 64], pl.FP32, pl.MemRef(mem_vec_5, 0, 16384), pl.Mem.Vec] = pl.tile.load(a, [0, 0], [64, 64], target_memory=pl.Mem.Vec)
                e: pl.Tile[[64, 64], pl.FP32, {ref2}, pl.Mem.Vec] = pl.tile.exp(x)
                alpha: pl.Tile[[64, 64], pl.FP32, {ref2}, pl.Mem.Vec] = pl.yield_(e)
            o_n: pl.Tensor[[64, 64], pl.FP32] = pl.tile.store(alpha, [0, 0], o_i)
            o_r: pl.Tensor[[64, 64], pl.FP32] = pl.yield_(o_n)
        return o_r
    """, VEC_PARAMS_MEM + ", n: pl.Scalar[pl.INDEX]")
    assert_same(run(parse(before)), expected)


def test_nested_tile_call_gets_a_named_statement_and_a_buffer():
    # exp(sub(ta, tb)): the inner sub result is a tile too; it is named e_sub and bound to a buffer.
    before = kernel(f"""
        ta: {T64} = pl.tile.load(a, [0, 0], [64, 64], target_memory=pl.Mem.Vec)
        tb: {T64} = pl.tile.load(b, [0, 0], [64, 64], target_memory=pl.Mem.Vec)
        e: {T64} = pl.tile.exp(pl.tile.sub(ta, tb))
        out_1: pl.Tensor[[64, 64], pl.FP32] = pl.tile.store(e, [0, 0], out)
        return out_1
    """)
    expected = kernel("""
        mem_vec_3: pl.Ptr = pl.tile.alloc(pl.Mem.Vec, 16384)
        mem_vec_4: pl.Ptr = pl.tile.alloc(pl.Mem.Vec, 16384)
        mem_vec_5: pl.Ptr = pl.tile.alloc(pl.Mem.Vec, 16384)
        mem_vec_6: pl.Ptr = pl.tile.alloc(pl.Mem.Vec, 16384)
        ta: pl.Tile[[64, 64], pl.FP32, pl.MemRef(mem_vec_3, 0, 16384), pl.Mem.Vec] = pl.tile.load(a, [0, 0], [64, 64], target_memory=pl.Mem.Vec)
        tb: pl.Tile[[64, 64], pl.FP32, pl.MemRef(mem_vec_4, 0, 16384), pl.Mem.Vec] = pl.tile.load(b, [0, 0], [64, 64], target_memory=pl.Mem.Vec)
        e_sub: pl.Tile[[64, 64], pl.FP32, pl.MemRef(mem_vec_5, 0, 16384), pl.Mem.Vec] = pl.tile.sub(ta, tb)
        e: pl.Tile[[64, 64], pl.FP32, pl.MemRef(mem_vec_6, 0, 16384), pl.Mem.Vec] = pl.tile.exp(e_sub)
        out_1: pl.Tensor[[64, 64], pl.FP32] = pl.tile.store(e, [0, 0], out)
        return out_1
    """, VEC_PARAMS_MEM)
    assert_same(run(parse(before)), expected)


def test_acc_init_read_inside_its_loop_rejected_because_acc_has_no_same_space_copy():
    # matmul_acc accumulates in place into the carried Acc buffer, which is c0's; c0 is also stored in
    # every iteration. Vec would get a copy; no TMOV copies Acc -> Acc.
    text = kernel("""
        x: pl.Tile[[16, 32], pl.BF16, pl.Mem.Mat] = pl.tile.load(a, [0, 0], [16, 32], target_memory=pl.Mem.Mat)
        w: pl.Tile[[32, 32], pl.BF16, pl.Mem.Mat] = pl.tile.load(b, [0, 0], [32, 32], target_memory=pl.Mem.Mat)
        xl: pl.Tile[[16, 32], pl.BF16, pl.Mem.Left] = pl.tile.move(x, target_memory=pl.Mem.Left)
        wr: pl.Tile[[32, 32], pl.BF16, pl.Mem.Right] = pl.tile.move(w, target_memory=pl.Mem.Right)
        c0: pl.Tile[[16, 32], pl.FP32, pl.Mem.Acc] = pl.tile.matmul(xl, wr)
        for i, (acc,) in pl.range(3, init_values=(c0,)):
            o1: pl.Tensor[[16, 32], pl.FP32] = pl.tile.store(c0, [0, 0], out)
            c1: pl.Tile[[16, 32], pl.FP32, pl.Mem.Acc] = pl.tile.matmul_acc(acc, xl, wr)
            cs: pl.Tile[[16, 32], pl.FP32, pl.Mem.Acc] = pl.yield_(c1)
        o: pl.Tensor[[16, 32], pl.FP32] = pl.tile.store(cs, [0, 0], out)
        return o
    """, MM_PARAMS, MM_RET, "AIC")
    for ctx in (A2A3, A5):
        d = rejected(text, "PTOC-E0382", ctx)
        assert d.span.line == 12  # the matmul_acc that would overwrite c0
        assert "loop at line 10" in d.message and "'c0'" in d.message and "line 11" in d.message
        assert "Acc has no same-space copy" in d.message


def test_matmul_acc_source_read_after_the_in_place_update_rejected():
    text = kernel("""
        x: pl.Tile[[16, 32], pl.BF16, pl.Mem.Mat] = pl.tile.load(a, [0, 0], [16, 32], target_memory=pl.Mem.Mat)
        w: pl.Tile[[32, 32], pl.BF16, pl.Mem.Mat] = pl.tile.load(b, [0, 0], [32, 32], target_memory=pl.Mem.Mat)
        xl: pl.Tile[[16, 32], pl.BF16, pl.Mem.Left] = pl.tile.move(x, target_memory=pl.Mem.Left)
        wr: pl.Tile[[32, 32], pl.BF16, pl.Mem.Right] = pl.tile.move(w, target_memory=pl.Mem.Right)
        c0: pl.Tile[[16, 32], pl.FP32, pl.Mem.Acc] = pl.tile.matmul(xl, wr)
        c1: pl.Tile[[16, 32], pl.FP32, pl.Mem.Acc] = pl.tile.matmul_acc(c0, xl, wr)
        o: pl.Tensor[[16, 32], pl.FP32] = pl.tile.store(c0, [0, 0], out)
        return o
    """, MM_PARAMS, MM_RET, "AIC")
    d = rejected(text, "PTOC-E0383")
    assert d.span.line == 10
    assert "tile.matmul_acc" in d.message and "'c0'" in d.message and "line 11" in d.message


def test_loop_carried_tile_changing_memory_space_rejected():
    params = "self, out: pl.Out[pl.Tensor[[16, 16], pl.FP32]]"
    text = kernel("""
        c: pl.Tile[[16, 16], pl.FP32, pl.Mem.Acc] = pl.tile.create([16, 16], dtype=pl.FP32, target_memory=pl.Mem.Acc)
        for i, (acc,) in pl.range(2, init_values=(c,)):
            v: pl.Tile[[16, 16], pl.FP32, pl.Mem.Vec] = pl.tile.create([16, 16], dtype=pl.FP32, target_memory=pl.Mem.Vec)
            s = pl.yield_(v)
        return out
    """, params, "pl.Tensor[[16, 16], pl.FP32]", "InCore")
    d = rejected(text, "PTOC-E0381")
    assert "Acc" in d.message and "Vec" in d.message and d.span.line == 6


def test_tile_typed_kernel_parameter_rejected():
    params = "self, t: pl.Tile[[16, 16], pl.FP32, pl.Mem.Vec], out: pl.Out[pl.Tensor[[16, 16], pl.FP32]]"
    text = kernel("""
        o: pl.Tensor[[16, 16], pl.FP32] = pl.tile.store(t, [0, 0], out)
        return o
    """, params, "pl.Tensor[[16, 16], pl.FP32]")
    d = rejected(text, "PTOC-E0384")
    assert "'t'" in d.message


# --------------------------------------------------------------------------------------------------
# idempotence, scope, round trip
# --------------------------------------------------------------------------------------------------

VEC_ADD = kernel(f"""
    ta: {T64} = pl.tile.load(a, [0, 0], [64, 64], target_memory=pl.Mem.Vec)
    tb: {T64} = pl.tile.load(b, [0, 0], [64, 64], target_memory=pl.Mem.Vec)
    tc: {T64} = pl.tile.add(ta, tb)
    out_1: pl.Tensor[[64, 64], pl.FP32] = pl.tile.store(tc, [0, 0], out)
    return out_1
""")


def test_running_twice_changes_nothing():
    once = run(parse(VEC_ADD))
    twice = run(once)
    assert twice == once


def test_printed_result_reparses_and_checks():
    out = run(parse(VEC_ADD))
    again = parse_program(print_program(out), "again.ir", ctx=A2A3)  # full op checks
    assert again == out


def test_orchestration_functions_are_untouched():
    text = VEC_ADD + textwrap.indent(textwrap.dedent("""
        @pl.function(type=pl.FunctionType.Orchestration)
        def main(self, a: pl.Tensor[[64, 64], pl.FP32], b: pl.Tensor[[64, 64], pl.FP32]) -> pl.Tensor[[64, 64], pl.FP32]:
            out: pl.Tensor[[64, 64], pl.FP32] = pl.tensor.create([64, 64], dtype=pl.FP32)
            y: pl.Tensor[[64, 64], pl.FP32] = self.k(a, b, out)
            return y
    """), "    ")
    prog = parse(text)
    out = run(prog)
    assert out.function("main") is prog.function("main")
    assert out.function("k") != prog.function("k")


def test_same_plan_on_a5():
    # InitMemRef sizes do not depend on the target's capacities.
    assert run(parse(VEC_ADD, A5), A5) == run(parse(VEC_ADD))


def test_tuple_result_gets_one_buffer_per_tile_and_its_elements_alias_them():
    # A5 quant_mx: data [16, 64] FP8 = 1024 bytes, scale [16, 2] FP8E8M0 = 32 bytes; q[0] and q[1] are
    # views of those buffers. x: [16, 64] BF16 = 2048 bytes.
    params = "self, a: pl.Tensor[[16, 64], pl.BF16], out: pl.Out[pl.Tensor[[16, 64], pl.FP8E4M3FN]]"
    ret = "pl.Tensor[[16, 64], pl.FP8E4M3FN]"
    params_mem = ('self, a: pl.Tensor[[16, 64], pl.BF16, pl.MemRef("mem_ddr_0", 0, 2048)], '
                  'out: pl.Out[pl.Tensor[[16, 64], pl.FP8E4M3FN, pl.MemRef("mem_ddr_1", 0, 1024)]]')
    before = kernel("""
        x: pl.Tile[[16, 64], pl.BF16, pl.Mem.Vec] = pl.tile.load(a, [0, 0], [16, 64], target_memory=pl.Mem.Vec)
        q = pl.tile.quant_mx(x, axis=1, dtype=pl.FP8E4M3FN)
        d = q[0]
        sc = q[1]
        o: pl.Tensor[[16, 64], pl.FP8E4M3FN] = pl.tile.store(d, [0, 0], out)
        return o
    """, params, ret)
    data = "pl.Tile[[16, 64], pl.FP8E4M3FN, pl.MemRef(mem_vec_3, 0, 1024), pl.Mem.Vec]"
    scale = "pl.Tile[[16, 2], pl.FP8E8M0, pl.MemRef(mem_vec_4, 0, 32), pl.Mem.Vec, pl.TileView(fractal=32)]"
    expected = kernel(f"""
        mem_vec_2: pl.Ptr = pl.tile.alloc(pl.Mem.Vec, 2048)
        mem_vec_3: pl.Ptr = pl.tile.alloc(pl.Mem.Vec, 1024)
        mem_vec_4: pl.Ptr = pl.tile.alloc(pl.Mem.Vec, 32)
        x: pl.Tile[[16, 64], pl.BF16, pl.MemRef(mem_vec_2, 0, 2048), pl.Mem.Vec] = pl.tile.load(a, [0, 0], [16, 64], target_memory=pl.Mem.Vec)
        q: pl.Tuple[{data}, {scale}] = pl.tile.quant_mx(x, axis=1, dtype=pl.FP8E4M3FN)
        d: {data} = q[0]
        sc: {scale} = q[1]
        o: pl.Tensor[[16, 64], pl.FP8E4M3FN] = pl.tile.store(d, [0, 0], out)
        return o
    """, params_mem, ret)
    assert_same(run(parse(before, A5), A5), expected, A5)


def test_plain_function_holding_tiles_is_planned_like_a_kernel():
    # A function without a type (Opaque) that computes on tiles gets its buffers too; its tensor
    # parameters name their GM regions: [32, 16] FP16 = 1024 bytes each.
    params = "self, x: pl.Tensor[[32, 16], pl.FP16], y: pl.Out[pl.Tensor[[32, 16], pl.FP16]]"
    before = f"""@pl.program
class p:
    @pl.function
    def f({params}) -> pl.Tensor[[32, 16], pl.FP16]:
        t: pl.Tile[[32, 16], pl.FP16, pl.Mem.Vec] = pl.tile.load(x, [0, 0], [32, 16], target_memory=pl.Mem.Vec)
        u: pl.Tile[[32, 16], pl.FP16, pl.Mem.Vec] = pl.tile.relu(t)
        r: pl.Tensor[[32, 16], pl.FP16] = pl.tile.store(u, [0, 0], y)
        return r
"""
    expected = """@pl.program
class p:
    @pl.function
    def f(self, x: pl.Tensor[[32, 16], pl.FP16, pl.MemRef("mem_ddr_0", 0, 1024)], y: pl.Out[pl.Tensor[[32, 16], pl.FP16, pl.MemRef("mem_ddr_1", 0, 1024)]]) -> pl.Tensor[[32, 16], pl.FP16]:
        mem_vec_2: pl.Ptr = pl.tile.alloc(pl.Mem.Vec, 1024)
        mem_vec_3: pl.Ptr = pl.tile.alloc(pl.Mem.Vec, 1024)
        t: pl.Tile[[32, 16], pl.FP16, pl.MemRef(mem_vec_2, 0, 1024), pl.Mem.Vec] = pl.tile.load(x, [0, 0], [32, 16], target_memory=pl.Mem.Vec)
        u: pl.Tile[[32, 16], pl.FP16, pl.MemRef(mem_vec_3, 0, 1024), pl.Mem.Vec] = pl.tile.relu(t)
        r: pl.Tensor[[32, 16], pl.FP16] = pl.tile.store(u, [0, 0], y)
        return r
"""
    assert_same(run(parse(before)), expected)


def test_a_kernel_returning_a_tile_is_a_user_error_not_a_crash(tmp_path):
    # a kernel returns through GM (tensors); a returned tile used to stop InitMemRef with an internal error
    import subprocess
    import sys
    from pathlib import Path

    src = tmp_path / "k.ir"
    src.write_text("import pypto.language as pl\n\n@pl.program\nclass p:\n"
                   "    @pl.function(type=pl.FunctionType.InCore)\n"
                   "    def k(self, x: pl.Tensor[[16, 16], pl.FP32]) -> pl.Tile[[16, 16], pl.FP32, pl.Mem.Vec]:\n"
                   "        t: pl.Tile[[16, 16], pl.FP32, pl.Mem.Vec] = pl.tile.load(x, [0, 0], [16, 16])\n"
                   "        return t\n")
    ptoc = str(Path(sys.executable).with_name("ptoc"))
    r = subprocess.run([ptoc, "compile", str(src), "-o", str(tmp_path / "k.pto")], capture_output=True, text=True)
    assert r.returncode == 1, r.stderr
    assert "PTOC-E0670" in r.stderr and "k.ir:6:" in r.stderr and "pl.Out" in r.stderr
    assert "internal error" not in r.stderr


@pytest.mark.parametrize("op, in_place", [("pl.tile.recip(acc)", False), ("pl.tile.row_expand_mul(acc, v)", True),
                                          ("pl.tile.exp(acc)", True)])
def test_an_op_that_reads_its_source_while_writing_gets_a_carry_copy(op, in_place):
    # rule 4 with rule 3: the value yielded for a carried tile is computed in the carried buffer, over the
    # iter_arg it reads for the last time, unless the op reads its source while it writes (recip's high-
    # precision path): then it gets a buffer of its own and a move copies it into the carried buffer
    out = run(parse(kernel(f"""
        v: pl.Tile[[64, 1], pl.FP32, pl.Mem.Vec] = pl.tile.load(b, [0, 0], [64, 1], target_memory=pl.Mem.Vec)
        x0: {T64} = pl.tile.load(a, [0, 0], [64, 64], target_memory=pl.Mem.Vec)
        for i, (acc,) in pl.range(0, 4, 1, init_values=(x0,)):
            nxt: {T64} = {op}
            r: {T64} = pl.yield_(nxt)
        o: {VEC_RET} = pl.tile.store(r, [0, 0], out)
        return o
    """)))
    text = print_program(out)
    assert ("pl.tile.move(nxt" not in text) == in_place, text


# --------------------------------------------------------------------------------------------------
# tiles in a pipe slot

POP_PARAMS = "self, out: pl.Out[pl.Tensor[[32, 16], pl.FP32]]"
POP_PARAMS_MEM = 'self, out: pl.Out[pl.Tensor[[32, 16], pl.FP32, pl.MemRef("mem_ddr_0", 0, 2048)]]'
POP_RET = "pl.Tensor[[32, 16], pl.FP32]"


def test_popped_tile_and_its_view_get_no_buffer_only_the_computed_tile_does():
    # The popped 16 x 32 tile and its reshape live in the pipe's slot buffer (reserve_buffer); only exp's
    # result (32 x 16 FP32 = 2048 bytes) needs on-chip memory, so exactly one buffer is declared.
    before = kernel("""
        got: pl.Tile[[16, 32], pl.FP32, pl.Mem.Vec] = pl.tile.tpop_from_aic(split=0)
        tall: pl.Tile[[32, 16], pl.FP32, pl.Mem.Vec] = pl.tile.reshape(got, [32, 16])
        e: pl.Tile[[32, 16], pl.FP32, pl.Mem.Vec] = pl.tile.exp(tall)
        pl.system.tfree_to_aic(got)
        o: pl.Tensor[[32, 16], pl.FP32] = pl.tile.store(e, [0, 0], out)
        return o
    """, POP_PARAMS, POP_RET)
    expected = kernel("""
        mem_vec_1: pl.Ptr = pl.tile.alloc(pl.Mem.Vec, 2048)
        got: pl.Tile[[16, 32], pl.FP32, pl.Mem.Vec] = pl.tile.tpop_from_aic(split=0)
        tall: pl.Tile[[32, 16], pl.FP32, pl.Mem.Vec] = pl.tile.reshape(got, [32, 16])
        e: pl.Tile[[32, 16], pl.FP32, pl.MemRef(mem_vec_1, 0, 2048), pl.Mem.Vec] = pl.tile.exp(tall)
        pl.system.tfree_to_aic(got)
        o: pl.Tensor[[32, 16], pl.FP32] = pl.tile.store(e, [0, 0], out)
        return o
    """, POP_PARAMS_MEM, POP_RET)
    assert_same(run(parse(before)), expected)


def test_popped_tile_a_loop_carries_keeps_a_buffer():
    # A popped tile yielded as a loop's carried value must sit in the carried buffer (nothing copies it
    # there), so it keeps one: the 16 x 32 FP32 init, the iter_arg, the popped value and the result share
    # one 2048-byte buffer.
    params = "self, a: pl.Tensor[[16, 32], pl.FP32], out: pl.Out[pl.Tensor[[16, 32], pl.FP32]]"
    ret = "pl.Tensor[[16, 32], pl.FP32]"
    t = "pl.Tile[[16, 32], pl.FP32, pl.Mem.Vec]"
    before = kernel(f"""
        z: {t} = pl.tile.load(a, [0, 0], [16, 32], target_memory=pl.Mem.Vec)
        for i, (acc,) in pl.range(2, init_values=(z,)):
            got: {t} = pl.tile.tpop_from_aic(split=0)
            n = pl.yield_(got)
        o: pl.Tensor[[16, 32], pl.FP32] = pl.tile.store(n, [0, 0], out)
        return o
    """, params, ret)
    out = run(parse(before))
    text = print_program(out)
    assert text.count("pl.tile.alloc(") == 1, text
    assert "got: pl.Tile[[16, 32], pl.FP32, pl.MemRef(mem_vec_2, 0, 2048), pl.Mem.Vec]" in text, text
