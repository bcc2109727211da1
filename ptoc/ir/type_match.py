"""Does a value's type agree with its annotation? (`type_mismatch`: the verifier's answer for an
annotated assignment, a returned value and a call argument.)"""

from __future__ import annotations

from dataclasses import replace

from ptoc.ir.nodes import (
    ArrayType,
    ConstInt,
    DistributedTensorType,
    Expr,
    ScalarType,
    TensorType,
    TileType,
    TileView,
    TupleType,
    Type,
)
from ptoc.ir.types import normalize_tile_view


def type_mismatch(annotated: Type, actual: Type) -> str | None:
    """Why `annotated` contradicts `actual` (None when they agree where both are known)."""
    a, b = annotated, actual
    if type(a) is TensorType and isinstance(b, DistributedTensorType):
        return _shaped_mismatch(a, b)  # a distributed tensor is a tensor wherever a tensor is expected
    if isinstance(a, ArrayType) and isinstance(b, ArrayType):
        return None if a.dtype == b.dtype else f"the value holds {b.dtype.name}, the annotation says {a.dtype.name}"
    if type(a) is not type(b):
        return f"the value is a {kind_of(b)}, the annotation says {kind_of(a)}"
    if isinstance(a, ScalarType):
        return _scalar_mismatch(a, b)  # type: ignore[arg-type]
    if isinstance(a, TupleType):
        return _tuple_mismatch(a, b)  # type: ignore[arg-type]
    if isinstance(a, (TensorType, TileType)):
        return _shaped_mismatch(a, b)  # type: ignore[arg-type]
    return None


def _scalar_mismatch(a: ScalarType, b: ScalarType) -> str | None:
    da, db = a.dtype, b.dtype
    if da.is_int and db.is_int and "INDEX" in (da.name, db.name):
        return None  # INDEX converts to and from every integer scalar
    if a.dtype != b.dtype:
        return f"the value has dtype {b.dtype.name}, the annotation says {a.dtype.name}"
    return None


def _tuple_mismatch(a: TupleType, b: TupleType) -> str | None:
    if len(a.types) != len(b.types):
        return f"the value is a tuple of {len(b.types)}, the annotation says {len(a.types)}"
    for x, y in zip(a.types, b.types):
        r = type_mismatch(x, y)
        if r:
            return r
    return None


def _nz_blocking_mismatch(a: TensorType, b: TensorType) -> str | None:
    """A logical NZ type and the blocked rank-5 form BlockNzTensorViews gave it (NZ-2, NZ-16)."""
    from ptoc.ir.types import nz_blocked_static_shape
    from ptoc.target import arch

    logical, blocked = (a, b) if len(b.shape) == 5 else (b, a)
    want = nz_blocked_static_shape(logical.shape, arch.c0_of(logical.dtype))
    have = tuple(d.value if isinstance(d, ConstInt) else None for d in blocked.shape)
    if want is None or len(blocked.shape) != 5 or want == have:
        return None
    return f"the blocked NZ shape {list(have)} is not the blocking of the logical shape"


def _shape_mismatch(a: TensorType | TileType, b: TensorType | TileType, flattened: bool) -> str | None:
    # (FlattenTileNdTo2D: a rank-N tile may be annotated as its 2-D form [prod(leading), last])
    if flattened:
        return None
    if len(a.shape) != len(b.shape):
        return f"the value has rank {len(b.shape)}, the annotation says rank {len(a.shape)}"
    for i, (x, y) in enumerate(zip(a.shape, b.shape)):
        if isinstance(x, ConstInt) and isinstance(y, ConstInt) and x.value != y.value:
            return f"dimension {i} of the value is {y.value}, the annotation says {x.value}"
    return None


def _shaped_mismatch(a: TensorType | TileType, b: TensorType | TileType) -> str | None:
    if a.dtype != b.dtype:
        return f"the value has dtype {b.dtype.name}, the annotation says {a.dtype.name}"
    if isinstance(a, TensorType):
        if a.layout == b.layout == "NZ" and len(a.shape) != len(b.shape):  # type: ignore[union-attr]
            return _nz_blocking_mismatch(a, b)  # type: ignore[arg-type]
        why = _shape_mismatch(a, b, False)
        if why:
            return why
        if a.layout != b.layout:  # type: ignore[union-attr]
            return f"the value has layout {b.layout}, the annotation says {a.layout}"  # type: ignore[union-attr]
        return None
    flattened = _is_2d_flattening(a.shape, b.shape)
    why = _shape_mismatch(a, b, flattened)
    if why:
        return why
    if a.memory and b.memory and a.memory != b.memory:  # type: ignore[union-attr]
        return f"the value lives in {b.memory}, the annotation says {a.memory}"  # type: ignore[union-attr]
    return _tile_view_mismatch(a, b, flattened)  # type: ignore[arg-type]


