"""The project's import graph: its import circles, its floors, and who imports whom.

    python scripts/import_graph.py            # package edges, circles, floor breaches
    python scripts/import_graph.py --modules  # and every module-to-module edge
    python scripts/import_graph.py --dot      # the package graph for Graphviz (`| dot -Tsvg`)

Exit status 1 when there is an import circle between modules or an import that goes up a floor.
Every import counts, at module top or inside a function, because a lazy import still ties the two
modules together. Standard library only (ast), so it runs before anything is installed.
`tests/test_layout.py` runs the same checks in the suite.
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Floors, bottom first. A package may import its own floor's shared base and anything below; it
# never imports a floor above it nor a sibling on the same floor (siblings meet only further up).
# The web app, the sampler and the matcher all stand on vsr_core; the dataset layer puts their
# results together; the commands stand on top and wire everything.
FLOORS: tuple[tuple[str, ...], ...] = (
    ("vsr_core",),
    ("collection", "webapp", "matching", "migrations"),
    ("vsr_dataset",),
    ("vsr_cli",),
)
# Floors inside a package, bottom first, by module prefix: the web app's rooms. Plumbing every
# route shares, then the crowd machinery and the images beneath the tasks, then the tasks, then
# the dashboard that watches them, then the factory that wires it all.
ROOMS: dict[str, tuple[tuple[str, ...], ...]] = {
    "webapp": (
        ("webapp.http",),
        ("webapp.crowd", "webapp.images"),
        ("webapp.generate", "webapp.validate"),
        # crowd platforms judge work by the tasks' figures (gold) and release crowd leases;
        # the dashboard and the CLI drive them
        ("webapp.platforms",),
        ("webapp.admin",),
        ("webapp.app",),
    ),
}
# Packages outside the floors: they may import anything of ours and nothing imports them.
TOP: tuple[str, ...] = ("bench", "demo")
SKIP_DIRS = {".venv", ".git", "tests", "node_modules", "build", "dist", "__pycache__", "scripts"}


@dataclass
class Graph:
    modules: set[str] = field(default_factory=set)
    edges: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))


def package_of(module: str) -> str:
    return module.split(".", 1)[0]


def floor_of(package: str) -> int | None:
    for level, packages in enumerate(FLOORS):
        if package in packages:
            return level
    return None


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _python_files(root: Path) -> Iterable[Path]:
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).parts
        if rel[0] in SKIP_DIRS or any(part in SKIP_DIRS for part in rel[:-1]):
            continue
        if rel[0].endswith(".py"):  # loose top-level scripts are not packages
            continue
        yield path


def _resolve(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    base = module.split(".")
    if not is_package:
        base = base[:-1]
    base = base[: len(base) - (node.level - 1)] if node.level > 1 else base
    return ".".join([*base, node.module] if node.module else base)


def build(root: Path = ROOT) -> Graph:
    graph = Graph()
    sources: dict[str, tuple[Path, bool]] = {}
    for path in _python_files(root):
        name = _module_name(path, root)
        sources[name] = (path, path.name == "__init__.py")
        graph.modules.add(name)
    ours = {package_of(m) for m in graph.modules}

    def known(target: str) -> str | None:
        # "from pkg import name" names a submodule or an attribute: take the longest module we have.
        while target:
            if target in graph.modules:
                return target
            target = target.rpartition(".")[0]
        return None

    for name, (path, is_package) in sources.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = _resolve(name, is_package, node)
                targets = [f"{base}.{alias.name}" for alias in node.names] or [base]
            for target in targets:
                if package_of(target) not in ours:
                    continue
                resolved = known(target)
                if resolved and resolved != name:
                    graph.edges[name].add(resolved)
    return graph


def circles(graph: Graph) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0
    for start in sorted(graph.modules):
        if start in index:
            continue
        work = [(start, iter(sorted(graph.edges.get(start, ()))))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.edges.get(child, ())))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return sorted(found)


def floor_breaches(graph: Graph) -> list[tuple[str, str]]:
    """Imports that go up a floor, across to a sibling package, or into a top-level tool."""
    breaches = []
    for source, targets in graph.edges.items():
        src_pkg = package_of(source)
        for target in targets:
            dst_pkg = package_of(target)
            if src_pkg == dst_pkg:
                continue
            if dst_pkg in TOP:
                breaches.append((source, target))
                continue
            if src_pkg in TOP:
                continue
            src_floor, dst_floor = floor_of(src_pkg), floor_of(dst_pkg)
            if src_floor is None or dst_floor is None or dst_floor >= src_floor:
                breaches.append((source, target))
    return sorted(breaches)


def room_of(module: str) -> tuple[str, int] | None:
    """The room a module lives in and its floor inside its package (None: not in a room)."""
    for level, rooms in enumerate(ROOMS.get(package_of(module), ())):
        for room in rooms:
            if module == room or module.startswith(room + "."):
                return room, level
    return None


def room_breaches(graph: Graph) -> list[tuple[str, str]]:
    """Imports inside a package that go up its floors or across to a sibling room."""
    breaches = []
    for source, targets in graph.edges.items():
        src = room_of(source)
        for target in targets:
            dst = room_of(target)
            if package_of(source) != package_of(target) or src is None or dst is None:
                continue
            if src[0] != dst[0] and dst[1] >= src[1]:
                breaches.append((source, target))
    return sorted(breaches)


def unplaced(graph: Graph) -> list[str]:
    """Modules of a package with rooms that belong to none (every module must have a floor)."""
    return sorted(
        m for m in graph.modules
        if package_of(m) in ROOMS and m != package_of(m) and room_of(m) is None
    )


def package_edges(graph: Graph) -> dict[tuple[str, str], int]:
    counts: dict[tuple[str, str], int] = defaultdict(int)
    for source, targets in graph.edges.items():
        for target in targets:
            if package_of(source) != package_of(target):
                counts[(package_of(source), package_of(target))] += 1
    return dict(sorted(counts.items()))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--modules", action="store_true", help="print every module-to-module edge")
    parser.add_argument("--dot", action="store_true", help="print the package graph as Graphviz")
    parser.add_argument("--root", type=Path, default=ROOT, help="the project's folder")
    args = parser.parse_args(argv)
    graph = build(args.root)
    if args.dot:
        print("digraph imports {\n  rankdir=BT;")
        for (src, dst), count in package_edges(graph).items():
            print(f'  "{src}" -> "{dst}" [label={count}];')
        print("}")
        return 0
    packages: dict[str, int] = defaultdict(int)
    for module in graph.modules:
        packages[package_of(module)] += 1
    print(f"{len(graph.modules)} modules in {len(packages)} packages, "
          f"{sum(len(t) for t in graph.edges.values())} import edges")
    print("\npackage -> package (module edges)")
    for (src, dst), count in package_edges(graph).items():
        print(f"  {src:12} -> {dst:12} {count}")
    if args.modules:
        print("\nmodule edges")
        for source in sorted(graph.edges):
            for target in sorted(graph.edges[source]):
                print(f"  {source} -> {target}")
    found = circles(graph)
    print(f"\nimport circles: {len(found)}")
    for component in found:
        print("  " + " <-> ".join(component))
    breaches = floor_breaches(graph) + room_breaches(graph)
    print(f"floor breaches: {len(breaches)}")
    for source, target in breaches:
        print(f"  {source} -> {target}")
    homeless = unplaced(graph)
    if homeless:
        print(f"modules in no room: {', '.join(homeless)}")
    return 1 if found or breaches or homeless else 0


if __name__ == "__main__":
    sys.exit(main())
