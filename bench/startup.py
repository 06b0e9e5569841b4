"""How fast the commands start: every `--help` and two small real commands, against a bare
`python -c pass` measured in the same run.

Each command runs as a user runs it (the console scripts `vsr` and `build-dataset` of this
interpreter's environment, a new process each time); the figure is the median wall time over
--repeat runs, printed with its ratio to the baseline. The real commands work on a fresh SQLite
database in a temp dir holding 200 Examples imported from the VSR release (../shared/vsr):

- `vsr invite create` (opens the database, writes one row, prints two links);
- `build-dataset --out - --only raw` (reads every Example with its votes, writes JSONL).

    python bench/startup.py
    python bench/startup.py --repeat 20

To measure another checkout (e.g. before a change), put it first on the path:
`PYTHONPATH=/path/to/old/checkout python bench/startup.py` (the console scripts then import
its code instead of this one's).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
RAW = ROOT.parent / "shared/vsr/data/data_files/all_vsr_raw_data.jsonl"

HELP = [
    ["vsr", "--help"],
    ["vsr", "sample", "--help"],
    ["vsr", "import-vsr", "--help"],
    ["vsr", "serve", "--help"],
    ["vsr", "match", "--help"],
    ["vsr", "build", "--help"],
    ["vsr", "db", "upgrade", "--help"],
    ["vsr", "admin", "create", "--help"],
    ["vsr", "invite", "create", "--help"],
    ["build-dataset", "--help"],
]


def _median_time(argv: list[str], repeat: int, env: dict[str, str]) -> float:
    times = []
    cwd = Path(env["DATABASE_URL"].removeprefix("sqlite:///")).parent  # not this checkout
    for _ in range(repeat):
        t0 = time.perf_counter()
        subprocess.run(
            argv, check=True, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _script(argv: list[str]) -> list[str]:
    return [str(BIN / argv[0]), *argv[1:]]


def _prepare_database(tmp: Path, env: dict[str, str]) -> None:
    subprocess.run(
        _script(["vsr", "db", "upgrade"]), check=True, env=env, stdout=subprocess.DEVNULL
    )
    if not RAW.is_file():
        sys.exit(f"needs the VSR release at {RAW}")
    part = tmp / "raw.jsonl"
    with RAW.open() as src:
        part.write_text("".join(next(src) for _ in range(200)))
    subprocess.run(
        _script(["vsr", "import-vsr", str(part), "-q"]),
        check=True,
        env=env,
        stdout=subprocess.DEVNULL,
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=10, help="runs per command (median)")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory() as tmp_dir:
        tmp = Path(tmp_dir)
        env = {**os.environ, "DATABASE_URL": f"sqlite:///{tmp / 'bench.db'}", "COLUMNS": "80"}
        _prepare_database(tmp, env)
        base = _median_time([sys.executable, "-c", "pass"], args.repeat, env)
        rows: list[tuple[str, float]] = [("python -c pass (baseline)", base)]
        rows.append(
            (
                "python -c 'import vsr_cli.main'",
                _median_time([sys.executable, "-c", "import vsr_cli.main"], args.repeat, env),
            )
        )
        for argv in HELP:
            rows.append((" ".join(argv), _median_time(_script(argv), args.repeat, env)))
        real = [
            ["vsr", "invite", "create", "--label", "bench"],
            ["build-dataset", "--out", "-", "--only", "raw", "-q"],
        ]
        for argv in real:
            rows.append((" ".join(argv), _median_time(_script(argv), args.repeat, env)))

    width = max(len(name) for name, _ in rows)
    print(f"{'command':<{width}}  {'median s':>8}  {'x baseline':>10}")
    for name, secs in rows:
        print(f"{name:<{width}}  {secs:8.3f}  {secs / base:10.1f}")
    helps = [secs for name, secs in rows if name.endswith("--help")]
    print(f"\nslowest --help: {max(helps):.3f} s = {max(helps) / base:.1f}x python -c pass")


if __name__ == "__main__":
    main()
