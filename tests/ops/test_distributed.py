"""The distributed namespace (`import pypto.language.distributed as pld`): its types, enums and ops.

Expected result types and rejections follow PyPTO's definitions (python/pypto/language/distributed and
src/ir/op/distributed of PyPTO): `pld.tensor.window` makes a `pld.DistributedTensor[shape, dtype]`,
`pld.system.world_size()` is an INT64 scalar, `pld.system.rank/nranks` are INT32, the collectives return
their target's type, `pld.tensor.allreduce` reduces FP16/FP32 data with an INT32 signal, and the window
buffer and world size belong to HOST orchestration. Codegen has no `.pto` form for them yet (PTOC-E0400).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ptoc.diagnostics import CompileError
from ptoc.frontend.parser import parse_program
from ptoc.ir.nodes import AssignStmt, Call, DistributedTensorType, EnumLit, TensorType
from ptoc.ir.printer import print_program, print_type
from ptoc.ir.verifier import Verifier
from ptoc.ops.registry import infer_call_type

PTOC = Path(sys.executable).with_name("ptoc")
HEAD = "import pypto.language as pl\nimport pypto.language.distributed as pld\n"


def program(*functions: str) -> str:
    """A program class holding `functions` (each a decorated def, any indent)."""
    body = "\n".join(textwrap.indent(textwrap.dedent(f).strip("\n"), "    ") for f in functions)
    return HEAD + "@pl.program\nclass P:\n" + body + "\n"


def kernel(params: str, body: str) -> str:
    body = textwrap.indent(textwrap.dedent(body).strip("\n"), "    ")
    return program(f"@pl.function(type=pl.FunctionType.InCore)\ndef k(self, {params}):\n{body}\n")


def host(body: str) -> str:
    body = textwrap.indent(textwrap.dedent(body).strip("\n"), "    ")
    return program(f"@pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)\ndef host(self):\n{body}\n")


def result_types(text: str) -> dict[str, str]:
    """name -> printed type of every assignment of the program's functions."""
    prog = parse_program(text, "t.ir")
    v = Verifier(prog, None, infer_call_type)
    out: dict[str, str] = {}
    for f in prog.functions:
        v.function(f)
        for s in f.body:
            if isinstance(s, AssignStmt):
                t = v.types.get(s.target.name)
                out[s.target.name] = print_type(t) if t is not None else None
    return out


def first_error(text: str):
    with pytest.raises(CompileError) as e:
        parse_program(text, "t.ir")
    return e.value.diagnostics[0]


# ---------------------------------------------------------------------------------------------- types and enums
def test_distributed_tensor_annotation_is_a_tensor_subtype():
    prog = parse_program(kernel("w: pld.DistributedTensor[[64, 32], pl.FP16]", "pass"), "t.ir")
    t = prog.functions[0].params[0].type
    assert isinstance(t, DistributedTensorType) and isinstance(t, TensorType)
    assert print_type(t) == "pld.DistributedTensor[[64, 32], pl.FP16]"


def test_window_buffer_note_of_pypto_dumps_is_dropped():
    a = parse_program(kernel('w: pld.DistributedTensor[[8], pl.FP32, "window_buffer=buf"]', "pass"), "t.ir")
    b = parse_program(kernel("w: pld.DistributedTensor[[8], pl.FP32]", "pass"), "t.ir")
    assert a.functions[0].params[0].type == b.functions[0].params[0].type


def test_distributed_enums_are_values_of_their_own_family():
    prog = parse_program(host("""
        buf = pld.alloc_window_buffer(1024)
        win = pld.window(buf, [256], dtype=pl.FP32)
        pld.tensor.allreduce(win, op=pld.ReduceOp.Prod)
        return 0
    """), "t.ir")
    call = prog.functions[0].body[2].expr
    assert call.op == "pld.tensor.allreduce"
    assert call.kwarg("op") == EnumLit("pld.ReduceOp", "Prod")


