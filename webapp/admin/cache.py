"""A small cache for expensive dashboard figures (quality statistics, charts, worker table).

Stale-while-revalidate: an entry is fresh while the data version (row counts and max ids of
the tables behind the figures) is unchanged and it is younger than the TTL. A stale entry is
still served at once while one background thread recomputes it, so a busy study (new votes
every second) never makes an admin wait for a recomputation; only the very first request
computes synchronously. Admin actions clear the cache.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

T = TypeVar("T")
log = logging.getLogger("webapp.admin.cache")


class FigureCache:
    def __init__(self, ttl_seconds: float = 60.0, max_entries: int = 256) -> None:
        self.ttl = ttl_seconds
        self.max_entries = max_entries
        self._data: dict[Hashable, tuple[float, Hashable, Any]] = {}
        self._refreshing: set[Hashable] = set()
        self._lock = threading.Lock()

    def get(
        self,
        key: Hashable,
        version: Hashable,
        compute_now: Callable[[], T],
        compute_later: Callable[[], T],
    ) -> T:
        """The cached value; ``compute_now`` when there is none, else a stale value while
        ``compute_later`` (which must open its own DB session) runs in a thread."""
        now = time.monotonic()
        with self._lock:
            hit = self._data.get(key)
            if hit is not None:
                at, ver, value = hit
                if ver == version and now - at < self.ttl:
                    return value  # type: ignore[no-any-return]
                if key not in self._refreshing:
                    self._refreshing.add(key)
                    threading.Thread(
                        target=self._refresh, args=(key, version, compute_later), daemon=True
                    ).start()
                return value  # type: ignore[no-any-return]
        value = compute_now()
        self._store(key, version, value)
        return value

    def _refresh(self, key: Hashable, version: Hashable, compute: Callable[[], Any]) -> None:
        try:
            self._store(key, version, compute())
        except Exception:  # keep serving the old value; the next request retries
            log.warning("refreshing dashboard figure %r failed", key, exc_info=True)
        finally:
            with self._lock:
                self._refreshing.discard(key)

    def _store(self, key: Hashable, version: Hashable, value: Any) -> None:
        with self._lock:
            if len(self._data) >= self.max_entries and key not in self._data:
                self._data.clear()
            self._data[key] = (time.monotonic(), version, value)

    def clear(self) -> None:
        with self._lock:
            self._data.clear()
