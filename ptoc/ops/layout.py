"""Views and reshapes of tensors and tiles, index generators (spec OP-4, OP-6, OP-8; NZ-10 for NZ tensors).

tensor.*: slice, assemble, reshape, view, reinterpret_view, transpose, set_validshape, ci / arange.
tile.*: slice, extract, reshape, reinterpret_view, transpose, set_validshape, fillpad, ci, tri.

A view never creates data: every op here carries the source's valid region into the result and never
widens it. tensor.reshape and tile.reshape share one valid-region rule (`reshape_valid_region`, OP-8):
fully valid -> the new shape; provably empty -> a zero box; adding or removing fully valid unit axes
maps the kept axes 1:1; otherwise the region is read as the "runs" (flat prefixes) it fills and is
accepted iff the new shape splits its axes the same way, with each prefix ending on an axis boundary.
"""

from __future__ import annotations

from dataclasses import replace

from ptoc.ir import dtypes
from ptoc.ir.nodes import (
    BinOp,
    ConstBool,
    ConstInt,
    EnumLit,
    Expr,
    ScalarType,
    TensorType,
    TensorView,
    TileType,
    TileView,
    Type,
)
from ptoc.ir.types import effective_tile_view, normalize_tensor_view
from ptoc.ops.common import (
    INDEX,
    c,
    cint,
    dim_eq,
    dtype_arg,
    enum_arg,
    fmt_shape,
    has_partial_valid,
    int_list,
    new_tensor,
    new_tile,
    shapes_equal,
    static_shape,
    valid_shape_of,
)
from ptoc.ops.registry import Args, Emitter, NoPto, Pto, declare, register, short_name
from ptoc.ops.regions import (
    RegionError,
    emax,
    emin,
    is_packed,
    mul,
    product,
    provably_le,
    reshape_valid_region,
    row_major_strides,
    sub,
)


def narrow_region(args: Args, derived: tuple[Expr, ...] | None, explicit: tuple[Expr, ...] | None,
                  shape: tuple[Expr, ...], rule: str, name: str = "valid_shape") -> tuple[Expr, ...] | None:
    """An explicit valid_shape may only narrow the derived region (never claim data outside it)."""
    if explicit is None:
        return derived
    if len(explicit) != len(shape):
        args.fail(f"{args.op.name}: valid_shape has {len(explicit)} extents for rank {len(shape)}", name, rule=rule)
    base = derived if derived is not None else shape
    for i, (e, d, s) in enumerate(zip(explicit, base, shape)):
        if cint(e) is not None and cint(e) < 0:
            args.fail(f"{args.op.name}: valid extent {i} is negative", name, rule=rule)
        if dim_eq(d, s) is True:  # the derived region is full on this axis: anything up to the extent
            if cint(e) is not None and cint(s) is not None and cint(e) > cint(s):
                args.fail(f"{args.op.name}: valid extent {i} ({cint(e)}) exceeds the extent {cint(s)}", name,
                          rule=rule)
            continue
        if not provably_le(e, d):
            args.fail(f"{args.op.name}: valid_shape {fmt_shape(explicit)} claims data outside the derived valid "
                      f"region {fmt_shape(base)} (axis {i})", name, rule=rule,
                      hint="an explicit valid_shape can only narrow the region the source really holds")
    return explicit


def _region_or_fail(args: Args, shape, valid, new_shape, rule: str = "OP-8") -> tuple[Expr, ...] | None:
    try:
        return reshape_valid_region(shape, valid, new_shape)
    except RegionError as e:
        args.fail(f"{args.op.name}: the valid region {fmt_shape(valid)} of {fmt_shape(shape)} cannot be "
                  f"expressed in the new shape {fmt_shape(new_shape)}: {e.message}", rule=rule,
                  hint="a valid region is an origin-anchored box; reshape to a shape that keeps the valid "
                  "elements a box (e.g. fold whole rows), or make the source fully valid first (fillpad)")
    return None


def _check_count(args: Args, old: tuple[Expr, ...], new: tuple[Expr, ...], rule: str = "OP-8") -> None:
    so, sn = static_shape(old), static_shape(new)
    for i, d in enumerate(new):
        v = cint(d)
        if v is not None and v <= 0:
            args.fail(f"{args.op.name}: extent {i} of the new shape is {v}; extents must be positive", "shape",
                      rule=rule)
    if so is not None and sn is not None:
        po, pn = 1, 1
        for x in so:
            po *= x
        for x in sn:
            pn *= x
        if po != pn:
            args.fail(f"{args.op.name}: {fmt_shape(old)} has {po} elements but {fmt_shape(new)} has {pn}", "shape",
                      rule=rule, hint="a reshape keeps the element count")


def _no_packed_fp4(args: Args, dt: dtypes.DType, what: str) -> None:
    if dt.is_packed_fp4:
        args.fail(f"{args.op.name}: {what} directly on packed FP4 ({dt.name}) is unsupported", rule="FP4-4",
                  hint="convert to BF16 with pl.cast first")


def _window_region(src_shape, src_valid, offsets, extents) -> tuple[Expr, ...]:
    """The source's valid region shifted by `offsets` and cut to the window `extents`."""
    out: list[Expr] = []
    for s, v, o, e in zip(src_shape, src_valid, offsets, extents):
        if dim_eq(v, s) is True:
            out.append(e)
        elif cint(v) is not None and cint(o) is not None and cint(e) is not None:
            out.append(c(max(0, min(cint(e), cint(v) - cint(o)))))  # type: ignore[operator]
        elif cint(o) == 0:
            out.append(v if provably_le(s, e) else emin(v, e))
        else:
            out.append(emin(emax(sub(v, o), c(0)), e))
    return tuple(out)


def _axis_arg(args: Args, name: str, rank: int) -> int:
    e = args.get(name)
    v = cint(e)
    if v is None:
        args.fail(f"{args.op.name}: {name} must be a constant integer axis", name, code="PTOC-E0201")
    if not -rank <= v < rank:  # type: ignore[operator]
        args.fail(f"{args.op.name}: {name} {v} is out of range for rank {rank}", name)
    return v % rank  # type: ignore[operator]


def _check_window(args: Args, src_shape, offsets, extents, rule: str | None = None) -> None:
    if len(offsets) != len(src_shape) or len(extents) != len(src_shape):
        args.fail(f"{args.op.name}: the source has rank {len(src_shape)} but the window gives "
                  f"{len(extents)} extents and {len(offsets)} offsets", "offset", rule=rule,
                  hint="give one extent and one offset per axis")
    for i, (s, o, e) in enumerate(zip(src_shape, offsets, extents)):
        so, oo, eo = cint(s), cint(o), cint(e)
        if oo is not None and oo < 0:
            args.fail(f"{args.op.name}: offset {i} is {oo}; offsets must be non-negative", "offset", rule=rule)
        if eo is not None and eo <= 0:
            args.fail(f"{args.op.name}: window extent {i} is {eo}; extents must be positive", "shape", rule=rule)
        if so is not None and oo is not None and eo is not None and oo + eo > so:
            args.fail(f"{args.op.name}: window [{oo}, {oo + eo}) of axis {i} exceeds the extent {so}", "shape",
                      rule=rule, hint="shrink the window or its offset")


