"""The gpufleet lab: a real kubeadm cluster on podman nodes with simulated GPUs.

``gpufleet lab up`` starts one control-plane node and N GPU worker nodes as privileged
podman containers running systemd (the node image from ``lab/prepare-podman``), on a
podman network of their own with fixed addresses, then runs ``playbooks/lab.yml``
against ``inventory/lab``: containerd 2.x and the GPU simulator on each node
(role ``lab_node``), ``kubeadm init``/``kubeadm join`` with the DRA settings of the
release (role ``kubeadm``), a bridge pod network, and the GPU simulator's DRA kubelet
plugin chart. Everything it runs is built on this machine: binaries from the Go module
proxy (``gpufleet.build.binaries``), images from those binaries (``gpufleet.lab.images``).

The lab's state (nodes, addresses, variables for the playbooks) is written to
``${GPUFLEET_CACHE:-~/.cache/gpufleet}/lab/state.json``, which ``inventory/lab/lab_nodes.py``
reads. ``gpufleet lab down`` removes the containers, their volumes, the network and
the state file, and reports anything left behind.
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
import shutil
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from gpufleet.build import binaries, release_pins
from gpufleet.lab import images, podman
from gpufleet.lab.gpusim import admin as gpusim_admin

DEFAULT_NAME = "gpufleet-lab"
DEFAULT_SUBNET = "10.89.50.0/24"
LAB_LABEL = "io.gpufleet.lab"
REPO = binaries.REPO_ROOT
INVENTORY = REPO / "inventory" / "lab"
SMOKE_IMAGE = "localhost/gpufleet/busybox:1"
PLUGIN_IMAGE = "localhost/gpufleet/gpu-simulator-kubelet-plugin"
BUSYBOX = Path("/bin/busybox")
# The build cache, mounted read-only into every node: binaries and image archives are
# then copied and imported inside the node instead of streamed through podman cp.
NODE_CACHE = "/opt/gpufleet-cache"


class LabError(RuntimeError):
    """The lab could not be brought up, inspected or removed; the message says why and
    what to do."""


def _shown(value: object, limit: int = 60) -> str:
    """``repr`` of an option's value, cut to ``limit`` characters (a pasted file stays
    one line of the message)."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + f"... ({len(str(value))} characters)"


@dataclass(frozen=True)
class LabSpec:
    """What ``gpufleet lab up`` builds: the release, the number of GPU workers, the
    simulated GPU model, how many GPUs each worker has, how many of the workers (the
    last ones) form a pool on NVIDIA's device plugin path (the simulator's device-plugin
    mode stands in for the plugin) instead of DRA, and whether the DRA pool's plugin runs
    with dynamic MIG (NVIDIA's ``DynamicMIG`` gate: partitionable devices, MIG devices
    created at prepare)."""

    kubernetes_version: str = ""
    workers: int = 2
    gpu_model: str = "NVIDIA H200"
    gpus_per_node: int = 1
    device_plugin_workers: int = 0
    dynamic_mig: bool = False

    def validated(self) -> LabSpec:
        """This spec with the default release filled in. Raises ``LabError`` naming the
        option, the value and the fix."""
        rel = release_pins.load_releases()
        version = self.kubernetes_version.lstrip("v") or rel.default
        pinned = [r.version for r in rel.releases]
        if version not in pinned:
            raise LabError(
                f"--kubernetes-version {_shown(self.kubernetes_version)} is not pinned in "
                f"gpufleet/build/releases.yaml; use one of {', '.join(pinned)}"
            )
        for option, value in (
            ("--workers", self.workers),
            ("--gpus-per-node", self.gpus_per_node),
            ("--device-plugin-workers", self.device_plugin_workers),
        ):
            if isinstance(value, bool) or not isinstance(value, int):
                raise LabError(f"{option} {_shown(value)}: give a whole number")
        if not 1 <= self.workers <= 8:
            raise LabError(f"--workers {self.workers}: use 1 to 8 GPU worker nodes")
        models = gpusim_admin.simulated_models()
        if self.gpu_model not in models:
            raise LabError(
                f"--gpu-model {_shown(self.gpu_model)} is not simulated; use one of "
                + ", ".join(repr(m) for m in models)
            )
        if not 1 <= self.gpus_per_node <= 8:
            raise LabError(f"--gpus-per-node {self.gpus_per_node}: use 1 to 8")
        if not 0 <= self.device_plugin_workers <= self.workers:
            raise LabError(
                f"--device-plugin-workers {self.device_plugin_workers}: use 0 to --workers "
                f"({self.workers})"
            )
        if self.dynamic_mig:
            _check_dynamic_mig(version)
        return LabSpec(
            version,
            self.workers,
            self.gpu_model,
            self.gpus_per_node,
            self.device_plugin_workers,
            bool(self.dynamic_mig),
        )


