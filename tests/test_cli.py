"""The `ptoc` command line, run as a real subprocess of the installed console script.

Exit codes: 0 ok, 1 the input has errors, 2 usage error, 3 internal error. A Python traceback never
reaches the user.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PTOC = Path(sys.executable).with_name("ptoc")
TRACEBACK = "Traceback (most recent call last)"

VALID = """\
import pypto.language as pl
@pl.function
def f(x: pl.Scalar[pl.INDEX], t: pl.Tensor[[64, 128], pl.FP32]) -> pl.Scalar[pl.INDEX]:
    y: pl.Scalar[pl.INDEX] = x + 1
    return y
"""
# A kernel: what `check` and `compile` accept (VALID has nothing to emit, which both reject).
KERNEL = """\
import pypto.language as pl
@pl.function(type=pl.FunctionType.InCore)
def k(x: pl.Tensor[[16, 64], pl.FP32], y: pl.Out[pl.Tensor[[16, 64], pl.FP32]]) -> pl.Tensor[[16, 64], pl.FP32]:
    t: pl.Tile[[16, 64], pl.FP32, pl.Mem.Vec] = pl.tile.load(x, [0, 0], [16, 64], target_memory=pl.Mem.Vec)
    y_1: pl.Tensor[[16, 64], pl.FP32] = pl.tile.store(t, [0, 0], y)
    return y_1
"""
# VALID as `ptoc fmt` prints it: a header comment naming the program, a blank line after the import.
CANONICAL = """\
# pypto.program: f
import pypto.language as pl

@pl.function
def f(x: pl.Scalar[pl.INDEX], t: pl.Tensor[[64, 128], pl.FP32]) -> pl.Scalar[pl.INDEX]:
    y: pl.Scalar[pl.INDEX] = x + 1
    return y
"""
# Two errors: an undefined name (line 4, column 34, with a did-you-mean hint) and an annotation whose
# dtype contradicts the value (line 5, column 8).
INVALID = """\
import pypto.language as pl
@pl.function
def f(x: pl.Scalar[pl.INDEX], t: pl.Tensor[[64, 128], pl.FP32]) -> pl.Scalar[pl.INDEX]:
    y: pl.Scalar[pl.INDEX] = x + xx
    z: pl.Tensor[[64, 128], pl.FP16] = t
    return y
