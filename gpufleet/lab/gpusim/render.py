"""Output formats of the ``nvidia-smi`` simulator: pure functions from state to text.

Every layout is copied from real output: the H200 captures of driver 580.159.04
(``tests/unit/data/gpu/h200-single/``, ``h200-x2-nvlink/``) byte for byte, the MIG
tables from the public captures (``tests/unit/data/gpu/public/``, see its INDEX.md).
Where no capture exists the function says so and which source it follows.
"""

from __future__ import annotations

import string
from importlib import resources
from xml.sax.saxutils import escape

from gpufleet.lab.gpusim import hardware, mig
from gpufleet.lab.gpusim.hardware import Readings
from gpufleet.lab.gpusim.state import Gpu, State

# --- -L -------------------------------------------------------------------------------


def render_list(gpus: list[Gpu]) -> str:
    """``nvidia-smi -L``: one line per GPU, then one per MIG device (CI).

    MIG line layout: ``  MIG 1g.5gb      Device  0: (UUID: MIG-...)`` (public
    ``a100-pcie-40gb/L.txt``, ``h100-80gb-hbm3/nvdocs-L-r570-ci.txt``).
    """
    lines = []
    for gpu in gpus:
        lines.append(f"GPU {gpu.index}: {gpu.name} (UUID: {gpu.uuid})")
        if gpu.mig_mode_current == "Enabled":
            for n, (_gi, ci) in enumerate(mig.mig_devices(gpu)):
                lines.append(f"  MIG {ci.profile:<12}Device {n:>2}: (UUID: {ci.uuid})")
    return "".join(line + "\n" for line in lines)


# --- plain nvidia-smi -----------------------------------------------------------------

_W1, _W2, _W3 = 41, 24, 22
_FULL = _W1 + _W2 + _W3 + 2  # 89 characters between the outer bars


def _sep(char: str = "-") -> str:
    end = "|" if char == "=" else "+"
    return end + char * _W1 + "+" + char * _W2 + "+" + char * _W3 + end


def _full(text: str = "", char: str = " ") -> str:
    return "|" + text.ljust(_FULL, char) + "|"


def _used_mib(gpu: Gpu) -> int:
    return sum(p.used_memory_mib for p in gpu.processes)


def _mig_cell(gpu: Gpu) -> str:
    return gpu.mig_mode_current if gpu.mig_capable else "N/A"


def _name_cell(name: str, width: int = 31) -> str:
    return name if len(name) <= width else name[: width - 3] + "..."


def render_table(state: State, gpus: list[Gpu], readings: Readings) -> str:
    """Plain ``nvidia-smi``: GPU table, MIG devices table (when MIG is on), processes.

    GPU and process tables: R580 layout of ``h200-single/smi-plain.txt``. MIG devices
    table: R580 layout of ``public/h100-80gb-hbm3/nvdocs-smi-mig-mps-580.txt``; its
    memory "Used" is the sum of the GPU's processes (0 when idle; a real GPU shows a few
    MiB of context). No capture shows an R580 process row: its columns follow the R580
    header and the older rows of ``nvdocs-smi-mig-devices-processes.txt``.
    """
    out = [readings.timestamp + " " * 7]
    head = (
        f" NVIDIA-SMI {state.driver_version:<22} Driver Version: {state.driver_version:<15}"
        f"CUDA Version: {state.cuda_version:<9}"
    )
    out.append("+" + "-" * _FULL + "+")
    out.append("|" + head + "|")
    out.append(_sep())
    out += [
        "| GPU  Name                 Persistence-M | Bus-Id          Disp.A "
        "| Volatile Uncorr. ECC |",
        "| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage "
        "| GPU-Util  Compute M. |",
        "|                                         |                        "
        "|               MIG M. |",
    ]
    out.append(_sep("="))
    for gpu in gpus:
        r = readings.gpu(gpu.index)
        b = hardware.board(gpu.name)
        mig_on = gpu.mig_mode_current == "Enabled"
        c1 = f"{gpu.index:>4}  {_name_cell(gpu.name):<31}{'On':<3} "
        c2 = f"   {gpu.pci_bus_id} Off "
        c3 = f"{'On' if mig_on else '0':>21} "
        out.append(f"|{c1}|{c2}|{c3}|")
        c1 = f" N/A  {r['temp']:>3}C    P0{r['power_w']:>15}W / {int(b.power_limit_w):>4}W "
        c2 = f"{_used_mib(gpu):>8}MiB / {gpu.memory_mib:>6}MiB "
        c3 = f"{'N/A' if mig_on else '0%':>8}{'Default':>13} "
        out.append(f"|{c1}|{c2}|{c3}|")
        out.append(f"|{'':{_W1}}|{'':{_W2}}|{_mig_cell(gpu):>21} |")
        out.append(_sep())
    out.append("")
    mig_gpus = [g for g in gpus if g.mig_mode_current == "Enabled"]
    if mig_gpus:
        out.extend(_mig_devices_table(mig_gpus))
        out.append("")
    out.extend(_processes_table(gpus))
    return "\n".join(out) + "\n"


