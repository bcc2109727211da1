"""Unit tests of the canonical printer (pypto-ir-text.md).

Expected texts follow Python's grammar and the spec, not the printer's code: every operator
expression is also checked against CPython's own parser (`ast.parse`) so that the parentheses the
printer writes give exactly the tree that was printed, and every printed program must read back
through ptoc's front end as the same IR.
"""

from __future__ import annotations

import ast

import pytest

from ptoc.frontend.parser import parse_program
from ptoc.ir import dtypes as dt
from ptoc.ir.nodes import (
    Abs,
    AssignStmt,
    BinOp,
    Call,
    Cast,
    ConstBool,
    ConstFloat,
    ConstInt,
    DictExpr,
    DTypeLit,
    EnumLit,
    EvalStmt,
    ForStmt,
    Function,
    GetItem,
    IfStmt,
    ListExpr,
    MemRef,
    MinMax,
    NoneLit,
    Param,
    PassStmt,
    Program,
    PtrType,
    ReturnStmt,
    ScalarType,
    ScopeStmt,
    StrLit,
    TensorType,
    TensorView,
    TileType,
    TileView,
    TupleExpr,
    TupleType,
    UnaryOp,
    Var,
    WhileStmt,
    YieldStmt,
)
from ptoc.ir.printer import print_expr, print_program, print_type

a, b, c, d, x = (Var(n) for n in "abcdx")


def I(v: int) -> ConstInt:  # noqa: E743 - a bare INDEX literal
    return ConstInt(v, dt.INDEX)


def F(v: float) -> ConstFloat:
    return ConstFloat(v, dt.FP32)


def B(op, lhs, rhs) -> BinOp:
    return BinOp(op, lhs, rhs)


def U(op, e) -> UnaryOp:
    return UnaryOp(op, e)


# ----------------------------------------------------------------------------------------------
# A reference reading of Python's own AST, to check that the printed parentheses are right
# ----------------------------------------------------------------------------------------------

_AST_BIN = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%",
            ast.Pow: "**", ast.LShift: "<<", ast.RShift: ">>", ast.BitAnd: "&", ast.BitOr: "|",
            ast.BitXor: "^"}
_AST_CMP = {ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">="}


def shape_of_python(node: ast.AST):
    """The operator tree CPython reads, as nested tuples (negative literals folded like ptoc does)."""
    if isinstance(node, ast.Expression):
        return shape_of_python(node.body)
    if isinstance(node, ast.BinOp):
        return (_AST_BIN[type(node.op)], shape_of_python(node.left), shape_of_python(node.right))
    if isinstance(node, ast.BoolOp):
        op = "and" if isinstance(node.op, ast.And) else "or"
        out = shape_of_python(node.values[0])
        for v in node.values[1:]:
            out = (op, out, shape_of_python(v))
        return out
    if isinstance(node, ast.Compare):
        assert len(node.ops) == 1, "a chained comparison was printed"
        return (_AST_CMP[type(node.ops[0])], shape_of_python(node.left), shape_of_python(node.comparators[0]))
    if isinstance(node, ast.UnaryOp):
        if isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant) \
                and node.operand.value is not True and node.operand.value is not False \
                and not _parenthesized_literal(node):
            return ("lit", -node.operand.value)
        op = {ast.USub: "-", ast.Invert: "~", ast.Not: "not", ast.UAdd: "+"}[type(node.op)]
        return (op, shape_of_python(node.operand))
    if isinstance(node, ast.Constant):
        return ("lit", node.value)
    if isinstance(node, ast.Name):
        return ("name", node.id)
    if isinstance(node, ast.Call):
        return ("call", ast.unparse(node.func), tuple(shape_of_python(a) for a in node.args),
                tuple((k.arg, shape_of_python(k.value)) for k in node.keywords))
    if isinstance(node, ast.Attribute):
        return ("attr", ast.unparse(node))
    if isinstance(node, (ast.List, ast.Tuple)):
        return ("list" if isinstance(node, ast.List) else "tuple", tuple(shape_of_python(x) for x in node.elts))
    if isinstance(node, ast.Dict):
        return ("dict", tuple((shape_of_python(k), shape_of_python(v)) for k, v in zip(node.keys, node.values)))
    if isinstance(node, ast.Subscript):
        return ("getitem", shape_of_python(node.value), shape_of_python(node.slice))
    raise AssertionError(f"unexpected node {ast.dump(node)}")


_SOURCE: list[str] = [""]


