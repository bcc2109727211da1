"""`--sim` end to end on the real toolchain: every bundled example validates on pto-isa's CPU simulator, a
tampered .pto gives wrong numbers there, and the command line behaves (missing tools, leftovers, cache).
Skipped when $PTOC_PTOAS, $PTOC_PTO_ISA or $PTOC_CXX is unset (see conftest.py)."""

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
PTOC = Path(sys.executable).with_name("ptoc")
SIM_ROW = "simulator (PTOAS + pto-isa)"
GMM = EXAMPLES / "grouped_matmul_nz.ir"
VADD = EXAMPLES / "vector_add.ir"

# dynamic dimensions of the examples that have them (80 rows: two whole 32-row tiles and a partial one)
DIMS = {"dynamic_rows.ir": ["--dim", "M=80"]}
SPLIT = {"attention_block.ir", "linear_relu.ir", "quant_linear_nz.ir",  # mixed cube + vector: an AIC/AIV pair
         "linear_relu_split.ir", "linear_relu_auto_split.ir"}


def run(*args, env, cwd=None):
    return subprocess.run([str(PTOC), *map(str, args)], capture_output=True, text=True, env=env, cwd=cwd,
                          timeout=900, check=False)


@pytest.mark.parametrize("example", sorted(p.name for p in EXAMPLES.glob("*.ir")))
def test_every_example_validates_on_the_simulator(example, sim_env):
    r = run("passes", EXAMPLES / example, "--validate", "--sim", *DIMS.get(example, []), env=sim_env)
    assert r.returncode == 0, r.stdout + r.stderr
    stages = [ln for ln in r.stdout.splitlines() if ln.startswith("  .pto (emitted)") or ln.startswith(f"  {SIM_ROW}")]
    assert len(stages) == 2 * len(re.findall(r"^(?:kernel|program) ", r.stdout, re.M))
    for emitted, simulated in zip(stages[::2], stages[1::2]):
        assert emitted.split()[2] == "ok"
        assert simulated.startswith(f"  {SIM_ROW}") and simulated[len(SIM_ROW) + 3:].split()[0] == "ok"
    assert "every stage agrees with the front end" in r.stdout
    if example in SPLIT:
        # the AIC and AIV kernels of the split pair ran together, in one simulator process
        assert re.search(rf"{re.escape(SIM_ROW)}\s+ok\s+kernels run: \w+_aic \+ \w+_aiv", r.stdout), r.stdout


def _gmm_inputs(folder: Path):
    rng = np.random.default_rng(7)
    x = rng.integers(-8, 8, size=(64, 1024), dtype=np.int8)
    w = rng.integers(-8, 8, size=(1024, 2048), dtype=np.int8)
    np.save(folder / "x.npy", x)
    np.save(folder / "w.npy", w)
    return x, w, x.astype(np.int32) @ w.astype(np.int32)


def _simulate_every_block(simulator, text, x, w):
    """gmm_kernel on the simulator once per block of its `pl.spmd(8)` launch, GM carried from block to block."""
    out = np.zeros((64, 2048), np.int32)
    for b in range(8):
        res = simulator.run(text, "gmm_kernel", {0: (x, "ND"), 1: (w, "NZ"), 2: (out, "ND")}, block_idx=b)
        out = res[2]
    return out


def test_tampered_nz_offset_gives_numbers_that_differ(tmp_path, sim_env, sim_tools, sim_cache):
    from ptoc.reference.sim import Simulator

    x, w, expect = _gmm_inputs(tmp_path)
    assert run("compile", GMM, "-o", tmp_path / "gmm.pto", env=sim_env).returncode == 0
    text = (tmp_path / "gmm.pto").read_text()
    # the K-loop's NZ weight window: offsets [0, n0/c0, k0/16, 0, 0] -> swap the two block offsets
    m = re.search(r"(%w_mat_pview = pto\.partition_view %w_view, offsets = \[%c0_index, )(%\d+), (%\d+)", text)
    assert m, "the NZ partition of the K loop"
    tampered = text[:m.start()] + m.group(1) + m.group(3) + ", " + m.group(2) + text[m.end():]
    with Simulator(sim_tools, cache_dir=sim_cache) as simulator:
        good = _simulate_every_block(simulator, text, x, w)
        bad = _simulate_every_block(simulator, tampered, x, w)
        one = simulator.run(text, "gmm_kernel", {0: (x, "ND"), 1: (w, "NZ"), 2: (np.zeros((64, 2048), np.int32),
                                                                                 "ND")}, block_idx=5)[2]
    assert np.array_equal(good, expect)
    assert bad.shape == expect.shape and not np.array_equal(bad, expect)
    # block 5 alone writes its own 256-column panel and nothing else
    assert np.array_equal(one[:, 1280:1536], expect[:, 1280:1536]) and not one[:, :1280].any() \
        and not one[:, 1536:].any()


