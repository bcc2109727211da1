"""Diagnostics for tools, through the installed `ptoc` script: `--diagnostics gcc`, the `N errors, M warnings`
summary line and `--error-limit`, on every command that takes `--diagnostics`."""

from __future__ import annotations

import json
import stat
import sys
from pathlib import Path

import pytest

from test_cli import INVALID, KERNEL, TRACEBACK, VALID, run

ROOT = Path(__file__).resolve().parents[1]
VADD = ROOT / "examples" / "vector_add.ir"


@pytest.fixture
def invalid(tmp_path: Path) -> Path:
    f = tmp_path / "invalid.ir"
    f.write_text(INVALID)
    return f


def many_errors(tmp_path: Path, n: int) -> Path:
    """A function that reads `n` undefined names: one PTOC-E0101 each, on lines 4 .. n+3."""
    body = "".join(f"    v{i}: pl.Scalar[pl.INDEX] = x + u{i}\n" for i in range(n))
    f = tmp_path / f"many{n}.ir"
    f.write_text("import pypto.language as pl\n@pl.function\n"
                 "def f(x: pl.Scalar[pl.INDEX]) -> pl.Scalar[pl.INDEX]:\n" + body + "    return x\n")
    return f


def test_gcc_format_is_one_line_per_diagnostic_with_note_lines(invalid):
    p = run("check", "--diagnostics", "gcc", str(invalid))
    assert p.returncode == 1 and p.stdout == ""
    assert p.stderr.splitlines() == [
        f"{invalid}:4:34: error: undefined name 'xx' [PTOC-E0101]",
        f"{invalid}:4:34: note: hint: did you mean 'x'?",
        f"{invalid}:5:8: error: annotation contradicts the value: the value has dtype FP32, the annotation says "
        "FP16 [PTOC-E0105]",
        f"{invalid}:5:8: note: hint: the value's type is pl.Tensor[[64, 128], pl.FP32]",
        "2 errors, 0 warnings",
    ]


def test_gcc_format_names_the_rule_and_where_it_is_explained(tmp_path):
    f = tmp_path / "fp4.ir"
    f.write_text(VALID.replace("t: pl.Tensor[[64, 128], pl.FP32]", "t: pl.Tensor[[64, 128], pl.FP4]"))
    p = run("check", "--diagnostics", "gcc", str(f))
    assert p.returncode == 1
    assert f"{f}:3:55: error: pl.FP4 no longer exists [PTOC-E0108]" in p.stderr.splitlines()
    assert f"{f}:3:55: note: rule FP4-1: see `ptoc explain FP4-1`" in p.stderr.splitlines()


def test_gcc_format_of_an_unreadable_file_has_the_file_name_only(tmp_path):
    p = run("check", "--diagnostics", "gcc", str(tmp_path / "missing.ir"))
    assert p.returncode == 1
    assert p.stderr.splitlines()[0].startswith(f"{tmp_path / 'missing.ir'}: error: cannot read ")
    assert p.stderr.splitlines()[0].endswith(" [PTOC-E0004]")


def test_a_gcc_problem_matcher_regex_reads_every_error(invalid):
    import re

    # the pattern of the common gcc problem matchers (file, line, column, severity, message)
    matcher = re.compile(r"^(.*):(\d+):(\d+):\s+(?:fatal\s+)?(warning|error):\s+(.*)$")
    p = run("check", "--diagnostics", "gcc", str(invalid))
    hits = [m.groups() for m in map(matcher.match, p.stderr.splitlines()) if m]
    assert [(h[0], h[1], h[2], h[3]) for h in hits] == [(str(invalid), "4", "34", "error"),
                                                        (str(invalid), "5", "8", "error")]


def test_summary_line_in_text_and_gcc_but_not_json(invalid):
    text = run("check", str(invalid))
    assert text.stderr.splitlines()[-1] == "2 errors, 0 warnings"
    gcc = run("check", "--diagnostics", "gcc", str(invalid))
    assert gcc.stderr.splitlines()[-1] == "2 errors, 0 warnings"
    js = run("check", "--diagnostics", "json", str(invalid))
    assert js.stderr == ""
    assert [json.loads(x)["code"] for x in js.stdout.splitlines()] == ["PTOC-E0101", "PTOC-E0105"]


