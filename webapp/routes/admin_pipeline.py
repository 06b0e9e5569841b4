"""Pipeline: sample more pairs, run adversarial matching, build and download the dataset.
Long work runs as a background job whose progress the page polls."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi import APIRouter, Depends, HTTPException, Request
from fastapi.responses import FileResponse, Response
from pydantic import ValidationError
from sqlmodel import Session, col, select

from core.models import Job, MatchRun
from webapp.admin import jobs, stats
from webapp.admin.auth import AdminDep, AdminPostDep, current_admin_session
from webapp.admin.pages import back, render
from webapp.deps import SessionDep, SettingsDep
from webapp.inputs import DbId

router = APIRouter(prefix="/admin", tags=["admin"], dependencies=[Depends(current_admin_session)])


def _job(session: Session, job_id: int) -> Job:
    job = session.get(Job, job_id)
    if job is None:
        raise HTTPException(status_code=404, detail=f"There is no job #{job_id}.")
    return job


@router.get("/pipeline", include_in_schema=False)
def pipeline_page(
    request: Request, admin: AdminDep, session: SessionDep, msg: str | None = None
) -> Response:
    jobs.mark_orphans(session)
    recent = session.exec(select(Job).order_by(col(Job.id).desc()).limit(20)).all()
    runs = session.exec(select(MatchRun).order_by(col(MatchRun.id).desc()).limit(5)).all()
    forms = {kind: model.model_json_schema() for kind, model in jobs.JOB_KINDS.items()}
    return render(
        request,
        admin,
        "pipeline.html",
        "pipeline",
        jobs=[jobs.public(j) for j in recent],
        runs=runs,
        forms=forms,
        msg=msg,
        mc=stats.mc_summary(session),
    )


@router.post("/jobs/{kind}", include_in_schema=False)
async def start_job(
    kind: str, request: Request, admin: AdminPostDep, session: SessionDep, settings: SettingsDep
) -> Response:
    model = jobs.JOB_KINDS.get(kind)
    if model is None:
        raise HTTPException(status_code=404, detail=f"There is no job kind {kind!r}.")
    form = await request.form()
    raw: dict[str, Any] = {
        k: v for k, v in form.items() if k in model.model_fields and isinstance(v, str) and v
    }
    try:
        params = model(**raw)
    except ValidationError as exc:
        detail = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise HTTPException(status_code=422, detail=f"Check the {kind} form: {detail}") from None
    jobs.mark_orphans(session)
    try:
        job = jobs.create_job(session, settings, kind, params)
    except jobs.JobBusyError as exc:
        raise HTTPException(status_code=409, detail=str(exc)) from None
    jobs.launch(session, request.app.state.engine, settings, job)
    return back("/admin/pipeline", f"Started {kind} job #{job.id}.")


@router.get("/api/jobs/{job_id}")
def job_status(job_id: DbId, session: SessionDep) -> dict[str, Any]:
    return jobs.public(_job(session, job_id))


@router.get("/api/jobs")
def job_list(session: SessionDep) -> list[dict[str, Any]]:
    jobs.mark_orphans(session)
    recent = session.exec(select(Job).order_by(col(Job.id).desc()).limit(20)).all()
    return [jobs.public(j) for j in recent]


@router.post("/jobs/{job_id}/cancel", include_in_schema=False)
def cancel_job(job_id: DbId, admin: AdminPostDep, session: SessionDep) -> Response:
    job = _job(session, job_id)
    if job.status not in jobs.ACTIVE:
        raise HTTPException(status_code=409, detail=f"Job #{job_id} is already {job.status}.")
    jobs.cancel(session, job)
    return back("/admin/pipeline", f"Job #{job_id} cancelled.")


@router.get("/jobs/{job_id}/download", include_in_schema=False)
def download(job_id: DbId, session: SessionDep, settings: SettingsDep) -> Response:
    job = _job(session, job_id)
    if job.kind != "build" or job.status != "succeeded":
        raise HTTPException(status_code=409, detail=f"Job #{job_id} has no finished download.")
    path = Path(str(job.params.get("zip", ""))).resolve()
    # Only files inside the export folder, whatever the Job row says.
    if jobs.export_dir(settings) not in path.parents or not path.is_file():
        raise HTTPException(status_code=410, detail="The zip file of this job is gone.")
    return FileResponse(path, media_type="application/zip", filename=path.name)
