"""The operator registry as a whole: the op set of the issue is registered, every op is exercised by
the operator tests, and every corpus program checks."""

import re
from pathlib import Path

import pytest

from ptoc.ops.registry import REGISTRY, SHORT, load_all

ROOT = Path(__file__).resolve().parent
load_all()

TENSOR_OPS = """add sub mul div maximum minimum adds subs muls divs maximums minimums and_ ands or_ ors xor xors
not_ shl shls shr shrs exp neg abs sqrt rsqrt recip log cast create full ci slice assemble reshape view
reinterpret_view transpose set_validshape read dim matmul matmul_acc row_sum row_max row_min col_sum col_max
col_min gather gather_mask scatter scatter_mask sort32 mrgsort_format1 mrgsort_format2 quant_mx""".split()
TILE_OPS = """load store move create full alloc add sub mul div maximum minimum adds subs muls divs maximums
minimums and_ ands or_ ors xor xors not_ shl shls shr shrs exp neg abs sqrt rsqrt recip log relu cast slice
extract reshape reinterpret_view transpose set_validshape read write ci tri matmul matmul_acc matmul_bias
row_sum row_max row_min row_prod col_sum col_max col_min col_prod gather gatherb mgather gather_mask scatter
scatter_mask fillpad quant_mx get_block_idx get_block_num get_subblock_idx""".split()
SHORT_NAMES = "load store add matmul exp gather reinterpret_view cast set_validshape arange quant_mx".split()


@pytest.mark.parametrize("name", [f"tensor.{n}" for n in TENSOR_OPS] + [f"tile.{n}" for n in TILE_OPS])
def test_issue_op_set_is_registered(name):
    assert name in REGISTRY


@pytest.mark.parametrize("short", SHORT_NAMES)
def test_user_short_names_resolve(short):
    assert short in SHORT


def test_every_registered_op_is_exercised_by_an_operator_test():
    text = "\n".join(p.read_text() for p in (ROOT / "ops").glob("test_*.py"))
    missing = []
    for name in REGISTRY:
        ns, _, op = name.partition(".")
        # written as pl.<ns>.<op>, through a short name pl.<op>, or in a parametrized list "<op>"
        if not re.search(rf"pl\.{re.escape(name)}\(|[\"']{re.escape(name)}[\"']|[\"']{re.escape(op)}[\"']", text):
            missing.append(name)
    assert not missing, f"ops without a test: {missing}"


def test_every_op_has_a_unit_and_a_summary():
    for op in REGISTRY.values():
        assert op.unit in ("vector", "cube", "mem", "scalar", "sync", "any"), op.name
        assert op.summary, f"{op.name} has no one-line summary"
