"""The IR: immutable nodes that compare structurally.

Every node is a frozen dataclass whose `span` field does not take part in equality, so two programs
parsed from differently formatted text compare equal exactly when they mean the same IR. Passes never
mutate a node: they build new ones (`dataclasses.replace` or a `Mutator`).

Expressions refer to values by name (`Var`). Names are unique within a function (single assignment,
checked by `ptoc.ir.verifier`), so a name identifies its definition; the verifier's environment maps
names to types.
"""

from __future__ import annotations

from dataclasses import field

from ptoc.lazy_dataclass import dataclass  # the standard one, its methods compiled on first use

from ptoc.diagnostics import Span
from ptoc.ir.dtypes import DType
from ptoc.ir.dtypes import INDEX

UNKNOWN_SPAN = Span.unknown()


def _span() -> Span:
    return field(default=UNKNOWN_SPAN, compare=False, repr=False, kw_only=True)


@dataclass(frozen=True)
class Node:
    span: Span = _span()


# --------------------------------------------------------------------------------------------------
# Types
# --------------------------------------------------------------------------------------------------


class Type(Node):
    """Base class of IR types."""


@dataclass(frozen=True)
class ScalarType(Type):
    dtype: DType


@dataclass(frozen=True)
class PtrType(Type):
    pass


@dataclass(frozen=True)
class TupleType(Type):
    types: tuple[Type, ...]


@dataclass(frozen=True)
class MemRef(Node):
    """A memory reference: a named region (`"mem_ddr_0"`) or an allocation result variable, a byte
    offset and a byte size."""

    base: Expr  # StrLit for a quoted name, Var for an allocation result
    offset: Expr
    size: Expr
    # `pl.MemRef("buf")`: an allocation the program declares by name only (its offset and size are 0
    # until memory is planned); with `slots=N` it holds N equal slots and `slot` selects one
    declared: bool = False
    slots: int = 1
    slot: Expr | None = None


@dataclass(frozen=True)
class TensorView(Node):
    """Tensor view metadata. `None` fields are absent (stride None or () means packed)."""

    valid_shape: tuple[Expr, ...] | None = None
    stride: tuple[Expr, ...] | None = None
    layout: str = "ND"  # ND | DN | NZ
    pad: str | None = None  # PadValue member

    @property
    def is_trivial(self) -> bool:
        return self.valid_shape is None and not self.stride and self.layout == "ND" and self.pad is None

    @property
    def layout_only(self) -> bool:
        return self.valid_shape is None and not self.stride and self.pad is None


@dataclass(frozen=True)
class TensorType(Type):
    shape: tuple[Expr, ...]
    dtype: DType
    view: TensorView | None = None  # None: plain ND, packed, fully valid
    memref: MemRef | None = None

    @property
    def layout(self) -> str:
        return self.view.layout if self.view is not None else "ND"

    @property
    def rank(self) -> int:
        return len(self.shape)


@dataclass(frozen=True)
class DistributedTensorType(TensorType):
    """`pld.DistributedTensor[[shape], dtype]`: a tensor that lives in a per-rank communication window
    (made by `pld.tensor.window` over a `pld.tensor.alloc_window_buffer`). It is a tensor wherever a
    tensor is expected; the distributed ops require this type for their window operands."""


@dataclass(frozen=True)
class CommCtxType(Type):
    """`pld.CommCtx`: the communication context of a distributed tensor (`pld.system.get_comm_ctx`)."""


@dataclass(frozen=True)
class ArrayType(Type):
    """`pl.Array[extent, dtype]`: a small fixed-size array of integer, BOOL or TASK_ID scalars held by
    an orchestration function (`pl.array.create`)."""

    extent: Expr
    dtype: DType


# Ops of the distributed namespace (`import pypto.language.distributed as pld`) keep this prefix in
# their IR name, as in PyPTO (`pld.tensor.window`); the printer writes them under it.
DISTRIBUTED_PREFIX = "pld."


