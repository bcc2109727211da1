"""No input can make ptoc destroy a file, crash, or report a user's mistake as its own bug.

Real subprocesses of the installed `ptoc` script, real files, FIFOs, symlinks, hard links and devices in
temp folders. Expected bytes come from an ordinary compile into a regular file (a different code path from
the one under test: stdout, a FIFO, a symlink) or from numpy.
"""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
PTOC = Path(sys.executable).with_name("ptoc")
TRACEBACK = "Traceback (most recent call last)"
VADD = ROOT / "examples" / "vector_add.ir"
DYN = ROOT / "examples" / "dynamic_rows.ir"
INT8 = ROOT / "examples" / "nz_weight_int8.ir"
BF16 = ROOT / "examples" / "matmul_bf16.ir"

# x + acc into the InOut acc; x also stored into rows 0..15 of the 32-row Out `half` (rows 16..31 are never
# written, so they keep the Out parameter's initial contents).
ACCUMULATE = """\
import pypto.language as pl

@pl.program
class accumulate:
    @pl.function(type=pl.FunctionType.InCore)
    def acc_kernel(self, x: pl.Tensor[[16, 64], pl.FP32], acc: pl.InOut[pl.Tensor[[16, 64], pl.FP32]], half: pl.Out[pl.Tensor[[32, 64], pl.FP32]]) -> pl.Tensor[[16, 64], pl.FP32]:
        tx: pl.Tile[[16, 64], pl.FP32, pl.Mem.Vec] = pl.tile.load(x, [0, 0], [16, 64], target_memory=pl.Mem.Vec)
        ta: pl.Tile[[16, 64], pl.FP32, pl.Mem.Vec] = pl.tile.load(acc, [0, 0], [16, 64], target_memory=pl.Mem.Vec)
        ts: pl.Tile[[16, 64], pl.FP32, pl.Mem.Vec] = pl.tile.add(tx, ta)
        h: pl.Tensor[[32, 64], pl.FP32] = pl.tile.store(tx, [0, 0], half)
        acc_1: pl.Tensor[[16, 64], pl.FP32] = pl.tile.store(ts, [0, 0], acc)
        return acc_1
"""


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR", "PTOC_TRACEBACK")}
    env.update(extra)
    return env


def run(*args, cwd=None, stdin=None, env=None, timeout=120) -> subprocess.CompletedProcess:
    p = subprocess.run([str(PTOC), *map(str, args)], capture_output=True, cwd=cwd, input=stdin, env=env or _env(),
                       timeout=timeout)
    out, err = p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")
    assert TRACEBACK not in err and TRACEBACK not in out, err
    assert p.returncode != 3, err
    return subprocess.CompletedProcess(p.args, p.returncode, p.stdout, err)


def listing(d: Path) -> list[str]:
    return sorted(x.name for x in d.iterdir())


@pytest.fixture(scope="module")
def vadd_outputs(tmp_path_factory) -> tuple[bytes, bytes]:
    """The .pto and header of examples/vector_add.ir as k.ir, compiled into regular files."""
    d = tmp_path_factory.mktemp("ref")
    src = d / "k.ir"  # the source's name is in the header
    src.write_bytes(VADD.read_bytes())
    r = run("compile", src, "-o", d / "ref.pto")
    assert r.returncode == 0, r.stderr
    return (d / "ref.pto").read_bytes(), (d / "ref.h").read_bytes()


@pytest.fixture
def src(tmp_path) -> Path:
    f = tmp_path / "k.ir"
    f.write_bytes(VADD.read_bytes())
    return f


class FifoReader(threading.Thread):
    """Reads a FIFO to its end (as `cat fifo` would) in the background."""

    def __init__(self, path: Path):
        super().__init__(daemon=True)
        self.path, self.data = path, None

    def run(self):
        with open(self.path, "rb") as fh:
            self.data = fh.read()


# ------------------------------------------------------------------ an output is never an input


def test_compile_refuses_to_write_the_pto_over_its_input(src, tmp_path):
    before = src.read_bytes()
    r = run("compile", src, "-o", src)
    assert r.returncode == 2
    assert "PTOC-E0007" in r.stderr and f"refusing to write {src}: it is the input file" in r.stderr
    assert src.read_bytes() == before
    assert listing(tmp_path) == ["k.ir"]  # no header, no temp file


