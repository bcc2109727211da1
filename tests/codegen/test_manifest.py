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
    t = {"kind": "tensor", "dtype": "FP32", "shape": [64, 128], "logical_shape": [64, 128], "layout": "ND"}
    assert k0["params"] == [
        {**t, "name": "a", "direction": "In", "global_tensor": "main_incore_0::a_Global"},
        {**t, "name": "b", "direction": "In", "global_tensor": "main_incore_0::b_Global"},
        {**t, "name": "s_out", "direction": "Out", "global_tensor": "main_incore_0::s_out_Global"}]
    # `out` starts the loop that stores into it chunk by chunk and is never loaded: the second kernel only
    # writes it, Out (PyPTO's ConvertTensorToTileOps decides it so; its final IR says pl.Out too)
    assert [(p["name"], p["direction"]) for p in k1["params"]] == [("out", "Out"), ("s", "In")]
    # the first kernel's result buffer is what the second one reads
    # the directions: s_out is a fresh buffer the first kernel only fills, out the caller's tensor the second
    # one only fills (PyPTO's final IR: arg_directions [output_existing, input] on that call)
    assert doc["orchestration"] == [{"function": "main", "calls": [
        {"kernel": "main_incore_0", "args": ["a", "b", "s_out"], "directions": ["input", "input", "output_existing"],
         "block_num": 1},
        {"kernel": "main_incore_1", "args": ["out", "s"], "directions": ["output_existing", "input"], "block_num": 1}]}]
    header = (tmp_path / "out.h").read_text()
    for k in doc["kernels"]:
        for p in k["params"]:
            ns, name = p["global_tensor"].split("::")
            assert f"namespace {ns} {{" in header and f"using {name} = pto::GlobalTensor<" in header


def test_an_spmd_loop_launches_its_kernel_on_every_block(tmp_path):
    # `for nb in pl.spmd(8, name_hint="gmm_kernel")`: the kernel gmm_kernel, called by the Spmd function
    # gmm_kernel_spmd, which the program's function launches with core_num 8
    doc = json.loads(compile_to(tmp_path, "grouped_matmul_nz.ir").read_text())
    assert [(k["name"], k["kind"]) for k in doc["kernels"]] == [("gmm_kernel", "AIC")]
    assert doc["orchestration"] == [{"function": "gmm_kernel_spmd", "calls": [
        {"kernel": "gmm_kernel", "args": ["x", "w", "out"], "directions": ["input", "input", "output_existing"],
         "block_num": 8}]}]


def test_a_lone_kernel_gets_no_manifest(tmp_path):
    assert not compile_to(tmp_path, "softmax_rows.ir").exists()


NZ_PROGRAM = (ROOT / "examples" / "nz_weight_int8.ir").read_text() + """
    @pl.function(type=pl.FunctionType.Orchestration)
    def main(self, x: pl.Tensor[[64, 256], pl.INT8], w: pl.Tensor[[256, 512], pl.INT8, pl.NZ],
             out: pl.Out[pl.Tensor[[64, 512], pl.INT32]]) -> pl.Tensor[[64, 512], pl.INT32]:
        r: pl.Tensor[[64, 512], pl.INT32] = self.mm_nz(x, w, out)
        return r
"""


def test_an_nz_parameter_lists_the_blocked_shape_and_the_logical_shape_the_caller_passes(tmp_path):
    src = tmp_path / "nz.ir"
    src.write_text(NZ_PROGRAM)
    r = subprocess.run([PTOC, "compile", str(src), "-o", str(tmp_path / "nz.pto")], capture_output=True, text=True,
                       timeout=300, check=False)
    assert r.returncode == 0, r.stderr
    (k,) = json.loads((tmp_path / "nz.kernels.json").read_text())["kernels"]
    w = next(p for p in k["params"] if p["name"] == "w")
    # NZ-2: [256, 512] INT8 (c0 = 32 bytes / 1 byte) blocks as [1, 512/32, 256/16, 16, 32]
    assert (w["layout"], w["shape"], w["logical_shape"]) == ("NZ", [1, 16, 16, 16, 32], [256, 512])
    x = next(p for p in k["params"] if p["name"] == "x")
    assert x["shape"] == x["logical_shape"] == [64, 256]


def test_a_batch_writes_the_manifest_of_each_whole_program_and_none_for_a_lone_kernel(tmp_path):
    out = tmp_path / "D"
    r = subprocess.run([PTOC, "compile", str(ROOT / "examples" / "scoped_add_scale.ir"),
                        str(ROOT / "examples" / "softmax_rows.ir"), "--output-dir", str(out)],
                       capture_output=True, text=True, timeout=300, check=False)
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in out.iterdir()) == [
        "scoped_add_scale.h", "scoped_add_scale.kernels.json", "scoped_add_scale.pto", "softmax_rows.h",
        "softmax_rows.pto"]
    single = compile_to(tmp_path, "scoped_add_scale.ir")
    assert (out / "scoped_add_scale.kernels.json").read_text() == single.read_text()  # as `-o` writes it


