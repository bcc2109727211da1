"""Every example compiles; its .pto and .h equal the reviewed golden files byte for byte.

Regenerate after an intended change with `python -m pytest tests/test_golden.py --update-golden` and
review the diff before committing it.
"""

from pathlib import Path

import pytest

from ptoc import __version__
from ptoc.context import CompileContext
from ptoc.driver import compile_program, frontend

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = sorted((ROOT / "examples").glob("*.ir"))
GOLDEN = ROOT / "tests" / "golden"


def compile_example(path: Path):
    ctx = CompileContext(arch="a2a3", ptoas_version="v0.61")
    prog = frontend(path.read_text(), path.name, ctx)
    return compile_program(prog, ctx, path.name)


def test_there_are_seven_examples():
    names = {p.stem for p in EXAMPLES}
    assert {"vector_add", "softmax_rows", "matmul_bf16", "nz_weight_int8", "grouped_matmul_nz", "acc_store_nz",
            "dynamic_rows"} <= names


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_example_matches_golden(path, request):
    art = compile_example(path)
    outputs = {".pto": art.pto, ".h": art.header}
    for suffix, text in outputs.items():
        golden = GOLDEN / f"{path.stem}{suffix}"
        if request.config.getoption("--update-golden"):
            golden.write_text(text)
            continue
        assert golden.exists(), f"missing golden {golden.name}: run pytest with --update-golden and review it"
        assert text == golden.read_text(), f"{golden.name} differs from the compiler output"


def test_golden_header_names_this_ptoc_version():
    for h in GOLDEN.glob("*.h"):
        assert f"ptoc {__version__}" in h.read_text()
