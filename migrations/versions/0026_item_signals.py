"""item signals: how each answer was given, as the task page measured it

One row per vote (or caption) sent from the task page: time from the photo on screen to the
answer, focus changes, pointer and key activity counts (never content), a paste, a hidden
canary acted on. Read by the authenticity evidence (docs/quality.md); the vote table is not
touched, so the vote's Example counter update stays HOT (migration 0004).

Revision ID: 0026
Revises: 0023
Create Date: 2026-11-28 17:00:00
"""
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import vsr_core.types

revision: str = '0026'
down_revision: str | None = '0023'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        'itemsignal',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('study_id', sa.Integer(), nullable=False),
        sa.Column('worker_id', sa.Integer(), nullable=False),
        sa.Column('vote_id', sa.Integer(), nullable=True),
        sa.Column('annotation_id', sa.Integer(), nullable=True),
        sa.Column('shown_ms', sa.Integer(), nullable=True),
        sa.Column('image_shown', sa.Boolean(), nullable=False),
        sa.Column('focus_changes', sa.Integer(), nullable=False),
        sa.Column('pointer_events', sa.Integer(), nullable=False),
        sa.Column('key_events', sa.Integer(), nullable=False),
        sa.Column('canary', sa.Boolean(), nullable=False),
        sa.Column('pasted', sa.Boolean(), nullable=False),
        sa.Column('created_at', vsr_core.types.UTCDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(['annotation_id'], ['annotation.id']),
        sa.ForeignKeyConstraint(['study_id'], ['study.id']),
        sa.ForeignKeyConstraint(['vote_id'], ['vote.id']),
        sa.ForeignKeyConstraint(['worker_id'], ['worker.id']),
        sa.PrimaryKeyConstraint('id'),
        sa.UniqueConstraint('annotation_id'),
        sa.UniqueConstraint('vote_id'),
    )
    op.create_index(op.f('ix_itemsignal_study_id'), 'itemsignal', ['study_id'], unique=False)
    op.create_index(op.f('ix_itemsignal_worker_id'), 'itemsignal', ['worker_id'], unique=False)


def downgrade() -> None:
    op.drop_index(op.f('ix_itemsignal_worker_id'), table_name='itemsignal')
    op.drop_index(op.f('ix_itemsignal_study_id'), table_name='itemsignal')
    op.drop_table('itemsignal')
