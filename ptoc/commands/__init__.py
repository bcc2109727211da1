"""The `ptoc` subcommands, one module per group of related commands; `ptoc.cli` holds the shared
plumbing (reporting, guarded runs, output commits) and registers these on its click group."""
