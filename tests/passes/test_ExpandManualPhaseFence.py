"""ExpandManualPhaseFence: in a manual scope, a loop whose task launches all wait on one task-id array waits
on one barrier task instead, when that saves edges (P producers x C consumers > P + C). Expected programs
are written by hand from the pass's rules."""

import textwrap

from ptoc.context import CompileContext
from ptoc.driver import frontend
from ptoc.ir.printer import print_program
from ptoc.passes.ExpandManualPhaseFence import ExpandManualPhaseFence
from ptoc.passes.manager import check_invariants

CTX = CompileContext()
HEAD = """import pypto.language as pl
@pl.program
class P:
    @pl.function
    def step(self) -> pl.Scalar[pl.TASK_ID]:
        return pl.system.task_invalid()
    @pl.function(type=pl.FunctionType.ORCH)
    def main(self, n: pl.Scalar[pl.INDEX]) -> pl.Scalar[pl.TASK_ID]:
"""


def orch(body: str, scope: str = "pl.manual_scope()", func_type: str = "Orchestration") -> str:
    body = textwrap.indent(textwrap.dedent(body).strip("\n"), " " * 12)
    return (HEAD.replace("ORCH", func_type) + f"        with {scope}:\n{body}\n"
            "        return pl.system.task_invalid()\n")


def run(text: str):
    prog = frontend(text, "before.ir", CTX)
    out = ExpandManualPhaseFence().run(prog, CTX)
    check_invariants(out, CTX, ExpandManualPhaseFence())
    return prog, out


def assert_becomes(before: str, expected: str):
    _, out = run(before)
    want = frontend(expected, "expected.ir", CTX)
    assert out == want, f"got:\n{print_program(out)}\nexpected:\n{print_program(want)}"


def assert_unchanged(before: str):
    prog, out = run(before)
    assert out == prog, print_program(out)


def test_a_parallel_fan_waits_on_one_barrier():
    # 4 producers x (3 launches x 2 iterations = 6 consumers): 24 edges become 4 + 6
    assert_becomes(orch("""
        ready = pl.array.create(4, pl.TASK_ID)
        for j in pl.parallel(2):
            u, u_tid = pl.submit(self.step, deps=[ready])
            v, v_tid = pl.submit(self.step, deps=[ready])
            w, w_tid = pl.submit(self.step, deps=[ready])
    """), orch("""
        ready = pl.array.create(4, pl.TASK_ID)
        phase_fence_barrier_0_tid = pl.system.task_dummy(deps=[ready])
        for j in pl.parallel(2):
            u, u_tid = pl.submit(self.step, deps=[phase_fence_barrier_0_tid])
            v, v_tid = pl.submit(self.step, deps=[phase_fence_barrier_0_tid])
            w, w_tid = pl.submit(self.step, deps=[phase_fence_barrier_0_tid])
    """))


def test_the_barrier_is_made_only_when_it_saves_an_edge():
    # 2 producers x 2 consumers: 4 edges either way, no barrier
    assert_unchanged(orch("""
        ready = pl.array.create(2, pl.TASK_ID)
        for j in pl.parallel(2):
            u, u_tid = pl.submit(self.step, deps=[ready])
    """))
    # 3 producers x 2 consumers: 6 edges against 5
    assert_becomes(orch("""
        ready = pl.array.create(3, pl.TASK_ID)
        for j in pl.parallel(2):
            u, u_tid = pl.submit(self.step, deps=[ready])
    """), orch("""
        ready = pl.array.create(3, pl.TASK_ID)
        phase_fence_barrier_0_tid = pl.system.task_dummy(deps=[ready])
        for j in pl.parallel(2):
            u, u_tid = pl.submit(self.step, deps=[phase_fence_barrier_0_tid])
    """))


def test_a_sequential_loop_counts_the_launches_of_its_constant_inner_loops():
    # range(1) around range(3): 3 consumers of 2 producers, 6 > 5; the barrier goes before the outer loop
    assert_becomes(orch("""
        ready = pl.array.create(2, pl.TASK_ID)
        for j in pl.range(1):
            for k in pl.range(3):
                u, u_tid = pl.submit(self.step, deps=[ready])
    """), orch("""
        ready = pl.array.create(2, pl.TASK_ID)
        phase_fence_barrier_0_tid = pl.system.task_dummy(deps=[ready])
        for j in pl.range(1):
            for k in pl.range(3):
                u, u_tid = pl.submit(self.step, deps=[phase_fence_barrier_0_tid])
    """))


