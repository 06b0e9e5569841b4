"""docs/security.md against a real `vsr serve --workers 2`: the login throttle holds
across worker processes and forged X-Forwarded-For, and killing the supervisor with SIGKILL
ends its workers so the next `vsr serve` can start on the same port."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from sqlalchemy.engine import Engine
from sqlmodel import Session

from tests.support.admins import create_owner
from tests.support.browser import free_port

PASSWORD = "correct horse battery"


def _serve(db_url: str, port: int, log: Path, **env: str) -> subprocess.Popen[bytes]:
    # This interpreter's own console script: the first `vsr` on PATH may belong to another
    # checkout (a copied venv's activate script), which would test that code instead.
    own = Path(sys.executable).with_name("vsr")
    vsr = str(own) if own.exists() else (shutil.which("vsr") or "vsr")
    full_env = {**os.environ, "SECRET_KEY": "serve-test-" + "k" * 32, **env}
    full_env.pop("FORWARDED_ALLOW_IPS", None)
    proc = subprocess.Popen(
        [vsr, "serve", "--port", str(port), "--workers", "2", "--database-url", db_url],
        env=full_env,
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    for _ in range(300):
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                return proc
        except httpx.HTTPError:
            pass
        if proc.poll() is not None:
            pytest.fail("vsr serve exited: " + log.read_text())
        time.sleep(0.1)
    pytest.fail("vsr serve did not answer: " + log.read_text())


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry.name))
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        proc.wait(timeout=20)


def _attempt(base: str, k: int, password: str) -> int:
    # A new connection each time (either worker may answer) and a new forwarded address.
    with httpx.Client(base_url=base, headers={"Connection": "close"}) as c:
        form = c.get("/admin/login")
        token = re.search(r'name="csrf_token" value="([^"]+)"', form.text)
        assert token
        return c.post(
            "/admin/login",
            data={"username": "alice", "password": password, "csrf_token": token.group(1)},
            headers={"X-Forwarded-For": f"198.51.100.{k}"},
        ).status_code


def test_login_throttle_holds_across_workers_and_forged_forwarded_for(
    db_url: str, engine: Engine, tmp_path: Path
) -> None:
    with Session(engine) as s:
        create_owner(s, "alice", PASSWORD)
    port = free_port()
    proc = _serve(db_url, port, tmp_path / "server.log")
    base = f"http://127.0.0.1:{port}"
    try:
        assert [_attempt(base, k, "wrong-password") for k in range(5)] == [401] * 5
        assert [_attempt(base, k, PASSWORD) for k in range(5, 9)] == [429] * 4
    finally:
        _stop(proc)
    # Behind a configured proxy (TRUSTED_PROXIES) its X-Forwarded-For is the address.
    proc = _serve(db_url, port, tmp_path / "server.log", TRUSTED_PROXIES="127.0.0.1")
    try:
        assert _attempt(base, 200, PASSWORD) == 303  # a fresh address: not held up
    finally:
        _stop(proc)


def test_sigkill_of_the_supervisor_ends_its_workers(db_url: str, tmp_path: Path) -> None:
    port = free_port()
    log = tmp_path / "server.log"
    proc = _serve(db_url, port, log)
    workers = _children(proc.pid)
    try:
        assert len([w for w in workers if _alive(w)]) >= 2, workers
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        deadline = time.monotonic() + 20
        while any(_alive(w) for w in workers) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not any(_alive(w) for w in workers), "workers outlived their supervisor"
        again = _serve(db_url, port, log)  # the port is free again
        _stop(again)
    finally:
        for w in workers:
            if _alive(w):
                os.kill(w, signal.SIGKILL)
