"""The work behind the dashboard's background jobs (``vsr admin run-job ID``).

The web app (which may import only ``core``) inserts a Job row and starts this in a child
process; here, in ``dataset`` (which may import everything), each kind of job calls the
library of its part -- collection (sample pairs), matching (adversarial matching), dataset
(build + zip) -- and reports progress into the Job row.
"""

from __future__ import annotations

import logging
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sqlalchemy.engine import Engine
from sqlmodel import Session

from vsr_core import audit
from vsr_core.audit import Actor
from vsr_core.models import JOB_HEARTBEAT_SECONDS, AuditKind, Job, JobKind, JobStatus
from vsr_core.tables import JOB
from vsr_core.types import utcnow

Progress = Callable[[float, str], None]
log = logging.getLogger(__name__)


class JobCancelled(Exception):
    """An admin cancelled the job while it ran."""


class JobReporter:
    """Writes progress to the Job row in its own short transactions (at most ~2 per second).

    Progress is best effort: on SQLite a library may call back from inside its own read
    transaction (vsr_core.db begins every transaction IMMEDIATE, i.e. holding the write lock),
    so updates go through a separate connection that gives up after a fraction of a second
    instead of waiting for a lock this very process holds; the final status is written after
    the work, when no lock is held.
    """

    def __init__(self, engine: Engine, job_id: int) -> None:
        self.job_id = job_id
        self._last = 0.0
        if engine.dialect.name == "sqlite":
            from sqlalchemy import create_engine

            self.engine = create_engine(
                engine.url, connect_args={"timeout": 0.25, "check_same_thread": False}
            )
        else:
            self.engine = engine

    def __call__(self, fraction: float, message: str, force: bool = False) -> None:
        from sqlalchemy import select, update
        from sqlalchemy.exc import OperationalError

        now = time.monotonic()
        if not force and now - self._last < 0.5:
            return
        self._last = now
        try:
            with self.engine.begin() as conn:
                status = conn.execute(
                    select(JOB.c.status).where(JOB.c.id == self.job_id)
                ).scalar_one_or_none()
                if status is None:
                    raise JobCancelled("the job row is gone")
                if status == JobStatus.cancelled:
                    raise JobCancelled("cancelled by an admin")
                conn.execute(
                    update(JOB)
                    .where(JOB.c.id == self.job_id)
                    .values(progress=max(0.0, min(1.0, fraction)), message=message[:2000])
                )
        except OperationalError:
            return  # the database is busy (e.g. our own long read): skip this update


def _stage_progress(report: Progress, stages: dict[str, tuple[float, float, str]]) -> Any:
    """Adapt a library's ``progress(stage, done, total)`` callback to one 0..1 bar."""

    def progress(stage: str, done: int, total: int | None) -> None:
        lo, hi, label = stages.get(stage, (0.0, 1.0, stage))
        frac = lo + (hi - lo) * (done / total if total else 0.0)
        report(frac, f"{label}: {done}" + (f" / {total}" if total else ""))

    return progress


def run_sample(
    engine: Engine, params: dict[str, Any], report: Progress, study_id: int
) -> dict[str, Any]:
    from collection.sampler import sample_into_db
    from vsr_core.defaults import MIN_AREA_PX

    files = [str(f) for f in params.get("coco_files", [])]
    concepts = params.get("concepts")
    cap = params.get("max_per_concept_pair")
    summary = sample_into_db(
        engine,
        files,
        int(params["n_pairs"]),
        seed=int(params.get("seed", 0)),
        min_area=float(params.get("min_area", MIN_AREA_PX)),
        prefer_contrast=bool(params.get("prefer_contrast", False)),
        max_per_concept_pair=int(cap) if cap else None,
        concepts=[c.strip() for c in str(concepts).split(",") if c.strip()] if concepts else None,
        progress=_stage_progress(
            report,
            {
                "load": (0.0, 0.3, "loading COCO"),
                "sample": (0.3, 0.7, "sampling pairs"),
                "store": (0.7, 1.0, "storing"),
            },
        ),
        study_id=study_id,
    )
    return {"summary": summary.line(), **summary.as_dict()}


def run_match(
    engine: Engine, params: dict[str, Any], report: Progress, study_id: int
) -> dict[str, Any]:
    """Adversarial matching with the dashboard's h and k: the very run `vsr match` makes with
    its defaults (vsr_dataset.match_run), distractors sent to validators before items reach mc/."""
    from vsr_cli.common import no_library_bars_off_terminal

    no_library_bars_off_terminal()  # the job's log is a file
    from matching.params import MatchParams
    from vsr_dataset.match_run import MatchRequest, run_matching_over, save_match_run

    h, k, seed = float(params["h"]), int(params["k"]), int(params.get("seed", 0))
    request = MatchRequest(params=MatchParams(h=h, k=k, seed=seed), study_id=study_id)
    outcome = run_matching_over(engine, request, report=report)
    report(0.95, "saving the run")
    run_id = save_match_run(
        engine, outcome, request, send_negatives=True, extra={"from": "dashboard"}
    )
    return {
        "match_run": run_id,
        "items": len(outcome.result.items),
        "diagnostics": _jsonable(outcome.diagnostics),
    }


