"""Every parameter of every route with hostile values (docs/security.md), through a real
uvicorn server on one keep-alive connection, on SQLite and PostgreSQL.

Each route of the app (``app.routes``, including the admin pages left out of the OpenAPI
schema) is called once per parameter (path, query, form or JSON field) and hostile value,
the other parameters valid, with a worker's and an admin's session and their CSRF tokens.
No answer may be a 5xx, and the server may never close the connection (an unhandled error
does, so one lost request would show up as a failed next request). Every route is called
again under a study's prefix (``/s/vsr-zh/...``, where the worker has a batch of its own).
"""

from __future__ import annotations

import http.client
import json
import re
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal, get_args, get_origin
from urllib.parse import quote, urlencode

import pytest
import uvicorn
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient
from pydantic import BaseModel
from sqlalchemy.engine import Engine
from sqlmodel import Session

from tests.support.admins import create_owner
from tests.support.webapp_coco import enter, form_field
from tests.webapp.http.test_studies import enter as enter_study
from tests.webapp.http.test_studies import make_two_studies
from vsr_core.settings import Settings
from webapp.app import create_app

HOSTILE = {
    "nul": "x\x00y",
    "huge": "99999999999999999999",
    "negative huge": "-99999999999999999999",
    "unicode digit": "\u00b2",
    "arabic digit": "\u0663",
    "full-width digits": "\uff11\uff12",
    "lone surrogate": "\ud800",
    "oversized": "9" * 5000,
}
BODY_OVERSIZED = "a" * 200_000
# What a header can carry (latin-1; a NUL is refused by the HTTP parser, which closes the
# connection as it must): the CSRF header of every POST gets these.
HOSTILE_HEADER = {k: v for k, v in HOSTILE.items() if k in ("unicode digit", "oversized")}
CSRF_HEADER = "X-CSRF-Token"
SURROGATES = "surrogatepass"  # a lone surrogate is sent as its (invalid) UTF-8 bytes
# Launching real build/sample jobs per request is another test's job (test_admin); logging
# out would end the admin session the other requests need.
SKIP_BODY = {("POST", "/admin/jobs/{kind}")}
SKIP = {("POST", "/admin/logout")}
# Routes that read their body themselves: the fields they take.
MANUAL_BODY: dict[tuple[str, str], tuple[str, dict[str, Any]]] = {
    ("POST", "/api/validate/votes"): (
        "json",
        {
            "assignment_id": "1." + "A" * 22,
            "value": True,
            "reference_frame": "both",
            "duration_ms": 5,
        },
    ),
    ("POST", "/admin/settings"): (
        "form",
        {
            "votes_per_example": "3",
            "gold_rate": "0.1",
            "keep_threshold": "2/3",
            "batch_size": "10",
            "relations_enabled": "left of",
        },
    ),
}
PATH_DEFAULTS = {"kind": "validate", "slot": "1", "name": "votes"}
PASSWORD = "correct horse battery"
STUDY_PREFIX = "/s/vsr-zh"  # a second study's address: every route is fuzzed there too


def _server(app: Any) -> Iterator[int]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(app, log_level="critical", timeout_keep_alive=120)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    for _ in range(200):
        if server.started:
            break
        time.sleep(0.05)
    try:
        yield port
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


@pytest.fixture
def fuzz_site(db_url: str, engine: Engine, coco_dir: Path, tmp_path: Path) -> Any:
    make_two_studies(engine, coco_dir)  # worker #1 is an author, not the fuzzer
    with Session(engine) as s:
        create_owner(s, "alice", PASSWORD)
    settings = Settings(
        database_url=db_url,
        secret_key="fuzz-secret-" + "x" * 32,
        image_root=coco_dir / "images",
        image_cache_dir=tmp_path / "cache",
    )
    return create_app(settings, engine)


