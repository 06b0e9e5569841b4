"""Fixtures every platform test shares: the fake Prolific server and a stubbed MTurk client."""

from __future__ import annotations

from collections.abc import Iterator

import boto3
import pytest
from botocore.stub import Stubber

from tests.support.fake_prolific import State, running
from webapp.platforms.mturk import SANDBOX, MTurkPlatform


@pytest.fixture
def fake() -> Iterator[tuple[str, State]]:
    """The fake Prolific on a free port: (base URL, its state)."""
    with running() as served:
        yield served


@pytest.fixture
def stubbed() -> Iterator[tuple[MTurkPlatform, Stubber]]:
    """A real boto3 MTurk client under botocore's Stubber (requests checked against the
    service model); every queued answer must be used."""
    client = boto3.client(
        "mturk",
        region_name="us-east-1",
        endpoint_url=SANDBOX,
        aws_access_key_id="x",
        aws_secret_access_key="y",
    )
    with Stubber(client) as stub:
        yield MTurkPlatform(client=client), stub
        stub.assert_no_pending_responses()