_M1, _M2, _M3, _M4 = 18, 34, 11, 23


def _msep(char: str = "-", blank_memory: bool = False) -> str:
    mem = " " * _M2 if blank_memory else char * _M2
    end = "|" if char == "=" else "+"
    return end + char * _M1 + "+" + mem + "+" + char * _M3 + "+" + char * _M4 + end


def _mig_devices_table(gpus: list[Gpu]) -> list[str]:
    out = [
        "+" + "-" * _FULL + "+",
        _full(" MIG devices:"),
        _msep(),
        "| GPU  GI  CI  MIG |              Shared Memory-Usage "
        "|        Vol|        Shared         |",
        "|      ID  ID  Dev |                Shared BAR1-Usage "
        "| SM     Unc| CE ENC  DEC  OFA  JPG |",
        "|                  |                                  "
        "|        ECC|                       |",
        _msep("="),
    ]
    rows: list[tuple[Gpu, mig.GpuInstance, mig.ComputeInstance, int]] = []
    for gpu in gpus:
        for n, (gi, ci) in enumerate(mig.mig_devices(gpu)):
            rows.append((gpu, gi, ci, n))
    if not rows:
        out.append(_full("  No MIG devices found"))
        out.append("+" + "-" * _FULL + "+")
        return out
    for i, (gpu, gi, ci, n) in enumerate(rows):
        first_of_gi = i == 0 or rows[i - 1][1] is not gi or rows[i - 1][0] is not gpu
        b = hardware.board(gpu.name)
        model_slices = 4 if gi.memory_mib and "A30" in gpu.name else 8
        bar1 = b.bar1_mib * gi.placement_size // model_slices - 1
        used = _used_mib(gpu) if gi is mig.mig_devices(gpu)[0][0] else 0
        c1 = f"{gpu.index:>3}{gi.id:>5}{ci.id:>4}{n:>4}  "
        mem = f"{f'{used}MiB / {gi.memory_mib}MiB':>30}    " if first_of_gi else " " * _M2
        bar = f"{f'0MiB / {bar1}MiB':>30}    " if first_of_gi else " " * _M2
        c3 = f"{ci.multiprocessors:>3}{0:>7} "
        c4 = (
            f"{gi.copy_engines:>3}{gi.encoders:>4}{gi.decoders:>5}"
            f"{gi.ofa_engines:>5}{gi.jpeg_engines:>5} "
        )
        out.append(f"|{c1}|{mem}|{c3}|{c4}|")
        out.append(f"|{'':{_M1}}|{bar}|{'':{_M3}}|{'':{_M4}}|")
        last_of_gi = i == len(rows) - 1 or rows[i + 1][1] is not gi
        out.append(_msep(blank_memory=not last_of_gi))
    return out


def _process_name(name: str, width: int = 35) -> str:
    return name if len(name) <= width else "..." + name[-(width - 3) :]


def _processes_table(gpus: list[Gpu]) -> list[str]:
    out = [
        "+" + "-" * _FULL + "+",
        _full(" Processes:"),
        _full(
            "  GPU   GI   CI              PID   Type   Process name"
            "                        GPU Memory"
        ),
        _full(
            "        ID   ID                                                               Usage"
        ),
        "|" + "=" * _FULL + "|",
    ]
    rows = [(g, p) for g in gpus for p in g.processes]
    if not rows:
        out.append(_full("  No running processes found"))
    for gpu, p in rows:
        out.append(
            # Non-MIG rows print GI/CI "N/A" one column right of the numeric IDs, as
            # real nvidia-smi does ("|    0   N/A  N/A      2150      G   ...").
            f"|  {gpu.index:>3}   N/A  N/A{p.pid:>16}{'C':>7}   "
            f"{_process_name(p.name):<35}{f'{p.used_memory_mib}MiB':>11} |"
        )
    out.append("+" + "-" * _FULL + "+")
    return out


# --- -q and -q -x ---------------------------------------------------------------------


def _template(name: str) -> string.Template:
    text = resources.files("gpufleet.lab.gpusim").joinpath("templates", name).read_text()
    return string.Template(text)


