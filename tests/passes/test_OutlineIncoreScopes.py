"""OutlineIncoreScopes: each `pl.at(level=pl.Level.CORE_GROUP)` scope becomes an InCore function and a call.
Each test gives the program as written and the program it must become (written by hand), compared
structurally after ConvertToSSA and this pass. The `pypto_*` tests are PyPTO's own Before/Expected pairs
(tests/ut/ir/transforms/test_outline_incore_scopes.py there), written in ptoc's text: ptoc keeps the
outlined functions before the program's functions, where PyPTO compares programs regardless of order."""

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np

from ptoc.context import CompileContext
from ptoc.frontend.parser import parse_program
from ptoc.ir.printer import print_program
from ptoc.passes.ConvertToSSA import ConvertToSSA
from ptoc.passes.manager import run_pipeline
from ptoc.passes.OutlineIncoreScopes import OutlineIncoreScopes

CTX = CompileContext()
T = "pl.Tensor[[64], pl.FP32]"
AT = "with pl.at(level=pl.Level.CORE_GROUP):"
ROOT = Path(__file__).resolve().parents[2]
PTOC = str(Path(sys.executable).with_name("ptoc"))


def program(*functions: str) -> str:
    body = "\n".join(textwrap.indent(textwrap.dedent(f).strip("\n"), " " * 4) for f in functions)
    return f"@pl.program\nclass p:\n{body}\n"


def outline(before: str):
    prog = parse_program(before, "before.ir", ctx=CTX)
    return run_pipeline(prog, CTX, passes=[ConvertToSSA, OutlineIncoreScopes])


def assert_outlines(before: str, expected: str):
    out = outline(before)
    want = parse_program(expected, "expected.ir", ctx=CTX)
    assert out == want, f"got:\n{print_program(out)}\nexpected:\n{print_program(want)}"
    again = OutlineIncoreScopes().run(out, CTX)
    assert again is out  # nothing left to outline: the same program object
    return out


def test_pypto_simple_incore_scope():
    assert_outlines(program(f"""
        @pl.function
        def main(self, x: {T}) -> {T}:
            {AT}
                y: {T} = pl.add(x, x)
            return y
    """), program(f"""
        @pl.function(type=pl.FunctionType.InCore)
        def main_incore_0(self, x: {T}) -> {T}:
            y: {T} = pl.add(x, x)
            return y
        @pl.function(type=pl.FunctionType.Orchestration)
        def main(self, x: {T}) -> {T}:
            y: {T} = self.main_incore_0(x)
            return y
    """))


def test_pypto_multiple_incore_scopes_numbered_in_order():
    assert_outlines(program(f"""
        @pl.function
        def main(self, x: {T}) -> {T}:
            {AT}
                y: {T} = pl.add(x, x)
            {AT}
                z: {T} = pl.mul(y, y)
            return z
    """), program(f"""
        @pl.function(type=pl.FunctionType.InCore)
        def main_incore_0(self, x: {T}) -> {T}:
            y: {T} = pl.add(x, x)
            return y
        @pl.function(type=pl.FunctionType.InCore)
        def main_incore_1(self, y: {T}) -> {T}:
            z: {T} = pl.mul(y, y)
            return z
        @pl.function(type=pl.FunctionType.Orchestration)
        def main(self, x: {T}) -> {T}:
            y: {T} = self.main_incore_0(x)
            z: {T} = self.main_incore_1(y)
            return z
    """))


def test_pypto_functions_without_scopes_are_preserved():
    assert_outlines(program(f"""
        @pl.function
        def helper(self, x: {T}) -> {T}:
            result: {T} = pl.add(x, x)
            return result
        @pl.function
        def main(self, x: {T}) -> {T}:
            {AT}
                y: {T} = pl.mul(x, x)
            return y
    """), program(f"""
        @pl.function(type=pl.FunctionType.InCore)
        def main_incore_0(self, x: {T}) -> {T}:
            y: {T} = pl.mul(x, x)
            return y
        @pl.function
        def helper(self, x: {T}) -> {T}:
            result: {T} = pl.add(x, x)
            return result
        @pl.function(type=pl.FunctionType.Orchestration)
        def main(self, x: {T}) -> {T}:
            y: {T} = self.main_incore_0(x)
            return y
    """))


