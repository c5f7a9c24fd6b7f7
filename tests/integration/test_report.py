"""``gpufleet report`` against a real control plane: the real kube-scheduler allocates
devices of a ResourceSlice published for a KWOK node, one pod is force-deleted (its claim
stays allocated: kube-controller-manager runs without the resource claim controller, as
in ``test_validate_claims``), and the JSON the command writes is checked, with the number
of requests the API server itself counted (``apiserver_request_total``)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube import client as vk
from click.testing import CliRunner

from gpufleet.cli import main
from gpufleet.lab import gpusim_plugin
from tests.integration.conftest import StartControlPlane
from tests.integration.test_validate_claims import (
    CONTROLLERS,
    DRIVER,
    apply,
    claim_spec,
    device,
    pod,
    wait_for,
)

pytestmark = pytest.mark.integration

NS = "leak"
GIB = 2**30
MIB = 2**20
#: The kinds the report lists, as ``apiserver_request_total`` names them.
LISTED = ("nodes", "pods", "resourceslices", "resourceclaims")
_METRIC = re.compile(r"^apiserver_request_total\{([^}]*)\} (\S+)$", re.M)


def server_lists(kube: vk.Kube) -> int:
    """LIST requests of ``LISTED`` the API server has answered (its own metric)."""
    total = 0
    for labels, value in _METRIC.findall(kube.request_text("/metrics")):
        fields = dict(re.findall(r'(\w+)="([^"]*)"', labels))
        if fields.get("verb") == "LIST" and fields.get("resource") in LISTED:
            total += int(float(value))
    return total


def claim(name: str, cls: str, selector: str | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": NS},
        "spec": claim_spec(cls, selector),
    }


def test_report_of_allocated_leaked_and_pending_claims(
    start_control_plane: StartControlPlane, tmp_path: Path
) -> None:
    cp = start_control_plane(extra_args={"kube-controller-manager": {"controllers": CONTROLLERS}})
    (node,) = cp.start_kwok(1, labels={"nvidia.com/gpu.product": "NVIDIA-H200"}, name_prefix="gpu-")
    cp.wait_nodes_ready([node])
    devices = [device("gpu-0", "GPU-0"), device("gpu-1", "GPU-1")]
    devices += [device(f"gpu-2-mig-1g18gb-19-{i}", f"MIG-{i}", "1g.18gb") for i in range(3)]
    rslice = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-gpu"},
        "spec": {
            "driver": DRIVER,
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": devices,
        },
    }
    cp.create_namespace(NS)
    apply(cp, [*gpusim_plugin.device_classes(), rslice])
    b200 = "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA B200'"
    apply(
        cp,
        [
            claim("train", "gpu.nvidia.com"),
            claim("serve", "gpu.nvidia.com"),
            pod("trainer", {"resourceClaimName": "train"}),
            pod("server", {"resourceClaimName": "serve"}),
        ],
    )
    for name in ("train", "serve"):
        wait_for(
            f"claim {name} allocated and reserved",
            lambda name=name: (
                (
                    c := json.loads(
                        cp.kubectl("-n", NS, "get", "resourceclaim", name, "-o", "json").stdout
                    )
                )
                and c["status"].get("allocation")
                and c["status"].get("reservedFor")
            ),
        )
    cp.kubectl("-n", NS, "delete", "pod", "trainer", "--grace-period=0", "--force")
    apply(
        cp,
        [
            claim("wants-b200", "gpu.nvidia.com", b200),
            pod("b200-job", {"resourceClaimName": "wants-b200"}),
            claim("wants-gpu", "gpu.nvidia.com"),
        ],
    )

    admin = vk.Kube(str(cp.kubeconfig))
    before = server_lists(admin)
    out = tmp_path / "report.json"
    result = CliRunner().invoke(
        main,
        [
            "report",
            "--kubeconfig",
            str(cp.kubeconfig),
            "--json",
            str(out),
            "--html",
            str(tmp_path / "report.html"),
            "--markdown",
            str(tmp_path / "report.md"),
        ],
        env={"COLUMNS": "200"},
    )
    assert result.exit_code == 0, result.output
    lists = server_lists(admin) - before
    doc = json.loads(out.read_text())

    c = doc["cluster"]
    assert (c["devices_published"], c["devices_allocated"], c["devices_free"]) == (5, 2, 3)
    assert c["memory_published"] == 2 * 143771 * MIB + 3 * 16 * GIB
    assert c["memory_allocated"] == 2 * 143771 * MIB
    # pending claims ask for whole GPUs only: the three free MIG devices are stranded
    assert c["memory_stranded"] == c["memory_free"] == 3 * 16 * GIB
    # the free memory of the one node is three 16 GiB devices: 1 - 16/48
    assert c["fragmentation"] == pytest.approx(2 / 3, abs=1e-4)
    assert [p["pool"] for p in doc["pools"]] == ["NVIDIA-H200"]
    profiles = {(p["model"], p["profile"]): p["devices_free"] for p in doc["profiles"]}
    assert profiles == {("NVIDIA H200", "gpu"): 0, ("NVIDIA H200", "1g.18gb"): 3}

    pending = {p["claim"]: p for p in doc["pending"]}
    assert {k: v["reason"] for k, v in pending.items()} == {
        f"{NS}/wants-b200": "no-device-published",
        f"{NS}/wants-gpu": "all-allocated",
    }
    assert pending[f"{NS}/wants-b200"]["users"] == [f"{NS}/b200-job"]
    (leaked,) = doc["leaked"]
    assert (leaked["claim"], leaked["kind"]) == (f"{NS}/train", "dead-reservation")
    assert f"pod {NS}/trainer" in leaked["reason"] and "no longer exists" in leaked["reason"]
    assert leaked["memory"] == 143771 * MIB

    # one listing: /version, /apis/resource.k8s.io and one LIST per kind (Namespaces too,
    # for the teams), as the server saw
    assert doc["meta"]["api_requests"] == 7, doc["meta"]
    assert lists == len(LISTED), lists
    assert doc["meta"]["resource_version"] == "v1"
    page = (tmp_path / "report.html").read_text()
    assert "1g.18gb" in page and "66.7%" in page
    assert f"`{NS}/train` (dead-reservation" in (tmp_path / "report.md").read_text()
