"""The nvidia-smi simulator against every real H200 capture, from the machine's state only.

For each capture of ``tests/unit/data/gpu/h200-single/``, ``h200-x2-nvlink/`` and
``h200-single-cli/`` the simulator is initialised as ``gpusim init`` would initialise a
node shaped like the captured machine (GPU model, GPU count, driver and CUDA version; MIG
mode disabled, no process, as each README says) and nothing else: no UUID, serial or
sensor reading is copied from the capture, and no readings file exists. The capture's
command line is then run through the simulator's CLI in-process and its stdout and exit
status compared with the capture's, byte for byte, after the masks below are applied to
both texts.

Masked (and why): only values that belong to one physical machine or one instant, never a
layout, a label or a value the project reads as a fact.

================  ==========================================================================
mask              why
================  ==========================================================================
GPU UUID          per board; the captures carry synthetic ones, the simulator derives its own
                  from the node name. Each UUID becomes ``<gpu-uuid-N>`` numbered in order of
                  first appearance, so a UUID printed for the wrong GPU still differs.
serial number     per board (synthetic in the captures, derived by the simulator)
timestamp         the time of the invocation
sensor readings   temperatures, power draws, PCIe Tx/Rx throughput, the PCIe replay counter:
                  they change between two invocations on the same GPU
board identity    GPU PDI, Board ID, Module Id: per board and per slot of the captured host
CPU affinity      ``topo -m``'s ``CPU Affinity`` column is the host's CPU list (the captured
                  hosts had 16 and 32 CPUs; the simulator prints its node's)
================  ==========================================================================

Not masked: PCI bus IDs (the simulator places GPUs at ``00:06.0``, ``00:07.0`` as the
captured hosts did), memory sizes, MIG modes and profiles, NVLink counts and speeds,
fabric state, driver and CUDA versions, every refusal message and exit status.

Captures stored without their command line (``smi-q.xml``, ``h200-x2-nvlink``'s
``smi-nvlink-s.txt`` and ``smi-topo-p2p.txt``) have no exit status either: their stdout
is compared and their exit status is not (nothing recorded to compare with).
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

import pytest

from gpufleet.lab.gpusim import admin, cli, hardware, state

pytestmark = pytest.mark.unit

DATA = Path(__file__).resolve().parents[1] / "data" / "gpu"


@dataclass(frozen=True)
class Machine:
    """What ``gpusim init`` takes from a captured machine (its README)."""

    model: str
    count: int
    driver: str
    cuda: str


MACHINES = {
    "h200-single": Machine("NVIDIA H200", 1, "580.159.04", "13.0"),
    "h200-x2-nvlink": Machine("NVIDIA H200", 2, "580.159.04", "13.0"),
    "h200-single-cli": Machine("NVIDIA H200", 1, "580.159.04", "13.0"),
}

#: Captures without a ``$ nvidia-smi`` line: their command as the READMEs name it.
BARE = {
    "smi-q.xml": ("-q", "-x"),
    "smi-nvlink-s.txt": ("nvlink", "-s"),
    "smi-topo-p2p.txt": ("topo", "-p2p", "n"),
}

#: Every nvidia-smi command line the project runs, and where (grep of plugins/, roles/,
#: gpufleet/ for nvidia-smi invocations). ``N`` is a GPU index.
PROJECT_RUNS = {
    ("-q", "-x"): "host/gpu_facts.py, mig/apply.py read_gpus",
    ("-q",): "host/gpu_facts.py (when -q -x fails)",
    (
        "--query-gpu=index,uuid,name,pci.bus_id,driver_version,memory.total,"
        "mig.mode.current,mig.mode.pending,compute_cap,persistence_mode",
        "--format=csv",
    ): "host/gpu_facts.py QUERY_FIELDS",
    ("-L",): "host/gpu_facts.py, nvidia_driver_facts, nvidia_cdi_spec_check, dra_validate",
    ("mig", "-lgi"): "host/gpu_facts.py, mig/apply.py",
    ("mig", "-lci"): "host/gpu_facts.py, mig/apply.py",
    ("mig", "-lgip"): "host/gpu_facts.py collect_mig_profiles",
    ("mig", "-lgipp"): "host/gpu_facts.py collect_mig_profiles",
    ("mig", "-i", "N", "-lgip"): "mig/apply.py gpu_model",
    ("mig", "-i", "N", "-lgipp"): "mig/apply.py gpu_model",
    ("topo", "-m"): "host/gpu_facts.py (two GPUs or more)",
    ("nvlink", "-s"): "host/gpu_facts.py (two GPUs or more)",
    (
        "--query-compute-apps=gpu_uuid,pid,process_name,used_memory",
        "--format=csv,noheader,nounits",
    ): "mig/apply.py read_gpus",
    ("--query-gpu=driver_version", "--format=csv,noheader"): "nvidia_driver_facts",
}


def general(argv: tuple[str, ...]) -> tuple[str, ...]:
    """``argv`` with the GPU index after ``-i`` replaced by ``N``."""
    return tuple("N" if a.isdigit() and i and argv[i - 1] == "-i" else a for i, a in
                 enumerate(argv))  # fmt: skip


def project_runs(argv: tuple[str, ...]) -> str:
    """Where the project runs ``argv``, or "" when it does not."""
    return PROJECT_RUNS.get(general(argv), "")


def read_capture(path: Path) -> tuple[tuple[str, ...], str, int | None]:
    """(argv without ``nvidia-smi``, stdout, exit status or None when not captured)."""
    text = path.read_text()
    if path.name in BARE and not text.startswith("$ nvidia-smi"):
        return BARE[path.name], text, None
    first, _, rest = text.partition("\n")
    assert first.startswith("$ nvidia-smi"), f"{path}: no command line"
    body, _, tail = rest.rpartition("[exit ")
    assert tail.endswith("]\n"), f"{path}: no [exit N] line"
    return tuple(shlex.split(first[2:])[1:]), body, int(tail[:-2])


def captures() -> list[tuple[str, str]]:
    return [
        (host, p.name)
        for host in MACHINES
        for p in sorted((DATA / host).iterdir())
        if p.name.startswith("smi-") and p.suffix in (".txt", ".xml")
    ]


# --- masks ------------------------------------------------------------------------------

_NUM = r"-?[\d.]+"
#: (what, pattern, replacement); a pattern's groups 1 and 2 (when present) are kept.
MASKS: list[tuple[str, re.Pattern[str], str]] = [
    ("timestamp", re.compile(r"\w{3} \w{3} [ \d]\d \d\d:\d\d:\d\d \d{4}"), "<timestamp>"),
    ("serial", re.compile(r"(Serial Number +: |<serial>)\d+"), r"\1<serial>"),
    ("pdi", re.compile(r"(GPU PDI +: |<pdi>)0x[0-9a-f]+"), r"\1<pdi>"),
    ("board id", re.compile(r"(Board ID +: |<board_id>)0x[0-9a-f]+"), r"\1<board-id>"),
    ("module id", re.compile(r"(Module Id +: |<module_id>)\d+"), r"\1<module-id>"),
    (
        "replays",
        re.compile(r"(Replays Since Reset +: |<replay_counter>)\d+"),
        r"\1<replays>",
    ),
    (
        "throughput",
        re.compile(r"((?:Tx|Rx) Throughput +: |<[tr]x_util>)\d+ KB/s"),
        r"\1<KB/s>",
    ),
    (
        "temperature",
        re.compile(
            r"((?:GPU Current Temp|GPU T.Limit Temp|Memory Current Temp) +: "
            r"|<gpu_temp>|<gpu_temp_tlimit>|<memory_temp>)" + _NUM + " C"
        ),
        r"\1<C>",
    ),
    (
        "power draw",
        re.compile(
            r"((?:Average|Instantaneous) Power Draw +: |<average_power_draw>"
            r"|<instant_power_draw>)" + _NUM + " W"
        ),
        r"\1<W>",
    ),
    # plain nvidia-smi: "| N/A   35C    P0            102W /  700W |"
    (
        "temperature, power draw",
        re.compile(r"\| N/A +\d+C +P0 +\d+W /"),
        "| N/A <C> P0 <W> /",
    ),
    (
        "CPU affinity",
        re.compile(r"(?m)^(GPU\d+\t(?:[^\t]*\t)*?)[\d,-]+(\t\d+\t\tN/A)$"),
        r"\1<cpus>\2",
    ),
]
_UUID = re.compile(r"GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def mask(text: str) -> str:
    """``text`` with the machine-specific values of the table above replaced."""
    order: dict[str, int] = {}
    text = _UUID.sub(lambda m: f"<gpu-uuid-{order.setdefault(m[0], len(order) + 1)}>", text)
    for _what, pattern, replacement in MASKS:
        text = pattern.sub(replacement, text)
    return text


def test_masks_hide_only_what_they_name() -> None:
    """The masks leave a capture's layout and facts in place: two captures of the same
    command on two hosts differ after masking only where the hosts differ."""
    single = mask((DATA / "h200-single" / "smi-q.txt").read_text())
    assert "<gpu-uuid-1>" in single and "<timestamp>" in single and "<pdi>" in single
    assert "Product Name                                       : NVIDIA H200" in single
    assert "Bus Id                                         : 00000000:00:06.0" in single
    assert "Total                                          : 143771 MiB" in single
    # the single host has no NVLink fabric, the NVLinked pair has one: not masked
    assert "        State                                          : N/A" in single
    pair = mask((DATA / "h200-x2-nvlink" / "smi-q.txt").read_text())
    assert "        State                                          : Completed" in pair
    topo = mask((DATA / "h200-x2-nvlink" / "smi-topo.txt").read_text())
    assert "GPU0\t X \tNV18\t<cpus>\t0\t\tN/A\n" in topo


# --- the comparison ---------------------------------------------------------------------


def simulated(tmp_path: Path, machine: Machine) -> Path:
    """A state file as ``gpusim init`` writes it for ``machine``; no readings file."""
    st = admin.build_state(machine.model, machine.count, "lab-gpu-1", machine.driver,
                           machine.cuda)  # fmt: skip
    path = tmp_path / "state.json"
    state.save(st, path)
    assert not hardware.readings_path(path).exists()
    return path


@pytest.mark.parametrize(("host", "name"), captures())
def test_simulator_answers_as_the_capture(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, host: str, name: str
) -> None:
    monkeypatch.delenv(hardware.READINGS_ENV, raising=False)
    argv, expected, rc = read_capture(DATA / host / name)
    result = cli.run(list(argv), simulated(tmp_path, MACHINES[host]))
    assert mask(result.out) == mask(expected), (host, name, project_runs(argv))
    if rc is not None:
        assert result.rc == rc
    assert result.err == ""


def test_every_command_the_project_runs_has_a_capture() -> None:
    """Each command line of PROJECT_RUNS is compared above through at least one capture."""
    captured = {general(read_capture(DATA / h / n)[0]) for h, n in captures()}
    assert sorted(set(PROJECT_RUNS) - captured) == []
