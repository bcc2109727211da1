"""AllocateMemoryAddr: every pl.tile.alloc gets a 32-byte aligned `addr=` inside its memory space;
buffers with disjoint lifetimes share memory (first fit); a space that overflows its capacity on the
target is a user error."""

import os
import re
import subprocess
import sys
import textwrap

import pytest

from ptoc.context import CompileContext
from ptoc.diagnostics import CODES, CompileError
from ptoc.frontend.parser import parse_program
from ptoc.ir.printer import print_program
from ptoc.passes.AllocateMemoryAddr import AllocateMemoryAddr
from ptoc.passes.InitMemRef import InitMemRef
from ptoc.passes.manager import check_invariants

A2A3 = CompileContext(arch="a2a3")
A5 = CompileContext(arch="a5")

VEC_PARAMS = ("self, a: pl.Tensor[[64, 64], pl.FP32], b: pl.Tensor[[64, 64], pl.FP32], "
              "out: pl.Out[pl.Tensor[[64, 64], pl.FP32]]")
VEC_RET = "pl.Tensor[[64, 64], pl.FP32]"


def kernel(body: str, params: str = VEC_PARAMS, ret: str = VEC_RET, ftype: str = "AIV") -> str:
    """A one-kernel program; the first body line is line 5."""
    body = textwrap.indent(textwrap.dedent(body).strip("\n"), " " * 8)
    return (f"@pl.program\nclass p:\n    @pl.function(type=pl.FunctionType.{ftype})\n"
            f"    def k({params}) -> {ret}:\n{body}\n")


def vt(mem: str, size: int = 16384, shape: str = "[64, 64]") -> str:
    """A Vec FP32 tile type bound to buffer `mem`."""
    return f"pl.Tile[{shape}, pl.FP32, pl.MemRef({mem}, 0, {size}), pl.Mem.Vec]"


def with_addrs(text: str, addrs: dict[str, int]) -> str:
    """`text` with `addr=<n>` added to the alloc of every buffer named in `addrs`."""
    for name, addr in addrs.items():
        text, n = re.subn(rf"({name}: pl\.Ptr = pl\.tile\.alloc\([^)]*)\)", rf"\1, addr={addr})", text)
        assert n == 1, name
    return text


def parse(text: str, ctx=A2A3):
    return parse_program(text, "test.ir", ctx=ctx)


def run(prog, ctx=A2A3):
    out = AllocateMemoryAddr().run(prog, ctx)
    check_invariants(out, ctx, AllocateMemoryAddr())  # verifier with op rules + property `addresses`
    return out


def assert_same(out, expected_text: str, ctx=A2A3):
    expected = parse(expected_text, ctx)
    assert out == expected, f"got:\n{print_program(out)}\nexpected:\n{print_program(expected)}"


def check(before: str, addrs: dict[str, int], ctx=A2A3):
    assert_same(run(parse(before, ctx), ctx), with_addrs(before, addrs), ctx)


# --------------------------------------------------------------------------------------------------
# placement
# --------------------------------------------------------------------------------------------------

VEC_ADD = kernel(f"""
    mem_vec_0: pl.Ptr = pl.tile.alloc(pl.Mem.Vec, 16384)
    ta: {vt("mem_vec_0")} = pl.tile.load(a, [0, 0], [64, 64], target_memory=pl.Mem.Vec)
    mem_vec_1: pl.Ptr = pl.tile.alloc(pl.Mem.Vec, 16384)
    tb: {vt("mem_vec_1")} = pl.tile.load(b, [0, 0], [64, 64], target_memory=pl.Mem.Vec)
    mem_vec_2: pl.Ptr = pl.tile.alloc(pl.Mem.Vec, 16384)
    tc: {vt("mem_vec_2")} = pl.tile.add(ta, tb)
    out_1: pl.Tensor[[64, 64], pl.FP32] = pl.tile.store(tc, [0, 0], out)
    return out_1
""")


