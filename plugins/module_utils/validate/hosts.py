# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""Host-side validation checks over what the playbook read on each node.

Input per host (the ``validate_host`` fact the playbook ``validate.yml`` builds)::

    {"host": "gpu-1", "node": "gpu-1", "gpu_node": true, "simulator": false,
     "nvidia_runtime_required": true,
     "gpu": <gpu_facts result: ansible_facts.gpufleet_gpus, ... | failed, msg>,
     "toolkit": {"rc": 0, "stdout": "NVIDIA Container Toolkit CLI version 1.18.0 ..."},
     "containerd_version": {"rc": 0, "stdout": "containerd ... v2.4.2 ..."},
     "containerd": {"rc": 0, "stdout": "<containerd config dump>"},
     "containerd_active": {"rc": 0, "stdout": "active"},
     "cdi": [{"path": "/var/run/cdi/nvidia.yaml", "content": "<YAML or JSON>"}],
     "packages": {"rc": 0, "stdout": "kubeadm 1.37.2-1.1 install ok installed\\n..."},
     "holds": {"rc": 0, "stdout": "kubeadm\\nkubelet\\n"},
     "kubeadm_version": {"rc": 0, "stdout": "v1.37.2"},
     "driver_root": {"root": "/", "files": <looped stat results>, "devices": <find result>},
     "cdi_hook": {"path": "/usr/bin/nvidia-cdi-hook", "stat": <stat result>},
     "plugin_sockets": <kubelet_plugin_sockets result: sockets [{driver, path, listening}]>}

