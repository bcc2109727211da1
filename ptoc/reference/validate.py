"""Per-pass validation: run a kernel at every pipeline stage and the emitted .pto on the same seeded
inputs, and name the first stage whose results differ from the front end's.

Data movement and integer math must agree bit for bit; float results within a tolerance that fits the
output dtype (FP32: rtol 1e-5; FP16/BF16 and narrower: rtol 1e-2).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ptoc.context import CompileContext
from ptoc.diagnostics import CompileError, Diagnostic
from ptoc.ir import dtypes
from ptoc.ir.nodes import Call, ConstInt, Function, Program, ReturnStmt, ScalarType, TensorType, Var
from ptoc.ir.visitor import walk
from ptoc.ir.nodes import KERNEL_TYPES



@dataclass
class StageResult:
    stage: str
    ok: bool
    detail: str = ""
    ran: bool = True  # False: the stage could not be run (the detail says why); not a failure


def _launches_group(program: Program, fn: Function) -> bool:
    """`fn` is, or (directly or through other functions) calls, a Group launch."""
    seen: set[str] = set()
    todo = [fn.name]
    while todo:
        f = program.function(todo.pop())
        if f is None or f.name in seen:
            continue
        seen.add(f.name)
        if f.func_type == "Group":
            return True
        todo.extend(n.op for n in walk(f) if isinstance(n, Call) and n.kind == "func")
    return False


@dataclass
class KernelReport:
    kernel: str
    rows: list[StageResult] = field(default_factory=list)
    label: str = "kernel"  # "program" for a whole program run from its entry function

    @property
    def first_failure(self) -> StageResult | None:
        return next((r for r in self.rows if not r.ok), None)


def kernels(program: Program) -> list[Function]:
    return [f for f in program.functions if f.func_type in KERNEL_TYPES]


def entries(program: Program) -> list[Function]:
    """The whole programs to validate: each function, not a kernel and called by no other, whose body
    holds a `pl.at(level=CORE_GROUP)` scope (or an spmd scope doing the per-block work inline) or calls a
    kernel. Validation runs it at every stage (the scopes inline before OutlineIncoreScopes, the kernels it
    calls after) and, last, with every kernel call executing the kernel's emitted .pto."""
    from ptoc.ir.visitor import walk
    from ptoc.passes.common import is_incore_scope
    from ptoc.passes.OutlineIncoreScopes import is_inline_spmd_scope

    kernel_names = {f.name for f in kernels(program)}
    called = {n.op for f in program.functions for n in walk(f) if isinstance(n, Call) and n.kind == "func"}
    inline = {f.name: f for f in program.functions if f.func_type == "Inline"}
    groups = {f.name for f in program.functions if f.func_type == "Group"}

    def reaches_kernel(f: Function, seen: set[str]) -> bool:
        # an Inline function's body is its caller's (InlineFunctions copies it there)
        for n in walk(f):
            if is_incore_scope(n) or is_inline_spmd_scope(n) or (
                    isinstance(n, Call) and n.kind == "func" and (n.op in kernel_names or n.op in groups)):
                return True
            if isinstance(n, Call) and n.kind == "func" and n.op in inline and n.op not in seen:
                seen.add(n.op)
                if reaches_kernel(inline[n.op], seen):
                    return True
        return False

    return [f for f in program.functions if f.func_type not in KERNEL_TYPES and f.name not in inline
            and f.name not in called and reaches_kernel(f, set())]


def _eval_dim(e, dims: dict[str, int]) -> int:
    if isinstance(e, ConstInt):
        return e.value
    if isinstance(e, Var) and e.name in dims:
        return dims[e.name]
    from ptoc.analysis.arith import eval_int

    return int(eval_int(e, dims))


def dim_symbols(program: Program, fn: Function) -> list[str]:
    from ptoc.ir.verifier import iter_type_exprs
    from ptoc.ir.visitor import walk

    params = {p.name for p in fn.params}
    out: list[str] = []
    for p in fn.params:
        for e in iter_type_exprs(p.type):
            for n in walk(e):
                if isinstance(n, Var) and n.name not in params and n.name not in out:
                    out.append(n.name)
    return out


