"""ptoc against the real PyPTO. These tests need a PyPTO build (`build_pypto.sh`, see the shared tools
README): set PTOC_PYPTO_PYTHON to the Python of its venv. Without it they are skipped (CI has no PyPTO)."""

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = sorted((ROOT / "examples").glob("*.ir"))
PYPTO = os.environ.get("PTOC_PYPTO_PYTHON")

pytestmark = pytest.mark.skipif(not PYPTO or not Path(PYPTO).exists(),
                                reason="PTOC_PYPTO_PYTHON does not name the Python of a PyPTO build")


def _diff_module():
    spec = importlib.util.spec_from_file_location("pypto_diff", ROOT / "benchmarks" / "pypto_diff.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_pypto_parses_every_ptoc_dump(path, tmp_path):
    """ptoc's IR after every pass, printed in the pypto style, is accepted by PyPTO's parser (for every
    example that PyPTO's parser accepts as written)."""
    d = _diff_module()
    source_error = d.pypto_parse(PYPTO, [path])[str(path)]
    if source_error is not None:
        pytest.skip(f"PyPTO rejects {path.name} as written: {source_error}")
    dumps, err = d.ptoc_dumps(path)
    assert err is None, err
    files = []
    for name, text in dumps.items():
        f = tmp_path / f"after_{name or 'frontend'}.py"
        f.write_text(text)
        files.append(f)
    from ptoc.passes.manager import PIPELINE

    assert len(files) == 1 + len(PIPELINE)  # the front end and every pass
    rejected = {Path(f).name: e for f, e in d.pypto_parse(PYPTO, files).items()
                if e is not None and EMPTY_REDUCTION not in e}
    assert not rejected, rejected


# PyPTO's parser refuses a reduction of an empty tile, which its own SplitVectorKernel writes in the lane-1
# replay of a kernel that reduces (attention_block): it rejects its own dumps from that pass on, and ptoc's
# (test_pypto_rejects_its_own_lane_1_reductions).
EMPTY_REDUCTION = "so the reduction has no real data to consume"
TWO_LANES = ["attention_block", "linear_relu"]


def _pypto_dumps(name: str, out: Path) -> list[Path]:
    compile_script = Path(os.environ.get("PTOC_PYPTO_COMPILE", ROOT.parent / "shared" / "tools" / "pypto_compile.py"))
    if not compile_script.exists():
        pytest.skip(f"{compile_script} is missing")
    r = subprocess.run([PYPTO, str(compile_script), str(ROOT / "examples" / f"{name}.ir"), "-o", str(out), "--dump"],
                       capture_output=True, text=True, timeout=600, check=False)
    assert r.returncode == 0, r.stderr[-2000:]
    return sorted(out.glob("passes_dump/*.py"))


@pytest.mark.parametrize("name", TWO_LANES)
def test_ptoc_compiles_every_pypto_dump_of_a_two_lane_kernel(name, tmp_path):
    """PyPTO's dumps at every stage compile, those after its SplitVectorKernel (lane 1 replayed on empty
    tiles) included, and the dump after SplitVectorKernel validates: both lanes run in the reference."""
    from ptoc.context import CompileContext
    from ptoc.driver import compile_program, frontend

    dumps = _pypto_dumps(name, tmp_path)
    split = next(i for i, d in enumerate(dumps) if d.name.endswith("_after_SplitVectorKernel.py"))
    assert len(dumps) > split + 10
    for i, d in enumerate(dumps):
        ctx = CompileContext()
        text = d.read_text()
        pto = compile_program(frontend(text, d.name, ctx), ctx, d.name).pto
        if i >= split:
            assert "valid_shape=[0, 0]" in text, d.name
            assert "pto.tpop_from_aic(%c0_index, %c0_index)" in pto, d.name
    ptoc = Path(sys.executable).with_name("ptoc")
    r = subprocess.run([str(ptoc), "passes", str(dumps[split]), "--validate"], capture_output=True, text=True,
                       timeout=600, check=False)
    assert r.returncode == 0 and "every stage agrees with the front end" in r.stdout, r.stdout + r.stderr
    assert re.search(r"\.pto \(emitted\)\s+ok\s+kernels run: .*_aiv.*_aiv", r.stdout), r.stdout


def test_pypto_rejects_its_own_lane_1_reductions(tmp_path):
    d = _diff_module()
    dumps = _pypto_dumps("attention_block", tmp_path)
    after = [p for p in dumps if int(p.name[:2]) >= next(int(x.name[:2]) for x in dumps
                                                         if x.name.endswith("_after_SplitVectorKernel.py"))]
    errors = d.pypto_parse(PYPTO, after)
    assert all(e is not None and EMPTY_REDUCTION in e for e in errors.values()), errors


def test_diff_table_on_vector_add():
    """The side-by-side script runs both compilers and prints one row per file."""
    r = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "pypto_diff.py"), PYPTO,
                        str(ROOT / "examples" / "vector_add.ir")], capture_output=True, text=True, check=False,
                       timeout=600)
    assert r.returncode == 0, r.stderr
    row = [ln for ln in r.stdout.splitlines() if "vector_add.ir" in ln]
    assert len(row) == 1 and "both accept" in row[0], r.stdout


