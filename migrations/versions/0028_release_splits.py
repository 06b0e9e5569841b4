"""release splits: which part of an imported release's split scheme each Example is in

``vsr import-vsr`` of a release folder reads its split files (``splits/random/train.jsonl``
...) into this table, so ``build-dataset --vsr-compatible`` writes the release's own
splits back instead of drawing new ones (docs/dataset.md).

Revision ID: 0028
Revises: 0027
Create Date: 2026-11-28 23:50:00
"""
from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel.sql.sqltypes
from alembic import op

revision: str = '0028'
down_revision: str | None = '0027'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        'releasesplit',
        sa.Column('example_id', sa.Integer(), nullable=False),
        sa.Column('scheme', sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False),
        sa.Column('part', sqlmodel.sql.sqltypes.AutoString(length=8), nullable=False),
        sa.ForeignKeyConstraint(['example_id'], ['example.id']),
        sa.PrimaryKeyConstraint('example_id', 'scheme'),
    )


def downgrade() -> None:
    op.drop_table('releasesplit')
