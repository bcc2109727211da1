"""Every op declaration the family files make is one codegen and the reference can act on: an `Emitter`
names a method the emitter has, a `Pto` operand names a parameter of its op with a known kind, and an
op with declared semantics is one the reference executes. Ops the emitter handled before declarations
existed keep a form (so no op silently loses its lowering)."""

import pytest

from ptoc.codegen.pto import _FunctionEmitter
from ptoc.ops.registry import REGISTRY, Emitter, NoPto, Pto, load_all
from ptoc.reference.interp import implemented_ops

load_all()
DECLARED = {n: op for n, op in REGISTRY.items() if op.pto is not None}
KINDS = ("tile", "tile?", "tile!", "scalar", "f32", "index")

# tile ops with a .pto form (PTOAS PTOOps.td), listed here independently of the declarations
EMITTED = """add sub mul div maximum minimum adds subs muls divs maximums minimums and_ or_ shl shr ands ors shls shrs
xor xors not_ exp sqrt abs neg relu log recip rsqrt row_sum row_max row_min row_prod col_sum col_max col_min col_prod
row_expand_add row_expand_sub row_expand_mul row_expand_div row_expand_max row_expand_min col_expand_add
col_expand_sub col_expand_mul col_expand_div col_expand_max col_expand_min cast move matmul matmul_acc matmul_bias
extract fillpad transpose gather_mask full gather scatter gatherb ci tri write read load store create alloc
set_validshape reshape reinterpret_view slice lrelu""".split()


@pytest.mark.parametrize("name", sorted(DECLARED))
def test_declaration_is_actionable(name):
    op = DECLARED[name]
    form = op.pto
    if isinstance(form, Emitter):
        assert callable(getattr(_FunctionEmitter, form.method, None)), form.method
    elif isinstance(form, Pto):
        assert form.name.startswith("t") and form.operands
        for spec in form.operands:
            kind, _, param = spec.partition(":")
            assert kind in KINDS and param in op.param_names, spec
    else:
        assert isinstance(form, NoPto) and form.hint


def test_every_emitted_tile_op_keeps_a_form():
    missing = [n for n in EMITTED if not isinstance(DECLARED.get(f"tile.{n}") and DECLARED[f"tile.{n}"].pto,
                                                    (Pto, Emitter))]
    assert missing == []


def test_declared_semantics_are_executed_by_the_reference():
    with_kernel = {n for n, op in REGISTRY.items() if op.interp is not None}
    assert "tile.lrelu" in with_kernel
    assert with_kernel <= implemented_ops()
