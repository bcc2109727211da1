"""docs/rules.md and `ptoc explain`: every diagnostic code and every cited rule ID leads to an entry, and the
entries' example programs produce the codes they document."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ptoc.diagnostics import CODES
from ptoc.explain import entries, normalize
from test_cli import run

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "rules.md"
TABLE = entries(DOC.read_text(encoding="utf-8"))
RULE_ID = re.compile(r"\b(?:NZ|OP|MOV|FP4)-\d+\b")
FENCE = re.compile(r"^```python (?P<info>[^\n]*)\n(?P<body>.*?)^```$", re.M | re.S)


def cited_rules() -> set[str]:
    """Every rule ID written anywhere in ptoc's source (rule= fields, messages, hints, comments)."""
    found: set[str] = set()
    for path in (ROOT / "ptoc").rglob("*.py"):
        found |= set(RULE_ID.findall(path.read_text(encoding="utf-8")))
    return found


def examples() -> list[tuple[str, dict[str, str], str]]:
    out = []
    for key, (_, body) in TABLE.items():
        for m in FENCE.finditer(body):
            info = dict(tok.split("=", 1) for tok in m.group("info").split() if "=" in tok)
            out.append((key, info, m.group("body")))
    return out


def test_every_diagnostic_code_has_an_entry():
    assert sorted(set(CODES) - set(TABLE)) == []


def test_every_rule_id_cited_in_ptoc_has_an_entry():
    cited = cited_rules()
    assert {"NZ-8", "OP-6", "MOV-6", "FP4-3"} <= cited   # the scan finds the citations at all
    assert sorted(cited - set(TABLE)) == []


def test_every_entry_is_a_code_or_a_rule_and_has_an_example_and_a_fix():
    for key, (title, body) in TABLE.items():
        assert key in CODES or RULE_ID.fullmatch(key), key
        assert title.strip(), key
        assert "```" in body, f"{key} has no example"
        assert "\nFix: " in body, f"{key} has no fix"


def test_no_hint_points_to_a_file_outside_the_project():
    for path in (ROOT / "ptoc").rglob("*.py"):
        assert "spec/README.md" not in path.read_text(encoding="utf-8"), path


# situations of files, the assembler, the simulator, the numeric reference and chosen pipelines: no IR
# program triggers them through check/compile, so their entries show a command line instead of an example
COMMAND_LINE_ONLY = {"PTOC-E0004", "PTOC-E0006", "PTOC-E0007", "PTOC-E0290", "PTOC-E0450", "PTOC-E0451", "PTOC-E0452", "PTOC-E0453", "PTOC-E0454", "PTOC-E0460", "PTOC-E0461", "PTOC-E0462", "PTOC-E0463", "PTOC-I0455", "PTOC-E0500", "PTOC-E0501", "PTOC-E0502", "PTOC-E0503", "PTOC-E0504", "PTOC-E0505", "PTOC-E0506", "PTOC-E0672", "PTOC-I0001"}


def test_every_code_entry_has_a_runnable_example_except_runtime_situations():
    runnable = {key for key, info, _ in examples() if info.get("ptoc") in ("check", "compile")}
    assert set(CODES) - runnable <= COMMAND_LINE_ONLY


# The examples run through the real CLI in one child interpreter (one process start instead of ~100): it
# calls ptoc's console entry point once per example, as the `ptoc` script would, and prints the exit code
# and the JSON diagnostics of each.
DRIVER = """
    import contextlib, io, json, sys
    from ptoc.cli import main
    results = []
    for args in json.loads(sys.stdin.read()):
        out = io.StringIO()
        sys.argv = ["ptoc", *args]
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
            try:
                main()
                code = 0
            except SystemExit as e:
                code = e.code
        results.append([code, out.getvalue()])
    print(json.dumps(results))
"""