def _nz_view_rejected(args: Args, t: TensorType, what: str) -> None:
    if t.layout == "NZ":
        args.fail(f"{args.op.name}: {what} of an NZ tensor is not supported", "tensor", rule="NZ-10",
                  hint="NZ tensors are read only by tile.load into Mat; view the data before it is declared NZ, "
                  "or load it and work on the tile")


# --------------------------------------------------------------------------------------------------
# tensor ops
# --------------------------------------------------------------------------------------------------


def _tensor_result(src: TensorType, shape, valid, *, layout: str | None = None, stride=None,
                   pad: str | None = None, keep_pad: bool = True) -> TensorType:
    lay = layout if layout is not None else src.layout
    p = pad if pad is not None else (src.view.pad if (keep_pad and src.view is not None) else None)
    vs = tuple(valid) if valid is not None and shapes_equal(valid, shape) is not True else None
    view = normalize_tensor_view(TensorView(valid_shape=vs, stride=tuple(stride) if stride else None,
                                            layout=lay, pad=p))
    return TensorType(tuple(shape), src.dtype, view)


def _slice_region(args: Args, t: TensorType, shape, offset, explicit, clamp: bool) -> tuple[Expr, ...]:
    """The valid region of a tensor.slice window: the source's, shifted and cut (clamped to the source
    when clamp=True), then narrowed by an explicit valid_shape."""
    region = _window_region(t.shape, valid_shape_of(t), offset, shape)
    if clamp:
        region = tuple(emin(r, emax(sub(s, o), c(0))) if cint(s) is not None and cint(o) is not None else r
                       for r, s, o in zip(region, t.shape, offset))
    if explicit is not None:
        if len(explicit) != len(shape):
            args.fail(f"tensor.slice: valid_shape has {len(explicit)} extents for rank {len(shape)}", "valid_shape")
        region = tuple(e if dim_eq(r, s) is True else emin(e, r) for e, r, s in zip(explicit, region, shape))
    return region


def _dropped_axes(args: Args, drop, shape, region) -> set[int]:
    """drop_dims of tensor.slice: constant axes of extent 1 that are fully valid."""
    axes = set()
    for d in drop:
        a = cint(d)
        if a is None or not -len(shape) <= a < len(shape):
            args.fail("tensor.slice: drop_dims must list constant axes of the window", "drop_dims")
        a %= len(shape)  # type: ignore[operator]
        if cint(shape[a]) != 1:
            args.fail(f"tensor.slice: dropped axis {a} must have extent 1, got {fmt_shape((shape[a],))[1:-1]}",
                      "drop_dims")
        if cint(region[a]) != 1:
            args.fail(f"tensor.slice: dropped axis {a} must be fully valid", "drop_dims")
        axes.add(a)
    return axes


@register("tensor.slice", ("tensor", "shape", "offset"),
          optional=(("valid_shape", None), ("drop_dims", None), ("pad_value", None), ("clamp", None)),
          unit="any", family="layout")
def _tensor_slice(args: Args) -> Type | None:
    """a window of a tensor (a view): valid region = the source's, shifted and cut to the window"""
    t = args.tensor("tensor")
    shape = int_list(args, "shape")
    offset = int_list(args, "offset")
    explicit = int_list(args, "valid_shape", required=False)
    drop = int_list(args, "drop_dims", required=False)
    pad = enum_arg(args, "pad_value", "PadValue")
    if explicit is not None and len(explicit) == 0:
        explicit = None
    if t is None:
        return None
    if t.layout.startswith("MX_"):  # PyPTO: an MX scale pack is addressed as a whole, never windowed
        args.fail(f"tensor.slice does not support MX-layout tensors ({t.layout})", "tensor",
                  hint="load the whole MX scale tensor")
    clamp = isinstance(args.get("clamp"), ConstBool) and args.get("clamp").value  # type: ignore[union-attr]
    if not clamp or len(offset) != t.rank or len(shape) != t.rank:
        _check_window(args, t.shape, offset, shape)
    keeps_plane = t.rank >= 2 and shapes_equal(tuple(shape[-2:]), t.shape[-2:]) is True and \
        all(cint(o) == 0 for o in offset[-2:])
    if t.layout == "NZ" and not keeps_plane:  # NZ-10 / NZ-11: only leading axes may be narrowed
        args.fail("tensor.slice: a slice of an NZ tensor must keep the whole trailing [R, C] plane",
                  "shape", rule="NZ-10",
                  hint="narrow only the leading (batch) axes of an NZ tensor; window rows/columns with "
                  "tile.load offsets instead")
    region = _slice_region(args, t, shape, offset, explicit, clamp)
    out_shape, out_valid = list(shape), list(region)
    if drop:
        axes = _dropped_axes(args, drop, shape, region)
        out_shape = [d for i, d in enumerate(shape) if i not in axes]
        out_valid = [d for i, d in enumerate(region) if i not in axes]
    p = None if pad == "null" else pad
    return _tensor_result(t, out_shape, out_valid, pad=p, keep_pad=pad != "null")


@register("tensor.assemble", ("target", "source", "offset"), optional=(("atomic", None),), unit="any",
          family="layout")
def _tensor_assemble(args: Args) -> Type | None:
    """write `source` into `target` at `offset`; returns the updated target"""
    tgt = args.tensor("target")
    src = args.tensor("source")
    offset = int_list(args, "offset")
    if tgt is None:
        return None
    # As PyPTO's subscript write `dst[i] = src` builds it: offsets may stop early (the axes after the last
    # one start at 0) and the source may have fewer axes than the target (its leading axes are extent 1).
    if len(offset) > tgt.rank:
        args.fail(f"tensor.assemble: the target has rank {tgt.rank} but {len(offset)} offsets are given", "offset",
                  hint="give one offset per target axis")
    offset = list(offset) + [ConstInt(0, dtypes.INDEX)] * (tgt.rank - len(offset))
    if src is not None:
        if src.dtype != tgt.dtype:
            args.fail(f"tensor.assemble: source dtype {src.dtype.name} differs from target dtype {tgt.dtype.name}",
                      "source", hint="cast the source first: pl.cast(x, target_type=...)")
        if src.rank > tgt.rank:
            args.fail(f"tensor.assemble: source rank {src.rank} exceeds target rank {tgt.rank}", "source",
                      hint="reshape the source to the target's rank")
        extents = [ConstInt(1, dtypes.INDEX)] * (tgt.rank - src.rank) + list(src.shape)
        _check_window(args, tgt.shape, offset, extents)
    return tgt


