"""Background jobs started from the dashboard (sample pairs, adversarial matching, build).

A job is a Job row plus a child process running ``vsr admin run-job <id>``. The child does
the work with the collection / matching / dataset libraries (which the web app may not
import) and writes its progress into the Job row, so a page reload -- or another server
process -- shows it. A separate process also keeps torch and long CPU work out of the web
server's threads. A small reaper thread marks a job failed if its process dies silently.

Several replicas behind a proxy share the Job table but not their process tables: a pid is
recorded with the host that started it (``host_id``: host name and boot), and only a server on
that host judges the pid. A job started on another host is left alone here (its own server's
reaper and orphan check cover it) while its process keeps writing its heartbeat; once the
heartbeat is stale (the host or container vanished for good) any server marks it failed.
Cancelling it sets the status, which the job's process reads at its next progress report
and stops.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, Field, ValidationInfo, field_validator
from sqlalchemy import update
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from vsr_core import audit
from vsr_core.audit import Actor
from vsr_core.defaults import MATCH_H, MATCH_K, MATCH_SEED, MIN_AREA_PX
from vsr_core.models import (
    ACTIVE_JOB_STATUSES,
    DEFAULT_STUDY_ID,
    JOB_HEARTBEAT_MISSED,
    JOB_HEARTBEAT_SECONDS,
    AuditKind,
    Job,
    JobKind,
    JobStatus,
)
from vsr_core.settings import Settings
from vsr_core.types import utcnow
from webapp.admin.job_results import describe

log = logging.getLogger(__name__)
MAX_PATH = 1024  # characters of one file path a job may name


class SampleParams(BaseModel):
    """Sample more COCO image pairs into the pool."""

    n_pairs: int = Field(100, ge=1, le=100_000)
    seed: int = Field(0, ge=0, le=2**31 - 1)
    # The options of `vsr sample` (vsr_cli/sample.py), same names and defaults.
    min_area: float = Field(MIN_AREA_PX, ge=0, le=10_000_000)
    prefer_contrast: bool = False
    max_per_concept_pair: int | None = Field(None, ge=1, le=100_000)
    concepts: str | None = Field(None, max_length=2000, pattern=r"^[a-z ,]*$")
    coco_files: list[Annotated[str, Field(max_length=MAX_PATH)]] = Field(
        min_length=1,
        max_length=10,
        description="COCO instances JSON files on the server, inside DATA_ROOTS",
    )

    @field_validator("coco_files", mode="before")
    @classmethod
    def _split(cls, value: Any) -> Any:
        if isinstance(value, str):
            if len(value) > 10 * (MAX_PATH + 1):
                raise ValueError(f"is too long (at most 10 paths of {MAX_PATH} characters)")
            return [p.strip() for p in value.replace(",", "\n").splitlines() if p.strip()]
        return value

    @field_validator("coco_files")
    @classmethod
    def _exist(cls, value: list[str], info: ValidationInfo) -> list[str]:
        # The folders come from the caller (settings.data_root_paths()): none, nothing passes.
        roots: list[Path] = list((info.context or {}).get("data_roots", []))
        found = [readable_file(p, roots) for p in value]
        missing = [p for p, f in zip(value, found, strict=True) if f is None]
        if missing:
            shown = ", ".join(p if len(p) <= 200 else p[:200] + "…" for p in missing)
            where = ", ".join(str(r) for r in roots) or "none configured"
            raise ValueError(
                f"no such file on the server in the folders jobs may read: {shown} "
                f"(DATA_ROOTS: {where})"
            )
        return [str(f) for f in found]


def readable_file(path: str, roots: list[Path]) -> Path | None:
    """The file ``path`` names, if it lies inside one of ``roots`` (symbolic links resolved)
    and is a file; None otherwise. A path outside the roots is never looked at, and every
    refusal reads the same, so the answer tells nothing about the rest of the server."""
    try:
        resolved = Path(path).resolve()
        inside = any(resolved == root or root in resolved.parents for root in roots)
        return resolved if inside and resolved.is_file() else None
    except (OSError, ValueError, RuntimeError):  # too long, NUL, a symlink loop
        return None


class MatchJobForm(BaseModel):
    """Adversarial matching: h trades difficulty for correctness, k rounds = k distractors.
    The dashboard's form of a matching job; the job runs matching.params.MatchParams."""

    h: float = Field(MATCH_H, ge=0.0, le=100.0)
    k: int = Field(MATCH_K, ge=1, le=10)
    seed: int = Field(MATCH_SEED, ge=0, le=2**31 - 1)