def random_inputs(program: Program, fn: Function, seed: int, dims: dict[str, int],
                  scalars: dict[str, float] | None = None) -> dict[str, object]:
    """Seeded inputs for every parameter of `fn` (tensors logical, in their dtype). Out parameters get
    random initial contents too, so a partial store compares equal only if it writes the same window."""
    rng = np.random.default_rng(seed)
    scalars = scalars or {}
    used = set(dim_symbols(program, fn))
    out: dict[str, object] = {k: v for k, v in dims.items() if k in used}
    for p in fn.params:
        t = p.type
        if isinstance(t, TensorType):
            shape = tuple(_eval_dim(d, dims) for d in t.shape)
            out[p.name] = _random_array(rng, shape, t.dtype)
        elif isinstance(t, ScalarType):
            if p.name in scalars:
                out[p.name] = scalars[p.name]
            elif t.dtype.is_float:
                out[p.name] = float(np.float16(rng.uniform(0.5, 2.0)))
            else:
                out[p.name] = 1
    return out


def _random_array(rng, shape, dt: dtypes.DType) -> np.ndarray:
    npd = dtypes.numpy_dtype(dt)
    if npd is None:
        raise CompileError([Diagnostic("PTOC-E0501", f"the reference has no numeric model of {dt.name}", None)])
    if dt.is_packed_fp4:
        return rng.integers(0, 256, size=shape, dtype=np.uint8)
    if dt.is_float:
        return rng.standard_normal(shape).astype(np.float32).astype(npd)
    if dt.kind == "bool":
        return rng.integers(0, 2, size=shape).astype(bool)
    info = np.iinfo(npd)
    lo, hi = max(int(info.min), -100), min(int(info.max), 100)
    return rng.integers(lo, hi + 1, size=shape).astype(npd)


def _tolerance(fn: Function) -> tuple[float, float]:
    narrow = any(isinstance(p.type, TensorType) and p.type.dtype.is_float and p.type.dtype.bits < 32
                 for p in fn.params)
    return (1e-2, 1e-2) if narrow else (1e-5, 1e-6)


def _pto_layout(t: TensorType) -> str:
    return "NZ" if t.layout == "NZ" else ("DN" if t.layout == "DN" else "ND")


SIM_STAGE = "simulator (PTOAS + pto-isa)"


