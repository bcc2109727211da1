"""`ptoc passes`: the pipeline, dumps, chosen pipelines and per-pass validation."""

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
    _need_reference,
    _pass_names,
    _pinned,
    _read_source,
    _run_guarded,
    _simulator,
    arch_option,
    cli,
    diagnostics_option,
    sim_options,
)
from ptoc.commands.run import _validate


@cli.command()
@click.argument("file", required=False, type=click.Path(dir_okay=False))
@click.option("--list", "list_only", is_flag=True, help="Print the pipeline: index, stage, pass, purpose; with "
              "FILE, whether each pass runs on it or is skipped (its products already there) and why.")
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
    ptoc passes --list after_AllocateMemoryAddr.py   # which passes a dump still needs
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

        if list_only and file is None:
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
        if list_only:
            return _list_for(file, text, ctx, chosen_passes, reporter)
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


def _list_for(file, text, ctx, chosen_passes, reporter) -> int:
    """`ptoc passes --list FILE`: the pipeline run on FILE, each pass marked `run` or `skip` (its products
    already there: FILE is IR at a later stage, ptoc's or PyPTO's), with the properties the input has."""
    from ptoc.diagnostics import CompileError
    from ptoc.driver import frontend
    from ptoc.passes.manager import Instrument, available_pipeline, input_properties, run_pipeline

    rows: dict[str, tuple[str, str]] = {}

    class Record(Instrument):
        def after_pass(self, index, p, program, seconds):
            rows[p.name] = ("run", "")

        def skipped_pass(self, index, p, program, reason):
            rows[p.name] = ("skip", reason)

    passes = chosen_passes if chosen_passes is not None else available_pipeline()
    try:
        prog = frontend(text, file, ctx)
        have = input_properties(prog, ctx)
        click.echo(f"# {file}: the input has {', '.join(sorted(have)) or 'no property'}")
        run_pipeline(prog, ctx, passes=chosen_passes, instruments=[Record()],
                     given=have if chosen_passes is not None else None)
    except CompileError as e:
        reporter.emit(e.diagnostics, text)
        for i, cls in enumerate(passes, start=1):
            what, why = rows.get(cls.name, ("stop", "not reached: the error above"))
            click.echo(f"{i:2d}  {cls.stage:7} {cls.name:26} {what:4}  {why}".rstrip())
        return EXIT_USER
    for i, cls in enumerate(passes, start=1):
        what, why = rows[cls.name]
        if not why and chosen_passes is not None:
            why = "chosen with --pipeline"
        elif not why and not cls.produces:
            why = f"produces no property, always runs: {cls.summary}"
        elif not why:
            lacks = sorted(cls.produces - have)
            why = ("the input lacks " + ", ".join(repr(x) for x in lacks)) if lacks else \
                "an earlier pass changed the IR, which now lacks " + ", ".join(repr(x) for x in sorted(cls.produces))
        click.echo(f"{i:2d}  {cls.stage:7} {cls.name:26} {what:4}  {why}".rstrip())
    return EXIT_OK
