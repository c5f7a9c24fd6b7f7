"""Parsing nvidia-smi's answers (XML, ``-q`` text, ``--query-gpu``, ``-L``, MIG listings,
topology, NVLink) on captures of real GPUs in ``tests/unit/data/gpu``
(``plugins/module_utils/nvidia/smi.py``).

Expected values were read by hand from the capture files named in each test.
"""

from __future__ import annotations

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.nvidia import gpu as ginfo
from ansible_collections.gpufleet.cluster.plugins.module_utils.nvidia import smi as smip

from tests.unit.nvidia.gpu_captures import DATA, SINGLE, X2, capture

pytestmark = pytest.mark.unit


PUBLIC = DATA / "public"


def test_xml_h200_single_identity_memory_driver_mig() -> None:
    host = smip.parse_smi_xml(capture(SINGLE / "smi-q.xml"))
    assert (host.driver_version, host.cuda_driver_version) == ("580.159.04", "13.0")
    (gpu,) = host.gpus
    assert gpu.index == 0
    assert gpu.uuid == "GPU-1f6a9c2e-0b4d-4e8a-9c3f-5d2e7a1b8c90"
    assert gpu.name == "NVIDIA H200"
    assert gpu.pci_bus_id == "00000000:00:06.0"
    assert gpu.memory_mib == 143771
    assert gpu.architecture == "Hopper"
    assert gpu.mig_capable is True
    assert (gpu.mig_mode_current, gpu.mig_mode_pending) == ("Disabled", "Disabled")
    assert gpu.mig_devices == []
    assert (gpu.serial, gpu.minor_number) == ("1650000000001", 0)


def test_xml_h200_x2_two_gpus_in_index_order() -> None:
    host = smip.parse_smi_xml(capture(X2 / "smi-q.xml"))
    assert [g.uuid for g in host.gpus] == [
        "GPU-2a7b3c4d-5e6f-4a1b-8c2d-3e4f5a6b7c80",
        "GPU-9e8d7c6b-5a4f-4e3d-8c2b-1a0f9e8d7c61",
    ]
    assert [g.pci_bus_id for g in host.gpus] == ["00000000:00:06.0", "00000000:00:07.0"]
    assert [g.minor_number for g in host.gpus] == [0, 1]
    assert [g.serial for g in host.gpus] == ["1650000000003", "1650000000002"]
    assert {g.memory_mib for g in host.gpus} == {143771}


def test_xml_order_matches_nvidia_smi_list() -> None:
    listed = smip.parse_smi_list(capture(X2 / "smi-L.txt"))
    host = smip.parse_smi_xml(capture(X2 / "smi-q.xml"))
    assert [(g.index, g.uuid) for g in listed] == [(g.index, g.uuid) for g in host.gpus]


def test_text_q_gives_the_same_gpu_as_xml() -> None:
    for directory in (SINGLE, X2):
        from_text = smip.parse_smi_q_text(capture(directory / "smi-q.txt"))
        from_xml = smip.parse_smi_xml(capture(directory / "smi-q.xml"))
        assert from_text.driver_version == from_xml.driver_version == "580.159.04"
        assert from_text.gpus == from_xml.gpus


def test_text_q_rtx4070_without_mig_is_not_an_error() -> None:
    host = smip.parse_smi_q_text(capture(PUBLIC / "rtx4070-laptop-nonmig" / "q-full.txt"))
    assert (host.driver_version, host.cuda_driver_version) == ("566.36", "12.7")
    (gpu,) = host.gpus
    assert gpu.name == "NVIDIA GeForce RTX 4070 Laptop GPU"
    assert gpu.architecture == "Ada Lovelace"
    assert gpu.pci_bus_id == "00000000:01:00.0"
    assert gpu.memory_mib == 8188
    assert gpu.mig_capable is False
    assert (gpu.mig_mode_current, gpu.mig_mode_pending) == (None, None)
    assert (gpu.serial, gpu.minor_number) == (None, None)
    assert gpu.to_dict()["driver_version_semver"] == "566.36.0"


def test_xml_refuses_output_that_is_not_nvidia_smi_xml() -> None:
    with pytest.raises(ginfo.GpuQueryError, match="no readable XML"):
        smip.parse_smi_xml(capture(SINGLE / "smi-q.txt"))


