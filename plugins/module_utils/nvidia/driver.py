# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""Plan of an NVIDIA host driver install: versions, distributions, packages, kernel modules.

Pure Python (standard library only): Ansible ships ``module_utils`` to managed hosts, and
the role's filters (``plugins/filter/nvidia.py``) and the ``nvidia_driver_facts`` module
both use it. Every function either returns a value or raises :class:`PlanError` whose
message names the variable, the value and the fix.

Facts and where they come from:

* Minimum driver for GPU allocation with the NVIDIA DRA driver: branch 565
  (``docs/prerequisites.md`` of kubernetes-sigs/dra-driver-nvidia-gpu); ComputeDomains
  need 570.158.01 (same page). Floor for anything this collection installs: 525.60.13
  (the first R525 data-center release, the oldest branch still in NVIDIA's support
  matrix when this was written).
* Open GPU kernel modules: the installers default to them from R560; Grace Hopper and
  Blackwell support only them; Turing, Ampere, Ada and Hopper support both; Maxwell,
  Pascal and Volta only the proprietary modules, and R580 is their last branch (NVIDIA
  blog "NVIDIA Transitions Fully Towards Open-Source GPU Kernel Modules", and the R580
  data-center release notes). Kepler left the driver with R470.
* CUDA network repository: ``https://developer.download.nvidia.com/compute/cuda/repos/
  <distro><version>/<arch>/`` with ``arch`` ``x86_64`` or ``sbsa`` (64-bit Arm servers);
  apt repositories signed by key ``3bf863cc``, dnf repositories by ``D42D0685`` (what the
  ``cuda-keyring_1.1-1`` package and the ``cuda-rhel<N>.repo`` files install).
* Package names: CUDA repository metapackages ``cuda-drivers-<branch>`` (proprietary)
  and ``nvidia-open-<branch>`` (open), without the branch suffix from 590 on; Ubuntu's
  archive ``nvidia-headless-<branch>-server[-open]`` and ``nvidia-utils-<branch>-server``;
  Debian's ``nvidia-kernel-dkms`` / ``nvidia-open-kernel-dkms`` with ``nvidia-smi`` and
  ``libcuda1`` (non-free); RHEL's CUDA repository DNF module ``nvidia-driver`` with
  streams ``<branch>-dkms`` and ``<branch>-open``. RHEL and Rocky ship no NVIDIA driver
  of their own.
