"""Type-level facts shared by the front end, the printer and the passes."""

from __future__ import annotations

from ptoc.ir.dtypes import INDEX
from ptoc.ir.nodes import ConstInt, Expr, TensorView, TileType, TileView
from ptoc.ir.visitor import replace
from ptoc.target.arch import FRACTAL_ROWS, IMPLICIT_TILE_LAYOUT

# Enum families of the IR text and their members. `None` members: the family is known but its
# member set is open (it is carried through without validation).
ENUMS: dict[str, tuple[str, ...] | None] = {
    "Mem": ("DDR", "Vec", "Mat", "Left", "Right", "Acc", "Bias", "LeftScale", "RightScale"),
    "TensorLayout": ("ND", "DN", "NZ", "MX_A_ZZ", "MX_B_NN"),
    "TileLayout": ("none_box", "row_major", "col_major"),
    "PadValue": ("null", "zero", "max", "min"),
    "CompactMode": ("null", "normal"),
    "FunctionType": ("Opaque", "Orchestration", "InCore", "AIC", "AIV", "Group", "Spmd", "Inline"),
    "Level": None,
    "Role": None,
    "SplitMode": ("NONE", "UP_DOWN", "LEFT_RIGHT"),
    "ScopeMode": ("AUTO", "MANUAL"),
    # the distributed namespace's enums (`pld.ReduceOp.Sum`), as PyPTO defines them
    "pld.ReduceOp": ("Sum", "Max", "Min", "Prod"),
    "pld.WaitCmp": ("Eq", "Ge"),
    "pld.AtomicType": ("None_", "Add"),
    "pld.NotifyOp": ("AtomicAdd", "Set"),
}
ENUM_ALIASES = {"MemorySpace": "Mem"}
LAYOUT_SHORTHANDS = ("ND", "DN", "NZ", "MX_A_ZZ", "MX_B_NN")  # pl.NZ, pl.MX_A_ZZ (PyPTO exports all five)


def implicit_tile_view(shape: tuple[Expr, ...], memory: str | None) -> dict[str, object]:
    """The view a tile has when its TileView leaves a field out (pto-format.md, "Implicit layout per
    memory space"). A tile without a memory space has the Vec defaults."""
    space = memory or "Vec"
    blayout, slayout, fractal = IMPLICIT_TILE_LAYOUT.get(space, IMPLICIT_TILE_LAYOUT["Vec"])
    if space == "Vec" and len(shape) == 2 and _is_int(shape[1], 1) and not _is_int(shape[0], 1):
        blayout = "col_major"  # an [R, 1] column tile
    return {
        "valid_shape": tuple(shape),
        "stride": None,
        "start_offset": ConstInt(0, INDEX),
        "blayout": blayout,
        "slayout": slayout,
        "fractal": fractal,
        "pad": "null",
        "compact": "null",
    }


def _is_int(e: Expr, v: int) -> bool:
    return isinstance(e, ConstInt) and e.value == v


def normalize_tile_view(shape: tuple[Expr, ...], memory: str | None, view: TileView | None) -> TileView | None:
    """Drop every field equal to the implicit view of the space; an empty view becomes None."""
    if view is None:
        return None
    implicit = implicit_tile_view(shape, memory)
    changes = {}
    for name, default in implicit.items():
        value = getattr(view, name)
        if value is not None and value == default:
            changes[name] = None
    if not view.stride and view.stride is not None:
        changes["stride"] = None
    out = replace(view, **changes) if changes else view
    return None if out.is_empty else out


def effective_tile_view(t: TileType) -> dict[str, object]:
    """Every field of the tile's view, implicit ones filled in."""
    eff = implicit_tile_view(t.shape, t.memory)
    if t.view is not None:
        for name in eff:
            value = getattr(t.view, name)
            if value is not None:
                eff[name] = value
    return eff


def normalize_tensor_view(view: TensorView | None) -> TensorView | None:
    if view is None:
        return None
    if view.stride is not None and len(view.stride) == 0:
        view = replace(view, stride=None)
    return None if view.is_trivial else view


def nz_blocked_static_shape(shape: tuple[Expr, ...], c0: int | None) -> tuple[int, ...] | None:
    """NZ-2 on a static logical shape: `[..., R, C]` -> `[B, C/c0, R/16, 16, c0]`; None when the shape is
    not static or not blockable. (BlockNzTensorViews does the full job, with diagnostics.)"""
    vals = [d.value if isinstance(d, ConstInt) else None for d in shape]
    if c0 is None or len(vals) < 2 or None in vals:
        return None
    *lead, r, col = vals
    if r % FRACTAL_ROWS or col % c0:
        return None
    b = 1
    for v in lead:
        b *= v
    return (b, col // c0, r // FRACTAL_ROWS, FRACTAL_ROWS, c0)


def is_empty_tile(t) -> bool:
    """A tile whose valid shape is zero on every axis (`pl.TileView(valid_shape=[0, 0])`): it holds no
    element. PyPTO's lane-1 replay of a dual-dispatch vector kernel computes on such tiles only to keep
    the cross-core hand-shakes balanced; any op on them does nothing and gives an empty tile."""
    if not isinstance(t, TileType) or t.view is None or not t.view.valid_shape:
        return False
    return all(_is_int(e, 0) for e in t.view.valid_shape)


def as_empty_tile(t: TileType) -> TileType:
    """`t` with an all-zero valid shape (its other view fields kept)."""
    zeros = tuple(ConstInt(0, INDEX) for _ in t.shape)
    return replace(t, view=replace(t.view or TileView(), valid_shape=zeros))
