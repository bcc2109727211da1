"""tile.move: moving a tile between on-chip memory spaces (OP-7) through pto-isa TMOV (MOV-1..MOV-6).

`pl.tile.move(tile, target_memory=pl.Mem.X, blayout=pl.TileLayout.Y, slayout=pl.TileLayout.Z)`;
blayout/slayout are optional overrides of the result layout.

Result view, field by field (OP-7, seed 002 "tile.move 的结果 view"):
- blayout / slayout: the target space's implicit layout where the space has one (Mat, Acc, Left, Right,
  Bias, LeftScale, RightScale); for Vec the source's effective layout. Either kwarg overrides.
- fractal: 1024 for Acc, 32 for the MX scale spaces, else 512 -- except that a Vec->Vec or Vec->Mat
  move of a byte-typed MX scale tile keeps the source's 32-byte scale box.
- valid_shape / pad: carried from the source.
- stride / start_offset: dropped (the destination is a dense buffer); so is compact and the MemRef.
The result has the target memory space and folds to the implicit view where it equals it.

No in-place move: source and result must resolve to different addresses. A move inside one memory
space is a legal TMOV only as Vec->Vec (MOV-6) and is not in place by itself; same-address bindings are
caught by `check_move_not_in_place` where MemRefs are bound (planner / codegen).

The hardware rules (MOV-1..MOV-6, NZ-1 of the result) apply once InferTileMemorySpace has decided every
memory space (`Args.hardware`): a move the front end reads, such as Mat -> Vec, is judged on the target
the program is compiled for, at that pass.

MOV-6 (per target, `ptoc.target.arch`): the legal source/destination space pairs and dtype pairs of TMOV.
The cube <-> vector boundary moves (Acc->Vec, Vec->Mat) are accepted on every target: where the target
has no TMOV for them (A2/A3) they are cross-core transfers of a mixed kernel, lowered without TMOV.
MOV-1..MOV-4: the layout-changing TMOV forms (ND->NZ, ND->ZN, ND->ZZ, DN->ZZ) with their shape
conditions and index maps as pure functions; MOV-5: the tmp size of ND->ZZ.
"""

from __future__ import annotations

from ptoc.ir.nodes import TileType, TileView, Type
from ptoc.ir.types import effective_tile_view, implicit_tile_view, normalize_tile_view
from ptoc.ops.common import cint, enum_arg, fmt_shape
from ptoc.target.facts import FRACTAL_ROWS, c0 as c0_of
from ptoc.ops.registry import Args, Emitter, declare, register, short_name
from ptoc.target.arch import Arch, get_arch

# spaces with their own layout. Bias too: pto-isa's TMATMUL_BIAS takes only a row-major single-row Bias
# tile (CheckBiasValid: TileBias::isRowMajor), so a Mat -> Bias move does not keep the Mat tile's col-major
# boxes. PyPTO's move keeps the source layout for Bias (its implicit layout is the space-agnostic one), which
# the simulator rejects.
LAYOUT_SPACES = ("Mat", "Acc", "Left", "Right", "Bias", "LeftScale", "RightScale")
MX_SCALE_SPACES = ("LeftScale", "RightScale")
# pto-isa TileLeftScale: ZZ (row_major / row_major), TileRightScale: NN (col_major / col_major), fractal 32
MX_SCALE_LAYOUT = {"LeftScale": ("row_major", "row_major"), "RightScale": ("col_major", "col_major")}
ACC_FRACTAL = 1024
MX_FRACTAL = 32
FRACTAL = 512

# MOV-2: element types ND->ZN supports (all 1/2/4-byte storage types)
ZN_DTYPES = ("FP16", "BF16", "FP32", "INT32", "INT8", "UINT8", "FP8E4M3FN", "FP8E5M2", "HF8",
             "FP4E2M1X2", "FP4E1M2X2")

_TRANSFORM_RULE = {"ND->NZ": "MOV-1", "ND->ZN": "MOV-2", "ND->ZZ": "MOV-3", "DN->ZZ": "MOV-4"}


# --------------------------------------------------------------------------------------------------
# OP-7: the result view
# --------------------------------------------------------------------------------------------------


def target_layout(space: str, shape) -> tuple[str, str]:
    """(blayout, slayout) a space imposes on the tiles it holds (its implicit layout)."""
    if space in MX_SCALE_LAYOUT:
        return MX_SCALE_LAYOUT[space]
    imp = implicit_tile_view(tuple(shape), space)
    return imp["blayout"], imp["slayout"]  # type: ignore[return-value]


