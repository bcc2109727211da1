"""The one operator registry.

Each op is declared once, in the file of its family (`ptoc/ops/<family>.py`): its printed name, its
positional parameters, its optional parameters with defaults, the unit that executes it and its type
rule. The type rule receives the bound arguments (`Args`) and returns the result type, or raises
`OpError` naming the rule it breaks and how to fix it. The verifier, the passes, codegen and the
reference all look ops up here.

User-level short names (`pl.add`, `pl.load`, ...) resolve to the tensor or tile op by the kinds of
their arguments (`resolve`).
"""

from __future__ import annotations

import difflib
import functools
from collections.abc import Callable
from dataclasses import field

from ptoc.lazy_dataclass import dataclass

from ptoc.diagnostics import Diagnostic
from ptoc.ir.nodes import Call, Expr, Node, ScalarType, TensorType, TileType, Type
from ptoc.ir.types import as_empty_tile, is_empty_tile
from ptoc.ir.typing_registry import register_op_typer


class OpError(Exception):
    """A type-rule violation at a call."""

    def __init__(self, message: str, hint: str | None = None, rule: str | None = None,
                 at: Node | None = None, code: str = "PTOC-E0202"):
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.rule = rule
        self.at = at
        self.code = code


_MISSING = object()


@dataclass
class Args:
    """The arguments of one call, bound to the op's parameter names, with their types."""

    op: OpDef
    call: Call
    ctx: object | None
    values: dict[str, Expr]
    types: dict[str, Type | None]
    extra: dict[str, Expr] = field(default_factory=dict)  # attrs= and other pass-through kwargs

    @property
    def arch(self) -> str:
        return getattr(self.ctx, "arch", "a2a3") if self.ctx is not None else "a2a3"

    @property
    def hardware(self) -> bool:
        """Whether the hardware rules of memory spaces apply here (ptoc.context.HARDWARE_RULES): once
        InferTileMemorySpace has decided every space, not while a space may still be moved."""
        return bool(getattr(self.ctx, "hardware_rules", False))

    @property
    def target(self):
        """The facts of the target (`ptoc.target.arch.Arch`): what it supports, its capacities."""
        from ptoc.target.arch import get_arch

        return get_arch(self.arch)

    def has(self, name: str) -> bool:
        return name in self.values and self.values[name] is not None

    def get(self, name: str) -> Expr | None:
        return self.values.get(name)

    def type(self, name: str) -> Type | None:
        return self.types.get(name)

    def at(self, name: str) -> Node:
        v = self.values.get(name)
        return v if v is not None else self.call

    def fail(self, message: str, name: str | None = None, hint: str | None = None, rule: str | None = None,
             code: str = "PTOC-E0202"):
        raise OpError(message, hint, rule, self.at(name) if name else self.call, code)

    def tile(self, name: str) -> TileType | None:
        """The tile-typed argument `name`; None when its type is unknown; error when it is not a tile."""
        t = self.types.get(name)
        if t is None:
            return None
        if not isinstance(t, TileType):
            self.fail(f"{self.op.name}: argument {name!r} must be a tile, got a {kind_of(t)}", name)
        return t

    def tensor(self, name: str) -> TensorType | None:
        t = self.types.get(name)
        if t is None:
            return None
        if not isinstance(t, TensorType):
            self.fail(f"{self.op.name}: argument {name!r} must be a tensor, got a {kind_of(t)}", name)
        return t

    def scalar(self, name: str) -> ScalarType | None:
        t = self.types.get(name)
        if t is None:
            return None
        if not isinstance(t, ScalarType):
            self.fail(f"{self.op.name}: argument {name!r} must be a scalar, got a {kind_of(t)}", name)
        return t


def kind_of(t: Type | None) -> str:
    return {"ScalarType": "scalar", "TensorType": "tensor", "TileType": "tile", "PtrType": "pointer",
            "TupleType": "tuple", "DistributedTensorType": "tensor", "CommCtxType": "communication context",
            "ArrayType": "array"}.get(type(t).__name__, "value")


