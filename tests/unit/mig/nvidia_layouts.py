"""NVIDIA's own MIG layouts per GPU, as data, for the differential test of the tables and
the planner (``test_nvidia_layouts.py``).

``CONFIGS``: every config with MIG devices of NVIDIA mig-parted
``deployments/systemd/config-default.yaml`` (commit bd7160f, 2026-08-21; the GPU
Operator's ``assets/state-mig-manager/0400_configmap.yaml`` at a22dbf6 carries the same
entries in another order): config name -> ``(device-filter or None, mig-devices)`` per
entry. An entry with a device filter targets those PCI device IDs.

``GROUPS`` and ``TARGETS``: the GPUs a config without a device filter is written for, as
the product groups of the file's comments and ``all-balanced`` entries name them
(``# A100-40GB, A800-40GB``, ``# H100 NVL, H800 NVL, GH200``, ...); a config that no
comment names is assigned the group whose ``all-balanced`` or guide table uses its
memory figure (``2g.35gb`` -> H200). ``all-3g.95gb``, ``all-4g.95gb``, ``all-7g.189gb``
(early HGX GB200 boards, NVIDIA/gpu-operator#1303) target no device ID: the production
GB200 (0x2941) prints other names, so they are left out.

``PRINTED_NAMES``: the name NVML/``nvidia-smi`` prints for a device ID where one was
seen, with its source; a device ID not listed here is named by gpufleet's table only.
"""

from __future__ import annotations

# fmt: off
GROUPS: dict[str, tuple[str, ...]] = {
    "A100-40GB": ("0x20B010DE", "0x20B110DE", "0x20F110DE", "0x20F610DE"),
    "H100-80GB": ("0x233010DE", "0x233110DE", "0x232210DE", "0x232410DE"),
    "A100-80GB": ("0x20B210DE", "0x20B510DE", "0x20F310DE", "0x20F510DE"),
    "A30-24GB": ("0x20B710DE",),
    # Server Edition (mig-parted's filters); the Workstation (0x2BB1) and Max-Q Workstation
    # (0x2BB4) Editions share the guide's one RTX PRO 6000 Blackwell table, and the
    # filterless configs below apply to them in mig-parted as to any GPU.
    "RTX PRO 6000 Blackwell": ("0x2BB510DE", "0x2BB110DE", "0x2BB410DE"),
    "H100 NVL": ("0x232110DE", "0x233A10DE"),
    "GH200 96GB": ("0x234210DE", "0x233D10DE", "0x232910DE"),
    "PG506-96GB": ("0x20B610DE",),
    "GB200 HGX": ("0x294110DE",),
    "B200": ("0x290110DE",),
    "GH200 144G HBM3e": ("0x234810DE",),
    "H200-141GB": ("0x233510DE", "0x233B10DE"),
    "B300": ("0x318210DE",),
    "GB300": ("0x31C210DE",),
}

