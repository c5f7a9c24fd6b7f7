"""The nvidia-smi simulator against real captures, and its MIG rules.

Replays: for each real capture the simulator can reproduce, a state is set up to match
the capture's situation (GPU model, UUIDs, PCI bus IDs, MIG layout; sensor readings of
that capture in the readings file) and the capture's command line is run. H200 captures
(driver 580.159.04) must match byte for byte; public captures line for line after
replacing UUIDs by the synthetic ones the capture uses (public/INDEX.md).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from gpufleet.lab.gpusim import admin, cli, mig, state
from gpufleet.lab.gpusim.state import Gpu, GpuInstance, Process, State

pytestmark = pytest.mark.unit

DATA = Path(__file__).resolve().parents[1] / "data" / "gpu"

# --- helpers --------------------------------------------------------------------------


def make_state(model: str = "NVIDIA H200", count: int = 1, **gpu0: object) -> State:
    st = admin.build_state(model, count, "lab-worker-1")
    for key, value in gpu0.items():
        setattr(st.gpus[0], key, value)
    return st


def write(tmp_path: Path, st: State, readings: dict | None = None) -> Path:
    path = tmp_path / "state.json"
    state.save(st, path)
    if readings is not None:
        (tmp_path / "readings.json").write_text(json.dumps(readings))
    return path


def smi(path: Path, *argv: str) -> cli.Result:
    return cli.run(list(argv), path)


def h200_capture(path: Path) -> tuple[list[str], str, int]:
    """(argv, output, exit code) of an h200-* capture (``$ cmd`` ... ``[exit N]``)."""
    lines = path.read_text().split("\n")
    assert lines[0].startswith("$ nvidia-smi") and lines[-1] == ""
    rc = int(lines[-2].removeprefix("[exit ").removesuffix("]"))
    return lines[0].split()[2:], "\n".join(lines[1:-2]) + "\n", rc


def public_capture(path: Path) -> tuple[list[str], list[str]]:
    """(argv, output lines) of a public capture (``# source``/``# command``/``# note``)."""
    lines = path.read_text().split("\n")
    command = next(line for line in lines if line.startswith("# command: "))
    argv = command.removeprefix("# command: ").removeprefix("sudo ").split()
    assert argv[0] == "nvidia-smi"
    body = [line for line in lines if not line.startswith("# ")]
    while body and body[-1] == "":
        body.pop()
    return argv[1:], body


def synthetic_uuids(text: str, st: State) -> str:
    """Replace the state's UUIDs by public/INDEX.md's synthetic ones, numbered in order of
    first appearance (GPU-a0000000-...-00000000000N, MIG-b0000000-...-00000000000N)."""
    out = text
    gpus = [g.uuid for g in st.gpus]
    migs = [ci.uuid for g in st.gpus for gi in g.gpu_instances for ci in gi.compute_instances]
    order = sorted(gpus + migs, key=lambda u: text.find(u) if u in text else 1 << 30)
    n_gpu = n_mig = 0
    for uuid in order:
        if uuid not in text:
            continue
        if uuid.startswith("GPU-"):
            n_gpu += 1
            out = out.replace(uuid, f"GPU-a0000000-0000-4000-8000-{n_gpu:012x}")
        else:
            n_mig += 1
            out = out.replace(uuid, f"MIG-b0000000-0000-4000-8000-{n_mig:012x}")
    return out


# --- H200 replays (byte for byte) -----------------------------------------------------

SINGLE_UUID = "GPU-1f6a9c2e-0b4d-4e8a-9c3f-5d2e7a1b8c90"
X2_UUIDS = ("GPU-2a7b3c4d-5e6f-4a1b-8c2d-3e4f5a6b7c80", "GPU-9e8d7c6b-5a4f-4e3d-8c2b-1a0f9e8d7c61")
NVLINK_FABRIC = {
    "fabric_state": "Completed",
    "fabric_status": "Success",
    "fabric_clique": "0",
    "fabric_cluster": "00000000-0000-0000-0000-000000000000",
}

# Sensor readings as each capture printed them (they change between invocations).
READINGS = {
    ("h200-single", "plain"): {
        "timestamp": "Sun Nov 29 19:21:42 2026",
        "gpus": [{"temp": 33, "power_w": 76}],
    },
    ("h200-single", "q"): {
        "timestamp": "Sun Nov 29 19:21:42 2026",
        "gpus": [
            {
                "pdi": "0xfaabae278f410c12", "module_id": 7, "board_id": "0x6", "tx": 964,
                "rx": 562, "temp": 33, "tlimit": 54, "mem_temp": 34, "power_avg": "76.51",
                "power_inst": "77.07", "mem_power_avg": "32.17",
            }
        ],
    },
    ("h200-single", "xml"): {
        "timestamp": "Sun Nov 29 19:21:42 2026",
        "gpus": [
            {
                "pdi": "0xfaabae278f410c12", "module_id": 7, "board_id": "0x6", "tx": 1001,
                "rx": 606, "temp": 33, "tlimit": 54, "mem_temp": 34, "power_avg": "76.55",
                "power_inst": "76.38", "mem_power_avg": "32.22",
            }
        ],
    },
    ("h200-x2-nvlink", "plain"): {
        "timestamp": "Sun Nov 29 19:22:25 2026",
        "gpus": [{"temp": 35, "power_w": 102}, {"temp": 35, "power_w": 121}],
    },
    ("h200-x2-nvlink", "q"): {
        "timestamp": "Sun Nov 29 19:22:25 2026",
        "gpus": [
            {
                "pdi": "0xe7504c9af7a97b96", "module_id": 1, "board_id": "0x6", "tx": 971,
                "rx": 591, "temp": 34, "tlimit": 53, "mem_temp": 37, "power_avg": "90.86",
                "power_inst": "77.81", "mem_power_avg": "39.21", **NVLINK_FABRIC,
            },
            {
                "pdi": "0x96fdb1d3584b439a", "module_id": 3, "board_id": "0x7", "replays": 1,
                "tx": 1135, "rx": 555, "temp": 34, "tlimit": 52, "mem_temp": 36,
                "power_avg": "105.86", "power_inst": "79.48", "mem_power_avg": "38.40",
                **NVLINK_FABRIC,
            },
        ],
    },
    ("h200-x2-nvlink", "xml"): {
        "timestamp": "Sun Nov 29 19:22:25 2026",
        "gpus": [
            {
                "pdi": "0xe7504c9af7a97b96", "module_id": 1, "board_id": "0x6", "tx": 1179,
                "rx": 537, "temp": 34, "tlimit": 53, "mem_temp": 37, "power_avg": "81.05",
                "power_inst": "76.78", "mem_power_avg": "39.48", **NVLINK_FABRIC,
            },
            {
                "pdi": "0x96fdb1d3584b439a", "module_id": 3, "board_id": "0x7", "replays": 1,
                "tx": 992, "rx": 540, "temp": 34, "tlimit": 53, "mem_temp": 36,
                "power_avg": "95.33", "power_inst": "79.15", "mem_power_avg": "39.46",
                **NVLINK_FABRIC,
            },
        ],
    },
}  # fmt: skip


def h200_state(host: str) -> State:
    if host == "h200-single":
        return make_state(uuid=SINGLE_UUID, serial="1650000000001")
    st = make_state(count=2)
    for gpu, uuid, serial in zip(
        st.gpus, X2_UUIDS, ("1650000000003", "1650000000002"), strict=True
    ):
        gpu.uuid, gpu.serial = uuid, serial
    return st


H200_TEXT = [
    (host, name)
    for host in ("h200-single", "h200-x2-nvlink")
    for name in (
        "smi-L.txt", "smi-plain.txt", "smi-q.txt", "smi-query.txt", "smi-query-noheader.txt",
        "smi-compute-apps.txt", "smi-version.txt", "smi-mig-lgip.txt", "smi-mig-lgipp.txt",
        "smi-mig-lgi.txt", "smi-mig-lci.txt",
    )
]  # fmt: skip


@pytest.mark.parametrize(("host", "name"), H200_TEXT)
def test_h200_capture_replays_byte_for_byte(tmp_path: Path, host: str, name: str) -> None:
    argv, expected, rc = h200_capture(DATA / host / name)
    kind = "plain" if not argv else ("q" if argv == ["-q"] else None)
    path = write(tmp_path, h200_state(host), READINGS.get((host, kind)))
    result = smi(path, *argv)
    assert result.out == expected
    assert result.rc == rc


@pytest.mark.parametrize("host", ["h200-single", "h200-x2-nvlink"])
def test_h200_xml_replays_byte_for_byte(tmp_path: Path, host: str) -> None:
    path = write(tmp_path, h200_state(host), READINGS[(host, "xml")])
    result = smi(path, "-q", "-x")
    assert result.out == (DATA / host / "smi-q.xml").read_text()
    assert result.rc == 0


# --- public replays (line for line, UUIDs substituted) --------------------------------


def a100_sxm_enabled(gis: list[tuple[str, int, int]] = ()) -> State:
    st = make_state("NVIDIA A100-SXM4-40GB", mig_mode_current="Enabled", mig_mode_pending="Enabled")
    for profile, start, gi_id in gis:
        add_gi(st.gpus[0], profile, start, gi_id)
    return st


def add_gi(
    gpu: Gpu, profile: str, start: int, gi_id: int, cis: tuple[int, ...] = ()
) -> GpuInstance:
    """A GI placed exactly as a capture shows it (IDs as printed), with CIs of the given
    CI profile IDs."""
    p = mig.gpu_model(gpu).profile(profile)
    gi = GpuInstance(
        id=gi_id, profile=p.name, profile_id=p.profile_id, placement_start=start,
        placement_size=p.slices, memory_mib=p.memory_mib, multiprocessors=p.multiprocessors,
        copy_engines=p.copy_engines, decoders=p.decoders, encoders=p.encoders,
        jpeg_engines=p.jpeg_engines, ofa_engines=p.ofa_engines,
    )  # fmt: skip
    gpu.gpu_instances.append(gi)
    for ci_profile in cis:
        mig.create_ci(gpu, gi, ci_profile)
    return gi


def a100_pcie() -> State:
    st = make_state(
        "NVIDIA A100-PCIE-40GB", mig_mode_current="Enabled", mig_mode_pending="Enabled",
        pci_bus_id="00000000:0F:00.0",
    )  # fmt: skip
    gpu = st.gpus[0]
    add_gi(gpu, "1g.5gb", 0, 11, (0,))
    add_gi(gpu, "1g.5gb", 1, 12)
    add_gi(gpu, "2g.10gb", 2, 6)
    add_gi(gpu, "3g.20gb", 4, 1)
    return st


def a100_pcie_two_ci() -> State:
    st = a100_pcie()
    mig.create_ci(st.gpus[0], st.gpus[0].gi(12), 0)
    return st


def a100_pcie_lcip() -> State:
    st = make_state("NVIDIA A100-PCIE-40GB", mig_mode_current="Enabled", mig_mode_pending="Enabled")
    add_gi(st.gpus[0], "1g.5gb", 2, 9, (0,))
    add_gi(st.gpus[0], "2g.10gb", 0, 3, (1,))
    return st


def a100_pcie_four_ci() -> State:
    st = a100_pcie_two_ci()
    mig.create_ci(st.gpus[0], st.gpus[0].gi(6), 0)
    mig.create_ci(st.gpus[0], st.gpus[0].gi(1), 0)
    return st


def a30_four_1g() -> State:
    st = make_state("NVIDIA A30", mig_mode_current="Enabled", mig_mode_pending="Enabled")
    for start in range(4):
        add_gi(st.gpus[0], "1g.6gb", start, 3 + start)
    return st


def h100_r570() -> State:
    st = make_state("NVIDIA H100 80GB HBM3", mig_mode_current="Enabled", mig_mode_pending="Enabled")
    gpu = st.gpus[0]
    add_gi(gpu, "3g.40gb", 4, 2, (0, 0, 0))
    add_gi(gpu, "1g.10gb", 0, 7, (0,))
    add_gi(gpu, "1g.10gb", 1, 8, (0,))
    return st


def h100_dci_in_use() -> State:
    st = make_state("NVIDIA H100 80GB HBM3", mig_mode_current="Enabled", mig_mode_pending="Enabled")
    gpu = st.gpus[0]
    add_gi(gpu, "2g.20gb", 0, 3, (1,))
    add_gi(gpu, "3g.40gb", 4, 2, (2,))
    gpu.processes.append(Process(pid=4242, name="python3", used_memory_mib=1024))
    return st


def four_gpu_query() -> State:
    st = make_state("NVIDIA A100-SXM4-40GB", count=4)
    st.gpus[0].mig_mode_current = st.gpus[0].mig_mode_pending = "Enabled"
    return st


def a100_dgi() -> State:
    return a100_sxm_enabled([("3g.20gb", 0, 1), ("3g.20gb", 4, 2)])


def a100_dci() -> State:
    st = a100_sxm_enabled()
    add_gi(st.gpus[0], "3g.20gb", 0, 1, (0, 0, 0))
    return st


def a100_bus36() -> State:
    return make_state("NVIDIA A100-SXM4-40GB", pci_bus_id="00000000:36:00.0")


def a100_bus36_enabled() -> State:
    return make_state(
        "NVIDIA A100-SXM4-40GB", pci_bus_id="00000000:36:00.0", mig_mode_current="Enabled",
        mig_mode_pending="Enabled",
    )  # fmt: skip


PUBLIC: list[tuple[str, Callable[[], State], str]] = [
    ("a100-sxm4-40gb/nvdocs-cgi-insufficient-resources.txt", a100_sxm_enabled, "exact"),
    ("a100-sxm4-40gb/nvdocs-cgi-211111.txt", a100_sxm_enabled, "exact"),
    ("a100-sxm4-40gb/nvdocs-cgi-3211.txt", a100_sxm_enabled, "exact"),
    ("a100-sxm4-40gb/nvdocs-cgi-9-3g20gb-C.txt", a100_sxm_enabled, "exact"),
    ("a100-sxm4-40gb/nvdocs-dgi.txt", a100_dgi, "exact"),
    ("a100-sxm4-40gb/nvdocs-dci.txt", a100_dci, "exact"),
    ("a100-sxm4-40gb/nvdocs-mig-enable.txt", a100_bus36, "exact"),
    ("a100-sxm4-40gb/nvdocs-query-mig-mode-current.txt", a100_bus36_enabled, "exact"),
    ("a100-sxm4-40gb/nvdocs-lgipp.txt", a100_sxm_enabled, "exact"),
    ("a100-pcie-40gb/L.txt", a100_pcie, "exact"),
    ("a100-pcie-40gb/lgi.txt", a100_pcie, "exact"),
    ("a100-pcie-40gb/lgi-i0.txt", a100_pcie, "exact"),
    ("a100-pcie-40gb/lci-gi11.txt", a100_pcie, "exact"),
    ("a100-pcie-40gb/lci-i0-2ci.txt", a100_pcie_two_ci, "exact"),
    ("a100-pcie-40gb/lci-gi12-not-found.txt", a100_pcie, "exact"),
    ("a100-pcie-40gb/lcip.txt", a100_pcie_lcip, "exact"),
    # The post's code block stops before the closing border: a prefix of the output.
    ("a100-pcie-40gb/lci-i0-4ci-truncated.txt", a100_pcie_four_ci, "prefix"),
    ("a100-pcie-40gb/cci-gi11.txt", lambda: _without_ci(a100_pcie(), 11), "exact"),
    ("a100-pcie-40gb/cci-gi12.txt", a100_pcie, "exact"),
    ("a100-pcie-40gb/cci-gi6-1c.txt", a100_pcie, "exact"),
    ("a30-24gb/lgi-4x1g.txt", a30_four_1g, "exact"),
    ("h100-80gb-hbm3/nvdocs-L-r570-ci.txt", h100_r570, "exact"),
    ("unknown-gpu/query-uuid-mig-mode-current-pending.txt", four_gpu_query, "exact"),
    # Lower-case as posted; arguments not shown in the post (GI 3 holds CI 0).
    ("h100-80gb/dci-in-use.txt", h100_dci_in_use, "lower"),
    # Line breaks collapsed and cut short in the post: a prefix of the joined output.
    ("a100-variant-unknown/mig-enable-pending-in-use.txt", lambda: _held(a100_busid1()), "prefix"),
]  # fmt: skip

ARGV_FOR_UNSHOWN = {"h100-80gb/dci-in-use.txt": ["mig", "-dci", "-ci", "0", "-gi", "3"]}


def _without_ci(st: State, gi_id: int) -> State:
    st.gpus[0].gi(gi_id).compute_instances.clear()
    return st


def _held(st: State) -> State:
    st.gpus[0].processes.append(Process(pid=4242, name="python3", used_memory_mib=512))
    return st


def a100_busid1() -> State:
    return make_state("NVIDIA A100-SXM4-40GB", pci_bus_id="00000001:00:00.0")


@pytest.mark.parametrize(("name", "setup", "mode"), PUBLIC, ids=[p[0] for p in PUBLIC])
def test_public_capture_replays_line_for_line(
    tmp_path: Path, name: str, setup: Callable[[], State], mode: str
) -> None:
    argv, expected = public_capture(DATA / "public" / name)
    argv = ARGV_FOR_UNSHOWN.get(name, argv)
    st = setup()
    path = write(tmp_path, st)
    result = smi(path, *argv)
    got = synthetic_uuids(result.out, state.load(path)).rstrip("\n").split("\n")
    if mode == "exact":
        assert got == expected
    elif mode == "lower":
        assert [line.lower() for line in got] == expected
        assert result.rc == cli.RC_IN_USE
    else:
        assert " ".join(got).startswith(" ".join(expected))


# --- MIG state transitions ------------------------------------------------------------


def h200_path(tmp_path: Path, **gpu0: object) -> Path:
    return write(tmp_path, make_state(**gpu0))


def test_carve_seven_1g18gb_then_list(tmp_path: Path) -> None:
    path = h200_path(tmp_path)
    assert (
        smi(path, "-i", "0", "-mig", "1").out
        == "Enabled MIG Mode for GPU 00000000:00:06.0\nAll done.\n"
    )
    result = smi(path, "mig", "-cgi", "19,19,19,19,19,19,19", "-C")
    assert result.rc == 0
    lines = result.out.splitlines()
    assert len(lines) == 14
    assert lines[0] == (
        "Successfully created GPU instance ID 13 on GPU  0 using profile MIG 1g.18gb (ID 19)"
    )
    assert lines[1] == (
        "Successfully created compute instance ID  0 on GPU  0 GPU instance ID 13 using "
        "profile MIG 1g.18gb (ID  0)"
    )
    st = state.load(path)
    gpu = st.gpus[0]
    assert sorted(gi.id for gi in gpu.gpu_instances) == list(range(7, 14))
    assert sorted(gi.placement_start for gi in gpu.gpu_instances) == list(range(7))
    assert all(len(gi.compute_instances) == 1 for gi in gpu.gpu_instances)
    assert len({ci.uuid for gi in gpu.gpu_instances for ci in gi.compute_instances}) == 7
    listing = smi(path, "-L").out.splitlines()
    assert listing[1].startswith("  MIG 1g.18gb     Device  0: (UUID: MIG-")
    assert len(listing) == 8
    lgip = smi(path, "mig", "-lgip").out
    assert "|   0  MIG 1g.18gb         19     0/7        16.00" in lgip
    assert "|   0  MIG 7g.141gb         0     0/1" in lgip
    # An eighth 1g.18gb does not fit.
    again = smi(path, "mig", "-cgi", "19")
    assert again.out == (
        "Unable to create a GPU instance on GPU  0 using profile 19: Insufficient Resources\n"
        "Failed to create GPU instances: Insufficient Resources\n"
    )
    assert again.rc == cli.RC_INSUFFICIENT


def test_insufficient_resources_keeps_the_instances_created_before(tmp_path: Path) -> None:
    path = h200_path(tmp_path, mig_mode_current="Enabled", mig_mode_pending="Enabled")
    result = smi(path, "mig", "-cgi", "3g.71gb,9,1g.18gb")
    assert result.out.splitlines() == [
        "Successfully created GPU instance ID  2 on GPU  0 using profile MIG 3g.71gb (ID  9)",
        "Successfully created GPU instance ID  1 on GPU  0 using profile MIG 3g.71gb (ID  9)",
        "Unable to create a GPU instance on GPU  0 using profile 1g.18gb: Insufficient Resources",
        "Failed to create GPU instances: Insufficient Resources",
    ]
    gi = state.load(path).gpus[0].gpu_instances
    assert [(g.id, g.placement_start, g.placement_size) for g in gi] == [(2, 4, 4), (1, 0, 4)]
    lgi = smi(path, "mig", "-lgi").out.splitlines()
    assert lgi[5:8] == [
        "|   0  MIG 3g.71gb          9        1          0:4     |",
        "+-------------------------------------------------------+",
        "|   0  MIG 3g.71gb          9        2          4:4     |",
    ]
    # 4g.71gb and 3g.71gb share the GPU (placements 0:4 and 4:4).
    assert smi(path, "mig", "-dgi", "-gi", "1").rc == 0
    assert smi(path, "mig", "-cgi", "4g.71gb").out.startswith(
        "Successfully created GPU instance ID  1 on GPU  0 using profile MIG 4g.71gb (ID  5)"
    )


def test_unknown_profile_is_invalid_argument(tmp_path: Path) -> None:
    path = h200_path(tmp_path, mig_mode_current="Enabled", mig_mode_pending="Enabled")
    result = smi(path, "mig", "-cgi", "1g.5gb")
    assert result.out.startswith(
        "Unable to create a GPU instance on GPU  0 using profile 1g.5gb: Invalid Argument"
    )
    assert result.rc == cli.RC_INVALID


def test_create_gi_refused_when_mig_disabled(tmp_path: Path) -> None:
    path = h200_path(tmp_path)
    result = smi(path, "mig", "-cgi", "19", "-C")
    assert result.out == "No MIG-enabled devices found.\n"
    assert result.rc == cli.RC_NOT_FOUND
    assert state.load(path).gpus[0].gpu_instances == []


def test_destroy_gi_with_ci_refused_then_dci_dgi(tmp_path: Path) -> None:
    path = h200_path(tmp_path, mig_mode_current="Enabled", mig_mode_pending="Enabled")
    smi(path, "mig", "-cgi", "9", "-C")
    refused = smi(path, "mig", "-dgi", "-gi", "2")
    assert refused.out == (
        "Unable to destroy GPU instance ID  2 from GPU  0: In use by another client\n"
        "Failed to destroy GPU instances: In use by another client\n"
    )
    assert refused.rc == cli.RC_IN_USE
    assert smi(path, "mig", "-dci").out == (
        "Successfully destroyed compute instance ID  0 from GPU  0 GPU instance ID  2\n"
    )
    assert smi(path, "mig", "-dgi").out == "Successfully destroyed GPU instance ID  2 from GPU  0\n"
    # Idempotence: nothing left to destroy.
    gone = smi(path, "mig", "-dgi")
    assert (gone.out, gone.rc) == ("No GPU instances found: Not Found\n", cli.RC_NOT_FOUND)
    gone = smi(path, "mig", "-dgi", "-gi", "2")
    assert gone.out.startswith("Unable to destroy GPU instance ID  2 from GPU  0: Not Found")
    assert smi(path, "mig", "-lgi").out == "No GPU instances found: Not Found\n"


def test_mig_enable_pending_while_a_process_holds_the_gpu(tmp_path: Path) -> None:
    path = h200_path(tmp_path)
    hold = ["hold", "--gpu", "0", "--pid", "4242", "--name", "python3", "--mib", "1024"]
    assert admin.main(["--state", str(path), *hold]) == 0
    result = smi(path, "-i", "0", "-mig", "1")
    assert result.out.splitlines() == [
        "Warning: MIG mode is in pending enable state for GPU 00000000:00:06.0:In use by "
        "another client",
        "00000000:00:06.0 is currently being used by one or more other processes (e.g. CUDA "
        "application or a monitoring application such as another instance of nvidia-smi). "
        "Please first kill all processes using the device and retry the command or reboot "
        "the system to make MIG mode effective.",
        "All done.",
    ]
    assert result.rc == 0
    query = smi(path, "--query-gpu=mig.mode.current,mig.mode.pending", "--format=csv,noheader")
    assert query.out == "Disabled, Enabled\n"
    apps = smi(path, "--query-compute-apps=pid,process_name,used_memory", "--format=csv")
    assert apps.out == "pid, process_name, used_gpu_memory [MiB]\n4242, python3, 1024 MiB\n"
    assert "|    0   N/A  N/A            4242      C   python3     " in smi(path).out
    # Reset refused while in use, state unchanged.
    reset = smi(path, "-r", "-i", "0")
    assert reset.rc == cli.RC_OTHER
    assert reset.out.splitlines()[1:3] == [
        "The following GPUs could not be reset:",
        "  GPU 00000000:00:06.0: In use by another client",
    ]
    assert state.load(path).gpus[0].mig_mode_current == "Disabled"
    # Hopper: the pending mode becomes current as soon as nothing holds the GPU.
    assert admin.main(["--state", str(path), "release", "--gpu", "0"]) == 0
    gpu = state.load(path).gpus[0]
    assert (gpu.mig_mode_current, gpu.mig_mode_pending) == ("Enabled", "Enabled")


def test_ampere_pending_mode_applies_on_reset(tmp_path: Path) -> None:
    st = make_state("NVIDIA A100-SXM4-80GB")
    st.gpus[0].processes.append(Process(pid=7, name="dcgm", used_memory_mib=0))
    path = write(tmp_path, st)
    assert smi(path, "-mig", "1").out.startswith("Warning: MIG mode is in pending enable state")
    assert admin.main(["--state", str(path), "release", "--gpu", "0", "--pid", "7"]) == 0
    assert state.load(path).gpus[0].mig_mode_current == "Disabled"
    reset = smi(path, "--gpu-reset", "-i", "0")
    assert (reset.out, reset.rc) == ("GPU 00000000:00:06.0 was successfully reset.\n", 0)
    gpu = state.load(path).gpus[0]
    assert (gpu.mig_mode_current, gpu.mig_mode_pending) == ("Enabled", "Enabled")


def test_mig_disable_pending_while_instances_exist(tmp_path: Path) -> None:
    path = h200_path(tmp_path, mig_mode_current="Enabled", mig_mode_pending="Enabled")
    smi(path, "mig", "-cgi", "0", "-C")
    result = smi(path, "-mig", "0")
    assert result.out.startswith(
        "Warning: MIG mode is in pending disable state for GPU 00000000:00:06.0:In use by "
        "another client\n"
    )
    gpu = state.load(path).gpus[0]
    assert (gpu.mig_mode_current, gpu.mig_mode_pending) == ("Enabled", "Disabled")
    assert smi(path, "-r").rc == 0
    gpu = state.load(path).gpus[0]
    assert (gpu.mig_mode_current, gpu.gpu_instances) == ("Disabled", [])


def test_mig_enable_twice_is_idempotent(tmp_path: Path) -> None:
    path = h200_path(tmp_path)
    first = smi(path, "-mig", "1")
    second = smi(path, "-mig", "1")
    assert first.out == second.out == "Enabled MIG Mode for GPU 00000000:00:06.0\nAll done.\n"
    assert state.load(path).gpus[0].mig_mode_current == "Enabled"


def test_non_mig_gpu_answers_not_supported(tmp_path: Path) -> None:
    path = write(tmp_path, make_state("NVIDIA L4"))
    result = smi(path, "-i", "0", "-mig", "1")
    assert result.out == (
        "Unable to enable MIG Mode for GPU 00000000:00:06.0: Not Supported\n"
        "Treating as warning and moving on.\nAll done.\n"
    )
    assert result.rc == cli.RC_NOT_SUPPORTED
    q = smi(path, "-q").out.splitlines()
    i = q.index("    MIG Mode")
    # As public/rtx4070-laptop-nonmig/q-full.txt: Current and Pending N/A.
    assert q[i + 1].split(":")[1].strip() == "N/A" and q[i + 2].split(":")[1].strip() == "N/A"
    query = smi(path, "--query-gpu=mig.mode.current", "--format=csv,noheader")
    assert query.out == "[N/A]\n"
    assert smi(path, "mig", "-lgip").out == "No MIG-supported devices found.\n"
    assert "|                  N/A |" in smi(path).out


def test_unknown_query_field_is_the_real_error(tmp_path: Path) -> None:
    path = h200_path(tmp_path)
    result = smi(path, "--query-gpu=device_minor,uuid", "--format=csv,noheader,nounits")
    # stdout and exit code as captured in CoHDI/composable-resource-operator#37.
    assert (result.out, result.rc) == ('Field "device_minor" is not a valid field to query.\n\n', 2)


def test_query_selected_fields_and_index_selection(tmp_path: Path) -> None:
    path = write(tmp_path, make_state(count=2))
    st = state.load(path)
    out = smi(
        path, "-i", "1", "--query-gpu=index,uuid,serial,pci.bus_id,memory.total,compute_cap",
        "--format=csv,noheader,nounits",
    ).out  # fmt: skip
    g = st.gpus[1]
    assert out == f"1, {g.uuid}, {g.serial}, 00000000:00:07.0, 143771, 9.0\n"
    # h200-single-cli/smi-i5-query-not-found.txt
    missing = smi(path, "-i", "5", "--query-gpu=index", "--format=csv")
    assert (missing.out, missing.rc) == ("No devices were found\n", cli.RC_NOT_FOUND)


def test_uuids_are_deterministic_per_node_and_index() -> None:
    a = admin.build_state("NVIDIA H200", 2, "node-a")
    assert [g.uuid for g in a.gpus] == [g.uuid for g in admin.build_state("h200", 2, "node-a").gpus]
    assert a.gpus[0].uuid != a.gpus[1].uuid
    assert a.gpus[0].uuid != admin.build_state("NVIDIA H200", 1, "node-b").gpus[0].uuid


def test_bad_model_and_bad_state_name_the_fix(tmp_path: Path) -> None:
    with pytest.raises(admin.AdminError, match="--model 'NVIDIA B999'"):
        admin.build_state("NVIDIA B999", 1, "n")
    path = tmp_path / "state.json"
    data = make_state().to_dict()
    data["gpus"][0]["mig_mode_current"] = "On"
    path.write_text(json.dumps(data))
    result = smi(path, "-L")
    assert result.rc == cli.RC_NO_DRIVER
    assert "state.gpus[0].mig_mode_current = 'On'" in result.err


def test_state_file_round_trips_schema_1(tmp_path: Path) -> None:
    st = make_state(mig_mode_current="Enabled", mig_mode_pending="Enabled")
    gi = add_gi(st.gpus[0], "1g.18gb", 0, 7, (0,))
    path = write(tmp_path, st)
    raw = json.loads(path.read_text())
    assert raw["schema"] == 1 and raw["simulator"] == "gpufleet GPU simulator"
    assert set(raw["gpus"][0]["gpu_instances"][0]["compute_instances"][0]) == {
        "id", "profile", "profile_id", "multiprocessors", "uuid",
    }  # fmt: skip
    assert state.load(path).gpus[0].gpu_instances == [gi]
    assert not list(tmp_path.glob(".state.json.*"))
