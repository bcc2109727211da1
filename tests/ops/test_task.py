"""PyPTO's task API and calls with several results.

- `out, tid = pl.submit(self.kernel, ...)` launches a kernel as a task: its value is the kernel's results
  followed by a `pl.Scalar[pl.TASK_ID]`; a kernel with several results unpacks as `(a, b), tid = ...`;
  the launch may leave out the kernel's pl.Out parameters (PyPTO pairs the arguments with the
  parameters that remain).
- Task ids: `pl.TASK_ID`, `pl.TaskId` (= `pl.Scalar[pl.TASK_ID]`), `pl.system.task_invalid()`,
  `pl.system.task_dummy(deps=[...])`; arrays `pl.array.create(extent, dtype)` of integer, BOOL or TASK_ID
  elements; `pl.AUTO` is PyPTO's -1 ("let the compiler choose").
- `a, b = call(...)` binds the elements of a tuple result, as PyPTO's parser desugars it: a temporary
  holds the tuple and each name takes its element (`_tuple_tmp = call(...)`, `a = _tuple_tmp[0]`, ...);
  `return self.g(...)` passes on all results of a call returning as many values as the function.
"""

from __future__ import annotations

import textwrap

import pytest

from ptoc.context import CompileContext
from ptoc.diagnostics import CompileError
from ptoc.frontend.parser import parse_program
from ptoc.ir.dtypes import INDEX
from ptoc.ir.nodes import AssignStmt, ConstInt, GetItem, ReturnStmt, Var
from ptoc.ir.printer import print_program, print_type
from ptoc.ir.verifier import Verifier
from ptoc.ops.registry import infer_call_type

T = "pl.Tensor[[16, 64], pl.FP32]"
KERNEL = f"""
    @pl.function(type=pl.FunctionType.InCore)
    def k(self, x: {T}, out: pl.Out[{T}]) -> {T}:
        t: pl.Tile[[16, 64], pl.FP32, pl.Mem.Vec] = pl.tile.load(x, [0, 0], [16, 64], target_memory=pl.Mem.Vec)
        r: {T} = pl.tile.store(t, [0, 0], out)
        return r
"""
PAIR = f"""
    @pl.function(type=pl.FunctionType.InCore)
    def pair(self, x: {T}, a: pl.Out[{T}], b: pl.Out[pl.Tensor[[16, 64], pl.FP16]]) -> tuple[{T}, pl.Tensor[[16, 64], pl.FP16]]:
        t: pl.Tile[[16, 64], pl.FP32, pl.Mem.Vec] = pl.tile.load(x, [0, 0], [16, 64], target_memory=pl.Mem.Vec)
        h: pl.Tile[[16, 64], pl.FP16, pl.Mem.Vec] = pl.tile.cast(t, target_type=pl.FP16)
        ra: {T} = pl.tile.store(t, [0, 0], a)
        rb: pl.Tensor[[16, 64], pl.FP16] = pl.tile.store(h, [0, 0], b)
        return ra, rb
"""


def program(*functions: str) -> str:
    body = "\n".join(textwrap.indent(textwrap.dedent(f).strip("\n"), "    ") for f in functions)
    return "import pypto.language as pl\n@pl.program\nclass P:\n" + body + "\n"


def orch(body: str, params: str = f"x: {T}, out: pl.Out[{T}]", ret: str = T) -> str:
    body = textwrap.indent(textwrap.dedent(body).strip("\n"), "    ")
    arrow = f" -> {ret}" if ret else ""
    return f"@pl.function(type=pl.FunctionType.Orchestration)\ndef main(self, {params}){arrow}:\n{body}\n"


def types_of(text: str, fname: str = "main") -> dict[str, str | None]:
    prog = parse_program(text, "t.ir", ctx=CompileContext())
    v = Verifier(prog, None, infer_call_type)
    f = prog.function(fname)
    v.function(f)
    return {k: (print_type(t) if t is not None else None) for k, t in v.types.items()}


def first_error(text: str):
    with pytest.raises(CompileError) as e:
        parse_program(text, "t.ir")
    return e.value.diagnostics[0]


