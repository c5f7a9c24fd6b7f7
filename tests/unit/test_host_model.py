"""The cost model of the host-side plays (tests/bench/host_model.py)."""

from __future__ import annotations

import pytest

from tests.bench import host_model

pytestmark = pytest.mark.unit


def test_fork_limit_then_cpu_limit() -> None:
    m = host_model.HostCost(t0=5.0, latency=30.0, cpu=1.5)
    # 10 forks on 16 cores: 30 s per host / 10 in flight = 3 s each (the fork limit)
    assert m.per_host(10, 16) == pytest.approx(3.0)
    # 100 forks: still the fork limit (0.3 s); 400 forks: the CPU limit, 1.5 s / 16 cores
    assert m.per_host(100, 16) == pytest.approx(0.3)
    assert m.per_host(400, 16) == pytest.approx(1.5 / 16)
    assert m.run_s(1000, 400, 16) == pytest.approx(5.0 + 1000 * 1.5 / 16)
    # 30 * 16 / 1.5 = 320 forks before the cores are the limit
    assert m.forks_to_saturate(16) == 320


def test_fewer_hosts_than_forks_keep_only_those_in_flight() -> None:
    m = host_model.HostCost(t0=2.0, latency=20.0, cpu=0.1)
    assert m.run_s(1, 40, 8) == pytest.approx(22.0)
    assert m.run_s(4, 40, 8) == pytest.approx(2.0 + 4 * 5.0)


def test_the_strategy_process_bounds_a_run_whatever_the_forks_and_cores() -> None:
    m = host_model.HostCost(t0=2.0, latency=10.0, cpu=1.0, serial=0.3)
    assert m.per_host(1000, 64) == pytest.approx(0.3)
    assert m.run_s(1000, 1000, 64) == pytest.approx(2.0 + 300.0)
    # with few forks the fork limit is still the larger
    assert m.per_host(10, 64) == pytest.approx(1.0)


def test_fit_and_per_host_cost() -> None:
    m = host_model.fit(t0=4.0, t1=34.0, cpu_per_host=2.0)
    assert (m.t0, m.latency, m.cpu) == (4.0, 30.0, 2.0)
    assert host_model.per_host_cost(84.0, 4.0, 40) == pytest.approx(2.0)


def test_bad_input_is_refused() -> None:
    with pytest.raises(ValueError, match="forks=0"):
        host_model.HostCost(1, 1, 1).per_host(0, 4)
    with pytest.raises(ValueError, match="hosts=0"):
        host_model.per_host_cost(1.0, 1.0, 0)


@pytest.mark.unit
def test_hosts_on_the_control_hosts_cores_add_their_cpu_to_the_cpu_limit() -> None:
    m = host_model.fit(t0=1.0, t1=16.0, cpu_per_host=7.0, host_cpu_per_host=5.0)
    assert m.per_host(10, 2) == 3.5  # a fleet: the hosts' CPU is their own
    assert m.per_host(10, 2, shared=True) == 6.0  # (7 + 5) / 2
    assert m.run_s(40, 10, 2, shared=True) == 1.0 + 40 * 6.0
    assert m.forks_to_saturate(2) == 5 and m.forks_to_saturate(2, shared=True) == 3
