"""Run the project's CLI as a user does (a subprocess of the installed ``vsr`` entry point,
on this checkout's code) and measure it: wall seconds and the subprocess's own max RSS."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class CliRun:
    seconds: float
    rss_mb: float  # the command's own max resident set size (wait4 in a small launcher)
    stdout: str


# Linux keeps a process's peak RSS across fork and exec: a command forked from this (large)
# bench process would report at least this process's size. A fresh, small Python forks the
# command instead and writes its seconds and peak RSS to the file named first.
_LAUNCHER = """
import os, sys, time
t0 = time.perf_counter()
pid = os.fork()
if pid == 0:
    os.execv(sys.argv[2], sys.argv[2:])
_, status, usage = os.wait4(pid, 0)
with open(sys.argv[1], "w") as fh:
    fh.write(f"{time.perf_counter() - t0} {usage.ru_maxrss}")
sys.exit(os.waitstatus_to_exitcode(status))
"""


def vsr(*args: str) -> CliRun:
    """``vsr ARGS...``; a failure stops the benchmark with the command's own message."""
    return run("vsr", *args)


def run(program: str, *args: str) -> CliRun:
    """One of the project's commands (``vsr``, ``build-dataset``) with ``args``."""
    exe = shutil.which(program) or sys.exit(f"{program} is not on PATH (pip install -e .)")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with (
        tempfile.TemporaryFile() as out,
        tempfile.TemporaryFile() as err,
        tempfile.NamedTemporaryFile("r") as measured,
    ):
        launcher = [sys.executable, "-c", _LAUNCHER, measured.name, exe, *args]
        proc = subprocess.run(launcher, stdout=out, stderr=err, env=env)
        out.seek(0)
        err.seek(0)
        if proc.returncode != 0:
            sys.exit(f"{program} {' '.join(args)} failed: {err.read().decode().strip()[-2000:]}")
        seconds, maxrss_kb = measured.read().split()
        return CliRun(float(seconds), int(maxrss_kb) / 1024, out.read().decode().strip())


def load() -> str:
    return "/".join(f"{x:.2f}" for x in os.getloadavg())
