"""The simulated validators: entry through the real pages, then fetch-item / submit-vote round
trips (flat out or paced), the /healthz baseline, and the per-phase statistics."""

from __future__ import annotations

import argparse
import asyncio
import gc
import random
import re
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

import httpx

from bench.load.cpu import measured
from bench.load.database import Seed
from bench.load.http_client import (
    TRANSPORT_ERRORS,
    HttpClient,
    HttpxClient,
    RawClient,
    Response,
    jar_cookies,
)
from bench.load.server import Server

CSRF_RE = re.compile(r'name="csrf" value="([^"]+)"')


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
    skipped_turns: int = 0  # paced turns a validator missed because its previous one ran late


async def request(
    client: HttpClient,
    method: str,
    path: str,
    stats: Stats,
    deadline: float,
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
    client: HttpClient,
    seed_: Seed,
    stats: Stats,
    deadline: float,
    rng: random.Random,
    combined: bool,
    interval: float = 0.0,
    slot: dict[str, Any] | None = None,
) -> None:
    """One validator's loop. ``interval`` > 0 paces it (think time): one round trip started
    every ``interval`` seconds at most, so C clients offer C / interval round trips/s.
    ``slot`` carries the validator's current item and pacing from one phase to the next."""
    slot = {} if slot is None else slot
    state: dict[str, Any] | None = slot.get("state")
    next_start = slot.get("next_start", time.monotonic() + rng.random() * interval)
    await _validate(
        client, seed_, stats, deadline, rng, combined, interval, slot, state, next_start
    )


async def _validate(
    client: HttpClient,
    seed_: Seed,
    stats: Stats,
    deadline: float,
    rng: random.Random,
    combined: bool,
    interval: float,
    slot: dict[str, Any],
    state: dict[str, Any] | None,
    next_start: float,
) -> None:
    if slot.get("done"):
        return
    while time.monotonic() < deadline:
        late = 0.0
        if interval:
            if next_start >= deadline:  # its next turn belongs to the next phase
                break
            await asyncio.sleep(max(0.0, next_start - time.monotonic()))
            now = time.monotonic()
            # Timed from when the turn was due, not from when the client got round to it
            # (no coordinated omission, as wrk2): a client or server running late shows as
            # latency. A turn missed altogether (the previous one ran past it) is counted.
            late = max(0.0, now - next_start)
            if now > next_start + interval:
                stats.skipped_turns += int((now - next_start) / interval)
            next_start = max(next_start + interval, now)
        t0 = time.perf_counter() - late
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
        body = {
            "assignment_id": item["assignment_id"],
            "value": rng.random() < p,
            "duration_ms": rng.randint(1500, 9000),
        }
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
        httpx.AsyncClient(base_url=base, timeout=30, limits=limits) for _ in range(args.concurrency)
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
            raw = [
                RawClient(
                    "127.0.0.1", server.port, jar_cookies(c), csrf=c.headers.get("X-CSRF-Token", "")
                )
                for c in clients
            ]
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
            await asyncio.gather(
                *(
                    validator(
                        c,
                        seed_,
                        warm,
                        warm_end,
                        random.Random(-1 - k),
                        args.combined,
                        interval,
                        slots[k],
                    )
                    for k, c in enumerate(testers)
                )
            )
        stats = Stats()
        stats.acked.extend(warm.acked)
        # A validator whose batch ended (or whose item failed) in the warm-up offers nothing in
        # the measured phase: counted with the measured phase's, so "finished batches" says how
        # many validators the measured rate is short of.
        stats.finished_batches = warm.finished_batches
        stats.errors.update({f"warm-up {what}": n for what, n in warm.errors.items()})
        deadline = time.monotonic() + args.duration
        killer = None
        if args.kill:

            async def kill_and_restart() -> None:
                await asyncio.sleep(args.duration / 2)
                print(
                    f"  SIGKILL server (pid group {server.proc.pid if server.proc else '?'})",
                    flush=True,
                )
                await asyncio.to_thread(server.kill)
                t_restart = time.perf_counter()
                await asyncio.to_thread(server.start)
                print(f"  restarted in {time.perf_counter() - t_restart:.2f} s", flush=True)

            killer = asyncio.create_task(kill_and_restart())
        t0 = time.perf_counter()
        load_cpu = await measured(
            server,
            asyncio.gather(
                *(
                    validator(
                        c,
                        seed_,
                        stats,
                        deadline,
                        random.Random(k),
                        args.combined,
                        interval,
                        slots[k],
                    )
                    for k, c in enumerate(testers)
                )
            ),
            stats.cpu,
        )
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


def pct(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return float("nan")
    return sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))]


def print_timeline(stats: Stats, step: float = 2.0) -> None:
    """Per ``step`` seconds of the measured phase: request rate, p50/p99, and CPU ms per
    round trip of the server and PostgreSQL (where a tail or a slowdown comes from)."""
    if not stats.stamps:
        return
    t0 = stats.stamps[0]
    # Wall-clock time of the first window, to line the windows up with other logs (the
    # database's, a sampler's) that stamp with the wall clock.
    print(
        f"  timeline from {time.time() - (time.monotonic() - t0):.1f} (Unix time), "
        f"windows of {step:g} s"
    )
    buckets: dict[int, list[float]] = defaultdict(list)
    for stamp, latency in zip(stats.stamps, stats.latencies, strict=True):
        buckets[int((stamp - t0) // step)].append(latency)
    trips = Counter(int((stamp - t0) // step) for stamp in stats.rt_stamps)
    cpu_at: dict[int, dict[str, float]] = {}
    for when, cpu in stats.cpu:
        cpu_at[int((when - t0) // step)] = cpu  # the last sample in each bucket
    for k in sorted(buckets):
        v = sorted(buckets[k])
        line = (
            f"  t={k * step:4.0f}s  {len(v) / step:6.1f} req/s  p50 {1000 * pct(v, 0.5):6.1f} ms"
            f"  p99 {1000 * pct(v, 0.99):6.1f} ms  max {1000 * v[-1]:6.1f} ms"
        )
        if k in cpu_at and k - 1 in cpu_at and trips[k]:
            per = {
                name: 1000 * (cpu_at[k][name] - cpu_at[k - 1][name]) / trips[k]
                for name in ("server", "postgres")
            }
            line += f"  CPU ms/rt server {per['server']:.2f} postgres {per['postgres']:.2f}"
        print(line)
