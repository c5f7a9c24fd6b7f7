"""The fleets of the DRA scheduling-throughput benchmark: KWOK nodes of ``NODE_GPUS``
H200s whose ResourceSlices are the ones the GPU simulator's kubelet plugin publishes.

Three node shapes, one per claim kind:

``whole``
    MIG disabled on every GPU: 8 devices ``gpu-<minor>`` (class ``gpu.nvidia.com``).
``static-mig``
    every GPU MIG-enabled and carved into seven 1g.18gb instances, as ``nvidia-smi mig
    -cgi 19,19,19,19,19,19,19 -C`` leaves it: 56 devices
    ``gpu-<minor>-mig-1g18gb-19-<slot>`` (class ``mig.nvidia.com``).
``dynamic-mig``
    MIG disabled, the plugin started with ``--dynamic-mig``: per GPU one CounterSet and
    every placement of every profile as a partitionable device consuming it (the
    whole GPU included), 26 devices per H200.

The plugin runs once per shape, for the first node (``publish_with_plugin``); its slices
are read back from kube-apiserver and copied for every other node (``clone_slice``)
with the node name, pool name, owner and the GPU and MIG UUIDs of that node's simulator
state. Nothing of the device shape is written here.
"""

from __future__ import annotations

import copy
import json
import subprocess
import tempfile
import time
import urllib.parse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpufleet.lab import gpusim_plugin
from gpufleet.lab.gpusim import admin, mig
from gpufleet.lab.gpusim.state import State
from tests.harness.controlplane import ControlPlane

DRIVER = "gpu.nvidia.com"
GPU_MODEL = "NVIDIA H200"
NODE_GPUS = 8
#: The MIG profile the MIG kinds claim, and the GI profile ID of it on an H200.
PROFILE = "1g.18gb"
PROFILE_INSTANCES = 7  # 1g.18gb instances of one H200


@dataclass(frozen=True)
class Kind:
    """One claim kind: its name, the plugin flags, whether the simulator state carves
    every GPU into ``PROFILE`` instances, and the request of the claim template."""

    name: str
    plugin_flags: tuple[str, ...]
    carved: bool
    device_class: str
    selector: str | None

    def request(self) -> dict[str, Any]:
        exactly: dict[str, Any] = {"deviceClassName": self.device_class}
        if self.selector:
            exactly["selectors"] = [{"cel": {"expression": self.selector}}]
        return {"name": "gpu", "exactly": exactly}


_PROFILE_CEL = f"device.attributes['{DRIVER}'].profile == '{PROFILE}'"

KINDS = (
    Kind("whole", (), False, "gpu.nvidia.com", None),
    Kind("static-mig", (), True, "mig.nvidia.com", _PROFILE_CEL),
    Kind("dynamic-mig", ("--dynamic-mig",), False, "mig.nvidia.com", _PROFILE_CEL),
)


def node_state(node: str, carved: bool) -> State:
    """The simulator's state of ``node``: ``NODE_GPUS`` H200s (UUIDs derived from the node
    name), each carved into ``PROFILE_INSTANCES`` x ``PROFILE`` when ``carved``."""
    state = admin.build_state(GPU_MODEL, NODE_GPUS, node)
    if carved:
        for gpu in state.gpus:
            gpu.mig_mode_current = gpu.mig_mode_pending = "Enabled"
            model = mig.gpu_model(gpu)
            for _ in range(PROFILE_INSTANCES):
                gi = mig.create_gi(gpu, mig.resolve_profile(model, PROFILE))
                mig.create_ci(gpu, gi, None)
    return state


def identities(state: State) -> list[str]:
    """GPU and MIG UUIDs of ``state`` in a fixed order (GPU minor, GI placement, CI)."""
    out: list[str] = []
    for g in sorted(state.gpus, key=lambda g: g.minor):
        out.append(g.uuid)
        for gi in sorted(g.gpu_instances, key=lambda gi: gi.placement_start):
            out.extend(ci.uuid for ci in sorted(gi.compute_instances, key=lambda ci: ci.id))
    return out


