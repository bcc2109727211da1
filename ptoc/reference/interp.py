"""The numeric reference: run one kernel of a program, at any pipeline stage, on numpy data.

    run_function(program, fn_name, inputs, ctx, *, block_idx=0, block_num=1, subblock_idx=0,
                 all_blocks=False, max_iterations=1_000_000, layout_bytes=False) -> Outputs
    compare_outputs(expected, actual, *, exact=False, rtol=1e-5, atol=1e-6) -> list[str]
    implemented_ops() -> frozenset[str]; quant_mx_array(x, dtype, axis) -> (data, E8M0 codes)
    cast_array(data, src, dst, mode="none", axis=-1), decode_fp4(carriers, dtype, axis=-1),
    encode_fp4(values, dtype, mode="rint", axis=-1), FP4_E2M1_VALUES, FP4_E1M2_VALUES
    Unsupported (PTOC-E0500), ReferenceFault (PTOC-E0501..E0504), RETURN_KEY

`run_function` executes function `fn_name` (an InCore / AIC / AIV kernel; other functions run the same way)
and returns, as LOGICAL numpy arrays, the final contents of every tensor parameter that is Out/InOut or that
the kernel wrote (keyed by parameter name), plus every returned value (keyed `return[i]`; a tuple element
`return[i][j]`). `Outputs.unwritten` names the Out/InOut parameters the run never wrote; `layout_bytes=True`
reports parameters as their raw GM byte image. The same kernel lowered through any prefix of the pipeline
must give the same outputs: that is what per-pass validation checks (`compare_outputs(frontend_run,
lowered_run)`; parameters a pass adds, such as ConvertTensorToTileOps' `<result>_out`, are ignored).

Memory model
------------
- Global memory: every tensor parameter is a flat byte buffer holding the tensor in its layout: ND
  row-major, DN column-major in the last two axes, explicit strides when the type has them, NZ blocked
  `[B, C/c0, R/16, 16, c0]` (c0 = 256 / bits, NZ-1..NZ-3). Inputs arrive as logical arrays (converted with
  numpy `astype`; packed FP4 as uint8 carrier arrays) and are packed into the layout the parameter has at
  that stage; `bytes` inputs are taken as the raw byte image. A parameter that gets no input is filled
  with the undefined pattern (below). Addressing follows the type at that stage: logical shapes and
  offsets before BlockNzTensorViews, rank-5 blocked shapes and offsets after it (a load of sizes
  `[1, TC/c0, TR/16, 16, c0]` yields the logical `[TR, TC]` tile; a store with a partition operand writes
  the tile's fractals), explicit strides when present. Every access is bounds-checked (PTOC-E0503).
  tensor ops of a kernel before ConvertTensorToTileOps compute into fresh packed ND buffers; tensor views
  (slice, reshape, view, reinterpret_view, set_validshape) address the same buffer.
- Tiles: a numpy array of the tile's physical shape, a valid region (a box, dynamic extents evaluated) and
  a pad value. Elements outside the valid region are undefined and hold NaN (floats) or the byte pattern
  0xA5 (integers, packed FP4 carriers; False for BOOL): a value computed from them stays visibly garbage.
  Loads fill and stores write only the valid region. The type a statement binds (annotation or inferred) is
  authoritative, as it is for the hardware: the bound tile takes the type's physical shape (a row-major
  reshape, e.g. after FlattenTileNdTo2D) and valid region. Memory spaces and MemRefs do not change values;
  SSA values are independent arrays (aliasing is ignored); tile.move copies.
- Scalars carry a dtype: integers wrap at their width (INDEX is 64-bit signed), `//` and `%` floor, `/` on
  integers floors too, `>>` is arithmetic on signed values; floats round to their dtype after every op.

Operator conventions (where the hardware leaves a choice)
- Float arithmetic is computed in float64 and rounded once (round-to-nearest-even) to the result dtype.
  matmul: FP16/BF16/FP32 operands accumulate into FP32 (float64 sums, one rounding); INT8 into INT32
  exactly (wrapping). The full physical K is used, as the cube unit does.
- tile.create / tensor.create give zeros (the hardware leaves them undefined; the examples accumulate
  into a created Acc tile).
- Integer `div` floors (division by zero gives 0); shifts by >= the width give 0 (or -1 for a negative
  value shifted right); a float scalar on an integer tile is applied in float64 and truncated back.
- Casts, `mode` none/rint/round/floor/ceil/trunc/odd (or the integer RoundMode 0..6 in that order:
  none, rint, floor, ceil, round, trunc, odd): rint = nearest-even, round = nearest with ties away from
  zero, none = rint. float -> float rounds exactly once with the mode (BF16/FP8 via ml_dtypes); float ->
  int rounds with the mode, saturates, NaN -> 0; int -> int wraps; to BOOL is `!= 0`.
- Packed FP4 (FP4E2M1X2, FP4E1M2X2): one byte holds two values, element 2k in the low nibble, 2k+1 in the
  high nibble; code = sign << 3 | magnitude index. E2M1 magnitudes (OCP MX): 0, 0.5, 1, 1.5, 2, 3, 4, 6.
  E1M2 magnitudes (bias 1, as CANN's float4_e1m2.h defines): 0, 0.25, 0.5, 0.75, 1, 1.25, 1.5, 1.75.
  Decoding is exact (through BF16); encoding rounds with the mode and saturates at the largest magnitude,
  NaN encodes as +0. The packed axis is the last one (ND / row-major) or the second to last (DN / col-major).
- quant_mx (OCP MX, group 32 along K): shared exponent e = floor(log2(amax)) - emax_elem (emax_elem 2 for
  E2M1, 8 for E4M3FN; e = -127 for an all-zero group), clamped to [-127, 127]; scale = 2^e stored as
  FP8E8M0 (code e + 127); data = value / 2^e rounded to nearest-even and saturated. axis=1: `[M, K]` ->
  data `[M, K(/2)]`, scale `[M, K/32]`; axis=0: `[N, K]` -> data `[K, N(/2)]` (transposed), scale `[K/32, N]`.
  quant_scale_alg="nv" is Unsupported.
- fillpad: zero, max = +inf (dtype max when it has no infinity), min = -inf (dtype min).
- ci / arange: start +/- k over the row-major flat index k. tri: lower `j <= i + diagonal`, upper
  `j >= i + diagonal`. reinterpret_view views the bytes along the contiguous axis (the last one, or the
  second to last for col-major tiles); reshape is row-major.
- gather: flat `src.reshape(-1)[index]`, per-axis with dim=, mask form by `mask_columns` (OP-9);
  tile.scatter `dst[idx[i, j], j] = src[i, j]` (an [R, 1] index moves whole rows); tensor.scatter
  `out[b, index[b, k]] = src[b, k]`; gatherb reads 32-byte blocks at byte offsets of the source tile.
- Cross-core push/pop is a FIFO inside one run (split 1 / UP_DOWN and 2 / LEFT_RIGHT push two halves).
  Synchronisation ops do nothing. get_block_idx / get_block_num / get_subblock_idx return the run
  parameters; a `with pl.spmd(n)` scope (also the front end's form of `for b in pl.spmd(n):`)
  runs its body n times with block_idx 0..n-1; a call with `attrs={"core_num": n}` runs its callee n times.
- Unsupported (PTOC-E0500, naming the op): sort32, mrgsort_format1/2, tensor.alloc windows, and any op
  without an implementation here; dtypes without a numeric model (INT4, UINT4, HF4, HF8) give PTOC-E0501.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ptoc.diagnostics import CompileError
from ptoc.ir.nodes import (
    KERNEL_TYPES,
    Abs,
    AssignStmt,
    BinOp,
    Call,
    Cast,
    ConstBool,
    ConstFloat,
    ConstInt,
    DictExpr,
    DTypeLit,
    EnumLit,
    EvalStmt,
    Expr,
    ForStmt,
    Function,
    GetItem,
    IfStmt,
    ListExpr,
    MinMax,
    NoneLit,
    PassStmt,
    Program,
    ReturnStmt,
    ScalarType,
    ScopeStmt,
    Stmt,
    StrLit,
    TensorType,
    TileType,
    TupleExpr,
    TupleType,
    Type,
    TypeLit,
    UnaryOp,
    Var,
    WhileStmt,
    YieldStmt,
)
from ptoc.ir.dtypes import DType
from ptoc.target.facts import c0 as c0_of
from ptoc.reference.values import (
    BOOL,
    FRACTAL_ROWS,
    GMBuffer,
    GTensor,
    INDEX,
    RETURN_KEY,
    Scalar,
    Tile,
    Unsupported,
    _as_int,
    _binop,
    _blocked_logical_shape,
    _fault,
    _logical_addr,
    _logical_shape,
    _minmax,
    _need_scalar,
    _np,
    _packed_strides,
    _pad_name,
    _read_logical,
    _row_major,
    _scalar,
    _scalar_cast,
    _tile,
    _truthy,
    _undef_value,
    _unop,
)
from ptoc.reference.semantics.common import _OpCtx, implementation, implemented_ops
from ptoc.reference.semantics.fp4 import quant_mx_array
from ptoc.reference.values import (
    CAST_MODES,
    FP4_E1M2_VALUES,
    FP4_E2M1_VALUES,
    ReferenceFault,
    cast_array,
    decode_fp4,
    encode_fp4,
    fp4_code_values,
)


# --------------------------------------------------------------------------------------------------
# The machine: one run
# --------------------------------------------------------------------------------------------------


class _Return(Exception):
    def __init__(self, values):
        self.values = values


@dataclass
class _Machine:
    program: Program
    ctx: object
    block_idx: int = 0
    block_num: int = 1
    subblock_idx: int = 0
    lane_loop: int | None = None  # the lane a per-lane (split_aiv) kernel is running as
    max_iterations: int = 1_000_000
    dims: dict[str, int] = field(default_factory=dict)
    fifo: list = field(default_factory=list)
    _types: dict | None = None
    # Runs a call of a kernel instead of interpreting its body: (callee, argument values, span) -> the
    # call's value. `ptoc.reference.validate` passes one that executes the kernel's emitted .pto.
    kernel_runner: object = None
    # Runs a Group launch as a whole instead of its members one by one: (group, [(member function,
    # argument values, lanes)], span, (block_idx, block_num)) -> the members' call values, in order.
    # `ptoc.reference.validate` passes one that runs the pair in one simulator process.
    group_runner: object = None

    def types(self, fn_name: str) -> dict:
        if self._types is None:
            from ptoc.ir.verifier import function_types

            self._types = function_types(self.program, self.ctx)
        return self._types.get(fn_name, {})


class _Frame:
    def __init__(self, m: _Machine, fn: Function):
        self.m = m
        self.fn = fn
        self.types = m.types(fn.name)
        self.env: dict[str, object] = {}
        self.blocked = fn.has_attr("nz_tensor_views_blocked")

    # ------------------------------------------------------------------ expressions
    def eval(self, e: Expr):
        form = _EVAL.get(type(e)) or next((f for t, f in _EVAL.items() if isinstance(e, t)), None)
        if form is None:
            raise Unsupported(type(e).__name__, "expression form", e.span)
        return form(self, e)

    def var(self, e: Var):
        if e.name in self.env:
            return self.env[e.name]
        if e.name in self.m.dims:
            return Scalar(self.m.dims[e.name], INDEX)
        _fault(f"{e.name!r} has no value here (a dynamic dimension no input fixes?)", e.span,
               code="PTOC-E0502", hint="pass the dimension in inputs, e.g. inputs={'M': 96}")

    def absolute(self, e: Abs):
        v = self.eval(e.operand)
        _need_scalar(v, "abs", e.span)
        return _scalar(abs(v.value), v.dtype)

    def get_item(self, e: GetItem):
        base = self.eval(e.value)
        i = _as_int(self.eval(e.index), "a tuple index", e.span)
        if not isinstance(base, (tuple, list)) or not -len(base) <= i < len(base):
            _fault(f"cannot take element {i} of {type(base).__name__}", e.span)
        return base[i]

    def ints(self, items, what: str = "an extent") -> tuple[int, ...]:
        if items is None:
            return ()
        return tuple(_as_int(x, what) for x in items)

    def dims(self, exprs) -> tuple[int, ...]:
        return tuple(_as_int(self.eval(d), "a dimension", getattr(d, "span", None)) for d in exprs)

    # ------------------------------------------------------------------ calls
    def call(self, c: Call):
        if c.kind == "func":
            return self.call_function(c)
        from ptoc.ops.registry import REGISTRY, load_all, resolve

        load_all()
        args = [self.eval(a) for a in c.args]
        kwargs = {k: self.eval(v) for k, v in c.kwargs}
        op = REGISTRY.get(c.op)
        if op is None:
            op, _why = resolve(c, [_fake_type(v) for v in args])
        if op is None:
            raise Unsupported(c.op, "unknown operator", c.span)
        impl = implementation(op)
        if impl is None:
            raise Unsupported(op.name, span=c.span)
        names = op.param_names
        if len(args) > len(names):
            _fault(f"pl.{op.name} takes at most {len(names)} positional arguments", c.span)
        bound: dict[str, object] = {n: None for n in names}
        exprs: dict[str, Expr] = {}
        for n, v, ex in zip(names, args, c.args):
            bound[n] = v
            exprs[n] = ex
        extra = {}
        for (k, ex), v in zip(c.kwargs, kwargs.values()):
            if k in bound:
                bound[k] = v
                exprs[k] = ex
            else:
                extra[k] = v
        with np.errstate(all="ignore"):
            return impl(_OpCtx(self, c, op.name, exprs, extra), bound)

    def call_function(self, c: Call):
        callee = self.m.program.function(c.op)
        if callee is None:
            _fault(f"call of unknown function {c.op!r}", c.span)
        args = [self.eval(a) for a in c.args]
        launch = _launch_count(c)
        if launch is not None:  # `attrs={"core_num": n}`: the callee runs n times, block_idx 0..n-1
            n = _as_int(self.eval(launch), "a block count", c.span)
            saved = (self.m.block_idx, self.m.block_num)
            value = None
            try:
                for i in range(n):
                    self.m.block_idx, self.m.block_num = i, n
                    value = self.enter(callee, args, c)
            finally:
                self.m.block_idx, self.m.block_num = saved
            return value
        return self.enter(callee, args, c)

    def enter(self, callee: Function, args: list, c: Call):
        """Run `callee` on argument values `args` (one block)."""
        if self.m.kernel_runner is not None and callee.func_type in KERNEL_TYPES:
            if self.m.block_num > 1:
                return self.m.kernel_runner(callee, args, c.span, block=(self.m.block_idx, self.m.block_num))
            return self.m.kernel_runner(callee, args, c.span)
        if callee.func_type == "Group" and _launches_members(callee):
            return self.call_group(callee, args, c)
        if callee.func_type == "InCore" and _split_aiv(callee) and self.m.lane_loop is None:
            # a kernel written per lane (LowerAutoVectorSplit) runs once per vector lane; its cube work is
            # the same on both runs
            value = None
            try:
                for lane in range(2):
                    self.m.lane_loop, self.m.subblock_idx = lane, lane
                    value = self.enter(callee, args, c)
            finally:
                self.m.lane_loop, self.m.subblock_idx = None, 0
            return value
        frame = _Frame(self.m, callee)
        kwargs = {k: self.eval(v) for k, v in c.kwargs if k not in ("attrs", "device")}
        for p, v in zip(callee.params, args):
            frame.env[p.name] = _blocked_nz_argument(frame, p, v, c.span)
        for k, v in kwargs.items():
            frame.env[k] = v
        values = frame.run_body()
        if not values:
            return None
        return values[0] if len(values) == 1 and not callee.returns_tuple else tuple(values)

    def call_group(self, callee: Function, args: list, c: Call):
        """A Group launch: its member calls run as separate programs joined by the cross-core pipes
        (`ptoc.reference.pipes`); then the rest of the Group body (its return) runs as usual."""
        from ptoc.reference.pipes import GroupRun, PipeFault

        frame = _Frame(self.m, callee)
        for p, v in zip(callee.params, args):
            frame.env[p.name] = v
        launches = [s for s in callee.body if isinstance(s, (AssignStmt, EvalStmt))
                    and isinstance(s.value if isinstance(s, AssignStmt) else s.expr, Call)
                    and (s.value if isinstance(s, AssignStmt) else s.expr).kind == "func"]
        rest = [s for s in callee.body if all(s is not x for x in launches)]
        members = [(s.value if isinstance(s, AssignStmt) else s.expr) for s in launches]
        if self.m.group_runner is not None:
            launch = []
            for m in members:
                fn = self.m.program.function(m.op)
                if fn is None:
                    _fault(f"call of unknown function {m.op!r}", m.span)
                launch.append((fn, [frame.eval(a) for a in m.args], 2 if _dual_lane(fn) else 1))
            span = c.span if c is not None else callee.span
            values = self.m.group_runner(callee, launch, span, (self.m.block_idx, self.m.block_num))
            return self._group_rest(frame, callee, launches, rest, values)
        # a vector kernel marked for dual-lane dispatch runs twice, as lane 0 and lane 1
        names, lanes, calls, first = [], {}, [], []
        for m in members:
            first.append(len(calls))
            fn = self.m.program.function(m.op)
            for lane in range(2 if fn is not None and _dual_lane(fn) else 1):
                name = m.op if lane == 0 else f"{m.op} (lane {lane})"
                names.append(name)
                lanes[name] = lane
                calls.append(lambda m=m: frame.call_function(m))
        run = GroupRun(names, lanes)
        try:
            values = run.run(calls)
        except PipeFault as e:
            _fault(f"launching {callee.name}: {e}", c.span if c is not None else callee.span)
        return self._group_rest(frame, callee, launches, rest, [values[i] for i in first])

    @staticmethod
    def _group_rest(frame: _Frame, callee: Function, launches: list, rest: list, values: list):
        """Bind the member calls' values and run the rest of the Group body (its return)."""
        for s, v in zip(launches, values):
            if isinstance(s, AssignStmt):
                frame.env[s.target.name] = v
        try:
            frame.block(tuple(rest))
        except _Return as r:
            vals = r.values
            if not vals:
                return None
            return vals[0] if len(vals) == 1 and not callee.returns_tuple else tuple(vals)
        return None

    # ------------------------------------------------------------------ statements
    def run_body(self) -> tuple:
        try:
            self.block(self.fn.body)
        except _Return as r:
            return r.values
        return ()

    def block(self, body: tuple[Stmt, ...]) -> tuple | None:
        for s in body:
            if isinstance(s, YieldStmt):
                return tuple(self.eval(v) for v in s.values)
            self.stmt(s)
        return None

    def bind(self, targets, values) -> None:
        for t, v in zip(targets, values):
            self.env[t.name] = v

    def stmt(self, s: Stmt) -> None:
        if isinstance(s, AssignStmt):
            v = self.eval(s.value)
            bound = self.conform(v, self.types.get(s.target.name))
            if _is_lane_local(s.value) and isinstance(v, Tile) and isinstance(bound, Tile):
                bound = _keep_lane_valid(v, bound)
            self.env[s.target.name] = bound
        elif isinstance(s, EvalStmt):
            self.eval(s.expr)
        elif isinstance(s, ReturnStmt):
            raise _Return(tuple(self.eval(v) for v in s.values))
        elif isinstance(s, ForStmt):
            self.for_stmt(s)
        elif isinstance(s, WhileStmt):
            vals = [self.eval(v) for v in s.init_values]
            n = 0
            while True:
                self.bind(s.iter_args, vals)
                if not _truthy(self.eval(s.cond)):
                    break
                y = self.block(s.body)
                if y is not None:
                    vals = list(y)
                n += 1
                if n > self.m.max_iterations:
                    _fault(f"a while loop ran more than {self.m.max_iterations} iterations", s.span,
                           hint="raise max_iterations or check the loop condition")
            self.bind(s.results, vals)
        elif isinstance(s, IfStmt):
            body = s.then_body if _truthy(self.eval(s.cond)) else s.else_body
            y = self.block(body)
            if y is not None:
                self.bind(s.results, y)
        elif isinstance(s, ScopeStmt):
            self.scope(s)
        elif isinstance(s, PassStmt):
            pass
        elif isinstance(s, YieldStmt):  # pragma: no cover - handled by block()
            pass
        else:
            raise Unsupported(type(s).__name__, "statement", s.span)

    def for_stmt(self, s: ForStmt) -> None:
        start = _as_int(self.eval(s.start), "a loop bound", s.span)
        stop = _as_int(self.eval(s.stop), "a loop bound", s.span)
        step = _as_int(self.eval(s.step), "a loop step", s.span)
        if step == 0:
            _fault("a loop with step 0", s.span)
        vals = [self.eval(v) for v in s.init_values]
        n = 0
        for i in range(start, stop, step):
            self.env[s.var.name] = Scalar(i, INDEX)
            self.bind(s.iter_args, vals)
            y = self.block(s.body)
            if y is not None:
                vals = list(y)
            n += 1
            if n > self.m.max_iterations:
                _fault(f"a loop ran more than {self.m.max_iterations} iterations", s.span)
        self.bind(s.results, vals)

    def scope(self, s: ScopeStmt) -> None:
        if s.kind == "spmd":
            count = s.args[0] if s.args else dict(s.kwargs).get("core_num")
            n = _as_int(self.eval(count), "a block count", s.span) if count is not None else 1
            saved = (self.m.block_idx, self.m.block_num)
            try:
                for i in range(n):
                    self.m.block_idx, self.m.block_num = i, n
                    if s.var is not None:
                        self.env[s.var.name] = Scalar(i, INDEX)
                    self.block(s.body)
            finally:
                self.m.block_idx, self.m.block_num = saved
            return
        if s.var is not None:
            self.env[s.var.name] = Scalar(0, INDEX)
        self.block(s.body)

    # ------------------------------------------------------------------ declared types
    def conform(self, v, t: Type | None):
        """Give a bound value the type its statement declares (what the hardware sees)."""
        if t is None:
            return v
        if isinstance(t, TupleType) and isinstance(v, tuple) and len(t.types) == len(v):
            return tuple(self.conform(x, y) for x, y in zip(v, t.types))
        if isinstance(t, ScalarType) and isinstance(v, Scalar):
            if v.dtype != t.dtype and v.dtype.is_int and t.dtype.is_int:
                return _scalar(v.value, t.dtype)
            return v
        if isinstance(t, TileType) and isinstance(v, Tile) and t.dtype == v.dtype:
            return self.conform_tile(v, t)
        return v

    def conform_tile(self, v: Tile, t: TileType) -> Tile:
        from ptoc.ir.types import effective_tile_view

        try:
            shape = self.dims(t.shape)
            valid = self.dims(t.view.valid_shape) if t.view is not None and t.view.valid_shape else shape
        except CompileError:
            return v
        data = v.data
        if tuple(shape) != data.shape:
            if int(np.prod(shape, dtype=np.int64)) != data.size:
                return v  # not a reshape of this value: keep what the op computed
            data = data.reshape(shape)
        eff = effective_tile_view(t)
        for d, s in zip(valid, shape):
            if d < 0 or d > s:
                _fault(f"the valid region {list(valid)} exceeds the tile shape {list(shape)}", t.span,
                       code="PTOC-E0503")
        out = _tile(data, v.dtype, valid, pad=_pad_name(eff.get("pad")), memory=t.memory or v.memory,
                    blayout=eff.get("blayout"))
        out.uninit = v.uninit
        return out


