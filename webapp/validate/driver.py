"""The hot path's prebuilt statements run straight on the psycopg connection (PostgreSQL).

Why not ``Connection.execute``: SQLAlchemy's execution layer (the statement's cache key, an
execution context, the result's set-up) costs more CPU than psycopg's own work for these
one-row statements: on the 2-core benchmark machine 0.25-0.28 ms per statement against
0.10-0.13 ms straight on the cursor, and a validation round trip runs four of them
(bench/load/inprocess.py prints the whole round trip's CPU). What SQLAlchemy did for them is
kept: the statement is compiled by SQLAlchemy (once), its constants are bound, every value
goes through its column type's bind processor and every result through its result processor
(``UTCDateTime``), rows read by name, and errors come out as SQLAlchemy's ``DBAPIError``
classes; a lost connection is handed to SQLAlchemy, which invalidates the pool as before
(``vsr_core.db.is_dropped_connection``). Statements it cannot run this way (expanding IN
lists, escaped bind names, Python-side column defaults) go through SQLAlchemy, and so does
every statement while something listens to SQLAlchemy's statement events or SQL is echoed.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg.pq import ExecStatus
from psycopg.rows import namedtuple_row
from sqlalchemy.engine import Connection, Dialect
from sqlalchemy.exc import DBAPIError, MultipleResultsFound, NoResultFound

Processor = Callable[[Any], Any]
TUPLES_OK = ExecStatus.TUPLES_OK


@dataclass(frozen=True)
class Plan:
    sql: str  # psycopg's %(name)s placeholders
    constants: dict[str, Any]  # values the statement binds itself (enum values, literals)
    binds: tuple[tuple[str, Processor], ...]  # bind processors of the parameters that have one
    results: tuple[Processor | None, ...]  # result processor per column (empty: no rows)


_plans: dict[tuple[int, frozenset[str]], tuple[Any, Plan | None]] = {}
_plans_lock = threading.Lock()
# The hot path's statements are built once per process (a few dozen plans); a caller that
# built a new statement per call would otherwise grow this without end.
MAX_PLANS = 1024


def plan_for(stmt: Any, dialect: Dialect, keys: frozenset[str] = frozenset()) -> Plan | None:
    """The statement compiled for ``dialect`` and the parameter names ``keys`` once (an INSERT
    without explicit values lists just the columns it is given, as SQLAlchemy compiles it);
    None when it must go through SQLAlchemy: expanding IN lists, escaped bind names, or
    column defaults SQLAlchemy computes in Python before it executes."""
    hit = _plans.get((id(stmt), keys))
    if hit is not None and hit[0] is stmt:
        return hit[1]
    compiled = stmt.compile(dialect=dialect, column_keys=sorted(keys))
    binds = compiled.binds.items()  # by the name in the SQL (anonymous ones numbered)
    plan: Plan | None = None
    if not (
        compiled.positional
        or compiled.escaped_bind_names
        or compiled.insert_prefetch
        or compiled.update_prefetch
        or any(b.expanding for _, b in binds)
    ):
        processors = tuple(
            (name, proc)
            for name, b in binds
            if (proc := b.type.bind_processor(dialect)) is not None
        )
        columns = list(getattr(stmt, "exported_columns", []))
        results = tuple(c.type.result_processor(dialect, None) for c in columns)
        constants = {name: b.value for name, b in binds if not b.required and b.callable is None}
        plan = Plan(compiled.string, constants, processors, results)
    with _plans_lock:  # the statement is kept alive with its plan, so its id stays its own
        if len(_plans) < MAX_PLANS:
            _plans[(id(stmt), keys)] = (stmt, plan)
    return plan


class Rows:
    """The part of SQLAlchemy's ``Result`` the hot path uses, over rows already fetched."""

    __slots__ = ("_rows",)

    def __init__(self, rows: Sequence[Any]) -> None:
        self._rows = rows

    def first(self) -> Any:
        return self._rows[0] if self._rows else None

    def one(self) -> Any:
        if not self._rows:
            raise NoResultFound("No row was found when one was required")
        if len(self._rows) > 1:
            raise MultipleResultsFound("Multiple rows were found when exactly one was required")
        return self._rows[0]

    def scalar(self) -> Any:
        return self._rows[0][0] if self._rows else None

    def scalar_one(self) -> Any:
        return self.one()[0]

    def scalars(self) -> Iterator[Any]:
        return (row[0] for row in self._rows)

    def all(self) -> Sequence[Any]:
        return self._rows


def _watched(connection: Connection) -> bool:
    """Statement events have listeners (instrumentation, tests that inject faults) or the
    engine echoes SQL: then every statement goes through SQLAlchemy, so they see it."""
    dispatch = connection.dispatch
    return bool(
        dispatch.before_cursor_execute or dispatch.after_cursor_execute or connection.engine.echo
    )


def execute(connection: Connection, stmt: Any, params: dict[str, Any]) -> Any:
    """``connection.execute(stmt, params)``, on the psycopg cursor when the statement allows."""
    if _watched(connection):
        return connection.execute(stmt, params)
    plan = plan_for(stmt, connection.dialect, frozenset(params))
    if plan is None:
        return connection.execute(stmt, params)
    values = {**plan.constants, **params}
    for name, process in plan.binds:
        if name in values:
            values[name] = process(values[name])
    dbapi_connection = connection.connection.dbapi_connection
    assert dbapi_connection is not None
    # Rows named by psycopg's own row factory: it reads the names off the result once per
    # shape, where cursor.description builds a Column object per column on every call.
    cursor = dbapi_connection.cursor(row_factory=namedtuple_row)
    try:
        cursor.execute(plan.sql, values)
        result = cursor.pgresult
        rows = cursor.fetchall() if result is not None and result.status == TUPLES_OK else []
    except psycopg.Error as exc:
        if connection.dialect.is_disconnect(exc, dbapi_connection, cursor):  # type: ignore[arg-type]
            # The connection is gone: run it through SQLAlchemy, which fails at once on the
            # closed connection and invalidates this and the pool's older connections, as
            # on any other statement (the request is then retried on a fresh one).
            return connection.execute(stmt, params)
        raise DBAPIError.instance(
            plan.sql, values, exc, psycopg.Error, dialect=connection.dialect
        ) from exc
    finally:
        cursor.close()
    results = plan.results
    if rows and any(results):
        if len(results) != len(rows[0]):  # columns the plan could not read
            raise AssertionError(f"expected {len(results)} columns, got {len(rows[0])}")
        make = type(rows[0])._make
        rows = [
            make(v if p is None else p(v) for p, v in zip(results, row, strict=True))
            for row in rows
        ]
    return Rows(rows)
