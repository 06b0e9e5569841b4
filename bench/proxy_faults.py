"""Faults through the proxy (docs/deployment.md): 100 simulated validators go through nginx
(TLS, the shipped deploy/nginx config) to two replicas on one PostgreSQL, while

1. one replica is SIGKILLed (its whole process group) and, a phase later, started again;
2. every PostgreSQL connection of the site is terminated (pg_terminate_backend), twice;
3. PostgreSQL itself is restarted (``pg_ctl restart -m immediate``): the client-visible outage
   (the longest time in which no client got an answer that was not a 5xx) is printed against
   the database's own restart time (pg_ctl's, until it accepts connections again), with the
   5xx the clients saw by status. Target: outage <= restart + 1 s, and 503s, no 502s. During
   that phase 10 more clients load a page (GET /healthz) every 20 ms besides the validators.

The site's PostgreSQL is a server of the bench's own (initdb/pg_ctl on a free port,
bench/load/private_pg.py), never the shared one: it is restarted.

For each, round trips per second and p99 are printed for the phases before, during and after
the fault, as ratios against a baseline measured in the same run through the same proxy and
clients: round trips of two ``/healthz`` requests. Then the audit of bench/load (no acknowledged
vote lost or changed, none duplicated, no Example over-served, queue counters exact).

The clients are httpx over TLS (the raw client of bench/load speaks plain HTTP only), so
client CPU shares the 2 cores with nginx, the replicas and PostgreSQL: compare the ratios.

    python -m bench.proxy_faults                # C=100, 8 s per phase
    python -m bench.proxy_faults -c 50 --phase 5
    python -m bench.proxy_faults --only restart --restarts 3
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from bench.load.__main__ import run_loop
from bench.load.audit import check
from bench.load.database import Seed, seed
from bench.load.http_client import HttpxClient
from bench.load.nginx import Proxy, nginx_binary
from bench.load.private_pg import PrivatePostgres, available
from bench.load.server import Server, free_port
from bench.load.validators import Stats, baseline_client, enter, pct, request, validator


def terminate_backends(url: str) -> int:
    """End every server process connected to the site's database (what a PostgreSQL failover
    or an idle-connection killer does to the replicas' pools)."""
    from sqlalchemy import text
    from sqlalchemy.engine import make_url

    from vsr_core.db import make_engine

    engine = make_engine(url)
    with engine.connect() as c:
        n = c.execute(
            text(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                "WHERE datname = :db AND pid <> pg_backend_pid()"
            ),
            {"db": make_url(url).database},
        ).scalar_one()
        c.commit()
    engine.dispose()
    return int(n)


async def probe(client: HttpxClient, stats: Stats, deadline: float) -> None:
    """A page load now and then (GET /healthz, which reads the database): nginx passes a
    failed GET on to the other replica, where a failed POST goes back to the client."""
    while time.monotonic() < deadline:
        if await request(client, "GET", "/healthz", stats, deadline) is None:
            return
        await asyncio.sleep(0.02)


async def phase(
    testers: list[HttpxClient],
    seed_: Seed,
    slots: list[dict[str, Any]],
    seconds: float,
    total: Stats,
    probes: list[HttpxClient] | None = None,
) -> Stats:
    stats = Stats()
    deadline = time.monotonic() + seconds
    await asyncio.gather(
        *(
            validator(
                c, seed_, stats, deadline, random.Random(k + int(deadline)), True, 0.0, slots[k]
            )
            for k, c in enumerate(testers)
        ),
        *(probe(c, stats, deadline) for c in probes or []),
    )
    total.acked.extend(stats.acked)
    total.retries += stats.retries
    total.errors.update(stats.errors)
    return stats


def line(name: str, stats: Stats, seconds: float, base_rate: float, base_p99: float) -> str:
    rate = len(stats.round_trips) / seconds
    p99 = pct(sorted(stats.round_trips), 0.99)
    return (
        f"  {name:<7} {rate:7.1f} rt/s ({rate / base_rate:5.2f}x baseline)  "
        f"p99 {1000 * p99:7.1f} ms ({p99 / base_p99:5.1f}x baseline)  "
        f"retries {stats.retries}  5xx {sum(stats.errors.values())}"
    )


def outage(stats: Stats) -> float:
    """The longest time in which no request got a non-5xx answer (the bench's clients resend
    on a 5xx or a broken connection after 50 ms)."""
    stamps = sorted(stats.stamps)
    return max((b - a for a, b in zip(stamps, stamps[1:], strict=False)), default=0.0)