Checks: ``hosts.driver-version`` (one NVIDIA driver version on every GPU node, at or
above the minimum), ``hosts.toolkit`` (NVIDIA Container Toolkit installed and able to
read containerd's configuration version: ``nvidia.containerd.check_toolkit``),
``hosts.containerd-cdi`` (``containerd config dump`` has the nvidia runtime and CDI:
``nvidia.containerd.effective_problems``), ``hosts.cdi-gpus`` (a CDI spec names every
GPU UUID: ``nvidia.cdi.missing_gpus``; each spec of kind ``nvidia.com/gpu`` loads in the
CDI library and gives every GPU device its device nodes, present on the host:
``nvidia.cdi_spec``), ``hosts.driver-root`` and ``hosts.cdi-hook`` (what
NVIDIA's DRA kubelet plugin needs under its driver root, and its nvidia-cdi-hook:
``validate.driver_root``), ``hosts.plugin-sockets`` (no kubelet plugin socket of the DRA
drivers that refuses connections: ``validate.driver_root``) and
``versions.packages-held`` (kubeadm and kubelet packages are on hold, so an unattended
upgrade cannot break the version skew).

A host with a simulated GPU (``simulator``) has no NVIDIA runtime or toolkit; the checks
that need them are skipped there with that reason.
"""

from __future__ import annotations

import base64
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils.nvidia import cdi as cdi_spec
from ansible_collections.gpufleet.cluster.plugins.module_utils.nvidia import cdi_spec as cdi_rules
from ansible_collections.gpufleet.cluster.plugins.module_utils.nvidia import containerd as cc
from ansible_collections.gpufleet.cluster.plugins.module_utils.nvidia.driver import (
    DRA_MIN_BRANCH,
    SmiGpu,
)
from ansible_collections.gpufleet.cluster.plugins.module_utils.validate import driver_root as vdr
from ansible_collections.gpufleet.cluster.plugins.module_utils.validate.report import (
    FAIL,
    WARN,
    Check,
    Evidence,
    finish,
    skipped,
)

__all__ = ["driver_version_key", "hosts_checks", "kubeadm_versions", "normalize_host"]

#: The lowest driver the checks accept unless told: the NVIDIA DRA driver's minimum
#: branch (``nvidia.driver.DRA_MIN_BRANCH``, which names its source).
DEFAULT_MIN_DRIVER = f"{DRA_MIN_BRANCH}.0.0"
PACKAGES = ("kubeadm", "kubelet")
GPU_KIND = cdi_rules.GPU_KIND


def normalize_host(raw: Mapping[str, Any]) -> dict[str, Any]:
    """A host record as the playbook registers it (``commands``: the results of the
    looped ``command`` task, each with ``item.name``; ``cdi``: the results of the looped
    ``slurp``) in the shape the checks read: one entry per command name, ``cdi`` as
    ``[{path, content}]`` with the content decoded. Records already in that shape pass
    through."""
    out = dict(raw)
    for r in raw.get("commands") or []:
        if isinstance(r, Mapping) and isinstance(r.get("item"), Mapping) and "rc" in r:
            out[str(r["item"].get("name"))] = {
                "rc": r.get("rc"),
                "stdout": r.get("stdout", ""),
                "stderr": r.get("stderr", ""),
            }
    cdi = []
    for r in raw.get("cdi") or []:
        if not isinstance(r, Mapping):
            continue
        if "content" in r and "source" in r and r.get("encoding") == "base64":
            try:
                text = base64.b64decode(r["content"]).decode("utf-8", "replace")
            except (ValueError, TypeError):
                continue
            cdi.append({"path": r["source"], "content": text})
        elif "path" in r and "content" in r:
            cdi.append({"path": r["path"], "content": r["content"]})
    out["cdi"] = cdi
    if isinstance(raw.get("driver_root"), Mapping) and "files" in raw["driver_root"]:
        out["driver_root"] = _driver_root_record(raw["driver_root"])
    if isinstance(raw.get("cdi_hook"), Mapping) and "stat" in raw["cdi_hook"]:
        out["cdi_hook"] = _cdi_hook_record(raw["cdi_hook"])
    if isinstance(raw.get("plugin_sockets"), Mapping) and "read" not in raw["plugin_sockets"]:
        out["plugin_sockets"] = _sockets_record(raw["plugin_sockets"])
    return out


def _sockets_record(raw: Mapping[str, Any]) -> dict[str, Any]:
    """The ``kubelet_plugin_sockets`` result -> ``{read, sockets: [{driver, path,
    listening}], error}`` (entries that are not mappings with a path are left out)."""
    ran = _ran(raw) and not raw.get("failed")
    sockets = [
        {
            "driver": str(x.get("driver") or ""),
            "path": str(x["path"]),
            "listening": x.get("listening") if isinstance(x.get("listening"), bool) else None,
        }
        for x in (raw.get("sockets") or [] if ran else [])
        if isinstance(x, Mapping) and x.get("path")
    ]
    return {
        "read": ran and isinstance(raw.get("sockets"), list),
        "sockets": sockets,
        "error": "" if ran else str(raw.get("msg") or ""),
    }


def _ran(result: Any) -> bool:
    """A registered task result that ran (not skipped, not an empty default)."""
    return isinstance(result, Mapping) and bool(result) and not result.get("skipped")


def _driver_root_record(raw: Mapping[str, Any]) -> dict[str, Any]:
    """The driver root as read (``root``; ``files``: the looped ``stat`` results of
    ``<dir>/libnvidia-ml.so.1``, ``<dir>/nvidia-smi`` and ``dev``; ``devices``: the ``find``
    result of the device nodes) -> ``{root, read, libraries, library_dirs, smi, smi_dirs,
    dev_dir, devices: {directory: [names]}, error}``: found paths, the directories searched
    (relative to the root), whether ``<root>/dev`` is a directory, and the NVIDIA device
    nodes per directory."""
    root = str(raw.get("root") or "/")
    rec: dict[str, Any] = {
        "root": root,
        "read": False,
        "libraries": [],
        "library_dirs": [],
        "smi": [],
        "smi_dirs": [],
        "dev_dir": False,
        "devices": {},
        "error": "",
    }
    for r in raw.get("files") or []:
        if not _ran(r) or not isinstance(r.get("stat"), Mapping):
            continue
        rec["read"] = True
        item, st = str(r.get("item") or ""), r["stat"]
        # the kubelet plugin takes only what resolves to a regular file (a directory or a
        # device of that name does not count: dra_driver.driver_root)
        found = bool(st.get("exists")) and (item == "dev" or st.get("isreg", True) is not False)
        path = str(st.get("path") or f"{root.rstrip('/')}/{item}")
        if item == "dev":
            rec["dev_dir"] = found and bool(st.get("isdir"))
            continue
        directory, _, name = item.rpartition("/")
        kind = {"libnvidia-ml.so.1": "library", "nvidia-smi": "smi"}.get(name)
        if kind is None:
            continue
        rec[f"{kind}_dirs"].append(directory)
        if found:
            rec["libraries" if kind == "library" else "smi"].append(path)
    devices = raw.get("devices")
    if _ran(devices):
        for f in devices.get("files") or []:
            directory, _, name = str((f or {}).get("path") or "").rpartition("/")
            if name:
                rec["devices"].setdefault(directory or "/", []).append(name)
        rec["devices"] = {d: sorted(n) for d, n in rec["devices"].items()}
        if devices.get("failed"):
            rec["error"] = str(devices.get("msg") or "the device node search failed")
    return rec


def _cdi_hook_record(raw: Mapping[str, Any]) -> dict[str, Any]:
    """``{path, stat: <stat result>}`` -> ``{path, read, exists, isreg, executable, mode}``
    (``executable``: the stat module's own answer for the reading user, else any x bit)."""
    st = raw.get("stat")
    ran = _ran(st) and isinstance(st.get("stat"), Mapping)
    info = st["stat"] if ran else {}
    return {
        "path": str(raw.get("path") or ""),
        "read": ran,
        "exists": bool(info.get("exists")),
        "isreg": bool(info.get("isreg")),
        "executable": bool(
            info.get("executable") or info.get("xusr") or info.get("xgrp") or info.get("xoth")
        ),
        "mode": str(info.get("mode") or ""),
    }


def driver_version_key(version: str) -> tuple[int, ...]:
    """``580.159.04`` -> ``(580, 159, 4)``; raises ValueError for a non-version."""
    parts = re.findall(r"\d+", str(version))
    if not parts:
        raise ValueError(f"{version!r} is not a driver version such as 580.159.04")
    return tuple(int(p) for p in parts[:3])


def _out(rec: Any) -> tuple[int | None, str, str]:
    if not isinstance(rec, Mapping):
        return None, "", ""
    rc = rec.get("rc")
    return (
        (int(rc) if rc is not None else None),
        str(rec.get("stdout") or ""),
        str(rec.get("stderr") or rec.get("msg") or ""),
    )


def _gpu_facts(h: Mapping[str, Any]) -> Mapping[str, Any] | None:
    g = h.get("gpu")
    if not isinstance(g, Mapping) or g.get("failed") or g.get("skipped"):
        return None
    return g.get("ansible_facts") or g


def hosts_checks(
    hosts: Sequence[Mapping[str, Any]],
    min_driver: str = DEFAULT_MIN_DRIVER,
    nvidia_runtime: str = "nvidia",
    nvidia_runtime_binary: str = "/usr/bin/nvidia-container-runtime",
) -> list[Check]:
    """Every host check; ``hosts`` as in the module docstring."""
    gpu_hosts = [h for h in hosts if h.get("gpu_node")]
    return [
        _driver(gpu_hosts, min_driver),
        _toolkit(gpu_hosts),
        _containerd(gpu_hosts, nvidia_runtime, nvidia_runtime_binary),
        _cdi(gpu_hosts),
        vdr.driver_root_check(gpu_hosts),
        vdr.cdi_hook_check(gpu_hosts),
        vdr.plugin_sockets_check(gpu_hosts),
        _held(hosts),
    ]


def _driver(hosts: Sequence[Mapping[str, Any]], min_driver: str) -> Check:
    c = Check(
        "hosts.driver-version", f"one NVIDIA driver version on every GPU node, >= {min_driver}"
    )
    if not hosts:
        return skipped(c.id, c.title, "the inventory group gpu_nodes is empty")
    versions: dict[str, str] = {}
    for h in hosts:
        facts = _gpu_facts(h)
        if facts is None:
            g = h.get("gpu") if isinstance(h.get("gpu"), Mapping) else {}
            c.problem(
                h["host"], FAIL, f"GPU facts could not be read: {g.get('msg') or 'no result'}"
            )
            continue
        per_gpu = {
            str(x.get("driver_version"))
            for x in facts.get("gpufleet_gpus") or []
            if x.get("driver_version")
        }
        v = facts.get("gpufleet_gpu_driver_version")
        if not v:
            c.problem(
                h["host"], FAIL, "no NVIDIA driver answered (nvidia-smi/NVML): no GPU can be used"
            )
            continue
        if len(per_gpu) > 1:
            c.problem(
                h["host"],
                FAIL,
                f"GPUs report different driver versions: {', '.join(sorted(per_gpu))}",
            )
        versions[h["host"]] = str(v)
    c.evidence.append(
        Evidence(
            "gpu_facts (nvidia-smi / NVML) on each GPU node",
            ", ".join(f"{k}={v}" for k, v in sorted(versions.items())) or "none",
        )
    )
    try:
        minimum = driver_version_key(min_driver)
    except ValueError as err:
        c.problem(None, FAIL, f"validate_driver_min_version={min_driver!r}: {err}")
        minimum = (0,)
    counts = Counter(versions.values())
    # the reference is the version most nodes run; on a tie the newest, so that the nodes
    # left behind are named whatever order the hosts reported in
    ref = max(counts, key=lambda v: (counts[v], _driver_order(v))) if counts else None
    for host, v in sorted(versions.items()):
        if v != ref:
            c.problem(
                host,
                FAIL,
                f"driver {v}, while {counts[ref]} of {len(versions)} GPU nodes run {ref}: one "
                "driver version fleet-wide keeps ResourceSlice driverVersion selectors and CUDA "
                "images predictable",
            )
        try:
            if driver_version_key(v) < minimum:
                c.problem(
                    host,
                    FAIL,
                    f"driver {v} is older than {min_driver}, the minimum for the NVIDIA DRA driver",
                )
        except ValueError:
            c.problem(host, FAIL, f"driver version {v!r} cannot be read")
    c.fix = (
        "install one driver release on every GPU node: set nvidia_driver_version and run "
        "gpufleet up -i INVENTORY (role nvidia_driver; -l NODE for the nodes named)"
    )
    return finish(c, f"driver {ref} on {len(versions)} GPU node(s)")


def _toolkit(hosts: Sequence[Mapping[str, Any]]) -> Check:
    c = Check("hosts.toolkit", "NVIDIA Container Toolkit installed and fit for containerd")
    real = [h for h in hosts if not h.get("simulator")]
    if not hosts:
        return skipped(c.id, c.title, "the inventory group gpu_nodes is empty")
    if not real:
        return skipped(
            c.id,
            c.title,
            "every GPU node has a simulated GPU (no NVIDIA runtime to check; the simulator's "
            "kubelet plugin writes its own CDI specs)",
        )
    for h in real:
        rc, out, err = _out(h.get("toolkit"))
        _, cout, _ = _out(h.get("containerd_version"))
        c.evidence.append(
            Evidence(
                f"{h['host']}: nvidia-ctk --version",
                (out or err).strip().splitlines()[0] if (out or err).strip() else f"rc={rc}",
            )
        )
        if rc != 0:
            c.problem(
                h["host"],
                WARN,
                "nvidia-ctk not found: the NVIDIA Container Toolkit is not installed (the DRA "
                "driver works without it, but no nvidia runtime or toolkit CDI spec exists)",
            )
            continue
        m = re.search(r"(\d+\.\d+\.\d+)", out)
        if not m:
            c.problem(
                h["host"],
                FAIL,
                f"cannot read a version from nvidia-ctk --version: {out.strip()[:80]!r}",
            )
            continue
        try:
            cc.check_toolkit(m.group(1), cout or "0.0.0", False)
        except cc.ConfigError as err2:
            c.problem(h["host"], FAIL, str(err2))
    c.fix = (
        "install or upgrade the toolkit: set nvidia_container_toolkit_version and run gpufleet "
        "up -i INVENTORY (role nvidia_container_toolkit; -l NODE for the nodes named)"
    )
    return finish(c, f"toolkit fit for containerd on {len(real)} GPU node(s)")


def _containerd(hosts: Sequence[Mapping[str, Any]], runtime: str, binary: str) -> Check:
    c = Check(
        "hosts.containerd-cdi", "containerd's effective config has the nvidia runtime and CDI"
    )
    if not hosts:
        return skipped(c.id, c.title, "the inventory group gpu_nodes is empty")
    fixes: list[str] = []
    for h in hosts:
        rc, out, err = _out(h.get("containerd"))
        if rc != 0:
            message, fix = _containerd_unread(h, rc, out, err)
            c.problem(h["host"], FAIL, message)
            fixes.append(fix)
            continue
        if _inactive(h):
            c.problem(
                h["host"],
                FAIL,
                "containerd is installed but not running (systemctl is-active containerd: "
                f"{_out(h.get('containerd_active'))[1].strip() or 'no answer'}): the kubelet "
                "has no container runtime and no pod starts on this node",
            )
            fixes.append(_START_CONTAINERD)
        try:
            dump = cc.loads(out, f"{h['host']}: containerd config dump")
        except cc.ConfigError as err2:
            c.problem(h["host"], FAIL, str(err2))
            continue
        problems = cc.effective_problems(dump, runtime_name=runtime, runtime_binary=binary)
        need_runtime = h.get("nvidia_runtime_required", not h.get("simulator"))
        if not need_runtime:
            problems = [p for p in problems if f"runtime {runtime!r}" not in p]
        plugin = cc.cri_plugin(cc.file_version(dump))
        dirs = ((dump.get("plugins") or {}).get(plugin) or {}).get("cdi_spec_dirs")
        c.evidence.append(
            Evidence(
                f"{h['host']}: containerd config dump",
                f"version {cc.file_version(dump)}, cdi_spec_dirs={dirs}"
                + ("" if need_runtime else ", nvidia runtime not required (simulated GPU)"),
            )
        )
        for p in problems:
            c.problem(h["host"], FAIL, p)
    if any(p.message for p in c.problems if not p.message.startswith("containerd is ")):
        fixes.append(
            "configure containerd: gpufleet up -i INVENTORY (role nvidia_container_toolkit, "
            "module containerd_runtime_config; -l NODE for the nodes named), then restart "
            "containerd"
        )
    c.fix = "; ".join(dict.fromkeys(fixes)) or None
    return finish(c, f"nvidia runtime and CDI in effect on {len(hosts)} GPU node(s)")


_START_CONTAINERD = (
    "start containerd and keep it on across reboots: systemctl enable --now containerd "
    "(journalctl -u containerd says why it stopped)"
)
_INSTALL_CONTAINERD = (
    "install containerd 1.7 or newer on the node (CDI needs 1.7; the distribution's "
    "containerd package, or containerd.io from Docker's repository), start it (systemctl "
    "enable --now containerd), then configure it for the GPUs: gpufleet up -i INVENTORY -l "
    "NODE (role nvidia_container_toolkit)"
)


def _inactive(h: Mapping[str, Any]) -> bool:
    """``systemctl is-active containerd`` answered and said it is not active."""
    rc, out, _ = _out(h.get("containerd_active"))
    return rc not in (None, 0) and out.strip() in (
        "inactive",
        "failed",
        "activating",
        "deactivating",
    )


def _containerd_unread(h: Mapping[str, Any], rc: int | None, out: str, err: str) -> tuple[str, str]:
    """(problem, fix) for a ``containerd config dump`` that did not answer: not read at
    all, not installed (rc 2 and no output: the command could not be started), timed out,
    or failed with its own message."""
    said = (err or out).strip()
    if rc is None:
        return (
            "containerd config dump was not run on this node (no result was read)",
            "run gpufleet validate again with read access to the node (validate_become)",
        )
    if rc == 2 and (not said or "No such file" in said):
        return (
            "containerd is not installed on this node (the command containerd was not found: "
            f"containerd config dump, rc=2{', ' + said[:120] if said else ', no output'}): "
            "there is no container runtime, so neither the nvidia runtime nor CDI is in effect",
            _INSTALL_CONTAINERD,
        )
    if rc == -9:
        return (
            "containerd config dump did not answer in time (killed): containerd's configuration "
            "could not be read",
            "run containerd config dump on the node and look at what it waits for",
        )
    return (
        f"containerd config dump failed (rc={rc}): {said[:200] or 'no output'}"
        + (" (containerd is not running)" if _inactive(h) else ""),
        "run containerd config dump on the node: it names the configuration file and line it "
        "cannot read; fix that file (the toolkit's drop-in, the imports line), then "
        "systemctl restart containerd",
    )


def _cdi(hosts: Sequence[Mapping[str, Any]]) -> Check:
    c = Check("hosts.cdi-gpus", "a CDI spec gives every GPU with its device nodes")
    if not hosts:
        return skipped(c.id, c.title, "the inventory group gpu_nodes is empty")
    judged = 0
    roots: list[str | None] = []
    for h in hosts:
        rc, _, _ = _out(h.get("toolkit"))
        facts = _gpu_facts(h)
        if h.get("simulator") or rc != 0:
            c.evidence.append(
                Evidence(
                    f"{h['host']}",
                    "not judged: "
                    + (
                        "simulated GPU"
                        if h.get("simulator")
                        else "no NVIDIA Container Toolkit, so no toolkit CDI spec is expected (the "
                        "DRA driver writes per-claim specs)"
                    ),
                )
            )
            continue
        if facts is None:
            continue
        judged += 1
        devices = _cdi_specs(c, h, roots)
        gpus = [
            SmiGpu(int(g.get("index", 0)), str(g.get("name")), str(g.get("uuid")))
            for g in facts.get("gpufleet_gpus") or []
        ]
        missing = cdi_spec.missing_gpus(devices, gpus)
        c.evidence.append(
            Evidence(
                f"{h['host']}: CDI specs",
                f"{len(h.get('cdi') or [])} file(s), {len(devices)} device(s)",
            )
        )
        if missing:
            text = cdi_spec.missing_message(
                missing, devices, GPU_KIND, sorted(cc.DEFAULT_CDI_SPEC_DIRS)
            )
            if not any(d.kind == GPU_KIND for d in devices):
                text += (
                    f"; no spec holds any {GPU_KIND} device: nvidia-ctk found no GPU when it "
                    "wrote them (the driver was not loaded, or --driver-root/--dev-root did not "
                    "point at the driver and at /dev/nvidia*)"
                )
            c.problem(h["host"], FAIL, text)
    if judged == 0 and not c.problems:
        return skipped(
            c.id,
            c.title,
            "no GPU node has the NVIDIA Container Toolkit (simulated GPUs or toolkit absent)",
            c.evidence,
        )
    c.fix = "; ".join(dict.fromkeys(cdi_rules.generate_command(r) for r in (roots or [None]))) + (
        " (--dev-root=/: the device nodes are in the host's /dev; without it nvidia-ctk looks "
        "under the driver root's dev/), then restart the pods that use the GPUs"
    )
    return finish(c, f"every GPU UUID has a CDI device with its device nodes on {judged} node(s)")


def _host_devices(h: Mapping[str, Any]) -> Any:
    """``host_has`` for ``nvidia.cdi_spec.gpu_problems``: whether the host's /dev has a node
    the validate role looked for (``nvidia[0-9]*``, ``nvidiactl``, ``nvidia-uvm``); None for
    any other path, or when /dev was not read."""
    rec = h.get("driver_root")
    if not isinstance(rec, Mapping) or not rec.get("read") or rec.get("error"):
        return None
    have = set((rec.get("devices") or {}).get("/dev") or [])

    def host_has(path: str) -> bool | None:
        directory, _, name = str(path).rpartition("/")
        if directory != "/dev" or not vdr.looked_for_device_node(name):
            return None
        return name in have

    return host_has


def _cdi_specs(c: Check, h: Mapping[str, Any], roots: list[str | None]) -> list[cdi_spec.CdiDevice]:
    """The devices of the host's CDI specs; each spec of NVIDIA's GPU kind judged as the
    CDI library loads it and as a container with a GPU needs it (``nvidia.cdi_spec``),
    its driver root added to ``roots``."""
    devices: list[cdi_spec.CdiDevice] = []
    host_has = _host_devices(h)
    for f in h.get("cdi") or []:
        path = str(f.get("path"))
        try:
            doc = _load(f.get("content", ""))
        except ValueError as err:
            c.problem(h["host"], WARN, f"{path}: not YAML or JSON ({err})")
            continue
        devices += cdi_spec.devices_of(doc, path)
        if not isinstance(doc, Mapping) or doc.get("kind") != GPU_KIND:
            continue
        roots.append(cdi_rules.spec_driver_root(doc))
        refused = cdi_rules.library_problems(doc)
        for problem in refused:
            c.problem(
                h["host"],
                FAIL,
                f"{path}: the CDI library refuses the spec ({problem}), so no device of it "
                "reaches a container",
            )
        for problem in [] if refused else cdi_rules.gpu_problems(doc, host_has):
            c.problem(h["host"], FAIL, f"{path}: {problem}")
    return devices


def _load(text: str) -> Any:
    """JSON or YAML output of a host command; ValueError (first line of the reason) for
    text that is neither, or nests deeper than ``common.limits.MAX_DEPTH``."""
    from ansible_collections.gpufleet.cluster.plugins.module_utils.common import limits as ig

    text = str(text)
    try:
        return ig.load_json(text, "the output")
    except ig.ShapeError:
        raise
    except ig.InputError:
        pass
    try:
        return ig.load_yaml(text, "the output")
    except ig.InputError as err:
        raise ValueError(str(err).splitlines()[0]) from None


def _held(hosts: Sequence[Mapping[str, Any]]) -> Check:
    c = Check("versions.packages-held", "kubeadm and kubelet packages held")
    judged = 0
    for h in hosts:
        _, out, _ = _out(h.get("packages"))
        installed = {}
        for line in out.splitlines():
            parts = line.split()
            if (
                len(parts) >= 2
                and parts[0] in PACKAGES
                and line.rstrip().endswith("installed")
                and "not-installed" not in line
            ):
                installed[parts[0]] = parts[1]
        if not installed:
            c.evidence.append(
                Evidence(f"{h['host']}: dpkg-query", "kubeadm/kubelet not installed from packages")
            )
            continue
        judged += 1
        _, hold_out, _ = _out(h.get("holds"))
        held = set(hold_out.split())
        c.evidence.append(
            Evidence(
                f"{h['host']}: dpkg-query, apt-mark showhold",
                f"installed {installed}, held {sorted(held & set(PACKAGES))}",
            )
        )
        for p in sorted(installed):
            if p not in held:
                c.problem(
                    h["host"],
                    FAIL,
                    f"package {p} {installed[p]} is not held: an unattended upgrade can move it "
                    "past the control plane's version",
                )
    if judged == 0:
        return skipped(
            c.id,
            c.title,
            "kubeadm and kubelet are not installed from packages on any host",
            c.evidence,
        )
    c.fix = "apt-mark hold kubeadm kubelet kubectl (the kubeadm role holds them)"
    return finish(c, f"kubeadm/kubelet held on {judged} host(s)")


def kubeadm_versions(hosts: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """Host -> ``kubeadm version -o short`` where it answered."""
    out = {}
    for h in hosts:
        rc, text, _ = _out(h.get("kubeadm_version"))
        m = re.search(r"v?(\d+\.\d+\.\d+)", text)
        if rc == 0 and m:
            out[str(h["host"])] = m.group(1)
    return out


def _driver_order(version: str) -> tuple[int, ...]:
    """``driver_version_key`` of ``version``, or () when it cannot be read (it sorts
    first and is reported as unreadable)."""
    try:
        return tuple(driver_version_key(version))
    except ValueError:
        return ()
