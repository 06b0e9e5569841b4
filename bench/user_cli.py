"""Run the project's CLI as a user does (a subprocess of the installed ``vsr`` entry point,
on this checkout's code) and measure it: wall seconds and the subprocess's own max RSS."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class CliRun:
    seconds: float
    rss_mb: float  # this process's max resident set size (from wait4, not the children's max)
    stdout: str


def vsr(*args: str) -> CliRun:
    """``vsr ARGS...``; a failure stops the benchmark with the command's own message."""
    return run("vsr", *args)


def run(program: str, *args: str) -> CliRun:
    """One of the project's commands (``vsr``, ``build-dataset``) with ``args``."""
    exe = shutil.which(program) or sys.exit(f"{program} is not on PATH (pip install -e .)")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen([exe, *args], stdout=out, stderr=err, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
        out.seek(0)
        err.seek(0)
        if proc.returncode != 0:
            sys.exit(f"{program} {' '.join(args)} failed: {err.read().decode().strip()[-2000:]}")
        return CliRun(seconds, usage.ru_maxrss / 1024, out.read().decode().strip())


def load() -> str:
    return "/".join(f"{x:.2f}" for x in os.getloadavg())
