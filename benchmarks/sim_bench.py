"""`ptoc run --sim` on every bundled example: how long it takes, and how close it comes to the reference.

For each example (seeded random inputs, the first kernel) it runs, as subprocesses of the real CLI:

- `ptoc run EX --sim` with an empty harness cache (cold: PTOAS, the C++ compile, the run);
- the same again (cached: the compiled harness is reused);
- ptoc's own reference of the lowered IR on the same inputs (in-process);

and prints the wall times, the assembler flags ptoc chose, and the largest absolute and relative
difference between the simulator's outputs and the reference's. Needs $PTOC_PTOAS, $PTOC_PTO_ISA and
$PTOC_CXX (`eval "$(bash ../shared/tools/setup.sh)"`).

    python benchmarks/sim_bench.py [--json OUT]

A measurement, not a test: nothing here asserts.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
PTOC = Path(sys.executable).with_name("ptoc")
DIMS = {"dynamic_rows.ir": {"M": 80}}


def _inputs(example: Path, folder: Path) -> tuple[list[str], dict]:
    """Seeded inputs for every parameter of the example's first kernel, saved as .npy: the --input flags,
    and the reference's outputs on them."""
    from ptoc.context import CompileContext
    from ptoc.driver import frontend
    from ptoc.ir.nodes import TensorType
    from ptoc.reference.validate import kernels, random_inputs

    ctx = CompileContext()
    prog = frontend(example.read_text(), str(example), ctx)
    fn = kernels(prog)[0]
    dims = DIMS.get(example.name, {})
    values = random_inputs(prog, fn, 0, dims)
    flags = []
    for p in fn.params:
        v = values[p.name]
        if isinstance(p.type, TensorType):
            np.save(folder / f"{p.name}.npy", v)
            flags += ["--input", f"{p.name}={folder / (p.name + '.npy')}"]
        else:
            flags += ["--input", f"{p.name}={v}"]
    for k, n in dims.items():
        flags += ["--dim", f"{k}={n}"]
    from ptoc.driver import lower
    from ptoc.reference.interp import run_function

    ref = run_function(lower(prog, ctx).program, fn.name, dict(values), ctx)
    return flags, {k: np.asarray(v) for k, v in ref.items()}


def _timed(args: list[str], env: dict) -> tuple[float, subprocess.CompletedProcess]:
    t = time.perf_counter()
    r = subprocess.run([str(PTOC), *args], capture_output=True, text=True, env=env, check=False)
    return time.perf_counter() - t, r


def _errors(ref: dict, got: Path) -> tuple[float, float]:
    max_abs = max_rel = 0.0
    for f in sorted(got.glob("*.npy")):
        a = ref[f.stem].astype(np.float64)
        b = np.load(f).astype(np.float64)
        d = np.abs(a - b)
        max_abs = max(max_abs, float(d.max()))
        rel = d / np.where(a == 0, np.inf, np.abs(a))
        max_rel = max(max_rel, float(rel.max()))
    return max_abs, max_rel


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", help="also write the results here")
    opts = ap.parse_args()
    missing = [v for v in ("PTOC_PTOAS", "PTOC_PTO_ISA", "PTOC_CXX") if not os.environ.get(v)]
    if missing:
        print(f"set {', '.join(missing)} first: eval \"$(bash ../shared/tools/setup.sh)\"", file=sys.stderr)
        return 2
    from ptoc.target import assembler as asm

    version, _ = asm.query_version(os.environ["PTOC_PTOAS"])
    rows = []
    print(f"{'example':22} {'flags':76} {'cold s':>7} {'cached s':>8}  max abs / rel vs reference")
    for ex in sorted(EXAMPLES.glob("*.ir")):
        with tempfile.TemporaryDirectory(prefix="ptoc-sim-bench-") as tmp:
            work = Path(tmp)
            flags, ref = _inputs(ex, work)
            env = dict(os.environ, PTOC_CACHE_DIR=str(work / "cache"))
            cold, r1 = _timed(["run", str(ex), "--sim", *flags, "--output-dir", str(work / "sim")], env)
            cached, r2 = _timed(["run", str(ex), "--sim", *flags, "--output-dir", str(work / "sim")], env)
            ok = r1.returncode == r2.returncode == 0
            pto = subprocess.run([str(PTOC), "compile", str(ex), "-o", str(work / "k.pto")], capture_output=True,
                                 check=False)
            text = (work / "k.pto").read_text() if pto.returncode == 0 else ""
            used = asm.assembler_flags("a2a3", "level3", version, asm.has_nz_views(text))
            err = _errors(ref, work / "sim") if ok else (float("nan"), float("nan"))
            row = {"example": ex.name, "ok": ok, "flags": used, "cold_s": round(cold, 3),
                   "cached_s": round(cached, 3), "max_abs": err[0], "max_rel": err[1]}
            if not ok:
                row["stderr"] = (r1.stderr + r2.stderr)[-2000:]
            rows.append(row)
            print(f"{ex.name:22} {' '.join(used):76} {cold:7.2f} {cached:8.2f}  "
                  f"{err[0]:.3g} / {err[1]:.3g}" + ("" if ok else "  FAILED: " + row["stderr"][-300:]))
    if opts.json:
        Path(opts.json).write_text(json.dumps(rows, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
