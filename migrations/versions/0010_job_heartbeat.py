"""job.heartbeat_at: a job's process says it is alive, for servers on other hosts

With replicas on several hosts a server can judge a job's pid only on the host that started
it. When that host (or container) vanishes for good, no server could tell the job was gone and
it showed "running" forever. The job's process now writes heartbeat_at every
HEARTBEAT_SECONDS; any server marks a job of another host failed once it is stale.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-25 13:30:00
"""
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import vsr_core.types

revision: str = '0010'
down_revision: str | None = '0009'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('job', schema=None) as batch_op:
        batch_op.add_column(
            sa.Column('heartbeat_at', vsr_core.types.UTCDateTime(timezone=True), nullable=True)
        )


def downgrade() -> None:
    with op.batch_alter_table('job', schema=None) as batch_op:
        batch_op.drop_column('heartbeat_at')
