"""The cross-core ops in `.pto`: pipe set-up, push, pop and free, spelled as PTOAS's pipe ops are (the
expected lines are written out here by hand from PTOAS's syntax), on a hand-written AIC/AIV pair."""

from __future__ import annotations

import pytest

from ptoc.codegen.pto import emit_module
from ptoc.context import CompileContext
from ptoc.diagnostics import CompileError
from ptoc.driver import frontend, lower

A2A3 = CompileContext(arch="a2a3")
A5 = CompileContext(arch="a5")

PAIR = '''
import pypto.language as pl

@pl.program
class pair:
    @pl.function(type=pl.FunctionType.AIC)
    def k_aic(self, x: pl.Tensor[[16, 128], pl.BF16], w: pl.Tensor[[128, 64], pl.BF16], out: pl.Out[pl.Tensor[[16, 64], pl.FP32]]GM):
        peer: pl.Scalar[pl.INT32] = pl.system.import_peer_buffer(name="k_c2v_slot_buffer", peer_func="k_aiv")
        pl.system.aic_initialize_pipe(peer, pl.const(0, pl.INT32), dir_mask=1, slot_size=4096, slot_num=SLOTS)
        x_mat: pl.Tile[[16, 128], pl.BF16, pl.Mem.Mat] = pl.tile.load(x, [0, 0], [16, 128], target_memory=pl.Mem.Mat)
        x_left: pl.Tile[[16, 128], pl.BF16, pl.Mem.Left] = pl.tile.move(x_mat, target_memory=pl.Mem.Left)
        w_mat: pl.Tile[[128, 64], pl.BF16, pl.Mem.Mat] = pl.tile.load(w, [0, 0], [128, 64], target_memory=pl.Mem.Mat)
        w_right: pl.Tile[[128, 64], pl.BF16, pl.Mem.Right] = pl.tile.move(w_mat, target_memory=pl.Mem.Right)
        acc: pl.Tile[[16, 64], pl.FP32, pl.Mem.Acc] = pl.tile.matmul(x_left, w_right)
        pl.tile.tpush_to_aiv(acc, split=0)

    @pl.function(type=pl.FunctionType.AIV)
    def k_aiv(self, x: pl.Tensor[[16, 128], pl.BF16], w: pl.Tensor[[128, 64], pl.BF16], out: pl.Out[pl.Tensor[[16, 64], pl.FP32]]GM) -> pl.Tensor[[16, 64], pl.FP32]:
        buf: pl.Scalar[pl.INT32] = pl.system.reserve_buffer(name="k_c2v_slot_buffer", size=32768, base=-1)
        pl.system.aiv_initialize_pipe(buf, pl.const(0, pl.INT32), dir_mask=1, slot_size=4096, slot_num=SLOTS)
        y: pl.Tile[[16, 64], pl.FP32, pl.Mem.Vec] = pl.tile.tpop_from_aic(split=0)
        r: pl.Tile[[16, 64], pl.FP32, pl.Mem.Vec] = pl.tile.relu(y)
        pl.system.tfree_to_aic(y)
        out_1: pl.Tensor[[16, 64], pl.FP32] = pl.tile.store(r, [0, 0], out)
        return out_1
'''
GM_PARAM = ", __gm_pipe_buffer: pl.Out[pl.Tensor[[1], pl.FP32]]"
ACC = ("!pto.tile_buf<loc=acc, dtype=f32, rows=16, cols=64, v_row=16, v_col=64, blayout=col_major, "
       "slayout=row_major, fractal=1024, pad=0>")
VEC = ("!pto.tile_buf<loc=vec, dtype=f32, rows=16, cols=64, v_row=16, v_col=64, blayout=row_major, "
       "slayout=none_box, fractal=512, pad=0>")


def pair(gm: bool = True, slots: int = 8) -> str:
    return PAIR.replace("GM", GM_PARAM if gm else "").replace("SLOTS", str(slots))


