"""The memory passes' fast paths against the general forms they stand for, on real programs (the examples
and the corpus): each fast path is wrapped to compute the general answer too, and the two must agree."""

from pathlib import Path

from ptoc.context import CompileContext
from ptoc.diagnostics import CompileError
from ptoc.driver import frontend, lower

ROOT = Path(__file__).resolve().parents[2]
PROGRAMS = sorted((ROOT / "examples").glob("*.ir")) + sorted((ROOT / "tests" / "corpus" / "raw").glob("*.ir"))


def _lower_all() -> int:
    """Lower every program (a program with user errors stops where they are found); how many lowered."""
    done = 0
    for path in PROGRAMS:
        ctx = CompileContext()
        try:
            lower(frontend(path.read_text(), str(path), ctx), ctx)
            done += 1
        except CompileError:
            pass
    return done


def test_address_rewrite_of_the_top_level_matches_the_full_walk(monkeypatch):
    import ptoc.passes.AllocateMemoryAddr as mod

    fast = mod._with_addrs_top
    seen = []

    def both(body, buffers, bases):
        out = fast(body, buffers, bases)
        assert out == mod._with_addrs(body, buffers, bases)
        seen.append(len(buffers) + len(bases))
        return out

    monkeypatch.setattr(mod, "_with_addrs_top", both)
    assert _lower_all() > 10
    assert len(seen) > 20 and sum(seen) > 100  # many kernels, most with several buffers


def test_annotation_only_rebind_matches_the_full_rebind(monkeypatch):
    import ptoc.passes.MemoryReuse as mod
    from ptoc.ir.nodes import Call
    from ptoc.ir.verifier import NodeIndex

    fast = mod._rebind_annotations
    taken = {"plain": 0, "tagged": 0}

    def both(f, remap, unused):
        out = fast(f, remap, unused)
        if out is not None:
            assert out == mod._Rebind(remap, unused).function(f)
            tagged = any(c.kwarg("attrs") is not None for c in NodeIndex.get(f).of(Call))
            taken["tagged" if tagged else "plain"] += 1
        return out

    monkeypatch.setattr(mod, "_rebind_annotations", both)
    assert _lower_all() > 10
    # both kinds of kernel took the annotation-only path: with and without pipeline-tagged calls
    assert taken["plain"] > 10 and taken["tagged"] > 0, taken


def test_name_counts_and_reads_match_the_generic_walk(monkeypatch):
    import ptoc.passes.MemoryReuse as mod
    from ptoc.ir.nodes import Var
    from ptoc.ir.visitor import walk

    count, names = mod._count_named, mod._names
    seen = {"count": 0, "names": 0}

    def count_both(node, wanted):
        n = count(node, wanted)
        assert n == sum(1 for x in walk(node) if isinstance(x, Var) and x.name in wanted)
        seen["count"] += 1
        return n

    def names_both(e, out):
        mine: list[str] = []
        names(e, mine)
        if e is not None:
            assert sorted(mine) == sorted(x.name for x in walk(e) if isinstance(x, Var))
            seen["names"] += 1
        out.extend(mine)

    monkeypatch.setattr(mod, "_count_named", count_both)
    monkeypatch.setattr(mod, "_names", names_both)
    assert _lower_all() > 10
    assert seen["count"] > 100 and seen["names"] > 1000, seen


def test_binding_one_tile_matches_the_general_binding(monkeypatch):
    import ptoc.passes.InitMemRef as mod
    from ptoc.ir.nodes import TileType

    fast = mod._Planner.bind
    seen = {"tile": 0, "other": 0}

    def both(self, name, ann):
        kept = self._bound
        self._bound = {}  # the general form's own answer, not one remembered from the fast path
        general = self.bind_general(name, ann)
        self._bound = kept
        out = fast(self, name, ann)
        assert out == general
        assert (out is ann) == (general is ann)  # unchanged where the general form leaves it
        seen["tile" if isinstance(self.env.get(name), TileType) else "other"] += 1
        return out

    monkeypatch.setattr(mod._Planner, "bind", both)
    assert _lower_all() > 10
    assert seen["tile"] > 500 and seen["other"] > 100, seen


