"""The work behind the dashboard's background jobs (``vsr admin run-job ID``).

The web app (which may import only ``core``) inserts a Job row and starts this in a child
process; here, in ``dataset`` (which may import everything), each kind of job calls the
library of its part -- collection (sample pairs), matching (adversarial matching), dataset
(build + zip) -- and reports progress into the Job row.
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sqlalchemy.engine import Engine
from sqlmodel import Session

from core.models import Job
from core.types import utcnow

Progress = Callable[[float, str], None]


class JobCancelled(Exception):
    """An admin cancelled the job while it ran."""


class JobReporter:
    """Writes progress to the Job row in its own short transactions (at most ~2 per second)."""

    def __init__(self, engine: Engine, job_id: int) -> None:
        self.engine = engine
        self.job_id = job_id
        self._last = 0.0

    def __call__(self, fraction: float, message: str, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._last < 0.5:
            return
        self._last = now
        with Session(self.engine) as session:
            job = session.get(Job, self.job_id)
            if job is None:
                raise JobCancelled("the job row is gone")
            if job.status == "cancelled":
                raise JobCancelled("cancelled by an admin")
            job.progress = max(0.0, min(1.0, fraction))
            job.message = message[:2000]
            session.add(job)
            session.commit()


def _stage_progress(report: Progress, stages: dict[str, tuple[float, float, str]]) -> Any:
    """Adapt a library's ``progress(stage, done, total)`` callback to one 0..1 bar."""

    def progress(stage: str, done: int, total: int | None) -> None:
        lo, hi, label = stages.get(stage, (0.0, 1.0, stage))
        frac = lo + (hi - lo) * (done / total if total else 0.0)
        report(frac, f"{label}: {done}" + (f" / {total}" if total else ""))

    return progress


def run_sample(engine: Engine, params: dict[str, Any], report: Progress) -> dict[str, Any]:
    from collection.sampler import sample_into_db

    files = [str(f) for f in params.get("coco_files", [])]
    summary = sample_into_db(
        engine,
        files,
        int(params["n_pairs"]),
        seed=int(params.get("seed", 0)),
        progress=_stage_progress(
            report,
            {
                "load": (0.0, 0.3, "loading COCO"),
                "sample": (0.3, 0.7, "sampling pairs"),
                "store": (0.7, 1.0, "storing"),
            },
        ),
    )
    return {"summary": summary.line(), **summary.as_dict()}


def run_match(engine: Engine, params: dict[str, Any], report: Progress) -> dict[str, Any]:
    try:
        from matching import pipeline  # type: ignore[attr-defined]
    except ImportError:
        raise RuntimeError("adversarial matching is not available in this installation") from None
    return dict(pipeline.run_from_dashboard(engine, params, report))


def run_build(engine: Engine, params: dict[str, Any], report: Progress) -> dict[str, Any]:
    import shutil
    import tempfile

    try:
        from dataset import build as build_mod  # type: ignore[attr-defined]
    except ImportError:
        raise RuntimeError("build-dataset is not available in this installation") from None
    target = Path(str(params["zip"]))
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="vsr-build-") as tmp:
        out = Path(tmp) / "vsr-dataset"
        report(0.05, "building the dataset")
        info = build_mod.build_dataset(engine, out, seed=int(params.get("seed", 0)))
        files = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file())
        report(0.85, f"zipping {len(files)} files")
        archive = shutil.make_archive(str(Path(tmp) / "bundle"), "zip", root_dir=out)
        part = target.with_suffix(".part")
        shutil.move(archive, part)
        part.replace(target)  # the download link appears only for a complete file
    return {
        "zip": target.name,
        "bytes": target.stat().st_size,
        "files": files,
        "info": _jsonable(info),
    }


def _jsonable(value: Any) -> Any:
    import json

    try:
        json.dumps(value)
        return value
    except TypeError:
        return str(value)


HANDLERS: dict[str, Callable[[Engine, dict[str, Any], Progress], dict[str, Any]]] = {
    "sample": run_sample,
    "match": run_match,
    "build": run_build,
}


def run_job(engine: Engine, job_id: int) -> Job:
    """Run one queued job to the end; its row ends succeeded, failed or cancelled."""
    with Session(engine) as session:
        job = session.get(Job, job_id)
        if job is None:
            raise LookupError(f"there is no job #{job_id}")
        if job.status != "queued":
            raise RuntimeError(f"job #{job_id} is {job.status}, not queued")
        handler = HANDLERS.get(job.kind)
        job.status = "running" if handler else "failed"
        job.started_at = utcnow()
        job.message = "started" if handler else f"unknown job kind {job.kind!r}"
        session.add(job)
        session.commit()
        params = dict(job.params)
        if handler is None:
            session.refresh(job)
            return job
    report = JobReporter(engine, job_id)
    status, message, result = "succeeded", "done", None
    try:
        result = handler(engine, params, report)
    except JobCancelled:
        status, message = "cancelled", "cancelled by an admin"
    except Exception as exc:  # the job fails, with the reason for the admin, never silently
        status = "failed"
        message = " ".join(str(exc).split()) or type(exc).__name__
        traceback.print_exc()
    with Session(engine) as session:
        job = session.get(Job, job_id)
        if job is None:
            raise LookupError(f"job #{job_id} disappeared")
        if job.status == "cancelled":
            status, message = "cancelled", job.message
        job.status = status
        job.message = message[:2000]
        job.result = result
        if status == "succeeded":
            job.progress = 1.0
        job.finished_at = utcnow()
        session.add(job)
        session.commit()
        session.refresh(job)
        return job