def test_a_split_pair_is_one_launch_of_both_kernels_with_its_gm_ring(tmp_path):
    doc = json.loads(compile_to(tmp_path, "linear_relu.ir").read_text())
    by_fn = {o["function"]: o for o in doc["orchestration"]}
    # main launches the Group; the Group's two kernel calls start together
    assert [(c.get("group"), c.get("kernel")) for c in by_fn["main"]["calls"]] == [("main_incore_0", None)]
    assert "launch" not in by_fn["main"]
    group = by_fn["main_incore_0"]
    assert group["launch"] == "together"
    assert [c["kernel"] for c in group["calls"]] == ["main_incore_0_aic", "main_incore_0_aiv"]
    # a2a3: the GM ring of 8 slots, each one 16 x 64 FP32 block of the product
    assert {k["name"]: k["gm_pipe_buffer_bytes"] for k in doc["kernels"]} == {
        "main_incore_0_aic": 8 * 16 * 64 * 4, "main_incore_0_aiv": 8 * 16 * 64 * 4}


TASK_PROGRAM = """import pypto.language as pl
@pl.program
class P:
    @pl.function(type=pl.FunctionType.InCore)
    def k(self, x: pl.Tensor[[16, 64], pl.FP32], out: pl.Out[pl.Tensor[[16, 64], pl.FP32]]) -> pl.Tensor[[16, 64], pl.FP32]:
        t: pl.Tile[[16, 64], pl.FP32, pl.Mem.Vec] = pl.tile.load(x, [0, 0], [16, 64], target_memory=pl.Mem.Vec)
        r: pl.Tensor[[16, 64], pl.FP32] = pl.tile.store(t, [0, 0], out)
        return r
    @pl.function(type=pl.FunctionType.Orchestration)
    def main(self, x: pl.Tensor[[16, 64], pl.FP32], y: pl.Out[pl.Tensor[[16, 64], pl.FP32]],
             z: pl.Out[pl.Tensor[[16, 64], pl.FP32]]) -> pl.Tensor[[16, 64], pl.FP32]:
        o1, t1 = pl.spmd_submit(self.k, x, y, core_num=4)
        o2, t2 = pl.submit(self.k, o1, z, deps=[t1])
        return o2
"""


def test_task_launches_are_listed_with_their_block_count_directions_and_deps(tmp_path):
    src = tmp_path / "tasks.ir"
    src.write_text(TASK_PROGRAM)
    r = subprocess.run([PTOC, "compile", str(src), "-o", str(tmp_path / "tasks.pto")], capture_output=True,
                       text=True, timeout=300, check=False)
    assert r.returncode == 0, r.stderr
    doc = json.loads((tmp_path / "tasks.kernels.json").read_text())
    assert [k["name"] for k in doc["kernels"]] == ["k"]
    # the spmd launch runs k on core_num=4 blocks; the second launch, one block, waits for the first's task
    # id; both read their first argument and fill the Out tensor they pass second
    assert doc["orchestration"] == [{"function": "main", "calls": [
        {"kernel": "k", "launch": "spmd_submit", "args": ["x", "y"], "directions": ["input", "output_existing"],
         "block_num": 4},
        {"kernel": "k", "launch": "submit", "args": ["o1", "z"], "directions": ["input", "output_existing"],
         "block_num": 1, "deps": ["t1"]}]}]


def test_the_manifest_reads_the_kernel_types_the_header_was_made_from(monkeypatch):
    # the driver computes the GlobalTensor types once, for the header, and the manifest reads those: the
    # same manifest as one that computes them itself, with one computation fewer
    from ptoc.codegen import global_tensor
    from ptoc.codegen.manifest import emit_manifest
    from ptoc.context import CompileContext
    from ptoc.driver import compile_program, frontend

    calls = []
    original = global_tensor.kernel_types

    def counting(*a, **k):
        calls.append(1)
        return original(*a, **k)

    monkeypatch.setattr(global_tensor, "kernel_types", counting)
    text = (ROOT / "examples" / "scoped_add_scale.ir").read_text()
    ctx = CompileContext()
    art = compile_program(frontend(text, "s.ir", ctx), ctx, "s.ir")
    assert len(calls) == 1 and art.kernel_types is not None
    shared = emit_manifest(art.lowered.program, ctx, "s.ir", art.lowered.verified, art.kernel_types)
    assert len(calls) == 1
    alone = emit_manifest(art.lowered.program, ctx, "s.ir")
    assert len(calls) == 2 and shared == alone
    assert "main_incore_0::a_Global" in shared


def test_the_manifest_text_is_the_standard_librarys_indented_sorted_json():
    """The manifest's own writer spells a document as `json.dumps(indent=2, sort_keys=True)` does (empty
    containers, nesting, escapes, keys out of order, tuples); a float or a non-string key is left to
    `json.dumps`."""
    from ptoc.codegen.manifest import json_text

    docs = [{}, [], "x", 7, None, True, [[[]], {}],
            {"b": [1, {"x": None, "a": True, "c": False}], "a": "é \"q\" \\ \n\t", "c": [], "d": {}},
            {"calls": ({"kernel": "k", "args": ("a", "b"), "block_num": -3},)},
            {"f": 1.5, "g": float("inf")}, {1: "int key"},
            {"a": [True, None, False, -1, "s", (), {}], "b": {"z": True, "y": None, "x": -0}}, [1.5], {"a": (2.5,)},
            {"a": [{"b": [{"c": "d"}]}]}, {"k": {"k": ["v", 1]}}]
    for doc in docs:
        assert json_text(doc) == json.dumps(doc, indent=2, sort_keys=True), doc
    # the examples' real manifests: parsed back, the same document
    import tempfile

    with tempfile.TemporaryDirectory() as td:
        text = compile_to(Path(td), "scoped_add_scale.ir").read_text()
    doc = json.loads(text)
    assert text == json.dumps(doc, indent=2, sort_keys=True) + "\n"
