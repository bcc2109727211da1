"""Command line: parse flags, build a CompileContext, call the driver, render diagnostics.

This is the only module that reads the environment (NO_COLOR, TTY detection) or touches files.
Exit codes: 0 success, 1 the input has errors, 2 usage or environment error (including an output that
cannot be written), 3 internal error (a bug in ptoc), 130 interrupted (Ctrl-C), 141 standard output closed
early (a broken pipe, as for a program killed by SIGPIPE).
"""

from __future__ import annotations

import os
import sys

import click

from ptoc import __version__

EXIT_OK, EXIT_USER, EXIT_USAGE, EXIT_INTERNAL = 0, 1, 2, 3
EXIT_INTERRUPTED, EXIT_BROKEN_PIPE = 130, 141
STDIN_NAME = "<stdin>"
REFERENCE_HINT = "pip install 'ptoc[reference]'"

REPORT_MSG = (
    "this is a bug in ptoc, not in your program. Please report it with the input file and the command "
    "line that triggered it."
)


def _use_color(stream) -> bool:
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


DEFAULT_ERROR_LIMIT = 50


class Reporter:
    """Renders diagnostics: text with source lines and carets (stderr), gcc-style one-liners
    (`file:line:col: error: message [CODE]`, stderr) or JSON lines (stdout).

    At most `--error-limit` errors are shown (0: all); `finish` (run by `_run_guarded` when the command
    ends) says when the limit hid some and, in the text and gcc formats, prints an
    `N errors, M warnings` summary line on stderr.
    """

    active: Reporter | None = None  # the command's reporter, finished by _run_guarded

    def __init__(self, fmt: str, error_limit: int | None = None):
        self.fmt = fmt
        self.color = _use_color(sys.stderr) and fmt == "text"
        if error_limit is None:
            ctx = click.get_current_context(silent=True)
            error_limit = ctx.meta.get("ptoc.error_limit", DEFAULT_ERROR_LIMIT) if ctx else DEFAULT_ERROR_LIMIT
        self.error_limit = error_limit
        self.errors = 0
        self.warnings = 0
        self.hidden = 0
        Reporter.active = self

    def emit(self, diags, source: str | None) -> None:
        from ptoc.diagnostics import render_gcc, render_json, render_text

        for d in diags:
            if d.severity == "error":
                self.errors += 1
                if self.error_limit and self.errors > self.error_limit:
                    self.hidden += 1
                    continue
            elif d.severity == "warning":
                self.warnings += 1
            if self.fmt == "json":
                click.echo(render_json(d))
            elif self.fmt == "gcc":
                click.echo(render_gcc(d), err=True)
            else:
                # color= passes our decision through: click strips escapes on a non-TTY by default,
                # which would defeat FORCE_COLOR
                click.echo(render_text(d, source, self.color), err=True, color=self.color)

    def finish(self) -> None:
        if Reporter.active is self:
            Reporter.active = None
        if self.hidden:
            n = self.error_limit
            click.echo(f"ptoc: stopped after {n} error{'s' if n != 1 else ''}; {self.hidden} more not shown "
                       f"(--error-limit N shows more, 0 shows all)", err=True)
        if self.fmt != "json" and (self.errors or self.warnings):
            e, w = self.errors, self.warnings
            click.echo(f"{e} error{'s' if e != 1 else ''}, {w} warning{'s' if w != 1 else ''}", err=True)


def _source_name(path: str) -> str:
    """The name diagnostics use for an input: `-` is standard input."""
    return STDIN_NAME if path == "-" else path


def _read_source(path: str, reporter: Reporter) -> str | None:
    """The text of the IR file `path` (`-`: standard input), or None after reporting why it is unusable."""
    from ptoc.diagnostics import Diagnostic, Span

    try:
        if path == "-":
            data = sys.stdin.buffer.read()
            path = STDIN_NAME
        else:
            with open(path, "rb") as fh:
                data = fh.read()
    except OSError as e:
        reporter.emit([Diagnostic("PTOC-E0004", f"cannot read {path}: {e.strerror or e}",
                                  Span(path, 0, 0, 0, 0))], None)
        return None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        col = e.start - (data.rfind(b"\n", 0, e.start) + 1) + 1
        reporter.emit([Diagnostic("PTOC-E0004", "the file is not valid UTF-8 text",
                                  Span(path, line, col, line, col + 1),
                                  hint="save the IR file as UTF-8")], None)
        return None
    if text.startswith("\ufeff"):
        text = text[1:]
    if "\x00" in text:
        line = text[: text.index("\x00")].count("\n") + 1
        reporter.emit([Diagnostic("PTOC-E0004", "the file contains NUL bytes; it is not an IR text file",
                                  Span(path, line, 1, line, 2))], None)
        return None
    return text


def _internal_error(exc: BaseException) -> None:
    click.echo(f"ptoc: internal error: {type(exc).__name__}: {exc}", err=True)
    click.echo(f"ptoc: {REPORT_MSG}", err=True)
    if os.environ.get("PTOC_TRACEBACK"):
        import traceback

        traceback.print_exception(exc)


class Interrupted(BaseException):
    """SIGINT (Ctrl-C). Not a KeyboardInterrupt, so that click does not turn it into "Aborted!" (exit 1)."""


def _on_sigint(_signum, _frame) -> None:
    raise Interrupted()


def install_interrupt_handler() -> None:
    """From here on Ctrl-C ends ptoc with one line and exit 130 (see `main`)."""
    import signal

    try:
        signal.signal(signal.SIGINT, _on_sigint)
    except ValueError:  # not the main thread (ptoc used as a library): leave the handler alone
        pass


def _missing_reference(exc: ImportError) -> bool:
    return (exc.name or "").split(".")[0] in ("numpy", "ml_dtypes")


def _reference_missing_message(exc: ImportError | None = None) -> None:
    what = f" ({exc.name} cannot be imported)" if exc is not None and exc.name else ""
    click.echo(f"ptoc: error: this command needs the numeric reference dependencies{what}; install them "
               f"with: {REFERENCE_HINT}", err=True)


def _need_reference() -> bool:
    """True when numpy and ml_dtypes import; else prints the one-line install instruction."""
    try:
        import numpy  # noqa: F401, I001 - numpy first: ml_dtypes needs it
        import ml_dtypes  # noqa: F401
    except ImportError as e:
        _reference_missing_message(e)
        return False
    return True


