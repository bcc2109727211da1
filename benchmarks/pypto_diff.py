"""ptoc and the real PyPTO side by side, program by program and pass by pass.

    python benchmarks/pypto_diff.py PYPTO_PYTHON [FILES...] [--keep DIR] [--json OUT] [--why]
    python benchmarks/pypto_diff.py PYPTO_PYTHON FILE --keep DIR --diff PASS   # what differs after PASS

PYPTO_PYTHON is the interpreter of a venv with PyPTO installed (`../shared/tools/build_pypto.sh`);
FILES default to `examples/*.ir` and `tests/corpus/raw/*.ir`. For every file it runs

- PyPTO: `pypto_compile.py FILE -o DIR --dump` (its printed form, its dumps after every pass and its
  `.pto` kernels), timed;
- ptoc: the pass pipeline in-process, printing the IR after every pass in PyPTO's form
  (`print_program(..., style="pypto")`), then `ptoc compile FILE --no-header` as a subprocess, timed;
- PyPTO's parser on every ptoc dump (one PyPTO process for all of a file's dumps).

The dumps after a pass both compilers have (same name) are compared after normalisation: both texts
are parsed as Python and printed back by `ast.unparse` (layout and line wrapping drop out), the
annotations of assignments are dropped (PyPTO annotates every value; ptoc keeps the ones written),
`pl.tile.alloc` statements and the `pl.MemRef`s in types are dropped (the buffers, their addresses
and the placement of allocations are planned differently), the class is unnamed, the functions are
numbered in order of definition and every other identifier is renamed in order of first appearance
within its function. A pass PyPTO runs twice (Simplify) is compared as `Simplify` (its first run) and
`Simplify#2`; PyPTO's `InjectGMPipeBuffer` is ptoc's `InjectGmPipeBuffer`. `.pto` kernels are compared
after renaming every `%value` in order of first appearance, sorting the `arith.constant` lines
and dropping `addr = ...`.

The table: one row per file with what happened (both accept / which side rejects), how many shared
passes give equal dumps and the first one whose dumps differ, whether the `.pto` kernels are equal, how many ptoc dumps
PyPTO's parser rejected, "their dumps": how many of PyPTO's dumps ptoc compiles (IR at any stage as input)
and how many of those give kernels with exactly the alloc_tile addresses of PyPTO's `.pto`, and the two
compile times. This is a measurement: it asserts nothing.
"""

from __future__ import annotations

import argparse
import ast
import glob
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TOOLS = Path(os.environ.get("PTOC_SHARED_TOOLS", ROOT.parent / "shared" / "tools"))  # ../shared beside the checkout
PYPTO_COMPILE = Path(os.environ.get("PTOC_PYPTO_COMPILE", TOOLS / "pypto_compile.py"))

# Run by PyPTO's interpreter: parse every file named on the command line, print one JSON line each.
PARSE_SCRIPT = """
import json, sys
import pypto.language as pl
for path in sys.argv[1:]:
    try:
        pl.parse(open(path).read(), filename=path)
        print(json.dumps({"file": path, "ok": True}))
    except Exception as e:
        print(json.dumps({"file": path, "ok": False, "error": f"{type(e).__name__}: {e}"[:400]}))
"""


# --------------------------------------------------------------------------------------------------
# ptoc in-process
# --------------------------------------------------------------------------------------------------


def ptoc_dumps(path: Path) -> tuple[dict[str, str], str | None]:
    """(pass name -> ptoc's IR after it in PyPTO's printed form, error) for one file; "" names the
    front end's output."""
    from ptoc.context import CompileContext
    from ptoc.diagnostics import CompileError
    from ptoc.driver import frontend
    from ptoc.ir.printer import print_program
    from ptoc.passes.manager import Instrument, run_pipeline

    dumps: dict[str, str] = {}

    class Collect(Instrument):
        def after_pass(self, index, p, program, seconds):
            dumps[_nth(p.name, dumps)] = print_program(program, style="pypto")

    ctx = CompileContext()
    try:
        program = frontend(path.read_text(), str(path), ctx)
        dumps[""] = print_program(program, style="pypto")
        run_pipeline(program, ctx, instruments=[Collect()])
    except CompileError as e:
        return dumps, str(e).splitlines()[0][:200]
    return dumps, None


def ptoc_compile(path: Path, out: Path) -> tuple[bool, float, str]:
    exe = Path(sys.executable).with_name("ptoc")
    cmd = [str(exe if exe.exists() else "ptoc"), "compile", str(path), "-o", str(out), "--no-header"]
    t = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True)
    return r.returncode == 0, time.perf_counter() - t, (r.stderr.strip().splitlines() or [""])[0][:200]


