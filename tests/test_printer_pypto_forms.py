"""The pypto print style writes what PyPTO's printer writes for the same IR: function attrs as a
`pl.func_attr({...})` prologue, a Group function with its implied level/role and without `self`, and a
second loop over the same name as a new variable (`i_1`); and pypto_diff compares the dumps by pass and
by function (PyPTO runs Simplify twice, and names locals per function)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
from pathlib import Path

import pytest

from ptoc.context import CompileContext
from ptoc.driver import frontend
from ptoc.ir.printer import print_program

ROOT = Path(__file__).resolve().parent.parent
PYPTO = os.environ.get("PTOC_PYPTO_PYTHON")

SRC = """\
import pypto.language as pl

@pl.program
class twice:
    @pl.function(type=pl.FunctionType.AIV, attrs={"split": pl.SplitMode.UP_DOWN})
    def k(self, a: pl.Tensor[[32, 64], pl.FP32], o: pl.Out[pl.Tensor[[32, 64], pl.FP32]]) -> pl.Tensor[[32, 64], pl.FP32]:
        for i in pl.range(2):
            t: pl.Tile[[16, 64], pl.FP32, pl.Mem.Vec] = pl.tile.load(a, [i * 16, 0], [16, 64], target_memory=pl.Mem.Vec)
            o = pl.tile.store(t, [i * 16, 0], o)
        for i in pl.range(2):
            u: pl.Tile[[16, 64], pl.FP32, pl.Mem.Vec] = pl.tile.load(o, [i * 16, 0], [16, 64], target_memory=pl.Mem.Vec)
            o = pl.tile.store(u, [i * 16, 0], o)
        return o

    @pl.function(type=pl.FunctionType.Group)
    def g(self, a: pl.Tensor[[32, 64], pl.FP32], o: pl.Out[pl.Tensor[[32, 64], pl.FP32]]) -> pl.Tensor[[32, 64], pl.FP32]:
        self.k(a, o)
        return o
"""


def _printed(style: str) -> str:
    return print_program(frontend(SRC, "twice.ir", CompileContext()), style=style)


def test_attrs_print_as_a_func_attr_prologue():
    text = _printed("pypto")
    assert "attrs=" not in text
    lines = text.splitlines()
    at = next(i for i, ln in enumerate(lines) if ln.strip().startswith("def k("))
    assert lines[at - 1].strip() == "@pl.function(type=pl.FunctionType.AIV, level=pl.Level.AIV, role=pl.Role.SubWorker)"
    assert lines[at + 1].strip() == 'pl.func_attr({"split": pl.SplitMode.UP_DOWN})'
    assert 'attrs={"split": pl.SplitMode.UP_DOWN}' in _printed("ptoc")  # ptoc's own form keeps it as written


def test_group_function_states_level_and_role_without_self():
    text = _printed("pypto")
    assert ("@pl.function(type=pl.FunctionType.Group, level=pl.Level.CORE_GROUP, role=pl.Role.SubWorker)\n"
            "    def g(a: pl.Tensor[[32, 64], pl.FP32], o:") in text


def test_second_loop_over_a_name_is_a_new_variable():
    text = _printed("pypto")
    assert text.count("for i in pl.range(2):") == 1 and text.count("for i_1 in pl.range(2):") == 1
    second = text[text.index("for i_1 in"):text.index("return o", text.index("for i_1 in"))]
    assert "[i_1 * 16, 0]" in second and "[i * 16, 0]" not in second
    first = text[text.index("for i in"):text.index("for i_1 in")]
    assert "[i * 16, 0]" in first and "i_1" not in first


def test_pypto_style_reads_back_to_the_same_program():
    from ptoc.ir.printer import print_program as p

    again = frontend(_printed("pypto"), "again.py", CompileContext())
    assert p(again, style="pypto") == _printed("pypto")


@pytest.mark.skipif(not PYPTO or not Path(PYPTO).exists(),
                    reason="PTOC_PYPTO_PYTHON does not name the Python of a PyPTO build")
def test_pypto_parses_the_printed_forms(tmp_path):
    f = tmp_path / "twice.py"
    f.write_text(_printed("pypto"))
    r = subprocess.run([PYPTO, "-c", "import sys, pypto.language as pl; pl.parse(open(sys.argv[1]).read())", str(f)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]


def _diff_module():
    spec = importlib.util.spec_from_file_location("pypto_diff", ROOT / "benchmarks" / "pypto_diff.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_diff_keys_a_second_run_of_a_pass_apart(tmp_path):
    d = _diff_module()
    dump = tmp_path / "pypto" / "passes_dump"
    dump.mkdir(parents=True)
    for n, name, body in ((5, "Simplify", "a = 1\n"), (23, "InjectGMPipeBuffer", "b = 2\n"), (45, "Simplify", "c = 3\n")):
        (dump / f"{n:02d}_after_{name}.py").write_text(body)
    assert d.pypto_dumps(tmp_path / "pypto") == {"Simplify": "a = 1\n", "InjectGmPipeBuffer": "b = 2\n",
                                                 "Simplify#2": "c = 3\n"}


def test_diff_names_locals_per_function():
    d = _diff_module()
    one = "def k(x):\n    y = x\n    return y\ndef m(z):\n    w = z\n    return w\n"
    two = "def kk(p):\n    q = p\n    return q\ndef mm(x):\n    y = x\n    return y\n"
    assert d.normalise_ir(one) == d.normalise_ir(two)
    assert d.normalise_ir(one) == "def f0(v0):\n    v1 = v0\n    return v1\n\ndef f1(v0):\n    v1 = v0\n    return v1"


def test_extract_shape_prints_positionally_and_cast_target_type_by_keyword():
    """PyPTO holds tile.extract's shape as an argument (printed positionally) and tile.cast's target_type
    as an attribute (printed as a keyword)."""
    src = """\
