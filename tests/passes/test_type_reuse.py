"""Types the pipeline inferred are reused, never stale: the verifier cache remembers the check of each
assignment of a function for as long as the function is in the program (however many passes leave it
alone), a changed statement and everything reading it is inferred again, and the program a pipeline
returns carries that run's types to the emitters and the task manifest (`keep_types`)."""

from dataclasses import replace

from ptoc.context import CompileContext
from ptoc.frontend.parser import parse_program
from ptoc.ir import verifier
from ptoc.ir.nodes import TileType
from ptoc.passes.manager import Pass, run_pipeline

KERNEL = """
import pypto.language as pl

@pl.program
class one:
    @pl.function(type=pl.FunctionType.InCore)
    def k(self, a: pl.Tensor[[16, 16], pl.FP32], out: pl.Out[pl.Tensor[[16, 16], pl.FP32]]) -> pl.Tensor[[16, 16], pl.FP32]:
        t: pl.Tile[[ROWS, 16], pl.FP32, pl.Mem.Vec] = pl.tile.load(a, [0, 0], [ROWS, 16], [ROWS, 16], target_memory=pl.Mem.Vec)
        u = pl.tile.add(t, t)
        r: pl.Tensor[[16, 16], pl.FP32] = pl.tile.store(u, [0, 0], out)
        return r
"""


def _program(rows: int):
    return parse_program(KERNEL.replace("ROWS", str(rows)), "one.ir")


SEEN: list[dict] = []  # the value types of k each _AsksTypes pass saw, in order
TYPED: list[str] = []  # the operators the operator typer was asked about, in order


class _AsksTypes(Pass):
    name = "AsksTypes"
    stage = "tile"
    summary = "test-only: records the value types of k, changes nothing"

    def run(self, program, ctx):
        SEEN.append(self.types(program, ctx)["k"])
        TYPED.append("|")  # a mark between the passes' questions
        return program


class _Unchanged(Pass):
    name = "Unchanged"
    stage = "tile"
    summary = "test-only: returns the program as it is"

    def run(self, program, ctx):
        return program


class _LoadsHalf(Pass):
    name = "LoadsHalf"
    stage = "tile"
    summary = "test-only: the load of t reads 8 rows instead of 16; the statements after it stay the same objects"

    def run(self, program, ctx):
        half = _program(8).function("k").body[0]

        def change(f):
            return replace(f, body=(half,) + f.body[1:])

        return replace(program, functions=tuple(change(f) if f.name == "k" else f for f in program.functions))


class _CopiesLoad(Pass):
    name = "CopiesLoad"
    stage = "tile"
    summary = "test-only: the first statement of k becomes an equal copy (a new object, the same parts)"

    def run(self, program, ctx):
        def change(f):
            return replace(f, body=(replace(f.body[0]),) + f.body[1:])

        return replace(program, functions=tuple(change(f) if f.name == "k" else f for f in program.functions))


def _counting_typer(monkeypatch):
    """Record the operator of every question the verifier's operator typer answers (not the cache)."""
    typer = verifier._default_op_typer()

    def ask(call, args, kwargs, ctx):
        TYPED.append(call.op)
        return typer(call, args, kwargs, ctx)

    monkeypatch.setattr(verifier, "_default_op_typer", lambda: ask)  # one typer, as the real one is


def test_a_changed_assignment_gives_new_types_to_what_reads_it():
    # u = tile.add(t, t) is the very same statement object before and after LoadsHalf, but t now has 8 rows:
    # the type remembered for u must not be given again
    SEEN.clear()
    run_pipeline(_program(16), CompileContext(), passes=[_AsksTypes, _Unchanged, _LoadsHalf, _Unchanged, _AsksTypes],
                 check_once=True)
    before, after = SEEN
    assert isinstance(before["u"], TileType) and isinstance(after["u"], TileType)
    assert [d.value for d in before["u"].shape] == [16, 16]
    assert [d.value for d in after["u"].shape] == [8, 16]  # an elementwise add of two 8x16 tiles
    assert [d.value for d in after["t"].shape] == [8, 16]


def test_the_same_program_checked_fresh_agrees_with_the_reused_types():
    SEEN.clear()
    run_pipeline(_program(16), CompileContext(), passes=[_AsksTypes, _LoadsHalf, _AsksTypes], check_once=True)
    fresh = verifier.function_types(_program(8), CompileContext())["k"]
    assert SEEN[1] == fresh


def test_unchanged_statements_of_a_partly_changed_function_are_not_typed_again(monkeypatch):
    # between the two questions, k changes in its first statement only (an equal copy: its call and the types
    # it reads are the same objects), after several passes that leave it alone: the add and the store are
    # not asked about again, nor is the load (its call and argument types are the very same)
    _counting_typer(monkeypatch)
    TYPED.clear()
    SEEN.clear()
    run_pipeline(_program(16), CompileContext(),
                 passes=[_AsksTypes, _Unchanged, _Unchanged, _Unchanged, _CopiesLoad, _Unchanged, _Unchanged,
                         _AsksTypes], check_once=True)
    first = TYPED.index("|")
    assert {"tile.load", "tile.add", "tile.store"} <= set(TYPED[:first])  # the first question typed them
    assert TYPED[first + 1:] == ["|"]  # the second asked the typer nothing
    assert SEEN[0] == SEEN[1]


