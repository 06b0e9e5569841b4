"""Unguessable image addresses for a pair: ``/images/pair/{id}/{slot}.jpg?s=<signature>``
(under ``/s/<slug>`` for a study other than the default one).

Pair ids are sequential, so without a signature anyone could walk the whole pool of pairs
(and so learn the study's items) by counting. The signature is an HMAC of the pair and slot
under SECRET_KEY: only pages the server rendered carry it. It does not expire: the URL may
sit in a browser cache for the image's lifetime, and the image itself is a public COCO image.
"""

from __future__ import annotations

import hashlib
import hmac

from webapp.http.tokens import same_token


def pair_image_signature(secret_key: str, pair_id: int, slot: int) -> str:
    message = f"pair-image:{pair_id}:{slot}".encode()
    return hmac.new(secret_key.encode(), message, hashlib.sha256).hexdigest()[:32]


def pair_image_url(secret_key: str, pair_id: int, slot: int, prefix: str = "") -> str:
    """The image's address under ``prefix``, the path of the pair's study ("/s/<slug>"; ""
    for the default one): the image route answers only in the pair's own study."""
    signature = pair_image_signature(secret_key, pair_id, slot)
    return f"{prefix}/images/pair/{pair_id}/{slot}.jpg?s={signature}"


def pair_image_allowed(secret_key: str, pair_id: int, slot: int, signature: str | None) -> bool:
    return same_token(pair_image_signature(secret_key, pair_id, slot), signature)