def test_unknown_enum_member_is_named_with_its_members():
    d = first_error(host("""
        buf = pld.alloc_window_buffer(1024)
        win = pld.window(buf, [256], dtype=pl.FP32)
        pld.tensor.allreduce(win, op=pld.ReduceOp.Average)
        return 0
    """))
    assert d.code == "PTOC-E0110" and "Average" in d.message and "Sum" in d.hint


def test_distributed_import_needs_an_alias_and_pld_without_it_is_not_a_name():
    text = "import pypto.language as pl\n@pl.function\ndef f(x: pld.DistributedTensor[[8], pl.FP32]):\n    pass\n"
    assert first_error(text).code == "PTOC-E0109"


# ---------------------------------------------------------------------------------------------- result types
def test_window_chain_result_types():
    got = result_types(host("""
        buf = pld.alloc_window_buffer(256 * pl.BF16.get_byte())
        data = pld.window(buf, [16, 16], dtype=pl.BF16)
        n = pld.world_size()
        ctx = pld.get_comm_ctx(data)
        me = pld.rank(ctx)
        all_ranks = pld.system.nranks(ctx)
        return 0
    """))
    assert got == {"buf": "pl.Ptr", "data": "pld.DistributedTensor[[16, 16], pl.BF16]",
                   "n": "pl.Scalar[pl.INT64]", "ctx": "pld.CommCtx", "me": "pl.Scalar[pl.INT32]",
                   "all_ranks": "pl.Scalar[pl.INT32]"}


def test_get_byte_is_the_element_size():
    prog = parse_program(host("""
        buf = pld.alloc_window_buffer(pl.BF16.get_byte())
        return 0
    """), "t.ir")
    size = prog.functions[0].body[0].value.args[0]
    assert size.value == 2  # BF16 is two bytes


def test_shape_form_of_alloc_window_buffer():
    assert result_types(host("""
        buf = pld.alloc_window_buffer([4, 64], dtype=pl.FP32)
        return 0
    """))["buf"] == "pl.Ptr"


def test_remote_load_is_a_tile_of_the_requested_shape_and_valid_shape():
    got = result_types(kernel("w: pld.DistributedTensor[[64, 32], pl.FP16], peer: pl.Scalar[pl.INT32]", """
        a = pld.remote_load(w, peer, [0, 0], [16, 32])
        b = pld.tile.remote_load(w, peer, [16, 0], [16, 32], valid_shape=[10, 32])
    """))
    assert got["a"] == "pl.Tile[[16, 32], pl.FP16]"
    assert got["b"] == "pl.Tile[[16, 32], pl.FP16, pl.TileView(valid_shape=[10, 32])]"


def test_collectives_return_their_target():
    got = result_types(host("""
        b1 = pld.alloc_window_buffer(1024)
        b2 = pld.alloc_window_buffer(16)
        b3 = pld.alloc_window_buffer(1024)
        data = pld.window(b1, [256], dtype=pl.FP32)
        sig = pld.window(b2, [4], dtype=pl.INT32)
        gathered = pld.window(b3, [256], dtype=pl.FP32)
        r = pld.tensor.allreduce(data, sig, op=pld.ReduceOp.Sum)
        g = pld.tensor.allgather(data, gathered, sig)
        s = pld.tensor.barrier(sig)
        return 0
    """))
    assert got["r"] == got["g"] == "pld.DistributedTensor[[256], pl.FP32]"
    assert got["s"] == "pld.DistributedTensor[[4], pl.INT32]"


