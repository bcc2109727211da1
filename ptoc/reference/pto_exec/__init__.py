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
- control flow: `scf.for`, `scf.if` and `scf.while` (the before region ends in `scf.condition(%c) %v...`;
  while %c holds the do region gets %v... as its `^bb0(...)` arguments; more than MAX_WHILE_ITERATIONS
  iterations is an error). `pto.barrier <PIPE_x>` has nothing to wait for: every op here completes in
  program order.
- views: `pto.treshape` is the same bytes as another shape / dtype (a result with `?` valid starts fully
  valid until pto.set_validshape); `pto.subview` is a window of its source (writes go to the source).

Anything outside the subset raises PtoExecError naming the op and the line.
"""

from __future__ import annotations

from ptoc.reference.pto_exec.machine import Interpreter, pack_logical, run_pto, run_pto_logical, unpack_logical
from ptoc.reference.pto_exec.text import ELEMENT_TYPES, PtoExecError, convert, parse_module, parse_tile_type

__all__ = ["ELEMENT_TYPES", "Interpreter", "PtoExecError", "convert", "pack_logical", "parse_module", "parse_tile_type",
           "run_pto", "run_pto_logical", "unpack_logical"]