def _stdout_closed() -> int:
    """Standard output was closed by its reader (`ptoc ops | head -1`): stop quietly."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # the interpreter's final flush must not fail again
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass
    return EXIT_BROKEN_PIPE


def _run_guarded(fn) -> int:
    """Run `fn`; map a ptoc bug to exit 3 without a Python traceback."""
    from ptoc.diagnostics import InternalError

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 20000))
    try:
        status = fn()
        if Reporter.active is not None:
            Reporter.active.finish()
        return status
    except InternalError as e:
        _internal_error(e)
        return EXIT_INTERNAL
    except (KeyboardInterrupt, click.exceptions.Exit, click.ClickException):
        raise
    except BrokenPipeError:
        return _stdout_closed()
    except MemoryError:
        click.echo("ptoc: error: out of memory; use smaller sizes (e.g. smaller --dim values)", err=True)
        return EXIT_USAGE
    except ImportError as e:
        if not _missing_reference(e):
            _internal_error(e)
            return EXIT_INTERNAL
        _reference_missing_message(e)
        return EXIT_USAGE
    except Exception as e:  # noqa: BLE001 - last line of defence: never a traceback for bad input
        _internal_error(e)
        return EXIT_INTERNAL


def _commit(reporter: Reporter, outputs, inputs=(), dirs=(), stdout_ok: bool = False,
            collision_hint: str = "choose another output name; nothing was written") -> int:
    """Write `outputs` ((path, text or bytes) pairs) all or nothing (ptoc.outputs); EXIT_OK, or EXIT_USAGE
    after a diagnostic when an output collides with an input or another output or cannot be written."""
    from ptoc.diagnostics import Diagnostic, Span
    from ptoc.outputs import OutputError, OutputSet

    outs = OutputSet(inputs, stdout_ok=stdout_ok)
    for d in dirs:
        outs.add_dir(d)
    for path, data in outputs:
        outs.add(path, data)
    try:
        outs.commit()
    except OutputError as e:
        if e.collision:
            d = Diagnostic("PTOC-E0007", str(e), Span(e.path, 0, 0, 0, 0), hint=collision_hint)
        else:
            d = Diagnostic("PTOC-E0006", str(e), Span(e.path, 0, 0, 0, 0),
                           hint="check that the output path and its folder are writable; nothing was written")
        reporter.emit([d], None)
        return EXIT_USAGE
    return EXIT_OK


def _pinned() -> str:
    from ptoc.target.toolchain import pinned_ptoas_version

    return pinned_ptoas_version()


def _version_text() -> str:
    return f"ptoc {__version__} (targets PTOAS {_pinned()})"


_diagnostics_format = click.option(
    "--diagnostics", "diag_fmt", type=click.Choice(["text", "gcc", "json"]), default="text", show_default=True,
    help="How to print diagnostics: text with source lines and carets (stderr); gcc, one "
    "`file:line:col: error: message [CODE]` line each plus `note:` lines, for editors and CI problem "
    "matchers (stderr); or one JSON object per diagnostic (stdout).",
)


def _store_error_limit(ctx: click.Context, _param, value: int) -> int:
    ctx.meta["ptoc.error_limit"] = value
    return value


_error_limit = click.option(
    "--error-limit", type=click.IntRange(min=0), default=DEFAULT_ERROR_LIMIT, show_default=True,
    expose_value=False, callback=_store_error_limit, metavar="N",
    help="Show at most N errors (0: no limit).",
)


def diagnostics_option(f):
    """--diagnostics FORMAT and --error-limit N (read by Reporter)."""
    return _diagnostics_format(_error_limit(f))


arch_option = click.option(
    "--arch", type=click.Choice(["a2a3", "a5"]), default="a2a3", show_default=True,
    help="Target: a2a3 (Ascend910B family) or a5 (Ascend950). Target-dependent operator rules follow it.",
)


def sim_options(fn):
    """--sim and the three tools it needs (each: the flag, else its PTOC_* variable)."""
    fn = click.option("--cxx", "cxx_path", metavar="PATH", help="With --sim: the C++ compiler (default: $PTOC_CXX, "
                      "else clang++-19, else c++).")(fn)
    fn = click.option("--pto-isa", "pto_isa_dir", metavar="DIR", help="With --sim: pto-isa's include folder "
                      "(default: $PTOC_PTO_ISA).")(fn)
    fn = click.option("--ptoas", "ptoas_path", metavar="PATH", help="With --sim: the PTO assembler (default: "
                      "$PTOC_PTOAS, else ptoas on PATH).")(fn)
    return fn


def _simulator(ptoas_path, pto_isa_dir, cxx_path, arch, reporter):
    """A Simulator for --sim, or None after reporting which tool is missing (exit 2)."""
    from ptoc.diagnostics import Diagnostic
    from ptoc.reference.sim import Simulator, find_tools
    from ptoc.target.assembler import ToolNotFound

    try:
        return Simulator(find_tools(ptoas_path, pto_isa_dir, cxx_path), arch=arch)
    except ToolNotFound as e:
        reporter.emit([Diagnostic("PTOC-E0460", f"--sim cannot run: {e}", None,
                                  hint="the toolchain README tells how to install PTOAS, pto-isa and clang++-19")],
                      None)
        return None


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def cli() -> None:
    """ptoc: a cross-compiler from textual PyPTO IR to PTOAS-ready .pto.

    \b
    Exit codes: 0 success, 1 the input has errors, 2 usage or environment error, 3 internal error
    (a ptoc bug), 130 interrupted (Ctrl-C), 141 standard output closed early (broken pipe).
    Set NO_COLOR=1 to disable coloured diagnostics.
    """


# A lazy --version: the PTOAS pin is read only when asked for.
def _print_version(ctx: click.Context, _param, value) -> None:
    if not value or ctx.resilient_parsing:
        return
    click.echo(_version_text())
    ctx.exit(0)


cli.params.append(click.Option(["--version"], is_flag=True, expose_value=False, is_eager=True,
                               callback=_print_version,
                               help="Show the ptoc version and the pinned PTOAS version, then exit."))


@cli.command()
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False, allow_dash=True))
@arch_option
@click.option("--ptoas-version", metavar="vX.Y", help="The PTOAS release the output would target, as for "
              "compile (default: the pin in toolchain/versions.env).")
@click.option("--pto-level", type=click.Choice(["level3", "level2"]), default="level3", show_default=True,
              help="As for compile: level3 also checks that on-chip memory can be planned.")
@diagnostics_option
def check(files: tuple[str, ...], arch: str, ptoas_version: str | None, pto_level: str, diag_fmt: str) -> None:
    """Check IR FILES (`-`: standard input) as compile would; report every error found.

    Runs every check `ptoc compile` runs with the same options (front end, the whole pass pipeline and
    the emitters, in memory) and writes nothing. Exits 0 when every file compiles, 1 when any file
    has errors.
    """
    if files.count("-") > 1:
        raise click.UsageError("standard input (-) can be checked only once")
    from ptoc.driver import parse_version

    version = ptoas_version or _pinned()
    try:
        parse_version(version)
    except ValueError:
        raise click.BadParameter(f"{version!r} is not a version such as v0.61", param_hint="--ptoas-version") \
            from None

    def run() -> int:
        import os.path

        from ptoc.context import CompileContext
        from ptoc.diagnostics import CompileError, Diagnostic, Span
        from ptoc.driver import compile_program, frontend

        reporter = Reporter(diag_fmt)
        status = EXIT_OK
        for path in files:
            text = _read_source(path, reporter)
            if text is None:
                status = EXIT_USER
                continue
            ctx = CompileContext(arch=arch, ptoas_version=version)
            try:
                name = _source_name(path)
                prog = frontend(text, name, ctx)
                art = compile_program(prog, ctx, os.path.basename(name), pto_level=pto_level)
            except CompileError as e:
                reporter.emit(e.diagnostics, text)
                status = EXIT_USER
                continue
            for fn in art.skipped:  # the notes compile prints for the same program
                reporter.emit([Diagnostic("PTOC-I0100", f"{fn} is not a kernel (InCore/AIC/AIV); not emitted",
                                          Span(name, 0, 0, 0, 0), severity="info")], None)
        if status == EXIT_OK and diag_fmt == "text":
            n = len(files)
            click.echo(f"ok: {n} file{'s' if n != 1 else ''} checked, no errors", err=True)
        return status

    sys.exit(_run_guarded(run))


@cli.command()
@click.argument("file", type=click.Path(dir_okay=False, allow_dash=True))
@click.option("--check", "check_only", is_flag=True,
              help="Do not write; exit 1 if FILE is not in canonical form (prints a diff).")
@click.option("--in-place", "-i", is_flag=True, help="Rewrite FILE in canonical form (atomically; a symlink is "
              "followed and its target rewritten).")
@diagnostics_option
def fmt(file: str, check_only: bool, in_place: bool, diag_fmt: str) -> None:
    """Print FILE in the canonical printer form of the PyPTO IR text, keeping its comments.

    Without options the formatted program goes to stdout. FILE `-` is standard input. A program that
    parses but fails the checks is still formatted (a note on stderr says so; `ptoc check` shows the
    errors). A program that does not parse is reported and exits 1; nothing is written.
    """
    if check_only and in_place:
        raise click.UsageError("--check and --in-place cannot be used together")
    if in_place and file == "-":
        raise click.UsageError("--in-place needs a file; standard input (-) cannot be rewritten")

    def run() -> int:
        from ptoc.diagnostics import CompileError
        from ptoc.frontend.parser import parse_for_format
        from ptoc.ir.printer import print_program

        reporter = Reporter(diag_fmt)
        text = _read_source(file, reporter)
        if text is None:
            return EXIT_USER
        from ptoc.context import CompileContext

        name = _source_name(file)
        try:  # the checks `ptoc check` runs by default (--arch a2a3), for the note below
            prog, comments, checks = parse_for_format(text, name, ctx=CompileContext(arch="a2a3",
                                                                                    ptoas_version=_pinned()))
        except CompileError as e:
            reporter.emit(e.diagnostics, text)
            return EXIT_USER
        _note_check_errors(name, checks)
        out = print_program(prog, comments)
        if check_only:
            if out == text:
                return EXIT_OK
            import difflib

            diff = difflib.unified_diff(text.splitlines(True), out.splitlines(True), name, name + " (formatted)")
            click.echo("".join(diff), nl=False)
            click.echo(f"{name}: not in canonical form", err=True)
            return EXIT_USER
        if in_place:
            if out != text:
                # in place by design: FILE is the one output, and not counted as an input it may not overwrite
                return _commit(reporter, [(file, out)])
            return EXIT_OK
        click.echo(out, nl=False)
        return EXIT_OK

    sys.exit(_run_guarded(run))


def _note_check_errors(file: str, checks) -> None:
    """fmt formats a program that fails the checks; it says so in one line on stderr."""
    n = sum(1 for d in checks if d.severity == "error")
    if n:
        click.echo(f"ptoc fmt: note: {file} has {n} error{'s' if n != 1 else ''}; formatted anyway "
                   f"(run `ptoc check {file}` to see them)", err=True)


@cli.command("compile")
@click.argument("file", type=click.Path(dir_okay=False, allow_dash=True))
@click.option("-o", "--output", "output", required=True, type=click.Path(dir_okay=False, allow_dash=True),
              help="The .pto file to write (`-`: standard output).")
@click.option("--header", "header_path", type=click.Path(dir_okay=False, allow_dash=True),
              help="Where to write the GlobalTensor header (default: OUTPUT with suffix .h; needed when OUTPUT "
              "is `-`, a FIFO or a device, unless --no-header).")
@click.option("--no-header", is_flag=True, help="Do not write the header.")
@arch_option
@click.option("--ptoas-version", metavar="vX.Y", help="The PTOAS release the output targets "
              "(default: the pin in toolchain/versions.env). NZ views need v0.61 or newer (NZ-15).")
@click.option("--pto-level", type=click.Choice(["level3", "level2"]), default="level3", show_default=True,
              help="level3: ptoc plans on-chip memory and every pto.alloc_tile has addr; level2: PTOAS plans it.")
@click.option("--dump-dir", type=click.Path(file_okay=False), help="Also write the IR after every pass here.")
@click.option("--timings", is_flag=True, help="Print per-pass seconds on stderr.")
@click.option("--assemble", is_flag=True, help="Also run PTOAS on the result and write its C++ beside the "
              ".pto (OUTPUT with suffix .cpp); report its errors.")
@click.option("--ptoas", "ptoas_path", type=click.Path(dir_okay=False), help="The PTOAS executable "
              "(default: $PTOC_PTOAS, else ptoas on PATH).")
@click.option("--no-insert-sync", is_flag=True, help="With --assemble: do not pass --enable-insert-sync (the C++ "
              "then has no pipeline synchronisation).")
@click.option("--ptoas-timeout", type=click.FloatRange(min=1), default=300, show_default=True,
              help="Seconds to wait for PTOAS.")
@diagnostics_option
def compile_cmd(file, output, header_path, no_header, arch, ptoas_version, pto_level, dump_dir, timings, assemble,
                ptoas_path, no_insert_sync, ptoas_timeout, diag_fmt) -> None:
    """Compile FILE (`-`: standard input) to a .pto module (every InCore/AIC/AIV kernel) and a GlobalTensor
    header.

    All outputs (.pto, header, dumps and, with --assemble, the .cpp) are written together at the end or not
    at all: on any error existing outputs stay as they were. With --assemble, PTOAS runs on a temporary copy
    first. An output that is the input or another output is refused. FIFOs and devices are written through;
    symlinks are followed. Orchestration functions are reported and skipped.
    """
    if header_path and no_header:
        raise click.UsageError("--header and --no-header cannot be used together")
    if (ptoas_path or no_insert_sync) and not assemble:
        raise click.UsageError("--ptoas and --no-insert-sync need --assemble")
    from ptoc.outputs import is_stream

    if not header_path and not no_header and is_stream(output):
        where = "standard output" if output == "-" else f"{output}, which is not a regular file"
        raise click.UsageError(f"-o writes to {where}, so the header has no default path: give --header PATH "
                               "or --no-header")
    if assemble and output == "-":
        raise click.UsageError("--assemble needs the .pto in a file; give -o FILE.pto")
    from ptoc.driver import parse_version

    version = ptoas_version or _pinned()
    try:
        parse_version(version)
    except ValueError:
        raise click.BadParameter(f"{version!r} is not a version such as v0.61", param_hint="--ptoas-version") \
            from None

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
            prog = frontend(text, name, ctx)
            art = compile_program(prog, ctx, os.path.basename(name), pto_level=pto_level,
                                  header=hdr_path is not None, dumps=dump_dir is not None, timings=timings)
        except CompileError as e:
            reporter.emit(e.diagnostics, text)
            return EXIT_USER
        for fname in art.skipped:
            reporter.emit([Diagnostic("PTOC-I0100", f"{fname} is not a kernel (InCore/AIC/AIV); not emitted",
                                      Span(name, 0, 0, 0, 0), severity="info")], None)
        # Every output of the command goes into this one list, written together by _commit below.
        outputs = [(output, art.pto)] + ([(hdr_path, art.header)] if hdr_path else [])
        if assemble:
            cpp = _assemble_for_compile(ptoas_path, art.pto, output, arch, pto_level, not no_insert_sync,
                                        ptoas_timeout, reporter)
            if isinstance(cpp, int):
                return cpp
            outputs.append((os.path.splitext(output)[0] + ".cpp", cpp))
        if dump_dir is not None:
            outputs += [(os.path.join(dump_dir, n), body) for n, body, _ in art.lowered.dumps]
        status = _commit(reporter, outputs, inputs=[file], dirs=[dump_dir] if dump_dir is not None else [],
                         stdout_ok=True, collision_hint="nothing was written; give -o, --header (or --no-header) "
                         "and --dump-dir names that are neither the input nor each other")
        if status != EXIT_OK:
            return status
        if art.lowered.timings_table is not None:
            click.echo(art.lowered.timings_table, err=True)
        return EXIT_OK

    sys.exit(_run_guarded(run))


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


def write_all_atomic(files: list[tuple[str, str]]) -> None:
    """Write several files all-or-nothing (ptoc.outputs); raises ptoc.outputs.OutputError."""
    from ptoc.outputs import OutputSet

    outs = OutputSet()
    for path, text in files:
        outs.add(path, text)
    outs.commit()


@cli.command()
@click.argument("input_path", metavar="IN.npy", type=click.Path(dir_okay=False))
@click.option("--layout", required=True, help="ND, DN, NZ, ZN, ZZ (ND->ZZ) or ZZ_DN (DN->ZZ).")
@click.option("--dtype", "dtype_name", required=True, help="Element type, e.g. int8, fp16, bf16, fp32.")
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False),
              help="OUT.bin (raw bytes) or OUT.npy (the packed elements in memory order).")
def pack(input_path, layout, dtype_name, output) -> None:
    """Pack a logical array into the bytes a kernel reads from global memory.

    \b
    ptoc pack w.npy --layout NZ --dtype int8 -o w_nz.bin
    For a pl.NZ weight [R, C] the bytes are in the blocked order [B, C/c0, R/16, 16, c0] (NZ-2).
    """

    def run() -> int:
        if not _need_reference():
            return EXIT_USAGE
        from ptoc.outputs import OutputError
        from ptoc.reference.packers import pack_file

        try:
            res = pack_file(input_path, output, layout, dtype_name)
        except OutputError as e:
            click.echo(f"ptoc pack: error: {e}", err=True)
            return EXIT_USAGE
        except ValueError as e:
            click.echo(f"ptoc pack: error: {e}", err=True)
            return EXIT_USER
        click.echo(f"packed {list(res.logical_shape)} {res.dtype} as {res.layout} "
                   f"{list(res.physical_shape)} ({res.nbytes} bytes) -> {res.out_path}", err=True)
        return EXIT_OK

    sys.exit(_run_guarded(run))


@cli.command()
@click.argument("input_path", metavar="IN.bin|IN.npy", type=click.Path(dir_okay=False))
@click.option("--layout", required=True, help="The layout the bytes are in (see `ptoc pack --help`).")
@click.option("--dtype", "dtype_name", required=True, help="Element type, e.g. int8, fp16, bf16, fp32.")
@click.option("--shape", required=True, help="The logical shape, e.g. 256,512.")
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False), help="OUT.npy (logical array).")
def unpack(input_path, layout, dtype_name, shape, output) -> None:
    """Turn global-memory bytes back into the logical array (the inverse of `ptoc pack`)."""

    def run() -> int:
        if not _need_reference():
            return EXIT_USAGE
        from ptoc.outputs import OutputError
        from ptoc.reference.packers import unpack_file

        try:
            res = unpack_file(input_path, output, layout, dtype_name, shape)
        except OutputError as e:
            click.echo(f"ptoc unpack: error: {e}", err=True)
            return EXIT_USAGE
        except ValueError as e:
            click.echo(f"ptoc unpack: error: {e}", err=True)
            return EXIT_USER
        click.echo(f"unpacked {res.layout} {res.dtype} -> {list(res.logical_shape)} -> {res.out_path}", err=True)
        return EXIT_OK

    sys.exit(_run_guarded(run))


def _name_values(pairs, what: str, cast) -> dict:
    out = {}
    for item in pairs:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise click.BadParameter(f"{item!r}: write NAME=VALUE", param_hint=what)
        try:
            out[name.strip()] = cast(value.strip())
        except ValueError as e:
            why = str(e) if cast is _dim_value and str(e) else f"{value!r} is not a number"
            raise click.BadParameter(f"{item!r}: {why}", param_hint=what) from None
    return out


def _dim_value(v: str) -> int:
    """A --dim value: a non-negative integer."""
    try:
        n = int(v)
    except ValueError:
        raise ValueError(f"{v!r} is not an integer") from None
    if n < 0:
        raise ValueError(f"{n} is negative; a dimension is 0 or more")
    return n


REFERENCE_MAX_BYTES = 1 << 30  # the numeric reference's limit on one kernel's tensor data


def _check_tensor_sizes(fn, dims: dict) -> None:
    """A usage error when the tensors of kernel `fn` with these dimension values exceed what the numeric
    reference can hold (REFERENCE_MAX_BYTES), before anything is allocated."""
    from ptoc.ir.nodes import TensorType
    from ptoc.reference.validate import _eval_dim

    total = 0
    for p in fn.params:
        if not isinstance(p.type, TensorType):
            continue
        try:
            n = 1
            for x in p.type.shape:
                n *= _eval_dim(x, dims)
        except Exception:  # noqa: BLE001 - a dimension without a value is reported by the run itself
            continue
        total += n * p.type.dtype.bytes
    if total > REFERENCE_MAX_BYTES:
        given = " ".join(f"--dim {k}={v}" for k, v in dims.items()) or "these sizes"
        raise click.UsageError(f"the tensors of {fn.name} take {total / (1 << 30):.1f} GiB with {given}; the "
                               f"numeric reference holds at most {REFERENCE_MAX_BYTES >> 30} GiB: use smaller "
                               "--dim values")


def _check_names(given, known, what: str, kind: str) -> None:
    """A usage error, with a did-you-mean, for a NAME of `given` that is not in `known`."""
    import difflib

    known = list(dict.fromkeys(known))
    for name in given:
        if name in known:
            continue
        close = difflib.get_close_matches(name, known, n=1)
        if close:
            hint = f"; did you mean {close[0]!r}?"
        elif known:
            hint = f"; the {kind}s are: {', '.join(known)}"
        else:
            hint = f"; the program has no {kind}s"
        raise click.BadParameter(f"unknown {kind} {name!r}{hint}", param_hint=what)


def _number(v: str):
    try:
        return int(v)
    except ValueError:
        return float(v)


def _validate(file, text, ctx, seed, dims, scalars, reporter, simulator=None) -> int:
    from ptoc.diagnostics import CompileError
    from ptoc.driver import frontend
    from ptoc.reference.validate import format_table, validate_program

    from ptoc.ir.nodes import ScalarType
    from ptoc.reference.validate import dim_symbols, kernels

    d = _name_values(dims, "--dim", _dim_value)
    sc = _name_values(scalars, "--scalar", _number)
    try:
        prog = frontend(text, file, ctx)
        ks = kernels(prog)
        _check_names(d, [n for f in ks for n in dim_symbols(prog, f)], "--dim", "dynamic dimension")
        _check_names(sc, [p.name for f in ks for p in f.params if isinstance(p.type, ScalarType)], "--scalar",
                     "scalar parameter")
        for f in ks:
            _check_tensor_sizes(f, d)
        reports = validate_program(prog, ctx, seed=seed, dims=d, scalars=sc, simulator=simulator)
    except CompileError as e:
        reporter.emit(e.diagnostics, text)
        return EXIT_USER
    if not reports:
        click.echo(f"{file}: no kernel (InCore/AIC/AIV function) to validate", err=True)
        return EXIT_USER
    click.echo(format_table(reports))
    return EXIT_USER if any(r.first_failure for r in reports) else EXIT_OK


@cli.command()
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--input", "inputs", multiple=True, metavar="NAME=FILE.npy|NUMBER",
              help="A tensor parameter's logical array (.npy) or a scalar parameter's value; repeatable.")
@click.option("--dim", "dims", multiple=True, metavar="NAME=N", help="Value of a dynamic dimension (default: "
              "taken from the input arrays' shapes).")
@click.option("--function", "fn_name", help="The kernel to run (default: the only kernel of FILE).")
@click.option("--stage", metavar="PASS|frontend", help="Run the IR after PASS (or the front end's IR) instead of "
              "the fully lowered IR.")
@click.option("--pto", "pto_path", type=click.Path(dir_okay=False), help="Run this emitted .pto instead of the IR.")
@click.option("--output-dir", type=click.Path(file_okay=False), default=".", show_default=True,
              help="Where to write <param>.npy for every tensor the kernel writes (created if missing; never "
              "over an input file).")
@click.option("--sim", is_flag=True, help="Run the emitted .pto (or --pto FILE) through PTOAS and pto-isa's CPU "
              "simulator instead of ptoc's reference.")
@sim_options
@arch_option
@diagnostics_option
def run(file, inputs, dims, fn_name, stage, pto_path, output_dir, sim, ptoas_path, pto_isa_dir, cxx_path, arch,
        diag_fmt) -> None:
    """Execute a kernel of FILE on the numeric reference and write its outputs as .npy.

    \b
    ptoc run kernel.ir --input x=x.npy --input w=w.npy --output-dir out/
    ptoc run kernel.ir --input x=x.npy --stage frontend          # the IR as written
    ptoc run kernel.ir --input x=x.npy --pto kernel.pto          # the emitted .pto
    ptoc run kernel.ir --input x=x.npy --sim                     # PTOAS + pto-isa's CPU simulator

    Inputs are logical arrays; NZ tensors are packed by ptoc. Every In and InOut tensor and every scalar
    needs an --input; Out parameters without one start as zeros. An array is converted to its parameter's
    dtype only when no value changes (as `ptoc pack` does). An output never replaces an input file: when
    <param>.npy in --output-dir is one of the inputs, nothing is written (exit 2); choose another --output-dir.
    """
    names = _pass_names()
    if stage is not None and stage != "frontend" and stage not in names:
        raise click.BadParameter(f"unknown pass {stage!r}; use frontend or one of: {', '.join(names)}",
                                 param_hint="--stage")
    if stage is not None and pto_path is not None:
        raise click.UsageError("--stage and --pto cannot be used together")
    if stage is not None and sim:
        raise click.UsageError("--stage and --sim cannot be used together")
    if (ptoas_path or pto_isa_dir or cxx_path) and not sim:
        raise click.UsageError("--ptoas, --pto-isa and --cxx need --sim")

    def run_() -> int:
        if not _need_reference():
            return EXIT_USAGE
        import numpy as np

        from ptoc.context import CompileContext
        from ptoc.diagnostics import CompileError, Diagnostic, Span
        from ptoc.driver import frontend, lower
        from ptoc.reference.packers import load_npy

        reporter = Reporter(diag_fmt)
        text = _read_source(file, reporter)
        if text is None:
            return EXIT_USER
        ctx = CompileContext(arch=arch, ptoas_version=_pinned())
        values: dict = {}
        read_files: list[str] = [file] + ([pto_path] if pto_path else [])
        for item in inputs:
            name, sep, value = item.partition("=")
            if not sep or not name.strip():
                raise click.BadParameter(f"{item!r}: write NAME=FILE.npy or NAME=NUMBER", param_hint="--input")
            name = name.strip()
            try:
                if value.endswith(".npy"):
                    values[name] = load_npy(value)
                    read_files.append(value)
                else:
                    values[name] = _number(value)
            except ValueError as e:
                msg = str(e) if value.endswith(".npy") else f"{value!r} is neither a .npy file nor a number"
                reporter.emit([Diagnostic("PTOC-E0506", f"--input {name}: {msg}", Span(value, 0, 0, 0, 0))], None)
                return EXIT_USER
        d = _name_values(dims, "--dim", _dim_value)
        try:
            prog = frontend(text, file, ctx)
            kernels_ = [f for f in prog.functions if f.func_type in ("InCore", "AIC", "AIV")]
            if fn_name is None:
                if len(kernels_) != 1:
                    raise click.UsageError(f"{file} has {len(kernels_)} kernels; choose one with --function "
                                           f"({', '.join(f.name for f in kernels_)})")
                fn_name_ = kernels_[0].name
            else:
                fn_name_ = fn_name
                if prog.function(fn_name_) is None:
                    raise click.BadParameter(f"{file} has no function {fn_name_!r}", param_hint="--function")
            fn = prog.function(fn_name_)
            from ptoc.reference.validate import dim_symbols

            _check_names(values, [p.name for p in fn.params] + dim_symbols(prog, fn), "--input", "parameter")
            _check_names(d, dim_symbols(prog, fn), "--dim", "dynamic dimension")
            _infer_dims(prog, fn, values, d)
            _check_tensor_sizes(fn, d)
            _prepare_inputs(fn, values, d)
            if sim:
                simulator = _simulator(ptoas_path, pto_isa_dir, cxx_path, arch, reporter)
                if simulator is None:
                    return EXIT_USAGE
                with simulator:
                    outs = _run_simulated(simulator, pto_path, prog, fn, values, d, ctx, reporter)
                if outs is None:
                    return EXIT_USER
            elif pto_path is not None:
                outs = _run_pto_file(pto_path, prog, fn, values, d, ctx)
            else:
                from ptoc.reference.interp import run_function

                target = prog if stage == "frontend" else lower(prog, ctx, stop_after=stage).program
                outs = run_function(target, fn_name_, {**values, **d}, ctx)
        except CompileError as e:
            reporter.emit(e.diagnostics, text)
            return EXIT_USER
        import io

        outputs = []
        for name, arr in sorted(outs.items()):
            if not isinstance(arr, np.ndarray):
                arr = np.asarray(arr)
            safe = name.replace("[", "_").replace("]", "")
            buf = io.BytesIO()
            np.save(buf, arr, allow_pickle=False)
            outputs.append((os.path.join(output_dir, f"{safe}.npy"), buf.getvalue(), arr))
        status = _commit(reporter, [(path, data) for path, data, _ in outputs], inputs=read_files,
                         dirs=[output_dir], collision_hint="nothing was written; write the outputs elsewhere with "
                         "--output-dir DIR")
        if status != EXIT_OK:
            return status
        for path, _, arr in outputs:
            click.echo(f"wrote {path} {list(arr.shape)} {arr.dtype}", err=True)
        return EXIT_OK

    sys.exit(_run_guarded(run_))


def _infer_dims(prog, fn, values: dict, dims: dict) -> None:
    """Dynamic dimensions not given with --dim are read off the input arrays' shapes."""
    from ptoc.ir.nodes import TensorType, Var

    for p in fn.params:
        arr = values.get(p.name)
        if isinstance(p.type, TensorType) and hasattr(arr, "shape") and len(arr.shape) == p.type.rank:
            for d, n in zip(p.type.shape, arr.shape):
                if isinstance(d, Var) and d.name not in dims:
                    dims[d.name] = int(n)


