"""Host packers: a logical numpy array <-> the bytes a kernel reads from global memory.

    pack(array, layout, dtype) -> bytes
    unpack(data, layout, dtype, logical_shape) -> np.ndarray
    blocked_shape(logical_shape, dtype, layout="NZ") -> tuple      (the physical array shape)
    nz_offset(logical_index, logical_shape, dtype) -> int          (element offset in the NZ image)
    load_npy / save_npy / save_bin, pack_file / unpack_file        (the work behind `ptoc pack|unpack`)

Every bad input (unknown layout or dtype, a shape a layout cannot hold, a size mismatch, a value the
dtype cannot represent, an unreadable or unwritable file) raises `ValueError` with a user-facing message.
Packing is a pure permutation of whole elements: `unpack(pack(x)) == x` bit for bit (NaN payloads too).
Bytes are in host order, which is little-endian on every host ptoc supports (as on the device).

Layouts. The physical image is the row-major (C-order) walk of the physical array named below; for a
layout with an index map, `P[phys...] = X[logical...]`.

- ``ND``: row-major; any rank. The physical array is the logical one.
- ``DN``: column-major in the last two axes, leading axes row-major; rank >= 2. Logical `[..., R, C]` ->
  physical `[..., C, R]`, `P[..., c, r] = X[..., r, c]`. `[[a, b], [c, d], [e, f]]` -> `a c e b d f`.
- ``NZ`` (NZ-1..NZ-3, BlockNzTensorViews): logical `[..., R, C]`, rank >= 2, R and C positive,
  R % 16 == 0, C % c0 == 0 with c0 = 256 / bits (INT8/UINT8/FP8/FP4-carriers 32, FP16/BF16/INT16 16,
  FP32/INT32 8, INT64/UINT64 4). Physical `[B, C/c0, R/16, 16, c0]`: rank 2 -> B = 1, rank 3 -> B =
  the leading axis, rank > 3 -> B = the row-major fold of all leading axes. Logical (b, r, c) sits at
  `b*C*R + (c//c0)*R*c0 + (r//16)*16*c0 + (r%16)*c0 + c%c0` (strides `[C*R, R*c0, 16*c0, c0, 1]`).
- ``ZN`` (MOV-2, TMOV ND->ZN, the Right operand): logical 2-D `[K, N]` only, K % K0 == 0 and
  N % 16 == 0, K0 = 32 / sizeof(T); dtypes of the TMOV list that have a numpy type (FP16, BF16, FP32,
  INT32, INT8, UINT8, FP8E4M3FN, FP8E5M2, FP4E2M1X2, FP4E1M2X2). Physical `[K/K0, N/16, 16, K0]`:
  ``D_ZN[k1, n1, j, i] = S_ND[k1*K0 + i][n1*16 + j]``.
- ``ZZ`` (MOV-3, TMOV ND->ZZ, ``grp_axis = 1``): logical 2-D ND-grouped exponents `[R, C]` only,
  R % 16 == 0 and C % 2 == 0. Physical `[R/16, C/2, 2, 16]`:
  ``D_ZZ[rb, c, q, d] = D_ND[16*rb + d][2*c + q]``.
- ``ZZ_DN`` (MOV-4, TMOV DN->ZZ, ``grp_axis = 0``): logical 2-D DN-grouped exponents `[M^, N]` only
  (M^ = M/32), M^ % 2 == 0 and N % 16 == 0. Physical `[N/16, M^/2, 16, 2]`:
  ``E_ZZ[cb, p, q, d] = E_DN[2*p + d][16*cb + q]``.
  Both ZZ forms hold 16 x 2 one-byte E8M0 exponents per 32-byte box, so they take FP8E8M0 or its
  UINT8 carrier only. Note: the two maps order a box differently (MOV-3: 16 rows of one column, then
  the next column; MOV-4: the two rows interleaved), although the reference calls DN->ZZ "transpose,
  then ND->ZZ"; each map is implemented exactly as the reference writes it.
  Aliases: ``ND->NZ`` = NZ, ``ND->ZN`` = ZN, ``ND->ZZ`` = ZZ, ``DN->ZZ`` = ZZ_DN (case-insensitive).

Dtypes (`ptoc.ir.dtypes`): FP32, FP16, BF16, INT8..INT64, UINT8..UINT64, FP8E4M3FN, FP8E5M2, FP8E8M0
and the packed FP4 carriers FP4E2M1X2 / FP4E1M2X2 as uint8 (FP4-1: every shape counts carriers, one
byte = two values). Sub-byte types (INT4, UINT4, HF4, BOOL; NZ-10), HF8 (no numpy type: pack its bytes
as UINT8) and the scalar INDEX type are rejected. An input array of another numpy dtype is converted only
when the conversion is exact (every value survives the round trip); otherwise it is rejected.

Note: the BlockNzTensorViews pass rejects NZ tensors of packed FP4 (PTOC-E0344); this packer still
writes their byte image (carriers are bytes, c0 = 32), as TMOV ND->NZ accepts the carrier types.
"""

