"""The cost model of the host-side plays, fitted to measured runs and used to extrapolate.

A run of the host plays on ``n`` hosts with ``forks`` workers takes

    T(n, forks) = T0 + n * c(forks),   c(forks) = max(L / min(forks, n), s / K, m)

seconds, where ``T0`` is the fixed cost (ansible-playbook starting, the inventory, the
control-host tasks; measured on an inventory with no host), ``L`` the wall seconds the
plays take on one host alone (its tasks one after the other: the latency a fork spends
on that host), ``s`` the control host's CPU seconds per host (the worker processes and the
connection's commands), ``K`` the control host's cores and ``m`` the seconds per host
of the one process that runs the strategy (it queues every task for every host and reads
every result back, on one core whatever the forks). The first term is the fork limit
(``forks`` hosts in flight, each for ``L`` seconds), the second the CPU limit, the third
the limit of a single ansible-playbook process.

Where the hosts run on the control host's own machine (the benchmark's podman hosts),
their module runs (``h`` CPU seconds per host) take the same cores: the CPU limit is then
``(s + h) / K`` (``shared=True``). On a fleet the hosts' CPU is their own.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class HostCost:
    """Fitted figures, all in seconds: ``t0`` fixed, ``latency`` per host alone (L),
    ``cpu`` control-host CPU per host (s), ``serial`` strategy process per host (m),
    ``host_cpu`` the hosts' own CPU per host (h)."""

    t0: float
    latency: float
    cpu: float
    serial: float = 0.0
    host_cpu: float = 0.0

    def per_host(
        self, forks: int, cores: float, hosts: int | None = None, shared: bool = False
    ) -> float:
        """Seconds each host adds to the run with ``forks`` workers on ``cores`` cores;
        ``shared``: the hosts run on those cores too.

        Raises:
            ValueError: forks or cores below 1.
        """
        if forks < 1 or cores < 1:
            raise ValueError(f"forks={forks}, cores={cores}: both must be >= 1")
        in_flight = min(forks, hosts) if hosts else forks
        cpu = self.cpu + (self.host_cpu if shared else 0.0)
        return max(self.latency / in_flight, cpu / cores, self.serial)

    def run_s(self, hosts: int, forks: int, cores: float, shared: bool = False) -> float:
        """Predicted wall seconds of a run on ``hosts`` hosts."""
        return self.t0 + hosts * self.per_host(forks, cores, hosts, shared)

    def forks_to_saturate(self, cores: float, shared: bool = False) -> int:
        """The fewest forks at which the CPU limit, not the fork limit, sets the pace:
        more forks than this only add memory (one worker process each)."""
        cpu = self.cpu + (self.host_cpu if shared else 0.0)
        return max(1, int(-(-self.latency * cores // cpu)))


def per_host_cost(t_n: float, t0: float, hosts: int) -> float:
    """Measured per-host cost ``(T(N) - T0) / N`` in seconds.

    Raises:
        ValueError: hosts below 1.
    """
    if hosts < 1:
        raise ValueError(f"hosts={hosts}: give at least one host")
    return (t_n - t0) / hosts


def fit(
    t0: float,
    t1: float,
    cpu_per_host: float,
    serial_per_host: float = 0.0,
    host_cpu_per_host: float = 0.0,
) -> HostCost:
    """The model from the fixed cost ``t0``, a run on one host ``t1`` (so ``L = t1 - t0``),
    the control host's CPU seconds per host measured on a large run, the strategy
    process's seconds per host (``serial_per_host``) and the hosts' own CPU seconds per
    host (``host_cpu_per_host``)."""
    return HostCost(
        t0=t0,
        latency=max(t1 - t0, 0.0),
        cpu=cpu_per_host,
        serial=serial_per_host,
        host_cpu=host_cpu_per_host,
    )
