"""A small time-bounded cache for expensive dashboard figures (charts, agreement statistics).

Entries are keyed by a cheap "data version" (row counts and max ids of the tables that feed
the figure), so new votes show up at once; the TTL bounds staleness for changes the version
does not see (e.g. an edited row) and for several server processes. Admin actions clear it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

T = TypeVar("T")


class TTLCache:
    def __init__(self, ttl_seconds: float = 30.0, max_entries: int = 256) -> None:
        self.ttl = ttl_seconds
        self.max_entries = max_entries
        self._data: dict[Hashable, tuple[float, Any]] = {}
        self._lock = threading.Lock()

    def get_or_compute(self, key: Hashable, compute: Callable[[], T]) -> T:
        now = time.monotonic()
        with self._lock:
            hit = self._data.get(key)
            if hit is not None and now - hit[0] < self.ttl:
                return hit[1]  # type: ignore[no-any-return]
        value = compute()  # outside the lock: a slow chart must not block other pages
        with self._lock:
            if len(self._data) >= self.max_entries:
                self._data.clear()
            self._data[key] = (now, value)
        return value

    def clear(self) -> None:
        with self._lock:
            self._data.clear()
