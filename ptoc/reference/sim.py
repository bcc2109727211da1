"""Running an emitted kernel on the real toolchain: PTOAS, then pto-isa's CPU simulator.

    tools = find_tools(ptoas=None, pto_isa=None, cxx=None)        # flags, else $PTOC_* variables
    with Simulator(tools, arch="a2a3") as sim:
        outs = sim.run(pto_text, "kernel", {0: (x, "ND"), 1: (w, "NZ"), 2: (out, "ND")}, scalars, dyn_dims)

`Simulator.run` assembles the module with PTOAS (with `--enable-insert-sync`, the flags of
`ptoc.target.assembler`), generates a host harness around the kernel function (`generate_harness`),
compiles it with `-D__CPU_SIM` and the kernel kind's `-D__DAV_CUBE__` / `-D__DAV_VEC__` against pto-isa's
headers, runs it and returns every tensor parameter's final contents as a logical array.

The harness protocol: `harness DIR SCALAR...`. For tensor parameter i it reads `DIR/argI.bin` (the bytes of
global memory, NZ tensors already in their blocked order, packed by `ptoc.reference.packers`), calls the
kernel, and writes `DIR/argI.out`. Scalars come in the order of the kernel's non-pointer parameters
(scalar parameters, then one value per dynamic dimension), floats as C hex literals so no digit is lost.
Every buffer sits between two guard pages; a kernel that writes into one fails the run.

BF16: pto-isa's CPU simulator has a real `bfloat16_t` only with C++23 `<stdfloat>`; elsewhere it is a
16-bit stand-in (`_Float16`). The harness therefore converts BF16 buffers through `float` on the way in and
out (round to nearest even on the way out), which is exact for every BF16 value inside FP16's range.

Compiled harnesses are cached by content hash (the harness source, which embeds the kernel's C++, the
compiler and its version, the flags and pto-isa's header tree) in `$PTOC_CACHE_DIR/sim`, else
`$XDG_CACHE_HOME/ptoc/sim`, else `~/.cache/ptoc/sim`. Everything else lives in temporary folders that are
removed before `run` returns.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import signal
import subprocess
import tempfile
from dataclasses import dataclass, field

import numpy as np

from ptoc.diagnostics import Diagnostic
from ptoc.target.assembler import ToolNotFound

ENV_PTO_ISA = "PTOC_PTO_ISA"
ENV_CXX = "PTOC_CXX"
ENV_CACHE = "PTOC_CACHE_DIR"

# Bumped whenever the harness protocol or the generated source changes shape.
HARNESS_VERSION = "2"
GUARD_BYTES = 4096
COMPILE_TIMEOUT = 600.0
RUN_TIMEOUT = 600.0

_FLOAT_CTYPES = ("float", "double", "half", "bfloat16_t", "float16_t", "float32_t")


class SimError(Exception):
    """The simulator path failed: `code` is the diagnostic code, `diagnostics` what PTOAS reported."""

    def __init__(self, message: str, code: str = "PTOC-E0462", diagnostics: list[Diagnostic] | None = None):
        self.code = code
        self.diagnostics = list(diagnostics or [])
        super().__init__(message)


@dataclass(frozen=True)
class SimTools:
    ptoas: str
    pto_isa: str
    cxx: str


def find_pto_isa(explicit: str | None, environ=None) -> str:
    """pto-isa's include folder (holding pto/pto-inst.hpp): `--pto-isa DIR`, else `$PTOC_PTO_ISA`."""
    env = os.environ if environ is None else environ
    for value, name in ((explicit, "--pto-isa"), (env.get(ENV_PTO_ISA, ""), f"${ENV_PTO_ISA}")):
        if not value:
            continue
        if not os.path.isfile(os.path.join(value, "pto", "pto-inst.hpp")):
            raise ToolNotFound(f"{name} {value}: not pto-isa's include folder (no pto/pto-inst.hpp in it)")
        return os.path.abspath(value)
    raise ToolNotFound(f"no pto-isa headers: pass --pto-isa DIR (pto-isa's include folder) or set ${ENV_PTO_ISA}")


