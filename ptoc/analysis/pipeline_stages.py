"""Facts the pipeline and memory passes share: the pipeline membership of a copied tile definition
(LowerPipelineLoops writes it, MemoryReuse reads and drops it) and where a kernel's cross-core slot
buffers sit (AllocateMemoryAddr places them, MemoryReuse leaves room for them)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from ptoc.ir.nodes import (
    AssignStmt,
    Call,
    ConstInt,
    DictExpr,
    ForStmt,
    Function,
    IfStmt,
    ScopeStmt,
    Stmt,
    StrLit,
    UnaryOp,
    WhileStmt,
)
from ptoc.ir.visitor import replace
from ptoc.ir.visitor import walk

MEMBERSHIP = "pipeline_membership"


def membership_pairs(call: Call) -> list[tuple[int, int]]:
    """The `(group, stage)` pairs of a call's `attrs={'pipeline_membership': 'g:s;g:s'}`; a malformed
    pair is skipped (the attribute may come from hand-written text)."""
    attrs = call.kwarg("attrs")
    if not isinstance(attrs, DictExpr):
        return []
    packed = next((v.value for k, v in attrs.items
                   if isinstance(k, StrLit) and k.value == MEMBERSHIP and isinstance(v, StrLit)), "")
    out = []
    for tok in packed.split(";"):
        m = re.fullmatch(r"\s*(-?\d+):(-?\d+)\s*", tok)
        if m:
            out.append((int(m.group(1)), int(m.group(2))))
    return out


def without_membership(call: Call) -> Call:
    """`call` without its pipeline membership (and without an `attrs=` left empty)."""
    attrs = call.kwarg("attrs")
    if not isinstance(attrs, DictExpr):
        return call
    items = tuple((k, v) for k, v in attrs.items if not (isinstance(k, StrLit) and k.value == MEMBERSHIP))
    if len(items) == len(attrs.items):
        return call
    kwargs = tuple((k, v) for k, v in call.kwargs if k != "attrs")
    if items:
        kwargs += (("attrs", replace(attrs, items=items)),)
    return replace(call, kwargs=kwargs)


def with_membership(call: Call, group: int, stage: int) -> Call:
    """`call` with `group:stage` appended to its pipeline membership (an inner pipeline's pair stays)."""
    attrs = call.kwarg("attrs")
    pair = f"{group}:{stage}"
    items: list = list(attrs.items) if isinstance(attrs, DictExpr) else []
    for i, (k, v) in enumerate(items):
        if isinstance(k, StrLit) and k.value == MEMBERSHIP and isinstance(v, StrLit):
            items[i] = (k, replace(v, value=f"{v.value};{pair}" if v.value else pair))
            break
    else:
        items.append((StrLit(MEMBERSHIP, span=call.span), StrLit(pair, span=call.span)))
    span = attrs.span if isinstance(attrs, DictExpr) else call.span
    kwargs = tuple((k, v) for k, v in call.kwargs if k != "attrs") + (("attrs", DictExpr(tuple(items), span=span)),)
    return replace(call, kwargs=kwargs)


# --------------------------------------------------------------------------------------------------
# Cross-core slot buffers (`pl.system.reserve_buffer`)
# --------------------------------------------------------------------------------------------------

PTOAS_SLOTS = 8  # the depth of every pipe ring the toolchain's PTOAS builds (`TPipe<..., 8, 8>`), whatever slot_num


def pipe_slot_size(fn, calls=None) -> int:
    """The slot size of `fn`'s pipe initialisation (0 when it sets up no pipe). `calls`: the calls under
    `fn` in walk order (its node index's), when the caller has them: the first initialisation is the same."""
    for n in walk(fn) if calls is None else calls:
        if isinstance(n, Call) and n.kind == "op" and n.op.endswith(("aic_initialize_pipe", "aiv_initialize_pipe")):
            v = n.kwarg("slot_size")
            return v.value if isinstance(v, ConstInt) else 0
    return 0


RESERVE_SPACE = {"AIC": "Mat", "AIV": "Vec", "InCore": "Vec"}  # the consumer's memory of the pipe


@dataclass
class Reserved:
    """One `reserve_buffer` of a kernel: where it sits in its space and how many bytes it holds there."""

    stmt: Stmt
    space: str
    base: int
    size: int  # the bytes the ring really takes (PTOAS's 8 slots, at least the IR's size=), aligned


def _reserve_calls(body: tuple[Stmt, ...]):
    for s in body:
        if isinstance(s, AssignStmt) and isinstance(s.value, Call) and s.value.kind == "op" \
                and s.value.op in ("system.reserve_buffer", "reserve_buffer"):
            yield s
        elif isinstance(s, (ForStmt, WhileStmt, ScopeStmt)):
            yield from _reserve_calls(s.body)
        elif isinstance(s, IfStmt):
            yield from _reserve_calls(s.then_body)
            yield from _reserve_calls(s.else_body)


def reserved_buffers(f: Function, arch) -> list[Reserved]:
    """The slot buffers of kernel `f`, placed as PyPTO places them: in the pipe consumer's space (Mat in
    an AIC kernel, Vec otherwise), a `base=` of 0 or more where written, the others one after another
    from address 0 (each after the end of every earlier one). A ring takes `slot_size * 8` bytes when that
    is more than its `size=` (the toolchain's PTOAS always builds 8 slots)."""
    out: list[Reserved] = []
    space = RESERVE_SPACE.get(f.func_type or "", "Vec")
    nxt = 0
    for s in _reserve_calls(f.body):
        call: Call = s.value  # type: ignore[assignment]
        size_e, base_e = call.kwarg("size"), call.kwarg("base")
        if not isinstance(size_e, ConstInt) or size_e.value <= 0:
            continue  # the .pto writer reports it
        base = _const(base_e)
        unit = arch.alignment_bytes
        size = -(-max(size_e.value, PTOAS_SLOTS * pipe_slot_size(f)) // unit) * unit
        if base is None or base < 0:
            base = nxt
        out.append(Reserved(s, space, base, size))
        nxt = max(nxt, base + size)
    return out


def reserved_end_by_space(f: Function, arch) -> dict[str, int]:
    """Where a space's tiles start: after the end of every slot buffer in it."""
    out: dict[str, int] = {}
    for r in reserved_buffers(f, arch):
        out[r.space] = max(out.get(r.space, 0), r.base + r.size)
    return out


def _const(e) -> int | None:
    if isinstance(e, ConstInt):
        return e.value
    if isinstance(e, UnaryOp) and e.op == "-" and isinstance(e.operand, ConstInt):
        return -e.operand.value
    return None