def test_remote_store_short_form_resolves_by_source_level():
    text = kernel("x: pl.Tensor[[16, 8], pl.FP16], w: pld.DistributedTensor[[64, 8], pl.FP16], "
                  "peer: pl.Scalar[pl.INT32]", """
        t: pl.Tile[[16, 8], pl.FP16, pl.Mem.Vec] = pl.tile.load(x, [0, 0], [16, 8], target_memory=pl.Mem.Vec)
        pld.remote_store(t, w, peer, [0, 0])
        pld.remote_store(x, w, peer, [16, 0], atomic=pld.AtomicType.Add)
    """)
    parse_program(text, "t.ir")  # both levels check; the IR keeps the short name as written
    assert "pld.remote_store(x, w, peer, [16, 0], atomic=pld.AtomicType.Add)" in print_program(
        parse_program(text, "t.ir"))


# ---------------------------------------------------------------------------------------------- rejections
@pytest.mark.parametrize("params,body,needle", [
    ("x: pl.Tensor[[16, 8], pl.FP16], w: pl.Tensor[[64, 8], pl.FP16], p: pl.Scalar[pl.INT32]",
     "pld.tensor.remote_store(x, w, p, [0, 0])", "must be a pld.DistributedTensor"),
    ("x: pl.Tensor[[16, 8], pl.FP16], w: pld.DistributedTensor[[64, 8], pl.FP16], p: pl.Scalar[pl.INT32]",
     "pld.tensor.remote_store(x, w, p, [56, 0])", "exceeds the peer's target region"),
    ("x: pl.Tensor[[16, 8], pl.FP32], w: pld.DistributedTensor[[64, 8], pl.FP16], p: pl.Scalar[pl.INT32]",
     "pld.tensor.remote_store(x, w, p, [0, 0])", "dtype"),
    ("w: pld.DistributedTensor[[64, 8], pl.FP16], p: pl.Scalar[pl.INT32]",
     "t = pld.remote_load(w, p, [0], [16, 8])", "offsets has 1 entries but the target has rank 2"),
    ("s: pld.DistributedTensor[[4], pl.INT32]",
     "pld.system.defer_wait(s, offsets=[0], expected=1, cmp=pld.WaitCmp.Eq)", "only supports WaitCmp.Ge"),
    ("s: pld.DistributedTensor[[4], pl.INT32]",
     "pld.system.defer_wait(s, offsets=[0.5], expected=1, cmp=pld.WaitCmp.Ge)", "offset 0 must be an integer"),
    ("s: pld.DistributedTensor[[4], pl.INT32], p: pl.Scalar[pl.INT32]",
     "pld.system.notify(s, p, [0], 1)", "needs op="),
    ("s: pld.DistributedTensor[[4], pl.INT32]",
     "pld.system.wait(s, [0], 1, cmp=pld.ReduceOp.Sum)", "must be a pld.WaitCmp member"),
])
def test_op_rule_rejections(params, body, needle):
    d = first_error(kernel(params, body))
    assert d.code in ("PTOC-E0201", "PTOC-E0202") and needle in d.message, d.message
    assert d.span.line == 7  # the op's own line (after 2 imports, decorator, class, decorator, def)


def test_allreduce_wants_float_data_and_an_int32_signal():
    d = first_error(host("""
        b1 = pld.alloc_window_buffer(512)
        data = pld.window(b1, [256], dtype=pl.BF16)
        pld.tensor.allreduce(data, op=pld.ReduceOp.Sum)
        return 0
    """))
    assert "FP16 or FP32" in d.message
    d = first_error(host("""
        b1 = pld.alloc_window_buffer(1024)
        b2 = pld.alloc_window_buffer(16)
        data = pld.window(b1, [256], dtype=pl.FP32)
        sig = pld.window(b2, [4], dtype=pl.FP32)
        pld.tensor.allreduce(data, sig, op=pld.ReduceOp.Sum)
        return 0
    """))
    assert "signal must be INT32" in d.message