def _prepare_inputs(fn, values: dict, dims: dict) -> None:
    """Check and complete the --input values of kernel `fn` in place: every In/InOut tensor and every
    scalar needs one; an Out tensor without one starts as zeros; an array is converted to its parameter's
    dtype only when no value changes (the check `ptoc pack` makes). Raises CompileError (E0505/E0506)."""
    import numpy as np

    from ptoc.diagnostics import CompileError, Diagnostic
    from ptoc.ir import dtypes
    from ptoc.ir.nodes import ScalarType, TensorType
    from ptoc.reference.packers import SUPPORTED_DTYPES, convert_exact
    from ptoc.reference.validate import _eval_dim

    errors = []
    for p in fn.params:
        t, v = p.type, values.get(p.name)
        if isinstance(t, ScalarType):
            if v is None:
                errors.append(Diagnostic("PTOC-E0506", f"scalar parameter {p.name!r} has no value", p.span,
                                         hint=f"give --input {p.name}=NUMBER"))
            elif isinstance(v, np.ndarray):
                errors.append(Diagnostic("PTOC-E0506", f"scalar parameter {p.name!r} takes a number, not an array",
                                         p.span, hint=f"give --input {p.name}=NUMBER"))
            continue
        if not isinstance(t, TensorType):
            continue
        if v is None:
            if p.direction != "Out":
                errors.append(Diagnostic("PTOC-E0506", f"{p.direction} tensor parameter {p.name!r} has no input",
                                         p.span, hint=f"give --input {p.name}=FILE.npy (only Out parameters start "
                                         "as zeros)"))
                continue
            missing = [x.name for x in t.shape if hasattr(x, "name") and x.name not in dims]
            if missing:
                errors.append(Diagnostic("PTOC-E0505", f"Out parameter {p.name!r} starts as zeros, but its shape "
                                         f"needs dynamic dimension(s) {', '.join(missing)}", p.span,
                                         hint=" ".join(f"--dim {m}=N" for m in missing)))
                continue
            values[p.name] = np.zeros(tuple(_eval_dim(x, dims) for x in t.shape), dtype=dtypes.numpy_dtype(t.dtype))
            continue
        if not isinstance(v, np.ndarray):
            errors.append(Diagnostic("PTOC-E0506", f"tensor parameter {p.name!r} takes a .npy array, not a number",
                                     p.span, hint=f"give --input {p.name}=FILE.npy"))
            continue
        if t.dtype.name in SUPPORTED_DTYPES and not t.dtype.is_packed_fp4:
            try:
                values[p.name] = convert_exact(v, t.dtype)
            except ValueError as e:
                errors.append(Diagnostic("PTOC-E0506", f"--input {p.name}: {e}", p.span))
    if errors:
        raise CompileError(errors)


