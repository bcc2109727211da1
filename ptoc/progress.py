"""A progress bar on stderr for long runs: batch compiles, `--validate`, `--sim`.

It appears only when stderr is a terminal (and CI is not set), and only once the run has lasted over a
second: short runs and logs stay as they were. rich is imported only when the bar is drawn.
"""

from __future__ import annotations

import os
import sys
import threading


def stream_is_tty(stream) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


class Progress:
    """Steps done out of `total` (which may be set later, see `set_total`), under `label`. The bar is drawn
    by a timer one second after the start when the run is not over by then, and redraws itself (the
    elapsed time goes on) while a long step runs; `close` (or leaving the `with` block) removes it."""

    DELAY = 1.0

    def __init__(self, total: int, label: str):
        self.total = total
        self.label = label
        self.done = 0
        self.bar = None
        self.task = None
        self.closed = False
        self.lock = threading.Lock()
        self.timer = None
        if stream_is_tty(sys.stderr) and not os.environ.get("CI"):
            self.timer = threading.Timer(self.DELAY, self._draw)
            self.timer.daemon = True
            self.timer.start()

    def _draw(self) -> None:
        with self.lock:
            if self.closed or self.bar is not None or self.total <= 1 or self.done >= self.total:
                return
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
            from rich.progress import Progress as Bar

            self.bar = Bar(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                           console=Console(file=sys.stderr), transient=True, refresh_per_second=4)
            self.task = self.bar.add_task(self.label, total=self.total, completed=self.done)
            self.bar.start()

    def set_total(self, total: int) -> None:
        with self.lock:
            self.total = total
            if self.bar is not None:
                self.bar.update(self.task, total=total)

    def advance(self, label: str | None = None) -> None:
        """One more step done; `label`: what the next steps are about."""
        with self.lock:
            self.done += 1
            if label is not None:
                self.label = label
            if self.bar is not None:
                self.bar.update(self.task, completed=self.done, description=self.label)

    def close(self) -> None:
        with self.lock:
            self.closed = True
            if self.timer is not None:
                self.timer.cancel()
            if self.bar is not None:
                self.bar.stop()
                self.bar = None

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
