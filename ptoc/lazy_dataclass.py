"""`dataclass(frozen=True)` for ptoc's frozen classes (the IR's nodes above all), each generated method
compiled when first used.

The standard decorator compiles six methods per frozen class when the class is made (`__init__`,
`__repr__`, `__eq__`, `__hash__`, `__setattr__`, `__delattr__`): for the ~50 node classes of
`ptoc.ir.nodes` that was most of the cost of importing it, paid by every run of ptoc, although a run uses
a fraction of them (a node is rarely printed with `repr`, never assigned to, and a small program makes few
of the classes). Here the standard decorator does the rest of its work (fields, defaults,
`__match_args__`), and each of the six methods is a placeholder that, when the method is first looked up
(to call it, or by `inspect`), compiles the method the standard decorator would have made and puts it on
the class in its own place: from then on the class is as the standard one.

The generated methods are the standard library's own, text for text, for the classes this is used for:
frozen, no `__post_init__`, no default factories, no `InitVar`. The class's parameters
(`__dataclass_params__`) and its docstring are the ones it would have had too. `tests/test_lazy_dataclass.py`
compares every class made here with the standard decorator's, down to the methods' code.
Any other use (`dataclass`, `dataclass(order=True)`, ...) is the standard decorator.

The method texts are those of Python 3.10 and 3.11; later versions write some of them differently (3.12
tests a name against a set, 3.13 compares fields one by one), so on those this module is the standard
decorator, and so is it with `PTOC_PLAIN_DATACLASSES=1` in the environment.
"""

import _thread
import dataclasses
import functools
import inspect
import os
import sys

_STANDARD = dataclasses.dataclass

# the versions whose decorator writes the methods as `_source` does (tests/test_lazy_dataclass.py)
LAZY = sys.version_info < (3, 12) and not os.environ.get("PTOC_PLAIN_DATACLASSES")


def _fields(cls) -> tuple:
    return dataclasses.fields(cls)


def _tuple(obj: str, fields) -> str:
    return f"({','.join(f'{obj}.{f.name}' for f in fields)},)" if fields else "()"


def _source(cls, name: str) -> tuple[str, dict]:
    """The text of method `name` of `cls` as the standard decorator writes it, and the names it reads."""
    fields = _fields(cls)
    names: dict = {"cls": cls, "FrozenInstanceError": dataclasses.FrozenInstanceError,
                   "__dataclass_builtins_object__": object}
    if name == "__init__":
        params = []
        kw = []
        for f in fields:
            names[f"_type_{f.name}"] = f.type
            p = f"{f.name}:_type_{f.name}"
            if f.default is not dataclasses.MISSING:
                names[f"_dflt_{f.name}"] = f.default
                p += f"=_dflt_{f.name}"
            (kw if f.kw_only else params).append(p)
        args = ",".join(["self"] + params + (["*"] + kw if kw else []))
        body = [f"  __dataclass_builtins_object__.__setattr__(self,{f.name!r},{f.name})" for f in fields] or ["  pass"]
        return f" def __init__({args})->None:\n" + "\n".join(body), names
    if name == "__repr__":
        shown = ", ".join(f"{f.name}={{self.{f.name}!r}}" for f in fields if f.repr)
        return f' def __repr__(self):\n  return self.__class__.__qualname__ + f"({shown})"', names
    if name == "__eq__":
        cmp = [f for f in fields if f.compare]
        return (" def __eq__(self,other):\n  if other.__class__ is self.__class__:\n"
                f"   return {_tuple('self', cmp)}=={_tuple('other', cmp)}\n  return NotImplemented"), names
    if name == "__hash__":
        hashed = [f for f in fields if (f.compare if f.hash is None else f.hash)]
        return f" def __hash__(self):\n  return hash({_tuple('self', hashed)})", names
    every = "(" + ",".join(repr(f.name) for f in fields) + ",)" if fields else "()"
    if name == "__setattr__":
        return (" def __setattr__(self,name,value):\n"
                f"  if type(self) is cls or name in {every}:\n"
                '   raise FrozenInstanceError(f"cannot assign to field {name!r}")\n'
                "  super(cls, self).__setattr__(name, value)"), names
    assert name == "__delattr__"
    return (" def __delattr__(self,name):\n"
            f"  if type(self) is cls or name in {every}:\n"
            '   raise FrozenInstanceError(f"cannot delete field {name!r}")\n'
            "  super(cls, self).__delattr__(name)"), names


