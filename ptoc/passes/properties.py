"""IR properties passes produce, each with the check the pass manager runs after the pass."""

from __future__ import annotations

from ptoc.context import CompileContext
from ptoc.ir.nodes import (AssignStmt, Call, ForStmt, Function, IfStmt, Program, ScopeStmt, TensorType, TileType,
                           TupleType, Var, WhileStmt, YieldStmt)
from ptoc.ir.verifier import NodeIndex
from ptoc.ir.verifier import iter_type_exprs  # noqa: F401  (re-exported for property checks)
from ptoc.passes.common import resolve_by_names
from ptoc.passes.manager import input_check, property_check
from ptoc.ir.nodes import KERNEL_TYPES

TENSOR_QUERIES = ("tensor.dim",)  # shape queries on global tensors: allowed in kernels
GM_ELEMENT_OPS = ("tensor.read", "tensor.write")  # one element of a global tensor: allowed in kernels
NEUTRAL_OPS = ("yield_",)  # carry any value: not tensor computations

# Each check takes (program, ctx, cache). A pass's output is checked with `property_check`s: the written
# types and every value's inferred type (the verifier's, which the pipeline run's cache already holds), so
# a pass that leaves an unannotated value wrong (`pl.add` of two tensors in a kernel) is caught. An input
# read from a file is checked with the `input_check`s of a property as well (stricter conditions a file
# must meet for the pass that produces the property to be skipped).
# Each check takes (program, ctx, cache): `cache` is the pipeline run's VerifyCache (or None), whose
# NodeIndex of a function serves every check and pass that looks at the same function parts.


def kernels(program: Program) -> list[Function]:
    return [f for f in program.functions if f.func_type in KERNEL_TYPES]


def tile_types(f: Function, cache=None) -> list[TileType]:
    return NodeIndex.get(f, cache).of(TileType)


def _flat(t) -> list:
    return [x for y in t.types for x in _flat(y)] if isinstance(t, TupleType) else [t]


def value_types(program: Program, ctx: CompileContext, cache=None) -> dict[str, dict[str, object]]:
    """Kernel name -> (value name -> inferred type): every value, annotated or not. The checks below
    look at these as well as at the written types, so that a property holds on a program read from a
    file (where a value may have no annotation) only when it really holds: the pass manager skips the
    pass that produces a property the input already has."""
    from ptoc.ir.verifier import ProgramTypes

    ks = kernels(program)
    if not ks:
        return {}
    # (the kernels' alone: `function_types` of the whole program would copy every function's too)
    of = ProgramTypes(program, ctx, cache)
    return {f.name: of(f) for f in ks}


def value_tiles(program: Program, ctx: CompileContext, cache=None) -> list[tuple[str, str, TileType]]:
    """(kernel, value, tile type) of every tile-typed value of every kernel (inferred types). Several checks
    of one program ask for them: with the pipeline's `cache`, made once per program (do not change the list)."""
    if cache is not None and cache.ctx is ctx:
        return cache.derived(program, "value_tiles", lambda: _value_tiles(program, ctx, cache))
    return _value_tiles(program, ctx, cache)


def _value_tiles(program: Program, ctx: CompileContext, cache=None) -> list[tuple[str, str, TileType]]:
    return [(k, n, t) for k, vals in value_types(program, ctx, cache).items() for n, ty in vals.items()
            for t in _flat(ty) if isinstance(t, TileType)]


@property_check("ssa")
def _ssa(program: Program, ctx: CompileContext, cache=None) -> list[str]:
    """Every name is assigned once in its function (the two yields of an if bind its results once), and
    no name assigned inside a loop is read after it. The very list `ConvertToSSA.ssa_violations` gives,
    with a cheaper test of the second condition (`escapes`)."""
    from ptoc.passes.ConvertToSSA import ssa_violations

    return ssa_violations(program, escapes)


