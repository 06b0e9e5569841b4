"""CPU accounting of the server and PostgreSQL processes per phase, robust to other load on the
machine (/proc tick counts)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench.load.server import Server

# --- CPU accounting (robust to other load on the machine) -------------------------------------

CLK = os.sysconf("SC_CLK_TCK")


def processes_cpu(database: str, pgid: int = -1) -> Iterator[tuple[str, int, float]]:
    """(kind, pid, CPU seconds so far) of the processes in process group ``pgid`` ("server")
    and of the PostgreSQL backends serving ``database`` ("postgres"), from /proc."""
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
            fields = stat.rsplit(")", 1)[1].split()
            if int(fields[2]) == pgid:  # field 5: process group
                kind = "server"
            elif "(postgres)" in stat and database in (d / "cmdline").read_text():
                kind = "postgres"
            else:
                continue
        except (OSError, IndexError, ValueError):
            continue
        yield kind, int(d.name), (int(fields[11]) + int(fields[12])) / CLK


class CpuMeter:
    """CPU seconds used during a phase by the server's processes, this run's PostgreSQL
    backends and this client. Sampled every 0.2 s, because pooled connections come and go
    and a process that exits takes its counters with it."""

    def __init__(self, server: Server) -> None:
        self.server = server
        self.database = server.url.rsplit("/", 1)[-1]
        self.first: dict[tuple[str, int], float] = {}
        self.last: dict[tuple[str, int], float] = {}
        self.history: list[tuple[float, dict[str, float]]] = []  # (when, CPU so far)
        self.client0 = self._client()

    @staticmethod
    def _client() -> float:
        import resource

        me = resource.getrusage(resource.RUSAGE_SELF)
        return me.ru_utime + me.ru_stime

    def sample(self, initial: bool = False) -> None:
        pgid = self.server.proc.pid if self.server.proc else -1
        for kind, pid, cpu in processes_cpu(self.database, pgid):
            key = (kind, pid)
            if key not in self.first:
                self.first[key] = cpu if initial else 0.0
            self.last[key] = cpu

    async def run(self, stop: asyncio.Event) -> None:
        self.sample(initial=True)
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 0.2)
            self.sample()
            self.history.append((time.monotonic(), self.result()))

    def result(self) -> dict[str, float]:
        out = {"server": 0.0, "postgres": 0.0}
        for key, cpu in self.last.items():
            out[key[0]] += cpu - self.first[key]
        out["client"] = self._client() - self.client0
        return out


async def measured(
    server: Server, work: Any, history: list[tuple[float, dict[str, float]]] | None = None
) -> dict[str, float]:
    meter = CpuMeter(server)
    stop = asyncio.Event()
    task = asyncio.create_task(meter.run(stop))
    await work
    stop.set()
    await task
    if history is not None:
        history.extend(meter.history)
    return meter.result()