PIPELINE_EXAMPLES = ["matmul_l0_tiled", "linear_relu_split", "linear_relu_auto_split"]


@pytest.fixture(scope="module")
def pypto_runs(tmp_path_factory):
    """PyPTO's dumps of the examples with pipelines or cross-core slot buffers (one compile each)."""
    d = _diff_module()
    runs = {}
    for name in PIPELINE_EXAMPLES:
        out = tmp_path_factory.mktemp(name)
        ok, _, err = d.pypto_compile(PYPTO, ROOT / "examples" / f"{name}.ir", out)
        assert ok, err
        runs[name] = (d.pypto_dumps(out), out)
    return runs


@pytest.mark.parametrize("name", PIPELINE_EXAMPLES)
def test_pipeline_and_memory_passes_print_what_pypto_prints(name, pypto_runs):
    """After every shared pass (LowerPipelineLoops's membership tags and kept `if`, CanonicalizeIOOrder,
    MemoryReuse dropping the tags and keeping pipeline copies apart, AllocateMemoryAddr's slot buffer
    base, the final Simplify folding the copies' first-iteration tests) the normalised dumps are equal."""
    d = _diff_module()
    theirs, _ = pypto_runs[name]
    ours, err = d.ptoc_dumps(ROOT / "examples" / f"{name}.ir")
    assert err is None, err
    shared = [p for p in ours if p and p in theirs]
    assert {"LowerPipelineLoops", "MemoryReuse", "AllocateMemoryAddr", "Simplify#2"} <= set(shared)
    differ = [p for p in shared if d.normalise_ir(ours[p]) != d.normalise_ir(theirs[p])]
    assert differ == []


def test_pyptos_membership_tags_read_back_plan_its_l0_buffers(pypto_runs):
    """ptoc reads PyPTO's dump after LowerPipelineLoops (with its tags) and, running the passes after it up
    to MemoryReuse, keeps as many L0 buffers as PyPTO's MemoryReuse does."""
    import re

    from ptoc.context import CompileContext
    from ptoc.frontend.parser import parse_program
    from ptoc.ir.printer import print_program
    from ptoc.passes.manager import PIPELINE, available_pipeline, run_pipeline

    _, out = pypto_runs["matmul_l0_tiled"]
    (after_lpl,) = out.glob("**/passes_dump/*_after_LowerPipelineLoops.py")
    (after_mr,) = out.glob("**/passes_dump/*_after_MemoryReuse.py")
    ctx = CompileContext(arch="a2a3")
    prog = parse_program(after_lpl.read_text(), after_lpl.name, ctx=ctx)
    names = [n for _, n in PIPELINE]
    rest = available_pipeline()[names.index("LowerPipelineLoops") + 1:names.index("MemoryReuse") + 1]
    ours = print_program(run_pipeline(prog, ctx, passes=rest))

    def allocs(text: str) -> dict[str, int]:
        return {s: len(re.findall(rf"pl\.tile\.alloc\(pl\.Mem\.{s},", text)) for s in ("Left", "Right", "Acc")}

    assert allocs(ours) == allocs(after_mr.read_text()) == {"Left": 2, "Right": 2, "Acc": 1}
    assert "pipeline_membership" not in ours


def test_the_dead_copy_of_a_store_makes_scoped_matmul_relu_equal_after_every_shared_pass(tmp_path):
    """PyPTO's outliner follows the cube kernel's named store with a copy of its value (`prod__store =
    prod__ssa_v1`) that nothing reads and that stays to its last pass; ptoc writes the same copy, so the
    normalised dumps are equal after every shared pass, and PyPTO's last dump still has it."""
    d = _diff_module()
    path = ROOT / "examples" / "scoped_matmul_relu.ir"
    ok, _, err = d.pypto_compile(PYPTO, path, tmp_path)
    assert ok, err
    theirs = d.pypto_dumps(tmp_path)
    ours, err = d.ptoc_dumps(path)
    assert err is None, err
    shared = [p for p in ours if p and p in theirs]
    assert len(shared) >= 39
    assert [p for p in shared if d.normalise_ir(ours[p]) != d.normalise_ir(theirs[p])] == []
    assert re.search(r"prod__store: pl\.Tensor\[.*\] = prod__ssa_v1", theirs[shared[-1]])
    assert re.search(r"prod_store = prod_1", ours[shared[-1]])


THEIR_DUMPS_EXACT = [ROOT / "examples" / "matmul_l0_tiled.ir", ROOT / "tests" / "corpus" / "raw" / "15_while_chunks.ir",
                     ROOT / "tests" / "corpus" / "raw" / "21_tuple_return_layernorm.ir"]


