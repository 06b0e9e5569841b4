"""Dashboard jobs with several replicas: a pid means something only on the host that started it
(webapp.admin.jobs.host_id), so a server on another host neither marks the job dead nor signals
a process of its own that happens to have that pid."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy.engine import Engine
from sqlmodel import Session

from vsr_core.models import Job
from vsr_core.settings import Settings
from webapp.admin import jobs


@pytest.fixture
def dead_pid() -> int:
    """The pid of a process that has exited and been reaped."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


@pytest.fixture
def live_process() -> Iterator[subprocess.Popen[bytes]]:
    """A process of this host in its own session (as launch starts jobs)."""
    proc = subprocess.Popen(["sleep", "60"], start_new_session=True)
    yield proc
    proc.kill()
    proc.wait()


def _running_job(engine: Engine, **params: object) -> int:
    with Session(engine) as s:
        job = Job(kind="build", status="running", params=dict(params), message="working")
        s.add(job)
        s.commit()
        assert job.id is not None
        return job.id


def _status(engine: Engine, job_id: int) -> str:
    with Session(engine) as s:
        job = s.get(Job, job_id)
        assert job is not None
        return job.status


def _other_host() -> str:
    return "replica-b-" + jobs.host_id()


def test_a_job_of_another_host_is_not_marked_dead_here(engine: Engine, dead_pid: int) -> None:
    # Replica B sees replica A's job: A's pid is no process here, yet the job runs on A.
    theirs = _running_job(engine, _pid=dead_pid, _host=_other_host())
    ours = _running_job(engine, _pid=dead_pid, _host=jobs.host_id())
    with Session(engine) as s:
        assert jobs.mark_orphans(s) == 1
    assert _status(engine, theirs) == "running"
    assert _status(engine, ours) == "failed"


def test_a_job_recorded_before_a_reboot_of_this_host_is_dead(
    engine: Engine, live_process: subprocess.Popen[bytes]
) -> None:
    # Same host name, another boot: whatever has that pid now is not the job.
    name = jobs.host_id().split("/", 1)[0]
    job_id = _running_job(engine, _pid=live_process.pid, _host=f"{name}/an-earlier-boot")
    with Session(engine) as s:
        assert jobs.mark_orphans(s) == 1
    assert _status(engine, job_id) == "failed"
    assert live_process.poll() is None


def test_a_live_job_of_this_host_stays_and_a_job_without_host_is_judged_here(
    engine: Engine, live_process: subprocess.Popen[bytes], dead_pid: int
) -> None:
    alive = _running_job(engine, _pid=live_process.pid, _host=jobs.host_id())
    legacy = _running_job(engine, _pid=dead_pid)  # recorded before hosts were
    with Session(engine) as s:
        assert jobs.mark_orphans(s) == 1
    assert _status(engine, alive) == "running"
    assert _status(engine, legacy) == "failed"


def test_cancel_from_another_host_signals_nothing_here(
    engine: Engine, live_process: subprocess.Popen[bytes]
) -> None:
    # The pid recorded on replica A is, here on B, an unrelated live process: cancelling from
    # B must only set the status (A's job reads it at its next progress report).
    job_id = _running_job(engine, _pid=live_process.pid, _host=_other_host())
    with Session(engine) as s:
        job = s.get(Job, job_id)
        assert job is not None
        jobs.cancel(s, job)
    assert _status(engine, job_id) == "cancelled"
    with pytest.raises(subprocess.TimeoutExpired):
        live_process.wait(timeout=0.5)


def test_cancel_on_the_jobs_host_stops_its_process(
    engine: Engine, live_process: subprocess.Popen[bytes]
) -> None:
    job_id = _running_job(engine, _pid=live_process.pid, _host=jobs.host_id())
    with Session(engine) as s:
        job = s.get(Job, job_id)
        assert job is not None
        jobs.cancel(s, job)
    assert live_process.wait(timeout=10) != 0
    assert _status(engine, job_id) == "cancelled"


def test_launch_records_the_host_with_the_pid(
    engine: Engine, db_url: str, tmp_path: Path
) -> None:
    settings = Settings(database_url=db_url, secret_key="job-hosts-" + "k" * 30,
                        image_cache_dir=tmp_path / "var" / "cache")
    with Session(engine) as s:
        job = Job(kind="nosuch", status="queued", params={}, message="waiting")
        s.add(job)
        s.commit()
        pid = jobs.launch(s, engine, settings, job)
        s.refresh(job)
        assert job.params["_pid"] == pid
        assert job.params["_host"] == jobs.host_id()
    assert "/" in jobs.host_id() and jobs.host_id().split("/", 1)[0]
