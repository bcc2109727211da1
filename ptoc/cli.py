"""Command line: parse flags, build a CompileContext, call the driver, render diagnostics.

This is the only module that reads the environment (NO_COLOR, TTY detection) or touches files.
Exit codes: 0 success, 1 the input has errors, 2 usage error, 3 internal error.
"""

from __future__ import annotations

import os
import sys

import click

from ptoc import __version__

EXIT_OK, EXIT_USER, EXIT_USAGE, EXIT_INTERNAL = 0, 1, 2, 3

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


class Reporter:
    """Renders diagnostics to stderr (text) or stdout (JSON lines)."""

    def __init__(self, fmt: str):
        self.fmt = fmt
        self.color = _use_color(sys.stderr)
        self.errors = 0

    def emit(self, diags, source: str | None) -> None:
        from ptoc.diagnostics import render_json, render_text

        for d in diags:
            if d.severity == "error":
                self.errors += 1
            if self.fmt == "json":
                click.echo(render_json(d))
            else:
                # color= passes our decision through: click strips escapes on a non-TTY by default,
                # which would defeat FORCE_COLOR
                click.echo(render_text(d, source, self.color), err=True, color=self.color)


def _read_source(path: str, reporter: Reporter) -> str | None:
    from ptoc.diagnostics import Diagnostic, Span

    try:
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


def _run_guarded(fn) -> int:
    """Run `fn`; map a ptoc bug to exit 3 without a Python traceback."""
    from ptoc.diagnostics import InternalError

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 20000))
    try:
        return fn()
    except InternalError as e:
        _internal_error(e)
        return EXIT_INTERNAL
    except (KeyboardInterrupt, click.exceptions.Exit, click.ClickException):
        raise
    except Exception as e:  # noqa: BLE001 - last line of defence: never a traceback for bad input
        _internal_error(e)
        return EXIT_INTERNAL


def _pinned() -> str:
    from ptoc.target.toolchain import pinned_ptoas_version

    return pinned_ptoas_version()


def _version_text() -> str:
    return f"ptoc {__version__} (targets PTOAS {_pinned()})"


