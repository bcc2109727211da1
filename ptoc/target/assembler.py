"""Running the PTO assembler (PTOAS) on emitted .pto and turning its errors into diagnostics."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass

from ptoc.diagnostics import Diagnostic, Span

# MLIR-style diagnostics: "<file>:<line>:<col>: error: <message>"
_DIAG = re.compile(r"^(?P<file>[^:\n]+):(?P<line>\d+):(?P<col>\d+):\s*"
                   r"(?P<sev>error|warning|note|remark):\s*(?P<msg>.*)$")


@dataclass
class AssembleResult:
    ok: bool
    diagnostics: list[Diagnostic]
    output: str | None  # path of PTOAS's output when it succeeded


def find_ptoas(explicit: str | None) -> str | None:
    if explicit:
        return explicit if (os.path.isfile(explicit) and os.access(explicit, os.X_OK)) else None
    return shutil.which("ptoas")


def assemble(ptoas: str, pto_path: str, out_path: str, arch: str, level: str, timeout: float) -> AssembleResult:
    cmd = [ptoas, f"--pto-arch={arch}", f"--pto-level={level}", pto_path, "-o", out_path]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return AssembleResult(False, [Diagnostic("PTOC-E0451", f"the PTO assembler did not finish within {timeout:g} s",
                                                 Span(pto_path, 0, 0, 0, 0),
                                                 hint="raise --ptoas-timeout, or run the assembler by hand")], None)
    except OSError as e:
        return AssembleResult(False, [Diagnostic("PTOC-E0450",
                                                 f"cannot run the PTO assembler {ptoas}: {e.strerror or e}",
                                                 Span(pto_path, 0, 0, 0, 0))], None)
    diags: list[Diagnostic] = []
    for line in (r.stderr + "\n" + r.stdout).splitlines():
        m = _DIAG.match(line.strip())
        if m and m.group("sev") in ("error", "warning"):
            ln, col = int(m.group("line")), int(m.group("col"))
            diags.append(Diagnostic("PTOC-E0452", f"PTOAS: {m.group('msg')}", Span(pto_path, ln, col, ln, col + 1),
                                    severity=m.group("sev"),
                                    hint="this .pto was emitted by ptoc; if the input checked cleanly, please "
                                    "report it with the input file"))
    if r.returncode != 0 and not any(d.severity == "error" for d in diags):
        tail = (r.stderr or r.stdout).strip().splitlines()[-1:] or ["(no output)"]
        diags.append(Diagnostic("PTOC-E0452", f"PTOAS exited with status {r.returncode}: {tail[0]}",
                                Span(pto_path, 0, 0, 0, 0)))
    return AssembleResult(r.returncode == 0, diags, out_path if r.returncode == 0 else None)
