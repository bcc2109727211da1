"""InferTileMemorySpace: give every kernel tile a memory space and move cube operands where they belong.

Purpose
-------
On-chip tiles live in one of several buffers: Vec (UB, vector core), Mat (L1), Left / Right (L0A /
L0B, the matmul operand buffers), Acc (L0C, the accumulator) and Bias. Input IR often leaves the
space open: a `tile.load` or `tile.create` without `target_memory=`, an annotation `pl.Tile[[M, N],
dtype]` without `pl.Mem.X`. This pass decides every space in kernel functions (InCore, AIC, AIV) and
inserts the `tile.move`s the cube unit needs, so that after it every tile type names its space
(property `memory_spaces`).

Before::

    a: pl.Tile[[64, 64], pl.BF16] = pl.tile.load(x, [0, 0], [64, 64])
    b: pl.Tile[[64, 64], pl.BF16, pl.Mem.Mat] = pl.tile.load(w, [0, 0], [64, 64], target_memory=pl.Mem.Mat)
    c: pl.Tile[[64, 64], pl.FP32] = pl.tile.matmul(a, b)

After::

    a: pl.Tile[[64, 64], pl.BF16, pl.Mem.Mat] = pl.tile.load(x, [0, 0], [64, 64], target_memory=pl.Mem.Mat)
    b: pl.Tile[[64, 64], pl.BF16, pl.Mem.Mat] = pl.tile.load(w, [0, 0], [64, 64], target_memory=pl.Mem.Mat)
    a_left: pl.Tile[[64, 64], pl.BF16, pl.Mem.Left] = pl.tile.move(a, target_memory=pl.Mem.Left)
    b_right: pl.Tile[[64, 64], pl.BF16, pl.Mem.Right] = pl.tile.move(b, target_memory=pl.Mem.Right)
    c: pl.Tile[[64, 64], pl.FP32, pl.Mem.Acc] = pl.tile.matmul(a_left, b_right)

Rules
-----
1. Demands. Consumers ask for a space per operand: tile.matmul / matmul_acc / matmul_bias read lhs
   from Left, rhs from Right, acc from Acc, bias from Bias; ops of the vector unit read Vec. A demand
   flows backward through loop carries (iter_arg -> init value, loop result -> iter_arg and yielded
   value) and if results (-> the yielded values). A cube demand outranks the Vec default.
2. Producers without `target_memory=`: `tile.load` stops at a space a load can fill: Mat when a cube
   operand (Left, Right, Bias, LeftScale, RightScale) or Mat is demanded, else Vec; a load demanded
   in Acc is a user error (PTOC-E0326: only the cube unit writes L0C). `tile.create` is born in the
   demanded space itself (Acc for an accumulator), Vec when nothing demands one. The decided space
   is written into the call as `target_memory=pl.Mem.X`. Explicit spaces are never overridden.
   Every other producer's space follows from its type rule (matmul results Acc, elementwise results
   their operand's space, tile.move its target).
3. Moves. Where a cube operand slot receives a tile of another space (a Mat or Vec tile as lhs/rhs),
   `t_left = pl.tile.move(t, target_memory=pl.Mem.Left)` (`t_right`, `t_bias`, ...) is inserted right
   before the consumer, which then reads the moved tile; one move per tile and space in a block and
   the blocks nested in it. A move TMOV cannot make on the target is a user error (PTOC-E0325, rule
   MOV-6) that says how to stage the operand instead -- except, in an InCore kernel, a move across the
   cube / vector boundary (Vec -> Mat / Left / Right, Acc -> Vec: `ptoc.target.arch.CROSS_CORE_MOVES`),
   which is the hand-off ExpandMixedKernel turns into a push and a pop, as in PyPTO. In an AIC or AIV
   kernel there is no other core: E0325 for an inserted move, PTOC-E0750 for one written in the input.
   Likewise an Acc tile (a matmul result) read by a vector-unit op gets
   `t_vec = pl.tile.move(t, target_memory=pl.Mem.Vec, blayout=pl.TileLayout.row_major,
   slayout=pl.TileLayout.none_box)`: the cube -> vector path delivers ND rows whatever the fractal
   form in Acc. The consumer's result then lives in Vec. (View-like ops that keep their operand's space,
   tile.assemble and tile.transpose, ask for no move.) tile.store reads Vec and Acc tiles as they are.
4. Types. Every annotation of a tile whose space changed or was missing is updated to the value's
   type (space and implicit view), so statements depending on a changed tile check again.
5. Hardware rules. With the spaces decided, the program is checked again with the operator rules
   that depend on them (`ptoc.context.HARDWARE_RULES`): cube operands in Left/Right/Acc/Bias, every
   tile.move a TMOV path of the target (MOV-1..MOV-6), boxed tiles whole fractals (NZ-1). They are
   reported here, not by the front end, because before this pass a Mat matmul operand is simply the
   operand to move and a move is judged by the target's paths only once the spaces are final.

Where ptoc deliberately differs from PyPTO's pass
-------------------------------------------------
- A load with no `target_memory=` that feeds a matmul operand is staged in Mat (then moved to Left /
  Right). PyPTO without a backend keeps it in Vec and moves Vec -> Left, a path TMOV does not have on
  a2a3 or a5; the program would be correct IR but could never run.
- A Mat tile that is stored, or written element-wise (tile.write), is not moved to Vec first: PyPTO moves
  it Mat -> Vec, which no TMOV of either target performs, while TSTORE reads Mat tiles directly. A Left
  / Right / Bias tile that is stored is reported by tile.store's hardware rule (PTOC-E0365): TSTORE reads
  only Vec, Mat and Acc, and no TMOV brings those buffers back.
- A vector op reading a Mat tile gets no Mat -> Vec move for the same reason (the mixed-kernel split is
  where such data crosses from the cube to the vector core, through GM).

Not done (yet): hoisting a move of a loop-invariant operand out of its loop; tile-typed kernel parameters.
"""

