"""DeriveCallDirections: every call of a program function gets `attrs={"arg_directions": [...]}`, and Group /
Spmd parameters become as strong as the calls inside them. Each test gives a program and the program it
must become (written by hand), compared structurally after this pass alone. The `pypto_*` tests restate
PyPTO's Before/Expected pairs (tests/ut/ir/transforms/test_derive_call_directions.py there) in ptoc's
text; PyPTO's kernels there are written with `pl.load`/`pl.store` its front end lowers, here with the
tile operators directly."""

import textwrap

from ptoc.context import CompileContext
from ptoc.frontend.parser import parse_program
from ptoc.ir.printer import print_program
from ptoc.passes.DeriveCallDirections import DeriveCallDirections
from ptoc.passes.manager import input_properties, run_pipeline

CTX = CompileContext()
T = "pl.Tensor[[64], pl.FP32]"
TILE = "pl.Tile[[64], pl.FP32, pl.Mem.Vec]"
KERNEL = f"""
    @pl.function(type=pl.FunctionType.InCore)
    def kernel(self, x: {T}, out: pl.Out[{T}]) -> {T}:
        t: {TILE} = pl.tile.load(x, [0], [64], target_memory=pl.Mem.Vec)
        ret: {T} = pl.tile.store(t, [0], out)
        return ret
"""
KERNEL_AT = f"""
    @pl.function(type=pl.FunctionType.InCore)
    def kernel(self, x: {T}, off: pl.Scalar[pl.INDEX], out: pl.Out[pl.Tensor[[256], pl.FP32]]) -> pl.Tensor[[256], pl.FP32]:
        t: {TILE} = pl.tile.load(x, [0], [64], target_memory=pl.Mem.Vec)
        ret: pl.Tensor[[256], pl.FP32] = pl.tile.store(t, [off], out)
        return ret
"""


def adir(*names: str) -> str:
    return '{"arg_directions": [' + ", ".join(f"pl.adir.{n}" for n in names) + "]}"


def program(*functions: str) -> str:
    body = "\n".join(textwrap.indent(textwrap.dedent(f).strip("\n"), " " * 4) for f in functions)
    return f"@pl.program\nclass p:\n{body}\n"


def assert_derives(before: str, expected: str):
    prog = parse_program(before, "before.ir", ctx=CTX)
    out = run_pipeline(prog, CTX, passes=[DeriveCallDirections], given=input_properties(prog, CTX))
    want = parse_program(expected, "expected.ir", ctx=CTX)
    assert out == want, f"got:\n{print_program(out)}\nexpected:\n{print_program(want)}"
    assert DeriveCallDirections().run(out, CTX) is out  # every call states its directions already
    return out


def test_pypto_in_is_input_and_out_on_a_parameter_is_output_existing():
    main = """
        @pl.function
        def main(self, x: {T}, dst: {T}) -> {T}:
            r: {T} = self.kernel(x, dst{a})
            return r
    """
    assert_derives(program(KERNEL, main.format(T=T, a="")),
                   program(KERNEL, main.format(T=T, a=", attrs=" + adir("input", "output_existing"))))


def test_pypto_inout_parameter_is_inout():
    kernel = f"""
        @pl.function(type=pl.FunctionType.InCore)
        def kernel(self, x: pl.InOut[{T}]) -> {T}:
            t: {TILE} = pl.tile.load(x, [0], [64], target_memory=pl.Mem.Vec)
            ret: {T} = pl.tile.store(t, [0], x)
            return ret
    """
    main = """
        @pl.function
        def main(self, x: {T}) -> {T}:
            r: {T} = self.kernel(x{a})
            return r
    """
    assert_derives(program(kernel, main.format(T=T, a="")),
                   program(kernel, main.format(T=T, a=", attrs=" + adir("inout"))))


def test_pypto_a_second_write_of_a_local_buffer_is_inout():
    main = """
        @pl.function
        def main(self, x: {T}) -> {T}:
            buf: {T} = pl.create_tensor([64], dtype=pl.FP32)
            r1: {T} = self.kernel(x, buf{a})
            r2: {T} = self.kernel(x, r1{b})
            return r2
    """
    assert_derives(program(KERNEL, main.format(T=T, a="", b="")),
                   program(KERNEL, main.format(T=T, a=", attrs=" + adir("input", "output_existing"),
                                               b=", attrs=" + adir("input", "inout"))))


