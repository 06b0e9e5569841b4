"""A local fake of Prolific's REST API v1, written from its public API reference
(https://docs.prolific.com/api-reference/...; each endpoint cites its page below and in
docs/platforms.md). It models the documented behaviour, the harmful parts included:

- ``POST /bulk-bonus-payments/{id}/pay/`` is documented as NOT idempotent: every pay
  request pays the set-up bonuses again (``State.paid`` gets them again);
- a set-up (``POST /submissions/bonus-payments/``) pays nothing and answers 400 for an id
  that did not take part in the study;
- a submission transition is documented as idempotent (the same request again is ignored)
  and final: another transition once the status changed is refused (400).

Fault modes, set on ``State`` by the tests:
``rate_limit`` n: answer 429 with Retry-After before processing (as Prolific throttles);
``fail_before`` n: answer 500 before processing (nothing happened);
``fail_after`` n: process the request, then answer 500 (it happened; the client cannot tell);
``slow`` seconds: process the request, then wait this long before answering (a client with
a shorter timeout gives up on a request that was carried out);
``slow_paths`` / ``slow_methods``: limit ``slow``/``fail_after`` to paths containing one of
these strings / to these methods.
"""

from __future__ import annotations

import asyncio
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
# Prolific's rejection categories (API reference, "Transition a submission"); a rejection
# needs one and a message of at least 100 characters.
REJECTION_CATEGORIES = frozenset(
    {
        "TOO_QUICKLY",
        "TOO_SLOWLY",
        "FAILED_INSTRUCTIONS",
        "INCOMP_LONGITUDINAL",
        "FAILED_CHECK",
        "LOW_EFFORT",
        "MALINGERING",
        "NO_CODE",
        "BAD_CODE",
        "NO_DATA",
        "UNSUPP_DEVICE",
        "OTHER",
    }
)
# "Set up bonuses" example answer: fees are a third of the amount on top, no VAT.
FEE_RATE = 1 / 3


@dataclass
class State:
    studies: dict[str, dict[str, Any]] = field(default_factory=dict)
    submissions: dict[str, dict[str, Any]] = field(default_factory=dict)
    bonuses: dict[str, dict[str, Any]] = field(default_factory=dict)
    # Money that left the researcher's balance: (participant id, amount), once per pay
    # request and bonus line; a bonus paid twice shows twice.
    paid: list[tuple[str, float]] = field(default_factory=list)
    transitions: list[tuple[str, str]] = field(default_factory=list)
    # Every request that reached the fake (method, path), errors included.
    received: list[tuple[str, str]] = field(default_factory=list)
    requests: int = 0
    rate_limit: int = 0
    fail_before: int = 0
    fail_after: int = 0
    slow: float = 0.0
    slow_paths: tuple[str, ...] = ()
    slow_methods: tuple[str, ...] = ()
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add_submission(self, study_id: str, sub_id: str, pid: str, status: str) -> None:
        self.submissions[sub_id] = {
            "id": sub_id,
            "participant_id": pid,
            "status": status,
            "study_id": study_id,
        }

    def count(self, method: str, fragment: str) -> int:
        return sum(m == method and fragment in p for m, p in self.received)


def _error(status: int, detail: Any) -> JSONResponse:
    return JSONResponse({"error": {"status": status, "detail": detail}}, status_code=status)


