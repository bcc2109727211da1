"""The pypto print style: the text PyPTO's own printer writes at the same stage, which PyPTO's parser
reads (PyPTO's `pl.TensorView` requires `stride=` and `layout=`, its `pl.tile.alloc` takes no `addr=`
and its AllocateMemoryAddr puts each buffer's address into the byte offset of the MemRefs on it), and
ptoc reading that form back."""

import subprocess
import sys
from pathlib import Path

import pytest

from ptoc.ir import dtypes as dt
from ptoc.context import CompileContext
from ptoc.driver import frontend
from ptoc.frontend.parser import parse_program
from ptoc.ir.nodes import ConstInt, TensorType, TensorView
from ptoc.ir.printer import Printer, print_program, print_style
from ptoc.passes.manager import run_pipeline

ROOT = Path(__file__).resolve().parent.parent
PTOC = Path(sys.executable).with_name("ptoc")
EXAMPLES = sorted((ROOT / "examples").glob("*.ir"))


def I(v):  # noqa: E743
    return ConstInt(v, dt.INDEX)


def lowered(name: str):
    ctx = CompileContext()
    return run_pipeline(frontend((ROOT / "examples" / name).read_text(), name, ctx), ctx)


def test_tensor_view_states_stride_and_layout():
    pypto, ptoc = Printer(style="pypto"), Printer()
    strided = TensorType((I(64), I(64)), dt.FP16, TensorView(stride=(I(128), I(1))))
    assert pypto.type(strided) == ("pl.Tensor[[64, 64], pl.FP16, pl.TensorView(stride=[128, 1], "
                                   "layout=pl.TensorLayout.ND)]")
    assert ptoc.type(strided) == "pl.Tensor[[64, 64], pl.FP16, pl.TensorView(stride=[128, 1])]"
    dn = TensorType((I(64), I(64)), dt.FP16, TensorView(layout="DN"))
    assert pypto.type(dn) == "pl.Tensor[[64, 64], pl.FP16, pl.TensorView(stride=[], layout=pl.TensorLayout.DN)]"
    assert ptoc.type(dn) == "pl.Tensor[[64, 64], pl.FP16, pl.DN]"
    partial = TensorType((I(16), I(16)), dt.FP32, TensorView(valid_shape=(I(8), I(16))))
    assert pypto.type(partial) == ("pl.Tensor[[16, 16], pl.FP32, pl.TensorView(valid_shape=[8, 16], stride=[], "
                                   "layout=pl.TensorLayout.ND)]")
    # and a trivial view prints nothing in either style
    assert pypto.type(TensorType((I(4),), dt.FP16, TensorView())) == "pl.Tensor[[4], pl.FP16]"


def test_addresses_move_into_memref_offsets():
    """vector_add's two 64x64 FP32 buffers (16384 bytes each, live together; MemoryReuse computes the sum
    over the first operand) get addresses 0 and 16384: the ptoc style writes them as `addr=`, the pypto
    style as MemRef offsets."""
    prog = lowered("vector_add.ir")
    ptoc_text, pypto_text = print_program(prog), print_program(prog, style="pypto")
    assert "mem_vec_5" not in ptoc_text
    for n, addr in ((3, 0), (4, 16384)):  # mem_ddr_0..2 name the kernel's three tensors
        assert f"mem_vec_{n}: pl.Ptr = pl.tile.alloc(pl.Mem.Vec, 16384, addr={addr})" in ptoc_text
        assert f"pl.MemRef(mem_vec_{n}, 0, 16384)" in ptoc_text
        assert f"mem_vec_{n}: pl.Ptr = pl.tile.alloc(pl.Mem.Vec, 16384)\n" in pypto_text
        assert f"pl.MemRef(mem_vec_{n}, {addr}, 16384)" in pypto_text
    assert "addr=" not in pypto_text


def test_loads_state_their_valid_shape():
    text = print_program(lowered("vector_add.ir"), style="pypto")
    assert "pl.tile.load(a, [0, 0], [64, 64], [64, 64], target_memory=pl.Mem.Vec)" in text
    assert "pl.tile.load(a, [0, 0], [64, 64], target_memory=pl.Mem.Vec)" in print_program(lowered("vector_add.ir"))


def test_print_style_block_sets_the_default():
    prog = lowered("vector_add.ir")
    with print_style("pypto"):
        assert print_program(prog) == print_program(prog, style="pypto")
    assert print_program(prog) == print_program(prog, style="ptoc")
    with pytest.raises(ValueError):
        Printer(style="other")


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_every_stage_of_every_example_reads_back(path):
    """ptoc reads its own pypto-style dumps after every pass (the older ptoc form is read too: that is
    every other test of the suite), and the ptoc style is unchanged by the pypto one."""
    ctx = CompileContext()
    texts = []

    from ptoc.passes.manager import PIPELINE, Instrument

    class Collect(Instrument):
        def after_pass(self, index, p, program, seconds):
            texts.append((p.name, print_program(program, style="pypto"), print_program(program)))

    run_pipeline(frontend(path.read_text(), path.name, ctx), ctx, instruments=[Collect()])
    assert [n for n, _, _ in texts] == [n for _, n in PIPELINE]  # one text after every pass, in order
    for name, pypto_text, ptoc_text in texts:
        parse_program(pypto_text, f"<{path.stem} after {name}>", check_ops=False)
        assert print_program(parse_program(ptoc_text, "<again>", check_ops=False)) == ptoc_text


