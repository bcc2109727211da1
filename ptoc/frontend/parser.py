"""Front end: IR text -> `Program`.

`parse_program` runs the Lark grammar (`syntax.py`), gives each Python-shaped construct its IR meaning
(types in annotations, constants, op calls, loops with iter_args, yields, scopes), then runs the
verifier (`ptoc.ir.verifier`) for names, single assignment, yields, arities and annotations.
Every problem is a `Diagnostic` with the span it came from; all of a file's errors are reported.
"""

from __future__ import annotations

import difflib
from dataclasses import fields, replace

from ptoc.diagnostics import CompileError, Diagnostic, DiagnosticSink, Span, sorted_diagnostics
from ptoc.frontend.pyast import _span, parse_syntax
from ptoc.frontend.sn import SN, gc_paused
from ptoc.ir import dtypes
from ptoc.ir.nodes import (
    DISTRIBUTED_PREFIX,
    FUNCTION_TYPES,
    LOOP_KINDS,
    Abs,
    ArrayType,
    AssignStmt,
    BinOp,
    Call,
    Cast,
    CommCtxType,
    ConstBool,
    ConstFloat,
    ConstInt,
    DictExpr,
    DistributedTensorType,
    DTypeLit,
    DynDim,
    EnumLit,
    EvalStmt,
    Expr,
    ForStmt,
    Function,
    GetItem,
    IfStmt,
    ListExpr,
    MemRef,
    MinMax,
    Node,
    NoneLit,
    Param,
    PassStmt,
    Program,
    PtrType,
    ReturnStmt,
    ScalarType,
    ScopeStmt,
    Stmt,
    StrLit,
    TensorType,
    TensorView,
    TileType,
    TileView,
    TupleExpr,
    TupleType,
    Type,
    UnaryOp,
    Var,
    WhileStmt,
    BreakStmt,
    ContinueStmt,
    YieldStmt,
)
from ptoc.ir.types import ENUM_ALIASES, ENUMS, LAYOUT_SHORTHANDS, normalize_tensor_view, normalize_tile_view
from ptoc.ops import registry as _op_rules  # noqa: F401  (installs the type rules the verifier asks)


class _Fail(Exception):
    def __init__(self, code: str, message: str, span: Span | None, hint: str | None = None,
                 rule: str | None = None):
        super().__init__(message)
        self.diag = Diagnostic(code, message, span, hint, rule)


def _closest(name: str, options) -> str | None:
    m = difflib.get_close_matches(name, list(options), n=1, cutoff=0.6)
    return m[0] if m else None


_TYPE_CTORS = ("Tensor", "Tile", "Scalar", "Ptr", "Tuple", "Out", "InOut")


# `pld.<op>` short forms that name exactly one op of the distributed namespace
_DISTRIBUTED_SHORT = {
    "window": "tensor.window",
    "alloc_window_buffer": "tensor.alloc_window_buffer",
    "world_size": "system.world_size",
    "get_comm_ctx": "system.get_comm_ctx",
    "rank": "system.rank",
    "nranks": "system.nranks",
    "remote_load": "tile.remote_load",
}

# scopes whose body runs on a device, not on the host (`with pl.at(level=pl.Level.CORE_GROUP):`)
_DEVICE_SCOPES = ("at", "incore", "auto_incore", "spmd", "cluster")

# syntax-node kind -> the Builder method that builds its statement
_STMT_BUILDERS = {
    "ann_assign": "ann_assign_stmt", "assign": "assign_stmt", "expr_stmt": "expr_stmt", "return": "return_stmt",
    "pass": "pass_stmt", "for": "for_stmt", "while": "while_stmt", "if": "if_stmt", "with": "with_stmt",
}


def _maker(cls):
    """`make(span, *fields)`, the node `cls(*fields, span=span)` (fields in the dataclass's order) made
    without the frozen dataclass's `__init__`: the same attributes set in the same order, for a fraction of
    the cost (the builder makes a node per name, number, call and statement). For node classes without a
    `__post_init__`; tests/test_frontend_type_reuse.py compares both on every example."""
    assert "__post_init__" not in vars(cls)
    names = [f.name for f in fields(cls)]
    src = f"def make({', '.join(names)}):\n    n = _new(cls)\n" + "".join(
        f"    _sa(n, {k!r}, {k})\n" for k in names) + "    return n\n"
    ns = {"_new": object.__new__, "_sa": object.__setattr__, "cls": cls}
    exec(src, ns)  # noqa: S102  (code built from the class's field names only)
    return ns["make"]


_mk_var = _maker(Var)
_mk_int = _maker(ConstInt)
_mk_call = _maker(Call)
_mk_list = _maker(ListExpr)
_mk_enum = _maker(EnumLit)
_mk_assign = _maker(AssignStmt)
_INDEX = dtypes.INDEX


# syntax-node kinds of literal expressions -> their IR node
_LEAF_EXPRS = {
    "name": lambda n: _mk_var(n.span, n.a[0]),
    "int": lambda n: _mk_int(n.span, n.a[0], _INDEX),
    "float": lambda n: ConstFloat(n.a[0], dtypes.FP32, span=n.span),
    "str": lambda n: StrLit(n.a[0], span=n.span),
    "true": lambda n: ConstBool(True, span=n.span),
    "false": lambda n: ConstBool(False, span=n.span),
    "none": lambda n: NoneLit(span=n.span),
}

# syntax-node kind -> the Builder method that builds the expression
_EXPR_BUILDERS = {
    "paren": "paren_expr", "list": "list_expr", "tuple": "tuple_expr", "dict": "dict_expr", "bin": "binary_expr",
    "cmp": "binary_expr", "unary": "unary_expr", "attr": "attr_value", "getitem": "getitem_expr", "call": "call",
}


# Keywords PyPTO's language functions name differently from the op's parameter: the front end stores
# the op's name, so every later stage reads one spelling (pl.load(..., valid_shape=...) -> valid_shapes=).
_KEYWORD_ALIASES = {
    "tile.load": {"valid_shape": "valid_shapes"}, "load": {"valid_shape": "valid_shapes"},
    "tile.store": {"output_tensor": "output"}, "store": {"output_tensor": "output"},
}

# The cross-core pipe set-up: PyPTO's builder makes its two consumer buffer bases the op's positional
# arguments whatever way they are written (by keyword, or left out: 0), a number an INT32 constant, and
# its printer writes them so: `pl.aic_initialize_pipe(pl.const(0, pl.INT32), buf, dir_mask=2, ...)`.
_PIPE_INIT = frozenset({"aic_initialize_pipe", "aiv_initialize_pipe", "system.aic_initialize_pipe",
                        "system.aiv_initialize_pipe"})
_PIPE_BUFS = ("c2v_consumer_buf", "v2c_consumer_buf")

# split-axis crossings whose split= the enclosing pl.split_aiv loop gives when the call leaves it out
_SPLIT_CROSSINGS = frozenset({"aiv_shard", "aic_gather", "tile.aiv_shard", "tile.aic_gather", "tensor.aiv_shard",
                              "tensor.aic_gather"})


