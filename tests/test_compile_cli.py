"""`ptoc compile` as a CI script calls it: real subprocesses, real files, a fake assembler."""

import os
import stat
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PTOC = [sys.executable, "-m", "ptoc.cli"]
VADD = ROOT / "examples" / "vector_add.ir"
NZ = ROOT / "examples" / "nz_weight_int8.ir"


def run(*args, cwd=None, env=None):
    e = dict(os.environ)
    e.update(env or {})
    return subprocess.run(PTOC + [str(a) for a in args], capture_output=True, text=True, timeout=120, cwd=cwd, env=e,
                          check=False)


def test_compile_writes_pto_and_header_beside_it(tmp_path):
    r = run("compile", VADD, "-o", tmp_path / "out.pto")
    assert r.returncode == 0, r.stderr
    pto = (tmp_path / "out.pto").read_text()
    assert pto.startswith('module attributes {pto.target_arch = "a2a3"}')
    hdr = (tmp_path / "out.h").read_text()
    assert hdr.startswith("#pragma once") and "#include <pto/pto-inst.hpp>" in hdr
    assert r.stderr == ""  # a whole program compiles quietly: its orchestration function is host code


def test_header_path_and_no_header(tmp_path):
    # a header folder that does not exist: an environment error (exit 2), and the .pto is not written either
    assert run("compile", VADD, "-o", tmp_path / "a.pto", "--header", tmp_path / "inc" / "a_types.h").returncode == 2
    assert not (tmp_path / "a.pto").exists()
    (tmp_path / "inc").mkdir()
    assert run("compile", VADD, "-o", tmp_path / "a.pto", "--header", tmp_path / "inc" / "a_types.h").returncode == 0
    assert (tmp_path / "inc" / "a_types.h").exists() and not (tmp_path / "a.h").exists()
    assert run("compile", VADD, "-o", tmp_path / "b.pto", "--no-header").returncode == 0
    assert (tmp_path / "b.pto").exists() and not (tmp_path / "b.h").exists()


def test_failed_compile_leaves_existing_outputs_untouched(tmp_path):
    out, hdr = tmp_path / "k.pto", tmp_path / "k.h"
    out.write_text("previous pto\n")
    hdr.write_text("previous header\n")
    bad = tmp_path / "bad.ir"
    bad.write_text(VADD.read_text().replace("pl.tile.add(ta, tb)", "pl.tile.add(ta, tz)"))
    r = run("compile", bad, "-o", out)
    assert r.returncode == 1 and "PTOC-E0101" in r.stderr
    assert out.read_text() == "previous pto\n" and hdr.read_text() == "previous header\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.ir", "k.h", "k.pto"]  # no temp files left


def test_nz15_old_assembler_version_rejected_with_explanation(tmp_path):
    r = run("compile", NZ, "-o", tmp_path / "nz.pto", "--ptoas-version", "v0.60")
    assert r.returncode == 1
    assert "PTOC-E0410" in r.stderr and "layout mismatch: user-specified layout=nz but inferred=nd" in r.stderr
    assert "NZ-15" in r.stderr and not (tmp_path / "nz.pto").exists()
    assert run("compile", NZ, "-o", tmp_path / "nz.pto", "--ptoas-version", "v0.61").returncode == 0
    assert run("compile", VADD, "-o", tmp_path / "v.pto", "--ptoas-version", "v0.60").returncode == 0


def test_bad_ptoas_version_is_a_usage_error(tmp_path):
    r = run("compile", VADD, "-o", tmp_path / "v.pto", "--ptoas-version", "latest")
    assert r.returncode == 2 and "latest" in r.stderr


def test_level2_has_no_addresses_level3_has_them(tmp_path):
    assert run("compile", VADD, "-o", tmp_path / "l3.pto").returncode == 0
    assert run("compile", VADD, "-o", tmp_path / "l2.pto", "--pto-level", "level2").returncode == 0
    l3, l2 = (tmp_path / "l3.pto").read_text(), (tmp_path / "l2.pto").read_text()
    assert l3.count("pto.alloc_tile addr = ") == l3.count("pto.alloc_tile") > 0
    assert "pto.alloc_tile" in l2 and "addr = " not in l2


