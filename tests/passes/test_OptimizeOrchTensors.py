"""OptimizeOrchTensors: a kernel accumulates in place instead of into a tensor its caller creates.
Expected programs are written by hand from the pass's rules."""

from ptoc.context import CompileContext
from ptoc.frontend.parser import parse_program
from ptoc.ir.printer import print_program
from ptoc.passes.manager import check_invariants
from ptoc.passes.OptimizeOrchTensors import OptimizeOrchTensors
from ptoc.reference.validate import validate_program

CTX = CompileContext()
T = "pl.Tensor[[16, 64], pl.FP32]"
TILE = "pl.Tile[[16, 64], pl.FP32, pl.Mem.Vec]"
HEAD = "import pypto.language as pl\n\n@pl.program\nclass P:\n"


def run(text: str):
    prog = parse_program(text, "before.ir", ctx=CTX)
    out = OptimizeOrchTensors().run(prog, CTX)
    check_invariants(out, CTX, OptimizeOrchTensors())
    return prog, out


def assert_becomes(before: str, expected: str):
    _, out = run(before)
    want = parse_program(expected, "expected.ir", ctx=CTX)
    assert out == want, f"got:\n{print_program(out)}\nexpected:\n{print_program(want)}"


def step_kernel(params: str, store_into: str) -> str:
    return f"""    @pl.function(type=pl.FunctionType.InCore)
    def step(self, {params}) -> {T}:
        a: {TILE} = pl.tile.load(acc, [0, 0], [16, 64], target_memory=pl.Mem.Vec)
        b: {TILE} = pl.tile.load(x, [0, 0], [16, 64], target_memory=pl.Mem.Vec)
        c: {TILE} = pl.tile.add(a, b)
        r: {T} = pl.tile.store(c, [0, 0], {store_into})
        return r
"""


LOOP_BEFORE = HEAD + step_kernel(f"acc: {T}, x: {T}, res: pl.Out[{T}]", "res") + f"""
    @pl.function(type=pl.FunctionType.Orchestration)
    def main(self, acc0: {T}, x: {T}) -> {T}:
        for i, (acc,) in pl.range(3, init_values=(acc0,)):
            res: {T} = pl.tensor.create([16, 64], dtype=pl.FP32)
            nxt: {T} = self.step(acc, x, res)
            out = pl.yield_(nxt)
        return out
"""


def test_a_loop_carried_result_is_accumulated_in_the_carried_tensor():
    expected = HEAD + step_kernel(f"acc: pl.InOut[{T}], x: {T}", "acc") + f"""
    @pl.function(type=pl.FunctionType.Orchestration)
    def main(self, acc0: {T}, x: {T}) -> {T}:
        for i, (acc,) in pl.range(3, init_values=(acc0,)):
            nxt: {T} = self.step(acc, x)
            out = pl.yield_(nxt)
        return out
"""
    assert_becomes(LOOP_BEFORE, expected)


def test_a_result_the_loop_does_not_carry_back_keeps_its_created_tensor():
    before = LOOP_BEFORE.replace("out = pl.yield_(nxt)", "out = pl.yield_(acc)")
    prog, out = run(before)
    assert out is prog


def test_a_call_outside_loops_merges_when_the_kernel_carries_a_whole_load_to_a_whole_store():
    kernel = f"""    @pl.function(type=pl.FunctionType.InCore)
    def k(self, acc: {T}, x: {T}, n: pl.Scalar[pl.INDEX], res: pl.Out[{T}]) -> {T}:
        a: {TILE} = pl.tile.load(acc, [0, 0], [16, 64], target_memory=pl.Mem.Vec)
        b: {TILE} = pl.tile.load(x, [0, 0], [16, 64], target_memory=pl.Mem.Vec)
        for i, (s,) in pl.range(n, init_values=(a,)):
            s2: {TILE} = pl.tile.add(s, b)
            fin = pl.yield_(s2)
        r: {T} = pl.tile.store(fin, [0, 0], res)
        return r
"""
    orch = f"""
    @pl.function(type=pl.FunctionType.Orchestration)
    def main(self, acc: {T}, x: {T}, n: pl.Scalar[pl.INDEX]) -> {T}:
        res: {T} = pl.tensor.create([16, 64], dtype=pl.FP32)
        y: {T} = self.k(acc, x, n, res)
        return y
"""
    expected = HEAD + kernel.replace(f"acc: {T}", f"acc: pl.InOut[{T}]").replace(
        f", res: pl.Out[{T}]", "").replace("[0, 0], res)", "[0, 0], acc)") + f"""
    @pl.function(type=pl.FunctionType.Orchestration)
    def main(self, acc: {T}, x: {T}, n: pl.Scalar[pl.INDEX]) -> {T}:
        y: {T} = self.k(acc, x, n)
        return y
"""
    assert_becomes(HEAD + kernel + orch, expected)
    # the In tensor read again by the caller must not be overwritten: nothing merges
    used_again = orch.replace("        return y\n", f"        z: {T} = pl.tensor.add(y, acc)\n        return z\n")
    prog, out = run(HEAD + kernel + used_again)
    assert out is prog


