"""The `.pto` executor runs scf.while, pto.barrier and ttrans with its scratch operand; the three corpus
programs that use them (15, 16, 27), compiled by ptoc, give what numpy computes from their source."""

from pathlib import Path

import numpy as np
import pytest

from ptoc.context import CompileContext
from ptoc.driver import compile_program, frontend
from ptoc.reference.pto_exec import PtoExecError, machine, run_pto

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "corpus" / "raw"
RNG = np.random.default_rng(20)

_CACHE: dict = {}


def compiled(stem: str) -> str:
    if stem not in _CACHE:
        path = CORPUS / f"{stem}.ir"
        ctx = CompileContext(arch="a2a3")
        _CACHE[stem] = compile_program(frontend(path.read_text(), path.name, ctx), ctx, path.name,
                                       header=False).pto
    return _CACHE[stem]


def f32(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def as_f32(buf, shape):
    return np.frombuffer(bytes(buf), dtype=np.float32).reshape(shape)


# ---------------------------------------------------------------------------------------------- corpus

@pytest.mark.parametrize("total", [0, 1, 16, 200, 1000, 4095, 4096])
def test_corpus_15_copies_the_first_total_rows_in_chunks(total):
    src, dst = f32(4096, 128), f32(4096, 128)
    (_, out) = run_pto(compiled("15_while_chunks"), "copy_chunks", [src.tobytes(), bytearray(dst.tobytes()), total])
    want = dst.copy()
    want[:total] = src[:total]
    np.testing.assert_array_equal(as_f32(out, (4096, 128)), want)


def test_corpus_16_adds_the_transposed_blocks_and_pads():
    a, b, out0 = f32(256, 256), f32(256, 256), f32(256, 256)
    bufs = run_pto(compiled("16_loop_kinds"), "add_transposed", [a.tobytes(), b.tobytes(), bytearray(out0.tobytes())])
    # out block (bi, bj) = a block (bi, bj) + transpose of b block (bj, bi), i.e. a + b.T
    np.testing.assert_array_equal(as_f32(bufs[2], (256, 256)), a + b.T)
    src, pad0 = f32(32, 128), f32(64, 128)
    _, out = run_pto(compiled("16_loop_kinds"), "copy_and_pad", [src.tobytes(), bytearray(pad0.tobytes())])
    want = np.concatenate([src[:16], src[16:32] + np.float32(1.0), np.zeros((32, 128), np.float32)])
    np.testing.assert_array_equal(as_f32(out, (64, 128)), want)


def test_corpus_27_bump_adds_one_across_its_barrier():
    src, dst = f32(64, 64), f32(64, 64)
    _, out = run_pto(compiled("27_pass_and_no_return"), "bump", [src.tobytes(), bytearray(dst.tobytes())])
    np.testing.assert_array_equal(as_f32(out, (64, 64)), src + np.float32(1.0))


# A tile carried through a while loop: written in place through its buffer, out of the scf.while operands.
TILE_WHILE = """import pypto.language as pl
@pl.program
class p:
    @pl.function(type=pl.FunctionType.AIV)
    def k(self, a: pl.Tensor[[256, 64], pl.FP32], n: pl.Scalar[pl.INDEX], out: pl.Out[pl.Tensor[[16, 64], pl.FP32]]) -> pl.Tensor[[16, 64], pl.FP32]:
        acc0: pl.Tile[[16, 64], pl.FP32, pl.Mem.Vec] = pl.tile.full([16, 64], dtype=pl.FP32, value=0.0)
        for (i, acc) in pl.while_(init_values=(0, acc0)):
            pl.cond(i * 16 < n)
            t: pl.Tile[[16, 64], pl.FP32, pl.Mem.Vec] = pl.tile.load(a, [i * 16, 0], [16, 64], target_memory=pl.Mem.Vec)
            acc2: pl.Tile[[16, 64], pl.FP32, pl.Mem.Vec] = pl.tile.add(acc, t)
            if i > 2:
                pl.system.bar_v()
            i_next, acc_next = pl.yield_(i + 1, acc2)
        s: pl.Tensor[[16, 64], pl.FP32] = pl.tile.store(acc_next, [0, 0], out)
        return s
"""


@pytest.mark.parametrize("n", [0, 16, 100, 256])
def test_a_tile_carried_through_a_while_accumulates_the_blocks_the_condition_admits(n):
    ctx = CompileContext(arch="a2a3")
    text = compile_program(frontend(TILE_WHILE, "w.ir", ctx), ctx, "w.ir", header=False).pto
    head = next(ln for ln in text.splitlines() if "scf.while" in ln)
    assert head.strip().startswith("%i_next = scf.while (%i = %c0_index) : (index) -> (index)")
    a, out0 = f32(256, 64), f32(16, 64)
    _, out = run_pto(text, "k", [a.tobytes(), bytearray(out0.tobytes()), n])
    want = np.zeros((16, 64), np.float32)
    for i in range(-(-n // 16)):  # blocks 0 .. ceil(n / 16) - 1, added in order in float32
        want = want + a[i * 16:(i + 1) * 16]
    np.testing.assert_array_equal(as_f32(out, (16, 64)), want)


# ---------------------------------------------------------------------------------------------- hand-written

def module(body: str, args: str = "%arg0: !pto.ptr<i32>, %arg1: index") -> str:
    return ('module attributes {pto.target_arch = "a2a3"} {\n'
            f"  func.func @f({args}) attributes {{pto.kernel_kind = #pto.kernel_kind<vector>}} {{\n"
            f"{body}\n    return\n  }}\n}}\n")


# Sum of 0..n-1 and the count of iterations, through a two-value scf.while, stored to GM with tsetval+tstore.
SUM = """    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %c0_i64 = arith.constant 0 : i64
    %v = pto.make_tensor_view %arg0, shape = [%c1, %c2], strides = [%c2, %c1] {layout = #pto.layout<nd>} : !pto.tensor_view<?x?xi32>
    %r:2 = scf.while (%i = %c0, %s = %c0) : (index, index) -> (index, index) {
      %go = arith.cmpi slt, %i, %arg1 : index
      scf.condition(%go) %i, %s : index, index
    } do {
    ^bb0(%i_1 : index, %s_1 : index):
      %s_2 = arith.addi %s_1, %i_1 : index
      %i_2 = arith.addi %i_1, %c1 : index
      pto.barrier <PIPE_V>
      scf.yield %i_2, %s_2 : index, index
    }
    %t = pto.alloc_tile addr = %c0_i64 : !pto.tile_buf<loc=vec, dtype=i32, rows=1, cols=8, v_row=1, v_col=2, blayout=row_major, slayout=none_box, fractal=512, pad=0>
    %ri = arith.index_cast %r#0 : index to i32
    %rs = arith.index_cast %r#1 : index to i32
    pto.tsetval ins(%c0, %ri : index, i32) outs(%t : !pto.tile_buf<loc=vec, dtype=i32, rows=1, cols=8, v_row=1, v_col=2, blayout=row_major, slayout=none_box, fractal=512, pad=0>)
    pto.tsetval ins(%c1, %rs : index, i32) outs(%t : !pto.tile_buf<loc=vec, dtype=i32, rows=1, cols=8, v_row=1, v_col=2, blayout=row_major, slayout=none_box, fractal=512, pad=0>)
    %p = pto.partition_view %v, offsets = [%c0, %c0], sizes = [%c1, %c2] : !pto.tensor_view<?x?xi32> -> !pto.partition_tensor_view<1x2xi32>
    pto.tstore ins(%t : !pto.tile_buf<loc=vec, dtype=i32, rows=1, cols=8, v_row=1, v_col=2, blayout=row_major, slayout=none_box, fractal=512, pad=0>) outs(%p : !pto.partition_tensor_view<1x2xi32>)"""


@pytest.mark.parametrize("n", [0, 1, 5, 100])
def test_two_value_while_runs_the_do_region_while_the_condition_holds(n):
    (out,) = run_pto(module(SUM), "f", [bytearray(8), n])
    assert np.frombuffer(bytes(out), np.int32).tolist() == [n, n * (n - 1) // 2]


def test_a_while_whose_before_region_does_not_end_in_scf_condition_is_an_error():
    text = module(SUM.replace("      scf.condition(%go) %i, %s : index, index\n", ""))
    with pytest.raises(PtoExecError, match="must end in scf.condition"):
        run_pto(text, "f", [bytearray(8), 3])


def test_a_condition_forwarding_the_wrong_number_of_values_is_an_error():
    text = module(SUM.replace("scf.condition(%go) %i, %s : index, index", "scf.condition(%go) %i : index"))
    with pytest.raises(PtoExecError, match="passes 1 values to a do region of 2 arguments"):
        run_pto(text, "f", [bytearray(8), 3])


def test_a_runaway_while_is_reported(monkeypatch):
    monkeypatch.setattr(machine, "MAX_WHILE_ITERATIONS", 50)
    with pytest.raises(PtoExecError, match="more than 50 iterations"):
        run_pto(module(SUM), "f", [bytearray(8), 1000])


def test_a_malformed_barrier_is_an_error():
    text = module(SUM.replace("pto.barrier <PIPE_V>", "pto.barrier PIPE_V"))
    with pytest.raises(PtoExecError, match="malformed pto.barrier"):
        run_pto(text, "f", [bytearray(8), 3])
