"""vsr_core.agreement_db loads Examples with their votes in one query, on both backends."""

from __future__ import annotations

from sqlalchemy import event
from sqlalchemy.engine import Engine
from sqlmodel import Session

from vsr_core.agreement import dataset_agreement
from vsr_core.agreement_db import iter_item_votes, load_item_votes
from vsr_core.models import Example, Image, Vote, Worker
from vsr_core.tables import EXAMPLE


def _seed(session: Session) -> list[int]:
    img = Image(coco_id=1, file_name="000000000001.jpg", coco_split="val2017", width=1, height=1)
    workers = [Worker(source="invite", external_id=f"w{i}", roles=["validator"]) for i in range(4)]
    session.add(img)
    session.add_all(workers)
    session.flush()
    ids = []
    plan = [(True, [1, 1, 0]), (False, [0, 0, 0, 1]), (True, [])]
    for k, (label, values) in enumerate(plan):
        assert img.id is not None
        ex = Example(
            image_id=img.id,
            caption=f"The cat is on the dog {k}.",
            relation="on",
            subj="cat",
            obj=f"dog {k}",
            label=label,
            origin="human",
        )
        session.add(ex)
        session.flush()
        assert ex.id is not None
        ids.append(ex.id)
        for w, v in zip(workers, values, strict=False):
            assert w.id is not None
            session.add(Vote(example_id=ex.id, worker_id=w.id, value=bool(v)))
    session.commit()
    return ids


def test_load_item_votes_groups_votes_in_one_query(engine: Engine, session: Session) -> None:
    ids = _seed(session)
    queries: list[str] = []

    def count(*args: object) -> None:
        queries.append(str(args[2]))

    event.listen(engine, "before_cursor_execute", count)
    try:
        items = load_item_votes(engine)
    finally:
        event.remove(engine, "before_cursor_execute", count)
    assert len([q for q in queries if q.lstrip().upper().startswith("SELECT")]) == 1
    assert [it.item for it in items] == ids
    assert [it.values for it in items] == [[True, True, False], [False, False, False, True], []]
    assert [it.label for it in items] == [True, False, True]
    assert all(it.relation == "on" for it in items)
    summary = dataset_agreement(items)
    assert (summary.n_items, summary.n_votes, summary.n_kept, summary.n_unanimous) == (3, 7, 2, 0)


def test_filters(engine: Engine, session: Session) -> None:
    ids = _seed(session)
    only = load_item_votes(session, example_ids=[ids[1]])
    assert [it.item for it in only] == [ids[1]]
    session.rollback()  # SQLite: every transaction takes the write lock (BEGIN IMMEDIATE)
    with engine.connect() as conn:
        trues = list(iter_item_votes(conn, where=[EXAMPLE.c.label.is_(True)]))
    assert [it.item for it in trues] == [ids[0], ids[2]]