def _parenthesized_literal(node: ast.UnaryOp) -> bool:
    # `-(1)` is a negation of a literal, `-1` a negative literal (pypto-ir-text.md: bare literals).
    seg = _SOURCE[0][node.operand.col_offset - 1: node.operand.col_offset] if node.operand.col_offset else ""
    return seg == "("


def shape_of_ir(e):
    if isinstance(e, BinOp):
        return (e.op, shape_of_ir(e.lhs), shape_of_ir(e.rhs))
    if isinstance(e, UnaryOp):
        return (e.op, shape_of_ir(e.operand))
    if isinstance(e, (ConstInt, ConstFloat)) and e.dtype in (dt.INDEX, dt.FP32):
        return ("lit", e.value)
    if isinstance(e, ConstBool):
        return ("lit", e.value)
    if isinstance(e, Var):
        return ("name", e.name)
    if isinstance(e, GetItem):
        return ("getitem", shape_of_ir(e.value), shape_of_ir(e.index))
    if isinstance(e, (ConstInt, ConstFloat)):
        return ("call", "pl.const", (("lit", e.value), ("attr", f"pl.{e.dtype.name}")), ())
    if isinstance(e, Call):
        callee = f"self.{e.op}" if e.kind == "func" else f"pl.{e.op}"
        return ("call", callee, tuple(shape_of_ir(a) for a in e.args),
                tuple((k, shape_of_ir(v)) for k, v in e.kwargs))
    if isinstance(e, MinMax):
        return ("call", f"pl.{e.op}", (shape_of_ir(e.lhs), shape_of_ir(e.rhs)), ())
    if isinstance(e, Abs):
        return ("call", "abs", (shape_of_ir(e.operand),), ())
    if isinstance(e, Cast):
        return ("call", "pl.cast", (shape_of_ir(e.operand), ("attr", f"pl.{e.dtype.name}")), ())
    if isinstance(e, DTypeLit):
        return ("attr", f"pl.{e.dtype.name}")
    if isinstance(e, EnumLit):
        return ("attr", f"pl.{e.family}.{e.member}")
    if isinstance(e, (StrLit, NoneLit)):
        return ("lit", getattr(e, "value", None))
    if isinstance(e, (ListExpr, TupleExpr)):
        return ("list" if isinstance(e, ListExpr) else "tuple", tuple(shape_of_ir(x) for x in e.items))
    if isinstance(e, DictExpr):
        return ("dict", tuple((shape_of_ir(k), shape_of_ir(v)) for k, v in e.items))
    raise AssertionError(f"no shape for {type(e).__name__}")


def python_agrees(e) -> bool:
    text = print_expr(e)
    _SOURCE[0] = text
    return shape_of_python(ast.parse(text, mode="eval")) == shape_of_ir(e)


def reparse_expr(e):
    """Print `e` as the value of an assignment in a tiny program, parse it back, return the value."""
    text = (
        "import pypto.language as pl\n"
        "@pl.function\n"
        "def f(a: pl.Scalar[pl.INDEX], b: pl.Scalar[pl.INDEX], c: pl.Scalar[pl.INDEX], d: pl.Scalar[pl.INDEX],"
        " x: pl.Scalar[pl.INDEX]):\n"
        f"    r = {print_expr(e)}\n"
        "    return r\n"
    )
    prog = parse_program(text, verify=False)
    return prog.functions[0].body[0].value


# ----------------------------------------------------------------------------------------------
# Operator precedence and parentheses
# ----------------------------------------------------------------------------------------------

