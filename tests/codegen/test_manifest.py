"""The kernels manifest `ptoc compile` writes beside the .pto of a whole program (README "Kernels manifest")."""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PTOC = str(Path(sys.executable).with_name("ptoc"))


def compile_to(tmp_path, example: str):
    r = subprocess.run([PTOC, "compile", str(ROOT / "examples" / example), "-o", str(tmp_path / "out.pto")],
                       capture_output=True, text=True, timeout=300, check=False)
    assert r.returncode == 0, r.stderr
    return tmp_path / "out.kernels.json"


def test_a_whole_program_gets_its_kernels_and_call_sequence(tmp_path):
    doc = json.loads(compile_to(tmp_path, "scoped_add_scale.ir").read_text())
    assert doc["schema"] == "ptoc-kernels/1" and doc["arch"] == "a2a3"
    k0, k1 = doc["kernels"]
    assert (k0["name"], k0["kind"], k1["name"], k1["kind"]) == ("main_incore_0", "AIV", "main_incore_1", "AIV")
    t = {"kind": "tensor", "dtype": "FP32", "shape": [64, 128], "layout": "ND"}
    assert k0["params"] == [
        {**t, "name": "a", "direction": "In", "global_tensor": "main_incore_0::a_Global"},
        {**t, "name": "b", "direction": "In", "global_tensor": "main_incore_0::b_Global"},
        {**t, "name": "s_out", "direction": "Out", "global_tensor": "main_incore_0::s_out_Global"}]
    assert [(p["name"], p["direction"]) for p in k1["params"]] == [("out", "Out"), ("s", "In")]
    # the first kernel's result buffer is what the second one reads
    assert doc["orchestration"] == [{"function": "main", "calls": [
        {"kernel": "main_incore_0", "args": ["a", "b", "s_out"]},
        {"kernel": "main_incore_1", "args": ["out", "s"]}]}]
    header = (tmp_path / "out.h").read_text()
    for k in doc["kernels"]:
        for p in k["params"]:
            ns, name = p["global_tensor"].split("::")
            assert f"namespace {ns} {{" in header and f"using {name} = pto::GlobalTensor<" in header


def test_a_lone_kernel_gets_no_manifest(tmp_path):
    assert not compile_to(tmp_path, "softmax_rows.ir").exists()