class Builder:
    """Syntax nodes -> IR, one statement at a time so one bad statement does not hide the next."""

    def __init__(self, file: str, sink: DiagnosticSink):
        self.file = file
        self.sink = sink
        self.prefix = "pl"
        self.declared_slots: dict[str, tuple[int, Span]] = {}
        self.split_modes: list[str] = []  # SplitMode members of the enclosing pl.split_aiv loops
        self.dprefix: str | None = None  # the alias of `import pypto.language.distributed`, when imported
        self._host = False  # the function being built is a HOST-level one (`level=pl.Level.HOST`)
        self._device_depth = 0  # device-side scopes (`with pl.at(...)`, ...) around the statement
        self._window_target: str | None = None  # `buf` while building `buf = pld.alloc_window_buffer(...)`
        self._window_names: dict[str, Span] = {}  # window buffers of the program, by name
        self._submits: list[tuple[str, int, Span]] = []  # (kernel, results unpacked, where) of each pl.submit
        self.scalar_names: set[str] = set()  # names known to hold scalars (decides pl.cast form)
        # a runtime scope (`with pl.scope():`, `with pl.manual_scope():`) was built: the only statements
        # `check_scopes` reports on (a program without one is not walked for them)
        self.runtime_scopes = False
        # (line, column, key) of every line the printer writes, when collected for the formatter: the
        # key names the printed line the way the printer finds it (see ptoc.ir.printer.SourceComments)
        self.anchors: list[tuple[int, int, tuple]] | None = None
        # (what, annotation text) -> [the plan of what was built (`_copy_plan`), the span it was built for,
        # prefix, dprefix, its `_copier` once made]: see type()
        self._built_types: dict[tuple[str, str], list] = {}
        # the op names of the op calls built (`Call` of kind "op"), and `GetItem` once an element read was
        # built: what `ptoc.frontend.short_names` asks of the program, recorded as it is built (see `made`)
        self.made: set = set()

    # ------------------------------------------------------------------ helpers
    def fail(self, code: str, message: str, node, hint: str | None = None, rule: str | None = None):
        span = node.span if isinstance(node, SN) else node
        raise _Fail(code, message, span, hint, rule)

    def report(self, f: _Fail) -> None:
        self.sink.add(f.diag)

    def _anchor(self, span: Span | None, key: tuple) -> None:
        if self.anchors is not None and span is not None and span.known:
            self.anchors.append((span.line, span.col, key))

    def _pl_path(self, n: SN) -> list[str] | None:
        """`pl.a.b` -> ["a", "b"]; None when the chain does not start at the IR prefix."""
        parts: list[str] = []
        while n.k == "attr":
            parts.append(n.a[1])
            n = n.a[0]
        if n.k == "name" and n.a[0] == self.prefix:
            return parts[::-1]
        return None

    def _pld_path(self, n: SN) -> list[str] | None:
        """`pld.a.b` -> ["a", "b"] when `pld` is the distributed namespace's alias; else None."""
        if self.dprefix is None:
            return None
        parts: list[str] = []
        while n.k == "attr":
            parts.append(n.a[1])
            n = n.a[0]
        if n.k == "name" and n.a[0] == self.dprefix:
            return parts[::-1]
        return None

    @staticmethod
    def _unparen(n: SN) -> SN:
        while n.k == "paren":
            n = n.a[0]
        return n

    # ------------------------------------------------------------------ module
    def module(self, nodes: tuple[SN, ...]) -> Program | None:
        dyn: list[DynDim] = []
        program: Program | None = None
        seen_import = False
        for n in nodes:
            try:
                if n.k in ("import", "from_import"):
                    pld = n.a[0] == "pypto.language.distributed" or (n.k == "from_import" and tuple(n.a[:2]) == (
                        "pypto.language", "distributed"))
                    self._anchor(n.span, ("import_pld",) if pld else ("import",))
                if n.k == "import" and n.a[0] == "pypto.language.distributed":
                    if n.a[1] is None:
                        self.fail("PTOC-E0005", "import pypto.language.distributed without an alias", n,
                                  hint="write `import pypto.language.distributed as pld`")
                    self.dprefix = n.a[1]
                elif n.k == "import":
                    if n.a[0] != "pypto.language":
                        self.fail("PTOC-E0005", f"unexpected import of {n.a[0]!r}", n,
                                  hint="an IR file imports `import pypto.language as pl` and, for distributed "
                                  "programs, `import pypto.language.distributed as pld`")
                    self.prefix = n.a[1] or "pypto.language"
                    if n.a[1] is None:
                        self.fail("PTOC-E0005", "import pypto.language without an alias", n,
                                  hint="write `import pypto.language as pl`")
                    seen_import = True
                elif n.k == "from_import" and n.a[0] == "pypto.language" and n.a[1] == "distributed":
                    self.dprefix = n.a[2] or "distributed"
                elif n.k == "from_import":
                    if n.a[0] == "pypto" and n.a[1] == "language":
                        self.prefix = n.a[2] or "language"
                        seen_import = True
                    else:
                        self.fail("PTOC-E0005", f"unexpected import from {n.a[0]!r}", n,
                                  hint="an IR file imports only `import pypto.language as pl`")
                elif n.k == "assign":
                    dyn.append(self.dyn_dim(n))
                elif n.k == "class":
                    if program is not None:
                        self.fail("PTOC-E0100", "a file holds one program; found a second class", n,
                                  hint="put each program in a file of its own")
                    program = self.program_class(n)
                elif n.k == "def":
                    if program is not None:
                        self.fail("PTOC-E0100", "a file holds one program or one bare function", n,
                                  hint="move the function into the @pl.program class")
                    fn = self.function(n, in_class=False)
                    program = Program(fn.name, (fn,), bare_function=True, span=n.span)
                elif n.k == "pass":
                    continue
                else:
                    self.fail("PTOC-E0005", "only imports, `pl.dynamic` symbols and one program may stand "
                              "at module level", n)
            except _Fail as f:
                self.report(f)
        if program is None:
            if not self.sink.has_errors:
                self.sink.error("PTOC-E0100", "the file holds no @pl.program class and no @pl.function",
                                Span(self.file, 1, 1, 1, 2),
                                hint="an IR file is one `@pl.program` class or one bare `@pl.function`")
            return None
        if not seen_import and not self.sink.has_errors:
            pass  # the printer always writes the import, but a missing one is harmless
        names = [d.name for d in dyn]
        for i, d in enumerate(dyn):
            if d.name in names[:i]:
                self.sink.error("PTOC-E0112", f"dynamic dimension {d.name!r} is declared twice", d.span)
        return Program(program.name, program.functions, tuple(dyn), program.bare_function, span=program.span)

    def dyn_dim(self, n: SN) -> DynDim:
        lhs, rhs = n.a
        if len(lhs.a) != 1 or lhs.a[0].k != "name" or len(rhs.a) != 1:
            self.fail("PTOC-E0005", "module-level assignments declare dynamic dimensions only", n,
                      hint='write `M = pl.dynamic("M")`')
        name = lhs.a[0].a[0]
        call = self._unparen(rhs.a[0])
        path = self._pl_path(call.a[0]) if call.k == "call" else None
        if path != ["dynamic"]:
            self.fail("PTOC-E0005", f"module-level assignment to {name!r} is not a `pl.dynamic` symbol", n,
                      hint=f'write `{name} = pl.dynamic("{name}")`; other constants belong inline in the IR')
        args = call.a[1]
        if len(args) != 1 or args[0][0] is not None or args[0][1].k != "str":
            self.fail("PTOC-E0113", "pl.dynamic takes one string: the symbol's name", call,
                      hint=f'write `{name} = pl.dynamic("{name}")`')
        self._anchor(n.span, ("dyn", name))
        return DynDim(name, args[0][1].a[0], span=lhs.a[0].span)

    def _decorator(self, d: SN, expected: str) -> tuple[bool, tuple]:
        """Is `d` `@pl.<expected>` or `@pl.<expected>(...)`? Returns (ok, args)."""
        if d.k == "call":
            path = self._pl_path(d.a[0])
            return path == [expected], d.a[1]
        return self._pl_path(d) == [expected], ()

    def program_class(self, n: SN) -> Program:
        name, body, decos = n.a
        for d in decos:
            self._anchor(d.span, ("prog_deco",))
        self._anchor(n.span, ("class",))
        if len(decos) != 1 or not self._decorator(decos[0], "program")[0]:
            self.fail("PTOC-E0115", f"class {name!r} must be decorated with exactly `@pl.program`", n,
                      hint="write `@pl.program` on the line above the class")
        if decos[0].k == "call" and decos[0].a[1]:
            self.fail("PTOC-E0115", "@pl.program takes no arguments", decos[0])
        functions: list[Function] = []
        for s in body:
            try:
                if s.k == "def":
                    functions.append(self.function(s, in_class=True))
                elif s.k == "pass":
                    continue
                else:
                    self.fail("PTOC-E0005", "a program class holds only @pl.function methods", s)
            except _Fail as f:
                self.report(f)
        self._check_submits(functions)
        seen: dict[str, Function] = {}
        for f in functions:
            if f.name in seen:
                self.sink.error("PTOC-E0112", f"function {f.name!r} is defined twice", f.span,
                                hint="rename one of the two functions")
            seen[f.name] = f
        return Program(name, tuple(functions), span=n.span)

    def _check_submits(self, functions: list[Function]) -> None:
        """`out, tid = pl.submit(self.kernel, ...)` unpacks as many results as the kernel returns (the
        task id is the element after them)."""
        by_name = {f.name: f for f in functions}
        for kernel, n, span in self._submits:
            f = by_name.get(kernel)
            if f is not None and len(f.returns) != n:
                self.sink.error("PTOC-E0130", f"pl.submit(...) unpacks {n} result value(s) but kernel {kernel!r} "
                                f"returns {len(f.returns)}", span,
                                hint="bind one name per kernel result, then the task id: `(a, b), tid = "
                                "pl.submit(...)` for two results")

    # ------------------------------------------------------------------ functions
    def function(self, n: SN, in_class: bool) -> Function:
        name, params, ret, body, decos = n.a
        self.scalar_names = set()
        self.declared_slots: dict[str, tuple[int, Span]] = {}  # pl.MemRef("name") of this function
        self._tmp_count = 0  # temporaries of tuple unpacking in this function
        fkey = (n.span.line, n.span.col)
        for d in decos:
            self._anchor(d.span, ("deco",) + fkey)
        self._anchor(n.span, ("def",) + fkey)
        if len(decos) != 1:
            self.fail("PTOC-E0115", f"function {name!r} needs exactly one decorator, `@pl.function`", n,
                      hint="write `@pl.function` or `@pl.function(type=pl.FunctionType.InCore)`")
        func_type, dkw = self._function_decorator(name, decos[0])
        self._func_type = func_type
        self._host = any(k == "level" and isinstance(v, EnumLit) and v.member == "HOST" for k, v in dkw)
        has_self = bool(params) and params[0].a[0] == "self" and params[0].a[1] is None
        plist = self._params(params[1:] if has_self else params)
        returns, returns_tuple = self._returns(ret)
        stmts, attrs = self._func_attrs(list(body), fkey)
        return Function(name, tuple(plist), returns, self.block(stmts, top=True), func_type, tuple(dkw),
                        has_self, returns_tuple, attrs, span=n.span)

    def _function_decorator(self, name: str, deco: SN) -> tuple[str, list[tuple[str, Expr]]]:
        """`@pl.function(type=..., other=...)`: the function type and the other keywords, in order."""
        ok, dargs = self._decorator(deco, "function")
        if not ok:
            self.fail("PTOC-E0115", f"function {name!r} must be decorated with `@pl.function`", deco,
                      hint="write `@pl.function` or `@pl.function(type=pl.FunctionType.InCore)`")
        func_type = "Opaque"
        dkw: list[tuple[str, Expr]] = []
        for key, val in dargs:
            if key is None:
                self.fail("PTOC-E0115", "@pl.function takes keyword arguments only", val,
                          hint="write `@pl.function(type=pl.FunctionType.InCore)`")
            k = self._kwname(key)
            if k == "type":
                func_type = self._function_type(val)
            else:
                if any(k == x for x, _ in dkw):
                    self.fail("PTOC-E0112", f"decorator keyword {k!r} is given twice", key)
                dkw.append((k, self.expr(val)))
        return func_type, dkw

    def _function_type(self, val: SN) -> str:
        path = self._pl_path(val)
        if not path or len(path) != 2 or path[0] != "FunctionType":
            self.fail("PTOC-E0115", "type= takes a `pl.FunctionType` member", val,
                      hint="one of " + ", ".join(f"pl.FunctionType.{t}" for t in FUNCTION_TYPES))
        if path[1] not in FUNCTION_TYPES:
            near = _closest(path[1], FUNCTION_TYPES)
            self.fail("PTOC-E0110", f"unknown function type {path[1]!r}", val,
                      hint=f"did you mean pl.FunctionType.{near}?" if near else "one of " + ", ".join(FUNCTION_TYPES))
        return path[1]

    def _params(self, params) -> list[Param]:
        plist: list[Param] = []
        for p in params:
            pname, ann = p.a
            if ann is None:
                self.fail("PTOC-E0109", f"parameter {pname!r} has no type", p,
                          hint=f"annotate it, e.g. `{pname}: pl.Tensor[[64, 64], pl.FP32]`")
            direction, ptype = self.param_type(ann)
            if pname in self.scalar_names or isinstance(ptype, ScalarType):
                self.scalar_names.add(pname)
            plist.append(Param(pname, ptype, direction, span=p.span))
        names = [p.name for p in plist]
        for i, p in enumerate(plist):
            if p.name in names[:i]:
                self.sink.error("PTOC-E0112", f"parameter {p.name!r} appears twice", p.span)
        return plist

    def _returns(self, ret: SN | None) -> tuple[tuple[Type, ...], bool]:
        """The declared return types, and whether they were written as `tuple[...]`."""
        if ret is None or ret.k == "none":
            return (), False
        r = self._unparen(ret)
        if r.k == "getitem" and r.a[0].k == "name" and r.a[0].a[0] == "tuple":
            return tuple(self.type(t) for t in r.a[1]), True
        return (self.type(r),), False

    def _func_attrs(self, stmts: list, fkey) -> tuple[list, tuple | None]:
        """A leading `pl.func_attr({...})` statement: the body without it, and its items."""
        if not stmts or stmts[0].k != "expr_stmt":
            return stmts, None
        e = self._single(stmts[0].a[0])
        if e is None or e.k != "call" or self._pl_path(e.a[0]) != ["func_attr"]:
            return stmts, None
        args = e.a[1]
        if len(args) != 1 or args[0][0] is not None or self._unparen(args[0][1]).k != "dict":
            self.fail("PTOC-E0113", "pl.func_attr takes one dict literal", e,
                      hint='write `pl.func_attr({"key": value})`')
        attrs = self.expr(args[0][1]).items
        self._anchor(stmts[0].span, ("attr",) + fkey)
        return stmts[1:], attrs

    def param_type(self, ann: SN) -> tuple[str, Type]:
        key = ann.key
        if key is not None:
            done = self._reuse_type("param", ann)
            if done is not None:
                return done
        direction, t = self._param_type(ann)
        if key is not None:
            self._keep_type("param", ann, (direction, t))
        return direction, t

    def _param_type(self, ann: SN) -> tuple[str, Type]:
        a = self._unparen(ann)
        if a.k == "getitem":
            path = self._pl_path(a.a[0])
            if path in (["Out"], ["InOut"]):
                if len(a.a[1]) != 1:
                    self.fail("PTOC-E0109", f"pl.{path[0]}[...] wraps exactly one type", a)
                return path[0], self.type(a.a[1][0])
        return "In", self.type(a)

    # ------------------------------------------------------------------ types
    def type(self, n: SN) -> Type:
        # A program writes a few annotations thousands of times. An annotation the reader keyed by its text
        # (one line, see pyast._TypeSN) is built once: the next ones with the same text get a copy of that
        # type with their own spans (the same nodes a build would give; `_moved`).
        key = n.key
        if key is not None:
            done = self._reuse_type("type", n)
            if done is not None:
                return done
            t = self._type(n)
            self._keep_type("type", n, t)
            return t
        return self._type(n)

    def _reuse_type(self, what: str, n: SN):
        hit = self._built_types.get((what, n.key))
        if hit is None or hit[2] != self.prefix or hit[3] != self.dprefix:
            return None
        copy = hit[4]
        if copy is None:  # (written out at the first copy: some annotations are written once)
            copy = hit[4] = _copier(hit[0], hit[1])
        new = n.span
        return copy(new, new.col - hit[1].col)

    def _keep_type(self, what: str, n: SN, built) -> None:
        """Keep what the annotation `n` built when it depends on nothing but its text: no call (pl.MemRef
        declares allocations, pl.TileView checks its fields), only names, numbers and operators."""
        if (what, n.key) not in self._built_types and _plain_type_syntax(n):
            old = n.span
            self._built_types[(what, n.key)] = [_copy_plan(built, old), old, self.prefix, self.dprefix, None]

    def _type(self, n: SN) -> Type:
        n = self._unparen(n)
        path = None
        args: tuple = ()
        if n.k == "getitem" and n.a[0].k == "name" and n.a[0].a[0] == "tuple":
            return TupleType(tuple(self.type(t) for t in n.a[1]), span=n.span)  # Python's tuple[...] = pl.Tuple
        if n.k == "getitem":
            path = self._pl_path(n.a[0])
            args = n.a[1]
        elif n.k == "attr":
            path = self._pl_path(n)
        if not path and n.k in ("getitem", "attr"):
            dpath = self._pld_path(n.a[0] if n.k == "getitem" else n)
            if dpath:
                return self.distributed_type(n, dpath, args)
        if not path:
            self.fail("PTOC-E0109", "expected a type such as `pl.Tensor[[64, 64], pl.FP32]`", n,
                      hint="types are pl.Tensor[...], pl.Tile[...], pl.Scalar[...], pl.Ptr or pl.Tuple[...]")
        head = path[0] if len(path) == 1 else None
        if n.k == "attr":
            if head == "Ptr":
                return PtrType(span=n.span)
            if head == "TaskId":  # PyPTO's shorthand for pl.Scalar[pl.TASK_ID]
                return ScalarType(dtypes.TASK_ID, span=n.span)
            dt = self._dtype_from_path(path, n, soft=True)
            if dt is not None:
                return ScalarType(dt, span=n.span)
            self.fail("PTOC-E0109", f"`pl.{'.'.join(path)}` is not a type", n,
                      hint="types are pl.Tensor[...], pl.Tile[...], pl.Scalar[...], pl.Ptr or pl.Tuple[...]")
        if head == "Scalar":
            if len(args) != 1:
                self.fail("PTOC-E0109", "pl.Scalar[...] takes one dtype", n, hint="write `pl.Scalar[pl.INDEX]`")
            return ScalarType(self.dtype(args[0]), span=n.span)
        if head == "Tuple":
            return TupleType(tuple(self.type(t) for t in args), span=n.span)
        if head == "Array":
            if len(args) != 2:
                self.fail("PTOC-E0109", "pl.Array[...] takes an extent and a dtype", n,
                          hint="write `pl.Array[4, pl.TASK_ID]`")
            return ArrayType(self.expr(args[0]), self.dtype(args[1]), span=n.span)
        if head in ("Tensor", "Tile"):
            if len(args) < 2:
                self.fail("PTOC-E0109", f"pl.{head}[...] needs a shape and a dtype", n,
                          hint=f"write `pl.{head}[[64, 64], pl.FP32]`")
            shape = self.shape(args[0], what="shape")
            dt = self.dtype(args[1])
            if head == "Tensor":
                return self.tensor_type(n, shape, dt, args[2:])
            return self.tile_type(n, shape, dt, args[2:])
        if head in ("Out", "InOut"):
            self.fail("PTOC-E0109", f"pl.{head}[...] is allowed on parameters only", n)
        near = _closest(path[-1], _TYPE_CTORS)
        self.fail("PTOC-E0109", f"unknown type constructor `pl.{'.'.join(path)}`", n,
                  hint=f"did you mean pl.{near}?" if near else
                  "types are pl.Tensor[...], pl.Tile[...], pl.Scalar[...], pl.Ptr or pl.Tuple[...]")

    def distributed_type(self, n: SN, path: list[str], args: tuple) -> Type:
        """`pld.DistributedTensor[[shape], dtype, ...]` and `pld.CommCtx` (also spelled `pld.CommCtxType`,
        as PyPTO prints it)."""
        if n.k == "attr" and path in (["CommCtx"], ["CommCtxType"]):
            return CommCtxType(span=n.span)
        if n.k == "getitem" and path == ["DistributedTensor"]:
            if len(args) < 2:
                self.fail("PTOC-E0109", "pld.DistributedTensor[...] needs a shape and a dtype", n,
                          hint="write `pld.DistributedTensor[[256], pl.BF16]`")
            # a trailing "window_buffer=NAME" string is a note PyPTO's dumps add; the window says it
            extra = tuple(x for x in args[2:] if self._unparen(x).k != "str")
            t = self.tensor_type(n, self.shape(args[0], what="shape"), self.dtype(args[1]), extra)
            return DistributedTensorType(t.shape, t.dtype, t.view, t.memref, span=n.span)
        shown = f"{self.dprefix}.{'.'.join(path)}"
        self.fail("PTOC-E0109", f"`{shown}` is not a type", n,
                  hint=f"distributed types are {self.dprefix}.DistributedTensor[[shape], dtype] and "
                  f"{self.dprefix}.CommCtx")

    def shape(self, n: SN, what: str) -> tuple[Expr, ...]:
        n = self._unparen(n)
        if n.k not in ("list", "tuple"):
            self.fail("PTOC-E0109", f"the {what} must be a list such as [64, 64]", n)
        return tuple(self.expr(x) for x in n.a)

    def tensor_type(self, n: SN, shape, dt, extra) -> TensorType:
        view = None
        memref = None
        for x in extra:
            x = self._unparen(x)
            kind, val = self._type_extra(x)
            if kind == "layout" and view is None and memref is None:
                view = TensorView(layout=val, span=x.span)
            elif kind == "TensorView" and view is None and memref is None:
                view = self.tensor_view(x)
            elif kind == "MemRef" and memref is None:
                memref = self.memref(x)
            else:
                self.fail("PTOC-E0109", "unexpected item in pl.Tensor[...]", x,
                          hint="pl.Tensor[[shape], dtype, layout or pl.TensorView(...), pl.MemRef(...)]")
        return TensorType(shape, dt, normalize_tensor_view(view), memref, span=n.span)

    def tile_type(self, n: SN, shape, dt, extra) -> TileType:
        memref = None
        memory = None
        view = None
        order = 0
        for x in extra:
            x = self._unparen(x)
            kind, val = self._type_extra(x)
            rank = {"MemRef": 1, "Mem": 2, "TileView": 3}.get(kind, 0)
            if rank == 0 or rank <= order:
                self.fail("PTOC-E0109", "unexpected item in pl.Tile[...]", x,
                          hint="pl.Tile[[shape], dtype, pl.MemRef(...)?, pl.Mem.<space>?, pl.TileView(...)?] "
                          "in this order")
            order = rank
            if kind == "MemRef":
                memref = self.memref(x)
            elif kind == "Mem":
                memory = val
            else:
                view = self.tile_view(x)
        return TileType(shape, dt, memref, memory, normalize_tile_view(shape, memory, view), span=n.span)

    def _type_extra(self, x: SN) -> tuple[str, object]:
        if x.k == "getitem" and x.a[0].k == "call" and self._pl_path(x.a[0].a[0]) == ["MemRef"]:
            return "MemRef", None
        if x.k == "call":
            path = self._pl_path(x.a[0])
            if path in (["TensorView"], ["TileView"], ["MemRef"]):
                return path[0], None
        elif x.k == "attr":
            path = self._pl_path(x)
            if path and len(path) == 1 and path[0] in LAYOUT_SHORTHANDS:
                return "layout", path[0]
            if path and len(path) == 2:
                fam = ENUM_ALIASES.get(path[0], path[0])
                if fam == "Mem":
                    return "Mem", self._enum_member(fam, path[1], x)
                if fam == "TensorLayout":
                    return "layout", self._enum_member(fam, path[1], x)
        return "?", None

    def _kw_call(self, x: SN, allowed: tuple[str, ...], what: str) -> dict[str, SN]:
        out: dict[str, SN] = {}
        for key, val in x.a[1]:
            if key is None:
                self.fail("PTOC-E0109", f"{what} takes keyword arguments only", val,
                          hint=f"keywords: {', '.join(allowed)}")
            k = self._kwname(key)
            if k not in allowed:
                near = _closest(k, allowed)
                self.fail("PTOC-E0109", f"{what} has no field {k!r}", key,
                          hint=f"did you mean {near}?" if near else f"fields: {', '.join(allowed)}")
            if k in out:
                self.fail("PTOC-E0112", f"{what} field {k!r} is given twice", key)
            out[k] = val
        return out

    def _enum_arg(self, n: SN, family: str) -> str:
        n = self._unparen(n)
        path = self._pl_path(n) if n.k == "attr" else None
        if not path or len(path) != 2 or ENUM_ALIASES.get(path[0], path[0]) != family:
            self.fail("PTOC-E0109", f"expected a pl.{family} member", n)
        return self._enum_member(family, path[1], n)

    def tensor_view(self, x: SN) -> TensorView:
        kw = self._kw_call(x, ("valid_shape", "stride", "layout", "pad"), "pl.TensorView")
        return TensorView(
            valid_shape=self.shape(kw["valid_shape"], "valid_shape") if "valid_shape" in kw else None,
            stride=(self.shape(kw["stride"], "stride") or None) if "stride" in kw else None,  # [] is packed
            layout=self._enum_arg(kw["layout"], "TensorLayout") if "layout" in kw else "ND",
            pad=self._enum_arg(kw["pad"], "PadValue") if "pad" in kw else None,
            span=x.span,
        )

    def tile_view(self, x: SN) -> TileView:
        fields = ("valid_shape", "stride", "start_offset", "blayout", "slayout", "fractal", "pad", "compact")
        kw = self._kw_call(x, fields, "pl.TileView")
        fractal = None
        if "fractal" in kw:
            f = self.expr(kw["fractal"])
            if not isinstance(f, ConstInt) or f.value <= 0:
                self.fail("PTOC-E0109", "fractal= takes a positive integer (bytes)", kw["fractal"])
            fractal = f.value
        return TileView(
            valid_shape=self.shape(kw["valid_shape"], "valid_shape") if "valid_shape" in kw else None,
            stride=self.shape(kw["stride"], "stride") if "stride" in kw else None,
            start_offset=self.expr(kw["start_offset"]) if "start_offset" in kw else None,
            blayout=self._enum_arg(kw["blayout"], "TileLayout") if "blayout" in kw else None,
            slayout=self._enum_arg(kw["slayout"], "TileLayout") if "slayout" in kw else None,
            fractal=fractal,
            pad=self._enum_arg(kw["pad"], "PadValue") if "pad" in kw else None,
            compact=self._enum_arg(kw["compact"], "CompactMode") if "compact" in kw else None,
            span=x.span,
        )

    def memref(self, x: SN) -> MemRef:
        if x.k == "getitem":  # one slot of a declared allocation: pl.MemRef("buf", slots=2)[k]
            m = self.memref(x.a[0])
            if not m.declared or m.slots <= 1 or len(x.a[1]) != 1 or x.a[1][0].k == "slice":
                self.fail("PTOC-E0140", "only a declared allocation with slots=N > 1 has slots to select", x,
                          hint='declare it as pl.MemRef("buf", slots=2) and select a slot with [k]')
            k = self.expr(x.a[1][0])
            if isinstance(k, ConstInt) and not 0 <= k.value < m.slots:
                self.fail("PTOC-E0140", f"slot {k.value} is out of range: the allocation has {m.slots} slots",
                          x.a[1][0], hint=f"select a slot in [0, {m.slots})")
            return replace(m, slot=k, span=x.span)
        args = x.a[1]
        if args and args[0][0] is None and all(k is None or self._kwname(k) == "slots" for k, _ in args[1:]) \
                and len([1 for k, _ in args if k is None]) == 1:
            return self._declared_memref(x, args)
        if len(args) != 3 or any(k is not None for k, _ in args):
            self.fail("PTOC-E0109", "pl.MemRef takes three positional values: base, byte offset, byte size", x,
                      hint='write `pl.MemRef("mem_ddr_0", pl.const(0, pl.INT64), 16384)`')
        base = self.expr(args[0][1])
        if not isinstance(base, (StrLit, Var)):
            self.fail("PTOC-E0109", "a MemRef base is a quoted region name or an allocation variable",
                      args[0][1])
        return MemRef(base, self.expr(args[1][1]), self.expr(args[2][1]), span=x.span)

    def _declared_memref(self, x: SN, args) -> MemRef:
        """`pl.MemRef("buf")` / `pl.MemRef("buf", slots=N)`: an allocation named by the program, its
        size and address left to memory planning (PyPTO's declared allocation)."""
        name = self.expr(args[0][1])
        if not isinstance(name, StrLit) or not name.value:
            self.fail("PTOC-E0140", "a declared allocation's name is a non-empty quoted string", args[0][1],
                      hint='write pl.MemRef("buf")')
        slots = 1
        for _, v in args[1:]:
            n = self.expr(v)
            if not isinstance(n, ConstInt) or n.value < 1:
                self.fail("PTOC-E0140", "slots= takes a positive integer", v, hint="write slots=2")
            slots = n.value
        seen = self.declared_slots.setdefault(name.value, (slots, x.span))
        if seen[0] != slots:
            self.fail("PTOC-E0140", f"the declarations of allocation {name.value!r} disagree on how many slots "
                      f"it has ({seen[0]} at line {seen[1].line}, {slots} here)", x,
                      hint="declare one allocation with one slot count, or give the other one its own name")
        zero = ConstInt(0, dtypes.INDEX, span=x.span)
        return MemRef(name, zero, zero, declared=True, slots=slots, span=x.span)

    def dtype(self, n: SN) -> dtypes.DType:
        n = self._unparen(n)
        path = self._pl_path(n) if n.k == "attr" else None
        if not path:
            self.fail("PTOC-E0107", "expected a dtype such as pl.FP32", n)
        dt = self._dtype_from_path(path, n, soft=False)
        assert dt is not None
        return dt

    def _dtype_from_path(self, path: list[str], n: SN, soft: bool) -> dtypes.DType | None:
        if len(path) == 1:
            dt = dtypes.lookup(path[0])
            if dt is not None:
                return dt
            if path[0] in dtypes.REMOVED:
                self.fail("PTOC-E0108", f"pl.{path[0]} no longer exists", n,
                          hint=f"use pl.{dtypes.REMOVED[path[0]]} (packed FP4, two values per byte) or "
                          "pl.FP4E1M2X2", rule="FP4-1")
        if soft:
            return None
        near = _closest(path[-1], dtypes.BY_NAME)
        self.fail("PTOC-E0107", f"unknown dtype `pl.{'.'.join(path)}`", n,
                  hint=f"did you mean pl.{near}?" if near else None)
        return None

    def _enum_member(self, family: str, member: str, n: SN) -> str:
        members = ENUMS.get(family)
        if members is not None and member not in members:
            near = _closest(member, members)
            self.fail("PTOC-E0110", f"pl.{family} has no member {member!r}", n,
                      hint=f"did you mean pl.{family}.{near}?" if near else
                      "members: " + ", ".join(members))
        return member

    # ------------------------------------------------------------------ expressions
    @staticmethod
    def _kwname_static(key: SN) -> str | None:
        return key.a[0] if key.k == "name" else None

    def _kwname(self, key: SN) -> str:
        k = self._kwname_static(key)
        if k is None:
            self.fail("PTOC-E0114", "a keyword argument needs a plain name before `=`", key)
        return k

    def _single(self, exprlist: SN) -> SN | None:
        return exprlist.a[0] if exprlist.k == "exprlist" and len(exprlist.a) == 1 else None

    def expr(self, n: SN) -> Expr:
        k = n.k
        leaf = _LEAF_EXPRS.get(k)
        if leaf is not None:
            return leaf(n)
        build = _EXPR_FNS.get(k)
        if build is not None:
            return build(self, n)
        if k == "chaincmp":
            self.fail("PTOC-E0114", "chained comparisons are not IR", n, hint="combine comparisons with `and`")
        if k == "slice":
            self.fail("PTOC-E0005", "slices are DSL syntax, not IR", n,
                      hint="use pl.tensor.slice(t, shape, offset)")
        self.fail("PTOC-E0114", "unexpected expression", n)

    def paren_expr(self, n: SN) -> Expr:
        return self.expr(n.a[0])

    def list_expr(self, n: SN) -> Expr:
        return _mk_list(n.span, tuple([self.expr(x) for x in n.a]))

    def tuple_expr(self, n: SN) -> Expr:
        return TupleExpr(tuple(self.expr(x) for x in n.a), span=n.span)

    def dict_expr(self, n: SN) -> Expr:
        return DictExpr(tuple((self.expr(a), self.expr(b)) for a, b in n.a), span=n.span)

    def binary_expr(self, n: SN) -> Expr:
        op, lhs, rhs = n.a
        if n.k == "cmp" and lhs.k == "cmp":
            self.fail("PTOC-E0114", "chained comparisons are not IR", n, hint="combine two comparisons with `and`")
        return BinOp(op, self.expr(lhs), self.expr(rhs), span=n.span)

    def unary_expr(self, n: SN) -> Expr:
        op, x = n.a
        sp = n.span
        if op in ("-", "+") and x.k in ("int", "float"):
            v = -x.a[0] if op == "-" else x.a[0]
            return ConstInt(v, dtypes.INDEX, span=sp) if x.k == "int" else ConstFloat(v, dtypes.FP32, span=sp)
        if op == "+":
            return self.expr(x)
        return UnaryOp(op, self.expr(x), span=sp)

    def getitem_expr(self, n: SN) -> Expr:
        base, subs = n.a
        if len(subs) != 1 or subs[0].k == "slice":
            offsets, extents = self._window(n, reading=True)
            self.made.add("slice")
            return Call("slice", (self.expr(base), ListExpr(extents, span=n.span), ListExpr(offsets, span=n.span)),
                        span=n.span)
        path = self._pl_path(base) if base.k == "attr" else None
        if path:
            self.fail("PTOC-E0109", f"a type `pl.{'.'.join(path)}[...]` cannot be used as a value", n)
        self.made.add(GetItem)
        return GetItem(self.expr(base), self.expr(subs[0]), span=n.span)

    def _window(self, n: SN, reading: bool) -> tuple[tuple[Expr, ...], tuple[Expr, ...]]:
        """The offsets and extents a subscript `t[a:b, c:d]` names (PyPTO's slicing sugar for
        `pl.slice(t, [b - a, d - c], [a, c])`; as a write target, for `pl.assemble(t, src, [a, c])`).
        A missing lower bound is 0. Reading needs every upper bound (the front end does not know the
        shape); an index that is not a slice would drop its axis, which is not supported yet."""
        offsets: list[Expr] = []
        extents: list[Expr] = []
        for sub in n.a[1]:
            if sub.k != "slice":
                self.fail("PTOC-E0142", "an index that drops an axis in a multi-axis subscript is not "
                          "supported yet", sub, hint="write the axis as a slice i:i+1 of extent 1")
            lo, hi = sub.a
            low = self.expr(lo) if lo is not None else ConstInt(0, dtypes.INDEX, span=sub.span)
            offsets.append(low)
            if hi is None:
                if reading:
                    self.fail("PTOC-E0142", "a slice that is read needs its upper bound", sub,
                              hint="write the bound, e.g. t[0:64, 8:16]")
                continue
            high = self.expr(hi)
            if isinstance(low, ConstInt) and low.value == 0:
                extents.append(high)
            elif isinstance(low, ConstInt) and isinstance(high, ConstInt):
                extents.append(ConstInt(high.value - low.value, dtypes.INDEX, span=sub.span))
            elif isinstance(high, BinOp) and high.op == "+" and high.lhs == low:
                extents.append(high.rhs)  # r:r + 16 -> 16
            else:
                extents.append(BinOp("-", high, low, span=sub.span))
        return tuple(offsets), tuple(extents)

    def _subscript_write(self, target: SN, value: SN, n: SN) -> Stmt:
        """`dst[a:b, c:d] = src`: PyPTO's sugar for `dst = pl.assemble(dst, src, [a, c])` (the window's
        extents are the source's shape; axes after the last subscript start at 0)."""
        base, _ = target.a
        base = self._unparen(base)
        if base.k != "name":
            self.fail("PTOC-E0142", "a subscript write needs a named tensor or tile", base,
                      hint="write dst[...] = src with dst a name")
        subs = target.a[1]
        if len(subs) == 1 and subs[0].k != "slice":
            # `arr[i] = v` on a pl.Array: PyPTO's functional update `arr = array.update_element(arr, i, v)`
            self.made.add("array.update_element")
            call = Call("array.update_element", (Var(base.a[0], span=base.span), self.expr(subs[0]),
                                                 self.expr(value)), span=target.span)
            return AssignStmt(Var(base.a[0], span=base.span), call, None, span=n.span)
        offsets, _ = self._window(target, reading=False)
        dst = Var(base.a[0], span=base.span)
        self.made.add("assemble")
        call = Call("assemble", (dst, self.expr(value), ListExpr(offsets, span=target.span)), span=target.span)
        return AssignStmt(Var(base.a[0], span=base.span), call, None, span=n.span)

    def attr_value(self, n: SN) -> Expr:
        path = self._pl_path(n)
        if path is None and self._pld_path(n):
            return self.distributed_enum(n, self._pld_path(n))
        if path == ["AUTO"]:  # pl.AUTO: "let the compiler choose" (a buffer base), PyPTO's -1
            return ConstInt(-1, dtypes.INDEX, span=n.span)
        if path is None:
            self.fail("PTOC-E0114", "attribute access is allowed on `pl` only", n,
                      hint="values are names, constants, pl.<enum>.<member>, pl.<dtype> or calls")
        if len(path) == 1:
            if path[0] in LAYOUT_SHORTHANDS:
                return EnumLit("TensorLayout", path[0], span=n.span)
            if path[0] == "Ptr":
                self.fail("PTOC-E0109", "a type cannot be used as a value", n)
            dt = self._dtype_from_path(path, n, soft=False)
            return DTypeLit(dt, span=n.span)
        if len(path) == 2:
            fam = ENUM_ALIASES.get(path[0], path[0])
            if fam in ENUMS:
                return _mk_enum(n.span, fam, self._enum_member(fam, path[1], n))
            return _mk_enum(n.span, path[0], path[1])  # an enum family ptoc carries through
        if len(path) == 3 and path[1][:1].isupper() and path[0][:1].islower():
            return EnumLit(f"{path[0]}.{path[1]}", path[2], span=n.span)  # e.g. pl.tile.MaskPattern.P0101
        self.fail("PTOC-E0114", f"`pl.{'.'.join(path)}` is not a value", n,
                  hint="call it (`pl.<namespace>.<op>(...)`) or use an enum member `pl.<Enum>.<member>`")

    def distributed_enum(self, n: SN, path: list[str]) -> Expr:
        """`pld.ReduceOp.Sum` and the other enums of the distributed namespace."""
        fam = DISTRIBUTED_PREFIX + path[0]
        if len(path) != 2 or fam not in ENUMS:
            names = ", ".join(f"{self.dprefix}.{f[len(DISTRIBUTED_PREFIX):]}" for f in ENUMS
                              if f.startswith(DISTRIBUTED_PREFIX))
            self.fail("PTOC-E0114", f"`{self.dprefix}.{'.'.join(path)}` is not a value", n,
                      hint=f"call it (`{self.dprefix}.<namespace>.<op>(...)`) or use a member of {names}")
        members = ENUMS[fam] or ()
        if path[1] not in members:
            near = _closest(path[1], members)
            self.fail("PTOC-E0110", f"{self.dprefix}.{path[0]} has no member {path[1]!r}", n,
                      hint=f"did you mean {self.dprefix}.{path[0]}.{near}?" if near else
                      "members: " + ", ".join(members))
        return EnumLit(fam, path[1], span=n.span)

    def _args(self, n: SN) -> tuple[tuple[Expr, ...], tuple[tuple[str, Expr], ...]]:
        args: list[Expr] = []
        kwargs: list[tuple[str, Expr]] = []
        for key, val in n.a[1]:
            if key is None:
                if kwargs:
                    self.fail("PTOC-E0114", "a positional argument follows a keyword argument", val)
                args.append(self.expr(val))
            else:
                kname = self._kwname(key)
                if any(kname == k for k, _ in kwargs):
                    self.fail("PTOC-E0112", f"keyword argument {kname!r} is given twice", key)
                kwargs.append((kname, self.expr(val)))
        return tuple(args), tuple(kwargs)

    def call(self, n: SN) -> Expr:
        func = n.a[0]
        sp = n.span
        if func.k == "name":
            fname = func.a[0]
            if fname == "abs":
                args, kwargs = self._args(n)
                if len(args) != 1 or kwargs:
                    self.fail("PTOC-E0113", "abs takes one argument", n)
                return Abs(args[0], span=sp)
            args, kwargs = self._args(n)
            return _mk_call(sp, fname, args, kwargs, "func")
        if func.k == "attr" and func.a[0].k == "name" and func.a[0].a[0] == "self":
            args, kwargs = self._args(n)
            return _mk_call(sp, func.a[1], args, kwargs, "func")
        path = self._pl_path(func) if func.k == "attr" else None
        if not path and func.k == "attr" and self._pld_path(func):
            return self.distributed_call(n, self._pld_path(func))
        if not path:
            self.fail("PTOC-E0114", "only `pl.<op>(...)`, `self.<function>(...)` and abs(...) can be called", n)
        if len(path) == 2 and path[1] == "get_byte" and dtypes.lookup(path[0]) is not None:
            if n.a[1]:
                self.fail("PTOC-E0113", f"pl.{path[0]}.get_byte() takes no arguments", n)
            return ConstInt(dtypes.lookup(path[0]).bytes, dtypes.INDEX, span=sp)  # bytes of one element
        op = ".".join(path)
        if op == "const":
            return self.const(n)
        if op in ("yield_", "cond", "func_attr", "dynamic"):
            where = {"yield_": "as the last statement of a loop body or an if branch",
                     "cond": "as the first statement of a pl.while_ loop",
                     "func_attr": "as the first statement of a function",
                     "dynamic": "at module level (`M = pl.dynamic(\"M\")`)"}[op]
            self.fail("PTOC-E0111", f"pl.{op}(...) may appear only {where}", n)
        if op in LOOP_KINDS or op == "while_":
            self.fail("PTOC-E0111", f"pl.{op}(...) is a loop header; use it as `for ... in pl.{op}(...)`", n)
        if op in ("submit", "spmd_submit"):
            return self.submit(n, op)
        args, kwargs = self._args(n)
        if op in ("min", "max") and len(args) == 2 and not kwargs:
            return MinMax(op, args[0], args[1], span=sp)
        if op == "cast" and len(args) == 2 and not kwargs and isinstance(args[1], DTypeLit) \
                and self._is_scalar(args[0]):
            return Cast(args[0], args[1].dtype, span=sp)
        if op in _SPLIT_CROSSINGS and self.split_modes and not any(k == "split" for k, _ in kwargs):
            # PyPTO stamps a crossing inside `for ... in pl.split_aiv(2, mode=M)` with that loop's mode
            code = ("NONE", "UP_DOWN", "LEFT_RIGHT").index(self.split_modes[-1])
            kwargs = (*kwargs, ("split", ConstInt(code, dtypes.INDEX, span=sp)))
        if op in ("mrgsort", "tile.mrgsort", "tensor.mrgsort"):
            # the language's merge sort: one list of sorted runs (block_len=) or 2..4 sorted lists
            form = "format1" if any(k == "block_len" for k, _ in kwargs) else "format2"
            op = f"{op}_{form}"
        if op in ("scatter_update", "tensor.scatter_update", "tile.scatter_update") and len(args) == 4:
            # the language's (input, dim, index, src): dim is the op's attribute
            args, kwargs = (args[0], args[2], args[3]), (*kwargs, ("dim", args[1]))
        if op == "tensor.scatter" and any(k == "mask_pattern" for k, _ in kwargs):
            op = "tensor.scatter_mask"  # the language's mask form (input, mask_pattern=, dst=) is this op
        if op in _PIPE_INIT:
            args, kwargs = _pipe_buffers_positional(args, kwargs, sp)
        aliases = _KEYWORD_ALIASES.get(op)
        if aliases and any(k in aliases for k, _ in kwargs):
            kwargs = tuple((aliases.get(k, k), v) for k, v in kwargs)
        self.made.add(op)
        return _mk_call(sp, op, args, kwargs, "op")

    def distributed_call(self, n: SN, path: list[str]) -> Expr:
        """`pld.<category>.<op>(...)`: an op of the distributed namespace, named `pld.<category>.<op>` in
        the IR. The short forms that name one op (`pld.window`) become its full name, as PyPTO's parser
        makes them; `pld.remote_store` picks its tile or tensor form by its source (see ops/distributed)."""
        name = ".".join(path)
        name = _DISTRIBUTED_SHORT.get(name, name)
        if name in ("tensor.alloc_window_buffer", "system.world_size"):
            self._host_only(n, name)
        if name == "tensor.alloc_window_buffer":
            self._window_buffer(n)
        args, kwargs = self._args(n)
        self.made.add(DISTRIBUTED_PREFIX + name)
        return Call(DISTRIBUTED_PREFIX + name, args, kwargs, kind="op", span=n.span)

    def _host_only(self, n: SN, name: str) -> None:
        """PyPTO's placement rule: window buffers and the world size belong to HOST orchestration."""
        if not self._host or self._device_depth:
            where = "inside a device-side (InCore / SPMD) scope" if self._host else "in a function that is not HOST"
            self.fail("PTOC-E0131", f"pld.{name}() can be called only in HOST orchestration context, not {where}",
                      n, hint="call it in `@pl.function(level=pl.Level.HOST, role=pl.Role.Orchestrator)`, "
                      "outside any `with pl.at(...)` scope")

    def _window_buffer(self, n: SN) -> None:
        """`buf = pld.alloc_window_buffer(...)`: the buffer takes its name from `buf`, unique in the program."""
        target, self._window_target = self._window_target, None
        if target is None:
            self.fail("PTOC-E0132", "pld.tensor.alloc_window_buffer must appear as the RHS of a simple "
                      "assignment (the buffer is named after the variable)", n,
                      hint="write `buf = pld.alloc_window_buffer(size)`")
        if any(k is not None and k.k == "name" and k.a[0] == "name" for k, _ in n.a[1]):
            self.fail("PTOC-E0132", f"pld.tensor.alloc_window_buffer's name cannot be passed explicitly: it is the "
                      f"assigned variable's ({target!r})", n, hint="drop name=")
        first = self._window_names.get(target)
        if first is not None:
            self.fail("PTOC-E0132", f"window buffer {target!r} is already declared in this program (line "
                      f"{first.line})", n, hint="give each window buffer a name of its own across all functions")
        self._window_names[target] = n.span

    def submit(self, n: SN, op: str) -> Expr:
        """`pl.submit(self.kernel, *args, deps=[...], ...)`: a task launch of a program function, a Call of
        kind "submit" (or "spmd_submit") naming the kernel; its value is the kernel's result(s) followed by
        the producer's task id (pl.Scalar[pl.TASK_ID])."""
        items = n.a[1]
        first = self._unparen(items[0][1]) if items and items[0][0] is None else None
        if first is None or first.k != "attr" or first.a[0].k != "name" or first.a[0].a[0] != "self":
            self.fail("PTOC-E0130", f"pl.{op}(...) takes the kernel, `self.<function>`, as its first argument",
                      n, hint=f"write `out, tid = pl.{op}(self.kernel, x, y)`, not pl.{op}(self.kernel(x, y))")
        args, kwargs = self._args(SN(n.k, (n.a[0], items[1:]), n.span))
        return Call(first.a[1], args, kwargs, kind=op, span=n.span)

    def _is_scalar(self, e: Expr) -> bool:
        if isinstance(e, Var):
            return e.name in self.scalar_names
        return isinstance(e, (ConstInt, ConstFloat, ConstBool, BinOp, UnaryOp, MinMax, Abs, Cast))

    def const(self, n: SN) -> Expr:
        args, kwargs = self._args(n)
        if kwargs or len(args) != 2 or not isinstance(args[1], DTypeLit):
            self.fail("PTOC-E0113", "pl.const takes a value and a dtype", n, hint="write `pl.const(0, pl.INT64)`")
        v, dt = args[0], args[1].dtype
        if isinstance(v, ConstInt):
            if dt.is_float:
                return ConstFloat(float(v.value), dt, span=n.span)
            if dt.kind == "bool":
                return ConstBool(bool(v.value), span=n.span)
            return ConstInt(v.value, dt, span=n.span)
        if isinstance(v, ConstFloat):
            if not dt.is_float:
                self.fail("PTOC-E0105", f"pl.const of a float needs a float dtype, not pl.{dt.name}", n)
            return ConstFloat(v.value, dt, span=n.span)
        if isinstance(v, ConstBool):
            return ConstBool(v.value, span=n.span)
        self.fail("PTOC-E0113", "pl.const takes a literal number", n)

    # ------------------------------------------------------------------ statements
    def block(self, nodes, top: bool = False) -> tuple[Stmt, ...]:
        out: list[Stmt] = []
        for s in nodes:
            try:
                st = self.stmt(s)
                if isinstance(st, tuple):
                    out.extend(st)
                elif st is not None:
                    out.append(st)
            except _Fail as f:
                self.report(f)
            except RecursionError:
                self.sink.error("PTOC-E0114", "statement nested too deeply", s.span)
        return tuple(out)

    def stmt(self, n: SN) -> Stmt | tuple[Stmt, ...] | None:
        if self.anchors is not None:  # (only the formatter collects them: the span is not made otherwise)
            self._anchor(n.span, ("stmt", n.span.line, n.span.col))
        build = _STMT_FNS.get(n.k)
        if build is not None:
            return build(self, n)
        if n.k in ("def", "class"):
            self.fail("PTOC-E0005", "functions and classes cannot be nested", n,
                      hint="define every function as a method of the @pl.program class")
        if n.k in ("import", "from_import"):
            self.fail("PTOC-E0005", "imports belong at the top of the file", n)
        self.fail("PTOC-E0005", "unexpected statement", n)

    def ann_assign_stmt(self, n: SN) -> Stmt:
        target, ann, value = n.a
        if target.k != "name":
            self.fail("PTOC-E0005", "only a plain name can be annotated and assigned", target)
        v = self._single(value)
        if v is None:
            self.fail("PTOC-E0113", "an annotated assignment takes one value", value)
        t = self.type(ann)
        name = target.a[0]
        if isinstance(t, ScalarType):
            self.scalar_names.add(name)
        yv = self._yield_call(v)
        if yv is not None:
            return YieldStmt((Var(name, span=target.span),), yv, t, span=n.span)
        return _mk_assign(n.span, _mk_var(target.span, name), self.expr(v), t)

    def assign_stmt(self, n: SN) -> Stmt | tuple[Stmt, ...]:
        lhs, rhs = n.a
        if rhs.k != "exprlist":  # pragma: no cover - grammar guarantees
            self.fail("PTOC-E0114", "bad assignment", n)
        v = self._single(rhs)
        items = lhs.a
        if len(items) == 1 and self._unparen(items[0]).k == "getitem" and v is not None:
            return self._subscript_write(self._unparen(items[0]), v, n)
        unpack = self._unpack_call(n, lhs, v)
        if unpack is not None:
            return unpack
        if len(lhs.a) == 1 and lhs.a[0].k == "name" and v is not None:
            call = self._unparen(v)
            dpath = self._pld_path(call.a[0]) if call.k == "call" and call.a[0].k == "attr" else None
            if dpath in (["alloc_window_buffer"], ["tensor", "alloc_window_buffer"]):
                self._window_target = lhs.a[0].a[0]
        if len(items) == 1 and self._unparen(items[0]).k == "tuple":  # `(a,) = pl.yield_(x)`
            items = self._unparen(items[0]).a
        targets = []
        for t in items:
            t = self._unparen(t)
            if t.k != "name":
                self.fail("PTOC-E0005", "only plain names can be assigned", t,
                          hint="IR values are immutable; write a new name with an op call")
            targets.append(_mk_var(t.span, t.a[0]))
        if v is None:
            self.fail("PTOC-E0113", "assign one value per statement", rhs,
                      hint="several names are assigned only by `a, b = pl.yield_(u, v)`")
        yv = self._yield_call(v)
        if yv is not None:
            return YieldStmt(tuple(targets), yv, None, span=n.span)
        if len(targets) != 1:
            self.fail("PTOC-E0005", "tuple unpacking is allowed only from pl.yield_", n,
                      hint="assign the tuple to one name and read its elements with t[0], t[1]")
        value = self.expr(v)
        if self._is_scalar(value):
            self.scalar_names.add(targets[0].name)
        return _mk_assign(n.span, targets[0], value, None)

    def _unpack_call(self, n: SN, lhs: SN, v: SN | None) -> tuple[Stmt, ...] | None:
        """`a, b = call(...)`: the call's tuple goes to a temporary and each name takes its element
        (`tmp = call(...)`, `a = tmp[0]`, `b = tmp[1]`), as PyPTO's parser desugars it. The result target
        of `pl.submit` may itself be a tuple: `(a, b), tid = pl.submit(self.kernel, ...)`."""
        targets = [self._unparen(t) for t in lhs.a]
        if len(targets) == 1 and targets[0].k != "tuple":
            return None
        call = self._unparen(v) if v is not None else None
        if call is None or call.k != "call" or self._yield_call(call) is not None:
            return None
        path = self._pl_path(call.a[0]) if call.a[0].k == "attr" else None
        submit = path in (["submit"], ["spmd_submit"])
        if submit and len(targets) != 2:
            self.fail("PTOC-E0130", f"pl.{path[0]}(...) is unpacked into exactly two names: the kernel's "
                      f"result(s) and the task id; got {len(targets)}", lhs,
                      hint=f"write `out, tid = pl.{path[0]}(self.kernel, ...)`")
        value = self.expr(call)
        tmp = self._fresh("_submit_tmp" if submit else "_tuple_tmp")
        out: list[Stmt] = [AssignStmt(Var(tmp, span=lhs.span), value, None, span=n.span)]
        if submit and targets[0].k == "tuple":  # (a, b), tid: the launch's tuple is flat, (a, b, tid)
            targets = [self._unparen(t) for t in targets[0].a] + targets[1:]
            if any(t.k != "name" for t in targets):
                self.fail("PTOC-E0005", "a tuple-unpacking target is a plain name", lhs,
                          hint=f"write `(a, b), tid = pl.{path[0]}(self.kernel, ...)`")
        if submit:
            self._submits.append((value.op, len(targets) - 1, n.span))
        self.made.add(GetItem)
        for i, t in enumerate(targets):
            item = GetItem(Var(tmp, span=t.span), ConstInt(i, dtypes.INDEX, span=t.span), span=t.span)
            if t.k == "name":
                out.append(AssignStmt(Var(t.a[0], span=t.span), item, None, span=n.span))
            else:
                self.fail("PTOC-E0005", "a tuple-unpacking target is a plain name", t,
                          hint="write `a, b = self.f(...)`; only the result of pl.submit may be `(a, b)`")
        return tuple(out)

    def _fresh(self, base: str) -> str:
        """A temporary's name, numbered by its place among the function's unpackings (never by line, so the
        same program gives the same names however it is laid out)."""
        self._tmp_count += 1
        return base if self._tmp_count == 1 else f"{base}_{self._tmp_count - 1}"

    def expr_stmt(self, n: SN) -> Stmt:
        v = self._single(n.a[0])
        if v is None:
            self.fail("PTOC-E0114", "a statement holds one expression", n)
        yv = self._yield_call(v)
        if yv is not None:
            return YieldStmt((), yv, None, span=n.span)
        if v.k == "str":
            self.fail("PTOC-E0005", "string statements (docstrings) are not IR", n, hint="use a `# comment`")
        if v.k == "call" and self._pl_path(v.a[0]) == ["func_attr"]:
            self.fail("PTOC-E0111", "pl.func_attr(...) may appear only as the first statement of a function", n)
        if v.k == "name" and v.a[0] == "break":  # (CtrlFlowTransform lowers both)
            return BreakStmt(span=n.span)
        if v.k == "name" and v.a[0] == "continue":
            return ContinueStmt(span=n.span)
        if v.k != "call":
            self.fail("PTOC-E0005", "an expression statement must be a call", n,
                      hint="assign the value to a name, or delete the line")
        return EvalStmt(self.expr(v), span=n.span)

    def return_stmt(self, n: SN) -> Stmt:
        vals = n.a[0]
        items = vals.a if vals is not None else ()
        if len(items) == 1 and items[0].k == "tuple" and items[0].a:
            items = items[0].a  # `return (a, b)` returns two values, as `return a, b` does
        return ReturnStmt(tuple(self.expr(x) for x in items), span=n.span)

    def pass_stmt(self, n: SN) -> Stmt:
        return PassStmt(span=n.span)

    def while_stmt(self, n: SN) -> Stmt:
        # as written: ConvertToSSA gives it iter_args for the values its body updates
        cond, body = n.a
        return WhileStmt((), (), self.expr(cond), self.block(body), span=n.span)

    def _yield_call(self, v: SN) -> tuple[Expr, ...] | None:
        v = self._unparen(v)
        if v.k == "call" and self._pl_path(v.a[0]) == ["yield_"]:
            args, kwargs = self._args(v)
            if kwargs:
                self.fail("PTOC-E0113", "pl.yield_ takes positional values only", v)
            return args
        return None

    def _loop_call(self, it: SN) -> tuple[str, tuple, tuple, tuple | None]:
        it = self._unparen(it)
        path = self._pl_path(it.a[0]) if it.k == "call" and it.a[0].k == "attr" else None
        kinds = LOOP_KINDS + ("while_",)
        if not path or len(path) != 1 or path[0] not in kinds:
            shown = ".".join(path) if path else None
            near = _closest(shown, kinds) if shown else None
            self.fail("PTOC-E0005", f"a loop iterates over pl.range, pl.parallel, pl.unroll, pl.pipeline, "
                      f"pl.spmd, pl.split_aiv or pl.while_{'' if shown is None else f', not pl.{shown}'}", it,
                      hint=f"did you mean pl.{near}?" if near else "write `for i in pl.range(n):`")
        args, kwargs = self._args(it)
        init = None
        rest = []
        for kname, val in kwargs:
            if kname == "init_values":
                if not isinstance(val, (TupleExpr, ListExpr)):
                    self.fail("PTOC-E0113", "init_values takes a tuple such as (x,)", it)
                init = val.items
            else:
                rest.append((kname, val))
        return path[0], args, tuple(rest), init

    def for_stmt(self, n: SN) -> Stmt:
        target, it, body = n.a
        kind, args, kwargs, init = self._loop_call(it)
        tkind, tname, tnames, tspan = target
        iter_args = tuple(Var(nm, span=sp) for nm, sp in (tnames or ()))
        if kind == "while_":
            return self._while_loop(n, it, tkind, iter_args, args, kwargs, init, body)
        if kind == "spmd":
            return self._spmd_loop(n, it, target, args, kwargs, init, body)
        if tkind == "iter":
            self.fail("PTOC-E0005", f"a pl.{kind} loop needs a loop variable", n,
                      hint=f"write `for i, (x,) in pl.{kind}(..., init_values=(x0,)):`")
        if not args and kind != "split_aiv":
            self.fail("PTOC-E0113", f"pl.{kind}(...) needs a stop value", it, hint=f"write `pl.{kind}(n)`")
        if len(args) > 3:
            self.fail("PTOC-E0113", f"pl.{kind}(...) takes at most start, stop and step", it)
        if tkind == "name_iter" and init is None:
            self.fail("PTOC-E0104", "the loop binds loop-carried values but has no init_values=(...)", it,
                      hint="add `init_values=(x0,)` with one initial value per carried name")
        if init is not None and tkind == "name":
            if init:
                self.fail("PTOC-E0104", f"init_values gives {len(init)} value(s) but the loop binds no carried "
                          "names", it, hint="write `for i, (acc,) in pl.range(n, init_values=(x0,)):`")
        init = init or ()
        if len(iter_args) != len(init):
            self._arity(iter_args, init, it)
        self.scalar_names.add(tname)
        mode = dict(kwargs).get("mode") if kind == "split_aiv" else None
        if isinstance(mode, EnumLit) and mode.family == "SplitMode":
            self.split_modes.append(mode.member)
            try:
                loop_body = self.block(body)
            finally:
                self.split_modes.pop()
        else:
            loop_body = self.block(body)
        if iter_args:
            loop_body = _yield_out_of_trailing_scope(loop_body)
        return ForStmt(kind, Var(tname, span=tspan), args, loop_body, iter_args, tuple(init), kwargs,
                       span=n.span)

    def _spmd_loop(self, n: SN, it: SN, target, args, kwargs, init, body) -> Stmt:
        """`for b in pl.spmd(n):` launches its body on n blocks, b being the block index. It is the scope form
        `with pl.spmd(n):` around a kernel scope `with pl.at(level=pl.Level.CORE_GROUP):` whose first
        statement binds `b: pl.Scalar[pl.INDEX] = pl.tile.get_block_idx()`; OutlineIncoreScopes and
        OutlineClusterScopes outline the two. What the body assigns stays visible after it (a scope is a
        region of its function), so `out = pl.tile.store(t, [0, b * 256], out)` reaches a later `return out`.
        `name_hint="k"` names the kernel `k` and the launching function `k_spmd`."""
        tkind, tname, _tnames, tspan = target
        hint = "write `for b in pl.spmd(n):`; the loop variable is the block index; what the body assigns " \
               "(`out = pl.tile.store(...)`) is visible after the loop"
        if tkind != "name" or init is not None:
            self.fail("PTOC-E0690", "a pl.spmd loop binds only the block index: it carries no values "
                      "(no init_values=, no `(x,)` target)", it if init is not None else n, hint=hint)
        for k, _v in kwargs:
            if k not in ("core_num", "sync_start", "name_hint"):
                self.fail("PTOC-E0690", f"a pl.spmd loop takes the block count, sync_start= and name_hint=, "
                          f"not {k}=", it, hint=hint)
        kw = dict(kwargs)
        if len(args) + ("core_num" in kw) != 1:
            self.fail("PTOC-E0690", "a pl.spmd loop takes one block count", it, hint="write `pl.spmd(8)`")
        if getattr(self, "_func_type", "Opaque") not in ("Opaque", "Orchestration"):
            self.fail("PTOC-E0691", f"a pl.spmd loop launches a kernel on several blocks; it cannot run inside "
                      f"an {self._func_type} function", n,
                      hint="write the loop in an Opaque or Orchestration function (`@pl.function`); its body "
                           "becomes the kernel, or read the block index with pl.tile.get_block_idx()")
        sp = n.span
        spmd_kw: list[tuple[str, Expr]] = [(k, v) for k, v in kwargs if k in ("core_num", "sync_start")]
        at_kw: list[tuple[str, Expr]] = [("level", EnumLit("Level", "CORE_GROUP", span=sp))]
        name = kw.get("name_hint")
        if name is not None:
            if not isinstance(name, StrLit):
                self.fail("PTOC-E0690", "name_hint= takes a string", it)
            base = name.value[:-len("_spmd")] if name.value.endswith("_spmd") else name.value
            spmd_kw.append(("name_hint", StrLit(f"{base}_spmd", span=name.span)))
            at_kw.append(("name_hint", StrLit(base, span=name.span)))
        self.scalar_names.add(tname)
        self.made.add("tile.get_block_idx")
        bind = AssignStmt(Var(tname, span=tspan), Call("tile.get_block_idx", span=it.span),
                          ScalarType(dtypes.INDEX), span=tspan)
        self._device_depth += 1
        try:
            inner = self.block(body)
        finally:
            self._device_depth -= 1
        kernel = ScopeStmt("at", (), (bind, *inner), tuple(at_kw), span=sp)
        return ScopeStmt("spmd", tuple(args), (kernel,), tuple(spmd_kw), span=sp)

    def _while_loop(self, n: SN, it: SN, tkind, iter_args, args, kwargs, init, body) -> Stmt:
        """`for (x,) in pl.while_(init_values=(x0,)):` whose first statement is `pl.cond(...)`."""
        if tkind != "iter":
            self.fail("PTOC-E0005", "a pl.while_ loop binds only its loop-carried values", n,
                      hint="write `for (x,) in pl.while_(init_values=(x0,)):`")
        if args:
            self.fail("PTOC-E0113", "pl.while_ takes init_values= only", it)
        if init is None:
            self.fail("PTOC-E0104", "pl.while_ needs init_values=(...) for its loop-carried values", it)
        if len(iter_args) != len(init):
            self._arity(iter_args, init, it)
        stmts = list(body)
        first = self._single(stmts[0].a[0]) if stmts and stmts[0].k == "expr_stmt" else None
        if first is None or first.k != "call" or self._pl_path(first.a[0]) != ["cond"]:
            self.fail("PTOC-E0111", "the first statement of a pl.while_ loop must be pl.cond(condition)",
                      stmts[0] if stmts else n, hint="write `pl.cond(x < 10)` as the loop's first line")
        self._anchor(stmts[0].span, ("cond", n.span.line, n.span.col))
        cargs, ckw = self._args(first)
        if len(cargs) != 1 or ckw:
            self.fail("PTOC-E0113", "pl.cond takes one condition", first)
        return WhileStmt(iter_args, tuple(init), cargs[0], _yield_out_of_trailing_scope(self.block(stmts[1:])),
                         kwargs, span=n.span)

    def _arity(self, iter_args, init, at: SN):
        self.fail("PTOC-E0104", f"{len(iter_args)} loop-carried name(s) but {len(init)} init value(s)", at,
                  hint="give init_values exactly one initial value per name in the `(...)` target")

    def if_stmt(self, n: SN) -> Stmt:
        cond, body, elifs, orelse, else_span = n.a
        last = elifs[-1].span if elifs else n.span  # the if whose else branch the `else:` line opens
        self._anchor(else_span, ("else", last.line, last.col))
        for e in elifs:
            self._anchor(e.span, ("stmt", e.span.line, e.span.col))
        else_body: tuple[Stmt, ...] = self.block(orelse) if orelse is not None else ()
        for i in range(len(elifs), 0, -1):  # the i-th elif of the chain (1-based) names its fresh values
            ec, eb = elifs[i - 1].a
            else_body = self._elif(IfStmt(self.expr(ec), self.block(eb), else_body, span=elifs[i - 1].span), i)
        return IfStmt(self.expr(cond), self.block(body), else_body, span=n.span)

    def _elif(self, inner: IfStmt, index: int = 1) -> tuple[Stmt, ...]:
        """`elif` is an if nested in the else branch. When the branches yield, the nested if yields into
        fresh names and the else branch passes them on, so every branch of the outer if still ends with
        pl.yield_ into the same names (the IR has no elif)."""
        last = inner.then_body[-1] if inner.then_body else None
        if not isinstance(last, YieldStmt) or not last.targets:
            return (inner,)
        names = tuple(t.name for t in last.targets)
        other = inner.else_body[-1] if inner.else_body else None
        other_names = tuple(t.name for t in other.targets) if isinstance(other, YieldStmt) else ()
        if not inner.else_body:
            self.fail("PTOC-E0103", "an if that yields values needs an else branch that yields them too",
                      inner.span, hint=f"add `else:` ending with `{', '.join(names)} = pl.yield_(...)`")
        if other_names != names:
            self.fail("PTOC-E0103", f"the branches yield different names: ({', '.join(names)}) and "
                      f"({', '.join(other_names)})", inner.span,
                      hint="every branch must end with pl.yield_ into the same names")
        # named by the elif's place in its chain, never by its line: raw and formatted text give equal IR
        fresh = tuple(Var(f"{t.name}_elif{index}", span=t.span) for t in last.targets)

        def retarget(body: tuple[Stmt, ...]) -> tuple[Stmt, ...]:
            if body and isinstance(body[-1], YieldStmt) and len(body[-1].targets) == len(fresh):
                y = body[-1]
                return body[:-1] + (YieldStmt(fresh, y.values, y.annotation, span=y.span),)
            return body

        nested = IfStmt(inner.cond, retarget(inner.then_body), retarget(inner.else_body), span=inner.span)
        passthrough = YieldStmt(last.targets, tuple(Var(f.name, span=f.span) for f in fresh), last.annotation,
                                span=last.span)
        return (nested, passthrough)

    def with_stmt(self, n: SN) -> Stmt:
        expr, alias, body = n.a
        e = self._unparen(expr)
        path = self._pl_path(e.a[0]) if e.k == "call" and e.a[0].k == "attr" else None
        if not path:
            self.fail("PTOC-E0005", "a with-statement opens a pl scope such as `with pl.at(...)`", expr)
        args, kwargs = self._args(e)
        var = Var(alias[0], span=alias[1]) if alias else None
        if var is not None:
            self.scalar_names.add(var.name)
        device = path[0] in _DEVICE_SCOPES
        self._device_depth += device
        try:
            inner = self.block(body)
        finally:
            self._device_depth -= device
        kind = ".".join(path)
        if kind in ("scope", "manual_scope"):
            self.runtime_scopes = True
        return ScopeStmt(kind, args, inner, kwargs, var, span=n.span)


