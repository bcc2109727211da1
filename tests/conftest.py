import os
import sys

# tests/ops/optest.py is imported by the operator tests as a plain module.
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "ops"))


def pytest_addoption(parser):
    parser.addoption("--update-golden", action="store_true", default=False,
                     help="Rewrite tests/golden/ from the current compiler output instead of comparing.")