def _check_dynamic_mig(version: str) -> None:
    """Refuse ``--dynamic-mig`` on a release where NVIDIA's driver does not offer it
    (``dra_driver.gates.check_dynamic_mig_release``) or where the scheduler would drop the
    partitionable devices: the lab turns no feature gate on, so DRAPartitionableDevices
    must be on by default there (beta from 1.36, GA in 1.38). Raises ``LabError``."""
    from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import gates
    from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_driver import (
        gates as driver_gates,
    )
    from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_driver.chart import (
        DraDriverError,
    )

    major, minor = (int(x) for x in version.split(".")[:2])
    try:
        driver_gates.check_dynamic_mig_release((major, minor), "--dynamic-mig", True)
    except DraDriverError as e:
        raise LabError(
            f"--dynamic-mig with --kubernetes-version {version}: {e.reason}; use a newer release"
        ) from None
    state = gates.gate_state("DRAPartitionableDevices", version)
    if not state.default:
        raise LabError(
            f"--dynamic-mig with --kubernetes-version {version}: DRAPartitionableDevices is "
            f"{state.describe()} there and the lab turns no feature gate on; use a release "
            "where it is on by default (1.36 or newer)"
        )


@dataclass
class LabNode:
    name: str
    role: str  # control-plane | gpu-worker
    ip: str
    gpu_model: str = ""
    gpu_count: int = 0
    #: A GPU worker's path (``dra_driver.gpu_paths``: ``dra`` or ``device-plugin``).
    gpu_path: str = ""


@dataclass
class LabState:
    """The lab as ``gpufleet lab up`` left it; ``vars`` are the inventory's ``all`` vars."""

    spec: LabSpec
    nodes: list[LabNode]
    vars: dict[str, Any] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "spec": asdict(self.spec),
            "nodes": [asdict(n) for n in self.nodes],
            "vars": self.vars,
            "timings": self.timings,
        }


def lab_name() -> str:
    """The lab's name: ``$GPUFLEET_LAB_NAME`` or ``gpufleet-lab``. It prefixes the node
    containers and names the podman network, so two labs can exist side by side."""
    name = os.environ.get("GPUFLEET_LAB_NAME", DEFAULT_NAME)
    if not re.fullmatch(r"[a-z0-9]([a-z0-9-]{0,30}[a-z0-9])?", name):
        raise LabError(
            f"GPUFLEET_LAB_NAME={name!r}: use 1-32 lowercase letters, digits and '-' (it "
            "becomes part of Kubernetes node names)"
        )
    return name


def lab_subnet() -> str:
    """The lab network: ``$GPUFLEET_LAB_SUBNET`` or 10.89.50.0/24 (a /24; nodes take .10
    and up)."""
    subnet = os.environ.get("GPUFLEET_LAB_SUBNET", DEFAULT_SUBNET)
    try:
        net = ipaddress.ip_network(subnet)
    except ValueError:
        raise LabError(
            f"GPUFLEET_LAB_SUBNET={subnet!r} is not a network like 10.89.50.0/24"
        ) from None
    if net.prefixlen > 24:
        raise LabError(f"GPUFLEET_LAB_SUBNET={subnet!r}: use a /24 or larger")
    return str(net)


