"""validation queue state on example

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-21 07:50:00
"""
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0002'
down_revision: str | None = '0001'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('example', schema=None) as batch_op:
        batch_op.add_column(sa.Column('queue_votes', sa.Integer(), nullable=False, server_default='0'))
        batch_op.add_column(sa.Column('queue_agree', sa.Integer(), nullable=False, server_default='0'))
        batch_op.add_column(sa.Column('queue_leases', sa.Integer(), nullable=False, server_default='0'))
        batch_op.add_column(sa.Column('queue_settled', sa.Boolean(), nullable=False, server_default=sa.false()))
        batch_op.add_column(sa.Column('queue_open', sa.Boolean(), nullable=False, server_default=sa.true()))
        batch_op.create_index('ix_example_queue', ['queue_open', 'is_gold', 'id'], unique=False)
    # Existing rows start from the truth in vote/assignment (the queue keeps them in step after).
    op.execute(
        "UPDATE example SET "
        "queue_votes = (SELECT count(*) FROM vote v WHERE v.example_id = example.id), "
        "queue_agree = (SELECT count(*) FROM vote v WHERE v.example_id = example.id "
        "AND v.value = example.label), "
        "queue_leases = (SELECT count(*) FROM assignment a WHERE a.example_id = example.id "
        "AND a.status = 'active')"
    )


def downgrade() -> None:
    with op.batch_alter_table('example', schema=None) as batch_op:
        batch_op.drop_index('ix_example_queue')
        batch_op.drop_column('queue_open')
        batch_op.drop_column('queue_settled')
        batch_op.drop_column('queue_leases')
        batch_op.drop_column('queue_agree')
        batch_op.drop_column('queue_votes')
