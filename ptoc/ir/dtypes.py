"""The one table of element types.

Every dtype the specification names is a row here: how the IR text spells it, its bit width and
storage bytes, the NZ c0 (elements per 32-byte C0 line, rule NZ-1), its `.pto` spelling, its pto-isa
C++ spelling and, where one exists, the numpy / ml_dtypes type that the numeric reference uses.

Packed FP4 types follow the byte-carrier ABI (rule FP4-1): one element of FP4E2M1X2 / FP4E1M2X2 is a
byte that holds two 4-bit values, so bits=8 and bytes=1 and every shape counts carriers.
"""

from __future__ import annotations

from ptoc.lazy_dataclass import dataclass  # (the standard one, its methods compiled on first use)


@dataclass(frozen=True)
class DType:
    name: str  # canonical printed name after "pl." (e.g. "FP32")
    bits: int  # storage bits of one element (carrier bits for packed types)
    kind: str  # "int" | "uint" | "float" | "bool" | "index" | "task"
    pto: str | None  # .pto spelling (None: not expressible in .pto)
    cpp: str | None  # pto-isa C++ element type (None: scalars only / none)
    numpy: str | None  # numpy dtype name or "ml_dtypes.<name>"
    aliases: tuple[str, ...] = ()
    packed_values: int = 1  # logical values per element (2 for the FP4 x2 carriers)
    sub_byte: bool = False  # logically narrower than a byte (INT4, UINT4, HF4, BOOL)

    @property
    def bytes(self) -> int:
        """Bytes one element occupies in memory (sub-byte types round up to 1)."""
        return max(1, (self.bits + 7) // 8)

    @property
    def c0(self) -> int | None:
        """Elements per 32-byte C0 line (NZ-1); None for sub-byte types, which NZ does not support. A
        target fact: `ptoc.target.arch.c0_of` answers."""
        from ptoc.target import arch

        return arch.c0_of(self)

    @property
    def is_float(self) -> bool:
        return self.kind == "float"

    @property
    def is_int(self) -> bool:
        return self.kind in ("int", "uint", "index")

    @property
    def is_signed(self) -> bool:
        return self.kind in ("int", "index")

    @property
    def is_packed_fp4(self) -> bool:
        return self.packed_values == 2

    def __str__(self) -> str:  # pragma: no cover - debugging aid
        return f"pl.{self.name}"


_ROWS = [
    DType("BOOL", 1, "bool", "i1", "bool", "bool", sub_byte=True),
    DType("INT4", 4, "int", "i4", None, None, sub_byte=True),
    DType("INT8", 8, "int", "i8", "int8_t", "int8"),
    DType("INT16", 16, "int", "i16", "int16_t", "int16"),
    DType("INT32", 32, "int", "i32", "int32_t", "int32"),
    DType("INT64", 64, "int", "i64", "int64_t", "int64"),
    DType("UINT4", 4, "uint", None, None, None, sub_byte=True),
    DType("UINT8", 8, "uint", "ui8", "uint8_t", "uint8"),
    DType("UINT16", 16, "uint", "ui16", "uint16_t", "uint16"),
    DType("UINT32", 32, "uint", "ui32", "uint32_t", "uint32"),
    DType("UINT64", 64, "uint", "ui64", "uint64_t", "uint64"),
    DType("INDEX", 64, "index", "index", None, "int64"),
    # the id of a submitted task (pl.submit's second result, pl.system.task_invalid); a scalar only
    DType("TASK_ID", 64, "task", None, None, None),
    DType("FP8E4M3FN", 8, "float", "f8E4M3FN", "float8_e4m3_t", "ml_dtypes.float8_e4m3fn"),
    DType("FP8E5M2", 8, "float", "f8E5M2", "float8_e5m2_t", "ml_dtypes.float8_e5m2"),
    DType("FP8E8M0", 8, "float", "!pto.f8E8M0", "float8_e8m0_t", "ml_dtypes.float8_e8m0fnu"),
    DType("FP16", 16, "float", "f16", "half", "float16"),
    DType("FP32", 32, "float", "f32", "float", "float32"),
    DType("BF16", 16, "float", "bf16", "bfloat16_t", "ml_dtypes.bfloat16"),
    DType("HF4", 4, "float", None, None, None, sub_byte=True),
    DType("HF8", 8, "float", "!pto.hif8", "hifloat8_t", None),
    DType(
        "FP4E2M1X2", 8, "float", "!pto.f4E2M1x2", "float4_e2m1x2_t", "uint8",
        aliases=("fp4e2m1x2",), packed_values=2,
    ),
    DType(
        "FP4E1M2X2", 8, "float", "!pto.f4E1M2x2", "float4_e1m2x2_t", "uint8",
        aliases=("fp4e1m2x2",), packed_values=2,
    ),
]

ALL: tuple[DType, ...] = tuple(_ROWS)
BY_NAME: dict[str, DType] = {}
for _d in _ROWS:
    BY_NAME[_d.name] = _d
    for _a in _d.aliases:
        BY_NAME[_a] = _d

# Names that used to exist and now must be spelled differently (FP4-1).
REMOVED: dict[str, str] = {
    "FP4": "FP4E2M1X2",
    "fp4": "fp4e2m1x2",
}

BOOL = BY_NAME["BOOL"]
INT8 = BY_NAME["INT8"]
INT16 = BY_NAME["INT16"]
INT32 = BY_NAME["INT32"]
INT64 = BY_NAME["INT64"]
UINT8 = BY_NAME["UINT8"]
INDEX = BY_NAME["INDEX"]
TASK_ID = BY_NAME["TASK_ID"]
FP16 = BY_NAME["FP16"]
FP32 = BY_NAME["FP32"]
BF16 = BY_NAME["BF16"]
FP4E2M1X2 = BY_NAME["FP4E2M1X2"]
FP4E1M2X2 = BY_NAME["FP4E1M2X2"]


def lookup(name: str) -> DType | None:
    return BY_NAME.get(name)


def numpy_dtype(dt: DType):
    """The numpy dtype object for `dt` (imports numpy/ml_dtypes lazily); None when there is none."""
    if dt.numpy is None:
        return None
    import numpy as np

    if dt.numpy.startswith("ml_dtypes."):
        import ml_dtypes

        return np.dtype(getattr(ml_dtypes, dt.numpy.split(".", 1)[1]))
    return np.dtype(dt.numpy)
