"""BlockNzTensorViews: logical NZ tensors become pto-isa's rank-5 blocked NZ views.

Purpose
-------
`pl.Tensor[[R, C], dtype, pl.NZ]` (or `[[B, R, C], ...]`) declares that the bytes in GM already sit in
the native NZ fractal order; the DSL keeps the logical shape and the logical windows. pto-isa's
`Layout::NZ` GlobalTensor needs the blocked description instead, so this pass rewrites, in every kernel
(InCore / AIC / AIV function), every NZ tensor type and the ops that address it: the `tile.load` that
reads it into Mat (the NZ->NZ cube operand path), the supported Acc write-back `tile.store`, leading-axis
`tensor.slice` windows and `tensor.dim` queries. Orchestration functions are left alone (NZ-16: NZ
arguments arrive there with their logical shape; only the compiled kernel parameter is blocked).

Before::

    @pl.function(type=pl.FunctionType.InCore)
    def mm(self, w: pl.Tensor[[4, 512, 1024], pl.INT8, pl.NZ], ...):     # [E, N, K], INT8: c0 = 32
        # w[1:2, 256:512, 512:1024]
        wt: pl.Tile[[256, 512], pl.INT8, pl.Mem.Mat] = pl.tile.load(w, [1, 256, 512], [1, 256, 512],
                                                                     target_memory=pl.Mem.Mat)

After::

    @pl.function(type=pl.FunctionType.InCore)
    def mm(self, w: pl.Tensor[[4, 32, 32, 16, 32], pl.INT8, pl.NZ], ...):
        pl.func_attr({"nz_tensor_views_blocked": True})
        wt: pl.Tile[[256, 512], pl.INT8, pl.Mem.Mat] = pl.tile.load(w, [1, 16, 16, 0, 0], [1, 16, 16, 16, 32],
                                                                     target_memory=pl.Mem.Mat)

Rules (docs/rules.md, from seed 000)
------------------------------------
- NZ-1 / NZ-2 shapes. c0 = 256 / bit width (`ptoc.target.arch.c0_of`); `[..., R, C]` -> `[B, C/c0, R/16, 16, c0]`, always
  rank 5: rank 2 gets B = 1, rank 3 uses its leading axis (which may be dynamic), rank > 3 folds its
  static leading axes into B (their product). Every NZ TensorType of a kernel is rewritten: parameters,
  return types, statement and yield annotations. Strides are left to MaterializeTensorStrides (NZ-3).
- NZ-4 loads. `tile.load` offsets `[..lead.., r0, k0]` -> `[b, k0/c0, r0/16, 0, 0]`, sizes
  `[..lead.., TR, TC]` -> `[1, TC/c0, TR/16, 16, c0]`; leading offsets fold row-major (`[g, e]` of
  `[G, E, ...]` -> `g * E + e`); leading extents must be 1 (one panel per load). valid_shapes block the
  same way, a dynamic valid row / column extent as `FloorDiv(v, 16)` / `FloorDiv(v, c0)` when it is
  provably a multiple of the factor. The result tile stays the logical 2-D `[TR, TC]` Mat tile: the
  statement keeps (or, unannotated, gains) that annotation.
- NZ-6. Only `target_memory=pl.Mem.Mat` may read an NZ tensor.
- NZ-7 Acc write-back. `tile.store` of an Acc tile into an NZ tensor, on targets whose arch facts allow it
  (A2/A3), when: FP32 Acc into FP32 GM (c0 = 8); the tile is static, positive, 2-D and fully valid with rows
  and columns multiples of 16; it stores at most 65535 rows and 4095 columns; its physical Acc allocation
  fits L0C; it covers the whole row axis of the target at row offset 0; its batch extent is 1 (any batch
  offset); its column offset is non-negative and provably a multiple of 8. atomic / pre_quant / pre_relu,
  dtype conversion, Vec/Mat sources, dynamic or partially valid tiles are rejected. The store gets the
  explicit blocked partition `[1, TC/8, R/16, 16, 8]` as its 4th argument; kwargs and attrs are kept.
- NZ-8 / NZ-9 symbolic trailing offsets (and valid extents). Accepted only when `ptoc.analysis.arith`
  proves them a multiple of the axis factor AND non-negative; the blocked offset is `FloorDiv` of the
  whole expression in its own dtype (`(nb * 256) // 16`, never `nb * 16`).
- NZ-10 rejections (user errors with a hint): see `CODES` PTOC-E0340..E0353.
- NZ-11 `tensor.slice` that narrows only leading axes becomes a rank-5 slice `[b, 0, 0, 0, 0]` /
  `[batch, C/c0, R/16, 16, c0]` (drop_dims disappear: the leading axes are folded anyway).
  `tensor.reshape` to the whole-tensor flat `[N]` is kept (an ND result). `tensor.dim` of a logical axis
  becomes its constant (or `tensor.dim(t, 0)` for a dynamic rank-3 batch).
- NZ-12 GM-gap guard (temporary, pto-isa#317): `check_nz_gm_gap`.
- NZ-13 idempotence: every rewritten function is marked `pl.func_attr({"nz_tensor_views_blocked": True})`
  and marked functions are skipped (a blocked shape cannot be told from a logical one).
"""

from __future__ import annotations


from ptoc.lazy_dataclass import dataclass
from ptoc.analysis.arith import PROVABLE_FORMS, Facts, blocked_offset, fold
from ptoc.context import CompileContext
from ptoc.diagnostics import CompileError, Diagnostic, InternalError, Span
from ptoc.ir import dtypes
from ptoc.ir.nodes import (
    AssignStmt,
    BinOp,
    Call,
    ConstBool,
    ConstInt,
    DictExpr,
    EnumLit,
    Expr,
    Function,
    GetItem,
    ListExpr,
    Node,
    NoneLit,
    Program,
    StrLit,
    TensorType,
    TensorView,
    TileType,
    TupleExpr,
    Type,
    Var,
)
from ptoc.ir.printer import print_expr
from ptoc.ir.verifier import FastMutator, NodeIndex, iter_nodes
from ptoc.ir.visitor import replace
from ptoc.passes.manager import Pass
from ptoc.passes.properties import KERNEL_TYPES
from ptoc.target import arch as _target
from ptoc.target.arch import FRACTAL_ROWS, get_arch
from ptoc.passes.common import resolve_op

