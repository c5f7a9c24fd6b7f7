# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""What the NVIDIA GPUs of one host are: identity, memory, driver, MIG state and devices,
NVLink peers. Read-only; nothing here changes a GPU.

Two backends:

* **NVML** through ``pynvml`` (PyPI package ``nvidia-ml-py``), used when that module is
  importable on the host and ``nvmlInit`` finds the driver's ``libnvidia-ml.so.1``. Calls
  and constants are those of ``pynvml.py`` in nvidia-ml-py 13.615.71.
* **nvidia-smi**, driven through an injected command runner (``AnsibleModule.run_command``
  in the module), with these commands, all read-only:

  ======================================================================  =====================
  command                                                                 gives
  ======================================================================  =====================
  ``nvidia-smi -q -x``                                                    identity, memory,
                                                                          driver, CUDA, MIG
                                                                          mode, MIG devices
                                                                          (GI/CI/memory)
  ``nvidia-smi --query-gpu=<QUERY_FIELDS> --format=csv``                  compute capability
  ``nvidia-smi -L``                                                       MIG device UUIDs
  ``nvidia-smi mig -lgi`` / ``mig -lci`` (only when a GPU has MIG on)     GI profile, profile
                                                                          ID, placement; CI
                                                                          profile
  ``nvidia-smi topo -m`` / ``nvlink -s`` (only with two GPUs or more)     NVLink peers, active
                                                                          links
  ======================================================================  =====================

  When ``-q -x`` fails, ``nvidia-smi -q`` (text) is parsed instead.

Formats follow real output: the captures of an H200 host and of two NVLinked H200s with
driver 580.159.04 (``tests/unit/data/gpu/h200-*``) and public NVIDIA MIG guide examples
(``tests/unit/data/gpu/public``). An answer of ``N/A``, ``[N/A]``, ``Not Supported`` or
``[Not Supported]`` means the GPU lacks the feature: the field is ``None`` (or ``False``
for ``mig_capable``), never an error.

Only the standard library is imported at import time; ``pynvml`` is imported by
:func:`load_nvml` when the NVML backend is tried.
"""

from __future__ import annotations

import contextlib
import importlib
import re
import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

#: ``run_command(argv) -> (rc, stdout, stderr)``, the shape of ``AnsibleModule.run_command``.
RunCommand = Callable[[list[str]], tuple[int, str, str]]

BACKENDS = ("auto", "nvml", "nvidia-smi")

#: Fields of the ``--query-gpu`` call; the same command line as the captured
#: ``smi-query.txt`` (header and units kept, so columns are read by name).
QUERY_FIELDS = (
    "index,uuid,name,pci.bus_id,driver_version,memory.total,mig.mode.current,"
    "mig.mode.pending,compute_cap,persistence_mode"
)

#: Answers that mean "this GPU does not have that" (nvidia-smi prints them bare in ``-q``
#: and XML, in brackets in ``--query-gpu`` CSV).
ABSENT = frozenset({"", "N/A", "[N/A]", "Not Supported", "[Not Supported]", "None"})

#: ``nvmlDeviceArchitecture_t`` values, ``NVML_DEVICE_ARCH_*`` in pynvml.py (nvidia-ml-py
#: 13.615.71) and nvml.h: KEPLER=2 MAXWELL=3 PASCAL=4 VOLTA=5 TURING=6 AMPERE=7 ADA=8
#: HOPPER=9 BLACKWELL=10 RUBIN=13; UNKNOWN=0xffffffff. Names as nvidia-smi prints
#: ``Product Architecture`` (``Ada Lovelace`` on the RTX 4070 capture).
NVML_ARCHITECTURES = {
    2: "Kepler",
    3: "Maxwell",
    4: "Pascal",
    5: "Volta",
    6: "Turing",
    7: "Ampere",
    8: "Ada Lovelace",
    9: "Hopper",
    10: "Blackwell",
    13: "Rubin",
}

MIB = 1024 * 1024


class GpuQueryError(Exception):
    """A GPU query could not be answered (a command failed, output could not be parsed)."""


class NoDriverError(GpuQueryError):
    """Neither nvidia-smi nor NVML exists on the host: no NVIDIA driver is installed."""


# ------------------------------------------------------------------ records


@dataclass
class MigDevice:
    """One MIG device (a compute instance inside a GPU instance) of a GPU.

    ``index`` is the MIG device index (``Device N`` of ``nvidia-smi -L``, ``MIG Dev`` of the
    ``nvidia-smi`` table, the index of ``nvmlDeviceGetMigDeviceHandleByIndex``).
    ``profile`` is the device's profile as nvidia-smi names it without the ``MIG `` prefix:
    the GPU instance profile (``1g.18gb``) when the compute instance fills the GPU
    instance, else ``<n>c.<GI profile>`` (``1c.3g.20gb``). ``gi_profile`` is the GPU
    instance profile, ``gi_profile_id`` its ID (``nvidia-smi mig -lgip`` ID column, NVML
    ``nvmlGpuInstanceProfileInfo_t.id``), ``placement_start``/``placement_size`` in memory
    slices (``mig -lgi`` Start:Size). ``memory_mib`` in MiB. Fields a source could not give
    are ``None``.
    """

    index: int | None
    gi_id: int | None
    ci_id: int | None
    profile: str | None
    gi_profile: str | None = None
    gi_profile_id: int | None = None
    ci_profile_id: int | None = None
    placement_start: int | None = None
    placement_size: int | None = None
    uuid: str | None = None
    memory_mib: int | None = None


@dataclass
class NvLinkPeer:
    """Another GPU of the host reached over NVLink; ``links`` is the number of bonded links
    (``NV18`` in ``nvidia-smi topo -m`` is 18)."""

    index: int
    uuid: str | None
    pci_bus_id: str | None
    links: int


@dataclass
class GpuInfo:
    """One physical GPU.

    Units and formats: ``memory_mib`` framebuffer total in MiB (``fb_memory_usage/total``,
    NVML ``nvmlDeviceGetMemoryInfo().total`` / 2**20); ``pci_bus_id`` as nvidia-smi prints
    it (``00000000:19:00.0``, 8-digit domain); ``driver_version`` as the driver reports it
    (``580.159.04``); ``cuda_driver_version`` ``major.minor`` (``13.0``, NVML
    ``nvmlSystemGetCudaDriverVersion`` 13000); ``compute_capability`` ``major.minor``
    (``9.0``). ``mig_mode_current``/``mig_mode_pending`` are ``"Enabled"``, ``"Disabled"``
    or ``None`` on a GPU without MIG (then ``mig_capable`` is false). ``minor_number`` is
    the ``/dev/nvidia<N>`` minor, which the NVIDIA DRA driver names devices after
    (``gpu-<minor>``). ``nvlink_active_links`` is only read on hosts with two GPUs or
    more (``None`` otherwise).
    """

    index: int
    uuid: str
    name: str
    pci_bus_id: str | None = None
    memory_mib: int | None = None
    driver_version: str | None = None
    cuda_driver_version: str | None = None
    compute_capability: str | None = None
    architecture: str | None = None
    mig_capable: bool = False
    mig_mode_current: str | None = None
    mig_mode_pending: str | None = None
    mig_devices: list[MigDevice] = field(default_factory=list)
    nvlink_peers: list[NvLinkPeer] = field(default_factory=list)
    nvlink_active_links: int | None = None
    serial: str | None = None
    minor_number: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """The record as plain data, plus the versions as the NVIDIA DRA driver publishes
        them (``driver_version_semver`` ``580.159.4``, ``cuda_driver_version_semver``
        ``13.0.0``, ``compute_capability_semver`` ``9.0.0``; see :func:`semver`)."""
        data = asdict(self)
        data["driver_version_semver"] = semver(self.driver_version)
        data["cuda_driver_version_semver"] = semver(self.cuda_driver_version)
        data["compute_capability_semver"] = semver(self.compute_capability)
        return data


@dataclass
class HostGpus:
    """What :func:`collect_host` found: the backend that answered (``nvml``,
    ``nvidia-smi`` or ``none``), the host's driver and CUDA driver versions, the GPUs in
    index order, and warnings about parts that could not be read."""

    backend: str
    driver_version: str | None
    cuda_driver_version: str | None
    gpus: list[GpuInfo]
    warnings: list[str] = field(default_factory=list)


# ------------------------------------------------------------------ small conversions


def absent(value: str | None) -> str | None:
    """``value`` stripped, or ``None`` when nvidia-smi says the feature is absent."""
    if value is None:
        return None
    value = value.strip()
    return None if value in ABSENT else value


def to_int(value: str | None) -> int | None:
    """The leading integer of ``value`` (``"143771 MiB"`` -> 143771); ``None`` when absent
    or not a number."""
    value = absent(value)
    if value is None:
        return None
    match = re.match(r"[-+]?\d+", value)
    return int(match.group()) if match else None


def mig_mode(value: str | None) -> str | None:
    """``"Enabled"``/``"Disabled"`` from nvidia-smi's MIG mode words, ``None`` when absent."""
    value = absent(value)
    if value is None:
        return None
    lowered = value.lower()
    if lowered in ("enabled", "1"):
        return "Enabled"
    if lowered in ("disabled", "0"):
        return "Disabled"
    raise GpuQueryError(f"unknown MIG mode {value!r} (expected Enabled, Disabled or N/A)")


