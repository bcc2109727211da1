"""SplitVectorKernel: a split vector kernel is rewritten for its two lanes (half tiles, lane offsets from
get_subblock_idx, dual-lane dispatch marked), an unsplit dual-dispatch kernel on a2a3 replays its pipe
hand-shakes on lane 1, everything else is left alone. Expected programs written out by hand."""

import textwrap

import pytest

from ptoc.context import CompileContext
from ptoc.diagnostics import CompileError
from ptoc.frontend.parser import parse_program
from ptoc.ir.printer import print_program
from ptoc.passes.manager import check_invariants
from ptoc.passes.SplitVectorKernel import SplitVectorKernel

A2A3 = CompileContext(arch="a2a3")
A5 = CompileContext(arch="a5")
HEAD = "import pypto.language as pl\n\n@pl.program\nclass p:\n"
SIG = "self, out: pl.Out[pl.Tensor[[16, 128], pl.FP32]]) -> pl.Tensor[[16, 128], pl.FP32]"
SETUP = """
        buf: pl.Scalar[pl.INT32] = pl.system.reserve_buffer(name="c2v", size=8192, base=-1)
        pl.system.aiv_initialize_pipe(buf, pl.const(0, pl.INT32), dir_mask=1, slot_size=4096, slot_num=2)"""


def prog(text: str) -> str:
    return HEAD + textwrap.indent(textwrap.dedent(text).strip("\n"), "    ") + "\n"


def run(text: str, ctx=A5):
    b = parse_program(prog(text), "before.ir", ctx=ctx)
    a = SplitVectorKernel().run(b, ctx)
    check_invariants(a, ctx, SplitVectorKernel())
    return b, a


def parsed(text: str, ctx=A5):
    return parse_program(prog(text), "expected.ir", ctx=ctx)


def test_an_up_down_vector_kernel_gets_half_rows_and_stores_at_its_lanes_rows():
    _, out = run(f"""
    @pl.function(type=pl.FunctionType.AIV, attrs={{"split": pl.SplitMode.UP_DOWN}})
    def k({SIG}:{SETUP}
        y: pl.Tile[[16, 128], pl.FP32, pl.Mem.Vec] = pl.tile.tpop_from_aic(split=1)
        r: pl.Tile[[16, 128], pl.FP32, pl.Mem.Vec] = pl.tile.relu(y)
        pl.system.tfree_to_aic(y)
        n: pl.Tile[[16, 128], pl.FP32, pl.Mem.Vec, pl.TileView(valid_shape=[16, 64])] = pl.tile.set_validshape(r, 16, 64)
        o: pl.Tensor[[16, 128], pl.FP32] = pl.tile.store(n, [0, 0], out)
        return o
    """)
    want = parsed(f"""
    @pl.function(type=pl.FunctionType.AIV, attrs={{"split": pl.SplitMode.UP_DOWN, "dual_aiv_dispatch": True}})
    def k({SIG}:
        subblock_idx: pl.Scalar[pl.INDEX] = pl.tile.get_subblock_idx(){SETUP}
        y: pl.Tile[[8, 128], pl.FP32, pl.Mem.Vec] = pl.tile.tpop_from_aic(split=1)
        r: pl.Tile[[8, 128], pl.FP32, pl.Mem.Vec] = pl.tile.relu(y)
        pl.system.tfree_to_aic(y)
        n: pl.Tile[[8, 128], pl.FP32, pl.Mem.Vec, pl.TileView(valid_shape=[8, 64])] = pl.tile.set_validshape(r, 8, 64)
        o: pl.Tensor[[16, 128], pl.FP32] = pl.tile.store(n, [0 + subblock_idx * 8, 0], out)
        return o
    """)
    assert out == want, print_program(out)


