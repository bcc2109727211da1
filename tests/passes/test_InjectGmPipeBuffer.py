"""InjectGmPipeBuffer: on a2a3 the kernels that initialise a cross-core pipe, and every non-orchestration
caller up to the orchestration, get the `__gm_pipe_buffer` Out parameter; the orchestration creates one
buffer per call. On a5 nothing changes. Expected programs written out by hand."""

import textwrap

from ptoc.context import CompileContext
from ptoc.frontend.parser import parse_program
from ptoc.ir.printer import print_program
from ptoc.passes.InjectGmPipeBuffer import InjectGmPipeBuffer
from ptoc.passes.manager import check_invariants

A2A3 = CompileContext(arch="a2a3")
A5 = CompileContext(arch="a5")
HEAD = "import pypto.language as pl\n\n@pl.program\nclass p:\n"
GM = "__gm_pipe_buffer: pl.Out[pl.Tensor[[1], pl.FP32]]"
CREATE = "pl.tensor.create([1], dtype=pl.FP32, layout=pl.TensorLayout.ND, manual_dep=True)"


def prog(text: str) -> str:
    return HEAD + textwrap.indent(textwrap.dedent(text).strip("\n"), "    ") + "\n"


def members(gm: str = "") -> str:
    sep = ", " if gm else ""
    return f"""
    @pl.function(type=pl.FunctionType.AIC)
    def k_aic(self, a: pl.Tensor[[16, 16], pl.FP16], out: pl.Out[pl.Tensor[[16, 16], pl.FP16]]{sep}{gm}):
        buf: pl.Scalar[pl.INT32] = pl.system.reserve_buffer(name="k_v2c", size=4096, base=-1)
        pl.system.aic_initialize_pipe(pl.const(0, pl.INT32), buf, dir_mask=2, slot_size=512, slot_num=8)
        t: pl.Tile[[16, 16], pl.FP16, pl.Mem.Mat] = pl.tile.tpop_from_aiv(split=0)
        pl.system.tfree_to_aiv(t)
    @pl.function(type=pl.FunctionType.AIV)
    def k_aiv(self, a: pl.Tensor[[16, 16], pl.FP16], out: pl.Out[pl.Tensor[[16, 16], pl.FP16]]{sep}{gm}):
        peer: pl.Scalar[pl.INT32] = pl.system.import_peer_buffer(name="k_v2c", peer_func="k_aic")
        pl.system.aiv_initialize_pipe(pl.const(0, pl.INT32), peer, dir_mask=2, slot_size=512, slot_num=8)
        v: pl.Tile[[16, 16], pl.FP16, pl.Mem.Vec] = pl.tile.load(a, [0, 0], [16, 16], target_memory=pl.Mem.Vec)
        pl.tile.tpush_to_aic(v, split=0)
"""


def before() -> str:
    return members() + """
    @pl.function(type=pl.FunctionType.Group)
    def k(self, a: pl.Tensor[[16, 16], pl.FP16], out: pl.Out[pl.Tensor[[16, 16], pl.FP16]]):
        self.k_aic(a, out)
        self.k_aiv(a, out)
    @pl.function(type=pl.FunctionType.Orchestration)
    def main(self, a: pl.Tensor[[16, 16], pl.FP16], out: pl.Out[pl.Tensor[[16, 16], pl.FP16]]):
        self.k(a, out)
        for i in pl.range(2):
            self.k(a, out)
"""


def run(text: str, ctx):
    b = parse_program(prog(text), "before.ir", ctx=ctx)
    a = InjectGmPipeBuffer().run(b, ctx)
    check_invariants(a, ctx, InjectGmPipeBuffer())
    return b, a


def test_a2a3_threads_the_buffer_from_each_orchestration_call_to_both_kernels():
    _, out = run(before(), A2A3)
    want = parse_program(prog(members(GM) + f"""
    @pl.function(type=pl.FunctionType.Group)
    def k(self, a: pl.Tensor[[16, 16], pl.FP16], out: pl.Out[pl.Tensor[[16, 16], pl.FP16]], {GM}):
        self.k_aic(a, out, __gm_pipe_buffer)
        self.k_aiv(a, out, __gm_pipe_buffer)
    @pl.function(type=pl.FunctionType.Orchestration)
    def main(self, a: pl.Tensor[[16, 16], pl.FP16], out: pl.Out[pl.Tensor[[16, 16], pl.FP16]]):
        gm_pipe_buffer_0: pl.Tensor[[1], pl.FP32] = {CREATE}
        self.k(a, out, gm_pipe_buffer_0)
        for i in pl.range(2):
            gm_pipe_buffer_1: pl.Tensor[[1], pl.FP32] = {CREATE}
            self.k(a, out, gm_pipe_buffer_1)
    """), "expected.ir", ctx=A2A3)
    assert out == want, print_program(out)


def test_a5_has_a_direct_path_and_is_left_alone():
    b, a = run(before(), A5)
    assert a is b


def test_a_function_that_already_has_the_parameter_keeps_it():
    text = members(GM)
    _, out = run(text, A2A3)
    assert [p.name for p in out.function("k_aic").params] == ["a", "out", "__gm_pipe_buffer"]


def test_a2a3_a_task_launch_of_the_group_gets_its_own_buffer_too():
    launch = """
    @pl.function(type=pl.FunctionType.Group)
    def k(self, a: pl.Tensor[[16, 16], pl.FP16], out: pl.Out[pl.Tensor[[16, 16], pl.FP16]]{gm}):
        self.k_aic(a, out{fwd})
        self.k_aiv(a, out{fwd})
    @pl.function(type=pl.FunctionType.Orchestration)
    def main(self, a: pl.Tensor[[16, 16], pl.FP16], out: pl.Out[pl.Tensor[[16, 16], pl.FP16]]):
        with pl.manual_scope():{create}
            tid = pl.submit(self.k, a, out{arg})
    """
    _, out = run(members() + launch.format(gm="", fwd="", create="", arg=""), A2A3)
    want = parse_program(prog(members(GM) + launch.format(
        gm=", " + GM, fwd=", __gm_pipe_buffer", arg=", gm_pipe_buffer_0",
        create=f"\n            gm_pipe_buffer_0: pl.Tensor[[1], pl.FP32] = {CREATE}")), "expected.ir", ctx=A2A3)
    assert out == want, print_program(out)
