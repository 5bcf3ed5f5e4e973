"""The package's file-level import graph: its cycles and its upward imports.

A file imports another when one of its statements names it: ``import a.b``, ``from a
import b`` (``a.b`` when that is a module, else ``a``'s ``__init__``), relative forms too —
wherever the statement is: a function's deferred import and an ``if TYPE_CHECKING:`` one
count too (deferring an import hides a cycle from Python's loader, not from a reader: the
two files still depend on each other). An import of ``a.b.c`` also counts ``a.b``'s and ``a``'s ``__init__`` — Python runs them
first — except a file's own packages' ``__init__`` (a package's ``__init__`` importing
its submodules is the normal shape, not a cycle).

Run it to print the figures (``python scripts/import_graph.py``); ``tests/test_import_graph.py``
asserts there is no cycle and no upward import (:data:`FORBIDDEN`).
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterable
from pathlib import Path

PACKAGE = "reflect_jobs"
ROOT = Path(__file__).resolve().parent.parent

#: (importer prefix, imported prefix): a lower layer must not import a higher one. The
#: index is below the worker's model child (``warm``) and the Huey tasks (``tasks``).
FORBIDDEN: tuple[tuple[str, str], ...] = (
    ("reflect_jobs.index", "reflect_jobs.warm"),
    ("reflect_jobs.index", "reflect_jobs.tasks"),
    ("reflect_jobs.warm", "reflect_jobs.tasks"),
)


def modules(root: Path = ROOT) -> dict[str, Path]:
    """Every module of the package by dotted name (a package by its ``__init__``)."""
    out: dict[str, Path] = {}
    for path in sorted((root / PACKAGE).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _is_package(name: str, mods: dict[str, Path]) -> bool:
    return mods[name].name == "__init__.py"


def _imports(tree: ast.AST) -> Iterable[ast.Import | ast.ImportFrom]:
    """Every import statement of a file, wherever it is."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node


def _targets(name: str, node: ast.Import | ast.ImportFrom, mods: dict[str, Path]) -> set[str]:
    """The package's modules one import statement of module ``name`` loads."""
    found: set[str] = set()
    if isinstance(node, ast.Import):
        wanted = [alias.name for alias in node.names]
    else:
        if node.level:
            base = name.split(".") if _is_package(name, mods) else name.split(".")[:-1]
            base = base[: len(base) - (node.level - 1)]
            prefix = ".".join(base + ([node.module] if node.module else []))
        else:
            prefix = node.module or ""
        wanted = [f"{prefix}.{alias.name}" for alias in node.names] + [prefix]
    for dotted in wanted:
        parts = dotted.split(".")
        for i in range(1, len(parts) + 1):  # the packages on the way run first
            candidate = ".".join(parts[:i])
            if candidate in mods:
                found.add(candidate)
    return found


def graph(root: Path = ROOT) -> dict[str, set[str]]:
    """Module → the package's modules it loads when it is imported."""
    mods = modules(root)
    edges: dict[str, set[str]] = {}
    for name, path in mods.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        own_packages = {".".join(name.split(".")[:i]) for i in range(1, name.count(".") + 1)}
        if _is_package(name, mods):
            own_packages.add(name)
        targets: set[str] = set()
        for node in _imports(tree):
            targets |= _targets(name, node, mods)
        edges[name] = targets - own_packages - {name}
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    counter = 0

    def visit(v: str) -> None:
        nonlocal counter
        index[v] = low[v] = counter
        counter += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for v in sorted(edges):
        if v not in index:
            visit(v)
    return sorted(out)


def upward(edges: dict[str, set[str]]) -> list[tuple[str, str]]:
    """Every edge that breaks a :data:`FORBIDDEN` layering rule."""
    bad = []
    for src, dsts in sorted(edges.items()):
        for dst in sorted(dsts):
            for low_layer, high_layer in FORBIDDEN:
                if _under(src, low_layer) and _under(dst, high_layer):
                    bad.append((src, dst))
    return bad


def _under(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def main() -> int:
    """Print the module count, the cycles and the upward imports; exit 1 if any."""
    edges = graph()
    found = cycles(edges)
    up = upward(edges)
    print(f"modules: {len(edges)}  edges: {sum(len(d) for d in edges.values())}")
    print(f"import cycles: {len(found)}")
    for comp in found:
        print(f"  {len(comp)} files: {', '.join(comp)}")
        for src in comp:
            inside = sorted(edges[src] & set(comp))
            print(f"    {src} -> {', '.join(inside)}")
    print(f"upward imports: {len(up)}")
    for src, dst in up:
        print(f"  {src} -> {dst}")
    return 1 if found or up else 0


if __name__ == "__main__":
    raise SystemExit(main())
