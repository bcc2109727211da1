"""`NodeIndex` is built by `group_by_class`, and `walk` runs, on traversals generated from the node classes'
fields. The oracle is the plain form, `plain_walk` (the traversal written out), and for the index every
node it yields under a function appended to its class's list in the order yielded. They must agree, node
for node (the same objects in the same order), on the examples and corpus programs as written and after
every pass of the pipeline, and on fields holding what their annotations do not say (the traversals must
not depend on them)."""

from __future__ import annotations

from collections import Counter

import pytest

from ptoc.context import CompileContext
from ptoc.diagnostics import CompileError
from ptoc.driver import frontend
from ptoc.ir import dtypes
from ptoc.ir.nodes import (
    AssignStmt,
    BinOp,
    Call,
    ConstInt,
    EvalStmt,
    Expr,
    Function,
    MemRef,
    Param,
    Stmt,
    StrLit,
    TensorType,
    TileType,
    TupleType,
    Type,
    Var,
)
from ptoc.ir.verifier import NodeIndex, VerifyCache
from ptoc.ir.visitor import group_by_class, plain_walk, walk
from ptoc.passes.manager import Instrument, run_pipeline

from bundled_programs import PROGRAMS, program_arch  # (tests/ is on sys.path: tests/conftest.py)

I = dtypes.INDEX


def _plain(root) -> dict[type, list]:
    groups: dict[type, list] = {}
    for n in plain_walk(root):
        groups.setdefault(n.__class__, []).append(n)
    return groups


def _same(got: dict[type, list], want: dict[type, list]) -> None:
    assert set(got) == set(want)
    for cls, nodes in want.items():
        assert len(got[cls]) == len(nodes), cls.__name__
        assert all(a is b for a, b in zip(got[cls], nodes)), cls.__name__


def _same_walk(root) -> None:
    got, want = list(walk(root)), list(plain_walk(root))
    assert len(got) == len(want) and all(a is b for a, b in zip(got, want))


def _same_index(index: NodeIndex, f: Function, want: dict[type, list]) -> None:
    for cls, nodes in want.items():
        under = nodes[1:] if cls is Function else nodes  # the index leaves out the function itself
        assert len(index.of(cls)) == len(under) and all(a is b for a, b in zip(index.of(cls), under))
    for cls in (Expr, Stmt, Type, TensorType):  # classes with subclasses: theirs too, each as often
        under = [n for n in plain_walk(f) if isinstance(n, cls)]
        assert Counter(map(id, index.of(cls))) == Counter(map(id, under))


def _check(f: Function) -> int:
    """Compares the walks and the index of `f` with the obvious forms; the number of nodes walked."""
    _same_walk(f)
    for s in f.body:
        _same_walk(s)
    want = _plain(f)
    _same(group_by_class(f), want)
    _same_index(NodeIndex(f), f, want)
    return sum(len(x) for x in want.values())


class _EveryPass(Instrument):
    """After each pass, each new function's walk and index compared with the obvious forms: the index
    made alone and the one the pipeline's cache gives (which the passes read)."""

    def __init__(self, cache: VerifyCache):
        self.nodes = 0
        self.cache = cache
        self.last: dict[str, Function] = {}  # function name -> the version compared last

    def after_pass(self, index, p, program, seconds):
        for f in program.functions:
            if self.last.get(f.name) is not f:
                self.last[f.name] = f
                self.nodes += _check(f)
                _same_index(self.cache.node_index(f), f, _plain(f))


