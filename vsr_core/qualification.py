"""The qualification check: which items a worker's try shows, how it is scored, and whether a
worker may have a batch of a task (docs/studies.md, "Qualification").

A study file's ``[qualification.<kind>]`` names the items (the first language's worked
examples, ``e<index>``, and/or the study's gold Examples, ``g<id>``), how many a try shows,
the pass threshold and the number of tries. The items of a try are drawn from a seed of
(study, worker, kind, try), so the page and the server that scores it agree without storing
anything until the answers come back; the known answers stay here, never in a page.

The page names an item by an opaque id, an HMAC of (study, worker, kind, try, item) under the
server's key: ``g<id>`` would tell a candidate which Examples are gold, and an HMAC needs no
row stored before the answers come back. Another worker's or another try's ids do not verify.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import random
import re
from dataclasses import dataclass
from enum import StrEnum

from sqlalchemy import Integer, func, true
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from vsr_core.models import Batch, Example, QualificationAttempt
from vsr_core.studies.definition import StudyDefinition, TaskQualification

# 16 bytes of HMAC-SHA256, base64url without padding.
OPAQUE_ID = re.compile(r"[A-Za-z0-9_-]{22}")


class QualState(StrEnum):
    not_required = "not_required"  # no check for this task, or a worker from before it
    passed = "passed"
    pending = "pending"  # tries left
    failed = "failed"  # every try used, none passed


@dataclass(frozen=True)
class Item:
    id: str  # "e2" or "g41"
    answer: bool
    caption: str
    example_id: int | None = None  # gold items: the Example shown


@dataclass(frozen=True)
class Status:
    state: QualState
    used: int = 0  # tries stored
    allowed: int = 0
    last: QualificationAttempt | None = None

    @property
    def next_attempt(self) -> int:
        return self.used + 1


class QualificationError(ValueError):
    """A submitted try that cannot be scored (plain words for the worker)."""


def requirement(definition: StudyDefinition, kind: str) -> TaskQualification | None:
    return definition.qualification.for_kind(kind)


def pool(
    session: Session, study_id: int, definition: StudyDefinition, task: TaskQualification
) -> list[Item]:
    """Every item a try of ``task`` may draw, in a stable order."""
    items: list[Item] = []
    if "examples" in task.items:
        for i, ex in enumerate(definition.default_language.texts.examples):
            items.append(Item(f"e{i}", ex.label, ex.caption))
    if "gold" in task.items:
        rows = session.exec(
            select(Example.id, Example.caption, Example.gold_label)
            .where(
                Example.study_id == study_id,
                col(Example.is_gold) == true(),
                col(Example.gold_label).is_not(None),
            )
            .order_by(col(Example.id))
        ).all()
        items += [Item(f"g{i}", bool(label), str(c), int(i or 0)) for i, c, label in rows]
    return items


def draw(
    session: Session,
    study_id: int,
    definition: StudyDefinition,
    task: TaskQualification,
    worker_id: int,
    kind: str,
    attempt: int,
) -> list[Item]:
    """The items of one try: ``task.count`` of the pool (all of it when smaller), the same
    for the same (study, worker, kind, try), another draw for the next try."""
    items = pool(session, study_id, definition, task)
    rng = random.Random(f"qualification:{study_id}:{worker_id}:{kind}:{attempt}")
    return rng.sample(items, min(task.count, len(items)))


def attempts(
    session: Session, study_id: int, worker_id: int, kind: str
) -> list[QualificationAttempt]:
    return list(
        session.exec(
            select(QualificationAttempt)
            .where(
                QualificationAttempt.study_id == study_id,
                QualificationAttempt.worker_id == worker_id,
                QualificationAttempt.kind == kind,
            )
            .order_by(col(QualificationAttempt.attempt))
        ).all()
    )


def _had_batch(session: Session, study_id: int, worker_id: int, kind: str) -> bool:
    found = session.exec(
        select(func.count()).where(
            Batch.study_id == study_id, Batch.worker_id == worker_id, Batch.kind == kind
        )
    ).one()
    return int(found) > 0


def status(
    session: Session, study_id: int, definition: StudyDefinition, worker_id: int, kind: str
) -> Status:
    """Where a worker stands with a task's check. A worker who had a batch of the task
    before the study asked for a check is not asked for one now (it is for new workers)."""
    task = requirement(definition, kind)
    tries = attempts(session, study_id, worker_id, kind)
    if task is None:
        return Status(QualState.not_required, len(tries))
    last = tries[-1] if tries else None
    if any(t.passed for t in tries):
        return Status(QualState.passed, len(tries), task.attempts, last)
    if not tries and _had_batch(session, study_id, worker_id, kind):
        return Status(QualState.not_required)
    if len(tries) >= task.attempts:
        return Status(QualState.failed, len(tries), task.attempts, last)
    return Status(QualState.pending, len(tries), task.attempts, last)


def gold_shown(
    session: Session, study_id: int, definition: StudyDefinition, worker_id: int
) -> set[int]:
    """The gold Examples the worker's qualification tries showed them (every try stored, and
    the open one, whose page they may have seen): never their validation controls, since
    they know those answers. A worker not asked for a check saw none."""
    shown: set[int] = set()
    for kind in ("generate", "validate"):
        task = requirement(definition, kind)
        if task is None or "gold" not in task.items:
            continue
        st = status(session, study_id, definition, worker_id, kind)
        if st.state == QualState.not_required:
            continue
        last = st.used + 1 if st.state == QualState.pending else st.used
        for attempt in range(1, min(last, task.attempts) + 1):
            items = draw(session, study_id, definition, task, worker_id, kind, attempt)
            shown |= {i.example_id for i in items if i.example_id is not None}
    return shown


def may_work(
    session: Session, study_id: int, definition: StudyDefinition, worker_id: int, kind: str
) -> bool:
    return status(session, study_id, definition, worker_id, kind).state in (
        QualState.not_required,
        QualState.passed,
    )


def opaque_id(key: str, study_id: int, worker_id: int, kind: str, attempt: int, item: Item) -> str:
    """What the page calls ``item`` in this try: nothing in it names the Example."""
    message = f"qualification:{study_id}:{worker_id}:{kind}:{attempt}:{item.id}".encode()
    digest = hmac.new(key.encode(), message, hashlib.sha256).digest()[:16]
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def opaque_items(
    key: str, study_id: int, worker_id: int, kind: str, attempt: int, items: list[Item]
) -> dict[str, Item]:
    """Opaque id -> item, for every item of one try."""
    return {opaque_id(key, study_id, worker_id, kind, attempt, item): item for item in items}


def parse_answers(form: dict[str, str], items: dict[str, Item]) -> dict[str, bool]:
    """The answers of a try from form fields ``a_<opaque id>`` = ``true`` | ``false`` (ids
    of :func:`opaque_items`): every item drawn for this try answered, and nothing else.
    Returned by the items' own ids, which stay on the server."""
    answers: dict[str, bool] = {}
    for key, value in form.items():
        if not key.startswith("a_"):
            continue
        name = key[2:]
        item = items.get(name) if OPAQUE_ID.fullmatch(name) else None
        if item is None:
            raise QualificationError("An answer names an item that is not in this check.")
        if value not in ("true", "false"):
            raise QualificationError("Each answer must be True or False.")
        answers[item.id] = value == "true"
    if set(answers) != {item.id for item in items.values()}:
        raise QualificationError("Please answer every item of the check.")
    return answers


