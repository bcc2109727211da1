"""`ptoc run` on whole programs: without --function it runs the one whole program when a file has no kernel
of its own (the orchestration that launches the kernels), and `--pto FILE` runs every kernel call on the
kernels of that file. Expected values are computed here with numpy."""

import subprocess
import sys
from pathlib import Path

import ml_dtypes
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
PTOC = Path(sys.executable).with_name("ptoc")


def run(*args, cwd):
    return subprocess.run([str(PTOC), *map(str, args)], capture_output=True, text=True, cwd=cwd, timeout=600,
                          check=False)


def _inputs(folder: Path):
    rng = np.random.default_rng(5)
    x = rng.standard_normal((16, 128)).astype(ml_dtypes.bfloat16)
    w = rng.standard_normal((128, 128)).astype(ml_dtypes.bfloat16)
    np.save(folder / "x.npy", x)
    np.save(folder / "w.npy", w)
    return np.maximum(x.astype(np.float64) @ w.astype(np.float64), 0.0)


def test_run_without_function_runs_the_whole_program(tmp_path):
    expect = _inputs(tmp_path)
    r = run("run", EXAMPLES / "linear_relu.ir", "--input", "x=x.npy", "--input", "w=w.npy", "--output-dir", "out",
            cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert np.allclose(np.load(tmp_path / "out" / "out.npy"), expect, rtol=1e-5, atol=1e-4)


def test_run_pto_file_of_a_whole_program_runs_its_kernels(tmp_path):
    expect = _inputs(tmp_path)
    assert run("compile", EXAMPLES / "linear_relu.ir", "-o", "k.pto", cwd=tmp_path).returncode == 0
    r = run("run", EXAMPLES / "linear_relu.ir", "--pto", "k.pto", "--input", "x=x.npy", "--input", "w=w.npy",
            "--output-dir", "out", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert np.allclose(np.load(tmp_path / "out" / "out.npy"), expect, rtol=1e-5, atol=1e-4)
    # a .pto whose AIV kernel stores relu's input instead of its result gives other numbers
    text = (tmp_path / "k.pto").read_text()
    assert text.count("pto.tstore ins(%r ") == 1
    (tmp_path / "bad.pto").write_text(text.replace("pto.tstore ins(%r ", "pto.tstore ins(%y "))
    r = run("run", EXAMPLES / "linear_relu.ir", "--pto", "bad.pto", "--input", "x=x.npy", "--input", "w=w.npy",
            "--output-dir", "bad", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert not np.allclose(np.load(tmp_path / "bad" / "out.npy"), expect, rtol=1e-5, atol=1e-4)


def test_a_file_with_several_kernels_asks_for_one(tmp_path):
    src = tmp_path / "two.ir"
    src.write_text("""import pypto.language as pl

@pl.program
class two:
    @pl.function(type=pl.FunctionType.InCore)
    def first(self, a: pl.Tensor[[16, 16], pl.FP32], out: pl.Out[pl.Tensor[[16, 16], pl.FP32]]) -> pl.Tensor[[16, 16], pl.FP32]:
        t: pl.Tile[[16, 16], pl.FP32] = pl.load(a, [0, 0], [16, 16])
        out: pl.Tensor[[16, 16], pl.FP32] = pl.store(t, [0, 0], out)
        return out

    @pl.function(type=pl.FunctionType.InCore)
    def second(self, a: pl.Tensor[[16, 16], pl.FP32], out: pl.Out[pl.Tensor[[16, 16], pl.FP32]]) -> pl.Tensor[[16, 16], pl.FP32]:
        t: pl.Tile[[16, 16], pl.FP32] = pl.load(a, [0, 0], [16, 16])
        out: pl.Tensor[[16, 16], pl.FP32] = pl.store(t, [0, 0], out)
        return out
""")
    np.save(tmp_path / "a.npy", np.ones((16, 16), np.float32))
    r = run("run", src, "--input", "a=a.npy", "--output-dir", "out", cwd=tmp_path)
    assert r.returncode == 2
    assert "has 2 kernels; choose one with --function (first, second)" in r.stderr
