"""Injected bots among the VSR release's real validators: does ``vsr_core.authenticity`` flag
the bots within their first 100 votes and none of the 45 people? (docs/quality.md)

The release has every vote but no timings, so this measures the vote-pattern tests only
(answer entropy, agreement with the other validators' majority). Each seed adds, at the
release's scale, 45 synthetic validators (15 of each kind) with 500 votes each on items drawn
at random from ``all_vsr_raw_data.jsonl``:

- ``always_true``: answers True;
- ``random``: a fair coin;
- ``caption_prior``: an image-blind agent that answers from the captions alone: the majority
  label of the caption's (relation, subject, object) in a random half of the release it was
  "trained" on, backing off to the relation's, then True; it answers items of the other half.

A vote agrees when it matches the majority of the item's other votes (real and injected) and
its author's label (a tie is undecided): the leave-one-out reading of the study's label
model, refitted once without the workers its first fit flagged. Every worker is re-tested
after each vote (``vsr_core.authenticity.first_flag``); the 45 real validators over their
whole history in file order. The thresholds were chosen on seeds 1000-1019
(``--seeds 1000-1019``); report other seeds (default 0-19).

    python -m bench.authenticity_vsr                  # seeds 0-19, the reported table
    VSR_SHARED=/path/to/shared python -m bench.authenticity_vsr   # data elsewhere
    python -m bench.authenticity_vsr --seeds 1000-1019
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import sys
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from vsr_core.authenticity import first_flag, wilson

# The real data beside the checkout (../shared), or where VSR_SHARED says.
SHARED = Path(os.environ.get("VSR_SHARED") or Path(__file__).resolve().parents[2] / "shared")
Record = dict[str, Any]  # one line of the release
RAW = SHARED / "vsr" / "data" / "data_files" / "all_vsr_raw_data.jsonl"
KINDS = ("always_true", "random", "caption_prior")
PER_KIND = 15
VOTES_EACH = 500
WITHIN = 100
CAPTION = re.compile(r"The (.+?) (?:is|are) (.+) the (.+?)\.?")


def _load(path: Path) -> list[Record]:
    with path.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def _key(rec: Record) -> tuple[str, str, str]:
    m = CAPTION.fullmatch(str(rec["caption"]))
    rel = str(rec["relation"])
    return (rel, m.group(1), m.group(3)) if m else (rel, "", "")


class CaptionPrior:
    """Majority label per caption key, backing off to the relation: never sees a photo."""

    def __init__(self, train: list[Record]) -> None:
        self.full: dict[tuple[str, str, str], Counter[bool]] = defaultdict(Counter)
        self.rel: dict[str, Counter[bool]] = defaultdict(Counter)
        for r in train:
            label = bool(r["label"])
            self.full[_key(r)][label] += 1
            self.rel[str(r["relation"])][label] += 1

    def answer(self, rec: Record) -> bool:
        for counts in (self.full.get(_key(rec)), self.rel.get(str(rec["relation"]))):
            if counts and counts[True] != counts[False]:
                return counts[True] > counts[False]
        return True


def _history(
    records: list[Record],
    votes: list[list[tuple[str, bool]]],
    who: str,
    items: list[int],
    left_out: set[str],
) -> tuple[list[bool], list[bool | None]]:
    """One worker's answers in their order, and whether each agrees with the item's other
    votes (but those of ``left_out`` workers) plus its author's label: the leave-one-out
    reading of the study's label model (a tie is undecided)."""
    answers: list[bool] = []
    agrees: list[bool | None] = []
    for i in items:
        others: Counter[bool] = Counter()
        others[bool(records[i]["label"])] += 1
        for o, v in votes[i]:
            if o == who:
                answers.append(v)
            elif o not in left_out:
                others[v] += 1
        agrees.append(
            None if others[True] == others[False] else answers[-1] == (others[True] > others[False])
        )
    return answers, agrees