def test_pypto_sequential_loops_promote_and_a_first_write_in_a_parallel_loop_does_not():
    main = """
        @pl.function
        def main(self, x: {T}, n: pl.Scalar[pl.INDEX]) -> {T}:
            a: {T} = pl.create_tensor([64], dtype=pl.FP32)
            b: {T} = pl.create_tensor([64], dtype=pl.FP32)
            for i in pl.parallel(4):
                ra: {T} = self.kernel(x, a{p})
            for j in pl.range(4):
                rb: {T} = self.kernel(x, b{s})
            for k in pl.parallel(4):
                rc: {T} = self.kernel(x, a{q})
            return b
    """
    assert_derives(program(KERNEL, main.format(T=T, p="", s="", q="")),
                   program(KERNEL, main.format(T=T, p=", attrs=" + adir("input", "output_existing"),
                                               s=", attrs=" + adir("input", "inout"),
                                               q=", attrs=" + adir("input", "inout"))))


def test_pypto_scalar_arguments_and_an_enclosing_inout_parameter():
    main = """
        @pl.function
        def main(self, x: {T}, dst: pl.InOut[pl.Tensor[[256], pl.FP32]]) -> pl.Tensor[[256], pl.FP32]:
            r: pl.Tensor[[256], pl.FP32] = self.kernel(x, 64{a})
            return r
    """.replace("64{a}", "64, dst{a}")
    assert_derives(program(KERNEL_AT, main.format(T=T, a="")),
                   program(KERNEL_AT, main.format(T=T, a=", attrs=" + adir("input", "scalar", "inout"))))


def test_a_first_write_inside_a_branch_stays_output_existing_and_a_later_one_is_inout():
    main = """
        @pl.function
        def main(self, x: {T}, c: pl.Scalar[pl.BOOL]) -> {T}:
            buf: {T} = pl.create_tensor([64], dtype=pl.FP32)
            if c:
                r1: {T} = self.kernel(x, buf{a})
            r2: {T} = self.kernel(x, buf{b})
            return r2
    """
    assert_derives(program(KERNEL, main.format(T=T, a="", b="")),
                   program(KERNEL, main.format(T=T, a=", attrs=" + adir("input", "output_existing"),
                                               b=", attrs=" + adir("input", "inout"))))


def test_pypto_wrapper_parameters_take_the_inner_calls_directions_through_a_chain():
    wrappers = """
        @pl.function(type=pl.FunctionType.Group)
        def inner(self, x: {T}, out: {d_in}) -> {T}:
            r: {T} = self.kernel(x, out{a})
            return r
        @pl.function(type=pl.FunctionType.Group)
        def outer(self, x: {T}, out: {d_out}) -> {T}:
            r: {T} = self.inner(x, out{b})
            return r
    """
    before = wrappers.format(T=T, d_in=T, d_out=T, a="", b="")
    after = wrappers.format(T=T, d_in=f"pl.Out[{T}]", d_out=f"pl.Out[{T}]",
                            a=", attrs=" + adir("input", "output_existing"),
                            b=", attrs=" + adir("input", "output_existing"))
    assert_derives(program(KERNEL, before), program(KERNEL, after))


def test_operator_calls_and_calls_that_state_directions_are_left_alone():
    text = program(KERNEL, f"""
        @pl.function
        def main(self, x: {T}, dst: {T}) -> {T}:
            y: {T} = pl.add(x, x)
            r: {T} = self.kernel(y, dst, attrs={adir("inout", "inout")})
            return r
    """)
    prog = parse_program(text, "a.ir", ctx=CTX)
    assert DeriveCallDirections().run(prog, CTX) is prog


def test_an_override_makes_the_marked_argument_no_dep():
    main = """
        @pl.function
        def main(self, x: {T}, dst: {T}) -> {T}:
            r: {T} = self.kernel(x, dst, attrs={{{a}"arg_direction_overrides": [0]}})
            return r
    """
    assert_derives(program(KERNEL, main.format(T=T, a="")),
                   program(KERNEL, main.format(T=T, a='"arg_directions": [pl.adir.no_dep, pl.adir.output_existing], ')))


