"""OutlineClusterScopes: `pl.cluster()` scopes become Group functions, `pl.spmd(n)` scopes Spmd functions,
and the launch of an spmd block rides on the call. Each test gives a program as written and the program
it must become (written by hand), compared structurally after ConvertToSSA and this pass. The `pypto_*`
tests restate PyPTO's Before/Expected pairs (tests/ut/ir/transforms/test_outline_cluster_scopes.py
there) in ptoc's text."""

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from ptoc.context import CompileContext
from ptoc.diagnostics import CompileError
from ptoc.frontend.parser import parse_program
from ptoc.ir.printer import print_program
from ptoc.passes.ConvertToSSA import ConvertToSSA
from ptoc.passes.manager import run_pipeline
from ptoc.passes.OutlineClusterScopes import OutlineClusterScopes

CTX = CompileContext()
T = "pl.Tensor[[64], pl.FP32]"
TILE = "pl.Tile[[64], pl.FP32, pl.Mem.Vec]"
PTOC = str(Path(sys.executable).with_name("ptoc"))

KERNEL = f"""
    @pl.function(type=pl.FunctionType.InCore)
    def kernel(self, x: {T}, out: pl.Out[{T}]) -> {T}:
        t: {TILE} = pl.tile.load(x, [0], [64], target_memory=pl.Mem.Vec)
        u: {TILE} = pl.tile.add(t, t)
        out = pl.tile.store(u, [0], out)
        return out
"""


def program(*functions: str) -> str:
    body = "\n".join(textwrap.indent(textwrap.dedent(f).strip("\n"), " " * 4) for f in functions)
    return f"@pl.program\nclass p:\n{body}\n"


def outline(before: str):
    prog = parse_program(before, "before.ir", ctx=CTX)
    return run_pipeline(prog, CTX, passes=[ConvertToSSA, OutlineClusterScopes])


def assert_outlines(before: str, expected: str):
    out = outline(before)
    want = run_pipeline(parse_program(expected, "expected.ir", ctx=CTX), CTX, passes=[ConvertToSSA])
    assert out == want, f"got:\n{print_program(out)}\nexpected:\n{print_program(want)}"
    assert OutlineClusterScopes().run(out, CTX) is out  # nothing left to outline
    return out


def test_pypto_cluster_scopes_become_group_functions_numbered_in_order():
    assert_outlines(program(f"""
        @pl.function
        def main(self, x: {T}) -> {T}:
            with pl.cluster():
                y: {T} = pl.add(x, x)
            with pl.cluster():
                z: {T} = pl.mul(y, y)
            return z
    """), program(f"""
        @pl.function(type=pl.FunctionType.Group)
        def main_cluster_0(self, x: {T}) -> {T}:
            y: {T} = pl.add(x, x)
            return y
        @pl.function(type=pl.FunctionType.Group)
        def main_cluster_1(self, y: {T}) -> {T}:
            z: {T} = pl.mul(y, y)
            return z
        @pl.function
        def main(self, x: {T}) -> {T}:
            y: {T} = self.main_cluster_0(x)
            z: {T} = self.main_cluster_1(y)
            return z
    """))


def test_pypto_a_scope_without_results_has_no_return_and_is_called_as_a_statement():
    assert_outlines(program(f"""
        @pl.function
        def main(self, x: {T}) -> {T}:
            with pl.cluster():
                _y: {T} = pl.add(x, x)
            return x
    """), program(f"""
        @pl.function(type=pl.FunctionType.Group)
        def main_cluster_0(self, x: {T}):
            _y: {T} = pl.add(x, x)
        @pl.function
        def main(self, x: {T}) -> {T}:
            self.main_cluster_0(x)
            return x
    """))


def test_pypto_a_standalone_spmd_block_becomes_an_spmd_function_launched_by_its_call():
    assert_outlines(program(KERNEL, f"""
        @pl.function(type=pl.FunctionType.Orchestration)
        def main(self, x: {T}, out: pl.Out[{T}]) -> {T}:
            with pl.spmd(4, sync_start=True):
                out = self.kernel(x, out)
            return out
    """), program(f"""
        @pl.function(type=pl.FunctionType.Spmd)
        def main_spmd_0(self, x: {T}, out: pl.Out[{T}]) -> {T}:
            out_1 = self.kernel(x, out)
            return out
    """, KERNEL, f"""
        @pl.function(type=pl.FunctionType.Orchestration)
        def main(self, x: {T}, out: pl.Out[{T}]) -> {T}:
            out_1: {T} = self.main_spmd_0(x, out, attrs={{"core_num": 4, "sync_start": True}})
            return out_1
    """))


