"""All tables of the data model (DESIGN.md), as SQLModel classes.

Schema changes only through Alembic revisions in ``migrations/versions``; a test checks that
the migrated schema and these models agree. Conventions: ``XBase`` holds the data fields,
``X`` is the table built on it.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import (
    Boolean,
    Column,
    ForeignKey,
    Index,
    Integer,
    Text,
    UniqueConstraint,
    false,
    text,
    true,
)
from sqlmodel import Field, SQLModel

from vsr_core.defaults import DEFAULT_STUDY_ID as DEFAULT_STUDY_ID
from vsr_core.types import JSONType, UTCDateTime, utcnow


def _ts(index: bool = False) -> Any:
    return Field(
        default_factory=utcnow, sa_column=Column(UTCDateTime(), nullable=False, index=index)
    )


def _opt_ts(index: bool = False) -> Any:
    return Field(default=None, sa_column=Column(UTCDateTime(), nullable=True, index=index))


def _json(default: Any = None, nullable: bool = True) -> Any:
    if callable(default):
        return Field(default_factory=default, sa_column=Column(JSONType, nullable=nullable))
    return Field(default=default, sa_column=Column(JSONType, nullable=nullable))


def _study(index: bool = True) -> Any:
    """The study a row belongs to (``study.id``); the default study unless given."""
    return Field(
        default=DEFAULT_STUDY_ID,
        sa_column=Column(
            Integer,
            ForeignKey("study.id"),
            nullable=False,
            index=index,
            server_default=str(DEFAULT_STUDY_ID),
        ),
    )


class WorkerSource(StrEnum):
    prolific = "prolific"
    mturk = "mturk"
    invite = "invite"
    imported = "imported"


class PairStatus(StrEnum):
    available = "available"
    leased = "leased"
    annotated = "annotated"
    skipped = "skipped"
    retired = "retired"


class ExampleOrigin(StrEnum):
    human = "human"
    adversarial = "adversarial"
    imported = "imported"
    # A fresh copy of an imported Example, opened for new votes (vsr_core.revalidation); its
    # votes never mix with the original's, and it is left out of exports and kept counts.
    revalidation = "revalidation"


class ReleaseScheme(StrEnum):
    """A split scheme of an imported release's split files (``splits/<scheme>/<part>.jsonl``)."""

    random = "random"
    zeroshot = "zeroshot"


class SplitPart(StrEnum):
    train = "train"
    dev = "dev"
    test = "test"


class BatchKind(StrEnum):
    generate = "generate"
    validate = "validate"


class BatchStatus(StrEnum):
    open = "open"
    completed = "completed"
    expired = "expired"
    returned = "returned"


class LeaseStatus(StrEnum):
    active = "active"
    done = "done"
    released = "released"
    expired = "expired"


class JobStatus(StrEnum):
    """A dashboard job's life: queued -> running -> succeeded | failed | cancelled."""

    queued = "queued"
    running = "running"
    succeeded = "succeeded"
    failed = "failed"
    cancelled = "cancelled"


# The statuses of a job whose process may still be at work.
ACTIVE_JOB_STATUSES = (JobStatus.queued, JobStatus.running)


class JobKind(StrEnum):
    """What a dashboard job does (vsr_cli.admin_jobs has one handler per kind)."""

    sample = "sample"
    match = "match"
    build = "build"


class CrowdPlatform(StrEnum):
    """The crowd platforms a platform study can live on (also ``Worker.source`` values)."""

    prolific = "prolific"
    mturk = "mturk"


class PlatformStudyState(StrEnum):
    """creating (written ahead of the create call) -> draft -> published <-> paused; an MTurk
    HIT is published from its creation."""

    creating = "creating"
    draft = "draft"
    published = "published"
    paused = "paused"


class PlatformActionKind(StrEnum):
    approve = "approve"
    reject = "reject"
    return_ = "return"  # ask the participant to return the submission (Prolific only)
    bonus = "bonus"


class PlatformActionState(StrEnum):
    """planned -> sending (committed before the call) -> done | failed | unknown;
    planned -> cancelled when the facts read at send time forbid it."""

    planned = "planned"
    sending = "sending"  # claimed; the call may be in flight or its answer lost
    done = "done"
    failed = "failed"  # refused by the platform: nothing happened
    unknown = "unknown"  # may have happened; never re-sent: a person checks the platform
    cancelled = "cancelled"  # never sent: returned/rejected submission, flagged worker...


class LedgerUnitKind(StrEnum):
    """A unit of work the settlement ledger credits: one vote, or one written Example."""

    vote = "vote"
    example = "example"