def move_fractal(src: TileType, target: str) -> int:
    """OP-7 fractal of the result: Acc 1024, MX scale 32, else 512; a Vec->Vec / Vec->Mat move of a
    byte-typed MX scale tile (32-byte box) keeps the source's box."""
    if target == "Acc":
        return ACC_FRACTAL
    if target in MX_SCALE_SPACES:
        return MX_FRACTAL
    src_fractal = effective_tile_view(src)["fractal"]
    if (src_fractal == MX_FRACTAL and src.dtype.bytes == 1 and (src.memory or "Vec") == "Vec"
            and target in ("Vec", "Mat")):
        return MX_FRACTAL
    return FRACTAL


def move_result_type(src: TileType, target: str, blayout: str | None = None,
                     slayout: str | None = None) -> TileType:
    """The type tile.move gives a move of `src` into `target` (OP-7), before legality checks."""
    eff = effective_tile_view(src)
    if target in LAYOUT_SPACES:
        b, s = target_layout(target, src.shape)
    else:
        b, s = eff["blayout"], eff["slayout"]
    view = TileView(
        valid_shape=tuple(eff["valid_shape"]),  # type: ignore[arg-type]
        blayout=blayout or b,
        slayout=slayout or s,
        fractal=move_fractal(src, target),
        pad=eff["pad"],  # type: ignore[arg-type]
    )
    return TileType(tuple(src.shape), src.dtype, None, target, normalize_tile_view(tuple(src.shape), target, view))


def check_move_not_in_place(src: TileType, dst: TileType) -> str | None:
    """OP-7: a move never runs in place. With both MemRefs bound, the same memory space and the same
    base and offset is an in-place move: returns the message to report, else None."""
    if src.memref is None or dst.memref is None:
        return None
    if (src.memory or "Vec") != (dst.memory or "Vec"):
        return None
    if src.memref.base == dst.memref.base and src.memref.offset == dst.memref.offset:
        return ("tile.move: source and result resolve to the same address in "
                f"{dst.memory or 'Vec'}; a move cannot run in place")
    return None


# --------------------------------------------------------------------------------------------------
# MOV-1..MOV-5: layout-changing TMOV forms, their shape conditions and index maps
# --------------------------------------------------------------------------------------------------


def tmov_transform(src_blayout: str, src_slayout: str, dst_blayout: str, dst_slayout: str) -> str | None:
    """Which repacking TMOV form a move is: "ND->NZ" (MOV-1), "ND->ZN" (MOV-2), "ND->ZZ" (MOV-3),
    "DN->ZZ" (MOV-4), or None (a plain copy, or a boxed source)."""
    if src_slayout != "none_box" or dst_slayout == "none_box":
        return None
    dst = (dst_blayout, dst_slayout)
    if src_blayout == "row_major":
        return {("col_major", "row_major"): "ND->NZ", ("row_major", "col_major"): "ND->ZN",
                ("row_major", "row_major"): "ND->ZZ"}.get(dst)
    if src_blayout == "col_major" and dst == ("row_major", "row_major"):
        return "DN->ZZ"
    return None


def nd_to_nz_violations(rows: int, cols: int, c0: int) -> list[str]:
    """MOV-1: an ND [rows, cols] tile repacks into NZ fractals of 16 x c0: rows % 16 == 0, cols % c0 == 0."""
    out = []
    if rows % FRACTAL_ROWS:
        out.append(f"rows ({rows}) must be a multiple of {FRACTAL_ROWS}")
    if cols % c0:
        out.append(f"columns ({cols}) must be a multiple of c0 = {c0}")
    return out


def nd_to_zn_violations(k: int, n: int, k0: int) -> list[str]:
    """MOV-2: an ND [K, N] tile repacks into ZN [K/K0, N/16, 16, K0]: K % K0 == 0 and N % 16 == 0."""
    out = []
    if k % k0:
        out.append(f"K = rows ({k}) must be a multiple of K0 = {k0}")
    if n % FRACTAL_ROWS:
        out.append(f"N = columns ({n}) must be a multiple of {FRACTAL_ROWS}")
    return out


def nd_to_zz_violations(rows: int, cols: int) -> list[str]:
    """MOV-3: ND exponents [R, C] fill [16, 2] ZZ boxes: R % 16 == 0 and C % 2 == 0."""
    out = []
    if rows % FRACTAL_ROWS:
        out.append(f"rows ({rows}) must be a multiple of {FRACTAL_ROWS}")
    if cols % 2:
        out.append(f"columns ({cols}) must be even (ZZ boxes hold column pairs)")
    return out