def semver(version: str | None) -> str | None:
    """``580.159.04`` -> ``580.159.4``; ``13.0`` -> ``13.0.0``; ``None`` when ``version``
    is absent or not 1 to 3 dot-separated numbers.

    This is what the NVIDIA DRA driver publishes as ``driverVersion``,
    ``cudaDriverVersion`` and ``cudaComputeCapability`` (``semver.MustParse(v).String()``
    of github.com/Masterminds/semver in cmd/gpu-kubelet-plugin/deviceinfo.go: missing
    parts become 0, leading zeros go).
    """
    version = absent(version)
    if version is None:
        return None
    parts = version.split(".")
    if not 1 <= len(parts) <= 3 or not all(p.isdigit() for p in parts):
        return None
    numbers = [int(p) for p in parts] + [0] * (3 - len(parts))
    return ".".join(str(n) for n in numbers)


def cuda_version_from_int(value: int | None) -> str | None:
    """NVML's CUDA driver version integer as ``major.minor`` (13000 -> ``13.0``, 12080 ->
    ``12.8``; ``CUDA_VERSION`` encoding ``1000*major + 10*minor``)."""
    if value is None or value <= 0:
        return None
    return f"{value // 1000}.{(value % 1000) // 10}"


def architecture_from_compute_capability(cc: str | None) -> str | None:
    """Architecture name for a CUDA compute capability (``9.0`` -> ``Hopper``), per the
    CUDA C Programming Guide's compute capability table: 3.x Kepler, 5.x Maxwell, 6.x
    Pascal, 7.0/7.2 Volta, 7.5 Turing, 8.0/8.6/8.7 Ampere, 8.9 Ada Lovelace, 9.x Hopper,
    10.x/11.x/12.x Blackwell. ``None`` when absent or unknown."""
    cc = absent(cc)
    if cc is None:
        return None
    match = re.fullmatch(r"(\d+)\.(\d+)", cc)
    if not match:
        return None
    major, minor = int(match.group(1)), int(match.group(2))
    if major == 7:
        return "Turing" if minor >= 5 else "Volta"
    if major == 8:
        return "Ada Lovelace" if minor >= 9 else "Ampere"
    return {3: "Kepler", 5: "Maxwell", 6: "Pascal", 9: "Hopper"}.get(
        major, "Blackwell" if major in (10, 11, 12) else None
    )