class BuildParams(BaseModel):
    """Build the dataset (JSONL splits, stats, card) and zip it for download."""

    seed: int = Field(0, ge=0, le=2**31 - 1)
    # build-dataset --unvalidated-mc: also the items validators have not cleared, apart.
    unvalidated_mc: bool = False


JOB_KINDS: dict[str, type[BaseModel]] = {
    JobKind.sample: SampleParams,
    JobKind.match: MatchJobForm,
    JobKind.build: BuildParams,
}


class JobBusyError(RuntimeError):
    """A job of this kind is already running."""


def export_dir(settings: Settings) -> Path:
    """Where build jobs write their zip files (next to the image cache, under ./var)."""
    return (Path(settings.image_cache_dir).parent / "exports").resolve()


def create_job(
    session: Session,
    settings: Settings,
    kind: JobKind,
    params: BaseModel,
    study_id: int = DEFAULT_STUDY_ID,
    *,
    actor: Actor,
) -> Job:
    """Insert a queued Job of the study (one active job per kind: two builds at once would
    fight), with the audit trail's record of who started it with which parameters."""
    busy = session.exec(
        select(Job).where(Job.kind == kind, col(Job.status).in_(ACTIVE_JOB_STATUSES))
    ).first()
    if busy is not None:
        raise JobBusyError(f"a {kind} job (#{busy.id}) is already running")
    data: dict[str, Any] = params.model_dump()
    job = Job(
        study_id=study_id,
        kind=kind,
        params=data,
        status=JobStatus.queued,
        message="waiting to start",
    )
    session.add(job)
    session.flush()
    audit.record(
        session,
        actor,
        AuditKind.job_start,
        study_id=study_id,
        target=f"job {job.id}",
        change={"kind": str(kind), "params": data},
    )
    session.commit()
    session.refresh(job)
    log.info("job %s (%s) of study %s queued", job.id, kind, study_id)
    if kind == JobKind.build:
        assert job.id is not None
        # Who started it: the build's export record names them (vsr_cli.admin_jobs).
        job.params = {
            **data,
            "zip": str(export_dir(settings) / f"vsr-dataset-job{job.id}.zip"),
            "_actor": actor.name,
            "_actor_id": actor.admin_id,
        }
        session.add(job)
        session.commit()
        session.refresh(job)
    return job


def last_coco_files(session: Session) -> str:
    """The COCO files of the latest sample job, to prefill the form."""
    job = session.exec(
        select(Job).where(Job.kind == JobKind.sample).order_by(col(Job.id).desc()).limit(1)
    ).first()
    files = job.params.get("coco_files", []) if job else []
    return "\n".join(str(f) for f in files)


# What a job's process takes from the server's environment: how to find Python and its
# packages, locale, time zone, temporary and cache folders, the model caches and thread counts
# matching uses. Nothing else: never a platform's credentials (PROLIFIC_API_TOKEN, AWS_*),
# which a job has no use for and a job's crash or log must not be able to show.
CHILD_ENV_NAMES = frozenset(
    {
        "PATH",
        "HOME",
        "USER",
        "LOGNAME",
        "LANG",
        "LANGUAGE",
        "TZ",
        "TMPDIR",
        "TEMP",
        "TMP",
        "PYTHONPATH",
        "PYTHONHASHSEED",
        "PYTHONUTF8",
        "PYTHONIOENCODING",
        "VIRTUAL_ENV",
        "HF_HOME",
        "HF_HUB_CACHE",
        "HF_HUB_OFFLINE",
        "HF_DATASETS_OFFLINE",
        "TRANSFORMERS_OFFLINE",
        "TRANSFORMERS_CACHE",
        "SENTENCE_TRANSFORMERS_HOME",
        "TORCH_HOME",
        "XDG_CACHE_HOME",
        "OMP_NUM_THREADS",
        "MKL_NUM_THREADS",
        "OPENBLAS_NUM_THREADS",
        "TOKENIZERS_PARALLELISM",
        "CUDA_VISIBLE_DEVICES",
        "VSR_DEBUG",
    }
)
CHILD_ENV_PREFIXES = ("LC_",)
# Settings a job does not need: SECRET_KEY (a job signs nothing).
CHILD_SETTINGS_LEFT_OUT = frozenset({"secret_key"})