async def scenario(
    name: str,
    fault: Any,
    recover: Any,
    proxy: Proxy,
    seed_: Seed,
    args: argparse.Namespace,
    total: Stats,
    n_probes: int = 0,
) -> Stats:
    limits = httpx.Limits(max_connections=2, max_keepalive_connections=2)
    clients = [
        httpx.AsyncClient(base_url=proxy.base, verify=False, timeout=30, limits=limits)
        for _ in range(args.concurrency)
    ]
    probes = [
        httpx.AsyncClient(base_url=proxy.base, verify=False, timeout=30, limits=limits)
        for _ in range(n_probes)
    ]
    try:
        sem = asyncio.Semaphore(20)
        tag = name[:3]

        async def enter_one(k: int, c: httpx.AsyncClient) -> None:
            async with sem:
                await enter(c, f"PROLIFIC_PID={tag}{k:04d}&STUDY_ID=faults&SESSION_ID={tag}{k}")

        await asyncio.gather(*(enter_one(k, c) for k, c in enumerate(clients)))
        testers = [HttpxClient(c) for c in clients]
        base = Stats()
        t_end = time.monotonic() + args.baseline
        await asyncio.gather(*(baseline_client(c, base, t_end) for c in testers))
        base_rate = len(base.round_trips) / args.baseline
        base_p99 = pct(sorted(base.round_trips), 0.99)
        print(
            f"{name}: baseline (2 x /healthz through nginx) {base_rate:.1f} rt/s, "
            f"p99 {1000 * base_p99:.1f} ms",
            flush=True,
        )
        slots: list[dict[str, Any]] = [{} for _ in testers]
        await phase(testers, seed_, slots, args.warmup, total)
        before = await phase(testers, seed_, slots, args.phase, total)
        print(line("before", before, args.phase, base_rate, base_p99), flush=True)
        during_task = asyncio.create_task(
            phase(testers, seed_, slots, args.phase, total, [HttpxClient(c) for c in probes])
        )
        await asyncio.sleep(0.5)
        print(f"  fault: {await asyncio.to_thread(fault)}", flush=True)
        during = await during_task
        print(line("during", during, args.phase, base_rate, base_p99), flush=True)
        print(f"  recovery: {await asyncio.to_thread(recover)}", flush=True)
        after = await phase(testers, seed_, slots, args.phase, total)
        print(line("after", after, args.phase, base_rate, base_p99), flush=True)
        return during
    finally:
        await asyncio.gather(*(c.aclose() for c in clients + probes))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--concurrency", "-c", type=int, default=100)
    ap.add_argument("--phase", type=float, default=8.0, help="seconds per phase")
    ap.add_argument("--baseline", type=float, default=4.0)
    ap.add_argument("--warmup", type=float, default=2.0)
    ap.add_argument("--examples", type=int, default=6000)
    ap.add_argument(
        "--only",
        choices=["kill", "terminate", "restart"],
        action="append",
        help="run only these scenarios (repeatable; default all three)",
    )
    ap.add_argument(
        "--restarts",
        type=int,
        default=1,
        help="PostgreSQL restart scenarios to run (each reported)",
    )
    args = ap.parse_args()
    if nginx_binary() is None:
        sys.exit("nginx is not installed (apt-get install nginx-light)")
    if not available():
        sys.exit("PostgreSQL's initdb and pg_ctl are not installed")
    only = set(args.only or ["kill", "terminate", "restart"])

    from migrations.runner import upgrade

    pg = PrivatePostgres(free_port())
    pg.start()
    url = pg.create_database("vsr_faults")
    scratch = Path(tempfile.mkdtemp(prefix="vsr_proxy_faults_"))
    replicas = [Server(url, free_port(), 1, scratch / f"replica{k}.log") for k in range(2)]
    proxy = Proxy(scratch / "nginx", [r.port for r in replicas], free_port(), free_port())
    try:
        upgrade(url)
        seed_ = seed(url, args.examples, 0, 0)
        print(
            f"seeded {len(seed_.p_true)} real VSR captions; C={args.concurrency} through "
            f"nginx (TLS) to 2 replicas x 1 uvicorn worker, PostgreSQL; {args.phase:g} s "
            "per phase; one request per round trip (vote ?next=1)",
            flush=True,
        )
        for r in replicas:
            r.start()
        proxy.start()
        total = Stats()

        def kill() -> str:
            replicas[0].kill()
            return f"SIGKILL replica on :{replicas[0].port}"

        def restart() -> str:
            t0 = time.perf_counter()
            replicas[0].start()
            return f"replica restarted in {time.perf_counter() - t0:.2f} s"

        def cut() -> str:
            n = terminate_backends(url)
            time.sleep(args.phase / 3)
            n += terminate_backends(url)
            return f"pg_terminate_backend on {n} connections (twice, {args.phase / 3:g} s apart)"

        restarted: list[float] = []

        def restart_db() -> str:
            restarted.append(pg.restart())
            return f"pg_ctl restart -m immediate: PostgreSQL back in {restarted[-1]:.2f} s"

        if "kill" in only:
            run_loop(scenario("replica SIGKILL", kill, restart, proxy, seed_, args, total))
        if "terminate" in only:
            run_loop(
                scenario(
                    "PostgreSQL connections terminated",
                    cut,
                    lambda: "none needed",
                    proxy,
                    seed_,
                    args,
                    total,
                )
            )
        worst = -1e9
        for k in range(args.restarts if "restart" in only else 0):
            during = run_loop(
                scenario(
                    f"PostgreSQL restart {k + 1}",
                    restart_db,
                    lambda: "none needed",
                    proxy,
                    seed_,
                    args,
                    total,
                    n_probes=10,
                )
            )
            seen = outage(during)
            worst = max(worst, seen - restarted[-1])
            by_status = dict(sorted(during.errors.items()))
            broken = during.retries - sum(during.errors.values())
            print(
                f"  client-visible outage {seen:.2f} s vs PostgreSQL restart "
                f"{restarted[-1]:.2f} s: {seen - restarted[-1]:+.2f} s (target <= +1 s); "
                f"5xx seen: {by_status or 'none'}; broken connections: {broken}",
                flush=True,
            )
        if restarted:
            print(
                f"PostgreSQL restarts: worst outage minus restart {worst:+.2f} s over "
                f"{len(restarted)} restart(s) (target <= +1 s)"
            )
        served = proxy.upstreams_seen()
        per = {r.port: sum(u.endswith(f":{r.port}") for u in served) for r in replicas}
        print(f"requests per replica port (nginx access log): {per}")
        problems = check(url, total)
        if problems:
            print("INVARIANTS VIOLATED:\n  " + "\n  ".join(problems))
            return 1
        print(
            "invariants: OK (no duplicate, nothing acknowledged lost, none over-served, "
            "no self-validation, counters exact)"
        )
        print(f"  (load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs)")
        return 0
    finally:
        proxy.stop()
        for r in replicas:
            r.stop()
        pg.stop()


if __name__ == "__main__":
    sys.exit(main())
