"""A lean HTTP/1.1 keep-alive client for the measured phases (like wrk: one persistent connection
per validator, hand-built requests, Content-Length parsing), and the httpx one to compare."""

from __future__ import annotations

import asyncio
from typing import Any, Protocol, cast

import httpx
import orjson

# --- a lean HTTP/1.1 keep-alive client for the measured phases ---------------------------------
#
# httpx costs about 1.5-2 ms of client CPU per round trip, and the client shares the machine's
# cores with the server and PostgreSQL. Like wrk, the measured phases use a minimal client
# instead: one persistent connection per validator, hand-built requests, a response parser that
# knows Content-Length and (minimally) chunked bodies. httpx still does the entry (redirects,
# forms, cookie jar) and ``--client httpx`` runs the measured phases with it for comparison.


class HttpProtocolError(RuntimeError):
    """A response this client does not understand: a bug to fix, never retried."""


class Response(Protocol):
    @property
    def status_code(self) -> int: ...

    def json(self) -> Any: ...


class HttpClient(Protocol):
    async def send(self, method: str, path: str, body: Any = None) -> Response: ...

    async def aclose(self) -> None: ...


# Transport errors that ``request`` retries: refused, reset, EOF, timeout (all OSError) and
# httpx's own.
TRANSPORT_ERRORS: tuple[type[BaseException], ...] = (OSError, httpx.TransportError)


class RawResponse:
    __slots__ = ("status_code", "headers", "content")

    def __init__(self, status_code: int, headers: dict[str, str], content: bytes) -> None:
        self.status_code = status_code
        self.headers = headers  # lower-case names; repeated headers other than Set-Cookie: last
        self.content = content

    def json(self) -> Any:
        return orjson.loads(self.content)

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", "replace")


class _Head:
    __slots__ = ("status", "headers", "cookies", "body_start", "length", "chunked", "close")

    def __init__(self, raw: str, body_start: int) -> None:
        lines = raw.split("\r\n")
        status_line = lines[0]
        if not status_line.startswith("HTTP/1.") or len(status_line) < 12:
            raise HttpProtocolError(f"bad status line {status_line!r}")
        self.status = int(status_line[9:12])
        self.headers: dict[str, str] = {}
        self.cookies: list[str] = []
        for line in lines[1:]:
            name, sep, value = line.partition(":")
            if not sep:
                raise HttpProtocolError(f"bad header line {line!r}")
            name = name.strip().lower()
            value = value.strip()
            if name == "set-cookie":
                self.cookies.append(value)
            self.headers[name] = value
        self.body_start = body_start
        self.chunked = "chunked" in self.headers.get("transfer-encoding", "").lower()
        self.close = self.headers.get("connection", "").lower() == "close"
        length = self.headers.get("content-length")
        if self.chunked:
            self.length = -1
        elif length is not None:
            self.length = int(length)
        elif self.status in (204, 304) or 100 <= self.status < 200:
            self.length = 0
        else:
            raise HttpProtocolError(
                f"response {self.status} has neither Content-Length nor chunked encoding"
            )


def _dechunk(buf: bytearray, start: int) -> tuple[bytes, int] | None:
    """(body, end) of a complete chunked body at ``buf[start:]``; None while incomplete."""
    parts: list[bytes] = []
    pos = start
    while True:
        eol = buf.find(b"\r\n", pos)
        if eol < 0:
            return None
        try:
            size = int(bytes(buf[pos:eol]).split(b";", 1)[0], 16)
        except ValueError as exc:
            raise HttpProtocolError(f"bad chunk size {bytes(buf[pos:eol])!r}") from exc
        pos = eol + 2
        if size == 0:  # last chunk, then optional trailers and an empty line
            end = buf.find(b"\r\n\r\n", pos - 2)
            if end < 0:
                return None
            return b"".join(parts), end + 4
        if len(buf) < pos + size + 2:
            return None
        parts.append(bytes(buf[pos : pos + size]))
        pos += size + 2