def emit(text: str, ctx=A2A3, level: str = "level3") -> str:
    prog = frontend(text, "pair.ir", ctx)
    skip = frozenset({"MemoryReuse", "AllocateMemoryAddr"}) if level == "level2" else frozenset()
    out, _ = emit_module(lower(prog, ctx, skip=skip).program, ctx, pto_level=level)
    return out


def body(text: str, fn: str) -> list[str]:
    ls = text.splitlines()
    start = next(i for i, ln in enumerate(ls) if ln.startswith(f"  func.func @{fn}("))
    end = next(i for i in range(start, len(ls)) if ls[i] == "  }")
    return [ln.strip() for ln in ls[start + 1:end]]


def test_a5_pair_spells_pipe_setup_push_pop_free():
    out = emit(pair(gm=False), A5)
    aic, aiv = body(out, "k_aic"), body(out, "k_aiv")
    assert '%peer = pto.import_reserved_buffer {name = "k_c2v_slot_buffer", peer_func = @k_aiv} -> i32' in aic
    assert ("pto.aic_initialize_pipe {dir_mask = 1, slot_size = 4096} "
            "(c2v_consumer_buf = %peer : i32, v2c_consumer_buf = %c0_i32 : i32)") in aic
    assert f"pto.tpush_to_aiv(%acc : {ACC}) {{split = 0}}" in aic
    # AllocateMemoryAddr puts the 32 KiB slot buffer at the bottom of Vec (base=0 in the IR, as PyPTO
    # does) and the kernel's Vec tiles after it
    assert ('%buf = pto.reserve_buffer {name = "k_c2v_slot_buffer", size = 32768, '
            "location = #pto.address_space<vec>, auto = false, base = 0} -> i32") in aiv
    assert any(ln.startswith("%r = pto.alloc_tile addr = %c32768_i64") for ln in aiv)
    assert ("pto.aiv_initialize_pipe {dir_mask = 1, slot_size = 4096} "
            "(c2v_consumer_buf = %buf : i32, v2c_consumer_buf = %c0_i32 : i32)") in aiv
    assert f"%y = pto.tpop_from_aic {{split = 0}} -> {VEC}" in aiv
    assert "pto.tfree_from_aic {split = 0}" in aiv
    # the popped tile is the pipe's slot: no alloc of its own
    assert not any(ln.startswith("%y = pto.alloc_tile") for ln in aiv)
    order = [next(i for i, ln in enumerate(aiv) if ln.startswith(p)) for p in
             ("%buf = pto.reserve_buffer", "pto.aiv_initialize_pipe", "%y = pto.tpop_from_aic", "pto.trelu",
              "pto.tfree_from_aic", "pto.tstore")]
    assert order == sorted(order)


def test_a2a3_pipe_goes_through_the_gm_slot_buffer():
    out = emit(pair())
    aic, aiv = body(out, "k_aic"), body(out, "k_aiv")
    assert ("pto.aic_initialize_pipe {dir_mask = 1, slot_size = 4096} (gm_slot_buffer = %arg3 : !pto.ptr<f32>, "
            "c2v_consumer_buf = %peer : i32, v2c_consumer_buf = %c0_i32 : i32)") in aic
    assert any("auto = false, base = 0} -> i32" in ln for ln in aiv)
    assert any(ln.startswith("pto.aiv_initialize_pipe {dir_mask = 1, slot_size = 4096} (gm_slot_buffer = %arg3")
               for ln in aiv)


def test_level2_lets_ptoas_place_the_slot_buffer():
    aiv = body(emit(pair(gm=False), A5, level="level2"), "k_aiv")
    assert ('%buf = pto.reserve_buffer {name = "k_c2v_slot_buffer", size = 32768, '
            "location = #pto.address_space<vec>, auto = true} -> i32") in aiv


