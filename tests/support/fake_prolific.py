"""A local fake of the Prolific REST API (v1, the endpoints webapp.platforms.prolific uses),
written from Prolific's public API documentation; see docs/platforms.md for what it follows.

Modes: ``fail_next`` (answer the next request with an error), ``rate_limit`` (answer 429 with
Retry-After this many times), ``slow`` (sleep this many seconds before answering).
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

TOKEN = "fake-prolific-token"
# Prolific's rejection categories (API v1 docs); a rejection needs one and a message of at
# least 100 characters.
REJECTION_CATEGORIES = frozenset({
    "TOO_QUICKLY", "TOO_SLOWLY", "FAILED_INSTRUCTIONS", "INCOMP_LONGITUDINAL", "FAILED_CHECK",
    "LOW_EFFORT", "MALINGERING", "NO_CODE", "BAD_CODE", "NO_DATA", "UNSUPP_DEVICE", "OTHER",
})


@dataclass
class State:
    studies: dict[str, dict[str, Any]] = field(default_factory=dict)
    submissions: dict[str, dict[str, Any]] = field(default_factory=dict)
    bonuses: dict[str, dict[str, Any]] = field(default_factory=dict)
    paid: list[tuple[str, float]] = field(default_factory=list)
    transitions: list[tuple[str, str]] = field(default_factory=list)
    # Every request that reached the fake (method, path), errors included: a double send
    # shows here even when the second one is refused.
    received: list[tuple[str, str]] = field(default_factory=list)
    requests: int = 0
    rate_limit: int = 0
    slow: float = 0.0
    fail_next: int = 0

    def add_submission(self, study_id: str, sub_id: str, pid: str, status: str) -> None:
        self.submissions[sub_id] = {
            "id": sub_id, "participant_id": pid, "status": status, "study_id": study_id,
        }


def make_app(state: State) -> FastAPI:
    app = FastAPI()

    @app.middleware("http")
    async def modes(request: Request, call_next: Any) -> Any:
        state.requests += 1
        state.received.append((request.method, request.url.path))
        if request.headers.get("authorization") != f"Token {TOKEN}":
            return JSONResponse({"error": {"detail": "Invalid token."}}, status_code=401)
        if state.slow:
            time.sleep(state.slow)
        if state.rate_limit:
            state.rate_limit -= 1
            return JSONResponse({"error": "throttled"}, status_code=429,
                                headers={"Retry-After": "0"})
        if state.fail_next:
            state.fail_next -= 1
            return JSONResponse({"error": {"detail": "Internal error"}}, status_code=500)
        return await call_next(request)

    def not_found() -> JSONResponse:
        return JSONResponse({"error": {"detail": "Not found."}}, status_code=404)

    @app.post("/api/v1/studies/", status_code=201)
    async def create_study(request: Request) -> Any:
        body = await request.json()
        missing = [k for k in ("name", "external_study_url", "total_available_places",
                               "reward", "estimated_completion_time") if k not in body]
        if missing:
            return JSONResponse({"error": {"detail": {k: ["This field is required."]
                                                      for k in missing}}}, status_code=400)
        sid = f"study{len(state.studies) + 1}"
        state.studies[sid] = {**body, "id": sid, "status": "UNPUBLISHED"}
        return state.studies[sid]

    @app.post("/api/v1/studies/{sid}/transition/")
    async def study_transition(sid: str, request: Request) -> Any:
        study = state.studies.get(sid)
        if study is None:
            return not_found()
        action = (await request.json()).get("action")
        # Prolific's study transitions: PUBLISH a draft, PAUSE a live study, START a paused
        # one, STOP either; anything else is a 400 like the real API's.
        moves = {"PUBLISH": ({"UNPUBLISHED"}, "ACTIVE"), "PAUSE": ({"ACTIVE"}, "PAUSED"),
                 "START": ({"PAUSED"}, "ACTIVE"), "STOP": ({"ACTIVE", "PAUSED"}, "COMPLETED")}
        if action not in moves:
            return JSONResponse({"error": {"detail": "bad action"}}, status_code=400)
        start, nxt = moves[action]
        if study["status"] not in start:
            return JSONResponse(
                {"error": {"detail": f"Cannot {action} a study that is {study['status']}"}},
                status_code=400)
        study["status"] = nxt
        return study

    @app.get("/api/v1/studies/{sid}/submissions/")
    def list_submissions(sid: str) -> Any:
        if sid not in state.studies:
            return not_found()
        return {"results": [s for s in state.submissions.values() if s["study_id"] == sid]}

    @app.get("/api/v1/submissions/{sub}/")
    def get_submission(sub: str) -> Any:
        return state.submissions.get(sub) or not_found()

    @app.post("/api/v1/submissions/{sub}/transition/")
    async def submission_transition(sub: str, request: Request) -> Any:
        s = state.submissions.get(sub)
        if s is None:
            return not_found()
        body = await request.json()
        if s["status"] != "AWAITING REVIEW":
            return JSONResponse({"error": {"detail": f"Cannot transition from {s['status']}"}},
                                status_code=400)
        if body.get("action") == "APPROVE":
            s["status"] = "APPROVED"
        elif (body.get("action") == "REJECT" and len(body.get("message") or "") >= 100
              and body.get("rejection_category") in REJECTION_CATEGORIES):
            s["status"] = "REJECTED"
        else:
            return JSONResponse({"error": {"detail": "bad transition"}}, status_code=400)
        state.transitions.append((sub, s["status"]))
        return s

    @app.post("/api/v1/submissions/{sub}/request-return/")
    async def request_return(sub: str, request: Request) -> Any:
        s = state.submissions.get(sub)
        if s is None:
            return not_found()
        s["return_requested"] = (await request.json()).get("request_return_reasons")
        return s

    @app.post("/api/v1/submissions/bulk-bonus-payments/", status_code=201)
    async def bonus_setup(request: Request) -> Any:
        body = await request.json()
        bid = f"bonus{len(state.bonuses) + 1}"
        state.bonuses[bid] = {"id": bid, "study": body["study_id"],
                              "csv_bonuses": body["csv_bonuses"], "paid": False}
        return state.bonuses[bid]

    @app.post("/api/v1/bulk-bonus-payments/{bid}/pay/", status_code=202)
    def bonus_pay(bid: str) -> Any:
        b = state.bonuses.get(bid)
        if b is None or b["paid"]:
            return not_found()
        b["paid"] = True
        for line in b["csv_bonuses"].splitlines():
            pid, amount = line.split(",")
            state.paid.append((pid, float(amount)))
        return {}

    return app


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def running(state: State | None = None) -> Iterator[tuple[str, State]]:
    """Serve the fake on a free port in a thread; yields (base URL, state)."""
    state = state or State()
    port = _free_port()
    server = uvicorn.Server(uvicorn.Config(make_app(state), host="127.0.0.1", port=port,
                                           log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}/api/v1", state
    finally:
        server.should_exit = True
        thread.join(5)
