"""FoldNoOpReshape: in a kernel, a tile reshape whose result has the source's type and buffer becomes an
alias of the source; every other reshape stays. Expected programs are written by hand from that rule."""

from ptoc.context import CompileContext
from ptoc.frontend.parser import parse_program
from ptoc.ir.printer import print_program
from ptoc.passes.FoldNoOpReshape import FoldNoOpReshape
from ptoc.passes.manager import check_invariants
from ptoc.reference.validate import validate_program

CTX = CompileContext()


def kernel(line: str, ann: str = "pl.Tile[[16, 64], pl.FP32, pl.Mem.Vec]", kind: str = "AIV") -> str:
    return f"""import pypto.language as pl

@pl.program
class P:
    @pl.function(type=pl.FunctionType.{kind})
    def k(self, x: pl.Tensor[[16, 64], pl.FP32], out: pl.Out[pl.Tensor[[16, 64], pl.FP32]]) -> pl.Tensor[[16, 64], pl.FP32]:
        a: pl.Tile[[16, 64], pl.FP32, pl.Mem.Vec] = pl.tile.load(x, [0, 0], [16, 64], target_memory=pl.Mem.Vec)
        b: {ann} = {line}
        c: pl.Tile[[16, 64], pl.FP32, pl.Mem.Vec] = pl.tile.reshape(b, [16, 64])
        o: pl.Tensor[[16, 64], pl.FP32] = pl.tile.store(c, [0, 0], out)
        return o
"""


def run(text: str):
    prog = parse_program(text, "before.ir", ctx=CTX)
    out = FoldNoOpReshape().run(prog, CTX)
    check_invariants(out, CTX, FoldNoOpReshape())
    return prog, out


def test_a_reshape_to_the_same_shape_becomes_an_alias():
    _, out = run(kernel("pl.tile.reshape(a, [16, 64])"))
    want = parse_program(kernel("a").replace("pl.tile.reshape(b, [16, 64])", "b"), "expected.ir", ctx=CTX)
    assert out == want, print_program(out)


def test_a_reshape_that_changes_the_shape_stays():
    # b is [32, 32]: both reshapes (a -> b, b -> c) change the shape
    prog, out = run(kernel("pl.tile.reshape(a, [32, 32])", ann="pl.Tile[[32, 32], pl.FP32, pl.Mem.Vec]"))
    assert out is prog


def test_an_orchestration_function_and_a_kernel_without_reshapes_are_returned_as_is():
    plain = kernel("pl.tile.muls(a, 2.0)").replace("pl.tile.reshape(b, [16, 64])", "pl.tile.muls(b, 1.0)")
    prog, out = run(plain)
    assert out is prog
    prog, out = run(kernel("pl.tile.reshape(a, [16, 64])", kind="Orchestration"))
    assert out is prog


def test_after_memory_planning_reshapes_in_the_source_buffer_fold():
    # AllocateMemoryAddr places a, b and c in one Vec buffer at offset 0: both reshapes fold
    from ptoc.passes.manager import PIPELINE, load_pass, run_pipeline

    prog = parse_program(kernel("pl.tile.reshape(a, [16, 64])"), "k.ir", ctx=CTX)
    names = [n for _, n in PIPELINE]
    planned = run_pipeline(prog, CTX, passes=[load_pass(n) for n in names[:names.index("AllocateMemoryAddr") + 1]])
    text = print_program(FoldNoOpReshape().run(planned, CTX))
    assert print_program(planned).count("pl.tile.reshape") == 2
    assert "pl.tile.reshape" not in text
    assert "= a\n" in text and "= b\n" in text


def test_folding_keeps_the_numbers_at_every_stage():
    (rep,) = validate_program(parse_program(kernel("pl.tile.reshape(a, [16, 64])"), "k.ir", ctx=CTX), CTX, seed=6)
    assert rep.first_failure is None, rep.rows
