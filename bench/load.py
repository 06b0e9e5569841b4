"""Load and fault benchmark of the validation task (issue 5).

Starts its own server (``uvicorn webapp.app:create_server_app --factory --workers N``, as
``vsr serve`` does) against a
fresh PostgreSQL database it creates, seeds it with real VSR captions (human Examples, each
with its real author, a few gold), lets ``C`` simulated validators (asyncio, on uvloop when
it is installed; loopback only) do fetch-item / submit-vote round trips for a bounded time,
and then checks the database:

- no duplicate vote (Example, validator); every acknowledged (2xx) vote is stored as sent;
- no Example over-served: at most ``max_votes_per_example`` votes, and more than
  ``votes_per_example`` only when the first ones left it undecided (vsr_core.agreement);
- no validator voted on their own Example; the queue counters match the Vote/Assignment rows.

It prints round trips per second, p50 and p99 latency, and the ratio against a baseline
measured in the same run with the same clients and server: round trips of two ``/healthz``
requests (one trivial database query each), i.e. what the stack costs before any queue work.

Each validator enters through the real entry pages with httpx (start link, consent, begin:
redirects, forms, a cookie jar). The measured phases then use, by default (``--client raw``),
a minimal HTTP/1.1 client written here, like wrk: one persistent keep-alive connection per
validator, hand-built requests carrying its session cookie, responses parsed by
Content-Length. httpx costs about 1.5-2 ms of client CPU per round trip, taken from the same
cores as the server and PostgreSQL; ``--client httpx`` measures with it anyway, to compare.

After a 5 s ``/healthz`` baseline the validators run ``--warmup`` seconds (default 3) of the
same load unmeasured (new pooled connections, statements being prepared, the per-process
display caches filling), then ``--duration`` seconds measured; votes of both phases are
checked. ``--timeline`` prints rate, p50/p99 and server/PostgreSQL CPU per round trip for
every 2 s of the measured phase.

``--kill`` SIGKILLs the whole server (master and workers) halfway through and starts it
again; clients retry (votes are idempotent per lease), the run completes, and the checks
above must still hold: nothing acknowledged is lost.

    python bench/load.py                       # C=100, 2 workers, 20 s, flat out
    python bench/load.py --combined            # one request per round trip (vote ?next=1)
    python bench/load.py --combined --rate 300 # paced: 100 clients offering 300 rt/s in total
    python bench/load.py --kill                # the fault mode
    python bench/load.py --concurrency 50 --duration 10 --workers 3
    python bench/load.py --client httpx        # the measured phases through httpx

Flat out, C clients with no think time keep C round trips in flight, so by Little's law the
mean latency is C / throughput (100 / 300 rt/s = 333 ms): a p99 below 150 ms at C=100 needs
either pacing (``--rate``, as human validators who read each item) or > 670 rt/s.

Environment: VSR_BENCH_PG_ADMIN_URL (default postgresql+psycopg://postgres@127.0.0.1:5432/test).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import os
import random
import re
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar, cast

import httpx
import orjson

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

VSR_RAW = ROOT.parent / "shared" / "vsr" / "data" / "data_files" / "all_vsr_raw_data.jsonl"
PG_ADMIN = os.environ.get(
    "VSR_BENCH_PG_ADMIN_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
)
CSRF_RE = re.compile(r'name="csrf" value="([^"]+)"')


# --- database ---------------------------------------------------------------------------------


def create_database() -> str:
    from sqlalchemy import text
    from sqlalchemy.engine import make_url

    from vsr_core.db import make_engine

    name = f"vsr_load_{os.getpid()}_{uuid.uuid4().hex[:6]}"
    admin = make_engine(PG_ADMIN).execution_options(isolation_level="AUTOCOMMIT")
    with admin.connect() as c:
        c.execute(text(f'CREATE DATABASE "{name}"'))
    admin.dispose()
    return make_url(PG_ADMIN).set(database=name).render_as_string(hide_password=False)


def drop_database(url: str) -> None:
    from sqlalchemy import text
    from sqlalchemy.engine import make_url

    from vsr_core.db import make_engine

    admin = make_engine(PG_ADMIN).execution_options(isolation_level="AUTOCOMMIT")
    with admin.connect() as c:
        c.execute(text(f'DROP DATABASE IF EXISTS "{make_url(url).database}" WITH (FORCE)'))
    admin.dispose()


@dataclass
class Seed:
    p_true: dict[str, float]  # caption|image -> share of real VSR votes that said True
    author_tokens: list[str]  # invite tokens of authors who also validate


def seed(url: str, n_examples: int, n_gold: int, n_author_validators: int) -> Seed:
    """Real VSR records (caption, relation, label, image, author) as unvoted human Examples."""
    from sqlmodel import Session

    from vsr_core.captions import parse_caption
    from vsr_core.db import make_engine
    from vsr_core.models import Example, Image, InviteToken, Worker

    if not VSR_RAW.is_file():
        sys.exit(f"real VSR data not found at {VSR_RAW}")
    records = [json.loads(line) for line in VSR_RAW.read_text().splitlines() if line.strip()]
    random.Random(0).shuffle(records)
    engine = make_engine(url)
    p_true: dict[str, float] = {}
    with Session(engine) as s:
        authors: dict[int, Worker] = {}
        images: dict[str, Image] = {}
        examples: list[tuple[dict[str, Any], Any, int]] = []
        for rec in records:
            if len(examples) >= n_examples:
                break
            try:
                parsed = parse_caption(rec["caption"], rec["relation"])
            except ValueError:
                continue
            votes = len(rec["vote_true_validator_id"]) + len(rec["vote_false_validator_id"])
            if votes == 0:
                continue
            if rec["annotator_id"] not in authors:
                w = Worker(source="imported", external_id=f"vsr-{rec['annotator_id']}",
                           roles=["generate", "validate"])
                s.add(w)
                authors[rec["annotator_id"]] = w
            if rec["image"] not in images:
                split = rec["image_link"].rsplit("/", 2)[-2]
                img = Image(coco_id=int(rec["image"][:-4]), file_name=rec["image"],
                            coco_split=split, width=640, height=480, coco_url=rec["image_link"])
                s.add(img)
                images[rec["image"]] = img
            examples.append((rec, parsed, votes))
        s.flush()
        for k, (rec, parsed, votes) in enumerate(examples):
            gold = k < n_gold
            ex = Example(
                image_id=images[rec["image"]].id, caption=rec["caption"],  # type: ignore[arg-type]
                relation=rec["relation"], subj=parsed.subj, obj=parsed.obj,
                label=bool(rec["label"]), origin="human",
                author_id=authors[rec["annotator_id"]].id,
                is_gold=gold, gold_label=bool(rec["label"]) if gold else None,
            )
            s.add(ex)
            p_true[rec["caption"] + "|" + rec["image"]] = len(rec["vote_true_validator_id"]) / votes
        tokens = []
        for k, w in enumerate(list(authors.values())[:n_author_validators]):
            token = f"bench-author-{k}"
            s.add(InviteToken(token=token, roles=["validate"], worker_id=w.id))
            tokens.append(token)
        s.commit()
    # Planner statistics for the freshly loaded tables, as autovacuum would gather on a live
    # system; without them PostgreSQL picks a plan for the candidate query that visits every
    # open Example instead of walking ix_example_queue to the first free one.
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as c:
        c.exec_driver_sql("ANALYZE")
    engine.dispose()
    return Seed(p_true, tokens)


# --- the server -------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    def __init__(self, url: str, port: int, workers: int, log: Path) -> None:
        self.url, self.port, self.workers, self.log = url, port, workers, log
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        # Readable bench ids and ~100 validators from one address: no platform formats and
        # no per-address limit on new identities here.
        env = dict(os.environ, DATABASE_URL=self.url, SECRET_KEY="load-bench-" + "s" * 40,
                   PLATFORM_ID_FORMATS="safe", NEW_WORKERS_PER_ADDRESS="0",
                   NEW_BATCHES_PER_ADDRESS="0", NEW_WORKERS_PER_STUDY="0")
        cmd = [
            sys.executable, "-m", "uvicorn", "webapp.app:create_server_app", "--factory",
            "--host", "127.0.0.1", "--port", str(self.port), "--workers", str(self.workers),
            "--no-access-log", "--log-level", "warning", "--backlog", "4096",
        ]
        # Own process group: SIGKILL must take the master and every worker at once.
        self.proc = subprocess.Popen(
            cmd, cwd=ROOT, env=env, stdout=self.log.open("ab"), stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"http://127.0.0.1:{self.port}/healthz", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            if self.proc.poll() is not None:
                sys.exit("server exited:\n" + self.log.read_text()[-3000:])
            time.sleep(0.1)
        sys.exit("server did not become healthy in 60 s")

    def kill(self) -> None:
        assert self.proc is not None
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


# --- CPU accounting (robust to other load on the machine) -------------------------------------

CLK = os.sysconf("SC_CLK_TCK")


class CpuMeter:
    """CPU seconds used during a phase by the server's processes, this run's PostgreSQL
    backends and this client. Sampled every 0.2 s, because pooled connections come and go
    and a process that exits takes its counters with it."""

    def __init__(self, server: Server) -> None:
        self.server = server
        self.database = server.url.rsplit("/", 1)[-1]
        self.first: dict[tuple[str, int], float] = {}
        self.last: dict[tuple[str, int], float] = {}
        self.history: list[tuple[float, dict[str, float]]] = []  # (when, CPU so far)
        self.client0 = self._client()

    @staticmethod
    def _client() -> float:
        import resource

        me = resource.getrusage(resource.RUSAGE_SELF)
        return me.ru_utime + me.ru_stime

    def sample(self, initial: bool = False) -> None:
        pgid = self.server.proc.pid if self.server.proc else -1
        for d in Path("/proc").iterdir():
            if not d.name.isdigit():
                continue
            try:
                stat = (d / "stat").read_text()
                fields = stat.rsplit(")", 1)[1].split()
                kind = None
                if int(fields[2]) == pgid:  # field 5: process group
                    kind = "server"
                elif "(postgres)" in stat and self.database in (d / "cmdline").read_text():
                    kind = "postgres"
            except (OSError, IndexError, ValueError):
                continue
            if kind is None:
                continue
            key = (kind, int(d.name))
            cpu = (int(fields[11]) + int(fields[12])) / CLK
            if key not in self.first:
                self.first[key] = cpu if initial else 0.0
            self.last[key] = cpu

    async def run(self, stop: asyncio.Event) -> None:
        self.sample(initial=True)
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 0.2)
            self.sample()
            self.history.append((time.monotonic(), self.result()))

    def result(self) -> dict[str, float]:
        out = {"server": 0.0, "postgres": 0.0}
        for key, cpu in self.last.items():
            out[key[0]] += cpu - self.first[key]
        out["client"] = self._client() - self.client0
        return out


async def measured(
    server: Server, work: Any, history: list[tuple[float, dict[str, float]]] | None = None
) -> dict[str, float]:
    meter = CpuMeter(server)
    stop = asyncio.Event()
    task = asyncio.create_task(meter.run(stop))
    await work
    stop.set()
    await task
    if history is not None:
        history.extend(meter.history)
    return meter.result()


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
        parts.append(bytes(buf[pos:pos + size]))
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
        self, host: str, port: int, cookies: dict[str, str], timeout: float = 30.0,
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
        return ("Cookie: " + "; ".join(f"{k}={v}" for k, v in self.cookies.items())
                + "\r\n").encode("latin-1")

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
            data = b"".join((method.encode(), b" ", path.encode(), b" HTTP/1.1\r\n",
                             self.host_line, self.cookie_line, b"\r\n"))
        else:
            payload = orjson.dumps(body)
            data = b"".join((method.encode(), b" ", path.encode(), b" HTTP/1.1\r\n",
                             self.host_line, self.cookie_line,
                             b"Content-Type: application/json\r\nContent-Length: ",
                             str(len(payload)).encode(), b"\r\n\r\n", payload))
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


# --- the simulated validators ---------------------------------------------------------------


@dataclass
class Stats:
    latencies: list[float] = field(default_factory=list)  # per request, seconds
    stamps: list[float] = field(default_factory=list)  # when each request ended (monotonic)
    rt_stamps: list[float] = field(default_factory=list)  # when each round trip ended
    cpu: list[tuple[float, dict[str, float]]] = field(default_factory=list)  # CpuMeter.history
    round_trips: list[float] = field(default_factory=list)  # fetch + vote, seconds
    # (vote id, lease id, value); the lease id is the first part of the opaque token the API
    # gives out (webapp.crowd.lease_tokens), read here only to check the database afterwards.
    acked: list[tuple[int, int, bool]] = field(default_factory=list)
    errors: Counter[str] = field(default_factory=Counter)
    retries: int = 0
    finished_batches: int = 0


async def request(
    client: HttpClient, method: str, path: str, stats: Stats, deadline: float,
    body: Any = None,
) -> Response | None:
    """One request (``body``, if any, sent as JSON), retried while the server is down (the kill
    mode) or answers 5xx; None past the deadline."""
    while True:
        t0 = time.perf_counter()
        try:
            r = await client.send(method, path, body)
        except TRANSPORT_ERRORS:
            stats.retries += 1
            if time.monotonic() > deadline + 30:
                return None
            await asyncio.sleep(0.05)
            continue
        if r.status_code >= 500:
            stats.errors[f"{method} {path.split('?')[0]} {r.status_code}"] += 1
            stats.retries += 1
            await asyncio.sleep(0.05)
            continue
        stats.latencies.append(time.perf_counter() - t0)
        stats.stamps.append(time.monotonic())
        return r


async def enter(client: httpx.AsyncClient, query: str) -> None:
    r = await client.get(f"/start/validate?{query}")
    assert r.status_code == 303, (r.status_code, r.text[:300])
    page = await client.get("/consent/validate")
    m = CSRF_RE.search(page.text)
    assert m, page.text[:300]
    csrf = m.group(1)
    r = await client.post("/consent/validate", data={"decision": "agree", "csrf": csrf})
    assert r.status_code == 303, r.text[:300]
    r = await client.post("/begin/validate", data={"csrf": csrf})
    assert r.status_code == 303 and r.headers["location"] == "/validate", r.text[:300]
    client.headers["X-CSRF-Token"] = csrf  # what the vote API requires (webapp.http.api_guard)


async def validator(
    client: HttpClient, seed_: Seed, stats: Stats, deadline: float, rng: random.Random,
    combined: bool, interval: float = 0.0, slot: dict[str, Any] | None = None,
) -> None:
    """One validator's loop. ``interval`` > 0 paces it (think time): one round trip started
    every ``interval`` seconds at most, so C clients offer C / interval round trips/s.
    ``slot`` carries the validator's current item and pacing from one phase to the next."""
    slot = {} if slot is None else slot
    state: dict[str, Any] | None = slot.get("state")
    next_start = slot.get("next_start", time.monotonic() + rng.random() * interval)
    await _validate(client, seed_, stats, deadline, rng, combined, interval, slot, state,
                    next_start)


