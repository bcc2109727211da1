"""The `.pto` text as the executor reads it: parsing, element types, tile and view records,
rounding and conversion."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

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
            if raw == "} do {":
                return ops, i, "do"
            if raw.startswith("^"):  # a block label with its arguments: `^bb0(%a : index, %b : i32):`
                mb = re.fullmatch(r"\^[\w$.]+(?:\((.*)\))?\s*:", raw)
                if not mb:
                    raise PtoExecError(f"cannot parse the block label {raw!r}", lineno)
                names = []
                for a in _split_top(mb.group(1) or ""):
                    ma = re.fullmatch(r"%([A-Za-z0-9_$.]+)\s*:\s*(.+)", a.strip())
                    if not ma:
                        raise PtoExecError(f"malformed block argument {a!r}", lineno)
                    names.append(ma.group(1))
                ops.append(Op(lineno, "^block", names, raw))
                continue
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
                if closer in ("else", "do"):
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
            raise PtoExecError(f"unexpected `}} {closer} {{` in a function body", i)
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
