"""ptoc: textual PyPTO IR in, PTOAS-ready .pto and pto-isa GlobalTensor headers out."""

__version__ = "0.1.0"

# The operator type rules join the verifier through ptoc.ir.typing_registry (ir does not import ops):
# loading the package loads the registry, so any use of the verifier sees them.
from ptoc.ir.typing_registry import register_op_typer as _register_op_typer  # noqa: E402
from ptoc.ops.registry import infer_call_type as _infer_call_type  # noqa: E402

_register_op_typer(_infer_call_type)
