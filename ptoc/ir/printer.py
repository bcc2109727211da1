"""The canonical printer: IR -> the printer form of the PyPTO IR text (pypto-ir-text.md).

The output re-parses to a structurally equal program, and printing is idempotent. It writes one
statement per line with 4-space indentation, annotated assignments where the input had them, bare
literals for INDEX integers and FP32 floats, `pl.const(v, dtype)` for other constants, and only the
TileView / TensorView fields that differ from their implicit values (a view built by a pass with
explicit default fields prints the same as one without them).

Comments (`ptoc fmt`). Given the source's comments (`SourceComments`), the printer keeps every one of
them, byte for byte and in source order. Each comment is attached to one *anchor*, a source line the
printer writes again: the import, a `pl.dynamic` line, the `@pl.program` decorator and the class line,
a function's decorator, `def` line and `pl.func_attr` line, every statement (a compound statement by
its header line: `for`, `if`, `elif`, `else:`, `with`, a while loop's `pl.cond`). The rule:

- A comment alone on its line, outside brackets, belongs to the next anchor below it and is printed
  on its own line just above that anchor's line, at the anchor's indentation. When no anchor follows,
  it is an end-of-file comment, printed at column 0 after the program.
- Any other comment (after code on its line, or inside a bracketed expression that spans several
  lines) belongs to the last anchor that starts before it. The last such comment of an anchor trails
  the anchor's printed line (two spaces, then the comment); any earlier ones are printed on their own
  lines above it, after the anchor's own-line comments.
- `# pypto.program: NAME` is written above the import only when no comment of the source starts
  with `# pypto.program`.

Printing the output again attaches every comment to the same anchor in the same role, so formatting
is idempotent.
"""

from __future__ import annotations

import bisect
import contextlib
import contextvars
import math
import re
from dataclasses import replace

from ptoc.ir import dtypes
from ptoc.ir.nodes import (
    DISTRIBUTED_PREFIX,
    Abs,
    ArrayType,
    AssignStmt,
    BinOp,
    Call,
    Cast,
    ConstBool,
    ConstFloat,
    CommCtxType,
    ConstInt,
    DictExpr,
    DistributedTensorType,
    DTypeLit,
    EnumLit,
    EvalStmt,
    Expr,
    ForStmt,
    Function,
    GetItem,
    IfStmt,
    ListExpr,
    MemRef,
    MinMax,
    NoneLit,
    PassStmt,
    BreakStmt,
    ContinueStmt,
    Program,
    PtrType,
    ReturnStmt,
    ScalarType,
    ScopeStmt,
    Stmt,
    StrLit,
    TensorType,
    TileType,
    TupleExpr,
    TupleType,
    Type,
    TypeLit,
    UnaryOp,
    Var,
    WhileStmt,
    YieldStmt,
)
from ptoc.ir.types import normalize_tensor_view, normalize_tile_view
from ptoc.ir.visitor import walk as iter_nodes

INDENT = "    "

# Python operator precedence, low to high.
_PREC = {
    "or": 1, "and": 2, "not": 3,
    "==": 4, "!=": 4, "<": 4, "<=": 4, ">": 4, ">=": 4,
    "|": 5, "^": 6, "&": 7, "<<": 8, ">>": 8, "+": 9, "-": 9,
    "*": 10, "/": 10, "//": 10, "%": 10, "unary": 11, "**": 12,
}
_ATOM = 100


def _constants_only(e: Expr) -> bool:
    """An operator tree whose leaves are all integer constants."""
    if isinstance(e, ConstInt):
        return True
    if isinstance(e, (BinOp, MinMax)):
        return _constants_only(e.lhs) and _constants_only(e.rhs)
    return False


def _prec(e: Expr) -> int:
    if isinstance(e, BinOp):
        return _PREC[e.op]
    if isinstance(e, UnaryOp):
        return _PREC["not"] if e.op == "not" else _PREC["unary"]
    if isinstance(e, ConstInt) and e.value < 0 and e.dtype.name == "INDEX":
        return _PREC["unary"]
    if isinstance(e, ConstFloat) and (e.value < 0 or (e.value == 0 and math.copysign(1, e.value) < 0)) \
            and e.dtype.name == "FP32":
        return _PREC["unary"]
    return _ATOM


def fmt_float(v: float) -> str:
    if math.isinf(v):
        return "1e999" if v > 0 else "-1e999"
    if math.isnan(v):
        return "float('nan')"  # not re-parseable; NaN constants do not appear in valid programs
    r = repr(float(v))
    return r


_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\t": "\\t", "\r": "\\r"}


