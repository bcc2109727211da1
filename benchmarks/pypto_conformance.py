"""How much of the PyPTO language ptoc accepts, and how many of PyPTO's pass tests ptoc reproduces.

    python benchmarks/pypto_conformance.py PYPTO_CHECKOUT [--out-dir DIR] [--show N] [--diffs N] [--json OUT]

It walks `tests/ut/ir/**/test_*.py` of a PyPTO checkout with Python's `ast` and takes every
`@pl.program` class and every `@pl.function` outside a program class, unless it reads a Python name
from outside the program (a closure name such as a shape constant; `pl.dynamic` dimensions defined
in the enclosing test or module are written as module-level dimensions instead). Each becomes a
standalone `.ir` text (optionally written to `--out-dir`). Programs written inside a
`with pytest.raises(...)` block are deliberately invalid and are counted on their own.

For every other program it runs what `ptoc check` runs (in-process) and groups the rejections by
diagnostic code and the first words of the message. For every test that calls PyPTO passes
(`passes.<name>()`, directly or through a module-level helper of the test file that applies passes,
such as `_unroll_and_ssa(P)`) on a `Before...` program and compares with an `Expected...` program, it
runs the same passes with ptoc (`ptoc passes --pipeline A,B`: exactly those passes; ConvertToSSA first
when Before is not in single assignment and the first pass needs it) and compares the result with
Expected, to which the passes the test applies to Expected (`NormalizeIR(passes.convert_to_ssa()(
Expected))`) are applied too, after canonical printing: annotations of assignments dropped (PyPTO
compares the values' types, which ptoc infers), operators written by their full name (`pl.add` on
tensors is `pl.tensor.adds`, as PyPTO's parser records it), loop ranges written with start, stop and
step, the program named alike, `strict_ssa=` dropped, each function's `level=`/`role=` written out where
PyPTO derives them from its type, runtime scopes spelled as PyPTO prints them (`pl.scope()`,
`pl.scope(mode=pl.ScopeMode.MANUAL)`), and every identifier renamed in order of first appearance. A
pair counts as matched only when both texts are then equal. Passes ptoc does not have count as misses.
Each pair runs on the target PyPTO's test runs on: Ascend950 (`--arch a5`) for tests/ut/ir/transforms,
whose conftest sets it, unless the test (or an autouse fixture of its module) names
BackendType.Ascend910B; an Expected that ptoc rejects only for PTOC-E0105 (an annotation contradicting
its value) is read again without its assignment annotations, which are not compared anyway. Functions
are compared in name order (PyPTO keeps them in a map), the cross-core ops by their one short name;
where a test's helper strips the automatic pipe set-up and tfrees from the result, ptoc's result is
stripped alike.

Anything other than a ptoc diagnostic (`CompileError`) is a crash. This is a measurement, not a
test: it asserts nothing.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import difflib
import json
import os
import re
import sys
import textwrap
from collections import Counter, defaultdict
from pathlib import Path

sys.setrecursionlimit(10000)

# PyPTO's pass functions (passes.<snake>()) and ptoc's pass names where ptoc has the pass.
PASS_NAMES = {
    "convert_to_ssa": "ConvertToSSA",
    "convert_tensor_to_tile_ops": "ConvertTensorToTileOps",
    "flatten_tile_nd_to_2d": "FlattenTileNdTo2D",
    "legalize_tile_cast": "LegalizeTileCast",
    "infer_tile_memory_space": "InferTileMemorySpace",
    "materialize_tensor_strides": "MaterializeTensorStrides",
    "init_mem_ref": "InitMemRef",
    "allocate_memory_addr": "AllocateMemoryAddr",
    "ctrl_flow_transform": "CtrlFlowTransform",
    "canonicalize_io_order": "CanonicalizeIOOrder",
}
# pass-module calls that are not passes applied to a program
NOT_PASSES = {"run_verifier", "verify_properties", "get_default_verify_properties", "get_verified_properties",
              "get_structural_properties", "create_program_pass", "runtime_kind_to_name",
              "get_default_diagnostic_phase", "verify_tensor_view_canonical", "verify_call_directions",
              "PassContext", "PassPipeline", "VerificationInstrument", "VerificationMode"}
BUILTINS = {"self", "pl", "pld", "tuple", "int", "float", "bool", "list", "range", "len", "min", "max", "None",
            "True", "False", "str", "dict"}


def camel(snake: str) -> str:
    return PASS_NAMES.get(snake) or "".join(w[:1].upper() + w[1:] for w in snake.split("_"))


# --------------------------------------------------------------------------------------------------
# Extraction
# --------------------------------------------------------------------------------------------------


@dataclasses.dataclass
class Extracted:
    file: str
    test: str  # enclosing test function ("" at module level)
    name: str
    line: int
    text: str
    invalid: bool  # inside pytest.raises


def _deco_name(d: ast.expr) -> str | None:
    if isinstance(d, ast.Call):
        d = d.func
    if isinstance(d, ast.Attribute) and isinstance(d.value, ast.Name) and d.value.id == "pl":
        return d.attr
    return None


def _bound_names(node: ast.AST) -> set[str]:
    out: set[str] = set()
    for n in ast.walk(node):
        if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)):
            out.add(n.id)
        elif isinstance(n, ast.arg):
            out.add(n.arg)
        elif isinstance(n, (ast.FunctionDef, ast.ClassDef)):
            out.add(n.name)
    return out


def _free_names(node: ast.AST) -> set[str]:
    bound = _bound_names(node)
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
            and n.id not in bound and n.id not in BUILTINS}


def _dynamic_defs(stmts: list[ast.stmt]) -> dict[str, str]:
    """`M = pl.dynamic("M")` assignments among `stmts` (not nested)."""
    out = {}
    for s in stmts:
        if (isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name)
                and isinstance(s.value, ast.Call) and _deco_name(s.value) == "dynamic"
                and s.value.args and isinstance(s.value.args[0], ast.Constant)):
            out[s.targets[0].id] = str(s.value.args[0].value)
    return out


class _Walker:
    def __init__(self, path: Path, rel: str, source: str):
        self.rel = rel
        self.lines = source.splitlines()
        self.found: list[Extracted] = []
        self.closure = 0
        self.module_dyn: dict[str, str] = {}
        self.pairs: list[dict] = []
        self.helpers: dict[str, list[str]] = {}  # module-level helper function -> the passes it applies
        self.strip_helpers: set[str] = set()  # module-level helpers that strip the pipe set-up
        self.module_backend: str | None = None  # the target the module's autouse fixture sets

    def text_of(self, node: ast.ClassDef | ast.FunctionDef, dyn: dict[str, str], uses_pld: bool) -> str:
        start = min([d.lineno for d in node.decorator_list] + [node.lineno]) - 1
        body = textwrap.dedent("\n".join(self.lines[start:node.end_lineno]))
        head = ["import pypto.language as pl"]
        if uses_pld:
            head.append("import pypto.language.distributed as pld")
        head.append("")
        if dyn:
            head += [f'{k} = pl.dynamic("{v}")' for k, v in dyn.items()] + [""]
        return "\n".join(head) + "\n" + body + "\n"

    def consider(self, node, scopes: list[dict[str, str]], test: str, invalid: bool) -> Extracted | None:
        free = _free_names(node)
        dyn_avail: dict[str, str] = dict(self.module_dyn)
        for s in scopes:
            dyn_avail.update(s)
        if free - set(dyn_avail):
            self.closure += 1
            return None
        uses_pld = any(isinstance(n, ast.Name) and n.id == "pld" for n in ast.walk(node))
        dyn = {k: dyn_avail[k] for k in sorted(free)}
        e = Extracted(self.rel, test, node.name, node.lineno, self.text_of(node, dyn, uses_pld), invalid)
        self.found.append(e)
        return e

    def walk_body(self, stmts: list[ast.stmt], scopes: list[dict[str, str]], test: str, invalid: bool,
                  local: list[Extracted]) -> None:
        dyn = _dynamic_defs(stmts)
        scopes = scopes + [dyn]
        for s in stmts:
            if isinstance(s, ast.ClassDef):
                if any(_deco_name(d) == "program" for d in s.decorator_list):
                    e = self.consider(s, scopes, test, invalid)
                    if e is not None:
                        local.append(e)
                    continue
                self.walk_body(s.body, scopes, test, invalid, local)
            elif isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if any(_deco_name(d) == "function" for d in s.decorator_list):
                    e = self.consider(s, scopes, test, invalid)
                    if e is not None:
                        local.append(e)
                    continue
                inner: list[Extracted] = []
                name = s.name if s.name.startswith("test") else test
                self.walk_body(s.body, scopes, name, invalid, inner)
                local.extend(inner)
                if s.name.startswith("test"):
                    self.pair_of(s, inner)
            elif isinstance(s, (ast.With, ast.AsyncWith)):
                raises = any(isinstance(it.context_expr, ast.Call) and isinstance(it.context_expr.func, ast.Attribute)
                             and it.context_expr.func.attr == "raises" for it in s.items)
                self.walk_body(s.body, scopes, test, invalid or raises, local)
            elif isinstance(s, (ast.If, ast.For, ast.While, ast.Try)):
                for field in ("body", "orelse", "finalbody"):
                    self.walk_body(getattr(s, field, []) or [], scopes, test, invalid, local)
                for h in getattr(s, "handlers", []) or []:
                    self.walk_body(h.body, scopes, test, invalid, local)

    def pair_of(self, fn: ast.FunctionDef, progs: list[Extracted]) -> None:
        """A Before*/Expected* pair of this test and the passes it applies, in application order."""
        by_name = {e.name: e for e in progs if not e.invalid}
        befores = [n for n in by_name if n.startswith("Before")]
        for b in befores:
            suffix = b[len("Before"):]
            exp = by_name.get("Expected" + suffix)
            if exp is None:
                continue
            order = _applied_passes(fn, self.helpers)
            if not order:
                continue
            self.pairs.append({"file": self.rel, "test": fn.name, "before": by_name[b], "expected": exp,
                               "passes": order, "expected_passes": _expected_passes(fn, self.helpers),
                               "arch": _backend_of(self.rel, fn, self.module_backend),
                               "strip": _strips(fn, self.strip_helpers)})


def _pass_name(call: ast.expr) -> str | None:
    """`passes.<name>()` -> name (for a pass applied to a program)."""
    if (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
            and isinstance(call.func.value, ast.Name) and call.func.value.id == "passes"
            and call.func.attr not in NOT_PASSES):
        return call.func.attr
    return None


STRIP_HELPER = "_strip_auto_pipe_setup"  # PyPTO's ExpandMixedKernel tests drop the pipe set-up and tfrees


def _strip_helpers(tree: ast.Module) -> set[str]:
    """Module-level helpers that strip the automatic pipe set-up from their result (directly or through
    another such helper)."""
    out: set[str] = {STRIP_HELPER}
    for s in tree.body:
        if isinstance(s, ast.FunctionDef) and _strips(s, out):
            out.add(s.name)
    return out


def _strips(fn: ast.FunctionDef, strip_helpers: set[str]) -> bool:
    return any(isinstance(n, ast.Name) and n.id in strip_helpers for n in ast.walk(fn))


def _helper_passes(tree: ast.Module) -> dict[str, list[str]]:
    """Module-level helpers that apply passes to their argument (`def _unroll_and_ssa(p): return
    passes.convert_to_ssa()(passes.unroll_loops()(p))`) -> those passes in application order."""
    out = {}
    for s in tree.body:
        if isinstance(s, ast.FunctionDef) and not s.name.startswith("test") and s.args.args:
            order = _applied_passes(s, out)  # a helper may call an earlier helper
            if order:
                out[s.name] = order
    return out


def _expected_passes(fn: ast.FunctionDef, helpers: dict[str, list[str]]) -> list[str]:
    """The passes a test applies to its Expected program before comparing
    (`assert_structural_equal(After, NormalizeIR(passes.convert_to_ssa()(Expected)))`)."""
    for node in ast.walk(fn):
        order: list[str] = []
        cur = node
        while isinstance(cur, ast.Call) and cur.args:
            name = _pass_name(cur.func)
            if name is not None:
                order.append(name)
            elif isinstance(cur.func, ast.Name) and cur.func.id in helpers:
                order += reversed(helpers[cur.func.id])
            else:
                break
            cur = cur.args[0]
        if order and isinstance(cur, ast.Name) and cur.id.startswith("Expected"):
            return order[::-1]
    return []


def _applied_passes(fn: ast.FunctionDef, helpers: dict[str, list[str]]) -> list[str]:
    """The `passes.<name>()` calls of a test, in the order they apply to a program:
    `passes.b()(passes.a()(P))` applies a, then b; statements apply in source order. A call of a
    module-level helper that applies passes (`helpers`) counts as those passes."""
    out: list[str] = []
    pass_name = _pass_name

    def on_expected(node: ast.expr) -> bool:
        """The chain `passes.x()(passes.y()(Expected...))` normalises the expected program: skip it."""
        while isinstance(node, ast.Call) and node.args and (
                pass_name(node.func) is not None or isinstance(node.func, ast.Name) and node.func.id in helpers):
            node = node.args[0]
        return isinstance(node, ast.Name) and node.id.startswith("Expected")

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.Call):
            name = pass_name(node.func)  # passes.x()(arg)
            if name is not None:
                if on_expected(node):
                    return
                for a in node.args:
                    visit(a)
                out.append(name)
                return
            name = pass_name(node)  # a bare passes.x() (e.g. a list of passes)
            if name is not None:
                out.append(name)
                return
            if isinstance(node.func, ast.Name) and node.func.id in helpers and node.args:
                if on_expected(node):
                    return
                for a in node.args:
                    visit(a)
                out.extend(helpers[node.func.id])
                return
        for child in ast.iter_child_nodes(node):
            visit(child)

    for s in fn.body:
        if isinstance(s, (ast.ClassDef, ast.FunctionDef)):
            continue
        visit(s)
    return out


def _named_backend(node: ast.AST) -> str | None:
    """The target the first BackendType.<name> in `node` names."""
    for n in ast.walk(node):
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "BackendType":
            if n.attr == "Ascend910B":
                return "a2a3"
            if n.attr == "Ascend950":
                return "a5"
    return None


def _module_backend(tree: ast.Module) -> str | None:
    """The target a test module's own autouse fixture sets for all its tests (`@pytest.fixture(autouse=True)`
    naming BackendType.<name>), or None."""
    for s in tree.body:
        if isinstance(s, ast.FunctionDef) and any(
                isinstance(d, ast.Call) and isinstance(d.func, ast.Attribute) and d.func.attr == "fixture"
                and any(k.arg == "autouse" and isinstance(k.value, ast.Constant) and k.value.value is True
                        for k in d.keywords) for d in s.decorator_list):
            named = _named_backend(s)
            if named is not None:
                return named
    return None


def _backend_of(rel: str, fn: ast.FunctionDef, module: str | None = None) -> str:
    """The target a PyPTO test runs on: tests/ut/ir/transforms/conftest.py sets Ascend950 (ptoc's a5) for
    every test of that folder, a test module's autouse fixture naming a BackendType sets that one for its
    tests (`module`), a test naming BackendType.Ascend910B sets that one (a2a3); PyPTO's other unit tests
    run on its default, Ascend910B."""
    named = _named_backend(fn)
    if named is not None:
        return named
    if module is not None:
        return module
    return "a5" if rel.startswith("tests/ut/ir/transforms/") else "a2a3"


def _without_annotations(text: str, where: str, ctx):
    """Expected read again with its assignment annotations dropped (and checked without them)."""
    from ptoc.diagnostics import CompileError
    from ptoc.frontend.parser import parse_program
    from ptoc.ir.nodes import AssignStmt
    from ptoc.ir.verifier import verify_program
    from ptoc.ir.visitor import Mutator

    class Drop(Mutator):
        def mutate_AssignStmt(self, st: AssignStmt):
            return dataclasses.replace(st, annotation=None)

    prog = Drop().mutate(parse_program(text, where, verify=False, ctx=ctx, check_ops=False))
    errors = [d for d in verify_program(prog, ctx=ctx, ssa=False) if d.severity == "error"]
    if errors:
        raise CompileError(errors)
    return prog


def extract(checkout: Path):
    root = checkout / "tests" / "ut" / "ir"
    programs: list[Extracted] = []
    pairs: list[dict] = []
    closure = 0
    for path in sorted(root.rglob("test_*.py")):
        source = path.read_text(encoding="utf-8")
        try:
            tree = ast.parse(source)
        except SyntaxError:
            continue
        w = _Walker(path, str(path.relative_to(checkout)), source)
        w.module_dyn = _dynamic_defs(tree.body)
        w.helpers = _helper_passes(tree)
        w.strip_helpers = _strip_helpers(tree)
        w.module_backend = _module_backend(tree)
        w.walk_body(tree.body, [], "", False, [])
        programs += w.found
        pairs += w.pairs
        closure += w.closure
    return programs, pairs, closure


# --------------------------------------------------------------------------------------------------
# Running ptoc
# --------------------------------------------------------------------------------------------------


def _ptoc():
    from ptoc.context import CompileContext
    from ptoc.diagnostics import CompileError, InternalError

    try:
        from ptoc.driver import check_source
    except ImportError:  # before `ptoc check` ran ConvertToSSA
        from ptoc.frontend.parser import parse_program

        def check_source(text, file, ctx):
            return parse_program(text, file, ctx=ctx)
    return CompileContext(), CompileError, InternalError, check_source


MIXED_PASSES = {"ExpandMixedKernel", "InjectGmPipeBuffer"}
CROSS_CORE_SHORT = {"tpush_to_aiv", "tpush_to_aic", "tpop_from_aic", "tpop_from_aiv", "tfree_to_aic", "tfree_to_aiv",
                    "reserve_buffer", "import_peer_buffer", "aic_initialize_pipe", "aiv_initialize_pipe"}
SETUP_OPS = ("system.reserve_buffer", "system.import_peer_buffer", "system.aic_initialize_pipe",
             "system.aiv_initialize_pipe")


def strip_pipe_setup(program):
    """What PyPTO's `_strip_auto_pipe_setup` does to the actual program before comparing: drop the leading
    pipe set-up statements of every AIC/AIV function and every tfree."""
    from dataclasses import replace

    from ptoc.ir.nodes import AssignStmt, Call, EvalStmt, ForStmt, IfStmt, WhileStmt

    def op(st):
        c = st.value if isinstance(st, AssignStmt) else st.expr if isinstance(st, EvalStmt) else None
        return c.op if isinstance(c, Call) and c.kind == "op" else ""

    def no_free(body):
        out = []
        for st in body:
            if op(st) in ("system.tfree_to_aic", "system.tfree_to_aiv"):
                continue
            if isinstance(st, (ForStmt, WhileStmt)):
                st = replace(st, body=no_free(st.body))
            elif isinstance(st, IfStmt):
                st = replace(st, then_body=no_free(st.then_body), else_body=no_free(st.else_body))
            out.append(st)
        return tuple(out)

    funcs = []
    for f in program.functions:
        if f.func_type in ("AIC", "AIV"):
            i = 0
            while i < len(f.body) and op(f.body[i]) in SETUP_OPS:
                i += 1
            f = replace(f, body=no_free(f.body[i:]))
        funcs.append(f)
    return replace(program, functions=tuple(funcs))


def group_key(d) -> str:
    msg = re.sub(r"'[^']*'|\"[^\"]*\"", "'…'", d.message)
    msg = re.sub(r"\d+", "N", msg)
    return f"{d.code} " + " ".join(msg.split()[:6])


def _unique_definitions(program):
    """Rename every definition to a name of its own (`x`, `x__2`, ...) and every use to the definition
    it reads, scope by scope: loop variables and iter_args bind inside their loop, a loop's or an if's
    yielded names after it, names assigned in a body stay in it. PyPTO's values are objects, so its
    printed `out = pl.store(t, [0, 0], out)` or a loop result with its iter_arg's name are distinct
    values under one name; ptoc's names are its values. Applied to both sides of a comparison, this
    makes equal programs equal however their names repeat, and changes nothing else."""
    from ptoc.ir.nodes import AssignStmt, ForStmt, IfStmt, ScopeStmt, Var, WhileStmt, YieldStmt
    from ptoc.ir.visitor import Mutator

    count: Counter[str] = Counter()

    def fresh(v, env):
        count[v.name] += 1
        new = v.name if count[v.name] == 1 else f"{v.name}__{count[v.name]}"
        env[v.name] = new
        return dataclasses.replace(v, name=new)

    class Uses(Mutator):
        def __init__(self, env):
            self.env = env

        def pre_Var(self, v):
            new = self.env.get(v.name)
            return v if new is None or new == v.name else dataclasses.replace(v, name=new)

    def body_of(stmts, env):
        """(new statements, the final yield's new targets or None) with `env` a copy per body."""
        env = dict(env)
        out = []
        final = None
        for k, st in enumerate(stmts):
            if isinstance(st, YieldStmt) and k == len(stmts) - 1:
                final = st
                out.append(dataclasses.replace(st, values=Uses(env).mutate(st.values),
                                               annotation=Uses(env).mutate(st.annotation)))
            else:
                out.append(stmt(st, env))
        return out, final

    def bind_results(results_stmt, env):
        return tuple(fresh(t, env) for t in results_stmt.targets)

    def stmt(st, env):
        if isinstance(st, AssignStmt):
            value, ann = Uses(env).mutate(st.value), Uses(env).mutate(st.annotation)
            return dataclasses.replace(st, value=value, annotation=ann, target=fresh(st.target, env))
        if isinstance(st, (ForStmt, WhileStmt)):
            head = Uses(env).mutate(dataclasses.replace(st, body=(), iter_args=()))
            if isinstance(st, WhileStmt):
                head = dataclasses.replace(head, cond=st.cond)
            inner = dict(env)
            extra = {}
            if isinstance(st, ForStmt):
                extra["var"] = fresh(st.var, inner)
            iter_args = tuple(fresh(a, inner) for a in st.iter_args)
            if isinstance(st, WhileStmt):
                extra["cond"] = Uses(inner).mutate(st.cond)
            new_body, final = body_of(st.body, inner)
            if final is not None:
                new_body[-1] = dataclasses.replace(new_body[-1], targets=bind_results(final, env))
            return dataclasses.replace(head, body=tuple(new_body), iter_args=iter_args, **extra)
        if isinstance(st, IfStmt):
            cond = Uses(env).mutate(st.cond)
            then_body, tf = body_of(st.then_body, env)
            else_body, ef = body_of(st.else_body, env)
            if tf is not None:
                targets = bind_results(tf, env)
                then_body[-1] = dataclasses.replace(then_body[-1], targets=targets)
                if ef is not None and [t.name for t in ef.targets] == [t.name for t in tf.targets]:
                    else_body[-1] = dataclasses.replace(else_body[-1], targets=targets)
            return dataclasses.replace(st, cond=cond, then_body=tuple(then_body), else_body=tuple(else_body))
        if isinstance(st, ScopeStmt):
            head = Uses(env).mutate(dataclasses.replace(st, body=(), var=None))
            var = fresh(st.var, env) if st.var is not None else None
            return dataclasses.replace(head, var=var, body=tuple(stmt(x, env) for x in st.body))
        return Uses(env).mutate(st)

    funcs = []
    for f in program.functions:
        count.clear()
        env = {}
        for p in f.params:
            count[p.name] += 1
            env[p.name] = p.name
        funcs.append(dataclasses.replace(f, body=tuple(stmt(st, env) for st in f.body)))
    _ = Var
    return dataclasses.replace(program, functions=tuple(funcs))


# Arguments PyPTO's op builders always put into the IR when the text leaves them out, so that
# `pl.load(t, [0], [64])` and `pl.tile.load(t, [0], [64], [64], target_memory=pl.Mem.Vec)` are one value.
_PYPTO_DEFAULTS = {
    "tile.load": (("valid_shapes", "shapes"), ("target_memory", ("Mem", "Vec"))),
    "tile.create": (("target_memory", ("Mem", "Vec")),),
    "tile.full": (("target_memory", ("Mem", "Vec")),),
    "tensor.create": (("layout", ("TensorLayout", "ND")),),
    "tile.cast": (("mode", "round"),),
    "tensor.cast": (("mode", "round"),),
}


def _explicit_ops(program):
    """Every operator call in PyPTO's explicit form: the short name resolved to the op it means
    (`pl.load` -> `pl.tile.load`, by the arguments' types), the arguments PyPTO's builders fill in
    written out, positional parameters positional and the optional ones as keywords in name order.
    PyPTO compares IR, where these spellings are one call; ptoc keeps the text's spelling."""
    from ptoc.ir.nodes import EnumLit, StrLit
    from ptoc.ir.verifier import function_types
    from ptoc.ir.visitor import Mutator
    from ptoc.passes.common import resolve_op

    try:
        types = function_types(program)
    except Exception:  # noqa: BLE001 - a program whose types do not infer keeps its spelling
        return program

    class Explicit(Mutator):
        def __init__(self, env):
            self.env = env

        def mutate_Call(self, c):
            if c.kind != "op":
                return c
            op = resolve_op(c, self.env)
            if op is None:
                return c
            bound = dict(zip(op.param_names, c.args))
            if len(c.args) > len(op.param_names):
                return c
            extra = []
            for k, v in c.kwargs:
                (bound.__setitem__(k, v) if k in op.param_names else extra.append((k, v)))
            for name, default in _PYPTO_DEFAULTS.get(op.name, ()):
                if name in bound:
                    continue
                if isinstance(default, tuple):
                    bound[name] = EnumLit(*default)
                elif default in bound:
                    bound[name] = bound[default]
                else:
                    bound[name] = StrLit(default)
            if not all(p in bound for p in op.params):
                return c
            args = tuple(bound[p] for p in op.params)
            opt = [(n, bound[n]) for n, _ in op.optional if n in bound and n != "valid_shapes"]
            if "valid_shapes" in bound and op.name == "tile.load":
                args += (bound["valid_shapes"],)
            elif "valid_shapes" in bound:
                opt.append(("valid_shapes", bound["valid_shapes"]))
            return dataclasses.replace(c, op=op.name, args=args, kwargs=tuple(sorted(opt + extra)))

    funcs = []
    for f in program.functions:
        funcs.append(Explicit(types.get(f.name, {})).mutate(f))
    return dataclasses.replace(program, functions=tuple(funcs))


# The level and role PyPTO's Function gives each function type that states none (include/pypto/ir/
# function.h: the constructor derives them); its printer writes them out, so Expected spells them.
_PYPTO_LEVEL_ROLE = {
    "InCore": ("CHIP_DIE", "SubWorker"), "AIC": ("AIC", "SubWorker"), "AIV": ("AIV", "SubWorker"),
    "Group": ("CORE_GROUP", "SubWorker"), "Orchestration": ("CHIP", "Orchestrator"),
    "Graph": ("CHIP", "Orchestrator"),
}


def _explicit_level_role(program):
    """Every function's `level=` and `role=` written out where PyPTO derives them from its type (first
    among the decorator's keywords): `@pl.function(type=pl.FunctionType.InCore)` is the same function as
    `@pl.function(type=pl.FunctionType.InCore, level=pl.Level.CHIP_DIE, role=pl.Role.SubWorker)`."""
    from ptoc.ir.nodes import EnumLit

    funcs = []
    for f in program.functions:
        implied = _PYPTO_LEVEL_ROLE.get(f.func_type)
        if implied is not None:
            kw = dict(f.decorator_kwargs)
            kw.setdefault("level", EnumLit("Level", implied[0]))
            kw.setdefault("role", EnumLit("Role", implied[1]))
            first = [("level", kw.pop("level")), ("role", kw.pop("role"))]
            f = dataclasses.replace(f, decorator_kwargs=tuple(first + list(kw.items())))
        funcs.append(f)
    return dataclasses.replace(program, functions=tuple(funcs))


def _runtime_scope_spelling(s):
    """`with pl.auto_scope():` / `pl.scope(mode=pl.ScopeMode.AUTO)` as `with pl.scope():`, and
    `with pl.manual_scope():` as `with pl.scope(mode=pl.ScopeMode.MANUAL):`: one RuntimeScopeStmt each in
    PyPTO's IR, printed in the second form."""
    from ptoc.ir.nodes import EnumLit

    if s.args or s.var is not None:
        return s
    kw = dict(s.kwargs)
    if s.kind in ("auto_scope", "manual_scope") and not kw:
        manual = s.kind == "manual_scope"
    elif s.kind == "scope" and set(kw) <= {"mode"}:
        manual = kw.get("mode") == EnumLit("ScopeMode", "MANUAL")
    else:
        return s
    mode = (("mode", EnumLit("ScopeMode", "MANUAL")),) if manual else ()
    return dataclasses.replace(s, kind="scope", kwargs=mode)


def _per_function_names(program):
    """Every value's name made the function's own (`f<i>_<name>`): a name in one function has nothing
    to do with the same name in another (PyPTO compares each function's values by position), so the
    renaming in order of first appearance numbers each function's names apart."""
    from ptoc.ir.visitor import Mutator

    funcs = []
    for i, f in enumerate(program.functions):
        prefix = f"f{i}_"

        class Own(Mutator):
            def __init__(self, prefix):
                self.prefix = prefix

            def pre_Var(self, v):
                return dataclasses.replace(v, name=self.prefix + v.name)

        f2 = Own(prefix).mutate(f)
        f2 = dataclasses.replace(f2, params=tuple(dataclasses.replace(p, name=prefix + p.name) for p in f.params))
        funcs.append(f2)
    return dataclasses.replace(program, functions=tuple(funcs))


def canonical(program) -> str:
    """The printed program with assignment annotations dropped, `for` ranges as (start, stop, step),
    the program named P, `strict_ssa=` dropped, and identifiers renamed in order of appearance."""
    from ptoc.ir.nodes import AssignStmt, ConstInt, ForStmt, Function, ReturnStmt, YieldStmt
    from ptoc.ir.printer import print_program
    from ptoc.ir.visitor import Mutator, walk

    class Canon(Mutator):
        def mutate_AssignStmt(self, s: AssignStmt):
            return dataclasses.replace(s, annotation=None)

        def mutate_YieldStmt(self, s: YieldStmt):
            return dataclasses.replace(s, annotation=None)

        def mutate_ForStmt(self, s: ForStmt):
            if len(s.args) in (1, 2) and s.kind in ("range", "parallel", "unroll", "pipeline"):
                start, stop, step = s.start, s.stop, s.step
                if isinstance(step, ConstInt):
                    return dataclasses.replace(s, args=(start, stop, step))
            return s

        def mutate_Function(self, f: Function):
            kw = tuple((k, v) for k, v in f.decorator_kwargs if k != "strict_ssa")
            # PyPTO derives level CHIP_DIE and role SubWorker for a kernel (its printer then leaves out
            # `self`): written out or not, they are the same function
            if f.func_type in ("InCore", "AIC", "AIV"):
                kw = tuple((k, v) for k, v in kw if not (
                    (k == "level" and getattr(v, "member", None) == "CHIP_DIE")
                    or (k == "role" and getattr(v, "member", None) == "SubWorker")))
            body = f.body
            # a bare `return` ending a function that returns nothing: PyPTO's parser adds one, ptoc's does not
            if not f.returns and body and isinstance(body[-1], ReturnStmt) and not body[-1].values:
                body = body[:-1]
            return dataclasses.replace(f, decorator_kwargs=kw, body=body, has_self=True)

        def mutate_ScopeStmt(self, s):
            # PyPTO's runtime scopes have one spelling each: `pl.scope()` and `pl.scope(mode=MANUAL)`
            return _runtime_scope_spelling(s)

        def mutate_Call(self, c):
            # the cross-core ops have one short name each (pl.tpush_to_aiv is pl.tile.tpush_to_aiv, ...)
            short = c.op.split(".", 1)[1] if c.kind == "op" and "." in c.op else None
            return dataclasses.replace(c, op=short) if short in CROSS_CORE_SHORT else c

    # PyPTO keeps a program's functions in a map ordered by name: the order they are written in is no part
    # of the program (sorted before each function's names are numbered apart)
    program = dataclasses.replace(program, functions=tuple(sorted(program.functions, key=lambda f: f.name)))
    prog = Canon().mutate(_per_function_names(_explicit_level_role(_explicit_ops(_unique_definitions(program)))))
    prog = dataclasses.replace(prog, name="P" if prog.name is not None else None)
    text = print_program(prog)
    ids: list[str] = []
    for f in prog.functions:
        ids += [p.name for p in f.params]
        for n in walk(f):
            if n.__class__.__name__ == "Var":
                ids.append(n.name)
    local = set(ids)
    mapping: dict[str, str] = {}

    def rename(m: re.Match) -> str:
        w = m.group(0)
        if w not in local:
            return w
        if w not in mapping:
            mapping[w] = f"v{len(mapping)}"
        return mapping[w]

    return re.sub(r"(?<![.\w])[A-Za-z_]\w*", rename, text)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("checkout", type=Path, help="a checkout of github.com/hw-native-sys/pypto")
    ap.add_argument("--out-dir", type=Path, help="write every extracted program here as a .ir file")
    ap.add_argument("--show", type=int, default=0, help="print up to N example files per rejection group")
    ap.add_argument("--json", type=Path, help="write the numbers as JSON")
    ap.add_argument("--diffs", type=int, default=0, help="print up to N differing pairs per pass as diffs")
    args = ap.parse_args(argv)

    programs, pairs, closure = extract(args.checkout)
    ctx, CompileError, InternalError, check_source = _ptoc()
    ctx0 = ctx
    from ptoc.passes.manager import PIPELINE, load_pass, run_pipeline

    try:
        from ptoc.passes.manager import input_properties
    except ImportError:
        input_properties = None
    have = {n for _, n in PIPELINE}

    if args.out_dir:
        args.out_dir.mkdir(parents=True, exist_ok=True)

    valid = [p for p in programs if not p.invalid]
    invalid = [p for p in programs if p.invalid]
    groups: Counter[str] = Counter()
    examples: dict[str, list[str]] = defaultdict(list)
    crashes: Counter[str] = Counter()
    accepted = invalid_accepted = 0
    for p in valid + invalid:
        where = f"{p.file}:{p.line} {p.name}"
        if args.out_dir:
            stem = re.sub(r"\W", "_", f"{p.file}_{p.line}_{p.name}")
            (args.out_dir / (("invalid_" if p.invalid else "") + stem + ".ir")).write_text(p.text)
        try:
            check_source(p.text, where, ctx)
            ok = True
        except CompileError as e:
            ok = False
            if not p.invalid:
                key = group_key(e.diagnostics[0])
                groups[key] += 1
                if len(examples[key]) < max(args.show, 1):
                    examples[key].append(where + ": " + e.diagnostics[0].message)
        except Exception as e:  # noqa: BLE001 - anything but a diagnostic is a crash, counted here
            ok = False
            crashes[f"{type(e).__name__}: {str(e)[:100]}"] += 1
        if ok and p.invalid:
            invalid_accepted += 1
        elif ok:
            accepted += 1

    from ptoc.driver import frontend

    per_pass: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    shown: Counter[str] = Counter()
    diffs: list[str] = []
    renamed_first: Counter[str] = Counter()
    outcomes: Counter[str] = Counter()
    for pair in pairs:
        names = [camel(n) for n in pair["passes"]]
        key = ",".join(names)
        per_pass[key][1] += 1
        if not all(n in have for n in names):
            outcomes["pass not in ptoc"] += 1
            continue
        b, x = pair["before"], pair["expected"]
        ctx = dataclasses.replace(ctx0, arch=pair["arch"])
        pctx = ctx
        try:  # the program as written: the chosen passes alone make it what Expected shows
            before = frontend(b.text, f"{b.file}:{b.line} Before", pctx)
        except CompileError:
            outcomes["Before rejected"] += 1
            continue
        except Exception as e:  # noqa: BLE001
            crashes[f"{type(e).__name__}: {str(e)[:100]}"] += 1
            continue
        try:  # as written too: a pass that runs before ConvertToSSA expects non-SSA text
            expected = frontend(x.text, f"{x.file}:{x.line} Expected", ctx)
        except CompileError as e:
            # Assignment annotations are not compared (see canonical); PyPTO's parser gives a value its
            # inferred type whatever TileView the annotation implies, ptoc's rejects the contradiction
            # (PTOC-E0105). Such an Expected is read again without its assignment annotations.
            if any(d.code != "PTOC-E0105" for d in e.diagnostics if d.severity == "error"):
                outcomes["Expected rejected"] += 1
                continue
            try:
                expected = _without_annotations(x.text, f"{x.file}:{x.line} Expected", ctx)
                outcomes["(Expected read without its annotations: PTOC-E0105)"] += 1
            except CompileError:
                outcomes["Expected rejected"] += 1
                continue
        except Exception as e:  # noqa: BLE001
            crashes[f"{type(e).__name__}: {str(e)[:100]}"] += 1
            continue
        exp_names = [camel(n) for n in pair.get("expected_passes", [])]
        if exp_names:  # the test normalises Expected with passes too (e.g. convert_to_ssa): do the same
            if not all(n in have for n in exp_names):
                outcomes["pass not in ptoc (applied to Expected)"] += 1
                continue
            try:
                kw = {"given": input_properties(expected, ctx)} if input_properties else {}
                expected = run_pipeline(expected, ctx, passes=[load_pass(n) for n in exp_names], **kw)
            except (CompileError, InternalError) as e:
                outcomes[f"Expected's passes fail: {type(e).__name__}"] += 1
                continue
        try:
            classes = [load_pass(n) for n in names]
            given = input_properties(before, pctx) if input_properties else None
            if given is not None and "ssa" not in given and "structured" in given \
                    and not getattr(classes[0], "accepts_non_ssa", False):
                # PyPTO's reassigned names are distinct values already: give them their own names first
                classes = [load_pass("ConvertToSSA")] + classes
                renamed_first["ConvertToSSA first"] += 1
            kw = {"given": given} if input_properties else {}
            after = run_pipeline(before, pctx, passes=classes, **kw)
            if pair.get("strip"):
                after = strip_pipe_setup(after)
        except CompileError as e:
            outcomes[f"pass error {e.diagnostics[0].code}"] += 1
            continue
        except InternalError as e:
            if "which no earlier pass produced" in str(e):
                outcomes["input lacks a required property"] += 1
            else:
                crashes[f"InternalError: {str(e)[:100]}"] += 1
            continue
        except Exception as e:  # noqa: BLE001
            crashes[f"{type(e).__name__}: {str(e)[:100]}"] += 1
            continue
        got, want = canonical(after), canonical(expected)
        if got == want:
            per_pass[key][0] += 1
            outcomes["matched"] += 1
        else:
            outcomes["differs"] += 1
            if shown[key] < args.diffs:
                shown[key] += 1
                diffs.append(f"--- {b.file}::{pair['test']} ({key}): ptoc vs Expected\n" + "".join(
                    difflib.unified_diff(want.splitlines(True), got.splitlines(True), "Expected", "ptoc", n=1)))

    pct = 100.0 * accepted / max(len(valid), 1)
    matched = sum(v[0] for v in per_pass.values())
    total = sum(v[1] for v in per_pass.values())
    print(f"programs: {len(programs)} ({len(valid)} valid, {len(invalid)} inside pytest.raises); "
          f"{closure} skipped (closure names)")
    print(f"accepted: {accepted} of {len(valid)} ({pct:.1f}%); deliberately invalid accepted: "
          f"{invalid_accepted} of {len(invalid)}")
    print(f"pass pairs matched: {matched} of {total} ({100.0 * matched / max(total, 1):.1f}%)")
    print(f"crashes: {sum(crashes.values())}")
    print()
    print("rejections by group (valid programs)")
    print(f"{'count':>6}  group")
    for key, n in groups.most_common():
        print(f"{n:6d}  {key}")
        for ex in examples[key][:args.show]:
            print(f"{'':8}{ex}")
    print()
    print("pass pairs (matched / total), by the passes the test applies")
    for key, (m, t) in sorted(per_pass.items(), key=lambda kv: (-kv[1][1], kv[0])):
        mark = "" if all(n in have for n in key.split(",")) else "   (not in ptoc)"
        print(f"{m:5d} / {t:<5d} {key}{mark}")
    print()
    print("pair outcomes")
    for key, n in outcomes.most_common():
        print(f"{n:6d}  {key}")
    print(f"({renamed_first['ConvertToSSA first']} non-SSA Before programs of other passes ran ConvertToSSA first)")
    if crashes:
        print()
        print("crashes")
        for key, n in crashes.most_common():
            print(f"{n:6d}  {key}")
    if diffs:
        print()
        print("differing pairs (canonical text, first --diffs per pass)")
        for d in diffs:
            print(d)
    if args.json:
        args.json.write_text(json.dumps({
            "programs": len(programs), "valid": len(valid), "invalid": len(invalid), "closure": closure,
            "accepted": accepted, "invalid_accepted": invalid_accepted, "pairs_matched": matched,
            "pairs_total": total, "crashes": sum(crashes.values()), "groups": dict(groups),
            "per_pass": {k: v for k, v in per_pass.items()}, "outcomes": dict(outcomes)}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("NO_COLOR", "1")
    sys.exit(main())
