"""NormalizeReturnOrder: a kernel returns its Out/InOut parameters themselves, in parameter order, and its
callers read the results at the moved positions. Expected programs are written by hand from those rules."""

from ptoc.context import CompileContext
from ptoc.frontend.parser import parse_program
from ptoc.ir.nodes import AssignStmt, GetItem
from ptoc.ir.printer import print_program
from ptoc.ir.visitor import walk
from ptoc.passes.manager import check_invariants
from ptoc.passes.NormalizeReturnOrder import NormalizeReturnOrder
from ptoc.reference.validate import validate_program

CTX = CompileContext()
TEN = "pl.Tensor[[16, 64], pl.FP32]"
TILE = "pl.Tile[[16, 64], pl.FP32, pl.Mem.Vec]"
PAIR = f"tuple[{TEN}, {TEN}]"


def program(kernel_body: str, ret: str, orch: str, kind: str = "InCore") -> str:
    return f"""import pypto.language as pl

@pl.program
class P:
    @pl.function(type=pl.FunctionType.{kind})
    def kernel(self, x: {TEN}, p: pl.Out[{TEN}], q: pl.Out[{TEN}]) -> {PAIR}:
        t: {TILE} = pl.tile.load(x, [0, 0], [16, 64], target_memory=pl.Mem.Vec)
        u: {TILE} = pl.tile.add(t, t)
        v: {TILE} = pl.tile.mul(t, t)
{kernel_body}
        return {ret}

    @pl.function(type=pl.FunctionType.Orchestration)
    def main(self, x: {TEN}, p: pl.Out[{TEN}], q: pl.Out[{TEN}]) -> {PAIR}:
        r: {PAIR} = self.kernel(x, p, q)
{orch}
        return first, second
"""


STORE_Q_THEN_P = f"""        sq: {TEN} = pl.tile.store(v, [0, 0], q)
        sp: {TEN} = pl.tile.store(u, [0, 0], p)"""


def run(text: str):
    prog = parse_program(text, "before.ir", ctx=CTX)
    out = NormalizeReturnOrder().run(prog, CTX)
    check_invariants(out, CTX, NormalizeReturnOrder())
    return prog, out


def assert_becomes(before: str, expected: str):
    _, out = run(before)
    want = parse_program(expected, "expected.ir", ctx=CTX)
    assert out == want, f"got:\n{print_program(out)}\nexpected:\n{print_program(want)}"


def test_results_returned_out_of_parameter_order_are_swapped_and_the_caller_follows():
    before = program(STORE_Q_THEN_P, "sq, sp", f"        first: {TEN} = r[0]\n        second: {TEN} = r[1]")
    expected = program(STORE_Q_THEN_P, "p, q", f"        first: {TEN} = r[1]\n        second: {TEN} = r[0]")
    assert_becomes(before, expected)


def test_results_in_order_only_become_the_parameters():
    before = program(STORE_Q_THEN_P, "sp, sq", f"        first: {TEN} = r[0]\n        second: {TEN} = r[1]")
    expected = program(STORE_Q_THEN_P, "p, q", f"        first: {TEN} = r[0]\n        second: {TEN} = r[1]")
    assert_becomes(before, expected)


def test_a_result_carried_through_a_loop_is_its_parameter():
    body = f"""        for i, (acc,) in pl.range(2, init_values=(p,)):
            s: {TEN} = pl.tile.store(u, [0, 0], acc)
            done = pl.yield_(s)
        sq: {TEN} = pl.tile.store(v, [0, 0], q)"""
    orch = f"        first: {TEN} = r[0]\n        second: {TEN} = r[1]"
    assert_becomes(program(body, "sq, done", orch), program(body, "p, q", orch).replace("r[0]", "r[X]")
                   .replace("r[1]", "r[0]").replace("r[X]", "r[1]"))


def test_a_returned_value_that_is_no_parameter_stays_and_nothing_moves():
    # `x` is an In parameter: only Out/InOut parameters are ordered, and x is not one of them
    body = STORE_Q_THEN_P
    before = program(body, "sq, x", f"        first: {TEN} = r[0]\n        second: {TEN} = r[1]")
    _, out = run(before)
    assert print_program(out).count("return q, x") == 1
    assert out.function("main").body[1].value.index.value == 0


def test_a_submit_reads_its_results_at_the_moved_positions_and_the_task_id_stays_last():
    before = program(STORE_Q_THEN_P, "sq, sp", f"""        first: {TEN} = r[0]
        second: {TEN} = r[1]""").replace(
        f"        r: {PAIR} = self.kernel(x, p, q)\n",
        "        with pl.manual_scope():\n            r = pl.submit(self.kernel, x, p, q)\n"
        f"            first: {TEN} = r[0]\n            second: {TEN} = r[1]\n"
        "            tid: pl.Scalar[pl.TASK_ID] = r[2]\n").replace(
        f"        first: {TEN} = r[0]\n        second: {TEN} = r[1]\n", "")
    _, out = run(before)
    picks = {n.target.name: n.value.index.value for n in walk(out.function("main"))
             if isinstance(n, AssignStmt) and isinstance(n.value, GetItem)}
    assert picks == {"first": 1, "second": 0, "tid": 2}


def test_a_wrapper_declaring_one_tuple_result_keeps_its_single_value():
    text = f"""import pypto.language as pl

@pl.program
class P:
    @pl.function(type=pl.FunctionType.AIV)
    def kernel(self, x: {TEN}, p: pl.Out[{TEN}], q: pl.Out[{TEN}]) -> {PAIR}:
        t: {TILE} = pl.tile.load(x, [0, 0], [16, 64], target_memory=pl.Mem.Vec)
        sp: {TEN} = pl.tile.store(t, [0, 0], p)
        sq: {TEN} = pl.tile.store(t, [0, 0], q)
        return p, q

    @pl.function(type=pl.FunctionType.Group)
    def group(self, x: {TEN}, p: pl.Out[{TEN}], q: pl.Out[{TEN}]) -> pl.Tuple[{TEN}, {TEN}]:
        r: pl.Tuple[{TEN}, {TEN}] = self.kernel(x, p, q)
        return r
"""
    prog, out = run(text)
    assert out is prog


def test_a_program_without_kernels_is_returned_as_is():
    text = f"""import pypto.language as pl

@pl.program
class P:
    @pl.function
    def main(self, x: {TEN}) -> {TEN}:
        return x
"""
    prog, out = run(text)
    assert out is prog


def test_swapped_results_give_the_same_numbers_at_every_stage():
    text = program(STORE_Q_THEN_P, "sq, sp", f"        second: {TEN} = r[0]\n        first: {TEN} = r[1]")
    prog = parse_program(text, "swap.ir", ctx=CTX)
    reports = validate_program(prog, CTX, seed=3)
    assert reports and all(r.first_failure is None for r in reports), [r.rows for r in reports]
    assert any(r.kernel == "main" for r in reports)
