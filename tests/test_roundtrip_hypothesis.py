"""Property tests: random well-formed programs survive print -> parse unchanged.

A hypothesis strategy builds programs directly from `ptoc.ir.nodes` (SSA: every name is fresh):
several functions whose parameters are scalars, tensors (layouts, TensorViews, MemRefs) and tiles
(memory spaces, TileViews, MemRefs); nested for-loops of every kind with loop-carried values and
yields; if/else with yields (and else-if chains); while loops; scopes; scalar arithmetic with every
operator in random nesting; op calls with keyword arguments, lists, dicts, strings, enums and dtypes;
`pl.const` of every dtype; negative numbers; calls of other functions and tuple results.

Each program must pass the structural verifier, print, parse back to an equal IR, and print again to
the same text. A smaller run sends the printed text through `ruff format --line-length 200` (the other
form users see, pypto-ir-text.md) and requires the same IR. Independently of ptoc's parser, random
expressions are checked against CPython's reading of the printed text.
"""

from __future__ import annotations

import ast
import keyword
import shutil
import subprocess
import sys
from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ptoc.frontend.parser import parse_program
from ptoc.ir import dtypes as dt
from ptoc.ir.nodes import (
    FUNCTION_TYPES,
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
    DynDim,
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
    Type,
    UnaryOp,
    Var,
    WhileStmt,
    YieldStmt,
)
from ptoc.ir.printer import print_expr, print_program
from ptoc.ir.types import normalize_tensor_view, normalize_tile_view
from ptoc.ir.verifier import verify_program
from test_printer import python_agrees  # CPython's reading of an expression (tests/test_printer.py)
from test_roundtrip import assert_same_ir

INDEX, FP32, BOOL, INT64 = dt.INDEX, dt.FP32, dt.BOOL, dt.INT64
INT_DTYPES = [d for d in dt.ALL if d.kind in ("int", "uint", "index")]
FLOAT_DTYPES = [d for d in dt.ALL if d.kind == "float"]
NUMERIC_DTYPES = INT_DTYPES + FLOAT_DTYPES
INT_BINOPS = ["+", "-", "*", "/", "//", "%", "**", "<<", ">>", "&", "|", "^"]
FLOAT_BINOPS = ["+", "-", "*", "/", "//", "%", "**"]
COMPARE = ["==", "!=", "<", "<=", ">", ">="]
MEMS = ["Vec", "Mat", "Left", "Right", "Acc", "Bias", "DDR", "LeftScale", "RightScale"]
LAYOUTS = ["none_box", "row_major", "col_major"]
PADS = ["null", "zero", "max", "min"]
# Op names that are not reserved by the text (pl.const, pl.min/max, pl.cast, loop headers, ...).
OPS = ["tile.load", "tile.store", "tile.add", "tile.muls", "tile.exp", "tile.move", "tile.matmul",
       "tile.matmul_acc", "tile.create", "tensor.create", "tensor.slice", "tile.cast", "tile.and_",
       "tensor.not_", "system.bar_v", "tpush_to_aic", "tpop_from_aiv", "add", "load", "store", "matmul",
       "tile.row_max", "tile.quant_mx", "tile.full", "gather", "tile.get_block_idx"]
KWARGS = ["target_memory", "dtype", "mode", "split", "value", "layout", "axis", "target_type", "attrs",
          "stage", "flag", "offsets"]
DYN_NAMES = ["M", "N", "K"]
SCOPE_KINDS = ["at", "spmd", "cluster", "scope"]


@dataclass
class Info:
    kind: str  # scalar | tile | tensor | ptr | tuple | opaque
    type: Type | None
    known_scalar: bool = False  # the parser knows it holds a scalar (decides pl.cast -> Cast)
    sure: bool = False  # the verifier will infer exactly `type` for it


