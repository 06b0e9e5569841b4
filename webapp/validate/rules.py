"""Which Examples the queue serves and when one is decided: the serving rule as SQL over the
Example row (its ``queue_*`` counters), the decision state, and the values a vote may carry."""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    Boolean,
    Integer,
    String,
    and_,
    bindparam,
    case,
    false,
    func,
    or_,
)
from sqlmodel import col

from vsr_core.agreement import is_decided
from vsr_core.models import (
    Example,
    ExampleOrigin,
)
from vsr_core.study import StudyConfig
from vsr_core.types import UTCDateTime

# revalidation: fresh copies of imported Examples (vsr_core.revalidation), voted like new ones.
VOTABLE_ORIGINS = (
    ExampleOrigin.human.value,
    ExampleOrigin.adversarial.value,
    ExampleOrigin.revalidation.value,
)
REFERENCE_FRAMES = ("intrinsic", "relative", "both")

# A vote's columns and their SQL types, for the prebuilt INSERT of the hot path.
VOTE_FIELDS = ("example_id", "worker_id", "value", "reference_frame", "duration_ms",
               "assignment_id", "created_at")
VOTE_TYPES: dict[str, Any] = {
    "example_id": Integer(), "worker_id": Integer(), "value": Boolean(),
    "reference_frame": String(),
    "duration_ms": Integer(), "assignment_id": Integer(), "created_at": UTCDateTime(),
}


# --- the serving rule, as SQL over the Example row -----------------------------------------


# Statements on the hot path are built once with bind parameters (see statements_for): building
# SQLAlchemy expressions costs more CPU per request than running them.
WORKER_PARAM = bindparam("q_worker", type_=Integer)
TARGET_PARAM = bindparam("q_target", type_=Integer)
MAX_PARAM = bindparam("q_max", type_=Integer)


def room_params(config: StudyConfig) -> dict[str, int]:
    return {"q_target": config.votes_per_example, "q_max": config.max_votes_per_example}


def has_room() -> Any:
    """SQL: the Example may take one more lease (votes + active leases below its limit).

    Below the target any Example may; beyond it only once the target's votes are in and still
    leave the keep decision open (so pending leases are never doubled up on a guess).
    An Example's own ``target_votes`` overrides the study's; a target above the study maximum
    is its own maximum. Parameters: :func:`room_params`.
    """
    used = col(Example.queue_votes) + col(Example.queue_leases)
    target = func.coalesce(col(Example.target_votes), TARGET_PARAM)
    maximum = case((target > MAX_PARAM, target), else_=MAX_PARAM)
    return or_(
        used < target,
        and_(
            col(Example.queue_votes) >= target,
            col(Example.queue_settled) == false(),
            used < maximum,
        ),
    )


def decision_state(
    n_agree: int, n_votes: int, target: int, config: StudyConfig
) -> tuple[bool, bool]:
    """(settled, open): settled = the votes fix the keep decision whatever the minimum count;
    open = the Example still wants votes (not decided under the study's rule)."""
    maximum = max(target, config.max_votes_per_example)
    kwargs: dict[str, Any] = {
        "max_votes": maximum,
        "threshold": config.keep_threshold,
        "method": config.decide_method,
        "confidence": config.decide_confidence,
    }
    settled = is_decided(n_agree, n_votes, min_votes=0, **kwargs)
    decided = is_decided(n_agree, n_votes, min_votes=target, **kwargs)
    return settled, not decided