def test_pypto_multiple_inputs_in_first_read_order():
    assert_outlines(program(f"""
        @pl.function
        def main(self, x: {T}, y: {T}) -> {T}:
            a: {T} = pl.add(x, y)
            b: {T} = pl.mul(x, y)
            {AT}
                result: {T} = pl.add(a, b)
            return result
    """), program(f"""
        @pl.function(type=pl.FunctionType.InCore)
        def main_incore_0(self, a: {T}, b: {T}) -> {T}:
            result: {T} = pl.add(a, b)
            return result
        @pl.function(type=pl.FunctionType.Orchestration)
        def main(self, x: {T}, y: {T}) -> {T}:
            a: {T} = pl.add(x, y)
            b: {T} = pl.mul(x, y)
            result: {T} = self.main_incore_0(a, b)
            return result
    """))


def test_pypto_multiple_outputs_return_a_tuple_unpacked_at_the_call():
    assert_outlines(program(f"""
        @pl.function
        def main(self, x: {T}) -> {T}:
            {AT}
                y: {T} = pl.add(x, x)
                z: {T} = pl.mul(x, x)
            result: {T} = pl.add(y, z)
            return result
    """), program(f"""
        @pl.function(type=pl.FunctionType.InCore)
        def main_incore_0(self, x: {T}) -> tuple[{T}, {T}]:
            y: {T} = pl.add(x, x)
            z: {T} = pl.mul(x, x)
            return y, z
        @pl.function(type=pl.FunctionType.Orchestration)
        def main(self, x: {T}) -> {T}:
            ret = self.main_incore_0(x)
            y = ret[0]
            z = ret[1]
            result: {T} = pl.add(y, z)
            return result
    """))


def test_pypto_single_input_single_output_with_code_around():
    assert_outlines(program(f"""
        @pl.function
        def main(self, x: {T}) -> {T}:
            a: {T} = pl.add(x, x)
            {AT}
                y: {T} = pl.mul(a, a)
            result: {T} = pl.add(y, y)
            return result
    """), program(f"""
        @pl.function(type=pl.FunctionType.InCore)
        def main_incore_0(self, a: {T}) -> {T}:
            y: {T} = pl.mul(a, a)
            return y
        @pl.function(type=pl.FunctionType.Orchestration)
        def main(self, x: {T}) -> {T}:
            a: {T} = pl.add(x, x)
            y: {T} = self.main_incore_0(a)
            result: {T} = pl.add(y, y)
            return result
    """))


def test_pypto_each_function_numbers_its_own_scopes():
    assert_outlines(program(f"""
        @pl.function
        def func1(self, x: {T}) -> {T}:
            {AT}
                y: {T} = pl.add(x, x)
            return y
        @pl.function
        def func2(self, x: {T}) -> {T}:
            {AT}
                y: {T} = pl.mul(x, x)
            return y
    """), program(f"""
        @pl.function(type=pl.FunctionType.InCore)
        def func1_incore_0(self, x: {T}) -> {T}:
            y: {T} = pl.add(x, x)
            return y
        @pl.function(type=pl.FunctionType.InCore)
        def func2_incore_0(self, x: {T}) -> {T}:
            y: {T} = pl.mul(x, x)
            return y
        @pl.function(type=pl.FunctionType.Orchestration)
        def func1(self, x: {T}) -> {T}:
            y: {T} = self.func1_incore_0(x)
            return y
        @pl.function(type=pl.FunctionType.Orchestration)
        def func2(self, x: {T}) -> {T}:
            y: {T} = self.func2_incore_0(x)
            return y
    """))


def test_pypto_scope_inside_a_branch():
    # as written (before ConvertToSSA) the branches assign y; after it they yield
    assert_outlines(program(f"""
        @pl.function
        def main(self, x: {T}, cond: pl.Scalar[pl.BOOL]) -> {T}:
            if cond:
                {AT}
                    y: {T} = pl.add(x, x)
            else:
                y: {T} = pl.mul(x, x)
            return y
    """), program(f"""
        @pl.function(type=pl.FunctionType.InCore)
        def main_incore_0(self, x: {T}) -> {T}:
            y: {T} = pl.add(x, x)
            return y
        @pl.function(type=pl.FunctionType.Orchestration)
        def main(self, x: {T}, cond: pl.Scalar[pl.BOOL]) -> {T}:
            if cond:
                y: {T} = self.main_incore_0(x)
                y_2 = pl.yield_(y)
            else:
                y_1: {T} = pl.mul(x, x)
                y_2 = pl.yield_(y_1)
            return y_2
    """))


