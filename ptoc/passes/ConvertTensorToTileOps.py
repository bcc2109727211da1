"""ConvertTensorToTileOps: kernels compute on tiles.

Purpose
-------
A kernel (an InCore, AIC or AIV function) written with `pl.tensor.*` ops describes whole-tensor math
on global memory. The cube and vector units compute on tiles in on-chip memory, so this pass rewrites
every tensor op of a kernel into its `pl.tile.*` twin, loads the tensors the ops read, and stores the
kernel's computed results back to global memory through `pl.Out` parameters.

Before::

    @pl.function(type=pl.FunctionType.InCore)
    def vadd(self, a: pl.Tensor[[64, 128], pl.FP32], b: pl.Tensor[[64, 128], pl.FP32],
             out: pl.Out[pl.Tensor[[64, 128], pl.FP32]]) -> pl.Tensor[[64, 128], pl.FP32]:
        c: pl.Tensor[[64, 128], pl.FP32] = pl.tensor.add(a, b)
        return c

After::

    def vadd(self, a: ..., b: ..., out: pl.Out[pl.Tensor[[64, 128], pl.FP32]]) -> pl.Tensor[[64, 128], pl.FP32]:
        a_tile: pl.Tile[[64, 128], pl.FP32, pl.Mem.Vec] = pl.tile.load(a, [0, 0], [64, 128], target_memory=pl.Mem.Vec)
        b_tile: pl.Tile[[64, 128], pl.FP32, pl.Mem.Vec] = pl.tile.load(b, [0, 0], [64, 128], target_memory=pl.Mem.Vec)
        c: pl.Tile[[64, 128], pl.FP32, pl.Mem.Vec] = pl.tile.add(a_tile, b_tile)
        c_store: pl.Tensor[[64, 128], pl.FP32] = pl.tile.store(c, [0, 0], out)
        return c_store

Rules
-----
- Ops. `pl.tensor.<op>` becomes `pl.tile.<op>` when the registry has that twin with the same
  positional parameters (the tile twin may add a `tmp` scratch operand). Short names (`pl.add`, ...)
  are resolved by their argument types first. Special forms:
  - a scalar right operand of add/sub/mul/div/maximum/minimum selects the `*s` op (OP-1):
    `tensor.maximum(t, 0.0)` -> `tile.maximums`;
  - a tile twin with a `tmp` parameter the tensor op lacks (`tile.xor`, `tile.xors`, `tile.row_sum`, ...)
    gets a fresh `tile.create` of its first operand's shape and dtype (positional when the twin requires
    it, `tmp=` when it is optional);
  - `tensor.create` / `tensor.full` -> `tile.create` / `tile.full` in Vec (ND layout only);
  - `tensor.dim` (a shape query on a global tensor) stays as it is;
  - `tensor.read` / `tensor.write` of one element: on a value computed on tiles, or a parameter the kernel
    loads for another op anyway, `tile.read` / `tile.write` of that tile; on a global tensor nothing else
    loads, it stays the element access of global memory (as PyPTO; codegen reports PTOC-E0400 for it);
  - `tensor.slice(t, shape, offset)` of a global tensor becomes `tile.load(t, offset, shape)` of that
    window (one load per memory space its consumers need);
  - `tensor.matmul(a, b)` -> `tile.matmul` of Mat tiles into Acc (`tile.batch_matmul` when an operand
    has rank > 2); a tensor operand is loaded into Mat right before the product, once per product (as
    PyPTO does; a product reusing an operand loads it again). `a_trans=True` / `b_trans=True`: the
    operand's natural Mat tile is read through `tile.transpose_view` (no data moves). `tensor.matmul_acc(acc,
    a, b)` -> `tile.matmul_acc` (`tile.batch_matmul_acc`) on the Acc accumulator. The operands stay in
    Mat: InferTileMemorySpace moves them into Left / Right, and the hardware rules of those buffers are
    checked there;
  - `tensor.mrgsort_format2` gets its scratch tile (`tmp=`, the merged shape) as PyPTO synthesises it;
    `tensor.ci` keeps no scratch tile and its start takes the sequence's dtype;
  - `tensor.gather(src, dim=-1, index=idx)` of rank-2 operands (INT32 indices): on a target whose tgather
    takes a whole tile (A5), one `tile.gather` with flat indices idx + row * src_cols (row offsets from
    `tile.ci`, by `tile.divs` when the index rows are 32-byte aligned, else `tile.row_expand_add`; a
    source computed in the kernel is copied into a contiguous tile first); elsewhere a loop gathering
    one row at a time and assembling the rows (PyPTO's two lowerings);
  - `tensor.expand_clone(src, dst)` of rank-3 tensors writes dst: one store, a loop of stores along axis
    0, a loop of per-row `tile.col_expand`s (axis 1) or one `tile.row_expand` (axis 2);
  - distributed transfers: `pld.tensor.put` / `pld.tensor.get` -> a Vec staging `tile.create` of the
    transfer flattened to [rows, cols] (capped by chunk_rows / chunk_cols; two, ping and pong, with
    `pipeline=True`) and `pld.tile.put` / `pld.tile.get` through it; `pld.tensor.remote_store(src, ...)`
    -> `pld.tile.remote_store` of `src` as a Vec tile.
- Loads. Every tensor parameter a (non-matmul) op reads gets one entry `tile.load` of the whole tensor at
  the top of the kernel (offsets 0, shapes = the tensor's shape, `valid_shapes` = the view's valid_shape when it has
  one), in Vec. The source of a `tensor.assemble` is loaded right before the assemble instead, once per
  assemble (PyPTO's self-loading ops).
  A global tensor computed inside the kernel (e.g. a `tile.store` result) is loaded where it is read.
- Control flow. A loop-carried or branch-yielded value becomes a tile when any value flowing into it is
  computed by a tensor op; a tensor parameter flowing into it is replaced by its entry load.
- Results. Every returned value computed on tiles is written by `tile.store` (offsets 0) into an Out
  parameter: an existing `pl.Out` parameter of the same shape, dtype and layout that the kernel does not
  otherwise use, else a new Out parameter `<result>_out` appended to the signature. Each call site of a
  kernel that gained parameters passes a fresh `pl.tensor.create(shape, dtype=...)` created just before
  the call. The kernel returns the store's result; Acc results store straight from Acc (the store converts
  FP32 to the declared result dtype).
- A returned loop that only assembles pieces into a fresh `tensor.create` stores each piece into the
  Out parameter instead (the loop carries the Out tensor; the create is dropped), as PyPTO does: the
  whole result never needs an on-chip buffer. Any other use of the carried value keeps the form above.
- Directions. A tensor parameter declared `In` that the kernel writes (tile.store into it, tensor.write,
  the workspace of a soft system.syncall) becomes `Out`, or `InOut` when the kernel also reads it; a
  caller's own `In` parameter passed straight to it follows (as PyPTO). This applies to every kernel.
- Kernels without tensor ops pass through unchanged (but for the directions), so a second run changes nothing.
- Deliberate differences from PyPTO: a matmul result (Acc) read by a vector op is moved to Vec here
  (`tile.move`), where PyPTO leaves the Acc operand for a later pass; ptoc's later passes expect the move.
  A loop that assembles slices of a tensor parameter into itself keeps the assemble on a tile copy
  where PyPTO stores each slice into the parameter (making it InOut).
- User errors: a tensor op with no tile twin, or a form not handled yet (`c_matrix_nz=True` matmul,
  `tensor.alloc`, a computed value passed where a tensor is expected, ...) -> PTOC-E0300 naming the op;
  a conversion the tile op's type rule or the target rejects -> PTOC-E0301; a kernel calling a kernel that
  needs a new Out parameter -> PTOC-E0302.
"""

from __future__ import annotations

from dataclasses import replace

from ptoc.ir.names import fresh_name
from ptoc.context import CompileContext
from ptoc.diagnostics import CompileError, Diagnostic, InternalError
from ptoc.ir import dtypes
from ptoc.ir.nodes import (
    AssignStmt,
    Call,
    ConstBool,
    ConstFloat,
    ConstInt,
    DTypeLit,
    EnumLit,
    EvalStmt,
    Expr,
    ForStmt,
    Function,
    IfStmt,
    ListExpr,
    Node,
    Param,
    Program,
    ReturnStmt,
    ScalarType,
    ScopeStmt,
    Stmt,
    TensorType,
    TileType,
    Type,
    Var,
    WhileStmt,
    YieldStmt,
)
from ptoc.ir.verifier import FastMutator, NodeIndex, iter_nodes
from ptoc.passes.common import TypeEnv, expr_type, resolve_op
from ptoc.passes.manager import Pass
from ptoc.passes.properties import KERNEL_TYPES, TENSOR_QUERIES

INDEX = dtypes.INDEX
SPACES_ORDER = ("Vec", "Mat")
MATMUL_OPS = ("tensor.matmul", "tensor.matmul_acc")
# Ops that load what they read themselves (no entry load of their tensor operands), as in PyPTO.
SELF_LOADING = ("tensor.slice", "tensor.assemble", "tensor.read", "tensor.write")
# Distributed transfers a kernel writes with tensors: their tile forms stage through Vec tiles.
PLD_OPS = ("pld.tensor.put", "pld.tensor.get", "pld.tensor.remote_store")