def test_run_sim_writes_only_the_outputs(tmp_path, sim_env):
    work, tmp = tmp_path / "work", tmp_path / "tmp"
    work.mkdir()
    tmp.mkdir()
    rng = np.random.default_rng(3)
    a = rng.standard_normal((64, 64)).astype(np.float32)
    b = rng.standard_normal((64, 64)).astype(np.float32)
    np.save(work / "a.npy", a)
    np.save(work / "b.npy", b)
    env = dict(sim_env, TMPDIR=str(tmp))
    r = run("run", VADD, "--sim", "--input", "a=a.npy", "--input", "b=b.npy", "--output-dir", "out", env=env, cwd=work)
    assert r.returncode == 0, r.stderr
    assert np.array_equal(np.load(work / "out" / "out.npy"), a + b)
    assert sorted(os.listdir(work)) == ["a.npy", "b.npy", "out"] and os.listdir(work / "out") == ["out.npy"]
    assert os.listdir(tmp) == []  # temporary folders removed


def test_second_run_uses_the_cached_harness(tmp_path, sim_env):
    env = dict(sim_env, PTOC_CACHE_DIR=str(tmp_path / "cache"))
    np.save(tmp_path / "a.npy", np.ones((64, 64), np.float32))
    args = ("run", VADD, "--sim", "--input", f"a={tmp_path / 'a.npy'}", "--input", f"b={tmp_path / 'a.npy'}",
            "--output-dir", tmp_path / "o")
    assert run(*args, env=env).returncode == 0
    (binary,) = (tmp_path / "cache" / "sim").iterdir()
    stamp = binary.stat().st_mtime_ns
    assert run(*args, env=env).returncode == 0
    assert list((tmp_path / "cache" / "sim").iterdir()) == [binary] and binary.stat().st_mtime_ns == stamp


@pytest.mark.parametrize("unset, named", [
    ({"PTOC_PTO_ISA": ""}, ["--pto-isa DIR", "$PTOC_PTO_ISA"]),
    ({"PTOC_CXX": "", "PATH": "/nonexistent"}, ["--cxx PATH", "$PTOC_CXX"]),
    ({"PTOC_PTOAS": "", "PATH": "/nonexistent"}, ["--ptoas PATH", "$PTOC_PTOAS"]),
])
def test_missing_tool_is_exit_2_naming_flag_and_variable(tmp_path, sim_env, unset, named):
    env = dict(sim_env, **unset)
    (tmp_path / "in").mkdir()
    np.save(tmp_path / "in" / "a.npy", np.ones((64, 64), np.float32))
    inputs = ["--input", f"a={tmp_path / 'in' / 'a.npy'}", "--input", f"b={tmp_path / 'in' / 'a.npy'}"]
    for cmd in (["passes", VADD, "--validate", "--sim"],
                ["run", VADD, "--sim", *inputs, "--output-dir", tmp_path / "out"]):
        r = run(*cmd, env=env)
        assert r.returncode == 2, r.stderr
        assert "PTOC-E0460" in r.stderr and all(n in r.stderr for n in named), r.stderr
        assert "Traceback" not in r.stderr
    assert os.listdir(tmp_path) == ["in"]


def test_sim_flag_combinations_are_usage_errors(sim_env):
    assert run("passes", VADD, "--sim", env=sim_env).returncode == 2
    assert run("run", VADD, "--sim", "--stage", "frontend", env=sim_env).returncode == 2
    assert run("run", VADD, "--pto-isa", "/x", env=sim_env).returncode == 2


