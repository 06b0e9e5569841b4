"""The decision state the vote's counting UPDATE writes (rules.decided_columns, from the table
rules.decision_states passes) against the rule itself (rules.decision_state), on both backends:
every count in the table, counts beyond it, and Examples with their own target."""

from __future__ import annotations

import pytest
from sqlalchemy import update
from sqlmodel import Session, col

from tests.webapp.validate.support import make_example, make_image
from vsr_core.models import Example
from vsr_core.studies.settings import StudyConfig
from webapp.validate.rules import decision_state, decision_states
from webapp.validate.statements import dialect_of, run_prebuilt, statements_for

CONFIGS = [
    StudyConfig(),  # VSR's: 3 votes, up to 5, 2/3, next_vote
    StudyConfig(decide_method="exact"),
    StudyConfig(
        votes_per_example=5, max_votes_per_example=9, decide_method="wilson", decide_confidence=0.9
    ),
    StudyConfig(
        votes_per_example=2, max_votes_per_example=7, keep_threshold=0.5, decide_method="beta"
    ),
    StudyConfig(votes_per_example=1, max_votes_per_example=1),
    StudyConfig(votes_per_example=6, max_votes_per_example=4),  # a target above the maximum
]


@pytest.mark.parametrize(
    "config",
    CONFIGS,
    ids=lambda c: f"{c.decide_method}-{c.votes_per_example}-{c.max_votes_per_example}",
)
def test_the_counting_update_writes_what_decision_state_says(
    session: Session, config: StudyConfig
) -> None:
    width = decision_states(config)["q_states_width"]
    image = make_image(session)
    # (votes before, agree before, own target): every count in the table and one past its
    # end, half with the study's target and half with an Example's own.
    cases = [
        (votes, agree, target)
        for votes in range(width + 1)
        for agree in range(votes + 1)
        for target in (None, config.votes_per_example + 1)
    ]
    counted = statements_for(dialect_of(session)).count_vote
    checked = 0
    for before_votes, before_agree, target in cases:
        for value in (True, False):
            example = make_example(session, image, label=True, target_votes=target)
            preset = (
                update(Example)
                .where(col(Example.id) == example.id)
                .values(
                    queue_votes=before_votes,
                    queue_agree=before_agree,
                    queue_settled=False,
                    queue_open=True,
                )
            )
            session.exec(preset)
            row = run_prebuilt(
                session,
                counted,
                {
                    "q_id": example.id,
                    "q_value": value,
                    "q_release": 0,
                    **decision_states(config),
                },
            ).one()
            session.commit()
            votes, agree = before_votes + 1, before_agree + int(value)
            assert (row.queue_votes, row.queue_agree) == (votes, agree)
            written = (row.queue_settled, row.queue_open)
            if target is None and votes < width:
                expected = decision_state(agree, votes, config.votes_per_example, config)
                assert written == expected, (votes, agree, config)
                checked += 1
            else:  # not in the table: left as it was, for the hot path to write itself
                assert written == (False, True), (votes, agree, target, config)
    assert checked == sum(2 * v for v in range(1, width))  # every count in the table
