"""Study settings that admins change at run time, stored in the StudySetting table.

Defaults follow the VSR paper (batches of 200 captions in 80 minutes, one generation batch a
day; validation batches of 500 in 90 minutes; at least 3 votes, keep at >= 2/3).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field, ValidationError
from sqlmodel import Session, select

from vsr_core import audit
from vsr_core.audit import Actor
from vsr_core.codes import give_study_codes
from vsr_core.locks import hold
from vsr_core.models import DEFAULT_STUDY_ID, AuditKind, Study, StudySetting
from vsr_core.tables import STUDY_SETTING
from vsr_core.types import utcnow
from vsr_core.upsert import upsert

# What a participant agrees to. The [bracketed] parts are for the researcher to replace in
# the dashboard's study settings before the study goes live; {minutes} and {items} are
# filled in from the batch settings. A strict Markdown subset (webapp.crowd.consent).
DEFAULT_CONSENT = "\n".join(
    [
        "This is a research study on how people describe where things are in photographs, run by "
        "[researcher name, institution]. The captions and answers you give will become part of a "
        "public research dataset.",
        "",
        "- **What you do:** look at everyday photos from the MS-COCO collection and write short "
        "captions or say whether short captions are true. "
        "A batch has up to {items} items and takes "
        "at most {minutes} minutes.",
        "- **Pay:** [pay for a batch, e.g. GBP 9.00 for a full batch]. If you finish early, the "
        "completion code covers the work you did.",
        "- **Your data:** we store your answers, the time you took, "
        "and your platform id (never your "
        "name). Your id is replaced by a number in the published data.",
        "- **Voluntary:** you may stop at any time by closing the page and returning the study, or "
        'end a batch early with "Finish now".',
        "- Some photos show people in ordinary situations; none are meant to be upsetting.",
        "- **Ethics approval:** [committee name, reference number].",
        "- **Questions or concerns:** [researcher name, email address].",
        "",
    ]
)


class StudyConfig(BaseModel):
    generate_batch_size: int = Field(200, ge=1, le=10_000)
    generate_minutes: int = Field(80, ge=1, le=24 * 60)
    generate_batches_per_day: int = Field(1, ge=0, le=100)
    validate_batch_size: int = Field(500, ge=1, le=10_000)
    validate_minutes: int = Field(90, ge=1, le=24 * 60)
    validate_batches_per_day: int = Field(0, ge=0, le=100, description="0 = unlimited")
    lease_minutes: int = Field(10, ge=1, le=24 * 60, description="one item's lease")
    votes_per_example: int = Field(3, ge=1, le=50)
    max_votes_per_example: int = Field(5, ge=1, le=50)
    keep_threshold: float = Field(2 / 3, gt=0.0, le=1.0)
    # What decides kept for an Example nobody adjudicated (vsr_core.kept): the share of
    # votes agreeing with its label (VSR), or the label of a fitted label model.
    keep_rule: str = Field("agreement", pattern="^(agreement|dawid-skene|mace)$")
    # Adaptive redundancy (vsr_core.agreement.is_decided): when an Example with at least
    # votes_per_example votes still needs more, up to max_votes_per_example.
    # next_vote: more votes only while one more could flip the keep decision (see is_decided).
    decide_method: str = Field("next_vote", pattern="^(next_vote|exact|wilson|beta)$")
    decide_confidence: float = Field(0.95, gt=0.0, lt=1.0)
    gold_rate: float = Field(0.05, ge=0.0, le=1.0)
    gold_min_answers: int = Field(5, ge=1, le=1000)
    gold_accuracy_threshold: float = Field(0.7, ge=0.0, le=1.0)
    # Implausibly fast work (dashboard flag next to gold accuracy): a worker whose median
    # time per vote / per caption is below these (after at least 5 of them). 0 = off.
    fast_vote_seconds: float = Field(1.0, ge=0.0, le=600.0)
    fast_caption_seconds: float = Field(5.0, ge=0.0, le=3600.0)
    block_on_gold_failure: bool = False
    # Each study's own random codes (vsr_core.codes, stored when the study is made and by
    # migration 0022 for older ones); no fixed word a past participant could reuse.
    completion_code: str = Field("", min_length=1, max_length=64)
    screenout_code: str = Field("", min_length=1, max_length=64)
    relations_enabled: list[str] | None = Field(None, description="None = Table 1 less unused")
    consent_text: str = Field(
        DEFAULT_CONSENT,
        min_length=1,
        max_length=20_000,
        description="Shown before a worker starts. Replace the [bracketed] parts; {minutes} "
        "and {items} become the batch's time and size. Markdown: **bold**, - lists, "
        "[links](https://...); HTML is shown as text.",
        json_schema_extra={"widget": "textarea"},
    )


def _file_defaults(session: Session, study_id: int) -> dict[str, Any]:
    """The study file's ``[collection]`` values and its consent text in its own language:
    the defaults its stored settings override."""
    study = session.get(Study, study_id)
    if study is None:
        return {}
    from vsr_core.studies.context import parsed_definition

    definition = parsed_definition(study.definition_hash, study.definition, study.slug)
    consent = definition.default_language.texts.consent
    return definition.collection.model_dump() | {"consent_text": consent}


def _is_builtin_consent(text: Any) -> bool:
    return isinstance(text, str) and text.strip() == DEFAULT_CONSENT.strip()


def load_study_config(session: Session, study_id: int = DEFAULT_STUDY_ID) -> StudyConfig:
    """One study's settings: the stored ones over its file's ``[collection]`` over the
    defaults (unknown or invalid stored keys are ignored)."""
    stored: dict[str, Any] = _file_defaults(session, study_id)
    rows = session.exec(select(StudySetting).where(StudySetting.study_id == study_id))
    saved = {s.key: s.value for s in rows}
    if _is_builtin_consent(saved.get("consent_text")):
        # The English default stored by a settings form that sent back every field (before
        # it stored only edited ones) is no choice of the admin's: the study's own text wins.
        del saved["consent_text"]
    stored |= saved
    known = {k: v for k, v in stored.items() if k in StudyConfig.model_fields}
    try:
        return StudyConfig(**known)
    except ValidationError:
        # A bad stored value must not take the site down: keep the valid ones.
        good = {}
        for k, v in known.items():
            try:
                StudyConfig(**{k: v})
                good[k] = v
            except ValidationError:
                continue
        return StudyConfig(**good)


def save_study_config(
    session: Session,
    changes: dict[str, Any],
    study_id: int = DEFAULT_STUDY_ID,
    *,
    actor: Actor | None = None,
) -> StudyConfig:
    """Validate and store one study's changed settings (raises pydantic.ValidationError on
    bad input). With ``actor``, the audit trail's record of the change (the before and
    after values of the keys whose value changed) commits with it."""
    # Each key is written by upsert, so two first saves of it cannot collide
    # (studysetting_pkey). Saves still take turns: the audit's "before" is then the value
    # this save replaced, and the cross-field checks see the other save's values.
    hold(session, f"study-settings:{study_id}")
    give_study_codes(session, study_id)  # a study made before its codes existed gets its own
    current = load_study_config(session, study_id)
    merged = current.model_dump() | changes
    config = StudyConfig(**merged)  # validates the whole config, including cross-field rules
    if config.max_votes_per_example < config.votes_per_example:
        raise ValueError("max_votes_per_example must be at least votes_per_example")
    rows = []
    for key in changes:
        if key not in StudyConfig.model_fields:
            raise ValueError(f"unknown study setting {key!r}")
        value = getattr(config, key)
        rows.append({"study_id": study_id, "key": key, "value": value, "updated_at": utcnow()})
    upsert(session.connection(), STUDY_SETTING, rows)
    if actor is not None:
        diff = audit.changed(
            {k: getattr(current, k) for k in changes},
            {k: getattr(config, k) for k in changes},
        )
        audit.record(
            session,
            actor,
            AuditKind.settings_change,
            study_id=study_id,
            target="settings",
            change=json_safe(diff),
        )
    session.commit()
    return config


def json_safe(value: Any) -> Any:
    """``value`` with every setting in its JSON form (a stored record is JSON)."""
    from pydantic_core import to_jsonable_python

    return to_jsonable_python(value)