from __future__ import annotations

import math
import os
import re
import io
import warnings
from dataclasses import dataclass

import numpy as np

from ptoc.ir import dtypes as _dt

FRACTAL_ROWS = 16
C0_BYTES = 32

LAYOUTS = ("ND", "DN", "NZ", "ZN", "ZZ", "ZZ_DN")
_LAYOUT_ALIASES = {"ND->NZ": "NZ", "ND->ZN": "ZN", "ND->ZZ": "ZZ", "DN->ZZ": "ZZ_DN", "ZZDN": "ZZ_DN",
                   "ZZ-DN": "ZZ_DN"}
_LAYOUT_RULE = {"NZ": "NZ-2", "ZN": "MOV-2", "ZZ": "MOV-3", "ZZ_DN": "MOV-4"}

SUPPORTED_DTYPES = ("FP32", "FP16", "BF16", "INT8", "INT16", "INT32", "INT64", "UINT8", "UINT16", "UINT32",
                    "UINT64", "FP8E4M3FN", "FP8E5M2", "FP8E8M0", "FP4E2M1X2", "FP4E1M2X2")
# MOV-2: the element types TMOV ND->ZN lists, restricted to those with a numpy type (HF8 has none)
ZN_DTYPES = ("FP16", "BF16", "FP32", "INT32", "INT8", "UINT8", "FP8E4M3FN", "FP8E5M2", "FP4E2M1X2",
             "FP4E1M2X2")
# MOV-3 / MOV-4: one-byte E8M0 exponents (the TMOV example carries them as uint8_t)
ZZ_DTYPES = ("FP8E8M0", "UINT8")


# --------------------------------------------------------------------------------------------------
# argument checking
# --------------------------------------------------------------------------------------------------


def _layout(layout) -> str:
    if not isinstance(layout, str):
        raise ValueError(f"layout must be a string, one of {', '.join(LAYOUTS)}; got {layout!r}")
    key = layout.strip().upper()
    key = _LAYOUT_ALIASES.get(key, key)
    if key not in LAYOUTS:
        raise ValueError(f"unknown layout {layout!r}: use one of {', '.join(LAYOUTS)} "
                         "(ZZ is TMOV ND->ZZ, MOV-3; ZZ_DN is TMOV DN->ZZ, MOV-4)")
    return key


