"""One typed SQLAlchemy ``Table`` handle per table model, for Core queries and bulk statements.

Naming convention: each handle is its model's class name in UPPER_SNAKE_CASE, and nothing else
(``Example`` -> ``EXAMPLE``, ``ImagePair`` -> ``IMAGE_PAIR``, ``McItem`` -> ``MC_ITEM``,
``InviteToken`` -> ``INVITE_TOKEN``). Import the handle by that name; do not rebind it to a
shorter alias, so one table reads the same in every module. An aliased copy of a table (a
self-join) is made where it is used, with ``EXAMPLE.alias("parent")``.

The ORM classes in :mod:`vsr_core.models` stay the way to read and write single rows; these
handles are the same ``Table`` objects SQLAlchemy built for those classes, typed.
"""

from __future__ import annotations

from sqlalchemy import Table
from sqlmodel import SQLModel

from vsr_core.models import (
    Adjudication,
    AdminToken,
    AdminUser,
    Annotation,
    Assignment,
    AuditEvent,
    Batch,
    Example,
    Image,
    ImagePair,
    Instance,
    InviteToken,
    ItemSignal,
    Job,
    LabelModelDecision,
    LabelModelFit,
    LabelModelWorker,
    MatchRun,
    McItem,
    PlatformAction,
    PlatformCall,
    PlatformLedger,
    PlatformStudy,
    PlatformSubmission,
    QualificationAttempt,
    RateEvent,
    ReleaseSplit,
    Study,
    StudyRoleGrant,
    StudySetting,
    StudyVersion,
    Vote,
    Worker,
    WorkerStanding,
)


def table_of(model: type[SQLModel]) -> Table:
    """The ``Table`` SQLAlchemy built for a ``table=True`` model."""
    # SQLModel's metaclass sets ``__table__`` when the class is created, but its type stubs do
    # not declare the attribute; this is the one place the project reads it.
    table = model.__table__  # type: ignore[attr-defined]
    if not isinstance(table, Table):
        raise TypeError(f"{model.__name__} is not a table model")
    return table


ADJUDICATION = table_of(Adjudication)
ADMIN_USER = table_of(AdminUser)
ANNOTATION = table_of(Annotation)
ASSIGNMENT = table_of(Assignment)
AUDIT_EVENT = table_of(AuditEvent)
BATCH = table_of(Batch)
EXAMPLE = table_of(Example)
IMAGE = table_of(Image)
IMAGE_PAIR = table_of(ImagePair)
INSTANCE = table_of(Instance)
INVITE_TOKEN = table_of(InviteToken)
ITEM_SIGNAL = table_of(ItemSignal)
JOB = table_of(Job)
LABEL_MODEL_DECISION = table_of(LabelModelDecision)
LABEL_MODEL_FIT = table_of(LabelModelFit)
LABEL_MODEL_WORKER = table_of(LabelModelWorker)
MATCH_RUN = table_of(MatchRun)
MC_ITEM = table_of(McItem)
PLATFORM_ACTION = table_of(PlatformAction)
PLATFORM_CALL = table_of(PlatformCall)
PLATFORM_LEDGER = table_of(PlatformLedger)
PLATFORM_STUDY = table_of(PlatformStudy)
PLATFORM_SUBMISSION = table_of(PlatformSubmission)
QUALIFICATION_ATTEMPT = table_of(QualificationAttempt)
RATE_EVENT = table_of(RateEvent)
RELEASE_SPLIT = table_of(ReleaseSplit)
STUDY = table_of(Study)
STUDY_ROLE_GRANT = table_of(StudyRoleGrant)
STUDY_SETTING = table_of(StudySetting)
STUDY_VERSION = table_of(StudyVersion)
VOTE = table_of(Vote)
WORKER = table_of(Worker)
WORKER_STANDING = table_of(WorkerStanding)
ADMIN_TOKEN = table_of(AdminToken)
