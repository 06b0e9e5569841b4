"""Plumbing shared by the real-browser tests: a running `vsr serve` and Debian's Chromium."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

CHROMIUM = "/usr/bin/chromium"
# Never a downloaded browser; no background networking (the machines have no internet).
CHROMIUM_ARGS = ["--no-sandbox", "--headless", "--disable-background-networking", "--disable-gpu"]


def require_chromium() -> None:
    if not Path(CHROMIUM).exists():
        pytest.skip("Debian chromium not installed")


def launch_chromium(playwright: Any) -> Any:
    return playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)


def screenshot(page: Any, path: Path, full_page: bool = False) -> None:
    """A screenshot to look at afterwards. Headless Chromium now and then answers a capture
    with "Unable to capture screenshot" while it composites (seen once in a full run of the
    demo walk-through); the capture is retried then, nothing a test asserts is."""
    from playwright.sync_api import Error

    for attempt in range(3):
        try:
            page.screenshot(path=str(path), full_page=full_page)
            return
        except Error as exc:
            if "Unable to capture screenshot" not in str(exc) or attempt == 2:
                raise
            page.wait_for_timeout(500)


def watch_errors(page: Any) -> list[str]:
    """Collect the page's script errors and Content-Security-Policy violations (a page whose
    own scripts the policy blocks), for the test to assert the list stays empty."""
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on(
        "console",
        lambda m: (
            errors.append(m.text)
            if m.type == "error" and "Content Security Policy" in m.text
            else None
        ),
    )
    return errors


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def running_site(
    db_url: str, image_root: Path, tmp_path: Path, env: dict[str, str], port: int | None = None
) -> Iterator[str]:
    """Start `vsr serve` on a free port (or ``port``, e.g. one BASE_URL already names) and
    yield its base URL once /healthz answers."""
    port = port or free_port()
    full_env = {**os.environ, **env}
    # This interpreter's own console script: the first `vsr` on PATH may belong to another
    # checkout (a copied venv's activate script), which would test that code instead.
    own = Path(sys.executable).with_name("vsr")
    vsr = str(own) if own.exists() else (shutil.which("vsr") or "vsr")
    log_path = tmp_path / "server.log"
    with log_path.open("w") as log:
        proc = subprocess.Popen(
            [
                vsr,
                "serve",
                "--port",
                str(port),
                "--database-url",
                db_url,
                "--image-root",
                str(image_root),
            ],
            env=full_env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        base = f"http://127.0.0.1:{port}"
        try:
            for _ in range(150):
                try:
                    if httpx.get(base + "/healthz", timeout=1).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                if proc.poll() is not None:
                    pytest.fail("vsr serve exited: " + log_path.read_text())
                time.sleep(0.1)
            yield base
        finally:
            proc.terminate()
            proc.wait(timeout=10)