def _c(v: int) -> ConstInt:
    return ConstInt(v, INDEX)


def _mem(space: str) -> EnumLit:
    return EnumLit("Mem", space)


def _error(code: str, message: str, at: Node | None, hint: str | None = None, rule: str | None = None):
    span = at.span if at is not None else None
    return CompileError([Diagnostic(code, message, span, hint, rule)])


def tensor_op_name(call: Call, env: TypeEnv) -> str | None:
    """`tensor.<op>` when the call is a tensor op to convert (by full or short name), else None.
    Shape queries (`tensor.dim`) compute nothing and stay."""
    if call.kind != "op":
        return None
    op = resolve_op(call, env)
    name = op.name if op is not None else call.op
    if name in PLD_OPS:
        return name
    return name if name.startswith("tensor.") and name not in TENSOR_QUERIES else None


class _Overlay:
    """Name -> type lookup: converted tile types first, then the original types (no copying)."""

    __slots__ = ("base", "top")

    def __init__(self, top: dict, base: dict):
        self.top, self.base = top, base

    def get(self, name: str, default=None):
        t = self.top.get(name)
        return t if t is not None else self.base.get(name, default)


class _Classes:
    """Union-find over value names: values that flow into each other through loops, branches and
    aliases share one class; a class is a tile class when any member is computed on tiles."""

    def __init__(self):
        self.parent: dict[str, str] = {}
        self.tile: set[str] = set()

    def find(self, x: str) -> str:
        p = self.parent.setdefault(x, x)
        while p != x:
            gp = self.parent.setdefault(p, p)
            self.parent[x] = gp
            x, p = p, gp
        return x

    def union(self, a: str, b: str) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra == rb:
            return
        self.parent[ra] = rb
        if ra in self.tile:
            self.tile.add(rb)

    def mark(self, x: str) -> None:
        self.tile.add(self.find(x))

    def is_tile(self, x: str) -> bool:
        return self.find(x) in self.tile


