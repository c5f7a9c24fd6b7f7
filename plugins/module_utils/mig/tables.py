# Copyright: gpufleet contributors
# Apache License 2.0 (see LICENSE)
"""MIG GPU-instance profile and placement tables per GPU model, as data with their sources.

Standard library only and no imports: ``mig.profiles`` builds its ``GpuModel`` objects
from these rows; the GPU simulator and the boot-time MIG apply copy this file with it.

``LAYOUTS[key]`` is one MIG geometry: ``rows`` of
``(name, GI profile ID, memory slices, GiB, SMs, CE, NVDEC, NVENC, JPEG, OFA, max
instances, placement starts, derived)``, ``source`` (where the values come from) and
``total_slices``. GiB is what ``nvidia-smi mig -lgip`` prints (MiB / 1024, two decimals),
``None`` where no capture or NVIDIA document gives it (then ``mig.profiles`` takes the
name's decimal GB). ``derived`` names the fields of a row that no cited source states,
each worked out from the rows that are sourced: ``id`` (the GI profile ID that every
captured GPU of the family uses for that profile shape: 19, 20, 15, 14, 9, 5, 0),
``gib``, ``sm``, ``engines`` (CE/NVDEC/NVENC/JPEG), ``placements`` (the placement starts
of every captured GPU with the same memory-slice geometry). A planner result built on a
derived field is only as good as that inference: on the node, ``nvidia-smi mig -lgip``
and ``-lgipp`` win (``mig.profiles.model_from_nvidia_smi``).

``GPUS`` lists ``(NVML name, layout key, FB total MiB or None, architecture, compute
capability, PCI device IDs, note, other names)``: ``note`` says where the name, the device
IDs and the framebuffer come from, what is not sourced, and which GPU the layout is shared
with; ``other names`` are ``(name, source)`` pairs: further names that NVML and
``nvidia-smi`` print for the same GPU (``nvidia-smi --query-gpu=name``), each with where it
was seen. ``mig.profiles.model`` matches a node's name against the row's name and these,
exactly (case and repeated spaces aside), never by likeness.

Sources cited by key:

* ``guide``: NVIDIA Multi-Instance GPU User Guide, "Supported MIG Profiles"
  (docs.nvidia.com/datacenter/tesla/mig-user-guide/supported-mig-profiles.html, 2026:
  B200, RTX PRO 6000/5000/4500 Blackwell, Thor iGPU, H100 80/94/96 GB, H200, A100, A30;
  Thor iGPU is not modelled: its profiles have no memory slices (unified memory, 0 GB)
  and it allows one compute and one +gfx instance at most, a rule the placement model
  does not hold) and
  "Supported GPUs" (supported-gpus.html: adds H20 96GB, H200 NVL, GB200 186GB) and
  "Deployment Considerations" (minimum drivers, naming B300 and GB300 DGX Station).
* ``mig-parted``: NVIDIA mig-parted ``deployments/systemd/config-default.yaml``: the
  ``device-filter`` PCI device IDs and the product each group names in its comments;
  the only NVIDIA source found for B300 and GB300 profile names and counts.
* ``pci.ids``: the PCI ID database, vendor 10de (github.com/pciutils/pciids ``pci.ids``,
  2026-08-22; the Debian package pci.ids 2023.04.10 for the older rows).
* captures of ``nvidia-smi mig -lgip`` printed by NVIDIA engineers on real GPUs in
  NVIDIA's repositories: B200 (NVIDIA/mig-parted#166, #187), GB200 (NVIDIA/mig-parted#227;
  an earlier HGX GB200 in NVIDIA/gpu-operator#1303), GH200 144G HBM3e
  (NVIDIA/mig-parted#139), H200 (NVIDIA/mig-parted#120), and the captures in
  ``tests/unit/data/gpu/``.
"""

from __future__ import annotations

_ALL7 = (0, 1, 2, 3, 4, 5, 6)
_EVEN4 = (0, 2, 4, 6)
_EVEN3 = (0, 2, 4)
_HALVES = (0, 4)
_Q4 = (0, 1, 2, 3)
_Q2 = (0, 2)
_Z = (0,)
# ``derived`` tuples of the rows
_P = ("placements",)
_IP = ("id", "placements")
_ISP = ("id", "gib", "sm", "placements")
_ALL = ("id", "gib", "sm", "engines", "placements")