def test_pypto_if_with_yields_inside_the_scope():
    assert_outlines(program(f"""
        @pl.function
        def main(self, x: {T}, cond: pl.Scalar[pl.BOOL]) -> {T}:
            {AT}
                if cond:
                    y: {T} = pl.add(x, x)
                    z = pl.yield_(y)
                else:
                    y2: {T} = pl.mul(x, x)
                    z = pl.yield_(y2)
            return z
    """), program(f"""
        @pl.function(type=pl.FunctionType.InCore)
        def main_incore_0(self, cond: pl.Scalar[pl.BOOL], x: {T}) -> {T}:
            if cond:
                y: {T} = pl.add(x, x)
                z = pl.yield_(y)
            else:
                y2: {T} = pl.mul(x, x)
                z = pl.yield_(y2)
            return z
        @pl.function(type=pl.FunctionType.Orchestration)
        def main(self, x: {T}, cond: pl.Scalar[pl.BOOL]) -> {T}:
            z: {T} = self.main_incore_0(cond, x)
            return z
    """))


def test_pypto_intermediate_values_stay_inside():
    assert_outlines(program(f"""
        @pl.function
        def main(self, x: {T}) -> {T}:
            a: {T} = pl.add(x, x)
            b: {T} = pl.mul(a, a)
            {AT}
                c: {T} = pl.add(b, b)
                d: {T} = pl.mul(c, c)
            e: {T} = pl.add(d, d)
            return e
    """), program(f"""
        @pl.function(type=pl.FunctionType.InCore)
        def main_incore_0(self, b: {T}) -> {T}:
            c: {T} = pl.add(b, b)
            d: {T} = pl.mul(c, c)
            return d
        @pl.function(type=pl.FunctionType.Orchestration)
        def main(self, x: {T}) -> {T}:
            a: {T} = pl.add(x, x)
            b: {T} = pl.mul(a, a)
            d: {T} = self.main_incore_0(b)
            e: {T} = pl.add(d, d)
            return e
    """))


B = "pl.Tensor[[16, 128], pl.FP32]"


def test_pypto_store_only_scope_writes_an_out_param_and_later_reads_see_its_value():
    # The kernel names the store's value `<tensor>_store` and returns the Out parameter itself (its buffer
    # is what the caller sees); the call binds that name, and later reads of the tensor read it
    assert_outlines(program(f"""
        @pl.function
        def main(self, x: {B}) -> {B}:
            buf: {B} = pl.create_tensor([16, 128], dtype=pl.FP32)
            {AT}
                tile: pl.Tile[[16, 128], pl.FP32, pl.Mem.Vec] = pl.tile.full([16, 128], dtype=pl.FP32, value=0.0)
                pl.store(tile, [0, 0], buf)
            result: {B} = pl.add(buf, x)
            return result
    """), program(f"""
        @pl.function(type=pl.FunctionType.InCore)
        def main_incore_0(self, buf: pl.Out[{B}]) -> {B}:
            tile: pl.Tile[[16, 128], pl.FP32, pl.Mem.Vec] = pl.tile.full([16, 128], dtype=pl.FP32, value=0.0)
            buf_store = pl.store(tile, [0, 0], buf)
            return buf
        @pl.function(type=pl.FunctionType.Orchestration)
        def main(self, x: {B}) -> {B}:
            buf: {B} = pl.create_tensor([16, 128], dtype=pl.FP32)
            buf_store: {B} = self.main_incore_0(buf)
            result: {B} = pl.add(buf_store, x)
            return result
    """))


def test_pypto_scope_in_a_loop_takes_the_iter_arg_not_its_initial_value():
    assert_outlines(program(f"""
        @pl.function
        def main(self, init: {T}, y: {T}) -> {T}:
            for sb, (acc,) in pl.range(4, init_values=(init,)):
                {AT}
                    result: {T} = pl.add(acc, y)
                acc_rv = pl.yield_(result)
            return acc_rv
    """), program(f"""
        @pl.function(type=pl.FunctionType.InCore)
        def main_incore_0(self, acc: {T}, y: {T}) -> {T}:
            result: {T} = pl.add(acc, y)
            return result
        @pl.function(type=pl.FunctionType.Orchestration)
        def main(self, init: {T}, y: {T}) -> {T}:
            for sb, (acc,) in pl.range(4, init_values=(init,)):
                result: {T} = self.main_incore_0(acc, y)
                acc_rv = pl.yield_(result)
            return acc_rv
    """))