def lab_dir() -> Path:
    """``${GPUFLEET_CACHE:-~/.cache/gpufleet}/labs/<lab name>``."""
    return binaries.cache_root() / "labs" / lab_name()


def state_path() -> Path:
    """``${GPUFLEET_CACHE:-~/.cache/gpufleet}/lab/state.json`` (read by inventory/lab)."""
    return lab_dir() / "state.json"


def kubeconfig_path() -> Path:
    """The lab's admin kubeconfig on this machine."""
    return lab_dir() / "kubeconfig"


def upgrade_reports() -> list[Path]:
    """The lab's upgrade reports and their lock files as they exist now: ``gpufleet
    upgrade`` keeps ``upgrade-report.json`` beside the kubeconfig
    (gpufleet/commands/upgrade.py), ``gpufleet upgrade-gpu-stack`` a report named after it
    (the upgrade role's ``upgrade_gpu_stack_report_path``). A report names the nodes a
    failed run left cordoned and the nodes already done; it belongs to this lab only.
    A symbolic link of such a name is listed too, dangling or not (removing it removes the
    link, never what it points to: a report written through it would land outside the
    lab); a directory of such a name is not."""
    found = [*lab_dir().glob("upgrade-report*.json"), *lab_dir().glob("upgrade-report*.json.lock")]
    return sorted(p for p in found if p.is_symlink() or p.is_file())


def load_state() -> dict[str, Any] | None:
    """The lab's state file (None when the lab does not exist). Raises LabError naming
    the file when it is not the JSON object ``up`` writes (spec, nodes)."""
    from ansible_collections.gpufleet.cluster.plugins.module_utils.common import limits as ig

    path = state_path()
    if not path.exists():
        return None
    try:
        data = ig.load_json(ig.read_text(path, f"lab state {path}") or "", f"lab state {path}")
    except ig.InputError as err:
        raise LabError(f"{err}; or remove the lab with `gpufleet lab down`") from None
    if (
        not isinstance(data, dict)
        or not isinstance(data.get("spec"), dict)
        or not isinstance(data.get("nodes"), list)
        or not all(isinstance(n, dict) for n in data["nodes"])
    ):
        raise LabError(
            f"lab state {path} is not a state file of `gpufleet lab up` (a JSON object with "
            "spec and nodes); fix: remove the lab with `gpufleet lab down`"
        )
    return data


def check_running() -> None:
    """Refuse (LabError) the lab's embedded inventory (``inventory/lab``) when the lab it
    names (``GPUFLEET_LAB_NAME``, default ``gpufleet-lab``) has not been brought up or its
    control-plane node is not running: Ansible would only report that it cannot reach the
    podman containers. The message names the lab and the command that brings it up."""
    state = load_state()
    name = lab_name()
    if state is None:
        raise LabError(
            f"lab {name!r} does not exist (no {state_path()}); fix: bring it up with "
            "`gpufleet lab up`, or set GPUFLEET_LAB_NAME to the lab you mean"
        )
    nodes = [n["name"] for n in state.get("nodes") or [] if n.get("role") == "control-plane"]
    proc = subprocess.run(
        ["podman", "container", "inspect", "--format", "{{.State.Running}}", *nodes[:1]],
        capture_output=True,
        text=True,
        check=False,
    )
    if nodes and (proc.returncode != 0 or proc.stdout.strip() != "true"):
        raise LabError(
            f"lab {name!r}: its control-plane node {nodes[0]} is not running; fix: "
            "`gpufleet lab up` (it converges the lab), or `gpufleet lab down` and up again"
        )


