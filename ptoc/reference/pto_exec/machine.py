"""The `.pto` executor's machine: control flow, arith, scalars, the handler table (one family
module per op family contributes its handlers) and the entry points."""

from __future__ import annotations

import math
from dataclasses import dataclass
import re
from typing import Any, Sequence

import numpy as np

from ptoc.reference.pto_exec.text import (
    DEFAULT_CAPACITY,
    Func,
    Module,
    Op,
    PtoExecError,
    Tile,
    _UINT,
    _group,
    _int_bits,
    _is_float,
    _np_type,
    _parse_dps,
    _split_top,
    _ssa_names,
    _unsigned,
    _wrap,
    convert,
    parse_module,
)
from ptoc.reference.pto_exec.memory import MemoryOps, _Ptr
from ptoc.reference.pto_exec.elementwise import ElementwiseOps
from ptoc.reference.pto_exec.reduction import ReductionOps
from ptoc.reference.pto_exec.matmul import MatmulOps
from ptoc.reference.pto_exec.layout import LayoutOps
from ptoc.reference.pto_exec.gather import GatherOps
from ptoc.reference.pto_exec.cross_core import CrossCoreOps
from ptoc.reference.pto_exec import cross_core as cross_core_ops
from ptoc.reference.pto_exec import memory as memory_ops
from ptoc.reference.pto_exec import elementwise as elementwise_ops
from ptoc.reference.pto_exec import reduction as reduction_ops
from ptoc.reference.pto_exec import matmul as matmul_ops
from ptoc.reference.pto_exec import layout as layout_ops
from ptoc.reference.pto_exec import gather as gather_ops



# An scf.while that runs longer than this is reported instead of hanging the run.
MAX_WHILE_ITERATIONS = 1 << 20


@dataclass
class _Condition:
    """What an `scf.condition` passes on: whether the loop goes on, and the values it forwards."""

    holds: bool
    values: list