def dn_to_zz_violations(mhat: int, n: int) -> list[str]:
    """MOV-4: DN exponents [M^, N] fill ZZ boxes: N % 16 == 0 and M^ % 2 == 0."""
    out = []
    if mhat % 2:
        out.append(f"rows ({mhat}) must be even (ZZ boxes hold row pairs)")
    if n % FRACTAL_ROWS:
        out.append(f"columns ({n}) must be a multiple of {FRACTAL_ROWS}")
    return out


def nd_to_nz_index(c1: int, r1: int, i: int, j: int, c0: int) -> tuple[int, int]:
    """MOV-1 / NZ-2: NZ element [c1, r1, i, j] of a [C/c0, R/16, 16, c0] fractal grid is ND [16*r1 + i][c0*c1 + j]."""
    return FRACTAL_ROWS * r1 + i, c0 * c1 + j


def nd_to_zn_index(k1: int, n1: int, j: int, i: int, k0: int) -> tuple[int, int]:
    """MOV-2: D_ZN[k1, n1, j, i] = S_ND[k1*K0 + i][n1*16 + j]."""
    return k1 * k0 + i, n1 * FRACTAL_ROWS + j


def nd_to_zz_index(rb: int, c: int, q: int, d: int) -> tuple[int, int]:
    """MOV-3: D_ZZ[rb, c, q, d] = D_ND[16*rb + d][2*c + q]."""
    return FRACTAL_ROWS * rb + d, 2 * c + q


def dn_to_zz_index(cb: int, p: int, q: int, d: int) -> tuple[int, int]:
    """MOV-4: E_ZZ[cb, p, q, d] = E_DN[2*p + d][16*cb + q]."""
    return 2 * p + d, FRACTAL_ROWS * cb + q