def validate_program(program: Program, ctx: CompileContext, seed: int = 0, dims: dict[str, int] | None = None,
                     scalars: dict[str, float] | None = None, broken_pass=None, simulator=None,
                     progress=None) -> list[KernelReport]:
    """Run every kernel at the front end, after every pass and as emitted .pto; compare with the front end.
    `simulator`: a `ptoc.reference.sim.Simulator`; adds a last row, the emitted .pto assembled by PTOAS and
    run on pto-isa's CPU simulator. `progress`: a `ptoc.progress.Progress`, told the number of runs and
    each one done.
    `broken_pass`: (test hook) a pass class to insert into the pipeline after BlockNzTensorViews."""
    from ptoc.driver import check_assembler_version
    from ptoc.passes.manager import PIPELINE, available_pipeline, run_pipeline
    from ptoc.reference.interp import compare_outputs, run_function

    dims = dict(dims or {})
    passes = available_pipeline()
    if broken_pass is not None:
        idx = [n for _, n in PIPELINE].index("BlockNzTensorViews") + 1
        passes = passes[:idx] + [broken_pass] + passes[idx:]
    check_assembler_version(program, ctx)
    snap = _snapshots()
    run_pipeline(program, ctx, passes=passes, instruments=[snap])
    stages: list[tuple[str, Program]] = [("frontend", program)] + snap.stages
    reports = []
    # a kernel a Group launches runs with its peer, through the program that calls the Group
    grouped = {n.op for f in program.functions if f.func_type == "Group" for n in walk(f)
               if isinstance(n, Call) and n.kind == "func"}
    functions = [f for f in kernels(program) if f.name not in grouped] + entries(program)
    step = progress.advance if progress is not None else (lambda label=None: None)
    if progress is not None:  # per function: every stage, the emitted .pto, the simulator
        progress.set_total(len(functions) * (len(stages) + 1 + (simulator is not None)))
    for fn in functions:
        missing = [d for d in dim_symbols(program, fn) if d not in dims]
        if missing:
            raise CompileError([Diagnostic(
                "PTOC-E0505", f"{fn.name} has dynamic dimension(s) {', '.join(missing)}: give each a value",
                fn.span, hint="e.g. --dim " + " --dim ".join(f"{m}=64" for m in missing))])
        inputs = random_inputs(program, fn, seed, dims, scalars)
        rtol, atol = _tolerance(fn)
        kernel = fn.func_type in KERNEL_TYPES
        rep = KernelReport(fn.name, label="kernel" if kernel else "program")
        reference = run_function(program, fn.name, inputs, ctx)
        rep.rows.append(StageResult("frontend", True, "reference"))
        step(f"validating {fn.name}")
        for name, p in stages[1:]:
            step()
            if p.function(fn.name) is None:
                rep.rows.append(StageResult(name, False, "the kernel disappeared"))
                continue
            wrong = layout_problems(fn, p.function(fn.name), dims) if kernel else []
            if wrong:
                rep.rows.append(StageResult(name, False, "; ".join(wrong[:3])))
                continue
            try:
                got = run_function(p, fn.name, _adapt_inputs(p.function(fn.name), inputs, dims), ctx)
                got = _merged_outputs(got, fn, p.function(fn.name), p)
                diffs = compare_outputs(reference, _returns_matched(reference, got, p.function(fn.name), rtol, atol),
                                        rtol=rtol, atol=atol)
                rep.rows.append(StageResult(name, not diffs, "; ".join(diffs[:3])))
            except CompileError as e:
                rep.rows.append(StageResult(name, False, "; ".join(d.message for d in e.diagnostics[:2])))
        step(f"validating {fn.name}: emitted .pto")
        if not kernel or simulator is not None and _launches_group(stages[-1][1], fn):
            # a whole program, or a kernel split into a Group: on the simulator, the kernels of a Group
            # launch run together in one process (`Simulator.run_group`)
            rep.rows.append(_run_emitted(stages[-1][1], fn, inputs, dims, reference, ctx, rtol, atol) if kernel
                            else _run_emitted_program(stages[-1][1], fn, inputs, dims, reference, ctx, rtol, atol))
            if simulator is not None:
                step(f"validating {fn.name}: simulator")
                rep.rows.append(_run_emitted_program(stages[-1][1], fn, inputs, dims, reference, ctx, rtol, atol,
                                                     simulator))
            reports.append(rep)
            continue
        rep.rows.append(_run_emitted(stages[-1][1], fn, inputs, dims, reference, ctx, rtol, atol))
        if simulator is not None:
            step(f"validating {fn.name}: simulator")
            rep.rows.append(_run_simulated(simulator, stages[-1][1], fn, inputs, dims, reference, ctx, rtol, atol))
        reports.append(rep)
    return reports


def _merged_outputs(got, logical_fn: Function, stage_fn: Function, stage: Program):
    """`got` with an entry for each Out parameter of the front end's kernel that a later stage merged into
    another parameter (OptimizeOrchTensors: an accumulator's Out parameter becomes its In parameter, now
    InOut): the parameter the same returned value is at that stage, under the front end's name."""
    from ptoc.analysis.outline import trace_to_param

    names = {q.name for q in stage_fn.params}
    gone = [q.name for q in logical_fn.params if q.direction != "In" and q.name not in names]
    if not gone:
        return got

    def roots(f: Function, program) -> list:
        ret = next((s for s in reversed(f.body) if isinstance(s, ReturnStmt)), None)
        return [trace_to_param(v.name, f.body, [q.name for q in f.params], program) if isinstance(v, Var)
                else None for v in (ret.values if ret is not None else ())]

    before, after = roots(logical_fn, None), roots(stage_fn, stage)
    out = type(got)(got)
    out.unwritten = getattr(got, "unwritten", frozenset())
    for name in gone:
        if name in before and before.index(name) < len(after):
            now = after[before.index(name)]
            if now is not None and now in got:
                out[name] = got[now]
    return out


