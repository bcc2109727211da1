"""LowerPipelineLoops: pl.pipeline(..., stage=F) -> a loop over F-iteration chunks holding F clones of the
body, then the leftover iterations (flattened when the trip count is known, an if-chain on the remainder
when it is not). As in the pipeline, CanonicalizeIOOrder runs after it (it turns the chunked loop into a
pl.range and, for these scalar bodies, moves nothing). Expected programs are written by hand from those rules."""

import textwrap

import pytest

from ptoc.analysis.pipeline_stages import membership_pairs
from ptoc.context import CompileContext
from ptoc.diagnostics import CompileError
from ptoc.frontend.parser import parse_program
from ptoc.ir.printer import print_program
from ptoc.passes import LowerPipelineLoops as lpl
from ptoc.passes.CanonicalizeIOOrder import CanonicalizeIOOrder
from ptoc.passes.LowerPipelineLoops import LowerPipelineLoops
from ptoc.passes.manager import check_invariants
from ptoc.reference.validate import validate_program

CTX = CompileContext()
IDX = "pl.Scalar[pl.INDEX]"


def fn(body: str, params: str = "", ret: str = " -> pl.Tensor[[64], pl.FP32]") -> str:
    body = textwrap.indent(textwrap.dedent(body).strip("\n"), " " * 8)
    return (f"import pypto.language as pl\n@pl.program\nclass P:\n    @pl.function\n"
            f"    def main(self, x: pl.Tensor[[64], pl.FP32]{params}){ret}:\n{body}\n")


def lower(text: str):
    prog = parse_program(text, "before.ir", ctx=CTX)
    out = LowerPipelineLoops().run(prog, CTX)
    check_invariants(out, CTX, LowerPipelineLoops())
    out = CanonicalizeIOOrder().run(out, CTX)
    check_invariants(out, CTX, CanonicalizeIOOrder())
    return prog, out


def assert_lowers_to(before: str, expected: str):
    _, out = lower(before)
    want = parse_program(expected, "expected.ir", ctx=CTX)
    assert out == want, f"got:\n{print_program(out)}\nexpected:\n{print_program(want)}"


def test_trip_count_a_multiple_of_the_stage_gives_one_chunked_loop():
    assert_lowers_to(fn(f"""
        for i in pl.pipeline(0, 6, 1, stage=3):
            y: {IDX} = i * 2
        return x
    """), fn(f"""
        for i in pl.range(0, 6, 3):
            y: {IDX} = i * 2
            y_1: {IDX} = (i + 1) * 2
            y_2: {IDX} = (i + 2) * 2
        return x
    """))


def test_static_leftover_iterations_follow_the_loop_at_constant_indices():
    # trip 7 with step 2 from 1 (i = 1, 3, ..., 13), stage 2: chunks start at 1, 5, 9; then i = 13.
    assert_lowers_to(fn(f"""
        for i in pl.pipeline(1, 14, 2, stage=2):
            y: {IDX} = i
        return x
    """), fn(f"""
        for i in pl.range(1, 13, 4):
            y: {IDX} = i
            y_1: {IDX} = i + 2
        y_2: {IDX} = 13
        return x
    """))


def test_carried_values_thread_through_clones_and_into_the_tail():
    assert_lowers_to(fn(f"""
        for i, (a,) in pl.pipeline(0, 5, 1, stage=2, init_values=(s0,)):
            b: {IDX} = a + i
            r = pl.yield_(b)
        return r
    """, params=f", s0: {IDX}", ret=f" -> {IDX}"), fn(f"""
        for i, (a,) in pl.range(0, 4, 2, init_values=(s0,)):
            b: {IDX} = a + i
            b_1: {IDX} = b + (i + 1)
            r_main = pl.yield_(b_1)
        b_2: {IDX} = r_main + 4
        r = b_2
        return r
    """, params=f", s0: {IDX}", ret=f" -> {IDX}"))


def test_fewer_iterations_than_the_stage_is_only_a_tail_seeded_by_the_init_values():
    assert_lowers_to(fn(f"""
        for i, (a,) in pl.pipeline(0, 2, 1, stage=4, init_values=(s0,)):
            b: {IDX} = a + i
            r = pl.yield_(b)
        return r
    """, params=f", s0: {IDX}", ret=f" -> {IDX}"), fn(f"""
        b: {IDX} = s0 + 0
        b_1: {IDX} = b + 1
        r = b_1
        return r
    """, params=f", s0: {IDX}", ret=f" -> {IDX}"))