def make_app(state: State) -> FastAPI:
    app = FastAPI()

    def _targeted(method: str, path: str) -> bool:
        return (not state.slow_paths or any(p in path for p in state.slow_paths)) and (
            not state.slow_methods or method in state.slow_methods
        )

    @app.middleware("http")
    async def modes(request: Request, call_next: Any) -> Any:
        path = request.url.path
        with state.lock:
            state.requests += 1
            state.received.append((request.method, path))
        if request.headers.get("authorization") != f"Token {TOKEN}":
            return _error(401, "Invalid token.")
        if state.rate_limit:
            state.rate_limit -= 1
            return JSONResponse(
                {"error": {"status": 429, "detail": "Request was throttled."}},
                status_code=429,
                headers={"Retry-After": "0"},
            )
        if state.fail_before:
            state.fail_before -= 1
            return _error(500, "Internal error")
        response = await call_next(request)  # carried out
        if state.fail_after and _targeted(request.method, path):
            state.fail_after -= 1
            return _error(502, "Bad gateway")
        if state.slow and _targeted(request.method, path):
            await asyncio.sleep(state.slow)
        return response

    def not_found() -> JSONResponse:
        return _error(404, "Not found.")

    # https://docs.prolific.com/api-reference/studies/create-study
    @app.post("/api/v1/studies/", status_code=201)
    async def create_study(request: Request) -> Any:
        body = await request.json()
        missing = [
            k
            for k in (
                "name",
                "external_study_url",
                "total_available_places",
                "reward",
                "estimated_completion_time",
            )
            if k not in body
        ]
        if missing:
            return _error(400, {k: ["This field is required."] for k in missing})
        with state.lock:
            sid = f"{len(state.studies) + 1:024x}"
            state.studies[sid] = {**body, "id": sid, "status": "UNPUBLISHED"}
        return state.studies[sid]

    # https://docs.prolific.com/api-reference/studies/get-studies (?state=(A|B) filter)
    @app.get("/api/v1/studies/")
    def list_studies(request: Request) -> Any:
        wanted = (request.query_params.get("state") or "").strip("()")
        keep = set(wanted.split("|")) if wanted else None
        return {
            "results": [
                {k: s.get(k) for k in ("id", "name", "internal_name", "status")}
                for s in state.studies.values()
                if keep is None or s["status"] in keep
            ]
        }

    # https://docs.prolific.com/api-reference/studies/publish-study (Transition a study)
    @app.post("/api/v1/studies/{sid}/transition/")
    async def study_transition(sid: str, request: Request) -> Any:
        study = state.studies.get(sid)
        if study is None:
            return not_found()
        action = (await request.json()).get("action")
        moves = {
            "PUBLISH": ({"UNPUBLISHED"}, "ACTIVE"),
            "PAUSE": ({"ACTIVE"}, "PAUSED"),
            "START": ({"PAUSED"}, "ACTIVE"),
            "STOP": ({"ACTIVE", "PAUSED"}, "COMPLETED"),
        }
        if action not in moves:
            return _error(400, "bad action")
        start, nxt = moves[action]
        if study["status"] not in start:
            return _error(400, f"Cannot {action} a study that is {study['status']}")
        study["status"] = nxt
        return study

    # https://docs.prolific.com/api-reference/studies/get-study-submissions
    @app.get("/api/v1/studies/{sid}/submissions/")
    def list_submissions(sid: str) -> Any:
        if sid not in state.studies:
            return not_found()
        return {"results": [s for s in state.submissions.values() if s["study_id"] == sid]}

    # https://docs.prolific.com/api-reference/submissions/get-submission
    @app.get("/api/v1/submissions/{sub}/")
    def get_submission(sub: str) -> Any:
        return state.submissions.get(sub) or not_found()

    # https://docs.prolific.com/api-reference/submissions/transition-submission
    @app.post("/api/v1/submissions/{sub}/transition/")
    async def submission_transition(sub: str, request: Request) -> Any:
        body = await request.json()
        with state.lock:
            s = state.submissions.get(sub)
            if s is None:
                return not_found()
            target = {"APPROVE": "APPROVED", "REJECT": "REJECTED"}.get(body.get("action"))
            if s["status"] == target:
                return s  # the same request again: ignored
            if s["status"] != "AWAITING REVIEW":
                return _error(400, f"Cannot transition from {s['status']}")
            if body.get("action") == "APPROVE":
                s["status"] = "APPROVED"
            elif (
                body.get("action") == "REJECT"
                and len(body.get("message") or "") >= 100
                and body.get("rejection_category") in REJECTION_CATEGORIES
            ):
                s["status"] = "REJECTED"
            else:
                return _error(400, "bad transition")
            state.transitions.append((sub, s["status"]))
        return s

    # https://docs.prolific.com/api-reference/submissions/request-return
    @app.post("/api/v1/submissions/{sub}/request-return/")
    async def request_return(sub: str, request: Request) -> Any:
        s = state.submissions.get(sub)
        if s is None:
            return not_found()
        s["return_requested"] = (await request.json()).get("request_return_reasons")
        return s

    # https://docs.prolific.com/api-reference/bonuses/create-bonus-payments
    @app.post("/api/v1/submissions/bonus-payments/", status_code=201)
    async def bonus_setup(request: Request) -> Any:
        body = await request.json()
        study_id = body.get("study_id")
        lines: list[tuple[str, float]] = []
        bad: list[str] = []
        for line in str(body.get("csv_bonuses", "")).splitlines():
            ident, amount = line.split(",")
            sub = state.submissions.get(ident)
            by_pid = [
                s
                for s in state.submissions.values()
                if s["participant_id"] == ident and s["study_id"] == study_id
            ]
            if sub is not None and sub["study_id"] == study_id:
                lines.append((sub["participant_id"], float(amount)))
            elif by_pid:
                lines.append((ident, float(amount)))
            else:
                bad.append(ident)
        if study_id not in state.studies or bad or not lines:
            return _error(400, f"These ids did not take part in the study: {bad}")
        cents = round(sum(a for _, a in lines) * 100)
        fees = round(cents * FEE_RATE)
        with state.lock:
            bid = f"b{len(state.bonuses) + 1:023x}"
            state.bonuses[bid] = {
                "id": bid,
                "study": study_id,
                "amount": cents,
                "fees": fees,
                "total_amount": cents + fees,
                "vat": 0,
                "lines": lines,
            }
        return {k: v for k, v in state.bonuses[bid].items() if k != "lines"}

    # https://docs.prolific.com/api-reference/bonuses/pay-bonus-payments ("not idempotent:
    # sending multiple requests with the same bulk bonus payment ID will result in
    # participants being paid multiple times")
    @app.post("/api/v1/bulk-bonus-payments/{bid}/pay/", status_code=202)
    def bonus_pay(bid: str) -> Any:
        b = state.bonuses.get(bid)
        if b is None:
            return not_found()
        with state.lock:
            state.paid.extend(b["lines"])
        return (
            f"Bulk bonus payment with ID {bid} is being processed asynchronously. "
            "Payments will be completed shortly."
        )

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
    server = uvicorn.Server(
        uvicorn.Config(make_app(state), host="127.0.0.1", port=port, log_level="warning")
    )
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
