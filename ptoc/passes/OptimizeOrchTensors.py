"""OptimizeOrchTensors: kernels accumulate in place instead of into tensors the orchestration creates.

After ConvertTensorToTileOps every kernel result is stored into an Out parameter that the orchestration
function fills with a fresh `pl.tensor.create`. This pass removes such a scratch tensor where the kernel
can write its result over an input it has read: the Out parameter merges into that In parameter, which
becomes InOut; the `tensor.create` and the call's argument go away. Kernels are the InCore functions;
every other function counts as orchestration.

- In a loop: the kernel call's result that the loop yields back (directly, or as an element of the
  call's tuple) is stored into a created Out tensor, and the loop's iter_arg carrying it is passed to
  the same call as an In argument.
- A call outside such loops: the kernel loads the whole In tensor (offsets 0, full shape), carries the
  tile through at least one loop and stores it into the Out tensor of the same static type, the Out
  argument is created by the caller and the In argument is read by nothing else there; this must hold
  at every call of the kernel.

A kernel loop that assembles tiles into a `tile.create`d tile (its iter_arg, read by nothing else) whose
final value is stored whole (offsets 0, the Out tensor's static shape) into an Out parameter and returned
stores each tile into the Out parameter instead: the loop carries the Out tensor, the assembles become
`tile.store`s at the same offsets, the create and the final store go away, the kernel returns the loop's
result. (Elements no assemble writes were undefined before and keep the Out tensor's contents after.)

Where ptoc differs from PyPTO: PyPTO rewrites such a loop whatever the final store's offsets and the
create's other uses; ptoc requires the whole-tensor store at offset 0 and a create used only by the loop.
PyPTO also gives a kernel's Out parameter the strides of the tensor its result is assembled into, and an
In parameter the strides of the tensor its argument is sliced from, so the kernel works on the window in
place. ptoc's calling convention passes a window to a kernel as a
packed tensor of its own (the reference and the .pto executor copy it), so the parameters keep packed
strides here. PyPTO's window externalization of kernels marked `windowize` is not done either; those
programs stay as they are.
"""

from __future__ import annotations

from dataclasses import replace

from ptoc.ir.nodes import (
    AssignStmt,
    Call,
    ConstInt,
    Expr,
    ForStmt,
    Function,
    GetItem,
    IfStmt,
    ListExpr,
    Program,
    ReturnStmt,
    ScopeStmt,
    Stmt,
    TensorType,
    TupleExpr,
    Var,
    WhileStmt,
    YieldStmt,
)
from ptoc.ir.substitute import substitute
from ptoc.ir.visitor import Mutator, walk
from ptoc.passes.manager import Pass

CREATE_OPS = ("tensor.create", "create_tensor")
STORE_OPS = ("tile.store", "store")
LOAD_OPS = ("tile.load", "load")
ASSEMBLE_OPS = ("tensor.assemble", "assemble")
SLICE_OPS = ("tensor.slice", "slice")


class OptimizeOrchTensors(Pass):
    name = "OptimizeOrchTensors"
    stage = "tile"
    summary = "kernels accumulate in place instead of into created tensors; windows get their parent's strides"

    def run(self, program: Program, ctx) -> Program:
        kernels = {f.name for f in program.functions if f.func_type == "InCore"}
        if not kernels or len(kernels) == len(program.functions):
            return program
        return _store_loops(_reuse_iter_args(program, kernels), kernels, self.index)


# --------------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------------


def _is_op(e, ops) -> bool:
    return isinstance(e, Call) and e.kind == "op" and e.op in ops


def _kernel_call(e, kernels) -> bool:
    return isinstance(e, Call) and e.kind == "func" and e.op in kernels


def _top_level(body: tuple[Stmt, ...]) -> list[Stmt]:
    """The statements of a body, scope bodies opened (PyPTO's flattening of statement sequences)."""
    out: list[Stmt] = []
    for s in body:
        if isinstance(s, ScopeStmt):
            out.extend(_top_level(s.body))
        else:
            out.append(s)
    return out


def _items(e) -> tuple | None:
    return e.items if isinstance(e, (ListExpr, TupleExpr)) else None


def _const(e) -> int | None:
    return e.value if isinstance(e, ConstInt) else None