# fmt: off
# Rows: name, ID, slices, GiB, SM, CE, DEC, ENC, JPEG, OFA, max, placements, derived.
LAYOUTS: dict[str, dict] = {
    "h200-141gb": {
        "total_slices": 8,
        "source": "real capture on an H200, driver 580.159.04 (tests/unit/data/gpu/"
        "h200-single/smi-mig-lgip.txt, smi-mig-lgipp.txt, nvml.txt memorySizeMB); names "
        "and counts as the guide's H200 141GB table",
        "rows": (
            ("1g.18gb", 19, 1, 16.00, 16, 1, 1, 0, 1, 0, 7, _ALL7, ()),
            ("1g.18gb+me", 20, 1, 16.00, 16, 1, 1, 0, 1, 1, 1, _ALL7, ()),
            ("1g.35gb", 15, 2, 32.50, 26, 1, 1, 0, 1, 0, 4, _EVEN4, ()),
            ("2g.35gb", 14, 2, 32.50, 32, 2, 2, 0, 2, 0, 3, _EVEN3, ()),
            ("3g.71gb", 9, 4, 69.75, 60, 3, 3, 0, 3, 0, 2, _HALVES, ()),
            ("4g.71gb", 5, 4, 69.75, 64, 4, 4, 0, 4, 0, 1, _Z, ()),
            ("7g.141gb", 0, 8, 140.00, 132, 8, 7, 0, 7, 1, 1, _Z, ()),
        ),
    },
    "a100-sxm4-40gb": {
        "total_slices": 8,
        "source": "guide, getting-started-with-mig: nvidia-smi mig -lgip and -lgipp of an "
        "A100-SXM4-40GB (tests/unit/data/gpu/public/a100-sxm4-40gb/nvdocs-lgipp.txt); "
        "1g.10gb (ID 15) needs driver R525+",
        "rows": (
            ("1g.5gb", 19, 1, 4.75, 14, 1, 0, 0, 0, 0, 7, _ALL7, ()),
            ("1g.5gb+me", 20, 1, 4.75, 14, 1, 1, 0, 1, 1, 1, _ALL7, ()),
            ("1g.10gb", 15, 2, 9.62, 14, 1, 1, 0, 0, 0, 4, _EVEN4, ()),
            ("2g.10gb", 14, 2, 9.62, 28, 2, 1, 0, 0, 0, 3, _EVEN3, ()),
            ("3g.20gb", 9, 4, 19.50, 42, 3, 2, 0, 0, 0, 2, _HALVES, ()),
            ("4g.20gb", 5, 4, 19.50, 56, 4, 2, 0, 0, 0, 1, _Z, ()),
            ("7g.40gb", 0, 8, 39.25, 98, 7, 5, 0, 1, 1, 1, _Z, ()),
        ),
    },
    "a100-pcie-40gb": {
        "total_slices": 8,
        "source": "public capture, driver 510.47.03 (tests/unit/data/gpu/public/"
        "a100-pcie-40gb/lgip.txt); 1g.10gb (R525+, absent from that capture): name and "
        "count from the guide's A100 table, memory that of 2g.10gb on the same 2 slices",
        "rows": (
            ("1g.5gb", 19, 1, 4.75, 14, 1, 0, 0, 0, 0, 7, _ALL7, ()),
            ("1g.5gb+me", 20, 1, 4.75, 14, 1, 1, 0, 1, 1, 1, _ALL7, ()),
            ("1g.10gb", 15, 2, 9.75, 14, 1, 1, 0, 0, 0, 4, _EVEN4, _IP),
            ("2g.10gb", 14, 2, 9.75, 28, 2, 1, 0, 0, 0, 3, _EVEN3, ()),
            ("3g.20gb", 9, 4, 19.62, 42, 3, 2, 0, 0, 0, 2, _HALVES, ()),
            ("4g.20gb", 5, 4, 19.62, 56, 4, 2, 0, 0, 0, 1, _Z, ()),
            ("7g.40gb", 0, 8, 39.50, 98, 7, 5, 0, 1, 1, 1, _Z, ()),
        ),
    },
    "a100-80gb": {
        "total_slices": 8,
        "source": "public nvidia-smi mig -lgip of an 'NVIDIA A100 80GB PCIe', driver "
        "515.86.01; 1g.20gb (ID 15, R525+) not in it: name and count from the guide's "
        "A100 table (80GB names), memory and engines as 2g.20gb / A100-40GB 1g.10gb",
        "rows": (
            ("1g.10gb", 19, 1, 9.50, 14, 1, 0, 0, 0, 0, 7, _ALL7, _P),
            ("1g.10gb+me", 20, 1, 9.50, 14, 1, 1, 0, 1, 1, 1, _ALL7, _P),
            ("1g.20gb", 15, 2, 19.50, 14, 1, 1, 0, 0, 0, 4, _EVEN4, _IP),
            ("2g.20gb", 14, 2, 19.50, 28, 2, 1, 0, 0, 0, 3, _EVEN3, _P),
            ("3g.40gb", 9, 4, 39.25, 42, 3, 2, 0, 0, 0, 2, _HALVES, _P),
            ("4g.40gb", 5, 4, 39.25, 56, 4, 2, 0, 0, 0, 1, _Z, _P),
            ("7g.80gb", 0, 8, 79.00, 98, 7, 5, 0, 1, 1, 1, _Z, _P),
        ),
    },
    "a30-24gb": {
        "total_slices": 4,
        "source": "public capture (tests/unit/data/gpu/public/a30-24gb/lgip-all-used.txt, "
        "lgipp.txt); 2g.12gb+me (ID 6, R525+) not in it: the guide's A30 table (1 "
        "instance), placements as 2g.12gb, engines 2g.12gb plus JPEG 1 and OFA 1",
        "rows": (
            ("1g.6gb", 14, 1, 5.81, 14, 1, 1, 0, 0, 0, 4, _Q4, ()),
            ("1g.6gb+me", 21, 1, 5.81, 14, 1, 1, 0, 1, 1, 1, _Q4, ()),
            ("2g.12gb", 5, 2, 11.69, 28, 2, 2, 0, 0, 0, 2, _Q2, ()),
            ("2g.12gb+me", 6, 2, 11.69, 28, 2, 2, 0, 1, 1, 1, _Q2, _IP),
            ("4g.24gb", 0, 4, 23.50, 56, 4, 4, 0, 1, 1, 1, _Z, ()),
        ),
    },
    "h100-80gb": {
        "total_slices": 8,
        "source": "public nvidia-smi mig -lgip and -lgipp of an 'NVIDIA H100 80GB HBM3' "
        "(nvidia-smi usage notes; same rows on an H100 SXM5 80GB cluster page); names "
        "and counts as the guide's H100 80GB table (PCIe and SXM5)",
        "rows": (
            ("1g.10gb", 19, 1, 9.75, 16, 1, 1, 0, 1, 0, 7, _ALL7, ()),
            ("1g.10gb+me", 20, 1, 9.75, 16, 1, 1, 0, 1, 1, 1, _ALL7, ()),
            ("1g.20gb", 15, 2, 19.62, 26, 1, 1, 0, 1, 0, 4, _EVEN4, ()),
            ("2g.20gb", 14, 2, 19.62, 32, 2, 2, 0, 2, 0, 3, _EVEN3, ()),
            ("3g.40gb", 9, 4, 39.50, 60, 3, 3, 0, 3, 0, 2, _HALVES, ()),
            ("4g.40gb", 5, 4, 39.50, 64, 4, 4, 0, 4, 0, 1, _Z, ()),
            ("7g.80gb", 0, 8, 79.25, 132, 8, 7, 0, 7, 1, 1, _Z, ()),
        ),
    },
    "h100-94gb": {
        "total_slices": 8,
        "source": "public nvidia-smi mig -lgip of an 'NVIDIA H100 NVL' (OpenNebula NVIDIA "
        "vGPU/MIG page); names and counts as the guide's H100 94GB table (PCIe and "
        "SXM5); placements as every captured Hopper 8-slice GPU",
        "rows": (
            ("1g.12gb", 19, 1, 10.62, 16, 1, 1, 0, 1, 0, 7, _ALL7, _P),
            ("1g.12gb+me", 20, 1, 10.62, 16, 1, 1, 0, 1, 1, 1, _ALL7, _P),
            ("1g.24gb", 15, 2, 21.50, 26, 1, 1, 0, 1, 0, 4, _EVEN4, _P),
            ("2g.24gb", 14, 2, 21.50, 32, 2, 2, 0, 2, 0, 3, _EVEN3, _P),
            ("3g.47gb", 9, 4, 46.12, 60, 3, 3, 0, 3, 0, 2, _HALVES, _P),
            ("4g.47gb", 5, 4, 46.12, 64, 4, 4, 0, 4, 0, 1, _Z, _P),
            ("7g.94gb", 0, 8, 92.62, 132, 8, 7, 0, 7, 1, 1, _Z, _P),
        ),
    },
    "h100-96gb": {
        "total_slices": 8,
        "source": "the guide's H100 96GB table (H100 on GH200): names, memory and SM "
        "fractions, NVDEC/JPEG/OFA, CE and counts; no nvidia-smi capture found: GI "
        "profile IDs, GiB and SMs derived from the H100 94GB capture (same GH100 "
        "geometry), placements as every captured Hopper 8-slice GPU",
        "rows": (
            ("1g.12gb", 19, 1, None, 16, 1, 1, 0, 1, 0, 7, _ALL7, _ISP),
            ("1g.12gb+me", 20, 1, None, 16, 1, 1, 0, 1, 1, 1, _ALL7, _ISP),
            ("1g.24gb", 15, 2, None, 26, 1, 1, 0, 1, 0, 4, _EVEN4, _ISP),
            ("2g.24gb", 14, 2, None, 32, 2, 2, 0, 2, 0, 3, _EVEN3, _ISP),
            ("3g.48gb", 9, 4, None, 60, 3, 3, 0, 3, 0, 2, _HALVES, _ISP),
            ("4g.48gb", 5, 4, None, 64, 4, 4, 0, 4, 0, 1, _Z, _ISP),
            ("7g.96gb", 0, 8, None, 132, 8, 7, 0, 7, 1, 1, _Z, _ISP),
        ),
    },
    "gh200-144gb": {
        "total_slices": 8,
        "source": "nvidia-smi mig -lgip of a GH200 144G HBM3e in NVIDIA/mig-parted#139 "
        "(rows 1g.18gb, 1g.18gb+me, 1g.36gb, 2g.36gb); 3g.72gb, 4g.72gb, 7g.144gb: names "
        "and counts from mig-parted config-default.yaml (not in the guide), IDs, GiB, SMs "
        "and engines derived from the H200 capture, placements as every captured Hopper "
        "8-slice GPU",
        "rows": (
            ("1g.18gb", 19, 1, 17.50, 16, 1, 1, 0, 1, 0, 7, _ALL7, _P),
            ("1g.18gb+me", 20, 1, 17.50, 16, 1, 1, 0, 1, 1, 1, _ALL7, _P),
            ("1g.36gb", 15, 2, 35.25, 26, 1, 1, 0, 1, 0, 4, _EVEN4, _P),
            ("2g.36gb", 14, 2, 35.25, 32, 2, 2, 0, 2, 0, 3, _EVEN3, _P),
            ("3g.72gb", 9, 4, None, 60, 3, 3, 0, 3, 0, 2, _HALVES, _ALL),
            ("4g.72gb", 5, 4, None, 64, 4, 4, 0, 4, 0, 1, _Z, _ALL),
            ("7g.144gb", 0, 8, None, 132, 8, 7, 0, 7, 1, 1, _Z, _ALL),
        ),
    },
    "b200-180gb": {
        "total_slices": 8,
        "source": "the guide's B200 180 GB table (names, memory and SM fractions, "
        "NVDEC/JPEG/OFA, CE, counts) and the nvidia-smi mig -lgip of a B200 in "
        "NVIDIA/mig-parted#166 (IDs, GiB, SMs of 1g.23gb, 1g.23gb+me, 1g.45gb, 2g.45gb; a "
        "later driver prints 20.50 GiB for 1g.23gb, NVIDIA/mig-parted#187); 3g.90gb, "
        "4g.90gb, 7g.180gb IDs, GiB and SMs not in either (SMs: 3/7, 4/7 and 7/7 of the "
        "GPU): derived; placements as every captured 8-slice GPU",
        "rows": (
            ("1g.23gb", 19, 1, 22.00, 18, 2, 1, 0, 1, 0, 7, _ALL7, _P),
            ("1g.23gb+me", 20, 1, 22.00, 18, 2, 1, 0, 1, 1, 1, _ALL7, _P),
            ("1g.45gb", 15, 2, 44.25, 30, 2, 1, 0, 1, 0, 4, _EVEN4, _P),
            ("2g.45gb", 14, 2, 44.25, 36, 4, 2, 0, 2, 0, 3, _EVEN3, _P),
            ("3g.90gb", 9, 4, None, 54, 6, 3, 0, 3, 0, 2, _HALVES, _ALL),
            ("4g.90gb", 5, 4, None, 72, 8, 4, 0, 4, 0, 1, _Z, _ALL),
            ("7g.180gb", 0, 8, None, 126, 16, 7, 0, 7, 1, 1, _Z, _ALL),
        ),
    },
    "gb200-186gb": {
        "total_slices": 8,
        "source": "nvidia-smi mig -lgip of a GB200 NVL compute node in NVIDIA/mig-parted#227 "
        "(rows 1g.23gb, 1g.23gb+me, 1g.47gb, 2g.47gb; the names of production boards, which "
        "mig-parted's config-default.yaml adopted for device 0x294110DE in #228); 3g.93gb, "
        "4g.93gb, 7g.186gb: names and counts from that config (GB200 is in the guide's "
        "Supported GPUs, 186GB, but has no profile table there); IDs, GiB, SMs and engines "
        "of those derived from the B200 rows; placements as every captured 8-slice GPU. "
        "Earlier HGX GB200 boards printed 1g.24gb, 3g.95gb, 7g.189gb "
        "(NVIDIA/gpu-operator#1303): plan those from the node's -lgip",
        "rows": (
            ("1g.23gb", 19, 1, 22.00, 18, 2, 1, 0, 1, 0, 7, _ALL7, _P),
            ("1g.23gb+me", 20, 1, 22.00, 18, 2, 1, 0, 1, 1, 1, _ALL7, _P),
            ("1g.47gb", 15, 2, 45.50, 32, 2, 1, 0, 1, 0, 4, _EVEN4, _P),
            ("2g.47gb", 14, 2, 45.50, 38, 4, 2, 0, 2, 0, 3, _EVEN3, _P),
            ("3g.93gb", 9, 4, None, 54, 6, 3, 0, 3, 0, 2, _HALVES, _ALL),
            ("4g.93gb", 5, 4, None, 72, 8, 4, 0, 4, 0, 1, _Z, _ALL),
            ("7g.186gb", 0, 8, None, 126, 16, 7, 0, 7, 1, 1, _Z, _ALL),
        ),
    },
    "pg506-96gb": {
        "total_slices": 8,
        "source": "mig-parted config-default.yaml (PG506-96GB configs added in NVIDIA/"
        "mig-parted commit 65c4086c, 2021-09): names and counts of 1g.12gb (7), 2g.24gb "
        "(3), 3g.48gb (2), 7g.96gb (1), and 4g.48gb (1) in the group whose comment names "
        "PG506-96GB; not in the guide, no nvidia-smi capture found; memory slices from "
        "each name's GB; GI profile IDs, GiB, SMs, engines and placements derived from the "
        "A100 80GB rows (same GA100 geometry)",
        "rows": (
            ("1g.12gb", 19, 1, None, 14, 1, 0, 0, 0, 0, 7, _ALL7, _ALL),
            ("2g.24gb", 14, 2, None, 28, 2, 1, 0, 0, 0, 3, _EVEN3, _ALL),
            ("3g.48gb", 9, 4, None, 42, 3, 2, 0, 0, 0, 2, _HALVES, _ALL),
            ("4g.48gb", 5, 4, None, 56, 4, 2, 0, 0, 0, 1, _Z, _ALL),
            ("7g.96gb", 0, 8, None, 98, 7, 5, 0, 1, 1, 1, _Z, _ALL),
        ),
    },
    "rtx-pro-6000-96gb": {
        "total_slices": 4,
        "source": "the guide's RTX PRO 6000 Blackwell table (Workstation, Max-Q and Server "
        "Edition 96GB): names, memory and SM fractions (quarters), NVDEC/NVENC/JPEG/OFA, "
        "CE, counts; GI profile IDs, GiB and SMs not in it: 1g.24gb 14, 1g.24gb+me 21, "
        "1g.24gb+gfx 47, 1g.24gb+me.all 65, 23.12 GiB and 46 SMs per quarter from a "
        "public nvidia-smi mig -lgip of a Server Edition (bigstack-oss/cubecos#312), the "
        "other IDs not sourced (set to 100+ so that none is mistaken for a real one; give "
        "the node's -lgip); placements inferred from the quarters (as A30)",
        "rows": (
            ("1g.24gb", 14, 1, 23.12, 46, 1, 1, 1, 1, 0, 4, _Q4, _P),
            ("1g.24gb+me", 21, 1, 23.12, 46, 1, 1, 1, 1, 1, 1, _Q4, _P),
            ("1g.24gb+gfx", 47, 1, 23.12, 46, 1, 1, 1, 1, 0, 4, _Q4, _P),
            ("1g.24gb+me.all", 65, 1, 23.12, 46, 1, 4, 4, 4, 1, 1, _Q4, _P),
            ("1g.24gb-me", 101, 1, 23.12, 46, 1, 0, 0, 0, 0, 4, _Q4, _IP),
            ("2g.48gb", 102, 2, None, 92, 2, 2, 2, 2, 0, 2, _Q2, _ISP),
            ("2g.48gb+gfx", 103, 2, None, 92, 2, 2, 2, 2, 0, 2, _Q2, _ISP),
            ("2g.48gb+me.all", 104, 2, None, 92, 2, 4, 4, 4, 1, 1, _Q2, _ISP),
            ("2g.48gb-me", 105, 2, None, 92, 2, 0, 0, 0, 0, 2, _Q2, _ISP),
            ("4g.96gb", 106, 4, None, 184, 4, 4, 4, 4, 1, 1, _Z, _ISP),
            ("4g.96gb+gfx", 107, 4, None, 184, 4, 4, 4, 4, 1, 1, _Z, _ISP),
        ),
    },
    "rtx-pro-5000-48gb": {
        "total_slices": 2,
        "source": "the guide's RTX PRO 5000 Blackwell table (48GB products): names, memory "
        "and SM fractions (halves), NVDEC/NVENC/JPEG/OFA, CE and counts; no nvidia-smi mig "
        "-lgip/-lgipp capture found: GI profile IDs not sourced (set to 110+ so that none "
        "is mistaken for a real one), GiB from each name's GB, SM counts unknown (0; the "
        "guide gives fractions only), placements inferred from the halves; give the "
        "node's -lgip/-lgipp",
        "rows": (
            ("1g.24gb", 111, 1, None, 0, 1, 1, 1, 0, 0, 2, (0, 1), _ISP),
            ("1g.24gb+me", 112, 1, None, 0, 1, 1, 1, 1, 1, 1, (0, 1), _ISP),
            ("1g.24gb+gfx", 113, 1, None, 0, 1, 1, 1, 0, 0, 2, (0, 1), _ISP),
            ("1g.24gb+me.all", 114, 1, None, 0, 1, 3, 3, 1, 1, 1, (0, 1), _ISP),
            ("1g.24gb-me", 115, 1, None, 0, 1, 0, 0, 0, 0, 2, (0, 1), _ISP),
            ("2g.48gb", 116, 2, None, 0, 4, 3, 3, 1, 1, 1, _Z, _ISP),
            ("2g.48gb+gfx", 117, 2, None, 0, 4, 3, 3, 1, 1, 1, _Z, _ISP),
        ),
    },
    "rtx-pro-4500-32gb": {
        "total_slices": 2,
        "source": "the guide's RTX PRO 4500 Blackwell table (32GB products): names, memory "
        "and SM fractions (halves), NVDEC/NVENC/JPEG/OFA, CE and counts (no 1g.16gb+me "
        "profile); no nvidia-smi mig -lgip/-lgipp capture found: GI profile IDs not "
        "sourced (set to 120+), GiB from each name's GB, SM counts unknown (0), placements "
        "inferred from the halves; give the node's -lgip/-lgipp",
        "rows": (
            ("1g.16gb", 121, 1, None, 0, 1, 1, 1, 1, 0, 2, (0, 1), _ISP),
            ("1g.16gb+gfx", 122, 1, None, 0, 1, 1, 1, 1, 0, 2, (0, 1), _ISP),
            ("1g.16gb+me.all", 123, 1, None, 0, 1, 3, 3, 2, 1, 1, (0, 1), _ISP),
            ("1g.16gb-me", 124, 1, None, 0, 1, 0, 0, 0, 0, 2, (0, 1), _ISP),
            ("2g.32gb", 125, 2, None, 0, 2, 3, 3, 2, 1, 1, _Z, _ISP),
            ("2g.32gb+gfx", 126, 2, None, 0, 2, 3, 3, 2, 1, 1, _Z, _ISP),
        ),
    },
    # Names, counts and PCI device IDs from NVIDIA's mig-parted default config only; no
    # NVIDIA document or nvidia-smi capture gives the rest: every other field is derived
    # (from the B200 rows), so ``mig apply`` carves only from the node's -lgip/-lgipp.
    "b300-269gb": {
        "total_slices": 8,
        "source": "mig-parted config-default.yaml (B300 support added in NVIDIA/mig-parted "
        "commit 47c56d96, 2025-10): profile names and instance counts (all-<profile> "
        "configs, all-balanced for device 0x318210DE: 1g.34gb, 2g.67gb, 3g.135gb); not in "
        "the guide's Supported MIG Profiles, no nvidia-smi mig -lgip capture found; memory "
        "slices from each name's GB against the 7g's (1/8, 2/8, 4/8, 8/8); GI profile IDs, "
        "GiB, SMs and engines derived from the B200 rows, placements as every captured "
        "8-slice GPU",
        "rows": (
            ("1g.34gb", 19, 1, None, 18, 2, 1, 0, 1, 0, 7, _ALL7, _ALL),
            ("1g.34gb+me", 20, 1, None, 18, 2, 1, 0, 1, 1, 1, _ALL7, _ALL),
            ("1g.67gb", 15, 2, None, 30, 2, 1, 0, 1, 0, 4, _EVEN4, _ALL),
            ("2g.67gb", 14, 2, None, 36, 4, 2, 0, 2, 0, 3, _EVEN3, _ALL),
            ("3g.135gb", 9, 4, None, 54, 6, 3, 0, 3, 0, 2, _HALVES, _ALL),
            ("4g.135gb", 5, 4, None, 72, 8, 4, 0, 4, 0, 1, _Z, _ALL),
            ("7g.269gb", 0, 8, None, 126, 16, 7, 0, 7, 1, 1, _Z, _ALL),
        ),
    },
    "gb300-278gb": {
        "total_slices": 8,
        "source": "mig-parted config-default.yaml (GB300 added in NVIDIA/mig-parted commit "
        "75449116, 2025-10): profile names and instance counts (all-1g.35gb for device "
        "0x31C210DE: 7; all-<profile> configs; all-balanced for 0x31C210DE: 1g.35gb, "
        "2g.70gb, 3g.139gb); not in the guide's Supported MIG Profiles, no nvidia-smi mig "
        "-lgip capture found; memory slices from each name's GB against the 7g's; GI "
        "profile IDs, GiB, SMs and engines derived from the B200 rows, placements as every "
        "captured 8-slice GPU. Its 1g.35gb is one slice (7 instances), not H200's 1g.35gb "
        "(two slices, 4 instances)",
        "rows": (
            ("1g.35gb", 19, 1, None, 18, 2, 1, 0, 1, 0, 7, _ALL7, _ALL),
            ("1g.35gb+me", 20, 1, None, 18, 2, 1, 0, 1, 1, 1, _ALL7, _ALL),
            ("1g.70gb", 15, 2, None, 30, 2, 1, 0, 1, 0, 4, _EVEN4, _ALL),
            ("2g.70gb", 14, 2, None, 36, 4, 2, 0, 2, 0, 3, _EVEN3, _ALL),
            ("3g.139gb", 9, 4, None, 54, 6, 3, 0, 3, 0, 2, _HALVES, _ALL),
            ("4g.139gb", 5, 4, None, 72, 8, 4, 0, 4, 0, 1, _Z, _ALL),
            ("7g.278gb", 0, 8, None, 126, 16, 7, 0, 7, 1, 1, _Z, _ALL),
        ),
    },
}

