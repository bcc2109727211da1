"""OutlineHierarchyScopes: each `pl.at` scope of a level other than CORE_GROUP becomes a function carrying
the level (and role) in its decorator, called where the scope was. Each test gives a program as written
and the program it must become (written by hand), compared structurally after ConvertToSSA and this
pass. The `pypto_*` tests restate PyPTO's Before/Expected pairs (tests/ut/ir/transforms/
test_outline_hierarchy_scopes.py there) in ptoc's text."""

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
from ptoc.passes.OutlineHierarchyScopes import OutlineHierarchyScopes

CTX = CompileContext()
T = "pl.Tensor[[64], pl.FP32]"
HOST = "with pl.at(level=pl.Level.HOST, role=pl.Role.Orchestrator):"
PTOC = str(Path(sys.executable).with_name("ptoc"))


def program(*functions: str) -> str:
    body = "\n".join(textwrap.indent(textwrap.dedent(f).strip("\n"), " " * 4) for f in functions)
    return f"@pl.program\nclass p:\n{body}\n"


def outline(before: str):
    prog = parse_program(before, "before.ir", ctx=CTX)
    return run_pipeline(prog, CTX, passes=[ConvertToSSA, OutlineHierarchyScopes])


def assert_outlines(before: str, expected: str):
    out = outline(before)
    want = run_pipeline(parse_program(expected, "expected.ir", ctx=CTX), CTX, passes=[ConvertToSSA])
    assert out == want, f"got:\n{print_program(out)}\nexpected:\n{print_program(want)}"
    assert OutlineHierarchyScopes().run(out, CTX) is out  # nothing left to outline
    return out


def test_pypto_orchestrator_scope_becomes_a_function_with_level_and_role():
    assert_outlines(program(f"""
        @pl.function
        def main(self, x: {T}) -> {T}:
            {HOST}
                y: {T} = pl.add(x, x)
            return y
    """), program(f"""
        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def main_host_orch_0(self, x: {T}) -> {T}:
            y: {T} = pl.add(x, x)
            return y
        @pl.function
        def main(self, x: {T}) -> {T}:
            y: {T} = self.main_host_orch_0(x)
            return y
    """))


def test_pypto_level_only_scopes_are_numbered_per_function_and_named_by_level():
    assert_outlines(program(f"""
        @pl.function
        def main(self, x: {T}) -> {T}:
            with pl.at(level=pl.Level.CHIP):
                y: {T} = pl.add(x, x)
            with pl.at(level=pl.Level.GLOBAL, role=pl.Role.Orchestrator):
                z: {T} = pl.mul(y, x)
            return z
    """), program(f"""
        @pl.function(level=pl.Level.CHIP)
        def main_chip_0(self, x: {T}) -> {T}:
            y: {T} = pl.add(x, x)
            return y
        @pl.function(level=pl.Level.GLOBAL, role=pl.Role.Orchestrator)
        def main_global_orch_1(self, y: {T}, x: {T}) -> {T}:
            z: {T} = pl.mul(y, x)
            return z
        @pl.function
        def main(self, x: {T}) -> {T}:
            y: {T} = self.main_chip_0(x)
            z: {T} = self.main_global_orch_1(y, x)
            return z
    """))


def test_pypto_a_nested_scope_is_named_after_the_outer_function_and_made_first():
    assert_outlines(program(f"""
        @pl.function
        def main(self, x: {T}) -> {T}:
            with pl.at(level=pl.Level.GLOBAL, role=pl.Role.Orchestrator):
                y: {T} = pl.add(x, x)
                {HOST}
                    z: {T} = pl.mul(y, y)
            return z
    """), program(f"""
        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def main_global_orch_0_host_orch_0(self, y: {T}) -> {T}:
            z: {T} = pl.mul(y, y)
            return z
        @pl.function(level=pl.Level.GLOBAL, role=pl.Role.Orchestrator)
        def main_global_orch_0(self, x: {T}) -> {T}:
            y: {T} = pl.add(x, x)
            z: {T} = self.main_global_orch_0_host_orch_0(y)
            return z
        @pl.function
        def main(self, x: {T}) -> {T}:
            z: {T} = self.main_global_orch_0(x)
            return z
    """))


def test_pypto_a_scope_in_a_branch_is_outlined_in_place():
    assert_outlines(program(f"""
        @pl.function
        def main(self, x: {T}, cond: pl.Scalar[pl.BOOL]) -> {T}:
            if cond:
                {HOST}
                    y0: {T} = pl.add(x, x)
                y: {T} = pl.add(y0, x)
            else:
                y: {T} = pl.mul(x, x)
            return y
    """), program(f"""
        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def main_host_orch_0(self, x: {T}) -> {T}:
            y0: {T} = pl.add(x, x)
            return y0
        @pl.function
        def main(self, x: {T}, cond: pl.Scalar[pl.BOOL]) -> {T}:
            if cond:
                y0: {T} = self.main_host_orch_0(x)
                y: {T} = pl.add(y0, x)
            else:
                y: {T} = pl.mul(x, x)
            return y
    """))


