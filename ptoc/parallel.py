"""Compiling one program in several processes (`ptoc compile -j N FILE`, `ptoc check -j N`).

Most passes look at one function at a time; the ones that look further (outlining, splitting mixed
kernels, call directions, the order of a kernel's parameters) look only along calls. So a program whose
functions fall into groups that never call one another compiles group by group to the same functions: a
contiguous run of such groups (a *shard*) goes through the whole pipeline and the emitters in a forked
worker, and the shards' outputs (`.pto` lines, GlobalTensor types, parts of the kernels manifest),
concatenated in order, are what the serial compile writes. Only a renamed kernel's C++ namespace depends
on the names of the other kernels: it is worked out again over all of them.

The split is made on the text when its layout is the plain one (`plan_text_shards`): each worker runs
the front end too, on a copy of the text in which the other shards' functions are empty lines, so every
line (and every location in a diagnostic) keeps its number, and checks that it found exactly the planned
functions at the planned lines. Otherwise it is made on the checked program (`plan_shards`).

The join is taken only when it is what the serial compile makes (`_join`): every shard compiled without
an error or a warning, the function names are unique (a name a pass made in one shard may not collide
with one of another shard, which the serial pipeline would have renamed), and the shards agree on the
module and the program's dynamic dimensions. Otherwise, or when anything else goes wrong in a worker, the
whole program compiles in one process, so a program with errors reports exactly the serial diagnostics.
tests/test_parallel.py compares the outputs of both ways byte for byte on every bundled program that
splits and on generated many-kernel programs.

Workers are forked (they start with the compiler loaded) and send back their outputs, pickled, through
a pipe; the parent process compiles the first shard itself. Where `os.fork` does not exist, or the
program is too small to pay for the workers (`MIN_SHARD_WORK`), the compile is serial.
"""

from __future__ import annotations

import gc
import os
import re
from dataclasses import replace

from ptoc.lazy_dataclass import dataclass
from ptoc.ir.nodes import KERNEL_TYPES, Call, Program, StrLit

# The least work (operator and function calls, plus one per function) that is worth a worker of its own:
# a fork and the pickled result cost a few milliseconds, about what the pipeline spends on ~100 calls.
# PTOC_MIN_SHARD_WORK overrides it (0: shard whenever the program splits, as the tests do).
MIN_SHARD_WORK = 600


