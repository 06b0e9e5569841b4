"""The pipeline page's multiple-choice figure, as an admin sees it: the latest matching run's
figure marked as measured before validation until the dashboard has built an export, then the
figure of the files in that export's zip (its stats.json), on SQLite and PostgreSQL."""

from __future__ import annotations

import html
import io
import json
import re
import zipfile
from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from tests.support.mc_run import RUN_FIGURE, RUN_N_TEST, unvalidated_run
from tests.webapp.admin.test_admin import admin, app, wait_job  # noqa: F401  (fixtures)
from vsr_core.models import Job


def _text(page: str) -> str:
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", page)).split())


def _build(client: TestClient, token: str, engine: Engine, **form: str) -> dict[str, Any]:
    r = client.post(
        "/admin/jobs/build", data={"csrf_token": token, "seed": "0", **form}, follow_redirects=False
    )
    assert r.status_code == 303, r.text
    with Session(engine) as s:
        job = s.exec(select(Job).order_by(col(Job.id).desc())).first()
    assert job is not None
    done = wait_job(client, job.id, timeout=300)  # type: ignore[arg-type]
    assert done["status"] == "succeeded", done
    return done


def test_pipeline_page_shows_the_figure_of_the_latest_export(
    admin: tuple[TestClient, str],  # noqa: F811
    engine: Engine,  # noqa: F811
) -> None:
    client, token = admin
    run_id = unvalidated_run(engine)

    # No export yet: the run's figure, said to be measured before validation, and the
    # command that measures the exported files.
    page = _text(client.get("/admin/pipeline").text)
    assert f"Latest matching run #{run_id}" in page
    run_lo, run_hi = RUN_FIGURE["ci95"]
    assert (
        f"{RUN_FIGURE['name']} {RUN_FIGURE['accuracy']:.3f} (95% CI {run_lo:.3f}–{run_hi:.3f}) "
        f"on {RUN_N_TEST} test items"
    ) in page
    assert "Measured before validation" in page
    assert "build-dataset --out DIR --unvalidated-mc" in page

    # An export without mc_unvalidated/: mc/ is empty (nothing validated), so no figure.
    first = _build(client, token, engine)
    page = _text(client.get("/admin/pipeline").text)
    assert f"The latest export (build job #{first['id']}," in page
    assert "gives no figure: mc/ of that export has no train and test items" in page
    assert "Measured before validation" in page  # the run's figure stands in

    # With mc_unvalidated/: the page shows what that export's stats.json says, measured
    # on its files, never the run's own figure.
    second = _build(client, token, engine, unvalidated_mc="on")
    zf = zipfile.ZipFile(io.BytesIO(client.get(second["download"]).content))
    mc = json.loads(zf.read("stats.json"))["mc"]
    assert mc["measured_on"] == "mc_unvalidated" and mc["run_id"] == run_id
    n_test = len(zf.read("mc_unvalidated/test.jsonl").decode().splitlines())
    assert mc["adversaries_n_test"] == n_test > 0
    best = mc["strongest_adversary"]
    lo, hi = best["ci95"]
    page = _text(client.get("/admin/pipeline").text)
    assert f"Latest export (build job #{second['id']}," in page
    assert (
        f"{best['name']} {best['accuracy']:.3f} (95% CI {lo:.3f}–{hi:.3f}) on the "
        f"{n_test:,} test items of mc_unvalidated/ — not validated"
    ) in page
    assert "Read from that export's stats.json" in page
    assert str(RUN_FIGURE["name"]) not in page.split("Matching runs")[0]
    assert "Measured before validation" not in page

    # The export's blind baselines: one row per evaluation file of its stats.json, with the
    # strongest baseline of each as the build computed it (the caption-only models of the
    # binary files, the answer-only suite fitted on train and on dev of the MC files).
    stats = json.loads(zf.read("stats.json"))
    blind = stats["blind_baselines"]
    assert {"random", "zeroshot", "mc_unvalidated"} <= set(blind)
    for config in ("random", "zeroshot"):
        for r in blind[config].values():
            assert {"caption_tfidf_lr", "caption_tfidf_mlp"} <= set(r["baselines"])
    mc_test = blind["mc_unvalidated"]["test"]["baselines"]
    assert any(k.startswith("answer_only:dev_fit:") for k in mc_test), sorted(mc_test)
    assert "answer_only:listwise_stack_gbm_least" in mc_test
    for r in (r for splits in blind.values() for r in splits.values()):
        for f in r["baselines"].values():
            assert f["ci95"][0] <= f["accuracy"] <= f["ci95"][1]
    body = client.get("/admin/pipeline").text
    assert "Blind baselines of the latest export" in body
    for config, splits in blind.items():
        for split, r in splits.items():
            figures = {k: v for k, v in r["baselines"].items() if k != "answer_only_strongest"}
            name, f = max(figures.items(), key=lambda kv: kv[1]["accuracy"])
            row = re.search(rf'<tr data-blind="{config}/{split}">(.*?)</tr>', body, re.S)
            assert row is not None, (config, split)
            cells = _text(row.group(1))
            assert f"{name} {f['accuracy']:.3f} ({f['ci95'][0]:.3f}–{f['ci95'][1]:.3f})" in cells
