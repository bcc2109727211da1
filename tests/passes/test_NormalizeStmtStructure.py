"""NormalizeStmtStructure: `pass` only where a body would otherwise be empty, no empty body, an empty
`else` dropped. Each test gives a program and the program it must become (written by hand)."""

import textwrap

from ptoc.context import CompileContext
from ptoc.frontend.parser import parse_program
from ptoc.ir.nodes import ForStmt, IfStmt, PassStmt
from ptoc.ir.printer import print_program
from ptoc.passes.manager import check_invariants
from ptoc.passes.NormalizeStmtStructure import NormalizeStmtStructure, normalized_violations

CTX = CompileContext()
T = "pl.Tensor[[64], pl.FP32]"


def fn(body: str) -> str:
    body = textwrap.indent(textwrap.dedent(body).strip("\n"), " " * 8)
    return (f"import pypto.language as pl\n\n@pl.program\nclass p:\n    @pl.function\n"
            f"    def main(self, x: {T}, n: pl.Scalar[pl.INDEX]) -> {T}:\n{body}\n")


def normalize(prog):
    out = NormalizeStmtStructure().run(prog, CTX)
    check_invariants(out, CTX, NormalizeStmtStructure())  # checks the normalized_stmts property
    return out


def assert_normalizes(before: str, expected: str) -> None:
    out = normalize(parse_program(before, "before.ir", ctx=CTX))
    want = parse_program(expected, "expected.ir", ctx=CTX)
    assert out == want, f"got:\n{print_program(out)}\nexpected:\n{print_program(want)}"


def test_pass_beside_other_statements_is_dropped_at_every_depth():
    assert_normalizes(fn("""
        pass
        for i in pl.range(n):
            pass
            y = pl.add(x, 1.0)
            pass
        return x
    """), fn("""
        for i in pl.range(n):
            y = pl.add(x, 1.0)
        return x
    """))


def test_a_lone_pass_stays_and_an_else_that_only_passes_goes():
    assert_normalizes(fn("""
        for i in pl.range(n):
            if i > 2:
                pass
            else:
                pass
        return x
    """), fn("""
        for i in pl.range(n):
            if i > 2:
                pass
        return x
    """))


def test_a_body_emptied_by_an_earlier_pass_gets_a_pass():
    import dataclasses

    prog = parse_program(fn("""
        for i in pl.range(n):
            y = pl.add(x, 1.0)
        return x
    """), "t.ir", ctx=CTX)
    loop = prog.functions[0].body[0]
    emptied = dataclasses.replace(prog, functions=(dataclasses.replace(
        prog.functions[0], body=(dataclasses.replace(loop, body=()), prog.functions[0].body[1])),))
    assert normalized_violations(emptied, CTX) == ["main: an empty body"]
    out = normalize(emptied)
    new_loop = out.functions[0].body[0]
    assert isinstance(new_loop, ForStmt) and len(new_loop.body) == 1 and isinstance(new_loop.body[0], PassStmt)


def test_a_normal_program_is_returned_as_it_is():
    prog = parse_program(fn("""
        for i in pl.range(n):
            if i > 2:
                y = pl.add(x, 1.0)
        return x
    """), "t.ir", ctx=CTX)
    assert normalized_violations(prog, CTX) == []
    assert NormalizeStmtStructure().run(prog, CTX) is prog
    assert isinstance(prog.functions[0].body[0].body[0], IfStmt)
