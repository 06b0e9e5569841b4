"""A small cache for expensive dashboard figures (quality statistics, charts, worker table).

Stale-while-revalidate: an entry is fresh while the data version (the newest ids of the
tables behind the figures) is unchanged and it is younger than the TTL. A stale entry whose
computation took longer than ``sync_below`` seconds is still served at once while one
background thread recomputes it, so a busy large study (new votes every second, a count over
a million Examples) never makes an admin wait for a recomputation; how old a served figure
is, is the page's to say. A stale entry that is quick to compute again (a small study) is
recomputed in the request, so it never trails the data. Admin actions clear the cache.
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
    def __init__(
        self, ttl_seconds: float = 60.0, max_entries: int = 256, sync_below: float = 0.0
    ) -> None:
        self.ttl = ttl_seconds
        self.max_entries = max_entries
        self.sync_below = sync_below
        # key -> (stored at, data version, value, seconds its computation took)
        self._data: dict[Hashable, tuple[float, Hashable, Any, float]] = {}
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
                at, ver, value, took = hit
                if ver == version and now - at < self.ttl:
                    return value  # type: ignore[no-any-return]
                hit = None if took < self.sync_below else hit
            if hit is not None:
                if key not in self._refreshing:
                    self._refreshing.add(key)
                    threading.Thread(
                        target=self._refresh, args=(key, version, compute_later), daemon=True
                    ).start()
                return value  # type: ignore[no-any-return]
        t0 = time.monotonic()
        value = compute_now()
        self._store(key, version, value, time.monotonic() - t0)
        return value

    def _refresh(self, key: Hashable, version: Hashable, compute: Callable[[], Any]) -> None:
        try:
            t0 = time.monotonic()
            value = compute()
            self._store(key, version, value, time.monotonic() - t0)
        except Exception:  # keep serving the old value; the next request retries
            log.warning("refreshing dashboard figure %r failed", key, exc_info=True)
        finally:
            with self._lock:
                self._refreshing.discard(key)

    def _store(self, key: Hashable, version: Hashable, value: Any, took: float) -> None:
        with self._lock:
            if len(self._data) >= self.max_entries and key not in self._data:
                self._data.clear()
            self._data[key] = (time.monotonic(), version, value, took)

    def clear(self) -> None:
        with self._lock:
            self._data.clear()
