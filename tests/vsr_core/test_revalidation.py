"""Re-validating an imported release (docs/dataset.md): `vsr revalidate` and the dashboard
open a seeded sample of imported Examples for fresh votes through the real validation queue,
the imported votes stay apart (the original keep rule, exports and kept counts unchanged),
and the report compares fresh and original judgements (accuracy, Cohen's and Fleiss' kappa)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, func, select

from tests.support.admin_seed import RAW
from tests.webapp.admin.test_admin import admin, app  # noqa: F401  (fixtures)
from tests.webapp.validate.support import make_worker
from tests.webapp.validate.test_queue import judge, lease_for, strategy
from vsr_core.agreement import fleiss_kappa
from vsr_core.models import Example, Vote
from vsr_core.revalidation import report
from vsr_core.studies.settings import StudyConfig
from vsr_dataset.import_vsr import import_path
from webapp.validate import queue as vq

VENV_BIN = Path(sys.executable).parent


def _import_sample(engine: Engine, vsr_dir: Path, tmp_path: Path, every: int = 60) -> None:
    lines = (vsr_dir / RAW).read_text().splitlines()
    part = tmp_path / "all_vsr_raw_data.jsonl"
    part.write_text("\n".join(line for i, line in enumerate(lines) if i % every == 0) + "\n")
    import_path(engine, part)


def _vsr(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "VSR_DEBUG"}
    return subprocess.run(
        [str(VENV_BIN / "vsr"), *args], capture_output=True, text=True, env=env, timeout=120
    )


def _imported_votes(engine: Engine) -> dict[int, int]:
    with Session(engine) as s:
        rows = s.exec(
            select(Vote.example_id, func.count())
            .join(Example, col(Example.id) == Vote.example_id)
            .where(Example.origin == "imported")
            .group_by(col(Vote.example_id))
        ).all()
    return {int(e): int(n) for e, n in rows}


def test_revalidate_cli_fresh_votes_and_report(
    db_url: str, engine: Engine, vsr_dir: Path, tmp_path: Path
) -> None:
    _import_sample(engine, vsr_dir, tmp_path)
    before = _imported_votes(engine)
    r = _vsr(
        "revalidate", "--sample", "12", "--seed", "7", "--votes", "3", "--database-url", db_url
    )
    assert r.returncode == 0, r.stderr
    assert "opened 12 imported Examples for 3 fresh votes each" in r.stdout
    again = _vsr("revalidate", "--sample", "12", "--seed", "7", "--database-url", db_url)
    assert "opened 0" in again.stdout and "12 were already in this round" in again.stdout
    bad = _vsr("revalidate", "--sample", "5", "--relation", "nosuch", "--database-url", db_url)
    assert bad.returncode == 1 and bad.stderr.startswith("error: there are no imported")
    assert len(bad.stderr.strip().splitlines()) == 1
    with Session(engine) as s:
        copies = s.exec(select(Example).where(Example.origin == "revalidation")).all()
        parents = {c.parent_example_id: s.get(Example, c.parent_example_id) for c in copies}
    assert len(copies) == 12 and all(c.queue_open and c.target_votes == 3 for c in copies)
    assert all(
        p is not None and p.origin == "imported" and not p.queue_open for p in parents.values()
    )
    assert all(c.label == parents[c.parent_example_id].label for c in copies)  # type: ignore[union-attr]

    # Three fresh validators through the real queue: two answer the label, one the opposite.
    strat = strategy()
    with Session(engine) as s:
        for i, honest in enumerate((True, True, False)):
            w = make_worker(s, f"fresh-{i}", ["validate"])
            served: list[int] = []
            while (lease := lease_for(s, w, strat)) is not None:
                ex = s.get(Example, lease.example_id)
                assert ex is not None and lease.id is not None
                vq.record_vote(s, w, lease.id, ex.label if honest else not ex.label, strat)
                served.append(int(ex.id or 0))
            assert sorted(served) == sorted(int(c.id or 0) for c in copies)  # only copies
    # the imported votes are untouched
    assert _imported_votes(engine) == before
    cfg = StudyConfig()
    with Session(engine) as s:
        rep: dict[str, Any] = report(s, cfg)
    assert rep["round"] == "r1" and rep["judged"] == 12 and rep["fresh_votes"] == 36
    assert rep["vote_accuracy"]["fresh"]["share"] == pytest.approx(2 / 3)
    assert rep["majority_accuracy"]["fresh"]["share"] == 1.0
    assert rep["fleiss_kappa"]["fresh"] == pytest.approx(
        fleiss_kappa([[2, 1] if c.label else [1, 2] for c in copies])
    )
    # original figures from the imported votes of the same Examples, counted independently
    with Session(engine) as s:
        orig_agree = orig_n = 0
        orig_major, fresh_major = [], []
        for c in copies:
            values = s.exec(select(Vote.value).where(Vote.example_id == c.parent_example_id)).all()
            orig_n += len(values)
            orig_agree += sum(v == c.label for v in values)
            t = sum(values)
            if 2 * t != len(values):
                orig_major.append(2 * t > len(values))
                fresh_major.append(c.label)
    assert rep["vote_accuracy"]["original"]["share"] == pytest.approx(orig_agree / orig_n)
    from sklearn.metrics import cohen_kappa_score

    expected = (
        cohen_kappa_score(fresh_major, orig_major)
        if len(set(fresh_major) | set(orig_major)) > 1
        else None
    )
    if expected is None or expected != expected:  # undefined (one category only)
        assert rep["cohen_kappa_majorities"] is None
    else:
        assert rep["cohen_kappa_majorities"] == pytest.approx(expected)
    out = _vsr("revalidate", "--report", "--database-url", db_url)
    assert out.returncode == 0 and "round r1: 12 of 12 Examples have fresh votes" in out.stdout
    assert "Cohen's kappa, fresh vs original majority" in out.stdout
    as_json = json.loads(_vsr("revalidate", "--report", "--json", "--database-url", db_url).stdout)
    assert as_json["fresh_votes"] == 36


def test_revalidation_leaves_exports_and_kept_counts_alone(
    admin: tuple[TestClient, str],  # noqa: F811
    engine: Engine,
    vsr_dir: Path,
    tmp_path: Path,
) -> None:
    client, token = admin
    _import_sample(engine, vsr_dir, tmp_path, every=120)
    o_before = client.get("/admin/api/overview.json").json()
    q_before = client.get("/admin/api/quality.json").json()
    # a bad form stays in the admin layout with the error next to its field
    r = client.post("/admin/revalidation", data={"csrf_token": token, "sample": "0"})
    assert r.status_code == 422 and 'class="admin-nav"' in r.text
    assert re.search(r'id="err-sample">must be at least 1<', r.text)
    r = client.post(
        "/admin/revalidation",
        data={
            "csrf_token": token,
            "sample": "8",
            "seed": "1",
            "votes": "3",
            "round_name": "pool-b",
        },
        follow_redirects=False,
    )
    assert r.status_code == 303 and "round=pool-b" in r.headers["location"]
    with Session(engine) as s:
        copies = s.exec(select(Example).where(Example.origin == "revalidation")).all()
        w = make_worker(s, "fresh", ["validate"])
        strat = strategy()
        while judge(s, w, strat, True) is not None:
            pass
    assert len(copies) == 8
    o_after = client.get("/admin/api/overview.json").json()
    q_after = client.get("/admin/api/quality.json").json()
    for key in ("kept", "rejected", "examples"):
        assert o_after[key] == o_before[key], key
    assert q_after["kept_share"] == q_before["kept_share"]
    assert q_after["fleiss_kappa"] == q_before["fleiss_kappa"]
    from vsr_dataset.export import BuildOptions, build_dataset

    summary = build_dataset(
        engine, tmp_path / "out", BuildOptions(only=frozenset({"raw", "stats"}))
    )
    assert summary.n_raw == o_before["examples"]
    page = client.get("/admin/revalidation?round=pool-b")
    assert page.status_code == 200 and "round pool-b" in page.text
    assert "8 of 8 sampled Examples have fresh votes" in re.sub(r"<[^>]+>", "", page.text)
    j = client.get("/admin/api/revalidation.json", params={"round": "pool-b"}).json()
    assert j["vote_accuracy"]["fresh"]["n"] == 8