async def _validate(
    client: HttpClient, seed_: Seed, stats: Stats, deadline: float, rng: random.Random,
    combined: bool, interval: float, slot: dict[str, Any], state: dict[str, Any] | None,
    next_start: float,
) -> None:
    if slot.get("done"):
        return
    while time.monotonic() < deadline:
        if interval:
            if next_start >= deadline:  # its next turn belongs to the next phase
                break
            await asyncio.sleep(max(0.0, next_start - time.monotonic()))
            next_start = max(next_start + interval, time.monotonic())
        t0 = time.perf_counter()
        if state is None:
            r = await request(client, "GET", "/api/validate/item", stats, deadline)
            if r is None:
                return
            if r.status_code != 200:
                stats.errors[f"GET item {r.status_code}"] += 1
                slot["done"] = True
                return
            state = r.json()
        item = state.get("item")
        if item is None:
            stats.finished_batches += 1
            slot["done"] = True
            return
        p = seed_.p_true.get(item["caption"] + "|" + item["image"]["src"].rsplit("/", 1)[-1], 0.5)
        body = {"assignment_id": item["assignment_id"], "value": rng.random() < p,
                "duration_ms": rng.randint(1500, 9000)}
        path = "/api/validate/votes?next=1" if combined else "/api/validate/votes"
        r = await request(client, "POST", path, stats, deadline, body)
        if r is None:
            return
        if r.status_code not in (200, 201):
            stats.errors[f"POST vote {r.status_code}"] += 1
            state = None
            continue
        out = r.json()
        lease_id = int(item["assignment_id"].split(".", 1)[0])
        stats.acked.append((out["vote_id"], lease_id, out["value"]))
        stats.round_trips.append(time.perf_counter() - t0)
        stats.rt_stamps.append(time.monotonic())
        if out["finished"]:
            stats.finished_batches += 1
            slot["done"] = True
            return
        state = out["next"] if combined else None
    slot["next_start"], slot["state"] = next_start, state


