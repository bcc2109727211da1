"""InlineFunctions: the body of an Inline function replaces every call to it, and the Inline functions go.
Each test gives a program as written and the program it must become (written by hand), compared
structurally after this pass alone (it runs before ConvertToSSA, on names that may be assigned again).
The `pypto_*` tests restate PyPTO's own Before/Expected pairs (tests/ut/ir/transforms/
test_inline_functions.py there) in ptoc's text, with ptoc's names for the copies (`<name>_inline`)."""

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
from ptoc.passes.InlineFunctions import InlineFunctions
from ptoc.passes.manager import run_pipeline

CTX = CompileContext()
T = "pl.Tensor[[4], pl.FP32]"
OUT = f"pl.Out[{T}]"
ROOT = Path(__file__).resolve().parents[2]
PTOC = str(Path(sys.executable).with_name("ptoc"))


def program(*functions: str) -> str:
    body = "\n".join(textwrap.indent(textwrap.dedent(f).strip("\n"), " " * 4) for f in functions)
    return f"@pl.program\nclass p:\n{body}\n"


def inline(before: str):
    prog = parse_program(before, "before.ir", ctx=CTX)
    return run_pipeline(prog, CTX, passes=[InlineFunctions], given=frozenset({"structured"}))


def assert_inlines(before: str, expected: str):
    out = inline(before)
    want = parse_program(expected, "expected.ir", ctx=CTX)
    assert out == want, f"got:\n{print_program(out)}\nexpected:\n{print_program(want)}"
    assert InlineFunctions().run(out, CTX) is out  # no Inline function left: nothing changes
    return out


SQUARE = f"""
    @pl.function(type=pl.FunctionType.Inline)
    def square(self, x: {T}) -> {T}:
        y: {T} = pl.mul(x, x)
        return y
"""


def test_pypto_single_call_site_is_spliced_and_the_function_dropped():
    assert_inlines(program(SQUARE, f"""
        @pl.function
        def main(self, a: {T}) -> {T}:
            z: {T} = self.square(a)
            return z
    """), program(f"""
        @pl.function
        def main(self, a: {T}) -> {T}:
            y_inline: {T} = pl.mul(a, a)
            z: {T} = y_inline
            return z
    """))


def test_pypto_two_call_sites_get_their_own_names():
    assert_inlines(program(SQUARE, f"""
        @pl.function
        def main(self, a: {T}, b: {T}) -> {T}:
            a2: {T} = self.square(a)
            b2: {T} = self.square(b)
            s: {T} = pl.add(a2, b2)
            return s
    """), program(f"""
        @pl.function
        def main(self, a: {T}, b: {T}) -> {T}:
            y_inline: {T} = pl.mul(a, a)
            a2: {T} = y_inline
            y_inline_1: {T} = pl.mul(b, b)
            b2: {T} = y_inline_1
            s: {T} = pl.add(a2, b2)
            return s
    """))


def test_pypto_inline_calling_inline_expands_fully():
    assert_inlines(program(SQUARE, f"""
        @pl.function(type=pl.FunctionType.Inline)
        def quad(self, x: {T}) -> {T}:
            sq: {T} = self.square(x)
            sq2: {T} = self.square(sq)
            return sq2
    """, f"""
        @pl.function
        def main(self, a: {T}) -> {T}:
            r: {T} = self.quad(a)
            return r
    """), program(f"""
        @pl.function
        def main(self, a: {T}) -> {T}:
            y_inline_inline: {T} = pl.mul(a, a)
            sq_inline: {T} = y_inline_inline
            y_inline_1_inline: {T} = pl.mul(sq_inline, sq_inline)
            sq2_inline: {T} = y_inline_1_inline
            r: {T} = sq2_inline
            return r
    """))


