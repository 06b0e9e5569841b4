"""Blocking a worker while they submit: the lease ends exactly one way (answered, or handed
back to the pool), never both, on SQLite and PostgreSQL with real threads."""

from __future__ import annotations

import threading
import uuid
from pathlib import Path
from typing import Any

from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from vsr_core.models import Annotation, Assignment, Batch, ImagePair, Worker
from vsr_core.studies.settings import StudyConfig, load_study_config
from webapp.crowd import batches, leases
from webapp.crowd.leases import PairStrategy
from webapp.crowd.workers import block_worker
from webapp.generate.submission import GenerationSubmission, SubmissionError, submit


def _race(
    engine: Engine,
    worker_id: int,
    sub: GenerationSubmission,
    cfg: StudyConfig,
    strategies: dict[str, Any],
) -> list[BaseException]:
    """Block the worker and submit their answer at the same moment, in two threads."""
    barrier = threading.Barrier(2)
    errors: list[BaseException] = []

    def do_block() -> None:
        try:
            with Session(engine) as s:
                worker = s.get(Worker, worker_id)
                assert worker is not None
                barrier.wait()
                block_worker(s, worker, strategies, "race test", study_id=None)
        except BaseException as exc:  # noqa: BLE001 - reported by the caller
            errors.append(exc)

    def do_submit() -> None:
        try:
            with Session(engine) as s:
                barrier.wait()
                submit(s, worker_id, sub, cfg)
        except SubmissionError as exc:
            if exc.status != 409:
                errors.append(exc)
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=do_block), threading.Thread(target=do_submit)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return errors


def test_block_racing_a_submit_never_loses_or_doubles_work(engine: Engine, coco_dir: Path) -> None:
    from collection.sampler import sample_into_db

    files = [
        coco_dir / "annotations" / f"instances_{s}_subset.json" for s in ("val2017", "train2017")
    ]
    rounds = sample_into_db(engine, files, 8, seed=5).stored
    assert rounds >= 3
    strategy = PairStrategy()
    outcomes = []
    for i in range(rounds):
        with Session(engine) as s:
            w = Worker(source="prolific", external_id=f"racer-{i}", roles=["generate"])
            s.add(w)
            s.commit()
            cfg = load_study_config(s)
            batch = batches.open_or_resume(s, w, "generate", cfg, strategy)
            lease = leases.take_next(s, batch, strategy, cfg.lease_minutes)
            assert lease is not None
            s.commit()
            worker_id, lease_id, pair_id = w.id, lease.id, lease.pair_id
        assert worker_id is not None and lease_id is not None
        sub = GenerationSubmission(
            assignment_id=lease_id,
            client_token=uuid.uuid4().hex,
            action="submit",
            relation="near",
            ent1="a",
            true_image=1,
        )
        errors = _race(engine, worker_id, sub, cfg, {"generate": strategy})
        assert not errors, errors
        with Session(engine) as s:
            lease_row = s.get(Assignment, lease_id)
            pair = s.get(ImagePair, pair_id)
            anns = s.exec(select(Annotation).where(Annotation.assignment_id == lease_id)).all()
            worker = s.get(Worker, worker_id)
            still_open = s.exec(
                select(Batch).where(Batch.worker_id == worker_id, Batch.status == "open")
            ).all()
        assert lease_row is not None and pair is not None and worker is not None
        assert worker.blocked and not still_open
        if lease_row.status == "done":  # the answer won: kept, and the pair is used
            assert len(anns) == 1 and pair.status == "annotated"
        else:  # the block won: nothing recorded, the pair is back in the pool
            assert lease_row.status == "released" and not anns and pair.status == "available"
        outcomes.append(lease_row.status)
    assert set(outcomes) <= {"done", "released"}