async def baseline_client(client: HttpClient, stats: Stats, deadline: float) -> None:
    while time.monotonic() < deadline:
        t0 = time.perf_counter()
        for _ in range(2):
            r = await request(client, "GET", "/healthz", stats, deadline)
            if r is None or r.status_code != 200:
                stats.errors["healthz"] += 1
                return
        stats.round_trips.append(time.perf_counter() - t0)


async def run(
    args: argparse.Namespace, server: Server, seed_: Seed
) -> tuple[Stats, Stats, dict[str, float], dict[str, float]]:
    base = f"http://127.0.0.1:{server.port}"
    limits = httpx.Limits(max_connections=4, max_keepalive_connections=4)
    clients = [
        httpx.AsyncClient(base_url=base, timeout=30, limits=limits)
        for _ in range(args.concurrency)
    ]
    testers: list[HttpClient] = []
    try:
        sem = asyncio.Semaphore(20)

        async def enter_one(k: int, c: httpx.AsyncClient) -> None:
            async with sem:
                if k < len(seed_.author_tokens):
                    await enter(c, f"token={seed_.author_tokens[k]}")
                else:
                    await enter(c, f"PROLIFIC_PID=bench{k:04d}&STUDY_ID=load&SESSION_ID=s{k}")

        await asyncio.gather(*(enter_one(k, c) for k, c in enumerate(clients)))
        # The measured phases: each validator's session cookie, on a connection of its own.
        if args.client == "raw":
            raw = [RawClient("127.0.0.1", server.port, jar_cookies(c),
                             csrf=c.headers.get("X-CSRF-Token", "")) for c in clients]
            testers.extend(raw)

            async def connect_one(c: RawClient) -> None:
                async with sem:
                    await c.connect()

            await asyncio.gather(*(connect_one(c) for c in raw))
        else:
            testers.extend(HttpxClient(c) for c in clients)

        # The client's own garbage collector would stall all 100 validators at once (full
        # collections of 70-95 ms were seen), adding to every latency in flight: it is off
        # while measuring; a run allocates little that is not kept anyway.
        gc.collect()
        gc.freeze()
        gc.disable()
        base_stats = Stats()
        t_end = time.monotonic() + args.baseline
        t0 = time.perf_counter()
        base_cpu = await measured(
            server, asyncio.gather(*(baseline_client(c, base_stats, t_end) for c in testers))
        )
        base_elapsed = time.perf_counter() - t0

        # Warm-up: the same validators, not measured (connection pools filling, statements
        # being prepared, the per-process display caches empty); their votes are checked.
        interval = args.concurrency / args.rate if args.rate else 0.0
        slots: list[dict[str, Any]] = [{} for _ in testers]
        warm = Stats()
        if args.warmup > 0:
            warm_end = time.monotonic() + args.warmup
            await asyncio.gather(*(
                validator(c, seed_, warm, warm_end, random.Random(-1 - k), args.combined,
                          interval, slots[k])
                for k, c in enumerate(testers)
            ))
        stats = Stats()
        stats.acked.extend(warm.acked)
        deadline = time.monotonic() + args.duration
        killer = None
        if args.kill:
            async def kill_and_restart() -> None:
                await asyncio.sleep(args.duration / 2)
                print(f"  SIGKILL server (pid group {server.proc.pid if server.proc else '?'})",
                      flush=True)
                await asyncio.to_thread(server.kill)
                t_restart = time.perf_counter()
                await asyncio.to_thread(server.start)
                print(f"  restarted in {time.perf_counter() - t_restart:.2f} s", flush=True)

            killer = asyncio.create_task(kill_and_restart())
        t0 = time.perf_counter()
        load_cpu = await measured(server, asyncio.gather(*(
            validator(c, seed_, stats, deadline, random.Random(k), args.combined, interval,
                      slots[k])
            for k, c in enumerate(testers)
        )), stats.cpu)
        elapsed = time.perf_counter() - t0
        if killer is not None:
            await killer
        if args.timeline:
            print_timeline(stats)
        stats.latencies.sort()
        base_stats.latencies.sort()
        print(f"  load phase {elapsed:.1f} s, baseline phase {base_elapsed:.1f} s", flush=True)
        return base_stats, stats, base_cpu, load_cpu
    finally:
        gc.enable()
        await asyncio.gather(*(c.aclose() for c in testers))
        await asyncio.gather(*(c.aclose() for c in clients))