def _values(state: State, gpu: Gpu, readings: Readings, xml: bool) -> dict[str, str]:
    r = readings.gpu(gpu.index)
    b = hardware.board(gpu.name)
    domain, bus, rest = gpu.pci_bus_id.split(":")
    device = rest.split(".")[0]
    used = _used_mib(gpu)
    reserved = b.reserved_mib
    brand = "NVIDIA" if gpu.brand.lower() == "nvidia" else gpu.brand
    mig_current = gpu.mig_mode_current if gpu.mig_capable else "N/A"
    mig_pending = gpu.mig_mode_pending if gpu.mig_capable else "N/A"
    values = {
        "bus_id": gpu.pci_bus_id,
        "product_name": gpu.name,
        "brand": brand,
        "architecture": gpu.architecture,
        "persistence_mode": "Enabled",
        # the state's addressing_mode (NVML's), "N/A" where the GPU reports none
        "addressing_mode": gpu.addressing_mode or "N/A",
        "mig_current": mig_current,
        "mig_pending": mig_pending,
        "serial": gpu.serial,
        "uuid": gpu.uuid,
        "pdi": str(r["pdi"]),
        "minor": str(gpu.minor),
        "vbios": b.vbios,
        "board_id": str(r["board_id"]),
        "board_part": b.board_part,
        "gpu_part": b.gpu_part,
        "module_id": str(r["module_id"]),
        "driver_version": state.driver_version,
        "pci_bus_hex": "0x" + bus[-2:],
        "pci_device_hex": "0x" + device,
        "pci_domain_hex": "0x" + domain[-4:],
        "pci_bus": bus[-2:],
        "pci_device": device,
        "pci_domain": domain[-4:],
        "device_id_hex": "0x" + b.device_id,
        "device_id": b.device_id,
        "subsystem_id_hex": "0x" + b.subsystem_id,
        "subsystem_id": b.subsystem_id,
        "replays": str(r["replays"]),
        "tx": f"{r['tx']} KB/s",
        "rx": f"{r['rx']} KB/s",
        "fb_total": f"{gpu.memory_mib} MiB",
        "fb_reserved": f"{reserved} MiB",
        "fb_used": f"{used} MiB",
        "fb_free": f"{gpu.memory_mib - reserved - used + 1} MiB",
        "bar1_total": f"{b.bar1_mib} MiB",
        "bar1_used": "1 MiB",
        "bar1_free": f"{b.bar1_mib - 1} MiB",
        "gpu_util": "N/A" if gpu.mig_mode_current == "Enabled" else "0 %",
        "temp": f"{r['temp']} C",
        "tlimit": f"{r['tlimit']} C",
        "mem_temp": f"{r['mem_temp']} C",
        "power_avg": f"{r['power_avg']} W",
        "power_inst": f"{r['power_inst']} W",
        "power_limit": f"{b.power_limit_w:.2f} W",
        "power_min": f"{b.power_min_w:.2f} W",
        "mem_power_avg": f"{r['mem_power_avg']} W",
        "fabric_state": str(r["fabric_state"]),
        "fabric_status": str(r["fabric_status"]),
        "fabric_clique": str(r["fabric_clique"]),
        "fabric_cluster": str(r["fabric_cluster"]),
    }
    if xml:
        values = {k: escape(v) for k, v in values.items()}
    return values


def _q_label(indent: int, label: str, value: object) -> str:
    return (" " * indent + label).ljust(55) + f": {value}"


def _q_mig_devices(gpu: Gpu) -> list[str]:
    """``-q`` MIG Devices block. No capture of it exists here: the labels follow the
    ``MIG Devices`` section of the nvidia-smi manual page (R580), indented as the
    captured blocks."""
    if gpu.mig_mode_current != "Enabled":
        return []
    devices = mig.mig_devices(gpu)
    if not devices:
        return [_q_label(4, "MIG Devices", "None")]
    b = hardware.board(gpu.name)
    out = ["    MIG Devices"]
    for n, (gi, ci) in enumerate(devices):
        bar1 = b.bar1_mib * gi.placement_size // 8 - 1
        out += [
            "        MIG Device",
            _q_label(12, "Index", n),
            _q_label(12, "GPU Instance ID", gi.id),
            _q_label(12, "Compute Instance ID", ci.id),
            "            Device Attributes",
            "                Shared",
            _q_label(20, "Multiprocessor count", ci.multiprocessors),
            _q_label(20, "Copy Engine count", gi.copy_engines),
            _q_label(20, "Encoder count", gi.encoders),
            _q_label(20, "Decoder count", gi.decoders),
            _q_label(20, "OFA count", gi.ofa_engines),
            _q_label(20, "JPG count", gi.jpeg_engines),
            "            ECC Errors",
            "                Volatile",
            _q_label(20, "SRAM Uncorrectable", 0),
            "            FB Memory Usage",
            _q_label(16, "Total", f"{gi.memory_mib} MiB"),
            _q_label(16, "Reserved", "0 MiB"),
            _q_label(16, "Used", "0 MiB"),
            _q_label(16, "Free", f"{gi.memory_mib} MiB"),
            "            BAR1 Memory Usage",
            _q_label(16, "Total", f"{bar1} MiB"),
            _q_label(16, "Used", "0 MiB"),
            _q_label(16, "Free", f"{bar1} MiB"),
        ]
    return out


