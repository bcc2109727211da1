"""The `structured` property (no break or continue left outside Orchestration functions): what its check
reports, whether or not the compile's cache already holds the functions' node indexes."""

import textwrap

from ptoc.context import CompileContext
from ptoc.frontend.parser import parse_program
from ptoc.ir.verifier import VerifyCache
from ptoc.passes.manager import PROPERTIES, _import_properties, input_properties

CTX = CompileContext()
T = "pl.Tensor[[64], pl.FP32]"


def program(kind: str, body: str) -> str:
    body = textwrap.indent(textwrap.dedent(body).strip("\n"), " " * 8)
    return (f"@pl.program\nclass p:\n    @pl.function(type=pl.FunctionType.{kind})\n"
            f"    def main(self, x: {T}, n: pl.Scalar[pl.INDEX]) -> {T}:\n{body}\n")


EXITS = """
for i in pl.range(n):
    if i > 5:
        for j in pl.range(n):
            if j > 2:
                break
            x = pl.add(x, 2.0)
        continue
    x = pl.add(x, 1.0)
return x
"""


def check(text: str, cache=None) -> list[str]:
    _import_properties()
    return PROPERTIES["structured"](parse_program(text, "t.ir", ctx=CTX), CTX, cache)


def test_each_break_and_continue_is_named_in_program_order():
    # the body above: `break` on line 9, `continue` on line 11 (two header lines and the def before it)
    want = ["main: `break` at line 9", "main: `continue` at line 11"]
    assert check(program("InCore", EXITS)) == want
    assert check(program("InCore", EXITS), VerifyCache(CTX)) == want
    assert check(program("Opaque", EXITS)) == want


def test_orchestration_functions_and_loops_without_exits_are_structured():
    assert check(program("Orchestration", EXITS)) == []
    plain = "for i in pl.range(n):\n    x = pl.add(x, 1.0)\nreturn x"
    assert check(program("InCore", plain)) == []
    prog = parse_program(program("InCore", plain), "t.ir", ctx=CTX)
    assert "structured" in input_properties(prog, CTX, VerifyCache(CTX))
    prog = parse_program(program("InCore", EXITS), "t.ir", ctx=CTX)
    assert "structured" not in input_properties(prog, CTX, VerifyCache(CTX))