def _run_pto_file(pto_path, prog, fn, values, dims, ctx):
    from ptoc.codegen.pto import dynamic_dims
    from ptoc.diagnostics import CompileError, Diagnostic, Span
    from ptoc.driver import lower
    from ptoc.reference.pto_exec import PtoExecError, run_pto_logical
    from ptoc.reference.validate import pto_arguments

    try:
        with open(pto_path, "rb") as fh:
            data = fh.read()
    except OSError as e:
        raise CompileError([Diagnostic("PTOC-E0004", f"cannot read {pto_path}: {e.strerror or e}",
                                       Span(pto_path, 0, 0, 0, 0))]) from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        col = e.start - (data.rfind(b"\n", 0, e.start) + 1) + 1
        raise CompileError([Diagnostic("PTOC-E0004", "the .pto file is not valid UTF-8 text",
                                       Span(pto_path, line, col, line, col + 1),
                                       hint="give the .pto file ptoc compile wrote")]) from None
    low = lower(prog, ctx).program
    low_fn = low.function(fn.name)
    try:
        tensors, names, scal = pto_arguments(low_fn, fn, values, dims)
    except KeyError as e:
        raise CompileError([Diagnostic("PTOC-E0506", f"scalar parameter {e.args[0]} needs --input "
                                       f"{e.args[0]}=VALUE", fn.span)]) from None
    try:
        out = run_pto_logical(text, fn.name, tensors, scal, [dims[x] for x in dynamic_dims(low, low_fn)])
    except PtoExecError as e:
        raise CompileError([Diagnostic("PTOC-E0504", f"executing {pto_path}: {e}", Span(pto_path, 0, 0, 0, 0))]) \
            from None
    written = {p.name for p in fn.params if p.direction in ("Out", "InOut")}
    logical = {p.name for p in fn.params}
    return {names[i]: a for i, a in out.items() if names[i] in written or names[i] not in logical}


