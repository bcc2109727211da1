"""`ptoc compile -j N FILE`: a program's independent groups of kernels lowered and emitted in several
processes (ptoc/parallel.py) give exactly the serial compile's output.

The expected outputs are the serial compile's (`-j 1`), which the rest of the suite pins (goldens, the
toolchain tests); here both ways run on every example and corpus program that splits and on generated
many-kernel programs, and are compared byte for byte. `PTOC_MIN_SHARD_WORK=0` makes even a small program
split."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ptoc.context import CompileContext
from ptoc.diagnostics import CompileError
from ptoc.driver import compile_program, frontend
from ptoc.ir.verifier import kept_types
from ptoc.parallel import compile_in_shards, plan_shards

ROOT = Path(__file__).resolve().parents[1]
PTOC = Path(sys.executable).with_name("ptoc")
sys.path.insert(0, str(ROOT / "benchmarks"))

fork_only = pytest.mark.skipif(not hasattr(os, "fork"), reason="sharded compiles need os.fork")

# --------------------------------------------------------------------------------------------------
# The plan: contiguous ranges of functions that share no call
# --------------------------------------------------------------------------------------------------

_KERNEL = """\
    @pl.function(type=pl.FunctionType.InCore)
    def {name}(self, x: pl.Tensor[[16, 64], pl.FP32], y: pl.Out[pl.Tensor[[16, 64], pl.FP32]]) -> pl.Tensor[[16, 64], pl.FP32]:
        t: pl.Tile[[16, 64], pl.FP32, pl.Mem.Vec] = pl.tile.load(x, [0, 0], [16, 64], target_memory=pl.Mem.Vec)
        y_1: pl.Tensor[[16, 64], pl.FP32] = pl.tile.store(t, [0, 0], y)
        return y_1
