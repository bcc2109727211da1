"""ConvertTensorToTileOps: kernel tensor ops -> tile ops, entry loads, result stores into Out params."""

import textwrap

import pytest

from ptoc.context import CompileContext
from ptoc.diagnostics import CompileError
from ptoc.frontend.parser import parse_program
from ptoc.ir.printer import print_program
from ptoc.passes.ConvertTensorToTileOps import ConvertTensorToTileOps
from ptoc.passes.manager import run_pipeline

A2A3 = CompileContext(arch="a2a3")
A5 = CompileContext(arch="a5")

T = "pl.Tensor[[64, 128], pl.FP32]"
V = "pl.Tile[[64, 128], pl.FP32, pl.Mem.Vec]"


def program(*functions: str) -> str:
    out = ["@pl.program", "class p:"]
    for f in functions:
        out.append(textwrap.indent(textwrap.dedent(f).strip("\n"), "    "))
    return "\n".join(out) + "\n"


def run(text: str, ctx: CompileContext = A2A3):
    prog = parse_program(text, "before.ir", ctx=ctx)
    return prog, run_pipeline(prog, ctx, passes=[ConvertTensorToTileOps])


def assert_same(out, expected_text: str, ctx: CompileContext = A2A3):
    expected = parse_program(expected_text, "expected.ir", ctx=ctx)
    assert out == expected, f"got:\n{print_program(out)}\nexpected:\n{print_program(expected)}"


def rejected(text: str, ctx: CompileContext = A2A3):
    prog = parse_program(text, "before.ir", ctx=ctx)
    with pytest.raises(CompileError) as e:
        run_pipeline(prog, ctx, passes=[ConvertTensorToTileOps])
    (d,) = e.value.diagnostics
    return d


def test_vector_add_loads_both_tensors_and_stores_into_the_existing_out_param():
    before = program(f"""
        @pl.function(type=pl.FunctionType.InCore)
        def vadd(self, a: {T}, b: {T}, out: pl.Out[{T}]) -> {T}:
            c: {T} = pl.tensor.add(a, b)
            return c
    """)
    expected = program(f"""
        @pl.function(type=pl.FunctionType.InCore)
        def vadd(self, a: {T}, b: {T}, out: pl.Out[{T}]) -> {T}:
            a_tile: {V} = pl.tile.load(a, [0, 0], [64, 128], target_memory=pl.Mem.Vec)
            b_tile: {V} = pl.tile.load(b, [0, 0], [64, 128], target_memory=pl.Mem.Vec)
            c: {V} = pl.tile.add(a_tile, b_tile)
            c_store: {T} = pl.tile.store(c, [0, 0], out)
            return c_store
    """)
    _, out = run(before)
    assert_same(out, expected)


def test_tensor_scalar_ops_become_scalar_tile_ops():
    # OP-1: a scalar rhs of tensor.maximum dispatches to tile.maximums; pl.muls on a tensor is tensor.muls.
    before = program(f"""
        @pl.function(type=pl.FunctionType.InCore)
        def relu_scale(self, x: {T}, alpha: pl.Scalar[pl.FP32], y: pl.Out[{T}]) -> {T}:
            r: {T} = pl.tensor.maximum(x, 0.0)
            s: {T} = pl.muls(r, alpha)
            t: {T} = pl.tensor.adds(s, 1.0)
            return t
    """)
    expected = program(f"""
        @pl.function(type=pl.FunctionType.InCore)
        def relu_scale(self, x: {T}, alpha: pl.Scalar[pl.FP32], y: pl.Out[{T}]) -> {T}:
            x_tile: {V} = pl.tile.load(x, [0, 0], [64, 128], target_memory=pl.Mem.Vec)
            r: {V} = pl.tile.maximums(x_tile, 0.0)
            s: {V} = pl.tile.muls(r, alpha)
            t: {V} = pl.tile.adds(s, 1.0)
            t_store: {T} = pl.tile.store(t, [0, 0], y)
            return t_store
    """)
    _, out = run(before)
    assert_same(out, expected)


def test_bf16_matmul_reads_mat_tiles_loaded_at_the_product_and_stores_the_fp32_acc():
    # The cube operands stay in Mat here; InferTileMemorySpace moves them into Left / Right.
    before = program("""
        @pl.function(type=pl.FunctionType.InCore)
        def mm(self, a: pl.Tensor[[64, 256], pl.BF16], b: pl.Tensor[[256, 128], pl.BF16],
               c: pl.Out[pl.Tensor[[64, 128], pl.FP32]]) -> pl.Tensor[[64, 128], pl.FP32]:
            prod: pl.Tensor[[64, 128], pl.FP32] = pl.tensor.matmul(a, b)
            return prod
    """)
    expected = program("""
        @pl.function(type=pl.FunctionType.InCore)
        def mm(self, a: pl.Tensor[[64, 256], pl.BF16], b: pl.Tensor[[256, 128], pl.BF16],
               c: pl.Out[pl.Tensor[[64, 128], pl.FP32]]) -> pl.Tensor[[64, 128], pl.FP32]:
            a_mat: pl.Tile[[64, 256], pl.BF16, pl.Mem.Mat] = pl.tile.load(a, [0, 0], [64, 256], target_memory=pl.Mem.Mat)
            b_mat: pl.Tile[[256, 128], pl.BF16, pl.Mem.Mat] = pl.tile.load(b, [0, 0], [256, 128], target_memory=pl.Mem.Mat)
            prod: pl.Tile[[64, 128], pl.FP32, pl.Mem.Acc] = pl.tile.matmul(a_mat, b_mat)
            prod_store: pl.Tensor[[64, 128], pl.FP32] = pl.tile.store(prod, [0, 0], c)
            return prod_store
    """)
    _, out = run(before)
    assert_same(out, expected)


