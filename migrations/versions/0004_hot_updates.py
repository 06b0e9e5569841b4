"""constant work per validation round trip: room for HOT updates, a batch's done count

A batch's done count is kept on the batch (``done_count``) and its newest lease found by an
index on (batch_id, id): before, every round trip counted and scanned the batch's leases, a
cost that grew with each item of a 500-item batch. Likewise a validator's leases and votes
are indexed by (worker_id, example_id), so the queue reads only those at or above the lowest
open Example, not the validator's whole history.

Every validation round trip updates an Example row (its queue counters) and an Assignment
row (lease done). PostgreSQL can update a row in place ("HOT": no new index entries, the old
version pruned without VACUUM) only when no indexed column changes and the page has room.

- assignment: the lease indexes no longer include ``status`` (the column every finish
  changes), and pages are filled to half, so the single update of each lease fits beside it;
- example: pages filled to 80 %, as its counters change several times per Example.

Measured on bench/load/ (60 s at 300 round trips/s, PostgreSQL without autovacuum): without
this every finished lease left a dead row and index entries behind, and the queries that walk
a worker's or a batch's leases grew slower until the server saturated. Storage parameters
apply to pages written from now on; SQLite has none of this.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-21 10:30:00
"""
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0004'
down_revision: str | None = '0003'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('batch', schema=None) as batch_op:
        batch_op.add_column(
            sa.Column('done_count', sa.Integer(), nullable=False, server_default='0')
        )
    op.execute(
        "UPDATE batch SET done_count = (SELECT count(*) FROM assignment a "
        "WHERE a.batch_id = batch.id AND a.status = 'done')"
    )
    with op.batch_alter_table('assignment', schema=None) as batch_op:
        batch_op.drop_index('ix_assignment_batch_id')
        batch_op.create_index('ix_assignment_batch_lease', ['batch_id', 'id'], unique=False)
        batch_op.drop_index('ix_assignment_active_example')
        batch_op.drop_index('ix_assignment_active_pair')
        batch_op.create_index('ix_assignment_example_id', ['example_id'], unique=False)
        batch_op.create_index('ix_assignment_pair_id', ['pair_id'], unique=False)
        batch_op.drop_index('ix_assignment_worker_id')
        batch_op.create_index(
            'ix_assignment_worker_example', ['worker_id', 'example_id'], unique=False
        )
    with op.batch_alter_table('vote', schema=None) as batch_op:
        batch_op.drop_index('ix_vote_worker_id')
        batch_op.create_index('ix_vote_worker_example', ['worker_id', 'example_id'], unique=False)
    if op.get_bind().dialect.name == 'postgresql':
        op.execute('ALTER TABLE assignment SET (fillfactor = 50)')
        op.execute('ALTER TABLE example SET (fillfactor = 80)')


def downgrade() -> None:
    if op.get_bind().dialect.name == 'postgresql':
        op.execute('ALTER TABLE example RESET (fillfactor)')
        op.execute('ALTER TABLE assignment RESET (fillfactor)')
    with op.batch_alter_table('vote', schema=None) as batch_op:
        batch_op.drop_index('ix_vote_worker_example')
        batch_op.create_index('ix_vote_worker_id', ['worker_id'], unique=False)
    with op.batch_alter_table('assignment', schema=None) as batch_op:
        batch_op.drop_index('ix_assignment_worker_example')
        batch_op.create_index('ix_assignment_worker_id', ['worker_id'], unique=False)
        batch_op.drop_index('ix_assignment_pair_id')
        batch_op.drop_index('ix_assignment_example_id')
        batch_op.create_index('ix_assignment_active_pair', ['pair_id', 'status'], unique=False)
        batch_op.create_index('ix_assignment_active_example', ['example_id', 'status'], unique=False)
        batch_op.drop_index('ix_assignment_batch_lease')
        batch_op.create_index('ix_assignment_batch_id', ['batch_id'], unique=False)
    with op.batch_alter_table('batch', schema=None) as batch_op:
        batch_op.drop_column('done_count')
