"""Pinned external tool versions (read from `toolchain/versions.env`, shipped in the package)."""

from __future__ import annotations

from ptoc.resources import read_text


def read_versions() -> dict[str, str]:
    text = read_text("ptoc.toolchain", "versions.env")
    out: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, value = line.split("=", 1)
        out[key.strip()] = value.strip().strip('"').strip("'")
    return out


def pinned_ptoas_version() -> str:
    return read_versions().get("PTOAS_VERSION", "v0.61")
