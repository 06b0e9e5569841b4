"""A small cache for expensive dashboard figures (quality statistics, charts, worker table).

Stale-while-revalidate: an entry is fresh while the data version (the newest ids of the
tables behind the figures) is unchanged and it is younger than the TTL. A stale entry whose
computation took longer than ``sync_below`` seconds is still served at once while one
background thread recomputes it, so a busy large study (new votes every second, a count over
a million Examples) never makes an admin wait for a recomputation; how old a served figure
is, is the page's to say. A stale entry that is quick to compute again (a small study) is
recomputed in the request, so it never trails the data. Admin actions clear the cache.

A figure nobody has computed yet (a sort order or chart no one asked for, the first start on
a new database) is computed in a background thread too: the request waits at most
``wait_first`` seconds for it (a small study's figure is ready by then, as before), and
otherwise answers at once with the caller's ``pending`` stand-in, which says the figure is
being computed and for how long (``started``); the next request gets the figure.

With a ``directory``, every stored figure is also written there (signed with the server's
secret key), so a restarted server does not count a million Examples again before its first
page: a figure read back from the directory is treated as stale (served, and recomputed in
the background) unless it is quick to compute, exactly like a figure whose data changed.

``warm`` computes a figure in the calling thread (the start-up warm-up's): a request that
asks for it meanwhile finds it "computing" with the warm-up's start time, never a second
computation. ``in_background()`` is true in the threads that compute figures: what a page
computes in its request thread is not a whole-study figure (tests hook on it).
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import pickle
import threading
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")
log = logging.getLogger("webapp.admin.cache")
_where = threading.local()


def in_background() -> bool:
    """Whether this thread is computing a figure off a request (a refresh, a first
    computation, the warm-up)."""
    return bool(getattr(_where, "background", False))


def _off_request(compute: Callable[[], T]) -> T:
    before = in_background()
    _where.background = True
    try:
        return compute()
    finally:
        _where.background = before


@dataclass(frozen=True)
class Computing:
    """A figure's stand-in while its first computation runs: for how long it has run."""

    seconds: float