def test_vector_add_places_three_live_vec_buffers_back_to_back():
    # ta and tb are read by the add that writes tc: all three are live there -> 0, 16384, 32768.
    check(VEC_ADD, {"mem_vec_0": 0, "mem_vec_1": 16384, "mem_vec_2": 32768})


def test_matmul_kernel_places_each_memory_space_from_zero():
    # x (Mat, 1024) is still read by its move when w (Mat, 2048) is loaded -> w at 1024.
    # Left, Right and Acc each hold one buffer -> 0.
    params = ("self, a: pl.Tensor[[16, 32], pl.BF16], b: pl.Tensor[[32, 32], pl.BF16], "
              "out: pl.Out[pl.Tensor[[16, 32], pl.FP32]]")
    before = kernel("""
        mem_mat_0: pl.Ptr = pl.tile.alloc(pl.Mem.Mat, 1024)
        x: pl.Tile[[16, 32], pl.BF16, pl.MemRef(mem_mat_0, 0, 1024), pl.Mem.Mat] = pl.tile.load(a, [0, 0], [16, 32], target_memory=pl.Mem.Mat)
        mem_mat_1: pl.Ptr = pl.tile.alloc(pl.Mem.Mat, 2048)
        w: pl.Tile[[32, 32], pl.BF16, pl.MemRef(mem_mat_1, 0, 2048), pl.Mem.Mat] = pl.tile.load(b, [0, 0], [32, 32], target_memory=pl.Mem.Mat)
        mem_left_2: pl.Ptr = pl.tile.alloc(pl.Mem.Left, 1024)
        xl: pl.Tile[[16, 32], pl.BF16, pl.MemRef(mem_left_2, 0, 1024), pl.Mem.Left] = pl.tile.move(x, target_memory=pl.Mem.Left)
        mem_right_3: pl.Ptr = pl.tile.alloc(pl.Mem.Right, 2048)
        wr: pl.Tile[[32, 32], pl.BF16, pl.MemRef(mem_right_3, 0, 2048), pl.Mem.Right] = pl.tile.move(w, target_memory=pl.Mem.Right)
        mem_acc_4: pl.Ptr = pl.tile.alloc(pl.Mem.Acc, 2048)
        c: pl.Tile[[16, 32], pl.FP32, pl.MemRef(mem_acc_4, 0, 2048), pl.Mem.Acc] = pl.tile.matmul(xl, wr)
        o: pl.Tensor[[16, 32], pl.FP32] = pl.tile.store(c, [0, 0], out)
        return o
    """, params, "pl.Tensor[[16, 32], pl.FP32]", "AIC")
    check(before, {"mem_mat_0": 0, "mem_mat_1": 1024, "mem_left_2": 0, "mem_right_3": 0, "mem_acc_4": 0})


def test_sequential_temporaries_share_an_address():
    # ta dies at the statement that writes tb; tc is allocated after that, so it reuses ta's 0.
    before = kernel(f"""
        mem_vec_0: pl.Ptr = pl.tile.alloc(pl.Mem.Vec, 16384)
        ta: {vt("mem_vec_0")} = pl.tile.load(a, [0, 0], [64, 64], target_memory=pl.Mem.Vec)
        mem_vec_1: pl.Ptr = pl.tile.alloc(pl.Mem.Vec, 16384)
        tb: {vt("mem_vec_1")} = pl.tile.exp(ta)
        mem_vec_2: pl.Ptr = pl.tile.alloc(pl.Mem.Vec, 16384)
        tc: {vt("mem_vec_2")} = pl.tile.exp(tb)
        o: pl.Tensor[[64, 64], pl.FP32] = pl.tile.store(tc, [0, 0], out)
        return o
    """)
    check(before, {"mem_vec_0": 0, "mem_vec_1": 16384, "mem_vec_2": 0})


