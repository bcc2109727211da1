"""The package structure: no import cycle between ptoc's packages, ir below ops, pass modules
independent of one another. Read from the source with `ast` (imports inside functions count too)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "ptoc"

# Modules of ptoc/passes/ that are infrastructure or shared helpers, not passes.
PASS_INFRASTRUCTURE = {"__init__", "manager", "properties", "common"}


def _module_name(path: Path, root: Path = ROOT) -> str:
    parts = path.relative_to(root.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, root: Path = ROOT) -> list[tuple[str, tuple[str, ...]]]:
    """(absolute module, imported names) for every import statement of a file."""
    me = _module_name(path, root)
    package = me if path.name == "__init__.py" else me.rsplit(".", 1)[0]
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out += [(a.name, ()) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            out.append((module, tuple(a.name for a in node.names)))
    return out


def _package(module: str, root: Path = ROOT) -> str | None:
    """The ptoc sub-package a module belongs to (`ptoc.ir.nodes` -> "ir"); None for top-level modules."""
    parts = module.split(".")
    if parts[0] != "ptoc" or len(parts) < 2 or not (root / parts[1]).is_dir():
        return None
    return parts[1]


def package_graph(root: Path = ROOT) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for path in sorted(root.rglob("*.py")):
        src = _package(_module_name(path, root), root)
        if src is None:
            continue
        for module, _ in _imports(path, root):
            dst = _package(module, root)
            if dst is not None and dst != src:
                graph.setdefault(src, set()).add(dst)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every elementary cycle through the smallest package of it, found by depth-first search."""
    found = []
    for start in sorted(graph):
        stack = [(start, [start])]
        while stack:
            node, path = stack.pop()
            for nxt in sorted(graph.get(node, ())):
                if nxt == start:
                    found.append(path + [start])
                elif nxt > start and nxt not in path:
                    stack.append((nxt, path + [nxt]))
    return found


def test_cycle_finder_sees_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == [["a", "b", "c", "a"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycle_between_packages():
    assert cycles(package_graph()) == []


def test_ir_does_not_import_ops_or_passes():
    graph = package_graph()
    assert "ops" not in graph.get("ir", set())
    assert "passes" not in graph.get("ir", set())


def _pass_modules(root: Path = ROOT) -> list[Path]:
    return [p for p in sorted((root / "passes").glob("*.py")) if p.stem not in PASS_INFRASTRUCTURE]


def cross_pass_imports(path: Path, root: Path = ROOT) -> list[str]:
    """What pass module `path` imports from other pass modules."""
    passes = {p.stem for p in _pass_modules(root)}
    offending = []
    for module, names in _imports(path, root):
        parts = module.split(".")
        if parts[:2] == ["ptoc", "passes"]:
            if len(parts) > 2 and parts[2] in passes and parts[2] != path.stem:
                offending.append(f"{module}: {', '.join(names)}")
            elif len(parts) == 2:  # from ptoc.passes import X
                offending += [f"ptoc.passes.{n}" for n in names if n in passes and n != path.stem]
    return offending


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "ptoc"
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def test_checks_see_a_violation(tmp_path):
    root = _tree(tmp_path, {
        "__init__.py": "", "ir/__init__.py": "", "ops/__init__.py": "", "passes/__init__.py": "",
        "ir/verifier.py": "def f():\n    from ptoc.ops.registry import infer\n",
        "ops/registry.py": "from ptoc.ir import verifier\n",
        "passes/common.py": "", "passes/A.py": "from .B import _helper\n", "passes/B.py": "_helper = 1\n",
    })
    assert cycles(package_graph(root)) == [["ir", "ops", "ir"]]
    assert cross_pass_imports(root / "passes" / "A.py", root) == ["ptoc.passes.B: _helper"]
    assert cross_pass_imports(root / "passes" / "B.py", root) == []


def test_there_are_pass_modules_to_check():
    assert {"InitMemRef", "AllocateMemoryAddr", "FlattenTileNdTo2D"} <= {p.stem for p in _pass_modules()}


@pytest.mark.parametrize("path", _pass_modules(), ids=lambda p: p.stem)
def test_a_pass_imports_no_other_pass_module(path: Path):
    assert cross_pass_imports(path) == [], "move what is shared to ptoc/passes/common.py or ptoc/analysis/"
