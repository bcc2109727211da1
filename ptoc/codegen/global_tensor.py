"""The C++ header of pto-isa `GlobalTensor` types that goes with a `.pto` module.

For every GM view PTOAS builds, pto-isa needs a `GlobalTensor<T, Shape, Stride, Layout>` (pto-format.md,
"What PTOAS makes of a view: the GlobalTensor"). This module writes those types, one namespace per
kernel function (AIC, AIV or InCore), from the same views the `.pto` emitter uses (`codegen/views.py`):

```
namespace add_kernel {
// a: GM tensor parameter, ND, FP32
using a_Shape = pto::Shape<1, 1, 1, 64, 64>;
using a_Stride = pto::Stride<4096, 4096, 4096, 64, 1>;
using a_Global = pto::GlobalTensor<float, a_Shape, a_Stride, pto::Layout::ND>;
// ta_pview: tile.load window of a
...
}  // namespace add_kernel
```

Rules (pto-format.md):
- always 5-D, right-aligned. Shape = the parameter's shape (for a parameter) or the partition sizes (for
  a load/store window); stride = the parameter's strides. A missing leading dim i gets shape 1 and stride
  `shape[i+1] * stride[i+1]`, computed over the PARENT tensor's padded shape (DN `[512, 1]` strides
  `[1, 512]` -> `Stride<512, 512, 512, 1, 512>`, whatever the window).
- a value that is not a compile-time constant (dynamic dim, symbolic size, a stride or padded stride
  built from one) is `pto::DYNAMIC`;
- the element type is the dtype table's C++ spelling (`ir/dtypes.py`); a dtype without one is a user
  error (PTOC-E0420), as are rank > 5 tensors (PTOC-E0421) and static values that do not fit pto-isa's
  `int` template parameters (PTOC-E0422);
- NZ entries must pass pto-isa's checks `shape[3] == 16` and `shape[4] == 32 / sizeof(T)`; the blocking
  pass guarantees them, so a violation is an InternalError.

The output is deterministic: no timestamps, kernels in program order, entries in parameter order then
partition (statement) order, names de-duplicated in that order.
"""

from __future__ import annotations

import json
import re
from ptoc.lazy_dataclass import dataclass  # (the standard one, its methods compiled on first use)

from ptoc.target.facts import C0_BYTES, FRACTAL_ROWS
from ptoc.diagnostics import DiagnosticSink, InternalError, Span
from ptoc.ir.dtypes import DType
from ptoc.ir.nodes import KERNEL_TYPES, ConstInt, Expr, Function, Program
from ptoc.analysis.arith import fold

RANK = 5
INT_MAX = 2**31 - 1  # pto-isa's Shape/Stride template parameters are `int`
NZ_FRACTAL_ROWS = FRACTAL_ROWS
NZ_C0_BYTES = C0_BYTES

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")

# Names a kernel namespace must not take: C++20 keywords and alternative tokens, the namespaces and
# global type names the header refers to, and pto-isa's macros.
_CPP_KEYWORDS = frozenset("""
alignas alignof and and_eq asm atomic_cancel atomic_commit atomic_noexcept auto bitand bitor bool break
case catch char char8_t char16_t char32_t class compl concept const consteval constexpr constinit
const_cast continue co_await co_return co_yield decltype default delete do double dynamic_cast else enum
explicit export extern false float for friend goto if inline int long mutable namespace new noexcept not
not_eq nullptr operator or or_eq private protected public reflexpr register reinterpret_cast requires
return short signed sizeof static static_assert static_cast struct switch synchronized template this
thread_local throw true try typedef typeid typename union unsigned using virtual void volatile wchar_t
while xor xor_eq final override import module
""".split())
_RESERVED_GLOBALS = frozenset("""
pto std size_t ptrdiff_t nullptr_t max_align_t
int8_t int16_t int32_t int64_t uint8_t uint16_t uint32_t uint64_t intptr_t uintptr_t intmax_t uintmax_t
half bfloat16_t aclFloat16 float8_e4m3_t float8_e5m2_t float8_e8m0_t hifloat8_t float4_e2m1x2_t
float4_e1m2x2_t
AICORE PTO_INLINE PTO_INST PTO_INTERNAL PTO_STATIC_ASSERT PTO_CPU_ASSERT OP_NAME OP_TYPE
""".split())


