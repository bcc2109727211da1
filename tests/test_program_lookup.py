"""Questions passes ask of a program about one function: its lookup by name (`Program.function`) and
the value types of one function (`ProgramTypes`, what `Pass.function_types` hands a pass)."""

from __future__ import annotations

from dataclasses import replace

from ptoc.context import CompileContext
from ptoc.frontend.parser import parse_program
from ptoc.ir import verifier
from ptoc.ir.nodes import Program, ScalarType, TensorType

SRC = """
import pypto.language as pl

@pl.program
class P:
    @pl.function(type=pl.FunctionType.InCore)
    def k1(self, a: pl.Tensor[[16, 16], pl.FP32]) -> pl.Tensor[[16, 16], pl.FP32]:
        c: pl.Tensor[[16, 16], pl.FP32] = pl.tensor.add(a, a)
        return c

    @pl.function(type=pl.FunctionType.InCore)
    def k2(self, a: pl.Tensor[[8, 32], pl.FP16], n: pl.INDEX) -> pl.Tensor[[8, 32], pl.FP16]:
        d: pl.Tensor[[8, 32], pl.FP16] = pl.tensor.mul(a, a)
        return d
"""


def test_lookup_by_name_finds_each_function_and_misses_unknown_names():
    prog = parse_program(SRC, "p.ir")
    k1, k2 = prog.functions
    assert prog.function("k1") is k1 and prog.function("k2") is k2
    assert prog.function("k3") is None


def test_lookup_answers_for_the_program_it_is_asked_of_not_an_older_one():
    prog = parse_program(SRC, "p.ir")
    assert prog.function("k1") is prog.functions[0]  # builds the table of `prog`
    renamed = replace(prog.functions[0], name="k9")
    newer = replace(prog, functions=(renamed, prog.functions[1]))
    assert newer.function("k9") is renamed and newer.function("k1") is None
    assert prog.function("k1") is prog.functions[0] and prog.function("k9") is None
    # the table is no part of the node: equal programs stay equal, and a rebuilt one prints the same
    assert newer == Program(newer.name, newer.functions, newer.dynamic_dims, newer.bare_function)


def test_lookup_of_a_name_given_twice_is_the_first_function():
    prog = parse_program(SRC, "p.ir")
    k1, k2 = prog.functions
    twice = replace(prog, functions=(k1, replace(k2, name="k1")))
    assert twice.function("k1") is k1


def test_the_types_of_one_function_infer_that_function_alone(monkeypatch):
    prog = parse_program(SRC, "p.ir")
    seen: list[str] = []
    original = verifier.Verifier.function

    def counting(self, f):
        seen.append(f.name)
        return original(self, f)

    monkeypatch.setattr(verifier.Verifier, "function", counting)
    ctx = CompileContext()
    types = verifier.ProgramTypes(prog, ctx, verifier.VerifyCache(ctx))
    k2 = prog.function("k2")
    got = types(k2)
    assert seen == ["k2"]
    d, n = got["d"], got["n"]
    assert isinstance(d, TensorType) and d.dtype.name == "FP16"
    assert [s.value for s in d.shape] == [8, 32]
    assert isinstance(n, ScalarType) and n.dtype.name == "INDEX"
    got["d"] = None  # the dict is the caller's own: asked again (from the cache), the type is there
    assert types(k2)["d"] is d and seen == ["k2"]
