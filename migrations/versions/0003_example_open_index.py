"""partial index of the open, non-gold Examples the validation queue walks

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-21 09:25:00
"""
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0003'
down_revision: str | None = '0002'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('example', schema=None) as batch_op:
        batch_op.create_index(
            'ix_example_open', ['id'], unique=False,
            postgresql_where=sa.text('queue_open AND NOT is_gold'),
            sqlite_where=sa.text('queue_open AND NOT is_gold'),
        )


def downgrade() -> None:
    with op.batch_alter_table('example', schema=None) as batch_op:
        batch_op.drop_index('ix_example_open')