def _returns_matched(reference, got, stage_fn: Function, rtol: float, atol: float):
    """`got` with its returned values put in the reference's order when `stage_fn` returns only parameters
    and some are out of that order: NormalizeReturnOrder makes a kernel return its output parameters in
    parameter order, so a returned value may sit at another position than at the front end. Each of the
    reference's returned values is paired with a returned value of `got` that agrees with it, if any;
    the others stay where they are (and differ)."""
    from ptoc.reference.interp import compare_outputs

    ret = next((s for s in reversed(stage_fn.body) if isinstance(s, ReturnStmt)), None)
    names = {q.name for q in stage_fn.params}
    keys = [k for k in got if k.startswith("return[")]
    if ret is None or len(keys) < 2 or not all(isinstance(v, Var) and v.name in names for v in ret.values) \
            or not compare_outputs({k: reference[k] for k in keys if k in reference},
                                   {k: got[k] for k in keys}, rtol=rtol, atol=atol):
        return got
    out = type(got)(got)
    out.unwritten = getattr(got, "unwritten", frozenset())
    free = list(keys)
    for k in keys:
        if k not in reference:
            continue
        m = next((j for j in free if not compare_outputs({k: reference[k]}, {k: got[j]}, rtol=rtol, atol=atol)),
                 None)
        if m is not None:
            free.remove(m)
            out[k] = got[m]
    return out


def layout_problems(logical_fn: Function, stage_fn: Function, dims: dict) -> list[str]:
    """How the tensor parameters of a later stage's kernel disagree with the reference's own packing of
    the front end's logical tensors (`ptoc.reference.packers`, which computes c0 from the element size):
    a blocked NZ shape that is not the blocking of the logical shape, or strides a pass made explicit
    that are not the packed strides of the layout. The interpreter runs a stage on the layout its types
    describe, so a wrong stride or c0 would agree with itself there; this check names the stage that
    made it. Parameters the front end does not have, and strides the front end declared, are the
    stage's own business."""
    from ptoc.reference.packers import blocked_shape, packed_strides

    logical = {p.name: p.type for p in logical_fn.params if isinstance(p.type, TensorType)}
    blocked = stage_fn.has_attr("nz_tensor_views_blocked")
    out: list[str] = []
    for p in stage_fn.params:
        lt, st = logical.get(p.name), p.type
        if lt is None or not isinstance(st, TensorType):
            continue
        lshape = tuple(_eval_dim(d, dims) for d in lt.shape)
        have = tuple(_eval_dim(d, dims) for d in st.shape)
        want = lshape
        if blocked and lt.layout == "NZ":
            try:
                want = blocked_shape(lshape, lt.dtype.name, "NZ")
            except ValueError as e:
                out.append(f"parameter {p.name}: the reference cannot block it: {e}")
                continue
        if have != want:
            what = "blocked NZ shape" if want != lshape else "shape"
            out.append(f"parameter {p.name}: {what} {list(have)}, the reference's packing of the logical "
                       f"{list(lshape)} {lt.dtype.name} is {list(want)}")
            continue
        declared = lt.view is not None and lt.view.stride
        if st.view is None or not st.view.stride or declared:
            continue
        strides = tuple(_eval_dim(d, dims) for d in st.view.stride)
        packed = packed_strides(want, st.layout)
        if strides != packed:
            out.append(f"parameter {p.name}: strides {list(strides)}, the packed {st.layout} strides of "
                       f"{list(want)} are {list(packed)}")
    return out


def _snapshots():
    """A pipeline instrument that keeps the program after every pass (in `.stages`)."""
    from ptoc.passes.manager import Instrument

    class Snapshots(Instrument):
        def __init__(self):
            self.stages: list[tuple[str, Program]] = []

        def after_pass(self, index, p, program, seconds):
            self.stages.append((p.name, program))

    return Snapshots()


def _adapt_inputs(fn: Function, inputs: dict, dims: dict) -> dict:
    """Inputs for a later stage: parameters a pass added (e.g. `<result>_out`) start from zeros."""
    out = {k: v for k, v in inputs.items() if fn.param(k) is not None or k in dims and k in inputs}
    for p in fn.params:
        if p.name not in out and isinstance(p.type, TensorType):
            shape = tuple(_eval_dim(d, dims) for d in p.type.shape)
            out[p.name] = np.zeros(shape, dtype=dtypes.numpy_dtype(p.type.dtype))
    return out