PRECEDENCE_CASES = [
    (B("*", B("+", a, b), c), "(a + b) * c"),
    (B("+", a, B("*", b, c)), "a + b * c"),
    (B("-", a, B("-", b, c)), "a - (b - c)"),
    (B("-", B("-", a, b), c), "a - b - c"),
    (B("/", a, B("*", b, c)), "a / (b * c)"),
    (B("//", B("*", a, b), c), "a * b // c"),
    (B("%", a, B("//", b, c)), "a % (b // c)"),
    (U("-", B("**", x, I(2))), "-x ** 2"),
    (B("**", U("-", x), I(2)), "(-x) ** 2"),
    (B("**", I(2), I(-1)), "2 ** -1"),
    (B("**", I(2), U("-", x)), "2 ** -x"),
    (B("**", a, B("**", b, c)), "a ** b ** c"),
    (B("**", B("**", a, b), c), "(a ** b) ** c"),
    (B("**", I(-1), I(2)), "(-1) ** 2"),
    (U("not", B("and", a, b)), "not (a and b)"),
    (B("and", U("not", a), b), "not a and b"),
    (U("not", B("==", a, b)), "not a == b"),
    (B("==", U("not", a), b), "(not a) == b"),
    (B("<", B("<", a, b), c), "(a < b) < c"),
    (B("==", a, B("==", b, c)), "a == (b == c)"),
    (B("<", a, B("+", b, c)), "a < b + c"),
    (B("and", B("<", a, b), B(">=", c, d)), "a < b and c >= d"),
    (B("or", a, B("and", b, c)), "a or b and c"),
    (B("and", B("or", a, b), c), "(a or b) and c"),
    (B("or", a, B("or", b, c)), "a or (b or c)"),
    (B("or", B("or", a, b), c), "a or b or c"),
    (B("<<", a, B("+", b, I(1))), "a << b + 1"),
    (B("+", B("<<", a, I(2)), I(1)), "(a << 2) + 1"),
    (B("|", B("&", a, b), B("^", c, d)), "a & b | c ^ d"),
    (B("&", B("|", a, b), c), "(a | b) & c"),
    (B("^", a, B("|", b, c)), "a ^ (b | c)"),
    (B(">>", a, B("&", b, c)), "a >> (b & c)"),
    (U("-", B("+", a, b)), "-(a + b)"),
    (U("-", U("-", a)), "-(-a)"),
    (U("~", U("-", a)), "~(-a)"),
    (U("not", U("not", a)), "not not a"),
    (U("-", B("<", a, b)), "-(a < b)"),
    (B("*", U("-", a), b), "-a * b"),
    (B("-", a, I(-3)), "a - -3"),
    (B("*", I(-1), a), "-1 * a"),
    (B("+", a, F(-0.5)), "a + -0.5"),
    (U("-", I(1)), "-(1)"),
    (GetItem(B("+", a, b), I(0)), "(a + b)[0]"),
    (MinMax("max", B("+", a, b), MinMax("min", c, I(-4))), "pl.max(a + b, pl.min(c, -4))"),
    (Abs(U("-", a)), "abs(-a)"),
]


@pytest.mark.parametrize("expr,text", PRECEDENCE_CASES, ids=[t for _, t in PRECEDENCE_CASES])
def test_operator_parentheses(expr, text):
    assert print_expr(expr) == text
    assert python_agrees(expr), "CPython reads the printed text as a different tree"
    assert reparse_expr(expr) == expr


def test_comparisons_are_never_chained():
    for op1 in ("<", "<=", "==", "!=", ">", ">="):
        for op2 in ("<", ">=", "=="):
            for e in (B(op1, B(op2, a, b), c), B(op1, a, B(op2, b, c))):
                text = print_expr(e)
                node = ast.parse(text, mode="eval").body
                assert isinstance(node, ast.Compare) and len(node.ops) == 1, text
                assert reparse_expr(e) == e


# ----------------------------------------------------------------------------------------------
# Constants
# ----------------------------------------------------------------------------------------------

CONST_CASES = [
    (I(7), "7"),
    (I(-7), "-7"),
    (I(0), "0"),
    (F(0.25), "0.25"),
    (F(-1.5), "-1.5"),
    (F(1e-05), "1e-05"),
    (F(3.4028234663852886e38), "3.4028234663852886e+38"),
    (ConstInt(5, dt.INT64), "pl.const(5, pl.INT64)"),
    (ConstInt(-15, dt.INT16), "pl.const(-15, pl.INT16)"),
    (ConstInt(1024, dt.BY_NAME["UINT64"]), "pl.const(1024, pl.UINT64)"),
    (ConstInt(3, dt.INT8), "pl.const(3, pl.INT8)"),
    (ConstFloat(1.0, dt.FP16), "pl.const(1.0, pl.FP16)"),
    (ConstFloat(-2.5, dt.BF16), "pl.const(-2.5, pl.BF16)"),
    (ConstFloat(0.5, dt.BY_NAME["FP8E4M3FN"]), "pl.const(0.5, pl.FP8E4M3FN)"),
    (ConstBool(True), "True"),
    (ConstBool(False), "False"),
    (U("-", ConstInt(5, dt.INT64)), "-pl.const(5, pl.INT64)"),
    (B("*", ConstInt(5, dt.INT64), Cast(a, dt.INT64)), "pl.const(5, pl.INT64) * pl.cast(a, pl.INT64)"),
    (StrLit("round"), '"round"'),
    (StrLit('say "hi"\\\n'), '"say \\"hi\\"\\\\\\n"'),
    (DTypeLit(dt.FP4E2M1X2), "pl.FP4E2M1X2"),
    (EnumLit("Mem", "Vec"), "pl.Mem.Vec"),
    (ListExpr((I(0), I(-1), a)), "[0, -1, a]"),
    (TupleExpr((a,)), "(a,)"),
    (TupleExpr(()), "()"),
    (DictExpr(((StrLit("k"), ConstBool(True)),)), '{"k": True}'),
]


