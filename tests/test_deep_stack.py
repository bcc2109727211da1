"""Commands run on a stack deep enough for the recursion limit they set (ptoc.cli._on_deep_stack).

Before Python 3.11 each Python call also uses C stack, so deeply nested input crashed the process
instead of being reported; there a command runs in a thread with a large stack. These tests force that
path on any Python and check that it gives the command's result, its exceptions and Ctrl-C back to the
caller as a plain call would. (The crash itself is checked under Python 3.10 by `.ci/run`, which runs
tests/test_cli.py's deeply nested inputs there.)"""

from __future__ import annotations

import sys
import threading
import time

import pytest

from ptoc import cli


@pytest.fixture
def thread_path(monkeypatch):
    monkeypatch.setattr(cli, "_CALLS_TAKE_C_STACK", True)


def _depth(n: int) -> int:
    return 0 if n == 0 else 1 + _depth(n - 1)


def test_the_command_runs_in_another_thread_and_its_value_comes_back(thread_path):
    seen = []

    def command():
        seen.append(threading.current_thread() is threading.main_thread())
        return 7

    assert cli._on_deep_stack(command) == 7
    assert seen == [False]


def test_without_the_thread_path_the_command_runs_in_this_thread(monkeypatch):
    monkeypatch.setattr(cli, "_CALLS_TAKE_C_STACK", False)
    assert cli._on_deep_stack(lambda: threading.current_thread() is threading.main_thread()) is True


def test_recursion_to_the_limit_fits_the_thread_stack(thread_path):
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(cli._RECURSION_LIMIT)
    try:
        assert cli._on_deep_stack(lambda: _depth(cli._RECURSION_LIMIT - 200)) == cli._RECURSION_LIMIT - 200
    finally:
        sys.setrecursionlimit(old)


@pytest.mark.parametrize("exc", [ValueError("bad"), SystemExit(3), RecursionError("deep")])
def test_the_commands_exception_is_raised_in_the_caller(thread_path, exc):
    def command():
        raise exc

    with pytest.raises(type(exc)) as got:
        cli._on_deep_stack(command)
    assert got.value is exc


@pytest.mark.skipif(sys.version_info >= (3, 13), reason="3.13 delivers an asynchronous exception past the thread's "
                    "own handlers; ptoc takes the thread path only before 3.11")
def test_ctrl_c_reaches_the_command_thread():
    started = threading.Event()
    ended = []

    def spin():
        try:  # (set inside the try: the exception may arrive at any instruction after it)
            started.set()
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                pass
            ended.append("ran out")
        except KeyboardInterrupt:
            ended.append("interrupted")

    t = threading.Thread(target=spin, daemon=True)
    t.start()
    started.wait(5)
    cli._raise_in_thread(t, KeyboardInterrupt)
    t.join(10)
    assert ended == ["interrupted"]


def test_a_whole_command_on_the_thread_path_reports_as_usual(thread_path, tmp_path, capsys):
    # deeply nested input, checked in this process through the thread: the usual diagnostic and exit 1
    f = tmp_path / "deep.ir"
    f.write_text("import pypto.language as pl\n@pl.function\ndef f(x: pl.Scalar[pl.INDEX]) -> pl.Scalar[pl.INDEX]:\n"
                 "    y = " + "(" * 25000 + "x" + ")" * 25000 + "\n    return y\n", encoding="utf-8")
    old = sys.getrecursionlimit()
    try:
        with pytest.raises(SystemExit) as got:
            cli.cli.main(["check", str(f)], prog_name="ptoc", standalone_mode=False)
    finally:
        sys.setrecursionlimit(old)  # (the command raised it for this process; other tests rely on the default)
    assert got.value.code == 1
    assert "PTOC-E0114" in capsys.readouterr().err
