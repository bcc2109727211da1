"""Mutation test: damaged IR is always a diagnostic, never a crash or a hang.

Valid programs (the corpus under tests/corpus/, or a few inline ones while the corpus is small) are
damaged with a fixed seed: tokens deleted, duplicated and swapped, whole lines deleted and duplicated.
The in-process front end must either accept a mutant or raise `CompileError` whose diagnostics all carry
a registered code and a position inside the file, each within a time bound. A sample of mutants also
goes through the real `ptoc check`, which must exit 0 or 1 (agreeing with the in-process result) and
never print a traceback.
"""

from __future__ import annotations

import random
import re
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from ptoc.diagnostics import CODES, CompileError
from ptoc.frontend.parser import parse_program

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "tests" / "corpus"
PTOC = Path(sys.executable).with_name("ptoc")

SEED = 20261129
N_MUTANTS = 480
N_CLI = 30
PER_MUTANT_SECONDS = 5.0  # generous: a mutant takes ~10 ms; this only catches hangs and blow-ups

# Fallback programs for when the corpus is not there yet (each must be valid: see the test below).
INLINE = [
    """\
import pypto.language as pl
@pl.program
class vector_add:
    @pl.function(type=pl.FunctionType.InCore)
    def vadd(self, a: pl.Tensor[[128, 128], pl.FP32], b: pl.Tensor[[128, 128], pl.FP32], out: pl.Out[pl.Tensor[[128, 128], pl.FP32]]) -> pl.Tensor[[128, 128], pl.FP32]:
        for i, (out_iter,) in pl.range(0, 128, 32, init_values=(out,)):
            ta: pl.Tile[[32, 128], pl.FP32, pl.Mem.Vec] = pl.tile.load(a, [i, 0], [32, 128], [32, 128], target_memory=pl.Mem.Vec)
            tb: pl.Tile[[32, 128], pl.FP32, pl.Mem.Vec] = pl.tile.load(b, [i, 0], [32, 128], [32, 128], target_memory=pl.Mem.Vec)
            tc: pl.Tile[[32, 128], pl.FP32, pl.Mem.Vec] = pl.tile.add(ta, tb)
            out_store: pl.Tensor[[128, 128], pl.FP32] = pl.tile.store(tc, [i, 0], out_iter)
            out_next: pl.Tensor[[128, 128], pl.FP32] = pl.yield_(out_store)
        return out_next
    @pl.function(type=pl.FunctionType.Orchestration)
    def main(self, a: pl.Tensor[[128, 128], pl.FP32], b: pl.Tensor[[128, 128], pl.FP32]) -> pl.Tensor[[128, 128], pl.FP32]:
        out: pl.Tensor[[128, 128], pl.FP32] = pl.tensor.create([128, 128], dtype=pl.FP32, layout=pl.TensorLayout.ND)
        result: pl.Tensor[[128, 128], pl.FP32] = self.vadd(a, b, out)
        return result
""",
    """\
import pypto.language as pl
@pl.function
def scalars(n: pl.Scalar[pl.INDEX], flags: pl.Scalar[pl.INT32]) -> pl.Scalar[pl.INDEX]:
    per: pl.Scalar[pl.INDEX] = (n + 7) // 8
    low: pl.Scalar[pl.INT32] = flags & pl.const(255, pl.INT32) | pl.const(256, pl.INT32)
    small: pl.Scalar[pl.BOOL] = per <= 128 and not n >= 4096
    start: pl.Scalar[pl.INDEX] = pl.min(per * 2, n)
    return start
""",
    """\
import pypto.language as pl
@pl.function
def choose(x: pl.Scalar[pl.INDEX]) -> pl.Scalar[pl.INDEX]:
    if x < 4:
        y: pl.Scalar[pl.INDEX] = pl.yield_(x + 1)
    elif x < 8:
        y: pl.Scalar[pl.INDEX] = pl.yield_(x + 2)
    else:
        y: pl.Scalar[pl.INDEX] = pl.yield_(x * 2)
    return y
""",
    """\
import pypto.language as pl
@pl.function
def grow(total: pl.Scalar[pl.INDEX]) -> pl.Scalar[pl.INDEX]:
    for (chunk,) in pl.while_(init_values=(16,)):
        pl.cond(chunk * 8 < total)
        chunk_next: pl.Scalar[pl.INDEX] = pl.yield_(chunk * 2)
    for i, (acc, k) in pl.range(0, 8, 2, init_values=(0, chunk_next)):
        acc_next, k_next = pl.yield_(acc + i, k - 1)
    return acc_next
""",
    """\
# pypto.program: dyn
import pypto.language as pl

M = pl.dynamic("M")

@pl.program
class dyn:
    @pl.function(type=pl.FunctionType.AIV)
    def rows(
        self,
        x: pl.Tensor[[M, 256], pl.FP16],
        y: pl.Out[pl.Tensor[[M, 256], pl.FP16]],
    ) -> pl.Tensor[[M, 256], pl.FP16]:
        n: pl.Scalar[pl.INDEX] = pl.tensor.dim(x, 0)
        for r0, (y_iter,) in pl.range(0, n, 32, init_values=(y,)):
            xt: pl.Tile[[32, 256], pl.FP16, pl.Mem.Vec] = pl.tile.load(
                x, [r0, 0], [32, 256], [32, 256], target_memory=pl.Mem.Vec
            )
            y_store: pl.Tensor[[M, 256], pl.FP16] = pl.tile.store(xt, [r0, 0], y_iter)
            y_next: pl.Tensor[[M, 256], pl.FP16] = pl.yield_(y_store)
        return y_next
""",
]

