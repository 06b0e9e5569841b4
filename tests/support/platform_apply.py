"""Run engine.apply for one platform study against the fake Prolific in a child process
that dies mid-way: the fault is injected from outside the product code, by wrapping the
client's calls in this process. Usage: platform_apply.py DB_URL BASE_URL PS_ID POINT

POINT: ``before_call`` (die when the first approve/reject is about to be sent: the action is
claimed, nothing sent) or ``after_call`` (die right after its answer, before it is
recorded)."""

from __future__ import annotations

import os
import sys
from typing import Any

from sqlmodel import Session

from tests.support.fake_prolific import TOKEN
from vsr_core.db import make_engine
from vsr_core.models import PlatformStudy
from webapp.platforms.engine import apply
from webapp.platforms.prolific import ProlificPlatform


class Dying(ProlificPlatform):
    point = "after_call"

    def _call(
        self,
        method: str,
        path: str,
        body: dict[str, Any] | None = None,
        params: dict[str, str] | None = None,
    ) -> Any:
        deciding = method == "POST" and "/submissions/" in path and "transition" in path
        if deciding and self.point == "before_call":
            os._exit(9)
        answer = super()._call(method, path, body, params)
        if deciding:
            os._exit(9)
        return answer


if __name__ == "__main__":
    Dying.point = sys.argv[4]
    with Session(make_engine(sys.argv[1])) as session:
        study = session.get(PlatformStudy, int(sys.argv[3]))
        assert study is not None
        print(apply(session, Dying(base_url=sys.argv[2], token=TOKEN), study))
