"""Re-running the demo's data steps (`vsr admin create --update` with the same password, as
scripts/demo_data.sh does) keeps the admin signed in; a new password still ends sessions."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from fastapi.testclient import TestClient
from sqlalchemy.engine import Engine

from tests.webapp.admin.test_admin import login, make_admin_app
from tests.webapp.admin.test_sessions import _page

VSR = str(Path(sys.executable).with_name("vsr"))


def _admin_create(db_url: str, password: str) -> None:
    env = {**os.environ, "VSR_ADMIN_PASSWORD": password}
    r = subprocess.run(
        [
            VSR,
            "admin",
            "create",
            "--username",
            "alice",
            "--update",
            "--study",
            "vsr",
            "--role",
            "owner",
            "--database-url",
            db_url,
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr


def test_the_same_password_again_keeps_sessions(
    db_url: str, engine: Engine, tmp_path: Path
) -> None:
    from tests.webapp.admin.test_admin import PASSWORD

    _admin_create(db_url, PASSWORD)
    app = make_admin_app(db_url, engine, tmp_path)
    client = TestClient(app)
    login(client)
    cookie = client.cookies["vsr_admin"]
    _admin_create(db_url, PASSWORD)  # the demo's data steps run again
    assert _page(TestClient(app), cookie) == 200
    _admin_create(db_url, PASSWORD + " changed")
    assert _page(TestClient(app), cookie) == 303
