"""Opaque lease ids for the crowd: ``"<lease id>.<signature>"`` wherever a lease travels (the
task forms, the JSON APIs, the validation image's address).

Lease ids are sequential, so a bare id invites guessing the neighbours' leases. The
signature is an HMAC of the worker and the lease under SECRET_KEY, so only the pages and
API answers the server gave this worker carry a token that verifies, and a token copied to
another worker's session does not. Checking it costs no database statement (the hot path's
statement count matters, docs/validation.md); the lease row itself is still checked against
the worker as before. A signature rather than a random column: no migration, no lookup.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re

from vsr_core.limits import INT32_MAX

# 16 bytes of HMAC-SHA256, base64url without padding: 22 characters.
LEASE_TOKEN = re.compile(r"([1-9][0-9]{0,9})\.([A-Za-z0-9_-]{22})")
MAX_LENGTH = 33


def _signature(secret_key: str, worker_id: int, lease_id: int) -> str:
    message = f"lease:{worker_id}:{lease_id}".encode()
    digest = hmac.new(secret_key.encode(), message, hashlib.sha256).digest()[:16]
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def lease_token(secret_key: str, worker_id: int, lease_id: int) -> str:
    """What travels instead of the lease id."""
    return f"{lease_id}.{_signature(secret_key, worker_id, lease_id)}"


def lease_from_token(secret_key: str, worker_id: int, token: str) -> int | None:
    """The lease id if ``token`` is exactly one this server gave ``worker_id``, else None."""
    match = LEASE_TOKEN.fullmatch(token)
    if match is None:
        return None
    lease_id = int(match.group(1))
    if lease_id > INT32_MAX:
        return None
    expected = _signature(secret_key, worker_id, lease_id)
    return lease_id if hmac.compare_digest(expected, match.group(2)) else None