def plan_nodes(spec: LabSpec) -> list[LabNode]:
    """Node names and fixed addresses: ``.10`` for the control plane, ``.11``… for the
    GPU workers, in :func:`lab_subnet`. The last ``spec.device_plugin_workers`` GPU workers
    are on the device-plugin path, the others on DRA."""
    from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_driver import (
        gpu_paths as gp,
    )

    net = ipaddress.ip_network(lab_subnet())
    name = lab_name()
    nodes = [LabNode(f"{name}-control-plane", "control-plane", str(net[10]))]
    first_device_plugin = spec.workers - spec.device_plugin_workers + 1
    for i in range(1, spec.workers + 1):
        path = gp.DEVICE_PLUGIN if i >= first_device_plugin else gp.DRA
        nodes.append(
            LabNode(
                f"{name}-gpu-{i}", "gpu-worker", str(net[10 + i]), spec.gpu_model,
                spec.gpus_per_node, path,
            )
        )  # fmt: skip
    return nodes


def dra_node_selector(spec: LabSpec) -> dict[str, str]:
    """The node selector the lab's DRA kubelet plugin adds to its chart's: the DRA path
    label (``dra_driver.gpu_paths.PATH_LABEL``) where some workers are on the device plugin,
    else none."""
    from ansible_collections.gpufleet.cluster.plugins.module_utils.dra_driver import (
        gpu_paths as gp,
    )

    return {gp.PATH_LABEL: gp.DRA} if spec.device_plugin_workers else {}


# --------------------------------------------------------------------------- artefacts


def ensure_binaries(version: str, log: Callable[[str], None]) -> dict[str, Path]:
    """Build (once) what the lab runs for ``version``: the release's full set, its etcd,
    containerd and helm. Returns ``{name: path}``."""
    rel = release_pins.load_releases()
    out: dict[str, Path] = {}
    out.update(binaries.ensure(list(rel.full_set), version, log=log))
    out.update(binaries.ensure(["etcd", "etcdctl"], rel.etcd_for(version), log=log))
    containerd = rel.tool("containerd")
    out.update(binaries.ensure([b.name for b in containerd.binaries], containerd.version, log=log))
    out.update(binaries.ensure(["helm"], None, log=log))
    # NVIDIA's nvidia-cdi-hook, which GPU nodes get at NVIDIA_CDI_HOOK (simulator_files).
    out.update(binaries.ensure(["nvidia-cdi-hook"], None, log=log))
    return out


def busybox_image() -> images.ImageSpec:
    """A shell for the lab's test pods: Debian's statically linked busybox
    (package busybox-static, installed by lab/prepare-podman)."""
    if not BUSYBOX.is_file():
        raise LabError(
            f"{BUSYBOX} is missing: install Debian's busybox-static (lab/prepare-podman)"
        )
    return images.ImageSpec(
        ref=SMOKE_IMAGE,
        files=(images.ImageFile(path="bin/busybox", source=BUSYBOX),),
        entrypoint=("/bin/busybox",),
        cmd=("sh",),
    )


def _plugin_artefacts(log: Callable[[str], None]) -> tuple[images.ImageSpec | None, Path | None]:
    """The GPU simulator's kubelet-plugin image (tagged with the digest of its sources)
    and its chart directory (None when absent)."""
    from gpufleet.lab import gpusim_plugin

    binary = gpusim_plugin.ensure_binary(log=log).path
    chart = REPO / "lab" / "gpu-simulator" / "chart"
    spec = images.ImageSpec(
        ref=f"{PLUGIN_IMAGE}:{binary.parent.name}",
        files=(images.ImageFile(path=f"{images.BIN_DIR}/{binary.name}", source=binary),),
        entrypoint=(f"/{images.BIN_DIR}/{binary.name}",),
    )
    return spec, chart if (chart / "Chart.yaml").is_file() else None


def gpusim_plugin_name() -> str:
    from gpufleet.lab import gpusim_plugin

    return gpusim_plugin.BINARY_NAME


#: Where GPU nodes get NVIDIA's real ``nvidia-cdi-hook``: the path the NVIDIA DRA kubelet
#: plugin and the simulator's plugin look for, and that their CDI specs' hooks call.
NVIDIA_CDI_HOOK = "/usr/bin/nvidia-cdi-hook"