_MP = "PCI device ID from mig-parted config-default.yaml"
_PCI = "PCI device ID and product from pci.ids"
_NO_FB = "FB total not sourced"
_NO_NAME = "NVML name not seen in a capture (the product name the guide uses)"

# NVML name, layout, FB total MiB, architecture, compute capability, PCI IDs, note, and
# optionally the other names the GPU prints, each with its source.
GPUS: tuple[tuple, ...] = (
    (
        "NVIDIA H200",
        "h200-141gb",
        143771,
        "Hopper",
        "9.0",
        ("0x233510DE",),
        "real capture (smi-q.txt FB total and Device Id); layout also of H200 NVL",
    ),
    (
        "NVIDIA H200 NVL",
        "h200-141gb",
        None,
        "Hopper",
        "9.0",
        ("0x233B10DE",),
        f"same layout as NVIDIA H200 (guide: one H200 141GB table; mig-parted groups "
        f"0x2335 and 0x233B); {_MP}; {_NO_FB}; {_NO_NAME}",
    ),
    (
        "NVIDIA A100-SXM4-40GB",
        "a100-sxm4-40gb",
        40960,
        "Ampere",
        "8.0",
        ("0x20B010DE",),
        f"{_PCI}; FB as public nvidia-smi outputs print it",
    ),
    (
        "NVIDIA A100-PCIE-40GB",
        "a100-pcie-40gb",
        40960,
        "Ampere",
        "8.0",
        ("0x20F110DE", "0x20B110DE"),
        f"{_PCI} (20f1 and 20b1: A100 PCIe 40GB); FB: public/a100-pcie-40gb/smi-mig-disabled.txt",
    ),
    (
        "NVIDIA A800 40GB PCIe",
        "a100-pcie-40gb",
        None,
        "Ampere",
        "8.0",
        ("0x20F610DE",),
        f"same layout as NVIDIA A100-PCIE-40GB (mig-parted groups A800-40GB with "
        f"A100-40GB); {_PCI}; {_NO_FB}; {_NO_NAME}",
    ),
    (
        "NVIDIA A100-SXM4-80GB",
        "a100-80gb",
        81920,
        "Ampere",
        "8.0",
        ("0x20B210DE",),
        f"{_PCI}; FB 81920 (NVIDIA/mig-parted#31)",
    ),
    (
        "NVIDIA A100 80GB PCIe",
        "a100-80gb",
        81920,
        "Ampere",
        "8.0",
        ("0x20B510DE",),
        f"same layout as NVIDIA A100-SXM4-80GB; {_PCI}",
    ),
    (
        "NVIDIA A800-SXM4-80GB",
        "a100-80gb",
        None,
        "Ampere",
        "8.0",
        ("0x20F310DE",),
        f"same layout as NVIDIA A100-SXM4-80GB (mig-parted groups A800-80GB with "
        f"A100-80GB); {_PCI}; {_NO_FB}",
    ),
    (
        "NVIDIA A800 80GB PCIe",
        "a100-80gb",
        None,
        "Ampere",
        "8.0",
        ("0x20F510DE",),
        f"same layout as NVIDIA A100-SXM4-80GB; {_PCI}; {_NO_FB}; {_NO_NAME}",
    ),
    (
        "NVIDIA A30",
        "a30-24gb",
        24576,
        "Ampere",
        "8.0",
        ("0x20B710DE",),
        f"{_PCI} (GA100GL [A30 PCIe])",
    ),
    (
        "NVIDIA H100 80GB HBM3",
        "h100-80gb",
        81559,
        "Hopper",
        "9.0",
        ("0x233010DE",),
        f"{_PCI} (H100 SXM5 80GB); FB: guide R580 nvidia-smi example",
    ),
    (
        "NVIDIA H100 PCIe",
        "h100-80gb",
        81559,
        "Hopper",
        "9.0",
        ("0x233110DE",),
        f"same layout as NVIDIA H100 80GB HBM3 (guide: H100 80GB PCIe and SXM5); {_PCI}",
    ),
    (
        "NVIDIA H800",
        "h100-80gb",
        None,
        "Hopper",
        "9.0",
        ("0x232410DE",),
        f"same layout as NVIDIA H100 80GB HBM3 (mig-parted groups H800-80GB with "
        f"H100-80GB); {_PCI} (GH100 [H800]); {_NO_FB}; {_NO_NAME}",
    ),
    (
        "NVIDIA H800 PCIe",
        "h100-80gb",
        None,
        "Hopper",
        "9.0",
        ("0x232210DE",),
        f"same layout as NVIDIA H100 80GB HBM3; {_PCI} (GH100 [H800 PCIe]); {_NO_FB}; {_NO_NAME}",
    ),
    (
        "NVIDIA H100 NVL",
        "h100-94gb",
        95830,
        "Hopper",
        "9.0",
        ("0x232110DE",),
        f"{_MP} (H100 NVL); FB as a public nvidia-smi prints it; layout also of H100 "
        "94GB SXM5/PCIe and H800 NVL",
    ),
    (
        "NVIDIA H100 94GB",
        "h100-94gb",
        None,
        "Hopper",
        "9.0",
        ("0x233910DE",),
        f"same layout as NVIDIA H100 NVL (guide: H100 94GB PCIe and SXM5); {_PCI} (2339 "
        f"GH100 [H100 SXM5 94GB]; not in mig-parted's config); {_NO_FB}; {_NO_NAME}",
    ),
    (
        "NVIDIA H800 NVL",
        "h100-94gb",
        None,
        "Hopper",
        "9.0",
        ("0x233A10DE",),
        f"same layout as NVIDIA H100 NVL (mig-parted groups H100 NVL and H800 NVL); "
        f"{_MP}; {_NO_FB}; {_NO_NAME}",
    ),
    (
        "NVIDIA GH200 96GB HBM3",
        "h100-96gb",
        None,
        "Hopper",
        "9.0",
        ("0x234210DE",),
        f"guide: H100 96GB (H100 on GH200); {_MP} (its 96 GB group: 0x2342, 0x233D, "
        "0x2329 and PG506's 0x20B6); pci.ids names 2342 GH100 [GH200 120GB / 480GB]; "
        f"{_NO_FB}; the name NVIDIA GH200 96GB HBM3 not seen printed: nodes print NVIDIA "
        "GH200 480GB (other names)",
        (
            (
                "NVIDIA GH200 480GB",
                "public nvidia-smi and torch.cuda.get_device_name() outputs of GH200 nodes "
                "(compute capability 9.0, 132 SMs, about 96 GiB of HBM3); pci.ids 2342 "
                "[GH200 120GB / 480GB]",
            ),
        ),
    ),
    (
        "NVIDIA H100 96GB",
        "h100-96gb",
        None,
        "Hopper",
        "9.0",
        ("0x233D10DE",),
        f"same layout as NVIDIA GH200 96GB HBM3; {_MP} (96 GB group, see GH200); "
        f"{_NO_FB}; {_NO_NAME}",
    ),
    (
        "NVIDIA H20",
        "h100-96gb",
        None,
        "Hopper",
        "9.0",
        ("0x232910DE",),
        f"same layout as NVIDIA GH200 96GB HBM3 (guide Supported GPUs: H20 96GB, 7 "
        f"instances; mig-parted puts H20 in the 96 GB group); {_MP}; {_NO_FB}; {_NO_NAME}",
    ),
    (
        "NVIDIA GH200 144G HBM3e",
        "gh200-144gb",
        None,
        "Hopper",
        "9.0",
        ("0x234810DE",),
        f"{_MP} (GH200 144G HBM3e, NVIDIA/mig-parted#139); {_NO_FB}",
    ),
    (
        "NVIDIA B200",
        "b200-180gb",
        None,
        "Blackwell",
        "10.0",
        ("0x290110DE",),
        f"{_MP} (B200; NVIDIA/gpu-operator#1242 'B200 GPU- 2901'); {_NO_FB}; {_NO_NAME}",
    ),
    (
        "NVIDIA GB200",
        "gb200-186gb",
        None,
        "Blackwell",
        "10.0",
        ("0x294110DE",),
        f"{_MP} (GB200 HGX); {_NO_FB}; {_NO_NAME}",
    ),
    (
        "NVIDIA PG506-96GB",
        "pg506-96gb",
        None,
        "Ampere",
        "8.0",
        ("0x20B610DE",),
        f"{_MP} (PG506-96GB); the PCI ID database vendored in mig-parted (go-nvlib) "
        f"names 20b6 GA100GL [PG506-232]; {_NO_FB}; NVML name not seen in a capture "
        "(mig-parted's product name)",
    ),
    (
        "NVIDIA RTX PRO 6000 Blackwell Server Edition",
        "rtx-pro-6000-96gb",
        None,
        "Blackwell",
        "12.0",
        ("0x2BB510DE",),
        f"{_MP} (RTX-PRO-6000-96GB); {_PCI} (2bb5); guide Supported GPUs: GB202, CC 12.0, "
        f"4 instances; name as nvidia-smi prints it (bigstack-oss/cubecos#312); {_NO_FB}",
    ),
    (
        "NVIDIA RTX PRO 6000 Blackwell Workstation Edition",
        "rtx-pro-6000-96gb",
        None,
        "Blackwell",
        "12.0",
        ("0x2BB110DE",),
        "same layout as NVIDIA RTX PRO 6000 Blackwell Server Edition (guide Supported GPUs: "
        "RTX PRO 6000 Blackwell Workstation Edition, GB202, CC 12.0, 96GB, 4 instances; "
        "its RTX PRO 6000 Blackwell profile table covers every edition; Deployment "
        f"Considerations: all editions from R575); {_PCI} (2bb1); {_NO_FB}; {_NO_NAME}",
    ),
    (
        "NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition",
        "rtx-pro-6000-96gb",
        None,
        "Blackwell",
        "12.0",
        ("0x2BB410DE",),
        "same layout as NVIDIA RTX PRO 6000 Blackwell Server Edition (guide Supported GPUs: "
        "RTX PRO 6000 Blackwell Max-Q Workstation Edition, GB202, CC 12.0, 96GB, 4 "
        f"instances; one profile table for every edition); {_PCI} (2bb4); {_NO_FB}; {_NO_NAME}",
    ),
    (
        "NVIDIA RTX PRO 5000 Blackwell",
        "rtx-pro-5000-48gb",
        None,
        "Blackwell",
        "12.0",
        ("0x2BB310DE",),
        "guide Supported GPUs: RTX PRO 5000 Blackwell, GB202, CC 12.0, 48GB, 2 instances; "
        f"Deployment Considerations: from R575 (575.57.08); {_PCI} (2bb3 'RTX PRO 5000 "
        "Blackwell / RTX PRO 5000 72GB Blackwell': the 72GB board shares the ID and has "
        f"no table in the guide); {_NO_FB}; {_NO_NAME}",
    ),
    (
        "NVIDIA RTX PRO 4500 Blackwell",
        "rtx-pro-4500-32gb",
        None,
        "Blackwell",
        "12.0",
        ("0x2C3110DE",),
        "guide Supported GPUs: RTX PRO 4500 Blackwell, GB203, CC 12.0, 32GB, 2 instances; "
        f"Deployment Considerations: from R575 (575.64); {_PCI} (2c31; the Server Edition "
        f"2c3a is not in the guide's list); {_NO_FB}; {_NO_NAME}",
    ),
    (
        "NVIDIA B300",
        "b300-269gb",
        None,
        "Blackwell",
        "10.3",
        ("0x318210DE",),
        f"{_MP} (B300); pci.ids 3182 GB110 [B300 SXM6 AC]; guide Deployment "
        f"Considerations: MIG on B300 from driver R580 (580.82.07); {_NO_FB}; the name "
        "NVIDIA B300 not seen printed: nodes print NVIDIA B300 SXM6 AC (other names)",
        (
            (
                "NVIDIA B300 SXM6 AC",
                "NVIDIA/cosmos-framework#114: torch.cuda.get_device_name() (the NVML name) "
                "on B300; pci.ids 3182 [B300 SXM6 AC]",
            ),
        ),
    ),
    (
        "NVIDIA GB300",
        "gb300-278gb",
        None,
        "Blackwell",
        "10.3",
        ("0x31C210DE",),
        f"{_MP} (GB300; which GB300 product the ID is it does not say); guide Deployment "
        f"Considerations: GB300 (DGX Station) from driver R595 (595.58.03); {_NO_FB}; "
        f"{_NO_NAME}",
    ),
)

