"""MaterializeSemanticAliases: the value a loop yields for a carried tile is computed in the carried buffer
(IR in PyPTO's form after InitMemRef, where it has a buffer of its own); declined where writing there
would clobber something still needed. ptoc's own InitMemRef output is left as it is."""

import subprocess
import sys
import textwrap
from pathlib import Path

from ptoc.context import CompileContext
from ptoc.frontend.parser import parse_program
from ptoc.ir.printer import print_program
from ptoc.passes.manager import check_invariants, run_pipeline
from ptoc.passes.MaterializeSemanticAliases import MaterializeSemanticAliases

CTX = CompileContext(arch="a2a3")
PTOC = str(Path(sys.executable).with_name("ptoc"))
ROOT = Path(__file__).resolve().parents[2]
T = "pl.Tile[[64, 64], pl.FP32, pl.MemRef({m}, 0, 16384), pl.Mem.Vec]"
PARAMS = "x: pl.Tensor[[64, 64], pl.FP32], out: pl.Out[pl.Tensor[[64, 64], pl.FP32]]"
RET = "pl.Tensor[[64, 64], pl.FP32]"
LOAD = "pl.tile.load(x, [0, 0], [64, 64], target_memory=pl.Mem.Vec)"


def t(m: str) -> str:
    return T.format(m=m)


def kernel(body: str, params: str = PARAMS) -> str:
    body = textwrap.indent(textwrap.dedent(body).strip("\n"), " " * 8)
    return (f"@pl.program\nclass p:\n    @pl.function(type=pl.FunctionType.AIV)\n"
            f"    def k(self, {params}) -> {RET}:\n{body}\n")


def run(text: str):
    before = parse_program(text, "before.ir", ctx=CTX)
    after = MaterializeSemanticAliases().run(before, CTX)
    check_invariants(after, CTX, MaterializeSemanticAliases())
    return before, after


def loop(producer: str, extra: str = "", params: str = PARAMS) -> str:
    return kernel(f"""
        mem_vec_2: pl.Ptr = pl.tile.alloc(pl.Mem.Vec, 16384)
        mem_vec_3: pl.Ptr = pl.tile.alloc(pl.Mem.Vec, 16384)
        x0: {t("mem_vec_2")} = {LOAD}
        for i, (acc,) in pl.range(0, 4, 1, init_values=(x0,)):
            nxt: {t("mem_vec_3")} = {producer}
            {extra}
            carried: {t("mem_vec_2")} = pl.yield_(nxt)
        out_1: {RET} = pl.tile.store(carried, [0, 0], out)
        return out_1
    """.replace("            \n", ""), params)


def test_the_yielded_value_is_computed_in_the_carried_buffer():
    before, after = run(loop("pl.tile.add(acc, acc)"))
    expected = parse_program(loop("pl.tile.add(acc, acc)").replace(f"nxt: {t('mem_vec_3')}", f"nxt: {t('mem_vec_2')}"),
                             "expected.ir", ctx=CTX)
    assert after == expected, print_program(after)


def test_an_op_that_cannot_write_over_the_iter_arg_is_declined():
    # the high-precision recip reads acc while it writes: never in place (nor are moves, sorts, reductions)
    before, after = run(loop("pl.tile.recip(acc)"))
    assert after is before


def test_a_producer_is_declined_when_the_carried_buffer_is_read_after_it():
    # the store after nxt still reads acc (the old value): writing nxt over acc would store the new one
    extra = "st: pl.Tensor[[64, 64], pl.FP32] = pl.tile.store(acc, [0, 0], out)"
    before, after = run(loop("pl.tile.exp(acc)", extra))
    assert after is before


def test_both_branches_of_an_if_are_retargeted_or_neither():
    params = PARAMS + ", n: pl.Scalar[pl.INDEX]"
    body = """
        mem_vec_2: pl.Ptr = pl.tile.alloc(pl.Mem.Vec, 16384)
        mem_vec_3: pl.Ptr = pl.tile.alloc(pl.Mem.Vec, 16384)
        mem_vec_4: pl.Ptr = pl.tile.alloc(pl.Mem.Vec, 16384)
        x0: {m2} = {LOAD}
        for i, (acc,) in pl.range(0, 4, 1, init_values=(x0,)):
            if n < 2:
                p1: {p} = pl.tile.exp(acc)
                r: {p} = pl.yield_(p1)
            else:
                p2: {p} = {other}
                r: {p} = pl.yield_(p2)
            carried: {m2} = pl.yield_(r)
        out_1: {RET} = pl.tile.store(carried, [0, 0], out)
        return out_1
    """
    fill = {"m2": t("mem_vec_2"), "LOAD": LOAD, "RET": RET}
    before, after = run(kernel(body.format(p=t("mem_vec_3"), other="pl.tile.neg(acc)", **fill), params))
    assert after == parse_program(kernel(body.format(p=t("mem_vec_2"), other="pl.tile.neg(acc)", **fill), params),
                                  "expected.ir", ctx=CTX), print_program(after)
    # a recip in the else branch cannot write over acc: neither branch moves
    before, after = run(kernel(body.format(p=t("mem_vec_3"), other="pl.tile.recip(acc)", **fill), params))
    assert after is before


ACC = "pl.Tile[[16, 32], pl.FP32, pl.MemRef({m}, 0, 2048), pl.Mem.Acc]"
LEFT = "pl.Tile[[16, 32], pl.BF16, pl.MemRef(mem_left_6, 0, 1024), pl.Mem.Left]"
RIGHT = "pl.Tile[[32, 32], pl.BF16, pl.MemRef(mem_right_7, 0, 2048), pl.Mem.Right]"
MM_PARAMS = ("a: pl.Tensor[[16, 64], pl.BF16], b: pl.Tensor[[64, 32], pl.BF16], "
             "out: pl.Out[pl.Tensor[[16, 32], pl.FP32]]")


