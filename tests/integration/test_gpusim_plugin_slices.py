"""The GPU simulator's DRA kubelet plugin against a real kube-apiserver.

The plugin binary (built from ``lab/gpu-simulator/kubelet-plugin`` by
``gpufleet.lab.gpusim_plugin``) runs as a local process with the admin kubeconfig, a
KWOK node's name and a temporary state file of the GPU simulator; no kubelet is involved
(its registration and DRA sockets are created in a temporary directory). The
ResourceSlices it publishes must carry the NVIDIA DRA driver's device names, attributes
and capacities exactly, and must be republished when the simulated MIG layout changes.

On 1.37.2 the plugin talks resource.k8s.io/v1; on 1.33.13 (DRA beta, v1beta1 and v1beta2
enabled with the version model's gates and runtime-config) the same binary falls back to
v1beta2 through ``k8s.io/dynamic-resource-allocation/client``.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
import time
import urllib.parse
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.claims import counters as cc
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import core as dra_core
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import plan as dra_plan
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import settings as dra_settings

from gpufleet.lab import gpusim_plugin
from gpufleet.lab.gpusim import admin
from gpufleet.lab.gpusim import state as gpusim_state
from tests.harness.controlplane import ControlPlane
from tests.integration.conftest import DEFAULT_VERSION, RELEASES
from tests.unit import dynamic_mig_slices

pytestmark = pytest.mark.integration

BETA_VERSION = next(r.version for r in RELEASES.releases if r.version.startswith("1.33."))
DRIVER = "gpu.nvidia.com"
GPU0_UUID = "GPU-1f6a9c2e-0b4d-4e8a-9c3f-5d2e7a1b8c90"
GPU1_UUID = "GPU-2a7b0d3f-1c5e-4f9b-8d40-6e3f8b2c9da1"
PUBLISH_TIMEOUT_S = 60.0
# NVIDIA's real DRA kubelet plugin v0.4.1 on a real H200, read back from kube-apiserver 1.37.2.
NVIDIA_CAPTURE = (
    Path(__file__).parents[1] / "unit" / "data" / "gpu" / "h200-single"
    / "resourceslice-nvidia-dra-driver-0.4.1.json"
)  # fmt: skip
IDENTITY = {"uuid", "resource.kubernetes.io/pciBusID", "resource.kubernetes.io/pcieRoot"}
# Root complexes as on a two-socket host (each GPU behind its own root port).
# Keyed by the published pciBusID.
PCIE_ROOTS = {"0000:19:00.0": "pci0000:17", "0000:3b:00.0": "pci0000:3a"}


# --------------------------------------------------------------------------- state


def h200(index: int, uuid: str, bus_id: str, instances: list[dict[str, Any]]) -> dict[str, Any]:
    """One H200 as the simulator writes it (values of tests/unit/data/gpu/h200-single)."""
    return {
        "index": index,
        "minor": index,
        "uuid": uuid,
        "serial": f"165000000000{index + 1}",
        "name": "NVIDIA H200",
        "brand": "Nvidia",
        "architecture": "Hopper",
        "compute_capability": "9.0",
        "pci_bus_id": bus_id,
        "pcie_root": PCIE_ROOTS[bus_id[4:].lower()],
        "addressing_mode": "None",
        "memory_mib": 143771,
        "mig_capable": True,
        "mig_mode_current": "Enabled" if instances else "Disabled",
        "mig_mode_pending": "Enabled" if instances else "Disabled",
        "gpu_instances": instances,
        "processes": [],
    }


def mig_uuid(slot: int) -> str:
    return f"MIG-5c1e0e7a-3f1b-5d8e-a1c2-0b9d8e7f6a5{slot}"


def one_g_18gb(slot: int) -> dict[str, Any]:
    """A 1g.18gb GPU instance (profile ID 19, 16384 MiB, 16 SMs) at placement slot:1."""
    return {
        "id": slot + 7,
        "profile": "1g.18gb",
        "profile_id": 19,
        "placement_start": slot,
        "placement_size": 1,
        "memory_mib": 16384,
        "multiprocessors": 16,
        "copy_engines": 1,
        "decoders": 1,
        "encoders": 0,
        "jpeg_engines": 1,
        "ofa_engines": 0,
        "compute_instances": [
            {
                "id": 0,
                "profile": "1g.18gb",
                "profile_id": 0,
                "multiprocessors": 16,
                "uuid": mig_uuid(slot),
            }
        ],
    }


def node_state(gpu0_instances: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "schema": 1,
        "simulator": "gpufleet GPU simulator",
        "driver_version": "580.159.04",
        "cuda_version": "13.0",
        "gpus": [
            h200(0, GPU0_UUID, "00000000:19:00.0", gpu0_instances),
            h200(1, GPU1_UUID, "00000000:3B:00.0", []),
        ],
    }


def write_state(path: Path, state: dict[str, Any]) -> None:
    """Atomic replace, as the simulator writes its state."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(state, indent=2))
    tmp.replace(path)


