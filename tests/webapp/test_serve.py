"""`vsr serve` refuses to start, in one line, when it could not serve anyone.

(The browser test starts it for real and works through it.)
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from tests.support.serving import wait_healthy


def _exe() -> str:
    # This interpreter's own console script: the first `vsr` on PATH may belong to another
    # checkout (a copied venv's activate script), which would test that code instead.
    own = Path(sys.executable).with_name("vsr")
    return str(own) if own.exists() else (shutil.which("vsr") or "vsr")


def _vsr(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([_exe(), *args], capture_output=True, text=True, timeout=60, env=env)


def _wait_healthy(proc: subprocess.Popen[str], port: int) -> None:
    wait_healthy(proc, f"http://127.0.0.1:{port}", why_not=lambda: "vsr serve did not start")


def test_serve_needs_a_migrated_database(tmp_path: Path) -> None:
    empty = tmp_path / "empty.db"
    empty.touch()  # an SQLite file without tables
    r = _vsr("serve", "--database-url", f"sqlite:///{empty}", "--port", "1")
    assert r.returncode == 1
    assert r.stderr.strip().splitlines() == [
        f"error: the database sqlite:///{empty} has no schema yet: run `vsr db upgrade` first"
    ]


def test_serve_never_creates_a_database(tmp_path: Path) -> None:
    missing = tmp_path / "missing.db"
    r = _vsr("serve", "--database-url", f"sqlite:///{missing}", "--port", "1")
    assert r.returncode == 1 and len(r.stderr.strip().splitlines()) == 1
    assert f"error: no database at {missing}" in r.stderr
    assert "run `vsr db upgrade` first" in r.stderr
    assert not missing.exists()


def test_serve_checks_the_image_root(tmp_path: Path) -> None:
    r = _vsr("serve", "--image-root", str(tmp_path / "nope"))
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1
    assert "is not a directory" in r.stderr


def test_serve_help_lists_its_options() -> None:
    r = _vsr("serve", "--help")
    assert r.returncode == 0
    for option in (
        "--host",
        "--port",
        "--workers",
        "--database-url",
        "--image-root",
        "--reload",
        "--no-access-log",
    ):
        assert option in r.stdout


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _serve_and_get(sqlite_url: str, *flags: str) -> str:
    """Start `vsr serve` for real, answer one /healthz, stop it: what it printed."""
    import os
    import signal

    port = _free_port()
    env = dict(os.environ, SECRET_KEY="serve-test-" + "k" * 40)
    proc = subprocess.Popen(
        [_exe(), "serve", "--database-url", sqlite_url, "--port", str(port), *flags],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    try:
        _wait_healthy(proc, port)
    finally:
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=30)
    return out


def test_serve_logs_requests_unless_told_not_to(sqlite_url: str) -> None:
    """Behind nginx, which logs every request, `--no-access-log` spares the app's own line
    per request (docker-compose.yml)."""
    assert '"GET /healthz HTTP/1.1" 200' in _serve_and_get(sqlite_url)
    quiet = _serve_and_get(sqlite_url, "--no-access-log")
    assert "Uvicorn running" in quiet or "Application startup complete" in quiet
    assert "GET /healthz" not in quiet


OLD_PUBLIC_KEY = "dev-insecure-secret-change-me"  # the default earlier versions shipped


def _without_key(**extra: str) -> dict[str, str]:
    import os

    env = {k: v for k, v in os.environ.items() if k != "SECRET_KEY"}
    return {**env, **extra}


def test_serve_refuses_a_missing_or_public_key_off_loopback(sqlite_url: str) -> None:
    """The Dockerfile's command (`--host 0.0.0.0`) without SECRET_KEY, or with the old public
    default, or a short one, must not start: one line, exit 1."""
    cases = {
        "": "SECRET_KEY is not set",
        OLD_PUBLIC_KEY: "SECRET_KEY is the old public development default",
        "short-key": "SECRET_KEY is shorter than 32 characters",
    }
    for key, reason in cases.items():
        env = _without_key(**({"SECRET_KEY": key} if key else {}))
        r = _vsr("serve", "--host", "0.0.0.0", "--port", "1", "--database-url", sqlite_url, env=env)
        assert r.returncode == 1, (key, r.stderr)
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"error: {reason}: set SECRET_KEY"), lines
    # A set-but-public key is refused on loopback too: only an unset one is replaced there.
    r = _vsr(
        "serve",
        "--port",
        "1",
        "--database-url",
        sqlite_url,
        env=_without_key(SECRET_KEY=OLD_PUBLIC_KEY),
    )
    assert r.returncode == 1 and "old public development default" in r.stderr


def test_serve_on_loopback_without_key_refuses_forged_admin_cookies(sqlite_url: str) -> None:
    """Development on 127.0.0.1 starts without SECRET_KEY (saying so in one line) with a
    random key: an admin cookie forged with the old public default opens nothing."""
    import os
    import signal

    import httpx
    from sqlmodel import Session

    from tests.support.admins import create_owner
    from vsr_core.db import make_engine
    from webapp.admin.auth import COOKIE_NAME, make_session_cookie

    engine = make_engine(sqlite_url)
    with Session(engine) as session:
        admin = create_owner(session, "root", "a long admin password 1")
    engine.dispose()
    forged = make_session_cookie(OLD_PUBLIC_KEY, admin)
    port = _free_port()
    proc = subprocess.Popen(
        [_exe(), "serve", "--database-url", sqlite_url, "--port", str(port), "--workers", "2"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_without_key(),
    )
    try:
        _wait_healthy(proc, port)
        r = httpx.get(
            f"http://127.0.0.1:{port}/admin/api/overview.json",
            cookies={COOKIE_NAME: forged},
            follow_redirects=False,
        )
        assert r.status_code in (303, 401, 403), r.status_code  # 200 with the old default
    finally:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    notes = [ln for ln in err.splitlines() if "SECRET_KEY" in ln]
    assert notes == [
        "note: SECRET_KEY is not set: using a random key for this run (127.0.0.1 is loopback, "
        "development only; sessions end when the server stops)"
    ]
    assert os.environ.get("SECRET_KEY") != OLD_PUBLIC_KEY


def test_the_app_refuses_a_public_key() -> None:
    """`uvicorn webapp.app:create_server_app --factory` without `vsr serve` is refused too."""
    import pytest

    from vsr_core.settings import Settings
    from webapp.app import WeakSecretKeyError, create_app

    for key in ("", OLD_PUBLIC_KEY, "k" * 31):
        with pytest.raises(WeakSecretKeyError):
            create_app(Settings(database_url="sqlite://", secret_key=key))
