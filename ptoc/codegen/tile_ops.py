"""The `.pto` emitter's tile ops: dispatch through each op's declaration (`ptoc/ops/<family>.py`:
`Pto`, `Emitter`, `NoPto`) and the emitters of the ops whose form is not plain destination passing."""

from __future__ import annotations


from ptoc.diagnostics import InternalError, Span
from ptoc.ir import dtypes
from ptoc.ir.dtypes import DType
from ptoc.ir.nodes import (
    AssignStmt,
    Call,
    ConstBool,
    ConstFloat,
    ConstInt,
    DictExpr,
    EnumLit,
    Expr,
    ListExpr,
    NoneLit,
    ScalarType,
    StrLit,
    TileType,
    TupleExpr,
    Var,
)
from ptoc.ir.types import effective_tile_view
# (imported here, not in `tile_op`: an import statement run for each of a module's tens of thousands of tile
# ops costs a few percent of the writer's time; the registry imports nothing of the emitters)
from ptoc.ops.registry import Emitter, NoPto, Pto, lookup
from ptoc.codegen.pto_forms import (
    ROUND_MODE,
    ROUND_MODE_BY_INT,
    STORE_ATTRS,
    _Handle,
    _Scalar,
    _Tensor,
    _arg,
    _enum_text,
    _int,
    element_type,
    scalar_type,
    unsupported,
)


