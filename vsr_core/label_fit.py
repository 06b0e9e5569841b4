"""Label models in the loop: fit Dawid-Skene and MACE (crowd-kit) on a study's votes and cache
what they decide, so every count can use them as the keep rule (vsr_core.kept).

A fit stores, per model, the model's label for every voted Example (``LabelModelDecision``),
its estimate of every validator (``LabelModelWorker``: Dawid-Skene's accuracy, MACE's
competence) and what it saw (``LabelModelFit``: the study's vote count and largest vote id).
Fits are made on demand (``vsr label-models fit``, or the dashboard's button), never on a
vote: a fit over the VSR release takes seconds, a vote milliseconds. Between fits the cached
labels are stale by the votes that arrived since; ``fit_states`` says by how many, and the
dashboard shows it wherever a label model decides. Re-validation copies are left out, as in
every count.
"""

from __future__ import annotations

import time
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import delete, func, select
from sqlmodel import Session

from vsr_core import audit
from vsr_core.agreement import ItemVotes
from vsr_core.agreement_db import load_item_votes
from vsr_core.locks import hold
from vsr_core.models import AuditKind, KeepRule
from vsr_core.tables import (
    EXAMPLE,
    LABEL_MODEL_DECISION,
    LABEL_MODEL_FIT,
    LABEL_MODEL_WORKER,
    VOTE,
)
from vsr_core.types import utcnow
from vsr_core.upsert import upsert

MODELS: tuple[str, ...] = (KeepRule.dawid_skene.value, KeepRule.mace.value)
SKILL_NAMES = {
    KeepRule.dawid_skene.value: "accuracy",
    KeepRule.mace.value: "competence",
}
REVALIDATION = "revalidation"


class LabelFitError(ValueError):
    """A fit that cannot run (unknown model, no votes); the message is meant for a person."""


@dataclass(frozen=True)
class Fitted:
    labels: dict[Hashable, tuple[bool, float]]  # item -> (label, posterior of that label)
    skills: dict[Hashable, tuple[float, int]]  # worker -> (skill, votes)


def fit_model(items: Sequence[ItemVotes], model: str, seed: int = 0) -> Fitted:
    """Fit one label model on these Examples' votes (the writers' labels are not used)."""
    if model not in MODELS:
        raise LabelFitError(f"unknown label model {model!r}: use {' or '.join(MODELS)}")
    voted = [it for it in items if it.votes]
    if not voted:
        return Fitted({}, {})
    import pandas as pd
    from crowdkit.aggregation import MACE, DawidSkene

    rows = [(i, str(w), int(v)) for i, it in enumerate(voted) for w, v in it.votes]
    df = pd.DataFrame(rows, columns=["task", "worker", "label"]).drop_duplicates(
        ["task", "worker"]  # crowd-kit wants one label per (task, worker)
    )
    workers = {str(w): w for it in voted for w, _ in it.votes}
    counts = df.groupby("worker").size().to_dict()
    skills: dict[Hashable, tuple[float, int]] = {}
    if model == KeepRule.dawid_skene.value:
        ds = DawidSkene(n_iter=100).fit(df)
        proba = ds.probas_
        errors, priors = ds.errors_, ds.priors_
        if errors is None or priors is None:
            return Fitted({}, {})
        for name in errors.index.get_level_values(0).unique():
            conf = errors.loc[name]
            acc = 0.0
            for k in (0, 1):
                if k in conf.index and k in conf.columns:
                    acc += float(priors.get(k, 0.0)) * float(conf.at[k, k])
            skills[workers[str(name)]] = (acc, int(counts.get(name, 0)))
    else:
        mace = MACE(n_restarts=3, n_iter=50, random_state=seed).fit(df)
        proba = mace.probas_
        # crowd-kit indexes its per-worker arrays by pandas.factorize of the worker column.
        _, names = pd.factorize(df["worker"])
        spam = mace.spamming_
        for k, name in enumerate(names):
            total = float(spam[k].sum()) or 1.0
            skills[workers[str(name)]] = (float(spam[k][1]) / total, int(counts.get(name, 0)))
    if proba is None:
        return Fitted({}, skills)
    proba = proba.reindex(columns=[0, 1], fill_value=0.0)
    labels: dict[Hashable, tuple[bool, float]] = {}
    for task, p0, p1 in zip(proba.index, proba[0], proba[1], strict=True):
        item = voted[int(task)]
        # A tie (no information either way) keeps the writer's label.
        lab = bool(p1 > p0) if p1 != p0 else bool(item.label)
        labels[item.item] = (lab, float(max(p0, p1)))
    return Fitted(labels, skills)


@dataclass(frozen=True)
class FitSummary:
    model: str
    examples: int
    workers: int
    votes: int
    seconds: float


def _study_votes(session: Session, study_id: int) -> tuple[int, int]:
    row = (
        session.connection()
        .execute(
            select(func.count(), func.coalesce(func.max(VOTE.c.id), 0))
            .select_from(VOTE.join(EXAMPLE, EXAMPLE.c.id == VOTE.c.example_id))
            .where(EXAMPLE.c.study_id == study_id, EXAMPLE.c.origin != REVALIDATION)
        )
        .one()
    )
    return int(row[0]), int(row[1])


