"""`ptoc pack` / `ptoc unpack` through real subprocesses and files."""

import subprocess
import sys

import numpy as np

PTOC = [sys.executable, "-m", "ptoc.cli"]


def run(*args):
    return subprocess.run(PTOC + [str(a) for a in args], capture_output=True, text=True, timeout=120, check=False)


def test_pack_nz_int8_weight_matches_the_spec_offsets(tmp_path):
    # NZ-3: [256, 512] INT8 -> [1, 16, 16, 16, 32] with strides [131072, 8192, 512, 32, 1]
    w = np.random.default_rng(1).integers(-128, 127, size=(256, 512), dtype=np.int8)
    np.save(tmp_path / "w.npy", w)
    r = run("pack", tmp_path / "w.npy", "--layout", "NZ", "--dtype", "int8", "-o", tmp_path / "w.bin")
    assert r.returncode == 0, r.stderr
    raw = np.fromfile(tmp_path / "w.bin", dtype=np.int8)
    assert raw.size == 256 * 512
    for r_, c in [(0, 0), (1, 0), (15, 31), (16, 0), (0, 32), (255, 511), (37, 100)]:
        off = (c // 32) * 8192 + (r_ // 16) * 512 + (r_ % 16) * 32 + c % 32
        assert raw[off] == w[r_, c]


def test_pack_unpack_round_trip_fp16_dn_and_npy_output(tmp_path):
    a = np.random.default_rng(2).standard_normal((4, 16, 32)).astype(np.float16)
    np.save(tmp_path / "a.npy", a)
    for layout in ("ND", "DN", "NZ"):
        packed = tmp_path / f"a_{layout}.npy"
        assert run("pack", tmp_path / "a.npy", "--layout", layout, "--dtype", "fp16", "-o", packed).returncode == 0
        back = tmp_path / f"b_{layout}.npy"
        r = run("unpack", packed, "--layout", layout, "--dtype", "fp16", "--shape", "4,16,32", "-o", back)
        assert r.returncode == 0, r.stderr
        assert np.array_equal(np.load(back).view(np.uint16), a.view(np.uint16))


def test_pack_errors_are_user_errors_without_traceback(tmp_path):
    np.save(tmp_path / "odd.npy", np.zeros((10, 32), dtype=np.int8))
    r = run("pack", tmp_path / "odd.npy", "--layout", "NZ", "--dtype", "int8", "-o", tmp_path / "o.bin")
    assert r.returncode == 1 and "16" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "o.bin").exists()
    r = run("pack", tmp_path / "missing.npy", "--layout", "ND", "--dtype", "int8", "-o", tmp_path / "o.bin")
    assert r.returncode == 1 and "Traceback" not in r.stderr
    r = run("unpack", tmp_path / "odd.npy", "--layout", "ND", "--dtype", "int8", "--shape", "3,3", "-o",
            tmp_path / "o.npy")
    assert r.returncode == 1 and "Traceback" not in r.stderr


def test_pack_requires_its_options():
    assert run("pack").returncode == 2
    assert run("unpack", "x.bin", "--layout", "NZ").returncode == 2