def test_slot_num_is_not_written_and_the_buffer_holds_the_assemblers_eight_slots():
    out = emit(pair(gm=False, slots=2).replace("size=32768", "size=8192"), A5)
    aic, aiv = body(out, "k_aic"), body(out, "k_aiv")
    assert "slot_num" not in out
    assert any("{dir_mask = 1, slot_size = 4096} (c2v_consumer_buf" in ln for ln in aic)
    assert any('pto.reserve_buffer {name = "k_c2v_slot_buffer", size = 32768,' in ln for ln in aiv)


def test_a2a3_pipe_without_gm_buffer_gets_one_injected():
    aic = body(emit(pair(gm=False)), "k_aic")
    assert any("(gm_slot_buffer = %arg3 : !pto.ptr<f32>" in ln for ln in aic)


def test_a2a3_gm_buffer_that_is_not_a_tensor_is_e0621():
    text = pair().replace("__gm_pipe_buffer: pl.Out[pl.Tensor[[1], pl.FP32]]", "__gm_pipe_buffer: pl.Scalar[pl.INT32]")
    with pytest.raises(CompileError) as e:
        emit(text)
    assert e.value.diagnostics[0].code == "PTOC-E0621"
    assert "__gm_pipe_buffer" in e.value.diagnostics[0].message


def test_slot_buffer_overlapping_tiles_is_e0620():
    # the ring (260000 bytes) and the relu's tile after it pass a5's 240 KiB of Vec
    text = pair(gm=False).replace("size=32768", "size=260000")
    with pytest.raises(CompileError) as e:
        emit(text, A5)
    assert e.value.diagnostics[0].code == "PTOC-E0620"
    assert "260000 bytes at 0 in Vec" in e.value.diagnostics[0].message


def test_a_slot_buffer_without_a_base_sits_at_the_top():
    # IR whose buffers are placed but whose slot buffer has no base (base=-1, e.g. written by hand): the
    # writer puts the ring at the top of the usable a2a3 Vec (184 KiB), above the tiles
    from ptoc.ir.printer import print_program
    from ptoc.passes.manager import run_pipeline

    text = print_program(lower(frontend(pair(gm=False), "pair.ir", A2A3), A2A3).program)
    assert text.count("base=0)") == 1
    placed = run_pipeline(frontend(text.replace("base=0)", "base=-1)"), "placed.ir", A2A3), A2A3, passes=[])
    out, _ = emit_module(placed, A2A3)
    assert any("auto = false, base = 155648} -> i32" in ln for ln in body(out, "k_aiv"))


@pytest.mark.parametrize("arch,level", [("a2a3", "level3"), ("a5", "level3"), ("a2a3", "level2"), ("a5", "level2")])
def test_real_ptoas_takes_the_pair(arch, level, tmp_path):
    """The real PTOAS assembles the pair and lowers the pipe to pto-isa's TPipe/TPUSH/TPOP/TFREE."""
    import os
    import subprocess

    exe = os.environ.get("PTOC_PTOAS")
    if not exe:
        pytest.skip("$PTOC_PTOAS is unset: run `eval \"$(bash ../shared/tools/setup.sh)\"` first")
    ctx = A2A3 if arch == "a2a3" else A5
    src = tmp_path / "pair.pto"
    src.write_text(emit(pair(gm=arch == "a2a3"), ctx, level))
    cpp = tmp_path / "pair.cpp"
    r = subprocess.run([exe, f"--pto-arch={'a3' if arch == 'a2a3' else 'a5'}", f"--pto-level={level}",
                        "--enable-insert-sync", str(src), "-o", str(cpp)], capture_output=True, text=True,
                       timeout=300, check=False)
    assert r.returncode == 0, r.stderr[-2000:]
    text = cpp.read_text()
    assert "TPipe<0, Direction::DIR_C2V, 4096, 8" in text
    for call in ("TPUSH<", "TPOP<", "TFREE<"):
        assert call in text