def test_overlapping_lifetimes_do_not_share():
    # ta is read again by the add that writes tc: nothing can be reused.
    before = kernel(f"""
        mem_vec_0: pl.Ptr = pl.tile.alloc(pl.Mem.Vec, 16384)
        ta: {vt("mem_vec_0")} = pl.tile.load(a, [0, 0], [64, 64], target_memory=pl.Mem.Vec)
        mem_vec_1: pl.Ptr = pl.tile.alloc(pl.Mem.Vec, 16384)
        tb: {vt("mem_vec_1")} = pl.tile.exp(ta)
        mem_vec_2: pl.Ptr = pl.tile.alloc(pl.Mem.Vec, 16384)
        tc: {vt("mem_vec_2")} = pl.tile.add(ta, tb)
        o: pl.Tensor[[64, 64], pl.FP32] = pl.tile.store(tc, [0, 0], out)
        return o
    """)
    check(before, {"mem_vec_0": 0, "mem_vec_1": 16384, "mem_vec_2": 32768})


def test_buffers_are_placed_in_the_order_of_their_names_as_strings():
    # PyPTO sorts a space's buffers by name before laying them out (DefaultMemoryAllocatorPolicy::
    # OrderMemRefs, a string comparison): mem_vec_10, mem_vec_11, then mem_vec_9. All three are live at the
    # col_expand_mul (its operands and its result): mem_vec_10 (256 bytes) at 0, mem_vec_11 (16384) at 256,
    # mem_vec_9 at 256 + 16384 = 16640.
    params = VEC_PARAMS + ", g: pl.Tensor[[1, 64], pl.FP32]"
    row = "pl.Tile[[1, 64], pl.FP32, pl.MemRef(mem_vec_10, 0, 256), pl.Mem.Vec]"
    before = kernel(f"""
        mem_vec_9: pl.Ptr = pl.tile.alloc(pl.Mem.Vec, 16384)
        mem_vec_10: pl.Ptr = pl.tile.alloc(pl.Mem.Vec, 256)
        mem_vec_11: pl.Ptr = pl.tile.alloc(pl.Mem.Vec, 16384)
        ta: {vt("mem_vec_9")} = pl.tile.load(a, [0, 0], [64, 64], target_memory=pl.Mem.Vec)
        tg: {row} = pl.tile.load(g, [0, 0], [1, 64], target_memory=pl.Mem.Vec)
        tc: {vt("mem_vec_11")} = pl.tile.col_expand_mul(ta, tg)
        o: pl.Tensor[[64, 64], pl.FP32] = pl.tile.store(tc, [0, 0], out)
        return o
    """, params)
    check(before, {"mem_vec_9": 16640, "mem_vec_10": 0, "mem_vec_11": 256})


def test_first_fit_skips_a_hole_too_small_for_the_buffer():
    # a0 is dead when c0 (32768 bytes) is allocated, but its 16384-byte hole at 0 is too small while
    # b0 occupies [16384, 32768): c0 goes to 32768. d0 (16384) then fits the hole at 0.
    params = VEC_PARAMS + ", out2: pl.Out[pl.Tensor[[64, 128], pl.FP32]]"
    big = "[64, 128]"
    before = kernel(f"""
        mem_vec_0: pl.Ptr = pl.tile.alloc(pl.Mem.Vec, 16384)
        a0: {vt("mem_vec_0")} = pl.tile.load(a, [0, 0], [64, 64], target_memory=pl.Mem.Vec)
        mem_vec_1: pl.Ptr = pl.tile.alloc(pl.Mem.Vec, 16384)
        b0: {vt("mem_vec_1")} = pl.tile.exp(a0)
        mem_vec_2: pl.Ptr = pl.tile.alloc(pl.Mem.Vec, 32768)
        c0: {vt("mem_vec_2", 32768, big)} = pl.tile.full({big}, value=1.0, dtype=pl.FP32, target_memory=pl.Mem.Vec)
        mem_vec_3: pl.Ptr = pl.tile.alloc(pl.Mem.Vec, 16384)
        d0: {vt("mem_vec_3")} = pl.tile.exp(b0)
        o1: pl.Tensor[[64, 128], pl.FP32] = pl.tile.store(c0, [0, 0], out2)
        o: pl.Tensor[[64, 64], pl.FP32] = pl.tile.store(d0, [0, 0], out)
        return o
    """, params)
    check(before, {"mem_vec_0": 0, "mem_vec_1": 16384, "mem_vec_2": 32768, "mem_vec_3": 0})


