"""Failed admin logins, throttled per (client address, username).

After ``limit`` failures within ``window`` seconds, that address may not try that username
again until the oldest failure leaves the window: a password guesser gets a handful of
tries per quarter hour instead of as many as argon2 can check. Keyed by address *and*
username so nobody can lock the real admin out by failing on purpose from elsewhere.

Kept in memory, per server process (no table to clean up); with N uvicorn workers a guesser
gets at most N times the limit, still far too few to matter.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass, field


@dataclass
class LoginThrottle:
    limit: int = 5
    window: float = 15 * 60.0
    max_keys: int = 10_000  # bound memory under a spray of usernames/addresses
    _failures: dict[tuple[str, str], deque[float]] = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @staticmethod
    def key(address: str | None, username: str) -> tuple[str, str]:
        return (address or "?", username.strip().lower())

    def _recent(self, key: tuple[str, str], now: float) -> deque[float]:
        times = self._failures.get(key, deque())
        while times and now - times[0] >= self.window:
            times.popleft()
        return times

    def retry_after(self, key: tuple[str, str], now: float | None = None) -> int:
        """Seconds until this key may try again; 0 when it may now."""
        now = time.monotonic() if now is None else now
        with self._lock:
            times = self._recent(key, now)
            if len(times) < self.limit:
                return 0
            return max(1, int(self.window - (now - times[0])) + 1)

    def failed(self, key: tuple[str, str], now: float | None = None) -> None:
        now = time.monotonic() if now is None else now
        with self._lock:
            times = self._recent(key, now)
            times.append(now)
            # Re-inserted at the end: the dict stays ordered by each key's latest failure,
            # so the stalest keys are the first ones.
            self._failures.pop(key, None)
            self._failures[key] = times
            while len(self._failures) > self.max_keys:
                del self._failures[next(iter(self._failures))]

    def succeeded(self, key: tuple[str, str]) -> None:
        with self._lock:
            self._failures.pop(key, None)