# the builders of `_EXPR_BUILDERS` and `_STMT_BUILDERS` as the class's functions: `expr` and `stmt` call them
# with the builder, without looking the method up and binding it for each node
_EXPR_FNS = {k: getattr(Builder, m) for k, m in _EXPR_BUILDERS.items()}
_STMT_FNS = {k: getattr(Builder, m) for k, m in _STMT_BUILDERS.items()}


def _pipe_buffers_positional(args: tuple, kwargs: tuple, sp) -> tuple[tuple, tuple]:
    """A pipe set-up's (c2v_consumer_buf, v2c_consumer_buf) as its two positional arguments, each 0 (an INT32
    constant) when left out; a call that gives more than two, or a buffer twice, is left for the op's
    signature check to reject."""
    given = [k for k, _ in kwargs if k in _PIPE_BUFS]
    if len(args) > 2 or any(_PIPE_BUFS.index(k) < len(args) for k in given):
        return args, kwargs
    by_kw = dict(kw for kw in kwargs if kw[0] in _PIPE_BUFS)
    bufs = [*args, *(by_kw.get(k) for k in _PIPE_BUFS[len(args):])]
    bufs = [ConstInt(0, dtypes.INT32, span=sp) if b is None
            else ConstInt(b.value, dtypes.INT32, span=b.span) if isinstance(b, ConstInt) and b.dtype == dtypes.INDEX
            else b for b in bufs]
    return tuple(bufs), tuple(kw for kw in kwargs if kw[0] not in _PIPE_BUFS)


