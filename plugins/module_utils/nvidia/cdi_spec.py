# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""A CDI spec judged as the CDI library judges it, and as a container given one of its GPU
devices needs it.

Pure Python, over a parsed spec (a mapping, as YAML or JSON gives it).

``library_problems``: what ``tags.cncf.io/container-device-interface`` v1.1.1 refuses when
it loads a spec (``pkg/cdi/spec.go`` ``ReadSpec``/``validate``, ``pkg/cdi/device.go``
``validate``, ``pkg/cdi/container-edits.go`` ``Validate``, ``pkg/parser/parser.go`` name
rules, ``specs-go/version.go`` ``ValidateVersion``, the field names of
``specs-go/config.go`` that its decoder accepts). containerd and CRI-O load specs with that
library: a refused spec gives no device at all, and the DRA kubelet plugin's per-claim
specs fail at prepare time with the library's message ("invalid device, empty device
edits"). Rules of the library not mirrored here: annotation key syntax, the v1.1.0 net
device rules beyond empty names, the version requirements of fields added after 0.7.0.

``gpu_problems``: what the library accepts but leaves a container without a GPU: a GPU
device (kind ``nvidia.com/gpu``) without its ``/dev/nvidia<N>`` device node, the control
nodes (``/dev/nvidiactl``, ``/dev/nvidia-uvm``) missing from the device and the spec's
common edits, and device nodes whose host path (``hostPath``, else ``path``) the host
lacks (the library stats it when it injects the device and fails, unless the node gives
its type and major number: ``pkg/cdi/container-edits_unix.go`` ``fillMissingInfo``).
``nvidia-ctk cdi generate --driver-root=DIR`` without ``--dev-root`` writes such a spec
when ``DIR/dev`` is empty: it looks for the device nodes there and only warns.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

__all__ = [
    "CDI_VERSIONS",
    "CONTROL_NODES",
    "GPU_KIND",
    "generate_argv",
    "generate_command",
    "gpu_problems",
    "library_problems",
    "spec_driver_root",
]

GPU_KIND = "nvidia.com/gpu"
#: specs-go/version.go ``validSpecVersions``, oldest first.
CDI_VERSIONS = (
    "0.1.0",
    "0.2.0",
    "0.3.0",
    "0.4.0",
    "0.5.0",
    "0.6.0",
    "0.7.0",
    "0.8.0",
    "1.0.0",
    "1.1.0",
)
#: Device nodes every container with an NVIDIA GPU needs besides its ``/dev/nvidia<N>``.
CONTROL_NODES = ("/dev/nvidiactl", "/dev/nvidia-uvm")
_GPU_NODE = re.compile(r"^/dev/nvidia[0-9]+$")
_SPEC_FIELDS = {"cdiVersion", "kind", "annotations", "devices", "containerEdits"}
_DEVICE_FIELDS = {"name", "annotations", "containerEdits"}
_EDIT_FIELDS = {
    "env",
    "deviceNodes",
    "netDevices",
    "hooks",
    "mounts",
    "intelRdt",
    "additionalGids",
}
_NODE_FIELDS = {
    "path",
    "hostPath",
    "type",
    "major",
    "minor",
    "fileMode",
    "permissions",
    "uid",
    "gid",
}
_HOOK_NAMES = {
    "prestart",
    "createRuntime",
    "createContainer",
    "startContainer",
    "poststart",
    "poststop",
}


def _alnum(c: str) -> bool:
    return c.isascii() and c.isalnum()


def _name_problem(name: str, what: str, extra: str, first: Callable[[str], bool]) -> str | None:
    """The parser's rule: a first character ``first`` accepts, alphanumerics or ``extra``
    inside, an alphanumeric last."""
    if name == "":
        return f"invalid (empty) {what} name"
    if not first(name[0]):
        return f"invalid {what} {name!r}: it must start with a letter" + (
            " or digit" if what == "device" else ""
        )
    for c in name[1:-1]:
        if not (_alnum(c) or c in extra):
            return f"invalid character {c!r} in {what} name {name!r}"
    if len(name) > 1 and not _alnum(name[-1]):
        return f"invalid {what} name {name!r}: it must end with a letter or digit"
    return None