class AdminRole(StrEnum):
    """What an admin may do in one study (docs/dashboard.md, "Roles")."""

    owner = "owner"  # everything, platform money and the study's admins included
    researcher = "researcher"  # settings, jobs, data, workers; no payments, no admins
    viewer = "viewer"  # read-only

    @property
    def rank(self) -> int:
        return _ROLE_RANK[self]

    def allows(self, needed: AdminRole) -> bool:
        """Whether this role may do what ``needed`` may (roles are ordered)."""
        return self.rank >= needed.rank


_ROLE_RANK = {AdminRole.viewer: 0, AdminRole.researcher: 1, AdminRole.owner: 2}


class AuditKind(StrEnum):
    """One kind of admin action in the audit trail (vsr_core.audit)."""

    login = "login"
    login_failed = "login_failed"
    logout = "logout"
    admin_create = "admin_create"
    password_change = "password_change"
    role_grant = "role_grant"
    role_revoke = "role_revoke"
    study_create = "study_create"
    study_update = "study_update"
    study_archive = "study_archive"
    settings_change = "settings_change"
    invite_create = "invite_create"
    worker_block = "worker_block"
    worker_unblock = "worker_unblock"
    worker_flag = "worker_flag"
    authenticity_approve = "authenticity_approve"  # a person cleared a worker's evidence
    gold_mark = "gold_mark"
    requeue = "requeue"
    revalidation_round = "revalidation_round"
    burst_cut = "burst_cut"
    job_start = "job_start"
    job_cancel = "job_cancel"
    platform_create = "platform_create"
    platform_plan = "platform_plan"
    platform_apply = "platform_apply"
    platform_action = "platform_action"  # one approve/reject/bonus sent by an apply
    platform_step = "platform_step"  # publish, pause, resume, sync of a platform study
    platform_override = "platform_override"  # an owner's duration shorter than measured
    sample_run = "sample_run"  # `vsr sample` stored pairs (a dashboard job is job_start)
    match_run = "match_run"  # `vsr match` wrote a run (a dashboard job is job_start)
    release_import = "release_import"  # `vsr import-vsr` imported a release file
    adjudicate = "adjudicate"
    label_fit = "label_fit"  # label models refitted: their decisions may change the counts
    audit_export = "audit_export"
    dataset_export = "dataset_export"  # `build-dataset` wrote files (CLI or dashboard job)
    download = "download"  # a job's output downloaded from the dashboard
    token_create = "token_create"
    token_revoke = "token_revoke"


# --- studies ----------------------------------------------------------------------------


class Study(SQLModel, table=True):
    """One collection run by this deployment, defined by a study file (docs/studies.md).

    Pairs, Examples, batches, settings, jobs, matching runs, invites and platform studies
    belong to one study (their ``study_id``); workers are shared by all studies.
    """

    id: int | None = Field(default=None, primary_key=True)
    slug: str = Field(max_length=63, unique=True, index=True)
    name: str = Field(max_length=200)
    # The study file as given, and its sha256 (hex): exports name the definition by it.
    definition: str = Field(sa_column=Column(Text, nullable=False))
    definition_hash: str = Field(max_length=64)
    language: str = Field(max_length=35, description="the definition's default language code")
    is_default: bool = Field(
        default=False, sa_column=Column(Boolean, nullable=False, server_default=false())
    )
    created_at: datetime = _ts()
    # Archived: takes no new workers or batches (vsr study archive); its data stays.
    archived_at: datetime | None = _opt_ts()


class StudyVersion(SQLModel, table=True):
    """Every definition a study has had (vsr study create, then each vsr study update),
    numbered from 1; the Study row holds the latest."""

    study_id: int = Field(foreign_key="study.id", primary_key=True)
    version: int = Field(primary_key=True)
    definition: str = Field(sa_column=Column(Text, nullable=False))
    definition_hash: str = Field(max_length=64)
    created_at: datetime = _ts()


# --- people -----------------------------------------------------------------------------


class WorkerBase(SQLModel):
    source: str = Field(max_length=16, description="prolific | mturk | invite | imported")
    external_id: str = Field(max_length=128, description="Prolific PID, MTurk workerId, ...")
    roles: list[str] = _json(default=list, nullable=False)
    blocked: bool = False
    flagged: bool = False
    flag_reason: str | None = Field(default=None, max_length=500)
    demographics: dict[str, Any] | None = _json()


class Worker(WorkerBase, table=True):
    __table_args__ = (UniqueConstraint("source", "external_id", name="uq_worker_source_ext"),)
    id: int | None = Field(default=None, primary_key=True)
    created_at: datetime = _ts()


