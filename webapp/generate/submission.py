"""The contrastive caption task: validate a submission and store it in one transaction.

One submission = one Annotation and, unless skipped, two Examples (True with the chosen
image, False with the other). Idempotent: the form's ``client_token`` and the lease
(``assignment_id``) are both unique on Annotation, so a double submit, a resubmitted form or
a retry after a network error returns the first answer and stores nothing new.
"""

from __future__ import annotations

import secrets
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field, field_validator, model_validator
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, select

from vsr_core.caption_language import offered_relations, render_concepts
from vsr_core.captions import render_caption
from vsr_core.models import (
    DEFAULT_STUDY_ID,
    Annotation,
    Assignment,
    BatchKind,
    Example,
    ExampleOrigin,
    ImagePair,
    LeaseStatus,
    PairStatus,
)
from vsr_core.relations import enabled_relations, get_relation, is_known
from vsr_core.studies.definition import Language, RelationEntry
from vsr_core.studies.settings import StudyConfig
from vsr_core.types import utcnow
from webapp.crowd.lease_tokens import MAX_LENGTH
from webapp.crowd.leases import finish, lock_row_wait
from webapp.crowd.signals import MAX_LENGTH as SIGNALS_MAX
from webapp.crowd.signals import SignalsError, parse_signals, signal_values, store_signals
from webapp.http.i18n import N_

SKIP_REASONS: dict[str, str] = {
    "unidentifiable": N_("I cannot identify one of the objects in an image"),
    "no_contrast": N_("No relation is true for one image and false for the other"),
}
TOKEN_PATTERN = r"^[A-Za-z0-9_-]{8,64}$"


class _AnswerFields(BaseModel):
    """One answer to the contrastive task, less the lease it answers."""

    client_token: str = Field(pattern=TOKEN_PATTERN, description="idempotency key")
    action: Literal["submit", "skip"] = "submit"
    relation: str | None = Field(default=None, max_length=64)
    ent1: Literal["a", "b"] | None = Field(default=None, description="which concept is ENT1")
    true_image: int | None = Field(
        default=None, ge=1, le=2, description="image (1 or 2) the caption is true for"
    )
    skip_reason: Literal["unidentifiable", "no_contrast"] | None = None
    skip_comment: str | None = Field(default=None, max_length=1000)
    duration_ms: int | None = Field(default=None, ge=0, le=24 * 3600 * 1000)
    signals: str | None = Field(
        default=None, max_length=SIGNALS_MAX, description="the page's measurements"
    )

    @field_validator(
        "relation", "ent1", "true_image", "skip_reason", "skip_comment", "signals", mode="before"
    )
    @classmethod
    def _blank_is_none(cls, value: object) -> object:
        # An unticked radio group or empty textarea arrives as "" from a plain HTML form.
        return None if value == "" else value

    @model_validator(mode="after")
    def _complete(self) -> _AnswerFields:
        if self.action == "submit":
            missing = [
                name
                for name, value in (
                    ("relation", self.relation),
                    ("ent1", self.ent1),
                    ("true_image", self.true_image),
                )
                if value is None
            ]
            if missing:
                raise ValueError(
                    "to submit a caption choose a relation, which object is first, and the "
                    f"image it is true for (missing: {', '.join(missing)})"
                )
        elif self.skip_reason is None:
            raise ValueError("to skip, say why (choose a reason)")
        return self


class GenerationSubmission(_AnswerFields):
    """An answer as :func:`submit` stores it: the lease by its database id."""

    assignment_id: int = Field(ge=1, le=2**31 - 1, description="the lease being answered")


class GenerationAnswer(_AnswerFields):
    """An answer as the crowd sends it (JSON body and form alike): the lease by the opaque
    token the task gave out (webapp.crowd.lease_tokens), never by its database id."""

    assignment_id: str = Field(max_length=MAX_LENGTH, description="the task's assignment_id")


class GenerationForm(GenerationAnswer):
    csrf: str = Field(max_length=128)


class SubmissionError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def allowed_relations(config: StudyConfig) -> list[str]:
    """Relations offered to annotators: the study's list, else Table 1 less the unused five."""
    if config.relations_enabled is not None:
        return [r for r in config.relations_enabled if is_known(r)]
    return [r.name for r in enabled_relations()]


def offered_in(config: StudyConfig, language: Language) -> list[RelationEntry]:
    """The relations of the study language annotators may pick, in the file's order: the
    language's switched-on ones, or the admin's run-time ``relations_enabled`` list when set
    (which may switch a relation of the file back on)."""
    if config.relations_enabled is None:
        return offered_relations(language)
    chosen = set(allowed_relations(config))
    return [r for r in language.relations if r.id in chosen and not r.import_only]


def _existing(session: Session, sub: GenerationSubmission) -> Annotation | None:
    by_token = session.exec(
        select(Annotation).where(Annotation.client_token == sub.client_token)
    ).first()
    if by_token is not None:
        return by_token
    return session.exec(
        select(Annotation).where(Annotation.assignment_id == sub.assignment_id)
    ).first()


def _replay(session: Session, existing: Annotation, worker_id: int, study_id: int) -> Annotation:
    if existing.worker_id != worker_id:
        raise SubmissionError(409, "This form was already used by someone else.")
    _check_study(session.get(ImagePair, existing.pair_id), study_id)
    return existing


