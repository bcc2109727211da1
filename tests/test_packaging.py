"""`pip install .` must work outside the checkout: the wheel carries the grammar and the toolchain pin."""

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    out = tmp_path_factory.mktemp("wheel")
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(ROOT)],
                       capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        pytest.skip(f"cannot build a wheel here: {r.stderr[-500:]}")
    return next(out.glob("ptoc-*.whl"))


def test_wheel_ships_grammar_and_versions(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    assert "ptoc/grammar/pypto_ir.lark" in names
    assert "ptoc/toolchain/versions.env" in names
    assert "ptoc/docs/rules.md" in names   # `ptoc explain` reads it
    assert any(n.endswith("entry_points.txt") for n in names)


def test_installed_package_runs_outside_the_checkout(wheel, tmp_path):
    target = tmp_path / "site"
    r = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(target),
                        str(wheel)], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    src = (ROOT / "examples" / "vector_add.ir").read_text()
    (tmp_path / "k.ir").write_text(src)
    env = {"PYTHONPATH": str(target), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    code = "import sys; from ptoc.cli import main; sys.argv=['ptoc','check','k.ir']; main()"
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, env=env,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    r = subprocess.run([sys.executable, "-c", code.replace("'check','k.ir'", "'--version'")], cwd=tmp_path,
                       capture_output=True, text=True, env=env, timeout=120)
    assert "PTOAS v0.61" in r.stdout
    r = subprocess.run([sys.executable, "-c", code.replace("'check','k.ir'", "'explain','NZ-8'")], cwd=tmp_path,
                       capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("### NZ-8: ") and "expect=PTOC-E0348" in r.stdout


def test_versions_env_pins_ptoas_061_or_newer():
    # NZ-15: NZ views need PTOAS >= 0.61.
    text = (ROOT / "toolchain" / "versions.env").read_text()
    line = next(ln for ln in text.splitlines() if ln.startswith("PTOAS_VERSION="))
    major, minor = line.split("=", 1)[1].strip().lstrip("v").split(".")[:2]
    assert (int(major), int(minor)) >= (0, 61)
    assert "NZ-15" in text
