"""Round trips over the parser corpus (tests/corpus) and hand-written programs.

For every program under tests/corpus/raw/*.ir and tests/corpus/formatted/*.ir (pypto-ir-text.md: the
printer's raw output and the same text after `ruff format --line-length 200`):
- it parses and passes the structural verifier (and, separately, the operator checks);
- print(ir) parses back to a structurally equal IR, and printing that again gives the same text;
- the printed text is Python (`ast.parse` accepts it);
- the raw and formatted forms of a program (same file name) parse to equal IR;
- spans point at the source: every statement, parameter, function, variable and call starts where
  its text starts.
"""

from __future__ import annotations

import ast
import dataclasses
import glob
import os
import re

import pytest

from ptoc.context import CompileContext
from ptoc.frontend.parser import parse_program
from ptoc.ir.nodes import (
    AssignStmt,
    BinOp,
    Call,
    ConstFloat,
    ConstInt,
    DictExpr,
    DTypeLit,
    EnumLit,
    Expr,
    GetItem,
    ListExpr,
    StrLit,
    TupleExpr,
    UnaryOp,
    EvalStmt,
    ForStmt,
    Function,
    IfStmt,
    PassStmt,
    Program,
    ReturnStmt,
    ScopeStmt,
    Var,
    WhileStmt,
    YieldStmt,
)
from ptoc.ir.printer import print_program

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "corpus")
RAW = sorted(glob.glob(os.path.join(CORPUS, "raw", "*.ir")))
FORMATTED = sorted(glob.glob(os.path.join(CORPUS, "formatted", "*.ir")))
ALL = RAW + FORMATTED


def _id(path: str) -> str:
    return os.path.relpath(path, CORPUS)


def read(path: str) -> str:
    with open(path, encoding="utf-8") as fh:
        return fh.read()


def ir_diff(a, b, path: str = "program") -> str | None:
    """The first place where two IR values differ structurally (spans ignored), or None."""
    if type(a) is not type(b):
        return f"{path}: {type(a).__name__} vs {type(b).__name__}: {a!r:.200} vs {b!r:.200}"
    if dataclasses.is_dataclass(a) and not isinstance(a, type):
        for f in dataclasses.fields(a):
            if f.compare:
                r = ir_diff(getattr(a, f.name), getattr(b, f.name), f"{path}.{f.name}")
                if r:
                    return r
        return None if a == b else f"{path}: {a!r:.200} != {b!r:.200}"
    if isinstance(a, (tuple, list)):
        if len(a) != len(b):
            return f"{path}: {len(a)} items vs {len(b)}: {a!r:.300} vs {b!r:.300}"
        for i, (x, y) in enumerate(zip(a, b)):
            r = ir_diff(x, y, f"{path}[{i}]")
            if r:
                return r
        return None
    return None if a == b else f"{path}: {a!r:.200} != {b!r:.200}"


def assert_same_ir(a, b) -> None:
    d = ir_diff(a, b)
    assert d is None, d
    assert a == b


def roundtrip(prog: Program) -> str:
    """print -> parse -> equal IR; print again -> same text. Returns the printed text."""
    text = print_program(prog)
    back = parse_program(text, "<printed>", verify=False)
    assert_same_ir(back, prog)
    again = print_program(back)
    assert again == text, "printing is not idempotent"
    return text


# ----------------------------------------------------------------------------------------------
# The corpus
# ----------------------------------------------------------------------------------------------

def test_corpus_has_at_least_20_raw_programs():
    assert len(RAW) >= 20, f"expected at least 20 programs under tests/corpus/raw, found {len(RAW)}"


def test_every_raw_program_has_a_formatted_twin():
    raw = {os.path.basename(p) for p in RAW}
    fmt = {os.path.basename(p) for p in FORMATTED}
    assert raw == fmt, f"only raw: {sorted(raw - fmt)}; only formatted: {sorted(fmt - raw)}"


@pytest.mark.parametrize("path", ALL, ids=_id)
def test_corpus_parses_and_verifies(path):
    # structural verification: names, SSA, yields, arities, annotations (no operator knowledge)
    prog = parse_program(read(path), path, check_ops=False)
    assert prog.functions