def test_matmul_acc_accumulates_in_acc_and_loads_its_operands_again():
    # Each product loads its own Mat operands where it stands (as PyPTO's conversion does).
    before = program("""
        @pl.function(type=pl.FunctionType.AIC)
        def mm2(self, a: pl.Tensor[[64, 256], pl.BF16], b: pl.Tensor[[256, 128], pl.BF16],
                c: pl.Out[pl.Tensor[[64, 128], pl.FP32]]) -> pl.Tensor[[64, 128], pl.FP32]:
            p0: pl.Tensor[[64, 128], pl.FP32] = pl.tensor.matmul(a, b)
            p1: pl.Tensor[[64, 128], pl.FP32] = pl.tensor.matmul_acc(p0, a, b)
            return p1
    """)
    expected = program("""
        @pl.function(type=pl.FunctionType.AIC)
        def mm2(self, a: pl.Tensor[[64, 256], pl.BF16], b: pl.Tensor[[256, 128], pl.BF16],
                c: pl.Out[pl.Tensor[[64, 128], pl.FP32]]) -> pl.Tensor[[64, 128], pl.FP32]:
            a_mat: pl.Tile[[64, 256], pl.BF16, pl.Mem.Mat] = pl.tile.load(a, [0, 0], [64, 256], target_memory=pl.Mem.Mat)
            b_mat: pl.Tile[[256, 128], pl.BF16, pl.Mem.Mat] = pl.tile.load(b, [0, 0], [256, 128], target_memory=pl.Mem.Mat)
            p0: pl.Tile[[64, 128], pl.FP32, pl.Mem.Acc] = pl.tile.matmul(a_mat, b_mat)
            a_mat_1: pl.Tile[[64, 256], pl.BF16, pl.Mem.Mat] = pl.tile.load(a, [0, 0], [64, 256], target_memory=pl.Mem.Mat)
            b_mat_1: pl.Tile[[256, 128], pl.BF16, pl.Mem.Mat] = pl.tile.load(b, [0, 0], [256, 128], target_memory=pl.Mem.Mat)
            p1: pl.Tile[[64, 128], pl.FP32, pl.Mem.Acc] = pl.tile.matmul_acc(p0, a_mat_1, b_mat_1)
            p1_store: pl.Tensor[[64, 128], pl.FP32] = pl.tile.store(p1, [0, 0], c)
            return p1_store
    """)
    _, out = run(before)
    assert_same(out, expected)


def test_kernel_without_out_param_gains_one_and_the_orchestration_call_passes_a_new_tensor():
    before = program(f"""
        @pl.function(type=pl.FunctionType.InCore)
        def vexp(self, x: {T}) -> {T}:
            e: {T} = pl.tensor.exp(x)
            return e
    """, f"""
        @pl.function(type=pl.FunctionType.Orchestration)
        def main(self, x: {T}) -> {T}:
            y: {T} = self.vexp(x)
            return y
    """)
    expected = program(f"""
        @pl.function(type=pl.FunctionType.InCore)
        def vexp(self, x: {T}, e_out: pl.Out[{T}]) -> {T}:
            x_tile: {V} = pl.tile.load(x, [0, 0], [64, 128], target_memory=pl.Mem.Vec)
            e: {V} = pl.tile.exp(x_tile)
            e_store: {T} = pl.tile.store(e, [0, 0], e_out)
            return e_store
    """, f"""
        @pl.function(type=pl.FunctionType.Orchestration)
        def main(self, x: {T}) -> {T}:
            e_out: {T} = pl.tensor.create([64, 128], dtype=pl.FP32)
            y: {T} = self.vexp(x, e_out)
            return y
    """)
    _, out = run(before)
    assert_same(out, expected)


def test_an_out_param_the_kernel_already_writes_is_not_reused():
    # `o` is written by the user's own store, so the computed result gets a new Out parameter.
    before = program(f"""
        @pl.function(type=pl.FunctionType.InCore)
        def two(self, x: {T}, o: pl.Out[{T}]) -> tuple[{T}, {T}]:
            xt: {V} = pl.tile.load(x, [0, 0], [64, 128], target_memory=pl.Mem.Vec)
            o1: {T} = pl.tile.store(xt, [0, 0], o)
            n: {T} = pl.tensor.neg(x)
            return o1, n
    """)
    expected = program(f"""
        @pl.function(type=pl.FunctionType.InCore)
        def two(self, x: {T}, o: pl.Out[{T}], n_out: pl.Out[{T}]) -> tuple[{T}, {T}]:
            x_tile: {V} = pl.tile.load(x, [0, 0], [64, 128], target_memory=pl.Mem.Vec)
            xt: {V} = pl.tile.load(x, [0, 0], [64, 128], target_memory=pl.Mem.Vec)
            o1: {T} = pl.tile.store(xt, [0, 0], o)
            n: {V} = pl.tile.neg(x_tile)
            n_store: {T} = pl.tile.store(n, [0, 0], n_out)
            return o1, n_store
    """)
    _, out = run(before)
    assert_same(out, expected)


def test_xor_gets_a_scratch_tile_of_its_operand_shape():
    # OP-2 / pto.txor: the tile xor forms need a scratch tile; the pass creates it.
    I = "pl.Tensor[[16, 64], pl.INT32]"
    IV = "pl.Tile[[16, 64], pl.INT32, pl.Mem.Vec]"
    before = program(f"""
        @pl.function(type=pl.FunctionType.InCore)
        def k(self, a: {I}, b: {I}, o: pl.Out[{I}]) -> {I}:
            x: {I} = pl.tensor.xor(a, b)
            y: {I} = pl.tensor.xors(x, 3)
            return y
    """)
    expected = program(f"""
        @pl.function(type=pl.FunctionType.InCore)
        def k(self, a: {I}, b: {I}, o: pl.Out[{I}]) -> {I}:
            a_tile: {IV} = pl.tile.load(a, [0, 0], [16, 64], target_memory=pl.Mem.Vec)
            b_tile: {IV} = pl.tile.load(b, [0, 0], [16, 64], target_memory=pl.Mem.Vec)
            x_tmp: {IV} = pl.tile.create([16, 64], dtype=pl.INT32, target_memory=pl.Mem.Vec)
            x: {IV} = pl.tile.xor(a_tile, b_tile, tmp=x_tmp)
            y_tmp: {IV} = pl.tile.create([16, 64], dtype=pl.INT32, target_memory=pl.Mem.Vec)
            y: {IV} = pl.tile.xors(x, 3, tmp=y_tmp)
            y_store: {I} = pl.tile.store(y, [0, 0], o)
            return y_store
    """)
    _, out = run(before)
    assert_same(out, expected)


