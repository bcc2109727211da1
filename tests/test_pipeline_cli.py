"""`ptoc check` on programs as written (names assigned again) and `ptoc passes --pipeline A,B,...`,
run as real subprocesses of the installed console script."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

PTOC = Path(sys.executable).with_name("ptoc")
TRACEBACK = "Traceback (most recent call last)"

# A kernel as a user writes it: `acc` and `out` are updated in place, the loop has no iter_args.
AS_WRITTEN = """\
import pypto.language as pl

@pl.program
class p:
    @pl.function(type=pl.FunctionType.InCore)
    def k(self, x: pl.Tensor[[128, 64], pl.FP32], out: pl.Out[pl.Tensor[[32, 64], pl.FP32]]) -> pl.Tensor[[32, 64], pl.FP32]:
        acc: pl.Tile[[32, 64], pl.FP32, pl.Mem.Vec] = pl.tile.load(x, [0, 0], [32, 64], target_memory=pl.Mem.Vec)
        for i in pl.range(1, 4):
            t: pl.Tile[[32, 64], pl.FP32, pl.Mem.Vec] = pl.tile.load(x, [i * 32, 0], [32, 64], target_memory=pl.Mem.Vec)
            acc = pl.tile.add(acc, t)
        out = pl.tile.store(acc, [0, 0], out)
        return out
"""

# AS_WRITTEN after ConvertToSSA, written out by hand: the loop carries acc; the second values of
# acc and out get new names.
SSA = """\
# pypto.program: p
import pypto.language as pl

@pl.program
class p:
    @pl.function(type=pl.FunctionType.InCore)
    def k(self, x: pl.Tensor[[128, 64], pl.FP32], out: pl.Out[pl.Tensor[[32, 64], pl.FP32]]) -> pl.Tensor[[32, 64], pl.FP32]:
        acc: pl.Tile[[32, 64], pl.FP32, pl.Mem.Vec] = pl.tile.load(x, [0, 0], [32, 64], target_memory=pl.Mem.Vec)
        for i, (acc_1,) in pl.range(1, 4, init_values=(acc,)):
            t: pl.Tile[[32, 64], pl.FP32, pl.Mem.Vec] = pl.tile.load(x, [i * 32, 0], [32, 64], target_memory=pl.Mem.Vec)
            acc_2 = pl.tile.add(acc_1, t)
            acc_3 = pl.yield_(acc_2)
        out_1 = pl.tile.store(acc_3, [0, 0], out)
        return out_1