def _arch_for(text: str) -> str:
    # Packed FP4 runs on Ascend950 only (FP4-3); every other corpus program targets the default a2a3.
    return "a5" if ("FP4E" in text or "fp4e" in text) else "a2a3"


@pytest.mark.parametrize("path", ALL, ids=_id)
def test_corpus_passes_operator_checks(path):
    text = read(path)
    ctx = CompileContext(arch=_arch_for(text))
    prog = parse_program(text, path, ctx=ctx)
    # the operator rules typed every unannotated op result of every kernel (an op they cannot type would
    # leave its result unknown, which downstream passes cannot use)
    from ptoc.ir.verifier import function_types
    from ptoc.ir.visitor import walk

    types = function_types(prog, ctx)
    untyped = [(f.name, n.target.name) for f in prog.functions for n in walk(f)
               if isinstance(n, AssignStmt) and n.annotation is None and isinstance(n.value, Call)
               and n.value.kind != "func" and types[f.name].get(n.target.name) is None]
    assert untyped == []


@pytest.mark.parametrize("path", ALL, ids=_id)
def test_corpus_print_parse_roundtrip(path):
    prog = parse_program(read(path), path, verify=False)
    text = roundtrip(prog)
    ast.parse(text)  # the printer writes Python
    # pypto-ir-text.md: the printer never writes elif (it writes else: + a nested if)
    assert not re.search(r"^\s*elif\b", text, re.M)


@pytest.mark.parametrize("name", [os.path.basename(p) for p in RAW])
def test_raw_and_formatted_forms_parse_to_equal_ir(name):
    raw_path = os.path.join(CORPUS, "raw", name)
    fmt_path = os.path.join(CORPUS, "formatted", name)
    if not os.path.exists(fmt_path):
        pytest.fail(f"no formatted twin for {name}")
    raw = parse_program(read(raw_path), raw_path, verify=False)
    fmt = parse_program(read(fmt_path), fmt_path, verify=False)
    assert_same_ir(raw, fmt)
    assert print_program(raw) == print_program(fmt)


# ----------------------------------------------------------------------------------------------
# Spans
# ----------------------------------------------------------------------------------------------

def _at(lines: list[str], span) -> str:
    """The source text from a span's start to the end of its line."""
    assert span.known, "unknown span"
    return lines[span.line - 1][span.col - 1:]


def _source_name(name: str) -> str:
    """The name as written: an `elif` chain yields through fresh names `<target>_elif<k>` that point at
    the target they stand for (the IR has no elif)."""
    m = re.fullmatch(r"(.+)_elif\d+", name)
    return m.group(1) if m else name


def _text(lines: list[str], span) -> str:
    """The exact source text a span covers (end column exclusive)."""
    if span.line == span.end_line:
        return lines[span.line - 1][span.col - 1: span.end_col - 1]
    parts = [lines[span.line - 1][span.col - 1:]]
    parts += lines[span.line: span.end_line - 1]
    parts.append(lines[span.end_line - 1][: span.end_col - 1])
    return "\n".join(parts)


