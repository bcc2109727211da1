"""Fast paths of the rewriting machinery and of the passes compared with their plain forms on every node
of the examples and corpus programs, as written and after every pass of the pipeline: the per-class
`replace` with `dataclasses.replace`, `var_names` (the names a statement reads, as ExpandMixedKernel and
ConvertToSSA ask) with the walk it replaces, `resolve_op`'s and `resolve_by_names`' look-up of a full op
name with the registry's `resolve`, Simplify's
answers about loops with constant bounds with what its ranges decide, and its quick scan `_Fold.inert` (which
says a value, a type or both at once have nothing to fold) with the folding traversal, with no name known
and with every name of the function known."""

from __future__ import annotations

import dataclasses

import pytest

from ptoc.analysis.simplify import _Fold, _Ranges, _Simplifier, _trip_condition
from ptoc.context import CompileContext
from ptoc.diagnostics import CompileError
from ptoc.driver import frontend
from ptoc.ir import dtypes
from ptoc.ir.nodes import AssignStmt, Call, ConstInt, ForStmt, Function, Node, Stmt, Var, YieldStmt
from ptoc.ir.visitor import Mutator, child_fields, plain_walk, replace, var_names
from ptoc.ops.registry import resolve
from ptoc.passes.common import expr_type, resolve_by_names, resolve_op
from ptoc.passes.ConvertToSSA import _reads
from ptoc.passes.manager import Instrument, run_pipeline

from bundled_programs import PROGRAMS, program_arch  # (tests/ is on sys.path: tests/conftest.py)

I = dtypes.INDEX
_SIMPLIFIER = _Simplifier(Function("k", (), (), ()), {})


def _binding_ids(s) -> set[int]:
    """The ids ExpandMixedKernel's `_uses` leaves out: the names the statement itself binds."""
    if isinstance(s, AssignStmt):
        return {id(s.target)}
    if isinstance(s, YieldStmt):
        return {id(t) for t in s.targets}
    if isinstance(s, ForStmt):
        return {id(s.var), *(id(a) for a in s.iter_args)}
    return set()


def _check(f: Function, env: dict) -> int:
    compared = 0
    known = {x.name: ConstInt(7, I) for x in plain_walk(f) if isinstance(x, Var)}
    folds = [_Fold({}, _Ranges(env)), _Fold(known, _Ranges(env))]
    for n in plain_walk(f):
        if isinstance(n, AssignStmt):  # Simplify's quick scan: inert only where the folding changes nothing
            for part in (n.value, n.annotation, (n.value, n.annotation)):
                for fold in folds:
                    if fold.inert(part):
                        assert fold.mutate(part) is part, (f.name, n.target.name)
        # every node rebuilt with all its fields given, and with none
        fields = {x.name: getattr(n, x.name) for x in dataclasses.fields(n)}
        for changes in (fields, {}):
            got, want = replace(n, **changes), dataclasses.replace(n, **changes)
            assert got.__class__ is want.__class__ and got == want and got.span == want.span
            assert all(getattr(got, k) is getattr(want, k) for k in fields)
        if isinstance(n, ForStmt) and all(isinstance(x, ConstInt) for x in (n.start, n.stop, n.step)):
            for q in (0, 1, 2):  # Simplify's questions about a loop with constant bounds
                want = _Ranges({}).decide(_trip_condition(n.start, n.stop, n.step, q))
                assert _SIMPLIFIER._trip(n.start, n.stop, n.step, q) == bool(want)
        if isinstance(n, Call):
            full = resolve(n, [expr_type(a, env) for a in n.args])[0] if n.kind == "op" else None
            assert resolve_op(n, env) is full
            if n.kind == "op":  # (the planners' form: only the arguments that are names typed)
                by_names = [env.get(a.name) if isinstance(a, Var) else None for a in n.args]
                assert resolve_by_names(n, env) is resolve(n, by_names)[0]
        if n is not f and isinstance(n, Node) and not isinstance(n, Var):
            skip = _binding_ids(n)
            want_names = {x.name for x in plain_walk(n) if isinstance(x, Var) and id(x) not in skip}
            assert var_names((n,), skip) == want_names
            assert var_names((n,)) == {x.name for x in plain_walk(n) if isinstance(x, Var)}
            if isinstance(n, Stmt):  # several roots at once, None among them, as ConvertToSSA asks
                parts = tuple(getattr(n, name) for name in child_fields(n.__class__))
                assert _reads(*parts, None) == {x.name for x in plain_walk(n) if isinstance(x, Var)}
        compared += 1
    return compared


class _EveryPass(Instrument):
    def __init__(self):
        self.nodes = 0
        self.seen: set[int] = set()

    def after_pass(self, index, p, program, seconds):
        for f in program.functions:
            if id(f) not in self.seen:
                self.seen.add(id(f))
                self.nodes += _check(f, {q.name: q.type for q in f.params})


