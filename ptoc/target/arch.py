"""Per-target hardware facts (DESIGN.md: "Target facts live in target/arch.py").

Two targets: `a2a3` (Ascend910B family, A2/A3) and `a5` (Ascend950). Each is one frozen `Arch`
reachable by name through `get_arch`. Passes and type rules read these facts through the compile
context's arch name (`args.arch`); none of them tests an arch name inline.

What lives here:
- on-chip memory capacities per memory space, in bytes (Vec is the usable part of the UB);
- the 32-byte alignment unit, the 16-row fractal, Acc rows padded to 16, c0 per dtype (NZ-1);
- whether packed FP4 executes (FP4-3: a5 only);
- the matmul operand -> accumulator dtype pairs the cube unit has (pto-isa TMATMUL);
- the TMOV legality tables (MOV-6, `spec/003_tmov_reference_en.md`, "A2A3 / A5 implementation checks").

Memory spaces are named as in the IR (`pl.Mem.X`): Vec, Mat, Left, Right, Acc, Bias, LeftScale,
RightScale. pto-isa's `TileType::ScaleLeft/ScaleRight` are the IR's LeftScale/RightScale;
`TileType::Scaling` (the fixpipe quantisation-parameter buffer) has no IR memory space and appears
only in the TMOV tables, spelled "Scaling".
"""

from __future__ import annotations

from ptoc.lazy_dataclass import dataclass  # (the standard one, its methods compiled on first use)

KiB = 1024

ALIGNMENT_BYTES = 32  # one C0 line; every tile row / buffer start is a multiple of it
C0_BYTES = 32  # bytes of one C0 line, the inner row of an NZ fractal (NZ-1)
FRACTAL_ROWS = 16  # rows of an NZ fractal (NZ-1)
ACC_ROW_PAD = 16  # the cube's mad rounds M up to this many rows: an Acc tile occupies ceil(M/16)*16 rows

SPACES = ("Vec", "Mat", "Left", "Right", "Acc", "Bias", "LeftScale", "RightScale")

# NZ-7: field limits of the A2/A3 Acc -> GM NZ store (TStoreAccNz2nz)
NZ_STORE_MAX_ROWS = 65535
NZ_STORE_MAX_COLS = 4095
NZ_STORE_ROW_COL_MULTIPLE = 16
# NZ-12: the 16-bit gmGap field of TLoadInstrGm2L1 (pto-isa#317)
NZ_LOAD_GM_GAP_LIMIT = 65535

# The layout a tile has in each memory space when its TileView leaves it out (pto-format.md, "Implicit
# layout per memory space"): (blayout, slayout, fractal bytes). Acc boxes are 1024 bytes; the MX scale
# boxes 32 (OP-7); a space not listed takes the Vec defaults.
IMPLICIT_TILE_LAYOUT: dict[str, tuple[str, str, int]] = {
    "Vec": ("row_major", "none_box", 512),
    "Mat": ("col_major", "row_major", 512),
    "Left": ("col_major", "row_major", 512),
    "Right": ("row_major", "col_major", 512),
    "Acc": ("col_major", "row_major", 1024),
    "Bias": ("row_major", "none_box", 512),
    "LeftScale": ("row_major", "row_major", 32),
    "RightScale": ("col_major", "col_major", 32),
}

# Moves across the cube <-> vector boundary of a mixed kernel (seed 002: "Vec->Mat 跨核暂存 move"; a
# cluster's Acc -> Vec hand-off). IR-level tile.move expresses them on every target; where the target
# has no TMOV path for the pair (A2/A3: the AIC and AIV cores share no buffer) the mixed-kernel expansion
# lowers them to a cross-core transfer instead of a TMOV. A Vec -> Left / Right move is one too: the AIC
# side pops the pushed tile into Mat and moves it on to L0 with TMOV (ExpandMixedKernel).
CROSS_CORE_MOVES = frozenset({("Acc", "Vec"), ("Vec", "Mat"), ("Vec", "Left"), ("Vec", "Right")})


@dataclass(frozen=True)
class MemoryCapacities:
    """Bytes available to ptoc in each on-chip memory space."""

    vec: int
    mat: int
    left: int
    right: int
    acc: int
    bias: int

    def of(self, space: str) -> int | None:
        """Capacity of an IR memory space in bytes; None when this table has no figure for it."""
        return {"Vec": self.vec, "Mat": self.mat, "Left": self.left, "Right": self.right,
                "Acc": self.acc, "Bias": self.bias}.get(space)


