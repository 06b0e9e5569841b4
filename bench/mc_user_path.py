"""The multiple-choice figures a user gets, on the path a user runs, per split seed.

For each split seed: a fresh SQLite database, `vsr db upgrade`, `vsr import-vsr` of the
raw VSR release file (every vote), as the README does (not the data_files folder: that adds
the validated file's reference frames and changes the split), `vsr match --report
--split-seed S` (defaults: negatives sent to validation, which an imported release has not
judged), then a full `build-dataset --unvalidated-mc --seed S`, whose stats.json
`blind_baselines` (the leak audit) is printed per evaluation file.
Every step is the installed CLI run as a subprocess. Prints, per seed, every adversary of
the exported items' stats.json (mc/ when it holds items, else mc_unvalidated/, as
stats.json says) with its 95 % Wilson interval, the items kept of the kept True Examples,
the validation cost `vsr match` states, and `vsr match`'s wall time (target < 60 s).
At the end, `vsr match --dry-run` on the first seed is timed against a baseline in the same
run: `--baseline-ref REF` (a commit of this repository, e.g. main before a change: its tree
is extracted with `git archive` into the temporary folder, imports the release with its own
`vsr db upgrade` and `import-vsr`, and runs with PYTHONPATH pointing at it), else this tree
without raking and filtering; the ratio is what to read on a loaded machine.

    python -m bench.mc_user_path                  # seeds 0-4 (the reported ones)
    python -m bench.mc_user_path --seeds 5,6,7,8,9  # the seeds parameters were chosen on
    python -m bench.mc_user_path --release ../shared/vsr/data/data_files  # the folder instead
    python -m bench.mc_user_path --seeds 0 --baseline-ref c1dfe81  # against that commit

Target: the strongest adversary <= 0.30 on every seed, with as many items kept as possible.
The adversaries are stats.json's: fitted on train and, apart, on dev alone (``dev_fit:``),
each also read as "least likely". The run ends with a Markdown table of the strongest
blind baseline per seed and evaluation file (docs/dataset.md).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
# The README's path imports the raw release file (every vote), not the data_files folder.
SHARED = Path(os.environ.get("VSR_SHARED_DIR") or ROOT.parent / "shared")  # ../shared beside
RELEASE = SHARED / "vsr/data/data_files/all_vsr_raw_data.jsonl"
TARGET = 0.30


def _bin(name: str) -> str:
    here = Path(sys.executable).parent / name
    return str(here) if here.exists() else name


def _this_tree() -> dict[str, str]:
    """The environment that runs this tree's code: the virtualenv's `vsr` may be installed
    editable from another checkout."""
    path = [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(path)}


def _run(*args: str, env: dict[str, str] | None = None) -> tuple[str, float]:
    t0 = time.perf_counter()
    done = subprocess.run(args, capture_output=True, text=True, env=env or _this_tree())
    seconds = time.perf_counter() - t0
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed ({done.returncode}):\n{done.stderr[-2000:]}")
    return done.stdout, seconds


def imported_db(release: Path, folder: Path, env: dict[str, str] | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    db = folder / "imported.db"
    url = f"sqlite:///{db}"
    _run(_bin("vsr"), "db", "upgrade", "--database-url", url, env=env)
    _run(_bin("vsr"), "import-vsr", str(release), "-q", "--database-url", url, env=env)
    return db


def baseline_tree(ref: str, folder: Path) -> tuple[Path, str]:
    """The tree of commit ``ref`` of this repository, extracted into ``folder`` (no git
    worktree to clean up), and the commit it resolved to."""
    commit, _ = _run("git", "-C", str(ROOT), "rev-parse", "--verify", f"{ref}^{{commit}}")
    commit = commit.strip()
    folder.mkdir(parents=True)
    archive = subprocess.Popen(["git", "-C", str(ROOT), "archive", commit], stdout=subprocess.PIPE)
    subprocess.run(["tar", "-x", "-C", str(folder)], stdin=archive.stdout, check=True)
    if archive.wait() != 0:
        raise SystemExit(f"git archive {commit} failed")
    return folder, commit


def one_seed(base: Path, folder: Path, seed: int, extra: list[str]) -> dict[str, Any]:
    db = folder / f"seed{seed}.db"
    shutil.copy(base, db)
    url = f"sqlite:///{db}"
    report, match_s = _run(
        _bin("vsr"), "match", "--report", "--split-seed", str(seed), "--database-url", url, *extra
    )
    out = folder / f"export{seed}"
    _run(
        _bin("build-dataset"),
        "--database-url",
        url,
        "--out",
        str(out),
        "--seed",
        str(seed),
        "--unvalidated-mc",
        "--overwrite",
    )
    full = json.loads((out / "stats.json").read_text())
    stats = full["mc"]
    cost = [ln.strip() for ln in report.splitlines() if "validation cost" in ln]
    kept = re.search(r"(\d+) kept True Examples", report)
    return {
        "seed": seed,
        "stats": stats,
        "blind": full.get("blind_baselines", {}),
        "match_seconds": match_s,
        "cost": cost,
        "queries": int(kept.group(1)) if kept else None,
    }


def print_blind(seed: int, blind: dict[str, Any]) -> None:
    """The build's blind_baselines of one seed: per evaluation file, the strongest look-up /
    join attack and every blind baseline, each with its 95 % interval."""
    for config, splits in sorted(blind.items()):
        for split, r in sorted(splits.items()):
            figures = {**r.get("attacks", {}), **r.get("baselines", {})}
            worst = max(r.get("attacks", {}).items(), key=lambda kv: kv[1]["accuracy"])
            print(
                f"  blind seed {seed} {config}/{split} n={r['n']} chance {r['chance']:.2f}: "
                f"strongest attack {worst[0]} {worst[1]['accuracy']:.3f} {worst[1]['ci95']}",
                flush=True,
            )
            for name, f in sorted(figures.items()):
                if name not in r.get("attacks", {}):
                    print(f"      {name:<50} {f['accuracy']:.3f} {f['ci95']}", flush=True)


def strongest_baseline(r: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
    """The strongest blind baseline of one evaluation file (the summary answer_only_strongest
    entry left out: its adversary is listed under its own name)."""
    figures = {k: v for k, v in r.get("baselines", {}).items() if k != "answer_only_strongest"}
    return max(figures.items(), key=lambda kv: kv[1]["accuracy"], default=None)


def print_table(blinds: dict[int, dict[str, Any]]) -> None:
    """One Markdown row per seed and evaluation file: the strongest blind baseline."""
    print("| seed | file | n | chance | strongest blind baseline | accuracy [95 % CI] |")
    print("|---|---|---|---|---|---|")
    for seed, blind in sorted(blinds.items()):
        for config, splits in sorted(blind.items()):
            for split, r in sorted(splits.items()):
                best = strongest_baseline(r)
                if best is None:
                    continue
                name, f = best
                lo, hi = f["ci95"]
                print(
                    f"| {seed} | `{config}/{split}` | {r['n']:,} | {r['chance']:.2f} | "
                    f"{name} | {f['accuracy']:.3f} [{lo:.3f}, {hi:.3f}] |",
                    flush=True,
                )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", default="0,1,2,3,4")
    ap.add_argument("--release", type=Path, default=RELEASE)
    ap.add_argument("--match-args", default="", help="extra `vsr match` options")
    ap.add_argument("--skip-timing", action="store_true", help="no `--dry-run` timing")
    ap.add_argument(
        "--baseline-ref",
        default=None,
        help="time `vsr match` of this commit (e.g. main before a change) as the "
        "baseline, on a database its own code imported",
    )
    args = ap.parse_args()
    seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    extra = args.match_args.split()
    worst: tuple[float, int, str, list[float]] | None = None
    blinds: dict[int, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="mc_user_path_") as tmp:
        folder = Path(tmp)
        base = imported_db(args.release, folder)
        for seed in seeds:
            r = one_seed(base, folder, seed, extra)
            s = r["stats"]
            items = sum(s["items"].values()) or sum(s["items_unvalidated"].values())
            parts = s["items"] if any(s["items"].values()) else s["items_unvalidated"]
            print(
                f"seed {seed}: {items:,} items kept of {r['queries']:,} kept True Examples "
                f"({' / '.join(f'{k} {v:,}' for k, v in parts.items())}), measured on "
                f"{s['measured_on']}/ (n test {s['adversaries_n_test']:,}); "
                f"vsr match {r['match_seconds']:.1f} s",
                flush=True,
            )
            for name, a in s["adversaries"].items():
                lo, hi = a["ci95"]
                print(f"    {name:<20} {a['accuracy']:.3f} [{lo:.3f}, {hi:.3f}]", flush=True)
            best = s["strongest_adversary"]
            print(f"  strongest: {best['name']} {best['accuracy']:.3f} {best['ci95']}", flush=True)
            null = s.get("strongest_null")
            if null:
                print(
                    f"  strongest by chance alone: mean {null['mean']:.3f}, 95th percentile "
                    f"{null['p95']:.3f}",
                    flush=True,
                )
            for line in r["cost"]:
                print(f"  {line}", flush=True)
            print_blind(seed, r["blind"])
            blinds[seed] = r["blind"]
            if worst is None or best["accuracy"] > worst[0]:
                worst = (best["accuracy"], seed, best["name"], best["ci95"])
        if seeds and not args.skip_timing:
            env, base_db = None, base
            if args.baseline_ref:
                tree, commit = baseline_tree(args.baseline_ref, folder / "baseline")
                env = {**os.environ, "PYTHONPATH": str(tree)}
                base_db = imported_db(args.release, folder / "baseline-db", env)
                cmd = [_bin("vsr"), "match", "--split-seed", str(seeds[0]), "--dry-run"]
                what = f"`vsr match --dry-run` of commit {commit[:12]}"
            else:
                cmd = [
                    _bin("vsr"),
                    "match",
                    "--split-seed",
                    str(seeds[0]),
                    "--dry-run",
                    "--rake-rounds",
                    "0",
                    "--filter-above",
                    "0",
                ]
                what = "`vsr match --dry-run --rake-rounds 0 --filter-above 0`"
            _, base_s = _run(*cmd, "--database-url", f"sqlite:///{base_db}", env=env)
            _, ours_s = _run(
                _bin("vsr"),
                "match",
                "--split-seed",
                str(seeds[0]),
                "--dry-run",
                "--database-url",
                f"sqlite:///{base}",
                *extra,
            )
            print(
                f"time, same run, seed {seeds[0]}: `vsr match --dry-run` {ours_s:.1f} s, "
                f"baseline {what} {base_s:.1f} s: ratio {ours_s / base_s:.2f}"
            )
    print_table(blinds)
    if worst is not None:
        acc, seed, name, ci = worst
        verdict = "met" if acc <= TARGET else "NOT met"
        print(
            f"worst strongest adversary over seeds {seeds}: {acc:.3f} {ci} ({name}, seed "
            f"{seed}); target <= {TARGET}: {verdict}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
