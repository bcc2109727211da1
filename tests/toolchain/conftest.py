"""Fixtures for the tests that run the real toolchain (PTOAS, pto-isa's CPU simulator, a C++ compiler).

They take the tools from $PTOC_PTOAS, $PTOC_PTO_ISA and $PTOC_CXX (`eval "$(bash ../shared/tools/setup.sh)"`
sets all three; `.ci/run` does so) and skip, saying which variable is missing, when one is unset. The
compiled simulator harnesses are cached in one folder per test session, shared by every test.
"""

import os

import pytest

SETUP = "run `eval \"$(bash ../shared/tools/setup.sh)\"` before pytest"


def _need(var: str) -> str:
    value = os.environ.get(var, "")
    if not value:
        pytest.skip(f"${var} is unset: these tests need the real PTO toolchain; {SETUP}")
    return value


@pytest.fixture(scope="session")
def ptoas() -> str:
    return _need("PTOC_PTOAS")


@pytest.fixture(scope="session")
def sim_env(ptoas, tmp_path_factory) -> dict:
    """The environment for a `ptoc ... --sim` subprocess: the three tools and a session-wide harness cache."""
    _need("PTOC_PTO_ISA")
    _need("PTOC_CXX")
    env = dict(os.environ)
    env["PTOC_CACHE_DIR"] = str(tmp_path_factory.mktemp("ptoc-cache"))
    return env


@pytest.fixture(scope="session")
def sim_tools(sim_env):
    from ptoc.reference.sim import find_tools

    return find_tools(environ=sim_env)


@pytest.fixture(scope="session")
def sim_cache(sim_env) -> str:
    return os.path.join(sim_env["PTOC_CACHE_DIR"], "sim")

