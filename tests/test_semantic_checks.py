"""Wrong programs that must be rejected, through the real `ptoc` script: tile annotations that contradict
the value's TileView, call arguments of the wrong type, programs with nothing to emit, and `check`
agreeing with `compile` on every rejection.

Expected codes, rules and spans come from the programs below (line and column counted by hand) and the
spec (FP4-2, NZ-7, NZ-8, NZ-10, NZ-12, NZ-16); none is computed by ptoc.
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest

PTOC = Path(sys.executable).parent / "ptoc"
ROOT = Path(__file__).resolve().parent.parent


def run(*args) -> subprocess.CompletedProcess:
    p = subprocess.run([str(PTOC), *map(str, args)], capture_output=True, text=True, timeout=120)
    assert "Traceback" not in p.stderr
    return p


def program(name: str, functions: str) -> str:
    return f"import pypto.language as pl\n\n@pl.program\nclass {name}:\n{functions}"


def json_diags(p: subprocess.CompletedProcess) -> list[dict]:
    return [json.loads(line) for line in p.stdout.splitlines()]


# ------------------------------------------------------------------ TileView of annotations

# issue 9: a [64, 64] Mat tile loaded with valid [32, 64], annotated without a TileView (valid = [64, 64])
PARTIAL_LOAD_ND = program("partial_nd", """\
    @pl.function(type=pl.FunctionType.InCore)
    def k(self, w: pl.Tensor[[128, 64], pl.FP16], r: pl.Scalar[pl.INDEX]):
        t: pl.Tile[[64, 64], pl.FP16, pl.Mem.Mat] = pl.tile.load(w, [0, 0], [64, 64], [32, 64], target_memory=pl.Mem.Mat)
""")
# the same mistake on an NZ weight (32 valid rows = two whole fractal rows, c0 = 32 for INT8)
PARTIAL_LOAD_NZ = program("partial_nz", """\
    @pl.function(type=pl.FunctionType.InCore)
    def k(self, w: pl.Tensor[[128, 64], pl.INT8, pl.NZ], r: pl.Scalar[pl.INDEX]):
        t: pl.Tile[[64, 64], pl.INT8, pl.Mem.Mat] = pl.tile.load(w, [0, 0], [64, 64], [32, 64], target_memory=pl.Mem.Mat)
