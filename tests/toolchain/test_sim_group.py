"""A Group launch (a kernel split into its AIC and AIV halves) on pto-isa's CPU simulator: both kernels run
together in one harness process, one thread per core, handing tiles over through pto-isa's TPipe.
Skipped when $PTOC_PTOAS, $PTOC_PTO_ISA or $PTOC_CXX is unset (see conftest.py)."""

import json
import re
import subprocess
import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
PTOC = Path(sys.executable).with_name("ptoc")
SIM_ROW = "simulator (PTOAS + pto-isa)"
SPLIT = ["attention_block.ir", "linear_relu.ir", "linear_relu_auto_split.ir", "linear_relu_split.ir",
         "quant_linear_nz.ir"]


def run(*args, env, cwd=None):
    return subprocess.run([str(PTOC), *map(str, args)], capture_output=True, text=True, env=env, cwd=cwd,
                          timeout=900, check=False)


@pytest.mark.parametrize("example", SPLIT)
def test_split_pairs_validate_on_the_simulator_for_a5(example, sim_env):
    # a5's pipe has no GM ring (the a2a3 runs are in test_sim_examples.py)
    r = run("passes", EXAMPLES / example, "--validate", "--sim", "--arch", "a5", env=sim_env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert re.search(rf"{re.escape(SIM_ROW)}\s+ok\s+kernels run: \w+_aic \+ \w+_aiv", r.stdout), r.stdout
    assert "every stage agrees with the front end" in r.stdout


def _linear_relu_inputs(folder: Path):
    rng = np.random.default_rng(11)
    x = rng.standard_normal((16, 128)).astype(ml_dtypes.bfloat16)
    w = rng.standard_normal((128, 128)).astype(ml_dtypes.bfloat16)
    np.save(folder / "x.npy", x)
    np.save(folder / "w.npy", w)
    # relu(x @ w) in float64 from the BF16 values: computed here, not by ptoc
    return x, w, np.maximum(x.astype(np.float64) @ w.astype(np.float64), 0.0)


@pytest.mark.parametrize("arch", ["a2a3", "a5"])
def test_run_sim_of_the_whole_program_equals_numpy(tmp_path, sim_env, arch):
    _, _, expect = _linear_relu_inputs(tmp_path)
    r = run("run", EXAMPLES / "linear_relu.ir", "--sim", "--arch", arch, "--input", "x=x.npy", "--input", "w=w.npy",
            "--output-dir", "out", env=sim_env, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    got = np.load(tmp_path / "out" / "out.npy")
    assert got.shape == (16, 128) and got.dtype == np.float32
    # FP32 accumulation of BF16 products: agreement to FP32 rounding of a 128-term sum
    assert np.allclose(got, expect, rtol=1e-5, atol=1e-4), np.abs(got - expect).max()


def _compiled(tmp_path, sim_env, arch="a2a3"):
    out = tmp_path / f"linear_relu_{arch}.pto"
    r = run("compile", EXAMPLES / "linear_relu.ir", "-o", out, "--arch", arch, env=sim_env)
    assert r.returncode == 0, r.stderr
    manifest = json.loads(out.with_suffix(".kernels.json").read_text())
    return out.read_text(), manifest


def _members(lanes=1):
    from ptoc.reference.sim import GroupMember

    args = (("buffer", 0), ("buffer", 1), ("buffer", 2), ("buffer", 3))  # x, out, w, __gm_pipe_buffer
    return [GroupMember("main_incore_0_aic", args), GroupMember("main_incore_0_aiv", args, lanes)]


def test_gm_ring_size_in_the_manifest_is_what_the_pipe_uses(tmp_path, sim_env, sim_tools, sim_cache):
    from ptoc.reference.sim import SimError, Simulator

    text, manifest = _compiled(tmp_path, sim_env)
    # the pipe's slot holds one 16 x 64 FP32 block of the product; PTOAS builds a ring of 8 slots
    ring = 8 * 16 * 64 * 4
    sizes = {k["name"]: k.get("gm_pipe_buffer_bytes") for k in manifest["kernels"]}
    assert sizes == {"main_incore_0_aic": ring, "main_incore_0_aiv": ring}
    x, w, expect = _linear_relu_inputs(tmp_path)
    buffers = {0: (x, "ND"), 1: (np.zeros((16, 128), np.float32), "ND"), 2: (w, "ND")}
    with Simulator(sim_tools, cache_dir=sim_cache) as simulator:
        out = simulator.run_group(text, _members(), {**buffers, 3: (np.zeros(ring // 4, np.float32), "ND")})
        assert np.allclose(out[1], expect, rtol=1e-5, atol=1e-4)
        assert out[3].any()  # the tiles went through the GM ring
        # the one FP32 element the IR gives the buffer is not enough: the pipe writes past it
        with pytest.raises(SimError, match="wrote outside buffer 3"):
            simulator.run_group(text, _members(), {**buffers, 3: (np.zeros(1, np.float32), "ND")})


def test_a_pop_nobody_pushes_stops_the_run(tmp_path, sim_env, sim_tools, sim_cache):
    from ptoc.reference.sim import SimError, Simulator

    text, _ = _compiled(tmp_path, sim_env)
    x, w, _ = _linear_relu_inputs(tmp_path)
    buffers = {0: (x, "ND"), 1: (np.zeros((16, 128), np.float32), "ND"), 2: (w, "ND"),
               3: (np.zeros(8192, np.float32), "ND")}
    with Simulator(sim_tools, cache_dir=sim_cache, watchdog_seconds=3) as simulator:
        # the vector kernel alone: its first pop waits for a cube push that never comes
        with pytest.raises(SimError, match="a cross-core wait nobody ends"):
            simulator.run_group(text, _members()[1:], buffers)


@pytest.mark.parametrize("arch", ["a2a3", "a5"])
def test_quantised_linear_pair_on_the_simulator_equals_numpy(tmp_path, sim_env, arch):
    # an NZ INT8 weight, INT32 accumulation, per-column FP32 scale, BF16 out; scales small enough that
    # every result stays inside the simulator's BF16 stand-in range, so every element is compared
    rng = np.random.default_rng(23)
    x = rng.integers(-128, 128, size=(16, 256), dtype=np.int8)
    w = rng.integers(-128, 128, size=(256, 256), dtype=np.int8)
    scale = rng.uniform(1e-4, 1e-2, size=(1, 256)).astype(np.float32)
    for name, a in (("x", x), ("w", w), ("scale", scale)):
        np.save(tmp_path / f"{name}.npy", a)
    acc = x.astype(np.int64) @ w.astype(np.int64)  # exact; the kernel accumulates in INT32 without overflow
    expect = (acc.astype(np.float32) * scale).astype(ml_dtypes.bfloat16).astype(np.float32)
    assert np.abs(expect).max() < 65504
    r = run("run", EXAMPLES / "quant_linear_nz.ir", "--sim", "--arch", arch, "--input", "x=x.npy", "--input", "w=w.npy",
            "--input", "scale=scale.npy", "--output-dir", "out", env=sim_env, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    got = np.load(tmp_path / "out" / "out.npy").view(ml_dtypes.bfloat16).astype(np.float32)
    # one BF16 rounding of the same FP32 product: at most one unit in the last place apart
    assert np.allclose(got, expect, rtol=2 ** -7, atol=0), np.abs(got - expect).max()
