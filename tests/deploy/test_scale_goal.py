"""bench.load.scale's reading of bench.load's output and its goal accounting."""

from __future__ import annotations

from bench.load.scale import CLIENTS_RE, CPU_RE, ENDED_RE, RATE_RE, still_offered

OUTPUT = (
    (
        "seeded 4000 real VSR captions (60 gold); C=100, 2 uvicorn workers, PostgreSQL\n"
        "validation (fetch item + submit vote):     294.4 rt/s  p50    9.8 ms  p99   37.5 ms per "
        "request; round trip p50 9.9 ms, p99 37.5 ms\n"
    )
    + """\
CPU ms per round trip, validation: server 2.46  postgres 1.61  client 0.31
  retries (server down / 5xx): 0  errors: {}  finished batches: 2
"""
)


def test_the_output_is_read() -> None:
    rate = RATE_RE.search(OUTPUT)
    assert rate is not None and rate.groups() == ("294.4", "9.9", "37.5")
    clients, ended, cpu = CLIENTS_RE.search(OUTPUT), ENDED_RE.findall(OUTPUT), CPU_RE.search(OUTPUT)
    assert clients is not None and clients.group(1) == "100" and ended == ["2"]
    assert cpu is not None and cpu.group(1).startswith("server 2.46")


def test_validators_whose_batch_ended_take_their_share_of_the_offered_load() -> None:
    run: dict[str, str | float] = {"clients": 100.0, "ended": 2.0}
    assert still_offered(run, 300.0) == 294.0
    delivered = 294.4
    assert delivered >= 0.99 * still_offered(run, 300.0)
    assert delivered < 0.99 * 300.0
    assert still_offered({"clients": 100.0, "ended": 0.0}, 300.0) == 300.0
    assert still_offered({"clients": 0.0, "ended": 0.0}, 300.0) == 300.0
