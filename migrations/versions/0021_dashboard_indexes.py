"""indexes for two dashboard pages at 100x: the data page's "undecided" filter, a worker's votes

An Example is undecided (without an adjudication) while its queue is open, it has no votes, or
it has fewer votes than its own target or else the study's ``votes_per_example``. That depends
on a setting, so no partial index fits; PostgreSQL estimated a third of the Examples for it
(427,000 of 1.28 million at 100x, where 100 are) and walked the primary key. This index is on
the largest study-wide target at which the Example counts as decided (a constant per row, see
``vsr_core.models.SETTLED_UP_TO``, whose text the query repeats), so "undecided at this
setting" is one range of it, and ANALYZE keeps statistics on the expression. SQLite and
PostgreSQL alike.

A worker's page lists their 100 newest votes (``ORDER BY created_at DESC, id DESC``): without
an index on that order PostgreSQL read and sorted all of the worker's votes (12,805 for the
busiest at 100x, 12 ms, growing with their history); (worker_id, created_at, id) reads the 100.
One more B-tree entry per vote stored (votes are inserted once, never updated).

The price: the Example index reads ``queue_votes``, which every vote changes, so the vote's
counter update is no longer a HOT update (migration 0004) and adds an entry to each of
Example's indexes: 20,000 such updates at 100x took 8-17 µs each before, 40-60 µs after.

Revision ID: 0021
Revises: 0020
Create Date: 2026-11-26 19:00:00
"""
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0021'
down_revision: str | None = '0020'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# The same text as vsr_core.models.SETTLED_UP_TO when this was written (a migration is a
# snapshot: it does not follow later edits of the models).
_SETTLED_UP_TO = (
    "CASE WHEN queue_open OR queue_votes = 0 THEN 0"
    " WHEN target_votes IS NULL THEN queue_votes"
    " WHEN queue_votes >= target_votes THEN 1000000 ELSE 0 END"
)


def upgrade() -> None:
    op.create_index('ix_example_settled', 'example', [sa.text(f'({_SETTLED_UP_TO})')])
    op.create_index('ix_vote_worker_created', 'vote', ['worker_id', 'created_at', 'id'])
    if op.get_bind().dialect.name == 'postgresql':
        # Statistics on the new expression now, not at the next autovacuum: until then the
        # planner guesses a third of the rows for any range of it.
        op.execute('ANALYZE example')


def downgrade() -> None:
    op.drop_index('ix_vote_worker_created', table_name='vote')
    op.drop_index('ix_example_settled', table_name='example')