def test_loop_carried_tensor_becomes_a_tile_seeded_by_the_entry_load():
    before = program(f"""
        @pl.function(type=pl.FunctionType.InCore)
        def acc4(self, x: {T}, y: {T}, o: pl.Out[{T}]) -> {T}:
            for i, (acc,) in pl.range(4, init_values=(x,)):
                nxt: {T} = pl.tensor.add(acc, y)
                acc_out: {T} = pl.yield_(nxt)
            return acc_out
    """)
    expected = program(f"""
        @pl.function(type=pl.FunctionType.InCore)
        def acc4(self, x: {T}, y: {T}, o: pl.Out[{T}]) -> {T}:
            x_tile: {V} = pl.tile.load(x, [0, 0], [64, 128], target_memory=pl.Mem.Vec)
            y_tile: {V} = pl.tile.load(y, [0, 0], [64, 128], target_memory=pl.Mem.Vec)
            for i, (acc,) in pl.range(4, init_values=(x_tile,)):
                nxt: {V} = pl.tile.add(acc, y_tile)
                acc_out: {V} = pl.yield_(nxt)
            acc_out_store: {T} = pl.tile.store(acc_out, [0, 0], o)
            return acc_out_store
    """)
    _, out = run(before)
    assert_same(out, expected)


def test_entry_load_carries_the_tensor_valid_shape():
    P = "pl.Tensor[[64, 128], pl.FP32, pl.TensorView(valid_shape=[50, 128])]"
    before = program(f"""
        @pl.function(type=pl.FunctionType.InCore)
        def k(self, x: {P}, o: pl.Out[{T}]) -> {T}:
            e: {T} = pl.tensor.abs(x)
            return e
    """)
    VV = "pl.Tile[[64, 128], pl.FP32, pl.Mem.Vec, pl.TileView(valid_shape=[50, 128])]"
    expected = program(f"""
        @pl.function(type=pl.FunctionType.InCore)
        def k(self, x: {P}, o: pl.Out[{T}]) -> {T}:
            x_tile: {VV} = pl.tile.load(x, [0, 0], [64, 128], [50, 128], target_memory=pl.Mem.Vec)
            e: {VV} = pl.tile.abs(x_tile)
            e_store: {T} = pl.tile.store(e, [0, 0], o)
            return e_store
    """)
    _, out = run(before)
    assert_same(out, expected)


@pytest.fixture
def tensor_slice():
    """tensor.slice(input, shape, offset, valid_shape=None), registered for the test when the layout family
    does not provide it yet."""
    from ptoc.ops import registry
    from ptoc.ops.common import int_list, new_tensor

    registry.load_all()
    if "tensor.slice" in registry.REGISTRY:
        yield
        return

    def rule(args):
        t = args.tensor("input")
        shape = int_list(args, "shape")
        int_list(args, "offset")
        valid = int_list(args, "valid_shape", required=False)
        return new_tensor(shape, t.dtype, valid) if t is not None else None

    registry.register("tensor.slice", ("input", "shape", "offset"), optional=(("valid_shape", None),),
                      family="layout")(rule)
    try:
        yield
    finally:
        del registry.REGISTRY["tensor.slice"]


def test_slice_of_a_parameter_becomes_the_load_window(tensor_slice):
    S = "pl.Tensor[[16, 128], pl.FP32]"
    SV = "pl.Tile[[16, 128], pl.FP32, pl.Mem.Vec]"
    before = program(f"""
        @pl.function(type=pl.FunctionType.InCore)
        def k(self, x: {T}, r0: pl.Scalar[pl.INDEX], o: pl.Out[{S}]) -> {S}:
            w: {S} = pl.tensor.slice(x, [16, 128], [r0, 0])
            e: {S} = pl.tensor.exp(w)
            return e
    """)
    expected = program(f"""
        @pl.function(type=pl.FunctionType.InCore)
        def k(self, x: {T}, r0: pl.Scalar[pl.INDEX], o: pl.Out[{S}]) -> {S}:
            w: {SV} = pl.tile.load(x, [r0, 0], [16, 128], target_memory=pl.Mem.Vec)
            e: {SV} = pl.tile.exp(w)
            e_store: {S} = pl.tile.store(e, [0, 0], o)
            return e_store
    """)
    _, out = run(before)
    assert_same(out, expected)


def test_running_twice_changes_nothing():
    before = program(f"""
        @pl.function(type=pl.FunctionType.InCore)
        def vexp(self, x: {T}, s: pl.Scalar[pl.FP32]) -> {T}:
            e: {T} = pl.tensor.exp(x)
            f: {T} = pl.tensor.muls(e, s)
            return f
    """, f"""
        @pl.function(type=pl.FunctionType.Orchestration)
        def main(self, x: {T}) -> {T}:
            y: {T} = self.vexp(x, 2.0)
            return y
    """)
    _, once = run(before)
    twice = run_pipeline(once, A2A3, passes=[ConvertTensorToTileOps])
    assert twice is once


def test_a_kernel_already_on_tiles_passes_through_unchanged():
    text = program(f"""
        @pl.function(type=pl.FunctionType.InCore)
        def k(self, x: {T}, n: pl.Scalar[pl.INDEX], o: pl.Out[{T}]) -> {T}:
            rows: pl.Scalar[pl.INDEX] = pl.tensor.dim(x, 0)
            xt: {V} = pl.tile.load(x, [0, 0], [64, 128], target_memory=pl.Mem.Vec)
            o1: {T} = pl.tile.store(xt, [0, 0], o)
            return o1
    """)
    prog, out = run(text)
    assert out is prog