def find_cxx(explicit: str | None, environ=None) -> str:
    """The C++ compiler: `--cxx PATH`, else `$PTOC_CXX`, else clang++-19, else c++ on PATH."""
    env = os.environ if environ is None else environ
    for value, name in ((explicit, "--cxx"), (env.get(ENV_CXX, ""), f"${ENV_CXX}")):
        if not value:
            continue
        exe = shutil.which(value, path=env.get("PATH")) if os.sep not in value else \
            (value if os.path.isfile(value) and os.access(value, os.X_OK) else None)
        if exe is None:
            raise ToolNotFound(f"{name} {value}: not an executable C++ compiler")
        return exe
    for name in ("clang++-19", "c++"):
        exe = shutil.which(name, path=env.get("PATH"))
        if exe:
            return exe
    raise ToolNotFound(f"no C++ compiler: pass --cxx PATH, set ${ENV_CXX}, or install clang++-19")


def find_tools(ptoas: str | None = None, pto_isa: str | None = None, cxx: str | None = None,
               environ=None) -> SimTools:
    """All three tools, each from its flag, else its variable, else PATH; raises ToolNotFound."""
    from ptoc.target.assembler import find_ptoas

    return SimTools(find_ptoas(ptoas, environ), find_pto_isa(pto_isa, environ), find_cxx(cxx, environ))


# --------------------------------------------------------------------------------------------------
# the kernel's interface
# --------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class KernelParam:
    ctype: str  # the element type of a pointer parameter, else the scalar's type
    name: str
    pointer: bool


def kernel_signature(cpp: str, func: str) -> list[KernelParam]:
    """The parameters of `func` in PTOAS's C++ (`__global__ AICORE void func(__gm__ float* v1, half v2)`)."""
    m = re.search(r"\bvoid\s+" + re.escape(func) + r"\s*\(([^)]*)\)\s*\{", cpp)
    if m is None:
        raise SimError(f"the assembled C++ has no function {func}", "PTOC-E0463")
    params = []
    for raw in (p.strip() for p in m.group(1).split(",")):
        if not raw:
            continue
        pm = re.fullmatch(r"(?:__gm__\s+)?((?:const\s+)?[A-Za-z_][\w:]*(?:\s+[A-Za-z_][\w:]*)*)\s*(\*?)\s*"
                          r"([A-Za-z_]\w*)", raw)
        if pm is None:
            raise SimError(f"cannot read parameter {raw!r} of {func} in the assembled C++", "PTOC-E0463")
        params.append(KernelParam(pm.group(1).strip(), pm.group(3), pm.group(2) == "*"))
    return params


def _func_line(pto_text: str, func: str) -> str:
    for line in pto_text.splitlines():
        if re.match(r"\s*func\.func\s+@" + re.escape(func) + r"\s*\(", line):
            return line
    raise SimError(f"the .pto module has no function @{func}", "PTOC-E0463")


def pto_pointer_types(pto_text: str, func: str) -> list[str]:
    """The element types of `func`'s `!pto.ptr<...>` arguments, in order (e.g. ["i8", "f32"])."""
    return re.findall(r"!pto\.ptr<([^>]+)>", _func_line(pto_text, func))


def kernel_kind(pto_text: str, func: str) -> str | None:
    """"cube" or "vector" from `func`'s `pto.kernel_kind` attribute; None when it has none."""
    m = re.search(r"#pto\.kernel_kind<(\w+)>", _func_line(pto_text, func))
    return m.group(1) if m else None


def compile_flags(kind: str | None) -> list[str]:
    """Compiler flags for a harness of a kernel of `kind` (no kind: pto-isa enables both units)."""
    flags = ["-std=c++20", "-O1", "-D__CPU_SIM"]
    if kind == "cube":
        flags.append("-D__DAV_CUBE__")
    elif kind == "vector":
        flags.append("-D__DAV_VEC__")
    elif kind is not None:
        raise SimError(f"unknown kernel kind {kind!r} (cube or vector)", "PTOC-E0463")
    return flags + ["-include", "stdint.h", "-include", "stddef.h"]


def _is_float(ctype: str) -> bool:
    return ctype in _FLOAT_CTYPES


# pto-isa's CPU simulator sizes its on-chip buffers (UB, L1, L0A/B/C) per architecture at run time: the
# memory model is A2/A3 unless `pto::NPU_MEMORY_INIT(pto::NPUArch::A5)` runs first (cpu/TAssign.hpp,
# cpu/NPUMemoryModel.hpp). The harness makes that call for the target it runs.
SIM_NPU_ARCH = {"a2a3": "A2A3", "a5": "A5"}


