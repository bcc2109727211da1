"""Spelling shared by the `.pto` emitter's modules: tables of PTO enum members, the value records
(`_Scalar`, `_Handle`, `_Tensor`), MLIR type names of dtypes and the E0400 error."""

from __future__ import annotations

import struct
from dataclasses import dataclass

from ptoc.diagnostics import CompileError, Diagnostic, Span
from ptoc.ir.dtypes import DType
from ptoc.ir.nodes import (
    Call,
    ConstInt,
    EnumLit,
    Expr,
    StrLit,
)


KERNEL_KIND = {"AIC": "cube", "AIV": "vector", "InCore": None}
LEVELS = ("level3", "level2")

LOC = {"Vec": "vec", "Mat": "mat", "Left": "left", "Right": "right", "Acc": "acc", "Bias": "bias"}
PAD = {"null": 0, "zero": 1, "max": 2, "min": 3}
COMPACT = {"null": None, "normal": 1, "row_plus_one": 2}

ROUND_MODE = {"none": "NONE", "rint": "RINT", "round": "ROUND", "floor": "FLOOR", "ceil": "CEIL",
              "trunc": "TRUNC", "odd": "ODD", "cast_rint": "CAST_RINT"}
ROUND_MODE_BY_INT = dict(enumerate(("NONE", "RINT", "ROUND", "FLOOR", "CEIL", "TRUNC", "ODD", "CAST_RINT")))
# The pipe barriers and the pipe each waits on (`pto.barrier <PIPE_x>`).
PIPE_BARRIERS = {"system.bar_v": "PIPE_V", "system.bar_m": "PIPE_M", "system.bar_all": "PIPE_ALL"}
CORE_ID = {"tile.get_block_idx": "get_block_idx", "tile.get_block_num": "get_block_num",
           "tile.get_subblock_idx": "get_subblock_idx"}
# ops whose result is a view of their source tile (pto.treshape / pto.subview / set_validshape), never
# a buffer of its own: the prescan does not allocate handles for them
VIEW_OPS = ("tile.set_validshape", "tile.reshape", "tile.reinterpret_view", "tile.slice")

# tstore attributes: IR key -> (PTO attribute, enum mnemonic, IR value -> PTO member)
ST_PHASE = {"unspecified": "unspecified", "partial": "partial", "final": "final"}
ATOMIC = {"none": "atomic_none", "atomic_none": "atomic_none", "add": "atomic_add", "atomic_add": "atomic_add"}
RELU_PRE = {"none": "no_relu", "no_relu": "no_relu", "norelu": "no_relu", "normal": "normal_relu",
            "normal_relu": "normal_relu", "relu": "normal_relu"}
STORE_ATTRS = {
    "st_phase": ("stPhase", "st_phase", ST_PHASE), "stPhase": ("stPhase", "st_phase", ST_PHASE),
    "atomic": ("atomicType", "atomic_type", ATOMIC), "atomic_type": ("atomicType", "atomic_type", ATOMIC),
    "atomicType": ("atomicType", "atomic_type", ATOMIC),
    "relu_pre_mode": ("reluPreMode", "relu_pre_mode", RELU_PRE),
    "reluPreMode": ("reluPreMode", "relu_pre_mode", RELU_PRE),
    "pre_relu": ("reluPreMode", "relu_pre_mode", RELU_PRE),
}


def unsupported(what: str, span: Span | None, hint: str | None = None) -> CompileError:
    """The user-facing error for anything without a PTO form: `cannot emit <what> yet`."""
    return CompileError([Diagnostic(
        "PTOC-E0400", f"cannot emit {what} yet", span if span is not None and span.known else span,
        hint or "ptoc's .pto emitter has no PTO form for it; express the computation with supported tile "
        "operations, or report the need")])


# --------------------------------------------------------------------------------------------------
# Values
# --------------------------------------------------------------------------------------------------


@dataclass
class _Scalar:
    ssa: str
    dtype: DType


@dataclass
class _Handle:
    ssa: str
    type: str
    key: tuple
    dynamic: bool
    valid: tuple[str, str] | None  # the valid_row / valid_col values last set (dynamic handles)


@dataclass
class _Tensor:
    root: str


def scalar_type(dt: DType, span: Span | None = None) -> str:
    """The MLIR type of a scalar of dtype `dt` (arith works on signless integers: UINT32 -> i32)."""
    if dt.kind == "index":
        return "index"
    if dt.kind == "bool":
        return "i1"
    if dt.kind in ("int", "uint"):
        return f"i{dt.bits}"
    if dt.pto is None or dt.packed_values != 1:
        raise unsupported(f"a {dt.name} scalar", span)
    return dt.pto


def element_type(dt: DType, span: Span | None = None) -> str:
    if dt.pto is None:
        raise unsupported(f"a {dt.name} tensor or tile", span, hint=f"{dt.name} has no .pto element type")
    return dt.pto


def _int(e: Expr) -> int | None:
    return e.value if isinstance(e, ConstInt) else None


def _float_hex(v: float, t: str) -> str | None:
    """MLIR spells non-finite float constants as their bit pattern."""
    if t == "f32":
        return "0x%08X" % struct.unpack("<I", struct.pack("<f", v))[0]
    if t == "f16":
        return "0x%04X" % struct.unpack("<H", struct.pack("<e", v))[0]
    if t == "bf16":
        return "0x%04X" % (struct.unpack("<I", struct.pack("<f", v))[0] >> 16)
    if t == "f64":
        return "0x%016X" % struct.unpack("<Q", struct.pack("<d", v))[0]
    return None


def _arg(c: Call, i: int, name: str) -> Expr | None:
    """Argument `name` of a call: positional `i`, else the keyword."""
    return c.args[i] if len(c.args) > i else c.kwarg(name)


def _enum_text(e: Expr | None) -> str | None:
    if isinstance(e, StrLit):
        return e.value
    if isinstance(e, EnumLit):
        return e.member
    return None


# --------------------------------------------------------------------------------------------------
# One function
# --------------------------------------------------------------------------------------------------
