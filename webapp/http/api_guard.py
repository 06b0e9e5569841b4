"""Cross-site request checks for the crowd's JSON API (``POST /api/validate/votes``).

On https the worker cookie is ``SameSite=None`` (MTurk shows the site in an iframe), so a
page on another site can make the browser send it. Three independent checks keep such a
request from counting:

* the body must be declared ``application/json``: a cross-site HTML form or a no-cors
  ``fetch`` can only send ``text/plain``, form or multipart bodies;
* the ``X-CSRF-Token`` header must carry the session's CSRF token: a custom header makes a
  cross-site ``fetch`` need a CORS preflight, which this site never grants, and the token
  itself is readable only by the site's own pages;
* an ``Origin`` header, when the browser sends one, must be the site's own (BASE_URL, the
  request's own host, or one of ALLOWED_ORIGINS).
"""

from __future__ import annotations

from urllib.parse import urlsplit

from fastapi import Request

from webapp.http.errors import PageError
from webapp.http.tokens import same_token

CSRF_HEADER = "X-CSRF-Token"


def _origin(url: str) -> str:
    parts = urlsplit(url.strip())
    return f"{parts.scheme}://{parts.netloc}".lower() if parts.scheme and parts.netloc else ""


def allowed_origins(request: Request) -> set[str]:
    settings = request.app.state.settings
    found = {_origin(settings.base_url)}
    found.update(_origin(o) for o in settings.allowed_origins.split(",") if o.strip())
    host = request.headers.get("host")
    if host:
        found.add(f"{request.url.scheme}://{host}".lower())
    found.discard("")
    return found


def check_origin(request: Request) -> None:
    origin = request.headers.get("origin")
    if origin is not None and origin.lower() not in allowed_origins(request):
        raise PageError(403, "This request did not come from this site.")


def check_json_post(request: Request) -> None:
    """Raise 415 / 403 unless this POST is a same-site JSON request with the session's token."""
    media = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media != "application/json":
        raise PageError(415, "Send the answer as JSON (Content-Type: application/json).")
    check_origin(request)
    expected = request.session.get("csrf")
    submitted = request.headers.get(CSRF_HEADER)
    if not isinstance(expected, str) or not same_token(expected, submitted):
        raise PageError(
            403,
            "This request did not come from this site (missing or wrong X-CSRF-Token "
            "header). Reload the page and try again.",  # one literal: a gettext msgid
        )