@dataclass(frozen=True)
class TmovRules:
    """Which TMOV moves a target accepts (MOV-6). Spaces use IR names plus "Scaling".

    `paths` are the legal (source, destination) memory-space pairs. Dtype tables list dtype names
    (`ptoc.ir.dtypes` spelling); a pair table holds (source dtype, destination dtype)."""

    paths: frozenset[tuple[str, str]]
    # Mat -> Bias
    bias_dtype_pairs: frozenset[tuple[str, str]]
    bias_src_rows: int
    bias_cols_align_bytes: int  # Cols * sizeof(dtype) must be a multiple of this
    bias_max_bytes: int | None  # bias-table footprint limit (Cols * sizeof(dtype))
    # Mat -> Scaling
    scaling_dtypes: frozenset[str] | None  # None: any (same dtype on both sides)
    scaling_src_rows: int
    scaling_cols_align_bytes: int
    scaling_max_bytes: int | None
    # A5 CommonCheck (Mat -> Left/Right): identical dtypes, these element types, source layout rule
    common_check: bool
    common_dtypes: frozenset[str] | None
    # A5 CommonCheckMX (Mat -> LeftScale/RightScale)
    mx_dtypes: frozenset[str] | None
    # Acc -> Vec / Acc -> Mat destination row stride must be a multiple of this many bytes (None: no rule)
    acc_dst_stride_align_bytes: int | None

    def legal(self, src: str, dst: str) -> bool:
        return (src, dst) in self.paths

    def cross_core_only(self, src: str, dst: str) -> bool:
        """A cube <-> vector boundary move this target cannot do with one TMOV (a cross-core transfer)."""
        return (src, dst) in CROSS_CORE_MOVES and (src, dst) not in self.paths

    def targets(self, src: str) -> tuple[str, ...]:
        """Legal destinations of a source space, in SPACES order ("Scaling" last)."""
        order = SPACES + ("Scaling",)
        return tuple(s for s in order if (src, s) in self.paths)