def test_a_left_right_kernel_halves_columns_of_its_loads_and_offsets_loads_and_stores():
    _, out = run(f"""
    @pl.function(type=pl.FunctionType.AIV)
    def k(self, a: pl.Tensor[[16, 128], pl.FP32], out: pl.Out[pl.Tensor[[16, 128], pl.FP32]]) -> pl.Tensor[[16, 128], pl.FP32]:{SETUP}
        y: pl.Tile[[16, 128], pl.FP32, pl.Mem.Vec] = pl.tile.tpop_from_aic(split=2)
        x: pl.Tile[[16, 128], pl.FP32, pl.Mem.Vec] = pl.tile.load(a, [0, 0], [16, 128], target_memory=pl.Mem.Vec)
        s: pl.Tile[[16, 128], pl.FP32, pl.Mem.Vec] = pl.tile.add(x, y)
        pl.system.tfree_to_aic(y)
        o: pl.Tensor[[16, 128], pl.FP32] = pl.tile.store(s, [0, 0], out)
        return o
    """)
    want = parsed(f"""
    @pl.function(type=pl.FunctionType.AIV, attrs={{"split": pl.SplitMode.LEFT_RIGHT, "dual_aiv_dispatch": True}})
    def k(self, a: pl.Tensor[[16, 128], pl.FP32], out: pl.Out[pl.Tensor[[16, 128], pl.FP32]]) -> pl.Tensor[[16, 128], pl.FP32]:
        subblock_idx: pl.Scalar[pl.INDEX] = pl.tile.get_subblock_idx(){SETUP}
        y: pl.Tile[[16, 64], pl.FP32, pl.Mem.Vec] = pl.tile.tpop_from_aic(split=2)
        x: pl.Tile[[16, 64], pl.FP32, pl.Mem.Vec] = pl.tile.load(a, [0, 0 + subblock_idx * 64], [16, 64], target_memory=pl.Mem.Vec)
        s: pl.Tile[[16, 64], pl.FP32, pl.Mem.Vec] = pl.tile.add(x, y)
        pl.system.tfree_to_aic(y)
        o: pl.Tensor[[16, 128], pl.FP32] = pl.tile.store(s, [0, 0 + subblock_idx * 64], out)
        return o
    """)
    assert out == want, print_program(out)


def test_the_cube_kernel_keeps_its_body_and_gets_the_split_attribute():
    text = """
    @pl.function(type=pl.FunctionType.AIC)
    def k_aic(self, a: pl.Tensor[[16, 16], pl.FP16]):
        buf: pl.Scalar[pl.INT32] = pl.system.import_peer_buffer(name="c2v", peer_func="k_aiv")
        pl.system.aic_initialize_pipe(buf, pl.const(0, pl.INT32), dir_mask=1, slot_size=512, slot_num=2)
        m: pl.Tile[[16, 16], pl.FP16, pl.Mem.Mat] = pl.tile.load(a, [0, 0], [16, 16], target_memory=pl.Mem.Mat)
        pl.tile.tpush_to_aiv(m, split=1)
    """
    b, out = run(text)
    want = parsed(text.replace("type=pl.FunctionType.AIC)", 'type=pl.FunctionType.AIC, attrs={"split": pl.SplitMode.UP_DOWN})'))
    assert out == want, print_program(out)
    assert out.functions[0].body == b.functions[0].body


def test_a_kernel_already_in_per_lane_form_only_gets_its_attributes():
    text = f"""
    @pl.function(type=pl.FunctionType.AIV, attrs={{"split": pl.SplitMode.UP_DOWN, "split_aiv": True, "dual_aiv_dispatch": False}})
    def k({SIG}:{SETUP}
        y: pl.Tile[[8, 128], pl.FP32, pl.Mem.Vec] = pl.tile.tpop_from_aic(split=1)
        pl.system.tfree_to_aic(y)
        return out
    """
    b, out = run(text)
    want = parsed(text.replace('"split": pl.SplitMode.UP_DOWN, "split_aiv": True, "dual_aiv_dispatch": False',
                               '"split_aiv": True, "split": pl.SplitMode.UP_DOWN, "dual_aiv_dispatch": True'))
    assert out == want, print_program(out)
    assert out.functions[0].body == b.functions[0].body


def test_unsplit_kernels_and_other_functions_are_the_same_objects():
    text = f"""
    @pl.function(type=pl.FunctionType.AIV)
    def k({SIG}:{SETUP}
        y: pl.Tile[[16, 128], pl.FP32, pl.Mem.Vec] = pl.tile.tpop_from_aic(split=0)
        pl.system.tfree_to_aic(y)
        return out
    """
    b, a = run(text, A2A3)
    assert a is b


