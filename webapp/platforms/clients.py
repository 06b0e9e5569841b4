"""A platform client from the environment, for the dashboard and the CLI.

Prolific: PROLIFIC_API_TOKEN (required), PROLIFIC_BASE_URL (default: the real API).
MTurk: boto3's credential chain; MTURK_PRODUCTION=1 for the real marketplace (default: the
sandbox). Read through vsr_core.settings.PlatformCredentials; nothing here is stored.
"""

from __future__ import annotations

from typing import Any

from vsr_core.models import CrowdPlatform
from webapp.platforms.base import Platform, PlatformError, credentials

NAMES = tuple(CrowdPlatform)


def client_for(
    name: str, log: Any, base_url: str | None = None, production: bool | None = None
) -> Platform:
    if name == CrowdPlatform.prolific:
        from webapp.platforms.prolific import ProlificPlatform

        return ProlificPlatform(base_url=base_url, log=log)
    if name == CrowdPlatform.mturk:
        from webapp.platforms.mturk import MTurkPlatform

        live = credentials().mturk_production if production is None else production
        return MTurkPlatform(production=live, log=log)
    raise PlatformError(f"unknown platform {name!r}")