def escapes(f: Function) -> bool:
    """`ConvertToSSA._has_escapes(f)`: some name assigned inside a loop body (not a result of that loop) is
    read outside that loop. The same walk of the statements, done cheaper: the reads are gathered per loop
    nest (one `_reads` of all the expressions read in it, not one per statement with a pair per name), and
    only after the walk has found which loop owns each name; a nest inside every owning loop (or a
    function whose loops assign nothing) cannot read a name outside its owner, so its expressions are not
    looked at. The verifier's check after every pass asks this of every function: it was a tenth of a
    compile's checks."""
    from ptoc.passes.ConvertToSSA import _reads, _split_yield, _transparent

    owner: dict[str, int] = {}  # name -> id of the innermost loop whose body assigns it
    roots: dict[tuple[int, ...], list] = {}  # the loops around (their ids) -> the expressions read there

    def visit(body: tuple, loops: tuple[int, ...]) -> None:
        here = roots.get(loops)
        if here is None:
            here = roots[loops] = []
        read = here.append
        for s in body:
            cls = s.__class__
            if cls is AssignStmt:
                if loops:
                    owner[s.target.name] = loops[-1]
                read(s.value)
                read(s.annotation)
            elif cls is ForStmt or cls is WhileStmt:
                if cls is ForStmt:
                    read(s.args)
                    read(tuple(v for _, v in s.kwargs))
                read(s.init_values)
                inner = loops if _transparent(s) else loops + (id(s),)
                if loops:
                    for r in s.results:
                        owner[r.name] = loops[-1]
                stmts, y = _split_yield(s.body)
                visit(stmts, inner)
                if cls is WhileStmt:
                    roots[inner].append(s.cond)
                if y is not None:
                    roots[inner].append(y.values)
            elif cls is IfStmt:
                read(s.cond)
                for branch in (s.then_body, s.else_body):
                    stmts, y = _split_yield(branch)
                    visit(stmts, loops)
                    if y is not None:
                        if loops:
                            for t in y.targets:
                                owner[t.name] = loops[-1]
                        read(y.values)
            elif cls is ScopeStmt:
                read(s.args)
                read(tuple(v for _, v in s.kwargs))
                visit(s.body, loops)
            elif cls is YieldStmt:
                read(s.values)
            else:
                read(s)

    visit(f.body, ())
    if not owner:
        return False
    owners = set(owner.values())
    for loops, exprs in roots.items():
        if owners.issubset(loops):
            continue  # every owning loop is around these reads
        if any(n in owner and owner[n] not in loops for n in _reads(*exprs)):
            return True
    return False


@property_check("structured")
def _structured(program: Program, ctx: CompileContext, cache=None) -> list[str]:
    """No break or continue outside Orchestration functions (CtrlFlowTransform lowered them)."""
    from ptoc.ir.nodes import BreakStmt, ContinueStmt
    from ptoc.passes.CtrlFlowTransform import unstructured

    # the functions' node indexes (the other checks and the passes use them too) tell whether any break
    # or continue is left, without a walk of the program; only then the walk that names each
    if not any(index.of(BreakStmt) or index.of(ContinueStmt) for f in program.functions
               if f.func_type != "Orchestration" for index in (NodeIndex.get(f, cache),)):
        return []
    return unstructured(program)


@property_check("outlined")
def _outlined(program: Program, ctx: CompileContext, cache=None) -> list[str]:
    """No `pl.at(level=CORE_GROUP)` scope is left in an orchestration (or Opaque) function: each is a kernel."""
    from ptoc.ir.visitor import walk
    from ptoc.passes.common import is_incore_scope
    from ptoc.passes.OutlineIncoreScopes import OUTER_KINDS, is_inline_spmd_scope

    return [f"{f.name}: a pl.at(level=CORE_GROUP) scope at line {n.span.line}" if is_incore_scope(n) else
            f"{f.name}: a pl.spmd scope doing the per-block work inline at line {n.span.line}"
            for f in program.functions if f.func_type in OUTER_KINDS for s in f.body for n in walk(s)
            if is_incore_scope(n) or is_inline_spmd_scope(n)]


@property_check("tile_ops")
def _tile_ops(program: Program, ctx: CompileContext, cache=None) -> list[str]:
    """Kernels compute on tiles only: no tensor.* operator call survives in them (except the metadata
    queries in TENSOR_QUERIES, which read a global tensor's runtime shape and compute nothing, and the
    element accesses of global tensors in GM_ELEMENT_OPS)."""
    bad = []
    for f in kernels(program):
        for n in NodeIndex.get(f, cache).of(Call):
            if n.kind == "op" and n.op.startswith("tensor.") and n.op not in TENSOR_QUERIES + GM_ELEMENT_OPS:
                bad.append(f"{f.name}: pl.{n.op} at line {n.span.line}")
    return bad or _short_tensor_ops(program, ctx, cache)


def _short_tensor_ops(program: Program, ctx: CompileContext, cache=None) -> list[str]:
    """... and no short name (`pl.add(a, b)`) resolves to a tensor op by its arguments' inferred types."""
    bad = []
    types = value_types(program, ctx, cache)
    for f in kernels(program):
        env = types.get(f.name, {})
        for n in NodeIndex.get(f, cache).of(Call):
            if n.kind == "op" and "." not in n.op and n.op not in NEUTRAL_OPS and any(
                    isinstance(a, Var) and isinstance(env.get(a.name), TensorType) for a in n.args):
                op = resolve_by_names(n, env)
                if op is None or op.name.startswith("tensor."):
                    bad.append(f"{f.name}: pl.{n.op} on a tensor at line {n.span.line}")
    return bad


