"""The memory passes' fast paths against the general forms they stand for, on real programs (the examples
and the corpus): each fast path is wrapped to compute the general answer too, and the two must agree."""

from pathlib import Path

from ptoc.context import CompileContext
from ptoc.diagnostics import CompileError
from ptoc.driver import frontend, lower

ROOT = Path(__file__).resolve().parents[2]
PROGRAMS = sorted((ROOT / "examples").glob("*.ir")) + sorted((ROOT / "tests" / "corpus" / "raw").glob("*.ir"))


def _lower_all() -> int:
    """Lower every program (a program with user errors stops where they are found); how many lowered."""
    done = 0
    for path in PROGRAMS:
        ctx = CompileContext()
        try:
            lower(frontend(path.read_text(), str(path), ctx), ctx)
            done += 1
        except CompileError:
            pass
    return done


def test_address_rewrite_of_the_top_level_matches_the_full_walk(monkeypatch):
    import ptoc.passes.AllocateMemoryAddr as mod

    fast = mod._with_addrs_top
    seen = []

    def both(body, buffers, bases):
        out = fast(body, buffers, bases)
        assert out == mod._with_addrs(body, buffers, bases)
        seen.append(len(buffers) + len(bases))
        return out

    monkeypatch.setattr(mod, "_with_addrs_top", both)
    assert _lower_all() > 10
    assert len(seen) > 20 and sum(seen) > 100  # many kernels, most with several buffers
