"""Study settings (batch sizes, time limits, votes, gold, keep threshold, codes) and the crowd
entry links to paste into Prolific or MTurk; invite links for in-house annotators."""

from __future__ import annotations

import secrets
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Form, Request
from fastapi.responses import Response
from pydantic import ValidationError
from sqlmodel import Session, col, select

from core.models import InviteToken
from core.study import StudyConfig, save_study_config
from webapp.admin.auth import AdminDep, AdminPostDep, current_admin_session
from webapp.admin.pages import back, figure_cache, render, study_config
from webapp.deps import SessionDep

router = APIRouter(prefix="/admin", tags=["admin"], dependencies=[Depends(current_admin_session)])
KINDS = ("generate", "validate")


def _fields() -> list[dict[str, Any]]:
    """Form fields from StudyConfig itself, so a new setting shows up without template work."""
    out = []
    for name, info in StudyConfig.model_fields.items():
        ann = info.annotation
        kind = {int: "int", float: "float", bool: "bool", str: "str"}.get(ann, "list")  # type: ignore[arg-type]
        if isinstance(info.json_schema_extra, dict) and info.json_schema_extra.get("widget"):
            kind = "text"  # long free text (the consent form): a big textarea
        out.append({"name": name, "kind": kind, "help": info.description or ""})
    return out


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
    errors: list[str],
    msg: str | None,
    status: int = 200,
) -> Response:
    settings = request.app.state.settings
    invites = session.exec(
        select(InviteToken).order_by(col(InviteToken.created_at).desc()).limit(50)
    ).all()
    return render(
        request,
        admin,
        "settings.html",
        "settings",
        status_code=status,
        fields=_fields(),
        values=values,
        errors=errors,
        msg=msg,
        links=entry_links(settings.base_url),
        invites=invites,
        base=settings.base_url.rstrip("/"),
    )


@router.get("/settings", include_in_schema=False)
def settings_page(
    request: Request, admin: AdminDep, session: SessionDep, msg: str | None = None
) -> Response:
    values = study_config(session).model_dump()
    values["keep_threshold"] = _as_text(values["keep_threshold"])
    return _page(request, admin, session, values, [], msg)


def _as_text(threshold: float) -> str:
    """2/3 rather than 0.6666666666666666 (the paper's way of writing it)."""
    from core.agreement import as_fraction

    frac = as_fraction(threshold)
    return f"{frac.numerator}/{frac.denominator}" if frac.denominator <= 12 else str(threshold)


def _parse(form: Any) -> tuple[dict[str, Any], list[str]]:
    changes: dict[str, Any] = {}
    errors: list[str] = []
    for f in _fields():
        name, kind = f["name"], f["kind"]
        if kind == "bool":
            changes[name] = form.get(name) in ("on", "true", "1")
            continue
        raw = form.get(name)
        if raw is None:
            continue
        raw = str(raw).strip()
        try:
            if kind == "int":
                changes[name] = int(raw)
            elif kind == "float":
                # Accept "2/3" for the keep threshold: it is how the paper states it.
                if "/" in raw:
                    num, den = raw.split("/", 1)
                    changes[name] = int(num) / int(den)
                else:
                    changes[name] = float(raw)
            elif kind == "list":
                items = [x.strip() for x in raw.replace("\n", ",").split(",") if x.strip()]
                changes[name] = items or None
            elif kind == "text":
                changes[name] = raw.replace("\r\n", "\n")
            else:
                changes[name] = raw
        except (ValueError, ZeroDivisionError):
            errors.append(f"{name}: {raw!r} is not a number")
    return changes, errors


@router.post("/settings", include_in_schema=False)
async def save_settings(request: Request, admin: AdminPostDep, session: SessionDep) -> Response:
    form = await request.form()
    changes, errors = _parse(form)
    current = study_config(session).model_dump()
    if not errors:
        try:
            save_study_config(session, changes)
        except ValidationError as exc:
            session.rollback()
            errors = [
                f"{'.'.join(str(x) for x in e['loc']) or 'settings'}: {e['msg']}"
                for e in exc.errors()
            ]
        except ValueError as exc:
            session.rollback()
            errors = [str(exc)]
    if errors:
        # Nothing was saved: show the form again with what the admin typed.
        return _page(request, admin, session, current | changes, errors, None, status=422)
    _after_settings_change(session)
    figure_cache(request).clear()
    return back("/admin/settings", "Settings saved.")


def _after_settings_change(session: Session) -> None:
    """The validation queue re-derives which Examples still need votes."""
    from webapp import validation_queue

    validation_queue.refresh_queue(session, study_config(session))


@router.post("/settings/invites", include_in_schema=False)
def create_invite(
    request: Request,
    admin: AdminPostDep,
    session: SessionDep,
    label: Annotated[str, Form(max_length=200)] = "",
    roles: Annotated[list[str] | None, Form()] = None,
) -> Response:
    chosen = [r for r in (roles or []) if r in KINDS] or list(KINDS)
    token = InviteToken(token=secrets.token_urlsafe(18), label=label.strip(), roles=chosen)
    session.add(token)
    session.commit()
    return back("/admin/settings", f"Invite link created for {label.strip() or 'an annotator'}.")
