"""MaterializeRuntimeScopes: an orchestration function's task scopes written as `with pl.scope():` blocks
(the body, every `for` body, every `if` branch; nothing inside a manual scope), the function then marked
`auto_scope=False`. Each test gives a program and the program it must become, both written by hand,
compared structurally after this pass alone."""

import textwrap

from ptoc.context import CompileContext
from ptoc.frontend.parser import parse_program
from ptoc.ir.printer import print_program
from ptoc.passes.MaterializeRuntimeScopes import MaterializeRuntimeScopes
from ptoc.passes.manager import input_properties, run_pipeline

CTX = CompileContext()
T = "pl.Tensor[[32], pl.FP16]"
KERNEL = f"""
    @pl.function(type=pl.FunctionType.InCore)
    def step(self, x: {T}, y: pl.Out[{T}]) -> {T}:
        t: pl.Tile[[32], pl.FP16, pl.Mem.Vec] = pl.tile.load(x, [0], [32], target_memory=pl.Mem.Vec)
        r: {T} = pl.tile.store(t, [0], y)
        return r
"""


def program(*functions: str) -> str:
    body = "\n".join(textwrap.indent(textwrap.dedent(f).strip("\n"), " " * 4) for f in functions)
    return f"@pl.program\nclass q:\n{body}\n"


def run(text: str):
    prog = parse_program(text, "before.ir", ctx=CTX)
    return prog, run_pipeline(prog, CTX, passes=[MaterializeRuntimeScopes], given=input_properties(prog, CTX))


def assert_becomes(before: str, expected: str):
    _, out = run(before)
    want = parse_program(expected, "expected.ir", ctx=CTX)
    assert out == want, f"got:\n{print_program(out)}\nexpected:\n{print_program(want)}"
    assert MaterializeRuntimeScopes().run(out, CTX) is out  # its scopes are all written: nothing more to do
    return out


def test_the_body_and_each_loop_body_get_a_scope_and_the_loop_keeps_its_yield_after_it():
    before = f"""
        @pl.function(type=pl.FunctionType.Orchestration)
        def main(self, x: {T}, y: pl.Out[{T}]) -> {T}:
            for k, (acc,) in pl.range(3, init_values=(y,)):
                nxt: {T} = self.step(x, acc)
                acc2: {T} = pl.yield_(nxt)
            return acc2
    """
    after = f"""
        @pl.function(type=pl.FunctionType.Orchestration, auto_scope=False)
        def main(self, x: {T}, y: pl.Out[{T}]) -> {T}:
            with pl.scope():
                for k, (acc,) in pl.range(3, init_values=(y,)):
                    with pl.scope():
                        nxt: {T} = self.step(x, acc)
                    acc2: {T} = pl.yield_(nxt)
                return acc2
    """
    assert_becomes(program(KERNEL, before), program(KERNEL, after))


def test_both_branches_of_an_if_get_a_scope_and_a_missing_else_stays_missing():
    before = f"""
        @pl.function(type=pl.FunctionType.Orchestration)
        def main(self, x: {T}, n: pl.Scalar[pl.INDEX]) -> {T}:
            buf: {T} = pl.create_tensor([32], dtype=pl.FP16)
            if n > 2:
                a: {T} = self.step(x, buf)
            else:
                b: {T} = self.step(buf, x)
            if n > 5:
                c: {T} = self.step(x, buf)
            return buf
    """
    after = f"""
        @pl.function(type=pl.FunctionType.Orchestration, auto_scope=False)
        def main(self, x: {T}, n: pl.Scalar[pl.INDEX]) -> {T}:
            with pl.scope():
                buf: {T} = pl.create_tensor([32], dtype=pl.FP16)
                if n > 2:
                    with pl.scope():
                        a: {T} = self.step(x, buf)
                else:
                    with pl.scope():
                        b: {T} = self.step(buf, x)
                if n > 5:
                    with pl.scope():
                        c: {T} = self.step(x, buf)
                return buf
    """
    assert_becomes(program(KERNEL, before), program(KERNEL, after))