def _check_expr_spans(e, lines, where):
    """Every expression's span covers exactly its source text: a complete Python expression that
    starts and ends where the node does."""
    text = _text(lines, e.span)
    w = f"{where}: {type(e).__name__} at {e.span}: {text[:80]!r}"
    node = ast.parse(text, mode="eval").body  # a complete expression, nothing cut off
    if isinstance(e, Var):
        assert text == _source_name(e.name), w
    elif isinstance(e, Call):
        assert text.endswith(")") and isinstance(node, ast.Call), w
        if e.kind == "func":
            assert text.startswith((f"self.{e.op}(", f"{e.op}(")), w
        else:
            assert text.startswith(f"pl.{e.op}("), w
    elif isinstance(e, (ConstInt, ConstFloat)):
        if e.dtype.name in ("INDEX", "FP32"):
            assert ast.literal_eval(text) == e.value, w
        else:
            assert text.startswith("pl.const(") and text.endswith(")"), w
    elif isinstance(e, StrLit):
        assert ast.literal_eval(text) == e.value, w
    elif isinstance(e, ListExpr):
        assert text.startswith("[") and text.endswith("]"), w
    elif isinstance(e, TupleExpr):
        assert text.startswith("(") and text.endswith(")"), w
    elif isinstance(e, DictExpr):
        assert text.startswith("{") and text.endswith("}"), w
    elif isinstance(e, BinOp):
        assert isinstance(node, (ast.BinOp, ast.BoolOp, ast.Compare)), w
    elif isinstance(e, UnaryOp):
        assert isinstance(node, ast.UnaryOp), w
    elif isinstance(e, GetItem):
        assert isinstance(node, ast.Subscript) and text.endswith("]"), w
    elif isinstance(e, (EnumLit, DTypeLit)):
        assert isinstance(node, ast.Attribute) and text.startswith("pl."), w
    for f in dataclasses.fields(e):
        v = getattr(e, f.name)
        for sub in (v if isinstance(v, tuple) else (v,)):
            for s2 in (sub if isinstance(sub, tuple) else (sub,)):
                if isinstance(s2, Expr) and s2.span.known:
                    _check_expr_spans(s2, lines, where)


def _check_stmt_spans(body, lines, where):
    for s in body:
        head = _at(lines, s.span)
        w = f"{where} line {s.span.line}"
        if isinstance(s, AssignStmt):
            assert head.startswith(s.target.name), w
            assert _at(lines, s.target.span).startswith(s.target.name), w
            if head.startswith(f"{s.target.name} in pl.spmd("):  # the loop variable's implicit block index binding
                assert _text(lines, s.value.span).startswith("pl.spmd("), w
            else:
                _check_expr_spans(s.value, lines, w)
        elif isinstance(s, YieldStmt):
            if s.targets:
                assert head.startswith(_source_name(s.targets[0].name)), w
                for t in s.targets:
                    assert _at(lines, t.span).startswith(_source_name(t.name)), w
            else:
                assert head.startswith("pl.yield_("), w
            for v in s.values:
                _check_expr_spans(v, lines, w)
        elif isinstance(s, EvalStmt):
            assert head.startswith(("pl.", "self.")), w
            _check_expr_spans(s.expr, lines, w)
        elif isinstance(s, ReturnStmt):
            assert head.startswith("return"), w
            for v in s.values:
                _check_expr_spans(v, lines, w)
        elif isinstance(s, PassStmt):
            assert head.startswith("pass"), w
        elif isinstance(s, (ForStmt, WhileStmt)):
            assert head.startswith("for "), w
            if isinstance(s, ForStmt):
                assert _at(lines, s.var.span).startswith(s.var.name), w
            for a in s.iter_args:
                assert _at(lines, a.span).startswith(a.name), w
            _check_stmt_spans(s.body, lines, where)
        elif isinstance(s, IfStmt):
            assert head.startswith(("if ", "elif ")), w
            _check_expr_spans(s.cond, lines, w)
            _check_stmt_spans(s.then_body, lines, where)
            _check_stmt_spans(s.else_body, lines, where)
        elif isinstance(s, ScopeStmt):
            # `for b in pl.spmd(n):` is an spmd scope around a kernel scope, both at the loop
            assert head.startswith("with pl.") or (s.kind in ("spmd", "at") and head.startswith("for ")), w
            if s.var is not None:
                assert _at(lines, s.var.span).startswith(s.var.name), w
            _check_stmt_spans(s.body, lines, where)
        else:  # pragma: no cover
            raise AssertionError(f"unexpected statement {type(s).__name__}")


@pytest.mark.parametrize("path", ALL, ids=_id)
def test_corpus_spans_point_at_the_source(path):
    text = read(path)
    lines = text.splitlines()
    prog = parse_program(text, path, verify=False)
    for f in prog.functions:
        assert _at(lines, f.span).startswith(f.name + "("), f"function {f.name} at {f.span}"
        assert lines[f.span.line - 1].lstrip().startswith("def "), f.name
        for p in f.params:
            assert _at(lines, p.span).startswith(p.name), f"param {p.name} at {p.span}"
        _check_stmt_spans(f.body, lines, f"{_id(path)}:{f.name}")