"""
# One error with a spec rule: the removed FP4 dtype (line 4, column 24).
FP4 = VALID.replace("    y: pl.Scalar[pl.INDEX] = x + 1\n", "    z: pl.Tensor[[64], pl.FP4] = t\n    y = x\n")


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR", "PTOC_TRACEBACK")}
    env.update(extra)
    return env


def run(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    p = subprocess.run([str(PTOC), *args], capture_output=True, text=True, env=env or _env(), cwd=cwd, timeout=60)
    assert TRACEBACK not in p.stderr and TRACEBACK not in p.stdout
    return p


def run_python(code: str, *argv: str) -> subprocess.CompletedProcess:
    p = subprocess.run([sys.executable, "-c", textwrap.dedent(code), *argv], capture_output=True, text=True,
                       env=_env(), timeout=60)
    return p


@pytest.fixture
def valid(tmp_path: Path) -> Path:
    f = tmp_path / "valid.ir"
    f.write_text(VALID)
    return f


@pytest.fixture
def kernel(tmp_path: Path) -> Path:
    f = tmp_path / "kernel.ir"
    f.write_text(KERNEL)
    return f


@pytest.fixture
def invalid(tmp_path: Path) -> Path:
    f = tmp_path / "invalid.ir"
    f.write_text(INVALID)
    return f


def test_console_script_is_installed_next_to_the_interpreter():
    assert PTOC.exists()


# ------------------------------------------------------------------ --version and --help


def test_version_prints_ptoc_version_and_the_ptoas_pin_from_versions_env():
    pin = re.search(r"^PTOAS_VERSION=(\S+)$", (ROOT / "toolchain" / "versions.env").read_text(), re.M).group(1)
    version = re.search(r'^version = "([^"]+)"$', (ROOT / "pyproject.toml").read_text(), re.M).group(1)
    p = run("--version")
    assert p.returncode == 0
    assert p.stdout.strip() == f"ptoc {version} (targets PTOAS {pin})"


def test_top_level_help_lists_commands_and_exit_codes():
    p = run("--help")
    assert p.returncode == 0
    for word in ("check", "fmt", "--version", "Exit codes", "NO_COLOR"):
        assert word in p.stdout


@pytest.mark.parametrize("command,options", [
    ("check", ("--diagnostics", "--arch", "FILES")),
    ("fmt", ("--check", "--in-place", "--diagnostics", "FILE", "canonical")),
])
def test_each_command_help_explains_its_options(command, options):
    p = run(command, "--help")
    assert p.returncode == 0
    for o in options:
        assert o in p.stdout
    assert run(command, "-h").stdout == p.stdout


# ------------------------------------------------------------------ check: exit codes


def test_check_valid_file_exits_0(kernel):
    p = run("check", str(kernel))
    assert p.returncode == 0
    assert p.stdout == ""
    assert "ok: 1 file checked, no errors" in p.stderr


def test_check_invalid_file_exits_1_and_reports_every_error(invalid):
    p = run("check", str(invalid))
    assert p.returncode == 1
    assert f"{invalid}:4:34: error[PTOC-E0101]: undefined name 'xx'" in p.stderr
    assert f"{invalid}:5:8: error[PTOC-E0105]: annotation contradicts the value" in p.stderr
    assert p.stderr.index("PTOC-E0101") < p.stderr.index("PTOC-E0105")
    assert "ok:" not in p.stderr


def test_check_several_files_exits_1_when_any_has_errors(kernel, invalid):
    p = run("check", str(kernel), str(invalid))
    assert p.returncode == 1
    assert str(invalid) in p.stderr and f"{kernel}:" not in p.stderr
    p = run("check", str(kernel), str(kernel))
    assert p.returncode == 0
    assert "ok: 2 files checked, no errors" in p.stderr


@pytest.mark.parametrize("args", [
    ("check",),                                  # missing FILES
    ("check", "--bogus", "x.ir"),                # unknown option
    ("check", "--diagnostics", "xml", "x.ir"),   # bad choice
    ("fmt",),                                    # missing FILE
    ("nosuchcommand",),
], ids=["check_without_file", "unknown_option", "bad_diagnostics_choice", "fmt_without_file", "unknown_command"])
def test_usage_errors_exit_2(args):
    p = run(*args)
    assert p.returncode == 2
    assert "Usage:" in p.stderr


def test_fmt_check_and_in_place_together_is_a_usage_error(valid):
    before = valid.read_bytes()
    p = run("fmt", "--check", "--in-place", str(valid))
    assert p.returncode == 2
    assert "--check and --in-place cannot be used together" in p.stderr
    assert valid.read_bytes() == before


def test_missing_file_exits_1_with_e0004(tmp_path):
    missing = tmp_path / "missing.ir"
    p = run("check", str(missing))
    assert p.returncode == 1
    assert f"{missing}: error[PTOC-E0004]: cannot read {missing}: No such file or directory" in p.stderr
    p = run("fmt", str(missing))
    assert p.returncode == 1 and "PTOC-E0004" in p.stderr


def test_missing_file_in_json_has_no_position(tmp_path):
    p = run("check", "--diagnostics", "json", str(tmp_path / "missing.ir"))
    assert p.returncode == 1
    d = json.loads(p.stdout)
    assert d["code"] == "PTOC-E0004" and d["line"] is None and d["column"] is None


def test_non_utf8_file_exits_1_with_e0004_at_the_bad_byte(tmp_path):
    f = tmp_path / "latin1.ir"
    f.write_bytes(b"import pypto.language as pl\n# caf\xe9\n")
    p = run("check", str(f))
    assert p.returncode == 1
    assert f"{f}:2:6: error[PTOC-E0004]: the file is not valid UTF-8 text" in p.stderr
    assert "UTF-8" in p.stderr


def test_nul_bytes_exit_1_with_e0004(tmp_path):
    f = tmp_path / "nul.ir"
    f.write_bytes(VALID.encode() + b"\x00\n")
    p = run("check", str(f))
    assert p.returncode == 1 and "PTOC-E0004" in p.stderr


def test_directory_argument_is_a_usage_error(tmp_path):
    assert run("check", str(tmp_path)).returncode == 2


def test_utf8_bom_is_accepted(tmp_path):
    f = tmp_path / "bom.ir"
    f.write_bytes(b"\xef\xbb\xbf" + KERNEL.encode())
    assert run("check", str(f)).returncode == 0


# ------------------------------------------------------------------ diagnostics rendering


def test_json_diagnostics_are_one_object_per_line_in_order(invalid):
    p = run("check", "--diagnostics", "json", str(invalid))
    assert p.returncode == 1
    lines = p.stdout.splitlines()
    objs = [json.loads(line) for line in lines]
    assert len(objs) == 2
    for o in objs:
        assert {"code", "line", "column", "end_line", "end_column", "hint", "rule", "message", "severity",
                "file"} <= set(o)
        assert o["file"] == str(invalid) and o["severity"] == "error"
    first, second = objs
    assert (first["code"], first["line"], first["column"], first["end_column"]) == ("PTOC-E0101", 4, 34, 36)
    assert first["hint"] == "did you mean 'x'?" and first["rule"] is None
    assert (second["code"], second["line"], second["column"]) == ("PTOC-E0105", 5, 8)
    assert second["hint"] == "the value's type is pl.Tensor[[64, 128], pl.FP32]"
    assert "ok:" not in p.stderr and "\x1b[" not in p.stdout


def test_json_diagnostic_carries_the_spec_rule(tmp_path):
    f = tmp_path / "fp4.ir"
    f.write_text(FP4)
    p = run("check", "--diagnostics", "json", str(f))
    assert p.returncode == 1
    (d,) = [json.loads(line) for line in p.stdout.splitlines()]
    assert (d["code"], d["line"], d["column"], d["end_column"]) == ("PTOC-E0108", 4, 24, 30)
    assert d["rule"] == "FP4-1" and "pl.FP4E2M1X2" in d["hint"]


def test_json_output_of_a_valid_file_is_empty(kernel):
    p = run("check", "--diagnostics", "json", str(kernel))
    assert p.returncode == 0 and p.stdout == ""


def test_text_diagnostic_shows_location_source_line_and_caret(invalid):
    p = run("check", str(invalid))
    lines = p.stderr.splitlines()
    i = lines.index(f"{invalid}:4:34: error[PTOC-E0101]: undefined name 'xx'")
    assert lines[i + 1] == "  |"
    assert lines[i + 2] == "4 |     y: pl.Scalar[pl.INDEX] = x + xx"
    caret = lines[i + 3]
    assert caret == "  | " + " " * 33 + "^^"
    # the caret sits exactly under `xx`
    assert lines[i + 2][caret.index("^"):caret.index("^") + 2] == "xx"
    assert lines[i + 4] == "  hint: did you mean 'x'?"


def test_text_diagnostic_shows_the_rule(tmp_path):
    f = tmp_path / "fp4.ir"
    f.write_text(FP4)
    p = run("check", str(f))
    assert p.returncode == 1
    assert "  rule: FP4-1 (see `ptoc explain FP4-1`)" in p.stderr.splitlines()


def test_caret_is_aligned_under_a_tab_indented_line(tmp_path):
    f = tmp_path / "tab.ir"
    f.write_text(VALID.replace("    return y", "\treturn y"))
    p = run("check", str(f))
    assert p.returncode == 1
    lines = p.stderr.splitlines()
    i = next(k for k, line in enumerate(lines) if "error[PTOC-E0003]: tab in indentation" in line)
    assert lines[i].startswith(f"{f}:5:1:")
    assert lines[i + 2] == "5 |     return y"   # the tab shown as 4 spaces
    assert lines[i + 3] == "  | ^^^^"          # the caret covers the whole tab


def test_source_line_shown_is_the_line_the_parser_counted(tmp_path):
    # a form feed inside a comment is not a line break for the parser, so not for the display either
    f = tmp_path / "ff.ir"
    f.write_text(INVALID.replace("    y: pl.Scalar", "    # page\x0cbreak\n    y: pl.Scalar"))
    p = run("check", str(f))
    lines = p.stderr.splitlines()
    i = lines.index(f"{f}:5:34: error[PTOC-E0101]: undefined name 'xx'")
    assert lines[i + 2] == "5 |     y: pl.Scalar[pl.INDEX] = x + xx"


def test_colour_only_when_forced(invalid):
    forced = run("check", str(invalid), env=_env(FORCE_COLOR="1"))
    assert forced.returncode == 1
    assert "\x1b[1;31merror[PTOC-E0101]\x1b[0m" in forced.stderr
    plain = run("check", str(invalid))  # stderr is a pipe, not a TTY
    assert "\x1b[" not in plain.stderr
    no_color = run("check", str(invalid), env=_env(NO_COLOR="1", FORCE_COLOR="1"))
    assert "\x1b[" not in no_color.stderr
    # apart from the escapes, forced output is the plain output
    assert re.sub(r"\x1b\[[0-9;]*m", "", forced.stderr) == plain.stderr


def test_json_is_never_coloured(invalid):
    p = run("check", "--diagnostics", "json", str(invalid), env=_env(FORCE_COLOR="1"))
    assert "\x1b[" not in p.stdout
    json.loads(p.stdout.splitlines()[0])


# ------------------------------------------------------------------ fmt


def test_fmt_prints_canonical_text(valid):
    p = run("fmt", str(valid))
    assert p.returncode == 0
    assert p.stdout == CANONICAL
    assert valid.read_text() == VALID  # printing never writes


def test_fmt_keeps_comments_and_drops_blank_lines_and_wrapping(tmp_path):
    f = tmp_path / "messy.ir"
    f.write_text(textwrap.dedent("""\
        # a comment
        import pypto.language as pl


        @pl.function
        def f(
            x: pl.Scalar[pl.INDEX],
            t: pl.Tensor[[64, 128], pl.FP32],
        ) -> pl.Scalar[pl.INDEX]:
            # leading comment
            y: pl.Scalar[pl.INDEX] = (
                x + 1
            )  # trailing
            return y
        # end of file
        """))
    p = run("fmt", str(f))
    assert p.returncode == 0, p.stderr
    # the file header stays first, the header comment naming the program goes right above the import
    assert p.stdout == textwrap.dedent("""\
        # a comment
        # pypto.program: f
        import pypto.language as pl

        @pl.function
        def f(x: pl.Scalar[pl.INDEX], t: pl.Tensor[[64, 128], pl.FP32]) -> pl.Scalar[pl.INDEX]:
            # leading comment
            y: pl.Scalar[pl.INDEX] = x + 1  # trailing
            return y
        # end of file
        """)


def test_fmt_in_place_keeps_every_comment_and_the_first_line(tmp_path):
    # the report: --in-place deleted every comment and replaced the first line
    f = tmp_path / "k.ir"
    f.write_text("# Copyright 2026 the ptoc authors\n" + VALID.replace("return y", "return y  # the result"))
    p = run("fmt", "--in-place", str(f))
    assert p.returncode == 0, p.stderr
    assert f.read_text() == ("# Copyright 2026 the ptoc authors\n"
                             + CANONICAL.replace("return y", "return y  # the result"))
    before = f.read_bytes()
    p = run("fmt", "--check", str(f))   # and the result is canonical
    assert p.returncode == 0 and f.read_bytes() == before


def test_fmt_formats_a_program_that_fails_the_checks_and_says_so(invalid):
    p = run("fmt", str(invalid))
    assert p.returncode == 0, p.stderr
    assert p.stdout == CANONICAL.replace("x + 1", "x + xx").replace(
        "    return y", "    z: pl.Tensor[[64, 128], pl.FP16] = t\n    return y")
    assert f"note: {invalid} has 2 errors" in p.stderr
    assert f"ptoc check {invalid}" in p.stderr
    assert "PTOC-E0101" not in p.stderr   # the errors themselves are `ptoc check`'s to show
    p = run("fmt", "--in-place", str(invalid))
    assert p.returncode == 0 and invalid.read_text().startswith("# pypto.program: f\n")


def test_fmt_check_exits_0_on_canonical_input(tmp_path):
    f = tmp_path / "canon.ir"
    f.write_text(CANONICAL)
    p = run("fmt", "--check", str(f))
    assert p.returncode == 0
    assert p.stdout == ""


def test_fmt_check_exits_1_with_a_diff_on_other_input(valid):
    before = valid.read_bytes()
    p = run("fmt", "--check", str(valid))
    assert p.returncode == 1
    assert p.stdout.startswith(f"--- {valid}\n+++ {valid} (formatted)\n")
    assert "+# pypto.program: f\n" in p.stdout
    assert f"{valid}: not in canonical form" in p.stderr
    assert valid.read_bytes() == before


def test_fmt_in_place_rewrites_atomically(valid):
    os.chmod(valid, 0o640)
    inode = valid.stat().st_ino
    p = run("fmt", "--in-place", str(valid))
    assert p.returncode == 0
    assert p.stdout == ""
    assert valid.read_text() == CANONICAL
    st = valid.stat()
    assert st.st_ino != inode            # a new file renamed over the old one, not rewritten in place
    assert st.st_mode & 0o777 == 0o640   # with the old file's permissions
    assert sorted(x.name for x in valid.parent.iterdir()) == ["valid.ir"]  # no temp file left behind
    # canonical text is left alone
    p = run("fmt", "-i", str(valid))
    assert p.returncode == 0 and valid.stat().st_ino == st.st_ino


@pytest.fixture
def unparsable(tmp_path: Path) -> Path:
    f = tmp_path / "unparsable.ir"
    f.write_text(VALID.replace("x + 1", "x +"))  # a syntax error on line 4
    return f


def test_fmt_in_place_leaves_a_file_that_does_not_parse_untouched(unparsable):
    before = unparsable.read_bytes()
    stat = unparsable.stat()
    p = run("fmt", "--in-place", str(unparsable))
    assert p.returncode == 1
    assert f"{unparsable}:4:" in p.stderr and "PTOC-E0001" in p.stderr
    assert unparsable.read_bytes() == before
    assert unparsable.stat().st_ino == stat.st_ino and unparsable.stat().st_mtime_ns == stat.st_mtime_ns
    assert sorted(x.name for x in unparsable.parent.iterdir()) == ["unparsable.ir"]


def test_fmt_of_a_file_that_does_not_parse_prints_nothing_on_stdout(unparsable):
    p = run("fmt", str(unparsable))
    assert p.returncode == 1 and p.stdout == ""
    assert "PTOC-E0001" in p.stderr


def test_fmt_in_place_write_failure_is_e0006_not_a_crash(valid):
    # the temp file beside the target cannot be created (as on a read-only folder, which root ignores)
    p = run_python("""
        import sys
        import ptoc.outputs

        def fail(*args, **kwargs):
            raise PermissionError(13, "Permission denied")

        ptoc.outputs.tempfile.mkstemp = fail
        sys.argv = ["ptoc", "fmt", "--in-place", sys.argv[1]]
        import ptoc.cli
        ptoc.cli.main()
    """, str(valid))
    assert p.returncode == 2, p.stderr  # an environment error
    assert f"error[PTOC-E0006]: cannot write {valid}: Permission denied" in p.stderr
    assert TRACEBACK not in p.stderr
    assert valid.read_text() == VALID


# ------------------------------------------------------------------ internal errors


INTERNAL = """
    import sys
    import ptoc.frontend.parser
    from ptoc.diagnostics import InternalError

    def broken(*args, **kwargs):
        raise {exc}

    ptoc.frontend.parser.parse_program = broken
    ptoc.frontend.parser.parse_for_format = broken
    sys.argv = ["ptoc", *sys.argv[1:]]
    import ptoc.cli
    ptoc.cli.main()