# ---------------------------------------------------------------------------------------------- pl.submit
def test_submit_gives_the_result_and_the_task_id():
    got = types_of(program(KERNEL, orch("""
        with pl.manual_scope():
            y, tid = pl.submit(self.k, x, out)
        return y
    """)))
    assert got["y"] == T and got["tid"] == "pl.Scalar[pl.TASK_ID]"
    assert got["_submit_tmp"] == f"pl.Tuple[{T}, pl.Scalar[pl.TASK_ID]]"


def test_submit_of_a_kernel_with_two_results_unpacks_them_as_a_tuple():
    got = types_of(program(PAIR, orch("""
        o16 = pl.create_tensor([16, 64], dtype=pl.FP16)
        with pl.manual_scope():
            (a, b), tid = pl.submit(self.pair, x, out, o16)
        return a
    """)))
    assert (got["a"], got["b"], got["tid"]) == (T, "pl.Tensor[[16, 64], pl.FP16]", "pl.Scalar[pl.TASK_ID]")


def test_submit_may_leave_out_the_output_parameters_but_not_inputs():
    ok = program(KERNEL, orch("""
        with pl.manual_scope():
            y, tid = pl.submit(self.k, x)
        return y
    """))
    assert types_of(ok)["y"] == T
    d = first_error(program(KERNEL, orch("""
        with pl.manual_scope():
            y, tid = pl.submit(self.k)
        return y
    """)))
    assert d.code == "PTOC-E0113" and "takes 2 argument(s)" in d.message


def test_submit_deps_and_task_ids_through_arrays():
    got = types_of(program(KERNEL, orch("""
        with pl.manual_scope():
            tids = pl.array.create(2, pl.TASK_ID)
            none = pl.system.task_invalid()
            y, t0 = pl.submit(self.k, x, out, deps=[none])
            tids_1 = pl.array.update_element(tids, 0, t0)
            z, t1 = pl.submit(self.k, y, out, deps=[t0])
            last = pl.array.get_element(tids_1, 0)
            barrier = pl.system.task_dummy(deps=[tids_1])
        return z
    """)))
    assert got["tids"] == got["tids_1"] == "pl.Array[2, pl.TASK_ID]"
    assert got["none"] == got["last"] == got["barrier"] == got["t1"] == "pl.Scalar[pl.TASK_ID]"


def test_submit_unpacks_exactly_the_kernels_results():
    d = first_error(program(PAIR, orch("""
        o16 = pl.create_tensor([16, 64], dtype=pl.FP16)
        with pl.manual_scope():
            y, tid = pl.submit(self.pair, x, out, o16)
        return y
    """)))
    assert d.code == "PTOC-E0130" and "unpacks 1 result value(s) but kernel 'pair' returns 2" in d.message


@pytest.mark.parametrize("stmt,code", [
    ("y, tid, extra = pl.submit(self.k, x, out)", "PTOC-E0130"),
    ("y, tid = pl.submit(self.k(x, out))", "PTOC-E0130"),
    ("y, tid = pl.submit(self.nope, x, out)", "PTOC-E0106"),
])
def test_malformed_submits(stmt, code):
    d = first_error(program(KERNEL, orch(f"with pl.manual_scope():\n    {stmt}\nreturn x")))
    assert d.code == code


def test_task_id_annotations_and_auto():
    text = program(KERNEL, orch("""
        with pl.manual_scope():
            y, tid = pl.submit(self.k, x, out)
        return tid
    """, ret="pl.TaskId"))
    prog = parse_program(text, "t.ir")
    assert print_type(prog.function("main").returns[0]) == "pl.Scalar[pl.TASK_ID]"
    a = parse_program("import pypto.language as pl\n@pl.function(type=pl.FunctionType.AIC)\ndef f():\n"
                      "    v2c = pl.reserve_buffer(name=\"v2c\", size=4096, base=pl.AUTO)\n", "t.ir")
    assert a.functions[0].body[0].value.kwarg("base") == ConstInt(-1, INDEX)


def test_indexing_an_array_reads_an_element():
    got = types_of(program(orch("""
        a = pl.array.create(4, pl.INT32)
        a_1 = pl.array.update_element(a, 2, 7)
        v = a_1[2]
        return x
    """, params=f"x: {T}")))
    assert got["v"] == "pl.Scalar[pl.INT32]"