@property_check("flat_tiles")
def _flat_tiles(program: Program, ctx: CompileContext, cache=None) -> list[str]:
    """Every tile in a kernel is at most 2-D, written or inferred."""
    return [f"{f.name}: a rank-{t.rank} tile" for f in kernels(program) for t in tile_types(f, cache) if t.rank > 2] \
        or [f"{k}: {n} is a rank-{t.rank} tile" for k, n, t in value_tiles(program, ctx, cache) if t.rank > 2]


@input_check("flat_tiles")
def _flat_values(program: Program, ctx: CompileContext, cache=None) -> list[str]:
    """... every value's inferred type too, and none is rank 1 (FlattenTileNdTo2D makes it [1, N]), in
    the written types either."""
    return [f"{k}: {n} is a rank-{t.rank} tile" for k, n, t in value_tiles(program, ctx, cache) if t.rank != 2] + \
        [f"{f.name}: a rank-1 tile" for f in kernels(program) for t in tile_types(f, cache) if t.rank == 1] + \
        [f"{f.name}: pl.tile.transpose without its scratch tile at line {n.span.line}" for f in kernels(program)
         for n in NodeIndex.get(f, cache).of(Call)
         if n.kind == "op" and n.op == "tile.transpose" and len(n.args) == 3 and n.kwarg("tmp") is None]


@property_check("nz_blocked")
def _nz_blocked(program: Program, ctx: CompileContext, cache=None) -> list[str]:
    """No logical NZ tensor survives in a kernel: every NZ view is the rank-5 blocked form."""
    bad = []
    for f in kernels(program):
        for n in NodeIndex.get(f, cache).of(TensorType):
            if n.layout == "NZ" and n.rank != 5:
                bad.append(f"{f.name}: an unblocked rank-{n.rank} NZ tensor")
    return bad


@property_check("memory_spaces")
def _memory_spaces(program: Program, ctx: CompileContext, cache=None) -> list[str]:
    """Every tile in a kernel has a memory space, written or inferred."""
    return [f"{f.name}: a tile without a memory space" for f in kernels(program) for t in tile_types(f, cache)
            if t.memory is None] \
        or [f"{k}: {n} has no memory space" for k, n, t in value_tiles(program, ctx, cache) if t.memory is None]


@input_check("memory_spaces")
def _spaces_of_values(program: Program, ctx: CompileContext, cache=None) -> list[str]:
    """... and every cube operand is in the space the cube unit reads it from (else InferTileMemorySpace has
    moves to insert)."""
    return _cube_operands(program, ctx, cache)


def _cube_operands(program: Program, ctx: CompileContext, cache=None) -> list[str]:
    """Every cube operand is in the space the cube unit reads it from (InferTileMemorySpace moves it there)."""
    from ptoc.passes.InferTileMemorySpace import CUBE_SLOTS, _operands

    bad = []
    types = value_types(program, ctx, cache)
    for f in kernels(program):
        env = types.get(f.name, {})
        for n in NodeIndex.get(f, cache).of(Call):
            if n.kind != "op" or n.op.rsplit(".", 1)[-1] not in {k.split(".")[1] for k in CUBE_SLOTS}:
                continue
            op = resolve_by_names(n, env)
            slots = CUBE_SLOTS.get(op.name if op is not None else "", {})
            for pname, _, a in (_operands(op, n) if op is not None else ()):
                t = env.get(a.name) if isinstance(a, Var) else None
                if pname in slots and isinstance(t, TileType) and t.memory != slots[pname]:
                    bad.append(f"{f.name}: operand {pname} of pl.{n.op} at line {n.span.line} is in {t.memory}")
    return bad


@property_check("kernel_kinds")
def _kernel_kinds(program: Program, ctx: CompileContext, cache=None) -> list[str]:
    """No plain InCore function remains: each kernel is AIC (cube) or AIV (vector)."""
    return [f"{f.name} is still InCore" for f in program.functions if f.func_type == "InCore"]


@property_check("strides")
def _strides(program: Program, ctx: CompileContext, cache=None) -> list[str]:
    """Every tensor parameter of a kernel carries explicit strides."""
    bad = []
    for f in kernels(program):
        for p in f.params:
            t = p.type
            if isinstance(t, TensorType) and (t.view is None or not t.view.stride):
                bad.append(f"{f.name}: parameter {p.name} has no strides")
    return bad