def pto_arguments(low_fn: Function, fn: Function, inputs: dict, dims: dict) -> tuple[dict, dict, list]:
    """The arguments of the emitted kernel `low_fn` (lowered from `fn`) for `run_pto_logical`: tensor
    param index -> (logical array, layout), index -> param name, and the scalar values in order. Tensors
    without an input (Out params, params a pass added) start as zeros of their logical shape; a missing
    scalar raises KeyError with its name."""
    logical = {p.name: p.type for p in fn.params}
    tensors: dict[int, tuple] = {}
    names: dict[int, str] = {}
    scal: list = []
    for p in low_fn.params:
        if isinstance(p.type, TensorType):
            i = len(tensors)
            lt = logical.get(p.name, p.type)
            arr = inputs.get(p.name)
            if arr is None:
                arr = np.zeros(tuple(_eval_dim(d, dims) for d in lt.shape), dtype=dtypes.numpy_dtype(p.type.dtype))
            tensors[i] = (arr, _pto_layout(p.type))
            names[i] = p.name
        elif isinstance(p.type, ScalarType):
            scal.append(inputs[p.name])
    return tensors, names, scal


def _run_emitted(lowered: Program, fn: Function, inputs: dict, dims: dict, reference, ctx, rtol, atol) -> StageResult:
    from ptoc.codegen.pto import dynamic_dims, emit_module
    from ptoc.reference.interp import compare_outputs
    from ptoc.reference.pto_exec import PtoExecError, run_pto_logical

    try:
        text, _ = emit_module(lowered, ctx)
    except CompileError as e:
        return StageResult(".pto (emitted)", False, "; ".join(d.message for d in e.diagnostics[:2]))
    low_fn = lowered.function(fn.name)
    if low_fn is not None and low_fn.func_type == "Group":
        # a split kernel: its AIC and AIV functions run as a pair (ptoc.reference.pipes)
        return _run_emitted_program(lowered, fn, inputs, dims, reference, ctx, rtol, atol)
    tensors, names, scal = pto_arguments(low_fn, fn, inputs, dims)
    dyn = [dims[d] for d in dynamic_dims(lowered, low_fn)]
    try:
        out = run_pto_logical(text, fn.name, tensors, scal, dyn)
    except PtoExecError as e:
        return StageResult(".pto (emitted)", False, str(e))
    got = {names[i]: a for i, a in out.items() if names[i] in reference}
    expected = {k: v for k, v in reference.items() if k in got}
    diffs = compare_outputs(expected, got, rtol=rtol, atol=atol)
    return StageResult(".pto (emitted)", not diffs, "; ".join(diffs[:3]))


def _run_emitted_program(lowered: Program, fn: Function, inputs: dict, dims: dict, reference, ctx, rtol,
                         atol, simulator=None) -> StageResult:
    """The whole program `fn` on the lowered IR with every kernel call executing the kernel's emitted .pto
    (in the order the orchestration calls them, on the same global memory): on ptoc's .pto executor, or
    with `simulator` on PTOAS + pto-isa's CPU simulator."""
    from ptoc.codegen.pto import emit_module
    from ptoc.reference.interp import compare_outputs
    from ptoc.reference.pto_exec import PtoExecError
    from ptoc.reference.sim import SimError

    stage = ".pto (emitted)" if simulator is None else SIM_STAGE
    try:
        text, _ = emit_module(lowered, ctx)
    except CompileError as e:
        return StageResult(stage, False, "; ".join(d.message for d in e.diagnostics[:2]))
    try:
        got, calls = run_emitted_program(lowered, text, fn.name, inputs, dims, ctx, simulator)
    except (PtoExecError, SimError) as e:
        return StageResult(stage, False, str(e))
    except CompileError as e:
        return StageResult(stage, False, "; ".join(d.message for d in e.diagnostics[:2]))
    beyond = 0
    if simulator is not None:
        got, beyond = _beyond_sim_bf16(reference, got)
    diffs = compare_outputs(reference, got, rtol=rtol, atol=atol)
    detail = "; ".join(diffs[:3]) or "; ".join(filter(None, (f"kernels run: {', '.join(calls)}",
                                                             _sim_range_note(beyond))))
    return StageResult(stage, not diffs, detail)