def shown_op(name: str) -> str:
    """How the IR text spells op `name`: `pl.tile.add`, and the distributed ops under their own namespace
    (`pld.tensor.window`)."""
    return name if name.startswith("pld.") else f"pl.{name}"


TypeRule = Callable[[Args], "Type | None"]

UNITS = ("vector", "cube", "mem", "scalar", "sync", "any")


@dataclass(frozen=True)
class OpDef:
    name: str
    params: tuple[str, ...]
    optional: tuple[tuple[str, object], ...] = ()  # (name, default) ; default None = absent
    rule: TypeRule | None = None
    unit: str = "vector"
    family: str = ""
    summary: str = ""
    open_kwargs: bool = False  # accepts kwargs beyond its declared parameters (carried through)
    pto: Pto | Emitter | NoPto | None = None  # the `.pto` form (tile ops)
    interp: object | None = None  # a declared semantics kernel for the numeric reference

    @functools.cached_property
    def param_names(self) -> tuple[str, ...]:
        return self.params + tuple(n for n, _ in self.optional)


@dataclass(frozen=True)
class Pto:
    """A destination-passing `.pto` op: `pto.<name> ins(<operands> : <types>) outs(%dst : <type>)`.

    Each operand is `"<kind>:<param>"`, the op parameter it comes from and how it is passed: `tile` (a
    tile handle), `scalar` (a scalar operand: a literal takes the first tile operand's dtype, OP-6),
    `f32` (a scalar passed as f32), `index` (an index value). A `tile?` operand is left out when the
    argument is absent; a `tile!` operand is required in `.pto` even where the IR makes it optional,
    and its absence is reported with `hint`."""

    name: str
    operands: tuple[str, ...]
    hint: str = ""


@dataclass(frozen=True)
class Emitter:
    """An op whose `.pto` form is not a plain destination-passing op: codegen's method `method`."""

    method: str


@dataclass(frozen=True)
class NoPto:
    """An op with no `.pto` form (codegen reports PTOC-E0400 with this hint)."""

    hint: str


@dataclass(frozen=True)
class UnaryKernel:
    """Semantics `out = fn(np, x)` over the operand's values (float64 for float dtypes, rounded once
    to the dtype afterwards); the result keeps the operand's valid region."""

    fn: Callable


@dataclass(frozen=True)
class TileScalarKernel:
    """Semantics `out = fn(np, x, s)` for a tile `x` and a scalar `s` (both float64 for float tiles,
    rounded once to the tile dtype afterwards); the result keeps the tile's valid region."""

    fn: Callable


REGISTRY: dict[str, OpDef] = {}
# short name -> {"tensor": full name, "tile": full name, "scalar": full name}
SHORT: dict[str, dict[str, str]] = {}


def register(name: str, params: tuple[str, ...] | list[str] = (), optional=(), unit: str = "vector",
             family: str = "", summary: str = "", open_kwargs: bool = False, pto=None, interp=None):
    """Decorator: declare op `name` with the decorated function as its type rule."""

    def deco(fn: TypeRule) -> TypeRule:
        if name in REGISTRY:
            raise ValueError(f"op {name} registered twice")
        if unit not in UNITS:
            raise ValueError(f"op {name}: unknown unit {unit}")
        REGISTRY[name] = OpDef(name, tuple(params), tuple(optional), fn, unit,
                               family or fn.__module__.rsplit(".", 1)[-1], summary or (fn.__doc__ or "").strip(),
                               open_kwargs, pto, interp)
        return fn

    return deco


def declare(name: str, *, pto: Pto | Emitter | NoPto | None = None, interp: object | None = None) -> None:
    """Attach the `.pto` form and/or the reference semantics to the registered op `name`."""
    import dataclasses

    op = REGISTRY[name]
    changes = {k: v for k, v in (("pto", pto), ("interp", interp)) if v is not None}
    REGISTRY[name] = dataclasses.replace(op, **changes)


def short_name(short: str, **targets: str) -> None:
    """Declare that `pl.<short>` resolves to targets["tensor"] / ["tile"] / ["scalar"] by argument kind."""
    SHORT.setdefault(short, {}).update(targets)


_LOADED = False

FAMILIES = ("elementwise", "bitwise", "memory", "layout", "reduction", "matmul", "gather", "fp4", "system",
            "task", "distributed")