def test_loop_carried_accumulator_keeps_its_address_across_the_loop():
    # mem_vec_0 (z, acc, n, s) is live from before the loop to the exp after it; x's buffer lives in the
    # body only, so the exp after the loop reuses its 16384.
    before = kernel(f"""
        mem_vec_0: pl.Ptr = pl.tile.alloc(pl.Mem.Vec, 16384)
        z: {vt("mem_vec_0")} = pl.tile.full([64, 64], value=0.0, dtype=pl.FP32, target_memory=pl.Mem.Vec)
        for i, (acc,) in pl.range(4, init_values=(z,)):
            mem_vec_1: pl.Ptr = pl.tile.alloc(pl.Mem.Vec, 16384)
            x: {vt("mem_vec_1")} = pl.tile.load(a, [0, 0], [64, 64], target_memory=pl.Mem.Vec)
            n: {vt("mem_vec_0")} = pl.tile.add(acc, x)
            s: {vt("mem_vec_0")} = pl.yield_(n)
        mem_vec_2: pl.Ptr = pl.tile.alloc(pl.Mem.Vec, 16384)
        e: {vt("mem_vec_2")} = pl.tile.exp(s)
        o: pl.Tensor[[64, 64], pl.FP32] = pl.tile.store(e, [0, 0], out)
        return o
    """)
    check(before, {"mem_vec_0": 0, "mem_vec_1": 16384, "mem_vec_2": 16384})


def test_tile_read_inside_a_loop_stays_live_to_the_end_of_the_loop():
    # t's last read is the first body statement, but the next iteration reads it again: v cannot take
    # t's 0 (it would without the loop) and goes after u.
    before = kernel(f"""
        mem_vec_0: pl.Ptr = pl.tile.alloc(pl.Mem.Vec, 16384)
        t: {vt("mem_vec_0")} = pl.tile.load(a, [0, 0], [64, 64], target_memory=pl.Mem.Vec)
        for i in pl.range(4):
            mem_vec_1: pl.Ptr = pl.tile.alloc(pl.Mem.Vec, 16384)
            u: {vt("mem_vec_1")} = pl.tile.exp(t)
            mem_vec_2: pl.Ptr = pl.tile.alloc(pl.Mem.Vec, 16384)
            v: {vt("mem_vec_2")} = pl.tile.exp(u)
            o: pl.Tensor[[64, 64], pl.FP32] = pl.tile.store(v, [0, 0], out)
        return out
    """)
    check(before, {"mem_vec_0": 0, "mem_vec_1": 16384, "mem_vec_2": 32768})


def test_odd_size_is_placed_on_a_32_byte_boundary():
    # A hand-written 30-byte buffer ([3, 5] FP16) occupies 32 bytes: the next one starts at 32, not 30.
    def t16(mem):
        return f"pl.Tile[[3, 5], pl.FP16, pl.MemRef({mem}, 0, 30), pl.Mem.Vec]"

    before = kernel(f"""
        mem_vec_0: pl.Ptr = pl.tile.alloc(pl.Mem.Vec, 30)
        t: {t16("mem_vec_0")} = pl.tile.full([3, 5], value=0.0, dtype=pl.FP16, target_memory=pl.Mem.Vec)
        mem_vec_1: pl.Ptr = pl.tile.alloc(pl.Mem.Vec, 30)
        u: {t16("mem_vec_1")} = pl.tile.neg(t)
        mem_vec_2: pl.Ptr = pl.tile.alloc(pl.Mem.Vec, 30)
        w: {t16("mem_vec_2")} = pl.tile.add(t, u)
        return out
    """)
    check(before, {"mem_vec_0": 0, "mem_vec_1": 32, "mem_vec_2": 64})