class _Kernel:
    """Converts one kernel. `types`: the verifier's name -> type map of the original function."""

    def __init__(self, f: Function, types: dict[str, Type | None], ctx: CompileContext, program: Program):
        self.f = f
        self.types = types
        self.ctx = ctx
        self.params = {p.name: p for p in f.params}
        self.names: set[str] = {p.name for p in f.params} | {d.name for d in program.dynamic_dims}
        for n in iter_nodes(f):
            if isinstance(n, Var):
                self.names.add(n.name)
        self.used_in_body = {n.name for s in f.body for n in iter_nodes(s) if isinstance(n, Var)}
        self.classes = _Classes()
        self.carried: set[str] = set()  # iter_args, loop/if results, alias targets: kind from their class
        self.demand: dict[str, set[str]] = {}  # slice result -> memory spaces its consumers need
        self.ttypes: dict[str, TileType] = {}  # name -> tile type after conversion
        self.converted: set[str] = set()  # names that were tensors and are tiles now
        self.spaces: dict[str, dict[str, str]] = {}  # slice result -> {space: loaded name}
        self.entry: dict[tuple[str, str], AssignStmt] = {}  # (param, space) -> entry load
        self.acc_dtype: dict[str, dtypes.DType] = {}  # matmul results: the dtype the tensor op promised
        self.new_params: list[Param] = []
        self.entry_read: set[str] = set()  # tensors some op other than the self-loading ones reads
        self.out_for_position: dict[int, Param] = {}
        self.taken_outs: set[str] = set()
        self.moves: list[dict[tuple[str, str], str]] = []  # per open block: (tile, space) -> moved tile

    # ------------------------------------------------------------------ helpers
    def fresh(self, base: str) -> str:
        return fresh_name(base, self.names)

    def env(self) -> _Overlay:
        return _Overlay(self.ttypes, self.types)

    def infer(self, call: Call, at: Node, what: str) -> Type | None:
        from ptoc.ops.registry import infer_call_type

        env = self.env()
        arg_types = [expr_type(a, env) for a in call.args]
        kw_types = {k: expr_type(v, env) for k, v in call.kwargs}
        t, diags = infer_call_type(call, arg_types, kw_types, self.ctx)
        if diags:
            d = diags[0]
            raise _error("PTOC-E0301", f"{what} cannot become pl.{call.op} in a kernel: {d.message}", at,
                         hint=d.hint, rule=d.rule)
        return t

    def retyped(self, name: str) -> None:
        """`name` was a tensor and is a tile now: statements kept as they are must not read it."""
        if not isinstance(self.orig(name), TileType):
            self.converted.add(name)

    def orig(self, name: str) -> Type | None:
        return self.types.get(name)

    def kind(self, name: str) -> str:
        if name in self.ttypes or isinstance(self.orig(name), TileType):
            return "tile"
        if isinstance(self.orig(name), TensorType):
            return "gm"
        return "other"

    def emit(self, out: list[Stmt], name: str, call: Call, at: Node, what: str) -> Var:
        t = self.infer(call, at, what)
        out.append(AssignStmt(Var(name, span=at.span), call, t, span=at.span))
        if isinstance(t, TileType):
            self.ttypes[name] = t
        return Var(name, span=at.span)

    # ------------------------------------------------------------------ analysis
    def analyze(self, body: tuple[Stmt, ...]) -> None:
        for s in body:
            handler = getattr(self, "analyze_" + type(s).__name__, None)
            if handler is not None:
                handler(s)
        for name, into in self.flows:
            if self.classes.is_tile(into):
                self.demand.setdefault(name, set()).add("Vec")

    def analyze_AssignStmt(self, s: AssignStmt) -> None:
        env = self.types
        if isinstance(s.value, Call):
            self.note_calls(s.value)
            top = tensor_op_name(s.value, env)
            if top is not None and isinstance(self.orig(s.target.name), TensorType):
                self.classes.mark(s.target.name)
        elif isinstance(s.value, Var):
            self.carried.add(s.target.name)
            self.classes.union(s.target.name, s.value.name)
            self.note_flow(s.value.name, s.target.name)
        if isinstance(self.orig(s.target.name), TileType):
            self.classes.mark(s.target.name)

    def analyze_EvalStmt(self, s: EvalStmt) -> None:
        for n in iter_nodes(s.expr):
            if isinstance(n, Call):
                self.note_calls(n)

    def analyze_ForStmt(self, s: ForStmt | WhileStmt) -> None:
        for a, v in zip(s.iter_args, s.init_values):
            self.carried.add(a.name)
            if isinstance(v, Var):
                self.classes.union(a.name, v.name)
                self.note_flow(v.name, a.name)
        if s.body and isinstance(s.body[-1], YieldStmt):
            y = s.body[-1]
            for a, v in zip(s.iter_args, y.values):
                if isinstance(v, Var):
                    self.classes.union(a.name, v.name)
                    self.note_flow(v.name, a.name)
            for a, r in zip(s.iter_args, y.targets):
                self.carried.add(r.name)
                self.classes.union(a.name, r.name)
        self.analyze(s.body)

    analyze_WhileStmt = analyze_ForStmt

    def analyze_IfStmt(self, s: IfStmt) -> None:
        for branch in (s.then_body, s.else_body):
            if branch and isinstance(branch[-1], YieldStmt):
                for r, v in zip(branch[-1].targets, branch[-1].values):
                    self.carried.add(r.name)
                    if isinstance(v, Var):
                        self.classes.union(r.name, v.name)
                        self.note_flow(v.name, r.name)
            self.analyze(branch)

    def analyze_ScopeStmt(self, s: ScopeStmt) -> None:
        self.analyze(s.body)

    def analyze_ReturnStmt(self, s: ReturnStmt) -> None:
        for v in s.values:
            if isinstance(v, Var):
                self.demand.setdefault(v.name, set()).add("Vec")

    flows: list[tuple[str, str]]

    def note_flow(self, value: str, into: str) -> None:
        self.flows.append((value, into))

    def note_calls(self, call: Call) -> None:
        top = tensor_op_name(call, self.types)
        if top is None:
            return
        if top not in SELF_LOADING:
            self.entry_read.update(a.name for a in call.args if isinstance(a, Var))
        for i, a in enumerate(call.args):
            if isinstance(a, Call):
                self.note_calls(a)
            elif isinstance(a, Var):
                space = "Mat" if top in MATMUL_OPS and (top, i) in (("tensor.matmul", 0), ("tensor.matmul", 1),
                                                                   ("tensor.matmul_acc", 1),
                                                                   ("tensor.matmul_acc", 2)) else "Vec"
                self.demand.setdefault(a.name, set()).add(space)
        for k, v in call.kwargs:
            if isinstance(v, Var):
                space = "Mat" if top in MATMUL_OPS and k in ("lhs", "rhs") else "Vec"
                self.demand.setdefault(v.name, set()).add(space)

    # ------------------------------------------------------------------ driving
    def run(self) -> Function:
        self.flows = []
        self.analyze(self.f.body)
        body = self.block(self.f.body)
        loads = [self.entry[k] for p in self.f.params for sp in SPACES_ORDER
                 for k in [(p.name, sp)] if k in self.entry]
        return replace(self.f, params=self.f.params + tuple(self.new_params), body=tuple(loads) + body)

    def block(self, body: tuple[Stmt, ...]) -> tuple[Stmt, ...]:
        out: list[Stmt] = []
        self.moves.append({})
        for s in body:
            self.stmt(s, out)
        self.moves.pop()
        return tuple(out)

    def move(self, v: Var, space: str, base: str, at: Node, out: list[Stmt], what: str) -> Var:
        """`tile.move(v, target_memory=space)`, reusing a move of `v` already visible here."""
        key = (v.name, space)
        for scope in reversed(self.moves):
            if key in scope:
                return Var(scope[key], span=v.span)
        call = Call("tile.move", (v,), (("target_memory", _mem(space)),), span=at.span)
        moved = self.emit(out, self.fresh(f"{base}_{space.lower()}"), call, at, what)
        self.moves[-1][key] = moved.name
        return moved

    def stmt(self, s: Stmt, out: list[Stmt]) -> None:
        handler = getattr(self, "stmt_" + type(s).__name__, None)
        if handler is None:
            out.append(s)
        else:
            handler(s, out)

    def stmt_AssignStmt(self, s: AssignStmt, out: list[Stmt]) -> None:
        if isinstance(s.value, Call) and tensor_op_name(s.value, self.types) is not None:
            self.convert(s.value, s.target.name, s.annotation, s, out)
            return
        if isinstance(s.value, Var) and s.target.name in self.carried and self.classes.is_tile(s.target.name):
            v = self.vec_operand(s.value, s, out)
            t = self.ttypes.get(v.name) or self.orig(v.name)
            if isinstance(t, TileType):
                self.ttypes[s.target.name] = t
                self.retyped(s.target.name)
            out.append(replace(s, value=v, annotation=t if s.annotation is not None else None))
            return
        self.check_untouched(s, s)
        out.append(s)

    def stmt_EvalStmt(self, s: EvalStmt, out: list[Stmt]) -> None:
        if isinstance(s.expr, Call) and tensor_op_name(s.expr, self.types) is not None:
            self.convert(s.expr, None, None, s, out)
            return
        self.check_untouched(s, s)
        out.append(s)

    def stmt_ForStmt(self, s: ForStmt, out: list[Stmt]) -> None:
        self.check_exprs(tuple(s.args) + tuple(v for _, v in s.kwargs), s)
        inits = self.carried_inits(s.iter_args, s.init_values, s, out)
        body = self.block(s.body)
        out.append(replace(s, init_values=inits, body=body))

    def stmt_WhileStmt(self, s: WhileStmt, out: list[Stmt]) -> None:
        inits = self.carried_inits(s.iter_args, s.init_values, s, out)
        self.check_exprs((s.cond,), s)
        body = self.block(s.body)
        out.append(replace(s, init_values=inits, body=body))

    def stmt_IfStmt(self, s: IfStmt, out: list[Stmt]) -> None:
        self.check_exprs((s.cond,), s)
        out.append(replace(s, then_body=self.block(s.then_body), else_body=self.block(s.else_body)))

    def stmt_ScopeStmt(self, s: ScopeStmt, out: list[Stmt]) -> None:
        self.check_exprs(tuple(s.args), s)
        out.append(replace(s, body=self.block(s.body)))

    def stmt_YieldStmt(self, s: YieldStmt, out: list[Stmt]) -> None:
        values = []
        for t, v in zip(s.targets, s.values):
            if self.classes.is_tile(t.name) and isinstance(v, Var):
                v = self.vec_operand(v, s, out)
                vt = self.ttypes.get(v.name) or self.orig(v.name)
                if isinstance(vt, TileType):
                    self.ttypes[t.name] = vt
                    self.retyped(t.name)
            else:
                self.check_exprs((v,), s)
            values.append(v)
        ann = s.annotation
        if ann is not None and len(s.targets) == 1 and s.targets[0].name in self.ttypes:
            ann = self.ttypes[s.targets[0].name]
        out.append(replace(s, values=tuple(values), annotation=ann))

    def stmt_ReturnStmt(self, s: ReturnStmt, out: list[Stmt]) -> None:
        values = []
        for i, v in enumerate(s.values):
            if isinstance(v, Var) and v.name in self.converted:
                v = self.store_result(i, v, s, out)
            else:
                self.check_exprs((v,), s)
            values.append(v)
        out.append(replace(s, values=tuple(values)))

    def carried_inits(self, iter_args, inits, s: Stmt, out: list[Stmt]) -> tuple[Expr, ...]:
        new = []
        for a, v in zip(iter_args, inits):
            if self.classes.is_tile(a.name) and isinstance(v, Var):
                v = self.vec_operand(v, s, out)
                vt = self.ttypes.get(v.name) or self.orig(v.name)
                if isinstance(vt, TileType):
                    self.ttypes[a.name] = vt
                    self.retyped(a.name)
            else:
                self.check_exprs((v,), s)
            new.append(v)
        return tuple(new)

    def check_untouched(self, s: Stmt, at: Node) -> None:
        """A statement kept as it is must not read a value that became a tile, nor hide a tensor op."""
        for n in iter_nodes(s):
            if isinstance(n, Call) and tensor_op_name(n, self.types) is not None:
                raise _error("PTOC-E0300", f"pl.{n.op} nested inside another expression is not supported in a "
                             "kernel yet", n, hint="bind the tensor op's result to a name first")
            if isinstance(n, Var) and n.name in self.converted:
                raise _error("PTOC-E0300", f"{n.name!r} is computed on tiles in this kernel and cannot be used "
                             "here as a tensor: not supported in a kernel yet", at,
                             hint="store it into a pl.Out parameter with pl.tile.store and use the stored tensor")

    def check_exprs(self, exprs, at: Node) -> None:
        for e in exprs:
            self.check_untouched(EvalStmt(e), at)

    # ------------------------------------------------------------------ operands
    def vec_operand(self, v: Var, at: Node, out: list[Stmt], here: bool = False) -> Var:
        """A tile holding value `v` for a vector op (loads global tensors, leaves Acc when possible);
        `here`: a parameter is loaded right here instead of at kernel entry."""
        name = v.name
        if name in self.spaces and "Vec" in self.spaces[name]:
            return Var(self.spaces[name]["Vec"], span=v.span)
        k = self.kind(name)
        if k == "tile":
            t = self.ttypes.get(name) or self.orig(name)
            if isinstance(t, TileType) and t.memory == "Acc":
                return self.acc_to_vec(v, t, at, out)
            return v
        if k == "gm":
            return self.load(v, "Vec", at, out, here=here)
        return v

    def mat_operand(self, v: Expr, at: Node, out: list[Stmt], what: str) -> Var:
        if not isinstance(v, Var):
            raise _error("PTOC-E0300", f"{what}: a matmul operand must be a named tensor", at)
        name = v.name
        if name in self.spaces and "Mat" in self.spaces[name]:
            return Var(self.spaces[name]["Mat"], span=v.span)
        k = self.kind(name)
        if k == "gm":
            return self.load(v, "Mat", at, out, here=True)
        if k == "tile":
            t = self.ttypes.get(name) or self.orig(name)
            if isinstance(t, TileType) and t.memory == "Mat":
                return v
            src = (t.memory or "Vec") if isinstance(t, TileType) else "Vec"
            from ptoc.target.arch import get_arch

            arch = get_arch(self.ctx.arch)
            if not arch.tmov.legal(src, "Mat"):
                raise _error("PTOC-E0301", f"{what}: operand {name!r} is computed in {src}; feeding it to the cube "
                             f"needs a {src}->Mat move, which {arch.title} does not have", at, rule="MOV-6",
                             hint="compute the operand in a separate kernel and pass it in as a tensor")
            return self.move(v, "Mat", name, at, out, what)
        raise _error("PTOC-E0300", f"{what}: operand {name!r} is not a tensor", at)

    def acc_to_vec(self, v: Var, t: TileType, at: Node, out: list[Stmt]) -> Var:
        from ptoc.target.arch import get_arch

        arch = get_arch(self.ctx.arch)
        promised = self.acc_dtype.get(v.name)
        if not arch.tmov.legal("Acc", "Vec"):
            raise _error("PTOC-E0301", f"the matmul result {v.name!r} is read by a vector op; that needs an "
                         f"Acc->Vec move, which {arch.title} does not have", at, rule="MOV-6",
                         hint="return the matmul result from this kernel and run the vector ops in another "
                         "kernel")
        if promised is not None and promised != t.dtype:
            raise _error("PTOC-E0300", f"a matmul result converted to {promised.name} by out_dtype and read by a "
                         "vector op is not supported in a kernel yet", at,
                         hint="drop out_dtype and cast the result with pl.cast")
        return self.move(v, "Vec", v.name, at, out, "an Acc -> Vec move")

    def load(self, v: Var, space: str, at: Node, out: list[Stmt], here: bool = False) -> Var:
        """A whole-tensor load of global tensor `v`: the entry load for a parameter, else (or with
        `here`) a load right here."""
        t = self.orig(v.name)
        if not isinstance(t, TensorType):
            raise InternalError(f"ConvertTensorToTileOps: {v.name} is not a tensor")
        suffix = "tile" if space == "Vec" else space.lower()
        args: tuple[Expr, ...] = (Var(v.name), ListExpr(tuple(_c(0) for _ in t.shape)), ListExpr(tuple(t.shape)))
        if t.view is not None and t.view.valid_shape is not None:
            args += (ListExpr(tuple(t.view.valid_shape)),)
        call = Call("tile.load", args, (("target_memory", _mem(space)),))
        if v.name in self.params and not here:
            key = (v.name, space)
            if key not in self.entry:
                p = self.params[v.name]
                tmp: list[Stmt] = []
                self.emit(tmp, self.fresh(f"{v.name}_{suffix}"), replace(call, span=p.span), p, "an entry load")
                self.entry[key] = tmp[0]  # type: ignore[assignment]
            return Var(self.entry[key].target.name, span=v.span)
        return self.emit(out, self.fresh(f"{v.name}_{suffix}"), replace(call, span=at.span), at, "a load")

    # ------------------------------------------------------------------ op conversion
    def convert(self, call: Call, target: str | None, ann: Type | None, s: Stmt, out: list[Stmt]) -> Var | None:
        from ptoc.ops.registry import lookup

        top = tensor_op_name(call, self.types)
        assert top is not None
        op = lookup(top)
        if top in PLD_OPS:
            return self.convert_transfer(top, op, call, target, s, out)
        suffix = top[len("tensor."):]
        what = f"pl.{top}"
        if target is None:
            target = self.fresh(f"{suffix.rstrip('_')}_tmp")
        # Nested tensor-op arguments: convert them first under names of their own.
        args = tuple(self.flatten_arg(a, target, s, out) for a in call.args)
        kwargs = tuple((k, self.flatten_arg(v, target, s, out)) for k, v in call.kwargs)
        call = replace(call, args=args, kwargs=kwargs)
        if suffix in ("matmul", "matmul_acc"):
            return self.convert_matmul(suffix, op, call, target, s, out)
        if suffix == "slice":
            return self.convert_slice(call, target, s, out)
        if suffix in ("read", "write"):
            return self.convert_element(suffix, call, target, ann, s, out)
        if suffix == "alloc" or op is None:
            raise _error("PTOC-E0300", f"{what} is not supported in a kernel yet", call,
                         hint="move it to the orchestration function, or write the kernel with pl.tile ops")
        if suffix in ("create", "full"):
            return self.convert_create(suffix, call, target, s, out)
        if suffix == "expand_clone":
            return self.convert_expand_clone(call, target, s, out)
        if suffix == "gather" and call.kwarg("dim") is not None:
            return self.convert_gather(op, call, target, s, out)
        return self.convert_one_to_one(op, suffix, call, target, ann, s, out, what)

    def convert_one_to_one(self, op, suffix: str, call: Call, target: str, ann: Type | None, s: Stmt,
                           out: list[Stmt], what: str) -> Var:
        """A tensor op whose tile twin takes the same parameters (plus, perhaps, a scratch tile)."""
        from ptoc.ops.elementwise import ARITH, SCALAR_FORM
        from ptoc.ops.registry import lookup


        if suffix in ARITH and len(call.args) >= 2:
            rt = expr_type(call.args[1], self.types)
            if isinstance(rt, ScalarType) or isinstance(call.args[1], (ConstInt, ConstFloat, ConstBool)):
                suffix = SCALAR_FORM[suffix]  # OP-1: a scalar rhs dispatches to the *s tile op
        twin = lookup(f"tile.{suffix}")
        if twin is None or twin.params not in (op.params, op.params + ("tmp",)):
            raise _error("PTOC-E0300", f"{what} is not supported in a kernel yet (it has no one-to-one tile form)",
                         call, hint="write this step with pl.tile ops, or move it to the orchestration function")
        # tensor.assemble loads its source where it stands (PyPTO's self-loading ops), not at kernel entry
        new_args = [self.operand_arg(a, s, out, here=(suffix == "assemble" and i == 1))
                    for i, a in enumerate(call.args)]
        new_kwargs = []
        for k, v in call.kwargs:
            if k not in twin.param_names and k != "attrs" and not twin.open_kwargs:
                raise _error("PTOC-E0300", f"{what} with {k}= is not supported in a kernel yet (pl.tile.{suffix} "
                             f"has no parameter {k!r})", v)
            new_kwargs.append((k, self.operand_arg(v, s, out)))
        if suffix == "ci" and new_args and isinstance(new_args[0], ConstInt) and isinstance(call.kwarg("dtype"),
                                                                                           DTypeLit):
            new_args[0] = ConstInt(new_args[0].value, call.kwarg("dtype").dtype)  # the start in the sequence's dtype
        elif "tmp" in twin.param_names and "tmp" not in op.param_names and all(k != "tmp" for k, _ in new_kwargs):
            tmp = self.scratch(new_args, call, target, s, out, what)
            if "tmp" in twin.params:
                new_args.append(tmp)
            else:
                new_kwargs.append(("tmp", tmp))
        if suffix == "mrgsort_format2" and all(k != "tmp" for k, _ in new_kwargs):
            new_kwargs.append(("tmp", self.merge_scratch(new_args, call, target, s, out, what)))
        new = Call(f"tile.{suffix}", tuple(new_args), tuple(new_kwargs), span=call.span)
        return self.finish(new, target, ann, s, out, what)

    def merge_scratch(self, new_args: list, call: Call, target: str, s: Stmt, out: list[Stmt], what: str) -> Var:
        """The scratch tile of a format-2 merge sort: the merged shape (the sources' last axes added up)."""
        from ptoc.ir.nodes import BinOp

        ts = [self.ttypes.get(a.name) for a in new_args if isinstance(a, Var)]
        if not ts or any(t is None for t in ts):
            raise _error("PTOC-E0300", f"{what} without tile operands is not supported in a kernel yet", call)
        lasts = [t.shape[-1] for t in ts]
        if all(isinstance(d, ConstInt) for d in lasts):
            last: Expr = _c(sum(d.value for d in lasts))
        else:
            last = lasts[0]
            for d in lasts[1:]:
                last = BinOp("+", last, d)
        shape = tuple(ts[0].shape[:-1]) + (last,)
        return self.emit(out, self.fresh(f"{target}_tmp"),
                         Call("tile.create", (ListExpr(shape),),
                              (("dtype", DTypeLit(ts[0].dtype)), ("target_memory", _mem("Vec"))), span=s.span),
                         s, f"the scratch tile of {what}")

    def scratch(self, new_args: list, call: Call, target: str, s: Stmt, out: list[Stmt], what: str) -> Var:
        """A scratch tile shaped like the first tile operand, for a tile op that needs `tmp`."""
        first = next((a for a in new_args if isinstance(a, Var) and a.name in self.ttypes), None)
        ft = self.ttypes.get(first.name) if first is not None else None
        if ft is None:
            raise _error("PTOC-E0300", f"{what} without a tile operand is not supported in a kernel yet", call)
        return self.emit(out, self.fresh(f"{target}_tmp"),
                         Call("tile.create", (ListExpr(tuple(ft.shape)),),
                              (("dtype", DTypeLit(ft.dtype)), ("target_memory", _mem(ft.memory or "Vec"))),
                              span=s.span), s, f"the scratch tile of {what}")

    def finish(self, call: Call, target: str, ann: Type | None, s: Stmt, out: list[Stmt], what: str) -> Var:
        t = self.infer(call, s, what)
        annotation = t if isinstance(t, TileType) or ann is None else ann
        out.append(AssignStmt(Var(target, span=s.span), call, annotation, span=s.span))
        if isinstance(t, TileType):
            self.ttypes[target] = t
            self.retyped(target)
        return Var(target, span=s.span)

    def flatten_arg(self, a: Expr, target: str, s: Stmt, out: list[Stmt]) -> Expr:
        if isinstance(a, Call) and tensor_op_name(a, self.env()) is not None:
            name = self.fresh(f"{target}_arg")
            self.convert(a, name, None, s, out)
            return Var(name, span=a.span)
        return a

    def operand_arg(self, a: Expr, s: Stmt, out: list[Stmt], here: bool = False) -> Expr:
        if isinstance(a, Var) and self.kind(a.name) in ("tile", "gm"):
            return self.vec_operand(a, s, out, here)
        return a

    def convert_element(self, suffix: str, call: Call, target: str, ann: Type | None, s: Stmt,
                        out: list[Stmt]) -> Var | None:
        """`tensor.read` / `tensor.write` of one element: on a value computed on tiles, or a parameter the
        kernel loads anyway, the tile op on that tile; on a global tensor nothing else loads, it stays the
        scalar access to global memory it is (as PyPTO)."""
        src = call.args[0] if call.args else None
        tile = None
        if isinstance(src, Var):
            k = self.kind(src.name)
            if k == "tile":
                tile = self.vec_operand(src, s, out)
            elif k == "gm" and src.name in self.params and src.name in self.entry_read:
                tile = self.load(src, "Vec", s, out)
        if tile is None:
            self.check_exprs(tuple(call.args) + tuple(v for _, v in call.kwargs), s)
            out.append(s)
            return Var(target, span=s.span)
        new = Call(f"tile.{suffix}", (tile,) + tuple(self.operand_arg(a, s, out) for a in call.args[1:]),
                   call.kwargs, span=call.span)
        if isinstance(s, EvalStmt):
            self.infer(new, s, f"pl.tensor.{suffix}")
            out.append(replace(s, expr=new))
            return None
        return self.finish(new, target, ann, s, out, f"pl.tensor.{suffix}")

    def convert_create(self, suffix: str, call: Call, target: str, s: Stmt, out: list[Stmt]) -> Var:
        kwargs = []
        for k, v in call.kwargs:
            if k == "layout":
                if not (isinstance(v, EnumLit) and v.member == "ND"):
                    raise _error("PTOC-E0300", f"pl.tensor.{suffix} with a non-ND layout is not supported in a "
                                 "kernel yet", v, hint="create an ND tensor")
                continue
            kwargs.append((k, v))
        kwargs.append(("target_memory", _mem("Vec")))
        new = Call(f"tile.{suffix}", call.args, tuple(kwargs), span=call.span)
        return self.finish(new, target, None, s, out, f"pl.tensor.{suffix}")

    def convert_slice(self, call: Call, target: str, s: Stmt, out: list[Stmt]) -> Var:
        src = call.args[0] if call.args else call.kwarg("input") or call.kwarg("tensor")
        if isinstance(src, Var) and self.kind(src.name) == "tile":
            from ptoc.ops.registry import lookup

            twin = lookup("tile.slice")
            if twin is None:
                raise _error("PTOC-E0300", "pl.tensor.slice of a value computed in the kernel is not supported in a "
                             "kernel yet", call)
            new = Call("tile.slice", tuple(self.operand_arg(a, s, out) for a in call.args), call.kwargs,
                       span=call.span)
            return self.finish(new, target, None, s, out, "pl.tensor.slice")
        if not (isinstance(src, Var) and self.kind(src.name) == "gm"):
            raise _error("PTOC-E0300", "pl.tensor.slice of this value is not supported in a kernel yet", call)

        def arg(i: int, *names: str) -> Expr | None:
            if len(call.args) > i:
                return call.args[i]
            for n in names:
                if call.kwarg(n) is not None:
                    return call.kwarg(n)
            return None

        shape, offset, valid = arg(1, "shape"), arg(2, "offset", "offsets"), arg(3, "valid_shape")
        if shape is None or offset is None:
            raise _error("PTOC-E0300", "pl.tensor.slice needs a shape and an offset", call)
        spaces = sorted(self.demand.get(target, {"Vec"}) or {"Vec"}, key=SPACES_ORDER.index)
        self.spaces[target] = {}
        for i, space in enumerate(spaces):
            name = target if i == 0 else self.fresh(f"{target}_{'tile' if space == 'Vec' else space.lower()}")
            args = (src, offset, shape) + ((valid,) if valid is not None else ())
            load = Call("tile.load", args, (("target_memory", _mem(space)),), span=call.span)
            self.emit(out, name, load, s, "pl.tensor.slice")
            self.spaces[target][space] = name
        self.ttypes[target] = self.ttypes[self.spaces[target][spaces[0]]]
        self.retyped(target)
        return Var(target, span=s.span)

    def convert_matmul(self, suffix: str, op, call: Call, target: str, s: Stmt, out: list[Stmt]) -> Var:
        from ptoc.ops.registry import bind

        what = f"pl.tensor.{suffix}"
        try:
            env = self.types
            args = bind(op, call, [expr_type(a, env) for a in call.args],
                        {k: expr_type(v, env) for k, v in call.kwargs}, self.ctx)
        except Exception as e:  # the front end already checked the call; stay defensive
            raise InternalError(f"ConvertTensorToTileOps: cannot bind {what}: {e}") from e
        v = args.get("c_matrix_nz")
        if isinstance(v, ConstBool) and v.value:
            raise _error("PTOC-E0300", f"{what} with c_matrix_nz=True is not supported in a kernel yet", v,
                         hint="store the result in ND and convert it separately")
        lhs, rhs = args.get("lhs"), args.get("rhs")
        batched = False
        for v in (lhs, rhs, args.get("acc")):
            t = expr_type(v, self.types) if v is not None else None
            batched = batched or (isinstance(t, (TensorType, TileType)) and t.rank > 2)
        left = self.mat_operand(lhs, s, out, what)
        right = self.mat_operand(rhs, s, out, what)
        # a transposed operand: its natural Mat tile read through a zero-copy transposed view (as PyPTO)
        if self.flag(args, "a_trans"):
            left = self.emit(out, self.fresh(f"{left.name}_t"), Call("tile.transpose_view", (left,), span=call.span),
                             s, what)
        if self.flag(args, "b_trans"):
            right = self.emit(out, self.fresh(f"{right.name}_t"),
                              Call("tile.transpose_view", (right,), span=call.span), s, what)
        if suffix == "matmul":
            new = Call("tile.batch_matmul" if batched else "tile.matmul", (left, right), span=call.span)
        else:
            acc = args.get("acc")
            at = self.ttypes.get(acc.name) if isinstance(acc, Var) else None
            if at is None or at.memory != "Acc":
                raise _error("PTOC-E0300", f"{what} into an accumulator that is not a matmul result of this kernel "
                             "is not supported in a kernel yet", acc or call,
                             hint="start the accumulation with pl.tensor.matmul in the kernel")
            new = Call("tile.batch_matmul_acc" if batched else "tile.matmul_acc", (acc, left, right), span=call.span)
        v = self.finish(new, target, None, s, out, what)
        promised = self.orig(target)
        if isinstance(promised, TensorType):
            self.acc_dtype[target] = promised.dtype
        return v

    def convert_transfer(self, top: str, op, call: Call, target: str | None, s: Stmt, out: list[Stmt]) -> Var | None:
        """`pld.tensor.put/get(dst, peer, src, ...)` -> a Vec staging tile (two with pipeline=True, shaped
        [rows, cols] of the transfer, capped by chunk_rows / chunk_cols) and `pld.tile.put/get` through it;
        `pld.tensor.remote_store(src, ...)` -> `pld.tile.remote_store` of `src` as a Vec tile."""
        from ptoc.ops.registry import bind

        what = top.replace("pld.", "pld.", 1)
        env = self.env()
        try:
            args = bind(op, call, [expr_type(a, env) for a in call.args],
                        {k: expr_type(v, env) for k, v in call.kwargs}, self.ctx)
        except Exception as e:  # the front end already checked the call; stay defensive
            raise InternalError(f"ConvertTensorToTileOps: cannot bind {what}: {e}") from e
        if top == "pld.tensor.remote_store":
            src = args.get("src")
            tile = self.vec_operand(src, s, out) if isinstance(src, Var) else src
            new_args = (tile,) + tuple(args.get(n) for n in ("target", "peer", "offsets"))
            kw = tuple((k, v) for k, v in call.kwargs if k == "atomic")
            new = Call("pld.tile.remote_store", new_args, kw, span=call.span)
        else:
            dst, src = args.get("dst"), args.get("src")
            if isinstance(src, Var) and self.kind(src.name) == "tile":
                raise _error("PTOC-E0300", f"{what} of a value computed in the kernel is not supported",
                             call, hint="push a computed value with pld.remote_store(src, target, peer, offsets)")
            dt = expr_type(dst, env)
            if not isinstance(dt, TensorType):
                raise InternalError(f"ConvertTensorToTileOps: {what}: dst is not a tensor")
            shape = args.get("shape")
            dims = tuple(shape.items) if isinstance(shape, ListExpr) else tuple(dt.shape)

            def chunk(k: str) -> int:
                v = args.get(k)
                return v.value if isinstance(v, ConstInt) else 0

            rows_known = all(isinstance(d, ConstInt) for d in dims[:-1])
            rows = 1
            for d in dims[:-1]:
                rows *= d.value if isinstance(d, ConstInt) else 1
            cols = dims[-1].value if isinstance(dims[-1], ConstInt) else None
            if cols is None or not rows_known:
                if (cols is None and chunk("chunk_cols") <= 0) or (not rows_known and chunk("chunk_rows") <= 0):
                    raise _error("PTOC-E0300", f"{what} of a transfer with a dynamic extent needs static chunk_rows "
                                 "and chunk_cols in a kernel", call)
            cols = chunk("chunk_cols") if cols is None else (min(cols, chunk("chunk_cols")) if chunk("chunk_cols")
                                                             else cols)
            rows = chunk("chunk_rows") if not rows_known else (min(rows, chunk("chunk_rows")) if chunk("chunk_rows")
                                                               else rows)
            pipeline = args.get("pipeline")
            two = isinstance(pipeline, ConstBool) and pipeline.value
            base = "tput_stage" if top.endswith("put") else "tget_stage"
            stages = []
            for sfx in (("_ping", "_pong") if two else ("",)):
                create = Call("tile.create", (ListExpr((_c(rows), _c(cols))),),
                              (("dtype", DTypeLit(dt.dtype)), ("target_memory", _mem("Vec"))), span=s.span)
                stages.append(self.emit(out, self.fresh(base + sfx), create, s, f"the staging tile of {what}"))
            kw: list[tuple[str, Expr]] = [("stage2", stages[1])] if two else []
            kw += [(k, args.get(k)) for k in ("dst_offsets", "src_offsets", "shape") if args.get(k) is not None]
            kw += [(k, v) for k, v in call.kwargs if k == "atomic"]
            new = Call(top.replace("pld.tensor.", "pld.tile."), (dst, args.get("peer"), src, stages[0]), tuple(kw),
                       span=call.span)
        self.infer(new, s, what)
        if isinstance(s, EvalStmt):
            out.append(replace(s, expr=new))
            return None
        out.append(AssignStmt(Var(target, span=s.span), new, None, span=s.span))
        return Var(target, span=s.span)

    def convert_expand_clone(self, call: Call, target: str, s: Stmt, out: list[Stmt]) -> Var:
        """`tensor.expand_clone(src, dst)` of rank-3 tensors, broadcasting src along at most one axis, writes
        dst piece by piece (as PyPTO): no broadcast -> one load and store; axis 0 -> a loop storing the
        loaded src at each index; axis 1 -> a loop loading each row of src and storing its `tile.col_expand`;
        axis 2 -> the load's `tile.row_expand` stored whole. The result is dst as written."""
        from ptoc.ir.dtypes import INDEX as IDX

        what = "pl.tensor.expand_clone"
        src = call.args[0] if call.args else call.kwarg("input")
        dst = call.args[1] if len(call.args) > 1 else call.kwarg("target")
        if not (isinstance(src, Var) and isinstance(dst, Var) and self.kind(src.name) == "gm"
                and self.kind(dst.name) == "gm"):
            raise _error("PTOC-E0300", f"{what} of values computed in the kernel is not supported in a kernel yet",
                         call, hint="expand a tensor parameter into a tensor parameter")
        st, dt = self.orig(src.name), self.orig(dst.name)
        assert isinstance(st, TensorType) and isinstance(dt, TensorType)
        dims = [i for i, (a, b) in enumerate(zip(st.shape, dt.shape))
                if isinstance(a, ConstInt) and a.value == 1 and not (isinstance(b, ConstInt) and b.value == 1)]
        if st.rank != 3 or dt.rank != 3 or len(dims) > 1:
            raise _error("PTOC-E0300", f"{what} of rank-{st.rank} tensors, or broadcasting more than one axis, is "
                         "not supported in a kernel yet", call, hint="expand rank-3 tensors along one axis")
        valid = list(st.view.valid_shape) if st.view is not None and st.view.valid_shape is not None \
            else list(st.shape)
        zeros = ListExpr((_c(0), _c(0), _c(0)))

        def load(name: str, offsets: Expr, shape: list, into: list[Stmt], whole: bool = True) -> Var:
            c = Call("tile.load", (Var(src.name), offsets, ListExpr(tuple(shape)),
                                   ListExpr(tuple(valid if whole else shape))), (("target_memory", _mem("Vec")),),
                     span=s.span)
            return self.emit(into, self.fresh(name), c, s, what)

        def store(name: str | None, tile: Var, offsets: Expr, into_tensor: Var, body: list[Stmt]) -> Var:
            c = Call("tile.store", (tile, offsets, into_tensor), span=s.span)
            t = self.infer(c, s, what)
            v = Var(name or self.fresh("expand_clone_store"), span=s.span)
            body.append(AssignStmt(v, c, t, span=s.span))
            self.types[v.name] = t
            return v

        def create(name: str, shape: tuple, body: list[Stmt]) -> Var:
            c = Call("tile.create", (ListExpr(shape),), (("dtype", DTypeLit(st.dtype)), ("target_memory",
                                                                                          _mem("Vec"))), span=s.span)
            return self.emit(body, self.fresh(name), c, s, what)

        if not dims or dims[0] == 2:
            tile = load("expand_clone_input", zeros, list(st.shape), out)
            if dims:
                full = create("expand_clone_d2_target", tuple(dt.shape), out)
                tile = self.emit(out, self.fresh("expand_clone_d2_row"),
                                 Call("tile.row_expand", (full, tile), span=s.span), s, what)
            self.ttypes.pop(target, None)
            return store(target, tile, zeros, Var(dst.name), out)
        # a loop over axis 0 carrying dst
        i = Var(self.fresh("i"), span=s.span)
        acc = Var(self.fresh("expand_clone_acc"), span=s.span)
        res = Var(self.fresh(f"expand_clone_d{dims[0]}_result"), span=s.span)
        self.types[i.name], self.types[acc.name], self.types[res.name] = ScalarType(IDX), dt, dt
        at_i = ListExpr((i, _c(0), _c(0)))
        body: list[Stmt] = []
        if dims[0] == 0:
            tile = load("expand_clone_input", zeros, list(st.shape), out)
        else:
            row = [_c(1), _c(1), valid[2]]
            piece = load("expand_clone_d1_input", at_i, row, body, whole=False)
            full = create("expand_clone_d1_target", (_c(1), dt.shape[1], dt.shape[2]), body)
            tile = self.emit(body, self.fresh("expand_clone_d1_col"), Call("tile.col_expand", (full, piece),
                                                                           span=s.span), s, what)
        stored = store(self.fresh(f"expand_clone_d{dims[0]}_store"), tile, at_i, acc, body)
        body.append(YieldStmt((res,), (stored,), None, span=s.span))
        out.append(ForStmt("range", i, (dt.shape[0],), tuple(body), (acc,), (Var(dst.name),), span=s.span))
        out.append(AssignStmt(Var(target, span=s.span), res, dt, span=s.span))
        self.ttypes.pop(target, None)
        self.types[target] = dt
        return Var(target, span=s.span)

    def convert_gather(self, op, call: Call, target: str, s: Stmt, out: list[Stmt]) -> Var:
        """`tensor.gather(src, dim=-1, index=idx)` of rank-2 operands, as PyPTO lowers it. On A5 one
        `tile.gather` of the whole source with flat indices idx[i, j] + i * src_cols (the row offsets from
        `tile.ci`; a source computed in the kernel is first copied into a contiguous tile); elsewhere a loop
        over the rows, each gathered on its own and assembled into the result."""
        from ptoc.ops.registry import bind

        what = "pl.tensor.gather"
        env = self.env()
        try:
            args = bind(op, call, [expr_type(a, env) for a in call.args],
                        {k: expr_type(v, env) for k, v in call.kwargs}, self.ctx)
        except Exception as e:  # the front end already checked the call; stay defensive
            raise InternalError(f"ConvertTensorToTileOps: cannot bind {what}: {e}") from e
        src, idx, dim = args.get("input"), args.get("index"), args.get("dim")
        st = expr_type(src, env) if src is not None else None
        it = expr_type(idx, env) if idx is not None else None
        d = dim.value if isinstance(dim, ConstInt) else None
        ok = (isinstance(src, Var) and isinstance(idx, Var) and isinstance(st, (TensorType, TileType))
              and isinstance(it, (TensorType, TileType)) and st.rank == 2 and it.rank == 2 and d in (-1, 1)
              and all(isinstance(x, ConstInt) for x in tuple(st.shape) + tuple(it.shape))
              and it.dtype == dtypes.INT32)
        if not ok:
            raise _error("PTOC-E0300", f"{what} other than along the last axis of rank-2 operands with static "
                         "shapes and INT32 indices is not supported in a kernel yet", call,
                         hint="gather rank-2 tiles along the last axis, or write the gather with pl.tile ops")
        rows, scols, k = st.shape[0].value, st.shape[1].value, it.shape[1].value
        i32 = dtypes.INT32

        def e(name: str, op_name: str, *a: Expr, into: list[Stmt] | None = None, **kw: Expr) -> Var:
            return self.emit(out if into is None else into, self.fresh(name),
                             Call(op_name, tuple(a), tuple(kw.items()), span=s.span), s, what)

        def piece(name: str, v: Var, offsets: Expr, shape: tuple, into: list[Stmt]) -> Var:
            sh = ListExpr(tuple(_c(x) for x in shape))
            if self.kind(v.name) == "tile":
                return e(name, "tile.slice", self.vec_operand(v, s, into), sh, offsets, sh, into=into)
            return e(name, "tile.load", Var(v.name), offsets, sh, sh, into=into, target_memory=_mem("Vec"))

        def create(name: str, shape: tuple, dt, into: list[Stmt]) -> Var:
            return e(name, "tile.create", ListExpr(tuple(_c(x) for x in shape)), into=into, dtype=DTypeLit(dt),
                     target_memory=_mem("Vec"))

        zeros = ListExpr((_c(0), _c(0)))
        from ptoc.target.arch import get_arch

        if get_arch(self.ctx.arch).whole_tile_gather:
            src_tile = piece("gather_inp", src, zeros, (rows, scols), out)
            if self.kind(src.name) == "tile":
                alloc = create("gather_src_alloc", (rows, scols), st.dtype, out)
                src_tile = e("gather_src_copy", "tile.assemble", alloc, src_tile, zeros)
            idx_tile = piece("gather_idx", idx, zeros, (rows, k), out)
            if rows == 1:
                flat = idx_tile
            elif k % 8 == 0:
                lin = e("gather_lin", "tile.ci", ConstInt(0, i32), ListExpr((_c(1), _c(rows * k))),
                        dtype=DTypeLit(i32), descending=ConstBool(False))
                lin2 = e("gather_lin2d", "tile.reshape", lin, ListExpr((_c(rows), _c(k))))
                ids = e("gather_row_ids", "tile.divs", lin2, ConstInt(k, i32))
                base = e("gather_row_base", "tile.muls", ids, ConstInt(scols, i32))
                flat = e("gather_flat_idx", "tile.add", idx_tile, base)
            else:
                ci = e("gather_ci_rows", "tile.ci", ConstInt(0, i32), ListExpr((_c(1), _c(rows))),
                       dtype=DTypeLit(i32), descending=ConstBool(False))
                ar = e("gather_row_arange", "tile.reshape", ci, ListExpr((_c(rows), _c(1))))
                base = e("gather_row_base", "tile.muls", ar, ConstInt(scols, i32))
                flat = e("gather_flat_idx", "tile.row_expand_add", idx_tile, base)
            tmp = create("gather_tmp", (rows, k), i32, out)
            result = e("gather", "tile.gather", src_tile, flat, tmp)
        else:
            init = create("gather_acc_init", (rows, k), st.dtype, out)
            lv = Var(self.fresh("gather_lv"), span=s.span)
            ia = Var(self.fresh("gather_ia"), span=s.span)
            rv = Var(self.fresh("gather_rv"), span=s.span)
            self.types[lv.name] = ScalarType(dtypes.INDEX)
            self.ttypes[ia.name] = self.ttypes[init.name]
            body: list[Stmt] = []
            at = ListExpr((lv, _c(0)))
            row = piece("gather_inp_row", src, at, (1, scols), body)
            irow = piece("gather_idx_row", idx, at, (1, k), body)
            tmp = create("gather_row_tmp", (1, k), i32, body)
            g = e("gather_row", "tile.gather", row, irow, tmp, into=body)
            asm = e("gather_asmbl", "tile.assemble", ia, g, at, into=body)
            body.append(YieldStmt((rv,), (asm,), None, span=s.span))
            out.append(ForStmt("range", lv, (_c(rows),), tuple(body), (ia,), (init,), span=s.span))
            self.ttypes[rv.name] = self.ttypes[asm.name]
            result = rv
        t = self.ttypes[result.name]
        out.append(AssignStmt(Var(target, span=s.span), result, t, span=s.span))
        self.ttypes[target] = t
        self.retyped(target)
        return Var(target, span=s.span)

    @staticmethod
    def flag(args, name: str) -> bool:
        v = args.get(name)
        return isinstance(v, ConstBool) and v.value

    @staticmethod
    def base(v: Expr) -> str:
        return v.name if isinstance(v, Var) else "operand"

    # ------------------------------------------------------------------ results
    def store_result(self, i: int, v: Var, s: Stmt, out: list[Stmt]) -> Var:
        stored = self.store_assemble_loop(i, v, s, out)
        if stored is not None:
            return stored
        t = self.ttypes[v.name]
        param = self.out_param(i, v, s)
        pt = param.type
        assert isinstance(pt, TensorType)
        src = v if t.memory in ("Acc", "Vec", None) else self.vec_operand(v, s, out)
        call = Call("tile.store", (src, ListExpr(tuple(_c(0) for _ in pt.shape)), Var(param.name)), span=s.span)
        name = self.fresh(f"{v.name}_store")
        self.infer(call, s, "the result store")
        out.append(AssignStmt(Var(name, span=s.span), call, pt, span=s.span))
        return Var(name, span=v.span)

    def store_assemble_loop(self, i: int, v: Var, s: Stmt, out: list[Stmt]) -> Var | None:
        """A returned loop that only assembles pieces into a fresh tile stores each piece instead:

            acc0 = pl.tile.create(shape, ...)            # (dropped)
            for i, (acc,) in pl.range(n, init_values=(acc0,)):   ->   init_values=(out,)
                nxt = pl.tile.assemble(acc, piece, offsets)      ->   nxt = pl.tile.store(piece, offsets, acc)
                r = pl.yield_(nxt)
            return r

        as PyPTO does: the pieces go straight to the Out parameter, and the whole result never needs a
        buffer of its own. Any other use of the tile or of the carried value keeps the ordinary form."""
        k = next((j for j, x in enumerate(out)
                  if isinstance(x, ForStmt) and tuple(r.name for r in x.results) == (v.name,)), None)
        if k is None:
            return None
        loop: ForStmt = out[k]  # type: ignore[assignment]
        if len(loop.iter_args) != 1 or not isinstance(loop.init_values[0], Var):
            return None
        acc, init, y = loop.iter_args[0], loop.init_values[0], loop.body[-1]
        d = next((j for j, x in enumerate(out[:k]) if isinstance(x, AssignStmt) and x.target.name == init.name), None)
        if d is None or not (isinstance(out[d].value, Call) and out[d].value.op == "tile.create"):
            return None
        if not (isinstance(y, YieldStmt) and len(y.values) == 1 and isinstance(y.values[0], Var)):
            return None
        a = next((j for j, x in enumerate(loop.body) if isinstance(x, AssignStmt) and x.target.name == y.values[0].name),
                 None)
        asm = loop.body[a].value if a is not None else None
        if not (isinstance(asm, Call) and asm.op == "tile.assemble" and len(asm.args) == 3 and not asm.kwargs
                and isinstance(asm.args[0], Var) and asm.args[0].name == acc.name and isinstance(asm.args[1], Var)):
            return None
        piece = self.ttypes.get(asm.args[1].name) or self.orig(asm.args[1].name)
        if not isinstance(piece, TileType) or piece.memory not in ("Vec", "Acc", None):
            return None
        others = [x for j, x in enumerate(out) if j not in (d, k)] + [x for j, x in enumerate(loop.body) if j != a]
        for x in others:
            if any(isinstance(n, Var) and n.name in (acc.name, init.name, y.values[0].name) for n in iter_nodes(x)
                   if not (x is y and n is y.values[0])):
                return None
        param = self.out_param(i, v, s)
        pt = param.type
        store = Call("tile.store", (asm.args[1], asm.args[2], Var(acc.name, span=asm.span)), span=asm.span)
        body = list(loop.body)
        body[a] = replace(body[a], value=store, annotation=pt if body[a].annotation is not None else None)
        body[-1] = replace(y, annotation=pt if y.annotation is not None else None)
        out[k] = replace(loop, init_values=(Var(param.name, span=init.span),), body=tuple(body))
        del out[d]
        for name in (acc.name, init.name, y.values[0].name, v.name):
            self.ttypes.pop(name, None)
            self.converted.discard(name)
        return v

    def out_param(self, i: int, v: Var, s: Stmt) -> Param:
        if i in self.out_for_position:
            return self.out_for_position[i]
        rt = self.f.returns[i] if i < len(self.f.returns) else None
        if not isinstance(rt, TensorType):
            rt = self.orig(v.name)
        if not isinstance(rt, TensorType):
            raise InternalError(f"ConvertTensorToTileOps: result {v.name} has no tensor type")
        chosen = None
        for p in self.f.params:
            pt = p.type
            if (p.direction == "Out" and isinstance(pt, TensorType) and p.name not in self.used_in_body
                    and p.name not in self.taken_outs and pt.shape == rt.shape and pt.dtype == rt.dtype
                    and pt.layout == rt.layout):
                chosen = p
                break
        if chosen is None:
            chosen = Param(self.fresh(f"{v.name}_out"), replace(rt, memref=None), "Out", span=self.f.span)
            self.new_params.append(chosen)
        self.taken_outs.add(chosen.name)
        self.out_for_position[i] = chosen
        return chosen