# --------------------------------------------------------------------------------------------------
# PyPTO
# --------------------------------------------------------------------------------------------------


def pypto_compile(pypto: str, path: Path, out: Path) -> tuple[bool, float, str]:
    t = time.perf_counter()
    r = subprocess.run([pypto, str(PYPTO_COMPILE), str(path), "-o", str(out), "--dump"], capture_output=True,
                       text=True)
    return r.returncode == 0, time.perf_counter() - t, (r.stderr.strip().splitlines() or [""])[-1][:200]


def pypto_parse(pypto: str, files: list[Path]) -> dict[str, str | None]:
    """file -> None when PyPTO's parser accepts it, else its message."""
    if not files:
        return {}
    r = subprocess.run([pypto, "-c", PARSE_SCRIPT, *map(str, files)], capture_output=True, text=True)
    out: dict[str, str | None] = {str(f): f"PyPTO did not answer: {r.stderr.strip()[-200:]}" for f in files}
    for line in r.stdout.splitlines():
        if line.startswith("{"):
            d = json.loads(line)
            out[d["file"]] = None if d["ok"] else d["error"]
    return out


def pypto_dumps(out: Path) -> dict[str, str]:
    """pass name -> PyPTO's dump after it (`passes_dump/NN_after_<Pass>.py`)."""
    dumps: dict[str, str] = {}
    for f in sorted(out.glob("**/passes_dump/*_after_*.py")):
        name = f.stem.split("_after_", 1)[1]
        dumps[_nth(SPELLED.get(name, name), dumps)] = f.read_text()
    return dumps


# PyPTO's pass names that ptoc spells differently
SPELLED = {"InjectGMPipeBuffer": "InjectGmPipeBuffer"}


def _nth(name: str, seen: dict) -> str:
    """A pass's key among the dumps: its name the first time it runs, `Name#2` the second time (PyPTO runs
    Simplify twice: after ConvertToSSA and again after MaterializeDistTensorCtx), and so on."""
    key, k = name, 1
    while key in seen:
        k += 1
        key = f"{name}#{k}"
    return key


def pto_kernels(out: Path) -> dict[str, str]:
    """function name -> the `func.func` text of every kernel in the `.pto` files under `out`."""
    funcs: dict[str, str] = {}
    for f in sorted(out.glob("**/*.pto")):
        funcs.update(pto_functions(f.read_text()))
    return funcs


def pto_functions(text: str) -> dict[str, str]:
    """function name -> the text of each `func.func` of a `.pto` text, from its name to its closing brace
    (excluded). The brace is found by counting braces: PyPTO writes the regions of an `scf.while` or
    `scf.if` at the function's own indentation, so no line of the text marks a function's end."""
    funcs: dict[str, str] = {}
    for m in re.finditer(r"func\.func @(\w+)", text):
        body = re.compile(r"\{[ \t]*\n").search(text, m.end())  # the brace ending the signature's line
        if body is None:
            continue
        depth, k = 1, body.end()
        while k < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[k], 0)
            k += 1
        funcs[m.group(1)] = text[m.end():k - 1].rstrip()
    return funcs


# --------------------------------------------------------------------------------------------------
# Normalisation
# --------------------------------------------------------------------------------------------------


class _Normalise(ast.NodeTransformer):
    """Function names are numbered over the program (`f0`, `f1`, ... in order of definition), every other
    name within its function (`v0`, `v1`, ...): the two compilers pick local names independently per
    function."""

    def __init__(self, tree: ast.AST):
        self.funcs = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef):
                self.funcs.setdefault(node.name, f"f{len(self.funcs)}")
        self.names: dict[str, str] = {}

    def _name(self, n: str) -> str:
        if n in ("self", "pl", "True", "False", "None", "tuple", "range"):
            return n
        return self.names.setdefault(n, f"v{len(self.names)}")

    def visit_Name(self, node):
        node.id = self._name(node.id)
        return node

    def visit_arg(self, node):
        node.arg = self._name(node.arg)
        self.generic_visit(node)
        return node

    def visit_FunctionDef(self, node):
        node.name = self.funcs[node.name]
        self.names = {}
        self.generic_visit(node)
        return node

    def visit_ClassDef(self, node):
        node.name = "Program"
        self.generic_visit(node)
        return node

    def visit_Attribute(self, node):  # `self.kernel` calls a function: rename it like its def
        self.generic_visit(node)
        if isinstance(node.value, ast.Name) and node.value.id == "self":
            node.attr = self.funcs.get(node.attr, node.attr)
        return node

    def visit_AnnAssign(self, node):
        if _is_alloc(node.value):
            return None
        node = ast.Assign(targets=[node.target], value=node.value, lineno=node.lineno)
        self.generic_visit(node)
        return node

    def visit_Assign(self, node):
        if _is_alloc(node.value):
            return None
        self.generic_visit(node)
        return node

    def visit_Subscript(self, node):  # MemRefs name buffers planned differently: drop them from types
        if isinstance(node.slice, ast.Tuple):
            node.slice.elts = [e for e in node.slice.elts if not _is_call_of(e, "MemRef")]
        self.generic_visit(node)
        return node


