"""`ptoc compile FILE... --output-dir DIR [-j N]`, `--depfile` and the progress bar, through the real
`ptoc` script in subprocesses.

Expected outputs come from the single-file form (`compile FILE -o OUT`), which other tests pin to the
golden files; expected depfile lines are written out by hand from the make format.
"""

from __future__ import annotations

import os
import pty
import select
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

PTOC = Path(sys.executable).with_name("ptoc")
ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = sorted((ROOT / "examples").glob("*.ir"))
LONE_KERNEL = ROOT / "examples" / "matmul_bf16.ir"  # one kernel, no manifest
# The pin file the installed `ptoc` script reads: toolchain/versions.env of the checkout for an editable
# install, the copy inside site-packages for a regular one (as CI installs it). Asked of the script's own
# interpreter outside the checkout, where `ptoc` means the installed package.
PIN = Path(subprocess.run(
    [sys.executable, "-c", "import importlib.resources as r; print(r.files('ptoc.toolchain') / 'versions.env')"],
    capture_output=True, text=True, check=True, cwd="/").stdout.strip()).resolve()
BROKEN = "import pypto.language as pl\n@pl.program\nclass p:\n    @pl.function\n    def f(self, x: (:\n"


def ptoc(*args, cwd=None):
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    return subprocess.run([str(PTOC), *map(str, args)], capture_output=True, text=True, cwd=cwd, env=env,
                          timeout=600)


def _tree(d: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(d.iterdir())} if d.exists() else {}


