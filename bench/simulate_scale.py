"""Beyond one machine, in a simulation (docs/scaling.md): what the measured per-request costs
predict for the validation round trip with more replicas, cores and data.

A discrete-event simulation of the round trip as a tandem of two multi-server queues: the web
tier (``replicas x cores`` servers, FastAPI + SQLAlchemy, CPU ``--web-ms`` per round trip) and
PostgreSQL (``--pg-cores`` servers, CPU ``--pg-ms`` per round trip). Arrivals are Poisson at
the offered rate (validators think between judgements, so the load is open). Service times are
gamma-distributed around the measured means (``--cv``: their coefficient of variation).

**The baseline, in the same run.** The simulation is first run on the machine where the costs
were measured: one host with 2 cores shared by the web tier, PostgreSQL and the load client
(``--client-ms``), with 100 validators pacing themselves as bench.load's do. It is checked
against the p99 that ``python -m bench.load.scale`` measured there at the same offered rates
(``--measured RATE:P99_MS``). Every prediction is printed as a
ratio to that baseline. On this machine the model comes out 4-6x under the measured p99 at
83 % CPU: it leaves out the contention of two server processes, ~40 PostgreSQL backends and
the client on 2 cores, which docs/scaling.md shows in bench.load's timeline (CPU per round
trip rises from 3.2 to 4.3 ms while a queue builds). So the sizing is conservative in two
ways: the simulated p99 times that measured shortfall must meet the goal, and the web tier
is planned at most ``--max-busy`` (60 %) busy.

Then it sizes 100x VSR. The round trip's cost does not grow with the data (docs/scaling.md:
PostgreSQL CPU per round trip 1.00-1.05x from 1x to 10x), so 100x changes the rate, not the
cost. It prints:

- the fewest replicas that keep p99 under the goal at each rate;
- the PostgreSQL connections that many replicas hold (44 per process, 2 processes per
  replica) against ``max_connections``;
- the dashboard's Example scans extrapolated from the 1x and 10x medians.

    python bench/simulate_scale.py
    python bench/simulate_scale.py --web-ms 3.1 --pg-ms 1.2 --measured 300:110
"""

from __future__ import annotations

import argparse
import heapq
import math
import random
from collections.abc import Sequence

GOAL_P99_MS = 150.0
CONNECTIONS_PER_PROCESS = 44  # vsr_core.db: pool 10 + overflow 30 + the vote API's lean pool 4


def simulate(
    rate: float,
    stages: Sequence[tuple[int, float]],
    cv: float,
    n: int,
    seed: int,
    shared: tuple[int, float] | None = None,
    clients: int = 0,
) -> list[float]:
    """Latencies (ms) of ``n`` round trips through the stages ``(servers, mean_ms)`` in order,
    each served first come, first served by the stage's server that frees first.

    ``clients`` > 0: that many validators pace themselves as bench.load's do (each starts a
    round trip every ``clients / rate`` seconds at most, and never before its last one ended),
    so at most ``clients`` are in flight; 0: Poisson arrivals (a large crowd thinking between
    judgements). ``shared=(cores, client_ms)``: every stage and the load client's own CPU per
    round trip run on one pool of ``cores``, as on the measuring machine.
    """
    rng = random.Random(seed)
    shape = 1.0 / (cv * cv)

    def service(mean: float) -> float:
        return rng.gammavariate(shape, mean / shape) if mean > 0 else 0.0

    if shared is not None:  # one pool: the round trip's work is the sum of its parts
        cores, client_ms = shared
        stages = [(cores, sum(m for _, m in stages) + client_ms)]
    free: list[list[float]] = [[0.0] * servers for servers, _ in stages]
    interval = clients / rate * 1000.0 if clients else 0.0
    # Arrivals in time order: (start ms, client); a paced client's next start follows its end.
    arrivals = [(rng.random() * interval, k) for k in range(clients)]
    heapq.heapify(arrivals)
    t = 0.0
    out: list[float] = []
    for _ in range(n):
        if clients:
            t, k = heapq.heappop(arrivals)
        else:
            t += rng.expovariate(rate) * 1000.0
        now = t
        for i, (_, mean) in enumerate(stages):
            start = max(now, heapq.heappop(free[i]))
            now = start + service(mean)
            heapq.heappush(free[i], now)
        out.append(now - t)
        if clients:
            heapq.heappush(arrivals, (max(t + interval, now), k))
    warm = n // 10  # the queue starts empty: leave out its first tenth
    return sorted(out[warm:])