def run_seed(records: list[Record], seed: int) -> tuple[dict[str, list[int | None]], int]:
    """Votes to the first flag of each injected worker by kind, and real validators flagged."""
    rng = random.Random(seed)
    order = list(range(len(records)))
    rng.shuffle(order)
    half = len(order) // 2
    prior = CaptionPrior([records[i] for i in order[:half]])
    unseen = order[half:]  # the image-blind agent answers items it was not fitted on
    # votes[item] = list of (worker, value); real first, in file order
    votes: list[list[tuple[str, bool]]] = []
    for r in records:
        vs = [(f"real:{w}", True) for w in r["vote_true_validator_id"]]
        vs += [(f"real:{w}", False) for w in r["vote_false_validator_id"]]
        votes.append(vs)
    injected: dict[str, list[int]] = {}
    for kind in KINDS:
        for j in range(PER_KIND):
            name = f"{kind}:{j}"
            pool = unseen if kind == "caption_prior" else range(len(records))
            items = rng.sample(pool, VOTES_EACH)
            injected[name] = items
            for i in items:
                if kind == "always_true":
                    value = True
                elif kind == "random":
                    value = rng.random() < 0.5
                else:
                    value = prior.answer(records[i])
                votes[i].append((name, value))
    # Real validators voted in file order, injected ones in the order their items were drawn.
    order_of: dict[str, list[int]] = defaultdict(list)
    for i, vs in enumerate(votes):
        for w, _ in vs:
            if w.startswith("real:"):
                order_of[w].append(i)
    order_of.update(injected)
    # The label model is refitted without the workers its first fit flagged (as a
    # Dawid-Skene fit down-weights them): bots then no longer drag the majority.
    flagged: set[str] = set()
    for _ in range(2):
        firsts = {
            w: first_flag(*_history(records, votes, w, items, flagged), len(items))
            for w, items in order_of.items()
        }
        flagged = {w for w, k in firsts.items() if k is not None}
    to_flag: dict[str, list[int | None]] = {k: [] for k in KINDS}
    for name in injected:
        k = firsts[name]
        to_flag[name.split(":")[0]].append(k if k is not None and k <= WITHIN else None)
    real_flagged = sum(k is not None for w, k in firsts.items() if w.startswith("real:"))
    return to_flag, real_flagged


def _seeds(text: str) -> list[int]:
    lo, _, hi = text.partition("-")
    return list(range(int(lo), int(hi or lo) + 1))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument(
        "--seeds", default="0-19", help="a range such as 0-19 (threshold seeds: 1000-1019)"
    )
    ap.add_argument("--raw", type=Path, default=RAW, help="the release's all_vsr_raw_data.jsonl")
    args = ap.parse_args(argv)
    if not args.raw.is_file():
        print(f"error: {args.raw} not found (the VSR release's raw file)", file=sys.stderr)
        return 2
    records = _load(args.raw)
    real = {
        w
        for r in records
        for k in ("vote_true_validator_id", "vote_false_validator_id")
        for w in r[k]
    }
    seeds = _seeds(args.seeds)
    flagged: dict[str, list[int | None]] = {k: [] for k in KINDS}
    real_per_seed: list[int] = []
    for seed in seeds:
        got, real_flagged = run_seed(records, seed)
        for k in KINDS:
            flagged[k] += got[k]
        real_per_seed.append(real_flagged)
    print(f"VSR raw file: {len(records):,} items, {len(real)} real validators; seeds {args.seeds}")
    print(f"injected per seed: {PER_KIND} of each kind x {VOTES_EACH} votes\n")
    print("| workers | flagged within first 100 votes | share (95 % CI) | median votes to flag |")
    print("|---|---|---|---|")
    for k in KINDS:
        ks = flagged[k]
        hit = [x for x in ks if x is not None]
        lo, hi = wilson(len(hit), len(ks), 1.96)
        med = sorted(hit)[len(hit) // 2] if hit else "-"
        share = f"{len(hit) / len(ks):.1%} ({lo:.1%}-{hi:.1%})"
        print(f"| injected {k} | {len(hit)} / {len(ks)} | {share} | {med} |")
    total = len(real) * len(seeds)
    bad = sum(real_per_seed)
    lo, hi = wilson(bad, total, 1.96)
    print(
        f"| real VSR validators (whole history) | {bad} / {total} validator-seeds; "
        f"worst seed {max(real_per_seed)} of {len(real)} | "
        f"{bad / total:.1%} ({lo:.1%}-{hi:.1%}) | - |"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