# --------------------------------------------------------------------------------------------------
# capacity per target
# --------------------------------------------------------------------------------------------------

BIG_PARAMS = ("self, a: pl.Tensor[[128, 128], pl.FP32], b: pl.Tensor[[128, 128], pl.FP32], "
              "out: pl.Out[pl.Tensor[[128, 128], pl.FP32]]")
BIG_RET = "pl.Tensor[[128, 128], pl.FP32]"
T128 = "pl.Tile[[128, 128], pl.FP32, pl.Mem.Vec]"

# Three live 128 x 128 FP32 tiles: 3 * 65536 = 196608 bytes of Vec.
BIG_ADD = kernel(f"""
    x: {T128} = pl.tile.load(a, [0, 0], [128, 128], target_memory=pl.Mem.Vec)
    y: {T128} = pl.tile.load(b, [0, 0], [128, 128], target_memory=pl.Mem.Vec)
    z: {T128} = pl.tile.add(x, y)
    o: pl.Tensor[[128, 128], pl.FP32] = pl.tile.store(z, [0, 0], out)
    return o
""", BIG_PARAMS, BIG_RET)


def plan(text: str, ctx):
    prog = InitMemRef().run(parse(text, ctx), ctx)
    return run(prog, ctx)


def test_vec_overflow_rejected_on_a2a3_with_peak_line_and_capacity():
    with pytest.raises(CompileError) as e:
        plan(BIG_ADD, A2A3)
    d = e.value.diagnostics[0]
    assert d.code == "PTOC-E0390" and "PTOC-E0390" in CODES
    # z is written at line 7 while x and y are live: the peak, 196608 > 184 KiB = 188416
    assert d.message == "Vec needs 196608 bytes at line 7 but holds 188416 (184 KiB usable)"
    assert d.span.line == 7
    assert d.hint and [m for m, _ in d.notes] == [
        "x (mem_vec_3): 65536 bytes at offset 0", "y (mem_vec_4): 65536 bytes at offset 65536",
        "z (mem_vec_5): 65536 bytes at offset 131072"]  # mem_ddr_0..2 name the three tensor parameters


def test_same_kernel_fits_vec_on_a5():
    out = plan(BIG_ADD, A5)  # A5 Vec holds 240 KiB = 245760
    text = print_program(out)
    assert "pl.tile.alloc(pl.Mem.Vec, 65536, addr=0)" in text
    assert "pl.tile.alloc(pl.Mem.Vec, 65536, addr=65536)" in text
    assert "pl.tile.alloc(pl.Mem.Vec, 65536, addr=131072)" in text


ACC_PARAMS = ("self, o1: pl.Out[pl.Tensor[[128, 256], pl.FP32]], o2: pl.Out[pl.Tensor[[128, 256], pl.FP32]]")
ACC_TWO = kernel("""
    mem_acc_0: pl.Ptr = pl.tile.alloc(pl.Mem.Acc, 131072)
    c: pl.Tile[[128, 256], pl.FP32, pl.MemRef(mem_acc_0, 0, 131072), pl.Mem.Acc] = pl.tile.create([128, 256], dtype=pl.FP32, target_memory=pl.Mem.Acc)
    mem_acc_1: pl.Ptr = pl.tile.alloc(pl.Mem.Acc, 131072)
    d: pl.Tile[[128, 256], pl.FP32, pl.MemRef(mem_acc_1, 0, 131072), pl.Mem.Acc] = pl.tile.create([128, 256], dtype=pl.FP32, target_memory=pl.Mem.Acc)
    r1: pl.Tensor[[128, 256], pl.FP32] = pl.tile.store(c, [0, 0], o1)
    r2: pl.Tensor[[128, 256], pl.FP32] = pl.tile.store(d, [0, 0], o2)
    return r2
""", ACC_PARAMS, "pl.Tensor[[128, 256], pl.FP32]", "AIC")


