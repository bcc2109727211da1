"""ConvertToSSA: reassigned names get new names, loop-updated values become iter_args, branch updates
merge through the if's yields. Each test gives the program as written and the single-assignment
program it must become (written by hand), compared structurally after the pass."""

import textwrap

from ptoc.context import CompileContext
from ptoc.frontend.parser import parse_program
from ptoc.ir.printer import print_program
from ptoc.passes.ConvertToSSA import ConvertToSSA, ssa_violations
from ptoc.passes.manager import check_invariants

CTX = CompileContext()
T = "pl.Tensor[[64], pl.FP32]"


def fn(body: str, params: str = f"x: {T}", ret: str = T) -> str:
    body = textwrap.indent(textwrap.dedent(body).strip("\n"), " " * 8)
    return f"@pl.program\nclass p:\n    @pl.function\n    def main(self, {params}) -> {ret}:\n{body}\n"


def convert(before: str):
    prog = parse_program(before, "before.ir", ctx=CTX)
    out = ConvertToSSA().run(prog, CTX)
    check_invariants(out, CTX, ConvertToSSA())  # verifies single assignment and the ssa property
    return prog, out


def assert_converts(before: str, expected: str) -> None:
    _, out = convert(before)
    want = parse_program(expected, "expected.ir", ctx=CTX, ssa=True)
    assert out == want, f"got:\n{print_program(out)}\nexpected:\n{print_program(want)}"


def test_reassignment_in_straight_line_code_gets_new_names():
    assert_converts(fn("""
        r = pl.add(x, 1.0)
        r = pl.add(r, 2.0)
        r = pl.mul(r, x)
        return r
    """), fn("""
        r = pl.add(x, 1.0)
        r_1 = pl.add(r, 2.0)
        r_2 = pl.mul(r_1, x)
        return r_2
    """))


def test_a_reassigned_parameter_keeps_the_parameter_and_renames_the_new_value():
    assert_converts(fn("""
        x = pl.add(x, 1.0)
        return x
    """), fn("""
        x_1 = pl.add(x, 1.0)
        return x_1
    """))


def test_new_names_skip_names_the_function_already_uses():
    assert_converts(fn("""
        a = pl.add(x, 1.0)
        a_1 = pl.mul(x, 2.0)
        a = pl.add(a, a_1)
        return a
    """), fn("""
        a = pl.add(x, 1.0)
        a_1 = pl.mul(x, 2.0)
        a_2 = pl.add(a, a_1)
        return a_2
    """))


def test_a_value_updated_in_a_plain_loop_becomes_an_iter_arg_and_the_loop_result():
    assert_converts(fn("""
        acc = pl.mul(x, 0.0)
        for i in pl.range(4):
            tmp = pl.add(acc, x)
            acc = pl.add(tmp, 1.0)
        out = pl.mul(acc, 2.0)
        return out
    """), fn("""
        acc = pl.mul(x, 0.0)
        for i, (acc_1,) in pl.range(4, init_values=(acc,)):
            tmp = pl.add(acc_1, x)
            acc_2 = pl.add(tmp, 1.0)
            acc_3 = pl.yield_(acc_2)
        out = pl.mul(acc_3, 2.0)
        return out
    """))


def test_carried_values_follow_the_loops_own_iter_args_in_name_order():
    assert_converts(fn("""
        b = pl.mul(x, 2.0)
        a = pl.mul(x, 3.0)
        for i, (c,) in pl.range(0, 8, 2, init_values=(x,)):
            b = pl.add(b, c)
            a = pl.add(a, c)
            c2 = pl.add(c, 1.0)
            c_out = pl.yield_(c2)
        s = pl.add(a, b)
        r = pl.add(s, c_out)
        return r
    """), fn("""
        b = pl.mul(x, 2.0)
        a = pl.mul(x, 3.0)
        for i, (c, a_1, b_1) in pl.range(0, 8, 2, init_values=(x, a, b)):
            b_2 = pl.add(b_1, c)
            a_2 = pl.add(a_1, c)
            c2 = pl.add(c, 1.0)
            c_out, a_3, b_3 = pl.yield_(c2, a_2, b_2)
        s = pl.add(a_3, b_3)
        r = pl.add(s, c_out)
        return r
    """))