"""


def run(*args: str) -> subprocess.CompletedProcess:
    p = subprocess.run([str(PTOC), *args], capture_output=True, text=True, timeout=60,
                       env={"PATH": "/usr/bin:/bin", "NO_COLOR": "1"})
    assert TRACEBACK not in p.stderr and TRACEBACK not in p.stdout
    return p


def write(tmp_path: Path, text: str, name: str = "k.ir") -> Path:
    f = tmp_path / name
    f.write_text(text)
    return f


def test_check_accepts_a_program_that_assigns_names_again(tmp_path):
    p = run("check", str(write(tmp_path, AS_WRITTEN)))
    assert p.returncode == 0, p.stderr
    assert "no errors" in p.stderr


def test_a_loop_body_name_used_after_the_loop_is_carried_out_of_it(tmp_path):
    # as Python runs it: after the loop, t is the last iteration's tile; ConvertToSSA makes the loop carry
    # it (starting from acc, the first tile of its type before the loop) and the store reads the result
    bad = AS_WRITTEN.replace("        out = pl.tile.store(acc, [0, 0], out)\n",
                             "        out = pl.tile.store(t, [0, 0], out)\n")
    p = run("check", str(write(tmp_path, bad)))
    assert p.returncode == 0, p.stderr
    p = run("passes", str(write(tmp_path, bad)), "--pipeline", "ConvertToSSA", "--dump-after", "ConvertToSSA")
    assert p.returncode == 0, p.stderr
    assert "for i, (acc_1, t) in pl.range(1, 4, init_values=(acc, acc)):" in p.stdout
    assert "acc_3, t_2 = pl.yield_(acc_2, t_1)" in p.stdout
    assert "out_1 = pl.tile.store(t_2, [0, 0], out)" in p.stdout


def test_check_still_rejects_a_name_no_branch_or_loop_assigns(tmp_path):
    bad = AS_WRITTEN.replace("        out = pl.tile.store(acc, [0, 0], out)\n",
                             "        out = pl.tile.store(u, [0, 0], out)\n")
    p = run("check", str(write(tmp_path, bad)))
    assert p.returncode == 1
    assert "error[PTOC-E0101]: undefined name 'u'" in p.stderr


def test_pipeline_of_one_pass_prints_its_output(tmp_path):
    p = run("passes", str(write(tmp_path, AS_WRITTEN)), "--pipeline", "ConvertToSSA", "--dump-after", "ConvertToSSA")
    assert p.returncode == 0, p.stderr
    assert p.stdout == SSA


def test_pipeline_runs_exactly_the_chosen_passes_with_numbered_dumps(tmp_path):
    out = tmp_path / "dumps"
    p = run("passes", str(write(tmp_path, AS_WRITTEN)), "--pipeline", "ConvertToSSA,FlattenTileNdTo2D",
            "--dump-after", "all", "--dump-dir", str(out))
    assert p.returncode == 0, p.stderr
    assert sorted(f.name for f in out.iterdir()) == [
        "00_frontend.ir", "01_after_ConvertToSSA.ir", "02_after_FlattenTileNdTo2D.ir"]
    assert (out / "01_after_ConvertToSSA.ir").read_text() == SSA


def test_pipeline_on_ssa_input_can_start_at_any_pass(tmp_path):
    f = write(tmp_path, SSA)
    p = run("passes", str(f), "--pipeline", "FlattenTileNdTo2D", "--dump-after", "FlattenTileNdTo2D")
    assert p.returncode == 0, p.stderr
    assert p.stdout == SSA  # 2-D tiles already: nothing to flatten


def test_pipeline_needing_a_property_the_input_lacks_is_an_input_error(tmp_path):
    p = run("passes", str(write(tmp_path, AS_WRITTEN)), "--pipeline", "FlattenTileNdTo2D")
    assert p.returncode == 1
    assert "error[PTOC-E0290]: pass FlattenTileNdTo2D needs the IR property 'ssa'" in p.stderr


def test_pipeline_with_an_unknown_pass_is_a_usage_error(tmp_path):
    p = run("passes", str(write(tmp_path, AS_WRITTEN)), "--pipeline", "ConvertToSSA,NoSuchPass")
    assert p.returncode == 2
    assert "unknown pass 'NoSuchPass'" in p.stderr


def test_the_pipeline_list_starts_with_the_passes_that_take_the_program_as_written():
    p = run("passes", "--list")
    assert p.returncode == 0
    rows = [line.split()[:3] for line in p.stdout.splitlines() if line.strip()]
    assert rows[:4] == [["1", "ssa", "InlineFunctions"], ["2", "ssa", "UnrollLoops"],
                        ["3", "ssa", "CtrlFlowTransform"], ["4", "ssa", "ConvertToSSA"]]


def test_a_program_as_written_computes_the_same_through_every_pass_and_the_emitted_pto(tmp_path):
    p = run("passes", str(write(tmp_path, AS_WRITTEN)), "--validate")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "ConvertToSSA                 ok" in p.stdout
    assert "every stage agrees with the front end" in p.stdout


def test_the_loop_carried_sum_is_the_sum_of_the_four_row_blocks(tmp_path):
    import numpy as np

    x = np.random.default_rng(5).standard_normal((128, 64)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    p = run("run", str(write(tmp_path, AS_WRITTEN)), "--input", f"x={tmp_path / 'x.npy'}",
            "--output-dir", str(tmp_path / "o"))
    assert p.returncode == 0, p.stderr
    want = ((x[0:32] + x[32:64]) + x[64:96]) + x[96:128]  # acc = block 0, then += blocks 1..3 in order
    np.testing.assert_array_equal(np.load(tmp_path / "o" / "out.npy"), want)
