"""From a study's settings to a draft on a platform, and the pay check before publishing.

The effective hourly pay is the reward over the time one batch of this platform study takes:
the time per item measured on completed batches as their time over the items served and
answered in them (not the batch's nominal size: a batch cut to what the pool held is short),
only on batches tied to a real platform submission (the batch's session is a synced
submission of the same worker) or to an invited worker, one figure per distinct, unflagged
worker (so one fast worker or a handful of invented ids cannot carry it), times the batch
size. It is used once at least MIN_MEASUREMENTS workers were measured, shown with n and the
spread; before that the pay is unknown and publishing is refused unless the researcher
states the expected duration. A stated duration shorter than the measured one is not used
unless an owner overrides the measurement (audited, and shown in the pay line).
"""

from __future__ import annotations

import logging
import re
import secrets
import statistics
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from sqlalchemy import func
from sqlmodel import Session, col, select

from vsr_core import audit, standing
from vsr_core.audit import Actor
from vsr_core.codes import new_code
from vsr_core.models import (
    Assignment,
    AuditKind,
    Batch,
    BatchKind,
    BatchStatus,
    CrowdPlatform,
    InviteToken,
    LeaseStatus,
    PlatformStudy,
    PlatformStudyState,
    PlatformSubmission,
    Study,
    Worker,
    WorkerSource,
)
from vsr_core.studies.settings import load_study_config
from vsr_core.types import utcnow
from webapp.platforms.base import Platform, PlatformError
from webapp.platforms.settlement import SESSION_KEY

KINDS = tuple(BatchKind)
# Minimum hourly pay in the platform's currency (minor units per hour). Prolific's published
# minimum is £6.00/h; MTurk has none (a lab may set its own with settings["min_hourly_cents"]).
MINIMUM_CENTS_PER_HOUR: dict[str, int | None] = {
    CrowdPlatform.prolific: 600,
    CrowdPlatform.mturk: None,
}
CURRENCY: dict[str, str] = {CrowdPlatform.prolific: "£", CrowdPlatform.mturk: "$"}
PROLIFIC_PARAMS = (
    "PROLIFIC_PID={{%PROLIFIC_PID%}}&STUDY_ID={{%STUDY_ID%}}&SESSION_ID={{%SESSION_ID%}}"
)
# Workers who did real, timed work (imported VSR votes carry no batch times of their own).
REAL_SOURCES = (WorkerSource.prolific, WorkerSource.mturk, WorkerSource.invite)
# Distinct workers measured before their time per item is trusted for the pay check.
MIN_MEASUREMENTS = 5
MTURK_QUALIFICATION_ID = re.compile(r"[A-Z0-9]{20,40}")  # e.g. 3XQ8Z6F9... (MTurk's ids)
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ItemTime:
    """Seconds per item, one figure per distinct worker (their median)."""

    per_worker: list[float]

    @property
    def n(self) -> int:
        return len(self.per_worker)

    @property
    def median(self) -> float | None:
        return statistics.median(self.per_worker) if self.per_worker else None

    @property
    def spread(self) -> tuple[float, float] | None:
        """The middle half (25th to 75th percentile) of the workers' seconds per item."""
        if self.n < 2:
            return None
        q = statistics.quantiles(self.per_worker, n=4, method="inclusive")
        return q[0], q[2]