@dataclass(frozen=True)
class GlobalTensorEntry:
    """One `using` triple: the C++ name and the 5-D values (None = pto::DYNAMIC)."""

    name: str
    what: str  # the comment line above the triple
    cpp_type: str
    shape: tuple[int | None, ...]
    stride: tuple[int | None, ...]
    layout: str  # "ND" | "DN" | "NZ"


@dataclass(frozen=True)
class KernelTypes:
    function: str  # the IR function name
    namespace: str  # the C++ namespace (the function name unless that is not a usable C++ name)
    entries: tuple[GlobalTensorEntry, ...]


# --------------------------------------------------------------------------------------------------
# The model: what types a program needs
# --------------------------------------------------------------------------------------------------


def _static(e: Expr) -> int | None:
    if e.__class__ is ConstInt:  # (most dimensions: no import statement run for them)
        return e.value  # type: ignore[attr-defined]

    v = fold(e)
    return v.value if isinstance(v, ConstInt) else None


def _product(a: int | None, b: int | None) -> int | None:
    return None if a is None or b is None else a * b


def _pad(parent_shape: tuple[int | None, ...], parent_strides: tuple[int | None, ...],
         sizes: tuple[int | None, ...]) -> tuple[tuple[int | None, ...], tuple[int | None, ...]]:
    """Right-align to 5-D: (shape, stride). Missing leading dims: shape 1, stride shape[i+1]*stride[i+1]
    over the parent's padded shape (the innermost stride of a rank-0 tensor is 1)."""
    pad = RANK - len(parent_shape)
    pshape = (1,) * pad + parent_shape
    stride: list[int | None] = [None] * pad + list(parent_strides)
    for i in range(pad - 1, -1, -1):
        stride[i] = 1 if i == RANK - 1 else _product(pshape[i + 1], stride[i + 1])
    return (1,) * pad + sizes, tuple(stride)


def _namespace_names(kernels: list[Function]) -> dict[str, str]:
    return namespace_names([f.name for f in kernels])


def namespace_names(kernels: list[str]) -> dict[str, str]:
    """Kernel name -> its C++ namespace, for the kernels named `kernels` (all of a program's, in order): the
    name itself when it is a usable C++ name, else `<stem>_kernel[_N]`, avoiding every kernel's name."""
    taken = set(kernels)
    used: set[str] = set()
    out: dict[str, str] = {}
    for kname in kernels:
        if not _IDENT.match(kname):
            raise InternalError(f"kernel name {kname!r} is not an identifier")
        ok = (kname not in _CPP_KEYWORDS and kname not in _RESERVED_GLOBALS and "__" not in kname
              and not re.match(r"_[A-Z]", kname))
        if ok:
            name = kname
        else:
            stem = re.sub(r"_+", "_", kname).strip("_") or "k"
            base = name = f"{stem}_kernel"
            k = 1
            while name in taken or name in used:
                name = f"{base}_{k}"
                k += 1
        used.add(name)
        out[kname] = name
    return out


def _entry_names(bases: list[str]) -> list[str]:
    used: set[str] = set()
    out = []
    for b in bases:
        if not _IDENT.match(b):
            raise InternalError(f"GlobalTensor entry name {b!r} is not an identifier")
        n, k = b, 1
        while n in used:
            n = f"{b}_{k}"
            k += 1
        used.add(n)
        out.append(n)
    return out


def _out_of_range(values: tuple[int | None, ...]) -> list[str]:
    return [f"dim {i} = {v}" for i, v in enumerate(values) if v is not None and not 0 <= v <= INT_MAX]


def _check_nz(entry: GlobalTensorEntry, dtype: DType, fn: str) -> None:
    want_c0 = NZ_C0_BYTES // dtype.bytes if NZ_C0_BYTES % dtype.bytes == 0 else None
    if entry.shape[3] != NZ_FRACTAL_ROWS or want_c0 is None or entry.shape[4] != want_c0:
        raise InternalError(
            f"{fn}: NZ GlobalTensor {entry.name} has shape {list(entry.shape)}; pto-isa requires "
            f"shape[3] == {NZ_FRACTAL_ROWS} and shape[4] == 32 / sizeof({entry.cpp_type}) == {want_c0}")


