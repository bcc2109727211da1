"""The bundled programs the whole-pipeline comparison tests run (every example and corpus program), and
the target each is written for. Imported as a plain module (tests/conftest.py puts tests/ on sys.path)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROGRAMS = sorted((ROOT / "examples").glob("*.ir")) + sorted((ROOT / "tests" / "corpus" / "raw").glob("*.ir"))


def program_arch(path: Path) -> str:
    """The target `path` is written for: a5 for the FP4 and MX programs, else a2a3."""
    return "a5" if "fp4" in path.name or "mx" in path.name else "a2a3"