PYPTO_ALLOCATED = '''\
# pypto.program: Expected
import pypto.language as pl

@pl.program
class Expected:
    @pl.function(type=pl.FunctionType.AIV)
    def main(
        self,
        input_a: pl.Tensor[[64, 64], pl.FP32, pl.MemRef("mem_ddr_0", 0, 16384)],
        output: pl.Out[pl.Tensor[[64, 64], pl.FP32, pl.MemRef("mem_ddr_1", 0, 16384)]],
    ) -> pl.Tensor[[64, 64], pl.FP32]:
        mem_vec_2: pl.Ptr = pl.tile.alloc(pl.Mem.Vec, 16384)
        mem_vec_3: pl.Ptr = pl.tile.alloc(pl.Mem.Vec, 16384)
        tile_a: pl.Tile[[64, 64], pl.FP32, pl.MemRef(mem_vec_2, 4096, 16384), pl.Mem.Vec] = pl.tile.load(
            input_a, [0, 0], [64, 64], [64, 64], target_memory=pl.Mem.Vec
        )
        tile_b: pl.Tile[[64, 64], pl.FP32, pl.MemRef(mem_vec_3, 20480, 16384), pl.Mem.Vec] = pl.tile.add(
            tile_a, tile_a
        )
        result: pl.Tensor[[64, 64], pl.FP32, pl.TensorView(stride=[64, 1], layout=pl.TensorLayout.ND)] = (
            pl.tile.store(tile_b, [0, 0], output))
        return result
'''


def test_reads_pypto_output_after_allocate_memory_addr(tmp_path):
    """PyPTO's own expected IR after AllocateMemoryAddr (its test of a reserved 4096-byte buffer): two-
    argument allocs, addresses in the MemRef offsets, four-argument load, MemRefs on the parameters."""
    f = tmp_path / "allocated.ir"
    f.write_text(PYPTO_ALLOCATED)
    r = subprocess.run([str(PTOC), "check", str(f)], capture_output=True, text=True, check=False)
    assert r.returncode == 0, r.stderr
    r = subprocess.run([str(PTOC), "fmt", str(f)], capture_output=True, text=True, check=False)
    assert r.returncode == 0, r.stderr
    assert "pl.MemRef(mem_vec_3, 20480, 16384)" in r.stdout
    assert "pl.tile.load(input_a, [0, 0], [64, 64], [64, 64], target_memory=pl.Mem.Vec)" in r.stdout
    # `stride=[]`, as PyPTO prints a layout-only view, is the packed default
    prog = parse_program(PYPTO_ALLOCATED.replace("stride=[64, 1], layout=pl.TensorLayout.ND",
                                                 "stride=[], layout=pl.TensorLayout.ND"), "<t>", check_ops=False)
    assert "pl.TensorView" not in print_program(prog)


def test_passes_cli_print_style(tmp_path):
    r = subprocess.run([str(PTOC), "passes", str(ROOT / "examples" / "vector_add.ir"), "--dump-after",
                        "AllocateMemoryAddr", "--print-style", "pypto"], capture_output=True, text=True, check=False)
    assert r.returncode == 0, r.stderr
    assert "pl.MemRef(mem_vec_4, 16384, 16384)" in r.stdout and "addr=" not in r.stdout
    r = subprocess.run([str(PTOC), "passes", str(ROOT / "examples" / "vector_add.ir"), "--dump-after", "all",
                        "--print-style", "pypto", "--roundtrip-check"], capture_output=True, text=True, check=False)
    assert r.returncode == 2 and "--roundtrip-check" in r.stderr


def test_allocations_are_declared_at_the_top():
    """matmul_bf16 has nine buffers after InitMemRef, four of them used only inside its k-loop, and five
    after MemoryReuse (the loop's tiles take the buffers of the first iteration's, dead before the loop);
    every buffer is declared at the top of the function (as PyPTO's), and both styles print them there."""
    text = print_program(lowered("matmul_bf16.ir"), style="pypto")
    body = text.split("def mm_kernel", 1)[1].split("\n    @pl.function", 1)[0].splitlines()[1:]
    kinds = ["alloc" if "= pl.tile.alloc(" in ln else "other" for ln in body]
    assert kinds.count("alloc") == 5
    assert kinds[:5] == ["alloc"] * 5
    assert all(ln.startswith(" " * 8 + "mem_") for ln in body[:5])
    inside_loop = "\n".join(body).split("pl.range(", 1)[1]
    assert "pl.tile.alloc(" not in inside_loop
    assert "pl.MemRef(mem_mat_4, 8192, 16384)" in inside_loop  # its address, at its use in the loop
    again = parse_program(text, "<hoisted>", check_ops=False)
    assert print_program(again, style="pypto") == text


LEVEL_ROLE = '''\
# pypto.program: lv
import pypto.language as pl

@pl.program
class lv:
    @pl.function(level=pl.Level.HOST, role=pl.Role.SubWorker)
    def helper(x: pl.Scalar[pl.INDEX]) -> pl.Scalar[pl.INDEX]:
        return x
    @pl.function(type=pl.FunctionType.Orchestration, level=pl.Level.HOST, role=pl.Role.Orchestrator)
    def main(self, a: pl.Tensor[[64, 64], pl.FP32]) -> pl.Tensor[[64, 64], pl.FP32]:
        return a
'''


def test_reads_and_keeps_level_role_and_selfless_sub_workers():
    """PyPTO prints `level=`/`role=` on functions that have them and no `self` on a SubWorker."""
    prog = parse_program(LEVEL_ROLE, "<lv>", check_ops=False)
    for style in ("ptoc", "pypto"):
        assert print_program(prog, style=style) == LEVEL_ROLE