def _check_views(fn, views, spans, sink: DiagnosticSink) -> set[str]:
    """Report GM tensor parameters pto-isa cannot type (E0420, E0421); the names of those reported."""
    bad: set[str] = set()
    for v in views:
        span = spans.get(v.param)
        if v.dtype.cpp is None:
            bad.add(v.param)
            sink.error("PTOC-E0420", f"GM tensor {v.param} of kernel {fn.name} has element type "
                                     f"pl.{v.dtype.name}, which pto-isa has no C++ type for", span,
                       hint=_dtype_hint(v.dtype))
        if len(v.shape) > RANK:
            bad.add(v.param)
            sink.error("PTOC-E0421", f"GM tensor {v.param} of kernel {fn.name} has rank {len(v.shape)}; "
                                     f"a pto-isa GlobalTensor has at most {RANK} dims", span,
                       hint="reshape the tensor to at most 5 dims before passing it to the kernel")
        if len(v.strides) != len(v.shape):
            raise InternalError(f"{fn.name}: tensor {v.param} has {len(v.shape)} dims but "
                                f"{len(v.strides)} strides")
        if v.layout == "NZ" and len(v.shape) != RANK:
            raise InternalError(f"{fn.name}: NZ tensor {v.param} reached codegen with rank "
                                f"{len(v.shape)} (BlockNzTensorViews makes every NZ view rank 5)")
    return bad


def _raw_entries(fn, views, parts, spans) -> list[tuple[str, str, DType, tuple, tuple, tuple, str, Span | None]]:
    """(param, comment, dtype, shape, strides, sizes, layout, span) of every view and partition, in order."""
    by_param = {v.param: v for v in views}
    raw: list[tuple[str, str, DType, tuple, tuple, tuple, str, Span | None]] = []
    for v in views:
        raw.append((v.param, f"{v.param}: GM tensor parameter, {v.layout}, pl.{v.dtype.name}", v.dtype,
                    v.shape, v.strides, v.shape, v.layout, spans.get(v.param)))
    for p in parts:
        v = by_param.get(p.tensor)
        if v is None:
            raise InternalError(f"{fn.name}: partition {p.name} of unknown tensor {p.tensor}")
        if len(p.sizes) != len(v.shape):
            raise InternalError(f"{fn.name}: partition {p.name} has {len(p.sizes)} sizes for a rank "
                                f"{len(v.shape)} tensor {v.param}")
        raw.append((v.param, f"{p.name}: tile.{p.kind} window of {v.param}", v.dtype, v.shape, v.strides,
                    p.sizes, v.layout, p.call.span))
    return raw


def _entries(fn, names, raw, bad: set[str], sink: DiagnosticSink) -> list[GlobalTensorEntry]:
    """The 5-D GlobalTensor entries; shapes / strides outside C++ int are reported (E0422)."""
    entries: list[GlobalTensorEntry] = []
    for name, (param, what, dtype, pshape, pstrides, sizes, layout, span) in zip(names, raw):
        if param in bad:  # reported once, at the parameter
            continue
        shape5, stride5 = _pad(tuple(_static(e) for e in pshape), tuple(_static(e) for e in pstrides),
                               tuple(_static(e) for e in sizes))
        wrong = [f"shape {d}" for d in _out_of_range(shape5)] + [f"stride {d}" for d in _out_of_range(stride5)]
        if wrong:
            bad.add(param)
            sink.error("PTOC-E0422", f"GM tensor {param} of kernel {fn.name} needs a 5-D GlobalTensor with "
                                     f"{', '.join(wrong)}, outside pto-isa's int range 0..{INT_MAX}", span,
                       hint="pto-isa's GlobalTensor shapes and strides are C++ `int`: split the tensor into "
                            "smaller ones (e.g. a leading batch axis indexed per call)")
            continue
        e = GlobalTensorEntry(name, what, dtype.cpp, shape5, stride5, layout)
        if layout == "NZ":
            _check_nz(e, dtype, fn.name)
        entries.append(e)
    return entries


