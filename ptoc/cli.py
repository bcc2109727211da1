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


# Deeply nested input (a long chain of `+`, nested parentheses, loops in loops) is read and lowered by
# recursive functions, so commands raise Python's recursion limit to this.
_RECURSION_LIMIT = 20000
# Before Python 3.11 every Python call also takes C stack: at that limit the main thread's stack (8 MiB)
# overflows and the process dies of a segmentation fault instead of reporting the input as too deep. There
# the command runs in a thread of its own whose stack holds the whole limit.
_DEEP_STACK_BYTES = 1 << 30
_CALLS_TAKE_C_STACK = sys.version_info < (3, 11)


def _on_deep_stack(fn):
    """`fn()`, on a stack deep enough for `_RECURSION_LIMIT` Python calls (see `_DEEP_STACK_BYTES`): in this
    thread from Python 3.11 on, else in a thread with a large stack, whose result or exception this returns
    or raises. Ctrl-C, which interrupts the waiting main thread, is raised in the command's thread too, so
    the command unwinds (and leaves no partial output) as it would in the main thread."""
    if not _CALLS_TAKE_C_STACK:
        return fn()
    import threading

    done: dict = {}

    def body():
        try:
            done["value"] = fn()
        except BaseException as e:  # noqa: BLE001 - handed to the main thread, which raises it
            done["error"] = e

    try:
        old = threading.stack_size(_DEEP_STACK_BYTES)
    except (ValueError, RuntimeError):  # the platform sets no thread stack size: as deep as the main thread
        return fn()
    try:
        worker = threading.Thread(target=body, name="ptoc-command", daemon=True)
        worker.start()
    finally:
        threading.stack_size(old)
    while worker.is_alive():
        try:
            worker.join()
        except (Interrupted, KeyboardInterrupt) as e:  # Ctrl-C: the command's to handle, then ours
            _raise_in_thread(worker, type(e))
    if "error" in done:
        raise done["error"]
    return done.get("value")


def _raise_in_thread(thread, exc_type) -> None:
    """Raise `exc_type` in `thread` at its next Python instruction (CPython's asynchronous exception)."""
    import ctypes

    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread.ident), ctypes.py_object(exc_type))


def _run_guarded(fn) -> int:
    """Run `fn`; map a ptoc bug to exit 3 without a Python traceback."""
    from ptoc.diagnostics import InternalError

    sys.setrecursionlimit(max(sys.getrecursionlimit(), _RECURSION_LIMIT))
    try:
        status = _on_deep_stack(fn)
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


def ptoas_version_option(value: str | None) -> str:
    """`--ptoas-version` as given, or the pin; a value that is not a version is a usage error."""
    from ptoc.driver import parse_version

    version = value or _pinned()
    try:
        parse_version(version)
    except ValueError:
        raise click.BadParameter(f"{version!r} is not a version such as v0.61", param_hint="--ptoas-version") \
            from None
    return version


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
@click.option("--syntax-only", is_flag=True,
              help="Stop after the front end: syntax, names, annotations, types and the operator rules of the "
              "program as written (like a C compiler's -fsyntax-only). No pass runs and nothing is emitted, so "
              "errors that only lowering finds (layouts, memory planning, emission) are not reported. Much faster "
              "on large files; for editors.")
@click.option("-j", "--jobs", type=click.IntRange(min=1), default=None, metavar="N",
              help="Check each FILE's independent groups of kernels in up to N processes, as `compile -j N` "
              "compiles them (the same diagnostics as -j 1); by default as many as there are CPUs (at most 8).")
@diagnostics_option
def check(files: tuple[str, ...], arch: str, ptoas_version: str | None, pto_level: str, syntax_only: bool,
          jobs: int | None, diag_fmt: str) -> None:
    """Check IR FILES (`-`: standard input) as compile would; report every error found.

    Runs every check `ptoc compile` runs with the same options (front end, the whole pass pipeline and
    the emitters, in memory) and writes nothing; `--syntax-only` runs the front end alone. Exits 0 when
    every file passes, 1 when any file has errors.
    """
    if files.count("-") > 1:
        raise click.UsageError("standard input (-) can be checked only once")

    version = ptoas_version_option(ptoas_version)

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
            warned: list = []
            try:
                name = _source_name(path)
                art, procs = None, 1
                if not syntax_only:
                    from ptoc.parallel import compile_source_in_shards

                    art, procs = compile_source_in_shards(text, name, ctx, jobs, pto_level, header=True)
                if art is None:
                    prog = frontend(text, name, ctx, warned)
                    reporter.emit(warned, text)
                    if syntax_only:
                        continue
                    art = compile_program(prog, ctx, os.path.basename(name), pto_level=pto_level, jobs=procs)
            except CompileError as e:
                reporter.emit(e.diagnostics, text)
                status = EXIT_USER
                continue
            for fn in art.skipped:  # the notes compile prints for the same program
                reporter.emit([Diagnostic("PTOC-I0100", f"{fn} is not a kernel (InCore/AIC/AIV); not emitted",
                                          Span(name, 0, 0, 0, 0), severity="info")], None)
        if status == EXIT_OK and diag_fmt == "text":
            n = len(files)
            what = " (front end only)" if syntax_only else ""
            click.echo(f"ok: {n} file{'s' if n != 1 else ''} checked{what}, no errors", err=True)
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


def _pass_names() -> list[str]:
    from ptoc.passes.manager import PIPELINE

    return [n for _, n in PIPELINE]


def main() -> None:
    install_interrupt_handler()
    import atexit
    import gc

    # At exit the interpreter's last full collection would scan every object still alive (a compile's IR:
    # about 0.4 s at 10k lines) only to free memory the process gives back anyway; frozen, it skips them.
    # (Registered first, so it runs after every other exit handler.)
    atexit.register(gc.freeze)
    try:
        cli(prog_name="ptoc")
    except Interrupted:
        try:
            click.echo("ptoc: interrupted", err=True)
        finally:
            os._exit(EXIT_INTERRUPTED)  # skip interpreter teardown: a second Ctrl-C cannot print a traceback


# The subcommands register themselves on `cli` when imported (after everything above is defined).
from ptoc.commands import compile as _compile, info as _info, passes as _passes, run as _run  # noqa: E402,F401

if __name__ == "__main__":  # pragma: no cover
    # `python -m ptoc.cli`: run the imported module's group, the one the subcommands registered on
    from ptoc.cli import main as _main

    _main()