def test_nested_loops_carry_through_both_levels():
    assert_converts(fn("""
        r = pl.add(x, 0.0)
        for i in pl.range(3):
            for j in pl.range(2):
                r = pl.add(r, 1.0)
        return r
    """), fn("""
        r = pl.add(x, 0.0)
        for i, (r_1,) in pl.range(3, init_values=(r,)):
            for j, (r_2,) in pl.range(2, init_values=(r_1,)):
                r_3 = pl.add(r_2, 1.0)
                r_4 = pl.yield_(r_3)
            r_5 = pl.yield_(r_4)
        return r_5
    """))


def test_branch_updates_merge_through_the_if_and_a_missing_else_yields_the_old_value():
    params = f"x: {T}, n: pl.Scalar[pl.INDEX]"
    assert_converts(fn("""
        a = pl.add(x, 0.0)
        b = pl.mul(x, 2.0)
        if n == 0:
            b = pl.add(b, 1.0)
            a = pl.mul(a, 3.0)
        r = pl.add(a, b)
        return r
    """, params), fn("""
        a = pl.add(x, 0.0)
        b = pl.mul(x, 2.0)
        if n == 0:
            b_1 = pl.add(b, 1.0)
            a_1 = pl.mul(a, 3.0)
            a_2, b_2 = pl.yield_(a_1, b_1)
        else:
            a_2, b_2 = pl.yield_(a, b)
        r = pl.add(a_2, b_2)
        return r
    """, params))


def test_a_name_first_assigned_in_both_branches_is_merged_and_a_pass_branch_just_yields():
    params = f"x: {T}, n: pl.Scalar[pl.INDEX]"
    assert_converts(fn("""
        acc = pl.add(x, 0.0)
        for i in pl.range(10):
            if i > 5:
                pass
            else:
                acc = pl.add(acc, 1.0)
            if i == n:
                v = pl.mul(acc, 2.0)
            else:
                v = pl.add(acc, x)
            acc = pl.add(acc, v)
        return acc
    """, params), fn("""
        acc = pl.add(x, 0.0)
        for i, (acc_1,) in pl.range(10, init_values=(acc,)):
            if i > 5:
                acc_3 = pl.yield_(acc_1)
            else:
                acc_2 = pl.add(acc_1, 1.0)
                acc_3 = pl.yield_(acc_2)
            if i == n:
                v = pl.mul(acc_3, 2.0)
                v_2 = pl.yield_(v)
            else:
                v_1 = pl.add(acc_3, x)
                v_2 = pl.yield_(v_1)
            acc_4 = pl.add(acc_3, v_2)
            acc_5 = pl.yield_(acc_4)
        return acc_5
    """, params))


def test_a_while_loop_carries_what_its_body_updates():
    params = "n: pl.Scalar[pl.INT64]"
    ret = "pl.Scalar[pl.INT64]"
    assert_converts(fn("""
        k: pl.Scalar[pl.INT64] = 0
        s: pl.Scalar[pl.INT64] = 1
        for (k2,) in pl.while_(init_values=(k,)):
            pl.cond(k2 < n)
            s = s * 2
            k3 = k2 + 1
            k_out = pl.yield_(k3)
        return s
    """, params, ret), fn("""
        k: pl.Scalar[pl.INT64] = 0
        s: pl.Scalar[pl.INT64] = 1
        for (k2, s_1) in pl.while_(init_values=(k, s)):
            pl.cond(k2 < n)
            s_2 = s_1 * 2
            k3 = k2 + 1
            k_out, s_3 = pl.yield_(k3, s_2)
        return s_3
    """, params, ret))


