"""study.definition: drop image_root / image_url from [[sources]]

Study files accepted these keys but nothing ever read them (the site finds images in the
server's IMAGE_ROOT, else at each image's coco_url). The parser now refuses them with a line
that says so; the definitions stored before (the default study's among them) lose those lines
here, so every stored study still parses. The hash follows the new text.

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-26 09:20:00
"""
import hashlib
import re
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0012'
down_revision: str | None = '0011'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# One key per line with a plain string value (the only form the old parser's checks let
# through in practice), an optional comment, and its line end.
_REMOVED = re.compile(
    r'^[ \t]*image_(?:root|url)[ \t]*=[ \t]*(?:"[^"\n]*"|\'[^\'\n]*\')[ \t]*(?:#[^\n]*)?(?:\r?\n|\Z)',
    re.MULTILINE,
)


def upgrade() -> None:
    conn = op.get_bind()
    for study_id, text in conn.execute(sa.text('SELECT id, definition FROM study')).all():
        new = _REMOVED.sub('', text)
        if new != text:
            conn.execute(
                sa.text('UPDATE study SET definition = :d, definition_hash = :h WHERE id = :i'),
                {'d': new, 'h': hashlib.sha256(new.encode('utf-8')).hexdigest(), 'i': study_id},
            )


def downgrade() -> None:
    # Nothing to put back: the keys were never read.
    pass
