"""ConvertToSSA: give every value its own name, so each name is assigned exactly once.

Purpose
-------
Programs are written like Python: `s = pl.mul(s, t)` updates `s`, a loop body updates a value
defined before the loop, and both branches of an `if` may assign the same name. Every later pass
and the code generator rely on single assignment (a name identifies its one definition), so this
pass runs first and rewrites the program into that form, the way PyPTO's ConvertToSSA does:

- a name assigned again gets a new name for the new value (`s`, then `s_1`, `s_2`, ...: the first
  definition keeps the written name, later ones take the first `<name>_<k>` not used in the
  function); every later use reads the newest one;
- a loop (`pl.range` and the other `for` kinds, `pl.while_`) that assigns a name defined before it
  carries that name: the loop gets an iter_arg for it (initialised with the value before the loop),
  its body ends by yielding the body's last value, and the loop's result is the name's value after
  the loop. Carried names come after the loop's own iter_args, in name order;
- a name first assigned inside a loop body (not before the loop) and read after the loop escapes: the
  loop carries it like the names above (after them, in name order), and its result is the name's value
  after the loop. Its start value (what it holds when the loop runs no iteration) is chosen as PyPTO
  chooses it: the current value of an Out / InOut parameter of the same type, else of another name
  defined before the loop with that type (parameters first, then in order of definition); where
  there is none, a neutral value made right before the loop (0 / 0.0 / False for a scalar,
  `pl.system.task_invalid()` for a task id, `pl.tensor.create` / `pl.tile.create` of the type);
  a value of any other type is PTOC-E0740. "Read after" is order-aware liveness: a name assigned
  again before it is read (a loop-local temporary of a later loop) does not escape;
- an `if` after which a name has a different value in either branch merges it: each branch yields its
  value (the value before the `if` when the branch does not assign it; an absent `else` is created
  for that) and the `if`'s result is the merged value. A name new in the `if` is merged only when it
  is read after the `if`; a branch that does not assign it yields the start value an escaping name
  gets. Merged names come first, in name order, then the `if`'s own yielded names;
- `with` scopes and `pl.split_aiv` loops are regions of the same function: names they assign stay
  visible after them.

A function that already assigns every name once, and reads no loop-local name after its loop, is
returned unchanged (the same object), so the pass costs nothing on SSA input and the printed IR is
byte-identical.

Before::

    acc: pl.Tile[[32, 128], pl.FP32, pl.Mem.Vec] = pl.tile.full([32, 128], dtype=pl.FP32, value=0.0)
    for i in pl.range(4):
        t = pl.tile.load(x, [i * 32, 0], [32, 128])
        acc = pl.tile.add(acc, t)
    out = pl.tile.store(acc, [0, 0], out)

After::

    acc: pl.Tile[[32, 128], pl.FP32, pl.Mem.Vec] = pl.tile.full([32, 128], dtype=pl.FP32, value=0.0)
    for i, (acc_1,) in pl.range(4, init_values=(acc,)):
        t = pl.tile.load(x, [i * 32, 0], [32, 128])
        acc_2 = pl.tile.add(acc_1, t)
        acc_3 = pl.yield_(acc_2)
    out_1 = pl.tile.store(acc_3, [0, 0], out)

Differences from PyPTO: PyPTO renames every value (`x_0`, `acc_iter_1`, `acc_phi_3`); ptoc keeps
the written name for a first definition so unchanged code reads as written. PyPTO merges a name new
in both branches of an `if` even when nothing reads it after (a dead merge); ptoc merges only names
read after the `if`, so an `if` written with explicit yields keeps exactly those. Where PyPTO finds no
start value for an escaping name it leaves an undefined placeholder (which its verifier rejects), and
a name new in one branch only and read after the `if` leaks out of the branch; ptoc makes a neutral
start value instead, so the program stays in single assignment. PyPTO also stops escaping names at
outlined scopes (`pl.at`, ...); ptoc's scopes share their function's names, so it carries them through.
A function in single assignment with no escaping name is returned unchanged (the same object).
"""

from __future__ import annotations

from ptoc.context import CompileContext
from ptoc.ir.names import fresh_name
from ptoc.ir.nodes import (
    AssignStmt,
    ConstBool,
    ConstFloat,
    ConstInt,
    DTypeLit,
    EnumLit,
    ForStmt,
    Function,
    IfStmt,
    PassStmt,
    Program,
    ReturnStmt,
    ScopeStmt,
    Stmt,
    Var,
    WhileStmt,
    YieldStmt,
)
from ptoc.ir.visitor import Mutator, replace, var_names, walk
from ptoc.passes.manager import Pass


