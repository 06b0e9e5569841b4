"""settlement ledger; platform_study_id named as it is

- platformledger: each unit of work (a vote, a written Example) credited to the one
  submission whose batches hold it, unique on (unit_kind, unit_id), so the database refuses
  to pay a unit twice across submissions, platform studies and concurrent plans;
- platformsubmission.study_id and platformaction.study_id held a platform study's id (the
  Study's id is platformstudy.study_id): renamed platform_study_id, as platformcall has it.

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-26 09:00:00
"""
from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel.sql.sqltypes
from alembic import op

import vsr_core.types

revision: str = '0011'
down_revision: str | None = '0010'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_S = sqlmodel.sql.sqltypes.AutoString


def _rename(table: str, old: str, new: str) -> None:
    with op.batch_alter_table(table, schema=None) as batch_op:
        batch_op.drop_index(f'ix_{table}_{old}')
        batch_op.alter_column(old, new_column_name=new, existing_type=sa.Integer(),
                              existing_nullable=False)
    op.create_index(f'ix_{table}_{new}', table, [new])


def upgrade() -> None:
    _rename('platformsubmission', 'study_id', 'platform_study_id')
    _rename('platformaction', 'study_id', 'platform_study_id')
    op.create_table(
        'platformledger',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('unit_kind', _S(length=16), nullable=False),
        sa.Column('unit_id', sa.Integer(), nullable=False),
        sa.Column('platform_study_id', sa.Integer(), nullable=False),
        sa.Column('submission_id', sa.Integer(), nullable=False),
        sa.Column('batch_id', sa.Integer(), nullable=False),
        sa.Column('kept', sa.Boolean(), nullable=False),
        sa.Column('cents', sa.Integer(), nullable=False),
        sa.Column('bonus_action_id', sa.Integer(), nullable=True),
        sa.Column('created_at', vsr_core.types.UTCDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(['platform_study_id'], ['platformstudy.id'], ),
        sa.ForeignKeyConstraint(['submission_id'], ['platformsubmission.id'], ),
        sa.ForeignKeyConstraint(['batch_id'], ['batch.id'], ),
        sa.ForeignKeyConstraint(['bonus_action_id'], ['platformaction.id'], ),
        sa.PrimaryKeyConstraint('id'),
        sa.UniqueConstraint('unit_kind', 'unit_id', name='uq_ledger_unit'),
    )
    with op.batch_alter_table('platformledger', schema=None) as batch_op:
        batch_op.create_index('ix_platformledger_platform_study_id', ['platform_study_id'])
        batch_op.create_index('ix_platformledger_submission_id', ['submission_id'])


def downgrade() -> None:
    op.drop_table('platformledger')
    _rename('platformaction', 'platform_study_id', 'study_id')
    _rename('platformsubmission', 'platform_study_id', 'study_id')
