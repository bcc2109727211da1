"""The `ptoc` console script and `python -m ptoc`.

Ctrl-C is taken care of before anything else is imported: until `ptoc.cli.main` installs its own handler
(which lets a command clean up its temp files), an interrupt ends ptoc at once with one line and exit 130.
"""

import os
import signal
import sys


def _interrupted_early(_signum, _frame) -> None:
    try:
        sys.stderr.write("ptoc: interrupted\n")
        sys.stderr.flush()
    finally:
        os._exit(130)


def main() -> None:
    signal.signal(signal.SIGINT, _interrupted_early)
    from ptoc.cli import main as cli_main

    cli_main()


if __name__ == "__main__":  # pragma: no cover
    main()