* GPU architecture from the PCI device ID (``/sys/bus/pci/devices/*/device``, vendor
  ``0x10de``): the ranges of :data:`PCI_ARCHITECTURE_RANGES`, read from the PCI ID
  database (pci.ids) chip names (GK, GM, GP, GV, TU, GA, GH, AD, GB).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

__all__ = [
    "DRA_MIN_BRANCH",
    "DRIVER_FLOOR",
    "SUPPORTED_DISTROS",
    "Distro",
    "DriverVersion",
    "PciGpu",
    "PlanError",
    "SmiGpu",
    "architecture_of",
    "check_pin",
    "choose_kernel_modules",
    "cuda_repo",
    "driver_packages",
    "load_action",
    "packages_to_hold",
    "parse_driver_version",
    "parse_proc_version",
    "parse_smi_list",
    "release_supports",
    "resolve_distro",
    "verify_driver",
]


class PlanError(ValueError):
    """Bad or impossible input; the message names the variable, the value and the fix."""


# ----------------------------------------------------------------------------- versions

#: Oldest driver this collection installs or accepts (first R525 data-center release).
DRIVER_FLOOR = "525.60.13"
#: Oldest branch for GPU allocation with the NVIDIA DRA driver (its docs/prerequisites.md).
DRA_MIN_BRANCH = 565
#: First branch whose installers default to the open GPU kernel modules.
OPEN_DEFAULT_BRANCH = 560
#: Last branch that supports Maxwell, Pascal and Volta GPUs.
LAST_PRE_TURING_BRANCH = 580
#: From this branch the CUDA repository's apt metapackages carry no branch suffix.
UNSUFFIXED_APT_BRANCH = 590

_VERSION_RE = re.compile(r"^(\d{3})\.(\d{1,3})(?:\.(\d{1,3}))?\Z", re.ASCII)


@dataclass(frozen=True, order=True)
class DriverVersion:
    """A driver release, ``580.159.04`` -> ``parts=(580, 159, 4)``; ``text`` as written."""

    parts: tuple[int, int, int]
    text: str = field(compare=False)

    @property
    def branch(self) -> int:
        return self.parts[0]

    def __str__(self) -> str:
        return self.text


def parse_driver_version(text: str, variable: str = "nvidia_driver_version") -> DriverVersion:
    """Parse ``580.159.04`` or ``580.95`` (NVIDIA release numbers: branch.minor[.patch]).

    Raises :class:`PlanError` naming ``variable`` when ``text`` is not such a number.
    """
    value = str(text).strip()
    match = _VERSION_RE.match(value)
    if not match:
        raise PlanError(
            f"{variable}={value!r} is not an NVIDIA driver release; fix: give the full "
            "release as NVIDIA publishes it, for example 580.159.04"
        )
    major, minor, patch = match.groups()
    return DriverVersion((int(major), int(minor), int(patch or 0)), value)


def published_driver_version(text: str, variable: str = "driver_version") -> str:
    """The ``driverVersion`` the NVIDIA DRA driver publishes for the release ``text``
    (``580.159.04`` -> ``580.159.4``: semver's, leading zeros gone), "" for none. Raises
    :class:`PlanError` naming ``variable`` when ``text`` is no release
    (:func:`parse_driver_version`)."""
    if not text:
        return ""
    return ".".join(str(p) for p in parse_driver_version(text, variable).parts)


def check_pin(branch: str | int, version: str, for_dra: bool = True) -> DriverVersion:
    """Check a pinned branch and release; return the parsed release.

    Rules: the release belongs to the branch; it is at least :data:`DRIVER_FLOOR`; with
    ``for_dra`` (GPU allocation with the NVIDIA DRA driver) the branch is at least
    :data:`DRA_MIN_BRANCH`. Raises :class:`PlanError` naming the variables and the fix.
    """
    branch_text = str(branch).strip()
    if not re.match(r"^\d{3}\Z", branch_text, re.ASCII):
        raise PlanError(
            f"nvidia_driver_branch={branch_text!r} is not a driver branch; fix: give the "
            "three-digit branch, for example 580"
        )
    pinned = parse_driver_version(version)
    if pinned.branch != int(branch_text):
        raise PlanError(
            f"nvidia_driver_version={pinned} is not a release of nvidia_driver_branch="
            f"{branch_text}; fix: pin a {branch_text}.x release or change the branch to "
            f"{pinned.branch}"
        )
    floor = parse_driver_version(DRIVER_FLOOR)
    if pinned < floor:
        raise PlanError(
            f"nvidia_driver_version={pinned} is older than {DRIVER_FLOOR}, the oldest driver "
            "this collection installs; fix: pin a supported release (580 is the data-center "
            "long-term branch)"
        )
    if for_dra and pinned.branch < DRA_MIN_BRANCH:
        raise PlanError(
            f"nvidia_driver_branch={branch_text}: GPU allocation with the NVIDIA DRA driver "
            f"needs branch {DRA_MIN_BRANCH} or newer (dra-driver-nvidia-gpu "
            "docs/prerequisites.md; ComputeDomains need 570.158.01); fix: pin 580 (the "
            "data-center long-term branch) or newer, or set nvidia_driver_for_dra=false for "
            "hosts that will not serve GPUs through DRA"
        )
    return pinned


# ------------------------------------------------------------------------ distributions


@dataclass(frozen=True)
class Distro:
    """A supported distribution: ``family`` ``apt`` or ``dnf``; ``repo_name`` as the CUDA
    repository spells it (``ubuntu2204``, ``debian12``, ``rhel9``)."""

    name: str
    version: str
    family: str
    repo_name: str

    def __str__(self) -> str:
        return f"{self.name} {self.version}"


#: (distribution as Ansible reports it, major version) -> (family, CUDA repository name)
SUPPORTED_DISTROS: dict[tuple[str, str], tuple[str, str]] = {
    ("Ubuntu", "22.04"): ("apt", "ubuntu2204"),
    ("Ubuntu", "24.04"): ("apt", "ubuntu2404"),
    ("Debian", "12"): ("apt", "debian12"),
    ("RedHat", "8"): ("dnf", "rhel8"),
    ("RedHat", "9"): ("dnf", "rhel9"),
    ("Rocky", "8"): ("dnf", "rhel8"),
    ("Rocky", "9"): ("dnf", "rhel9"),
}


def supported_list() -> str:
    return ", ".join(f"{name} {version}" for name, version in SUPPORTED_DISTROS)


def resolve_distro(distribution: str, version: str) -> Distro:
    """Map Ansible's ``distribution`` and ``distribution_version`` to a :class:`Distro`.

    Ubuntu is matched on ``YY.MM``, the others on the major version (``9.4`` -> ``9``).
    Raises :class:`PlanError` naming the detected distribution and the supported list.
    """
    name = str(distribution).strip()
    text = str(version).strip()
    key_version = text if name == "Ubuntu" else text.split(".", maxsplit=1)[0]
    found = SUPPORTED_DISTROS.get((name, key_version))
    if found is None:
        raise PlanError(
            f"unsupported distribution {name} {text} (ansible_facts.distribution="
            f"{name!r}, distribution_version={text!r}); the NVIDIA driver roles support "
            f"{supported_list()}; fix: run them on one of these, or install the driver "
            "yourself and use nvidia_driver_mode=preinstalled"
        )
    family, repo_name = found
    return Distro(name, key_version, family, repo_name)


def cuda_arch(machine: str) -> str:
    """CUDA repository architecture for Ansible's ``architecture`` fact."""
    machine = str(machine).strip()
    if machine in ("x86_64", "amd64"):
        return "x86_64"
    if machine in ("aarch64", "arm64", "sbsa"):
        return "sbsa"
    raise PlanError(
        f"architecture {machine!r} has no CUDA repository; fix: use x86_64 or aarch64 hosts"
    )


@dataclass(frozen=True)
class CudaRepo:
    """What configures the CUDA network repository on a host.

    apt: ``keyring_path`` holds the ASCII-armored key, ``apt_source_path`` one
    ``deb [signed-by=...]`` line (``apt_source``). dnf: ``dnf_repo_path`` holds
    ``dnf_repo`` (an INI section). ``key_url`` is where the signing key is published.
    """

    url: str
    key_url: str
    family: str
    keyring_path: str
    apt_source_path: str
    apt_source: str
    dnf_repo_path: str
    dnf_repo: str


APT_KEY_ID = "3bf863cc"
DNF_KEY_ID = "D42D0685"
APT_KEYRING = "/etc/apt/keyrings/cuda-archive-keyring.asc"


def cuda_repo(distro: Distro, machine: str, base_url: str) -> CudaRepo:
    """Render the CUDA repository files for ``distro`` on ``machine`` from ``base_url``
    (NVIDIA's ``https://developer.download.nvidia.com/compute/cuda/repos`` or a mirror).

    The apt source file is named as ``cuda-keyring`` names its own
    (``cuda-<repo_name>-<arch>.list``), so that one replaces the other instead of apt
    refusing two sources with different ``signed-by`` for one URL.
    """
    arch = cuda_arch(machine)
    base = str(base_url).rstrip("/")
    if not re.match(r"^(https?|file)://", base):
        raise PlanError(
            f"nvidia_driver_cuda_repo_url={base_url!r} is not an http(s) or file URL; fix: "
            "use https://developer.download.nvidia.com/compute/cuda/repos or your mirror of it"
        )
    url = f"{base}/{distro.repo_name}/{arch}/"
    repo_id = f"cuda-{distro.repo_name}-{arch}"
    if distro.family == "apt":
        key_url = f"{url}{APT_KEY_ID}.pub"
        source = f"deb [signed-by={APT_KEYRING}] {url} /\n"
        return CudaRepo(
            url=url,
            key_url=key_url,
            family="apt",
            keyring_path=APT_KEYRING,
            apt_source_path=f"/etc/apt/sources.list.d/{repo_id}.list",
            apt_source=source,
            dnf_repo_path="",
            dnf_repo="",
        )
    key_url = f"{url}{DNF_KEY_ID}.pub"
    repo = (
        f"[{repo_id}]\n"
        f"name={repo_id}\n"
        f"baseurl={url.rstrip('/')}\n"
        "enabled=1\n"
        "gpgcheck=1\n"
        f"gpgkey={key_url}\n"
    )
    return CudaRepo(
        url=url,
        key_url=key_url,
        family="dnf",
        keyring_path="",
        apt_source_path="",
        apt_source="",
        dnf_repo_path=f"/etc/yum.repos.d/cuda-{distro.repo_name}.repo",
        dnf_repo=repo,
    )


# ----------------------------------------------------------------------------- packages


@dataclass(frozen=True)
class PackagePlan:
    """Packages to install (``name=version-*`` for apt, ``name-version`` for dnf), the
    DNF module stream to enable first (``""`` for none) and the name prefixes of what to
    hold at the pinned release."""

    packages: tuple[str, ...]
    module_stream: str
    hold_prefixes: tuple[str, ...]


HOLD_PREFIXES = (
    "cuda-drivers",
    "nvidia-",
    "libnvidia-",
    "libcuda",
    "libxnvctrl",
    "xserver-xorg-video-nvidia",
    "kmod-nvidia",
    "dkms-nvidia",
)


def driver_packages(distro: Distro, source: str, flavor: str, pinned: DriverVersion) -> PackagePlan:
    """Packages that install release ``pinned`` with kernel modules ``flavor``
    (``open`` or ``proprietary``) from ``source`` (``cuda_repo`` or ``distro``).

    Raises :class:`PlanError` for a source the distribution does not have.
    """
    if flavor not in ("open", "proprietary"):
        raise PlanError(f"kernel module flavor {flavor!r}: expected open or proprietary")
    branch = pinned.branch
    open_ = flavor == "open"
    if source == "cuda_repo":
        if distro.family == "apt":
            suffix = "" if branch >= UNSUFFIXED_APT_BRANCH else f"-{branch}"
            meta = ("nvidia-open" if open_ else "cuda-drivers") + suffix
            return PackagePlan((f"{meta}={pinned}-*",), "", HOLD_PREFIXES)
        stream = f"nvidia-driver:{branch}-{'open' if open_ else 'dkms'}"
        kmod = "kmod-nvidia-open-dkms" if open_ else "kmod-nvidia-latest-dkms"
        names = ("nvidia-driver", "nvidia-driver-cuda", kmod)
        return PackagePlan(tuple(f"{n}-{pinned}" for n in names), stream, HOLD_PREFIXES)
    if source != "distro":
        raise PlanError(
            f"nvidia_driver_source={source!r}; fix: use cuda_repo (NVIDIA's CUDA repository) "
            "or distro (the distribution's own packages)"
        )
    if distro.family == "dnf":
        raise PlanError(
            f"nvidia_driver_source=distro: {distro} ships no NVIDIA driver packages; fix: "
            "use nvidia_driver_source=cuda_repo"
        )
    if distro.name == "Ubuntu":
        flavor_suffix = "-open" if open_ else ""
        names = (f"nvidia-headless-{branch}-server{flavor_suffix}", f"nvidia-utils-{branch}-server")
        return PackagePlan(tuple(f"{n}={pinned}-*" for n in names), "", HOLD_PREFIXES)
    kernel = "nvidia-open-kernel-dkms" if open_ else "nvidia-kernel-dkms"
    names = (kernel, "nvidia-smi", "libcuda1")
    return PackagePlan(tuple(f"{n}={pinned}-*" for n in names), "", HOLD_PREFIXES)


def packages_to_hold(
    installed: dict[str, list[str]], pinned: str, prefixes=HOLD_PREFIXES
) -> list[str]:
    """Names of installed driver packages at release ``pinned``, sorted.

    ``installed`` maps package name to its installed versions (the shape of Ansible's
    ``package_facts``, versions without the revision or with it: ``580.159.04``,
    ``580.159.04-0ubuntu1``, ``3:580.159.04-1.el9``). A package is held when its name starts
    with one of ``prefixes`` and one of its versions is the pinned release.
    """
    held = []
    for name, versions in installed.items():
        if not name.startswith(tuple(prefixes)):
            continue
        for version in versions:
            upstream = str(version).split(":", 1)[-1].split("-", 1)[0]
            if upstream == pinned:
                held.append(name)
                break
    return sorted(held)


# ------------------------------------------------------------------------ GPU and module

#: (first, last, architecture) of NVIDIA PCI device IDs, from the chip names in pci.ids.
PCI_ARCHITECTURE_RANGES: tuple[tuple[int, int, str], ...] = (
    (0x0FC0, 0x12FF, "Kepler"),
    (0x1340, 0x13FF, "Maxwell"),
    (0x1400, 0x17FF, "Maxwell"),
    (0x15F0, 0x15FF, "Pascal"),
    (0x1B00, 0x1D7F, "Pascal"),
    (0x1D80, 0x1DFF, "Volta"),
    (0x1E00, 0x1FFF, "Turing"),
    (0x2180, 0x21FF, "Turing"),
    (0x2080, 0x217F, "Ampere"),
    (0x2200, 0x22FF, "Ampere"),
    (0x2400, 0x25FF, "Ampere"),
    (0x2300, 0x23FF, "Hopper"),
    (0x2600, 0x28FF, "Ada Lovelace"),
    (0x2900, 0x2FFF, "Blackwell"),
)
#: GH200 superchips (Hopper GPU with Grace CPU): open kernel modules only.
GRACE_HOPPER_DEVICE_IDS = frozenset({0x2342, 0x2348})

PRE_TURING = frozenset({"Kepler", "Maxwell", "Pascal", "Volta"})
OPEN_ONLY = frozenset({"Grace Hopper", "Blackwell"})


@dataclass(frozen=True)
class PciGpu:
    """An NVIDIA display or 3D controller on the PCI bus: ``address`` ``0000:19:00.0``,
    ``device_id`` ``0x2335``, ``pci_class`` ``0x030200``."""

    address: str
    device_id: int
    pci_class: int

    @property
    def architecture(self) -> str:
        return architecture_of(self.device_id)


def architecture_of(device_id: int) -> str:
    """Architecture of an NVIDIA PCI device ID (``0x2335`` -> ``Hopper``); ``unknown``
    outside :data:`PCI_ARCHITECTURE_RANGES`. The narrower range wins where two overlap
    (Pascal's GP100 sits inside a Maxwell range)."""
    if device_id in GRACE_HOPPER_DEVICE_IDS:
        return "Grace Hopper"
    matches = [r for r in PCI_ARCHITECTURE_RANGES if r[0] <= device_id <= r[1]]
    if not matches:
        return "unknown"
    return min(matches, key=lambda r: r[1] - r[0])[2]


#: Which driver releases support each architecture: ``(first release, last branch, source)``
#: (None: no bound). Blackwell from 570.133.20: NVIDIA GPU Operator platform-support.rst
#: ("HGX B200 requires a driver container version of 570.133.20 or later",
#: NVIDIA/cloud-native-docs PR #184) and the MIG user guide's B200 row (R570, >= 570.133.20).
#: Maxwell, Pascal and Volta to branch 580: the R580 data-center release notes (R580 is their
#: last branch). Kepler to branch 470: NVIDIA's Kepler end-of-support notice (R470 is the last).
BRANCH_SUPPORT: dict[str, tuple[str | None, int | None, str]] = {
    "Kepler": (None, 470, "NVIDIA Kepler end-of-support notice: R470 is the last branch"),
    "Maxwell": (None, LAST_PRE_TURING_BRANCH, "NVIDIA R580 data-center release notes"),
    "Pascal": (None, LAST_PRE_TURING_BRANCH, "NVIDIA R580 data-center release notes"),
    "Volta": (None, LAST_PRE_TURING_BRANCH, "NVIDIA R580 data-center release notes"),
    "Blackwell": (
        "570.133.20",
        None,
        "NVIDIA GPU Operator platform-support (HGX B200) and MIG user guide (B200)",
    ),
}


def release_supports(architecture: str, release: DriverVersion) -> str | None:
    """Why driver ``release`` does not support GPUs of ``architecture`` (from
    :func:`architecture_of`); None when it does or when no bound is known (Turing, Ampere,
    Ada, Hopper, Grace Hopper from the :data:`DRIVER_FLOOR`; an ``unknown`` architecture is
    not judged). NVIDIA's document that says so: ``BRANCH_SUPPORT[architecture][2]``."""
    first, last, _source = BRANCH_SUPPORT.get(architecture, (None, None, ""))
    if first is not None and release < parse_driver_version(first):
        return f"{architecture} GPUs need driver {first} or later; {release} is older"
    if last is not None and release.branch > last:
        return (
            f"{architecture} GPUs are supported up to branch {last}; {release} is of branch "
            f"{release.branch}"
        )
    return None


def is_gpu(vendor: int, pci_class: int) -> bool:
    """NVIDIA (vendor 0x10de) VGA (class 0x0300xx) or 3D controller (0x0302xx); NVSwitch
    bridges (0x0680xx) and HDMI audio functions (0x0403xx) are not GPUs."""
    return vendor == 0x10DE and (pci_class >> 8) in (0x0300, 0x0302)


def choose_kernel_modules(requested: str, branch: int, architectures: list[str]) -> tuple[str, str]:
    """Return (``open`` | ``proprietary``, reason) for ``requested`` (``auto``, ``open``,
    ``proprietary``) on a host whose GPUs have ``architectures`` (from :func:`architecture_of`),
    at driver ``branch``.

    ``auto`` picks open where NVIDIA requires it (Grace Hopper, Blackwell) and on every
    branch from 560 (the installers' default then) unless a GPU needs proprietary
    (Maxwell, Pascal, Volta); proprietary below 560. Raises :class:`PlanError` when no
    choice can drive every GPU or the explicit choice cannot.
    """
    archs = sorted(set(architectures))
    if requested not in ("auto", "open", "proprietary"):
        raise PlanError(
            f"nvidia_driver_kernel_modules={requested!r}; fix: use auto, open or proprietary"
        )
    if "Kepler" in archs:
        raise PlanError(
            f"a Kepler GPU is on this host (architectures {archs}); no driver branch from 525 "
            "supports Kepler (R470 was the last); fix: remove the host from the GPU groups"
        )
    old = sorted(a for a in archs if a in PRE_TURING)
    new = sorted(a for a in archs if a in OPEN_ONLY)
    if old and new:
        raise PlanError(
            f"GPUs of architectures {old} need the proprietary kernel modules and {new} the "
            "open ones; one host cannot load both; fix: do not mix these GPUs in one host"
        )
    if old and branch > LAST_PRE_TURING_BRANCH:
        raise PlanError(
            f"nvidia_driver_branch={branch}: {old} GPUs are supported up to branch "
            f"{LAST_PRE_TURING_BRANCH}; fix: pin branch {LAST_PRE_TURING_BRANCH}"
        )
    if requested == "open":
        if old:
            raise PlanError(
                f"nvidia_driver_kernel_modules=open: the open kernel modules do not support "
                f"{old} GPUs; fix: use auto or proprietary"
            )
        return "open", "requested (nvidia_driver_kernel_modules=open)"
    if requested == "proprietary":
        if new:
            raise PlanError(
                f"nvidia_driver_kernel_modules=proprietary: {new} GPUs work only with the open "
                "kernel modules; fix: use auto or open"
            )
        return "proprietary", "requested (nvidia_driver_kernel_modules=proprietary)"
    if old:
        return "proprietary", f"{old} GPUs support only the proprietary kernel modules"
    if new:
        return "open", f"{new} GPUs support only the open kernel modules"
    if branch >= OPEN_DEFAULT_BRANCH:
        what = f"{archs} GPUs" if archs else "no GPU seen on the PCI bus"
        return "open", f"{what}; open is NVIDIA's default from branch {OPEN_DEFAULT_BRANCH}"
    return (
        "proprietary",
        f"branch {branch} is older than {OPEN_DEFAULT_BRANCH} (proprietary default)",
    )


_PROC_RE = re.compile(r"NVRM version:\s+NVIDIA UNIX (.*?)\s+(\d{3}\.\d+(?:\.\d+)?)\s")


def parse_proc_version(text: str | None) -> tuple[str | None, str | None]:
    """(release, flavor) of the loaded kernel module from ``/proc/driver/nvidia/version``.

    ``NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build ...``
    -> ``("580.159.04", "open")``; ``NVRM version: NVIDIA UNIX x86_64 Kernel Module
    535.129.03  Tue Oct 31 ...`` -> ``("535.129.03", "proprietary")``; no module loaded
    (``None`` or no NVRM line) -> ``(None, None)``.
    """
    if not text:
        return None, None
    match = _PROC_RE.search(text)
    if not match:
        return None, None
    flavor = "open" if "Open Kernel Module" in match.group(1) else "proprietary"
    return match.group(2), flavor


@dataclass(frozen=True)
class SmiGpu:
    """One ``GPU <index>: <name> (UUID: GPU-...)`` line of ``nvidia-smi -L``."""

    index: int
    name: str
    uuid: str


_SMI_L_RE = re.compile(r"^GPU (\d+): (.*?) \(UUID: (GPU-[0-9a-fA-F-]+)\)\s*$")


def parse_smi_list(text: str) -> list[SmiGpu]:
    """GPUs of ``nvidia-smi -L`` output (MIG device lines below a GPU are skipped)."""
    gpus = []
    for line in text.splitlines():
        match = _SMI_L_RE.match(line.strip())
        if match:
            gpus.append(SmiGpu(int(match.group(1)), match.group(2), match.group(3)))
    return gpus


def load_action(loaded: str | None, installed: str, nouveau_loaded: bool) -> str:
    """What makes the installed driver the running one: ``none`` (already loaded),
    ``modprobe`` (nothing loaded, nouveau not in the way) or ``reboot`` (another release
    is loaded, or nouveau holds the GPU)."""
    if loaded == installed:
        return "none"
    if loaded is None and not nouveau_loaded:
        return "modprobe"
    return "reboot"


def verify_driver(
    pinned: str,
    loaded: str | None,
    smi_driver_versions: list[str],
    pci_gpus: int,
    smi_gpus: list[SmiGpu],
) -> list[str]:
    """Problems of a host whose driver should be ``pinned`` (empty list: none).

    ``loaded``: release in ``/proc/driver/nvidia/version``; ``smi_driver_versions``: the
    ``nvidia-smi --query-gpu=driver_version`` lines (they stand for the loaded release
    where ``/proc`` is not readable, as in a container); ``pci_gpus``: NVIDIA GPUs on the
    PCI bus; ``smi_gpus``: ``nvidia-smi -L``.
    """
    problems = []
    if loaded is None and not any(v.strip() for v in smi_driver_versions):
        problems.append(
            "no NVIDIA kernel module is loaded (no /proc/driver/nvidia/version, nvidia-smi "
            "reports no driver)"
        )
    elif loaded is not None and loaded != pinned:
        problems.append(f"the loaded kernel module is {loaded}, nvidia_driver_version is {pinned}")
    for version in sorted(set(v.strip() for v in smi_driver_versions if v.strip())):
        if version != pinned:
            problems.append(
                f"nvidia-smi reports driver {version}, nvidia_driver_version is {pinned}"
            )
    if len(smi_gpus) != pci_gpus:
        problems.append(
            f"{pci_gpus} NVIDIA GPUs on the PCI bus, nvidia-smi -L lists {len(smi_gpus)} "
            f"({', '.join(g.uuid for g in smi_gpus) or 'none'}); a GPU the driver does not "
            "see is lost to the cluster"
        )
    return problems