# --------------------------------------------------------------------------------------------------
# Single assignment: the definitions of a function
# --------------------------------------------------------------------------------------------------


def _body_defs(body: tuple[Stmt, ...], out: list[Var], results_bound: bool) -> None:
    """Append the names `body` defines. `results_bound`: the body's final yield binds names that its
    owner already counted (the else branch of an if whose then branch yields the same names)."""
    for i, s in enumerate(body):
        cls = s.__class__
        if cls is AssignStmt:
            out.append(s.target)
        elif cls is YieldStmt:
            if not (results_bound and i == len(body) - 1):
                out.extend(s.targets)
        elif cls is ForStmt:
            out.append(s.var)
            out.extend(s.iter_args)
            _body_defs(s.body, out, False)
        elif cls is WhileStmt:
            out.extend(s.iter_args)
            _body_defs(s.body, out, False)
        elif cls is IfStmt:
            _body_defs(s.then_body, out, False)
            _body_defs(s.else_body, out, bool(s.results))
        elif cls is ScopeStmt:
            if s.var is not None:
                out.append(s.var)
            _body_defs(s.body, out, False)


def definitions(f: Function) -> list[Var]:
    """Every name `f` defines, once per definition (the names both branches of an if yield into count
    once: they are the if's results)."""
    out = [Var(p.name, span=p.span) for p in f.params]
    _body_defs(f.body, out, False)
    return out


def ssa_violations(program: Program, escapes=None) -> list[str]:
    """The names assigned more than once, per function (empty: the program is in SSA form). `escapes`: the
    test "a name assigned in a loop is read after it" to use (by default `_has_escapes`; the `ssa`
    property check gives its cheaper equal, `properties.escapes`)."""
    escapes = _has_escapes if escapes is None else escapes
    bad = []
    for f in program.functions:
        if not _is_ssa(f):
            seen: set[str] = set()
            for v in definitions(f):
                if v.name in seen:
                    bad.append(f"{f.name}: {v.name!r} is assigned more than once (line {v.span.line})")
                seen.add(v.name)
        if not bad and escapes(f):
            bad.append(f"{f.name}: a name assigned inside a loop is read after the loop")
    return bad


def _assigned(body: tuple[Stmt, ...]) -> set[str]:
    """The names a body assigns anywhere inside it (nested bodies included)."""
    out: list[Var] = []
    _body_defs(body, out, False)
    return {v.name for v in out}


# --------------------------------------------------------------------------------------------------
# Liveness: which names a statement reads before it assigns them
# --------------------------------------------------------------------------------------------------


def _reads(*nodes) -> set[str]:
    """The names of the variables anywhere under `nodes` (each a node, a tuple of nodes or None)."""
    return var_names(nodes)


def _kills(s: Stmt) -> set[str]:
    """The names `s` assigns (anywhere inside it): a later read of one of them reads that value."""
    if s.__class__ is AssignStmt:
        return {s.target.name}
    return _assigned((s,))


def _live_in(s: Stmt) -> set[str]:
    """The names `s` reads that a statement before it may have assigned (order-aware inside bodies)."""
    cls = s.__class__
    if cls is AssignStmt:
        return _reads(s.value, s.annotation)
    if cls is ForStmt:
        body = _seq_live_in(s.body, set()) - {s.var.name} - {a.name for a in s.iter_args}
        return body | _reads(s.args, tuple(v for _, v in s.kwargs), s.init_values)
    if cls is WhileStmt:
        body = (_seq_live_in(s.body, set()) | _reads(s.cond)) - {a.name for a in s.iter_args}
        return body | _reads(tuple(v for _, v in s.kwargs), s.init_values)
    if cls is IfStmt:
        return _reads(s.cond) | _seq_live_in(s.then_body, set()) | _seq_live_in(s.else_body, set())
    if cls is ScopeStmt:
        inner = _seq_live_in(s.body, set()) - ({s.var.name} if s.var is not None else set())
        return inner | _reads(s.args, tuple(v for _, v in s.kwargs))
    if cls is YieldStmt:
        return _reads(s.values, s.annotation)
    return _reads(s)  # EvalStmt, ReturnStmt, PassStmt, break / continue


