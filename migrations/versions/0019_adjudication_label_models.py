"""adjudication and label models: an admin's settlement of an Example; label models' fits

adjudication holds the current settlement of an Example (final label or excluded, with a
reason); its history is the audit trail. labelmodelfit / labelmodeldecision /
labelmodelworker cache a label model's last fit on a study's votes (its label per Example
and its estimate per validator), read by every count when the study's keep rule is that model.

Revision ID: 0019
Revises: 0018
Create Date: 2026-11-26 16:00:00
"""
from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel.sql.sqltypes
from alembic import op

import vsr_core.types

revision: str = '0019'
down_revision: str | None = '0018'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        'adjudication',
        sa.Column('example_id', sa.Integer(), nullable=False),
        sa.Column('study_id', sa.Integer(), server_default='1', nullable=False),
        sa.Column('decision', sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False),
        sa.Column('reason', sqlmodel.sql.sqltypes.AutoString(length=500), nullable=False),
        sa.Column('admin_id', sa.Integer(), nullable=True),
        sa.Column('admin_name', sqlmodel.sql.sqltypes.AutoString(length=128), nullable=False),
        sa.Column('at', vsr_core.types.UTCDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(['admin_id'], ['adminuser.id']),
        sa.ForeignKeyConstraint(['example_id'], ['example.id']),
        sa.ForeignKeyConstraint(['study_id'], ['study.id']),
        sa.PrimaryKeyConstraint('example_id'),
    )
    op.create_index(op.f('ix_adjudication_study_id'), 'adjudication', ['study_id'], unique=False)
    op.create_table(
        'labelmodelfit',
        sa.Column('study_id', sa.Integer(), nullable=False),
        sa.Column('model', sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False),
        sa.Column('fitted_at', vsr_core.types.UTCDateTime(timezone=True), nullable=False),
        sa.Column('votes', sa.Integer(), nullable=False),
        sa.Column('last_vote_id', sa.Integer(), nullable=False),
        sa.Column('examples', sa.Integer(), nullable=False),
        sa.Column('workers', sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(['study_id'], ['study.id']),
        sa.PrimaryKeyConstraint('study_id', 'model'),
    )
    op.create_table(
        'labelmodeldecision',
        sa.Column('model', sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False),
        sa.Column('example_id', sa.Integer(), nullable=False),
        sa.Column('study_id', sa.Integer(), nullable=False),
        sa.Column('label', sa.Boolean(), nullable=False),
        sa.Column('confidence', sa.Float(), nullable=False),
        sa.ForeignKeyConstraint(['example_id'], ['example.id']),
        sa.ForeignKeyConstraint(['study_id'], ['study.id']),
        sa.PrimaryKeyConstraint('model', 'example_id'),
    )
    op.create_index(
        'ix_labelmodeldecision_study_model',
        'labelmodeldecision',
        ['study_id', 'model'],
        unique=False,
    )
    op.create_table(
        'labelmodelworker',
        sa.Column('study_id', sa.Integer(), nullable=False),
        sa.Column('model', sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False),
        sa.Column('worker_id', sa.Integer(), nullable=False),
        sa.Column('skill', sa.Float(), nullable=False),
        sa.Column('votes', sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(['study_id'], ['study.id']),
        sa.ForeignKeyConstraint(['worker_id'], ['worker.id']),
        sa.PrimaryKeyConstraint('study_id', 'model', 'worker_id'),
    )


def downgrade() -> None:
    op.drop_table('labelmodelworker')
    op.drop_index('ix_labelmodeldecision_study_model', table_name='labelmodeldecision')
    op.drop_table('labelmodeldecision')
    op.drop_table('labelmodelfit')
    op.drop_index(op.f('ix_adjudication_study_id'), table_name='adjudication')
    op.drop_table('adjudication')