def simulator_files(cdi_hook: Path | None = None) -> list[dict[str, str]]:
    """Files of the GPU simulator's ``nvidia-smi`` to copy onto GPU nodes, each
    ``{src, dest, mode}`` (src on this machine; literal contents are staged under the
    lab directory first), and ``cdi_hook`` (the built ``nvidia-cdi-hook``) at
    :data:`NVIDIA_CDI_HOOK`, mode 0755, which the simulator's kubelet plugin needs."""
    try:
        from gpufleet.lab.gpusim import install
    except ImportError:
        return []
    staged = lab_dir() / "gpusim-staged"
    files: list[dict[str, str]] = []
    entries: dict[Any, Any] = {**install.file_map(), **install.wrapper_scripts()}
    wrappers = set(install.wrapper_scripts())
    for dest, source in sorted(entries.items(), key=lambda kv: str(kv[0])):
        if isinstance(source, str):
            local = staged / str(dest).lstrip("/")
            local.parent.mkdir(parents=True, exist_ok=True)
            local.write_text(source)
            source = local
        files.append(
            {"src": str(source), "dest": str(dest), "mode": "0755" if dest in wrappers else "0644"}
        )
    if files and cdi_hook is not None:
        files.append({"src": str(cdi_hook), "dest": NVIDIA_CDI_HOOK, "mode": "0755"})
    return files


def _archive(spec: images.ImageSpec) -> dict[str, str]:
    return {"ref": spec.ref, "path": str(images.build_archive(spec))}


# --------------------------------------------------------------------------- podman


def _run(
    argv: list[str], *, check: bool = True, timeout: float = 300
) -> subprocess.CompletedProcess:
    proc = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=timeout)
    if check and proc.returncode != 0:
        raise LabError(f"`{' '.join(argv)}` exited {proc.returncode}: {proc.stderr.strip()}")
    return proc


def _network_exists() -> bool:
    return _run(["podman", "network", "exists", lab_name()], check=False).returncode == 0


def _container_state(name: str) -> str | None:
    proc = _run(
        ["podman", "container", "inspect", "--format", "{{.State.Status}}", name], check=False
    )
    return proc.stdout.strip() if proc.returncode == 0 else None


def start_nodes(nodes: list[LabNode], log: Callable[[str], None]) -> None:
    """Create the network and start every node container that is not running yet."""
    if not _network_exists():
        _run(["podman", "network", "create", "--subnet", lab_subnet(),
              "--label", f"{LAB_LABEL}={lab_name()}", lab_name()])  # fmt: skip
        log(f"network {lab_name()} ({lab_subnet()}) created")
    ref = podman.node_image_ref()
    if not podman.image_present(ref):
        raise LabError(f"node image {ref} is not built: run lab/prepare-podman")
    for node in nodes:
        state = _container_state(node.name)
        if state == "running":
            continue
        if state is not None:
            _run(["podman", "start", node.name])
        else:
            args = podman.node_run_args(
                node.name,
                image=ref,
                network=lab_name(),
                labels={LAB_LABEL: lab_name(), f"{LAB_LABEL}.role": node.role},
                volumes=[f"{binaries.cache_root()}:{NODE_CACHE}:ro"],
                extra_args=["--ip", node.ip],
            )
            _run(["podman", *args])
        log(f"node {node.name} ({node.role}, {node.ip}) started")
    for node in nodes:
        podman.wait_for_boot(node.name, timeout_s=180)


# --------------------------------------------------------------------------- up/down/status


