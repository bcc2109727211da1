"""`ptoc compile`: one file or a batch (`--output-dir`, `-j`), `--depfile`, `--assemble`."""

from __future__ import annotations

import os
import sys

import click

from ptoc.cli import (
    EXIT_OK,
    EXIT_USAGE,
    EXIT_USER,
    Reporter,
    _commit,
    _read_source,
    _run_guarded,
    _source_name,
    ptoas_version_option,
    arch_option,
    cli,
    diagnostics_option,
)


@cli.command("compile")
@click.argument("files", metavar="FILE...", nargs=-1, required=True, type=click.Path(dir_okay=False, allow_dash=True))
@click.option("-o", "--output", "output", type=click.Path(dir_okay=False, allow_dash=True),
              help="The .pto file to write for the one FILE (`-`: standard output).")
@click.option("--output-dir", type=click.Path(file_okay=False), metavar="DIR",
              help="Compile every FILE to DIR/<stem>.pto and DIR/<stem>.h instead (one output set per FILE, "
              "each written all or nothing; two FILEs with the same stem are refused before anything is written).")
@click.option("-j", "--jobs", type=click.IntRange(min=1), default=None, metavar="N",
              help="Use up to N processes. With --output-dir: compile N files at a time (default 1). With one "
              "FILE: compile its independent groups of kernels (functions that do not call one another) in up to "
              "N processes, by default as many as there are CPUs (at most 8); the output is the same as with -j 1. "
              "A small program, or one whose functions all call one another, or a compile with --dump-dir or "
              "--timings, runs in one process.")
@click.option("--depfile", type=click.Path(dir_okay=False), metavar="FILE",
              help="Also write a make/ninja dependency file: each output depends on its input and on the "
              "PTOAS pin file (toolchain/versions.env).")
@click.option("--header", "header_path", type=click.Path(dir_okay=False, allow_dash=True),
              help="Where to write the GlobalTensor header (default: OUTPUT with suffix .h; needed when OUTPUT "
              "is `-`, a FIFO or a device, unless --no-header).")
@click.option("--no-header", is_flag=True, help="Do not write the header.")
@arch_option
@click.option("--ptoas-version", metavar="vX.Y", help="The PTOAS release the output targets "
              "(default: the pin in toolchain/versions.env). NZ views need v0.61 or newer (NZ-15).")
@click.option("--pto-level", type=click.Choice(["level3", "level2"]), default="level3", show_default=True,
              help="level3: ptoc plans on-chip memory and every pto.alloc_tile has addr; level2: PTOAS plans it.")
@click.option("--dump-dir", type=click.Path(file_okay=False), help="Also write the IR after every pass here "
              "(with --output-dir: in DUMP_DIR/<stem>/ for each FILE).")
@click.option("--timings", is_flag=True, help="Print per-pass seconds on stderr.")
@click.option("--assemble", is_flag=True, help="Also run PTOAS on the result and write its C++ beside the "
              ".pto (OUTPUT with suffix .cpp; with --output-dir DIR/<stem>.cpp); report its errors.")
@click.option("--ptoas", "ptoas_path", type=click.Path(dir_okay=False), help="The PTOAS executable "
              "(default: $PTOC_PTOAS, else ptoas on PATH).")
@click.option("--no-insert-sync", is_flag=True, help="With --assemble: do not pass --enable-insert-sync (the C++ "
              "then has no pipeline synchronisation).")
@click.option("--ptoas-timeout", type=click.FloatRange(min=1), default=300, show_default=True,
              help="Seconds to wait for PTOAS.")