def test_a_transposed_operand_is_its_natural_mat_tile_read_through_a_transposed_view():
    # a is [K, M] in memory: the product reads it as [M, K] without moving data
    prog, out = run(program("""
        @pl.function(type=pl.FunctionType.InCore)
        def mm(self, a: pl.Tensor[[256, 64], pl.BF16], b: pl.Tensor[[256, 128], pl.BF16],
               c_out: pl.Out[pl.Tensor[[64, 128], pl.FP32]]) -> pl.Tensor[[64, 128], pl.FP32]:
            c: pl.Tensor[[64, 128], pl.FP32] = pl.tensor.matmul(a, b, a_trans=True)
            return c
    """))
    text = print_program(out)
    assert "a_mat: pl.Tile[[256, 64], pl.BF16, pl.Mem.Mat] = pl.tile.load(a, [0, 0], [256, 64]" in text
    assert "a_mat_t: pl.Tile[[64, 256], pl.BF16, pl.Mem.Mat" in text and "pl.tile.transpose_view(a_mat)" in text
    assert "pl.tile.matmul(a_mat_t, b_mat)" in text


def test_a_matmul_with_an_nz_result_is_rejected_naming_the_op():
    d = rejected(program("""
        @pl.function(type=pl.FunctionType.InCore)
        def mm(self, a: pl.Tensor[[64, 256], pl.BF16], b: pl.Tensor[[256, 128], pl.BF16]) -> pl.Tensor[[64, 128], pl.FP32]:
            c: pl.Tensor[[64, 128], pl.FP32] = pl.tensor.matmul(a, b, c_matrix_nz=True)
            return c
    """))
    assert d.code == "PTOC-E0300"
    assert d.span.line == 5
    assert "pl.tensor.matmul" in d.message and "not supported in a kernel yet" in d.message


def test_op_without_a_one_to_one_tile_form_is_rejected():
    # tensor.scatter(input, index, src) and tile.scatter(dst, src, indexes) take different operands.
    d = rejected(program("""
        @pl.function(type=pl.FunctionType.InCore)
        def sc(self, x: pl.Tensor[[16, 64], pl.FP32], i: pl.Tensor[[16, 8], pl.INT32],
               s: pl.Tensor[[16, 8], pl.FP32]) -> pl.Tensor[[16, 64], pl.FP32]:
            y: pl.Tensor[[16, 64], pl.FP32] = pl.tensor.scatter(x, i, s, dim=-1)
            return y
    """))
    assert d.code == "PTOC-E0300"
    assert d.span.line == 6
    assert "pl.tensor.scatter is not supported in a kernel yet" in d.message


def test_matmul_result_read_by_a_vector_op_needs_acc_to_vec():
    # MOV-6: A2/A3 has no Acc -> Vec TMOV, A5 does.
    text = program("""
        @pl.function(type=pl.FunctionType.InCore)
        def mm(self, a: pl.Tensor[[64, 64], pl.FP32], b: pl.Tensor[[64, 64], pl.FP32]) -> pl.Tensor[[64, 64], pl.FP32]:
            c: pl.Tensor[[64, 64], pl.FP32] = pl.tensor.matmul(a, b)
            d: pl.Tensor[[64, 64], pl.FP32] = pl.tensor.exp(c)
            return d
    """)
    d = rejected(text, A2A3)
    assert (d.code, d.rule, d.span.line) == ("PTOC-E0301", "MOV-6", 6)
    _, out = run(text, A5)
    moves = [s for s in out.functions[0].body if getattr(s, "target", None) is not None
             and s.target.name == "c_vec"]
    assert len(moves) == 1 and moves[0].value.op == "tile.move" and moves[0].annotation.memory == "Vec"


def test_kernel_calling_a_kernel_that_needs_a_new_out_param_is_rejected():
    d = rejected(program(f"""
        @pl.function(type=pl.FunctionType.InCore)
        def inner(self, x: {T}) -> {T}:
            e: {T} = pl.tensor.exp(x)
            return e
    """, f"""
        @pl.function(type=pl.FunctionType.InCore)
        def outer(self, x: {T}) -> {T}:
            y: {T} = self.inner(x)
            return y
    """))
    assert (d.code, d.span.line) == ("PTOC-E0302", 9)


def test_tile_code_next_to_tensor_ops_is_kept():
    before = program(f"""
        @pl.function(type=pl.FunctionType.InCore)
        def mixed(self, x: {T}, o: pl.Out[{T}]) -> {T}:
            xt: {V} = pl.tile.load(x, [0, 0], [64, 128], target_memory=pl.Mem.Vec)
            for i, (acc,) in pl.range(2, init_values=(xt,)):
                nxt: {V} = pl.tile.add(acc, xt)
                acc_out: {V} = pl.yield_(nxt)
            e: {T} = pl.tensor.exp(x)
            return e
    """)
    expected = program(f"""
        @pl.function(type=pl.FunctionType.InCore)
        def mixed(self, x: {T}, o: pl.Out[{T}]) -> {T}:
            x_tile: {V} = pl.tile.load(x, [0, 0], [64, 128], target_memory=pl.Mem.Vec)
            xt: {V} = pl.tile.load(x, [0, 0], [64, 128], target_memory=pl.Mem.Vec)
            for i, (acc,) in pl.range(2, init_values=(xt,)):
                nxt: {V} = pl.tile.add(acc, xt)
                acc_out: {V} = pl.yield_(nxt)
            e: {V} = pl.tile.exp(x_tile)
            e_store: {T} = pl.tile.store(e, [0, 0], o)
            return e_store
    """)
    _, out = run(before)
    assert_same(out, expected)