@pytest.mark.parametrize("loop", ["pl.pipeline(0, 8, 1, stage=1)", "pl.pipeline(4, 4, 1, stage=2)"])
def test_stage_one_and_empty_loops_become_plain_ranges(loop):
    args = loop[len("pl.pipeline("):loop.index(", stage")]
    assert_lowers_to(fn(f"""
        for i in {loop}:
            y: {IDX} = i
        return x
    """), fn(f"""
        for i in pl.range({args}):
            y: {IDX} = i
        return x
    """))


def test_dynamic_trip_count_dispatches_the_remainder_through_nested_ifs():
    before = fn(f"""
        for i, (a,) in pl.pipeline(0, n, 1, stage=3, init_values=(s0,)):
            b: {IDX} = a + i
            r = pl.yield_(b)
        return r
    """, params=f", s0: {IDX}, n: {IDX}", ret=f" -> {IDX}")
    assert_lowers_to(before, fn(f"""
        unroll_main_end: {IDX} = 0 + (n - 0) // 3 * 3
        for i, (a,) in pl.range(0, unroll_main_end, 3, init_values=(s0,)):
            b: {IDX} = a + i
            b_1: {IDX} = b + (i + 1)
            b_2: {IDX} = b_1 + (i + 2)
            r_main = pl.yield_(b_2)
        unroll_rem: {IDX} = n - unroll_main_end
        if unroll_rem == 1:
            b_3: {IDX} = r_main + unroll_main_end
            r = pl.yield_(b_3)
        else:
            if unroll_rem == 2:
                b_4: {IDX} = r_main + unroll_main_end
                b_5: {IDX} = b_4 + (unroll_main_end + 1)
                r_rem2 = pl.yield_(b_5)
            else:
                r_rem2 = pl.yield_(r_main)
            r = pl.yield_(r_rem2)
        return r
    """, params=f", s0: {IDX}, n: {IDX}", ret=f" -> {IDX}"))


def test_dynamic_bounds_with_a_step_count_iterations_not_index_units():
    assert_lowers_to(fn(f"""
        for i in pl.pipeline(0, n, 2, stage=2):
            y: {IDX} = i
        return x
    """, params=f", n: {IDX}"), fn(f"""
        unroll_main_end: {IDX} = 0 + (n - 0 + 1) // 2 // 2 * 4
        for i in pl.range(0, unroll_main_end, 4):
            y: {IDX} = i
            y_1: {IDX} = i + 2
        unroll_rem: {IDX} = (n - 0 + 1) // 2 - (n - 0 + 1) // 2 // 2 * 2
        if unroll_rem == 1:
            y_2: {IDX} = unroll_main_end
        return x
    """, params=f", n: {IDX}"))


def test_nested_pipelines_lower_the_inner_loop_first():
    assert_lowers_to(fn(f"""
        for i in pl.pipeline(0, 4, 1, stage=2):
            for j in pl.pipeline(0, 2, 1, stage=2):
                y: {IDX} = i + j
        return x
    """), fn(f"""
        for i in pl.range(0, 4, 2):
            for j in pl.range(0, 2, 2):
                y: {IDX} = i + j
                y_1: {IDX} = i + (j + 1)
            for j_1 in pl.range(0, 2, 2):
                y_2: {IDX} = i + 1 + j_1
                y_3: {IDX} = i + 1 + (j_1 + 1)
        return x
    """))


def test_a_step_that_is_not_a_constant_is_an_error():
    text = fn(f"""
        for i in pl.pipeline(0, 8, s, stage=2):
            y: {IDX} = i
        return x
    """, params=f", s: {IDX}")
    with pytest.raises(CompileError) as e:
        lower(text)
    assert e.value.diagnostics[0].code == "PTOC-E0650"


KERNEL = """import pypto.language as pl
@pl.program
class P:
    @pl.function(type=pl.FunctionType.AIV)
    def k(self, x: pl.Tensor[[128, 64], pl.FP32], nb: pl.Scalar[pl.INDEX],
          out: pl.Out[pl.Tensor[[128, 64], pl.FP32]]) -> pl.Tensor[[128, 64], pl.FP32]:
        for i, (o,) in pl.pipeline(0, nb, 1, stage=2, init_values=(out,)):
            r0: pl.Scalar[pl.INDEX] = i * 16
            t: pl.Tile[[16, 64], pl.FP32, pl.Mem.Vec] = pl.tile.load(x, [r0, 0], [16, 64], target_memory=pl.Mem.Vec)
            u: pl.Tile[[16, 64], pl.FP32, pl.Mem.Vec] = pl.tile.adds(t, 1.5)
            o2: pl.Tensor[[128, 64], pl.FP32] = pl.tile.store(u, [r0, 0], o)
            res = pl.yield_(o2)
        return res
"""