INDEX = dtypes.INDEX
MARK = "nz_tensor_views_blocked"

# NZ-7 / NZ-12 field limits (ptoc.target.arch)
STORE_MAX_ROWS = _target.NZ_STORE_MAX_ROWS
STORE_MAX_COLS = _target.NZ_STORE_MAX_COLS
STORE_ROW_COL_MULTIPLE = _target.NZ_STORE_ROW_COL_MULTIPLE
GM_GAP_LIMIT = _target.NZ_LOAD_GM_GAP_LIMIT

# Store keywords that change what is written (NZ-7 rejects them on the NZ write-back).
_STORE_REJECTED_KWARGS = ("atomic", "pre_quant", "pre_relu")

# Consumers that may take an NZ tensor, with the parameter that holds it.
_NZ_OPERAND = {
    "tile.load": "tensor",
    "tile.store": "output",
    "tensor.slice": "tensor",
    "tensor.reshape": "tensor",
    "tensor.dim": "tensor",
}


def _error(code: str, message: str, at, hint: str | None, rule: str | None) -> CompileError:
    return CompileError([Diagnostic(code, message, _span(at), hint, rule)])


def _span(*nodes) -> Span | None:
    for n in nodes:
        if isinstance(n, Span) and n.known:
            return n
        if isinstance(n, Node) and n.span.known:
            return n.span
    for n in nodes:
        if isinstance(n, Span):
            return n
        if isinstance(n, Node):
            return n.span
    return None


def _c(v: int) -> ConstInt:
    return ConstInt(v, INDEX)


def _cint(e: Expr | None) -> int | None:
    if e is None:
        return None
    f = fold(e)
    return f.value if isinstance(f, ConstInt) and f.dtype.is_int else None


def _fmt(items) -> str:
    return "[" + ", ".join(print_expr(x) for x in items) + "]"


def _same_extent(a: Expr, b: Expr) -> bool:
    va, vb = _cint(a), _cint(b)
    if va is not None and vb is not None:
        return va == vb
    return a == b


