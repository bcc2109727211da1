"""Forms of the PyPTO language the front end accepts beyond the printed IR: `tuple[...]` annotations,
declared allocations `pl.MemRef("buf")`, slicing sugar (`t[a:b, c:d]`, `dst[a:b] = src`), one-element
tuple targets of `pl.yield_`, and the one spelling per op the front end hands to the passes.

Expected results come from PyPTO's language definition (python/pypto/language: the parser's
`_parse_subscript_assignment`, `resolve_memref`, `_resolve_tuple_type`; the `pl.*` re-exports in
`op/__init__.py`), written out by hand here.
"""

from __future__ import annotations

import textwrap

import pytest

from ptoc.context import CompileContext
from ptoc.diagnostics import CompileError
from ptoc.ir.dtypes import INDEX
from ptoc.driver import frontend, lower
from ptoc.frontend.parser import parse_program
from ptoc.ir.nodes import AssignStmt, Call, ConstInt, ListExpr, MemRef, StrLit, TupleType, Var, YieldStmt
from ptoc.ir.printer import print_program
from ptoc.ir.verifier import function_types
from ptoc.ir.visitor import walk

CTX = CompileContext(arch="a2a3")


def prog(body: str, params: str = "self, x: pl.Tensor[[64, 64], pl.FP32]", ret: str = "",
         ftype: str = "InCore") -> str:
    body = textwrap.indent(textwrap.dedent(body).strip("\n"), "        ")
    return ("import pypto.language as pl\n\n@pl.program\nclass p:\n"
            f"    @pl.function(type=pl.FunctionType.{ftype})\n    def k({params}){ret}:\n{body}\n")


def codes_of(text: str) -> list[tuple[str, int]]:
    try:
        parse_program(text, "t.ir", ctx=CTX)
    except CompileError as e:
        return [(d.code, d.span.line) for d in e.diagnostics]
    return []


def roundtrips(text: str) -> None:
    """The printed program parses back to the same IR (and prints the same again)."""
    p1 = parse_program(text, "t.ir", ctx=CTX)
    printed = print_program(p1)
    p2 = parse_program(printed, "t.ir", ctx=CTX)
    assert p2 == p1 and print_program(p2) == printed


# ------------------------------------------------------------------ tuple[...] on locals

TWO = "pl.Tensor[[16], pl.FP32]"
TUPLE_PROG = f"""\
import pypto.language as pl

@pl.program
class p:
    @pl.function(type=pl.FunctionType.InCore)
    def kernel(self, x: {TWO}, a: pl.Out[{TWO}], b: pl.Out[{TWO}]) -> tuple[{TWO}, {TWO}]:
        return a, b

    @pl.function(type=pl.FunctionType.Orchestration)
    def main(self, x: {TWO}, a: pl.Out[{TWO}], b: pl.Out[{TWO}]) -> {TWO}:
        ret: tuple[{TWO}, {TWO}] = self.kernel(x, a, b)
        first = ret[0]
        return first
"""


def test_tuple_annotation_on_a_local_is_a_tuple_type():
    t = function_types(parse_program(TUPLE_PROG, "t.ir", ctx=CTX), CTX)["main"]
    assert isinstance(t["ret"], TupleType) and len(t["ret"].types) == 2
    assert [d.value for d in t["first"].shape] == [16]
    roundtrips(TUPLE_PROG)


def test_tuple_annotation_of_the_wrong_arity_is_rejected():
    bad = TUPLE_PROG.replace(f"ret: tuple[{TWO}, {TWO}]", f"ret: tuple[{TWO}, {TWO}, {TWO}]")
    assert codes_of(bad) == [("PTOC-E0105", 11)]


# ------------------------------------------------------------------ declared allocations

def _memrefs(text: str) -> list[MemRef]:
    return [n for n in walk(parse_program(text, "t.ir", ctx=CTX)) if isinstance(n, MemRef)]


def test_declared_allocation_by_name_and_by_slot():
    text = prog("""\
        t: pl.Tile[[64, 64], pl.FP32, pl.MemRef("ping"), pl.Mem.Vec] = pl.tile.load(x, [0, 0], [64, 64])
        u: pl.Tile[[64, 64], pl.FP32, pl.MemRef("pp", slots=2)[1], pl.Mem.Vec] = pl.tile.load(x, [0, 0], [64, 64])
    """)
    a, b = _memrefs(text)
    assert (a.declared, a.base, a.slots, a.slot) == (True, StrLit("ping"), 1, None)
    assert (b.declared, b.base, b.slots, b.slot) == (True, StrLit("pp"), 2, ConstInt(1, INDEX))
    printed = print_program(parse_program(text, "t.ir", ctx=CTX))
    assert 'pl.MemRef("ping"), pl.Mem.Vec]' in printed and 'pl.MemRef("pp", slots=2)[1], pl.Mem.Vec]' in printed
    roundtrips(text)


