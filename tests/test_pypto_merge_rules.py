"""Forms PyPTO's parser accepts because of how it combines a value with what the program declares, run
through the real `ptoc` script: a returned value is not compared with the declared return type (only a
value of another kind is rejected here).

Expected outcomes come from PyPTO's parser (python/pypto/language/parser/ast_parser.py: `parse_return`
builds the statement from the value alone), not from ptoc.
"""

import json
import subprocess
import sys
from pathlib import Path

PTOC = Path(sys.executable).parent / "ptoc"


def run(*args) -> subprocess.CompletedProcess:
    p = subprocess.run([str(PTOC), *map(str, args)], capture_output=True, text=True, timeout=120)
    assert "Traceback" not in p.stderr
    return p


def check(tmp_path, text: str) -> tuple[int, list[dict]]:
    f = tmp_path / "k.ir"
    f.write_text(text)
    p = run("check", "--diagnostics", "json", f)
    return p.returncode, [json.loads(line) for line in p.stdout.splitlines()]


def kernel(body: str, ret: str) -> str:
    return f"""\
import pypto.language as pl

@pl.program
class P:
    @pl.function(type=pl.FunctionType.InCore)
    def k(self, a: pl.Tensor[[16, 64], pl.BF16], o: pl.Out[pl.Tensor[[16, 64], pl.BF16]]) -> {ret}:
        t: pl.Tile[[16, 64], pl.BF16] = pl.load(a, [0, 0], [16, 64])
{body}
"""


STORE = "        r: pl.Tensor[[16, 64], pl.BF16] = pl.store(t, [0, 0], o)\n        return r"


def test_returned_tensor_of_another_dtype_is_accepted(tmp_path):
    # the value is BF16, the declaration FP32: PyPTO keeps the statement as written
    code, diags = check(tmp_path, kernel(STORE, "pl.Tensor[[16, 64], pl.FP32]"))
    assert (code, diags) == (0, [])


def test_returned_tensor_of_another_shape_is_accepted(tmp_path):
    code, diags = check(tmp_path, kernel(STORE, "pl.Tensor[[8, 64], pl.BF16]"))
    assert (code, diags) == (0, [])


def test_returned_value_of_another_kind_is_rejected(tmp_path):
    # a tile where a tensor is declared means nothing to a caller
    code, diags = check(tmp_path, kernel("        return t", "pl.Tensor[[16, 64], pl.BF16]"))
    assert code == 1
    (d,) = diags
    assert (d["code"], d["line"]) == ("PTOC-E0105", 8)
    assert "the value is a tile, the annotation says tensor" in d["message"]


# ------------------------------------------------------------------ a loop's yield at the end of a scope

SCOPED_YIELD = """\
import pypto.language as pl

@pl.program
class P:
    @pl.function(type=pl.FunctionType.AIV)
    def k(self, a: pl.Tensor[[16, 16], pl.FP32], out: pl.Out[pl.Tensor[[16, 16], pl.FP32]]) -> pl.Tensor[[16, 16], pl.FP32]:
        t: pl.Tile[[16, 16], pl.FP32] = pl.load(a, [0, 0], [16, 16])
        r: pl.Tensor[[16, 16], pl.FP32] = pl.store(t, [0, 0], out)
        return r

    @pl.function(type=pl.FunctionType.Orchestration, auto_scope=False)
    def orch(self, a: pl.Tensor[[16, 16], pl.FP32], out: pl.Out[pl.Tensor[[16, 16], pl.FP32]]) -> pl.Tensor[[16, 16], pl.FP32]:
        for i, (acc,) in pl.range(4, init_values=(out,)):
            with pl.scope():
                nxt: pl.Tensor[[16, 16], pl.FP32] = self.k(a, acc)
                acc = pl.yield_(nxt)
        return acc
"""


def test_loop_yield_at_the_end_of_a_scope_is_the_loops_yield(tmp_path):
    # PyPTO's ConvertToSSA sees the carried value through the scope (names a scope defines stay visible
    # after it): the loop carries `acc`, and the canonical form yields after the scope
    f = tmp_path / "k.ir"
    f.write_text(SCOPED_YIELD)
    assert run("check", f).returncode == 0
    lines = run("fmt", f).stdout.splitlines()
    at = lines.index("            with pl.scope():")
    assert lines[at + 1].strip().startswith("nxt: pl.Tensor[[16, 16], pl.FP32] = self.k(a, acc)")
    assert lines[at + 2] == "            acc = pl.yield_(nxt)"
    assert lines[at + 3] == "        return acc"


def test_yield_inside_a_scope_that_is_not_last_is_still_rejected(tmp_path):
    # the yield must end the loop body: a statement after the scope leaves it in the middle
    text = SCOPED_YIELD.replace("                acc = pl.yield_(nxt)\n",
                                "                acc = pl.yield_(nxt)\n            m: pl.Scalar[pl.INDEX] = 1\n")
    f = tmp_path / "k.ir"
    f.write_text(text)
    p = run("check", f)
    assert p.returncode == 1 and ("PTOC-E0111" in p.stderr or "PTOC-E0103" in p.stderr)


# ------------------------------------------------------------------ an annotation naming a filled tile's space

FULL_IN_ACC = """\
import pypto.language as pl

@pl.program
class P:
    @pl.function(type=pl.FunctionType.InCore)
    def k(self, a: pl.Tensor[[16, 64], pl.FP32], o: pl.Out[pl.Tensor[[16, 64], pl.FP32]]) -> pl.Tensor[[16, 64], pl.FP32]:
        z: pl.Tile[[16, 64], pl.FP32, pl.Mem.Acc] = pl.tile.full([16, 64], dtype=pl.FP32, value=0.0)
        r: pl.Tensor[[16, 64], pl.FP32] = pl.store(z, [0, 0], o)
        return r
"""