from __future__ import annotations

from dataclasses import replace

from ptoc.ir.visitor import rebuild_bodies
from ptoc.ir.names import fresh_name
from ptoc.context import CompileContext
from ptoc.diagnostics import CompileError, Diagnostic
from ptoc.ir import dtypes
from ptoc.ir.nodes import (
    AssignStmt,
    Call,
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
    NoneLit,
    Program,
    ScalarType,
    ScopeStmt,
    Stmt,
    StrLit,
    TensorType,
    TileType,
    TupleExpr,
    TupleType,
    Type,
    Var,
    WhileStmt,
    YieldStmt,
    loop_results,
)
from ptoc.ir.types import is_empty_tile
from ptoc.ir.verifier import NodeIndex, function_types, iter_nodes, verify_program
from ptoc.passes.manager import Pass
from ptoc.ir.nodes import KERNEL_TYPES
from ptoc.passes.common import resolve_by_names


# Operand slots whose memory space the cube unit fixes (pto-isa TMATMUL: Left x Right -> Acc (+ Bias)).
CUBE_SLOTS: dict[str, dict[str, str]] = {
    "tile.matmul": {"lhs": "Left", "rhs": "Right"},
    "tile.matmul_acc": {"acc": "Acc", "lhs": "Left", "rhs": "Right"},
    "tile.matmul_bias": {"lhs": "Left", "rhs": "Right", "bias": "Bias"},
}
# Spaces a load stages a cube operand through: L1 is the only buffer TLOAD fills that TMOV empties into L0A/L0B.
STAGED_IN_MAT = ("Mat", "Left", "Right", "Bias", "LeftScale", "RightScale")
RETARGETABLE = ("tile.load", "tile.create")
# Vector-unit ops whose result takes its operand's space (no Vec demand of their own).
SPACE_INHERITING = ("tile.assemble", "tile.transpose")


class InferTileMemorySpace(Pass):
    name = "InferTileMemorySpace"
    stage = "layout"
    summary = "give every kernel tile a memory space; move matmul operands into Left/Right"
    requires = frozenset({"tile_ops"})
    produces = frozenset({"memory_spaces"})

    def adopt(self, program: Program, ctx) -> Program:
        """Every space is decided already (the pass is skipped): only rule 5, the hardware rules."""
        if any(f.func_type in KERNEL_TYPES for f in program.functions):
            _check_hardware_rules(program, ctx, self)
        return program

    def run(self, program: Program, ctx) -> Program:
        if not any(f.func_type in KERNEL_TYPES for f in program.functions):
            return program
        bare: dict[int, tuple[Function, Function]] = {}  # id(f) -> (f, f without tile annotations)
        types0 = _value_types(program, ctx, self.cache, bare)
        # 1-2: demands and producer spaces
        p1 = _replace_functions(program, {
            f.name: _retarget_producers(f, types0[f.name], ctx) for f in program.functions
            if f.func_type in KERNEL_TYPES})
        # 3: moves into cube operand slots
        types1 = _value_types(p1, ctx, self.cache, bare) if p1 is not program else types0
        p2 = _replace_functions(p1, {
            f.name: _Mover(f, dict(types1[f.name]), ctx).run() for f in p1.functions
            if f.func_type in KERNEL_TYPES})
        # 4: annotations
        types2 = _value_types(p2, ctx, self.cache, bare) if p2 is not p1 else types1
        p3 = _replace_functions(p2, {
            f.name: _fix_annotations(f, types2[f.name]) for f in p2.functions if f.func_type in KERNEL_TYPES})
        if p3 is not program:
            # Input that only failed its operator checks because spaces were open may still hold real
            # user errors (a dtype mismatch, a bad shape); now that the spaces are known, report them.
            diags = [d for d in verify_program(p3, ctx=ctx, cache=self.cache) if d.severity == "error"]
            if diags and any(d.severity == "error" for d in verify_program(program, ctx=ctx, cache=self.cache)):
                raise CompileError(diags)
        _check_hardware_rules(p3, ctx, self)
        return p3


