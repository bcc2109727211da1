"""Forms PyPTO's parser accepts because of how it combines a value with what the program declares, run
through the real `ptoc` script: a returned value is not compared with the declared return type (only a
value of another kind is rejected here).

Expected outcomes come from PyPTO's parser (python/pypto/language/parser/ast_parser.py: `parse_return`
builds the statement from the value alone), not from ptoc.
"""

import json
import subprocess
import sys
from pathlib import Path

PTOC = Path(sys.executable).parent / "ptoc"


def run(*args) -> subprocess.CompletedProcess:
    p = subprocess.run([str(PTOC), *map(str, args)], capture_output=True, text=True, timeout=120)
    assert "Traceback" not in p.stderr
    return p


def check(tmp_path, text: str) -> tuple[int, list[dict]]:
    f = tmp_path / "k.ir"
    f.write_text(text)
    p = run("check", "--diagnostics", "json", f)
    return p.returncode, [json.loads(line) for line in p.stdout.splitlines()]


def kernel(body: str, ret: str) -> str:
    return f"""\
import pypto.language as pl

@pl.program
class P:
    @pl.function(type=pl.FunctionType.InCore)
    def k(self, a: pl.Tensor[[16, 64], pl.BF16], o: pl.Out[pl.Tensor[[16, 64], pl.BF16]]) -> {ret}:
        t: pl.Tile[[16, 64], pl.BF16] = pl.load(a, [0, 0], [16, 64])
{body}
"""


STORE = "        r: pl.Tensor[[16, 64], pl.BF16] = pl.store(t, [0, 0], o)\n        return r"


def test_returned_tensor_of_another_dtype_is_accepted(tmp_path):
    # the value is BF16, the declaration FP32: PyPTO keeps the statement as written
    code, diags = check(tmp_path, kernel(STORE, "pl.Tensor[[16, 64], pl.FP32]"))
    assert (code, diags) == (0, [])


def test_returned_tensor_of_another_shape_is_accepted(tmp_path):
    code, diags = check(tmp_path, kernel(STORE, "pl.Tensor[[8, 64], pl.BF16]"))
    assert (code, diags) == (0, [])


def test_returned_value_of_another_kind_is_rejected(tmp_path):
    # a tile where a tensor is declared means nothing to a caller
    code, diags = check(tmp_path, kernel("        return t", "pl.Tensor[[16, 64], pl.BF16]"))
    assert code == 1
    (d,) = diags
    assert (d["code"], d["line"]) == ("PTOC-E0105", 8)
    assert "the value is a tile, the annotation says tensor" in d["message"]