def test_pypto_out_parameter_rebinding_updates_the_callers_argument():
    proj = f"""
        @pl.function(type=pl.FunctionType.Inline)
        def proj(self, x: {T}, out: {OUT}) -> {T}:
            out = pl.tensor.assemble(out, x, [0])
            return out
    """
    assert_inlines(program(proj, f"""
        @pl.function
        def main(self, a: {T}, qo: {OUT}, ko: {OUT}):
            q: {T} = self.proj(a, qo)
            k: {T} = self.proj(a, ko)
            return q, k
    """), program(f"""
        @pl.function
        def main(self, a: {T}, qo: {OUT}, ko: {OUT}):
            qo = pl.tensor.assemble(qo, a, [0])
            q: {T} = qo
            ko = pl.tensor.assemble(ko, a, [0])
            k: {T} = ko
            return q, k
    """))


def test_pypto_statement_call_drops_the_value_and_return_call_returns_it():
    proj = f"""
        @pl.function(type=pl.FunctionType.Inline)
        def proj(self, x: {T}, out: {OUT}) -> {T}:
            out = pl.tensor.assemble(out, x, [0])
            return out
    """
    assert_inlines(program(proj, f"""
        @pl.function
        def main(self, a: {T}, ext: {OUT}, qo: {OUT}) -> {T}:
            self.proj(a, ext)
            return self.proj(a, qo)
    """), program(f"""
        @pl.function
        def main(self, a: {T}, ext: {OUT}, qo: {OUT}) -> {T}:
            ext = pl.tensor.assemble(ext, a, [0])
            qo = pl.tensor.assemble(qo, a, [0])
            return qo
    """))


def test_pypto_returning_the_argument_into_its_own_name_adds_nothing():
    assert_inlines(program(f"""
        @pl.function(type=pl.FunctionType.Inline)
        def passthrough(self, x: {T}) -> {T}:
            return x
    """, f"""
        @pl.function
        def main(self, a: {T}) -> {T}:
            a = self.passthrough(a)
            return a
    """), program(f"""
        @pl.function
        def main(self, a: {T}) -> {T}:
            return a
    """))


def test_pypto_scopes_and_loops_of_the_body_are_copied_and_unused_inline_functions_dropped():
    assert_inlines(program(f"""
        @pl.function(type=pl.FunctionType.Inline)
        def helper(self, x: {T}, out: {OUT}) -> {T}:
            with pl.at(level=pl.Level.CORE_GROUP):
                for i in pl.range(4):
                    out = pl.tensor.assemble(out, x, [0])
            return out
    """, SQUARE, f"""
        @pl.function
        def main(self, a: {T}, ext: {OUT}) -> {T}:
            r: {T} = self.helper(a, ext)
            return r
    """), program(f"""
        @pl.function
        def main(self, a: {T}, ext: {OUT}) -> {T}:
            with pl.at(level=pl.Level.CORE_GROUP):
                for i_inline in pl.range(4):
                    ext = pl.tensor.assemble(ext, a, [0])
            r: {T} = ext
            return r
    """))


def test_an_expression_argument_is_substituted_or_bound_when_the_body_assigns_it():
    s = "pl.Scalar[pl.INDEX]"
    assert_inlines(program(f"""
        @pl.function(type=pl.FunctionType.Inline)
        def shift(self, n: {s}, k: {s}) -> {s}:
            n = n + k
            return n
    """, f"""
        @pl.function
        def main(self, m: {s}) -> {s}:
            r: {s} = self.shift(m * 2, 3)
            return r
    """), program(f"""
        @pl.function
        def main(self, m: {s}) -> {s}:
            n_inline: {s} = m * 2
            n_inline = n_inline + 3
            r: {s} = n_inline
            return r
    """))