class _Conn(asyncio.Protocol):
    """One TCP connection; at most one request in flight (no pipelining)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.transport: asyncio.Transport | None = None
        self.buf = bytearray()
        self.head: _Head | None = None
        self.waiter: asyncio.Future[tuple[_Head, bytes]] | None = None
        self.closed = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is no subclass

    def data_received(self, data: bytes) -> None:
        self.buf += data
        waiter = self.waiter
        if waiter is None or waiter.done():
            return
        try:
            done = self._parse()
        except Exception as exc:  # handed to the waiting request
            self.closed = True
            if self.transport is not None:
                self.transport.abort()
            waiter.set_exception(exc)
            return
        if done is not None:
            self.waiter = None
            waiter.set_result(done)

    def _parse(self) -> tuple[_Head, bytes] | None:
        buf = self.buf
        head = self.head
        if head is None:
            end = buf.find(b"\r\n\r\n")
            if end < 0:
                return None
            head = self.head = _Head(buf[:end].decode("latin-1"), end + 4)
        start = head.body_start
        if head.chunked:
            got = _dechunk(buf, start)
            if got is None:
                return None
            body, end = got
        else:
            end = start + head.length
            if len(buf) < end:
                return None
            body = bytes(buf[start:end])
        del buf[:end]
        self.head = None
        return head, body

    def eof_received(self) -> bool:
        return False  # close the transport; connection_lost follows

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        waiter, self.waiter = self.waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_exception(
                ConnectionResetError("connection closed by the server") if exc is None else exc
            )

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()


class RawClient:
    """A persistent HTTP/1.1 connection to one server, with the session cookie(s) of one
    worker. Transport failures raise OSError (ConnectionError, TimeoutError) and drop the
    connection; the next ``send`` opens a new one."""

    def __init__(
        self,
        host: str,
        port: int,
        cookies: dict[str, str],
        timeout: float = 30.0,
        csrf: str = "",
    ) -> None:
        self.host, self.port, self.timeout = host, port, timeout
        self.cookies = dict(cookies)
        # The session's CSRF token travels in every request (the vote API requires it).
        self.host_line = f"Host: {host}:{port}\r\nX-CSRF-Token: {csrf}\r\n".encode()
        self.cookie_line = self._cookie_line()
        self.conn: _Conn | None = None

    def _cookie_line(self) -> bytes:
        if not self.cookies:
            return b""
        return (
            "Cookie: " + "; ".join(f"{k}={v}" for k, v in self.cookies.items()) + "\r\n"
        ).encode("latin-1")

    async def connect(self) -> _Conn:
        loop = asyncio.get_running_loop()
        conn = _Conn(loop)
        await loop.create_connection(lambda: conn, self.host, self.port)
        self.conn = conn
        return conn

    def _set_cookies(self, headers: list[str]) -> None:
        for h in headers:
            pair, _, attrs = h.partition(";")
            name, sep, value = pair.partition("=")
            if not sep:
                continue
            name, value = name.strip(), value.strip()
            attrs = attrs.lower().replace(" ", "")
            if "max-age=0" in attrs or "1970" in attrs:  # Starlette's deletion
                self.cookies.pop(name, None)
            else:
                self.cookies[name] = value
        self.cookie_line = self._cookie_line()

    async def send(self, method: str, path: str, body: Any = None) -> RawResponse:
        conn = self.conn
        if conn is None or conn.closed:
            conn = await self.connect()
        elif conn.buf:
            raise HttpProtocolError(f"unsolicited bytes from the server: {bytes(conn.buf)[:200]!r}")
        if body is None:
            data = b"".join(
                (
                    method.encode(),
                    b" ",
                    path.encode(),
                    b" HTTP/1.1\r\n",
                    self.host_line,
                    self.cookie_line,
                    b"\r\n",
                )
            )
        else:
            payload = orjson.dumps(body)
            data = b"".join(
                (
                    method.encode(),
                    b" ",
                    path.encode(),
                    b" HTTP/1.1\r\n",
                    self.host_line,
                    self.cookie_line,
                    b"Content-Type: application/json\r\nContent-Length: ",
                    str(len(payload)).encode(),
                    b"\r\n\r\n",
                    payload,
                )
            )
        waiter: asyncio.Future[tuple[_Head, bytes]] = conn.loop.create_future()
        conn.waiter = waiter
        timer = conn.loop.call_later(self.timeout, self._timed_out, conn, waiter)
        try:
            assert conn.transport is not None
            conn.transport.write(data)
            head, content = await waiter
        except BaseException:
            conn.waiter = None
            conn.close()
            self.conn = None
            raise
        finally:
            timer.cancel()
        if head.cookies:
            self._set_cookies(head.cookies)
        if head.close:
            conn.close()
            self.conn = None
        return RawResponse(head.status, head.headers, content)

    @staticmethod
    def _timed_out(conn: _Conn, waiter: asyncio.Future[tuple[_Head, bytes]]) -> None:
        if not waiter.done():
            waiter.set_exception(TimeoutError("no response in time"))
        conn.close()

    async def aclose(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None


class HttpxClient:
    """The measured phases through httpx (``--client httpx``), for comparison."""

    def __init__(self, client: httpx.AsyncClient) -> None:
        self.client = client

    async def send(self, method: str, path: str, body: Any = None) -> httpx.Response:
        if body is None:
            return await self.client.request(method, path)
        return await self.client.request(method, path, json=body)

    async def aclose(self) -> None:
        pass  # the httpx.AsyncClient is closed with the others


def jar_cookies(client: httpx.AsyncClient) -> dict[str, str]:
    return {c.name: c.value or "" for c in client.cookies.jar}