def nd_to_nz_order(rows: int, cols: int, c0: int) -> list[tuple[int, int]]:
    """Source (row, col) of every NZ element, in destination memory order."""
    return [nd_to_nz_index(c1, r1, i, j, c0) for c1 in range(cols // c0) for r1 in range(rows // FRACTAL_ROWS)
            for i in range(FRACTAL_ROWS) for j in range(c0)]


def nd_to_zn_order(k: int, n: int, k0: int) -> list[tuple[int, int]]:
    return [nd_to_zn_index(k1, n1, j, i, k0) for k1 in range(k // k0) for n1 in range(n // FRACTAL_ROWS)
            for j in range(FRACTAL_ROWS) for i in range(k0)]


def nd_to_zz_order(rows: int, cols: int) -> list[tuple[int, int]]:
    return [nd_to_zz_index(rb, c, q, d) for rb in range(rows // FRACTAL_ROWS) for c in range(cols // 2)
            for q in range(2) for d in range(FRACTAL_ROWS)]


def dn_to_zz_order(mhat: int, n: int) -> list[tuple[int, int]]:
    return [dn_to_zz_index(cb, p, q, d) for cb in range(n // FRACTAL_ROWS) for p in range(mhat // 2)
            for q in range(FRACTAL_ROWS) for d in range(2)]


def nd_to_zz_tmp_bytes(m: int, n: int) -> int:
    """MOV-5: bytes of the ND->ZZ tmp (vgather2 B16 index buffer) for a quantisation input [M, N]
    (group 32): (16 + ceil(M/16) * N/64 + 16) * 2. M = 128, N = 256 -> 128."""
    if m <= 0 or n <= 0 or n % 64:
        raise ValueError(f"nd_to_zz_tmp_bytes: N = {n} must be a positive multiple of 64 (pairs of 32-groups)")
    rb = -(-m // FRACTAL_ROWS)
    return (32 + rb * (n // 64)) * 2


# --------------------------------------------------------------------------------------------------
# MOV-6: legality per target
# --------------------------------------------------------------------------------------------------


def tmov_dtype_problem(arch: Arch, src: str, dst: str, src_dt: str, dst_dt: str) -> str | None:
    """MOV-6 dtype rules of a TMOV src-space -> dst-space on `arch`; a message, or None when legal."""
    t = arch.tmov
    if dst == "Bias":
        if (src_dt, dst_dt) not in t.bias_dtype_pairs:
            pairs = ", ".join(f"{a}->{b}" for a, b in sorted(t.bias_dtype_pairs))
            return f"TMOV Mat->Bias on {arch.name} converts only {pairs}, not {src_dt}->{dst_dt}"
        return None
    if dst == "Scaling":
        if src_dt != dst_dt or (t.scaling_dtypes is not None and src_dt not in t.scaling_dtypes):
            return f"TMOV Mat->Scaling on {arch.name} needs identical dtypes" + (
                f" from {', '.join(sorted(t.scaling_dtypes))}" if t.scaling_dtypes else "")
        return None
    if dst in MX_SCALE_SPACES and t.mx_dtypes is not None:
        if src_dt != dst_dt or src_dt not in t.mx_dtypes:
            return f"TMOV into {dst} on {arch.name} moves {', '.join(sorted(t.mx_dtypes))} scales only, not {src_dt}"
        return None
    if dst in ("Left", "Right") and t.common_check:
        if src_dt != dst_dt:
            return f"TMOV Mat->{dst} on {arch.name} needs identical source and destination dtypes"
        if t.common_dtypes is not None and src_dt not in t.common_dtypes:
            return (f"TMOV Mat->{dst} on {arch.name} does not move {src_dt} "
                    f"(accepted: {', '.join(sorted(t.common_dtypes))})")
    return None


def _fail_transform(args: Args, form: str, problems: list[str], shape) -> None:
    args.fail(f"tile.move: the {form} repack of a {fmt_shape(shape)} tile is impossible: " + "; ".join(problems),
              "tile", rule=_TRANSFORM_RULE[form],
              hint="pad the tile's physical shape to whole fractals and narrow the valid region with valid_shape")


@register("tile.move", ("tile",), optional=(("target_memory", None), ("blayout", None), ("slayout", None)),
          unit="mem")
def _move(args: Args) -> Type | None:
    """move a tile into another memory space (TMOV); result view per OP-7"""
    src = args.tile("tile")
    target = enum_arg(args, "target_memory", "Mem")
    blayout = enum_arg(args, "blayout", "TileLayout")
    slayout = enum_arg(args, "slayout", "TileLayout")
    if target is None:
        args.fail("tile.move needs target_memory=pl.Mem.<space>", code="PTOC-E0201",
                  hint="e.g. pl.tile.move(t, target_memory=pl.Mem.Left)")
    if target == "DDR":
        args.fail("tile.move cannot target DDR", "target_memory", rule="MOV-6",
                  hint="write a tile to GM with pl.tile.store(tile, offsets, tensor)")
    if blayout == "none_box":
        args.fail("tile.move: blayout must be row_major or col_major", "blayout", code="PTOC-E0201")
    if src is None:
        return None
    result = move_result_type(src, target, blayout, slayout)
    if args.hardware:
        _check_hardware(args, src, target, result)
    return result


def _check_hardware(args: Args, src: TileType, target: str, result: TileType) -> None:
    """MOV-1..MOV-6 and NZ-1 of the result: checked once memory spaces are decided (`Args.hardware`)."""
    arch = get_arch(args.arch)
    src_space = src.memory
    dt = src.dtype.name

    if src_space is not None and arch.tmov.cross_core_only(src_space, target):
        pass  # a cube <-> vector hand-off of a mixed kernel: a cross-core transfer, not a TMOV
    elif src_space is not None:
        if not arch.tmov.legal(src_space, target):
            legal = [s for s in arch.tmov.targets(src_space) if s != "Scaling"]  # Scaling: no IR space
            other = [a for a in ("a2a3", "a5") if a != arch.name and get_arch(a).tmov.legal(src_space, target)]
            hint = (f"from {src_space}, TMOV on {arch.name} reaches: {', '.join(legal)}" if legal
                    else f"TMOV on {arch.name} has no move out of {src_space}")
            if other:
                hint += f" ({src_space}->{target} exists on {other[0]})"
            args.fail(f"tile.move: TMOV has no {src_space} -> {target} path on {arch.title}", "target_memory",
                      rule="MOV-6", hint=hint)
        problem = tmov_dtype_problem(arch, src_space, target, dt, dt)
        if problem is not None:
            hint = "cast the tile first with pl.tile.cast(t, target_type=...)"
            if target == "Bias":
                hint = "Bias tiles hold INT32 or FP32: cast the source to FP32 (or INT32) before the move"
            args.fail(f"tile.move: {problem}", "tile", rule="MOV-6", hint=hint)
        _check_path_geometry(args, arch, src, src_space, target, result)

    _check_transform(args, src, result)
    if result.memory in ("Mat", "Left", "Right", "Acc"):
        from ptoc.ops.matmul import check_boxed_tile_dims

        check_boxed_tile_dims(args, result, "tile", what="the result")


def _check_path_geometry(args: Args, arch: Arch, src: TileType, src_space: str, target: str,
                         result: TileType) -> None:
    """MOV-6 shape, layout and footprint rules of individual TMOV paths."""
    t = arch.tmov
    if src.rank != 2:
        return
    rows, cols = cint(src.shape[0]), cint(src.shape[1])
    nbytes = src.dtype.bytes
    if target in ("Bias", "Scaling"):
        want_rows = t.bias_src_rows if target == "Bias" else t.scaling_src_rows
        align = t.bias_cols_align_bytes if target == "Bias" else t.scaling_cols_align_bytes
        limit = t.bias_max_bytes if target == "Bias" else t.scaling_max_bytes
        if rows is not None and rows != want_rows:
            args.fail(f"tile.move: TMOV Mat->{target} reads a single row; the source has {rows} rows", "tile",
                      rule="MOV-6", hint=f"move a [1, N] tile into {target}")
        if cols is not None and (cols * nbytes) % align:
            args.fail(f"tile.move: TMOV Mat->{target} needs the row ({cols} x {nbytes} bytes = {cols * nbytes}) "
                      f"to be a multiple of {align} bytes", "tile", rule="MOV-6",
                      hint=f"pad the columns to a multiple of {align // nbytes}")
        if cols is not None and limit is not None and cols * nbytes > limit:
            args.fail(f"tile.move: the {target} footprint ({cols * nbytes} bytes) exceeds the {limit} bytes "
                      f"{arch.name} has", "tile", rule="MOV-6", hint="split the bias into column blocks")
    if target in ("Left", "Right") and t.common_check:
        eff = effective_tile_view(src)
        if eff["blayout"] == "col_major" and eff["slayout"] != "row_major":
            args.fail(f"tile.move: TMOV Mat->{target} on {arch.name} reads row-major tiles or col_major / "
                      f"row_major (NZ) tiles, not blayout={eff['blayout']}, slayout={eff['slayout']}", "tile",
                      rule="MOV-6", hint="keep the Mat tile in its implicit NZ layout")
    if src_space == "Acc" and t.acc_dst_stride_align_bytes is not None:
        reff = effective_tile_view(result)
        if reff["slayout"] == "none_box":
            stride = cols if reff["blayout"] == "row_major" else rows
            if stride is not None and (stride * nbytes) % t.acc_dst_stride_align_bytes:
                args.fail(f"tile.move: TMOV Acc->{target} on {arch.name} needs the destination row stride "
                          f"({stride} x {nbytes} bytes) to be a multiple of {t.acc_dst_stride_align_bytes} bytes",
                          "tile", rule="MOV-6", hint="pad the tile so its rows are 32-byte aligned")


def _check_transform(args: Args, src: TileType, result: TileType) -> None:
    """MOV-1..MOV-4: shape conditions of a layout-changing move."""
    if src.rank != 2:
        return
    se, de = effective_tile_view(src), effective_tile_view(result)
    form = tmov_transform(se["blayout"], se["slayout"], de["blayout"], de["slayout"])  # type: ignore[arg-type]
    if form is None or (de["fractal"] == MX_FRACTAL and form in ("ND->NZ", "ND->ZN")):
        return  # an MX scale keeps its 32-byte box; only the ZZ forms describe it
    rows, cols = cint(src.shape[0]), cint(src.shape[1])
    if rows is None or cols is None:
        return
    c0 = c0_of(src.dtype)
    if form == "ND->NZ":
        if c0 is None:
            return
        problems = nd_to_nz_violations(rows, cols, c0)
    elif form == "ND->ZN":
        if src.dtype.name not in ZN_DTYPES or c0 is None:
            args.fail(f"tile.move: the ND->ZN repack does not support {src.dtype.name}", "tile", rule="MOV-2",
                      hint=f"accepted: {', '.join(ZN_DTYPES)}")
        problems = nd_to_zn_violations(rows, cols, c0)
    elif form == "ND->ZZ":
        problems = nd_to_zz_violations(rows, cols)
    else:
        problems = dn_to_zz_violations(rows, cols)
    if problems:
        _fail_transform(args, form, problems, src.shape)


short_name("move", tile="tile.move")

# `.pto` spellings (PTOAS PTOOps.td, destination-passing form)
declare("tile.move", pto=Emitter("op_move"))

__all__ = [
    "check_move_not_in_place",
    "dn_to_zz_index",
    "dn_to_zz_order",
    "dn_to_zz_violations",
    "move_result_type",
    "nd_to_nz_index",
    "nd_to_nz_order",
    "nd_to_nz_violations",
    "nd_to_zn_index",
    "nd_to_zn_order",
    "nd_to_zn_violations",
    "nd_to_zz_index",
    "nd_to_zz_order",
    "nd_to_zz_tmp_bytes",
    "nd_to_zz_violations",
    "tmov_dtype_problem",
    "tmov_transform",
]