def _out_returns(f: Function) -> list[tuple[int, int]]:
    """(Out parameter position, return position) for each returned value that is a top-level store into an
    Out parameter, or the result of a top-level loop whose initial value is an Out parameter."""
    outs = {p.name: k for k, p in enumerate(f.params) if p.direction == "Out"}
    if not outs:
        return []
    stmts = _top_level(f.body)
    defs = {s.target.name: s.value for s in stmts if isinstance(s, AssignStmt)}
    loop_init: dict[str, Expr] = {}
    for s in stmts:
        if isinstance(s, (ForStmt, WhileStmt)):
            loop_init.update({r.name: v for r, v in zip(s.results, s.init_values)})
    ret = next((s for s in stmts if isinstance(s, ReturnStmt)), None)
    if ret is None:
        return []
    found = []
    for i, v in enumerate(ret.values):
        if not isinstance(v, Var):
            continue
        if v.name not in defs:
            init = loop_init.get(v.name)
            if isinstance(init, Var) and init.name in outs:
                found.append((outs[init.name], i))
            continue
        c = defs[v.name]
        if _is_op(c, STORE_OPS) and len(c.args) >= 3 and isinstance(c.args[2], Var) and c.args[2].name in outs:
            found.append((outs[c.args[2].name], i))
    return found


def _uses(f: Function) -> dict[str, int]:
    """How often each name is read in `f` (the places that bind a name are not reads)."""
    counts: dict[str, int] = {}
    nodes = [n for s in f.body for n in walk(s)]
    for n in nodes:
        if isinstance(n, Var):
            counts[n.name] = counts.get(n.name, 0) + 1
    for n in nodes:
        bound: tuple = ()
        if isinstance(n, AssignStmt):
            bound = (n.target,)
        elif isinstance(n, YieldStmt):
            bound = n.targets
        elif isinstance(n, ForStmt):
            bound = (n.var, *n.iter_args)
        elif isinstance(n, WhileStmt):
            bound = n.iter_args
        elif isinstance(n, ScopeStmt) and n.var is not None:
            bound = (n.var,)
        for v in bound:
            counts[v.name] -= 1
    return counts


# --------------------------------------------------------------------------------------------------
# in-place accumulation
# --------------------------------------------------------------------------------------------------


def _loop_merges(program: Program, kernels: set[str], mappings: dict) -> dict[str, list[tuple[int, int]]]:
    results: dict[str, list[tuple[int, int]]] = {}

    def analyze(loop) -> None:
        stmts = _top_level(loop.body)
        creates = {s.target.name for s in stmts if isinstance(s, AssignStmt) and _is_op(s.value, CREATE_OPS)}
        calls = [s for s in stmts if isinstance(s, AssignStmt) and _kernel_call(s.value, kernels)]
        if not stmts or not isinstance(stmts[-1], YieldStmt):
            return
        yld = stmts[-1]
        extracts: dict[str, dict[int, str]] = {}
        for s in stmts:
            if isinstance(s, AssignStmt) and isinstance(s.value, GetItem) and isinstance(s.value.value, Var) \
                    and _const(s.value.index) is not None:
                extracts.setdefault(s.value.value.name, {})[_const(s.value.index)] = s.target.name
        yielded = [v.name if isinstance(v, Var) else None for v in yld.values]
        for s in calls:
            call = s.value
            callee = program.function(call.op)
            maps = mappings.get(call.op) or []
            merges = []
            for out_k, ret_i in maps:
                if out_k >= len(call.args):
                    continue
                arg = call.args[out_k]
                if not (isinstance(arg, Var) and arg.name in creates):
                    continue
                if len(maps) == 1 and len(callee.returns) == 1:
                    name = s.target.name
                else:
                    name = extracts.get(s.target.name, {}).get(ret_i)
                if name is None or name not in yielded:
                    continue
                y = yielded.index(name)
                if y >= len(loop.iter_args):
                    continue
                carried = loop.iter_args[y].name
                for k, a in enumerate(call.args):
                    if isinstance(a, Var) and a.name == carried:
                        if k < len(callee.params) and callee.params[k].direction == "In":
                            merges.append((out_k, k))
                        break
            if merges and call.op not in results:
                results[call.op] = merges

    def visit(body: tuple[Stmt, ...]) -> None:
        for s in body:
            for b in _bodies(s):
                visit(b)
            if isinstance(s, (ForStmt, WhileStmt)) and s.iter_args:
                analyze(s)

    for f in program.functions:
        if f.name not in kernels:
            visit(f.body)
    return results


