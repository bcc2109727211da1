"""The reference runs a split kernel's AIC and AIV as two programs joined by the cross-core pipes: the
numbers come out right only when the hand-offs are right. A swapped slot, a read that no pop orders after
the other core's write, a read after the slot was freed, a pop nobody pushes for and a ring nobody frees
each give wrong numbers or a fault. Expected values are computed here with numpy."""

from __future__ import annotations

import numpy as np
import pytest

from ptoc.codegen.pto import emit_module
from ptoc.context import CompileContext
from ptoc.diagnostics import CompileError
from ptoc.driver import frontend, lower
from ptoc.frontend.parser import parse_program
from ptoc.reference.interp import run_function
from ptoc.reference.validate import _PtoKernelRunner

A5 = CompileContext(arch="a5")
RNG = np.random.default_rng(7)
X = (RNG.integers(-16, 16, size=(16, 128)) / 8).astype(np.float32)  # exact in BF16
W = (RNG.integers(-16, 16, size=(128, 128)) / 8).astype(np.float32)
OUT0 = np.zeros((16, 128), np.float32)


def expected_relu() -> np.ndarray:
    return np.maximum(X.astype(np.float64) @ W.astype(np.float64), 0).astype(np.float32)


HEAD = "import pypto.language as pl\n\n@pl.program\nclass p:\n"
P = ("self, x: pl.Tensor[[16, 128], pl.BF16], w: pl.Tensor[[128, 128], pl.BF16], "
     "out: pl.Out[pl.Tensor[[16, 128], pl.FP32]]")
SETUP_AIC = """
        peer: pl.Scalar[pl.INT32] = pl.system.import_peer_buffer(name="c2v", peer_func="k_aiv")
        pl.system.aic_initialize_pipe(peer, pl.const(0, pl.INT32), dir_mask=1, slot_size=4096, slot_num=SLOTS)
        x_mat: pl.Tile[[16, 128], pl.BF16, pl.Mem.Mat] = pl.tile.load(x, [0, 0], [16, 128], target_memory=pl.Mem.Mat)
        x_left: pl.Tile[[16, 128], pl.BF16, pl.Mem.Left] = pl.tile.move(x_mat, target_memory=pl.Mem.Left)
        w0_mat: pl.Tile[[128, 64], pl.BF16, pl.Mem.Mat] = pl.tile.load(w, [0, 0], [128, 64], target_memory=pl.Mem.Mat)
        w0: pl.Tile[[128, 64], pl.BF16, pl.Mem.Right] = pl.tile.move(w0_mat, target_memory=pl.Mem.Right)
        acc0: pl.Tile[[16, 64], pl.FP32, pl.Mem.Acc] = pl.tile.matmul(x_left, w0)
        w1_mat: pl.Tile[[128, 64], pl.BF16, pl.Mem.Mat] = pl.tile.load(w, [0, 64], [128, 64], target_memory=pl.Mem.Mat)
        w1: pl.Tile[[128, 64], pl.BF16, pl.Mem.Right] = pl.tile.move(w1_mat, target_memory=pl.Mem.Right)
        acc1: pl.Tile[[16, 64], pl.FP32, pl.Mem.Acc] = pl.tile.matmul(x_left, w1)"""
SETUP_AIV = """
        buf: pl.Scalar[pl.INT32] = pl.system.reserve_buffer(name="c2v", size=32768, base=-1)
        pl.system.aiv_initialize_pipe(buf, pl.const(0, pl.INT32), dir_mask=1, slot_size=4096, slot_num=SLOTS)"""
PUSHES = """
        pl.tile.tpush_to_aiv(acc0, split=0)
        pl.tile.tpush_to_aiv(acc1, split=0)"""
POPS = """
        y0: pl.Tile[[16, 64], pl.FP32, pl.Mem.Vec] = pl.tile.tpop_from_aic(split=0)
        r0: pl.Tile[[16, 64], pl.FP32, pl.Mem.Vec] = pl.tile.relu(y0)
        pl.system.tfree_to_aic(y0)
        o1: pl.Tensor[[16, 128], pl.FP32] = pl.tile.store(r0, [0, 0], out)
        y1: pl.Tile[[16, 64], pl.FP32, pl.Mem.Vec] = pl.tile.tpop_from_aic(split=0)
        r1: pl.Tile[[16, 64], pl.FP32, pl.Mem.Vec] = pl.tile.relu(y1)
        pl.system.tfree_to_aic(y1)
        o2: pl.Tensor[[16, 128], pl.FP32] = pl.tile.store(r1, [0, 64], o1)"""


def pair(aic_tail: str = PUSHES, aiv_body: str = POPS, slots: int = 8) -> str:
    text = (HEAD
            + f"    @pl.function(type=pl.FunctionType.AIC)\n    def k_aic({P}):{SETUP_AIC}{aic_tail}\n"
            + f"    @pl.function(type=pl.FunctionType.AIV)\n    def k_aiv({P}):{SETUP_AIV}{aiv_body}\n"
            + f"    @pl.function(type=pl.FunctionType.Group)\n    def k({P}):\n"
            + "        self.k_aic(x, w, out)\n        self.k_aiv(x, w, out)\n")
    return text.replace("SLOTS", str(slots))


def run_ir(text: str) -> np.ndarray:
    prog = parse_program(text, "pair.ir", ctx=A5)
    return run_function(prog, "k", {"x": X, "w": W, "out": OUT0}, A5)["out"]