""")


@pytest.mark.parametrize("text, dtype", [(PARTIAL_LOAD_ND, "FP16"), (PARTIAL_LOAD_NZ, "INT8")], ids=["ND", "NZ"])
def test_plain_annotation_keeps_the_loads_valid_shape(tmp_path, text, dtype):
    # PyPTO's parser: an annotation without a TileView is merged with the value's type and keeps its view,
    # so `t` is the [64, 64] tile loaded with 32 valid rows (never 64 valid rows)
    f = tmp_path / "k.ir"
    f.write_text(text)
    assert run("check", f).returncode == 0
    t = _types_of(text)["t"]
    assert [d.value for d in t.shape] == [64, 64] and t.memory == "Mat"
    assert [d.value for d in t.view.valid_shape] == [32, 64]


@pytest.mark.parametrize("text, dtype", [(PARTIAL_LOAD_ND, "FP16"), (PARTIAL_LOAD_NZ, "INT8")], ids=["ND", "NZ"])
def test_written_valid_shape_contradicting_the_load_is_rejected(tmp_path, text, dtype):
    # a TileView that writes valid_shape=[48, 64] for a load of 32 valid rows is a contradiction
    f = tmp_path / "k.ir"
    f.write_text(text.replace(f"pl.{dtype}, pl.Mem.Mat]", f"pl.{dtype}, pl.Mem.Mat, pl.TileView(valid_shape=[48, 64])]"))
    p = run("check", "--diagnostics", "json", f)
    assert p.returncode == 1
    (d,) = json_diags(p)
    assert (d["code"], d["line"], d["column"]) == ("PTOC-E0105", 7, 12)  # the annotation `pl.Tile[...]`
    assert "valid shape is [32, 64], the annotation's is [48, 64]" in d["message"]
    # the hint shows the annotation to write, and the pto-isa TLOAD rule it protects
    assert f"pl.Tile[[64, 64], pl.{dtype}, pl.Mem.Mat, pl.TileView(valid_shape=[32, 64])]" in d["hint"]
    assert "TLOAD" in d["hint"] and "validRow == shape2*shape3" in d["hint"]
    c = run("compile", f, "-o", tmp_path / "k.pto")
    assert c.returncode == 1 and "PTOC-E0105" in c.stderr
    assert sorted(x.name for x in tmp_path.iterdir()) == ["k.ir"]


# issue 16: the dynamic_rows kernel with a plain [32, 64] annotation on a tile whose valid rows are `rows`
DYNAMIC_ROWS = (ROOT / "examples" / "dynamic_rows.ir").read_text()
YT_TYPED = "yt: pl.Tile[[32, 64], pl.FP16, pl.Mem.Vec, pl.TileView(valid_shape=[rows, 64])]"


def _store_partition(pto: str) -> str:
    store = [line for line in pto.splitlines() if "%y_store_pview = pto.partition_view" in line]
    assert len(store) == 1
    return store[0]


def test_plain_annotation_on_dynamic_valid_rows_stores_the_valid_rows(tmp_path):
    # the plain annotation keeps the value's `rows` valid rows (PyPTO's merge), so the store writes a
    # dynamic partition of `rows` rows exactly as the fully typed program does, never 32 full rows
    assert YT_TYPED in DYNAMIC_ROWS
    plain = tmp_path / "plain.ir"
    plain.write_text(DYNAMIC_ROWS.replace(YT_TYPED, "yt: pl.Tile[[32, 64], pl.FP16, pl.Mem.Vec]"))
    good = tmp_path / "good.ir"
    good.write_text(DYNAMIC_ROWS)
    for f in (plain, good):
        assert run("compile", f, "-o", f.with_suffix(".pto")).returncode == 0
        store = _store_partition(f.with_suffix(".pto").read_text())
        assert "sizes = [%rows, %c64_index]" in store and "<?x64xf16>" in store
    # a TileView naming 16 valid rows contradicts `rows` and is rejected where the annotation is
    bad = tmp_path / "bad.ir"
    bad.write_text(DYNAMIC_ROWS.replace(YT_TYPED, YT_TYPED.replace("[rows, 64]", "[16, 64]")))
    p = run("check", bad)
    assert p.returncode == 1
    assert f"{bad}:13:17: error[PTOC-E0105]" in p.stderr and "valid shape is [rows, 64]" in p.stderr


def test_blocked_nz_load_keeps_its_dynamic_valid_rows():
    # the rank-5 load BlockNzTensorViews writes for valid rows `vr` (NZ-4, NZ-10: `vr // 16` fractal rows)
    # is a tile of `vr` valid rows; its type used to count all 256 rows valid, and with the whole TileView
    # compared the pipeline's own annotation [vr, 512] of it would contradict that
    from ptoc.context import CompileContext
    from ptoc.frontend.parser import parse_program
    from ptoc.ir.nodes import Var
    from ptoc.ir.verifier import function_types

    text = program("ragged", """\
    @pl.function(type=pl.FunctionType.InCore)
    def k(self, w: pl.Tensor[[1, 16, 50, 16, 32], pl.INT8, pl.NZ]):
        for o0 in pl.range(0, 800, 256):
            vr: pl.Scalar[pl.INDEX] = pl.min(800 - o0, 256)
            wt = pl.tile.load(w, [0, 0, o0 // 16, 0, 0], [1, 16, 16, 16, 32], [1, 16, vr // 16, 16, 32], target_memory=pl.Mem.Mat)
""")
    ctx = CompileContext(arch="a2a3")
    wt = function_types(parse_program(text, "ragged.ir", ctx=ctx), ctx)["k"]["wt"]
    assert [d.value for d in wt.shape] == [256, 512]
    assert wt.view is not None and wt.view.valid_shape[0] == Var("vr") and wt.view.valid_shape[1].value == 512
    # and the logical program compiles through blocking with its valid rows intact
    logical = text.replace("pl.Tensor[[1, 16, 50, 16, 32], pl.INT8, pl.NZ]", "pl.Tensor[[800, 512], pl.INT8, pl.NZ]")
    logical = logical.replace("[0, 0, o0 // 16, 0, 0], [1, 16, 16, 16, 32], [1, 16, vr // 16, 16, 32]",
                              "[o0, 0], [256, 512], [vr, 512]")
    from ptoc.driver import frontend, lower

    low = lower(frontend(logical, "ragged.ir", ctx), ctx)
    assert low.function_types(ctx)["k"]["wt"].view.valid_shape[0] == Var("vr")


def _types_of(text: str, fn: str = "k"):
    from ptoc.context import CompileContext
    from ptoc.frontend.parser import parse_program
    from ptoc.ir.verifier import function_types

    ctx = CompileContext(arch="a2a3")
    return function_types(parse_program(text, "x.ir", ctx=ctx), ctx)[fn]


def test_plain_annotation_takes_the_values_layout_fields(tmp_path):
    # PyPTO's parser merges an annotation with the value's type: a field the annotation leaves out is the
    # value's. TEXTRACT into Left gives the L0A format blayout=row_major (PyPTO's tile.extract rule), and
    # a plain Left annotation (implicit col_major) keeps it rather than contradicting it.
    text = program("extract_left", """\
    @pl.function(type=pl.FunctionType.InCore)
    def k(self, a: pl.Tensor[[32, 64], pl.FP16]):
        am: pl.Tile[[32, 64], pl.FP16, pl.Mem.Mat] = pl.tile.load(a, [0, 0], [32, 64], target_memory=pl.Mem.Mat)
        al: pl.Tile[[32, 32], pl.FP16, pl.Mem.Left] = pl.tile.extract(am, 0, 32, [32, 32], target_memory=pl.Mem.Left)
""")
    f = tmp_path / "x.ir"
    f.write_text(text)
    assert run("check", f).returncode == 0
    al = _types_of(text)["al"]
    assert al.memory == "Left" and al.view is not None and al.view.blayout == "row_major"
    assert run("fmt", f).stdout.count("pl.Tile[[32, 32], pl.FP16, pl.Mem.Left] = pl.tile.extract") == 1


def test_annotation_chooses_the_layout_of_a_load(tmp_path):
    # a load annotated with an NZ view (col_major blocks of row_major fractals) is an NZ tile
    text = program("nz_load", """\
    @pl.function(type=pl.FunctionType.InCore)
    def k(self, a: pl.Tensor[[64, 64], pl.BF16]):
        t: pl.Tile[[64, 64], pl.BF16, pl.Mem.Vec, pl.TileView(blayout=pl.TileLayout.col_major, slayout=pl.TileLayout.row_major)] = pl.tile.load(a, [0, 0], [64, 64], target_memory=pl.Mem.Vec)
""")
    f = tmp_path / "x.ir"
    f.write_text(text)
    assert run("check", f).returncode == 0
    t = _types_of(text)["t"]
    assert (t.view.blayout, t.view.slayout) == ("col_major", "row_major")


def test_annotation_without_a_memory_space_takes_the_values(tmp_path):
    # PyPTO merges the space the same way: an Acc product annotated without pl.Mem is an Acc tile, so its
    # store into an FP16 tensor is the Acc write-back that converts FP32 on the way out
    text = program("acc_store", """\
    @pl.function(type=pl.FunctionType.InCore)
    def k(self, a: pl.Tensor[[16, 64], pl.FP16], b: pl.Tensor[[64, 32], pl.FP16], o: pl.Out[pl.Tensor[[16, 32], pl.FP16]]) -> pl.Tensor[[16, 32], pl.FP16]:
        l: pl.Tile[[16, 64], pl.FP16] = pl.tile.load(a, [0, 0], [16, 64], target_memory=pl.Mem.Mat)
        r: pl.Tile[[64, 32], pl.FP16] = pl.tile.load(b, [0, 0], [64, 32], target_memory=pl.Mem.Mat)
        c: pl.Tile[[16, 32], pl.FP32] = pl.tile.matmul(l, r)
        s: pl.Tensor[[16, 32], pl.FP16] = pl.tile.store(c, [0, 0], o)
        return s
""")
    t = _types_of(text)
    assert (t["l"].memory, t["r"].memory, t["c"].memory) == ("Mat", "Mat", "Acc")
    f = tmp_path / "x.ir"
    f.write_text(text)
    assert run("check", f).returncode == 0


def test_layout_fields_never_excuse_a_valid_shape_contradiction(tmp_path):
    # the annotation writes an offset and a layout, but still claims the whole tile valid while the value
    # is valid on 32 of 64 rows: that stays a contradiction
    text = program("partial_with_view", """\
    @pl.function(type=pl.FunctionType.InCore)
    def k(self, w: pl.Tensor[[128, 64], pl.FP16]):
        t: pl.Tile[[64, 64], pl.FP16, pl.Mem.Vec, pl.TileView(blayout=pl.TileLayout.col_major)] = pl.tile.load(w, [0, 0], [64, 64], [32, 64], target_memory=pl.Mem.Vec)
""")
    f = tmp_path / "x.ir"
    f.write_text(text)
    p = run("check", "--diagnostics", "json", f)
    (d,) = json_diags(p)
    assert (d["code"], d["line"]) == ("PTOC-E0105", 7)
    assert "valid shape is [32, 64], the annotation's is [64, 64]" in d["message"]


# ------------------------------------------------------------------ call arguments (FP4-2, NZ-16)

FP4_KERNEL = """\
    @pl.function(type=pl.FunctionType.InCore)
    def k(self, src: pl.Tensor[[32, 64], pl.FP4E2M1X2], dst: pl.Out[pl.Tensor[[32, 64], pl.FP4E2M1X2]]) -> pl.Tensor[[32, 64], pl.FP4E2M1X2]:
        t: pl.Tile[[32, 64], pl.FP4E2M1X2, pl.Mem.Vec] = pl.tile.load(src, [0, 0], [32, 64], target_memory=pl.Mem.Vec)
        o: pl.Tensor[[32, 64], pl.FP4E2M1X2] = pl.tile.store(t, [0, 0], dst)
        return o

    @pl.function(type=pl.FunctionType.Orchestration)
    def main(self, x: {arg}, y: pl.Out[pl.Tensor[[32, 64], pl.FP4E2M1X2]]) -> pl.Tensor[[32, 64], pl.FP4E2M1X2]:
        r: pl.Tensor[[32, 64], pl.FP4E2M1X2] = self.k(x, y)
        return r
"""


@pytest.mark.parametrize("arg, why, rule", [
    ("pl.Tensor[[32, 64], pl.FP16]", "the value has dtype FP16, the parameter says FP4E2M1X2", "FP4-2"),
    ("pl.Tensor[[32, 64], pl.FP4E1M2X2]", "the value has dtype FP4E1M2X2, the parameter says FP4E2M1X2", "FP4-2"),
    ("pl.Tensor[[32, 32], pl.FP4E2M1X2]", "dimension 1 of the value is 32, the parameter says 64", None),
    ("pl.Tensor[[32, 64], pl.FP4E2M1X2, pl.NZ]", "the value has layout NZ, the parameter says ND", None),
])
def test_call_argument_of_the_wrong_type_is_rejected(tmp_path, arg, why, rule):
    f = tmp_path / "call.ir"
    f.write_text(program("fp4call", FP4_KERNEL.format(arg=arg)))
    for cmd in (["check", "--arch", "a5", "--diagnostics", "json", f],
                ["compile", "--arch", "a5", "--diagnostics", "json", f, "-o", tmp_path / "call.pto"]):
        p = run(*cmd)
        assert p.returncode == 1
        (d,) = json_diags(p)
        assert (d["code"], d["line"], d["column"]) == ("PTOC-E0120", 13, 55)  # the argument `x`
        assert d["message"] == f"argument 'src' of 'k' contradicts the parameter: {why}"
        assert d["rule"] == rule and "pl.Tensor[[32, 64], pl.FP4E2M1X2]" in d["hint"]
    assert not (tmp_path / "call.pto").exists()


def test_call_argument_of_the_parameters_type_is_accepted(tmp_path):
    f = tmp_path / "call.ir"
    f.write_text(program("fp4call", FP4_KERNEL.format(arg="pl.Tensor[[32, 64], pl.FP4E2M1X2]")))
    assert run("check", "--arch", "a5", f).returncode == 0


SCALAR_CALL = program("scal", """\
    @pl.function(type=pl.FunctionType.InCore)
    def k(self, x: pl.Tensor[[32, 64], pl.FP16], alpha: pl.Scalar[pl.FP16], n: pl.Scalar[pl.INT32], y: pl.Out[pl.Tensor[[32, 64], pl.FP16]]) -> pl.Tensor[[32, 64], pl.FP16]:
        t: pl.Tile[[32, 64], pl.FP16, pl.Mem.Vec] = pl.tile.load(x, [0, 0], [32, 64], target_memory=pl.Mem.Vec)
        u: pl.Tile[[32, 64], pl.FP16, pl.Mem.Vec] = pl.tile.muls(t, alpha)
        o: pl.Tensor[[32, 64], pl.FP16] = pl.tile.store(u, [0, 0], y)
        return o

    @pl.function(type=pl.FunctionType.Orchestration)
    def main(self, x: pl.Tensor[[32, 64], pl.FP16], y: pl.Out[pl.Tensor[[32, 64], pl.FP16]], m: pl.Scalar[pl.FP32]) -> pl.Tensor[[32, 64], pl.FP16]:
        r: pl.Tensor[[32, 64], pl.FP16] = self.k(x, {alpha}, {n}, y)
        return r
""")


@pytest.mark.parametrize("alpha, n, error", [
    ("0.5", "3", None),  # numbers take the scalar parameter's dtype
    ("2", "3", None),  # an integer number is a float parameter's value too
    ("0.5", "3.5", "argument 'n' of 'k' contradicts the parameter: the value has dtype FP32, the parameter says INT32"),
    ("m", "3", "argument 'alpha' of 'k' contradicts the parameter: the value has dtype FP32, the parameter says FP16"),
])
def test_scalar_arguments_numbers_convert_typed_values_do_not(tmp_path, alpha, n, error):
    f = tmp_path / "s.ir"
    f.write_text(SCALAR_CALL.format(alpha=alpha, n=n))
    p = run("check", "--diagnostics", "json", f)
    if error is None:
        assert p.returncode == 0 and json_diags(p) == []  # a quiet success
    else:
        assert p.returncode == 1 and [d["message"] for d in json_diags(p)] == [error]


def test_logical_nz_argument_meets_the_blocked_parameter(tmp_path):
    # NZ-16: after BlockNzTensorViews the kernel's parameter is rank 5 while the orchestration passes the
    # logical [256, 256] tensor; the pipeline's verifier accepts exactly that pair
    text = program("nzcall", """\
    @pl.function(type=pl.FunctionType.InCore)
    def mm(self, x: pl.Tensor[[64, 256], pl.INT8], w: pl.Tensor[[256, 256], pl.INT8, pl.NZ], out: pl.Out[pl.Tensor[[64, 256], pl.INT32]]) -> pl.Tensor[[64, 256], pl.INT32]:
        xm: pl.Tile[[64, 256], pl.INT8, pl.Mem.Mat] = pl.tile.load(x, [0, 0], [64, 256], target_memory=pl.Mem.Mat)
        xl: pl.Tile[[64, 256], pl.INT8, pl.Mem.Left] = pl.tile.move(xm, target_memory=pl.Mem.Left)
        wm: pl.Tile[[256, 256], pl.INT8, pl.Mem.Mat] = pl.tile.load(w, [0, 0], [256, 256], target_memory=pl.Mem.Mat)
        wr: pl.Tile[[256, 256], pl.INT8, pl.Mem.Right] = pl.tile.move(wm, target_memory=pl.Mem.Right)
        acc: pl.Tile[[64, 256], pl.INT32, pl.Mem.Acc] = pl.tile.matmul(xl, wr)
        o: pl.Tensor[[64, 256], pl.INT32] = pl.tile.store(acc, [0, 0], out)
        return o

    @pl.function(type=pl.FunctionType.Orchestration)
    def main(self, x: pl.Tensor[[64, 256], pl.INT8], w: pl.Tensor[[256, 256], pl.INT8, pl.NZ], out: pl.Out[pl.Tensor[[64, 256], pl.INT32]]) -> pl.Tensor[[64, 256], pl.INT32]:
        r: pl.Tensor[[64, 256], pl.INT32] = self.mm(x, w, out)
        return r
""")
    f = tmp_path / "nz.ir"
    f.write_text(text)
    p = run("compile", f, "-o", tmp_path / "nz.pto")
    assert p.returncode == 0, p.stderr
    assert "!pto.tensor_view<?x?x?x?x?xi8>" in (tmp_path / "nz.pto").read_text()  # the blocked rank-5 view
    # an ND weight is not the NZ parameter's logical form: rejected (layout), the relaxation is NZ only
    f.write_text(text.replace("def main(self, x: pl.Tensor[[64, 256], pl.INT8], w: pl.Tensor[[256, 256], pl.INT8, pl.NZ]",
                              "def main(self, x: pl.Tensor[[64, 256], pl.INT8], w: pl.Tensor[[256, 256], pl.INT8]"))
    p = run("check", f)
    assert p.returncode == 1 and "PTOC-E0120" in p.stderr and "layout ND, the parameter says NZ" in p.stderr


# ------------------------------------------------------------------ nothing to emit

ORCHESTRATION_ONLY = program("orch_only", """\
    @pl.function(type=pl.FunctionType.Orchestration)
    def main(self, x: pl.Tensor[[32, 64], pl.FP16]) -> pl.Tensor[[32, 64], pl.FP16]:
        return x
""")


def test_program_with_no_kernel_is_an_error_that_says_why(tmp_path):
    f = tmp_path / "o.ir"
    f.write_text(ORCHESTRATION_ONLY)
    for cmd in (["check", "--diagnostics", "json", f], ["compile", "--diagnostics", "json", f, "-o", tmp_path / "o.pto"]):
        p = run(*cmd)
        assert p.returncode == 1
        (d,) = json_diags(p)
        assert (d["code"], d["line"], d["column"]) == ("PTOC-E0405", 6, 9)  # the function's name
        assert "no kernel" in d["message"] and "main is an orchestration function" in d["message"]
        assert "pl.FunctionType.InCore" in d["hint"]
    assert sorted(x.name for x in tmp_path.iterdir()) == ["o.ir"]


# ------------------------------------------------------------------ check runs what compile runs

PARITY = {
    # NZ-8: a symbolic row offset that is not provably a multiple of 16
    "nz8": ("a2a3", "PTOC-E0348", "NZ-8", """\
    @pl.function(type=pl.FunctionType.InCore)
    def k(self, r0: pl.Scalar[pl.INDEX], w: pl.Tensor[[512, 512], pl.INT8, pl.NZ]):
        wt: pl.Tile[[256, 512], pl.INT8, pl.Mem.Mat] = pl.tile.load(w, [r0, 0], [256, 512], target_memory=pl.Mem.Mat)
"""),
    # NZ-10: shape[-2] = 250 is not a multiple of 16
    "nz10": ("a2a3", "PTOC-E0340", "NZ-10", """\
    @pl.function(type=pl.FunctionType.InCore)
    def k(self, w: pl.Tensor[[250, 512], pl.INT8, pl.NZ]):
        wt: pl.Tile[[240, 512], pl.INT8, pl.Mem.Mat] = pl.tile.load(w, [0, 0], [240, 512], target_memory=pl.Mem.Mat)
"""),
    # NZ-12: R = 65552, TR = 16 over two column blocks: gap 65536 > 65535
    "nz12": ("a2a3", "PTOC-E0370", "NZ-12", """\
    @pl.function(type=pl.FunctionType.InCore)
    def k(self, w: pl.Tensor[[65552, 64], pl.INT8, pl.NZ]):
        wt: pl.Tile[[16, 64], pl.INT8, pl.Mem.Mat] = pl.tile.load(w, [0, 0], [16, 64], target_memory=pl.Mem.Mat)
"""),
    # NZ-7: the Acc -> NZ write-back does not exist on A5
    "nz7_a5": ("a5", "PTOC-E0355", "NZ-7", """\
    @pl.function(type=pl.FunctionType.InCore)
    def k(self, x: pl.Tensor[[64, 32], pl.FP16], w: pl.Tensor[[32, 16], pl.FP16], o: pl.Out[pl.Tensor[[64, 16], pl.FP32, pl.NZ]]) -> pl.Tensor[[64, 16], pl.FP32, pl.NZ]:
        xm: pl.Tile[[64, 32], pl.FP16, pl.Mem.Mat] = pl.tile.load(x, [0, 0], [64, 32], target_memory=pl.Mem.Mat)
        wm: pl.Tile[[32, 16], pl.FP16, pl.Mem.Mat] = pl.tile.load(w, [0, 0], [32, 16], target_memory=pl.Mem.Mat)
        xl: pl.Tile[[64, 32], pl.FP16, pl.Mem.Left] = pl.tile.move(xm, target_memory=pl.Mem.Left)
        wr: pl.Tile[[32, 16], pl.FP16, pl.Mem.Right] = pl.tile.move(wm, target_memory=pl.Mem.Right)
        a: pl.Tile[[64, 16], pl.FP32, pl.Mem.Acc] = pl.tile.matmul(xl, wr)
        r: pl.Tensor[[64, 16], pl.FP32, pl.NZ] = pl.tile.store(a, [0, 0], o)
        return r
"""),
    # on-chip memory: two 192 KiB Vec tiles overflow UB (AllocateMemoryAddr)
    "ub_overflow": ("a2a3", "PTOC-E0390", None, """\
    @pl.function(type=pl.FunctionType.InCore)
    def k(self, x: pl.Tensor[[384, 256], pl.FP32], y: pl.Out[pl.Tensor[[384, 256], pl.FP32]]) -> pl.Tensor[[384, 256], pl.FP32]:
        t: pl.Tile[[384, 256], pl.FP32, pl.Mem.Vec] = pl.tile.load(x, [0, 0], [384, 256], target_memory=pl.Mem.Vec)
        u: pl.Tile[[384, 256], pl.FP32, pl.Mem.Vec] = pl.tile.exp(t)
        o: pl.Tensor[[384, 256], pl.FP32] = pl.tile.store(u, [0, 0], y)
        return o
"""),
}


@pytest.mark.parametrize("case", sorted(PARITY))
def test_check_reports_exactly_what_compile_reports(tmp_path, case):
    arch, code, rule, functions = PARITY[case]
    f = tmp_path / f"{case}.ir"
    f.write_text(program(case, functions))
    checked = run("check", "--arch", arch, f)
    compiled = run("compile", "--arch", arch, f, "-o", tmp_path / "out.pto")
    assert checked.returncode == compiled.returncode == 1
    assert f"error[{code}]" in checked.stderr and (rule is None or f"rule: {rule}" in checked.stderr)
    assert checked.stderr == compiled.stderr and "ok:" not in checked.stderr
    cj = run("check", "--arch", arch, "--diagnostics", "json", f)
    kj = run("compile", "--arch", arch, "--diagnostics", "json", f, "-o", tmp_path / "out.pto")
    assert cj.stdout == kj.stdout and json_diags(cj)[0]["code"] == code
    assert sorted(x.name for x in tmp_path.iterdir()) == [f.name]


def test_check_accepts_every_example_compile_accepts():
    examples = sorted((ROOT / "examples").glob("*.ir"))
    p = run("check", *examples)
    assert p.returncode == 0, p.stderr
    assert f"ok: {len(examples)} files checked, no errors" in p.stderr


def test_check_takes_compiles_ptoas_version_and_reports_nz15_the_same(tmp_path):
    nz = ROOT / "examples" / "nz_weight_int8.ir"
    checked = run("check", "--ptoas-version", "v0.60", nz)
    compiled = run("compile", "--ptoas-version", "v0.60", nz, "-o", tmp_path / "nz.pto")
    assert checked.returncode == compiled.returncode == 1
    assert "error[PTOC-E0410]" in checked.stderr and "rule: NZ-15" in checked.stderr
    assert checked.stderr == compiled.stderr and not (tmp_path / "nz.pto").exists()
    assert run("check", "--ptoas-version", "v0.61", nz).returncode == 0