def _run_simulated(simulator, pto_path, prog, fn, values, dims, ctx, reporter):
    """Outputs of `fn` run on the simulator (the emitted .pto, or the file `pto_path` as given); None after
    reporting a failure."""
    from ptoc.codegen.pto import dynamic_dims, emit_module
    from ptoc.diagnostics import CompileError, Diagnostic, Span
    from ptoc.driver import lower
    from ptoc.reference.sim import SimError
    from ptoc.reference.validate import pto_arguments

    low = lower(prog, ctx).program
    low_fn = low.function(fn.name)
    if pto_path is not None:
        try:
            with open(pto_path, encoding="utf-8") as fh:
                text = fh.read()
        except OSError as e:
            raise CompileError([Diagnostic("PTOC-E0004", f"cannot read {pto_path}: {e.strerror or e}",
                                           Span(pto_path, 0, 0, 0, 0))]) from None
        shown = pto_path
    else:
        text, _ = emit_module(low, ctx)
        shown = f"{fn.name}.pto (emitted)"
    try:
        tensors, names, scal = pto_arguments(low_fn, fn, values, dims)
    except KeyError as e:
        raise CompileError([Diagnostic("PTOC-E0506", f"scalar parameter {e.args[0]} needs --input "
                                       f"{e.args[0]}=VALUE", fn.span)]) from None
    try:
        out = simulator.run(text, fn.name, tensors, scal, [dims[x] for x in dynamic_dims(low, low_fn)],
                            pto_path=shown)
    except SimError as e:
        reporter.emit(e.diagnostics or [Diagnostic(e.code, str(e), Span(shown, 0, 0, 0, 0))], text)
        return None
    written = {p.name for p in fn.params if p.direction in ("Out", "InOut")}
    logical = {p.name for p in fn.params}
    return {names[i]: a for i, a in out.items() if names[i] in written or names[i] not in logical}