def test_uses_inside_types_are_renamed():
    params = "x: pl.Tensor[[16, 64], pl.FP32], n: pl.Scalar[pl.INDEX]"
    ret = "pl.Tensor[[8, 64], pl.FP32]"
    assert_converts(fn("""
        v = pl.min(n, 64)
        v = pl.min(v, 32)
        c: pl.Tensor[[8, 64], pl.FP32, pl.TensorView(valid_shape=[8, v])] = pl.tensor.slice(x, [8, 64], [0, 0], valid_shape=[8, v])
        return c
    """, params, ret), fn("""
        v = pl.min(n, 64)
        v_1 = pl.min(v, 32)
        c: pl.Tensor[[8, 64], pl.FP32, pl.TensorView(valid_shape=[8, v_1])] = pl.tensor.slice(x, [8, 64], [0, 0], valid_shape=[8, v_1])
        return c
    """, params, ret))


def test_names_assigned_in_a_scope_stay_visible_after_it():
    assert_converts(fn("""
        r = pl.add(x, 1.0)
        with pl.at(level=pl.Level.CORE_GROUP):
            r = pl.add(r, 2.0)
        return r
    """), fn("""
        r = pl.add(x, 1.0)
        with pl.at(level=pl.Level.CORE_GROUP):
            r_1 = pl.add(r, 2.0)
        return r_1
    """))


def test_ssa_input_is_returned_unchanged():
    prog, out = convert(fn("""
        a = pl.add(x, 1.0)
        for i, (c,) in pl.range(4, init_values=(a,)):
            d = pl.add(c, 1.0)
            e = pl.yield_(d)
        return e
    """))
    assert out is prog


def test_the_property_check_names_a_reassigned_name():
    prog = parse_program(fn("""
        r = pl.add(x, 1.0)
        r = pl.add(r, 2.0)
        return r
    """), "t.ir")
    # lines: 1 @pl.program, 2 class, 3 @pl.function, 4 def, 5 and 6 the two assignments
    assert ssa_violations(prog) == ["main: 'r' is assigned more than once (line 6)"]
    assert ssa_violations(ConvertToSSA().run(prog, CTX)) == []


def test_a_python_while_loop_becomes_pl_while_carrying_what_it_updates_in_name_order():
    params = f"n: pl.Scalar[pl.INT64], x: {T}"
    assert_converts(fn("""
        k: pl.Scalar[pl.INT64] = 0
        acc = pl.add(x, 0.0)
        while k < n:
            k = k + 1
            acc = pl.add(acc, x)
        return acc
    """, params), fn("""
        k: pl.Scalar[pl.INT64] = 0
        acc = pl.add(x, 0.0)
        for (acc_1, k_1) in pl.while_(init_values=(acc, k)):
            pl.cond(k_1 < n)
            k_2 = k_1 + 1
            acc_2 = pl.add(acc_1, x)
            acc_3, k_3 = pl.yield_(acc_2, k_2)
        return acc_3
    """, params))


def test_a_python_while_loop_prints_as_written_and_parses_back():
    text = "# pypto.program: p\nimport pypto.language as pl\n\n" + fn("""
        k: pl.Scalar[pl.INT64] = 0
        while k < n:
            k = k + 1
        return k
    """, "n: pl.Scalar[pl.INT64]", "pl.Scalar[pl.INT64]")
    prog = parse_program(text, "w.ir", ctx=CTX)
    assert print_program(prog) == text


# --------------------------------------------------------------------------------------------------
# A name first assigned inside a loop and read after it leaves the loop as a result
# --------------------------------------------------------------------------------------------------


def test_a_name_first_assigned_in_the_loop_and_read_after_it_is_carried_out():
    # `last` exists only inside the body as written; the loop now carries it, starting from the first
    # value of its type before the loop (here the parameter x), and returns it as its result
    assert_converts(fn("""
        for i in pl.range(4):
            last = pl.adds(x, pl.cast(i, pl.FP32))
        return last
    """), fn("""
        for i, (last,) in pl.range(4, init_values=(x,)):
            last_1 = pl.adds(x, pl.cast(i, pl.FP32))
            last_2 = pl.yield_(last_1)
        return last_2
    """))


