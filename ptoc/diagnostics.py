"""User-facing diagnostics.

Anything a user can fix is a `Diagnostic`: a stable code (`PTOC-Exxxx`), a severity, a message, the
source span, a hint that says how to fix it and, where one applies, the rule ID of the specification
(every code and rule has an entry in docs/rules.md, which `ptoc explain CODE|RULE` prints). A broken
internal invariant is an `InternalError` instead (exit code 3).

Rendering is pure: the caller (only `cli.py`) decides on colour and passes the source text.
"""

from __future__ import annotations

import json
from dataclasses import field
from ptoc.lazy_dataclass import dataclass  # (the standard one, its methods compiled on first use)

# Stable codes. Never renumber; retire a code by leaving its row with "(retired)".
CODES: dict[str, str] = {
    # input and syntax
    "PTOC-E0001": "syntax error",
    "PTOC-E0002": "unexpected character",
    "PTOC-E0003": "inconsistent indentation",
    "PTOC-E0004": "input file cannot be read",
    "PTOC-E0005": "construct outside the PyPTO IR text",
    "PTOC-E0006": "output file cannot be written",
    "PTOC-E0007": "output path is an input or another output",
    # structure and names
    "PTOC-E0100": "program structure",
    "PTOC-E0101": "undefined name",
    "PTOC-E0102": "name assigned more than once",
    "PTOC-E0103": "yield does not match its loop or branch",
    "PTOC-E0104": "iter_args and init_values differ in number",
    "PTOC-E0105": "annotation contradicts the value's type",
    "PTOC-E0106": "call of an unknown function",
    "PTOC-E0107": "unknown dtype",
    "PTOC-E0108": "removed dtype name",
    "PTOC-E0109": "malformed type",
    "PTOC-E0110": "unknown enum member",
    "PTOC-E0111": "statement in the wrong place",
    "PTOC-E0112": "duplicate definition",
    "PTOC-E0113": "wrong number of values",
    "PTOC-E0114": "malformed expression",
    "PTOC-E0115": "malformed decorator",
    "PTOC-E0120": "call argument contradicts the callee's parameter type",
    "PTOC-E0130": "malformed task launch (pl.submit / pl.spmd_submit)",
    "PTOC-E0131": "host-only distributed op outside HOST orchestration",
    "PTOC-E0132": "misplaced or duplicate window buffer (pld.alloc_window_buffer)",
    # language front end: forms PyPTO accepts (PTOC-E0140..E0149)
    "PTOC-E0140": "malformed declared allocation (pl.MemRef with a name only)",
    "PTOC-E0141": "declared allocation not supported by memory planning yet",
    "PTOC-E0142": "subscript form not supported",
    # operators (issue: operator set)
    "PTOC-E0200": "unknown operator",
    "PTOC-E0201": "wrong arguments for operator",
    "PTOC-E0202": "operand type rejected by operator",
    "PTOC-E0203": "operator not supported on this target",
    # pass manager, CtrlFlowTransform, ConvertToSSA (PTOC-E0290..E0299)
    "PTOC-E0290": "the input of a chosen pipeline lacks a property its first passes need",
    "PTOC-E0291": "break or continue in a loop form that cannot be lowered",
    # passes: ConvertTensorToTileOps, FlattenTileNdTo2D (PTOC-E0300..E0319)
    "PTOC-E0300": "tensor op not supported in a kernel yet",
    "PTOC-E0301": "tensor op cannot become its tile op here",
    "PTOC-E0302": "kernel result needs an Out parameter its caller cannot supply",
    "PTOC-E0310": "tile with a dynamic leading dimension cannot be flattened to 2-D",
    "PTOC-E0311": "tile valid region cannot be flattened to 2-D",
    "PTOC-E0312": "tile op on a rank > 2 tile has no 2-D form",
    # passes: LegalizeTileCast, InferTileMemorySpace, ClassifyKernels (PTOC-E0320..E0339)
    "PTOC-E0320": "dtype conversion has no chain of native TCVTs on this target",
    "PTOC-E0321": "packed FP4 conversion on a target without packed FP4",
    "PTOC-E0325": "tile cannot reach the memory space its consumer needs",
    "PTOC-E0326": "loaded tile used where only the cube unit can write (Acc)",
    "PTOC-E0750": "a one-core kernel moves a tile across the cube / vector boundary",
    "PTOC-E0330": "kernel mixes cube and vector work",
    # passes: InitMemRef, AllocateMemoryAddr (PTOC-E0380..E0399)
    "PTOC-E0380": "tile with a dynamic physical shape has no static buffer size",
    "PTOC-E0381": "tiles that must share a buffer live in different memory spaces",
    "PTOC-E0382": "loop-carried or if-yielded tile is read after its buffer is overwritten",
    "PTOC-E0383": "in-place op overwrites a tile that is read again",
    "PTOC-E0384": "tile-typed kernel parameter",
    "PTOC-E0390": "on-chip memory space overflows",
    "PTOC-E0391": "tile.alloc without a constant size",
    # passes: BlockNzTensorViews (PTOC-E0340..E0379)
    "PTOC-E0340": "NZ tensor trailing dims are not whole fractals",
    "PTOC-E0341": "NZ tensor has a dynamic trailing dim",
    "PTOC-E0342": "NZ tensor has rank < 2",
    "PTOC-E0343": "rank > 3 NZ tensor has a dynamic leading dim",
    "PTOC-E0344": "NZ tensor of a sub-byte or packed FP4 dtype",
    "PTOC-E0345": "NZ tensor with explicit strides or a partial valid region",
    "PTOC-E0346": "NZ tensor loaded into a memory space other than Mat",
    "PTOC-E0347": "NZ load window not aligned to fractals",
    "PTOC-E0348": "symbolic NZ offset not provably aligned and non-negative",
    "PTOC-E0349": "NZ load valid_shape ends inside a fractal",
    "PTOC-E0350": "NZ load spans more than one batch panel",
    "PTOC-E0351": "tensor.slice of an NZ tensor windows the fractal plane",
    "PTOC-E0352": "tensor.reshape of an NZ tensor to a non-flat shape",
    "PTOC-E0353": "unsupported use of an NZ tensor",
    "PTOC-E0355": "NZ write-back not supported on this target",
    "PTOC-E0356": "NZ write-back source is not an Acc tile",
    "PTOC-E0357": "NZ write-back is not FP32 Acc into FP32",
    "PTOC-E0358": "NZ write-back with atomic, pre_quant or pre_relu",
    "PTOC-E0359": "NZ write-back tile not static, fully valid, 16-aligned 2-D",
    "PTOC-E0360": "NZ write-back exceeds the store extent limits",
    "PTOC-E0361": "NZ write-back Acc tile exceeds L0C",
    "PTOC-E0362": "NZ write-back does not cover the whole row axis at row 0",
    "PTOC-E0363": "NZ write-back spans more than one batch panel",
    "PTOC-E0364": "NZ write-back column offset not aligned or out of range",
    "PTOC-E0365": "tile stored from a buffer TSTORE cannot read",
    "PTOC-E0370": "NZ load GM gap exceeds the 16-bit burst stride (pto-isa#317)",
    # codegen: .pto module (PTOC-E0400..E0409)
    "PTOC-E0400": "operation the .pto emitter cannot emit yet",
    "PTOC-E0405": "nothing to emit: the program has no kernel",
    "PTOC-E0406": "tile work in a host function, outside every kernel",
    # mixed kernels: ExpandMixedKernel, InjectGmPipeBuffer, cross-core codegen (PTOC-E0620..E0639)
    "PTOC-E0620": "cross-core slot buffer does not fit beside the kernel's tiles",
    "PTOC-E0621": "a2a3 cross-core pipe without a GM slot buffer",
    "PTOC-E0622": "mixed kernel with cube and vector work inside a while loop or scope",
    # compile driver and assembler
    "PTOC-E0410": "assembler version cannot take this program",
    # codegen: GlobalTensor header (PTOC-E0420..E0429)
    "PTOC-E0420": "GM tensor element type has no pto-isa C++ spelling",
    "PTOC-E0421": "GM tensor of rank > 5 has no GlobalTensor form",
    "PTOC-E0422": "GlobalTensor shape or stride outside pto-isa's int range",
    "PTOC-E0450": "the PTO assembler cannot be run",
    "PTOC-E0451": "the PTO assembler timed out",
    "PTOC-E0452": "the PTO assembler reported an error",
    "PTOC-E0453": "no PTO assembler found",
    "PTOC-E0454": "the PTO assembler's version cannot be determined",
    # toolchain: pto-isa CPU simulator runs (PTOC-E0460..E0469)
    "PTOC-E0460": "a simulator tool is missing",
    "PTOC-E0461": "the simulator harness does not compile",
    "PTOC-E0462": "the simulator run failed",
    "PTOC-E0463": "the kernel's C++ signature cannot be simulated",
    # numeric reference: ptoc.reference.interp (PTOC-E0500..E0519)
    "PTOC-E0500": "the reference cannot execute this operator yet",
    "PTOC-E0501": "the reference has no numeric model of this dtype",
    "PTOC-E0502": "kernel inputs do not match the kernel's parameters",
    "PTOC-E0503": "kernel accesses memory outside a tensor or tile",
    "PTOC-E0504": "kernel faults while the reference executes it",
    "PTOC-E0505": "validation needs a value for a dynamic dimension",
    "PTOC-E0506": "bad --input / --dim / --scalar value",
    # passes: UnrollLoops, Simplify, NormalizeStmtStructure, FlattenCallExpr (PTOC-E0600..E0609)
    "PTOC-E0600": "pl.unroll bounds are not integer constants",
    "PTOC-E0601": "pl.unroll step is 0",
    "PTOC-E0602": "pl.unroll loop has too many iterations",
    "PTOC-E0603": "pl.unroll loop carries values",
    # whole programs: inlining and outlining (PTOC-E0610..E0619)
    "PTOC-E0610": "Inline functions call each other in a cycle",
    "PTOC-E0611": "call to an Inline function that cannot be inlined",
    "PTOC-E0612": "Inline function returns before its last statement",
    "PTOC-E0613": "more than one pl.spmd block in a pl.cluster scope",
    "PTOC-E0650": "a pl.pipeline loop needs a constant step and stage",
    "PTOC-E0670": "a kernel returns a tile",
    "PTOC-E0671": "vector op on BF16 tiles on a target whose vector unit has no BF16",
    "PTOC-E0672": "kernel reads a tile that tile.create allocated and nothing wrote",
    # the pl.spmd loop form (PTOC-E0690..E0699)
    "PTOC-E0690": "malformed pl.spmd loop",
    "PTOC-E0691": "pl.spmd loop inside a kernel function",
    # reading PyPTO's dumps at any stage (PTOC-E0770..E0779)
    "PTOC-E0770": "tile without a MemRef in a function whose buffers are already allocated",
    "PTOC-E0680": "a kernel's cross-core pipe ops disagree on the split mode",
    "PTOC-E0681": "a split kernel cannot be written per lane",
    # cross-core slot releases and pipelines (PTOC-E0720..E0729)
    "PTOC-E0720": "a tfree's tile is not the value of the matching tpop",
    "PTOC-E0721": "a tfree's pipe id differs from its tpop's",
    # ConvertToSSA, LowerCompositeOps (PTOC-E0740..E0749)
    "PTOC-E0740": "a name read after the loop or branch that first assigns it has no start value",
    "PTOC-E0741": "tile.sin / tile.cos on a tile that is not FP32",
    # runtime scope placement (PTOC-E0810..E0819)
    "PTOC-E0810": "an automatic scope placed by hand in a function whose scopes the compiler places",
    "PTOC-E0811": "a manual scope nested inside another manual scope",
    "PTOC-E0812": "an automatic scope nested inside a manual scope",
    # reading PyPTO's dumps at any stage (PTOC-E0870..E0874)
    "PTOC-E0870": "the branches of an if yield a tile result from two placed buffers",
    # internal
    "PTOC-I0001": "internal error",
    "PTOC-I0100": "function not emitted",
    "PTOC-I0455": "assembler flag chosen for an older PTOAS",
}