def _pass_names() -> list[str]:
    from ptoc.passes.manager import PIPELINE

    return [n for _, n in PIPELINE]


@cli.command()
@click.argument("file", required=False, type=click.Path(dir_okay=False))
@click.option("--list", "list_only", is_flag=True, help="Print the pipeline: index, stage, pass, purpose.")
@click.option("--dump-after", metavar="PASS|all", help="Print (or with --dump-dir, write) the IR after PASS, "
              "or after every pass with 'all'.")
@click.option("--dump-before", metavar="PASS", help="Print the IR just before PASS runs.")
@click.option("--stop-after", metavar="PASS", help="Run the pipeline up to and including PASS.")
@click.option("--pipeline", "pipeline_spec", metavar="A,B,...", help="Run exactly these passes in this order "
              "(with the usual dumps and checks) instead of the whole pipeline; the input must already have "
              "the IR properties the first passes need.")
@click.option("--dump-dir", type=click.Path(file_okay=False), help="Write dump files here "
              "(00_frontend.ir, NN_after_<Pass>.ir) instead of printing them.")
@click.option("--timings", is_flag=True, help="Print per-pass seconds on stderr (and write "
              "pipeline_profile.json into --dump-dir when given).")
@click.option("--roundtrip-check", is_flag=True, help="After every pass, check print -> parse -> equal.")
@click.option("--print-style", type=click.Choice(["ptoc", "pypto"]), default="ptoc", show_default=True,
              help="Form of the dumps: ptoc's canonical form (re-reads to the same IR) or the form PyPTO's "
              "printer writes at the same stage (PyPTO's parser reads it; addresses sit in the MemRef offsets).")
