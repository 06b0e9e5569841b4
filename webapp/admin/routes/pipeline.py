"""Pipeline: sample more pairs, run adversarial matching, build and download the dataset.
Long work runs as a background job whose progress the page polls."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from fastapi import APIRouter, Depends, HTTPException, Request
from fastapi.responses import FileResponse, Response
from pydantic import ValidationError
from sqlmodel import Session, col, select

from vsr_core import audit
from vsr_core.models import ACTIVE_JOB_STATUSES, AuditKind, Job, JobKind, JobStatus, MatchRun
from vsr_core.settings import DEMO_DATA_DIR, Settings
from webapp.admin import export_figure, jobs, stats
from webapp.admin.auth import actor_of
from webapp.admin.forms import FORM_LEVEL, field_errors
from webapp.admin.pages import admin_study, back, check_admin_study, render
from webapp.admin.roles import ResearcherPostDep, ViewerDep, requires_viewer
from webapp.http.deps import SessionDep, SettingsDep
from webapp.http.inputs import DbId

router = APIRouter(prefix="/admin", tags=["admin"], dependencies=[Depends(requires_viewer)])
log = logging.getLogger(__name__)


def _job(session: Session, job_id: int, request: Request) -> Job:
    """The job, if it belongs to the dashboard's study (another study's is a 404 that says
    where it is, as for an Example)."""
    job = session.get(Job, job_id)
    if job is None:
        raise HTTPException(status_code=404, detail=f"There is no job #{job_id}.")
    check_admin_study(request, session, f"Job #{job_id}", job.study_id)
    return job


# The bundled demo slice (demo/SOURCE.md): the placeholder shows its real path on this server.
DEMO_COCO = DEMO_DATA_DIR / "annotations" / "instances_demo.json"


@router.get("/pipeline", include_in_schema=False)
def pipeline_page(
    request: Request,
    admin: ViewerDep,
    session: SessionDep,
    settings: SettingsDep,
    msg: str | None = None,
) -> Response:
    return _pipeline(request, admin, session, settings, msg=msg)


def _pipeline(
    request: Request,
    admin: Any,
    session: Session,
    settings: Settings,
    *,
    msg: str | None = None,
    kind: str | None = None,
    errors: dict[str, str] | None = None,
    typed: dict[str, Any] | None = None,
    status: int = 200,
) -> Response:
    """The page; after a bad form, with that form's errors next to its fields and what the
    admin typed kept (``kind`` names the form)."""
    jobs.mark_orphans(session)
    study_id = admin_study(request).id
    recent = session.exec(
        select(Job).where(Job.study_id == study_id).order_by(col(Job.id).desc()).limit(20)
    ).all()
    runs = session.exec(
        select(MatchRun)
        .where(MatchRun.study_id == study_id)
        .order_by(col(MatchRun.id).desc())
        .limit(5)
    ).all()
    forms = {k: model.model_json_schema() for k, model in jobs.JOB_KINDS.items()}
    values: dict[str, dict[str, Any]] = {k: {} for k in jobs.JOB_KINDS}
    # Filled in, never a grey placeholder that looks filled: the last job's files, else the
    # bundled demo's.
    values[JobKind.sample]["coco_files"] = jobs.last_coco_files(session) or str(DEMO_COCO)
    # The study's own sampling rule (the shipped file's demo slice: 10,000 px), not VSR's.
    values[JobKind.sample]["min_area"] = f"{admin_study(request).definition.sampling.min_area_px:g}"
    if kind is not None and typed is not None:
        values[kind] = typed
    return render(
        request,
        admin,
        "pipeline.html",
        "pipeline",
        status_code=status,
        jobs=[jobs.public(j) for j in recent],
        runs=runs,
        forms=forms,
        msg=msg,
        mc=stats.mc_summary(session, study_id),
        figure=export_figure.figure_for_page(session, settings, study_id),
        values=values,
        form_kind=kind,
        errors=errors or {},
        demo_coco=str(DEMO_COCO),
    )


@router.post("/jobs/{kind}", include_in_schema=False)
async def start_job(
    kind: str,
    request: Request,
    admin: ResearcherPostDep,
    session: SessionDep,
    settings: SettingsDep,
) -> Response:
    model = jobs.JOB_KINDS.get(kind)
    if model is None:
        raise HTTPException(status_code=404, detail=f"There is no job kind {kind!r}.")
    form = await request.form()
    typed = {k: v for k, v in form.items() if k in model.model_fields and isinstance(v, str)}
    raw: dict[str, Any] = {k: v.strip() for k, v in typed.items() if v.strip()}
    try:
        params = model.model_validate(raw, context={"data_roots": settings.data_root_paths()})
    except ValidationError as exc:
        return _pipeline(
            request,
            admin,
            session,
            settings,
            kind=kind,
            errors=field_errors(exc),
            typed=typed,
            status=422,
        )
    jobs.mark_orphans(session)
    try:
        job = jobs.create_job(
            session,
            settings,
            JobKind(kind),
            params,
            admin_study(request).id,
            actor=actor_of(admin),
        )
    except jobs.JobBusyError as exc:
        return _pipeline(
            request,
            admin,
            session,
            settings,
            kind=kind,
            typed=typed,
            status=409,
            errors={FORM_LEVEL: f"{exc}: wait for it to finish or cancel it below"},
        )
    log.info("admin %s started %s job %s", admin.user_id, kind, job.id)
    jobs.launch(session, request.app.state.engine, settings, job)
    return back("/admin/pipeline", f"Started {kind} job #{job.id}.")


@router.get("/api/jobs/{job_id}")
def job_status(job_id: DbId, request: Request, session: SessionDep) -> dict[str, Any]:
    return jobs.public(_job(session, job_id, request))


@router.get("/api/jobs")
def job_list(request: Request, session: SessionDep) -> list[dict[str, Any]]:
    """The dashboard's study's recent jobs (the pipeline page polls this)."""
    jobs.mark_orphans(session)
    recent = session.exec(
        select(Job)
        .where(Job.study_id == admin_study(request).id)
        .order_by(col(Job.id).desc())
        .limit(20)
    ).all()
    return [jobs.public(j) for j in recent]


@router.post("/jobs/{job_id}/cancel", include_in_schema=False)
def cancel_job(
    job_id: DbId, request: Request, admin: ResearcherPostDep, session: SessionDep
) -> Response:
    job = _job(session, job_id, request)
    if job.status not in ACTIVE_JOB_STATUSES:
        raise HTTPException(status_code=409, detail=f"Job #{job_id} is already {job.status}.")
    log.info("admin %s cancels job %s", admin.user_id, job_id)
    jobs.cancel(session, job, actor=actor_of(admin))
    return back("/admin/pipeline", f"Job #{job_id} cancelled.")


@router.get("/jobs/{job_id}/download", include_in_schema=False)
def download(
    job_id: DbId,
    request: Request,
    admin: ViewerDep,
    session: SessionDep,
    settings: SettingsDep,
) -> Response:
    job = _job(session, job_id, request)
    if job.kind != JobKind.build or job.status != JobStatus.succeeded:
        raise HTTPException(status_code=409, detail=f"Job #{job_id} has no finished download.")
    path = Path(str(job.params.get("zip", ""))).resolve()
    # Only files inside the export folder, whatever the Job row says.
    if jobs.export_dir(settings) not in path.parents or not path.is_file():
        raise HTTPException(status_code=410, detail="The zip file of this job is gone.")
    # Every download is recorded (who took which study's data), with the file's digest.
    audit.record(
        session,
        actor_of(admin),
        AuditKind.download,
        study_id=job.study_id,
        target=f"job {job_id}",
        change={"file": path.name, "sha256": audit.sha256_of(path)},
    )
    session.commit()
    return FileResponse(path, media_type="application/zip", filename=path.name)
