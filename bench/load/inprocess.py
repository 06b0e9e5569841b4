"""CPU per validation round trip of the app itself, in one process, one request at a time
(docs/scaling.md): the figure the HTTP benchmark's load, and other work on the machine,
disturb least.

The app (``webapp.app.create_app``, the same middleware and routes ``vsr serve`` runs) is
called as an ASGI callable, no socket, no uvicorn, against a fresh PostgreSQL database seeded
as ``python -m bench.load`` seeds it. Validators enter through the real pages (httpx on the
ASGI transport); then, in turn, each does ``POST /api/validate/votes?next=1`` round trips.
Printed: this process's CPU per round trip (the app's work plus a few microseconds of
calling it) and this database's PostgreSQL backends' CPU per round trip, each also as a ratio
against a baseline measured in the same run: ``GET /healthz`` (one trivial query) through
the same stack; and the SQL statements the API ran per round trip (a count, which other work
on the machine does not disturb). ``--profile`` adds cProfile's top functions of the
measured round trips.

    python -m bench.load.inprocess                 # 60 validators, 3,000 round trips
    python -m bench.load.inprocess --profile 40    # and the 40 costliest functions
    python -m bench.load.inprocess --signals       # each vote with the page's measurements
    python -m bench.load.inprocess --driver-ab 15  # statements on psycopg's cursor against
                                                   # SQLAlchemy's execute, ABBA blocks
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import os
import pstats
import random
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import orjson
from sqlalchemy import event

from bench.load.cpu import processes_cpu
from bench.load.database import create_database, drop_database, seed
from bench.load.validators import enter

# With --signals each vote carries the task page's measurements, as the HTML page sends them
# (one more INSERT per vote, docs/quality.md).
SIGNALS: str | None = None
Asgi = Callable[[dict[str, Any], Any, Any], Awaitable[None]]


class Direct:
    """One validator's requests straight into the ASGI app: a hand-built scope with its
    session cookie, the answer collected from the ``send`` messages."""

    def __init__(self, app: Asgi, cookie: str, csrf: str) -> None:
        self.app = app
        self.headers = [
            (b"host", b"bench"),
            (b"cookie", cookie.encode()),
            (b"x-csrf-token", csrf.encode()),
            (b"content-type", b"application/json"),
        ]

    async def call(self, method: str, path: str, body: bytes = b"") -> tuple[int, bytes]:
        route, _, query = path.partition("?")
        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": method,
            "scheme": "http",
            "path": route,
            "raw_path": route.encode(),
            "query_string": query.encode(),
            "root_path": "",
            "headers": [*self.headers, (b"content-length", str(len(body)).encode())],
            "client": ("127.0.0.1", 1),
            "server": ("127.0.0.1", 80),
        }
        sent = False
        status, chunks = 0, []

        async def receive() -> dict[str, Any]:
            nonlocal sent
            if sent:
                await asyncio.Event().wait()
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}

        async def send(message: dict[str, Any]) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            elif message["type"] == "http.response.body":
                chunks.append(message.get("body", b""))

        await self.app(scope, receive, send)
        return status, b"".join(chunks)


def pg_cpu(database: str) -> float:
    """CPU seconds so far of the PostgreSQL backends serving ``database``."""
    return sum(cpu for kind, _, cpu in processes_cpu(database) if kind == "postgres")


async def entered(app: Asgi, n: int, author_tokens: list[str]) -> list[Direct]:
    out = []
    transport = httpx.ASGITransport(app=app)  # type: ignore[arg-type]
    for k in range(n):
        async with httpx.AsyncClient(transport=transport, base_url="http://bench") as c:
            query = (
                f"token={author_tokens[k]}"
                if k < len(author_tokens)
                else f"PROLIFIC_PID=inproc{k:04d}&STUDY_ID=load&SESSION_ID=s{k}"
            )
            await enter(c, query)
            cookie = "; ".join(f"{name}={value}" for name, value in c.cookies.items())
            out.append(Direct(app, cookie, c.headers["X-CSRF-Token"]))
    return out


async def measure(
    clients: list[Direct],
    rounds: int,
    p_true: dict[str, float],
    database: str,
    profile: cProfile.Profile | None,
    on_start: Callable[[], None] | None = None,
) -> tuple[int, float, float, float]:
    """(round trips, seconds of this process's CPU, of PostgreSQL's, wall seconds)."""
    rng = random.Random(0)
    items: list[dict[str, Any] | None] = []
    for c in clients:
        status, body = await c.call("GET", "/api/validate/item")
        assert status == 200, (status, body[:300])
        items.append(orjson.loads(body)["item"])
    done = 0
    if on_start is not None:
        on_start()  # the items above are fetched before the measured round trips
    cpu0, pg0, wall0 = time.process_time(), pg_cpu(database), time.perf_counter()
    if profile is not None:
        profile.enable()
    for _ in range(rounds):
        for k, c in enumerate(clients):
            item = items[k]
            if item is None:
                continue
            p = p_true.get(
                item["caption"] + "|" + str(item["image"]["src"]).rsplit("/", 1)[-1], 0.5
            )
            vote = {
                "assignment_id": item["assignment_id"],
                "value": rng.random() < p,
                "duration_ms": 2000,
            }
            if SIGNALS is not None:
                vote["signals"] = SIGNALS
            body = orjson.dumps(vote)
            status, raw = await c.call("POST", "/api/validate/votes?next=1", body)
            assert status in (200, 201), (status, raw[:300])
            out = orjson.loads(raw)
            items[k] = out["next"]["item"] if out["next"] and not out["finished"] else None
            done += 1
    if profile is not None:
        profile.disable()
    return (done, time.process_time() - cpu0, pg_cpu(database) - pg0, time.perf_counter() - wall0)


async def baseline(clients: list[Direct], n: int, database: str) -> tuple[float, float]:
    cpu0, pg0 = time.process_time(), pg_cpu(database)
    for k in range(n):
        status, _ = await clients[k % len(clients)].call("GET", "/healthz")
        assert status == 200
    return (time.process_time() - cpu0) / n, (pg_cpu(database) - pg0) / n


async def driver_ab(
    clients: list[Direct], blocks: int, p_true: dict[str, float], database: str
) -> None:
    """The hot path's statements on psycopg's cursor (webapp.validate.driver) against the same
    statements through SQLAlchemy's ``Connection.execute``, in alternating blocks of one round
    trip per validator: drift of the machine's speed falls on both alike, and each pair of
    neighbouring blocks gives one ratio."""
    from webapp.validate import driver

    straight = driver.execute

    def through_sqlalchemy(connection: Any, stmt: Any, params: dict[str, Any]) -> Any:
        return connection.execute(stmt, params)

    per: dict[str, list[float]] = {"driver": [], "sqlalchemy": []}
    try:
        for k in range(2 * blocks):
            mode = ("driver", "sqlalchemy")[(k + k // 2) % 2]  # ABBA order
            driver.execute = straight if mode == "driver" else through_sqlalchemy
            n, cpu, pg, _ = await measure(clients, 1, p_true, database, None)
            if n:
                per[mode].append((cpu + pg) / n)
    finally:
        driver.execute = straight
    ratios = sorted(a / b for a, b in zip(per["driver"], per["sqlalchemy"], strict=False))
    if not ratios:
        print("driver A/B: no round trips left (batches finished)")
        return
    med = {m: 1000 * sorted(v)[len(v) // 2] for m, v in per.items()}
    print(
        f"driver A/B over {len(ratios)} block pairs of {len(clients)} round trips: median "
        f"CPU per round trip (app + PostgreSQL) {med['driver']:.3f} ms on psycopg's cursor, "
        f"{med['sqlalchemy']:.3f} ms through SQLAlchemy; ratio median "
        f"{ratios[len(ratios) // 2]:.3f} (quartiles {ratios[len(ratios) // 4]:.3f}-"
        f"{ratios[3 * len(ratios) // 4]:.3f})"
    )


def print_plans(app: Any) -> None:
    """How PostgreSQL planned each statement the API pool prepared: custom plans are
    planned again on every execution (pg_prepared_statements, per connection)."""
    from sqlalchemy import text

    engine = app.state.api_engine
    with engine.connect() as c:
        rows = c.execute(
            text(
                "SELECT generic_plans, custom_plans, regexp_replace(statement, '\\s+', ' ', 'g') "
                "FROM pg_prepared_statements ORDER BY custom_plans DESC"
            )
        ).all()
    print("prepared statements on one API connection: generic plans, custom plans, SQL")
    for generic, custom, sql in rows:
        print(f"  {generic:6d} {custom:6d}  {sql[:150]}")


async def main_async(args: argparse.Namespace, url: str) -> None:
    from migrations.runner import upgrade

    upgrade(url)
    seeded = seed(url, args.examples, args.gold, 10)
    os.environ.update(
        DATABASE_URL=url,
        SECRET_KEY="load-bench-" + "s" * 40,
        PLATFORM_ID_FORMATS="safe",
        NEW_WORKERS_PER_ADDRESS="0",
        NEW_BATCHES_PER_ADDRESS="0",
        NEW_WORKERS_PER_STUDY="0",
    )
    from vsr_core.settings import get_settings
    from webapp.app import create_app

    get_settings.cache_clear()
    app = create_app()
    clients = await entered(app, args.validators, seeded.author_tokens)
    database = url.rsplit("/", 1)[-1]
    await measure(clients, 3, seeded.p_true, database, None)  # warm-up: pools, caches
    await baseline(clients, 200, database)
    base_cpu, base_pg = await baseline(clients, args.rounds * len(clients) // 2, database)
    profile = cProfile.Profile() if args.profile else None
    in_thread = cProfile.Profile() if args.profile else None
    if in_thread is not None:
        # cProfile sees one thread: the API's database work runs in a worker thread
        # (webapp.validate.routes._retrying), profiled on its own.
        from webapp.validate import routes

        plain = routes._retrying

        def profiled(*a: Any) -> Any:
            return in_thread.runcall(plain, *a)

        routes._retrying = profiled  # type: ignore[assignment]
    counted = {"statements": 0, "commits": 0}
    api_engine = app.state.api_engine  # made by the warm-up's first API call

    def on_statement(*_: Any) -> None:
        counted["statements"] += 1

    def on_commit(*_: Any) -> None:
        counted["commits"] += 1

    n, cpu, pg, wall = await measure(clients, args.rounds, seeded.p_true, database, profile)
    # The statements counted in a pass of their own: a statement-event listener sends the hot
    # path's statements through SQLAlchemy (webapp.validate.driver), which costs more CPU.
    event.listen(api_engine, "before_cursor_execute", on_statement)
    event.listen(api_engine, "commit", on_commit)
    n_counted, *_ = await measure(
        clients,
        2,
        seeded.p_true,
        database,
        None,
        on_start=lambda: counted.update(statements=0, commits=0),
    )
    event.remove(api_engine, "before_cursor_execute", on_statement)
    event.remove(api_engine, "commit", on_commit)
    print(
        f"{n} round trips (POST vote ?next=1), {len(clients)} validators, one at a time, "
        f"{wall:.1f} s; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs"
    )
    print(
        f"baseline GET /healthz per request: app {1000 * base_cpu:.3f} ms CPU, "
        f"PostgreSQL {1000 * base_pg:.3f} ms"
    )
    print(
        f"round trip: app {1000 * cpu / n:.3f} ms CPU, PostgreSQL {1000 * pg / n:.3f} ms, "
        f"total {1000 * (cpu + pg) / n:.3f} ms"
    )
    print(f"ratio round trip / baseline request (app CPU): {cpu / n / base_cpu:.2f}")
    print(
        f"SQL statements per round trip: {counted['statements'] / max(n_counted, 1):.2f} "
        f"(and {counted['commits'] / max(n_counted, 1):.2f} commits; the figure machine load "
        "does not move)"
    )
    if args.plans:
        print_plans(app)
    if args.driver_ab:
        await driver_ab(clients, args.driver_ab, seeded.p_true, database)
    for name, prof in (("event loop", profile), ("API thread", in_thread)):
        if prof is not None:
            print(f"--- {name}")
            stats = pstats.Stats(prof)
            stats.sort_stats("cumulative").print_stats(args.profile)
            stats.sort_stats("tottime").print_stats(args.profile)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--validators", type=int, default=60)
    ap.add_argument("--rounds", type=int, default=50, help="round trips per validator")
    ap.add_argument("--examples", type=int, default=4000)
    ap.add_argument("--gold", type=int, default=60)
    ap.add_argument(
        "--plans",
        action="store_true",
        help="print generic / custom plan counts of the prepared statements",
    )
    ap.add_argument(
        "--driver-ab",
        type=int,
        default=0,
        metavar="PAIRS",
        help="then compare the statements on psycopg's cursor with SQLAlchemy's "
        "execute in PAIRS alternating pairs of blocks",
    )
    ap.add_argument("--profile", type=int, default=0, help="print the N costliest functions")
    ap.add_argument(
        "--signals", action="store_true", help="each vote carries the page's measurements"
    )
    args = ap.parse_args()
    if args.signals:
        global SIGNALS
        SIGNALS = "shown=2310;focus=0;pointer=14;keys=1;canary=0"
    url = create_database()
    try:
        asyncio.run(main_async(args, url))
    finally:
        drop_database(url)
    return 0


if __name__ == "__main__":
    sys.exit(main())
