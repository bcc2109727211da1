"""Many kernels in one call: `ptoc compile F1 ... F24 --output-dir DIR -j N` against 24 separate
`ptoc compile F -o OUT` processes (what a build script did before batches).

The 24 inputs are copies of the examples. Each variant runs `--repeat` times (median reported), all in
the same conditions one after another. Goal: `-j 2` at least 1.6x faster than the separate calls.

    python benchmarks/batch_bench.py [--files 24] [--repeat 5]

This is a measurement, not a test: nothing here asserts on timings.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PTOC = Path(sys.executable).with_name("ptoc")


def _run(cmds: list[list[str]]) -> float:
    t0 = time.perf_counter()
    for c in cmds:
        subprocess.run(c, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--files", type=int, default=24)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args(argv)
    exe = [str(PTOC)] if PTOC.exists() else [sys.executable, "-m", "ptoc"]
    examples = sorted((ROOT / "examples").glob("*.ir"))
    tmp = Path(tempfile.mkdtemp(prefix="ptoc-batch-"))
    try:
        files = []
        for i in range(args.files):
            p = tmp / f"k{i}.ir"
            shutil.copy(examples[i % len(examples)], p)
            files.append(str(p))
        out = tmp / "out"
        out.mkdir()
        variants = {
            "separate calls": [exe + ["compile", f, "-o", str(out / (Path(f).stem + ".pto"))] for f in files],
            "one call, -j 1": [exe + ["compile", *files, "--output-dir", str(out), "-j", "1"]],
            "one call, -j 2": [exe + ["compile", *files, "--output-dir", str(out), "-j", "2"]],
        }
        _run(variants["one call, -j 1"])  # warm the grammar cache and the byte code
        times: dict[str, list[float]] = {k: [] for k in variants}
        for _ in range(args.repeat):
            for name, cmds in variants.items():
                times[name].append(_run(cmds))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    base = statistics.median(times["separate calls"])
    print(f"{args.files} files, median of {args.repeat} runs")
    for name, ts in times.items():
        m = statistics.median(ts)
        print(f"  {name:<16} {m:7.3f} s   {base / m:5.2f}x")
    speed = base / statistics.median(times["one call, -j 2"])
    print(f"goal: -j 2 at least 1.6x faster than separate calls: {'met' if speed >= 1.6 else 'NOT MET'} "
          f"({speed:.2f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
