"""The simulator harness generator and runner (ptoc.reference.sim), on its own: signatures, kinds, flags,
the generated program, tool discovery, the cache. The tests that compile need pto-isa and a C++ compiler
and skip without them; their kernels are written by hand here, so no assembler is involved."""

import os
import subprocess

import ml_dtypes
import numpy as np
import pytest

from ptoc.reference import sim
from ptoc.target.assembler import ToolNotFound

# The shape of PTOAS's C++: a prologue, then one __global__ function per kernel.
CPP = """#include "pto/pto-inst.hpp"
using namespace pto;

__global__ AICORE void first(__gm__ float* v1, __gm__ bfloat16_t* v2, half v3, int32_t v4) {
  return;
}

__global__ AICORE void second(__gm__ int8_t* v1) {
  return;
}
"""

PTO = """module attributes {pto.target_arch = "a2a3"} {
  func.func @first(%arg0: !pto.ptr<f32>, %arg1: !pto.ptr<bf16>, %arg2: f16, %arg3: index) attributes {pto.kernel_kind = #pto.kernel_kind<vector>} {
    return
  }
  func.func @second(%arg0: !pto.ptr<i8>) attributes {pto.kernel_kind = #pto.kernel_kind<cube>} {
    return
  }
  func.func @third(%arg0: !pto.ptr<i8>) {
    return
  }
}
"""


def test_kernel_signature_reads_pointers_and_scalars_in_order():
    assert sim.kernel_signature(CPP, "first") == [
        sim.KernelParam("float", "v1", True), sim.KernelParam("bfloat16_t", "v2", True),
        sim.KernelParam("half", "v3", False), sim.KernelParam("int32_t", "v4", False)]
    assert sim.kernel_signature(CPP, "second") == [sim.KernelParam("int8_t", "v1", True)]
    with pytest.raises(sim.SimError, match="no function fir"):
        sim.kernel_signature(CPP, "fir")


def test_kind_and_pointer_types_come_from_the_pto_function_line():
    assert sim.kernel_kind(PTO, "first") == "vector"
    assert sim.kernel_kind(PTO, "second") == "cube"
    assert sim.kernel_kind(PTO, "third") is None
    assert sim.pto_pointer_types(PTO, "first") == ["f32", "bf16"]
    with pytest.raises(sim.SimError, match="@fourth"):
        sim.kernel_kind(PTO, "fourth")


def test_compile_flags_select_the_unit_per_kind():
    assert "-D__DAV_CUBE__" in sim.compile_flags("cube") and "-D__DAV_VEC__" not in sim.compile_flags("cube")
    assert "-D__DAV_VEC__" in sim.compile_flags("vector") and "-D__DAV_CUBE__" not in sim.compile_flags("vector")
    none = sim.compile_flags(None)
    assert "-D__CPU_SIM" in none and not any(f.startswith("-D__DAV") for f in none)
    assert "-std=c++20" in none


def test_generated_harness_calls_the_kernel_with_every_argument():
    src = sim.generate_harness(CPP, "first", sim.kernel_signature(CPP, "first"))
    assert CPP.rstrip("\n") in src  # the kernel's C++ verbatim
    assert "first(reinterpret_cast<float*>(buf0.data), reinterpret_cast<bfloat16_t*>(buf1.data), s0, s1);" in src
    assert "half s0 = scalar<half>(argv[2]);" in src and "int32_t s1 = scalar<int32_t>(argv[3]);" in src
    assert "if (argc != 4)" in src
    assert src.count("bf16_in(buf") == 1 and src.count("bf16_out(buf") == 1  # only the BF16 tensor converts
    assert "store(dir, 0, buf0);" in src and "store(dir, 1, buf1);" in src


def test_scalar_text_is_exact():
    assert sim.scalar_text(0.1, "float") == (0.1).hex()
    assert float.fromhex(sim.scalar_text(np.float16(0.3), "half")) == float(np.float16(0.3))
    assert sim.scalar_text(7, "int32_t") == "7" and sim.scalar_text(True, "bool") == "1"


def test_tool_discovery_names_the_flag_and_the_variable(tmp_path):
    with pytest.raises(ToolNotFound, match=r"--pto-isa DIR .*\$PTOC_PTO_ISA"):
        sim.find_pto_isa(None, {})
    with pytest.raises(ToolNotFound, match=r"\$PTOC_PTO_ISA .*no pto/pto-inst.hpp"):
        sim.find_pto_isa(None, {"PTOC_PTO_ISA": str(tmp_path)})
    (tmp_path / "pto").mkdir()
    (tmp_path / "pto" / "pto-inst.hpp").write_text("")
    assert sim.find_pto_isa(str(tmp_path), {"PTOC_PTO_ISA": "/nowhere"}) == str(tmp_path)
    with pytest.raises(ToolNotFound, match=r"--cxx PATH, set \$PTOC_CXX"):
        sim.find_cxx(None, {"PATH": str(tmp_path)})
    with pytest.raises(ToolNotFound, match=r"\$PTOC_CXX"):
        sim.find_cxx(None, {"PTOC_CXX": str(tmp_path / "no-such-compiler"), "PATH": ""})


def test_cache_folder_follows_the_variables(tmp_path):
    assert sim.cache_root({"PTOC_CACHE_DIR": str(tmp_path)}) == str(tmp_path / "sim")
    assert sim.cache_root({"XDG_CACHE_HOME": str(tmp_path)}) == str(tmp_path / "ptoc" / "sim")