def _dtype(dtype) -> _dt.DType:
    """The table row for `dtype` (a DType or a name such as "int8", "FP32", "pl.BF16")."""
    if isinstance(dtype, _dt.DType):
        dt = dtype
    elif isinstance(dtype, str):
        name = dtype.strip()
        if name.startswith("pl."):
            name = name[3:]
        if name in _dt.REMOVED or name.upper() in _dt.REMOVED:
            new = _dt.REMOVED.get(name) or _dt.REMOVED[name.upper()]
            raise ValueError(f"dtype {dtype!r} was removed (FP4-1): spell it {new} (or FP4E1M2X2)")
        dt = _dt.lookup(name) or _dt.lookup(name.upper())
        if dt is None:
            raise ValueError(f"unknown dtype {dtype!r}: use one of {', '.join(SUPPORTED_DTYPES)}")
    else:
        raise ValueError(f"dtype must be a dtype name such as 'int8'; got {dtype!r}")
    if dt.name not in SUPPORTED_DTYPES:
        if dt.sub_byte:
            why = (f"{dt.name} is a sub-byte type with no byte carrier, so it has no packed byte image "
                   "(NZ-10 rejects it for NZ)")
        elif dt.name == "HF8":
            why = "HF8 has no numpy type; pack its raw bytes as UINT8 instead"
        else:
            why = f"{dt.name} is a scalar type, not an element type of a global-memory tensor"
        raise ValueError(f"cannot pack {dt.name}: {why}; supported dtypes: {', '.join(SUPPORTED_DTYPES)}")
    return dt


def _np(dt: _dt.DType) -> np.dtype:
    return _dt.numpy_dtype(dt)


def _shape(shape) -> tuple[int, ...]:
    if isinstance(shape, str):
        return parse_shape(shape)
    try:
        dims = tuple(shape)
    except TypeError:
        raise ValueError(f"a shape must be a sequence of integers; got {shape!r}") from None
    out = []
    for d in dims:
        if isinstance(d, (bool, np.bool_)) or not isinstance(d, (int, np.integer)):
            raise ValueError(f"shape {shape!r}: every extent must be an integer; got {d!r}")
        if d < 0:
            raise ValueError(f"shape {list(dims)}: extents must be non-negative; got {int(d)}")
        out.append(int(d))
    return tuple(out)


def parse_shape(text: str) -> tuple[int, ...]:
    """"256,512", "256x512", "[256, 512]" or "(256, 512)" -> (256, 512)."""
    body = text.strip()
    if body[:1] in "[(" and body[-1:] in "])":
        body = body[1:-1]
    parts = [p for p in re.split(r"[,x\s]+", body.strip()) if p]
    if not parts or not all(p.isdigit() for p in parts):
        raise ValueError(f"malformed shape {text!r}: give extents separated by commas, e.g. 256,512")
    return tuple(int(p) for p in parts)


def _fmt(shape) -> str:
    return "[" + ", ".join(str(d) for d in shape) + "]"


def _c0(dt: _dt.DType) -> int:
    """Elements per 32-byte C0 line (NZ-1), computed here from the element size: the reference checks
    the compiler's c0, so it does not borrow it."""
    if dt.sub_byte or dt.bits < 8:  # unreachable for SUPPORTED_DTYPES; kept for the NZ-10 wording
        raise ValueError(f"{dt.name} has no NZ form (NZ-10: sub-byte types are not supported)")
    return C0_BYTES // dt.bytes


# --------------------------------------------------------------------------------------------------
# per-layout geometry: the physical shape, and the reshape + transpose from logical to physical
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Plan:
    split: tuple[int, ...]  # logical array reshaped to this
    perm: tuple[int, ...]  # then transposed by this -> physical


