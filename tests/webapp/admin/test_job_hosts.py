"""Dashboard jobs with several replicas: a pid means something only on the host that started it
(webapp.admin.jobs.host_id), so a server on another host neither marks the job dead nor signals
a process of its own that happens to have that pid."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.engine import Engine
from sqlmodel import Session

from vsr_core.audit import Actor
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
        jobs.cancel(s, job, actor=Actor("alice", None))
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
        jobs.cancel(s, job, actor=Actor("alice", None))
    assert live_process.wait(timeout=10) != 0
    assert _status(engine, job_id) == "cancelled"


def test_launch_records_the_host_with_the_pid(engine: Engine, db_url: str, tmp_path: Path) -> None:
    settings = Settings(
        database_url=db_url,
        secret_key="job-hosts-" + "k" * 30,
        image_cache_dir=tmp_path / "var" / "cache",
    )
    with Session(engine) as s:
        job = Job(kind="nosuch", status="queued", params={}, message="waiting")
        s.add(job)
        s.commit()
        pid = jobs.launch(s, engine, settings, job)
        s.refresh(job)
        assert job.params["_pid"] == pid
        assert job.params["_host"] == jobs.host_id()
    # Wait for the child and its reaper: left running, they would write to a later test's job
    # that reuses this id (the tables are emptied between tests).
    import threading

    for thread in threading.enumerate():
        if thread.name == f"job-{job.id}":
            thread.join(timeout=60)
            assert not thread.is_alive()
    assert _status(engine, job.id or 0) == "failed"
    with Session(engine) as s:  # the child ran (with the allow-listed environment) and said why
        done = s.get(Job, job.id)
        assert done is not None
        assert "unknown job kind 'nosuch'" in done.message, done.message
    assert "/" in jobs.host_id() and jobs.host_id().split("/", 1)[0]


def test_a_job_inherits_no_credentials(
    db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The platforms' credentials in the server's environment never reach a job's process,
    nor does SECRET_KEY; the settings the job needs and the interpreter's paths do."""
    secrets_in_env = {
        "PROLIFIC_API_TOKEN": "prolific-token-xyz",
        "AWS_ACCESS_KEY_ID": "AKIAEXAMPLE",
        "AWS_SECRET_ACCESS_KEY": "aws-secret-xyz",
        "AWS_SESSION_TOKEN": "aws-session-xyz",
        "SECRET_KEY": "env-secret-" + "k" * 32,
        "SOME_OTHER_TOKEN": "other-xyz",
    }
    for name, value in secrets_in_env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("LC_ALL", "C.UTF-8")
    settings = Settings(
        database_url=db_url,
        secret_key="job-hosts-" + "k" * 30,
        image_cache_dir=tmp_path / "var" / "cache",
        image_root=tmp_path,
    )
    env = jobs.child_env(settings)
    assert not set(secrets_in_env) & set(env)
    assert not any(v in str(env) for v in secrets_in_env.values())
    assert "job-hosts-" not in str(env)
    assert env["DATABASE_URL"] == db_url and env["IMAGE_ROOT"] == str(tmp_path)
    assert env["IMAGE_CACHE_DIR"] == str(tmp_path / "var" / "cache")
    assert env["PATH"] == os.environ["PATH"] and env["LC_ALL"] == "C.UTF-8"


def _age_heartbeat(engine: Engine, job_id: int, seconds: float | None) -> None:
    from datetime import timedelta

    from vsr_core.types import utcnow

    with Session(engine) as s:
        job = s.get(Job, job_id)
        assert job is not None
        job.started_at = utcnow() - timedelta(hours=1)
        job.heartbeat_at = None if seconds is None else utcnow() - timedelta(seconds=seconds)
        s.add(job)
        s.commit()


def test_a_job_of_a_vanished_host_fails_once_its_heartbeat_is_stale(
    engine: Engine, dead_pid: int
) -> None:
    # Replica A's host is gone for good: its job's heartbeat stops; B cannot see A's pid
    # but knows from the heartbeat. A job of A still beating stays running.
    from vsr_core.models import JOB_HEARTBEAT_MISSED, JOB_HEARTBEAT_SECONDS

    stale = JOB_HEARTBEAT_SECONDS * JOB_HEARTBEAT_MISSED
    silent = _running_job(engine, _pid=dead_pid, _host=_other_host())
    _age_heartbeat(engine, silent, stale + 30)
    beating = _running_job(engine, _pid=dead_pid, _host=_other_host())
    _age_heartbeat(engine, beating, JOB_HEARTBEAT_SECONDS)
    never = _running_job(engine, _pid=dead_pid, _host=_other_host())  # started an hour ago
    _age_heartbeat(engine, never, None)
    with Session(engine) as s:
        assert jobs.mark_orphans(s) == 2
    assert _status(engine, silent) == "failed" and _status(engine, never) == "failed"
    assert _status(engine, beating) == "running"
    with Session(engine) as s:
        job = s.get(Job, silent)
        assert job is not None and job.finished_at is not None
        assert job.message == (
            f"the job stopped without finishing: its server on host replica-b-"
            f"{jobs.host_id().split('/', 1)[0]} has not reported for over {stale} s"
        )


def test_the_job_process_writes_its_heartbeat_while_it_runs(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    import time

    from vsr_cli import admin_jobs

    beats: list[object] = []

    def slow(
        engine_: Engine, params: dict[str, object], report: object, study: int
    ) -> dict[str, Any]:
        for _ in range(3):  # the heartbeat moves on while the work runs
            time.sleep(0.3)
            with Session(engine_) as s:
                job = s.get(Job, job_id)
                assert job is not None
                beats.append(job.heartbeat_at)
        return {}

    monkeypatch.setitem(admin_jobs.HANDLERS, "slow-test", slow)
    monkeypatch.setattr(admin_jobs, "JOB_HEARTBEAT_SECONDS", 0.1)
    with Session(engine) as s:
        job = Job(kind="slow-test", status="queued", params={})
        s.add(job)
        s.commit()
        assert job.id is not None
        job_id = job.id
    done = admin_jobs.run_job(engine, job_id)
    assert done.status == "succeeded", done.message
    assert all(b is not None for b in beats) and len(set(beats)) == 3, beats
    last = done.heartbeat_at
    time.sleep(0.3)  # stopped with the job: no beat after it ended
    with Session(engine) as s:
        again = s.get(Job, job_id)
        assert again is not None and again.heartbeat_at == last