@dataclass(frozen=True)
class Arch:
    name: str  # "a2a3" | "a5" (the `--arch` and `pto.target_arch` spelling)
    title: str
    capacities: MemoryCapacities
    supports_packed_fp4: bool  # FP4-3
    supports_nz_acc_store: bool  # NZ-7: the FP32 Acc -> NZ GM write-back (TStoreAccNz2nz)
    supports_mx: bool  # OP-6: MX block scaling (tile.quant_mx, tile.matmul_mx)
    supports_wide_mgather: bool  # OP-6: mgather's extra payload dtypes and its [N, 1] (column) index
    matmul_dtypes: tuple[tuple[str, str], ...]  # (operand dtype, accumulator dtype)
    tmov: TmovRules
    alignment_bytes: int = ALIGNMENT_BYTES
    fractal_rows: int = FRACTAL_ROWS
    acc_row_pad: int = ACC_ROW_PAD
    # vector tile ops whose instruction takes no BF16 tile on this target (pto-isa's dtype static_asserts)
    vector_ops_without_bf16: frozenset[str] = frozenset()
    # tgather takes a whole multi-row source with flat indices (A5); elsewhere one row at a time (PyPTO's
    # tensor.gather lowering picks its form by this)
    whole_tile_gather: bool = False

    def capacity(self, space: str) -> int | None:
        return self.capacities.of(space)

    def c0(self, dtype) -> int | None:
        """`c0_of(dtype)`: the C0 line is the same on every target."""
        return c0_of(dtype)

    def acc_dtype(self, operand_dtype: str) -> str | None:
        """The accumulator dtype of a matmul whose operands have `operand_dtype`; None if unsupported."""
        for a, c in self.matmul_dtypes:
            if a == operand_dtype:
                return c
        return None

    def acc_alloc_bytes(self, rows: int, cols: int, elem_bytes: int) -> int:
        """Physical L0C footprint of an Acc tile: rows are padded to `acc_row_pad`."""
        padded = -(-rows // self.acc_row_pad) * self.acc_row_pad
        return padded * cols * elem_bytes


_MATMUL_DTYPES = (("INT8", "INT32"), ("FP16", "FP32"), ("BF16", "FP32"), ("FP32", "FP32"))

# A2/A3's vector unit computes on half / float / int16 / int32 but not on bfloat16: the dtype static_asserts
# of pto-isa's include/pto/npu/a2a3 headers (TAdd, TSub, TMul, TDiv, TMax, TMin and their scalar forms, the
# float-only TUnaryOp ops and TRELU, TCmp/TCmps, TLRelu, TPrelu, TRowReduceOps, TColReduceOps/TColSum,
# TRowProd, TRowExpand*/TColExpand* and their expdif forms, TSort32, TMrgSort, TGather, TTri) leave BF16
# out, and PTOAS rejects such a module ("expects A2/A3 tadd element type to be i32/i16/f16/f32"). A BF16
# tile is loaded, stored, cast, moved, concatenated, scattered and fed to the cube as it is.
_A2A3_VECTOR_OPS_WITHOUT_BF16 = frozenset(
    [f"tile.{n}" for n in ("add", "sub", "mul", "div", "maximum", "minimum", "adds", "subs", "muls", "divs",
                           "maximums", "minimums", "exp", "log", "sqrt", "rsqrt", "recip", "abs", "neg", "relu",
                           "cmp", "cmps", "lrelu", "prelu", "row_sum", "row_max", "row_min", "row_prod",
                           "col_sum", "col_max", "col_min", "row_expand_expdif", "col_expand_expdif",
                           "sort32", "mrgsort_format1", "mrgsort_format2", "gather", "tri")]
    + [f"tile.{d}_expand_{n}" for d in ("row", "col") for n in ("add", "sub", "mul", "div", "max", "min")])

A2A3 = Arch(
    name="a2a3",
    title="Ascend910B family (A2/A3)",
    capacities=MemoryCapacities(vec=184 * KiB, mat=512 * KiB, left=64 * KiB, right=64 * KiB,
                                acc=128 * KiB, bias=1 * KiB),
    supports_packed_fp4=False,
    supports_nz_acc_store=True,
    supports_mx=False,
    supports_wide_mgather=False,
    matmul_dtypes=_MATMUL_DTYPES,
    vector_ops_without_bf16=_A2A3_VECTOR_OPS_WITHOUT_BF16,
    tmov=TmovRules(
        paths=frozenset({("Mat", "Left"), ("Mat", "Right"), ("Mat", "Bias"), ("Mat", "Scaling"),
                         ("Vec", "Vec"), ("Acc", "Mat")}),
        bias_dtype_pairs=frozenset({("INT32", "INT32"), ("FP32", "FP32"), ("FP16", "FP32")}),
        bias_src_rows=1,
        bias_cols_align_bytes=64,
        bias_max_bytes=1 * KiB,  # the whole bias table
        scaling_dtypes=frozenset({"UINT64", "INT64"}),
        scaling_src_rows=1,
        scaling_cols_align_bytes=128,
        scaling_max_bytes=None,
        common_check=False,
        common_dtypes=None,
        mx_dtypes=None,
        acc_dst_stride_align_bytes=None,
    ),
)

A5 = Arch(
    name="a5",
    title="Ascend950 (A5)",
    capacities=MemoryCapacities(vec=240 * KiB, mat=512 * KiB, left=64 * KiB, right=64 * KiB,
                                acc=256 * KiB, bias=4 * KiB),
    supports_packed_fp4=True,
    supports_nz_acc_store=False,
    supports_mx=True,
    supports_wide_mgather=True,
    whole_tile_gather=True,
    matmul_dtypes=_MATMUL_DTYPES,
    tmov=TmovRules(
        paths=frozenset({("Mat", "Left"), ("Mat", "Right"), ("Mat", "Bias"), ("Mat", "Scaling"),
                         ("Mat", "LeftScale"), ("Mat", "RightScale"),
                         ("Vec", "Vec"), ("Vec", "Mat"),
                         ("Acc", "Vec"), ("Acc", "Mat")}),
        bias_dtype_pairs=frozenset({("INT32", "INT32"), ("FP32", "FP32"), ("FP16", "FP32"),
                                    ("BF16", "FP32")}),
        bias_src_rows=1,
        bias_cols_align_bytes=64,
        bias_max_bytes=4096,
        scaling_dtypes=None,
        scaling_src_rows=1,
        scaling_cols_align_bytes=128,
        scaling_max_bytes=4096,
        common_check=True,
        common_dtypes=frozenset({"INT8", "HF8", "FP8E5M2", "FP8E4M3FN", "FP16", "BF16", "FP32",
                                 "FP4E2M1X2", "FP4E1M2X2"}),
        mx_dtypes=frozenset({"FP8E8M0"}),
        acc_dst_stride_align_bytes=32,
    ),
)

ARCHES: dict[str, Arch] = {a.name: a for a in (A2A3, A5)}


def c0_of(dtype) -> int | None:
    """NZ-1: elements per 32-byte C0 line = 256 / bit width (INT8/FP8 32, FP16/BF16 16, FP32/INT32 8).
    `dtype` is a `ptoc.ir.dtypes.DType` or a bit width. None for sub-byte types (no NZ form)."""
    bits = dtype if isinstance(dtype, int) else dtype.bits
    if getattr(dtype, "sub_byte", False) or bits < 8:
        return None
    return C0_BYTES * 8 // bits


def get_arch(name: str) -> Arch:
    """The facts of target `name` ("a2a3" or "a5")."""
    try:
        return ARCHES[name]
    except KeyError:
        raise ValueError(f"unknown target arch {name!r}; known: {', '.join(ARCHES)}") from None


__all__ = [
    "A2A3",
    "A5",
    "ACC_ROW_PAD",
    "ALIGNMENT_BYTES",
    "ARCHES",
    "C0_BYTES",
    "CROSS_CORE_MOVES",
    "FRACTAL_ROWS",
    "IMPLICIT_TILE_LAYOUT",
    "NZ_LOAD_GM_GAP_LIMIT",
    "NZ_STORE_MAX_COLS",
    "NZ_STORE_MAX_ROWS",
    "NZ_STORE_ROW_COL_MULTIPLE",
    "SPACES",
    "Arch",
    "KiB",
    "MemoryCapacities",
    "TmovRules",
    "c0_of",
    "get_arch",
]
