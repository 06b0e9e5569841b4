"""Is a TCP port free, and which one near it is: `vsr serve` checks before uvicorn starts, and
scripts/demo.sh runs this module with the system Python before anything is installed
(standard library only), so a busy port is named in under a second, not after the install.

    python3 -m vsr_cli.ports 127.0.0.1 8000   # exit 0 when free; else one line, exit 1
"""

from __future__ import annotations

import socket
import sys

SEARCH = 50  # how many ports above a busy one are tried for a suggestion


def bind_error(host: str, port: int) -> OSError | None:
    """None when ``host:port`` can be bound now (as uvicorn binds: SO_REUSEADDR, so a port in
    TIME_WAIT is not mistaken for busy), else the error. Bind-and-release: another process may
    still take it before the server binds."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            return exc
    return None


def free_port_after(host: str, port: int) -> int | None:
    """The first free port above ``port`` (within SEARCH), for the error to suggest."""
    for candidate in range(port + 1, min(port + 1 + SEARCH, 65536)):
        if bind_error(host, candidate) is None:
            return candidate
    return None


def busy_message(host: str, port: int, exc: OSError, how: str) -> str:
    """One line naming the busy port and a free one, with ``how`` to use it ({port})."""
    free = free_port_after(host, port)
    use = f"; {how.format(port=free)} uses {free}, which is free" if free else ""
    return f"port {port} on {host} is not free ({exc.strerror}): stop what uses it{use}"


def main(argv: list[str]) -> int:
    host, port = argv[0], int(argv[1])
    how = argv[2] if len(argv) > 2 else "--port {port}"
    exc = bind_error(host, port)
    if exc is None:
        return 0
    print(f"error: {busy_message(host, port, exc, how)}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
