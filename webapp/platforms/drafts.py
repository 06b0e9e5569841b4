"""From a study's settings to a draft on a platform, and the pay check before publishing.

The effective hourly pay is the reward over the median time real workers took for one batch
of this study (completed batches in the database; an estimate only while there are none),
shown next to the platform's minimum; publishing below the minimum is refused.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlmodel import Session, col, select

from vsr_core.models import Batch, BatchStatus, PlatformStudy, Study, Worker
from vsr_core.study import load_study_config
from webapp.platforms.base import Platform, PlatformError

KINDS = ("generate", "validate")
# Minimum hourly pay in the platform's currency (minor units per hour). Prolific's published
# minimum is £6.00/h; MTurk has none (a lab may set its own with settings["min_hourly_cents"]).
MINIMUM_CENTS_PER_HOUR: dict[str, int | None] = {"prolific": 600, "mturk": None}
CURRENCY = {"prolific": "£", "mturk": "$"}
PROLIFIC_PARAMS = ("PROLIFIC_PID={{%PROLIFIC_PID%}}&STUDY_ID={{%STUDY_ID%}}"
                   "&SESSION_ID={{%SESSION_ID%}}")
# Workers who did real, timed work (imported VSR votes carry no batch times of their own).
REAL_SOURCES = ("prolific", "mturk", "invite")


@dataclass(frozen=True)
class Pay:
    reward_cents: int
    minutes: float
    measured_batches: int  # 0: the minutes are the estimate, not a measurement
    per_hour_cents: int
    minimum_cents: int | None
    currency: str

    @property
    def below_minimum(self) -> bool:
        return self.minimum_cents is not None and self.per_hour_cents < self.minimum_cents

    def line(self) -> str:
        c = self.currency
        basis = (f"median of {self.measured_batches} measured batches"
                 if self.measured_batches else "estimate, no batches measured yet")
        floor = (f"platform minimum {c}{self.minimum_cents / 100:.2f}/h"
                 if self.minimum_cents is not None else "no platform minimum")
        took = (f"{self.minutes:.1f} min" if self.minutes >= 1
                else f"{self.minutes * 60:.0f} s")
        return (f"effective pay {c}{self.per_hour_cents / 100:.2f}/h "
                f"({c}{self.reward_cents / 100:.2f} for {took}, {basis}); {floor}")


def measured_batch_minutes(session: Session, study_id: int, kind: str) -> list[float]:
    """Minutes each completed batch of this study and kind took, real workers only."""
    rows = session.exec(
        select(Batch.created_at, Batch.finished_at)
        .join(Worker, col(Worker.id) == Batch.worker_id)
        .where(Batch.study_id == study_id, Batch.kind == kind,
               Batch.status == BatchStatus.completed, col(Batch.finished_at).is_not(None),
               col(Worker.source).in_(REAL_SOURCES))
    ).all()
    return [(done - start).total_seconds() / 60 for start, done in rows if done and start]


def effective_pay(session: Session, study: PlatformStudy) -> Pay:
    s = study.settings
    times = measured_batch_minutes(session, study.study_id, s.get("kind", "generate"))
    minutes = statistics.median(times) if times else float(s.get("estimated_minutes", 1))
    minutes = max(minutes, 1 / 60)  # at least a second: no division by zero
    reward = int(s.get("reward_cents", 0))
    minimum = s.get("min_hourly_cents", MINIMUM_CENTS_PER_HOUR.get(study.platform))
    return Pay(reward, minutes, len(times), round(reward * 60 / minutes),
               None if minimum is None else int(minimum), CURRENCY.get(study.platform, ""))


def entry_url(base_url: str, study: Study, kind: str, platform: str) -> str:
    """The study's entry link: /start/<kind> for the default study, /s/<slug>/start/<kind>
    for the others; Prolific's version carries its URL parameters."""
    prefix = "" if study.is_default else f"/s/{study.slug}"
    url = f"{base_url.rstrip('/')}{prefix}/start/{kind}"
    return f"{url}?{PROLIFIC_PARAMS}" if platform == "prolific" else url


