"""End-to-end speed of `ptoc compile`.

Generates programs of about 1k, 10k and 100k lines out of the kernels in `examples/` (each copy
renamed), and measures for each size:

- `ptoc compile` wall time of the real CLI in a subprocess (best of N), as lines per second, with each
  `-j` of `--jobs` (by default 1 and the number of CPUs: `-j N` lowers the program's independent kernels
  in N processes), and that run's CPU time (ptoc's and its workers');
- the CPU time of each stage in-process: front end (parse + check), every pass, the pipeline's checks,
  .pto emission, header, kernels manifest;
- the ratio of the compile time to CPython's `ast.parse` of the same text;

and separately the wall time of compiling the README example (`examples/nz_weight_int8.ir`) including
interpreter start-up (median of 7 runs, and its CPU time, user + sys, which other jobs on the machine
disturb less). It prints the goals (issue 15) and whether each is met: linear scaling (100k lines
within 12x of 10k), the README example under 150 ms, a 10k-line compile within 4x of `ast.parse`.

    python benchmarks/compile_bench.py [--sizes 1000,10000,100000] [--repeat 2] [--jobs 1,2] [--json OUT]

This is a measurement, not a test: nothing here asserts on timings. Python byte-code caching matters
for start-up: run it from an installed ptoc (pip compiles the byte code) or with PYTHONDONTWRITEBYTECODE
unset.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
README_EXAMPLE = EXAMPLES / "nz_weight_int8.ir"


def _kernel_blocks() -> list[tuple[str, list[str]]]:
    """(name, lines) of every kernel function of the examples (4-space class-member indentation)."""
    blocks = []
    for path in sorted(EXAMPLES.glob("*.ir")):
        lines = path.read_text().splitlines()
        i = 0
        while i < len(lines):
            if lines[i].startswith("    @pl.function") and any(k in lines[i] for k in ("InCore", "AIC", "AIV")):
                j = i + 1
                while j < len(lines) and not lines[j].startswith("    @pl.function"):
                    j += 1
                name = re.search(r"def (\w+)\(", lines[i + 1]).group(1)
                blocks.append((name, [ln for ln in lines[i:j] if ln.strip()]))
                i = j
            else:
                i += 1
    return blocks


def generate(n_lines: int) -> str:
    blocks = _kernel_blocks()
    out = ["# pypto.program: bench", "import pypto.language as pl", "", 'M = pl.dynamic("M")', "",
           "@pl.program", "class bench:"]
    k = 0
    while len(out) < n_lines:
        name, lines = blocks[k % len(blocks)]
        renamed = [ln.replace(f"def {name}(", f"def {name}_{k}(") for ln in lines]
        out.extend(renamed)
        k += 1
    return "\n".join(out) + "\n"


def _ptoc() -> list[str]:
    exe = Path(sys.executable).with_name("ptoc")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "ptoc.cli"]


def run_cli(cmd: list[str]) -> tuple[float, float]:
    """Run `cmd` once: (wall seconds, CPU seconds: user + sys of the process and of the workers it forked)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    err = proc.stderr.read().decode() if proc.stderr else ""
    if proc.stderr:
        proc.stderr.close()
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{err[-2000:]}")
    return wall, usage.ru_utime + usage.ru_stime


def time_cli(args: list[str], repeat: int) -> tuple[float, float]:
    """(best wall seconds, that run's CPU seconds: user + sys of ptoc and of the workers it forked)."""
    return min(run_cli(_ptoc() + args) for _ in range(repeat))


def _pass_clock(acc: dict[str, float]):
    """Wrap every pipeline pass's `applies`, `run` and `adopt` to add their CPU time to `acc[name]`; returns
    the undo. The passes run as in a compile (the checks once at the end, as `ptoc compile` runs them; so
    does the manager's own timings instrument, `ptoc passes --timings`, which measures wall time)."""
    import importlib

    from ptoc.passes.manager import PIPELINE

    undo = []
    running: set[str] = set()  # passes inside a timed method: a method one of them calls is not counted again
    for name in dict.fromkeys(name for _, name in PIPELINE):  # (a pass that runs twice is wrapped once)
        cls = getattr(importlib.import_module(f"ptoc.passes.{name}"), name)
        for meth in ("applies", "run", "adopt"):
            orig = cls.__dict__.get(meth)
            if orig is None:
                continue

            def timed(self, *a, _orig=orig, _name=name, **k):
                if _name in running:  # (e.g. a `run` that calls its own `adopt`)
                    return _orig(self, *a, **k)
                running.add(_name)
                t0 = time.process_time()
                try:
                    return _orig(self, *a, **k)
                finally:
                    running.discard(_name)
                    acc[_name] = acc.get(_name, 0.0) + time.process_time() - t0

            setattr(cls, meth, timed)
            undo.append((cls, meth, orig))
    return lambda: [setattr(c, m, o) for c, m, o in undo]


