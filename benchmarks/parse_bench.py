"""Front-end speed and scaling of `ptoc check`.

Generates realistic PyPTO IR programs (many kernels: loads, elementwise and matmul ops, loops with
loop-carried values, if/else with yields, scalar arithmetic) of about 1k, 10k and 100k lines, writes
them to a temporary directory and measures, for each size:

- `ptoc check` wall time, best of N runs of the real CLI in a subprocess, as lines per second (as a user
  runs it: by default in as many processes as there are CPUs), the same with `-j 1` (one process), and
  for `ptoc check --syntax-only` (the front end alone: no passes, no emission);
- the peak resident memory of that child process (`ru_maxrss` from `os.wait4`);
- the ratio of that time to CPython's `ast.parse` of the same text (in-process, best of N), and to a
  `python -c "ast.parse(...)"` subprocess (both pay interpreter start-up; shown for context);
- `ptoc --version` start-up time (median of 10 runs).

It then prints the goals and whether each is met (issue 15):
linear scaling (100k lines within 12x of 10k), `ptoc check` within 2x of `ast.parse` at 10k lines,
`ptoc --version` under 150 ms. On a machine other jobs share, wall times swell; the child's CPU time
(user + sys) is shown beside them and gives the steadier ratio.

    python benchmarks/parse_bench.py [--sizes 1000,10000,100000] [--repeat 3] [--json OUT]
    python benchmarks/parse_bench.py --write-only DIR   # only write the generated programs

This is a measurement, not a test: nothing here asserts on timings.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# --------------------------------------------------------------------------------------------------
# Program generator
# --------------------------------------------------------------------------------------------------

_HEADER = "# pypto.program: bench_{n}\nimport pypto.language as pl\n\n@pl.program\nclass bench_{n}:\n"


def _vec_kernel(i: int) -> list[str]:
    """An AIV kernel: row-blocked loop, two loads, a chain of elementwise ops, an if/else with yields."""
    T = "pl.Tile[[32, 128], pl.FP32, pl.Mem.Vec]"
    C = "pl.Tile[[32, 1], pl.FP32, pl.Mem.Vec]"
    G = "pl.Tensor[[1024, 128], pl.FP32]"
    return [
        "    @pl.function(type=pl.FunctionType.AIV)",
        f"    def vec_kernel_{i}(self, x: {G}, y: {G}, n: pl.Scalar[pl.INDEX], alpha: pl.Scalar[pl.FP32], "
        f"out: pl.Out[{G}]) -> {G}:",
        "        # row blocks of 32 rows; the last block may be partial",
        f"        tmp: {T} = pl.tile.create([32, 128], dtype=pl.FP32, target_memory=pl.Mem.Vec)",
        "        nblk: pl.Scalar[pl.INDEX] = (n + 31) // 32",
        "        for b, (out_iter,) in pl.range(0, nblk, 1, init_values=(out,)):",
        "            r: pl.Scalar[pl.INDEX] = b * 32",
        f"            xt: {T} = pl.tile.load(x, [r, 0], [32, 128], [32, 128], target_memory=pl.Mem.Vec)",
        f"            yt: {T} = pl.tile.load(y, [r, 0], [32, 128], [32, 128], target_memory=pl.Mem.Vec)",
        f"            s: {T} = pl.tile.add(xt, yt)",
        f"            m: {T} = pl.tile.muls(s, alpha)",
        f"            d: {T} = pl.tile.sub(m, xt)",
        f"            mx: {C} = pl.tile.row_max(d, tmp)",
        f"            sh: {T} = pl.tile.row_expand_sub(d, mx)",
        f"            e: {T} = pl.tile.exp(sh)",
        f"            sm: {C} = pl.tile.row_sum(e, tmp)",
        f"            p: {T} = pl.tile.row_expand_div(e, sm)",
        "            if b % 2 == 0 and r + 32 <= n:",
        f"                q: {T} = pl.tile.mul(p, yt)",
        f"                sel: {T} = pl.yield_(q)",
        "            else:",
        f"                q2: {T} = pl.tile.adds(p, -1.0)",
        f"                sel: {T} = pl.yield_(q2)",
        f"            out_store: {G} = pl.tile.store(sel, [r, 0], out_iter)",
        f"            out_next: {G} = pl.yield_(out_store)",
        "        return out_next",
    ]


def _cube_kernel(i: int) -> list[str]:
    """An AIC kernel: a K loop of load / move / matmul_acc with an accumulator carried through."""
    A = "pl.Tensor[[128, 1024], pl.BF16]"
    B = "pl.Tensor[[1024, 256], pl.BF16]"
    OUT = "pl.Tensor[[128, 256], pl.FP32]"
    return [
        "    @pl.function(type=pl.FunctionType.AIC)",
        f"    def mm_kernel_{i}(self, a: {A}, b: {B}, c: pl.Out[{OUT}]) -> {OUT}:",
        "        a0_mat: pl.Tile[[128, 128], pl.BF16, pl.Mem.Mat] = pl.tile.load(a, [0, 0], [128, 128], "
        "[128, 128], target_memory=pl.Mem.Mat)",
        "        b0_mat: pl.Tile[[128, 256], pl.BF16, pl.Mem.Mat] = pl.tile.load(b, [0, 0], [128, 256], "
        "[128, 256], target_memory=pl.Mem.Mat)",
        "        a0_left: pl.Tile[[128, 128], pl.BF16, pl.Mem.Left] = pl.tile.move(a0_mat, "
        "target_memory=pl.Mem.Left)",
        "        b0_right: pl.Tile[[128, 256], pl.BF16, pl.Mem.Right] = pl.tile.move(b0_mat, "
        "target_memory=pl.Mem.Right)",
        "        acc0: pl.Tile[[128, 256], pl.FP32, pl.Mem.Acc] = pl.tile.matmul(a0_left, b0_right)",
        "        for kb, (acc,) in pl.range(1, 8, init_values=(acc0,)):",
        "            k0: pl.Scalar[pl.INDEX] = kb * 128",
        "            a_mat: pl.Tile[[128, 128], pl.BF16, pl.Mem.Mat] = pl.tile.load(a, [0, k0], [128, 128], "
        "[128, 128], target_memory=pl.Mem.Mat)",
        "            b_mat: pl.Tile[[128, 256], pl.BF16, pl.Mem.Mat] = pl.tile.load(b, [k0, 0], [128, 256], "
        "[128, 256], target_memory=pl.Mem.Mat)",
        "            a_left: pl.Tile[[128, 128], pl.BF16, pl.Mem.Left] = pl.tile.move(a_mat, "
        "target_memory=pl.Mem.Left)",
        "            b_right: pl.Tile[[128, 256], pl.BF16, pl.Mem.Right] = pl.tile.move(b_mat, "
        "target_memory=pl.Mem.Right)",
        "            acc_next: pl.Tile[[128, 256], pl.FP32, pl.Mem.Acc] = pl.tile.matmul_acc(acc, a_left, b_right)",
        "            acc_out: pl.Tile[[128, 256], pl.FP32, pl.Mem.Acc] = pl.yield_(acc_next)",
        f"        c_store: {OUT} = pl.tile.store(acc_out, [0, 0], c)",
        "        return c_store",
    ]


def _orchestration(i: int, nvec: int, ncube: int) -> list[str]:
    """An orchestration function that calls a few of the kernels above."""
    G = "pl.Tensor[[1024, 128], pl.FP32]"
    OUT = "pl.Tensor[[128, 256], pl.FP32]"
    lines = [
        "    @pl.function(type=pl.FunctionType.Orchestration)",
        f"    def main_{i}(self, x: {G}, y: {G}, a: pl.Tensor[[128, 1024], pl.BF16], "
        f"b: pl.Tensor[[1024, 256], pl.BF16], n: pl.Scalar[pl.INDEX]) -> {OUT}:",
        f"        o0: {G} = pl.tensor.create([1024, 128], dtype=pl.FP32)",
    ]
    prev = "o0"
    for j, k in enumerate(range(max(0, nvec - 3), nvec)):
        lines.append(f"        o{j + 1}: {G} = self.vec_kernel_{k}(x, y, n, 0.5, {prev})")
        prev = f"o{j + 1}"
    lines.append(f"        c0: {OUT} = pl.tensor.create([128, 256], dtype=pl.FP32)")
    lines.append(f"        c1: {OUT} = self.mm_kernel_{max(0, ncube - 1)}(a, b, c0)")
    lines.append("        return c1")
    return lines


def generate_program(target_lines: int) -> str:
    """A valid program of about `target_lines` lines (never fewer)."""
    lines = _HEADER.format(n=target_lines).rstrip("\n").split("\n")
    nvec = ncube = norch = 0
    while len(lines) < target_lines:
        lines += _vec_kernel(nvec)
        nvec += 1
        if nvec % 2 == 0:
            lines += _cube_kernel(ncube)
            ncube += 1
        if nvec % 8 == 0 and ncube:
            lines += _orchestration(norch, nvec, ncube)
            norch += 1
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------------------------------
# Measurement
# --------------------------------------------------------------------------------------------------

def _ptoc_cmd() -> list[str]:
    """The installation this interpreter runs: the `ptoc` script beside it (as compile_bench takes it), else
    one on PATH, else the module. (Not PATH first: an interpreter run without its venv activated would
    time another installation's ptoc, or the source tree's, byte-compiled again on every run when
    PYTHONDONTWRITEBYTECODE is set.)"""
    beside = Path(sys.executable).with_name("ptoc")
    if beside.exists():
        return [str(beside)]
    exe = shutil.which("ptoc")
    if exe is not None:
        return [exe]
    return [sys.executable, "-m", "ptoc.cli"]


def run_child(cmd: list[str]) -> tuple[float, int, int, str]:
    """Run `cmd`; return (wall seconds, exit status, peak RSS in KiB, stderr). The child's CPU seconds
    (user + sys) are left in `run_child.cpu`."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    err = proc.stderr.read() if proc.stderr is not None else b""
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.stderr is not None:
        proc.stderr.close()
    kib = usage.ru_maxrss // 1024 if sys.platform == "darwin" else usage.ru_maxrss  # bytes on macOS
    run_child.cpu = usage.ru_utime + usage.ru_stime  # type: ignore[attr-defined]
    return elapsed, proc.returncode, kib, err.decode("utf-8", "replace")