def child_env(settings: Settings) -> dict[str, str]:
    """The environment of a job's process: the allow-listed names above, and the server's
    own settings (its DATABASE_URL, IMAGE_ROOT, ...) but for the secret key."""
    env = {
        name: value
        for name, value in os.environ.items()
        if name in CHILD_ENV_NAMES or name.startswith(CHILD_ENV_PREFIXES)
    }
    for field in type(settings).model_fields:
        value = getattr(settings, field)
        if field not in CHILD_SETTINGS_LEFT_OUT and value is not None:
            env[field.upper()] = str(value)
    env.setdefault("HF_HUB_OFFLINE", "1")
    return env


@functools.cache
def host_id() -> str:
    """This host as the Job table names it: the host name (a container's own, under Docker
    Compose every replica has one) and the kernel's boot id, so a pid recorded before a
    reboot of the same host is known to be gone."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as fh:
            boot = fh.read().strip()
    except OSError:
        boot = ""
    return f"{socket.gethostname()}/{boot}"


def _same_host(recorded: object) -> bool | None:
    """True: the pid was recorded here (this boot); False: here, but before a reboot (the
    process is gone); None: on another host, whose pids mean nothing here. A job recorded
    before hosts were (no ``_host``) counts as this host's, as it always did."""
    if recorded is None:
        return True
    if not isinstance(recorded, str):
        return None
    if recorded == host_id():
        return True
    if recorded.split("/", 1)[0] == host_id().split("/", 1)[0]:
        return False
    return None


def launch(session: Session, engine: Engine, settings: Settings, job: Job) -> int:
    """Start ``vsr admin run-job`` for this job, record its pid, and reap it in a thread.

    The pid is written through the caller's session: on SQLite a second connection would
    wait for the request's own write lock.
    """
    assert job.id is not None
    log_dir = export_dir(settings).parent / "job-logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    log_path = log_dir / f"job{job.id}.log"
    with open(log_path, "wb") as output:
        proc = subprocess.Popen(
            [sys.executable, "-m", "vsr_cli.main", "admin", "run-job", str(job.id)],
            env=child_env(settings),
            stdout=output,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,  # a killed server does not take the job down mid-write
        )
    job.params = {**job.params, "_pid": proc.pid, "_host": host_id(), "_log": str(log_path)}
    session.add(job)
    session.commit()
    log.info("job %s started as process %s", job.id, proc.pid)
    threading.Thread(
        target=_reap, args=(engine, job.id, proc, log_path), daemon=True, name=f"job-{job.id}"
    ).start()
    return proc.pid


def _reap(engine: Engine, job_id: int, proc: subprocess.Popen[bytes], log_path: Path) -> None:
    code = proc.wait()
    try:
        with Session(engine) as session:
            job = session.get(Job, job_id)
            if job is None or job.status not in ACTIVE_JOB_STATUSES:
                return
            job.status = JobStatus.failed
            job.finished_at = utcnow()
            last = _last_line(log_path)
            job.message = f"the job process ended (exit code {code}): {last}"[:2000]
            session.add(job)
            session.commit()
    except Exception:  # the database went away (shutdown): mark_orphans catches it later
        log.warning("could not record the end of job %s", job_id, exc_info=True)


