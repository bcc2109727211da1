"""Kernels over rank-1 tensors: the tiles become [1, n] in FlattenTileNdTo2D while the tensor keeps its one
axis, so every load/store window of the .pto and of the reference is the n elements of that axis."""

import re
import subprocess
import sys
from pathlib import Path

import numpy as np

PTOC = Path(sys.executable).with_name("ptoc")

RANK1 = """import pypto.language as pl

@pl.program
class P:
    @pl.function(type=pl.FunctionType.InCore)
    def k(self, x: pl.Tensor[[512], pl.FP32], out: pl.Out[pl.Tensor[[512], pl.FP32]]) -> pl.Tensor[[512], pl.FP32]:
        t: pl.Tile[[256], pl.FP32] = pl.tile.load(x, [256], [256])
        u: pl.Tile[[256], pl.FP32] = pl.tile.mul(t, t)
        out = pl.tile.store(u, [128], out)
        return out
"""


def run(*args, cwd=None):
    return subprocess.run([str(PTOC), *map(str, args)], capture_output=True, text=True, cwd=cwd, timeout=300,
                          check=False)


def test_rank1_kernel_compiles_with_one_axis_windows(tmp_path):
    src = tmp_path / "k.ir"
    src.write_text(RANK1)
    r = run("compile", src, "-o", tmp_path / "k.pto")
    assert r.returncode == 0, r.stderr
    pto = (tmp_path / "k.pto").read_text()
    windows = re.findall(r"pto\.partition_view %\w+, offsets = \[([^\]]*)\], sizes = \[([^\]]*)\]", pto)
    assert len(windows) == 2
    for offsets, sizes in windows:
        assert len(offsets.split(",")) == 1 and len(sizes.split(",")) == 1
    assert pto.count("-> !pto.partition_tensor_view<256xf32>") == 2


def test_rank1_kernel_validates_at_every_stage(tmp_path):
    src = tmp_path / "k.ir"
    src.write_text(RANK1)
    r = run("passes", src, "--validate")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "every stage agrees with the front end" in r.stdout


def test_rank1_kernel_writes_the_squares_of_the_upper_half(tmp_path):
    src = tmp_path / "k.ir"
    src.write_text(RANK1)
    x = np.arange(512, dtype=np.float32) / 7
    np.save(tmp_path / "x.npy", x)
    r = run("run", src, "--input", f"x={tmp_path / 'x.npy'}", "--output-dir", tmp_path / "out")
    assert r.returncode == 0, r.stderr
    got = np.load(tmp_path / "out" / "out.npy")
    want = np.zeros(512, dtype=np.float32)
    want[128:384] = x[256:512] * x[256:512]
    np.testing.assert_array_equal(got, want)
