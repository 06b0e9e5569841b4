"""Load and fault benchmark of the validation task (docs/validation.md).

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

    python -m bench.load                       # C=100, 2 workers, 20 s, flat out
    python -m bench.load --combined            # one request per round trip (vote ?next=1)
    python -m bench.load --combined --rate 300 # paced: 100 clients offering 300 rt/s in total
    python -m bench.load --kill                # the fault mode
    python -m bench.load --concurrency 50 --duration 10 --workers 3
    python -m bench.load --client httpx        # the measured phases through httpx
    python -m bench.load --template scale100x  # on top of a copy of an imported database
    python -m bench.load --combined --rate 300 --busy-core   # with one core taken elsewhere
    python -m bench.load --history 10          # on top of a 10x VSR database (128,090 settled
                                               # Examples, 390,570 votes); bench/load/scale.py
                                               # compares 1x and 10x in one run

Paced, a round trip is timed from when the validator's turn was due, not from when the client
got round to it (no coordinated omission: a late client or server shows as latency), and turns
missed altogether because the previous one ran past them are printed ("skipped turns").

Flat out, C clients with no think time keep C round trips in flight, so by Little's law the
mean latency is C / throughput (100 / 300 rt/s = 333 ms): a p99 below 150 ms at C=100 needs
either pacing (``--rate``, as human validators who read each item) or > 670 rt/s.

``--busy-core`` runs a CPU-bound process beside the server from its start to the end of the
measured phase and prints the share of a core it got. At the end the bench prints its own
process tree's peak memory (this process, the server and its workers; PSS and RSS, sampled
from /proc: bench/load/memory.py).

Environment: VSR_BENCH_PG_ADMIN_URL (default postgresql+psycopg://postgres@127.0.0.1:5432/test),
VSR_BENCH_DB_PREFIX (the names of the databases it makes; default vsr_load).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

from bench.load.audit import check
from bench.load.busy import BusyCore
from bench.load.database import create_database, drop_database, import_history, seed
from bench.load.memory import TreeMemory
from bench.load.server import Server, free_port
from bench.load.validators import pct, run

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
    ap.add_argument(
        "--combined",
        action="store_true",
        help="one request per round trip (POST vote ?next=1 returns the next item)",
    )
    ap.add_argument(
        "--rate",
        type=float,
        default=0.0,
        help="offered round trips/s over all clients (think time); 0 = flat out",
    )
    ap.add_argument(
        "--client",
        choices=("raw", "httpx"),
        default="raw",
        help="HTTP client of the measured phases (the entry always uses httpx)",
    )
    ap.add_argument(
        "--warmup",
        type=float,
        default=3.0,
        help="seconds of the same load before the measured phase (0 = none)",
    )
    ap.add_argument(
        "--timeline", action="store_true", help="print p50/p99 per 2 s of the measured phase"
    )
    ap.add_argument(
        "--history",
        type=int,
        default=0,
        help="first import N copies of the real release as settled history with "
        "their votes (1: ~12,800 Examples / ~39,000 votes; 10: the 10x "
        "database); the --examples open ones come on top",
    )
    ap.add_argument(
        "--template",
        default=None,
        help="copy this PostgreSQL database as the history instead of importing one "
        "(e.g. an imported 100x database: CREATE DATABASE ... TEMPLATE; it is only read)",
    )
    ap.add_argument(
        "--busy-core",
        action="store_true",
        help="run a CPU-bound process on the side from the server's start to the end of the "
        "measured phase (the machine doing something else)",
    )
    ap.add_argument("--keep-db", action="store_true")
    args = ap.parse_args()
    with TreeMemory() as memory:
        status = measure(args)
    print(memory.peak.line())
    return status


def measure(args: argparse.Namespace) -> int:

    from migrations.runner import upgrade

    url = create_database(args.template)
    log = Path(os.environ.get("TMPDIR", "/tmp")) / f"vsr_load_{os.getpid()}.log"
    server = Server(url, free_port(), args.workers, log)
    try:
        upgrade(url)
        if args.template:
            print(f"history: a copy of database {args.template}", flush=True)
        if args.history:
            print(
                f"history ({args.history}x VSR): {import_history(url, args.history, log.parent)}",
                flush=True,
            )
        seed_ = seed(url, args.examples, args.gold, args.author_validators)
        print(
            f"seeded {len(seed_.p_true)} real VSR captions ({args.gold} gold); "
            f"C={args.concurrency}, {args.workers} uvicorn workers, PostgreSQL; "
            f"{'one request' if args.combined else 'two requests'} per round trip"
            f"{'; SIGKILL mode' if args.kill else ''}"
            f"{f'; offered {args.rate:g} rt/s' if args.rate else '; flat out'}; "
            f"client {args.client} on {loop_name()}",
            flush=True,
        )
        side: contextlib.AbstractContextManager[BusyCore | None] = (
            BusyCore() if args.busy_core else contextlib.nullcontext()
        )
        with side as busy:
            server.start()
            print(f"  start-up warm-up finished after {server.wait_warmed():.1f} s", flush=True)
            base, stats, base_cpu, load_cpu = run_loop(run(args, server, seed_))
        server.stop()
        if busy is not None:
            print(busy.line())
        base_rate = len(base.round_trips) / args.baseline
        rate = len(stats.round_trips) / args.duration
        rts = sorted(stats.round_trips)
        print(
            f"baseline (2 x /healthz per round trip): {base_rate:8.1f} rt/s  "
            f"p50 {1000 * pct(base.latencies, 0.5):6.1f} ms  "
            f"p99 {1000 * pct(base.latencies, 0.99):6.1f} ms per request"
        )
        print(
            f"validation (fetch item + submit vote):  {rate:8.1f} rt/s  "
            f"p50 {1000 * pct(stats.latencies, 0.5):6.1f} ms  "
            f"p99 {1000 * pct(stats.latencies, 0.99):6.1f} ms per request; "
            f"round trip p50 {1000 * pct(rts, 0.5):.1f} ms, p99 {1000 * pct(rts, 0.99):.1f} ms"
        )
        print(f"ratio validation / baseline round trips: {rate / base_rate:.2f}")

        def per_rt(cpu: dict[str, float], n: int) -> str:
            n = max(n, 1)
            return "  ".join(f"{k} {1000 * v / n:.2f}" for k, v in cpu.items())

        print(f"CPU ms per round trip, baseline:   {per_rt(base_cpu, len(base.round_trips))}")
        if args.kill:
            print("CPU ms per round trip, validation: n/a (the server was killed and restarted)")
        else:
            print(f"CPU ms per round trip, validation: {per_rt(load_cpu, len(stats.round_trips))}")
        print(
            f"  (load average now {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs; other work on "
            "the machine slows both phases alike, so compare the ratio and CPU per round trip)"
        )
        print(
            f"  retries (server down / 5xx): {stats.retries}  errors: {dict(stats.errors)}  "
            f"finished batches: {stats.finished_batches}  "
            f"skipped turns: {stats.skipped_turns}"
        )
        problems = check(url, stats)
        if problems:
            print("INVARIANTS VIOLATED:\n  " + "\n  ".join(problems))
            return 1
        print(
            "invariants: OK (no duplicate, nothing acknowledged lost, none over-served, "
            "no self-validation, counters exact)"
        )
        return 0
    finally:
        server.stop()
        if not args.keep_db:
            drop_database(url)


if __name__ == "__main__":
    sys.exit(main())
