"""The benchmark's own memory: peak RSS and PSS of its process tree (this process, the server's
master and workers, the busy-core process), sampled from /proc in a thread.

RSS counts a page in every process that maps it (the server's forked workers share much of
their parent's), PSS divides it among them: the tree's PSS is what the machine gives it, its
RSS an upper bound. PostgreSQL's backends are not in the tree (the server's own memory).
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from pathlib import Path


def tree(pid: int) -> list[int]:
    """``pid`` and its descendants now."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            for task in os.listdir(f"/proc/{p}/task"):
                children = Path(f"/proc/{p}/task/{task}/children").read_text()
                todo.extend(int(c) for c in children.split())
        except OSError:
            continue
    return out


def rss_pss_kb(pid: int) -> tuple[int, int]:
    """(RSS, PSS) of one process in kB; (0, 0) when it has gone."""
    try:
        lines = Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()
    except OSError:
        return 0, 0
    fields = {ln.split(":")[0]: ln.split()[1] for ln in lines[1:] if ":" in ln}
    try:
        return int(fields.get("Rss", 0)), int(fields.get("Pss", 0))
    except ValueError:
        return 0, 0


@dataclass
class Peak:
    rss_kb: int = 0  # the tree's largest sum of RSS in one sample
    pss_kb: int = 0  # the tree's largest sum of PSS in one sample
    own_rss_kb: int = 0  # this process alone
    processes: int = 0  # in the tree at the sample with the largest PSS

    def line(self) -> str:
        gb = 1024**2
        return (
            f"bench process tree peak memory: PSS {self.pss_kb / gb:.2f} GB, "
            f"RSS {self.rss_kb / gb:.2f} GB ({self.processes} processes; "
            f"this process alone RSS {self.own_rss_kb / gb:.2f} GB)"
        )


class TreeMemory:
    """Samples the tree of ``pid`` every ``every`` seconds until stopped; ``peak`` so far."""

    def __init__(self, pid: int | None = None, every: float = 0.5) -> None:
        self.pid = pid or os.getpid()
        self.every = every
        self.peak = Peak()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="tree-memory", daemon=True)

    def sample(self) -> None:
        pids = tree(self.pid)
        sizes = [rss_pss_kb(p) for p in pids]
        rss, pss = sum(s[0] for s in sizes), sum(s[1] for s in sizes)
        self.peak.rss_kb = max(self.peak.rss_kb, rss)
        if pss > self.peak.pss_kb:
            self.peak.pss_kb, self.peak.processes = pss, len(pids)
        self.peak.own_rss_kb = max(self.peak.own_rss_kb, sizes[0][0])

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            self.sample()

    def __enter__(self) -> TreeMemory:
        self.sample()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.sample()
