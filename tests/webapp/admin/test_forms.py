"""Admin forms and results as people read them (docs/dashboard.md): study settings keep
what was typed and show plain labels, fractions and choices; the pipeline's sample form has
the CLI's options; job results are figures and links, a job that stored nothing is a
warning with its reason; no literal None in the matching runs table."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from tests.webapp.admin.test_admin import admin, app, wait_job  # noqa: F401  (fixtures)
from vsr_core.codes import STUDY_CODE_KEYS
from vsr_core.models import ImagePair, Job, MatchRun, StudySetting
from vsr_core.studies.settings import load_study_config

DEMO = Path(__file__).resolve().parents[3] / "demo" / "coco" / "annotations" / "instances_demo.json"


def _field_error(html: str, name: str) -> str:
    m = re.search(
        rf'id="field-{name}".*?<span class="field-error" role="alert">([^<]*)</span>', html, re.S
    )
    assert m, f"no error next to {name}"
    return m.group(1)


def test_settings_keep_typed_values_and_speak_plainly(
    admin: tuple[TestClient, str],  # noqa: F811
    engine: Engine,
) -> None:
    client, token = admin
    page = client.get("/admin/settings").text
    # fractions as fractions, plain labels, a choice instead of a free-text method name
    assert 'name="keep_threshold" value="2/3"' in page and "0.6666" not in page
    assert "Keep a caption when at least this share agrees" in page
    assert '<select name="decide_method"' in page and "decide method" not in page
    assert "relations enabled" not in page and "None = Table 1" not in page
    assert page.count('name="relations_enabled" value="among"') == 1
    assert 'value="up" checked' not in page and 'value="left of" checked' in page
    # one invalid value among other edits: nothing saved, everything typed kept, the error
    # next to its field in plain words
    form = {
        "csrf_token": token,
        "generate_batch_size": "150",
        "votes_per_example": "0",
        "keep_threshold": "3/4",
        "completion_code": "MYCODE7",
        "decide_method": "exact",
    }
    r = client.post("/admin/settings", data=form)
    assert r.status_code == 422
    assert 'name="generate_batch_size" value="150"' in r.text
    assert 'name="keep_threshold" value="3/4"' in r.text
    assert 'name="completion_code" value="MYCODE7"' in r.text
    assert '<option value="exact" selected>' in r.text
    assert _field_error(r.text, "votes_per_example") == "must be at least 1"
    assert "Value error" not in r.text and 'class="admin-nav"' in r.text
    with Session(engine) as s:
        # Nothing of the refused save; the study's own codes (vsr_core.codes) are not settings
        # the admin typed.
        typed = select(StudySetting).where(col(StudySetting.key).not_in(STUDY_CODE_KEYS))
        assert s.exec(typed).all() == []
    r = client.post("/admin/settings", data={**form, "votes_per_example": "9"})
    assert r.status_code == 422
    assert "at least" in _field_error(r.text, "max_votes_per_example")
    assert "votes_per_example" not in _field_error(r.text, "max_votes_per_example")
    r = client.post("/admin/settings", data={**form, "keep_threshold": "two thirds"})
    assert _field_error(r.text, "keep_threshold").startswith("must be a number")
    # a choice outside the list is refused; a valid save stores a fraction and relations
    r = client.post(
        "/admin/settings", data={**form, "votes_per_example": "3", "decide_method": "x"}
    )
    assert r.status_code == 422 and _field_error(r.text, "decide_method")
    r = client.post(
        "/admin/settings",
        data={
            **form,
            "votes_per_example": "3",
            "relations_enabled__shown": "1",
            "relations_enabled": ["left of", "right of"],
        },
        follow_redirects=False,
    )
    assert r.status_code == 303
    with Session(engine) as s:
        cfg = load_study_config(s)
    assert cfg.keep_threshold == 0.75 and cfg.decide_method == "exact"
    assert cfg.relations_enabled == ["left of", "right of"]
    assert 'name="keep_threshold" value="3/4"' in client.get("/admin/settings").text


def test_invite_with_both_roles_lists_both_links(
    admin: tuple[TestClient, str],  # noqa: F811
    engine: Engine,
) -> None:
    client, token = admin
    client.post(
        "/admin/settings/invites",
        data={"csrf_token": token, "label": "lab", "roles": ["generate", "validate"]},
    )
    page = client.get("/admin/settings").text
    m = re.search(r"token=([\w-]+)", page)
    assert m
    assert f"/start/generate?token={m.group(1)}" in page
    assert f"/start/validate?token={m.group(1)}" in page


def test_pipeline_sample_form_results_and_warnings(
    admin: tuple[TestClient, str],  # noqa: F811
    engine: Engine,
) -> None:
    client, token = admin
    page = client.get("/admin/pipeline").text
    assert f">{DEMO}</textarea>" in page and 'placeholder="/' not in page and DEMO.is_file()
    for name in ("min_area", "max_per_concept_pair", "concepts", "prefer_contrast"):
        assert f'name="{name}"' in page
    # The minimum area is the study's own rule (the shipped file's 10,000 px), not VSR's.
    assert 'name="min_area" type="number" min="0" step="any" value="10000"' in page
    # the VSR threshold on the demo slice: nothing to store, a warning with the reason
    r = client.post(
        "/admin/jobs/sample",
        data={"csrf_token": token, "n_pairs": "5", "coco_files": str(DEMO), "min_area": "900000"},
        follow_redirects=False,
    )
    assert r.status_code == 303, r.text
    with Session(engine) as s:
        job_id = s.exec(select(Job.id)).one()
    assert job_id is not None
    done: dict[str, Any] = wait_job(client, job_id)
    assert done["status"] == "succeeded" and done["outcome"]["level"] == "warning"
    page = client.get("/admin/pipeline").text
    assert "produced nothing" in page and "Nothing was stored" in page
    assert "smaller minimum area" in page and '"requested"' not in page  # no JSON dump
    # the demo's own setting: pairs stored, figures shown
    r = client.post(
        "/admin/jobs/sample",
        data={"csrf_token": token, "n_pairs": "5", "coco_files": str(DEMO), "min_area": "10000"},
        follow_redirects=False,
    )
    with Session(engine) as s:
        job_id = max(s.exec(select(Job.id)).all())  # type: ignore[type-var]
    done = wait_job(client, job_id)  # type: ignore[arg-type]
    assert done["outcome"]["level"] == "ok" and done["params"]["min_area"] == 10000
    with Session(engine) as s:
        assert len(s.exec(select(ImagePair)).all()) == 5
    page = client.get("/admin/pipeline").text
    assert "Stored 5 new image pairs" in page and "<dt>concept pairs</dt>" in page


def test_matching_runs_table_has_no_literal_none(
    admin: tuple[TestClient, str],  # noqa: F811
    engine: Engine,
) -> None:
    client, _ = admin
    with Session(engine) as s:
        s.add(
            MatchRun(
                params={"h": 1.0, "k": None},
                diagnostics={"chance": 0.25, "text_only_accuracy": None},
            )
        )
        s.commit()
    page = client.get("/admin/pipeline").text
    table = page[page.index("Matching runs") :]
    assert ">None<" not in table and "0.250" in table