class WorkerStanding(SQLModel, table=True):
    """A worker's standing in one study (vsr_core.standing): blocked and flagged there, with
    the reasons typed there. ``Worker.blocked``/``flagged`` are the standing in every study
    (a site-wide block, and what was recorded before standings were per study)."""

    worker_id: int = Field(foreign_key="worker.id", primary_key=True)
    study_id: int = Field(foreign_key="study.id", primary_key=True, index=True)
    blocked: bool = False
    block_reason: str | None = Field(default=None, max_length=500)
    flagged: bool = False
    flag_reason: str | None = Field(default=None, max_length=500)
    changed_at: datetime = _ts()


class InviteToken(SQLModel, table=True):
    """A link for in-house annotators: the token is the secret, the worker is made on use."""

    id: int | None = Field(default=None, primary_key=True)
    token: str = Field(max_length=64, unique=True, index=True)
    study_id: int = _study()
    label: str = Field(default="", max_length=200)
    roles: list[str] = _json(default=list, nullable=False)
    worker_id: int | None = Field(default=None, foreign_key="worker.id")
    created_at: datetime = _ts()


class AdminUser(SQLModel, table=True):
    id: int | None = Field(default=None, primary_key=True)
    username: str = Field(max_length=64, unique=True, index=True)
    password_hash: str = Field(max_length=255)
    created_at: datetime = _ts()
    last_login_at: datetime | None = _opt_ts()
    # Part of every admin session cookie: raising it (logout, password change) ends all of
    # this admin's sessions at once, in every server process.
    session_version: int = Field(
        default=0, sa_column=Column(Integer, nullable=False, server_default="0")
    )


class StudyRoleGrant(SQLModel, table=True):
    """An admin's role in one study; an admin with no grant for a study cannot see it."""

    admin_id: int = Field(foreign_key="adminuser.id", primary_key=True)
    study_id: int = Field(foreign_key="study.id", primary_key=True, index=True)
    role: str = Field(max_length=16)  # AdminRole
    granted_at: datetime = _ts()


class AdminToken(SQLModel, table=True):
    """A revocable token an admin gives the CLI instead of their password (vsr_cli.actor):
    only its SHA-256 is stored; revoking sets ``revoked_at``."""

    id: int | None = Field(default=None, primary_key=True)
    admin_id: int = Field(foreign_key="adminuser.id", index=True)
    token_hash: str = Field(max_length=64, unique=True)
    label: str = Field(default="", max_length=200)
    created_at: datetime = _ts()
    revoked_at: datetime | None = _opt_ts()


class AuditEvent(SQLModel, table=True):
    """One admin action, append-only: no route or command updates or deletes a row, and the
    database refuses both (triggers of migration 0017; docs/dashboard.md, "Audit trail")."""

    __table_args__ = (Index("ix_auditevent_study_at", "study_id", "at"),)
    id: int | None = Field(default=None, primary_key=True)
    at: datetime = _ts(index=True)
    # The acting admin: their id when there is one (a failed login has none) and the name
    # as it was, so the row still reads right after the account is gone.
    actor_id: int | None = Field(default=None, index=True)
    actor: str = Field(max_length=128)
    study_id: int | None = Field(default=None, index=True)
    kind: str = Field(max_length=32, index=True)  # AuditKind
    target: str = Field(default="", max_length=200)
    # What changed: {"before": ..., "after": ...} for settings, the reason of an
    # adjudication, the job's parameters, ...
    change: dict[str, Any] = _json(default=dict, nullable=False)
    via: str = Field(default="dashboard", max_length=16)  # dashboard | cli
    # The operating-system login that ran a CLI command (None on the dashboard).
    os_login: str | None = Field(default=None, max_length=64)


# --- COCO -------------------------------------------------------------------------------


class ImageBase(SQLModel):
    coco_id: int = Field(unique=True, index=True)
    file_name: str = Field(max_length=64, index=True)
    coco_split: str = Field(max_length=16, description="train2017 | val2017")
    width: int
    height: int
    coco_url: str | None = Field(default=None, max_length=255)
    flickr_url: str | None = Field(default=None, max_length=255)
    license_id: int | None = None
    license_name: str | None = Field(default=None, max_length=128)


class Image(ImageBase, table=True):
    id: int | None = Field(default=None, primary_key=True)


class InstanceBase(SQLModel):
    coco_ann_id: int = Field(unique=True, index=True)
    image_id: int = Field(foreign_key="image.id", index=True)
    category_id: int
    category: str = Field(max_length=64, index=True)
    bbox: list[float] = _json(default=list, nullable=False)
    area: float
    iscrowd: bool = False
    segmentation: Any = _json()


