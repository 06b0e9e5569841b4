"""workerstanding, admintoken, auditevent.os_login, rateevent.study_id: workers per study, proven CLI actors

A worker's block and flag (and their reasons) become per study (workerstanding); the
worker's own columns stay as the standing in every study, so a block made before this
revision still holds everywhere; rateevent.study_id names the study a new identity was
made entering (the dashboard's bursts are per study). admintoken keeps the SHA-256 of revocable CLI tokens.
auditevent.os_login records the operating-system login that ran a CLI command; it is an
added column (no table rebuild on SQLite, so migration 0017's triggers stay).

Revision ID: 0023
Revises: 0022
Create Date: 2026-11-28 16:30:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel.sql.sqltypes
from alembic import op

import vsr_core.types

revision: str = "0023"
down_revision: str | None = '0022'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "workerstanding",
        sa.Column("worker_id", sa.Integer(), nullable=False),
        sa.Column("study_id", sa.Integer(), nullable=False),
        sa.Column("blocked", sa.Boolean(), nullable=False),
        sa.Column("block_reason", sqlmodel.sql.sqltypes.AutoString(length=500), nullable=True),
        sa.Column("flagged", sa.Boolean(), nullable=False),
        sa.Column("flag_reason", sqlmodel.sql.sqltypes.AutoString(length=500), nullable=True),
        sa.Column("changed_at", vsr_core.types.UTCDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["study_id"], ["study.id"]),
        sa.ForeignKeyConstraint(["worker_id"], ["worker.id"]),
        sa.PrimaryKeyConstraint("worker_id", "study_id"),
    )
    op.create_index(
        op.f("ix_workerstanding_study_id"), "workerstanding", ["study_id"], unique=False
    )
    op.create_table(
        "admintoken",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("admin_id", sa.Integer(), nullable=False),
        sa.Column("token_hash", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column("label", sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
        sa.Column("created_at", vsr_core.types.UTCDateTime(timezone=True), nullable=False),
        sa.Column("revoked_at", vsr_core.types.UTCDateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(["admin_id"], ["adminuser.id"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("token_hash"),
    )
    op.create_index(op.f("ix_admintoken_admin_id"), "admintoken", ["admin_id"], unique=False)
    op.add_column("rateevent", sa.Column("study_id", sa.Integer(), nullable=True))
    op.add_column(
        "auditevent",
        sa.Column("os_login", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=True),
    )


def downgrade() -> None:
    op.drop_column("auditevent", "os_login")
    op.drop_column("rateevent", "study_id")
    op.drop_index(op.f("ix_admintoken_admin_id"), table_name="admintoken")
    op.drop_table("admintoken")
    op.drop_index(op.f("ix_workerstanding_study_id"), table_name="workerstanding")
    op.drop_table("workerstanding")
