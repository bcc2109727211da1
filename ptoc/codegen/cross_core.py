"""The `.pto` emitter's cross-core ops: the pipe between a cube kernel (AIC) and its vector kernel (AIV).

Spelling (PTOAS's pipe ops; checked with the PTOAS release in the toolchain):

    %b = pto.reserve_buffer {name = "N", size = S, location = #pto.address_space<vec>, auto = false, base = B} -> i32
    %b = pto.import_reserved_buffer {name = "N", peer_func = @peer} -> i32
    pto.aic_initialize_pipe {dir_mask = D, slot_size = S} (gm_slot_buffer = %argK : !pto.ptr<f32>,
        c2v_consumer_buf = %x : i32, v2c_consumer_buf = %y : i32)      (one line; a5: no gm_slot_buffer)
    pto.tpush_to_aiv(%t : !pto.tile_buf<...>) {split = 0}               (tile.tpush_to_aiv / _aic)
    %t = pto.tpop_from_aic {split = 0} -> !pto.tile_buf<...>            (tile.tpop_from_aic / _aiv)
    %t = pto.tpop_from_aic(%c0, %c0) {split = 0} -> !pto.tile_buf<..., v_row=?, v_col=?, ...>   (an empty pop)
    pto.tfree_from_aic {split = 0}                                      (system.tfree_to_aic; _aiv alike)
    %i = pto.get_subblock_idx                                            (tile.get_subblock_idx: the lane)

- The consumer of a direction reserves its local slot buffer (Vec for cube -> vector, Mat for vector ->
  cube); the producer imports it by name. At --pto-level level3 the buffer gets an explicit `base`: the
  IR's `base=` when it is 0 or more (AllocateMemoryAddr writes it, as PyPTO does, at the bottom of the
  consumer memory, and places the kernel's tiles after the ring), else the top of the consumer memory
  (its capacity minus the size); a kernel whose tiles reach into it is PTOC-E0620.
  At level2 PTOAS places it (`auto = true`).
- `slot_num` is not written: the toolchain's PTOAS does not take the attribute and always builds a ring of
  8 slots (`TPipe<..., 8, 8>`), so the `.pto` reserves `slot_size * 8` bytes (at least the IR's `size=`)
  whatever the IR's `slot_num` says. A ring deeper than the IR's only lets the producer run further
  ahead; the reference runs the IR's depth, the stricter one.
- On a2a3 the pipe runs through a GM ring: `gm_slot_buffer` is the kernel's `__gm_pipe_buffer` parameter
  (InjectGmPipeBuffer adds it); a2a3 pipe set-up without it is PTOC-E0621. The IR types that buffer as one
  FP32 element (as PyPTO does: the runtime owns the workspace); the bytes the ring really uses are
  `gm_pipe_buffer_bytes` (8 slots of the slot size: one direction's ring of 8, or, for both directions,
  PTOAS's 4 slots each with the vector -> cube ring placed after the cube -> vector one, as pto-isa's
  a2a3 TPipe lays them out), which the kernels manifest records for the runtime that allocates it.
- `split` is the op's `split=` (1 UP_DOWN, 2 LEFT_RIGHT: each vector lane gets / gives one half); a free
  without `split=` takes its tile's pop's, as PTOAS rejects a pipe whose ops mix split 0 with 1 or 2.
- A popped tile is the pipe's slot, not a buffer of the kernel: it has no `pto.alloc_tile`.
"""

from __future__ import annotations

from ptoc.diagnostics import CompileError, Diagnostic, Span
from ptoc.ir import dtypes
from ptoc.ir.nodes import Call, ConstInt, StrLit, TileType, Var
from ptoc.ir.types import is_empty_tile
from ptoc.ops.registry import SHORT
from ptoc.analysis.pipeline_stages import PTOAS_SLOTS, pipe_slot_size
from ptoc.codegen.pto_forms import _Handle, _Scalar, _int, element_type, unsupported
from ptoc.ir.verifier import _KEPT, NodeIndex  # (here, not in kept_calls: asked for each kernel)

GM_PIPE_PARAM = "__gm_pipe_buffer"
PUSH_OPS = ("tile.tpush_to_aiv", "tile.tpush_to_aic")
POP_OPS = ("tile.tpop_from_aic", "tile.tpop_from_aiv")
FREE_OPS = {"system.tfree_to_aic": "tfree_from_aic", "system.tfree_to_aiv": "tfree_from_aiv"}
SETUP_OPS = ("system.reserve_buffer", "system.import_peer_buffer", "system.aic_initialize_pipe",
             "system.aiv_initialize_pipe")