class Instance(InstanceBase, table=True):
    id: int | None = Field(default=None, primary_key=True)


class ImagePairBase(SQLModel):
    concept_a: str = Field(max_length=64, index=True, description="alphabetically first")
    concept_b: str = Field(max_length=64, index=True)
    image1_id: int = Field(foreign_key="image.id", index=True)
    image1_a_id: int = Field(foreign_key="instance.id")
    image1_b_id: int = Field(foreign_key="instance.id")
    image2_id: int = Field(foreign_key="image.id", index=True)
    image2_a_id: int = Field(foreign_key="instance.id")
    image2_b_id: int = Field(foreign_key="instance.id")
    geometry: dict[str, Any] = _json(default=dict, nullable=False)
    contrast: float = Field(default=0.0, description="how much the geometry differs, 0..1")
    status: str = Field(default=PairStatus.available, max_length=16, index=True)
    sample_run: str | None = Field(default=None, max_length=64)


class ImagePair(ImagePairBase, table=True):
    # Each study samples its own pairs: the same two images may be a pair in two studies.
    __table_args__ = (
        UniqueConstraint(
            "study_id", "image1_id", "image2_id", "concept_a", "concept_b", name="uq_pair"
        ),
    )
    id: int | None = Field(default=None, primary_key=True)
    study_id: int = _study()
    created_at: datetime = _ts()


# --- crowd work -------------------------------------------------------------------------


class Batch(SQLModel, table=True):
    """One worker's timed session of generation or validation work."""

    __table_args__ = (Index("ix_batch_worker_kind", "worker_id", "kind"),)
    id: int | None = Field(default=None, primary_key=True)
    study_id: int = _study()
    worker_id: int = Field(foreign_key="worker.id")
    kind: str = Field(max_length=16)
    status: str = Field(default=BatchStatus.open, max_length=16, index=True)
    size: int
    created_at: datetime = _ts()
    deadline: datetime = Field(sa_column=Column(UTCDateTime(), nullable=False))
    finished_at: datetime | None = _opt_ts()
    completion_code: str | None = Field(default=None, max_length=64)
    entry: dict[str, Any] = _json(default=dict, nullable=False)
    # Leases done in this batch, kept by webapp.crowd.leases.finish and the validation queue so a
    # round trip need not count them (a cost that grew with every item of a 500-item batch).
    done_count: int = Field(
        default=0, sa_column=Column(Integer, nullable=False, server_default="0")
    )


class Assignment(SQLModel, table=True):
    """A lease of one pair (generation) or one Example (validation) to one worker."""

    # No index includes ``status``: finishing a lease changes only unindexed columns, so
    # PostgreSQL updates the row in place (HOT; fillfactor 50, migration 0004).
    # (batch_id, id): a batch's newest lease is one index step away.
    # (worker_id, example_id): the Examples a validator has had, from the open ones up.
    __table_args__ = (
        Index("ix_assignment_batch_lease", "batch_id", "id"),
        Index("ix_assignment_worker_example", "worker_id", "example_id"),
    )
    id: int | None = Field(default=None, primary_key=True)
    batch_id: int = Field(foreign_key="batch.id")
    worker_id: int = Field(foreign_key="worker.id")
    kind: str = Field(max_length=16)
    pair_id: int | None = Field(default=None, foreign_key="imagepair.id", index=True)
    example_id: int | None = Field(default=None, foreign_key="example.id", index=True)
    status: str = Field(default=LeaseStatus.active, max_length=16)
    leased_at: datetime = _ts()
    lease_expires_at: datetime = Field(sa_column=Column(UTCDateTime(), nullable=False, index=True))
    finished_at: datetime | None = _opt_ts()


class AnnotationBase(SQLModel):
    pair_id: int = Field(foreign_key="imagepair.id", index=True)
    worker_id: int = Field(foreign_key="worker.id", index=True)
    relation: str | None = Field(default=None, max_length=64)
    subj: str | None = Field(default=None, max_length=64, description="ENT1")
    obj: str | None = Field(default=None, max_length=64, description="ENT2")
    true_image_id: int | None = Field(default=None, foreign_key="image.id")
    skip_reason: str | None = Field(default=None, max_length=64)
    skip_comment: str | None = Field(default=None, max_length=1000)
    duration_ms: int | None = None