def _hardware(ctx) -> CompileContext:
    """`ctx` with the hardware rules of memory spaces on (ptoc.context.HARDWARE_RULES)."""
    return (ctx if ctx is not None else CompileContext()).with_hardware_rules()


def _check_hardware_rules(program: Program, ctx, p: Pass | None = None) -> None:
    """5: with every space decided, the operator rules that depend on it hold: cube operands in their
    buffers, each tile.move a TMOV path of the target (MOV-1..MOV-6), boxed tiles whole fractals (NZ-1).
    The front end accepts what only the chosen spaces make wrong (a Mat matmul operand is moved here; a
    Mat -> Vec move is wrong only on a target without that path), so this is where those are reported.
    A move between the cube and vector cores that no TMOV makes (`CROSS_CORE_MOVES`) is a hand-off only
    in a mixed InCore kernel, which ExpandMixedKernel splits; in an AIC or AIV kernel it is PTOC-E0750.
    `p`: the pass, whose pipeline cache serves the node indexes and value types."""
    diags = [] if _hardware_clean(program, ctx, p) else \
        [d for d in verify_program(program, ctx=_hardware(ctx)) if d.severity == "error"]
    if not diags:
        diags = _one_core_hand_offs(program, ctx, p)
    if diags:
        raise CompileError(diags)


# Argument expressions the verifier gives no type (after checking their parts): a call's argument of one
# of these classes has type None; see `_hardware_clean`.
_UNTYPED_ARGS = (ListExpr, TupleExpr, DictExpr, StrLit, EnumLit, DTypeLit, NoneLit)
_FUNCTION_CALLS = ("func", "submit", "spmd_submit")  # calls the verifier checks without the operator rules
_UNKNOWN = object()
_INDEX = ScalarType(dtypes.INDEX)
_BOOL = ScalarType(dtypes.BOOL)


def _arg_type(e: Expr, env: dict, dyn: set[str]):
    """The type the verifier gives the argument `e` of an operator call, or `_UNKNOWN` when `e` is not a
    name, a constant or a literal (`_hardware_clean` then cannot tell)."""
    cls = e.__class__
    if cls is Var:
        t = env.get(e.name, _UNKNOWN)  # type: ignore[attr-defined]
        if t is _UNKNOWN and e.name in dyn:  # type: ignore[attr-defined]
            return _INDEX
        return t
    if cls is ConstInt or cls is ConstFloat:
        return ScalarType(e.dtype)  # type: ignore[attr-defined]
    if cls is ConstBool:
        return _BOOL
    return None if isinstance(e, _UNTYPED_ARGS) else _UNKNOWN


