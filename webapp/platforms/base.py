"""The interface every crowd platform implements, so a lab can add another."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from pydantic import ValidationError

from vsr_core.settings import PlatformCredentials


class PlatformError(Exception):
    """A platform refused or could not be reached; the message is one line for the CLI/page.

    ``maybe_sent``: the request may have been processed although no answer came back (a
    timeout, a 5xx, a connection lost after sending). Such a request is never sent again
    automatically: the engine reads the platform's state before deciding."""

    def __init__(self, message: str, maybe_sent: bool = False) -> None:
        super().__init__(message)
        self.maybe_sent = maybe_sent


def credentials() -> PlatformCredentials:
    """The platforms' credentials from the environment as it is now; a malformed value is a
    one-line PlatformError naming the variable (never its value)."""
    try:
        return PlatformCredentials()
    except ValidationError as exc:
        names = ", ".join(str(e["loc"][0]).upper() for e in exc.errors() if e["loc"])
        raise PlatformError(f"malformed platform setting: {names}") from None


@dataclass(frozen=True)
class RemoteSubmission:
    external_id: str
    worker_external_id: str
    status: str  # the platform's own word (APPROVED, RETURNED, Submitted, ...)


# Platform statuses after which a participant will not come back: their leases go back at once.
GONE = frozenset({"RETURNED", "TIMED-OUT", "REJECTED", "Rejected"})
# Called by bonus() with what must be on record before the paying request is sent.
Record = Callable[[dict[str, Any]], None]


class Platform(Protocol):
    name: str

    def create_draft(self, settings: dict[str, Any], marker: str) -> str:
        """Create the study carrying ``marker`` (so find_draft can find it after a lost
        answer); returns its platform id."""
        ...

    def find_draft(self, marker: str) -> str | None:
        """The id of the study created with ``marker``, or None when there is none."""
        ...

    def publish(self, external_id: str) -> None: ...

    def pause(self, external_id: str) -> None: ...

    def resume(self, external_id: str) -> None:
        """Take a paused study back to live (Prolific: START; MTurk: a new expiry)."""

    def sync_submissions(self, external_id: str) -> list[RemoteSubmission]: ...

    def submission_status(self, submission_id: str) -> str: ...

    def approve(self, submission_id: str, key: str) -> dict[str, Any]: ...

    def reject(self, submission_id: str, reason: str, key: str) -> dict[str, Any]: ...

    def request_return(self, submission_id: str, reason: str, key: str) -> dict[str, Any]: ...

    def bonus(
        self,
        study_external_id: str,
        submission_id: str,
        worker_external_id: str,
        cents: int,
        reason: str,
        key: str,
        record: Record,
    ) -> dict[str, Any]:
        """Pay one bonus. ``record`` is called, and must return, before the request that
        pays is sent; what it is given is what reconcile needs after a crash."""
        ...

    def bonus_paid(self, submission_id: str, worker_external_id: str, cents: int) -> bool | None:
        """Whether this submission's bonus of ``cents`` shows as paid; None when the
        platform cannot tell."""
        ...

    def bonuses_listed(self, study_external_id: str) -> dict[str, int] | None:
        """Every bonus the platform paid in this study, summed per submission (minor
        units); None when the platform documents no such listing."""
        ...