def load_all() -> None:
    global _LOADED
    if _LOADED:
        return
    _LOADED = True
    import importlib

    for fam in FAMILIES:
        try:
            importlib.import_module(f"ptoc.ops.{fam}")
        except ModuleNotFoundError as e:  # a family not written yet
            if e.name != f"ptoc.ops.{fam}":
                raise


def lookup(name: str) -> OpDef | None:
    load_all()
    return REGISTRY.get(name)


def resolve(call: Call, arg_types: list[Type | None]) -> tuple[OpDef | None, str | None]:
    """The op a call names. Short names pick the tensor or tile op by the first tensor/tile argument.
    Returns (op, None) or (None, error message)."""
    load_all()
    op = REGISTRY.get(call.op)
    if op is not None:
        return op, None
    targets = SHORT.get(call.op)
    if targets is None:
        return None, None
    kinds = [kind_of(t) for t in arg_types if t is not None]
    kind = next((k for k in kinds if k in ("tile", "tensor")), None)
    if kind is None and kinds and "scalar" in targets and all(k == "scalar" for k in kinds):
        kind = "scalar"
    if kind is None:
        if len(targets) == 1:
            kind = next(iter(targets))
        else:
            return None, (f"{shown_op(call.op)} resolves to {' or '.join(sorted(targets.values()))} by its "
                          "arguments' types, which are not known here")
    if kind in ("tensor", "tile") and f"{kind}_scalar" in targets and len(call.args) >= 2:
        second = arg_types[1] if len(arg_types) >= 2 else None
        from ptoc.ir.nodes import ConstBool, ConstFloat, ConstInt

        if isinstance(second, ScalarType) or (second is None and isinstance(
                call.args[1], (ConstInt, ConstFloat, ConstBool))):
            kind = f"{kind}_scalar"
    full = targets.get(kind)
    if full is None:
        return None, f"{shown_op(call.op)} has no form for {kind} arguments"
    return REGISTRY.get(full), None


def closest_op(name: str) -> str | None:
    """A known op close to `name`: a near spelling in the same namespace, else the same op name in another
    namespace (pl.tensor.relu -> tile.relu); None when nothing is close."""
    load_all()
    names = sorted(set(REGISTRY) | set(SHORT))
    ns, _, tail = name.rpartition(".")
    same_ns = [n for n in names if n.rpartition(".")[0] == ns]
    m = difflib.get_close_matches(name, same_ns, n=1, cutoff=0.85)
    if not m:
        m = [n for n in names if n.rpartition(".")[2] == tail][:1]
    if not m:
        m = difflib.get_close_matches(name, same_ns, n=1, cutoff=0.75)
    if not m:
        m = difflib.get_close_matches(name, names, n=1, cutoff=0.8)
    return m[0] if m else None


def bind(op: OpDef, call: Call, arg_types: list[Type | None], kwarg_types: dict[str, Type | None],
         ctx) -> Args:
    values: dict[str, Expr] = {}
    types: dict[str, Type | None] = {}
    extra: dict[str, Expr] = {}
    names = op.param_names
    if len(call.args) > len(names):
        raise OpError(f"{op.name} takes at most {len(names)} positional argument(s) "
                      f"({', '.join(names) or 'none'}), got {len(call.args)}", at=call, code="PTOC-E0201",
                      hint=f"signature: {signature(op)}")
    for i, a in enumerate(call.args):
        values[names[i]] = a
        types[names[i]] = arg_types[i] if i < len(arg_types) else None
    for k, v in call.kwargs:
        if k in values:
            raise OpError(f"{op.name}: {k!r} is given both positionally and by keyword", at=v, code="PTOC-E0201")
        if k in names:
            values[k] = v
            types[k] = kwarg_types.get(k)
        elif k == "attrs" or op.open_kwargs:
            extra[k] = v
        else:
            near = difflib.get_close_matches(k, names, n=1, cutoff=0.5)
            raise OpError(f"{op.name} has no parameter {k!r}", at=v, code="PTOC-E0201",
                          hint=f"did you mean {near[0]}=?" if near else f"signature: {signature(op)}")
    missing = [p for p in op.params if p not in values]
    if missing:
        raise OpError(f"{op.name} is missing argument(s): {', '.join(missing)}", at=call, code="PTOC-E0201",
                      hint=f"signature: {signature(op)}")
    for n, default in op.optional:
        if n not in values:
            values[n] = default  # type: ignore[assignment]
            types[n] = None
    return Args(op, call, ctx, values, types, extra)