def kernel_types(program: Program, ctx, types: dict | None = None, memo: dict | None = None) -> list[KernelTypes]:
    """The GlobalTensor types of every kernel of `program` (raises CompileError for user errors).
    `types`: `function_types(program, ctx)` when the caller already has it; `memo`: the one the `.pto`
    writer filled (`ptoc.codegen.views.views_of`)."""
    from ptoc.codegen.views import views_of
    from ptoc.ir.verifier import function_types

    kernels = [f for f in program.functions if f.func_type in KERNEL_TYPES]
    if not kernels:
        return []
    if types is None:
        types = function_types(program, ctx)
    namespaces = _namespace_names(kernels)
    sink = DiagnosticSink()
    out: list[KernelTypes] = []
    for fn in kernels:
        views, parts = views_of(fn, types.get(fn.name, {}), memo)
        spans = {p.name: p.span for p in fn.params}
        bad = _check_views(fn, views, spans, sink)
        names = _entry_names([v.param for v in views] + [p.name for p in parts])
        raw = _raw_entries(fn, views, parts, spans)
        entries = _entries(fn, names, raw, bad, sink)
        out.append(KernelTypes(fn.name, namespaces[fn.name], tuple(entries)))
    sink.raise_if_errors()
    return out


def _dtype_hint(dt: DType) -> str:
    if dt.name == "INDEX":
        return "pass index-typed data as pl.INT64 (or pl.INT32) tensors"
    if dt.sub_byte or dt.bits < 8:
        return (f"pto-isa has no element type narrower than a byte; pack pl.{dt.name} values into bytes and "
                "pass the tensor as pl.UINT8 (or use a packed x2 type such as pl.FP4E2M1X2)")
    return "use an element type from the table in pto-format.md (\"Element types\")"


# --------------------------------------------------------------------------------------------------
# The text
# --------------------------------------------------------------------------------------------------


def _value(v: int | None) -> str:
    return "pto::DYNAMIC" if v is None else str(v)


def _word(s: str) -> str:
    """`s` for a comment: as is when it is a plain token, else JSON-quoted (no newline or trailing
    backslash can end or splice the comment line)."""
    return s if re.fullmatch(r"[A-Za-z0-9_.+\-]+", s) else json.dumps(s)


def render_entry(e: GlobalTensorEntry) -> list[str]:
    return [
        f"// {e.what}",
        f"using {e.name}_Shape = pto::Shape<{', '.join(_value(v) for v in e.shape)}>;",
        f"using {e.name}_Stride = pto::Stride<{', '.join(_value(v) for v in e.stride)}>;",
        f"using {e.name}_Global = pto::GlobalTensor<{e.cpp_type}, {e.name}_Shape, {e.name}_Stride, "
        f"pto::Layout::{e.layout}>;",
    ]


def emit_header(program: Program | None, ctx, source_name: str, ptoc_version: str, types: dict | None = None,
                kernels: list[KernelTypes] | None = None) -> str:
    """The header text for `program` (lowered: kernels carry explicit strides, NZ views are rank 5).
    `types`: `function_types(program, ctx)` when the caller already has it; `kernels`: `kernel_types(program,
    ctx)` when the caller already has it (the driver shares it with the kernels manifest; then `program`
    is not read and may be None)."""
    if kernels is None:
        kernels = kernel_types(program, ctx, types)
    return join_header(ctx, source_name, ptoc_version,
                       [(k.function, k.namespace, entry_lines(k)) for k in kernels])


def entry_lines(k: KernelTypes) -> list[str]:
    """The lines of kernel `k`'s entries in the header (they do not depend on its namespace)."""
    return [line for e in k.entries for line in render_entry(e)]


def join_header(ctx, source_name: str, ptoc_version: str, kernels: list[tuple[str, str, list[str]]]) -> str:
    """The header text of the kernels given as (function, namespace, `entry_lines`), in order."""
    lines = [
        "#pragma once",
        f"// pto-isa GlobalTensor types for {json.dumps(source_name)}",
        f"// generated by ptoc {_word(ptoc_version)} for arch {_word(ctx.arch)}, "
        f"PTOAS {_word(ctx.ptoas_version)}",
        "#include <cstdint>  // pto-isa's type header uses uint8_t without including it",
        "#include <pto/pto-inst.hpp>",
    ]
    for function, namespace, entries in kernels:
        lines.append("")
        if namespace != function:
            lines.append(f"// kernel {function} (renamed: not usable as a C++ namespace name)")
        lines.append(f"namespace {namespace} {{")
        lines.extend(entries)
        lines.append(f"}}  // namespace {namespace}")
    return "\n".join(lines) + "\n"


__all__ = ["GlobalTensorEntry", "KernelTypes", "emit_header", "kernel_types", "render_entry"]
