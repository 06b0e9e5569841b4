"""Security headers on every answer, a Content-Security-Policy on every page, and under
https ``Secure`` on every cookie.

The policy lets a page run only the site's own scripts and the inline script it was served
with (a per-request nonce, ``request.state.csp_nonce``), so markup that slipped through
escaping could not run code. Styles may be inline (progress bars set their width in a
``style`` attribute); images may come from any web address (COCO's own image URLs when the
site has no local copy). Worker pages may be framed by MTurk (its HITs show the site in an
iframe), admin pages by nobody.

A plain ASGI middleware, not ``BaseHTTPMiddleware``: it only edits the response's first
message, so the validation API pays next to nothing for it.
"""

from __future__ import annotations

import secrets

from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

MTURK_FRAMES = "https://www.mturk.com https://workersandbox.mturk.com"


def content_security_policy(nonce: str, admin: bool) -> str:
    frames = "'none'" if admin else f"'self' {MTURK_FRAMES}"
    return "; ".join(
        [
            "default-src 'self'",
            f"script-src 'self' 'nonce-{nonce}'",
            "style-src 'self' 'unsafe-inline'",
            "img-src 'self' data: https: http:",
            "object-src 'none'",
            "base-uri 'self'",
            f"frame-ancestors {frames}",
        ]
    )


HSTS = "max-age=31536000"  # a year; set only when the site is served over https


class LazyNonce:
    """The request's nonce, drawn the first time a page or the policy header asks for it:
    a JSON answer (the validation API, most requests) never does, and drawing one costs a
    ``getrandom`` call and an encoding per request. Renders as its value (``str``)."""

    __slots__ = ("_value",)

    def __init__(self) -> None:
        self._value: str | None = None

    def __str__(self) -> str:
        if self._value is None:
            self._value = secrets.token_urlsafe(16)
        return self._value


def _secure_cookies(raw: list[tuple[bytes, bytes]]) -> None:
    """Under https every cookie the site sets is ``Secure`` (the admin's study choice and
    flash message included), whichever room set it and whether or not it said so."""
    for i, (name, value) in enumerate(raw):
        if name == b"set-cookie":
            attributes = [a.strip().lower() for a in value.split(b";")[1:]]
            if b"secure" not in attributes:
                raw[i] = (name, value + b"; Secure")


class SecurityHeaders:
    def __init__(self, app: ASGIApp, hsts: bool = False) -> None:
        self.app = app
        self.hsts = hsts

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        nonce = LazyNonce()
        scope.setdefault("state", {})["csp_nonce"] = nonce
        admin = str(scope.get("path", "")).startswith("/admin")

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                headers.setdefault("X-Content-Type-Options", "nosniff")
                headers.setdefault("Referrer-Policy", "same-origin")
                if self.hsts:
                    headers.setdefault("Strict-Transport-Security", HSTS)
                    _secure_cookies(headers.raw)
                if headers.get("content-type", "").startswith("text/html"):
                    headers["Content-Security-Policy"] = content_security_policy(str(nonce), admin)
            await send(message)

        await self.app(scope, receive, send_with_headers)
