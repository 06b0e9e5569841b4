"""The house's rules (docs/DESIGN.md#components-and-who-may-import-whom): no import circle between
modules, no import up a floor or across to a sibling (vsr_core < collection, webapp, matching,
migrations < vsr_dataset < vsr_cli; inside webapp: http < crowd, images < generate, validate <
platforms < admin < app), and every web-app module in a room. import-linter checks them from the
contracts in pyproject.toml; these tests check the contracts cover every package and that
`lint-imports` fails on a planted breach."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"
# Folders of Python files that are not importable packages of the project.
NOT_PACKAGES = {"tests", "scripts", "build", "dist", "node_modules"}


def _config() -> dict[str, Any]:
    with open(ROOT / "pyproject.toml", "rb") as handle:
        config: dict[str, Any] = tomllib.load(handle)["tool"]["importlinter"]
    return config


def _lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    # The folder's own packages first: lint-imports puts its working folder on sys.path.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", "--no-logo"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _not_python(_folder: str, names: list[str]) -> list[str]:
    """Files other than Python modules (folders have no suffix), and bytecode caches."""
    return [n for n in names if n == "__pycache__" or (Path(n).suffix not in ("", ".py"))]


def _copy_of_the_project(root: Path) -> Path:
    """The project's Python files and import contracts, nothing else, in a folder of its own."""
    shutil.copy(ROOT / "pyproject.toml", root / "pyproject.toml")
    for package in _config()["root_packages"]:
        if "." in package:
            continue  # a folder inside another root package, copied with it
        shutil.copytree(ROOT / package, root / package, ignore=_not_python)
    return root


def test_the_project_keeps_its_import_contracts() -> None:
    result = _lint_imports(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    analyzed = re.search(r"Analyzed (\d+) files", result.stdout)
    assert analyzed is not None, result.stdout
    assert int(analyzed.group(1)) > 100  # the whole project was read, not an empty folder


def test_every_package_has_a_floor() -> None:
    """The generic names are gone for good; every folder of Python code is in the contracts."""
    folders = {
        folder.name
        for folder in ROOT.iterdir()
        if folder.is_dir()
        and not folder.name.startswith(".")
        and folder.name not in NOT_PACKAGES
        and any(folder.rglob("*.py"))
    }
    config = _config()
    roots = {p for p in config["root_packages"] if "." not in p}
    assert not folders & {"core", "dataset"}
    assert folders == roots, folders ^ roots
    floors = next(c for c in config["contracts"] if c["type"] == "layers" and "containers" not in c)
    floored = {p.strip() for layer in floors["layers"] for p in layer.split("|")}
    assert floored == roots, floored ^ roots


FLOORS = "packages stand on the floors below them"
ROOMS = "the web app's rooms stand on the rooms below them"
CIRCLES = "no import circle between modules"
# A breach planted in a copy of the project, and the contract it breaks.
BREACHES: dict[str, tuple[str, dict[str, str]]] = {
    "a lazy import up two floors": (
        FLOORS,
        {"vsr_core/planted.py": "def f() -> None:\n    from vsr_dataset import export\n"},
    ),
    "an import across to a sibling": (
        FLOORS,
        {"matching/planted.py": "from collection import coco\n"},
    ),
    "a revision importing up a floor": (
        FLOORS,
        {"migrations/versions/9999_planted.py": "import vsr_cli.main\n"},
    ),
    "an import up a room": (
        ROOMS,
        {"webapp/crowd/planted.py": "from webapp.validate import queue\n"},
    ),
    "a circle through a lazy import": (
        CIRCLES,
        {
            "webapp/crowd/planted_a.py": "from webapp.crowd import planted_b\n",
            "webapp/crowd/planted_b.py": "def f():\n    from webapp.crowd import planted_a\n",
        },
    ),
    "a web-app module in no room": (ROOMS, {"webapp/planted.py": ""}),
}


def test_the_contracts_are_the_ones_named_here() -> None:
    assert {c["name"] for c in _config()["contracts"]} == {FLOORS, ROOMS, CIRCLES}


@pytest.mark.parametrize(("contract", "files"), BREACHES.values(), ids=BREACHES.keys())
def test_lint_imports_fails_on_a_planted_breach(
    contract: str, files: dict[str, str], tmp_path: Path
) -> None:
    root = _copy_of_the_project(tmp_path)
    assert _lint_imports(root).returncode == 0  # the copy alone keeps the contracts
    for name, text in files.items():
        (root / name).write_text(text)
    result = _lint_imports(root)
    assert result.returncode == 1, result.stdout + result.stderr
    assert f"{contract} BROKEN" in result.stdout, result.stdout