@pytest.mark.parametrize("path", PROGRAMS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_the_index_groups_what_walk_yields_after_every_pass(path):
    ctx = CompileContext(arch=program_arch(path))
    try:
        program = frontend(path.read_text(), str(path), ctx)
    except CompileError:
        pytest.skip("not a valid program for this target")
    for f in program.functions:
        _check(f)
    seen = _run(program, ctx)
    assert seen.nodes > 0


def _run(program, ctx) -> _EveryPass:
    cache = VerifyCache(ctx)
    seen = _EveryPass(cache)
    try:
        run_pipeline(program, ctx, instruments=[seen], cache=cache)
    except CompileError:
        pass  # the functions of the passes that ran were compared
    return seen


def test_a_field_holding_what_its_annotation_does_not_say_is_walked_as_walk_walks_it():
    a, b = Var("a"), Var("b")
    t = TileType((ConstInt(16, I), Var("n")), dtypes.FP32, MemRef(StrLit("m"), ConstInt(0, I), ConstInt(64, I)))
    odd = [
        # a tuple where one node is declared, nested tuples and values that are no node in tuple fields
        BinOp("+", (a, (b, ConstInt(1, I))), "not a node"),  # type: ignore[arg-type]
        Call("tile.add", (a, ("x", (b,)), 3, None), (("rhs", t), ("k", "v"), (a, b))),  # type: ignore[arg-type]
        AssignStmt(a, Call("f", (b,)), None),
        AssignStmt(b, ConstInt(2, I), TupleType((t, t))),
        TensorType((), dtypes.FP32, None, None),
        TileType(((ConstInt(1, I),),), dtypes.FP32, memref=(a, b)),  # type: ignore[arg-type]
        MemRef(a, None, [b], slot=(ConstInt(0, I),)),  # type: ignore[arg-type]
        Param("p", t),
    ]
    for node in odd:
        _same(group_by_class(node), _plain(node))
        _same_walk(node)
    f = Function("k", (Param("x", t),), (t,), tuple(EvalStmt(n) for n in odd[:2]) + tuple(odd[2:4]))
    _check(f)
    _same(group_by_class(f), _plain(f))


def test_the_leading_literals_and_names_of_a_first_field_keep_their_place_among_their_class():
    """The grouping takes the integer literals and names at the head of a node's first field without the
    stack (`visitor._traversal`): those two common classes must have no fields holding nodes, and what
    follows the first other value, in that field and the later ones, keeps walk order."""
    from ptoc.ir import visitor

    assert [c.__name__ for c in (ConstInt, Var)] == list(visitor._COMMON_CLASSES[:2])
    assert not visitor.child_fields(ConstInt) and not visitor.child_fields(Var)
    a, b, c = Var("a"), Var("b"), Var("c")
    one, two, three = ConstInt(1, I), ConstInt(2, I), ConstInt(3, I)
    inner = BinOp("+", ConstInt(4, I), Var("d"))
    t = TileType((a, one, inner, ConstInt(5, I), b), dtypes.FP32, MemRef(Var("m"), two, three))
    cases = [
        Call("f", (a, one, inner, c, two), (("k", three),)),  # leaves, a subtree, leaves again
        Call("f", ((a, one), b, two)),  # a nested tuple first  # type: ignore[arg-type]
        Call("f", (one, "text", None, a, (b,), two)),  # no nodes among them  # type: ignore[arg-type]
        Call("f", ()),
        Call("f", a),  # one node where a tuple is declared  # type: ignore[arg-type]
        Call("f", None),  # type: ignore[arg-type]
        t,
        TileType((), dtypes.FP32, MemRef(inner, one, a)),
        AssignStmt(one, inner, t),  # type: ignore[arg-type]
        AssignStmt(None, Call("f", (a, one)), None),  # type: ignore[arg-type]
        AssignStmt((a, one), inner, None),  # type: ignore[arg-type]
        BinOp("*", inner, BinOp("-", a, one)),
        # keyword pairs: values pushed without the pair, names dropped; odd pairs walked as walk walks them
        Call("f", (inner,), (("x", a), ("y", (one, b)), ("z", "w"), (), (c,), a, None, ("k", two, three))),  # type: ignore[arg-type]
        Call("f", (), ((one, "x"), ("y", inner), ((a,), ("q", b)))),  # type: ignore[arg-type]
    ]
    for node in cases:
        _same(group_by_class(node), _plain(node))
        _same_walk(node)
    f = Function("k", (Param("x", t),), (t,), tuple(EvalStmt(n) for n in cases[:6]) + (cases[8],))
    _check(f)


def test_the_cache_shares_an_index_between_functions_with_the_identical_parts_only():
    from dataclasses import replace

    from ptoc.ir.verifier import VerifyCache

    t = TileType((ConstInt(16, I), ConstInt(16, I)), dtypes.FP32)
    f = Function("k", (Param("x", t),), (t,), (AssignStmt(Var("a"), Call("tile.exp", (Var("x"),)), t),))
    cache = VerifyCache()
    index = cache.node_index(f)
    assert cache.node_index(f) is index
    assert cache.node_index(replace(f, func_type="InCore")) is index  # (kind and flags: not walked)
    changed = [replace(f, params=(Param("x", t),)), replace(f, returns=(t, t)),
               replace(f, body=f.body + (EvalStmt(Var("a")),)), replace(f, decorator_kwargs=(("level", Var("a")),)),
               replace(f, attrs=((StrLit("k"), Var("a")),))]
    for g in changed:
        other = cache.node_index(g)
        assert other is not index and cache.node_index(g) is other
        for cls, nodes in _plain(g).items():
            under = nodes[1:] if cls is Function else nodes
            assert len(other.of(cls)) == len(under) and all(a is b for a, b in zip(other.of(cls), under))

