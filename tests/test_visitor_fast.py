"""The generic Mutator's fast paths (per-class plans, kept on each mutator class; values it leaves alone
without a call; the per-class replace) behave as the plain traversal and `dataclasses.replace` do."""

from __future__ import annotations

import dataclasses

from ptoc.diagnostics import Span
from ptoc.ir import dtypes
from ptoc.ir.nodes import BinOp, Call, ConstInt, EvalStmt, ForStmt, Function, Program, TileType, Var
from ptoc.ir.visitor import Mutator, node_replacer, rebuild_bodies

I = dtypes.INDEX
AT = Span("k.ir", 3, 5, 3, 9)


def _call() -> Call:
    return Call("tile.add", (Var("a"), ConstInt(2, I)), (("rhs", Var("b")), ("mode", ConstInt(1, I))), span=AT)


def test_node_replacer_builds_what_dataclasses_replace_builds():
    t = TileType((ConstInt(16, I), Var("n")), dtypes.FP32, None, "Vec", None, span=AT)
    for node, changes in [(BinOp("+", Var("x"), ConstInt(1, I), span=AT), {"rhs": Var("y")}),
                          (t, {"memory": "Mat", "shape": (ConstInt(8, I), ConstInt(8, I))}),
                          (_call(), {"args": (), "kind": "func"}),
                          (t, {"span": Span("other.ir", 1, 1, 1, 2)})]:
        got = node_replacer(node.__class__)(node, changes)
        want = dataclasses.replace(node, **changes)
        assert got == want and got.span == want.span and got is not node
        assert [getattr(got, f.name) for f in dataclasses.fields(got)] == \
            [getattr(want, f.name) for f in dataclasses.fields(want)]


def test_node_replacer_does_not_carry_attributes_kept_beside_the_fields():
    f = Function("k", (), (), (EvalStmt(_call()),))
    p = Program("p", (f,))
    assert p.function("k") is f  # builds the name table kept in the instance's __dict__
    q = node_replacer(Program)(p, {"name": "q"})
    assert "_by_name" in p.__dict__ and "_by_name" not in q.__dict__ and q.function("k") is f


class _Rename(Mutator):
    def mutate_Var(self, v: Var) -> Var:
        return Var(v.name + "_1", span=v.span) if v.name == "b" else v


def test_a_hook_reaches_names_inside_keyword_pairs_and_unchanged_parts_stay_the_same_objects():
    c = _call()
    out = _Rename().mutate(c)
    assert out == Call("tile.add", (Var("a"), ConstInt(2, I)), (("rhs", Var("b_1")), ("mode", ConstInt(1, I))))
    assert out.span == AT and out.args is c.args and out.kwargs[1] is c.kwargs[1]
    untouched = Call("tile.exp", (Var("a"),))
    assert _Rename().mutate(untouched) is untouched
    body = (EvalStmt(untouched), EvalStmt(c))
    new_body = _Rename().mutate(body)
    assert new_body[0] is body[0] and new_body[1] != body[1]


class _Seeing(Mutator):
    """Overrides `mutate`: it must still be asked about every value, leaves and names included."""

    def __init__(self):
        self.seen: list = []

    def mutate(self, node):
        if not isinstance(node, tuple):
            self.seen.append(node.name if isinstance(node, Var) else
                             node.value if isinstance(node, ConstInt) else type(node).__name__ if
                             hasattr(node, "span") else node)
        return super().mutate(node)


def test_a_mutator_that_overrides_mutate_sees_every_value():
    m = _Seeing()
    assert m.mutate(_call()) is not None
    # the call, its arguments, then each keyword pair's name and value (the plain traversal's order)
    assert m.seen == ["Call", "a", 2, "rhs", "b", "mode", 1]


def test_rebuild_bodies_replaces_only_what_changed():
    loop = ForStmt("range", Var("i"), (ConstInt(4, I),), (EvalStmt(_call()),), span=AT)
    assert rebuild_bodies(loop, lambda b: b) is loop
    new = rebuild_bodies(loop, lambda b: ())
    assert new == dataclasses.replace(loop, body=()) and new.span == AT and new.var is loop.var


class _One(Mutator):
    def mutate_Var(self, v: Var) -> Var:
        return Var(v.name + "_1", span=v.span)


class _Two(_One):  # its own hook for names, one for integers; the parent's plans must not serve it
    def mutate_Var(self, v: Var) -> Var:
        return Var(v.name + "_2", span=v.span)

    def mutate_ConstInt(self, c: ConstInt) -> ConstInt:
        return ConstInt(c.value + 1, c.dtype, span=c.span)


class _Three(_Two):  # inherits both hooks
    pass


def test_each_mutator_class_uses_its_own_hooks_whichever_ran_first():
    e = BinOp("+", Var("x"), ConstInt(4, I))
    for order in ((_One, _Two, _Three), (_Three, _Two, _One), (_Two, _One, _Three)):
        got = {cls: cls().mutate(e) for cls in order}
        assert got[_One] == BinOp("+", Var("x_1"), ConstInt(4, I))
        assert got[_Two] == BinOp("+", Var("x_2"), ConstInt(5, I))
        assert got[_Three] == got[_Two]
        assert got[_One].rhs is e.rhs  # (no hook for integers: the very object)
    # a class with no hooks leaves everything as it is, the very objects
    assert Mutator().mutate(e) is e


class _SeeingAllButLeaves(_Seeing):
    leaves = frozenset({ConstInt, str})


def test_an_overriding_mutator_is_not_asked_about_its_leaves_and_builds_the_same():
    plain, skipping = _Seeing(), _SeeingAllButLeaves()
    c = _call()
    assert plain.mutate(c) is c and skipping.mutate(c) is c
    assert skipping.seen == ["Call", "a", "b"]  # (the names "rhs", "mode" and the integers skipped)
    assert plain.seen == ["Call", "a", 2, "rhs", "b", "mode", 1]