def _harness_prelude(cpp: str, title: str, includes: tuple[str, ...] = ()) -> list[str]:
    """The harness source up to the start of `main`: the kernel's C++ and the buffer helpers."""
    out = [
        f"// ptoc simulator harness (protocol {HARNESS_VERSION}) for {title}",
        "#include <cstdint>", "#include <cstddef>", "#include <cstdio>", "#include <cstdlib>",
        "#include <cstring>", "#include <type_traits>", *includes,
        "",
        cpp.rstrip("\n"),
        "",
        "namespace ptoc_harness {",
        f"constexpr size_t kGuard = {GUARD_BYTES};",
        "constexpr unsigned char kGuardByte = 0xA5;",
        "struct Buffer { unsigned char* base; unsigned char* data; size_t bytes; };",
        "",
        "static Buffer load(const char* dir, int index) {",
        "  char path[4096];",
        '  std::snprintf(path, sizeof path, "%s/arg%d.bin", dir, index);',
        '  std::FILE* f = std::fopen(path, "rb");',
        '  if (!f) { std::fprintf(stderr, "ptoc-harness: cannot open %s\\n", path); std::exit(2); }',
        "  std::fseek(f, 0, SEEK_END);",
        "  long size = std::ftell(f);",
        "  std::fseek(f, 0, SEEK_SET);",
        "  size_t bytes = size > 0 ? static_cast<size_t>(size) : 0;",
        "  size_t padded = (bytes + kGuard - 1) / kGuard * kGuard;",
        "  unsigned char* base = static_cast<unsigned char*>(std::aligned_alloc(kGuard, padded + 2 * kGuard));",
        '  if (!base) { std::fprintf(stderr, "ptoc-harness: out of memory\\n"); std::exit(2); }',
        "  std::memset(base, kGuardByte, padded + 2 * kGuard);",
        "  if (bytes && std::fread(base + kGuard, 1, bytes, f) != bytes) {",
        '    std::fprintf(stderr, "ptoc-harness: cannot read %s\\n", path); std::exit(2);',
        "  }",
        "  std::fclose(f);",
        "  return Buffer{base, base + kGuard, bytes};",
        "}",
        "",
        "static bool guards_intact(const Buffer& b) {",
        "  size_t padded = (b.bytes + kGuard - 1) / kGuard * kGuard;",
        "  for (size_t k = 0; k < kGuard; ++k) if (b.base[k] != kGuardByte) return false;",
        "  for (size_t k = b.bytes; k < padded + kGuard; ++k) if (b.data[k] != kGuardByte) return false;",
        "  return true;",
        "}",
        "",
        "static void store(const char* dir, int index, const Buffer& b) {",
        "  char path[4096];",
        '  std::snprintf(path, sizeof path, "%s/arg%d.out", dir, index);',
        '  std::FILE* f = std::fopen(path, "wb");',
        "  if (!f || std::fwrite(b.data, 1, b.bytes, f) != b.bytes || std::fclose(f) != 0) {",
        '    std::fprintf(stderr, "ptoc-harness: cannot write %s\\n", path); std::exit(2);',
        "  }",
        "}",
        "",
        "// BF16 travels as its bit pattern; the simulator's bfloat16_t may be a 16-bit stand-in type.",
        "static void bf16_in(const Buffer& b) {",
        "  for (size_t k = 0; k + 2 <= b.bytes; k += 2) {",
        "    uint16_t bits; std::memcpy(&bits, b.data + k, 2);",
        "    uint32_t wide = static_cast<uint32_t>(bits) << 16; float f; std::memcpy(&f, &wide, 4);",
        "    bfloat16_t v = static_cast<bfloat16_t>(f); std::memcpy(b.data + k, &v, 2);",
        "  }",
        "}",
        "static void bf16_out(const Buffer& b) {",
        "  for (size_t k = 0; k + 2 <= b.bytes; k += 2) {",
        "    bfloat16_t v; std::memcpy(&v, b.data + k, 2);",
        "    float f = static_cast<float>(v); uint32_t wide; std::memcpy(&wide, &f, 4);",
        "    uint16_t bits = (f != f) ? static_cast<uint16_t>(0x7FC0)",
        "                             : static_cast<uint16_t>((wide + 0x7FFFu + ((wide >> 16) & 1u)) >> 16);",
        "    std::memcpy(b.data + k, &bits, 2);",
        "  }",
        "}",
        "",
        "template <typename T> static T scalar(const char* text) {",
        "  if constexpr (std::is_integral_v<T>) {",
        "    if constexpr (std::is_signed_v<T>) return static_cast<T>(std::strtoll(text, nullptr, 0));",
        "    else return static_cast<T>(std::strtoull(text, nullptr, 0));",
        "  } else {",
        "    return static_cast<T>(std::strtod(text, nullptr));",
        "  }",
        "}",
        "}  // namespace ptoc_harness",
        "",
        "int main(int argc, char** argv) {",
        "  using namespace ptoc_harness;",
    ]
    return out


