"""studyrolegrant and auditevent: roles per study and an append-only audit trail

An admin's role in a study (owner, researcher, viewer) is a studyrolegrant row; every admin
who existed before becomes owner of every study, so nobody loses access they had. auditevent
records every admin action; the database refuses UPDATE, DELETE and (PostgreSQL) TRUNCATE on
it with triggers, so no code path, only someone who drops the triggers, can change the trail.

Revision ID: 0017
Revises: 0016
Create Date: 2026-11-26 15:40:00
"""
from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel.sql.sqltypes
from alembic import op

import vsr_core.types

revision: str = '0017'
down_revision: str | None = '0016'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_PG_TRIGGERS = [
    """
    CREATE FUNCTION auditevent_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        RAISE EXCEPTION 'the audit trail is append-only: % on auditevent refused', TG_OP
            USING ERRCODE = 'insufficient_privilege';
    END $$
    """,
    "CREATE TRIGGER auditevent_no_change BEFORE UPDATE OR DELETE ON auditevent "
    "FOR EACH ROW EXECUTE FUNCTION auditevent_append_only()",
    "CREATE TRIGGER auditevent_no_truncate BEFORE TRUNCATE ON auditevent "
    "FOR EACH STATEMENT EXECUTE FUNCTION auditevent_append_only()",
]
_SQLITE_TRIGGERS = [
    "CREATE TRIGGER auditevent_no_update BEFORE UPDATE ON auditevent "
    "BEGIN SELECT RAISE(ABORT, 'the audit trail is append-only: UPDATE on auditevent refused'); END",
    "CREATE TRIGGER auditevent_no_delete BEFORE DELETE ON auditevent "
    "BEGIN SELECT RAISE(ABORT, 'the audit trail is append-only: DELETE on auditevent refused'); END",
]


def upgrade() -> None:
    op.create_table(
        'studyrolegrant',
        sa.Column('admin_id', sa.Integer(), nullable=False),
        sa.Column('study_id', sa.Integer(), nullable=False),
        sa.Column('role', sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False),
        sa.Column('granted_at', vsr_core.types.UTCDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(['admin_id'], ['adminuser.id']),
        sa.ForeignKeyConstraint(['study_id'], ['study.id']),
        sa.PrimaryKeyConstraint('admin_id', 'study_id'),
    )
    op.create_index(
        op.f('ix_studyrolegrant_study_id'), 'studyrolegrant', ['study_id'], unique=False
    )
    op.create_table(
        'auditevent',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('at', vsr_core.types.UTCDateTime(timezone=True), nullable=False),
        sa.Column('actor_id', sa.Integer(), nullable=True),
        sa.Column('actor', sqlmodel.sql.sqltypes.AutoString(length=128), nullable=False),
        sa.Column('study_id', sa.Integer(), nullable=True),
        sa.Column('kind', sqlmodel.sql.sqltypes.AutoString(length=32), nullable=False),
        sa.Column('target', sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
        sa.Column('change', vsr_core.types.JSONType, nullable=False),
        sa.Column('via', sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False),
        sa.PrimaryKeyConstraint('id'),
    )
    op.create_index(op.f('ix_auditevent_at'), 'auditevent', ['at'], unique=False)
    op.create_index(op.f('ix_auditevent_actor_id'), 'auditevent', ['actor_id'], unique=False)
    op.create_index(op.f('ix_auditevent_study_id'), 'auditevent', ['study_id'], unique=False)
    op.create_index(op.f('ix_auditevent_kind'), 'auditevent', ['kind'], unique=False)
    op.create_index('ix_auditevent_study_at', 'auditevent', ['study_id', 'at'], unique=False)
    triggers = _PG_TRIGGERS if op.get_bind().dialect.name == 'postgresql' else _SQLITE_TRIGGERS
    for statement in triggers:
        op.execute(statement)
    # Nobody loses access: every existing admin is owner of every existing study.
    op.get_bind().execute(
        sa.text(
            "INSERT INTO studyrolegrant (admin_id, study_id, role, granted_at) "
            "SELECT adminuser.id, study.id, 'owner', :now FROM adminuser, study"
        ).bindparams(sa.bindparam('now', type_=vsr_core.types.UTCDateTime())),
        {'now': vsr_core.types.utcnow()},
    )


def downgrade() -> None:
    if op.get_bind().dialect.name == 'postgresql':
        op.execute("DROP TABLE auditevent")
        op.execute("DROP FUNCTION auditevent_append_only()")
    else:
        op.drop_table('auditevent')
    op.drop_index(op.f('ix_studyrolegrant_study_id'), table_name='studyrolegrant')
    op.drop_table('studyrolegrant')
