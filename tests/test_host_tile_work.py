"""Tile work that no pass puts into a kernel is an error (PTOC-E0406), never silently left out of the output.

Host functions (orchestration, Group, Spmd) only launch kernels and the `.pto` module holds kernels only.
Corpus 17 writes tile ops directly in a `with pl.spmd(4):` scope and in a `with pl.cluster():` scope; ptoc
outlined those scopes into an Spmd and a Group function with the tile ops inside, and compiled them to a
module without that work (exit 0, the two results never computed). The spmd body reads the block index, so
it is now the per-block kernel, as in PyPTO; the cluster's work is an error.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PTOC = Path(sys.executable).with_name("ptoc")
CORPUS_17 = ROOT / "tests" / "corpus" / "raw" / "17_scopes_preoutline.ir"

KERNEL = """\
    @pl.function(type=pl.FunctionType.InCore)
    def k(self, x: pl.Tensor[[32, 64], pl.FP32], y: pl.Out[pl.Tensor[[32, 64], pl.FP32]]) -> pl.Tensor[[32, 64], pl.FP32]:
        t: pl.Tile[[32, 64], pl.FP32, pl.Mem.Vec] = pl.tile.load(x, [0, 0], [32, 64], target_memory=pl.Mem.Vec)
        y_1: pl.Tensor[[32, 64], pl.FP32] = pl.tile.store(t, [0, 0], y)
        return y_1
"""


def host(kind: str) -> str:
    """A kernel `k` and a host function `main` of type `kind` that loads, exponentiates and stores itself."""
    return ("import pypto.language as pl\n@pl.program\nclass p:\n" + KERNEL + f"""\
    @pl.function(type=pl.FunctionType.{kind})
    def main(self, a: pl.Tensor[[32, 64], pl.FP32], out: pl.Out[pl.Tensor[[32, 64], pl.FP32]]) -> pl.Tensor[[32, 64], pl.FP32]:
        t: pl.Tile[[32, 64], pl.FP32, pl.Mem.Vec] = pl.tile.load(a, [0, 0], [32, 64], target_memory=pl.Mem.Vec)
        u: pl.Tile[[32, 64], pl.FP32, pl.Mem.Vec] = pl.tile.exp(t)
        out_1: pl.Tensor[[32, 64], pl.FP32] = pl.tile.store(u, [0, 0], out)
        out_2: pl.Tensor[[32, 64], pl.FP32] = self.k(out_1, out)
        return out_2
""")


def ptoc(*args) -> subprocess.CompletedProcess:
    p = subprocess.run([str(PTOC), *map(str, args)], capture_output=True, text=True, timeout=120)
    assert "Traceback" not in p.stderr
    return p


def diags(p: subprocess.CompletedProcess) -> list[dict]:
    return [json.loads(line) for line in p.stdout.splitlines() if line.strip()]


def test_tile_ops_in_each_kind_of_host_function_are_an_error_at_the_first_op(tmp_path):
    for kind, words in (("Orchestration", "an orchestration function"), ("Group", "a Group function"),
                        ("Spmd", "an Spmd launcher")):
        src = tmp_path / f"{kind}.ir"
        src.write_text(host(kind))
        out = tmp_path / f"{kind}.pto"
        p = ptoc("compile", src, "-o", out, "--diagnostics", "json")
        assert p.returncode == 1, (kind, p.stderr)
        (d,) = [d for d in diags(p) if d["severity"] == "error"]
        assert d["code"] == "PTOC-E0406"
        assert d["line"] == 11 and d["column"] == 53  # the pl.tile.load of `main`, line 11 of the program
        assert f"tile.load runs in main, {words}" in d["message"]
        assert "pl.at(level=pl.Level.CORE_GROUP)" in d["hint"]
        assert not out.exists() and not out.with_suffix(".h").exists()  # nothing written


def test_corpus_17_reports_the_cluster_scope_whose_tile_work_has_no_kernel(tmp_path):
    p = ptoc("check", CORPUS_17, "--diagnostics", "json")
    assert p.returncode == 1
    errors = [(d["code"], d["line"]) for d in diags(p) if d["severity"] == "error"]
    # line 33: the first tile op of `with pl.cluster():`, which holds no `pl.at(level=CORE_GROUP)` region.
    # (Its inline `with pl.spmd(4):` body, line 26, reads the block index: that body becomes a kernel.)
    assert errors == [("PTOC-E0406", 33)]


INLINE_SPMD = """\
import pypto.language as pl
@pl.program
class p:
    @pl.function(type=pl.FunctionType.Orchestration)
    def main(self, a: pl.Tensor[[128, 64], pl.FP32], out: pl.Out[pl.Tensor[[128, 64], pl.FP32]]) -> pl.Tensor[[128, 64], pl.FP32]:
        with pl.spmd(4):
            b: pl.Scalar[pl.INDEX] = pl.tile.get_block_idx()
            r: pl.Scalar[pl.INDEX] = b * 32
            t: pl.Tile[[32, 64], pl.FP32, pl.Mem.Vec] = pl.tile.load(a, [r, 0], [32, 64], target_memory=pl.Mem.Vec)
            u: pl.Tile[[32, 64], pl.FP32, pl.Mem.Vec] = pl.tile.exp(t)
            out_1: pl.Tensor[[128, 64], pl.FP32] = pl.tile.store(u, [r, 0], out)
        return out_1