def _has_tensor_ops(f: Function, types: dict[str, Type | None], cache=None) -> bool:
    return any(tensor_op_name(n, types) is not None for n in NodeIndex.get(f, cache).of(Call))


class _Subst(FastMutator):
    def __init__(self, mapping: dict[str, Expr]):
        self.mapping = mapping

    def mutate_Var(self, v: Var):
        return self.mapping.get(v.name, v)


class _CallSites:
    """Passes a fresh `pl.tensor.create` for every Out parameter a converted kernel gained."""

    def __init__(self, f: Function, added: dict[str, list[Param]], kernels: dict[str, Function]):
        self.f = f
        self.added = added
        self.kernels = kernels
        self._names: set[str] | None = None  # every name in f: computed on the first fresh name

    def fresh(self, base: str) -> str:
        if self._names is None:
            self._names = {p.name for p in self.f.params} | {n.name for n in iter_nodes(self.f) if isinstance(n, Var)}
        return fresh_name(base, self._names)

    def run(self) -> Function:
        body = self.block(self.f.body)
        return self.f if body is self.f.body else replace(self.f, body=body)

    def block(self, body: tuple[Stmt, ...]) -> tuple[Stmt, ...]:
        """The rewritten body; the very same tuple when no statement in it changed."""
        out: list[Stmt] = []
        for s in body:
            pre: list[Stmt] = []
            s = self.stmt(s, pre)
            out.extend(pre)
            out.append(s)
        if len(out) == len(body) and all(a is b for a, b in zip(out, body)):
            return body
        return tuple(out)

    def stmt(self, s: Stmt, pre: list[Stmt]) -> Stmt:
        rewrite = _CallRewriter(self, pre, s)
        if isinstance(s, AssignStmt):
            return _with(s, value=rewrite.mutate(s.value))
        if isinstance(s, EvalStmt):
            return _with(s, expr=rewrite.mutate(s.expr))
        if isinstance(s, ReturnStmt):
            return _with(s, values=rewrite.mutate(s.values))
        if isinstance(s, YieldStmt):
            return _with(s, values=rewrite.mutate(s.values))
        if isinstance(s, ForStmt):
            return _with(s, args=rewrite.mutate(s.args), init_values=rewrite.mutate(s.init_values),
                         body=self.block(s.body))
        if isinstance(s, WhileStmt):
            return _with(s, init_values=rewrite.mutate(s.init_values), body=self.block(s.body))
        if isinstance(s, IfStmt):
            return _with(s, cond=rewrite.mutate(s.cond), then_body=self.block(s.then_body),
                         else_body=self.block(s.else_body))
        if isinstance(s, ScopeStmt):
            return _with(s, args=rewrite.mutate(s.args), body=self.block(s.body))
        return s


