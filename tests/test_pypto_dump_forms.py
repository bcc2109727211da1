"""PyPTO's printed IR after its InitMemRef, read back: a tile received from the other core (a tpop
result) lives in the pipe's slot buffer, so PyPTO prints it, and a reshape of it, without a MemRef.
ptoc compiles such a dump (it used to stop with an internal error), and a tile without a MemRef that
is not in a slot is a diagnostic (PTOC-E0770), never an internal error."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

PTOC = Path(sys.executable).with_name("ptoc")

# An AIC/AIV pair written by hand in the form of PyPTO's dumps after InitMemRef: buffers at the top, the
# popped tile `got` and its view `tall` without a MemRef, everything else bound to a buffer.
PAIR = """\
# pypto.program: mm_exp_pair
import pypto.language as pl


@pl.program
class mm_exp_pair:
    @pl.function(type=pl.FunctionType.AIC, level=pl.Level.AIC, role=pl.Role.SubWorker)
    def pair_aic(
        a: pl.Tensor[[16, 32], pl.BF16, pl.MemRef("mem_ddr_0", pl.const(0, pl.INT64), 1024)],
        b: pl.Tensor[[32, 32], pl.BF16, pl.MemRef("mem_ddr_1", pl.const(0, pl.INT64), 2048)],
        out: pl.Out[pl.Tensor[[32, 16], pl.FP32, pl.MemRef("mem_ddr_2", pl.const(0, pl.INT64), 2048)]],
        __gm_pipe_buffer: pl.Out[pl.Tensor[[1], pl.FP32, pl.MemRef("mem_ddr_3", pl.const(0, pl.INT64), 4)]],
    ):
        mem_mat_4: pl.Ptr = pl.tile.alloc(pl.Mem.Mat, 1024)
        mem_left_5: pl.Ptr = pl.tile.alloc(pl.Mem.Left, 1024)
        mem_mat_6: pl.Ptr = pl.tile.alloc(pl.Mem.Mat, 2048)
        mem_right_7: pl.Ptr = pl.tile.alloc(pl.Mem.Right, 2048)
        mem_acc_8: pl.Ptr = pl.tile.alloc(pl.Mem.Acc, 2048)
        slots: pl.Scalar[pl.INT32] = pl.system.import_peer_buffer(name="pair_slots", peer_func="pair_aiv")
        pl.system.aic_initialize_pipe(slots, pl.const(0, pl.INT32), dir_mask=1, slot_size=2048, slot_num=2)
        a_mat: pl.Tile[[16, 32], pl.BF16, pl.MemRef(mem_mat_4, pl.const(0, pl.INT64), 1024), pl.Mem.Mat] = pl.tile.load(a, [0, 0], [16, 32], [16, 32], target_memory=pl.Mem.Mat)
        a_left: pl.Tile[[16, 32], pl.BF16, pl.MemRef(mem_left_5, pl.const(0, pl.INT64), 1024), pl.Mem.Left] = pl.tile.move(a_mat, target_memory=pl.Mem.Left)
        b_mat: pl.Tile[[32, 32], pl.BF16, pl.MemRef(mem_mat_6, pl.const(0, pl.INT64), 2048), pl.Mem.Mat] = pl.tile.load(b, [0, 0], [32, 32], [32, 32], target_memory=pl.Mem.Mat)
        b_right: pl.Tile[[32, 32], pl.BF16, pl.MemRef(mem_right_7, pl.const(0, pl.INT64), 2048), pl.Mem.Right] = pl.tile.move(b_mat, target_memory=pl.Mem.Right)
        prod: pl.Tile[[16, 32], pl.FP32, pl.MemRef(mem_acc_8, pl.const(0, pl.INT64), 2048), pl.Mem.Acc] = pl.tile.matmul(a_left, b_right)
        pl.tile.tpush_to_aiv(prod, split=0)

    @pl.function(type=pl.FunctionType.AIV, level=pl.Level.AIV, role=pl.Role.SubWorker)
    def pair_aiv(
        a: pl.Tensor[[16, 32], pl.BF16, pl.MemRef("mem_ddr_0", pl.const(0, pl.INT64), 1024)],
        b: pl.Tensor[[32, 32], pl.BF16, pl.MemRef("mem_ddr_1", pl.const(0, pl.INT64), 2048)],
        out: pl.Out[pl.Tensor[[32, 16], pl.FP32, pl.MemRef("mem_ddr_2", pl.const(0, pl.INT64), 2048)]],
        __gm_pipe_buffer: pl.Out[pl.Tensor[[1], pl.FP32, pl.MemRef("mem_ddr_3", pl.const(0, pl.INT64), 4)]],
    ) -> pl.Tensor[[32, 16], pl.FP32]:
        mem_vec_4: pl.Ptr = pl.tile.alloc(pl.Mem.Vec, 2048)
        slots: pl.Scalar[pl.INT32] = pl.system.reserve_buffer(name="pair_slots", size=4096, base=-1)
        pl.system.aiv_initialize_pipe(slots, pl.const(0, pl.INT32), dir_mask=1, slot_size=2048, slot_num=2)
        got: pl.Tile[[16, 32], pl.FP32, pl.Mem.Vec] = pl.tile.tpop_from_aic(split=0)
        tall: pl.Tile[[32, 16], pl.FP32, pl.Mem.Vec] = pl.tile.reshape(got, [32, 16])
        e: pl.Tile[[32, 16], pl.FP32, pl.MemRef(mem_vec_4, pl.const(0, pl.INT64), 2048), pl.Mem.Vec] = pl.tile.exp(tall)
        pl.system.tfree_to_aic(got)
        stored: pl.Tensor[[32, 16], pl.FP32, pl.MemRef("mem_ddr_2", pl.const(0, pl.INT64), 2048)] = pl.tile.store(e, [0, 0], out)
        return stored

    @pl.function(type=pl.FunctionType.Group, level=pl.Level.CORE_GROUP, role=pl.Role.SubWorker)
    def pair(
        a: pl.Tensor[[16, 32], pl.BF16],
        b: pl.Tensor[[32, 32], pl.BF16],
        out: pl.Out[pl.Tensor[[32, 16], pl.FP32]],
        __gm_pipe_buffer: pl.Out[pl.Tensor[[1], pl.FP32]],
    ) -> pl.Tensor[[32, 16], pl.FP32]:
        self.pair_aic(a, b, out, __gm_pipe_buffer)
        self.pair_aiv(a, b, out, __gm_pipe_buffer)
        return out

    @pl.function(type=pl.FunctionType.Orchestration, level=pl.Level.CHIP, role=pl.Role.Orchestrator)
    def main(
        self,
        a: pl.Tensor[[16, 32], pl.BF16],
        b: pl.Tensor[[32, 32], pl.BF16],
        out: pl.Out[pl.Tensor[[32, 16], pl.FP32]],
    ) -> pl.Tensor[[32, 16], pl.FP32]:
        pipe_gm: pl.Tensor[[1], pl.FP32] = pl.tensor.create([1], dtype=pl.FP32, layout=pl.TensorLayout.ND, manual_dep=True)
        r: pl.Tensor[[32, 16], pl.FP32] = self.pair(a, b, out, pipe_gm)
        return r
