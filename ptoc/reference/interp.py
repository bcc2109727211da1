"""The numeric reference: run one kernel of a program, at any pipeline stage, on numpy data.

    run_function(program, fn_name, inputs, ctx, *, block_idx=0, block_num=1, subblock_idx=0,
                 all_blocks=False, max_iterations=1_000_000, layout_bytes=False) -> Outputs
    compare_outputs(expected, actual, *, exact=False, rtol=1e-5, atol=1e-6) -> list[str]
    implemented_ops() -> frozenset[str]; quant_mx_array(x, dtype, axis) -> (data, E8M0 codes)
    cast_array(data, src, dst, mode="none", axis=-1), decode_fp4(carriers, dtype, axis=-1),
    encode_fp4(values, dtype, mode="rint", axis=-1), FP4_E2M1_VALUES, FP4_E1M2_VALUES
    Unsupported (PTOC-E0500), ReferenceFault (PTOC-E0501..E0504), RETURN_KEY

`run_function` executes function `fn_name` (an InCore / AIC / AIV kernel; other functions run the same way)
and returns, as LOGICAL numpy arrays, the final contents of every tensor parameter that is Out/InOut or that
the kernel wrote (keyed by parameter name), plus every returned value (keyed `return[i]`; a tuple element
`return[i][j]`). `Outputs.unwritten` names the Out/InOut parameters the run never wrote; `layout_bytes=True`
reports parameters as their raw GM byte image. The same kernel lowered through any prefix of the pipeline
must give the same outputs: that is what per-pass validation checks (`compare_outputs(frontend_run,
lowered_run)`; parameters a pass adds, such as ConvertTensorToTileOps' `<result>_out`, are ignored).

Memory model
------------
- Global memory: every tensor parameter is a flat byte buffer holding the tensor in its layout: ND
  row-major, DN column-major in the last two axes, explicit strides when the type has them, NZ blocked
  `[B, C/c0, R/16, 16, c0]` (c0 = 256 / bits, NZ-1..NZ-3). Inputs arrive as logical arrays (converted with
  numpy `astype`; packed FP4 as uint8 carrier arrays) and are packed into the layout the parameter has at
  that stage; `bytes` inputs are taken as the raw byte image. A parameter that gets no input is filled
  with the undefined pattern (below). Addressing follows the type at that stage: logical shapes and
  offsets before BlockNzTensorViews, rank-5 blocked shapes and offsets after it (a load of sizes
  `[1, TC/c0, TR/16, 16, c0]` yields the logical `[TR, TC]` tile; a store with a partition operand writes
  the tile's fractals), explicit strides when present. Every access is bounds-checked (PTOC-E0503).
  tensor ops of a kernel before ConvertTensorToTileOps compute into fresh packed ND buffers; tensor views
  (slice, reshape, view, reinterpret_view, set_validshape) address the same buffer.
- Tiles: a numpy array of the tile's physical shape, a valid region (a box, dynamic extents evaluated) and
  a pad value. Elements outside the valid region are undefined and hold NaN (floats) or the byte pattern
  0xA5 (integers, packed FP4 carriers; False for BOOL): a value computed from them stays visibly garbage.
  Loads fill and stores write only the valid region. The type a statement binds (annotation or inferred) is
  authoritative, as it is for the hardware: the bound tile takes the type's physical shape (a row-major
  reshape, e.g. after FlattenTileNdTo2D) and valid region. Memory spaces and MemRefs do not change values;
  SSA values are independent arrays (aliasing is ignored); tile.move copies.
- Scalars carry a dtype: integers wrap at their width (INDEX is 64-bit signed), `//` and `%` floor, `/` on
  integers floors too, `>>` is arithmetic on signed values; floats round to their dtype after every op.

Operator conventions (where the hardware leaves a choice)
- Float arithmetic is computed in float64 and rounded once (round-to-nearest-even) to the result dtype.
  matmul: FP16/BF16/FP32 operands accumulate into FP32 (float64 sums, one rounding); INT8 into INT32
  exactly (wrapping). The full physical K is used, as the cube unit does.
- tile.create / tensor.create give zeros (the hardware leaves them undefined; the examples accumulate
  into a created Acc tile).
- Integer `div` floors (division by zero gives 0); shifts by >= the width give 0 (or -1 for a negative
  value shifted right); a float scalar on an integer tile is applied in float64 and truncated back.
- Casts, `mode` none/rint/round/floor/ceil/trunc/odd (or the integer RoundMode 0..6 in that order:
  none, rint, floor, ceil, round, trunc, odd): rint = nearest-even, round = nearest with ties away from
  zero, none = rint. float -> float rounds exactly once with the mode (BF16/FP8 via ml_dtypes); float ->
  int rounds with the mode, saturates, NaN -> 0; int -> int wraps; to BOOL is `!= 0`.
- Packed FP4 (FP4E2M1X2, FP4E1M2X2): one byte holds two values, element 2k in the low nibble, 2k+1 in the
  high nibble; code = sign << 3 | magnitude index. E2M1 magnitudes (OCP MX): 0, 0.5, 1, 1.5, 2, 3, 4, 6.
  E1M2 magnitudes (bias 1, as CANN's float4_e1m2.h defines): 0, 0.25, 0.5, 0.75, 1, 1.25, 1.5, 1.75.
  Decoding is exact (through BF16); encoding rounds with the mode and saturates at the largest magnitude,
  NaN encodes as +0. The packed axis is the last one (ND / row-major) or the second to last (DN / col-major).
- quant_mx (OCP MX, group 32 along K): shared exponent e = floor(log2(amax)) - emax_elem (emax_elem 2 for
  E2M1, 8 for E4M3FN; e = -127 for an all-zero group), clamped to [-127, 127]; scale = 2^e stored as
  FP8E8M0 (code e + 127); data = value / 2^e rounded to nearest-even and saturated. axis=1: `[M, K]` ->
  data `[M, K(/2)]`, scale `[M, K/32]`; axis=0: `[N, K]` -> data `[K, N(/2)]` (transposed), scale `[K/32, N]`.
  quant_scale_alg="nv" is Unsupported.
- fillpad: zero, max = +inf (dtype max when it has no infinity), min = -inf (dtype min).
- ci / arange: start +/- k over the row-major flat index k. tri: lower `j <= i + diagonal`, upper
  `j >= i + diagonal`. reinterpret_view views the bytes along the contiguous axis (the last one, or the
  second to last for col-major tiles); reshape is row-major.
- gather: flat `src.reshape(-1)[index]`, per-axis with dim=, mask form by `mask_columns` (OP-9);
  tile.scatter `dst[idx[i, j], j] = src[i, j]` (an [R, 1] index moves whole rows); tensor.scatter
  `out[b, index[b, k]] = src[b, k]`; gatherb reads 32-byte blocks at byte offsets of the source tile.
- Cross-core push/pop is a FIFO inside one run (split 1 / UP_DOWN and 2 / LEFT_RIGHT push two halves).
  Synchronisation ops do nothing. get_block_idx / get_block_num / get_subblock_idx return the run
  parameters; a `with pl.spmd(n)` scope runs its body n times with block_idx 0..n-1.
- Unsupported (PTOC-E0500, naming the op): sort32, mrgsort_format1/2, tensor.alloc windows, and any op
  without an implementation here; dtypes without a numeric model (INT4, UINT4, HF4, HF8) give PTOC-E0501.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ptoc.diagnostics import CompileError, Diagnostic, Span
from ptoc.ir import dtypes
from ptoc.ir.dtypes import DType
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
    Expr,
    ForStmt,
    Function,
    GetItem,
    IfStmt,
    ListExpr,
    MinMax,
    NoneLit,
    PassStmt,
    Program,
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

RETURN_KEY = "return[{}]"
INDEX = dtypes.INDEX
BOOL = dtypes.BOOL
FRACTAL_ROWS = 16

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
                                     "ptoc/reference/interp.py")])


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


# --------------------------------------------------------------------------------------------------
# The machine: one run
# --------------------------------------------------------------------------------------------------


class _Return(Exception):
    def __init__(self, values):
        self.values = values


@dataclass
class _Machine:
    program: Program
    ctx: object
    block_idx: int = 0
    block_num: int = 1
    subblock_idx: int = 0
    max_iterations: int = 1_000_000
    dims: dict[str, int] = field(default_factory=dict)
    fifo: list = field(default_factory=list)
    _types: dict | None = None

    def types(self, fn_name: str) -> dict:
        if self._types is None:
            from ptoc.ir.verifier import function_types

            self._types = function_types(self.program, self.ctx)
        return self._types.get(fn_name, {})


@dataclass
class _OpCtx:
    frame: _Frame
    call: Call
    name: str
    exprs: dict[str, Expr]
    extra: dict[str, object]

    @property
    def span(self) -> Span:
        return self.call.span

    def fault(self, msg: str, code: str = "PTOC-E0504", hint: str | None = None):
        _fault(f"pl.{self.name}: {msg}", self.call.span, hint, code)


OpImpl = Callable[[_OpCtx, dict], object]
_OPS: dict[str, OpImpl] = {}


def _op(*names: str):
    def deco(fn: OpImpl) -> OpImpl:
        for n in names:
            _OPS[n] = fn
        return fn

    return deco


def implemented_ops() -> frozenset[str]:
    """Registry op names the reference executes."""
    return frozenset(_OPS)


class _Frame:
    def __init__(self, m: _Machine, fn: Function):
        self.m = m
        self.fn = fn
        self.types = m.types(fn.name)
        self.env: dict[str, object] = {}
        self.blocked = fn.has_attr("nz_tensor_views_blocked")

    # ------------------------------------------------------------------ expressions
    def eval(self, e: Expr):
        if isinstance(e, Var):
            if e.name in self.env:
                return self.env[e.name]
            if e.name in self.m.dims:
                return Scalar(self.m.dims[e.name], INDEX)
            _fault(f"{e.name!r} has no value here (a dynamic dimension no input fixes?)", e.span,
                   code="PTOC-E0502", hint="pass the dimension in inputs, e.g. inputs={'M': 96}")
        if isinstance(e, ConstInt):
            return _scalar(e.value, e.dtype)
        if isinstance(e, ConstFloat):
            return _scalar(e.value, e.dtype)
        if isinstance(e, ConstBool):
            return Scalar(bool(e.value), BOOL)
        if isinstance(e, StrLit):
            return e.value
        if isinstance(e, NoneLit):
            return None
        if isinstance(e, DTypeLit):
            return e.dtype
        if isinstance(e, EnumLit):
            return e
        if isinstance(e, TypeLit):
            return e.type
        if isinstance(e, ListExpr):
            return [self.eval(x) for x in e.items]
        if isinstance(e, TupleExpr):
            return tuple(self.eval(x) for x in e.items)
        if isinstance(e, DictExpr):
            return {_key(self.eval(k)): self.eval(v) for k, v in e.items}
        if isinstance(e, BinOp):
            return _binop(e.op, self.eval(e.lhs), self.eval(e.rhs), e.span)
        if isinstance(e, UnaryOp):
            return _unop(e.op, self.eval(e.operand), e.span)
        if isinstance(e, MinMax):
            a, b = self.eval(e.lhs), self.eval(e.rhs)
            return _minmax(e.op, a, b, e.span)
        if isinstance(e, Abs):
            v = self.eval(e.operand)
            _need_scalar(v, "abs", e.span)
            return _scalar(abs(v.value), v.dtype)
        if isinstance(e, Cast):
            return _scalar_cast(self.eval(e.operand), e.dtype, "none", e.span)
        if isinstance(e, GetItem):
            base = self.eval(e.value)
            i = _as_int(self.eval(e.index), "a tuple index", e.span)
            if not isinstance(base, (tuple, list)) or not -len(base) <= i < len(base):
                _fault(f"cannot take element {i} of {type(base).__name__}", e.span)
            return base[i]
        if isinstance(e, Call):
            return self.call(e)
        raise Unsupported(type(e).__name__, "expression form", e.span)

    def ints(self, items, what: str = "an extent") -> tuple[int, ...]:
        if items is None:
            return ()
        return tuple(_as_int(x, what) for x in items)

    def dims(self, exprs) -> tuple[int, ...]:
        return tuple(_as_int(self.eval(d), "a dimension", getattr(d, "span", None)) for d in exprs)

    # ------------------------------------------------------------------ calls
    def call(self, c: Call):
        if c.kind == "func":
            return self.call_function(c)
        from ptoc.ops.registry import REGISTRY, load_all, resolve

        load_all()
        args = [self.eval(a) for a in c.args]
        kwargs = {k: self.eval(v) for k, v in c.kwargs}
        op = REGISTRY.get(c.op)
        if op is None:
            op, _why = resolve(c, [_fake_type(v) for v in args])
        if op is None:
            raise Unsupported(c.op, "unknown operator", c.span)
        impl = _OPS.get(op.name)
        if impl is None:
            raise Unsupported(op.name, span=c.span)
        names = op.param_names
        if len(args) > len(names):
            _fault(f"pl.{op.name} takes at most {len(names)} positional arguments", c.span)
        bound: dict[str, object] = {n: None for n in names}
        exprs: dict[str, Expr] = {}
        for n, v, ex in zip(names, args, c.args):
            bound[n] = v
            exprs[n] = ex
        extra = {}
        for (k, ex), v in zip(c.kwargs, kwargs.values()):
            if k in bound:
                bound[k] = v
                exprs[k] = ex
            else:
                extra[k] = v
        with np.errstate(all="ignore"):
            return impl(_OpCtx(self, c, op.name, exprs, extra), bound)

    def call_function(self, c: Call):
        callee = self.m.program.function(c.op)
        if callee is None:
            _fault(f"call of unknown function {c.op!r}", c.span)
        frame = _Frame(self.m, callee)
        args = [self.eval(a) for a in c.args]
        kwargs = {k: self.eval(v) for k, v in c.kwargs if k not in ("attrs", "device")}
        for p, v in zip(callee.params, args):
            frame.env[p.name] = v
        for k, v in kwargs.items():
            frame.env[k] = v
        values = frame.run_body()
        if not values:
            return None
        return values[0] if len(values) == 1 and not callee.returns_tuple else tuple(values)

    # ------------------------------------------------------------------ statements
    def run_body(self) -> tuple:
        try:
            self.block(self.fn.body)
        except _Return as r:
            return r.values
        return ()

    def block(self, body: tuple[Stmt, ...]) -> tuple | None:
        for s in body:
            if isinstance(s, YieldStmt):
                return tuple(self.eval(v) for v in s.values)
            self.stmt(s)
        return None

    def bind(self, targets, values) -> None:
        for t, v in zip(targets, values):
            self.env[t.name] = v

    def stmt(self, s: Stmt) -> None:
        if isinstance(s, AssignStmt):
            v = self.eval(s.value)
            self.env[s.target.name] = self.conform(v, self.types.get(s.target.name))
        elif isinstance(s, EvalStmt):
            self.eval(s.expr)
        elif isinstance(s, ReturnStmt):
            raise _Return(tuple(self.eval(v) for v in s.values))
        elif isinstance(s, ForStmt):
            self.for_stmt(s)
        elif isinstance(s, WhileStmt):
            vals = [self.eval(v) for v in s.init_values]
            n = 0
            while True:
                self.bind(s.iter_args, vals)
                if not _truthy(self.eval(s.cond)):
                    break
                y = self.block(s.body)
                if y is not None:
                    vals = list(y)
                n += 1
                if n > self.m.max_iterations:
                    _fault(f"a while loop ran more than {self.m.max_iterations} iterations", s.span,
                           hint="raise max_iterations or check the loop condition")
            self.bind(s.results, vals)
        elif isinstance(s, IfStmt):
            body = s.then_body if _truthy(self.eval(s.cond)) else s.else_body
            y = self.block(body)
            if y is not None:
                self.bind(s.results, y)
        elif isinstance(s, ScopeStmt):
            self.scope(s)
        elif isinstance(s, PassStmt):
            pass
        elif isinstance(s, YieldStmt):  # pragma: no cover - handled by block()
            pass
        else:
            raise Unsupported(type(s).__name__, "statement", s.span)

    def for_stmt(self, s: ForStmt) -> None:
        start = _as_int(self.eval(s.start), "a loop bound", s.span)
        stop = _as_int(self.eval(s.stop), "a loop bound", s.span)
        step = _as_int(self.eval(s.step), "a loop step", s.span)
        if step == 0:
            _fault("a loop with step 0", s.span)
        vals = [self.eval(v) for v in s.init_values]
        n = 0
        for i in range(start, stop, step):
            self.env[s.var.name] = Scalar(i, INDEX)
            self.bind(s.iter_args, vals)
            y = self.block(s.body)
            if y is not None:
                vals = list(y)
            n += 1
            if n > self.m.max_iterations:
                _fault(f"a loop ran more than {self.m.max_iterations} iterations", s.span)
        self.bind(s.results, vals)

    def scope(self, s: ScopeStmt) -> None:
        if s.kind == "spmd":
            count = s.args[0] if s.args else dict(s.kwargs).get("core_num")
            n = _as_int(self.eval(count), "a block count", s.span) if count is not None else 1
            saved = (self.m.block_idx, self.m.block_num)
            try:
                for i in range(n):
                    self.m.block_idx, self.m.block_num = i, n
                    if s.var is not None:
                        self.env[s.var.name] = Scalar(i, INDEX)
                    self.block(s.body)
            finally:
                self.m.block_idx, self.m.block_num = saved
            return
        if s.var is not None:
            self.env[s.var.name] = Scalar(0, INDEX)
        self.block(s.body)

    # ------------------------------------------------------------------ declared types
    def conform(self, v, t: Type | None):
        """Give a bound value the type its statement declares (what the hardware sees)."""
        if t is None:
            return v
        if isinstance(t, TupleType) and isinstance(v, tuple) and len(t.types) == len(v):
            return tuple(self.conform(x, y) for x, y in zip(v, t.types))
        if isinstance(t, ScalarType) and isinstance(v, Scalar):
            if v.dtype != t.dtype and v.dtype.is_int and t.dtype.is_int:
                return _scalar(v.value, t.dtype)
            return v
        if isinstance(t, TileType) and isinstance(v, Tile) and t.dtype == v.dtype:
            return self.conform_tile(v, t)
        return v

    def conform_tile(self, v: Tile, t: TileType) -> Tile:
        from ptoc.ir.types import effective_tile_view

        try:
            shape = self.dims(t.shape)
            valid = self.dims(t.view.valid_shape) if t.view is not None and t.view.valid_shape else shape
        except CompileError:
            return v
        data = v.data
        if tuple(shape) != data.shape:
            if int(np.prod(shape, dtype=np.int64)) != data.size:
                return v  # not a reshape of this value: keep what the op computed
            data = data.reshape(shape)
        eff = effective_tile_view(t)
        for d, s in zip(valid, shape):
            if d < 0 or d > s:
                _fault(f"the valid region {list(valid)} exceeds the tile shape {list(shape)}", t.span,
                       code="PTOC-E0503")
        return _tile(data, v.dtype, valid, pad=_pad_name(eff.get("pad")), memory=t.memory or v.memory,
                     blayout=eff.get("blayout"))


def _key(k):
    if isinstance(k, Scalar):
        return k.value
    return k


def _pad_name(p) -> str | None:
    if p is None or p == "null":
        return None
    return p


def _fake_type(v) -> Type | None:
    if isinstance(v, Tile):
        return TileType((), v.dtype)
    if isinstance(v, GTensor):
        return TensorType((), v.dtype)
    if isinstance(v, Scalar):
        return ScalarType(v.dtype)
    return None


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


def _binop(op: str, a, b, span):
    _need_scalar(a, op, span)
    _need_scalar(b, op, span)
    x, y = a.value, b.value
    if op in ("==", "!=", "<", "<=", ">", ">="):
        r = {"==": x == y, "!=": x != y, "<": x < y, "<=": x <= y, ">": x > y, ">=": x >= y}[op]
        return Scalar(bool(r), BOOL)
    if op == "and":
        return Scalar(bool(x) and bool(y), BOOL)
    if op == "or":
        return Scalar(bool(x) or bool(y), BOOL)
    dt = _result_dtype(a.dtype, b.dtype)
    if dt == BOOL and op in ("&", "|", "^"):
        return Scalar(bool({"&": x & y, "|": x | y, "^": x ^ y}[op]), BOOL)
    if _is_float(dt):
        x, y = float(x), float(y)
        try:
            if op == "+":
                r = x + y
            elif op == "-":
                r = x - y
            elif op == "*":
                r = x * y
            elif op == "/":
                r = x / y
            elif op == "//":
                r = float(np.floor(x / y))
            elif op == "%":
                r = x % y
            elif op == "**":
                r = x ** y
            else:
                raise Unsupported(f"operator {op}", "on floating-point scalars", span)
        except ZeroDivisionError:
            r = float("nan") if x == 0 or x != x else float(np.copysign(np.inf, x) * np.copysign(1.0, y))
        except OverflowError:
            r = float("inf")
        return _scalar(r, dt)
    x, y = int(x), int(y)
    if op == "+":
        r = x + y
    elif op == "-":
        r = x - y
    elif op == "*":
        r = x * y
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
    elif op == "&":
        r = x & y
    elif op == "|":
        r = x | y
    elif op == "^":
        r = x ^ y
    else:
        raise Unsupported(f"operator {op}", "on integer scalars", span)
    return _scalar(r, dt)


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


# --------------------------------------------------------------------------------------------------
# Run one kernel
# --------------------------------------------------------------------------------------------------


def _bind_dims(m: _Machine, frame: _Frame, fn: Function, inputs: dict) -> None:
    dyn = {d.name for d in m.program.dynamic_dims}
    for name, v in inputs.items():
        if name in dyn and not isinstance(v, (np.ndarray, bytes, bytearray)):
            m.dims[name] = _as_int(v, f"the value of dynamic dimension {name}")
    for p in fn.params:
        t = p.type
        v = inputs.get(p.name)
        if not isinstance(t, TensorType) or not isinstance(v, np.ndarray):
            continue
        have = tuple(v.shape)
        if t.layout == "NZ" and len(t.shape) == 5 and frame.blocked:
            c0 = t.dtype.c0
            if len(have) < 2 or c0 is None or have[-2] % FRACTAL_ROWS or have[-1] % c0:
                _fault(f"input {p.name!r} of shape {list(have)} is not a whole number of NZ fractals",
                       p.span, code="PTOC-E0502")
            b = int(np.prod(have[:-2], dtype=np.int64)) if len(have) > 2 else 1
            have = (b, have[-1] // c0, have[-2] // FRACTAL_ROWS, FRACTAL_ROWS, c0)
        if len(have) != len(t.shape):
            _fault(f"input {p.name!r} has shape {list(v.shape)} but the parameter has rank {len(t.shape)}",
                   p.span, code="PTOC-E0502")
        for d, n in zip(t.shape, have):
            if isinstance(d, Var) and d.name not in frame.env and d.name not in m.dims:
                m.dims[d.name] = int(n)


def _param_tensor(frame: _Frame, name: str, t: TensorType, inp, span) -> GTensor:
    dt = t.dtype
    _np(dt)
    shape = frame.dims(t.shape)
    view = t.view
    layout = t.layout
    stride = frame.dims(view.stride) if view is not None and view.stride else None
    valid = frame.dims(view.valid_shape) if view is not None and view.valid_shape else None
    pad = _pad_name(view.pad) if view is not None else None
    blocked = layout == "NZ" and len(shape) == 5 and frame.blocked
    if layout == "NZ" and not blocked:
        if len(shape) < 2 or dt.c0 is None:
            _fault(f"parameter {name!r}: an NZ tensor needs rank >= 2 and a byte-sized dtype", span)
        rows, cols = shape[-2:]
        g = GTensor(None, dt, shape, None, 0, layout, valid, pad, nz=(_row_major(shape[:-2]), rows, cols, dt.c0))
    else:
        g = GTensor(None, dt, shape, stride or _packed_strides(shape, layout), 0, layout, valid, pad,
                    blocked=blocked)
    if blocked:
        lshape = tuple(inp.shape) if isinstance(inp, np.ndarray) else _blocked_logical_shape(shape)
        lead = int(np.prod(lshape[:-2], dtype=np.int64)) if len(lshape) > 2 else 1
        c0 = shape[4]
        if len(lshape) < 2 or lshape[-2] % FRACTAL_ROWS or lshape[-1] % c0 or \
                (lead, lshape[-1] // c0, lshape[-2] // FRACTAL_ROWS, FRACTAL_ROWS, c0) != tuple(shape):
            _fault(f"input {name!r} of logical shape {list(lshape)} does not block to the parameter's "
                   f"{list(shape)}", span, code="PTOC-E0502")
    else:
        lshape = shape
    addr = _logical_addr(g, lshape)
    need = int(addr.max()) + dt.bytes if addr.size else 0
    if isinstance(inp, (bytes, bytearray)):
        buf = GMBuffer(max(need, len(inp)), name)
        buf.data[:len(inp)] = np.frombuffer(bytes(inp), dtype=np.uint8)
        if len(inp) < need:
            _fault(f"input {name!r} holds {len(inp)} bytes; the parameter spans {need}", span, code="PTOC-E0502")
    else:
        buf = GMBuffer(need, name)
        el = buf.elems(dt)
        el[:] = _undef_value(dt)
        if inp is not None:
            arr = np.asarray(inp)
            if tuple(arr.shape) != tuple(lshape):
                _fault(f"input {name!r} has shape {list(arr.shape)}, the parameter is {list(lshape)}", span,
                       code="PTOC-E0502")
            if dt.is_packed_fp4 and arr.dtype != np.uint8:
                _fault(f"input {name!r}: packed {dt.name} takes uint8 carrier arrays (two values a byte)", span,
                       code="PTOC-E0502")
            with np.errstate(all="ignore"):
                el[addr // dt.bytes] = arr.astype(_np(dt))
    g.buf = buf
    return g


def _output_array(v, params: dict[str, tuple[GTensor, tuple[int, ...]]]):
    if isinstance(v, GTensor):
        for g, lshape in params.values():
            if v is g:
                return _read_logical(g, lshape, "reading an output")
        return _read_logical(v, None, "reading an output")
    if isinstance(v, Tile):
        return v.data.copy()
    if isinstance(v, Scalar):
        return np.array(v.value, dtype=_np(v.dtype))
    return v


class Outputs(dict):
    """The result of `run_function`: name -> array, plus `unwritten`, the Out/InOut parameters the run
    never wrote (reported with their initial contents; `compare_outputs` does not hold a later stage to
    them, since ConvertTensorToTileOps stores a returned tensor-level result into such a parameter)."""

    unwritten: frozenset[str] = frozenset()


def run_function(program: Program, fn_name: str, inputs: dict, ctx=None, *, block_idx: int = 0,
                 block_num: int = 1, subblock_idx: int = 0, all_blocks: bool = False,
                 max_iterations: int = 1_000_000, layout_bytes: bool = False) -> Outputs:
    """Execute function `fn_name` of `program` on `inputs` (parameter name -> logical numpy array, raw
    bytes, or a Python / numpy scalar; dynamic dimensions may be given by name). Returns parameter name ->
    final logical contents for every Out/InOut tensor parameter and every tensor the kernel wrote, plus
    `return[i]` -> each returned value. `all_blocks` runs block indices 0..block_num-1 in turn on the same
    global memory. `layout_bytes` reports parameters as their raw GM byte image (uint8) instead."""
    fn = program.function(fn_name)
    if fn is None:
        _fault(f"the program has no function {fn_name!r}", code="PTOC-E0502")
    m = _Machine(program, ctx, block_idx, block_num, subblock_idx, max_iterations)
    frame = _Frame(m, fn)
    names = {p.name for p in fn.params}
    dyn = {d.name for d in program.dynamic_dims}
    unknown = [k for k in inputs if k not in names and k not in dyn]
    if unknown:
        _fault(f"{fn_name} has no parameter {unknown[0]!r} (parameters: {', '.join(p.name for p in fn.params)})",
               code="PTOC-E0502")
    _bind_dims(m, frame, fn, inputs)
    params: dict[str, tuple[GTensor, tuple[int, ...]]] = {}
    for p in fn.params:
        t, v = p.type, inputs.get(p.name)
        if isinstance(t, TensorType):
            g = _param_tensor(frame, p.name, t, v, p.span)
            params[p.name] = (g, _logical_shape(g) if not (g.blocked and isinstance(v, np.ndarray))
                              else tuple(v.shape))
            frame.env[p.name] = g
        elif isinstance(t, ScalarType):
            if v is None:
                _fault(f"scalar parameter {p.name!r} needs a value in inputs", p.span, code="PTOC-E0502")
            if isinstance(v, np.ndarray):
                v = v.item()
            if isinstance(v, np.generic):
                v = v.item()
            frame.env[p.name] = _scalar(v, t.dtype)
        elif isinstance(t, TileType):
            if not isinstance(v, np.ndarray):
                _fault(f"tile parameter {p.name!r} needs an array in inputs", p.span, code="PTOC-E0502")
            frame.env[p.name] = _tile(np.asarray(v).astype(_np(t.dtype)), t.dtype, memory=t.memory)
        else:
            frame.env[p.name] = v
    env0 = dict(frame.env)
    if all_blocks:
        values: tuple = ()
        for b in range(block_num):
            m.block_idx = b
            frame.env = dict(env0)
            values = frame.run_body()
    else:
        values = frame.run_body()
    out = Outputs()
    unwritten = set()
    for p in fn.params:
        if p.name in params:
            g, lshape = params[p.name]
            if p.direction in ("Out", "InOut") or g.buf.written:
                if layout_bytes:
                    out[p.name] = g.buf.data[:g.buf.nbytes].copy()
                else:
                    out[p.name] = _read_logical(g, lshape, "reading an output")
                if not g.buf.written:
                    unwritten.add(p.name)
    out.unwritten = frozenset(unwritten)
    for i, v in enumerate(values):
        if isinstance(v, tuple):
            for j, x in enumerate(v):
                out[RETURN_KEY.format(i) + f"[{j}]"] = _output_array(x, params)
        else:
            out[RETURN_KEY.format(i)] = _output_array(v, params)
    return out


def compare_outputs(expected: dict, actual: dict, *, exact: bool = False, rtol: float = 1e-5,
                    atol: float = 1e-6) -> list[str]:
    """Differences between two `run_function` results (empty when they agree). Returned values and the
    parameters both report are compared; a parameter only `expected` reports was not written; a parameter
    `expected` left unwritten (`Outputs.unwritten`) is not compared. Integer,
    boolean and packed data compare bit for bit; floats bit for bit when `exact`, else with allclose
    (NaN positions, the undefined elements, must match)."""
    bad: list[str] = []
    skip = getattr(expected, "unwritten", frozenset())
    for k, a in expected.items():
        if k in skip:
            continue
        if k not in actual:
            bad.append(f"{k}: missing from the second run")
            continue
        b = actual[k]
        a, b = np.asarray(a), np.asarray(b)
        if a.shape != b.shape or a.dtype != b.dtype:
            bad.append(f"{k}: {a.dtype}{list(a.shape)} vs {b.dtype}{list(b.shape)}")
            continue
        if a.size == 0:
            continue
        kind = np.dtype(a.dtype).kind
        floaty = kind == "f" or (kind == "V" and a.dtype.itemsize in (1, 2))
        if not floaty or exact:
            ab = np.ascontiguousarray(a).view(np.uint8).reshape(a.shape + (-1,))
            bb = np.ascontiguousarray(b).view(np.uint8).reshape(b.shape + (-1,))
            diff = (ab != bb).any(axis=-1)
            if floaty:  # any NaN equals any NaN
                diff &= ~(np.isnan(a.astype(np.float64)) & np.isnan(b.astype(np.float64)))
            if diff.any():
                idx = tuple(int(i) for i in np.argwhere(diff)[0])
                bad.append(f"{k}: {int(diff.sum())} element(s) differ, first at {list(idx)}: {a[idx]!r} vs {b[idx]!r}")
            continue
        x, y = a.astype(np.float64), b.astype(np.float64)
        nan_x, nan_y = np.isnan(x), np.isnan(y)
        close = np.isclose(x, y, rtol=rtol, atol=atol, equal_nan=True) & (nan_x == nan_y)
        if not close.all():
            idx = tuple(int(i) for i in np.argwhere(~close)[0])
            bad.append(f"{k}: {int((~close).sum())} element(s) differ, first at {list(idx)}: {x[idx]} vs {y[idx]}")
    return bad


# --------------------------------------------------------------------------------------------------
# Operator helpers
# --------------------------------------------------------------------------------------------------


def _enum_member(v) -> str | None:
    if isinstance(v, EnumLit):
        return v.member
    if isinstance(v, str):
        return v
    return None


def _need_tile(ctx: _OpCtx, v, name: str) -> Tile:
    if not isinstance(v, Tile):
        ctx.fault(f"argument {name!r} must be a tile, got {type(v).__name__}")
    return v


def _need_tensor(ctx: _OpCtx, v, name: str) -> GTensor:
    if not isinstance(v, GTensor):
        ctx.fault(f"argument {name!r} must be a tensor, got {type(v).__name__}")
    return v


def _f64(data: np.ndarray) -> np.ndarray:
    return np.asarray(data).astype(np.float64)


def _from_f64(x: np.ndarray, dt: DType) -> np.ndarray:
    """float64 results -> dtype `dt` (one rounding for floats; integers truncate and wrap)."""
    if _is_float(dt):
        return _to_float_dtype(x, dt, "rint")
    if dt == BOOL:
        return x != 0
    with np.errstate(all="ignore"):
        return _float_to_int(np.trunc(x), dt, "trunc") if dt.is_int else x.astype(_np(dt))


def _bcast_valid(shapes_valids, out_shape) -> tuple[int, ...]:
    n = len(out_shape)
    out = list(out_shape)
    for shp, val in shapes_valids:
        pad = n - len(shp)
        shp = (1,) * pad + tuple(shp)
        val = (1,) * pad + tuple(val)
        for k in range(n):
            if shp[k] == out_shape[k]:
                out[k] = min(out[k], val[k])
            elif val[k] == 0:
                out[k] = 0
    return tuple(out)


def _scalar_value(ctx: _OpCtx, s, tile_dt: DType):
    """A scalar operand as a number in the computation of an op on a `tile_dt` tile (OP-6)."""
    if isinstance(s, Tile):
        ctx.fault("the scalar operand is a tile")
    if not isinstance(s, Scalar):
        s = Scalar(s, dtypes.FP32 if isinstance(s, float) else INDEX)
    if _is_float(tile_dt):
        return float(_scalar(float(s.value), tile_dt).value)
    if _is_float(s.dtype):
        return float(s.value)
    return _wrap_int(int(s.value), tile_dt)


def _arith(kind: str, x: np.ndarray, y, dt: DType) -> np.ndarray:
    if _is_float(dt):
        a, b = _f64(x), _f64(y) if isinstance(y, np.ndarray) else float(y)
        r = {"add": lambda: a + b, "sub": lambda: a - b, "mul": lambda: a * b, "div": lambda: a / b,
             "maximum": lambda: np.maximum(a, b), "minimum": lambda: np.minimum(a, b)}[kind]()
        return _to_float_dtype(r, dt, "rint")
    if isinstance(y, float):  # a float scalar on an integer tile: float64, truncated back
        a = _f64(x)
        r = {"add": a + y, "sub": a - y, "mul": a * y, "div": a / y if y else np.zeros_like(a),
             "maximum": np.maximum(a, y), "minimum": np.minimum(a, y)}[kind]
        return _from_f64(r, dt)
    nd = _np(dt)
    if dt == BOOL:
        x = x.astype(np.int64)
    yy = y if isinstance(y, np.ndarray) else np.array(y).astype(x.dtype)
    if kind == "add":
        r = x + yy
    elif kind == "sub":
        r = x - yy
    elif kind == "mul":
        r = x * yy
    elif kind == "div":
        r = np.floor_divide(x, yy)
        r = np.where(np.broadcast_to(yy, r.shape) == 0, 0, r)
    elif kind == "maximum":
        r = np.maximum(x, yy)
    else:
        r = np.minimum(x, yy)
    return np.asarray(r).astype(nd)


_ARITH = ("add", "sub", "mul", "div", "maximum", "minimum")
_SCALAR_FORM = {"adds": "add", "subs": "sub", "muls": "mul", "divs": "div", "maximums": "maximum",
                "minimums": "minimum"}


def _to_tile_arg(v):
    return _tensor_as_tile(v) if isinstance(v, GTensor) else v


def _result_like(was_tensor: bool, r):
    if not was_tensor:
        return r
    if isinstance(r, Tile):
        return _tile_as_tensor(r)
    if isinstance(r, tuple):
        return tuple(_tile_as_tensor(x) if isinstance(x, Tile) else x for x in r)
    return r


# --------------------------------------------------------------------------------------------------
# Elementwise, unary, casts
# --------------------------------------------------------------------------------------------------


@_op(*[f"{k}.{n}" for k in ("tile", "tensor") for n in _ARITH + tuple(_SCALAR_FORM)])
def _elementwise(ctx: _OpCtx, a: dict):
    is_tensor = ctx.name.startswith("tensor.")
    kind = ctx.name.split(".", 1)[1]
    kind = _SCALAR_FORM.get(kind, kind)
    x = _need_tile(ctx, _to_tile_arg(a["lhs"]), "lhs")
    y = _to_tile_arg(a["rhs"])
    if isinstance(y, Tile):
        if y.dtype != x.dtype:
            ctx.fault(f"operand dtypes differ ({x.dtype.name} and {y.dtype.name})")
        try:
            shape = np.broadcast_shapes(x.shape, y.shape)
        except ValueError:
            ctx.fault(f"shapes {list(x.shape)} and {list(y.shape)} do not broadcast")
        data = _arith(kind, x.data, y.data, x.dtype)
        valid = _bcast_valid([(x.shape, x.valid), (y.shape, y.valid)], shape)
        r = _tile(np.broadcast_to(data, shape), x.dtype, valid, memory=x.memory, blayout=x.blayout)
    else:
        s = _scalar_value(ctx, y, x.dtype)
        r = _tile(_arith(kind, x.data, s, x.dtype), x.dtype, x.valid, memory=x.memory, blayout=x.blayout)
    return _result_like(is_tensor, r)


def _unary_math(kind: str, x: np.ndarray, dt: DType) -> np.ndarray:
    if kind == "neg":
        if _is_float(dt):
            return _to_float_dtype(-_f64(x), dt, "rint")
        return (-x.astype(np.int64)).astype(x.dtype) if dt.is_signed else (0 - x).astype(x.dtype)
    if kind == "abs":
        if _is_float(dt):
            return _to_float_dtype(np.abs(_f64(x)), dt, "rint")
        return np.abs(x).astype(x.dtype)
    if kind == "relu":
        if _is_float(dt):
            return _to_float_dtype(np.maximum(_f64(x), 0.0), dt, "rint")
        return np.maximum(x, 0).astype(x.dtype)
    v = _f64(x)
    r = {"exp": np.exp, "sqrt": np.sqrt, "log": np.log, "rsqrt": lambda z: 1.0 / np.sqrt(z),
         "recip": lambda z: 1.0 / z}[kind](v)
    return _from_f64(r, dt)


@_op(*[f"{k}.{n}" for k in ("tile", "tensor") for n in ("exp", "neg", "abs", "sqrt", "rsqrt", "recip", "log")],
     "tile.relu")
def _unary(ctx: _OpCtx, a: dict):
    is_tensor = ctx.name.startswith("tensor.")
    kind = ctx.name.split(".", 1)[1]
    x = _need_tile(ctx, _to_tile_arg(a["input"]), "input")
    r = _tile(_unary_math(kind, x.data, x.dtype), x.dtype, x.valid, memory=x.memory, blayout=x.blayout)
    return _result_like(is_tensor, r)


def _packed_axis(t: Tile) -> int:
    if t.rank >= 2 and t.blayout == "col_major" and not (t.shape[1] == 1 and t.shape[0] != 1):
        return t.rank - 2
    return t.rank - 1


@_op("tile.cast", "tensor.cast")
def _cast(ctx: _OpCtx, a: dict):
    is_tensor = ctx.name.startswith("tensor.")
    src = a["input"]
    x = _need_tile(ctx, _to_tile_arg(src), "input")
    dst = a["target_type"]
    if not isinstance(dst, DType):
        ctx.fault("target_type must be a dtype")
    mode = _cast_mode(a["mode"])
    axis = _packed_axis(x)
    data = cast_array(x.data, x.dtype, dst, mode, axis)
    valid = list(x.valid)
    if x.dtype.is_packed_fp4 and not dst.is_packed_fp4:
        valid[axis] *= 2
    elif dst.is_packed_fp4 and not x.dtype.is_packed_fp4:
        valid[axis] = (valid[axis] + 1) // 2
    r = _tile(data, dst, valid, memory=x.memory, blayout=x.blayout)
    return _result_like(is_tensor, r)


@_op("scalar.cast")
def _scalar_cast_op(ctx: _OpCtx, a: dict):
    dst = a["target_type"]
    return _scalar_cast(a["input"], dst, a["mode"], ctx.span)


# row_expand / col_expand, sel -----------------------------------------------------------------------

_EXPAND_KIND = {"add": "add", "sub": "sub", "mul": "mul", "div": "div", "max": "maximum", "min": "minimum"}


@_op(*[f"tile.{d}_expand_{n}" for d in ("row", "col") for n in _EXPAND_KIND])
def _expand(ctx: _OpCtx, a: dict):
    d, _, n = ctx.name.split(".", 1)[1].split("_", 2)
    x = _need_tile(ctx, a["input"], "input")
    v = _need_tile(ctx, a[d], d)
    if x.rank != 2 or v.rank != 2:
        ctx.fault("takes 2-D tiles")
    want = (x.shape[0], 1) if d == "row" else (1, x.shape[1])
    if v.shape != want:
        ctx.fault(f"the {d} operand is {list(v.shape)}, expected {list(want)}")
    data = _arith(_EXPAND_KIND[n], x.data, np.broadcast_to(v.data, x.shape), x.dtype)
    valid = _bcast_valid([(x.shape, x.valid), (v.shape, v.valid)], x.shape)
    return _tile(data, x.dtype, valid, memory=x.memory, blayout=x.blayout)


@_op("tile.sel")
def _sel(ctx: _OpCtx, a: dict):
    m = _need_tile(ctx, a["mask"], "mask")
    x, y = _need_tile(ctx, a["lhs"], "lhs"), _need_tile(ctx, a["rhs"], "rhs")
    if x.dtype != y.dtype:
        ctx.fault("lhs and rhs dtypes differ")
    data = np.where(m.data.astype(bool) if m.dtype == BOOL else (m.data != 0), x.data, y.data)
    valid = _bcast_valid([(m.shape, m.valid), (x.shape, x.valid), (y.shape, y.valid)], x.shape)
    return _tile(data, x.dtype, valid, memory=x.memory, blayout=x.blayout)


# --------------------------------------------------------------------------------------------------
# Bitwise and shifts (OP-2)
# --------------------------------------------------------------------------------------------------


def _shift(x: np.ndarray, s, dt: DType, left: bool) -> np.ndarray:
    nd = _np(dt)
    s = np.asarray(s).astype(np.int64)
    bits = dt.bits
    big = (s < 0) | (s >= bits)
    sc = np.clip(s, 0, bits - 1).astype(np.uint64)
    if left:
        r = (x.astype(np.int64).astype(np.uint64) << sc).astype(nd)
        return np.where(big, np.zeros((), nd), r).astype(nd)
    if dt.is_signed:
        xi = x.astype(np.int64)
        r = (xi >> sc.astype(np.int64)).astype(nd)
        return np.where(big, np.where(xi < 0, -1, 0).astype(nd), r).astype(nd)
    r = (x.astype(np.uint64) >> sc).astype(nd)
    return np.where(big, np.zeros((), nd), r).astype(nd)


def _bitwise(kind: str, x: np.ndarray, y, dt: DType) -> np.ndarray:
    nd = _np(dt)
    if not isinstance(y, np.ndarray):
        y = np.array(_wrap_int(int(y), dt) if kind not in ("shl", "shr") else int(y)).astype(
            nd if kind not in ("shl", "shr") else np.int64)
    if kind == "and_":
        return np.bitwise_and(x, y.astype(nd))
    if kind == "or_":
        return np.bitwise_or(x, y.astype(nd))
    if kind == "xor":
        return np.bitwise_xor(x, y.astype(nd))
    return _shift(x, y, dt, kind == "shl")


_BIT_SCALAR = {"ands": "and_", "ors": "or_", "xors": "xor", "shls": "shl", "shrs": "shr"}


@_op(*[f"{k}.{n}" for k in ("tile", "tensor") for n in ("and_", "or_", "xor", "shl", "shr") + tuple(_BIT_SCALAR)])
def _bitwise_op(ctx: _OpCtx, a: dict):
    is_tensor = ctx.name.startswith("tensor.")
    kind = ctx.name.split(".", 1)[1]
    kind = _BIT_SCALAR.get(kind, kind)
    x = _need_tile(ctx, _to_tile_arg(a["lhs"]), "lhs")
    if not x.dtype.is_int:
        ctx.fault(f"works on integers only, got {x.dtype.name}")
    y = _to_tile_arg(a["rhs"])
    if isinstance(y, Tile):
        if y.shape != x.shape:
            ctx.fault("operand shapes must be identical")
        data = _bitwise(kind, x.data, y.data, x.dtype)
        valid = _bcast_valid([(x.shape, x.valid), (y.shape, y.valid)], x.shape)
    else:
        if not isinstance(y, Scalar):
            ctx.fault("the right operand must be a scalar")
        data = _bitwise(kind, x.data, int(y.value), x.dtype)
        valid = x.valid
    return _result_like(is_tensor, _tile(data, x.dtype, valid, memory=x.memory, blayout=x.blayout))


@_op("tile.not_", "tensor.not_")
def _not(ctx: _OpCtx, a: dict):
    is_tensor = ctx.name.startswith("tensor.")
    x = _need_tile(ctx, _to_tile_arg(a["input"]), "input")
    if not x.dtype.is_int:
        ctx.fault(f"works on integers only, got {x.dtype.name}")
    return _result_like(is_tensor, _tile(np.invert(x.data), x.dtype, x.valid, memory=x.memory, blayout=x.blayout))


# --------------------------------------------------------------------------------------------------
# Reductions
# --------------------------------------------------------------------------------------------------


def _reduce(ctx: _OpCtx, x: Tile, how: str, axis: int) -> Tile:
    if x.rank < 2:
        ctx.fault(f"needs rank >= 2, got {list(x.shape)}")
    ax = axis % x.rank
    region = x.data[_box(x.valid)]
    dt = x.dtype
    if how == "sum":
        r = region.astype(np.float64).sum(axis=ax, keepdims=True) if _is_float(dt) else \
            region.astype(np.int64).sum(axis=ax, keepdims=True)
    elif how == "prod":
        r = region.astype(np.float64).prod(axis=ax, keepdims=True) if _is_float(dt) else \
            region.astype(np.int64).prod(axis=ax, keepdims=True)
    elif region.shape[ax] == 0:
        r = np.full(region.shape[:ax] + (1,) + region.shape[ax + 1:], np.nan)
    else:
        r = (region.max if how == "max" else region.min)(axis=ax, keepdims=True)
        r = r.astype(np.float64) if _is_float(dt) else r.astype(np.int64)
    if _is_float(dt):
        r = _to_float_dtype(r, dt, "rint")
    else:
        r = r.astype(_np(dt))
    shape = list(x.shape)
    shape[ax] = 1
    out = _undefined(shape, dt)
    valid = list(x.valid)
    valid[ax] = 1 if x.valid[ax] > 0 or how in ("sum", "prod") else 0
    out[_box(r.shape)] = r
    return _tile(out, dt, valid, memory=x.memory or "Vec")


@_op(*[f"{k}.{d}_{h}" for k in ("tile", "tensor") for d in ("row", "col") for h in ("sum", "max", "min", "prod")])
def _reduction(ctx: _OpCtx, a: dict):
    is_tensor = ctx.name.startswith("tensor.")
    d, h = ctx.name.split(".", 1)[1].split("_")
    x = _need_tile(ctx, _to_tile_arg(a["input"]), "input")
    return _result_like(is_tensor, _reduce(ctx, x, h, -1 if d == "row" else -2))


# --------------------------------------------------------------------------------------------------
# Memory: load, store, create, full, read, write, move, alloc
# --------------------------------------------------------------------------------------------------


@_op("tile.load")
def _load(ctx: _OpCtx, a: dict):
    t = _need_tensor(ctx, a["tensor"], "tensor")
    offs = ctx.frame.ints(a["offsets"], "an offset")
    sizes = ctx.frame.ints(a["shapes"], "an extent")
    vs = ctx.frame.ints(a["valid_shapes"], "a valid extent") if a["valid_shapes"] is not None else sizes
    if len(vs) != len(sizes):
        ctx.fault("valid_shapes and shapes differ in rank")
    addr = _window_addr(t, offs, sizes)
    wmask = _box_mask(sizes, _clip_valid(sizes, vs))
    data = _gm_read(t, addr, wmask, f"pl.tile.load from {t.buf.name or 'a tensor'}", ctx.span)
    if _is_partition(t, sizes):
        data, wmask = _unblock(data), _unblock(wmask)
    if a["transpose"] is not None and _truthy(a["transpose"]) and data.ndim >= 2:
        data, wmask = np.swapaxes(data, -1, -2), np.swapaxes(wmask, -1, -2)
    mem = _enum_member(a["target_memory"]) or "Vec"
    return _tile(data, t.dtype, mask=wmask, pad=t.pad, memory=mem,
                 blayout="col_major" if t.layout == "DN" and mem == "Vec" else None)


@_op("tile.store")
def _store(ctx: _OpCtx, a: dict):
    tile = _need_tile(ctx, a["tile"], "tile")
    t = _need_tensor(ctx, a["output"], "output")
    offs = ctx.frame.ints(a["offsets"], "an offset")
    data, mask = tile.data, _box_mask(tile.shape, tile.valid)
    if a["shapes"] is not None:
        sizes = ctx.frame.ints(a["shapes"], "an extent")
    elif tile.rank < t.rank:
        sizes = (1,) * (t.rank - tile.rank) + tile.shape
    else:
        sizes = tile.shape
    if _is_partition(t, sizes) and tile.rank == 2 and tile.shape == (sizes[2] * FRACTAL_ROWS, sizes[1] * sizes[4]):
        data, mask = _block(data, sizes[4]), _block(mask, sizes[4])
    elif tuple(sizes) != tile.shape:
        if data.size != int(np.prod(sizes, dtype=np.int64)):
            ctx.fault(f"a {list(tile.shape)} tile does not fill the window {list(sizes)}", code="PTOC-E0503")
        data, mask = data.reshape(sizes), mask.reshape(sizes)
    if tile.dtype != t.dtype:
        data = cast_array(data, tile.dtype, t.dtype, "rint")
    atomic = ctx.extra.get("atomic")
    if isinstance(atomic, Scalar):
        atomic_add = bool(atomic.value)
    else:
        member = _enum_member(atomic)
        atomic_add = member is not None and member.lower() not in ("none", "null", "false")
    addr = _window_addr(t, offs, sizes)
    _gm_write(t, addr, mask, data, f"pl.tile.store into {t.buf.name or 'a tensor'}", ctx.span, atomic=atomic_add)
    return t


def _fill_value(ctx: _OpCtx, v, dt: DType):
    if isinstance(v, Scalar):
        v = v.value
    if v is None:
        ctx.fault("needs value=")
    if dt.is_packed_fp4:
        return _wrap_int(int(v), dtypes.UINT8)
    return _scalar(v, dt).value


@_op("tile.create")
def _tile_create(ctx: _OpCtx, a: dict):
    shape = ctx.frame.ints(a["shape"])
    dt = a["dtype"]
    if not isinstance(dt, DType):
        ctx.fault("needs dtype=")
    return _tile(np.zeros(shape, dtype=_np(dt)), dt, memory=_enum_member(a["target_memory"]) or "Vec")


@_op("tile.full")
def _tile_full(ctx: _OpCtx, a: dict):
    shape = ctx.frame.ints(a["shape"])
    dt = a["dtype"]
    if not isinstance(dt, DType):
        ctx.fault("needs dtype=")
    return _tile(np.full(shape, _fill_value(ctx, a["value"], dt), dtype=_np(dt)), dt,
                 memory=_enum_member(a["target_memory"]) or "Vec")


@_op("tensor.create")
def _tensor_create(ctx: _OpCtx, a: dict):
    shape = ctx.frame.ints(a["shape"])
    dt = a["dtype"]
    if not isinstance(dt, DType):
        ctx.fault("needs dtype=")
    layout = _enum_member(a["layout"]) or "ND"
    if layout != "ND":
        raise Unsupported("tensor.create", f"layout {layout}", ctx.span)
    return _new_tensor(shape, dt, fill=np.zeros((), _np(dt)))


@_op("tensor.full")
def _tensor_full(ctx: _OpCtx, a: dict):
    shape = ctx.frame.ints(a["shape"])
    dt = a["dtype"]
    if not isinstance(dt, DType):
        ctx.fault("needs dtype=")
    return _new_tensor(shape, dt, fill=_fill_value(ctx, a["value"], dt))


@_op("tile.alloc", "tensor.alloc")
def _alloc(ctx: _OpCtx, a: dict):
    return Ptr()


def _index_tuple(ctx: _OpCtx, v, shape) -> tuple[int, ...]:
    idx = ctx.frame.ints(v, "an index")
    if len(idx) != len(shape) or any(not 0 <= i < s for i, s in zip(idx, shape)):
        ctx.fault(f"index {list(idx)} is outside the shape {list(shape)}", code="PTOC-E0503")
    return idx


@_op("tile.read")
def _tile_read(ctx: _OpCtx, a: dict):
    t = _need_tile(ctx, a["tile"], "tile")
    idx = _index_tuple(ctx, a["indices"], t.shape)
    v = t.data[idx]
    return Scalar(float(v) if _is_float(t.dtype) else (bool(v) if t.dtype == BOOL else int(v)), t.dtype)


@_op("tile.write")
def _tile_write(ctx: _OpCtx, a: dict):
    t = _need_tile(ctx, a["tile"], "tile")
    idx = _index_tuple(ctx, a["indices"], t.shape)
    data = t.data.copy()
    data[idx] = _fill_value(ctx, a["value"], t.dtype)
    return Tile(data, t.dtype, t.valid, t.pad, t.memory, t.blayout)


@_op("tensor.read")
def _tensor_read(ctx: _OpCtx, a: dict):
    t = _need_tensor(ctx, a["tensor"], "tensor")
    idx = _index_tuple(ctx, a["indices"], t.shape)
    addr = _addr(t, [np.array([i], dtype=np.int64) for i in idx])
    v = _gm_read(t, addr.reshape(1), None, "pl.tensor.read", ctx.span)[0]
    return Scalar(float(v) if _is_float(t.dtype) else (bool(v) if t.dtype == BOOL else int(v)), t.dtype)


@_op("tensor.dim")
def _tensor_dim(ctx: _OpCtx, a: dict):
    t = _need_tensor(ctx, a["tensor"], "tensor")
    ax = _as_int(a["axis"], "an axis")
    if not -t.rank <= ax < t.rank:
        ctx.fault(f"axis {ax} is out of range for rank {t.rank}")
    return Scalar(t.shape[ax], INDEX)


@_op("tile.move")
def _move(ctx: _OpCtx, a: dict):
    t = _need_tile(ctx, a["tile"], "tile")
    mem = _enum_member(a["target_memory"]) or t.memory
    return Tile(t.data.copy(), t.dtype, t.valid, t.pad, mem, _enum_member(a["blayout"]) or t.blayout)


@_op("tile.get_block_idx")
def _block_idx(ctx: _OpCtx, a: dict):
    return Scalar(ctx.frame.m.block_idx, dtypes.BY_NAME["UINT64"])


@_op("tile.get_block_num")
def _block_num(ctx: _OpCtx, a: dict):
    return Scalar(ctx.frame.m.block_num, dtypes.BY_NAME["UINT64"])


@_op("tile.get_subblock_idx")
def _subblock_idx(ctx: _OpCtx, a: dict):
    return Scalar(ctx.frame.m.subblock_idx, dtypes.BY_NAME["UINT64"])


# synchronisation: nothing to do ------------------------------------------------------------------------

@_op("system.bar_v", "system.bar_m", "system.bar_all", "system.fence", "system.sync_src", "system.sync_dst",
     "system.syncall", "system.aic_initialize_pipe", "system.aiv_initialize_pipe", "system.reserve_buffer",
     "system.import_peer_buffer", "system.sync_set", "system.sync_wait", "system.set_ffts",
     "system.cacheinvalid", "system.tfree_to_aic", "system.tfree_to_aiv", "split")
def _nothing(ctx: _OpCtx, a: dict):
    return None


def _split_mode(v) -> int:
    if v is None:
        return 0
    m = _enum_member(v)
    if m is not None:
        return {"NONE": 0, "UP_DOWN": 1, "LEFT_RIGHT": 2}.get(m, 0)
    return _as_int(v, "a split mode")


@_op("tile.tpush_to_aiv", "tile.tpush_to_aic")
def _tpush(ctx: _OpCtx, a: dict):
    t = _need_tile(ctx, a["tile"], "tile")
    split = _split_mode(ctx.extra.get("split"))
    if split in (1, 2) and t.rank == 2:
        ax = 0 if split == 1 else 1
        h = t.shape[ax] // 2
        for i in range(2):
            sl = [slice(None), slice(None)]
            sl[ax] = slice(i * h, (i + 1) * h)
            valid = list(t.valid)
            valid[ax] = max(0, min(h, t.valid[ax] - i * h))
            ctx.frame.m.fifo.append(_tile(t.data[tuple(sl)], t.dtype, valid, pad=t.pad, memory=t.memory))
    else:
        ctx.frame.m.fifo.append(t)
    return None


@_op("tile.tpop_from_aic", "tile.tpop_from_aiv")
def _tpop(ctx: _OpCtx, a: dict):
    if not ctx.frame.m.fifo:
        raise Unsupported(ctx.name, "nothing was pushed in this run: the producer runs in another kernel", ctx.span)
    t = ctx.frame.m.fifo.pop(0)
    return Tile(t.data.copy(), t.dtype, t.valid, t.pad, "Vec" if ctx.name.endswith("aic") else "Mat", t.blayout)


# --------------------------------------------------------------------------------------------------
# Layout: slice, extract, reshape, transpose, set_validshape, fillpad, reinterpret_view, ci, tri
# --------------------------------------------------------------------------------------------------


def _window_valid(valid, offsets, sizes) -> list[int]:
    return [max(0, min(s, v - o)) for v, o, s in zip(valid, offsets, sizes)]


def _tile_window(ctx: _OpCtx, t: Tile, offsets, sizes) -> np.ndarray:
    if len(offsets) != t.rank or len(sizes) != t.rank:
        ctx.fault("the window's rank differs from the tile's")
    for o, s, d in zip(offsets, sizes, t.shape):
        if o < 0 or s < 0 or o + s > d:
            ctx.fault(f"window offsets {list(offsets)} extents {list(sizes)} leave the tile {list(t.shape)}",
                      code="PTOC-E0503")
    return t.data[tuple(slice(o, o + s) for o, s in zip(offsets, sizes))]


@_op("tile.slice")
def _tile_slice(ctx: _OpCtx, a: dict):
    t = _need_tile(ctx, a["tile"], "tile")
    sizes = ctx.frame.ints(a["shape"])
    offs = ctx.frame.ints(a["offset"], "an offset")
    data = _tile_window(ctx, t, offs, sizes)
    valid = _window_valid(t.valid, offs, sizes)
    if a["valid_shape"] is not None:
        ex = ctx.frame.ints(a["valid_shape"], "a valid extent")
        valid = [min(v, e) for v, e in zip(valid, ex)]
    pad = _enum_member(a["pad_value"]) if a["pad_value"] is not None else t.pad
    return _tile(data, t.dtype, valid, pad=_pad_name(pad), memory=t.memory, blayout=t.blayout)


@_op("tile.extract")
def _tile_extract(ctx: _OpCtx, a: dict):
    t = _need_tile(ctx, a["tile"], "tile")
    sizes = ctx.frame.ints(a["shape"])
    offs = (_as_int(a["index_row"], "an index"), _as_int(a["index_col"], "an index"))
    data = _tile_window(ctx, t, offs, sizes)
    return _tile(data, t.dtype, _window_valid(t.valid, offs, sizes), pad=t.pad,
                 memory=_enum_member(a["target_memory"]) or t.memory)


def _reshape_tile(ctx: _OpCtx, t: Tile, shape) -> Tile:
    shape = tuple(shape)
    if int(np.prod(shape, dtype=np.int64)) != t.data.size:
        ctx.fault(f"{list(t.shape)} has {t.data.size} elements, {list(shape)} has a different count")
    mask = _box_mask(t.shape, t.valid).reshape(shape)
    return _tile(t.data.reshape(shape), t.dtype, mask=mask, pad=t.pad, memory=t.memory, blayout=t.blayout)


@_op("tile.reshape")
def _tile_reshape(ctx: _OpCtx, a: dict):
    t = _need_tile(ctx, a["tile"], "tile")
    return _reshape_tile(ctx, t, ctx.frame.ints(a["shape"]))


def _axes(ctx: _OpCtx, a: dict, rank: int) -> tuple[int, int]:
    x, y = _as_int(a["axis1"], "an axis"), _as_int(a["axis2"], "an axis")
    if not (-rank <= x < rank and -rank <= y < rank):
        ctx.fault(f"axes {x}, {y} are out of range for rank {rank}")
    return x % rank, y % rank


@_op("tile.transpose")
def _tile_transpose(ctx: _OpCtx, a: dict):
    t = _need_tile(ctx, a["tile"], "tile")
    i, j = _axes(ctx, a, t.rank)
    valid = list(t.valid)
    valid[i], valid[j] = valid[j], valid[i]
    return _tile(np.swapaxes(t.data, i, j), t.dtype, valid, pad=t.pad, memory=t.memory)


@_op("tile.set_validshape")
def _tile_set_validshape(ctx: _OpCtx, a: dict):
    t = _need_tile(ctx, a["tile"], "tile")
    r, c = _as_int(a["valid_rows"], "a valid extent"), _as_int(a["valid_cols"], "a valid extent")
    if t.rank != 2 or not (0 <= r <= t.shape[0] and 0 <= c <= t.shape[1]):
        ctx.fault(f"valid region [{r}, {c}] does not fit the tile {list(t.shape)}", code="PTOC-E0503")
    return _tile(t.data, t.dtype, (r, c), pad=t.pad, memory=t.memory, blayout=t.blayout)


def _pad_fill(dt: DType, pad: str):
    nd = _np(dt)
    if pad == "zero":
        return np.zeros((), nd)
    if dt == BOOL:
        return np.array(pad == "max")
    if _is_float(dt):
        inf = np.array(np.inf if pad == "max" else -np.inf).astype(nd)
        if np.isinf(inf.astype(np.float64)):
            return inf
        import ml_dtypes

        fi = ml_dtypes.finfo(nd)
        return np.array(fi.max if pad == "max" else fi.min).astype(nd)
    info = np.iinfo(nd) if not dt.is_packed_fp4 else np.iinfo(np.uint8)
    return np.array(info.max if pad == "max" else info.min).astype(nd)


@_op("tile.fillpad")
def _tile_fillpad(ctx: _OpCtx, a: dict):
    t = _need_tile(ctx, a["tile"], "tile")
    pad = _enum_member(a["pad_value"]) or "zero"
    if pad not in ("zero", "max", "min"):
        ctx.fault(f"pad value {pad!r} does not fill")
    data = t.data.copy()
    data[~_box_mask(t.shape, t.valid)] = _pad_fill(t.dtype, pad)
    return Tile(data, t.dtype, t.shape, pad, t.memory, t.blayout)


def _reinterpret(data: np.ndarray, src: DType, dst: DType, col: bool) -> np.ndarray:
    nd = _np(dst)
    if data.ndim == 0:
        return np.ascontiguousarray(data).view(nd)
    if col and data.ndim >= 2:
        sw = np.ascontiguousarray(np.swapaxes(data, -1, -2))
        return np.swapaxes(sw.view(nd), -1, -2)
    return np.ascontiguousarray(data).view(nd)


@_op("tile.reinterpret_view")
def _tile_reinterpret_view(ctx: _OpCtx, a: dict):
    t = _need_tile(ctx, a["tile"], "tile")
    dst = a["dtype"]
    col = t.blayout == "col_major" and t.rank >= 2 and not (t.shape[-1] == 1 and t.shape[-2] != 1)
    ax = t.rank - 2 if col else t.rank - 1
    if (t.shape[ax] * t.dtype.bytes) % dst.bytes:
        ctx.fault(f"axis {ax} of {list(t.shape)} is not a whole number of {dst.name} elements")
    data = _reinterpret(t.data, t.dtype, dst, col)
    valid = list(t.valid)
    valid[ax] = valid[ax] * t.dtype.bytes // dst.bytes
    r = _tile(data, dst, valid, pad=t.pad if t.pad in ("zero", None) else None, memory=t.memory, blayout=t.blayout)
    if a["shape"] is not None:
        r = _reshape_tile(ctx, r, ctx.frame.ints(a["shape"]))
    return r


def _ci_values(ctx: _OpCtx, a: dict) -> Tile:
    shape = ctx.frame.ints(a["shape"])
    dt = a["dtype"] if isinstance(a["dtype"], DType) else dtypes.INT32
    start = _as_int(a["start"], "a start value")
    desc = a["descending"] is not None and _truthy(a["descending"])
    k = np.arange(int(np.prod(shape, dtype=np.int64)), dtype=np.int64).reshape(shape)
    v = start - k if desc else start + k
    return _tile(v.astype(_np(dt)), dt, memory="Vec")


@_op("tile.ci")
def _tile_ci(ctx: _OpCtx, a: dict):
    return _ci_values(ctx, a)


@_op("tensor.ci", "tensor.arange")
def _tensor_ci(ctx: _OpCtx, a: dict):
    return _tile_as_tensor(_ci_values(ctx, a))


@_op("tile.tri")
def _tile_tri(ctx: _OpCtx, a: dict):
    shape = ctx.frame.ints(a["shape"])
    dt = a["dtype"] if isinstance(a["dtype"], DType) else dtypes.INT32
    d = _as_int(a["diagonal"], "a diagonal offset")
    upper = a["upper"] is not None and _truthy(a["upper"])
    i = np.arange(shape[0])[:, None]
    j = np.arange(shape[1])[None, :]
    m = (j >= i + d) if upper else (j <= i + d)
    valid = ctx.frame.ints(a["valid_shape"]) if a["valid_shape"] is not None else shape
    return _tile(m.astype(_np(dt)), dt, valid, memory="Vec")


# tensor views ------------------------------------------------------------------------------------------

def _view(t: GTensor, **kw) -> GTensor:
    fields = dict(buf=t.buf, dtype=t.dtype, shape=t.shape, strides=t.strides, base=t.base, layout=t.layout,
                  valid=t.valid, pad=t.pad, nz=t.nz, blocked=t.blocked)
    fields.update(kw)
    return GTensor(**fields)


def _is_packed(t: GTensor) -> bool:
    return t.nz is None and not t.blocked and t.strides == _packed_strides(t.shape, t.layout)


def _materialize(t: GTensor) -> GTensor:
    """A packed ND copy of `t` (its logical elements, valid region kept)."""
    arr = _read_logical(t, t.shape)
    n = _new_tensor(t.shape, t.dtype)
    n.buf.elems(t.dtype)[:arr.size] = arr.reshape(-1)
    n.valid, n.pad = t.valid, t.pad
    return n


@_op("tensor.slice")
def _tensor_slice(ctx: _OpCtx, a: dict):
    t = _need_tensor(ctx, a["tensor"], "tensor")
    sizes = ctx.frame.ints(a["shape"])
    offs = ctx.frame.ints(a["offset"], "an offset")
    if len(sizes) != t.rank or len(offs) != t.rank:
        ctx.fault("the window's rank differs from the tensor's")
    clamp = a["clamp"] is not None and _truthy(a["clamp"])
    for o, s, d in zip(offs, sizes, t.shape):
        if o < 0 or (not clamp and o + s > d):
            ctx.fault(f"window offsets {list(offs)} extents {list(sizes)} leave the tensor {list(t.shape)}",
                      code="PTOC-E0503")
    valid = _window_valid(t.valid or t.shape, offs, sizes)
    if a["valid_shape"] is not None and len(a["valid_shape"]):
        ex = ctx.frame.ints(a["valid_shape"], "a valid extent")
        valid = [min(v, e) for v, e in zip(valid, ex)]
    if t.nz is not None:
        lead, rows, cols, c0 = t.nz
        if tuple(offs[-2:]) != (0, 0) or tuple(sizes[-2:]) != t.shape[-2:]:
            ctx.fault("a slice of an NZ tensor must keep the whole [R, C] plane")
        base = t.base + sum(o * s for o, s in zip(offs[:-2], lead)) * rows * cols * t.dtype.bytes
        v = _view(t, shape=tuple(sizes), base=base, valid=tuple(valid))
    else:
        base = t.base + sum(o * s for o, s in zip(offs, t.strides)) * t.dtype.bytes
        v = _view(t, shape=tuple(sizes), base=base, valid=tuple(valid))
    if a["drop_dims"] is not None:
        drop = {d % len(sizes) for d in ctx.frame.ints(a["drop_dims"], "an axis")}
        keep = [i for i in range(len(sizes)) if i not in drop]
        v.shape = tuple(v.shape[i] for i in keep)
        v.valid = tuple(v.valid[i] for i in keep)
        if v.nz is not None:
            lead = [v.nz[0][i] for i in keep if i < len(sizes) - 2]
            v.nz = (tuple(lead),) + tuple(v.nz[1:])
        else:
            v.strides = tuple(v.strides[i] for i in keep)
    if v.valid == v.shape:
        v.valid = None
    pad = _enum_member(a["pad_value"])
    if pad is not None:
        v.pad = _pad_name(pad)
    return v


@_op("tensor.assemble")
def _tensor_assemble(ctx: _OpCtx, a: dict):
    t = _need_tensor(ctx, a["target"], "target")
    src = _to_tile_arg(a["source"])
    src = _need_tile(ctx, src, "source")
    offs = ctx.frame.ints(a["offset"], "an offset")
    if src.rank != t.rank:
        ctx.fault("source and target ranks differ")
    addr = _window_addr(t, offs, src.shape)
    data = src.data if src.dtype == t.dtype else cast_array(src.data, src.dtype, t.dtype, "rint")
    atomic = a["atomic"] is not None and _truthy(a["atomic"]) if isinstance(a["atomic"], Scalar) else False
    _gm_write(t, addr, _box_mask(src.shape, src.valid), data, "pl.tensor.assemble", ctx.span, atomic=atomic)
    return t


def _region_after_reshape(shape, valid, new_shape) -> tuple[int, ...] | None:
    if valid is None:
        return None
    return _mask_box(_box_mask(shape, valid).reshape(new_shape))


@_op("tensor.reshape")
def _tensor_reshape(ctx: _OpCtx, a: dict):
    t = _need_tensor(ctx, a["tensor"], "tensor")
    shape = ctx.frame.ints(a["shape"])
    if int(np.prod(shape, dtype=np.int64)) != int(np.prod(t.shape, dtype=np.int64)):
        ctx.fault(f"{list(t.shape)} and {list(shape)} hold different element counts")
    if t.nz is not None:
        if len(shape) != 1:
            ctx.fault("an NZ tensor reshapes only to the flat [N] (kept ND)")
        return GTensor(t.buf, t.dtype, tuple(shape), (1,), t.base, "ND")
    src = t if (t.layout == "ND" and _is_packed(t)) else _materialize(t)
    valid = _region_after_reshape(t.shape, t.valid, shape)
    if a["valid_shape"] is not None:
        ex = ctx.frame.ints(a["valid_shape"], "a valid extent")
        valid = tuple(min(v, e) for v, e in zip(valid or shape, ex))
    return GTensor(src.buf, t.dtype, tuple(shape), _row_major(shape), src.base, "ND",
                   valid if valid != tuple(shape) else None, t.pad)


@_op("tensor.view")
def _tensor_view(ctx: _OpCtx, a: dict):
    t = _need_tensor(ctx, a["tensor"], "tensor")
    layout = _enum_member(a["layout"]) or t.layout
    if t.nz is not None or t.blocked:
        ctx.fault("an NZ tensor has no view")
    if a["shape"] is None:
        if layout == t.layout:
            return t
        shape = t.shape[:-2] + (t.shape[-1], t.shape[-2])
        strides = t.strides[:-2] + (t.strides[-1], t.strides[-2])
        valid = None if t.valid is None else t.valid[:-2] + (t.valid[-1], t.valid[-2])
        v = _view(t, shape=shape, strides=strides, layout=layout, valid=valid)
    else:
        shape = ctx.frame.ints(a["shape"])
        if tuple(shape) == t.shape and layout == t.layout:
            v = _view(t)
        else:
            if not _is_packed(t):
                ctx.fault("a strided tensor cannot be shape-reinterpreted")
            v = _view(t, shape=tuple(shape), strides=_packed_strides(shape, layout), layout=layout,
                      valid=_region_after_reshape(t.shape, t.valid, shape) if layout == t.layout == "ND" else None)
    if a["valid_shape"] is not None:
        v.valid = ctx.frame.ints(a["valid_shape"], "a valid extent")
    return v


@_op("tensor.reinterpret_view")
def _tensor_reinterpret_view(ctx: _OpCtx, a: dict):
    t = _need_tensor(ctx, a["tensor"], "tensor")
    dst = a["dtype"]
    if not _is_packed(t):
        ctx.fault("the source must be packed")
    ax = t.rank - 2 if t.layout == "DN" else t.rank - 1
    shape = list(t.shape)
    if (shape[ax] * t.dtype.bytes) % dst.bytes:
        ctx.fault(f"axis {ax} is not a whole number of {dst.name} elements")
    shape[ax] = shape[ax] * t.dtype.bytes // dst.bytes
    if a["shape"] is not None:
        shape = list(ctx.frame.ints(a["shape"]))
    valid = None
    if t.valid is not None:
        valid = list(t.valid)
        valid[ax] = valid[ax] * t.dtype.bytes // dst.bytes
    if t.base % dst.bytes:
        ctx.fault("the view starts inside a target element", code="PTOC-E0503")
    return GTensor(t.buf, dst, tuple(shape), _packed_strides(shape, t.layout), t.base, t.layout,
                   tuple(valid) if valid else None, t.pad if t.pad in ("zero", None) else None)


@_op("tensor.transpose")
def _tensor_transpose(ctx: _OpCtx, a: dict):
    t = _need_tensor(ctx, a["tensor"], "tensor")
    x = _tensor_as_tile(t)
    i, j = _axes(ctx, a, x.rank)
    valid = list(x.valid)
    valid[i], valid[j] = valid[j], valid[i]
    if a["valid_shape"] is not None:
        ex = ctx.frame.ints(a["valid_shape"], "a valid extent")
        valid = [min(v, e) for v, e in zip(valid, ex)]
    return _tile_as_tensor(_tile(np.swapaxes(x.data, i, j), x.dtype, valid))


@_op("tensor.set_validshape")
def _tensor_set_validshape(ctx: _OpCtx, a: dict):
    t = _need_tensor(ctx, a["tensor"], "tensor")
    r, c = _as_int(a["valid_rows"], "a valid extent"), _as_int(a["valid_cols"], "a valid extent")
    if t.rank != 2 or not (0 <= r <= t.shape[0] and 0 <= c <= t.shape[1]):
        ctx.fault(f"valid region [{r}, {c}] does not fit the tensor {list(t.shape)}", code="PTOC-E0503")
    return _view(t, valid=None if (r, c) == t.shape else (r, c))


# --------------------------------------------------------------------------------------------------
# Matrix multiplication
# --------------------------------------------------------------------------------------------------


def _acc_dtype(dt: DType) -> DType:
    if dt.is_int:
        return dtypes.INT32
    return dtypes.FP32


def _mm_values(x: np.ndarray, dt: DType, axis: int = -1) -> np.ndarray:
    if dt.is_packed_fp4:
        return decode_fp4(x, dt, axis)
    if dt.is_int or dt == BOOL:
        return x.astype(np.int64)
    return x.astype(np.float64)


def _product(lhs: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    if lhs.dtype == np.int64 and rhs.dtype == np.int64:
        return np.matmul(lhs, rhs)
    return np.matmul(lhs.astype(np.float64), rhs.astype(np.float64))


def _acc_result(p: np.ndarray, dt: DType, acc: np.ndarray | None = None) -> np.ndarray:
    if dt.is_int:
        r = p if acc is None else acc.astype(np.int64) + p
        return r.astype(_np(dt))
    r = p if acc is None else acc.astype(np.float64) + p
    return _to_float_dtype(r, dt, "rint")


def _mm_check(ctx: _OpCtx, lhs: Tile, rhs: Tile) -> None:
    if lhs.rank != 2 or rhs.rank != 2:
        ctx.fault("operands must be 2-D")
    if lhs.dtype != rhs.dtype:
        ctx.fault(f"lhs is {lhs.dtype.name} but rhs is {rhs.dtype.name}")
    if lhs.shape[1] != rhs.shape[0]:
        ctx.fault(f"inner dimensions differ: {list(lhs.shape)} x {list(rhs.shape)}")


@_op("tile.matmul")
def _tile_matmul(ctx: _OpCtx, a: dict):
    lhs, rhs = _need_tile(ctx, a["lhs"], "lhs"), _need_tile(ctx, a["rhs"], "rhs")
    _mm_check(ctx, lhs, rhs)
    acc = _acc_dtype(lhs.dtype)
    p = _product(_mm_values(lhs.data, lhs.dtype), _mm_values(rhs.data, rhs.dtype))
    return _tile(_acc_result(p, acc), acc, (lhs.valid[0], rhs.valid[1]), memory="Acc")


@_op("tile.matmul_acc")
def _tile_matmul_acc(ctx: _OpCtx, a: dict):
    acc_t = _need_tile(ctx, a["acc"], "acc")
    lhs, rhs = _need_tile(ctx, a["lhs"], "lhs"), _need_tile(ctx, a["rhs"], "rhs")
    _mm_check(ctx, lhs, rhs)
    if acc_t.shape != (lhs.shape[0], rhs.shape[1]):
        ctx.fault(f"the accumulator is {list(acc_t.shape)}, the product {[lhs.shape[0], rhs.shape[1]]}")
    p = _product(_mm_values(lhs.data, lhs.dtype), _mm_values(rhs.data, rhs.dtype))
    return _tile(_acc_result(p, acc_t.dtype, acc_t.data), acc_t.dtype, acc_t.valid, memory=acc_t.memory or "Acc")


@_op("tile.matmul_bias")
def _tile_matmul_bias(ctx: _OpCtx, a: dict):
    lhs, rhs = _need_tile(ctx, a["lhs"], "lhs"), _need_tile(ctx, a["rhs"], "rhs")
    bias = _need_tile(ctx, a["bias"], "bias")
    _mm_check(ctx, lhs, rhs)
    acc = _acc_dtype(lhs.dtype)
    p = _product(_mm_values(lhs.data, lhs.dtype), _mm_values(rhs.data, rhs.dtype))
    b = np.broadcast_to(_mm_values(bias.data, bias.dtype), p.shape)
    valid = (lhs.valid[0], min(rhs.valid[1], bias.valid[1]))
    return _tile(_acc_result(p, acc, b), acc, valid, memory="Acc")


@_op("tile.matmul_mx")
def _tile_matmul_mx(ctx: _OpCtx, a: dict):
    lhs, rhs = _need_tile(ctx, a["lhs"], "lhs"), _need_tile(ctx, a["rhs"], "rhs")
    ls, rs = _need_tile(ctx, a["lhs_scale"], "lhs_scale"), _need_tile(ctx, a["rhs_scale"], "rhs_scale")
    x = _mm_values(lhs.data, lhs.dtype)
    w = _mm_values(rhs.data, rhs.dtype)
    if x.shape[1] != w.shape[0] or x.shape[1] % 32:
        ctx.fault(f"lhs holds K = {x.shape[1]} values per row, rhs {w.shape[0]} rows (K % 32 == 0)")
    sx = np.repeat(ls.data.astype(np.float64), 32, axis=1)
    sw = np.repeat(rs.data.astype(np.float64), 32, axis=0)
    if sx.shape != x.shape or sw.shape != w.shape:
        ctx.fault("the scales do not match the operands (one FP8E8M0 scale per 32 values along K)")
    p = np.matmul(x * sx, w * sw)
    valid = (lhs.valid[0], rhs.valid[1] * rhs.dtype.packed_values)
    return _tile(_to_float_dtype(p, dtypes.FP32, "rint"), dtypes.FP32, valid, memory="Acc")


def _bool(v) -> bool:
    return v is not None and _truthy(v)


def _tensor_product(ctx: _OpCtx, a: dict):
    lhs, rhs = _need_tensor(ctx, a["lhs"], "lhs"), _need_tensor(ctx, a["rhs"], "rhs")
    x, y = _tensor_as_tile(lhs), _tensor_as_tile(rhs)
    xv, yv = _mm_values(x.data, x.dtype), _mm_values(y.data, y.dtype)
    lv, rv = list(x.valid), list(y.valid)
    if _bool(a["a_trans"]):
        xv = np.swapaxes(xv, -1, -2)
        lv[-1], lv[-2] = lv[-2], lv[-1]
    if _bool(a["b_trans"]):
        yv = np.swapaxes(yv, -1, -2)
        rv[-1], rv[-2] = rv[-2], rv[-1]
    if xv.shape[-1] != yv.shape[-2]:
        ctx.fault(f"inner dimensions differ: {list(xv.shape)} x {list(yv.shape)}")
    p = _product(xv, yv)
    valid = tuple(p.shape[:-2]) + (lv[-2], rv[-1])
    return p, valid, x.dtype


@_op("tensor.matmul")
def _tensor_matmul(ctx: _OpCtx, a: dict):
    p, valid, dt = _tensor_product(ctx, a)
    out = a["out_dtype"] if isinstance(a["out_dtype"], DType) else _acc_dtype(dt)
    acc = _acc_dtype(dt)
    r = _acc_result(p, acc)
    if out != acc:
        r = cast_array(r, acc, out, "rint")
    return _tile_as_tensor(_tile(r, out, valid))


@_op("tensor.matmul_acc")
def _tensor_matmul_acc(ctx: _OpCtx, a: dict):
    acc_t = _need_tensor(ctx, a["acc"], "acc")
    acc = _tensor_as_tile(acc_t)
    p, _valid, dt = _tensor_product(ctx, a)
    if p.shape != acc.shape:
        ctx.fault(f"the accumulator is {list(acc.shape)}, the product {list(p.shape)}")
    r = _acc_result(p, acc.dtype, acc.data) if acc.dtype == _acc_dtype(dt) else cast_array(
        _acc_result(p, _acc_dtype(dt), acc.data.astype(np.float64 if _is_float(acc.dtype) else np.int64)),
        _acc_dtype(dt), acc.dtype, "rint")
    return _tile_as_tensor(_tile(r, acc.dtype, acc.valid))


# --------------------------------------------------------------------------------------------------
# Gather, scatter, masks (OP-5, OP-9)
# --------------------------------------------------------------------------------------------------


def _pattern(ctx: _OpCtx, v) -> int:
    from ptoc.ops.gather import MASK_BY_NAME

    if isinstance(v, EnumLit):
        if v.member not in MASK_BY_NAME:
            ctx.fault(f"unknown mask pattern {v.member!r}")
        return MASK_BY_NAME[v.member]
    if v is None:
        ctx.fault("needs mask_pattern=")
    return _as_int(v, "a mask pattern")


def _gather_mask_tile(ctx: _OpCtx, x: Tile, pattern: int, out_dt) -> Tile:
    from ptoc.ops.gather import mask_columns

    cols = mask_columns(pattern, x.shape[-1])
    data = x.data[..., cols]
    valid = list(x.valid)
    valid[-1] = len(mask_columns(pattern, x.valid[-1]))
    dt = x.dtype
    if isinstance(out_dt, DType) and out_dt != dt:
        if out_dt.bits != dt.bits:
            ctx.fault(f"output_dtype {out_dt.name} must have the source's width")
        data = np.ascontiguousarray(data).view(_np(out_dt))
        dt = out_dt
    return _tile(data, dt, valid, memory=x.memory, blayout=x.blayout)


@_op("tile.gather_mask", "tensor.gather_mask")
def _gather_mask(ctx: _OpCtx, a: dict):
    name = "src" if ctx.name.startswith("tile.") else "input"
    src = a[name]
    x = _need_tile(ctx, _to_tile_arg(src), name)
    r = _gather_mask_tile(ctx, x, _pattern(ctx, a["mask_pattern"]), a["output_dtype"])
    return _result_like(isinstance(src, GTensor), r)


def _scatter_mask_tile(ctx: _OpCtx, dst: Tile, src: Tile, pattern: int) -> Tile:
    from ptoc.ops.gather import mask_columns

    if dst.dtype != src.dtype:
        ctx.fault("src and dst dtypes differ")
    cols = mask_columns(pattern, dst.shape[-1])
    if len(cols) != src.shape[-1] or src.shape[0] != dst.shape[0]:
        ctx.fault(f"pattern {pattern} expands {src.shape[-1]} columns, dst has {dst.shape[-1]}")
    data = dst.data.copy()
    data[..., cols] = src.data
    return _tile(data, dst.dtype, dst.valid, pad=dst.pad, memory=dst.memory, blayout=dst.blayout)


@_op("tile.scatter_mask")
def _tile_scatter_mask(ctx: _OpCtx, a: dict):
    dst, src = _need_tile(ctx, a["dst"], "dst"), _need_tile(ctx, a["src"], "src")
    return _scatter_mask_tile(ctx, dst, src, _pattern(ctx, a["mask_pattern"]))


@_op("tensor.scatter_mask")
def _tensor_scatter_mask(ctx: _OpCtx, a: dict):
    src = _need_tile(ctx, _to_tile_arg(a["input"]), "input")
    dst = _need_tile(ctx, _to_tile_arg(a["dst"]), "dst")
    return _tile_as_tensor(_scatter_mask_tile(ctx, dst, src, _pattern(ctx, a["mask_pattern"])))


def _flat_gather(ctx: _OpCtx, src: np.ndarray, idx: Tile) -> np.ndarray:
    flat = src.reshape(-1)
    m = _box_mask(idx.shape, idx.valid)
    ids = idx.data[m].astype(np.int64)
    if ids.size and (ids.min() < 0 or ids.max() >= flat.size):
        bad = int(ids[(ids < 0) | (ids >= flat.size)][0])
        ctx.fault(f"index {bad} is outside the {flat.size}-element source", code="PTOC-E0503")
    out = np.full(idx.shape, _undef_value_for(src), dtype=src.dtype)
    out[m] = flat[ids]
    return out


def _undef_value_for(arr: np.ndarray):
    if arr.dtype == np.bool_:
        return False
    if arr.dtype.kind in "iu":
        return np.frombuffer(bytes([0xA5]) * arr.dtype.itemsize, dtype=arr.dtype)[0]
    return np.array(np.nan).astype(arr.dtype)[()]


@_op("tensor.gather")
def _tensor_gather(ctx: _OpCtx, a: dict):
    src = a["input"]
    if a["mask_pattern"] is not None:
        x = _need_tile(ctx, _to_tile_arg(src), "input")
        return _tile_as_tensor(_gather_mask_tile(ctx, x, _pattern(ctx, a["mask_pattern"]), a["output_dtype"]))
    x = _need_tile(ctx, _to_tile_arg(src), "input")
    idx = _need_tile(ctx, _to_tile_arg(a["index"]), "index")
    if a["dim"] is None:
        return _tile_as_tensor(_tile(_flat_gather(ctx, x.data, idx), x.dtype, idx.valid))
    dim = _as_int(a["dim"], "an axis") % x.rank
    if idx.rank != x.rank:
        ctx.fault("the index rank differs from the source's")
    sl = tuple(slice(0, idx.shape[k]) if k != dim else slice(None) for k in range(x.rank))
    part = x.data[sl]
    m = _box_mask(idx.shape, idx.valid)
    ids = np.where(m, idx.data.astype(np.int64), 0)
    if (ids < 0).any() or (ids >= part.shape[dim]).any():
        ctx.fault(f"an index is outside axis {dim} of extent {part.shape[dim]}", code="PTOC-E0503")
    out = np.take_along_axis(part, ids, axis=dim)
    return _tile_as_tensor(_tile(out, x.dtype, idx.valid))


@_op("tile.gather")
def _tile_gather(ctx: _OpCtx, a: dict):
    x = _need_tile(ctx, a["src"], "src")
    idx = _need_tile(ctx, a["indices"], "indices")
    return _tile(_flat_gather(ctx, x.data, idx), x.dtype, idx.valid, memory="Vec")


@_op("tensor.scatter")
def _tensor_scatter(ctx: _OpCtx, a: dict):
    inp = _need_tile(ctx, _to_tile_arg(a["input"]), "input")
    idx = _need_tile(ctx, _to_tile_arg(a["index"]), "index")
    src = _need_tile(ctx, _to_tile_arg(a["src"]), "src")
    out = inp.data.copy()
    m = _box_mask(src.shape, src.valid) & _box_mask(idx.shape, idx.valid)
    rows, ks = np.nonzero(m)
    cols = idx.data[rows, ks].astype(np.int64)
    if cols.size and (cols.min() < 0 or cols.max() >= out.shape[1]):
        ctx.fault("an index is outside the input's columns", code="PTOC-E0503")
    out[rows, cols] = src.data[rows, ks]
    return _tile_as_tensor(_tile(out, inp.dtype, inp.valid))


@_op("tile.scatter")
def _tile_scatter(ctx: _OpCtx, a: dict):
    dst, src = _need_tile(ctx, a["dst"], "dst"), _need_tile(ctx, a["src"], "src")
    idx = _need_tile(ctx, a["indexes"], "indexes")
    out = dst.data.copy()
    if idx.shape[1] == 1 and src.shape[1] != 1:  # one destination row per source row
        for i in range(min(src.valid[0], idx.valid[0])):
            r = int(idx.data[i, 0])
            if not 0 <= r < out.shape[0]:
                ctx.fault(f"row index {r} is outside the destination", code="PTOC-E0503")
            out[r, :src.valid[1]] = src.data[i, :src.valid[1]]
    else:
        m = _box_mask(src.shape, src.valid) & _box_mask(idx.shape, idx.valid)
        ii, jj = np.nonzero(m)
        rr = idx.data[ii, jj].astype(np.int64)
        if rr.size and (rr.min() < 0 or rr.max() >= out.shape[0]):
            ctx.fault("a row index is outside the destination", code="PTOC-E0503")
        out[rr, jj] = src.data[ii, jj]
    return _tile(out, dst.dtype, dst.valid, pad=dst.pad, memory=dst.memory, blayout=dst.blayout)


@_op("tile.gatherb")
def _tile_gatherb(ctx: _OpCtx, a: dict):
    x = _need_tile(ctx, a["src"], "src")
    off = _need_tile(ctx, a["offsets"], "offsets")
    out_dt = a["output_dtype"] if isinstance(a["output_dtype"], DType) else x.dtype
    raw = np.ascontiguousarray(x.data).view(np.uint8).reshape(-1)
    per = 32 // out_dt.bytes
    out = _undefined((off.shape[0], off.shape[1] * per), out_dt)
    for i in range(off.valid[0]):
        for j in range(off.valid[1]):
            o = int(off.data[i, j])
            if o < 0 or o + 32 > raw.size:
                ctx.fault(f"byte offset {o} reads outside the {raw.size}-byte source", code="PTOC-E0503")
            out[i, j * per:(j + 1) * per] = raw[o:o + 32].view(_np(out_dt))
    return _tile(out, out_dt, (off.valid[0], off.valid[1] * per), memory="Vec")


@_op("tile.mgather")
def _tile_mgather(ctx: _OpCtx, a: dict):
    mem = _need_tensor(ctx, a["mem"], "mem")
    idx = _need_tile(ctx, _to_tile_arg(a["idx"]), "idx")
    coalesce = a["coalesce"] if isinstance(a["coalesce"], str) else ("elem" if _as_int(a["coalesce"] or 0) else "row") \
        if a["coalesce"] is not None else "row"
    oob = a["gather_oob"] if isinstance(a["gather_oob"], str) else "undefined"
    target = _enum_member(a["target_memory"]) or "Vec"
    src = _read_logical(mem, mem.shape, "pl.tile.mgather")
    m = _box_mask(idx.shape, idx.valid)
    if coalesce == "elem":
        table = src.reshape(-1)
        ids, out_shape = idx.data.astype(np.int64), idx.shape
    else:
        table = src.reshape(-1, src.shape[-1])
        ids = idx.data.reshape(-1).astype(np.int64)
        m = m.reshape(-1)
        out_shape = (ids.size, table.shape[-1])
    n = table.shape[0]
    zero = np.zeros(ids.shape, dtype=bool)
    if oob == "clamp":
        ids = np.clip(ids, 0, n - 1)
    elif oob == "wrap":
        ids = np.mod(ids, n)
    elif oob == "zero":
        zero = (ids < 0) | (ids >= n)
        ids = np.where(zero, 0, ids)
    bad = m & ((ids < 0) | (ids >= n))
    if bad.any():
        ctx.fault(f"index {int(ids[bad][0])} is outside the {n} gathered units of the source", code="PTOC-E0503")
    out = _undefined(out_shape, mem.dtype)
    out[m] = table[ids[m]]
    if zero.any():
        out[zero & m] = 0
    if coalesce == "elem":
        valid = idx.valid
    else:
        valid = (int(m.sum()), table.shape[-1])
        if a["valid_shape"] is not None and target == "Mat":
            valid = ctx.frame.ints(a["valid_shape"])
    return _tile(out, mem.dtype, valid, memory=target)


@_op("tile.sort32", "tensor.sort32", "tile.mrgsort_format1", "tensor.mrgsort_format1", "tile.mrgsort_format2",
     "tensor.mrgsort_format2")
def _sort(ctx: _OpCtx, a: dict):
    raise Unsupported(ctx.name, "sorting is not modelled", ctx.span)


# --------------------------------------------------------------------------------------------------
# MX quantization (FP4-5, OP-6)
# --------------------------------------------------------------------------------------------------

_ELEM_EMAX = {"FP4E2M1X2": 2, "FP8E4M3FN": 8}
_ELEM_MAX = {"FP4E2M1X2": 6.0, "FP8E4M3FN": 448.0}


def quant_mx_array(x: np.ndarray, dt: DType, axis: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """OCP MX quantization of a 2-D float array in groups of 32 along K -> (data, E8M0 scale codes)."""
    v = np.asarray(x, dtype=np.float64)
    if axis == 0:
        v = v  # [N, K]: groups along K too; the outputs are transposed below
    rows, k = v.shape
    g = v.reshape(rows, k // 32, 32)
    amax = np.nanmax(np.abs(g), axis=-1)
    with np.errstate(all="ignore"):
        e = np.where(amax > 0, np.floor(np.log2(np.where(amax > 0, amax, 1.0))) - _ELEM_EMAX[dt.name], -127)
    e = np.clip(e, -127, 127).astype(np.int64)
    scaled = g / np.exp2(e)[..., None]
    scaled = np.clip(scaled, -_ELEM_MAX[dt.name], _ELEM_MAX[dt.name]).reshape(rows, k)
    codes = (e + 127).astype(np.uint8)
    if axis == 0:
        scaled, codes = scaled.T, codes.T
    if dt.is_packed_fp4:
        data = encode_fp4(scaled, dt, "rint", -1)
    else:
        data = _to_float_dtype(scaled, dt, "rint")
    return data, codes


def _quant(ctx: _OpCtx, a: dict):
    src = a["input"]
    x = _need_tile(ctx, _to_tile_arg(src), "input")
    dt = a["dtype"] if isinstance(a["dtype"], DType) else a["target_type"]
    dt = dt if isinstance(dt, DType) else dtypes.BY_NAME["FP8E4M3FN"]
    if dt.name not in _ELEM_EMAX:
        raise Unsupported(ctx.name, f"quantization to {dt.name}", ctx.span)
    if a["quant_scale_alg"] not in (None, "ocp"):
        raise Unsupported(ctx.name, f"quant_scale_alg={a['quant_scale_alg']!r}", ctx.span)
    axis = _as_int(a["group_axis"] if a["group_axis"] is not None else (a["axis"] if a["axis"] is not None else 1))
    if x.rank != 2 or x.shape[1] % 32:
        ctx.fault("needs a 2-D input whose K is a multiple of 32")
    data, codes = quant_mx_array(x.data, dt, axis)
    e8m0 = dtypes.BY_NAME["FP8E8M0"]
    d = _tile(data, dt, memory=x.memory or "Vec")
    s = _tile(codes.view(_np(e8m0)), e8m0, memory=x.memory or "Vec")
    return _result_like(isinstance(src, GTensor), (d, s))


_op("tile.quant_mx", "tile.tquant_mx", "tensor.quant_mx")(_quant)


__all__ = [
    "CAST_MODES",
    "FP4_E1M2_VALUES",
    "FP4_E2M1_VALUES",
    "GTensor",
    "Outputs",
    "RETURN_KEY",
    "ReferenceFault",
    "Scalar",
    "Tile",
    "Unsupported",
    "cast_array",
    "compare_outputs",
    "decode_fp4",
    "encode_fp4",
    "fp4_code_values",
    "implemented_ops",
    "quant_mx_array",
    "run_function",
]
