"""rate limits shared by all server processes, revocable admin sessions

- rateevent: failed admin logins, new worker identities and new batches, counted per key
  (client address, username, study) by webapp.http.rate_limits; in the database so every
  server process sees the same counts (before: per process, in memory);
- adminuser.session_version: part of each admin session cookie; logout and password change
  raise it, which ends every cookie issued before.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-22 23:10:00
"""
from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel.sql.sqltypes
from alembic import op

import vsr_core.types

revision: str = '0005'
down_revision: str | None = '0004'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        'rateevent',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('kind', sqlmodel.sql.sqltypes.AutoString(length=32), nullable=False),
        sa.Column('key', sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
        sa.Column('worker_id', sa.Integer(), nullable=True),
        sa.Column('at', vsr_core.types.UTCDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(['worker_id'], ['worker.id'], ),
        sa.PrimaryKeyConstraint('id'),
    )
    with op.batch_alter_table('rateevent', schema=None) as batch_op:
        batch_op.create_index('ix_rateevent_kind_key_at', ['kind', 'key', 'at'], unique=False)
        batch_op.create_index(batch_op.f('ix_rateevent_at'), ['at'], unique=False)
        batch_op.create_index(batch_op.f('ix_rateevent_worker_id'), ['worker_id'], unique=False)
    with op.batch_alter_table('adminuser', schema=None) as batch_op:
        batch_op.add_column(
            sa.Column('session_version', sa.Integer(), nullable=False, server_default='0')
        )


def downgrade() -> None:
    with op.batch_alter_table('adminuser', schema=None) as batch_op:
        batch_op.drop_column('session_version')
    with op.batch_alter_table('rateevent', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_rateevent_worker_id'))
        batch_op.drop_index(batch_op.f('ix_rateevent_at'))
        batch_op.drop_index('ix_rateevent_kind_key_at')
    op.drop_table('rateevent')