def normalize_bus_id(bus_id: str | None) -> str | None:
    """``0000:19:00.0`` or ``00000000:19:00.0`` -> ``00000000:19:00.0`` (upper-case hex, as
    nvidia-smi prints it), for comparing ids from different sources."""
    bus_id = absent(bus_id)
    if bus_id is None:
        return None
    match = re.fullmatch(r"(?:([0-9a-fA-F]+):)?([0-9a-fA-F]+):([0-9a-fA-F]+)\.([0-7])", bus_id)
    if not match:
        return bus_id
    domain, bus, dev, fn = match.groups()
    return f"{int(domain or '0', 16):08X}:{int(bus, 16):02X}:{int(dev, 16):02X}.{fn}"


def profile_name(name: str | None) -> str | None:
    """``MIG 1g.18gb`` -> ``1g.18gb`` (NVML and nvidia-smi prefix profile names)."""
    name = absent(name)
    if name is None:
        return None
    return name[4:].strip() if name.startswith("MIG ") else name


# ------------------------------------------------------------------ nvidia-smi parsers


def parse_smi_xml(text: str) -> HostGpus:
    """``nvidia-smi -q -x`` -> :class:`HostGpus` (backend ``nvidia-smi``).

    Reads ``driver_version``, ``cuda_version`` and per ``<gpu>``: ``product_name``,
    ``product_architecture``, ``uuid``, ``serial``, ``minor_number``, ``pci/pci_bus_id``
    (else the ``id`` attribute), ``fb_memory_usage/total``, ``mig_mode/current_mig`` and
    ``pending_mig``, and ``mig_devices/mig_device`` (``index``, ``gpu_instance_id``,
    ``compute_instance_id``, ``fb_memory_usage/total``). GPU index = order in the file,
    which is nvidia-smi's index order.

    Raises:
        GpuQueryError: not XML, or not an ``nvidia_smi_log``.
    """
    try:
        root = ET.fromstring(text.strip())
    except ET.ParseError as err:
        raise GpuQueryError(f"nvidia-smi -q -x printed no readable XML: {err}") from err
    if root.tag != "nvidia_smi_log":
        raise GpuQueryError(f"nvidia-smi -q -x printed <{root.tag}>, expected <nvidia_smi_log>")

    def text_of(node: ET.Element, path: str) -> str | None:
        found = node.find(path)
        return absent(found.text) if found is not None and found.text is not None else None

    driver = text_of(root, "driver_version")
    cuda = text_of(root, "cuda_version")
    gpus = []
    for index, node in enumerate(root.findall("gpu")):
        current = mig_mode(text_of(node, "mig_mode/current_mig"))
        migs = []
        for dev in node.findall("mig_devices/mig_device"):
            migs.append(
                MigDevice(
                    index=to_int(text_of(dev, "index")),
                    gi_id=to_int(text_of(dev, "gpu_instance_id")),
                    ci_id=to_int(text_of(dev, "compute_instance_id")),
                    profile=None,
                    memory_mib=to_int(text_of(dev, "fb_memory_usage/total")),
                )
            )
        gpus.append(
            GpuInfo(
                index=index,
                uuid=text_of(node, "uuid") or "",
                name=text_of(node, "product_name") or "",
                pci_bus_id=normalize_bus_id(text_of(node, "pci/pci_bus_id") or node.get("id")),
                memory_mib=to_int(text_of(node, "fb_memory_usage/total")),
                driver_version=driver,
                cuda_driver_version=cuda,
                architecture=text_of(node, "product_architecture"),
                mig_capable=current is not None,
                mig_mode_current=current,
                mig_mode_pending=mig_mode(text_of(node, "mig_mode/pending_mig")),
                mig_devices=migs,
                serial=text_of(node, "serial"),
                minor_number=to_int(text_of(node, "minor_number")),
            )
        )
    return HostGpus("nvidia-smi", driver, cuda, gpus)


def parse_smi_q_tree(text: str) -> list[tuple[str, str | None, list]]:
    """``nvidia-smi -q`` text as a tree of ``(key, value, children)`` by indentation
    (``Key : value`` lines; a line without `` : `` opens a section)."""
    root: list[tuple[str, str | None, list]] = []
    stack: list[tuple[int, list]] = [(-1, root)]
    for raw in text.splitlines():
        line = raw.rstrip()
        if not line.strip() or line.lstrip().startswith(("=", "$", "#", "[exit")):
            continue
        indent = len(line) - len(line.lstrip())
        key, sep, value = line.strip().partition(" : ")
        if not sep and line.rstrip().endswith(" :"):
            key, sep, value = line.strip()[:-2], " : ", ""
        node = (key.strip(), value.strip() if sep else None, [])
        while stack[-1][0] >= indent:
            stack.pop()
        stack[-1][1].append(node)
        stack.append((indent, node[2]))
    return root


def parse_smi_q_text(text: str) -> HostGpus:
    """``nvidia-smi -q`` (text) -> :class:`HostGpus`: the same fields as
    :func:`parse_smi_xml` from ``Driver Version``, ``CUDA Version`` and each
    ``GPU <bus id>`` section (``Product Name``, ``Product Architecture``, ``GPU UUID``,
    ``Serial Number``, ``Minor Number``, ``PCI/Bus Id``, ``FB Memory Usage/Total``,
    ``MIG Mode/Current`` and ``Pending``). MIG devices are not read from this format.

    Raises:
        GpuQueryError: no ``Driver Version`` line (not ``nvidia-smi -q`` output).
    """
    tree = parse_smi_q_tree(text)

    def get(nodes: list, *path: str) -> str | None:
        for node in nodes:
            if node[0] == path[0]:
                return absent(node[1]) if len(path) == 1 else get(node[2], *path[1:])
        return None

    top = {n[0]: n for n in tree}
    if "Driver Version" not in top:
        raise GpuQueryError("nvidia-smi -q printed no 'Driver Version' line")
    driver = get(tree, "Driver Version")
    cuda = get(tree, "CUDA Version")
    gpus = []
    sections = [n for n in tree if n[1] is None and n[0].startswith("GPU ")]
    for index, (key, _, children) in enumerate(sections):
        current = mig_mode(get(children, "MIG Mode", "Current"))
        gpus.append(
            GpuInfo(
                index=index,
                uuid=get(children, "GPU UUID") or "",
                name=get(children, "Product Name") or "",
                pci_bus_id=normalize_bus_id(get(children, "PCI", "Bus Id") or key[4:]),
                memory_mib=to_int(get(children, "FB Memory Usage", "Total")),
                driver_version=driver,
                cuda_driver_version=cuda,
                architecture=get(children, "Product Architecture"),
                mig_capable=current is not None,
                mig_mode_current=current,
                mig_mode_pending=mig_mode(get(children, "MIG Mode", "Pending")),
                serial=get(children, "Serial Number"),
                minor_number=to_int(get(children, "Minor Number")),
            )
        )
    return HostGpus("nvidia-smi", driver, cuda, gpus)