def test_declared_allocation_slot_may_be_a_loop_index():
    text = prog("""\
        for i in pl.range(4):
            t: pl.Tile[[64, 64], pl.FP32, pl.MemRef("buf", slots=2)[i % 2], pl.Mem.Vec] = pl.tile.load(x, [0, 0], [64, 64])
    """)
    (m,) = _memrefs(text)
    assert m.slots == 2 and m.slot is not None and not isinstance(m.slot, ConstInt)
    roundtrips(text)


@pytest.mark.parametrize("memref, line", [
    ('pl.MemRef("buf", slots=2)[2]', 7),   # slot out of range
    ('pl.MemRef("buf")[0]', 7),            # a one-slot allocation has no slots to select
    ('pl.MemRef("")', 7),                  # empty name
    ('pl.MemRef("buf", slots=0)', 7),      # slots must be positive
])
def test_malformed_declared_allocations(memref, line):
    text = prog(f't: pl.Tile[[64, 64], pl.FP32, {memref}, pl.Mem.Vec] = pl.tile.load(x, [0, 0], [64, 64])')
    assert codes_of(text) == [("PTOC-E0140", line)]


def test_declarations_of_one_allocation_must_agree_on_slots():
    text = prog("""\
        t: pl.Tile[[64, 64], pl.FP32, pl.MemRef("buf"), pl.Mem.Vec] = pl.tile.load(x, [0, 0], [64, 64])
        u: pl.Tile[[64, 64], pl.FP32, pl.MemRef("buf", slots=2)[1], pl.Mem.Vec] = pl.tile.load(x, [0, 0], [64, 64])
    """)
    assert codes_of(text) == [("PTOC-E0140", 8)]


def test_memory_planning_refuses_a_declared_allocation_rather_than_ignoring_it():
    text = prog("""\
        t: pl.Tile[[64, 64], pl.FP32, pl.MemRef("buf"), pl.Mem.Vec] = pl.tile.load(x, [0, 0], [64, 64])
        r: pl.Tensor[[64, 64], pl.FP32] = pl.tile.store(t, [0, 0], o)
        return r
    """, params="self, x: pl.Tensor[[64, 64], pl.FP32], o: pl.Out[pl.Tensor[[64, 64], pl.FP32]]",
        ret=" -> pl.Tensor[[64, 64], pl.FP32]")
    with pytest.raises(CompileError) as e:
        lower(frontend(text, "t.ir", CTX), CTX)
    assert [(d.code, d.span.line) for d in e.value.diagnostics] == [("PTOC-E0141", 7)]


# ------------------------------------------------------------------ slicing sugar

def _stmt(text: str, i: int = 0):
    return parse_program(text, "t.ir", ctx=CTX).functions[0].body[i]


def test_slice_read_is_pl_slice_with_extents_and_offsets():
    # t[16:48, 0:32] reads the [32, 32] window at [16, 0]
    text = prog("w = x[16:48, 0:32]\nv = x[:8, 8:16]")
    w = _stmt(text, 0).value
    assert isinstance(w, Call) and w.op == "slice"
    assert w.args[1] == ListExpr((ConstInt(32, INDEX), ConstInt(32, INDEX))) and w.args[2] == ListExpr((ConstInt(16, INDEX), ConstInt(0, INDEX)))
    v = _stmt(text, 1).value
    assert v.args[1] == ListExpr((ConstInt(8, INDEX), ConstInt(8, INDEX))) and v.args[2] == ListExpr((ConstInt(0, INDEX), ConstInt(8, INDEX)))
    t = function_types(parse_program(text, "t.ir", ctx=CTX), CTX)["k"]
    assert [d.value for d in t["w"].shape] == [32, 32] and [d.value for d in t["v"].shape] == [8, 8]
    roundtrips(text)


def test_slice_read_of_a_tile_is_a_tile_slice():
    text = prog("t = pl.tile.load(x, [0, 0], [64, 64])\nw = t[0:16, 0:32]")
    t = function_types(parse_program(text, "t.ir", ctx=CTX), CTX)["k"]
    assert type(t["w"]).__name__ == "TileType" and [d.value for d in t["w"].shape] == [16, 32]


