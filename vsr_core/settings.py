"""Settings, read from the environment (prefix-free names such as DATABASE_URL).

No instance is created at import time: call :func:`get_settings` (or build ``Settings``
yourself in tests) so tests can point anywhere.
"""

from __future__ import annotations

import math
from collections import Counter
from functools import lru_cache
from itertools import groupby
from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

# The bundled real COCO slice (demo/SOURCE.md): the one folder dashboard jobs may read when
# DATA_ROOTS is not set.
DEMO_DATA_DIR = Path(__file__).resolve().parents[1] / "demo" / "coco"


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_file=".env", env_file_encoding="utf-8", extra="ignore")

    database_url: str = Field(
        default="sqlite:///./vsr.db",
        description="SQLAlchemy URL; PostgreSQL as postgresql+psycopg://user@host/db",
    )
    secret_key: str = Field(
        default="",
        description="Signs session cookies, CSRF tokens and image links: a long random value "
        "(no default: `vsr serve` makes a throw-away one only on a loopback address)",
    )
    image_root: Path | None = Field(
        default=None,
        description="Local folder holding COCO images as <split>/<file_name> or <file_name>",
    )
    image_cache_dir: Path = Field(default=Path("./var/image_cache"))
    port: int = Field(
        default=8000,
        ge=1,
        le=65535,
        description="TCP port `vsr serve` listens on (and BASE_URL's port when BASE_URL is unset)",
    )
    base_url: str = Field(
        default="",
        description="Public site URL; unset: http://127.0.0.1:<PORT>",
    )
    prolific_completion_url: str = Field(
        default="https://app.prolific.com/submissions/complete?cc={code}"
    )
    sql_echo: bool = False
    api_threads: int = Field(
        default=4,
        ge=1,
        description="Threads per server process for the validation JSON API's database work",
    )
    platform_id_formats: Literal["exact", "safe"] = Field(
        default="exact",
        description="exact: Prolific and MTurk ids must have the platform's real format "
        "(PROLIFIC_PID 24 hex digits, ...); safe: any 1-128 of [A-Za-z0-9_.:-] (development)",
    )
    allowed_origins: str = Field(
        default="",
        description="Comma-separated extra origins (scheme://host[:port]) allowed to post to "
        "the site besides BASE_URL's own",
    )
    trusted_proxies: str = Field(
        default="",
        description="Comma-separated addresses of reverse proxies whose X-Forwarded-For / "
        "X-Forwarded-Proto are believed; empty: none (the client address is the peer's)",
    )
    api_docs: bool = Field(
        default=False, description="Serve /docs and /openapi.json (admins only when on)"
    )
    new_workers_per_address: int = Field(
        default=10,
        ge=0,
        description="New worker identities one client address may create "
        "per RATE_WINDOW_SECONDS (0: no limit)",
    )
    new_workers_per_study: int = Field(
        default=300,
        ge=0,
        description="New worker identities the whole site may create per "
        "RATE_WINDOW_SECONDS (0: no limit)",
    )
    new_batches_per_address: int = Field(
        default=30,
        ge=0,
        description="Batches (leases) one client address may open per "
        "RATE_WINDOW_SECONDS (0: no limit)",
    )
    rate_window_seconds: int = Field(default=600, ge=1)
    data_roots: str = Field(
        default=str(DEMO_DATA_DIR),
        description="Comma-separated folders whose files the dashboard's jobs may read (COCO "
        "annotation files); a path outside them is refused. Default: the bundled demo slice",
    )

    def data_root_paths(self) -> list[Path]:
        """DATA_ROOTS as absolute folders (symbolic links resolved)."""
        return [Path(p.strip()).resolve() for p in self.data_roots.split(",") if p.strip()]

    @model_validator(mode="after")
    def _default_base_url(self) -> Settings:
        # The one place the default public address is made: it follows the serve port, so
        # moving the site (PORT=8100) moves every link the site and the CLI print.
        if not self.base_url:
            self.base_url = local_url(self.port)
        return self


# Keys that were ever printed in this project (the old development default): a key anyone can
# read lets anyone forge an admin cookie, so these are refused like a missing one.
PUBLIC_SECRET_KEYS = frozenset({"dev-insecure-secret-change-me"})
MIN_SECRET_KEY_LENGTH = 32
# Keys written in this repository's benches and tests that pass the entropy estimate below; a
# server others can reach refuses them (tests/vsr_core/test_secret_keys.py finds every key
# literal in the repository and checks that each is refused, so a new one must be listed).
REPOSITORY_SECRET_KEYS = frozenset(
    {
        "bench-secret-key-0123456789abcdef",
        "admin-test-secret-0123456789abcdef",
        "audit-session-secret-0123456789abcdef",
    }
)
# Below this estimate a key is guessable or a pattern (32 spaces: 0 bits; the tests'
# "browser-archived-" + "k" * 32: 66). A random 32-character hex key (`openssl rand -hex 16`)
# scored 75 or more in 20,000 tries; the 64 characters the docs ask for, 189 or more.
MIN_SECRET_KEY_BITS = 72


def secret_key_problem(key: str) -> str | None:
    """Why this SECRET_KEY must not sign anything (None: it may)."""
    if not key:
        return "SECRET_KEY is not set"
    if key in PUBLIC_SECRET_KEYS:
        return "SECRET_KEY is the old public development default"
    if len(key) < MIN_SECRET_KEY_LENGTH:
        return f"SECRET_KEY is shorter than {MIN_SECRET_KEY_LENGTH} characters"
    return None


def secret_key_bits(key: str) -> float:
    """An upper bound of the key's entropy from its own characters: with each run of one
    character counted once, their number times the Shannon entropy of their frequencies (a
    repeated character or a narrow alphabet scores low)."""
    runs = [c for c, _ in groupby(key)]
    counts = Counter(runs)
    n = len(runs)
    return -n * sum(c / n * math.log2(c / n) for c in counts.values()) if n else 0.0


def exposed_key_problem(key: str) -> str | None:
    """Why this SECRET_KEY must not sign anything on a server other machines reach (None: it
    may); a loopback server, used for development and the tests, takes any key
    :func:`secret_key_problem` allows."""
    problem = secret_key_problem(key)
    if problem is not None:
        return problem
    if key in REPOSITORY_SECRET_KEYS:
        return "SECRET_KEY is one written in this project's repository"
    if secret_key_bits(key) < MIN_SECRET_KEY_BITS:
        return "SECRET_KEY has too little entropy (a repeated character or a short alphabet)"
    return None


class PlatformCredentials(BaseSettings):
    """The crowd platforms' credentials and switches, from the environment only (never a
    ``.env`` file, never stored), read afresh each time a platform client is made.

    Apart from :class:`Settings` on purpose: a job's process gets every ``Settings`` field
    (webapp.admin.jobs.child_env) and must never get these. MTurk's own keys stay with
    boto3's credential chain.
    """

    model_config = SettingsConfigDict(extra="ignore", env_ignore_empty=True)

    prolific_api_token: SecretStr = Field(
        default=SecretStr(""), description="Prolific API token (PROLIFIC_API_TOKEN)"
    )
    prolific_base_url: str = Field(
        default="", description="Prolific API address; empty: the real API"
    )
    mturk_production: bool = Field(
        default=False, description="MTurk's real marketplace instead of the sandbox"
    )


def local_url(port: int) -> str:
    """The site's address on this machine when BASE_URL is not set."""
    return f"http://127.0.0.1:{port}"


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """Process-wide settings from the environment (cached; tests build their own)."""
    return Settings()