def _bodies(s: Stmt) -> tuple[tuple[Stmt, ...], ...]:
    if isinstance(s, (ForStmt, WhileStmt, ScopeStmt)):
        return (s.body,)
    if isinstance(s, IfStmt):
        return (s.then_body, s.else_body)
    return ()


def _full_load(c: Call, t: TensorType) -> bool:
    offsets, shapes = _items(c.args[1]) if len(c.args) > 1 else None, _items(c.args[2]) if len(c.args) > 2 else None
    valid = _items(c.args[3]) if len(c.args) > 3 else shapes
    if valid is None and c.kwarg("valid_shapes") is not None:
        valid = _items(c.kwarg("valid_shapes"))
    if offsets is None or shapes is None or valid is None:
        return False
    if not len(offsets) == len(shapes) == len(valid) == t.rank:
        return False
    for o, n, v, d in zip(offsets, shapes, valid, t.shape):
        if _const(d) is None or _const(n) != _const(d) or _const(v) != _const(d) or _const(o) != 0:
            return False
    return True


def _same_static_type(a, b) -> bool:
    return (isinstance(a, TensorType) and isinstance(b, TensorType) and a.dtype == b.dtype and a.rank == b.rank
            and all(_const(x) is not None and _const(x) == _const(y) for x, y in zip(a.shape, b.shape)))


def _in_out_pairs(f: Function, mappings) -> list[tuple[int, int]]:
    """(In position, Out position) pairs of a kernel that accumulates an In tensor into an Out tensor."""
    ins = {p.name: k for k, p in enumerate(f.params) if p.direction == "In" and isinstance(p.type, TensorType)}
    if not ins or not mappings:
        return []
    defs: dict[str, Expr] = {}
    loop_init: dict[str, Expr] = {}
    ret = None
    for n in walk(f):
        if isinstance(n, AssignStmt):
            defs.setdefault(n.target.name, n.value)
        elif isinstance(n, ReturnStmt) and ret is None:
            ret = n
        elif isinstance(n, (ForStmt, WhileStmt)):
            loop_init.update({r.name: v for r, v in zip(n.results, n.init_values)})
    if ret is None:
        return []
    pairs, used = [], set()
    for out_k, ret_i in mappings:
        v = ret.values[ret_i] if ret_i < len(ret.values) else None
        store = defs.get(v.name) if isinstance(v, Var) else None
        if not (_is_op(store, STORE_OPS) and store.args and isinstance(store.args[0], Var)):
            continue
        cur, hops = store.args[0].name, 0
        for _ in range(16):
            if cur not in loop_init:
                break
            init = loop_init[cur]
            if not isinstance(init, Var):
                cur = None
                break
            cur, hops = init.name, hops + 1
        if cur is None or hops == 0:
            continue
        load = defs.get(cur)
        if not (_is_op(load, LOAD_OPS) and load.args and isinstance(load.args[0], Var)
                and load.args[0].name in ins):
            continue
        in_k = ins[load.args[0].name]
        t = f.params[in_k].type
        if not _same_static_type(t, f.params[out_k].type) or not _full_load(load, t) or in_k in used:
            continue
        used.add(in_k)
        pairs.append((in_k, out_k))
    return pairs