@dataclass(frozen=True)
class Span:
    """A source range. Lines and columns are 1-based; `end_col` is exclusive."""

    file: str
    line: int
    col: int
    end_line: int
    end_col: int

    @staticmethod
    def unknown() -> Span:
        return Span("<unknown>", 0, 0, 0, 0)

    @property
    def known(self) -> bool:
        return self.line > 0

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"


@dataclass(frozen=True)
class Diagnostic:
    code: str
    message: str
    span: Span | None = None
    hint: str | None = None
    rule: str | None = None
    severity: str = "error"  # "error" | "warning" | "info"
    notes: tuple[tuple[str, Span | None], ...] = ()

    def to_json(self) -> dict:
        d: dict = {
            "code": self.code,
            "severity": self.severity,
            "message": self.message,
            "file": self.span.file if self.span else None,
            # a span without a position (a file that cannot be read) has null line and column
            "line": self.span.line if self.span and self.span.known else None,
            "column": self.span.col if self.span and self.span.known else None,
            "end_line": self.span.end_line if self.span and self.span.known else None,
            "end_column": self.span.end_col if self.span and self.span.known else None,
            "hint": self.hint,
            "rule": self.rule,
        }
        if self.notes:
            d["notes"] = [
                {"message": m, "line": s.line if s else None, "column": s.col if s else None}
                for m, s in self.notes
            ]
        return d