def test_assemble_loads_its_source_where_it_stands_into_a_created_tile():
    # tensor.create -> tile.create; each assembled piece is loaded right before its assemble.
    T1 = "pl.Tensor[[1, 32], pl.FP32]"
    before = program(f"""
        @pl.function(type=pl.FunctionType.InCore)
        def cat(self, a: {T1}, b: {T1}, o: pl.Out[pl.Tensor[[1, 64], pl.FP32]]) -> pl.Tensor[[1, 64], pl.FP32]:
            t: pl.Tensor[[1, 64], pl.FP32] = pl.tensor.create([1, 64], dtype=pl.FP32)
            t1: pl.Tensor[[1, 64], pl.FP32] = pl.tensor.assemble(t, a, [0, 0])
            t2: pl.Tensor[[1, 64], pl.FP32] = pl.tensor.assemble(t1, b, [0, 32])
            return t2
    """)
    V1, V2 = "pl.Tile[[1, 32], pl.FP32, pl.Mem.Vec]", "pl.Tile[[1, 64], pl.FP32, pl.Mem.Vec]"
    expected = program(f"""
        @pl.function(type=pl.FunctionType.InCore)
        def cat(self, a: {T1}, b: {T1}, o: pl.Out[pl.Tensor[[1, 64], pl.FP32]]) -> pl.Tensor[[1, 64], pl.FP32]:
            t: {V2} = pl.tile.create([1, 64], dtype=pl.FP32, target_memory=pl.Mem.Vec)
            a_tile: {V1} = pl.tile.load(a, [0, 0], [1, 32], target_memory=pl.Mem.Vec)
            t1: {V2} = pl.tile.assemble(t, a_tile, [0, 0])
            b_tile: {V1} = pl.tile.load(b, [0, 0], [1, 32], target_memory=pl.Mem.Vec)
            t2: {V2} = pl.tile.assemble(t1, b_tile, [0, 32])
            t2_store: pl.Tensor[[1, 64], pl.FP32] = pl.tile.store(t2, [0, 0], o)
            return t2_store
    """)
    _, out = run(before)
    assert_same(out, expected)


LOOP_CAT = """
    @pl.function(type=pl.FunctionType.InCore)
    def cat(self, x: pl.Tensor[[16, 32], pl.FP32]) -> pl.Tensor[[16, 128], pl.FP32]:
        buf: pl.Tensor[[16, 128], pl.FP32] = pl.tensor.create([16, 128], dtype=pl.FP32)
        for i, (acc,) in pl.range(4, init_values=(buf,)):
            off: pl.Scalar[pl.INDEX] = i * 32
            e: pl.Tensor[[16, 32], pl.FP32] = pl.tensor.exp(x)
            nxt: pl.Tensor[[16, 128], pl.FP32] = pl.tensor.assemble(acc, {target}, [0, off])
            r: pl.Tensor[[16, 128], pl.FP32] = pl.yield_(nxt)
        return r
"""


def test_returned_assemble_loop_stores_each_piece_into_the_out_param():
    # The loop carries the new Out tensor; each 16 x 32 piece is stored at its column offset.
    before = program(LOOP_CAT.format(target="e"))
    expected = program("""
        @pl.function(type=pl.FunctionType.InCore)
        def cat(self, x: pl.Tensor[[16, 32], pl.FP32], r_out: pl.Out[pl.Tensor[[16, 128], pl.FP32]]) -> pl.Tensor[[16, 128], pl.FP32]:
            x_tile: pl.Tile[[16, 32], pl.FP32, pl.Mem.Vec] = pl.tile.load(x, [0, 0], [16, 32], target_memory=pl.Mem.Vec)
            for i, (acc,) in pl.range(4, init_values=(r_out,)):
                off: pl.Scalar[pl.INDEX] = i * 32
                e: pl.Tile[[16, 32], pl.FP32, pl.Mem.Vec] = pl.tile.exp(x_tile)
                nxt: pl.Tensor[[16, 128], pl.FP32] = pl.tile.store(e, [0, off], acc)
                r: pl.Tensor[[16, 128], pl.FP32] = pl.yield_(nxt)
            return r
    """)
    _, out = run(before)
    assert_same(out, expected)


def test_assemble_loop_reading_its_own_carry_keeps_the_whole_tile():
    # Here the piece is a slice of the carried value itself: the loop must keep the tile it builds.
    before = program(LOOP_CAT.format(target="e").replace(
        "e: pl.Tensor[[16, 32], pl.FP32] = pl.tensor.exp(x)",
        "e: pl.Tensor[[16, 32], pl.FP32] = pl.tensor.slice(acc, [16, 32], [0, 0])"))
    _, out = run(before)
    text = print_program(out)
    assert "pl.tile.create([16, 128]" in text and "pl.tile.assemble(acc, e, [0, off])" in text
    assert "pl.tile.store(r, [0, 0], r_out)" in text


def test_element_read_of_a_tensor_nothing_loads_stays_a_global_read():
    # config is only read element-wise: no load; the scalar comes straight from global memory.
    T4, T64 = "pl.Tensor[[4], pl.FP32]", "pl.Tensor[[64], pl.FP32]"
    before = program(f"""
        @pl.function(type=pl.FunctionType.InCore)
        def k(self, config: {T4}, x: {T64}, o: pl.Out[{T64}]) -> {T64}:
            scale: pl.Scalar[pl.FP32] = pl.tensor.read(config, [0])
            y: {T64} = pl.tensor.mul(x, scale)
            return y
    """)
    expected = program(f"""
        @pl.function(type=pl.FunctionType.InCore)
        def k(self, config: {T4}, x: {T64}, o: pl.Out[{T64}]) -> {T64}:
            x_tile: pl.Tile[[64], pl.FP32, pl.Mem.Vec] = pl.tile.load(x, [0], [64], target_memory=pl.Mem.Vec)
            scale: pl.Scalar[pl.FP32] = pl.tensor.read(config, [0])
            y: pl.Tile[[64], pl.FP32, pl.Mem.Vec] = pl.tile.muls(x_tile, scale)
            y_store: {T64} = pl.tile.store(y, [0], o)
            return y_store
    """)
    _, out = run(before)
    assert_same(out, expected)