@diagnostics_option
def compile_cmd(files, output, output_dir, jobs, depfile, header_path, no_header, arch, ptoas_version, pto_level,
                dump_dir, timings, assemble, ptoas_path, no_insert_sync, ptoas_timeout, diag_fmt) -> None:
    """Compile FILE (`-`: standard input) to a .pto module (every InCore/AIC/AIV kernel) and a GlobalTensor
    header.

    All outputs (.pto, header, dumps and, with --assemble, the .cpp) are written together at the end or not
    at all: on any error existing outputs stay as they were. With --assemble, PTOAS runs on a temporary copy
    first. An output that is the input or another output is refused. FIFOs and devices are written through;
    symlinks are followed. Orchestration functions are reported and skipped.

    With --output-dir DIR every FILE is compiled to DIR/<stem>.pto and DIR/<stem>.h (-j N: N at a time);
    each file's outputs (with --assemble its .cpp, with --dump-dir its dumps) are written all or nothing,
    errors are reported per file, and the exit status is 1 when any file failed. Nothing is printed on
    success.
    """
    if output_dir is not None:
        _batch_usage(files, output, header_path, timings)
    else:
        if output is None:
            raise click.UsageError("give -o OUTPUT.pto for one FILE, or --output-dir DIR for one or more FILEs")
        if len(files) != 1:
            raise click.UsageError("several FILEs need --output-dir DIR (-o names the output of one FILE)")
        if depfile and output == "-":
            raise click.UsageError("--depfile needs the .pto in a file; give -o FILE.pto")
    if header_path and no_header:
        raise click.UsageError("--header and --no-header cannot be used together")
    if (ptoas_path or no_insert_sync) and not assemble:
        raise click.UsageError("--ptoas and --no-insert-sync need --assemble")
    from ptoc.outputs import is_stream

    if output_dir is None and not header_path and not no_header and is_stream(output):
        where = "standard output" if output == "-" else f"{output}, which is not a regular file"
        raise click.UsageError(f"-o writes to {where}, so the header has no default path: give --header PATH "
                               "or --no-header")
    if assemble and output == "-":
        raise click.UsageError("--assemble needs the .pto in a file; give -o FILE.pto")

    version = ptoas_version_option(ptoas_version)
    if output_dir is not None:
        asm = (ptoas_path, not no_insert_sync, ptoas_timeout) if assemble else None
        sys.exit(_run_guarded(lambda: _compile_batch(files, output_dir, jobs or 1, depfile, no_header, arch, version,
                                                     pto_level, diag_fmt, dump_dir, asm)))
    file = files[0]

    def run() -> int:
        from ptoc.context import CompileContext
        from ptoc.diagnostics import CompileError, Diagnostic, Span
        from ptoc.driver import compile_program, frontend

        reporter = Reporter(diag_fmt)
        text = _read_source(file, reporter)
        if text is None:
            return EXIT_USER
        name = _source_name(file)
        ctx = CompileContext(arch=arch, ptoas_version=version)
        hdr_path = None if no_header else (header_path or os.path.splitext(output)[0] + ".h")
        try:
            art, procs = None, 1
            if dump_dir is None and not timings:
                # the front end too runs in the workers, each on its part of the text (`ptoc.parallel`)
                from ptoc.parallel import compile_source_in_shards

                art, procs = compile_source_in_shards(text, name, ctx, jobs, pto_level, header=hdr_path is not None,
                                                      manifest=not is_stream(output))
            if art is None:
                warned: list = []
                prog = frontend(text, name, ctx, warned)
                reporter.emit(warned, text)
                art = compile_program(prog, ctx, os.path.basename(name), pto_level=pto_level,
                                      header=hdr_path is not None, dumps=dump_dir is not None, timings=timings,
                                      jobs=procs, manifest=not is_stream(output))
        except CompileError as e:
            reporter.emit(e.diagnostics, text)
            return EXIT_USER
        for fname in art.skipped:
            reporter.emit([Diagnostic("PTOC-I0100", f"{fname} is not a kernel (InCore/AIC/AIV); not emitted",
                                      Span(name, 0, 0, 0, 0), severity="info")], None)
        # Every output of the command goes into this one list, written together by _commit below.
        outputs = [(output, art.pto)] + ([(hdr_path, art.header)] if hdr_path else [])
        if art.manifest is not None:  # a whole program: the kernels manifest beside the .pto
            outputs.append((os.path.splitext(output)[0] + ".kernels.json", art.manifest))
        if assemble:
            cpp = _assemble_for_compile(ptoas_path, art.pto, output, arch, pto_level, not no_insert_sync,
                                        ptoas_timeout, reporter)
            if isinstance(cpp, int):
                return cpp
            outputs.append((os.path.splitext(output)[0] + ".cpp", cpp))
        targets = [p for p, _ in outputs]  # what a build tool asks for: the .pto, header and .cpp
        if dump_dir is not None:
            outputs += [(os.path.join(dump_dir, n), body) for n, body, _ in art.lowered.dumps]
        if depfile:
            outputs.append((depfile, _depfile_text([(targets, file)])))
        status = _commit(reporter, outputs, inputs=[file], dirs=[dump_dir] if dump_dir is not None else [],
                         stdout_ok=True, collision_hint="nothing was written; give -o, --header (or --no-header) "
                         "and --dump-dir names that are neither the input nor each other")
        if status != EXIT_OK:
            return status
        if art.lowered is not None and art.lowered.timings_table is not None:
            click.echo(art.lowered.timings_table, err=True)
        return EXIT_OK

    sys.exit(_run_guarded(run))


