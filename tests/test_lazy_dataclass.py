"""ptoc's frozen classes (the IR's nodes, spans, dtypes, ...) are made by `ptoc.lazy_dataclass.dataclass`,
whose methods are compiled on first use: they must be exactly what `dataclasses.dataclass(frozen=True)`
makes. Two interpreters, one with the standard decorator (`PTOC_PLAIN_DATACLASSES=1`), describe every such
class (fields, parameters, docstring, signature, each method's code) and every node of every bundled
program, as written and lowered; the descriptions must agree."""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
import sys

import pytest
from bundled_programs import PROGRAMS, ROOT, program_arch

from ptoc.lazy_dataclass import LAZY, dataclass

_ONLY_LAZY = pytest.mark.skipif(sys.version_info >= (3, 12), reason="the lazy form is used on Python 3.10 and "
                                "3.11 only; later versions write the methods' text differently")

_DESCRIBE = r"""
import dataclasses, importlib, inspect, sys
import ptoc.ir.nodes as N
from ptoc.context import CompileContext
from ptoc.diagnostics import CompileError
from ptoc.driver import frontend, lower
from ptoc.ir.visitor import plain_walk

def say(*a):
    print(*a)

MODULES = ["ptoc.ir.nodes", "ptoc.diagnostics", "ptoc.ir.dtypes", "ptoc.context", "ptoc.target.arch",
           "ptoc.codegen.global_tensor", "ptoc.codegen.views", "ptoc.ops.registry", "ptoc.parallel",
           "ptoc.analysis.outline", "ptoc.passes.BlockNzTensorViews", "ptoc.passes.AutoTileMatmulL0",
           "ptoc.passes.InitMemRef"]
classes = [c for m in map(importlib.import_module, MODULES) for c in vars(m).values()
           if isinstance(c, type) and c.__module__ == m.__name__]

def code(fn):
    fn = getattr(fn, "__wrapped__", fn)
    c = fn.__code__
    return (c.co_code.hex(), c.co_consts, c.co_names, c.co_varnames, c.co_freevars, c.co_argcount,
            c.co_kwonlyargcount, fn.__defaults__, fn.__kwdefaults__, fn.__annotations__, fn.__qualname__,
            fn.__name__, fn.__module__, [x.cell_contents for x in fn.__closure__ or ()])
mades = {}
for path, arch in [a.split("=", 1) for a in sys.argv[1:]]:
    ctx = CompileContext(arch=arch)
    prog = None
    try:
        prog = frontend(open(path).read(), path, ctx)
        progs = [prog, lower(prog, ctx).program]
    except CompileError as e:  # (a program that does not compile: its diagnostics, and what was built)
        say(path, e)
        progs = [prog] if prog is not None else []
    for p in progs:
        say(path, repr(p))  # (not its hash: some field values hash by identity)
        for n in plain_walk(p):
            mades.setdefault(type(n), n)
            same = dataclasses.replace(n)
            assert same == n and hash(same) == hash(n) and same is not n, n
            assert (n == 0) is False and (n != 0) is True
            if isinstance(n, N.ConstInt):  # equal by value, span left out
                assert n == N.ConstInt(n.value, n.dtype) and hash(n) == hash(N.ConstInt(n.value, n.dtype))
for c in classes:
    if not dataclasses.is_dataclass(c):
        say(c.__name__, "plain")
        continue
    say(c.__name__, repr(c.__doc__), repr(c.__dataclass_params__), getattr(c, "__match_args__", None),
        str(inspect.signature(c)))
    for f in dataclasses.fields(c):
        default = "-" if f.default is dataclasses.MISSING else repr(f.default)
        say(" ", f.name, repr(f.type), default, f.init, f.repr, f.hash, f.compare, f.kw_only, f._field_type)
    n = mades.get(c)
    if n is not None:
        for act in (lambda: setattr(n, "span", None), lambda: setattr(n, "other", 1), lambda: delattr(n, "span")):
            try:
                act()
                say("  no error")
            except Exception as e:
                say(" ", type(e).__name__, e)
    for m in ("__init__", "__repr__", "__eq__", "__hash__", "__setattr__", "__delattr__"):
        say(" ", m, code(getattr(c, m)) if dataclasses.is_dataclass(c) and c.__dataclass_params__.frozen else "")
say(len(mades), "classes made")
"""


