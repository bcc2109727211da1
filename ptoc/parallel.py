"""Lowering one program in several processes (`ptoc compile -j N FILE`).

Most passes look at one function at a time; the ones that look further (outlining, splitting mixed
kernels, call directions, the order of a kernel's parameters) look only along calls. So a program whose
functions fall into groups that never call one another lowers group by group to the same functions: a
contiguous run of such groups (a *shard*) goes through the whole pipeline in a forked worker, and the
shards' lowered functions, concatenated in order, are the program the serial pipeline makes.

The merge is taken only when it is safe to: every shard lowered without an error, the merged function
names are unique (a name a pass made in one shard may not collide with one of another shard, which the
serial pipeline would have renamed) and the shards agree on the program's dynamic dimensions. Otherwise,
or when anything else goes wrong in a worker, the serial pipeline runs on the whole program, so the
diagnostics of a program with errors are exactly the serial ones. tests/test_parallel.py compares the
outputs of both ways byte for byte on every example and corpus program.

Workers are forked after the front end (they start with the compiler loaded and the program parsed) and
send back their results, pickled, through a pipe; the parent process compiles the first shard itself.
The lowered functions come back too, with their value types, for what reads the whole lowered program
afterwards (the kernels manifest, `--assemble`). Where `os.fork` does not
exist, or the program is too small to pay for the workers (`MIN_SHARD_WORK`), lowering is serial.
"""

from __future__ import annotations

import gc
import os
import pickle
from dataclasses import replace

from ptoc.ir.nodes import KERNEL_TYPES, Call, Program, StrLit

# The least work (operator and function calls, plus one per function) that is worth a worker of its own:
# a fork and the pickled result cost a few milliseconds, about what the pipeline spends on ~100 calls.
# PTOC_MIN_SHARD_WORK overrides it (0: shard whenever the program splits, as the tests do).
MIN_SHARD_WORK = 600


def min_shard_work() -> int:
    raw = os.environ.get("PTOC_MIN_SHARD_WORK", "")
    return int(raw) if raw.isdigit() else MIN_SHARD_WORK


def _links(program: Program, cache) -> list[tuple[set[str], int]]:
    """For each function: the names of the program's functions it may refer to (the callee of every
    `self.f(...)` call and, conservatively, every string literal), and its work (calls + 1)."""
    from ptoc.ir.verifier import NodeIndex

    out = []
    for f in program.functions:
        index = NodeIndex.get(f, cache)
        calls = index.of(Call)
        names = {c.op for c in calls if c.kind != "op"}
        names.update(s.value for s in index.of(StrLit))
        out.append((names, len(calls) + 1))
    return out