@register("tensor.reshape", ("tensor", "shape"), optional=(("valid_shape", None),), unit="any", family="layout")
def _tensor_reshape(args: Args) -> Type | None:
    """a new shape over the same elements; the valid region maps by OP-8 and never grows"""
    t = args.tensor("tensor")
    shape = int_list(args, "shape")
    explicit = int_list(args, "valid_shape", required=False)
    if t is None:
        return None
    _no_packed_fp4(args, t.dtype, "reshape")
    _check_count(args, t.shape, shape)
    if t.layout == "NZ":  # NZ-10: only the whole-tensor flat [N] reshape, kept as ND
        if len(shape) != 1 or has_partial_valid(t):
            args.fail("tensor.reshape: an NZ tensor can only be reshaped to the whole-tensor flat [N]", "shape",
                      rule="NZ-10", hint="reshape to [N] (kept ND), or load the NZ data into Mat and reshape the tile")
        return new_tensor(tuple(shape), t.dtype)
    valid = t.view.valid_shape if t.view is not None else None
    region = _region_or_fail(args, t.shape, valid, tuple(shape))
    region = narrow_region(args, region, explicit, tuple(shape), "OP-8")
    return new_tensor(tuple(shape), t.dtype, region)


def _layout_kw(args: Args) -> str | None:
    e = args.get("layout")
    if e is None:
        return None
    if isinstance(e, EnumLit) and e.family in ("TensorLayout",) and e.member in ("ND", "DN", "NZ"):
        return e.member
    args.fail(f"{args.op.name}: layout must be pl.TensorLayout.ND or pl.TensorLayout.DN", "layout",
              code="PTOC-E0201")
    return None


@register("tensor.view", ("tensor",), optional=(("shape", None), ("valid_shape", None), ("layout", None)),
          unit="any", family="layout")
def _tensor_view(args: Args) -> Type | None:
    """metadata-only reinterpretation of a tensor's shape and/or ND/DN layout (OP-4)"""
    t = args.tensor("tensor")
    shape = int_list(args, "shape", required=False)
    explicit = int_list(args, "valid_shape", required=False)
    layout = _layout_kw(args)
    if shape is None and layout is None:
        args.fail("tensor.view needs a shape, a layout= or both", code="PTOC-E0201", rule="OP-4",
                  hint="pl.tensor.view(t, [rows, cols]) or pl.tensor.view(t, layout=pl.TensorLayout.DN)")
    if layout == "NZ":
        args.fail("tensor.view cannot produce an NZ layout", "layout", rule="OP-4",
                  hint="NZ is a storage layout of GM parameters; use ND or DN")
    if t is None:
        return None
    _nz_view_rejected(args, t, "tensor.view")
    target_layout = layout or t.layout
    if shape is None:  # layout-only flip: the trailing pair swaps over the same memory
        return _layout_flip(args, t, target_layout, explicit)
    shape = tuple(shape)
    if len(shape) < 1:
        args.fail("tensor.view: the target shape must have rank >= 1", "shape", rule="OP-4")
    if target_layout == "DN" and len(shape) < 2:
        args.fail("tensor.view: a DN view needs rank >= 2", "shape", rule="OP-4",
                  hint="give a [rows, cols] shape or use layout=pl.TensorLayout.ND")
    _check_count(args, t.shape, shape, rule="OP-4")
    same_shape = shapes_equal(shape, t.shape) is True
    if not same_shape and not is_packed(t):
        args.fail("tensor.view: a strided tensor cannot be shape-reinterpreted", "tensor", rule="OP-4",
                  hint="only packed tensors have a canonical stride for a new shape; copy the window first")
    if not has_partial_valid(t):
        valid = narrow_region(args, None, explicit, shape, "OP-4")
        return _tensor_result(t, shape, valid, layout=target_layout)
    if same_shape and target_layout == t.layout:
        return _tensor_result(t, shape, narrow_region(args, valid_shape_of(t), explicit, shape, "OP-4"))
    return _partial_view(args, t, shape, target_layout, explicit)


def _layout_flip(args: Args, t: TensorType, target_layout: str, explicit) -> Type:
    """tensor.view with only layout=: the trailing pair of shape, valid region and strides swaps."""
    if t.rank < 2:
        args.fail(f"tensor.view: a layout flip needs rank >= 2, got rank {t.rank}", "layout", rule="OP-4",
                  hint="reshape to [1, N] first")
    if target_layout == t.layout:
        return t
    new_shape = t.shape[:-2] + (t.shape[-1], t.shape[-2])
    vs = valid_shape_of(t)
    new_valid = vs[:-2] + (vs[-1], vs[-2])
    stride = None
    if t.view is not None and t.view.stride and not is_packed(t):
        st = t.view.stride
        stride = st[:-2] + (st[-1], st[-2])
    if explicit is not None:
        new_valid = narrow_region(args, new_valid, explicit, new_shape, "OP-4")
    return _tensor_result(t, new_shape, new_valid, layout=target_layout, stride=stride)


def _partial_view(args: Args, t: TensorType, shape, target_layout: str, explicit) -> Type:
    """tensor.view of a partially valid source (OP-4): leading dims of packed ND folded into 2-D, or a
    prefix into [1, N], with an explicit target valid_shape."""
    fold2d = (product(t.shape[:-1]), t.shape[-1])
    flat = (c(1), product(t.shape))
    if t.layout != "ND" or target_layout != "ND" or not (
            shapes_equal(shape, fold2d) is True or shapes_equal(shape, flat) is True):
        args.fail(f"tensor.view: a partially valid tensor (valid {fmt_shape(valid_shape_of(t))}) can only be "
                  f"viewed with its leading dims folded to 2-D {fmt_shape(fold2d)} or as a flat prefix "
                  f"{fmt_shape(flat)}, on packed ND", "shape", rule="OP-4",
                  hint="use tensor.reshape (OP-8), or make the source fully valid first")
    if explicit is None:
        args.fail("tensor.view: viewing a partially valid tensor needs an explicit target valid_shape", rule="OP-4",
                  hint=f"pass valid_shape=[...] for the {fmt_shape(shape)} view")
    try:
        derived = reshape_valid_region(t.shape, valid_shape_of(t), shape)
    except RegionError as e:
        if e.definite:
            args.fail(f"tensor.view: the valid region {fmt_shape(valid_shape_of(t))} is not a box of "
                      f"{fmt_shape(shape)}: {e.message}", "valid_shape", rule="OP-4")
        return _tensor_result(t, shape, explicit)  # unprovable (symbolic): the explicit region stands
    return _tensor_result(t, shape, narrow_region(args, derived, explicit, shape, "OP-4"))


# reinterpret_view (OP-4) -----------------------------------------------------------------------------

REINTERPRET_DTYPES = ("INT8", "INT16", "INT32", "INT64", "UINT8", "UINT16", "UINT32", "UINT64",
                      "FP16", "BF16", "FP32")
MX_ALIASES = {frozenset(("INT8", "FP8E4M3FN")), frozenset(("UINT8", "FP8E8M0"))}


