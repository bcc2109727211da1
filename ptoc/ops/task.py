"""Task ids and small arrays of an orchestration function (PyPTO's submit/task API).

`out, tid = pl.submit(self.kernel, ...)` launches a kernel as a task (a Call of kind "submit", typed by
the verifier: the kernel's results followed by a `pl.Scalar[pl.TASK_ID]`). The ops here make and hold
task ids:

- `pl.system.task_invalid()`: the "no task" id (a first iteration's dependency seed);
- `pl.system.task_dummy(deps=[...])`: a task that only waits for `deps`; its id;
- `pl.system.task_is_valid(tid)`: whether `tid` names a real task (BOOL);
- `pl.array.create(extent, dtype)`: a `pl.Array[extent, dtype]` of integer, BOOL or TASK_ID scalars
  (extent a positive constant); `pl.array.get_element(a, i)` reads one, `pl.array.update_element(a, i, v)`
  is the array with element i replaced;
- `pl.no_dep(t)`: a kernel-call argument whose dependency the runtime does not track (the tensor itself).

None of them has a `.pto` form: they belong to orchestration code, which ptoc does not compile to
`.pto` (PTOC-E0400 with a hint).
"""

from __future__ import annotations

from ptoc.ir import dtypes
from ptoc.ir.nodes import ArrayType, ListExpr, ScalarType, TupleExpr, Type
from ptoc.ops.common import cint, dtype_arg
from ptoc.ops.registry import Args, NoPto, kind_of, register, short_name

_NO_PTO = NoPto("task ids and arrays belong to orchestration code, which ptoc does not compile to .pto")

TASK_ID = ScalarType(dtypes.TASK_ID)


def _task_id(args: Args, name: str, e_type) -> None:
    if e_type is not None and not (isinstance(e_type, ScalarType) and e_type.dtype == dtypes.TASK_ID) \
            and not (isinstance(e_type, ArrayType) and e_type.dtype == dtypes.TASK_ID):
        args.fail(f"{args.op.name}: {name} must hold task ids (pl.Scalar[pl.TASK_ID] or a TASK_ID array), "
                  f"got a {kind_of(e_type)}", name, hint="pass the task id of a pl.submit, or None")


@register("system.task_invalid", (), unit="scalar", family="task", pto=_NO_PTO)
def _task_invalid(args: Args) -> Type | None:
    """the invalid task id (no task)"""
    return TASK_ID


@register("system.task_dummy", (), optional=(("deps", None),), unit="scalar", family="task", pto=_NO_PTO)
def _task_dummy(args: Args) -> Type | None:
    """a task that only waits for deps=[...]; its task id"""
    deps = args.get("deps")
    if deps is not None and not isinstance(deps, (ListExpr, TupleExpr)):
        args.fail("system.task_dummy: deps must be a list such as [tid]", "deps", code="PTOC-E0201")
    return TASK_ID


@register("system.task_is_valid", ("task_id",), unit="scalar", family="task", pto=_NO_PTO)
def _task_is_valid(args: Args) -> Type | None:
    """whether a task id names a real task (BOOL)"""
    t = args.types.get("task_id")
    if t is not None and not (isinstance(t, ScalarType) and t.dtype == dtypes.TASK_ID):
        _task_id(args, "task_id", t if not isinstance(t, ArrayType) else ScalarType(dtypes.INDEX))
    return ScalarType(dtypes.BOOL)


def _array(args: Args) -> ArrayType | None:
    t = args.types.get("array")
    if t is not None and not isinstance(t, ArrayType):
        args.fail(f"{args.op.name}: 'array' must be a pl.Array, got a {kind_of(t)}", "array",
                  hint="make one with pl.array.create(extent, dtype); a tensor or tile is written through a "
                  "slice, dst[i:i + 1, ...] = src")
    return t


def _index(args: Args) -> None:
    t = args.types.get("index")
    if t is not None and not (isinstance(t, ScalarType) and t.dtype.is_int):
        args.fail(f"{args.op.name}: 'index' must be an integer scalar", "index")


@register("array.create", ("extent",), optional=(("dtype", None),), unit="scalar", family="task", pto=_NO_PTO)
def _array_create(args: Args) -> Type | None:
    """a pl.Array[extent, dtype] of integer, BOOL or TASK_ID scalars"""
    dt = dtype_arg(args, "dtype")
    if dt is not None and not (dt.is_int or dt.kind in ("bool", "task")):
        args.fail(f"array.create: an array holds integer, BOOL or TASK_ID scalars, not {dt.name}", "dtype")
    n = cint(args.get("extent"))
    if n is None or n <= 0:
        args.fail("array.create: the extent must be a positive constant", "extent",
                  hint="write pl.array.create(4, pl.TASK_ID)")
    return ArrayType(args.get("extent"), dt)


@register("array.get_element", ("array", "index"), unit="scalar", family="task", pto=_NO_PTO)
def _array_get(args: Args) -> Type | None:
    """element `index` of an array"""
    a = _array(args)
    _index(args)
    return ScalarType(a.dtype) if a is not None else None


@register("array.update_element", ("array", "index", "value"), unit="scalar", family="task", pto=_NO_PTO)
def _array_update(args: Args) -> Type | None:
    """the array with element `index` replaced by `value`"""
    a = _array(args)
    _index(args)
    v = args.types.get("value")
    if a is not None and v is not None:
        ok = isinstance(v, ScalarType) and (v.dtype == a.dtype or (
            v.dtype.is_int and a.dtype.is_int and "INDEX" in (v.dtype.name, a.dtype.name)))
        if not ok:
            shown = v.dtype.name if isinstance(v, ScalarType) else kind_of(v)
            args.fail(f"array.update_element: the value ({shown}) must have the array's dtype {a.dtype.name}",
                      "value")
    return a


@register("tensor.no_dep", ("tensor",), unit="any", family="task", pto=_NO_PTO)
def _no_dep(args: Args) -> Type | None:
    """a kernel-call argument the runtime tracks no dependency for; the tensor itself"""
    args.tensor("tensor")
    return args.types.get("tensor")


short_name("no_dep", tensor="tensor.no_dep")