def test_pypto_loop_inside_the_scope_reading_an_outer_iter_arg():
    assert_outlines(program(f"""
        @pl.function
        def main(self, x: {T}, y: {T}) -> {T}:
            for i, (acc,) in pl.range(3, init_values=(x,)):
                {AT}
                    for j, (inner,) in pl.range(2, init_values=(acc,)):
                        updated: {T} = pl.add(inner, y)
                        inner_rv = pl.yield_(updated)
                acc_rv = pl.yield_(inner_rv)
            return acc_rv
    """), program(f"""
        @pl.function(type=pl.FunctionType.InCore)
        def main_incore_0(self, acc: {T}, y: {T}) -> {T}:
            for j, (inner,) in pl.range(2, init_values=(acc,)):
                updated: {T} = pl.add(inner, y)
                inner_rv = pl.yield_(updated)
            return inner_rv
        @pl.function(type=pl.FunctionType.Orchestration)
        def main(self, x: {T}, y: {T}) -> {T}:
            for i, (acc,) in pl.range(3, init_values=(x,)):
                inner_rv: {T} = self.main_incore_0(acc, y)
                acc_rv = pl.yield_(inner_rv)
            return acc_rv
    """))


def test_pypto_spmd_body_keeps_the_dead_copy_of_its_store():
    # PyPTO's TestOutlineSpmdScope: `out = pl.store(t, ..., out)` becomes `out_1 = store(..., out)` in SSA;
    # the outliner keeps it, adds the copy `out_store = out_1` and returns the Out parameter itself
    assert_outlines(program(f"""
        @pl.function(type=pl.FunctionType.Orchestration)
        def main(self, a: {BIG}, out: pl.Out[{BIG}]) -> {BIG}:
            for i in pl.spmd(4):
                offset = i * 128
                t: pl.Tile[[128, 128], pl.FP32] = pl.load(a, [offset, 0], [128, 128])
                out = pl.store(t, [offset, 0], out)
            return out
    """), program(f"""
        @pl.function(type=pl.FunctionType.InCore)
        def main_incore_0(self, a: {BIG}, out: pl.Out[{BIG}]) -> {BIG}:
            i: pl.Scalar[pl.INDEX] = pl.tile.get_block_idx()
            offset = i * 128
            t: pl.Tile[[128, 128], pl.FP32] = pl.load(a, [offset, 0], [128, 128])
            out_1 = pl.store(t, [offset, 0], out)
            out_store = out_1
            return out
        @pl.function(type=pl.FunctionType.Orchestration)
        def main(self, a: {BIG}, out: pl.Out[{BIG}]) -> {BIG}:
            with pl.spmd(4):
                out_1: {BIG} = self.main_incore_0(a, out)
            return out_1
    """))


BIG = "pl.Tensor[[512, 128], pl.FP32]"
V = "pl.Tile[[16, 128], pl.FP32, pl.Mem.Vec]"
O = "pl.Tensor[[64, 128], pl.FP32]"


def test_every_named_store_into_a_captured_tensor_gets_a_copy_of_its_own_even_in_a_loop():
    # Expected: PyPTO's dump after OutlineIncoreScopes for this program (names aside): its mutator visits
    # the loop body too, and a second store into the same tensor gets a second, fresh result name. A store
    # into a tensor the scope creates is not tracked (no copy), nor is one already named for the tensor.
    assert_outlines(program(f"""
        @pl.function(type=pl.FunctionType.Orchestration)
        def main(self, a: {O}, out: pl.Out[{O}]) -> {O}:
            with pl.pl.at(level=pl.Level.CORE_GROUP):
                for i in pl.range(4):
                    t: {V} = pl.tile.load(a, [i * 16, 0], [16, 128], target_memory=pl.Mem.Vec)
                    y: {O} = pl.tile.store(t, [i * 16, 0], out)
                u: {V} = pl.tile.load(a, [0, 0], [16, 128], target_memory=pl.Mem.Vec)
                z: {O} = pl.tile.store(u, [0, 0], out)
            return out
    """.replace("pl.pl.", "pl.")), program(f"""
        @pl.function(type=pl.FunctionType.InCore)
        def main_incore_0(self, a: {O}, out: pl.Out[{O}]) -> {O}:
            for i in pl.range(4):
                t: {V} = pl.tile.load(a, [i * 16, 0], [16, 128], target_memory=pl.Mem.Vec)
                y: {O} = pl.tile.store(t, [i * 16, 0], out)
                out_store: {O} = y
            u: {V} = pl.tile.load(a, [0, 0], [16, 128], target_memory=pl.Mem.Vec)
            z: {O} = pl.tile.store(u, [0, 0], out)
            out_store_1: {O} = z
            return out
        @pl.function(type=pl.FunctionType.Orchestration)
        def main(self, a: {O}, out: pl.Out[{O}]) -> {O}:
            z: {O} = self.main_incore_0(a, out)
            return z
    """))