def _hardware_clean(program: Program, ctx, p: Pass | None) -> bool:
    """True when checking `program` with the hardware rules on would find nothing wrong, found without that
    whole second check; False when it cannot tell (then the caller runs the check).

    The hardware rules are operator rules only (`Args.hardware`), and they only add errors: a call that
    passes them has the type it has without them. So when the program verifies clean without them (the
    pipeline's cache knows), the check with them goes the same way unless an operator call fails them;
    and every operator call is typed with the argument types it had in the check without them. This asks
    the operator rules again, with the hardware rules on, for each call, when every operator call is the
    value of a statement and its arguments are names, constants or literals (the form the pipeline keeps
    after FlattenCallExpr); anything else, or any diagnostic, and it cannot tell."""
    cache = p.cache if p is not None else None
    if cache is None or cache.op_typer is None:
        return False
    if any(d.severity == "error" for d in verify_program(program, ctx=ctx, cache=cache)):
        return False
    types = function_types(program, ctx, cache)
    hw = _hardware(ctx)
    typer = cache.op_typer
    dyn = {d.name for d in program.dynamic_dims}
    # (the typer is a pure function of the call and its argument types, and only "no diagnostic" matters
    # here, whose spans do not: a call equal in value to one found clean, with equal argument types, is
    # clean too; node equality leaves spans out. Most kernels repeat a few call shapes many times.)
    clean: set[tuple] = set()
    for f in program.functions:
        env = types.get(f.name, {})
        index = NodeIndex.get(f, cache)
        for g in index.of(GetItem):  # a tensor's `t[i]` is typed as an operator call
            if not isinstance(g.value, Var) or isinstance(env.get(g.value.name), TensorType):
                return False
        calls = sum(1 for c in index.of(Call) if c.kind not in _FUNCTION_CALLS)
        if not calls:
            continue
        tops = [s.value for s in index.of(AssignStmt) if s.value.__class__ is Call]
        tops += [s.expr for s in index.of(EvalStmt) if s.expr.__class__ is Call]
        tops = [c for c in tops if c.kind not in _FUNCTION_CALLS]
        if len(tops) != calls:
            return False  # an operator call inside an expression or a type: not this simple form
        for c in tops:
            arg_types = [_arg_type(a, env, dyn) for a in c.args]
            kwarg_types = {k: _arg_type(v, env, dyn) for k, v in c.kwargs}
            if any(t is _UNKNOWN for t in arg_types) or any(t is _UNKNOWN for t in kwarg_types.values()):
                return False
            key = (c, *arg_types, *kwarg_types.values())  # (the keywords' names are the call's own)
            if key in clean:
                continue
            _, diags = typer(c, arg_types, kwarg_types, hw)
            if diags:
                return False
            clean.add(key)
    return True


SPLIT_TYPES = ("AIC", "AIV")  # kernels of one core: no other core to hand a tile over to


def _crosses_cores(ctx, src: str | None, dst: str) -> bool:
    from ptoc.target.arch import get_arch

    return src is not None and get_arch(getattr(ctx, "arch", None) or "a2a3").tmov.cross_core_only(src, dst)


def _one_core_why(ctx, func_type: str, src: str | None, dst: str) -> str:
    from ptoc.target.arch import get_arch

    title = get_arch(getattr(ctx, "arch", None) or "a2a3").title
    return (f"TMOV has no {src} -> {dst} path on {title}, and an {func_type} kernel runs on one core: only a mixed "
            "InCore kernel hands a tile over between the cube and vector cores")


def _one_core_hand_offs(program: Program, ctx, p: Pass | None = None) -> list[Diagnostic]:
    """PTOC-E0750: a tile.move in an AIC / AIV kernel that only a cross-core hand-off could make."""
    cache = p.cache if p is not None else None
    indexes = {f.name: NodeIndex.get(f, cache) for f in program.functions if f.func_type in SPLIT_TYPES}
    funcs = [f for f in program.functions if f.func_type in SPLIT_TYPES
             and any(n.op in ("tile.move", "move") for n in indexes[f.name].of(Call))]
    if not funcs:
        return []
    types = function_types(program, ctx, cache)
    out: list[Diagnostic] = []
    for f in funcs:
        env = types.get(f.name, {})
        for n in indexes[f.name].of(Call):
            if not (n.op in ("tile.move", "move") and n.args and isinstance(n.args[0], Var)):
                continue
            t, dst = env.get(n.args[0].name), n.kwarg("target_memory")
            if isinstance(t, TileType) and isinstance(dst, EnumLit) and _crosses_cores(ctx, t.memory, dst.member):
                out.append(Diagnostic(
                    "PTOC-E0750", f"tile.move: {_one_core_why(ctx, f.func_type, t.memory, dst.member)}", n.span,
                    hint="write the kernel as one InCore function (ExpandMixedKernel splits it and passes the tile "
                    "through the cross-core pipe), or push and pop the tile yourself (tile.tpush_to_aic / "
                    "tile.tpop_from_aiv)", rule="MOV-6"))
    return out