TARGETS: dict[str, tuple[str, ...]] = {
    **dict.fromkeys(
        ("all-1g.5gb", "all-1g.5gb.me", "all-2g.10gb", "all-3g.20gb", "all-4g.20gb",
         "all-7g.40gb"),
        ("A100-40GB",),
    ),
    **dict.fromkeys(
        ("all-1g.24gb.gfx", "all-1g.24gb.me.all", "all-1g.24gb-me", "all-2g.48gb",
         "all-2g.48gb.gfx", "all-2g.48gb.me.all", "all-2g.48gb-me", "all-4g.96gb",
         "all-4g.96gb.gfx"),
        ("RTX PRO 6000 Blackwell",),
    ),
    **dict.fromkeys(
        ("all-1g.10gb.me", "all-1g.20gb", "all-2g.20gb", "all-3g.40gb", "all-4g.40gb",
         "all-7g.80gb"),
        ("H100-80GB", "A100-80GB"),
    ),
    **dict.fromkeys(
        ("all-1g.6gb", "all-1g.6gb.me", "all-2g.12gb", "all-2g.12gb.me", "all-4g.24gb"),
        ("A30-24GB",),
    ),
    "all-1g.12gb": ("H100 NVL", "GH200 96GB", "PG506-96GB"),
    "all-1g.12gb.me": ("H100 NVL", "GH200 96GB"),
    "all-1g.24gb": ("H100 NVL", "GH200 96GB", "RTX PRO 6000 Blackwell"),
    "all-2g.24gb": ("H100 NVL", "GH200 96GB", "PG506-96GB"),
    # under the "H100 NVL, H800 NVL, GH200" comment, but no H100 94GB/96GB table (guide,
    # captures) has a 1g.24gb+me: RTX PRO 6000 Blackwell's (guide) is the one it names
    "all-1g.24gb.me": ("RTX PRO 6000 Blackwell",),
    **dict.fromkeys(
        ("all-1g.47gb", "all-2g.47gb", "all-3g.93gb", "all-4g.93gb", "all-7g.186gb"),
        ("GB200 HGX",),
    ),
    **dict.fromkeys(("all-3g.47gb", "all-4g.47gb", "all-7g.94gb"), ("H100 NVL",)),
    **dict.fromkeys(
        ("all-3g.48gb", "all-4g.48gb", "all-7g.96gb"), ("GH200 96GB", "PG506-96GB")
    ),
    **dict.fromkeys(("all-1g.18gb", "all-1g.18gb.me"), ("H200-141GB", "GH200 144G HBM3e")),
    **dict.fromkeys(("all-1g.23gb", "all-1g.23gb.me"), ("GB200 HGX", "B200")),
    **dict.fromkeys(
        ("all-2g.35gb", "all-3g.71gb", "all-4g.71gb", "all-7g.141gb"), ("H200-141GB",)
    ),
    **dict.fromkeys(("all-1g.34gb", "all-1g.34gb.me"), ("B300",)),
    "all-1g.35gb.me": ("GB300",),
    **dict.fromkeys(
        ("all-1g.36gb", "all-2g.36gb", "all-3g.72gb", "all-4g.72gb", "all-7g.144gb"),
        ("GH200 144G HBM3e",),
    ),
    **dict.fromkeys(
        ("all-1g.45gb", "all-2g.45gb", "all-3g.90gb", "all-4g.90gb", "all-7g.180gb"),
        ("B200",),
    ),
    **dict.fromkeys(
        ("all-1g.67gb", "all-2g.67gb", "all-3g.135gb", "all-4g.135gb", "all-7g.269gb"),
        ("B300",),
    ),
    **dict.fromkeys(
        ("all-1g.70gb", "all-2g.70gb", "all-3g.139gb", "all-4g.139gb", "all-7g.278gb"),
        ("GB300",),
    ),
    **dict.fromkeys(("all-3g.95gb", "all-4g.95gb", "all-7g.189gb"), ()),
}

PRINTED_NAMES: dict[str, tuple[str, str]] = {
    "0x233510DE": ("NVIDIA H200", "tests/unit/data/gpu/h200-single/smi-q.txt"),
    "0x20B010DE": ("A100-SXM4-40GB", "public/a100-sxm4-40gb/nvdocs-L-2x3g.txt (R470)"),
    "0x20F110DE": ("NVIDIA A100-PCIE-40GB", "public/a100-pcie-40gb/L.txt"),
    "0x233010DE": ("NVIDIA H100 80GB HBM3", "public/h100-80gb-hbm3/nvdocs-L-r570-ci.txt"),
    "0x232110DE": ("NVIDIA H100 NVL", "public nvidia-smi mig -lgip of an H100 NVL"),
    "0x2BB510DE": (
        "NVIDIA RTX PRO 6000 Blackwell Server Edition",
        "nvidia-smi of a Server Edition, bigstack-oss/cubecos#312",
    ),
    "0x318210DE": (
        "NVIDIA B300 SXM6 AC",
        "NVIDIA/cosmos-framework#114 (torch.cuda.get_device_name on B300)",
    ),
    "0x234210DE": ("NVIDIA GH200 480GB", "public nvidia-smi outputs of GH200 nodes"),
}
# fmt: on