def test_acc_overflow_on_a2a3_and_exact_fit_on_a5():
    # two live 128 KiB Acc tiles: 262144 bytes; A2/A3 L0C holds 128 KiB, A5 256 KiB = 262144 exactly.
    with pytest.raises(CompileError) as e:
        run(parse(ACC_TWO), A2A3)
    d = e.value.diagnostics[0]
    assert d.code == "PTOC-E0390"
    assert d.message == "Acc needs 262144 bytes at line 7 but holds 131072 (128 KiB)"
    check(ACC_TWO, {"mem_acc_0": 0, "mem_acc_1": 131072}, A5)


# --------------------------------------------------------------------------------------------------
# rejections, idempotence, determinism, round trip
# --------------------------------------------------------------------------------------------------


def test_alloc_without_a_constant_size_rejected():
    text = kernel(f"""
        mem_vec_0: pl.Ptr = pl.tile.alloc(pl.Mem.Vec, n)
        ta: {vt("mem_vec_0")} = pl.tile.load(a, [0, 0], [64, 64], target_memory=pl.Mem.Vec)
        o: pl.Tensor[[64, 64], pl.FP32] = pl.tile.store(ta, [0, 0], out)
        return o
    """, VEC_PARAMS + ", n: pl.Scalar[pl.INDEX]")
    with pytest.raises(CompileError) as e:
        run(parse(text))
    d = e.value.diagnostics[0]
    assert d.code == "PTOC-E0391" and d.span.line == 5 and d.hint


def test_running_twice_changes_nothing():
    once = run(parse(VEC_ADD))
    assert run(once) == once


def test_hand_placed_buffers_are_kept():
    placed = with_addrs(VEC_ADD, {"mem_vec_0": 32768, "mem_vec_1": 0, "mem_vec_2": 65536})
    prog = parse(placed)
    assert run(prog) == prog


def test_output_is_deterministic_whatever_the_hash_seed():
    script = ("import sys; sys.path.insert(0, sys.argv[1]); import test_AllocateMemoryAddr as t; "
              "print(t.print_program(t.plan(t.BIG_ADD, t.A5)))")
    here = os.path.dirname(os.path.abspath(__file__))
    outs = set()
    for seed in ("0", "1", "12345"):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        r = subprocess.run([sys.executable, "-c", script, here], capture_output=True, text=True, env=env, check=True)
        outs.add(r.stdout)
    assert len(outs) == 1
    assert outs.pop().strip() == print_program(plan(BIG_ADD, A5)).strip()


def test_printed_result_reparses_and_checks():
    out = plan(BIG_ADD, A5)
    again = parse_program(print_program(out), "again.ir", ctx=A5)  # full op checks
    assert again == out
    check_invariants(again, A5, AllocateMemoryAddr())


# ---------------------------------------------------------------------------------------------------
# Cross-core slot buffers: placed at the bottom of the consumer's space (base= in the IR), tiles after
# ---------------------------------------------------------------------------------------------------

def slot_kernel(alloc: str, base: str, slot_size: int, offset: int = 0) -> str:
    return kernel(f"""
        {alloc}
        buf: pl.Scalar[pl.INT32] = pl.system.reserve_buffer(name="k_slots", size=8192, base={base})
        pl.system.aiv_initialize_pipe(buf, pl.const(0, pl.INT32), dir_mask=1, slot_size={slot_size}, slot_num=2)
        t: {vt("mem_vec_0").replace("mem_vec_0, 0,", f"mem_vec_0, {offset},")} = pl.tile.load(a, [0, 0], [64, 64], target_memory=pl.Mem.Vec)
        out_1: {VEC_RET} = pl.tile.store(t, [0, 0], out)
        return out_1
    """)


