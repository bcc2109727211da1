"""The `.pto` executor's elementwise family: elementwise binary / scalar / unary ops, bitwise ops, tcvt,
expands, tlrelu."""

from __future__ import annotations

import re

import numpy as np

from ptoc.reference.pto_exec.text import Op, PtoExecError, ROUND_MODES, Tile, _is_float, convert


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


class ElementwiseOps:
    """Elementwise binary / scalar / unary ops, bitwise ops, tcvt, expands."""

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

    def tlrelu(self, op: Op) -> None:
        """`pto.tlrelu ins(%src, %slope : T, f32) outs(%dst : T)`: dst = src > 0 ? src : src * slope over dst's
        valid region (pto-isa TLRELU); PTOAS accepts f16 / f32 tiles and an f32 slope."""
        a, slope = self._ins(op, 2)
        dst = self._dst(op)
        types = op.p["ins_t"]
        if len(types) == 2 and types[1] != "f32":
            raise PtoExecError(f"pto.tlrelu: the slope is {types[1]}, PTOAS requires f32", op.line)
        if isinstance(slope, Tile) or dst.dtype not in (np.float16, np.float32) or a.dtype != dst.dtype:
            raise PtoExecError("pto.tlrelu takes an f16/f32 tile, an f32 slope and a destination of the same type",
                               op.line)
        x = self._region(a, dst.vr, dst.vc, op.line, "tlrelu").astype(np.float32)
        with np.errstate(all="ignore"):
            r = np.where(x > 0, x, x * np.float32(slope))
        self._write(dst, r)

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


HANDLERS = {"pto.tcvt": "tcvt", "pto.tlrelu": "tlrelu", "pto.texpands": "texpands", "pto.txor": "txor",
            "pto.txors": "txor"}
for _k in ("add", "sub", "mul", "div", "max", "min", "and", "or", "shl", "shr"):
    HANDLERS[f"pto.t{_k}"] = "binary"
    HANDLERS[f"pto.t{_k}s"] = "scalar_binary"
for _k in ("exp", "sqrt", "abs", "neg", "relu", "log", "recip", "rsqrt", "not"):
    HANDLERS[f"pto.t{_k}"] = "unary"
for _k in ("", "add", "sub", "mul", "div", "max", "min"):
    HANDLERS[f"pto.trowexpand{_k}"] = "expand"
    HANDLERS[f"pto.tcolexpand{_k}"] = "expand"