def _str(s: str) -> str:
    """A double-quoted string literal that reads back as `s` (control characters escaped)."""
    out = []
    for ch in s:
        esc = _ESCAPES.get(ch)
        if esc is not None:
            out.append(esc)
        elif ch < " " or ch == "\x7f":
            out.append(f"\\x{ord(ch):02x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


class SourceComments:
    """The comments of one source file, attached to the printer's anchors (see the module docstring).

    `comments`: `ptoc.frontend.syntax.Comment`s in source order; `anchors`: (line, column, key) of the
    lines the printer writes, as the front end found them in the source.
    """

    def __init__(self, comments, anchors):
        order = sorted(set(anchors), key=lambda a: (a[0], a[1]))
        starts = [(a[0], a[1]) for a in order]
        self._slots: dict[tuple, tuple[list[str], list[str]]] = {}
        self.tail: list[str] = []
        self.has_program_header = False
        for c in comments:
            if c.text.startswith("# pypto.program"):
                self.has_program_header = True
            if c.own_line:
                i = bisect.bisect_right(starts, (c.line, 1 << 30))  # first anchor on a later line
                if i == len(order):
                    self.tail.append(c.text)
                    continue
                self._slot(order[i][2])[0].append(c.text)
            else:
                i = bisect.bisect_left(starts, (c.line, c.col)) - 1  # last anchor starting before it
                if i < 0:  # not for text that parses: code comes before such a comment
                    if order:
                        self._slot(order[0][2])[0].append(c.text)
                    else:
                        self.tail.append(c.text)
                    continue
                self._slot(order[i][2])[1].append(c.text)

    def _slot(self, key: tuple) -> tuple[list[str], list[str]]:
        slot = self._slots.get(key)
        if slot is None:
            slot = self._slots[key] = ([], [])
        return slot

    def take(self, key: tuple) -> tuple[list[str], str | None]:
        """The own-line comments printed above the anchor `key` and the one that trails it; once."""
        slot = self._slots.pop(key, None)
        if slot is None:
            return [], None
        above, inline = slot
        if not inline:
            return above, None
        return above + inline[:-1], inline[-1]

    def rest(self) -> list[str]:
        """Comments whose anchor was not printed (never for a program printed as parsed), then the
        end-of-file comments."""
        left = [t for above, inline in self._slots.values() for t in above + inline]
        self._slots.clear()
        return left + self.tail


STYLES = ("ptoc", "pypto")
_STYLE = contextvars.ContextVar("ptoc_print_style", default="ptoc")


@contextlib.contextmanager
def print_style(style: str):
    """Within the block, `print_program` without a `style=` prints in `style` (`ptoc passes
    --print-style pypto`: the pass dumps in PyPTO's form)."""
    if style not in STYLES:
        raise ValueError(f"unknown print style {style!r}")
    token = _STYLE.set(style)
    try:
        yield
    finally:
        _STYLE.reset(token)


def _iter_names(iter_args) -> str:
    """The parenthesised loop-carried names of a for/while header (a lone name keeps its comma)."""
    names = ", ".join(a.name for a in iter_args)
    return names + "," if len(iter_args) == 1 else names


_KEYWORD_STMTS = {PassStmt: "pass", BreakStmt: "break", ContinueStmt: "continue"}

# statement class -> the Printer method that prints it
_STMT_PRINTERS = {
    AssignStmt: "_assign_stmt", YieldStmt: "_yield_stmt", EvalStmt: "_eval_stmt", ReturnStmt: "_return_stmt",
    PassStmt: "_keyword_stmt", BreakStmt: "_keyword_stmt", ContinueStmt: "_keyword_stmt", ForStmt: "_for_stmt",
    WhileStmt: "_while_stmt", IfStmt: "_if_stmt", ScopeStmt: "_scope_stmt",
}


_RUNTIME_SCOPES = ("scope", "auto_scope", "manual_scope")


_VECTOR_ONLY: dict[int, tuple[Function, bool]] = {}


def _vector_only(f: Function | None) -> bool:
    """Whether every tile of `f` lives in Vec: no cube op (matmul, gemv, ...) and no other memory space
    named. A load that leaves its space open there is a Vec load in ptoc (InferTileMemorySpace, rule 2), and
    the pypto style prints it with `target_memory=pl.Mem.Vec`, the default PyPTO's `pl.load` /
    `pl.tile.load` write (python/pypto/language/op/tile_ops.py)."""
    if f is None:
        return False
    hit = _VECTOR_ONLY.get(id(f))
    if hit is not None and hit[0] is f:
        return hit[1]
    ok = True
    for n in iter_nodes(f):
        if (isinstance(n, Call) and n.kind == "op" and any(w in n.op for w in ("matmul", "gemv", "mad"))) or (
                isinstance(n, EnumLit) and n.family == "Mem" and n.member != "Vec") or (
                isinstance(n, TileType) and n.memory not in (None, "Vec")):
            ok = False
            break
    if len(_VECTOR_ONLY) > 256:
        _VECTOR_ONLY.clear()
    _VECTOR_ONLY[id(f)] = (f, ok)
    return ok


def _pypto_function_order(functions) -> list:
    """The order PyPTO's printer writes a program's functions in (`TopologicalSortFunctions` in
    src/ir/transforms/python_printer.cpp): its Program holds them in a map ordered by name, and a
    depth-first walk in that order writes every function after the functions it calls (callees in order of
    name); with a cycle of calls, plain name order."""
    by_name = {f.name: f for f in functions}
    calls = {f.name: sorted({n.op for n in iter_nodes(f) if isinstance(n, Call) and n.kind == "func"
                             and n.op in by_name}) for f in functions}
    out: list = []
    done: set[str] = set()
    active: set[str] = set()

    def visit(name: str) -> bool:
        if name in done:
            return True
        if name in active:
            return False
        active.add(name)
        if not all(visit(c) for c in calls[name]):
            return False
        active.discard(name)
        done.add(name)
        out.append(by_name[name])
        return True

    if not all(visit(n) for n in sorted(by_name)):
        return sorted(functions, key=lambda f: f.name)
    return out


class Printer:
    """`style`: "ptoc" (the canonical form: every IR field printed, so the text re-parses to the same IR)
    or "pypto" (the form PyPTO's printer writes at the same stage, which PyPTO's parser reads: an
    allocation's `addr=` is added into the byte offset of every `pl.MemRef` on it, `pl.tile.alloc`
    takes only the memory space and size and every allocation is declared at the top of its function;
    `pl.tile.load` always states its valid shape; the functions come in PyPTO's order, callees first)."""

    def __init__(self, prefix: str = "pl", comments: SourceComments | None = None, style: str = "ptoc"):
        if style not in STYLES:
            raise ValueError(f"unknown print style {style!r}")
        self.p = prefix
        self.comments = comments
        self.style = style
        self._typed_consts = False  # print INDEX constants as pl.const(v, pl.INDEX) (see `_binop`)
        self._addrs: dict[str, Expr] = {}  # pypto style: allocation name -> its addr= in this function
        self._hoisted: set[int] = set()  # pypto style: the allocations printed at the top of the function
        # pypto style: PyPTO's parser makes every `for` a new variable, and its printer tells two of one
        # function apart by a suffix (`for i` twice prints `i`, then `i_1`): the names loops bound so far,
        # and the renaming in force inside a loop
        self._loop_names: set[str] = set()
        self._renamed: dict[str, str] = {}
        self._func: Function | None = None

    def _put(self, out: list[str], ind: str, text: str, key: tuple | None) -> None:
        """Append one printed line, with the source comments attached to its anchor `key`."""
        if self.comments is not None and key is not None:
            above, trailing = self.comments.take(key)
            for c in above:
                out.append(ind + c)
            if trailing is not None:
                text += "  " + trailing
        out.append(ind + text)

    @staticmethod
    def _key(s: Stmt) -> tuple:
        return ("stmt", s.span.line, s.span.col)

    # ---------------------------------------------------------------- expressions
    def expr(self, e: Expr) -> str:
        method = _EXPR_METHODS.get(type(e))
        if method is None:
            method = next((_EXPR_METHODS[c] for c in type(e).__mro__ if c in _EXPR_METHODS), None)
            if method is None:
                raise TypeError(f"cannot print expression {type(e).__name__}")
        return method(self, e)

    def _var(self, e: Var) -> str:
        return self._renamed.get(e.name, e.name) if self._renamed else e.name

    def _const_int(self, e: ConstInt) -> str:
        if e.dtype.name == "INDEX" and not self._typed_consts:
            return str(e.value)
        return f"{self.p}.const({e.value}, {self.p}.{e.dtype.name})"

    def _const_float(self, e: ConstFloat) -> str:
        if e.dtype.name == "FP32":
            return fmt_float(e.value)
        return f"{self.p}.const({fmt_float(e.value)}, {self.p}.{e.dtype.name})"

    def _binop(self, e: BinOp) -> str:
        prec = _PREC[e.op]
        if self.style == "pypto" and not self._typed_consts and _constants_only(e):
            # PyPTO's printer writes the leaves of an operator tree of integer constants typed
            # (`pl.const(0, pl.INDEX) * pl.const(16, pl.INDEX)`): Python would fold bare `0 * 16` on reading
            self._typed_consts = True
            try:
                lhs, rhs = self.expr(e.lhs), self.expr(e.rhs)
            finally:
                self._typed_consts = False
        else:
            lhs, rhs = self.expr(e.lhs), self.expr(e.rhs)
        lp, rp = _prec(e.lhs), _prec(e.rhs)
        if e.op == "**":
            wrap_l, wrap_r = lp <= prec, rp < prec and rp != _PREC["unary"]
        elif prec == 4:  # comparisons never chain
            wrap_l, wrap_r = lp <= prec, rp <= prec
        else:
            wrap_l, wrap_r = lp < prec, rp <= prec
        if wrap_l:
            lhs = f"({lhs})"
        if wrap_r:
            rhs = f"({rhs})"
        return f"{lhs} {e.op} {rhs}"

    def _unary(self, e: UnaryOp) -> str:
        inner = self.expr(e.operand)
        if e.op == "not":
            if _prec(e.operand) < _PREC["not"]:
                inner = f"({inner})"
            return f"not {inner}"
        bare_literal = (isinstance(e.operand, ConstInt) and e.operand.dtype.name == "INDEX") or (
            isinstance(e.operand, ConstFloat) and e.operand.dtype.name == "FP32"
        )
        if _prec(e.operand) <= _PREC["unary"] or bare_literal:
            inner = f"({inner})"
        return f"{e.op}{inner}"

    def _call(self, e: Call) -> str:
        args, kwargs = e.args, e.kwargs
        if self.style == "pypto" and e.kind == "op":
            args, kwargs = _pypto_call_operands(e)
            if e.op == "tile.load" and e.kwarg("target_memory") is None and _vector_only(self._func):
                kwargs = (*kwargs, ("target_memory", EnumLit("Mem", "Vec")))
        parts = [self.expr(a) for a in args]
        parts += [f"{k}={self.expr(v)}" for k, v in kwargs]
        if e.kind in ("submit", "spmd_submit"):  # a task launch names its kernel as the first argument
            return f"{self.p}.{e.kind}({', '.join([f'self.{e.op}'] + parts)})"
        if e.kind == "func":
            callee = f"self.{e.op}"
        elif e.op.startswith(DISTRIBUTED_PREFIX):  # the distributed ops' own namespace (`pld.tensor.window`)
            callee = e.op
        else:
            callee = f"{self.p}.{e.op}"
        return f"{callee}({', '.join(parts)})"

    def _tuple(self, e: TupleExpr) -> str:
        if len(e.items) == 1:
            return f"({self.expr(e.items[0])},)"
        return "(" + ", ".join(self.expr(i) for i in e.items) + ")"

    def _getitem(self, e: GetItem) -> str:
        base = self.expr(e.value)
        if _prec(e.value) < _ATOM:
            base = f"({base})"
        return f"{base}[{self.expr(e.index)}]"

    def _list(self, items) -> str:
        return "[" + ", ".join(self.expr(i) for i in items) + "]"

    # ---------------------------------------------------------------- types
    def memref(self, m: MemRef) -> str:
        if m.declared:
            text = f"{self.p}.MemRef({self.expr(m.base)}" + (f", slots={m.slots})" if m.slots > 1 else ")")
            return text + (f"[{self.expr(m.slot)}]" if m.slot is not None else "")
        offset = m.offset
        addr = self._addrs.get(m.base.name) if isinstance(m.base, Var) else None
        if addr is not None:
            offset = _add(addr, offset)
        return f"{self.p}.MemRef({self.expr(m.base)}, {self.expr(offset)}, {self.expr(m.size)})"

    def _tensor_view(self, v) -> str:
        """A non-trivial view. The ptoc style writes only the fields that differ from the default, and a
        view that only sets the layout as the bare `pl.DN`/`pl.NZ`; the pypto style always writes
        `stride=` and `layout=`, as PyPTO's printer does (PyPTO's `pl.TensorView` requires both)."""
        p = self.p
        pypto = self.style == "pypto"
        if v.layout_only and not pypto:
            return f"{p}.{v.layout}"
        kw = []
        if v.valid_shape is not None:
            kw.append(f"valid_shape={self._list(v.valid_shape)}")
        if v.stride or pypto:
            kw.append(f"stride={self._list(v.stride or ())}")
        if v.layout != "ND" or pypto:
            kw.append(f"layout={p}.TensorLayout.{v.layout}")
        if v.pad is not None:
            kw.append(f"pad={p}.PadValue.{v.pad}")
        return f"{p}.TensorView({', '.join(kw)})"

    def type(self, t: Type) -> str:
        p = self.p
        if isinstance(t, ScalarType):
            return f"{p}.Scalar[{p}.{t.dtype.name}]"
        if isinstance(t, PtrType):
            return f"{p}.Ptr"
        if isinstance(t, TupleType):
            return f"{p}.Tuple[" + ", ".join(self.type(x) for x in t.types) + "]"
        if isinstance(t, CommCtxType):
            return "pld.CommCtx"
        if isinstance(t, ArrayType):
            return f"{p}.Array[{self.expr(t.extent)}, {p}.{t.dtype.name}]"
        if isinstance(t, TensorType):
            parts = [self._list(t.shape), f"{p}.{t.dtype.name}"]
            v = normalize_tensor_view(t.view)
            if v is not None and not (self.style == "pypto" and _packed_nd(t.shape, v)):
                parts.append(self._tensor_view(v))
            if t.memref is not None:
                parts.append(self.memref(t.memref))
            head = "pld.DistributedTensor" if isinstance(t, DistributedTensorType) else f"{p}.Tensor"
            return f"{head}[{', '.join(parts)}]"
        if isinstance(t, TileType):
            parts = [self._list(t.shape), f"{p}.{t.dtype.name}"]
            if t.memref is not None:
                parts.append(self.memref(t.memref))
            if t.memory is not None:
                parts.append(f"{p}.Mem.{t.memory}")
            v = normalize_tile_view(t.shape, t.memory, t.view)  # fields equal to the implicit view drop
            if v is not None:
                kw = []
                if v.valid_shape is not None:
                    kw.append(f"valid_shape={self._list(v.valid_shape)}")
                if v.stride is not None:
                    kw.append(f"stride={self._list(v.stride)}")
                if v.start_offset is not None:
                    kw.append(f"start_offset={self.expr(v.start_offset)}")
                if v.blayout is not None:
                    kw.append(f"blayout={p}.TileLayout.{v.blayout}")
                if v.slayout is not None:
                    kw.append(f"slayout={p}.TileLayout.{v.slayout}")
                if v.fractal is not None:
                    kw.append(f"fractal={v.fractal}")
                if v.pad is not None:
                    kw.append(f"pad={p}.PadValue.{v.pad}")
                if v.compact is not None:
                    kw.append(f"compact={p}.CompactMode.{v.compact}")
                parts.append(f"{p}.TileView({', '.join(kw)})")
            return f"{p}.Tile[{', '.join(parts)}]"
        raise TypeError(f"cannot print type {type(t).__name__}")

    # ---------------------------------------------------------------- statements
    def _call_args(self, args, kwargs, init_values=None) -> str:
        parts = [self.expr(a) for a in args]
        parts += [f"{k}={self.expr(v)}" for k, v in kwargs]
        if init_values is not None:
            parts.append(f"init_values={self.expr(TupleExpr(tuple(init_values)))}")
        return ", ".join(parts)

    def stmts(self, body, depth: int, out: list[str]) -> None:
        if self._hoisted:
            body = [s for s in body if id(s) not in self._hoisted]
        if not body:
            out.append(INDENT * depth + "pass")
            return
        for s in body:
            self.stmt(s, depth, out)

    def stmt(self, s: Stmt, depth: int, out: list[str]) -> None:
        method = _STMT_PRINTERS.get(type(s))
        if method is None:
            raise TypeError(f"cannot print statement {type(s).__name__}")
        key = self._key(s) if self.comments is not None else None
        getattr(self, method)(s, depth, INDENT * depth, key, out)

    def _assign_stmt(self, s, depth, ind, key, out) -> None:
        ann = f": {self.type(s.annotation)}" if s.annotation is not None else ""
        self._put(out, ind, f"{s.target.name}{ann} = {self.expr(s.value)}", key)

    def _yield_stmt(self, s, depth, ind, key, out) -> None:
        call = f"{self.p}.yield_({', '.join(self.expr(v) for v in s.values)})"
        if not s.targets:
            self._put(out, ind, call, key)
        elif len(s.targets) == 1 and s.annotation is not None:
            self._put(out, ind, f"{s.targets[0].name}: {self.type(s.annotation)} = {call}", key)
        else:
            self._put(out, ind, f"{', '.join(t.name for t in s.targets)} = {call}", key)

    def _eval_stmt(self, s, depth, ind, key, out) -> None:
        self._put(out, ind, self.expr(s.expr), key)

    def _return_stmt(self, s, depth, ind, key, out) -> None:
        self._put(out, ind, "return " + ", ".join(self.expr(v) for v in s.values) if s.values else "return", key)

    def _keyword_stmt(self, s, depth, ind, key, out) -> None:
        self._put(out, ind, _KEYWORD_STMTS[type(s)], key)

    def _for_stmt(self, s, depth, ind, key, out) -> None:
        name = s.var.name
        if self.style == "pypto" and name in self._loop_names and self._func is not None:
            taken = {n.name for n in iter_nodes(self._func) if isinstance(n, Var)} | set(self._renamed.values())
            k = 1
            while f"{name}_{k}" in taken:
                k += 1
            saved = self._renamed
            self._renamed = {**saved, name: f"{name}_{k}"}
            try:
                self._for_stmt_as(s, depth, ind, key, out)
            finally:
                self._renamed = saved
            return
        self._loop_names.add(name)
        self._for_stmt_as(s, depth, ind, key, out)

    def _for_stmt_as(self, s, depth, ind, key, out) -> None:
        target = self.expr(s.var)
        init = None
        if s.iter_args or s.init_values:
            target += f", ({_iter_names(s.iter_args)})"
            init = s.init_values
        self._put(out, ind, f"for {target} in {self.p}.{s.kind}({self._call_args(s.args, s.kwargs, init)}):", key)
        self.stmts(self._yield_in_scope(s.body) if s.iter_args else s.body, depth + 1, out)

    def _yield_in_scope(self, body):
        """pypto style: a loop body ending in a runtime scope and the loop's `pl.yield_` has the yield
        printed as the scope's last statement, where PyPTO's MaterializeRuntimeScopes puts it (it wraps the
        whole body, src/ir/transforms/materialize_runtime_scopes_pass.cpp `WrapAuto`); the front end reads
        it back after the scope (`_yield_out_of_trailing_scope`)."""
        if (self.style != "pypto" or len(body) < 2 or not isinstance(body[-1], YieldStmt)
                or not isinstance(body[-2], ScopeStmt) or body[-2].kind not in _RUNTIME_SCOPES or not body[-2].body):
            return body
        scope = body[-2]
        return (*body[:-2], replace(scope, body=(*scope.body, body[-1])))

    def _while_stmt(self, s, depth, ind, key, out) -> None:
        if not s.iter_args and not s.init_values and not s.kwargs:
            out.append(f"{ind}while {self.expr(s.cond)}:")  # as written (before ConvertToSSA)
            self.stmts(s.body, depth + 1, out)
            return
        p = self.p
        self._put(out, ind, f"for ({_iter_names(s.iter_args)}) in {p}.while_("
                  f"{self._call_args((), s.kwargs, s.init_values)}):", key)
        self._put(out, ind + INDENT, f"{p}.cond({self.expr(s.cond)})", key and ("cond",) + key[1:])
        if s.body:
            self.stmts(self._yield_in_scope(s.body), depth + 1, out)

    def _if_stmt(self, s, depth, ind, key, out) -> None:
        self._put(out, ind, f"if {self.expr(s.cond)}:", key)
        self.stmts(s.then_body, depth + 1, out)
        if s.else_body:
            self._put(out, ind, "else:", key and ("else",) + key[1:])
            self.stmts(s.else_body, depth + 1, out)

    def _scope_stmt(self, s, depth, ind, key, out) -> None:
        loop = spmd_loop_form(s)
        if loop is not None:  # what `for b in pl.spmd(n):` parses to prints as that loop, as PyPTO prints it
            var, kwargs, body = loop
            self._put(out, ind, f"for {var} in {self.p}.spmd({self._call_args(s.args, kwargs)}):", key)
            self.stmts(body, depth + 1, out)
            return
        as_part = f" as {s.var.name}" if s.var is not None else ""
        self._put(out, ind, f"with {self.p}.{s.kind}({self._call_args(s.args, s.kwargs)}){as_part}:", key)
        self.stmts(s.body, depth + 1, out)

    # ---------------------------------------------------------------- functions and programs
    def function(self, f: Function, depth: int, out: list[str]) -> None:
        p = self.p
        allocs = _allocs(f.body) if self.style == "pypto" else []
        self._addrs = {a.target.name: a.value.kwarg("addr") for a in allocs if a.value.kwarg("addr") is not None}
        self._hoisted = set()
        self._loop_names, self._renamed, self._func = set(), {}, f
        ind = INDENT * depth
        deco_kw = []
        if f.func_type != "Opaque":
            deco_kw.append(f"type={p}.FunctionType.{f.func_type}")
        attrs = f.attrs
        kwargs = f.decorator_kwargs
        if self.style == "pypto":
            # PyPTO prints a function's attrs as a `pl.func_attr({...})` prologue, never as `attrs=`
            if any(k == "attrs" and isinstance(v, DictExpr) for k, v in kwargs):
                kwargs = tuple((k, v) for k, v in kwargs if not (k == "attrs" and isinstance(v, DictExpr)))
                attrs = f.attr_items()
        deco_kw += [f"{k}={self.expr(v)}" for k, v in kwargs]
        implied = _PYPTO_LEVEL_ROLE.get(f.func_type) if self.style == "pypto" else None
        if implied is not None and not any(k in ("level", "role") for k, _ in f.decorator_kwargs):
            deco_kw[1:1] = [f"level={p}.Level.{implied[0]}", f"role={p}.Role.{implied[1]}"]
        has_self = f.has_self and not (implied is not None and implied[1] == "SubWorker")
        fkey = (f.span.line, f.span.col)
        self._put(out, ind, f"@{p}.function" + (f"({', '.join(deco_kw)})" if deco_kw else ""), ("deco",) + fkey)
        params = ["self"] if has_self else []
        for prm in f.params:
            t = self.type(prm.type)
            if prm.direction != "In":
                t = f"{p}.{prm.direction}[{t}]"
            params.append(f"{prm.name}: {t}")
        ret = ""
        if f.returns_tuple or len(f.returns) > 1:
            ret = " -> tuple[" + ", ".join(self.type(t) for t in f.returns) + "]"
        elif f.returns:
            ret = f" -> {self.type(f.returns[0])}"
        self._put(out, ind, f"def {f.name}({', '.join(params)}){ret}:", ("def",) + fkey)
        if attrs is not None:
            self._put(out, ind + INDENT, f"{p}.func_attr({self.expr(DictExpr(attrs))})", ("attr",) + fkey)
            if not f.body:
                return
        if allocs:  # PyPTO's InitMemRef declares every buffer at the top of the function
            for a in allocs:
                self.stmt(a, depth + 1, out)
            self._hoisted = {id(a) for a in allocs}
        self.stmts(f.body, depth + 1, out)
        self._hoisted = set()

    def program(self, prog: Program) -> str:
        p = self.p
        header = f"# pypto.program: {prog.name}" if prog.name else "# pypto.program"
        out: list[str] = []
        if self.comments is None:
            out += [header, f"import pypto.language as {p}"]
        else:
            above, trailing = self.comments.take(("import",))
            out += above
            if not self.comments.has_program_header:
                out.append(header)
            out.append(f"import pypto.language as {p}" + (f"  {trailing}" if trailing is not None else ""))
        import_at = len(out)
        pld_above, pld_trailing = self.comments.take(("import_pld",)) if self.comments is not None else ([], None)
        if prog.dynamic_dims:
            out.append("")
            for d in prog.dynamic_dims:
                self._put(out, "", f"{d.name} = {p}.dynamic({_str(d.label)})", ("dyn", d.name))
        out.append("")
        if prog.bare_function:
            for f in prog.functions:
                self.function(f, 0, out)
        else:
            self._put(out, "", f"@{p}.program", ("prog_deco",))
            self._put(out, "", f"class {prog.name}:", ("class",))
            if not prog.functions:
                out.append(INDENT + "pass")
            funcs = _pypto_function_order(prog.functions) if self.style == "pypto" else prog.functions
            for f in funcs:
                self.function(f, 1, out)
        if self.comments is not None:
            out += self.comments.rest()
        if pld_above or pld_trailing is not None or any(_USES_DISTRIBUTED.search(line) for line in out[import_at:]):
            line = "import pypto.language.distributed as pld"
            out[import_at:import_at] = pld_above + [line + (f"  {pld_trailing}" if pld_trailing is not None else "")]
        return "\n".join(out) + "\n"


# The level and role PyPTO's parser gives a function of each type that states none (seen in its printed
# form); a SubWorker is printed without `self`.
_PYPTO_LEVEL_ROLE = {
    "InCore": ("CHIP_DIE", "SubWorker"),
    "AIC": ("AIC", "SubWorker"),
    "AIV": ("AIV", "SubWorker"),
    "Group": ("CORE_GROUP", "SubWorker"),
    "Orchestration": ("CHIP", "Orchestrator"),
    "Graph": ("CHIP", "Orchestrator"),
}

# a printed line that names the distributed namespace (its ops, types or enums) needs its import
_USES_DISTRIBUTED = re.compile(r"(?<![\w.])pld\.")

_EXPR_METHODS = {
    Var: Printer._var,
    ConstInt: Printer._const_int,
    ConstFloat: Printer._const_float,
    ConstBool: lambda self, e: "True" if e.value else "False",
    StrLit: lambda self, e: _str(e.value),
    NoneLit: lambda self, e: "None",
    DTypeLit: lambda self, e: f"{self.p}.{e.dtype.name}",
    EnumLit: lambda self, e: (f"{e.family}.{e.member}" if e.family.startswith(DISTRIBUTED_PREFIX)
                              else f"{self.p}.{e.family}.{e.member}"),
    TypeLit: lambda self, e: self.type(e.type),
    BinOp: Printer._binop,
    UnaryOp: Printer._unary,
    MinMax: lambda self, e: f"{self.p}.{e.op}({self.expr(e.lhs)}, {self.expr(e.rhs)})",
    Abs: lambda self, e: f"abs({self.expr(e.operand)})",
    Cast: lambda self, e: f"{self.p}.cast({self.expr(e.operand)}, {self.p}.{e.dtype.name})",
    Call: Printer._call,
    ListExpr: lambda self, e: self._list(e.items),
    TupleExpr: Printer._tuple,
    DictExpr: lambda self, e: "{" + ", ".join(f"{self.expr(k)}: {self.expr(v)}" for k, v in e.items) + "}",
    GetItem: Printer._getitem,
}


def _add(a: Expr, b: Expr) -> Expr:
    """`a + b` on INDEX values, folded when both are constants."""
    if isinstance(a, ConstInt) and isinstance(b, ConstInt):
        return ConstInt(a.value + b.value, a.dtype)
    if isinstance(b, ConstInt) and b.value == 0:
        return a
    return BinOp("+", a, b)


def _allocs(body) -> list[AssignStmt]:
    """Every `name = pl.tile.alloc(...)` with constant operands in `body`, at any depth, in order."""
    out: list[AssignStmt] = []
    for s in body:
        v = s.value if isinstance(s, AssignStmt) else None
        if isinstance(v, Call) and v.kind == "op" and v.op == "tile.alloc" and all(
                isinstance(a, (ConstInt, EnumLit)) for a in (*v.args, *(x for _, x in v.kwargs))):
            out.append(s)
        for attr in ("body", "then_body", "else_body"):
            inner = getattr(s, attr, None)
            if inner:
                out += _allocs(inner)
    return out


def _packed_nd(shape, v) -> bool:
    """Whether view `v` of a tensor of `shape` only states the packed row-major ND strides: PyPTO's IR
    leaves such a tensor without a view (MaterializeTensorStrides gives strides only to a view without
    them; a tensor without a view is packed ND), so the pypto style prints it bare. The outermost extent
    may be dynamic; the inner ones must be constants."""
    if v.layout != "ND" or v.valid_shape is not None or v.pad is not None or not v.stride:
        return False
    if len(v.stride) != len(shape) or not all(isinstance(d, ConstInt) for d in shape[1:]):
        return False  # the outermost extent enters no stride: it may be dynamic ([M, 64] is packed by [64, 1])
    want, acc = [], 1
    for d in reversed(shape[1:]):
        want.append(acc)
        acc *= d.value
    want.append(acc)
    return all(isinstance(x, ConstInt) and x.value == w for x, w in zip(v.stride, reversed(want)))


def _pypto_call_operands(e: Call) -> tuple[tuple, tuple]:
    """An operator call's operands as PyPTO prints them: no `addr=` on `tile.alloc` (the address is in
    the MemRefs), the valid shape of `tile.load` always given (the region's shape when absent)."""
    if e.op == "tile.alloc":
        return e.args, tuple((k, v) for k, v in e.kwargs if k != "addr")
    if e.op == "tile.load" and len(e.args) == 3 and e.kwarg("valid_shapes") is None:
        return e.args + (e.args[2],), e.kwargs
    if e.op == "tensor.create" and e.kwarg("layout") is None:
        return e.args, e.kwargs + (("layout", EnumLit("TensorLayout", "ND")),)
    if e.kwargs and e.op in _PYPTO_ARGS:
        return _required_positionally(e)
    return e.args, e.kwargs


# Ops whose required parameters PyPTO's IR holds as call arguments, so that its printer writes them
# positionally (its python/pypto/ir/op/tile_ops.py builds each call), with those parameters' names in
# ptoc's op registry; others, such as tile.cast's target_type, are attributes PyPTO prints as keywords.
_PYPTO_ARGS = {
    "tile.extract": ("tile", "index_row", "index_col", "shape"),
    "tile.create": ("shape",),
    "tile.reshape": ("tile", "shape"),
    "tile.slice": ("tile", "shape", "offset"),
    "tile.ci": ("start", "shape"),
    "tile.expands": ("target", "scalar"),
    "tile.write": ("tile", "indices", "value"),
    "tile.fillpad_expand": ("tile", "shape"),
}


def _required_positionally(e: Call) -> tuple[tuple, tuple]:
    """The keywords of `e` that name its next required parameters, moved into its arguments in order
    (`pl.tile.extract(t, 0, c, shape=[128, 64])` prints as `pl.tile.extract(t, 0, c, [128, 64])`)."""
    args, kwargs = list(e.args), dict(e.kwargs)
    for name in _PYPTO_ARGS[e.op][len(args):]:
        if name not in kwargs:
            break
        args.append(kwargs.pop(name))
    if len(args) == len(e.args):
        return e.args, e.kwargs
    return tuple(args), tuple((k, v) for k, v in e.kwargs if k in kwargs)


def print_program(prog: Program, comments: SourceComments | None = None, style: str | None = None) -> str:
    """The canonical text of `prog`; with `comments` (from `ptoc.frontend.parser.parse_for_format`), the
    source's comments are kept as the module docstring describes. `style="pypto"`: the form PyPTO's
    parser reads (see `Printer`); by default the style of the enclosing `print_style` block, else "ptoc"."""
    return Printer(comments=comments, style=style or _STYLE.get()).program(prog)


def print_type(t: Type) -> str:
    return Printer().type(t)


def print_expr(e: Expr) -> str:
    return Printer().expr(e)


def spmd_loop_form(s: ScopeStmt):
    """(block index name, loop keywords, loop body) when `s` is exactly what the front end makes of
    `for b in pl.spmd(n, ...):` -- `with pl.spmd(n):` holding only `with pl.at(level=pl.Level.CORE_GROUP):`
    whose first statement is `b: pl.Scalar[pl.INDEX] = pl.tile.get_block_idx()` (name hints `h_spmd` / `h`
    for the loop's `name_hint="h"`) -- else None."""
    if s.kind != "spmd" or s.var is not None or len(s.body) != 1:
        return None
    k = s.body[0]
    if not (isinstance(k, ScopeStmt) and k.kind == "at" and k.var is None and not k.args and len(k.body) > 1):
        return None
    bind = k.body[0]
    if not (isinstance(bind, AssignStmt) and bind.value == Call("tile.get_block_idx")
            and bind.annotation == ScalarType(dtypes.INDEX)):
        return None
    at_kw, spmd_kw = dict(k.kwargs), dict(s.kwargs)
    level = at_kw.get("level")
    if len(at_kw) != len(k.kwargs) or len(spmd_kw) != len(s.kwargs) or set(at_kw) - {"level", "name_hint"} \
            or set(spmd_kw) - {"core_num", "sync_start", "name_hint"} \
            or level != EnumLit("Level", "CORE_GROUP") or len(s.args) + ("core_num" in spmd_kw) != 1:
        return None
    hint, spmd_hint = at_kw.get("name_hint"), spmd_kw.get("name_hint")
    if (hint is None) != (spmd_hint is None):
        return None
    if hint is not None and not (isinstance(hint, StrLit) and isinstance(spmd_hint, StrLit)
                                 and hint.value and spmd_hint.value == f"{hint.value}_spmd"
                                 and not hint.value.endswith("_spmd")):
        return None
    kwargs = tuple((n, v) for n, v in s.kwargs if n != "name_hint") + ((("name_hint", hint),) if hint else ())
    return bind.target.name, kwargs, k.body[1:]