_PLAIN_TYPE_KINDS = frozenset({"getitem", "attr", "name", "list", "tuple", "int", "float", "bin", "unary", "paren"})


def _plain_type_syntax(n) -> bool:
    """Whether the syntax tree `n` holds only names, numbers, operators, lists and subscripts."""
    stack = [n]
    while stack:
        x = stack.pop()
        if type(x) is tuple:
            stack.extend(x)
        elif isinstance(x, SN):
            if x.k not in _PLAIN_TYPE_KINDS:
                return False
            stack.extend(x.a)
    return True


# How `_copy_moved` copies a value built from a one-line annotation to another place where the same text
# is written: ("keep", v) for a value that is not a node and holds no span of the annotation (dtypes,
# names, numbers, unknown spans), ("span", span) for a span on the annotation's line, ("tuple", plans),
# and ("node", class, ((field, plan), ...)) for a node. Planned once per distinct annotation, applied to
# each copy.
def _copy_plan(x, old: Span) -> tuple:
    if type(x) is Span:
        if x.line == old.line and x.end_line == old.line and x.file == old.file:
            return ("span", x)
        return ("keep", x)
    if type(x) is tuple:
        plans = tuple(_copy_plan(v, old) for v in x)
        if all(p[0] == "keep" for p in plans):
            return ("keep", x)
        return ("tuple", plans)
    if not isinstance(x, Node):
        return ("keep", x)
    # the fields through getattr, not __dict__ (reading __dict__ would slow every later attribute read)
    return ("node", type(x), tuple((f.name, _copy_plan(getattr(x, f.name), old)) for f in fields(x)))