def test_several_results_are_read_through_the_tuple_elements():
    assert_inlines(program(f"""
        @pl.function(type=pl.FunctionType.Inline)
        def both(self, x: {T}) -> tuple[{T}, {T}]:
            s: {T} = pl.add(x, x)
            m: {T} = pl.mul(x, x)
            return s, m
    """, f"""
        @pl.function
        def main(self, a: {T}) -> {T}:
            t = self.both(a)
            r: {T} = pl.sub(t[0], t[1])
            return r
    """), program(f"""
        @pl.function
        def main(self, a: {T}) -> {T}:
            s_inline: {T} = pl.add(a, a)
            m_inline: {T} = pl.mul(a, a)
            r: {T} = pl.sub(s_inline, m_inline)
            return r
    """))


@pytest.mark.parametrize("helpers, code", [
    ([f"""
        @pl.function(type=pl.FunctionType.Inline)
        def a(self, x: {T}) -> {T}:
            y: {T} = self.b(x)
            return y
    """, f"""
        @pl.function(type=pl.FunctionType.Inline)
        def b(self, x: {T}) -> {T}:
            y: {T} = self.a(x)
            return y
    """], "PTOC-E0610"),
    ([f"""
        @pl.function(type=pl.FunctionType.Inline)
        def a(self, x: {T}) -> {T}:
            y: {T} = pl.add(x, x)
            return y
    """, f"""
        @pl.function
        def b(self, x: {T}) -> {T}:
            y: {T} = pl.add(self.a(x), x)
            return y
    """], "PTOC-E0611"),
])
def test_cycles_and_calls_inside_expressions_are_user_errors(helpers, code):
    text = program(*helpers, f"""
        @pl.function
        def main(self, x: {T}) -> {T}:
            r: {T} = self.a(x)
            return r
    """)
    with pytest.raises(CompileError) as e:
        inline(text)
    assert e.value.diagnostics[0].code == code
    assert e.value.diagnostics[0].span is not None and e.value.diagnostics[0].span.known


INLINE_PROGRAM = """
import pypto.language as pl

@pl.program
class p:
    @pl.function(type=pl.FunctionType.Inline)
    def scale_rows(self, src: pl.Tensor[[64, 128], pl.FP32], dst: pl.Out[pl.Tensor[[64, 128], pl.FP32]],
                   k: pl.Scalar[pl.FP32]) -> pl.Tensor[[64, 128], pl.FP32]:
        with pl.at(level=pl.Level.CORE_GROUP):
            for i in pl.range(4):
                r0: pl.Scalar[pl.INDEX] = i * 16
                t: pl.Tile[[16, 128], pl.FP32, pl.Mem.Vec] = pl.tile.load(src, [r0, 0], [16, 128],
                                                                          target_memory=pl.Mem.Vec)
                u: pl.Tile[[16, 128], pl.FP32, pl.Mem.Vec] = pl.tile.muls(t, k)
                dst = pl.tile.store(u, [r0, 0], dst)
        return dst

    @pl.function(type=pl.FunctionType.Orchestration)
    def main(self, a: pl.Tensor[[64, 128], pl.FP32], out: pl.Out[pl.Tensor[[64, 128], pl.FP32]]
             ) -> pl.Tensor[[64, 128], pl.FP32]:
        out = self.scale_rows(a, out, 0.25)
        return out
"""


def test_a_program_with_an_inline_helper_compiles_its_scope_and_validates(tmp_path):
    src = tmp_path / "inline.ir"
    src.write_text(INLINE_PROGRAM)
    r = subprocess.run([PTOC, "passes", str(src), "--validate"], capture_output=True, text=True, timeout=300,
                       check=False)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "InlineFunctions" in r.stdout and "kernels run: main_incore_0" in r.stdout
    from ptoc.reference.interp import run_function

    prog = parse_program(INLINE_PROGRAM, "inline.ir", ctx=CTX)
    a = np.random.default_rng(3).standard_normal((64, 128)).astype(np.float32)
    got = run_function(run_pipeline(prog, CTX), "main", {"a": a, "out": np.zeros_like(a)}, CTX)
    np.testing.assert_allclose(got["out"], a * np.float32(0.25), rtol=1e-6)  # numpy, independently of ptoc
