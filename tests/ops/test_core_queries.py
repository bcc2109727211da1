"""pl.tensor.get_block_idx / get_block_num / get_subblock_idx: PyPTO's tensor-scope aliases of the tile
core queries, INDEX scalars (src/ir/op/tensor_ops/memory.cpp)."""

import subprocess
import sys
from pathlib import Path

import pytest
from optest import codes, types


@pytest.mark.parametrize("q", ["get_block_idx", "get_block_num", "get_subblock_idx"])
def test_tensor_core_queries_are_index_scalars(q):
    assert types("", f"i = pl.tensor.{q}()")["i"] == "pl.Scalar[pl.INDEX]"
    assert codes("n: pl.Scalar[pl.INDEX]", f"i = pl.tensor.{q}(n)") == [("PTOC-E0201", None)]


def test_a_kernel_reading_its_block_index_through_the_tensor_alias_compiles(tmp_path):
    text = ("import pypto.language as pl\n\n@pl.program\nclass p:\n"
            "    @pl.function(type=pl.FunctionType.InCore)\n"
            "    def k(self, x: pl.Tensor[[64], pl.FP32]) -> pl.Tensor[[64], pl.FP32]:\n"
            "        idx: pl.Scalar[pl.INDEX] = pl.tensor.get_block_idx()\n"
            "        y: pl.Tensor[[64], pl.FP32] = pl.add(x, pl.cast(idx, pl.INT32))\n"
            "        return y\n")
    f = tmp_path / "k.ir"
    f.write_text(text)
    ptoc = Path(sys.executable).parent / "ptoc"
    p = subprocess.run([str(ptoc), "compile", str(f), "-o", str(tmp_path / "k.pto")], capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stderr
    assert "pto.get_block_idx" in (tmp_path / "k.pto").read_text()