"""

_ORCH = """\
    @pl.function(type=pl.FunctionType.Orchestration)
    def {name}(self, x: pl.Tensor[[16, 64], pl.FP32], y: pl.Out[pl.Tensor[[16, 64], pl.FP32]]) -> pl.Tensor[[16, 64], pl.FP32]:
{calls}        return y
"""


def _program(*parts: str) -> str:
    return "import pypto.language as pl\n\n@pl.program\nclass p:\n" + "".join(parts)


def _orch(name: str, *callees: str) -> str:
    calls = "".join(f"        y: pl.Tensor[[16, 64], pl.FP32] = self.{c}(x, y)\n" for c in callees)
    return _ORCH.format(name=name, calls=calls)


def _plan(text: str, jobs: int, min_work: int = 0):
    ctx = CompileContext()
    prog = frontend(text, "p.ir", ctx)
    return plan_shards(prog, jobs, kept_types(prog, ctx), min_work=min_work)


def test_independent_kernels_split_evenly():
    text = _program(*(_KERNEL.format(name=f"k{i}") for i in range(4)))
    assert _plan(text, 2) == [(0, 2), (2, 4)]
    assert _plan(text, 4) == [(0, 1), (1, 2), (2, 3), (3, 4)]
    assert _plan(text, 8) == [(0, 1), (1, 2), (2, 3), (3, 4)]  # no more shards than functions


def test_no_split_with_one_job_or_too_little_work():
    text = _program(*(_KERNEL.format(name=f"k{i}") for i in range(4)))
    assert _plan(text, 1) == [(0, 4)]
    # each kernel is 2 calls (load, store) + 1 = 3 units of work: 12 in all, less than two shards of 7
    assert _plan(text, 2, min_work=7) == [(0, 4)]
    assert _plan(text, 2, min_work=6) == [(0, 2), (2, 4)]


def test_a_caller_ties_every_function_between_it_and_its_callees():
    # o (index 4) calls k0 and k3: k0..o are one group; nothing can be cut
    text = _program(*(_KERNEL.format(name=f"k{i}") for i in range(4)), _orch("o", "k0", "k3"))
    assert _plan(text, 2) == [(0, 5)]
    # o (index 2) calls k1 only: cuts are allowed before k1 and after o
    text = _program(_KERNEL.format(name="k0"), _KERNEL.format(name="k1"), _orch("o", "k1"),
                    _KERNEL.format(name="k2"), _KERNEL.format(name="k3"))
    assert _plan(text, 8) == [(0, 1), (1, 3), (3, 4), (4, 5)]


def test_a_string_naming_another_function_ties_them():
    text = _program(_KERNEL.format(name="k0"), _KERNEL.format(name="k1"), _KERNEL.format(name="k2"))
    assert _plan(text, 8) == [(0, 1), (1, 2), (2, 3)]
    # the same program with a literal "k2" in k0 (a function attribute): k0..k2 stay together
    attr = _KERNEL.format(name="k0").replace(
        "    @pl.function(type=pl.FunctionType.InCore)\n",
        '    @pl.function(type=pl.FunctionType.InCore, attrs={"peer": "k2"})\n')
    text = _program(attr, _KERNEL.format(name="k1"), _KERNEL.format(name="k2"))
    assert _plan(text, 8) == [(0, 3)]


# --------------------------------------------------------------------------------------------------
# Sharded compiles give the serial output
# --------------------------------------------------------------------------------------------------


def _compile(text: str, name: str, jobs: int):
    """(pto, header, skipped, manifest) or ("error", diagnostics) of `text`."""
    ctx = CompileContext()
    try:
        prog = frontend(text, name, ctx)
        art = compile_program(prog, ctx, os.path.basename(name), jobs=jobs, manifest=True)
    except CompileError as e:
        return ("error", [str(d) for d in e.diagnostics])
    return art.pto, art.header, art.skipped, art.manifest


def _outputs(art):
    return art.pto, art.header, art.skipped, art.manifest


def _splitting_sources() -> list[Path]:
    out = []
    for path in sorted((ROOT / "examples").glob("*.ir")) + sorted((ROOT / "tests" / "corpus" / "raw").glob("*.ir")):
        ctx = CompileContext()
        try:
            prog = frontend(path.read_text(), str(path), ctx)
        except CompileError:
            continue
        if len(plan_shards(prog, 3, kept_types(prog, ctx), min_work=0)) > 1:
            out.append(path)
    return out


SPLITTING = _splitting_sources()


def test_some_bundled_programs_split():
    # (else the comparison below would compare nothing)
    assert len(SPLITTING) >= 3, [p.name for p in SPLITTING]


@fork_only
@pytest.mark.parametrize("path", SPLITTING, ids=lambda p: p.name)
def test_bundled_program_sharded_equals_serial(path, monkeypatch):
    monkeypatch.setenv("PTOC_MIN_SHARD_WORK", "0")
    text = path.read_text()
    assert _compile(text, str(path), 3) == _compile(text, str(path), 1)


def _generated() -> list[tuple[str, str]]:
    import compile_bench
    import parse_bench

    return [("examples_copies", compile_bench.generate(1200)),
            ("kernels_and_orchestrations", parse_bench.generate_program(1200))]


@fork_only
@pytest.mark.parametrize("name,text", _generated(), ids=lambda x: x if len(x) < 40 else "")
def test_generated_program_sharded_equals_serial(name, text, monkeypatch):
    monkeypatch.setenv("PTOC_MIN_SHARD_WORK", "0")
    ctx = CompileContext()
    prog = frontend(text, f"{name}.ir", ctx)
    # it really splits, and the shards really merge (no fallback to the serial compile)
    assert len(plan_shards(prog, 3, kept_types(prog, ctx))) == 3
    art = compile_in_shards(prog, ctx, 3, frozenset(), "level3", True, True, f"{name}.ir")
    assert art is not None and art.lowered is None
    serial = _compile(text, f"{name}.ir", 1)
    assert serial[0].count("func.func") >= 20
    assert _compile(text, f"{name}.ir", 3) == serial


@fork_only
def test_renamed_kernel_namespaces_are_worked_out_over_all_shards(monkeypatch):
    # `k__a` and `k_a` are not usable C++ namespaces (a double underscore is reserved) and both become
    # k_a_kernel...: the second must avoid the first even when they are compiled in different shards
    monkeypatch.setenv("PTOC_MIN_SHARD_WORK", "0")
    text = _program(_KERNEL.format(name="k__a"), _KERNEL.format(name="k_a__"), _KERNEL.format(name="k2"))
    serial = _compile(text, "p.ir", 1)
    spaces = [line.split()[1] for line in serial[1].splitlines() if line.startswith("namespace ")]
    assert spaces == ["k_a_kernel", "k_a_kernel_1", "k2"]
    assert _compile(text, "p.ir", 3) == serial


# --------------------------------------------------------------------------------------------------
# The command line
# --------------------------------------------------------------------------------------------------


def _run(args: list[str], cwd: Path, shard_work: str = "0") -> subprocess.CompletedProcess:
    env = dict(os.environ, PTOC_MIN_SHARD_WORK=shard_work)
    return subprocess.run([str(PTOC), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


@fork_only
def test_cli_jobs_on_one_file_writes_the_serial_outputs(tmp_path):
    import parse_bench

    (tmp_path / "big.ir").write_text(parse_bench.generate_program(600))
    one = _run(["compile", "big.ir", "-o", "one.pto", "-j", "1"], tmp_path)
    two = _run(["compile", "big.ir", "-o", "two.pto", "-j", "2"], tmp_path)
    assert one.returncode == 0 and two.returncode == 0, one.stderr + two.stderr
    assert one.stderr == two.stderr == ""  # a successful compile is quiet
    for suffix in (".pto", ".h", ".kernels.json"):
        a, b = (tmp_path / f"one{suffix}").read_bytes(), (tmp_path / f"two{suffix}").read_bytes()
        assert a == b, suffix
    assert (tmp_path / "one.pto").read_text().count("func.func") >= 10


BIG_AND_SMALL = _program(_KERNEL.format(name="small"), _KERNEL.format(name="big").replace("16, 64", "256, 256"))


@fork_only
def test_cli_error_in_one_shard_reports_what_the_serial_compile_reports(tmp_path):
    # `big` holds a 256 KiB Vec tile (Vec holds 184 KiB): memory planning fails in its shard only
    (tmp_path / "p.ir").write_text(BIG_AND_SMALL)
    (tmp_path / "out.pto").write_text("old")
    one = _run(["compile", "p.ir", "-o", "out.pto", "-j", "1"], tmp_path)
    two = _run(["compile", "p.ir", "-o", "out.pto", "-j", "2"], tmp_path)
    assert one.returncode == two.returncode == 1
    assert "PTOC-E0390" in one.stderr and "p.ir:12:" in one.stderr
    assert two.stderr == one.stderr
    assert (tmp_path / "out.pto").read_text() == "old"  # nothing written on failure
    assert not (tmp_path / "out.h").exists()


def test_cli_jobs_help_explains_one_file():
    out = subprocess.run([str(PTOC), "compile", "--help"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0
    assert "independent groups of kernels" in " ".join(out.stdout.split())


# --------------------------------------------------------------------------------------------------
# What cannot be merged falls back to the serial compile
# --------------------------------------------------------------------------------------------------


@fork_only
def test_a_worker_that_dies_gives_no_result():
    from ptoc.parallel import _collect

    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        os.write(w, b"\x80\x05partial")
        os._exit(3)
    os.close(w)
    assert _collect(pid, r) is None


def _shard_output(*functions: tuple[str, str], dims=()):
    from ptoc.parallel import _ShardOutput

    return _ShardOutput(tuple(functions), dims, 'module attributes {pto.target_arch = "a2a3"} {', (), (), (),
                        False, None)


def test_shards_that_made_the_same_function_name_are_not_joined():
    from ptoc.parallel import _Job, _join

    job = _Job(CompileContext(), frozenset(), "level3", True, False, "p.ir")
    k0, k1 = ("k0", "InCore"), ("k1", "InCore")
    assert _join(job, [_shard_output(k0), _shard_output(k0)]) is None
    assert _join(job, [_shard_output(k0), _shard_output(k1, dims=("M",))]) is None  # other dynamic dims
    assert _join(job, [_shard_output(("o", "Orchestration")), _shard_output(("p", "Opaque"))]) is None  # no kernel
    joined = _join(job, [_shard_output(k0), _shard_output(k1)])
    assert joined is not None and joined.pto == 'module attributes {pto.target_arch = "a2a3"} {\n}\n'


# --------------------------------------------------------------------------------------------------
# Splitting the text: each worker runs the front end on its functions' lines
# --------------------------------------------------------------------------------------------------

from ptoc.parallel import FAILED, compile_text_in_shards, plan_text_shards  # noqa: E402


def test_text_shards_keep_every_line_number():
    text = _program(*(_KERNEL.format(name=f"k{i}") for i in range(4)))
    shards = plan_text_shards(text, 2, min_work=0)
    assert [s.names for s in shards] == [("k0", "k1"), ("k2", "k3")]
    lines = text.split("\n")
    # the kernels' `def` lines, counted by hand: the class is on line 4, each kernel takes 5 lines
    assert [s.def_lines for s in shards] == [(6, 11), (16, 21)]
    for shard in shards:
        got = shard.text.split("\n")
        assert len(got) == len(lines)
        for i, (a, b) in enumerate(zip(lines, got)):
            mine = any(d - 2 <= i < d + 3 for d in shard.def_lines)  # decorator line .. return line
            assert b == (a if mine or i < 4 else ""), (i, a, b)


@fork_only
def test_text_shards_read_brackets_strings_and_comments(monkeypatch):
    monkeypatch.setenv("PTOC_MIN_SHARD_WORK", "0")
    # a call spread over lines, a comment at the members' indentation with an unbalanced bracket and a
    # quote, and a string holding `#` and a bracket: none of them starts or ends a member
    k1 = _KERNEL.format(name="k1").replace(
        "pl.tile.load(x, [0, 0], [16, 64], target_memory=pl.Mem.Vec)",
        "pl.tile.load(\n            x, [0, 0],\n    [16, 64], target_memory=pl.Mem.Vec)")
    comment = "    # a comment ( with ' an open bracket\n"
    k2 = _KERNEL.format(name="k2").replace("    @pl.function(type=pl.FunctionType.InCore)",
                                           '    @pl.function(type=pl.FunctionType.InCore, attrs={"note": "a # ["})')
    text = _program(_KERNEL.format(name="k0"), k1, comment, k2)
    shards = plan_text_shards(text, 3, min_work=0)
    assert [s.names for s in shards] == [("k0",), ("k1",), ("k2",)]
    ctx = CompileContext()
    serial = _compile(text, "p.ir", 1)
    art = compile_text_in_shards(text, "p.ir", ctx, 3, "p.ir", "level3", True, True)
    assert art not in (None, FAILED)
    assert _outputs(art) == serial


@pytest.mark.parametrize("change", [
    ("    def k1(", '    """doc"""\n    def k1('),  # a triple-quoted string
    ("        t: pl.Tile", "\tt: pl.Tile"),  # a tab
    ("    def k1(", "    X = 1\n    def k1("),  # a statement of the class body
])
def test_text_not_split_where_the_layout_is_unusual(change):
    text = _program(*(_KERNEL.format(name=f"k{i}") for i in range(3))).replace(*change, 1)
    assert plan_text_shards(text, 3, min_work=0) is None


def test_text_shards_tie_a_function_named_anywhere_in_another():
    kernels = [_KERNEL.format(name=f"k{i}") for i in range(3)]
    assert [s.names for s in plan_text_shards(_program(*kernels), 3, min_work=0)] == [("k0",), ("k1",), ("k2",)]
    # k0 names k2 in a comment: k0..k2 stay together, and nothing is left to split
    kernels[0] = kernels[0].replace("        return y_1\n", "        # see k2\n        return y_1\n")
    assert plan_text_shards(_program(*kernels), 3, min_work=0) is None


@fork_only
@pytest.mark.parametrize("path", SPLITTING, ids=lambda p: p.name)
def test_bundled_program_text_shards_equal_serial(path, monkeypatch):
    monkeypatch.setenv("PTOC_MIN_SHARD_WORK", "0")
    text = path.read_text()
    serial = _compile(text, str(path), 1)
    ctx = CompileContext()
    art = compile_text_in_shards(text, str(path), ctx, 3, path.name, "level3", True, True)
    if serial[0] == "error":
        assert art is FAILED or art is None
        return
    assert art is not None, "the bundled programs that split as IR split as text too"
    assert art is not FAILED
    assert _outputs(art) == serial


@fork_only
@pytest.mark.parametrize("name,text", _generated(), ids=lambda x: x if len(x) < 40 else "")
def test_generated_program_text_shards_equal_serial(name, text, monkeypatch):
    monkeypatch.setenv("PTOC_MIN_SHARD_WORK", "0")
    assert len(plan_text_shards(text, 3)) == 3
    ctx = CompileContext()
    art = compile_text_in_shards(text, f"{name}.ir", ctx, 3, f"{name}.ir", "level3", True, True)
    assert art not in (None, FAILED)
    serial = _compile(text, f"{name}.ir", 1)
    assert _outputs(art) == serial
    assert serial[3] is not None or name == "examples_copies"  # the orchestrations make a manifest


WARNS = """\
    @pl.function(type=pl.FunctionType.Orchestration)
    def main(self, x: pl.Tensor[[16, 64], pl.FP32], y: pl.Out[pl.Tensor[[16, 64], pl.FP32]]) -> pl.Tensor[[16, 64], pl.FP32]:
        with pl.scope():
            r: pl.Tensor[[16, 64], pl.FP32] = self.k0(x, y)
        return r