def _is_lane_local(e) -> bool:
    """A shard's type bounds both vector lanes' valid extents; the value computed for this lane is exact."""
    return isinstance(e, Call) and e.kind == "op" and e.op in ("tile.aiv_shard", "aiv_shard")


def _keep_lane_valid(v: Tile, t: Tile) -> Tile:
    if t.data.shape != v.data.shape or all(a >= b for a, b in zip(v.valid, t.valid)):
        return t
    return _tile(t.data, t.dtype, tuple(min(a, b) for a, b in zip(v.valid, t.valid)), pad=t.pad,
                 memory=t.memory, blayout=t.blayout)


def _key(k):
    if isinstance(k, Scalar):
        return k.value
    return k



# expression form -> how a frame evaluates it
_EVAL = {
    Var: _Frame.var,
    ConstInt: lambda f, e: _scalar(e.value, e.dtype),
    ConstFloat: lambda f, e: _scalar(e.value, e.dtype),
    ConstBool: lambda f, e: Scalar(bool(e.value), BOOL),
    StrLit: lambda f, e: e.value,
    NoneLit: lambda f, e: None,
    DTypeLit: lambda f, e: e.dtype,
    EnumLit: lambda f, e: e,
    TypeLit: lambda f, e: e.type,
    ListExpr: lambda f, e: [f.eval(x) for x in e.items],
    TupleExpr: lambda f, e: tuple(f.eval(x) for x in e.items),
    DictExpr: lambda f, e: {_key(f.eval(k)): f.eval(v) for k, v in e.items},
    BinOp: lambda f, e: _binop(e.op, f.eval(e.lhs), f.eval(e.rhs), e.span),
    UnaryOp: lambda f, e: _unop(e.op, f.eval(e.operand), e.span),
    MinMax: lambda f, e: _minmax(e.op, f.eval(e.lhs), f.eval(e.rhs), e.span),
    Abs: _Frame.absolute,
    Cast: lambda f, e: _scalar_cast(f.eval(e.operand), e.dtype, "none", e.span),
    GetItem: _Frame.get_item,
    Call: lambda f, e: f.call(e),
}