def test_query_gpu_with_header_and_units() -> None:
    rows = smip.parse_query_gpu(capture(X2 / "smi-query.txt"))
    assert [r["index"] for r in rows] == ["0", "1"]
    assert rows[1]["uuid"] == "GPU-9e8d7c6b-5a4f-4e3d-8c2b-1a0f9e8d7c61"
    assert rows[0]["memory.total"] == "143771 MiB"
    assert rows[0]["compute_cap"] == "9.0"
    gpu = smip.gpu_from_query_row(rows[1])
    assert (gpu.index, gpu.pci_bus_id, gpu.memory_mib) == (1, "00000000:00:07.0", 143771)
    assert (gpu.architecture, gpu.mig_mode_current, gpu.mig_capable) == ("Hopper", "Disabled", True)


def test_query_gpu_noheader_nounits_equals_xml() -> None:
    fields = "index,uuid,name,driver_version,memory.total,mig.mode.current,mig.mode.pending"
    rows = smip.parse_query_gpu(capture(SINGLE / "smi-query-noheader.txt"), fields.split(","))
    (gpu,) = [smip.gpu_from_query_row(r) for r in rows]
    (xml_gpu,) = smip.parse_smi_xml(capture(SINGLE / "smi-q.xml")).gpus
    for name in ("uuid", "name", "driver_version", "memory_mib", "mig_mode_current"):
        assert getattr(gpu, name) == getattr(xml_gpu, name), name


def test_query_gpu_public_mig_modes() -> None:
    rows = smip.parse_query_gpu(
        capture(PUBLIC / "unknown-gpu" / "query-uuid-mig-mode-current-pending.txt")
    )
    assert [ginfo.mig_mode(r["mig.mode.current"]) for r in rows] == [
        "Enabled",
        "Disabled",
        "Disabled",
        "Disabled",
    ]
    (row,) = smip.parse_query_gpu(
        capture(PUBLIC / "a100-sxm4-40gb" / "nvdocs-query-mig-mode-current.txt")
    )
    assert ginfo.normalize_bus_id(row["pci.bus_id"]) == "00000000:36:00.0"
    assert row["mig.mode.current"] == "Enabled"


def test_query_gpu_row_with_wrong_column_count_names_the_row() -> None:
    with pytest.raises(ginfo.GpuQueryError, match="7 columns, expected 2"):
        smip.parse_query_gpu(capture(SINGLE / "smi-query-noheader.txt"), ["index", "uuid"])


def test_list_h100_compute_instances_as_mig_devices() -> None:
    (gpu,) = smip.parse_smi_list(capture(PUBLIC / "h100-80gb-hbm3" / "nvdocs-L-r570-ci.txt"))
    assert gpu.name == "NVIDIA H100 80GB HBM3"
    assert [(i, p) for i, p, _ in gpu.migs] == [
        (0, "1c.3g.40gb"),
        (1, "1c.3g.40gb"),
        (2, "1c.3g.40gb"),
        (3, "1g.10gb"),
        (4, "1g.10gb"),
    ]
    assert gpu.migs[4][2] == "MIG-b0000000-0000-4000-8000-000000000005"


def test_list_eight_a100_r470_and_old_spacing() -> None:
    gpus = smip.parse_smi_list(capture(PUBLIC / "a100-sxm4-40gb" / "nvdocs-L-8gpu-r470.txt"))
    assert [len(g.migs) for g in gpus] == [7, 3, 2, 1, 6, 1, 3, 3]
    assert [p for _, p, _ in gpus[6].migs] == ["1c.7g.40gb", "2c.7g.40gb", "3c.7g.40gb"]
    assert gpus[7].uuid == "GPU-a0000000-0000-4000-8000-000000000008"
    (old,) = smip.parse_smi_list(capture(PUBLIC / "a100-sxm4-40gb" / "nvdocs-L-2x3g.txt"))
    assert old.name == "A100-SXM4-40GB"
    assert old.migs == [
        (0, "3g.20gb", "MIG-b0000000-0000-4000-8000-000000000001"),
        (1, "3g.20gb", "MIG-b0000000-0000-4000-8000-000000000002"),
    ]


