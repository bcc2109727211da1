"""AutoTileMatmulL0: split a matmul whose operands or result exceed L0A / L0B / L0C into L0-sized steps.

Purpose
-------
A cube matmul reads its left operand from L0A (`pl.Mem.Left`), its right operand from L0B
(`pl.Mem.Right`) and accumulates into L0C (`pl.Mem.Acc`). A `tile.matmul` written on whole `Mat` (L1)
tiles is only executable as one instruction when those tiles fit L0. This pass picks an L0 tile
shape (m, n, k) from the target's capacities (`ptoc/target/arch.py`) and rewrites the matmul into an
accumulation loop over K blocks, and, when the [M, N] accumulator itself does not fit L0C, into a
grid of [m, n] output blocks each stored straight to the result tensor.

Before (a5: L0B holds 64 KiB, the [2048, 64] BF16 right operand is 256 KiB)::

    c: pl.Tile[[16, 64], pl.FP32, pl.Mem.Acc] = pl.tile.matmul(lhs_mat, rhs_mat)

After::

    c_init = pl.tile.create([16, 64], dtype=pl.FP32, target_memory=pl.Mem.Acc)
    for ko, (c_iter,) in pl.pipeline(0, 2048, 256, init_values=(c_init,), stage=2):
        sa = pl.tile.extract(lhs_mat, 0, ko, shape=[16, 256], target_memory=pl.Mem.Left)
        sb = pl.tile.extract(rhs_mat, ko, 0, shape=[256, 64], target_memory=pl.Mem.Right)
        if ko == 0:
            c_first = pl.tile.matmul(sa, sb)
            c_phi = pl.yield_(c_first)
        else:
            c_acc = pl.tile.matmul_acc(c_iter, sa, sb)
            c_phi = pl.yield_(c_acc)
        c = pl.yield_(c_phi)

`tile.matmul_bias(a, b, bias)` becomes the same loop with `tile.matmul_bias(sa, sb, bias)` in the first
iteration (the bias is added once). `tile.matmul_acc(acc, a, b)` becomes the same loop with `init_values=(acc,)` and a `matmul_acc` in
every iteration (no branch). The loop keeps the matmul's result name, so later uses need no change.

Output blocks (the accumulator exceeds L0C): a fresh `tile.matmul` whose only use is one 2-D
`tile.store(c, [r, q], out)` becomes, for every block (column blocks outer, row blocks inner, as
PyPTO orders them), the K loop above on `[m, n]` (or one straight `extract, extract, matmul` when the
whole K fits) followed by `tile.store(c_i, [r + mi, q + ni], out_prev)`; the stores chain the output
tensor and the last one keeps the original store's name.

The tile chooser
----------------
Sizes are bytes of the padded L0 footprint: Acc rows pad to the target's `acc_row_pad`.
1. Output blocks, in order of preference: (M, N) when the accumulator fits L0C; then every (m, n) of
   multiples of 16 dividing M and N whose accumulator fits, largest m * n first, then the squarest,
   then the wider (larger n: fewer, longer FIXPIPE rows; PyPTO's cost model picks the same block for
   examples/matmul_l0_tiled.ir on both targets).
2. For the first block that admits one: k = K when the whole [m, K] and [K, n] operands fit L0A and
   L0B at once; otherwise the largest multiple of 16 dividing K such that two [m, k] and two [k, n]
   blocks fit (double buffering).
3. (m, n, k) = (M, N, K): nothing to do. No legal choice (K not a multiple of 16, a dimension that
   has no fitting divisor): the matmul is left as written and the memory planner reports the overflow.

Where this pass deliberately differs from PyPTO
----------------------------------------------
- PyPTO ranks every legal (m, n, k) with a roofline cost model (L1->L0 bandwidths, FIXPIPE drain,
  stationarity, an L0C double buffer) and peels non-dividing boundary blocks. ptoc's chooser is the
  capacity rule above: tiles divide the problem exactly and the K loop is always output-stationary.
  It picks PyPTO's tile for the K-only and square-grid cases of PyPTO's tests.
- When the whole K fits, an output block is one straight matmul (PyPTO nests pipelined loops over
  the blocks and may hold one operand).
- A Vec-resident left operand is staged into Mat (`<lhs>_mat = tile.move(lhs, target_memory=Mat)`)
  for a K loop only, as PyPTO does.
- The bias of a split `tile.matmul_bias` stays the Mat tile it was; InferTileMemorySpace moves it into
  the Bias table inside the first iteration (PyPTO moves it once before the loop).
- Not handled (left as written): output blocks of a `tile.matmul_acc` or `tile.matmul_bias` (PyPTO
  slices the bias along N), a result with uses other than one store, the f32->bf16 cast folded into
  the FIXPIPE write-back.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

from ptoc.lazy_dataclass import dataclass
from ptoc.diagnostics import CompileError, InternalError
from ptoc.ir import dtypes
from ptoc.ir.names import fresh_name
from ptoc.ir.nodes import (
    AssignStmt,
    BinOp,
    Call,
    ConstInt,
    DTypeLit,
    EnumLit,
    ForStmt,
    Function,
    IfStmt,
    ListExpr,
    Program,
    ScalarType,
    Stmt,
    TileType,
    Type,
    Var,
    YieldStmt,
)
from ptoc.ir.verifier import iter_nodes
from ptoc.ir.visitor import rebuild_bodies
from ptoc.passes.common import resolve_op
from ptoc.passes.manager import Pass
from ptoc.target.arch import Arch, get_arch
from ptoc.ops.registry import infer_call_type

_ALIGN = 16  # the cube fractal: L0 tile extents are multiples of it
_INDEX = ScalarType(dtypes.INDEX)


class AutoTileMatmulL0(Pass):
    name = "AutoTileMatmulL0"
    stage = "layout"
    summary = "tile a matmul whose operands or result exceed L0A/L0B/L0C into an L0-sized accumulation loop"
    requires = frozenset({"tile_ops"})
    produces: frozenset[str] = frozenset()

    def run(self, program: Program, ctx) -> Program:
        arch = get_arch(ctx.arch)
        types = None
        funcs = []
        changed = False
        for f in program.functions:
            index = self.index(f)
            if not any("matmul" in op for op in index.ops()):
                funcs.append(f)
                continue
            if types is None:
                types = self.types(program, ctx)
            nf = _Rewriter(f, types.get(f.name, {}), arch, ctx, index).run()
            changed |= nf is not f
            funcs.append(nf)
        return replace(program, functions=tuple(funcs)) if changed else program


@dataclass(frozen=True)
class L0Tile:
    m: int
    n: int
    k: int


def choose_l0_tile(arch: Arch, M: int, N: int, K: int, bytes_a: int, bytes_b: int, bytes_c: int) -> L0Tile | None:
    """The L0 tile (m, n, k) for an [M, K] x [K, N] matmul (rules in the module docstring); None when no
    tile is legal."""
    l0a, l0b, l0c = arch.capacity("Left"), arch.capacity("Right"), arch.capacity("Acc")
    assert l0a is not None and l0b is not None and l0c is not None

    def acc_fits(m: int, n: int) -> bool:
        return arch.acc_alloc_bytes(m, n, bytes_c) <= l0c

    blocks = [(M, N)] if acc_fits(M, N) else []
    if M % _ALIGN == 0 and N % _ALIGN == 0:
        more = [(m, n) for m in range(_ALIGN, M + 1, _ALIGN) if M % m == 0
                for n in range(_ALIGN, N + 1, _ALIGN) if N % n == 0 and (m, n) != (M, N) and acc_fits(m, n)]
        blocks += sorted(more, key=lambda mn: (-mn[0] * mn[1], abs(mn[0] - mn[1]), -mn[1]))
    for m, n in blocks:
        if m * K * bytes_a <= l0a and K * n * bytes_b <= l0b:
            return L0Tile(m, n, K)
        if K % _ALIGN:
            continue
        for k in range(K - _ALIGN, 0, -_ALIGN):
            if K % k == 0 and 2 * m * k * bytes_a <= l0a and 2 * k * n * bytes_b <= l0b:
                return L0Tile(m, n, k)
    return None


def _idx(v: int, span) -> ConstInt:
    return ConstInt(v, dtypes.INDEX, span=span)


def _shape_list(shape: tuple[int, int], span) -> ListExpr:
    return ListExpr(tuple(_idx(v, span) for v in shape), span=span)


def _static2(t: Type | None) -> tuple[int, int] | None:
    if not isinstance(t, TileType) or len(t.shape) != 2:
        return None
    if not all(isinstance(d, ConstInt) for d in t.shape):
        return None
    return (t.shape[0].value, t.shape[1].value)  # type: ignore[union-attr]


class _Rewriter:
    def __init__(self, f: Function, types: dict, arch: Arch, ctx, index=None):
        self.f = f
        self.types = dict(types)
        self.arch = arch
        self.ctx = ctx
        found = index.of(Var) if index is not None else [n for n in iter_nodes(f) if isinstance(n, Var)]
        self.names = {p.name for p in f.params} | {n.name for n in found}
        self.bias: Var | None = None  # the bias operand of the tile.matmul_bias being rewritten
        self._uses: Counter[str] | None = None

    @property
    def uses(self) -> Counter[str]:
        """How often each name is read in the body (counted when a rewrite first asks)."""
        if self._uses is None:
            nodes = [n for st in self.f.body for n in iter_nodes(st)]
            uses: Counter[str] = Counter(n.name for n in nodes if isinstance(n, Var))
            # a statement's own target counts as an occurrence too: remove them
            for n in nodes:
                if isinstance(n, AssignStmt):
                    uses[n.target.name] -= 1
                elif isinstance(n, YieldStmt):
                    for t in n.targets:
                        uses[t.name] -= 1
                elif isinstance(n, ForStmt):
                    uses[n.var.name] -= 1
                    for t in n.iter_args:
                        uses[t.name] -= 1
            self._uses = uses
        return self._uses

    def run(self) -> Function:
        body = self.block(self.f.body)
        return self.f if body is self.f.body else replace(self.f, body=body)

    def fresh(self, base: str) -> str:
        return fresh_name(base, self.names)

    # ------------------------------------------------------------------ blocks
    def block(self, body: tuple[Stmt, ...]) -> tuple[Stmt, ...]:
        out: list[Stmt] = []
        changed = False
        skip: set[int] = set()
        for i, s in enumerate(body):
            if i in skip:
                changed = True
                continue
            new = self.matmul(s, body, i, skip)
            if new is None:
                new = [rebuild_bodies(s, self.block)]
            if len(new) != 1 or new[0] is not s:
                changed = True
            out.extend(new)
        return tuple(out) if changed else body

    def matmul(self, s: Stmt, body: tuple[Stmt, ...], i: int, skip: set[int]) -> list[Stmt] | None:
        if not isinstance(s, AssignStmt) or not isinstance(s.value, Call):
            return None
        call = s.value
        op = resolve_op(call, self.types)
        if op is None or op.name not in ("tile.matmul", "tile.matmul_acc", "tile.matmul_bias") or call.kwargs:
            return None
        acc = None
        self.bias = None
        if op.name == "tile.matmul_bias":
            if len(call.args) != 3 or not isinstance(call.args[2], Var):
                return None
            lhs, rhs, self.bias = call.args
        elif op.name == "tile.matmul_acc":
            if len(call.args) != 3 or not isinstance(call.args[0], Var):
                return None
            acc = call.args[0]
            lhs, rhs = call.args[1], call.args[2]
        else:
            if len(call.args) != 2:
                return None
            lhs, rhs = call.args
        if not isinstance(lhs, Var) or not isinstance(rhs, Var):
            return None
        lt, rt, ct = self.types.get(lhs.name), self.types.get(rhs.name), self.types.get(s.target.name)
        ls, rs, cs = _static2(lt), _static2(rt), _static2(ct)
        if ls is None or rs is None or cs is None:
            return None
        assert isinstance(lt, TileType) and isinstance(rt, TileType) and isinstance(ct, TileType)
        if lt.memory not in ("Mat", "Vec") or rt.memory != "Mat" or ct.memory not in (None, "Acc"):
            return None
        if _has_partial_valid(lt) or _has_partial_valid(rt):
            return None
        (M, K), (K2, N) = ls, rs
        if K != K2 or cs != (M, N):
            return None
        tile = choose_l0_tile(self.arch, M, N, K, _bytes(lt), _bytes(rt), _bytes(ct))
        if tile is None or (tile.m, tile.n, tile.k) == (M, N, K):
            return None
        if self.bias is not None and ((tile.m, tile.n) != (M, N) or lt.memory != "Mat"):
            return None  # a biased matmul is split along K only (its bias row is applied once)
        if (tile.m, tile.n) == (M, N) and lt.memory == "Vec":
            try:  # the Vec -> Mat staging move must be one the target's tile.move rule accepts
                return self.k_loop(s.target, lhs, rhs, acc, 0, 0, tile, K, s, stage_lhs=True)
            except CompileError:
                return None
        if (tile.m, tile.n) == (M, N):
            return self.k_loop(s.target, lhs, rhs, acc, 0, 0, tile, K, s)
        if acc is not None or lt.memory != "Mat":
            return None
        return self.grid(s, lhs, rhs, tile, M, N, K, body, i, skip)

    # ------------------------------------------------------------------ emission
    def typed(self, name: str, value: Call, span) -> AssignStmt:
        t = self.infer(value)
        self.types[name] = t
        return AssignStmt(Var(name, span=span), value, t, span=span)

    def infer(self, call: Call) -> TileType:

        arg_types = [self.types.get(a.name) if isinstance(a, Var) else None for a in call.args]
        t, diags = infer_call_type(call, arg_types, {k: None for k, _ in call.kwargs}, self.ctx)
        if diags:
            raise CompileError(diags)
        if not isinstance(t, TileType):
            raise InternalError(f"AutoTileMatmulL0: no tile type for {call.op} at {call.span}")
        return t

    def extract(self, name: str, src: Var, row, col, shape: tuple[int, int], mem: str, span) -> AssignStmt:
        call = Call("tile.extract", (src, row, col),
                    (("shape", _shape_list(shape, span)), ("target_memory", EnumLit("Mem", mem, span=span))),
                    span=span)
        return self.typed(name, call, span)

    def k_loop(self, target: Var, lhs: Var, rhs: Var, acc: Var | None, mi: int, ni: int, tile: L0Tile, K: int,
               s: AssignStmt, tag: str = "", stage_lhs: bool = False) -> list[Stmt]:
        """The statements computing the [m, n] block at (mi, ni) into `target` (K loop or one matmul).
        `stage_lhs`: the left operand is Vec-resident; it is first moved into Mat (`<lhs>_mat`)."""
        span = s.span
        base = target.name
        m, n, k = tile.m, tile.n, tile.k
        a_name = self.fresh(f"a{tag}" if tag else "sa")
        b_name = self.fresh(f"b{tag}" if tag else "sb")
        if k == K:
            out: list[Stmt] = [
                self.extract(a_name, lhs, _idx(mi, span), _idx(0, span), (m, K), "Left", span),
                self.extract(b_name, rhs, _idx(0, span), _idx(ni, span), (K, n), "Right", span)]
            out.append(self.typed(target.name, Call("tile.matmul", (Var(a_name, span=span), Var(b_name, span=span)),
                                                   span=span), span))
            return out
        out = []
        if acc is None:
            init_name = self.fresh(f"{base}_init")
            out.append(self.typed(init_name, Call(
                "tile.create", (_shape_list((m, n), span),),
                (("dtype", DTypeLit(self.acc_dtype(lhs), span=span)), ("target_memory", EnumLit("Mem", "Acc", span=span))),
                span=span), span))
            init = Var(init_name, span=span)
        else:
            init = acc
        if stage_lhs:
            staged = self.fresh(f"{lhs.name}_mat")
            out.append(self.typed(staged, Call("tile.move", (lhs,), (("target_memory", EnumLit("Mem", "Mat", span=span)),),
                                               span=span), span))
            lhs = Var(staged, span=span)
        ko = Var(self.fresh(f"ko{tag}"), span=span)
        it = Var(self.fresh(f"{base}_iter"), span=span)
        self.types[ko.name] = _INDEX
        self.types[it.name] = self.types[init.name]
        body: list[Stmt] = [
            self.extract(a_name, lhs, _idx(mi, span), ko, (m, k), "Left", span),
            self.extract(b_name, rhs, ko, _idx(ni, span), (k, n), "Right", span)]
        a, b = Var(a_name, span=span), Var(b_name, span=span)
        acc_name = self.fresh(f"{base}_acc")
        step = self.typed(acc_name, Call("tile.matmul_acc", (it, a, b), span=span), span)
        acc_t = self.types[acc_name]
        if acc is None:
            first_name = self.fresh(f"{base}_first")
            first_call = Call("tile.matmul", (a, b), span=span) if self.bias is None else \
                Call("tile.matmul_bias", (a, b, self.bias), span=span)
            first = self.typed(first_name, first_call, span)
            phi = Var(self.fresh(f"{base}_phi"), span=span)
            self.types[phi.name] = acc_t
            body.append(IfStmt(BinOp("==", ko, _idx(0, span), span=span),
                               (first, YieldStmt((phi,), (Var(first_name, span=span),), acc_t, span=span)),
                               (step, YieldStmt((phi,), (Var(acc_name, span=span),), acc_t, span=span)), span=span))
            last = phi
        else:
            body.append(step)
            last = Var(acc_name, span=span)
        body.append(YieldStmt((target,), (last,), acc_t, span=span))
        self.types[target.name] = acc_t
        out.append(ForStmt("pipeline", ko, (_idx(0, span), _idx(K, span), _idx(k, span)), tuple(body),
                           iter_args=(it,), init_values=(init,), kwargs=(("stage", _idx(2, span)),), span=span))
        return out

    def acc_dtype(self, lhs: Var) -> dtypes.DType:
        t = self.types[lhs.name]
        assert isinstance(t, TileType)
        name = self.arch.acc_dtype(t.dtype.name)
        if name is None:
            raise InternalError(f"AutoTileMatmulL0: no accumulator dtype for {t.dtype.name}")
        return dtypes.BY_NAME[name]

    def grid(self, s: AssignStmt, lhs: Var, rhs: Var, tile: L0Tile, M: int, N: int, K: int,
             body: tuple[Stmt, ...], i: int, skip: set[int]) -> list[Stmt] | None:
        """Output blocks: only when the result's single use is a later 2-D store at constant offsets in
        this block, with nothing between them reading or writing the stored tensor."""
        c = s.target.name
        if self.uses[c] != 1:
            return None
        j = next((j for j in range(i + 1, len(body)) if _mentions(body[j], c)), None)
        if j is None:
            return None
        st = body[j]
        if not isinstance(st, AssignStmt) or not isinstance(st.value, Call):
            return None
        sop = resolve_op(st.value, self.types)
        if sop is None or sop.name != "tile.store" or len(st.value.args) != 3 or st.value.kwargs:
            return None
        tile_arg, offs, dst = st.value.args
        if not (isinstance(tile_arg, Var) and tile_arg.name == c and isinstance(dst, Var)
                and isinstance(offs, ListExpr) and len(offs.items) == 2
                and all(isinstance(o, ConstInt) for o in offs.items)):
            return None
        if any(_mentions(body[x], dst.name) for x in range(i + 1, j)):
            return None
        r0, q0 = offs.items[0].value, offs.items[1].value  # type: ignore[union-attr]
        span = s.span
        out: list[Stmt] = []
        prev = dst
        idx = 0
        nblocks = (M // tile.m) * (N // tile.n)
        for ni in range(0, N, tile.n):
            for mi in range(0, M, tile.m):
                block = Var(self.fresh(f"{c}{idx}"), span=span)
                out += self.k_loop(block, lhs, rhs, None, mi, ni, tile, K, s, tag=str(idx))
                last = idx == nblocks - 1
                res = st.target if last else Var(self.fresh(f"{st.target.name}_t{idx}"), span=st.span)
                store = Call(st.value.op, (block, ListExpr((_idx(r0 + mi, span), _idx(q0 + ni, span)), span=span), prev),
                             span=st.value.span)
                out.append(AssignStmt(res, store, st.annotation if last else self.types.get(st.target.name),
                                      span=st.span))
                self.types[res.name] = self.types.get(st.target.name)
                prev = res
                idx += 1
        body_between = list(body[i + 1:j])
        skip.update(range(i + 1, j + 1))
        return body_between + out


def _mentions(s: Stmt, name: str) -> bool:
    return any(isinstance(n, Var) and n.name == name for n in iter_nodes(s))


def _has_partial_valid(t: TileType) -> bool:
    v = t.view.valid_shape if t.view is not None else None
    return v is not None and tuple(v) != tuple(t.shape)


def _bytes(t: TileType) -> int:
    return max(1, t.dtype.bits // 8)
