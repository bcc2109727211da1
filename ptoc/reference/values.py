"""Values of the numeric reference: scalars, tiles, global tensors and their addressing, dtype
conversions (casts, packed FP4) and scalar arithmetic. See `ptoc.reference.interp` for the model."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ptoc.target.facts import FRACTAL_ROWS
from ptoc.diagnostics import CompileError, Diagnostic, Span
from ptoc.ir import dtypes
from ptoc.ir.dtypes import DType


RETURN_KEY = "return[{}]"
INDEX = dtypes.INDEX
BOOL = dtypes.BOOL

# --------------------------------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------------------------------


class Unsupported(CompileError):
    """An operator (or a form of one) the reference does not execute: PTOC-E0500 naming the op."""

    def __init__(self, op_name: str, detail: str | None = None, span: Span | None = None):
        self.op_name = op_name
        msg = f"the reference cannot execute pl.{op_name} yet" + (f" ({detail})" if detail else "")
        super().__init__([Diagnostic("PTOC-E0500", msg, span,
                                     hint="this kernel cannot be validated numerically; "
                                     "run the passes without --validate, or implement the op in "
                                     "its family file (see CONTRIBUTING.md)")])


class ReferenceFault(CompileError):
    """The kernel cannot be executed as given: unmodelled dtype (E0501), inputs that do not fit the
    parameters (E0502), an access outside a tensor or tile (E0503), or a runtime fault (E0504)."""

    def __init__(self, code: str, message: str, span: Span | None = None, hint: str | None = None):
        super().__init__([Diagnostic(code, message, span, hint)])


def _fault(message: str, span: Span | None = None, hint: str | None = None, code: str = "PTOC-E0504"):
    raise ReferenceFault(code, message, span, hint)


# --------------------------------------------------------------------------------------------------
# dtypes, undefined values, scalars
# --------------------------------------------------------------------------------------------------


def _np(dt: DType) -> np.dtype:
    nd = dtypes.numpy_dtype(dt)
    if nd is None:
        raise ReferenceFault("PTOC-E0501", f"the reference has no numeric model of pl.{dt.name}",
                             hint="only dtypes with a numpy / ml_dtypes type execute (not INT4, UINT4, HF4, HF8)")
    return nd


def _is_float(dt: DType) -> bool:
    return dt.is_float and not dt.is_packed_fp4


def _undef_value(dt: DType):
    nd = _np(dt)
    if dt == BOOL:
        return np.False_
    if _is_float(dt):
        return np.array(np.nan).astype(nd)[()]
    return np.frombuffer(bytes([0xA5]) * nd.itemsize, dtype=nd)[0]


def _undefined(shape, dt: DType) -> np.ndarray:
    return np.full(tuple(shape), _undef_value(dt), dtype=_np(dt))


def _wrap_int(v: int, dt: DType) -> int:
    bits = dt.bits
    if dt == BOOL:
        return int(bool(v))
    v = int(v) & ((1 << bits) - 1)
    if dt.is_signed and v >= 1 << (bits - 1):
        v -= 1 << bits
    return v


@dataclass(frozen=True)
class Scalar:
    value: object  # int | float | bool
    dtype: DType


def _scalar(v, dt: DType) -> Scalar:
    if dt == BOOL:
        return Scalar(bool(v), dt)
    if dt.is_int:
        if isinstance(v, float):
            if v != v:
                v = 0
            v = int(v)  # toward zero
        return Scalar(_wrap_int(v, dt), dt)
    if dt.is_float and not dt.is_packed_fp4:
        r = _to_float_dtype(np.array([float(v)], dtype=np.float64), dt, "rint")
        return Scalar(float(r.astype(np.float64)[0]), dt)
    return Scalar(v, dt)


def _as_int(v, what: str = "an integer", span=None) -> int:
    if isinstance(v, Scalar):
        v = v.value
    if isinstance(v, (bool, np.bool_)):
        return int(v)
    if isinstance(v, (int, np.integer)):
        return int(v)
    if isinstance(v, float) and v == int(v):
        return int(v)
    _fault(f"expected {what}, got {v!r}", span)
    return 0


def _truthy(v) -> bool:
    if isinstance(v, Scalar):
        return bool(v.value)
    return bool(v)


class Ptr:
    """The value of tile.alloc / tensor.alloc: an address the reference does not need."""

    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        return "Ptr()"


# --------------------------------------------------------------------------------------------------
# Float rounding and casts
# --------------------------------------------------------------------------------------------------

_UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}
CAST_MODES_BY_INDEX = ("none", "rint", "floor", "ceil", "round", "trunc", "odd")  # AscendC RoundMode order
CAST_MODES = ("none", "rint", "round", "floor", "ceil", "trunc", "odd")


def _step(bits: np.ndarray, up: bool, sign: int) -> np.ndarray:
    """The next representable value toward +inf (up) or -inf of sign-magnitude float bit patterns."""
    neg = (bits & sign) != 0
    mag = bits & ~np.array(sign, dtype=bits.dtype)
    one = np.array(1, dtype=bits.dtype)
    if up:
        return np.where(~neg, bits + one, np.where(mag == 0, one, bits - one)).astype(bits.dtype)
    return np.where(neg, bits + one, np.where(mag == 0, np.array(sign, dtype=bits.dtype) | one,
                                               bits - one)).astype(bits.dtype)


def _to_float_dtype(x: np.ndarray, dt: DType, mode: str) -> np.ndarray:
    """float64 values -> dtype `dt`, rounded exactly once with `mode`."""
    nd = _np(dt)
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(all="ignore"):
        y = x.astype(nd)
    if dt.name in ("FP32", "FP16", "FP64") and mode in ("none", "rint"):
        return y  # numpy's double -> float / half conversions are correctly rounded (nearest-even)
    if dt.name == "FP8E8M0":
        return y  # powers of two only: ml_dtypes' conversion
    ut = _UINT[nd.itemsize]
    sign = 1 << (8 * nd.itemsize - 1)
    yb = y.view(ut)
    with np.errstate(all="ignore"):
        yf = y.astype(np.float64)
        lo_b = np.where(yf <= x, yb, _step(yb, False, sign))
        hi_b = np.where(yf >= x, yb, _step(yb, True, sign))
        lo = lo_b.view(nd).astype(np.float64)
        hi = hi_b.view(nd).astype(np.float64)
        exact = yf == x
        hi_bad = ~np.isfinite(hi) & np.isfinite(x)
        hi_b = np.where(hi_bad & np.isnan(hi), lo_b, hi_b)  # no infinity (E4M3FN): saturate
        hi = hi_b.view(nd).astype(np.float64)
        dlo, dhi = x - lo, hi - x
        if mode in ("none", "rint", "round"):
            if mode == "round":
                tie = np.where(np.abs(lo) >= np.abs(hi), lo_b, hi_b)
            else:
                tie = np.where((lo_b & 1) == 0, lo_b, hi_b)
            pick = np.where(dlo < dhi, lo_b, np.where(dhi < dlo, hi_b, tie))
        elif mode == "floor":
            pick = lo_b
        elif mode == "ceil":
            pick = hi_b
        elif mode == "trunc":
            pick = np.where(x >= 0, lo_b, hi_b)
        elif mode == "odd":
            pick = np.where((lo_b & 1) == 1, lo_b, hi_b)
        else:
            raise Unsupported("cast", f"rounding mode {mode!r}")
        fin = np.isfinite(x) & np.isfinite(yf)
        out = np.where(fin & ~exact, pick, yb).astype(ut)
    return out.view(nd)


def _float_to_int(x: np.ndarray, dt: DType, mode: str) -> np.ndarray:
    nd = _np(dt)
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(all="ignore"):
        if mode in ("none", "rint"):
            r = np.rint(x)
        elif mode == "round":
            t = np.trunc(x)
            r = t + np.sign(x) * (np.abs(x - t) >= 0.5)
        elif mode == "floor":
            r = np.floor(x)
        elif mode == "ceil":
            r = np.ceil(x)
        elif mode == "trunc":
            r = np.trunc(x)
        elif mode == "odd":
            f, c = np.floor(x), np.ceil(x)
            r = np.where(x == f, f, np.where(np.mod(f, 2) != 0, f, c))
        else:
            raise Unsupported("cast", f"rounding mode {mode!r}")
        if dt == BOOL:
            return (r != 0) & ~np.isnan(x)
        info = np.iinfo(nd)
        nan = np.isnan(r)
        top = r >= float(info.max)
        bot = r <= float(info.min)
        safe = np.where(nan | top | bot, 0, r)
        out = safe.astype(nd)
        out[top] = info.max
        out[bot] = info.min
        out[nan] = 0
    return out


def _cast_mode(m) -> str:
    if m is None:
        return "none"
    if isinstance(m, Scalar):
        m = m.value
    if isinstance(m, (int, np.integer)) and not isinstance(m, bool):
        if 0 <= int(m) < len(CAST_MODES_BY_INDEX):
            return CAST_MODES_BY_INDEX[int(m)]
        raise Unsupported("cast", f"rounding mode {m}")
    if isinstance(m, str) and m in CAST_MODES:
        return m
    raise Unsupported("cast", f"rounding mode {m!r}")


# Packed FP4 ------------------------------------------------------------------------------------------

FP4_E2M1_VALUES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)
FP4_E1M2_VALUES = (0.0, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 1.75)


def _fp4_table(dt: DType) -> np.ndarray:
    if dt.name == "FP4E2M1X2":
        return np.array(FP4_E2M1_VALUES)
    if dt.name == "FP4E1M2X2":
        return np.array(FP4_E1M2_VALUES)
    raise ValueError(f"{dt.name} is not a packed FP4 type")


def fp4_code_values(dt: DType) -> np.ndarray:
    """The 16 values of the 4-bit codes 0..15 of a packed FP4 format (code = sign << 3 | magnitude)."""
    t = _fp4_table(dt)
    return np.concatenate([t, -t])


def decode_fp4(carriers: np.ndarray, dt: DType, axis: int = -1) -> np.ndarray:
    """uint8 carriers -> float64 values, the packed axis doubled (element 2k from the low nibble)."""
    c = np.asarray(carriers)
    if c.dtype != np.uint8:
        c = np.ascontiguousarray(c).view(np.uint8)
    vals = fp4_code_values(dt)
    ax = axis % c.ndim
    cm = np.moveaxis(c, ax, -1)
    out = np.empty(cm.shape[:-1] + (cm.shape[-1] * 2,), dtype=np.float64)
    out[..., 0::2] = vals[cm & 0xF]
    out[..., 1::2] = vals[cm >> 4]
    return np.moveaxis(out, -1, ax)


def _fp4_codes(x: np.ndarray, dt: DType, mode: str) -> np.ndarray:
    t = _fp4_table(dt)
    x = np.asarray(x, dtype=np.float64)
    neg = np.signbit(x)
    m = np.where(np.isnan(x), 0.0, np.minimum(np.abs(x), t[-1]))
    lo = np.clip(np.searchsorted(t, m, side="right") - 1, 0, len(t) - 1)
    hi = np.minimum(lo + (t[lo] < m), len(t) - 1)
    exact = t[lo] == m
    dlo, dhi = m - t[lo], t[hi] - m
    if mode in ("none", "rint"):
        idx = np.where(dlo < dhi, lo, np.where(dhi < dlo, hi, np.where(lo % 2 == 0, lo, hi)))
    elif mode == "round":
        idx = np.where(dlo < dhi, lo, hi)
    elif mode == "trunc":
        idx = lo
    elif mode == "floor":
        idx = np.where(neg, hi, lo)
    elif mode == "ceil":
        idx = np.where(neg, lo, hi)
    elif mode == "odd":
        idx = np.where(exact, lo, np.where(lo % 2 == 1, lo, hi))
    else:
        raise Unsupported("cast", f"rounding mode {mode!r}")
    idx = np.where(exact, lo, idx)
    neg = neg & ~np.isnan(x)
    return (idx | (neg.astype(np.int64) << 3)).astype(np.uint8)


def encode_fp4(values: np.ndarray, dt: DType, mode: str = "rint", axis: int = -1) -> np.ndarray:
    """float values -> uint8 carriers, the packed axis halved (it must be even)."""
    v = np.asarray(values, dtype=np.float64)
    ax = axis % v.ndim
    if v.shape[ax] % 2:
        _fault(f"packing {dt.name} needs an even number of values along the packed axis, got {v.shape[ax]}")
    codes = np.moveaxis(_fp4_codes(v, dt, mode), ax, -1)
    out = codes[..., 0::2] | (codes[..., 1::2] << 4)
    return np.moveaxis(out.astype(np.uint8), -1, ax)


def cast_array(data: np.ndarray, src: DType, dst: DType, mode: str = "none", axis: int = -1) -> np.ndarray:
    """Convert an array of dtype `src` into `dst` (see the module docstring for the conventions)."""
    mode = _cast_mode(mode)
    data = np.asarray(data)
    if src == dst:
        return data.copy()
    if src.is_packed_fp4:
        vals = decode_fp4(data, src, axis)
        if dst.is_packed_fp4:
            return encode_fp4(vals, dst, mode, axis)
        return cast_array(vals.astype(np.float32), dtypes.FP32, dst, mode)
    if dst.is_packed_fp4:
        return encode_fp4(data.astype(np.float64), dst, mode, axis)
    nd = _np(dst)
    with np.errstate(all="ignore"):
        if dst == BOOL:
            return data != 0
        if src == BOOL:
            return data.astype(nd)
        if dst.is_int:
            if src.is_int:
                return data.astype(nd)
            return _float_to_int(data.astype(np.float64), dst, mode)
        return _to_float_dtype(data.astype(np.float64), dst, mode)


# --------------------------------------------------------------------------------------------------
# Tiles and global tensors
# --------------------------------------------------------------------------------------------------


@dataclass
class Tile:
    data: np.ndarray  # the physical shape; uint8 carriers for packed FP4
    dtype: DType
    valid: tuple[int, ...]
    pad: str | None = None
    memory: str | None = None
    blayout: str | None = None
    uninit: bool = False  # allocated by tile.create and not written since: its contents are undefined

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.data.shape)

    @property
    def rank(self) -> int:
        return self.data.ndim


def _box(valid) -> tuple[slice, ...]:
    return tuple(slice(0, v) for v in valid)


def _box_mask(shape, valid) -> np.ndarray:
    m = np.zeros(tuple(shape), dtype=bool)
    m[_box(valid)] = True
    return m


def _mask_box(mask: np.ndarray) -> tuple[int, ...]:
    out = []
    for ax in range(mask.ndim):
        other = tuple(i for i in range(mask.ndim) if i != ax)
        hit = np.nonzero(mask.any(axis=other) if other else mask)[0]
        out.append(int(hit[-1]) + 1 if hit.size else 0)
    return tuple(out)


def _clip_valid(shape, valid) -> tuple[int, ...]:
    return tuple(max(0, min(int(v), int(s))) for v, s in zip(valid, shape))


def _tile(data: np.ndarray, dt: DType, valid=None, *, pad: str | None = None, memory: str | None = None,
          blayout: str | None = None, mask: np.ndarray | None = None) -> Tile:
    """A tile with `data` (copied) whose elements outside the valid region (and outside `mask`) are
    made undefined."""
    data = np.array(data, dtype=_np(dt), copy=True)
    if valid is None:
        valid = _mask_box(mask) if mask is not None else data.shape
    valid = _clip_valid(data.shape, valid)
    keep = _box_mask(data.shape, valid)
    if mask is not None:
        keep &= mask
    if not keep.all():
        data[~keep] = _undef_value(dt)
    return Tile(data, dt, valid, pad, memory, blayout)


class GMBuffer:
    """The bytes of one global-memory allocation."""

    def __init__(self, nbytes: int, name: str | None = None):
        self.nbytes = int(nbytes)
        self.data = np.zeros(max(8, -(-self.nbytes // 8) * 8), dtype=np.uint8)
        self.name = name
        self.written = False

    def elems(self, dt: DType) -> np.ndarray:
        return self.data.view(_np(dt))


@dataclass
class GTensor:
    """A view of a global-memory buffer: element (i0, ..., in) sits at byte
    `base + sum(i_k * strides_k) * itemsize`, or by the NZ formula (`nz` = (lead strides in panels, R, C, c0))
    for a logical NZ tensor before BlockNzTensorViews."""

    buf: GMBuffer
    dtype: DType
    shape: tuple[int, ...]
    strides: tuple[int, ...] | None
    base: int = 0
    layout: str = "ND"
    valid: tuple[int, ...] | None = None
    pad: str | None = None
    nz: tuple | None = None
    blocked: bool = False

    @property
    def rank(self) -> int:
        return len(self.shape)


def _row_major(shape) -> tuple[int, ...]:
    out, acc = [], 1
    for d in reversed(tuple(shape)):
        out.append(acc)
        acc *= int(d)
    return tuple(reversed(out))


def _packed_strides(shape, layout: str) -> tuple[int, ...]:
    shape = tuple(shape)
    if layout == "DN" and len(shape) >= 2:
        lead = _row_major(shape[:-2] + (shape[-2] * shape[-1],))[:-1]
        return lead + (1, shape[-2])
    return _row_major(shape)


def _grid(offsets, sizes) -> list[np.ndarray]:
    n = len(sizes)
    out = []
    for k, (o, s) in enumerate(zip(offsets, sizes)):
        shp = [1] * n
        shp[k] = int(s)
        out.append((int(o) + np.arange(int(s), dtype=np.int64)).reshape(shp))
    return out


def _addr(t: GTensor, idx: list[np.ndarray]) -> np.ndarray:
    """Byte addresses of the elements at index arrays `idx` (broadcast together)."""
    isz = t.dtype.bytes
    if t.nz is not None:
        lead, rows, cols, c0 = t.nz
        b = np.int64(0)
        for i, s in zip(idx[:-2], lead):
            b = b + i * s
        r, c = idx[-2], idx[-1]
        off = (b * (rows * cols) + (c // c0) * (rows * c0) + (r // FRACTAL_ROWS) * (FRACTAL_ROWS * c0)
               + (r % FRACTAL_ROWS) * c0 + c % c0)
    else:
        off = np.int64(0)
        for i, s in zip(idx, t.strides or ()):
            off = off + i * int(s)
    shape = np.broadcast_shapes(*[np.shape(i) for i in idx]) if idx else ()
    return np.broadcast_to(np.int64(t.base) + np.asarray(off, dtype=np.int64) * isz, shape)


def _window_addr(t: GTensor, offsets, sizes) -> np.ndarray:
    if len(offsets) != t.rank or len(sizes) != t.rank:
        _fault(f"a window of {len(sizes)} extents and {len(offsets)} offsets on a rank-{t.rank} tensor",
               code="PTOC-E0503")
    return _addr(t, _grid(offsets, sizes))


def _check_addr(t: GTensor, a: np.ndarray, what: str, span=None) -> None:
    isz = t.dtype.bytes
    if a.size == 0:
        return
    bad = (a < 0) | (a + isz > t.buf.nbytes) | (a % isz != 0)
    if bad.any():
        first = int(a[bad][0])
        name = t.buf.name or "a tensor"
        _fault(f"{what} touches byte {first} of {name}, which holds {t.buf.nbytes} bytes"
               + (" (misaligned)" if first % isz else ""), span, code="PTOC-E0503",
               hint="the window, offsets or strides leave the tensor")


def _gm_read(t: GTensor, addr: np.ndarray, mask: np.ndarray | None, what: str, span=None) -> np.ndarray:
    out = _undefined(addr.shape, t.dtype)
    mask = np.ones(addr.shape, dtype=bool) if mask is None else mask
    a = addr[mask]
    _check_addr(t, a, what, span)
    out[mask] = t.buf.elems(t.dtype)[a // t.dtype.bytes]
    return out


def _gm_write(t: GTensor, addr: np.ndarray, mask: np.ndarray | None, values: np.ndarray, what: str,
              span=None, atomic: bool = False) -> None:
    mask = np.ones(addr.shape, dtype=bool) if mask is None else mask
    a = addr[mask]
    _check_addr(t, a, what, span)
    el = t.buf.elems(t.dtype)
    v = np.asarray(values)[mask]
    if atomic:
        old = el[a // t.dtype.bytes]
        if _is_float(t.dtype):
            v = _to_float_dtype(old.astype(np.float64) + v.astype(np.float64), t.dtype, "rint")
        else:
            v = (old.astype(np.int64) + v.astype(np.int64)).astype(el.dtype)
    el[a // t.dtype.bytes] = v
    t.buf.written = True


def _is_partition(t: GTensor, sizes) -> bool:
    """A blocked NZ window `[1, TC/c0, TR/16, 16, c0]`: one panel of whole fractals (NZ-4, NZ-7)."""
    return (t.blocked and len(sizes) == 5 and int(sizes[0]) == 1 and int(sizes[3]) == FRACTAL_ROWS
            and int(sizes[4]) == t.shape[4])


def _unblock(a: np.ndarray) -> np.ndarray:
    """[1, C1, R1, 16, c0] fractals -> the logical [R1*16, C1*c0] tile."""
    _, c1, r1, f, c0 = a.shape
    return a[0].transpose(1, 2, 0, 3).reshape(r1 * f, c1 * c0)


def _block(a: np.ndarray, c0: int) -> np.ndarray:
    rows, cols = a.shape
    return a.reshape(rows // FRACTAL_ROWS, FRACTAL_ROWS, cols // c0, c0).transpose(2, 0, 1, 3)[None]


def _logical_addr(t: GTensor, lshape) -> np.ndarray:
    """Byte addresses of every element of the logical array of `t` (its own shape, or the logical
    [.., R, C] a blocked NZ tensor holds)."""
    lshape = tuple(int(d) for d in lshape)
    if not t.blocked:
        return _addr(t, _grid((0,) * len(lshape), lshape))
    g = _grid((0,) * len(lshape), lshape)
    lead = lshape[:-2]
    b = np.int64(0)
    for i, s in zip(g[:-2], _row_major(lead)):
        b = b + i * s
    r, c = g[-2], g[-1]
    c0 = t.shape[4]
    idx = [b, c // c0, r // FRACTAL_ROWS, r % FRACTAL_ROWS, c % c0]
    off = np.int64(0)
    for i, s in zip(idx, t.strides):
        off = off + i * int(s)
    return np.broadcast_to(np.int64(t.base) + np.asarray(off, np.int64) * t.dtype.bytes, lshape)


def _blocked_logical_shape(shape) -> tuple[int, ...]:
    b, c1, r1, f, c0 = shape
    return (r1 * f, c1 * c0) if b == 1 else (b, r1 * f, c1 * c0)


def _logical_shape(t: GTensor) -> tuple[int, ...]:
    return _blocked_logical_shape(t.shape) if t.blocked else t.shape


def _read_logical(t: GTensor, lshape=None, what: str = "reading a tensor") -> np.ndarray:
    lshape = _logical_shape(t) if lshape is None else tuple(lshape)
    addr = _logical_addr(t, lshape)
    return _gm_read(t, addr, None, what)


def _tensor_as_tile(t: GTensor) -> Tile:
    """The whole logical tensor as a tile (elements outside its valid region undefined, never read)."""
    if t.blocked:
        data = _read_logical(t, None)
        valid = data.shape
    else:
        valid = _clip_valid(t.shape, t.valid) if t.valid is not None else t.shape
        addr = _logical_addr(t, t.shape)
        data = _gm_read(t, addr, _box_mask(t.shape, valid), "reading a tensor")
    blayout = "col_major" if t.layout == "DN" else "row_major"
    return _tile(data, t.dtype, valid, pad=t.pad, blayout=blayout)


def _new_tensor(shape, dt: DType, fill=None, name: str | None = None) -> GTensor:
    shape = tuple(int(d) for d in shape)
    n = int(np.prod(shape, dtype=np.int64)) if shape else 1
    buf = GMBuffer(n * dt.bytes, name)
    el = buf.elems(dt)
    el[:n] = _undef_value(dt) if fill is None else fill
    return GTensor(buf, dt, shape, _row_major(shape))


def _tile_as_tensor(tile: Tile) -> GTensor:
    t = _new_tensor(tile.shape, tile.dtype)
    n = tile.data.size
    t.buf.elems(tile.dtype)[:n] = tile.data.reshape(-1)
    if tuple(tile.valid) != tile.shape:
        t.valid = tuple(tile.valid)
    t.pad = tile.pad
    return t


def _pad_name(p) -> str | None:
    if p is None or p == "null":
        return None
    return p


# --------------------------------------------------------------------------------------------------
# Scalar expressions
# --------------------------------------------------------------------------------------------------


def _need_scalar(v, what: str, span) -> None:
    if not isinstance(v, Scalar):
        raise Unsupported(f"operator {what}", f"on a {type(v).__name__} value", span)


def _result_dtype(a: DType, b: DType) -> DType:
    if a == BOOL and b != BOOL:
        return b
    if b == BOOL and a != BOOL:
        return a
    if _is_float(a) and not _is_float(b):
        return a
    if _is_float(b) and not _is_float(a):
        return b
    if a == b or b == INDEX:
        return a
    if a == INDEX:
        return b
    return a


_COMPARE = {"==": lambda x, y: x == y, "!=": lambda x, y: x != y, "<": lambda x, y: x < y,
            "<=": lambda x, y: x <= y, ">": lambda x, y: x > y, ">=": lambda x, y: x >= y,
            "and": lambda x, y: bool(x) and bool(y), "or": lambda x, y: bool(x) or bool(y)}
_FLOAT_OPS = {"+": lambda x, y: x + y, "-": lambda x, y: x - y, "*": lambda x, y: x * y,
              "/": lambda x, y: x / y, "//": lambda x, y: float(np.floor(x / y)), "%": lambda x, y: x % y,
              "**": lambda x, y: x ** y}
_INT_OPS = {"+": lambda x, y: x + y, "-": lambda x, y: x - y, "*": lambda x, y: x * y,
            "&": lambda x, y: x & y, "|": lambda x, y: x | y, "^": lambda x, y: x ^ y}


def _float_binop(op: str, x: float, y: float, dt: DType, span):
    fn = _FLOAT_OPS.get(op)
    if fn is None:
        raise Unsupported(f"operator {op}", "on floating-point scalars", span)
    try:
        r = fn(x, y)
    except ZeroDivisionError:
        r = float("nan") if x == 0 or x != x else float(np.copysign(np.inf, x) * np.copysign(1.0, y))
    except OverflowError:
        r = float("inf")
    return _scalar(r, dt)


def _int_binop(op: str, x: int, y: int, dt: DType, span):
    if op in _INT_OPS:
        r = _INT_OPS[op](x, y)
    elif op in ("/", "//", "%"):
        if y == 0:
            _fault(f"integer {'modulo' if op == '%' else 'division'} by zero", span)
        r = x % y if op == "%" else x // y
    elif op == "**":
        if y < 0:
            _fault("an integer raised to a negative power", span)
        r = pow(x, y, 1 << 64) if dt.bits <= 64 else x ** y
    elif op == "<<":
        r = x << y if 0 <= y < dt.bits else 0
    elif op == ">>":
        r = x >> y if 0 <= y < dt.bits else (-1 if x < 0 else 0)
    else:
        raise Unsupported(f"operator {op}", "on integer scalars", span)
    return _scalar(r, dt)


def _binop(op: str, a, b, span):
    _need_scalar(a, op, span)
    _need_scalar(b, op, span)
    x, y = a.value, b.value
    if op in _COMPARE:
        return Scalar(bool(_COMPARE[op](x, y)), BOOL)
    dt = _result_dtype(a.dtype, b.dtype)
    if dt == BOOL and op in ("&", "|", "^"):
        return Scalar(bool(_INT_OPS[op](x, y)), BOOL)
    if _is_float(dt):
        return _float_binop(op, float(x), float(y), dt, span)
    return _int_binop(op, int(x), int(y), dt, span)


def _unop(op: str, a, span):
    _need_scalar(a, op, span)
    if op == "not":
        return Scalar(not bool(a.value), BOOL)
    if op == "-":
        return _scalar(-a.value, a.dtype)
    if op == "~":
        if a.dtype == BOOL:
            return Scalar(not a.value, BOOL)
        if not a.dtype.is_int:
            raise Unsupported("operator ~", "on a floating-point scalar", span)
        return _scalar(~int(a.value), a.dtype)
    raise Unsupported(f"operator {op}", span=span)


def _minmax(op: str, a, b, span):
    _need_scalar(a, op, span)
    _need_scalar(b, op, span)
    dt = _result_dtype(a.dtype, b.dtype)
    x, y = a.value, b.value
    if _is_float(dt) and (x != x or y != y):
        return _scalar(float("nan"), dt)
    return _scalar(min(x, y) if op == "min" else max(x, y), dt)


def _scalar_cast(v, dt: DType, mode: str, span):
    _need_scalar(v, "cast", span)
    src = v.dtype
    if dt == BOOL:
        return Scalar(bool(v.value), BOOL)
    if dt.is_int and _is_float(src):
        return Scalar(int(_float_to_int(np.array([float(v.value)]), dt, _cast_mode(mode))[0]), dt)
    if _is_float(dt):
        arr = _to_float_dtype(np.array([float(v.value)]), dt, _cast_mode(mode))
        return Scalar(float(arr.astype(np.float64)[0]), dt)
    return _scalar(int(v.value), dt)