def _last_line(path: Path) -> str:
    try:
        lines = [ln for ln in path.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return "no log"
    return lines[-1] if lines else "no output"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie (exited, not yet reaped) counts as dead.
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return True


def _gone(job: Job) -> bool:
    """The job's process is known to be gone (only a server on its host can tell)."""
    pid = job.params.get("_pid")
    if not isinstance(pid, int):
        return False
    here = _same_host(job.params.get("_host"))
    if here is None:
        return False
    return not here or not _alive(pid)


# A job of another host silent this long is gone (its process beats every few seconds).
SILENT_AFTER_SECONDS = JOB_HEARTBEAT_SECONDS * JOB_HEARTBEAT_MISSED


def _silent_elsewhere(job: Job) -> bool:
    """A running job of another host whose process has missed its heartbeats: its host or
    container is gone (that host's own server would otherwise have judged the pid)."""
    if job.status != JobStatus.running or _same_host(job.params.get("_host")) is not None:
        return False
    last = job.heartbeat_at or job.started_at or job.created_at
    return (utcnow() - last).total_seconds() > SILENT_AFTER_SECONDS


def mark_orphans(session: Session) -> int:
    """Active jobs whose process is gone (e.g. the server restarted, or the replica's host
    vanished) become failed."""
    n = 0
    for job in list(session.exec(select(Job).where(col(Job.status).in_(ACTIVE_JOB_STATUSES)))):
        pid = job.params.get("_pid")
        started = job.started_at or job.created_at
        stale_queue = pid is None and (utcnow() - started).total_seconds() > 60
        if _silent_elsewhere(job):
            host = str(job.params.get("_host", "?")).split("/", 1)[0]
            message = (
                f"the job stopped without finishing: its server on host {host} has not "
                f"reported for over {SILENT_AFTER_SECONDS} s"
            )
        elif _gone(job) or stale_queue:
            message = "the job stopped without finishing (server restarted or crashed)"
        else:
            continue
        # Conditional: the job may have finished, or beaten, since it was read.
        beat = col(Job.heartbeat_at)
        done = session.execute(
            update(Job)
            .where(
                col(Job.id) == job.id,
                col(Job.status).in_(ACTIVE_JOB_STATUSES),
                beat.is_(None) if job.heartbeat_at is None else beat == job.heartbeat_at,
            )
            .values(status=JobStatus.failed, finished_at=utcnow(), message=message)
        )
        n += int(getattr(done, "rowcount", 0) or 0)
    if n:
        session.commit()
        session.expire_all()
        log.warning("%s jobs whose process is gone marked failed", n)
    return n


def cancel(session: Session, job: Job, *, actor: Actor) -> None:
    import signal

    pid = job.params.get("_pid")
    # Only a process of this host can be signalled; elsewhere the job reads the status.
    if isinstance(pid, int) and _same_host(job.params.get("_host")) and _alive(pid):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGTERM)
    was = job.status
    job.status = JobStatus.cancelled
    job.finished_at = utcnow()
    job.message = "cancelled by an admin"
    session.add(job)
    audit.record(
        session,
        actor,
        AuditKind.job_cancel,
        study_id=job.study_id,
        target=f"job {job.id}",
        change={
            "kind": str(job.kind),
            **audit.changed({"status": str(was)}, {"status": "cancelled"}),
        },
    )
    session.commit()
    log.info("job %s (%s) of study %s cancelled", job.id, job.kind, job.study_id)


def public(job: Job) -> dict[str, Any]:
    """What the pipeline page polls (no internal fields such as the pid)."""
    return {
        "id": job.id,
        "kind": job.kind,
        "status": job.status,
        "progress": round(float(job.progress), 4),
        "message": job.message,
        "params": {k: v for k, v in job.params.items() if not k.startswith("_") and k != "zip"},
        "result": job.result,
        "outcome": describe(job),
        "created_at": job.created_at.isoformat(timespec="seconds"),
        "finished_at": job.finished_at.isoformat(timespec="seconds") if job.finished_at else None,
        "download": f"/admin/jobs/{job.id}/download"
        if job.kind == JobKind.build and job.status == JobStatus.succeeded
        else None,
    }