def test_slice_with_a_dynamic_bound():
    text = prog("w = x[r:r + 16, 0:64]", params="self, x: pl.Tensor[[64, 64], pl.FP32], r: pl.Scalar[pl.INDEX]")
    w = _stmt(text).value
    assert w.args[2].items[0] == Var("r")
    t = function_types(parse_program(text, "t.ir", ctx=CTX), CTX)["k"]
    assert [d.value for d in t["w"].shape] == [16, 64]


@pytest.mark.parametrize("sub", ["x[0:16, 3]", "x[0:16, 8:]"])
def test_slice_forms_not_supported_say_so(sub):
    assert codes_of(prog(f"w = {sub}")) == [("PTOC-E0142", 7)]


def test_subscript_write_is_assemble_into_the_same_name():
    # PyPTO: `dst[a:b, c:d] = src` is `dst = pl.assemble(dst, src, [a, c])`
    text = prog("""\
        s = pl.tensor.create([16, 32], dtype=pl.FP32)
        x[16:32, 32:64] = s
        return x
    """, ret=" -> pl.Tensor[[64, 64], pl.FP32]", ftype="Orchestration")
    st = _stmt(text, 1)
    assert isinstance(st, AssignStmt) and st.target == Var("x")
    assert st.value.op == "assemble" and st.value.args[0] == Var("x") and st.value.args[1] == Var("s")
    assert st.value.args[2] == ListExpr((ConstInt(16, INDEX), ConstInt(32, INDEX)))
    roundtrips(text)


def test_subscript_write_of_a_window_too_small_is_rejected():
    text = prog("""\
        s = pl.tensor.create([16, 32], dtype=pl.FP32)
        x[56:64, 0:32] = s
        return x
    """, ret=" -> pl.Tensor[[64, 64], pl.FP32]", ftype="Orchestration")
    assert [c for c, _ in codes_of(text)] == ["PTOC-E0202"]


# ------------------------------------------------------------------ one-element yield targets

def test_parenthesised_one_element_target_of_a_yield():
    text = prog("""\
        t = pl.tile.load(x, [0, 0], [64, 64])
        for i, (acc,) in pl.range(4, init_values=(t,)):
            nxt = pl.tile.add(acc, acc)
            (out,) = pl.yield_(nxt)
    """)
    loop = _stmt(text, 1)
    y = loop.body[-1]
    assert isinstance(y, YieldStmt) and y.targets == (Var("out"),)
    roundtrips(text)


# ------------------------------------------------------------------ short names

def test_pl_full_is_the_tensor_op():
    # PyPTO re-exports tensor_ops.full as pl.full (there is no operand to dispatch on)
    text = prog("f = pl.full([16, 16], dtype=pl.FP32, value=0.0)")
    t = function_types(parse_program(text, "t.ir", ctx=CTX), CTX)["k"]
    assert type(t["f"]).__name__ == "TensorType"


RANK3 = prog("""\
    t = pl.load(x, [0, 0, 0], [2, 16, 64])
    u = pl.add(t, t)
    r = pl.store(u, [0, 0, 0], o)
    return r
""", params="self, x: pl.Tensor[[2, 16, 64], pl.FP32], o: pl.Out[pl.Tensor[[2, 16, 64], pl.FP32]]",
    ret=" -> pl.Tensor[[2, 16, 64], pl.FP32]")


def test_front_end_gives_the_passes_full_op_names():
    ops = [n.op for n in walk(frontend(RANK3, "t.ir", CTX)) if isinstance(n, Call)]
    assert ops == ["tile.load", "tile.add", "tile.store"]
    # the program as written still prints as written
    assert "pl.load(x, [0, 0, 0], [2, 16, 64])" in print_program(parse_program(RANK3, "t.ir", ctx=CTX))


def test_short_load_on_a_rank3_tile_is_flattened_like_the_full_name():
    # issue 12: pl.load on a rank-3 tile failed in FlattenTileNdTo2D while pl.tile.load worked
    def flat_types(text):
        low = lower(frontend(text, "t.ir", CTX), CTX, stop_after="FlattenTileNdTo2D")
        return {k: [d.value for d in v.shape] for k, v in low.function_types(CTX)["k"].items()
                if type(v).__name__ == "TileType"}

    full = RANK3.replace("pl.load(", "pl.tile.load(").replace("pl.add(", "pl.tile.add(").replace(
        "pl.store(", "pl.tile.store(")
    assert flat_types(RANK3) == flat_types(full) == {"t": [32, 64], "u": [32, 64]}


