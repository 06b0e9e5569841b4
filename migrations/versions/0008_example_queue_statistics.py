"""extended statistics on the validation queue's columns of example (PostgreSQL)

The queue's candidate query (webapp.validate.statements) filters open, non-gold Examples of
one study and of the votable origins. PostgreSQL multiplies the shares of those conditions as
if they were independent, but they are not: every open Example is a human (or adversarial,
re-validation) one, while imported history is settled. At 10x VSR (128,090 imported, 4,000
open) that put the open human Examples at 3 % of 3 % of the table, about one candidate
expected in ~100 rows, and the planner read, sorted and filtered all 3,000 open Examples per
lease (2-11 ms, bench/load/explain.py) instead of walking ix_example_open in id order to the
first free one (0.3 ms). An MCV list over these low-cardinality columns gives it the real
combinations; ANALYZE (autovacuum, ``vsr import-vsr``) keeps it current. SQLite has no such
thing.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-24 15:10:00
"""
from collections.abc import Sequence

from alembic import op

revision: str = '0008'
down_revision: str | None = '0007'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    if op.get_bind().dialect.name == 'postgresql':
        op.execute(
            'CREATE STATISTICS IF NOT EXISTS st_example_queue (mcv) '
            'ON study_id, queue_open, is_gold, origin FROM example'
        )
        op.execute('ANALYZE example')


def downgrade() -> None:
    if op.get_bind().dialect.name == 'postgresql':
        op.execute('DROP STATISTICS IF EXISTS st_example_queue')