def parse_query_gpu(text: str, fields: list[str] | None = None) -> list[dict[str, str | None]]:
    """``nvidia-smi --query-gpu=... --format=csv[,noheader][,nounits]`` -> one dict per GPU,
    field name -> value (``None`` when absent, units such as `` MiB`` kept in the value).

    With ``fields`` the output has no header line (``noheader``); without, the first line is
    the header and its unit suffixes (``memory.total [MiB]``) are dropped from the names.

    Raises:
        GpuQueryError: a row with another number of columns than the header/fields.
    """
    lines = [ln for ln in text.splitlines() if ln.strip() and not ln.startswith(("$", "["))]
    if fields is None:
        if not lines:
            return []
        fields = [re.sub(r"\s*\[.*\]$", "", f.strip()) for f in lines[0].split(",")]
        lines = lines[1:]
    rows = []
    for line in lines:
        values = [v.strip() for v in line.split(",")]
        if len(values) != len(fields):
            raise GpuQueryError(
                f"nvidia-smi --query-gpu row has {len(values)} columns, expected "
                f"{len(fields)} ({','.join(fields)}): {line!r}"
            )
        rows.append({f: absent(v) for f, v in zip(fields, values, strict=True)})
    return rows


def gpu_from_query_row(row: dict[str, str | None], cuda: str | None = None) -> GpuInfo:
    """A :class:`GpuInfo` from one :func:`parse_query_gpu` row (``index``, ``uuid``,
    ``name``, ``pci.bus_id``, ``driver_version``, ``memory.total``, ``mig.mode.current``,
    ``mig.mode.pending``, ``compute_cap``, whichever are present)."""
    current = mig_mode(row.get("mig.mode.current"))
    cc = row.get("compute_cap")
    return GpuInfo(
        index=to_int(row.get("index")) or 0,
        uuid=row.get("uuid") or "",
        name=row.get("name") or "",
        pci_bus_id=normalize_bus_id(row.get("pci.bus_id")),
        memory_mib=to_int(row.get("memory.total")),
        driver_version=row.get("driver_version"),
        cuda_driver_version=cuda,
        compute_capability=cc,
        architecture=architecture_from_compute_capability(cc),
        mig_capable=current is not None,
        mig_mode_current=current,
        mig_mode_pending=mig_mode(row.get("mig.mode.pending")),
    )


@dataclass
class ListedGpu:
    """One ``GPU N: <name> (UUID: ...)`` entry of ``nvidia-smi -L`` with its MIG devices
    as ``(MIG device index, profile, uuid)``."""

    index: int
    name: str
    uuid: str
    migs: list[tuple[int, str, str]] = field(default_factory=list)


_L_GPU = re.compile(r"^\s*GPU (\d+): (.*?) \(UUID: (GPU-[^)\s]+)\)\s*$")
_L_MIG = re.compile(r"^\s*MIG (\S+)\s+Device\s+(\d+): \(UUID: (MIG-[^)\s]+)\)\s*$")


def parse_smi_list(text: str) -> list[ListedGpu]:
    """``nvidia-smi -L`` -> GPUs with their MIG devices (both the R470 ``Device  0`` and the
    older ``MIG 3g.20gb Device 0`` spacing).

    Raises:
        GpuQueryError: a MIG line before any GPU line.
    """
    gpus: list[ListedGpu] = []
    for line in text.splitlines():
        if m := _L_GPU.match(line):
            gpus.append(ListedGpu(int(m.group(1)), m.group(2), m.group(3)))
        elif m := _L_MIG.match(line):
            if not gpus:
                raise GpuQueryError(f"nvidia-smi -L: MIG device before any GPU: {line.strip()!r}")
            gpus[-1].migs.append((int(m.group(2)), m.group(1), m.group(3)))
    return gpus


_EMPTY_MIG = re.compile(
    r"No MIG-enabled devices found|No (GPU|compute) instances found", re.IGNORECASE
)
_LGI_ROW = re.compile(r"^\|\s*(\d+)\s+MIG\s+(\S+)\s+(\d+)\s+(\d+)\s+(\d+):(\d+)\s*\|$")
_LCI_ROW = re.compile(r"^\|\s*(\d+)\s+(\d+)\s+MIG\s+(\S+)\s+(\d+)\s+(\d+)(?:\s+(\d+):(\d+))?\s*\|$")


def _mig_list_error(text: str, what: str) -> None:
    for line in text.splitlines():
        if line.startswith(("Failed", "Unable")) or "Insufficient Permissions" in line:
            raise GpuQueryError(f"nvidia-smi mig {what}: {line.strip()}")


def parse_mig_lgi(text: str) -> list[dict[str, Any]]:
    """``nvidia-smi mig -lgi`` -> GPU instances as dicts ``gpu``, ``profile``
    (``1g.5gb``), ``gi_profile_id``, ``gi_id``, ``placement_start``, ``placement_size``
    (wide and narrow table layouts). ``No MIG-enabled devices found`` / ``No GPU instances
    found`` give an empty list.

    Raises:
        GpuQueryError: nvidia-smi refused (``Failed to display GPU instances: Insufficient
            Permissions`` when not root).
    """
    if _EMPTY_MIG.search(text):
        return []
    _mig_list_error(text, "-lgi")
    rows = []
    for line in text.splitlines():
        if m := _LGI_ROW.match(line.strip()):
            gpu, prof, pid, gid, start, size = m.groups()
            rows.append(
                {
                    "gpu": int(gpu),
                    "profile": prof,
                    "gi_profile_id": int(pid),
                    "gi_id": int(gid),
                    "placement_start": int(start),
                    "placement_size": int(size),
                }
            )
    return rows