def test_batch_outputs_equal_the_single_file_outputs(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    # lone kernels: a whole program (also a split mixed kernel, whose Group calls its pair, or an spmd
    # launch) compiled alone
    # writes a kernels manifest too, a batch does not (yet)
    for p in [p for p in EXAMPLES if "FunctionType.Orchestration" not in p.read_text() and "pl.spmd(" not in p.read_text()
              and not ("Mem.Acc" in p.read_text() and "Mem.Vec" in p.read_text())][:4]:
        shutil.copy(p, src / p.name)
    single = tmp_path / "single"
    single.mkdir()
    for p in sorted(src.iterdir()):
        r = ptoc("compile", p, "-o", single / (p.stem + ".pto"))
        assert r.returncode == 0, r.stderr
    for jobs in ("1", "2"):
        out = tmp_path / f"out{jobs}"
        r = ptoc("compile", *sorted(src.iterdir()), "--output-dir", out, "-j", jobs)
        assert r.returncode == 0, r.stderr
        assert r.stdout == ""
        assert _tree(out) == _tree(single)
        assert len(_tree(out)) == 8  # a .pto and a .h per input


def test_batch_reports_errors_per_file_and_writes_the_good_ones(tmp_path):
    # two single kernels (a whole program would also write its kernels manifest)
    good1, good2 = (next(e for e in EXAMPLES if e.name == n) for n in ("acc_store_nz.ir", "matmul_bf16.ir"))
    bad = tmp_path / "bad.ir"
    bad.write_text(BROKEN)
    missing = tmp_path / "missing.ir"
    out = tmp_path / "out"
    r = ptoc("compile", good1, bad, missing, good2, "--output-dir", out, "-j", "2", "--diagnostics", "gcc")
    assert r.returncode == 1
    assert f"{bad}:5:" in r.stderr and "PTOC-E0001" in r.stderr  # the broken parameter list, line 5
    assert f"{missing}" in r.stderr and "PTOC-E0004" in r.stderr
    names = set(_tree(out))
    assert names == {good1.stem + ".pto", good1.stem + ".h", good2.stem + ".pto", good2.stem + ".h"}
    # diagnostics follow the order of the inputs whatever the order of completion
    assert r.stderr.index(str(bad)) < r.stderr.index(str(missing))


def test_batch_same_stem_is_refused_before_anything_is_written(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    shutil.copy(EXAMPLES[0], tmp_path / "a" / "k.ir")
    shutil.copy(EXAMPLES[1], tmp_path / "b" / "k.ir")
    shutil.copy(EXAMPLES[2], tmp_path / "first.ir")
    out = tmp_path / "out"
    r = ptoc("compile", tmp_path / "first.ir", tmp_path / "a" / "k.ir", tmp_path / "b" / "k.ir",
             "--output-dir", out, "-j", "2")
    assert r.returncode == 2
    assert "PTOC-E0007" in r.stderr and "k.pto" in r.stderr
    assert not out.exists()  # not even the first file's outputs


def test_batch_output_over_an_input_is_refused_before_anything_is_written(tmp_path):
    shutil.copy(EXAMPLES[0], tmp_path / "one.ir")
    shutil.copy(EXAMPLES[1], tmp_path / "two.ir")
    (tmp_path / "two.h").write_text("keep me\n")
    r = ptoc("compile", tmp_path / "one.ir", tmp_path / "two.ir", "--output-dir", tmp_path,
             "--depfile", tmp_path / "two.ir")
    assert r.returncode == 2 and "PTOC-E0007" in r.stderr
    assert not (tmp_path / "one.pto").exists()
    assert (tmp_path / "two.h").read_text() == "keep me\n"
    assert (tmp_path / "two.ir").read_bytes() == EXAMPLES[1].read_bytes()


def test_batch_failed_file_leaves_its_old_outputs_untouched(tmp_path):
    src = tmp_path / "k.ir"
    shutil.copy(EXAMPLES[0], src)
    out = tmp_path / "out"
    assert ptoc("compile", src, "--output-dir", out).returncode == 0
    before = _tree(out)
    src.write_text(BROKEN)
    r = ptoc("compile", src, "--output-dir", out)
    assert r.returncode == 1
    assert _tree(out) == before


@pytest.mark.parametrize("args, words", [
    (["a.ir", "b.ir", "-o", "x.pto"], "--output-dir"),
    (["a.ir"], "-o OUTPUT.pto"),
    (["a.ir", "--output-dir", "d", "-o", "x.pto"], "cannot be used together"),
    (["a.ir", "--output-dir", "d", "--header", "x.h"], "--header"),
    (["-", "--output-dir", "d"], "standard input"),
    (["a.ir", "-o", "-", "--no-header", "--depfile", "x.d"], "--depfile needs"),
])
def test_usage_errors(tmp_path, args, words):
    r = ptoc("compile", *args, cwd=tmp_path)
    assert r.returncode == 2
    assert words in r.stderr
    assert list(tmp_path.iterdir()) == []


def test_depfile_single_file(tmp_path):
    src = tmp_path / "my kernel.ir"
    shutil.copy(EXAMPLES[0], src)
    r = ptoc("compile", src, "-o", tmp_path / "o.pto", "--depfile", tmp_path / "o.d")
    assert r.returncode == 0, r.stderr
    esc = str(tmp_path).replace(" ", "\\ ")
    assert (tmp_path / "o.d").read_text() == f"{esc}/o.pto {esc}/o.h: {esc}/my\\ kernel.ir {PIN}\n"


def test_depfile_batch_and_not_written_on_failure(tmp_path):
    shutil.copy(EXAMPLES[0], tmp_path / "a.ir")
    shutil.copy(EXAMPLES[1], tmp_path / "b.ir")
    r = ptoc("compile", "a.ir", "b.ir", "--output-dir", "out", "--no-header", "--depfile", "deps.d", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "deps.d").read_text() == f"out/a.pto: a.ir {PIN}\nout/b.pto: b.ir {PIN}\n"
    (tmp_path / "c.ir").write_text(BROKEN)
    r = ptoc("compile", "c.ir", "-o", "c.pto", "--depfile", "c.d", cwd=tmp_path)
    assert r.returncode == 1
    assert not (tmp_path / "c.d").exists() and not (tmp_path / "c.pto").exists()


def _big_batch(tmp_path, n=24):
    src = tmp_path / "src"
    src.mkdir()
    files = []
    for i in range(n):
        p = src / f"k{i}.ir"
        shutil.copy(EXAMPLES[i % len(EXAMPLES)], p)
        files.append(p)
    return files


def test_no_progress_bar_when_stderr_is_not_a_terminal(tmp_path):
    files = _big_batch(tmp_path)
    r = ptoc("compile", *files, "--output-dir", tmp_path / "out", "-j", "2", "--no-header")
    assert r.returncode == 0
    assert "compiling" not in r.stderr and "\x1b[" not in r.stderr
    assert r.stdout == ""


def test_progress_bar_on_a_terminal(tmp_path):
    files = _big_batch(tmp_path, 160)  # well over a second of work
    pid, fd = pty.fork()
    if pid == 0:  # the child: stdin, stdout and stderr are the pseudo-terminal
        env = {k: v for k, v in os.environ.items() if k not in ("CI", "NO_COLOR")}
        env["TERM"] = "xterm"
        os.execve(str(PTOC), [str(PTOC), "compile", *map(str, files), "--output-dir", str(tmp_path / "out"),
                              "-j", "1", "--no-header"], env)
    data = b""
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 1.0)
        if not ready:
            continue
        try:
            chunk = os.read(fd, 65536)
        except OSError:
            break
        if not chunk:
            break
        data += chunk
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, data[-2000:]
    text = data.decode("utf-8", "replace")
    assert "compiling" in text and "/160" in text  # the bar: description and done/total
    assert len(list((tmp_path / "out").glob("*.pto"))) == 160  # (and a .kernels.json per whole program)


def _fake_ptoas(tmp_path: Path, body: str) -> Path:
    exe = tmp_path / "fake-ptoas"
    exe.write_text(f"#!{sys.executable}\nimport sys\nargs = sys.argv[1:]\n{body}\n")
    exe.chmod(0o755)
    return exe


# A stand-in assembler: its C++ is the module's first line and the module's name, so each .cpp shows
# which .pto it was made from; a module whose temporary copy is named bad.pto fails with a located error.
_ASSEMBLER = """\
src = [a for a in args if a.endswith('.pto')][0]
if src.endswith('bad.pto'):
    sys.stderr.write(src + ":2:1: error: 'pto.alloc_tile' op address out of range\\n")
    sys.exit(1)
first = open(src).readline().strip()
open(args[args.index('-o') + 1], 'w').write('// ' + src.rsplit('/', 1)[-1] + ' ' + first + '\\n')
"""


def test_batch_assemble_writes_each_modules_cpp(tmp_path):
    exe = _fake_ptoas(tmp_path, _ASSEMBLER)
    files = [EXAMPLES[0], LONE_KERNEL]
    out = tmp_path / "out"
    r = ptoc("compile", *files, "--output-dir", out, "-j", "2", "--assemble", "--ptoas", exe, "--no-header")
    assert r.returncode == 0, r.stderr
    got = _tree(out)
    assert sorted(got) == sorted([p.stem + ".cpp" for p in files] + [p.stem + ".pto" for p in files])
    for p in files:
        first = got[p.stem + ".pto"].decode().split("\n", 1)[0]
        assert first.startswith("module attributes")
        assert got[p.stem + ".cpp"].decode() == f"// {p.stem}.pto {first}\n"


def test_batch_assemble_error_is_that_files_error(tmp_path):
    exe = _fake_ptoas(tmp_path, _ASSEMBLER)
    bad = tmp_path / "bad.ir"
    shutil.copy(EXAMPLES[0], bad)
    out = tmp_path / "out"
    r = ptoc("compile", LONE_KERNEL, bad, "--output-dir", out, "-j", "2", "--assemble", "--ptoas", exe,
             "--no-header", "--diagnostics", "gcc")
    assert r.returncode == 1
    assert f"{out / 'bad.pto'}:2:1" in r.stderr and "address out of range" in r.stderr
    # the failing file writes nothing (all or nothing per file); the other is complete
    assert sorted(_tree(out)) == [LONE_KERNEL.stem + ".cpp", LONE_KERNEL.stem + ".pto"]


def test_batch_assemble_without_assembler_is_one_usage_error(tmp_path):
    out = tmp_path / "out"
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "PTOC_PTOAS")}
    env["PATH"] = str(tmp_path)
    r = subprocess.run([str(PTOC), "compile", str(EXAMPLES[0]), str(EXAMPLES[1]), "--output-dir", str(out),
                        "--assemble"], capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 2
    assert r.stderr.count("PTOC-E0453") == 1 and not out.exists()


def test_batch_dump_dir_holds_each_files_dumps(tmp_path):
    files = [EXAMPLES[1], EXAMPLES[4]]
    (tmp_path / "single").mkdir()
    for p in files:  # the single-file dumps of each input: the expected contents
        r = ptoc("compile", p, "-o", tmp_path / "single" / (p.stem + ".pto"), "--dump-dir",
                 tmp_path / "single_dumps" / p.stem)
        assert r.returncode == 0, r.stderr
    for jobs in ("1", "2"):
        r = ptoc("compile", *files, "--output-dir", tmp_path / f"out{jobs}", "--dump-dir",
                 tmp_path / f"dumps{jobs}", "-j", jobs)
        assert r.returncode == 0, r.stderr
        for p in files:
            got = _tree(tmp_path / f"dumps{jobs}" / p.stem)
            assert "00_frontend.ir" in got and len(got) > 5
            assert got == _tree(tmp_path / "single_dumps" / p.stem)


def test_batch_timings_is_a_usage_error(tmp_path):
    r = ptoc("compile", EXAMPLES[0], "--output-dir", tmp_path / "out", "--timings")
    assert r.returncode == 2 and "--timings works on one FILE" in r.stderr