def _device_name_problem(name: str) -> str | None:
    return _name_problem(name, "device", "_-.:", _alnum)


def _kind_problems(kind: Any) -> list[str]:
    vendor, sep, cls = str(kind or "").partition("/")
    if not kind or not isinstance(kind, str) or not sep or not vendor or not cls:
        return [f"invalid kind {kind!r}: it must be vendor/class, e.g. {GPU_KIND}"]
    letter = lambda c: c.isascii() and c.isalpha()  # noqa: E731
    return [
        p
        for p in (
            _name_problem(vendor, "vendor", "_-.", letter),
            _name_problem(cls, "class", "_-.", letter),
        )
        if p
    ]


def _env_problems(env: Any, where: str) -> list[str]:
    if env is None:
        return []
    if not isinstance(env, list):
        return [f"{where}: env must be a list of NAME=VALUE strings"]
    return [
        f"{where}: invalid environment variable {v!r}"
        for v in env
        if not isinstance(v, str) or v.find("=") <= 0
    ]


def _node_problem(node: Any) -> str | None:
    if not isinstance(node, Mapping):
        return "a device node must be a mapping"
    unknown = sorted(set(map(str, node)) - _NODE_FIELDS)
    if unknown:
        return f"device node field {unknown[0]!r} is not a CDI field"
    path = node.get("path")
    if not path:
        return "invalid (empty) device path"
    if str(node.get("type") or "") not in ("", "b", "c", "u", "p"):
        return f"device {path!r}: invalid type {node.get('type')!r}"
    perms = str(node.get("permissions") or "")
    if perms.strip("rwm"):
        return f"device {path!r}: invalid permissions {perms!r}"
    return None


def _list_of(edits: Mapping[str, Any], key: str) -> list[Any]:
    v = edits.get(key)
    return v if isinstance(v, list) else []


def _edit_problems(edits: Any, where: str) -> list[str]:
    """``ContainerEdits.Validate`` over one containerEdits mapping."""
    if edits is None:
        return []
    if not isinstance(edits, Mapping):
        return [f"{where}: containerEdits must be a mapping"]
    out = [f"{where}: field {k!r} is not a CDI field" for k in sorted(set(edits) - _EDIT_FIELDS)]
    for key in ("deviceNodes", "hooks", "mounts", "netDevices", "additionalGids"):
        if edits.get(key) is not None and not isinstance(edits.get(key), list):
            out.append(f"{where}: {key} must be a list")
    out += _env_problems(edits.get("env"), where)
    out += [f"{where}: {p}" for p in map(_node_problem, _list_of(edits, "deviceNodes")) if p]
    for h in _list_of(edits, "hooks"):
        h = h if isinstance(h, Mapping) else {}
        if h.get("hookName") not in _HOOK_NAMES:
            out.append(f"{where}: invalid hook name {h.get('hookName')!r}")
        elif not h.get("path"):
            out.append(f"{where}: invalid hook {h.get('hookName')!r} with empty path")
        else:
            out += _env_problems(h.get("env"), f"{where}: hook {h.get('hookName')!r}")
    for m in _list_of(edits, "mounts"):
        m = m if isinstance(m, Mapping) else {}
        if not m.get("hostPath"):
            out.append(f"{where}: invalid mount, empty host path")
        elif not m.get("containerPath"):
            out.append(f"{where}: invalid mount, empty container path")
    for n in _list_of(edits, "netDevices"):
        n = n if isinstance(n, Mapping) else {}
        if not n.get("hostInterfaceName") or not n.get("name"):
            out.append(f"{where}: invalid linux net device, empty HostInterfaceName or Name")
    return out


def _empty(edits: Any) -> bool:
    """``ContainerEdits.isEmpty``: nothing the runtime would change."""
    if not isinstance(edits, Mapping):
        return True
    keys = ("env", "deviceNodes", "hooks", "mounts", "additionalGids", "netDevices")
    return not any(edits.get(k) for k in keys) and edits.get("intelRdt") is None


