"""The vote API's lean PostgreSQL pool (vsr_core.db.make_lean_engine) reuses one plan per
prepared statement, and keeps the server options a deployment put in DATABASE_URL."""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.engine import make_url

from vsr_core.db import make_engine, make_lean_engine


def test_lean_pool_forces_generic_plans_and_keeps_the_urls_options(pg_url: str) -> None:
    url = make_url(pg_url).update_query_dict({"options": "-c statement_timeout=4321"})
    engine = make_engine(url.render_as_string(hide_password=False))
    lean = make_lean_engine(engine, 1)
    try:
        with lean.connect() as conn:
            assert conn.execute(text("SHOW plan_cache_mode")).scalar() == "force_generic_plan"
            assert conn.execute(text("SHOW statement_timeout")).scalar() == "4321ms"
        with engine.connect() as conn:  # the main pool is left as PostgreSQL plans by default
            assert conn.execute(text("SHOW plan_cache_mode")).scalar() == "auto"
    finally:
        lean.dispose()
        engine.dispose()