# The start of the `type_mismatch` answer about valid shapes (annotate() adds the TLOAD fact to its hint).
VALID_SHAPE_MISMATCH = "the value's valid shape is "


def _same_dim(x: Expr | None, y: Expr | None) -> bool:
    """Provably the same extent: equal constants (of any integer dtype) or the same expression."""
    if isinstance(x, ConstInt) and isinstance(y, ConstInt):
        return x.value == y.value
    return x == y


def _dims(d: tuple[Expr, ...] | None) -> str:
    from ptoc.ir.printer import print_expr

    return "none" if d is None else "[" + ", ".join(print_expr(x) for x in d) + "]"


def _tile_view_mismatch(a: TileType, b: TileType, flattened: bool) -> str | None:
    """Why the whole TileView of annotation `a` contradicts the value's `b` (valid shape included; a
    field left out takes the implicit value of the memory space, so no TileView means the whole tile
    is valid). Compared in the memory space the tiles share (the annotation's when the value has none)."""
    if a.view is None and b.view is None:
        return None  # both fully valid with the implicit layout of the same space
    from ptoc.ir.types import implicit_tile_view

    if flattened:  # the value's view as FlattenTileNdTo2D writes it for the 2-D form
        from ptoc.diagnostics import CompileError
        from ptoc.ir.flatten import flat_tile

        try:
            b = flat_tile(b, b)
        except CompileError:
            return "the value's valid region has no 2-D form"
    mem = a.memory or b.memory
    implicit_a = implicit_tile_view(a.shape, mem)
    implicit_b = implicit_tile_view(b.shape, mem)
    va, vb = a.view, b.view
    for name, default_a in implicit_a.items():
        xa = getattr(va, name) if va is not None else None
        xb = getattr(vb, name) if vb is not None else None
        if xa is None and xb is None:
            continue  # both implicit (for valid_shape: each its own shape, compared as dimensions)
        xa = default_a if xa is None else xa
        xb = implicit_b[name] if xb is None else xb
        why = _view_field_mismatch(name, xa, xb, va)
        if why:
            return why
    return None


def _view_field_mismatch(name: str, xa, xb, va) -> str | None:
    """Why TileView field `name` of the annotation (`xa`) and of the value (`xb`) differ, or None."""
    if name in ("valid_shape", "stride"):
        if xa is None or xb is None or len(xa) != len(xb):
            same = xa is None and xb is None
        else:
            same = all(_same_dim(x, y) for x, y in zip(xa, xb))
        if same:
            return None
        if name == "valid_shape":
            return (f"{VALID_SHAPE_MISMATCH}{_dims(xb)}, the annotation's is {_dims(xa)}"
                    + (" (without a TileView the whole tile is valid)" if va is None
                       or va.valid_shape is None else ""))
        return f"the value's TileView stride is {_dims(xb)}, the annotation's is {_dims(xa)}"
    if name == "start_offset":
        if _same_dim(xa, xb):
            return None
        from ptoc.ir.printer import print_expr

        return f"the value's TileView start_offset is {print_expr(xb)}, the annotation's is {print_expr(xa)}"
    if xa != xb:
        return f"the value's TileView {name} is {xb}, the annotation's is {xa}"
    return None


def _is_2d_flattening(flat: tuple[Expr, ...], nd: tuple[Expr, ...]) -> bool:
    """Is `flat` the 2-D form [prod(leading), last] of the static shape `nd` (rank 1: [1, N])?"""
    if len(flat) != 2 or len(nd) == 2 or not nd:
        return False
    vals = [d.value if isinstance(d, ConstInt) else None for d in nd]
    f = [d.value if isinstance(d, ConstInt) else None for d in flat]
    if None in vals or None in f:
        return False
    lead = 1
    for v in vals[:-1]:
        lead *= v  # type: ignore[operator]
    return f[0] == lead and f[1] == vals[-1]


