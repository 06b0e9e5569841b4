"""The server under load: ``uvicorn webapp.app:create_server_app`` with N workers, as ``vsr serve``
runs it, started, SIGKILLed and restarted on demand."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

from bench.load.database import ROOT

# --- the server -------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    def __init__(self, url: str, port: int, workers: int, log: Path) -> None:
        self.url, self.port, self.workers, self.log = url, port, workers, log
        self.log_from = 0
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        # Readable bench ids and ~100 validators from one address: no platform formats and
        # no per-address limit on new identities here.
        env = dict(
            os.environ,
            DATABASE_URL=self.url,
            SECRET_KEY="load-bench-" + "s" * 40,
            PLATFORM_ID_FORMATS="safe",
            NEW_WORKERS_PER_ADDRESS="0",
            NEW_BATCHES_PER_ADDRESS="0",
            NEW_WORKERS_PER_STUDY="0",
        )
        cmd = [
            sys.executable,
            "-m",
            "uvicorn",
            "webapp.app:create_server_app",
            "--factory",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--workers",
            str(self.workers),
            "--no-access-log",
            "--log-level",
            "warning",
            "--backlog",
            "4096",
        ]
        self.log_from = self.log.stat().st_size if self.log.exists() else 0
        # Own process group: SIGKILL must take the master and every worker at once.
        self.proc = subprocess.Popen(
            cmd,
            cwd=ROOT,
            env=env,
            stdout=self.log.open("ab"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"http://127.0.0.1:{self.port}/healthz", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            if self.proc.poll() is not None:
                sys.exit("server exited:\n" + self.log.read_text()[-3000:])
            time.sleep(0.1)
        sys.exit("server did not become healthy in 60 s")

    def wait_warmed(self, timeout: float = 1200) -> float:
        """Seconds until the server's start-up warm-up of the dashboard's figures finished
        (webapp.admin.warmup logs it): a run measures the site as it serves once started,
        not the recount a start pays on a large database."""
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout:
            with self.log.open("rb") as fh:
                fh.seek(self.log_from)
                text = fh.read().decode(errors="replace")
            if "dashboard warm-up done" in text or "dashboard warm-up stopped" in text:
                return time.monotonic() - t0
            if self.proc is not None and self.proc.poll() is not None:
                sys.exit("server exited:\n" + text[-3000:])
            time.sleep(0.5)
        sys.exit(f"the server's warm-up did not finish in {timeout:.0f} s")

    def kill(self) -> None:
        assert self.proc is not None
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
