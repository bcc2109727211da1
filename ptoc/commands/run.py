"""`ptoc run`, `ptoc pack`, `ptoc unpack` and the input handling `ptoc passes --validate` shares."""

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
    from ptoc.progress import Progress
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
        with Progress(0, "validating") as progress:
            reports = validate_program(prog, ctx, seed=seed, dims=d, scalars=sc, simulator=simulator,
                                       progress=progress)
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
            from ptoc.ir.nodes import KERNEL_TYPES

            prog = frontend(text, file, ctx)
            kernels_ = [f for f in prog.functions if f.func_type in KERNEL_TYPES]
            if fn_name is None:
                from ptoc.reference.validate import entries

                # the one kernel, else the one whole program (the function that calls the kernels)
                candidates = kernels_ or entries(prog)
                if len(candidates) != 1:
                    what = "kernels" if kernels_ else "whole programs (functions that call kernels)"
                    raise click.UsageError(f"{file} has {len(candidates)} {what}; choose one with --function "
                                           f"({', '.join(f.name for f in candidates) or 'none to run'})")
                fn_name_ = candidates[0].name
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
    from ptoc.ir.nodes import KERNEL_TYPES

    low = lower(prog, ctx).program
    low_fn = low.function(fn.name)
    if low_fn is None or low_fn.func_type not in KERNEL_TYPES:
        # a whole program: the reference runs it, every kernel call executing the kernel in the .pto file
        from ptoc.reference.validate import run_emitted_program

        try:
            return dict(run_emitted_program(low, text, fn.name, values, dims, ctx)[0])
        except PtoExecError as e:
            raise CompileError([Diagnostic("PTOC-E0504", f"executing {pto_path}: {e}",
                                           Span(pto_path, 0, 0, 0, 0))]) from None
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
    from ptoc.progress import Progress

    with Progress(2, f"lowering {fn.name}") as progress:  # the bar, after a second: lowering, then simulating
        return _simulate(simulator, pto_path, prog, fn, values, dims, ctx, reporter, progress)


def _simulate_program(simulator, text, shown, low, fn, values, dims, ctx, reporter, progress):
    """A whole program (or a kernel split into a Group) on the simulator: the reference runs the lowered
    program and every kernel call runs on the simulator, the kernels of a Group launch together."""
    from ptoc.diagnostics import Diagnostic, Span
    from ptoc.reference.pto_exec import PtoExecError
    from ptoc.reference.sim import SimError
    from ptoc.reference.validate import run_emitted_program

    progress.advance(f"simulating {fn.name} (PTOAS, C++ build, run)")
    try:
        out, _ = run_emitted_program(low, text, fn.name, values, dims, ctx, simulator)
    except SimError as e:
        reporter.emit(e.diagnostics or [Diagnostic(e.code, str(e), Span(shown, 0, 0, 0, 0))], text)
        return None
    except PtoExecError as e:
        reporter.emit([Diagnostic("PTOC-E0462", str(e), Span(shown, 0, 0, 0, 0))], text)
        return None
    return dict(out)


def _simulate(simulator, pto_path, prog, fn, values, dims, ctx, reporter, progress):
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
    from ptoc.ir.nodes import KERNEL_TYPES

    if low_fn is None or low_fn.func_type not in KERNEL_TYPES:
        return _simulate_program(simulator, text, shown, low, fn, values, dims, ctx, reporter, progress)
    try:
        tensors, names, scal = pto_arguments(low_fn, fn, values, dims)
    except KeyError as e:
        raise CompileError([Diagnostic("PTOC-E0506", f"scalar parameter {e.args[0]} needs --input "
                                       f"{e.args[0]}=VALUE", fn.span)]) from None
    progress.advance(f"simulating {fn.name} (PTOAS, C++ build, run)")
    try:
        out = simulator.run(text, fn.name, tensors, scal, [dims[x] for x in dynamic_dims(low, low_fn)],
                            pto_path=shown)
    except SimError as e:
        reporter.emit(e.diagnostics or [Diagnostic(e.code, str(e), Span(shown, 0, 0, 0, 0))], text)
        return None
    written = {p.name for p in fn.params if p.direction in ("Out", "InOut")}
    logical = {p.name for p in fn.params}
    return {names[i]: a for i, a in out.items() if names[i] in written or names[i] not in logical}