class TileOpEmitter:
    """Tile-op methods of `_FunctionEmitter` (which provides tile handles, constants and expressions)."""

    def tile_op(self, s: AssignStmt, c: Call) -> None:
        """One tile op, by its declaration in its family file (`ptoc/ops/<family>.py`): a plain
        destination-passing form (`Pto`), an emitter method (`Emitter`) or no PTO form (`NoPto`)."""
        name, span = s.target.name, s.span
        op = lookup(c.op)
        form = op.pto if op is not None else None
        if isinstance(form, Emitter):
            getattr(self, form.method)(name, c, span)
        elif isinstance(form, Pto):
            self.dps_form(name, c, op, form, span)
        elif isinstance(form, NoPto):
            raise unsupported(f"pl.{c.op}", span, hint=form.hint)
        else:
            raise unsupported(f"pl.{c.op}", span)

    def dps_form(self, name: str, c: Call, op, form, span: Span | None) -> _Handle:
        """`pto.<form.name> ins(<operands>) outs(%dst)`, the operands as the declaration lists them."""
        positions = {p: i for i, p in enumerate(op.param_names)}
        values: list[tuple[str, str] | None] = []
        first_tile: Expr | None = None
        for spec in form.operands:
            kind, _, param = spec.partition(":")
            e = _arg(c, positions[param], param)
            absent = e is None or isinstance(e, NoneLit)
            if kind == "tile!" and absent:
                eq = "" if param in op.params else "="
                raise unsupported(f"pl.{c.op} without {param}{eq}", span, hint=form.hint or None)
            if kind == "tile?" and absent:
                continue
            if kind.startswith("tile"):
                first_tile = e if first_tile is None else first_tile
                h = self.tile(e, span)
                values.append((h.ssa, h.type))
            elif kind == "scalar":
                values.append(self.scalar_operand(e, self._tile_dtype(first_tile), span))
            elif kind == "f32":
                values.append(self.f32_operand(e, c.op, span))
            elif kind == "index":
                values.append((self.index_value(e, span), "index"))
            else:
                raise InternalError(f"{c.op}: unknown operand kind {kind!r} in its .pto declaration")
        return self.dps(name, form.name, values, span)

    def f32_operand(self, e: Expr | None, op: str, span: Span | None) -> tuple[str, str]:
        """A scalar operand PTOAS types f32 (e.g. tlrelu's slope): literals become f32 constants."""
        v = self.scalar_operand(e, dtypes.FP32, span)
        if v[1] != "f32":
            raise unsupported(f"pl.{op} with a {v[1]} scalar operand", span,
                              hint="this operand is f32 in PTO: cast it with pl.cast(x, pl.FP32)")
        return v

    # ------------------------------------------------------------------ ops with their own form
    def op_alloc(self, name: str, c: Call, span: Span | None) -> None:
        self._on_alloc(name, span)

    def op_store(self, name: str, c: Call, span: Span | None) -> None:
        self.store(c, span)
        self.env[name] = _Tensor(self.parts[id(c)].tensor)

    def op_load(self, name: str, c: Call, span: Span | None) -> None:
        tr = c.kwarg("transpose")
        if tr is not None and not (isinstance(tr, ConstBool) and not tr.value) and not isinstance(tr, NoneLit):
            raise unsupported("pl.tile.load with transpose=True", span)
        pv, pt = self.partition(c, span)
        h = self.define_tile(name, span)
        self.emit(f"pto.tload ins(%{pv} : {pt}) outs(%{h.ssa} : {h.type})")

    def op_create(self, name: str, c: Call, span: Span | None) -> None:
        self.define_tile(name, span)

    def op_read(self, name: str, c: Call, span: Span | None) -> None:
        t = self.types.get(name)
        if not isinstance(t, ScalarType):
            raise InternalError(f"tile.read result {name} is not a scalar")
        self.env[name] = self.expr(c, want=t.dtype, name=name)

    def op_write(self, name: str, c: Call, span: Span | None) -> None:
        self.tile_write(c, span, name)

    def op_col_sum(self, name: str, c: Call, span: Span | None) -> None:
        a = self.tile(c.args[0], span)
        tmp = _arg(c, 1, "tmp")
        if tmp is None or isinstance(tmp, NoneLit):
            self.dps(name, "tcolsum", [(a.ssa, a.type)], span)
            return
        t = self.tile(tmp, span)
        h = self.define_tile(name, span)
        self.emit(f"pto.tcolsum ins(%{a.ssa}, %{t.ssa} {{isBinary = false}} : {a.type}, {t.type}) "
                  f"outs(%{h.ssa} : {h.type})")

    def op_cast(self, name: str, c: Call, span: Span | None) -> None:
        a = self.tile(c.args[0], span)
        rmode = self.round_mode(_arg(c, 2, "mode"), span)
        h = self.define_tile(name, span)
        self.emit(f"pto.tcvt ins(%{a.ssa} {{rmode = #pto<round_mode {rmode}>}} : {a.type}) "
                  f"outs(%{h.ssa} : {h.type})")

    def op_move(self, name: str, c: Call, span: Span | None) -> None:
        a = self.tile(c.args[0], span)
        h = self.dps(name, "tmov", [(a.ssa, a.type)], span)
        if h.ssa == a.ssa:
            raise InternalError(f"tile.move into its own buffer ({name})")

    def op_matmul_acc(self, name: str, c: Call, span: Span | None) -> None:
        acc, a, b = (self.tile(x, span) for x in c.args[:3])
        h = self.dps(name, "tmatmul.acc", [(acc.ssa, acc.type), (a.ssa, a.type), (b.ssa, b.type)], span)
        if h.ssa != acc.ssa:
            raise InternalError(f"tile.matmul_acc result {name} does not share its accumulator's buffer")

    def op_gather_mask(self, name: str, c: Call, span: Span | None) -> None:
        a = self.tile(c.args[0], span)
        pat = self.mask_pattern(_arg(c, 1, "mask_pattern"), span)
        h = self.define_tile(name, span)
        self.emit(f"pto.tgather ins(%{a.ssa}, {{maskPattern = #pto.mask_pattern<{pat}>}} : {a.type}) "
                  f"outs(%{h.ssa} : {h.type})")

    def op_full(self, name: str, c: Call, span: Span | None) -> None:
        value = c.kwarg("value")
        h = self.define_tile(name, span)
        t = self.types.get(name)
        sc = self.scalar_operand(value, t.dtype, span)
        self.emit(f"pto.texpands ins(%{sc[0]} : {sc[1]}) outs(%{h.ssa} : {h.type})")

    # ------------------------------------------------------------------ gather / scatter / generators
    def scatter(self, name: str, c: Call, span: Span | None) -> None:
        """`out = tile.scatter(dst, src, indexes)`: DPS into dst's buffer (a tmov first when the result
        lives elsewhere); PTOAS TScatterOp index form `ins(%src, %indexes : S, I) outs(%dst : D)`."""
        dst = self.tile(_arg(c, 0, "dst"), span)
        src, idx = self.tile(_arg(c, 1, "src"), span), self.tile(_arg(c, 2, "indexes"), span)
        ts, ti = (self.types.get(e.name) if isinstance(e, Var) else None
                  for e in (_arg(c, 1, "src"), _arg(c, 2, "indexes")))
        if not isinstance(ts, TileType) or not isinstance(ti, TileType):
            raise InternalError("tile.scatter operands have no tile types")
        vs, vi = (tuple(_int(x) for x in effective_tile_view(t)["valid_shape"]) for t in (ts, ti))
        if None in vs or None in vi or vs != vi:
            raise unsupported("pl.tile.scatter whose indexes valid shape differs from the source's", span,
                              hint="PTOAS's tscatter takes one row index per source element: give indexes the "
                              "source's (static) valid shape")
        h = self.define_tile(name, span)
        if h.ssa != dst.ssa:
            self.emit(f"pto.tmov ins(%{dst.ssa} : {dst.type}) outs(%{h.ssa} : {h.type})")
        self.emit(f"pto.tscatter ins(%{src.ssa}, %{idx.ssa} : {src.type}, {idx.type}) outs(%{h.ssa} : {h.type})")

    def ci(self, name: str, c: Call, span: Span | None) -> None:
        """`tile.ci(start, shape)`: PTOAS TCIOp `ins(%start[, %tmp] : iN[, T]) outs(%dst : D)`, with a trailing
        `{descending = true}`. pto-isa's TCI fills row 0 only, so the tile must have one row."""
        t = self.types.get(name)
        if not isinstance(t, TileType) or _int(t.shape[0]) != 1:
            raise unsupported("pl.tile.ci of a tile with more than one row", span,
                              hint="TCI writes the first row only: generate a [1, N] tile")
        start = self.scalar_operand(_arg(c, 0, "start"), t.dtype, span)
        if start[1] != scalar_type(t.dtype):
            raise unsupported(f"pl.tile.ci with a {start[1]} start for a {t.dtype.name} tile", span)
        ins = [start]
        tmp = _arg(c, 2, "tmp")
        if tmp is not None and not isinstance(tmp, NoneLit):
            tt = self.tile(tmp, span)
            ins.append((tt.ssa, tt.type))
        desc = _arg(c, 4, "descending")
        if desc is not None and not isinstance(desc, (ConstBool, NoneLit)):
            raise unsupported("pl.tile.ci with a non-constant descending=", span)
        h = self.define_tile(name, span)
        tail = " {descending = true}" if isinstance(desc, ConstBool) and desc.value else ""
        self.emit(f"pto.tci ins({', '.join('%' + v for v, _ in ins)} : {', '.join(ty for _, ty in ins)}) "
                  f"outs(%{h.ssa} : {h.type}){tail}")

    def tri(self, name: str, c: Call, span: Span | None) -> None:
        """`tile.tri(diagonal, shape)`: PTOAS TTriOp `ins(%d {upperOrLower = 1 : i32} : i32) outs(%dst : D)`
        (the attribute only for upper=True; its default 0 is the lower triangle)."""
        d = _arg(c, 0, "diagonal")
        dt = self.dtype_of(d) if not isinstance(d, ConstInt) else dtypes.INT32
        if not dt.is_int:
            raise unsupported(f"pl.tile.tri with a {dt.name} diagonal", span)
        dv = self.expr(d, want=dt)
        upper = _arg(c, 4, "upper")
        if upper is not None and not isinstance(upper, (ConstBool, NoneLit)):
            raise unsupported("pl.tile.tri with a non-constant upper=", span)
        attr = " {upperOrLower = 1 : i32}" if isinstance(upper, ConstBool) and upper.value else ""
        h = self.define_tile(name, span)
        self.emit(f"pto.ttri ins(%{dv.ssa}{attr} : {scalar_type(dt)}) outs(%{h.ssa} : {h.type})")

    # ------------------------------------------------------------------ scalar element access
    def element_offset(self, c: Call, span: Span | None) -> tuple[_Handle, TileType, str]:
        """The handle, type and `index` storage offset of the element `tile.read` / `tile.write` address
        (PTOAS tgetval / tsetval take a linear offset in [0, rows * cols))."""
        src = _arg(c, 0, "tile")
        h = self.tile(src, span)
        t = self.types.get(src.name) if isinstance(src, Var) else None
        if not isinstance(t, TileType) or t.rank != 2:
            raise unsupported(f"pl.{c.op} of a tile that is not 2-D", span)
        eff = effective_tile_view(t)
        rows, cols = _int(t.shape[0]), _int(t.shape[1])
        if (t.memory or "Vec") != "Vec" or eff["slayout"] != "none_box" or eff["stride"] or \
                (eff["blayout"] != "row_major" and cols != 1 and rows != 1):
            raise unsupported(f"pl.{c.op} of a {t.memory or 'Vec'} {eff['blayout']}/{eff['slayout']} tile", span,
                              hint="tgetval / tsetval address a Vec tile by its row-major storage offset")
        if element_type(t.dtype, span) != scalar_type(t.dtype, span):
            raise unsupported(f"pl.{c.op} of a {t.dtype.name} tile", span,
                              hint="tgetval / tsetval take signless integer or float elements")
        idx = _arg(c, 1, "indices")
        items = idx.items if isinstance(idx, (ListExpr, TupleExpr)) else None
        if items is None or len(items) != 2:
            raise unsupported(f"pl.{c.op} without two constant-length indices", span)
        r, col = items
        if _int(r) is not None and _int(col) is not None:
            return h, t, self.index(_int(r) * cols + _int(col))
        rv, cv = self.index_value(r, span), self.index_value(col, span)
        if _int(r) == 0:
            return h, t, cv
        scaled = self.temp()
        self.emit(f"%{scaled} = arith.muli %{rv}, %{self.index(cols)} : index")
        if _int(col) == 0:
            return h, t, scaled
        off = self.temp()
        self.emit(f"%{off} = arith.addi %{scaled}, %{cv} : index")
        return h, t, off

    def tile_read(self, c: Call, name: str | None) -> _Scalar:
        h, t, off = self.element_offset(c, c.span)
        out = self._name(name)
        self.emit(f"%{out} = pto.tgetval ins(%{h.ssa}, %{off} : {h.type}, index) outs : {scalar_type(t.dtype)}")
        return _Scalar(out, t.dtype)

    def tile_write(self, c: Call, span: Span | None, name: str | None = None) -> None:
        """`tile.write(t, [i, j], v)`: `pto.tsetval ins(%off, %v : index, T) outs(%t : ...)`; with a result
        in another buffer, the tile is first copied there (tmov)."""
        src, t, off = self.element_offset(c, span)
        v = self.expr(_arg(c, 2, "value"), want=t.dtype)
        h = src
        if name is not None:
            h = self.define_tile(name, span)
            if h.ssa != src.ssa:
                self.emit(f"pto.tmov ins(%{src.ssa} : {src.type}) outs(%{h.ssa} : {h.type})")
        self.emit(f"pto.tsetval ins(%{off}, %{v.ssa} : index, {scalar_type(t.dtype)}) outs(%{h.ssa} : {h.type})")

    # ------------------------------------------------------------------ views: treshape, subview
    def reshape(self, name: str, c: Call, span: Span | None) -> None:
        """`tile.reshape` / `tile.reinterpret_view`: `%r = pto.treshape %src : S -> R` (an SSA view of the
        same bytes); a dynamic valid shape of the result is then set with pto.set_validshape."""
        src = self.tile(c.args[0], span)
        t = self.types.get(name)
        if not isinstance(t, TileType) or (t.memref is None and src.key[0] != "tpop"):
            raise InternalError(f"tile {name} has no MemRef (run InitMemRef)")
        tstr, dyn = self.tile_type(t, span)
        # a view of a popped tile has no MemRef (it lives in the pipe slot): a view of the pop's handle
        key = self._key(t.memref, tstr) if t.memref is not None else ("tpop", f"{src.ssa}:{tstr}")
        if tstr == src.type and not dyn:
            self.env[name] = src
            return
        same = self.handles.get(key)
        if same is not None and not dyn and same.ssa not in self.view_handles:
            # the buffer's own handle of this type (allocated where the buffer is, so it dominates): the same tile
            self.env[name] = same
            return
        ssa = self.fresh(name)
        self.view_handles.add(ssa)
        self.emit(f"%{ssa} = pto.treshape %{src.ssa} : {src.type} -> {tstr}")
        h = _Handle(ssa, tstr, key, dyn, None)
        if dyn:
            valid = self._valid_values(t, span)
            self.emit(f"pto.set_validshape %{ssa}, %{valid[0]}, %{valid[1]} : {tstr}")
            h.valid = valid
        self.handles[key] = h
        self.env[name] = h

    def subview(self, name: str, c: Call, span: Span | None) -> None:
        """`tile.slice(t, shape, offset)`: `%s = pto.subview %t[%r, %c] sizes [R, C] [valid [%vr, %vc]] : T -> S`
        for an unboxed tile; the result keeps the parent's layout, fractal and pad."""
        src = self.tile(c.args[0], span)
        t = self.types.get(name)
        pt = self.types.get(c.args[0].name) if isinstance(c.args[0], Var) else None
        if not isinstance(t, TileType) or not isinstance(pt, TileType) or t.rank != 2 or pt.rank != 2:
            raise unsupported("pl.tile.slice of a tile that is not 2-D", span)
        e, pe = effective_tile_view(t), effective_tile_view(pt)
        if pe["slayout"] != "none_box":
            raise unsupported("pl.tile.slice of a boxed (fractal) tile", span)
        if any(str(e[k]) != str(pe[k]) for k in ("blayout", "slayout", "fractal", "pad", "compact")):
            raise unsupported("pl.tile.slice that changes the layout or pad value", span,
                              hint="pto.subview keeps the parent's tile config; drop pad_value=")
        tstr, dyn = self.tile_type(t, span, view=True)
        offs = _arg(c, 2, "offset")
        items = offs.items if isinstance(offs, (ListExpr, TupleExpr)) else None
        if items is None or len(items) != 2:
            raise unsupported("pl.tile.slice without a 2-D offset list", span)
        ov = [self.index_value(x, span) for x in items]
        valid = ""
        vals = None
        if dyn:
            vals = self._valid_values(t, span)
            valid = f" valid [%{vals[0]}, %{vals[1]}]"
        ssa = self.fresh(name)
        self.emit(f"%{ssa} = pto.subview %{src.ssa}[%{ov[0]}, %{ov[1]}] sizes [{_int(t.shape[0])}, "
                  f"{_int(t.shape[1])}]{valid} : {src.type} -> {tstr}")
        self.env[name] = _Handle(ssa, tstr, ("subview", ssa), dyn, vals)

    def dps(self, name: str, pto_op: str, ins: list[tuple[str, str]], span: Span | None) -> _Handle:
        h = self.define_tile(name, span)
        self.emit(f"pto.{pto_op} ins({', '.join('%' + s for s, _ in ins)} : {', '.join(t for _, t in ins)}) "
                  f"outs(%{h.ssa} : {h.type})")
        return h

    def _tile_dtype(self, e: Expr) -> DType:
        t = self.types.get(e.name) if isinstance(e, Var) else None
        if not isinstance(t, TileType):
            raise InternalError(f"operand {e} has no tile type")
        return t.dtype

    def scalar_operand(self, e: Expr | None, tile_dtype: DType, span: Span | None) -> tuple[str, str]:
        """A scalar operand of a tile op: a value keeps its own type; a literal takes the tile's dtype,
        except a float literal on an integer tile, which stays FP32 (OP-6)."""
        if e is None:
            raise InternalError("missing scalar operand")
        if isinstance(e, ConstFloat) and not tile_dtype.is_float:
            return self.const_float(e.value, dtypes.FP32), "f32"
        if isinstance(e, (ConstInt, ConstFloat, ConstBool)):
            r = self.expr(e, want=tile_dtype)
            return r.ssa, scalar_type(tile_dtype, span)
        r = self.expr(e)
        return r.ssa, scalar_type(r.dtype, span)

    def round_mode(self, mode: Expr | None, span: Span | None) -> str:
        if mode is None or isinstance(mode, NoneLit):
            return "ROUND"  # PyPTO's default rounding mode of pl.cast
        if isinstance(mode, ConstInt) and mode.value in ROUND_MODE_BY_INT:
            return ROUND_MODE_BY_INT[mode.value]
        text = _enum_text(mode)
        if text is not None and text.lower() in ROUND_MODE:
            return ROUND_MODE[text.lower()]
        raise unsupported(f"pl.tile.cast with rounding mode {mode}", span)

    def mask_pattern(self, e: Expr | None, span: Span | None) -> str:
        from ptoc.ops.gather import MASK_BY_NAME, MASK_PATTERNS

        if isinstance(e, EnumLit) and e.member in MASK_BY_NAME:
            return e.member
        if isinstance(e, StrLit) and e.value in MASK_BY_NAME:
            return e.value
        v = _int(e) if e is not None else None
        if v in MASK_PATTERNS:
            return MASK_PATTERNS[v][0]
        raise unsupported("pl.tile.gather_mask without a constant mask pattern", span)

    def set_validshape(self, name: str, c: Call, span: Span | None) -> None:
        """`x = tile.set_validshape(t, r, c)`: updates the valid shape of t's handle in place when t's
        handle already has a dynamic (`?`) valid shape; otherwise x is a second handle on t's bytes
        (level3: an alloc at the same addr; level2: a `pto.treshape` view of t's handle)."""
        self.tile(c.args[0], span)  # the source must be a tile handle
        t = self.types.get(name)
        if not isinstance(t, TileType) or t.memref is None:
            raise InternalError(f"tile {name} has no MemRef (run InitMemRef)")
        tstr, dyn = self.tile_type(t, span)
        key = self._key(t.memref, tstr)
        h = self.handles.get(key)
        if h is not None and h.dynamic:
            valid = (self.index_value(c.args[1], span), self.index_value(c.args[2], span))
            self.emit(f"pto.set_validshape %{h.ssa}, %{valid[0]}, %{valid[1]} : {h.type}")
            h.valid = valid
            self.env[name] = h
            return
        if h is not None:
            self.env[name] = h  # same static valid shape: nothing changes
            return
        if self.level == "level2":
            # no addresses to share: an aliasing view of the source (pto.treshape), its valid shape set
            # with pto.set_validshape when it is dynamic
            self.reshape(name, c, span)
            return
        self._alloc(key, name, t, tstr, dyn, span)
        self.env[name] = self.handles[key]

    def _on_alloc(self, name: str, span: Span | None) -> None:
        for key, first, t in self.pending.get(name, ()):
            if key not in self.handles:
                tstr, dyn = self.tile_type(t, span)
                self._alloc(key, first, t, tstr, dyn, span)

    def store(self, c: Call, span: Span | None) -> None:
        a = self.tile(c.args[0], span)
        attrs = self.store_attrs(c, span)
        pv, pt = self.partition(c, span)
        tail = f" {{{', '.join(f'{k} = {v}' for k, v in sorted(attrs.items()))}}}" if attrs else ""
        self.emit(f"pto.tstore ins(%{a.ssa} : {a.type}) outs(%{pv} : {pt}){tail}")

    def store_attrs(self, c: Call, span: Span | None) -> dict[str, str]:
        items: list[tuple[str, Expr]] = []
        for k, v in c.kwargs:
            if k == "attrs":
                if not isinstance(v, DictExpr):
                    raise unsupported("pl.tile.store attrs= that is not a dict", span)
                for dk, dv in v.items:
                    if not isinstance(dk, StrLit):
                        raise unsupported("pl.tile.store attrs= with a non-string key", span)
                    items.append((dk.value, dv))
            elif k != "shapes":
                items.append((k, v))
        out: dict[str, str] = {}
        for k, v in items:
            spec = STORE_ATTRS.get(k)
            if spec is None:
                raise unsupported(f"pl.tile.store with {k}=", span)
            attr, mnemonic, table = spec
            if isinstance(v, NoneLit):
                continue
            if isinstance(v, ConstBool):
                text = ("add" if v.value else "none") if attr == "atomicType" else \
                    ("normal" if v.value else "none") if attr == "reluPreMode" else None
            else:
                text = _enum_text(v)
            member = table.get(text.lower()) if text is not None else None
            if member is None:
                raise unsupported(f"pl.tile.store with {k}={v}", span)
            out[attr] = f"#pto<{mnemonic} {member}>"
        return out