def test_element_access_of_tiles_becomes_tile_read_and_write():
    # a is loaded for the add anyway, so its element is read from the tile; t is computed on tiles.
    T4 = "pl.Tensor[[4], pl.FP32]"
    V4 = "pl.Tile[[4], pl.FP32, pl.Mem.Vec]"
    before = program(f"""
        @pl.function(type=pl.FunctionType.InCore)
        def k(self, a: {T4}, b: {T4}) -> pl.Scalar[pl.FP32]:
            t: {T4} = pl.tensor.add(a, b)
            val: pl.Scalar[pl.FP32] = pl.tensor.read(a, [0])
            pl.tensor.write(t, [1], val)
            v: pl.Scalar[pl.FP32] = pl.tensor.read(t, [1])
            return v
    """)
    expected = program(f"""
        @pl.function(type=pl.FunctionType.InCore)
        def k(self, a: {T4}, b: {T4}) -> pl.Scalar[pl.FP32]:
            a_tile: {V4} = pl.tile.load(a, [0], [4], target_memory=pl.Mem.Vec)
            b_tile: {V4} = pl.tile.load(b, [0], [4], target_memory=pl.Mem.Vec)
            t: {V4} = pl.tile.add(a_tile, b_tile)
            val: pl.Scalar[pl.FP32] = pl.tile.read(a_tile, [0])
            pl.tile.write(t, [1], val)
            v: pl.Scalar[pl.FP32] = pl.tile.read(t, [1])
            return v
    """)
    _, out = run(before)
    assert_same(out, expected)


def test_in_param_the_kernel_stores_into_becomes_inout_and_so_does_the_callers():
    # x is loaded and then overwritten: InOut; main passes its own x, so main's x is InOut too.
    T = "pl.Tensor[[16, 64], pl.FP32]"
    kernel_body = """
            t: pl.Tile[[16, 64], pl.FP32, pl.Mem.Vec] = pl.tile.load(x, [0, 0], [16, 64], target_memory=pl.Mem.Vec)
            u: pl.Tile[[16, 64], pl.FP32, pl.Mem.Vec] = pl.tile.muls(t, 2.0)
            r: {T} = pl.tile.store(u, [0, 0], x)
            return r
    """.format(T=T)
    main = """
        @pl.function(type=pl.FunctionType.Orchestration)
        def main(self, x: {X}) -> {T}:
            y: {T} = self.scale(x)
            return y
    """
    before = program(f"""
        @pl.function(type=pl.FunctionType.InCore)
        def scale(self, x: {T}) -> {T}:
    """ + kernel_body, main.format(X=T, T=T))
    expected = program(f"""
        @pl.function(type=pl.FunctionType.InCore)
        def scale(self, x: pl.InOut[{T}]) -> {T}:
    """ + kernel_body, main.format(X=f"pl.InOut[{T}]", T=T))
    _, out = run(before)
    assert_same(out, expected)


def test_written_only_param_becomes_out_and_soft_syncall_workspace_inout():
    before = program("""
        @pl.function(type=pl.FunctionType.InCore)
        def w(self, o: pl.Tensor[[4], pl.FP32], s: pl.Scalar[pl.FP32], ws: pl.Tensor[[16], pl.INT32]):
            pl.tensor.write(o, [0], s)
            pl.system.syncall(mode="soft", core_type="aiv_only", gm_workspace=ws, used_cores=0)
            return
    """)
    expected = program("""
        @pl.function(type=pl.FunctionType.InCore)
        def w(self, o: pl.Out[pl.Tensor[[4], pl.FP32]], s: pl.Scalar[pl.FP32], ws: pl.InOut[pl.Tensor[[16], pl.INT32]]):
            pl.tensor.write(o, [0], s)
            pl.system.syncall(mode="soft", core_type="aiv_only", gm_workspace=ws, used_cores=0)
            return
    """)
    _, out = run(before)
    assert_same(out, expected)


def test_merge_sort_of_four_lists_gets_a_scratch_tile_of_the_merged_shape():
    S = "pl.Tensor[[1, 64], pl.FP32]"
    M = "pl.Tensor[[1, 256], pl.FP32]"
    SV = "pl.Tile[[1, 64], pl.FP32, pl.Mem.Vec]"
    MV = "pl.Tile[[1, 256], pl.FP32, pl.Mem.Vec]"
    before = program(f"""
        @pl.function(type=pl.FunctionType.InCore)
        def k(self, a: {S}, b: {S}, c: {S}, d: {S}, o: pl.Out[{M}]) -> {M}:
            m: {M} = pl.tensor.mrgsort_format2(a, b, c, d)
            return m
    """)
    expected = program(f"""
        @pl.function(type=pl.FunctionType.InCore)
        def k(self, a: {S}, b: {S}, c: {S}, d: {S}, o: pl.Out[{M}]) -> {M}:
            a_tile: {SV} = pl.tile.load(a, [0, 0], [1, 64], target_memory=pl.Mem.Vec)
            b_tile: {SV} = pl.tile.load(b, [0, 0], [1, 64], target_memory=pl.Mem.Vec)
            c_tile: {SV} = pl.tile.load(c, [0, 0], [1, 64], target_memory=pl.Mem.Vec)
            d_tile: {SV} = pl.tile.load(d, [0, 0], [1, 64], target_memory=pl.Mem.Vec)
            m_tmp: {MV} = pl.tile.create([1, 256], dtype=pl.FP32, target_memory=pl.Mem.Vec)
            m: {MV} = pl.tile.mrgsort_format2(a_tile, b_tile, c_tile, d_tile, tmp=m_tmp)
            m_store: {M} = pl.tile.store(m, [0, 0], o)
            return m_store
    """)
    _, out = run(before)
    assert_same(out, expected)