def _copy_moved(plan: tuple, old: Span, new: Span, dc: int):
    """The value `plan` (see `_copy_plan`) describes, built for the text at `new` instead of `old`: a fresh
    copy of each node, each span on `old`'s line moved by `dc` columns to `new`'s place (the line too)."""
    kind = plan[0]
    if kind == "node":
        # fields set one by one in order, as the dataclass's __init__ sets them (a node whose __dict__ was
        # filled at once reads its attributes ~2x slower in CPython 3.11, and the passes read types a lot)
        c = _new(plan[1])
        for k, p in plan[2]:
            pk = p[0]
            if pk == "keep":
                _setattr(c, k, p[1])
            elif pk == "span":  # (the "span" case below, inline: the most common change)
                x = p[1]
                _setattr(c, k, new if x is old else _span(new.file, new.line, x.col + dc, new.line, x.end_col + dc))
            else:
                _setattr(c, k, _copy_moved(p, old, new, dc))
        return c
    if kind == "span":
        x = plan[1]
        if x is old:
            return new
        return _span(new.file, new.line, x.col + dc, new.line, x.end_col + dc)
    if kind == "tuple":
        return tuple([_copy_moved(p, old, new, dc) for p in plan[1]])
    return plan[1]  # "keep"


_setattr = object.__setattr__
_new = object.__new__