def test_a_parallel_loop_leaves_its_inner_loops_to_fence_themselves():
    # the outer parallel loop does not count the inner launches; the inner loop (3 consumers) fences itself
    assert_becomes(orch("""
        ready = pl.array.create(2, pl.TASK_ID)
        for j in pl.parallel(1):
            for k in pl.range(3):
                u, u_tid = pl.submit(self.step, deps=[ready])
    """), orch("""
        ready = pl.array.create(2, pl.TASK_ID)
        for j in pl.parallel(1):
            phase_fence_barrier_0_tid = pl.system.task_dummy(deps=[ready])
            for k in pl.range(3):
                u, u_tid = pl.submit(self.step, deps=[phase_fence_barrier_0_tid])
    """))


def test_an_array_the_loop_updates_keeps_its_direct_edges():
    assert_unchanged(orch("""
        ready = pl.array.create(4, pl.TASK_ID)
        for j, (cur,) in pl.range(4, init_values=(ready,)):
            u, u_tid = pl.submit(self.step, deps=[ready])
            nxt = pl.array.update_element(cur, 0, u_tid)
            out = pl.yield_(nxt)
    """))


def test_a_parallel_loop_of_unknown_length_and_a_two_array_dependency_are_left_alone():
    assert_unchanged(orch("""
        ready = pl.array.create(4, pl.TASK_ID)
        for j in pl.parallel(n):
            u, u_tid = pl.submit(self.step, deps=[ready])
            v, v_tid = pl.submit(self.step, deps=[ready])
    """))
    assert_unchanged(orch("""
        a = pl.array.create(4, pl.TASK_ID)
        b = pl.array.create(4, pl.TASK_ID)
        for j in pl.parallel(4):
            u, u_tid = pl.submit(self.step, deps=[a, b])
    """))


def test_only_manual_scopes_of_orchestration_functions_are_fenced():
    fan = """
        ready = pl.array.create(4, pl.TASK_ID)
        for j in pl.parallel(4):
            u, u_tid = pl.submit(self.step, deps=[ready])
    """
    assert_unchanged(orch(fan, scope="pl.at(level=pl.Level.HOST)"))
    assert_unchanged(orch(fan, func_type="Opaque"))
    prog, out = run(orch(fan, scope="pl.scope(mode=pl.ScopeMode.MANUAL)"))
    assert "phase_fence_barrier_0_tid = pl.system.task_dummy(deps=[ready])" in print_program(out)


def test_a_taken_barrier_name_gets_a_suffix_and_two_arrays_two_barriers_in_first_use_order():
    assert_becomes(orch("""
        a = pl.array.create(4, pl.TASK_ID)
        b = pl.array.create(4, pl.TASK_ID)
        phase_fence_barrier_0_tid = pl.system.task_invalid()
        for j in pl.parallel(4):
            u, u_tid = pl.submit(self.step, deps=[b])
            v, v_tid = pl.submit(self.step, deps=[a])
    """), orch("""
        a = pl.array.create(4, pl.TASK_ID)
        b = pl.array.create(4, pl.TASK_ID)
        phase_fence_barrier_0_tid = pl.system.task_invalid()
        phase_fence_barrier_0_tid_1 = pl.system.task_dummy(deps=[b])
        phase_fence_barrier_1_tid = pl.system.task_dummy(deps=[a])
        for j in pl.parallel(4):
            u, u_tid = pl.submit(self.step, deps=[phase_fence_barrier_0_tid_1])
            v, v_tid = pl.submit(self.step, deps=[phase_fence_barrier_1_tid])
    """))


def run_as_written(text: str):
    """The program as written, names assigned more than once included (the pass needs no SSA, as PyPTO's)."""
    prog = frontend(text, "before.ir", CTX)
    out = ExpandManualPhaseFence().run(prog, CTX)
    check_invariants(out, CTX, ExpandManualPhaseFence(), ssa=False)
    return prog, out


def test_names_assigned_again_are_read_as_written():
    # `last` is assigned before the loop and in it: only the launches' own array decides
    _, out = run_as_written(orch("""
        ready = pl.array.create(4, pl.TASK_ID)
        last = pl.system.task_invalid()
        for j in pl.range(4):
            last, last_tid = pl.submit(self.step, deps=[ready])
    """))
    assert "phase_fence_barrier_0_tid = pl.system.task_dummy(deps=[ready])" in print_program(out)
    assert "pl.submit(self.step, deps=[phase_fence_barrier_0_tid])" in print_program(out)
    # the array itself assigned again in the loop: later iterations wait on other tasks, no barrier
    prog, out = run_as_written(orch("""
        ready = pl.array.create(4, pl.TASK_ID)
        for j in pl.range(4):
            u, u_tid = pl.submit(self.step, deps=[ready])
            ready = pl.array.create(4, pl.TASK_ID)
    """))
    assert out == prog