def test_an_out_parameter_of_the_type_is_preferred_as_the_start_value():
    params = f"x: {T}, y: {T}, o: pl.Out[{T}]"
    assert_converts(fn("""
        for i in pl.range(2):
            r = pl.add(x, y)
        return r
    """, params), fn("""
        for i, (r,) in pl.range(2, init_values=(o,)):
            r_1 = pl.add(x, y)
            r_2 = pl.yield_(r_1)
        return r_2
    """, params))


def test_a_loop_local_name_not_read_after_the_loop_stays_local():
    assert_converts(fn("""
        acc = pl.add(x, 0.0)
        for i in pl.range(3):
            t = pl.mul(acc, 2.0)
            acc = pl.add(t, x)
        return acc
    """), fn("""
        acc = pl.add(x, 0.0)
        for i, (acc_1,) in pl.range(3, init_values=(acc,)):
            t = pl.mul(acc_1, 2.0)
            acc_2 = pl.add(t, x)
            acc_3 = pl.yield_(acc_2)
        return acc_3
    """))


def test_an_escaping_name_threads_through_every_enclosing_loop():
    assert_converts(fn("""
        for a in pl.range(2):
            for b in pl.range(3):
                v = pl.adds(x, pl.cast(a * 3 + b, pl.FP32))
        return v
    """), fn("""
        for a, (v,) in pl.range(2, init_values=(x,)):
            for b, (v_1,) in pl.range(3, init_values=(v,)):
                v_2 = pl.adds(x, pl.cast(a * 3 + b, pl.FP32))
                v_3 = pl.yield_(v_2)
            v_4 = pl.yield_(v_3)
        return v_4
    """))


def test_a_scalar_with_no_value_of_its_type_before_the_loop_starts_from_zero():
    params = "n: pl.Scalar[pl.INDEX]"
    ret = "pl.Scalar[pl.FP32]"
    assert_converts(fn("""
        for i in pl.range(n):
            s: pl.Scalar[pl.FP32] = pl.cast(i, pl.FP32)
        return s
    """, params, ret), fn("""
        for i, (s,) in pl.range(n, init_values=(0.0,)):
            s_1: pl.Scalar[pl.FP32] = pl.cast(i, pl.FP32)
            s_2 = pl.yield_(s_1)
        return s_2
    """, params, ret))


def test_a_task_id_with_no_task_before_the_loop_starts_as_no_task():
    text = """
@pl.program
class p:
    @pl.function(type=pl.FunctionType.InCore)
    def k(self, a: pl.Tensor[[16], pl.FP32]) -> pl.Tensor[[16], pl.FP32]:
        return a

    @pl.function(type=pl.FunctionType.Orchestration)
    def main(self, a: pl.Tensor[[16], pl.FP32]) -> pl.Tensor[[16], pl.FP32]:
        with pl.manual_scope():
            for i in pl.range(4):
                r, tid = pl.submit(self.k, a)
            out, _ = pl.submit(self.k, r, deps=[tid])
        return out
"""
    _, out = convert(text)
    printed = print_program(out)
    assert "tid_init = pl.system.task_invalid()" in printed
    assert "for i, (r, tid) in pl.range(4, init_values=(a, tid_init)):" in printed


def test_a_name_first_assigned_in_one_branch_inside_a_loop_gets_a_merge_that_passes_the_old_value():
    # (the shape CtrlFlowTransform gives a `continue`): the skipped iteration keeps the carried value
    params = f"x: {T}, c: pl.Out[{T}]"
    assert_converts(fn("""
        for i in pl.range(4):
            if i % 2 != 0:
                pass
            else:
                o = pl.adds(x, pl.cast(i, pl.FP32))
        return o
    """, params), fn("""
        for i, (o,) in pl.range(4, init_values=(c,)):
            if i % 2 != 0:
                o_2 = pl.yield_(o)
            else:
                o_1 = pl.adds(x, pl.cast(i, pl.FP32))
                o_2 = pl.yield_(o_1)
            o_3 = pl.yield_(o_2)
        return o_3
    """, params))