def stage_times(text: str) -> dict[str, float]:
    """CPU seconds of each stage of one in-process compile. A pass's time includes the value types and node
    indexes it is the first to ask for (later passes get them from the pipeline's cache); "pipeline
    checks" is the rest of the pipeline: its input properties, the checks at the end, skipped passes."""
    from ptoc import __version__
    from ptoc.codegen.global_tensor import emit_header, kernel_types
    from ptoc.codegen.manifest import emit_manifest, has_orchestration
    from ptoc.codegen.pto import emit_module
    from ptoc.context import CompileContext
    from ptoc.driver import frontend, lower
    from ptoc.passes.manager import gc_paused

    ctx = CompileContext()
    acc: dict[str, float] = {}
    undo = _pass_clock(acc)
    try:
        t0 = time.process_time()
        prog = frontend(text, "bench.ir", ctx)
        t1 = time.process_time()
        low = lower(prog, ctx)
        t2 = time.process_time()
    finally:
        undo()
    with gc_paused():  # as `compile_program` runs the emitters
        types = low.function_types(ctx)
        t3 = time.process_time()
        memo: dict = {}  # as `compile_program`: the .pto writer and the header read the same tensor views
        emit_module(low.program, ctx, types=types, memo=memo)
        t4 = time.process_time()
        # as `compile_program`: the kernels' GlobalTensor types are worked out once, for the header, and
        # `ptoc compile` hands them on to the manifest
        kernels = kernel_types(low.program, ctx, types, memo)
        emit_header(low.program, ctx, "bench.ir", __version__, kernels=kernels)
        t5 = time.process_time()
    if has_orchestration(low.program, low.verified):
        emit_manifest(low.program, ctx, "bench.ir", low.verified, kernels)
    t6 = time.process_time()
    out = {"frontend": t1 - t0}
    out.update(sorted(acc.items(), key=lambda kv: -kv[1]))
    out["pipeline checks (the rest of the passes' time)"] = (t2 - t1) - sum(acc.values())
    out["passes (total)"] = t2 - t1
    out["emit .pto"] = t4 - t3
    out["emit header"] = t5 - t4
    out["emit manifest"] = t6 - t5
    out["total"] = t1 - t0 + t2 - t1 + t6 - t3
    return out


def time_ast(text: str, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        ast.parse(text)
        best = min(best, time.perf_counter() - t0)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="1000,10000,100000")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--json", dest="json_out")
    ap.add_argument("--jobs", default=f"1,{os.cpu_count() or 1}" if (os.cpu_count() or 1) > 1 else "1",
                    help="the -j values to time the compile with (default: 1 and the number of CPUs)")
    args = ap.parse_args()
    jobs = sorted({int(j) for j in args.jobs.split(",")})
    sizes = [int(s) for s in args.sizes.split(",")]
    results: dict = {"sizes": []}
    with tempfile.TemporaryDirectory() as td:
        for n in sizes:
            text = generate(n)
            lines = text.count("\n")
            src = Path(td) / f"bench_{n}.ir"
            src.write_text(text)
            a = time_ast(text, 5)
            row = {"lines": lines, "ast_parse_s": a, "jobs": {}}
            for j in jobs:
                wall, cpu = time_cli(["compile", str(src), "-o", str(Path(td) / f"bench_{n}.pto"), "-j", str(j)],
                                     args.repeat if n <= 10000 else 1)
                row["jobs"][j] = {"compile_s": wall, "cpu_s": cpu, "lines_per_s": lines / wall,
                                  "ratio_to_ast": wall / a}
                print(f"{lines:>7} lines  compile -j {j} {wall:8.3f} s (CPU {cpu:7.3f} s)  {lines / wall:9.0f} lines/s"
                      f"  ast.parse {a:.4f} s  ratio {wall / a:6.1f}x", flush=True)
            row.update(row["jobs"][jobs[0]])  # (the first -j's numbers also at the top level, as before)
            if n == 10000 or (n == sizes[0] and 10000 not in sizes):
                row["stages"] = stage_times(text)
            results["sizes"].append(row)
        runs, cpu = [], []
        for _ in range(7):
            t0 = time.perf_counter()
            proc = subprocess.Popen(_ptoc() + ["compile", str(README_EXAMPLE), "-o", str(Path(td) / "readme.pto")],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            _, status, usage = os.wait4(proc.pid, 0)
            runs.append(time.perf_counter() - t0)
            cpu.append(usage.ru_utime + usage.ru_stime)
            if os.waitstatus_to_exitcode(status) != 0:
                raise SystemExit(f"ptoc compile {README_EXAMPLE} failed")
        results["readme_example_s"] = statistics.median(runs)
        results["readme_example_cpu_s"] = statistics.median(cpu)
    for row in results["sizes"]:
        if "stages" in row:
            print(f"\nstages at {row['lines']} lines (in-process, CPU seconds):")
            for k, v in row["stages"].items():
                print(f"  {k:48} {v:8.3f} s")
    print(f"\nREADME example (ptoc compile examples/nz_weight_int8.ir, with start-up): "
          f"{results['readme_example_s'] * 1000:.0f} ms wall, {results['readme_example_cpu_s'] * 1000:.0f} ms CPU "
          "(medians of 7)")
    goals = []
    ten = next((r for r in results["sizes"] if 9000 <= r["lines"] <= 11000), None)
    hundred = next((r for r in results["sizes"] if 90000 <= r["lines"] <= 110000), None)
    if ten and hundred:
        f = hundred["compile_s"] / ten["compile_s"]
        goals.append(("linear scaling: 100k lines within 12x of 10k", f"{f:.1f}x", f <= 12))
    goals.append(("README example under 150 ms wall", f"{results['readme_example_s'] * 1000:.0f} ms "
                  f"({results['readme_example_cpu_s'] * 1000:.0f} ms CPU)", results["readme_example_s"] < 0.15))
    if ten:
        for j, r in ten["jobs"].items():
            goals.append((f"10k-line compile -j {j} within 4x of ast.parse", f"{r['ratio_to_ast']:.1f}x",
                          r["ratio_to_ast"] <= 4))
    print("\ngoals:")
    for name, value, met in goals:
        print(f"  {'met    ' if met else 'NOT met'}  {name}: {value}")
    results["goals"] = [{"goal": g, "value": v, "met": m} for g, v, m in goals]
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
