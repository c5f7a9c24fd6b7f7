"""Files kubeadm writes (``tests/unit/data/kubeadm``) and the lines an edit changed, shared by
the manifest and kubelet configuration tests.
"""

from __future__ import annotations

import difflib
from pathlib import Path

import yaml
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube.flags import (
    FlagEdit,
)

DATA = Path(__file__).resolve().parents[1] / "data" / "kubeadm"

#: (version, variant) pairs whose kubeadm output is present.
GENERATED = sorted(
    (d.parent.name, d.name)
    for d in DATA.glob("*/*")
    if (d / "configmap-kubeadm-config.yaml").is_file()
)


def text(*parts: str) -> str:
    return DATA.joinpath(*parts).read_text()


def configmap_data(version: str, variant: str, name: str, key: str) -> str:
    cm = yaml.safe_load(text(version, variant, f"configmap-{name}.yaml"))
    assert cm["kind"] == "ConfigMap" and cm["metadata"]["name"] == name
    return cm["data"][key]


def changed_lines(before: str, after: str) -> list[str]:
    return [
        line
        for line in difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=0)
        if line[:1] in "+-" and not line.startswith(("+++", "---"))
    ]


DRA = FlagEdit(
    feature_gates={"DynamicResourceAllocation": True, "DRAPrioritizedList": True},
    absent_feature_gates=frozenset({"DRAControlPlaneController"}),
)