def _required_version(spec: Mapping[str, Any], devices: list[Mapping[str, Any]]) -> str:
    """The lowest cdiVersion that allows what ``spec`` uses (``specs-go/version.go``: a
    device name starting with a digit or a ``hostPath`` needs 0.5.0, annotations or a dot
    in the class 0.6.0, ``intelRdt`` or ``additionalGids`` 0.7.0, ``netDevices`` 1.1.0)."""
    edits = [d.get("containerEdits") for d in devices] + [spec.get("containerEdits")]
    edits = [e for e in edits if isinstance(e, Mapping)]
    if any(e.get("netDevices") for e in edits):
        return "1.1.0"
    if any(e.get("intelRdt") is not None or e.get("additionalGids") for e in edits):
        return "0.7.0"
    cls = str(spec.get("kind") or "").partition("/")[2]
    if spec.get("annotations") or any(d.get("annotations") for d in devices) or "." in cls:
        return "0.6.0"
    digit = any(str(d.get("name") or "")[:1].isdigit() for d in devices)
    host_path = any(
        isinstance(n, Mapping) and n.get("hostPath")
        for e in edits
        for n in _list_of(e, "deviceNodes")
    )
    if digit or host_path:
        return "0.5.0"
    if any(isinstance(m, Mapping) and m.get("type") for e in edits for m in _list_of(e, "mounts")):
        return "0.4.0"
    return "0.1.0"


def _version_problems(spec: Mapping[str, Any], devices: list[Mapping[str, Any]]) -> list[str]:
    version = str(spec.get("cdiVersion") or "").removeprefix("v")
    if version not in CDI_VERSIONS:
        return [f"invalid cdiVersion {spec.get('cdiVersion')!r} (known: {', '.join(CDI_VERSIONS)})"]
    need = _required_version(spec, devices)
    if CDI_VERSIONS.index(need) > CDI_VERSIONS.index(version):
        return [f"cdiVersion {version} is too old for what the spec uses: it needs {need}"]
    return []


def library_problems(spec: Any) -> list[str]:
    """Why the CDI library refuses ``spec`` (see the module docstring), first the spec's
    own fields, then each device in order; [] when it loads it. A device problem starts
    with ``device <name>:``."""
    if not isinstance(spec, Mapping):
        return ["no Spec data: a CDI spec is a mapping with cdiVersion, kind and devices"]
    out = [f"field {k!r} is not a CDI spec field" for k in sorted(set(spec) - _SPEC_FIELDS)]
    raw = spec.get("devices")
    if raw is not None and not isinstance(raw, list):
        return [*out, "devices must be a list"]
    devices = [d for d in raw or [] if isinstance(d, Mapping)]
    if len(devices) != len(raw or []):
        out.append("each entry of devices must be a mapping")
    out += _version_problems(spec, devices)
    out += _kind_problems(spec.get("kind"))
    out += _edit_problems(spec.get("containerEdits"), "containerEdits")
    seen: set[str] = set()
    for d in devices:
        name = str(d.get("name") if d.get("name") is not None else "")
        where = f"device {name!r}"
        unknown = sorted(set(map(str, d)) - _DEVICE_FIELDS)
        problem = _device_name_problem(name)
        if unknown:
            out.append(f"{where}: field {unknown[0]!r} is not a CDI device field")
        if problem:
            out.append(f"{where}: {problem}")
        elif _empty(d.get("containerEdits")):
            out.append(f"{where}: invalid device, empty device edits")
        else:
            out += _edit_problems(d.get("containerEdits"), where)
        if name in seen:
            out.append(f"invalid spec, multiple device {name!r}")
        seen.add(name)
    if not devices:
        out.append("invalid spec, no devices")
    return out


def _minimal(node: Mapping[str, Any]) -> bool:
    """A device node the library injects without its host path (``container-edits_unix.go``
    ``fillMissingInfo``: a type, and a major number unless it is a fifo)."""
    kind = str(node.get("type") or "")
    return bool(kind) and (bool(node.get("major")) or kind == "p")


def _node_paths(edits: Any) -> list[tuple[str, str, bool]]:
    """(path in the container, path on the host, whether the host path must exist) of
    each device node of ``edits``."""
    if not isinstance(edits, Mapping):
        return []
    return [
        (str(n["path"]), str(n.get("hostPath") or n["path"]), not _minimal(n))
        for n in _list_of(edits, "deviceNodes")
        if isinstance(n, Mapping) and n.get("path")
    ]


