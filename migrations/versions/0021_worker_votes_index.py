"""index for a worker's dashboard page at 100x: their newest votes

A worker's page lists their 100 newest votes (``ORDER BY created_at DESC, id DESC``): without
an index on that order PostgreSQL read and sorted all of the worker's votes (12,805 for the
busiest at 100x, 12 ms, growing with their history); (worker_id, created_at, id) reads the 100.
One more B-tree entry per vote stored (votes are inserted once, never updated, so the vote's
Example counter update stays HOT, migration 0004).

Revision ID: 0021
Revises: 0020
Create Date: 2026-11-26 19:00:00
"""
from collections.abc import Sequence

from alembic import op

revision: str = '0021'
down_revision: str | None = '0020'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index('ix_vote_worker_created', 'vote', ['worker_id', 'created_at', 'id'])


def downgrade() -> None:
    op.drop_index('ix_vote_worker_created', table_name='vote')
