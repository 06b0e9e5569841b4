"""Another process keeping one core busy for the benchmark's duration (``--busy-core``): the
vote's latency goal holds on a machine that is doing something else, not only on an idle one.

A plain CPU-bound loop in its own interpreter at the default priority, as another user's job
would be; its share of a core over the run is reported, so a run where it did not get its
core (the machine busier still) can be told apart.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

CLK = os.sysconf("SC_CLK_TCK")
LOOP = "while True:\n    pass\n"


def cpu_seconds(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / CLK


class BusyCore:
    """Context manager: a process spinning on one core while the block runs."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen[bytes] | None = None
        self.t0 = 0.0
        self.wall = 0.0
        self.cpu = 0.0

    def __enter__(self) -> BusyCore:
        self.proc = subprocess.Popen([sys.executable, "-c", LOOP])
        self.t0 = time.monotonic()
        return self

    def __exit__(self, *exc: object) -> None:
        assert self.proc is not None
        self.cpu = cpu_seconds(self.proc.pid)
        self.wall = time.monotonic() - self.t0
        self.proc.kill()
        self.proc.wait()

    def line(self) -> str:
        share = self.cpu / self.wall if self.wall else 0.0
        return (
            f"busy core: another process spun for {self.wall:.1f} s and used {self.cpu:.1f} "
            f"CPU s ({share:.0%} of one core)"
        )
