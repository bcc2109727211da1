"""The `.pto` executor's gather family: tgather (mask and index forms), tscatter, tgatherb."""

from __future__ import annotations

import re

import numpy as np

from ptoc.reference.pto_exec.text import MASK_PATTERNS, Op, PtoExecError, Tile, convert


class GatherOps:
    """tgather (mask and index forms), tscatter, tgatherb."""

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


HANDLERS = {"pto.tgather": "tgather", "pto.tscatter": "tscatter", "pto.tgatherb": "tgatherb"}