@dataclass(frozen=True)
class Pay:
    reward_cents: int
    minutes: float | None  # None: unknown (too few measurements, no stated duration)
    items: int  # the batch size the reward pays for
    measured: ItemTime
    stated: bool  # the minutes are the researcher's stated duration
    minimum_cents: int | None
    currency: str
    # The owner's override of a measurement longer than the stated duration ({"by", "at",
    # "minutes", "measured_minutes", "reason"}), when it is in force.
    override: dict[str, Any] | None = None
    # A stated duration not used: shorter than the measured one, with no override.
    ignored_stated: float | None = None

    @property
    def per_hour_cents(self) -> int | None:
        if self.minutes is None:
            return None
        return round(self.reward_cents * 60 / max(self.minutes, 1 / 60))

    @property
    def below_minimum(self) -> bool:
        rate = self.per_hour_cents
        return self.minimum_cents is not None and rate is not None and rate < self.minimum_cents

    @property
    def unknown(self) -> bool:
        return self.minutes is None

    @property
    def measured_minutes(self) -> float | None:
        m = self.measured
        if m.n >= MIN_MEASUREMENTS and m.median is not None:
            return m.median * self.items / 60
        return None

    def _measurement(self) -> str:
        m = self.measured
        lo_hi = m.spread
        spread = f", middle half {lo_hi[0]:.1f}-{lo_hi[1]:.1f} s" if lo_hi else ""
        return (
            f"{m.median:.1f} s per item x {self.items} items, median of "
            f"{m.n} workers on the items they answered{spread}"
        )

    def _basis(self) -> str:
        m = self.measured
        if self.override is not None:
            o = self.override
            return (
                f"stated duration, shorter than the measured {o['measured_minutes']:.1f} min "
                f"({self._measurement()}): overridden by owner {o['by']} at {o['at']}: "
                f"{o['reason']}"
            )
        if m.n >= MIN_MEASUREMENTS and not self.stated:
            basis = self._measurement()
            if self.ignored_stated is not None:
                basis += (
                    f"; the stated {self.ignored_stated:g} min is shorter and needs "
                    "an owner's override"
                )
            return basis
        seen = f"{m.n} of the {MIN_MEASUREMENTS} workers needed measured"
        return f"stated duration; {seen}" if self.stated else seen

    def line(self) -> str:
        c = self.currency
        floor = (
            f"platform minimum {c}{self.minimum_cents / 100:.2f}/h"
            if self.minimum_cents is not None
            else "no platform minimum"
        )
        if self.minutes is None:
            return (
                f"effective pay unknown ({c}{self.reward_cents / 100:.2f} for "
                f"{self.items} items; {self._basis()}); {floor}"
            )
        took = f"{self.minutes:.1f} min" if self.minutes >= 1 else f"{self.minutes * 60:.0f} s"
        return (
            f"effective pay {c}{(self.per_hour_cents or 0) / 100:.2f}/h "
            f"({c}{self.reward_cents / 100:.2f} for {took}; {self._basis()}); {floor}"
        )


def _tied_batches(
    session: Session, study_id: int, candidates: list[tuple[int, int, dict[str, Any], str]]
) -> set[int]:
    """Of (batch id, worker id, entry, worker source), the batches whose session is a synced
    submission of the same worker in one of this study's platform studies, or whose worker
    was made by one of this study's invites. Two statements, whatever the count."""
    subs = {
        (platform, external_id, worker_id)
        for platform, external_id, worker_id in session.exec(
            select(
                PlatformSubmission.platform,
                PlatformSubmission.external_id,
                PlatformSubmission.worker_id,
            )
            .join(PlatformStudy, col(PlatformStudy.id) == PlatformSubmission.platform_study_id)
            .where(
                PlatformStudy.study_id == study_id,
                col(PlatformSubmission.worker_id).is_not(None),
            )
        )
    }
    invited = set(
        session.exec(
            select(InviteToken.worker_id).where(
                InviteToken.study_id == study_id, col(InviteToken.worker_id).is_not(None)
            )
        )
    )
    tied = set()
    for batch_id, worker_id, entry, source in candidates:
        if source == WorkerSource.invite:
            if worker_id in invited:
                tied.add(batch_id)
            continue
        named = entry.get(SESSION_KEY.get(source, ""))
        if named and (source, str(named), worker_id) in subs:
            tied.add(batch_id)
    return tied