def submit(
    session: Session,
    study_id: int,
    task: TaskQualification,
    worker_id: int,
    kind: str,
    attempt: int,
    items: list[Item],
    answers: dict[str, bool],
) -> tuple[QualificationAttempt, bool]:
    """Score and store one try (committed); True when this call stored it. The same try sent
    again (a reload, a second tab) returns the stored row unchanged, whatever it holds: a
    try is scored once."""
    existing = _stored(session, study_id, worker_id, kind, attempt)
    if existing is not None:
        return existing, False
    score = sum(1 for item in items if answers[item.id] == item.answer)
    row = QualificationAttempt(
        study_id=study_id,
        worker_id=worker_id,
        kind=kind,
        attempt=attempt,
        score=score,
        shown=len(items),
        passed=score >= task.needed(len(items)),
        answers={k: answers[k] for k in sorted(answers)},
    )
    session.add(row)
    try:
        session.commit()
    except IntegrityError:  # the other tab's try landed first: that one counts
        session.rollback()
        stored = _stored(session, study_id, worker_id, kind, attempt)
        if stored is None:
            raise
        return stored, False
    return row, True


def _stored(
    session: Session, study_id: int, worker_id: int, kind: str, attempt: int
) -> QualificationAttempt | None:
    return session.exec(
        select(QualificationAttempt).where(
            QualificationAttempt.study_id == study_id,
            QualificationAttempt.worker_id == worker_id,
            QualificationAttempt.kind == kind,
            QualificationAttempt.attempt == attempt,
        )
    ).first()


