"""Bitwise and shift ops, integers only (spec OP-2, OP-3).

Tensor-tensor and tile-tile forms need identical shapes (there is no broadcasting bitwise
instruction, so broadcasting is rejected at type inference); `not` accepts only INT16/UINT16; shifts
keep the left operand's dtype; and/or/xor need the same 8/16/32-bit dtype on both sides. Python
keyword names print with a trailing underscore (`and_`, `or_`, `not_`). The tile xor forms take the
scratch tile pto.txor needs.
"""

from __future__ import annotations

from ptoc.ir.nodes import ScalarType, Type
from ptoc.ops.common import fmt_shape, new_tensor, new_tile, shapes_equal, valid_shape_of
from ptoc.ops.elementwise import scalar_operand_dtype
from ptoc.ops.registry import Args, Pto, declare, register, short_name

LOGIC = ("and_", "or_", "xor")  # same 8/16/32-bit dtype
SHIFT = ("shl", "shr")  # keep the lhs dtype
SCALAR = {"and_": "ands", "or_": "ors", "xor": "xors", "shl": "shls", "shr": "shrs"}
LOGIC_WIDTHS = (8, 16, 32)


def _int(args: Args, name: str, t) -> None:
    if not t.dtype.is_int or t.dtype.name == "INDEX":
        args.fail(f"{args.op.name} works on integers only, got {t.dtype.name}", name, rule="OP-2",
                  hint="bitwise ops take INT8..INT64 / UINT8..UINT64 operands; reinterpret float data with "
                  "pl.reinterpret_view first")


def _tt(kind: str, name: str):
    def rule(args: Args) -> Type | None:
        get = args.tensor if kind == "tensor" else args.tile
        lhs, rhs = get("lhs"), get("rhs")
        if lhs is None or rhs is None:
            return None
        _int(args, "lhs", lhs)
        _int(args, "rhs", rhs)
        if shapes_equal(lhs.shape, rhs.shape) is not True:
            args.fail(f"{args.op.name}: operand shapes must be identical, got {fmt_shape(lhs.shape)} and "
                      f"{fmt_shape(rhs.shape)}", rule="OP-2",
                      hint="bitwise ops do not broadcast: there is no row-expanding bitwise instruction; "
                      "expand the smaller operand explicitly")
        if name in LOGIC:
            if lhs.dtype != rhs.dtype:
                args.fail(f"{args.op.name}: operands need the same dtype, got {lhs.dtype.name} and "
                          f"{rhs.dtype.name}", rule="OP-2", hint="cast one operand first")
            if lhs.dtype.bits not in LOGIC_WIDTHS:
                args.fail(f"{args.op.name} supports 8/16/32-bit integers, got {lhs.dtype.name}", "lhs", rule="OP-2")
        valid = None
        if name != "xor":  # OP-3: the exact-region rule excludes xor
            vl, vr = valid_shape_of(lhs), valid_shape_of(rhs)
            if shapes_equal(vl, vr) is True:
                valid = vl
        if kind == "tensor":
            return new_tensor(lhs.shape, lhs.dtype, valid)
        if name == "xor" and args.has("tmp"):
            args.tile("tmp")
        return new_tile(lhs.shape, lhs.dtype, lhs.memory, valid)

    rule.__doc__ = f"{kind} bitwise {name.rstrip('_')} (OP-2)"
    return rule


def _ts(kind: str, name: str):
    def rule(args: Args) -> Type | None:
        get = args.tensor if kind == "tensor" else args.tile
        lhs = get("lhs")
        rt = args.type("rhs")
        if rt is not None and not isinstance(rt, ScalarType):
            args.fail(f"{args.op.name}: the right operand must be a scalar", "rhs", rule="OP-2",
                      hint=f"use {kind}.{name} for two {kind}s")
        if lhs is None:
            return None
        _int(args, "lhs", lhs)
        if name in LOGIC and lhs.dtype.bits not in LOGIC_WIDTHS:
            args.fail(f"{args.op.name} supports 8/16/32-bit integers, got {lhs.dtype.name}", "lhs", rule="OP-2")
        if isinstance(rt, ScalarType) and not (rt.dtype.is_int or rt.dtype.name == "INDEX"):
            args.fail(f"{args.op.name}: the scalar operand must be an integer, got {rt.dtype.name}", "rhs",
                      rule="OP-2")
        scalar_operand_dtype(args, lhs.dtype)
        valid = None if name == "xor" else valid_shape_of(lhs)  # OP-3 excludes xors
        if kind == "tensor":
            return new_tensor(lhs.shape, lhs.dtype, valid)
        if name == "xor" and args.has("tmp"):
            args.tile("tmp")
        return new_tile(lhs.shape, lhs.dtype, lhs.memory, valid)

    rule.__doc__ = f"{kind}-scalar bitwise {name.rstrip('_')} (OP-2)"
    return rule


def _not(kind: str):
    def rule(args: Args) -> Type | None:
        x = args.tensor("input") if kind == "tensor" else args.tile("input")
        if x is None:
            return None
        if x.dtype.name not in ("INT16", "UINT16"):
            args.fail(f"{args.op.name} supports only INT16 and UINT16 (like TNOT), got {x.dtype.name}", "input",
                      rule="OP-2", hint="reinterpret the data as INT16 with pl.reinterpret_view, or use xors with -1")
        if kind == "tensor":
            return new_tensor(x.shape, x.dtype, valid_shape_of(x))
        return new_tile(x.shape, x.dtype, x.memory, valid_shape_of(x))

    rule.__doc__ = f"{kind} bitwise not, INT16/UINT16 only (OP-2)"
    return rule


for _kind in ("tensor", "tile"):
    for _n in LOGIC + SHIFT:
        # pto.txor needs a scratch tile; when the program leaves it out, lowering supplies one.
        opt = (("tmp", None),) if (_kind == "tile" and _n == "xor") else ()
        register(f"{_kind}.{_n}", ("lhs", "rhs"), optional=opt, family="bitwise")(_tt(_kind, _n))
        register(f"{_kind}.{SCALAR[_n]}", ("lhs", "rhs"), optional=opt, family="bitwise")(_ts(_kind, _n))
    register(f"{_kind}.not_", ("input",), family="bitwise")(_not(_kind))

for _n in LOGIC + SHIFT:
    short_name(_n, tensor=f"tensor.{_n}", tile=f"tile.{_n}", tensor_scalar=f"tensor.{SCALAR[_n]}",
               tile_scalar=f"tile.{SCALAR[_n]}")
    short_name(SCALAR[_n], tensor=f"tensor.{SCALAR[_n]}", tile=f"tile.{SCALAR[_n]}")
short_name("not_", tensor="tensor.not_", tile="tile.not_")

# `.pto` spellings (PTOAS PTOOps.td, destination-passing form)
_XOR_TMP = "PTOAS's txor/txors need a scratch tile: pass tmp=<a tile like the operands>"
for _n, _p in {"and_": "tand", "or_": "tor", "shl": "tshl", "shr": "tshr"}.items():
    declare(f"tile.{_n}", pto=Pto(_p, ("tile:lhs", "tile:rhs")))
    declare(f"tile.{SCALAR[_n]}", pto=Pto(_p + "s", ("tile:lhs", "scalar:rhs")))
declare("tile.xor", pto=Pto("txor", ("tile:lhs", "tile:rhs", "tile!:tmp"), _XOR_TMP))
declare("tile.xors", pto=Pto("txors", ("tile:lhs", "scalar:rhs", "tile!:tmp"), _XOR_TMP))
declare("tile.not_", pto=Pto("tnot", ("tile:input",)))