def parse_mig_lci(text: str) -> list[dict[str, Any]]:
    """``nvidia-smi mig -lci`` -> compute instances as dicts ``gpu``, ``gi_id``,
    ``profile`` (``1c.3g.20gb``, ``1g.5gb``), ``ci_profile_id``, ``ci_id`` (the Placement
    column of newer drivers is ignored; a table cut before its closing border still
    parses). ``No compute instances found: Not Found`` gives an empty list.

    Raises:
        GpuQueryError: nvidia-smi refused (``Failed to display compute instances:
            Insufficient Permissions``).
    """
    if _EMPTY_MIG.search(text):
        return []
    _mig_list_error(text, "-lci")
    rows = []
    for line in text.splitlines():
        if m := _LCI_ROW.match(line.strip()):
            gpu, gid, prof, pid, cid = m.groups()[:5]
            rows.append(
                {
                    "gpu": int(gpu),
                    "gi_id": int(gid),
                    "profile": prof,
                    "ci_profile_id": int(pid),
                    "ci_id": int(cid),
                }
            )
    return rows


_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def parse_topo_matrix(text: str) -> dict[int, list[tuple[int, int]]]:
    """``nvidia-smi topo -m`` -> GPU index -> ``[(peer index, links)]`` for every ``NV<n>``
    cell (n bonded NVLinks). Other cells (``X``, ``SYS``, ``NODE``, ``PHB``, ``PXB``,
    ``PIX``) are not NVLink and are left out; NIC rows and columns are skipped.

    Raises:
        GpuQueryError: no header line with ``GPU<n>`` columns.
    """
    header: list[str] | None = None
    peers: dict[int, list[tuple[int, int]]] = {}
    for raw in text.splitlines():
        line = _ANSI.sub("", raw).rstrip("\n")
        cells = [c.strip() for c in line.split("\t")]
        if header is None:
            gpu_cols = [c for c in cells if re.fullmatch(r"GPU\d+", c)]
            if gpu_cols and not re.fullmatch(r"GPU\d+", cells[0]):
                header = gpu_cols
            continue
        if not cells or not re.fullmatch(r"GPU\d+", cells[0]):
            if cells and cells[0].startswith("Legend"):
                break
            continue
        me = int(cells[0][3:])
        peers[me] = []
        for col, cell in zip(header, cells[1 : 1 + len(header)], strict=False):
            if m := re.fullmatch(r"NV(\d+)", cell):
                peers[me].append((int(col[3:]), int(m.group(1))))
    if header is None:
        raise GpuQueryError("nvidia-smi topo -m printed no GPU matrix header")
    return peers


def parse_nvlink_status(text: str) -> dict[int, dict[int, float | None]]:
    """``nvidia-smi nvlink -s`` -> GPU index -> link number -> speed in GB/s (``None`` for
    an ``<inactive>`` link). A GPU without NVLink has no ``Link`` lines (empty dict)."""
    status: dict[int, dict[int, float | None]] = {}
    current: int | None = None
    for line in text.splitlines():
        if m := _L_GPU.match(line):
            current = int(m.group(1))
            status[current] = {}
        elif current is not None and (m := re.match(r"^\s*Link (\d+): (.*)$", line)):
            speed = re.match(r"([\d.]+) GB/s", m.group(2).strip())
            status[current][int(m.group(1))] = float(speed.group(1)) if speed else None
    return status


def assemble_mig_devices(
    gpu: GpuInfo,
    listed: ListedGpu | None,
    lgi: list[dict[str, Any]],
    lci: list[dict[str, Any]],
) -> list[MigDevice]:
    """The MIG devices of ``gpu`` from what each nvidia-smi listing gives.

    Rows of ``gpu.mig_devices`` (from ``-q -x``: index, GI ID, CI ID, memory) are the
    devices; without them the ``-lci`` rows are, sorted by (GI ID, CI ID) and indexed in
    that order (the order of the ``MIG devices`` table in every NVIDIA MIG guide example);
    without both, the ``-L`` entries. Then: GI profile, profile ID and placement from
    ``-lgi`` by GI ID; device profile and CI profile ID from ``-lci`` by (GI ID, CI ID);
    UUID from ``-L`` by MIG device index, taken only when ``-L``'s profile for that index
    is the device's profile (so a wrong index guess leaves the UUID empty rather than
    wrong).
    """
    lgi_by_gi = {r["gi_id"]: r for r in lgi if r["gpu"] == gpu.index}
    lci_mine = sorted(
        (r for r in lci if r["gpu"] == gpu.index), key=lambda r: (r["gi_id"], r["ci_id"])
    )
    lci_by_id = {(r["gi_id"], r["ci_id"]): r for r in lci_mine}
    listed_by_index = {i: (p, u) for i, p, u in (listed.migs if listed else [])}

    if gpu.mig_devices:
        devices = [MigDevice(**asdict(d)) for d in gpu.mig_devices]
    elif lci_mine:
        devices = [
            MigDevice(index=n, gi_id=r["gi_id"], ci_id=r["ci_id"], profile=None)
            for n, r in enumerate(lci_mine)
        ]
    else:
        devices = [
            MigDevice(index=i, gi_id=None, ci_id=None, profile=p)
            for i, (p, _) in sorted(listed_by_index.items())
        ]
    for dev in devices:
        gi_row = lgi_by_gi.get(dev.gi_id) if dev.gi_id is not None else None
        if gi_row:
            dev.gi_profile = gi_row["profile"]
            dev.gi_profile_id = gi_row["gi_profile_id"]
            dev.placement_start = gi_row["placement_start"]
            dev.placement_size = gi_row["placement_size"]
        ci_row = lci_by_id.get((dev.gi_id, dev.ci_id))
        if ci_row:
            dev.profile = ci_row["profile"]
            dev.ci_profile_id = ci_row["ci_profile_id"]
        entry = listed_by_index.get(dev.index) if dev.index is not None else None
        if dev.profile is None:
            dev.profile = entry[0] if entry else dev.gi_profile
        if entry and entry[0] == dev.profile:
            dev.uuid = entry[1]
    return devices