def bench_check(path: str, repeat: int, extra: tuple[str, ...] = ()) -> dict:
    times, rss, cpu = [], [], []
    for _ in range(repeat):
        t, rc, kib, err = run_child(_ptoc_cmd() + ["check", *extra, path])
        if rc != 0:
            raise SystemExit(f"ptoc check {path} failed (exit {rc}):\n{err[:3000]}")
        times.append(t)
        rss.append(kib)
        cpu.append(run_child.cpu)  # type: ignore[attr-defined]
    return {"best_s": min(times), "median_s": statistics.median(times), "peak_rss_kib": max(rss),
            "cpu_s": min(cpu)}


def bench_ast(text: str, path: str, repeat: int) -> dict:
    best = cpu = float("inf")
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        ast.parse(text)
        best = min(best, time.perf_counter() - t0)
        cpu = min(cpu, time.process_time() - c0)
    sub = float("inf")
    code = "import ast, sys; ast.parse(open(sys.argv[1], encoding='utf-8').read())"
    for _ in range(repeat):
        t, rc, _, err = run_child([sys.executable, "-c", code, path])
        if rc != 0:
            raise SystemExit(f"ast.parse subprocess failed: {err[:2000]}")
        sub = min(sub, t)
    return {"inproc_s": best, "inproc_cpu_s": cpu, "subprocess_s": sub}