CROSS_CORE_OPS = frozenset(PUSH_OPS + POP_OPS + tuple(FREE_OPS) + SETUP_OPS)
CONSUMER_MEMORY = {"AIV": ("Vec", "vec"), "AIC": ("Mat", "mat")}


def cross_core_op(op: str) -> str | None:
    """The full name of a cross-core op written either way (`pl.tpush_to_aiv` or `pl.tile.tpush_to_aiv`)."""
    if op in CROSS_CORE_OPS:
        return op
    short = SHORT.get(op)  # (asked of every op the emitter meets: most have no short-name targets)
    if not short:
        return None
    full = [n for n in short.values() if n in CROSS_CORE_OPS]
    return full[0] if full else None


def kept_calls(program, fn) -> list[Call] | None:
    """The calls under function `fn` of `program` in walk order, from the node index of the pipeline run that
    returned `program` (`ptoc.ir.verifier.keep_types`); None for a program no pipeline kept its cache for."""
    kept = program.__dict__.get(_KEPT)
    return NodeIndex.get(fn, kept).of(Call) if kept is not None else None


def gm_pipe_buffer_bytes(fn, calls=None) -> int:
    """The bytes of global memory the a2a3 GM ring of `fn`'s pipe occupies (0 when it sets up no pipe).
    `calls`: the calls under `fn` in walk order (its node index's), when the caller has them."""
    return PTOAS_SLOTS * pipe_slot_size(fn, calls)


def _kw_int(c: Call, key: str, default: int | None = None) -> int | None:
    v = c.kwarg(key)
    return _int(v) if v is not None else default