# ------------------------------------------------------------------ nvidia-smi backend


def _run(run_command: RunCommand, argv: list[str]) -> tuple[int, str, str]:
    try:
        rc, out, err = run_command(argv)
    except FileNotFoundError as exc:
        raise NoDriverError(f"{argv[0]} not found: {exc}") from exc
    except OSError as exc:
        raise GpuQueryError(f"cannot run {' '.join(argv)}: {exc}") from exc
    if rc == 127:
        raise NoDriverError(f"{argv[0]} not found (exit 127): {(err or out).strip()}")
    return rc, out or "", err or ""


def _failed(argv: list[str], rc: int, out: str, err: str) -> GpuQueryError:
    message = (err.strip() or out.strip() or "no output").splitlines()
    text = " ".join(line.strip() for line in message[:4])
    if "couldn't communicate with the NVIDIA driver" in text or rc == 9:
        return GpuQueryError(
            f"{' '.join(argv)} exited {rc}: {text}; the driver is installed but not loaded "
            "(load the nvidia kernel module, or reboot after installing the driver)"
        )
    return GpuQueryError(f"{' '.join(argv)} exited {rc}: {text}")


def collect_nvidia_smi(run_command: RunCommand, nvidia_smi: str = "nvidia-smi") -> HostGpus:
    """Query every GPU with the nvidia-smi commands listed in the module docstring.

    ``-q -x`` (or ``-q``) and the ``--query-gpu`` call are required; the MIG and NVLink
    listings add detail and, when they fail, leave a warning instead.

    Raises:
        NoDriverError: ``nvidia_smi`` does not exist (runner raised FileNotFoundError or
            the shell answered 127).
        GpuQueryError: nvidia-smi failed (driver not loaded, …) or printed what cannot be
            parsed.
    """
    smi = nvidia_smi
    warnings: list[str] = []
    rc, out, err = _run(run_command, [smi, "-q", "-x"])
    host: HostGpus | None = None
    if rc == 0:
        try:
            host = parse_smi_xml(out)
        except GpuQueryError as exc:
            warnings.append(f"{exc}; reading nvidia-smi -q instead")
    if host is None:
        rc2, out2, err2 = _run(run_command, [smi, "-q"])
        if rc2 != 0:
            raise (
                _failed([smi, "-q"], rc2, out2, err2)
                if rc == 0
                else _failed([smi, "-q", "-x"], rc, out, err)
            )
        host = parse_smi_q_text(out2)
    host.warnings = warnings

    argv = [smi, f"--query-gpu={QUERY_FIELDS}", "--format=csv"]
    rc, out, err = _run(run_command, argv)
    if rc == 0:
        rows = {r.get("uuid"): r for r in parse_query_gpu(out)}
        for gpu in host.gpus:
            row = rows.get(gpu.uuid)
            if row is None:
                warnings.append(f"GPU {gpu.index} ({gpu.uuid}) missing from --query-gpu output")
                continue
            gpu.compute_capability = row.get("compute_cap")
            gpu.architecture = gpu.architecture or architecture_from_compute_capability(
                gpu.compute_capability
            )
    else:
        warnings.append(f"compute capability not read: {_failed(argv, rc, out, err)}")

    listed: dict[str, ListedGpu] = {}
    rc, out, err = _run(run_command, [smi, "-L"])
    if rc == 0:
        listed = {g.uuid: g for g in parse_smi_list(out)}
    else:
        warnings.append(f"MIG device UUIDs not read: {_failed([smi, '-L'], rc, out, err)}")

    lgi: list[dict[str, Any]] = []
    lci: list[dict[str, Any]] = []
    if any(g.mig_mode_current == "Enabled" for g in host.gpus):
        for flag, parser, target in (
            ("-lgi", parse_mig_lgi, lgi),
            ("-lci", parse_mig_lci, lci),
        ):
            rc, out, err = _run(run_command, [smi, "mig", flag])
            try:
                target.extend(parser(out + "\n" + err))
            except GpuQueryError as exc:
                warnings.append(f"{exc} (MIG profiles and placements left empty)")
                continue
            if rc != 0 and not _EMPTY_MIG.search(out + err):
                warnings.append(str(_failed([smi, "mig", flag], rc, out, err)))
    for gpu in host.gpus:
        if gpu.mig_mode_current == "Enabled" or gpu.mig_devices:
            gpu.mig_devices = assemble_mig_devices(gpu, listed.get(gpu.uuid), lgi, lci)

    if len(host.gpus) > 1:
        by_index = {g.index: g for g in host.gpus}
        rc, out, err = _run(run_command, [smi, "topo", "-m"])
        if rc == 0:
            for me, peers in parse_topo_matrix(out).items():
                if me not in by_index:
                    continue
                by_index[me].nvlink_peers = [
                    NvLinkPeer(
                        index=p,
                        uuid=by_index[p].uuid if p in by_index else None,
                        pci_bus_id=by_index[p].pci_bus_id if p in by_index else None,
                        links=n,
                    )
                    for p, n in peers
                ]
        else:
            warnings.append(f"NVLink peers not read: {_failed([smi, 'topo', '-m'], rc, out, err)}")
        rc, out, err = _run(run_command, [smi, "nvlink", "-s"])
        if rc == 0:
            for idx, links in parse_nvlink_status(out).items():
                if idx in by_index:
                    by_index[idx].nvlink_active_links = sum(
                        1 for s in links.values() if s is not None
                    )
        else:
            warnings.append(
                f"NVLink links not read: {_failed([smi, 'nvlink', '-s'], rc, out, err)}"
            )
    return host


