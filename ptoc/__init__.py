"""ptoc: textual PyPTO IR in, PTOAS-ready .pto and pto-isa GlobalTensor headers out."""

__version__ = "0.1.0"