def test_a_no_dep_marker_becomes_an_override_of_the_bare_argument():
    # `pl.no_dep(x)` at a call is the marker PyPTO's parser records as `arg_direction_overrides`: the call
    # passes x itself, and x's slot is no_dep whatever the callee's parameter says (here an Out one)
    main = """
        @pl.function(type=pl.FunctionType.Orchestration)
        def main(self, x: {T}, dst: pl.Out[{T}]) -> {T}:
            r: {T} = self.kernel({args})
            return r
    """
    before = main.format(T=T, args="pl.no_dep(x), pl.no_dep(dst)")
    after = main.format(T=T, args='x, dst, attrs={"arg_directions": [pl.adir.no_dep, pl.adir.no_dep], '
                                  '"arg_direction_overrides": [0, 1]}')
    assert_derives(program(KERNEL, before), program(KERNEL, after))


def test_a_no_dep_marker_joins_the_overrides_a_call_lists_already():
    main = """
        @pl.function(type=pl.FunctionType.Orchestration)
        def main(self, x: {T}, dst: pl.Out[{T}]) -> {T}:
            r: {T} = self.kernel({args})
            return r
    """
    before = main.format(T=T, args='x, pl.no_dep(dst), attrs={"arg_direction_overrides": [0]}')
    after = main.format(T=T, args='x, dst, attrs={"arg_directions": [pl.adir.no_dep, pl.adir.no_dep], '
                                  '"arg_direction_overrides": [0, 1]}')
    assert_derives(program(KERNEL, before), program(KERNEL, after))


def test_task_launches_get_directions_and_keep_their_launch_keywords():
    # y is written first by the first launch (output_existing); the second launch writes y again (inout)
    main = """
        @pl.function(type=pl.FunctionType.Orchestration)
        def main(self, x: {T}, y: pl.Out[{T}]) -> {T}:
            with pl.manual_scope():
                o1, t1 = pl.spmd_submit(self.kernel, x, y, core_num=8, sync_start=True{a})
                o2, t2 = pl.submit(self.kernel, x, y, deps=[t1]{b})
            return y
    """
    after = main.format(T=T, a=", attrs=" + adir("input", "output_existing"), b=", attrs=" + adir("input", "inout"))
    assert_derives(program(KERNEL, main.format(T=T, a="", b="")), program(KERNEL, after))


def test_a_task_launch_that_leaves_out_a_trailing_output_gets_directions_for_what_it_passes():
    # the runtime allocates the left-out Out parameter `out`: the launch passes x only, so one direction
    main = """
        @pl.function(type=pl.FunctionType.Orchestration)
        def main(self, x: {T}) -> {T}:
            o1, t1 = pl.submit(self.kernel, x{a})
            return o1
    """
    assert_derives(program(KERNEL, main.format(T=T, a="")),
                   program(KERNEL, main.format(T=T, a=", attrs=" + adir("input"))))


def test_a_task_launch_that_leaves_out_a_leading_output_pairs_its_arguments_as_the_verifier_does():
    # fill(out: Out, x: In) launched with x alone: x binds to the In parameter (the Out one is left out)
    fill = f"""
        @pl.function(type=pl.FunctionType.InCore)
        def fill(self, out: pl.Out[{T}], x: {T}) -> {T}:
            t: {TILE} = pl.tile.load(x, [0], [64], target_memory=pl.Mem.Vec)
            ret: {T} = pl.tile.store(t, [0], out)
            return ret
    """
    main = """
        @pl.function(type=pl.FunctionType.Orchestration)
        def main(self, x: {T}) -> {T}:
            o1, t1 = pl.submit(self.fill, x{a})
            return o1
    """
    assert_derives(program(fill, main.format(T=T, a="")),
                   program(fill, main.format(T=T, a=", attrs=" + adir("input"))))


def test_a_launch_writing_the_result_of_an_earlier_launch_writes_its_buffer_again():
    # o1 is y's buffer (kernel returns its Out parameter): the second launch writes y a second time
    main = """
        @pl.function(type=pl.FunctionType.Orchestration)
        def main(self, x: {T}, y: pl.Out[{T}]) -> {T}:
            o1, t1 = pl.submit(self.kernel, x, y{a})
            o2, t2 = pl.submit(self.kernel, x, o1{b})
            return o2
    """
    assert_derives(program(KERNEL, main.format(T=T, a="", b="")),
                   program(KERNEL, main.format(T=T, a=", attrs=" + adir("input", "output_existing"),
                                               b=", attrs=" + adir("input", "inout"))))