def bench_version(runs: int = 10) -> float:
    times = []
    for _ in range(runs):
        t, rc, _, err = run_child(_ptoc_cmd() + ["--version"])
        if rc != 0:
            raise SystemExit(f"ptoc --version failed: {err}")
        times.append(t)
    return statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="1000,10000,100000", help="comma-separated line counts")
    ap.add_argument("--repeat", type=int, default=3, help="runs per measurement (best is reported)")
    ap.add_argument("--json", metavar="OUT", help="also write the results as JSON to OUT")
    ap.add_argument("--write-only", metavar="DIR", help="write the generated programs to DIR and exit")
    args = ap.parse_args(argv)
    sizes = [int(s.replace("_", "").replace("k", "000")) for s in args.sizes.split(",") if s.strip()]

    if args.write_only:
        os.makedirs(args.write_only, exist_ok=True)
        for n in sizes:
            p = os.path.join(args.write_only, f"bench_{n}.ir")
            with open(p, "w", encoding="utf-8") as fh:
                fh.write(generate_program(n))
            print(p)
        return 0

    # Warm Lark's grammar cache once so that no measured run pays for building the tables.
    tmp = tempfile.mkdtemp(prefix="ptoc-bench-")
    results: dict = {"sizes": [], "python": sys.version.split()[0]}
    try:
        warm = os.path.join(tmp, "warm.ir")
        with open(warm, "w", encoding="utf-8") as fh:
            fh.write(generate_program(30))
        run_child(_ptoc_cmd() + ["check", warm])

        for n in sizes:
            text = generate_program(n)
            path = os.path.join(tmp, f"bench_{n}.ir")
            with open(path, "w", encoding="utf-8") as fh:
                fh.write(text)
            nlines = text.count("\n")
            chk = bench_check(path, args.repeat)  # as a user runs it: -j as many as the CPUs (up to 8)
            one = bench_check(path, args.repeat, ("-j", "1"))  # in one process
            front = bench_check(path, args.repeat, ("--syntax-only",))
            ref = bench_ast(text, path, args.repeat)
            row = {
                "lines": nlines,
                "bytes": len(text.encode("utf-8")),
                "check_s": chk["best_s"],
                "check_median_s": chk["median_s"],
                "lines_per_s": nlines / chk["best_s"],
                "peak_rss_mib": chk["peak_rss_kib"] / 1024,
                "ast_parse_s": ref["inproc_s"],
                "ratio_vs_ast": chk["best_s"] / ref["inproc_s"],
                "ast_subprocess_s": ref["subprocess_s"],
                "check_cpu_s": chk["cpu_s"],
                "ratio_cpu_vs_ast": chk["cpu_s"] / ref["inproc_cpu_s"],
                "ratio_vs_ast_subprocess": chk["best_s"] / ref["subprocess_s"],
                "check_j1_s": one["best_s"],
                "check_j1_cpu_s": one["cpu_s"],
                "ratio_j1_vs_ast": one["best_s"] / ref["inproc_s"],
                "syntax_only_s": front["best_s"],
                "syntax_only_cpu_s": front["cpu_s"],
                "syntax_only_ratio_vs_ast": front["best_s"] / ref["inproc_s"],
                "syntax_only_ratio_cpu_vs_ast": front["cpu_s"] / ref["inproc_cpu_s"],
                "syntax_only_peak_rss_mib": front["peak_rss_kib"] / 1024,
            }
            results["sizes"].append(row)
            print(f"  measured {nlines} lines: check {row['check_s']:.3f} s", file=sys.stderr)
        results["version_median_s"] = bench_version(10)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    # ---- table
    hdr = (f"{'lines':>8} {'check s':>9} {'lines/s':>10} {'peak MiB':>9} {'ast.parse s':>12} "
           f"{'x ast':>7} {'ast subproc s':>14} {'x subproc':>10} {'check cpu s':>12} {'x ast (cpu)':>12} "
           f"{'syntax-only s':>14} {'x ast':>7} {'check -j1 s':>12} {'x ast':>7}")
    print(hdr)
    print("-" * len(hdr))
    for r in results["sizes"]:
        print(f"{r['lines']:>8} {r['check_s']:>9.3f} {r['lines_per_s']:>10.0f} {r['peak_rss_mib']:>9.1f} "
              f"{r['ast_parse_s']:>12.4f} {r['ratio_vs_ast']:>7.1f} {r['ast_subprocess_s']:>14.3f} "
              f"{r['ratio_vs_ast_subprocess']:>10.1f} {r['check_cpu_s']:>12.3f} {r['ratio_cpu_vs_ast']:>12.1f} "
              f"{r['syntax_only_s']:>14.3f} {r['syntax_only_ratio_vs_ast']:>7.1f} {r['check_j1_s']:>12.3f} "
              f"{r['ratio_j1_vs_ast']:>7.1f}")
    print(f"\nptoc --version: {results['version_median_s'] * 1000:.0f} ms (median of 10)")

    # ---- goals
    by_lines = {}
    for r, n in zip(results["sizes"], sizes):
        by_lines[n] = r
    goals = []
    r10, r100 = by_lines.get(10000), by_lines.get(100000)
    if r10 and r100:
        scale = r100["check_s"] / r10["check_s"]
        goals.append(("linear scaling: 100k lines within 12x of 10k", scale <= 12.0, f"{scale:.1f}x"))
    else:
        goals.append(("linear scaling: 100k lines within 12x of 10k", None, "needs sizes 10000 and 100000"))
    if r10:
        ratio = r10["ratio_vs_ast"]
        goals.append(("check within 2x of ast.parse at 10k lines", ratio <= 2.0,
                      f"{ratio:.1f}x (CPU time: {r10['ratio_cpu_vs_ast']:.1f}x; vs ast.parse in a subprocess: "
                      f"{r10['ratio_vs_ast_subprocess']:.1f}x)"))
        ratio = r10["ratio_j1_vs_ast"]
        goals.append(("check -j 1 (one process) within 2x of ast.parse at 10k lines", ratio <= 2.0,
                      f"{ratio:.1f}x (CPU time {r10['check_j1_cpu_s']:.2f} s)"))
        ratio = r10["syntax_only_ratio_vs_ast"]
        goals.append(("check --syntax-only (the front end alone) within 2x of ast.parse at 10k lines", ratio <= 2.0,
                      f"{ratio:.1f}x (CPU time: {r10['syntax_only_ratio_cpu_vs_ast']:.1f}x)"))
    else:
        goals.append(("check within 2x of ast.parse at 10k lines", None, "needs size 10000"))
    v = results["version_median_s"]
    goals.append(("ptoc --version under 150 ms", v < 0.150, f"{v * 1000:.0f} ms"))
    print("\ngoals:")
    for name, ok, detail in goals:
        mark = "n/a" if ok is None else ("met" if ok else "NOT MET")
        print(f"  [{mark:>7}] {name}: {detail}")
    results["goals"] = [{"goal": g, "met": ok, "detail": d} for g, ok, d in goals]

    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(results, fh, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