def new_settings(
    session: Session, study: Study, platform: str, kind: str, *, reward_cents: int,
    places: int, base_url: str, title: str = "", estimated_minutes: int | None = None,
    qualifications: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """The platform study's settings from our study's: its entry URL, completion codes,
    estimated time (the measured median once there is one, else the batch time limit)."""
    if kind not in KINDS:
        raise PlatformError(f"kind must be one of {', '.join(KINDS)}")
    if reward_cents < 1 or places < 1:
        raise PlatformError("reward and places must be at least 1")
    config = load_study_config(session, study.id or 0)
    limit = config.generate_minutes if kind == "generate" else config.validate_minutes
    times = measured_batch_minutes(session, study.id or 0, kind)
    estimate = estimated_minutes or (round(statistics.median(times)) if times else limit)
    return {
        "kind": kind, "title": title or f"{study.name}: {kind}", "places": places,
        "reward_cents": reward_cents, "estimated_minutes": max(1, int(estimate)),
        "max_minutes": limit, "url": entry_url(base_url, study, kind, platform),
        "completion_code": config.completion_code, "screenout_code": config.screenout_code,
        "qualifications": qualifications or [],
    }


def platform_body(platform: str, s: dict[str, Any]) -> dict[str, Any]:
    """What the platform's create call takes (Prolific: POST /studies/; MTurk: CreateHIT)."""
    if platform == "mturk":
        return {"title": s["title"], "description": s["title"], "reward_cents": s["reward_cents"],
                "assignments": s["places"], "url": s["url"],
                "duration_seconds": int(s["max_minutes"]) * 60,
                "qualifications": s.get("qualifications", [])}
    review = [{"action": "MANUALLY_REVIEW"}]  # we approve by our own plan
    return {
        "name": s["title"], "internal_name": s["title"], "description": s["title"],
        "external_study_url": s["url"], "prolific_id_option": "url_parameters",
        "completion_codes": [
            {"code": s["completion_code"], "code_type": "COMPLETED", "actions": review},
            {"code": s["screenout_code"], "code_type": "NO_CONSENT", "actions": review},
        ],
        "total_available_places": s["places"], "reward": s["reward_cents"],
        "estimated_completion_time": s["estimated_minutes"],
        "maximum_allowed_time": s["max_minutes"], "device_compatibility": ["desktop"],
    }


def create(session: Session, platform: Platform, study: Study,
           settings: dict[str, Any]) -> PlatformStudy:
    """Create the draft on the platform (MTurk: the HIT, live at once) and its row."""
    study_id = study.id or 0
    session.commit()  # no transaction open while the platform answers
    external_id = platform.create_draft(platform_body(platform.name, settings))
    row = PlatformStudy(study_id=study_id, platform=platform.name, external_id=external_id,
                        state="published" if platform.name == "mturk" else "draft",
                        settings=settings)
    session.add(row)
    session.commit()
    return row


# Which state each step starts from and leads to: a draft is published once, a live study
# is paused, a paused one resumed (Prolific refuses PUBLISH on a paused study: that is START).
STEPS: dict[str, tuple[frozenset[str], str]] = {
    "publish": (frozenset({"draft"}), "published"),
    "pause": (frozenset({"published"}), "paused"),
    "resume": (frozenset({"paused"}), "published"),
}


def steps_from(state: str) -> list[str]:
    """The steps a platform study in this state can take (the page shows just these)."""
    return [step for step, (start, _) in STEPS.items() if state in start]


def publish(session: Session, platform: Platform, row: PlatformStudy) -> Pay:
    """Publish unless the effective hourly pay is below the platform's minimum."""
    check_step(row, "publish")
    pay = effective_pay(session, row)
    if pay.below_minimum:
        raise PlatformError(f"refused: {pay.line()}")
    _transition(session, row, platform.publish, "publish")
    return pay


def pause(session: Session, platform: Platform, row: PlatformStudy) -> None:
    _transition(session, row, platform.pause, "pause")


def resume(session: Session, platform: Platform, row: PlatformStudy) -> None:
    _transition(session, row, platform.resume, "resume")


def check_step(row: PlatformStudy, step: str) -> None:
    """Refuse, in one line, a step this study's state does not allow (before any call)."""
    if row.state not in STEPS[step][0]:
        raise PlatformError(f"cannot {step} a {row.state} study (it can: "
                            f"{', '.join(steps_from(row.state)) or 'nothing more'})")


def _transition(
    session: Session, row: PlatformStudy, send: Callable[[str], object], step: str
) -> None:
    """Send one state change to the platform, then record it; the transaction ends before the
    call, so none is held across it."""
    check_step(row, step)
    state = STEPS[step][1]
    external_id = row.external_id
    session.commit()
    send(external_id)
    row.state = state
    session.add(row)
    session.commit()
