"""platformcall.platform_study_id: each platform study's page shows its own calls

The call log was kept per platform, so the Platforms page of one study listed the calls made
for every study's Prolific studies or MTurk HITs (a leak across studies, and noise). Calls
now name their platform study. Existing rows are traced where the call itself says which
study it was for: a Prolific path under /studies/<id>/, or under /submissions/<id>/ of a
synced submission. The rest (MTurk's, bonus payments, failed creates) stay unattributed:
kept in the table, shown on no study's page.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-25 13:20:00
"""
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0009'
down_revision: str | None = '0008'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('platformcall', schema=None) as batch_op:
        batch_op.add_column(sa.Column('platform_study_id', sa.Integer(), nullable=True))
        batch_op.create_index(
            batch_op.f('ix_platformcall_platform_study_id'), ['platform_study_id']
        )
        batch_op.create_foreign_key(
            batch_op.f('fk_platformcall_platform_study_id_platformstudy'),
            'platformstudy', ['platform_study_id'], ['id'],
        )
    op.execute(
        "UPDATE platformcall SET platform_study_id = (SELECT ps.id FROM platformstudy ps "
        "WHERE ps.platform = platformcall.platform "
        "AND platformcall.path LIKE '%/studies/' || ps.external_id || '/%' "
        "ORDER BY ps.id LIMIT 1) WHERE platform_study_id IS NULL"
    )
    op.execute(
        "UPDATE platformcall SET platform_study_id = (SELECT s.study_id FROM platformsubmission s "
        "WHERE s.platform = platformcall.platform "
        "AND platformcall.path LIKE '%/submissions/' || s.external_id || '/%' "
        "ORDER BY s.id LIMIT 1) WHERE platform_study_id IS NULL"
    )


def downgrade() -> None:
    with op.batch_alter_table('platformcall', schema=None) as batch_op:
        batch_op.drop_constraint(
            batch_op.f('fk_platformcall_platform_study_id_platformstudy'), type_='foreignkey'
        )
        batch_op.drop_index(batch_op.f('ix_platformcall_platform_study_id'))
        batch_op.drop_column('platform_study_id')
