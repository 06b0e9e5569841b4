"""A PostgreSQL server of the bench's own (initdb, pg_ctl), to restart under load: the shared
server at 127.0.0.1:5432 serves everyone else's tests and must never be restarted.

Started as the ``postgres`` user when run as root (initdb refuses root), on 127.0.0.1 at a
free port, with its socket in its own folder; ``restart`` is ``pg_ctl restart -m immediate``
(what a crash or an OOM kill followed by the service manager's restart looks like) and
returns how long the database itself was away.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

BIN_DIRS = sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True)


def _tool(name: str) -> str | None:
    for folder in BIN_DIRS:
        if (folder / name).is_file():
            return str(folder / name)
    return shutil.which(name)


def available() -> bool:
    return _tool("initdb") is not None and _tool("pg_ctl") is not None


class PrivatePostgres:
    def __init__(self, port: int) -> None:
        # Its own folder right under the temporary root: the postgres user must reach it,
        # and a test's or bench's scratch folder is the caller's alone (mode 0700).
        self.folder, self.port = Path(tempfile.mkdtemp(prefix="vsr_private_pg_")), port
        self.data = self.folder / "data"
        self.log = self.folder / "postgres.log"

    @property
    def admin_url(self) -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        cmd = list(args)
        if os.geteuid() == 0:
            cmd = ["runuser", "-u", "postgres", "--", *cmd]
        return subprocess.run(cmd, check=check, capture_output=True, text=True)

    def start(self) -> None:
        initdb, pg_ctl = _tool("initdb"), _tool("pg_ctl")
        assert initdb and pg_ctl, "PostgreSQL's initdb and pg_ctl are not installed"
        if os.geteuid() == 0:
            shutil.chown(self.folder, "postgres", "postgres")
        out = self._run(
            initdb,
            "-D",
            str(self.data),
            "-U",
            "postgres",
            "--auth=trust",
            "-E",
            "UTF8",
            check=False,
        )
        if out.returncode != 0:
            raise RuntimeError(f"initdb failed: {out.stdout}{out.stderr}")
        self._pg_ctl("start")

    def _options(self) -> str:
        return (
            f"-p {self.port} -c listen_addresses=127.0.0.1 "
            f"-c unix_socket_directories={self.folder} -c fsync=off -c max_connections=200"
        )

    def _pg_ctl(self, action: str, *extra: str) -> None:
        pg_ctl = _tool("pg_ctl")
        assert pg_ctl
        out = self._run(
            pg_ctl,
            action,
            "-D",
            str(self.data),
            "-l",
            str(self.log),
            "-w",
            "-t",
            "60",
            "-o",
            self._options(),
            *extra,
            check=False,
        )
        if out.returncode != 0:
            raise RuntimeError(
                f"pg_ctl {action} failed: {out.stdout}{out.stderr}"
                f"{self.log.read_text()[-2000:] if self.log.exists() else ''}"
            )

    def create_database(self, name: str) -> str:
        """A new database on this server; its URL."""
        from sqlalchemy import text

        from vsr_core.db import make_engine

        admin = make_engine(self.admin_url).execution_options(isolation_level="AUTOCOMMIT")
        with admin.connect() as c:
            c.execute(text(f'CREATE DATABASE "{name}"'))
        admin.dispose()
        return self.admin_url.rsplit("/", 1)[0] + "/" + name

    def restart(self) -> float:
        """``pg_ctl restart -m immediate``; seconds until it accepts connections again."""
        t0 = time.perf_counter()
        self._pg_ctl("restart", "-m", "immediate")
        return time.perf_counter() - t0

    def stop(self) -> None:
        pg_ctl = _tool("pg_ctl")
        if pg_ctl and self.data.is_dir():
            self._run(pg_ctl, "stop", "-D", str(self.data), "-m", "immediate", "-w", check=False)
        shutil.rmtree(self.folder, ignore_errors=True)