def _q_processes(gpu: Gpu) -> list[str]:
    """``-q`` Processes block; with processes, the labels of the nvidia-smi manual page."""
    if not gpu.processes:
        return [_q_label(4, "Processes", "None")]
    out = ["    Processes"]
    for p in gpu.processes:
        out += [
            _q_label(8, "GPU instance ID", "N/A"),
            _q_label(8, "Compute instance ID", "N/A"),
            _q_label(8, "Process ID", p.pid),
            _q_label(12, "Type", "C"),
            _q_label(12, "Name", p.name),
            _q_label(12, "Used GPU Memory", f"{p.used_memory_mib} MiB"),
        ]
    return out


def render_q(state: State, gpus: list[Gpu], readings: Readings) -> str:
    """``nvidia-smi -q``: the R580 layout of ``h200-single/smi-q.txt``, one block per GPU."""
    tpl = _template("q_gpu.txt")
    out = [
        "",
        "==============NVSMI LOG==============",
        "",
        _q_label(0, "Timestamp", readings.timestamp),
        _q_label(0, "Driver Version", state.driver_version),
        _q_label(0, "CUDA Version", state.cuda_version),
        "",
        _q_label(0, "Attached GPUs", len(state.gpus)),
    ]
    for gpu in gpus:
        block = tpl.substitute(_values(state, gpu, readings, xml=False)).rstrip("\n")
        for line in block.split("\n"):
            if line == "@@MIG_DEVICES@@":
                out.extend(_q_mig_devices(gpu))
            elif line == "@@PROCESSES@@":
                out.extend(_q_processes(gpu))
            else:
                out.append(line)
        out.append("")
    return "\n".join(out) + "\n"


def _x_mig_devices(gpu: Gpu) -> list[str]:
    """``-q -x`` ``<mig_devices>``; with devices, element names of the nvsmi DTD
    (``nvsmi_device_v13.dtd``: mig_device, index, gpu_instance_id, ...); no capture."""
    devices = mig.mig_devices(gpu) if gpu.mig_mode_current == "Enabled" else []
    if not devices:
        return ["\t\t<mig_devices>", "\t\t\tNone", "\t\t</mig_devices>"]
    b = hardware.board(gpu.name)
    out = ["\t\t<mig_devices>"]
    for n, (gi, ci) in enumerate(devices):
        bar1 = b.bar1_mib * gi.placement_size // 8 - 1
        t = "\t\t\t"
        out += [
            f"{t}<mig_device>",
            f"{t}\t<index>{n}</index>",
            f"{t}\t<gpu_instance_id>{gi.id}</gpu_instance_id>",
            f"{t}\t<compute_instance_id>{ci.id}</compute_instance_id>",
            f"{t}\t<device_attributes>",
            f"{t}\t\t<shared>",
            f"{t}\t\t\t<multiprocessor_count>{ci.multiprocessors}</multiprocessor_count>",
            f"{t}\t\t\t<copy_engine_count>{gi.copy_engines}</copy_engine_count>",
            f"{t}\t\t\t<encoder_count>{gi.encoders}</encoder_count>",
            f"{t}\t\t\t<decoder_count>{gi.decoders}</decoder_count>",
            f"{t}\t\t\t<ofa_count>{gi.ofa_engines}</ofa_count>",
            f"{t}\t\t\t<jpg_count>{gi.jpeg_engines}</jpg_count>",
            f"{t}\t\t</shared>",
            f"{t}\t</device_attributes>",
            f"{t}\t<ecc_error_count>",
            f"{t}\t\t<volatile_count>",
            f"{t}\t\t\t<sram_uncorrectable>0</sram_uncorrectable>",
            f"{t}\t\t</volatile_count>",
            f"{t}\t</ecc_error_count>",
            f"{t}\t<fb_memory_usage>",
            f"{t}\t\t<total>{gi.memory_mib} MiB</total>",
            f"{t}\t\t<reserved>0 MiB</reserved>",
            f"{t}\t\t<used>0 MiB</used>",
            f"{t}\t\t<free>{gi.memory_mib} MiB</free>",
            f"{t}\t</fb_memory_usage>",
            f"{t}\t<bar1_memory_usage>",
            f"{t}\t\t<total>{bar1} MiB</total>",
            f"{t}\t\t<used>0 MiB</used>",
            f"{t}\t\t<free>{bar1} MiB</free>",
            f"{t}\t</bar1_memory_usage>",
            f"{t}</mig_device>",
        ]
    out.append("\t\t</mig_devices>")
    return out