def _standalone_merges(program: Program, kernels: set[str], mappings, done) -> dict[str, list[tuple[int, int]]]:
    sites: dict[str, list[tuple[AssignStmt, set[str], dict[str, int]]]] = {}
    for f in program.functions:
        if f.name in kernels:
            continue
        creates = {n.target.name for n in walk(f) if isinstance(n, AssignStmt) and _is_op(n.value, CREATE_OPS)}
        found: list[AssignStmt] = []

        def visit(body, in_loop, found=found):
            for s in body:
                if isinstance(s, AssignStmt) and not in_loop and _kernel_call(s.value, kernels):
                    found.append(s)
                for b in _bodies(s):
                    visit(b, in_loop or isinstance(s, (ForStmt, WhileStmt)) and bool(s.iter_args))

        visit(f.body, False)
        uses = _uses(f) if found else {}
        for s in found:
            sites.setdefault(s.value.op, []).append((s, creates, uses))
    results = {}
    for name, calls in sites.items():
        if name in done:
            continue
        pairs = _in_out_pairs(program.function(name), mappings.get(name))
        merges, seen_in, seen_out = [], set(), set()
        for in_k, out_k in pairs:
            ok = True
            for s, creates, uses in calls:
                args = s.value.args
                if max(in_k, out_k) >= len(args) or not isinstance(args[in_k], Var) \
                        or not isinstance(args[out_k], Var) or args[out_k].name not in creates:
                    ok = False
                    break
                own = sum(1 for m in walk(s.value) if isinstance(m, Var) and m.name == args[in_k].name)
                if uses.get(args[in_k].name, 0) != own:
                    ok = False
                    break
            if ok and out_k not in seen_out and in_k not in seen_in:
                seen_out.add(out_k)
                seen_in.add(in_k)
                merges.append((out_k, in_k))
        if merges:
            results[name] = merges
    return results


def _reuse_iter_args(program: Program, kernels: set[str]) -> Program:
    mappings = {f.name: _out_returns(f) for f in program.functions if f.name in kernels}
    if not any(mappings.values()):
        return program
    merges = _loop_merges(program, kernels, mappings)
    merges.update(_standalone_merges(program, kernels, mappings, set(merges)))
    if not merges:
        return program
    funcs = []
    for f in program.functions:
        if f.name in merges:
            funcs.append(_merge_params(f, merges[f.name]))
        elif f.name not in kernels:
            funcs.append(_drop_args(f, merges))
        else:
            funcs.append(f)
    return replace(program, functions=tuple(funcs))


def _merge_params(f: Function, merges: list[tuple[int, int]]) -> Function:
    drop = {o for o, _ in merges}
    promote = {i for _, i in merges}
    body = substitute(f.body, {f.params[o].name: Var(f.params[i].name) for o, i in merges})
    params = tuple(replace(p, direction="InOut") if k in promote else p
                   for k, p in enumerate(f.params) if k not in drop)
    return replace(f, params=params, body=body)


def _drop_args(f: Function, merges: dict[str, list[tuple[int, int]]]) -> Function:
    dead: set[str] = set()
    for n in walk(f):
        if isinstance(n, AssignStmt) and isinstance(n.value, Call) and n.value.kind == "func" \
                and n.value.op in merges:
            for o, _ in merges[n.value.op]:
                if o < len(n.value.args) and isinstance(n.value.args[o], Var):
                    dead.add(n.value.args[o].name)
    if not dead:
        return f

    class _Drop(Mutator):
        def mutate_Call(self, c: Call):
            if c.kind != "func" or c.op not in merges:
                return c
            drop = {o for o, _ in merges[c.op]}
            return replace(c, args=tuple(a for k, a in enumerate(c.args) if k not in drop))

    def block(body: tuple[Stmt, ...]) -> tuple[Stmt, ...]:
        out = []
        for s in body:
            if isinstance(s, AssignStmt) and s.target.name in dead and _is_op(s.value, CREATE_OPS):
                continue
            if isinstance(s, (ForStmt, WhileStmt, ScopeStmt)):
                s = replace(s, body=block(s.body))
            elif isinstance(s, IfStmt):
                s = replace(s, then_body=block(s.then_body), else_body=block(s.else_body))
            out.append(s)
        return tuple(out)

    return replace(f, body=_Drop().mutate(block(f.body)))


# --------------------------------------------------------------------------------------------------
# assemble loops into store loops
# --------------------------------------------------------------------------------------------------


def _store_loops(program: Program, kernels: set[str], index=None) -> Program:
    """`_store_loop` of every kernel with an Out parameter. `index`: `Pass.index` (a function's node index,
    which the passes before built): a kernel whose operator census has no tile.assemble is left as it is
    without a walk of its body."""
    funcs, changed = [], False
    for f in program.functions:
        g = f
        if f.name in kernels and any(p.direction == "Out" for p in f.params) and (
                index is None or index(f).has_op("tile.assemble")):
            g = _store_loop(f)
        changed |= g is not f
        funcs.append(g)
    return replace(program, functions=tuple(funcs)) if changed else program