def test_a_lowered_program_carries_its_types_to_later_questions(monkeypatch):
    from ptoc.driver import frontend, lower

    ctx = CompileContext()
    prog = frontend(KERNEL.replace("ROWS", "16"), "one.ir", ctx)
    low = lower(prog, ctx).program
    checked: list[str] = []
    real = verifier.Verifier.function

    def counting(self, f):
        checked.append(f.name)
        return real(self, f)

    monkeypatch.setattr(verifier.Verifier, "function", counting)
    kept = verifier.function_types(low, ctx)
    assert checked == []  # the pipeline run's types, not inferred again
    monkeypatch.setattr(verifier.Verifier, "function", real)
    again = replace(low, functions=tuple(low.functions))  # a new program: it carries nothing
    assert verifier.function_types(again, ctx) == kept  # what inferring afresh gives
    monkeypatch.setattr(verifier.Verifier, "function", counting)
    verifier.function_types(again, CompileContext())  # another context: the run's types are not its answers
    assert checked == ["k"]


class _AsksWithoutTheCache(Pass):
    name = "AsksWithoutTheCache"
    stage = "tile"
    summary = "test-only: a helper asks function_types without handing on the run's cache"

    def run(self, program, ctx):
        SEEN.append(verifier.function_types(program, ctx)["k"])
        return program


def test_a_helper_asking_without_the_cache_gets_the_running_pipelines_types(monkeypatch):
    prog = _program(16)
    checked: list[str] = []
    real = verifier.Verifier.function

    def counting(self, f):
        checked.append(f.name)
        return real(self, f)

    monkeypatch.setattr(verifier.Verifier, "function", counting)
    SEEN.clear()
    run_pipeline(prog, CompileContext(), passes=[_AsksTypes, _Unchanged, _AsksWithoutTheCache], check_once=True)
    assert checked == ["k"] and SEEN[0] == SEEN[1]  # inferred once, for the whole run
    assert verifier._RUNNING.get() is None  # the run is over: nothing is left running
    SEEN.clear()
    run_pipeline(_program(16), CompileContext(), passes=[_LoadsHalf, _AsksWithoutTheCache], check_once=True)
    assert [d.value for d in SEEN[0]["u"].shape] == [8, 16]  # the changed program's types, not a stale one


def test_the_front_ends_check_hands_its_statement_types_to_the_pipeline(monkeypatch):
    # the front end checks the program as written; what it typed is not typed again when the pipeline (or
    # anything else with the same context) asks for the types of the very same statements
    from ptoc.driver import frontend

    _counting_typer(monkeypatch)
    ctx = CompileContext()
    TYPED.clear()
    prog = frontend(KERNEL.replace("ROWS", "16"), "one.ir", ctx)
    assert {"tile.load", "tile.add", "tile.store"} <= set(TYPED)
    TYPED.clear()
    kept = verifier.function_types(prog, ctx)["k"]
    assert TYPED == []
    assert kept == verifier.function_types(prog, CompileContext())["k"]  # what another context infers afresh
    assert {"tile.load", "tile.add", "tile.store"} <= set(TYPED)


REASSIGNED = """
import pypto.language as pl

@pl.program
class again:
    @pl.function(type=pl.FunctionType.InCore)
    def k(self, a: pl.Tensor[[16, 16], pl.FP32], out: pl.Out[pl.Tensor[[16, 16], pl.FP32]]) -> pl.Tensor[[16, 16], pl.FP32]:
        t: pl.Tile[[16, 16], pl.FP32, pl.Mem.Vec] = pl.tile.load(a, [0, 0], [16, 16], [16, 16], target_memory=pl.Mem.Vec)
        t = pl.tile.load(a, [0, 0], [8, 16], [8, 16], target_memory=pl.Mem.Vec)
        u = pl.tile.add(t, t)
        r: pl.Tensor[[16, 16], pl.FP32] = pl.tile.store(u, [0, 0], out)
        return r
"""


def test_a_name_assigned_again_as_written_reads_its_latest_value_after_the_hand_over():
    # as written, u reads the second t (8 rows); ConvertToSSA renames it, and the add reads the renamed value:
    # the add's type remembered from the front end's check is right only because it reads the very same type
    from ptoc.driver import frontend, lower

    ctx = CompileContext()
    low = lower(frontend(REASSIGNED, "again.ir", ctx), ctx, stop_after="ConvertToSSA")
    u = low.function_types(ctx)["k"]["u"]
    assert [d.value for d in u.shape] == [8, 16]


class _IndexesWithoutTheCache(Pass):
    name = "IndexesWithoutTheCache"
    stage = "tile"
    summary = "test-only: a helper asks for the node index of k without handing on the run's cache"

    def run(self, program, ctx):
        from ptoc.ir.verifier import NodeIndex

        SEEN.append(NodeIndex.get(program.function("k")))
        return program


def test_a_helper_asking_for_a_node_index_without_the_cache_shares_the_running_pipelines(monkeypatch):
    from ptoc.ir.nodes import Call

    built: list[str] = []
    real = verifier.NodeIndex.__init__

    def counting(self, f):
        built.append(f.name)
        real(self, f)

    monkeypatch.setattr(verifier.NodeIndex, "__init__", counting)
    SEEN.clear()
    run_pipeline(_program(16), CompileContext(), passes=[_IndexesWithoutTheCache, _Unchanged, _IndexesWithoutTheCache,
                                                         _LoadsHalf, _IndexesWithoutTheCache], check_once=True)
    first, same, changed = SEEN
    assert first is same and changed is not first
    assert built.count("k") == 2  # once for k as given, once for k after LoadsHalf changed it
    loads = [c for c in changed.of(Call) if c.op == "tile.load"]
    assert [d.value for d in loads[0].args[2].items] == [8, 16]  # the index of the changed k, not a stale one
