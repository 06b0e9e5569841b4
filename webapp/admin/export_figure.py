"""The multiple-choice adversary figure the pipeline page leads with: measured on the items a
user actually exports.

The dashboard knows where its own build jobs put their exports (the zip under
``jobs.export_dir``), so the figure is read from the latest one's ``stats.json``: the held-out
answer-only suite computed by build-dataset on exactly the exported files, ``mc/`` or, when
that is empty, ``mc_unvalidated/`` (vsr_dataset.mc_stats). An export made with
``build-dataset --out DIR`` on the command line goes where its ``--out`` says, which the
dashboard cannot know; without a dashboard export the page shows the latest matching run's
figure instead, which is measured on all the run's items before any validation.

The same stats.json gives the page the export's blind baselines (``blind_baselines``, the
build's leak audit): per evaluation file, the strongest look-up or join attack and the
strongest blind baseline, each with its 95 % interval.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path
from typing import Any

from sqlmodel import Session, col, select

from vsr_core.models import Job, JobKind, JobStatus, MatchRun
from vsr_core.settings import Settings
from webapp.admin.jobs import export_dir

# stats.json of even a 10x export is a few hundred kB; a member far larger is not ours.
MAX_STATS_BYTES = 50_000_000
# Where the page sends someone who builds on the command line.
CLI_COMMAND = "build-dataset --out DIR --unvalidated-mc"


def _suite(mc: dict[str, Any]) -> dict[str, Any] | None:
    """The strongest adversary of a stats.json ``mc`` block, or None when nothing was
    measured (no train or no test items in the measured folder)."""
    best = mc.get("strongest_adversary")
    if not isinstance(best, dict) or best.get("accuracy") is None:
        return None
    return {
        "name": best.get("name"),
        "accuracy": float(best["accuracy"]),
        "ci95": [float(x) for x in best.get("ci95") or []],
        "n_test": mc.get("adversaries_n_test"),
    }


def _best(figures: Any, skip: str = "") -> dict[str, Any] | None:
    """The highest-accuracy figure of a ``{name: {accuracy, ci95}}`` block, named."""
    if not isinstance(figures, dict):
        return None
    named = [
        {"name": k, "accuracy": float(v["accuracy"]), "ci95": [float(x) for x in v["ci95"]]}
        for k, v in figures.items()
        if k != skip and isinstance(v, dict) and v.get("accuracy") is not None and v.get("ci95")
    ]
    return max(named, key=lambda f: f["accuracy"], default=None)


def blind_rows(blind: Any) -> list[dict[str, Any]]:
    """stats.json ``blind_baselines`` as the page's table: per evaluation file, its items,
    chance, strongest look-up or join attack and strongest blind baseline (the build's
    answer_only_strongest summary left out: its adversary is listed under its own name)."""
    if not isinstance(blind, dict):
        return []
    rows = []
    for config, splits in sorted(blind.items()):
        for split, r in sorted((splits or {}).items()):
            if not isinstance(r, dict):
                continue
            baselines = r.get("baselines") or {}
            rows.append(
                {
                    "file": f"{config}/{split}",
                    "n": r.get("n"),
                    "chance": r.get("chance"),
                    "attack": _best(r.get("attacks")),
                    "baseline": _best(baselines, skip="answer_only_strongest"),
                    "n_baselines": len(baselines),
                }
            )
    return rows


def _read_stats(path: Path) -> dict[str, Any]:
    with zipfile.ZipFile(path) as zf:
        info = zf.getinfo("stats.json")
        if info.file_size > MAX_STATS_BYTES:
            raise ValueError("stats.json is too large")
        data = json.loads(zf.read(info))
    if not isinstance(data, dict):
        raise ValueError("stats.json is not an object")
    return data


def latest_export(session: Session, settings: Settings, study_id: int) -> dict[str, Any] | None:
    """The study's latest succeeded build job and what its export's stats.json says about
    the multiple-choice items; None when the dashboard has built nothing. ``problem`` says
    why there is no figure (zip gone, no items, ...)."""
    job = session.exec(
        select(Job)
        .where(
            Job.study_id == study_id, Job.kind == JobKind.build, Job.status == JobStatus.succeeded
        )
        .order_by(col(Job.id).desc())
        .limit(1)
    ).first()
    if job is None:
        return None
    out: dict[str, Any] = {
        "job_id": job.id,
        "when": job.finished_at,
        "suite": None,
        "problem": None,
    }
    path = Path(str(job.params.get("zip", ""))).resolve()
    # Only files inside the export folder, whatever the Job row says (as the download).
    if export_dir(settings) not in path.parents or not path.is_file():
        out["problem"] = "its zip is gone from the server"
        return out
    try:
        stats = _read_stats(path)
    except (OSError, KeyError, ValueError, zipfile.BadZipFile):
        out["problem"] = "its zip holds no readable stats.json"
        return out
    out["blind"] = blind_rows(stats.get("blind_baselines"))
    out["leak_failures"] = (stats.get("leak_audit") or {}).get("failures") or []
    mc = stats.get("mc")
    if not isinstance(mc, dict):
        out["problem"] = "it has no multiple-choice items (no matching run when it was built)"
        return out
    out.update(
        run_id=mc.get("run_id"),
        measured_on=mc.get("measured_on") or "mc",
        chance=mc.get("chance"),
        items=mc.get("items") or {},
        items_unvalidated=mc.get("items_unvalidated") or {},
        suite=_suite(mc),
    )
    if out["suite"] is None:
        out["problem"] = (
            f"{out['measured_on']}/ of that export has no train and test items to measure "
            "(mc/ holds only items whose every distractor validators rejected)"
        )
    return out


def latest_run(session: Session, study_id: int) -> dict[str, Any] | None:
    """The latest matching run's own figure: measured when the run was made, on all of its
    items, before validators judged any distractor."""
    run = session.exec(
        select(MatchRun)
        .where(MatchRun.study_id == study_id)
        .order_by(col(MatchRun.id).desc())
        .limit(1)
    ).first()
    if run is None:
        return None
    diag = run.diagnostics or {}
    suite = diag.get("answer_only_adversaries") or {}
    best = suite.get("strongest") or {}
    figure = None
    if best.get("accuracy") is not None:
        figure = {
            "name": best.get("name"),
            "accuracy": float(best["accuracy"]),
            "ci95": [float(x) for x in best.get("ci95") or []],
            "n_test": suite.get("n_test"),
        }
    return {
        "run_id": run.id,
        "when": run.created_at,
        "suite": figure,
        "chance": diag.get("chance"),
        "measured_on": suite.get("measured_on"),
    }


def figure_for_page(session: Session, settings: Settings, study_id: int) -> dict[str, Any]:
    """What the pipeline page's multiple-choice figure box shows: the latest dashboard
    export's measured suite, and the latest run (to say when the export is older than it,
    or to stand in, marked as measured before validation, when there is no export)."""
    export = latest_export(session, settings, study_id)
    run = latest_run(session, study_id)
    stale = bool(
        export
        and run
        and export.get("run_id") is not None
        and int(export["run_id"]) != run["run_id"]
    )
    return {"export": export, "run": run, "stale": stale, "cli": CLI_COMMAND}
