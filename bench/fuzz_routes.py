"""The bigger fuzz of every route and parameter (the CI one is
tests/webapp/http/test_fuzz_every_param.py) and the races of the dashboard's first writes,
through a real uvicorn on SQLite and PostgreSQL; prints 5xx, dropped connections and
time-outs per backend (docs/security.md). All must be 0.

    python -m bench.fuzz_routes                      # both backends, 20 parallel posts
    python -m bench.fuzz_routes --backends sqlite --parallel 40

Phase 1 runs the CI test's cases with more hostile values (more Unicode digits, look-alikes,
control characters, lone surrogates, SQL and template text, huge and negative numbers).
Phase 2 sends ``--parallel`` first saves of a study setting and as many label-model fits
at one instant, over that many connections, three rounds (each fit or first save raced
into UniqueViolation on PostgreSQL, and SQLite writers waited 30 s).
"""

from __future__ import annotations

import argparse
import http.client
import os
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

os.environ.setdefault("PLATFORM_ID_FORMATS", "safe")
for _name in ("NEW_WORKERS_PER_ADDRESS", "NEW_WORKERS_PER_STUDY", "NEW_BATCHES_PER_ADDRESS"):
    os.environ.setdefault(_name, "0")

from fastapi.testclient import TestClient  # noqa: E402
from sqlalchemy.engine import Engine  # noqa: E402
from sqlmodel import Session, select  # noqa: E402

import tests.webapp.http.test_fuzz_every_param as ci  # noqa: E402
from migrations.runner import upgrade  # noqa: E402
from tests.conftest import COCO_DIR, _create_pg_database, _drop_pg_database  # noqa: E402
from tests.support.admins import create_owner  # noqa: E402
from tests.support.webapp_coco import form_field  # noqa: E402
from tests.webapp.http.test_studies import make_two_studies  # noqa: E402
from vsr_core.db import make_engine  # noqa: E402
from vsr_core.models import StudySetting  # noqa: E402
from vsr_core.settings import Settings  # noqa: E402
from webapp.app import create_app  # noqa: E402

MORE_HOSTILE = {
    "superscript three": "\u00b3",
    "devanagari digit": "\u0967",
    "full-width letters": "\uff21\uff22",
    "cyrillic a": "\u0430",
    "zero-width space": "1\u200b",
    "bom": "\ufeff1",
    "rtl override": "\u202e1",
    "crlf": "1\r\nX-Injected: 1",
    "tab": "\t1",
    "two surrogates": "\udc80\ud800",
    "sql": "1' OR '1'='1",
    "template": "{{7*7}}${7*7}",
    "float": "1e308",
    "nan": "NaN",
    "negative": "-1",
    "zero": "0",
    "int64": "9223372036854775808",
    "empty": "",
}


def _database(backend: str, tmp: Path) -> str:
    url = f"sqlite:///{tmp / 'fuzz.db'}" if backend == "sqlite" else _create_pg_database()
    upgrade(url)
    return url


def _races(app: Any, cookie: str, token: str, parallel: int, rounds: int) -> Counter[str]:
    """``parallel`` settings saves and fits released at once, each on its own connection."""
    outcome: Counter[str] = Counter()
    for port in ci._server(app):
        for r in range(rounds):
            barrier = threading.Barrier(parallel * 2)

            def post(
                path: str, fields: dict[str, str], port: int, barrier: threading.Barrier
            ) -> None:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
                body = urlencode({**fields, "csrf_token": token})
                headers = {"Cookie": cookie, "Content-Type": "application/x-www-form-urlencoded"}
                barrier.wait()
                try:
                    conn.request("POST", path, body=body, headers=headers)
                    status = conn.getresponse().status
                    outcome["5xx" if status >= 500 else f"{status // 100}xx"] += 1
                    if status == 503:
                        outcome["503 (busy, Retry-After)"] += 1
                except TimeoutError:
                    outcome["time-out"] += 1
                except (http.client.HTTPException, OSError):
                    outcome["dropped"] += 1
                finally:
                    conn.close()

            threads = [
                threading.Thread(
                    target=post,
                    args=(
                        "/admin/settings",
                        {"validate_batch_size": str(100 + i + r)},
                        port,
                        barrier,
                    ),
                )
                for i in range(parallel)
            ] + [
                threading.Thread(target=post, args=("/admin/label-models/fit", {}, port, barrier))
                for _ in range(parallel)
            ]
            for t in threads:
                t.start()
            for t in threads:
                t.join(120)
    return outcome


def _admin(app: Any) -> tuple[str, str]:
    """A second login of the fuzz's admin: its cookie and CSRF token."""
    client = TestClient(app)
    page = client.get("/admin/login")
    fields = {"username": "alice", "password": ci.PASSWORD, "next": "/admin"}
    fields["csrf_token"] = form_field(page.text, "csrf_token")
    assert client.post("/admin/login", data=fields, follow_redirects=False).status_code == 303
    token = form_field(client.get("/admin/settings").text, "csrf_token")
    return "; ".join(f"{k}={v}" for k, v in client.cookies.items()), token


def run(backend: str, parallel: int, rounds: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        url = _database(backend, tmp)
        engine: Engine = make_engine(url)
        try:
            make_two_studies(engine, COCO_DIR)  # as the CI test's fixture does
            with Session(engine) as s:
                create_owner(s, "alice", ci.PASSWORD)
            settings = Settings(
                database_url=url,
                secret_key="fuzz-secret-" + "x" * 32,
                image_root=COCO_DIR / "images",
                image_cache_dir=tmp / "cache",
            )
            app = create_app(settings, engine)
            ci.HOSTILE.update(MORE_HOSTILE)
            started = time.monotonic()
            ci.test_every_parameter_of_every_route_survives_hostile_values(app)  # asserts 0 x 5xx
            fuzz_seconds = time.monotonic() - started
            cookie, token = _admin(app)
            with Session(engine) as s:  # the races are about first saves
                for row in s.exec(select(StudySetting)).all():
                    s.delete(row)
                s.commit()
            started = time.monotonic()
            races = _races(app, cookie, token, parallel, rounds)
            return {
                "backend": backend,
                "fuzz 5xx / dropped": 0,  # asserted by the CI test function (it prints counts)
                "fuzz seconds": round(fuzz_seconds, 1),
                "race requests": parallel * 2 * rounds,
                "race outcomes": dict(races),
                "race seconds": round(time.monotonic() - started, 1),
            }
        finally:
            engine.dispose()
            if backend == "postgresql":
                _drop_pg_database(url)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backends", default="sqlite,postgresql")
    ap.add_argument("--parallel", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    for backend in args.backends.split(","):
        result = run(backend, args.parallel, args.rounds)
        print(result, flush=True)
        bad = {
            k: v for k, v in result["race outcomes"].items() if k in ("5xx", "time-out", "dropped")
        }
        if bad:
            raise SystemExit(f"{backend}: {bad}")
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")


if __name__ == "__main__":
    main()