def test_output_is_byte_identical_across_hash_seeds(tmp_path):
    outs = []
    for seed in ("0", "1", "12345"):
        d = tmp_path / seed
        d.mkdir()
        r = run("compile", NZ, "-o", d / "o.pto", env={"PYTHONHASHSEED": seed})
        assert r.returncode == 0, r.stderr
        outs.append(((d / "o.pto").read_bytes(), (d / "o.h").read_bytes()))
    assert outs[0] == outs[1] == outs[2]


def test_dump_dir_and_timings(tmp_path):
    r = run("compile", VADD, "-o", tmp_path / "o.pto", "--dump-dir", tmp_path / "d", "--timings")
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "d" / "00_frontend.ir").exists() and "total" in r.stderr


def _fake_ptoas(tmp_path, body: str) -> Path:
    exe = tmp_path / "fake-ptoas"
    exe.write_text(f"#!{sys.executable}\nimport sys\nargs = sys.argv[1:]\n{body}\n")
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    return exe


def test_assemble_runs_ptoas_with_arch_and_level(tmp_path):
    log = tmp_path / "args.txt"
    exe = _fake_ptoas(tmp_path, f"open({str(log)!r}, 'w').write(' '.join(args))\n"
                                "open(args[args.index('-o') + 1], 'w').write('// cpp')\nsys.exit(0)")
    r = run("compile", VADD, "-o", tmp_path / "o.pto", "--arch", "a5", "--assemble", "--ptoas", exe)
    assert r.returncode == 0, r.stderr
    args = log.read_text().split()
    assert "--pto-arch=a5" in args and "--pto-level=level3" in args and "--enable-insert-sync" in args
    assert "o.pto" in args  # a temporary copy under the output's name
    assert (tmp_path / "o.cpp").read_text() == "// cpp"


def test_assemble_errors_become_diagnostics(tmp_path):
    exe = _fake_ptoas(tmp_path, "pto = [a for a in args if a.endswith('.pto')][0]\n"
                                "sys.stderr.write(pto + \":3:5: error: 'pto.make_tensor_view' op user-specified "
                                "layout=nz requires a rank-5 view\\n\")\nsys.exit(1)")
    r = run("compile", VADD, "-o", tmp_path / "o.pto", "--assemble", "--ptoas", exe)
    assert r.returncode == 1
    assert "PTOC-E0452" in r.stderr and "requires a rank-5 view" in r.stderr and "o.pto:3:5" in r.stderr


def test_assemble_without_assembler_says_so_plainly(tmp_path):
    r = run("compile", VADD, "-o", tmp_path / "o.pto", "--assemble", env={"PATH": str(tmp_path), "PTOC_PTOAS": ""})
    assert r.returncode == 2 and "PTOC-E0453" in r.stderr and "`ptoas` on PATH" in r.stderr
    assert "--ptoas PATH" in r.stderr and "$PTOC_PTOAS" in r.stderr and not (tmp_path / "o.pto").exists()
    assert "Traceback" not in r.stderr


def test_assemble_timeout_reported(tmp_path):
    exe = _fake_ptoas(tmp_path, "import time\ntime.sleep(30)")
    r = run("compile", VADD, "-o", tmp_path / "o.pto", "--assemble", "--ptoas", exe, "--ptoas-timeout", "1")
    assert r.returncode == 1 and "PTOC-E0451" in r.stderr


def test_compile_help_explains_options():
    r = run("compile", "--help")
    assert r.returncode == 0
    for opt in ("--header", "--no-header", "--arch", "--ptoas-version", "--pto-level", "--dump-dir", "--timings",
                "--diagnostics", "--assemble", "--ptoas"):
        assert opt in r.stdout
