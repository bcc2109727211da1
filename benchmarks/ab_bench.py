"""Two ptoc installations side by side, in alternating rounds: for a before/after on a shared machine.

On a machine whose speed drifts (other jobs, a throttled virtual CPU), the best of a few runs of one
build and then of the other compares two different machines. Here every round runs, one right after
the other: `ptoc check` (default jobs and `-j 1`) of parse_bench's 10k-line program, `ptoc compile`
(default jobs and `-j 1`) of compile_bench's 10k-line program, each with both installations (which
goes first alternates), and CPython's `ast.parse` of both texts in this process. It prints each
command's median wall time and median user+sys CPU over the rounds, the change, and the median of the
per-round ratios to `ast.parse` (issue 15's goals: check <= 2x, compile <= 4x).

    python benchmarks/ab_bench.py BEFORE_PTOC AFTER_PTOC [--rounds 7] [--lines 10000]

BEFORE_PTOC / AFTER_PTOC: the `ptoc` executables of the two installations (e.g. `/tmp/base/.venv/bin/ptoc`).
This is a measurement, not a test: nothing here asserts on timings.
"""

from __future__ import annotations

import argparse
import ast
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import compile_bench  # noqa: E402
import parse_bench  # noqa: E402


def _ast_time(text: str) -> float:
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        ast.parse(text)
        best = min(best, time.perf_counter() - t0)
    return best


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("before")
    ap.add_argument("after")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--lines", type=int, default=10000)
    args = ap.parse_args(argv)
    builds = {"before": args.before, "after": args.after}
    for name, exe in builds.items():
        if not Path(exe).exists():
            raise SystemExit(f"{name}: no such ptoc executable: {exe}")
    with tempfile.TemporaryDirectory(prefix="ptoc-ab-") as tmp:
        check_ir = Path(tmp) / "check.ir"
        check_ir.write_text(parse_bench.generate_program(args.lines))
        compile_ir = Path(tmp) / "compile.ir"
        compile_ir.write_text(compile_bench.generate(args.lines))
        texts = {"check": check_ir.read_text(), "compile": compile_ir.read_text()}
        out = str(Path(tmp) / "out.pto")
        commands = {
            "check": ["check", str(check_ir)],
            "check -j 1": ["check", "-j", "1", str(check_ir)],
            "compile": ["compile", str(compile_ir), "-o", out],
            "compile -j 1": ["compile", "-j", "1", str(compile_ir), "-o", out],
        }
        runs: dict[tuple[str, str], list[tuple[float, float]]] = {}
        ratios: dict[tuple[str, str], list[float]] = {}
        for r in range(args.rounds):
            order = ["before", "after"] if r % 2 == 0 else ["after", "before"]
            base = {k: _ast_time(t) for k, t in texts.items()}
            for label, cmd in commands.items():
                for name in order:
                    wall, cpu = compile_bench.run_cli([builds[name], *cmd])
                    runs.setdefault((label, name), []).append((wall, cpu))
                    ratios.setdefault((label, name), []).append(wall / base[label.split()[0]])
            print(f"  round {r + 1}/{args.rounds} done (ast.parse: check text {base['check']:.3f} s, "
                  f"compile text {base['compile']:.3f} s)", flush=True)
    print(f"\n{args.rounds} alternating rounds, medians ({args.lines}-line programs)")
    print(f"{'command':14} {'before s':>9} {'after s':>9} {'change':>8} {'before cpu':>11} {'after cpu':>10} "
          f"{'x ast before':>13} {'x ast after':>12}")
    for label in commands:
        b = runs[(label, "before")]
        a = runs[(label, "after")]
        bw, aw = statistics.median(w for w, _ in b), statistics.median(w for w, _ in a)
        bc, ac = statistics.median(c for _, c in b), statistics.median(c for _, c in a)
        rb, ra = statistics.median(ratios[(label, "before")]), statistics.median(ratios[(label, "after")])
        print(f"{label:14} {bw:9.3f} {aw:9.3f} {100 * (aw - bw) / bw:+7.1f}% {bc:11.3f} {ac:10.3f} "
              f"{rb:12.1f}x {ra:11.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