# --------------------------------------------------------------------------- expected


def common_attributes(bus_id: str) -> dict[str, Any]:
    return {
        "productName": {"string": "NVIDIA H200"},
        "brand": {"string": "Nvidia"},
        "architecture": {"string": "Hopper"},
        "cudaComputeCapability": {"version": "9.0.0"},
        "driverVersion": {"version": "580.159.4"},
        "cudaDriverVersion": {"version": "13.0.0"},
        "resource.kubernetes.io/pciBusID": {"string": bus_id},
        "resource.kubernetes.io/pcieRoot": {"string": PCIE_ROOTS[bus_id]},
        "addressingMode": {"string": "None"},
    }


def full_gpu(minor: int, uuid: str, bus_id: str) -> dict[str, Any]:
    return {
        "name": f"gpu-{minor}",
        "attributes": {
            "type": {"string": "gpu"},
            "uuid": {"string": uuid},
            **common_attributes(bus_id),
        },
        "capacity": {"memory": {"value": "143771Mi"}},
    }


def mig_1g_18gb(slot: int) -> dict[str, Any]:
    return {
        "name": f"gpu-0-mig-1g18gb-19-{slot}",
        "attributes": {
            "type": {"string": "mig"},
            "uuid": {"string": mig_uuid(slot)},
            "parentUUID": {"string": GPU0_UUID},
            "profile": {"string": "1g.18gb"},
            **common_attributes("0000:19:00.0"),
        },
        "capacity": {
            "multiprocessors": {"value": "16"},
            "copyEngines": {"value": "1"},
            "decoders": {"value": "1"},
            "encoders": {"value": "0"},
            "jpegEngines": {"value": "1"},
            "ofaEngines": {"value": "0"},
            "memory": {"value": "16Gi"},
            f"memorySlice{slot}": {"value": "1"},
        },
    }


# --------------------------------------------------------------------------- helpers


@pytest.fixture(scope="module")
def plugin_binary() -> Path:
    try:
        gpusim_plugin.find_go()
    except gpusim_plugin.BuildError as exc:
        pytest.skip(f"the kubelet plugin cannot be built here: {exc}")
    return gpusim_plugin.ensure_binary().path


@dataclass(frozen=True)
class PluginRun:
    """A running plugin: its process, its directory (sockets, CDI, checkpoint) and log."""

    proc: subprocess.Popen[bytes]
    root: Path
    log: Path


StartPlugin = Callable[..., PluginRun]