def build_state(spec: LabSpec, log: Callable[[str], None]) -> LabState:
    """Build (or find cached) every binary and image of the lab and describe it."""
    spec = spec.validated()
    timings: dict[str, float] = {}
    t = time.monotonic()
    bins = ensure_binaries(spec.kubernetes_version, log)
    timings["binaries_s"] = round(time.monotonic() - t, 1)
    t = time.monotonic()
    etcd = release_pins.load_releases().etcd_for(spec.kubernetes_version)
    cp_specs = images.control_plane_images(spec.kubernetes_version, etcd=etcd)
    pause = images.pause_ref(spec.kubernetes_version)
    worker_specs = [images.pause_image(pause), busybox_image()]
    plugin_image, chart = _plugin_artefacts(log)
    if plugin_image is not None:
        worker_specs.append(plugin_image)
    cp_images = [_archive(s) for s in cp_specs]
    worker_images = [_archive(s) for s in worker_specs]
    timings["images_s"] = round(time.monotonic() - t, 1)
    nodes = plan_nodes(spec)
    cp_ip = nodes[0].ip
    helm = bins["helm"]
    # The release is the one kubeadm bootstraps, not the cluster-wide gpufleet_kubernetes_version:
    # after `gpufleet upgrade` the lab runs a newer one, which the other roles read from the
    # API server. The kubeconfig is set once, as lab_kubeconfig, which
    # inventory/lab/group_vars/all.yml makes the cluster-wide gpufleet_kubeconfig.
    lab_vars: dict[str, Any] = {
        "kubeadm_kubernetes_version": spec.kubernetes_version,
        "kubeadm_binaries_dir": str(bins["kubeadm"].parent),
        "kubeadm_etcd_image_tag": etcd,
        "kubeadm_kubeconfig_server": f"https://{cp_ip}:6443",
        "lab_node_containerd_dir": str(bins["containerd"].parent),
        "lab_node_sandbox_image": pause,
        "lab_node_gpu_simulator_files": simulator_files(bins["nvidia-cdi-hook"]),
        "lab_images_control_plane": cp_images,
        "lab_images_worker": worker_images,
        "lab_kubeconfig": str(kubeconfig_path()),
        "lab_helm": str(helm),
        "lab_smoke_image": SMOKE_IMAGE,
        # With a device-plugin pool the DRA kubelet plugin lands on the DRA pool only, as
        # the dra_driver role places it (playbooks/lab.yml installs it before that role).
        "lab_dra_node_selector": dra_node_selector(spec),
        # The MIG mode of the plugin: playbooks/lab.yml installs the chart with
        # featureGates.DynamicMIG from it, and `gpufleet up` through the dra_driver role. The
        # chart values (lab_gpu_simulator_values) carry no mode of their own, so that
        # `gpufleet mig mode` can move the pool (dra_driver_extra_values would override it).
        "dra_driver_dynamic_mig": spec.dynamic_mig,
    }
    if chart is not None and plugin_image is not None:
        repo, tag = plugin_image.ref.rsplit(":", 1)
        lab_vars["lab_gpu_simulator_chart"] = str(chart)
        lab_vars["lab_gpu_simulator_values"] = {
            "image": {"repository": repo, "tag": tag, "pullPolicy": "Never"},
            "apiServer": {"host": cp_ip, "port": 6443},
            "kubeletPlugin": {"command": [f"/{images.BIN_DIR}/{gpusim_plugin_name()}"]},
        }
    return LabState(spec, nodes, lab_vars, timings)


def write_state(state: LabState) -> Path:
    path = state_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(state.to_json(), indent=2) + "\n")
    os.replace(tmp, path)
    return path


def update_state_vars(values: Mapping[str, Any]) -> Path:
    """Merge ``values`` into the ``vars`` of the lab's state file (which inventory/lab
    hands to every play) and return its path. Raises LabError when the lab does not
    exist."""
    data = load_state()
    if data is None:
        raise LabError(f"lab {lab_name()!r} does not exist; fix: `gpufleet lab up`")
    data["vars"] = {**(data.get("vars") or {}), **values}
    path = state_path()
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=2) + "\n")
    os.replace(tmp, path)
    return path


def existing_spec() -> LabSpec | None:
    data = load_state()
    return LabSpec(**data["spec"]) if data else None