def test_batched_matmul_with_a_transposed_rhs_reads_a_transposed_view_of_the_natural_load():
    before = program("""
        @pl.function(type=pl.FunctionType.InCore)
        def k(self, a: pl.Tensor[[2, 16, 32], pl.BF16], b: pl.Tensor[[2, 64, 32], pl.BF16],
              o: pl.Out[pl.Tensor[[2, 16, 64], pl.FP32]]) -> pl.Tensor[[2, 16, 64], pl.FP32]:
            c: pl.Tensor[[2, 16, 64], pl.FP32] = pl.tensor.matmul(a, b, b_trans=True, out_dtype=pl.FP32)
            return c
    """)
    _, out = run(before, A5)
    text = print_program(out)
    assert "b_mat: pl.Tile[[2, 64, 32], pl.BF16, pl.Mem.Mat] = pl.tile.load(b, [0, 0, 0], [2, 64, 32]" in text
    assert "b_mat_t: pl.Tile[[2, 32, 64], pl.BF16, pl.Mem.Mat" in text
    assert "c: pl.Tile[[2, 16, 64], pl.FP32, pl.Mem.Acc" in text and "pl.tile.batch_matmul(a_mat, b_mat_t)" in text


W = "pld.DistributedTensor[[16, 64], pl.FP16]"


def test_a_put_stages_through_a_vec_tile_and_the_window_it_writes_becomes_out():
    before = program(f"""
        @pl.function(type=pl.FunctionType.InCore)
        def k(self, dst: {W}, src: {W}, peer: pl.Scalar[pl.INT32]):
            pld.tensor.put(dst, peer=peer, src=src, chunk_rows=8, chunk_cols=32, pipeline=True)
    """)
    expected = program(f"""
        @pl.function(type=pl.FunctionType.InCore)
        def k(self, dst: pl.Out[{W}], src: {W}, peer: pl.Scalar[pl.INT32]):
            tput_stage_ping: pl.Tile[[8, 32], pl.FP16, pl.Mem.Vec] = pl.tile.create([8, 32], dtype=pl.FP16, target_memory=pl.Mem.Vec)
            tput_stage_pong: pl.Tile[[8, 32], pl.FP16, pl.Mem.Vec] = pl.tile.create([8, 32], dtype=pl.FP16, target_memory=pl.Mem.Vec)
            pld.tile.put(dst, peer, src, tput_stage_ping, stage2=tput_stage_pong)
    """)
    _, out = run("import pypto.language.distributed as pld\n" + before)
    assert_same(out, "import pypto.language.distributed as pld\n" + expected)


def test_a_get_of_a_rank_3_window_stages_through_its_rows_and_columns():
    W3 = "pld.DistributedTensor[[2, 8, 64], pl.FP16]"
    before = program(f"""
        @pl.function(type=pl.FunctionType.InCore)
        def k(self, dst: {W3}, src: {W3}, peer: pl.Scalar[pl.INT32]):
            pld.tensor.get(dst, peer=peer, src=src)
    """)
    expected = program(f"""
        @pl.function(type=pl.FunctionType.InCore)
        def k(self, dst: pl.Out[{W3}], src: {W3}, peer: pl.Scalar[pl.INT32]):
            tget_stage: pl.Tile[[16, 64], pl.FP16, pl.Mem.Vec] = pl.tile.create([16, 64], dtype=pl.FP16, target_memory=pl.Mem.Vec)
            pld.tile.get(dst, peer, src, tget_stage)
    """)
    _, out = run("import pypto.language.distributed as pld\n" + before)
    assert_same(out, "import pypto.language.distributed as pld\n" + expected)


def test_a_remote_store_of_a_computed_value_pushes_the_tile():
    T16 = "pl.Tensor[[16, 64], pl.FP16]"
    V16 = "pl.Tile[[16, 64], pl.FP16, pl.Mem.Vec]"
    before = program(f"""
        @pl.function(type=pl.FunctionType.InCore)
        def k(self, x: {T16}, dst: {W}, peer: pl.Scalar[pl.INT32]):
            y: {T16} = pl.tensor.adds(x, 1.0)
            pld.tensor.remote_store(y, dst, peer, [0, 0])
    """)
    expected = program(f"""
        @pl.function(type=pl.FunctionType.InCore)
        def k(self, x: {T16}, dst: pl.Out[{W}], peer: pl.Scalar[pl.INT32]):
            x_tile: {V16} = pl.tile.load(x, [0, 0], [16, 64], target_memory=pl.Mem.Vec)
            y: {V16} = pl.tile.adds(x_tile, 1.0)
            pld.tile.remote_store(y, dst, peer, [0, 0])
    """)
    _, out = run("import pypto.language.distributed as pld\n" + before)
    assert_same(out, "import pypto.language.distributed as pld\n" + expected)