@pytest.mark.parametrize("slot_size,ring", [(4096, 32768), (512, 8192)])
def test_the_slot_buffer_sits_at_the_bottom_and_the_tiles_after_it(slot_size, ring):
    # the ring takes 8 slots (the toolchain's PTOAS builds 8 whatever slot_num says) or its size=, the larger
    out = run(parse(slot_kernel("mem_vec_0: pl.Ptr = pl.tile.alloc(pl.Mem.Vec, 16384)", "-1", slot_size)))
    assert_same(out, slot_kernel(f"mem_vec_0: pl.Ptr = pl.tile.alloc(pl.Mem.Vec, 16384, addr={ring})", "0",
                                 slot_size))


def test_pyptos_placement_leaving_too_little_room_for_the_ring_is_placed_anew():
    # PyPTO's form: base=0, the tile's MemRef offset 8192 (its ring is the IR's 8192 bytes). The ring of
    # 8 slots of 4096 bytes reaches to 32768: the offsets are not taken, the buffer is placed after it
    before = parse(slot_kernel("mem_vec_0: pl.Ptr = pl.tile.alloc(pl.Mem.Vec, 16384)", "0", 4096, offset=8192))
    out = run(before)
    assert_same(out, slot_kernel("mem_vec_0: pl.Ptr = pl.tile.alloc(pl.Mem.Vec, 16384, addr=32768)", "0", 4096))
    # with room for the ring the offsets are PyPTO's placement and are kept
    roomy = parse(slot_kernel("mem_vec_0: pl.Ptr = pl.tile.alloc(pl.Mem.Vec, 16384)", "0", 1024, offset=8192))
    assert_same(run(roomy), slot_kernel("mem_vec_0: pl.Ptr = pl.tile.alloc(pl.Mem.Vec, 16384, addr=8192)", "0",
                                        1024))


def test_a_ring_and_tiles_past_the_capacity_is_e0620():
    text = slot_kernel("mem_vec_0: pl.Ptr = pl.tile.alloc(pl.Mem.Vec, 16384)", "-1", 4096).replace(
        "size=8192", "size=180224")  # 176 KiB + a 16 KiB tile > 184 KiB
    with pytest.raises(CompileError) as e:
        run(parse(text))
    d = e.value.diagnostics[0]
    assert d.code == "PTOC-E0620" and "'k_slots' (180224 bytes at 0 in Vec)" in d.message, d.message


def test_the_addresses_property_of_unplaced_buffers_needs_no_value_types(monkeypatch):
    # every MemRef offset 0 and no addr=: not placed, found from the MemRefs alone (no kernel is typed);
    # offsets that could place the buffers are checked with the value types
    from ptoc.ir import verifier
    from ptoc.passes.manager import PROPERTIES, _import_properties

    _import_properties()
    placed = VEC_ADD.replace('pl.MemRef(mem_vec_1, 0, 16384)', 'pl.MemRef(mem_vec_1, 16384, 16384)')
    assert placed != VEC_ADD
    unplaced_prog, placed_prog = parse(VEC_ADD), parse(placed)  # (the front end's check types them)
    typed: list[str] = []
    original = verifier.Verifier.function

    def counting(self, f):
        typed.append(f.name)
        return original(self, f)

    monkeypatch.setattr(verifier.Verifier, "function", counting)
    bad = PROPERTIES["addresses"](unplaced_prog, A2A3, None)
    assert bad == ["k: no tile.alloc has addr and every MemRef offset is 0 (not placed yet)"] and typed == []
    PROPERTIES["addresses"](placed_prog, A2A3, None)
    assert typed == ["k"]