# fmt: on

# Short names accepted by mig_profiles.model() (and the CLI's --gpu-model).
ALIASES: dict[str, str] = {
    "h200": "NVIDIA H200",
    "h200-141gb": "NVIDIA H200",
    "h200-nvl": "NVIDIA H200 NVL",
    "a100-40gb": "NVIDIA A100-SXM4-40GB",
    "a100-sxm4-40gb": "NVIDIA A100-SXM4-40GB",
    "a100-pcie-40gb": "NVIDIA A100-PCIE-40GB",
    "a800-40gb": "NVIDIA A800 40GB PCIe",
    "a100-80gb": "NVIDIA A100-SXM4-80GB",
    "a100-sxm4-80gb": "NVIDIA A100-SXM4-80GB",
    "a800-80gb": "NVIDIA A800-SXM4-80GB",
    "a30": "NVIDIA A30",
    "a30-24gb": "NVIDIA A30",
    "h100-80gb": "NVIDIA H100 80GB HBM3",
    "h100": "NVIDIA H100 80GB HBM3",
    "h800": "NVIDIA H800",
    "h100-94gb": "NVIDIA H100 NVL",
    "h100-nvl": "NVIDIA H100 NVL",
    "h800-nvl": "NVIDIA H800 NVL",
    "h100-96gb": "NVIDIA H100 96GB",
    "gh200": "NVIDIA GH200 96GB HBM3",
    "gh200-96gb": "NVIDIA GH200 96GB HBM3",
    "gh200-144gb": "NVIDIA GH200 144G HBM3e",
    "h20": "NVIDIA H20",
    "b200": "NVIDIA B200",
    "gb200": "NVIDIA GB200",
    "gb200-186gb": "NVIDIA GB200",
    "pg506-96gb": "NVIDIA PG506-96GB",
    "b300": "NVIDIA B300",
    "b300-269gb": "NVIDIA B300",
    "gb300": "NVIDIA GB300",
    "gb300-278gb": "NVIDIA GB300",
    "rtx-pro-6000": "NVIDIA RTX PRO 6000 Blackwell Server Edition",
    "rtx-pro-6000-server": "NVIDIA RTX PRO 6000 Blackwell Server Edition",
    "rtx-pro-6000-workstation": "NVIDIA RTX PRO 6000 Blackwell Workstation Edition",
    "rtx-pro-6000-max-q": "NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition",
    "rtx-pro-5000": "NVIDIA RTX PRO 5000 Blackwell",
    "rtx-pro-4500": "NVIDIA RTX PRO 4500 Blackwell",
}