def _value_types(program: Program, ctx, cache=None,
                 bare_of: dict[int, tuple[Function, Function]] | None = None) -> dict[str, dict[str, Type | None]]:
    """Every value's own type per function. The verifier's environment takes an agreeing annotation
    over the value's type (`pl.Tile[[64, 64], pl.BF16]` agrees with a Mat tile), so tile annotations
    are set aside first; a value whose type no rule gives keeps its annotation's. `cache`: the pipeline's
    verifier cache; `bare_of`: the annotation-free form of each function seen so far (kept across the
    calls of one run, so an unchanged function keeps the same bare object and its cached types)."""
    annotated = function_types(program, ctx, cache)
    bare_of = {} if bare_of is None else bare_of

    def bare_fn(f: Function) -> Function:
        known = bare_of.get(id(f))
        if known is not None and known[0] is f:
            return known[1]
        # (a function whose annotations give no value another type than its own keeps them: its bare
        # form would type the same, at the cost of a second inference; see `_annotations_neutral`)
        b = f if _annotations_neutral(f, program, ctx, cache, annotated[f.name]) else _map_stmts(f, strip)
        bare_of[id(f)] = (f, b)
        return b

    def strip(s: Stmt) -> Stmt:
        # (`replace(s, annotation=None)`, built directly: nearly every statement of a kernel binds a tile)
        cls = s.__class__
        if cls is AssignStmt and _has_tile(s.annotation):  # type: ignore[union-attr]
            return AssignStmt(s.target, s.value, None, span=s.span)  # type: ignore[union-attr]
        if cls is YieldStmt and _has_tile(s.annotation):  # type: ignore[union-attr]
            return YieldStmt(s.targets, s.values, None, span=s.span)  # type: ignore[union-attr]
        return s

    bare = _replace_functions(program, {f.name: bare_fn(f) for f in program.functions
                                        if f.func_type in KERNEL_TYPES})
    if bare is program:
        return annotated
    inferred = function_types(bare, ctx, cache)
    return {fn: {n: (t if t is not None else annotated[fn].get(n)) for n, t in env.items()}
            for fn, env in inferred.items()}


def _annotations_neutral(f: Function, program: Program, ctx, cache, env: dict) -> bool:
    """True when typing `f` with its tile annotations set aside (`_value_types`) would give every value
    the type `env` (its types as written) already gives it; False when that is not shown.

    The verifier types a statement from the types of the names it reads; an annotation changes only the
    type its own statement gives its target (`annotate`; `_created_where_annotated` for tile.full). So
    by induction over the statements in order, the two typings agree when, for every annotated statement,
    the type the value has without the annotation, computed from `env`, is the one `env` holds for its
    target. That is checked here for a function that verified clean (single assignment, every name read
    in scope, so `env` is the type at every use) whose tile annotations stand on operator calls with
    names, constants and literals as arguments, and on single-value yields. The operator typer is asked
    through the pipeline cache (`VerifyCache.op_type`), with the very type objects the verifier read, so
    most answers are the ones the typing of `env` already computed."""
    if cache is None or cache.op_typer is None or not cache.usable(ctx, cache.op_typer):
        return False
    known = cache.lookup(f, program, cache.token(program))
    if known is None or not known[1]:
        return False  # not verified clean here (or not by this cache): take the sure way
    from ptoc.ir.verifier import _annotation_check, _created_where_annotated, _scalar

    memo = cache.memo(f.name)
    dyn = {d.name for d in program.dynamic_dims}
    index = NodeIndex.get(f, cache)

    def arg_type(e: Expr):
        cls = e.__class__
        if cls is Var:
            t = env.get(e.name, _UNKNOWN)  # type: ignore[attr-defined]
            return _scalar(dtypes.INDEX) if t is _UNKNOWN and e.name in dyn else t  # type: ignore[attr-defined]
        if cls is ConstInt or cls is ConstFloat:
            return _scalar(e.dtype)  # type: ignore[attr-defined]
        if cls is ConstBool:
            return _scalar(dtypes.BOOL)
        return None if isinstance(e, _UNTYPED_ARGS) else _UNKNOWN

    for s in index.of(AssignStmt):
        if not _has_tile(s.annotation):
            continue
        c = s.value
        if c.__class__ is not Call or c.kind in _FUNCTION_CALLS:
            return False
        arg_types = [arg_type(a) for a in c.args]
        kwarg_types = {k: arg_type(v) for k, v in c.kwargs}
        if any(t is _UNKNOWN for t in arg_types) or any(t is _UNKNOWN for t in kwarg_types.values()):
            return False
        vt, diags = cache.op_type(c, arg_types, kwarg_types, memo)
        if diags or vt is None or _created_where_annotated(s, vt) is not vt:
            return False
        t = env.get(s.target.name, _UNKNOWN)
        if t is not vt and t != vt:
            return False
    for y in index.of(YieldStmt):
        if not _has_tile(y.annotation) or len(y.values) != 1:
            continue  # (the verifier reads a yield's annotation only when it yields one value)
        if is_empty_tile(y.annotation) or y.values[0].__class__ is not Var:
            return False
        vt = env.get(y.values[0].name)
        if vt is None:
            return False
        filled, why = _annotation_check(y.annotation, vt)
        if why or (filled is not vt and filled != vt):
            return False
    return True