def _with(s: Stmt, **fields) -> Stmt:
    """`s` with `fields` replaced; `s` itself when every field is the very same object."""
    if all(v is getattr(s, k) for k, v in fields.items()):
        return s
    return replace(s, **fields)


class _CallRewriter(FastMutator):
    def __init__(self, sites: _CallSites, pre: list[Stmt], at: Stmt):
        self.sites = sites
        self.pre = pre
        self.at = at

    def mutate_Call(self, c: Call):
        if c.kind not in ("func", "submit", "spmd_submit") or c.op not in self.sites.added:  # (a task launch too)
            return c
        caller = self.sites.f
        if caller.func_type in KERNEL_TYPES:
            raise _error("PTOC-E0302", f"kernel {caller.name!r} calls kernel {c.op!r}, whose result needs a new "
                         "pl.Out parameter", c, hint=f"declare a pl.Out parameter for the result of {c.op!r} and "
                         "pass a tensor for it")
        callee = self.sites.kernels[c.op]
        old_params = callee.params[: len(callee.params) - len(self.sites.added[c.op])]
        mapping: dict[str, Expr] = {}
        for i, p in enumerate(old_params):
            if i < len(c.args):
                mapping[p.name] = c.args[i]
        for k, v in c.kwargs:
            mapping[k] = v
        args, kwargs = list(c.args), list(c.kwargs)
        for p in self.sites.added[c.op]:
            pt = p.type
            assert isinstance(pt, TensorType)
            shape = tuple(_Subst(mapping).mutate(d) for d in pt.shape)
            name = self.sites.fresh(p.name)
            t = TensorType(shape, pt.dtype)
            create = Call("tensor.create", (ListExpr(shape),), (("dtype", DTypeLit(pt.dtype)),), span=self.at.span)
            self.pre.append(AssignStmt(Var(name, span=self.at.span), create, t, span=self.at.span))
            if kwargs:
                kwargs.append((p.name, Var(name)))
            else:
                args.append(Var(name))
        return replace(c, args=tuple(args), kwargs=tuple(kwargs))