def up(
    spec: LabSpec,
    *,
    log: Callable[[str], None] = print,
    run_playbook: Callable[..., Any] | None = None,
) -> LabState:
    """Bring the lab up (idempotent: a running lab is converged, not rebuilt).

    Raises ``LabError`` when a lab of another release or shape exists (``lab down``
    first), when the node image is missing, or when the playbook fails.
    """
    spec = spec.validated()
    old = existing_spec()
    if old is not None and old != spec:
        raise LabError(
            f"a lab with {asdict(old)} exists; run `gpufleet lab down` before one with "
            f"{asdict(spec)}"
        )
    if old is None:
        # a new lab: reports of a removed lab of this name (one `lab down` of a release
        # that kept them) would resume, or skip, that lab's upgrades on this one
        for path in upgrade_reports():
            path.unlink(missing_ok=True)
    t0 = time.monotonic()
    state = build_state(spec, log)
    t = time.monotonic()
    start_nodes(state.nodes, log)
    state.timings["nodes_s"] = round(time.monotonic() - t, 1)
    use_node_cache(state)
    write_state(state)
    if run_playbook is None:
        from gpufleet.runner import run_playbook as run_playbook
    t = time.monotonic()
    result = run_playbook("lab", str(INVENTORY))
    state.timings["playbook_s"] = round(time.monotonic() - t, 1)
    if getattr(result, "status", 1) != 0:
        write_state(state)
        raise LabError(
            f"playbooks/lab.yml failed (exit {result.status}); the nodes are kept: fix the cause "
            "and run `gpufleet lab up` again, or `gpufleet lab down`"
        )
    state.timings["total_s"] = round(time.monotonic() - t0, 1)
    write_state(state)
    return state


def _lab_containers() -> list[str]:
    out = _run(["podman", "ps", "--all", "--filter", f"label={LAB_LABEL}={lab_name()}",
                "--format", "{{.Names}}"], check=False).stdout  # fmt: skip
    return [n for n in out.split() if n]


def _has_cache_mount(name: str) -> bool:
    return NODE_CACHE in _inspect(name, "{{range .Mounts}}{{.Destination}} {{end}}").split()


def use_node_cache(state: LabState) -> None:
    """Point the playbook at the read-only cache mount inside the nodes (when every node
    has it: nodes started by an older ``lab up`` do not) instead of copying from here."""
    if not all(_has_cache_mount(n.name) for n in state.nodes):
        return
    host = str(binaries.cache_root())

    def inside(path: str) -> str:
        return NODE_CACHE + path[len(host) :] if path.startswith(host) else path

    v = state.vars
    v["kubeadm_binaries_dir"] = inside(v["kubeadm_binaries_dir"])
    v["lab_node_containerd_dir"] = inside(v["lab_node_containerd_dir"])
    for key in ("lab_images_control_plane", "lab_images_worker"):
        v[key] = [{**i, "path": inside(i["path"])} for i in v[key]]
    v["kubeadm_binaries_remote_src"] = True
    v["lab_node_remote_src"] = True


def _inspect(name: str, fmt: str) -> str:
    return _run(["podman", "container", "inspect", "--format", fmt, name], check=False).stdout


def _container_volumes(name: str) -> list[str]:
    return _inspect(name, "{{range .Mounts}}{{if .Name}}{{.Name}} {{end}}{{end}}").split()


def _container_netns(name: str) -> str:
    """The network namespace path of a running container (``/run/netns/netns-…``)."""
    return _inspect(name, "{{.NetworkSettings.SandboxKey}}").strip()


def leftovers(netns_paths: tuple[str, ...] = ()) -> dict[str, list[str]]:
    """What of the lab still exists on this machine: its containers, their volumes, its
    network, mounts that name a lab node, and the network namespaces in
    ``netns_paths`` (recorded before removal) that still exist."""
    containers = _lab_containers()
    volumes = [v for c in containers for v in _container_volumes(c)]
    network = [lab_name()] if _network_exists() else []
    mount_lines = Path("/proc/self/mounts").read_text().splitlines()
    mounts = [line.split()[1] for line in mount_lines if f"{lab_name()}-" in line]
    netns = [p for p in netns_paths if p and Path(p).exists()]
    return {
        "containers": containers,
        "volumes": volumes,
        "network": network,
        "mounts": mounts,
        "netns": netns,
    }