def _x_processes(gpu: Gpu) -> list[str]:
    """``<processes>``: empty as captured; entries use the nvsmi DTD ``process_info``."""
    out = ["\t\t<processes>"]
    for p in gpu.processes:
        t = "\t\t\t"
        out += [
            f"{t}<process_info>",
            f"{t}\t<gpu_instance_id>N/A</gpu_instance_id>",
            f"{t}\t<compute_instance_id>N/A</compute_instance_id>",
            f"{t}\t<pid>{p.pid}</pid>",
            f"{t}\t<type>C</type>",
            f"{t}\t<process_name>{escape(p.name)}</process_name>",
            f"{t}\t<used_memory>{p.used_memory_mib} MiB</used_memory>",
            f"{t}</process_info>",
        ]
    out.append("\t\t</processes>")
    return out


def render_q_xml(state: State, gpus: list[Gpu], readings: Readings) -> str:
    """``nvidia-smi -q -x``: the layout of ``h200-single/smi-q.xml`` (tabs, DTD v13)."""
    tpl = _template("q_gpu.xml")
    out = [
        '<?xml version="1.0" ?>',
        '<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v13.dtd">',
        "<nvidia_smi_log>",
        f"\t<timestamp>{escape(readings.timestamp)}</timestamp>",
        f"\t<driver_version>{escape(state.driver_version)}</driver_version>",
        f"\t<cuda_version>{escape(state.cuda_version)}</cuda_version>",
        f"\t<attached_gpus>{len(state.gpus)}</attached_gpus>",
    ]
    for gpu in gpus:
        block = tpl.substitute(_values(state, gpu, readings, xml=True)).rstrip("\n")
        for line in block.split("\n"):
            if line == "@@MIG_DEVICES@@":
                out.extend(_x_mig_devices(gpu))
            elif line == "@@PROCESSES@@":
                out.extend(_x_processes(gpu))
            else:
                out.append(line)
        out.append("")
    out.append("</nvidia_smi_log>")
    return "\n".join(out) + "\n"


# --- --query-gpu / --query-compute-apps ----------------------------------------------


class QueryError(Exception):
    """A ``--query-*`` field nvidia-smi does not know; the message is nvidia-smi's."""


def _gpu_field(state: State, gpu: Gpu, field: str, units: bool) -> tuple[str, str]:
    """(header, value) of one ``--query-gpu`` field; names from ``--help-query-gpu``."""
    mib = " MiB" if units else ""
    mig_na = "[N/A]"
    b = hardware.board(gpu.name)
    used = _used_mib(gpu)
    table: dict[str, tuple[str, str]] = {
        "index": ("index", str(gpu.index)),
        "count": ("count", str(len(state.gpus))),
        "uuid": ("uuid", gpu.uuid),
        "gpu_uuid": ("uuid", gpu.uuid),
        "name": ("name", gpu.name),
        "gpu_name": ("name", gpu.name),
        "serial": ("serial", gpu.serial),
        "gpu_serial": ("serial", gpu.serial),
        "pci.bus_id": ("pci.bus_id", gpu.pci_bus_id),
        "gpu_bus_id": ("pci.bus_id", gpu.pci_bus_id),
        "pci.device_id": ("pci.device_id", "0x" + b.device_id),
        "pci.sub_device_id": ("pci.sub_device_id", "0x" + b.subsystem_id),
        "driver_version": ("driver_version", state.driver_version),
        "memory.total": ("memory.total [MiB]", f"{gpu.memory_mib}{mib}"),
        "memory.used": ("memory.used [MiB]", f"{used}{mib}"),
        "memory.reserved": ("memory.reserved [MiB]", f"{b.reserved_mib}{mib}"),
        "memory.free": (
            "memory.free [MiB]",
            f"{gpu.memory_mib - b.reserved_mib - used + 1}{mib}",
        ),
        "mig.mode.current": (
            "mig.mode.current",
            gpu.mig_mode_current if gpu.mig_capable else mig_na,
        ),
        "mig.mode.pending": (
            "mig.mode.pending",
            gpu.mig_mode_pending if gpu.mig_capable else mig_na,
        ),
        "compute_cap": ("compute_cap", gpu.compute_capability),
        "persistence_mode": ("persistence_mode", "Enabled"),
        "compute_mode": ("compute_mode", "Default"),
        "pstate": ("pstate", "P0"),
        "minor_number": ("minor_number", str(gpu.minor)),
        "vbios_version": ("vbios_version", b.vbios),
        "gpu_operation_mode.current": ("gpu_operation_mode.current", "[N/A]"),
        "utilization.gpu": (
            "utilization.gpu [%]",
            "[N/A]" if gpu.mig_mode_current == "Enabled" else ("0 %" if units else "0"),
        ),
        "power.limit": (
            "power.limit [W]",
            f"{b.power_limit_w:.2f}{' W' if units else ''}",
        ),
    }
    if field not in table:
        raise QueryError(f'Field "{field}" is not a valid field to query.\n\n')
    return table[field]