CONFIGS: dict[str, tuple[tuple[tuple[str, ...] | None, dict[str, int]], ...]] = {
    "all-1g.5gb": ((None, {"1g.5gb": 7}),),
    "all-1g.5gb.me": ((None, {"1g.5gb+me": 1}),),
    "all-2g.10gb": ((None, {"2g.10gb": 3}),),
    "all-3g.20gb": ((None, {"3g.20gb": 2}),),
    "all-4g.20gb": ((None, {"4g.20gb": 1}),),
    "all-7g.40gb": ((None, {"7g.40gb": 1}),),
    "all-1g.24gb.gfx": ((None, {"1g.24gb+gfx": 4}),),
    "all-1g.24gb.me.all": ((None, {"1g.24gb+me.all": 1}),),
    "all-1g.24gb-me": ((None, {"1g.24gb-me": 4}),),
    "all-2g.48gb": ((None, {"2g.48gb": 2}),),
    "all-2g.48gb.gfx": ((None, {"2g.48gb+gfx": 2}),),
    "all-2g.48gb.me.all": ((None, {"2g.48gb+me.all": 1}),),
    "all-2g.48gb-me": ((None, {"2g.48gb-me": 2}),),
    "all-4g.96gb": ((None, {"4g.96gb": 1}),),
    "all-4g.96gb.gfx": ((None, {"4g.96gb+gfx": 1}),),
    "all-1g.10gb": (
        (
            (
                "0x233010DE",
                "0x233110DE",
                "0x232210DE",
                "0x20B210DE",
                "0x20B510DE",
                "0x20F310DE",
                "0x20F510DE",
                "0x232410DE",
            ),
            {"1g.10gb": 7},
        ),
        (("0x20B010DE", "0x20B110DE", "0x20F110DE", "0x20F610DE"), {"1g.10gb": 4}),
    ),
    "all-1g.10gb.me": ((None, {"1g.10gb+me": 1}),),
    "all-1g.20gb": ((None, {"1g.20gb": 4}),),
    "all-2g.20gb": ((None, {"2g.20gb": 3}),),
    "all-3g.40gb": ((None, {"3g.40gb": 2}),),
    "all-4g.40gb": ((None, {"4g.40gb": 1}),),
    "all-7g.80gb": ((None, {"7g.80gb": 1}),),
    "all-1g.6gb": ((None, {"1g.6gb": 4}),),
    "all-1g.6gb.me": ((None, {"1g.6gb+me": 1}),),
    "all-2g.12gb": ((None, {"2g.12gb": 2}),),
    "all-2g.12gb.me": ((None, {"2g.12gb+me": 1}),),
    "all-4g.24gb": ((None, {"4g.24gb": 1}),),
    "all-1g.12gb": ((None, {"1g.12gb": 7}),),
    "all-1g.12gb.me": ((None, {"1g.12gb+me": 1}),),
    "all-1g.24gb": ((None, {"1g.24gb": 4}),),
    "all-2g.24gb": ((None, {"2g.24gb": 3}),),
    "all-1g.24gb.me": ((None, {"1g.24gb+me": 1}),),
    "all-1g.47gb": ((None, {"1g.47gb": 4}),),
    "all-2g.47gb": ((None, {"2g.47gb": 3}),),
    "all-3g.93gb": ((None, {"3g.93gb": 2}),),
    "all-4g.93gb": ((None, {"4g.93gb": 1}),),
    "all-7g.186gb": ((None, {"7g.186gb": 1}),),
    "all-3g.47gb": ((None, {"3g.47gb": 2}),),
    "all-4g.47gb": ((None, {"4g.47gb": 1}),),
    "all-7g.94gb": ((None, {"7g.94gb": 1}),),
    "all-3g.48gb": ((None, {"3g.48gb": 2}),),
    "all-4g.48gb": ((None, {"4g.48gb": 1}),),
    "all-7g.96gb": ((None, {"7g.96gb": 1}),),
    "all-balanced": (
        (("0x294110DE",), {"1g.23gb": 2, "2g.47gb": 1, "3g.93gb": 1}),
        (("0x31C210DE",), {"1g.35gb": 2, "2g.70gb": 1, "3g.139gb": 1}),
        (("0x2BB510DE",), {"1g.24gb": 2, "2g.48gb": 1}),
        (("0x290110DE",), {"1g.23gb": 2, "2g.45gb": 1, "3g.90gb": 1}),
        (("0x318210DE",), {"1g.34gb": 2, "2g.67gb": 1, "3g.135gb": 1}),
        (("0x234810DE",), {"1g.18gb": 2, "2g.36gb": 1, "3g.72gb": 1}),
        (("0x233510DE", "0x233B10DE"), {"1g.18gb": 2, "2g.35gb": 1, "3g.71gb": 1}),
        (("0x232110DE", "0x233A10DE"), {"1g.12gb": 2, "2g.24gb": 1, "3g.47gb": 1}),
        (
            (
                "0x233010DE",
                "0x233110DE",
                "0x232210DE",
                "0x20B210DE",
                "0x20B510DE",
                "0x20F310DE",
                "0x20F510DE",
                "0x232410DE",
            ),
            {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1},
        ),
        (
            ("0x20B010DE", "0x20B110DE", "0x20F110DE", "0x20F610DE"),
            {"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1},
        ),
        (("0x20B710DE",), {"1g.6gb": 2, "2g.12gb": 1}),
        (
            ("0x234210DE", "0x233D10DE", "0x20B610DE", "0x232910DE"),
            {"1g.12gb": 2, "2g.24gb": 1, "3g.48gb": 1},
        ),
    ),
    "all-1g.18gb": ((None, {"1g.18gb": 7}),),
    "all-1g.18gb.me": ((None, {"1g.18gb+me": 1}),),
    "all-1g.23gb": ((None, {"1g.23gb": 7}),),
    "all-1g.23gb.me": ((None, {"1g.23gb+me": 1}),),
    "all-1g.35gb": (
        (("0x233510DE",), {"1g.35gb": 4}),
        (("0x31C210DE",), {"1g.35gb": 7}),
    ),
    "all-2g.35gb": ((None, {"2g.35gb": 3}),),
    "all-3g.71gb": ((None, {"3g.71gb": 2}),),
    "all-4g.71gb": ((None, {"4g.71gb": 1}),),
    "all-7g.141gb": ((None, {"7g.141gb": 1}),),
    "all-1g.34gb": ((None, {"1g.34gb": 7}),),
    "all-1g.34gb.me": ((None, {"1g.34gb+me": 1}),),
    "all-1g.35gb.me": ((None, {"1g.35gb+me": 1}),),
    "all-1g.36gb": ((None, {"1g.36gb": 4}),),
    "all-1g.45gb": ((None, {"1g.45gb": 4}),),
    "all-1g.67gb": ((None, {"1g.67gb": 4}),),
    "all-1g.70gb": ((None, {"1g.70gb": 4}),),
    "all-2g.36gb": ((None, {"2g.36gb": 3}),),
    "all-2g.45gb": ((None, {"2g.45gb": 3}),),
    "all-2g.67gb": ((None, {"2g.67gb": 3}),),
    "all-2g.70gb": ((None, {"2g.70gb": 3}),),
    "all-3g.72gb": ((None, {"3g.72gb": 2}),),
    "all-3g.90gb": ((None, {"3g.90gb": 2}),),
    "all-3g.95gb": ((None, {"3g.95gb": 2}),),
    "all-3g.135gb": ((None, {"3g.135gb": 2}),),
    "all-3g.139gb": ((None, {"3g.139gb": 2}),),
    "all-4g.72gb": ((None, {"4g.72gb": 1}),),
    "all-4g.90gb": ((None, {"4g.90gb": 1}),),
    "all-4g.95gb": ((None, {"4g.95gb": 1}),),
    "all-4g.135gb": ((None, {"4g.135gb": 1}),),
    "all-4g.139gb": ((None, {"4g.139gb": 1}),),
    "all-7g.144gb": ((None, {"7g.144gb": 1}),),
    "all-7g.180gb": ((None, {"7g.180gb": 1}),),
    "all-7g.189gb": ((None, {"7g.189gb": 1}),),
    "all-7g.269gb": ((None, {"7g.269gb": 1}),),
    "all-7g.278gb": ((None, {"7g.278gb": 1}),),
}

#: Device ID -> product as the PCI ID database names it (github.com/pciutils/pciids
#: ``pci.ids`` at c1c1254, 2026-08-22, vendor 10de), for every ID of the MIG tables.
PCI_IDS: dict[str, str] = {
    "0x20B010DE": "GA100 [A100 SXM4 40GB]",
    "0x20B110DE": "GA100 [A100 PCIe 40GB]",
    "0x20B210DE": "GA100 [A100 SXM4 80GB]",
    "0x20B510DE": "GA100 [A100 PCIe 80GB]",
    "0x20B610DE": "GA100GL [PG506-232]",
    "0x20B710DE": "GA100GL [A30 PCIe]",
    "0x20F110DE": "GA100 [A100 PCIe 40GB]",
    "0x20F310DE": "GA100 [A800-SXM4-80GB]",
    "0x20F510DE": "GA100 [A800 80GB PCIe]",
    "0x20F610DE": "GA100 [A800 40GB PCIe]",
    "0x232110DE": "GH100 [H100L 94GB]",
    "0x232210DE": "GH100 [H800 PCIe]",
    "0x232410DE": "GH100 [H800]",
    "0x232910DE": "GH100 [H20]",
    "0x233010DE": "GH100 [H100 SXM5 80GB]",
    "0x233110DE": "GH100 [H100 PCIe]",
    "0x233510DE": "GH100 [H200 SXM 141GB]",
    "0x233910DE": "GH100 [H100 SXM5 94GB]",
    "0x233A10DE": "GH100 [H800L 94GB]",
    "0x233B10DE": "GH100 [H200 NVL]",
    "0x233D10DE": "GH100 [H100 96GB]",
    "0x234210DE": "GH100 [GH200 120GB / 480GB]",
    "0x234810DE": "GH100 [GH200 144G HBM3e]",
    "0x290110DE": "GB100 [B200]",
    "0x294110DE": "GB100 [HGX GB200]",
    "0x2BB110DE": "GB202GL [RTX PRO 6000 Blackwell Workstation Edition]",
    "0x2BB310DE": "GB202GL [RTX PRO 5000 Blackwell / RTX PRO 5000 72GB Blackwell]",
    "0x2BB410DE": "GB202GL [RTX PRO 6000 Blackwell Max-Q Workstation Edition]",
    "0x2BB510DE": "GB202GL [RTX PRO 6000 Blackwell Server Edition]",
    "0x2C3110DE": "GB203GL [RTX PRO 4500 Blackwell]",
    "0x318210DE": "GB110 [B300 SXM6 AC]",
    "0x31C210DE": "GB110 [GB300]",
}