@pytest.mark.parametrize("case", ["header_is_input", "header_is_output"])
def test_compile_refuses_a_header_that_is_the_input_or_the_pto(src, tmp_path, case):
    before = src.read_bytes()
    header = src if case == "header_is_input" else tmp_path / "k.pto"
    r = run("compile", src, "-o", tmp_path / "k.pto", "--header", header)
    assert r.returncode == 2 and "PTOC-E0007" in r.stderr
    assert src.read_bytes() == before
    assert listing(tmp_path) == ["k.ir"]


@pytest.mark.parametrize("kind", ["symlink", "hardlink"])
def test_compile_refuses_an_output_that_is_the_input_under_another_name(src, tmp_path, kind):
    other = tmp_path / "other.pto"
    (os.symlink if kind == "symlink" else os.link)(src, other)
    before = src.read_bytes()
    r = run("compile", src, "-o", other, "--no-header")
    assert r.returncode == 2 and "PTOC-E0007" in r.stderr and "the same file by another name" in r.stderr
    assert src.read_bytes() == before
    assert os.path.islink(other) == (kind == "symlink")


def test_dump_dir_that_holds_the_input_is_refused(tmp_path):
    dumps = tmp_path / "dumps"
    dumps.mkdir()
    src = dumps / "00_frontend.ir"  # the name of the first dump file
    src.write_bytes(VADD.read_bytes())
    before = src.read_bytes()
    for args in (["compile", src, "-o", tmp_path / "k.pto", "--dump-dir", dumps],
                 ["passes", src, "--dump-after", "all", "--dump-dir", dumps]):
        r = run(*args)
        assert r.returncode == 2 and "PTOC-E0007" in r.stderr, r.stderr
        assert src.read_bytes() == before
        assert listing(dumps) == ["00_frontend.ir"]
    assert listing(tmp_path) == ["dumps"]


def test_pack_and_unpack_refuse_to_overwrite_their_input(tmp_path):
    a = tmp_path / "a.npy"
    np.save(a, np.arange(16 * 32, dtype=np.int8).reshape(16, 32))
    before = a.read_bytes()
    r = run("pack", a, "--layout", "NZ", "--dtype", "int8", "-o", a)
    assert r.returncode == 2 and "is the input file" in r.stderr
    r = run("unpack", a, "--layout", "ND", "--dtype", "int8", "--shape", "16,32", "-o", a)
    assert r.returncode == 2 and "is the input file" in r.stderr
    assert a.read_bytes() == before and listing(tmp_path) == ["a.npy"]


# ------------------------------------------------------------------ symlinks, FIFOs, devices, stdout


def test_output_through_a_symlink_replaces_the_target_and_keeps_the_link(src, tmp_path, vadd_outputs):
    (tmp_path / "real").mkdir()
    target = tmp_path / "real" / "k.pto"
    target.write_text("old")
    os.chmod(target, 0o640)
    link = tmp_path / "k.pto"
    link.symlink_to(target)
    r = run("compile", src, "-o", link)
    assert r.returncode == 0, r.stderr
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert target.read_bytes() == vadd_outputs[0]
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    assert (tmp_path / "k.h").read_bytes() == vadd_outputs[1]
    assert listing(tmp_path / "real") == ["k.pto"]


def test_fmt_in_place_follows_a_symlink(tmp_path):
    target = tmp_path / "k.ir"
    target.write_text("import pypto.language as pl\n@pl.function\ndef f(x: pl.Scalar[pl.INDEX]) -> pl.Scalar[pl.INDEX]:\n"
                      "    return x\n")
    link = tmp_path / "link.ir"
    link.symlink_to(target)
    expected = run("fmt", target).stdout
    assert expected and expected != target.read_bytes()
    r = run("fmt", "-i", link)
    assert r.returncode == 0, r.stderr
    assert link.is_symlink() and target.read_bytes() == expected
    assert listing(tmp_path) == ["k.ir", "link.ir"]


def test_output_to_a_fifo_is_written_through(src, tmp_path, vadd_outputs):
    fifo = tmp_path / "out.pto"
    os.mkfifo(fifo)
    reader = FifoReader(fifo)
    reader.start()
    r = run("compile", src, "-o", fifo, "--header", tmp_path / "k.h")
    reader.join(30)
    assert r.returncode == 0, r.stderr
    assert reader.data == vadd_outputs[0]
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)  # still a FIFO, not replaced by a regular file
    assert (tmp_path / "k.h").read_bytes() == vadd_outputs[1]
    assert listing(tmp_path) == ["k.h", "k.ir", "out.pto"]