import pypto.language as pl

@pl.function(type=pl.FunctionType.AIC)
def k(a: pl.Tensor[[64, 64], pl.BF16], o: pl.Out[pl.Tensor[[32, 64], pl.FP32]]) -> pl.Tensor[[32, 64], pl.FP32]:
    m: pl.Tile[[64, 64], pl.BF16, pl.Mem.Mat] = pl.tile.load(a, [0, 0], [64, 64], target_memory=pl.Mem.Mat)
    x = pl.tile.extract(m, 0, 0, shape=[32, 64], target_memory=pl.Mem.Left)
    y = pl.tile.extract(m, 0, 0, shape=[64, 64], target_memory=pl.Mem.Right)
    c = pl.tile.matmul(x, y)
    r = pl.tile.store(c, [0, 0], o)
    return r
"""
    prog = frontend(src, "k.ir", CompileContext())
    text = print_program(prog, style="pypto")
    assert "pl.tile.extract(m, 0, 0, [32, 64], target_memory=pl.Mem.Left)" in text
    assert "shape=" not in text
    assert "pl.tile.extract(m, 0, 0, shape=[32, 64], target_memory=pl.Mem.Left)" in print_program(prog, style="ptoc")
    cast = frontend(src.replace("r = pl.tile.store(c, [0, 0], o)", "h = pl.tile.cast(c, target_type=pl.FP16)\n"
                                "    r = pl.tile.store(c, [0, 0], o)"), "k.ir", CompileContext())
    assert "pl.tile.cast(c, target_type=pl.FP16)" in print_program(cast, style="pypto")


def test_packed_nd_strides_print_as_a_bare_tensor():
    """PyPTO leaves a packed row-major ND tensor without a view; a view that says more is printed."""
    from ptoc.ir.nodes import ConstInt, TensorType, TensorView
    from ptoc.ir import dtypes
    from ptoc.ir.printer import Printer

    def i(v):
        return ConstInt(v, dtypes.INDEX)

    def ten(stride, layout="ND"):
        return TensorType((i(16), i(64)), dtypes.FP32, TensorView(stride=tuple(i(s) for s in stride), layout=layout))

    pypto = Printer(style="pypto")
    assert pypto.type(ten((64, 1))) == "pl.Tensor[[16, 64], pl.FP32]"
    assert pypto.type(ten((128, 1))) == \
        "pl.Tensor[[16, 64], pl.FP32, pl.TensorView(stride=[128, 1], layout=pl.TensorLayout.ND)]"
    assert "layout=pl.TensorLayout.DN" in pypto.type(ten((1, 16), "DN"))
    assert "stride=[64, 1]" in Printer(style="ptoc").type(ten((64, 1)))


def test_packed_strides_of_a_tensor_with_dynamic_rows_print_bare():
    """A [M, 64] tensor with strides [64, 1] is packed whatever M is (the row count enters no stride), so
    it prints bare as PyPTO leaves it; an inner dynamic extent, or a row stride other than 64, keeps the view."""
    from ptoc.ir.nodes import ConstInt, TensorType, TensorView, Var
    from ptoc.ir import dtypes
    from ptoc.ir.printer import Printer

    def i(v):
        return ConstInt(v, dtypes.INDEX)

    m = Var("M")
    pypto = Printer(style="pypto")
    packed = TensorType((m, i(64)), dtypes.FP16, TensorView(stride=(i(64), i(1)), layout="ND"))
    assert pypto.type(packed) == "pl.Tensor[[M, 64], pl.FP16]"
    padded = TensorType((m, i(64)), dtypes.FP16, TensorView(stride=(i(80), i(1)), layout="ND"))
    assert "stride=[80, 1]" in pypto.type(padded)
    inner = TensorType((i(16), m), dtypes.FP16, TensorView(stride=(m, i(1)), layout="ND"))
    assert "stride=[M, 1]" in pypto.type(inner)


def test_positional_table_names_the_registry_parameters():
    from ptoc.ir.printer import _PYPTO_ARGS
    from ptoc.ops.registry import lookup

    for op, names in _PYPTO_ARGS.items():
        assert lookup(op) is not None and lookup(op).params == names, op


ORDER_SRC = """\
import pypto.language as pl