"""


@pytest.mark.parametrize("exc,shown", [
    ('RuntimeError("boom")', "internal error: RuntimeError: boom"),
    ('InternalError("invariant broken")', "internal error: InternalError: invariant broken"),
    ("RecursionError()", "internal error: RecursionError"),
], ids=["runtime_error", "internal_error", "recursion_error"])
@pytest.mark.parametrize("command", ["check", "fmt"])
def test_internal_error_exits_3_with_a_report_request_and_no_traceback(valid, exc, shown, command):
    p = run_python(INTERNAL.format(exc=exc), command, str(valid))
    assert p.returncode == 3, p.stderr
    assert shown in p.stderr
    assert "this is a bug in ptoc, not in your program. Please report it" in p.stderr
    assert TRACEBACK not in p.stderr and TRACEBACK not in p.stdout


def test_internal_error_leaves_the_file_untouched_by_fmt_in_place(valid):
    p = run_python(INTERNAL.format(exc='RuntimeError("boom")'), "fmt", "--in-place", str(valid))
    assert p.returncode == 3
    assert valid.read_text() == VALID


# ------------------------------------------------------------------ odd inputs through the real CLI


@pytest.mark.parametrize("text", [
    "",
    "# only a comment\n",
    "import pypto.language as pl\n@pl.function\ndef f(x: pl.Scalar[pl.INDEX]",
    "import pypto.language as pl\n@pl.function\ndef f(x: pl.Scalar[pl.INDEX]) -> pl.Scalar[pl.INDEX]:\n    y = "
    + "(" * 25000 + "x" + ")" * 25000 + "\n    return y\n",
    "import pypto.language as pl\n@pl.function\ndef f(x: pl.Scalar[pl.INDEX]) -> pl.Scalar[pl.INDEX]:\n    y = x + "
    + "7" * 6000 + "\n    return y\n",
    "\x0c\x0b\x1c\u2028\n",
], ids=["empty", "comment_only", "cut_off", "deep_nesting", "huge_integer", "odd_whitespace"])
def test_bad_input_exits_1_without_traceback(tmp_path, text):
    f = tmp_path / "odd.ir"
    f.write_text(text, encoding="utf-8")
    commands = [("check", str(f)), ("fmt", str(f)), ("check", "--diagnostics", "json", str(f))]
    if len(text) > 10000:
        commands = commands[:1]  # slow inputs: once is enough
    for args in commands:
        p = run(*args)
        assert p.returncode == 1, (args, p.stderr[-2000:])
        assert "internal error" not in p.stderr


# ------------------------------------------------------------------ check --syntax-only


def test_check_syntax_only_reports_the_front_end_errors_at_their_lines(invalid):
    p = run("check", "--syntax-only", "--diagnostics", "json", str(invalid))
    assert p.returncode == 1
    found = sorted((d["code"], d["line"], d["column"]) for d in map(json.loads, p.stdout.splitlines()))
    full = run("check", "--diagnostics", "json", str(invalid))
    assert found == sorted((d["code"], d["line"], d["column"]) for d in map(json.loads, full.stdout.splitlines()))
    assert [(line, col) for _, line, col in found] == [(4, 34), (5, 8)]  # INVALID's two errors, as written there


def test_check_syntax_only_stops_before_lowering(tmp_path, kernel):
    # VALID has no kernel: only the pipeline finds that (PTOC-E0405); the front end accepts it.
    f = tmp_path / "no_kernel.ir"
    f.write_text(VALID)
    quick = run("check", "--syntax-only", str(f))
    assert quick.returncode == 0 and "checked (front end only), no errors" in quick.stderr
    full = run("check", str(f))
    assert full.returncode == 1 and "PTOC-E0405" in full.stderr
    ok = run("check", "--syntax-only", str(kernel))
    assert ok.returncode == 0 and "(front end only)" in ok.stderr
    assert "--syntax-only" in run("check", "--help").stdout
