"""Request body size caps per route: an oversized body is refused with 413 before anyone
parses it (a 64 MB JSON vote was once read and parsed whole).

A plain ASGI middleware (Starlette has no per-route limit): it refuses when the declared
Content-Length is too large and, for bodies without one (chunked), counts the bytes as they
arrive and stops passing them on past the cap.

A body over the cap but within DRAIN_LIMIT is read and thrown away before the 413 goes out,
so the client's keep-alive connection stays usable (an HTTP server must close a connection
whose request body it left unread: the next request would start mid-body). A larger body is
not read: the 413 says ``Connection: close`` and the server drops the connection, which costs
an abusive client a reconnect and the site nothing.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from webapp.http.study import PREFIX as STUDY_PREFIX

# (path prefix, limit in bytes), first match wins. Every form and JSON body of the site is
# small: a vote is ~100 bytes, a caption form ~1 KB, the admin's study settings a few KB.
LIMITS: tuple[tuple[str, int], ...] = (
    ("/api/", 8 * 1024),
    ("/admin/", 256 * 1024),
    # A qualification try: at most 50 answers of ~20 bytes each.
    ("/qualify/", 8 * 1024),
)
DEFAULT_LIMIT = 64 * 1024
# Over the cap but up to this size, the rest of the body is read and discarded so that the
# connection is kept alive (at most 1 MiB of reading per refused request).
DRAIN_LIMIT = 1 << 20
MESSAGE = b"Request body too large."


def limit_for(path: str) -> int:
    """The cap of a raw request path: a study's routes (``/s/<slug>/api/...``) are the site's
    routes under a prefix (webapp.http.study, which runs inside this middleware), so they get
    the same caps."""
    if path.startswith(STUDY_PREFIX):
        path = "/" + path[len(STUDY_PREFIX) :].partition("/")[2]
    for prefix, limit in LIMITS:
        if path.startswith(prefix):
            return limit
    return DEFAULT_LIMIT


class BodySizeLimit:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = limit_for(str(scope.get("path", "")))
        for name, value in scope.get("headers", ()):
            if name == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    declared = DRAIN_LIMIT + 1
                if declared > limit:
                    drained = declared <= DRAIN_LIMIT and await _drain(receive, 0)
                    await _refuse(send, keep_alive=drained)
                    return
        received = 0
        started = refused = False

        async def counted_receive() -> Message:
            # Past the cap: answer 413 and tell the app the client went away (the app's
            # parsers would turn an exception here into their own 400).
            nonlocal received, refused
            if refused:
                return {"type": "http.disconnect"}
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    refused = True
                    if not started:
                        drained = not message.get("more_body", False) or await _drain(
                            receive, received
                        )
                        await _refuse(send, keep_alive=drained)
                    return {"type": "http.disconnect"}
            return message

        async def guarded_send(message: Message) -> None:
            nonlocal started
            if refused:
                return  # the 413 went out instead
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, counted_receive, guarded_send)
        except Exception:
            if not refused:
                raise


async def _drain(receive: Receive, received: int) -> bool:
    """Read and discard the rest of the body while it stays within DRAIN_LIMIT: True when
    all of it was read (the connection can be kept), False past the limit or on disconnect."""
    while received <= DRAIN_LIMIT:
        message = await receive()
        if message["type"] != "http.request":
            return False
        received += len(message.get("body", b""))
        if not message.get("more_body", False):
            return received <= DRAIN_LIMIT
    return False


async def _refuse(send: Send, keep_alive: bool) -> None:
    headers = [
        (b"content-type", b"text/plain; charset=utf-8"),
        (b"content-length", str(len(MESSAGE)).encode()),
    ]
    if not keep_alive:  # the body was left unread: the server has to drop the connection
        headers.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": 413, "headers": headers})
    await send({"type": "http.response.body", "body": MESSAGE})