@pl.program
class order:
    @pl.function(type=pl.FunctionType.Orchestration)
    def alpha(self, a: pl.Tensor[[16, 16], pl.FP32], o: pl.Out[pl.Tensor[[16, 16], pl.FP32]]) -> pl.Tensor[[16, 16], pl.FP32]:
        o = self.zeta(a, o)
        o = self.beta(a, o)
        return o

    @pl.function(type=pl.FunctionType.AIV)
    def zeta(self, a: pl.Tensor[[16, 16], pl.FP32], o: pl.Out[pl.Tensor[[16, 16], pl.FP32]]) -> pl.Tensor[[16, 16], pl.FP32]:
        t: pl.Tile[[16, 16], pl.FP32, pl.Mem.Vec] = pl.tile.load(a, [0, 0], [16, 16], target_memory=pl.Mem.Vec)
        r: pl.Tensor[[16, 16], pl.FP32] = pl.tile.store(t, [0, 0], o)
        return r

    @pl.function(type=pl.FunctionType.AIV)
    def gamma(self, a: pl.Tensor[[16, 16], pl.FP32], o: pl.Out[pl.Tensor[[16, 16], pl.FP32]]) -> pl.Tensor[[16, 16], pl.FP32]:
        t: pl.Tile[[16, 16], pl.FP32, pl.Mem.Vec] = pl.tile.load(a, [0, 0], [16, 16], target_memory=pl.Mem.Vec)
        r: pl.Tensor[[16, 16], pl.FP32] = pl.tile.store(t, [0, 0], o)
        return r

    @pl.function(type=pl.FunctionType.AIV)
    def beta(self, a: pl.Tensor[[16, 16], pl.FP32], o: pl.Out[pl.Tensor[[16, 16], pl.FP32]]) -> pl.Tensor[[16, 16], pl.FP32]:
        t: pl.Tile[[16, 16], pl.FP32, pl.Mem.Vec] = pl.tile.load(a, [0, 0], [16, 16], target_memory=pl.Mem.Vec)
        r: pl.Tensor[[16, 16], pl.FP32] = pl.tile.store(t, [0, 0], o)
        return r
