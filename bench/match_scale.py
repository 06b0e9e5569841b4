"""Benchmark: how each cost of adversarial matching grows from 1x to 10x VSR.

Both sizes are built in memory from the real raw release exactly as bench/gen10x.py writes
them (every raw record copied N times onto its own images and workers), loaded as matching
records, and run through the library path `vsr match` uses (matching.pipeline.run_matching
with the table P_sim, then matching.diagnostics.diagnose with the answer-only adversary
suite). Splits are the default image-keyed ones (a database run uses build-dataset's split,
which has the same shares).

Prints per stage the 1x time (the baseline, measured in the same run), the 10x time, and
the ratio 10x / 1x (10 = linear), then the 10x end-to-end time against the 60 s goal.
"match <split>" is the sum of the split's fold times (the work); "matching (wall)" is the
wall time of all three with the workers in parallel.

    python bench/match_scale.py                       # 1x and 10x, default options
    python bench/match_scale.py --factors 1,3 --workers 1
    python bench/match_scale.py --suite-sample 0      # the adversary suite on every item

Options are passed through to the run: --workers (processes matching splits and folds;
default as `vsr match`: one per core, at most 4; 1 = in this process), --fold-size
(MatchParams.fold_size, 0 = no folds), --suite-sample (train and test items the adversary
suite sees at most; default 4000, 0 = all).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.gen10x import VSR_RAW, copy_record  # noqa: E402

GOAL_SECONDS = 60.0


def scaled_records(raw: list[dict[str, Any]], factor: int) -> list[Any]:
    """The records of a ``factor`` x release (ids are line numbers, as load_vsr_jsonl)."""
    from matching.records import Record
    from vsr_core.captions import parse_caption

    out: list[Record] = []
    parsed: dict[tuple[str, str], Any] = {}
    for k in range(factor):
        for rec in raw:
            row = copy_record(rec, k)
            key = (row["caption"], row["relation"])
            if key not in parsed:
                parsed[key] = parse_caption(*key)
            p = parsed[key]
            n_true = len(row["vote_true_validator_id"])
            n_false = len(row["vote_false_validator_id"])
            out.append(
                Record(
                    id=len(out) + 1,
                    image=row["image"],
                    subj=p.subj,
                    relation=p.relation,
                    obj=p.obj,
                    caption=row["caption"],
                    label=bool(row["label"]),
                    votes=(True,) * n_true + (False,) * n_false,
                )
            )
    return out


def cpu_seconds() -> float:
    """CPU time of this process and its finished children (the fold workers): on a shared
    machine the work done, whatever share of the cores the run got."""
    import resource

    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def run_once(
    raw: list[dict[str, Any]], factor: int, encoder: Any, args: argparse.Namespace
) -> dict[str, Any]:
    from matching.diagnostics import diagnose
    from matching.pipeline import MatchParams, run_matching
    from matching.relevance import RelevanceModel
    from matching.similarity import TableSimilarity

    stages: dict[str, float] = {}
    cpu0 = cpu_seconds()
    t_start = time.perf_counter()
    records = scaled_records(raw, factor)
    stages["build records"] = time.perf_counter() - t_start
    relevance = RelevanceModel(encoder)  # fresh: concepts are embedded again in the run
    extra: dict[str, Any] = {}
    if args.fold_size is not None:
        extra["fold_size"] = args.fold_size
    params = MatchParams(**extra)
    run_kw: dict[str, Any] = {}
    if args.workers is not None:  # else run_matching's own default (an old tree: none)
        run_kw["workers"] = args.workers
    result = run_matching(records, relevance, TableSimilarity(), params, **run_kw)
    stages["fit P_rel"] = result.seconds["fit_p_rel"]
    for s in ("train", "dev", "test"):  # the sum of its folds' times, whatever the workers
        stages[f"match {s}"] = result.seconds[f"match_{s}"]
    stages["matching (wall)"] = result.seconds.get(
        "match_wall", sum(stages[f"match {s}"] for s in ("train", "dev", "test"))
    )
    t0 = time.perf_counter()
    diag_kw: dict[str, Any] = {}
    if args.suite_sample is not None:
        diag_kw["suite_sample"] = args.suite_sample
    diag = diagnose(result, relevance, **diag_kw)
    stages["diagnostics"] = time.perf_counter() - t0
    wall = time.perf_counter() - t_start
    cpu = cpu_seconds() - cpu0
    suite = diag["answer_only_adversaries"]
    return {
        "factor": factor,
        "examples": len(records),
        "queries": sum(result.queries.values()),
        "items": sum(diag["items"].values()),
        "stages": stages,
        "suite_seconds": suite.get("seconds", {}),
        "wall": wall,
        "cpu": cpu,
        "quality": {
            "strongest": suite.get("strongest"),
            "suite_n_test": suite.get("n_test"),
            "suite_sampled_from": suite.get("sampled_from"),
            "answer_only_nb": diag["answer_only_accuracy"],
            "text_only": diag["text_only_accuracy"],
            "implied": diag["implied_by_truth_share"],
            "duplicates": diag["duplicate_choice_items"],
            "known_true": diag["known_true_distractors"],
            "relation_tv": diag["relation_distribution"]["total_variation"],
            "unmatched": diag["unmatched"],
        },
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--factors", default="1,10", help="sizes to run; the first is the baseline")
    ap.add_argument("--workers", type=int, default=None)
    ap.add_argument("--fold-size", type=int, default=None)
    ap.add_argument("--suite-sample", type=int, default=None)
    ap.add_argument("--source", type=Path, default=VSR_RAW)
    ap.add_argument("--json", type=Path, default=None, help="write the figures here too")
    args = ap.parse_args()
    if args.workers is None:
        try:  # `vsr match`'s default: one process per core (at most 4)
            from vsr_dataset.match_run import default_workers

            args.workers = default_workers()
        except ImportError:  # a tree from before folds: nothing to pass
            pass
    raw = [json.loads(line) for line in args.source.read_text().splitlines() if line.strip()]
    factors = [int(f) for f in args.factors.split(",")]
    from matching.relevance import load_encoder

    t0 = time.perf_counter()
    encoder = load_encoder(None)  # once: a fixed cost of every run, whatever its size
    t_model = time.perf_counter() - t0
    print(
        f"load MiniLM (torch import included, once): {t_model:.1f} s; "
        f"{args.workers or 1} worker(s)",
        flush=True,
    )
    runs = []
    for f in factors:
        r = run_once(raw, f, encoder, args)
        runs.append(r)
        print(
            f"{f}x: {r['examples']:,} Examples, {r['queries']:,} kept True queries, "
            f"{r['items']:,} items, {r['wall']:.1f} s end to end, {r['cpu']:.1f} CPU s",
            flush=True,
        )
        print(f"    quality: {json.dumps(r['quality'])}", flush=True)
    base = runs[0]
    head = f"{'stage':<16}" + "".join(f"{str(r['factor']) + 'x (s)':>12}" for r in runs)
    head += "".join(f"{str(r['factor']) + 'x/' + str(base['factor']) + 'x':>10}" for r in runs[1:])
    print(head)
    for stage in [*base["stages"], "end to end", "CPU s (all)"]:
        vals = [
            r["wall"]
            if stage == "end to end"
            else r["cpu"]
            if stage.startswith("CPU")
            else r["stages"][stage]
            for r in runs
        ]
        line = f"{stage:<16}" + "".join(f"{v:>12.2f}" for v in vals)
        line += "".join(f"{v / max(vals[0], 1e-9):>10.1f}" for v in vals[1:])
        print(line)
    for r in runs:
        print(f"  adversary suite at {r['factor']}x (s): {r['suite_seconds']}")
    big = runs[-1]
    total = big["wall"] + t_model
    print(
        f"{big['factor']}x end to end {big['wall']:.1f} s = {big['wall'] / base['wall']:.1f}x "
        f"the {base['factor']}x run for {big['queries'] / max(base['queries'], 1):.1f}x the "
        f"queries ({big['cpu'] / max(base['cpu'], 1e-9):.1f}x its CPU time); with the model "
        f"load {total:.1f} s, goal < {GOAL_SECONDS:.0f} s: "
        f"{'met' if total < GOAL_SECONDS else 'NOT met'}"
    )
    print(
        f"load average at the end: {', '.join(f'{x:.1f}' for x in os.getloadavg())} "
        "(2 cores; timings are shared with whatever else runs)"
    )
    if args.json:
        args.json.write_text(
            json.dumps({"model_load": t_model, "runs": runs}, indent=2, default=str)
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