def gpu_problems(spec: Any, host_has: Callable[[str], bool | None] | None = None) -> list[str]:
    """Why a container given a GPU device of ``spec`` (kind ``nvidia.com/gpu``; other
    kinds give []) has no usable GPU, per device: no ``/dev/nvidia<N>`` node, a control
    node (``CONTROL_NODES``) neither in the device nor in the common edits, a device node
    whose host path ``host_has`` says is absent (None: not known, not judged). A spec
    without any device of the kind gets one problem saying so."""
    if not isinstance(spec, Mapping) or spec.get("kind") != GPU_KIND:
        return []
    common = _node_paths(spec.get("containerEdits"))
    devices = [d for d in spec.get("devices") or [] if isinstance(d, Mapping)]
    if not devices:
        return [
            "the spec lists no GPU device: nvidia-ctk found no GPU when it wrote it (driver not "
            "loaded, or --driver-root/--dev-root not where the driver and /dev/nvidia* are)"
        ]
    out: list[str] = []
    absent: set[str] = set()
    for d in devices:
        where = f"device {d.get('name')!r}"
        nodes = _node_paths(d.get("containerEdits")) + common
        paths = {p for p, _, _ in nodes}
        if not any(_GPU_NODE.match(p) for p in paths):
            out.append(f"{where} has no /dev/nvidia<N> device node: the container sees no GPU")
        lacking = [n for n in CONTROL_NODES if n not in paths]
        if lacking:
            out.append(f"{where} and the common edits lack {', '.join(lacking)}")
        for path, host, needed in nodes:
            if not needed or host in absent or host_has is None or host_has(host) is not False:
                continue
            absent.add(host)
            out.append(
                f"{where}: device node {path} comes from {host}, which this host lacks (the "
                "CDI library fails to inject it: failed to stat CDI host device)"
            )
    return out


def spec_driver_root(spec: Any) -> str | None:
    """The driver root ``nvidia-ctk`` wrote ``spec`` for: the value after ``--driver-root``
    in its first hook that has one ("" there means /); None when no hook says."""
    if not isinstance(spec, Mapping):
        return None
    edits = [spec.get("containerEdits")] + [
        d.get("containerEdits") for d in spec.get("devices") or [] if isinstance(d, Mapping)
    ]
    for e in edits:
        for h in _list_of(e, "hooks") if isinstance(e, Mapping) else []:
            args = h.get("args") if isinstance(h, Mapping) else None
            if isinstance(args, list) and "--driver-root" in args[:-1]:
                return str(args[args.index("--driver-root") + 1] or "/")
    return None


def generate_argv(
    driver_root: str | None = "/",
    dev_root: str | None = "/",
    output: str = "/var/run/cdi/nvidia.yaml",
) -> list[str]:
    """``nvidia-ctk cdi generate`` argv that writes a spec with GPU devices by index and
    UUID to ``output``. With a driver root other than ``/`` it passes ``--driver-root`` and
    always ``--dev-root`` with it (``dev_root``, default ``/``): without ``--dev-root``
    nvidia-ctk (1.20, ``cmd/nvidia-ctk/cdi/generate/generate.go``) takes the device nodes
    from ``<driver-root>/dev``, and a driver installed under a prefix has an empty or no
    ``dev/`` there. Raises ValueError for a relative path."""
    for name, value in (("driver root", driver_root), ("dev root", dev_root), ("output", output)):
        if value and not str(value).startswith("/"):
            raise ValueError(f"the {name} {value!r} is not an absolute path")
    root = (driver_root or "/").rstrip("/") or "/"
    flags = [] if root == "/" else [f"--driver-root={root}", f"--dev-root={dev_root or '/'}"]
    return [
        "nvidia-ctk",
        "cdi",
        "generate",
        *flags,
        "--device-name-strategy=index",
        "--device-name-strategy=uuid",
        f"--output={output}",
    ]


def generate_command(driver_root: str | None, output: str = "/var/run/cdi/nvidia.yaml") -> str:
    """The fix for a spec without device nodes: regenerate it with ``--dev-root=/`` (the
    host's ``/dev``) and the driver root it was written for."""
    argv = generate_argv(driver_root, "/", output)
    if "--dev-root=/" not in argv:
        argv.insert(3, "--dev-root=/")
    return " ".join(argv)