class Annotation(AnnotationBase, table=True):
    id: int | None = Field(default=None, primary_key=True)
    assignment_id: int | None = Field(default=None, foreign_key="assignment.id", unique=True)
    # Idempotency key from the form: a resubmitted form never creates a second Annotation.
    client_token: str | None = Field(default=None, max_length=64, unique=True)
    created_at: datetime = _ts()


class ExampleBase(SQLModel):
    image_id: int = Field(foreign_key="image.id", index=True)
    caption: str = Field(max_length=300)
    relation: str = Field(max_length=64, index=True)
    subj: str = Field(max_length=64, index=True)
    obj: str = Field(max_length=64, index=True)
    label: bool
    origin: str = Field(default=ExampleOrigin.human, max_length=16, index=True)
    # use_alter breaks the annotation -> assignment -> example -> annotation FK cycle.
    annotation_id: int | None = Field(
        default=None,
        sa_column=Column(
            Integer,
            ForeignKey("annotation.id", use_alter=True, name="fk_example_annotation"),
            nullable=True,
            index=True,
        ),
    )
    author_id: int | None = Field(default=None, foreign_key="worker.id", index=True)
    parent_example_id: int | None = Field(
        default=None, foreign_key="example.id", description="for adversarial negatives"
    )
    reference_frame: str | None = Field(default=None, max_length=16)
    is_gold: bool = Field(default=False, index=True)
    gold_label: bool | None = None
    target_votes: int | None = Field(default=None, description="override of the study default")


def _counter() -> Any:
    return Field(default=0, sa_column=Column(Integer, nullable=False, server_default="0"))


# The largest study-wide vote target (votes_per_example) at which an Example counts as decided
# without an adjudication: 0 while its queue is open, it has no votes or it is short of its own
# target (decided at no setting); 1,000,000 once its own target is met (at any setting, which
# is at most 50); else its votes. So "undecided" is ``SETTLED_UP_TO < votes_per_example`` (and
# no adjudication) whatever the settings say. Not indexed: an index on it would read
# ``queue_votes``, which every vote changes, and so cost the vote its HOT update (0004).
SETTLED_UP_TO = (
    "CASE WHEN queue_open OR queue_votes = 0 THEN 0"
    " WHEN target_votes IS NULL THEN queue_votes"
    " WHEN queue_votes >= target_votes THEN 1000000 ELSE 0 END"
)


# The origins the validation queue serves (webapp.validate.rules) and the Examples it walks:
# open, not gold, of those origins. revalidation: fresh copies of imported Examples
# (vsr_core.revalidation), voted like new ones.
QUEUE_ORIGINS = (
    ExampleOrigin.human.value,
    ExampleOrigin.adversarial.value,
    ExampleOrigin.revalidation.value,
)
IN_QUEUE = "queue_open AND NOT is_gold AND origin IN ({})".format(
    ", ".join(f"'{o}'" for o in QUEUE_ORIGINS)
)


class Example(ExampleBase, table=True):
    # The validation queue walks open, non-gold Examples in id order (webapp.validate.queue);
    # the partial index holds only those, so decided Examples are never walked again.
    __table_args__ = (
        Index("ix_example_queue", "queue_open", "is_gold", "id"),
        # (study_id, id): a study's open Examples in id order, other studies' never walked.
        # The origins are part of the predicate (migration 0027): the queue's statements
        # name them too, so the planner knows every row of the index passes that test and
        # does not combine the index with ix_example_origin, which at 100x it judged so
        # selective that it read and sorted every open Example instead of walking to the
        # first free one.
        Index(
            "ix_example_open",
            "study_id",
            "id",
            postgresql_where=text(IN_QUEUE),
            sqlite_where=text(IN_QUEUE),
        ),
        # The data page's caption search (ILIKE '%text%') from trigrams, not a scan of every
        # caption; PostgreSQL only (pg_trgm), SQLite keeps its scan.
        Index(
            "ix_example_caption_trgm",
            "caption",
            postgresql_using="gin",
            postgresql_ops={"caption": "gin_trgm_ops"},
            info={"dialect": "postgresql"},
        ).ddl_if(dialect="postgresql"),
    )
    id: int | None = Field(default=None, primary_key=True)
    # Denormalised on purpose (the pair's or the parent's study): the dashboard and the
    # queue filter Examples by study without a join. Set wherever an Example is made.
    study_id: int = _study()
    # Stable key of an imported record so importing the same file twice changes nothing.
    source_key: str | None = Field(default=None, max_length=128, unique=True)
    created_at: datetime = _ts()
    # Validation queue state, kept on the row itself so one row lock serialises leasing it
    # (PostgreSQL re-checks a locked row's own columns, not subqueries). Maintained only by
    # webapp.validate.queue; the Vote table stays the source of truth for statistics.
    queue_votes: int = _counter()
    queue_agree: int = _counter()
    queue_leases: int = _counter()
    queue_settled: bool = Field(
        default=False, sa_column=Column(Boolean, nullable=False, server_default=false())
    )
    queue_open: bool = Field(
        default=True, sa_column=Column(Boolean, nullable=False, server_default=true())
    )