def parse_format(fmt: str) -> tuple[bool, bool]:
    """``--format=csv[,noheader][,nounits]`` -> (header, units).

    Raises ``QueryError`` with nvidia-smi's message for an unknown modifier
    (``h200-single-cli/smi-query-unknown-format.txt``: ``--format=bogus``, exit 2; the
    simulator says it for any unknown one). Known modifiers without ``csv`` have no
    capture: the simulator's message says that ``csv`` is mandatory, as the real ``-h``
    does.
    """
    opts = [o.strip() for o in fmt.split(",") if o.strip()]
    if any(opt not in ("csv", "noheader", "nounits") for opt in opts):
        raise QueryError("Format modifier is not recognized.\n")
    if "csv" not in opts:
        raise QueryError("CSV format is required for --query-gpu and --query-compute-apps.\n")
    return "noheader" not in opts, "nounits" not in opts


def render_query_gpu(state: State, gpus: list[Gpu], fields: list[str], fmt: str) -> str:
    """``--query-gpu=<fields> --format=csv[,noheader][,nounits]`` (``smi-query*.txt``).

    Raises ``QueryError`` for an unknown field (nvidia-smi: exit 2).
    """
    header, units = parse_format(fmt)
    rows = []
    heads: list[str] = []
    for gpu in gpus:
        pairs = [_gpu_field(state, gpu, f, units) for f in fields]
        heads = [h for h, _ in pairs]
        rows.append(", ".join(v for _, v in pairs))
    if not gpus and state.gpus:
        heads = [_gpu_field(state, state.gpus[0], f, units)[0] for f in fields]
    lines = ([", ".join(heads)] if header else []) + rows
    return "".join(line + "\n" for line in lines)


_APP_FIELDS = {
    "pid": "pid",
    "process_name": "process_name",
    "name": "process_name",
    "used_memory": "used_gpu_memory [MiB]",
    "used_gpu_memory": "used_gpu_memory [MiB]",
    "gpu_uuid": "gpu_uuid",
    "gpu_name": "gpu_name",
    "gpu_bus_id": "gpu_bus_id",
    "gpu_serial": "gpu_serial",
}


def render_query_apps(gpus: list[Gpu], fields: list[str], fmt: str) -> str:
    """``--query-compute-apps=<fields> --format=csv...`` (``smi-compute-apps.txt``)."""
    header, units = parse_format(fmt)
    for f in fields:
        if f not in _APP_FIELDS:
            raise QueryError(f'Field "{f}" is not a valid field to query.\n\n')
    lines = [", ".join(_APP_FIELDS[f] for f in fields)] if header else []
    for gpu in gpus:
        for p in gpu.processes:
            values = {
                "pid": str(p.pid),
                "process_name": p.name,
                "name": p.name,
                "used_memory": f"{p.used_memory_mib}{' MiB' if units else ''}",
                "used_gpu_memory": f"{p.used_memory_mib}{' MiB' if units else ''}",
                "gpu_uuid": gpu.uuid,
                "gpu_name": gpu.name,
                "gpu_bus_id": gpu.pci_bus_id,
                "gpu_serial": gpu.serial,
            }
            lines.append(", ".join(values[f] for f in fields))
    return "".join(line + "\n" for line in lines)


def render_version(state: State) -> str:
    """``nvidia-smi --version`` (``smi-version.txt``); NVML version is the driver's
    first two components."""
    nvml = ".".join(state.driver_version.split(".")[:2])
    return (
        f"NVIDIA-SMI version  : {state.driver_version}\n"
        f"NVML version        : {nvml}\n"
        f"DRIVER version      : {state.driver_version}\n"
        f"CUDA Version        : {state.cuda_version}\n"
    )


# --- nvidia-smi mig -l* ---------------------------------------------------------------


def render_lgip(gpus: list[Gpu]) -> str:
    """``mig -lgip``: R580 layout of ``h200-single/smi-mig-lgip.txt`` (79 wide)."""
    rule = "+" + "-" * 79 + "+"
    out = [
        rule,
        "| GPU instance profiles:".ljust(80) + "|",
        "| GPU   Name               ID    Instances   Memory     P2P    SM    DEC   ENC  |",
        "|                                Free/Total   GiB              CE    JPEG  OFA  |",
        "|" + "=" * 79 + "|",
    ]
    for gpu in gpus:
        model = mig.gpu_model(gpu)
        for p in model.profiles:
            free = mig.remaining_capacity(model, gpu, p)
            inst = f"{free}/{p.max_instances}"
            gib = f"{p.memory_mib / 1024:.2f}"
            out.append(
                f"|{gpu.index:>4}  {p.full_name:<18}{p.profile_id:>4}{inst:>8}{'':8}"
                f"{gib:<11}{'No':<7}{p.multiprocessors:<3}{p.decoders:>5}{p.encoders:>6}   |"
            )
            out.append(f"|{'':60}{p.copy_engines:>4}{p.jpeg_engines:>6}{p.ofa_engines:>6}   |")
            out.append(rule)
    return "\n".join(out) + "\n"


