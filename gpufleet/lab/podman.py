"""Podman on the lab machine, and the lab node image.

The lab runs Kubernetes nodes as privileged podman containers with systemd as PID 1,
from ``localhost/gpufleet-node:<tag>``: a Debian bookworm root filesystem built by
``lab/prepare-podman`` with debootstrap from the recipe in ``lab/image/`` (no registry is
involved). The tag is a hash of the recipe (:func:`recipe_tag`), so a changed recipe
names a new image and an unchanged one is reused.

What this module gives the rest of the lab:

- :func:`node_image_ref`, :func:`image_present`: which image the current recipe names
  and whether podman has it.
- :func:`containers_conf_ok`: whether podman's effective settings are the ones this kind
  of machine needs (runtime runc, default ulimits within the sandbox's ceilings).
- :func:`node_run_args`: the exact ``podman run`` arguments that boot a node, and
  :func:`wait_for_boot` to wait for its systemd.

Host layout these settings were found on (Debian 12 in a Firecracker VM, podman 4.3.1,
runc 1.1.5, kernel 6.18):

- PID 1 of the host is not systemd, so podman uses ``cgroup_manager = "cgroupfs"`` and
  ``events_logger = "file"`` (no journald).
- cgroup v1, "hybrid": the v1 controllers cpu, cpuacct, cpuset, memory, devices,
  freezer, blkio, pids and the ``name=systemd`` hierarchy under ``/sys/fs/cgroup/<name>``,
  and a cgroup2 mount at ``/sys/fs/cgroup/unified`` with no controllers in it.
  ``podman info`` reports ``cgroupVersion: v1``. Containers land in
  ``/libpod_parent/libpod-<id>`` of every hierarchy.
- The process limits are capped: the bounding set lacks CAP_SYS_RESOURCE and podman's
  child processes run with at most nofile 20000 and nproc 32768. Podman's root defaults
  (both at the kernel maximum) make every container fail with
  ``runc create failed: ... error setting rlimit type 7: operation not permitted``
  (type 7 is RLIMIT_NOFILE; ``type 6``, RLIMIT_NPROC, for any nproc above 32768), hence
  ``default_ulimits = ["nofile=20000:20000", "nproc=32768:32768"]``.
- ``runtime = "runc"`` is the project's pin (design.md: crun was seen refusing this
  sandbox's cgroup layout). Debian's crun 1.8.1 did start plain containers and lab nodes
  (``--systemd=always`` and the flags below) when tried here, so runc is kept for
  one runtime on both levels (the nodes run runc inside) rather than as a workaround
  that is needed on every such machine. Podman's built-in default is crun
  (``#runtime = "crun"`` in /usr/share/containers/containers.conf), so the setting
  matters once crun is installed; prepare-podman installs runc only.
- Storage: the ``overlay`` driver with native overlay diff works on the ext4 root
  (``podman info``: ``Native Overlay Diff: "true"``); no fuse-overlayfs or vfs needed.

How a node boots here (each alternative tried, with what went wrong):

- ``--systemd=always`` with the default cgroup namespace (host, on v1): systemd boots,
  but podman bind-mounts each controller's container subtree at
  ``/sys/fs/cgroup/<controller>`` while ``/proc/self/cgroup`` shows the full host path
  ``/libpod_parent/libpod-<id>``; the paths do not resolve and systemd cannot give its
  services their own cgroups (``containerd.service`` stays in the container's root memory
  and cpu cgroups). Kubelet's cgroup manager would look in the wrong place.
- ``--systemd=always --cgroupns=private``: podman's extra ``name=systemd`` mount is a
  bind of the host's hierarchy root (``FSROOT /../..``), so each node's systemd puts
  ``/init.scope`` and ``/system.slice`` at the host's ``name=systemd`` root, shared by
  every node.
- ``--systemd=false --cgroupns=private`` with tmpfs on /run, /run/lock and /tmp, the
  ``container=podman`` environment and stop signal SIGRTMIN+3 (what podman's systemd
  mode would add, minus its cgroup mounts): every hierarchy is mounted at the namespace
  root, systemd mounts ``name=systemd`` (and hugetlb, net_cls,net_prio, perf_event and
  the unified cgroup2) itself, ``/proc/1/cgroup`` reads ``/init.scope`` and containerd
  runs in ``/system.slice/containerd.service`` of every controller, as on a real host.
  Two nodes side by side stay apart. This is what :func:`node_run_args` uses.
- containerd's default overlayfs snapshotter cannot use the node's own overlay root as
  upperdir (``ctr: failed to mount /tmp/containerd-mount...: invalid argument``; kernel:
  ``overlay: filesystem on .../snapshots/2/work not supported as upperdir``), so
  ``/var/lib/containerd`` is a podman volume (ext4 underneath). Without the volume only
  the native snapshotter works.

Sources: containers.conf(5) of containers-common (file order, ``default_ulimits``);
``systemConfigs()`` in containers/common ``pkg/config/config.go`` (the order in which
podman reads its config files); podman-run(1) (``--systemd``, ``--cgroupns``,
``--tmpfs``); the measurements above.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import time
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpufleet.build.binaries import cache_root

__all__ = [
    "MAX_NOFILE",
    "MAX_NPROC",
    "NODE_IMAGE_REPOSITORY",
    "RECIPE_DIR",
    "PodmanError",
    "PodmanHost",
    "RecipeFile",
    "Ulimit",
    "check_settings",
    "containers_conf_ok",
    "containers_conf_paths",
    "effective_default_ulimits",
    "image_present",
    "node_image_ref",
    "node_image_tarball",
    "node_run_args",
    "node_system_state",
    "parse_podman_info",
    "parse_ulimit",
    "podman_info",
    "recipe_files",
    "recipe_tag",
    "tag_from_files",
    "wait_for_boot",
]

#: Repository root (this file is ``gpufleet/lab/podman.py``).
REPO_ROOT = Path(__file__).resolve().parents[2]
#: The node image recipe: package list, rootfs build script, files copied into the image.
RECIPE_DIR = REPO_ROOT / "lab" / "image"
NODE_IMAGE_REPOSITORY = "localhost/gpufleet-node"
#: First line of the recipe listing; bump it when the listing format changes.
RECIPE_FORMAT = "gpufleet-node-recipe/1"
TAG_LENGTH = 12

#: Highest RLIMIT_NOFILE (soft and hard) a container may get on this kind of machine:
#: ``--ulimit nofile=20001:20001`` fails with "error setting rlimit type 7".
MAX_NOFILE = 20000
#: Highest RLIMIT_NPROC a container may get: 32769 fails with "error setting rlimit type 6".
MAX_NPROC = 32768
#: The ulimits podman must apply by default; without them it asks for the kernel maximum.
REQUIRED_ULIMITS: Mapping[str, int] = {"nofile": MAX_NOFILE, "nproc": MAX_NPROC}
REQUIRED_RUNTIME = "runc"

#: containers.conf files of a root podman, in the order podman reads them
#: (containers/common pkg/config/config.go, systemConfigs()).
CONTAINERS_CONF_DEFAULT = Path("/usr/share/containers/containers.conf")
CONTAINERS_CONF_OVERRIDE = Path("/etc/containers/containers.conf")

#: Label on every lab node container, so the lab can list and clean them up.
NODE_LABEL = "io.gpufleet.lab-node"
#: Where containerd keeps images and snapshots inside a node (a volume, see module doc).
CONTAINERD_STATE_DIR = "/var/lib/containerd"

_CONTAINER_NAME_RE = re.compile(r"^[a-zA-Z0-9][a-zA-Z0-9_.-]*\Z")
_HOSTNAME_RE = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\Z")
_PREPARE_FIX = "run lab/prepare-podman as root"


class PodmanError(RuntimeError):
    """A podman command failed; the message carries the command and its stderr."""


# --------------------------------------------------------------------------- recipe tag


@dataclass(frozen=True)
class RecipeFile:
    """One file of the image recipe.

    ``path`` is relative to the recipe directory with ``/`` separators, ``executable``
    whether any execute bit is set, ``sha256`` the hex digest of its content.
    """

    path: str
    executable: bool
    sha256: str


def tag_from_files(files: Iterable[RecipeFile]) -> str:
    """Image tag (12 lowercase hex digits) of a recipe given as its files.

    The listing hashed is ``RECIPE_FORMAT`` followed by one line per file, sorted by the
    UTF-8 bytes of the path: ``"<sha256> <755|644> <path>\\n"``. ``lab/prepare-podman``
    computes the same listing with find/sort/sha256sum, so both name the same image.
    """
    lines = [RECIPE_FORMAT + "\n"]
    for f in sorted(files, key=lambda f: f.path.encode()):
        lines.append(f"{f.sha256} {'755' if f.executable else '644'} {f.path}\n")
    return hashlib.sha256("".join(lines).encode()).hexdigest()[:TAG_LENGTH]


def recipe_files(recipe_dir: Path = RECIPE_DIR) -> list[RecipeFile]:
    """Every regular file under ``recipe_dir`` (symlinks are neither followed nor listed).

    Raises ``FileNotFoundError`` when ``recipe_dir`` does not exist (an installed wheel
    has no ``lab/``; the image recipe lives in a checkout).
    """
    if not recipe_dir.is_dir():
        raise FileNotFoundError(
            f"node image recipe directory {recipe_dir} not found; "
            "node images are built from a gpufleet checkout (lab/image/)"
        )
    files = []
    for root, dirs, names in os.walk(recipe_dir):
        dirs[:] = [d for d in dirs if not (Path(root) / d).is_symlink()]
        for name in names:
            p = Path(root) / name
            if p.is_symlink() or not p.is_file():
                continue
            files.append(
                RecipeFile(
                    path=p.relative_to(recipe_dir).as_posix(),
                    executable=bool(p.stat().st_mode & 0o111),
                    sha256=hashlib.sha256(p.read_bytes()).hexdigest(),
                )
            )
    return files


def recipe_tag(recipe_dir: Path = RECIPE_DIR) -> str:
    """Tag of the node image built from ``recipe_dir`` (see :func:`tag_from_files`)."""
    return tag_from_files(recipe_files(recipe_dir))


def node_image_ref(recipe_dir: Path = RECIPE_DIR) -> str:
    """``localhost/gpufleet-node:<tag>`` for the current recipe in ``lab/image/``.

    Raises ``FileNotFoundError`` when the recipe directory is missing.
    """
    return f"{NODE_IMAGE_REPOSITORY}:{recipe_tag(recipe_dir)}"


def node_image_tarball(tag: str, cache: Path | None = None) -> Path:
    """Cached rootfs tarball of image ``tag``:
    ``${GPUFLEET_CACHE:-~/.cache/gpufleet}/images/gpufleet-node-<tag>.tar.zst``."""
    return (cache or cache_root()) / "images" / f"gpufleet-node-{tag}.tar.zst"


# --------------------------------------------------------------------------- podman info


@dataclass(frozen=True)
class PodmanHost:
    """The parts of ``podman info --format json`` the lab depends on.

    Field sources (podman 4.3 JSON keys): ``version.Version``, ``host.ociRuntime.name`` /
    ``.path``, ``host.cgroupVersion`` ("v1"/"v2"), ``host.cgroupManager``
    ("cgroupfs"/"systemd"), ``host.eventLogger``, ``host.networkBackend``,
    ``store.graphDriverName``, ``host.security.rootless``.
    """

    version: str
    runtime: str
    runtime_path: str
    cgroup_version: str
    cgroup_manager: str
    event_logger: str
    network_backend: str
    storage_driver: str
    rootless: bool


def parse_podman_info(data: Mapping[str, Any]) -> PodmanHost:
    """Read a :class:`PodmanHost` from the decoded JSON of ``podman info --format json``.

    Raises ``ValueError`` naming the missing key when the document lacks one of the
    fields above (an older or newer podman with another layout).
    """

    def get(*keys: str) -> Any:
        node: Any = data
        for i, k in enumerate(keys):
            if not isinstance(node, Mapping) or k not in node:
                raise ValueError(
                    f"podman info JSON has no '{'.'.join(keys[: i + 1])}' "
                    "(expected the podman 4.x layout of `podman info --format json`)"
                )
            node = node[k]
        return node

    security = data.get("host", {}).get("security", {})
    return PodmanHost(
        version=str(get("version", "Version")),
        runtime=str(get("host", "ociRuntime", "name")),
        runtime_path=str(get("host", "ociRuntime", "path")),
        cgroup_version=str(get("host", "cgroupVersion")),
        cgroup_manager=str(get("host", "cgroupManager")),
        event_logger=str(get("host", "eventLogger")),
        network_backend=str(data.get("host", {}).get("networkBackend", "")),
        storage_driver=str(get("store", "graphDriverName")),
        rootless=bool(security.get("rootless", False)),
    )


def podman_info(podman: str = "podman") -> dict[str, Any]:
    """Decoded JSON of ``podman info --format json``.

    Raises ``PodmanError`` when podman is missing or the command fails (the message
    carries podman's stderr, e.g. a containers.conf parse error).
    """
    out = _podman([podman, "info", "--format", "json"])
    try:
        return json.loads(out)
    except json.JSONDecodeError as e:
        raise PodmanError(f"`{podman} info --format json` printed no JSON: {e}") from e


# --------------------------------------------------------------------------- containers.conf


@dataclass(frozen=True)
class Ulimit:
    """One ``default_ulimits`` entry, ``name=soft:hard`` (counts; -1 means unlimited)."""

    name: str
    soft: int
    hard: int


def parse_ulimit(entry: str) -> Ulimit:
    """Parse ``"nofile=20000:20000"`` (or ``"nofile=20000"``: hard = soft).

    Raises ``ValueError`` naming the entry and the expected form.
    """
    m = re.fullmatch(r"\s*([a-z]+)\s*=\s*(-?\d+)(?::(-?\d+))?\s*", entry)
    if not m:
        raise ValueError(
            f"default_ulimits entry {entry!r} is not of the form name=soft:hard "
            '(e.g. "nofile=20000:20000")'
        )
    soft = int(m.group(2))
    hard = int(m.group(3)) if m.group(3) is not None else soft
    return Ulimit(m.group(1), soft, hard)


def containers_conf_paths(
    env: Mapping[str, str] | None = None,
    *,
    default: Path = CONTAINERS_CONF_DEFAULT,
    override: Path = CONTAINERS_CONF_OVERRIDE,
    rootless_home: Path | None = None,
) -> list[Path]:
    """containers.conf files podman reads, lowest priority first, that exist.

    ``$CONTAINERS_CONF`` alone when set; otherwise ``/usr/share/containers/containers.conf``,
    ``/etc/containers/containers.conf``, ``/etc/containers/containers.conf.d/*.conf``
    (sorted), and for a rootless user ``~/.config/containers/containers.conf`` and its
    ``.d``. Source: containers/common ``pkg/config/config.go``, ``systemConfigs()`` and
    ``addConfigs()``.
    """
    env = os.environ if env is None else env
    if env.get("CONTAINERS_CONF"):
        return [Path(env["CONTAINERS_CONF"])]
    paths = [p for p in (default, override) if p.is_file()]
    paths += _conf_d(override)
    if rootless_home is not None:
        user = rootless_home / ".config" / "containers" / "containers.conf"
        if user.is_file():
            paths.append(user)
        paths += _conf_d(user)
    return paths


def _conf_d(conf: Path) -> list[Path]:
    d = conf.with_name(conf.name + ".d")
    if not d.is_dir():
        return []
    return sorted((p for p in d.iterdir() if p.name.endswith(".conf") and p.is_file()), key=str)


def effective_default_ulimits(layers: Sequence[Mapping[str, Any]]) -> list[str] | None:
    """``containers.default_ulimits`` after podman merges ``layers`` (parsed TOML documents,
    lowest priority first): the last layer that sets the key wins, the list is replaced,
    not appended. ``None`` when no layer sets it (podman then uses its built-in defaults).
    """
    result: list[str] | None = None
    for doc in layers:
        containers = doc.get("containers")
        if isinstance(containers, Mapping) and "default_ulimits" in containers:
            result = [str(x) for x in containers["default_ulimits"]]
    return result


def check_settings(
    host: PodmanHost,
    default_ulimits: Sequence[str] | None,
    *,
    ceilings: Mapping[str, int] = REQUIRED_ULIMITS,
    runtime: str = REQUIRED_RUNTIME,
) -> list[str]:
    """Problems with podman's effective settings, each a sentence with the fix; empty
    when the runtime is ``runtime`` and every limit in ``ceilings`` is set by
    ``default_ulimits`` with soft <= hard <= ceiling (and not unlimited).

    Raises ``ValueError`` for a malformed ``default_ulimits`` entry.
    """
    problems = []
    if host.runtime != runtime:
        problems.append(
            f"OCI runtime is {host.runtime!r} ({host.runtime_path}), expected {runtime!r}: "
            f'set runtime = "{runtime}" in [engine] of containers.conf'
        )
    parsed = {u.name: u for u in (parse_ulimit(e) for e in default_ulimits or ())}
    for name, ceiling in ceilings.items():
        u = parsed.get(name)
        want = f'"{name}={ceiling}:{ceiling}"'
        if u is None:
            problems.append(
                f"default_ulimits does not set {name} (podman then asks for the kernel "
                f"maximum, which this machine refuses): add {want}"
            )
        elif u.hard < 0 or u.soft < 0 or u.hard > ceiling or u.soft > u.hard:
            problems.append(
                f"default_ulimits {name}={u.soft}:{u.hard} exceeds what this machine "
                f"grants ({ceiling}): use {want}"
            )
    return problems


def containers_conf_ok(
    podman: str = "podman",
    *,
    config_paths: Sequence[Path] | None = None,
) -> tuple[bool, str]:
    """Whether podman's effective settings are the ones lab nodes need here.

    Returns ``(ok, detail)``: on success ``detail`` summarises the settings found
    (``"runtime runc, ulimits nofile=20000:20000 nproc=32768:32768, storage overlay,
    cgroups v1 (cgroupfs)"``); on failure it lists each problem and its fix.

    The runtime comes from ``podman info --format json`` (``host.ociRuntime.name``);
    podman 4.3 does not report default ulimits, so they are merged from the
    containers.conf files podman reads (:func:`containers_conf_paths`, or
    ``config_paths``). Never raises: a missing podman or unreadable config is a failed
    check with the reason.
    """
    if shutil.which(podman) is None:
        return False, f"{podman} not found on PATH; {_PREPARE_FIX}"
    try:
        host = parse_podman_info(podman_info(podman))
    except (PodmanError, ValueError) as e:
        return False, f"{e}; {_PREPARE_FIX}"
    home = Path.home() if host.rootless else None
    paths = (
        list(config_paths)
        if config_paths is not None
        else containers_conf_paths(rootless_home=home)
    )
    layers = []
    for p in paths:
        try:
            layers.append(tomllib.loads(p.read_text()))
        except (OSError, tomllib.TOMLDecodeError) as e:
            return False, f"cannot read {p}: {e}"
    ulimits = effective_default_ulimits(layers)
    try:
        problems = check_settings(host, ulimits)
    except ValueError as e:
        return False, f"{e}; {_PREPARE_FIX}"
    if problems:
        return False, "; ".join(problems) + " (lab/prepare-podman, run as root, writes these)"
    return True, (
        f"runtime {host.runtime}, ulimits {' '.join(ulimits or [])}, "
        f"storage {host.storage_driver}, cgroups {host.cgroup_version} ({host.cgroup_manager})"
    )


# --------------------------------------------------------------------------- images


def image_present(ref: str, podman: str = "podman") -> bool:
    """Whether podman's local storage holds image ``ref`` (``podman image exists``).

    False when podman is not installed. Raises ``PodmanError`` when podman fails for
    another reason (exit status other than 0 and 1, e.g. broken storage).
    """
    if shutil.which(podman) is None:
        return False
    proc = subprocess.run(
        [podman, "image", "exists", ref], capture_output=True, text=True, check=False
    )
    if proc.returncode in (0, 1):
        return proc.returncode == 0
    raise PodmanError(
        f"`{podman} image exists {ref}` exited {proc.returncode}: {proc.stderr.strip()}"
    )


# --------------------------------------------------------------------------- nodes


def node_run_args(
    name: str,
    *,
    image: str | None = None,
    hostname: str | None = None,
    network: str | None = None,
    containerd_volume: str | None = None,
    volumes: Sequence[str] = (),
    labels: Mapping[str, str] | None = None,
    extra_args: Sequence[str] = (),
) -> list[str]:
    """Arguments after ``podman`` that start lab node ``name`` in the background.

    Use as ``subprocess.run(["podman", *node_run_args("gpu-worker-1")], check=True)``;
    the result ends with the image, whose command is ``/sbin/init``. Why each flag is
    there is in the module docstring; in short::

        run --detach --name NAME --hostname HOSTNAME --privileged
            --systemd=false --cgroupns=private
            --tmpfs /run --tmpfs /run/lock --tmpfs /tmp
            --env container=podman --stop-signal SIGRTMIN+3
            --volume [VOLUME:]/var/lib/containerd --label io.gpufleet.lab-node=NAME
            [--network NETWORK] [--volume V ...] [--label K=V ...] [EXTRA ...] IMAGE

    ``image`` defaults to :func:`node_image_ref`; ``hostname`` to ``name`` (it becomes the
    Kubernetes node name, so it must be a lowercase RFC 1123 label). With
    ``containerd_volume`` unset, ``/var/lib/containerd`` is an anonymous volume: remove the
    node with ``podman rm --force --volumes NAME`` to free it.

    Raises ``ValueError`` naming the argument, its value and the rule it breaks.
    """
    if not _CONTAINER_NAME_RE.match(name):
        raise ValueError(
            f"node name {name!r} is not a valid container name: use letters, digits, "
            "'_', '.', '-', starting with a letter or digit"
        )
    hostname = name if hostname is None else hostname
    if not _HOSTNAME_RE.match(hostname):
        raise ValueError(
            f"node hostname {hostname!r} is not a lowercase RFC 1123 label (it becomes the "
            "Kubernetes node name): use 1-63 of a-z, 0-9, '-', not starting or ending "
            "with '-'"
        )
    if containerd_volume is not None and not _CONTAINER_NAME_RE.match(containerd_volume):
        raise ValueError(
            f"containerd_volume {containerd_volume!r} is not a valid podman volume name: "
            "use letters, digits, '_', '.', '-'"
        )
    volume = (
        f"{containerd_volume}:{CONTAINERD_STATE_DIR}" if containerd_volume else CONTAINERD_STATE_DIR
    )
    args = [
        "run",
        "--detach",
        "--name", name,
        "--hostname", hostname,
        "--privileged",
        "--systemd=false",
        "--cgroupns=private",
        "--tmpfs", "/run",
        "--tmpfs", "/run/lock",
        "--tmpfs", "/tmp",
        "--env", "container=podman",
        "--stop-signal", "SIGRTMIN+3",
        "--volume", volume,
        "--label", f"{NODE_LABEL}={name}",
    ]  # fmt: skip
    if network:
        args += ["--network", network]
    for v in volumes:
        args += ["--volume", v]
    for k, v in (labels or {}).items():
        args += ["--label", f"{k}={v}"]
    args += list(extra_args)
    args.append(image or node_image_ref())
    return args


def node_system_state(name: str, podman: str = "podman") -> str:
    """Output of ``systemctl is-system-running`` inside node ``name``: ``initializing``,
    ``starting``, ``running``, ``degraded``, ``maintenance``, ``stopping``, ``offline``
    (systemd-controlled states, see systemctl(1)), or ``"unreachable: <error>"`` while
    systemd's bus is not up yet or the container is not running."""
    proc = subprocess.run(
        [podman, "exec", name, "systemctl", "is-system-running"],
        capture_output=True,
        text=True,
        check=False,
    )
    state = proc.stdout.strip()
    if state:
        return state
    return "unreachable: " + (proc.stderr.strip() or f"exit {proc.returncode}")


def wait_for_boot(
    name: str,
    *,
    timeout_s: float = 120.0,
    interval_s: float = 0.5,
    podman: str = "podman",
) -> str:
    """Wait until systemd in node ``name`` settles; returns ``"running"`` or ``"degraded"``.

    Raises ``TimeoutError`` after ``timeout_s`` seconds with the last state seen, and
    ``PodmanError`` at once when the container stops (with its last log lines).
    """
    deadline = time.monotonic() + timeout_s
    state = ""
    while True:
        state = node_system_state(name, podman)
        if state in ("running", "degraded"):
            return state
        if state.startswith("unreachable") and not _container_running(name, podman):
            logs = subprocess.run(
                [podman, "logs", "--tail", "20", name], capture_output=True, text=True
            )
            raise PodmanError(
                f"node {name} stopped while booting ({state}); last log lines:\n"
                + (logs.stdout + logs.stderr).strip()
            )
        if time.monotonic() >= deadline:
            raise TimeoutError(
                f"node {name}: systemd not running after {timeout_s:.0f}s (last state: {state})"
            )
        time.sleep(interval_s)


def _container_running(name: str, podman: str) -> bool:
    proc = subprocess.run(
        [podman, "container", "inspect", "--format", "{{.State.Running}}", name],
        capture_output=True,
        text=True,
        check=False,
    )
    return proc.returncode == 0 and proc.stdout.strip() == "true"


def _podman(argv: list[str]) -> str:
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    except FileNotFoundError as e:
        raise PodmanError(f"{argv[0]} not found: {e}") from e
    if proc.returncode != 0:
        raise PodmanError(f"`{' '.join(argv)}` exited {proc.returncode}: {proc.stderr.strip()}")
    return proc.stdout