"""


def _run(tmp_path: Path, text: str, *args: str) -> subprocess.CompletedProcess:
    f = tmp_path / "dump.py"
    f.write_text(text)
    return subprocess.run([str(PTOC), *args[:1], str(f), *args[1:]], capture_output=True, text=True, timeout=120)


def _aiv(pto: str) -> str:
    return pto[pto.index("func.func @pair_aiv"):]


def test_popped_tile_without_memref_compiles(tmp_path):
    r = _run(tmp_path, PAIR, "compile", "-o", str(tmp_path / "k.pto"), "--no-header")
    assert r.returncode == 0, r.stderr
    aiv = _aiv((tmp_path / "k.pto").read_text())
    # the pop and its view are no buffers of the pool: the one alloc_tile of the AIV kernel is e's
    assert re.findall(r"%(\w+) = pto\.alloc_tile", aiv) == ["e"]
    assert re.search(r"%got = pto\.tpop_from_aic \{split = 0\}", aiv)
    assert re.search(r"%tall = pto\.treshape %got : .*rows=16, cols=32.* -> .*rows=32, cols=16", aiv)
    assert re.search(r"pto\.texp ins\(%tall : .*outs\(%e :", aiv)


def test_popped_tile_without_memref_validates(tmp_path):
    r = _run(tmp_path, PAIR, "passes", "--validate")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "kernels run: pair_aic, pair_aiv" in r.stdout
    assert "every stage agrees with the front end" in r.stdout


def test_passes_list_skips_init_memref(tmp_path):
    r = _run(tmp_path, PAIR, "passes", "--list")
    assert r.returncode == 0, r.stderr
    rows = {ln.split()[2]: ln.split()[3] for ln in r.stdout.splitlines() if ln[:2].strip().isdigit()}
    assert rows["InitMemRef"] == "skip" and rows["AllocateMemoryAddr"] == "run"


def test_unbound_tile_beside_allocations_is_a_diagnostic(tmp_path):
    """`e` is computed, not popped: without its MemRef the function is neither planned nor plannable."""
    text = PAIR.replace("e: pl.Tile[[32, 16], pl.FP32, pl.MemRef(mem_vec_4, pl.const(0, pl.INT64), 2048), pl.Mem.Vec]",
                        "e: pl.Tile[[32, 16], pl.FP32, pl.Mem.Vec]")
    assert text != PAIR
    r = _run(tmp_path, text, "compile", "-o", str(tmp_path / "k.pto"))
    assert r.returncode == 1, r.stderr
    assert "error[PTOC-E0770]: tile 'e' of 'pair_aiv' has no MemRef" in r.stderr
    assert "internal error" not in r.stderr


def test_slice_of_popped_tile_needs_a_buffer(tmp_path):
    """A slice of the popped tile is no view the .pto writer makes over a pop: it needs a MemRef."""
    text = PAIR.replace("pl.tile.reshape(got, [32, 16])", "pl.tile.slice(got, [16, 16], [0, 0])").replace(
        "tall: pl.Tile[[32, 16]", "tall: pl.Tile[[16, 16]").replace(
        "pl.Tile[[32, 16], pl.FP32, pl.MemRef(mem_vec_4", "pl.Tile[[16, 16], pl.FP32, pl.MemRef(mem_vec_4").replace(
        "pl.tile.store(e, [0, 0], out)", "pl.tile.store(e, [0, 0], out)")
    assert "pl.tile.slice(got" in text
    r = _run(tmp_path, text, "compile", "-o", str(tmp_path / "k.pto"))
    assert r.returncode == 1, r.stderr
    assert "PTOC-E0770" in r.stderr and "'tall'" in r.stderr
    assert "internal error" not in r.stderr


def test_split_attribute_in_a_func_attr_prologue_splits_the_kernel(tmp_path):
    """PyPTO prints a function's attributes as a `pl.func_attr({...})` prologue: a `split` written there
    splits the kernel exactly as `attrs={"split": ...}` in the decorator does (it used to be ignored, and
    the kernel was compiled for one lane)."""
    root = Path(__file__).resolve().parent.parent
    src = (root / "examples" / "linear_relu_auto_split.ir").read_text()
    deco = '@pl.function(type=pl.FunctionType.InCore, attrs={"split": pl.SplitMode.UP_DOWN})\n'
    head, rest = src.split(deco)
    def_line, body = rest.split("\n", 1)
    prologue = head + "@pl.function(type=pl.FunctionType.InCore)\n" + def_line + "\n" + \
        '        pl.func_attr({"split": pl.SplitMode.UP_DOWN})\n' + body
    outs = []
    for name, text in (("deco.ir", src), ("prologue.ir", prologue)):
        f = tmp_path / name
        f.write_text(text)
        r = subprocess.run([str(PTOC), "compile", str(f), "-o", str(tmp_path / f"{name}.pto"), "--no-header"],
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        outs.append((tmp_path / f"{name}.pto").read_text())
    assert "pto.get_subblock_idx" in outs[1] and "tpop_from_aic {split = 1}" in outs[1]
    assert outs[0] == outs[1]


def test_lane_replay_in_a_dump_is_not_replayed_again(tmp_path):
    """An AIV kernel marked `dual_aiv_dispatch` in PyPTO's prologue form, without a split: SplitVectorKernel
    writes its lane replay (`subblock_idx = ...; if subblock_idx == 0: ... else: ...`); the dump after it,
    read back, compiles to the same kernel (it used to be replayed again: an internal error)."""
    src = re.sub(r", pl\.MemRef\([^()]*(\([^()]*\))?[^()]*\)", "", PAIR)
    src = "\n".join(ln for ln in src.splitlines() if "pl.tile.alloc(" not in ln) + "\n"
    src = src.replace('        slots: pl.Scalar[pl.INT32] = pl.system.reserve_buffer(',
                      '        pl.func_attr({"dual_aiv_dispatch": True})\n'
                      '        slots: pl.Scalar[pl.INT32] = pl.system.reserve_buffer(')
    assert "MemRef" not in src and "dual_aiv_dispatch" in src
    f = tmp_path / "src.py"
    f.write_text(src)
    r = subprocess.run([str(PTOC), "passes", str(f), "--dump-after", "SplitVectorKernel", "--print-style", "pypto"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("pl.tile.get_subblock_idx()") == 1 and "if subblock_idx == 0:" in r.stdout
    outs = []
    for name, text in (("src.py", src), ("dump.py", r.stdout)):
        r2 = _run(tmp_path, text, "compile", "-o", str(tmp_path / f"{name}.pto"), "--no-header")
        assert r2.returncode == 0, r2.stderr
        outs.append((tmp_path / f"{name}.pto").read_text())
    assert outs[0].count("pto.get_subblock_idx") == 1
    assert outs[0] == outs[1]