def test_a_stored_tensor_is_an_out_parameter_not_a_result_and_name_hint_names_the_function():
    tile = "pl.Tile[[64], pl.FP32, pl.Mem.Vec]"
    assert_outlines(program(f"""
        @pl.function
        def main(self, x: {T}, out: pl.Out[{T}]) -> {T}:
            with pl.at(level=pl.Level.HOST, name_hint="fill"):
                t: {tile} = pl.tile.load(x, [0], [64], target_memory=pl.Mem.Vec)
                pl.tile.store(t, [0], out)
            return out
    """), program(f"""
        @pl.function(level=pl.Level.HOST)
        def fill(self, x: {T}, out: pl.Out[{T}]):
            t: {tile} = pl.tile.load(x, [0], [64], target_memory=pl.Mem.Vec)
            pl.tile.store(t, [0], out)
        @pl.function
        def main(self, x: {T}, out: pl.Out[{T}]) -> {T}:
            self.fill(x, out)
            return out
    """))


def test_core_group_scopes_and_other_function_kinds_are_left_alone():
    text = program(f"""
        @pl.function(type=pl.FunctionType.Orchestration)
        def orch(self, x: {T}) -> {T}:
            {HOST}
                y: {T} = pl.add(x, x)
            return y
        @pl.function
        def main(self, x: {T}) -> {T}:
            with pl.at(level=pl.Level.CORE_GROUP):
                y: {T} = pl.add(x, x)
            return y
    """)
    prog = run_pipeline(parse_program(text, "a.ir", ctx=CTX), CTX, passes=[ConvertToSSA])
    assert OutlineHierarchyScopes().run(prog, CTX) is prog


HIER_PROGRAM = """
import pypto.language as pl

@pl.program
class p:
    @pl.function
    def main(self, a: pl.Tensor[[64, 128], pl.FP32], b: pl.Tensor[[64, 128], pl.FP32]) -> pl.Tensor[[64, 128], pl.FP32]:
        with pl.at(level=pl.Level.HOST, role=pl.Role.Orchestrator):
            with pl.at(level=pl.Level.CORE_GROUP):
                s: pl.Tensor[[64, 128], pl.FP32] = pl.add(a, b)
            with pl.at(level=pl.Level.CORE_GROUP):
                m: pl.Tensor[[64, 128], pl.FP32] = pl.mul(s, a)
        return m
"""


def test_core_group_scopes_inside_a_host_scope_become_kernels_of_the_host_function(tmp_path):
    src = tmp_path / "hier.ir"
    src.write_text(HIER_PROGRAM)
    r = subprocess.run([PTOC, "passes", str(src), "--validate"], capture_output=True, text=True, timeout=300,
                       check=False)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "kernels run: main_host_orch_0_incore_0, main_host_orch_0_incore_1" in r.stdout
    from ptoc.reference.interp import run_function

    rng = np.random.default_rng(4)
    a, b = (rng.standard_normal((64, 128)).astype(np.float32) for _ in range(2))
    lowered = run_pipeline(parse_program(HIER_PROGRAM, "hier.ir", ctx=CTX), CTX)
    assert lowered.function("main_host_orch_0").func_type == "Orchestration"
    got = run_function(lowered, "main", {"a": a, "b": b}, CTX)
    np.testing.assert_allclose(got["return[0]"], (a + b) * a, rtol=1e-6)  # numpy, independently of ptoc


def test_a_scope_with_a_task_id_is_submitted_and_its_result_and_id_read_out():
    assert_outlines(program(f"""
        @pl.function
        def main(self, x: {T}) -> {T}:
            with pl.at(level=pl.Level.GLOBAL, role=pl.Role.Orchestrator, name_hint="first") as t1:
                y: {T} = pl.add(x, x)
            return y
    """), program(f"""
        @pl.function(level=pl.Level.GLOBAL, role=pl.Role.Orchestrator)
        def first(self, x: {T}) -> {T}:
            y: {T} = pl.add(x, x)
            return y
        @pl.function
        def main(self, x: {T}) -> {T}:
            ret = pl.submit(self.first, x)
            y = ret[0]
            t1 = ret[1]
            return y
    """))


def test_deps_of_a_scope_become_the_deps_of_its_submit():
    assert_outlines(program(f"""
        @pl.function
        def main(self, x: {T}) -> {T}:
            with pl.at(level=pl.Level.GLOBAL, role=pl.Role.Orchestrator, name_hint="a") as ta:
                y: {T} = pl.add(x, x)
            with pl.at(level=pl.Level.HOST, role=pl.Role.Orchestrator, name_hint="b", deps=[ta]) as tb:
                z: {T} = pl.mul(y, y)
            return z
    """), program(f"""
        @pl.function(level=pl.Level.GLOBAL, role=pl.Role.Orchestrator)
        def a(self, x: {T}) -> {T}:
            y: {T} = pl.add(x, x)
            return y
        @pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)
        def b(self, y: {T}) -> {T}:
            z: {T} = pl.mul(y, y)
            return z
        @pl.function
        def main(self, x: {T}) -> {T}:
            ret = pl.submit(self.a, x)
            y = ret[0]
            ta = ret[1]
            ret_1 = pl.submit(self.b, y, deps=[ta])
            z = ret_1[0]
            tb = ret_1[1]
            return z
    """))
