"""The `.pto` executor's memory family: tensor views, partitions, tload / tstore, tile allocation,
valid shapes, tmov and element access."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from ptoc.reference.pto_exec.text import (
    Op,
    Partition,
    PtoExecError,
    TensorView,
    Tile,
    _int_bits,
    _is_float,
    _np_type,
    _partition_type,
    _ssa_names,
    _wrap,
    convert,
    parse_tile_type,
)


@dataclass
class _Ptr:
    """A GM tensor argument: the index of its buffer and its element type."""

    index: int
    dtype: np.dtype


class MemoryOps:
    """Tensor views, partitions, tload / tstore, tile allocation, valid shapes, tmov and element access."""

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

    def tmov(self, op: Op) -> None:
        (a,) = self._ins(op, 1)
        dst = self._dst(op)
        x = self._region(a, dst.vr, dst.vc, op.line, "tmov")
        dst.arr[:dst.vr, :dst.vc] = x if x.dtype == dst.dtype else convert(x, dst.dtype, "RINT")

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


HANDLERS = {"pto.make_tensor_view": "make_tensor_view", "pto.partition_view": "partition_view",
            "pto.alloc_tile": "alloc_tile", "pto.set_validshape": "set_validshape", "pto.tload": "tload",
            "pto.tstore": "tstore", "pto.tmov": "tmov",
            "pto.tsetval": "tsetval", "pto.tgetval": "tgetval"}