@pytest.mark.parametrize("src_shape,expected_body", [
    ("[1, 4, 8]", """
        src_in: pl.Tile[[1, 4, 8], pl.FP16, pl.Mem.Vec] = pl.tile.load(src, [0, 0, 0], [1, 4, 8], [1, 4, 8], target_memory=pl.Mem.Vec)
        for i, (acc,) in pl.range(3, init_values=(dst,)):
            put: pl.Tensor[[3, 4, 8], pl.FP16] = pl.tile.store(src_in, [i, 0, 0], acc)
            res = pl.yield_(put)
        y: pl.Tensor[[3, 4, 8], pl.FP16] = res
    """),
    ("[3, 1, 8]", """
        for i, (acc,) in pl.range(3, init_values=(dst,)):
            row: pl.Tile[[1, 1, 8], pl.FP16, pl.Mem.Vec] = pl.tile.load(src, [i, 0, 0], [1, 1, 8], [1, 1, 8], target_memory=pl.Mem.Vec)
            full: pl.Tile[[1, 4, 8], pl.FP16, pl.Mem.Vec] = pl.tile.create([1, 4, 8], dtype=pl.FP16, target_memory=pl.Mem.Vec)
            col: pl.Tile[[1, 4, 8], pl.FP16, pl.Mem.Vec] = pl.tile.col_expand(full, row)
            put: pl.Tensor[[3, 4, 8], pl.FP16] = pl.tile.store(col, [i, 0, 0], acc)
            res = pl.yield_(put)
        y: pl.Tensor[[3, 4, 8], pl.FP16] = res
    """),
    ("[3, 4, 1]", """
        src_in: pl.Tile[[3, 4, 1], pl.FP16, pl.Mem.Vec] = pl.tile.load(src, [0, 0, 0], [3, 4, 1], [3, 4, 1], target_memory=pl.Mem.Vec)
        full: pl.Tile[[3, 4, 8], pl.FP16, pl.Mem.Vec] = pl.tile.create([3, 4, 8], dtype=pl.FP16, target_memory=pl.Mem.Vec)
        rows: pl.Tile[[3, 4, 8], pl.FP16, pl.Mem.Vec] = pl.tile.row_expand(full, src_in)
        y: pl.Tensor[[3, 4, 8], pl.FP16] = pl.tile.store(rows, [0, 0, 0], dst)
    """),
])
def test_expand_clone_writes_the_target_along_the_broadcast_axis(src_shape, expected_body):
    D = "pl.Tensor[[3, 4, 8], pl.FP16]"
    S = f"pl.Tensor[{src_shape}, pl.FP16]"
    before = program(f"""
        @pl.function(type=pl.FunctionType.InCore)
        def k(self, src: {S}, dst: {D}) -> {D}:
            y: {D} = pl.tensor.expand_clone(src, dst)
            return y
    """)
    body = textwrap.indent(textwrap.dedent(expected_body).strip("\n") + "\nreturn y", " " * 8)
    expected = ("@pl.program\nclass p:\n    @pl.function(type=pl.FunctionType.InCore)\n"
                f"    def k(self, src: {S}, dst: pl.Out[{D}]) -> {D}:\n{body}\n")
    _, out = run(before)
    got = print_program(out)
    want = print_program(parse_program(expected, "expected.ir", ctx=A2A3))
    # the pass's temporaries have names of its own: compare with the names renamed in order of appearance
    assert _renamed(got) == _renamed(want), got


def _renamed(text: str) -> str:
    """`text` from `def k` on, with every local name renamed n0, n1, ... in order of appearance."""
    import re

    keep = {"pl", "pld", "self", "k", "src", "dst", "y", "for", "in", "def", "return", "init_values",
            "target_memory", "dtype"}
    names: dict[str, str] = {}

    def sub(m):
        w = m.group(0)
        return w if w in keep else names.setdefault(w, f"n{len(names)}")

    return re.sub(r"(?<![.\w])[a-z_][a-z0-9_]*\b", sub, text.split("def k", 1)[1])


GATHER_BEFORE = """
    @pl.function(type=pl.FunctionType.InCore)
    def g(self, src: pl.Tensor[[4, 24], pl.FP32], idx: pl.Tensor[[4, 5], pl.INT32],
          o: pl.Out[pl.Tensor[[4, 5], pl.FP32]]) -> pl.Tensor[[4, 5], pl.FP32]:
        r: pl.Tensor[[4, 5], pl.FP32] = pl.tensor.gather(src, dim=-1, index=idx)
        return r
"""


def test_gather_on_a5_is_one_whole_tile_gather_with_flat_indices():
    _, out = run(program(GATHER_BEFORE), A5)
    lines = [ln.strip() for ln in print_program(out).splitlines() if " = pl." in ln]
    ops = [ln.split("= ", 1)[1].split("(", 1)[0] for ln in lines]
    # 5 index columns are not a 32-byte INT32 row: the row offsets are added with row_expand_add
    assert ops == ["pl.tile.load", "pl.tile.load", "pl.tile.ci", "pl.tile.reshape", "pl.tile.muls",
                   "pl.tile.row_expand_add", "pl.tile.create", "pl.tile.gather", "pl.tile.store"]
    text = "\n".join(lines)
    assert "pl.tile.ci(pl.const(0, pl.INT32), [1, 4], dtype=pl.INT32, descending=False)" in text
    assert "pl.tile.muls(gather_row_arange, pl.const(24, pl.INT32))" in text


def test_gather_elsewhere_gathers_row_by_row_and_assembles():
    _, out = run(program(GATHER_BEFORE), A2A3)
    text = print_program(out)
    assert "for gather_lv, (gather_ia,) in pl.range(4, init_values=(gather_acc_init,)):" in text
    assert "pl.tile.load(src, [gather_lv, 0], [1, 24], [1, 24], target_memory=pl.Mem.Vec)" in text
    assert "pl.tile.gather(gather_inp_row, gather_idx_row, gather_row_tmp)" in text
    assert "pl.tile.assemble(gather_ia, gather_row, [gather_lv, 0])" in text
    assert "r: pl.Tile[[4, 5], pl.FP32, pl.Mem.Vec] = gather_rv" in text


def test_gather_along_the_first_axis_is_rejected_naming_the_op():
    d = rejected(program(GATHER_BEFORE.replace("dim=-1", "dim=0").replace("[4, 5]", "[2, 24]")), A5)
    assert d.code == "PTOC-E0300" and "pl.tensor.gather" in d.message


def test_ci_becomes_tile_ci_with_its_start_in_the_sequence_dtype():
    I = "pl.Tensor[[1, 32], pl.INT32]"
    IV = "pl.Tile[[1, 32], pl.INT32, pl.Mem.Vec]"
    before = program(f"""
        @pl.function(type=pl.FunctionType.InCore)
        def k(self, x: {I}, o: pl.Out[{I}]) -> {I}:
            s: {I} = pl.tensor.ci(3, [1, 32], dtype=pl.INT32, descending=True)
            y: {I} = pl.tensor.add(s, x)
            return y
    """)
    expected = program(f"""
        @pl.function(type=pl.FunctionType.InCore)
        def k(self, x: {I}, o: pl.Out[{I}]) -> {I}:
            x_tile: {IV} = pl.tile.load(x, [0, 0], [1, 32], target_memory=pl.Mem.Vec)
            s: {IV} = pl.tile.ci(pl.const(3, pl.INT32), [1, 32], dtype=pl.INT32, descending=True)
            y: {IV} = pl.tile.add(s, x_tile)
            y_store: {I} = pl.tile.store(y, [0, 0], o)
            return y_store
    """)
    _, out = run(before)
    assert_same(out, expected)
