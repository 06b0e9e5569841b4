"""the queue's open-Example index names the votable origins in its predicate

ix_example_open holds a study's open, non-gold Examples in id order, and the validation
queue walks it to the first free one. The queue's statements also ask for the votable origins
(human, adversarial, revalidation). With 100x VSR imported below the open Examples (1.28
million settled "imported" rows, ~4,000 open), PostgreSQL took the origin test for a very
selective one, combined ix_example_open with ix_example_origin in a bitmap, and read and
sorted every open Example per lease (~240 buffers, against ~30 at 1x; bench/load/explain.py):
PostgreSQL's CPU per vote grew with the history. With the origins in the index's predicate
the planner knows every row of the index passes that test and walks it in id order (the
plan the queue had at 1x and 10x). The rows the index holds do not change for the queue:
open Examples of other origins are never served.

Revision ID: 0027
Revises: 0026
Create Date: 2026-11-28 23:45:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0027"
down_revision: str | None = "0026"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# As vsr_core.models.IN_QUEUE at this revision (a migration does not follow later changes).
IN_QUEUE = "queue_open AND NOT is_gold AND origin IN ('human', 'adversarial', 'revalidation')"
OPEN = "queue_open AND NOT is_gold"


def _index(where: str) -> None:
    with op.batch_alter_table("example", schema=None) as batch_op:
        batch_op.drop_index("ix_example_open")
        batch_op.create_index(
            "ix_example_open",
            ["study_id", "id"],
            unique=False,
            postgresql_where=sa.text(where),
            sqlite_where=sa.text(where),
        )


def upgrade() -> None:
    _index(IN_QUEUE)


def downgrade() -> None:
    _index(OPEN)