def outcomes(
    session: Session,
    study_id: int,
    definition: StudyDefinition,
    worker_ids: list[int] | None = None,
) -> dict[int, dict[str, QualState]]:
    """worker id -> {kind: passed | failed | pending} for every worker who tried a check of
    the study (only ``worker_ids`` when given): passed once any try passed, failed once the
    study's number of tries is used (as the current definition says), pending before."""
    stmt = (
        select(
            QualificationAttempt.worker_id,
            QualificationAttempt.kind,
            func.count(),
            func.max(func.cast(col(QualificationAttempt.passed), Integer)),
        )
        .where(QualificationAttempt.study_id == study_id)
        .group_by(col(QualificationAttempt.worker_id), col(QualificationAttempt.kind))
    )
    if worker_ids is not None:
        stmt = stmt.where(col(QualificationAttempt.worker_id).in_(worker_ids))
    out: dict[int, dict[str, QualState]] = {}
    for worker_id, kind, tries, passed in session.exec(stmt).all():
        task = requirement(definition, str(kind))
        allowed = task.attempts if task is not None else int(tries)
        state = (
            QualState.passed
            if passed
            else QualState.failed
            if int(tries) >= allowed
            else QualState.pending
        )
        out.setdefault(int(worker_id), {})[str(kind)] = state
    return out


def pass_rates(
    session: Session, study_id: int, definition: StudyDefinition
) -> list[dict[str, object]]:
    """Per task with a check (or with tries stored): tries, workers who passed, failed or
    still have tries left, the pass rate over decided workers, and passes at the first try."""
    first = dict(
        session.exec(
            select(QualificationAttempt.kind, func.count())
            .where(
                QualificationAttempt.study_id == study_id,
                QualificationAttempt.attempt == 1,
                col(QualificationAttempt.passed) == true(),
            )
            .group_by(col(QualificationAttempt.kind))
        ).all()
    )
    tries = dict(
        session.exec(
            select(QualificationAttempt.kind, func.count())
            .where(QualificationAttempt.study_id == study_id)
            .group_by(col(QualificationAttempt.kind))
        ).all()
    )
    counts: dict[str, dict[QualState, int]] = {}
    for per_kind in outcomes(session, study_id, definition).values():
        for kind, state in per_kind.items():
            counts.setdefault(kind, {}).setdefault(state, 0)
            counts[kind][state] += 1
    rows: list[dict[str, object]] = []
    for kind in ("generate", "validate"):
        task = requirement(definition, kind)
        if task is None and kind not in tries:
            continue
        c = counts.get(kind, {})
        passed, failed = c.get(QualState.passed, 0), c.get(QualState.failed, 0)
        rows.append(
            {
                "kind": kind,
                "required": task is not None,
                "attempts": int(tries.get(kind, 0)),
                "workers": sum(c.values()),
                "passed": passed,
                "failed": failed,
                "pending": c.get(QualState.pending, 0),
                "pass_rate": passed / (passed + failed) if passed + failed else None,
                "first_try": int(first.get(kind, 0)),
            }
        )
    return rows