# --------------------------------------------------------------------------------------------------
# NZ-1 / NZ-2: the blocked shape of one logical NZ tensor
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class NzBlocking:
    """How one logical NZ tensor `[..lead.., R, C]` blocks: `[batch, C/c0, R/16, 16, c0]`."""

    c0: int
    rows: int  # R
    cols: int  # C
    lead: tuple[Expr, ...]  # the logical leading axes
    batch: Expr  # B: 1, the rank-3 leading axis, or the product of the static leading axes

    @property
    def shape(self) -> tuple[Expr, ...]:
        return (self.batch, _c(self.cols // self.c0), _c(self.rows // FRACTAL_ROWS), _c(FRACTAL_ROWS), _c(self.c0))


def nz_blocking(t: TensorType, at: Node | None = None) -> NzBlocking:
    """The blocking of logical NZ tensor type `t`, or a user error (NZ-10) naming what prevents it."""
    where = _span(t, at)
    dt = t.dtype
    c0 = _target.c0_of(dt)
    if c0 is None or dt.is_packed_fp4:
        what = "a packed FP4 carrier type" if dt.is_packed_fp4 else "a sub-byte type"
        raise _error("PTOC-E0344", f"an NZ tensor of {dt.name} cannot be blocked: {what} has no NZ lowering",
                     where, "store the weight as INT8, FP16, BF16 or FP32 NZ data, or keep it ND", "NZ-10")
    if t.rank < 2:
        raise _error("PTOC-E0342", f"an NZ tensor needs rank >= 2 (the trailing [R, C] fractal plane); this one has "
                     f"rank {t.rank}", where, "declare the tensor as [R, C] (or [B, R, C]) with pl.NZ, or drop "
                     "pl.NZ", "NZ-10")
    view = t.view
    if view is not None and view.stride:
        raise _error("PTOC-E0345", f"an NZ tensor cannot carry explicit strides {_fmt(view.stride)}: the blocked "
                     "form takes its own row-major strides", where,
                     "drop the strides from the NZ tensor (its bytes must be a dense NZ image)", "NZ-10")
    if view is not None and view.valid_shape is not None and (
            len(view.valid_shape) != t.rank
            or not all(_same_extent(v, d) for v, d in zip(view.valid_shape, t.shape))):
        raise _error("PTOC-E0345", f"an NZ tensor cannot be partially valid (valid_shape {_fmt(view.valid_shape)} "
                     f"of shape {_fmt(t.shape)}): the blocked form has no valid region", where,
                     "pad the NZ data to whole fractals and give partial extents as the valid_shapes of each "
                     "tile.load instead", "NZ-10")
    r_e, c_e = t.shape[-2], t.shape[-1]
    rows, cols = _cint(r_e), _cint(c_e)
    if rows is None or cols is None:
        axis = "shape[-2] (rows)" if rows is None else "shape[-1] (columns)"
        dyn = print_expr(r_e if rows is None else c_e)
        raise _error("PTOC-E0341", f"an NZ tensor needs static trailing dims; {axis} is {dyn}",
                     where, "give the [R, C] plane of an NZ tensor static extents (a dynamic count of panels "
                     "goes in a leading batch axis: [B, R, C])", "NZ-10")
    if rows <= 0 or rows % FRACTAL_ROWS:
        raise _error("PTOC-E0340", f"NZ shape[-2] = {rows} is not a positive multiple of {FRACTAL_ROWS}: an incomplete "
                     "fractal has no blocked form", where,
                     f"pad the rows of the NZ data to a multiple of {FRACTAL_ROWS}", "NZ-10")
    if cols <= 0 or cols % c0:
        raise _error("PTOC-E0340", f"NZ shape[-1] = {cols} is not a positive multiple of c0 = {c0} ({dt.name}): an "
                     "incomplete C0 line has no blocked form", where,
                     f"pad the columns of the NZ data to a multiple of {c0}", "NZ-10")
    lead = tuple(t.shape[:-2])
    if len(lead) == 0:
        batch: Expr = _c(1)
    elif len(lead) == 1:
        batch = fold(lead[0])
    else:
        prod = 1
        for i, d in enumerate(lead):
            v = _cint(d)
            if v is None:
                raise _error("PTOC-E0343", f"a rank-{t.rank} NZ tensor folds its leading axes into the one batch slot, "
                             f"which needs static extents; axis {i} is {print_expr(d)}", where,
                             "make the leading extents static, or use a rank-3 [B, R, C] tensor whose single "
                             "batch axis may be dynamic", "NZ-10")
            prod *= v
        batch = _c(prod)
    return NzBlocking(c0, rows, cols, lead, batch)


def block_tensor_type(t: TensorType, at: Node | None = None) -> TensorType:
    """The rank-5 blocked form of logical NZ tensor type `t` (NZ-2); other types unchanged."""
    if t.layout != "NZ":
        return t
    b = nz_blocking(t, at)
    pad = t.view.pad if t.view is not None else None
    return TensorType(b.shape, t.dtype, TensorView(layout="NZ", pad=pad), t.memref, span=t.span)


# --------------------------------------------------------------------------------------------------
# NZ-12: the GM-gap guard (temporary: delete with pto-isa#317, together with tests/passes/test_nz_gm_gap.py)
# --------------------------------------------------------------------------------------------------


def check_nz_gm_gap(tensor_rows: int, window_rows: int | None, col_blocks: int | None, at=None) -> None:
    """NZ-12: a load of an NZ tensor with R rows that spans more than one column block jumps
    `gap = R - TR` 32-byte blocks between blocks (dtype-independent: c0 * sizeof(T) == 32), and pto-isa's
    TLoadGm2L1Nz2nz passes that through a 16-bit gmGap field (hw-native-sys/pto-isa#317), so it must be
    at most 65535. `window_rows` is the row extent of the emitted window (valid_shape if the load has one,
    else shapes; None when dynamic: the worst case, zero rows, is checked). `col_blocks` is the number of
    column blocks the window spans (None when unknown: treated as several). A single-column-block load is
    never limited (the DMA reads gmGap only between bursts)."""
    if col_blocks is not None and col_blocks <= 1:
        return
    tr = window_rows if window_rows is not None else 0
    gap = tensor_rows - tr
    if gap <= GM_GAP_LIMIT:
        return
    rows_txt = f"{window_rows} rows" if window_rows is not None else "a dynamic row extent (checked at 0 rows)"
    blocks_txt = f"{col_blocks} column blocks" if col_blocks is not None else "several column blocks"
    raise _error("PTOC-E0370", f"this NZ load of {rows_txt} from a tensor of {tensor_rows} rows spans {blocks_txt}; "
                 f"the GM gap between blocks is {tensor_rows} - {tr} = {gap} 32-byte blocks, more than {GM_GAP_LIMIT} "
                 "(pto-isa#317 truncates it to 16 bits and the load would silently read wrong fractals)", at,
                 f"load taller row tiles (the gap is R - TR, at most {GM_GAP_LIMIT}), or lay the stacked weight out "
                 "as a rank-3 [LAYERS, K, N] NZ tensor so the stacking axis becomes the batch", "NZ-12")


# --------------------------------------------------------------------------------------------------
# Call arguments by parameter name
# --------------------------------------------------------------------------------------------------


def _bind(op, call: Call) -> dict[str, Expr]:
    """Parameter name -> argument expression of a call (positional or keyword)."""
    names = op.param_names
    out: dict[str, Expr] = {}
    for i, a in enumerate(call.args):
        if i >= len(names):
            raise InternalError(f"BlockNzTensorViews: pl.{call.op} has too many arguments")
        out[names[i]] = a
    for k, v in call.kwargs:
        out[k] = v
    return out


def _with_args(op, call: Call, updates: dict[str, Expr]) -> Call:
    """`call` with the arguments named in `updates` replaced (or appended, positionally when they are the
    next positional parameter)."""
    names = op.param_names
    args = list(call.args)
    kwargs = list(call.kwargs)
    for name in sorted(updates, key=names.index):
        value = updates[name]
        idx = names.index(name)
        if idx < len(args):
            args[idx] = value
            continue
        for j, (k, _) in enumerate(kwargs):
            if k == name:
                kwargs[j] = (k, value)
                break
        else:
            if idx == len(args):
                args.append(value)
            else:
                kwargs.append((name, value))
    return replace(call, args=tuple(args), kwargs=tuple(kwargs))


def _items(e: Expr | None) -> tuple[Expr, ...] | None:
    if isinstance(e, (ListExpr, TupleExpr)):
        return e.items
    return None


def _like(container: Expr | None, items) -> Expr:
    if isinstance(container, (ListExpr, TupleExpr)):
        return replace(container, items=tuple(items))
    return ListExpr(tuple(items))


def _absent(e: Expr | None) -> bool:
    return e is None or isinstance(e, NoneLit) or (isinstance(e, ConstBool) and not e.value) or (
        isinstance(e, EnumLit) and e.member in ("None", "none", "NONE", "null"))


# --------------------------------------------------------------------------------------------------
# One kernel
# --------------------------------------------------------------------------------------------------


def _check_store_kwargs(call: Call) -> None:
    """NZ-7: the write-back applies none of atomic=, pre_quant=, pre_relu= (nor their attrs)."""
    for k, v in call.kwargs:
        bad = k in _STORE_REJECTED_KWARGS and not _absent(v)
        if k == "attrs" and isinstance(v, DictExpr):
            bad_keys = [kk.value for kk, vv in v.items if isinstance(kk, StrLit)
                        and kk.value in _STORE_REJECTED_KWARGS and not _absent(vv)]
            if bad_keys:
                k, bad = bad_keys[0], True
        if bad:
            raise _error("PTOC-E0358", f"the NZ write-back cannot apply {k}= (atomic, pre_quant and pre_relu are "
                         "not supported into an NZ tensor)", _span(v, call),
                         f"drop {k}= or store into an ND tensor", "NZ-7")


def _check_store_partition(part: Expr | None, rank: int, rows: int, cols: int, call: Call) -> None:
    """NZ-7: an explicit partition of an NZ write-back is one panel of the tile's rows x cols."""
    if _absent(part):
        return
    items = _items(part)
    ok = items is not None and len(items) == rank and all(_cint(x) == 1 for x in items[:-2]) and \
        _cint(items[-2]) == rows and _cint(items[-1]) == cols
    if not ok:
        raise _error("PTOC-E0363", f"an NZ write-back stores one panel (batch extent 1) of {rows} x {cols}; "
                     f"the partition is {_fmt(items) if items is not None else print_expr(part)}",
                     _span(part, call), "store one panel per tile.store: leading partition extents 1",
                     "NZ-7")


def _check_slice_kwargs(values: dict[str, Expr], shape: tuple[Expr, ...], rank: int, call: Call) -> None:
    """NZ-10/11: a slice of an NZ tensor selects whole panels: no pad_value=, clamp= or partial valid_shape."""
    for k in ("pad_value", "clamp"):
        v = values.get(k)
        if not _absent(v):
            raise _error("PTOC-E0351", f"a slice of an NZ tensor cannot take {k}=", _span(v, call),
                         f"drop {k}= (an NZ slice selects whole panels)", "NZ-10")
    valid = values.get("valid_shape")
    vitems = _items(valid) if not _absent(valid) else None
    if not _absent(valid) and (vitems is None or len(vitems) != rank or
                               not all(_same_extent(v, d) for v, d in zip(vitems, shape))):
        raise _error("PTOC-E0345", "a slice of an NZ tensor cannot be partially valid", _span(valid, call),
                     "slice whole panels; give partial extents as tile.load valid_shapes", "NZ-10")


def _check_slice_leading(b: NzBlocking, lead_ext: tuple[Expr, ...], lead_off: tuple[Expr, ...], call: Call) -> None:
    """NZ-11: the leading window is one contiguous run of batch panels."""
    first = next((i for i, s in enumerate(lead_ext) if _cint(s) != 1), None)
    if first is not None:
        for i in range(first + 1, len(lead_ext)):
            if not (_same_extent(lead_ext[i], b.lead[i]) and _cint(lead_off[i]) == 0):
                raise _error("PTOC-E0351", f"the leading window {_fmt(lead_ext)} at {_fmt(lead_off)} of the NZ "
                             f"tensor's leading axes {_fmt(b.lead)} is not one contiguous run of batch panels",
                             call, "narrow the leading axes outermost-first: after the first axis that keeps "
                             "more than one index every axis must be whole", "NZ-10")


class _Kernel(FastMutator):
    def __init__(self, f: Function, types: dict[str, Type | None], ctx: CompileContext):
        self.f = f
        self.types = types  # the original (logical) types of every value
        self.ctx = ctx
        self.arch = get_arch(ctx.arch)
        self._facts: Facts | None = None
        self._loads: set[int] = set()  # ids of rewritten tile.load calls

    @property
    def facts(self) -> Facts:
        if self._facts is None:
            self._facts = Facts.of_function(self.f)
        return self._facts

    def run(self) -> Function:
        new = self.mutate(self.f)
        attrs = tuple(new.attrs or ()) + ((StrLit(MARK), ConstBool(True)),)
        return replace(new, attrs=attrs)

    # ------------------------------------------------------------------ helpers
    def nz_type(self, e: Expr | None) -> TensorType | None:
        if isinstance(e, Var):
            t = self.types.get(e.name)
            if isinstance(t, TensorType) and t.layout == "NZ":
                return t
        return None

    def op_of(self, call: Call):

        return resolve_op(call, self.types)

    def fold_batch(self, b: NzBlocking, offsets: tuple[Expr, ...]) -> Expr:
        """NZ-4: the leading offsets folded row-major into the one batch index (exact for any values)."""
        if not offsets:
            return _c(0)
        acc = offsets[0]
        for o, d in zip(offsets[1:], b.lead[1:]):
            scaled = acc if _cint(d) == 1 else BinOp("*", acc, d)
            if _cint(acc) == 0:
                acc = o
            elif _cint(o) == 0:
                acc = scaled
            else:
                acc = BinOp("+", scaled, o)
        return fold(acc)

    def trailing(self, e: Expr, d: int, what: str, at: Call) -> Expr:
        """A trailing offset divided by its axis factor (NZ-8 / NZ-9): a constant must be a non-negative
        multiple of `d`; a symbolic offset must be provably a multiple of `d` AND provably non-negative.
        The result is `FloorDiv` of the whole offset expression in its own dtype."""
        c = _cint(e)
        if c is not None:
            if c < 0 or c % d:
                raise _error("PTOC-E0347", f"the {what} {c} is not a non-negative multiple of {d}: an NZ window must "
                             "start on a fractal boundary (16 rows, c0 columns)", _span(e, at),
                             f"align the {what} to a multiple of {d}", "NZ-10")
            return blocked_offset(e, d)
        mult = self.facts.is_multiple_of(e, d)
        nonneg = mult and self.facts.is_non_negative(e)
        if not (mult and nonneg):
            why = f"a multiple of {d}" if not mult else "non-negative (a negative offset would be clamped to 0)"
            forms = "; ".join(PROVABLE_FORMS)
            raise _error("PTOC-E0348", f"the {what} `{print_expr(e)}` of an NZ tensor cannot be proved {why}; "
                         f"provable forms: {forms}", _span(e, at),
                         f"compute the {what} in one of the provable forms, e.g. `off = blk * {d}` with `blk` a "
                         f"loop variable or tile.get_block_idx(), so that it is provably a non-negative multiple "
                         f"of {d}", "NZ-8")
        return blocked_offset(e, d, facts=self.facts)

    def valid_extent(self, e: Expr, d: int, what: str, at: Call) -> Expr:
        """A valid extent of an NZ load in whole fractal rows / C0 lines: a constant multiple of `d`, or a
        dynamic extent provably a multiple of `d` (the ragged last tile, e.g. `pl.min(R - r0, TR)`), divided
        as `FloorDiv(extent, d)`."""
        c = _cint(e)
        if c is not None:
            if c < 0 or c % d:
                raise _error("PTOC-E0349", f"the {what} {c} of an NZ load is not a multiple of {d}: it ends inside a "
                             "fractal, which has no blocked form", _span(e, at),
                             f"pad the NZ data so that the {what} is a multiple of {d}", "NZ-10")
            return blocked_offset(e, d)
        if not self.facts.is_multiple_of(e, d):
            forms = "; ".join(PROVABLE_FORMS)
            raise _error("PTOC-E0349", f"the dynamic {what} `{print_expr(e)}` of an NZ load cannot be proved a "
                         f"multiple of {d}: it may end inside a fractal; provable forms: {forms}", _span(e, at),
                         f"derive the extent from multiples of {d} (e.g. `pl.min(R - r0, TR)` with R, r0 and TR "
                         f"multiples of {d})", "NZ-10")
        return blocked_offset(e, d, facts=self.facts)

    # ------------------------------------------------------------------ statements
    def mutate_AssignStmt(self, s: AssignStmt) -> AssignStmt:
        orig = self.types.get(s.target.name)
        if isinstance(orig, TensorType) and orig.layout == "NZ":
            v = s.value
            op = self.op_of(v) if isinstance(v, Call) else None
            ok = isinstance(v, (Var, GetItem)) or (isinstance(v, Call) and (
                v.kind == "func" or (op is not None and op.name in ("tile.store", "tensor.slice"))))
            if not ok:
                raise _error("PTOC-E0353", f"pl.{v.op if isinstance(v, Call) else 'expression'} produces an NZ tensor "
                             "inside a kernel; only kernel parameters (and their stores and leading-axis slices) "
                             "carry the NZ layout", s, "NZ is a storage declaration of GM parameters: create ND "
                             "tensors in kernels", "NZ-10")
        if isinstance(s.value, Call) and id(s.value) in self._loads and s.annotation is None:
            t = self.types.get(s.target.name)
            if isinstance(t, TileType):  # the logical 2-D tile the statement had before (NZ-4)
                return replace(s, annotation=t)
        return s

    def mutate_TensorType(self, t: TensorType) -> TensorType:
        return block_tensor_type(t, t)

    # ------------------------------------------------------------------ calls
    def mutate_Call(self, call: Call) -> Expr:
        if call.kind != "op":
            return call
        op = self.op_of(call)
        name = op.name if op is not None else call.op
        nz_param = _NZ_OPERAND.get(name)
        values = _bind(op, call) if op is not None else {}
        self.check_consumer(call, name, values.get(nz_param) if nz_param else None)
        if nz_param is None or self.nz_type(values.get(nz_param)) is None:
            return call
        if name == "tile.load":
            return self.load(op, call, values)
        if name == "tile.store":
            return self.store(op, call, values)
        if name == "tensor.slice":
            return self.slice(op, call, values)
        if name == "tensor.reshape":
            return self.reshape(call, values)
        return self.dim(call, values)

    def check_consumer(self, call: Call, name: str, allowed: Expr | None) -> None:
        """NZ-10: an NZ tensor may only reach the supported consumers, in their tensor operand."""
        stack = list(call.args) + [v for _, v in call.kwargs]
        while stack:
            e = stack.pop()
            if e is allowed:
                continue
            if isinstance(e, Var):
                if self.nz_type(e) is not None:
                    remote = "remote" in name or "distributed" in name
                    why = ("distributed tensors have no NZ blocking (remote_load reads ND windows)" if remote else
                           "only tile.load into Mat, the Acc tile.store write-back, leading-axis tensor.slice, "
                           "the whole-tensor flat tensor.reshape and tensor.dim may use it")
                    raise _error("PTOC-E0353", f"pl.{call.op} cannot use the NZ tensor {e.name!r}: {why}",
                                 _span(e, call), "load the NZ data into Mat with pl.tile.load(..., "
                                 "target_memory=pl.Mem.Mat) and use the tile, or keep this tensor ND", "NZ-10")
            elif isinstance(e, (ListExpr, TupleExpr)):
                stack.extend(e.items)
            elif isinstance(e, DictExpr):
                stack.extend(v for _, v in e.items)

    # -- NZ-4 / NZ-6 / NZ-12: tile.load ------------------------------------------------------------
    def load(self, op, call: Call, values: dict[str, Expr]) -> Call:
        src = values["tensor"]
        t = self.nz_type(src)
        b = nz_blocking(t, src)
        mem = values.get("target_memory")
        if not (isinstance(mem, EnumLit) and mem.member == "Mat"):
            got = f"target_memory=pl.Mem.{mem.member}" if isinstance(mem, EnumLit) else "no target_memory (Vec)"
            raise _error("PTOC-E0346", f"an NZ tensor can only be loaded into Mat (the NZ->NZ cube operand path, "
                         f"NZ-6); this load has {got}", _span(mem, call),
                         "load with target_memory=pl.Mem.Mat and tile.move the tile onward, or keep the tensor ND "
                         "for vector work", "NZ-10")
        if not _absent(values.get("transpose")):
            raise _error("PTOC-E0353", "a transposing tile.load of an NZ tensor is not supported",
                         _span(values.get("transpose"), call),
                         "load the NZ tile untransposed and transpose on chip (tile.move to Right gives the ZN form)",
                         "NZ-10")
        rank = len(b.lead) + 2
        offsets, sizes = _items(values.get("offsets")), _items(values.get("shapes"))
        if offsets is None or sizes is None or len(offsets) != rank or len(sizes) != rank:
            raise _error("PTOC-E0347", f"an NZ tile.load needs literal lists of {rank} offsets and {rank} extents",
                         call, "write the offsets and shapes as lists, one entry per logical axis", "NZ-10")
        valid_e = values.get("valid_shapes")
        valid = _items(valid_e) if not _absent(valid_e) else None
        if valid_e is not None and not _absent(valid_e) and (valid is None or len(valid) != rank):
            raise _error("PTOC-E0349", f"an NZ tile.load needs a literal list of {rank} valid extents", valid_e,
                         "write the valid_shapes as a list, one entry per logical axis", "NZ-10")
        self.one_panel(sizes[:-2], "extent", call)
        self.lead_in_range(b, offsets[:-2], call)
        tr, tc = _cint(sizes[-2]), _cint(sizes[-1])
        if tr is None or tc is None or tr <= 0 or tc <= 0 or tr % FRACTAL_ROWS or tc % b.c0:
            raise _error("PTOC-E0347", f"the NZ load window {_fmt(sizes[-2:])} is not a static whole number of "
                         f"{FRACTAL_ROWS} x {b.c0} fractals ({t.dtype.name})", _span(values.get("shapes"), call),
                         f"load rows in multiples of {FRACTAL_ROWS} and columns in multiples of {b.c0}; describe a "
                         "ragged edge with valid_shapes", "NZ-10")
        r0, k0 = offsets[-2], offsets[-1]
        br = self.trailing(r0, FRACTAL_ROWS, "row offset", call)
        bk = self.trailing(k0, b.c0, "column offset", call)
        for o, n, d, axis in ((r0, tr, b.rows, "row"), (k0, tc, b.cols, "column")):
            ov = _cint(o)
            if ov is not None and ov + n > d:
                raise _error("PTOC-E0347", f"the NZ load window [{ov}, {ov + n}) of the {axis} axis exceeds its "
                             f"extent {d}", _span(o, call), "shrink the window or its offset", "NZ-10")
        new_off = (self.fold_batch(b, offsets[:-2]), bk, br, _c(0), _c(0))
        new_sizes = (_c(1), _c(tc // b.c0), _c(tr // FRACTAL_ROWS), _c(FRACTAL_ROWS), _c(b.c0))
        updates: dict[str, Expr] = {"offsets": _like(values["offsets"], new_off),
                                    "shapes": _like(values["shapes"], new_sizes)}
        window_rows, col_blocks = tr, tc // b.c0
        if valid is not None:
            self.one_panel(valid[:-2], "valid extent", call)
            vr, vc = valid[-2], valid[-1]
            bvr = self.valid_extent(vr, FRACTAL_ROWS, "valid row extent", call)
            bvc = self.valid_extent(vc, b.c0, "valid column extent", call)
            updates["valid_shapes"] = _like(valid_e, (_c(1), bvc, bvr, _c(FRACTAL_ROWS), _c(b.c0)))
            window_rows = _cint(vr)
            vcv = _cint(vc)
            col_blocks = vcv // b.c0 if vcv is not None else col_blocks
        check_nz_gm_gap(b.rows, window_rows, col_blocks, call)
        new = _with_args(op, call, updates)
        self._loads.add(id(new))
        return new

    def lead_in_range(self, b: NzBlocking, offsets: tuple[Expr, ...], call: Call) -> None:
        """Constant leading offsets must name an existing panel (the op rules do not bound NZ windows)."""
        for i, (o, d) in enumerate(zip(offsets, b.lead)):
            ov, dv = _cint(o), _cint(d)
            if ov is not None and (ov < 0 or (dv is not None and ov >= dv)):
                raise _error("PTOC-E0347", f"leading offset {i} = {ov} is outside the NZ tensor's leading axis of "
                             f"extent {print_expr(d)}", _span(o, call), "index an existing panel", "NZ-10")

    def one_panel(self, lead: tuple[Expr, ...], what: str, call: Call) -> None:
        for i, s in enumerate(lead):
            if _cint(s) != 1:
                raise _error("PTOC-E0350", f"an NZ load reads one batch panel: leading {what} {i} is "
                             f"{print_expr(s)}, not 1", _span(s, call),
                             "load one panel per tile.load (leading extents 1) and loop over the leading axes",
                             "NZ-10")

    # -- NZ-7: the Acc write-back ------------------------------------------------------------------
    def store(self, op, call: Call, values: dict[str, Expr]) -> Call:
        out = values["output"]
        t = self.nz_type(out)
        b = nz_blocking(t, out)
        tile_e = values.get("tile")
        tt = self.store_source(t, tile_e, call)
        _check_store_kwargs(call)
        rows, cols = self.store_extent(tt, tile_e, call)
        rank = len(b.lead) + 2
        part = values.get("shapes")
        _check_store_partition(part, rank, rows, cols, call)
        offsets, k0 = self.store_offsets(b, values, rank, rows, cols, call)
        bk = self.trailing(k0, b.c0, "column offset", call)
        new_off = (self.fold_batch(b, offsets[:-2]), bk, _c(0), _c(0), _c(0))
        partition = (_c(1), _c(cols // b.c0), _c(b.rows // FRACTAL_ROWS), _c(FRACTAL_ROWS), _c(b.c0))
        return _with_args(op, call, {"offsets": _like(values["offsets"], new_off),
                                     "shapes": _like(part if not _absent(part) else None, partition)})

    def store_source(self, t: TensorType, tile_e: Expr | None, call: Call) -> TileType:
        """The Acc tile an NZ write-back stores, after the target, space and dtype checks (NZ-7)."""
        arch = self.arch
        if not arch.supports_nz_acc_store:
            raise _error("PTOC-E0355", f"storing into an NZ tensor is not supported on {arch.title}; the Acc -> NZ GM "
                         "write-back exists on A2/A3 only", call,
                         "store the result into an ND tensor on this target", "NZ-7")
        tt = self.types.get(tile_e.name) if isinstance(tile_e, Var) else None
        if not isinstance(tt, TileType):
            raise _error("PTOC-E0356", "the source of a store into an NZ tensor must be a named Acc tile",
                         _span(tile_e, call),
                         "store the matmul's Acc result tile directly", "NZ-7")
        space = tt.memory or "Vec"
        if space != "Acc":
            raise _error("PTOC-E0356", f"only an Acc tile can be written into an NZ tensor; this tile lives in {space}",
                         _span(tile_e, call), "store the matmul accumulator (pl.Mem.Acc) directly, or store this "
                         "tile into an ND tensor", "NZ-7")
        if tt.dtype != dtypes.FP32 or t.dtype != dtypes.FP32:
            raise _error("PTOC-E0357", f"the NZ write-back stores an FP32 Acc tile into an FP32 tensor (c0 = 8); this "
                         f"store writes {tt.dtype.name} into {t.dtype.name}", call,
                         "declare the NZ output FP32 and store the FP32 accumulator without conversion", "NZ-7")
        return tt

    def store_extent(self, tt: TileType, tile_e: Expr | None, call: Call) -> tuple[int, int]:
        """The static rows and columns of the stored Acc tile, within the store's limits (NZ-7)."""
        arch = self.arch
        shape = [_cint(d) for d in tt.shape]
        if tt.rank != 2 or None in shape or any(d <= 0 for d in shape):  # type: ignore[operator]
            raise _error("PTOC-E0359", f"the NZ write-back needs a static, positive 2-D Acc tile; this one is "
                         f"{_fmt(tt.shape)}", _span(tile_e, call), "use a static [M, N] accumulator tile", "NZ-7")
        rows, cols = shape  # type: ignore[misc]
        vs = tt.view.valid_shape if tt.view is not None else None
        if vs is not None and not all(_same_extent(v, d) for v, d in zip(vs, tt.shape)):
            raise _error("PTOC-E0359", f"the NZ write-back needs a fully valid Acc tile; valid_shape is {_fmt(vs)} of "
                         f"{_fmt(tt.shape)}", _span(tile_e, call),
                         "compute a whole tile (pad M and N) and store all of it", "NZ-7")
        if rows % STORE_ROW_COL_MULTIPLE or cols % STORE_ROW_COL_MULTIPLE:
            raise _error("PTOC-E0359", "the NZ write-back needs rows and columns that are multiples of 16; the tile "
                         f"is {rows} x {cols}", _span(tile_e, call), "pad the accumulator to multiples of 16", "NZ-7")
        if rows > STORE_MAX_ROWS or cols > STORE_MAX_COLS:
            raise _error("PTOC-E0360", f"one NZ store writes at most {STORE_MAX_ROWS} rows and {STORE_MAX_COLS} "
                         f"columns (aligned: 65520 x 4080); this tile is {rows} x {cols}", _span(tile_e, call),
                         "split the output into column blocks, each stored by its own tile.store", "NZ-7")
        need = arch.acc_alloc_bytes(rows, cols, tt.dtype.bytes)
        cap = arch.capacity("Acc")
        if cap is not None and need > cap:
            raise _error("PTOC-E0361", f"the {rows} x {cols} FP32 Acc tile needs {need} bytes, more than the "
                         f"{cap}-byte L0C of {arch.title}", _span(tile_e, call),
                         "split the output along N into column blocks that fit L0C; each store must still cover all "
                         "rows", "NZ-7")
        return rows, cols

    def store_offsets(self, b: NzBlocking, values: dict[str, Expr], rank: int, rows: int, cols: int,
                      call: Call) -> tuple[tuple[Expr, ...], Expr]:
        """The store's offsets and its column offset, checked against the whole-panel rule (NZ-7)."""
        offsets = _items(values.get("offsets"))
        if offsets is None or len(offsets) != rank:
            raise _error("PTOC-E0362", f"an NZ store needs a literal list of {rank} offsets", call,
                         "write the offsets as a list, one entry per logical axis", "NZ-7")
        self.lead_in_range(b, offsets[:-2], call)
        r0, k0 = offsets[-2], offsets[-1]
        if rows != b.rows or _cint(r0) != 0:
            raise _error("PTOC-E0362", f"an NZ write-back must cover the whole row axis of its target ({b.rows} rows) "
                         f"at row offset 0; this store writes {rows} rows at row offset {print_expr(r0)}",
                         _span(r0, call), "stack independent panels along a leading batch axis ([PANELS, R, C]) and "
                         "write one whole panel per store (pto-isa's Acc->NZ store ignores the parent row stride)",
                         "NZ-7")
        kc = _cint(k0)
        if kc is not None:
            if kc < 0 or kc % b.c0:
                raise _error("PTOC-E0364", f"the NZ write-back column offset {kc} is not a non-negative multiple of "
                             f"{b.c0}", _span(k0, call), f"align the column offset to a multiple of {b.c0}", "NZ-7")
            if kc + cols > b.cols:
                raise _error("PTOC-E0364", f"the NZ write-back columns [{kc}, {kc + cols}) exceed the target's "
                             f"{b.cols} columns", _span(k0, call), "shrink the tile or its column offset", "NZ-7")
        return offsets, k0

    # -- NZ-11: tensor.slice of leading axes ---------------------------------------------------------
    def slice(self, op, call: Call, values: dict[str, Expr]) -> Call:
        src = values["tensor"]
        t = self.nz_type(src)
        b = nz_blocking(t, src)
        rank = len(b.lead) + 2
        shape, offset = _items(values.get("shape")), _items(values.get("offset"))
        if shape is None or offset is None or len(shape) != rank or len(offset) != rank:
            raise _error("PTOC-E0351", f"a slice of an NZ tensor needs literal lists of {rank} extents and offsets",
                         call, "write the shape and offset as lists, one entry per logical axis", "NZ-10")
        if _cint(shape[-2]) != b.rows or _cint(shape[-1]) != b.cols or _cint(offset[-2]) != 0 or \
                _cint(offset[-1]) != 0:
            raise _error("PTOC-E0351", f"a slice of an NZ tensor must keep the whole trailing [{b.rows}, {b.cols}] "
                         f"plane; this one windows it (shape {_fmt(shape)}, offset {_fmt(offset)})", call,
                         "stack along a leading axis ([LAYERS, R, C]) and slice only that; window rows and columns "
                         "with tile.load offsets instead", "NZ-10")
        _check_slice_kwargs(values, shape, rank, call)
        lead_ext, lead_off = shape[:-2], offset[:-2]
        _check_slice_leading(b, lead_ext, lead_off, call)
        extent: Expr = _c(1)
        for s in lead_ext:
            extent = s if _cint(extent) == 1 else (extent if _cint(s) == 1 else BinOp("*", extent, s))
        new_shape = (fold(extent),) + b.shape[1:]
        new_off = (self.fold_batch(b, lead_off), _c(0), _c(0), _c(0), _c(0))
        dropped = ("tensor", "shape", "offset", "valid_shape", "drop_dims", "pad_value", "clamp")
        kwargs = tuple((k, v) for k, v in call.kwargs if k not in dropped)
        return replace(call, args=(src, _like(values["shape"], new_shape), _like(values["offset"], new_off)),
                       kwargs=kwargs)

    # -- NZ-10: tensor.reshape / tensor.dim ----------------------------------------------------------
    def reshape(self, call: Call, values: dict[str, Expr]) -> Call:
        shape = _items(values.get("shape"))
        if shape is None or len(shape) != 1 or not _absent(values.get("valid_shape")):
            raise _error("PTOC-E0352", "an NZ tensor can only be reshaped to the whole-tensor flat [N] (kept ND): any "
                         "other shape reinterprets coordinates the blocked form cannot carry", call,
                         "reshape to [N], or load the NZ data into Mat and reshape the tile", "NZ-10")
        return call  # layout-independent: the same contiguous bytes in the same order

    def dim(self, call: Call, values: dict[str, Expr]) -> Expr:
        t = self.nz_type(values["tensor"])
        b = nz_blocking(t, values["tensor"])
        axis = _cint(values.get("axis"))
        rank = len(b.lead) + 2
        if axis is None or not -rank <= axis < rank:
            raise _error("PTOC-E0353", "tensor.dim of an NZ tensor needs a constant axis of its logical shape",
                         call, f"query one of the axes 0..{rank - 1} with a literal axis", "NZ-10")
        axis %= rank
        logical = b.lead + (_c(b.rows), _c(b.cols))
        v = _cint(logical[axis])
        if v is not None:
            return ConstInt(v, INDEX, span=call.span)
        # the dynamic batch of a rank-3 tensor: axis 0 of the blocked form
        return replace(call, args=(values["tensor"], _c(0)), kwargs=())


def _is_nz(n: Node) -> bool:
    return (isinstance(n, TensorType) and n.layout == "NZ") or (
        isinstance(n, EnumLit) and n.family == "TensorLayout" and n.member == "NZ")


def _may_have_nz(f: Function, nz_funcs: frozenset[str], cache=None) -> bool:
    """A cheap syntactic test (no type inference): can a value of `f` be an NZ tensor? An NZ type or
    layout literal, or a call of a function that returns an NZ tensor."""
    index = NodeIndex.get(f, cache)
    return (any(_is_nz(n) for n in index.of(TensorType)) or any(_is_nz(n) for n in index.of(EnumLit))
            or any(n.kind == "func" and n.op in nz_funcs for n in index.of(Call)))


class BlockNzTensorViews(Pass):
    name = "BlockNzTensorViews"
    stage = "layout"
    summary = "logical NZ tensors -> rank-5 blocked NZ views; rewrite their Mat loads, Acc stores, slices (NZ-1..13)"
    requires = frozenset({"flat_tiles"})
    produces = frozenset({"nz_blocked"})

    def run(self, program: Program, ctx: CompileContext) -> Program:
        types = None
        nz_funcs = frozenset(f.name for f in program.functions if any(_is_nz(n) for t in f.returns for n in iter_nodes(t)))
        funcs = []
        for f in program.functions:
            if f.func_type in KERNEL_TYPES and not f.has_attr(MARK) and _may_have_nz(f, nz_funcs, self.cache):
                if types is None:
                    types = self.types(program, ctx)
                f = _Kernel(f, types[f.name], ctx).run()
            funcs.append(f)
        if all(a is b for a, b in zip(funcs, program.functions)):
            return program
        return replace(program, functions=tuple(funcs))


__all__ = ["MARK", "BlockNzTensorViews", "NzBlocking", "block_tensor_type", "check_nz_gm_gap", "nz_blocking"]
