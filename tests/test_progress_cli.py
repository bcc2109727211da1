"""The progress bar of long runs (`ptoc passes --validate`): drawn on a terminal once a run lasts over a
second, never when stderr is a file or a pipe. Real `ptoc` processes; the terminal is a pseudo-terminal."""

from __future__ import annotations

import os
import pty
import re
import select
import subprocess
import sys
import time
from pathlib import Path

PTOC = Path(sys.executable).with_name("ptoc")
ROOT = Path(__file__).resolve().parent.parent
SLOW = ROOT / "examples" / "grouped_matmul_nz.ir"  # several seconds of validation: every stage, every kernel


def _on_terminal(args: list[str]) -> tuple[int, str]:
    pid, fd = pty.fork()
    if pid == 0:  # the child: stdin, stdout and stderr are the pseudo-terminal
        env = {k: v for k, v in os.environ.items() if k not in ("CI", "NO_COLOR")}
        env["TERM"] = "xterm"
        os.execve(str(PTOC), [str(PTOC), *args], env)
    data = b""
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 1.0)
        if not ready:
            continue
        try:
            chunk = os.read(fd, 65536)
        except OSError:
            break
        if not chunk:
            break
        data += chunk
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status), data.decode("utf-8", "replace")


def test_validate_draws_a_progress_bar_on_a_terminal():
    code, text = _on_terminal(["passes", str(SLOW), "--validate"])
    assert code == 0, text[-2000:]
    bars = re.findall(r"validating (\w+)[^\r\n]*?(\d+)/(\d+)", text)
    assert bars, text[-2000:]
    totals = {int(t) for _, _, t in bars}
    assert len(totals) == 1 and totals.pop() > 10  # every function x (stages + the emitted .pto)
    assert "every stage agrees with the front end" in text  # the table still comes after the bar


def test_validate_without_a_terminal_has_no_bar():
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    r = subprocess.run([str(PTOC), "passes", str(SLOW), "--validate"], capture_output=True, text=True, env=env,
                       timeout=600)
    assert r.returncode == 0, r.stderr
    assert "validating" not in r.stderr and "\x1b[" not in r.stderr
