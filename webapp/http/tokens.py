"""Comparing a secret token the client sent with the one the server expects.

``hmac.compare_digest`` raises TypeError for a ``str`` holding a non-ASCII character, which
turned a CSRF field of ``²`` or a lone surrogate into a 500. Every token this site makes is
ASCII, so anything else is refused before the comparison, and the comparison is on bytes.
"""

from __future__ import annotations

import hmac


def same_token(expected: str, submitted: str | None) -> bool:
    """True only when ``submitted`` is exactly ``expected`` (constant time on ASCII input)."""
    if not expected or not submitted or not submitted.isascii():
        return False
    return hmac.compare_digest(expected.encode("ascii"), submitted.encode("ascii"))
