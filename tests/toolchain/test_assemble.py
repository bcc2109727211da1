"""`ptoc compile --assemble`: PTOAS's flags, its two error forms, the version policy for NZ views, and the
.cpp as an all-or-nothing output. Fake assemblers (small Python scripts) pin the protocol; the tests at
the end run the real PTOAS and skip when $PTOC_PTOAS is unset."""

import json
import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from ptoc.diagnostics import CODES
from ptoc.target import assembler as asm

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
GOLDEN = ROOT / "tests" / "golden"
PTOC = Path(sys.executable).with_name("ptoc")
VADD = EXAMPLES / "vector_add.ir"
NZ = EXAMPLES / "nz_weight_int8.ir"


def run(*args, cwd=None, env=None, timeout=300):
    e = dict(os.environ)
    e.pop("PTOC_PTOAS", None)
    e.update(env or {})
    return subprocess.run([str(PTOC), *map(str, args)], capture_output=True, text=True, cwd=cwd, env=e,
                          timeout=timeout, check=False)


def fake_ptoas(folder: Path, name="fake-ptoas", version="ptoas 0.27", stderr="", rc=0, cpp="// cpp from fake\n"):
    """An executable that answers --version, logs its other argument lists and writes -o like PTOAS."""
    folder.mkdir(parents=True, exist_ok=True)
    exe = folder / name
    log = folder / f"{name}.log"
    exe.write_text(
        f"#!{sys.executable}\nimport json, sys\nargs = sys.argv[1:]\n"
        f"if args == ['--version']:\n    print({version!r})\n    sys.exit(0)\n"
        f"open({str(log)!r}, 'a').write(json.dumps(args) + '\\n')\n"
        f"sys.stderr.write({stderr!r})\n"
        f"if {rc} == 0:\n    open(args[args.index('-o') + 1], 'w').write({cpp!r})\n"
        f"sys.exit({rc})\n")
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    return exe


def calls(exe: Path) -> list[list[str]]:
    log = exe.with_name(exe.name + ".log")
    return [json.loads(x) for x in log.read_text().splitlines()] if log.exists() else []


# ---------------------------------------------------------------------------------------------- flags

def test_ptoc_targets_map_to_ptoas_arch_names():
    assert asm.ptoas_arch("a2a3") == "a3"
    assert asm.ptoas_arch("a5") == "a5"
    with pytest.raises(ValueError):
        asm.ptoas_arch("a3")


def test_default_assemble_passes_a3_level3_and_insert_sync(tmp_path):
    exe = fake_ptoas(tmp_path / "bin")
    r = run("compile", VADD, "-o", tmp_path / "o.pto", "--assemble", "--ptoas", exe)
    assert r.returncode == 0, r.stderr
    (args,) = calls(exe)
    assert args[:3] == ["--pto-arch=a3", "--pto-level=level3", "--enable-insert-sync"]
    assert args[3:] == ["o.pto", "-o", args[-1]] and "--disable-infer-layout" not in args


def test_a5_and_level2_and_no_insert_sync(tmp_path):
    exe = fake_ptoas(tmp_path / "bin")
    r = run("compile", VADD, "-o", tmp_path / "o.pto", "--arch", "a5", "--pto-level", "level2", "--assemble",
            "--ptoas", exe, "--no-insert-sync")
    assert r.returncode == 0, r.stderr
    (args,) = calls(exe)
    assert "--pto-arch=a5" in args and "--pto-level=level2" in args and "--enable-insert-sync" not in args


def test_no_insert_sync_needs_assemble(tmp_path):
    r = run("compile", VADD, "-o", tmp_path / "o.pto", "--no-insert-sync")
    assert r.returncode == 2 and "--assemble" in r.stderr and not (tmp_path / "o.pto").exists()


def test_assembler_found_by_flag_then_variable_then_path(tmp_path):
    by_flag = fake_ptoas(tmp_path / "a")
    by_env = fake_ptoas(tmp_path / "b")
    on_path = fake_ptoas(tmp_path / "c", name="ptoas")
    env = {"PTOC_PTOAS": str(by_env), "PATH": f"{on_path.parent}{os.pathsep}{os.environ['PATH']}"}
    assert run("compile", VADD, "-o", tmp_path / "1.pto", "--assemble", "--ptoas", by_flag, env=env).returncode == 0
    assert len(calls(by_flag)) == 1 and not calls(by_env) and not calls(on_path)
    assert run("compile", VADD, "-o", tmp_path / "2.pto", "--assemble", env=env).returncode == 0
    assert len(calls(by_env)) == 1 and not calls(on_path)
    env["PTOC_PTOAS"] = ""
    assert run("compile", VADD, "-o", tmp_path / "3.pto", "--assemble", env=env).returncode == 0
    assert len(calls(on_path)) == 1