def test_summary_counts_one_error_in_the_singular(tmp_path):
    f = many_errors(tmp_path, 1)
    assert run("check", str(f)).stderr.splitlines()[-1] == "1 error, 0 warnings"


def test_no_summary_line_when_there_is_nothing_to_count(tmp_path):
    f = tmp_path / "ok.ir"
    f.write_text(KERNEL)
    p = run("check", str(f))
    assert p.returncode == 0 and p.stderr == "ok: 1 file checked, no errors\n"


def test_warnings_are_counted(tmp_path):
    exe = tmp_path / "fake-ptoas"
    exe.write_text(f"#!{sys.executable}\nimport sys\nargs = sys.argv[1:]\n"
                   "if args == ['--version']:\n    print('ptoas 0.61')\n    sys.exit(0)\n"
                   "pto = [a for a in args if a.endswith('.pto')][0]\n"
                   "sys.stderr.write(pto + ':2:1: warning: unused value\\n')\n"
                   "open(args[args.index('-o') + 1], 'w').write('// cpp')\n")
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    p = run("compile", str(VADD), "-o", str(tmp_path / "o.pto"), "--assemble", "--ptoas", str(exe),
            "--diagnostics", "gcc")
    assert p.returncode == 0, p.stderr
    assert f"{tmp_path / 'o.pto'}:2:1: warning: PTOAS: unused value [PTOC-E0452]" in p.stderr.splitlines()
    assert p.stderr.splitlines()[-1] == "0 errors, 1 warning"


def test_error_limit_defaults_to_50_and_says_so(tmp_path):
    f = many_errors(tmp_path, 60)
    p = run("check", "--diagnostics", "gcc", str(f))
    errors = [x for x in p.stderr.splitlines() if ": error: " in x]
    assert len(errors) == 50
    assert errors[-1].startswith(f"{f}:53:")   # the first 50, in source order: lines 4 .. 53
    lines = p.stderr.splitlines()
    assert lines[-2] == "ptoc: stopped after 50 errors; 10 more not shown (--error-limit N shows more, 0 shows all)"
    assert lines[-1] == "60 errors, 0 warnings"


@pytest.mark.parametrize("fmt", ["text", "gcc", "json"])
def test_error_limit_n_and_0(tmp_path, fmt):
    f = many_errors(tmp_path, 60)
    shown = run("check", "--diagnostics", fmt, "--error-limit", "3", str(f))
    every = run("check", "--diagnostics", fmt, "--error-limit", "0", str(f))
    assert shown.returncode == every.returncode == 1

    def count(p):
        if fmt == "json":
            return len(p.stdout.splitlines())
        return sum(1 for x in p.stderr.splitlines() if "error[PTOC-" in x or ": error: " in x)

    assert count(shown) == 3 and count(every) == 60
    assert "stopped after 3 errors; 57 more not shown" in shown.stderr
    assert "stopped after" not in every.stderr


def test_error_limit_must_not_be_negative(tmp_path):
    p = run("check", "--error-limit", "-1", str(many_errors(tmp_path, 1)))
    assert p.returncode == 2 and "--error-limit" in p.stderr


SYNTAX_ERROR = "import pypto.language as pl\n@pl.function\ndef f(x: pl.Scalar[pl.INDEX]) -> pl.Scalar[pl.INDEX]:\n" \
    "    y = x +\n    return y\n"


@pytest.mark.parametrize("command", [
    ["check"], ["fmt"], ["compile", "-o", "{tmp}/o.pto"], ["passes", "--dump-after", "all"],
    ["passes", "--validate"], ["run"],
], ids=["check", "fmt", "compile", "passes", "passes-validate", "run"])
def test_every_command_with_diagnostics_takes_gcc_and_error_limit(tmp_path, command):
    f = tmp_path / "bad.ir"
    f.write_text(SYNTAX_ERROR)
    args = [a.format(tmp=tmp_path) for a in command]
    p = run(*args, "--diagnostics", "gcc", "--error-limit", "5", str(f))
    assert p.returncode == 1, p.stderr
    assert TRACEBACK not in p.stderr
    assert p.stderr.splitlines()[0].startswith(f"{f}:4:")
    assert p.stderr.splitlines()[0].endswith("[PTOC-E0001]")
    assert p.stderr.splitlines()[-1] == "1 error, 0 warnings"
    assert "--error-limit" in run(*args[:1], "--help").stdout
