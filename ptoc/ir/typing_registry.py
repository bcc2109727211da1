"""Where the verifier finds operator type rules without importing the operator package.

`ptoc.ir` sits below `ptoc.ops` in the package graph: ops build IR nodes and types, so ir must not
import ops. The verifier still needs each call's result type. The operator package supplies it by
registering one function here (`register_op_typer`) when it is imported; the verifier asks `op_typer()`.

An `OpTyper` is `(call, argument types, keyword-argument types, compile context) -> (result type or
None, diagnostics)`.
"""

from __future__ import annotations

from collections.abc import Callable

OpTyper = Callable[..., tuple]

_registered: list[OpTyper] = []


def register_op_typer(typer: OpTyper) -> None:
    """Install the operator type rules; registering again replaces the earlier function."""
    _registered[:] = [typer]


def op_typer() -> OpTyper:
    """The registered operator type rules. Raises RuntimeError when none is registered: checking a
    program's operators without them would silently accept every call."""
    if not _registered:
        raise RuntimeError("no operator type rules are registered: import ptoc.ops.registry first")
    return _registered[0]


__all__ = ["OpTyper", "op_typer", "register_op_typer"]
