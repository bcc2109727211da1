"""Shape and valid-region arithmetic the layout family's type rules share: index arithmetic on
shape expressions (constants fold, symbols stay IR expressions), packed strides, and the valid region
a row-major reshape keeps (`reshape_valid_region`, OP-8)."""

from __future__ import annotations

from dataclasses import dataclass

from ptoc.ir.nodes import (
    BinOp,
    Expr,
    MinMax,
    TensorType,
)
from ptoc.ops.common import (
    c,
    cint,
    dim_eq,
    fmt_shape,
    shapes_equal,
    static_shape,
)


# --------------------------------------------------------------------------------------------------
# Index arithmetic on shape expressions (folds constants, keeps symbolic terms as IR expressions)
# --------------------------------------------------------------------------------------------------


def mul(a: Expr, b: Expr) -> Expr:
    x, y = cint(a), cint(b)
    if x is not None and y is not None:
        return c(x * y)
    if x == 1:
        return b
    if y == 1:
        return a
    return BinOp("*", a, b)


def sub(a: Expr, b: Expr) -> Expr:
    x, y = cint(a), cint(b)
    if x is not None and y is not None:
        return c(x - y)
    if y == 0:
        return a
    return BinOp("-", a, b)


def emin(a: Expr, b: Expr) -> Expr:
    x, y = cint(a), cint(b)
    if x is not None and y is not None:
        return c(min(x, y))
    if dim_eq(a, b):
        return a
    return MinMax("min", a, b)


def emax(a: Expr, b: Expr) -> Expr:
    x, y = cint(a), cint(b)
    if x is not None and y is not None:
        return c(max(x, y))
    if dim_eq(a, b):
        return a
    return MinMax("max", a, b)


def product(shape) -> Expr:
    out: Expr = c(1)
    for d in shape:
        out = mul(out, d)
    return out


def provably_le(a: Expr, b: Expr) -> bool:
    x, y = cint(a), cint(b)
    if x is not None and y is not None:
        return x <= y
    return dim_eq(a, b) is True


def row_major_strides(shape: tuple[Expr, ...]) -> tuple[Expr, ...]:
    out: list[Expr] = []
    acc: Expr = c(1)
    for d in reversed(shape):
        out.append(acc)
        acc = mul(acc, d)
    return tuple(reversed(out))


def packed_strides(shape: tuple[Expr, ...], layout: str) -> tuple[Expr, ...]:
    """Canonical packed strides: row-major for ND, trailing pair swapped (column-major) for DN."""
    if layout == "DN" and len(shape) >= 2:
        lead = row_major_strides(shape[:-2] + (mul(shape[-2], shape[-1]),))[:-1]
        return lead + (c(1), shape[-2])
    return row_major_strides(shape)


def is_packed(t: TensorType) -> bool:
    if t.view is None or not t.view.stride:
        return True
    return shapes_equal(t.view.stride, packed_strides(t.shape, t.layout)) is True


# --------------------------------------------------------------------------------------------------
# OP-8: the valid region of a reshape
# --------------------------------------------------------------------------------------------------


class RegionError(Exception):
    """The source region cannot be described in the new shape. `definite`: rejected on static
    geometry (no box exists); otherwise the rule could not prove a mapping (symbolic extents)."""

    def __init__(self, message: str, definite: bool = True):
        super().__init__(message)
        self.message = message
        self.definite = definite


@dataclass
class _Run:
    """One run: a maximal group of adjacent source axes whose region is a flat prefix of the group.
    cap: the group's element count (None when symbolic). The prefix is `full` (the whole group), a
    static length `length`, or `free * tail` with a symbolic `free` extent on the axis of size `free_dim`
    above `tail` fully valid elements."""

    cap: int | None
    full: bool = False
    length: int | None = None
    free: Expr | None = None
    tail: int = 1
    free_dim: Expr | None = None


def _start_run(s: Expr, v: Expr) -> _Run:
    cap = cint(s)
    if dim_eq(v, s):
        return _Run(cap, full=True)
    vv = cint(v)
    if vv is not None:
        return _Run(cap, length=vv)
    return _Run(cap, free=v, tail=1, free_dim=s)


def _source_runs(shape: tuple[Expr, ...], valid: tuple[Expr, ...]) -> list[_Run]:
    """The runs of the region, lowest (innermost) first. Adjacent axes share a run when the lower part
    is fully valid or the higher axis is pinned to one coordinate (valid extent 1)."""
    runs: list[_Run] = []
    cur: _Run | None = None
    for s, v in zip(reversed(shape), reversed(valid)):
        if cur is None:
            cur = _start_run(s, v)
            continue
        cs = cint(s)
        if cur.full:
            below = cur.cap
            cap = None if below is None or cs is None else below * cs
            if dim_eq(v, s):
                cur = _Run(cap, full=True)
            elif cint(v) is not None and below is not None:
                cur = _Run(cap, length=cint(v) * below)
            elif below is None:
                raise RegionError("the extents below a partially valid axis must be static", definite=False)
            else:
                cur = _Run(cap, free=v, tail=below, free_dim=s)
        elif cint(v) == 1:  # pinned: the run keeps its prefix, its capacity grows
            cur.cap = None if cur.cap is None or cs is None else cur.cap * cs
        else:
            runs.append(cur)
            cur = _start_run(s, v)
    assert cur is not None
    runs.append(cur)
    return runs