def _plan(shape: tuple[int, ...], layout: str, dt: _dt.DType) -> _Plan:
    rank = len(shape)
    if layout == "ND":
        return _Plan(shape, tuple(range(rank)))
    if layout == "DN":
        if rank < 2:
            raise ValueError(f"a DN array needs rank >= 2 (column-major in the last two axes); shape "
                             f"{_fmt(shape)} has rank {rank}")
        return _Plan(shape, tuple(range(rank - 2)) + (rank - 1, rank - 2))
    if layout == "NZ":
        c0 = _c0(dt)
        if rank < 2:
            raise ValueError(f"an NZ array needs rank >= 2 (the trailing [R, C] fractal plane); shape "
                             f"{_fmt(shape)} has rank {rank} (NZ-10)")
        *lead, rows, cols = shape
        problems = []
        if rows <= 0 or rows % FRACTAL_ROWS:
            problems.append(f"shape[-2] = {rows} is not a positive multiple of {FRACTAL_ROWS}")
        if cols <= 0 or cols % c0:
            problems.append(f"shape[-1] = {cols} is not a positive multiple of c0 = {c0} ({dt.name})")
        if problems:
            raise ValueError(f"NZ shape {_fmt(shape)} {dt.name} is not a whole number of {FRACTAL_ROWS} x {c0} "
                             f"fractals: {'; '.join(problems)} (NZ-10); pad the data to whole fractals")
        batch = math.prod(lead)
        return _Plan((batch, rows // FRACTAL_ROWS, FRACTAL_ROWS, cols // c0, c0), (0, 3, 1, 2, 4))
    # the TMOV tile layouts: 2-D only
    allowed = ZN_DTYPES if layout == "ZN" else ZZ_DTYPES
    rule = _LAYOUT_RULE[layout]
    if dt.name not in allowed:
        raise ValueError(f"the {layout} layout ({rule}) does not take {dt.name}: accepted dtypes "
                         f"{', '.join(allowed)}")
    if rank != 2:
        raise ValueError(f"the {layout} layout ({rule}) is defined for 2-D arrays only; shape {_fmt(shape)} "
                         f"has rank {rank}")
    rows, cols = shape
    problems = []
    if layout == "ZN":
        k0 = C0_BYTES // dt.bytes
        if rows % k0:
            problems.append(f"K = shape[0] = {rows} is not a multiple of K0 = {k0} ({dt.name})")
        if cols % FRACTAL_ROWS:
            problems.append(f"N = shape[1] = {cols} is not a multiple of {FRACTAL_ROWS}")
        # S[k1*K0 + i][n1*16 + j] -> [k1, i, n1, j] -> D[k1, n1, j, i]
        plan = _Plan((rows // k0, k0, cols // FRACTAL_ROWS, FRACTAL_ROWS), (0, 2, 3, 1))
    elif layout == "ZZ":
        if rows % FRACTAL_ROWS:
            problems.append(f"R = shape[0] = {rows} is not a multiple of {FRACTAL_ROWS}")
        if cols % 2:
            problems.append(f"C = shape[1] = {cols} is not even (ZZ boxes hold column pairs)")
        # D_ND[16*rb + d][2*c + q] -> [rb, d, c, q] -> D_ZZ[rb, c, q, d]
        plan = _Plan((rows // FRACTAL_ROWS, FRACTAL_ROWS, cols // 2, 2), (0, 2, 3, 1))
    else:  # ZZ_DN
        if rows % 2:
            problems.append(f"M^ = shape[0] = {rows} is not even (ZZ boxes hold row pairs)")
        if cols % FRACTAL_ROWS:
            problems.append(f"N = shape[1] = {cols} is not a multiple of {FRACTAL_ROWS}")
        # E_DN[2*p + d][16*cb + q] -> [p, d, cb, q] -> E_ZZ[cb, p, q, d]
        plan = _Plan((rows // 2, 2, cols // FRACTAL_ROWS, FRACTAL_ROWS), (2, 0, 3, 1))
    if problems:
        raise ValueError(f"shape {_fmt(shape)} cannot be packed as {layout} ({rule}): {'; '.join(problems)}")
    return plan


def _physical_shape(plan: _Plan) -> tuple[int, ...]:
    return tuple(plan.split[p] for p in plan.perm)


def blocked_shape(logical_shape, dtype, layout: str = "NZ") -> tuple[int, ...]:
    """The physical array shape of `logical_shape` in `layout` (default NZ: rank 5 `[B, C/c0, R/16, 16, c0]`).

    `blocked_shape((256, 512), "int8") == (1, 16, 16, 16, 32)`; `blocked_shape((64, 16), "fp32") ==
    (1, 2, 4, 16, 8)`. ND returns the shape itself, DN swaps the last two axes, ZN / ZZ / ZZ_DN return
    the 4-D shapes of the module docstring.
    """
    return _physical_shape(_plan(_shape(logical_shape), _layout(layout), _dtype(dtype)))


def packed_strides(physical_shape, layout: str = "ND") -> tuple[int, ...]:
    """Element strides of a packed (gap-free) tensor of `physical_shape` as a tensor type spells them.

    ND and a blocked NZ shape `[B, C/c0, R/16, 16, c0]`: row-major (`stride[i] = prod(shape[i+1:])`; for
    NZ these are NZ-3's `[C*R, R*c0, 16*c0, c0, 1]`). DN, column-major in the last two axes of `[.., R, C]`:
    `stride[-2] = 1`, `stride[-1] = R`, leading axes row-major over the `[R, C]` planes."""
    shape = tuple(int(d) for d in physical_shape)
    layout = _layout(layout)

    def row_major(dims):
        out, acc = [], 1
        for d in reversed(dims):
            out.append(acc)
            acc *= d
        return tuple(reversed(out))

    if layout == "DN":
        if len(shape) < 2:
            raise ValueError(f"a DN tensor needs rank >= 2; shape {_fmt(shape)} has rank {len(shape)}")
        plane = shape[-2] * shape[-1]
        lead = tuple(s * plane for s in row_major(shape[:-2]))
        return lead + (1, shape[-2])
    return row_major(shape)


def nz_offset(logical_index, logical_shape, dtype) -> int:
    """Element offset of logical element `logical_index` in the NZ image of an array of `logical_shape`.

    `b*C*R + (c//c0)*R*c0 + (r//16)*16*c0 + (r%16)*c0 + c%c0`, b the row-major index of the leading axes.
    Multiply by the element size for a byte offset.
    """
    shape = _shape(logical_shape)
    dt = _dtype(dtype)
    _plan(shape, "NZ", dt)  # validates the shape
    c0 = _c0(dt)
    try:
        index = tuple(logical_index)
    except TypeError:
        index = None
    if (index is None or len(index) != len(shape)
            or not all(isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_)) for x in index)):
        raise ValueError(f"index {logical_index!r} must have one integer per axis of shape {_fmt(shape)}")
    index = tuple(int(x) for x in index)
    for i, (x, d) in enumerate(zip(index, shape)):
        if not 0 <= x < d:
            raise ValueError(f"index {list(index)} is out of range for shape {_fmt(shape)} (axis {i})")
    *lead_i, r, c = index
    *lead, rows, cols = shape
    b = 0
    for x, d in zip(lead_i, lead):
        b = b * d + x
    return (b * cols * rows + (c // c0) * rows * c0 + (r // FRACTAL_ROWS) * FRACTAL_ROWS * c0
            + (r % FRACTAL_ROWS) * c0 + c % c0)


# --------------------------------------------------------------------------------------------------
# pack / unpack
# --------------------------------------------------------------------------------------------------


def _is_raw_void(d: np.dtype) -> bool:
    return d.type is np.void and d.fields is None


def _same_type(src: np.dtype, target: np.dtype) -> bool:
    """`src` is `target` up to byte order, or raw `|Vn` records of its size (ml_dtypes data read from .npy)."""
    if src == target:
        return True
    if _is_raw_void(src):
        return src.itemsize == target.itemsize
    return src.kind in "biuf" and src.newbyteorder("=") == target


def _as_dtype(array, dt: _dt.DType) -> np.ndarray:
    """`array` as the numpy type of `dt`, converting only when no value changes (bit-exact round trip)."""
    target = _np(dt)
    try:
        a = np.asarray(array)
    except Exception as e:  # ragged nested lists and the like
        raise ValueError(f"cannot read the input as an array: {e}") from None
    src = a.dtype
    if src == target:
        return a
    if _is_raw_void(src):
        # numpy saves ml_dtypes arrays (bfloat16, float8) as raw records: they can only be such a type again
        if src.itemsize == target.itemsize and target.kind == "V":
            return a.view(target)
        if src.itemsize != target.itemsize:
            raise ValueError(f"the array holds raw {src.itemsize}-byte records but {dt.name} elements take "
                             f"{target.itemsize} bytes")
        raise ValueError(f"the array holds raw {src.itemsize}-byte records (an ml_dtypes type such as bfloat16, "
                         f"as numpy saves it), not {target} values; {dt.name} needs {target}")
    if src.kind not in "biufV":
        raise ValueError(f"the array holds {src} values, not numbers; {dt.name} needs {target}")
    try:
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            conv = a.astype(target)
            back = conv.astype(src)
        exact = back.tobytes() == np.ascontiguousarray(a).tobytes()
        if exact and src.kind in "biu" and target.kind in "iu" and a.size:
            info = np.iinfo(target)  # same-size int <-> uint round-trips bit-exactly but wraps the value
            exact = info.min <= int(a.min()) and int(a.max()) <= info.max
    except (TypeError, ValueError, OverflowError):
        exact = False
    if not exact:
        raise ValueError(f"the array holds {src} values but the dtype is {dt.name} ({target}) and converting "
                         f"would change values; convert the data to {target} first")
    return conv


def convert_exact(array, dtype) -> np.ndarray:
    """`array` as the numpy type of `dtype` (a name or DType); ValueError when a value would change (a
    float32 array for INT8, say) or the array holds no numbers. The one check `pack` and `ptoc run` share."""
    return _as_dtype(array, _dtype(dtype))


def pack(array, layout: str, dtype) -> bytes:
    """The bytes a kernel reads from global memory for the logical array `array` stored in `layout`."""
    lay = _layout(layout)
    dt = _dtype(dtype)
    a = _as_dtype(array, dt)
    plan = _plan(a.shape, lay, dt)
    return np.ascontiguousarray(a.reshape(plan.split).transpose(plan.perm)).tobytes()


def unpack(data, layout: str, dtype, logical_shape) -> np.ndarray:
    """The logical array of `logical_shape` whose `layout` image is `data` (bytes-like); a fresh array."""
    lay = _layout(layout)
    dt = _dtype(dtype)
    shape = _shape(logical_shape)
    plan = _plan(shape, lay, dt)
    target = _np(dt)
    try:
        buf = memoryview(data).cast("B")
    except TypeError:
        raise ValueError(f"packed data must be bytes-like; got {type(data).__name__}") from None
    need = math.prod(shape) * target.itemsize
    if buf.nbytes != need:
        raise ValueError(f"size mismatch: {_fmt(shape)} {dt.name} in {lay} takes {need} bytes, the data has "
                         f"{buf.nbytes}")
    flat = np.frombuffer(buf, dtype=target)
    phys = flat.reshape(_physical_shape(plan))
    inverse = tuple(np.argsort(plan.perm))
    return np.ascontiguousarray(phys.transpose(inverse)).reshape(shape).copy()


# --------------------------------------------------------------------------------------------------
# files
# --------------------------------------------------------------------------------------------------


def load_npy(path) -> np.ndarray:
    """The array stored in the .npy file `path` (no pickles)."""
    try:
        with open(path, "rb") as f:
            a = np.load(f, allow_pickle=False)
    except FileNotFoundError:
        raise ValueError(f"cannot read {path}: no such file") from None
    except IsADirectoryError:
        raise ValueError(f"cannot read {path}: it is a directory") from None
    except (OSError, ValueError, EOFError) as e:
        raise ValueError(f"cannot read {path} as a .npy array: {e}") from None
    if not isinstance(a, np.ndarray):
        raise ValueError(f"cannot read {path}: it is an .npz archive, not a single .npy array")
    if a.dtype.hasobject:
        raise ValueError(f"cannot read {path}: it holds Python objects, not numbers")
    return a


def _read_bytes(path) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        raise ValueError(f"cannot read {path}: no such file") from None
    except OSError as e:
        raise ValueError(f"cannot read {path}: {e.strerror or e}") from None


def _write_atomic(path, write, inputs=()) -> None:
    """Write through `write(fileobj)` all or nothing (ptoc.outputs): never over one of `inputs`, through a
    FIFO or device, by temp file and rename otherwise. Raises ptoc.outputs.OutputError (a ValueError)."""
    from ptoc.outputs import OutputSet

    buf = io.BytesIO()
    write(buf)
    outs = OutputSet(inputs)
    outs.add(path, buf.getvalue())
    outs.commit()


def save_bin(path, data, inputs=()) -> None:
    """Write the raw bytes `data` to `path` (atomically; never over one of the files `inputs`)."""
    payload = bytes(data)
    _write_atomic(path, lambda f: f.write(payload), inputs)


def save_npy(path, array, inputs=()) -> None:
    """Write `array` to the .npy file `path` exactly as named (no ".npy" appended; atomically; never over
    one of the files `inputs`).

    ml_dtypes arrays (BF16, FP8) are stored by numpy as raw `|V1` / `|V2` records; `pack` and
    `unpack_file` read such records back as the requested dtype.
    """
    a = np.asarray(array)
    _write_atomic(path, lambda f: np.save(f, a, allow_pickle=False), inputs)


def _kind(path, role: str, allowed: tuple[str, ...]) -> str:
    ext = os.path.splitext(os.fspath(path))[1].lower()
    if ext not in allowed:
        what = " or ".join(f"{e} ({'raw bytes' if e == '.bin' else 'numpy array'})" for e in allowed)
        raise ValueError(f"{role} {path} must end in {what}")
    return ext


@dataclass(frozen=True)
class FileResult:
    """What pack_file / unpack_file did (for the CLI to report)."""

    out_path: str
    layout: str
    dtype: str
    logical_shape: tuple[int, ...]
    physical_shape: tuple[int, ...]
    nbytes: int


def pack_file(in_path, out_path, layout: str, dtype_name: str) -> FileResult:
    """Pack the logical array in `in_path` (.npy) into `out_path`: .bin = raw bytes, .npy = the flat
    element array in packed order (byte-identical to the .bin)."""
    lay = _layout(layout)
    dt = _dtype(dtype_name)
    out_kind = _kind(out_path, "output", (".bin", ".npy"))
    _kind(in_path, "input", (".npy",))
    logical = load_npy(in_path)
    data = pack(logical, lay, dt)
    if out_kind == ".npy":
        save_npy(out_path, np.frombuffer(data, dtype=_np(dt)), inputs=[in_path])
    else:
        save_bin(out_path, data, inputs=[in_path])
    plan = _plan(logical.shape, lay, dt)
    return FileResult(os.fspath(out_path), lay, dt.name, tuple(logical.shape), _physical_shape(plan), len(data))


def unpack_file(in_path, out_path, layout: str, dtype_name: str, shape) -> FileResult:
    """Unpack the packed image in `in_path` (.bin raw bytes, or .npy holding the elements in packed
    order, any shape) into the logical array of `shape` (e.g. "256,512"), written to `out_path` (.npy)."""
    lay = _layout(layout)
    dt = _dtype(dtype_name)
    logical_shape = _shape(shape)
    plan = _plan(logical_shape, lay, dt)
    _kind(out_path, "output", (".npy",))
    in_kind = _kind(in_path, "input", (".bin", ".npy"))
    target = _np(dt)
    if in_kind == ".npy":
        a = load_npy(in_path)
        if not _same_type(a.dtype, target):
            raise ValueError(f"{in_path} holds {a.dtype} elements but dtype {dt.name} needs {target}: pass the "
                             "dtype the data was packed with")
        a = a.view(target) if _is_raw_void(a.dtype) else a.astype(target, copy=False)
        data = np.ascontiguousarray(a).tobytes()
    else:
        data = _read_bytes(in_path)
    logical = unpack(data, lay, dt, logical_shape)
    save_npy(out_path, logical, inputs=[in_path])
    return FileResult(os.fspath(out_path), lay, dt.name, logical_shape, _physical_shape(plan), len(data))


__all__ = [
    "FRACTAL_ROWS", "FileResult", "LAYOUTS", "SUPPORTED_DTYPES", "ZN_DTYPES", "ZZ_DTYPES", "blocked_shape",
    "convert_exact",
    "load_npy", "nz_offset", "pack", "packed_strides", "pack_file", "parse_shape", "save_bin", "save_npy", "unpack",
    "unpack_file",
]