# (this module has no `from __future__ import annotations`: the methods compiled here inherit its future
# flags, and their annotations must be values, as the standard decorator's are)


def _recursive_repr(fn):
    """`fn` (a `__repr__`) giving "..." for a node inside itself, as the standard decorator wraps it."""
    running = set()

    @functools.wraps(fn)
    def wrapper(self):
        key = id(self), _thread.get_ident()
        if key in running:
            return "..."
        running.add(key)
        try:
            return fn(self)
        finally:
            running.discard(key)
    return wrapper


def _install(cls, name: str):
    """Compile method `name` of `cls`, put it on the class and return it."""
    text, names = _source(cls, name)
    local = ", ".join(names)
    ns: dict = {}
    exec(f"def __create_fn__({local}):\n{text}\n return {name}", sys.modules[cls.__module__].__dict__, ns)  # noqa: S102
    fn = ns["__create_fn__"](**names)
    if name == "__repr__":
        fn = _recursive_repr(fn)
    fn.__qualname__ = f"{cls.__qualname__}.{name}"
    setattr(cls, name, fn)
    return fn


class _Lazy:
    """Method `name` of `cls` until it is first looked up (called, or read from the class by `inspect` and
    the like): then the method itself, compiled and put in this one's place."""

    __slots__ = ("cls", "name")

    def __init__(self, cls, name: str):
        self.cls = cls
        self.name = name

    def __get__(self, obj, owner=None):
        return _install(self.cls, self.name).__get__(obj, owner)


_METHODS = ("__init__", "__repr__", "__eq__", "__hash__", "__setattr__", "__delattr__")


def _signature_doc(cls) -> str:
    """The docstring the standard decorator gives a class without one: its name and its signature."""
    params = []
    for f in _fields(cls):
        kind = inspect.Parameter.KEYWORD_ONLY if f.kw_only else inspect.Parameter.POSITIONAL_OR_KEYWORD
        default = inspect.Parameter.empty if f.default is dataclasses.MISSING else f.default
        params.append(inspect.Parameter(f.name, kind, default=default, annotation=f.type))
    params.sort(key=lambda p: p.kind)  # (stable: keyword-only ones last, as in `__init__`)
    return cls.__name__ + str(inspect.Signature(params))


def _frozen(cls):
    bases = [vars(b)["__dataclass_params__"] for b in cls.__mro__[1:] if "__dataclass_params__" in vars(b)]
    if any(name in vars(cls) for name in _METHODS) or hasattr(cls, "__post_init__") or not all(
            p.frozen for p in bases):
        return _STANDARD(cls, frozen=True)  # (not the case this module is written for; it may raise)
    doc = vars(cls).get("__doc__")
    if doc is None:
        cls.__doc__ = "-"  # (else the standard decorator reads the signature of the inherited `__init__`)
    # the standard decorator without the methods; it checks that a frozen class has only frozen dataclass
    # bases, so the bases are marked not frozen while it runs
    for p in bases:
        p.frozen = False
    try:
        _STANDARD(cls, init=False, repr=False, eq=False, frozen=False)
    finally:
        for p in bases:
            p.frozen = True
    if any(f.default_factory is not dataclasses.MISSING or not f.init for f in _fields(cls)):
        raise TypeError(f"{cls.__name__}: a field this decorator does not make")
    p = cls.__dataclass_params__
    p.init = p.repr = p.eq = p.frozen = True
    for name in _METHODS:
        setattr(cls, name, _Lazy(cls, name))
    if doc is None:
        cls.__doc__ = _signature_doc(cls)
    return cls


def dataclass(cls=None, /, **params):
    """`dataclasses.dataclass`; with `frozen=True` alone, its methods are compiled on first use (see the
    module's text)."""
    if params != {"frozen": True} or not LAZY:
        return _STANDARD(**params) if cls is None else _STANDARD(cls, **params)
    return _frozen if cls is None else _frozen(cls)