def generate_harness(cpp: str, func: str, params: list[KernelParam], arch: str = "a2a3",
                     block_arg: bool = False) -> str:
    """A complete C++ program: the kernel's C++ followed by a `main` that runs it (see the module doc), on
    the simulator's memory model of `arch`. `block_arg`: one more trailing argument, the block index the
    kernel runs as (one block of an spmd launch; pto-isa's `get_block_idx()` returns it)."""
    if arch not in SIM_NPU_ARCH:
        raise SimError(f"the simulator has no memory model for target {arch!r} (a2a3 or a5)", "PTOC-E0463")
    usage = " BLOCK" if block_arg else ""
    out = _harness_prelude(cpp, f"{func}: harness DIR SCALAR...{usage}")
    n_scalars = sum(1 for p in params if not p.pointer)
    out.append(f"  if (argc != {2 + n_scalars + block_arg}) {{")
    out.append(f'    std::fprintf(stderr, "usage: %s DIR and {n_scalars} scalar value(s)\\n", argv[0]);')
    out.append("    return 2;")
    out.append("  }")
    out.append("  const char* dir = argv[1];")
    out.append(f"  pto::NPU_MEMORY_INIT(pto::NPUArch::{SIM_NPU_ARCH[arch]});")
    args, ptr_index, scalar_index = [], 0, 0
    pointers = []
    for p in params:
        if p.pointer:
            b = f"buf{ptr_index}"
            out.append(f"  Buffer {b} = load(dir, {ptr_index});")
            if p.ctype == "bfloat16_t":
                out.append(f"  bf16_in({b});")
            args.append(f"reinterpret_cast<{p.ctype}*>({b}.data)")
            pointers.append((ptr_index, b, p.ctype))
            ptr_index += 1
        else:
            out.append(f"  {p.ctype} s{scalar_index} = scalar<{p.ctype}>(argv[{2 + scalar_index}]);")
            args.append(f"s{scalar_index}")
            scalar_index += 1
    if block_arg:
        out.append(f"  pto::cpu_sim::set_execution_context(static_cast<uint32_t>(std::strtoul(argv[{2 + n_scalars}], "
                   "nullptr, 0)), 0, 1);")
    out.append(f"  {func}({', '.join(args)});")
    for i, b, ctype in pointers:
        out.append(f"  if (!guards_intact({b})) {{")
        out.append(f'    std::fprintf(stderr, "ptoc-harness: the kernel wrote outside tensor parameter {i}\\n");')
        out.append("    return 3;")
        out.append("  }")
        if ctype == "bfloat16_t":
            out.append(f"  bf16_out({b});")
        out.append(f"  store(dir, {i}, {b});")
    out.append("  return 0;")
    out.append("}")
    return "\n".join(out) + "\n"


GROUP_WATCHDOG_SECONDS = 120


@dataclass(frozen=True)
class GroupMember:
    """One kernel of a Group launch for `Simulator.run_group`."""

    func: str
    args: tuple  # per parameter: ("buffer", index) for a tensor, the value for a scalar
    lanes: int = 1  # 2: launched on both vector lanes (sub-blocks 0 and 1)