def _seq_live_in(body: tuple[Stmt, ...], after: set[str]) -> set[str]:
    live = set(after)
    for s in reversed(body):
        live = (live - _kills(s)) | _live_in(s)
    return live


def _futures(body: tuple[Stmt, ...], after: set[str]) -> list[set[str]]:
    """For each statement of `body`: the names read after it (in `body`, then `after`) before any new
    assignment of them."""
    out: list[set[str]] = [set()] * len(body)
    live = set(after)
    for i in range(len(body) - 1, -1, -1):
        out[i] = live
        live = (live - _kills(body[i])) | _live_in(body[i])
    return out


def _transparent(s: Stmt) -> bool:
    """A `pl.split_aiv` loop is a region of its function, not a loop: what it assigns is visible after it."""
    return s.__class__ is ForStmt and s.kind == "split_aiv"


def _has_escapes(f: Function) -> bool:
    """Some name assigned inside a loop body (not a result of that loop) is read outside that loop (the
    program as PyPTO's parser accepts it: ConvertToSSA carries the value out of the loop)."""
    owner: dict[str, int] = {}  # name -> id of the innermost loop whose body assigns it
    reads: list[tuple[str, tuple[int, ...]]] = []

    def visit(body: tuple[Stmt, ...], loops: tuple[int, ...]) -> None:
        for s in body:
            cls = s.__class__
            if cls is AssignStmt:
                if loops:
                    owner[s.target.name] = loops[-1]
                reads.extend((n, loops) for n in _reads(s.value, s.annotation))
            elif cls is ForStmt or cls is WhileStmt:
                if cls is ForStmt:
                    reads.extend((n, loops) for n in _reads(s.args, tuple(v for _, v in s.kwargs)))
                reads.extend((n, loops) for n in _reads(s.init_values))
                inner = loops if _transparent(s) else loops + (id(s),)
                if loops:
                    for r in s.results:
                        owner[r.name] = loops[-1]
                if cls is WhileStmt:
                    reads.extend((n, inner) for n in _reads(s.cond))
                stmts, y = _split_yield(s.body)
                visit(stmts, inner)
                if y is not None:
                    reads.extend((n, inner) for n in _reads(y.values))
            elif cls is IfStmt:
                reads.extend((n, loops) for n in _reads(s.cond))
                for branch in (s.then_body, s.else_body):
                    stmts, y = _split_yield(branch)
                    visit(stmts, loops)
                    if y is not None:
                        if loops:
                            for t in y.targets:
                                owner[t.name] = loops[-1]
                        reads.extend((n, loops) for n in _reads(y.values))
            elif cls is ScopeStmt:
                reads.extend((n, loops) for n in _reads(s.args, tuple(v for _, v in s.kwargs)))
                visit(s.body, loops)
            elif cls is YieldStmt:
                reads.extend((n, loops) for n in _reads(s.values))
            else:
                reads.extend((n, loops) for n in _reads(s))

    visit(f.body, ())
    return any(n in owner and owner[n] not in loops for n, loops in reads)


# --------------------------------------------------------------------------------------------------
# The conversion
# --------------------------------------------------------------------------------------------------


class _Uses(Mutator):
    """Rewrite every name read in an expression or type to its current value's name."""

    def __init__(self, env: dict[str, str]):
        self.env = env

    def pre_Var(self, v: Var):
        new = self.env.get(v.name)
        return v if new is None or new == v.name else replace(v, name=new)


def _split_yield(body: tuple[Stmt, ...]) -> tuple[tuple[Stmt, ...], YieldStmt | None]:
    if body and isinstance(body[-1], YieldStmt):
        return body[:-1], body[-1]
    return body, None


def _ends_in_return(body: tuple[Stmt, ...]) -> bool:
    return bool(body) and isinstance(body[-1], ReturnStmt)