def _pin_file() -> str:
    """The path of the PTOAS pin file (toolchain/versions.env) this ptoc reads, for --depfile."""
    from importlib import resources

    try:
        path = resources.files("ptoc.toolchain").joinpath("versions.env")
        if os.path.isfile(str(path)):
            return os.path.abspath(str(path))
    except (ModuleNotFoundError, TypeError):
        pass
    return os.path.abspath(os.path.join(os.path.dirname(__file__), os.pardir, "toolchain", "versions.env"))


def _make_escape(path: str) -> str:
    """A path as make and ninja read it in a rule: spaces and `#` backslash-escaped, `$` doubled."""
    out = path.replace("\\", "\\\\") if os.sep != "\\" else path
    return out.replace("$", "$$").replace("#", "\\#").replace(" ", "\\ ")


def _depfile_text(rules: list[tuple[list[str], str]]) -> str:
    """make/ninja dependency rules: for each (targets, input), `targets: input pin-file`."""
    pin = _make_escape(_pin_file())
    lines = []
    for targets, src in rules:
        lines.append(" ".join(_make_escape(t) for t in targets) + ": " + _make_escape(src) + " " + pin)
    return "\n".join(lines) + "\n"


class _HeldDiagnostics:
    """Stands in for a Reporter to keep diagnostics for later (`emit` stores them)."""

    def __init__(self):
        self.diags: list = []

    def emit(self, diags, _source) -> None:
        self.diags.extend(diags)


def _batch_usage(files, output, header_path, timings) -> None:
    if output is not None:
        raise click.UsageError("-o and --output-dir cannot be used together")
    if header_path:
        raise click.UsageError("--header names one file; with --output-dir each header is DIR/<stem>.h")
    if timings:
        raise click.UsageError("--timings works on one FILE with -o, not with --output-dir")
    if "-" in files:
        raise click.UsageError("--output-dir needs named FILEs; standard input (-) has no name to write")


def _batch_warm() -> None:
    """Load the compiler (front end, every pass, the emitters) before the worker processes are forked, so
    that each worker starts with it loaded instead of loading it again. (Lark's tables are not loaded:
    a file is read by CPython's parser unless it has a syntax error.)"""
    from ptoc.codegen.pto import emit_module  # noqa: F401
    from ptoc.driver import compile_program, frontend  # noqa: F401
    from ptoc.passes.manager import available_pipeline

    available_pipeline()