def run_build(
    engine: Engine, params: dict[str, Any], report: Progress, study_id: int
) -> dict[str, Any]:
    """``build-dataset`` of the job's study into a temporary folder, then a zip for the
    download link."""
    import tempfile

    from vsr_core.models import Study
    from vsr_core.studies.context import StudyContext
    from vsr_dataset.export import BuildOptions, build_dataset, zip_export

    with Session(engine) as session:
        row = session.get(Study, study_id)
        if row is None:
            raise LookupError(f"the job's study #{study_id} is gone")
        study = StudyContext.of(row)
    target = Path(str(params["zip"]))
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="vsr-build-") as tmp:
        out = Path(tmp) / "vsr-dataset"
        summary = build_dataset(
            engine,
            out,
            BuildOptions(
                seed=int(params.get("seed", 0)),
                study=study,
                unvalidated_mc=bool(params.get("unvalidated_mc", False)),
            ),
            progress=lambda stage, frac: report(0.9 * frac, f"building: {stage}"),
        )
        report(0.92, f"zipping {len(summary.files)} files")
        zip_export(out, target)  # writes a temporary name, then renames: never a partial zip
        files = audit.digests(out)
    zip_sha = audit.sha256_of(target)
    who = Actor(str(params.get("_actor") or "job"), _int_or_none(params.get("_actor_id")))
    audit.record_now(
        engine,
        who,
        AuditKind.dataset_export,
        study_id=study_id,
        target=target.name,
        change={"via": "dashboard job", "zip_sha256": zip_sha, "files": files},
    )
    return {
        "sha256": zip_sha,
        "zip": target.name,
        "bytes": target.stat().st_size,
        "files": summary.files,
        "raw": summary.n_raw,
        "validated": summary.n_validated,
        "keep_rule": summary.keep_rule_text(),
        "splits": _jsonable(summary.splits),
    }


def _int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) else None


def _jsonable(value: Any) -> Any:
    import json

    try:
        json.dumps(value)
        return value
    except TypeError:
        return str(value)


HANDLERS: dict[str, Callable[[Engine, dict[str, Any], Progress, int], dict[str, Any]]] = {
    JobKind.sample: run_sample,
    JobKind.match: run_match,
    JobKind.build: run_build,
}


class Heartbeat:
    """Writes ``heartbeat_at`` of a running job every ``interval`` seconds from a thread, so
    servers on other hosts (which cannot see this process) know the job is alive. Like
    progress it is best effort: a busy SQLite file skips a beat (SQLite is one host anyway,
    where the pid is judged instead)."""

    def __init__(self, engine: Engine, job_id: int, interval: float | None = None) -> None:
        import threading

        self.engine, self.job_id = engine, job_id
        self.interval = interval or JOB_HEARTBEAT_SECONDS
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name=f"job-{job_id}-heartbeat", daemon=True
        )

    def __enter__(self) -> Heartbeat:
        self.beat()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.beat()

    def beat(self) -> None:
        from sqlalchemy import update
        from sqlalchemy.exc import OperationalError

        try:
            with self.engine.begin() as conn:
                conn.execute(
                    update(JOB)
                    .where(JOB.c.id == self.job_id, JOB.c.status == JobStatus.running)
                    .values(heartbeat_at=utcnow())
                )
        except OperationalError:
            return  # busy or briefly unreachable: the next beat tries again


def run_job(engine: Engine, job_id: int) -> Job:
    """Run one queued job to the end; its row ends succeeded, failed or cancelled."""
    with Session(engine) as session:
        job = session.get(Job, job_id)
        if job is None:
            raise LookupError(f"there is no job #{job_id}")
        if job.status != JobStatus.queued:
            raise RuntimeError(f"job #{job_id} is {job.status}, not queued")
        handler = HANDLERS.get(job.kind)
        job.status = JobStatus.running if handler else JobStatus.failed
        job.started_at = utcnow()
        job.message = "started" if handler else f"unknown job kind {job.kind!r}"
        session.add(job)
        session.commit()
        params = dict(job.params)
        study_id, kind = job.study_id, job.kind
        if handler is None:
            session.refresh(job)
            return job
    report = JobReporter(engine, job_id)
    log.info("job %s (%s) of study %s started", job_id, kind, study_id)
    status, message, result = JobStatus.succeeded, "done", None
    try:
        with Heartbeat(report.engine, job_id):
            result = handler(engine, params, report, study_id)
    except JobCancelled:
        status, message = JobStatus.cancelled, "cancelled by an admin"
    except Exception as exc:  # the job fails, with the reason for the admin, never silently
        status = JobStatus.failed
        message = " ".join(str(exc).split()) or type(exc).__name__
        traceback.print_exc()
    with Session(engine) as session:
        job = session.get(Job, job_id)
        if job is None:
            raise LookupError(f"job #{job_id} disappeared")
        if job.status == JobStatus.cancelled:
            status, message = JobStatus.cancelled, job.message
        job.status = status
        job.message = message[:2000]
        job.result = result
        if status == JobStatus.succeeded:
            job.progress = 1.0
        job.finished_at = utcnow()
        session.add(job)
        session.commit()
        session.refresh(job)
        log.info("job %s (%s) of study %s ended %s", job_id, kind, study_id, status)
        return job