TILE_VIEW_FIELDS = ("valid_shape", "stride", "start_offset", "blayout", "slayout", "fractal", "pad", "compact")


@dataclass(frozen=True)
class TileView(Node):
    """Tile view metadata. A `None` field takes the implicit value of the tile's memory space
    (see `ptoc.ir.types.implicit_tile_view`); the front end drops fields equal to it."""

    valid_shape: tuple[Expr, ...] | None = None
    stride: tuple[Expr, ...] | None = None
    start_offset: Expr | None = None
    blayout: str | None = None  # TileLayout member
    slayout: str | None = None
    fractal: int | None = None
    pad: str | None = None  # PadValue member
    compact: str | None = None  # CompactMode member

    @property
    def is_empty(self) -> bool:
        return all(getattr(self, f) is None for f in TILE_VIEW_FIELDS)


@dataclass(frozen=True)
class TileType(Type):
    shape: tuple[Expr, ...]
    dtype: DType
    memref: MemRef | None = None
    memory: str | None = None  # Mem member: Vec, Mat, Left, Right, Acc, Bias, ...
    view: TileView | None = None

    @property
    def rank(self) -> int:
        return len(self.shape)


# --------------------------------------------------------------------------------------------------
# Expressions
# --------------------------------------------------------------------------------------------------


class Expr(Node):
    """Base class of expressions."""


@dataclass(frozen=True)
class Var(Expr):
    name: str


@dataclass(frozen=True)
class ConstInt(Expr):
    value: int
    dtype: DType


@dataclass(frozen=True)
class ConstFloat(Expr):
    value: float
    dtype: DType


@dataclass(frozen=True)
class ConstBool(Expr):
    value: bool


@dataclass(frozen=True)
class StrLit(Expr):
    value: str


@dataclass(frozen=True)
class NoneLit(Expr):
    pass


@dataclass(frozen=True)
class DTypeLit(Expr):
    """A dtype used as a value, e.g. `dtype=pl.FP32`."""

    dtype: DType


@dataclass(frozen=True)
class EnumLit(Expr):
    """An enum member used as a value, e.g. `pl.Mem.Vec` (family "Mem", member "Vec")."""

    family: str
    member: str


@dataclass(frozen=True)
class TypeLit(Expr):
    """A type used as a value (rare: e.g. a type argument of a call)."""

    type: Type


BINARY_OPS = ("+", "-", "*", "/", "//", "%", "**", "<<", ">>", "&", "|", "^",
              "==", "!=", "<", "<=", ">", ">=", "and", "or")
COMPARE_OPS = ("==", "!=", "<", "<=", ">", ">=")
UNARY_OPS = ("-", "~", "not")


@dataclass(frozen=True)
class BinOp(Expr):
    op: str
    lhs: Expr
    rhs: Expr


@dataclass(frozen=True)
class UnaryOp(Expr):
    op: str
    operand: Expr


@dataclass(frozen=True)
class MinMax(Expr):
    """`pl.min(a, b)` / `pl.max(a, b)` on scalars."""

    op: str  # "min" | "max"
    lhs: Expr
    rhs: Expr


@dataclass(frozen=True)
class Abs(Expr):
    operand: Expr


@dataclass(frozen=True)
class Cast(Expr):
    """`pl.cast(x, pl.INT32)` of a scalar."""

    operand: Expr
    dtype: DType


@dataclass(frozen=True)
class Call(Expr):
    """A call. `kind` "op": an operator `pl.<op>` (op "tile.load", "load", "system.bar_v", ...);
    kind "func": a function of the program (`self.<op>(...)`)."""

    op: str
    args: tuple[Expr, ...] = ()
    kwargs: tuple[tuple[str, Expr], ...] = ()
    kind: str = "op"

    def kwarg(self, name: str) -> Expr | None:
        for k, v in self.kwargs:
            if k == name:
                return v
        return None


@dataclass(frozen=True)
class ListExpr(Expr):
    items: tuple[Expr, ...]


