import os
import sys

# Every pipeline run of the tests (in-process and the `ptoc` subprocesses, which inherit it) compares the
# value types a pass hands over (`Pass.hand_over`) with a fresh inference: the full check stays the oracle.
os.environ.setdefault("PTOC_CHECK_HANDED_TYPES", "1")

# tests/ops/optest.py is imported by the operator tests as a plain module, and tests/bundled_programs.py by
# tests in every folder.
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "ops"))
sys.path.insert(0, os.path.dirname(__file__))


def pytest_addoption(parser):
    parser.addoption("--update-golden", action="store_true", default=False,
                     help="Rewrite tests/golden/ from the current compiler output instead of comparing.")
