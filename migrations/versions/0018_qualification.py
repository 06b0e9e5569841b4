"""qualificationattempt: the tries of a study's qualification check

One row per try of a worker at a task's check (docs/studies.md, "Qualification"); the unique
key on (study, worker, kind, attempt) counts the tries, so two tabs cannot make a third.

Revision ID: 0018
Revises: 0017
Create Date: 2026-11-26 16:00:00
"""
from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel.sql.sqltypes
from alembic import op

import vsr_core.types

revision: str = '0018'
down_revision: str | None = '0017'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        'qualificationattempt',
        sa.Column('study_id', sa.Integer(), server_default='1', nullable=False),
        sa.Column('answers', vsr_core.types.JSONType, nullable=False),
        sa.Column('at', vsr_core.types.UTCDateTime(timezone=True), nullable=False),
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('worker_id', sa.Integer(), nullable=False),
        sa.Column('kind', sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False),
        sa.Column('attempt', sa.Integer(), nullable=False),
        sa.Column('score', sa.Integer(), nullable=False),
        sa.Column('shown', sa.Integer(), nullable=False),
        sa.Column('passed', sa.Boolean(), nullable=False),
        sa.ForeignKeyConstraint(['study_id'], ['study.id']),
        sa.ForeignKeyConstraint(['worker_id'], ['worker.id']),
        sa.PrimaryKeyConstraint('id'),
        sa.UniqueConstraint(
            'study_id', 'worker_id', 'kind', 'attempt', name='uq_qualification_try'
        ),
    )
    op.create_index(
        op.f('ix_qualificationattempt_study_id'), 'qualificationattempt', ['study_id'], unique=False
    )
    op.create_index(
        op.f('ix_qualificationattempt_worker_id'),
        'qualificationattempt',
        ['worker_id'],
        unique=False,
    )


def downgrade() -> None:
    op.drop_index(op.f('ix_qualificationattempt_worker_id'), table_name='qualificationattempt')
    op.drop_index(op.f('ix_qualificationattempt_study_id'), table_name='qualificationattempt')
    op.drop_table('qualificationattempt')
