"""The interface every crowd platform implements, so a lab can add another."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol


class PlatformError(Exception):
    """A platform refused or could not be reached; the message is one line for the CLI/page."""


@dataclass(frozen=True)
class RemoteSubmission:
    external_id: str
    worker_external_id: str
    status: str  # the platform's own word (APPROVED, RETURNED, Submitted, ...)


# Platform statuses after which a participant will not come back: their leases go back at once.
GONE = frozenset({"RETURNED", "TIMED-OUT", "REJECTED", "Rejected"})


class Platform(Protocol):
    name: str

    def create_draft(self, settings: dict[str, Any]) -> str: ...

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
        self, study_external_id: str, submission_id: str, worker_external_id: str,
        cents: int, reason: str, key: str,
    ) -> dict[str, Any]: ...

    def bonus_paid(self, submission_id: str, worker_external_id: str, cents: int) -> bool | None:
        """Whether this submission's bonus of ``cents`` shows as paid; None when the
        platform cannot tell."""
        ...