def _copier(plan: tuple, old: Span):
    """`_copy_moved` for one plan as a function of its own: `copy(new, dc)` is `_copy_moved(plan, old, new,
    dc)`, the plan's walk written out once as straight-line code (a program copies each of its few
    annotations thousands of times; the walk cost more than the copies it makes). The same nodes, fields
    set in the same order; tests/test_frontend_type_reuse.py compares the two."""
    consts: dict[str, object] = {"_new": _new, "_sa": _setattr, "_span": _span}
    lines: list[str] = []

    def const(v) -> str:
        name = f"k{len(consts)}"
        consts[name] = v
        return name

    def emit(p: tuple) -> str:
        kind = p[0]
        if kind == "keep":
            return const(p[1])
        if kind == "span":
            x = p[1]
            return "new" if x is old else f"_span(f, ln, {x.col} + dc, ln, {x.end_col} + dc)"
        if kind == "tuple":
            items = [emit(q) for q in p[1]]
            return "(" + "".join(f"{i}, " for i in items) + ")"
        values = [(k, emit(q)) for k, q in p[2]]  # (the children's lines come first)
        var = f"n{len(lines)}"
        lines.append(f"{var} = _new({const(p[1])})")
        lines.extend(f"_sa({var}, {k!r}, {v})" for k, v in values)
        return var

    result = emit(plan)
    src = "def copy(new, dc):\n    f = new.file\n    ln = new.line\n" + "".join(
        f"    {line}\n" for line in lines) + f"    return {result}\n"
    exec(src, consts)  # noqa: S102  (code built above from the plan: names, field names and numbers only)
    return consts["copy"]


