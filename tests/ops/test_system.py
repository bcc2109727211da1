"""Synchronisation and cross-core transfer ops: carried through, checked for arity only."""

import pytest
from optest import codes, diagnostics, types

from ptoc.ops.registry import lookup

NO_ARG = ["system.bar_v", "system.bar_m", "system.bar_all", "system.fence", "system.sync_src", "system.sync_dst",
          "system.syncall", "system.reserve_buffer", "system.import_peer_buffer"]
PIPE_INIT = ["system.aic_initialize_pipe", "system.aiv_initialize_pipe"]
TILE_ARG = ["tile.tpush_to_aiv", "tile.tpush_to_aic", "system.tfree_to_aic", "system.tfree_to_aiv"]
POPS = ["tile.tpop_from_aic", "tile.tpop_from_aiv"]
TILE = "x: pl.Tensor[[16, 64], pl.FP32]"
LOAD = "t = pl.tile.load(x, [0, 0], [16, 64])\n"


@pytest.mark.parametrize("op", NO_ARG + PIPE_INIT + TILE_ARG + POPS + ["system.sync_set", "system.sync_wait", "system.set_ffts",
                                                          "system.cacheinvalid"])
def test_sync_ops_are_registered_as_sync_unit_with_open_kwargs(op):
    d = lookup(op)
    assert d is not None and d.unit == "sync" and d.open_kwargs and d.family == "system"


@pytest.mark.parametrize("op", NO_ARG)
def test_no_argument_ops_accept_any_attributes(op):
    assert codes("", f"pl.{op}()\npl.{op}(set_pipe=2, wait_pipe=4, event_id=0)") == []


@pytest.mark.parametrize("op", NO_ARG)
def test_no_argument_ops_reject_a_positional_argument(op):
    assert codes("n: pl.Scalar[pl.INDEX]", f"pl.{op}(n)") == [("PTOC-E0201", None)]


@pytest.mark.parametrize("op", PIPE_INIT)
def test_pipe_init_takes_a_reserved_buffer_and_needs_its_geometry(op):
    body = 'buf = pl.system.reserve_buffer(name="c2v", size=4096, base=-1)\n'
    assert codes("", body + f"pl.{op}(buf, 0, dir_mask=1, slot_size=512, slot_num=8)") == []
    assert codes("", body + f"pl.{op}(buf, 0, 0)") == [("PTOC-E0201", None)]


def test_bar_v_has_no_result():
    assert types("", "r = pl.system.bar_v()")["r"] is None


@pytest.mark.parametrize("short", ["tpush_to_aiv", "tpush_to_aic", "tfree_to_aic", "tfree_to_aiv"])
def test_push_and_free_take_one_tile(short):
    assert codes(TILE, LOAD + f"pl.{short}(t, split=1, id=0)") == []


@pytest.mark.parametrize("op", TILE_ARG)
def test_push_and_free_full_names_reject_missing_or_extra_arguments(op):
    assert codes(TILE, LOAD + f"pl.{op}()") == [("PTOC-E0201", None)]
    assert codes(TILE, LOAD + f"pl.{op}(t, t)") == [("PTOC-E0201", None)]


def test_push_rejects_a_tensor():
    d = diagnostics(TILE, "pl.tile.tpush_to_aic(x, split=0)")
    assert d[0].code == "PTOC-E0202" and "must be a tile" in d[0].message


def test_pop_short_names_take_the_annotated_tile_type():
    body = ("h: pl.Tile[[8, 64], pl.FP32, pl.Mem.Vec] = pl.tpop_from_aic(split=1)\n"
            "m: pl.Tile[[16, 64], pl.BF16, pl.Mem.Mat] = pl.tpop_from_aiv(split=0)\n"
            "r = pl.tile.relu(h)\npl.tfree_to_aic(h)\npl.tfree_to_aiv(m)")
    assert types("", body)["r"] == "pl.Tile[[8, 64], pl.FP32, pl.Mem.Vec]"


@pytest.mark.parametrize("op", POPS)
def test_pop_rejects_positional_arguments(op):
    assert codes(TILE, LOAD + f"p: pl.Tile[[16, 64], pl.FP32, pl.Mem.Vec] = pl.{op}(t)") == [("PTOC-E0201", None)]


def test_sync_set_and_wait_take_an_event_id():
    assert codes("", "pl.system.sync_set(3, pipe=pl.PipeType.V)\npl.system.sync_wait(3, pipe=pl.PipeType.V)") == []
    assert codes("", "pl.system.sync_set(pipe=pl.PipeType.V)") == [("PTOC-E0201", None)]