def test_writing_an_array_element_is_a_functional_update():
    # PyPTO's parser turns `a[i] = v` on an array into `a = array.update_element(a, i, v)`
    text = program(orch("""
        a = pl.array.create(4, pl.INT32)
        a[2] = 7
        v = a[2]
        return x
    """, params=f"x: {T}"))
    got = types_of(text)
    assert got["v"] == "pl.Scalar[pl.INT32]" and got["a"] == "pl.Array[4, pl.INT32]"
    write = parse_program(text, "t.ir").function("main").body[1]
    assert isinstance(write, AssignStmt) and write.target.name == "a"
    assert write.value.op == "array.update_element" and write.value.args[0] == Var("a")
    assert [a.value for a in write.value.args[1:]] == [2, 7]


def test_writing_one_element_of_a_tensor_names_the_array_rule():
    with pytest.raises(CompileError) as e:
        parse_program(program(orch("""
        x[0] = x
        return x
    """, params=f"x: {T}")), "t.ir")
    d = e.value.diagnostics[0]
    assert "'array' must be a pl.Array, got a tensor" in d.message and "dst[i:i + 1, ...] = src" in d.hint


@pytest.mark.parametrize("stmt,needle", [
    ("a = pl.array.create(4, pl.FP32)", "integer, BOOL or TASK_ID"),
    ("a = pl.array.create(0, pl.INT32)", "positive constant"),
    ("a = pl.array.create(4, pl.TASK_ID)\nb = pl.array.update_element(a, 0, pl.const(1, pl.INT32))",
     "must have the array's dtype TASK_ID"),
    ("b = pl.array.get_element(x, 0)", "must be a pl.Array"),
])
def test_array_rules(stmt, needle):
    d = first_error(program(orch(stmt + "\nreturn x", params=f"x: {T}")))
    assert needle in d.message


def test_no_dep_marks_an_argument_and_keeps_its_type():
    got = types_of(program(KERNEL, orch("""
        y = self.k(x, pl.no_dep(out))
        return y
    """)))
    assert got["y"] == T


# ---------------------------------------------------------------------------------------------- tuple results
UNPACK = program(PAIR, orch("""
    o16 = pl.create_tensor([16, 64], dtype=pl.FP16)
    a, b = self.pair(x, out, o16)
    return a
"""))


def test_unpacking_a_call_binds_each_result():
    got = types_of(UNPACK)
    assert (got["a"], got["b"]) == (T, "pl.Tensor[[16, 64], pl.FP16]")


def test_unpacking_is_a_temporary_and_its_elements_and_prints_so():
    prog = parse_program(UNPACK, "t.ir")
    body = prog.function("main").body
    assert body[1] == AssignStmt(Var("_tuple_tmp"), body[1].value)
    assert body[2] == AssignStmt(Var("a"), GetItem(Var("_tuple_tmp"), ConstInt(0, INDEX)))
    assert body[3] == AssignStmt(Var("b"), GetItem(Var("_tuple_tmp"), ConstInt(1, INDEX)))
    text = print_program(prog)
    assert "_tuple_tmp = self.pair(x, out, o16)\n" in text and "a = _tuple_tmp[0]\n" in text
    assert parse_program(text, "t.ir") == prog


def test_two_unpackings_use_two_temporaries():
    prog = parse_program(UNPACK.replace("    return a", "    c, d = self.pair(x, out, o16)\n        return c"),
                         "t.ir")
    names = [s.target.name for s in prog.function("main").body if isinstance(s, AssignStmt)]
    assert names == ["o16", "_tuple_tmp", "a", "b", "_tuple_tmp_1", "c", "d"]


def test_unpacking_an_op_with_a_tuple_result():
    # MX quantisation (a5): FP8 data and one E8M0 scale per 32 elements along the quantised axis
    text = ("import pypto.language as pl\n@pl.function(type=pl.FunctionType.InCore)\n"
            "def k(x: pl.Tensor[[32, 128], pl.BF16]):\n"
            "    data, scale = pl.tensor.quant_mx(x, axis=1, dtype=pl.FP8E4M3FN)\n")
    prog = parse_program(text, "t.ir", ctx=CompileContext(arch="a5"))
    v = Verifier(prog, CompileContext(arch="a5"), infer_call_type)
    v.function(prog.functions[0])
    assert print_type(v.types["data"]) == "pl.Tensor[[32, 128], pl.FP8E4M3FN]"
    assert print_type(v.types["scale"]) == "pl.Tensor[[32, 4], pl.FP8E8M0]"