def generate_group_harness(cpp: str, members: list[tuple[str, list[KernelParam], list[int | None], int]],
                           arch: str = "a2a3", watchdog_seconds: int = 0) -> str:
    """A C++ program running the kernels of one Group launch together: `members` are (function, its
    parameters, per parameter the buffer index of a tensor or None for a scalar, lanes). Every kernel
    (every lane of a two-lane one) runs on its own thread with its own on-chip memory, as its own core of
    the block; pto-isa's TPipe joins them. Protocol: `harness DIR SCALAR... BLOCK`, the scalars of all
    members in order; kernels that have not all finished after `watchdog_seconds` (default
    GROUP_WATCHDOG_SECONDS: a cross-core wait nobody ends) stop the run with exit status 4."""
    watchdog_seconds = int(watchdog_seconds or GROUP_WATCHDOG_SECONDS)
    if arch not in SIM_NPU_ARCH:
        raise SimError(f"the simulator has no memory model for target {arch!r} (a2a3 or a5)", "PTOC-E0463")
    names = " + ".join(f for f, _, _, _ in members)
    out = _harness_prelude(cpp, f"the group {names}: harness DIR SCALAR... BLOCK",
                           ("#include <atomic>", "#include <chrono>", "#include <thread>", "#include <vector>"))
    ctypes: dict[int, str] = {}
    for _, params, slots, _ in members:
        for p, b in zip(params, slots):
            if b is not None:
                ctypes.setdefault(b, p.ctype)
    n_scalars = sum(1 for _, params, _, _ in members for p in params if not p.pointer)
    nlanes = max((lanes for *_, lanes in members), default=1)
    threads = sum(lanes for *_, lanes in members)
    out.append(f"  if (argc != {3 + n_scalars}) {{")
    out.append(f'    std::fprintf(stderr, "usage: %s DIR, {n_scalars} scalar value(s) and BLOCK\\n", argv[0]);')
    out.append("    return 2;")
    out.append("  }")
    out.append("  const char* dir = argv[1];")
    out.append(f"  const uint32_t block = static_cast<uint32_t>(std::strtoul(argv[{2 + n_scalars}], nullptr, 0));")
    for b in sorted(ctypes):
        out.append(f"  Buffer buf{b} = load(dir, {b});")
        if ctypes[b] == "bfloat16_t":
            out.append(f"  bf16_in(buf{b});")
    out.append("  std::atomic<int> finished{0};")
    out.append("  std::vector<std::thread> cores;")
    scalar_index = 0
    for func, params, slots, lanes in members:
        args = []
        for p, b in zip(params, slots):
            if b is not None:
                args.append(f"reinterpret_cast<{p.ctype}*>(buf{b}.data)")
            else:
                out.append(f"  const {p.ctype} s{scalar_index} = scalar<{p.ctype}>(argv[{2 + scalar_index}]);")
                args.append(f"s{scalar_index}")
                scalar_index += 1
        for lane in range(lanes):
            out.append("  cores.emplace_back([&] {")
            out.append(f"    pto::NPU_MEMORY_INIT(pto::NPUArch::{SIM_NPU_ARCH[arch]});")
            out.append(f"    pto::cpu_sim::set_execution_context(block, {lane}, {nlanes});")
            out.append(f"    {func}({', '.join(args)});")
            out.append("    finished.fetch_add(1);")
            out.append("  });")
    out.append("  std::thread watchdog([&] {")
    out.append(f"    for (int t = 0; t < {watchdog_seconds * 10}; ++t) {{")
    out.append(f"      if (finished.load() == {threads}) return;")
    out.append("      std::this_thread::sleep_for(std::chrono::milliseconds(100));")
    out.append("    }")
    out.append(f'    std::fprintf(stderr, "ptoc-harness: the kernels of the group did not all finish within '
               f'{watchdog_seconds} s: a cross-core wait nobody ends\\n");')
    out.append("    std::fflush(stderr);")
    out.append("    std::_Exit(4);")
    out.append("  });")
    out.append("  for (auto& c : cores) c.join();")
    out.append("  watchdog.join();")
    for b in sorted(ctypes):
        out.append(f"  if (!guards_intact(buf{b})) {{")
        out.append(f'    std::fprintf(stderr, "ptoc-harness: a kernel wrote outside buffer {b}\\n");')
        out.append("    return 3;")
        out.append("  }")
        if ctypes[b] == "bfloat16_t":
            out.append(f"  bf16_out(buf{b});")
        out.append(f"  store(dir, {b}, buf{b});")
    out.append("  return 0;")
    out.append("}")
    return "\n".join(out) + "\n"


def scalar_text(value, ctype: str) -> str:
    """A scalar argument as the harness reads it (floats as exact C hex literals)."""
    if ctype == "bool":
        return "1" if bool(value) else "0"
    if _is_float(ctype):
        return float(value).hex()
    return str(int(value))


# --------------------------------------------------------------------------------------------------
# caching and running
# --------------------------------------------------------------------------------------------------