def pct(values: Sequence[float], q: float) -> float:
    return values[min(len(values) - 1, int(q * len(values)))]


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--web-ms",
        type=float,
        default=3.3,
        help="server CPU ms per round trip (bench.load: 'CPU ms per round trip')",
    )
    ap.add_argument("--pg-ms", type=float, default=1.9, help="PostgreSQL CPU ms per round trip")
    ap.add_argument(
        "--client-ms",
        type=float,
        default=0.32,
        help="the load client's CPU ms per round trip on the measuring machine "
        "(bench.load's raw client)",
    )
    ap.add_argument(
        "--clients",
        type=int,
        default=100,
        help="simulated validators of the measurement (bench.load -c)",
    )
    ap.add_argument("--cores", type=int, default=2, help="cores of the measuring machine")
    ap.add_argument(
        "--measured",
        nargs="*",
        default=["300:382.5", "300:240.5"],
        help="RATE:P99_MS pairs that bench.load.scale measured on that machine",
    )
    ap.add_argument(
        "--cv",
        type=float,
        default=1.0,
        help="coefficient of variation of the service times (1 = exponential)",
    )
    ap.add_argument(
        "--max-busy",
        type=float,
        default=0.6,
        help="highest share of the web tier's CPU to plan for: above it the "
        "measured tails grew faster than any queue model (contention)",
    )
    ap.add_argument("--cores-per-replica", type=int, default=2)
    ap.add_argument("--pg-cores", type=int, default=8)
    ap.add_argument(
        "--max-connections",
        type=int,
        default=400,
        help="PostgreSQL max_connections (docker-compose.yml: 400)",
    )
    ap.add_argument(
        "--rates",
        type=float,
        nargs="+",
        default=[300, 1000, 3000],
        help="offered round trips/s to size for",
    )
    ap.add_argument("--requests", type=int, default=60_000)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    parts = [(1, args.web_ms), (1, args.pg_ms)]
    print(
        f"costs: web {args.web_ms} ms + PostgreSQL {args.pg_ms} ms (+ client "
        f"{args.client_ms} ms on the measuring machine) per round trip; service cv {args.cv}"
    )

    print(
        f"\nbaseline: the measuring machine ({args.cores} cores shared by all), simulated "
        f"against measured"
    )
    base_ratio: list[float] = []
    for pair in args.measured:
        rate_s, p99_s = pair.split(":")
        rate, measured = float(rate_s), float(p99_s)
        need = rate * (args.web_ms + args.pg_ms + args.client_ms) / 1000.0
        lat = simulate(
            rate,
            parts,
            args.cv,
            args.requests,
            args.seed,
            shared=(args.cores, args.client_ms),
            clients=args.clients,
        )
        p99 = pct(lat, 0.99)
        base_ratio.append(p99 / measured)
        print(
            f"  {rate:6.0f} rt/s: CPU needed {need:4.2f} of {args.cores} cores; simulated p99 "
            f"{p99:8.1f} ms, measured {measured:7.1f} ms (simulated / measured "
            f"{p99 / measured:5.2f})"
        )

    # The model's tails are only as good as its baseline: where it came out under the
    # measured p99 (contention a queue model leaves out: processes, GIL, locks on 2 shared
    # cores), the sizing below asks the simulated p99 times that shortfall to meet the goal.
    margin = max([1.0] + [1.0 / r for r in base_ratio])
    print(
        f"\n100x: replicas of {args.cores_per_replica} cores, PostgreSQL on "
        f"{args.pg_cores} cores; goal p99 < {GOAL_P99_MS:.0f} ms for the simulated p99 x "
        f"{margin:.2f} (the baseline's worst measured / simulated), web at most "
        f"{100 * args.max_busy:.0f}% busy"
    )
    for rate in args.rates:
        pg_load = rate * args.pg_ms / 1000.0 / args.pg_cores
        if pg_load >= 1:
            print(
                f"  {rate:6.0f} rt/s: PostgreSQL needs {rate * args.pg_ms / 1000:.1f} cores "
                f"(> {args.pg_cores}): the primary is the limit"
            )
            continue
        least = max(
            1, math.ceil(rate * args.web_ms / 1000.0 / (args.cores_per_replica * args.max_busy))
        )
        for replicas in range(least, least + 64):
            stages = [(replicas * args.cores_per_replica, args.web_ms), (args.pg_cores, args.pg_ms)]
            lat = simulate(rate, stages, args.cv, args.requests, args.seed)
            p99 = pct(lat, 0.99)
            if p99 * margin < GOAL_P99_MS:
                break
        conns = replicas * 2 * CONNECTIONS_PER_PROCESS  # 2 uvicorn workers per replica
        # Little's law: round trips inside the database at once = rate x time spent there.
        busy = rate * args.pg_ms / 1000.0 / (1 - pg_load)
        ratio = p99 * margin / GOAL_P99_MS
        print(
            f"  {rate:6.0f} rt/s: {replicas} replicas -> p50 {pct(lat, 0.5):5.1f} ms, p99 "
            f"{p99:5.1f} ms (x margin: {ratio:.2f} of the goal); web "
            f"{100 * rate * args.web_ms / 1000 / (replicas * args.cores_per_replica):4.1f}% "
            f"busy, PostgreSQL {100 * pg_load:4.1f}% busy, "
            f"~{busy:4.1f} connections in use, {conns} possible against max_connections "
            f"{args.max_connections}"
            + (" -> PgBouncer needed" if conns > args.max_connections - 10 else "")
        )

    print(
        "\nsimulated / measured on the measuring machine (the model's error): "
        + ", ".join(f"{r:.2f}" for r in base_ratio)
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
