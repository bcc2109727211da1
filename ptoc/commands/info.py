"""`ptoc ops` and `ptoc explain`: the operator set and the rules reference."""

from __future__ import annotations

import sys

import click

from ptoc.cli import (
    EXIT_OK,
    EXIT_USER,
    _run_guarded,
    cli,
)


@cli.command()
@click.argument("pattern", required=False)
def ops(pattern: str | None) -> None:
    """List the operator set: name, signature, executing unit and summary.

    PATTERN filters by substring (e.g. `ptoc ops tile.` or `ptoc ops gather`); exit 1 when nothing matches.
    """

    def run() -> int:
        from ptoc.ops.registry import REGISTRY, SHORT, load_all, signature

        load_all()
        shorts = [s for s in sorted(SHORT) if not pattern or pattern in s]
        if pattern and not shorts and not any(pattern in name for name in REGISTRY):
            click.echo(f"ptoc ops: no operator matches {pattern!r}", err=True)
            return EXIT_USER
        for name in sorted(REGISTRY):
            if pattern and pattern not in name:
                continue
            op = REGISTRY[name]
            click.echo(f"{name:28} {op.unit:7} {signature(op)}")
            if op.summary:
                click.echo(f"{'':37}{op.summary}")
        if shorts:
            click.echo("\nshort names (resolved by argument kind):")
            for s in shorts:
                targets = ", ".join(f"{k}: {v}" for k, v in sorted(SHORT[s].items()))
                click.echo(f"  pl.{s:24} {targets}")
        return EXIT_OK

    sys.exit(_run_guarded(run))


@cli.command()
@click.argument("query", metavar="CODE|RULE", required=False)
def explain(query: str | None) -> None:
    """Explain a diagnostic code (PTOC-E0202, E0202) or a specification rule (NZ-8): what it means, an
    example that triggers it, and the fix (the entries of docs/rules.md). Without an argument, list them.
    """

    def run() -> int:
        from ptoc.explain import close_ids, entries, normalize, read_rules_text

        table = entries(read_rules_text())
        if query is None:
            for key, (title, _) in table.items():
                click.echo(f"{key:12} {title}")
            return EXIT_OK
        key = normalize(query)
        if key not in table:
            near = close_ids(query, table)
            more = f"; did you mean {' or '.join(near)}?" if near else ""
            click.echo(f"ptoc explain: no entry for {query!r}{more} (`ptoc explain` lists them all)", err=True)
            return EXIT_USER
        click.echo(table[key][1], nl=False)
        return EXIT_OK

    sys.exit(_run_guarded(run))