# ------------------------------------------------------------------------ compiled (pto-isa + C++ needed)

KERNEL = """#include "pto/pto-inst.hpp"
using namespace pto;

__global__ AICORE void scale(__gm__ float* v1, __gm__ float* v2, float v3, int32_t v4) {
  for (int32_t i = 0; i < v4; ++i) v2[i] = v1[i] * v3;
}

__global__ AICORE void twice_bf16(__gm__ bfloat16_t* v1, __gm__ bfloat16_t* v2) {
  for (int i = 0; i < 64; ++i) v2[i] = static_cast<bfloat16_t>(static_cast<float>(v1[i]) * 2.0f);
}
"""


def _run(exe, work, *scalars):
    return subprocess.run([exe, str(work), *scalars], capture_output=True, text=True, timeout=120, check=False)


def test_harness_runs_a_kernel_and_detects_writes_past_a_tensor(tmp_path, sim_tools, sim_cache):
    s = sim.Simulator(sim_tools, cache_dir=sim_cache)
    src = sim.generate_harness(KERNEL, "scale", sim.kernel_signature(KERNEL, "scale"))
    exe = s.harness(src, "vector")
    x = np.arange(100, dtype=np.float32) / 7
    (tmp_path / "arg0.bin").write_bytes(x.tobytes())
    (tmp_path / "arg1.bin").write_bytes(np.full(100, -1, np.float32).tobytes())
    r = _run(exe, tmp_path, sim.scalar_text(0.1, "float"), "90")
    assert r.returncode == 0, r.stderr
    got = np.frombuffer((tmp_path / "arg1.out").read_bytes(), np.float32)
    expect = np.concatenate([x[:90] * np.float32(0.1), np.full(10, -1, np.float32)])
    assert np.array_equal(got, expect)
    r = _run(exe, tmp_path, "2.0", "101")  # one element past the end of tensor 1
    assert r.returncode == 3 and "wrote outside tensor parameter 1" in r.stderr
    assert _run(exe, tmp_path, "1.0").returncode == 2  # a missing scalar


def test_bf16_round_trips_through_the_simulator_type(tmp_path, sim_tools, sim_cache):
    s = sim.Simulator(sim_tools, cache_dir=sim_cache)
    exe = s.harness(sim.generate_harness(KERNEL, "twice_bf16", sim.kernel_signature(KERNEL, "twice_bf16")), "vector")
    vals = np.array([1.5, -3.25, 0.0078125, 1000.0, -0.5, 2.0 ** -10] * 10 + [7.0] * 4, dtype=ml_dtypes.bfloat16)
    (tmp_path / "arg0.bin").write_bytes(vals.tobytes())
    (tmp_path / "arg1.bin").write_bytes(bytes(128))
    r = _run(exe, tmp_path)
    assert r.returncode == 0, r.stderr
    back = np.frombuffer((tmp_path / "arg0.out").read_bytes(), ml_dtypes.bfloat16)
    doubled = np.frombuffer((tmp_path / "arg1.out").read_bytes(), ml_dtypes.bfloat16)
    assert back.tobytes() == vals.tobytes()
    assert np.array_equal(doubled.astype(np.float32), vals.astype(np.float32) * 2)


def test_compiled_harnesses_are_cached_by_content(tmp_path, sim_tools):
    cache = tmp_path / "cache"
    s = sim.Simulator(sim_tools, cache_dir=str(cache))
    src = sim.generate_harness(KERNEL, "scale", sim.kernel_signature(KERNEL, "scale"))
    a = s.harness(src, "vector")
    b = s.harness(src, "vector")
    assert a == b and (s.compiles, s.cache_hits) == (1, 1)
    c = s.harness(src, "cube")  # other flags: another binary
    assert c != a and s.compiles == 2
    assert sorted(os.listdir(cache)) == sorted([os.path.basename(a), os.path.basename(c)])  # no build leftovers
    again = sim.Simulator(sim_tools, cache_dir=str(cache))  # a later process finds it on disk
    assert again.harness(src, "vector") == a and again.compiles == 0


def test_a_harness_that_does_not_compile_is_reported(sim_tools, tmp_path):
    s = sim.Simulator(sim_tools, cache_dir=str(tmp_path))
    broken = KERNEL.replace("v2[i] = v1[i] * v3;", "v2[i] = v1[i] * undefined_name;")
    with pytest.raises(sim.SimError, match="does not compile.*undefined_name") as e:
        s.harness(sim.generate_harness(broken, "scale", sim.kernel_signature(broken, "scale")), "vector")
    assert e.value.code == "PTOC-E0461"
    assert os.listdir(tmp_path) == []


def test_error_summary_of_the_simulator_row():
    from ptoc.reference.validate import error_summary

    assert error_summary({"a": np.array([1, 2], np.int32)}, {"a": np.array([1, 2], np.int32)}) == "bit-exact"
    nan = np.array([np.nan, 4.0], np.float32)
    assert error_summary({"a": nan}, {"a": nan.copy()}) == "bit-exact"
    got = error_summary({"a": np.array([2.0, 4.0], np.float32)}, {"a": np.array([2.0, 5.0], np.float32)})
    assert got == "max abs err 1, max rel err 0.25"