# Cross-core receives: their tile lives in the pipe's slot buffer (the `reserve_buffer` of the kernel),
# not in a buffer of the general pool, so it has no MemRef, and neither has a view or copy of it.
POP_OPS = ("tile.tpop_from_aic", "tile.tpop_from_aiv")
_ALIAS_OPS = ("tile.reshape", "tile.reinterpret_view")  # the views of a popped tile the .pto writer makes


def slot_tiles(f: Function, cache=None) -> tuple[set[str], set[int]]:
    """(names, ids of their annotated TileTypes) of the tiles of `f` that live in a pipe slot: the result
    of a tpop, and a view (`_ALIAS_OPS`) or plain copy of one. PyPTO's InitMemRef leaves them without a
    MemRef (there is no buffer of the pool to bind them to), and so does ptoc's."""
    names: set[str] = set()
    ids: set[int] = set()
    for s in NodeIndex.get(f, cache).of(AssignStmt):
        v = s.value
        if isinstance(v, Call) and v.kind == "op":
            hit = v.op in POP_OPS or (v.op in _ALIAS_OPS and bool(v.args) and isinstance(v.args[0], Var)
                                      and v.args[0].name in names)
        else:
            hit = isinstance(v, Var) and v.name in names
        if hit:
            names.add(s.target.name)
            if isinstance(s.annotation, TileType):
                ids.add(id(s.annotation))
    return names, ids


@property_check("memrefs")
def _memrefs(program: Program, ctx: CompileContext, cache=None) -> list[str]:
    """Every tile in a kernel is bound to a MemRef, except the tiles that live in a pipe slot
    (`slot_tiles`), which have none."""
    bad = []
    for f in kernels(program):
        missing = [t for t in tile_types(f, cache) if t.memref is None]
        if missing:
            exempt = slot_tiles(f, cache)[1]
            bad += [f"{f.name}: a tile without a MemRef" for t in missing if id(t) not in exempt]
    return bad


@input_check("memrefs")
def _memrefs_of_values(program: Program, ctx: CompileContext, cache=None) -> list[str]:
    """... every value's inferred type has one too, bound to a buffer (a `pl.MemRef("buf")` that only
    declares an allocation by name is not planned memory: InitMemRef must see it); a pipe slot's tile
    has none (`slot_tiles`)."""
    bad = []
    slots = {f.name: None for f in kernels(program)}
    by_name = {f.name: f for f in kernels(program)}
    for k, n, t in value_tiles(program, ctx, cache):
        if t.memref is None:
            if slots[k] is None:
                slots[k] = slot_tiles(by_name[k], cache)[0]
            if n not in slots[k]:
                bad.append(f"{k}: {n} has no MemRef")
        elif t.memref.declared:
            bad.append(f"{k}: {n} names a declared allocation")
    return bad


@property_check("coalesced")
def _coalesced(program: Program, ctx: CompileContext, cache=None) -> list[str]:
    """No two on-chip buffers of a function with unplaced allocs could still share one (MemoryReuse)."""
    from ptoc.passes.MemoryReuse import uncoalesced

    return uncoalesced(program, ctx, cache)


@property_check("addresses")
def _addresses(program: Program, ctx: CompileContext, cache=None) -> list[str]:
    """Every on-chip allocation in a kernel has a byte address: its `addr=`, or, in PyPTO's form (no
    allocation of the kernel has `addr=`), the constant offsets of the MemRefs on it, when they place the
    buffers live at the same time in disjoint byte ranges (`AllocateMemoryAddr.adopt` reads them)."""
    from ptoc.passes.AllocateMemoryAddr import offsets_placement_problem

    bad = []
    env = None

    def types_of(f):
        nonlocal env
        if env is None:
            env = value_types(program, ctx, cache)
        return env.get(f.name, {})

    for f in kernels(program):
        missing = [n for n in NodeIndex.get(f, cache).of(Call) if n.op == "tile.alloc" and n.kwarg("addr") is None]
        if not missing:
            continue
        if len(missing) == len([n for n in NodeIndex.get(f, cache).of(Call) if n.op == "tile.alloc"]):
            why = offsets_placement_problem(f, lambda f=f: types_of(f), ctx, cache)
            if why is None:
                continue
            bad.append(f"{f.name}: no tile.alloc has addr and {why}")
        else:
            bad.append(f"{f.name}: tile.alloc at line {missing[0].span.line} has no addr")
    return bad
