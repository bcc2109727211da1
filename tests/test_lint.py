"""The code base passes its own lint settings (pyproject.toml [tool.ruff])."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_ruff_check_is_clean():
    ruff = shutil.which("ruff") or str(Path(sys.executable).with_name("ruff"))
    if not Path(ruff).exists():
        pytest.skip("ruff is not installed (it is part of the test extra)")
    r = subprocess.run([ruff, "check", "--output-format", "concise", "ptoc", "tests", "benchmarks"], cwd=ROOT,
                       capture_output=True, text=True, timeout=120, check=False)
    assert r.returncode == 0, r.stdout + r.stderr
