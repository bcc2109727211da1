"""The `.pto` executor's reduction family: Row and column reductions."""

from __future__ import annotations


import numpy as np

from ptoc.reference.pto_exec.text import Op, PtoExecError, _is_float


def _reduce(kind: str, x: np.ndarray, axis: int, line: int) -> np.ndarray:
    if kind == "sum":
        return x.sum(axis=axis)
    if kind == "max":
        return x.max(axis=axis)
    if kind == "min":
        return x.min(axis=axis)
    if kind == "prod":
        return x.prod(axis=axis)
    raise PtoExecError(f"unsupported reduction {kind}", line)


class ReductionOps:
    """Row and column reductions."""

    def row_reduce(self, op: Op) -> None:
        kind = op.name[len("pto.trow"):]
        ins = self._ins(op)
        a = ins[0]
        dst = self._dst(op)
        x = a.valid()
        if a.vr == 0:
            return  # no row: nothing to write (an empty tile's reduction does nothing)
        wt = np.float64 if _is_float(a.dtype) else np.int64
        x = x.astype(wt)
        r = _reduce(kind, x, axis=1, line=op.line)
        self._write(dst, r.reshape(-1, 1), rows=a.vr, cols=1)

    def col_reduce(self, op: Op) -> None:
        kind = op.name[len("pto.tcol"):]
        ins = self._ins(op)
        a = ins[0]
        dst = self._dst(op)
        if a.vc == 0:
            return  # no column: nothing to write
        wt = np.float64 if _is_float(a.dtype) else np.int64
        x = a.valid().astype(wt)
        r = _reduce(kind, x, axis=0, line=op.line)
        self._write(dst, r.reshape(1, -1), rows=1, cols=a.vc)


HANDLERS = {}
for _k in ("sum", "max", "min", "prod"):
    HANDLERS[f"pto.trow{_k}"] = "row_reduce"
    HANDLERS[f"pto.tcol{_k}"] = "col_reduce"