def test_unpacking_too_many_names_is_an_index_error():
    d = first_error(UNPACK.replace("a, b = self.pair", "a, b, c = self.pair"))
    assert d.code == "PTOC-E0113" and "index 2 is out of range for a tuple of 2" in d.message


def test_unpacking_targets_are_plain_names():
    d = first_error(UNPACK.replace("a, b = self.pair", "a, (b, c) = self.pair"))
    assert d.code == "PTOC-E0005" and "plain name" in d.message


# ---------------------------------------------------------------------------------------------- several returned values
def _two(body: str) -> str:
    return program(PAIR, orch(body, ret=f"tuple[{T}, pl.Tensor[[16, 64], pl.FP16]]"))


def test_returning_a_call_that_returns_as_many_values():
    parse_program(_two("""
        o16 = pl.create_tensor([16, 64], dtype=pl.FP16)
        return self.pair(x, out, o16)
    """), "t.ir")


def test_a_parenthesised_tuple_returns_its_items():
    a = parse_program(_two("""
        o16 = pl.create_tensor([16, 64], dtype=pl.FP16)
        p, q = self.pair(x, out, o16)
        return (p, q)
    """), "t.ir")
    ret = a.function("main").body[-1]
    assert isinstance(ret, ReturnStmt) and ret.values == (Var("p"), Var("q"))


def test_returning_one_value_for_two_is_still_an_error():
    d = first_error(_two("return x"))
    assert d.code == "PTOC-E0113" and "returns 2 value(s) but this returns 1" in d.message


# ---------------------------------------------------------------------------------------------- formatting
COMMENTED = '''\
import pypto.language as pl
import pypto.language.distributed as pld  # the distributed namespace


@pl.program
class P:
    @pl.function(type=pl.FunctionType.InCore)
    def pair(self, x: pl.Tensor[[8], pl.FP32], a: pl.Out[pl.Tensor[[8], pl.FP32]]) -> tuple[
        pl.Tensor[[8], pl.FP32], pl.Tensor[[8], pl.FP32]
    ]:
        return a, a

    @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def host(self, x: pl.Tensor[[8], pl.FP32], o: pl.Out[pl.Tensor[[8], pl.FP32]]):
        # a window of 8 floats
        buf = pld.alloc_window_buffer(32)  # bytes
        with pl.manual_scope():
            # launch it on four cores
            (u, v), tid = pl.spmd_submit(self.pair, x, o, core_num=4)  # two results
        p, q = self.pair(x, o)  # a plain call
        return 0
'''


def _comments(text: str) -> list[str]:
    import io
    import tokenize

    return [t.string for t in tokenize.generate_tokens(io.StringIO(text).readline) if t.type == tokenize.COMMENT]


def test_fmt_keeps_comments_and_the_ir_of_unpackings_launches_and_distributed_ops():
    from ptoc.frontend.parser import parse_for_format

    def fmt(text: str) -> str:
        prog, comments, _ = parse_for_format(text, "t.ir")
        return print_program(prog, comments)

    once = fmt(COMMENTED)
    assert fmt(once) == once
    assert _comments(once) == ["# pypto.program: P"] + _comments(COMMENTED)
    assert "import pypto.language.distributed as pld  # the distributed namespace\n" in once
    assert "_submit_tmp = pl.spmd_submit(self.pair, x, o, core_num=4)  # two results\n" in once
    assert parse_program(once, "t.ir") == parse_program(COMMENTED, "t.ir")


@pytest.mark.parametrize("op,call,result", [
    ("system.task_is_valid", "pl.system.task_is_valid(pl.system.task_invalid())", "pl.Scalar[pl.BOOL]"),
    ("tensor.no_dep", "pl.tensor.no_dep(x)", T),
    ("array.get_element", "pl.array.get_element(pl.array.create(3, pl.BOOL), 1)", "pl.Scalar[pl.BOOL]"),
])
def test_task_ops_result_types(op, call, result):
    assert types_of(program(orch(f"y = {call}\nreturn x", params=f"x: {T}")))["y"] == result


def test_task_is_valid_takes_a_task_id():
    d = first_error(program(orch("y = pl.system.task_is_valid(pl.const(1, pl.INT32))\nreturn x", params=f"x: {T}")))
    assert "must hold task ids" in d.message
