"""The `.pto` executor's matmul family: The cube unit: tmatmul, tmatmul.acc, tmatmul.bias."""

from __future__ import annotations


import numpy as np

from ptoc.reference.pto_exec.text import Op, PtoExecError, Tile, _is_float


class MatmulOps:
    """The cube unit: tmatmul, tmatmul.acc, tmatmul.bias."""

    def _product(self, a: Tile, b: Tile, op: Op) -> np.ndarray:
        if a.loc != "left" or b.loc != "right":
            raise PtoExecError(f"{op.name} needs a Left and a Right tile, got {a.loc} and {b.loc}", op.line)
        m, k = a.vr, a.vc
        k2, n = b.vr, b.vc
        if k != k2:
            raise PtoExecError(f"{op.name}: Left valid {m} x {k} and Right valid {k2} x {n} disagree on K", op.line)
        x, y = a.valid(), b.valid()
        if _is_float(a.dtype) or _is_float(b.dtype):
            return x.astype(np.float64) @ y.astype(np.float64)
        xi, yi = x.astype(np.int64), y.astype(np.int64)
        bound = (int(np.abs(xi).max(initial=0)) * int(np.abs(yi).max(initial=0)) * max(k, 1))
        # float BLAS is exact while every partial sum stays below the mantissa limit
        if bound < 2 ** 24:
            return (xi.astype(np.float32) @ yi.astype(np.float32)).astype(np.int64)
        if bound < 2 ** 53:
            return (xi.astype(np.float64) @ yi.astype(np.float64)).astype(np.int64)
        return xi @ yi

    def _acc_write(self, dst: Tile, vals: np.ndarray, op: Op) -> None:
        if dst.loc != "acc":
            raise PtoExecError(f"{op.name} writes an Acc tile, got a {dst.loc} tile", op.line)
        m, n = vals.shape
        if m > dst.rows or n > dst.cols:
            raise PtoExecError(f"{op.name}: a {m} x {n} result does not fit the {dst.rows} x {dst.cols} Acc tile",
                               op.line)
        if _is_float(dst.dtype):
            with np.errstate(all="ignore"):
                dst.arr[:m, :n] = vals.astype(dst.dtype)
        else:
            dst.arr[:m, :n] = vals.astype(np.int64).astype(dst.dtype)

    def tmatmul(self, op: Op) -> None:
        a, b = self._ins(op, 2)
        self._acc_write(self._dst(op), self._product(a, b, op), op)

    def tmatmul_acc(self, op: Op) -> None:
        acc, a, b = self._ins(op, 3)
        dst = self._dst(op)
        prod = self._product(a, b, op)
        m, n = prod.shape
        cur = self._region(acc, m, n, op.line, op.name)
        cur = cur.astype(np.float64) if _is_float(acc.dtype) else cur.astype(np.int64)
        self._acc_write(dst, cur + prod, op)

    def tmatmul_bias(self, op: Op) -> None:
        a, b, bias = self._ins(op, 3)
        dst = self._dst(op)
        prod = self._product(a, b, op)
        m, n = prod.shape
        bv = self._region(bias, 1, n, op.line, op.name)
        bv = bv.astype(np.float64) if _is_float(bias.dtype) else bv.astype(np.int64)
        self._acc_write(dst, prod + bv, op)


HANDLERS = {"pto.tmatmul": "tmatmul", "pto.tmatmul.acc": "tmatmul_acc", "pto.tmatmul.bias": "tmatmul_bias"}