def test_bad_assembler_variable_is_an_environment_error(tmp_path):
    r = run("compile", VADD, "-o", tmp_path / "o.pto", "--assemble", env={"PTOC_PTOAS": str(tmp_path / "nope")})
    assert r.returncode == 2 and "PTOC-E0453" in r.stderr and "$PTOC_PTOAS" in r.stderr
    assert list(tmp_path.iterdir()) == []


# ------------------------------------------------------------------------------ version and NZ policy

@pytest.mark.parametrize("version, example, flagged", [
    ("ptoas 0.27", NZ, True),          # old assembler, NZ views: inference off
    ("ptoas 0.60.2", NZ, True),
    ("ptoas 0.61", NZ, False),         # v0.61 takes explicit layouts (NZ-15)
    ("ptoas 1.2", NZ, False),
    ("ptoas 0.27", VADD, False),       # no NZ view: nothing to work around
])
def test_disable_infer_layout_only_for_old_assemblers_with_nz_views(tmp_path, version, example, flagged):
    exe = fake_ptoas(tmp_path / "bin", version=version)
    r = run("compile", example, "-o", tmp_path / "o.pto", "--assemble", "--ptoas", exe)
    assert r.returncode == 0, r.stderr
    (args,) = calls(exe)
    assert ("--disable-infer-layout" in args) == flagged
    assert ("PTOC-I0455" in r.stderr) == flagged
    if flagged:
        assert "predates v0.61" in r.stderr and "NZ-15" in r.stderr


def test_unknown_assembler_version_is_a_warning_and_assumes_new(tmp_path):
    exe = fake_ptoas(tmp_path / "bin", version="PTO assembler (development build)")
    r = run("compile", NZ, "-o", tmp_path / "o.pto", "--assemble", "--ptoas", exe)
    assert r.returncode == 0, r.stderr
    assert "warning[PTOC-E0454]" in r.stderr and "development build" in r.stderr
    assert "--disable-infer-layout" not in calls(exe)[0]


def test_query_version_reads_the_release_number(tmp_path):
    assert asm.query_version(str(fake_ptoas(tmp_path / "x", version="ptoas 0.27")))[0] == (0, 27)
    assert asm.query_version(str(fake_ptoas(tmp_path / "y", version="ptoas version v0.61.3")))[0] == (0, 61, 3)
    assert asm.query_version(str(fake_ptoas(tmp_path / "z", version="no number")))[0] is None


# ------------------------------------------------------------------------------ errors -> diagnostics

LOC_ERROR = ('loc("o.pto":17:15): error: layout mismatch: user-specified layout=nz but inferred=nd\n'
             'Error: Pass execution failed.\n')
FILE_ERROR = "o.pto:3:5: error: 'pto.make_tensor_view' op user-specified layout=nz requires a rank-5 view\n"


def _line(text: str, n: int) -> str:
    return text.splitlines()[n - 1]


def test_loc_form_error_points_into_the_pto_and_writes_nothing(tmp_path):
    clean = tmp_path / "clean"
    clean.mkdir()
    assert run("compile", NZ, "-o", clean / "o.pto").returncode == 0
    line17 = _line((clean / "o.pto").read_text(), 17)
    out = tmp_path / "out"
    out.mkdir()
    (out / "o.pto").write_text("previous pto\n")
    (out / "o.cpp").write_text("previous cpp\n")
    exe = fake_ptoas(tmp_path / "bin", stderr=LOC_ERROR, rc=1)
    r = run("compile", NZ, "-o", out / "o.pto", "--assemble", "--ptoas", exe)
    assert r.returncode == 1
    assert f"{out / 'o.pto'}:17:15: error[PTOC-E0452]: PTOAS: layout mismatch: user-specified layout=nz but " \
           "inferred=nd" in r.stderr
    assert line17.strip()[:60] in r.stderr  # the .pto line under the caret
    assert "Pass execution failed." in r.stderr  # PTOAS's closing line survives as a note
    assert sorted(p.name for p in out.iterdir()) == ["o.cpp", "o.pto"]
    assert (out / "o.pto").read_text() == "previous pto\n" and (out / "o.cpp").read_text() == "previous cpp\n"