def down(*, log: Callable[[str], None] = print) -> dict[str, list[str]]:
    """Remove the lab: its containers with their volumes, its network, its state file,
    kubeconfig, staged simulator files and upgrade report (a new lab of the same name must
    not resume the upgrade of this one). Returns :func:`leftovers` afterwards (all lists
    empty when clean)."""
    netns: list[str] = []
    for name in _lab_containers():
        vols = _container_volumes(name)
        netns.append(_container_netns(name))
        _run(["podman", "rm", "--force", "--volumes", "--time", "10", name], check=False)
        for v in vols:
            _run(["podman", "volume", "rm", "--force", v], check=False)
        log(f"node {name} removed")
    if _network_exists():
        _run(["podman", "network", "rm", "--force", lab_name()], check=False)
        log(f"network {lab_name()} removed")
    for path in (state_path(), kubeconfig_path(), *upgrade_reports()):
        path.unlink(missing_ok=True)
    shutil.rmtree(lab_dir() / "gpusim-staged", ignore_errors=True)  # simulator_files' copies
    return leftovers(tuple(netns))


def status() -> dict[str, Any]:
    """The lab as it is now: each node container's state and, when the API answers, each
    Kubernetes node's readiness, kubelet version and container runtime."""
    data = load_state()
    if data is None:
        return {"exists": False, "nodes": []}
    out: dict[str, Any] = {
        "exists": True,
        "kubernetes_version": data["spec"].get("kubernetes_version", "?"),
        "kubeconfig": str(kubeconfig_path()),
        "timings": data.get("timings", {}),
        "nodes": [],
    }
    k8s_nodes = _kubernetes_nodes()
    for n in data["nodes"]:
        name = str(n.get("name", "?"))
        entry = {
            "name": name,
            "role": n.get("role"),
            "ip": n.get("ip"),
            "container": _container_state(name) or "absent",
        }
        if n.get("role") == "gpu-worker":
            entry["gpu_model"] = n.get("gpu_model")
            entry["gpus"] = n.get("gpu_count")
            entry["gpu_path"] = n.get("gpu_path") or "dra"  # a state written before paths
        entry.update(k8s_nodes.get(name, {"ready": False, "kubelet_version": None}))
        out["nodes"].append(entry)
    out["ready"] = bool(out["nodes"]) and all(n["ready"] for n in out["nodes"])
    return out


def _kubernetes_nodes() -> dict[str, dict[str, Any]]:
    if not kubeconfig_path().is_file():
        return {}
    try:
        from ansible_collections.gpufleet.cluster.plugins.module_utils.kube import client as vk
        from kubernetes import client

        api = client.CoreV1Api(vk.api_client(str(kubeconfig_path())))
        items = api.list_node(_request_timeout=vk.REQUEST_TIMEOUT).items  # no read retried
    except Exception:
        return {}
    out = {}
    for node in items:
        ready = any(c.type == "Ready" and c.status == "True" for c in node.status.conditions or [])
        out[node.metadata.name] = {
            "ready": ready,
            "kubelet_version": node.status.node_info.kubelet_version,
            "container_runtime": node.status.node_info.container_runtime_version,
        }
    return out


def wait_ready(timeout_s: float = 180) -> dict[str, Any]:
    """Wait until every lab node is Ready; returns :func:`status`. Raises ``LabError``
    naming the nodes that are not."""
    deadline = time.monotonic() + timeout_s
    while True:
        st = status()
        if st.get("ready"):
            return st
        if time.monotonic() > deadline:
            bad = [n["name"] for n in st.get("nodes", []) if not n.get("ready")]
            raise LabError(f"nodes not Ready after {timeout_s:.0f}s: {', '.join(bad)}")
        time.sleep(2)


def summary_rows(st: Mapping[str, Any]) -> list[list[str]]:
    return [
        [n["name"], n["role"], n["ip"], n["container"], "Ready" if n.get("ready") else "NotReady",
         n.get("kubelet_version") or "-", n.get("gpu_model", "-"), n.get("gpu_path", "-")]
        for n in st.get("nodes", [])
    ]  # fmt: skip
