"""Load and fault benchmark of the validation task (issue 5).

Starts its own server (``uvicorn webapp.app:create_app --factory --workers N``) against a
fresh PostgreSQL database it creates, seeds it with real VSR captions (human Examples, each
with its real author, a few gold), lets ``C`` simulated validators (asyncio + httpx, one
cookie jar each, loopback only) do fetch-item / submit-vote round trips for a bounded time,
and then checks the database:

- no duplicate vote (Example, validator); every acknowledged (2xx) vote is stored as sent;
- no Example over-served: at most ``max_votes_per_example`` votes, and more than
  ``votes_per_example`` only when the first ones left it undecided (core.agreement);
- no validator voted on their own Example; the queue counters match the Vote/Assignment rows.

It prints round trips per second, p50 and p99 latency, and the ratio against a baseline
measured in the same run with the same clients and server: round trips of two ``/healthz``
requests (one trivial database query each), i.e. what the stack costs before any queue work.

``--kill`` SIGKILLs the whole server (master and workers) halfway through and starts it
again; clients retry (votes are idempotent per lease), the run completes, and the checks
above must still hold: nothing acknowledged is lost.

    python bench/load.py                       # C=100, 2 workers, 20 s, flat out
    python bench/load.py --combined            # one request per round trip (vote ?next=1)
    python bench/load.py --rate 150            # paced: 100 clients offering 150 rt/s in total
    python bench/load.py --kill                # the fault mode
    python bench/load.py --concurrency 50 --duration 10 --workers 3

Flat out, C clients with no think time keep C round trips in flight, so by Little's law the
mean latency is C / throughput (100 / 300 rt/s = 333 ms): a p99 below 150 ms at C=100 needs
either pacing (``--rate``, as human validators who read each item) or > 670 rt/s.

Environment: VSR_BENCH_PG_ADMIN_URL (default postgresql+psycopg://postgres@127.0.0.1:5432/test).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

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

    from core.db import make_engine

    name = f"vsr_load_{os.getpid()}_{uuid.uuid4().hex[:6]}"
    admin = make_engine(PG_ADMIN).execution_options(isolation_level="AUTOCOMMIT")
    with admin.connect() as c:
        c.execute(text(f'CREATE DATABASE "{name}"'))
    admin.dispose()
    return make_url(PG_ADMIN).set(database=name).render_as_string(hide_password=False)


def drop_database(url: str) -> None:
    from sqlalchemy import text
    from sqlalchemy.engine import make_url

    from core.db import make_engine

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

    from core.captions import parse_caption
    from core.db import make_engine
    from core.models import Example, Image, InviteToken, Worker

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
        env = dict(os.environ, DATABASE_URL=self.url, SECRET_KEY="load-bench-" + "s" * 40)
        cmd = [
            sys.executable, "-m", "uvicorn", "webapp.app:create_app", "--factory",
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

    def result(self) -> dict[str, float]:
        out = {"server": 0.0, "postgres": 0.0}
        for key, cpu in self.last.items():
            out[key[0]] += cpu - self.first[key]
        out["client"] = self._client() - self.client0
        return out


async def measured(server: Server, work: Any) -> dict[str, float]:
    meter = CpuMeter(server)
    stop = asyncio.Event()
    task = asyncio.create_task(meter.run(stop))
    await work
    stop.set()
    await task
    return meter.result()


# --- the simulated validators ---------------------------------------------------------------


@dataclass
class Stats:
    latencies: list[float] = field(default_factory=list)  # per request, seconds
    round_trips: list[float] = field(default_factory=list)  # fetch + vote, seconds
    acked: list[tuple[int, int, bool]] = field(default_factory=list)  # (vote id, lease, value)
    errors: Counter[str] = field(default_factory=Counter)
    retries: int = 0
    finished_batches: int = 0


async def request(
    client: httpx.AsyncClient, method: str, path: str, stats: Stats, deadline: float,
    **kw: Any,
) -> httpx.Response | None:
    """One request, retried while the server is down (the kill mode); None past the deadline."""
    while True:
        t0 = time.perf_counter()
        try:
            r = await client.request(method, path, **kw)
        except httpx.TransportError:
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


async def validator(
    client: httpx.AsyncClient, seed_: Seed, stats: Stats, deadline: float, rng: random.Random,
    combined: bool, interval: float = 0.0,
) -> None:
    """One validator's loop. ``interval`` > 0 paces it (think time): one round trip started
    every ``interval`` seconds at most, so C clients offer C / interval round trips/s."""
    state: dict[str, Any] | None = None
    next_start = time.monotonic() + rng.random() * interval
    while time.monotonic() < deadline:
        if interval:
            await asyncio.sleep(max(0.0, next_start - time.monotonic()))
            next_start = max(next_start + interval, time.monotonic())
            if time.monotonic() >= deadline:
                return
        t0 = time.perf_counter()
        if state is None:
            r = await request(client, "GET", "/api/validate/item", stats, deadline)
            if r is None:
                return
            if r.status_code != 200:
                stats.errors[f"GET item {r.status_code}"] += 1
                return
            state = r.json()
        item = state.get("item")
        if item is None:
            stats.finished_batches += 1
            return
        p = seed_.p_true.get(item["caption"] + "|" + item["image"]["src"].rsplit("/", 1)[-1], 0.5)
        body = {"assignment_id": item["assignment_id"], "value": rng.random() < p,
                "duration_ms": rng.randint(1500, 9000)}
        path = "/api/validate/votes?next=1" if combined else "/api/validate/votes"
        r = await request(client, "POST", path, stats, deadline, json=body)
        if r is None:
            return
        if r.status_code not in (200, 201):
            stats.errors[f"POST vote {r.status_code}"] += 1
            state = None
            continue
        out = r.json()
        stats.acked.append((out["vote_id"], item["assignment_id"], out["value"]))
        stats.round_trips.append(time.perf_counter() - t0)
        if out["finished"]:
            stats.finished_batches += 1
            return
        state = out["next"] if combined else None


async def baseline_client(client: httpx.AsyncClient, stats: Stats, deadline: float) -> None:
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
    try:
        sem = asyncio.Semaphore(20)

        async def enter_one(k: int, c: httpx.AsyncClient) -> None:
            async with sem:
                if k < len(seed_.author_tokens):
                    await enter(c, f"token={seed_.author_tokens[k]}")
                else:
                    await enter(c, f"PROLIFIC_PID=bench{k:04d}&STUDY_ID=load&SESSION_ID=s{k}")

        await asyncio.gather(*(enter_one(k, c) for k, c in enumerate(clients)))

        base_stats = Stats()
        t_end = time.monotonic() + args.baseline
        t0 = time.perf_counter()
        base_cpu = await measured(
            server, asyncio.gather(*(baseline_client(c, base_stats, t_end) for c in clients))
        )
        base_elapsed = time.perf_counter() - t0

        stats = Stats()
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
            validator(c, seed_, stats, deadline, random.Random(k), args.combined,
                      args.concurrency / args.rate if args.rate else 0.0)
            for k, c in enumerate(clients)
        )))
        elapsed = time.perf_counter() - t0
        if killer is not None:
            await killer
        stats.latencies.sort()
        base_stats.latencies.sort()
        print(f"  load phase {elapsed:.1f} s, baseline phase {base_elapsed:.1f} s", flush=True)
        return base_stats, stats, base_cpu, load_cpu
    finally:
        await asyncio.gather(*(c.aclose() for c in clients))


# --- checks -----------------------------------------------------------------------------------


def check(url: str, stats: Stats) -> list[str]:
    from sqlmodel import Session, select

    from core.agreement import is_decided
    from core.db import make_engine
    from core.models import Example, Vote
    from core.study import load_study_config
    from webapp.validation_queue import audit_counters

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
              f"{f'; offered {args.rate:g} rt/s' if args.rate else '; flat out'}", flush=True)
        server.start()
        base, stats, base_cpu, load_cpu = asyncio.run(run(args, server, seed_))
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