def item_seconds(session: Session, study_id: int, kind: str) -> ItemTime:
    """Seconds per item answered on this study's completed batches of this kind that are
    tied to a real submission or an invited worker: each batch's time over the leases done
    in it, one figure (the median) per distinct real, unflagged worker."""
    rows = session.exec(
        select(Batch, Worker.source)
        .join(Worker, col(Worker.id) == Batch.worker_id)
        .where(
            Batch.study_id == study_id,
            Batch.kind == kind,
            Batch.status == BatchStatus.completed,
            col(Batch.finished_at).is_not(None),
            col(Worker.source).in_(REAL_SOURCES),
            ~standing.flagged_clause(Worker.id, study_id, on_worker=Worker.flagged),
        )
    ).all()
    if not rows:
        return ItemTime([])
    tied = _tied_batches(
        session, study_id, [(b.id or 0, b.worker_id, dict(b.entry or {}), src) for b, src in rows]
    )
    answered = dict(
        session.exec(
            select(Assignment.batch_id, func.count())
            .where(col(Assignment.batch_id).in_(tied), Assignment.status == LeaseStatus.done)
            .group_by(col(Assignment.batch_id))
        ).all()
    )
    by_worker: dict[int, list[float]] = {}
    for b, _ in rows:
        count = answered.get(b.id or 0, 0)
        if b.id in tied and b.finished_at and count:
            seconds = (b.finished_at - b.created_at).total_seconds()
            by_worker.setdefault(b.worker_id, []).append(seconds / count)
    return ItemTime(sorted(statistics.median(v) for v in by_worker.values()))


def batch_items(session: Session, study_id: int, kind: str) -> int:
    config = load_study_config(session, study_id)
    if kind == BatchKind.generate:
        return config.generate_batch_size
    return config.validate_batch_size


def effective_pay(session: Session, study: PlatformStudy, measured: ItemTime | None = None) -> Pay:
    """The pay of one batch: over the measured time, or the stated one when nothing is
    measured yet, when it is not shorter than the measurement, or when an owner overrode
    the measurement for exactly this stated duration."""
    s = study.settings
    kind = s.get("kind", BatchKind.generate)
    items = int(s.get("batch_items") or batch_items(session, study.study_id, kind))
    m = measured if measured is not None else item_seconds(session, study.study_id, kind)
    minimum = s.get("min_hourly_cents", MINIMUM_CENTS_PER_HOUR.get(study.platform))
    pay = Pay(
        int(s.get("reward_cents", 0)),
        None,
        items,
        m,
        False,
        None if minimum is None else int(minimum),
        CURRENCY.get(study.platform, ""),
    )
    stated = float(s["stated_minutes"]) if s.get("stated_minutes") else None
    measured_minutes = pay.measured_minutes
    override = s.get("override")
    if stated is None:
        return replace(pay, minutes=measured_minutes)
    if measured_minutes is None or stated >= measured_minutes:
        return replace(pay, minutes=stated, stated=True)
    if isinstance(override, dict) and float(override.get("minutes", -1)) == stated:
        shown = {**override, "measured_minutes": measured_minutes}
        return replace(pay, minutes=stated, stated=True, override=shown)
    return replace(pay, minutes=measured_minutes, ignored_stated=stated)


def override_minutes(
    session: Session, row: PlatformStudy, minutes: int, reason: str, actor: Actor
) -> Pay:
    """An owner states a duration shorter than the measured one and takes responsibility:
    the platform study's stated minutes become ``minutes``, the override is recorded in the
    audit trail and shown in the pay line. The caller checks the actor is the owner."""
    reason = reason.strip()
    if not 1 <= minutes <= 24 * 60:
        raise PlatformError("the overriding minutes must be between 1 and 1440")
    if not reason:
        raise PlatformError("an override needs a reason")
    if row.state != PlatformStudyState.draft:
        raise PlatformError(f"the duration of a {row.state} study cannot change")
    before = effective_pay(session, row)
    measured_minutes = before.measured_minutes
    if measured_minutes is None or minutes >= measured_minutes:
        raise PlatformError(
            "nothing to override: no measurement is longer than "
            f"{minutes} min ({before.line()}); state the duration when creating the draft"
        )
    override = {
        "minutes": minutes,
        "by": actor.name,
        "at": utcnow().strftime("%Y-%m-%d %H:%M UTC"),
        "reason": reason[:200],
    }
    was = {k: row.settings.get(k) for k in ("stated_minutes", "override")}
    row.settings = {
        **row.settings,
        "stated_minutes": minutes,
        "override": override,
    }
    session.add(row)
    audit.record(
        session,
        actor,
        AuditKind.platform_override,
        study_id=row.study_id,
        target=f"platform study {row.id}",
        change={
            **audit.changed(was, {"stated_minutes": minutes, "override": override}),
            "measured_minutes": round(measured_minutes, 1),
        },
    )
    session.commit()
    return effective_pay(session, row)


