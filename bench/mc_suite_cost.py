"""What fitting the answer-only suite on dev too costs: on an export's MC set, the CPU seconds
of the train-fitted suite (the baseline) and of the suite fitted on train and, apart, on dev
(what `vsr match --report` and build-dataset now run), in turn in one process, with the ratio.

    python -m bench.mc_suite_cost EXPORT_DIR [--set mc_unvalidated] [--repeats 2]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path


def main() -> int:
    from matching.diagnostics import measured_suite, measured_suites
    from matching.relevance import load_encoder
    from vsr_dataset.mc_blind import read_set
    from vsr_dataset.mc_stats import items_from_lines

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("export", type=Path)
    ap.add_argument("--set", default="mc_unvalidated")
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()
    items = items_from_lines(read_set(args.export, args.set))
    train, dev, test = (items.get(p, []) for p in ("train", "dev", "test"))
    if not (train and dev and test):
        raise SystemExit(f"error: {args.export / args.set} needs train, dev and test files")
    encoder = load_encoder(None)
    print(f"{args.set}: train {len(train):,}, dev {len(dev):,}, test {len(test):,} items")
    for _ in range(args.repeats):
        t0 = time.process_time()
        measured_suite(train, test, encoder, 0)
        base = time.process_time() - t0
        t0 = time.process_time()
        measured_suites(train, dev, test, encoder, 0)
        ours = time.process_time() - t0
        print(
            f"train-fitted {base:.1f} s CPU, train- and dev-fitted {ours:.1f} s CPU: "
            f"+{ours - base:.1f} s, ratio {ours / base:.2f}",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