def _param_accesses(f: Function) -> tuple[set[str], set[str]]:
    """(parameters the kernel reads, parameters it writes), following the names a tensor flows through:
    plain copies, loop carries (init value, iter_arg, yielded value, result), branch results, and the
    result of a store (the tensor it wrote). Reads: tile.load, tensor.read; writes: tile.store (its
    output), tensor.write; a soft system.syncall reads and writes its gm_workspace."""
    classes = _Classes()
    reads: list[str] = []
    writes: list[str] = []

    def visit(body: tuple[Stmt, ...]) -> None:
        for st in body:
            if isinstance(st, AssignStmt) and isinstance(st.value, Var):
                classes.union(st.target.name, st.value.name)
            if isinstance(st, (AssignStmt, EvalStmt)):
                c = st.value if isinstance(st, AssignStmt) else st.expr
                if isinstance(c, Call) and c.kind == "op":
                    access(c, st.target.name if isinstance(st, AssignStmt) else None)
            if isinstance(st, (ForStmt, WhileStmt)):
                ys = st.body[-1] if st.body and isinstance(st.body[-1], YieldStmt) else None
                for k, a in enumerate(st.iter_args):
                    if k < len(st.init_values) and isinstance(st.init_values[k], Var):
                        classes.union(a.name, st.init_values[k].name)
                    if ys is not None and k < len(ys.values) and isinstance(ys.values[k], Var):
                        classes.union(a.name, ys.values[k].name)
                    if ys is not None and k < len(ys.targets):
                        classes.union(a.name, ys.targets[k].name)
                visit(st.body)
            elif isinstance(st, IfStmt):
                for branch in (st.then_body, st.else_body):
                    if branch and isinstance(branch[-1], YieldStmt):
                        for r, v in zip(branch[-1].targets, branch[-1].values):
                            if isinstance(v, Var):
                                classes.union(r.name, v.name)
                    visit(branch)
            elif isinstance(st, ScopeStmt):
                visit(st.body)

    def access(c: Call, target: str | None) -> None:
        def name(e: Expr | None) -> str | None:
            return e.name if isinstance(e, Var) else None

        if c.op in ("tile.load", "tensor.read", "load", "read") and c.args:
            reads.append(name(c.args[0]) or "")
        elif c.op in ("tile.store", "store"):
            out = c.args[2] if len(c.args) >= 3 else c.kwarg("output_tensor") or c.kwarg("output")
            if name(out):
                writes.append(name(out))
                if target is not None:
                    classes.union(target, name(out))
        elif c.op in ("tensor.write", "write") and c.args:
            writes.append(name(c.args[0]) or "")
        elif c.op in ("pld.tile.put", "pld.tile.get") and c.args:
            writes.append(name(c.args[0]) or "")  # (the window a transfer writes, here or at the peer)
        elif c.op == "pld.tile.remote_store" and len(c.args) >= 2:
            writes.append(name(c.args[1]) or "")
        elif c.op == "system.syncall":
            mode = c.kwarg("mode")
            if getattr(mode, "value", None) == "soft" and name(c.kwarg("gm_workspace")):
                reads.append(name(c.kwarg("gm_workspace")))
                writes.append(name(c.kwarg("gm_workspace")))

    visit(f.body)
    tensors = [p.name for p in f.params if isinstance(p.type, TensorType)]
    read = {p for p in tensors if any(r and classes.find(r) == classes.find(p) for r in reads)}
    written = {p for p in tensors if any(w and classes.find(w) == classes.find(p) for w in writes)}
    return read, written


