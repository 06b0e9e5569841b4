"""Seed a database with real VSR release records for the admin dashboard's tests and bench.

Writes Workers, Images, Examples and Votes with Core executemany (fast on both backends).
The release has no timestamps or durations: votes are spread over the last 48 hours (so the
throughput chart has something to show) and carry no duration. Repeated validator ids on
one record become workers "<id>#2", as the project's importer does (Vote is unique per
Example and Worker).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import insert, select
from sqlalchemy.engine import Engine

from vsr_core.captions import parse_caption
from vsr_core.models import Example, Vote
from vsr_core.tables import EXAMPLE, IMAGE, VOTE, WORKER
from vsr_core.types import utcnow

RAW = Path("data/data_files/all_vsr_raw_data.jsonl")


@dataclass
class Seeded:
    records: list[dict[str, Any]]
    example_ids: list[int]
    worker_ids: dict[str, int]


def read_raw(vsr_dir: Path, every: int = 1) -> list[dict[str, Any]]:
    """Every ``every``-th record of the raw file (a systematic, stratified-by-order sample:
    the file is grouped by annotator, so every annotator is represented)."""
    lines = (vsr_dir / RAW).read_text().splitlines()
    return [json.loads(line) for i, line in enumerate(lines) if line.strip() and i % every == 0]


def vote_list(rec: dict[str, Any]) -> list[tuple[str, bool]]:
    seen: dict[int, int] = {}
    out = []
    for key, value in (("vote_true_validator_id", True), ("vote_false_validator_id", False)):
        for vid in rec[key]:
            seen[vid] = seen.get(vid, 0) + 1
            out.append((str(vid) if seen[vid] == 1 else f"{vid}#{seen[vid]}", value))
    return out


def seed(engine: Engine, records: list[dict[str, Any]]) -> Seeded:
    now = utcnow()
    externals: dict[str, set[str]] = {}
    for rec in records:
        externals.setdefault(str(rec["annotator_id"]), set()).add("generate")
        for ext, _ in vote_list(rec):
            externals.setdefault(ext, set()).add("validate")
    with engine.begin() as conn:
        conn.execute(
            insert(WORKER),
            [
                {
                    "source": "imported",
                    "external_id": e,
                    "roles": sorted(r),
                    "blocked": False,
                    "flagged": False,
                    "created_at": now,
                }
                for e, r in sorted(externals.items())
            ],
        )
        workers = {
            e: i
            for i, e in conn.execute(
                select(WORKER.c.id, WORKER.c.external_id).where(WORKER.c.source == "imported")
            )
        }
        images: dict[str, dict[str, Any]] = {}
        for rec in records:
            split = "val2017" if "/val2017/" in rec["image_link"] else "train2017"
            images.setdefault(
                rec["image"],
                {
                    "coco_id": int(rec["image"].split(".")[0]),
                    "file_name": rec["image"],
                    "coco_split": split,
                    "width": 0,
                    "height": 0,
                    "coco_url": rec["image_link"].replace("\\/", "/"),
                },
            )
        conn.execute(insert(IMAGE), list(images.values()))
        image_ids: dict[str, int] = dict(conn.execute(select(IMAGE.c.file_name, IMAGE.c.id)).all())
        rows = []
        for i, rec in enumerate(records):
            parsed = parse_caption(rec["caption"], rec["relation"])
            rows.append(
                {
                    "image_id": image_ids[rec["image"]],
                    "caption": rec["caption"],
                    "relation": parsed.relation,
                    "subj": parsed.subj,
                    "obj": parsed.obj,
                    "label": bool(rec["label"]),
                    "origin": "imported",
                    "author_id": workers[str(rec["annotator_id"])],
                    "queue_open": False,  # settled, as the project's importer leaves them
                    # the vote counters, as the importer and the queue keep them
                    "queue_votes": len(vote_list(rec)),
                    "queue_agree": sum(v == bool(rec["label"]) for _, v in vote_list(rec)),
                    "queue_settled": True,
                    "is_gold": False,
                    "source_key": f"seed:{i}",
                    "created_at": now,
                }
            )
        conn.execute(insert(EXAMPLE), rows)
        ids: dict[str, int] = dict(conn.execute(select(EXAMPLE.c.source_key, EXAMPLE.c.id)).all())
        example_ids = [ids[f"seed:{i}"] for i in range(len(records))]
        votes = []
        k = 0
        for ex_id, rec in zip(example_ids, records, strict=True):
            for ext, value in vote_list(rec):
                votes.append(
                    {
                        "example_id": ex_id,
                        "worker_id": workers[ext],
                        "value": value,
                        "created_at": now - timedelta(minutes=(k * 7) % (47 * 60)),
                    }
                )
                k += 1
        for start in range(0, len(votes), 5000):
            conn.execute(insert(VOTE), votes[start : start + 5000])
    return Seeded(records, example_ids, workers)


def add_vote(session: Any, example_id: int, worker_id: int, value: bool) -> None:
    """One vote, counted on its Example the way the validation queue counts it in the same
    statement (webapp.validate.statements: queue_votes + 1, queue_agree + 1 when it agrees
    with the label), for tests that put votes in without a lease."""
    from sqlalchemy import case, update

    session.add(Vote(example_id=example_id, worker_id=worker_id, value=value))
    session.execute(
        update(Example)
        .where(Example.id == example_id)  # type: ignore[arg-type]
        .values(
            queue_votes=Example.queue_votes + 1,
            queue_agree=Example.queue_agree + case((Example.label == value, 1), else_=0),  # type: ignore[arg-type]
        )
    )
