"""Which Examples the queue serves and when one is decided: the serving rule as SQL over the
Example row (its ``queue_*`` counters), the decision state, and the values a vote may carry."""

from __future__ import annotations

import functools
from enum import StrEnum
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
    literal_column,
    or_,
)
from sqlmodel import col

from vsr_core.agreement import is_decided
from vsr_core.models import (
    QUEUE_ORIGINS,
    Example,
)
from vsr_core.studies.settings import StudyConfig
from vsr_core.types import UTCDateTime

# Also the predicate of the index the queue walks (vsr_core.models.IN_QUEUE).
VOTABLE_ORIGINS = QUEUE_ORIGINS
REFERENCE_FRAMES = ("intrinsic", "relative", "both")

# A vote's columns and their SQL types, for the prebuilt INSERT of the hot path.
VOTE_FIELDS = (
    "example_id",
    "worker_id",
    "value",
    "reference_frame",
    "duration_ms",
    "assignment_id",
    "created_at",
)
VOTE_TYPES: dict[str, Any] = {
    "example_id": Integer(),
    "worker_id": Integer(),
    "value": Boolean(),
    "reference_frame": String(),
    "duration_ms": Integer(),
    "assignment_id": Integer(),
    "created_at": UTCDateTime(),
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


# --- the decision state, as SQL over the counting UPDATE ------------------------------------
#
# The vote's counting UPDATE also writes the Example's new (settled, open) pair, looked up in a
# table of every (votes, agree) for the study's own target, passed as one short string. Without
# it, the pair was written by a second UPDATE of the same row in four of five round trips (a
# statement of its own: app CPU, a new row version and WAL). decision_state stays the rule:
# the hot path compares what the UPDATE wrote with it and writes the pair itself when they
# differ (an Example with its own target_votes, or counts beyond the table).

STATES_PARAM = bindparam("q_states", type_=String)
STATES_WIDTH_PARAM = bindparam("q_states_width", type_=Integer)


class DecisionState(StrEnum):
    """One cell of the decision table: the (settled, open) pair as the digit
    2 * settled + open, the character the SQL reads."""

    closed = "0"  # not settled, wants no more votes (its maximum is reached)
    wanted = "1"  # not settled, wants votes
    settled = "2"  # settled and wants no more votes
    settled_wanted = "3"  # settled, but wants votes up to its target

    @classmethod
    def of(cls, settled: bool, still_open: bool) -> DecisionState:
        return cls(str(2 * settled + still_open))

    @property
    def pair(self) -> tuple[bool, bool]:
        """(settled, open)."""
        digit = int(self.value)
        return digit >= 2, digit % 2 == 1


# The cells whose Example is settled, and those whose Example stays open (in this order: the
# SQL lists them so).
SETTLED_STATES = (DecisionState.settled, DecisionState.settled_wanted)
OPEN_STATES = (DecisionState.wanted, DecisionState.settled_wanted)
DECISION_OF_CHAR = {state.value: state.pair for state in DecisionState}


def decision_states(config: StudyConfig) -> dict[str, Any]:
    """The parameters of :func:`decided_columns` for a study: the (settled, open) pair of
    every (votes, agree) up to the study's maximum, at its own target, one character each."""
    return _decision_states(
        config.votes_per_example,
        config.max_votes_per_example,
        config.keep_threshold,
        config.decide_method,
        config.decide_confidence,
    )


@functools.lru_cache(maxsize=64)
def _decision_states(
    target: int, max_votes: int, threshold: float, method: str, confidence: float
) -> dict[str, Any]:
    config = StudyConfig(
        votes_per_example=target,
        max_votes_per_example=max_votes,
        keep_threshold=threshold,
        decide_method=method,
        decide_confidence=confidence,
    )
    width = max(target, max_votes) + 1  # votes 0..maximum; agree 0..votes
    # A cell with more agreeing votes than votes never occurs; it is filled as closed.
    chars = [
        DecisionState.of(*decision_state(agree, votes, target, config))
        if agree <= votes
        else DecisionState.closed
        for votes in range(width)
        for agree in range(width)
    ]
    return {"q_states": "".join(chars), "q_states_width": width}


def decided_columns(new_votes: Any, new_agree: Any) -> dict[str, Any]:
    """SET clauses: ``queue_settled`` and ``queue_open`` for the counts after this vote, from
    the table :func:`decision_states` passes; unchanged for an Example with its own target or
    counts beyond the table (the caller then writes them, see above)."""
    state = func.substr(STATES_PARAM, new_votes * STATES_WIDTH_PARAM + new_agree + 1, 1)
    known = and_(col(Example.target_votes).is_(None), new_votes < STATES_WIDTH_PARAM)

    def one_of(states: tuple[DecisionState, ...]) -> Any:
        # Constants in the SQL: no IN list expanded per execution.
        return state.in_([literal_column(f"'{s.value}'") for s in states])

    return {
        "queue_settled": case((known, one_of(SETTLED_STATES)), else_=col(Example.queue_settled)),
        "queue_open": case((known, one_of(OPEN_STATES)), else_=col(Example.queue_open)),
    }