"""


@fork_only
def test_cli_warning_in_one_shard_is_reported_as_the_serial_compile_reports_it(tmp_path):
    # `main` places an automatic scope by hand (warning PTOC-E0810) and calls k0; k1 and k2 are apart
    text = _program(*(_KERNEL.format(name=f"k{i}") for i in (1, 2, 0)), WARNS)
    (tmp_path / "p.ir").write_text(text)
    assert [s.names for s in plan_text_shards(text, 3, min_work=0)] == [("k1",), ("k2",), ("k0", "main")]
    one = _run(["compile", "p.ir", "-o", "one.pto", "-j", "1"], tmp_path)
    three = _run(["compile", "p.ir", "-o", "three.pto", "-j", "3"], tmp_path)
    assert one.returncode == three.returncode == 0
    assert "warning[PTOC-E0810]" in one.stderr
    assert three.stderr == one.stderr
    for suffix in (".pto", ".h", ".kernels.json"):
        assert (tmp_path / f"one{suffix}").read_bytes() == (tmp_path / f"three{suffix}").read_bytes()


@fork_only
def test_cli_check_jobs_reports_what_check_reports(tmp_path):
    import parse_bench

    (tmp_path / "good.ir").write_text(parse_bench.generate_program(400))
    (tmp_path / "bad.ir").write_text(BIG_AND_SMALL)
    one = _run(["check", "good.ir", "bad.ir", "-j", "1"], tmp_path)
    two = _run(["check", "good.ir", "bad.ir", "-j", "2"], tmp_path)
    assert one.returncode == two.returncode == 1
    assert "bad.ir:12:" in one.stderr and "good.ir" not in one.stderr
    assert two.stderr == one.stderr
    ok = _run(["check", "good.ir", "-j", "2"], tmp_path)
    assert ok.returncode == 0 and "ok: 1 file checked" in ok.stderr


_TRICKY_COMMENTS = ["# (", "# ')", '# "[', "# def k9(self):", "# @pl.function", "#", "# }}"]


@fork_only
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_text_split_holds_with_comments_and_broken_lines_anywhere(data, monkeypatch):
    """Comments (with brackets, quotes, `def`) at any indentation between any two lines, and calls broken
    over lines with any indentation, neither stop the text from splitting nor make the split wrong."""
    monkeypatch.setenv("PTOC_MIN_SHARD_WORK", "0")
    lines = _program(*(_KERNEL.format(name=f"k{i}") for i in range(3))).split("\n")
    for _ in range(data.draw(st.integers(0, 3), label="breaks")):
        i = data.draw(st.sampled_from([k for k, ln in enumerate(lines) if "pl.tile.load(x, " in ln]), label="line")
        indent = " " * data.draw(st.sampled_from([0, 2, 4, 12]), label="indent")
        lines[i] = lines[i].replace("pl.tile.load(x, ", "pl.tile.load(\n" + indent + "x, ", 1)
        lines = "\n".join(lines).split("\n")
    for _ in range(data.draw(st.integers(1, 5), label="comments")):
        at = data.draw(st.integers(4, len(lines) - 1), label="at")
        indent = " " * data.draw(st.sampled_from([0, 4, 8]), label="indent")
        lines.insert(at, indent + data.draw(st.sampled_from(_TRICKY_COMMENTS), label="comment"))
    text = "\n".join(lines)
    serial = _compile(text, "p.ir", 1)
    art = compile_text_in_shards(text, "p.ir", CompileContext(), 3, "p.ir", "level3", True, True)
    assert art is not None and art is not FAILED
    assert _outputs(art) == serial