def _upgrade_directions(funcs: list[Function]) -> list[Function]:
    """An `In` tensor parameter a kernel writes becomes `Out` (`InOut` when the kernel also reads it), as
    PyPTO's conversion does; a caller's own `In` parameter passed straight to it follows, so the
    orchestration's signature says which tensors its kernels write."""
    changed: dict[str, dict[int, str]] = {}
    out = []
    for f in funcs:
        if f.func_type in KERNEL_TYPES and any(p.direction == "In" for p in f.params):
            read, written = _param_accesses(f)
            new = {i: ("InOut" if p.name in read else "Out") for i, p in enumerate(f.params)
                   if p.direction == "In" and p.name in written}
            if new:
                changed[f.name] = new
                f = replace(f, params=tuple(replace(p, direction=new[i]) if i in new else p
                                            for i, p in enumerate(f.params)))
        out.append(f)
    if not changed:
        return funcs
    result = []
    for f in out:
        ups: dict[str, str] = {}
        for n in iter_nodes(f):
            if isinstance(n, Call) and n.kind == "func" and n.op in changed:
                for i, d in changed[n.op].items():
                    if i < len(n.args) and isinstance(n.args[i], Var):
                        ups[n.args[i].name] = "InOut" if "InOut" in (d, ups.get(n.args[i].name)) else d
        if any(p.direction == "In" and p.name in ups for p in f.params):
            f = replace(f, params=tuple(replace(p, direction=ups[p.name]) if p.direction == "In" and p.name in ups
                                        else p for p in f.params))
        result.append(f)
    return result


