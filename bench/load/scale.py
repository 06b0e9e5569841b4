"""The validation round trip at 1x and 10x VSR in one run (docs/scaling.md).

Runs ``python -m bench.load`` (its own server, database, audit) once on top of 1x VSR history
(12,809 settled Examples, 39,057 votes, imported with their workers) and once on top of 10x
(128,090 / 390,570, bench/gen10x.py's copies), the same open Examples and the same load
arguments each time, and prints round trips/s, the p99 of a round trip, and each as a ratio
10x / 1x. The two runs follow each other on the same machine, so the ratio is the figure; each
run also prints its own ``/healthz`` baseline, the other thing that tells noise from cost.

    python -m bench.load.scale                           # --combined --rate 300 (the goal)
    python -m bench.load.scale --factors 1 10 1 -- --combined   # flat out, 1x measured twice
    python -m bench.load.scale -- --combined --duration 30
    python -m bench.load.scale --factors 1 --repeat 5   # five runs: median and worst p99
    python -m bench.load.scale --factors 1 100 --templates 100=scale100x -- --combined \
        --rate 300 --busy-core     # another process keeping a core busy meanwhile
    python -m bench.load.scale --factors 1 10 100 --templates 10=scale10x 100=scale100x
                                  # 10x and 100x from copies of imported databases (seconds
                                  # to copy instead of minutes to import)

Runs on a shared machine swing (p99 of the same tree has ranged 51-483 ms over an hour), so
``--repeat N`` runs the factors N times in turn and prints, per factor, the median and the
worst of the runs and how many met the goal (the offered rate delivered within 1 %, p99 under
``--p99-goal`` ms), and how many met it counting only the validators still working: a
simulated validator whose batch ends (the gold check blocked them, or nothing was left for
them) stops, as a real one would, and takes its 1 % of the offered load with it ("ended").

Arguments after ``--`` go to bench.load as they are.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys

from bench.load.database import ROOT

RATE_RE = re.compile(
    r"validation .*?:\s+([\d.]+) rt/s .*round trip p50 ([\d.]+) ms, p99 ([\d.]+) ms"
)
BASE_RE = re.compile(r"baseline .*?:\s+([\d.]+) rt/s")
CPU_RE = re.compile(r"CPU ms per round trip, validation: (.*)")
CLIENTS_RE = re.compile(r"C=(\d+)")
ENDED_RE = re.compile(r"finished batches: (\d+)")
MEMORY_RE = re.compile(r"bench process tree peak memory: PSS ([\d.]+) GB, RSS ([\d.]+) GB")
BUSY_RE = re.compile(r"busy core: .*\((\d+)% of one core\)")


def one(factor: int, extra: list[str], template: str | None = None) -> dict[str, str | float]:
    """One bench.load run: its figures, the load average before and after it, the busy
    process's share of a core (``--busy-core``) and the bench's peak tree memory."""
    history = ["--template", template] if template else ["--history", str(factor)]
    cmd = [sys.executable, "-m", "bench.load", *history, *extra]
    load_before = os.getloadavg()[0]
    print(f"$ {' '.join(cmd[1:])}   (load average before {load_before:.1f})", flush=True)
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    sys.stdout.write("  " + proc.stdout.replace("\n", "\n  ").rstrip() + "\n")
    if proc.returncode != 0:
        sys.exit(f"bench.load {' '.join(history)} failed:\n{proc.stderr[-3000:]}")
    rate, base, cpu = (
        RATE_RE.search(proc.stdout),
        BASE_RE.search(proc.stdout),
        CPU_RE.search(proc.stdout),
    )
    if rate is None or base is None:
        sys.exit("could not read bench.load's output")
    clients, ended = CLIENTS_RE.search(proc.stdout), ENDED_RE.findall(proc.stdout)
    memory, busy = MEMORY_RE.search(proc.stdout), BUSY_RE.search(proc.stdout)
    return {
        "pss": float(memory.group(1)) if memory else float("nan"),
        "rss": float(memory.group(2)) if memory else float("nan"),
        "busy": f"{busy.group(1)}%" if busy else "-",
        "load_before": load_before,
        "rate": float(rate.group(1)),
        "p50": float(rate.group(2)),
        "p99": float(rate.group(3)),
        "base": float(base.group(1)),
        "cpu": cpu.group(1) if cpu else "",
        "load": os.getloadavg()[0],
        "clients": float(clients.group(1)) if clients else 0.0,
        "ended": float(ended[-1]) if ended else 0.0,
    }


def still_offered(run: dict[str, str | float], offered: float) -> float:
    """The rate the validators whose batch did not end offered: a validator the gold check
    blocked (or whose batch ran out) stops, as a real one would, and takes its share of the
    offered load with it. Counted as gone from the start (the lenient bound, printed)."""
    clients, ended = float(run["clients"]), float(run["ended"])
    return offered * (clients - ended) / clients if clients else offered


def main() -> int:
    argv = sys.argv[1:]
    extra = ["--combined", "--rate", "300"]
    if "--" in argv:
        extra = argv[argv.index("--") + 1 :]
        argv = argv[: argv.index("--")]
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument(
        "--factors",
        type=int,
        nargs="+",
        default=[1, 10],
        help="history sizes in run order; the first is the baseline",
    )
    ap.add_argument("--repeat", type=int, default=1, help="run the factors this many times")
    ap.add_argument(
        "--templates",
        nargs="*",
        default=[],
        metavar="FACTOR=DATABASE",
        help="copy an imported database for that factor instead of importing its history "
        "(e.g. 100=scale100x: bench/gen10x.py --factor 100 imported with vsr import-vsr)",
    )
    ap.add_argument(
        "--p99-goal", type=float, default=150.0, help="ms (the goal of docs/scaling.md: 150)"
    )
    args = ap.parse_args(argv)
    templates = dict(t.split("=", 1) for t in args.templates)
    runs = [
        (f, one(f, extra, templates.get(str(f)))) for _ in range(args.repeat) for f in args.factors
    ]
    base_factor, base = runs[0]
    print(f"\nbench.load {' '.join(extra)}; ratios against the first run ({base_factor}x)")
    print(
        f"{'history':>8s} {'rt/s':>8s} {'p50 ms':>7s} {'p99 ms':>7s} {'rt/s ratio':>10s} "
        f"{'p99 ratio':>9s} {'healthz rt/s':>12s} {'load avg':>13s} {'ended':>5s} "
        f"{'busy':>4s} {'PSS GB':>6s} {'RSS GB':>6s}  CPU ms per rt"
    )
    for f, r in runs:
        print(
            f"{f:>7d}x {r['rate']:8.1f} {r['p50']:7.1f} {r['p99']:7.1f} "
            f"{float(r['rate']) / float(base['rate']):10.2f} "
            f"{float(r['p99']) / float(base['p99']):9.2f} {r['base']:12.1f} "
            f"{float(r['load_before']):6.1f}-{float(r['load']):<6.1f} "
            f"{int(float(r['ended'])):5d} {r['busy']:>4s} {r['pss']:6.2f} {r['rss']:6.2f}  "
            f"{r['cpu']}"
        )
    if args.repeat > 1:
        offered = float(extra[extra.index("--rate") + 1]) if "--rate" in extra else 0.0
        print(
            f"\nover {args.repeat} runs each (goal: p99 < {args.p99_goal:g} ms"
            f"{f' at {offered:g} rt/s' if offered else ''})"
        )
        for f in dict.fromkeys(args.factors):
            mine = [r for g, r in runs if g == f]
            p99s = sorted(float(r["p99"]) for r in mine)
            rates = sorted(float(r["rate"]) for r in mine)
            met = sum(
                float(r["p99"]) < args.p99_goal
                and (not offered or float(r["rate"]) >= 0.99 * offered)
                for r in mine
            )
            met_active = sum(
                float(r["p99"]) < args.p99_goal
                and (not offered or float(r["rate"]) >= 0.99 * still_offered(r, offered))
                for r in mine
            )
            ended = sum(int(float(r["ended"])) for r in mine)
            print(
                f"{f:>7d}x p99 median {p99s[len(p99s) // 2]:.1f} ms, worst {p99s[-1]:.1f} ms, "
                f"best {p99s[0]:.1f} ms; rt/s median {rates[len(rates) // 2]:.1f}, "
                f"lowest {rates[0]:.1f}; goal met in {met} of {len(mine)} runs"
                + (
                    f" ({met_active} counting only the validators still working: {ended} "
                    "batches ended, by the gold check or an empty pool)"
                    if ended
                    else ""
                )
            )
    print(f"(load average after: {os.getloadavg()} on {os.cpu_count()} CPUs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