def _has_tile(t: Type | None) -> bool:
    if isinstance(t, TupleType):
        return any(_has_tile(x) for x in t.types)
    return isinstance(t, TileType)


def _replace_functions(program: Program, new: dict[str, Function]) -> Program:
    funcs = tuple(new.get(f.name, f) for f in program.functions)
    if all(a is b for a, b in zip(funcs, program.functions)):
        return program
    return replace(program, functions=funcs)


# --------------------------------------------------------------------------------------------------
# Operand binding
# --------------------------------------------------------------------------------------------------


def _operands(op, call: Call) -> list[tuple[str, int | str, Expr]]:
    """(parameter name, position index or kwarg name, expression) of every argument bound to a parameter."""
    names = op.param_names
    out: list[tuple[str, int | str, Expr]] = []
    for i, a in enumerate(call.args):
        if i < len(names):
            out.append((names[i], i, a))
    for k, v in call.kwargs:
        if k in names:
            out.append((k, k, v))
    return out


def _call_of(s: Stmt) -> Call | None:
    if isinstance(s, AssignStmt) and isinstance(s.value, Call) and s.value.kind == "op":
        return s.value
    if isinstance(s, EvalStmt) and isinstance(s.expr, Call) and s.expr.kind == "op":
        return s.expr
    return None


# --------------------------------------------------------------------------------------------------
# 1-2: demands, then the spaces of tile.load / tile.create without target_memory
# --------------------------------------------------------------------------------------------------


def _retarget_producers(f: Function, types: dict, ctx) -> Function:
    demand: dict[str, str] = {}
    edges: list[tuple[str, str]] = []  # (dst, src): a demand on dst is a demand on src
    resolved: dict[int, tuple] = {}  # id(call) -> (call, its op): asked by `visit` and again by `producer`

    def resolve(call: Call):
        hit = resolved.get(id(call))
        if hit is None or hit[0] is not call:
            hit = resolved[id(call)] = (call, resolve_by_names(call, types))
        return hit[1]

    def ask(name: str, space: str) -> bool:
        old = demand.get(name)
        if old is None or (old == "Vec" and space != "Vec"):
            demand[name] = space
            return True
        return False

    def visit(body: tuple[Stmt, ...]) -> None:
        for s in body:
            call = _call_of(s)
            if call is not None:
                op = resolve(call)
                slots = CUBE_SLOTS.get(op.name, _NO_SLOTS) if op is not None else _NO_SLOTS
                if op is not None and (slots or op.unit == "vector"):  # (else no operand is asked anything)
                    for pname, _, e in _operands(op, call):
                        if not isinstance(e, Var) or not isinstance(types.get(e.name), TileType):
                            continue
                        if pname in slots:
                            ask(e.name, slots[pname])
                        elif op.unit == "vector":
                            ask(e.name, "Vec")
            if isinstance(s, (ForStmt, WhileStmt)):
                results = loop_results(s.body)
                ys = s.body[-1].values if results else ()
                for a, init in zip(s.iter_args, s.init_values):
                    if isinstance(init, Var):
                        edges.append((a.name, init.name))
                for i, r in enumerate(results):
                    if i < len(s.iter_args):
                        edges.append((r.name, s.iter_args[i].name))
                        if i < len(ys) and isinstance(ys[i], Var):
                            edges.append((s.iter_args[i].name, ys[i].name))
                    if i < len(ys) and isinstance(ys[i], Var):
                        edges.append((r.name, ys[i].name))
                visit(s.body)
            elif isinstance(s, IfStmt):
                for branch in (s.then_body, s.else_body):
                    if branch and isinstance(branch[-1], YieldStmt):
                        for r, v in zip(s.results, branch[-1].values):
                            if isinstance(v, Var):
                                edges.append((r.name, v.name))
                visit(s.then_body)
                visit(s.else_body)
            elif isinstance(s, ScopeStmt):
                visit(s.body)

    visit(f.body)
    changed = True
    while changed:  # each name's demand changes at most twice (none -> Vec -> cube space)
        changed = False
        for dst, src in edges:
            if dst in demand and ask(src, demand[dst]):
                changed = True

    def producer(s: Stmt) -> Stmt:
        if not (isinstance(s, AssignStmt) and isinstance(s.value, Call) and s.value.kind == "op"):
            return s
        op = resolve(s.value)
        if op is None or op.name not in RETARGETABLE or s.value.kwarg("target_memory") is not None:
            return s
        want = demand.get(s.target.name)
        if op.name == "tile.load":
            if want == "Acc":
                raise CompileError([Diagnostic(
                    "PTOC-E0326", f"{s.target.name!r} is loaded from GM but used as a matmul accumulator; "
                    "only the cube unit writes Acc (L0C), no load or move fills it", s.span,
                    hint="start the accumulator from a tile.matmul result, or create it with "
                    "pl.tile.create(shape, dtype=..., target_memory=pl.Mem.Acc)")])
            space = "Mat" if want in STAGED_IN_MAT else "Vec"
        else:
            space = want or "Vec"
        call = replace(s.value, kwargs=s.value.kwargs + (("target_memory", EnumLit("Mem", space)),))
        return replace(s, value=call)

    return _map_stmts(f, producer)