def test_file_line_col_form_error_in_json(tmp_path):
    exe = fake_ptoas(tmp_path / "bin", stderr=FILE_ERROR, rc=1)
    r = run("compile", VADD, "-o", tmp_path / "o.pto", "--assemble", "--ptoas", exe, "--diagnostics", "json")
    assert r.returncode == 1
    diags = [json.loads(x) for x in r.stdout.splitlines()]
    err = [d for d in diags if d["severity"] == "error"]
    assert len(err) == 1
    assert err[0]["code"] == "PTOC-E0452" and err[0]["file"] == str(tmp_path / "o.pto")
    assert (err[0]["line"], err[0]["column"]) == (3, 5)
    assert err[0]["message"] == "PTOAS: 'pto.make_tensor_view' op user-specified layout=nz requires a rank-5 view"
    assert not (tmp_path / "o.pto").exists() and not (tmp_path / "o.h").exists()


def test_failure_without_a_located_message_keeps_the_last_line(tmp_path):
    exe = fake_ptoas(tmp_path / "bin", stderr="module {}\nsomething went wrong inside\n", rc=3)
    r = run("compile", VADD, "-o", tmp_path / "o.pto", "--assemble", "--ptoas", exe)
    assert r.returncode == 1 and "PTOAS exited with status 3: something went wrong inside" in r.stderr


def test_success_writes_cpp_with_the_pto_and_header(tmp_path):
    exe = fake_ptoas(tmp_path / "bin", cpp="// the assembled kernel\n")
    r = run("compile", VADD, "-o", tmp_path / "k.pto", "--assemble", "--ptoas", exe)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "k.cpp").read_text() == "// the assembled kernel\n"
    # vector_add has an orchestration function calling its kernel: the kernels manifest too
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bin", "k.cpp", "k.h", "k.kernels.json", "k.pto"]


def test_parse_messages_notes_remarks_and_other_locations():
    text = ('loc(callsite("k.pto":4:2 at "k.pto":9:3)): error: bad op\n'
            'loc("k.pto":4:2): note: see current operation: %0 = "pto.tadd"()\n'
            'k.pto:5:1: remark: ignored\n'
            'loc(unknown): warning: something odd\n'
            'Error: Pass execution failed.\n')
    d = asm.parse_messages(text, {"k.pto"}, "out/k.pto")
    assert [x.severity for x in d] == ["error", "warning"]
    assert (d[0].span.file, d[0].span.line, d[0].span.col) == ("out/k.pto", 4, 2)
    assert d[0].message == "PTOAS: bad op"
    assert [m for m, _ in d[0].notes] == ["PTOAS: see current operation: %0 = \"pto.tadd\"()",
                                          "PTOAS: Pass execution failed."]
    assert not d[1].span.known and d[1].code in CODES
    only_summary = asm.parse_messages("Error: Failed to parse MLIR.\n", {"k.pto"}, "k.pto")
    assert [x.message for x in only_summary] == ["PTOAS: Failed to parse MLIR."]


# ------------------------------------------------------------------------------ the real PTOAS

def _real_version(ptoas: str) -> tuple[int, ...]:
    out = subprocess.run([ptoas, "--version"], capture_output=True, text=True, check=True).stdout
    return tuple(int(x) for x in re.search(r"(\d+)\.(\d+)", out).groups())


@pytest.mark.parametrize("example", sorted(p.name for p in EXAMPLES.glob("*.ir")))
def test_every_example_assembles_with_the_real_ptoas(tmp_path, ptoas, example):
    r = run("compile", EXAMPLES / example, "-o", tmp_path / "k.pto", "--assemble", env={"PTOC_PTOAS": ptoas})
    assert r.returncode == 0, r.stderr
    cpp = (tmp_path / "k.cpp").read_text()
    pto = (tmp_path / "k.pto").read_text()
    for name in re.findall(r"func\.func @(\w+)", pto):
        assert re.search(rf"\bvoid {name}\(", cpp)
    assert "set_flag(" in cpp and "wait_flag(" in cpp  # --enable-insert-sync took effect
    nz = "#pto.layout<nz>" in pto
    assert ("PTOC-I0455" in r.stderr) == (nz and _real_version(ptoas) < (0, 61))
    # kernel calls (also a split kernel's Group launching its pair): a manifest
    whole_program = example in ("attention_block.ir", "grouped_matmul_nz.ir", "linear_relu.ir", "quant_linear_nz.ir", "scoped_add_scale.ir",
                                "scoped_chunked_add.ir", "vector_add.ir", "staged_buffer.ir", "scoped_matmul_relu.ir",
                                "linear_relu_split.ir", "linear_relu_auto_split.ir")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["k.cpp", "k.h"] + ["k.kernels.json"] * whole_program + [
        "k.pto"]


