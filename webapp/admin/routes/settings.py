"""Study settings (batch sizes, time limits, votes, gold, keep threshold, codes) and the crowd
entry links to paste into Prolific or MTurk; invite links for in-house annotators."""

from __future__ import annotations

import json
import logging
import secrets
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Form, Request
from fastapi.responses import Response
from pydantic import ValidationError
from sqlmodel import Session, col, select

from vsr_core import audit, label_fit
from vsr_core.models import AuditKind, InviteToken
from vsr_core.studies.settings import save_study_config
from webapp.admin import figures
from webapp.admin.auth import actor_of
from webapp.admin.cache import Computing
from webapp.admin.forms import FORM_LEVEL
from webapp.admin.pages import admin_study, back, figure, figure_cache, render, study_config
from webapp.admin.roles import ResearcherPostDep, ViewerDep, requires_viewer
from webapp.admin.settings_form import (
    SHOWN_FIELD,
    display_values,
    form_fields,
    parse,
    read_shown,
    relation_groups,
    shown_digests,
    touched,
    validation_errors,
)
from webapp.http.deps import SessionDep

router = APIRouter(prefix="/admin", tags=["admin"], dependencies=[Depends(requires_viewer)])
log = logging.getLogger(__name__)
KINDS = ("generate", "validate")


def entry_links(base_url: str) -> dict[str, dict[str, str]]:
    base = base_url.rstrip("/")
    prolific = "PROLIFIC_PID={{%PROLIFIC_PID%}}&STUDY_ID={{%STUDY_ID%}}&SESSION_ID={{%SESSION_ID%}}"
    return {
        kind: {
            "prolific": f"{base}/start/{kind}?{prolific}",
            "mturk": f"{base}/start/{kind}",
        }
        for kind in KINDS
    }


def _page(
    request: Request,
    admin: Any,
    session: Session,
    values: dict[str, Any],
    errors: dict[str, str],
    msg: str | None,
    status: int = 200,
    shown: str | None = None,
) -> Response:
    settings = request.app.state.settings
    study = admin_study(request)
    invites = session.exec(
        select(InviteToken)
        .where(InviteToken.study_id == study.id)
        .order_by(col(InviteToken.created_at).desc())
        .limit(50)
    ).all()
    # The study's own links (/s/<slug>/...); the default study keeps its old, shorter ones.
    base = settings.base_url.rstrip("/") + ("" if study.is_default else study.path_prefix)
    preview = _preview(request, session, study.id)
    votes = figure(request, session, figures.study_votes(study.id), pending=Computing)
    return render(
        request,
        admin,
        "settings.html",
        "settings",
        status_code=status,
        fields=form_fields(),
        relation_groups=relation_groups(),
        values=values,
        shown=shown or shown_digests(values),
        shown_field=SHOWN_FIELD,
        errors=errors,
        form_error=errors.get(FORM_LEVEL),
        msg=msg,
        links=entry_links(base),
        invites=invites,
        base=base,
        keep_rule=study_config(session, study.id).keep_rule,
        preview={} if isinstance(preview, Computing) else preview,
        preview_counting=counting(preview),
        # The fits themselves fresh (a few rows); the study's vote count, a join of every
        # vote (~1 s at 100x), through the figure cache: "n votes since the fit" may lag,
        # and on a large study it is counted in the background the first time.
        fits=label_fit.fit_states(session, study.id, votes if isinstance(votes, int) else -1),
        votes_counting=counting(votes),
    )


def counting(value: object) -> float | None:
    """Seconds a figure has been computing (None: it is ready)."""
    return value.seconds if isinstance(value, Computing) else None


def _preview(
    request: Request, session: Session, study_id: int
) -> dict[str, dict[str, int]] | Computing:
    """What each other keep rule would change (two GROUP BYs over the Examples: through the
    figure cache, whose key changes with votes, adjudications and fits)."""
    cfg = study_config(session, study_id)
    return figure(request, session, figures.flips(study_id, cfg), pending=Computing)  # type: ignore[no-any-return]


@router.get("/settings", include_in_schema=False)
def settings_page(
    request: Request, admin: ViewerDep, session: SessionDep, msg: str | None = None
) -> Response:
    shown = display_values(study_config(session, admin_study(request).id))
    return _page(request, admin, session, shown, {}, msg)


@router.post("/settings", include_in_schema=False)
async def save_settings(
    request: Request, admin: ResearcherPostDep, session: SessionDep
) -> Response:
    form = await request.form()
    study_id = admin_study(request).id
    changes, typed, errors = parse(form)
    # Only what the admin edited is stored: every other field keeps its value, which may be
    # the study file's own (its consent in its language), never the form's copy of it.
    current = display_values(study_config(session, study_id))
    was = read_shown(form.get(SHOWN_FIELD))
    shown = was if was is not None else read_shown(shown_digests(current))
    assert shown is not None
    changes = touched(changes, typed, shown)
    if not errors and changes:
        try:
            save_study_config(session, changes, study_id, actor=actor_of(admin))
        except (ValidationError, ValueError) as exc:
            session.rollback()
            errors = validation_errors(exc)
    if errors:
        # Nothing was saved: the form again with everything the admin typed, errors by field.
        return _page(
            request,
            admin,
            session,
            current | typed,
            errors,
            None,
            status=422,
            shown=json.dumps(shown),
        )
    if not changes:
        return back("/admin/settings", "Nothing changed.")
    # The names of the changed settings only: their values may be long texts (consent).
    log.info(
        "admin %s changed settings %s of study %s",
        admin.user_id,
        ", ".join(sorted(changes)),
        study_id,
    )
    _after_settings_change(session, study_id)
    figure_cache(request).clear()
    return back("/admin/settings", "Settings saved.")


def _after_settings_change(session: Session, study_id: int) -> None:
    """The validation queue re-derives which Examples still need votes."""
    from webapp.validate.audit import refresh_queue

    refresh_queue(session, study_config(session, study_id), study_id)


@router.post("/settings/invites", include_in_schema=False)
def create_invite(
    request: Request,
    admin: ResearcherPostDep,
    session: SessionDep,
    label: Annotated[str, Form(max_length=200)] = "",
    roles: Annotated[list[str] | None, Form()] = None,
) -> Response:
    chosen = [r for r in (roles or []) if r in KINDS] or list(KINDS)
    token = InviteToken(
        token=secrets.token_urlsafe(18),
        label=label.strip(),
        roles=chosen,
        study_id=admin_study(request).id,
    )
    session.add(token)
    session.flush()
    # The token itself is a credential: the record names the invite by id and label.
    audit.record(
        session,
        actor_of(admin),
        AuditKind.invite_create,
        study_id=token.study_id,
        target=f"invite {token.id}",
        change={"label": token.label, "roles": chosen},
    )
    session.commit()
    log.info(
        "admin %s created invite %s (roles %s) for study %s",
        admin.user_id,
        token.id,
        ", ".join(chosen),
        token.study_id,
    )
    return back("/admin/settings", f"Invite link created for {label.strip() or 'an annotator'}.")