def test_short_store_of_a_rank1_tile_compiles(tmp_path):
    # pl.store on a rank-1 tile becomes tile.store; FlattenTileNdTo2D gives it the window [64] of the
    # rank-1 tensor (the [1, 64] tile alone would make a 2-size partition of a rank-1 tensor)
    import subprocess
    import sys
    from pathlib import Path

    text = prog("""\
        a = pl.load(x, [0], [64])
        b = pl.add(a, a)
        r = pl.store(b, [0], o)
        return r
    """, params="self, x: pl.Tensor[[64], pl.FP32], o: pl.Out[pl.Tensor[[64], pl.FP32]]",
        ret=" -> pl.Tensor[[64], pl.FP32]")
    f = tmp_path / "k.ir"
    f.write_text(text)
    ptoc = Path(sys.executable).parent / "ptoc"
    p = subprocess.run([str(ptoc), "compile", str(f), "-o", str(tmp_path / "k.pto")], capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stderr
    pto = (tmp_path / "k.pto").read_text()
    assert "pto.tstore" in pto and "sizes = [%c64_index]" in pto
    # and every stage computes what the program as written computes (reference interpreter and the
    # executor of the emitted .pto)
    v = subprocess.run([str(ptoc), "passes", str(f), "--validate"], capture_output=True, text=True, timeout=300)
    assert v.returncode == 0 and "every stage agrees with the front end" in v.stdout, v.stdout + v.stderr


# ------------------------------------------------------------------ MX scale layouts

def test_mx_scale_layouts_parse_print_and_are_refused_at_codegen(tmp_path):
    # PyPTO's TensorLayout has MX_A_ZZ and MX_B_NN (packed MX scale tensors), exported as pl.MX_A_ZZ / pl.MX_B_NN
    text = prog("""\
        t = pl.tile.load(a_s, [0, 0], [16, 2], target_memory=pl.Mem.Mat)
        return o
    """, params="self, a_s: pl.Tensor[[16, 2], pl.FP8E8M0, pl.MX_A_ZZ], "
                "b_s: pl.Tensor[[2, 32], pl.FP8E8M0, pl.TensorView(layout=pl.TensorLayout.MX_B_NN)], "
                "o: pl.Out[pl.Tensor[[16, 32], pl.FP32]]", ret=" -> pl.Tensor[[16, 32], pl.FP32]")
    p = parse_program(text, "t.ir", ctx=CTX)
    params = {x.name: x.type for x in p.functions[0].params}
    assert params["a_s"].layout == "MX_A_ZZ" and params["b_s"].layout == "MX_B_NN"
    assert "pl.Tensor[[16, 2], pl.FP8E8M0, pl.MX_A_ZZ]" in print_program(p)
    roundtrips(text)
    import subprocess
    import sys
    from pathlib import Path

    f = tmp_path / "k.ir"
    f.write_text(text)
    r = subprocess.run([str(Path(sys.executable).parent / "ptoc"), "check", "--arch", "a5", str(f)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 1 and "PTOC-E0400" in r.stderr and "MX_A_ZZ" in r.stderr, r.stderr


def test_mx_scale_tensor_is_never_sliced():
    text = prog("w = pl.slice(a_s, [8, 2], [1, 0])", params="self, a_s: pl.Tensor[[16, 2], pl.FP8E8M0, pl.MX_A_ZZ]")
    assert codes_of(text) == [("PTOC-E0202", 7)]


def test_integer_index_of_a_tensor_is_its_slice_along_the_first_axis():
    # PyPTO: x[r] of a [2, 16, 32] tensor is the [16, 32] slice at r (tensor.slice with the axis dropped)
    text = prog("""\
        for r in pl.range(2):
            t = x[r]
    """, params="self, x: pl.Tensor[[2, 16, 32], pl.FP32]", ftype="Orchestration")
    t = function_types(parse_program(text, "t.ir", ctx=CTX), CTX)["k"]
    assert [d.value for d in t["t"].shape] == [16, 32]
    roundtrips(text)  # printed as written
    (call,) = [n for n in walk(frontend(text, "t.ir", CTX)) if isinstance(n, Call)]
    assert call.op == "tensor.slice" and call.args[1] == ListExpr((ConstInt(1, INDEX), ConstInt(16, INDEX),
                                                                  ConstInt(32, INDEX)))
    assert call.args[2].items[0] == Var("r") and call.kwarg("drop_dims") == ListExpr((ConstInt(0, INDEX),))


def test_integer_index_out_of_a_tensor_is_rejected():
    text = prog("t = x[5]", params="self, x: pl.Tensor[[2, 16, 32], pl.FP32]", ftype="Orchestration")
    assert [c for c, _ in codes_of(text)] == ["PTOC-E0202"]