def entry_url(base_url: str, study: Study, kind: str, platform: str) -> str:
    """The study's entry link: /start/<kind> for the default study, /s/<slug>/start/<kind>
    for the others; Prolific's version carries its URL parameters."""
    prefix = "" if study.is_default else f"/s/{study.slug}"
    url = f"{base_url.rstrip('/')}{prefix}/start/{kind}"
    return f"{url}?{PROLIFIC_PARAMS}" if platform == CrowdPlatform.prolific else url


def new_settings(
    session: Session,
    study: Study,
    platform: str,
    kind: str,
    *,
    reward_cents: int,
    places: int,
    base_url: str,
    title: str = "",
    estimated_minutes: int | None = None,
    qualifications: list[dict[str, Any]] | None = None,
    screenout_qualification: str | None = None,
) -> dict[str, Any]:
    """The platform study's settings from our study's: its entry URL, its own random
    completion and screen-out codes, the estimated time (the researcher's stated duration,
    else the measured time per item x the batch size, else the batch time limit; only the
    first two let it be published). ``screenout_qualification`` (MTurk): the id of a
    qualification type the HIT requires not to exist; a worker who fails the study's check
    is given it (webapp.platforms.screenout), so MTurk stops offering them the HIT."""
    if kind not in KINDS:
        raise PlatformError(f"kind must be one of {', '.join(KINDS)}")
    if reward_cents < 1 or places < 1:
        raise PlatformError("reward and places must be at least 1")
    config = load_study_config(session, study.id or 0)
    limit = config.generate_minutes if kind == BatchKind.generate else config.validate_minutes
    items = batch_items(session, study.id or 0, kind)
    measured = item_seconds(session, study.id or 0, kind)
    if estimated_minutes:
        estimate: float = estimated_minutes
    elif measured.n >= MIN_MEASUREMENTS and measured.median is not None:
        estimate = measured.median * items / 60
    else:
        estimate = limit  # the draft needs a figure; publishing still needs a real one
    return {
        "kind": kind,
        "title": title or f"{study.name}: {kind}",
        "places": places,
        "reward_cents": reward_cents,
        "estimated_minutes": max(1, round(estimate)),
        "stated_minutes": estimated_minutes,
        "batch_items": items,
        "max_minutes": limit,
        "url": entry_url(base_url, study, kind, platform),
        # Each platform study its own codes: knowing one study's code opens no other.
        "completion_code": new_code(),
        "screenout_code": new_code(),
        # Prolific's no-pay return for a worker who failed the study's qualification check.
        "qualification_code": new_code(),
        "qualification_type_id": screenout_qualification,
        "qualifications": _with_screenout(qualifications or [], screenout_qualification),
    }


def _with_screenout(
    requirements: list[dict[str, Any]], qualification_type_id: str | None
) -> list[dict[str, Any]]:
    if not qualification_type_id:
        return requirements
    if not MTURK_QUALIFICATION_ID.fullmatch(qualification_type_id):
        raise PlatformError("the screen-out qualification must be an MTurk qualification type id")
    return [
        *requirements,
        {
            "QualificationTypeId": qualification_type_id,
            "Comparator": "DoesNotExist",
            "ActionsGuarded": "DiscoverPreviewAndAccept",
        },
    ]


