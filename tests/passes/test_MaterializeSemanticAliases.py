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