def _box_in_group(run: _Run, dims: list[int], new_shape: tuple[Expr, ...]) -> list[Expr]:
    """The origin-anchored box of target axes `dims` (static extents) that holds the run's prefix."""
    ext = [cint(new_shape[i]) for i in dims]
    if run.full:
        return [c(e) for e in ext]  # type: ignore[arg-type]
    out: list[Expr] = [c(1)] * len(dims)
    tail = 1
    if run.length is not None:
        n = run.length
        for k in range(len(dims) - 1, -1, -1):
            e = ext[k]
            assert e is not None
            if n <= tail * e:
                if n % tail:
                    raise RegionError(f"{n} valid elements are not a whole number of {tail}-element rows "
                                      "of the new shape")
                out[k] = c(n // tail)
                return out
            out[k] = c(e)
            tail *= e
        raise RegionError("the region does not fit the new shape")
    # symbolic free extent: it rides on the target axis whose stride equals the run's tail volume
    for k in range(len(dims) - 1, -1, -1):
        e = ext[k]
        assert e is not None
        if tail == run.tail and e != 1:
            assert run.free is not None and run.free_dim is not None
            if not provably_le(run.free_dim, c(e)):
                raise RegionError(f"the symbolic valid extent {fmt_shape((run.free,))[1:-1]} may exceed the "
                                  f"target axis of extent {e}", definite=False)
            out[k] = run.free
            return out
        if tail > run.tail:
            break
        out[k] = c(e)
        tail *= e
    raise RegionError(f"no axis of the new shape has stride {run.tail}, so the symbolic valid extent "
                      f"{fmt_shape((run.free,))[1:-1]} cannot be carried", definite=False)


def _strip_units(shape: tuple[Expr, ...]) -> list[int]:
    return [i for i, d in enumerate(shape) if cint(d) != 1]


def _unit_axes_region(shape, valid, new_shape) -> tuple[Expr, ...] | None:
    """The region when the reshape only adds or removes fully valid unit axes (the kept axes map 1:1);
    None when it does more."""
    keep_old, keep_new = _strip_units(shape), _strip_units(new_shape)
    if (len(keep_old) == len(keep_new)
            and all(dim_eq(shape[i], new_shape[j]) for i, j in zip(keep_old, keep_new))
            and all(cint(valid[i]) == 1 for i in range(len(shape)) if i not in keep_old)):
        out: list[Expr] = [c(1)] * len(new_shape)
        for i, j in zip(keep_old, keep_new):
            out[j] = valid[i]
        return tuple(out)
    return None


def _axis_groups(runs: list[_Run], new_shape) -> list[list[int]]:
    """The axes of the new shape each run of the source region occupies, lowest run first."""
    groups: list[list[int]] = []
    axis = len(new_shape) - 1
    for j, run in enumerate(runs):
        if j == len(runs) - 1:  # the highest run takes every remaining axis
            dims = list(range(axis + 1))
            if run.cap is not None and len(runs) > 1:
                prod = 1
                for i in dims:
                    prod *= cint(new_shape[i])  # type: ignore[operator]
                if prod != run.cap:
                    raise RegionError("the new shape does not split its axes like the source region")
        else:
            dims, prod = [], 1
            while axis >= 0 and prod < run.cap:  # type: ignore[operator]
                prod *= cint(new_shape[axis])  # type: ignore[operator]
                dims.insert(0, axis)
                axis -= 1
            if prod != run.cap:
                raise RegionError(f"the region repeats every {run.cap} elements, but no axis boundary of the "
                                  "new shape falls there")
        groups.append(dims)
        axis = (dims[0] - 1) if dims else axis
    return groups


def reshape_valid_region(shape: tuple[Expr, ...], valid: tuple[Expr, ...] | None,
                         new_shape: tuple[Expr, ...]) -> tuple[Expr, ...] | None:
    """OP-8: the valid region of `shape` (extents `valid`) reshaped to `new_shape`.

    Returns None when the result is fully valid, else the result's valid extents. Raises RegionError
    when no origin-anchored box of `new_shape` holds exactly the source's elements (or it cannot be
    proven). Shared by tensor.reshape and tile.reshape (and used by tensor.view)."""
    if valid is None or shapes_equal(valid, shape) is True:
        return None  # fully valid -> the new shape
    if any(cint(v) == 0 for v in valid):
        return tuple(c(0) for _ in new_shape)  # provably empty -> zero box
    units = _unit_axes_region(shape, valid, new_shape)
    if units is not None:
        return units
    # general case: runs of the source region against the axis groups of the new shape
    runs = _source_runs(shape, valid)
    if static_shape(new_shape) is None:
        raise RegionError("the new shape must be static to map a partial valid region", definite=False)
    if len(runs) > 1 and any(r.cap is None for r in runs):
        raise RegionError("a region that splits into several runs needs static run capacities", definite=False)
    groups = _axis_groups(runs, new_shape)
    result: list[Expr] = [c(1)] * len(new_shape)
    for run, dims in zip(runs, groups):
        for i, e in zip(dims, _box_in_group(run, dims, new_shape)):
            result[i] = e
    return tuple(result)