def platform_body(platform: str, s: dict[str, Any]) -> dict[str, Any]:
    """What the platform's create call takes (Prolific: POST /studies/; MTurk: CreateHIT)."""
    if platform == CrowdPlatform.mturk:
        return {
            "title": s["title"],
            "description": s["title"],
            "reward_cents": s["reward_cents"],
            "assignments": s["places"],
            "url": s["url"],
            "duration_seconds": int(s["max_minutes"]) * 60,
            "qualifications": s.get("qualifications", []),
        }
    review = [{"action": "MANUALLY_REVIEW"}]  # we approve by our own plan
    return {
        "name": s["title"],
        "internal_name": s["title"],
        "description": s["title"],
        "external_study_url": s["url"],
        "prolific_id_option": "url_parameters",
        "completion_codes": [
            {"code": s["completion_code"], "code_type": "COMPLETED", "actions": review},
            {"code": s["screenout_code"], "code_type": "NO_CONSENT", "actions": review},
            *_qualification_code(s),
        ],
        "total_available_places": s["places"],
        "reward": s["reward_cents"],
        "estimated_completion_time": s["estimated_minutes"],
        "maximum_allowed_time": s["max_minutes"],
        "device_compatibility": ["desktop"],
    }


def _qualification_code(s: dict[str, Any]) -> list[dict[str, Any]]:
    """A no-pay return: the participant is asked to return the submission (drafts made
    before this code existed have none and use the screen-out code)."""
    code = s.get("qualification_code")
    if not code:
        return []
    return [{"code": code, "code_type": "OTHER", "actions": [{"action": "REQUEST_RETURN"}]}]


def create(
    session: Session,
    platform: Platform,
    study: Study,
    settings: dict[str, Any],
    on_row: Callable[[int | None], None] | None = None,
    *,
    actor: Actor | None = None,
) -> PlatformStudy:
    """Create the draft on the platform (MTurk: the HIT, live at once), written ahead: the
    row (state 'creating', a random marker) is committed before the call; the marker goes
    with the create, so after a lost answer the platform is read (find_draft) instead of
    creating again. A create the platform refused leaves no row. ``on_row`` hears the row's
    id once it exists (the call log names it), and None if it is removed again. With
    ``actor``, the audit record commits with the row's adoption (the platform's id known);
    a create whose answer was lost is recorded when a sync finds it."""
    marker = f"vsr-{secrets.token_hex(12)}"
    row = PlatformStudy(
        study_id=study.id or 0,
        platform=platform.name,
        external_id=f"pending:{marker}",
        state=PlatformStudyState.creating,
        settings={**settings, "marker": marker},
    )
    session.add(row)
    session.commit()
    if on_row is not None:
        on_row(row.id or 0)
    body = platform_body(platform.name, settings)
    try:
        external_id: str | None = platform.create_draft(body, marker)
    except PlatformError as exc:
        if not exc.maybe_sent:
            if on_row is not None:
                on_row(None)
            session.delete(row)
            session.commit()
            raise
        external_id = _find(platform, marker)
        if external_id is None:
            raise PlatformError(
                f"{exc}; no study with marker {marker} found yet: it is kept "
                f"as 'creating' and looked for again on sync"
            ) from None
    assert external_id is not None
    _adopt(session, platform, row, external_id, actor)
    return row


def _find(platform: Platform, marker: str) -> str | None:
    try:
        return platform.find_draft(marker)
    except PlatformError:
        return None


