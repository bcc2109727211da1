"""Reference NZ host packer: logical numpy array <-> NZ fractal byte order (rules NZ-1..NZ-3).

Written straight from the seed's formula (spec/000, "分块形式") and deliberately sharing nothing with the
BlockNzTensorViews pass, so that each can check the other.

A logical `[..., R, C]` array of an element type of `s` bytes is stored as 32-byte C0 lines of
`c0 = 32 / s` elements; 16 lines make a 16 x c0 fractal (512 bytes); R/16 fractals run down the rows;
the C/c0 column blocks are outermost within a batch panel; all leading axes fold into one batch index
(row-major). Logical element `(b, r, c)` (b the row-major index of the leading axes) therefore sits at
element offset

    b * (C * R) + (c // c0) * (R * c0) + (r // 16) * (16 * c0) + (r % 16) * c0 + (c % c0)

which is the packed rank-5 array `[B, C/c0, R/16, 16, c0]` with strides `[C*R, R*c0, 16*c0, c0, 1]`.
"""

from __future__ import annotations

import numpy as np

FRACTAL_ROWS = 16
C0_BYTES = 32


def c0_of(dtype) -> int:
    """Elements per 32-byte C0 line of a numpy dtype (1-, 2- and 4-byte types)."""
    size = np.dtype(dtype).itemsize
    if size not in (1, 2, 4):
        raise ValueError(f"no NZ form for {size}-byte elements")
    return C0_BYTES // size


def _geometry(shape: tuple[int, ...], c0: int) -> tuple[int, int, int]:
    if len(shape) < 2:
        raise ValueError("an NZ array needs rank >= 2")
    *lead, rows, cols = shape
    if rows % FRACTAL_ROWS or cols % c0:
        raise ValueError(f"[{rows}, {cols}] is not a whole number of {FRACTAL_ROWS} x {c0} fractals")
    batch = int(np.prod(lead, dtype=np.int64)) if lead else 1
    return batch, rows, cols


def nz_offsets(shape: tuple[int, ...], c0: int) -> np.ndarray:
    """For every logical element of an array of `shape`, its element offset in the NZ image."""
    batch, rows, cols = _geometry(tuple(shape), c0)
    b = np.arange(batch, dtype=np.int64)[:, None, None]
    r = np.arange(rows, dtype=np.int64)[None, :, None]
    c = np.arange(cols, dtype=np.int64)[None, None, :]
    off = (b * (cols * rows) + (c // c0) * (rows * c0) + (r // FRACTAL_ROWS) * (FRACTAL_ROWS * c0)
           + (r % FRACTAL_ROWS) * c0 + (c % c0))
    return off.reshape(shape)


def blocked_shape(shape: tuple[int, ...], c0: int) -> tuple[int, int, int, int, int]:
    batch, rows, cols = _geometry(tuple(shape), c0)
    return (batch, cols // c0, rows // FRACTAL_ROWS, FRACTAL_ROWS, c0)


def pack(logical: np.ndarray, c0: int | None = None) -> np.ndarray:
    """The NZ image of `logical` as a rank-5 `[B, C/c0, R/16, 16, c0]` array."""
    c0 = c0_of(logical.dtype) if c0 is None else c0
    flat = np.empty(logical.size, dtype=logical.dtype)
    flat[nz_offsets(logical.shape, c0).ravel()] = logical.ravel()
    return flat.reshape(blocked_shape(logical.shape, c0))


def unpack(packed: np.ndarray, shape: tuple[int, ...], c0: int | None = None) -> np.ndarray:
    """The logical array of `shape` whose NZ image is `packed` (any shape holding the image in order)."""
    c0 = c0_of(packed.dtype) if c0 is None else c0
    flat = np.ascontiguousarray(packed).ravel()
    return flat[nz_offsets(tuple(shape), c0)]


def pack_bytes(logical: np.ndarray) -> bytes:
    """The bytes a host writes to GM for an NZ tensor holding `logical`."""
    return pack(np.ascontiguousarray(logical)).tobytes()


def unpack_bytes(data: bytes, shape: tuple[int, ...], dtype) -> np.ndarray:
    return unpack(np.frombuffer(data, dtype=np.dtype(dtype)), tuple(shape))


__all__ = ["FRACTAL_ROWS", "blocked_shape", "c0_of", "nz_offsets", "pack", "pack_bytes", "unpack", "unpack_bytes"]
