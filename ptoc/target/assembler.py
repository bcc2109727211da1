"""Running the PTO assembler (PTOAS) on emitted .pto and turning its errors into diagnostics.

The assembler always runs on a private copy of the module in a temporary folder; the C++ it writes comes
back as text, so the caller decides when (and whether) to put it beside the .pto. Nothing here writes into
the user's folders.

Flags (see `assembler_flags`):
- `--pto-arch`: ptoc's target names are not PTOAS's (`a2a3` -> `a3`, `a5` -> `a5`; PTOAS knows no other
  name and silently treats an unknown one as a3).
- `--pto-level`: level3 when ptoc planned on-chip memory (every `pto.alloc_tile` has `addr`), else level2.
- `--enable-insert-sync` unless switched off: without it the C++ has no set_flag/wait_flag between the
  pipelines (TLOAD, TMOV, TMATMUL, TSTORE), which is wrong on hardware.
- `--disable-infer-layout` for an assembler older than v0.61 when the module has an NZ view: those releases
  infer every view's layout from its structure and reject an explicit `#pto.layout<nz>` ("layout mismatch:
  user-specified layout=nz but inferred=nd", rule NZ-15). ptoc writes every view's layout explicitly, so
  switching the inference off makes PTOAS take the layouts as written.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field

from ptoc.diagnostics import Diagnostic, Span

# ptoc target name -> PTOAS --pto-arch value
PTOAS_ARCH = {"a2a3": "a3", "a5": "a5"}

# The first PTOAS release that takes an explicit NZ view as written (rule NZ-15).
NZ_EXPLICIT_LAYOUT_MIN = (0, 61)

ENV_PTOAS = "PTOC_PTOAS"

NZ_MARK = "#pto.layout<nz>"

# MLIR-style diagnostics: "<file>:<line>:<col>: error: <message>"
_FILE_DIAG = re.compile(r"^(?P<file>[^\s:][^:\n]*):(?P<line>\d+):(?P<col>\d+):\s*"
                        r"(?P<sev>error|warning|note|remark):\s*(?P<msg>.*)$")
# What PTOAS prints: 'loc("k.pto":17:15): error: <message>' (also fused/callsite/named locations)
_LOC_DIAG = re.compile(r"^loc\((?P<loc>.*)\):\s*(?P<sev>error|warning|note|remark):\s*(?P<msg>.*)$")
_LOC_POS = re.compile(r'"(?P<file>[^"]*)":(?P<line>\d+):(?P<col>\d+)')
_BARE_DIAG = re.compile(r"^(?P<sev>error|warning):\s*(?P<msg>.*)$")
# PTOAS's closing line after a failure: "Error: Pass execution failed." / "Error: Failed to parse MLIR."
_SUMMARY = re.compile(r"^Error:\s*(?P<msg>.*)$")

EMITTED_HINT = ("this .pto was emitted by ptoc; if the input checked cleanly, please report it with the "
                "input file")


class ToolNotFound(Exception):
    """A tool of the toolchain cannot be found or run; the message names the flag or variable to set."""


@dataclass
class AssembleResult:
    ok: bool
    diagnostics: list[Diagnostic]
    cpp: str | None  # the C++ PTOAS wrote, when it succeeded
    flags: list[str] = field(default_factory=list)


def ptoas_arch(target: str) -> str:
    """PTOAS's name (`--pto-arch`) for a ptoc target."""
    try:
        return PTOAS_ARCH[target]
    except KeyError:
        raise ValueError(f"unknown target {target!r}: one of {', '.join(PTOAS_ARCH)}") from None


def _executable(path: str) -> str | None:
    if os.sep in path or (os.altsep and os.altsep in path):
        return path if os.path.isfile(path) and os.access(path, os.X_OK) else None
    return shutil.which(path)


def find_ptoas(explicit: str | None, environ=None) -> str:
    """The assembler: `--ptoas PATH`, else `$PTOC_PTOAS`, else `ptoas` on PATH. Raises ToolNotFound."""
    env = os.environ if environ is None else environ
    if explicit:
        exe = _executable(explicit)
        if exe is None:
            raise ToolNotFound(f"--ptoas {explicit}: not an executable file")
        return exe
    from_env = env.get(ENV_PTOAS, "")
    if from_env:
        exe = _executable(from_env)
        if exe is None:
            raise ToolNotFound(f"${ENV_PTOAS}={from_env}: not an executable file")
        return exe
    exe = shutil.which("ptoas", path=env.get("PATH"))
    if exe is None:
        raise ToolNotFound(f"no PTO assembler: pass --ptoas PATH, set ${ENV_PTOAS}, or put `ptoas` on PATH")
    return exe