def test_nothing_is_added_inside_a_manual_scope_at_any_depth():
    before = f"""
        @pl.function(type=pl.FunctionType.Orchestration)
        def main(self, x: {T}, y: pl.Out[{T}]) -> {T}:
            with pl.manual_scope():
                for i in pl.range(2):
                    for j in pl.parallel(4):
                        r: {T} = self.step(x, y)
            for k in pl.range(2):
                s: {T} = self.step(x, y)
            return y
    """
    after = f"""
        @pl.function(type=pl.FunctionType.Orchestration, auto_scope=False)
        def main(self, x: {T}, y: pl.Out[{T}]) -> {T}:
            with pl.scope():
                with pl.manual_scope():
                    for i in pl.range(2):
                        for j in pl.parallel(4):
                            r: {T} = self.step(x, y)
                for k in pl.range(2):
                    with pl.scope():
                        s: {T} = self.step(x, y)
                return y
    """
    assert_becomes(program(KERNEL, before), program(KERNEL, after))


def test_a_while_body_is_not_scoped_but_a_loop_inside_it_is():
    before = f"""
        @pl.function(type=pl.FunctionType.Orchestration)
        def main(self, x: {T}, y: pl.Out[{T}], n: pl.Scalar[pl.INDEX]) -> {T}:
            for (i,) in pl.while_(init_values=(0,)):
                pl.cond(i < n)
                for j in pl.range(2):
                    r: {T} = self.step(x, y)
                i2: pl.Scalar[pl.INDEX] = i + 1
                i3: pl.Scalar[pl.INDEX] = pl.yield_(i2)
            return y
    """
    after = f"""
        @pl.function(type=pl.FunctionType.Orchestration, auto_scope=False)
        def main(self, x: {T}, y: pl.Out[{T}], n: pl.Scalar[pl.INDEX]) -> {T}:
            with pl.scope():
                for (i,) in pl.while_(init_values=(0,)):
                    pl.cond(i < n)
                    for j in pl.range(2):
                        with pl.scope():
                            r: {T} = self.step(x, y)
                    i2: pl.Scalar[pl.INDEX] = i + 1
                    i3: pl.Scalar[pl.INDEX] = pl.yield_(i2)
                return y
    """
    assert_becomes(program(KERNEL, before), program(KERNEL, after))


def test_functions_that_place_their_scopes_and_other_function_types_are_left_alone():
    text = program(KERNEL, f"""
        @pl.function(type=pl.FunctionType.Orchestration, auto_scope=False)
        def main(self, x: {T}, y: pl.Out[{T}]) -> {T}:
            for k in pl.range(2):
                s: {T} = self.step(x, y)
            return y
        @pl.function
        def plain(self, x: {T}, y: pl.Out[{T}]) -> {T}:
            for k in pl.range(2):
                s: {T} = self.step(x, y)
            return y
    """)
    prog, out = run(text)
    assert out is prog


def test_a_body_already_in_one_automatic_scope_is_not_wrapped_again():
    before = f"""
        @pl.function(type=pl.FunctionType.Orchestration)
        def main(self, x: {T}, y: pl.Out[{T}]) -> {T}:
            with pl.scope():
                for k in pl.range(2):
                    with pl.scope():
                        s: {T} = self.step(x, y)
                return y
    """
    assert_becomes(program(KERNEL, before),
                   program(KERNEL, before.replace("Orchestration)", "Orchestration, auto_scope=False)")))


def test_a_branch_that_yields_keeps_its_yield_after_its_scope():
    before = f"""
        @pl.function(type=pl.FunctionType.Orchestration)
        def main(self, x: {T}, y: pl.Out[{T}], n: pl.Scalar[pl.INDEX]) -> {T}:
            if n > 2:
                a: {T} = self.step(x, y)
                r: {T} = pl.yield_(a)
            else:
                r: {T} = pl.yield_(y)
            return r
    """
    after = f"""
        @pl.function(type=pl.FunctionType.Orchestration, auto_scope=False)
        def main(self, x: {T}, y: pl.Out[{T}], n: pl.Scalar[pl.INDEX]) -> {T}:
            with pl.scope():
                if n > 2:
                    with pl.scope():
                        a: {T} = self.step(x, y)
                    r: {T} = pl.yield_(a)
                else:
                    r: {T} = pl.yield_(y)
                return r
    """
    assert_becomes(program(KERNEL, before), program(KERNEL, after))
