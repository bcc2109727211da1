"""What every op semantics module shares: the op context, the table of implementations
(`op` decorator) and the operand helpers."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING
from dataclasses import dataclass

import numpy as np

from ptoc.diagnostics import Span
from ptoc.ir import dtypes
from ptoc.ir.dtypes import DType
from ptoc.ir.nodes import (
    Call,
    EnumLit,
    Expr,
)
from ptoc.reference.values import (
    BOOL,
    GTensor,
    INDEX,
    Scalar,
    Tile,
    _fault,
    _float_to_int,
    _is_float,
    _np,
    _scalar,
    _tensor_as_tile,
    _tile_as_tensor,
    _to_float_dtype,
    _wrap_int,
)

if TYPE_CHECKING:  # pragma: no cover
    from ptoc.ops.registry import OpDef
    from ptoc.reference.interp import _Frame


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


FAMILIES = ("elementwise", "bitwise", "reduction", "memory", "layout", "matmul", "gather", "fp4")
_LOADED = False


def load() -> None:
    """Import the per-family semantics modules (each registers its implementations with `_op`)."""
    global _LOADED
    if _LOADED:
        return
    _LOADED = True
    import importlib

    for fam in FAMILIES:
        importlib.import_module(f"ptoc.reference.semantics.{fam}")


def implementation(op: OpDef) -> OpImpl | None:
    """How the reference executes `op`: the formula its family file declares (`interp=`), else the
    implementation a semantics module registered; None when there is neither."""
    load()
    if op.interp is not None:
        from ptoc.reference.semantics.kernels import run_declared

        return lambda ctx, a: run_declared(op.interp, ctx, a)
    return _OPS.get(op.name)


def implemented_ops() -> frozenset[str]:
    """Registry op names the reference executes."""
    from ptoc.ops.registry import REGISTRY, load_all

    load()
    load_all()
    return frozenset(_OPS) | frozenset(n for n, op in REGISTRY.items() if op.interp is not None)


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