def _scale(args: Args, e: Expr, num: int, den: int, what: str) -> Expr:
    """e * num / den, exactly."""
    v = cint(e)
    if v is not None:
        if (v * num) % den:
            args.fail(f"{args.op.name}: {what} {v} is not a whole number of target elements "
                      f"({v} x {num} bytes / {den} bytes)", rule="OP-4",
                      hint="make the scaled axis a multiple of the byte-width ratio, or give shape=")
        return c(v * num // den)
    if num % den == 0:
        return mul(e, c(num // den))
    args.fail(f"{args.op.name}: cannot prove that the symbolic {what} {fmt_shape((e,))[1:-1]} scales to whole "
              "target elements", rule="OP-4", hint="give a static extent, or an explicit static shape=")
    return e


def _reinterpret(args: Args, src, dst: dtypes.DType, axis: int) -> tuple[tuple[Expr, ...], tuple[Expr, ...] | None]:
    """(result shape, result valid or None) of a reinterpret_view."""
    sd = src.dtype
    if dst == sd:
        args.fail(f"{args.op.name}: the target dtype equals the source dtype {sd.name}", "dtype", rule="OP-4",
                  hint="reinterpret_view changes the dtype; use reshape or view to change only the shape")
    pair = frozenset((sd.name, dst.name))
    if pair not in MX_ALIASES:
        for d, name in ((sd, "source"), (dst, "target")):
            if d.name not in REINTERPRET_DTYPES:
                args.fail(f"{args.op.name}: {name} dtype {d.name} cannot be reinterpreted", "dtype", rule="OP-4",
                          hint="supported: signed/unsigned 8/16/32/64-bit integers, FP16, BF16, FP32, and the MX "
                          "aliases INT8<->FP8E4M3FN, UINT8<->FP8E8M0")
    nb, db = sd.bytes, dst.bytes
    derived = list(src.shape)
    derived[axis] = _scale(args, src.shape[axis], nb, db, f"extent of axis {axis}")
    derived_t = tuple(derived)
    explicit = int_list(args, "shape", required=False)
    partial = has_partial_valid(src)
    shape = derived_t
    if explicit is not None:
        explicit = tuple(explicit)
        if shapes_equal(explicit, derived_t) is not True:
            if partial:
                args.fail(f"{args.op.name}: a partially valid source only takes the derived shape "
                          f"{fmt_shape(derived_t)}, got {fmt_shape(explicit)}", "shape", rule="OP-4",
                          hint="omit shape=, or make the source fully valid first")
            se, ss = static_shape(explicit), static_shape(src.shape)
            if se is None or ss is None:
                args.fail(f"{args.op.name}: an explicit shape that differs from the derived "
                          f"{fmt_shape(derived_t)} must be fully static", "shape", rule="OP-4")
            pe, ps = 1, 1
            for x in se:  # type: ignore[union-attr]
                pe *= x
            for x in ss:  # type: ignore[union-attr]
                ps *= x
            if pe * db != ps * nb:
                args.fail(f"{args.op.name}: shape {fmt_shape(explicit)} holds {pe * db} bytes, the source holds "
                          f"{ps * nb}", "shape", rule="OP-4", hint="the view must cover exactly the same bytes")
            shape = explicit
    valid = None
    if partial:
        vs = list(valid_shape_of(src))
        vs[axis] = _scale(args, vs[axis], nb, db, f"valid extent of axis {axis}")
        valid = tuple(vs)
    return shape, valid


def _keep_pad(pad: str | None) -> str | None:
    return pad if pad in ("zero", "null") else None  # dtype-dependent max/min padding is cleared


@register("tensor.reinterpret_view", ("tensor", "dtype"), optional=(("shape", None),), unit="any",
          family="layout")
def _tensor_reinterpret_view(args: Args) -> Type | None:
    """the same bytes as another dtype (zero-copy); the layout's contiguous axis scales (OP-4)"""
    t = args.tensor("tensor")
    dst = dtype_arg(args, "dtype")
    if t is None or dst is None:
        return None
    _nz_view_rejected(args, t, "tensor.reinterpret_view")
    if not is_packed(t):
        args.fail("tensor.reinterpret_view: the source must be packed (no explicit strides)", "tensor",
                  rule="OP-4", hint="copy the strided window into a packed tensor first")
    if t.layout == "DN" and t.rank < 2:
        args.fail("tensor.reinterpret_view: a DN tensor needs rank >= 2", "tensor", rule="OP-4")
    axis = t.rank - 2 if t.layout == "DN" else t.rank - 1
    shape, valid = _reinterpret(args, t, dst, axis)
    pad = _keep_pad(t.view.pad if t.view is not None else None)
    out = _tensor_result(t, shape, valid, pad=pad, keep_pad=False)
    return replace(out, dtype=dst)


@register("tensor.transpose", ("tensor", "axis1", "axis2"), optional=(("valid_shape", None),), unit="any",
          family="layout")
def _tensor_transpose(args: Args) -> Type | None:
    """swap two axes (the valid region swaps with them)"""
    t = args.tensor("tensor")
    explicit = int_list(args, "valid_shape", required=False)
    if t is None:
        return None
    _no_packed_fp4(args, t.dtype, "transpose")
    if t.layout == "NZ":
        args.fail("tensor.transpose: an NZ tensor cannot be transposed", "tensor", rule="NZ-10",
                  hint="load it into Mat and transpose the tile")
    a, b = _axis_arg(args, "axis1", t.rank), _axis_arg(args, "axis2", t.rank)
    if a == b:
        args.fail(f"tensor.transpose: axis1 and axis2 are both {a}", "axis2", hint="name two different axes")
    shape, valid = list(t.shape), list(valid_shape_of(t))
    shape[a], shape[b] = shape[b], shape[a]
    valid[a], valid[b] = valid[b], valid[a]
    region = narrow_region(args, tuple(valid), explicit, tuple(shape), "OP-6")
    return new_tensor(tuple(shape), t.dtype, region)


def _validshape_args(args: Args, shape: tuple[Expr, ...]) -> tuple[Expr, Expr]:
    if len(shape) != 2:
        args.fail(f"{args.op.name} needs a 2-D operand, got rank {len(shape)}", hint="reshape to [rows, cols] first")
    out = []
    for name, dim in (("valid_rows", shape[0]), ("valid_cols", shape[1])):
        e = args.get(name)
        t = args.type(name)
        if t is not None and not isinstance(t, ScalarType):
            args.fail(f"{args.op.name}: {name} must be an index scalar", name)
        if isinstance(t, ScalarType) and not t.dtype.is_int:
            args.fail(f"{args.op.name}: {name} must be an integer, got {t.dtype.name}", name)
        v, d = cint(e), cint(dim)
        if v is not None and v < 0:
            args.fail(f"{args.op.name}: {name} is negative ({v})", name)
        if v is not None and d is not None and v > d:
            args.fail(f"{args.op.name}: {name} {v} exceeds the extent {d}", name,
                      hint="a valid region lies inside the shape")
        out.append(c(v) if v is not None else e)
    return out[0], out[1]  # type: ignore[return-value]


@register("tensor.set_validshape", ("tensor", "valid_rows", "valid_cols"), unit="any", family="layout")
def _tensor_set_validshape(args: Args) -> Type | None:
    """replace the valid_shape metadata of a 2-D tensor (no data moves)"""
    t = args.tensor("tensor")
    if t is None:
        return None
    r, col = _validshape_args(args, t.shape)
    view = normalize_tensor_view(replace(t.view or TensorView(), valid_shape=(r, col)
                                         if shapes_equal((r, col), t.shape) is not True else None))
    return TensorType(t.shape, t.dtype, view, t.memref)


# ci / arange -----------------------------------------------------------------------------------------

CI_DTYPES = ("INT16", "INT32")


def _ci(args: Args, kind: str) -> Type | None:
    shape = int_list(args, "shape")
    dt = dtype_arg(args, "dtype", required=False) or dtypes.INT32
    if dt.name not in CI_DTYPES:
        args.fail(f"{args.op.name}: dtype {dt.name} is not supported; ci generates INT16 or INT32", "dtype",
                  rule="OP-6", hint="dtype=pl.INT32 (cast the result afterwards if needed)")
    if len(shape) < 1:
        args.fail(f"{args.op.name}: the shape must have rank >= 1", "shape", rule="OP-6")
    if cint(shape[-1]) == 1:
        args.fail(f"{args.op.name}: the innermost dimension must not be 1 (shape {fmt_shape(tuple(shape))})", "shape",
                  rule="OP-6", hint="generate a row: use a shape such as [1, N]")
    for i, d in enumerate(shape):
        if cint(d) is not None and cint(d) <= 0:  # type: ignore[operator]
            args.fail(f"{args.op.name}: extent {i} is {cint(d)}; extents must be positive", "shape", rule="OP-6")
    st = args.type("start")
    if isinstance(args.get("start"), ConstInt):
        pass  # a literal start takes the sequence dtype
    elif isinstance(st, ScalarType) and st.dtype != dt:
        args.fail(f"{args.op.name}: start has dtype {st.dtype.name} but the sequence is {dt.name}", "start",
                  rule="OP-6", hint=f"convert it first: pl.cast(start, pl.{dt.name})")
    elif st is not None and not isinstance(st, ScalarType):
        args.fail(f"{args.op.name}: start must be a scalar", "start")
    if kind == "tensor":
        return new_tensor(tuple(shape), dt)
    args.tile("tmp")
    return new_tile(tuple(shape), dt, "Vec")


for _n in ("tensor.ci", "tensor.arange"):
    register(_n, ("start", "shape"), optional=(("dtype", None), ("descending", None)), family="layout",
             summary="a contiguous integer sequence start+k (or start-k) in a tensor; INT16/INT32")(
        lambda args: _ci(args, "tensor"))
register("tile.ci", ("start", "shape"), optional=(("tmp", None), ("dtype", None), ("descending", None)),
         family="layout", summary="a contiguous integer sequence start+k (or start-k) in a Vec tile; INT16/INT32")(
    lambda args: _ci(args, "tile"))

TRI_DTYPES = ("INT16", "INT32", "UINT16", "UINT32", "FP16", "FP32")


@register("tile.tri", ("diagonal", "shape"), optional=(("valid_shape", None), ("dtype", None), ("upper", None)),
          family="layout")
def _tile_tri(args: Args) -> Type | None:
    """a lower/upper triangular 0/1 mask tile (pto.ttri); INT32 diagonal offset"""
    shape = int_list(args, "shape")
    valid = int_list(args, "valid_shape", required=False)
    dt = dtype_arg(args, "dtype", required=False) or dtypes.INT32
    if dt.name not in TRI_DTYPES:
        args.fail(f"tile.tri: dtype {dt.name} is not supported", "dtype", rule="OP-6",
                  hint="accepted: " + ", ".join(TRI_DTYPES))
    if len(shape) != 2 or static_shape(tuple(shape)) is None:
        args.fail(f"tile.tri: the shape must be static 2-D, got {fmt_shape(tuple(shape))}", "shape", rule="OP-6")
    dg = args.type("diagonal")
    if isinstance(dg, ScalarType) and not dg.dtype.is_int:
        args.fail(f"tile.tri: the diagonal offset must be an integer, got {dg.dtype.name}", "diagonal", rule="OP-6",
                  hint="pass an INT32 scalar: pl.cast(d, pl.INT32)")
    region = narrow_region(args, None, valid, tuple(shape), "OP-6") if valid is not None else None
    return new_tile(tuple(shape), dt, "Vec", region)


# --------------------------------------------------------------------------------------------------
# tile ops
# --------------------------------------------------------------------------------------------------


def _layout_fields(t: TileType) -> TileView:
    """The source tile's view with its layout triple made explicit (so a new shape cannot re-derive it)."""
    eff = effective_tile_view(t)
    base = t.view or TileView()
    return replace(base, blayout=eff["blayout"], slayout=eff["slayout"], fractal=eff["fractal"])


@register("tile.slice", ("tile", "shape", "offset"), optional=(("valid_shape", None), ("pad_value", None)),
          unit="any", family="layout")
def _tile_slice(args: Args) -> Type | None:
    """a sub-tile view: static shape, optional (dynamic) valid_shape; stride/start_offset of the parent"""
    t = args.tile("tile")
    shape = tuple(int_list(args, "shape"))
    offset = tuple(int_list(args, "offset"))
    explicit = int_list(args, "valid_shape", required=False)
    pad = enum_arg(args, "pad_value", "PadValue")
    if static_shape(shape) is None:
        args.fail(f"tile.slice: the shape must be static, got {fmt_shape(shape)}", "shape", rule="OP-6",
                  hint="slice a static window and narrow it with valid_shape=[...] (which may be dynamic)")
    if t is None:
        return None
    _check_window(args, t.shape, offset, shape, rule="OP-6")
    region = _window_region(t.shape, valid_shape_of(t), offset, shape)
    if explicit is not None:
        if len(explicit) != len(shape):
            args.fail(f"tile.slice: valid_shape has {len(explicit)} extents for rank {len(shape)}", "valid_shape")
        region = tuple(e if dim_eq(r, s) is True else emin(e, r) for e, r, s in zip(explicit, region, shape))
    eff = effective_tile_view(t)
    base = _layout_fields(t)
    stride = start = None
    if eff["slayout"] == "none_box":  # unboxed: the window keeps the parent's strides
        col = eff["blayout"] == "col_major" and len(shape) == 2
        if eff["stride"]:
            parent = tuple(eff["stride"])  # type: ignore[arg-type]
        else:
            parent = (c(1), t.shape[0]) if col else row_major_strides(t.shape)
        start = eff["start_offset"]
        for o, s in zip(offset, parent):
            term = mul(o, s)
            if cint(term) == 0:
                continue
            start = c(cint(start) + cint(term)) if cint(start) is not None and cint(term) is not None \
                else BinOp("+", start, term)  # type: ignore[operator]
        canon = (c(1), shape[0]) if col else row_major_strides(shape)
        stride = None if shapes_equal(parent, canon) is True else parent
    view = replace(base, stride=stride, start_offset=start)
    if pad is not None:
        view = replace(view, pad=pad)
    return new_tile(shape, t.dtype, t.memory, region, view)


# TEXTRACT's (source, destination) spaces (pto-isa TExtract.hpp: Mat -> L0A/L0B, Acc -> Mat through the
# FIX pipe); the UB-to-UB window copy (Vec -> Vec, both tiles ND or both NZ) only on A5: PTOAS rejects a
# vec source on A2/A3 ("expects A2/A3 textract src to use loc=mat")
EXTRACT_PAIRS = {("Mat", "Left"), ("Mat", "Right"), ("Acc", "Mat")}
EXTRACT_PAIRS_BY_ARCH = {"a2a3": EXTRACT_PAIRS, "a5": EXTRACT_PAIRS | {("Vec", "Vec")}}
# TEXTRACT writes L0A/L0B in its own fractal formats (unlike TMOV's side of tile.move)
EXTRACT_L0_LAYOUT = {"Left": ("row_major", "row_major"), "Right": ("row_major", "col_major")}


@register("tile.extract", ("tile", "index_row", "index_col", "shape"), optional=(("target_memory", None),),
          unit="mem", family="layout")
def _tile_extract(args: Args) -> Type | None:
    """TEXTRACT variant 1: a [rows, cols] window at (index_row, index_col) into Left/Right (from Mat), Mat
    (from Acc) or a Vec tile of its own (from Vec); the layout is the target's implicit view, Left/Right in
    TEXTRACT's L0 format. Which space pairs TEXTRACT has is a hardware rule, checked once the spaces are
    decided (`args.hardware`): before InferTileMemorySpace a source's space may still change."""
    t = args.tile("tile")
    shape = tuple(int_list(args, "shape"))
    mem = enum_arg(args, "target_memory", "Mem")
    if mem is None:
        args.fail("tile.extract needs target_memory=pl.Mem.Left / Right / Mat", code="PTOC-E0201", rule="OP-6")
    if len(shape) != 2 or static_shape(shape) is None:
        args.fail(f"tile.extract: the shape must be static 2-D, got {fmt_shape(shape)}", "shape", rule="OP-6")
    if t is None:
        return None
    if t.rank != 2:
        args.fail(f"tile.extract: the source must be 2-D, got rank {t.rank}", "tile", rule="OP-6")
    src_mem = t.memory or "Vec"
    if args.hardware and (src_mem, mem) not in EXTRACT_PAIRS_BY_ARCH.get(args.target.name, EXTRACT_PAIRS):
        args.fail(f"tile.extract: {src_mem} -> {mem} is not a TEXTRACT path on {args.target.title}", "target_memory",
                  rule="OP-6", hint="TEXTRACT moves Mat -> Left, Mat -> Right, Acc -> Mat (and Vec -> Vec on A5); "
                  "use tile.move or tile.slice otherwise")
    offset = (args.get("index_row"), args.get("index_col"))
    _check_window(args, t.shape, offset, shape, rule="OP-6")
    region = _window_region(t.shape, valid_shape_of(t), offset, shape)
    view = None
    if mem in EXTRACT_L0_LAYOUT:
        b, s = EXTRACT_L0_LAYOUT[mem]
        view = TileView(blayout=b, slayout=s, fractal=512)
    if t.view is not None and t.view.pad is not None:
        view = replace(view or TileView(), pad=t.view.pad)
    if mem in ("Left", "Right") and region is not None and shapes_equal(region, shape) is not True:
        # a partial window into L0 is a compact transfer: TEXTRACT's non-compact path copies whole physical
        # rows and takes no valid extents, so it would move the padding as data (PyPTO stamps the same)
        view = replace(view or TileView(), compact="normal")
    return new_tile(shape, t.dtype, mem, region, view)


@register("tile.reshape", ("tile", "shape"), unit="any", family="layout")
def _tile_reshape(args: Args) -> Type | None:
    """a new tile shape over the same elements; the valid region maps by OP-8 and never grows"""
    t = args.tile("tile")
    shape = tuple(int_list(args, "shape"))
    if t is None:
        return None
    _no_packed_fp4(args, t.dtype, "reshape")
    _check_count(args, t.shape, shape)
    if shapes_equal(shape, t.shape) is True:  # identity: keep the layout triple and the memory space
        return TileType(shape, t.dtype, None, t.memory, t.view)
    valid = t.view.valid_shape if t.view is not None else None
    region = _region_or_fail(args, t.shape, valid, shape)
    view = TileView(pad=t.view.pad) if t.view is not None and t.view.pad is not None else None
    return new_tile(shape, t.dtype, t.memory, region, view)


@register("tile.reinterpret_view", ("tile", "dtype"), optional=(("shape", None),), unit="any", family="layout")
def _tile_reinterpret_view(args: Args) -> Type | None:
    """the same bytes as another dtype (zero-copy); row-major scales the last axis, col-major the
    second to last (OP-4); tight, unboxed tiles only"""
    t = args.tile("tile")
    dst = dtype_arg(args, "dtype")
    if t is None or dst is None:
        return None
    eff = effective_tile_view(t)
    if eff["slayout"] != "none_box" or eff["stride"]:
        args.fail("tile.reinterpret_view needs a tight, unboxed tile (slayout none_box, no stride)", "tile",
                  rule="OP-4", hint="move the data into a packed Vec tile first")
    col = eff["blayout"] == "col_major"
    if col and t.rank < 2:
        args.fail("tile.reinterpret_view: a col-major tile needs rank >= 2", "tile", rule="OP-4")
    axis = t.rank - 2 if col else t.rank - 1
    shape, valid = _reinterpret(args, t, dst, axis)
    base = _layout_fields(t)
    view = replace(base, pad=_keep_pad(base.pad), valid_shape=None)
    return new_tile(shape, dst, t.memory, valid, view)


@register("tile.transpose", ("tile", "axis1", "axis2"), optional=(("tmp", None),), family="layout")
def _tile_transpose(args: Args) -> Type | None:
    """swap two axes of a tile (the valid region swaps with them)"""
    t = args.tile("tile")
    if t is None:
        return None
    _no_packed_fp4(args, t.dtype, "transpose")
    a, b = _axis_arg(args, "axis1", t.rank), _axis_arg(args, "axis2", t.rank)
    if a == b:
        args.fail(f"tile.transpose: axis1 and axis2 are both {a}", "axis2", hint="name two different axes")
    tmp = args.tile("tmp")
    if tmp is not None and tmp.dtype != t.dtype:
        args.fail(f"tile.transpose: tmp dtype {tmp.dtype.name} differs from the tile's {t.dtype.name}", "tmp")
    shape, valid = list(t.shape), list(valid_shape_of(t))
    shape[a], shape[b] = shape[b], shape[a]
    valid[a], valid[b] = valid[b], valid[a]
    return new_tile(tuple(shape), t.dtype, t.memory, tuple(valid))


_FLIP_MAJOR = {"row_major": "col_major", "col_major": "row_major", "none_box": "none_box"}


@register("tile.transpose_view", ("tile",), unit="any", family="layout")
def _tile_transpose_view(args: Args) -> Type | None:
    """the same bytes read as the transpose: the trailing two axes swap and each layout flips its major
    order (NZ <-> ZN, ND <-> DN); no data moves"""
    t = args.tile("tile")
    if t is None:
        return None
    if t.rank < 2:
        args.fail(f"tile.transpose_view needs a tile of rank >= 2, got rank {t.rank}", "tile")
    eff = effective_tile_view(t)
    shape, valid = list(t.shape), list(valid_shape_of(t))
    shape[-2], shape[-1] = shape[-1], shape[-2]
    valid[-2], valid[-1] = valid[-1], valid[-2]
    view = TileView(blayout=_FLIP_MAJOR.get(eff["blayout"], eff["blayout"]),
                    slayout=_FLIP_MAJOR.get(eff["slayout"], eff["slayout"]),
                    fractal=eff["fractal"], pad=eff["pad"], compact=eff["compact"])
    return new_tile(tuple(shape), t.dtype, t.memory, tuple(valid), view)


def _assemble_union(args: Args, tgt, src, offset) -> tuple | None:
    """The target's valid region after the write: the union of what it held and what was written, when
    that union is one origin-anchored box (None: not decidable from constants, the target's is kept)."""
    tv, sv = valid_shape_of(tgt), valid_shape_of(src)
    if shapes_equal(tv, tgt.shape) is True:
        return tuple(tv)
    tvc, svc, offc = [cint(x) for x in tv], [cint(x) for x in sv], [cint(x) for x in offset]
    if None in tvc or None in svc or None in offc:
        return None
    far = [o + e for o, e in zip(offc, svc)]
    growing = [i for i, (f, v) in enumerate(zip(far, tvc)) if f > v]
    if not growing:
        return tuple(tv)
    if all(o == 0 for o in offc) and all(v <= e for v, e in zip(tvc, svc)):
        return tuple(sv)
    g = growing[0]
    spans_others = all(offc[i] == 0 and svc[i] >= tvc[i] for i in range(len(tvc)) if i != g)
    if len(growing) > 1 or offc[g] > tvc[g] or not spans_others:
        args.fail(f"{args.op.name}: writing {fmt_shape(tuple(sv))} at {fmt_shape(tuple(offset))} into a target "
                  f"valid over {fmt_shape(tuple(tv))} leaves a valid region that is not one box", "offset",
                  hint="write slabs that abut the valid region along one axis, or start at the origin")
    return tuple(ConstInt(far[i], c(0).dtype) if i == g else tv[i] for i in range(len(tv)))


@register("tile.assemble", ("target", "source", "offset"), family="layout")
def _tile_assemble(args: Args) -> Type | None:
    """write the whole `source` tile into `target` at `offset`; returns the updated target"""
    tgt, src = args.tile("target"), args.tile("source")
    offset = int_list(args, "offset")
    if tgt is None:
        return None
    if src is not None:
        downcast = src.dtype == dtypes.FP32 and tgt.dtype in (dtypes.BF16, dtypes.FP16)
        if src.dtype != tgt.dtype and not downcast:
            args.fail(f"tile.assemble: source dtype {src.dtype.name} differs from target dtype {tgt.dtype.name}",
                      "source", hint="only an FP32 accumulator may be written into a BF16/FP16 target (the "
                      "FIXPIPE downcast); cast the source otherwise")
    if src is None or src.rank != tgt.rank or len(offset) != tgt.rank:
        return tgt
    _check_window(args, tgt.shape, offset, src.shape)
    valid = _assemble_union(args, tgt, src, offset)
    if valid is None:
        return tgt
    return new_tile(tgt.shape, tgt.dtype, tgt.memory, valid, replace(tgt.view or TileView(), valid_shape=None))


@register("tile.set_validshape", ("tile", "valid_rows", "valid_cols"), unit="any", family="layout")
def _tile_set_validshape(args: Args) -> Type | None:
    """replace the valid_shape metadata of a 2-D tile (no data moves); other view fields are kept"""
    t = args.tile("tile")
    if t is None:
        return None
    r, col = _validshape_args(args, t.shape)
    return new_tile(t.shape, t.dtype, t.memory, (r, col), replace(t.view or TileView(), valid_shape=None))


@register("tile.fillpad", ("tile",), optional=(("pad_value", None),), family="layout")
def _tile_fillpad(args: Args) -> Type | None:
    """fill the invalid part of a Vec tile with zero / max / min; the result is fully valid"""
    t = args.tile("tile")
    pad = enum_arg(args, "pad_value", "PadValue", "zero")
    if pad == "null":
        args.fail("tile.fillpad needs a real padding value", "pad_value", rule="OP-6",
                  hint="pad_value=pl.PadValue.zero, .max or .min")
    if t is None:
        return None
    if (t.memory or "Vec") != "Vec":
        args.fail(f"tile.fillpad works on Vec tiles, got a {t.memory} tile", "tile", rule="OP-6",
                  hint="move the tile to Vec first: pl.tile.move(t, target_memory=pl.Mem.Vec)")
    view = replace(_layout_fields(t), pad=pad, valid_shape=None)
    return new_tile(t.shape, t.dtype, t.memory, None, view)


@register("tile.fillpad_inplace", ("tile",), optional=(("pad_value", None),), family="layout",
          pto=NoPto("ptoc's .pto emitter has no lowering for tile.fillpad_inplace yet; pl.tile.fillpad gives the "
                    "same values in a new tile"))
def _tile_fillpad_inplace(args: Args) -> Type | None:
    """tile.fillpad written into the tile itself: the padding filled, the tile fully valid"""
    return _tile_fillpad(args)


@register("tile.fillpad_expand", ("tile", "shape"), optional=(("pad_value", None),), family="layout",
          pto=NoPto("ptoc's .pto emitter has no lowering for tile.fillpad_expand yet"))
def _tile_fillpad_expand(args: Args) -> Type | None:
    """copy a tile into a larger one of `shape` (each extent >= the source's), the rest filled with the padding"""
    t = args.tile("tile")
    shape = int_list(args, "shape")
    pad = enum_arg(args, "pad_value", "PadValue", "zero")
    if pad == "null":
        args.fail("tile.fillpad_expand needs a real padding value", "pad_value", hint="pl.PadValue.zero, .max or .min")
    if any(cint(d) is None for d in shape):
        args.fail("tile.fillpad_expand: the destination shape is made of constants", "shape")
    if t is None:
        return None
    if len(shape) != len(t.shape) or any(cint(s) is not None and cint(d) is not None and cint(d) < cint(s)
                                         for s, d in zip(t.shape, shape)):
        args.fail(f"tile.fillpad_expand: {fmt_shape(tuple(shape))} must cover the source {fmt_shape(t.shape)} "
                  "axis by axis", "shape")
    view = replace(_layout_fields(t), pad=pad, valid_shape=None)
    return new_tile(tuple(shape), t.dtype, t.memory, None, view)


# --------------------------------------------------------------------------------------------------
# user-level short names
# --------------------------------------------------------------------------------------------------

short_name("slice", tensor="tensor.slice", tile="tile.slice")
short_name("assemble", tensor="tensor.assemble", tile="tile.assemble")
short_name("transpose_view", tile="tile.transpose_view")
short_name("reshape", tensor="tensor.reshape", tile="tile.reshape")
short_name("view", tensor="tensor.view")
short_name("reinterpret_view", tensor="tensor.reinterpret_view", tile="tile.reinterpret_view")
short_name("transpose", tensor="tensor.transpose", tile="tile.transpose")
short_name("set_validshape", tensor="tensor.set_validshape", tile="tile.set_validshape")
short_name("arange", tensor="tensor.ci")
short_name("extract", tile="tile.extract")
short_name("fillpad", tile="tile.fillpad")
short_name("fillpad_inplace", tile="tile.fillpad_inplace")
short_name("fillpad_expand", tile="tile.fillpad_expand")

# `.pto` spellings (PTOAS PTOOps.td, destination-passing form)
declare("tile.set_validshape", pto=Emitter("set_validshape"))
declare("tile.reshape", pto=Emitter("reshape"))
declare("tile.reinterpret_view", pto=Emitter("reshape"))
declare("tile.slice", pto=Emitter("subview"))
declare("tile.extract", pto=Pto("textract", ("tile:tile", "index:index_row", "index:index_col")))
declare("tile.fillpad", pto=Pto("tfillpad", ("tile:tile",)))
declare("tile.transpose", pto=Pto("ttrans", ("tile:tile", "tile!:tmp"),
                                  "PTOAS's ttrans needs a scratch tile of the source's shape; FlattenTileNdTo2D "
                                  "adds it, so IR given after that pass must pass tmp=<tile>"))
declare("tile.transpose_view", pto=NoPto("a transposed view of a tile is not lowered yet; copy the data "
                                         "transposed with pl.tile.transpose(t, 0, 1, tmp=...) instead"))
declare("tile.assemble", pto=NoPto("writing one tile into another (PTOAS pto.tinsert) is not lowered yet; store "
                                   "both parts to GM, or assemble at tensor level (pl.tensor.assemble)"))
declare("tile.ci", pto=Emitter("ci"))
declare("tile.tri", pto=Emitter("tri"))

__all__ = ["INDEX", "ConstInt", "RegionError", "narrow_region", "reshape_valid_region"]


# --------------------------------------------------------------------------------------------------
# PyPTO's expand_clone, scatter_update and concat (src/ir/op/tensor_ops/broadcast.cpp,
# scatter_update.cpp, tile_ops/transform.cpp, tensor_ops/transform.cpp). No .pto lowering yet.
# --------------------------------------------------------------------------------------------------


@register("tensor.expand_clone", ("input", "target"), unit="any", family="layout")
def _expand_clone(args: Args) -> Type | None:
    """a rank-3 tensor copied to the target's shape, broadcast along at most one axis of extent 1"""
    x, t = args.tensor("input"), args.tensor("target")
    if x is None or t is None:
        return None
    if x.dtype != t.dtype:
        args.fail(f"tensor.expand_clone: the input is {x.dtype.name}, the target {t.dtype.name}", "target")
    if len(x.shape) != 3 or len(t.shape) != 3:
        args.fail(f"tensor.expand_clone takes rank-3 tensors, got {fmt_shape(x.shape)} and {fmt_shape(t.shape)}",
                  "input")
    widened = 0
    for i, (a, b) in enumerate(zip(x.shape, t.shape)):
        if dim_eq(a, b) is True:
            continue
        if cint(a) != 1:
            args.fail(f"tensor.expand_clone: axis {i} of {fmt_shape(x.shape)} cannot grow to {fmt_shape(t.shape)}: "
                      "only an axis of extent 1 is broadcast", "input")
        widened += 1
    if widened > 1:
        args.fail("tensor.expand_clone broadcasts along at most one axis", "input")
    return new_tensor(t.shape, t.dtype)


def _scatter_update(kind: str):
    def rule(args: Args) -> Type | None:
        get = args.tensor if kind == "tensor" else args.tile
        x, idx, src = get("input"), get("index"), get("src")
        dim = args.get("dim")
        if dim is not None and cint(dim) != -2:
            args.fail(f"{args.op.name}: only dim=-2 is supported, got {fmt_shape((dim,))[1:-1]}", "dim")
        if idx is not None and (len(idx.shape) != 2 or not idx.dtype.is_int):
            args.fail(f"{args.op.name}: the index is a 2-D integer {kind} [b, s]", "index")
        if x is None or src is None:
            return None
        if len(x.shape) not in (2, 4):
            args.fail(f"{args.op.name}: the destination is [rows, d] or [blocks, block_size, 1, d], got "
                      f"{fmt_shape(x.shape)}", "input")
        if len(src.shape) != len(x.shape) or src.dtype != x.dtype:
            args.fail(f"{args.op.name}: the source must have the destination's rank and dtype", "src")
        if kind == "tensor":
            return new_tensor(x.shape, x.dtype)
        return new_tile(x.shape, x.dtype, x.memory)

    rule.__doc__ = (f"write the {kind} rows of src at the rows index names (dim=-2); the result is the updated "
                    "destination")
    return rule


def _concat(kind: str):
    def rule(args: Args) -> Type | None:
        get = args.tensor if kind == "tensor" else args.tile
        a, b = get("src0"), get("src1")
        if a is None or b is None:
            return None
        if a.dtype != b.dtype:
            args.fail(f"{args.op.name}: src0 is {a.dtype.name}, src1 {b.dtype.name}", "src1")
        if len(a.shape) != 2 or len(b.shape) != 2:
            args.fail(f"{args.op.name} joins 2-D {kind}s", "src0")
        if dim_eq(a.shape[0], b.shape[0]) is False:
            args.fail(f"{args.op.name}: the row counts differ ({fmt_shape(a.shape)} and {fmt_shape(b.shape)})",
                      "src1")
        ca, cb = cint(a.shape[1]), cint(b.shape[1])
        cols = c(ca + cb) if ca is not None and cb is not None else BinOp("+", a.shape[1], b.shape[1])
        shape = (a.shape[0], cols)
        if kind == "tensor":
            return new_tensor(shape, a.dtype)
        return new_tile(shape, a.dtype, a.memory)

    rule.__doc__ = f"two 2-D {kind}s side by side: [M, N0] and [M, N1] -> [M, N0 + N1]"
    return rule


for _k in ("tensor", "tile"):
    register(f"{_k}.scatter_update", ("input", "index", "src"), optional=(("dim", None),),
             unit="any" if _k == "tensor" else "vector", family="layout")(_scatter_update(_k))
    register(f"{_k}.concat", ("src0", "src1"), unit="any" if _k == "tensor" else "vector",
             family="layout")(_concat(_k))
for _n in ("scatter_update", "concat"):
    short_name(_n, tensor=f"tensor.{_n}", tile=f"tile.{_n}")
    declare(f"tile.{_n}", pto=NoPto(f"ptoc's .pto emitter has no lowering for tile.{_n} yet"))
short_name("expand_clone", tensor="tensor.expand_clone")
