"""GM views of a lowered kernel, shared by the .pto emitter and the GlobalTensor header.

Both must agree exactly on what every tensor parameter looks like (shape, strides, layout) and on the
window every tile.load / tile.store addresses (offsets, sizes), so they are computed here once.

Rules (pto-format.md):
- a tensor view is the kernel parameter's type: shape, explicit strides (MaterializeTensorStrides),
  layout; an ND `[M, 1]` tensor is emitted as DN with strides `[1, M]`;
- a load's partition sizes are its valid_shapes when given, else its shapes;
- a store's partition sizes are its explicit partition-shape operand when given (rank > 2 stores,
  NZ Acc write-back), else the stored tile's valid shape, left-padded with 1s to the tensor's rank
  (a 2-D tile stored into a rank-3 tensor writes one batch slice), or without its leading 1 for a
  rank-1 tensor (FlattenTileNdTo2D's [1, N] form of a rank-1 tile; PyPTO's store keeps no shapes= there);
- a store written as a bare statement (its result unused) is a window too; its partition is named
  after the tensor it writes;
- loop-carried and yielded tensors are aliases of the parameter they started from.
"""

from __future__ import annotations

from ptoc.lazy_dataclass import dataclass  # (the standard one, its methods compiled on first use)

from ptoc.ir.names import fresh_name
from ptoc.diagnostics import InternalError
from ptoc.ir.dtypes import DType
from ptoc.ir.nodes import (
    AssignStmt,
    Call,
    ConstInt,
    EvalStmt,
    Expr,
    ForStmt,
    Function,
    IfStmt,
    ListExpr,
    ScopeStmt,
    Stmt,
    TensorType,
    TileType,
    TupleExpr,
    Var,
    WhileStmt,
    YieldStmt,
)


@dataclass(frozen=True)
class TensorViewInfo:
    param: str
    index: int  # position among the kernel's tensor parameters (%argN)
    dtype: DType
    shape: tuple[Expr, ...]
    strides: tuple[Expr, ...]
    layout: str  # "ND" | "DN" | "NZ"


@dataclass(frozen=True)
class PartitionInfo:
    name: str  # unique: "<var>_pview"
    kind: str  # "load" | "store"
    tensor: str  # the root tensor parameter
    offsets: tuple[Expr, ...]
    sizes: tuple[Expr, ...]
    call: Call
    target: str  # the tile (load) or the store's result name ("" for a store whose result is unused)


def _const(v: int) -> ConstInt:
    from ptoc.ir import dtypes

    return ConstInt(v, dtypes.INDEX)


def tensor_views(fn: Function) -> list[TensorViewInfo]:
    out: list[TensorViewInfo] = []
    for p in fn.params:
        t = p.type
        if not isinstance(t, TensorType):
            continue
        strides = t.view.stride if t.view is not None and t.view.stride else None
        if strides is None:
            raise InternalError(f"{fn.name}: tensor parameter {p.name} reached codegen without strides")
        layout = t.layout
        shape = t.shape
        if layout == "ND" and len(shape) == 2 and isinstance(shape[1], ConstInt) and shape[1].value == 1 \
                and not (isinstance(shape[0], ConstInt) and shape[0].value == 1):
            layout, strides = "DN", (_const(1), shape[0])
        out.append(TensorViewInfo(p.name, len(out), t.dtype, shape, tuple(strides), layout))
    return out


def _items(e: Expr) -> tuple[Expr, ...]:
    if isinstance(e, (ListExpr, TupleExpr)):
        return e.items
    raise InternalError("codegen expected a list of offsets or sizes")