# ------------------------------------------------------------------ NVML backend


def load_nvml() -> Any | None:
    """The ``pynvml`` module (nvidia-ml-py), or ``None`` when it is not importable."""
    try:
        return importlib.import_module("pynvml")
    except ImportError:
        return None


def _nvml_text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def collect_nvml(nv: Any) -> HostGpus:
    """Query every GPU through NVML (``nv`` is the imported ``pynvml``).

    Per GPU: ``nvmlDeviceGetName``, ``GetUUID``, ``GetPciInfo().busId``,
    ``GetMemoryInfo().total`` (bytes -> MiB), ``GetCudaComputeCapability``,
    ``GetArchitecture`` (:data:`NVML_ARCHITECTURES`), ``GetMigMode``, ``GetSerial``,
    ``GetMinorNumber``; MIG devices by ``GetMaxMigDeviceCount`` and
    ``GetMigDeviceHandleByIndex`` with ``GetGpuInstanceId``/``GetComputeInstanceId``,
    ``GetGpuInstanceById`` + ``nvmlGpuInstanceGetInfo`` (profile ID, placement) and the
    GI/CI profile tables for names; with two GPUs or more, NVLink peers by
    ``GetP2PStatus(.., NVML_P2P_CAPS_INDEX_NVLINK)`` and the active links' remote PCI bus
    ids. ``NVML_ERROR_NOT_SUPPORTED`` means absent.

    Raises:
        NoDriverError: ``nvmlInit`` cannot find ``libnvidia-ml.so.1``.
        GpuQueryError: ``nvmlInit`` failed otherwise (driver not loaded, …) or an NVML call
            that every GPU answers failed.
    """
    not_supported = {
        nv.NVML_ERROR_NOT_SUPPORTED,
        getattr(nv, "NVML_ERROR_FUNCTION_NOT_FOUND", 13),
    }
    warnings: list[str] = []

    def optional(fn: Callable[..., Any], *args: Any) -> Any:
        try:
            return fn(*args)
        except nv.NVMLError as exc:
            if exc.value in not_supported:
                return None
            raise GpuQueryError(f"NVML {fn.__name__}: {exc}") from exc

    try:
        nv.nvmlInit()
    except nv.NVMLError as exc:
        if exc.value == nv.NVML_ERROR_LIBRARY_NOT_FOUND:
            raise NoDriverError(f"NVML library not found: {exc}") from exc
        raise GpuQueryError(f"nvmlInit failed: {exc}") from exc
    try:
        driver = _nvml_text(nv.nvmlSystemGetDriverVersion())
        cuda = cuda_version_from_int(optional(nv.nvmlSystemGetCudaDriverVersion))
        handles = [nv.nvmlDeviceGetHandleByIndex(i) for i in range(nv.nvmlDeviceGetCount())]
        gpus = []
        for index, h in enumerate(handles):
            cc = optional(nv.nvmlDeviceGetCudaComputeCapability, h)
            cc_text = f"{cc[0]}.{cc[1]}" if cc else None
            arch = optional(nv.nvmlDeviceGetArchitecture, h)
            modes = optional(nv.nvmlDeviceGetMigMode, h)
            serial = optional(nv.nvmlDeviceGetSerial, h)
            gpu = GpuInfo(
                index=index,
                uuid=_nvml_text(nv.nvmlDeviceGetUUID(h)),
                name=_nvml_text(nv.nvmlDeviceGetName(h)),
                pci_bus_id=normalize_bus_id(_nvml_text(nv.nvmlDeviceGetPciInfo(h).busId)),
                memory_mib=int(nv.nvmlDeviceGetMemoryInfo(h).total) // MIB,
                driver_version=driver,
                cuda_driver_version=cuda,
                compute_capability=cc_text,
                architecture=NVML_ARCHITECTURES.get(arch) if arch is not None else None,
                mig_capable=modes is not None,
                mig_mode_current=mig_mode(str(modes[0])) if modes else None,
                mig_mode_pending=mig_mode(str(modes[1])) if modes else None,
                serial=absent(_nvml_text(serial)) if serial is not None else None,
                minor_number=optional(nv.nvmlDeviceGetMinorNumber, h),
            )
            if gpu.architecture is None:
                gpu.architecture = architecture_from_compute_capability(cc_text)
            if gpu.mig_mode_current == "Enabled":
                gpu.mig_devices = _nvml_mig_devices(nv, h, optional, warnings)
            gpus.append(gpu)
        if len(gpus) > 1:
            _nvml_nvlink(nv, handles, gpus, optional)
        return HostGpus("nvml", driver, cuda, gpus, warnings)
    finally:
        with contextlib.suppress(nv.NVMLError):
            nv.nvmlShutdown()


