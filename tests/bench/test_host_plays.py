"""Host-side plays at fleet size: the plays of ``gpufleet up`` that run on the hosts and
need no cluster (``tests/bench/playbooks/host_plays.yml``: preflight, the DRA gates of the
worker kubelets and the validation's host read), on podman hosts, with ``--check`` (what
``gpufleet up --check`` runs on the hosts) and without (a converged no-op: the plays change
nothing), for several fork counts. One converge run first writes the worker kubelets'
gates (not measured).

The strategy is not a variable here: every play of ``playbooks/`` (and of the benchmark's
playbook) says ``strategy: linear``, because plays read what a ``run_once`` task set for
every host, run in ``serial`` batches and stop on any error; under ``free`` preflight
fails (measured: hosts ran ahead of the cluster-wide check's result).
``GPUFLEET_BENCH_HOST_STRATEGIES`` still sets ``ANSIBLE_STRATEGY``, which such plays
ignore.

Run it with ``.venv/bin/pytest -m bench tests/bench/test_host_plays.py`` under the shared
lock (``flock /tmp/gpufleet-heavy.lock``). The hosts are containers of the lab's node
image (``lab/prepare-podman --print-ref``) that run nothing but ``sleep`` (no systemd, no
Kubernetes, no network: reached with the ``containers.podman.podman`` connection), each
limited to 96 MiB, holding the one file the roles read that a bare host lacks (a
KubeletConfiguration at ``/var/lib/kubelet/config.yaml``); they are removed at the end.
Each run is checked: every host ``ok``, none changed, failed or unreachable
(ansible.posix.json callback).

Figures: wall seconds per run, the control host's CPU seconds (ansible-playbook and every
process it waited for, ``RUSAGE_CHILDREN``), per-host cost ``(T(N) - T0) / N`` with ``T0``
the run on no host, and the model of ``tests/bench/host_model.py`` fitted to them and
extrapolated to 1,000 and 10,000 hosts. Written as JSON to
``~/.cache/gpufleet/bench/hosts-<time>.json`` (``GPUFLEET_BENCH_RESULTS``).

Environment: ``GPUFLEET_BENCH_HOSTS`` (default 40), ``GPUFLEET_BENCH_HOST_FORKS``
(default ``5,10,20,40``), ``GPUFLEET_BENCH_HOST_STRATEGIES`` (``linear``),
``GPUFLEET_BENCH_HOST_CHECK`` (``1``: also every combination with ``--check``; ``0``:
``--check`` at the largest fork count only), ``GPUFLEET_BENCH_HOST_PREFIX`` (container
names, default ``gpufleet-bench-h``).
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpufleet.build import release_pins
from tests.bench import host_model

pytestmark = pytest.mark.bench

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
PLAYBOOK = Path(__file__).resolve().parent / "playbooks" / "host_plays.yml"
LOCAL_TASKS = Path(__file__).resolve().parent / "playbooks" / "local_tasks.yml"
HOSTS = int(os.environ.get("GPUFLEET_BENCH_HOSTS", "40"))
FORKS = [int(x) for x in os.environ.get("GPUFLEET_BENCH_HOST_FORKS", "5,10,20,40").split(",")]
STRATEGIES = os.environ.get("GPUFLEET_BENCH_HOST_STRATEGIES", "linear").split(",")
ALL_CHECK = os.environ.get("GPUFLEET_BENCH_HOST_CHECK", "0") == "1"
PREFIX = os.environ.get("GPUFLEET_BENCH_HOST_PREFIX", "gpufleet-bench-h")
#: Control hosts the figures are extrapolated to: (cores, forks).
CONTROL_HOSTS = ((2, 10), (8, 50), (16, 100), (32, 200))


def node_image() -> str:
    ref = subprocess.run(
        [str(REPO / "lab" / "prepare-podman"), "--print-ref"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout.strip()
    have = subprocess.run(["podman", "image", "exists", ref], timeout=60).returncode == 0
    if not have:
        pytest.skip(f"the node image {ref} is not built; build it with: lab/prepare-podman")
    return ref


@pytest.fixture(scope="module")
def hosts() -> Iterator[list[str]]:
    image = node_image()
    names = [f"{PREFIX}{i:04d}" for i in range(HOSTS)]
    try:
        for name in names:
            subprocess.run(
                [
                    "podman",
                    "run",
                    "-d",
                    "--replace",
                    "--name",
                    name,
                    "--network",
                    "none",
                    "--memory",
                    "96m",
                    "--entrypoint",
                    "sleep",
                    image,
                    "infinity",
                ],
                check=True,
                capture_output=True,
                text=True,
                timeout=120,
            )
        for name in names:
            subprocess.run(
                ["podman", "exec", name, "sh", "-c",
                 "mkdir -p /var/lib/kubelet && printf '%s\\n' "
                 "'apiVersion: kubelet.config.k8s.io/v1beta1' 'kind: KubeletConfiguration' "
                 "> /var/lib/kubelet/config.yaml"],
                check=True, capture_output=True, text=True, timeout=120,
            )  # fmt: skip
        yield names
    finally:
        for name in names:
            subprocess.run(
                ["podman", "rm", "-f", "-t", "0", name], capture_output=True, timeout=120
            )


def cgroup_cpu_files(names: list[str]) -> list[Path]:
    """Per container of ``names``, the file of its cgroup that counts the CPU it used:
    ``cpu.stat`` (cgroup v2) or ``cpuacct.usage`` (v1). Empty when a path is not found."""
    files = []
    for name in names:
        path = subprocess.run(
            ["podman", "inspect", "--format", "{{.State.CgroupPath}}", name],
            capture_output=True, text=True, timeout=60,
        ).stdout.strip()  # fmt: skip
        for candidate in (Path(f"/sys/fs/cgroup{path}/cpu.stat"),
                          Path(f"/sys/fs/cgroup/cpuacct{path}/cpuacct.usage")):  # fmt: skip
            if path and candidate.is_file():
                files.append(candidate)
                break
        else:
            return []
    return files


def hosts_cpu_s(files: list[Path]) -> float | None:
    """CPU seconds the hosts used so far, from ``cgroup_cpu_files``; None without files."""
    if not files:
        return None
    total = 0.0
    for f in files:
        text = f.read_text()
        if f.name == "cpu.stat":
            usec = dict(line.split() for line in text.splitlines())["usage_usec"]
            total += int(usec) / 1e6
        else:
            total += int(text) / 1e9
    return total


def inventory(path: Path, names: list[str]) -> Path:
    """One control-plane host, the others workers and GPU nodes (as a fleet is laid out); a
    single host is a GPU worker (preflight refuses an inventory without GPU nodes)."""
    control, workers = (names[:1], names[1:]) if len(names) > 1 else ([], names)
    doc = {
        "all": {
            "vars": {
                "ansible_connection": "containers.podman.podman",
                "ansible_python_interpreter": "/usr/bin/python3",
                "bench_kubernetes_version": release_pins.load_releases().default,
            },
            "children": {
                "k8s_cluster": {
                    "children": {
                        "kube_control_plane": {"hosts": {n: {} for n in control}},
                        "kube_node": {"hosts": {n: {} for n in workers}},
                    }
                },
                "gpu_nodes": {"hosts": {n: {} for n in workers}},
            },
        }
    }
    path.write_text(yaml.safe_dump(doc))
    return path


def run_plays(
    inv: Path,
    forks: int,
    strategy: str,
    check: bool,
    hosts: int,
    playbook: Path = PLAYBOOK,
    converge: bool = False,
) -> dict[str, Any]:
    """One run of the host plays; returns wall and CPU seconds. Fails when a host did not
    end ok, or (unless ``converge``) a host changed something."""
    env = {
        **os.environ,
        "ANSIBLE_COLLECTIONS_SCAN_SYS_PATH": "True",
        "ANSIBLE_STDOUT_CALLBACK": "ansible.posix.json",
        "ANSIBLE_STRATEGY": strategy,
        "ANSIBLE_FORKS": str(forks),
        "ANSIBLE_HOST_KEY_CHECKING": "False",
        "PATH": os.pathsep.join([str(BIN), os.environ.get("PATH", "")]),
    }
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    proc = subprocess.run(
        [str(BIN / "ansible-playbook"), "-i", str(inv), str(playbook), *(["--check"] * check)],
        capture_output=True,
        text=True,
        env=env,
        timeout=3600,
    )
    wall = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    stats = json.loads(proc.stdout)["stats"]
    nodes = {h: s for h, s in stats.items() if h != "localhost"}
    assert len(nodes) == hosts, sorted(nodes)
    for host, s in nodes.items():
        assert (s["failures"], s["unreachable"]) == (0, 0), (host, s)
        assert converge or s["changed"] == 0, (host, s)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    results = [s["ok"] + s["skipped"] for s in nodes.values()]
    results = results or [stats.get("localhost", {}).get("ok", 0)]
    return {
        "results_per_host": max(results),
        "hosts": hosts,
        "forks": forks,
        "strategy": strategy,
        "check": check,
        "wall_s": round(wall, 2),
        "cpu_s": round(cpu, 2),
        "load": os.getloadavg()[0],
    }


def test_host_plays_per_host_cost(hosts: list[str], tmp_path: Path) -> None:
    runs: list[dict[str, Any]] = []
    cpu_files = cgroup_cpu_files(hosts)

    def measure(names: list[str], forks: int, strategy: str, check: bool) -> dict[str, Any]:
        inv = inventory(tmp_path / f"hosts-{len(names)}.yml", names)
        before = hosts_cpu_s(cpu_files)
        run = run_plays(inv, forks, strategy, check, len(names))
        after = hosts_cpu_s(cpu_files)
        # the hosts' own CPU (their module runs), on this machine's cores too
        run["host_cpu_s"] = round(after - before, 2) if after is not None else None
        runs.append(run)
        host_cpu = "    n/a" if run["host_cpu_s"] is None else f"{run['host_cpu_s']:7.1f}"
        print(
            f"hosts={run['hosts']:3d} forks={forks:3d} {strategy:6s} check={int(check)} "
            f"wall {run['wall_s']:7.1f} s  cpu {run['cpu_s']:7.1f} s  "
            f"hosts' cpu {host_cpu} s  load {run['load']:.1f}",
            flush=True,
        )
        return run

    # fresh hosts: the worker kubelets' gates written once (not a no-op, not measured)
    run_plays(inventory(tmp_path / "converge.yml", hosts), max(FORKS), "linear", False,
              len(hosts), converge=True)  # fmt: skip
    t0_run = measure([], 5, "linear", False)
    t0 = t0_run["wall_s"]
    local = run_plays(inventory(tmp_path / "hosts-0.yml", []), 5, "linear", False, 0, LOCAL_TASKS)
    per_result = max(local["cpu_s"] - t0_run["cpu_s"], 0.0) / 30
    t1 = measure(hosts[1:2], 5, "linear", False)["wall_s"]
    for strategy in STRATEGIES:
        for forks in FORKS:
            measure(hosts, forks, strategy, False)
            if ALL_CHECK:
                measure(hosts, forks, strategy, True)
    if not ALL_CHECK:
        measure(hosts, max(FORKS), "linear", True)

    full = [r for r in runs if r["hosts"] == len(hosts)]
    best = min(full, key=lambda r: r["wall_s"])
    cpu_per_host = (best["cpu_s"] - runs[0]["cpu_s"]) / len(hosts)
    serial = per_result * best["results_per_host"]
    host_cpu = (best["host_cpu_s"] or 0.0) / len(hosts)
    model = host_model.fit(t0, t1, cpu_per_host, serial, host_cpu)
    for r in full:
        r["per_host_s"] = round(host_model.per_host_cost(r["wall_s"], t0, len(hosts)), 3)
    extrapolated = [
        {
            "cores": cores,
            "forks": forks,
            "hosts": n,
            "wall_s": round(model.run_s(n, forks, cores), 1),
            "forks_to_saturate": model.forks_to_saturate(cores),
        }
        for cores, forks in CONTROL_HOSTS
        for n in (1000, 10000)
    ]
    print(
        f"\nT0 {t0:.1f} s, one host {t1:.1f} s (L {model.latency:.1f} s), control-host CPU "
        f"{model.cpu:.2f} s per host, the hosts' own {model.host_cpu:.2f} s, "
        f"one task result {per_result * 1000:.0f} ms "
        f"({best['results_per_host']} per host: {serial:.2f} s); "
        f"best: forks {best['forks']} {best['strategy']}, "
        f"{best['per_host_s']:.2f} s per host"
    )
    if best["host_cpu_s"] is None:
        print(
            "  the hosts' own CPU was not measured (no cgroup CPU file of the containers "
            "found): the model leaves it out, and its prediction for the hosts on this "
            "machine's cores (checked below) is short by that much"
        )
    for e in extrapolated:
        print(
            f"  {e['hosts']:6d} hosts, {e['cores']:2d} cores, forks {e['forks']:3d}: "
            f"{e['wall_s'] / 60:7.1f} min (forks to saturate {e['forks_to_saturate']})"
        )
    out = Path(
        os.environ.get("GPUFLEET_BENCH_RESULTS")
        or Path.home() / ".cache" / "gpufleet" / "bench" / f"hosts-{int(time.time())}.json"
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        json.dumps(
            {
                "runs": runs,
                "model": model.__dict__,
                "extrapolated": extrapolated,
                "cpus": os.cpu_count(),
            },
            indent=2,
        )
    )
    print(f"figures: {out}")
    # the model must explain what was measured (the hosts on this machine's cores): its
    # prediction for the best run within 50%
    predicted = model.run_s(len(hosts), best["forks"], float(os.cpu_count() or 1), shared=True)
    assert abs(predicted - best["wall_s"]) <= 0.5 * best["wall_s"], (predicted, best)