def print_timeline(stats: Stats, step: float = 2.0) -> None:
    """Per ``step`` seconds of the measured phase: request rate, p50/p99, and CPU ms per
    round trip of the server and PostgreSQL (where a tail or a slowdown comes from)."""
    if not stats.stamps:
        return
    t0 = stats.stamps[0]
    buckets: dict[int, list[float]] = defaultdict(list)
    for stamp, latency in zip(stats.stamps, stats.latencies, strict=True):
        buckets[int((stamp - t0) // step)].append(latency)
    trips = Counter(int((stamp - t0) // step) for stamp in stats.rt_stamps)
    cpu_at: dict[int, dict[str, float]] = {}
    for when, cpu in stats.cpu:
        cpu_at[int((when - t0) // step)] = cpu  # the last sample in each bucket
    for k in sorted(buckets):
        v = sorted(buckets[k])
        line = (f"  t={k * step:4.0f}s  {len(v) / step:6.1f} req/s  p50 {1000 * pct(v, .5):6.1f} ms"
                f"  p99 {1000 * pct(v, .99):6.1f} ms  max {1000 * v[-1]:6.1f} ms")
        if k in cpu_at and k - 1 in cpu_at and trips[k]:
            per = {name: 1000 * (cpu_at[k][name] - cpu_at[k - 1][name]) / trips[k]
                   for name in ("server", "postgres")}
            line += f"  CPU ms/rt server {per['server']:.2f} postgres {per['postgres']:.2f}"
        print(line)


# --- checks -----------------------------------------------------------------------------------


def check(url: str, stats: Stats) -> list[str]:
    from sqlmodel import Session, select

    from vsr_core.agreement import is_decided
    from vsr_core.db import make_engine
    from vsr_core.models import Example, Vote
    from vsr_core.study import load_study_config
    from webapp.validate.audit import audit_counters

    problems: list[str] = []
    engine = make_engine(url)
    with Session(engine) as s:
        config = load_study_config(s)
        votes = s.exec(select(Vote)).all()
        examples = {e.id: e for e in s.exec(select(Example))}
        by_id = {v.id: v for v in votes}
        dup = Counter((v.example_id, v.worker_id) for v in votes)
        if any(n > 1 for n in dup.values()):
            problems.append(f"{sum(n > 1 for n in dup.values())} duplicate (example, worker) votes")
        lost = [a for a in stats.acked if a[0] not in by_id
                or by_id[a[0]].assignment_id != a[1] or by_id[a[0]].value != a[2]]
        if lost:
            problems.append(f"{len(lost)} acknowledged votes missing or changed, e.g. {lost[:3]}")
        own = [v.id for v in votes if examples[v.example_id].author_id == v.worker_id]
        if own:
            problems.append(f"{len(own)} votes by the Example's own author")
        per_example: dict[int, list[Vote]] = defaultdict(list)
        for v in sorted(votes, key=lambda v: v.id or 0):
            per_example[v.example_id].append(v)
        over = 0
        for ex_id, vs in per_example.items():
            ex = examples[ex_id]
            if ex.is_gold:
                continue
            target = ex.target_votes or config.votes_per_example
            maximum = max(target, config.max_votes_per_example)
            if len(vs) > maximum:
                over += 1
            elif len(vs) > target:
                first = vs[:target]
                agree = sum(v.value == ex.label for v in first)
                if is_decided(agree, target, max_votes=maximum, min_votes=target,
                              threshold=config.keep_threshold, method=config.decide_method,  # type: ignore[arg-type]
                              confidence=config.decide_confidence):
                    over += 1
        if over:
            problems.append(f"{over} Examples over-served")
        mismatches = audit_counters(s)
        if mismatches:
            problems.append(f"{len(mismatches)} queue counter mismatches, e.g. {mismatches[:3]}")
        dist = Counter(len(vs) for ex_id, vs in per_example.items() if not examples[ex_id].is_gold)
        print(f"  votes in DB: {len(votes)}  acknowledged: {len(stats.acked)}  "
              f"votes per Example: {dict(sorted(dist.items()))}")
    engine.dispose()
    return problems


T = TypeVar("T")


def run_loop(main: Coroutine[Any, Any, T]) -> T:
    """Run the client on uvloop when it is installed (less CPU per request), else asyncio."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(main)
    return uvloop.run(main)


def loop_name() -> str:
    try:
        import uvloop  # noqa: F401
    except ImportError:
        return "asyncio"
    return "uvloop"


def pct(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return float("nan")
    return sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--concurrency", "-c", type=int, default=100)
    ap.add_argument("--duration", "-d", type=float, default=20.0, help="seconds of load")
    ap.add_argument("--baseline", type=float, default=5.0, help="seconds of /healthz baseline")
    ap.add_argument("--workers", "-w", type=int, default=2, help="uvicorn worker processes")
    ap.add_argument("--examples", type=int, default=4000)
    ap.add_argument("--gold", type=int, default=60)
    ap.add_argument("--author-validators", type=int, default=10)
    ap.add_argument("--kill", action="store_true", help="SIGKILL + restart the server halfway")
    ap.add_argument("--combined", action="store_true",
                    help="one request per round trip (POST vote ?next=1 returns the next item)")
    ap.add_argument("--rate", type=float, default=0.0,
                    help="offered round trips/s over all clients (think time); 0 = flat out")
    ap.add_argument("--client", choices=("raw", "httpx"), default="raw",
                    help="HTTP client of the measured phases (the entry always uses httpx)")
    ap.add_argument("--warmup", type=float, default=3.0,
                    help="seconds of the same load before the measured phase (0 = none)")
    ap.add_argument("--timeline", action="store_true",
                    help="print p50/p99 per 2 s of the measured phase")
    ap.add_argument("--keep-db", action="store_true")
    args = ap.parse_args()

    from migrations.runner import upgrade

    url = create_database()
    log = Path(os.environ.get("TMPDIR", "/tmp")) / f"vsr_load_{os.getpid()}.log"
    server = Server(url, free_port(), args.workers, log)
    try:
        upgrade(url)
        seed_ = seed(url, args.examples, args.gold, args.author_validators)
        print(f"seeded {len(seed_.p_true)} real VSR captions ({args.gold} gold); "
              f"C={args.concurrency}, {args.workers} uvicorn workers, PostgreSQL; "
              f"{'one request' if args.combined else 'two requests'} per round trip"
              f"{'; SIGKILL mode' if args.kill else ''}"
              f"{f'; offered {args.rate:g} rt/s' if args.rate else '; flat out'}; "
              f"client {args.client} on {loop_name()}", flush=True)
        server.start()
        base, stats, base_cpu, load_cpu = run_loop(run(args, server, seed_))
        server.stop()
        base_rate = len(base.round_trips) / args.baseline
        rate = len(stats.round_trips) / args.duration
        rts = sorted(stats.round_trips)
        print(f"baseline (2 x /healthz per round trip): {base_rate:8.1f} rt/s  "
              f"p50 {1000 * pct(base.latencies, .5):6.1f} ms  "
              f"p99 {1000 * pct(base.latencies, .99):6.1f} ms per request")
        print(f"validation (fetch item + submit vote):  {rate:8.1f} rt/s  "
              f"p50 {1000 * pct(stats.latencies, .5):6.1f} ms  "
              f"p99 {1000 * pct(stats.latencies, .99):6.1f} ms per request; "
              f"round trip p50 {1000 * pct(rts, .5):.1f} ms, p99 {1000 * pct(rts, .99):.1f} ms")
        print(f"ratio validation / baseline round trips: {rate / base_rate:.2f}")

        def per_rt(cpu: dict[str, float], n: int) -> str:
            n = max(n, 1)
            return "  ".join(f"{k} {1000 * v / n:.2f}" for k, v in cpu.items())

        print(f"CPU ms per round trip, baseline:   {per_rt(base_cpu, len(base.round_trips))}")
        if args.kill:
            print("CPU ms per round trip, validation: n/a (the server was killed and restarted)")
        else:
            print(f"CPU ms per round trip, validation: {per_rt(load_cpu, len(stats.round_trips))}")
        busy = os.getloadavg()[0]
        print(f"  (load average now {busy:.1f} on {os.cpu_count()} CPUs; other work on the "
              "machine slows both phases alike, so compare the ratio and CPU per round trip)")
        print(f"  retries (server down / 5xx): {stats.retries}  errors: {dict(stats.errors)}  "
              f"finished batches: {stats.finished_batches}")
        problems = check(url, stats)
        if problems:
            print("INVARIANTS VIOLATED:\n  " + "\n  ".join(problems))
            return 1
        print("invariants: OK (no duplicate, nothing acknowledged lost, none over-served, "
              "no self-validation, counters exact)")
        return 0
    finally:
        server.stop()
        if not args.keep_db:
            drop_database(url)


if __name__ == "__main__":
    sys.exit(main())
