"""`vsr serve` refuses to start, in one line, when it could not serve anyone.

(The browser test starts it for real and works through it.)
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path


def _vsr(*args: str) -> subprocess.CompletedProcess[str]:
    # This interpreter's own console script: the first `vsr` on PATH may belong to another
    # checkout (a copied venv's activate script), which would test that code instead.
    own = Path(sys.executable).with_name("vsr")
    exe = str(own) if own.exists() else (shutil.which("vsr") or "vsr")
    return subprocess.run([exe, *args], capture_output=True, text=True, timeout=60)


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
    for option in ("--host", "--port", "--workers", "--database-url", "--image-root", "--reload",
                   "--no-access-log"):
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
    import time

    import httpx

    own = Path(sys.executable).with_name("vsr")
    exe = str(own) if own.exists() else (shutil.which("vsr") or "vsr")
    port = _free_port()
    env = dict(os.environ, SECRET_KEY="serve-test-" + "k" * 40)
    proc = subprocess.Popen(
        [exe, "serve", "--database-url", sqlite_url, "--port", str(port), *flags],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert proc.poll() is None and time.monotonic() < deadline, "vsr serve did not start"
            time.sleep(0.2)
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