@pytest.mark.parametrize("expr,text", CONST_CASES, ids=[t for _, t in CONST_CASES])
def test_constants_and_literals(expr, text):
    assert print_expr(expr) == text
    assert reparse_expr(expr) == expr


def test_control_characters_in_strings_read_back():
    s = StrLit("tab\tcr\rbell\x07del\x7f é")
    text = print_expr(s)
    assert "\t" not in text and "\r" not in text and "\x07" not in text
    assert ast.literal_eval(text) == s.value
    assert reparse_expr(s) == s


def test_op_calls_with_kwargs_and_attrs():
    call = Call("tile.load", (a, ListExpr((I(0), I(0))), ListExpr((I(64), I(64)))),
                (("target_memory", EnumLit("Mem", "Vec")),
                 ("attrs", DictExpr(((StrLit("k"), I(1)),)))))
    assert print_expr(call) == 'pl.tile.load(a, [0, 0], [64, 64], target_memory=pl.Mem.Vec, attrs={"k": 1})'
    assert print_expr(Call("kernel", (a, b), kind="func")) == "self.kernel(a, b)"
    assert print_expr(Call("system.bar_v")) == "pl.system.bar_v()"
    assert print_expr(Call("tile.and_", (a, b))) == "pl.tile.and_(a, b)"


# ----------------------------------------------------------------------------------------------
# Types
# ----------------------------------------------------------------------------------------------

def test_scalar_ptr_tuple_types():
    assert print_type(ScalarType(dt.INDEX)) == "pl.Scalar[pl.INDEX]"
    assert print_type(ScalarType(dt.FP32)) == "pl.Scalar[pl.FP32]"
    assert print_type(PtrType()) == "pl.Ptr"
    t = TupleType((TensorType((I(64), I(8)), dt.BY_NAME["FP8E8M0"]), ScalarType(dt.BOOL)))
    assert print_type(t) == "pl.Tuple[pl.Tensor[[64, 8], pl.FP8E8M0], pl.Scalar[pl.BOOL]]"


def test_tensor_layout_shorthand_and_views():
    nz = TensorType((I(256), I(512)), dt.INT8, TensorView(layout="NZ"))
    assert print_type(nz) == "pl.Tensor[[256, 512], pl.INT8, pl.NZ]"
    dn = TensorType((I(64), I(1)), dt.FP32, TensorView(layout="DN"))
    assert print_type(dn) == "pl.Tensor[[64, 1], pl.FP32, pl.DN]"
    # `stride=[]` means packed: a view with only a layout left is the shorthand
    packed = TensorType((I(64), I(512)), dt.FP32, TensorView(stride=(), layout="NZ"))
    assert print_type(packed) == "pl.Tensor[[64, 512], pl.FP32, pl.NZ]"
    # a trivial view (ND, packed, fully valid) prints nothing
    assert print_type(TensorType((I(4),), dt.FP16, TensorView())) == "pl.Tensor[[4], pl.FP16]"
    full = TensorType((I(64), I(64)), dt.FP16,
                      TensorView(valid_shape=(I(32), I(64)), stride=(I(1), I(64)), layout="DN", pad="zero"))
    assert print_type(full) == ("pl.Tensor[[64, 64], pl.FP16, pl.TensorView(valid_shape=[32, 64], stride=[1, 64], "
                                "layout=pl.TensorLayout.DN, pad=pl.PadValue.zero)]")
    nd_strided = TensorType((I(64), I(64)), dt.FP16, TensorView(stride=(I(128), I(1))))
    assert print_type(nd_strided) == "pl.Tensor[[64, 64], pl.FP16, pl.TensorView(stride=[128, 1])]"


def test_memref_forms():
    ddr = MemRef(StrLit("mem_ddr_0"), ConstInt(0, dt.INT64), I(16384))
    t = TensorType((I(64), I(64)), dt.FP32, None, ddr)
    assert print_type(t) == 'pl.Tensor[[64, 64], pl.FP32, pl.MemRef("mem_ddr_0", pl.const(0, pl.INT64), 16384)]'
    t2 = TensorType((I(64), I(64)), dt.FP32, TensorView(layout="NZ"), ddr)
    assert print_type(t2) == ('pl.Tensor[[64, 64], pl.FP32, pl.NZ, '
                              'pl.MemRef("mem_ddr_0", pl.const(0, pl.INT64), 16384)]')
    vec = MemRef(Var("mem_vec_2"), I(0), I(16384))
    tile = TileType((I(64), I(64)), dt.FP32, vec, "Vec", TileView(valid_shape=(a, I(64))))
    # order inside pl.Tile[...]: shape, dtype, MemRef, memory space, TileView
    assert print_type(tile) == ("pl.Tile[[64, 64], pl.FP32, pl.MemRef(mem_vec_2, 0, 16384), pl.Mem.Vec, "
                                "pl.TileView(valid_shape=[a, 64])]")