@pytest.mark.parametrize("body,needle", [
    ("buf = pld.alloc_window_buffer(8, dtype=pl.FP32)", "only valid when the first argument is a shape"),
    ("buf = pld.alloc_window_buffer([8, 8])", "requires dtype="),
    ("buf = pld.alloc_window_buffer([], dtype=pl.FP32)", "non-empty"),
    ("buf = pld.alloc_window_buffer([0, 128], dtype=pl.FP32)", "must be positive"),
])
def test_alloc_window_buffer_argument_rules(body, needle):
    assert needle in first_error(host(body + "\nreturn 0")).message


@pytest.mark.parametrize("text", [
    kernel("x: pl.Tensor[[64], pl.FP32]", "n = pld.world_size()"),
    host("with pl.at(level=pl.Level.CORE_GROUP):\n    n = pld.world_size()\nreturn 0"),
    host("with pl.at(level=pl.Level.CORE_GROUP):\n    buf = pld.alloc_window_buffer(64)\nreturn 0"),
])
def test_world_size_and_window_buffers_are_host_only(text):
    d = first_error(text)
    assert d.code == "PTOC-E0131" and "HOST" in d.message and "level=pl.Level.HOST" in d.hint


@pytest.mark.parametrize("body,needle", [
    ("pld.alloc_window_buffer(8)\nreturn 0", "RHS of a simple assignment"),
    ('buf = pld.alloc_window_buffer(8, name="other")\nreturn 0', "cannot be passed explicitly"),
    ("buf = pld.alloc_window_buffer(8)\nbuf = pld.alloc_window_buffer(8)\nreturn 0", "already declared"),
])
def test_window_buffer_placement(body, needle):
    d = first_error(host(body))
    assert d.code == "PTOC-E0132" and needle in d.message


def test_window_buffer_names_are_unique_across_functions():
    f = "@pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)\ndef {}(self):\n" \
        "    buf = pld.alloc_window_buffer(8)\n    return 0\n"
    d = first_error(program(f.format("a"), f.format("b")))
    assert d.code == "PTOC-E0132" and d.span.line == 11


def test_a_distributed_tensor_passes_where_a_tensor_is_expected_but_not_back():
    ok = program("""
        @pl.function(type=pl.FunctionType.InCore)
        def k(self, x: pl.Tensor[[8], pl.FP32]):
            pass
        """, """
        @pl.function(type=pl.FunctionType.Orchestration)
        def main(self, w: pld.DistributedTensor[[8], pl.FP32]):
            self.k(w)
        """)
    parse_program(ok, "t.ir")
    d = first_error(ok.replace("x: pl.Tensor", "x: pld.DistributedTensor").replace(
        "w: pld.DistributedTensor", "w: pl.Tensor"))
    assert d.code == "PTOC-E0120"


# ---------------------------------------------------------------------------------------------- printing, passes, codegen
ROUND_TRIP = host("""
    buf = pld.tensor.alloc_window_buffer(64 * pl.FP32.get_byte())
    sig_buf = pld.alloc_window_buffer([4], dtype=pl.INT32)
    data = pld.window(buf, [64], dtype=pl.FP32)
    sig = pld.tensor.window(sig_buf, [4], dtype=pl.INT32)
    pld.tensor.allreduce(data, sig, op=pld.ReduceOp.Max)
    pld.system.wait(sig, [0], 1, cmp=pld.WaitCmp.Ge)
    return 0
""")


def test_printer_writes_the_distributed_import_and_full_op_names_and_reparses_to_the_same_ir():
    prog = parse_program(ROUND_TRIP, "t.ir")
    text = print_program(prog)
    assert "import pypto.language.distributed as pld\n" in text
    assert "buf = pld.tensor.alloc_window_buffer(64 * 4)" in text
    assert "data = pld.tensor.window(buf, [64], dtype=pl.FP32)" in text  # the short form's full name
    again = parse_program(text, "t.ir")
    assert again == prog and print_program(again) == text


def test_a_program_without_distributed_parts_prints_no_distributed_import():
    text = HEAD + "@pl.function\ndef f(x: pl.Scalar[pl.INDEX]) -> pl.Scalar[pl.INDEX]:\n    return x\n"
    assert "distributed" not in print_program(parse_program(text, "t.ir"))


