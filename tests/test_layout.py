"""The shape of the package: no module imports one that imports it back (directly or through
others), nor does any package (or top-level module), torch is imported at module level only by
the torch adapter, and no module outgrows 400 lines. Read from the source with `ast`, so it
holds for imports not yet run; imports under `if TYPE_CHECKING:` do not run, and do not count."""

from __future__ import annotations

import ast
from collections import defaultdict, deque
from collections.abc import Iterator
from itertools import pairwise
from pathlib import Path

import packer

ROOT = Path(packer.__file__).parent
TORCH_ADAPTER = {
    "torch/dataset.py",
    "torch/compat.py",
    "torch/decode.py",
    "torch/device.py",
    "torch/pinning.py",
    "torch/slots.py",
}
MAX_LINES = 400

Edges = dict[str, dict[str, str]]  # module -> {module it imports: where, "file:line import"}


def _module_name(path: Path) -> tuple[str, str]:
    """(module, package it lives in) of a source file, dotted."""
    parts = ("packer", *path.relative_to(ROOT).with_suffix("").parts)
    package = ".".join(parts[:-1])
    if parts[-1] == "__init__":
        return package, package
    return ".".join(parts), package


MODULES = {_module_name(p)[0]: p for p in sorted(ROOT.rglob("*.py"))}


def _unit(module: str) -> str:
    """The node a module belongs to: its first-level package (packer.reading), or the
    top-level module itself (packer.errors); the root package is `packer`."""
    parts = module.split(".")
    if len(parts) < 2:
        return "packer"
    return ".".join(parts[:2])


def _runtime_imports(tree: ast.Module) -> list[ast.Import | ast.ImportFrom]:
    """Import statements that run (those under `if TYPE_CHECKING:` do not), at any depth."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and getattr(node.test, "id", "") == "TYPE_CHECKING":
            node.body = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.append(node)
    return found


def _module_of(name: str) -> str:
    """The packer module that a dotted name is, or whose attribute it is."""
    while name not in MODULES:
        name = name.rpartition(".")[0]
    return name


def _imported(node: ast.Import | ast.ImportFrom, package: str) -> list[str]:
    """The packer modules an import statement names, resolved against `package`: for
    `from X import a`, module X.a where there is one, else X (a an attribute of X)."""
    if isinstance(node, ast.Import):
        return [_module_of(a.name) for a in node.names if a.name.split(".")[0] == "packer"]
    if node.level:  # `from ..x import a` in packer.reading.y: packer.x
        base = ".".join(package.split(".")[: package.count(".") + 2 - node.level])
        base += f".{node.module}" if node.module else ""
    elif (node.module or "").split(".")[0] == "packer":
        base = node.module or ""
    else:
        return []
    return [_module_of(f"{base}.{alias.name}") for alias in node.names]


def _module_graph() -> Edges:
    """module -> {packer module it imports at run time: a statement that does (module level
    first)}."""
    edges: Edges = defaultdict(dict)
    for module, path in MODULES.items():
        package = _module_name(path)[1]
        for node in _runtime_imports(ast.parse(path.read_text())):
            for target in _imported(node, package):
                where = f"{path.relative_to(ROOT)}:{node.lineno} `{ast.unparse(node)}`"
                if target != module:
                    edges[module].setdefault(target, where)
    return edges


def _unit_graph(modules: Edges) -> Edges:
    """The module graph seen by first-level units: unit -> {unit it imports: where}."""
    edges: Edges = defaultdict(dict)
    for source, targets in modules.items():
        for target, where in targets.items():
            if _unit(target) != _unit(source):
                edges[_unit(source)].setdefault(_unit(target), where)
    return edges


def _cycles(edges: Edges) -> list[list[str]]:
    """Strongly connected groups of more than one node (Tarjan's algorithm)."""
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


def _loop(group: list[str], edges: Edges) -> list[str]:
    """A shortest import path from the group's first node back to it, inside the group."""
    start = group[0]
    paths = {start: [start]}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        for target in edges.get(node, {}):
            if target == start:
                return [*paths[node], start]
            if target in group and target not in paths:
                paths[target] = [*paths[node], target]
                queue.append(target)
    raise AssertionError(f"{group} is no strongly connected group")


def _described(edges: Edges) -> Iterator[str]:
    """Each loop of `edges`: its nodes, then one path round it with the import of each step."""
    for group in _cycles(edges):
        path = _loop(group, edges)
        steps = "; ".join(f"{a} -> {b} ({edges[a][b]})" for a, b in pairwise(path))
        yield f"{' <-> '.join(group)}: {steps}"


def test_the_cycle_finder_finds_a_cycle():
    edges = {"a": {"b": "a.py"}, "b": {"c": "b.py"}, "c": {"a": "c.py"}, "d": {"a": "d.py"}}
    assert _cycles(edges) == [["a", "b", "c"]]
    assert _cycles({"a": {"b": "a.py"}, "b": {}}) == []
    assert list(_described(edges)) == ["a <-> b <-> c: a -> b (a.py); b -> c (b.py); c -> a (c.py)"]


def test_imports_resolve_to_the_modules_they_name():
    graph = _module_graph()
    mixture = graph["packer.reading.mixture"]
    assert "packer.reading.mixture_read" in mixture and "packer.reading.dataset" in mixture
    assert "packer.reading" not in graph["packer.reading.batches"]  # `from . import gather`
    assert "packer.reading.gather" in graph["packer.reading.batches"]
    assert "packer.torch.compat" in graph["packer.torch.dataset"]  # `from . import compat as`
    assert "packer.reading.dataset" not in graph["packer.reading.batches"]  # TYPE_CHECKING


def test_no_module_imports_one_that_imports_it_back():
    loops = list(_described(_module_graph()))
    assert not loops, "import loops:\n" + "\n".join(loops)


def test_no_package_imports_one_that_imports_it_back():
    edges = _unit_graph(_module_graph())
    assert "packer.reading" in edges and "packer.packing" in edges  # the walk found imports
    loops = list(_described({k: v for k, v in edges.items() if k != "packer"}))
    assert not loops, "import loops:\n" + "\n".join(loops)


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