def test_lgi_wide_layout() -> None:
    rows = smip.parse_mig_lgi(capture(PUBLIC / "a100-pcie-40gb" / "lgi.txt"))
    assert [
        (r["profile"], r["gi_profile_id"], r["gi_id"], r["placement_start"], r["placement_size"])
        for r in rows
    ] == [
        ("1g.5gb", 19, 11, 0, 1),
        ("1g.5gb", 19, 12, 1, 1),
        ("2g.10gb", 14, 6, 2, 2),
        ("3g.20gb", 9, 1, 4, 4),
    ]
    assert {r["gpu"] for r in rows} == {0}


def test_lgi_narrow_layout_and_a30() -> None:
    rows = smip.parse_mig_lgi(capture(PUBLIC / "a100-sxm4-40gb" / "nvdocs-lgi-3211.txt"))
    assert [(r["gi_id"], r["profile"], r["placement_start"]) for r in rows] == [
        (7, "1g.5gb", 0),
        (8, "1g.5gb", 1),
        (4, "2g.10gb", 2),
        (2, "3g.20gb", 4),
    ]
    a30 = smip.parse_mig_lgi(capture(PUBLIC / "a30-24gb" / "lgi-4x1g.txt"))
    assert [(r["profile"], r["gi_profile_id"], r["gi_id"]) for r in a30] == [
        ("1g.6gb", 14, 3),
        ("1g.6gb", 14, 4),
        ("1g.6gb", 14, 5),
        ("1g.6gb", 14, 6),
    ]


def test_mig_listings_when_mig_is_off_or_empty() -> None:
    assert smip.parse_mig_lgi(capture(SINGLE / "smi-mig-lgi.txt")) == []
    assert smip.parse_mig_lci(capture(X2 / "smi-mig-lci.txt")) == []
    assert smip.parse_mig_lci(capture(PUBLIC / "a100-pcie-40gb" / "lci-gi12-not-found.txt")) == []


def test_lci_with_placement_column_and_truncated_table() -> None:
    rows = smip.parse_mig_lci(capture(PUBLIC / "a100-pcie-40gb" / "lci-i0-4ci-truncated.txt"))
    assert [(r["gi_id"], r["profile"], r["ci_profile_id"], r["ci_id"]) for r in rows] == [
        (11, "1g.5gb", 0, 0),
        (12, "1g.5gb", 0, 0),
        (6, "1c.2g.10gb", 0, 0),
        (1, "1c.3g.20gb", 0, 0),
    ]


def test_lci_old_layout_three_cis_in_one_gi() -> None:
    rows = smip.parse_mig_lci(capture(PUBLIC / "a100-sxm4-40gb" / "nvdocs-lci-gi1.txt"))
    assert [(r["gi_id"], r["profile"], r["ci_id"]) for r in rows] == [
        (1, "1c.3g.20gb", 0),
        (1, "1c.3g.20gb", 1),
        (1, "1c.3g.20gb", 2),
    ]


def test_lci_without_permission_is_an_error_with_nvidia_smi_words() -> None:
    text = capture(PUBLIC / "unknown-gpu" / "lci-insufficient-permissions.txt")
    with pytest.raises(ginfo.GpuQueryError, match="Insufficient Permissions"):
        smip.parse_mig_lci(text)


def a100_pcie(mig_devices: list[ginfo.MigDevice] | None = None) -> ginfo.GpuInfo:
    listed = smip.parse_smi_list(capture(PUBLIC / "a100-pcie-40gb" / "L.txt"))[0]
    return ginfo.GpuInfo(
        index=0,
        uuid=listed.uuid,
        name=listed.name,
        mig_capable=True,
        mig_mode_current="Enabled",
        mig_mode_pending="Enabled",
        mig_devices=mig_devices or [],
    )