def test_the_copy_of_a_store_is_another_name_of_the_buffer_in_the_kernel(tmp_path):
    # scoped_matmul_relu's cube kernel keeps `prod_store = prod_1` to the end of the pipeline; the kernel
    # writes the product once, into its `prod` parameter, and has exactly the three tensor parameters the
    # source gives it (a, b, prod): the copy is neither a buffer nor a parameter, and the program validates
    ex = ROOT / "examples" / "scoped_matmul_relu.ir"
    r = subprocess.run([PTOC, "passes", str(ex), "--dump-after", "MaterializeRuntimeScopes"],
                       capture_output=True, text=True, timeout=600, check=False)
    assert r.returncode == 0, r.stderr
    assert "prod_store = prod_1" in r.stdout
    r = subprocess.run([PTOC, "passes", str(ex), "--validate"], capture_output=True, text=True, timeout=600,
                       check=False)
    assert r.returncode == 0 and "every stage agrees with the front end" in r.stdout, r.stdout + r.stderr
    r = subprocess.run([PTOC, "compile", str(ex), "-o", str(tmp_path / "k.pto")], capture_output=True, text=True,
                       timeout=600, check=False)
    assert r.returncode == 0, r.stderr
    pto = (tmp_path / "k.pto").read_text()
    cube = pto[pto.index("func.func @main_incore_0"):pto.index("func.func @main_incore_1")]
    assert cube.count("pto.make_tensor_view") == 3 and cube.count("pto.tstore") == 1
    assert "prod_store" not in cube  # no view, tile or value of the copy
    import json

    manifest = json.loads((tmp_path / "k.kernels.json").read_text())
    (k,) = [k for k in manifest["kernels"] if k["name"] == "main_incore_0"]
    assert [(p["name"], p["direction"]) for p in k["params"]] == [("a", "In"), ("b", "In"), ("prod", "Out")]


# ---------------------------------------------------------------------------------------------- ptoc's own


def test_a_stored_and_read_tensor_is_inout_a_tensor_stored_only_through_a_loop_stays_in():
    # PyPTO's outliner: only the tensor's own name as a store destination is a write. `acc` is loaded and
    # stored under its own name: InOut. `out` reaches its store as the loop's iter_arg, so the outliner
    # leaves it In; ConvertTensorToTileOps (which runs even when it has nothing to convert) follows the
    # loop and makes it Out: the kernel never loads it, and a loop's initial value is not a read there.
    from ptoc.passes.ConvertTensorToTileOps import ConvertTensorToTileOps

    out = outline(program(f"""
        @pl.function
        def main(self, a: {B}, acc: pl.InOut[{B}], out: pl.Out[{B}]) -> {B}:
            {AT}
                t: pl.Tile[[16, 128], pl.FP32, pl.Mem.Vec] = pl.tile.load(acc, [0, 0], [16, 128], target_memory=pl.Mem.Vec)
                acc = pl.tile.store(t, [0, 0], acc)
                for i in pl.range(2):
                    u: pl.Tile[[16, 128], pl.FP32, pl.Mem.Vec] = pl.tile.load(a, [0, 0], [16, 128], target_memory=pl.Mem.Vec)
                    out = pl.tile.store(u, [0, 0], out)
            return out
    """))
    k = out.function("main_incore_0")
    assert [(p.name, p.direction) for p in k.params] == [("acc", "InOut"), ("out", "In"), ("a", "In")]
    assert out.function("main").func_type == "Orchestration"
    converted = run_pipeline(out, CTX, passes=[ConvertTensorToTileOps])
    k = converted.function("main_incore_0")
    assert [(p.name, p.direction) for p in k.params] == [("acc", "InOut"), ("out", "Out"), ("a", "In")]