def test_a_program_of_kernels_only_is_returned_as_is():
    prog, out = run(HEAD + step_kernel(f"acc: {T}, x: {T}, res: pl.Out[{T}]", "res"))
    assert out is prog


def test_in_place_accumulation_gives_the_same_numbers_at_every_stage():
    reports = validate_program(parse_program(LOOP_BEFORE, "acc.ir", ctx=CTX), CTX, seed=2)
    assert {r.kernel for r in reports} == {"step", "main"}
    assert all(r.first_failure is None for r in reports), [r.rows for r in reports]


ASSEMBLE_LOOP = HEAD + f"""    @pl.function(type=pl.FunctionType.InCore)
    def k(self, x: {T}, o: pl.Out[{T}]) -> {T}:
        buf: {TILE} = pl.tile.create([16, 64], dtype=pl.FP32, target_memory=pl.Mem.Vec)
        for i, (acc,) in pl.range(2, init_values=(buf,)):
            off: pl.Scalar[pl.INDEX] = i * 32
            t: pl.Tile[[16, 32], pl.FP32, pl.Mem.Vec] = pl.tile.load(x, [0, off], [16, 32], target_memory=pl.Mem.Vec)
            u: pl.Tile[[16, 32], pl.FP32, pl.Mem.Vec] = pl.tile.muls(t, 3.0)
            nxt: {TILE} = pl.tile.assemble(acc, u, [0, off])
            res = pl.yield_(nxt)
        s: {T} = pl.tile.store(res, [0, 0], o)
        return s

    @pl.function(type=pl.FunctionType.Orchestration)
    def main(self, x: {T}) -> {T}:
        o: {T} = pl.tensor.create([16, 64], dtype=pl.FP32)
        y: {T} = self.k(x, o)
        return y
"""

STORE_LOOP = HEAD + f"""    @pl.function(type=pl.FunctionType.InCore)
    def k(self, x: {T}, o: pl.Out[{T}]) -> {T}:
        for i, (acc,) in pl.range(2, init_values=(o,)):
            off: pl.Scalar[pl.INDEX] = i * 32
            t: pl.Tile[[16, 32], pl.FP32, pl.Mem.Vec] = pl.tile.load(x, [0, off], [16, 32], target_memory=pl.Mem.Vec)
            u: pl.Tile[[16, 32], pl.FP32, pl.Mem.Vec] = pl.tile.muls(t, 3.0)
            nxt = pl.tile.store(u, [0, off], acc)
            res = pl.yield_(nxt)
        return res

    @pl.function(type=pl.FunctionType.Orchestration)
    def main(self, x: {T}) -> {T}:
        o: {T} = pl.tensor.create([16, 64], dtype=pl.FP32)
        y: {T} = self.k(x, o)
        return y
"""


def test_a_loop_assembling_into_a_created_tile_stores_into_the_out_tensor_instead():
    assert_becomes(ASSEMBLE_LOOP, STORE_LOOP)


def test_an_assemble_loop_stored_at_an_offset_or_sharing_its_create_stays():
    prog, out = run(ASSEMBLE_LOOP.replace("pl.tile.store(res, [0, 0], o)", "pl.tile.store(res, [0, 16], o)")
                    .replace(f"def k(self, x: {T}, o: pl.Out[{T}])",
                             "def k(self, x: pl.Tensor[[16, 64], pl.FP32], o: pl.Out[pl.Tensor[[16, 80], pl.FP32]])")
                    .replace(f"s: {T} = pl.tile.store", "s: pl.Tensor[[16, 80], pl.FP32] = pl.tile.store")
                    .replace(f"-> {T}:\n        buf", "-> pl.Tensor[[16, 80], pl.FP32]:\n        buf")
                    .replace(f"o: {T} = pl.tensor.create([16, 64]", "o: pl.Tensor[[16, 80], pl.FP32] = "
                             "pl.tensor.create([16, 80]").replace(f"y: {T} = self.k", "y: pl.Tensor[[16, 80], "
                                                                  "pl.FP32] = self.k")
                    .replace(f"def main(self, x: {T}) -> {T}", f"def main(self, x: {T}) -> pl.Tensor[[16, 80], pl.FP32]"))
    assert out is prog
    shared = ASSEMBLE_LOOP.replace("        s: {T} = pl.tile.store(res, [0, 0], o)".format(T=T),
                                   f"        z: {TILE} = pl.tile.add(res, buf)\n"
                                   f"        s: {T} = pl.tile.store(z, [0, 0], o)")
    prog, out = run(shared)
    assert out is prog


def test_the_store_loop_computes_three_times_the_input_at_every_stage():
    import numpy as np

    from ptoc.reference.interp import run_function

    prog = parse_program(STORE_LOOP, "k.ir", ctx=CTX)
    x = np.arange(16 * 64, dtype=np.float32).reshape(16, 64) / 7
    got = run_function(prog, "main", {"x": x}, CTX)
    assert np.array_equal(got["return[0]"], x * np.float32(3.0))
    reports = validate_program(prog, CTX, seed=8)
    assert all(r.first_failure is None for r in reports), [r.rows for r in reports]