def fit_study(
    session: Session,
    study_id: int,
    models: Iterable[str] = MODELS,
    seed: int = 0,
    actor: audit.Actor | None = None,
) -> list[FitSummary]:
    """Fit each model on the study's votes and replace its cached decisions; commits once,
    with the fit's record in the audit trail when an ``actor`` did it (a fit changes the
    counts under a label-model keep rule)."""
    wanted = list(dict.fromkeys(models))
    for m in wanted:
        if m not in MODELS:
            raise LabelFitError(f"unknown label model {m!r}: use {' or '.join(MODELS)}")
    # Every row is written by upsert, so two fits at once cannot collide on a key
    # (labelmodelfit_pkey). They still take turns, so the cached rows are one fit's whole
    # set: interleaved, an Example only the earlier fit labelled would keep its row.
    # SQLite serialises writers anyway.
    hold(session, f"label-fit:{study_id}")
    votes, last_id = _study_votes(session, study_id)
    items = load_item_votes(
        session,
        where=[EXAMPLE.c.study_id == study_id, EXAMPLE.c.origin != REVALIDATION],
    )
    conn = session.connection()
    out = []
    for model in wanted:
        started = time.perf_counter()
        fitted = fit_model(items, model, seed)
        for table in (LABEL_MODEL_DECISION, LABEL_MODEL_WORKER):
            conn.execute(delete(table).where(table.c.study_id == study_id, table.c.model == model))
        decisions = [
            {
                "model": model,
                "example_id": int(str(eid)),
                "study_id": study_id,
                "label": lab,
                "confidence": conf,
            }
            for eid, (lab, conf) in fitted.labels.items()
        ]
        for k in range(0, len(decisions), 5000):
            upsert(conn, LABEL_MODEL_DECISION, decisions[k : k + 5000])
        skills = [
            {"study_id": study_id, "model": model, "worker_id": int(str(w)), "skill": s, "votes": n}
            for w, (s, n) in fitted.skills.items()
        ]
        for k in range(0, len(skills), 5000):
            upsert(conn, LABEL_MODEL_WORKER, skills[k : k + 5000])
        fit_row = {
            "study_id": study_id,
            "model": model,
            "fitted_at": utcnow(),
            "votes": votes,
            "last_vote_id": last_id,
            "examples": len(decisions),
            "workers": len(skills),
        }
        upsert(conn, LABEL_MODEL_FIT, [fit_row])
        out.append(
            FitSummary(model, len(decisions), len(skills), votes, time.perf_counter() - started)
        )
    if actor is not None:
        audit.record(
            session,
            actor,
            AuditKind.label_fit,
            study_id=study_id,
            target=", ".join(wanted),
            change={"after": {f.model: {"examples": f.examples, "votes": f.votes} for f in out}},
        )
    session.commit()
    return out


@dataclass(frozen=True)
class FitState:
    model: str
    fitted_at: datetime | None  # None: never fitted
    votes_at_fit: int
    votes_now: int
    examples: int

    @property
    def fitted(self) -> bool:
        return self.fitted_at is not None

    @property
    def new_votes(self) -> int:
        """Votes the fit has not seen (0: up to date)."""
        return max(0, self.votes_now - self.votes_at_fit)

    @property
    def stale(self) -> bool:
        return not self.fitted or self.votes_now != self.votes_at_fit


def study_vote_count(session: Session, study_id: int) -> int:
    """The study's votes as a fit counts them (a join of every vote: ~1 s at 100x, so the
    dashboard keeps it in its figure cache and passes it to ``fit_states``)."""
    return _study_votes(session, study_id)[0]


def fit_states(
    session: Session, study_id: int, votes_now: int | None = None
) -> dict[str, FitState]:
    """Each model's last fit on the study and how many votes arrived since (``votes_now``:
    the study's votes if the caller knows them, else counted here)."""
    if votes_now is None:
        votes_now = study_vote_count(session, study_id)
    rows = {
        str(r.model): r
        for r in session.connection().execute(
            select(LABEL_MODEL_FIT).where(LABEL_MODEL_FIT.c.study_id == study_id)
        )
    }
    out = {}
    for model in MODELS:
        r: Any = rows.get(model)
        out[model] = FitState(
            model,
            r.fitted_at if r is not None else None,
            int(r.votes) if r is not None else 0,
            votes_now,
            int(r.examples) if r is not None else 0,
        )
    return out


def load_model_labels(bind: Any, study_id: int, model: str) -> dict[int, bool]:
    """A model's cached label per Example of the study (empty: never fitted)."""
    return {
        int(eid): bool(lab)
        for eid, lab in bind.execute(
            select(LABEL_MODEL_DECISION.c.example_id, LABEL_MODEL_DECISION.c.label).where(
                LABEL_MODEL_DECISION.c.study_id == study_id,
                LABEL_MODEL_DECISION.c.model == model,
            )
        )
    }


def worker_skills(session: Session, study_id: int) -> dict[int, dict[str, float]]:
    """worker id -> model -> its estimated skill at the model's last fit."""
    out: dict[int, dict[str, float]] = {}
    for wid, model, skill in session.connection().execute(
        select(
            LABEL_MODEL_WORKER.c.worker_id, LABEL_MODEL_WORKER.c.model, LABEL_MODEL_WORKER.c.skill
        ).where(LABEL_MODEL_WORKER.c.study_id == study_id)
    ):
        out.setdefault(int(wid), {})[str(model)] = float(skill)
    return out
