"""FuseCreateAssembleToSlice: in an orchestration function a created tensor assembled exactly once into a
target becomes a slice of that target; the assemble goes away and loops stop carrying a value they only
pass through. Expected programs are written by hand from those rules."""

from ptoc.context import CompileContext
from ptoc.frontend.parser import parse_program
from ptoc.ir.printer import print_program
from ptoc.passes.FuseCreateAssembleToSlice import FuseCreateAssembleToSlice
from ptoc.passes.manager import check_invariants
from ptoc.reference.validate import validate_program

CTX = CompileContext()
ROW = "pl.Tensor[[16, 64], pl.FP32]"
BIG = "pl.Tensor[[32, 64], pl.FP32]"
TILE = "pl.Tile[[16, 64], pl.FP32, pl.Mem.Vec]"

KERNEL = f"""import pypto.language as pl

@pl.program
class P:
    @pl.function(type=pl.FunctionType.InCore)
    def k(self, a: {BIG}, r0: pl.Scalar[pl.INDEX], o: pl.Out[{ROW}]) -> {ROW}:
        t: {TILE} = pl.tile.load(a, [r0, 0], [16, 64], target_memory=pl.Mem.Vec)
        u: {TILE} = pl.tile.muls(t, 2.0)
        s: {ROW} = pl.tile.store(u, [0, 0], o)
        return s

"""


def orch(body: str) -> str:
    return KERNEL + f"""    @pl.function(type=pl.FunctionType.Orchestration)
    def main(self, a: {BIG}, c: pl.Out[{BIG}]) -> {BIG}:
{body}"""


LOOP = orch(f"""        for i, (cc,) in pl.range(0, 32, 16, init_values=(c,)):
            o: {ROW} = pl.tensor.create([16, 64], dtype=pl.FP32)
            r: {ROW} = self.k(a, i, o)
            c2: {BIG} = pl.tensor.assemble(cc, r, [i, 0])
            cr = pl.yield_(c2)
        return cr
""")


def run(text: str):
    prog = parse_program(text, "before.ir", ctx=CTX)
    out = FuseCreateAssembleToSlice().run(prog, CTX)
    check_invariants(out, CTX, FuseCreateAssembleToSlice())
    return prog, out


def assert_becomes(before: str, expected: str):
    _, out = run(before)
    want = parse_program(expected, "expected.ir", ctx=CTX)
    assert out == want, f"got:\n{print_program(out)}\nexpected:\n{print_program(want)}"


def test_a_kernel_result_assembled_in_a_loop_is_written_into_a_slice_of_the_target():
    assert_becomes(LOOP, orch(f"""        for i in pl.range(0, 32, 16):
            o: {ROW} = pl.tensor.slice(c, [16, 64], [i, 0])
            r: {ROW} = self.k(a, i, o)
        return c
"""))


def test_straight_line_create_and_assemble_fuse_and_the_assembled_name_is_the_target():
    before = orch(f"""        o: {ROW} = pl.tensor.create([16, 64], dtype=pl.FP32)
        r: {ROW} = self.k(a, 16, o)
        c2: {BIG} = pl.tensor.assemble(c, r, [16, 0])
        return c2
""")
    assert_becomes(before, orch(f"""        o: {ROW} = pl.tensor.slice(c, [16, 64], [16, 0])
        r: {ROW} = self.k(a, 16, o)
        return c
"""))


def test_a_buffer_assembled_twice_is_left_alone():
    before = orch(f"""        o: {ROW} = pl.tensor.create([16, 64], dtype=pl.FP32)
        r: {ROW} = self.k(a, 16, o)
        c2: {BIG} = pl.tensor.assemble(c, r, [16, 0])
        c3: {BIG} = pl.tensor.assemble(c2, r, [0, 0])
        return c3
""")
    prog, out = run(before)
    assert out is prog


def test_an_atomic_assemble_is_left_alone():
    before = orch(f"""        o: {ROW} = pl.tensor.create([16, 64], dtype=pl.FP32)
        r: {ROW} = self.k(a, 16, o)
        c2: {BIG} = pl.tensor.assemble(c, r, [16, 0], atomic=pl.AtomicType.Add)
        return c2
""")
    prog, out = run(before)
    assert out is prog


def test_a_target_defined_after_the_create_is_left_alone():
    # o2's target `c1` exists only after o2 is created: a slice there could not read it
    before = orch(f"""        o: {ROW} = pl.tensor.create([16, 64], dtype=pl.FP32)
        o2: {ROW} = pl.tensor.create([16, 64], dtype=pl.FP32)
        r: {ROW} = self.k(a, 16, o)
        c1: {BIG} = pl.tensor.assemble(c, r, [0, 0])
        d: {ROW} = self.k(a, 0, o2)
        c2: {BIG} = pl.tensor.assemble(c1, d, [16, 0])
        return c2
""")
    assert_becomes(before, orch(f"""        o: {ROW} = pl.tensor.slice(c, [16, 64], [0, 0])
        o2: {ROW} = pl.tensor.create([16, 64], dtype=pl.FP32)
        r: {ROW} = self.k(a, 16, o)
        d: {ROW} = self.k(a, 0, o2)
        c2: {BIG} = pl.tensor.assemble(c, d, [16, 0])
        return c2
"""))


def test_a_kernel_function_is_not_touched():
    text = KERNEL.replace("pl.FunctionType.InCore", "pl.FunctionType.InCore", 1)
    prog, out = run(text)
    assert out is prog


def test_the_fused_program_gives_the_same_numbers_at_every_stage():
    reports = validate_program(parse_program(LOOP, "fuse.ir", ctx=CTX), CTX, seed=4)
    assert {r.kernel for r in reports} == {"k", "main"}
    assert all(r.first_failure is None for r in reports), [r.rows for r in reports]
