"""Bad input everywhere on the annotation site: no 5xx, nothing rendered unescaped, nothing stored.

- schemathesis generates requests for every entry/generation operation of the OpenAPI spec
  (in-process ASGI), sent with a real worker's session cookie so the task routes are reached;
- hypothesis generates form posts to the task form, mixing valid values, junk and HTML/JS;
- hand-written hostile values (concept names, ids, comments) check the escaping.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import func
from sqlmodel import Session, select

from tests.support.webapp_coco import (
    answer,
    client_for,
    lease_id_of,
    make_app,
    make_pairs,
    start_prolific,
    task,
)
from vsr_core.models import Annotation, Assignment, Batch, Example, ImagePair, Instance, Vote

MY_TAGS = {"entry", "generate", "ops"}
XSS = [
    "<script>alert(1)</script>",
    '"><img src=x onerror=alert(1)>',
    "</script><script>alert(2)</script>",
    "javascript:alert(3)",
    "{{7*7}}",
    "' OR 1=1 --",
]
FUZZ_SETTINGS = settings(
    max_examples=25,
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
)


def _counts(engine: Any) -> tuple[int, ...]:
    with Session(engine) as s:
        return tuple(
            int(s.exec(select(func.count()).select_from(t)).one())
            for t in (Annotation, Example, Vote, Batch)
        )


def _unescaped(body: str) -> bool:
    return any(p in body for p in ("<script>alert", "<img src=x", "onerror=alert(1)>"))


@pytest.fixture
def worker_site(db_url: str, engine, coco_dir: Path, tmp_path: Path):  # type: ignore[no-untyped-def]
    with Session(engine) as s:
        make_pairs(s, coco_dir, 30)
    app = make_app(db_url, tmp_path, image_root=coco_dir / "images")
    client = client_for(app)
    start_prolific(client, "fuzzer")
    fields = task(client)
    return app, client, fields


def test_schemathesis_finds_no_server_errors(worker_site, engine) -> None:  # type: ignore[no-untyped-def]
    app, client, _ = worker_site
    schema = schemathesis.openapi.from_asgi("/openapi.json", app)
    operations = [r.ok() for r in schema.get_all_operations()]  # type: ignore[union-attr]
    mine = [op for op in operations if set(op.tags or []) & MY_TAGS]
    assert {f"{op.method.upper()} {op.path}" for op in mine} >= {
        "GET /start/{kind}",
        "POST /consent/{kind}",
        "POST /begin/{kind}",
        "POST /generate",
        "GET /api/generate/task",
        "POST /api/generate/annotations",
        "GET /images/pair/{pair_id}/{slot}.jpg",
    }
    failures: list[str] = []
    for op in mine:
        _fuzz(op, engine, {"vsr_session": client.cookies["vsr_session"]}, failures)
    assert failures == []


def _fuzz(op: Any, engine: Any, cookies: dict[str, str], failures: list[str]) -> None:
    @FUZZ_SETTINGS
    @given(case=op.as_strategy())
    def run(case: Any) -> None:
        before = _counts(engine)
        response = case.call(cookies=cookies)
        kind = str(response.headers.get("content-type", ""))
        body = "" if "image" in kind else response.text
        where = f"{op.method.upper()} {case.formatted_path}"
        if response.status_code >= 500:
            failures.append(f"{where}: {response.status_code} {body[:200]}")
        if response.status_code >= 400 and _counts(engine) != before:
            failures.append(f"{where}: {response.status_code} but rows were stored")
        if _unescaped(body):
            failures.append(f"{where}: unescaped markup")

    run()


relation_values = st.one_of(
    st.sampled_from(["on top of", "contains", "left of", "up", "congruent", "", "ON TOP OF"]),
    st.sampled_from(XSS),
    st.text(max_size=80),
)
form_values = st.fixed_dictionaries(
    {},
    optional={
        "relation": relation_values,
        "ent1": st.one_of(st.sampled_from(["a", "b", "c", ""]), st.text(max_size=5)),
        "true_image": st.one_of(st.sampled_from(["1", "2", "0", "3", ""]), st.text(max_size=5)),
        "action": st.one_of(st.sampled_from(["submit", "skip"]), st.text(max_size=10)),
        "skip_reason": st.sampled_from(["unidentifiable", "no_contrast", *XSS]),
        "skip_comment": st.one_of(st.sampled_from(XSS), st.text(max_size=1100)),
        "duration_ms": st.one_of(st.integers(-5, 10**12).map(str), st.text(max_size=8)),
        "client_token": st.one_of(
            st.sampled_from(XSS), st.from_regex(r"[A-Za-z0-9_-]{0,70}", fullmatch=True)
        ),
        "assignment_id": st.one_of(st.integers(-3, 2**40).map(str), st.sampled_from(XSS)),
    },
)


def test_hypothesis_form_posts(worker_site, engine) -> None:  # type: ignore[no-untyped-def]
    _, client, fields = worker_site
    state = {"fields": fields}

    @settings(FUZZ_SETTINGS, max_examples=60)
    @given(values=form_values)
    def run(values: dict[str, str]) -> None:
        data = dict(state["fields"])
        data.update(values)
        before = _counts(engine)
        r = client.post("/generate", data=data, follow_redirects=False)
        assert r.status_code < 500, r.text[:300]
        assert not _unescaped(r.text)
        if r.status_code >= 400:
            assert _counts(engine) == before
        elif _counts(engine) != before:
            # a valid answer was stored: exactly as sent, then go on with the next pair
            with Session(engine) as s:
                ann = s.exec(select(Annotation).order_by(Annotation.id.desc())).first()  # type: ignore[union-attr]
                assert ann is not None and ann.assignment_id == lease_id_of(data["assignment_id"])
                if ann.relation is not None:
                    assert ann.relation == data["relation"].strip().lower()
            state["fields"] = task(client)

    run()


def test_hostile_concept_names_are_escaped_everywhere(  # type: ignore[no-untyped-def]
    db_url: str, engine, coco_dir: Path, tmp_path: Path
) -> None:
    with Session(engine) as s:
        (pair_id,) = make_pairs(s, coco_dir, 1)
        pair = s.get(ImagePair, pair_id)
        assert pair is not None
        pair.concept_a, pair.concept_b = XSS[2], XSS[1]
        s.add(pair)
        for inst in s.exec(select(Instance)):
            inst.category = XSS[0]
            s.add(inst)
        s.commit()
    client = client_for(make_app(db_url, tmp_path))
    start_prolific(client, "escaper")
    page = client.get("/generate")
    assert page.status_code == 200
    assert not _unescaped(page.text)
    assert "</script><script>" not in page.text  # the embedded captions JSON cannot break out
    table = json.loads(re.search(r'id="captions-data">(.*?)</script>', page.text, re.S).group(1))  # type: ignore[union-attr]
    assert table["left of"]["a"] == f"The {XSS[2]} is left of the {XSS[1]}."
    fields = task(client)
    r = client.post("/generate", data=answer(fields, relation="left of"), follow_redirects=False)
    assert r.status_code == 303
    preview = client.get("/start/generate?assignmentId=ASSIGNMENT_ID_NOT_AVAILABLE")
    assert preview.status_code == 200 and not _unescaped(preview.text)


@pytest.mark.parametrize("value", XSS)
def test_hostile_ids_in_links_and_api(  # type: ignore[no-untyped-def]
    db_url: str, engine, tmp_path: Path, value: str
) -> None:
    from urllib.parse import quote

    client = client_for(make_app(db_url, tmp_path))
    for query in (
        f"PROLIFIC_PID={quote(value)}",
        f"workerId={quote(value)}&assignmentId=A",
        f"token={quote(value)}",
        f"PROLIFIC_PID=ok&SESSION_ID={quote(value)}",
    ):
        r = client.get(f"/start/generate?{query}", follow_redirects=False)
        assert r.status_code in (400, 403), (query, r.status_code)
        assert not _unescaped(r.text)
    r = client.get(f"/start/{quote(value, safe='')}?PROLIFIC_PID=x")
    assert r.status_code == 404 and not _unescaped(r.text)
    with Session(engine) as s:
        assert s.exec(select(Assignment)).all() == []
    assert _counts(engine) == (0, 0, 0, 0)
