"""Simplify's two fast paths give what the slow ones give.

- `_Fold.inert` says a value or type has nothing to fold only where the folding traversal (`mutate`)
  returns that very object; the oracle is the traversal, run on every value and type of the examples,
  with no known names and with every scalar name given a value.
- `rewrite` tries only the rules whose operand patterns fit the operands' operators; the oracle is the
  first match over the operator's whole rule list in `_RULES`' order, on expressions built from names,
  constants and every operator the rules mention, two levels deep."""

from __future__ import annotations

import itertools
from pathlib import Path

from ptoc.analysis.simplify import _RULES, _build, _Fold, _match, _Ranges, rewrite
from ptoc.context import CompileContext
from ptoc.driver import frontend
from ptoc.ir import dtypes
from ptoc.ir.nodes import AssignStmt, BinOp, ConstInt, MinMax, UnaryOp, Var
from ptoc.ir.verifier import function_types
from ptoc.ir.visitor import walk

EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "examples").glob("*.ir"))
# operators the folding changes with no name known: constants, identities, `>` written as `<`
FOLDABLE = """import pypto.language as pl

@pl.program
class p:
    @pl.function
    def main(self, x: pl.Tensor[[64, 64], pl.FP32], n: pl.Scalar[pl.INDEX]) -> pl.Tensor[[64, 64], pl.FP32]:
        a: pl.Scalar[pl.INDEX] = 3 + 4
        b: pl.Scalar[pl.INDEX] = n * 1 + 0
        c: pl.Scalar[pl.BOOL] = n > 2
        t: pl.Tensor[[32 + 32, 64], pl.FP32] = pl.add(x, x)
        return t
"""


def test_inert_only_where_the_folding_returns_the_same_object():
    said_inert = said_not = 0
    for path, text in [(p, p.read_text()) for p in EXAMPLES] + [(Path("foldable.ir"), FOLDABLE)]:
        ctx = CompileContext()
        program = frontend(text, str(path), ctx)
        types = function_types(program, ctx)
        for f in program.functions:
            ftypes = types.get(f.name, {})
            scalars = {n: ConstInt(7, dtypes.INDEX) for n, t in ftypes.items()
                       if t is not None and t.__class__.__name__ == "ScalarType"}
            for values in ({}, scalars):
                fold = _Fold(dict(values), _Ranges(ftypes))
                for s in walk(f):
                    if s.__class__ is not AssignStmt:
                        continue
                    for part in (s.value, s.annotation):
                        if fold.inert(part):
                            said_inert += 1
                            assert fold.mutate(part) is part, (path.name, f.name, s.target.name)
                        else:
                            said_not += 1
    assert said_inert > 100 and said_not > 10  # both answers were put to the test


def _first_match(e, dtype):
    """The unfiltered search: every rule of `e`'s operator in order, the first that matches."""
    op = ("neg" if e.op == "-" else e.op) if e.__class__ is UnaryOp else e.op
    for rule in _RULES.get(op, ()):
        env: dict = {}
        if _match(rule[0], e, env) and (len(rule) == 2 or rule[2]({k: v.value for k, v in env.items()
                                                                    if k[0] == "c"})):
            return _build(rule[1], env, e, dtype)
    return None


def test_rewrite_finds_the_rule_the_whole_list_would():
    i, j = Var("i"), Var("j")
    leaves = [i, j, ConstInt(0, dtypes.INDEX), ConstInt(3, dtypes.INDEX), ConstInt(-2, dtypes.INDEX)]
    inner = list(leaves)
    for op in ("+", "-", "*", "//", "%", "<", "<=", "==", "!=", "and", "or"):
        for a, b in ((i, j), (j, i), (i, leaves[3]), (leaves[3], i), (i, i)):
            inner.append(BinOp(op, a, b))
    for op in ("min", "max"):
        inner += [MinMax(op, i, j), MinMax(op, j, i)]
    inner += [UnaryOp("-", i), UnaryOp("not", BinOp("<", i, j))]
    tops = [UnaryOp(op, x) for op in ("-", "not") for x in inner]
    for op in ("+", "-", "*", "==", "!=", "<", "<=", "and", "or"):
        tops += [BinOp(op, a, b) for a, b in itertools.product(inner, repeat=2)]
    rewritten = 0
    for e in tops:
        want = _first_match(e, dtypes.INDEX)
        assert rewrite(e, dtypes.INDEX) == want, e
        rewritten += want is not None
    assert rewritten > 1000  # many rules matched, not only the no-match case


DEAD = """import pypto.language as pl

@pl.program
class p:
    @pl.function
    def main(self, x: pl.Tensor[[64, 64], pl.FP32], n: pl.Scalar[pl.INDEX]) -> pl.Tensor[[64, 64], pl.FP32]:
        unused: pl.Scalar[pl.INDEX] = n + 1
        for i, (acc,) in pl.range(0, n, 1, init_values=(x,)):
            also_unused: pl.Scalar[pl.INDEX] = i * 2
            acc2: pl.Tensor[[64, 64], pl.FP32] = pl.add(acc, acc)
            acc3: pl.Tensor[[64, 64], pl.FP32] = pl.yield_(acc2)
        if n > 2:
            k: pl.Scalar[pl.INDEX] = n - 1
            r: pl.Scalar[pl.INDEX] = pl.yield_(k)
        else:
            r: pl.Scalar[pl.INDEX] = pl.yield_(n)
        return acc3
"""


def test_dead_code_walk_is_skipped_only_where_it_would_change_nothing():
    """`_eliminate` skips its walk when `_may_be_dead` finds no unread assignment and no unread `if` result;
    the oracle is the walk itself (`_DeadCode.block`), run on every function of the examples, of the corpus
    and of a program with dead scalar code: where the walk is skipped it must remove nothing and return
    every statement as the very object."""
    from ptoc.analysis.simplify import _DeadCode, _may_be_dead
    from ptoc.ir.verifier import NodeIndex

    corpus = sorted((Path(__file__).resolve().parents[1] / "corpus" / "raw").glob("*.ir"))
    skipped = removed = 0
    for path, text in [(p, p.read_text()) for p in EXAMPLES + corpus] + [(Path("dead.ir"), DEAD)]:
        ctx = CompileContext()
        try:
            program = frontend(text, str(path), ctx)
        except Exception:  # noqa: BLE001  (corpus programs the front end rejects have no functions to test)
            continue
        types = function_types(program, ctx)
        for f in program.functions:
            d = _DeadCode(f, types.get(f.name, {}))
            body = d.block(f.body, allow_empty=True)
            if _may_be_dead(_DeadCode(f, types.get(f.name, {})), NodeIndex(f)):
                removed += d.changed
            else:
                skipped += 1
                assert not d.changed and all(a is b for a, b in zip(body, f.body)), (path.name, f.name)
    assert skipped > 20 and removed >= 1  # both answers were put to the test (dead.ir's main loses code)