def _describe(plain: bool, args: list[str]) -> str:
    env = dict(os.environ, PYTHONHASHSEED="0")
    env.pop("PTOC_PLAIN_DATACLASSES", None)
    if plain:
        env["PTOC_PLAIN_DATACLASSES"] = "1"
    r = subprocess.run([sys.executable, "-c", _DESCRIBE, *args], capture_output=True, text=True, env=env,
                       cwd=ROOT, timeout=600)
    assert r.returncode == 0, r.stderr
    # (a default that is a function shows its address, which differs between the two interpreters)
    return re.sub(r" at 0x[0-9a-f]+>", " at 0x...>", r.stdout)


@_ONLY_LAZY
def test_node_classes_are_the_standard_dataclasses():
    args = [f"{p}={program_arch(p)}" for p in PROGRAMS]
    lazy = _describe(False, args)
    plain = _describe(True, args)
    assert lazy.count("classes made") == 1 and int(lazy.split()[-3]) >= 30, lazy[-300:]
    assert lazy == plain


@_ONLY_LAZY
def test_methods_are_compiled_on_first_use():
    """A class's methods are placeholders until first looked up; then the standard method is put in place."""
    code = ("import ptoc.ir.nodes as N\n"
            "before = type(N.ScalarType.__dict__['__init__']).__name__\n"
            "t = N.ScalarType(N.INDEX)\n"
            "real = N.ScalarType.__dict__['__init__']\n"
            "print(before, type(real).__name__, real.__code__.co_varnames[:3],"
            " type(N.ScalarType.__dict__['__repr__']).__name__)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60,
                       env={k: v for k, v in os.environ.items() if k != "PTOC_PLAIN_DATACLASSES"})
    assert r.returncode == 0, r.stderr
    assert r.stdout.split("\n")[0] == "_Lazy function ('self', 'dtype', 'span') _Lazy", r.stdout


def test_what_the_lazy_form_does_not_make_is_left_to_the_standard_decorator():
    """A frozen class over a non-frozen dataclass is refused as the standard decorator refuses it (and the
    base stays as it was); other parameters are the standard decorator's."""
    @dataclasses.dataclass
    class Base:
        x: int

    with pytest.raises(TypeError, match="cannot inherit frozen dataclass from a non-frozen one"):
        @dataclass(frozen=True)
        class Frozen(Base):
            y: int

    assert Base.__dataclass_params__.frozen is False

    @dataclass(order=True)
    class Ordered:
        x: int

    assert Ordered(1) < Ordered(2) and "__lt__" in vars(Ordered)


def test_the_standard_decorator_where_the_lazy_form_is_not_exact():
    """On Python 3.12 and later (whose methods' text differs), and with PTOC_PLAIN_DATACLASSES, the node
    classes carry the standard decorator's own methods."""
    code = ("import ptoc.ir.nodes as N, ptoc.lazy_dataclass as L\n"
            "print(L.LAZY, type(N.ScalarType.__dict__['__init__']).__name__)\n")
    for plain in (False, True):
        env = {k: v for k, v in os.environ.items() if k != "PTOC_PLAIN_DATACLASSES"}
        if plain:
            env["PTOC_PLAIN_DATACLASSES"] = "1"
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60,
                           env=env)
        assert r.returncode == 0, r.stderr
        lazy = sys.version_info < (3, 12) and not plain
        assert r.stdout.split() == [str(lazy), "_Lazy" if lazy else "function"], (plain, r.stdout)
    assert LAZY == (sys.version_info < (3, 12) and not os.environ.get("PTOC_PLAIN_DATACLASSES"))