"""


def test_an_inline_spmd_body_that_reads_the_block_index_becomes_the_per_block_kernel(tmp_path):
    """PyPTO's parser wraps a `with pl.spmd(n):` body that calls get_block_idx() in a kernel scope, as for
    `for b in pl.spmd(n):`; the launch runs that kernel on n blocks, each block its own 32 rows."""
    src = tmp_path / "inline.ir"
    src.write_text(INLINE_SPMD)
    out = tmp_path / "inline.pto"
    p = ptoc("compile", src, "-o", out)
    assert p.returncode == 0, p.stderr
    assert [ln.split("(")[0].strip() for ln in out.read_text().splitlines() if "func.func @" in ln] == \
        ["func.func @main_incore_0"]
    manifest = json.loads(out.with_suffix(".kernels.json").read_text())
    assert [k["name"] for k in manifest["kernels"]] == ["main_incore_0"]
    v = ptoc("passes", src, "--validate")
    assert v.returncode == 0, v.stdout + v.stderr
    (row,) = [ln for ln in v.stdout.splitlines() if ln.strip().startswith(".pto (emitted)")]
    assert row.split("kernels run: ")[1].split(", ") == ["main_incore_0"] * 4  # one run per block
    # the same body without the block index would run the same work on every block: no kernel, an error
    same = tmp_path / "same.ir"
    same.write_text(INLINE_SPMD.replace("pl.tile.get_block_idx()", "0"))
    q = ptoc("check", same, "--diagnostics", "json")
    assert q.returncode == 1 and [d["code"] for d in diags(q) if d["severity"] == "error"] == ["PTOC-E0406"]


def test_validate_names_the_missing_kernels_instead_of_agreeing(tmp_path):
    """The .pto row of --validate ran the host function's tile ops on the reference interpreter and agreed
    with the front end; it now fails with the emitter's reason. (Corpus 17 also ended in an internal error
    here: its Group ran on the interpreter before OutlineIncoreScopes, with no member kernel to launch.)"""
    p = ptoc("passes", CORPUS_17, "--validate")
    assert p.returncode == 1, p.stdout + p.stderr
    assert "internal error" not in p.stderr
    rows = [ln for ln in p.stdout.splitlines() if ln.strip().startswith(".pto (emitted)")]
    assert rows and all("DIFFERS" in r and "would not be emitted" in r for r in rows)
    # every pass before emission agrees with the front end: the interpreter runs the un-outlined Group body
    passes = [ln.split() for ln in p.stdout.splitlines()
              if ln.startswith("  ") and ln.split()[0] in ("OutlineClusterScopes", "ExpandMixedKernel")]
    assert len(passes) == 4 and all(row[1] == "ok" for row in passes)  # two reports (scale_block, main) x two


def test_the_same_work_inside_a_core_group_region_compiles(tmp_path):
    src = tmp_path / "ok.ir"
    text = host("Orchestration").replace(
        "        t: pl.Tile[[32, 64], pl.FP32, pl.Mem.Vec] = pl.tile.load(a,",
        "        with pl.at(level=pl.Level.CORE_GROUP):\n"
        "            t: pl.Tile[[32, 64], pl.FP32, pl.Mem.Vec] = pl.tile.load(a,").replace(
        "        u: pl.Tile", "            u: pl.Tile").replace("        out_1: pl.Tensor", "            out_1: pl.Tensor")
    src.write_text(text)
    p = ptoc("compile", src, "-o", tmp_path / "ok.pto")
    assert p.returncode == 0, p.stderr
    funcs = [ln for ln in (tmp_path / "ok.pto").read_text().splitlines() if "func.func @" in ln]
    assert len(funcs) == 2  # k and the outlined region
    v = ptoc("passes", src, "--validate")
    assert v.returncode == 0 and "every stage agrees with the front end" in v.stdout


def test_corpus_17_with_the_hint_applied_reaches_memory_planning_and_its_error_names_the_kernel(tmp_path):
    """The cluster body inside `with pl.at(level=pl.Level.CORE_GROUP):`, as the hint says, is a cube + vector
    kernel; its 128 x 128 FP32 hand-over needs a 512 KiB ring that Vec (192 KiB) cannot hold: PTOC-E0620,
    located at the kernel's scope (the ring is made by the compiler, so it has no line of its own)."""
    lines = CORPUS_17.read_text().splitlines()
    at = lines.index("        with pl.cluster():")
    ret = next(i for i in range(at + 1, len(lines)) if not lines[i].startswith("            "))
    fixed = lines[:at + 1] + ["            with pl.at(level=pl.Level.CORE_GROUP):"] + \
        ["    " + ln for ln in lines[at + 1:ret]] + lines[ret:]
    src = tmp_path / "fixed.ir"
    src.write_text("\n".join(fixed) + "\n")
    p = ptoc("check", src, "--diagnostics", "json")
    assert p.returncode == 1
    (d,) = [d for d in diags(p) if d["severity"] == "error"]
    assert d["code"] == "PTOC-E0620" and "524288 bytes" in d["message"]
    assert (d["line"], d["column"]) == (at + 2, 13)  # the `with pl.at(...)` line just added