IMPLICIT = {  # pto-format.md, "Implicit layout per memory space": blayout, slayout, fractal
    "Vec": ("row_major", "none_box", 512),
    "Mat": ("col_major", "row_major", 512),
    "Left": ("col_major", "row_major", 512),
    "Right": ("row_major", "col_major", 512),
    "Acc": ("col_major", "row_major", 1024),
    "Bias": ("row_major", "none_box", 512),
}


@pytest.mark.parametrize("space", sorted(IMPLICIT))
def test_tile_view_fields_equal_to_the_implicit_view_are_dropped(space):
    bl, sl, fr = IMPLICIT[space]
    shape = (I(32), I(64))
    view = TileView(valid_shape=shape, stride=(), start_offset=I(0), blayout=bl, slayout=sl, fractal=fr,
                    pad="null", compact="null")
    t = TileType(shape, dt.FP16, None, space, view)
    assert print_type(t) == f"pl.Tile[[32, 64], pl.FP16, pl.Mem.{space}]"


@pytest.mark.parametrize("space", sorted(IMPLICIT))
def test_tile_view_fields_that_differ_are_kept_in_keyword_order(space):
    bl, sl, fr = IMPLICIT[space]
    other_bl = "col_major" if bl == "row_major" else "row_major"
    other_sl = "none_box" if sl != "none_box" else "row_major"
    other_fr = 1024 if fr == 512 else 512
    view = TileView(valid_shape=(a, I(64)), stride=(I(64), I(1)), start_offset=I(16), blayout=other_bl,
                    slayout=other_sl, fractal=other_fr, pad="max", compact="normal")
    t = TileType((I(32), I(64)), dt.FP16, None, space, view)
    assert print_type(t) == (
        f"pl.Tile[[32, 64], pl.FP16, pl.Mem.{space}, pl.TileView(valid_shape=[a, 64], stride=[64, 1], "
        f"start_offset=16, blayout=pl.TileLayout.{other_bl}, slayout=pl.TileLayout.{other_sl}, "
        f"fractal={other_fr}, pad=pl.PadValue.max, compact=pl.CompactMode.normal)]"
    )


def test_column_vec_tile_is_implicitly_col_major():
    # pto-format.md: Vec tiles are row_major, except an [R, 1] tile (R > 1), which is col_major.
    col = TileType((I(64), I(1)), dt.FP32, None, "Vec", TileView(blayout="col_major"))
    assert print_type(col) == "pl.Tile[[64, 1], pl.FP32, pl.Mem.Vec]"
    row = TileType((I(64), I(1)), dt.FP32, None, "Vec", TileView(blayout="row_major"))
    assert print_type(row) == "pl.Tile[[64, 1], pl.FP32, pl.Mem.Vec, pl.TileView(blayout=pl.TileLayout.row_major)]"
    single = TileType((I(1), I(1)), dt.FP32, None, "Vec", TileView(blayout="row_major"))
    assert print_type(single) == "pl.Tile[[1, 1], pl.FP32, pl.Mem.Vec]"


def test_explicit_default_views_in_text_print_without_them():
    src = (
        "import pypto.language as pl\n"
        "@pl.function\n"
        "def f(x: pl.Tensor[[64, 64], pl.FP32, pl.TensorView(stride=[], layout=pl.TensorLayout.NZ)]):\n"
        "    t: pl.Tile[[64, 64], pl.FP32, pl.Mem.Acc, pl.TileView(valid_shape=[64, 64], blayout=pl.TileLayout."
        "col_major, slayout=pl.TileLayout.row_major, fractal=1024, pad=pl.PadValue.null)] = pl.tile.create("
        "[64, 64], dtype=pl.FP32, target_memory=pl.Mem.Acc)\n"
        "    return t\n"
    )
    out = print_program(parse_program(src, verify=False))
    assert "def f(x: pl.Tensor[[64, 64], pl.FP32, pl.NZ]):" in out
    assert "    t: pl.Tile[[64, 64], pl.FP32, pl.Mem.Acc] = pl.tile.create(" in out


# ----------------------------------------------------------------------------------------------
# Statements, functions, programs
# ----------------------------------------------------------------------------------------------

