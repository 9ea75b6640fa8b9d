"""Inside packer.augment no module imports one that imports it back.

Read from the source with `ast`: every import statement counts, function-level and
``TYPE_CHECKING`` ones too, and ``from packer.augment import x`` names module ``x`` when
there is one (the package itself otherwise)."""

from __future__ import annotations

import ast
from pathlib import Path

import packer.augment

ROOT = Path(packer.augment.__file__).parent
PACKAGE = "packer.augment"


def _edges() -> dict[str, set[str]]:
    modules = {p.stem for p in ROOT.glob("*.py")}
    edges: dict[str, set[str]] = {}
    for path in ROOT.glob("*.py"):
        me = PACKAGE if path.stem == "__init__" else f"{PACKAGE}.{path.stem}"
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                found.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    base = PACKAGE + (f".{base}" if base else "")
                for alias in node.names:
                    inner = base == PACKAGE and alias.name in modules
                    found.add(f"{base}.{alias.name}" if inner else base)
        edges[me] = {t for t in found if t.startswith(PACKAGE) and t != me}
    return edges


def _cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """One import loop, or None (depth-first search, grey/black marks)."""
    state: dict[str, int] = {}
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for target in sorted(edges.get(node, ())):
            if state.get(target) == 1:
                return [*path[path.index(target) :], target]
            if target not in state and (found := visit(target)):
                return found
        state[node] = 2
        path.pop()
        return None

    for node in sorted(edges):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_the_loop_finder_finds_a_loop():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def test_no_module_of_augment_imports_one_that_imports_it_back():
    edges = _edges()
    assert f"{PACKAGE}.params" in edges[f"{PACKAGE}.drawing"]  # the walk sees imports
    assert _cycle(edges) is None, " -> ".join(_cycle(edges))