# Strings, names, numbers, multi-character operators, a newline with its indentation, other blanks,
# any other single character. Joining the tokens gives back the text exactly.
_TOKEN = re.compile(
    r'"(?:[^"\\\n]|\\.)*"|\'(?:[^\'\\\n]|\\.)*\'|#[^\n]*|[A-Za-z_][A-Za-z0-9_]*|\d+(?:\.\d*)?(?:[eE][-+]?\d+)?'
    r"|\*\*|//|<<|>>|->|[=!<>]=|\n[ \t]*|[ \t]+|.",
    re.S,
)


def sources() -> list[tuple[str, str]]:
    files = sorted((CORPUS / "raw").glob("*.ir")) if (CORPUS / "raw").is_dir() else []
    if len(files) < 5:
        return [(f"inline{i}", s) for i, s in enumerate(INLINE)]
    files += sorted((CORPUS / "formatted").glob("*.ir")) if (CORPUS / "formatted").is_dir() else []
    return [(f.relative_to(CORPUS).as_posix(), f.read_text(encoding="utf-8")) for f in files]


def mutate(text: str, rng: random.Random) -> tuple[str, str]:
    """One random damage: (description, new text)."""
    op = rng.choice(("delete_token", "duplicate_token", "swap_tokens", "delete_line", "duplicate_line"))
    if op in ("delete_line", "duplicate_line"):
        lines = text.split("\n")
        i = rng.randrange(len(lines))
        if op == "delete_line":
            del lines[i]
        else:
            lines.insert(i, lines[i])
        return f"{op} {i + 1}", "\n".join(lines)
    toks = _TOKEN.findall(text)
    assert "".join(toks) == text
    solid = [i for i, t in enumerate(toks) if not t.isspace()]
    i = rng.choice(solid)
    if op == "delete_token":
        desc = f"{op} {toks[i]!r}"
        del toks[i]
    elif op == "duplicate_token":
        desc = f"{op} {toks[i]!r}"
        toks.insert(i, toks[i])
    else:
        j = rng.choice(solid)
        desc = f"{op} {toks[i]!r} <-> {toks[j]!r}"
        toks[i], toks[j] = toks[j], toks[i]
    return desc, "".join(toks)