IDX = ScalarType(dt.INDEX)
VT = TileType((I(64), I(64)), dt.FP32, None, "Vec")
GT = TensorType((I(64), I(64)), dt.FP32)


def _fn(body, params=(), returns=(), **kw) -> Function:
    return Function("f", tuple(params), tuple(returns), tuple(body), **kw)


def _prog(*fns, name="p", **kw) -> Program:
    return Program(name, tuple(fns), **kw)


def _roundtrip(prog: Program) -> str:
    text = print_program(prog)
    back = parse_program(text, verify=False)
    assert back == prog
    assert print_program(back) == text
    return text


def test_program_layout_raw_printer_form():
    f = _fn([ReturnStmt((x,))], [Param("x", GT)], [GT], func_type="InCore")
    g = Function("g", (), (), (PassStmt(),))
    text = _roundtrip(_prog(f, g, name="demo"))
    assert text == (
        "# pypto.program: demo\n"
        "import pypto.language as pl\n"
        "\n"
        "@pl.program\n"
        "class demo:\n"
        "    @pl.function(type=pl.FunctionType.InCore)\n"
        "    def f(self, x: pl.Tensor[[64, 64], pl.FP32]) -> pl.Tensor[[64, 64], pl.FP32]:\n"
        "        return x\n"
        "    @pl.function\n"
        "    def g(self):\n"
        "        pass\n"
    )


def test_dynamic_dims_and_bare_function():
    t = TensorType((Var("M"), I(64)), dt.FP16)
    f = Function("k", (Param("x", t), Param("y", t, "InOut")), (t,), (ReturnStmt((Var("y"),)),),
                 has_self=False)
    prog = Program("k", (f,), dynamic_dims=(), bare_function=True)
    text = _roundtrip(prog)
    assert "@pl.function\ndef k(x: pl.Tensor[[M, 64], pl.FP16], y: pl.InOut[pl.Tensor[[M, 64], pl.FP16]])" in text
    assert "class" not in text
    from ptoc.ir.nodes import DynDim

    prog2 = Program("p", (Function("k", (Param("x", t),), (), (PassStmt(),)),), (DynDim("M", "M"),))
    text2 = _roundtrip(prog2)
    assert 'M = pl.dynamic("M")\n' in text2


def test_decorator_kwargs_directions_and_tuple_returns():
    f = Function(
        "k", (Param("x", GT), Param("o", GT, "Out"), Param("io", GT, "InOut")), (GT, IDX),
        (ReturnStmt((x, I(0))),), "AIV",
        (("level", EnumLit("Level", "AIV")), ("role", EnumLit("Role", "SubWorker"))), has_self=False, returns_tuple=True,
    )
    text = _roundtrip(_prog(f))
    assert "    @pl.function(type=pl.FunctionType.AIV, level=pl.Level.AIV, role=pl.Role.SubWorker)\n" in text
    assert ("    def k(x: pl.Tensor[[64, 64], pl.FP32], o: pl.Out[pl.Tensor[[64, 64], pl.FP32]], "
            "io: pl.InOut[pl.Tensor[[64, 64], pl.FP32]]) -> tuple[pl.Tensor[[64, 64], pl.FP32], "
            "pl.Scalar[pl.INDEX]]:\n") in text
    assert "        return x, 0\n" in text
    one = Function("h", (Param("x", GT),), (GT,), (ReturnStmt((x,)),), returns_tuple=True)
    assert "-> tuple[pl.Tensor[[64, 64], pl.FP32]]:" in _roundtrip(_prog(one))


def test_func_attr_is_the_first_statement():
    attrs = ((StrLit("nz_tensor_views_blocked"), ConstBool(True)), (StrLit("n"), I(3)))
    f = _fn([ReturnStmt((x,))], [Param("x", GT)], [GT], attrs=attrs)
    text = _roundtrip(_prog(f))
    lines = text.splitlines()
    i = lines.index("    def f(self, x: pl.Tensor[[64, 64], pl.FP32]) -> pl.Tensor[[64, 64], pl.FP32]:")
    assert lines[i + 1] == '        pl.func_attr({"nz_tensor_views_blocked": True, "n": 3})'
    assert lines[i + 2] == "        return x"
    only_attrs = _fn([], attrs=((StrLit("k"), I(1)),))
    assert _roundtrip(_prog(only_attrs)).endswith('    def f(self):\n        pl.func_attr({"k": 1})\n')