_NO_SLOTS: dict[str, str] = {}


def _map_stmts(f: Function, fn) -> Function:
    """Apply `fn` (stmt -> stmt) to every statement, rebuilding only what changes."""

    def block(body: tuple[Stmt, ...]) -> tuple[Stmt, ...]:
        out = tuple(one(s) for s in body)
        return body if all(a is b for a, b in zip(out, body)) else out

    def one(s: Stmt) -> Stmt:
        if isinstance(s, (ForStmt, WhileStmt, ScopeStmt)):
            b = block(s.body)
            s = s if b is s.body else replace(s, body=b)
        elif isinstance(s, IfStmt):
            t, e = block(s.then_body), block(s.else_body)
            if t is not s.then_body or e is not s.else_body:
                s = replace(s, then_body=t, else_body=e)
        return fn(s)

    body = block(f.body)
    return f if body is f.body else replace(f, body=body)


# --------------------------------------------------------------------------------------------------
# 3: moves into cube operand slots
# --------------------------------------------------------------------------------------------------


class _Mover:
    def __init__(self, f: Function, types: dict, ctx):
        self.f = f
        self.types = types
        self.ctx = ctx
        self._names: set[str] | None = None  # every name in f: computed on the first fresh name
        self.scopes: list[dict[tuple[str, str], str]] = []

    def run(self) -> Function:
        body = self.block(self.f.body)
        return self.f if body is self.f.body else replace(self.f, body=body)

    def block(self, body: tuple[Stmt, ...]) -> tuple[Stmt, ...]:
        self.scopes.append({})
        out: list[Stmt] = []
        changed = False
        for s in body:
            new = self.stmt(s)
            if len(new) != 1 or new[0] is not s:
                changed = True
            out.extend(new)
        self.scopes.pop()
        return tuple(out) if changed else body

    def stmt(self, s: Stmt) -> list[Stmt]:
        if isinstance(s, (ForStmt, WhileStmt, ScopeStmt, IfStmt)):
            return [rebuild_bodies(s, self.block)]
        call = _call_of(s)
        if call is None:
            return [s]
        op = resolve_by_names(call, self.types)
        slots = CUBE_SLOTS.get(op.name, {}) if op is not None else {}
        if not slots and op is not None and op.unit == "vector" and op.name not in SPACE_INHERITING:
            slots = {pname: "Vec" for pname, _, e in _operands(op, call) if isinstance(e, Var)
                     and getattr(self.types.get(e.name), "memory", None) == "Acc"}
        if not slots:
            return [s]
        moves: list[Stmt] = []
        substituted = False
        args, kwargs = list(call.args), list(call.kwargs)
        annotate = not isinstance(s, AssignStmt) or s.annotation is not None
        for pname, where, e in _operands(op, call):
            want = slots.get(pname)
            t = self.types.get(e.name) if isinstance(e, Var) else None
            if want is None or not isinstance(t, TileType) or t.memory is None or t.memory == want:
                continue
            moved = self.lookup(e.name, want)
            if moved is None:
                moved, stmt = self.move(e, t, want, op.name, pname, call)
                if not annotate:
                    stmt = replace(stmt, annotation=None)
                moves.append(stmt)
            substituted = True
            if isinstance(where, int):
                args[where] = Var(moved, span=e.span)
            else:
                kwargs = [(k, Var(moved, span=e.span) if k == where else v) for k, v in kwargs]
        if not substituted:
            return [s]
        new_call = replace(call, args=tuple(args), kwargs=tuple(kwargs))
        new_s = replace(s, value=new_call) if isinstance(s, AssignStmt) else replace(s, expr=new_call)
        if isinstance(s, AssignStmt):  # a consumer reading a moved operand may produce another space
            self.retype(s.target.name, new_call)
        return moves + [new_s]

    def retype(self, name: str, call: Call) -> None:
        from ptoc.ops.registry import infer_call_type

        arg_types = [self.types.get(a.name) if isinstance(a, Var) else None for a in call.args]
        kw_types = {k: (self.types.get(v.name) if isinstance(v, Var) else None) for k, v in call.kwargs}
        t, diags = infer_call_type(call, arg_types, kw_types, self.ctx)
        if not diags and isinstance(t, TileType):
            self.types[name] = t

    def lookup(self, name: str, space: str) -> str | None:
        for scope in reversed(self.scopes):
            if (name, space) in scope:
                return scope[(name, space)]
        return None

    def move(self, src: Var, t: TileType, space: str, op_name: str, pname: str, consumer: Call) -> tuple[str, Stmt]:
        from ptoc.ops.registry import infer_call_type

        kwargs: tuple = (("target_memory", EnumLit("Mem", space)),)
        if t.memory == "Acc" and space == "Vec":  # the cube -> vector path delivers ND rows
            kwargs += (("blayout", EnumLit("TileLayout", "row_major")), ("slayout", EnumLit("TileLayout", "none_box")))
        call = Call("tile.move", (Var(src.name, span=src.span),), kwargs, span=consumer.span)
        mt, diags = infer_call_type(call, [t], {k: None for k, _ in kwargs}, _hardware(self.ctx))
        split = self.f.func_type in SPLIT_TYPES and _crosses_cores(self.ctx, t.memory, space)
        if diags or not isinstance(mt, TileType) or split:
            why = diags[0].message if diags else (
                _one_core_why(self.ctx, self.f.func_type, t.memory, space) if split else "tile.move has no result type")
            stage = ("load it with target_memory=pl.Mem.Mat: cube operands are staged in Mat and moved "
                     f"into {space}" if space in ("Left", "Right", "Bias") else
                     "create the accumulator with target_memory=pl.Mem.Acc or start it from a tile.matmul")
            raise CompileError([Diagnostic(
                "PTOC-E0325", f"{op_name} reads {pname} {src.name!r} from {space}, but it lives in {t.memory} and "
                f"cannot be moved there on {getattr(self.ctx, 'arch', 'a2a3')}: {why}", consumer.span,
                hint=stage, rule="MOV-6")])
        name = self.fresh(f"{src.name}_{space.lower()}")
        self.scopes[-1][(src.name, space)] = name
        self.types[name] = mt
        return name, AssignStmt(Var(name, span=src.span), call, mt, span=consumer.span)

    def fresh(self, base: str) -> str:
        if self._names is None:
            self._names = {p.name for p in self.f.params} | {n.name for n in iter_nodes(self.f) if isinstance(n, Var)}
        return fresh_name(base, self._names)