@click.option("--validate", is_flag=True, help="Run every kernel at the front end, after every pass and as "
              "emitted .pto on the same seeded random inputs; print a table and name the first stage that "
              "differs (exit 1).")
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True,
              help="Seed of the --validate inputs (0 or more).")
@click.option("--dim", "dims", multiple=True, metavar="NAME=N", help="Value of a dynamic dimension for --validate.")
@click.option("--scalar", "scalars", multiple=True, metavar="NAME=V", help="Value of a scalar parameter for "
              "--validate (default: 1 for integers, a random value for floats).")
@click.option("--sim", is_flag=True, help="With --validate: one more row, the emitted .pto assembled by PTOAS and "
              "run on pto-isa's CPU simulator.")
@sim_options
@arch_option
@diagnostics_option
def passes(file, list_only, dump_after, dump_before, stop_after, pipeline_spec, dump_dir, timings, roundtrip_check,
           print_style, validate, seed, dims, scalars, sim, ptoas_path, pto_isa_dir, cxx_path, arch,
           diag_fmt) -> None:
    """Show the lowering pipeline, or run it on FILE and show the IR between passes.

    \b
    ptoc passes --list
    ptoc passes kernel.ir --dump-after BlockNzTensorViews
    ptoc passes kernel.ir --dump-after all --dump-dir dumps/ --timings
    ptoc passes kernel.ir --dump-after all --print-style pypto   # dumps PyPTO's parser reads
    """
    from ptoc.ir.printer import print_style as _print_style

    if roundtrip_check and print_style != "ptoc":
        raise click.UsageError("--roundtrip-check checks ptoc's canonical form; it cannot be combined with "
                               "--print-style pypto")
    with _print_style(print_style):
        _passes(file, list_only, dump_after, dump_before, stop_after, pipeline_spec, dump_dir, timings,
                roundtrip_check, validate, seed, dims, scalars, sim, ptoas_path, pto_isa_dir, cxx_path, arch,
                diag_fmt)


