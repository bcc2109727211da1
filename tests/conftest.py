import os
import sys

# tests/ops/optest.py is imported by the operator tests as a plain module.
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "ops"))