def test_assignments_yields_and_for_loops():
    acc, acc_out, i = Var("acc"), Var("acc_out"), Var("i")
    body = (
        AssignStmt(Var("t0"), Call("tile.create", (ListExpr((I(64), I(64))),),
                                   (("dtype", DTypeLit(dt.FP32)), ("target_memory", EnumLit("Mem", "Vec")))), VT),
        ForStmt("range", i, (I(4),), (
            AssignStmt(Var("n"), Call("tile.adds", (acc, F(1.0))), VT),
            YieldStmt((acc_out,), (Var("n"),), VT),
        ), (acc,), (Var("t0"),)),
        ForStmt("pipeline", Var("k"), (I(0), I(8), I(2)), (
            AssignStmt(Var("p"), Var("k")),
            YieldStmt((Var("u_out"), Var("v_out")), (Var("u"), Var("p"))),
        ), (Var("u"), Var("v")), (acc_out, I(0)), (("stage", I(2)),)),
        ForStmt("unroll", Var("j"), (I(2),), (EvalStmt(Call("system.bar_v")),)),
        ReturnStmt((Var("u_out"),)),
    )
    text = _roundtrip(_prog(_fn(body, returns=[VT])))
    assert ("        t0: pl.Tile[[64, 64], pl.FP32, pl.Mem.Vec] = pl.tile.create([64, 64], dtype=pl.FP32, "
            "target_memory=pl.Mem.Vec)\n") in text
    assert "        for i, (acc,) in pl.range(4, init_values=(t0,)):\n" in text
    assert "            acc_out: pl.Tile[[64, 64], pl.FP32, pl.Mem.Vec] = pl.yield_(n)\n" in text
    assert "        for k, (u, v) in pl.pipeline(0, 8, 2, stage=2, init_values=(acc_out, 0)):\n" in text
    assert "            p = k\n" in text
    assert "            u_out, v_out = pl.yield_(u, p)\n" in text
    assert "        for j in pl.unroll(2):\n            pl.system.bar_v()\n" in text


def test_while_loops():
    x0, xx, xn = Var("x0"), Var("xx"), Var("xn")
    w = WhileStmt((xx,), (x0,), B("<", xx, I(10)), (YieldStmt((xn,), (B("*", xx, I(2)),), IDX),))
    w2 = WhileStmt((Var("p"), Var("q")), (I(0), xn), B("and", B("<", Var("p"), I(4)), ConstBool(True)),
                   (YieldStmt((Var("p2"), Var("q2")), (B("+", Var("p"), I(1)), Var("q"))),))
    f = _fn([w, w2, ReturnStmt((Var("q2"),))], [Param("x0", IDX)], [IDX])
    text = _roundtrip(_prog(f))
    assert ("        for (xx,) in pl.while_(init_values=(x0,)):\n"
            "            pl.cond(xx < 10)\n"
            "            xn: pl.Scalar[pl.INDEX] = pl.yield_(xx * 2)\n") in text
    assert ("        for (p, q) in pl.while_(init_values=(0, xn)):\n"
            "            pl.cond(p < 4 and True)\n"
            "            p2, q2 = pl.yield_(p + 1, q)\n") in text


def test_if_else_and_elif_is_printed_as_nested_else_if():
    inner = IfStmt(B("==", a, I(1)), (YieldStmt((Var("r1"),), (I(1),)),), (YieldStmt((Var("r1"),), (I(2),)),))
    outer = IfStmt(B("==", a, I(0)), (YieldStmt((Var("r"),), (I(0),)),),
                   (inner, YieldStmt((Var("r"),), (Var("r1"),))))
    no_else = IfStmt(U("not", a), (EvalStmt(Call("system.bar_v")),))
    f = _fn([outer, no_else, ReturnStmt((Var("r"),))], [Param("a", IDX)], [IDX])
    text = _roundtrip(_prog(f))
    assert "elif" not in text
    assert (
        "        if a == 0:\n"
        "            r = pl.yield_(0)\n"
        "        else:\n"
        "            if a == 1:\n"
        "                r1 = pl.yield_(1)\n"
        "            else:\n"
        "                r1 = pl.yield_(2)\n"
        "            r = pl.yield_(r1)\n"
        "        if not a:\n"
        "            pl.system.bar_v()\n"
        "        return r\n"
    ) in text
    # `elif` in the input reads as an else branch holding an if (without yields: no fresh names)
    elif_only = IfStmt(B("==", a, I(0)), (EvalStmt(Call("system.bar_v")),),
                       (IfStmt(B("==", a, I(1)), (PassStmt(),), (PassStmt(),)),))
    prog = _prog(_fn([elif_only], [Param("a", IDX)]))
    nested = _roundtrip(prog)
    assert "        else:\n            if a == 1:\n                pass\n            else:\n                pass\n" in nested
    elif_src = nested.replace("        else:\n            if a == 1:\n                pass\n            else:\n"
                              "                pass\n", "        elif a == 1:\n            pass\n        else:\n"
                              "            pass\n")
    assert "elif a == 1:" in elif_src
    assert parse_program(elif_src, verify=False) == prog
    assert print_program(parse_program(elif_src, verify=False)) == nested