def _passes(file, list_only, dump_after, dump_before, stop_after, pipeline_spec, dump_dir, timings, roundtrip_check,
            validate, seed, dims, scalars, sim, ptoas_path, pto_isa_dir, cxx_path, arch, diag_fmt) -> None:
    names = _pass_names()
    chosen_passes = None
    if pipeline_spec is not None:
        from ptoc.passes.manager import parse_pipeline

        try:
            chosen_passes = parse_pipeline(pipeline_spec)
        except ValueError as e:
            raise click.BadParameter(str(e), param_hint="--pipeline") from None
        if validate:
            raise click.UsageError("--validate runs the whole pipeline; it cannot be combined with --pipeline")
        names = [c.name for c in chosen_passes]
    for opt, val in (("--dump-after", dump_after), ("--dump-before", dump_before), ("--stop-after", stop_after)):
        if val is not None and val not in names and not (opt == "--dump-after" and val == "all"):
            raise click.BadParameter(f"unknown pass {val!r}; passes: {', '.join(names)}", param_hint=opt)
    if not list_only and file is None:
        raise click.UsageError("give a FILE to run the pipeline on, or --list")
    if sim and not validate:
        raise click.UsageError("--sim needs --validate")
    if (ptoas_path or pto_isa_dir or cxx_path) and not sim:
        raise click.UsageError("--ptoas, --pto-isa and --cxx need --sim")

    def run() -> int:
        from ptoc.passes.manager import PIPELINE, available_pipeline

        if list_only:
            for i, (cls, (stage, _)) in enumerate(zip(available_pipeline(), PIPELINE), start=1):
                click.echo(f"{i:2d}  {stage:7} {cls.name:26} {cls.summary}")
            return EXIT_OK
        from ptoc.context import CompileContext
        from ptoc.diagnostics import CompileError
        from ptoc.driver import frontend, lower

        reporter = Reporter(diag_fmt)
        text = _read_source(file, reporter)
        if text is None:
            return EXIT_USER
        ctx = CompileContext(arch=arch, ptoas_version=_pinned())
        if validate:
            if not _need_reference():
                return EXIT_USAGE
            if not sim:
                return _validate(file, text, ctx, seed, dims, scalars, reporter)
            simulator = _simulator(ptoas_path, pto_isa_dir, cxx_path, arch, reporter)
            if simulator is None:
                return EXIT_USAGE
            with simulator:
                return _validate(file, text, ctx, seed, dims, scalars, reporter, simulator)
        stop = stop_after
        if stop is None and dump_after not in (None, "all"):
            stop = dump_after
        try:
            prog = frontend(text, file, ctx)
            res = lower(prog, ctx, stop_after=stop, dumps=True, timings=timings, roundtrip=roundtrip_check,
                        passes=chosen_passes)
        except CompileError as e:
            reporter.emit(e.diagnostics, text)
            return EXIT_USER
        chosen = []
        for name, body, pname in res.dumps:
            if dump_after == "all" or (pname is not None and pname == dump_after) or \
                    (pname is None and dump_dir is not None):
                chosen.append((name, body))
        if dump_before is not None:
            if dump_before not in res.before:
                raise click.UsageError(f"the pipeline stopped before reaching {dump_before}")
            idx = names.index(dump_before) + 1
            chosen.append((f"{idx:02d}_before_{dump_before}.ir", res.before[dump_before]))
        if dump_dir is not None:
            outputs = [(os.path.join(dump_dir, name), body) for name, body in chosen]
            if res.profile is not None:
                import json

                outputs.append((os.path.join(dump_dir, "pipeline_profile.json"),
                                json.dumps(res.profile, indent=2, sort_keys=True) + "\n"))
            status = _commit(reporter, outputs, inputs=[file], dirs=[dump_dir])
            if status != EXIT_OK:
                return status
        else:
            for name, body in chosen:
                if len(chosen) > 1:
                    click.echo(f"# ---- {name} ----")
                click.echo(body, nl=False)
        if res.timings_table is not None:
            click.echo(res.timings_table, err=True)
        return EXIT_OK

    sys.exit(_run_guarded(run))


@cli.command()
@click.argument("pattern", required=False)
def ops(pattern: str | None) -> None:
    """List the operator set: name, signature, executing unit and summary.

    PATTERN filters by substring (e.g. `ptoc ops tile.` or `ptoc ops gather`); exit 1 when nothing matches.
    """

    def run() -> int:
        from ptoc.ops.registry import REGISTRY, SHORT, load_all, signature

        load_all()
        shorts = [s for s in sorted(SHORT) if not pattern or pattern in s]
        if pattern and not shorts and not any(pattern in name for name in REGISTRY):
            click.echo(f"ptoc ops: no operator matches {pattern!r}", err=True)
            return EXIT_USER
        for name in sorted(REGISTRY):
            if pattern and pattern not in name:
                continue
            op = REGISTRY[name]
            click.echo(f"{name:28} {op.unit:7} {signature(op)}")
            if op.summary:
                click.echo(f"{'':37}{op.summary}")
        if shorts:
            click.echo("\nshort names (resolved by argument kind):")
            for s in shorts:
                targets = ", ".join(f"{k}: {v}" for k, v in sorted(SHORT[s].items()))
                click.echo(f"  pl.{s:24} {targets}")
        return EXIT_OK

    sys.exit(_run_guarded(run))


@cli.command()
@click.argument("query", metavar="CODE|RULE", required=False)
def explain(query: str | None) -> None:
    """Explain a diagnostic code (PTOC-E0202, E0202) or a specification rule (NZ-8): what it means, an
    example that triggers it, and the fix (the entries of docs/rules.md). Without an argument, list them.
    """

    def run() -> int:
        from ptoc.explain import close_ids, entries, normalize, read_rules_text

        table = entries(read_rules_text())
        if query is None:
            for key, (title, _) in table.items():
                click.echo(f"{key:12} {title}")
            return EXIT_OK
        key = normalize(query)
        if key not in table:
            near = close_ids(query, table)
            more = f"; did you mean {' or '.join(near)}?" if near else ""
            click.echo(f"ptoc explain: no entry for {query!r}{more} (`ptoc explain` lists them all)", err=True)
            return EXIT_USER
        click.echo(table[key][1], nl=False)
        return EXIT_OK

    sys.exit(_run_guarded(run))


def write_atomic(path: str, text: str) -> None:
    """Write `text` to `path` through a temp file and a rename: all or nothing."""
    write_all_atomic([(path, text)])


def main() -> None:
    install_interrupt_handler()
    try:
        cli(prog_name="ptoc")
    except Interrupted:
        try:
            click.echo("ptoc: interrupted", err=True)
        finally:
            os._exit(EXIT_INTERRUPTED)  # skip interpreter teardown: a second Ctrl-C cannot print a traceback


if __name__ == "__main__":  # pragma: no cover
    main()