def _adopt(
    session: Session,
    platform: Platform,
    row: PlatformStudy,
    external_id: str,
    actor: Actor | None = None,
) -> None:
    row.external_id = external_id
    # MTurk has no drafts: its create made the HIT live.
    live = platform.name == CrowdPlatform.mturk
    row.state = PlatformStudyState.published if live else PlatformStudyState.draft
    session.add(row)
    if actor is not None:
        settings = row.settings
        audit.record(
            session,
            actor,
            AuditKind.platform_create,
            study_id=row.study_id,
            target=f"platform study {row.id}",
            change={
                "platform": platform.name,
                "external_id": external_id,
                "state": str(row.state),
                **{
                    k: settings.get(k)
                    for k in ("kind", "reward_cents", "places", "title")
                    if k in settings
                },
            },
        )
    session.commit()
    log.info(
        "platform study %s of study %s is %s %s (%s)",
        row.id,
        row.study_id,
        platform.name,
        external_id,
        row.state,
    )


def confirm_create(
    session: Session, platform: Platform, row: PlatformStudy, *, actor: Actor | None = None
) -> bool:
    """A study whose create answer was lost: look for it by its marker again (sync does);
    True once found."""
    if row.state != PlatformStudyState.creating:
        return True
    marker = str(row.settings.get("marker", ""))
    session.commit()
    found = platform.find_draft(marker) if marker else None
    if found is None:
        return False
    _adopt(session, platform, row, found, actor)
    return True


# Which state each step starts from and leads to: a draft is published once, a live study
# is paused, a paused one resumed (Prolific refuses PUBLISH on a paused study: that is START).
STEPS: dict[str, tuple[frozenset[PlatformStudyState], PlatformStudyState]] = {
    "publish": (frozenset({PlatformStudyState.draft}), PlatformStudyState.published),
    "pause": (frozenset({PlatformStudyState.published}), PlatformStudyState.paused),
    "resume": (frozenset({PlatformStudyState.paused}), PlatformStudyState.published),
}


def steps_from(state: str) -> list[str]:
    """The steps a platform study in this state can take (the page shows just these)."""
    return [step for step, (start, _) in STEPS.items() if state in start]


def check_pay(pay: Pay) -> None:
    """Refuse to publish below the platform's minimum, or when the pay is unknown."""
    if pay.below_minimum:
        raise PlatformError(f"refused: {pay.line()}")
    if pay.unknown and pay.minimum_cents is not None:
        raise PlatformError(
            f"refused: {pay.line()}; state the expected duration "
            "(--expected-minutes) to publish before then"
        )


def publish(
    session: Session, platform: Platform, row: PlatformStudy, *, actor: Actor | None = None
) -> Pay:
    """Publish unless the effective hourly pay is below the platform's minimum or unknown."""
    check_step(row, "publish")
    pay = effective_pay(session, row)
    check_pay(pay)
    _transition(session, row, platform.publish, "publish", actor)
    return pay


def pause(
    session: Session, platform: Platform, row: PlatformStudy, *, actor: Actor | None = None
) -> None:
    _transition(session, row, platform.pause, "pause", actor)


def resume(
    session: Session, platform: Platform, row: PlatformStudy, *, actor: Actor | None = None
) -> None:
    _transition(session, row, platform.resume, "resume", actor)


def check_step(row: PlatformStudy, step: str) -> None:
    """Refuse, in one line, a step this study's state does not allow (before any call)."""
    if row.state not in STEPS[step][0]:
        raise PlatformError(
            f"cannot {step} a {row.state} study (it can: "
            f"{', '.join(steps_from(row.state)) or 'nothing more'})"
        )


def _transition(
    session: Session,
    row: PlatformStudy,
    send: Callable[[str], object],
    step: str,
    actor: Actor | None = None,
) -> None:
    """Send one state change to the platform, then record it; the transaction ends before the
    call, so none is held across it."""
    check_step(row, step)
    state = STEPS[step][1]
    external_id = row.external_id
    session.commit()
    send(external_id)
    was = row.state
    row.state = state
    session.add(row)
    if actor is not None:
        audit.record(
            session,
            actor,
            AuditKind.platform_step,
            study_id=row.study_id,
            target=f"platform study {row.id}",
            change={"step": step, **audit.changed({"state": str(was)}, {"state": str(state)})},
        )
    session.commit()
    log.info("platform study %s of study %s: %s, now %s", row.id, row.study_id, step, state)