def signature(op: OpDef) -> str:
    parts = list(op.params)
    for n, d in op.optional:
        parts.append(f"{n}=" + ("None" if d is None else _short_repr(d)))
    return f"{shown_op(op.name)}({', '.join(parts)})"


def _short_repr(d) -> str:
    from ptoc.ir.nodes import Expr as _E

    if isinstance(d, _E):
        from ptoc.ir.printer import print_expr

        return print_expr(d)
    return repr(d)


def _check_packed_fp4_target(args: Args, result: Type | None) -> None:
    """FP4-3: packed FP4 executes on Ascend950 (a5) only; A2/A3 rejects every op that touches it."""
    for name, t in (*args.types.items(), ("result", result)):
        dt = getattr(t, "dtype", None)
        if dt is not None and dt.is_packed_fp4:
            if args.target.supports_packed_fp4:  # (asked only when a packed FP4 value is there)
                return
            raise OpError(f"{args.op.name}: packed FP4 ({dt.name}) is supported on Ascend950 (a5) only; "
                          f"the target is {args.arch}", rule="FP4-3", code="PTOC-E0203",
                          at=args.values.get(name) if name != "result" else args.call,
                          hint="compile with --arch a5, or keep the data in BF16 on A2/A3")


def _check_bf16_vector_target(args: Args) -> None:
    """A2/A3's vector instructions take no BF16 tile (Arch.vector_ops_without_bf16, from pto-isa's headers)."""
    if not args.hardware or args.op.name not in args.target.vector_ops_without_bf16:
        return  # a target rule, like the memory-space ones: judged once the pipeline holds the kernel
    for name, t in args.types.items():
        dt = getattr(t, "dtype", None)
        if isinstance(t, TileType) and dt is not None and dt.name == "BF16":
            raise OpError(f"{args.op.name}: the {args.target.title} vector unit does not compute on BF16 tiles "
                          f"(argument {name!r})", code="PTOC-E0671", at=args.values.get(name) or args.call,
                          hint="cast to FP32 first (pl.tile.cast(x, pl.FP32)), compute, and cast the result "
                               "back to BF16 if needed; or compile with --arch a5")


def infer_call_type(call: Call, arg_types: list[Type | None], kwarg_types: dict[str, Type | None],
                    ctx) -> tuple[Type | None, list[Diagnostic]]:
    """The verifier's hook: result type of an op call plus any diagnostics."""
    try:
        op, why = resolve(call, arg_types)
        if op is None:
            if why is not None:
                return None, [Diagnostic("PTOC-E0201", why, call.span,
                                         hint="annotate the arguments or call the tensor/tile op by its full name")]
            near = closest_op(call.op)
            return None, [Diagnostic("PTOC-E0200", f"unknown operator {shown_op(call.op)}", call.span,
                                     hint=f"did you mean {shown_op(near)}?" if near else
                                     "see `ptoc ops` for the operator set")]
        args = bind(op, call, arg_types, kwarg_types, ctx)
        result = op.rule(args) if op.rule is not None else None
        if isinstance(result, TileType) and op.name != "tile.set_validshape" and any(map(is_empty_tile, arg_types)):
            result = as_empty_tile(result)  # an op on an empty tile computes nothing
        _check_packed_fp4_target(args, result)
        _check_bf16_vector_target(args)
        return result, []
    except OpError as e:
        span = e.at.span if e.at is not None and e.at.span.known else call.span
        return None, [Diagnostic(e.code, e.message, span, e.hint, e.rule)]


# The verifier (ptoc.ir, below ops in the package graph) finds the operator type rules here: importing
# the registry installs them. The front end, the pass manager and the driver import this module.
register_op_typer(infer_call_type)