_VERSIONS: dict[tuple, tuple[tuple[int, ...] | None, str]] = {}


def query_version(exe: str, timeout: float = 30) -> tuple[tuple[int, ...] | None, str]:
    """(version, text) from `exe --version` (e.g. ((0, 27), "ptoas 0.27")); version None when unknown."""
    try:
        st = os.stat(exe)
        key = (os.path.realpath(exe), st.st_mtime_ns, st.st_size)
    except OSError:
        key = (exe, 0, 0)
    if key in _VERSIONS:
        return _VERSIONS[key]
    try:
        r = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=timeout,
                           stdin=subprocess.DEVNULL, check=False)
        text = (r.stdout + "\n" + r.stderr).strip()
        ok = r.returncode == 0
    except (OSError, subprocess.TimeoutExpired) as e:
        text, ok = str(e), False
    version = None
    if ok:
        lines = [ln for ln in text.splitlines() if ln.strip()]
        chosen = next((ln for ln in lines if "ptoas" in ln.lower()), lines[0] if lines else "")
        m = re.search(r"\bv?(\d+)\.(\d+)(?:\.(\d+))?\b", chosen)
        if m:
            version = tuple(int(g) for g in m.groups() if g is not None)
    result = (version, text.splitlines()[0] if text else "")
    _VERSIONS[key] = result
    return result


def format_version(version: tuple[int, ...] | None) -> str:
    return "unknown" if version is None else "v" + ".".join(str(x) for x in version)


def has_nz_views(pto_text: str) -> bool:
    return NZ_MARK in pto_text


def assembler_flags(arch: str, level: str, version: tuple[int, ...] | None, nz_views: bool,
                    insert_sync: bool = True) -> list[str]:
    """The PTOAS command-line flags for a module (see the module docstring for each one's reason)."""
    flags = [f"--pto-arch={ptoas_arch(arch)}", f"--pto-level={level}"]
    if insert_sync:
        flags.append("--enable-insert-sync")
    if nz_views and version is not None and tuple(version[:2]) < NZ_EXPLICIT_LAYOUT_MIN:
        flags.append("--disable-infer-layout")
    return flags


def policy_notes(version: tuple[int, ...] | None, version_text: str, flags: list[str], pto_path: str,
                 nz_views: bool) -> list[Diagnostic]:
    """What the user should know about the flags chosen for this assembler."""
    notes = []
    where = Span(pto_path, 0, 0, 0, 0)
    if version is None:
        notes.append(Diagnostic(
            "PTOC-E0454", f"cannot tell the PTO assembler's version (`--version` said {version_text!r}); "
            "assuming it takes explicit NZ layouts (v0.61 or newer)", where, severity="warning",
            hint="use a PTOAS whose `ptoas --version` prints its release"))
    if "--disable-infer-layout" in flags and nz_views:
        notes.append(Diagnostic(
            "PTOC-I0455", f"PTOAS {format_version(version)} predates v0.61 and rejects explicit NZ views "
            "(NZ-15); assembling with --disable-infer-layout so it takes the layouts ptoc wrote", where,
            severity="info", rule="NZ-15"))
    return notes