@dataclass(frozen=True)
class TupleExpr(Expr):
    items: tuple[Expr, ...]


@dataclass(frozen=True)
class DictExpr(Expr):
    items: tuple[tuple[Expr, Expr], ...]


@dataclass(frozen=True)
class GetItem(Expr):
    """`t[0]`: an element of a tuple value."""

    value: Expr
    index: Expr


# --------------------------------------------------------------------------------------------------
# Statements
# --------------------------------------------------------------------------------------------------


class Stmt(Node):
    """Base class of statements."""


@dataclass(frozen=True)
class AssignStmt(Stmt):
    target: Var
    value: Expr
    annotation: Type | None = None  # what the text wrote (the printer's default form has one)


@dataclass(frozen=True)
class YieldStmt(Stmt):
    """`r: T = pl.yield_(v)` or `a, b = pl.yield_(u, v)`: ends a loop body or an if branch.
    The targets become the results of the enclosing loop or if."""

    targets: tuple[Var, ...]
    values: tuple[Expr, ...]
    annotation: Type | None = None  # only with a single target


@dataclass(frozen=True)
class EvalStmt(Stmt):
    expr: Expr


@dataclass(frozen=True)
class ReturnStmt(Stmt):
    values: tuple[Expr, ...] = ()


@dataclass(frozen=True)
class PassStmt(Stmt):
    pass


@dataclass(frozen=True)
class BreakStmt(Stmt):
    """`break` as written; CtrlFlowTransform lowers it to a flag and a `while` condition."""


@dataclass(frozen=True)
class ContinueStmt(Stmt):
    """`continue` as written; CtrlFlowTransform lowers it to an `if`/`else` around the rest of the body."""


LOOP_KINDS = ("range", "parallel", "unroll", "pipeline", "spmd", "split_aiv")


@dataclass(frozen=True)
class ForStmt(Stmt):
    """`for var[, (iter_args...)] in pl.<kind>(args..., kwargs..., init_values=(...)):`."""

    kind: str
    var: Var
    args: tuple[Expr, ...]
    body: tuple[Stmt, ...]
    iter_args: tuple[Var, ...] = ()
    init_values: tuple[Expr, ...] = ()
    kwargs: tuple[tuple[str, Expr], ...] = ()

    @property
    def results(self) -> tuple[Var, ...]:
        return loop_results(self.body)

    @property
    def start(self) -> Expr:
        return self.args[0] if len(self.args) >= 2 else ConstInt(0, _index())

    @property
    def stop(self) -> Expr:
        return self.args[1] if len(self.args) >= 2 else self.args[0]

    @property
    def step(self) -> Expr:
        return self.args[2] if len(self.args) >= 3 else ConstInt(1, _index())


@dataclass(frozen=True)
class WhileStmt(Stmt):
    """`for (x,) in pl.while_(init_values=(x0,)):` whose first statement is `pl.cond(expr)`."""

    iter_args: tuple[Var, ...]
    init_values: tuple[Expr, ...]
    cond: Expr
    body: tuple[Stmt, ...]
    kwargs: tuple[tuple[str, Expr], ...] = ()

    @property
    def results(self) -> tuple[Var, ...]:
        return loop_results(self.body)


@dataclass(frozen=True)
class IfStmt(Stmt):
    cond: Expr
    then_body: tuple[Stmt, ...]
    else_body: tuple[Stmt, ...] = ()

    @property
    def results(self) -> tuple[Var, ...]:
        return loop_results(self.then_body)


@dataclass(frozen=True)
class ScopeStmt(Stmt):
    """`with pl.<kind>(args...) [as var]:` (at, spmd, cluster, scope, ...)."""

    kind: str
    args: tuple[Expr, ...]
    body: tuple[Stmt, ...]
    kwargs: tuple[tuple[str, Expr], ...] = ()
    var: Var | None = None


def loop_results(body: tuple[Stmt, ...]) -> tuple[Var, ...]:
    """The names bound by the last `pl.yield_` of a body: the results of its loop or branch."""
    if body and isinstance(body[-1], YieldStmt):
        return body[-1].targets
    return ()


