"""The whole-program examples written in the user style (kernel code in `pl.at` scopes): each compiles to
its kernels and a manifest, validates through every pass and the emitted .pto, and computes what numpy
computes from the same inputs."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ptoc.context import CompileContext
from ptoc.driver import frontend
from ptoc.passes.manager import run_pipeline
from ptoc.reference.interp import run_function

ROOT = Path(__file__).resolve().parents[1]
PTOC = str(Path(sys.executable).with_name("ptoc"))
CTX = CompileContext()


def _bf16(x: np.ndarray) -> np.ndarray:
    """`x` rounded to bfloat16 (round to nearest even), as float32: the inputs the kernels can hold."""
    u = x.astype(np.float32).view(np.uint32)
    u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
    return u.astype(np.uint32).view(np.float32)


@pytest.mark.parametrize("example, kernels", [
    ("staged_buffer.ir", [("main_incore_0", "AIV"), ("main_incore_1", "AIV")]),
    ("scoped_matmul_relu.ir", [("main_incore_0", "AIC"), ("main_incore_1", "AIV")]),
])
def test_the_example_compiles_its_scopes_to_kernels_and_validates(tmp_path, example, kernels):
    src = ROOT / "examples" / example
    r = subprocess.run([PTOC, "compile", str(src), "-o", str(tmp_path / "out.pto")], capture_output=True,
                       text=True, timeout=300, check=False)
    assert r.returncode == 0, r.stderr
    doc = json.loads((tmp_path / "out.kernels.json").read_text())
    assert [(k["name"], k["kind"]) for k in doc["kernels"]] == kernels
    pto = (tmp_path / "out.pto").read_text()
    assert all(pto.count(f"func.func @{name}(") == 1 for name, _ in kernels)
    r = subprocess.run([PTOC, "passes", str(src), "--validate"], capture_output=True, text=True, timeout=300,
                       check=False)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "kernels run: " + ", ".join(n for n, _ in kernels) in r.stdout
    assert "every stage agrees with the front end" in r.stdout


def test_the_buffer_between_two_scopes_carries_the_first_result_to_the_second():
    src = ROOT / "examples" / "staged_buffer.ir"
    prog = frontend(src.read_text(), src.name, CTX)
    lowered = run_pipeline(prog, CTX)
    main = lowered.function("main")
    # the buffer the orchestration allocates is written by the first kernel (Out: it stores every row through
    # its loop and loads none, as PyPTO's ConvertTensorToTileOps decides) and is the second kernel's input
    k0, k1 = lowered.function("main_incore_0"), lowered.function("main_incore_1")
    assert k0.param("tmp").direction == "Out" and any(p.direction == "In" and p.name.startswith("tmp")
                                                      for p in k1.params)
    assert main.func_type == "Orchestration"
    rng = np.random.default_rng(11)
    a, b = (rng.standard_normal((64, 128)).astype(np.float32) for _ in range(2))
    want = np.maximum(a + b, 0) * np.float32(2.0)  # numpy, independently of ptoc
    for stage in (prog, lowered):
        got = run_function(stage, "main", {"a": a, "b": b, "out": np.zeros_like(a)}, CTX)
        np.testing.assert_allclose(got["out"], want, rtol=1e-6)


def test_the_matmul_scope_and_its_epilogue_compute_relu_of_the_product():
    src = ROOT / "examples" / "scoped_matmul_relu.ir"
    prog = frontend(src.read_text(), src.name, CTX)
    rng = np.random.default_rng(12)
    a = _bf16(rng.standard_normal((64, 256)))
    b = _bf16(rng.standard_normal((256, 128)))
    want = np.maximum(a.astype(np.float64) @ b.astype(np.float64), 0)  # numpy, independently of ptoc
    for stage in (prog, run_pipeline(prog, CTX)):
        got = run_function(stage, "main", {"a": a, "b": b, "out": np.zeros((64, 128), np.float32)}, CTX)
        np.testing.assert_allclose(got["out"], want, rtol=1e-4, atol=1e-3)


def test_a_tensor_level_matmul_in_a_scope_becomes_a_cube_kernel(tmp_path):
    src = tmp_path / "mm.ir"
    src.write_text("""import pypto.language as pl

@pl.program
class p:
    @pl.function(type=pl.FunctionType.Orchestration)
    def main(self, a: pl.Tensor[[64, 64], pl.BF16], b: pl.Tensor[[64, 128], pl.BF16]) -> pl.Tensor[[64, 128], pl.FP32]:
        with pl.at(level=pl.Level.CORE_GROUP):
            c: pl.Tensor[[64, 128], pl.FP32] = pl.matmul(a, b)
        return c
""")
    r = subprocess.run([PTOC, "passes", str(src), "--validate"], capture_output=True, text=True, timeout=300,
                       check=False)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "kernels run: main_incore_0" in r.stdout