def _yield_out_of_trailing_scope(body: tuple[Stmt, ...]) -> tuple[Stmt, ...]:
    """A loop body whose last statement is a `with` scope ending in the loop's `pl.yield_`, with that yield
    moved after the scope. PyPTO sees the carried values through the scope (names a scope defines stay
    visible after it), so both spellings mean the same loop; ptoc keeps one: the yield ends the body."""
    if not body or not isinstance(body[-1], ScopeStmt):
        return body
    scope = body[-1]
    inner = _yield_out_of_trailing_scope(scope.body)
    if not inner or not isinstance(inner[-1], YieldStmt):
        return body
    rest = inner[:-1]
    kept = (replace(scope, body=rest),) if rest else ()
    return body[:-1] + kept + (inner[-1],)


def parse_program(text: str, file: str = "<input>", verify: bool = True, ctx=None,
                  check_ops: bool = True, ssa: bool = False, warnings: list | None = None,
                  cache=None, made: set | None = None) -> Program:
    """Parse IR text. Raises `CompileError` with every diagnostic found. The program as written may
    assign a name more than once (ConvertToSSA renames); `ssa` True checks single assignment too.
    `warnings`: a list that receives the warnings (and notes) of a program that has no errors.
    `cache`: a `VerifyCache` for `ctx` that keeps what the check learned (the compile's pipeline reuses it).
    `made`: a set that receives the op name of every op call built and the class `GetItem` when an element
    read was built (`Builder.made`; `ptoc.frontend.short_names.full_op_names` takes it)."""
    with gc_paused():  # the front end builds large acyclic structures (see syntax.gc_paused)
        return _parse_program(text, file, verify, ctx, check_ops, ssa, warnings, cache, made)


