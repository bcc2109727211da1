"""BlockNzTensorViews against the independent reference packer (NZ-2, NZ-3, NZ-4).

For random dtypes, logical shapes and aligned windows: pack a random logical tensor into NZ order with
`ptoc.reference.nz_pack` (written from the seed's formula, sharing no code with the pass), then read the
window with the pass's blocked offsets and sizes by plain rank-5 row-major addressing over the pass's
blocked shape (the strides MaterializeTensorStrides derives, NZ-3). The bytes read must be the NZ image of
the logical window.
"""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ptoc.context import CompileContext
from ptoc.frontend.parser import parse_program
from ptoc.ir.nodes import Call, ConstInt
from ptoc.ir.visitor import walk
from ptoc.passes.BlockNzTensorViews import BlockNzTensorViews
from ptoc.reference import nz_pack

CTX = CompileContext(arch="a2a3")


def _np_dtype(name: str):
    if name == "BF16":
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype({"INT8": "int8", "FP16": "float16", "FP32": "float32"}[name])


C0 = {"INT8": 32, "FP16": 16, "BF16": 16, "FP32": 8}
BITS = {1: np.uint8, 2: np.uint16, 4: np.uint32}


# --------------------------------------------------------------------------------------------------
# the reference packer itself, checked by hand against the seed's formula
# --------------------------------------------------------------------------------------------------


def test_reference_packer_places_elements_by_the_seed_strides():
    # [32, 64] INT8, c0 = 32: element (17, 33) -> c1 = 1, r1 = 1, i = 1, j = 1
    # offset = 1 * (R * c0) + 1 * (16 * c0) + 1 * c0 + 1 = 1024 + 512 + 32 + 1 = 1569
    logical = (np.arange(32 * 64) % 251).astype(np.int8).reshape(32, 64)
    packed = nz_pack.pack(logical)
    assert packed.shape == (1, 2, 2, 16, 32)
    assert packed.ravel()[1569] == logical[17, 33]
    assert packed[0, 1, 1, 1, 1] == logical[17, 33]


def test_reference_packer_one_fractal_is_512_bytes_of_16_c0_lines():
    logical = np.arange(16 * 8, dtype=np.float32).reshape(16, 8)  # one FP32 fractal: 16 x 8 x 4 = 512 bytes
    data = nz_pack.pack_bytes(logical)
    assert len(data) == 512
    assert np.array_equal(nz_pack.unpack_bytes(data, (16, 8), np.float32), logical)  # one fractal is row-major


def test_reference_packer_round_trips_and_folds_leading_axes():
    rng = np.random.default_rng(0)
    logical = rng.integers(0, 1 << 16, size=(2, 3, 32, 32), dtype=np.uint16).view(np.float16)
    packed = nz_pack.pack(logical)
    assert packed.shape == (6, 2, 2, 16, 16)
    assert np.array_equal(nz_pack.unpack(packed, logical.shape).view(np.uint16), logical.view(np.uint16))
    # batch panel g*E + e = 1*3 + 2 = 5 is the NZ image of logical[1, 2]
    assert np.array_equal(packed[5].view(np.uint16), nz_pack.pack(logical[1, 2]).reshape(2, 2, 16, 16).view(np.uint16))


def test_reference_packer_rejects_partial_fractals():
    with pytest.raises(ValueError):
        nz_pack.pack(np.zeros((24, 32), dtype=np.int8))
    with pytest.raises(ValueError):
        nz_pack.pack(np.zeros((16, 48), dtype=np.int8))


# --------------------------------------------------------------------------------------------------
# the pass's arithmetic against the packer
# --------------------------------------------------------------------------------------------------


@st.composite
def cases(draw):
    dtype = draw(st.sampled_from(["INT8", "FP16", "BF16", "FP32"]))
    c0 = C0[dtype]
    lead = draw(st.lists(st.integers(1, 3), min_size=0, max_size=2))  # rank 2..4
    rb, cb = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    trb, tcb = draw(st.integers(1, rb)), draw(st.integers(1, cb))
    r0 = 16 * draw(st.integers(0, rb - trb))
    k0 = c0 * draw(st.integers(0, cb - tcb))
    lead_off = [draw(st.integers(0, d - 1)) for d in lead]
    seed = draw(st.integers(0, 2**32 - 1))
    return dtype, c0, lead, 16 * rb, c0 * cb, lead_off, r0, k0, 16 * trb, c0 * tcb, seed


def _const_list(e) -> list[int]:
    assert all(isinstance(x, ConstInt) for x in e.items)
    return [x.value for x in e.items]


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_blocked_window_read_row_major_equals_the_logical_window(case):
    dtype, c0, lead, R, C, lead_off, r0, k0, TR, TC, seed = case
    shape = [*lead, R, C]
    offsets = [*lead_off, r0, k0]
    sizes = [1] * len(lead) + [TR, TC]
    src = ("@pl.program\nclass p:\n    @pl.function(type=pl.FunctionType.InCore)\n"
           f"    def k(self, w: pl.Tensor[{shape}, pl.{dtype}, pl.NZ]):\n"
           f"        wt: pl.Tile[[{TR}, {TC}], pl.{dtype}, pl.Mem.Mat] = "
           f"pl.tile.load(w, {offsets}, {sizes}, target_memory=pl.Mem.Mat)\n")
    out = BlockNzTensorViews().run(parse_program(src, "h.ir", ctx=CTX), CTX)
    blocked = [d.value for d in out.functions[0].params[0].type.shape]
    load = next(n for n in walk(out.functions[0]) if isinstance(n, Call) and n.op == "tile.load")
    b_off, b_size = _const_list(load.args[1]), _const_list(load.args[2])

    # the logical tensor, packed by the reference
    dt = _np_dtype(dtype)
    raw = BITS[dt.itemsize]
    rng = np.random.default_rng(seed)
    logical = rng.integers(0, np.iinfo(raw).max, size=shape, dtype=raw, endpoint=True).view(dt)
    packed = nz_pack.pack(logical)
    assert list(packed.shape) == blocked  # NZ-2: the pass's blocked shape is the packer's

    # NZ-3 / NZ-4: plain row-major addressing of the blocked shape with the pass's offsets and sizes
    strides = [int(np.prod(blocked[i + 1:], dtype=np.int64)) for i in range(5)]
    idx = np.indices(b_size).reshape(5, -1)
    linear = sum((b_off[i] + idx[i]) * strides[i] for i in range(5))
    window_image = packed.ravel()[linear]
    assert b_size == [1, TC // c0, TR // 16, 16, c0]

    want = logical[tuple(lead_off) + (slice(r0, r0 + TR), slice(k0, k0 + TC))]
    got = nz_pack.unpack(window_image, (TR, TC), c0)
    assert np.array_equal(got.view(raw), np.ascontiguousarray(want).view(raw))