@pytest.fixture
def start_plugin(plugin_binary: Path) -> Iterator[StartPlugin]:
    """``start_plugin(cp, node_name, state_file, *flags)`` runs the plugin (with more
    ``flags``: ``--dynamic-mig``) until the test ends; at the end it must stop on SIGTERM
    with exit status 0."""
    started: list[PluginRun] = []
    # A short directory: unix socket paths are limited to 107 bytes.
    workdir = Path(tempfile.mkdtemp(prefix="gpusim-"))

    def start(cp: ControlPlane, node: str, state_file: Path, *flags: str) -> PluginRun:
        root = workdir / str(len(started))
        log = root / "plugin.log"
        root.mkdir()
        cmd = gpusim_plugin.local_command(
            plugin_binary,
            node,
            state_file,
            cp.kubeconfig,
            root,
            "--poll-interval=200ms",
            "-v=4",
            *flags,
        )
        run = PluginRun(gpusim_plugin.start_local(cmd, log), root, log)
        started.append(run)
        return run

    yield start
    failures = []
    for run in started:
        proc, log = run.proc, run.log
        if gpusim_plugin.stop(proc) != 0:
            failures.append(f"exit {proc.returncode}:\n{log_tail(log)}")
    subprocess.run(["rm", "-rf", str(workdir)], check=False)
    assert not failures, "plugin did not stop cleanly: " + "\n".join(failures)


def log_tail(log: Path, lines: int = 30) -> str:
    return "\n".join(log.read_text(errors="replace").splitlines()[-lines:]) if log.exists() else ""


def current_devices(
    cp: ControlPlane, node: str, api_version: str
) -> tuple[int, list[dict[str, Any]]] | None:
    """The devices of the newest complete generation of the node's pool, or None while
    no complete generation is visible. Returns (generation, devices in slice order)."""
    selector = urllib.parse.quote(f"spec.driver={DRIVER},spec.nodeName={node}")
    body = cp.get_json(f"/apis/{api_version}/resourceslices?fieldSelector={selector}")
    slices = [s for s in body["items"] if s["spec"]["pool"]["name"] == node]
    if not slices:
        return None
    generation = max(s["spec"]["pool"]["generation"] for s in slices)
    newest = sorted(
        (s for s in slices if s["spec"]["pool"]["generation"] == generation),
        key=lambda s: s["metadata"]["name"],
    )
    if len(newest) != newest[0]["spec"]["pool"]["resourceSliceCount"]:
        return None
    return generation, [d for s in newest for d in s["spec"].get("devices") or []]


def wait_for_devices(
    cp: ControlPlane,
    node: str,
    api_version: str,
    names: list[str],
    run: PluginRun,
) -> tuple[int, list[dict[str, Any]]]:
    deadline = time.monotonic() + PUBLISH_TIMEOUT_S
    seen: Any = None
    while time.monotonic() < deadline:
        assert run.proc.poll() is None, (
            f"plugin exited with {run.proc.returncode}:\n{log_tail(run.log)}"
        )
        seen = current_devices(cp, node, api_version)
        if seen and sorted(d["name"] for d in seen[1]) == sorted(names):
            return seen
        time.sleep(0.3)
    raise AssertionError(
        f"devices {names} not published within {PUBLISH_TIMEOUT_S}s; saw {seen}\n"
        f"plugin log:\n{log_tail(run.log)}"
    )