@pytest.fixture
def null_device(tmp_path) -> Path:
    """A character device like /dev/null. As root, a private node of the same device (1, 3) in tmp_path, so
    that a regression replaces that node and not the machine's /dev/null; otherwise /dev/null itself
    (which a user without root cannot replace anyway)."""
    if os.geteuid() != 0:
        return Path("/dev/null")
    node = tmp_path / "null"
    os.mknod(node, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    return node


def test_output_to_dev_null_keeps_the_device(src, tmp_path, null_device):
    before = os.stat(null_device)
    assert stat.S_ISCHR(before.st_mode)
    r = run("compile", src, "-o", null_device, "--no-header")
    assert r.returncode == 0, r.stderr
    r = run("compile", src, "-o", tmp_path / "k.pto", "--header", null_device)
    assert r.returncode == 0, r.stderr
    after = os.stat(null_device)
    assert stat.S_ISCHR(after.st_mode) and after.st_rdev == before.st_rdev and after.st_ino == before.st_ino
    assert not os.path.exists(f"{null_device}.h")
    assert os.path.getsize(tmp_path / "k.pto") > 0


@pytest.mark.parametrize("target", ["-", "device", "fifo"])
def test_header_needs_an_explicit_path_when_the_pto_goes_to_a_stream(src, tmp_path, target, null_device):
    if target == "fifo":
        target = tmp_path / "out.pto"
        os.mkfifo(target)
    elif target == "device":
        target = null_device
    r = run("compile", src, "-o", target, cwd=tmp_path)
    assert r.returncode == 2 and "--header PATH or --no-header" in r.stderr
    assert not os.path.exists(f"{null_device}.h") and not os.path.exists(tmp_path / "out.h")
    assert stat.S_ISCHR(os.stat(null_device).st_mode)


def test_dash_output_writes_the_pto_to_stdout(src, tmp_path, vadd_outputs):
    r = run("compile", src, "-o", "-", "--header", tmp_path / "k.h", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout == vadd_outputs[0]
    assert (tmp_path / "k.h").read_bytes() == vadd_outputs[1]
    assert listing(tmp_path) == ["k.h", "k.ir"]  # no file named "-"
    r = run("compile", src, "-o", "-", "--header", "-", cwd=tmp_path)
    assert r.returncode == 2 and "PTOC-E0007" in r.stderr and r.stdout == b""
    # standard output redirected into the input file (`>> k.ir`) is the input too
    before = src.read_bytes()
    with open(src, "ab") as out:
        p = subprocess.run([str(PTOC), "compile", str(src), "-o", "-", "--no-header"], stdout=out,
                           stderr=subprocess.PIPE, text=True, env=_env(), timeout=120)
    assert p.returncode == 2 and "it is the input file" in p.stderr
    assert src.read_bytes() == before
    r = run("compile", src, "-o", "-", "--no-header", "--assemble", cwd=tmp_path)
    assert r.returncode == 2 and "--assemble needs the .pto in a file" in r.stderr


def test_dash_input_is_stdin_for_check_fmt_and_compile(tmp_path, vadd_outputs):
    text = VADD.read_bytes()
    assert run("check", "-", stdin=text).returncode == 0
    r = run("fmt", "-", stdin=text)
    assert r.returncode == 0 and r.stdout == text  # the example is in canonical form
    r = run("compile", "-", "-o", tmp_path / "k.pto", stdin=text)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "k.pto").read_bytes() == vadd_outputs[0]
    assert b"<stdin>" in (tmp_path / "k.h").read_bytes()
    bad = text.replace(b"pl.tile.add(ta, tb)", b"pl.tile.add(ta, tq)")
    for args in (["check", "-"], ["compile", "-", "-o", tmp_path / "bad.pto"]):
        r = run(*args, stdin=bad)
        assert r.returncode == 1 and "<stdin>:10:" in r.stderr and "PTOC-E0101" in r.stderr, r.stderr
    r = run("fmt", "-", stdin=bad)  # a formatter formats what parses; the note names standard input
    assert r.returncode == 0 and b"tq" in r.stdout and "<stdin> has 1 error" in r.stderr, r.stderr
    r = run("fmt", "-", stdin=text.replace(b"return y", b"return y)"))
    assert r.returncode == 1 and "<stdin>:" in r.stderr and "PTOC-E0001" in r.stderr, r.stderr
    assert run("fmt", "-i", "-", stdin=text).returncode == 2
    assert run("check", "-", "-", stdin=text).returncode == 2  # standard input can be read once
    assert not (tmp_path / "bad.pto").exists() and not (tmp_path / "-").exists()


def test_pack_writes_through_a_fifo_and_a_symlink(tmp_path):
    w = np.arange(32 * 64, dtype=np.int64).reshape(32, 64).astype(np.int8)
    np.save(tmp_path / "w.npy", w)
    # the NZ image of [32, 64] int8 (c0 = 32, NZ-2): blocked [1, 2, 2, 16, 32]; element (r, c) sits at byte
    # (c // 32) * 1024 + (r // 16) * 512 + (r % 16) * 32 + c % 32
    want = np.ascontiguousarray(w.reshape(2, 16, 2, 32).transpose(2, 0, 1, 3)).tobytes()
    assert want[(45 // 32) * 1024 + (20 // 16) * 512 + (20 % 16) * 32 + 45 % 32] == w[20, 45].view(np.uint8)
    fifo = tmp_path / "w_nz.bin"
    os.mkfifo(fifo)
    reader = FifoReader(fifo)
    reader.start()
    r = run("pack", tmp_path / "w.npy", "--layout", "NZ", "--dtype", "int8", "-o", fifo)
    reader.join(30)
    assert r.returncode == 0, r.stderr
    assert reader.data == want and stat.S_ISFIFO(os.stat(fifo).st_mode)
    (tmp_path / "store").mkdir()
    link = tmp_path / "link.bin"
    link.symlink_to(tmp_path / "store" / "w.bin")  # dangling until written
    r = run("pack", tmp_path / "w.npy", "--layout", "NZ", "--dtype", "int8", "-o", link)
    assert r.returncode == 0, r.stderr
    assert link.is_symlink() and (tmp_path / "store" / "w.bin").read_bytes() == want


# ------------------------------------------------------------------ all outputs or none


@pytest.mark.parametrize("bad", ["file", "under_a_file"])
def test_failed_dump_dir_leaves_no_pto_and_no_header(src, tmp_path, bad):
    (tmp_path / "f").write_text("a file")
    dump = tmp_path / "f" if bad == "file" else tmp_path / "f" / "dumps"
    r = run("compile", src, "-o", tmp_path / "k.pto", "--dump-dir", dump)
    assert r.returncode == 2, r.stderr
    assert listing(tmp_path) == ["f", "k.ir"]
    # existing outputs stay as they were
    (tmp_path / "k.pto").write_text("old pto")
    (tmp_path / "k.h").write_text("old h")
    r = run("compile", src, "-o", tmp_path / "k.pto", "--dump-dir", dump)
    assert r.returncode == 2
    assert (tmp_path / "k.pto").read_text() == "old pto" and (tmp_path / "k.h").read_text() == "old h"
    assert listing(tmp_path) == ["f", "k.h", "k.ir", "k.pto"]


def test_unwritable_header_leaves_the_existing_pto_and_creates_no_dump_dir(src, tmp_path):
    (tmp_path / "k.pto").write_text("old pto")
    r = run("compile", src, "-o", tmp_path / "k.pto", "--header", tmp_path / "missing" / "k.h",
            "--dump-dir", tmp_path / "dumps" / "run1")
    assert r.returncode == 2 and "PTOC-E0006" in r.stderr
    assert (tmp_path / "k.pto").read_text() == "old pto"
    assert listing(tmp_path) == ["k.ir", "k.pto"]  # the dump folders made for the commit are gone again


def test_a_failed_rename_restores_the_outputs_already_replaced(tmp_path):
    # the commit itself: the second rename fails, the first target gets its old bytes back, a new file goes
    code = f"""
import os, sys
sys.path.insert(0, {str(ROOT)!r})
from ptoc import outputs
real_replace, calls = os.replace, []
def replace(a, b):
    calls.append(b)
    if len(calls) == 3:
        raise OSError(28, "No space left on device", b)
    real_replace(a, b)
outputs.os.replace = replace
s = outputs.OutputSet()
for name in ("a", "b", "c"):
    s.add(os.path.join(sys.argv[1], name), "new " + name)
try:
    s.commit()
except outputs.OutputError as e:
    print(e)
"""
    (tmp_path / "a").write_text("old a")
    (tmp_path / "c").write_text("old c")
    p = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == f"cannot write {tmp_path / 'c'}: No space left on device"
    assert (tmp_path / "a").read_text() == "old a" and (tmp_path / "c").read_text() == "old c"
    assert listing(tmp_path) == ["a", "c"]  # b (new) removed again; no temp or backup file left


# ------------------------------------------------------------------ ptoc run


@pytest.fixture
def acc_dir(tmp_path) -> Path:
    (tmp_path / "acc.ir").write_text(ACCUMULATE)
    np.save(tmp_path / "x.npy", np.full((16, 64), 1.0, dtype=np.float32))
    np.save(tmp_path / "acc.npy", np.full((16, 64), 1.0, dtype=np.float32))
    return tmp_path


def test_run_never_writes_over_an_inout_input(acc_dir):
    before = (acc_dir / "acc.npy").read_bytes()
    for _ in range(2):  # the default --output-dir . holds acc.npy, the InOut input
        r = run("run", "acc.ir", "--input", "x=x.npy", "--input", "acc=acc.npy", cwd=acc_dir)
        assert r.returncode == 2 and "PTOC-E0007" in r.stderr
        assert "acc.npy" in r.stderr and "--output-dir" in r.stderr
        assert (acc_dir / "acc.npy").read_bytes() == before
    assert listing(acc_dir) == ["acc.ir", "acc.npy", "x.npy"]  # no other output written either
    r = run("run", "acc.ir", "--input", "x=x.npy", "--input", "acc=acc.npy", "--output-dir", "out", cwd=acc_dir)
    assert r.returncode == 0, r.stderr
    assert np.array_equal(np.load(acc_dir / "out" / "acc.npy"), np.full((16, 64), 2.0, dtype=np.float32))


def test_run_missing_input_names_the_parameter_and_out_starts_as_zeros(acc_dir):
    r = run("run", "acc.ir", "--input", "x=x.npy", "--output-dir", "out", cwd=acc_dir)
    assert r.returncode == 1
    assert "InOut tensor parameter 'acc' has no input" in r.stderr and "--input acc=FILE.npy" in r.stderr
    assert not (acc_dir / "out").exists()
    # the Out parameter `half` has no input: its rows 16..31, never written, are zeros
    r = run("run", "acc.ir", "--input", "x=x.npy", "--input", "acc=acc.npy", "--output-dir", "out", cwd=acc_dir)
    assert r.returncode == 0, r.stderr
    half = np.load(acc_dir / "out" / "half.npy")
    assert np.array_equal(half[:16], np.ones((16, 64), np.float32))
    assert np.array_equal(half[16:], np.zeros((16, 64), np.float32))
    assert "start as zeros" in " ".join(run("run", "--help").stdout.decode().split())


def test_run_refuses_a_lossy_conversion_as_pack_does(tmp_path):
    rng = np.random.default_rng(1)
    w = rng.integers(-8, 8, size=(256, 512)).astype(np.int8)
    np.save(tmp_path / "w.npy", w)
    np.save(tmp_path / "x_frac.npy", np.full((64, 256), 0.5, dtype=np.float32))
    x = rng.integers(-8, 8, size=(64, 256))
    np.save(tmp_path / "x_whole.npy", x.astype(np.float32))  # float32 holding whole numbers: exact in INT8
    r = run("run", INT8, "--input", "x=x_frac.npy", "--input", "w=w.npy", "--output-dir", "o", cwd=tmp_path)
    assert r.returncode == 1 and "--input x:" in r.stderr and "converting would change values" in r.stderr
    p = run("pack", tmp_path / "x_frac.npy", "--layout", "ND", "--dtype", "int8", "-o", tmp_path / "x.bin")
    assert p.returncode == 1 and "converting would change values" in p.stderr
    assert not (tmp_path / "o").exists()
    r = run("run", INT8, "--input", "x=x_whole.npy", "--input", "w=w.npy", "--output-dir", "o", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert np.array_equal(np.load(tmp_path / "o" / "out.npy"), x.astype(np.int32) @ w.astype(np.int32))


def test_run_takes_an_ml_dtypes_bf16_npy_for_a_bf16_parameter(tmp_path):
    import ml_dtypes

    rng = np.random.default_rng(2)
    a = rng.standard_normal((64, 256)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((256, 128)).astype(ml_dtypes.bfloat16)
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "b.npy", b)
    assert np.load(tmp_path / "a.npy").dtype == np.dtype("V2")  # how numpy stores ml_dtypes arrays
    r = run("run", BF16, "--input", "a=a.npy", "--input", "b=b.npy", "--output-dir", "o", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    want = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(np.load(tmp_path / "o" / "c.npy"), want, rtol=1e-4, atol=1e-4)
    # the same raw records for an FP32 parameter: refused with the reason
    np.save(tmp_path / "a32.npy", np.zeros((64, 64), dtype=ml_dtypes.bfloat16))
    r = run("run", VADD, "--function", "add_kernel", "--input", "a=a32.npy", "--input", "b=a32.npy",
            "--output-dir", "o2", cwd=tmp_path)
    assert r.returncode == 1 and "raw 2-byte records but FP32 elements take 4 bytes" in r.stderr


def test_run_empty_and_string_npy_are_clear_errors(tmp_path):
    np.save(tmp_path / "b.npy", np.ones((64, 64), dtype=np.float32))
    np.save(tmp_path / "empty.npy", np.zeros((0,), dtype=np.float32))
    np.save(tmp_path / "text.npy", np.array(["ab", "cd"]))
    r = run("run", VADD, "--function", "add_kernel", "--input", "a=empty.npy", "--input", "b=b.npy", cwd=tmp_path)
    assert r.returncode == 1 and "input 'a' has shape [0]" in r.stderr
    r = run("run", VADD, "--function", "add_kernel", "--input", "a=text.npy", "--input", "b=b.npy", cwd=tmp_path)
    assert r.returncode == 1 and "--input a: the array holds <U2 values, not numbers" in r.stderr
    assert listing(tmp_path) == ["b.npy", "empty.npy", "text.npy"]


def test_run_non_utf8_pto_file_is_e0004(tmp_path):
    np.save(tmp_path / "a.npy", np.ones((64, 64), dtype=np.float32))
    (tmp_path / "k.pto").write_bytes(b"module {\n  \xff\xfe\n}\n")
    r = run("run", VADD, "--function", "add_kernel", "--input", "a=a.npy", "--input", "b=a.npy", "--pto", "k.pto",
            "--output-dir", "o", cwd=tmp_path)
    assert r.returncode == 1 and "k.pto:2:3: error[PTOC-E0004]: the .pto file is not valid UTF-8" in r.stderr


# ------------------------------------------------------------------ exit codes


def test_broken_pipe_exits_141_without_a_traceback():
    p = subprocess.Popen([str(PTOC), "ops"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env())
    p.stdout.close()  # the reader is gone before ptoc writes its first line (`ptoc ops | head -0`)
    err = p.stderr.read().decode()
    assert p.wait(60) == 141
    assert err == ""


@pytest.mark.parametrize("command", ["passes", "run"])
def test_unusable_output_folders_exit_2(tmp_path, command):
    (tmp_path / "f").write_text("a file")
    np.save(tmp_path / "a.npy", np.ones((64, 64), dtype=np.float32))
    args = (["passes", VADD, "--dump-after", "all", "--dump-dir"] if command == "passes" else
            ["run", VADD, "--function", "add_kernel", "--input", "a=a.npy", "--input", "b=a.npy", "--output-dir"])
    for where, says in (("f", "is a file"), ("f/sub", "is not a directory"),
                        ("/proc/ptoc-cannot-create", "cannot create /proc/ptoc-cannot-create")):
        r = run(*args, where, cwd=tmp_path)
        assert r.returncode == 2 and says in r.stderr, (where, r.stderr)
    assert listing(tmp_path) == ["a.npy", "f"]


@pytest.mark.parametrize("args, says", [
    (["--dim", "M=-5"], "-5 is negative"),
    (["--dim", "M=x"], "'x' is not an integer"),
    (["--dim", "M=100000000"], "use smaller --dim values"),
    (["--dim", "M=64", "--seed", "-1"], "--seed"),
    (["--dim", "MM=64"], "unknown dynamic dimension 'MM'; did you mean 'M'?"),
    (["--dim", "M=64", "--scalar", "alpah=2"], "unknown scalar parameter 'alpah'; did you mean 'alpha'?"),
    (["--dim", "M=64", "--scalar", "zzz=2"], "the scalar parameters are: alpha"),
])
def test_bad_validate_values_are_usage_errors(args, says):
    r = run("passes", DYN, "--validate", *args)
    assert r.returncode == 2 and says in r.stderr, r.stderr


def test_run_unknown_names_have_a_did_you_mean(tmp_path):
    np.save(tmp_path / "x.npy", np.ones((64, 64), dtype=np.float16))
    r = run("run", DYN, "--input", "xx=x.npy", cwd=tmp_path)
    assert r.returncode == 2 and "unknown parameter 'xx'; did you mean 'x'?" in r.stderr
    r = run("run", DYN, "--input", "x=x.npy", "--input", "alpha=2", "--dim", "N=64", cwd=tmp_path)
    assert r.returncode == 2 and "unknown dynamic dimension 'N'" in r.stderr


def test_ops_without_a_match_exits_1():
    r = run("ops", "NOMATCH")
    assert r.returncode == 1 and "no operator matches 'NOMATCH'" in r.stderr and r.stdout == b""
    assert run("ops", "tile.add").returncode == 0


def _interrupt(args, cwd, when) -> tuple[int, str]:
    p = subprocess.Popen([str(PTOC), *map(str, args)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                         cwd=cwd, env=_env())
    try:
        when(p)
        p.send_signal(signal.SIGINT)
        err = p.stderr.read().decode()
        return p.wait(60), err
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def test_ctrl_c_exits_130_with_one_line_at_any_moment(tmp_path):
    # 1. early: ptoc has just opened its input, a FIFO nobody has written to yet
    fifo = tmp_path / "in.ir"
    os.mkfifo(fifo)
    p = subprocess.Popen([str(PTOC), "compile", str(fifo), "-o", str(tmp_path / "a.pto")], stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, cwd=tmp_path, env=_env())
    fd = os.open(fifo, os.O_WRONLY)  # returns once ptoc has opened the FIFO for reading
    try:
        p.send_signal(signal.SIGINT)
        err = p.stderr.read().decode()
    finally:
        os.close(fd)
    assert (p.wait(60), err) == (130, "ptoc: interrupted\n")
    # 2. in the middle of a long computation
    rc, err = _interrupt(["passes", DYN, "--validate", "--dim", "M=100000"], tmp_path, lambda p: time.sleep(2.5))
    assert (rc, err) == (130, "ptoc: interrupted\n")
    # 3. while the outputs are committed: the header is staged, the .pto waits for a FIFO reader
    out = tmp_path / "out.pto"
    os.mkfifo(out)

    def staging(p):
        deadline = time.monotonic() + 60
        while not any(n.startswith(".ptoc-") for n in os.listdir(tmp_path)) and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.3)

    src = tmp_path / "k.ir"
    src.write_bytes(VADD.read_bytes())
    rc, err = _interrupt(["compile", src, "-o", out, "--header", tmp_path / "k.h"], tmp_path, staging)
    assert rc == 130
    assert [line for line in err.splitlines() if "PTOC-I0100" not in line] == ["ptoc: interrupted"]
    assert listing(tmp_path) == ["in.ir", "k.ir", "out.pto"]  # no header, no temp file


# ------------------------------------------------------------------ without numpy


def test_reference_commands_without_numpy_say_how_to_install_it(tmp_path):
    shim = tmp_path / "shim"
    shim.mkdir()
    # `pip install .` without the reference extra: numpy and ml_dtypes cannot be imported
    (shim / "sitecustomize.py").write_text('import sys\nsys.modules["numpy"] = None\nsys.modules["ml_dtypes"] = None\n')
    env = _env(PYTHONPATH=str(shim))
    np.save(tmp_path / "a.npy", np.ones((64, 64), dtype=np.float32))
    line = "install them with: pip install 'ptoc[reference]'"
    for args in (["passes", VADD, "--validate"],
                 ["run", VADD, "--function", "add_kernel", "--input", "a=a.npy", "--input", "b=a.npy"],
                 ["pack", "a.npy", "--layout", "NZ", "--dtype", "fp32", "-o", "a.bin"],
                 ["unpack", "a.npy", "--layout", "ND", "--dtype", "fp32", "--shape", "64,64", "-o", "b.npy"]):
        r = run(*args, cwd=tmp_path, env=env)
        assert r.returncode == 2, (args, r.stderr)
        assert r.stderr.count("\n") == 1 and line in r.stderr and "numpy" in r.stderr
    # the compiler itself needs no numpy
    r = run("compile", VADD, "-o", tmp_path / "k.pto", env=env)
    assert r.returncode == 0, r.stderr
    assert listing(tmp_path) == ["a.npy", "k.h", "k.kernels.json", "k.pto", "shim"]
