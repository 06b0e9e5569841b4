"""Unguessable image addresses for a pair: ``/images/pair/{id}/{slot}.jpg?s=<signature>``.

Pair ids are sequential, so without a signature anyone could walk the whole pool of pairs
(and so learn the study's items) by counting. The signature is an HMAC of the pair and slot
under SECRET_KEY: only pages the server rendered carry it. It does not expire: the URL may
sit in a browser cache for the image's lifetime, and the image itself is a public COCO image.
"""

from __future__ import annotations

import hashlib
import hmac


def pair_image_signature(secret_key: str, pair_id: int, slot: int) -> str:
    message = f"pair-image:{pair_id}:{slot}".encode()
    return hmac.new(secret_key.encode(), message, hashlib.sha256).hexdigest()[:32]


def pair_image_url(secret_key: str, pair_id: int, slot: int) -> str:
    return f"/images/pair/{pair_id}/{slot}.jpg?s={pair_image_signature(secret_key, pair_id, slot)}"


def pair_image_allowed(secret_key: str, pair_id: int, slot: int, signature: str | None) -> bool:
    if not signature:
        return False
    expected = pair_image_signature(secret_key, pair_id, slot)
    return hmac.compare_digest(expected, signature.encode("ascii", "replace").decode())