def _index() -> DType:

    return INDEX


# --------------------------------------------------------------------------------------------------
# Functions and programs
# --------------------------------------------------------------------------------------------------

FUNCTION_TYPES = ("Opaque", "Orchestration", "InCore", "AIC", "AIV", "Group", "Spmd", "Inline")
# the functions that run on a core (the .pto emits them); the others run on the host or are inlined
KERNEL_TYPES = ("InCore", "AIC", "AIV")
DIRECTIONS = ("In", "Out", "InOut")


@dataclass(frozen=True)
class Param(Node):
    name: str
    type: Type
    direction: str = "In"


@dataclass(frozen=True)
class Function(Node):
    name: str
    params: tuple[Param, ...]
    returns: tuple[Type, ...]
    body: tuple[Stmt, ...]
    func_type: str = "Opaque"
    decorator_kwargs: tuple[tuple[str, Expr], ...] = ()  # level=, role=, ... (type excluded)
    has_self: bool = True
    returns_tuple: bool = False  # `-> tuple[T1, T2]` (also for a single type written that way)
    attrs: tuple[tuple[Expr, Expr], ...] | None = None  # pl.func_attr({...}) as first statement

    def param(self, name: str) -> Param | None:
        for p in self.params:
            if p.name == name:
                return p
        return None

    def has_attr(self, key: str) -> bool:
        return self.attr(key) is not None

    def attr_items(self) -> tuple[tuple[Expr, Expr], ...]:
        """The function's attributes, wherever the text put them: the decorator's `attrs={...}` and the
        `pl.func_attr({...})` prologue (PyPTO's printed form) - one key once, the prologue's value last."""
        items: dict = {}
        for k, v in self.decorator_kwargs:
            if k == "attrs" and isinstance(v, DictExpr):
                for a, b in v.items:
                    items[a.value if isinstance(a, StrLit) else id(a)] = (a, b)
        for a, b in self.attrs or ():
            items[a.value if isinstance(a, StrLit) else id(a)] = (a, b)
        return tuple(items.values())

    def attr(self, key: str) -> Expr | None:
        """The value of attribute `key` (`attr_items`), or None."""
        return next((v for k, v in self.attr_items() if isinstance(k, StrLit) and k.value == key), None)

    def with_attr_items(self, items: tuple[tuple[Expr, Expr], ...]) -> Function:
        """This function with exactly `items` as its attributes, in the decorator's `attrs={...}` (none when
        empty); the prologue is dropped."""
        from dataclasses import replace

        old = next((v for k, v in self.decorator_kwargs if k == "attrs" and isinstance(v, DictExpr)), None)
        kw = [(k, v) for k, v in self.decorator_kwargs if not (k == "attrs" and isinstance(v, DictExpr))]
        if items:
            kw.append(("attrs", DictExpr(tuple(items), span=old.span if old is not None else self.span)))
        return replace(self, decorator_kwargs=tuple(kw), attrs=None)


@dataclass(frozen=True)
class DynDim(Node):
    """`M = pl.dynamic("M")` at module level."""

    name: str
    label: str


@dataclass(frozen=True)
class Program(Node):
    name: str | None
    functions: tuple[Function, ...]
    dynamic_dims: tuple[DynDim, ...] = ()
    bare_function: bool = False  # the file holds one bare @pl.function, no class

    def function(self, name: str) -> Function | None:
        """The first function named `name`, or None. The name table is built on the first question and
        kept beside the fields (no field: it takes no part in comparing, printing or `replace`), tied to
        the `functions` tuple it was built from, so it cannot answer for other functions."""
        table = self.__dict__.get("_by_name")
        if table is None or table[0] is not self.functions:
            names: dict[str, Function] = {}
            for f in self.functions:
                names.setdefault(f.name, f)
            table = (self.functions, names)
            object.__setattr__(self, "_by_name", table)
        return table[1].get(name)