@pytest.mark.parametrize("nb", [0, 1, 4, 7])
def test_double_buffered_kernel_validates_at_every_stage(nb):
    prog = parse_program(KERNEL, "k.ir", ctx=CTX)
    (rep,) = validate_program(prog, CTX, seed=3, scalars={"nb": nb})
    assert rep.first_failure is None, rep.rows


def test_validation_catches_a_clone_at_the_wrong_index(monkeypatch):
    # A lowering that computes clone k at i + k * step + 1 stores the wrong rows: the LowerPipelineLoops
    # row of the validation table must be the first that differs.
    real = lpl._add
    monkeypatch.setattr(lpl, "_add", lambda a, b: real(a, b + 1 if b else 0))
    prog = parse_program(KERNEL, "k.ir", ctx=CTX)
    (rep,) = validate_program(prog, CTX, seed=3, scalars={"nb": 4})
    assert rep.first_failure is not None and rep.first_failure.stage == "LowerPipelineLoops"


# ---------------------------------------------------------------------------------------------------
# Pipeline membership: every copy's tile definitions carry `attrs={"pipeline_membership": "g:s"}`
# (g: the replicated region, numbered per function in the order the regions are built; s: the copy)
# ---------------------------------------------------------------------------------------------------

def aic(body: str) -> str:
    body = textwrap.indent(textwrap.dedent(body).strip("\n"), " " * 8)
    return ("import pypto.language as pl\n@pl.program\nclass P:\n    @pl.function(type=pl.FunctionType.AIC)\n"
            "    def k(self, a: pl.Tensor[[64, 256], pl.BF16], b: pl.Tensor[[256, 64], pl.BF16], "
            "out: pl.Out[pl.Tensor[[64, 64], pl.FP32]]) -> pl.Tensor[[64, 64], pl.FP32]:\n" + body + "\n")


L = "pl.Tile[[64, 64], pl.BF16, pl.Mem.Left]"
R = "pl.Tile[[64, 64], pl.BF16, pl.Mem.Right]"
C = "pl.Tile[[64, 64], pl.FP32, pl.Mem.Acc]"
MATS = """
a_mat: pl.Tile[[64, 256], pl.BF16, pl.Mem.Mat] = pl.tile.load(a, [0, 0], [64, 256], target_memory=pl.Mem.Mat)
b_mat: pl.Tile[[256, 64], pl.BF16, pl.Mem.Mat] = pl.tile.load(b, [0, 0], [256, 64], target_memory=pl.Mem.Mat)
acc0: pl.Tile[[64, 64], pl.FP32, pl.Mem.Acc] = pl.tile.create([64, 64], dtype=pl.FP32, target_memory=pl.Mem.Acc)
"""


def lower_only(text: str):
    out = LowerPipelineLoops().run(parse_program(text, "before.ir", ctx=CTX), CTX)
    check_invariants(out, CTX, LowerPipelineLoops())
    return out


def test_each_copy_tags_its_operands_and_keeps_its_first_iteration_test():
    # K = 256 in blocks of 64, two blocks in flight: one chunked loop of two copies (region 0). The L0
    # operands of copy k are tagged "0:k"; the matmul accumulators are not (the cube finishes one before
    # the next); copy 1's `ko + 64 == 0` stays as written (Simplify decides it later).
    before = aic(MATS + f"""
for ko, (acc,) in pl.pipeline(0, 256, 64, stage=2, init_values=(acc0,)):
    l: {L} = pl.tile.extract(a_mat, 0, ko, [64, 64], target_memory=pl.Mem.Left)
    r: {R} = pl.tile.extract(b_mat, ko, 0, [64, 64], target_memory=pl.Mem.Right)
    if ko == 0:
        first: {C} = pl.tile.matmul(l, r)
        phi: {C} = pl.yield_(first)
    else:
        more: {C} = pl.tile.matmul_acc(acc, l, r)
        phi: {C} = pl.yield_(more)
    res: {C} = pl.yield_(phi)
out_1: pl.Tensor[[64, 64], pl.FP32] = pl.tile.store(res, [0, 0], out)
return out_1
""")
    expected = aic(MATS + f"""
for ko, (acc,) in pl.pipeline(0, 256, 128, stage=1, init_values=(acc0,)):
    l: {L} = pl.tile.extract(a_mat, 0, ko, [64, 64], target_memory=pl.Mem.Left, attrs={{"pipeline_membership": "0:0"}})
    r: {R} = pl.tile.extract(b_mat, ko, 0, [64, 64], target_memory=pl.Mem.Right, attrs={{"pipeline_membership": "0:0"}})
    if ko == 0:
        first: {C} = pl.tile.matmul(l, r)
        phi: {C} = pl.yield_(first)
    else:
        more: {C} = pl.tile.matmul_acc(acc, l, r)
        phi: {C} = pl.yield_(more)
    l_1: {L} = pl.tile.extract(a_mat, 0, ko + 64, [64, 64], target_memory=pl.Mem.Left, attrs={{"pipeline_membership": "0:1"}})
    r_1: {R} = pl.tile.extract(b_mat, ko + 64, 0, [64, 64], target_memory=pl.Mem.Right, attrs={{"pipeline_membership": "0:1"}})
    if ko + 64 == 0:
        first_1: {C} = pl.tile.matmul(l_1, r_1)
        phi_1: {C} = pl.yield_(first_1)
    else:
        more_1: {C} = pl.tile.matmul_acc(phi, l_1, r_1)
        phi_1: {C} = pl.yield_(more_1)
    res: {C} = pl.yield_(phi_1)
out_1: pl.Tensor[[64, 64], pl.FP32] = pl.tile.store(res, [0, 0], out)
return out_1
""")
    out = lower_only(before)
    want = parse_program(expected, "expected.ir", ctx=CTX)
    assert out == want, f"got:\n{print_program(out)}\nexpected:\n{print_program(want)}"
    # the tags survive printing and reading back
    assert parse_program(print_program(out), "again.ir", ctx=CTX) == out


