"""CSRF tokens for every state-changing admin form.

The token is an HMAC of the session's random nonce (double-submit is not needed: the nonce
lives only inside the signed, HttpOnly session cookie). The login form, which has no session
yet, uses a short-lived pre-login cookie in the same way.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

from fastapi import HTTPException, Request

from webapp.http.tokens import same_token

PRELOGIN_COOKIE = "vsr_admin_pre"
FIELD = "csrf_token"


def token_for(secret_key: str, nonce: str) -> str:
    return hmac.new(secret_key.encode(), f"csrf:{nonce}".encode(), hashlib.sha256).hexdigest()


def new_nonce() -> str:
    return secrets.token_urlsafe(16)


def check(secret_key: str, nonce: str | None, submitted: str | None) -> None:
    """Raise 403 unless ``submitted`` is the token for ``nonce``."""
    if not nonce or not same_token(token_for(secret_key, nonce), submitted):
        raise HTTPException(
            status_code=403,
            detail=(
                "This form has expired or did not come from this site: "
                "reload the page and try again."
            ),
        )


async def check_request(request: Request, nonce: str) -> None:
    """Check the token in a form body or in the X-CSRF-Token header (fetch() calls)."""
    submitted = request.headers.get("x-csrf-token")
    if submitted is None:
        form = await request.form()
        value = form.get(FIELD)
        submitted = value if isinstance(value, str) else None
    check(request.app.state.settings.secret_key, nonce, submitted)