def test_other_alias_reads_the_same_and_prints_as_pld():
    other = ROUND_TRIP.replace("import pypto.language.distributed as pld", "import pypto.language.distributed "
                               "as dist").replace("pld.", "dist.")
    assert parse_program(other, "t.ir") == parse_program(ROUND_TRIP, "t.ir")


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(PTOC), *args], cwd=cwd, capture_output=True, text=True, timeout=120)


def test_passes_accept_a_kernel_with_distributed_ops_and_codegen_refuses_them_with_a_hint(tmp_path):
    src = kernel("x: pl.Tensor[[16, 64], pl.FP32], w: pld.DistributedTensor[[64, 64], pl.FP32], "
                 "peer: pl.Scalar[pl.INT32]", """
        t: pl.Tile[[16, 64], pl.FP32, pl.Mem.Vec] = pl.tile.load(x, [0, 0], [16, 64], target_memory=pl.Mem.Vec)
        pld.remote_store(t, w, peer, [16, 0])
    """)
    (tmp_path / "d.ir").write_text(src)
    r = run("passes", "d.ir", "--dump-after", "AllocateMemoryAddr", "--roundtrip-check", cwd=tmp_path)
    assert r.returncode == 0, r.stderr  # every pass up to codegen, each result re-reading to the same IR
    assert "pld.DistributedTensor[[64, 64], pl.FP32, pl.TensorView(stride=[64, 1])" in r.stdout
    r = run("compile", "d.ir", "-o", "out", cwd=tmp_path)
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert "d.ir:8:9: error[PTOC-E0400]: cannot emit pld.tile.remote_store yet" in r.stderr
    assert "not supported by ptoc's code generator yet" in r.stderr
    assert not (tmp_path / "out.pto").exists()


def test_passes_of_the_first_parameter_keep_its_distributed_type():
    prog = parse_program(kernel("w: pld.DistributedTensor[[8, 8], pl.FP32]", "pass"), "t.ir")
    from ptoc.context import CompileContext
    from ptoc.passes.manager import run_pipeline

    after = run_pipeline(prog, CompileContext())
    assert isinstance(after.functions[0].params[0].type, DistributedTensorType)


def test_op_calls_keep_the_pld_prefix_in_the_ir():
    prog = parse_program(host("n = pld.world_size()\nreturn 0"), "t.ir")
    c = prog.functions[0].body[0].value
    assert isinstance(c, Call) and c.op == "pld.system.world_size"


# ---------------------------------------------------------------------------------------------- every op, well typed
W = "pld.DistributedTensor[[64, 32], pl.FP16]"
SIG = "pld.DistributedTensor[[4], pl.INT32]"
PARAMS = (f"w: {W}, w2: {W}, sig: {SIG}, x: pl.Tensor[[64, 32], pl.FP16], p: pl.Scalar[pl.INT32], "
          "c: pl.Tensor[[4], pl.INT32]")