def pool_slices(cp: ControlPlane, node: str) -> list[dict[str, Any]]:
    """The newest complete generation of ``node``'s pool of ``DRIVER`` (slices sorted by
    name), or ``[]`` while none is complete."""
    selector = urllib.parse.quote(f"spec.driver={DRIVER},spec.nodeName={node}")
    items = cp.get_json(f"/apis/resource.k8s.io/v1/resourceslices?fieldSelector={selector}")[
        "items"
    ]
    if not items:
        return []
    generation = max(s["spec"]["pool"]["generation"] for s in items)
    newest = sorted(
        (s for s in items if s["spec"]["pool"]["generation"] == generation),
        key=lambda s: s["metadata"]["name"],
    )
    if len(newest) != newest[0]["spec"]["pool"]["resourceSliceCount"]:
        return []
    return newest


def publish_with_plugin(
    cp: ControlPlane, binary: Path, node: str, kind: Kind, timeout_s: float = 120.0
) -> list[dict[str, Any]]:
    """Run the simulator's kubelet plugin for ``node`` with the state of ``kind`` and its
    flags until the node's pool is complete (every GPU's devices present), stop it, and
    return the pool's slices as kube-apiserver holds them. The slices stay.

    Raises ``AssertionError`` (with the plugin's log tail) when the plugin exits or
    publishes no complete pool within ``timeout_s`` seconds."""
    root = Path(tempfile.mkdtemp(prefix="gpusim-"))  # short: socket paths <= 107 bytes
    state_file = root / "state.json"
    state_file.write_text(json.dumps(node_state(node, kind.carved).to_dict()))
    log = root / "plugin.log"
    cmd = gpusim_plugin.local_command(
        binary, node, state_file, cp.kubeconfig, root, *kind.plugin_flags
    )
    proc = gpusim_plugin.start_local(cmd, log)
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            assert proc.poll() is None, f"plugin exited: {log.read_text()[-2000:]}"
            slices = pool_slices(cp, node)
            minors = {
                d["name"].split("-")[1] for s in slices for d in s["spec"].get("devices") or []
            }
            if len(minors) == NODE_GPUS:
                return slices
            assert time.monotonic() < deadline, (
                f"plugin published no complete pool in {timeout_s:.0f}s: {log.read_text()[-2000:]}"
            )
            time.sleep(0.3)
    finally:
        gpusim_plugin.stop(proc)
        subprocess.run(["rm", "-rf", str(root)], check=False)


def clone_slice(
    published: dict[str, Any], node: str, node_uid: str, uuids: dict[str, str]
) -> dict[str, Any]:
    """``published`` (a slice the plugin wrote for another node) as the plugin would
    write it for ``node``: node name, pool name, generateName and owning Node replaced,
    each ``uuid``/``parentUUID`` attribute mapped through ``uuids`` (the first node's
    simulator UUIDs -> this node's). Devices, counters and everything else unchanged.

    Raises ``KeyError`` for a UUID ``uuids`` does not map."""
    spec = copy.deepcopy(published["spec"])
    spec["nodeName"] = node
    spec["pool"]["name"] = node
    for dev in spec.get("devices") or []:
        for attr in ("uuid", "parentUUID"):
            value = dev.get("attributes", {}).get(attr)
            if value is not None:
                value["string"] = uuids[value["string"]]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {
            "generateName": f"{node}-{DRIVER}-",
            "ownerReferences": [
                {
                    "apiVersion": "v1",
                    "kind": "Node",
                    "name": node,
                    "uid": node_uid,
                    "controller": True,
                }
            ],
        },
        "spec": spec,
    }


def claim_template(namespace: str, kind: Kind) -> dict[str, Any]:
    """The ResourceClaimTemplate every pod of the run uses: one device of ``kind``."""
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "one-device", "namespace": namespace},
        "spec": {"spec": {"devices": {"requests": [kind.request()]}}},
    }


def pod(namespace: str, name: str) -> dict[str, Any]:
    """A pod with one claim from ``claim_template`` (never pulled: KWOK plays the
    kubelet)."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": {"app": "dra-bench"}},
        "spec": {
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-device"}],
            "containers": [
                {
                    "name": "main",
                    "image": "registry.invalid/pause:3.10",
                    "resources": {"claims": [{"name": "gpu"}]},
                }
            ],
        },
    }