def default_jobs() -> int:
    """The processes a one-file compile uses when `-j` is not given: the CPUs this process may run on, at
    most 8 (past a few, the serial front and back of a compile dominate)."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    return max(1, min(cpus, 8))


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
    if jobs < 2 or len(fns) < 2:
        return [(0, len(fns))]
    links = _links(program, cache)
    return _cut([f.name for f in fns], [names for names, _ in links], [w for _, w in links], jobs,
                min_shard_work() if min_work is None else min_work)


def _cut(names: list[str], refs: list[set[str]], works: list[int], jobs: int, min_work: int) -> list[tuple[int, int]]:
    """The ranges of `plan_shards` for functions named `names`, each referring to the names in its `refs`
    and costing its `works`."""
    n = len(names)
    positions: dict[str, list[int]] = {}
    for i, name in enumerate(names):
        positions.setdefault(name, []).append(i)
    # reach[i]: the last function tied to function i or to one before it (a function is tied to every
    # function it names, and to every other function of the same name); a cut before j is allowed when
    # no function before j is tied to one at or after j
    reach = list(range(n))
    for i, named in enumerate(refs):
        for name in named | {names[i]}:
            for j in positions.get(name, ()):
                lo, hi = min(i, j), max(i, j)
                if reach[lo] < hi:
                    reach[lo] = hi
    segments = []  # (start, stop, work) of the smallest ranges between allowed cuts
    start, far, work = 0, -1, 0
    for i in range(n):
        far = max(far, reach[i])
        work += works[i]
        if far <= i:
            segments.append((start, i + 1, work))
            start, work = i + 1, 0
    total = sum(w for _, _, w in segments)
    shards = min(jobs, len(segments), max(1, total // min_work) if min_work > 0 else jobs)
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


# --------------------------------------------------------------------------------------------------
# Splitting the text: the front end runs in the workers too
# --------------------------------------------------------------------------------------------------

_STRING_OR_COMMENT = re.compile(r"#.*|\"(?:\\.|[^\"\\])*\"|'(?:\\.|[^'\\])*'")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z_0-9]*")
_DEF = re.compile(r"def\s+([A-Za-z_][A-Za-z_0-9]*)\s*\(")


@dataclass(frozen=True)
class TextShard:
    """One shard of a program's text: the whole text with the lines of the other shards' functions
    left empty (so every line keeps its number), and what the front end must find in it: the names of
    its functions and the line of each `def`, in order."""

    text: str
    names: tuple[str, ...]
    def_lines: tuple[int, ...]


def _members(text: str):
    """The program class's functions as (first line, `def` line, end line, name), 0-based line indexes
    with the end exclusive, or None when the text is not the plain layout this reader is sure of: one
    `class` at the top level whose body holds only decorated or plain `def`s, no triple-quoted string,
    tab, carriage return or backslash continuation, brackets that balance."""
    if '"""' in text or "'''" in text or "\t" in text or "\r" in text or "\\\n" in text:
        return None
    lines = text.split("\n")
    logical = []  # (line, indent, code) of each line that starts a logical line and is not blank
    depth = 0
    for i, line in enumerate(lines):
        code = _STRING_OR_COMMENT.sub("", line) if ("#" in line or '"' in line or "'" in line) else line
        if depth == 0:
            body = code.lstrip(" ")
            if body.strip():
                logical.append((i, len(code) - len(body), body.rstrip()))
        depth += (code.count("(") + code.count("[") + code.count("{")
                  - code.count(")") - code.count("]") - code.count("}"))
        if depth < 0:
            return None
    if depth:
        return None
    classes = [k for k, (_, indent, code) in enumerate(logical) if indent == 0 and code.startswith("class ")]
    if len(classes) != 1 or classes[0] + 1 >= len(logical):
        return None
    first = classes[0] + 1
    member_indent = logical[first][1]
    if member_indent == 0:
        return None
    end = next((logical[k][0] for k in range(first, len(logical)) if logical[k][1] == 0), len(lines))
    members: list[list] = []  # [first line, def line, name]
    for i, indent, code in logical[first:]:
        if i >= end:
            break
        if indent > member_indent:
            if not members or members[-1][1] is None:
                return None
            continue
        if indent < member_indent:
            return None
        if code.startswith("@"):
            if not members or members[-1][1] is not None:
                members.append([i, None, None])
        elif code.startswith("def "):
            m = _DEF.match(code)
            if m is None:
                return None
            if not members or members[-1][1] is not None:
                members.append([i, None, None])
            members[-1][1], members[-1][2] = i, m.group(1)
        else:
            return None  # a statement of the class body itself: not split
    if not members or members[-1][1] is None:
        return None
    stops = [m[0] for m in members[1:]] + [end]
    return lines, [(a, d, stop, name) for (a, d, name), stop in zip(members, stops)]


def plan_text_shards(text: str, jobs: int, min_work: int | None = None) -> list[TextShard] | None:
    """The text of each shard (`plan_shards`, read from the text itself: a function is tied to every
    function whose name appears in its text, as an identifier or in a string), or None when the text does
    not split (or `_members` cannot read its layout)."""
    if jobs < 2:
        return None
    found = _members(text)
    if found is None:
        return None
    lines, members = found
    if len(members) < 2:
        return None
    names = [name for _, _, _, name in members]
    known = set(names)
    refs, works = [], []
    for a, _, stop, _ in members:
        body = "\n".join(lines[a:stop])
        refs.append(known.intersection(_IDENTIFIER.findall(body)))
        works.append(body.count("(") + 1)  # (about one call per bracket: the pipeline's work is per op)
    ranges = _cut(names, refs, works, jobs, min_shard_work() if min_work is None else min_work)
    if len(ranges) < 2:
        return None
    shards = []
    for lo, hi in ranges:
        out = list(lines)
        for k, (a, _, stop, _) in enumerate(members):
            if not lo <= k < hi:
                out[a:stop] = [""] * (stop - a)
        shards.append(TextShard("\n".join(out), tuple(names[lo:hi]), tuple(d + 1 for _, d, _, _ in members[lo:hi])))
    return shards


# A sharded compile that was tried and did not work out: compile in one process.
FAILED = "failed"