def _batch_compile_one(job):
    """Compile one file of a batch (in a worker process or in-line): ("ok", pto, header, skipped, dumps,
    cpp, notes, manifest, front-end warnings) or ("error", diagnostics). `dumps`: (name, IR text) after
    every pass when asked for;
    `cpp`: PTOAS's C++ when assembling (`asm` = (ptoas path, insert sync, timeout)), with the assembler's
    notes in `notes`; an assembler error is ("error", notes and diagnostics, exit status)."""
    name, text, arch, version, pto_level, header, dumps, asm, pto_path = job
    from ptoc.context import CompileContext
    from ptoc.diagnostics import CompileError
    from ptoc.driver import compile_program, frontend

    ctx = CompileContext(arch=arch, ptoas_version=version)
    warned: list = []
    try:
        prog = frontend(text, name, ctx, warned)
        art = compile_program(prog, ctx, os.path.basename(name), pto_level=pto_level, header=header, dumps=dumps,
                              manifest=True)
    except CompileError as e:
        return ("error", warned + list(e.diagnostics))
    manifest = art.manifest
    cpp = None
    held = _HeldDiagnostics()
    if asm is not None:
        ptoas_path, insert_sync, timeout = asm
        cpp = _assemble_for_compile(ptoas_path, art.pto, pto_path, arch, pto_level, insert_sync, timeout, held)
        if isinstance(cpp, int):
            return ("error", held.diags, cpp, art.pto)
    dumped = [(n, body) for n, body, _ in art.lowered.dumps] if dumps else []
    return ("ok", art.pto, art.header if header else None, list(art.skipped), dumped, cpp, held.diags, manifest,
            warned)