def cache_root(environ=None) -> str:
    env = os.environ if environ is None else environ
    if env.get(ENV_CACHE):
        return os.path.join(env[ENV_CACHE], "sim")
    base = env.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "ptoc", "sim")


_FINGERPRINTS: dict[tuple, str] = {}


def _tool_fingerprint(cxx: str, pto_isa: str) -> str:
    """Identity of the compiler (path and `--version`) and of pto-isa's header tree (names, sizes, times)."""
    key = (cxx, pto_isa)
    if key in _FINGERPRINTS:
        return _FINGERPRINTS[key]
    h = hashlib.sha256()
    h.update(os.path.realpath(cxx).encode())
    try:
        r = subprocess.run([cxx, "--version"], capture_output=True, text=True, timeout=60,
                           stdin=subprocess.DEVNULL, check=False)
        h.update(r.stdout.encode())
    except (OSError, subprocess.TimeoutExpired) as e:
        raise SimError(f"cannot run the C++ compiler {cxx}: {e}", "PTOC-E0460") from None
    root = os.path.realpath(pto_isa)
    h.update(root.encode())
    for d, dirs, files in os.walk(root):
        dirs.sort()
        for f in sorted(files):
            p = os.path.join(d, f)
            try:
                st = os.stat(p)
            except OSError:
                continue
            h.update(f"{os.path.relpath(p, root)}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    _FINGERPRINTS[key] = h.hexdigest()
    return _FINGERPRINTS[key]


@dataclass
class Simulator:
    """Assembles, compiles (cached) and runs kernels on pto-isa's CPU simulator. Use as a context manager
    (or call `close`) so a fallback build folder, used only when the cache cannot be written, is removed."""

    tools: SimTools
    arch: str = "a2a3"
    cache_dir: str | None = None
    watchdog_seconds: int = 0  # a Group run's limit (`generate_group_harness`); 0: GROUP_WATCHDOG_SECONDS
    compiles: int = 0
    cache_hits: int = 0
    last_flags: list[str] = field(default_factory=list)
    _assembled: dict = field(default_factory=dict)
    _scratch: tempfile.TemporaryDirectory | None = None

    def __enter__(self) -> Simulator:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        if self._scratch is not None:
            self._scratch.cleanup()
            self._scratch = None

    # -- assembling ------------------------------------------------------------------------------
    def assemble(self, pto_text: str, pto_path: str = "kernel.pto") -> str:
        """The C++ of `pto_text` (PTOAS at level3 with sync); SimError with PTOAS's diagnostics on failure."""
        from ptoc.target import assembler as asm

        level = "level3" if "pto.alloc_tile addr" in pto_text else "level2"
        version, _ = asm.query_version(self.tools.ptoas)
        flags = asm.assembler_flags(self.arch, level, version, asm.has_nz_views(pto_text), insert_sync=True)
        key = (pto_text, pto_path, tuple(flags))
        if key not in self._assembled:
            res = asm.assemble_text(self.tools.ptoas, pto_text, pto_path, flags, COMPILE_TIMEOUT,
                                    hint="see the .pto line PTOAS points at")
            if not res.ok:
                first = next((d for d in res.diagnostics if d.severity == "error"), None)
                raise SimError(f"PTOAS rejected the module: {first.message if first else 'unknown error'}",
                               "PTOC-E0452", res.diagnostics)
            self._assembled[key] = res.cpp
        self.last_flags = flags
        return self._assembled[key]

    # -- compiling -------------------------------------------------------------------------------
    def _cache(self) -> str:
        root = self.cache_dir or cache_root()
        try:
            os.makedirs(root, exist_ok=True)
            probe = tempfile.NamedTemporaryFile(dir=root, prefix=".probe-")
            probe.close()
            return root
        except OSError:
            if self._scratch is None:
                self._scratch = tempfile.TemporaryDirectory(prefix="ptoc-sim-build-")
            return self._scratch.name

    def harness(self, source: str, kind: str | None) -> str:
        """The path of the compiled harness for `source` (compiled now unless cached)."""
        flags = compile_flags(kind)
        h = hashlib.sha256()
        h.update(f"ptoc-sim-harness {HARNESS_VERSION}\n".encode())
        h.update(_tool_fingerprint(self.tools.cxx, self.tools.pto_isa).encode())
        h.update("\0".join(flags).encode())
        h.update(source.encode())
        digest = h.hexdigest()
        root = self._cache()
        target = os.path.join(root, digest)
        if os.path.isfile(target) and os.access(target, os.X_OK):
            self.cache_hits += 1
            return target
        with tempfile.TemporaryDirectory(prefix=".build-", dir=root) as work:
            src = os.path.join(work, "harness.cpp")
            with open(src, "w", encoding="utf-8") as fh:
                fh.write(source)
            exe = os.path.join(work, "harness")
            cmd = [self.tools.cxx, *flags, "-I", self.tools.pto_isa, src, "-o", exe]
            try:
                r = subprocess.run(cmd, capture_output=True, text=True, errors="replace", timeout=COMPILE_TIMEOUT,
                                   stdin=subprocess.DEVNULL, check=False)
            except subprocess.TimeoutExpired:
                raise SimError(f"compiling the simulator harness took longer than {COMPILE_TIMEOUT:g} s",
                               "PTOC-E0461") from None
            except OSError as e:
                raise SimError(f"cannot run the C++ compiler {self.tools.cxx}: {e.strerror or e}",
                               "PTOC-E0460") from None
            if r.returncode != 0 or not os.path.isfile(exe):
                errors = [ln for ln in r.stderr.splitlines() if "error" in ln] or r.stderr.strip().splitlines()
                shown = "; ".join(ln.replace(src, "harness.cpp") for ln in errors[:3]) or f"status {r.returncode}"
                raise SimError(f"the simulator harness does not compile: {shown}", "PTOC-E0461")
            os.replace(exe, target)
        self.compiles += 1
        return target

    # -- running ---------------------------------------------------------------------------------
    def run(self, pto_text: str, func: str, tensors: dict, scalars=(), dyn_dims=(),
            pto_path: str = "kernel.pto", block_idx: int | None = None) -> dict[int, np.ndarray]:
        """Run `func` of `pto_text`. `tensors`: {tensor parameter index: (logical array, layout ND|DN|NZ)},
        every tensor parameter given (its array is the initial content and gives the logical shape).
        `block_idx`: run it as that block of an spmd launch. Returns {index: logical array after the run}
        for every tensor parameter."""
        cpp = self.assemble(pto_text, pto_path)
        params = kernel_signature(cpp, func)
        elem = pto_pointer_types(pto_text, func)
        pointers = [p for p in params if p.pointer]
        values = list(scalars) + list(dyn_dims)
        others = [p for p in params if not p.pointer]
        if len(pointers) != len(elem) or sorted(tensors) != list(range(len(pointers))):
            raise SimError(f"{func} has {len(pointers)} tensor parameters; {len(tensors)} were given", "PTOC-E0463")
        if len(others) != len(values):
            raise SimError(f"{func} has {len(others)} scalar/dimension parameters; {len(values)} values were given",
                           "PTOC-E0463")
        dts = [_pto_dtype(t) for t in elem]
        kind = kernel_kind(pto_text, func)
        exe = self.harness(generate_harness(cpp, func, params, self.arch, block_arg=block_idx is not None), kind)
        argv = [scalar_text(v, p.ctype) for v, p in zip(values, others)]
        if block_idx is not None:
            argv.append(str(int(block_idx)))
        return self._execute(exe, func, {i: (*tensors[i], dts[i]) for i in range(len(dts))}, argv)

    def run_group(self, pto_text: str, members: list[GroupMember], buffers: dict, pto_path: str = "kernel.pto",
                  block_idx: int = 0) -> dict[int, np.ndarray]:
        """Run the kernels of one Group launch together, in one simulator process, each on its own thread
        (its own core: pto-isa's memory model is per thread), exchanging tiles through pto-isa's TPipe.
        `buffers`: {buffer index: (logical array, layout)}, the global memory the members share; a member
        passes `("buffer", index)` for a tensor parameter and the value for a scalar, in its parameter
        order (dynamic dimensions last, as `run` takes them). A member with `lanes=2` runs on both vector
        lanes (sub-blocks 0 and 1); every member then sees two sub-blocks per block. Returns {index: logical
        array after the run} for every buffer."""
        cpp = self.assemble(pto_text, pto_path)
        dts: dict[int, object] = {}
        specs, argv = [], []
        for m in members:
            params = kernel_signature(cpp, m.func)
            elem = iter(pto_pointer_types(pto_text, m.func))
            if len(params) != len(m.args):
                raise SimError(f"{m.func} has {len(params)} parameters; {len(m.args)} arguments were given",
                               "PTOC-E0463")
            slots = []
            for p, a in zip(params, m.args):
                if p.pointer:
                    if not (isinstance(a, tuple) and a[0] == "buffer" and a[1] in buffers):
                        raise SimError(f"{m.func}: tensor parameter {p.name} needs a buffer, got {a!r}", "PTOC-E0463")
                    dt = _pto_dtype(next(elem))
                    if dts.setdefault(a[1], dt) != dt:
                        raise SimError(f"buffer {a[1]} is passed as {dts[a[1]]} and as {dt}", "PTOC-E0463")
                    slots.append(a[1])
                else:
                    slots.append(None)
                    argv.append(scalar_text(a, p.ctype))
            specs.append((m.func, params, slots, m.lanes))
        missing = sorted(set(buffers) - set(dts))
        if missing or sorted(buffers) != list(range(len(buffers))):
            raise SimError(f"buffers {missing or sorted(buffers)} are not numbered 0.. or not passed to a kernel",
                           "PTOC-E0463")
        argv.append(str(int(block_idx)))
        source = generate_group_harness(cpp, specs, self.arch, self.watchdog_seconds or GROUP_WATCHDOG_SECONDS)
        exe = self.harness(source, None)
        name = " + ".join(m.func for m in members)
        return self._execute(exe, name, {i: (*buffers[i], dts[i]) for i in range(len(dts))}, argv)

    def _execute(self, exe: str, what: str, buffers: dict, argv: list[str]) -> dict[int, np.ndarray]:
        """Run the harness `exe` on `buffers` {index: (logical array, layout, pto dtype)} (packed into
        `argI.bin`) and the argument texts `argv`; every buffer's contents after the run, unpacked."""
        from ptoc.reference import packers

        with tempfile.TemporaryDirectory(prefix="ptoc-sim-") as work:
            for i, (arr, layout, dt) in buffers.items():
                a = np.asarray(arr)
                npd = _numpy(dt)
                if a.dtype.kind == "V" and a.dtype.itemsize == npd.itemsize:
                    a = a.view(npd)  # .npy keeps an ml_dtypes array (BF16, FP8) as raw bytes of its size
                else:
                    a = a.astype(npd, copy=False)
                try:
                    data = packers.pack(a, layout, dt)
                except ValueError as e:
                    raise SimError(f"tensor parameter {i}: {e}", "PTOC-E0463") from None
                with open(os.path.join(work, f"arg{i}.bin"), "wb") as fh:
                    fh.write(data)
            try:
                r = subprocess.run([exe, work, *argv], capture_output=True, text=True, errors="replace",
                                   timeout=RUN_TIMEOUT, stdin=subprocess.DEVNULL, cwd=work, check=False)
            except subprocess.TimeoutExpired:
                raise SimError(f"the simulator run of {what} took longer than {RUN_TIMEOUT:g} s") from None
            if r.returncode != 0:
                raise SimError(f"the simulator run of {what} failed: {_status(r.returncode)}"
                               + (f": {_tail(r.stderr)}" if r.stderr.strip() else ""))
            out = {}
            for i, (arr, layout, dt) in buffers.items():
                with open(os.path.join(work, f"arg{i}.out"), "rb") as fh:
                    out[i] = packers.unpack(fh.read(), layout, dt, np.shape(arr))
        return out


def _status(code: int) -> str:
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit status {code}"


def _tail(text: str) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1] if lines else ""


def _pto_dtype(name: str):
    from ptoc.ir import dtypes

    for d in dtypes.ALL:
        if d.pto == name.strip():
            return d
    raise SimError(f"unknown .pto element type {name!r}", "PTOC-E0463")


def _numpy(dt):
    from ptoc.ir import dtypes

    npd = dtypes.numpy_dtype(dt)
    if npd is None:
        raise SimError(f"{dt.name} has no host representation for the simulator", "PTOC-E0463")
    return npd


__all__ = ["GroupMember", "KernelParam", "SimError", "SimTools", "Simulator", "cache_root", "compile_flags",
           "find_cxx", "find_pto_isa", "find_tools", "generate_group_harness", "generate_harness", "kernel_kind",
           "kernel_signature", "pto_pointer_types", "scalar_text"]