def compile_source_in_shards(text: str, file: str, ctx, jobs: int | None, pto_level: str, header: bool,
                             manifest: bool = False):
    """What the one-file commands (`compile FILE`, `check`) try first: `(artifacts, jobs)`, the artifacts of
    `compile_text_in_shards` (`jobs` None: `default_jobs()`) or None, and the jobs left for compiling the
    checked program in one piece (`compile_program(jobs=...)`): 1 after a shard failed, so the serial compile
    reports what went wrong."""
    if jobs is None:
        jobs = default_jobs()
    art = compile_text_in_shards(text, file, ctx, jobs, os.path.basename(file), pto_level, header, manifest)
    return (None, 1) if art is FAILED else (art, jobs)


def compile_text_in_shards(text: str, file: str, ctx, jobs: int, source_name: str, pto_level: str, header: bool,
                           manifest: bool = False):
    """`ptoc.driver.Artifacts` of compiling `text` (named `file`) with its shards' front ends, pipelines and
    emitters in up to `jobs` processes (as `compile_program(..., header=header, manifest=manifest)`, without
    the lowered program); None when the text does not split (`plan_text_shards`) or the platform cannot
    fork, `FAILED` when a shard had an error or a warning, or could not be merged: the caller then
    compiles the whole text in one process (which reports exactly what it would have)."""
    if jobs < 2 or not hasattr(os, "fork"):
        return None
    shards = plan_text_shards(text, jobs)
    if shards is None:
        return None
    from ptoc.driver import passes_skipped

    job = _Job(ctx, passes_skipped(pto_level), pto_level, header, manifest, source_name)
    art = _run(job, _front_and_compile, [(shard, file, job) for shard in shards])
    return FAILED if art is None else art


def _front_and_compile(shard: TextShard, file: str, job: _Job):
    """`_compile_shard` of the program in `shard.text`, or None when its front end finds an error or a
    warning, or functions other than the plan's."""
    from ptoc.diagnostics import CompileError
    from ptoc.driver import check_assembler_version, frontend

    warned: list = []
    try:
        prog = frontend(shard.text, file, job.ctx, warned)
        check_assembler_version(prog, job.ctx)
    except CompileError:
        return None
    if warned or tuple(f.name for f in prog.functions) != shard.names or \
            tuple(f.span.line for f in prog.functions) != shard.def_lines:
        return None
    return _compile_shard(prog, job)


# --------------------------------------------------------------------------------------------------
# Splitting the checked program
# --------------------------------------------------------------------------------------------------


def compile_in_shards(program: Program, ctx, jobs: int, skip: frozenset[str], pto_level: str, header: bool,
                      manifest: bool = False, source_name: str = ""):
    """`ptoc.driver.Artifacts` of `compile_program(program, ...)` (without the lowered program), each shard
    lowered and emitted in a process of its own; None when the program does not split, the platform
    cannot fork, or anything in a shard went wrong (the caller then compiles serially)."""
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
    job = _Job(ctx, skip, pto_level, header, manifest, source_name)
    return _run(job, _compile_shard, [(shard, job) for shard in shards])


# --------------------------------------------------------------------------------------------------
# The workers and the join
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Job:
    ctx: object
    skip: frozenset[str]
    pto_level: str
    header: bool
    manifest: bool
    source_name: str


@dataclass(frozen=True)
class _ShardOutput:
    """What a worker sends back: its outputs, no IR."""

    functions: tuple[tuple[str, str], ...]  # (name, kind) of each lowered function, in order
    dynamic_dims: tuple
    module_opening: str  # the `.pto` module's first line
    pto_lines: tuple[str, ...]  # the `.pto` lines of its kernels
    skipped: tuple[str, ...]
    # with a header or the manifest, (function, C++ namespace, with a header its `entry_lines`) of each of its
    # kernels (text, not `KernelTypes`: the parent would spend longer unpickling those than the workers
    # spend rendering them)
    kernels: tuple | None
    whole_program: bool  # a function that is not a kernel calls a kernel (`has_orchestration`)
    manifest: dict | None  # its part of the manifest (`manifest_doc`), when asked for


def _run(job: _Job, work, args: list[tuple]):
    """`work(*a)` for every `a` of `args`, the first in this process and the others in forked workers, joined
    (`_join`); None when any of them failed or they cannot be joined."""
    from ptoc.passes.manager import gc_paused

    workers = [_fork(work, a) for a in args[1:]]
    with gc_paused():  # (as `compile_program`: the stages build a large heap with next to no cycles)
        results = [work(*args[0])]
        for pid, fd in workers:
            results.append(_collect(pid, fd))
        if any(r is None for r in results):
            return None
        return _join(job, results)


