"""Two applies of the same plan at once (a double click, the CLI beside the page) on the fake
Prolific and a real database: every approve, reject and bonus reaches Prolific exactly once,
and neither apply fails with 'database is locked' on SQLite."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sqlalchemy import Engine
from sqlmodel import Session, select

from tests.support import platform_work as work
from tests.support.fake_prolific import TOKEN, State
from vsr_core.db import make_engine
from vsr_core.models import PlatformAction, PlatformLedger, PlatformStudy
from webapp.platforms.engine import Rules, apply, plan, sync
from webapp.platforms.prolific import ProlificPlatform

N = 20  # participants: even ones wrote a caption (approve + bonus), odd ones nothing (reject)


def _planned_study(engine: Engine, url: str, state: State, n: int = N) -> int:
    p = ProlificPlatform(base_url=url, token=TOKEN)
    ext = p.create_draft(
        {
            "name": "s",
            "external_study_url": "https://x/start",
            "total_available_places": n,
            "reward": 100,
            "estimated_completion_time": 5,
        },
        "m",
    )
    with Session(engine) as session:
        scene = work.scene(session)
        for i in range(n):
            w = work.worker(session, f"p{i}")
            state.add_submission(ext, f"s{i}", f"p{i}", "AWAITING REVIEW")
            if i % 2 == 0:
                b = work.batch(session, w, work.prolific_entry(ext, f"s{i}"))
                work.captions(session, b, scene, kept=1)
        study = PlatformStudy(platform="prolific", external_id=ext)
        session.add(study)
        session.commit()
        sync(session, p, study, {})
        added = plan(session, study, Rules(min_items=1, bonus_cents_per_kept=25))
        assert len(added) == n + n // 2
        return study.id or 0


def _forget_plan(engine: Engine) -> None:
    """Delete the plan and the ledger it wrote (the ledger first: it names the actions)."""
    with Session(engine) as session:
        for table in (PlatformLedger, PlatformAction):
            for row in session.exec(select(table)):
                session.delete(row)
            session.commit()


def _at_once(
    k: int, job: Callable[[Session, PlatformStudy], Any], engine: Engine, study_id: int
) -> list[Any]:
    """Run ``job`` in ``k`` threads released together; their results (errors raised)."""
    start = threading.Barrier(k)
    results: list[Any] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            with Session(engine) as session:
                study = session.get(PlatformStudy, study_id)
                assert study is not None
                # On SQLite even a read holds the write lock (BEGIN IMMEDIATE): end it, or
                # the other threads wait here for the whole busy timeout.
                session.commit()
                start.wait(60)
                results.append(job(session, study))
        except BaseException as exc:  # reported below, with the thread's error
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(k)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(180)
    assert not errors, errors
    return results


def test_eight_applies_at_once_pay_each_payment_once(pg_url: str, fake: tuple[str, State]) -> None:
    """Eight plans, then eight applies of the same platform study at once on PostgreSQL:
    every decision and every bonus reaches Prolific once, and the ledger holds each unit
    once."""
    url, state = fake
    engine = make_engine(pg_url)
    study_id = _planned_study(engine, url, state)
    _forget_plan(engine)  # and plan it again, several at once
    rules = Rules(min_items=1, bonus_cents_per_kept=25)
    added = _at_once(8, lambda s, st: len(plan(s, st, rules)), engine, study_id)
    assert sum(added) == N + N // 2
    results = _at_once(
        8, lambda s, st: apply(s, ProlificPlatform(base_url=url, token=TOKEN), st), engine, study_id
    )
    assert sum(r["done"] for r in results) == N + N // 2
    sent = Counter(path for method, path in state.received if method == "POST")
    assert (
        sorted(
            n
            for p, n in sent.items()
            if p.endswith("/transition/") and p.startswith("/api/v1/submissions/")
        )
        == [1] * N
    )
    assert sent["/api/v1/submissions/bonus-payments/"] == N // 2
    assert sum(n for p, n in sent.items() if p.endswith("/pay/")) == N // 2
    assert sorted(state.paid) == sorted((f"p{i}", 0.25) for i in range(0, N, 2))
    with Session(engine) as session:
        ledger = session.exec(select(PlatformLedger)).all()
        assert len(ledger) == N // 2 and sum(r.cents for r in ledger) == 25 * (N // 2)
    engine.dispose()


def test_two_applies_at_once_send_each_action_once(engine: Engine, fake: tuple[str, State]) -> None:
    url, state = fake
    study_id = _planned_study(engine, url, state)
    results = _at_once(
        2, lambda s, st: apply(s, ProlificPlatform(base_url=url, token=TOKEN), st), engine, study_id
    )
    assert sum(r["done"] for r in results) == N + N // 2
    assert sum(r["failed"] for r in results) == 0
    sent = Counter(path for method, path in state.received if method == "POST")
    transitions = {
        p: n
        for p, n in sent.items()
        if p.endswith("/transition/") and p.startswith("/api/v1/submissions/")
    }
    assert len(transitions) == N and set(transitions.values()) == {1}
    assert sent["/api/v1/submissions/bonus-payments/"] == N // 2
    assert sorted(state.paid) == sorted((f"p{i}", 0.25) for i in range(0, N, 2))
    assert Counter(s for _, s in state.transitions) == {"APPROVED": N // 2, "REJECTED": N // 2}
    with Session(engine) as session:
        assert {a.state for a in session.exec(select(PlatformAction))} == {"done"}


def test_the_cli_beside_another_apply_sends_each_action_once(
    db_url: str, engine: Engine, fake: tuple[str, State]
) -> None:
    """`vsr platform apply` in its own process while this process applies the same plan
    (the fake answers slowly, so the two overlap)."""
    url, state = fake
    study_id = _planned_study(engine, url, state)
    state.slow = 0.05
    vsr = str(Path(sys.executable).parent / "vsr")
    cli = subprocess.Popen(
        [
            vsr,
            "platform",
            "apply",
            "--platform",
            "prolific",
            "--platform-study",
            str(study_id),
            "--database-url",
            db_url,
        ],
        env={**os.environ, "PROLIFIC_API_TOKEN": TOKEN, "PROLIFIC_BASE_URL": url},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    with Session(engine) as session:
        study = session.get(PlatformStudy, study_id)
        assert study is not None
        here = apply(session, ProlificPlatform(base_url=url, token=TOKEN), study)
    out, err = cli.communicate(timeout=120)
    assert cli.returncode == 0, err
    there = re.fullmatch(r"(\d+) done, 0 failed", out.strip())
    assert there, out + err
    assert here["failed"] == 0 and here["done"] + int(there.group(1)) == N + N // 2
    sent = Counter(path for method, path in state.received if method == "POST")
    assert (
        sorted(
            n
            for p, n in sent.items()
            if p.endswith("/transition/") and p.startswith("/api/v1/submissions/")
        )
        == [1] * N
    )
    assert sent["/api/v1/submissions/bonus-payments/"] == N // 2
    assert len(state.paid) == N // 2


def test_two_plans_at_once_plan_each_action_once(engine: Engine, fake: tuple[str, State]) -> None:
    url, state = fake
    study_id = _planned_study(engine, url, state)
    _forget_plan(engine)  # two pages plan it again at once
    rules = Rules(min_items=1, bonus_cents_per_kept=25)
    added = _at_once(2, lambda s, st: len(plan(s, st, rules)), engine, study_id)
    assert sum(added) == N + N // 2
    with Session(engine) as session:
        assert len(session.exec(select(PlatformAction)).all()) == N + N // 2