def test_scopes():
    tid = Var("tid")
    split = Call("split", (EnumLit("SplitMode", "UP_DOWN"),))
    at_kwargs = (("level", EnumLit("Level", "CORE_GROUP")), ("optimizations", ListExpr((split,))))
    body = (
        ScopeStmt("at", (), (EvalStmt(Call("system.bar_v")),), (("level", EnumLit("Level", "CORE_GROUP")),)),
        ScopeStmt("spmd", (I(4),), (AssignStmt(Var("o"), B("*", tid, I(2)), IDX),), (), tid),
        ScopeStmt("cluster", (), (PassStmt(),)),
        ScopeStmt("scope", (), (ScopeStmt("at", (), (PassStmt(),), at_kwargs),)),
        ForStmt("split_aiv", Var("aiv"), (I(2),), (PassStmt(),), kwargs=(("mode", EnumLit("SplitMode", "UP_DOWN")),)),
        # what `for blk in pl.spmd(8):` parses to: an spmd scope around a kernel scope binding the block index
        ScopeStmt("spmd", (I(8),), (ScopeStmt("at", (), (AssignStmt(Var("blk"), Call("tile.get_block_idx"), IDX),
                                                         PassStmt()), (("level", EnumLit("Level", "CORE_GROUP")),)),)),
        ReturnStmt((Var("o"),)),
    )
    text = _roundtrip(_prog(_fn(body, returns=[IDX])))
    assert "        with pl.at(level=pl.Level.CORE_GROUP):\n            pl.system.bar_v()\n" in text
    assert "        with pl.spmd(4) as tid:\n            o: pl.Scalar[pl.INDEX] = tid * 2\n" in text
    assert "        with pl.cluster():\n            pass\n" in text
    assert ("        with pl.scope():\n            with pl.at(level=pl.Level.CORE_GROUP, "
            "optimizations=[pl.split(pl.SplitMode.UP_DOWN)]):\n                pass\n") in text
    assert "        for aiv in pl.split_aiv(2, mode=pl.SplitMode.UP_DOWN):\n" in text
    assert "        for blk in pl.spmd(8):\n            pass\n" in text


def test_spmd_scopes_that_are_not_the_loop_form_print_as_scopes():
    kernel = (("level", EnumLit("Level", "CORE_GROUP")),)
    bind = AssignStmt(Var("b"), Call("tile.get_block_idx"), IDX)
    hinted = ScopeStmt("spmd", (I(8),), (ScopeStmt("at", (), (bind, PassStmt()),
                                                   kernel + (("name_hint", StrLit("g")),)),),
                       (("name_hint", StrLit("g_spmd")),))
    no_bind = ScopeStmt("spmd", (I(8),), (ScopeStmt("at", (), (PassStmt(),), kernel),))
    other_hint = ScopeStmt("spmd", (I(8),), (ScopeStmt("at", (), (bind, PassStmt()),
                                                       kernel + (("name_hint", StrLit("g")),)),),
                           (("name_hint", StrLit("h")),))
    text = _roundtrip(_prog(_fn((hinted, no_bind, other_hint))))
    assert "        for b in pl.spmd(8, name_hint=\"g\"):\n" in text
    assert text.count("with pl.spmd(8") == 2  # no block index binding; hints that are not g / g_spmd


def test_scalar_statement_forms():
    body = (
        AssignStmt(Var("c1"), Cast(a, dt.INT32), ScalarType(dt.INT32)),
        AssignStmt(Var("m"), MinMax("min", a, I(64))),
        AssignStmt(Var("t"), Call("tile.get_block_idx"), IDX),
        AssignStmt(Var("g"), GetItem(Var("tup"), I(1))),
        EvalStmt(Call("kernel", (a,), (("x", I(1)),), kind="func")),
        ReturnStmt(),
    )
    f = _fn(body, [Param("a", IDX), Param("tup", TupleType((IDX, IDX)))])
    text = _roundtrip(_prog(f))
    assert "        c1: pl.Scalar[pl.INT32] = pl.cast(a, pl.INT32)\n" in text
    assert "        m = pl.min(a, 64)\n" in text
    assert "        g = tup[1]\n" in text
    assert "        self.kernel(a, x=1)\n" in text
    assert text.endswith("        return\n")