def by_name(devices: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {d["name"]: d for d in devices}


# --------------------------------------------------------------------------- tests


@pytest.mark.parametrize("control_plane", [DEFAULT_VERSION], indirect=True)
def test_slices_follow_the_simulated_mig_layout(
    control_plane: ControlPlane, start_plugin: StartPlugin, tmp_path: Path
) -> None:
    cp = control_plane
    (node,) = cp.start_kwok(1, name_prefix="gpusim-slices-")
    state_file = tmp_path / "state.json"
    write_state(state_file, node_state([]))
    run = start_plugin(cp, node, state_file)

    whole = [
        full_gpu(0, GPU0_UUID, "0000:19:00.0"),
        full_gpu(1, GPU1_UUID, "0000:3b:00.0"),
    ]
    _, devices = wait_for_devices(cp, node, "resource.k8s.io/v1", [d["name"] for d in whole], run)
    assert by_name(devices) == by_name(whole)

    # The registration and DRA sockets a kubelet would use exist.
    assert (run.root / "registry" / f"{DRIVER}-reg.sock").is_socket()
    assert (run.root / "plugins" / DRIVER / "dra.sock").is_socket()

    # MIG enabled on GPU 0 with seven 1g.18gb instances; GPU 1 stays whole.
    write_state(state_file, node_state([one_g_18gb(slot) for slot in range(7)]))
    expected = [mig_1g_18gb(slot) for slot in range(7)] + [whole[1]]
    _, devices = wait_for_devices(
        cp, node, "resource.k8s.io/v1", [d["name"] for d in expected], run
    )
    assert by_name(devices) == by_name(expected)
    # Slice order is the publishing order: GPU minor, then placement.
    assert [d["name"] for d in devices] == [d["name"] for d in expected]

    # Back to MIG disabled: the whole GPU returns.
    write_state(state_file, node_state([]))
    _, devices = wait_for_devices(cp, node, "resource.k8s.io/v1", [d["name"] for d in whole], run)
    assert by_name(devices) == by_name(whole)


def test_beta_api_server_gets_v1beta2_slices(
    start_control_plane: Callable[..., ControlPlane], start_plugin: StartPlugin, tmp_path: Path
) -> None:
    plan = dra_plan.plan_components(BETA_VERSION)
    apiserver = plan.components[dra_core.APISERVER]
    runtime_config = ",".join(sorted(apiserver.runtime_config))
    assert "resource.k8s.io/v1beta2=true" in runtime_config.split(","), runtime_config
    cp = start_control_plane(
        BETA_VERSION,
        with_controllers=False,
        extra_args={
            "kube-apiserver": {
                "runtime-config": runtime_config,
                "feature-gates": dra_settings.feature_gates_string(apiserver.feature_gates),
            }
        },
    )
    (node,) = cp.start_kwok(1, name_prefix="gpusim-beta-")
    state_file = tmp_path / "state.json"
    write_state(state_file, node_state([one_g_18gb(slot) for slot in (0, 1)]))
    run = start_plugin(cp, node, state_file)

    expected = [mig_1g_18gb(0), mig_1g_18gb(1), full_gpu(1, GPU1_UUID, "0000:3b:00.0")]
    _, devices = wait_for_devices(
        cp, node, "resource.k8s.io/v1beta2", [d["name"] for d in expected], run
    )
    assert by_name(devices) == by_name(expected)


def narrow_3g_71gb() -> dict[str, Any]:
    """A 3g.71gb GPU instance (profile ID 9) at slot 0 holding one 1c.3g.71gb compute
    instance: a layout NVIDIA's DRA kubelet plugin cannot enumerate."""
    return {
        "id": 1,
        "profile": "3g.71gb",
        "profile_id": 9,
        "placement_start": 0,
        "placement_size": 4,
        "memory_mib": 71424,
        "multiprocessors": 60,
        "copy_engines": 3,
        "decoders": 3,
        "encoders": 0,
        "jpeg_engines": 3,
        "ofa_engines": 0,
        "compute_instances": [
            {"id": 0, "profile": "1c.3g.71gb", "profile_id": 0, "multiprocessors": 16,
             "uuid": mig_uuid(9)}
        ],
    }  # fmt: skip


@pytest.mark.parametrize("control_plane", [DEFAULT_VERSION], indirect=True)
def test_plugin_exits_on_a_compute_instance_narrower_than_its_gpu_instance(
    control_plane: ControlPlane, plugin_binary: Path, tmp_path: Path
) -> None:
    """As NVIDIA's plugin: exit status 1 at start, and when the layout changes to one."""
    cp = control_plane
    (node,) = cp.start_kwok(1, name_prefix="gpusim-narrow-")
    state_file = tmp_path / "state.json"
    workdir = Path(tempfile.mkdtemp(prefix="gpusim-"))
    procs: list[subprocess.Popen[bytes]] = []
    try:
        write_state(state_file, node_state([narrow_3g_71gb()]))
        root = workdir / "start"
        root.mkdir()
        cmd = gpusim_plugin.local_command(
            plugin_binary, node, state_file, cp.kubeconfig, root, "--poll-interval=200ms"
        )
        proc = gpusim_plugin.start_local(cmd, root / "plugin.log")
        procs.append(proc)
        assert proc.wait(timeout=PUBLISH_TIMEOUT_S) == 1, log_tail(root / "plugin.log")
        log = log_tail(root / "plugin.log")
        assert "CI profile 1c.3g.71gb" in log and "GPU 0 (" + GPU0_UUID + ")" in log, log
        assert not (root / "registry" / f"{DRIVER}-reg.sock").exists()  # never registered

        write_state(state_file, node_state([]))
        root = workdir / "change"
        root.mkdir()
        cmd = gpusim_plugin.local_command(
            plugin_binary, node, state_file, cp.kubeconfig, root, "--poll-interval=200ms"
        )
        proc = gpusim_plugin.start_local(cmd, root / "plugin.log")
        procs.append(proc)
        run = PluginRun(proc, root, root / "plugin.log")
        whole = [full_gpu(0, GPU0_UUID, "0000:19:00.0"), full_gpu(1, GPU1_UUID, "0000:3b:00.0")]
        wait_for_devices(cp, node, "resource.k8s.io/v1", [d["name"] for d in whole], run)
        write_state(state_file, node_state([narrow_3g_71gb()]))
        assert proc.wait(timeout=PUBLISH_TIMEOUT_S) == 1, log_tail(run.log)
        assert "CI profile 1c.3g.71gb" in log_tail(run.log)
    finally:
        for proc in procs:
            gpusim_plugin.stop(proc)
        subprocess.run(["rm", "-rf", str(workdir)], check=False)


def attribute_types(device: dict[str, Any]) -> dict[str, Any]:
    """Attribute key -> value type (``string``, ``version``, ``int``, ``bool``)."""
    return {k: sorted(v) for k, v in device.get("attributes", {}).items()}


def non_identity(device: dict[str, Any]) -> dict[str, Any]:
    """Attribute values but the identity ones (``IDENTITY``), and capacities."""
    attrs = {k: v for k, v in device.get("attributes", {}).items() if k not in IDENTITY}
    return {"attributes": attrs, "capacity": device.get("capacity", {})}


@pytest.mark.parametrize("control_plane", [DEFAULT_VERSION], indirect=True)
def test_published_slice_of_a_simulated_h200_matches_nvidias_capture(
    control_plane: ControlPlane, start_plugin: StartPlugin, tmp_path: Path
) -> None:
    """``gpusim init``'s H200, published and read back, against NVIDIA's real slice: the
    driver, the device count, attribute keys and value types, capacity keys and values,
    and every attribute value but the identity ones (device, pool and node names too)."""
    real = json.loads(NVIDIA_CAPTURE.read_text())["spec"]
    cp = control_plane
    (node,) = cp.start_kwok(1, name_prefix="gpusim-h200-")
    state_file = tmp_path / "state.json"
    gpusim_state.save(admin.build_state("NVIDIA H200", 1, node), state_file)
    run = start_plugin(cp, node, state_file)
    names = [d["name"] for d in real["devices"]]
    _, published = wait_for_devices(cp, node, "resource.k8s.io/v1", names, run)
    selector = urllib.parse.quote(f"spec.driver={DRIVER},spec.nodeName={node}")
    (sim,) = cp.get_json(f"/apis/resource.k8s.io/v1/resourceslices?fieldSelector={selector}")[
        "items"
    ]
    assert sim["spec"]["driver"] == real["driver"]
    assert sim["spec"]["pool"]["resourceSliceCount"] == real["pool"]["resourceSliceCount"]
    assert len(published) == len(real["devices"])
    for got, want in zip(published, real["devices"], strict=True):
        assert attribute_types(got) == attribute_types(want)
        assert sorted(got["capacity"]) == sorted(want["capacity"])
        assert non_identity(got) == non_identity(want)


def identity_free(device: dict[str, Any]) -> dict[str, Any]:
    """A device without its name and the attributes that name one card or its slot."""
    attrs = {
        k: v
        for k, v in device.get("attributes", {}).items()
        if k not in IDENTITY and k != "parentUUID"
    }
    return {**{k: v for k, v in device.items() if k != "name"}, "attributes": attrs}


@pytest.mark.parametrize("control_plane", [DEFAULT_VERSION], indirect=True)
def test_dynamic_mig_slices_read_back_match_the_unit_fixture_and_count(
    control_plane: ControlPlane, start_plugin: StartPlugin, tmp_path: Path
) -> None:
    """The plugin with ``--dynamic-mig`` on two H200s, read back from the API server (which
    keeps sharedCounters and consumesCounters only with DRAPartitionableDevices on): each
    GPU's CounterSet and devices are the ones of the unit tests' fixture
    (``tests/unit/dynamic_mig_slices.py``, written by the plugin's Go test), and the
    counter accounting of ``claims.counters`` reads them: seven 1g.18gb on GPU 0 leave
    memory slice 7 and 20 multiprocessors stranded, GPU 1 untouched."""
    fixture = dynamic_mig_slices.slices(dynamic_mig_slices.H200_NODE)
    want_set = next(s for s in fixture if s["spec"].get("sharedCounters"))["spec"][
        "sharedCounters"
    ][0]
    want_devices = [d for s in fixture for d in s["spec"].get("devices") or []]
    cp = control_plane
    (node,) = cp.start_kwok(1, name_prefix="gpusim-dyn-")
    state_file = tmp_path / "state.json"
    write_state(state_file, node_state([]))
    run = start_plugin(cp, node, state_file, "--dynamic-mig")
    names = [d["name"] for d in want_devices]
    names += [n.replace("gpu-0", "gpu-1", 1) for n in names]
    _, published = wait_for_devices(cp, node, "resource.k8s.io/v1", names, run)
    selector = urllib.parse.quote(f"spec.driver={DRIVER},spec.nodeName={node}")
    listed = cp.get_json(f"/apis/resource.k8s.io/v1/resourceslices?fieldSelector={selector}")
    sets = [cs for s in listed["items"] for cs in s["spec"].get("sharedCounters") or []]
    assert sorted(cs["name"] for cs in sets) == ["gpu-0-counter-set", "gpu-1-counter-set"]
    for cs in sets:
        assert cs["counters"] == want_set["counters"]
    gpu0 = {d["name"]: d for d in published if d["name"].startswith("gpu-0")}
    assert {n: identity_free(d) for n, d in gpu0.items()} == {
        d["name"]: identity_free(d) for d in want_devices
    }

    claims = [
        dynamic_mig_slices.allocated_claim(f"c{i}", node, f"gpu-0-mig-1g18gb-19-{i}")
        for i in range(7)
    ]
    counted = cc.counter_sets(listed["items"], claims)
    fig0 = cc.gpu_figures(counted[f"{DRIVER}/{node}/gpu-0-counter-set"], counted)
    fig1 = cc.gpu_figures(counted[f"{DRIVER}/{node}/gpu-1-counter-set"], counted)
    assert (fig0["memory_slices_stranded"], fig0["multiprocessors_stranded"]) == ([7], 20)
    assert fig0["devices"] == 26 and fig0["devices_fitting"] == 0
    assert fig1["memory_slices_free"] == list(range(8)) and fig1["devices_fitting"] == 26
