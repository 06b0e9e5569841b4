"""bench/simulate_scale.py, the capacity model of docs/scaling.md, against queueing theory:
for one server with Poisson arrivals and exponential service (M/M/1) the time in the system is
exponential with rate mu - lambda, and with c servers (M/M/c) the mean wait follows Erlang C.
A model that got these wrong would size 100x wrongly."""

from __future__ import annotations

import math
import statistics

import pytest

from bench.simulate_scale import pct, simulate


def test_one_server_matches_mm1() -> None:
    lam, service_ms = 100.0, 5.0  # rho = 0.5, mu - lambda = 100 per second
    lat = simulate(lam, [(1, service_ms)], cv=1.0, n=200_000, seed=1)
    mean_theory = 1000.0 / (1000.0 / service_ms - lam)  # 10 ms
    assert statistics.fmean(lat) == pytest.approx(mean_theory, rel=0.05)
    assert pct(lat, 0.99) == pytest.approx(math.log(100) * mean_theory, rel=0.08)


def test_c_servers_match_erlang_c() -> None:
    lam, service_ms, c = 300.0, 5.0, 2  # a = 1.5 erlangs on 2 servers, rho = 0.75
    a = lam * service_ms / 1000.0
    rho = a / c
    tail = a**c / math.factorial(c) / (1 - rho)
    p_wait = tail / (sum(a**k / math.factorial(k) for k in range(c)) + tail)
    mean_wait = p_wait * service_ms / (c * (1 - rho))
    lat = simulate(lam, [(c, service_ms)], cv=1.0, n=300_000, seed=2)
    assert statistics.fmean(lat) - service_ms == pytest.approx(mean_wait, rel=0.08)


def test_paced_clients_never_exceed_their_number_in_flight() -> None:
    # 10 paced clients on 1 slow server: by Little's law the mean latency is at most
    # clients / throughput, and the server (10 ms) can give at most 100 round trips/s.
    lat = simulate(1000.0, [(1, 10.0)], cv=1.0, n=50_000, seed=3, clients=10)
    assert statistics.fmean(lat) < 10 / 100 * 1000 * 1.1