def test_annotation_chooses_the_space_of_a_filled_tile():
    # PyPTO's parser gives the assignment the annotation's memory space: `z` is an Acc tile, and after the
    # front end the call says so itself (target_memory=), as the passes read it
    from ptoc.context import CompileContext
    from ptoc.driver import frontend
    from ptoc.ir.verifier import function_types

    ctx = CompileContext(arch="a5")
    prog = frontend(FULL_IN_ACC, "k.ir", ctx)
    assert function_types(prog, ctx)["k"]["z"].memory == "Acc"
    (assign,) = [s for s in prog.functions[0].body if getattr(getattr(s, "target", None), "name", "") == "z"]
    assert assign.value.op == "tile.full"
    assert [(k, (v.family, v.member)) for k, v in assign.value.kwargs if k == "target_memory"] == [
        ("target_memory", ("Mem", "Acc"))]


def test_filled_tile_in_acc_is_reported_where_the_fill_is_emitted(tmp_path):
    # accepted by the language, but TEXPANDS cannot write Acc: a diagnostic at the call, not a crash
    f = tmp_path / "k.ir"
    f.write_text(FULL_IN_ACC)
    p = run("check", "--arch", "a5", "--diagnostics", "json", f)
    assert p.returncode == 1
    (d,) = [json.loads(line) for line in p.stdout.splitlines()]
    assert (d["code"], d["line"]) == ("PTOC-E0202", 7)
    assert "tile.full cannot fill a tile in Acc" in d["message"]


def test_annotation_moving_a_loaded_tile_to_another_space_is_rejected(tmp_path):
    # a tile read from memory keeps the space it was loaded into; only a move changes it
    text = FULL_IN_ACC.replace("pl.tile.full([16, 64], dtype=pl.FP32, value=0.0)",
                               "pl.tile.load(a, [0, 0], [16, 64], target_memory=pl.Mem.Vec)")
    f = tmp_path / "k.ir"
    f.write_text(text)
    p = run("check", "--diagnostics", "json", f)
    assert p.returncode == 1
    (d,) = [json.loads(line) for line in p.stdout.splitlines()]
    assert d["code"] == "PTOC-E0105" and "the value lives in Vec, the annotation says Acc" in d["message"]


# ------------------------------------------------------------------ tensor.assemble as subscript writes build it

def _assemble_program(src_shape: str, offsets: str) -> str:
    return f"""\
import pypto.language as pl

@pl.program
class P:
    @pl.function(type=pl.FunctionType.Orchestration)
    def main(self, q: pl.Tensor[[4, 16, 64], pl.FP32], r: pl.Tensor[{src_shape}, pl.FP32], b: pl.Scalar[pl.INDEX]) -> pl.Tensor[[4, 16, 64], pl.FP32]:
        q2: pl.Tensor[[4, 16, 64], pl.FP32] = pl.tensor.assemble(q, r, {offsets})
        return q2
"""


def _front(text: str):
    from ptoc.context import CompileContext
    from ptoc.driver import frontend

    return frontend(text, "k.ir", CompileContext())


def _assemble_offsets(prog) -> list:
    (assign,) = [s for s in prog.functions[0].body if getattr(getattr(s, "target", None), "name", "") == "q2"]
    return assign.value.args[2].items


def test_assemble_of_a_lower_rank_source_fills_the_trailing_axes():
    # PyPTO's tensor.assemble deducer does not tie the ranks: a [16, 64] source written at [b, 0, 0] of a
    # [4, 16, 64] target is the window [1, 16, 64]
    prog = _front(_assemble_program("[16, 64]", "[b, 0, 0]"))
    assert len(_assemble_offsets(prog)) == 3


def test_assemble_with_fewer_offsets_starts_the_other_axes_at_zero():
    prog = _front(_assemble_program("[1, 16, 64]", "[b]"))
    offs = _assemble_offsets(prog)
    assert offs[0].name == "b" and [o.value for o in offs[1:]] == [0, 0]


def test_assemble_window_past_the_target_is_still_rejected():
    # [16, 64] at row 8 of a 16-row axis: rows [8, 24) do not fit
    import pytest

    from ptoc.diagnostics import CompileError

    with pytest.raises(CompileError) as e:
        _front(_assemble_program("[16, 64]", "[b, 8, 0]"))
    (d,) = e.value.diagnostics
    assert d.code == "PTOC-E0202" and "window [8, 24) of axis 1 exceeds the extent 16" in d.message


# ------------------------------------------------------------------ t[i] of a rank-1 tensor

def test_index_of_a_rank1_tensor_reads_one_element():
    # PyPTO's parser: all-scalar, full-rank indices read one element with tensor.read
    from ptoc.context import CompileContext
    from ptoc.ir.nodes import AssignStmt
    from ptoc.ir.verifier import function_types

    text = """\
import pypto.language as pl

@pl.program
class P:
    @pl.function(type=pl.FunctionType.Orchestration)
    def main(self, gate: pl.Tensor[[4], pl.INT32], k: pl.Scalar[pl.INDEX]) -> pl.Tensor[[4], pl.INT32]:
        g = gate[k]
        return gate
"""
    prog = _front(text)
    assert function_types(prog, CompileContext())["main"]["g"] == function_types(
        _front(text.replace("gate[k]", "pl.tensor.read(gate, [k])")), CompileContext())["main"]["g"]
    (assign,) = [s for s in prog.functions[0].body if isinstance(s, AssignStmt)]
    assert assign.value.op == "tensor.read" and assign.value.args[1].items[0].name == "k"
    from ptoc.ir.printer import print_type

    assert print_type(function_types(prog, CompileContext())["main"]["g"]) == "pl.Scalar[pl.INT32]"
