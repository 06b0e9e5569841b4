"""Waiting for a site a test started as a subprocess (`vsr serve`, `scripts/demo.sh`)."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable

import httpx


def wait_healthy(
    proc: subprocess.Popen[str] | subprocess.Popen[bytes],
    site: str,
    *,
    why_not: Callable[[], str] = lambda: "the site did not start",
    seconds: float = 60,
) -> None:
    """Return once ``site``/healthz answers 200; fail with ``why_not()`` if the process ends
    or ``seconds`` pass first."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            if httpx.get(f"{site}/healthz", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        assert proc.poll() is None and time.monotonic() < deadline, why_not()
        time.sleep(0.2)