def test_pypto_an_spmd_block_in_a_cluster_is_unwrapped_and_its_launch_moves_to_the_group_call():
    assert_outlines(program(KERNEL, f"""
        @pl.function(type=pl.FunctionType.Orchestration)
        def main(self, x: {T}, out: pl.Out[{T}]) -> {T}:
            with pl.cluster():
                with pl.spmd(8):
                    out = self.kernel(x, out)
            return out
    """), program(f"""
        @pl.function(type=pl.FunctionType.Group, attrs={{"spmd_unwrapped": True}})
        def main_cluster_0(self, x: {T}, out: pl.Out[{T}]) -> {T}:
            out_1 = self.kernel(x, out)
            return out
    """, KERNEL, f"""
        @pl.function(type=pl.FunctionType.Orchestration)
        def main(self, x: {T}, out: pl.Out[{T}]) -> {T}:
            out_1: {T} = self.main_cluster_0(x, out, attrs={{"core_num": 8}})
            return out_1
    """))


def test_pypto_a_stored_outside_tensor_is_an_out_parameter_returned_and_read_through_the_call():
    t = "pl.Tensor[[16, 128], pl.FP32]"
    assert_outlines(program(f"""
        @pl.function
        def main(self, x: {t}) -> {t}:
            buf: {t} = pl.create_tensor([16, 128], dtype=pl.FP32)
            with pl.cluster():
                tile = pl.tile.full([16, 128], dtype=pl.FP32, value=0.0)
                pl.tile.store(tile, [0, 0], buf)
            result: {t} = pl.add(buf, x)
            return result
    """), program(f"""
        @pl.function(type=pl.FunctionType.Group)
        def main_cluster_0(self, buf: pl.Out[{t}]) -> {t}:
            tile = pl.tile.full([16, 128], dtype=pl.FP32, value=0.0)
            buf_store = pl.tile.store(tile, [0, 0], buf)
            return buf
        @pl.function
        def main(self, x: {t}) -> {t}:
            buf: {t} = pl.create_tensor([16, 128], dtype=pl.FP32)
            buf_store: {t} = self.main_cluster_0(buf)
            result: {t} = pl.add(buf_store, x)
            return result
    """))


def test_a_named_store_into_an_outside_tensor_keeps_a_dead_copy_and_the_parameter_stays_out():
    # PyPTO's outliner (StoreEvalToAssignMutator) keeps `y = store(..., buf)` and adds `buf_store = y`; the
    # copy is not a read of `buf`, which stays Out (PyPTO derives directions from the body as written).
    # Expected: PyPTO's own dump after OutlineClusterScopes for this program, names aside.
    t = "pl.Tensor[[16, 128], pl.FP32]"
    assert_outlines(program(f"""
        @pl.function
        def main(self, x: {t}) -> {t}:
            buf: {t} = pl.create_tensor([16, 128], dtype=pl.FP32)
            with pl.cluster():
                tile = pl.tile.full([16, 128], dtype=pl.FP32, value=0.0)
                y: {t} = pl.tile.store(tile, [0, 0], buf)
            result: {t} = pl.add(buf, x)
            return result
    """), program(f"""
        @pl.function(type=pl.FunctionType.Group)
        def main_cluster_0(self, buf: pl.Out[{t}]) -> {t}:
            tile = pl.tile.full([16, 128], dtype=pl.FP32, value=0.0)
            y: {t} = pl.tile.store(tile, [0, 0], buf)
            buf_store: {t} = y
            return buf
        @pl.function
        def main(self, x: {t}) -> {t}:
            buf: {t} = pl.create_tensor([16, 128], dtype=pl.FP32)
            y: {t} = self.main_cluster_0(buf)
            result: {t} = pl.add(y, x)
            return result
    """))


def test_pypto_a_repeated_name_hint_gets_a_numeric_suffix():
    assert_outlines(program(f"""
        @pl.function
        def main(self, x: {T}) -> {T}:
            with pl.cluster(name_hint="grp"):
                y: {T} = pl.add(x, x)
            with pl.cluster(name_hint="grp"):
                z: {T} = pl.mul(y, y)
            return z
    """), program(f"""
        @pl.function(type=pl.FunctionType.Group)
        def grp(self, x: {T}) -> {T}:
            y: {T} = pl.add(x, x)
            return y
        @pl.function(type=pl.FunctionType.Group)
        def grp_0(self, y: {T}) -> {T}:
            z: {T} = pl.mul(y, y)
            return z
        @pl.function
        def main(self, x: {T}) -> {T}:
            y: {T} = self.grp(x)
            z: {T} = self.grp_0(y)
            return z
    """))


def test_a_tensor_read_and_passed_to_an_out_parameter_is_inout():
    t = "pl.Tensor[[16, 128], pl.FP32]"
    tile = "pl.Tile[[16, 128], pl.FP32, pl.Mem.Vec]"
    out = outline(program(f"""
        @pl.function(type=pl.FunctionType.InCore)
        def helper(self, src: {t}, dst: pl.Out[{t}]) -> {t}:
            v: {tile} = pl.tile.load(src, [0, 0], [16, 128], target_memory=pl.Mem.Vec)
            dst = pl.tile.store(v, [0, 0], dst)
            return dst
    """, f"""
        @pl.function
        def main(self, x: {t}, buf: pl.Out[{t}], keep: pl.Out[{t}]) -> {t}:
            with pl.cluster():
                back: {tile} = pl.tile.load(buf, [0, 0], [16, 128], target_memory=pl.Mem.Vec)
                pl.tile.store(back, [0, 0], keep)
                res: {t} = self.helper(x, buf)
            return res
    """))
    params = {p.name: p.direction for p in out.function("main_cluster_0").params}
    assert params == {"buf": "InOut", "keep": "Out", "x": "In"}