def _allocs_by_recursion(body) -> list:
    """The allocations of `body` found the plain way: each statement, then the bodies nested in it."""
    from ptoc.ir.nodes import AssignStmt, Call, ForStmt, IfStmt, ScopeStmt, WhileStmt

    out = []
    for s in body:
        if isinstance(s, AssignStmt) and isinstance(s.value, Call) and s.value.kind == "op" \
                and s.value.op == "tile.alloc":
            out.append(s)
        if isinstance(s, (ForStmt, WhileStmt, ScopeStmt)):
            out += _allocs_by_recursion(s.body)
        elif isinstance(s, IfStmt):
            out += _allocs_by_recursion(s.then_body) + _allocs_by_recursion(s.else_body)
    return out


def _compare_with_recursion(monkeypatch, name: str, modules) -> None:
    """Lower every program with each module's `name` (an allocation search) checked against the plain
    recursion on every body it is asked about."""
    import ptoc.passes.common as common

    fast = getattr(common, name)
    seen = {"bodies": 0, "allocs": 0}

    def both(body):
        mine = list(fast(body))
        want = _allocs_by_recursion(body)
        assert len(mine) == len(want) and all(a is b for a, b in zip(mine, want))
        seen["bodies"] += 1
        seen["allocs"] += len(mine)
        return iter(mine)

    for mod in modules:
        if hasattr(mod, name):
            monkeypatch.setattr(mod, name, both)
    assert _lower_all() > 10
    assert seen["bodies"] > 100 and seen["allocs"] > 500, seen


def test_allocation_list_matches_the_recursive_search(monkeypatch):
    import ptoc.passes.AllocateMemoryAddr as addr
    import ptoc.passes.common as common
    import ptoc.passes.MaterializeSemanticAliases as aliases
    import ptoc.passes.MemoryReuse as reuse

    _compare_with_recursion(monkeypatch, "allocs", (common, reuse, addr, aliases))


def test_allocation_list_keeps_program_order_in_nested_bodies():
    from ptoc.ir.dtypes import INDEX
    from ptoc.ir.nodes import AssignStmt, Call, ConstBool, ConstInt, EnumLit, ForStmt, IfStmt, PtrType, ScopeStmt, Var
    from ptoc.passes.common import allocs, iter_allocs

    def alloc(name):
        return AssignStmt(Var(name), Call("tile.alloc", (EnumLit("Mem", "Vec"), ConstInt(64, INDEX))), PtrType())

    other = AssignStmt(Var("x"), Call("tile.full", ()), None)
    loop_body = (alloc("b"), other, IfStmt(ConstBool(True), (alloc("c"),), (alloc("d"),)))
    body = (alloc("a"), ForStmt("range", Var("i"), (ConstInt(2, INDEX),), loop_body),
            ScopeStmt("incore", (), (alloc("e"),)), alloc("f"))
    got = [s.target.name for s in allocs(body)]
    assert got == ["a", "b", "c", "d", "e", "f"]
    assert got == [s.target.name for s in _allocs_by_recursion(body)]
    assert got == [s.target.name for s in iter_allocs(body)]


def test_flow_reads_of_assignments_match_the_generic_walk(monkeypatch):
    """Flow records the names an assignment's value reads (a call's arguments taken apart inline): per
    statement, every name as often as a walk of the value meets it, each at the statement's own site."""
    from collections import Counter

    import ptoc.analysis.flow as flow
    from ptoc.ir.nodes import AssignStmt, Var
    from ptoc.ir.visitor import walk

    init = flow.Flow.__init__
    seen = {"flows": 0, "assigns": 0}

    def checked(self, f):
        init(self, f)
        got: dict[float, Counter] = {}
        for name, sites in self.uses.items():
            for site in sites:
                got.setdefault(site.pos, Counter())[name] += 1
        for at, s in self.stmt_at.items():
            site = self.site_at[at]
            assert type(site) is flow.Site and site == flow.Site(*site) and site.pos == self.stmt_pos[at]
            assert site.line == s.span.line
            if isinstance(s, AssignStmt):
                want = Counter(n.name for n in walk(s.value) if isinstance(n, Var))
                assert got.get(site.pos, Counter()) == want, (f.name, s)
                seen["assigns"] += 1
        seen["flows"] += 1

    monkeypatch.setattr(flow.Flow, "__init__", checked)
    assert _lower_all() > 10
    assert seen["flows"] > 50 and seen["assigns"] > 1000, seen


def test_lazy_allocation_search_matches_the_recursive_search(monkeypatch):
    """`iter_allocs`, which its callers may stop early, yields what the plain recursion finds, in order."""
    import ptoc.passes.AllocateMemoryAddr as addr
    import ptoc.passes.MaterializeSemanticAliases as aliases

    _compare_with_recursion(monkeypatch, "iter_allocs", (addr, aliases))
