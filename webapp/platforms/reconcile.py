"""The ledger against what the platform reports: each submission's status and the approve,
reject and bonuses the ledger says were sent, one line per mismatch.

The platform is read with no transaction open; nothing is written. Prolific documents no
listing of paid bonuses (its bonus API is "Set up bonuses" and "Pay bonuses" only,
https://docs.prolific.com/api-reference/bonuses), so there a bonus the ledger cannot settle
(its answer lost: sending, unknown) is reported for a person to check on Prolific; MTurk's
ListBonusPayments gives every bonus of the HIT, compared per assignment with the ledger.
"""

from __future__ import annotations

from collections import defaultdict

from sqlmodel import Session, col, select

from vsr_core.models import (
    PlatformAction,
    PlatformActionKind,
    PlatformActionState,
    PlatformStudy,
    PlatformSubmission,
)
from webapp.platforms.base import Platform
from webapp.platforms.drafts import CURRENCY

APPROVED = frozenset({"APPROVED", "Approved"})
REJECTED = frozenset({"REJECTED", "Rejected"})
# Sent, with no answer that settles it: the platform alone knows.
OPEN = frozenset({PlatformActionState.sending, PlatformActionState.unknown})


def _money(cents: int, platform: str) -> str:
    return f"{CURRENCY.get(platform, '')}{cents / 100:.2f}"


def reconcile(session: Session, platform: Platform, study: PlatformStudy) -> list[str]:
    """One line per mismatch between the ledger and the platform (none: they agree)."""
    name, external_id = study.platform, study.external_id
    subs = {
        s.external_id: s
        for s in session.exec(
            select(PlatformSubmission).where(PlatformSubmission.platform_study_id == study.id)
        )
    }
    actions = session.exec(
        select(PlatformAction)
        .where(PlatformAction.platform_study_id == study.id)
        .order_by(col(PlatformAction.id))
    ).all()
    session.commit()  # no transaction held across the platform's answers
    remote = {r.external_id: r for r in platform.sync_submissions(external_id)}
    listed = platform.bonuses_listed(external_id)
    out: list[str] = []
    done: dict[str, set[str]] = defaultdict(set)
    bonus_done: dict[str, int] = defaultdict(int)
    bonus_open: dict[str, list[PlatformAction]] = defaultdict(list)
    for a in actions:
        if a.kind == PlatformActionKind.bonus:
            if a.state == PlatformActionState.done:
                bonus_done[a.target] += a.amount_cents or 0
            elif a.state in OPEN:
                bonus_open[a.target].append(a)
        elif a.state == PlatformActionState.done:
            done[a.target].add(a.kind)
    for sub_id in sorted(set(subs) | set(remote)):
        mine, theirs = subs.get(sub_id), remote.get(sub_id)
        if mine is None and theirs is not None:
            out.append(f"{sub_id}: {theirs.status} on {name}, not in the ledger (not synced)")
            continue
        if theirs is None and mine is not None:
            out.append(f"{sub_id}: {mine.status} in the ledger, not on {name}")
            continue
        assert mine is not None and theirs is not None
        if mine.status != theirs.status:
            out.append(f"{sub_id}: {mine.status} in the ledger, {theirs.status} on {name}")
        for kind, states in (
            (PlatformActionKind.approve, APPROVED),
            (PlatformActionKind.reject, REJECTED),
        ):
            if kind in done[sub_id] and theirs.status not in states:
                out.append(f"{sub_id}: {kind} done in the ledger, {theirs.status} on {name}")
            if theirs.status in states and kind not in done[sub_id]:
                out.append(f"{sub_id}: {theirs.status} on {name}, no {kind} done in the ledger")
    targets = set(bonus_done) | set(bonus_open) | set(listed or {})
    for sub_id in sorted(targets):
        ours, pending = bonus_done.get(sub_id, 0), bonus_open.get(sub_id, [])
        unsettled = "".join(
            f"; bonus {_money(a.amount_cents or 0, name)} {a.state} (action {a.id})"
            for a in pending
        )
        if listed is None:
            if pending:
                out.append(
                    f"{sub_id}: {unsettled[2:]} in the ledger; {name} lists no bonuses: "
                    f"check it on {name}"
                )
            continue
        paid = listed.get(sub_id, 0)
        if paid != ours or pending:
            out.append(
                f"{sub_id}: bonus {_money(ours, name)} done in the ledger{unsettled}, "
                f"{_money(paid, name)} paid on {name}"
            )
    return out