def _is_call_of(e, attr: str) -> bool:
    return isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) and e.func.attr == attr


def _is_alloc(v) -> bool:
    return (isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute) and v.func.attr == "alloc"
            and isinstance(v.func.value, ast.Attribute) and v.func.value.attr == "tile")


def normalise_ir(text: str) -> str:
    tree = ast.parse(text)
    tree = ast.fix_missing_locations(_Normalise(tree).visit(tree))
    return ast.unparse(tree)


def normalise_pto(text: str) -> str:
    uses = re.findall(r"addr\s*=\s*(%[\w.]+)", text)
    addr_only = {n for n in uses if len(re.findall(re.escape(n) + r"\b", text)) == 2}  # defined, used as addr
    text = "\n".join(ln for ln in text.splitlines() if not any(ln.strip().startswith(n + " =") for n in addr_only))
    names: dict[str, str] = {}
    text = re.sub(r"%[\w.]+", lambda m: names.setdefault(m.group(0), f"%v{len(names)}"), text)
    text = re.sub(r",?\s*addr\s*=\s*%v\d+", "", text)
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    consts = sorted(re.sub(r"^%v\d+ = ", "", ln) for ln in lines if "arith.constant" in ln)
    rest = [ln for ln in lines if "arith.constant" not in ln]
    return "\n".join(consts + rest)


# --------------------------------------------------------------------------------------------------
# The comparison
# --------------------------------------------------------------------------------------------------


def compare(pypto: str, path: Path, work: Path) -> dict:
    row: dict = {"file": str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)}
    p_out, c_out = work / "pypto", work / "ptoc"
    c_out.mkdir(parents=True, exist_ok=True)
    p_ok, row["pypto_s"], p_err = pypto_compile(pypto, path, p_out)
    c_ok, row["ptoc_s"], c_err = ptoc_compile(path, c_out / "kernel.pto")
    dumps, dump_err = ptoc_dumps(path)
    if not p_ok or not c_ok:
        row["status"] = "both reject" if not (p_ok or c_ok) else "pypto rejects" if not p_ok else "ptoc rejects"
        row["why"] = p_err if not p_ok else c_err
    else:
        row["status"] = "both accept"
    # every ptoc dump through PyPTO's parser
    files = []
    for name, text in dumps.items():
        f = c_out / f"after_{name or 'frontend'}.py"
        f.write_text(text)
        files.append(f)
    parsed = pypto_parse(pypto, files)
    rejected = {Path(f).stem: e for f, e in parsed.items() if e is not None}
    row["dumps"] = len(files)
    row["dumps_rejected"] = rejected
    if row["status"] != "both accept":
        return row
    theirs = pypto_dumps(p_out)
    shared = [n for n in dumps if n and n in theirs]
    row["shared_passes"] = shared
    row["first_diff"] = None
    row["equal_passes"] = []
    for name in shared:
        try:
            same = normalise_ir(dumps[name]) == normalise_ir(theirs[name])
        except SyntaxError as e:
            same, name = False, f"{name} (unparsable: {e.msg})"
        if same:
            row["equal_passes"].append(name)
        elif row["first_diff"] is None:
            row["first_diff"] = name
    row["their_dumps"] = their_dumps_compiled(p_out)
    pk, ck = pto_kernels(p_out), pto_kernels(c_out)
    row["pto"] = "equal" if pk and {k: normalise_pto(v) for k, v in pk.items()} == {
        k: normalise_pto(v) for k, v in ck.items()} else f"differs ({len(pk)} vs {len(ck)} kernels)"
    return row