def run_pto(text: str, edit=None) -> np.ndarray:
    """Lower the pair, emit its .pto (optionally edited), and run the Group with every member executing its
    emitted function."""
    low = lower(frontend(text, "pair.ir", A5), A5).program
    pto, _ = emit_module(low, A5)
    if edit is not None:
        pto = edit(pto)
    runner = _PtoKernelRunner(pto, low, {})
    return run_function(low, "k", {"x": X, "w": W, "out": OUT0}, A5, kernel_runner=runner)["out"]


def faults(fn, *args) -> str:
    with pytest.raises(CompileError) as e:
        fn(*args)
    return e.value.diagnostics[0].message


def test_the_pair_gives_relu_of_the_product():
    np.testing.assert_allclose(run_ir(pair()), expected_relu(), rtol=1e-6)


def test_the_emitted_pair_gives_relu_of_the_product():
    np.testing.assert_allclose(run_pto(pair()), expected_relu(), rtol=1e-6)


def test_a_swapped_slot_gives_wrong_numbers():
    swapped = PUSHES.replace("acc0", "accX").replace("acc1", "acc0").replace("accX", "acc1")
    got = run_ir(pair(aic_tail=swapped))
    assert not np.allclose(got, expected_relu())
    np.testing.assert_allclose(got[:, :64], expected_relu()[:, 64:], rtol=1e-6)  # the halves trade places


def test_a_read_after_the_free_gives_wrong_numbers():
    early = POPS.replace("""        r0: pl.Tile[[16, 64], pl.FP32, pl.Mem.Vec] = pl.tile.relu(y0)
        pl.system.tfree_to_aic(y0)""", """        pl.system.tfree_to_aic(y0)
        r0: pl.Tile[[16, 64], pl.FP32, pl.Mem.Vec] = pl.tile.relu(y0)""")
    got = run_ir(pair(aiv_body=early))
    assert np.isnan(got[:, :64]).all() and not np.isnan(got[:, 64:]).any()


def test_the_emitted_pair_freed_too_early_gives_wrong_numbers():
    def free_first(pto: str) -> str:
        lines = pto.splitlines()
        i = next(i for i, ln in enumerate(lines) if "pto.trelu" in ln)
        j = next(j for j in range(i, len(lines)) if "pto.tfree_from_aic" in lines[j])
        lines.insert(i, lines.pop(j))
        return "\n".join(lines) + "\n"

    got = run_pto(pair(), free_first)
    assert np.isnan(got[:, :64]).all()


MISSING_WAIT_AIC = """
        o1: pl.Tensor[[16, 128], pl.FP32] = pl.tile.store(acc0, [0, 0], out)
        o2: pl.Tensor[[16, 128], pl.FP32] = pl.tile.store(acc1, [0, 64], o1)"""
MISSING_WAIT_AIV = """
        t: pl.Tile[[16, 128], pl.FP32, pl.Mem.Vec] = pl.tile.load(out, [0, 0], [16, 128], target_memory=pl.Mem.Vec)
        r: pl.Tile[[16, 128], pl.FP32, pl.Mem.Vec] = pl.tile.relu(t)
        o3: pl.Tensor[[16, 128], pl.FP32] = pl.tile.store(r, [0, 0], out)"""
TOKEN_PUSH = "\n        pl.tile.tpush_to_aiv(acc0, split=0)"
TOKEN_POP = """
        tok: pl.Tile[[16, 64], pl.FP32, pl.Mem.Vec] = pl.tile.tpop_from_aic(split=0)
        pl.system.tfree_to_aic(tok)"""


def test_a_read_of_gm_no_pop_orders_after_the_write_gives_wrong_numbers():
    # the cube core writes the product to GM, the vector core reads it back and applies relu: without a
    # hand-off the vector core may read before the write (it does here: it starts first)
    got = run_ir(pair(aic_tail=MISSING_WAIT_AIC, aiv_body=MISSING_WAIT_AIV))
    assert not np.allclose(got, expected_relu())
    # with a push after the stores and a pop before the load, the read waits for the write
    got = run_ir(pair(aic_tail=MISSING_WAIT_AIC + TOKEN_PUSH, aiv_body=TOKEN_POP + MISSING_WAIT_AIV))
    np.testing.assert_allclose(got, expected_relu(), rtol=1e-6)


def test_a_pop_nobody_pushes_for_is_a_deadlock():
    msg = faults(run_ir, pair(aic_tail=PUSHES.split("\n        pl.tile.tpush_to_aiv(acc1")[0]))
    assert "cross-core deadlock" in msg and "k_aiv waits for a pushed c2v tile" in msg


def test_a_full_ring_nobody_frees_is_a_deadlock():
    no_free = POPS.replace("        pl.system.tfree_to_aic(y0)\n", "")
    msg = faults(run_ir, pair(aiv_body=no_free, slots=1))
    assert "cross-core deadlock" in msg and "k_aic waits for a free c2v slot" in msg


def test_a_slot_never_freed_is_reported():
    no_free = POPS.replace("        pl.system.tfree_to_aic(y1)\n", "")
    assert "never freed" in faults(run_ir, pair(aiv_body=no_free))


def test_the_emitted_pair_without_its_push_is_a_deadlock():
    def drop_push(pto: str) -> str:
        lines = pto.splitlines()
        i = max(i for i, ln in enumerate(lines) if "pto.tpush_to_aiv" in ln)
        return "\n".join(lines[:i] + lines[i + 1:]) + "\n"

    from ptoc.reference.pto_exec import PtoExecError

    with pytest.raises(PtoExecError, match="cross-core deadlock"):
        run_pto(pair(), drop_push)