class VoteBase(SQLModel):
    example_id: int = Field(foreign_key="example.id", index=True)
    worker_id: int = Field(foreign_key="worker.id")
    value: bool
    reference_frame: str | None = Field(default=None, max_length=16)
    duration_ms: int | None = None


class Vote(VoteBase, table=True):
    __table_args__ = (
        UniqueConstraint("example_id", "worker_id", name="uq_vote_example_worker"),
        Index("ix_vote_worker_example", "worker_id", "example_id"),
        # A worker's newest votes (their dashboard page) without sorting all of them.
        Index("ix_vote_worker_created", "worker_id", "created_at", "id"),
    )
    id: int | None = Field(default=None, primary_key=True)
    assignment_id: int | None = Field(default=None, foreign_key="assignment.id", unique=True)
    created_at: datetime = _ts()


class ReleaseSplit(SQLModel, table=True):
    """Which part of an imported release's split scheme an Example is in, as the release's
    split files say (``build-dataset --vsr-compatible`` writes these splits back; see
    docs/dataset.md). One row per (Example, scheme); Examples no split file names have none."""

    example_id: int = Field(foreign_key="example.id", primary_key=True)
    scheme: str = Field(max_length=16, primary_key=True)  # ReleaseScheme
    part: str = Field(max_length=8)  # SplitPart


class ItemSignal(SQLModel, table=True):
    """How one answer was given, as the task page measured it (docs/quality.md): timing,
    focus, whether any pointer or key activity happened (counts only, never content), a
    paste into the caption, a hidden canary acted on. One row per vote or caption; the JSON
    API sends none."""

    id: int | None = Field(default=None, primary_key=True)
    study_id: int = Field(foreign_key="study.id", index=True)
    worker_id: int = Field(foreign_key="worker.id", index=True)
    vote_id: int | None = Field(default=None, foreign_key="vote.id", unique=True)
    annotation_id: int | None = Field(default=None, foreign_key="annotation.id", unique=True)
    shown_ms: int | None = None  # photo decoded and on screen -> answer
    image_shown: bool = True
    focus_changes: int = 0
    pointer_events: int = 0
    key_events: int = 0
    canary: bool = False
    pasted: bool = False
    created_at: datetime = _ts()


# --- adversarial matching ---------------------------------------------------------------


class MatchRun(SQLModel, table=True):
    id: int | None = Field(default=None, primary_key=True)
    study_id: int = _study()
    params: dict[str, Any] = _json(default=dict, nullable=False)
    diagnostics: dict[str, Any] = _json(default=dict, nullable=False)
    created_at: datetime = _ts()


class McItem(SQLModel, table=True):
    __table_args__ = (UniqueConstraint("run_id", "query_example_id", name="uq_mc_run_query"),)
    id: int | None = Field(default=None, primary_key=True)
    run_id: int = Field(foreign_key="matchrun.id", index=True)
    query_example_id: int = Field(foreign_key="example.id", index=True)
    split: str = Field(max_length=16)
    choices: list[str] = _json(default=list, nullable=False)
    relations: list[str] = _json(default=list, nullable=False)
    answer_index: int
    distractor_example_ids: list[int | None] = _json(default=list, nullable=False)
    params: dict[str, Any] = _json(default=dict, nullable=False)
    created_at: datetime = _ts()


# --- operations -------------------------------------------------------------------------


class RateEvent(SQLModel, table=True):
    """One counted event (a failed admin login, a new worker identity, a new batch) under a
    key such as a client address: rate limits shared by every server process
    (webapp.http.rate_limits). Rows older than the longest window are deleted as new ones come."""

    __table_args__ = (Index("ix_rateevent_kind_key_at", "kind", "key", "at"),)
    id: int | None = Field(default=None, primary_key=True)
    kind: str = Field(max_length=32)
    key: str = Field(max_length=200)
    worker_id: int | None = Field(default=None, foreign_key="worker.id", index=True)
    # The study a new identity was made entering (None: events of no study, admin logins).
    study_id: int | None = Field(default=None)
    at: datetime = _ts(index=True)