class FigureCache:
    def __init__(
        self,
        ttl_seconds: float = 60.0,
        max_entries: int = 256,
        sync_below: float = 0.0,
        directory: Path | None = None,
        secret: bytes = b"",
        wait_first: float = 0.25,
    ) -> None:
        self.ttl = ttl_seconds
        self.wait_first = wait_first
        self.max_entries = max_entries
        self.sync_below = sync_below
        self.directory = directory
        self._secret = secret
        # key -> (stored at, data version, value, seconds its computation took)
        self._data: dict[Hashable, tuple[float, Hashable, Any, float]] = {}
        self._refreshing: set[Hashable] = set()
        # key -> (monotonic start, thread) of a first computation running in the background
        self._first: dict[Hashable, tuple[float, threading.Thread]] = {}
        self._lock = threading.Lock()

    def get(
        self,
        key: Hashable,
        version: Hashable,
        compute_now: Callable[[], T],
        compute_later: Callable[[], T],
        pending: Callable[[float], T] | None = None,
        small: bool = False,
    ) -> T:
        """The cached value; ``compute_now`` when there is none, else a stale value while
        ``compute_later`` (which must open its own DB session) runs in a thread. A
        ``small`` study's figure is never stale: it is recomputed now once the data changed,
        however long its last computation took (that time says more about the machine's
        load than about a study of a few Examples). With
        ``pending``, a figure there is none of yet is computed by ``compute_later`` in a
        thread too, and ``pending(seconds it has been computing)`` is answered once
        ``wait_first`` has passed without it."""
        now = time.monotonic()
        if key not in self._data and self.directory is not None:
            self._load(key)
        with self._lock:
            hit = self._data.get(key)
            if hit is not None:
                at, ver, value, took = hit
                if ver == version and now - at < self.ttl:
                    return value  # type: ignore[no-any-return]
                hit = None if small or took < self.sync_below else hit
            if hit is not None:
                if key not in self._refreshing:
                    self._refreshing.add(key)
                    threading.Thread(
                        target=self._refresh, args=(key, version, compute_later), daemon=True
                    ).start()
                return value  # type: ignore[no-any-return]
        if pending is not None:
            return self._first_value(key, version, compute_later, pending)
        t0 = time.monotonic()
        value = compute_now()
        self._store(key, version, value, time.monotonic() - t0)
        return value

    def _first_value(
        self,
        key: Hashable,
        version: Hashable,
        compute: Callable[[], T],
        pending: Callable[[float], T],
    ) -> T:
        with self._lock:
            running = self._first.get(key)
            if running is None:
                thread = threading.Thread(
                    target=self._compute_first, args=(key, version, compute), daemon=True
                )
                running = self._first[key] = (time.monotonic(), thread)
                thread.start()
        started, thread = running
        thread.join(max(0.0, self.wait_first - (time.monotonic() - started)))
        with self._lock:
            hit = self._data.get(key)
        if hit is not None:
            return hit[2]  # type: ignore[no-any-return]
        return pending(time.monotonic() - started)

    def _compute_first(self, key: Hashable, version: Hashable, compute: Callable[[], Any]) -> None:
        try:
            t0 = time.monotonic()
            value = _off_request(compute)
            self._store(key, version, value, time.monotonic() - t0)
        except Exception:  # the next request starts it again
            log.warning("computing dashboard figure %r failed", key, exc_info=True)
        finally:
            with self._lock:
                self._first.pop(key, None)

    def _refresh(self, key: Hashable, version: Hashable, compute: Callable[[], Any]) -> None:
        try:
            t0 = time.monotonic()
            value = _off_request(compute)
            self._store(key, version, value, time.monotonic() - t0)
        except Exception:  # keep serving the old value; the next request retries
            log.warning("refreshing dashboard figure %r failed", key, exc_info=True)
        finally:
            with self._lock:
                self._refreshing.discard(key)

    def peek(self, key: Hashable) -> Any:
        """The value stored under ``key`` however old (None: none in memory)."""
        with self._lock:
            hit = self._data.get(key)
        return None if hit is None else hit[2]

    def warm(self, key: Hashable, version: Hashable, compute: Callable[[], Any]) -> bool:
        """Compute the figure in this thread unless it is fresh or being computed already
        (then wait for that); True when it was computed here. A request meanwhile answers
        with its ``pending`` stand-in (or the stale value), as for any first computation."""
        if key not in self._data and self.directory is not None:
            self._load(key)
        with self._lock:
            hit = self._data.get(key)
            if hit is not None and hit[1] == version and time.monotonic() - hit[0] < self.ttl:
                return False
            if key in self._refreshing:
                return False  # a request's refresh is under way; its stale value is served
            running = self._first.get(key)
            if running is None:
                if hit is None:
                    self._first[key] = (time.monotonic(), threading.current_thread())
                else:
                    self._refreshing.add(key)
        if running is not None:
            running[1].join()
            return False
        try:
            t0 = time.monotonic()
            value = _off_request(compute)
            self._store(key, version, value, time.monotonic() - t0)
            return True
        finally:
            with self._lock:
                self._first.pop(key, None)
                self._refreshing.discard(key)

    def _store(self, key: Hashable, version: Hashable, value: Any, took: float) -> None:
        with self._lock:
            if len(self._data) >= self.max_entries and key not in self._data:
                self._data.clear()
            self._data[key] = (time.monotonic(), version, value, took)
        if self.directory is not None:
            self._save(key, (key, value, took))

    def clear(self) -> None:
        with self._lock:
            self._data.clear()
            if self.directory is not None and self.directory.is_dir():
                for f in self.directory.glob("*.fig"):
                    f.unlink(missing_ok=True)

    # --- the figures on disk ------------------------------------------------------------

    def _path(self, key: Hashable) -> Path:
        assert self.directory is not None
        return self.directory / (hashlib.sha256(repr(key).encode()).hexdigest()[:32] + ".fig")

    def _save(self, key: Hashable, entry: tuple[Hashable, Any, float]) -> None:
        try:
            body = pickle.dumps(entry, protocol=pickle.HIGHEST_PROTOCOL)
            mac = hmac.new(self._secret, body, hashlib.sha256).digest()
            path = self._path(key)
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
            tmp.write_bytes(mac + body)
            os.replace(tmp, path)  # readers see the old file or the new one, never half
        except (OSError, pickle.PicklingError, TypeError, AttributeError):
            log.warning("could not keep dashboard figure %r on disk", key, exc_info=True)

    def _load(self, key: Hashable) -> None:
        """A figure an earlier process stored, as a stale entry (version unknown)."""
        try:
            raw = self._path(key).read_bytes()
        except OSError:
            return
        mac, body = raw[:32], raw[32:]
        if not hmac.compare_digest(mac, hmac.new(self._secret, body, hashlib.sha256).digest()):
            return  # not written by this server (or another secret key): ignored
        try:
            stored_key, value, took = pickle.loads(body)  # noqa: S301  (signed by us)
        except Exception:  # an older format: recomputed
            return
        if stored_key != key:
            return
        with self._lock:
            self._data.setdefault(key, (float("-inf"), object(), value, float(took)))