def test_two_spmd_blocks_in_one_cluster_are_a_user_error():
    with pytest.raises(CompileError) as e:
        outline(program(f"""
            @pl.function
            def main(self, x: {T}) -> {T}:
                with pl.cluster():
                    with pl.spmd(4):
                        y: {T} = pl.add(x, x)
                    with pl.spmd(2):
                        z: {T} = pl.mul(y, x)
                return z
        """))
    assert e.value.diagnostics[0].code == "PTOC-E0613" and e.value.diagnostics[0].span.line == 8  # the second spmd block


CLUSTER_PROGRAM = """
import pypto.language as pl

@pl.program
class p:
    @pl.function(type=pl.FunctionType.Orchestration)
    def main(self, a: pl.Tensor[[64, 128], pl.FP32], out: pl.Out[pl.Tensor[[64, 128], pl.FP32]]
             ) -> pl.Tensor[[64, 128], pl.FP32]:
        with pl.cluster():
            with pl.at(level=pl.Level.CORE_GROUP):
                for i in pl.range(4):
                    r0: pl.Scalar[pl.INDEX] = i * 16
                    t: pl.Tile[[16, 128], pl.FP32, pl.Mem.Vec] = pl.tile.load(a, [r0, 0], [16, 128],
                                                                              target_memory=pl.Mem.Vec)
                    u: pl.Tile[[16, 128], pl.FP32, pl.Mem.Vec] = pl.tile.adds(t, 1.0)
                    out = pl.tile.store(u, [r0, 0], out)
        return out
"""


def test_a_kernel_scope_inside_a_cluster_is_called_from_the_group_and_the_program_validates(tmp_path):
    src = tmp_path / "cluster.ir"
    src.write_text(CLUSTER_PROGRAM)
    r = subprocess.run([PTOC, "passes", str(src), "--validate"], capture_output=True, text=True, timeout=300,
                       check=False)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "OutlineClusterScopes" in r.stdout and "kernels run: main_incore_0" in r.stdout
    from ptoc.reference.interp import run_function

    lowered = run_pipeline(parse_program(CLUSTER_PROGRAM, "cluster.ir", ctx=CTX), CTX)
    assert lowered.function("main_cluster_0").func_type == "Group"
    a = np.random.default_rng(6).standard_normal((64, 128)).astype(np.float32)
    got = run_function(lowered, "main", {"a": a, "out": np.zeros_like(a)}, CTX)
    np.testing.assert_allclose(got["out"], a + np.float32(1.0), rtol=1e-6)  # numpy, independently of ptoc


SPMD_PROGRAM = """
import pypto.language as pl

@pl.program
class p:
    @pl.function(type=pl.FunctionType.Orchestration)
    def main(self, a: pl.Tensor[[64, 128], pl.FP32], out: pl.Out[pl.Tensor[[64, 128], pl.FP32]]
             ) -> pl.Tensor[[64, 128], pl.FP32]:
        with pl.spmd(4):
            with pl.at(level=pl.Level.CORE_GROUP):
                b: pl.Scalar[pl.INDEX] = pl.tile.get_block_idx()
                r0: pl.Scalar[pl.INDEX] = b * 16
                t: pl.Tile[[16, 128], pl.FP32, pl.Mem.Vec] = pl.tile.load(a, [r0, 0], [16, 128],
                                                                          target_memory=pl.Mem.Vec)
                u: pl.Tile[[16, 128], pl.FP32, pl.Mem.Vec] = pl.tile.adds(t, 1.0)
                out = pl.tile.store(u, [r0, 0], out)
        return out
"""


def test_an_outlined_spmd_block_runs_once_per_block_at_every_stage(tmp_path):
    src = tmp_path / "spmd.ir"
    src.write_text(SPMD_PROGRAM)
    r = subprocess.run([PTOC, "passes", str(src), "--validate"], capture_output=True, text=True, timeout=300,
                       check=False)
    assert r.returncode == 0, r.stdout + r.stderr
    # the Spmd function's call carries core_num 4: its kernel runs for block indices 0..3
    assert "kernels run: " + ", ".join(["main_incore_0"] * 4) in r.stdout
    from ptoc.reference.interp import run_function

    lowered = run_pipeline(parse_program(SPMD_PROGRAM, "spmd.ir", ctx=CTX), CTX)
    assert lowered.function("main_spmd_0").func_type == "Spmd"
    a = np.random.default_rng(7).standard_normal((64, 128)).astype(np.float32)
    got = run_function(lowered, "main", {"a": a, "out": np.zeros_like(a)}, CTX)
    np.testing.assert_allclose(got["out"], a + np.float32(1.0), rtol=1e-6)  # every block's 16 rows