diagnostics_option = click.option(
    "--diagnostics", "diag_fmt", type=click.Choice(["text", "json"]), default="text", show_default=True,
    help="How to print diagnostics: text with source lines and carets (stderr), or one JSON object per "
    "diagnostic (stdout).",
)
arch_option = click.option(
    "--arch", type=click.Choice(["a2a3", "a5"]), default="a2a3", show_default=True,
    help="Target: a2a3 (Ascend910B family) or a5 (Ascend950). Target-dependent operator rules follow it.",
)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def cli() -> None:
    """ptoc: a cross-compiler from textual PyPTO IR to PTOAS-ready .pto.

    \b
    Exit codes: 0 success, 1 the input has errors, 2 usage error, 3 internal error (a ptoc bug).
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
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False))
@arch_option
@diagnostics_option
def check(files: tuple[str, ...], arch: str, diag_fmt: str) -> None:
    """Parse and check IR FILES; report every error found.

    Exits 0 when every file is valid, 1 when any file has errors.
    """

    def run() -> int:
        from ptoc.context import CompileContext
        from ptoc.diagnostics import CompileError
        from ptoc.driver import check_source

        reporter = Reporter(diag_fmt)
        ctx = CompileContext(arch=arch, ptoas_version=_pinned())
        status = EXIT_OK
        for path in files:
            text = _read_source(path, reporter)
            if text is None:
                status = EXIT_USER
                continue
            try:
                check_source(text, path, ctx)
            except CompileError as e:
                reporter.emit(e.diagnostics, text)
                status = EXIT_USER
        if status == EXIT_OK and diag_fmt == "text":
            n = len(files)
            click.echo(f"ok: {n} file{'s' if n != 1 else ''} checked, no errors", err=True)
        return status

    sys.exit(_run_guarded(run))


@cli.command()
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--check", "check_only", is_flag=True,
              help="Do not write; exit 1 if FILE is not in canonical form (prints a diff).")
@click.option("--in-place", "-i", is_flag=True, help="Rewrite FILE in canonical form (atomically).")
@diagnostics_option
def fmt(file: str, check_only: bool, in_place: bool, diag_fmt: str) -> None:
    """Print FILE in the canonical printer form of the PyPTO IR text.

    Without options the formatted program goes to stdout. The file must parse and check; on errors
    nothing is written.
    """
    if check_only and in_place:
        raise click.UsageError("--check and --in-place cannot be used together")

    def run() -> int:
        from ptoc.diagnostics import CompileError
        from ptoc.frontend.parser import parse_program
        from ptoc.ir.printer import print_program

        reporter = Reporter(diag_fmt)
        text = _read_source(file, reporter)
        if text is None:
            return EXIT_USER
        try:
            prog = parse_program(text, file, check_ops=False)
        except CompileError as e:
            reporter.emit(e.diagnostics, text)
            return EXIT_USER
        out = print_program(prog)
        if check_only:
            if out == text:
                return EXIT_OK
            import difflib

            diff = difflib.unified_diff(text.splitlines(True), out.splitlines(True), file, file + " (formatted)")
            click.echo("".join(diff), nl=False)
            click.echo(f"{file}: not in canonical form", err=True)
            return EXIT_USER
        if in_place:
            if out != text:
                try:
                    write_atomic(file, out)
                except OSError as e:
                    from ptoc.diagnostics import Diagnostic, Span

                    reporter.emit([Diagnostic("PTOC-E0006", f"cannot write {file}: {e.strerror or e}",
                                              Span(file, 0, 0, 0, 0),
                                              hint="check that the file and its folder are writable")], None)
                    return EXIT_USER
            return EXIT_OK
        click.echo(out, nl=False)
        return EXIT_OK

    sys.exit(_run_guarded(run))


@cli.command("compile")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("-o", "--output", "output", required=True, type=click.Path(dir_okay=False),
              help="The .pto file to write.")
@click.option("--header", "header_path", type=click.Path(dir_okay=False),
              help="Where to write the GlobalTensor header (default: OUTPUT with suffix .h).")
@click.option("--no-header", is_flag=True, help="Do not write the header.")
@arch_option
@click.option("--ptoas-version", metavar="vX.Y", help="The PTOAS release the output targets "
              "(default: the pin in toolchain/versions.env). NZ views need v0.61 or newer (NZ-15).")
@click.option("--pto-level", type=click.Choice(["level3", "level2"]), default="level3", show_default=True,
              help="level3: ptoc plans on-chip memory and every pto.alloc_tile has addr; level2: PTOAS plans it.")
@click.option("--dump-dir", type=click.Path(file_okay=False), help="Also write the IR after every pass here.")
@click.option("--timings", is_flag=True, help="Print per-pass seconds on stderr.")
@click.option("--assemble", is_flag=True, help="Run PTOAS on the result and report its errors.")
@click.option("--ptoas", "ptoas_path", type=click.Path(dir_okay=False), help="The PTOAS executable "
              "(default: ptoas on PATH).")
@click.option("--ptoas-timeout", type=click.FloatRange(min=1), default=300, show_default=True,
              help="Seconds to wait for PTOAS.")
@diagnostics_option
def compile_cmd(file, output, header_path, no_header, arch, ptoas_version, pto_level, dump_dir, timings, assemble,
                ptoas_path, ptoas_timeout, diag_fmt) -> None:
    """Compile FILE to a .pto module (every InCore/AIC/AIV kernel) and a GlobalTensor header.

    Outputs are written atomically: on any error nothing is written and existing outputs stay as
    they were. Orchestration functions are reported and skipped.
    """
    if header_path and no_header:
        raise click.UsageError("--header and --no-header cannot be used together")
    if ptoas_path and not assemble:
        raise click.UsageError("--ptoas needs --assemble")
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
        ctx = CompileContext(arch=arch, ptoas_version=version)
        hdr_path = None if no_header else (header_path or os.path.splitext(output)[0] + ".h")
        try:
            prog = frontend(text, file, ctx)
            art = compile_program(prog, ctx, os.path.basename(file), pto_level=pto_level,
                                  header=hdr_path is not None, dumps=dump_dir is not None, timings=timings)
        except CompileError as e:
            reporter.emit(e.diagnostics, text)
            return EXIT_USER
        for name in art.skipped:
            reporter.emit([Diagnostic("PTOC-I0100", f"{name} is not a kernel (InCore/AIC/AIV); not emitted",
                                      Span(file, 0, 0, 0, 0), severity="info")], None)
        outputs = [(output, art.pto)] + ([(hdr_path, art.header)] if hdr_path else [])
        try:
            write_all_atomic(outputs)
            if dump_dir is not None:
                os.makedirs(dump_dir, exist_ok=True)
                write_all_atomic([(os.path.join(dump_dir, n), body) for n, body, _ in art.lowered.dumps])
        except OSError as e:
            reporter.emit([Diagnostic("PTOC-E0006", f"cannot write {e.filename or output}: {e.strerror or e}",
                                      Span(output, 0, 0, 0, 0))], None)
            return EXIT_USER
        if art.lowered.timings_table is not None:
            click.echo(art.lowered.timings_table, err=True)
        if assemble:
            from ptoc.target.assembler import assemble as run_ptoas
            from ptoc.target.assembler import find_ptoas

            exe = find_ptoas(ptoas_path)
            if exe is None:
                where = f"{ptoas_path} is not an executable file" if ptoas_path else "no `ptoas` on PATH"
                reporter.emit([Diagnostic("PTOC-E0453", f"cannot assemble: {where}", Span(output, 0, 0, 0, 0),
                                          hint=f"install PTOAS {version} or newer, or pass --ptoas PATH")], None)
                return EXIT_USER
            res = run_ptoas(exe, output, os.path.splitext(output)[0] + ".cpp", arch, pto_level, ptoas_timeout)
            reporter.emit(res.diagnostics, art.pto)
            if not res.ok:
                return EXIT_USER
        return EXIT_OK

    sys.exit(_run_guarded(run))


def write_all_atomic(files: list[tuple[str, str]]) -> None:
    """Write several files all-or-nothing: every temp file is written before any is renamed."""
    import tempfile

    staged: list[tuple[str, str]] = []
    try:
        for path, text in files:
            directory = os.path.dirname(os.path.abspath(path)) or "."
            fd, tmp = tempfile.mkstemp(prefix=".ptoc-", suffix=".tmp", dir=directory)
            staged.append((tmp, path))
            with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
                fh.write(text)
            if os.path.exists(path):
                os.chmod(tmp, os.stat(path).st_mode & 0o7777)
            else:
                os.chmod(tmp, 0o644)
        for tmp, path in staged:
            os.replace(tmp, path)
    except BaseException:
        for tmp, _ in staged:
            try:
                os.unlink(tmp)
            except OSError:
                pass
        raise


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
        from ptoc.reference.packers import pack_file

        try:
            res = pack_file(input_path, output, layout, dtype_name)
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
        from ptoc.reference.packers import unpack_file

        try:
            res = unpack_file(input_path, output, layout, dtype_name, shape)
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
        except ValueError:
            raise click.BadParameter(f"{item!r}: {value!r} is not a number", param_hint=what) from None
    return out


def _number(v: str):
    try:
        return int(v)
    except ValueError:
        return float(v)


def _validate(file, text, ctx, seed, dims, scalars, reporter) -> int:
    from ptoc.diagnostics import CompileError
    from ptoc.driver import frontend
    from ptoc.reference.validate import format_table, validate_program

    d = _name_values(dims, "--dim", int)
    sc = _name_values(scalars, "--scalar", _number)
    try:
        prog = frontend(text, file, ctx)
        reports = validate_program(prog, ctx, seed=seed, dims=d, scalars=sc)
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
              help="Where to write <param>.npy for every tensor the kernel writes.")
@arch_option
@diagnostics_option
def run(file, inputs, dims, fn_name, stage, pto_path, output_dir, arch, diag_fmt) -> None:
    """Execute a kernel of FILE on the numeric reference and write its outputs as .npy.

    \b
    ptoc run kernel.ir --input x=x.npy --input w=w.npy --output-dir out/
    ptoc run kernel.ir --input x=x.npy --stage frontend          # the IR as written
    ptoc run kernel.ir --input x=x.npy --pto kernel.pto          # the emitted .pto
    Inputs are logical arrays; NZ tensors are packed by ptoc. Out parameters without an input start as zeros.
    """
    names = _pass_names()
    if stage is not None and stage != "frontend" and stage not in names:
        raise click.BadParameter(f"unknown pass {stage!r}; use frontend or one of: {', '.join(names)}",
                                 param_hint="--stage")
    if stage is not None and pto_path is not None:
        raise click.UsageError("--stage and --pto cannot be used together")

    def run_() -> int:
        import numpy as np

        from ptoc.context import CompileContext
        from ptoc.diagnostics import CompileError, Diagnostic, Span
        from ptoc.driver import frontend, lower

        reporter = Reporter(diag_fmt)
        text = _read_source(file, reporter)
        if text is None:
            return EXIT_USER
        ctx = CompileContext(arch=arch, ptoas_version=_pinned())
        values: dict = {}
        for item in inputs:
            name, sep, value = item.partition("=")
            if not sep:
                raise click.BadParameter(f"{item!r}: write NAME=FILE.npy or NAME=NUMBER", param_hint="--input")
            try:
                values[name] = np.load(value, allow_pickle=False) if value.endswith(".npy") else _number(value)
            except (OSError, ValueError) as e:
                reporter.emit([Diagnostic("PTOC-E0506", f"--input {name}: cannot read {value}: {e}",
                                          Span(value, 0, 0, 0, 0))], None)
                return EXIT_USER
        d = _name_values(dims, "--dim", int)
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
            _infer_dims(prog, fn, values, d)
            if pto_path is not None:
                outs = _run_pto_file(pto_path, prog, fn, values, d, ctx)
            else:
                from ptoc.reference.interp import run_function

                target = prog if stage == "frontend" else lower(prog, ctx, stop_after=stage).program
                outs = run_function(target, fn_name_, {**values, **d}, ctx)
        except CompileError as e:
            reporter.emit(e.diagnostics, text)
            return EXIT_USER
        os.makedirs(output_dir, exist_ok=True)
        for name, arr in sorted(outs.items()):
            if not isinstance(arr, np.ndarray):
                arr = np.asarray(arr)
            safe = name.replace("[", "_").replace("]", "")
            path = os.path.join(output_dir, f"{safe}.npy")
            np.save(path, arr)
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


def _run_pto_file(pto_path, prog, fn, values, dims, ctx):
    from ptoc.codegen.pto import dynamic_dims
    from ptoc.diagnostics import CompileError, Diagnostic, Span
    from ptoc.driver import lower
    from ptoc.reference.pto_exec import PtoExecError, run_pto_logical
    from ptoc.reference.validate import pto_arguments

    try:
        with open(pto_path, encoding="utf-8") as fh:
            text = fh.read()
    except OSError as e:
        raise CompileError([Diagnostic("PTOC-E0004", f"cannot read {pto_path}: {e.strerror or e}",
                                       Span(pto_path, 0, 0, 0, 0))]) from None
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
@click.option("--validate", is_flag=True, help="Run every kernel at the front end, after every pass and as "
              "emitted .pto on the same seeded random inputs; print a table and name the first stage that "
              "differs (exit 1).")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the --validate inputs.")
@click.option("--dim", "dims", multiple=True, metavar="NAME=N", help="Value of a dynamic dimension for --validate.")
@click.option("--scalar", "scalars", multiple=True, metavar="NAME=V", help="Value of a scalar parameter for "
              "--validate (default: 1 for integers, a random value for floats).")
@arch_option
@diagnostics_option
def passes(file, list_only, dump_after, dump_before, stop_after, pipeline_spec, dump_dir, timings, roundtrip_check,
           validate, seed, dims, scalars, arch, diag_fmt) -> None:
    """Show the lowering pipeline, or run it on FILE and show the IR between passes.

    \b
    ptoc passes --list
    ptoc passes kernel.ir --dump-after BlockNzTensorViews
    ptoc passes kernel.ir --dump-after all --dump-dir dumps/ --timings
    """
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
            return _validate(file, text, ctx, seed, dims, scalars, reporter)
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
            os.makedirs(dump_dir, exist_ok=True)
            for name, body in chosen:
                write_atomic(os.path.join(dump_dir, name), body)
            if res.profile is not None:
                import json

                write_atomic(os.path.join(dump_dir, "pipeline_profile.json"),
                             json.dumps(res.profile, indent=2, sort_keys=True) + "\n")
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

    PATTERN filters by substring (e.g. `ptoc ops tile.` or `ptoc ops gather`).
    """

    def run() -> int:
        from ptoc.ops.registry import REGISTRY, SHORT, load_all, signature

        load_all()
        for name in sorted(REGISTRY):
            if pattern and pattern not in name:
                continue
            op = REGISTRY[name]
            click.echo(f"{name:28} {op.unit:7} {signature(op)}")
            if op.summary:
                click.echo(f"{'':37}{op.summary}")
        shorts = [s for s in sorted(SHORT) if not pattern or pattern in s]
        if shorts:
            click.echo("\nshort names (resolved by argument kind):")
            for s in shorts:
                targets = ", ".join(f"{k}: {v}" for k, v in sorted(SHORT[s].items()))
                click.echo(f"  pl.{s:24} {targets}")
        return EXIT_OK

    sys.exit(_run_guarded(run))


def write_atomic(path: str, text: str) -> None:
    """Write `text` to `path` through a temp file and a rename: all or nothing."""
    write_all_atomic([(path, text)])


def main() -> None:
    cli(prog_name="ptoc")


if __name__ == "__main__":  # pragma: no cover
    main()