def peeled_accumulator(seed: str, inner: str) -> str:
    """PyPTO's InitMemRef output for a K loop whose first step is peeled into an if (LowerPipelineLoops,
    matmul_l0_tiled): the seed matmul of the `ko == 0` branch gets a buffer of its own (`seed`), the if's
    result and the matmul_acc after it (in place, on its accumulator operand) are in it too (`inner`);
    only the carried value (iter_arg, loop result) is in mem_acc_5."""
    return (f"@pl.program\nclass p:\n    @pl.function(type=pl.FunctionType.AIC)\n"
            f"    def k(self, {MM_PARAMS}) -> pl.Tensor[[16, 32], pl.FP32]:\n" + textwrap.indent(textwrap.dedent(f"""
        mem_acc_5: pl.Ptr = pl.tile.alloc(pl.Mem.Acc, 2048)
        mem_left_6: pl.Ptr = pl.tile.alloc(pl.Mem.Left, 1024)
        mem_right_7: pl.Ptr = pl.tile.alloc(pl.Mem.Right, 2048)
        mem_acc_10: pl.Ptr = pl.tile.alloc(pl.Mem.Acc, 2048)
        init: {ACC.format(m="mem_acc_5")} = pl.tile.create([16, 32], dtype=pl.FP32, target_memory=pl.Mem.Acc)
        for ko, (c,) in pl.range(0, 64, 32, init_values=(init,)):
            xa: {LEFT} = pl.tile.load(a, [0, ko], [16, 32], target_memory=pl.Mem.Left)
            xb: {RIGHT} = pl.tile.load(b, [ko, 0], [32, 32], target_memory=pl.Mem.Right)
            if ko == 0:
                first: {ACC.format(m=seed)} = pl.tile.matmul(xa, xb)
                phi: {ACC.format(m=inner)} = pl.yield_(first)
            else:
                step: {ACC.format(m="mem_acc_5")} = pl.tile.matmul_acc(c, xa, xb)
                phi: {ACC.format(m=inner)} = pl.yield_(step)
            nxt: {ACC.format(m=inner)} = pl.tile.matmul_acc(phi, xa, xb)
            res: {ACC.format(m="mem_acc_5")} = pl.yield_(nxt)
        out_1: pl.Tensor[[16, 32], pl.FP32] = pl.tile.store(res, [0, 0], out)
        return out_1
    """).strip("\n"), " " * 8) + "\n")


def test_an_in_place_accumulator_carries_its_buffer_onto_its_operand_and_through_an_if():
    # PyPTO's MemoryReuse pushes the carried buffer onto the yielded value and, the value being written in
    # place (matmul_acc, "output reuses input 0"), onto its accumulator operand; that operand is an if's
    # result, so onto both branches' values: the seed matmul moves to mem_acc_5 and mem_acc_10 is left
    # without tiles. One L0C buffer: PyPTO keeps one Acc buffer for this loop after its MemoryReuse.
    before, after = run(peeled_accumulator("mem_acc_10", "mem_acc_10"))
    expected = parse_program(peeled_accumulator("mem_acc_5", "mem_acc_5"), "expected.ir", ctx=CTX)
    assert after == expected, print_program(after)


def test_an_in_place_accumulator_not_in_its_operands_buffer_is_declined():
    # `nxt` claims to be a matmul_acc into its operand, but sits elsewhere (mem_acc_11): not in place, so
    # nothing is moved
    text = peeled_accumulator("mem_acc_10", "mem_acc_10").replace(
        "mem_acc_10: pl.Ptr = pl.tile.alloc(pl.Mem.Acc, 2048)",
        "mem_acc_10: pl.Ptr = pl.tile.alloc(pl.Mem.Acc, 2048)\n        mem_acc_11: pl.Ptr = pl.tile.alloc(pl.Mem.Acc, 2048)")
    text = text.replace("nxt: " + ACC.format(m="mem_acc_10"), "nxt: " + ACC.format(m="mem_acc_11"))
    before, after = run(text)
    assert after is before


def test_ptocs_own_memory_plan_is_left_alone():
    # InitMemRef already computes carried values in the carried buffer: nothing to retarget
    from ptoc.driver import frontend
    from ptoc.passes.manager import load_pass

    for name in ("softmax_rows", "scoped_chunked_add", "matmul_l0_tiled"):
        prog = frontend((ROOT / "examples" / f"{name}.ir").read_text(), f"{name}.ir", CTX)
        planned = run_pipeline(prog, CTX, stop_after="InitMemRef")
        assert MaterializeSemanticAliases().run(planned, CTX) is planned, name
        assert load_pass("MaterializeSemanticAliases") is MaterializeSemanticAliases


def test_cli_pipeline_runs_it_on_pypto_form(tmp_path):
    f = tmp_path / "k.ir"
    f.write_text(loop("pl.tile.add(acc, acc)"))
    r = subprocess.run([PTOC, "passes", str(f), "--pipeline", "MaterializeSemanticAliases,MemoryReuse",
                        "--dump-after", "MemoryReuse"], capture_output=True, text=True, timeout=120, check=False)
    assert r.returncode == 0, r.stderr
    # nxt moved onto mem_vec_2; the alloc left without tiles is removed by MemoryReuse
    assert "nxt: pl.Tile[[64, 64], pl.FP32, pl.MemRef(mem_vec_2, 0, 16384), pl.Mem.Vec]" in r.stdout, r.stdout
    assert "mem_vec_3" not in r.stdout, r.stdout