def alloc_addresses(pto_text: str) -> list[int]:
    """The distinct `pto.alloc_tile` addresses of a `.pto` text, sorted."""
    consts = dict(re.findall(r"(%\w+) = arith.constant (\d+) : i64", pto_text))
    return sorted({int(consts[a]) for a in re.findall(r"pto\.alloc_tile addr = (%\w+)", pto_text) if a in consts})


def their_dumps_compiled(p_out: Path) -> dict:
    """ptoc on each of PyPTO's dumps (IR at any stage): how many compile, and how many of those give a
    kernel with the addresses of PyPTO's own `.pto` (per kernel, the set of alloc_tile addresses)."""
    from ptoc.context import CompileContext
    from ptoc.diagnostics import CompileError, InternalError
    from ptoc.driver import compile_program, frontend

    theirs = {k: alloc_addresses(v) for k, v in pto_kernels(p_out).items()}
    files = sorted(p_out.glob("**/passes_dump/*.py"))
    out = {"dumps": len(files), "compiled": 0, "same_addresses": 0, "first_same": None, "internal_errors": []}
    for f in files:
        ctx = CompileContext()
        try:
            pto = compile_program(frontend(f.read_text(), str(f), ctx), ctx, "kernel.ir").pto
        except CompileError:
            continue
        except InternalError as e:  # a ptoc bug: listed, so the table still comes out
            out["internal_errors"].append(f"{f.name}: {e}")
            continue
        out["compiled"] += 1
        ours = {k: alloc_addresses(v) for k, v in pto_functions(pto).items()}
        if ours == theirs:
            out["same_addresses"] += 1
            out["first_same"] = out["first_same"] or f.stem
    return out


def table(rows: list[dict]) -> str:
    head = (f"{'file':42} {'status':14} {'passes':34} {'pto':20} {'dumps rej.':>10} {'their dumps':>12} "
            f"{'pypto s':>8} {'ptoc s':>7}")
    out = [head, "-" * len(head)]
    for r in rows:
        if r["status"] == "both accept":
            n_eq, n = len(r["equal_passes"]), len(r["shared_passes"])
            passes = f"equal ({n})" if r["first_diff"] is None else f"{n_eq}/{n} eq, 1st: {r['first_diff']}"
            pto = r["pto"]
        else:
            passes, pto = "-", "-"
        rej = f"{len(r['dumps_rejected'])}/{r['dumps']}"
        t = r.get("their_dumps")
        theirs = f"{t['compiled']}/{t['dumps']}, {t['same_addresses']}" if t else "-"
        out.append(f"{r['file'][-42:]:42} {r['status']:14} {passes[:34]:34} {pto[:20]:20} {rej:>10} {theirs:>12} "
                   f"{r['pypto_s']:8.2f} {r['ptoc_s']:7.2f}")
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("pypto_python")
    ap.add_argument("files", nargs="*")
    ap.add_argument("--keep", metavar="DIR", help="keep both compilers' outputs under DIR")
    ap.add_argument("--json", metavar="OUT", help="write the rows as JSON")
    ap.add_argument("--why", action="store_true", help="list the rejections and rejected dumps")
    ap.add_argument("--diff", metavar="PASS", help="with one FILE: print the normalised diff of the dumps after PASS")
    a = ap.parse_args(argv)
    files = [Path(f).resolve() for f in a.files] or sorted(
        Path(f) for f in glob.glob(str(ROOT / "examples" / "*.ir")) + glob.glob(str(ROOT / "tests/corpus/raw/*.ir")))
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(a.keep) if a.keep else Path(tmp)
        for i, f in enumerate(files):
            rows.append(compare(a.pypto_python, f, base / f"{i:02d}_{f.stem}"))
    print(table(rows))
    for r in rows:
        for e in (r.get("their_dumps") or {}).get("internal_errors", []):
            print(f"ptoc internal error on PyPTO's dump of {r['file']}: {e}")
    if a.diff and a.keep and len(files) == 1:
        import difflib

        ours, _ = ptoc_dumps(files[0])
        theirs = pypto_dumps(Path(a.keep) / f"00_{files[0].stem}" / "pypto")
        if a.diff in ours and a.diff in theirs:
            print("\n".join(difflib.unified_diff(normalise_ir(ours[a.diff]).splitlines(),
                                                 normalise_ir(theirs[a.diff]).splitlines(), "ptoc", "pypto",
                                                 lineterm="")))
    if a.why:
        for r in rows:
            if r.get("why"):
                print(f"{r['file']}: {r['status']}: {r['why']}")
            for d, e in r["dumps_rejected"].items():
                print(f"{r['file']}: ptoc dump {d} rejected by PyPTO: {e}")
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