def run_emitted_program(lowered: Program, text: str, fn_name: str, inputs: dict, dims: dict, ctx,
                        simulator=None) -> tuple[dict, list[str]]:
    """Run function `fn_name` of the lowered program on the reference with every kernel call executing the
    kernel in the emitted .pto `text`: on ptoc's .pto executor, or with `simulator` on PTOAS + pto-isa's
    CPU simulator (a Group launch's kernels together, in one simulator process). Returns the run's
    outputs and the kernels run, in order."""
    from ptoc.reference.interp import run_function

    runner = _PtoKernelRunner(text, lowered, dims, simulator)
    got = run_function(lowered, fn_name, _adapt_inputs(lowered.function(fn_name), inputs, dims), ctx,
                       kernel_runner=runner, group_runner=runner.group if simulator is not None else None)
    return got, runner.calls


class _PtoKernelRunner:
    """A `kernel_runner` for the interpreter: runs a kernel call on the emitted .pto. Tensor arguments are
    read as logical arrays, the kernel's Out/InOut tensors written back into the caller's buffers; the
    call's value is what the kernel returns: a parameter, or the tensor a `tile.store` wrote."""

    def __init__(self, text: str, lowered: Program, dims: dict, simulator=None):
        self.text, self.lowered, self.dims, self.simulator = text, lowered, dims, simulator
        self.calls: list[str] = []

    def __call__(self, callee: Function, args: list, span, block: tuple[int, int] = (0, 1)):
        from ptoc.codegen.pto import dynamic_dims
        from ptoc.reference import pipes
        from ptoc.reference.pto_exec import run_pto_logical
        from ptoc.reference.values import _gm_write, _logical_addr, _read_logical

        tensors: dict[int, tuple] = {}
        written: dict[int, object] = {}
        scal: list = []
        by_name: dict[str, object] = {}
        for p, v in zip(callee.params, args):
            by_name[p.name] = v
            if isinstance(p.type, TensorType):
                i = len(tensors)
                tensors[i] = (_read_logical(v), _pto_layout(p.type))
                if p.direction in ("Out", "InOut"):
                    written[i] = v
            elif isinstance(p.type, ScalarType):
                scal.append(v.value)
        dyn = [self.dims[d] for d in dynamic_dims(self.lowered, callee)]
        launch = pipes.current()
        if self.simulator is None and launch is not None:
            # a member of a Group launch: it shares global memory with its peer while both run
            keys = {i: id(v) for i, v in enumerate(a for p, a in zip(callee.params, args)
                                                    if isinstance(p.type, TensorType))}
            out = run_pto_logical(self.text, callee.name, tensors, scal, dyn,
                                  shared=launch[0].__dict__.setdefault("gm", {}), keys=keys)
        elif self.simulator is None:
            kw = {"block_idx": block[0], "block_num": block[1]} if block[1] > 1 else {}
            out = run_pto_logical(self.text, callee.name, tensors, scal, dyn, **kw)
        else:  # one simulator process per block of an spmd launch, in block order, as the reference runs them
            kw = {"block_idx": block[0]} if block[1] > 1 else {}
            out = self.simulator.run(self.text, callee.name, tensors, scal, dyn, pto_path=f"{callee.name}.pto", **kw)
        for i, g in written.items():
            _gm_write(g, _logical_addr(g, np.shape(tensors[i][0])), None, out[i], "writing a kernel output")
        self.calls.append(callee.name)
        return _returned(callee, by_name)


    def group(self, group: Function, launch: list, span, block: tuple[int, int]) -> list:
        """A Group launch on the simulator: its kernels run together in one process. Arguments bound to
        the same global tensor share one buffer; the a2a3 GM pipe buffer, one element in the IR, gets the
        bytes the pipe's ring uses (`gm_pipe_buffer_bytes`), between guard pages like every buffer."""
        from ptoc.codegen.cross_core import GM_PIPE_PARAM, gm_pipe_buffer_bytes
        from ptoc.codegen.pto import dynamic_dims
        from ptoc.reference.sim import GroupMember
        from ptoc.reference.values import _gm_write, _logical_addr, _read_logical

        buffers: dict[int, tuple] = {}
        index: dict[int, int] = {}
        written: dict[int, object] = {}
        members = []
        for fn, args, lanes in launch:
            margs: list = []
            for p, v in zip(fn.params, args):
                if isinstance(p.type, TensorType):
                    k = index.setdefault(id(v), len(index))
                    if k not in buffers:
                        arr = _read_logical(v)
                        ring = gm_pipe_buffer_bytes(fn) if p.name == GM_PIPE_PARAM else 0
                        if ring:
                            arr = np.zeros(-(-ring // arr.dtype.itemsize), dtype=arr.dtype)
                        buffers[k] = (arr, _pto_layout(p.type))
                    if p.direction in ("Out", "InOut") and p.name != GM_PIPE_PARAM:
                        written[k] = v
                    margs.append(("buffer", k))
                elif isinstance(p.type, ScalarType):
                    margs.append(v.value)
            margs += [self.dims[d] for d in dynamic_dims(self.lowered, fn)]
            members.append(GroupMember(fn.name, tuple(margs), 1 if _replay_lane(fn) else lanes))
        out = self.simulator.run_group(self.text, members, buffers, pto_path=f"{group.name}.pto", block_idx=block[0])
        for k, g in written.items():
            _gm_write(g, _logical_addr(g, np.shape(buffers[k][0])), None, out[k], "writing a kernel output")
        self.calls.append(" + ".join(m.func for m in members))
        return [_returned(fn, {p.name: a for p, a in zip(fn.params, args)}) for fn, args, _ in launch]


def _replay_lane(fn: Function) -> bool:
    """An unsplit vector kernel whose lane 1 only replays the hand-shakes on empty tiles (SplitVectorKernel's
    a2a3 dual dispatch). On pto-isa's CPU simulator it runs on lane 0 alone: the simulator's a2a3 pop loads
    the whole slot (a static rows x cols GM window) and asserts that the tile's valid shape is that window,
    so lane 1's empty pop (`tpop(%c0, %c0)`, right on the device, whose pop loads the tile's valid extents)
    aborts there. The reference interpreter runs both lanes."""
    from ptoc.passes.common import runs_a_lane_replay

    return runs_a_lane_replay(fn)


def _returned(callee: Function, by_name: dict):
    """The value of a kernel call: each returned name followed back (stores, loop-carried values) to the
    parameter whose tensor it is, and that argument."""
    from ptoc.analysis.flow import tensor_aliases
    from ptoc.reference.pto_exec import PtoExecError

    alias = tensor_aliases(callee.body)
    ret = next((s.values for s in reversed(callee.body) if isinstance(s, ReturnStmt)), ())
    values = []
    for v in ret:
        name = alias.get(v.name, v.name) if isinstance(v, Var) else None
        if name not in by_name:
            raise PtoExecError(f"{callee.name} returns a value that is not one of its tensors")
        values.append(by_name[name])
    if not values:
        return None
    return values[0] if len(values) == 1 and not callee.returns_tuple else tuple(values)


def _run_simulated(simulator, lowered: Program, fn: Function, inputs: dict, dims: dict, reference, ctx, rtol,
                   atol) -> StageResult:
    from ptoc.codegen.pto import dynamic_dims, emit_module
    from ptoc.reference.interp import compare_outputs
    from ptoc.reference.sim import SimError

    try:
        text, _ = emit_module(lowered, ctx)
    except CompileError as e:
        return StageResult(SIM_STAGE, False, "; ".join(d.message for d in e.diagnostics[:2]))
    low_fn = lowered.function(fn.name)
    tensors, names, scal = pto_arguments(low_fn, fn, inputs, dims)
    dyn = [dims[d] for d in dynamic_dims(lowered, low_fn)]
    try:
        out = simulator.run(text, fn.name, tensors, scal, dyn, pto_path=f"{fn.name}.pto")
    except SimError as e:
        return StageResult(SIM_STAGE, False, str(e))
    got = {names[i]: a for i, a in out.items() if names[i] in reference}
    expected = {k: v for k, v in reference.items() if k in got}
    got, beyond = _beyond_sim_bf16(expected, got)
    diffs = compare_outputs(expected, got, rtol=rtol, atol=atol)
    if diffs:
        return StageResult(SIM_STAGE, False, "; ".join(diffs[:3]))
    notes = (error_summary(expected, got), _sim_range_note(beyond))
    return StageResult(SIM_STAGE, True, "; ".join(n for n in notes if n))


# pto-isa's CPU simulator has a real BF16 type only with C++23 <stdfloat> (libstdc++ 13 or later); elsewhere
# its bfloat16_t is a _Float16 stand-in, whose largest finite value is 65504.
SIM_BF16_LIMIT = 65504.0


def _beyond_sim_bf16(expected: dict, got: dict) -> tuple[dict, int]:
    """`got` with every BF16 element the simulator could not hold taken from `expected`: the reference's
    value lies beyond the stand-in's range and the simulator gave infinity of the same sign. Returns the
    adjusted results and how many elements were taken. Anything else out of range (a NaN, a finite wrong
    value, an infinity that spreads into in-range results) is still compared."""
    import ml_dtypes

    out, counts = dict(got), {}
    for k, a in expected.items():
        b = got.get(k)
        if b is None or np.asarray(a).dtype != ml_dtypes.bfloat16 or np.asarray(b).shape != np.shape(a):
            continue
        ea, gb = np.asarray(a).astype(np.float32), np.asarray(b).astype(np.float32)
        mask = (np.abs(ea) > SIM_BF16_LIMIT) & np.isinf(gb) & (np.sign(ea) == np.sign(gb))
        if mask.any():
            fixed = np.array(b, copy=True)
            fixed[mask] = np.asarray(a)[mask]
            out[k] = fixed
            counts[k] = int(mask.sum())
    # a returned tensor is also reported as its parameter: count the elements once
    params = [n for k, n in counts.items() if not k.startswith("return[")]
    return out, sum(params) if params else sum(counts.values())


def _sim_range_note(count: int) -> str:
    if not count:
        return ""
    return (f"{count} BF16 element(s) beyond +-{SIM_BF16_LIMIT:g} not compared: the simulator's bfloat16_t is a "
            "_Float16 stand-in (its C++ library has no C++23 <stdfloat>)")


def error_summary(expected: dict, got: dict) -> str:
    """`bit-exact`, or the largest absolute and relative differences over all outputs."""
    max_abs = max_rel = 0.0
    for k, e in expected.items():
        a = np.asarray(e)
        b = np.asarray(got[k])
        if a.dtype.kind in "biu" and b.dtype.kind in "biu":
            d = np.abs(a.astype(np.int64) - b.astype(np.int64)).astype(np.float64)
            mag = np.abs(a.astype(np.float64))
        else:
            a64, b64 = a.astype(np.float64), b.astype(np.float64)
            same = (a64 == b64) | (np.isnan(a64) & np.isnan(b64))
            d = np.where(same, 0.0, np.abs(a64 - b64))
            mag = np.abs(a64)
        if d.size:
            max_abs = max(max_abs, float(d.max()))
            with np.errstate(divide="ignore", invalid="ignore"):
                rel = np.where(d == 0, 0.0, d / np.where(mag == 0, np.inf, mag))
            max_rel = max(max_rel, float(np.nanmax(rel)))
    if max_abs == 0:
        return "bit-exact"
    return f"max abs err {max_abs:.3g}, max rel err {max_rel:.3g}"


def format_table(reports: list[KernelReport]) -> str:
    lines = []
    for rep in reports:
        lines.append(f"{rep.label} {rep.kernel}")
        lines.append(f"  {'stage':28} {'result':7} detail")
        for r in rep.rows:
            result = "NOT RUN" if not r.ran else "ok" if r.ok else "DIFFERS"
            lines.append(f"  {r.stage:28} {result:7} {r.detail}".rstrip())
        ff = rep.first_failure
        unrun = [r.stage for r in rep.rows if not r.ran]
        agree = "  every stage agrees with the front end" + (f" (not run: {', '.join(unrun)})" if unrun else "")
        lines.append(f"  first stage that differs: {ff.stage}" if ff else agree)
    return "\n".join(lines)


__all__ = ["KernelReport", "SIM_STAGE", "StageResult", "error_summary", "format_table", "layout_problems",
           "pto_arguments", "random_inputs", "validate_program"]