SPAN_SRC = '''\
# pypto.program: spans
import pypto.language as pl

@pl.program
class spans:
    @pl.function(type=pl.FunctionType.AIV)
    def k(
        self,
        x: pl.Tensor[[64, 64], pl.FP32],
        n: pl.Scalar[pl.INDEX],
    ) -> pl.Tensor[[64, 64], pl.FP32]:
        # a comment line
        t: pl.Tile[[64, 64], pl.FP32, pl.Mem.Vec] = (
            pl.tile.load(x, [0, 0], [64, 64], [64, 64], target_memory=pl.Mem.Vec)
        )
        m: pl.Scalar[pl.INDEX] = n * 2 + 1  # trailing comment
        for i, (acc,) in pl.range(
            4,
            init_values=(t,),
        ):
            acc2: pl.Tile[[64, 64], pl.FP32, pl.Mem.Vec] = pl.tile.adds(acc, 1.0)
            acc_out: pl.Tile[[64, 64], pl.FP32, pl.Mem.Vec] = pl.yield_(acc2)
        if m > 3:
            pl.system.bar_v()
        elif m < 2:
            pass
        out: pl.Tensor[[64, 64], pl.FP32] = pl.tile.store(acc_out, [0, 0], x)
        return out
'''


def test_spans_of_a_wrapped_program():
    prog = parse_program(SPAN_SRC, "spans.ir", verify=False)
    f = prog.functions[0]
    assert f.span.file == "spans.ir"
    assert (f.span.line, f.span.col) == (7, 9)  # the function's name
    assert [(p.name, p.span.line, p.span.col) for p in f.params] == [("x", 9, 9), ("n", 10, 9)]
    t, m, loop, cond, out, ret = f.body
    assert isinstance(t, AssignStmt) and (t.span.line, t.span.col) == (13, 9)
    assert isinstance(t.value, Call) and (t.value.span.line, t.value.span.col) == (14, 13)
    x_arg = t.value.args[0]
    assert isinstance(x_arg, Var) and (x_arg.span.line, x_arg.span.col) == (14, 26)
    assert (m.span.line, m.span.col) == (16, 9)
    assert isinstance(m.value, BinOp) and (m.value.span.line, m.value.span.col) == (16, 34)
    assert isinstance(loop, ForStmt) and (loop.span.line, loop.span.col) == (17, 9)
    assert (loop.var.span.line, loop.var.span.col) == (17, 13)
    assert (loop.iter_args[0].span.line, loop.iter_args[0].span.col) == (17, 17)
    assert (loop.init_values[0].span.line, loop.init_values[0].span.col) == (19, 26)
    assert [s.span.line for s in loop.body] == [21, 22]
    assert isinstance(cond, IfStmt) and cond.span.line == 23
    assert cond.then_body[0].span.line == 24
    elif_if = cond.else_body[0]
    assert isinstance(elif_if, IfStmt) and (elif_if.span.line, elif_if.span.col) == (25, 9)
    assert elif_if.then_body[0].span.line == 26
    assert (out.span.line, ret.span.line) == (27, 28)
    assert isinstance(ret.values[0], Var) and (ret.values[0].span.line, ret.values[0].span.col) == (28, 16)


# ----------------------------------------------------------------------------------------------
# Hand-written programs (independent of the corpus)
# ----------------------------------------------------------------------------------------------

