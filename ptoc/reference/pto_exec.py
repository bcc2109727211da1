"""A numpy executor for the `.pto` text ptoc emits: it runs one `func.func` on global memory given as bytes.

Why: the emitter's shapes, strides, offsets, valid regions and tile addresses are what PTOAS and pto-isa
will trust blindly. This executor reads them back exactly as written (spec/pto-format.md) and computes
with them, so a wrong stride, offset or address shows up as a wrong result or an error here. It never
re-derives anything from the IR.

    run_pto(text, func_name, args, dyn_dims=()) -> list[bytes]
        `args`: the func's %argN in order, minus the trailing dynamic-dimension `index` arguments:
        GM tensors as bytes-like buffers (the bytes the kernel reads and writes), then scalars (int /
        float). `dyn_dims`: the values of the trailing `index` arguments. Returns the tensor buffers after
        execution, in %argN order.
    run_pto_logical(text, func_name, tensors, scalars=(), dyn_dims=()) -> dict[int, np.ndarray]
        `tensors`: {tensor param index: (logical array, "ND" | "DN" | "NZ")} for every tensor param; packs
        them (NZ: `[B, C/c0, R/16, 16, c0]`, DN: last two axes column-major), runs, and returns every
        tensor unpacked to the logical shape it was given in.

Semantics (pto-isa, as the `.pto` states them):
- `pto.make_tensor_view` = (buffer, shape, strides, layout) from its operands; `pto.partition_view`
  element (i_0..i_{n-1}) lives at element offset `sum((off_k + i_k) * stride_k)` of the view's buffer
  (the 5-D right-aligned GlobalTensor adds size-1 leading dims, which contribute nothing). Touching an
  element outside the buffer raises PtoExecError with the line number.
- tload/tstore with an ND/DN view: the partition, flattened to `[prod(shape[:-1]), shape[-1]]`, is the
  tile's valid region (pto-isa's checks `validRow == prod(shape[:-1])`, `validCol == shape[-1]` are
  enforced). NZ view: the partition must be rank 5 with `shape[3] == 16`, `shape[4] == 32 / sizeof(T)`;
  tile element `(rb*16 + i, (b*shape[1] + cb)*c0 + j)` = partition `[b, cb, rb, i, j]`.
  `atomicType = #pto<atomic_type atomic_add>` adds into GM.
- a tile handle is a logical `rows x cols` numpy array of its dtype plus a valid region. At level3 every
  handle is a view into a per-`loc` byte array at its `addr` (capacities of the module's target arch),
  so handles at overlapping addresses share bytes; at level2 (no `addr`) each handle is separate. Fresh
  on-chip memory is filled with 0xFF bytes (NaN / -1), so reading never-written tile data shows.
- elementwise ops work on the destination's valid region; row/column reductions on the source's;
  `tmatmul`: Left valid [M, K] x Right valid [K, N] -> Acc [M, N], accumulated in float64 for float
  inputs and exactly (int64) for integer inputs, then rounded / wrapped to the Acc dtype.
- tcvt honours rmode (RINT/NONE/CAST_RINT: nearest-even, ROUND: nearest-away, FLOOR, CEIL, TRUNC,
  ODD); float -> int and int -> narrower int saturate.
- scalars: integers wrap to their width (`index` is 64-bit); floats are numpy scalars of their type.
- tgather: mask form selects the marked columns (`output_dtype` reinterprets their bits); index form
  `ins(%src, %indices[, %tmp])` reads src's rows x cols storage at each flat index (dst's valid region).
  tscatter (index form): dst[indexes[i, j], j] = src[i, j] over src's valid region, the rest of dst kept.
  tgatherb: each offset is a byte offset into src's storage; its 32-byte block fills 32/sizeof(dst)
  columns. tci fills row 0 with start +/- k; ttri writes 1 where j <= i + d (lower) / j >= i + d (upper).
  tgetval / tsetval address row-major storage offset `off` = (off // cols, off % cols). Indices outside
  the tile raise PtoExecError.
- views: `pto.treshape` is the same bytes as another shape / dtype (a result with `?` valid starts fully
  valid until pto.set_validshape); `pto.subview` is a window of its source (writes go to the source).

Anything outside the subset raises PtoExecError naming the op and the line.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from ptoc.ir import dtypes as _dtypes


class PtoExecError(Exception):
    """The `.pto` text cannot be executed: malformed, unsupported, or an illegal access (with its line)."""

    def __init__(self, message: str, line: int | None = None):
        self.line = line
        super().__init__(f"line {line}: {message}" if line is not None else message)


# --------------------------------------------------------------------------------------------------
# element types
# --------------------------------------------------------------------------------------------------

def _build_types() -> dict[str, np.dtype]:
    out: dict[str, np.dtype] = {}
    for d in _dtypes.ALL:
        if d.pto is None or d.numpy is None:
            continue
        try:
            out[d.pto] = _dtypes.numpy_dtype(d)
        except (AttributeError, ImportError, TypeError):  # pragma: no cover - ml_dtypes without the type
            continue
    out["index"] = np.dtype(np.int64)
    out["f64"] = np.dtype(np.float64)
    return out


ELEMENT_TYPES: dict[str, np.dtype] = _build_types()


def _np_type(name: str, line: int | None = None) -> np.dtype:
    t = ELEMENT_TYPES.get(name.strip())
    if t is None:
        raise PtoExecError(f"unknown element type {name.strip()!r}", line)
    return t


def _is_float(dt: np.dtype) -> bool:
    return dt.kind == "f" or "float" in dt.name


def _int_bits(t: str) -> int | None:
    if t == "index":
        return 64
    m = re.fullmatch(r"i(\d+)", t)
    return int(m.group(1)) if m else None


def _wrap(v: int, bits: int) -> int:
    if bits == 1:
        return v & 1
    v &= (1 << bits) - 1
    return v - (1 << bits) if v >= 1 << (bits - 1) else v


def _unsigned(v: int, bits: int) -> int:
    return v & ((1 << bits) - 1)


# --------------------------------------------------------------------------------------------------
# parsed form
# --------------------------------------------------------------------------------------------------

@dataclass
class Op:
    line: int
    name: str
    results: list[str]
    rest: str
    regions: list[list["Op"]] = field(default_factory=list)
    p: dict = field(default_factory=dict)  # op-specific parsed pieces


@dataclass
class Func:
    name: str
    line: int
    args: list[tuple[str, str]]  # (ssa name, type)
    body: list[Op]


@dataclass
class Module:
    arch: str
    funcs: dict[str, Func]


_SSA = r"%[A-Za-z0-9_$.]+(?:#\d+)?"
_OP_LINE = re.compile(r"^(?:(%[^=]+?)\s*=\s*)?([A-Za-z_][\w]*(?:\.[\w]+)+)(.*)$")
_FUNC_LINE = re.compile(r"^func\.func\s+@([\w$.]+)\s*\(")


def _split_top(text: str, sep: str = ",") -> list[str]:
    """Split at `sep` outside (), [], {}, <>."""
    out, depth, cur = [], 0, []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch in "([{<":
            depth += 1
        elif ch in ")]}>" and not (ch == ">" and i > 0 and text[i - 1] == "-"):
            depth -= 1
        if depth == 0 and text.startswith(sep, i):
            out.append("".join(cur))
            cur = []
            i += len(sep)
            continue
        cur.append(ch)
        i += 1
    out.append("".join(cur))
    return [s.strip() for s in out if s.strip()]


def _group(text: str, key: str, start: int = 0) -> tuple[str, int]:
    """The text inside `key(` ... `)` (balanced parentheses) and the index after the `)`."""
    i = text.find(key, start)
    if i < 0:
        raise ValueError(f"missing {key}")
    j = i + len(key)
    depth = 1
    k = j
    while k < len(text):
        if text[k] == "(":
            depth += 1
        elif text[k] == ")":
            depth -= 1
            if depth == 0:
                return text[j:k], k + 1
        k += 1
    raise ValueError(f"unbalanced {key}")


def _results(text: str | None) -> list[str]:
    if not text:
        return []
    out = []
    for part in text.split(","):
        part = part.strip()
        m = re.fullmatch(r"%([A-Za-z0-9_$.]+)(?::(\d+))?", part)
        if not m:
            raise ValueError(f"malformed result {part!r}")
        if m.group(2):
            out.extend(f"{m.group(1)}#{k}" for k in range(int(m.group(2))))
        else:
            out.append(m.group(1))
    return out


def _ssa_names(text: str) -> list[str]:
    return [s[1:] for s in re.findall(_SSA, text)]


def parse_module(text: str) -> Module:
    """Parse a `.pto` module into functions of ops (structure only; ops are checked when executed)."""
    lines = text.splitlines()
    arch = "a2a3"
    m = re.search(r'pto\.target_arch\s*=\s*"([\w]+)"', text)
    if m:
        arch = m.group(1)
    funcs: dict[str, Func] = {}
    i = 0
    n = len(lines)

    def parse_block(i: int, depth_name: str) -> tuple[list[Op], int, str]:
        """Ops until the closing `}` or `} else {`; returns (ops, next index, closer)."""
        ops: list[Op] = []
        while i < n:
            raw = lines[i].split("//", 1)[0].strip()
            lineno = i + 1
            i += 1
            if not raw:
                continue
            if raw == "}":
                return ops, i, "}"
            if raw == "} else {":
                return ops, i, "else"
            if raw == "return" or raw.startswith("return "):
                ops.append(Op(lineno, "return", [], raw[6:]))
                continue
            mo = _OP_LINE.match(raw)
            if not mo:
                raise PtoExecError(f"cannot parse {raw!r}", lineno)
            try:
                res = _results(mo.group(1))
            except ValueError as e:
                raise PtoExecError(str(e), lineno) from None
            op = Op(lineno, mo.group(2), res, mo.group(3))
            if raw.endswith("{") and op.name in ("scf.for", "scf.if", "scf.while", "scf.execute_region"):
                op.rest = op.rest[:-1].rstrip()
                body, i, closer = parse_block(i, op.name)
                op.regions.append(body)
                if closer == "else":
                    body2, i, closer = parse_block(i, op.name)
                    op.regions.append(body2)
            ops.append(op)
        raise PtoExecError(f"unterminated region of {depth_name}", n)

    while i < n:
        raw = lines[i].split("//", 1)[0].strip()
        lineno = i + 1
        i += 1
        if not raw or raw.startswith("module") or raw == "}":
            continue
        mf = _FUNC_LINE.match(raw)
        if not mf:
            raise PtoExecError(f"expected func.func, got {raw!r}", lineno)
        try:
            inner, _ = _group(raw, "(", mf.end() - 1)
        except ValueError as e:
            raise PtoExecError(str(e), lineno) from None
        args = []
        for a in _split_top(inner):
            ma = re.fullmatch(r"%([A-Za-z0-9_$.]+)\s*:\s*(.+)", a)
            if not ma:
                raise PtoExecError(f"malformed argument {a!r}", lineno)
            args.append((ma.group(1), ma.group(2).strip()))
        if not raw.endswith("{"):
            raise PtoExecError("func.func without a body", lineno)
        body, i, closer = parse_block(i, "func.func")
        if closer != "}":
            raise PtoExecError("unexpected `} else {` in a function body", i)
        funcs[mf.group(1)] = Func(mf.group(1), lineno, args, body)
    return Module(arch, funcs)


# --------------------------------------------------------------------------------------------------
# runtime objects
# --------------------------------------------------------------------------------------------------

@dataclass
class TensorView:
    arg: int  # index of the GM buffer
    dtype: np.dtype
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    layout: str  # nd | dn | nz


@dataclass
class Partition:
    view: TensorView
    offsets: tuple[int, ...]
    sizes: tuple[int, ...]


@dataclass
class Tile:
    name: str
    loc: str
    dtype: np.dtype
    rows: int
    cols: int
    vr: int
    vc: int
    pad: int
    arr: np.ndarray  # rows x cols

    def valid(self) -> np.ndarray:
        return self.arr[:self.vr, :self.vc]


def parse_tile_type(t: str, line: int | None = None) -> dict:
    m = re.fullmatch(r"!pto\.tile_buf<(.*)>", t.strip())
    if not m:
        raise PtoExecError(f"expected a !pto.tile_buf type, got {t.strip()!r}", line)
    kv = dict(re.findall(r"(\w+)\s*=\s*([^,>]+)", m.group(1)))
    need = ("loc", "dtype", "rows", "cols", "v_row", "v_col", "blayout", "slayout", "fractal", "pad")
    missing = [k for k in need if k not in kv]
    if missing:
        raise PtoExecError(f"tile type lacks {', '.join(missing)}", line)
    return {k: v.strip() for k, v in kv.items()}


def _partition_type(t: str, line: int) -> tuple[list[int | None], np.dtype]:
    m = re.fullmatch(r"!pto\.partition_tensor_view<(.*)>", t.strip())
    if not m:
        raise PtoExecError(f"expected a !pto.partition_tensor_view type, got {t.strip()!r}", line)
    parts = m.group(1).split("x")
    dims = [None if p == "?" else int(p) for p in parts[:-1]]
    return dims, _np_type(parts[-1], line)


ROUND_MODES = ("NONE", "RINT", "ROUND", "FLOOR", "CEIL", "TRUNC", "ODD", "CAST_RINT")
MASK_PATTERNS = {"P0101": (2, 0), "P1010": (2, 1), "P0001": (4, 0), "P0010": (4, 1), "P0100": (4, 2),
                 "P1000": (4, 3), "P1111": (1, 0)}


# --------------------------------------------------------------------------------------------------
# float rounding helpers (tcvt)
# --------------------------------------------------------------------------------------------------

_UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def _step(r: np.ndarray, direction: np.ndarray) -> np.ndarray:
    """The neighbour of float array `r` one ulp in `direction` (+1 / -1)."""
    ut = _UINT[r.dtype.itemsize]
    bits = r.view(ut).astype(np.int64)
    sign_bit = 1 << (8 * r.dtype.itemsize - 1)
    neg = (bits & sign_bit) != 0
    mag = bits & (sign_bit - 1)
    zero = mag == 0
    grow = np.where(neg, direction < 0, direction > 0)
    new_mag = np.where(grow, mag + 1, mag - 1)
    new_bits = np.where(neg, new_mag | sign_bit, new_mag)
    # from zero: the smallest subnormal on the side of `direction`
    new_bits = np.where(zero, np.where(direction < 0, sign_bit | 1, 1), new_bits)
    return new_bits.astype(ut).view(r.dtype)


def _round_to_float(x: np.ndarray, dt: np.dtype, mode: str) -> np.ndarray:
    x64 = np.asarray(x, dtype=np.float64)
    with np.errstate(all="ignore"):
        r = x64.astype(dt)
    if mode in ("NONE", "RINT", "CAST_RINT") or dt.itemsize not in _UINT:
        return r
    rf = r.astype(np.float64)
    inexact = np.isfinite(x64) & (rf != x64)
    if not inexact.any():
        return r
    direction = np.sign(x64 - rf)
    direction = np.where(direction == 0, 1.0, direction)
    o = _step(r, direction)
    of = o.astype(np.float64)
    if mode == "FLOOR":
        pick = rf > x64
    elif mode == "CEIL":
        pick = rf < x64
    elif mode == "TRUNC":
        pick = np.abs(rf) > np.abs(x64)
    elif mode == "ROUND":
        pick = (np.abs(x64 - rf) == np.abs(of - x64)) & (np.abs(of) > np.abs(rf))
    elif mode == "ODD":
        pick = (r.view(_UINT[dt.itemsize]) & 1) == 0
    else:
        raise ValueError(mode)
    return np.where(inexact & pick, o, r).astype(dt)


def _round_to_int(x: np.ndarray, mode: str) -> np.ndarray:
    x64 = np.asarray(x, dtype=np.float64)
    if mode == "ROUND":
        return np.sign(x64) * np.floor(np.abs(x64) + 0.5)
    if mode == "FLOOR":
        return np.floor(x64)
    if mode == "CEIL":
        return np.ceil(x64)
    if mode == "TRUNC":
        return np.trunc(x64)
    return np.rint(x64)


def convert(values: np.ndarray, dt: np.dtype, mode: str = "RINT") -> np.ndarray:
    """`values` as `dt` under round mode `mode` (tcvt semantics)."""
    src = values.dtype
    if _is_float(dt):
        if _is_float(src) or src.kind in "iub":
            return _round_to_float(values.astype(np.float64), dt, mode)
    elif dt.kind in "iu":
        info = np.iinfo(dt)
        if _is_float(src):
            with np.errstate(all="ignore"):
                v = _round_to_int(values.astype(np.float64), mode)
                v = np.nan_to_num(v, nan=0.0)
                return np.clip(v, info.min, info.max).astype(dt)
        if src.kind in "iub":
            return np.clip(values.astype(np.int64) if src != np.uint64 else values, info.min, info.max).astype(dt)
    elif dt.kind == "b":
        return values.astype(dt)
    raise PtoExecError(f"no conversion from {src} to {dt}")


# --------------------------------------------------------------------------------------------------
# the interpreter
# --------------------------------------------------------------------------------------------------

DEFAULT_CAPACITY = 512 * 1024



class Interpreter:
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

    def block(self, ops: list[Op]) -> list | None:
        for op in ops:
            if op.name == "scf.yield":
                return self.yield_values(op)
            if op.name == "return":
                return None
            self.exec(op)
        return None

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
        if kind == "addi":
            r = a + b
        elif kind == "subi":
            r = a - b
        elif kind == "muli":
            r = a * b
        elif kind == "divsi":
            q = abs(a) // abs(b)
            r = q if (a >= 0) == (b >= 0) else -q
        elif kind == "divui":
            r = _unsigned(a, bits) // _unsigned(b, bits)
        elif kind == "floordivsi":
            r = a // b
        elif kind == "ceildivsi":
            r = -((-a) // b)
        elif kind == "remsi":
            r = abs(a) % abs(b)
            r = r if a >= 0 else -r
        elif kind == "remui":
            r = _unsigned(a, bits) % _unsigned(b, bits)
        elif kind == "minsi":
            r = min(a, b)
        elif kind == "maxsi":
            r = max(a, b)
        elif kind == "minui":
            r = a if _unsigned(a, bits) <= _unsigned(b, bits) else b
        elif kind == "maxui":
            r = a if _unsigned(a, bits) >= _unsigned(b, bits) else b
        elif kind == "andi":
            r = a & b
        elif kind == "ori":
            r = a | b
        elif kind == "xori":
            r = a ^ b
        elif kind == "shli":
            r = a << b if 0 <= b < bits else 0
        elif kind == "shrsi":
            r = a >> min(b, bits - 1)
        elif kind == "shrui":
            r = _unsigned(a, bits) >> b if b < bits else 0
        else:
            raise PtoExecError(f"unsupported op arith.{kind}", line)
        return _wrap(r, bits)

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
        self.env[op.results[0]] = 0

    # ------------------------------------------------------------------ GM views
    def make_tensor_view(self, op: Op) -> None:
        m = re.fullmatch(r"\s*(%\S+?)\s*,\s*shape\s*=\s*\[(.*?)\]\s*,\s*strides\s*=\s*\[(.*?)\]\s*"
                         r"\{layout\s*=\s*#pto\.layout<(\w+)>\}\s*:\s*!pto\.tensor_view<(.*)>\s*", op.rest)
        if not m:
            raise PtoExecError("malformed pto.make_tensor_view", op.line)
        ptr = self.get(m.group(1), op.line)
        if not isinstance(ptr, _Ptr):
            raise PtoExecError(f"{m.group(1)} is not a GM pointer argument", op.line)
        shape = tuple(self.int_of(n, op.line) for n in _ssa_names(m.group(2)))
        strides = tuple(self.int_of(n, op.line) for n in _ssa_names(m.group(3)))
        layout = m.group(4)
        dims = m.group(5).split("x")
        dt = _np_type(dims[-1], op.line)
        if len(dims) - 1 != len(shape) or len(strides) != len(shape):
            raise PtoExecError(f"make_tensor_view rank mismatch: type rank {len(dims) - 1}, {len(shape)} shape and "
                               f"{len(strides)} stride operands", op.line)
        if dt != ptr.dtype:
            raise PtoExecError(f"make_tensor_view of a {ptr.dtype} pointer as {dt}", op.line)
        if layout not in ("nd", "dn", "nz"):
            raise PtoExecError(f"unknown layout {layout!r}", op.line)
        if layout == "nz" and len(shape) != 5:
            raise PtoExecError(f"an NZ view must be rank 5, this one has rank {len(shape)}", op.line)
        if len(shape) > 5:
            raise PtoExecError(f"a rank-{len(shape)} view (GlobalTensor is at most 5-D)", op.line)
        self.env[op.results[0]] = TensorView(ptr.index, dt, shape, strides, layout)

    def partition_view(self, op: Op) -> None:
        m = re.fullmatch(r"\s*(%\S+?)\s*,\s*offsets\s*=\s*\[(.*?)\]\s*,\s*sizes\s*=\s*\[(.*?)\]\s*:\s*(.*?)\s*->\s*"
                         r"(!pto\.partition_tensor_view<.*>)\s*", op.rest)
        if not m:
            raise PtoExecError("malformed pto.partition_view", op.line)
        view = self.get(m.group(1), op.line)
        if not isinstance(view, TensorView):
            raise PtoExecError(f"{m.group(1)} is not a tensor view", op.line)
        offs = tuple(self.int_of(n, op.line) for n in _ssa_names(m.group(2)))
        sizes = tuple(self.int_of(n, op.line) for n in _ssa_names(m.group(3)))
        dims, dt = _partition_type(m.group(5), op.line)
        if not (len(offs) == len(sizes) == len(view.shape) == len(dims)):
            raise PtoExecError(f"partition_view rank mismatch: view rank {len(view.shape)}, {len(offs)} offsets, "
                               f"{len(sizes)} sizes, result type rank {len(dims)}", op.line)
        for k, (d, s) in enumerate(zip(dims, sizes)):
            if d is not None and d != s:
                raise PtoExecError(f"partition size {k} is {s} but the result type says {d}", op.line)
            if s <= 0:
                raise PtoExecError(f"partition size {k} is {s}", op.line)
        if dt != view.dtype:
            raise PtoExecError(f"partition of a {view.dtype} view typed {dt}", op.line)
        self.env[op.results[0]] = Partition(view, offs, sizes)

    def element_offsets(self, p: Partition) -> np.ndarray:
        off = np.zeros(p.sizes, dtype=np.int64)
        for k, (o, s, st) in enumerate(zip(p.offsets, p.sizes, p.view.strides)):
            shape = [1] * len(p.sizes)
            shape[k] = s
            off = off + ((o + np.arange(s, dtype=np.int64)) * st).reshape(shape)
        return off

    def gm_index(self, p: Partition, line: int, what: str) -> tuple[np.ndarray, np.ndarray]:
        gm = self.gm[p.view.arg]
        offs = self.element_offsets(p)
        lo, hi = int(offs.min()), int(offs.max())
        if lo < 0 or hi >= gm.size:
            nbytes = len(self.buffers[p.view.arg])
            raise PtoExecError(
                f"{what} touches elements {lo}..{hi} (bytes {lo * gm.itemsize}..{(hi + 1) * gm.itemsize - 1}) of "
                f"%arg{p.view.arg}, a {nbytes}-byte buffer ({gm.size} {p.view.dtype} elements): out of range "
                f"(offsets {list(p.offsets)}, sizes {list(p.sizes)}, strides {list(p.view.strides)})", line)
        return gm, offs

    def _tile_shape_of(self, p: Partition, line: int, what: str) -> tuple[int, int, Any]:
        """(rows, cols, f) with f mapping partition data to the [rows, cols] tile image."""
        s = p.sizes
        if p.view.layout == "nz":
            c0 = 32 // p.view.dtype.itemsize
            if len(s) != 5 or s[3] != 16 or s[4] != c0:
                raise PtoExecError(f"{what}: an NZ partition must be [B, C/c0, R/16, 16, {c0}] ({p.view.dtype}), "
                                   f"got {list(s)}", line)
            rows, cols = s[2] * 16, s[0] * s[1] * c0
            return rows, cols, "nz"
        return int(np.prod(s[:-1], dtype=np.int64)) if len(s) > 1 else 1, s[-1], "nd"

    @staticmethod
    def _one_in_one_out(op: Op) -> tuple[str, str]:
        if len(op.p["ins"]) != 1 or len(op.p["outs"]) != 1:
            raise PtoExecError(f"{op.name} takes one ins and one outs operand", op.line)
        return op.p["ins"][0], op.p["outs"][0]

    def tload(self, op: Op) -> None:
        pname, tname = self._one_in_one_out(op)
        p = self.get(pname, op.line)
        if not isinstance(p, Partition):
            raise PtoExecError(f"tload source %{pname} is not a partition view", op.line)
        t = self.tile(tname, op.line)
        if t.dtype != p.view.dtype:
            raise PtoExecError(f"tload of {p.view.dtype} data into a {t.dtype} tile", op.line)
        rows, cols, kind = self._tile_shape_of(p, op.line, "tload")
        if (rows, cols) != (t.vr, t.vc):
            raise PtoExecError(f"tload: the partition {list(p.sizes)} ({p.view.layout}) is a {rows} x {cols} window "
                               f"but tile %{tname} has valid region {t.vr} x {t.vc}", op.line)
        gm, offs = self.gm_index(p, op.line, "tload")
        data = gm[offs]
        if kind == "nz":
            data = data.transpose(2, 3, 0, 1, 4)
        t.arr[:rows, :cols] = data.reshape(rows, cols)

    def tstore(self, op: Op) -> None:
        tname, pname = self._one_in_one_out(op)
        t = self.tile(tname, op.line)
        p = self.get(pname, op.line)
        if not isinstance(p, Partition):
            raise PtoExecError(f"tstore destination %{pname} is not a partition view", op.line)
        rows, cols, kind = self._tile_shape_of(p, op.line, "tstore")
        if (rows, cols) != (t.vr, t.vc):
            raise PtoExecError(f"tstore: the partition {list(p.sizes)} ({p.view.layout}) is a {rows} x {cols} window "
                               f"but tile %{tname} has valid region {t.vr} x {t.vc}", op.line)
        if t.dtype != p.view.dtype and t.loc != "acc":
            raise PtoExecError(f"tstore of a {t.dtype} tile into {p.view.dtype} data", op.line)
        attrs = op.p["attrs"]
        atomic = re.search(r"atomicType\s*=\s*#pto<atomic_type\s+(\w+)>", attrs)
        relu = re.search(r"reluPreMode\s*=\s*#pto<relu_pre_mode\s+(\w+)>", attrs)
        gm, offs = self.gm_index(p, op.line, "tstore")
        vals = t.valid()
        if relu and relu.group(1) == "normal_relu":
            vals = np.maximum(vals, vals.dtype.type(0))
        vals = convert(vals, gm.dtype, "RINT") if vals.dtype != gm.dtype else vals
        if kind == "nz":
            s = p.sizes
            vals = vals.reshape(s[2], 16, s[0], s[1], s[4]).transpose(2, 3, 0, 1, 4)
        else:
            vals = vals.reshape(p.sizes)
        if atomic and atomic.group(1) == "atomic_add":
            flat_o = offs.ravel()
            if np.unique(flat_o).size != flat_o.size:
                raise PtoExecError("an atomic_add tstore writes one element twice", op.line)
            wt = np.float64 if _is_float(gm.dtype) else np.int64
            with np.errstate(all="ignore"):
                gm[flat_o] = (gm[flat_o].astype(wt) + vals.ravel().astype(wt)).astype(gm.dtype)
        else:
            gm[offs] = vals

    # ------------------------------------------------------------------ tiles
    def alloc_tile(self, op: Op) -> None:
        m = re.fullmatch(r"\s*(?:addr\s*=\s*(%\S+)\s*)?(?:valid_row\s*=\s*(%\S+)\s*)?(?:valid_col\s*=\s*(%\S+)\s*)?"
                         r":\s*(!pto\.tile_buf<.*>)\s*", op.rest)
        if not m:
            raise PtoExecError("malformed pto.alloc_tile", op.line)
        ty = parse_tile_type(m.group(4), op.line)
        dt = _np_type(ty["dtype"], op.line)
        rows, cols = int(ty["rows"]), int(ty["cols"])
        loc = ty["loc"]
        if ty["v_row"] == "?":
            if m.group(2) is None:
                raise PtoExecError("v_row=? needs a valid_row operand", op.line)
            vr = self.int_of(m.group(2), op.line)
        else:
            if m.group(2) is not None:
                raise PtoExecError("valid_row operand with a static v_row", op.line)
            vr = int(ty["v_row"])
        if ty["v_col"] == "?":
            if m.group(3) is None:
                raise PtoExecError("v_col=? needs a valid_col operand", op.line)
            vc = self.int_of(m.group(3), op.line)
        else:
            if m.group(3) is not None:
                raise PtoExecError("valid_col operand with a static v_col", op.line)
            vc = int(ty["v_col"])
        self._check_valid(vr, vc, rows, cols, op.line)
        nbytes = rows * cols * dt.itemsize
        if m.group(1) is not None:
            addr = self.int_of(m.group(1), op.line)
            cap = self.capacity(loc)
            if addr < 0 or addr + nbytes > cap:
                raise PtoExecError(f"tile %{op.results[0]} at {loc} addr {addr} ({nbytes} bytes) does not fit the "
                                   f"{cap}-byte {loc} memory", op.line)
            if loc not in self.mem:
                self.mem[loc] = bytearray([self.poison]) * cap
            arr = np.frombuffer(self.mem[loc], dtype=dt, count=rows * cols, offset=addr).reshape(rows, cols)
        else:
            arr = np.frombuffer(bytearray([self.poison]) * nbytes, dtype=dt).reshape(rows, cols)
        self.env[op.results[0]] = Tile(op.results[0], loc, dt, rows, cols, vr, vc, int(ty["pad"]), arr)

    @staticmethod
    def _check_valid(vr: int, vc: int, rows: int, cols: int, line: int) -> None:
        if not (0 <= vr <= rows and 0 <= vc <= cols):
            raise PtoExecError(f"valid region {vr} x {vc} outside the {rows} x {cols} tile", line)

    def set_validshape(self, op: Op) -> None:
        body = op.rest.split(" : ")[0]
        names = _ssa_names(body)
        if len(names) != 3:
            raise PtoExecError("malformed pto.set_validshape", op.line)
        t = self.tile(names[0], op.line)
        vr, vc = self.int_of(names[1], op.line), self.int_of(names[2], op.line)
        self._check_valid(vr, vc, t.rows, t.cols, op.line)
        t.vr, t.vc = vr, vc

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

    def binary(self, op: Op) -> None:
        kind = op.name[len("pto."):]
        a, b = self._ins(op, 2)
        dst = self._dst(op)
        r, c = dst.vr, dst.vc
        wt = self._work_type(dst.dtype)
        x = self._region(a, r, c, op.line, kind).astype(wt)
        y = self._region(b, r, c, op.line, kind).astype(wt)
        self._write(dst, _elementwise(kind[1:], x, y, dst.dtype, op.line))

    def scalar_binary(self, op: Op) -> None:
        kind = op.name[len("pto."):]
        ins = self._ins(op)
        a, s = ins[0], ins[1]
        dst = self._dst(op)
        r, c = dst.vr, dst.vc
        wt = self._work_type(dst.dtype)
        if not _is_float(dst.dtype) and isinstance(s, (float, np.floating)):
            wt = np.dtype(np.float64)  # a float scalar on an integer tile (OP-6); the result truncates
        x = self._region(a, r, c, op.line, kind).astype(wt)
        if isinstance(s, Tile):
            raise PtoExecError(f"{op.name}: the second operand must be a scalar", op.line)
        y = np.asarray(s).astype(wt)
        self._write(dst, _elementwise(kind[1:-1], x, y, dst.dtype, op.line))

    def txor(self, op: Op) -> None:
        ins = self._ins(op, 3)
        dst = self._dst(op)
        wt = self._work_type(dst.dtype)
        x = self._region(ins[0], dst.vr, dst.vc, op.line, "txor").astype(wt)
        y = self._region(ins[1], dst.vr, dst.vc, op.line, "txor").astype(wt) if isinstance(ins[1], Tile) \
            else np.asarray(int(ins[1]), dtype=wt)
        self._write(dst, _elementwise("xor", x, y, dst.dtype, op.line))

    def unary(self, op: Op) -> None:
        kind = op.name[len("pto.t"):]
        (a,) = self._ins(op, 1)
        dst = self._dst(op)
        wt = self._work_type(dst.dtype)
        x = self._region(a, dst.vr, dst.vc, op.line, kind).astype(wt)
        with np.errstate(all="ignore"):
            if kind == "exp":
                r = np.exp(x)
            elif kind == "sqrt":
                r = np.sqrt(x)
            elif kind == "abs":
                r = np.abs(x)
            elif kind == "neg":
                r = -x
            elif kind == "relu":
                r = np.maximum(x, wt.type(0))
            elif kind == "log":
                r = np.log(x)
            elif kind == "recip":
                r = wt.type(1) / x
            elif kind == "rsqrt":
                r = wt.type(1) / np.sqrt(x)
            elif kind == "not":
                if _is_float(dst.dtype):
                    raise PtoExecError("tnot on a float tile", op.line)
                r = ~x
            else:
                raise PtoExecError(f"unsupported op {op.name}", op.line)
        self._write(dst, r)

    def tcvt(self, op: Op) -> None:
        (a,) = self._ins(op, 1)
        dst = self._dst(op)
        m = re.search(r"rmode\s*=\s*#pto<round_mode\s+(\w+)>", op.p["attrs"])
        mode = m.group(1) if m else "RINT"
        if mode not in ROUND_MODES:
            raise PtoExecError(f"unknown round mode {mode}", op.line)
        x = self._region(a, dst.vr, dst.vc, op.line, "tcvt")
        dst.arr[:dst.vr, :dst.vc] = convert(x, dst.dtype, mode)

    def row_reduce(self, op: Op) -> None:
        kind = op.name[len("pto.trow"):]
        ins = self._ins(op)
        a = ins[0]
        dst = self._dst(op)
        x = a.valid()
        wt = np.float64 if _is_float(a.dtype) else np.int64
        x = x.astype(wt)
        r = _reduce(kind, x, axis=1, line=op.line)
        self._write(dst, r.reshape(-1, 1), rows=a.vr, cols=1)

    def col_reduce(self, op: Op) -> None:
        kind = op.name[len("pto.tcol"):]
        ins = self._ins(op)
        a = ins[0]
        dst = self._dst(op)
        wt = np.float64 if _is_float(a.dtype) else np.int64
        x = a.valid().astype(wt)
        r = _reduce(kind, x, axis=0, line=op.line)
        self._write(dst, r.reshape(1, -1), rows=1, cols=a.vc)

    def expand(self, op: Op) -> None:
        name = op.name[len("pto.t"):]
        axis = "row" if name.startswith("rowexpand") else "col"
        kind = name[len("rowexpand"):]
        dst = self._dst(op)
        wt = self._work_type(dst.dtype)
        ins = self._ins(op)
        if kind == "":
            (s,) = ins
            v = s.arr[:dst.vr, :1] if axis == "row" else s.arr[:1, :dst.vc]
            self._write(dst, np.broadcast_to(v.astype(wt), (dst.vr, dst.vc)))
            return
        a, s = ins
        x = self._region(a, dst.vr, dst.vc, op.line, name).astype(wt)
        v = (self._region(s, dst.vr, 1, op.line, name) if axis == "row"
             else self._region(s, 1, dst.vc, op.line, name)).astype(wt)
        self._write(dst, _elementwise(kind, x, v, dst.dtype, op.line))

    def texpands(self, op: Op) -> None:
        (s,) = self._ins(op, 1)
        dst = self._dst(op)
        dst.arr[:dst.vr, :dst.vc] = np.asarray(s).astype(dst.dtype)

    def tmov(self, op: Op) -> None:
        (a,) = self._ins(op, 1)
        dst = self._dst(op)
        x = self._region(a, dst.vr, dst.vc, op.line, "tmov")
        dst.arr[:dst.vr, :dst.vc] = x if x.dtype == dst.dtype else convert(x, dst.dtype, "RINT")

    def _product(self, a: Tile, b: Tile, op: Op) -> np.ndarray:
        if a.loc != "left" or b.loc != "right":
            raise PtoExecError(f"{op.name} needs a Left and a Right tile, got {a.loc} and {b.loc}", op.line)
        m, k = a.vr, a.vc
        k2, n = b.vr, b.vc
        if k != k2:
            raise PtoExecError(f"{op.name}: Left valid {m} x {k} and Right valid {k2} x {n} disagree on K", op.line)
        x, y = a.valid(), b.valid()
        if _is_float(a.dtype) or _is_float(b.dtype):
            return x.astype(np.float64) @ y.astype(np.float64)
        xi, yi = x.astype(np.int64), y.astype(np.int64)
        bound = (int(np.abs(xi).max(initial=0)) * int(np.abs(yi).max(initial=0)) * max(k, 1))
        # float BLAS is exact while every partial sum stays below the mantissa limit
        if bound < 2 ** 24:
            return (xi.astype(np.float32) @ yi.astype(np.float32)).astype(np.int64)
        if bound < 2 ** 53:
            return (xi.astype(np.float64) @ yi.astype(np.float64)).astype(np.int64)
        return xi @ yi

    def _acc_write(self, dst: Tile, vals: np.ndarray, op: Op) -> None:
        if dst.loc != "acc":
            raise PtoExecError(f"{op.name} writes an Acc tile, got a {dst.loc} tile", op.line)
        m, n = vals.shape
        if m > dst.rows or n > dst.cols:
            raise PtoExecError(f"{op.name}: a {m} x {n} result does not fit the {dst.rows} x {dst.cols} Acc tile",
                               op.line)
        if _is_float(dst.dtype):
            with np.errstate(all="ignore"):
                dst.arr[:m, :n] = vals.astype(dst.dtype)
        else:
            dst.arr[:m, :n] = vals.astype(np.int64).astype(dst.dtype)

    def tmatmul(self, op: Op) -> None:
        a, b = self._ins(op, 2)
        self._acc_write(self._dst(op), self._product(a, b, op), op)

    def tmatmul_acc(self, op: Op) -> None:
        acc, a, b = self._ins(op, 3)
        dst = self._dst(op)
        prod = self._product(a, b, op)
        m, n = prod.shape
        cur = self._region(acc, m, n, op.line, op.name)
        cur = cur.astype(np.float64) if _is_float(acc.dtype) else cur.astype(np.int64)
        self._acc_write(dst, cur + prod, op)

    def tmatmul_bias(self, op: Op) -> None:
        a, b, bias = self._ins(op, 3)
        dst = self._dst(op)
        prod = self._product(a, b, op)
        m, n = prod.shape
        bv = self._region(bias, 1, n, op.line, op.name)
        bv = bv.astype(np.float64) if _is_float(bias.dtype) else bv.astype(np.int64)
        self._acc_write(dst, prod + bv, op)

    def textract(self, op: Op) -> None:
        a, r, c = self._ins(op, 3)
        dst = self._dst(op)
        r, c = int(r), int(c)
        if r < 0 or c < 0 or r + dst.vr > a.rows or c + dst.vc > a.cols:
            raise PtoExecError(f"textract of {dst.vr} x {dst.vc} at ({r}, {c}) leaves the {a.rows} x {a.cols} tile",
                               op.line)
        x = a.arr[r:r + dst.vr, c:c + dst.vc]
        dst.arr[:dst.vr, :dst.vc] = x if x.dtype == dst.dtype else convert(x, dst.dtype, "RINT")

    def tfillpad(self, op: Op) -> None:
        (a,) = self._ins(op, 1)
        dst = self._dst(op)
        vals = a.valid().copy()
        if dst.pad == 0:
            raise PtoExecError("tfillpad into a tile with pad=0 (null): no padding value", op.line)
        dt = dst.dtype
        if dst.pad == 1:
            fill = 0
        elif _is_float(dt):
            fill = np.inf if dst.pad == 2 else -np.inf
        else:
            info = np.iinfo(dt)
            fill = info.max if dst.pad == 2 else info.min
        with np.errstate(all="ignore"):
            dst.arr[:, :] = np.asarray(fill).astype(dt)
        r, c = min(a.vr, dst.rows), min(a.vc, dst.cols)
        dst.arr[:r, :c] = vals[:r, :c] if vals.dtype == dt else convert(vals[:r, :c], dt)

    def ttrans(self, op: Op) -> None:
        a, _tmp = self._ins(op, 2)
        dst = self._dst(op)
        x = a.valid().T.copy()
        r, c = x.shape
        if r > dst.rows or c > dst.cols:
            raise PtoExecError(f"ttrans: the {r} x {c} transpose does not fit the {dst.rows} x {dst.cols} tile",
                               op.line)
        dst.arr[:r, :c] = x if x.dtype == dst.dtype else convert(x, dst.dtype)

    def tgather(self, op: Op) -> None:
        dst = self._dst(op)
        m = re.search(r"maskPattern\s*=\s*#pto\.mask_pattern<(\w+)>", op.p["attrs"])
        if not m:
            self._tgather_index(op, dst)
            return
        (a,) = self._ins(op, 1)
        if m.group(1) not in MASK_PATTERNS:
            raise PtoExecError(f"unknown mask pattern {m.group(1)}", op.line)
        stride, residue = MASK_PATTERNS[m.group(1)]
        x = a.valid()[:, residue::stride]
        r, c = x.shape
        if r > dst.rows or c > dst.cols:
            raise PtoExecError(f"tgather: {r} x {c} selected elements do not fit the {dst.rows} x {dst.cols} tile",
                               op.line)
        if x.dtype != dst.dtype:
            if x.dtype.itemsize != dst.dtype.itemsize:
                raise PtoExecError(f"tgather mask form: {x.dtype} source, {dst.dtype} destination (element sizes "
                                   "differ)", op.line)
            x = np.ascontiguousarray(x).view(dst.dtype)  # the selected bits, reinterpreted
        dst.arr[:r, :c] = x

    def _tgather_index(self, op: Op, dst: Tile) -> None:
        """Index form `ins(%src, %indices[, %tmp])`: dst[i, j] = src_flat[indices[i, j]] over dst's valid
        region, src_flat the source's rows x cols storage in row-major order."""
        ins = self._ins(op)
        if len(ins) not in (2, 3) or not all(isinstance(t, Tile) for t in ins):
            raise PtoExecError("pto.tgather index form takes ins(%src, %indices[, %tmp]) tiles", op.line)
        src, idx = ins[0], ins[1]
        if idx.dtype.kind not in "iu":
            raise PtoExecError(f"tgather indices must be integers, got {idx.dtype}", op.line)
        r, c = dst.vr, dst.vc
        ids = self._region(idx, r, c, op.line, "tgather").astype(np.int64)
        n = src.rows * src.cols
        bad = (ids < 0) | (ids >= n)
        if bad.any():
            raise PtoExecError(f"tgather index {int(ids[bad][0])} is outside the {n}-element source tile %{src.name}",
                               op.line)
        flat = src.arr.reshape(-1) if src.arr.flags.c_contiguous else np.ascontiguousarray(src.arr).reshape(-1)
        x = flat[ids]
        dst.arr[:r, :c] = x if x.dtype == dst.dtype else convert(x, dst.dtype)

    def tscatter(self, op: Op) -> None:
        """Index form `ins(%src, %indexes) outs(%dst)`: dst[indexes[i, j], j] = src[i, j] over src's valid
        region (one destination row per element; the rest of dst keeps its values)."""
        if "maskPattern" in op.p["attrs"]:
            raise PtoExecError("pto.tscatter: the maskPattern form is not supported", op.line)
        src, idx = self._ins(op, 2)
        dst = self._dst(op)
        if not isinstance(src, Tile) or not isinstance(idx, Tile):
            raise PtoExecError("pto.tscatter takes ins(%src, %indexes) tiles", op.line)
        if (idx.vr, idx.vc) != (src.vr, src.vc):
            raise PtoExecError(f"tscatter: indexes valid {idx.vr} x {idx.vc} differs from src valid {src.vr} x "
                               f"{src.vc}", op.line)
        if src.vc > dst.cols:
            raise PtoExecError(f"tscatter: {src.vc} source columns do not fit the {dst.cols}-column destination",
                               op.line)
        rows = idx.valid().astype(np.int64)
        bad = (rows < 0) | (rows >= dst.rows)
        if bad.any():
            raise PtoExecError(f"tscatter row index {int(rows[bad][0])} is outside the {dst.rows}-row destination "
                               f"%{dst.name}", op.line)
        vals = src.valid()
        vals = vals if vals.dtype == dst.dtype else convert(vals, dst.dtype)
        cols = np.broadcast_to(np.arange(src.vc), rows.shape)
        dst.arr[rows.ravel(), cols.ravel()] = vals.ravel()  # row-major order: the last writer wins

    def tgatherb(self, op: Op) -> None:
        """`ins(%src, %offsets) outs(%dst)`: offset (r, k) is a byte offset into the source tile's storage;
        its 32-byte block fills dst row r, columns k * (32 / sizeof(dst)) onwards."""
        src, off = self._ins(op, 2)
        dst = self._dst(op)
        per = 32 // dst.dtype.itemsize
        if dst.vc % per:
            raise PtoExecError(f"tgatherb: dst valid columns {dst.vc} are not whole 32-byte blocks", op.line)
        raw = np.ascontiguousarray(src.arr).view(np.uint8).reshape(-1)
        offs = self._region(off, dst.vr, dst.vc // per, op.line, "tgatherb").astype(np.int64)
        for r in range(dst.vr):
            for k in range(dst.vc // per):
                o = int(offs[r, k])
                if o < 0 or o + 32 > raw.size:
                    raise PtoExecError(f"tgatherb byte offset {o} reads outside the {raw.size}-byte source tile "
                                       f"%{src.name}", op.line)
                dst.arr[r, k * per:(k + 1) * per] = raw[o:o + 32].view(dst.dtype)

    def tci(self, op: Op) -> None:
        """`ins(%start[, %tmp]) outs(%dst) {descending}`: row 0 of dst = start +/- k, k < valid cols."""
        ins = self._ins(op)
        start = ins[0]
        dst = self._dst(op)
        if isinstance(start, Tile) or dst.dtype.kind not in "iu":
            raise PtoExecError("pto.tci takes an integer start and an integer tile", op.line)
        k = np.arange(dst.vc, dtype=np.int64)
        desc = re.search(r"descending\s*=\s*true", op.p["attrs"]) is not None
        v = int(start) - k if desc else int(start) + k
        dst.arr[0, :dst.vc] = v.astype(dst.dtype)  # wraps to the element width

    def ttri(self, op: Op) -> None:
        """`ins(%diagonal {upperOrLower}) outs(%dst)`: 1 where j <= i + d (lower, 0) or j >= i + d (upper, 1)."""
        (d,) = self._ins(op, 1)
        dst = self._dst(op)
        m = re.search(r"upperOrLower\s*=\s*(\d+)", op.p["attrs"])
        upper = int(m.group(1)) if m else 0
        if upper not in (0, 1):
            raise PtoExecError(f"ttri upperOrLower={upper} (0 lower, 1 upper)", op.line)
        i = np.arange(dst.vr, dtype=np.int64)[:, None]
        j = np.arange(dst.vc, dtype=np.int64)[None, :]
        mask = j >= i + int(d) if upper else j <= i + int(d)
        dst.arr[:dst.vr, :dst.vc] = mask.astype(dst.dtype)

    def _element(self, t: Tile, off: int, line: int, what: str) -> tuple[int, int]:
        if not 0 <= off < t.rows * t.cols:
            raise PtoExecError(f"{what} offset {off} is outside the {t.rows} x {t.cols} tile %{t.name}", line)
        return off // t.cols, off % t.cols

    def tsetval(self, op: Op) -> None:
        """`ins(%offset, %value) outs(%dst)`: one element at row-major storage offset `offset`."""
        off, v = self._ins(op, 2)
        dst = self._dst(op)
        r, c = self._element(dst, int(off), op.line, "tsetval")
        dst.arr[r, c] = np.asarray(v).astype(dst.dtype)

    def tgetval(self, op: Op) -> None:
        """`%v = pto.tgetval ins(%src, %offset : T, index) outs : dtype`."""
        m = re.fullmatch(r"\s*ins\((%\S+?)\s*,\s*(%\S+?)\s*:\s*(!pto\.tile_buf<.*>)\s*,\s*index\s*\)"
                         r"\s*outs\s*:\s*(\S+)\s*", op.rest)
        if not m or len(op.results) != 1:
            raise PtoExecError("malformed pto.tgetval", op.line)
        t = self.tile(m.group(1), op.line)
        r, c = self._element(t, self.int_of(m.group(2), op.line), op.line, "tgetval")
        ty = m.group(4)
        if _np_type(ty, op.line) != t.dtype:
            raise PtoExecError(f"tgetval of a {t.dtype} tile as {ty}", op.line)
        v = t.arr[r, c]
        bits = _int_bits(ty)
        self.env[op.results[0]] = _wrap(int(v), bits) if bits is not None else t.dtype.type(v)

    def _view_tile(self, op: Op, src: Tile, ty: dict, arr: np.ndarray, vr: int | None, vc: int | None) -> Tile:
        rows, cols = int(ty["rows"]), int(ty["cols"])
        vr = rows if vr is None else vr
        vc = cols if vc is None else vc
        self._check_valid(vr, vc, rows, cols, op.line)
        if ty["loc"] != src.loc:
            raise PtoExecError(f"{op.name}: a {src.loc} tile viewed as {ty['loc']}", op.line)
        return Tile(op.results[0], src.loc, arr.dtype, rows, cols, vr, vc, int(ty["pad"]), arr)

    def treshape(self, op: Op) -> None:
        """`%r = pto.treshape %src : S -> R`: the same bytes as another shape / dtype (a view). A result with
        a dynamic valid shape starts fully valid (pto.set_validshape narrows it)."""
        m = re.fullmatch(r"\s*(%\S+)\s*:\s*(!pto\.tile_buf<.*?>)\s*->\s*(!pto\.tile_buf<.*>)\s*", op.rest)
        if not m or len(op.results) != 1:
            raise PtoExecError("malformed pto.treshape", op.line)
        src = self.tile(m.group(1), op.line)
        ty = parse_tile_type(m.group(3), op.line)
        dt = _np_type(ty["dtype"], op.line)
        rows, cols = int(ty["rows"]), int(ty["cols"])
        if rows * cols * dt.itemsize != src.rows * src.cols * src.dtype.itemsize:
            raise PtoExecError(f"treshape: {src.rows} x {src.cols} {src.dtype} and {rows} x {cols} {dt} differ in "
                               "size", op.line)
        if not src.arr.flags.c_contiguous:
            raise PtoExecError("treshape of a strided (subview) tile", op.line)
        arr = src.arr.reshape(-1).view(dt).reshape(rows, cols)
        vr = None if ty["v_row"] == "?" else int(ty["v_row"])
        vc = None if ty["v_col"] == "?" else int(ty["v_col"])
        self.env[op.results[0]] = self._view_tile(op, src, ty, arr, vr, vc)

    def subview(self, op: Op) -> None:
        """`%s = pto.subview %t[%r, %c] sizes [R, C] [valid [%vr, %vc]] : T -> S`: a window of t's elements
        (t's strides; writes go to t)."""
        m = re.fullmatch(r"\s*(%\S+?)\[(.*?)\]\s*sizes\s*\[\s*(\d+)\s*,\s*(\d+)\s*\]\s*"
                         r"(?:valid\s*\[(.*?)\]\s*)?:\s*(!pto\.tile_buf<.*?>)\s*->\s*(!pto\.tile_buf<.*>)\s*", op.rest)
        if not m or len(op.results) != 1:
            raise PtoExecError("malformed pto.subview", op.line)
        src = self.tile(m.group(1), op.line)
        offs = [self.int_of(n, op.line) for n in _ssa_names(m.group(2))]
        sr, sc = int(m.group(3)), int(m.group(4))
        ty = parse_tile_type(m.group(7), op.line)
        if len(offs) != 2 or (int(ty["rows"]), int(ty["cols"])) != (sr, sc):
            raise PtoExecError("pto.subview: two offsets and a result type of the given sizes expected", op.line)
        if _np_type(ty["dtype"], op.line) != src.dtype:
            raise PtoExecError("pto.subview changes the element type", op.line)
        r0, c0 = offs
        if r0 < 0 or c0 < 0 or r0 + sr > src.rows or c0 + sc > src.cols:
            raise PtoExecError(f"subview of {sr} x {sc} at ({r0}, {c0}) leaves the {src.rows} x {src.cols} tile",
                               op.line)
        vr = vc = None
        if m.group(5) is not None:
            names = _ssa_names(m.group(5))
            if len(names) != 2:
                raise PtoExecError("pto.subview valid [...] takes two values", op.line)
            vr, vc = (min(self.int_of(n, op.line), lim) for n, lim in zip(names, (sr, sc)))
        else:
            if "?" in (ty["v_row"], ty["v_col"]):
                raise PtoExecError("pto.subview with a dynamic valid shape needs valid [...]", op.line)
            vr, vc = int(ty["v_row"]), int(ty["v_col"])
        self.env[op.results[0]] = self._view_tile(op, src, ty, src.arr[r0:r0 + sr, c0:c0 + sc], vr, vc)


def _elementwise(kind: str, x: np.ndarray, y: np.ndarray, dt: np.dtype, line: int) -> np.ndarray:
    with np.errstate(all="ignore"):
        if kind == "add":
            return x + y
        if kind == "sub":
            return x - y
        if kind == "mul":
            return x * y
        if kind == "div":
            if _is_float(dt):
                return x / y
            if np.any(y == 0):
                raise PtoExecError("integer tdiv by zero", line)
            q = np.abs(x) // np.abs(y)
            return np.where((x < 0) == (y < 0), q, -q)
        if kind == "max":
            return np.maximum(x, y)
        if kind == "min":
            return np.minimum(x, y)
        if kind in ("and", "or", "xor", "shl", "shr"):
            if _is_float(dt):
                raise PtoExecError(f"t{kind} on a float tile", line)
            if kind == "and":
                return x & y
            if kind == "or":
                return x | y
            if kind == "xor":
                return x ^ y
            if kind == "shl":
                return x << y
            # shr: arithmetic for signed, logical for unsigned element types
            return (x.astype(dt) >> y.astype(dt)) if dt.kind == "u" else x >> y
    raise PtoExecError(f"unsupported elementwise op t{kind}", line)


def _reduce(kind: str, x: np.ndarray, axis: int, line: int) -> np.ndarray:
    if kind == "sum":
        return x.sum(axis=axis)
    if kind == "max":
        return x.max(axis=axis)
    if kind == "min":
        return x.min(axis=axis)
    if kind == "prod":
        return x.prod(axis=axis)
    raise PtoExecError(f"unsupported reduction {kind}", line)


_CASTS = {"index_cast", "index_castui", "extsi", "extui", "trunci", "sitofp", "uitofp", "fptosi", "fptoui",
          "extf", "truncf", "bitcast"}

_HANDLERS: dict[str, Any] = {
    "scf.for": Interpreter.scf_for,
    "scf.if": Interpreter.scf_if,
    "pto.make_tensor_view": Interpreter.make_tensor_view,
    "pto.partition_view": Interpreter.partition_view,
    "pto.alloc_tile": Interpreter.alloc_tile,
    "pto.set_validshape": Interpreter.set_validshape,
    "pto.tload": Interpreter.tload,
    "pto.tstore": Interpreter.tstore,
    "pto.tmov": Interpreter.tmov,
    "pto.tmatmul": Interpreter.tmatmul,
    "pto.tmatmul.acc": Interpreter.tmatmul_acc,
    "pto.tmatmul.bias": Interpreter.tmatmul_bias,
    "pto.tcvt": Interpreter.tcvt,
    "pto.texpands": Interpreter.texpands,
    "pto.textract": Interpreter.textract,
    "pto.tfillpad": Interpreter.tfillpad,
    "pto.ttrans": Interpreter.ttrans,
    "pto.tgather": Interpreter.tgather,
    "pto.tscatter": Interpreter.tscatter,
    "pto.tgatherb": Interpreter.tgatherb,
    "pto.tci": Interpreter.tci,
    "pto.ttri": Interpreter.ttri,
    "pto.tsetval": Interpreter.tsetval,
    "pto.tgetval": Interpreter.tgetval,
    "pto.treshape": Interpreter.treshape,
    "pto.subview": Interpreter.subview,
    "pto.txor": Interpreter.txor,
    "pto.txors": Interpreter.txor,
    "pto.get_block_idx": Interpreter.block_idx_op,
    "pto.get_block_num": Interpreter.block_num_op,
    "pto.get_subblock_idx": Interpreter.subblock_idx_op,
}
for _k in ("add", "sub", "mul", "div", "max", "min", "and", "or", "shl", "shr"):
    _HANDLERS[f"pto.t{_k}"] = Interpreter.binary
    _HANDLERS[f"pto.t{_k}s"] = Interpreter.scalar_binary
for _k in ("exp", "sqrt", "abs", "neg", "relu", "log", "recip", "rsqrt", "not"):
    _HANDLERS[f"pto.t{_k}"] = Interpreter.unary
for _k in ("sum", "max", "min", "prod"):
    _HANDLERS[f"pto.trow{_k}"] = Interpreter.row_reduce
    _HANDLERS[f"pto.tcol{_k}"] = Interpreter.col_reduce
for _k in ("", "add", "sub", "mul", "div", "max", "min"):
    _HANDLERS[f"pto.trowexpand{_k}"] = Interpreter.expand
    _HANDLERS[f"pto.tcolexpand{_k}"] = Interpreter.expand

_ARITH = {"constant", "addi", "subi", "muli", "divsi", "divui", "floordivsi", "ceildivsi", "remsi", "remui",
          "minsi", "maxsi", "minui", "maxui", "andi", "ori", "xori", "shli", "shrsi", "shrui", "cmpi", "cmpf",
          "select", "addf", "subf", "mulf", "divf", "remf", "maximumf", "minimumf", "maxnumf", "minnumf",
          "negf"} | _CASTS
_DPS = {k for k in _HANDLERS if k.startswith("pto.t") and k not in ("pto.tgetval", "pto.treshape")}


def _prepare(ops: list[Op]) -> None:
    """Check every op name is supported and pre-parse DPS operand lists (errors carry the line)."""
    for op in ops:
        if op.name in ("return", "scf.yield"):
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


def _parse_group(text: str) -> tuple[list[str], list[str], str]:
    parts = _split_top(text, " : ")
    if len(parts) != 2:
        raise ValueError(f"expected `operands : types` in {text!r}")
    names, attrs = [], []
    for item in _split_top(parts[0]):
        m = re.fullmatch(r"(%[A-Za-z0-9_$.#]+)?\s*(\{.*\})?", item)
        if not m or not (m.group(1) or m.group(2)):
            raise ValueError(f"malformed operand {item!r}")
        if m.group(1):
            names.append(m.group(1)[1:])
        if m.group(2):
            attrs.append(m.group(2))
    types = _split_top(parts[1])
    if len(types) != len(names):
        raise ValueError(f"{len(names)} operands but {len(types)} types")
    return names, types, " ".join(attrs)


def _parse_dps(rest: str) -> dict:
    ins, pos = _group(rest, "ins(")
    outs, pos2 = _group(rest, "outs(", pos)
    i_n, i_t, i_a = _parse_group(ins)
    o_n, o_t, o_a = _parse_group(outs)
    return {"ins": i_n, "ins_t": i_t, "outs": o_n, "outs_t": o_t,
            "attrs": " ".join(x for x in (i_a, o_a, rest[pos2:].strip()) if x)}


# --------------------------------------------------------------------------------------------------
# entry points
# --------------------------------------------------------------------------------------------------

@dataclass
class _Ptr:
    index: int
    dtype: np.dtype


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
            block_num: int = 1, poison: int = 0xFF) -> list[bytes]:
    """Execute `func_name` of the `.pto` module `text`; return the tensor buffers afterwards (%argN order).

    `args`: one value per %argN except the trailing dynamic-dimension `index` arguments, which take
    `dyn_dims` (GM tensors: bytes-like; scalars: int / float).
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
                buf = bytearray(v.tobytes() if isinstance(v, np.ndarray) else memoryview(v).cast("B"))
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
                    dyn_dims: Sequence[int] = (), **kw) -> dict[int, np.ndarray]:
    """Pack `tensors` ({tensor param index: (logical array, layout)}), run, unpack every tensor.

    Every tensor parameter must be given (outputs too: their array gives the logical shape and the
    initial GM contents). Arrays are converted to the parameter's element type.
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
        args.append(pack_logical(arr, layout, dt))
    args.extend(scalars)
    out = run_pto(text, func_name, args, dyn_dims, **kw)
    return {i: unpack_logical(out[i], tensors[i][1], ptr_types[i], np.shape(tensors[i][0]))
            for i in range(len(ptr_types))}


__all__ = ["PtoExecError", "parse_module", "run_pto", "run_pto_logical", "pack_logical", "unpack_logical",
           "convert", "ELEMENT_TYPES"]