class Gen:
    """Builds one random program with `draw`; names are fresh, so every function is in SSA form."""

    def __init__(self, draw):
        self.draw = draw
        self.counter = 0
        self.scopes: list[dict[str, Info]] = []
        self.functions: list[Function] = []
        self.dyn: list[str] = []

    # ---------------------------------------------------------------- helpers
    def pick(self, seq):
        return self.draw(st.sampled_from(list(seq)))

    def chance(self, percent: int) -> bool:
        return self.draw(st.integers(0, 99)) < percent

    def num(self, lo: int, hi: int) -> int:
        return self.draw(st.integers(lo, hi))

    def fresh(self, prefix: str = "v") -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    def define(self, name: str, info: Info) -> None:
        self.scopes[-1][name] = info

    def visible(self, pred=lambda i: True) -> list[tuple[str, Info]]:
        seen: dict[str, Info] = {}
        for scope in self.scopes:
            seen.update(scope)
        return [(n, i) for n, i in seen.items() if pred(i)]

    # ---------------------------------------------------------------- types
    def dim(self) -> Expr:
        r = self.num(0, 9)
        if r < 6 or not self.dyn:
            return ConstInt(self.pick([1, 2, 8, 16, 32, 64, 128, 256, 4096]), INDEX)
        name = self.pick(self.dyn + ["BATCH"])
        if r < 8:
            return Var(name)
        return BinOp("*", Var(name), ConstInt(self.pick([2, 16]), INDEX))

    def shape(self, lo=1, hi=3) -> tuple[Expr, ...]:
        return tuple(self.dim() for _ in range(self.num(lo, hi)))

    def memref(self, allow_ptr: bool) -> MemRef:
        ptrs = [n for n, _ in self.visible(lambda i: i.kind == "ptr")] if allow_ptr else []
        if ptrs and self.chance(60):
            return MemRef(Var(self.pick(ptrs)), ConstInt(self.pick([0, 4096]), INDEX),
                          ConstInt(16384, INDEX))
        return MemRef(StrLit(f"mem_ddr_{self.num(0, 9)}"), ConstInt(self.pick([0, 8192]), INT64),
                      ConstInt(self.pick([0, 16384]), INDEX))

    def tensor_type(self, allow_ptr: bool = False) -> TensorType:
        shape = self.shape()
        view = None
        r = self.num(0, 9)
        if r < 3:
            view = TensorView(layout=self.pick(["NZ", "DN", "ND"]))
        elif r < 5:
            view = TensorView(
                valid_shape=tuple(self.dim() for _ in shape) if self.chance(50) else None,
                stride=tuple(self.dim() for _ in shape) if self.chance(50) else self.pick([None, ()]),
                layout=self.pick(["ND", "DN", "NZ"]),
                pad=self.pick([None, *PADS]),
            )
        memref = self.memref(allow_ptr) if self.chance(20) else None
        return TensorType(shape, self.pick(dt.ALL), normalize_tensor_view(view), memref)

    def tile_type(self, allow_ptr: bool = False) -> TileType:
        shape = self.shape(1, 2)
        memory = self.pick([None, *MEMS]) if self.chance(85) else None
        view = None
        if self.chance(40):
            view = TileView(
                valid_shape=tuple(self.pick([d, Var(self.pick(["rows", "cols"])), ConstInt(4, INDEX)])
                                  for d in shape) if self.chance(50) else None,
                stride=tuple(self.dim() for _ in shape) if self.chance(20) else None,
                start_offset=ConstInt(self.pick([0, 16]), INDEX) if self.chance(20) else None,
                blayout=self.pick([None, *LAYOUTS]),
                slayout=self.pick([None, *LAYOUTS]),
                fractal=self.pick([None, 32, 512, 1024]),
                pad=self.pick([None, *PADS]),
                compact=self.pick([None, "null", "normal"]),
            )
        memref = self.memref(allow_ptr) if self.chance(20) else None
        return TileType(shape, self.pick(dt.ALL), memref, memory, normalize_tile_view(shape, memory, view))

    def value_type(self, allow_ptr: bool = True) -> Type:
        r = self.num(0, 9)
        if r < 5:
            return self.tile_type(allow_ptr)
        if r < 8:
            return self.tensor_type(allow_ptr)
        if r < 9:
            return TupleType((self.tile_type(allow_ptr), self.tensor_type(allow_ptr)))
        return PtrType()

    @staticmethod
    def kind_of(t: Type) -> str:
        return {TileType: "tile", TensorType: "tensor", ScalarType: "scalar", PtrType: "ptr",
                TupleType: "tuple"}[type(t)]

    # ---------------------------------------------------------------- scalar expressions
    def const(self, d) -> Expr:
        if d == BOOL:
            return ConstBool(self.draw(st.booleans()))
        if d.is_float:
            v = self.draw(st.one_of(
                st.sampled_from([0.0, -0.0, 1.0, -1.5, 0.5, 1e-05, 3.4028234663852886e38, -2.0]),
                st.floats(allow_nan=False, allow_infinity=False),  # 1e999 is rejected
            ))
            return ConstFloat(v, d)
        v = self.draw(st.one_of(st.integers(-300, 300), st.integers(-(2 ** 64), 2 ** 64)))
        return ConstInt(v, d)

    def scalar(self, d, depth: int) -> Expr:
        """An expression whose scalar type (by the IR's typing rules) is `d`."""
        vars_ = [n for n, i in self.visible(lambda i: i.kind == "scalar" and i.type.dtype == d)]
        if depth <= 0 or self.chance(30):
            if vars_ and self.chance(50):
                return Var(self.pick(vars_))
            return self.const(d)
        if d == BOOL:
            r = self.num(0, 9)
            if r < 5:
                d2 = self.pick(NUMERIC_DTYPES)
                return BinOp(self.pick(COMPARE), self.scalar(d2, depth - 1), self.scalar(d2, depth - 1))
            if r < 8:
                return BinOp(self.pick(["and", "or"]), self.scalar(BOOL, depth - 1), self.scalar(BOOL, depth - 1))
            return UnaryOp("not", self.scalar(BOOL, depth - 1))
        r = self.num(0, 19)
        if r < 10:
            ops = INT_BINOPS if d.is_int else FLOAT_BINOPS
            return BinOp(self.pick(ops), self.scalar(d, depth - 1), self.scalar(d, depth - 1))
        if r < 13:
            return UnaryOp("-" if (not d.is_int or self.chance(60)) else "~", self.scalar(d, depth - 1))
        if r < 15:
            return MinMax(self.pick(["min", "max"]), self.scalar(d, depth - 1), self.scalar(d, depth - 1))
        if r < 17:
            return Abs(self.scalar(d, depth - 1))
        operand = self.scalar(self.pick(NUMERIC_DTYPES + [BOOL]), depth - 1)
        if isinstance(operand, Var) and not self.visible_info(operand.name).known_scalar:
            operand = Abs(operand)  # the parser reads pl.cast(v, T) as a scalar cast only for known scalars
        return Cast(operand, d)

    def visible_info(self, name: str) -> Info:
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        raise KeyError(name)

    # ---------------------------------------------------------------- op-call arguments
    def any_expr(self, depth: int = 2) -> Expr:
        r = self.num(0, 19)
        vis = self.visible()
        if r < 6 and vis:
            return Var(self.pick([n for n, _ in vis]))
        if r < 9:
            return ListExpr(tuple(self.pick([ConstInt(self.num(-4, 256), INDEX), self.scalar(INDEX, 1)])
                                  for _ in range(self.num(0, 3))))
        if r < 11:
            return self.scalar(self.pick(NUMERIC_DTYPES + [BOOL]), 2)
        if r < 12:
            return StrLit(self.draw(st.text(st.characters(blacklist_categories=("Cs",)), max_size=8)))
        if r < 13:
            return NoneLit()
        if r < 15:
            fam = self.pick(["Mem", "TileLayout", "PadValue", "CompactMode", "TensorLayout", "Level", "SplitMode"])
            member = {"Mem": MEMS, "TileLayout": LAYOUTS, "PadValue": PADS, "CompactMode": ["null", "normal"],
                      "TensorLayout": ["ND", "DN", "NZ"], "Level": ["CORE_GROUP", "CHIP", "AIV"],
                      "SplitMode": ["UP_DOWN", "LEFT_RIGHT"]}[fam]
            return EnumLit(fam, self.pick(member))
        if r < 16:
            return DTypeLit(self.pick(dt.ALL))
        if r < 17 and depth > 0:
            return TupleExpr(tuple(self.any_expr(depth - 1) for _ in range(self.num(0, 3))))
        if r < 18 and depth > 0:
            return DictExpr(tuple((StrLit(self.fresh("k")), self.any_expr(depth - 1))
                                  for _ in range(self.num(0, 2))))
        if r < 19 and depth > 0:
            return Call(self.pick(OPS), (self.any_expr(depth - 1),))
        return self.const(self.pick(NUMERIC_DTYPES))

    def op_call(self) -> Call:
        args = tuple(self.any_expr() for _ in range(self.num(0, 4)))
        names = self.draw(st.lists(st.sampled_from(KWARGS), max_size=3, unique=True))
        kwargs = []
        for k in names:
            if k == "attrs":
                kwargs.append((k, DictExpr(((StrLit("arg_directions"), ListExpr((EnumLit("Level", "AIV"),))),))))
            else:
                kwargs.append((k, self.any_expr()))
        return Call(self.pick(OPS), args, tuple(kwargs))

    # ---------------------------------------------------------------- statements
    def stmt_list(self, depth: int, n_max: int = 4) -> list:
        out = []
        for _ in range(self.num(1, n_max)):
            out.extend(self.stmt(depth))
        return out

    def stmt(self, depth: int) -> list:
        r = self.num(0, 29)
        if r < 7:
            return [self.scalar_assign()]
        if r < 12:
            return self.op_assign()
        if r < 13:
            return [EvalStmt(self.op_call())]
        if r < 14:
            name = self.fresh("mem")
            self.define(name, Info("ptr", PtrType(), sure=True))
            return [AssignStmt(Var(name), Call("tile.alloc", (EnumLit("Mem", self.pick(MEMS)), ConstInt(16384, INDEX))),
                               PtrType())]
        if r < 15:
            return self.func_call()
        if r < 16:
            return [PassStmt()]
        if depth <= 0:
            return [self.scalar_assign()]
        if r < 20:
            return [self.for_loop(depth)]
        if r < 24:
            return [self.if_stmt(depth)]
        if r < 27:
            return [self.while_loop(depth)]
        return [self.scope(depth)]

    def scalar_assign(self) -> AssignStmt:
        d = self.pick(NUMERIC_DTYPES + [BOOL])
        value = self.scalar(d, self.num(0, 4))
        annotated = self.chance(60)
        name = self.fresh("s")
        known = annotated or not isinstance(value, Var) or self.visible_info(value.name).known_scalar
        self.define(name, Info("scalar", ScalarType(d), known_scalar=known, sure=True))
        return AssignStmt(Var(name), value, ScalarType(d) if annotated else None)

    def op_assign(self) -> list:
        call = self.op_call()
        name = self.fresh("t")
        if self.chance(70):
            t = self.value_type()
            self.define(name, Info(self.kind_of(t), t, sure=True))
            out = [AssignStmt(Var(name), call, t)]
        else:
            self.define(name, Info("opaque", None))
            out = [AssignStmt(Var(name), call)]
        tuples = [(n, i) for n, i in self.visible(lambda i: i.kind == "tuple" and i.sure)]
        if tuples and self.chance(40):
            tn, ti = self.pick(tuples)
            k = self.num(0, len(ti.type.types) - 1)
            en = self.fresh("e")
            et = ti.type.types[k]
            self.define(en, Info(self.kind_of(et), et, sure=True))
            out.append(AssignStmt(Var(en), GetItem(Var(tn), ConstInt(k, INDEX)), et if self.chance(50) else None))
        return out

    def func_call(self) -> list:
        if not self.functions:
            return [EvalStmt(self.op_call())]
        f = self.pick(self.functions)
        args = []
        for p in f.params:  # an argument of the parameter's very type: calls are type-checked
            same = [n for n, i in self.visible(lambda i, t=p.type: i.sure and i.type == t)]
            if same:
                args.append(Var(self.pick(same)))
            elif isinstance(p.type, ScalarType) and p.type.dtype in NUMERIC_DTYPES:
                args.append(self.const(p.type.dtype))
            elif p.type == ScalarType(BOOL):
                args.append(ConstBool(self.chance(50)))
            else:
                return [EvalStmt(self.op_call())]
        n_kw = self.num(0, len(args))
        pos = tuple(args[: len(args) - n_kw])
        kw = tuple((p.name, a) for p, a in zip(f.params[len(args) - n_kw:], args[len(args) - n_kw:]))
        call = Call(f.name, pos, kw, kind="func")
        if not f.returns:
            return [EvalStmt(call)]
        t = f.returns[0] if len(f.returns) == 1 and not f.returns_tuple else TupleType(tuple(f.returns))
        name = self.fresh("r")
        self.define(name, Info(self.kind_of(t), t, sure=True))
        return [AssignStmt(Var(name), call, t if self.chance(60) else None)]

    def carried_init(self) -> tuple[Expr, Info]:
        """An initial value for a loop-carried name and what the name then holds."""
        candidates = self.visible(lambda i: i.kind in ("tile", "tensor") and i.sure)
        if candidates and self.chance(50):
            n, i = self.pick(candidates)
            return Var(n), Info(i.kind, i.type, sure=True)
        d = self.pick(NUMERIC_DTYPES)
        return self.const(d), Info("scalar", ScalarType(d), sure=True)

    def next_value(self, info: Info) -> Expr:
        """A value to yield for a carried name holding `info`."""
        if info.kind == "scalar":
            return self.scalar(info.type.dtype, 2)
        same = [n for n, i in self.visible(lambda i: i.kind == info.kind and i.type == info.type)]
        return Var(self.pick(same)) if same else self.op_call()

    def yield_stmt(self, targets: list[str], infos: list[Info]) -> YieldStmt:
        values = tuple(self.next_value(i) for i in infos)
        ann = None
        if len(targets) == 1 and self.chance(60):
            ann = infos[0].type
        return YieldStmt(tuple(Var(t) for t in targets), values, ann)

    def loop_body(self, depth: int, carried: list[str], infos: list[Info], results: list[str]) -> tuple:
        self.scopes.append({})
        for n, i in zip(carried, infos):
            self.define(n, Info(i.kind, i.type, known_scalar=False, sure=i.sure))
        body = self.stmt_list(depth - 1, 3) if (not carried or self.chance(80)) else []
        if carried:
            body.append(self.yield_stmt(results, infos))
        self.scopes.pop()
        return tuple(body) if body else (PassStmt(),)

    def for_loop(self, depth: int) -> ForStmt:
        kind = self.pick(["range", "range", "parallel", "unroll", "pipeline", "split_aiv"])  # pl.spmd: a scope
        var = self.fresh("i")
        nargs = 1 if kind in ("spmd", "split_aiv") else self.num(1, 3)
        args = tuple(self.scalar(INDEX, 1) for _ in range(nargs))
        kwargs: tuple = ()
        if kind == "pipeline":
            kwargs = (("stage", ConstInt(2, INDEX)),)
        elif kind == "split_aiv":
            kwargs = (("mode", EnumLit("SplitMode", "UP_DOWN")),)
        k = self.num(0, 3)
        inits, infos = [], []
        for _ in range(k):
            e, i = self.carried_init()
            inits.append(e)
            infos.append(i)
        carried = [self.fresh("c") for _ in range(k)]
        results = [self.fresh("o") for _ in range(k)]
        self.scopes.append({var: Info("scalar", ScalarType(INDEX), known_scalar=True, sure=True)})
        body = self.loop_body(depth, carried, infos, results)
        self.scopes.pop()
        for n, i in zip(results, infos):
            self.define(n, Info(i.kind, i.type, sure=False))
        return ForStmt(kind, Var(var), args, body, tuple(Var(c) for c in carried), tuple(inits), kwargs)

    def while_loop(self, depth: int) -> WhileStmt:
        k = self.num(1, 3)
        inits, infos = [], []
        for _ in range(k):
            e, i = self.carried_init()
            inits.append(e)
            infos.append(i)
        carried = [self.fresh("w") for _ in range(k)]
        results = [self.fresh("o") for _ in range(k)]
        self.scopes.append({})
        for n, i in zip(carried, infos):
            self.define(n, Info(i.kind, i.type, sure=i.sure))
        cond = self.scalar(BOOL, 3)
        self.scopes.pop()
        body = self.loop_body(depth, carried, infos, results)
        for n, i in zip(results, infos):
            self.define(n, Info(i.kind, i.type, sure=False))
        kwargs = (("max_iter", ConstInt(100, INDEX)),) if self.chance(10) else ()
        return WhileStmt(tuple(Var(c) for c in carried), tuple(inits), cond, body, kwargs)

    def branch(self, depth: int, results: list[str], infos: list[Info], allow_elif: bool) -> tuple:
        self.scopes.append({})
        if allow_elif and self.chance(30):
            body = [self.if_stmt(depth - 1, results_override=(results, infos))] if results else \
                [self.if_stmt(depth - 1)]
            if results:  # the nested if yields into fresh names; this branch passes them on
                inner = body[0].then_body[-1].targets
                body.append(YieldStmt(tuple(Var(r) for r in results), tuple(inner), None))
        else:
            body = self.stmt_list(depth - 1, 3) if self.chance(80) else []
            if results:
                body.append(self.yield_stmt(results, infos))
        self.scopes.pop()
        return tuple(body) if body else (PassStmt(),)

    def if_stmt(self, depth: int, results_override=None) -> IfStmt:
        cond = self.scalar(BOOL, 3)
        if results_override is not None:
            _, infos = results_override
            results = [self.fresh("y") for _ in infos]
        else:
            k = self.num(0, 2)
            infos = [self.carried_init()[1] for _ in range(k)]
            results = [self.fresh("y") for _ in range(k)]
        then = self.branch(depth, results, infos, allow_elif=False)
        if results or self.chance(60):
            orelse = self.branch(depth, results, infos, allow_elif=depth > 1)
        else:
            orelse = ()
        for n, i in zip(results, infos):
            self.define(n, Info(i.kind, i.type, sure=False))
        return IfStmt(cond, then, orelse)

    def scope(self, depth: int) -> ScopeStmt:
        kind = self.pick(SCOPE_KINDS)
        args: tuple = ()
        kwargs: tuple = ()
        var = None
        if kind == "at":
            kwargs = (("level", EnumLit("Level", "CORE_GROUP")),)
        elif kind == "spmd":
            args = (ConstInt(self.num(1, 8), INDEX),)
            if self.chance(60):
                var = Var(self.fresh("tid"))
                self.define(var.name, Info("scalar", ScalarType(INDEX), known_scalar=True, sure=True))
        # a scope is a region of the same function: what it defines stays visible after it
        body = tuple(self.stmt_list(depth - 1, 3))
        return ScopeStmt(kind, args, body or (PassStmt(),), kwargs, var)

    # ---------------------------------------------------------------- functions and programs
    def function(self, name: str, bare: bool) -> Function:
        self.scopes = [{}]
        params = []
        for _ in range(self.num(0, 4)):
            pn = self.fresh("p")
            r = self.num(0, 9)
            earlier = [q.type for f in self.functions for q in f.params]
            if earlier and self.chance(50):  # a type an earlier function takes: this one can call it
                t = self.pick(earlier)
            elif r < 3:
                t: Type = ScalarType(self.pick(NUMERIC_DTYPES + [BOOL]))
            elif r < 7:
                t = self.tensor_type()
            else:
                t = self.tile_type()
            direction = self.pick(["In", "In", "Out", "InOut"]) if not isinstance(t, ScalarType) else "In"
            params.append(Param(pn, t, direction))
            self.define(pn, Info(self.kind_of(t), t, known_scalar=isinstance(t, ScalarType), sure=True))
        attrs = None
        if self.chance(15):
            attrs = tuple((StrLit(k), self.pick([ConstBool(True), ConstInt(self.num(-3, 3), INDEX)]))
                          for k in self.draw(st.lists(st.sampled_from(["nz_tensor_views_blocked", "k", "v"]),
                                                      max_size=2, unique=True)))
        body = self.stmt_list(3, 6) if (attrs is None or self.chance(80)) else []
        returns: tuple = ()
        returns_tuple = False
        if self.chance(70):
            sure = self.visible(lambda i: i.sure and i.kind in ("tile", "tensor", "scalar"))
            if sure:
                chosen = self.draw(st.lists(st.sampled_from(sure), min_size=1, max_size=3))
                returns = tuple(i.type for _, i in chosen)
                returns_tuple = len(returns) > 1 or self.chance(20)
                body.append(ReturnStmt(tuple(Var(n) for n, _ in chosen)))
            else:
                body.append(ReturnStmt())
        func_type = self.pick(FUNCTION_TYPES)
        deco: tuple = ()
        if self.chance(25):
            deco = (("level", EnumLit("Level", self.pick(["AIV", "CHIP", "CORE_GROUP"]))),
                    ("role", EnumLit("Role", self.pick(["SubWorker", "Orchestrator"]))))
        has_self = self.chance(30) if bare else self.chance(85)
        if not body and attrs is None:
            body = [PassStmt()]
        return Function(name, tuple(params), returns, tuple(body), func_type, deco, has_self, returns_tuple, attrs)

    def program(self) -> Program:
        self.dyn = self.draw(st.lists(st.sampled_from(DYN_NAMES), max_size=2, unique=True))
        n_funcs = self.num(1, 3)
        bare = n_funcs == 1 and self.chance(20)
        for j in range(n_funcs):
            self.functions.append(self.function(f"f{j}_{self.fresh('k')}", bare))
        name = self.functions[0].name if bare else f"prog_{self.num(0, 99)}"
        return Program(name, tuple(self.functions), tuple(DynDim(d, d) for d in self.dyn), bare)