class StudySetting(SQLModel, table=True):
    """Admin-editable study settings (batch sizes, votes per Example, codes, ...), per study."""

    study_id: int = Field(foreign_key="study.id", primary_key=True)
    key: str = Field(primary_key=True, max_length=64)
    value: Any = _json()
    updated_at: datetime = _ts()


# How often a running job's process writes Job.heartbeat_at, and after how many missed beats
# a server on another host takes the job for gone (its host or container vanished).
JOB_HEARTBEAT_SECONDS = 20
JOB_HEARTBEAT_MISSED = 6


class Job(SQLModel, table=True):
    """A background job started from the dashboard; survives a page reload."""

    id: int | None = Field(default=None, primary_key=True)
    study_id: int = _study()
    kind: str = Field(max_length=32)
    status: str = Field(default=JobStatus.queued, max_length=16, index=True)
    progress: float = 0.0
    message: str = Field(default="", max_length=2000)
    params: dict[str, Any] = _json(default=dict, nullable=False)
    result: dict[str, Any] | None = _json()
    created_at: datetime = _ts()
    started_at: datetime | None = _opt_ts()
    finished_at: datetime | None = _opt_ts()
    # Written by the job's own process while it runs (vsr_cli.admin_jobs.Heartbeat): a server
    # on another host, which cannot see the process, knows it is gone when this goes stale.
    heartbeat_at: datetime | None = _opt_ts()


# --- crowd platforms (Prolific, MTurk) ----------------------------------------------------


class PlatformStudy(SQLModel, table=True):
    """Our study as published on one crowd platform (a Prolific study, an MTurk HIT).

    ``study_id`` is our Study it recruits for; PlatformSubmission, PlatformAction,
    PlatformLedger and PlatformCall name a row of this table by ``platform_study_id``.
    """

    __table_args__ = (UniqueConstraint("platform", "external_id"),)
    id: int | None = Field(default=None, primary_key=True)
    study_id: int = _study()
    platform: str = Field(max_length=16)
    external_id: str = Field(max_length=128)
    state: str = Field(default=PlatformStudyState.draft, max_length=32)
    settings: dict[str, Any] = _json(default=dict, nullable=False)
    created_at: datetime = _ts()
    synced_at: datetime | None = _opt_ts()


class PlatformSubmission(SQLModel, table=True):
    """One participant's submission (Prolific) or assignment (MTurk), as last synced,
    with the quality figures the plan judged it by."""

    __table_args__ = (UniqueConstraint("platform", "external_id"),)
    id: int | None = Field(default=None, primary_key=True)
    platform_study_id: int = Field(foreign_key="platformstudy.id", index=True)
    platform: str = Field(max_length=16)
    external_id: str = Field(max_length=128)
    worker_external_id: str = Field(max_length=128, index=True)
    status: str = Field(max_length=32)
    worker_id: int | None = Field(default=None, foreign_key="worker.id", index=True)
    quality: dict[str, Any] = _json(default=dict, nullable=False)
    synced_at: datetime = _ts()


class PlatformAction(SQLModel, table=True):
    """One approve/reject/return/bonus to send. The idempotency key is unique, so a plan
    computed twice never yields two payments; state goes planned -> sending (committed
    before the call) -> done | failed, and 'sending' rows are reconciled on restart."""

    id: int | None = Field(default=None, primary_key=True)
    platform_study_id: int = Field(foreign_key="platformstudy.id", index=True)
    platform: str = Field(max_length=16)
    kind: str = Field(max_length=16)
    target: str = Field(max_length=128)
    amount_cents: int | None = None
    reason: str = Field(default="", max_length=500)
    idempotency_key: str = Field(max_length=128, unique=True, index=True)
    state: str = Field(default=PlatformActionState.planned, max_length=16, index=True)
    response: dict[str, Any] | None = _json()
    created_at: datetime = _ts()
    sent_at: datetime | None = _opt_ts()


class PlatformLedger(SQLModel, table=True):
    """The settlement ledger: each unit of work (a vote, a written Example) credited to the
    one submission whose batches hold it, with the bonus it earns. The unique key on
    (unit_kind, unit_id) makes the database refuse to credit, and so pay, a unit twice,
    whichever submission, platform study or concurrent plan tries."""

    __table_args__ = (UniqueConstraint("unit_kind", "unit_id", name="uq_ledger_unit"),)
    id: int | None = Field(default=None, primary_key=True)
    unit_kind: str = Field(max_length=16)  # LedgerUnitKind
    unit_id: int
    platform_study_id: int = Field(foreign_key="platformstudy.id", index=True)
    submission_id: int = Field(foreign_key="platformsubmission.id", index=True)
    batch_id: int = Field(foreign_key="batch.id")
    kept: bool = False  # an Example validation kept (what the bonus pays for)
    cents: int = 0  # the bonus this unit earns (0: paid by the reward alone)
    bonus_action_id: int | None = Field(default=None, foreign_key="platformaction.id")
    created_at: datetime = _ts()