class CompileError(Exception):
    """One or more user errors. The compiler collects what it can before raising."""

    def __init__(self, diagnostics: list[Diagnostic]):
        self.diagnostics = list(diagnostics)
        super().__init__("; ".join(f"{d.code}: {d.message}" for d in self.diagnostics))


class InternalError(Exception):
    """A broken internal invariant: a bug in ptoc, never the user's fault."""


@dataclass
class DiagnosticSink:
    """Collects diagnostics so several errors in one file are all reported."""

    diagnostics: list[Diagnostic] = field(default_factory=list)
    limit: int = 200

    def error(self, code: str, message: str, span: Span | None, hint: str | None = None,
              rule: str | None = None) -> None:
        if code not in CODES:
            raise InternalError(f"diagnostic code {code} is not registered")
        if len(self.diagnostics) < self.limit:
            self.diagnostics.append(Diagnostic(code, message, span, hint, rule))

    def add(self, d: Diagnostic) -> None:
        if len(self.diagnostics) < self.limit:
            self.diagnostics.append(d)

    @property
    def has_errors(self) -> bool:
        return any(d.severity == "error" for d in self.diagnostics)

    def raise_if_errors(self) -> None:
        if self.has_errors:
            raise CompileError(sorted_diagnostics(self.diagnostics))