def make_mutants() -> list[tuple[str, str]]:
    rng = random.Random(SEED)
    pool = sources()
    out = []
    for k in range(N_MUTANTS):
        name, text = pool[k % len(pool)]
        descs = []
        for _ in range(rng.choice((1, 1, 1, 2, 3))):
            d, text = mutate(text, rng)
            descs.append(d)
        out.append((f"{name}: {'; '.join(descs)}", text))
    return out


MUTANTS = make_mutants()


class _Hang(Exception):
    pass


def _alarm(_signum, _frame):
    raise _Hang


def check_in_process(text: str) -> bool:
    """True when accepted, False when rejected with well-formed diagnostics. Anything else fails."""
    try:
        parse_program(text, "mutant.ir")
    except CompileError as e:
        assert e.diagnostics, "CompileError without diagnostics"
        last_line = text.count("\n") + 2
        for d in e.diagnostics:
            assert d.code in CODES, d
            assert d.message, d
            s = d.span
            assert s is not None and s.file == "mutant.ir", d
            assert 1 <= s.line <= last_line and s.col >= 1, d
            assert (s.end_line, s.end_col) >= (s.line, s.col), d
        return False
    return True


def test_mutants_are_deterministic_and_varied():
    assert len(MUTANTS) >= 400
    assert make_mutants() == MUTANTS  # fixed seed: the same mutants every run
    assert len({t for _, t in MUTANTS}) >= 0.9 * len(MUTANTS)


def test_inline_fallback_programs_are_valid():
    from ptoc.ir.printer import print_program

    for text in INLINE:
        prog = parse_program(text, "inline.ir")
        assert prog.functions and parse_program(print_program(prog), "printed.ir") == prog


def test_every_mutant_is_accepted_or_diagnosed_in_time():
    # A CPU-time alarm (SIGVTALRM) names the mutant that hangs; it leaves pytest-timeout's SIGALRM alone.
    old = signal.signal(signal.SIGVTALRM, _alarm)
    rejected = 0
    slowest = 0.0
    try:
        for desc, text in MUTANTS:
            signal.setitimer(signal.ITIMER_VIRTUAL, PER_MUTANT_SECONDS * 2)
            t0 = time.perf_counter()
            try:
                ok = check_in_process(text)
            except _Hang:
                pytest.fail(f"mutant hangs ({desc})")
            except AssertionError:
                raise
            except BaseException as e:  # noqa: BLE001 - exactly what this test exists to catch
                pytest.fail(f"mutant crashes the front end with {type(e).__name__}: {e} ({desc})\n{text}")
            finally:
                signal.setitimer(signal.ITIMER_VIRTUAL, 0)
            elapsed = time.perf_counter() - t0
            slowest = max(slowest, elapsed)
            assert elapsed < PER_MUTANT_SECONDS, f"mutant took {elapsed:.1f}s ({desc})"
            rejected += not ok
    finally:
        signal.signal(signal.SIGVTALRM, old)
    # the damage is real: most mutants are rejected
    assert rejected >= len(MUTANTS) // 2, rejected


def test_sample_of_mutants_through_the_ptoc_check_command(tmp_path):
    rng = random.Random(SEED + 1)
    sample = rng.sample(MUTANTS, N_CLI)
    jobs = []
    for k, (desc, text) in enumerate(sample):
        f = tmp_path / f"mutant{k:02d}.ir"
        f.write_text(text, encoding="utf-8")
        jobs.append((desc, text, f))

    def run(job):
        desc, text, f = job
        p = subprocess.run([str(PTOC), "check", str(f)], capture_output=True, text=True, timeout=60)
        return desc, text, p

    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(run, jobs))
    codes = set()
    for desc, text, p in results:
        assert "Traceback" not in p.stderr and "Traceback" not in p.stdout, desc
        assert "internal error" not in p.stderr, (desc, p.stderr)
        assert p.returncode in (0, 1), (desc, p.returncode, p.stderr)
        if not check_in_process(text):  # what the front end rejects, the command rejects too
            assert p.returncode == 1, (desc, p.stderr)
        codes.add(p.returncode)
    assert 1 in codes