EVERY_OP = [  # (op, the call, its result type as PyPTO defines it; None: a statement with no value)
    ("pld.tensor.alloc_window_buffer", None, "pl.Ptr"),
    ("pld.tensor.window", None, "pld.DistributedTensor[[4], pl.FP32]"),
    ("pld.system.world_size", None, "pl.Scalar[pl.INT64]"),
    ("pld.system.get_comm_ctx", "pld.system.get_comm_ctx(w)", "pld.CommCtx"),
    ("pld.system.rank", "pld.system.rank(pld.system.get_comm_ctx(w))", "pl.Scalar[pl.INT32]"),
    ("pld.system.nranks", "pld.system.nranks(pld.system.get_comm_ctx(w))", "pl.Scalar[pl.INT32]"),
    ("pld.tile.remote_load", "pld.tile.remote_load(w, p, [0, 0], [16, 32])", "pl.Tile[[16, 32], pl.FP16]"),
    ("pld.tile.remote_store", "pld.tile.remote_store(pl.tile.load(x, [0, 0], [16, 32]), w, p, [0, 0])", None),
    ("pld.tensor.remote_store", "pld.tensor.remote_store(x, w, p, [0, 0], atomic=pld.AtomicType.None_)", None),
    ("pld.tensor.put", "pld.tensor.put(w, p, x, dst_offsets=[0, 0], src_offsets=[0, 0], shape=[16, 32])", None),
    ("pld.tensor.get", "pld.tensor.get(x, p, w, chunk_rows=4, chunk_cols=32, pipeline=True)", None),
    ("pld.tile.put", "pld.tile.put(w, p, x, pl.tile.create([16, 32], dtype=pl.FP16))", None),
    ("pld.tile.get", "pld.tile.get(x, p, w, pl.tile.create([16, 32], dtype=pl.FP16))", None),
    ("pld.system.notify", "pld.system.notify(sig, p, [1], 1, op=pld.NotifyOp.Set)", None),
    ("pld.system.wait", "pld.system.wait(sig, [1], 1, cmp=pld.WaitCmp.Eq)", None),
    ("pld.system.defer_wait", "pld.system.defer_wait(sig, [1], 2, cmp=pld.WaitCmp.Ge)", None),
    ("pld.tensor.allreduce", None, "pld.DistributedTensor[[4], pl.FP32]"),
    ("pld.tensor.barrier", "pld.tensor.barrier(sig)", SIG),
    ("pld.tensor.broadcast", "pld.tensor.broadcast(w, sig, root=0)", W),
    ("pld.tensor.reduce_scatter", "pld.tensor.reduce_scatter(w, sig, op=pld.ReduceOp.Sum)", W),
    ("pld.tensor.allgather", "pld.tensor.allgather(x, w2, sig)", W),
    ("pld.tensor.all_to_all", "pld.tensor.all_to_all(x, w2, sig)", W),
    ("pld.tensor.all_to_all_v", "pld.tensor.all_to_all_v(x, w2, sig, c, sig)", W),
]
HOST_CHAIN = host("""
    buf = pld.tensor.alloc_window_buffer(16)
    v = pld.tensor.window(buf, [4], dtype=pl.FP32)
    n = pld.system.world_size()
    r = pld.tensor.allreduce(v, op=pld.ReduceOp.Min)
    return 0
""")


@pytest.mark.parametrize("op,call,result", EVERY_OP, ids=[o[0] for o in EVERY_OP])
def test_every_distributed_op_types(op, call, result):
    from ptoc.ops.registry import REGISTRY

    assert op in REGISTRY
    if call is None:  # the host-only ops, in a HOST function
        got = result_types(HOST_CHAIN)
        name = {"pld.tensor.alloc_window_buffer": "buf", "pld.tensor.window": "v", "pld.system.world_size": "n",
                "pld.tensor.allreduce": "r"}[op]
        assert got[name] == result
        return
    got = result_types(kernel(PARAMS, f"y = {call}"))
    assert got["y"] == result


def test_views_and_slices_of_a_window_stay_distributed():
    got = result_types(kernel(f"w: {W}, x: pl.Tensor[[16, 32], pl.FP16]", """
        v = pl.tensor.view(w, [32, 64])
        s = pl.tensor.slice(w, [16, 32], [16, 0])
        a = pl.tensor.assemble(w, x, [0, 0])
        plain = pl.tensor.slice(x, [8, 32], [0, 0])
    """))
    assert got["v"] == "pld.DistributedTensor[[32, 64], pl.FP16]"
    assert got["s"] == "pld.DistributedTensor[[16, 32], pl.FP16]"
    assert got["a"] == W
    assert got["plain"] == "pl.Tensor[[8, 32], pl.FP16]"
