"""Alembic environment and revisions: the only way the schema is created or changed."""