@pytest.fixture(scope="module")
def example_runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("examples")
    cases, argvs = [], []
    for i, (key, info, body) in enumerate(examples()):
        f = tmp / f"{i:03d}_{key}.ir"
        f.write_text(body)
        argv = [info["ptoc"], str(f), "--diagnostics", "json", "--error-limit", "0", "--arch", info.get("arch", "a2a3")]
        if info["ptoc"] == "compile":
            argv += ["-o", str(tmp / f"{i:03d}.pto")]
        argv += info["args"].split(",") if "args" in info else []
        cases.append((key, info))
        argvs.append(argv)
    p = subprocess.run([sys.executable, "-c", textwrap.dedent(DRIVER)], input=json.dumps(argvs), capture_output=True,
                       text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    return list(zip(cases, json.loads(p.stdout)))


def test_there_are_examples_for_most_entries(example_runs):
    with_example = {key for (key, _), _ in example_runs}
    assert set(TABLE) - with_example <= COMMAND_LINE_ONLY


def test_each_example_produces_the_documented_code(example_runs):
    wrong = []
    for (key, info), (status, out) in example_runs:
        diags = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
        codes = [d["code"] for d in diags]
        expect = info["expect"]
        if expect == "none":
            if status != 0 or any(d["severity"] == "error" for d in diags):
                wrong.append((key, "expected no error", status, codes))
        elif expect not in codes:
            wrong.append((key, f"expected {expect}", status, codes))
        elif any(d["code"] == expect and d["severity"] == "error" for d in diags) and status != 1:
            wrong.append((key, f"{expect} is an error but the exit code is", status, codes))
    assert wrong == []


def test_code_examples_trigger_their_own_code_where_the_entry_says_so(example_runs):
    # an entry's example shows the entry's own code unless its text says the checks report another one first,
    # or that a program can no longer reach it (an invariant of a later stage)
    reasons = ("The checks that run first now reject the same mistake", "reaching it from a program is a ptoc bug")
    for (key, info), _ in example_runs:
        if key in CODES and info["expect"] != key:
            assert any(r in TABLE[key][1] for r in reasons), key


# ------------------------------------------------------------------ ptoc explain


def test_explain_prints_the_entry_of_a_code():
    p = run("explain", "PTOC-E0101")
    assert p.returncode == 0
    assert p.stdout == TABLE["PTOC-E0101"][1]
    assert p.stdout.startswith("### PTOC-E0101: undefined name\n")


@pytest.mark.parametrize("query,key", [("e101", "PTOC-E0101"), ("ptoc-e0202", "PTOC-E0202"), ("nz8", "NZ-8"),
                                       ("NZ-8", "NZ-8"), ("fp4-3", "FP4-3"), ("I100", "PTOC-I0100")])
def test_explain_accepts_short_and_lower_case_ids(query, key):
    assert normalize(query) == key
    p = run("explain", query)
    assert p.returncode == 0 and p.stdout == TABLE[key][1]


def test_explain_of_an_unknown_id_exits_1_with_suggestions():
    p = run("explain", "NZ-99")
    assert p.returncode == 1 and p.stdout == ""
    assert "no entry for 'NZ-99'" in p.stderr and "NZ-9" in p.stderr


def test_explain_without_an_argument_lists_every_entry():
    p = run("explain")
    assert p.returncode == 0
    assert [line.split()[0] for line in p.stdout.splitlines()] == list(TABLE)


def test_every_rule_a_diagnostic_cites_is_explained(tmp_path):
    # the pointer printed under a diagnostic leads to an entry that exists
    f = tmp_path / "fp4.ir"
    f.write_text("import pypto.language as pl\n@pl.function\ndef f(x: pl.Tensor[[64], pl.FP4]):\n    pass\n")
    p = run("check", str(f))
    assert "  rule: FP4-1 (see `ptoc explain FP4-1`)" in p.stderr.splitlines()
    q = run("explain", "FP4-1")
    assert q.returncode == 0 and q.stdout.startswith("### FP4-1: ")
