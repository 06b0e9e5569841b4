"""crowd platforms: studies, submissions, planned actions and the call log

- platformstudy: our study on Prolific / MTurk (external id, state, settings);
- platformsubmission: synced submissions/assignments with their quality figures;
- platformaction: approve/reject/return/bonus with a unique idempotency key and a
  planned -> sending -> done|failed state, so a crash never pays twice;
- platformcall: every request and answer (tokens redacted).

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-23 03:30:00
"""
from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel.sql.sqltypes
from alembic import op

import vsr_core.types

revision: str = '0006'
down_revision: str | None = '0005'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_S = sqlmodel.sql.sqltypes.AutoString
_TS = vsr_core.types.UTCDateTime
_J = vsr_core.types.JSONType


def upgrade() -> None:
    op.create_table(
        'platformstudy',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('platform', _S(length=16), nullable=False),
        sa.Column('external_id', _S(length=128), nullable=False),
        sa.Column('state', _S(length=32), nullable=False),
        sa.Column('settings', _J, nullable=False),
        sa.Column('created_at', _TS(timezone=True), nullable=False),
        sa.Column('synced_at', _TS(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint('id'),
        sa.UniqueConstraint('platform', 'external_id'),
    )
    op.create_table(
        'platformsubmission',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('study_id', sa.Integer(), nullable=False),
        sa.Column('platform', _S(length=16), nullable=False),
        sa.Column('external_id', _S(length=128), nullable=False),
        sa.Column('worker_external_id', _S(length=128), nullable=False),
        sa.Column('status', _S(length=32), nullable=False),
        sa.Column('worker_id', sa.Integer(), nullable=True),
        sa.Column('quality', _J, nullable=False),
        sa.Column('synced_at', _TS(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(['study_id'], ['platformstudy.id'], ),
        sa.ForeignKeyConstraint(['worker_id'], ['worker.id'], ),
        sa.PrimaryKeyConstraint('id'),
        sa.UniqueConstraint('platform', 'external_id'),
    )
    with op.batch_alter_table('platformsubmission', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_platformsubmission_study_id'), ['study_id'])
        batch_op.create_index(
            batch_op.f('ix_platformsubmission_worker_external_id'), ['worker_external_id']
        )
        batch_op.create_index(batch_op.f('ix_platformsubmission_worker_id'), ['worker_id'])
    op.create_table(
        'platformaction',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('study_id', sa.Integer(), nullable=False),
        sa.Column('platform', _S(length=16), nullable=False),
        sa.Column('kind', _S(length=16), nullable=False),
        sa.Column('target', _S(length=128), nullable=False),
        sa.Column('amount_cents', sa.Integer(), nullable=True),
        sa.Column('reason', _S(length=500), nullable=False),
        sa.Column('idempotency_key', _S(length=128), nullable=False),
        sa.Column('state', _S(length=16), nullable=False),
        sa.Column('response', _J, nullable=True),
        sa.Column('created_at', _TS(timezone=True), nullable=False),
        sa.Column('sent_at', _TS(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(['study_id'], ['platformstudy.id'], ),
        sa.PrimaryKeyConstraint('id'),
    )
    with op.batch_alter_table('platformaction', schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f('ix_platformaction_idempotency_key'), ['idempotency_key'], unique=True
        )
        batch_op.create_index(batch_op.f('ix_platformaction_state'), ['state'])
        batch_op.create_index(batch_op.f('ix_platformaction_study_id'), ['study_id'])
    op.create_table(
        'platformcall',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('platform', _S(length=16), nullable=False),
        sa.Column('method', _S(length=64), nullable=False),
        sa.Column('path', _S(length=500), nullable=False),
        sa.Column('request', _J, nullable=True),
        sa.Column('status', sa.Integer(), nullable=True),
        sa.Column('response', _J, nullable=True),
        sa.Column('error', _S(length=500), nullable=False),
        sa.Column('at', _TS(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint('id'),
    )
    with op.batch_alter_table('platformcall', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_platformcall_at'), ['at'])
        batch_op.create_index(batch_op.f('ix_platformcall_platform'), ['platform'])


def downgrade() -> None:
    op.drop_table('platformcall')
    op.drop_table('platformaction')
    op.drop_table('platformsubmission')
    op.drop_table('platformstudy')