def _fake_type(v) -> Type | None:
    if isinstance(v, Tile):
        return TileType((), v.dtype)
    if isinstance(v, GTensor):
        return TensorType((), v.dtype)
    if isinstance(v, Scalar):
        return ScalarType(v.dtype)
    return None


# --------------------------------------------------------------------------------------------------
# Run one kernel
# --------------------------------------------------------------------------------------------------


def _bind_dims(m: _Machine, frame: _Frame, fn: Function, inputs: dict) -> None:
    dyn = {d.name for d in m.program.dynamic_dims}
    for name, v in inputs.items():
        if name in dyn and not isinstance(v, (np.ndarray, bytes, bytearray)):
            m.dims[name] = _as_int(v, f"the value of dynamic dimension {name}")
    for p in fn.params:
        t = p.type
        v = inputs.get(p.name)
        if not isinstance(t, TensorType) or not isinstance(v, np.ndarray):
            continue
        have = tuple(v.shape)
        if t.layout == "NZ" and len(t.shape) == 5 and frame.blocked:
            c0 = c0_of(t.dtype)
            if len(have) < 2 or c0 is None or have[-2] % FRACTAL_ROWS or have[-1] % c0:
                _fault(f"input {p.name!r} of shape {list(have)} is not a whole number of NZ fractals",
                       p.span, code="PTOC-E0502")
            b = int(np.prod(have[:-2], dtype=np.int64)) if len(have) > 2 else 1
            have = (b, have[-1] // c0, have[-2] // FRACTAL_ROWS, FRACTAL_ROWS, c0)
        if len(have) != len(t.shape):
            _fault(f"input {p.name!r} has shape {list(v.shape)} but the parameter has rank {len(t.shape)}",
                   p.span, code="PTOC-E0502")
        for d, n in zip(t.shape, have):
            if isinstance(d, Var) and d.name not in frame.env and d.name not in m.dims:
                m.dims[d.name] = int(n)


def _param_tensor(frame: _Frame, name: str, t: TensorType, inp, span) -> GTensor:
    dt = t.dtype
    _np(dt)
    g = _param_layout(frame, name, t, span)
    lshape = _param_logical_shape(g, name, inp, span) if g.blocked else g.shape
    addr = _logical_addr(g, lshape)
    need = int(addr.max()) + dt.bytes if addr.size else 0
    if isinstance(inp, (bytes, bytearray)):
        buf = GMBuffer(max(need, len(inp)), name)
        buf.data[:len(inp)] = np.frombuffer(bytes(inp), dtype=np.uint8)
        if len(inp) < need:
            _fault(f"input {name!r} holds {len(inp)} bytes; the parameter spans {need}", span, code="PTOC-E0502")
    else:
        buf = GMBuffer(need, name)
        el = buf.elems(dt)
        el[:] = _undef_value(dt)
        if inp is not None:
            el[addr // dt.bytes] = _input_array(name, inp, lshape, dt, span)
    g.buf = buf
    return g


def _param_layout(frame: _Frame, name: str, t: TensorType, span) -> GTensor:
    """A GM tensor (no buffer yet) with the parameter's shape, layout, strides and view at this stage."""
    dt = t.dtype
    shape = frame.dims(t.shape)
    view = t.view
    layout = t.layout
    stride = frame.dims(view.stride) if view is not None and view.stride else None
    valid = frame.dims(view.valid_shape) if view is not None and view.valid_shape else None
    pad = _pad_name(view.pad) if view is not None else None
    blocked = layout == "NZ" and len(shape) == 5 and frame.blocked
    if layout == "NZ" and not blocked:
        if len(shape) < 2 or c0_of(dt) is None:
            _fault(f"parameter {name!r}: an NZ tensor needs rank >= 2 and a byte-sized dtype", span)
        rows, cols = shape[-2:]
        return GTensor(None, dt, shape, None, 0, layout, valid, pad,
                       nz=(_row_major(shape[:-2]), rows, cols, c0_of(dt)))
    return GTensor(None, dt, shape, stride or _packed_strides(shape, layout), 0, layout, valid, pad,
                   blocked=blocked)


def _blocked_nz_argument(frame: _Frame, p, v, span):
    """A logical NZ tensor passed to a kernel whose parameter BlockNzTensorViews made rank-5 blocked
    (`[B, C/c0, R/16, 16, c0]`): the same bytes seen through the blocked shape (NZ-2: blocking moves no
    data; the caller, an orchestration function, keeps the logical shape)."""
    t = p.type
    if not (isinstance(v, GTensor) and v.nz is not None and isinstance(t, TensorType) and t.layout == "NZ"
            and len(t.shape) == 5 and frame.blocked):
        return v
    shape = frame.dims(t.shape)
    lead, rows, cols, c0 = v.nz
    b = int(np.prod(v.shape[:-2], dtype=np.int64)) if v.rank > 2 else 1
    if (b, cols // c0, rows // FRACTAL_ROWS, FRACTAL_ROWS, c0) != tuple(shape) or tuple(v.shape[-2:]) != (rows, cols):
        _fault(f"argument {p.name!r}: an NZ tensor of shape {list(v.shape)} does not block to the parameter's "
               f"{list(shape)}", span, code="PTOC-E0503", hint="pass the whole NZ tensor, not a window of it")
    return GTensor(v.buf, v.dtype, tuple(shape), _packed_strides(shape, "NZ"), v.base, "NZ", None, v.pad,
                   blocked=True)


def _param_logical_shape(g: GTensor, name: str, inp, span) -> tuple[int, ...]:
    """The logical shape of a blocked NZ parameter: the input's, checked to block to the parameter's shape."""
    shape = g.shape
    lshape = tuple(inp.shape) if isinstance(inp, np.ndarray) else _blocked_logical_shape(shape)
    lead = int(np.prod(lshape[:-2], dtype=np.int64)) if len(lshape) > 2 else 1
    c0 = shape[4]
    if len(lshape) < 2 or lshape[-2] % FRACTAL_ROWS or lshape[-1] % c0 or \
            (lead, lshape[-1] // c0, lshape[-2] // FRACTAL_ROWS, FRACTAL_ROWS, c0) != tuple(shape):
        _fault(f"input {name!r} of logical shape {list(lshape)} does not block to the parameter's "
               f"{list(shape)}", span, code="PTOC-E0502")
    return lshape


def _input_array(name: str, inp, lshape, dt: DType, span) -> np.ndarray:
    arr = np.asarray(inp)
    if tuple(arr.shape) != tuple(lshape):
        _fault(f"input {name!r} has shape {list(arr.shape)}, the parameter is {list(lshape)}", span,
               code="PTOC-E0502")
    if dt.is_packed_fp4 and arr.dtype != np.uint8:
        _fault(f"input {name!r}: packed {dt.name} takes uint8 carrier arrays (two values a byte)", span,
               code="PTOC-E0502")
    with np.errstate(all="ignore"):
        return arr.astype(_np(dt))


def _output_array(v, params: dict[str, tuple[GTensor, tuple[int, ...]]]):
    if isinstance(v, GTensor):
        for g, lshape in params.values():
            if v is g:
                return _read_logical(g, lshape, "reading an output")
        return _read_logical(v, None, "reading an output")
    if isinstance(v, Tile):
        return v.data.copy()
    if isinstance(v, Scalar):
        return np.array(v.value, dtype=_np(v.dtype))
    return v


class Outputs(dict):
    """The result of `run_function`: name -> array, plus `unwritten`, the Out/InOut parameters the run
    never wrote (reported with their initial contents; `compare_outputs` does not hold a later stage to
    them, since ConvertTensorToTileOps stores a returned tensor-level result into such a parameter)."""

    unwritten: frozenset[str] = frozenset()


def _bind_params(frame: _Frame, fn: Function, inputs: dict) -> dict[str, tuple[GTensor, tuple[int, ...]]]:
    """Bind every parameter of `fn` in `frame` from `inputs`; the tensor parameters with their logical shapes."""
    params: dict[str, tuple[GTensor, tuple[int, ...]]] = {}
    for p in fn.params:
        t, v = p.type, inputs.get(p.name)
        if isinstance(t, TensorType):
            g = _param_tensor(frame, p.name, t, v, p.span)
            params[p.name] = (g, _logical_shape(g) if not (g.blocked and isinstance(v, np.ndarray))
                              else tuple(v.shape))
            frame.env[p.name] = g
        elif isinstance(t, ScalarType):
            if v is None:
                _fault(f"scalar parameter {p.name!r} needs a value in inputs", p.span, code="PTOC-E0502")
            if isinstance(v, np.ndarray):
                v = v.item()
            if isinstance(v, np.generic):
                v = v.item()
            frame.env[p.name] = _scalar(v, t.dtype)
        elif isinstance(t, TileType):
            if not isinstance(v, np.ndarray):
                _fault(f"tile parameter {p.name!r} needs an array in inputs", p.span, code="PTOC-E0502")
            frame.env[p.name] = _tile(np.asarray(v).astype(_np(t.dtype)), t.dtype, memory=t.memory)
        else:
            frame.env[p.name] = v
    return params


def _launch_count(c: Call) -> Expr | None:
    """The `core_num` of a call's `attrs={"core_num": n, ...}` (an outlined spmd block's launch), if any."""
    attrs = c.kwarg("attrs")
    if isinstance(attrs, DictExpr):
        for k, v in attrs.items:
            if isinstance(k, StrLit) and k.value == "core_num":
                return v
    return None


def _split_aiv(fn: Function) -> bool:
    """A kernel LowerAutoVectorSplit wrote per lane (`split_aiv`)."""
    v = fn.attr("split_aiv")
    return isinstance(v, ConstBool) and v.value



def _launches_members(group: Function) -> bool:
    """A Group whose body calls its member kernels. Before OutlineIncoreScopes a cluster's Group still holds
    the cube and vector work itself (no member call): it runs as one ordinary function body."""
    return any(isinstance(v, Call) and v.kind == "func"
               for s in group.body if isinstance(s, (AssignStmt, EvalStmt))
               for v in ((s.value if isinstance(s, AssignStmt) else s.expr),))

def _dual_lane(fn: Function) -> bool:
    """An AIV kernel SplitVectorKernel marked `dual_aiv_dispatch`: the runtime launches it on both lanes."""
    if fn.func_type != "AIV":
        return False
    v = fn.attr("dual_aiv_dispatch")
    return isinstance(v, ConstBool) and v.value


def run_function(program: Program, fn_name: str, inputs: dict, ctx=None, *, block_idx: int = 0,
                 block_num: int = 1, subblock_idx: int = 0, all_blocks: bool = False,
                 max_iterations: int = 1_000_000, layout_bytes: bool = False, kernel_runner=None,
                 group_runner=None) -> Outputs:
    """Execute function `fn_name` of `program` on `inputs` (parameter name -> logical numpy array, raw
    bytes, or a Python / numpy scalar; dynamic dimensions may be given by name). Returns parameter name ->
    final logical contents for every Out/InOut tensor parameter and every tensor the kernel wrote, plus
    `return[i]` -> each returned value. `all_blocks` runs block indices 0..block_num-1 in turn on the same
    global memory. `layout_bytes` reports parameters as their raw GM byte image (uint8) instead.
    `kernel_runner`: (callee, argument values, span) -> value, run for every call of a kernel;
    `group_runner`: run for every Group launch as a whole (see `_Machine.group_runner`)."""
    fn = program.function(fn_name)
    if fn is None:
        _fault(f"the program has no function {fn_name!r}", code="PTOC-E0502")
    m = _Machine(program, ctx, block_idx, block_num, subblock_idx, max_iterations=max_iterations,
                 kernel_runner=kernel_runner, group_runner=group_runner)
    frame = _Frame(m, fn)
    names = {p.name for p in fn.params}
    dyn = {d.name for d in program.dynamic_dims}
    unknown = [k for k in inputs if k not in names and k not in dyn]
    if unknown:
        _fault(f"{fn_name} has no parameter {unknown[0]!r} (parameters: {', '.join(p.name for p in fn.params)})",
               code="PTOC-E0502")
    _bind_dims(m, frame, fn, inputs)
    params = _bind_params(frame, fn, inputs)
    env0 = dict(frame.env)
    if all_blocks:
        values: tuple = ()
        for b in range(block_num):
            m.block_idx = b
            frame.env = dict(env0)
            values = _run_entry(frame, fn)
    else:
        values = _run_entry(frame, fn)
    out = Outputs()
    unwritten = set()
    for p in fn.params:
        if p.name in params:
            g, lshape = params[p.name]
            if p.direction in ("Out", "InOut") or g.buf.written:
                if layout_bytes:
                    out[p.name] = g.buf.data[:g.buf.nbytes].copy()
                else:
                    out[p.name] = _read_logical(g, lshape, "reading an output")
                if not g.buf.written:
                    unwritten.add(p.name)
    out.unwritten = frozenset(unwritten)
    for i, v in enumerate(values):
        if isinstance(v, tuple):
            for j, x in enumerate(v):
                out[RETURN_KEY.format(i) + f"[{j}]"] = _output_array(x, params)
        else:
            out[RETURN_KEY.format(i)] = _output_array(v, params)
    return out


def _run_entry(frame: _Frame, fn: Function) -> tuple:
    """The body of the function a run starts with; a Group launches its members (`call_group`); a kernel
    written per vector lane (`split_aiv`) runs once per lane, as a call of it does (`enter`)."""
    if fn.func_type == "InCore" and _split_aiv(fn) and frame.m.lane_loop is None:
        env0, values = dict(frame.env), ()
        try:
            for lane in range(2):
                frame.m.lane_loop, frame.m.subblock_idx = lane, lane
                frame.env = dict(env0)
                values = frame.run_body()
        finally:
            frame.m.lane_loop, frame.m.subblock_idx = None, 0
        return values
    if fn.func_type != "Group":
        return frame.run_body()
    v = frame.call_group(fn, [frame.env.get(p.name) for p in fn.params], None)
    if v is None:
        return ()
    return v if isinstance(v, tuple) else (v,)


def compare_outputs(expected: dict, actual: dict, *, exact: bool = False, rtol: float = 1e-5,
                    atol: float = 1e-6) -> list[str]:
    """Differences between two `run_function` results (empty when they agree). Returned values and the
    parameters both report are compared; a parameter only `expected` reports was not written; a parameter
    `expected` left unwritten (`Outputs.unwritten`) is not compared. Integer,
    boolean and packed data compare bit for bit; floats bit for bit when `exact`, else with allclose
    (NaN positions, the undefined elements, must match)."""
    bad: list[str] = []
    skip = getattr(expected, "unwritten", frozenset())
    for k, a in expected.items():
        if k in skip:
            continue
        if k not in actual:
            bad.append(f"{k}: missing from the second run")
            continue
        b = actual[k]
        a, b = np.asarray(a), np.asarray(b)
        if a.shape != b.shape or a.dtype != b.dtype:
            bad.append(f"{k}: {a.dtype}{list(a.shape)} vs {b.dtype}{list(b.shape)}")
            continue
        if a.size == 0:
            continue
        kind = np.dtype(a.dtype).kind
        floaty = kind == "f" or (kind == "V" and a.dtype.itemsize in (1, 2))
        if not floaty or exact:
            ab = np.ascontiguousarray(a).view(np.uint8).reshape(a.shape + (-1,))
            bb = np.ascontiguousarray(b).view(np.uint8).reshape(b.shape + (-1,))
            diff = (ab != bb).any(axis=-1)
            if floaty:  # any NaN equals any NaN
                diff &= ~(np.isnan(a.astype(np.float64)) & np.isnan(b.astype(np.float64)))
            if diff.any():
                idx = tuple(int(i) for i in np.argwhere(diff)[0])
                bad.append(f"{k}: {int(diff.sum())} element(s) differ, first at {list(idx)}: {a[idx]!r} vs {b[idx]!r}")
            continue
        x, y = a.astype(np.float64), b.astype(np.float64)
        nan_x, nan_y = np.isnan(x), np.isnan(y)
        close = np.isclose(x, y, rtol=rtol, atol=atol, equal_nan=True) & (nan_x == nan_y)
        if not close.all():
            idx = tuple(int(i) for i in np.argwhere(~close)[0])
            bad.append(f"{k}: {int((~close).sum())} element(s) differ, first at {list(idx)}: {x[idx]} vs {y[idx]}")
    return bad


__all__ = [
    "CAST_MODES",
    "FP4_E1M2_VALUES",
    "FP4_E2M1_VALUES",
    "GTensor",
    "Outputs",
    "RETURN_KEY",
    "ReferenceFault",
    "Scalar",
    "Tile",
    "Unsupported",
    "cast_array",
    "compare_outputs",
    "decode_fp4",
    "encode_fp4",
    "fp4_code_values",
    "implemented_ops",
    "quant_mx_array",
    "run_function",
]