def parse_for_format(text: str, file: str = "<input>", ctx=None):
    """Parse IR text for the formatter: (program, its comments, the checker's diagnostics).

    Raises `CompileError` when the text does not parse or does not build into IR (syntax errors, or
    constructs that have no IR form): there is nothing to print then. Errors of the checks that run on
    the built IR (names, single assignment, types, operator rules) are returned, not raised: such a
    program still has a canonical form.
    """
    from ptoc.frontend.syntax import scan_comments
    from ptoc.ir.printer import SourceComments

    with gc_paused():
        nodes, diags = parse_syntax(text, file)
        if nodes is None:
            raise CompileError(diags)
        sink = DiagnosticSink()
        b = Builder(file, sink)
        b.anchors = []
        prog = _build(b, nodes, file)
        sink.raise_if_errors()
        assert prog is not None
        from ptoc.ir.verifier import verify_program

        from ptoc.frontend.scopes import check_scopes

        checks = list(verify_program(prog, ctx=ctx, ssa=False))  # as written: names may be reassigned
        if b.runtime_scopes:
            checks += check_scopes(prog)
    return prog, SourceComments(scan_comments(text), b.anchors), checks


def _build(b: Builder, nodes, file: str) -> Program | None:
    try:
        return b.module(nodes)
    except RecursionError:
        b.sink.error("PTOC-E0114", "the program is nested too deeply", Span(file, 1, 1, 1, 2))
        return None


def _parse_program(text: str, file: str, verify: bool, ctx, check_ops: bool, ssa: bool = False,
                   warnings: list | None = None, cache=None, made: set | None = None) -> Program:
    nodes, diags = parse_syntax(text, file)
    if nodes is None:
        raise CompileError(diags)
    sink = DiagnosticSink()
    b = Builder(file, sink)
    prog = _build(b, nodes, file)
    if made is not None:
        made |= b.made
    if prog is not None and verify and not sink.has_errors:
        from ptoc.ir.verifier import verify_program

        from ptoc.frontend.scopes import check_scopes

        for d in verify_program(prog, ctx=ctx, check_ops=check_ops, ssa=ssa, cache=cache):
            sink.add(d)
        if b.runtime_scopes:
            for d in check_scopes(prog):
                sink.add(d)
    sink.raise_if_errors()
    assert prog is not None
    if warnings is not None:
        warnings.extend(sorted_diagnostics(sink.diagnostics))
    return prog