def test_assemble_one_mig_device_from_lgi_lci_and_list() -> None:
    # The A100-PCIE host after `mig -gi 11 -cci 0`: four GIs (lgi.txt), one CI
    # (lci-gi11.txt), one MIG device in -L (L.txt) and in nvidia-smi (smi-mig-1dev.txt:
    # GI 11, CI 0, MIG Dev 0, 4864MiB).
    gpu = a100_pcie()
    listed = smip.parse_smi_list(capture(PUBLIC / "a100-pcie-40gb" / "L.txt"))[0]
    lgi = smip.parse_mig_lgi(capture(PUBLIC / "a100-pcie-40gb" / "lgi.txt"))
    lci = smip.parse_mig_lci(capture(PUBLIC / "a100-pcie-40gb" / "lci-gi11.txt"))
    (dev,) = smip.assemble_mig_devices(gpu, listed, lgi, lci)
    assert dev == ginfo.MigDevice(
        index=0,
        gi_id=11,
        ci_id=0,
        profile="1g.5gb",
        gi_profile="1g.5gb",
        gi_profile_id=19,
        ci_profile_id=0,
        placement_start=0,
        placement_size=1,
        uuid="MIG-b0000000-0000-4000-8000-000000000001",
        memory_mib=None,
    )


def test_assemble_orders_by_gi_and_keeps_uuid_only_when_profile_matches() -> None:
    # Four CIs (lci-i0-4ci-truncated.txt) against an -L taken when only GI 11 had a CI:
    # MIG device 0 is GI 1's 1c.3g.20gb, not L.txt's 1g.5gb, so it gets no UUID.
    gpu = a100_pcie()
    listed = smip.parse_smi_list(capture(PUBLIC / "a100-pcie-40gb" / "L.txt"))[0]
    lgi = smip.parse_mig_lgi(capture(PUBLIC / "a100-pcie-40gb" / "lgi.txt"))
    lci = smip.parse_mig_lci(capture(PUBLIC / "a100-pcie-40gb" / "lci-i0-4ci-truncated.txt"))
    devices = smip.assemble_mig_devices(gpu, listed, lgi, lci)
    assert [(d.index, d.gi_id, d.profile, d.gi_profile) for d in devices] == [
        (0, 1, "1c.3g.20gb", "3g.20gb"),
        (1, 6, "1c.2g.10gb", "2g.10gb"),
        (2, 11, "1g.5gb", "1g.5gb"),
        (3, 12, "1g.5gb", "1g.5gb"),
    ]
    assert [d.uuid for d in devices] == [None, None, None, None]
    assert [(d.placement_start, d.placement_size) for d in devices] == [
        (4, 4),
        (2, 2),
        (0, 1),
        (1, 1),
    ]


def test_assemble_from_xml_mig_devices_two_3g() -> None:
    # A100-SXM4 2x 3g.20gb: nvidia-smi's MIG devices table (nvdocs-smi-mig-devices-2x3g.txt)
    # has GI 1 CI 0 Dev 0 20224MiB and GI 2 CI 0 Dev 1 20096MiB, as -q -x reports them;
    # nvdocs-lgi-2x3g.txt places GI 1 at 4:4 and GI 2 at 0:4.
    gpu = a100_pcie(
        [
            ginfo.MigDevice(index=0, gi_id=1, ci_id=0, profile=None, memory_mib=20224),
            ginfo.MigDevice(index=1, gi_id=2, ci_id=0, profile=None, memory_mib=20096),
        ]
    )
    listed = smip.parse_smi_list(capture(PUBLIC / "a100-sxm4-40gb" / "nvdocs-L-2x3g.txt"))[0]
    lgi = smip.parse_mig_lgi(capture(PUBLIC / "a100-sxm4-40gb" / "nvdocs-lgi-2x3g.txt"))
    devices = smip.assemble_mig_devices(gpu, listed, lgi, [])
    assert [
        (d.gi_id, d.profile, d.gi_profile_id, d.placement_start, d.memory_mib, d.uuid)
        for d in devices
    ] == [
        (1, "3g.20gb", 9, 4, 20224, "MIG-b0000000-0000-4000-8000-000000000001"),
        (2, "3g.20gb", 9, 0, 20096, "MIG-b0000000-0000-4000-8000-000000000002"),
    ]


def test_topo_matrix_nvlink_peers() -> None:
    assert smip.parse_topo_matrix(capture(X2 / "smi-topo.txt")) == {0: [(1, 18)], 1: [(0, 18)]}
    assert smip.parse_topo_matrix(capture(SINGLE / "smi-topo.txt")) == {0: []}


def test_nvlink_status_eighteen_links_per_gpu() -> None:
    status = smip.parse_nvlink_status(capture(X2 / "smi-nvlink-s.txt"))
    assert sorted(status) == [0, 1]
    assert sorted(status[1]) == list(range(18))
    assert set(status[0].values()) == {26.562}
