"""`vsr platform sync|plan|apply` end to end on the fake Prolific (a subprocess, like a script)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine
from sqlmodel import Session, select

from tests.support.fake_prolific import TOKEN, State, running
from vsr_core.models import (
    AuditEvent,
    AuditKind,
    PlatformAction,
    PlatformCall,
    PlatformStudy,
    PlatformSubmission,
    Worker,
)
from vsr_core.studies.store import default_study

VSR = str(Path(sys.executable).parent / "vsr")
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def fake() -> Iterator[tuple[str, State]]:
    with running() as served:
        yield served


def _vsr(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [VSR, "platform", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **env},
    )


def test_sync_plan_apply(db_url: str, engine: Engine, fake: tuple[str, State]) -> None:
    url, state = fake
    state.studies["st1"] = {"id": "st1", "status": "ACTIVE"}
    state.add_submission("st1", "s1", "p1", "AWAITING REVIEW")
    with Session(engine) as session:
        session.add(Worker(source="prolific", external_id="p1"))
        study = PlatformStudy(
            platform="prolific", external_id="st1", settings={"rules": {"min_items": 1}}
        )
        session.add(study)
        session.commit()
        sid = str(study.id)
    common = ["--platform", "prolific", "--platform-study", sid, "--database-url", db_url]
    env = {"PROLIFIC_API_TOKEN": TOKEN, "PROLIFIC_BASE_URL": url}
    r = _vsr("sync", *common, **env)
    assert r.returncode == 0, r.stderr
    r = _vsr("plan", *common)
    assert "reject s1" in r.stdout and "1 new actions planned" in r.stdout, r.stderr
    # Per submission, the work in its own batches and what it is paid for.
    assert (
        "s1 AWAITING REVIEW: 0 batches, 0 votes, 0 written (0 kept); paid for nothing" in r.stdout
    )
    r = _vsr("apply", *common, **env)
    assert r.stdout.strip() == "1 done, 0 failed", r.stderr
    assert state.transitions == [("s1", "REJECTED")]
    with Session(engine) as session:
        logged = session.exec(select(PlatformCall)).all()
    assert logged and all(TOKEN not in repr(c.model_dump()) for c in logged)


def test_errors_are_one_line(db_url: str, fake: tuple[str, State]) -> None:
    url, _ = fake
    r = _vsr("sync", "--platform", "prolific", "--platform-study", "99", "--database-url", db_url)
    assert r.returncode != 0 and r.stderr.strip() == "error: no prolific study with id 99"
    r = _vsr(
        "sync",
        "--platform",
        "prolific",
        "--platform-study",
        "1",
        "--database-url",
        db_url,
        PROLIFIC_API_TOKEN="",
    )
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_create_publish_pause(db_url: str, engine: Engine, fake: tuple[str, State]) -> None:
    url, state = fake
    env = {"PROLIFIC_API_TOKEN": TOKEN, "PROLIFIC_BASE_URL": url}
    made = []
    for reward in ("100", "900"):  # £0.75/h and £6.75/h over the stated 80 minutes
        r = _vsr(
            "create",
            "--platform",
            "prolific",
            "--reward-cents",
            reward,
            "--places",
            "5",
            "--site-url",
            "https://vsr.example.org",
            "--expected-minutes",
            "80",
            "--database-url",
            db_url,
            **env,
        )
        assert r.returncode == 0, r.stderr
        first = r.stdout.splitlines()[0]
        assert first.startswith("created prolific study ") and "draft" in first
        assert "entry URL: https://vsr.example.org/start/generate?PROLIFIC_PID=" in r.stdout
        made.append(first.split()[3])
    common = ["--platform", "prolific", "--database-url", db_url]
    r = _vsr("publish", "--platform-study", made[0], *common, **env)
    assert r.returncode == 1 and r.stderr.strip() == (
        "error: refused: effective pay £0.75/h (£1.00 for 80.0 min; stated duration; 0 of "
        "the 5 workers needed measured); platform minimum £6.00/h"
    )
    assert [s["status"] for s in state.studies.values()] == ["UNPUBLISHED", "UNPUBLISHED"]
    r = _vsr("publish", "--platform-study", made[1], *common, **env)
    assert (
        r.returncode == 0 and r.stdout.splitlines()[-1] == f"prolific study {made[1]}: published"
    ), r.stderr
    r = _vsr("pause", "--platform-study", made[1], "--study", "nope", *common, **env)
    assert r.returncode == 1 and r.stderr.strip() == "error: no study 'nope' (see `vsr study list`)"
    made_zh = subprocess.run(
        [
            VSR,
            "study",
            "create",
            "--file",
            str(ROOT / "studies" / "vsr-zh.toml"),
            "--database-url",
            db_url,
        ],
        capture_output=True,
        text=True,
    )
    assert made_zh.returncode == 0, made_zh.stderr
    r = _vsr("pause", "--platform-study", made[1], "--study", "vsr-zh", *common, **env)
    assert r.returncode == 1 and r.stderr.strip() == (
        f"error: prolific study {made[1]} does not belong to study 'vsr-zh'"
    )
    r = _vsr("pause", "--platform-study", made[1], "--study", "vsr", *common, **env)
    assert r.returncode == 0 and "paused" in r.stdout, r.stderr
    assert [s["status"] for s in state.studies.values()] == ["UNPUBLISHED", "PAUSED"]
    r = _vsr("pause", "--platform-study", made[0], *common, **env)
    assert r.returncode == 1 and r.stderr.strip() == (
        "error: cannot pause a draft study (it can: publish)"
    )
    r = _vsr("resume", "--platform-study", made[1], *common, **env)
    assert r.returncode == 0 and r.stdout.strip() == f"prolific study {made[1]}: published"
    assert [s["status"] for s in state.studies.values()] == ["UNPUBLISHED", "ACTIVE"]
    # No stated duration and nobody measured yet: the pay is unknown, publishing refused.
    r = _vsr(
        "create",
        "--platform",
        "prolific",
        "--reward-cents",
        "5000",
        "--places",
        "1",
        "--database-url",
        db_url,
        **env,
    )
    assert "effective pay unknown (£50.00 for 200 items" in r.stdout, r.stderr
    r = _vsr("publish", "--platform-study", r.stdout.split()[3], *common, **env)
    assert r.returncode == 1 and "state the expected duration (--expected-minutes)" in r.stderr
    r = _vsr(
        "create",
        "--platform",
        "prolific",
        "--reward-cents",
        "5",
        "--places",
        "1",
        "--study",
        "nope",
        "--database-url",
        db_url,
        **env,
    )
    assert r.returncode == 1 and r.stderr.strip() == "error: no study 'nope' (see `vsr study list`)"


def test_reconcile(db_url: str, engine: Engine, fake: tuple[str, State]) -> None:
    url, state = fake
    state.studies["st1"] = {"id": "st1", "status": "ACTIVE"}
    state.add_submission("st1", "s1", "p1", "APPROVED")
    with Session(engine) as session:
        study = PlatformStudy(platform="prolific", external_id="st1", state="published")
        session.add(study)
        session.commit()
        session.add(
            PlatformSubmission(
                platform_study_id=study.id or 0,
                platform="prolific",
                external_id="s1",
                worker_external_id="p1",
                status="APPROVED",
            )
        )
        session.add(
            PlatformAction(
                platform_study_id=study.id or 0,
                platform="prolific",
                kind="approve",
                target="s1",
                idempotency_key="k1",
                state="done",
            )
        )
        session.commit()
        sid = str(study.id)
    common = ["--platform", "prolific", "--platform-study", sid, "--database-url", db_url]
    env = {"PROLIFIC_API_TOKEN": TOKEN, "PROLIFIC_BASE_URL": url}
    r = _vsr("reconcile", *common, **env)
    assert (r.returncode, r.stdout) == (0, "the ledger agrees with prolific\n"), r.stderr
    state.add_submission("st1", "s2", "p2", "APPROVED")  # approved by hand on Prolific
    r = _vsr("reconcile", *common, **env)
    assert r.returncode == 1
    assert r.stdout.splitlines() == ["s2: APPROVED on prolific, not in the ledger (not synced)"]
    assert r.stderr.strip() == "error: 1 mismatches between the ledger and prolific"


def test_override_minutes(db_url: str, engine: Engine, fake: tuple[str, State]) -> None:
    """A stated 10 min against a measured 90: publishing is refused until the owner
    overrides, with a reason; the override is audited and shown in the pay line."""
    from tests.webapp.platforms.test_drafts import _batches

    url, state = fake
    state.studies["st9"] = {"id": "st9", "status": "UNPUBLISHED"}
    with Session(engine) as session:
        site = default_study(session)
        _batches(session, site.id or 0, [10.8] * 5, "prolific", 6)
        study = PlatformStudy(
            study_id=site.id or 0,
            platform="prolific",
            external_id="st9",
            state="draft",
            settings={
                "kind": "generate",
                "reward_cents": 150,
                "batch_items": 500,
                "stated_minutes": 10,
            },
        )
        session.add(study)
        session.commit()
        sid = str(study.id)
    common = ["--platform", "prolific", "--platform-study", sid, "--database-url", db_url]
    env = {"PROLIFIC_API_TOKEN": TOKEN, "PROLIFIC_BASE_URL": url}
    r = _vsr("publish", *common, **env)
    assert (
        r.returncode == 1
        and "the stated 10 min is shorter and needs an owner's override" in r.stderr
    )
    r = _vsr("override-minutes", *common, "--minutes", "10", "--reason", "   ")
    assert r.returncode == 1 and r.stderr.strip() == "error: an override needs a reason"
    r = _vsr("override-minutes", *common, "--minutes", "10", "--reason", "pilot was cut short")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("effective pay £9.00/h (£1.50 for 10.0 min; stated duration, ")
    assert "overridden by owner cli:" in r.stdout and ": pilot was cut short" in r.stdout
    with Session(engine) as session:
        event = session.exec(
            select(AuditEvent).where(AuditEvent.kind == AuditKind.platform_override)
        ).one()
        assert event.via == "cli" and event.target == f"platform study {sid}"
    r = _vsr("publish", *common, **env)
    assert r.returncode == 0, r.stderr
    assert state.studies["st9"]["status"] == "ACTIVE"
