"""The house's rules (issue 14): no import circle between modules, no import up a floor or
across to a sibling (vsr_core < collection, webapp, matching, migrations < vsr_dataset < vsr_cli;
inside webapp: http < crowd, images < generate, validate < admin < app), and every web-app
module in a room. The checker is scripts/import_graph.py, which anyone can run by hand."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def import_graph() -> ModuleType:
    script = ROOT / "scripts" / "import_graph.py"
    spec = importlib.util.spec_from_file_location("import_graph", script)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["import_graph"] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


def test_the_project_has_no_import_circle(import_graph: ModuleType) -> None:
    graph = import_graph.build(ROOT)
    assert len(graph.modules) > 100  # the whole project was read, not an empty folder
    assert import_graph.circles(graph) == []


def test_no_import_goes_up_a_floor_or_across_to_a_sibling(import_graph: ModuleType) -> None:
    graph = import_graph.build(ROOT)
    assert import_graph.floor_breaches(graph) == []
    assert import_graph.room_breaches(graph) == []
    assert import_graph.unplaced(graph) == []


def test_the_packages_are_the_documented_ones(import_graph: ModuleType) -> None:
    """The generic names are gone for good; every package of ours has a floor."""
    graph = import_graph.build(ROOT)
    packages = {import_graph.package_of(m) for m in graph.modules}
    assert not packages & {"core", "dataset"}
    floored = {p for floor in import_graph.FLOORS for p in floor} | set(import_graph.TOP)
    assert packages <= floored, packages - floored


def _tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_the_checker_finds_a_circle_through_a_lazy_import(
    import_graph: ModuleType, tmp_path: Path
) -> None:
    root = _tree(tmp_path, {
        "webapp/__init__.py": "",
        "webapp/crowd/__init__.py": "",
        "webapp/crowd/a.py": "from webapp.crowd import b\n",
        "webapp/crowd/b.py": "def f():\n    from webapp.crowd.a import x\n",
    })
    graph = import_graph.build(root)
    assert import_graph.circles(graph) == [["webapp.crowd.a", "webapp.crowd.b"]]
    assert import_graph.main(["--root", str(root)]) == 1


def test_the_checker_finds_upward_and_sideways_imports(
    import_graph: ModuleType, tmp_path: Path
) -> None:
    root = _tree(tmp_path, {
        "vsr_core/__init__.py": "",
        "vsr_core/models.py": "from vsr_dataset import export\n",  # up two floors
        "vsr_dataset/__init__.py": "",
        "vsr_dataset/export.py": "import vsr_core.models\n",
        "matching/__init__.py": "from collection import coco\n",  # across to a sibling
        "collection/__init__.py": "",
        "collection/coco.py": "",
        "webapp/__init__.py": "",
        "webapp/crowd/__init__.py": "",
        "webapp/crowd/leases.py": "from webapp.validate.queue import q\n",  # up a room
        "webapp/validate/__init__.py": "",
        "webapp/validate/queue.py": "from webapp.crowd import leases\n",
        "webapp/stray.py": "",
    })
    graph = import_graph.build(root)
    assert import_graph.floor_breaches(graph) == [
        ("matching", "collection.coco"), ("vsr_core.models", "vsr_dataset.export"),
    ]
    assert import_graph.room_breaches(graph) == [("webapp.crowd.leases", "webapp.validate.queue")]
    assert import_graph.unplaced(graph) == ["webapp.stray"]