def sorted_diagnostics(diags: list[Diagnostic]) -> list[Diagnostic]:
    def key(d: Diagnostic):
        s = d.span
        return (s.file if s else "", s.line if s else 0, s.col if s else 0)

    return sorted(diags, key=key)


def _rule_pointer(rule: str) -> str:
    """Where a rule ID leads: its entry in docs/rules.md, which `ptoc explain` prints."""
    first = rule.replace(",", " ").split()[0] if rule.strip() else rule
    return f"see `ptoc explain {first}`"


_COLORS = {"error": "\x1b[1;31m", "warning": "\x1b[1;33m", "info": "\x1b[1;36m"}
_BOLD = "\x1b[1m"
_GREEN = "\x1b[1;32m"
_RESET = "\x1b[0m"


_MAX_SHOWN = 240  # longest source line shown whole under a diagnostic


def render_text(d: Diagnostic, source: str | None, color: bool = False) -> str:
    """`file:line:col: error[CODE]: message`, the source line, a caret under the span, hint, rule."""

    def c(style: str, text: str) -> str:
        return f"{style}{text}{_RESET}" if color else text

    loc = f"{d.span}: " if d.span and d.span.known else (f"{d.span.file}: " if d.span else "")
    out = [f"{c(_BOLD, loc)}{c(_COLORS.get(d.severity, ''), f'{d.severity}[{d.code}]')}: {d.message}"]
    if source is not None and d.span is not None and d.span.known:
        # Lines as the parser counts them: only LF, CRLF and CR end a line (not form feeds and the
        # other separators str.splitlines knows).
        lines = source.replace("\r\n", "\n").replace("\r", "\n").split("\n")
        if 1 <= d.span.line <= len(lines):
            raw = lines[d.span.line - 1]
            text = raw.expandtabs(4)
            num = str(d.span.line)
            pad = " " * len(num)
            # Columns count characters of the raw line; the caret goes under the tab-expanded text.
            col = max(d.span.col, 1)
            start = len(raw[: col - 1].expandtabs(4)) + 1
            if d.span.end_line == d.span.line and d.span.end_col > col:
                width = len(raw[: d.span.end_col - 1].expandtabs(4)) + 1 - start
            else:
                width = max(1, len(text) - start + 1)
            width = max(1, min(width, max(1, len(text) - start + 1)))
            if len(text) > _MAX_SHOWN:  # a window around the caret, not a screenful of one line
                lo = max(0, start - 1 - _MAX_SHOWN // 4)
                hi = min(len(text), lo + _MAX_SHOWN)
                lead = "..." if lo > 0 else ""
                text = lead + text[lo:hi] + ("..." if hi < len(text) else "")
                width = max(1, min(width, hi - start + 1))
                start = start - lo + len(lead)
            out.append(f"{pad} |")
            out.append(f"{num} | {text}")
            out.append(f"{pad} | {' ' * (start - 1)}{c(_GREEN, '^' * width)}")
    for msg, span in d.notes:
        where = f"{span}: " if span and span.known else ""
        out.append(f"  note: {where}{msg}")
    if d.hint:
        out.append(f"  hint: {d.hint}")
    if d.rule:
        out.append(f"  rule: {d.rule} ({_rule_pointer(d.rule)})")
    return "\n".join(out)


_GCC_SEVERITY = {"error": "error", "warning": "warning", "info": "note"}


def render_gcc(d: Diagnostic) -> str:
    """GCC's one-line form, which editors and CI problem matchers read:
    `file:line:col: error: message [CODE]`, then `note:` lines for notes, the hint and the rule."""
    loc = f"{d.span}" if d.span and d.span.known else (d.span.file if d.span else "ptoc")
    out = [f"{loc}: {_GCC_SEVERITY.get(d.severity, d.severity)}: {d.message} [{d.code}]"]
    for msg, span in d.notes:
        out.append(f"{span if span and span.known else loc}: note: {msg}")
    if d.hint:
        out.append(f"{loc}: note: hint: {d.hint}")
    if d.rule:
        out.append(f"{loc}: note: rule {d.rule}: {_rule_pointer(d.rule)}")
    return "\n".join(out)


def render_json(d: Diagnostic) -> str:
    return json.dumps(d.to_json(), sort_keys=True)
