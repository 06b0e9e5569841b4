"""uvicorn's access log without the values of query parameters that identify a person or
unlock something: a study link's ``PROLIFIC_PID``/``SESSION_ID``, MTurk's ``workerId`` and
``assignmentId``, an invite ``token``, an image's signature ``s``... Such a log is read by
more people and kept longer than the database, so only the values of parameters known to be
harmless (``page``, ``kind``...) stay; every other value becomes ``REDACTED``, the names stay
for debugging. nginx's log leaves the query out altogether (deploy/nginx/vsr.conf.template).
"""

from __future__ import annotations

import logging
from urllib.parse import parse_qsl, quote

ACCESS_LOGGER = "uvicorn.access"
REDACTED = "REDACTED"
# Parameters whose values name no one and open nothing.
HARMLESS = frozenset({"page", "kind", "lang", "sort", "order", "status", "relation", "split"})


def redact_target(target: str) -> str:
    """``path?query`` with every value not in :data:`HARMLESS` replaced."""
    path, sep, query = target.partition("?")
    if not sep:
        return target
    pairs = parse_qsl(query, keep_blank_values=True)
    if not pairs:
        return f"{path}?{REDACTED}" if query else path
    kept = [
        f"{quote(name, safe='')}={quote(value, safe='') if name in HARMLESS else REDACTED}"
        for name, value in pairs
    ]
    return f"{path}?{'&'.join(kept)}"


class RedactQuery(logging.Filter):
    """Rewrites uvicorn's access record (client, method, target, version, status)."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple) and len(args) >= 3 and isinstance(args[2], str):
            record.args = (*args[:2], redact_target(args[2]), *args[3:])
        return True


def install() -> None:
    """Add the filter to uvicorn's access logger in this process (once)."""
    logger = logging.getLogger(ACCESS_LOGGER)
    if not any(isinstance(f, RedactQuery) for f in logger.filters):
        logger.addFilter(RedactQuery())
