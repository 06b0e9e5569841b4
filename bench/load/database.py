"""The benchmark's own PostgreSQL database: created, seeded with real VSR captions, dropped."""

from __future__ import annotations

import json
import os
import random
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
VSR_RAW = (
    Path(os.environ.get("VSR_SHARED") or ROOT.parent / "shared")
    / "vsr"
    / "data"
    / "data_files"
    / "all_vsr_raw_data.jsonl"
)
# The bench's databases are named "<prefix>_<pid>_<random>" (a shared server: one's own prefix).
DB_PREFIX = os.environ.get("VSR_BENCH_DB_PREFIX", "vsr_load")
PG_ADMIN = os.environ.get(
    "VSR_BENCH_PG_ADMIN_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
)


# --- database ---------------------------------------------------------------------------------


def create_database(template: str | None = None) -> str:
    """A new database, empty or a copy of ``template`` (an imported 10x or 100x database:
    copying it takes seconds where importing takes minutes; it is only read)."""
    import time

    from sqlalchemy import text
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import OperationalError

    from vsr_core.db import make_engine

    name = f"{DB_PREFIX}_{os.getpid()}_{uuid.uuid4().hex[:6]}"
    admin = make_engine(PG_ADMIN).execution_options(isolation_level="AUTOCOMMIT")
    copy = f' TEMPLATE "{template}"' if template else ""
    with admin.connect() as c:
        for attempt in range(120):  # a template must have no other session while copied
            try:
                c.execute(text(f'CREATE DATABASE "{name}"{copy}'))
                break
            except OperationalError as exc:
                if "being accessed" not in str(exc) or attempt == 119:
                    raise
                time.sleep(2)
    admin.dispose()
    return make_url(PG_ADMIN).set(database=name).render_as_string(hide_password=False)


def drop_database(url: str) -> None:
    from sqlalchemy import text
    from sqlalchemy.engine import make_url

    from vsr_core.db import make_engine

    admin = make_engine(PG_ADMIN).execution_options(isolation_level="AUTOCOMMIT")
    with admin.connect() as c:
        c.execute(text(f'DROP DATABASE IF EXISTS "{make_url(url).database}" WITH (FORCE)'))
    admin.dispose()


def import_history(url: str, factor: int, tmp: Path) -> str:
    """``factor`` copies of the real release (bench/gen10x.py's copies 1..factor: their own
    images and workers) imported with the project's importer as settled history, with all
    their votes: the database a lab has after collecting ``factor`` times VSR. The open
    Examples ``seed`` adds next are copy 0 (the real images and authors), so nothing clashes.
    """
    from bench.gen10x import copy_record
    from vsr_core.db import make_engine
    from vsr_dataset.import_vsr import import_vsr_file

    records = [json.loads(line) for line in VSR_RAW.read_text().splitlines() if line.strip()]
    path = tmp / f"vsr_history_{os.getpid()}_{factor}x.jsonl"
    with path.open("w") as out:
        for k in range(1, factor + 1):
            for rec in records:
                out.write(json.dumps(copy_record(rec, k)) + "\n")
    engine = make_engine(url)
    try:
        return import_vsr_file(engine, path).line()
    finally:
        engine.dispose()
        path.unlink()


@dataclass
class Seed:
    p_true: dict[str, float]  # caption|image -> share of real VSR votes that said True
    author_tokens: list[str]  # invite tokens of authors who also validate


def seed(url: str, n_examples: int, n_gold: int, n_author_validators: int) -> Seed:
    """Real VSR records (caption, relation, label, image, author) as unvoted human Examples."""
    from sqlmodel import Session, select

    from vsr_core.captions import parse_caption
    from vsr_core.db import make_engine
    from vsr_core.models import Example, Image, InviteToken, Worker

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
                w = Worker(
                    source="imported",
                    external_id=f"vsr-{rec['annotator_id']}",
                    roles=["generate", "validate"],
                )
                s.add(w)
                authors[rec["annotator_id"]] = w
            if rec["image"] not in images:
                known = s.exec(select(Image).where(Image.coco_id == int(rec["image"][:-4])))
                img_or_none = known.first()  # a copied history holds the real images
                if img_or_none is not None:
                    images[rec["image"]] = img_or_none
                    examples.append((rec, parsed, votes))
                    continue
                split = rec["image_link"].rsplit("/", 2)[-2]
                img = Image(
                    coco_id=int(rec["image"][:-4]),
                    file_name=rec["image"],
                    coco_split=split,
                    width=640,
                    height=480,
                    coco_url=rec["image_link"],
                )
                s.add(img)
                images[rec["image"]] = img
            examples.append((rec, parsed, votes))
        s.flush()
        for k, (rec, parsed, votes) in enumerate(examples):
            gold = k < n_gold
            ex = Example(
                image_id=images[rec["image"]].id,  # type: ignore[arg-type]
                caption=rec["caption"],
                relation=rec["relation"],
                subj=parsed.subj,
                obj=parsed.obj,
                label=bool(rec["label"]),
                origin="human",
                author_id=authors[rec["annotator_id"]].id,
                is_gold=gold,
                gold_label=bool(rec["label"]) if gold else None,
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
