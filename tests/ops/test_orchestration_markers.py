"""pl.no_dep(t) and pl.dump_tag(t): PyPTO's orchestration markers (python/pypto/language/op/tensor_ops.py).
Each is the tensor itself as a value; a kernel has no code for either."""

from optest import codes, types

from ptoc.ops.registry import NoPto, lookup

T = "t: pl.Tensor[[16, 64], pl.FP32]"


def test_markers_are_the_tensor_itself():
    t = types(T, "a = pl.no_dep(t)\nb = pl.dump_tag(t)")
    assert t["a"] == t["b"] == "pl.Tensor[[16, 64], pl.FP32]"


def test_markers_take_a_tensor():
    body = "x = pl.tile.load(t, [0, 0], [16, 64])\na = pl.no_dep(x)"
    assert codes(T, body) == [("PTOC-E0201", None)]  # pl.no_dep has no form for a tile
    assert codes(T, "pl.dump_tag(t, t)") == [("PTOC-E0201", None)]


def test_markers_have_no_kernel_code():
    assert isinstance(lookup("tensor.no_dep").pto, NoPto) and isinstance(lookup("dump_tag").pto, NoPto)