def test_on_a2a3_an_unsplit_dual_dispatch_kernel_replays_its_handshakes_on_lane_1():
    _, out = run(f"""
    @pl.function(type=pl.FunctionType.AIV, attrs={{"dual_aiv_dispatch": True}})
    def k(self, a: pl.Tensor[[16, 128], pl.FP32], out: pl.Out[pl.Tensor[[16, 128], pl.FP32]]) -> pl.Tensor[[16, 128], pl.FP32]:{SETUP}
        y: pl.Tile[[16, 128], pl.FP32, pl.Mem.Vec] = pl.tile.tpop_from_aic(split=0)
        x: pl.Tile[[16, 128], pl.FP32, pl.Mem.Vec] = pl.tile.load(a, [0, 0], [16, 128], target_memory=pl.Mem.Vec)
        s: pl.Tile[[16, 128], pl.FP32, pl.Mem.Vec] = pl.tile.add(x, y)
        pl.system.tfree_to_aic(y)
        o: pl.Tensor[[16, 128], pl.FP32] = pl.tile.store(s, [0, 0], out)
        return o
    """, A2A3)
    want = parsed(f"""
    @pl.function(type=pl.FunctionType.AIV, attrs={{"dual_aiv_dispatch": True}})
    def k(self, a: pl.Tensor[[16, 128], pl.FP32], out: pl.Out[pl.Tensor[[16, 128], pl.FP32]]) -> pl.Tensor[[16, 128], pl.FP32]:
        subblock_idx: pl.Scalar[pl.INDEX] = pl.tile.get_subblock_idx(){SETUP}
        if subblock_idx == 0:
            y: pl.Tile[[16, 128], pl.FP32, pl.Mem.Vec] = pl.tile.tpop_from_aic(split=0)
            x: pl.Tile[[16, 128], pl.FP32, pl.Mem.Vec] = pl.tile.load(a, [0, 0], [16, 128], target_memory=pl.Mem.Vec)
            s: pl.Tile[[16, 128], pl.FP32, pl.Mem.Vec] = pl.tile.add(x, y)
            pl.system.tfree_to_aic(y)
            o: pl.Tensor[[16, 128], pl.FP32] = pl.tile.store(s, [0, 0], out)
            return o
        else:
            y_lane1: pl.Tile[[16, 128], pl.FP32, pl.Mem.Vec, pl.TileView(valid_shape=[0, 0])] = pl.tile.tpop_from_aic(split=0)
            x_lane1: pl.Tile[[16, 128], pl.FP32, pl.Mem.Vec, pl.TileView(valid_shape=[0, 0])] = pl.tile.create([16, 128], dtype=pl.FP32, target_memory=pl.Mem.Vec)
            s_lane1: pl.Tile[[16, 128], pl.FP32, pl.Mem.Vec, pl.TileView(valid_shape=[0, 0])] = pl.tile.add(x_lane1, y_lane1)
            pl.system.tfree_to_aic(y_lane1)
            o_lane1: pl.Tensor[[16, 128], pl.FP32] = out
            return out
    """, A2A3)
    assert out == want, print_program(out)


def test_on_a5_the_unsplit_dual_dispatch_kernel_is_left_alone():
    text = f"""
    @pl.function(type=pl.FunctionType.AIV, attrs={{"dual_aiv_dispatch": True}})
    def k({SIG}:{SETUP}
        y: pl.Tile[[16, 128], pl.FP32, pl.Mem.Vec] = pl.tile.tpop_from_aic(split=0)
        pl.system.tfree_to_aic(y)
        return out
    """
    b, a = run(text, A5)
    assert a is b


def test_pipe_ops_of_different_split_modes_in_one_kernel_are_an_error():
    text = f"""
    @pl.function(type=pl.FunctionType.AIV)
    def k({SIG}:{SETUP}
        y: pl.Tile[[16, 128], pl.FP32, pl.Mem.Vec] = pl.tile.tpop_from_aic(split=1)
        pl.system.tfree_to_aic(y)
        z: pl.Tile[[16, 128], pl.FP32, pl.Mem.Vec] = pl.tile.tpop_from_aic(split=2)
        pl.system.tfree_to_aic(z)
        return out
    """
    with pytest.raises(CompileError) as e:
        run(text)
    assert [d.code for d in e.value.diagnostics] == ["PTOC-E0680"]
    assert "different split modes" in e.value.diagnostics[0].message


def test_a_split_attribute_contradicting_the_pipe_ops_is_an_error():
    text = f"""
    @pl.function(type=pl.FunctionType.AIV, attrs={{"split": pl.SplitMode.LEFT_RIGHT}})
    def k({SIG}:{SETUP}
        y: pl.Tile[[16, 128], pl.FP32, pl.Mem.Vec] = pl.tile.tpop_from_aic(split=1)
        pl.system.tfree_to_aic(y)
        return out
    """
    with pytest.raises(CompileError) as e:
        run(text)
    assert [d.code for d in e.value.diagnostics] == ["PTOC-E0680"]


REPLAY_SIG = ("self, a: pl.Tensor[[16, 64], pl.FP32], out: pl.Out[pl.Tensor[[16, 128], pl.FP32]]) "
              "-> pl.Tensor[[16, 128], pl.FP32]")
