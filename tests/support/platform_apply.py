"""Run engine.apply for platform study 1 against the fake Prolific, in a child process that
the kill test ends mid-way (VSR_PLATFORM_CRASH). Usage: platform_apply.py DB_URL BASE_URL"""

from __future__ import annotations

import sys

from sqlmodel import Session

from tests.support.fake_prolific import TOKEN
from vsr_core.db import make_engine
from vsr_core.models import PlatformStudy
from webapp.platforms.engine import apply
from webapp.platforms.prolific import ProlificPlatform

if __name__ == "__main__":
    engine = make_engine(sys.argv[1])
    with Session(engine) as session:
        study = session.get(PlatformStudy, int(sys.argv[3]))
        assert study is not None
        print(apply(session, ProlificPlatform(base_url=sys.argv[2], token=TOKEN), study))