def test_real_ptoas_error_in_a_given_pto_points_into_it(tmp_path, sim_env):
    assert run("compile", VADD, "-o", tmp_path / "k.pto", env=sim_env).returncode == 0
    lines = (tmp_path / "k.pto").read_text().splitlines()
    row = next(i for i, ln in enumerate(lines) if "pto.tadd ins(%ta, %tb" in ln)
    lines[row] = lines[row].replace("pto.tadd ins(%ta, %tb", "pto.tadd ins(%ta, %tq")
    (tmp_path / "bad.pto").write_text("\n".join(lines) + "\n")
    np.save(tmp_path / "a.npy", np.ones((64, 64), np.float32))
    r = run("run", VADD, "--sim", "--pto", tmp_path / "bad.pto", "--input", f"a={tmp_path / 'a.npy'}",
            "--input", f"b={tmp_path / 'a.npy'}", "--output-dir", tmp_path / "o", env=sim_env)
    assert r.returncode == 1
    col = lines[row].index("%tq") + 1
    assert f"{tmp_path / 'bad.pto'}:{row + 1}:{col}: error[PTOC-E0452]: PTOAS: use of undeclared SSA value" in r.stderr
    assert not (tmp_path / "o").exists()


def test_simulator_row_is_named_when_it_is_the_first_to_differ(sim_tools, sim_cache):
    from ptoc.context import CompileContext
    from ptoc.driver import frontend
    from ptoc.reference.sim import Simulator
    from ptoc.reference.validate import format_table, validate_program

    class SubtractingSimulator(Simulator):
        """Runs a wrong module (tadd became tsub) on the real simulator; ptoc's own rows stay right."""

        def run(self, pto_text, *args, **kw):
            return super().run(pto_text.replace("pto.tadd ins(", "pto.tsub ins("), *args, **kw)

    ctx = CompileContext(arch="a2a3", ptoas_version="v0.61")
    prog = frontend(VADD.read_text(), str(VADD), ctx)
    with SubtractingSimulator(sim_tools, cache_dir=sim_cache) as s:
        (rep,) = [r for r in validate_program(prog, ctx, simulator=s) if r.label == "kernel"]
    assert [r.stage for r in rep.rows[-2:]] == [".pto (emitted)", SIM_ROW]
    assert rep.rows[-2].ok and not rep.rows[-1].ok
    assert rep.first_failure.stage == SIM_ROW
    assert f"first stage that differs: {SIM_ROW}" in format_table([rep])


def test_bf16_inputs_and_an_nz_output_on_the_simulator(tmp_path, sim_env):
    """acc_store_nz: BF16 .npy inputs (saved by numpy as raw 2-byte values), an NZ FP32 result."""
    import ml_dtypes

    rng = np.random.default_rng(11)
    q = rng.standard_normal((64, 128)).astype(ml_dtypes.bfloat16)
    k = rng.standard_normal((128, 16)).astype(ml_dtypes.bfloat16)
    np.save(tmp_path / "q.npy", q)
    np.save(tmp_path / "k.npy", k)
    r = run("run", EXAMPLES / "acc_store_nz.ir", "--sim", "--input", f"q={tmp_path / 'q.npy'}",
            "--input", f"k={tmp_path / 'k.npy'}", "--output-dir", tmp_path / "o", env=sim_env)
    assert r.returncode == 0, r.stderr
    s = np.load(tmp_path / "o" / "s.npy")
    expect = q.astype(np.float64) @ k.astype(np.float64)
    assert s.shape == (64, 16) and s.dtype == np.float32
    assert np.allclose(s, expect, rtol=1e-4, atol=1e-4)


def test_a_kernel_that_stores_past_its_tensor_fails_the_run(tmp_path, sim_env):
    """The store window moved down one row: its last row lands past the end of `out` (PTOAS lets a static
    out-of-bounds partition through); the harness's guard page catches it."""
    assert run("compile", VADD, "-o", tmp_path / "k.pto", env=sim_env).returncode == 0
    text = (tmp_path / "k.pto").read_text()
    old = "%out_1_pview = pto.partition_view %out_view, offsets = [%c0_index, %c0_index]"
    assert old in text and "%c1_index = arith.constant 1 : index" in text
    (tmp_path / "oob.pto").write_text(text.replace(old, old.replace("[%c0_index, %c0_index]", "[%c1_index, %c0_index]")))
    np.save(tmp_path / "a.npy", np.ones((64, 64), np.float32))
    r = run("run", VADD, "--sim", "--pto", tmp_path / "oob.pto", "--input", f"a={tmp_path / 'a.npy'}",
            "--input", f"b={tmp_path / 'a.npy'}", "--output-dir", tmp_path / "o", env=sim_env)
    assert r.returncode == 1
    assert "PTOC-E0462" in r.stderr and "the kernel wrote outside tensor parameter 2" in r.stderr
    assert not (tmp_path / "o").exists()
