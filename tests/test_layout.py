"""The shape of the package: no package (or top-level module) imports one that imports it
back, torch is imported at module level only by the torch adapter, and no module outgrows
400 lines. Read from the source with `ast`, so it holds for imports not yet run."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import packer

ROOT = Path(packer.__file__).parent
TORCH_ADAPTER = {"torch/dataset.py", "torch/compat.py", "torch/device.py", "torch/pinning.py"}
MAX_LINES = 400


def _module_name(path: Path) -> tuple[str, str]:
    """(module, package it lives in) of a source file, dotted."""
    parts = ("packer", *path.relative_to(ROOT).with_suffix("").parts)
    package = ".".join(parts[:-1])
    if parts[-1] == "__init__":
        return package, package
    return ".".join(parts), package


def _unit(module: str) -> str:
    """The node a module belongs to: its first-level package (packer.reading), or the
    top-level module itself (packer.errors); the root package is `packer`."""
    parts = module.split(".")
    if len(parts) < 2:
        return "packer"
    return ".".join(parts[:2])


def _runtime_imports(tree: ast.Module) -> list[ast.stmt]:
    """Import statements that run (those under `if TYPE_CHECKING:` do not)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and getattr(node.test, "id", "") == "TYPE_CHECKING":
            node.body = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.append(node)
    return found


def _imported(node: ast.stmt, package: str) -> list[str]:
    """The packer modules an import statement names, resolved against `package`."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names if a.name.split(".")[0] == "packer"]
    assert isinstance(node, ast.ImportFrom)
    if not node.level:
        return [node.module] if (node.module or "").split(".")[0] == "packer" else []
    base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1])
    if node.module:
        return [f"{base}.{node.module}"]
    return [f"{base}.{alias.name}" for alias in node.names]


def _graph() -> dict[str, dict[str, str]]:
    """unit -> {unit it imports: a file that does}."""
    edges: dict[str, dict[str, str]] = defaultdict(dict)
    for path in sorted(ROOT.rglob("*.py")):
        module, package = _module_name(path)
        source = _unit(module)
        for node in _runtime_imports(ast.parse(path.read_text())):
            for target in _imported(node, package):
                if _unit(target) != source:
                    edges[source].setdefault(_unit(target), str(path.relative_to(ROOT)))
    return edges


def _cycles(edges: dict[str, dict[str, str]]) -> list[list[str]]:
    """Strongly connected groups of more than one unit (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in edges.get(node, {}):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for node in list(edges):
        if node not in index:
            visit(node)
    return groups


def test_the_cycle_finder_finds_a_cycle():
    edges = {"a": {"b": "a.py"}, "b": {"c": "b.py"}, "c": {"a": "c.py"}, "d": {"a": "d.py"}}
    assert _cycles(edges) == [["a", "b", "c"]]
    assert _cycles({"a": {"b": "a.py"}, "b": {}}) == []


def test_no_package_imports_one_that_imports_it_back():
    edges = _graph()
    assert "packer.reading" in edges and "packer.packing" in edges  # the walk found imports
    cycles = _cycles({k: v for k, v in edges.items() if k != "packer"})
    described = [
        " -> ".join(
            f"{u} ({edges[u][v]})" for u, v in zip(c, [*c[1:], c[0]], strict=True) if v in edges[u]
        )
        for c in cycles
    ]
    assert not cycles, described


def test_only_the_torch_adapter_imports_torch_at_module_level():
    importers = set()
    for path in ROOT.rglob("*.py"):
        for node in ast.parse(path.read_text()).body:  # module level only
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module or ""]
            if any(name.split(".")[0] == "torch" for name in names):
                importers.add(str(path.relative_to(ROOT)))
    assert importers == TORCH_ADAPTER


def test_no_module_outgrows_400_lines():
    long = {
        str(p.relative_to(ROOT)): n
        for p in ROOT.rglob("*.py")
        if (n := len(p.read_text().splitlines())) > MAX_LINES
    }
    assert not long