# TileView fields that describe where the data sits rather than which of it is valid. PyPTO's parser
# merges an assignment's annotation with the value's inferred type: the annotation's view decides the
# layout and the value's fills what the annotation leaves out (a load or create annotated with an NZ
# view is how a program asks for an NZ tile).
_LAYOUT_FIELDS = ("stride", "start_offset", "blayout", "slayout", "fractal", "pad", "compact")


def with_value_layout(annotated: Type, actual: Type) -> Type:
    """`actual`'s type as an assignment's annotation declares it: an annotation without a memory space
    takes the value's; every TileView field in `_LAYOUT_FIELDS` the annotation writes is the
    annotation's, every one it leaves out (its memory space's implicit value) the value's, when both are
    tiles of the same rank in the same memory space.
    The valid shape follows PyPTO's parser: an annotation without a TileView keeps the value's whole view,
    valid shape included (a plain `pl.Tile[[32, 32], pl.UINT8]` on a result valid on [32, 4] is that
    result); an annotation with a TileView states its valid shape (the whole tile when the view leaves
    it out), and that is compared with the value's. Anything else: `annotated` unchanged."""
    a, b = annotated, actual
    if not (isinstance(a, TileType) and isinstance(b, TileType)) or len(a.shape) != len(b.shape):
        return a
    if a.view is b.view and (a.memory is not None or b.memory is None):
        return a  # the very view, and no memory space to take from the value: nothing to fill in
    return _with_value_layout(a, b)


def _with_value_layout(a: TileType, b: TileType) -> Type:
    """`with_value_layout` of two tiles of one rank, in general (tests compare the fast answer with it)."""
    if a.memory and b.memory and a.memory != b.memory:
        return a
    plain = a.view is None  # no TileView written: the value's valid shape stands
    if a.memory is None and b.memory is not None:  # an annotation without a space lives where the value does
        a = replace(a, memory=b.memory, view=normalize_tile_view(a.shape, b.memory, a.view))
    if b.view is None:
        return a
    va = a.view or TileView()
    fields = _LAYOUT_FIELDS + (("valid_shape",) if plain else ())
    fill = {f: getattr(b.view, f) for f in fields if getattr(va, f) is None and getattr(b.view, f) is not None}
    if not fill:
        return a
    return replace(a, view=normalize_tile_view(a.shape, a.memory or b.memory, replace(va, **fill)))


def layout_as_annotated(annotated: Type, actual: Type) -> Type:
    """`actual` with the layout fields (`_LAYOUT_FIELDS`) of the annotation `with_value_layout` gave:
    what the annotation and the value are compared on is then the valid shape alone."""
    a, b = annotated, actual
    if not (isinstance(a, TileType) and isinstance(b, TileType)) or len(a.shape) != len(b.shape):
        return b
    if a.view is b.view:
        # the very view (or neither has one): its layout fields agree. Nine in ten annotations the verifier
        # compares share the value's view object, so this skips the field-by-field comparison below.
        return b
    return _layout_as_annotated(a, b)


def _layout_as_annotated(a: TileType, b: TileType) -> Type:
    """`layout_as_annotated` of two tiles of one rank, in general (tests compare the fast answer with it)."""
    if a.memory and b.memory and a.memory != b.memory:
        return b
    va, vb = a.view or TileView(), b.view or TileView()
    layout = {f: getattr(va, f) for f in _LAYOUT_FIELDS}
    if all(getattr(vb, f) == v for f, v in layout.items()):
        return b
    return replace(b, view=normalize_tile_view(b.shape, a.memory or b.memory, replace(vb, **layout)))


def kind_of(t: Type) -> str:
    return {"ScalarType": "scalar", "TensorType": "tensor", "TileType": "tile", "PtrType": "pointer",
            "TupleType": "tuple", "DistributedTensorType": "pld.DistributedTensor", "CommCtxType": "pld.CommCtx",
            "ArrayType": "array"}.get(type(t).__name__, type(t).__name__)


__all__ = ["VALID_SHAPE_MISMATCH", "kind_of", "layout_as_annotated", "type_mismatch", "with_value_layout"]