class ConvertTensorToTileOps(Pass):
    name = "ConvertTensorToTileOps"
    stage = "tile"
    summary = "kernels compute on tiles: tensor ops -> tile ops, entry loads, result stores into Out params"
    requires: frozenset[str] = frozenset()
    produces = frozenset({"tile_ops"})

    def adopt(self, program: Program, ctx: CompileContext) -> Program:
        """Skipped (the kernels hold tile ops already): the directions are still upgraded, as PyPTO's pass
        upgrades them whatever it converts (a tensor OutlineIncoreScopes left `In` that the kernel writes
        through a loop it carries becomes `Out`)."""
        funcs = _upgrade_directions(list(program.functions))
        if all(a is b for a, b in zip(funcs, program.functions)):
            return program
        return replace(program, functions=tuple(funcs))

    def run(self, program: Program, ctx: CompileContext) -> Program:
        types = None
        funcs = list(program.functions)
        added: dict[str, list[Param]] = {}
        for i, f in enumerate(funcs):
            if f.func_type not in KERNEL_TYPES:
                continue
            if types is None:
                types = self.types(program, ctx)
            if not _has_tensor_ops(f, types[f.name], self.cache):
                continue
            conv = _Kernel(f, types[f.name], ctx, program)
            funcs[i] = conv.run()
            if conv.new_params:
                added[f.name] = conv.new_params
        if added:
            kernels = {f.name: f for f in funcs}
            funcs = [_CallSites(f, added, kernels).run() for f in funcs]
        funcs = _upgrade_directions(funcs)
        if all(a is b for a, b in zip(funcs, program.functions)):
            return program
        return replace(program, functions=tuple(funcs))


__all__ = ["ConvertTensorToTileOps", "tensor_op_name"]
