"""Checks on raw request input that every route shares: ids within the database's integer
range, integers written in ASCII digits only, and no NUL character anywhere.

PostgreSQL refuses a NUL in text and an integer beyond its column's range with an error
that would otherwise surface as a 500 (and a dropped keep-alive connection); SQLite raises
OverflowError for integers beyond 64 bits. These answer 4xx naming the field instead.
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Annotated, Any
from urllib.parse import parse_qsl

from fastapi import Path

from vsr_core.limits import INT32_MAX

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

DbId = Annotated[int, Path(ge=1, le=INT32_MAX, description="a row id (1 to 2^31-1)")]
"""A path id: anything outside the integer columns' range is a 422 naming the parameter,
never a database error."""

_ASCII_INT = re.compile(r"-?[0-9]{1,12}")


def ascii_int(text: str, low: int, high: int) -> int | None:
    """``text`` as an integer if it is plain ASCII digits within [low, high], else None.

    ``str.isdigit`` is true for superscripts and other scripts' digits (``"²"``) that
    ``int`` then rejects or reads differently; ``re.fullmatch`` admits exactly 0-9.
    """
    if not _ASCII_INT.fullmatch(text):
        return None
    value = int(text)
    return value if low <= value <= high else None


# --- NUL anywhere in the request --------------------------------------------------------------

# Bodies up to this size are checked (every form and JSON body of the site is far smaller);
# a larger one is passed on unchecked, for the route's own size limit to refuse.
SCAN_LIMIT = 1 << 20
NUL_MESSAGE = "{field} contains a NUL character (\\0), which is not allowed."


class InputGuard:
    """ASGI middleware: a 400 naming the field for a NUL character in the path, a query
    parameter or a form/JSON body field, before any route or database sees it.

    A plain ASGI middleware (not ``BaseHTTPMiddleware``): it adds a byte search per request
    and, for requests with a body, one buffered read that the route then reads from memory.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        field = _nul_in_url(scope)
        if field is None and scope["method"] in ("POST", "PUT", "PATCH", "DELETE"):
            body, complete = await _read_body(receive)
            if complete:
                field = _nul_in_body(_content_type(scope), body)
            receive = _replay(body, complete, receive)
        if field is None:
            await self.app(scope, receive, send)
            return
        await _refuse(scope, receive, send, NUL_MESSAGE.format(field=field))


def _nul_in_url(scope: Scope) -> str | None:
    if "\x00" in scope["path"]:
        return "The address"
    query: bytes = scope.get("query_string", b"")
    if b"%00" in query or b"\x00" in query:
        return _nul_field(parse_qsl(query.decode("latin-1"), keep_blank_values=True), "query")
    return None


def _nul_field(pairs: list[tuple[str, str]], where: str) -> str:
    for name, value in pairs:
        if "\x00" in name or "\x00" in value:
            shown = name.replace("\x00", "\\0")[:40]
            return f"The {where} field {shown!r}"
    return f"The {where}"


def _content_type(scope: Scope) -> str:
    for key, value in scope.get("headers", ()):
        if key == b"content-type":
            return str(value.decode("latin-1").split(";")[0].strip().lower())
    return ""


def _nul_in_body(content_type: str, body: bytes) -> str | None:
    if content_type == "application/x-www-form-urlencoded":
        if b"%00" in body or b"\x00" in body:
            return _nul_field(parse_qsl(body.decode("latin-1"), keep_blank_values=True), "form")
        return None
    if b"\\u0000" in body:  # JSON's escape for NUL (a raw NUL byte is not valid JSON text)
        try:
            return _nul_in_json(json.loads(body), ())
        except ValueError:
            return None  # not JSON after all: the route's own parser answers
    if b"\x00" in body:  # multipart or text: the site takes no file uploads
        return "The request body"
    return None


def _nul_in_json(value: Any, path: tuple[str, ...]) -> str | None:
    if isinstance(value, str):
        return f"The field {'.'.join(path) or 'body'!r}" if "\x00" in value else None
    items: Any = (
        value.items()
        if isinstance(value, dict)
        else (enumerate(value) if isinstance(value, list) else ())
    )
    for key, item in items:
        if "\x00" in str(key):
            return "A field name"
        found = _nul_in_json(item, (*path, str(key)))
        if found is not None:
            return found
    return None


async def _read_body(receive: Receive) -> tuple[bytes, bool]:
    """The body up to SCAN_LIMIT: (bytes read, whether that is all of it)."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return b"".join(chunks), False
        chunk = message.get("body", b"")
        chunks.append(chunk)
        size += len(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks), True
        if size > SCAN_LIMIT:
            return b"".join(chunks), False


def _replay(body: bytes, complete: bool, receive: Receive) -> Receive:
    sent = False

    async def replayed() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": not complete}
        return await receive()

    return replayed


async def _refuse(scope: Scope, receive: Receive, send: Send, message: str) -> None:
    """A 400 in the site's usual error format (``webapp.http.errors``: JSON for the API, the
    friendly page for a browser); ``scope["app"]`` is set before any middleware runs."""
    from starlette.requests import Request

    from webapp.http.errors import error_response

    response = error_response(Request(scope, receive), 400, message)
    await response(scope, receive, send)
