"""A server worker process ends when its supervisor dies.

``vsr serve --workers N`` runs N uvicorn worker processes under one supervisor. If the
supervisor is killed outright (SIGKILL, the OOM killer) nobody stops the workers: they kept
serving, unsupervised, and held the port so the next ``vsr serve`` could not start. Each
worker therefore asks Linux to send it SIGTERM when its parent dies (``PR_SET_PDEATHSIG``,
through ctypes: no library offers it) and, everywhere, checks once a second whether its
parent changed (the portable fallback, and a guard against the parent dying before prctl).
SIGTERM lets uvicorn finish the requests in flight and exit.
"""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import signal
import sys
import threading

PR_SET_PDEATHSIG = 1
CHECK_SECONDS = 1.0


def _ask_kernel(sig: int) -> None:
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, sig, 0, 0, 0)
    except (OSError, AttributeError):
        pass  # the polling thread still covers it


def watch_parent() -> bool:
    """Start watching when this process is a worker spawned by a supervisor (multiprocessing,
    as uvicorn's does); a single-process server has no supervisor to outlive. Returns
    whether it watches."""
    if multiprocessing.parent_process() is None:
        return False
    parent = os.getppid()
    _ask_kernel(signal.SIGTERM)

    def poll() -> None:
        stop = threading.Event()
        while not stop.wait(CHECK_SECONDS):
            if os.getppid() != parent:
                os.kill(os.getpid(), signal.SIGTERM)
                if not stop.wait(10 * CHECK_SECONDS):  # still here: no graceful exit
                    os._exit(1)
                return

    if os.getppid() != parent or parent == 1:
        os.kill(os.getpid(), signal.SIGTERM)
    threading.Thread(target=poll, name="parent-watch", daemon=True).start()
    return True