OWN_PROGRAMS = {
    "softmax_concise": '''\
import pypto.language as pl
@pl.program
class p:
    @pl.function(type=pl.FunctionType.AIV)
    def k(self, x: pl.Tensor[[64, 128], pl.FP32], y: pl.Out[pl.Tensor[[64, 128], pl.FP32]]) -> pl.Tensor[[64, 128], pl.FP32]:
        t = pl.tile.load(x, [0, 0], [64, 128], [64, 128], target_memory=pl.Mem.Vec)
        e = pl.tile.exp(t)
        s: pl.Tensor[[64, 128], pl.FP32] = pl.tile.store(e, [0, 0], y)
        return s''',
    "scalars_and_consts": '''\
import pypto.language as pl
@pl.function
def f(a: pl.Scalar[pl.INDEX], b: pl.Scalar[pl.INT64], c: pl.Scalar[pl.FP16]) -> pl.Scalar[pl.BOOL]:
    x: pl.Scalar[pl.INDEX] = -a ** 2 + (-a) ** 2 - 2 ** -1 * (a - (a - 1)) // 3 % 7
    y: pl.Scalar[pl.INT64] = b << pl.const(2, pl.INT64) >> pl.const(-1, pl.INT64) & ~b | b ^ pl.const(5, pl.INT64)
    z: pl.Scalar[pl.FP16] = c * pl.const(1.5, pl.FP16) - pl.const(-0.25, pl.FP16)
    w: pl.Scalar[pl.FP32] = pl.cast(c, pl.FP32) / -3.0 + 1e-05
    m: pl.Scalar[pl.INDEX] = pl.max(pl.min(a, 4), abs(x))
    r: pl.Scalar[pl.BOOL] = not (x < m and (y != b or not z >= c)) and (x == 1) == True
    return r''',
    "while_if_scope": '''\
# pypto.program: w
import pypto.language as pl

N = pl.dynamic("N")

@pl.program
class w:
    @pl.function(type=pl.FunctionType.Orchestration)
    def main(self, x: pl.Tensor[[N, 64], pl.FP32], n: pl.Scalar[pl.INDEX]):
        pl.func_attr({"k": True, "v": [1, 2]})
        for (c,) in pl.while_(init_values=(16,)):
            pl.cond(c * 8 < n)
            c2: pl.Scalar[pl.INDEX] = pl.yield_(c * 2)
        for pos, acc in pl.while_(init_values=(0, x)):
            pl.cond(pos < n)
            if pos % 2 == 0:
                a2 = pl.tensor.adds(acc, 1.0)
                a3 = pl.yield_(a2)
            else:
                a3 = pl.yield_(acc)
            pos2, acc2 = pl.yield_(pos + c2, a3)
        with pl.at(level=pl.Level.CORE_GROUP):
            pl.system.bar_v()
        with pl.spmd(4) as tid:
            off: pl.Scalar[pl.INDEX] = tid * 16
        with pl.cluster():
            pass
        for aiv in pl.split_aiv(2, mode=pl.SplitMode.UP_DOWN):
            pl.tpush_to_aic(acc2, split=0)
        return''',
}


@pytest.mark.parametrize("name", sorted(OWN_PROGRAMS))
def test_own_programs_roundtrip(name):
    text = OWN_PROGRAMS[name]
    prog = parse_program(text, name, check_ops=False)
    printed = roundtrip(prog)
    ast.parse(printed)


def test_own_program_semantics_after_roundtrip():
    prog = parse_program(OWN_PROGRAMS["scalars_and_consts"], check_ops=False)
    body = prog.functions[0].body
    # -a ** 2 is -(a ** 2); (-a) ** 2 squares the negation; 2 ** -1 has a negative literal exponent
    from ptoc.ir.dtypes import INDEX

    a, one, two = Var("a"), ConstInt(1, INDEX), ConstInt(2, INDEX)
    x = body[0].value
    expected = BinOp(
        "-",
        BinOp("+", UnaryOp("-", BinOp("**", a, two)), BinOp("**", UnaryOp("-", a), two)),
        BinOp("%", BinOp("//", BinOp("*", BinOp("**", two, ConstInt(-1, INDEX)), BinOp("-", a, BinOp("-", a, one))),
                         ConstInt(3, INDEX)), ConstInt(7, INDEX)),
    )
    assert_same_ir(x, expected)
    s = print_program(prog)
    assert "x: pl.Scalar[pl.INDEX] = -a ** 2 + (-a) ** 2 - 2 ** -1 * (a - (a - 1)) // 3 % 7" in s
    assert "pl.const(-1, pl.INT64)" in s and "pl.const(-0.25, pl.FP16)" in s
    assert "r: pl.Scalar[pl.BOOL] = not (x < m and (y != b or not z >= c)) and (x == 1) == True" in s


