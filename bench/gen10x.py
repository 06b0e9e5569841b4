"""A VSR-format release N times the size of the real one (default 10x: ~128,000 Examples,
~390,000 votes), with the real release's shapes: every real raw record is copied N times, each
copy on its own images (COCO id + k x 1,000,000, the same split and caption) and with its own
caption writers and validators (ids + k x 100,000), so captions, relations, labels, votes per
Example, agreement, and each worker's share of the work keep the real distribution.

It writes JSONL in the release's raw format, which `vsr import-vsr` (the project's importer)
loads; bench/dashboard.py --raw times the dashboard over it. Prints the size and, as the
baseline measured in the same run, json.loads of the real file against json.loads of the
generated one (the generator's own cost is ~ that of writing it).

    python bench/gen10x.py /tmp/vsr10x.jsonl
    python bench/gen10x.py /tmp/vsr3x.jsonl --factor 3
    vsr import-vsr /tmp/vsr10x.jsonl --database-url postgresql+psycopg://...
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
VSR_RAW = ROOT.parent / "shared" / "vsr" / "data" / "data_files" / "all_vsr_raw_data.jsonl"
IMAGE_STEP = 1_000_000  # above every COCO 2017 id (< 600,000)
WORKER_STEP = 100_000  # above every VSR worker id
# Image.coco_id is a 32-bit integer: the last copy's ids (k x IMAGE_STEP + < 600,000) must fit.
MAX_FACTOR = (2**31 - 1 - 600_000) // IMAGE_STEP + 1
IMAGE_RE = re.compile(r"(\d{12})\.jpg")


def copy_record(rec: dict[str, Any], k: int) -> dict[str, Any]:
    """The k-th copy (k = 0 is the record itself)."""
    if k == 0:
        return rec
    m = IMAGE_RE.fullmatch(rec["image"])
    if m is None:
        raise ValueError(f"unexpected image name {rec['image']!r}")
    image = f"{int(m.group(1)) + k * IMAGE_STEP:012d}.jpg"
    shift = k * WORKER_STEP
    return {
        **rec,
        "image": image,
        "image_link": rec["image_link"].rsplit("/", 1)[0] + "/" + image,
        "annotator_id": None if rec["annotator_id"] is None else rec["annotator_id"] + shift,
        "vote_true_validator_id": [v + shift for v in rec["vote_true_validator_id"]],
        "vote_false_validator_id": [v + shift for v in rec["vote_false_validator_id"]],
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("out", type=Path, help="JSONL file to write")
    ap.add_argument(
        "--factor", type=int, default=10, help=f"copies of each real record (1-{MAX_FACTOR})"
    )
    ap.add_argument("--source", type=Path, default=VSR_RAW, help="the real raw release file")
    args = ap.parse_args()
    if not 1 <= args.factor <= MAX_FACTOR:
        sys.exit(f"--factor must be 1-{MAX_FACTOR}")
    if not args.source.is_file():
        sys.exit(f"real VSR raw file not found: {args.source}")
    t0 = time.perf_counter()
    records = [json.loads(line) for line in args.source.read_text().splitlines() if line.strip()]
    t_real = time.perf_counter() - t0
    t0 = time.perf_counter()
    n_votes = 0
    with args.out.open("w") as out:
        for k in range(args.factor):
            for rec in records:
                copy = copy_record(rec, k)
                n_votes += len(copy["vote_true_validator_id"])
                n_votes += len(copy["vote_false_validator_id"])
                out.write(json.dumps(copy) + "\n")
    t_gen = time.perf_counter() - t0
    t0 = time.perf_counter()
    with args.out.open() as fh:  # line by line: at 100x the file is ~0.7 GB
        n = sum(1 for line in fh if json.loads(line))
    t_read = time.perf_counter() - t0
    print(
        f"wrote {args.out}: {n} records ({args.factor} x {len(records)}), {n_votes} votes, "
        f"{args.out.stat().st_size / 1e6:.0f} MB in {t_gen:.1f} s"
    )
    print(
        f"json.loads of it {t_read:.2f} s = {t_read / t_real:.1f}x that of the real file "
        f"({t_real:.2f} s); generating took {t_gen / t_read:.1f}x reading it back"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