OTHER_STUDY = (
    "This pair belongs to another study than the page you sent it to. Nothing was saved: "
    "please go back to the task through your study's own link."
)


def _check_study(pair: ImagePair | None, study_id: int) -> ImagePair:
    """The lease's pair, if it belongs to the request's study: a caption posted to another
    study's address (its language, its relations) is refused before anything is stored."""
    if pair is None or pair.study_id != study_id:
        raise SubmissionError(403, OTHER_STUDY)
    return pair


def submit(
    session: Session,
    worker_id: int,
    sub: GenerationSubmission,
    config: StudyConfig,
    now: datetime | None = None,
    language: Language | None = None,
    study_id: int = DEFAULT_STUDY_ID,
) -> tuple[Annotation, bool]:
    """Store a submission and commit; returns (annotation, created). Raises SubmissionError.

    ``language``: the study's language (its relations and caption template); the default
    English one when not given. The caption is stored in it, the relation as its id.
    ``study_id``: the study the request works in; a lease of another study's pair is refused.
    Everything (annotation, examples, lease, pair status) is committed together or not at all.
    """
    try:
        result = _submit(session, worker_id, sub, config, now or utcnow(), language, study_id)
        session.commit()
        return result
    except IntegrityError:
        # A concurrent duplicate (same token or same lease) won the race: answer with it.
        session.rollback()
        existing = _existing(session, sub)
        if existing is None:
            raise
        return _replay(session, existing, worker_id, study_id), False
    except BaseException:
        session.rollback()
        raise


def _submit(
    session: Session,
    worker_id: int,
    sub: GenerationSubmission,
    config: StudyConfig,
    now: datetime,
    language: Language | None = None,
    study_id: int = DEFAULT_STUDY_ID,
) -> tuple[Annotation, bool]:
    try:
        signals = parse_signals(sub.signals)
    except SignalsError as exc:
        raise SubmissionError(
            422, "The page's measurements of this answer were not understood. Please reload it."
        ) from exc
    existing = _existing(session, sub)
    if existing is not None:
        return _replay(session, existing, worker_id, study_id), False
    lease = session.exec(
        lock_row_wait(select(Assignment).where(Assignment.id == sub.assignment_id), session)
    ).first()
    if lease is None or lease.worker_id != worker_id or lease.kind != BatchKind.generate:
        raise SubmissionError(403, "This pair is not assigned to you.")
    pair = _check_study(session.get(ImagePair, lease.pair_id), study_id)
    assert pair.id is not None
    # Re-read after taking the lock: a concurrent submit of this lease may just have finished.
    existing = _existing(session, sub)
    if existing is not None:
        return _replay(session, existing, worker_id, study_id), False
    if lease.status != LeaseStatus.active:
        raise SubmissionError(
            409,
            "Your time for this pair ran out and it went back to the pool. "
            "Please go on with the next one.",
        )
    annotation = Annotation(
        pair_id=pair.id,
        worker_id=worker_id,
        assignment_id=lease.id,
        client_token=sub.client_token,
        duration_ms=sub.duration_ms,
        created_at=now,
    )
    examples: list[Example] = []
    if sub.action == "skip":
        annotation.skip_reason = sub.skip_reason
        annotation.skip_comment = (sub.skip_comment or "").strip() or None
        pair.status = PairStatus.skipped
    else:
        assert sub.relation is not None and sub.true_image is not None
        name = sub.relation.strip().lower()
        offered = None if language is None else {r.id for r in offered_in(config, language)}
        if name not in allowed_relations(config) or (offered is not None and name not in offered):
            raise SubmissionError(  # one literal: the worker reads it in the study's language
                422,
                "That is not one of the relations offered in this study; please choose one "
                "from the list.",
            )
        relation = get_relation(name).name
        subj, obj = pair.concept_a, pair.concept_b
        if sub.ent1 == "b":
            subj, obj = obj, subj
        caption = (
            render_caption(subj, relation, obj)
            if language is None
            else render_concepts(language, subj, relation, obj)
        )
        true_id, false_id = pair.image1_id, pair.image2_id
        if sub.true_image == 2:
            true_id, false_id = false_id, true_id
        annotation.relation, annotation.subj, annotation.obj = relation, subj, obj
        annotation.true_image_id = true_id
        sides = [(true_id, True), (false_id, False)]
        # A random order of the two Examples, so their ids (the validation queue's order)
        # never tell the True one from the False one (docs/validation.md, Rules).
        if secrets.randbelow(2):
            sides.reverse()
        for image_id, label in sides:
            examples.append(
                Example(
                    study_id=pair.study_id,  # an Example lives in its pair's study
                    image_id=image_id,
                    caption=caption,
                    relation=relation,
                    subj=subj,
                    obj=obj,
                    label=label,
                    origin=ExampleOrigin.human,
                    author_id=worker_id,
                    created_at=now,
                )
            )
        pair.status = PairStatus.annotated
    session.add(annotation)
    session.flush()
    for example in examples:
        example.annotation_id = annotation.id
        session.add(example)
    finish(session, lease, now)
    session.add(pair)
    session.flush()
    if signals is not None:
        assert annotation.id is not None
        values = signal_values(signals, now, study_id, worker_id, annotation_id=annotation.id)
        store_signals(session, values)
    return annotation, True