"""


def test_functions_print_in_pypto_order_callees_first():
    # PyPTO's Program is a map keyed by name, printed depth first in that order with every function's
    # callees (by name) before it: alpha calls zeta and beta -> beta, zeta, alpha, then gamma.
    prog = frontend(ORDER_SRC, "order.ir", CompileContext())
    pypto = print_program(prog, style="pypto")
    at = [pypto.index(f"def {n}(") for n in ("beta", "zeta", "alpha", "gamma")]
    assert at == sorted(at), pypto
    ptoc = print_program(prog, style="ptoc")
    at = [ptoc.index(f"def {n}(") for n in ("alpha", "zeta", "gamma", "beta")]
    assert at == sorted(at)  # ptoc's own form keeps the source order


LOOP_SRC = """\
import pypto.language as pl

@pl.program
class carried:
    @pl.function(type=pl.FunctionType.AIV)
    def k(self, a: pl.Tensor[[32, 64], pl.FP32], o: pl.Out[pl.Tensor[[32, 64], pl.FP32]]) -> pl.Tensor[[32, 64], pl.FP32]:
        t: pl.Tile[[32, 64], pl.FP32, pl.Mem.Vec] = pl.tile.load(a, [0, 0], [32, 64], target_memory=pl.Mem.Vec)
        r: pl.Tensor[[32, 64], pl.FP32] = pl.tile.store(t, [0, 0], o)
        return r

    @pl.function(type=pl.FunctionType.Orchestration)
    def main(self, a: pl.Tensor[[32, 64], pl.FP32], o: pl.Out[pl.Tensor[[32, 64], pl.FP32]]) -> pl.Tensor[[32, 64], pl.FP32]:
        for i, (acc,) in pl.range(3, init_values=(o,)):
            nxt: pl.Tensor[[32, 64], pl.FP32] = self.k(a, acc)
            out = pl.yield_(nxt)
        return out
"""


def test_a_carried_loop_prints_its_yield_inside_the_runtime_scope():
    # PyPTO's MaterializeRuntimeScopes wraps the whole loop body, yield included, in `with pl.scope():`;
    # ptoc's IR keeps the yield after the scope, and the pypto style prints it where PyPTO does.
    from ptoc.passes.MaterializeRuntimeScopes import MaterializeRuntimeScopes

    ctx = CompileContext()
    prog = MaterializeRuntimeScopes().run(frontend(LOOP_SRC, "carried.ir", ctx), ctx)
    text = print_program(prog, style="pypto")
    lines = text.splitlines()
    at = next(i for i, ln in enumerate(lines) if ln.strip().startswith("for i, (acc,)"))
    assert [ln.strip() for ln in lines[at + 1:at + 4]] == [
        "with pl.scope():",
        "nxt: pl.Tensor[[32, 64], pl.FP32] = self.k(a, acc)",
        "out = pl.yield_(nxt)"]
    indent = len(lines[at + 1]) - len(lines[at + 1].lstrip())
    assert len(lines[at + 3]) - len(lines[at + 3].lstrip()) == indent + 4  # inside the scope
    own = print_program(prog, style="ptoc")
    own_lines = own.splitlines()
    y = next(ln for ln in own_lines if "pl.yield_(nxt)" in ln)
    assert len(y) - len(y.lstrip()) == indent  # ptoc's own form: after the scope
    again = frontend(text, "again.py", CompileContext())
    main = next(f for f in prog.functions if f.name == "main")
    assert next(f for f in again.functions if f.name == "main").body == main.body
    assert print_program(again, style="pypto") == text


OPEN_LOADS = """\
import pypto.language as pl

