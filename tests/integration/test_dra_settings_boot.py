"""The DRA settings the ``dra_feature_gates`` role writes boot the real binaries, and the
faults the version model forbids really stop them.

For each cached release the role's path is replayed on kubeadm's own files: the filter
``dra_component_settings`` plans the settings, the editor the ``static_pod_flags`` and
``kubelet_config_gates`` modules call (``edit_static_pod_manifest``,
``edit_kubelet_configuration``) applies them to the real kubeadm static pod manifests and
KubeletConfiguration (``tests/unit/data/kubeadm/<release>/dra``, which still carry the
removed ``DRAControlPlaneController`` gate and a stale runtime-config entry), and the
resulting flags start a real control plane and a real kubelet. Then the role is bypassed:
a removed or locked gate on the kubelet, kube-controller-manager and kube-scheduler must
stop each with the Kubernetes message the version model predicts. (kube-apiserver's
refusals are covered in ``test_harness.py``.)
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from ansible_collections.gpufleet.cluster.plugins.filter.dra import (
    MODULE_KEYS,
    dra_component_settings,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import core as dra_core
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import plan as dra_plan
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube.flags import (
    FlagEdit,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube.kubelet_config import (
    edit_kubelet_configuration,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube.manifests import (
    edit_static_pod_manifest,
)

from gpufleet.build import binaries
from tests.harness.component_flags import (
    Layout,
    Ports,
    controller_manager_flags,
    merge_flags,
    pick_free_ports,
    render_flags,
    scheduler_flags,
)
from tests.harness.controlplane import (
    REQUIRED_KUBERNETES_BINARIES,
    ControlPlane,
    Process,
    build_command,
    missing_binaries,
    tail,
)

pytestmark = pytest.mark.integration

FIXTURES = Path(__file__).resolve().parents[1] / "unit" / "data" / "kubeadm"

#: Releases covered: one with DRA in beta (gate off by default), one with DRA GA and locked.
VERSIONS = ["1.33.13", "1.37.2"]

#: DRA features asked of the role per release, chosen so that every component gets gates
#: to set (the filter fails the test if one of them is impossible at that release).
FEATURES = {
    "1.33.13": ["prioritized-list", "pod-resources-api"],
    "1.37.2": ["consumable-capacity", "node-allocatable-resources"],
}

#: resource.k8s.io versions discovery must list once the planned flags are in place:
#: 1.33 serves DRA only as beta APIs, off by default (pkg/controlplane/instance.go
#: betaAPIGroupVersionsDisabledByDefault); 1.34+ serves the GA resource.k8s.io/v1.
EXPECTED_SERVED = {"1.33.13": {"v1beta1", "v1beta2"}, "1.37.2": {"v1"}}

#: Control-plane components whose static pod manifests the role edits.
STATIC_POD_COMPONENTS = (dra_core.APISERVER, dra_core.CONTROLLER_MANAGER, dra_core.SCHEDULER)

#: Gate faults a cluster carried over from older releases may hold, per release: the removed
#: DRAControlPlaneController (1.26-1.31) and, where the model says it is locked, turning
#: DynamicResourceAllocation off.
FAULT_GATES = (("DRAControlPlaneController", True), (dra_core.DRA_GATE, False))

#: Seconds the kubelet gets before it is stopped; it fails on its own sooner, when it
#: finds no container runtime at the socket it is given.
KUBELET_WAIT_S = 20.0

#: Seconds a component given a forbidden gate gets to exit.
REFUSAL_WAIT_S = 30.0

#: Kubelet log lines that print the feature gates in effect: ``feature gates: {map[A:true]}``
#: (component-base/featuregate/feature_gate.go up to 1.33) or ``"Updated"
#: featureGates={"A":true}`` (from 1.34).
KUBELET_GATES_LOGGED = re.compile(
    r"feature gates: \{map\[([^\]]*)\]\}|\"Updated\" featureGates=(\{[^}]*\})"
)

#: The kubelet's fatal error once feature gates and configuration are validated and it dials
#: the container runtime (cmd/kubelet/app/server.go run -> PreInitRuntimeService).
KUBELET_RUNTIME_FAILURE = "failed to run Kubelet: validate service connection"

#: Default host paths of a kubelet; the one under test is pointed elsewhere and must not
#: create them.
KUBELET_HOST_PATHS = (
    "/var/lib/kubelet",
    "/var/log/pods",
    "/var/log/containers",
    "/etc/kubernetes/manifests",
    "/etc/kubernetes/kubelet.conf",
)


def vid(version: str) -> str:
    return f"v{version}"


def require(version: str, *names: str) -> None:
    """Skip when a binary of ``version`` is not cached, with the command that builds it."""
    missing = missing_binaries(version) + [
        f"{n} v{version}" for n in names if not binaries.binary_path(n, version).is_file()
    ]
    if missing:
        pytest.skip(
            f"Kubernetes v{version} binaries are not cached ({', '.join(missing)}); build "
            f"them with: {build_command(version, [*REQUIRED_KUBERNETES_BINARIES, *names])} "
            f"&& {build_command(tools=['etcd'])}"
        )


def quoted_kubernetes_message(reason: str) -> str:
    """The Kubernetes error text quoted in a version-model reason (``... refuses to start
    with 'unrecognized feature gate: X'`` -> ``unrecognized feature gate: X``)."""
    found = re.findall(r"'([^']+)'", reason)
    assert found, f"the version model's reason quotes no Kubernetes message: {reason!r}"
    return found[-1]


def predicted_refusal(version: str, component: str, gate: str, value: bool) -> str | None:
    """The message the version model predicts ``component`` at ``version`` stops with for
    ``gate=value``; ``None`` when the model allows that entry."""
    forbidden = dra_plan.plan_components(version, (), {}).components[component].forbidden_gates
    entry = forbidden.get(gate)
    if entry is None or value not in entry.values:
        return None
    return quoted_kubernetes_message(entry.reason)


def fault_cases(components: tuple[str, ...]) -> list[Any]:
    """(version, component, gate, value) for every fault the model forbids."""
    return [
        pytest.param(v, c, g, val, id=f"v{v}-{c}-{g}={str(val).lower()}")
        for v in VERSIONS
        for c in components
        for g, val in FAULT_GATES
        if predicted_refusal(v, c, g, val) is not None
    ]


# ----------------------------------------------------------------- the role's edits


@dataclass(frozen=True)
class Planned:
    """The role's result on kubeadm's files of one release.

    ``settings``: the filter's output; ``manifests``: component -> edited static pod
    manifest text; ``flags``: component -> ``{"feature-gates": raw value or None,
    "runtime-config": raw value or None}`` as the edited manifest's command has them;
    ``kubelet_config``: the edited KubeletConfiguration text.
    """

    version: str
    settings: dict[str, Any]
    manifests: dict[str, str]
    flags: dict[str, dict[str, str | None]]
    kubelet_config: str


def single_flag(command: list[str], name: str, where: str) -> str | None:
    values = [item.split("=", 1)[1] for item in command if item.startswith(f"--{name}=")]
    assert len(values) <= 1, f"{where}: --{name} given {len(values)} times: {values}"
    return values[0] if values else None


def apply_role(version: str) -> Planned:
    """Plan with the filter and edit kubeadm's files with the modules' editor functions,
    exactly as ``roles/dra_feature_gates`` passes the settings to ``static_pod_flags`` and
    ``kubelet_config_gates``."""
    settings = dra_component_settings(version, FEATURES[version])
    fixture = FIXTURES / version / "dra"
    manifests: dict[str, str] = {}
    flags: dict[str, dict[str, str | None]] = {}
    for component in STATIC_POD_COMPONENTS:
        entry = settings[MODULE_KEYS[component]]
        params = {
            "feature_gates": entry["feature_gates"],
            "absent_feature_gates": entry["absent_feature_gates"],
            "runtime_config": entry.get("runtime_config") or {},
            "absent_runtime_config": entry.get("absent_runtime_config") or [],
        }
        text = (fixture / "manifests" / f"{component}.yaml").read_text()
        edited = edit_static_pod_manifest(text, component, FlagEdit.from_params(params)).text
        manifests[component] = edited
        pod = yaml.safe_load(edited)
        (container,) = [c for c in pod["spec"]["containers"] if c["name"] == component]
        command = list(container["command"])
        flags[component] = {
            name: single_flag(command, name, f"{component} manifest")
            for name in ("feature-gates", "runtime-config")
        }
    kubelet_entry = settings[MODULE_KEYS[dra_core.KUBELET]]
    kubelet_edit = FlagEdit.from_params(
        {
            "feature_gates": kubelet_entry["feature_gates"],
            "absent_feature_gates": kubelet_entry["absent_feature_gates"],
        }
    )
    kubelet_config = edit_kubelet_configuration(
        (fixture / "kubelet-config.yaml").read_text(), kubelet_edit
    ).text
    return Planned(version, settings, manifests, flags, kubelet_config)


@pytest.fixture(scope="module", params=VERSIONS, ids=vid)
def planned_control_plane(request: pytest.FixtureRequest) -> Iterator[tuple[Planned, ControlPlane]]:
    """A control plane of one release started with exactly the ``--feature-gates`` and
    ``--runtime-config`` of the role-edited manifests."""
    version: str = request.param
    require(version, "kubelet")
    planned = apply_role(version)
    extra_args = {component: dict(planned.flags[component]) for component in STATIC_POD_COMPONENTS}
    cp = ControlPlane(version, extra_args=extra_args)
    try:
        cp.start()
        yield planned, cp
    finally:
        cp.stop()


def served_resource_versions(cp: ControlPlane) -> set[str]:
    return {v["version"] for v in cp.get_json("/apis/resource.k8s.io")["versions"]}


def test_planned_flags_boot_the_control_plane(
    planned_control_plane: tuple[Planned, ControlPlane],
) -> None:
    planned, cp = planned_control_plane
    # The running processes carry exactly the role's values.
    for component in STATIC_POD_COMPONENTS:
        argv = cp.processes[component].argv
        for name, value in planned.flags[component].items():
            given = [a.split("=", 1)[1] for a in argv if a.startswith(f"--{name}=")]
            assert given == ([] if value is None else [value]), (component, name, argv)
        assert cp.processes[component].exit_code() is None, tail(cp.log_path(component))
    status, body = readyz(cp)
    assert (status, body) == (200, "ok"), body
    assert EXPECTED_SERVED[planned.version] <= served_resource_versions(cp)


def readyz(cp: ControlPlane) -> tuple[int, str]:
    """Status and body of GET /readyz as admin."""
    api = cp.api_client()
    method, url, headers, body, post = api.param_serialize(
        "GET", "/readyz", auth_settings=["BearerToken"]
    )
    response = api.call_api(method, url, headers, body, post)
    response.read()
    return response.status, response.data.decode()


# ------------------------------------------------------------------ the kubelet


def mount_points() -> set[str]:
    """Mount points of this mount namespace (field 5 of /proc/self/mountinfo)."""
    with open("/proc/self/mountinfo", encoding="utf-8") as fh:
        return {line.split()[4] for line in fh}


@dataclass
class KubeletRun:
    """One kubelet run: its exit code (``None`` when it had to be stopped), log text,
    the mounts it left (then unmounted) and the default host paths it created."""

    returncode: int | None
    log: str
    new_mounts: list[str]
    created_host_paths: list[str]


def kubelet_config_for_tmp(config_text: str, root: Path, cp: ControlPlane | None) -> str:
    """The KubeletConfiguration with every host path, port and host-touching feature
    pointed into ``root`` or turned off; feature gates untouched."""
    data = yaml.safe_load(config_text)
    healthz, server = pick_free_ports(2)
    data.update(
        staticPodPath=str(root / "manifests"),
        podLogsDir=str(root / "pod-logs"),
        containerRuntimeEndpoint=f"unix://{root / 'cri.sock'}",
        cgroupDriver="cgroupfs",
        cgroupsPerQOS=False,
        enforceNodeAllocatable=[],
        failSwapOn=False,
        # This machine runs cgroup v1, which the kubelet refuses from 1.35 by default.
        failCgroupV1=False,
        protectKernelDefaults=False,
        makeIPTablesUtilChains=False,
        healthzPort=healthz,
        port=server,
        readOnlyPort=0,
        rotateCertificates=False,
        serverTLSBootstrap=False,
    )
    if cp is not None:
        data["authentication"]["x509"]["clientCAFile"] = str(cp.layout.pki / "ca.crt")
    return yaml.safe_dump(data, sort_keys=False)


def assert_group_gone(pgid: int, wait_s: float = 5.0) -> None:
    """SIGKILL what is left of process group ``pgid`` (the kubelet runs in its own
    session) and fail unless the group is empty within ``wait_s`` seconds."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    pytest.fail(f"process group {pgid} still has processes after SIGKILL")