REPLAY_BODY = """
    w: pl.Tile[[16, 64], pl.FP32, pl.Mem.Vec] = pl.tile.load(a, [0, 0], [16, 64], target_memory=pl.Mem.Vec)
    for n, (o,) in pl.range(2, init_values=(out,)):
        y: pl.Tile[[16, 64], pl.FP32, pl.Mem.Vec] = pl.tile.tpop_from_aic(split=0)
        h: pl.Tile[[16, 32], pl.FP32, pl.Mem.Vec] = pl.tile.slice(y, [16, 32], [0, 0])
        t: pl.Tile[[16, 64], pl.FP32, pl.Mem.Vec] = pl.tile.create([16, 64], dtype=pl.FP32, target_memory=pl.Mem.Vec)
        m: pl.Tile[[16, 1], pl.FP32, pl.Mem.Vec] = pl.tile.row_max(y, t)
        e: pl.Tile[[16, 64], pl.FP32, pl.Mem.Vec] = pl.tile.row_expand_sub(y, m)
        tt: pl.Tile[[64, 16], pl.FP32, pl.Mem.Vec] = pl.tile.transpose(y, 0, 1)
        v: pl.Tile[[16, 64], pl.FP32, pl.Mem.Vec, pl.TileView(valid_shape=[8, 64])] = pl.tile.set_validshape(e, 8, 64)
        pl.system.tfree_to_aic(y)
        pl.tile.store(v, [0, 0], a)
        s: pl.Tile[[16, 64], pl.FP32, pl.Mem.Vec] = pl.tile.add(e, w)
        o2: pl.Tensor[[16, 128], pl.FP32] = pl.tile.store(s, [0, n * 64], o)
        r: pl.Tensor[[16, 128], pl.FP32] = pl.yield_(o2)
    return r"""


def test_the_lane_1_replay_computes_on_empty_tiles_and_writes_nothing():
    # PyPTO's replay: after the pipe set-up (shared by both lanes), lane 0 runs the body and lane 1 runs it
    # again with every tile result empty (valid shape [0, 0]); what reads memory or only views a tile (load,
    # slice, transpose) becomes a create of the result's shape, set_validshape sets zero extents, a store
    # is dropped (its result is the tensor it would have written), a loop keeps its pipe hand-shakes.
    _, out = run(f"""
    @pl.function(type=pl.FunctionType.AIV, attrs={{"dual_aiv_dispatch": True}})
    def k({REPLAY_SIG}:{SETUP}{textwrap.indent(REPLAY_BODY, "    ")}
    """, A2A3)
    empty = "pl.TileView(valid_shape=[0, 0])"
    want = parsed(f"""
    @pl.function(type=pl.FunctionType.AIV, attrs={{"dual_aiv_dispatch": True}})
    def k({REPLAY_SIG}:
        subblock_idx: pl.Scalar[pl.INDEX] = pl.tile.get_subblock_idx(){SETUP}
        if subblock_idx == 0:{textwrap.indent(REPLAY_BODY, "        ")}
        else:
            w_lane1: pl.Tile[[16, 64], pl.FP32, pl.Mem.Vec, {empty}] = pl.tile.create([16, 64], dtype=pl.FP32, target_memory=pl.Mem.Vec)
            for n_lane1, (o_lane1,) in pl.range(2, init_values=(out,)):
                y_lane1: pl.Tile[[16, 64], pl.FP32, pl.Mem.Vec, {empty}] = pl.tile.tpop_from_aic(split=0)
                h_lane1: pl.Tile[[16, 32], pl.FP32, pl.Mem.Vec, {empty}] = pl.tile.create([16, 32], dtype=pl.FP32, target_memory=pl.Mem.Vec)
                t_lane1: pl.Tile[[16, 64], pl.FP32, pl.Mem.Vec, {empty}] = pl.tile.create([16, 64], dtype=pl.FP32, target_memory=pl.Mem.Vec)
                m_lane1: pl.Tile[[16, 1], pl.FP32, pl.Mem.Vec, {empty}] = pl.tile.row_max(y_lane1, t_lane1)
                e_lane1: pl.Tile[[16, 64], pl.FP32, pl.Mem.Vec, {empty}] = pl.tile.row_expand_sub(y_lane1, m_lane1)
                tt_lane1: pl.Tile[[64, 16], pl.FP32, pl.Mem.Vec, {empty}] = pl.tile.create([64, 16], dtype=pl.FP32, target_memory=pl.Mem.Vec)
                v_lane1: pl.Tile[[16, 64], pl.FP32, pl.Mem.Vec, {empty}] = pl.tile.set_validshape(e_lane1, 0, 0)
                pl.system.tfree_to_aic(y_lane1)
                s_lane1: pl.Tile[[16, 64], pl.FP32, pl.Mem.Vec, {empty}] = pl.tile.add(e_lane1, w_lane1)
                o2_lane1: pl.Tensor[[16, 128], pl.FP32] = o_lane1
                r_lane1: pl.Tensor[[16, 128], pl.FP32] = pl.yield_(o_lane1)
            return r_lane1
    """, A2A3)
    assert out == want, print_program(out)