@pytest.mark.parametrize("path", PROGRAMS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_fast_paths_agree_with_the_plain_forms_after_every_pass(path):
    ctx = CompileContext(arch=program_arch(path))
    try:
        program = frontend(path.read_text(), str(path), ctx)
    except CompileError:
        pytest.skip("not a valid program for this target")
    seen = _EveryPass()
    for f in program.functions:
        seen.nodes += _check(f, {q.name: q.type for q in f.params})
    try:
        run_pipeline(program, ctx, instruments=[seen])
    except CompileError:
        pass  # the functions of the passes that ran were compared
    assert seen.nodes > 0


def test_replace_refuses_a_name_that_is_no_field_as_dataclasses_replace_does():
    v = Var("a")
    with pytest.raises(TypeError):
        dataclasses.replace(v, nom="b")
    with pytest.raises(TypeError):
        replace(v, nom="b")
    assert replace(v, name="b") == Var("b")


def test_simplify_loop_questions_match_pythons_range():
    sim = _Simplifier(Function("k", (), (), ()), {})
    for a in range(-3, 4):
        for b in range(-3, 6):
            for c in range(-2, 5):
                start, stop, step = (ConstInt(v, I) for v in (a, b, c))
                assert sim._trip(start, stop, step, 0) == (c >= 1)
                if c >= 1:
                    n = len(range(a, b, c))
                    assert sim._trip(start, stop, step, 1) == (n == 0)
                    assert sim._trip(start, stop, step, 2) == (n == 1)
                    # the general form (names with known ranges are not constants) gives the same
                    x = Var("x")
                    sim.ranges.bounds["x"] = (a, a)
                    for q in (1, 2):
                        got = sim.ranges.decide(_trip_condition(x, stop, step, q))
                        assert got is (n == 0 if q == 1 else n == 1)


class _StampByMutator(Mutator):
    """StampTfreeSplit's rewrite as a generic Mutator (what its statement walk replaces)."""

    def __init__(self):
        from ptoc.passes.StampTfreeSplit import _Stamp

        self.stamp = _Stamp()

    def mutate_AssignStmt(self, s):
        return self.stamp.mutate_AssignStmt(s)

    def mutate_EvalStmt(self, s):
        return self.stamp.mutate_EvalStmt(s)


def _outcome(fn, arg):
    try:
        return fn(arg), None
    except CompileError as e:
        return None, [(d.code, d.message) for d in e.diagnostics]


def _same_statements(got: tuple, want: tuple, old: tuple) -> None:
    """Equal statements; where the reference kept a statement of `old` (the very object), so did `got`."""
    assert got == want and len(got) == len(want) and (got is old) == (want is old)
    for a, b, o in zip(got, want, old):
        assert (a is o) == (b is o)
        for body in ("body", "then_body", "else_body"):
            if hasattr(o, body):
                _same_statements(getattr(a, body), getattr(b, body), getattr(o, body))


class _BeforeStamp(Instrument):
    def __init__(self):
        self.functions = 0
        self.stamped = 0

    def before_pass(self, index, p, program):
        from ptoc.passes.StampTfreeSplit import _Stamp

        if p.name != "StampTfreeSplit":
            return
        for f in program.functions:
            got, got_err = _outcome(lambda body: _Stamp().block(body), f.body)
            want, want_err = _outcome(lambda body: _StampByMutator().mutate(body), f.body)
            assert got_err == want_err
            if want is not None:
                _same_statements(got, want, f.body)
                self.functions += 1
                self.stamped += want is not f.body


def _through_every_program(instrument_class) -> list:
    """An `instrument_class()` through the pipeline of each example and corpus program the front end
    accepts (up to a pass's error, if any); the instruments."""
    seen = []
    for path in PROGRAMS:
        ctx = CompileContext(arch=program_arch(path))
        try:
            program = frontend(path.read_text(), str(path), ctx)
        except CompileError:
            continue
        seen.append(instrument_class())
        try:
            run_pipeline(program, ctx, instruments=[seen[-1]])
        except CompileError:
            pass
    return seen


def test_stamp_tfree_split_walks_statements_as_the_generic_mutator_did():
    seen = _through_every_program(_BeforeStamp)
    assert sum(s.functions for s in seen) > 50 and sum(s.stamped for s in seen) > 5


class _BeforeStrides(Instrument):
    def __init__(self):
        self.functions = 0

    def before_pass(self, index, p, program):
        from ptoc.passes.MaterializeTensorStrides import _Strides

        class _StridesAskingAll(_Strides):
            leaves = frozenset()

        if p.name != "MaterializeTensorStrides":
            return
        from ptoc.passes.properties import KERNEL_TYPES

        for f in program.functions:
            if f.func_type not in (*KERNEL_TYPES, "Opaque"):  # (the functions the pass rewrites)
                continue
            got, want = _Strides().mutate(f), _StridesAskingAll().mutate(f)
            assert got == want and (got is f) == (want is f)
            _same_statements(got.body, want.body, f.body)
            self.functions += got is not f


def test_materialize_tensor_strides_skipping_its_leaves_builds_what_asking_about_them_builds():
    assert sum(s.functions for s in _through_every_program(_BeforeStrides)) > 20