def test_raw_without_final_newline_and_comments_equals_printed():
    text = OWN_PROGRAMS["softmax_concise"]
    assert not text.endswith("\n")
    commented = text.replace("        e = pl.tile.exp(t)", "        # exp\n        e = pl.tile.exp(t)  # elementwise")
    a = parse_program(text, verify=False)
    b = parse_program(commented + "\n\n", verify=False)
    assert_same_ir(a, b)


def test_function_spans_are_kept_on_function_nodes():
    prog = parse_program(OWN_PROGRAMS["while_if_scope"], "w.ir", check_ops=False)
    f: Function = prog.functions[0]
    assert f.span.line == 9 and f.attrs is not None
    assert isinstance(f.body[0], WhileStmt) and f.body[0].span.line == 11


ELIF_SRC = '''\
import pypto.language as pl
@pl.function
def f(a: pl.Scalar[pl.INDEX]) -> pl.Scalar[pl.INDEX]:
    if a == 0:
        r: pl.Scalar[pl.INDEX] = pl.yield_(1)
    elif a == 1:
        r: pl.Scalar[pl.INDEX] = pl.yield_(2)
    elif a == 2:
        r: pl.Scalar[pl.INDEX] = pl.yield_(3)
    else:
        r: pl.Scalar[pl.INDEX] = pl.yield_(4)
    return r
'''


def test_elif_chain_reads_the_same_however_it_is_laid_out():
    # pypto-ir-text.md: elif is accepted, the printer writes else + a nested if. The IR must not depend
    # on where the elif lines are (raw and ruff-formatted text of one program parse to equal IR).
    a = parse_program(ELIF_SRC, "a.ir", check_ops=False)
    moved = ELIF_SRC.replace("    elif a == 1:", "    # a comment line\n\n    elif (\n        a == 1\n    ):")
    b = parse_program(moved, "b.ir", check_ops=False)
    assert_same_ir(a, b)
    text = roundtrip(a)
    assert not re.search(r"^\s*elif\b", text, re.M)
    # the nested form the printer writes is valid IR on its own
    parse_program(text, "c.ir", check_ops=False)


def test_front_end_leaves_the_garbage_collector_as_it_was():
    import gc

    from ptoc.diagnostics import CompileError

    assert gc.isenabled()
    parse_program(OWN_PROGRAMS["softmax_concise"], check_ops=False)
    assert gc.isenabled()
    with pytest.raises(CompileError):
        parse_program("import pypto.language as pl\n@pl.function\ndef f(:\n", check_ops=False)
    assert gc.isenabled()
    gc.disable()
    try:
        parse_program(OWN_PROGRAMS["softmax_concise"], check_ops=False)
        assert not gc.isenabled()  # a caller that turned it off keeps it off
    finally:
        gc.enable()


def test_grammar_cache_is_written_once_and_reused(tmp_path, monkeypatch):
    from ptoc.frontend import syntax

    monkeypatch.setenv("PTOC_FRONTEND", "lark")  # the grammar's path: CPython's parser needs no tables
    cache = tmp_path / "grammar.cache"
    monkeypatch.setattr(syntax, "_cache_path", lambda: str(cache))
    monkeypatch.setattr(syntax, "_GRAMMAR_CACHE", {})
    text = read(RAW[0]) if RAW else OWN_PROGRAMS["softmax_concise"]
    built = parse_program(text, "a.ir", verify=False)  # analyses the grammar and writes the cache
    assert cache.exists() and cache.stat().st_size > 0
    stamp = cache.stat().st_mtime_ns
    monkeypatch.setattr(syntax, "_GRAMMAR_CACHE", {})
    loaded = parse_program(text, "a.ir", verify=False)  # loads the analysed grammar from the cache
    assert cache.stat().st_mtime_ns == stamp
    assert_same_ir(built, loaded)
    assert [s.span for s in built.functions[0].body] == [s.span for s in loaded.functions[0].body]