def parse_messages(text: str, names: set[str], pto_path: str, hint: str | None = EMITTED_HINT) -> list[Diagnostic]:
    """PTOAS's messages as diagnostics. Locations in a file named in `names` point into `pto_path`; a
    `note:` attaches to the error before it; the closing `Error: ...` line becomes a note of the last error
    (or the error itself when nothing else was reported)."""

    def span_of(file: str | None, line: int, col: int) -> Span:
        if file is None or line <= 0:
            return Span(pto_path, 0, 0, 0, 0)
        shown = pto_path if (file in names or os.path.basename(file) in names) else file
        return Span(shown, line, col, line, col + 1)

    diags: list[Diagnostic] = []
    summaries: list[str] = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        m = _LOC_DIAG.match(line)
        if m:
            pos = _LOC_POS.search(m.group("loc"))
            span = span_of(pos.group("file"), int(pos.group("line")), int(pos.group("col"))) if pos else \
                span_of(None, 0, 0)
        else:
            m = _FILE_DIAG.match(line)
            if m:
                span = span_of(m.group("file"), int(m.group("line")), int(m.group("col")))
            else:
                m = _BARE_DIAG.match(line)
                if m:
                    span = span_of(None, 0, 0)
                else:
                    s = _SUMMARY.match(line)
                    if s:
                        summaries.append(s.group("msg").strip())
                    continue
        sev, msg = m.group("sev"), m.group("msg").strip()
        if sev == "remark":
            continue
        if sev == "note":
            if diags:
                last = diags[-1]
                diags[-1] = Diagnostic(last.code, last.message, last.span, last.hint, last.rule, last.severity,
                                       last.notes + ((f"PTOAS: {msg}", span if span.known else None),))
            continue
        diags.append(Diagnostic("PTOC-E0452", f"PTOAS: {msg}", span, severity=sev, hint=hint))
    errors = [i for i, d in enumerate(diags) if d.severity == "error"]
    if summaries and errors:
        i = errors[-1]
        d = diags[i]
        diags[i] = Diagnostic(d.code, d.message, d.span, d.hint, d.rule, d.severity,
                              d.notes + tuple((f"PTOAS: {s}", None) for s in summaries))
    elif summaries:
        diags.append(Diagnostic("PTOC-E0452", f"PTOAS: {summaries[0]}", Span(pto_path, 0, 0, 0, 0), hint=hint))
    return diags


def assemble_text(ptoas: str, pto_text: str, pto_path: str, flags: list[str], timeout: float,
                  hint: str | None = EMITTED_HINT) -> AssembleResult:
    """Run PTOAS with `flags` on `pto_text` (diagnostics point into `pto_path`); the C++ comes back as text.

    The module is written to a temporary folder under the base name of `pto_path`, so PTOAS's messages
    name that file; the folder is removed afterwards.
    """
    base = os.path.basename(pto_path) or "kernel.pto"
    where = Span(pto_path, 0, 0, 0, 0)
    with tempfile.TemporaryDirectory(prefix="ptoc-ptoas-") as work:
        src = os.path.join(work, base)
        out = os.path.join(work, "ptoas-out.cpp")
        with open(src, "w", encoding="utf-8", newline="") as fh:
            fh.write(pto_text)
        cmd = [ptoas, *flags, base, "-o", "ptoas-out.cpp"]
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, errors="replace", timeout=timeout,
                               stdin=subprocess.DEVNULL, cwd=work, check=False)
        except subprocess.TimeoutExpired:
            return AssembleResult(False, [Diagnostic("PTOC-E0451",
                                                     f"the PTO assembler did not finish within {timeout:g} s",
                                                     where, hint="raise --ptoas-timeout, or run the assembler "
                                                     "by hand")], None, flags)
        except OSError as e:
            return AssembleResult(False, [Diagnostic("PTOC-E0450",
                                                     f"cannot run the PTO assembler {ptoas}: {e.strerror or e}",
                                                     where)], None, flags)
        names = {base, src}
        diags = [d for d in parse_messages(r.stderr + "\n" + r.stdout, names, pto_path, hint)
                 if r.returncode != 0 or d.severity != "error"]
        if r.returncode != 0:
            if not any(d.severity == "error" for d in diags):
                tail = [ln for ln in (r.stderr or r.stdout).strip().splitlines() if ln.strip()][-1:] or \
                    ["(no output)"]
                diags.append(Diagnostic("PTOC-E0452", f"PTOAS exited with status {r.returncode}: {tail[0]}",
                                        where, hint=hint))
            return AssembleResult(False, diags, None, flags)
        try:
            with open(out, encoding="utf-8") as fh:
                cpp = fh.read()
        except OSError:
            diags.append(Diagnostic("PTOC-E0452", "PTOAS reported success but wrote no C++", where, hint=hint))
            return AssembleResult(False, diags, None, flags)
        return AssembleResult(True, diags, cpp, flags)


__all__ = ["AssembleResult", "PTOAS_ARCH", "ToolNotFound", "assemble_text", "assembler_flags", "find_ptoas",
           "format_version", "has_nz_views", "parse_messages", "policy_notes", "ptoas_arch", "query_version"]