def render_lgipp(gpus: list[Gpu]) -> str:
    """``mig -lgipp``: ``GPU  0 Profile ID 19 Placements: {0,1,...}:1`` per profile."""
    lines = []
    for gpu in gpus:
        model = mig.gpu_model(gpu)
        for p in model.profiles:
            word = "Placements:" if len(p.placements) > 1 else "Placement :"
            starts = ",".join(str(s) for s in p.placements)
            lines.append(
                f"GPU {gpu.index:>2} Profile ID {p.profile_id:>2} {word} {{{starts}}}:{p.slices}"
            )
    return "".join(line + "\n" for line in lines)


def render_lgi(gpus: list[Gpu]) -> str:
    """``mig -lgi``: the 55-wide layout of ``public/a100-pcie-40gb/lgi.txt`` (no R580
    capture with GPU instances exists here)."""
    rule = "+" + "-" * 55 + "+"
    out = [
        rule,
        "| GPU instances:".ljust(56) + "|",
        "| GPU   Name             Profile  Instance   Placement  |",
        "|                          ID       ID       Start:Size |",
        "|" + "=" * 55 + "|",
    ]
    for gpu in gpus:
        model = mig.gpu_model(gpu)
        for gi in mig.ordered_gis(model, gpu):
            place = f"{gi.placement_start}:{gi.placement_size}"
            out.append(
                f"|{gpu.index:>4}  {'MIG ' + gi.profile:<16}{gi.profile_id:>6}{gi.id:>9}"
                f"{place:>13}     |"
            )
            out.append(rule)
    return "\n".join(out) + "\n"


def render_lci(rows: list[tuple[Gpu, mig.GpuInstance]]) -> str:
    """``mig -lci``: the 68-wide layout of ``public/a100-pcie-40gb/lci-i0-2ci.txt``."""
    rule = "+" + "-" * 68 + "+"
    out = [
        rule,
        "| Compute instances:".ljust(69) + "|",
        "| GPU     GPU       Name             Profile   Instance   Placement  |",
        "|       Instance                       ID        ID       Start:Size |",
        "|         ID                                                         |",
        "|" + "=" * 68 + "|",
    ]
    for gpu, gi in rows:
        places = mig.ci_placements(gi)
        for ci in sorted(gi.compute_instances, key=lambda c: c.id):
            pl = places[ci.id]
            out.append(
                f"|{gpu.index:>4}{gi.id:>7}{'':7}{'MIG ' + ci.profile:<16}{ci.profile_id:>6}"
                f"{ci.id:>10}{f'{pl.start}:{pl.size}':>13}     |"
            )
            out.append(rule)
    return "\n".join(out) + "\n"