def _divsi(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def _remsi(a: int, b: int) -> int:
    r = abs(a) % abs(b)
    return r if a >= 0 else -r


# arith integer ops on Python ints (operands already wrapped to `bits`); the result is wrapped after
_INT_OPS = {
    "addi": lambda a, b, bits: a + b,
    "subi": lambda a, b, bits: a - b,
    "muli": lambda a, b, bits: a * b,
    "divsi": lambda a, b, bits: _divsi(a, b),
    "divui": lambda a, b, bits: _unsigned(a, bits) // _unsigned(b, bits),
    "floordivsi": lambda a, b, bits: a // b,
    "ceildivsi": lambda a, b, bits: -((-a) // b),
    "remsi": lambda a, b, bits: _remsi(a, b),
    "remui": lambda a, b, bits: _unsigned(a, bits) % _unsigned(b, bits),
    "minsi": lambda a, b, bits: min(a, b),
    "maxsi": lambda a, b, bits: max(a, b),
    "minui": lambda a, b, bits: a if _unsigned(a, bits) <= _unsigned(b, bits) else b,
    "maxui": lambda a, b, bits: a if _unsigned(a, bits) >= _unsigned(b, bits) else b,
    "andi": lambda a, b, bits: a & b,
    "ori": lambda a, b, bits: a | b,
    "xori": lambda a, b, bits: a ^ b,
    "shli": lambda a, b, bits: a << b if 0 <= b < bits else 0,
    "shrsi": lambda a, b, bits: a >> min(b, bits - 1),
    "shrui": lambda a, b, bits: _unsigned(a, bits) >> b if b < bits else 0,
}

class Interpreter(MemoryOps, ElementwiseOps, ReductionOps, MatmulOps, LayoutOps, GatherOps, CrossCoreOps):
    def __init__(self, module: Module, func: Func, buffers: list[bytearray], env: dict[str, Any],
                 block_idx: int = 0, block_num: int = 1, poison: int = 0xFF):
        self.module = module
        self.func = func
        self.buffers = buffers
        self.env = env
        self.block_idx = block_idx
        self.block_num = block_num
        self.poison = poison
        self.mem: dict[str, bytearray] = {}
        self.arch = None
        try:
            from ptoc.target.arch import get_arch

            self.arch = get_arch(module.arch)
        except (ImportError, ValueError):
            self.arch = None
        self.gm: list[np.ndarray] = []

    # ------------------------------------------------------------------ values
    def get(self, name: str, line: int):
        name = name.lstrip("%")
        if name not in self.env:
            raise PtoExecError(f"%{name} is used but not defined", line)
        return self.env[name]

    def int_of(self, name: str, line: int) -> int:
        v = self.get(name, line)
        if isinstance(v, (bool, np.bool_)):
            return int(v)
        if isinstance(v, (int, np.integer)):
            return int(v)
        raise PtoExecError(f"%{name.lstrip('%')} is not an integer value", line)

    def tile(self, name: str, line: int) -> Tile:
        v = self.get(name, line)
        if not isinstance(v, Tile):
            raise PtoExecError(f"%{name.lstrip('%')} is not a tile", line)
        return v

    def capacity(self, loc: str) -> int:
        if self.arch is not None:
            space = {"vec": "Vec", "mat": "Mat", "left": "Left", "right": "Right", "acc": "Acc",
                     "bias": "Bias"}.get(loc)
            cap = self.arch.capacity(space) if space else None
            if cap:
                return cap
        return DEFAULT_CAPACITY

    # ------------------------------------------------------------------ running
    def run(self) -> None:
        self.block(self.func.body)

    def block(self, ops: list[Op]) -> list | _Condition | None:
        for op in ops:
            if op.name == "scf.yield":
                return self.yield_values(op)
            if op.name == "scf.condition":
                return self.condition(op)
            if op.name == "return":
                return None
            if op.name == "^block":
                raise PtoExecError("a block label outside the start of an scf.while region", op.line)
            self.exec(op)
        return None

    def condition(self, op: Op) -> _Condition:
        m = re.match(r"\s*\(\s*(%[^)\s]+)\s*\)(.*)$", op.rest)
        if not m:
            raise PtoExecError(f"malformed scf.condition: {op.rest.strip()!r}", op.line)
        body = m.group(2).split(" : ")[0]
        return _Condition(bool(self.int_of(m.group(1), op.line)), [self.get(n, op.line) for n in _ssa_names(body)])

    def exec(self, op: Op) -> None:
        h = _HANDLERS.get(op.name)
        if h is None:
            if op.name.startswith("arith."):
                h = Interpreter.arith
            else:
                raise PtoExecError(f"unsupported op {op.name}", op.line)
        try:
            h(self, op)
        except PtoExecError as e:
            if e.line is None:
                raise PtoExecError(str(e), op.line) from None
            raise
        except (ValueError, IndexError, KeyError, TypeError, ZeroDivisionError, OverflowError) as e:
            raise PtoExecError(f"{op.name}: {type(e).__name__}: {e}", op.line) from None

    def yield_values(self, op: Op) -> list:
        body = op.rest.split(" : ")[0]
        return [self.get(n, op.line) for n in _ssa_names(body)]

    def bind(self, op: Op, values: list) -> None:
        if len(values) != len(op.results):
            raise PtoExecError(f"{op.name} yields {len(values)} values for {len(op.results)} results", op.line)
        for r, v in zip(op.results, values):
            self.env[r] = v

    # ------------------------------------------------------------------ control flow
    def scf_for(self, op: Op) -> None:
        m = re.match(r"\s*%([A-Za-z0-9_$.]+)\s*=\s*(%\S+)\s+to\s+(%\S+)\s+step\s+(%\S+)(.*)$", op.rest)
        if not m:
            raise PtoExecError(f"malformed scf.for: {op.rest.strip()!r}", op.line)
        iv = m.group(1)
        lb, ub, st = (self.int_of(m.group(k), op.line) for k in (2, 3, 4))
        if st <= 0:
            raise PtoExecError(f"scf.for step {st} is not positive", op.line)
        tail = m.group(5).strip()
        carried: list[str] = []
        values: list = []
        if tail.startswith("iter_args"):
            inner, _ = _group(tail, "iter_args(")
            for item in _split_top(inner):
                mi = re.fullmatch(r"%([A-Za-z0-9_$.]+)\s*=\s*(%\S+)", item)
                if not mi:
                    raise PtoExecError(f"malformed iter_args entry {item!r}", op.line)
                carried.append(mi.group(1))
                values.append(self.get(mi.group(2), op.line))
        body = op.regions[0]
        i = lb
        while i < ub:
            self.env[iv] = i
            for a, v in zip(carried, values):
                self.env[a] = v
            y = self.block(body)
            if carried:
                if y is None or len(y) != len(carried):
                    raise PtoExecError("scf.for with iter_args needs an scf.yield of as many values", op.line)
                values = y
            i += st
        if op.results:
            self.bind(op, values)

    def scf_while(self, op: Op) -> None:
        """`scf.while (%b = %init, ...) : (T...) -> (T...) { before } do { ^bb0(%a : T, ...): after }`: the
        before region sees the carried values and ends in `scf.condition(%c) %v...`; while %c holds, the
        after region gets %v... as its block arguments and yields the next carried values; the op's results
        are the values of the last scf.condition."""
        m = re.match(r"\s*\((.*?)\)\s*:", op.rest)
        if not m or len(op.regions) != 2:
            raise PtoExecError(f"malformed scf.while: {op.rest.strip()!r}", op.line)
        carried: list[str] = []
        values: list = []
        for item in _split_top(m.group(1)):
            mi = re.fullmatch(r"%([A-Za-z0-9_$.]+)\s*=\s*(%\S+)", item)
            if not mi:
                raise PtoExecError(f"malformed scf.while operand {item!r}", op.line)
            carried.append(mi.group(1))
            values.append(self.get(mi.group(2), op.line))
        before, after = op.regions
        label: list[str] = []
        if after and after[0].name == "^block":
            label, after = after[0].results, after[1:]
        n = 0
        while True:
            for a, v in zip(carried, values):
                self.env[a] = v
            c = self.block(before)
            if not isinstance(c, _Condition):
                raise PtoExecError("the before region of scf.while must end in scf.condition", op.line)
            if not c.holds:
                values = c.values
                break
            if len(c.values) != len(label):
                raise PtoExecError(f"scf.condition passes {len(c.values)} values to a do region of "
                                   f"{len(label)} arguments", op.line)
            for a, v in zip(label, c.values):
                self.env[a] = v
            y = self.block(after)
            if not isinstance(y, list) or len(y) != len(carried):
                raise PtoExecError("the do region of scf.while must yield one value per operand", op.line)
            values = y
            n += 1
            if n > MAX_WHILE_ITERATIONS:
                raise PtoExecError(f"scf.while ran more than {MAX_WHILE_ITERATIONS} iterations", op.line)
        if op.results or values:
            self.bind(op, values)

    def barrier(self, op: Op) -> None:
        """`pto.barrier <PIPE_x>`: waits for the pipe's earlier instructions; this executor runs every
        instruction to completion in program order, so there is nothing left to wait for."""
        if not re.fullmatch(r"\s*<PIPE_[A-Z0-9_]+>\s*", op.rest):
            raise PtoExecError(f"malformed pto.barrier: {op.rest.strip()!r}", op.line)

    def scf_if(self, op: Op) -> None:
        m = re.match(r"\s*(%\S+)", op.rest)
        if not m:
            raise PtoExecError("malformed scf.if", op.line)
        c = self.int_of(m.group(1), op.line)
        if c:
            y = self.block(op.regions[0])
        elif len(op.regions) > 1:
            y = self.block(op.regions[1])
        else:
            y = None
        if op.results:
            if y is None:
                raise PtoExecError("scf.if with results needs an scf.yield in the branch taken", op.line)
            self.bind(op, y)

    # ------------------------------------------------------------------ scalar arithmetic
    def arith(self, op: Op) -> None:
        kind = op.name.split(".", 1)[1]
        rest = op.rest.strip()
        if kind == "constant":
            self.env[op.results[0]] = self.constant(rest, op.line)
            return
        if " to " in rest and kind in _CASTS:
            mc = re.fullmatch(r"(%\S+)\s*:\s*(\S+)\s+to\s+(\S+)", rest)
            if not mc:
                raise PtoExecError(f"malformed {op.name}", op.line)
            self.env[op.results[0]] = self.cast(kind, self.get(mc.group(1), op.line), mc.group(2), mc.group(3),
                                                op.line)
            return
        body, _, t = rest.rpartition(" : ")
        t = t.strip()
        if not body:
            raise PtoExecError(f"malformed {op.name} (no type)", op.line)
        if kind in ("cmpi", "cmpf"):
            pred, _, operands = body.partition(",")
            a, b = (self.get(n, op.line) for n in _ssa_names(operands))
            self.env[op.results[0]] = int(self.compare(kind, pred.strip(), a, b, t, op.line))
            return
        names = _ssa_names(body)
        vals = [self.get(n, op.line) for n in names]
        if kind == "select":
            c, a, b = vals
            self.env[op.results[0]] = a if int(c) else b
            return
        bits = _int_bits(t)
        if bits is not None:
            self.env[op.results[0]] = self.int_op(kind, [int(v) for v in vals], bits, op.line)
            return
        ft = _np_type(t, op.line)
        fv = [ft.type(v) for v in vals]
        with np.errstate(all="ignore"):
            if kind == "negf":
                r = -fv[0]
            else:
                a, b = fv
                r = {"addf": lambda: a + b, "subf": lambda: a - b, "mulf": lambda: a * b,
                     "divf": lambda: a / b, "remf": lambda: np.fmod(a, b),
                     "maximumf": lambda: np.maximum(a, b), "minimumf": lambda: np.minimum(a, b),
                     "maxnumf": lambda: np.fmax(a, b), "minnumf": lambda: np.fmin(a, b)}.get(kind, lambda: None)()
                if r is None:
                    raise PtoExecError(f"unsupported op {op.name}", op.line)
        self.env[op.results[0]] = ft.type(r)

    def constant(self, rest: str, line: int):
        if rest in ("true", "false"):
            return int(rest == "true")
        m = re.fullmatch(r"(\S+)\s*:\s*(\S+)", rest)
        if not m:
            raise PtoExecError(f"malformed arith.constant {rest!r}", line)
        text, t = m.groups()
        bits = _int_bits(t)
        if bits is not None:
            if text in ("true", "false"):
                return int(text == "true")
            return _wrap(int(text, 0), bits)
        ft = _np_type(t, line)
        if text.lower().startswith("0x"):
            raw = int(text, 16)
            return np.array([raw], dtype=_UINT[ft.itemsize]).view(ft)[0]
        return ft.type(float(text))

    def int_op(self, kind: str, v: list[int], bits: int, line: int) -> int:
        a = v[0]
        b = v[1] if len(v) > 1 else None
        if kind in ("divsi", "divui", "floordivsi", "ceildivsi", "remsi", "remui") and b == 0:
            raise PtoExecError(f"arith.{kind} by zero", line)
        fn = _INT_OPS.get(kind)
        if fn is None:
            raise PtoExecError(f"unsupported op arith.{kind}", line)
        return _wrap(fn(a, b, bits), bits)

    def compare(self, kind: str, pred: str, a, b, t: str, line: int) -> bool:
        if kind == "cmpi":
            bits = _int_bits(t) or 64
            a, b = int(a), int(b)
            if pred.startswith("u"):
                a, b = _unsigned(a, bits), _unsigned(b, bits)
            ops = {"eq": a == b, "ne": a != b, "slt": a < b, "sle": a <= b, "sgt": a > b, "sge": a >= b,
                   "ult": a < b, "ule": a <= b, "ugt": a > b, "uge": a >= b}
        else:
            a, b = float(a), float(b)
            un = math.isnan(a) or math.isnan(b)
            ops = {"false": False, "true": True, "ord": not un, "uno": un,
                   "oeq": a == b, "one": not un and a != b, "olt": a < b, "ole": a <= b, "ogt": a > b,
                   "oge": a >= b, "ueq": un or a == b, "une": un or a != b, "ult": un or a < b,
                   "ule": un or a <= b, "ugt": un or a > b, "uge": un or a >= b}
        if pred not in ops:
            raise PtoExecError(f"unknown arith.{kind} predicate {pred!r}", line)
        return ops[pred]

    def cast(self, kind: str, v, src: str, dst: str, line: int):
        sb, db = _int_bits(src), _int_bits(dst)
        if kind in ("index_cast", "extsi", "trunci"):
            return _wrap(_wrap(int(v), sb or 64), db or 64)
        if kind in ("index_castui", "extui"):
            return _wrap(_unsigned(int(v), sb or 64), db or 64)
        if kind in ("sitofp", "uitofp"):
            iv = _wrap(int(v), sb or 64) if kind == "sitofp" else _unsigned(int(v), sb or 64)
            return _np_type(dst, line).type(iv)
        if kind in ("fptosi", "fptoui"):
            f = float(v)
            if math.isnan(f) or math.isinf(f):
                raise PtoExecError(f"arith.{kind} of {f}", line)
            return _wrap(int(f), db or 64)
        if kind in ("extf", "truncf"):
            return _np_type(dst, line).type(np.float64(v))
        if kind == "bitcast":
            st, dt = _np_type(src, line), _np_type(dst, line)
            return np.array([v], dtype=st).view(dt)[0]
        raise PtoExecError(f"unsupported op arith.{kind}", line)

    # ------------------------------------------------------------------ misc pto scalar ops
    def block_idx_op(self, op: Op) -> None:
        self.env[op.results[0]] = self.block_idx

    def block_num_op(self, op: Op) -> None:
        self.env[op.results[0]] = self.block_num

    def subblock_idx_op(self, op: Op) -> None:
        from ptoc.reference import pipes

        run = pipes.current()  # the lane this vector kernel runs as (0 outside a Group launch)
        self.env[op.results[0]] = run[0].lane(run[1]) if run is not None else 0

    def _ins(self, op: Op, n: int | None = None) -> list:
        vals = []
        for name, ty in zip(op.p["ins"], op.p["ins_t"]):
            v = self.get(name, op.line)
            if ty.startswith("!pto.tile_buf") and not isinstance(v, Tile):
                raise PtoExecError(f"%{name} is not a tile", op.line)
            vals.append(v)
        if n is not None and len(vals) != n:
            raise PtoExecError(f"{op.name} takes {n} inputs, got {len(vals)}", op.line)
        return vals

    def _dst(self, op: Op) -> Tile:
        if len(op.p["outs"]) != 1:
            raise PtoExecError(f"{op.name} needs one outs tile", op.line)
        return self.tile(op.p["outs"][0], op.line)

    @staticmethod
    def _work_type(dt: np.dtype) -> np.dtype:
        if _is_float(dt):
            return np.dtype(np.float64) if dt == np.float64 else np.dtype(np.float32)
        return np.dtype(np.int64)

    def _write(self, dst: Tile, vals, rows: int | None = None, cols: int | None = None) -> None:
        """Store computed values into dst's region: floats round to dst's type, integers wrap."""
        rows = dst.vr if rows is None else rows
        cols = dst.vc if cols is None else cols
        v = np.asarray(vals)
        with np.errstate(all="ignore"):
            if _is_float(dst.dtype):
                out = v.astype(dst.dtype)
            elif _is_float(v.dtype):
                out = convert(v, dst.dtype, "TRUNC")
            else:
                out = v.astype(np.int64).astype(dst.dtype)
        dst.arr[:rows, :cols] = out

    def _region(self, t: Tile, rows: int, cols: int, line: int, what: str) -> np.ndarray:
        if rows > t.rows or cols > t.cols:
            raise PtoExecError(f"{what}: reads {rows} x {cols} of the {t.rows} x {t.cols} tile %{t.name}", line)
        return t.arr[:rows, :cols]


_CASTS = {"index_cast", "index_castui", "extsi", "extui", "trunci", "sitofp", "uitofp", "fptosi", "fptoui",
          "extf", "truncf", "bitcast"}

_HANDLERS: dict[str, Any] = {"scf.for": Interpreter.scf_for, "scf.if": Interpreter.scf_if,
                             "scf.while": Interpreter.scf_while, "pto.barrier": Interpreter.barrier,
                             "pto.get_block_idx": Interpreter.block_idx_op,
                             "pto.get_block_num": Interpreter.block_num_op,
                             "pto.get_subblock_idx": Interpreter.subblock_idx_op}
for _family in (memory_ops, elementwise_ops, reduction_ops, matmul_ops, layout_ops, gather_ops, cross_core_ops):
    _HANDLERS.update({k: getattr(Interpreter, v) for k, v in _family.HANDLERS.items()})

_ARITH = {"constant", "addi", "subi", "muli", "divsi", "divui", "floordivsi", "ceildivsi", "remsi", "remui",
          "minsi", "maxsi", "minui", "maxui", "andi", "ori", "xori", "shli", "shrsi", "shrui", "cmpi", "cmpf",
          "select", "addf", "subf", "mulf", "divf", "remf", "maximumf", "minimumf", "maxnumf", "minnumf",
          "negf"} | _CASTS
_DPS = {k for k in _HANDLERS if k.startswith("pto.t") and k not in ("pto.tgetval", "pto.treshape")
        and k not in cross_core_ops.HANDLERS}


def _prepare(ops: list[Op]) -> None:
    """Check every op name is supported and pre-parse DPS operand lists (errors carry the line)."""
    for op in ops:
        if op.name in ("return", "scf.yield", "scf.condition", "^block"):
            pass
        elif op.name.startswith("arith."):
            if op.name[len("arith."):] not in _ARITH:
                raise PtoExecError(f"unsupported op {op.name}", op.line)
        elif op.name not in _HANDLERS:
            raise PtoExecError(f"unsupported op {op.name}", op.line)
        if op.name in _DPS:
            try:
                op.p.update(_parse_dps(op.rest))
            except ValueError as e:
                raise PtoExecError(f"malformed {op.name}: {e}", op.line) from None
        for r in op.regions:
            _prepare(r)


# --------------------------------------------------------------------------------------------------
# entry points
# --------------------------------------------------------------------------------------------------

def _scalar_value(v, t: str, line: int):
    bits = _int_bits(t)
    if t == "i1":
        return int(bool(v))
    if bits is not None:
        if isinstance(v, (float, np.floating)) and not float(v).is_integer():
            raise PtoExecError(f"argument value {v} for an {t} parameter", line)
        return _wrap(int(v), bits)
    return _np_type(t, line).type(v)


def _func(module: Module, name: str) -> Func:
    f = module.funcs.get(name)
    if f is None:
        raise PtoExecError(f"no func.func @{name} (the module has {', '.join(module.funcs) or 'none'})")
    return f


def run_pto(text: str, func_name: str, args: Sequence, dyn_dims: Sequence[int] = (), *, block_idx: int = 0,
            block_num: int = 1, poison: int = 0xFF, share: bool = False) -> list[bytes]:
    """Execute `func_name` of the `.pto` module `text`; return the tensor buffers afterwards (%argN order).

    `args`: one value per %argN except the trailing dynamic-dimension `index` arguments, which take
    `dyn_dims` (GM tensors: bytes-like; scalars: int / float). `share`: a `bytearray` argument is the GM
    buffer itself (written in place, as another kernel running at the same time sees it), not a copy.
    """
    module = parse_module(text)
    func = _func(module, func_name)
    _prepare(func.body)
    all_args = list(args) + list(dyn_dims)
    if len(all_args) != len(func.args):
        raise PtoExecError(f"@{func_name} takes {len(func.args)} arguments ({len(args)} args + {len(dyn_dims)} "
                           f"dynamic dims given)", func.line)
    env: dict[str, Any] = {}
    buffers: list[bytearray] = []
    gm: list[np.ndarray] = []
    tensor_slots: list[int] = []
    for (name, t), v in zip(func.args, all_args):
        m = re.fullmatch(r"!pto\.ptr<(.+)>", t)
        if m:
            dt = _np_type(m.group(1), func.line)
            try:
                buf = v if share and isinstance(v, bytearray) else bytearray(
                    v.tobytes() if isinstance(v, np.ndarray) else memoryview(v).cast("B"))
            except TypeError:
                raise PtoExecError(f"%{name} is a GM tensor ({t}): pass a bytes-like buffer, not "
                                   f"{type(v).__name__}", func.line) from None
            env[name] = _Ptr(len(buffers), dt)
            tensor_slots.append(len(buffers))
            buffers.append(buf)
            gm.append(np.frombuffer(buf, dtype=dt, count=len(buf) // dt.itemsize))
        else:
            if isinstance(v, (bytes, bytearray, memoryview, np.ndarray)):
                raise PtoExecError(f"%{name} is a {t} scalar, got a buffer", func.line)
            env[name] = _scalar_value(v, t, func.line)
    it = Interpreter(module, func, buffers, env, block_idx=block_idx, block_num=block_num, poison=poison)
    it.gm = gm
    it.run()
    return [bytes(b) for b in buffers]


def pack_logical(array: np.ndarray, layout: str, dtype) -> bytes:
    """The GM bytes of a logical array in layout ND, DN (last two axes column-major) or NZ."""
    a = np.asarray(array).astype(np.dtype(dtype), copy=False)
    layout = layout.upper()
    if layout == "ND":
        return np.ascontiguousarray(a).tobytes()
    if layout == "DN":
        if a.ndim < 2:
            raise ValueError("a DN array needs rank >= 2")
        return np.ascontiguousarray(np.swapaxes(a, -1, -2)).tobytes()
    if layout == "NZ":
        from ptoc.reference import nz_pack

        return nz_pack.pack(np.ascontiguousarray(a)).tobytes()
    raise ValueError(f"unknown layout {layout!r} (ND, DN or NZ)")


def unpack_logical(data: bytes, layout: str, dtype, shape) -> np.ndarray:
    dt = np.dtype(dtype)
    shape = tuple(shape)
    flat = np.frombuffer(data, dtype=dt)
    layout = layout.upper()
    if layout == "ND":
        return flat.reshape(shape).copy()
    if layout == "DN":
        s = shape[:-2] + (shape[-1], shape[-2])
        return np.ascontiguousarray(np.swapaxes(flat.reshape(s), -1, -2))
    if layout == "NZ":
        from ptoc.reference import nz_pack

        return nz_pack.unpack(flat, shape).copy()
    raise ValueError(f"unknown layout {layout!r} (ND, DN or NZ)")


def run_pto_logical(text: str, func_name: str, tensors: dict, scalars: Sequence = (),
                    dyn_dims: Sequence[int] = (), shared: dict | None = None, keys: dict | None = None,
                    **kw) -> dict[int, np.ndarray]:
    """Pack `tensors` ({tensor param index: (logical array, layout)}), run, unpack every tensor.

    Every tensor parameter must be given (outputs too: their array gives the logical shape and the
    initial GM contents). Arrays are converted to the parameter's element type. `shared` ({key: GM
    bytearray}) with `keys` ({tensor param index: key}): the kernels of one launch share their GM, so a
    tensor packed by the first of them is the buffer the others read and write.
    """
    module = parse_module(text)
    func = _func(module, func_name)
    ptr_types = []
    for _, t in func.args:
        m = re.fullmatch(r"!pto\.ptr<(.+)>", t)
        if m:
            ptr_types.append(_np_type(m.group(1)))
    missing = [i for i in range(len(ptr_types)) if i not in tensors]
    if missing or set(tensors) - set(range(len(ptr_types))):
        raise PtoExecError(f"@{func_name} has {len(ptr_types)} tensor parameters; give each exactly once "
                           f"(missing {missing})")
    args: list = []
    for i, dt in enumerate(ptr_types):
        arr, layout = tensors[i]
        if shared is not None and keys is not None and i in keys:
            if keys[i] not in shared:
                shared[keys[i]] = bytearray(pack_logical(arr, layout, dt))
            args.append(shared[keys[i]])
        else:
            args.append(pack_logical(arr, layout, dt))
    args.extend(scalars)
    out = run_pto(text, func_name, args, dyn_dims, share=shared is not None, **kw)
    return {i: unpack_logical(out[i], tensors[i][1], ptr_types[i], np.shape(tensors[i][0]))
            for i in range(len(ptr_types))}


