"""Benchmark: the README's one demo command (``bash scripts/demo.sh``) run twice on one fresh
database, each timed from the command to the site's first answer on ``/healthz``.

The first run samples the bundled slice and writes the demo data (and installs, when
``scripts/setup.sh`` finds the environment out of date); the second finds nothing changed
(setup.sh's install stamp, demo_data.sh's stamp next to the database) and only starts the
site. Prints both times and their ratio, measured in this run. The site is stopped after
each run; the database lives in a temporary folder.

    python bench/demo_rerun.py
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=1) as r:
            return bool(r.status == 200)
    except OSError:
        return False


def one_run(env: dict[str, str], port: int, log: Path) -> float:
    """Seconds from ``bash scripts/demo.sh`` to the site's first 200 on /healthz."""
    started = time.monotonic()
    with log.open("w") as out:
        proc = subprocess.Popen(
            ["bash", "scripts/demo.sh"],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: the site goes with it
        )
    try:
        while not answers(f"http://127.0.0.1:{port}/healthz"):
            if proc.poll() is not None:
                raise SystemExit(f"scripts/demo.sh ended ({proc.returncode}):\n{log.read_text()}")
            if time.monotonic() - started > 900:
                raise SystemExit(f"no answer after 900 s:\n{log.read_text()}")
            time.sleep(0.05)
        return time.monotonic() - started
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        port = free_port()
        env = {k: v for k, v in os.environ.items() if k not in ("BASE_URL", "VIRTUAL_ENV")}
        env |= {
            "PORT": str(port),
            "DATABASE_URL": f"sqlite:///{tmp}/vsr_demo.db",
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
        }
        first = one_run(env, port, Path(tmp) / "first.log")
        second = one_run(env, port, Path(tmp) / "second.log")
        skipped = "demo data already in place" in (Path(tmp) / "second.log").read_text()
    print(f"first run (fresh database): {first:.1f} s to the site's first answer")
    print(f"second run (nothing changed): {second:.1f} s; data steps skipped: {skipped}")
    print(f"ratio first / second: {first / second:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
