"""The `.pto` executor's layout family: textract, tfillpad, ttrans, tci, ttri and the views treshape / subview."""

from __future__ import annotations

import re

import numpy as np

from ptoc.reference.pto_exec.text import (
    Op,
    PtoExecError,
    Tile,
    _is_float,
    _np_type,
    _ssa_names,
    convert,
    parse_tile_type,
)


class LayoutOps:
    """textract, tfillpad, ttrans, tci, ttri and the views treshape / subview."""

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


HANDLERS = {"pto.textract": "textract", "pto.tfillpad": "tfillpad", "pto.ttrans": "ttrans", "pto.tci": "tci",
            "pto.ttri": "ttri", "pto.treshape": "treshape", "pto.subview": "subview"}