def _store_loop(f: Function) -> Function:
    """A kernel loop assembling tiles into a created tile that is then stored whole into an Out parameter
    and returned stores the tiles into the Out parameter directly (see the module docstring)."""
    if not f.body or not isinstance(f.body[-1], ReturnStmt) or not any(
            _is_op(n, ("tile.assemble",)) for s in f.body for n in walk(s)):
        return f
    ret = f.body[-1]
    outs = {p.name: p for p in f.params if p.direction == "Out"}
    defs = {n.target.name: n.value for s in f.body for n in walk(s) if isinstance(n, AssignStmt)}
    uses = _uses(f)
    stored: dict[str, tuple[str, str]] = {}  # tile name -> (store result name, Out parameter name)
    for v in ret.values:
        c = defs.get(v.name) if isinstance(v, Var) else None
        if _is_op(c, STORE_OPS) and len(c.args) >= 3 and isinstance(c.args[0], Var) \
                and isinstance(c.args[2], Var) and c.args[2].name in outs \
                and all(_const(o) == 0 for o in (_items(c.args[1]) or (None,))):
            stored[c.args[0].name] = (v.name, c.args[2].name)
    plans: dict[int, tuple] = {}  # id(loop) -> (assemble target, Out name, create name, store name)
    for s in f.body:
        for n in walk(s):
            if not (isinstance(n, ForStmt) and len(n.iter_args) == 1 and len(n.results) == 1
                    and n.results[0].name in stored):
                continue
            store_name, out = stored[n.results[0].name]
            carried = n.iter_args[0].name
            body = _top_level(n.body)
            asm = next((b for b in body if isinstance(b, AssignStmt) and _is_op(b.value, ("tile.assemble",))
                        and len(b.value.args) >= 3 and isinstance(b.value.args[0], Var)
                        and b.value.args[0].name == carried), None)
            y = body[-1]
            if asm is None or not isinstance(y, YieldStmt) or len(y.values) != 1 \
                    or not (isinstance(y.values[0], Var) and y.values[0].name == asm.target.name):
                continue
            if any(isinstance(m, Var) and m.name == carried for b in body if b is not asm and b is not y
                   for m in walk(b)):
                continue
            init = n.init_values[0]
            if not (isinstance(init, Var) and _is_op(defs.get(init.name), ("tile.create",))
                    and uses.get(init.name) == 1 and uses.get(store_name) == 1):
                continue
            out_t = outs[out].type
            tile_shape = _items(defs[init.name].args[0]) if defs[init.name].args else None
            if not isinstance(out_t, TensorType) or tile_shape is None \
                    or [_const(d) for d in out_t.shape] != [_const(d) for d in tile_shape] \
                    or any(_const(d) is None for d in out_t.shape):
                continue
            plans[id(n)] = (asm.target.name, out, init.name, store_name)
    if not plans:
        return f
    dead = {p[2] for p in plans.values()} | {p[3] for p in plans.values()}
    result_of = {}

    def block(stmts: tuple[Stmt, ...]) -> tuple[Stmt, ...]:
        new = []
        for s in stmts:
            if isinstance(s, AssignStmt) and s.target.name in dead:
                continue
            if isinstance(s, ForStmt) and id(s) in plans:
                asm_name, out, _, store_name = plans[id(s)]
                result_of[store_name] = s.results[0]
                inner = []
                for b in s.body:
                    if isinstance(b, AssignStmt) and b.target.name == asm_name:
                        a = b.value.args
                        b = AssignStmt(b.target, Call("tile.store", (a[1], a[2], s.iter_args[0]), span=b.value.span),
                                       span=b.span)
                    elif isinstance(b, YieldStmt):
                        b = replace(b, annotation=None)
                    inner.append(b)
                new.append(replace(s, init_values=(Var(out),), body=tuple(inner)))
                continue
            if isinstance(s, (ForStmt, WhileStmt, ScopeStmt)):
                s = replace(s, body=block(s.body))
            elif isinstance(s, IfStmt):
                s = replace(s, then_body=block(s.then_body), else_body=block(s.else_body))
            new.append(s)
        return tuple(new)

    body = block(f.body)
    last = body[-1]
    values = tuple(result_of.get(v.name, v) if isinstance(v, Var) else v for v in last.values)
    return replace(f, body=body[:-1] + (replace(last, values=values),))
