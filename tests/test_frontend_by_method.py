"""The fast front end parses a program's class one group of methods at a time (a long program's Python
syntax tree is far larger than its text); the syntax nodes must be exactly those of one whole parse."""

import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from ptoc.frontend import pyast

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = sorted((ROOT / "examples").glob("*.ir")) + sorted((ROOT / "tests" / "corpus").glob("*/*.ir"))


def _both(text: str, monkeypatch):
    by_method = pyast.translate(text, "t.ir")
    with monkeypatch.context() as m:
        m.setattr(pyast, "_parse_by_method", lambda text, ascii_only: None)
        whole = pyast.translate(text, "t.ir")
    return by_method, whole


def _method(i: int, extra: str = "") -> str:
    return (f"    @pl.function(\n        type=pl.FunctionType.InCore,\n    )\n"
            f"    def k{i}(self, x: pl.Tensor[[16, 16], pl.FP32]{extra}) -> pl.Tensor[[16, 16], pl.FP32]:\n"
            f"        t: pl.Tile[[16, 16], pl.FP32] = pl.load(x, [0, 0], [16, 16])  # ü {i}\n"
            f"        o: pl.Tensor[[16, 16], pl.FP32] = pl.store(t, [0, 0], x)\n"
            f"        return o\n")


def _program(n: int) -> str:
    body = "\n    # between methods, at the members' indentation\n".join(_method(i) for i in range(n))
    return f"import pypto.language as pl\n\n@pl.program\nclass p:\n{body}"


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_every_example_reads_to_the_same_nodes(path, monkeypatch):
    by_method, whole = _both(path.read_text(), monkeypatch)
    assert whole is not None and pickle.dumps(by_method) == pickle.dumps(whole)


def test_many_methods_with_split_decorators_and_non_ascii_comments(monkeypatch):
    text = _program(300)  # several groups of ~1000 lines
    assert pyast._parse_by_method(text, text.isascii()) is not None  # the split path is taken
    by_method, whole = _both(text, monkeypatch)
    assert whole is not None and pickle.dumps(by_method) == pickle.dumps(whole)
    # spans are the text's: the last method's `def` line
    last_def = text.split("\n").index("    def k299(self, x: pl.Tensor[[16, 16], pl.FP32]) -> pl.Tensor[[16, 16], pl.FP32]:")
    assert by_method[-1].a[1][-1].span.line == last_def + 1


def test_a_syntax_error_in_a_late_method_is_reported_at_its_line(tmp_path):
    lines = _program(200).split("\n")
    bad = max(i for i, line in enumerate(lines) if line.startswith("        o: "))
    lines[bad] = lines[bad].replace("pl.store(", "pl.store((")
    f = tmp_path / "bad.ir"
    f.write_text("\n".join(lines))
    r = subprocess.run([sys.executable, "-m", "ptoc.cli", "check", str(f)], capture_output=True, text=True)
    assert r.returncode == 1
    assert f"bad.ir:{bad + 1}:51: error[PTOC-E0001]: '(' was never closed" in r.stderr, r.stderr


@pytest.mark.parametrize("text", [
    'import pypto.language as pl\n\n@pl.program\nclass p:\n    def a(self):\n        s = """x\n    def b(self):\n"""\n',
    "import pypto.language as pl\n\nclass p:\n    pass\n\nclass q:\n    pass\n",
    "import pypto.language as pl\n\nclass p:\n    pass\nx = 1\n",
])
def test_texts_the_split_cannot_read_safely_are_parsed_whole(text):
    assert pyast._parse_by_method(text, text.isascii()) is None


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs Linux's /proc/self/status (VmHWM)")
def test_the_peak_memory_of_reading_a_long_program_is_below_a_whole_parse(tmp_path):
    """Measured in child processes: reading 1500 methods by method needs less memory than Python's whole
    tree of the same text. The peak is the child's own VmHWM (`ru_maxrss` would also count the memory of
    the process it was forked from)."""
    f = tmp_path / "long.ir"
    f.write_text(_program(1500))
    code = ("import sys; from ptoc.frontend import pyast\n"
            "{patch}n = pyast.translate(open(sys.argv[1]).read(), 'long.ir')\n"
            "assert n is not None\n"
            "print([l.split()[1] for l in open('/proc/self/status') if l.startswith('VmHWM:')][0])")

    def peak(patch: str) -> int:
        return int(subprocess.run([sys.executable, "-c", code.format(patch=patch), str(f)],
                                  capture_output=True, text=True, check=True).stdout)

    split, whole = peak(""), peak("pyast._parse_by_method = lambda t, a: None\n")
    assert split < whole, (split, whole)