def _compile_batch(files, output_dir, jobs, depfile, no_header, arch, version, pto_level, diag_fmt,
                   dump_dir=None, asm=None) -> int:
    """`compile FILE... --output-dir DIR [-j N]`: every output path is checked before anything is compiled
    or written; then each file is compiled and its outputs committed on their own (all or nothing per
    file). Diagnostics come out in the order of FILEs whatever -j is. `dump_dir`: the IR after every pass
    goes to DUMP_DIR/<stem>/; `asm`: PTOAS runs on each module (in the worker) and its C++ is DIR/<stem>.cpp."""
    from ptoc.diagnostics import Diagnostic, Span
    from ptoc.outputs import OutputError, OutputSet

    reporter = Reporter(diag_fmt)
    plan: list[tuple[str, list[str]]] = []
    by_stem: dict[str, str] = {}
    for f in files:
        stem = os.path.splitext(os.path.basename(f))[0]
        pto = os.path.join(output_dir, stem + ".pto")
        if stem in by_stem:
            reporter.emit([Diagnostic("PTOC-E0007", f"inputs {by_stem[stem]} and {f} would both write {pto}",
                                      Span(f, 0, 0, 0, 0), hint="rename one of them, or compile them into "
                                      "different --output-dir folders; nothing was written")], None)
            return EXIT_USAGE
        by_stem[stem] = f
        outs = [pto] + ([] if no_header else [os.path.join(output_dir, stem + ".h")])
        plan.append((f, outs + ([os.path.join(output_dir, stem + ".cpp")] if asm is not None else [])))
    every = OutputSet(files)  # every output of the run against every input and each other, up front
    for _, outs in plan:
        for o in outs:
            every.add(o, b"")
    for f, _ in plan:  # a whole program also writes DIR/<stem>.kernels.json
        every.add(os.path.join(output_dir, os.path.splitext(os.path.basename(f))[0] + ".kernels.json"), b"")
    if depfile:
        every.add(depfile, b"")
    try:
        every.check()
    except OutputError as e:
        reporter.emit([Diagnostic("PTOC-E0007", str(e), Span(e.path, 0, 0, 0, 0),
                                  hint="choose another --output-dir or --depfile; nothing was written")], None)
        return EXIT_USAGE

    if asm is not None:  # one missing assembler is one usage error, before anything is compiled
        from ptoc.target import assembler

        try:
            asm = (assembler.find_ptoas(asm[0]),) + asm[1:]
        except assembler.ToolNotFound as e:
            reporter.emit([Diagnostic("PTOC-E0453", f"cannot assemble: {e}", Span(output_dir, 0, 0, 0, 0),
                                      hint=f"install PTOAS, then pass --ptoas PATH or set ${assembler.ENV_PTOAS}")],
                          None)
            return EXIT_USAGE
    jobs_in: list = []
    sources: dict[str, str] = {}
    status = EXIT_OK
    unreadable: dict[str, list] = {}  # read errors, reported in the order of FILEs with the others
    for f, _ in plan:
        held = _HeldDiagnostics()
        text = _read_source(f, held)
        if text is None:
            unreadable[f] = held.diags
            continue
        sources[f] = text
        jobs_in.append((f, text, arch, version, pto_level, not no_header, dump_dir is not None, asm,
                        dict(plan)[f][0]))
    outs_of = dict(plan)
    done_rules: list[tuple[list[str], str]] = []
    pool = None
    if jobs > 1 and len(jobs_in) > 1:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        _batch_warm()
        methods = multiprocessing.get_all_start_methods()
        mp_ctx = multiprocessing.get_context("fork" if "fork" in methods else None)
        pool = ProcessPoolExecutor(max_workers=min(jobs, len(jobs_in)), mp_context=mp_ctx)
        results = pool.map(_batch_compile_one, jobs_in)
    else:
        results = map(_batch_compile_one, jobs_in)
    from ptoc.progress import Progress

    progress = Progress(len(jobs_in), "compiling")
    results = iter(results)
    try:
        for f, _ in plan:
            if f in unreadable:
                reporter.emit(unreadable[f], None)
                status = EXIT_USER
                continue
            res = next(results)
            progress.advance()
            if res[0] == "error":  # the input's errors, or the assembler's (in the module's text)
                reporter.emit(res[1], sources[f] if len(res) == 2 else res[3])
                status = max(status, res[2] if len(res) > 2 else EXIT_USER)
                continue
            _, pto, header, skipped, dumped, cpp, notes, manifest, warned = res
            reporter.emit(warned, sources[f])
            reporter.emit(notes, None)
            for fname in skipped:
                reporter.emit([Diagnostic("PTOC-I0100", f"{fname} is not a kernel (InCore/AIC/AIV); not emitted",
                                          Span(f, 0, 0, 0, 0), severity="info")], None)
            outs = outs_of[f]
            data = [(outs[0], pto)] + ([(outs[1], header)] if header is not None else [])
            if manifest is not None:
                data.append((os.path.splitext(outs[0])[0] + ".kernels.json", manifest))
            if cpp is not None:
                data.append((outs[-1], cpp))
            dirs = [output_dir]
            if dump_dir is not None:
                where = os.path.join(dump_dir, os.path.splitext(os.path.basename(f))[0])
                data += [(os.path.join(where, n), body) for n, body in dumped]
                dirs.append(where)
            st = _commit(reporter, data, inputs=files, dirs=dirs)
            if st != EXIT_OK:
                return st
            done_rules.append((outs, f))
    finally:
        progress.close()
        if pool is not None:
            pool.shutdown(cancel_futures=True)
    if depfile and done_rules:
        st = _commit(reporter, [(depfile, _depfile_text(done_rules))], inputs=files)
        if st != EXIT_OK:
            return st
    return status


def _assemble_for_compile(ptoas_path, pto_text, output, arch, pto_level, insert_sync, timeout, reporter):
    """Run PTOAS on the module before anything is written: the C++ text, or an exit code after reporting."""
    from ptoc.diagnostics import Diagnostic, Span
    from ptoc.target import assembler as asm

    try:
        exe = asm.find_ptoas(ptoas_path)
    except asm.ToolNotFound as e:
        reporter.emit([Diagnostic("PTOC-E0453", f"cannot assemble: {e}", Span(output, 0, 0, 0, 0),
                                  hint=f"install PTOAS, then pass --ptoas PATH or set ${asm.ENV_PTOAS}")], None)
        return EXIT_USAGE
    version, version_text = asm.query_version(exe)
    nz = asm.has_nz_views(pto_text)
    flags = asm.assembler_flags(arch, pto_level, version, nz, insert_sync=insert_sync)
    reporter.emit(asm.policy_notes(version, version_text, flags, output, nz), None)
    res = asm.assemble_text(exe, pto_text, output, flags, timeout)
    reporter.emit(res.diagnostics, pto_text)
    return res.cpp if res.ok else EXIT_USER
