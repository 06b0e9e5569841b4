"""The site and the CLI run without PyTorch (matching's model is the optional extra [match]):
each command runs in a subprocess where ``import torch`` fails, as on an install without the
extra, and `vsr match` says in one line which extra to install."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

BIN = Path(sys.executable).parent
ROOT = Path(__file__).resolve().parents[2]

# None in sys.modules: `import torch` raises ModuleNotFoundError and find_spec finds nothing.
NO_TORCH = "import sys\nsys.modules['torch'] = None\n"

APP = """
import sys
from fastapi.testclient import TestClient
from vsr_core.settings import Settings
from webapp.app import create_app
client = TestClient(create_app(Settings(database_url=sys.argv[1], secret_key="k" * 40)))
assert client.get("/healthz").status_code == 200
assert client.get("/admin/login").status_code == 200
assert "torch" not in {m for m, v in sys.modules.items() if v is not None}
print("site ok")
"""


def _env(tmp_path: Path, db_url: str) -> dict[str, str]:
    shim = tmp_path / "shim"
    shim.mkdir(exist_ok=True)
    (shim / "sitecustomize.py").write_text(NO_TORCH)
    env = {k: v for k, v in os.environ.items() if k != "VSR_DEBUG"}
    path = os.pathsep.join(p for p in (str(shim), str(ROOT), env.get("PYTHONPATH")) if p)
    env.update(PYTHONPATH=path, DATABASE_URL=db_url, HF_HUB_OFFLINE="1")
    return env


def _run(cmd: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=cwd, timeout=300)


def test_site_and_cli_run_without_torch_and_match_names_the_extra(tmp_path: Path) -> None:
    db_url = f"sqlite:///{tmp_path / 'no_torch.db'}"
    env = _env(tmp_path, db_url)
    probe = _run([sys.executable, "-c", "import torch"], env, tmp_path)
    assert probe.returncode != 0 and "torch" in probe.stderr  # the shim works
    for cmd in (["vsr", "serve", "--help"], ["vsr", "db", "upgrade"], ["vsr", "study", "list"]):
        r = _run([str(BIN / cmd[0]), *cmd[1:]], env, tmp_path)
        assert r.returncode == 0, (cmd, r.stderr)
    site = _run([sys.executable, "-c", APP, db_url], env, tmp_path)
    assert site.returncode == 0 and "site ok" in site.stdout, site.stderr
    r = _run([str(BIN / "vsr"), "match", "--k", "3"], env, tmp_path)
    assert r.returncode == 1, r.stdout
    assert r.stderr.strip().splitlines() == [
        "error: matching needs the optional extra [match] (sentence-transformers and PyTorch; "
        "torch is missing): pip install -e '.[match]' (or bash scripts/setup.sh match)"
    ], r.stderr


def test_a_library_that_fails_on_import_is_the_same_one_line(tmp_path: Path) -> None:
    """Found but failing on import (a partial install): the loader names the extra too, and
    `vsr match` prints it on its usual "cannot load model" line."""
    import pytest

    from matching import model_libraries

    (tmp_path / "half_installed_lib").mkdir()
    (tmp_path / "half_installed_lib" / "__init__.py").write_text("import torch_not_here\n")
    sys.path.insert(0, str(tmp_path))
    try:
        with pytest.raises(model_libraries.MissingModelLibraries) as caught:
            model_libraries.load("half_installed_lib")
    finally:
        sys.path.remove(str(tmp_path))
    assert "[match]" in str(caught.value) and "torch_not_here is missing" in str(caught.value)