@st.composite
def programs(draw) -> Program:
    return Gen(draw).program()


def _check_roundtrip(prog: Program) -> str:
    diags = verify_program(prog, check_ops=False)
    assert not diags, "generator built an ill-formed program: " + "; ".join(
        f"{d.code} {d.message}" for d in diags[:5])
    text = print_program(prog)
    back = parse_program(text, "<printed>", verify=False)
    assert_same_ir(back, prog)
    assert print_program(back) == text, "printing is not idempotent"
    return text


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(programs())
def test_random_programs_roundtrip(prog):
    text = _check_roundtrip(prog)
    ast.parse(text)  # the printed text is Python


def _ruff() -> list[str] | None:
    exe = shutil.which("ruff")
    if exe:
        return [exe]
    try:
        import ruff  # noqa: F401
    except ImportError:
        return None
    return [sys.executable, "-m", "ruff"]


@pytest.mark.skipif(_ruff() is None, reason="ruff is not installed")
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(programs())
def test_ruff_formatted_programs_parse_to_the_same_ir(prog):
    text = _check_roundtrip(prog)
    res = subprocess.run(_ruff() + ["format", "--isolated", "--line-length", "200", "-"], input=text,
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    formatted = res.stdout
    back = parse_program(formatted, "<ruff>", verify=False)
    assert_same_ir(back, prog)
    assert print_program(back) == text


# ----------------------------------------------------------------------------------------------
# Expressions against CPython's parser (an oracle independent of ptoc's grammar)
# ----------------------------------------------------------------------------------------------

_LEAVES = st.one_of(
    st.sampled_from([Var("a"), Var("b"), Var("c")]),
    st.integers(-50, 50).map(lambda v: ConstInt(v, INDEX)),
    st.floats(-1e6, 1e6, allow_nan=False).map(lambda v: ConstFloat(v, FP32)),
    st.booleans().map(ConstBool),
    st.tuples(st.integers(-9, 9), st.sampled_from([INT64, dt.INT8, dt.BY_NAME["UINT16"]])).map(lambda t: ConstInt(*t)),
    st.tuples(st.sampled_from([-1.5, 0.25, 2.0]), st.sampled_from([dt.FP16, dt.BF16])).map(lambda t: ConstFloat(*t)),
)
_ALL_BINOPS = INT_BINOPS + COMPARE + ["and", "or"]


def _extend(children):
    return st.one_of(
        st.tuples(st.sampled_from(_ALL_BINOPS), children, children).map(lambda t: BinOp(*t)),
        st.tuples(st.sampled_from(["-", "~", "not"]), children).map(lambda t: UnaryOp(*t)),
        st.tuples(st.sampled_from(["min", "max"]), children, children).map(lambda t: MinMax(*t)),
        children.map(Abs),
        st.tuples(children, st.integers(0, 2)).map(lambda t: GetItem(t[0], ConstInt(t[1], INDEX))),
    )


expressions = st.recursive(_LEAVES, _extend, max_leaves=12)


def _reparse(e: Expr) -> Expr:
    text = ("import pypto.language as pl\n@pl.function\n"
            "def f(a: pl.Scalar[pl.INDEX], b: pl.Scalar[pl.INDEX], c: pl.Scalar[pl.INDEX]):\n"
            f"    r = {print_expr(e)}\n")
    return parse_program(text, verify=False).functions[0].body[0].value


@settings(max_examples=300, deadline=None)
@given(expressions)
def test_random_expressions_match_python_precedence(e):
    assert python_agrees(e), print_expr(e)
    assert_same_ir(_reparse(e), e)


def test_generated_names_are_not_keywords():
    # the generator's prefixes never produce a Python keyword or a reserved IR name
    for prefix in ("v", "s", "t", "e", "r", "c", "o", "w", "y", "i", "p", "mem", "tid", "k"):
        assert not keyword.iskeyword(prefix + "1") and prefix + "1" not in ("pl", "self")