_MODULE_END = "}"


def _compile_shard(shard: Program, job: _Job) -> _ShardOutput | None:
    """The outputs of compiling one shard; None on any error."""
    from ptoc.codegen.global_tensor import entry_lines, kernel_types
    from ptoc.codegen.manifest import has_orchestration, manifest_doc
    from ptoc.codegen.pto import emit_module
    from ptoc.diagnostics import CompileError, InternalError
    from ptoc.driver import lower

    ctx = job.ctx
    try:
        low = lower(shard, ctx, skip=job.skip)
        types = low.function_types(ctx)
        memo: dict = {}
        text, skipped = emit_module(low.program, ctx, pto_level=job.pto_level, types=types, memo=memo)
        kernels = kernel_types(low.program, ctx, types, memo) if job.header or job.manifest else None
        whole = has_orchestration(low.program, low.verified)
        doc = manifest_doc(low.program, ctx, job.source_name, low.verified, kernels) if job.manifest else None
    except (CompileError, InternalError, RecursionError):
        return None
    lines = text.split("\n")
    # the module is `module attributes {...} {`, the kernels, `}` and a final newline
    if len(lines) < 3 or lines[-1] != "" or lines[-2] != _MODULE_END:
        return None
    parts = None if kernels is None else tuple(
        (k.function, k.namespace, tuple(entry_lines(k)) if job.header else None) for k in kernels)
    return _ShardOutput(tuple((f.name, f.func_type) for f in low.program.functions), low.program.dynamic_dims,
                        lines[0], tuple(lines[1:-2]), tuple(skipped), parts, whole, doc)


def _fork(work, args) -> tuple[int, int]:
    """Run `work(*args)` in a forked worker; (its pid, the read end of the pipe its pickled result comes on)."""
    import pickle  # (here, not at the top: a compile that does not split never needs it)

    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the worker: compile, send, and leave without running the parent's exit handlers
        status = 1
        try:
            gc.disable()  # (it exits when done: no collection is worth its time)
            os.close(r)
            result = work(*args)
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
    import pickle

    try:
        with os.fdopen(fd, "rb") as f:
            data = f.read()
    finally:
        _, status = os.waitpid(pid, 0)
    if status != 0 or not data:
        return None
    try:
        return pickle.loads(data)
    except Exception:  # noqa: BLE001  (a damaged result: compile serially instead)
        return None


def _join(job: _Job, results: list[_ShardOutput]):
    """The shards' outputs as one compile's `Artifacts`, or None when they cannot be joined into what the
    serial compile makes: two functions of one name (a name a pass made in one shard, which the serial
    pipeline would have made unique), shards that disagree on the module or the dynamic dimensions, no
    kernel at all (the serial compile reports that), or a renamed kernel's namespace that changes (below)
    when the manifest, which names it, is written."""
    from ptoc import __version__
    from ptoc.codegen.global_tensor import join_header, namespace_names
    from ptoc.codegen.manifest import json_text
    from ptoc.driver import Artifacts

    first = results[0]
    names = [name for r in results for name, _ in r.functions]
    if len(set(names)) != len(names) or any(
            r.dynamic_dims != first.dynamic_dims or r.module_opening != first.module_opening for r in results[1:]):
        return None
    if not any(kind in KERNEL_TYPES for r in results for _, kind in r.functions):
        return None
    text = "\n".join([first.module_opening, *(line for r in results for line in r.pto_lines), _MODULE_END]) + "\n"
    skipped = [name for r in results for name in r.skipped]
    header = None
    renamed = False
    if first.kernels is not None:
        # a kernel's C++ namespace depends on the names of all kernels (a renamed one avoids them all)
        kernels = [k for r in results for k in r.kernels]
        spaces = namespace_names([function for function, _, _ in kernels])
        renamed = any(namespace != spaces[function] for function, namespace, _ in kernels)
        if job.header:
            header = join_header(job.ctx, job.source_name, __version__,
                                 [(function, spaces[function], lines) for function, _, lines in kernels])
    manifest = None
    if job.manifest and any(r.whole_program for r in results):
        if renamed:
            return None
        doc = dict(first.manifest)
        doc["kernels"] = [e for r in results for e in r.manifest["kernels"]]
        doc["orchestration"] = [e for r in results for e in r.manifest["orchestration"]]
        manifest = json_text(doc) + "\n"
    return Artifacts(text, header, skipped, None, None, manifest)