def test_an_outlined_name_another_function_has_gets_the_function_name_as_a_prefix():
    out = outline(program(f"""
        @pl.function(type=pl.FunctionType.InCore)
        def main_incore_0(self, x: {T}) -> {T}:
            y: {T} = pl.add(x, x)
            return y
        @pl.function
        def main(self, x: {T}) -> {T}:
            {AT}
                y: {T} = pl.mul(x, x)
            return y
    """))
    # PyPTO's rule: `<function>_<name>`, then `_0`, `_1`, ... while that is taken too
    assert [f.name for f in out.functions] == ["main_main_incore_0", "main_incore_0", "main"]


def test_other_scopes_and_levels_are_left_alone():
    text = program(f"""
        @pl.function(type=pl.FunctionType.Orchestration)
        def main(self, x: {T}) -> {T}:
            with pl.spmd(4):
                y: {T} = pl.add(x, x)
            return y
    """)
    prog = run_pipeline(parse_program(text, "a.ir", ctx=CTX), CTX, passes=[ConvertToSSA])
    assert OutlineIncoreScopes().run(prog, CTX) is prog


def test_the_example_compiles_every_kernel_and_validates_as_a_whole_program(tmp_path):
    ex = ROOT / "examples" / "scoped_add_scale.ir"
    r = subprocess.run([PTOC, "compile", str(ex), "-o", str(tmp_path / "out.pto")], capture_output=True,
                       text=True, timeout=300, check=False)
    assert r.returncode == 0, r.stderr
    pto = (tmp_path / "out.pto").read_text()
    assert pto.count("func.func @main_incore_0(") == 1 and pto.count("func.func @main_incore_1(") == 1
    r = subprocess.run([PTOC, "passes", str(ex), "--validate"], capture_output=True, text=True, timeout=300,
                       check=False)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "program main" in r.stdout and "OutlineIncoreScopes" in r.stdout
    assert "kernels run: main_incore_0, main_incore_1" in r.stdout


def test_the_whole_program_reference_computes_the_users_formula():
    from ptoc.driver import frontend
    from ptoc.reference.interp import run_function

    ex = ROOT / "examples" / "scoped_add_scale.ir"
    prog = frontend(ex.read_text(), ex.name, CTX)
    rng = np.random.default_rng(1)
    a, b = (rng.standard_normal((64, 128)).astype(np.float32) for _ in range(2))
    want = ((a + b) * np.float32(0.5)).astype(np.float32)  # numpy, independently of ptoc
    for stage in (prog, run_pipeline(prog, CTX)):
        got = run_function(stage, "main", {"a": a, "b": b, "out": np.zeros((64, 128), np.float32)}, CTX)
        np.testing.assert_allclose(got["out"], want, rtol=1e-6)


def test_validation_names_the_emitted_pto_when_a_kernel_computes_wrong(monkeypatch):
    from ptoc.driver import frontend
    from ptoc.reference import validate
    from ptoc.reference.pto_exec import run_pto_logical

    def off_by_one(text, name, tensors, scal, dyn):
        out = run_pto_logical(text, name, tensors, scal, dyn)
        return {i: a + 1 for i, a in out.items()}

    import ptoc.reference.pto_exec as pe

    monkeypatch.setattr(pe, "run_pto_logical", off_by_one)
    ex = ROOT / "examples" / "scoped_add_scale.ir"
    prog = frontend(ex.read_text(), ex.name, CTX)
    (rep,) = [r for r in validate.validate_program(prog, CTX, seed=2) if r.label == "program"]
    assert rep.first_failure is not None and rep.first_failure.stage == ".pto (emitted)"


def test_an_assemble_destination_only_written_is_out_and_is_returned_as_the_parameter():
    # the scope writes `big`'s first half and never reads it: an Out parameter, and the kernel's result
    # is `big` itself (the assemble's value is the same buffer)
    H = "pl.Tensor[[32], pl.FP32]"
    assert_outlines(program(f"""
        @pl.function
        def main(self, x: {H}) -> {T}:
            big: {T} = pl.create_tensor([64], dtype=pl.FP32)
            {AT}
                y: {H} = pl.add(x, x)
                big2: {T} = pl.assemble(big, y, [0])
            return big2
    """), program(f"""
        @pl.function(type=pl.FunctionType.InCore)
        def main_incore_0(self, x: {H}, big: pl.Out[{T}]) -> {T}:
            y: {H} = pl.add(x, x)
            big2: {T} = pl.assemble(big, y, [0])
            return big
        @pl.function(type=pl.FunctionType.Orchestration)
        def main(self, x: {H}) -> {T}:
            big: {T} = pl.create_tensor([64], dtype=pl.FP32)
            big2: {T} = self.main_incore_0(x, big)
            return big2
    """))
