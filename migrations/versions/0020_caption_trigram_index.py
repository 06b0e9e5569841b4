"""trigram index on example.caption for the data page's substring search (PostgreSQL)

The data page finds Examples whose caption contains the admin's text (``ILIKE '%text%'``). A
B-tree cannot serve a pattern with a leading wildcard, so without this PostgreSQL reads every
caption: at 100x (1.28 million Examples) a search that matches nothing cost a full scan. A GIN
index of the captions' trigrams (the pg_trgm extension, shipped with PostgreSQL) answers
``ILIKE`` with three or more characters from the index. SQLite has no such index and keeps
its scan: nothing is done there.

Revision ID: 0020
Revises: 0019
Create Date: 2026-11-26 16:00:00
"""
from collections.abc import Sequence

from alembic import op

revision: str = '0020'
down_revision: str | None = '0019'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    if op.get_bind().dialect.name != 'postgresql':
        return
    op.execute('CREATE EXTENSION IF NOT EXISTS pg_trgm')
    op.create_index(
        'ix_example_caption_trgm', 'example', ['caption'], unique=False,
        postgresql_using='gin', postgresql_ops={'caption': 'gin_trgm_ops'},
    )


def downgrade() -> None:
    if op.get_bind().dialect.name != 'postgresql':
        return
    op.drop_index('ix_example_caption_trgm', table_name='example')
    # The extension stays: other databases' objects may use it, and it costs nothing idle.