class _Converter:
    def __init__(self, f: Function, program: Program, ctx: CompileContext | None = None):
        self.f, self.program, self.ctx = f, program, ctx
        self._types: dict | None = None  # the as-written program's value types, when an escape needs them
        self.pre: list[Stmt] = []  # statements to put before the statement being converted
        self.taken: set[str] = {d.name for d in program.dynamic_dims}
        self.taken.update(p.name for p in f.params)
        for n in walk(f):
            if n.__class__ is Var:
                self.taken.add(n.name)
        self.defined: set[str] = {p.name for p in f.params}

    # ---------------------------------------------------------------- names
    def define(self, name: str) -> str:
        """The name of a new value of `name`: `name` itself the first time, else a fresh one."""
        if name not in self.defined:
            self.defined.add(name)
            return name
        new = fresh_name(name, self.taken)
        self.defined.add(new)
        return new

    def bind(self, v: Var, env: dict[str, str]) -> Var:
        new = self.define(v.name)
        env[v.name] = new
        return v if new == v.name else replace(v, name=new)

    @staticmethod
    def uses(node, env: dict[str, str]):
        if node is None:
            return None
        return _Uses(env).mutate(node)

    # ---------------------------------------------------------------- bodies
    def block(self, body: tuple[Stmt, ...], env: dict[str, str], after: set[str]) -> list[Stmt]:
        """Convert `body`; `after`: the names read after it (before a new assignment of them)."""
        out: list[Stmt] = []
        for s, future in zip(body, _futures(body, after)):
            converted = self.stmt(s, env, future)
            out.extend(self.pre)
            self.pre = []
            out.extend(converted)
        return out

    def stmt(self, s: Stmt, env: dict[str, str], future: set[str]) -> list[Stmt]:
        cls = s.__class__
        if cls is AssignStmt:
            value = self.uses(s.value, env)
            ann = self.uses(s.annotation, env)
            return [replace(s, target=self.bind(s.target, env), value=value, annotation=ann)]
        if cls is ForStmt and _transparent(s):  # a region: its names stay visible after it
            args = self.uses(s.args, env)
            kwargs = self.uses(s.kwargs, env)
            var = self.bind(s.var, env)
            return [replace(s, var=var, args=args, kwargs=kwargs, body=tuple(self.block(s.body, env, future)))]
        if cls is ForStmt:
            return [self.for_stmt(s, env, future)]
        if cls is WhileStmt:
            return [self.while_stmt(s, env, future)]
        if cls is IfStmt:
            return [self.if_stmt(s, env, future)]
        if cls is ScopeStmt:
            args = self.uses(s.args, env)
            kwargs = self.uses(s.kwargs, env)
            var = self.bind(s.var, env) if s.var is not None else None
            body = tuple(self.block(s.body, env, future))  # a scope shares its function's names
            return [replace(s, args=args, kwargs=kwargs, var=var, body=body)]
        if cls is YieldStmt:  # a yield that does not end its body: the verifier reports it
            return [replace(s, values=self.uses(s.values, env), annotation=self.uses(s.annotation, env))]
        return [self.uses(s, env)]  # EvalStmt, ReturnStmt, PassStmt: uses only

    @staticmethod
    def _carried(s: ForStmt | WhileStmt, env: dict[str, str], own: list[str],
                 future: set[str]) -> tuple[list[str], list[str]]:
        """The names a loop carries, in name order (not its loop variable, its own iter_args or its own
        results): those assigned in its body and defined before it, then those first assigned in its body
        and read after it (escaping: they leave the loop as results too)."""
        skip = {a.name for a in s.iter_args} | set(own) | {r.name for r in s.results}
        assigned = _assigned(s.body) - skip
        return (sorted(n for n in assigned if n in env),
                sorted(n for n in assigned if n not in env and n in future))

    def types(self) -> dict:
        if self._types is None:
            from ptoc.ir.verifier import Verifier, _default_op_typer

            self._types = Verifier(self.program, self.ctx, _default_op_typer(), None,
                                   ssa=False).function_types(self.f)
        return self._types

    def escaping_init(self, n: str, s: Stmt, env: dict[str, str]):
        """The value an escaping name has when the loop runs no iteration (as PyPTO chooses it): the
        current value of an Out / InOut parameter of its type, else of the first name defined before the
        loop with its type, else a neutral value made before the loop (0, no task, a new tensor or tile)."""
        from ptoc.ir import dtypes
        from ptoc.ir.nodes import Call, ListExpr
        from ptoc.ir.nodes import ScalarType, TensorType, TileType
        from ptoc.ir.type_match import type_mismatch

        types = self.types()
        want = types.get(n)
        if want is not None:
            params = [p.name for p in self.f.params if p.direction in ("Out", "InOut")]
            params += [p.name for p in self.f.params if p.direction not in ("Out", "InOut")]
            order = params + [k for k in env if k not in set(params)]
            for k in order:
                t = types.get(k)
                if k in env and t is not None and t.__class__ is want.__class__ and not type_mismatch(want, t):
                    return Var(env[k], span=s.span)
        value = None
        if isinstance(want, ScalarType):
            dt = want.dtype
            if dt == dtypes.TASK_ID:
                value = Call("system.task_invalid", (), span=s.span)
            elif dt == dtypes.BOOL:
                return ConstBool(False)
            elif dt.is_float:
                return ConstFloat(0.0, dt)
            elif dt.is_int or dt == dtypes.INDEX:
                return ConstInt(0, dt)
        elif isinstance(want, TensorType):
            value = Call("tensor.create", (ListExpr(tuple(want.shape)),), (("dtype", DTypeLit(want.dtype)),),
                         span=s.span)
        elif isinstance(want, TileType) and want.memory:
            value = Call("tile.create", (ListExpr(tuple(want.shape)),),
                         (("dtype", DTypeLit(want.dtype)), ("target_memory", EnumLit("Mem", want.memory))),
                         span=s.span)
        if value is None:
            from ptoc.diagnostics import CompileError, Diagnostic

            raise CompileError([Diagnostic(
                "PTOC-E0740", f"{n!r} is first assigned inside the statement at line {s.span.line} and read after "
                "it; ptoc cannot tell what it holds when that code does not run", s.span,
                f"assign {n} a value before the statement at line {s.span.line}")])
        name = fresh_name(f"{n}_init", self.taken)
        self.defined.add(name)
        self.pre.append(AssignStmt(Var(name, span=s.span), value, None, span=s.span))
        return Var(name, span=s.span)

    def _loop_end(self, s, body_in: tuple[Stmt, ...], inner: dict[str, str], carried: list[str],
                  env: dict[str, str], future: set[str]) -> tuple[Stmt, ...]:
        """Convert the loop body (in `inner`) and end it with the yield of its own and carried values;
        bind the loop's results in `env`."""
        stmts, y = _split_yield(body_in)
        # read after the body: what the loop passes on, and what its next iteration reads
        after = set(future) | set(carried) | _seq_live_in(body_in, set())
        if y is not None:
            after |= _reads(y.values)
        body = self.block(stmts, inner, after)
        values = list(self.uses(y.values, inner)) if y is not None else []
        values += [Var(inner[n], span=s.span) for n in carried]
        targets = [self.bind(t, env) for t in (y.targets if y is not None else ())]
        for n in carried:
            targets.append(Var(self.define(n), span=s.span))
            env[n] = targets[-1].name
        if values or y is not None:
            ann = self.uses(y.annotation, inner) if y is not None and len(targets) == 1 else None
            body.append(YieldStmt(tuple(targets), tuple(values), ann, span=y.span if y is not None else s.span))
        return tuple(body)

    def for_stmt(self, s: ForStmt, env: dict[str, str], future: set[str]) -> ForStmt:
        args = self.uses(s.args, env)
        kwargs = self.uses(s.kwargs, env)
        init = list(self.uses(s.init_values, env))
        carried, escaping = self._carried(s, env, [s.var.name], future)
        init += [Var(env[n], span=s.span) for n in carried] + [self.escaping_init(n, s, env) for n in escaping]
        carried += escaping
        pending, self.pre = self.pre, []  # (what the escaping inits need goes before this loop)
        inner = dict(env)
        var = self.bind(s.var, inner)
        iter_args = [self.bind(a, inner) for a in s.iter_args]
        for n in carried:
            iter_args.append(Var(self.define(n), span=s.span))
            inner[n] = iter_args[-1].name
        body = self._loop_end(s, s.body, inner, carried, env, future)
        self.pre = pending
        return replace(s, var=var, args=args, kwargs=kwargs, iter_args=tuple(iter_args),
                       init_values=tuple(init), body=body)

    def while_stmt(self, s: WhileStmt, env: dict[str, str], future: set[str]) -> WhileStmt:
        kwargs = self.uses(s.kwargs, env)
        init = list(self.uses(s.init_values, env))
        carried, escaping = self._carried(s, env, [], future)
        init += [Var(env[n], span=s.span) for n in carried] + [self.escaping_init(n, s, env) for n in escaping]
        carried += escaping
        pending, self.pre = self.pre, []  # (what the escaping inits need goes before this loop)
        inner = dict(env)
        iter_args = [self.bind(a, inner) for a in s.iter_args]
        for n in carried:
            iter_args.append(Var(self.define(n), span=s.span))
            inner[n] = iter_args[-1].name
        cond = self.uses(s.cond, inner)
        body = self._loop_end(s, s.body, inner, carried, env, future)
        self.pre = pending
        return replace(s, iter_args=tuple(iter_args), init_values=tuple(init), cond=cond, body=body,
                       kwargs=kwargs)

    def if_stmt(self, s: IfStmt, env: dict[str, str], future: set[str]) -> IfStmt:
        cond = self.uses(s.cond, env)
        then_stmts, ty = _split_yield(s.then_body)
        else_stmts, ey = _split_yield(s.else_body)
        then_env, else_env = dict(env), dict(env)
        then_after = future | (_reads(ty.values) if ty is not None else set())
        else_after = future | (_reads(ey.values) if ey is not None else set())
        then_body = self.block(then_stmts, then_env, then_after)
        else_body = self.block(else_stmts, else_env, else_after)
        # a branch that returns never reaches the merge: it contributes nothing to it
        then_live = not _ends_in_return(s.then_body)
        else_live = not _ends_in_return(s.else_body)
        merged = []
        for n in sorted(set(then_env) | set(else_env)):
            before = env.get(n)
            t, e = then_env.get(n), else_env.get(n)
            if before is not None:
                if (then_live and t != before) or (else_live and e != before):
                    merged.append(n)
            elif n in future and ((then_live and t is not None) or (else_live and e is not None)):
                merged.append(n)  # (a new name no one reads after the if is not merged)
        own = ty.targets if ty is not None else (ey.targets if ey is not None else ())
        if not merged and not own:
            return replace(s, cond=cond, then_body=tuple(then_body), else_body=tuple(else_body))
        # a new name a live branch does not assign: that branch passes the value PyPTO would start from
        missing = {n: self.escaping_init(n, s, env) for n in merged if n not in env
                   and ((then_live and n not in then_env) or (else_live and n not in else_env))}
        targets = [Var(self.define(n), span=s.span) for n in merged]
        targets += [self.bind(t, env) for t in own]
        for n, t in zip(merged, targets):
            env[n] = t.name

        def close(body: list[Stmt], benv: dict[str, str], y: YieldStmt | None, live: bool) -> tuple[Stmt, ...]:
            if not live:
                return tuple(body)
            values = [Var(benv[n], span=s.span) if n in benv else missing[n] for n in merged]
            values += list(self.uses(y.values, benv)) if y is not None else []
            body = [b for b in body if b.__class__ is not PassStmt]
            ann = self.uses(y.annotation, benv) if y is not None and len(targets) == 1 else None
            body.append(YieldStmt(tuple(targets), tuple(values), ann, span=y.span if y is not None else s.span))
            return tuple(body)

        return replace(s, cond=cond, then_body=close(then_body, then_env, ty, then_live),
                       else_body=close(else_body, else_env, ey, else_live))

    # ---------------------------------------------------------------- functions
    def function(self, f: Function) -> Function:
        env = {p.name: p.name for p in f.params}
        return replace(f, body=tuple(self.block(f.body, env, set())))


def _is_ssa(f: Function) -> bool:
    """No name among `definitions(f)` twice (counted by name, without making a Var per parameter)."""
    out: list[Var] = []
    _body_defs(f.body, out, False)
    names = [p.name for p in f.params]
    names += [v.name for v in out]
    return len(set(names)) == len(names)


class ConvertToSSA(Pass):
    name = "ConvertToSSA"
    stage = "ssa"
    summary = "give every value its own name: renames, loop-carried iter_args, if merges"
    requires = frozenset({"structured"})
    produces = frozenset({"ssa"})
    accepts_non_ssa = True

    def run(self, program: Program, ctx: CompileContext) -> Program:
        # (`properties.escapes` is `_has_escapes` gathering the reads per loop nest, not per statement:
        # tests/passes/test_property_fast_paths.py compares both after every pass on every program)
        from ptoc.passes.properties import escapes

        funcs = tuple(f if _is_ssa(f) and not escapes(f) else _Converter(f, program, ctx).function(f)
                      for f in program.functions)
        if all(a is b for a, b in zip(funcs, program.functions)):
            return program
        return replace(program, functions=funcs)
