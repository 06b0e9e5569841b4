"""every study gets its own random completion and screen-out codes

The study-level completion code defaulted to the fixed word VSRDONE (screen-out VSRSCREEN):
a code anyone who took part once could reuse, for invite links and for Prolific studies a
lab set up by hand. Each study without a code of its own, or with one of those two words,
gets a random 12-character code (letters and digits, from `secrets`), as new studies do.

Revision ID: 0022
Revises: 0021
Create Date: 2026-11-28 16:40:00
"""

import secrets
import string
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0022'
down_revision: str | None = '0021'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_FIXED = {'completion_code': 'VSRDONE', 'screenout_code': 'VSRSCREEN'}
_ALPHABET = string.ascii_uppercase + string.digits


def _code() -> str:
    return ''.join(secrets.choice(_ALPHABET) for _ in range(12))


_SETTING = sa.table(
    'studysetting',
    sa.column('study_id', sa.Integer),
    sa.column('key', sa.String),
    sa.column('value', sa.JSON),
    sa.column('updated_at', sa.DateTime),
)


def upgrade() -> None:
    bind = op.get_bind()
    now = sa.func.current_timestamp()
    studies = [r[0] for r in bind.execute(sa.text('SELECT id FROM study'))]
    for study_id in studies:
        for key, fixed in _FIXED.items():
            where = sa.and_(_SETTING.c.study_id == study_id, _SETTING.c.key == key)
            row = bind.execute(sa.select(_SETTING.c.value).where(where)).first()
            if row is not None and row[0] and row[0] != fixed:
                continue  # a code the lab chose stays
            if row is None:
                bind.execute(
                    _SETTING.insert().values(
                        study_id=study_id, key=key, value=_code(), updated_at=now
                    )
                )
            else:
                bind.execute(_SETTING.update().where(where).values(value=_code(), updated_at=now))


def downgrade() -> None:
    pass  # the random codes stay: going back to a guessable word would reopen the hole