def test_set_ffts_takes_a_tensor():
    assert codes("w: pl.Tensor[[16], pl.INT32]", "pl.system.set_ffts(w)") == []
    assert codes("", "pl.system.set_ffts()") == [("PTOC-E0201", None)]


def test_cacheinvalid_whole_and_region_forms():
    assert codes("w: pl.Tensor[[16, 16], pl.INT32]", "pl.system.cacheinvalid()\npl.system.cacheinvalid(w, [1, 16], [0, 0])") == []
    assert codes("w: pl.Tensor[[16, 16], pl.INT32]", "pl.system.cacheinvalid(w, [1, 16], [0, 0], 0)") == [
        ("PTOC-E0201", None)]


def test_pipe_setup_short_names():
    body = ('buf = pl.reserve_buffer(name="c2v", size=4096, base=4096)\n'
            "pl.aiv_initialize_pipe(dir_mask=1, slot_size=512, c2v_consumer_buf=buf)")
    assert codes("", body) == []


@pytest.mark.parametrize("op", PIPE_INIT)
def test_pipe_init_takes_the_two_consumer_buffers_positionally(op):
    # PyPTO's signature: (c2v_consumer_buf=0, v2c_consumer_buf=0, *, dir_mask, slot_size, slot_num=None,
    # local_slot_num=None, id=None); the buffers are the op's arguments, the rest its attributes
    head = "b: pl.Scalar[pl.INT32]"
    assert codes(head, f"pl.{op}(pl.const(0, pl.INT32), b, dir_mask=2, slot_size=512)") == []
    assert codes(head, f"pl.{op}(b, dir_mask=1, slot_size=512, slot_num=4, id=1)") == []
    assert codes(head, f"pl.{op}(dir_mask=1, slot_size=512, v2c_consumer_buf=b)") == []
    assert codes(head, f"pl.{op}(b, b, b, dir_mask=1, slot_size=512)") == [("PTOC-E0201", None)]


@pytest.mark.parametrize("op", PIPE_INIT + ["aic_initialize_pipe", "aiv_initialize_pipe"])
def test_pipe_init_is_read_and_printed_with_both_buffers_positional(op):
    # PyPTO's builder makes the two buffer bases the op's arguments whatever way they are written (a buffer
    # left out is 0, a number an INT32 constant) and its printer writes them positionally: ptoc reads every
    # spelling as that one call, so a dump shows what PyPTO's dump shows
    from ptoc.context import CompileContext
    from ptoc.frontend.parser import parse_program
    from ptoc.ir.printer import print_program

    def pipe_call(line: str):
        text = ("@pl.program\nclass p:\n    @pl.function(type=pl.FunctionType.AIV)\n    def k(self):\n"
                '        b = pl.reserve_buffer(name="c2v", size=4096, base=4096)\n        ' + line + "\n")
        prog = parse_program(text, "a.ir", ctx=CompileContext())
        return prog, prog.functions[0].body[1].expr

    printed = f"pl.{op}(pl.const(0, pl.INT32), b, dir_mask=2, slot_size=512)"
    want_prog, want = pipe_call(printed)
    for spelling in (f"pl.{op}(dir_mask=2, slot_size=512, v2c_consumer_buf=b)",
                     f"pl.{op}(0, v2c_consumer_buf=b, dir_mask=2, slot_size=512)",
                     f"pl.{op}(0, b, dir_mask=2, slot_size=512)"):
        _, got = pipe_call(spelling)
        assert got == want, spelling
    assert printed in print_program(want_prog)


@pytest.mark.parametrize("op", PIPE_INIT)
def test_pipe_init_needs_dir_mask_and_slot_size(op):
    assert codes("", f"pl.{op}(slot_size=512)") == [("PTOC-E0201", None)]
    assert codes("", f"pl.{op}(dir_mask=1)") == [("PTOC-E0201", None)]


def test_pipe_init_buffer_is_an_integer_address():
    d = diagnostics("x: pl.Tensor[[16, 64], pl.FP32]", "pl.system.aic_initialize_pipe(x, dir_mask=1, slot_size=512)")
    assert d[0].code == "PTOC-E0202" and "integer scalar" in d[0].message


def test_split_descriptor_in_scope_optimizations():
    body = ("with pl.at(level=pl.Level.CORE_GROUP, optimizations=[pl.split(pl.SplitMode.UP_DOWN)]):\n"
            "    pl.system.bar_v()")
    assert codes("", body) == []
    assert codes("", "s = pl.split()") == [("PTOC-E0201", None)]