@pl.program
class open_loads:
    @pl.function(type=pl.FunctionType.InCore)
    def vec(self, a: pl.Tensor[[16, 64], pl.FP32], o: pl.Out[pl.Tensor[[16, 64], pl.FP32]]) -> pl.Tensor[[16, 64], pl.FP32]:
        t = pl.load(a, [0, 0], [16, 64])
        u = pl.tile.exp(t)
        r = pl.store(u, [0, 0], o)
        return r

    @pl.function(type=pl.FunctionType.InCore)
    def cube(self, a: pl.Tensor[[16, 16], pl.BF16], b: pl.Tensor[[16, 16], pl.BF16], o: pl.Out[pl.Tensor[[16, 16], pl.FP32]]) -> pl.Tensor[[16, 16], pl.FP32]:
        x = pl.load(a, [0, 0], [16, 16])
        y = pl.load(b, [0, 0], [16, 16])
        z = pl.matmul(x, y)
        r = pl.store(z, [0, 0], o)
        return r
"""


def test_an_open_load_of_a_vector_kernel_prints_pypto_default_space():
    # PyPTO's pl.load defaults to target_memory=pl.Mem.Vec, so its dumps state it; in a kernel with no cube
    # op ptoc decides Vec for an open load too, and the pypto style states it. Beside a matmul the load
    # stays open (ptoc stages a cube operand in Mat; PyPTO retargets its Vec default later).
    prog = frontend(OPEN_LOADS, "open.ir", CompileContext())
    text = print_program(prog, style="pypto")
    assert "t = pl.tile.load(a, [0, 0], [16, 64], [16, 64], target_memory=pl.Mem.Vec)" in text
    assert "x = pl.tile.load(a, [0, 0], [16, 16], [16, 16])" in text
    assert "target_memory" not in print_program(prog, style="ptoc")


CONST_SRC = """\
import pypto.language as pl

@pl.program
class consts:
    @pl.function(type=pl.FunctionType.AIV)
    def k(self, a: pl.Tensor[[64, 64], pl.FP32], o: pl.Out[pl.Tensor[[64, 64], pl.FP32]]) -> pl.Tensor[[64, 64], pl.FP32]:
        r0: pl.Scalar[pl.INDEX] = 1 * 16
        r1: pl.Scalar[pl.INDEX] = r0 * 16 + 2
        r2: pl.Scalar[pl.INDEX] = pl.max(2, 3) + 4
        t: pl.Tile[[16, 64], pl.FP32, pl.Mem.Vec] = pl.tile.load(a, [r0 + r1 + r2, 0], [16, 64], target_memory=pl.Mem.Vec)
        r: pl.Tensor[[64, 64], pl.FP32] = pl.tile.store(t, [0, 0], o)
        return r
"""


def test_an_operator_tree_of_constants_prints_its_leaves_typed():
    # PyPTO's printer (`PrintBinaryOp`, `IsPureConstIntTree`) types the leaves of an operator tree whose
    # leaves are all integer constants, so Python reading `1 * 16` back cannot fold it to 16; a tree with a
    # name in it keeps bare literals, and ptoc's own form keeps them everywhere
    prog = frontend(CONST_SRC, "consts.ir", CompileContext())
    pypto = print_program(prog, style="pypto")
    assert "r0: pl.Scalar[pl.INDEX] = pl.const(1, pl.INDEX) * pl.const(16, pl.INDEX)" in pypto
    assert "r1: pl.Scalar[pl.INDEX] = r0 * 16 + 2" in pypto
    assert "r2: pl.Scalar[pl.INDEX] = pl.max(pl.const(2, pl.INDEX), pl.const(3, pl.INDEX)) + pl.const(4, pl.INDEX)" in pypto
    assert "= 1 * 16" in print_program(prog, style="ptoc")
    # read back, the typed form gives the same scalar statements (the pypto form also writes the load's
    # valid shape, so the load itself is compared elsewhere)
    again = frontend(pypto, "consts.ir", CompileContext())
    assert again.function("k").body[:3] == prog.function("k").body[:3]