def render_lcip(rows: list[tuple[Gpu, mig.GpuInstance]]) -> str:
    """``mig -lcip``: the 86-wide layout of ``public/a100-pcie-40gb/lcip.txt``.

    One row per CI profile that fits the GI; ``*`` marks the full-size (default) one.
    """
    rule = "+" + "-" * 86 + "+"
    out = [
        rule,
        "| Compute instance profiles:".ljust(87) + "|",
        "| GPU     GPU       Name             Profile  Instances   Exclusive       Shared       |",
        "|       Instance                       ID     Free/Total     SM       DEC   ENC   OFA  |",
        "|         ID                                                          CE    JPEG       |",
        "|" + "=" * 86 + "|",
    ]
    for gpu, gi in rows:
        total = mig.gi_compute_slices(gi)
        used = sum(p.size for p in mig.ci_placements(gi).values())
        for pid, size in sorted(mig.CI_SLICES_BY_PROFILE_ID.items()):
            if size > total or (size == 3 and total == 4) or size == 6:
                continue
            name = mig.ci_name(gi.profile, total, size)
            mark = "*" if size == total else " "
            count = total // size
            free = max(0, (total - used) // size)
            sm = gi.multiprocessors * size // total
            out.append(
                f"|{gpu.index:>4}{gi.id:>7}{'':7}{'MIG ' + name:<16}{pid:>6}{mark}"
                f"{f'{free}/{count}':>8}{sm:>13}{gi.decoders:>9}{gi.encoders:>6}"
                f"{gi.ofa_engines:>6}   |"
            )
            out.append(f"|{'':69}{gi.copy_engines:>2}{gi.jpeg_engines:>6}{'':9}|")
            out.append(rule)
    return "\n".join(out) + "\n"


# --- topo -m, topo -p2p n, nvlink -s ---------------------------------------------------

_UNDERLINE, _RESET = "\x1b[4m", "\x1b[0m"

_TOPO_LEGEND = (
    "Legend:\n"
    "\n"
    "  X    = Self\n"
    "  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes"
    " (e.g., QPI/UPI)\n"
    "  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host"
    " Bridges within a NUMA node\n"
    "  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)\n"
    "  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host"
    " Bridge)\n"
    "  PIX  = Connection traversing at most a single PCIe bridge\n"
    "  NV#  = Connection traversing a bonded set of # NVLinks\n"
)


def _peer_cell(state: State, me: Gpu, peer: Gpu) -> str:
    """One ``topo -m`` GPU-to-GPU cell. ``NV<n>`` between NVLinked GPUs, as captured
    (``h200-x2-nvlink/smi-topo.txt``: NV18). GPUs without NVLink: no capture; the
    simulator puts every GPU of a node behind the same PCIe host bridge
    (``hardware.pcie_root``), which the legend names ``PHB``."""
    if me is peer:
        return " X "
    if hardware.nvlinked([g.name for g in state.gpus]):
        return f"NV{hardware.board(me.name).nvlinks}"
    return "PHB"


def render_topo_matrix(state: State, readings: Readings) -> str:
    """``nvidia-smi topo -m``: tab-separated, header underlined with ANSI escapes, every
    GPU of the node (``topo -m`` takes no ``-i``), then the legend; byte for byte the
    layout of ``h200-single/smi-topo.txt`` and ``h200-x2-nvlink/smi-topo.txt``.

    ``CPU Affinity`` and ``NUMA Affinity`` are the readings' ``cpu_affinity`` and
    ``numa_affinity`` (the node's CPUs, NUMA node 0); ``GPU NUMA ID`` is ``N/A`` as on the
    captured H200s (a NUMA ID of its own belongs to GPU memory onlined as a NUMA node,
    Grace Hopper's).
    """
    gpus = state.gpus
    head = [f"GPU{g.index}" for g in gpus] + ["CPU Affinity", "NUMA Affinity", "GPU NUMA ID"]
    lines = ["\t" + _UNDERLINE + "\t".join(head) + _RESET]
    for me in gpus:
        r = readings.gpu(me.index)
        cells = [_peer_cell(state, me, peer) for peer in gpus]
        cells += [str(r["cpu_affinity"]), str(r["numa_affinity"]), "", "N/A"]
        lines.append(f"GPU{me.index}\t" + "\t".join(cells))
    return "\n".join(lines) + "\n\n" + _TOPO_LEGEND


_P2P_LEGEND = (
    "Legend:\n"
    "\n"
    "  X    = Self\n"
    "  OK   = Status Ok\n"
    "  CNS  = Chipset not supported\n"
    "  GNS  = GPU not supported\n"
    "  TNS  = Topology not supported\n"
    "  NS   = Not supported\n"
    "  U    = Unknown\n"
)


def render_topo_p2p_nvlink(state: State) -> str:
    """``nvidia-smi topo -p2p n`` (NVLink peer-to-peer status), the layout of
    ``h200-x2-nvlink/smi-topo-p2p.txt`` and ``h200-single-cli/smi-topo-p2p.txt``: ``OK``
    between NVLinked GPUs. Between GPUs without NVLink: no capture; ``NS`` (the legend's
    "Not supported")."""
    gpus = state.gpus
    link = "OK" if hardware.nvlinked([g.name for g in gpus]) else "NS"
    lines = [" \t" + _UNDERLINE + "".join(f"GPU{g.index}\t" for g in gpus) + _RESET]
    for me in gpus:
        cells = ["X" if peer is me else link for peer in gpus]
        lines.append(f" GPU{me.index}\t" + "".join(c + "\t" for c in cells))
    return "\n".join(lines) + "\n\n" + _P2P_LEGEND


def render_nvlink_status(state: State, gpus: list[Gpu]) -> str:
    """``nvidia-smi nvlink -s``: per selected GPU its ``-L`` line, then one tab-indented
    ``Link N: <speed> GB/s`` line per NVLink (``h200-x2-nvlink/smi-nvlink-s.txt``);
    nothing at all when the node's GPUs are not NVLinked (one H200:
    ``h200-single-cli/smi-nvlink-s.txt``)."""
    if not hardware.nvlinked([g.name for g in state.gpus]):
        return ""
    lines = []
    for gpu in gpus:
        b = hardware.board(gpu.name)
        lines.append(f"GPU {gpu.index}: {gpu.name} (UUID: {gpu.uuid})")
        lines += [f"\t Link {n}: {b.nvlink_gbps} GB/s" for n in range(b.nvlinks)]
    return "".join(line + "\n" for line in lines)