def test_names_new_in_both_branches_and_not_read_after_the_if_are_not_merged():
    params = f"x: {T}, n: pl.Scalar[pl.INDEX]"
    assert_converts(fn("""
        if n == 0:
            y = pl.add(x, x)
            z = pl.yield_(y)
        else:
            y = pl.mul(x, x)
            z = pl.yield_(y)
        return z
    """, params), fn("""
        if n == 0:
            y = pl.add(x, x)
            z = pl.yield_(y)
        else:
            y_1 = pl.mul(x, x)
            z = pl.yield_(y_1)
        return z
    """, params))


def test_a_split_aiv_loop_is_a_region_whose_names_are_read_after_it():
    params = "a: pl.Tensor[[256, 128], pl.FP32], out: pl.Out[pl.Tensor[[256, 128], pl.FP32]]"
    ret = "pl.Tensor[[256, 128], pl.FP32]"
    assert_converts(fn("""
        for lane in pl.split_aiv(2, mode=pl.SplitMode.UP_DOWN):
            t: pl.Tile[[128, 128], pl.FP32] = pl.load(a, [lane * 128, 0], [128, 128])
            out = pl.store(t, [lane * 128, 0], out)
        return out
    """, params, ret), fn("""
        for lane in pl.split_aiv(2, mode=pl.SplitMode.UP_DOWN):
            t: pl.Tile[[128, 128], pl.FP32] = pl.load(a, [lane * 128, 0], [128, 128])
            out_1 = pl.store(t, [lane * 128, 0], out)
        return out_1
    """, params, ret))


def test_carried_out_values_compute_what_python_computes():
    """The reference interpreter runs the converted program; the expected numbers are worked out here
    with numpy the way Python runs the program as written (the last iteration's value survives)."""
    import numpy as np

    from ptoc.reference.interp import run_function

    params = f"x: {T}, c: pl.Out[{T}]"
    _, out = convert(fn("""
        for a in pl.range(2):
            for b in pl.range(3):
                if b == 1:
                    pass
                else:
                    v = pl.adds(x, pl.cast(a * 10 + b, pl.FP32))
            w = pl.mul(v, x)
        return w
    """, params))
    x = np.linspace(-1.0, 1.0, 64, dtype=np.float32)
    got = np.asarray(run_function(out, "main", {"x": x, "c": np.zeros(64, np.float32)})["return[0]"])
    # last outer iteration a = 1; its last b that assigns v is b = 2: v = x + 12, w = v * x
    np.testing.assert_allclose(got, (x + 12.0) * x, rtol=1e-6)


def test_the_property_check_names_a_name_read_after_its_loop():
    prog = parse_program(fn("""
        for i in pl.range(4):
            last = pl.add(x, x)
        return last
    """), "p.ir", ctx=CTX)
    assert ssa_violations(prog) == ["main: a name assigned inside a loop is read after the loop"]
    assert ssa_violations(ConvertToSSA().run(prog, CTX)) == []


def test_a_bare_split_aiv_region_of_an_orchestration_is_put_in_its_own_core_scope():
    # (the front end does it, as PyPTO's parser does: the region runs on the cores, and
    # OutlineIncoreScopes makes the scope a kernel); one already inside a core scope stays where it is
    from ptoc.driver import frontend

    region = """
        for lane in pl.split_aiv(2, mode=pl.SplitMode.UP_DOWN):
            t: pl.Tile[[128, 128], pl.FP32] = pl.load(a, [lane * 128, 0], [128, 128])
            out = pl.store(t, [lane * 128, 0], out)
        return out
    """
    params = "a: pl.Tensor[[256, 128], pl.FP32], out: pl.Out[pl.Tensor[[256, 128], pl.FP32]]"
    ret = "pl.Tensor[[256, 128], pl.FP32]"
    text = print_program(frontend(fn(region, params, ret), "k.ir", CTX))
    assert "        with pl.at(level=pl.Level.CORE_GROUP):\n            for lane in pl.split_aiv(" in text
    inside = "with pl.at(level=pl.Level.CORE_GROUP):\n" + textwrap.indent(textwrap.dedent(region).strip("\n"), "    ")
    inside = inside.replace("\n        return out", "\n    return out").replace("    return out", "return out")
    text = print_program(frontend(fn(inside, params, ret), "k.ir", CTX))
    assert text.count("pl.at(") == 1