def test_real_ptoas_loc_error_maps_to_the_pto_line(ptoas):
    """Without --disable-infer-layout an assembler older than v0.61 rejects the explicit NZ view (NZ-15)."""
    if _real_version(ptoas) >= (0, 61):
        pytest.skip("this PTOAS takes explicit NZ views; the error under test does not occur")
    text = (GOLDEN / "acc_store_nz.pto").read_text()
    row = next(i for i, ln in enumerate(text.splitlines(), 1) if "#pto.layout<nz>" in ln)
    res = asm.assemble_text(ptoas, text, "out/acc.pto", ["--pto-arch=a3", "--pto-level=level3"], 60)
    assert not res.ok and res.cpp is None
    (err,) = [d for d in res.diagnostics if d.severity == "error"]
    assert err.span.file == "out/acc.pto" and err.span.line == row
    assert err.span.col == text.splitlines()[row - 1].index("pto.make_tensor_view") + 1
    assert "layout mismatch: user-specified layout=nz but inferred=nd" in err.message
    assert any("Pass execution failed" in m for m, _ in err.notes)


VEC_EXTRACT = """\
import pypto.language as pl
@pl.program
class vext:
    @pl.function(type=pl.FunctionType.InCore)
    def k(self, x: pl.Tensor[[16, 64], pl.FP32], out: pl.Out[pl.Tensor[[16, 16], pl.FP32]]) -> pl.Tensor[[16, 16], pl.FP32]:
        t: pl.Tile[[16, 64], pl.FP32, pl.Mem.Vec] = pl.tile.load(x, [0, 0], [16, 64], target_memory=pl.Mem.Vec)
        e: pl.Tile[[16, 16], pl.FP32, pl.Mem.Vec] = pl.tile.extract(t, 0, 8, [16, 16], target_memory=pl.Mem.Vec)
        r: pl.Tile[[16, 16], pl.FP32, pl.Mem.Vec] = pl.tile.muls(e, 2.0)
        o: pl.Tensor[[16, 16], pl.FP32] = pl.tile.store(r, [0, 0], out)
        return o
"""


def test_a_vec_to_vec_extract_assembles_on_a5_and_is_refused_on_a2a3(tmp_path, ptoas):
    # TEXTRACT's UB-to-UB copy: PTOAS takes it on A5; on A2/A3 it wants a Mat source, and ptoc says so itself
    # once the spaces are decided (the front end accepts the op; the rule is a hardware rule)
    src = tmp_path / "vext.ir"
    src.write_text(VEC_EXTRACT)
    r = run("compile", src, "--arch", "a5", "-o", tmp_path / "k.pto", "--assemble", env={"PTOC_PTOAS": ptoas})
    assert r.returncode == 0, r.stderr
    assert "pto.textract ins(%t" in (tmp_path / "k.pto").read_text()
    r = run("compile", src, "--arch", "a2a3", "-o", tmp_path / "k2.pto", "--assemble", env={"PTOC_PTOAS": ptoas})
    assert r.returncode == 1 and "PTOC-E0202" in r.stderr and "Vec -> Vec is not a TEXTRACT path" in r.stderr
    assert not (tmp_path / "k2.pto").exists()


def test_an_unaligned_vec_window_is_copied_out_and_assembles_on_a5(tmp_path, ptoas):
    # CanonicalizeTileSlice: column 4 of FP32 rows starts 16 bytes into a row; on A5 the window becomes a
    # Vec -> Vec TEXTRACT into a tile of its own, which PTOAS takes (both tiles ND)
    src = tmp_path / "win.ir"
    src.write_text(VEC_EXTRACT.replace("pl.tile.extract(t, 0, 8, [16, 16], target_memory=pl.Mem.Vec)",
                                       "pl.tile.slice(t, [16, 16], [0, 4])"))
    r = run("compile", src, "--arch", "a5", "-o", tmp_path / "k.pto", "--assemble", env={"PTOC_PTOAS": ptoas})
    assert r.returncode == 0, r.stderr
    pto = (tmp_path / "k.pto").read_text()
    assert "pto.textract ins(%t, %c0_index, %c4_index" in pto and "pto.subview" not in pto