class CrossCoreEmitter:
    """Cross-core methods of `_FunctionEmitter` (which provides constants, tile handles and scalars)."""

    def cross_core(self, name: str | None, c: Call, span: Span | None) -> None:
        op = cross_core_op(c.op)
        if op == "system.reserve_buffer":
            self._reserve(name, c, span)
        elif op == "system.import_peer_buffer":
            self._import(name, c, span)
        elif op in ("system.aic_initialize_pipe", "system.aiv_initialize_pipe"):
            self._init_pipe(c, span)
        elif op in PUSH_OPS:
            if not c.args:
                raise unsupported(f"pl.{op} without a tile", span)
            h = self.tile(c.args[0], span)
            self.emit(f"pto.{op[5:]}(%{h.ssa} : {h.type}) {{split = {_kw_int(c, 'split', 0)}}}")
        elif op in POP_OPS:
            self._pop(name, c, op, span)
        else:
            # PTOAS wants one split mode per pipe: a free without split= takes the split of its tile's pop
            tile = c.args[0] if c.args else c.kwarg("tile")
            popped = getattr(self, "pop_split", {}).get(tile.name) if isinstance(tile, Var) else None
            split = _kw_int(c, "split", popped if popped is not None else 0)
            self.emit(f"pto.{FREE_OPS[op]} {{split = {split}}}")

    def _reserve(self, name: str | None, c: Call, span: Span | None) -> None:
        buf, size = c.kwarg("name"), _kw_int(c, "size")
        if not isinstance(buf, StrLit) or size is None or size <= 0:
            raise unsupported("pl.system.reserve_buffer without a name= and a constant size=", span)
        size = max(size, self.pipe_slot_size() * PTOAS_SLOTS)
        mem, loc = CONSUMER_MEMORY.get(self.fn.func_type, ("Vec", "vec"))
        if self.level == "level3":
            from ptoc.target.arch import get_arch

            cap = get_arch(self.arch).capacity(mem) or 0
            given = c.kwarg("base")
            if isinstance(given, ConstInt) and given.value >= 0:
                # AllocateMemoryAddr placed it (and the kernel's tiles after it): no tile may overlap it
                base, where = given.value, f"at {given.value} in {mem}"
                clash = any(m == mem and a is not None and a < base + size and base < a + self.alloc_sizes.get(b, 0)
                            for b, (m, a) in self.allocs.items())
                fits = not clash and (not cap or base + size <= cap)
                used = max((a + self.alloc_sizes.get(b, 0) for b, (m, a) in self.allocs.items()
                            if m == mem and a is not None), default=0)
            else:
                base, where = cap - size, f"at the top of {mem}"
                used = max((a + self.alloc_sizes.get(b, 0) for b, (m, a) in self.allocs.items()
                            if m == mem and a is not None), default=0)
                fits = base >= used
            if not fits:
                raise CompileError([Diagnostic(
                    "PTOC-E0620", f"the cross-core slot buffer {buf.value!r} ({size} bytes {where}) "
                    f"does not fit beside the kernel's {mem} tiles ({used} bytes of {cap})", span,
                    hint="make the tiles crossing between the cores smaller (fewer bytes per slot), or the "
                         "kernel's own tiles smaller")])
            place = f"auto = false, base = {base}"
        else:
            place = "auto = true"
        ssa = self.fresh(name or buf.value)
        self.emit(f'%{ssa} = pto.reserve_buffer {{name = "{buf.value}", size = {size}, '
                  f"location = #pto.address_space<{loc}>, {place}}} -> i32")
        if name:
            self.env[name] = _Scalar(ssa, dtypes.INT32)

    def pipe_slot_size(self) -> int:
        """The slot size of the kernel's pipe initialisation (0 when it has none)."""
        return pipe_slot_size(self.fn, kept_calls(self.program, self.fn))

    def _import(self, name: str | None, c: Call, span: Span | None) -> None:
        buf, peer = c.kwarg("name"), c.kwarg("peer_func")
        if not isinstance(buf, StrLit) or not isinstance(peer, StrLit):
            raise unsupported("pl.system.import_peer_buffer without name= and peer_func=", span)
        ssa = self.fresh(name or buf.value)
        self.emit(f'%{ssa} = pto.import_reserved_buffer {{name = "{buf.value}", peer_func = @{peer.value}}} -> i32')
        if name:
            self.env[name] = _Scalar(ssa, dtypes.INT32)

    def _init_pipe(self, c: Call, span: Span | None) -> None:
        side = "aic" if c.op.endswith("aic_initialize_pipe") else "aiv"
        dir_mask, slot_size = _kw_int(c, "dir_mask"), _kw_int(c, "slot_size")
        if dir_mask not in (1, 2, 3) or slot_size is None or slot_size <= 0:
            raise unsupported(f"pl.system.{side}_initialize_pipe without a constant dir_mask= (1, 2 or 3) and "
                              "slot_size=", span)
        attrs = f"dir_mask = {dir_mask}, slot_size = {slot_size}"
        operands = []
        if self.arch == "a2a3":
            gm = next((p for p in self.fn.params if p.name == GM_PIPE_PARAM), None)
            if gm is None or gm.name not in self.gm_ptr:
                raise CompileError([Diagnostic(
                    "PTOC-E0621", f"the cross-core pipe of {self.fn.name!r} needs a GM slot buffer on a2a3 (the "
                    f"{GM_PIPE_PARAM} tensor parameter), which the kernel does not have", span,
                    hint=f"declare {GM_PIPE_PARAM} as a GM tensor (pl.Out[pl.Tensor[[1], pl.FP32]]) or leave it out "
                         "(InjectGmPipeBuffer then adds it), or compile for --arch a5, whose pipe needs no GM ring")])
            operands.append(f"gm_slot_buffer = %{self.gm_ptr[gm.name]} : !pto.ptr<{element_type(gm.type.dtype)}>")
        for i, key in enumerate(("c2v_consumer_buf", "v2c_consumer_buf")):
            e = c.args[i] if len(c.args) > i else c.kwarg(key)  # an unused direction's buffer: 0
            operands.append(f"{key} = %{self._i32(ConstInt(0, dtypes.INT32) if e is None else e, span)} : i32")
        self.emit(f"pto.{side}_initialize_pipe {{{attrs}}} ({', '.join(operands)})")

    def _i32(self, e, span: Span | None) -> str:
        if isinstance(e, Call) and e.op == "const" and e.args:
            e = e.args[0]
        if isinstance(e, ConstInt):
            return self.const_int(e.value, dtypes.INT32)
        if isinstance(e, Var) and isinstance(self.env.get(e.name), _Scalar):
            return self.env[e.name].ssa
        return self.expr(e, want=dtypes.INT32).ssa

    def _pop(self, name: str | None, c: Call, op: str, span: Span | None) -> None:
        t = self.types.get(name) if name else None
        if not isinstance(t, TileType):
            raise unsupported(f"pl.{c.op} whose result is not a tile", span)
        tstr, dyn = self.tile_type(t, span)
        valid = None
        if dyn:
            if not is_empty_tile(t):
                raise unsupported(f"pl.{c.op} of a tile with a dynamic valid shape", span)
            valid = self._valid_values(t, span)  # an empty pop (a lane-1 replay's): runtime zero extents
        ssa = self.fresh(name)
        operands = f"(%{valid[0]}, %{valid[1]})" if valid else ""
        self.emit(f"%{ssa} = pto.{op[5:]}{operands} {{split = {_kw_int(c, 'split', 0)}}} -> {tstr}")
        if not hasattr(self, "pop_split"):
            self.pop_split = {}
        self.pop_split[name] = _kw_int(c, "split", 0)
        self.env[name] = _Handle(ssa, tstr, ("tpop", ssa), dyn, valid)