def _sessions(app: Any) -> tuple[str, dict[str, str]]:
    """Cookies of a worker with an open validation batch and a logged-in admin, and the
    CSRF values each form needs."""
    client = TestClient(app)
    csrf = enter(client, "PROLIFIC_PID=fuzzall&STUDY_ID=st&SESSION_ID=se", kind="validate")
    assert (
        client.post("/begin/validate", data={"csrf": csrf}, follow_redirects=False).status_code
        == 303
    )
    # The same worker in the second study, so its prefixed routes find a batch there too.
    assert (
        enter_study(
            client, STUDY_PREFIX, "PROLIFIC_PID=fuzzall&STUDY_ID=st2&SESSION_ID=se2", "validate"
        )
        == csrf
    )
    page = client.get("/admin/login")
    token = form_field(page.text, "csrf_token")
    r = client.post(
        "/admin/login",
        data={"username": "alice", "password": PASSWORD, "csrf_token": token, "next": "/admin"},
        follow_redirects=False,
    )
    assert r.status_code == 303, r.text
    m = re.search(r'name="csrf_token" value="([^"]+)"', client.get("/admin").text)
    assert m
    cookie = "; ".join(f"{k}={v}" for k, v in client.cookies.items())
    return cookie, {"csrf": csrf, "csrf_token": m.group(1)}


def _valid(annotation: Any) -> Any:
    """A value the field accepts: a Literal's first choice (an optional one's, too), else 1."""
    for arg in (annotation, *get_args(annotation)):
        if get_origin(arg) is Literal:
            return get_args(arg)[0]
    return "true" if annotation is bool else "1"


def _fields(route: APIRoute) -> tuple[str, dict[str, Any]] | None:
    """(form | json, a valid value per body field) of a route FastAPI parses the body of."""
    params = route.dependant.body_params
    if not params:
        return None
    fields: dict[str, Any] = {}
    for param in params:
        annotation = param.field_info.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            fields.update(
                {name: _valid(info.annotation) for name, info in annotation.model_fields.items()}
            )
        else:
            fields[param.alias] = _valid(annotation)
    kind = "form" if any(type(p.field_info).__name__ == "Form" for p in params) else "json"
    return kind, fields


def _routes(routes: list[Any], prefix: str = "") -> Iterator[tuple[str, APIRoute]]:
    """(full path, route) of every API route, through included routers (FastAPI keeps
    those as wrappers holding the original router and its include prefix)."""
    for route in routes:
        if isinstance(route, APIRoute):
            yield prefix + route.path, route
        elif hasattr(route, "original_router"):
            yield from _routes(route.original_router.routes, prefix + route.include_context.prefix)


def _url(
    template: str,
    path_names: list[str],
    query_names: list[str],
    hostile: tuple[tuple[str, str], str] | None = None,
) -> str:
    """The URL with valid path values (``page=1``), one of them or a query field hostile."""
    path = template
    for name in path_names:
        value = PATH_DEFAULTS.get(name, "1")
        if hostile and hostile[0] == ("path", name):
            value = hostile[1]
        path = path.replace("{" + name + "}", quote(value, safe="", errors=SURROGATES))
    query = {n: "1" for n in query_names if n == "page"}
    if hostile and hostile[0][0] == "query":
        query[hostile[0][1]] = hostile[1]
    return path + ("?" + urlencode(query, errors=SURROGATES) if query else "")


def _cases(
    app: Any, csrf: dict[str, str]
) -> Iterator[tuple[str, str, str, str, dict[str, Any] | None, str]]:
    """(method, path template, url, body kind, body, what is hostile) per request; form
    bodies carry the session's real CSRF tokens unless those are the hostile field."""
    for (bare, route), prefix in [(r, p) for p in ("", STUDY_PREFIX) for r in _routes(app.routes)]:
        template = prefix + bare
        for method in sorted(route.methods or ()):
            if (method, bare) in SKIP:
                continue
            path_names = [p.alias for p in route.dependant.path_params]
            query_names = [p.alias for p in route.dependant.query_params]
            body = MANUAL_BODY.get((method, bare)) or _fields(route)
            if (method, bare) in SKIP_BODY:
                body = None
            kind, fields = body if body else ("", None)
            if fields is not None and kind == "form":
                fields = {**fields, **csrf}
            targets = [("path", n) for n in path_names] + [("query", n) for n in query_names]
            targets += [("body", n) for n in (fields or {})]
            plain = _url(template, path_names, query_names)
            if method == "POST":
                targets.append(("header", CSRF_HEADER))
            for where, name in targets:
                for label, value in (HOSTILE_HEADER if where == "header" else HOSTILE).items():
                    if where == "header":
                        yield method, template, plain, kind, fields, f"header {name}={label}"
                    elif where == "body":
                        assert fields is not None
                        sent = dict(fields)
                        sent[name] = BODY_OVERSIZED if label == "oversized" else value
                        yield method, template, plain, kind, sent, f"{name}={label}"
                    else:
                        bad = _url(template, path_names, query_names, ((where, name), value))
                        yield method, template, bad, kind, fields, f"{where} {name}={label}"