class _Collector:
    def __init__(self, fn: Function, types: dict):
        self.root: dict[str, str] = {p.name: p.name for p in fn.params if isinstance(p.type, TensorType)}
        self.types = types
        self.out: list[PartitionInfo] = []
        self.used: set[str] = set()

    def name(self, base: str) -> str:
        return fresh_name(f"{base}_pview", self.used)

    def alias(self, dst: str, src: Expr) -> None:
        if isinstance(src, Var) and src.name in self.root:
            self.root[dst] = self.root[src.name]

    def body(self, stmts: tuple[Stmt, ...]) -> None:
        for s in stmts:
            self.stmt(s)

    def stmt(self, s: Stmt) -> None:
        if isinstance(s, AssignStmt):
            v = s.value
            if isinstance(v, Call) and v.kind == "op" and v.op == "tile.load":
                src = v.args[0]
                root = self.root.get(src.name) if isinstance(src, Var) else None
                if root is None:
                    raise InternalError(f"tile.load of {src} whose tensor is not a kernel parameter")
                sizes = _items(v.args[3]) if len(v.args) > 3 else (
                    _items(v.kwarg("valid_shapes")) if v.kwarg("valid_shapes") is not None else _items(v.args[2]))
                self.out.append(PartitionInfo(self.name(s.target.name), "load", root, _items(v.args[1]), sizes, v,
                                              s.target.name))
            elif isinstance(v, Call) and v.kind == "op" and v.op == "tile.store":
                root = self.store(v, s.target.name)
                self.root[s.target.name] = root
            else:
                self.alias(s.target.name, v)
        elif isinstance(s, EvalStmt):
            v = s.expr
            if isinstance(v, Call) and v.kind == "op" and v.op == "tile.store":
                self.store(v, "")
        elif isinstance(s, ForStmt):
            for a, init in zip(s.iter_args, s.init_values):
                self.alias(a.name, init)
            self.body(s.body)
            self._results(s.results, s.body, s.iter_args)
        elif isinstance(s, WhileStmt):
            for a, init in zip(s.iter_args, s.init_values):
                self.alias(a.name, init)
            self.body(s.body)
            self._results(s.results, s.body, s.iter_args)
        elif isinstance(s, IfStmt):
            self.body(s.then_body)
            self.body(s.else_body)
            if s.then_body and isinstance(s.then_body[-1], YieldStmt):
                for t, v in zip(s.then_body[-1].targets, s.then_body[-1].values):
                    self.alias(t.name, v)
        elif isinstance(s, ScopeStmt):
            self.body(s.body)

    def store(self, v: Call, target: str) -> str:
        dst = v.args[2]
        root = self.root.get(dst.name) if isinstance(dst, Var) else None
        if root is None:
            raise InternalError(f"tile.store into {dst} which is not a kernel parameter")
        offsets = _items(v.args[1])
        if len(v.args) > 3:
            sizes = tuple(_items(v.args[3]))
        else:
            tile = self.types.get(v.args[0].name) if isinstance(v.args[0], Var) else None
            if not isinstance(tile, TileType):
                raise InternalError("tile.store of a value whose tile type is unknown")
            sizes = tuple(tile.view.valid_shape if tile.view is not None and tile.view.valid_shape else tile.shape)
            if len(sizes) < len(offsets):
                sizes = (_const(1),) * (len(offsets) - len(sizes)) + sizes
            # A rank-1 tensor's tiles are [1, n] after FlattenTileNdTo2D: the window is the n elements.
            while len(sizes) > len(offsets) and isinstance(sizes[0], ConstInt) and sizes[0].value == 1:
                sizes = sizes[1:]
        self.out.append(PartitionInfo(self.name(target or root), "store", root, offsets, sizes, v, target))
        return root

    def _results(self, results, body, iter_args) -> None:
        y = body[-1] if body and isinstance(body[-1], YieldStmt) else None
        for i, r in enumerate(results):
            if y is not None and i < len(y.values):
                self.alias(r.name, y.values[i])
            if r.name not in self.root and i < len(iter_args):
                self.alias(r.name, iter_args[i])


def views_of(fn: Function, types: dict, memo: dict | None = None) -> tuple[list[TensorViewInfo], list[PartitionInfo]]:
    """`(tensor_views(fn), partitions(fn, types))`, worked out once per function for the emitters of one
    compile that share `memo` (the `.pto` writer and the header read the same views; the lists are not
    to be changed)."""
    if memo is None:
        return tensor_views(fn), partitions(fn, types)
    hit = memo.get(id(fn))
    if hit is None or hit[0] is not fn or hit[1] is not types:
        hit = memo[id(fn)] = (fn, types, tensor_views(fn), partitions(fn, types))
    return hit[2], hit[3]


def partitions(fn: Function, types: dict) -> list[PartitionInfo]:
    """Every load/store window of `fn`, in statement order. `types`: value name -> type."""
    c = _Collector(fn, types)
    c.body(fn.body)
    return c.out
