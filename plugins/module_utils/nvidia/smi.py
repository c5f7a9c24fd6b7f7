# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""Parsers of ``nvidia-smi`` output, checked against real captures
(``tests/unit/data/gpu/``): ``-q -x`` (``parse_smi_xml``), ``-q`` text
(``parse_smi_q_text``), ``--query-gpu`` CSV (``parse_query_gpu``), ``-L``
(``parse_smi_list``), ``mig -lgi``/``-lci`` (``parse_mig_lgi``, ``parse_mig_lci``),
``topo -m`` and ``nvlink -s`` (``parse_topo_matrix``, ``parse_nvlink_status``), and the
MIG devices assembled from them (``assemble_mig_devices``). Each raises ``GpuQueryError``
for output it cannot read.

Standard library only (the boot-time MIG apply copies this file to the node).
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from dataclasses import asdict, dataclass, field
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils.nvidia.gpu import (
    GpuInfo,
    GpuQueryError,
    HostGpus,
    MigDevice,
    absent,
    architecture_from_compute_capability,
    mig_mode,
    normalize_bus_id,
    to_int,
)

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
    for index, (key, _unused, children) in enumerate(sections):
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


EMPTY_MIG = re.compile(
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
    if EMPTY_MIG.search(text):
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
    if EMPTY_MIG.search(text):
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
            for i, (p, _unused) in sorted(listed_by_index.items())
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
