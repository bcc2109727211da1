"""ptoc against the real PyPTO. These tests need a PyPTO build (`build_pypto.sh`, see the shared tools
README): set PTOC_PYPTO_PYTHON to the Python of its venv. Without it they are skipped (CI has no PyPTO)."""

import importlib.util
import os
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
    rejected = {Path(f).name: e for f, e in d.pypto_parse(PYPTO, files).items() if e is not None}
    assert not rejected, rejected


def test_diff_table_on_vector_add():
    """The side-by-side script runs both compilers and prints one row per file."""
    r = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "pypto_diff.py"), PYPTO,
                        str(ROOT / "examples" / "vector_add.ir")], capture_output=True, text=True, check=False,
                       timeout=600)
    assert r.returncode == 0, r.stderr
    row = [ln for ln in r.stdout.splitlines() if "vector_add.ir" in ln]
    assert len(row) == 1 and "both accept" in row[0], r.stdout