class PlatformCall(SQLModel, table=True):
    """Every request sent to a platform and its answer (tokens redacted), for the log page."""

    id: int | None = Field(default=None, primary_key=True)
    platform: str = Field(max_length=16, index=True)
    # The platform study the call was for (each study's page shows its own calls only; a
    # create that failed, or a call from before migration 0009 that could not be traced, has none).
    platform_study_id: int | None = Field(default=None, foreign_key="platformstudy.id", index=True)
    method: str = Field(max_length=64)
    path: str = Field(max_length=500)
    request: dict[str, Any] | None = _json()
    status: int | None = None
    response: dict[str, Any] | None = _json()
    error: str = Field(default="", max_length=500)
    at: datetime = _ts(index=True)


# --- qualification ----------------------------------------------------------------------


class QualificationAttempt(SQLModel, table=True):
    """One try of a study's qualification check for one task (docs/studies.md). The unique
    key on (study, worker, kind, attempt) is what counts attempts: two tabs submitting the
    same try at once make one row, and no try past the study's number is ever stored."""

    __table_args__ = (
        UniqueConstraint("study_id", "worker_id", "kind", "attempt", name="uq_qualification_try"),
    )
    id: int | None = Field(default=None, primary_key=True)
    study_id: int = _study()
    worker_id: int = Field(foreign_key="worker.id", index=True)
    kind: str = Field(max_length=16)  # BatchKind
    attempt: int  # 1, 2, ...
    score: int  # right answers
    shown: int  # items drawn
    passed: bool
    # item id ("e2": the first language's third worked example; "g41": gold Example 41) ->
    # the worker's answer, as submitted.
    answers: dict[str, Any] = _json(default=dict, nullable=False)
    at: datetime = _ts()


# --- adjudication and label models ------------------------------------------------------


class AdjudicationDecision(StrEnum):
    """An admin's settlement of an Example: its final label, or left out of the dataset."""

    true = "true"
    false = "false"
    excluded = "excluded"


class KeepRule(StrEnum):
    """What decides kept / rejected for an Example nobody adjudicated (vsr_core.kept):
    the share of votes agreeing with its label (VSR), or a label model's fitted label."""

    agreement = "agreement"
    dawid_skene = "dawid-skene"
    mace = "mace"


class Adjudication(SQLModel, table=True):
    """The current settlement of one Example (one row per Example: every count joins it on
    the key; the history of decisions, with before, after and reason, is the audit trail)."""

    example_id: int = Field(foreign_key="example.id", primary_key=True)
    study_id: int = _study()
    decision: str = Field(max_length=16)  # AdjudicationDecision
    reason: str = Field(max_length=500)
    admin_id: int | None = Field(default=None, foreign_key="adminuser.id")
    admin_name: str = Field(max_length=128)
    at: datetime = _ts()


class LabelModelFit(SQLModel, table=True):
    """One label model's last fit on a study's votes: when, and over which votes, so every
    page can say whether votes arrived since (then the fit is stale)."""

    study_id: int = Field(foreign_key="study.id", primary_key=True)
    model: str = Field(max_length=16, primary_key=True)  # KeepRule, not agreement
    fitted_at: datetime = _ts()
    votes: int = 0  # the study's votes the fit saw
    last_vote_id: int = 0  # the largest vote id it saw
    examples: int = 0  # Examples it labelled (those with votes)
    workers: int = 0


class LabelModelDecision(SQLModel, table=True):
    """A label model's label for one Example at its last fit; the Example is kept under that
    model's keep rule when this label equals the Example's own."""

    __table_args__ = (Index("ix_labelmodeldecision_study_model", "study_id", "model"),)
    model: str = Field(max_length=16, primary_key=True)
    example_id: int = Field(foreign_key="example.id", primary_key=True)
    study_id: int = Field(foreign_key="study.id")
    label: bool
    confidence: float


class LabelModelWorker(SQLModel, table=True):
    """A label model's estimate of one validator at its last fit: Dawid-Skene's accuracy
    (the chance an answer equals the true label), MACE's competence (the chance the worker
    answers knowingly rather than at random)."""

    study_id: int = Field(foreign_key="study.id", primary_key=True)
    model: str = Field(max_length=16, primary_key=True)
    worker_id: int = Field(foreign_key="worker.id", primary_key=True)
    skill: float
    votes: int = 0