def run_kubelet(
    version: str, config_text: str, root: Path, kubeconfig: Path | None, wait_s: float
) -> KubeletRun:
    """Run the real kubelet with everything under ``root``; stop its process group after
    ``wait_s`` seconds unless it exits first; unmount whatever it mounted."""
    for sub in ("manifests", "pod-logs", "root", "certs"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    config = root / "config.yaml"
    config.write_text(config_text)
    argv = [
        str(binaries.binary_path("kubelet", version)),
        f"--config={config}",
        f"--root-dir={root / 'root'}",
        f"--cert-dir={root / 'certs'}",
        f"--hostname-override=dra-boot-{version.replace('.', '-')}",
        "--v=2",
    ]
    if kubeconfig is not None:
        argv.append(f"--kubeconfig={kubeconfig}")
    before_mounts = mount_points()
    host_paths_before = {p for p in KUBELET_HOST_PATHS if os.path.lexists(p)}
    proc = Process("kubelet", argv, root / "kubelet.log")
    proc.start(root)
    deadline = time.monotonic() + wait_s
    try:
        while proc.exit_code() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        returncode = proc.exit_code()
    finally:
        proc.stop(grace_s=5.0)
        assert proc.popen is not None
        assert_group_gone(proc.popen.pid)
        new_mounts = sorted(mount_points() - before_mounts, key=len, reverse=True)
        for mount in new_mounts:
            subprocess.run(["umount", "-l", mount], check=False)
    created = sorted(p for p in KUBELET_HOST_PATHS if os.path.lexists(p))
    created = [p for p in created if p not in host_paths_before]
    return KubeletRun(returncode, proc.log_path.read_text(errors="replace"), new_mounts, created)


def test_planned_kubelet_config_passes_kubelet_validation(
    planned_control_plane: tuple[Planned, ControlPlane], tmp_path: Path
) -> None:
    planned, cp = planned_control_plane
    gates = yaml.safe_load(planned.kubelet_config).get("featureGates", {})
    assert gates == planned.settings["kubelet"]["feature_gates"]
    config = kubelet_config_for_tmp(planned.kubelet_config, tmp_path, cp)
    run = run_kubelet(planned.version, config, tmp_path, cp.kubeconfig, KUBELET_WAIT_S)
    print(f"\nkubelet v{planned.version} exit {run.returncode}; log tail:\n{run.log[-3000:]}")
    assert "unrecognized feature gate" not in run.log
    assert "locked to" not in run.log
    fatal = [line for line in run.log.splitlines() if '"command failed"' in line]
    assert len(fatal) == 1 and KUBELET_RUNTIME_FAILURE in fatal[0], run.log[-4000:]
    logged = " ".join(m.group(0) for m in KUBELET_GATES_LOGGED.finditer(run.log))
    for gate, value in gates.items():
        wanted = str(value).lower()
        assert f"{gate}:{wanted}" in logged or f'"{gate}":{wanted}' in logged, (gate, logged)
    assert run.new_mounts == [], run.new_mounts
    assert run.created_host_paths == [], run.created_host_paths


@pytest.mark.parametrize(
    ("version", "component", "gate", "value"), fault_cases((dra_core.KUBELET,))
)
def test_kubelet_refuses_a_gate_the_model_forbids(
    version: str, component: str, gate: str, value: bool, tmp_path: Path
) -> None:
    """The kubelet stops while defaulting its configuration: it panics (exit 2) with
    "failed to merge global and in-flight KubeletConfiguration while setting defaults,
    error: <the feature gate error>" (pkg/kubelet/apis/config/v1beta1/defaults.go)."""
    require(version, "kubelet")
    expected = predicted_refusal(version, component, gate, value)
    assert expected is not None
    planned = apply_role(version)
    data = yaml.safe_load(kubelet_config_for_tmp(planned.kubelet_config, tmp_path, None))
    data.setdefault("featureGates", {})[gate] = value
    run = run_kubelet(version, yaml.safe_dump(data), tmp_path, None, REFUSAL_WAIT_S)
    print(f"\nkubelet v{version} {gate}={value}: exit {run.returncode}: {run.log[-1500:]}")
    assert run.returncode not in (None, 0), run.log[-3000:]
    assert expected in run.log, f"expected {expected!r} in:\n{run.log[-3000:]}"
    assert run.new_mounts == []


@pytest.mark.parametrize(
    ("version", "component", "gate", "value"),
    fault_cases((dra_core.CONTROLLER_MANAGER, dra_core.SCHEDULER)),
)
def test_controller_refuses_a_gate_the_model_forbids(
    version: str, component: str, gate: str, value: bool, tmp_path: Path
) -> None:
    """kube-controller-manager / kube-scheduler with the harness's kubeadm flags, the
    role's gates and one forbidden gate added (the role bypassed) exits with the model's
    predicted message."""
    require(version)
    expected = predicted_refusal(version, component, gate, value)
    assert expected is not None
    planned = apply_role(version)
    gates = planned.flags[component]["feature-gates"]
    bad = f"{gate}={str(value).lower()}"
    # kubeadm's flags for this component, on paths and ports of a harness layout; the
    # component must stop at the gate, before it reads any of those files.
    defaults = (
        controller_manager_flags if component == dra_core.CONTROLLER_MANAGER else scheduler_flags
    )(Layout(tmp_path), Ports.pick())
    flags = merge_flags(defaults, {"feature-gates": f"{gates},{bad}" if gates else bad})
    argv = [str(binaries.binary_path(component, version)), *render_flags(flags)]
    proc = Process(component, argv, tmp_path / f"{component}.log")
    proc.start(tmp_path)
    try:
        assert proc.popen is not None
        returncode = proc.popen.wait(timeout=REFUSAL_WAIT_S)
    except subprocess.TimeoutExpired:
        returncode = None
    finally:
        proc.stop(grace_s=5.0)
    log = proc.log_path.read_text(errors="replace")
    print(f"\n{component} v{version} {bad}: exit {returncode}: {log[-1500:]}")
    assert returncode not in (None, 0), log[-3000:]
    assert expected in log, f"expected {expected!r} in:\n{log[-3000:]}"