def plan_shards(program: Program, jobs: int, cache=None, min_work: int | None = None) -> list[tuple[int, int]]:
    """Up to `jobs` contiguous ranges `(start, stop)` of `program.functions` that share no call (no
    function of one range refers to a function of another), balanced by work, each with at least
    `min_work`; one range (the whole program) when it does not split."""
    fns = program.functions
    n = len(fns)
    if jobs < 2 or n < 2:
        return [(0, n)]
    min_work = min_shard_work() if min_work is None else min_work
    positions: dict[str, list[int]] = {}
    for i, f in enumerate(fns):
        positions.setdefault(f.name, []).append(i)
    links = _links(program, cache)
    # reach[i]: the last function tied to function i or to one before it (a function is tied to every
    # function it names, and to every other function of the same name); a cut before j is allowed when
    # no function before j is tied to one at or after j
    reach = list(range(n))
    for i, (names, _) in enumerate(links):
        for name in names | {fns[i].name}:
            for j in positions.get(name, ()):
                lo, hi = min(i, j), max(i, j)
                if reach[lo] < hi:
                    reach[lo] = hi
    segments = []  # (start, stop, work) of the smallest ranges between allowed cuts
    start, far, work = 0, -1, 0
    for i in range(n):
        far = max(far, reach[i])
        work += links[i][1]
        if far <= i:
            segments.append((start, i + 1, work))
            start, work = i + 1, 0
    total = sum(w for _, _, w in segments)
    shards = min(jobs, len(segments), max(1, total // max(min_work, 1)) if min_work else jobs)
    if shards < 2:
        return [(0, n)]
    ranges = []
    acc, begin, k = 0, 0, 1
    for si, (_, e, w) in enumerate(segments):
        acc += w
        # cut at the k-th share of the work, or when each shard still to fill needs one of the segments left
        if k < shards and e < n and (acc >= total * k / shards or len(segments) - si - 1 == shards - k):
            ranges.append((begin, e))
            begin, k = e, k + 1
    ranges.append((begin, n))
    return ranges


def compile_in_shards(program: Program, ctx, jobs: int, skip: frozenset[str], pto_level: str, header: bool):
    """What `ptoc.driver.compile_program` makes of `program` (the lowered program, the `.pto` text, the
    functions not emitted, the kernels' GlobalTensor types or None without `header`), each shard lowered
    and emitted in a process of its own; None when the program does not split, the platform cannot
    fork, or anything in a shard went wrong (the caller then compiles serially)."""
    if jobs < 2 or not hasattr(os, "fork"):
        return None
    from ptoc.ir.verifier import keep_types, kept_types

    front = kept_types(program, ctx)
    ranges = plan_shards(program, jobs, front)
    if len(ranges) < 2:
        return None
    shards = []
    for a, b in ranges:
        shard = replace(program, functions=program.functions[a:b])
        if front is not None:
            keep_types(shard, front)  # what the front end inferred serves every shard's first passes
        shards.append(shard)
    job = (ctx, skip, pto_level, header)
    workers = [_fork(shard, job) for shard in shards[1:]]
    results = [_compile_shard(shards[0], job)]
    for pid, fd in workers:
        results.append(_collect(pid, fd))
    if any(r is None for r in results):
        return None
    return _merge(program, ctx, results)


_MODULE_END = "}"


def _compile_shard(shard: Program, job):
    """(lowered functions, their value types, dynamic dims, the `.pto` lines of its kernels, functions not
    emitted, GlobalTensor types or None) of one shard; None on any error."""
    from ptoc.codegen.global_tensor import kernel_types
    from ptoc.codegen.pto import emit_module
    from ptoc.diagnostics import CompileError, InternalError
    from ptoc.driver import lower

    ctx, skip, pto_level, header = job
    try:
        low = lower(shard, ctx, skip=skip)
        types = low.function_types(ctx)
        text, skipped = emit_module(low.program, ctx, pto_level=pto_level, types=types)
        kernels = kernel_types(low.program, ctx, types) if header else None
    except (CompileError, InternalError, RecursionError):
        return None
    lines = text.split("\n")
    # the module is `module attributes {...} {`, the kernels, `}` and a final newline
    if len(lines) < 3 or lines[-1] != "" or lines[-2] != _MODULE_END:
        return None
    return low.program.functions, types, low.program.dynamic_dims, (lines[0], lines[1:-2]), skipped, kernels


def _fork(shard: Program, job) -> tuple[int, int]:
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the worker: compile, send, and leave without running the parent's exit handlers
        status = 1
        try:
            gc.disable()  # (it exits when done; a collection during pickling would cost more than the pickling)
            os.close(r)
            result = _compile_shard(shard, job)
            data = pickle.dumps(result, protocol=pickle.HIGHEST_PROTOCOL)
            with os.fdopen(w, "wb") as out:
                out.write(data)
            status = 0
        finally:
            os._exit(status)
    os.close(w)
    return pid, r


def _collect(pid: int, fd: int):
    """The worker's result, or None when it failed or sent nothing readable."""
    try:
        with os.fdopen(fd, "rb") as f:
            data = f.read()
    finally:
        _, status = os.waitpid(pid, 0)
    if status != 0 or not data:
        return None
    enabled = gc.isenabled()
    gc.disable()  # (unpickling makes many objects that all live on: no collection can free any)
    try:
        return pickle.loads(data)
    except Exception:  # noqa: BLE001  (a damaged result: compile serially instead)
        return None
    finally:
        if enabled:
            gc.enable()


def _merge(program: Program, ctx, results):
    """The shards' results as one compile's, or None when they cannot be joined as the serial compile
    would have made them."""
    from ptoc.codegen.global_tensor import _namespace_names as namespace_names
    from ptoc.driver import LowerResult
    from ptoc.ir.verifier import VerifyCache, keep_types

    functions = tuple(f for r in results for f in r[0])
    names = [f.name for f in functions]
    dims = results[0][2]
    opening = results[0][3][0]
    if len(set(names)) != len(names) or any(r[2] != dims or r[3][0] != opening for r in results[1:]):
        return None
    merged = replace(program, functions=functions, dynamic_dims=dims)
    cache = VerifyCache(ctx)
    token = cache.token(merged)
    for fs, types, *_ in results:
        for f in fs:
            t = types.get(f.name)
            if t is not None:
                cache.store(f, merged, token, t, True)
    keep_types(merged, cache)
    text = "\n".join([opening, *(line for r in results for line in r[3][1]), _MODULE_END]) + "\n"
    skipped = [name for r in results for name in r[4]]
    kernels = None
    if results[0][5] is not None:
        # a kernel's C++ namespace depends on the names of all kernels (a renamed one avoids them all)
        kernels = [k for r in results for k in r[5]]
        spaces = namespace_names([f for f in functions if f.func_type in KERNEL_TYPES])
        kernels = [k if k.namespace == spaces[k.function] else replace(k, namespace=spaces[k.function])
                   for k in kernels]
    return LowerResult(merged, verified=cache), text, skipped, kernels