def _nvml_mig_devices(
    nv: Any, h: Any, optional: Callable[..., Any], warnings: list[str]
) -> list[MigDevice]:
    gi_profiles: dict[int, tuple[str | None, int]] = {}
    for p in range(nv.NVML_GPU_INSTANCE_PROFILE_COUNT):
        info = optional(nv.nvmlDeviceGetGpuInstanceProfileInfo, h, p)
        if info is not None:
            gi_profiles[int(info.id)] = (profile_name(_nvml_text(info.name)), int(info.sliceCount))
    devices = []
    for mi in range(optional(nv.nvmlDeviceGetMaxMigDeviceCount, h) or 0):
        try:
            mh = nv.nvmlDeviceGetMigDeviceHandleByIndex(h, mi)
        except nv.NVMLError as exc:
            if exc.value in (nv.NVML_ERROR_NOT_FOUND, nv.NVML_ERROR_INVALID_ARGUMENT):
                continue
            raise GpuQueryError(f"NVML nvmlDeviceGetMigDeviceHandleByIndex({mi}): {exc}") from exc
        name = _nvml_text(nv.nvmlDeviceGetName(mh))
        dev = MigDevice(
            index=mi,
            gi_id=int(nv.nvmlDeviceGetGpuInstanceId(mh)),
            ci_id=int(nv.nvmlDeviceGetComputeInstanceId(mh)),
            profile=name.split(" MIG ", 1)[1].strip() if " MIG " in name else None,
            uuid=_nvml_text(nv.nvmlDeviceGetUUID(mh)),
            memory_mib=int(nv.nvmlDeviceGetMemoryInfo(mh).total) // MIB,
        )
        try:
            gi = nv.nvmlDeviceGetGpuInstanceById(h, dev.gi_id)
            gi_info = nv.nvmlGpuInstanceGetInfo(gi)
            dev.gi_profile_id = int(gi_info.profileId)
            dev.placement_start = int(gi_info.placement.start)
            dev.placement_size = int(gi_info.placement.size)
            dev.gi_profile, gi_slices = gi_profiles.get(dev.gi_profile_id, (None, 0))
            ci_info = nv.nvmlComputeInstanceGetInfo(
                nv.nvmlGpuInstanceGetComputeInstanceById(gi, dev.ci_id)
            )
            dev.ci_profile_id = int(ci_info.profileId)
            for p in range(nv.NVML_COMPUTE_INSTANCE_PROFILE_COUNT):
                ci_prof = optional(
                    nv.nvmlGpuInstanceGetComputeInstanceProfileInfo,
                    gi,
                    p,
                    nv.NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED,
                )
                if ci_prof is not None and int(ci_prof.id) == dev.ci_profile_id:
                    if dev.gi_profile and int(ci_prof.sliceCount) < gi_slices:
                        dev.profile = f"{int(ci_prof.sliceCount)}c.{dev.gi_profile}"
                    elif dev.gi_profile:
                        dev.profile = dev.gi_profile
                    break
        except nv.NVMLError as exc:
            warnings.append(
                f"MIG device {mi}: GPU/compute instance details not read ({exc}); "
                "root is needed for them"
            )
        devices.append(dev)
    return devices


def _nvml_nvlink(
    nv: Any, handles: list[Any], gpus: list[GpuInfo], optional: Callable[..., Any]
) -> None:
    by_bus = {g.pci_bus_id: g for g in gpus}
    for gpu, h in zip(gpus, handles, strict=True):
        remote_links: dict[str | None, int] = {}
        active = 0
        for link in range(nv.NVML_NVLINK_MAX_LINKS):
            try:
                state = nv.nvmlDeviceGetNvLinkState(h, link)
            except nv.NVMLError:
                break
            if not state:
                continue
            active += 1
            remote = optional(nv.nvmlDeviceGetNvLinkRemotePciInfo, h, link)
            bus = normalize_bus_id(_nvml_text(remote.busId)) if remote is not None else None
            remote_links[bus] = remote_links.get(bus, 0) + 1
        gpu.nvlink_active_links = active
        for other, oh in zip(gpus, handles, strict=True):
            if other is gpu:
                continue
            status = optional(nv.nvmlDeviceGetP2PStatus, h, oh, nv.NVML_P2P_CAPS_INDEX_NVLINK)
            if status != nv.NVML_P2P_STATUS_OK:
                continue
            direct = remote_links.get(other.pci_bus_id, 0)
            # Through NVSwitch every active link reaches every peer (topo -m prints NV<all>).
            switched = sum(n for bus, n in remote_links.items() if bus not in by_bus)
            gpu.nvlink_peers.append(
                NvLinkPeer(other.index, other.uuid, other.pci_bus_id, direct or switched)
            )


# ------------------------------------------------------------------ entry points


def collect_host(
    run_command: RunCommand,
    backend: str = "auto",
    nvidia_smi: str | None = "nvidia-smi",
) -> HostGpus:
    """The GPUs of this host through ``backend``.

    ``auto`` uses NVML when ``pynvml`` imports and ``nvmlInit`` succeeds, else nvidia-smi.
    ``nvidia_smi`` is the program to run (``None``: known to be missing).

    Raises:
        ValueError: ``backend`` is not one of :data:`BACKENDS`.
        NoDriverError: no NVML library and no nvidia-smi (``auto``), or the chosen backend's
            one is missing.
        GpuQueryError: ``backend=nvml`` without ``pynvml``; a query failed.
    """
    if backend not in BACKENDS:
        raise ValueError(f"backend={backend!r} is not one of {', '.join(BACKENDS)}")
    nvml_reason = None
    nvml_warning = None
    if backend in ("auto", "nvml"):
        nv = load_nvml()
        if nv is None:
            nvml_reason = "the Python module pynvml (package nvidia-ml-py) is not importable"
            if backend == "nvml":
                raise GpuQueryError(
                    f"backend=nvml: {nvml_reason}; fix: install nvidia-ml-py for the Python "
                    "that runs the module, or set backend=auto"
                )
        else:
            try:
                return collect_nvml(nv)
            except NoDriverError as exc:
                if backend == "nvml":
                    raise
                nvml_reason = str(exc)
            except GpuQueryError as exc:
                if backend == "nvml":
                    raise
                nvml_warning = f"NVML failed, nvidia-smi used instead: {exc}"
    if nvidia_smi is None:
        raise NoDriverError(
            "nvidia-smi is not installed"
            + (f" and NVML is not usable ({nvml_reason})" if nvml_reason else "")
        )
    try:
        host = collect_nvidia_smi(run_command, nvidia_smi)
        if nvml_warning:
            host.warnings.insert(0, nvml_warning)
        return host
    except NoDriverError as exc:
        raise NoDriverError(
            f"{exc}" + (f"; NVML is not usable either ({nvml_reason})" if nvml_reason else "")
        ) from exc


def collect(
    run_command: RunCommand, backend: str = "auto", nvidia_smi: str | None = "nvidia-smi"
) -> list[GpuInfo]:
    """The GPUs of this host in index order (see :func:`collect_host` for arguments and
    errors)."""
    return collect_host(run_command, backend, nvidia_smi).gpus
