"""study.archived_at and studyversion: a stored study can be updated and archived

`vsr study update --file F` stores a new version of a study's definition (refused where it
would invalidate collected data) and keeps every earlier one with its hash in studyversion;
`vsr study archive S` sets archived_at, after which the study takes no new workers or
batches. Every existing study gets its stored definition as version 1.

Revision ID: 0016
Revises: 0012
Create Date: 2026-11-26 09:30:00
"""
from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel.sql.sqltypes
from alembic import op

import vsr_core.types

revision: str = '0016'
down_revision: str | None = '0012'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('study', schema=None) as batch_op:
        batch_op.add_column(
            sa.Column('archived_at', vsr_core.types.UTCDateTime(timezone=True), nullable=True)
        )
    op.create_table(
        'studyversion',
        sa.Column('study_id', sa.Integer(), nullable=False),
        sa.Column('version', sa.Integer(), nullable=False),
        sa.Column('definition', sa.Text(), nullable=False),
        sa.Column('definition_hash', sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column('created_at', vsr_core.types.UTCDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(['study_id'], ['study.id']),
        sa.PrimaryKeyConstraint('study_id', 'version'),
    )
    op.execute(
        "INSERT INTO studyversion (study_id, version, definition, definition_hash, created_at) "
        "SELECT id, 1, definition, definition_hash, created_at FROM study"
    )


def downgrade() -> None:
    op.drop_table('studyversion')
    with op.batch_alter_table('study', schema=None) as batch_op:
        batch_op.drop_column('archived_at')