@pytest.mark.parametrize("path", THEIR_DUMPS_EXACT, ids=lambda p: p.stem)
def test_every_pypto_dump_compiles_to_pyptos_own_tile_addresses(path, tmp_path):
    """PyPTO's IR after each of its passes, compiled by ptoc, gives kernels whose alloc_tile addresses are
    those of PyPTO's own `.pto`: matmul_l0_tiled's dump after InitMemRef (a peeled K step's seed matmul in
    a buffer of its own, which ptoc now moves onto the carried accumulator, as PyPTO's MemoryReuse), corpus
    21's dumps before AllocateMemoryAddr (buffers laid out in the order of their names as strings, PyPTO's
    OrderMemRefs) and corpus 15 (a kernel with scf.while, whose regions PyPTO does not indent)."""
    d = _diff_module()
    ok, _, err = d.pypto_compile(PYPTO, path, tmp_path)
    assert ok, err
    got = d.their_dumps_compiled(tmp_path)
    assert got["dumps"] >= 50 and got["internal_errors"] == []
    assert got["compiled"] == got["same_addresses"] == got["dumps"], got


def test_attention_block_addresses_differ_from_pyptos_only_by_the_pipe_ring(tmp_path):
    """ptoc reserves the 8 slots the toolchain's PTOAS builds for a pipe whatever slot_num says; PyPTO
    reserves slot_num (2). With ptoc's 8, none of PyPTO's dumps of attention_block compiles to PyPTO's
    addresses (the tiles after the ring move up by 6 slots); with a ring of 2 slots (in a process of its
    own: the compiler keeps what it derived of a function), every one does."""
    d = _diff_module()
    ok, _, err = d.pypto_compile(PYPTO, ROOT / "examples" / "attention_block.ir", tmp_path)
    assert ok, err
    got = d.their_dumps_compiled(tmp_path)
    assert got["compiled"] == got["dumps"] >= 50 and got["same_addresses"] == 0, got
    script = ("import importlib.util, json, sys; import ptoc.analysis.pipeline_stages as s; s.PTOAS_SLOTS = 2; "
              "spec = importlib.util.spec_from_file_location('d', sys.argv[1]); d = importlib.util.module_from_spec(spec); "
              "spec.loader.exec_module(d); from pathlib import Path; print(json.dumps(d.their_dumps_compiled(Path(sys.argv[2]))))")
    r = subprocess.run([sys.executable, "-c", script, str(ROOT / "benchmarks" / "pypto_diff.py"), str(tmp_path)],
                       capture_output=True, text=True, timeout=600, check=False)
    assert r.returncode == 0, r.stderr[-2000:]
    got = json.loads(r.stdout.strip().splitlines()[-1])
    assert got["compiled"] == got["same_addresses"] == got["dumps"], got


CORPUS = ROOT / "tests" / "corpus" / "raw"
CORPUS_EQUAL = ["01_vector_add_fp32", "02_row_softmax", "03_bf16_matmul_kloop", "15_while_chunks", "20_inline_swiglu",
                "21_tuple_return_layernorm", "24_concise_short_names", "27_pass_and_no_return",
                "28_orchestration_batched"]


@pytest.mark.parametrize("name", CORPUS_EQUAL)
def test_corpus_programs_equal_after_every_shared_pass(name, tmp_path):
    """Function order (PyPTO prints callees first, by name), a vector kernel's open loads (PyPTO's Vec
    default) and a carried loop's yield inside its runtime scope: the normalised dumps are equal."""
    d = _diff_module()
    ok, _, err = d.pypto_compile(PYPTO, CORPUS / f"{name}.ir", tmp_path)
    assert ok, err
    theirs = d.pypto_dumps(tmp_path)
    ours, err = d.ptoc_dumps(CORPUS / f"{name}.ir")
    assert err is None, err
    shared = [p for p in ours if p and p in theirs]
    assert len(shared) >= 39
    assert [p for p in shared if d.normalise_ir(ours[p]) != d.normalise_ir(theirs[p])] == []


def test_every_pypto_dump_of_the_online_softmax_is_read_without_an_internal_error(tmp_path):
    """Corpus 13 (columns PyPTO declares row-major, carried through an if and a loop): ptoc compiled none of
    PyPTO's dumps (an internal error after ResolveBackendOpLayouts). The dumps before PyPTO's own
    ResolveBackendOpLayouts now validate; the later ones mix [64, 1] and [1, 64] operands in one op,
    which ptoc rejects as a user error (PTOC-E0105), never an internal one."""
    d = _diff_module()
    ok, _, err = d.pypto_compile(PYPTO, CORPUS / "13_online_softmax_if_yield.ir", tmp_path)
    assert ok, err
    dumps = sorted((tmp_path / "passes_dump").glob("*.py"))
    ptoc = Path(sys.executable).with_name("ptoc")
    resolve = next(i for i, p in enumerate(dumps) if p.name.endswith("_after_ResolveBackendOpLayouts.py"))
    for i, p in enumerate(dumps):
        if i % 4 and i not in (resolve - 1, resolve):
            continue  # a sample of the stages keeps the test short
        args = [str(ptoc), "passes", str(p)] + (["--validate"] if i < resolve else [])
        r = subprocess.run(args, capture_output=True, text=True, timeout=600, check=False)
        if i < resolve:
            assert r.returncode == 0 and "every stage agrees with the front end" in r.stdout, (p.name, r.stderr)
        else:
            assert r.returncode == 1 and "PTOC-E0105" in r.stderr, (p.name, r.returncode, r.stderr[-800:])