# --------------------------------------------------------------------------------------------------
# 4: annotations follow the values' types
# --------------------------------------------------------------------------------------------------


def _fix_type(ann: Type | None, actual: Type | None) -> Type | None:
    if isinstance(ann, TupleType) and isinstance(actual, TupleType) and len(ann.types) == len(actual.types):
        items = tuple(_fix_type(a, b) for a, b in zip(ann.types, actual.types))
        return ann if all(a is b for a, b in zip(items, ann.types)) else replace(ann, types=items)
    if isinstance(ann, TileType) and isinstance(actual, TileType) and actual.memory is not None \
            and ann.memory != actual.memory:
        return replace(ann, memory=actual.memory, view=actual.view)
    return ann


def _fix_annotations(f: Function, types: dict) -> Function:
    def fix(s: Stmt) -> Stmt:
        if isinstance(s, AssignStmt) and s.annotation is not None:
            ann = _fix_type(s.annotation, types.get(s.target.name))
            return s if ann is s.annotation else replace(s, annotation=ann)
        if isinstance(s, YieldStmt) and s.annotation is not None and len(s.targets) == 1:
            ann = _fix_type(s.annotation, types.get(s.targets[0].name))
            return s if ann is s.annotation else replace(s, annotation=ann)
        return s

    return _map_stmts(f, fix)
