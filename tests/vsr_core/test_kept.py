"""Kept counts agree everywhere: the dashboard overview, the quality page, stats.json and the
dataset card count the same Examples as kept, on the same database, and the SQL keep rule
keeps what the Python one keeps.

The data: a stratified sample of the real VSR release (imported, settled) plus human
Examples the validation queue is still working on (a 2-1 waiting for its fourth vote, a
3-0, a 1-2, one with no votes yet), which is where the four figures used to disagree.
"""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Integer, case, literal, union_all
from sqlalchemy import select as sql_select
from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from tests.support.admin_seed import add_vote, read_raw, seed, vote_list
from tests.webapp.admin.test_admin import admin, app  # noqa: F401  (fixtures)
from vsr_core.agreement import Threshold, as_fraction, is_kept, keep_rule
from vsr_core.kept import kept_clause, kept_counts
from vsr_core.models import Example, Worker
from vsr_dataset.export import BuildOptions, build_dataset


def _add_open_examples(engine: Engine) -> None:
    with Session(engine) as s:
        image_id = s.exec(select(Example.image_id)).first()
        assert image_id is not None
        validators = []
        for i in range(3):
            w = Worker(source="invite", external_id=f"kept-v{i}", roles=["validate"])
            s.add(w)
            validators.append(w)
        s.flush()
        for label, votes in (
            (True, (True, True, False)),
            (True, (True,) * 3),
            (False, (True, True, False)),
            (True, ()),
        ):
            ex = Example(
                image_id=image_id,
                caption="The cat is near the dog.",
                relation="near",
                subj="cat",
                obj="dog",
                label=label,
                origin="human",
            )
            s.add(ex)
            s.flush()
            for w, value in zip(validators, votes, strict=False):
                add_vote(s, ex.id, w.id, value)  # type: ignore[arg-type]
        s.commit()


def test_kept_counts_agree_on_dashboard_stats_and_card(
    admin: tuple[TestClient, str],  # noqa: F811
    engine: Engine,
    vsr_dir: Path,
    tmp_path: Path,  # noqa: F811
) -> None:
    client, _ = admin
    recs = read_raw(vsr_dir, every=80)
    seed(engine, recs)
    _add_open_examples(engine)
    # Independent count: vsr_core.agreement.is_kept per Example (release + the four added).
    expected = sum(is_kept(bool(r["label"]), [v for _, v in vote_list(r)]) for r in recs) + 2
    voted = sum(1 for r in recs if vote_list(r)) + 3

    o = client.get("/admin/api/overview.json").json()
    q = client.get("/admin/api/quality.json").json()
    build_dataset(engine, tmp_path / "out", BuildOptions(only=frozenset({"stats", "card"})))
    stats: dict[str, Any] = json.loads((tmp_path / "out" / "stats.json").read_text())
    card = (tmp_path / "out" / "README.md").read_text()

    assert o["kept"] == q["kept"] == stats["n_validated"] == expected
    assert o["rejected"] == q["rejected"] == voted - expected
    assert o["undecided"] >= 4 and o["provisional"] == 3  # the queue still works on them
    assert q["kept_share"] == stats["kept_share"] == expected / voted
    assert f"{expected:,} ({100 * expected / voted:.1f}% of {voted:,} with votes" in card
    page = client.get("/admin").text
    assert f'data-key="kept">{expected}<' in page
    assert f"{100 * expected / voted:.1f}%" in client.get("/admin/quality").text


def test_kept_counts_histogram() -> None:
    c = kept_counts([(2, 3, 5), (1, 3, 2), (0, 0, 4), (3, 3, 1), (2, 4, 1)], Fraction(2, 3))
    assert (c.examples, c.voted, c.kept, c.rejected, c.unvoted, c.unanimous) == (13, 9, 6, 3, 4, 1)


@pytest.mark.parametrize("threshold", [Fraction(2, 3), 0.6667, 0.5, 0.6, 0.75, Fraction(4, 5), 1])
def test_sql_keep_rule_keeps_what_python_keeps(engine: Engine, threshold: Threshold) -> None:
    counts = [(a, n) for n in range(10) for a in range(n + 1)]
    rows = (
        sql_select(literal(a, Integer).label("agree"), literal(n, Integer).label("n"))
        for a, n in counts
    )
    h = union_all(*rows).subquery("h")  # a VALUES list SQLite can read
    kept = case((kept_clause(h.c.agree, h.c.n, threshold), 1), else_=0)
    with engine.connect() as conn:
        got = {(int(a), int(n)): bool(k) for a, n, k in conn.execute(sql_select(h, kept))}
    rule = keep_rule(threshold)
    assert got == {(a, n): rule(a, n) for a, n in counts}
    assert got[(2, 3)] is (as_fraction(threshold) <= Fraction(2, 3)) and not got[(0, 0)]