def memberships(program) -> dict[str, str]:
    from ptoc.ir.nodes import AssignStmt, Call
    from ptoc.ir.visitor import walk

    out = {}
    for n in walk(program):
        if isinstance(n, AssignStmt) and isinstance(n.value, Call):
            pairs = membership_pairs(n.value)
            if pairs:
                out[n.target.name] = ";".join(f"{g}:{s}" for g, s in pairs)
    return out


VEC = "pl.Tile[[16, 64], pl.FP32, pl.Mem.Vec]"


def vec_kernel(body: str, params: str = "") -> str:
    body = textwrap.indent(textwrap.dedent(body).strip("\n"), " " * 8)
    return ("import pypto.language as pl\n@pl.program\nclass P:\n    @pl.function(type=pl.FunctionType.AIV)\n"
            f"    def k(self, x: pl.Tensor[[128, 64], pl.FP32]{params}, out: pl.Out[pl.Tensor[[128, 64], pl.FP32]])"
            " -> pl.Tensor[[128, 64], pl.FP32]:\n" + body + "\n")


def test_nested_pipelines_keep_the_inner_membership_and_append_the_outer_one():
    # the inner loop is lowered first (region 0); the outer loop's copies (region 1) carry both pairs;
    # scalars get none
    out = lower_only(vec_kernel(f"""
for i, (o,) in pl.pipeline(0, 4, 1, stage=2, init_values=(out,)):
    for j, (p,) in pl.pipeline(0, 2, 1, stage=2, init_values=(o,)):
        r0: {IDX} = i * 32 + j * 16
        t: {VEC} = pl.tile.load(x, [r0, 0], [16, 64], target_memory=pl.Mem.Vec)
        u: {VEC} = pl.tile.adds(t, 1.0)
        p2: pl.Tensor[[128, 64], pl.FP32] = pl.tile.store(u, [r0, 0], p)
        q = pl.yield_(p2)
    o2 = pl.yield_(q)
return o2
"""))
    assert memberships(out) == {
        "t": "0:0;1:0", "u": "0:0;1:0", "t_1": "0:1;1:0", "u_1": "0:1;1:0",
        "t_2": "0:0;1:1", "u_2": "0:0;1:1", "t_3": "0:1;1:1", "u_3": "0:1;1:1",
    }


def test_dynamic_remainder_regions_are_numbered_from_the_deepest_branch():
    # stage 3: the main loop is region 0; the remainder chain is built as PyPTO builds it, innermost
    # first: the two copies for `unroll_rem == 2` are region 1, the one copy for `unroll_rem == 1` region 2
    out = lower_only(vec_kernel(f"""
for i, (o,) in pl.pipeline(0, n, 1, stage=3, init_values=(out,)):
    r0: {IDX} = i * 16
    t: {VEC} = pl.tile.load(x, [r0, 0], [16, 64], target_memory=pl.Mem.Vec)
    o2: pl.Tensor[[128, 64], pl.FP32] = pl.tile.store(t, [r0, 0], o)
    res = pl.yield_(o2)
return res
""", params=f", n: {IDX}"))
    got = memberships(out)
    assert sorted(got.values()) == ["0:0", "0:1", "0:2", "1:0", "1:1", "2:0"]
    from ptoc.ir.nodes import IfStmt

    outer = next(s for s in out.functions[0].body if isinstance(s, IfStmt))  # unroll_rem == 1
    assert [m for s in outer.then_body for m in memberships(s).values()] == ["2:0"]