def _bare(path: str) -> str:
    """The path without the study prefix."""
    return path.removeprefix(STUDY_PREFIX)


def _request(
    conn: http.client.HTTPConnection,
    method: str,
    url: str,
    kind: str,
    body: dict[str, Any] | None,
    cookie: str,
    csrf: dict[str, str],
    hostile_header: str | None = None,
) -> tuple[Any, bytes]:
    # The crowd's JSON API checks the worker session's token, the admin's fetch() calls the
    # admin session's (webapp.http.api_guard, webapp.admin.csrf).
    token = csrf["csrf"] if _bare(url).startswith("/api/") else csrf["csrf_token"]
    headers = {"Cookie": cookie, "Accept": "text/html"}
    # A form carries its token in the body (the field is fuzzed there); the header, which
    # the site's checks read first, goes with JSON and bodiless requests, or is the hostile one.
    if hostile_header is not None:
        headers[CSRF_HEADER] = hostile_header
    elif body is None or kind == "json":
        headers[CSRF_HEADER] = token
    data = None
    if body is not None and kind == "json":
        data = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    elif body is not None:
        data = urlencode(body, errors=SURROGATES).encode()
        headers["Content-Type"] = "application/x-www-form-urlencoded"
    conn.request(method, url, body=data, headers=headers)
    response = conn.getresponse()
    return response, response.read()


def test_every_parameter_of_every_route_survives_hostile_values(fuzz_site: Any) -> None:
    cookie, csrf = _sessions(fuzz_site)
    cases = list(_cases(fuzz_site, csrf))
    covered = {(m, p) for m, p, *_ in cases}
    expected = {
        ("GET", "/admin/examples/{example_id}"),
        ("GET", "/admin/data"),
        ("GET", "/admin/workers/{worker_id}"),
        ("GET", "/admin/jobs/{job_id}/download"),
        ("POST", "/validate"),
        ("POST", "/generate"),
        ("POST", "/api/validate/votes"),
        ("POST", "/api/generate/annotations"),
        ("GET", "/images/pair/{pair_id}/{slot}.jpg"),
        ("GET", "/images/validate/{assignment_id}.jpg"),
    }
    assert expected <= covered
    assert {(m, STUDY_PREFIX + p) for m, p in expected} <= covered  # every route, prefixed too
    failures: list[str] = []
    guarded: dict[tuple[str, str], bool] = {}
    statuses: dict[int, int] = {}  # answers per class (2 for 2xx...), for the report below
    for port in _server(fuzz_site):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        conn.connect()
        local = conn.sock.getsockname()
        for method, template, url, kind, body, what in cases:
            try:
                header = None
                if what.startswith(f"header {CSRF_HEADER}="):
                    header = HOSTILE_HEADER[what.split("=", 1)[1]]
                r, body_read = _request(conn, method, url, kind, body, cookie, csrf, header)
            except (http.client.HTTPException, OSError) as exc:
                failures.append(f"{method} {template} {what}: connection dropped ({exc!r})")
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
                conn.connect()
                local = conn.sock.getsockname()
                continue
            statuses[r.status // 100] = statuses.get(r.status // 100, 0) + 1
            if _bare(template).startswith("/api/") and method == "POST" and header is None:
                stopped = r.status == 415 or b"X-CSRF-Token" in body_read
                guarded[(method, template)] = guarded.get((method, template), False) or stopped
            if r.status >= 500:
                failures.append(f"{method} {template} {what}: {r.status}")
            if (r.getheader("connection") or "").lower() == "close":
                failures.append(f"{method} {template} {what}: server closes the connection")
            if conn.sock is None or conn.sock.getsockname() != local:
                failures.append(f"{method} {template} {what}: connection not kept alive")
                conn.connect()
                local = conn.sock.getsockname()
        conn.close()
    print(f"fuzz: {len(cases)} requests, answers by class {sorted(statuses.items())}")
    assert failures == [], "\n".join(failures[:60])
    # Every JSON API request carried the worker's token and the JSON type, so each reached the
    # route's own checks: none was stopped by the CSRF / content-type guard.
    api = {("POST", "/api/validate/votes"), ("POST", "/api/generate/annotations")}
    assert guarded.keys() == api | {(m, STUDY_PREFIX + p) for m, p in api}
    stopped = {what for what, answer in guarded.items() if answer}
    assert not stopped, stopped
