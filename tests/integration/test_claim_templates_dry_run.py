"""The claim template builders and checker against a real kube-apiserver.

Every template the builders write is accepted by kube-apiserver's server-side dry run
(``?dryRun=All``, strict field validation as kubectl uses it) on 1.37.2 (resource.k8s.io/v1)
and on 1.33.13 (resource.k8s.io/v1beta2, enabled with the runtime-config and feature gate
the version model names). Shapes the checker refuses are refused by the apiserver too, and
the checker's suggested fix is accepted.
"""

from __future__ import annotations

import copy
import io
import json
import ssl
import urllib.error
import urllib.request
from typing import Any

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.claims import api as capi
from ansible_collections.gpufleet.cluster.plugins.module_utils.claims import cel as ccel
from ansible_collections.gpufleet.cluster.plugins.module_utils.claims import check as cchk
from ansible_collections.gpufleet.cluster.plugins.module_utils.claims import problems as cprob
from ansible_collections.gpufleet.cluster.plugins.module_utils.claims import templates as ct
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import core as dra_core
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import plan as dra_plan
from ansible_collections.gpufleet.cluster.plugins.module_utils.dra import settings as dra_settings
from rich.console import Console

from gpufleet import runner
from gpufleet.exit import EXIT_FAILED, EXIT_OK
from tests.harness.controlplane import ControlPlane
from tests.integration.conftest import DEFAULT_VERSION, RELEASES

pytestmark = pytest.mark.integration

BETA_VERSION = next(r.version for r in RELEASES.releases if r.version.startswith("1.33."))


def _context(cp: ControlPlane) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(cp.layout.pki / "ca.crt"))
    ctx.load_cert_chain(str(cp.layout.root / "admin.crt"), str(cp.layout.root / "admin.key"))
    return ctx


def dry_run_create(
    cp: ControlPlane, obj: dict[str, Any], field_validation: str = "Strict"
) -> tuple[int, dict[str, Any]]:
    """POST ``obj`` with ``dryRun=All``; returns (HTTP status, parsed body)."""
    group_version = obj["apiVersion"]
    namespace = obj["metadata"].get("namespace", "default")
    url = (
        f"{cp.server}/apis/{group_version}/namespaces/{namespace}/resourceclaimtemplates"
        f"?dryRun=All&fieldValidation={field_validation}"
    )
    request = urllib.request.Request(
        url,
        data=json.dumps(obj).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, context=_context(cp), timeout=30) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")


#: Template cases: name -> (kind, parameters), as the role items and the CLI give them.
CASES: dict[str, tuple[str, dict[str, Any]]] = {
    "mig-slice": ("mig-slice", {"profile": "1g.18gb"}),
    "mig-slice-me": ("mig-slice", {"profile": "1g.18gb+me", "count": 2}),
    "gpu-with-memory": ("gpu-with-memory", {"min_memory_gib": 40}),
    "gpu-with-memory-fraction": (
        "gpu-with-memory",
        {"min_memory_gib": 40.5, "labels": {"team": "ml"}},
    ),
    "shared-gpu-timeslicing": ("shared-gpu", {"strategy": "TimeSlicing", "interval": "Long"}),
    "shared-gpu-mps": (
        "shared-gpu",
        {
            "strategy": "MPS",
            "mps_active_thread_percentage": 50,
            "mps_pinned_memory_limit": "10Gi",
        },
    ),
    "gpu-pair-same-product": ("gpu-pair-same-product", {"count": 2}),
}


def builders(kubernetes_version: str | None = None, **extra: Any) -> dict[str, dict[str, Any]]:
    return {
        name: ct.build(kind, {**params, **extra}, kubernetes_version=kubernetes_version)
        for name, (kind, params) in CASES.items()
    }


def _beta_control_plane(start_control_plane: Any) -> ControlPlane:
    choice = capi.api_choice_for(BETA_VERSION)
    assert choice.runtime_config, f"{BETA_VERSION} should need runtime-config for {choice}"
    plan = dra_plan.plan_components(BETA_VERSION)
    apiserver = plan.components[dra_core.APISERVER]
    gates = dra_settings.feature_gates_string(apiserver.feature_gates)
    runtime_config = ",".join(sorted(apiserver.runtime_config))
    assert choice.runtime_config in runtime_config.split(",")
    return start_control_plane(
        BETA_VERSION,
        with_controllers=False,
        extra_args={"kube-apiserver": {"runtime-config": runtime_config, "feature-gates": gates}},
    )


@pytest.mark.parametrize("control_plane", [DEFAULT_VERSION], indirect=True)
def test_every_template_is_accepted_on_v1(control_plane: ControlPlane) -> None:
    assert capi.api_version_for(DEFAULT_VERSION) == "resource.k8s.io/v1"
    for kind, obj in builders(DEFAULT_VERSION).items():
        problems = cchk.check_claim_spec(obj, DEFAULT_VERSION)
        assert [p for p in problems if p.severity == cprob.ERROR] == [], kind
        status, body = dry_run_create(control_plane, obj)
        assert status == 201, f"{kind}: {status} {body.get('message')}"
        assert body["spec"]["spec"]["devices"] == obj["spec"]["spec"]["devices"], kind


@pytest.mark.parametrize("control_plane", [DEFAULT_VERSION], indirect=True)
def test_templates_need_no_device_class(control_plane: ControlPlane) -> None:
    """A ResourceClaimTemplate naming a DeviceClass that does not exist is still created:
    the class is looked up when a claim is allocated, not when the template is written."""
    classes = control_plane.get_json("/apis/resource.k8s.io/v1/deviceclasses")
    assert classes["items"] == []
    status, body = dry_run_create(control_plane, ct.mig_slice("1g.18gb"))
    assert status == 201, body.get("message")


def test_every_template_is_accepted_on_beta(start_control_plane: Any) -> None:
    cp = _beta_control_plane(start_control_plane)
    api_version = capi.api_version_for(BETA_VERSION)
    assert api_version == "resource.k8s.io/v1beta2"
    for kind, obj in builders(BETA_VERSION).items():
        assert obj["apiVersion"] == api_version
        status, body = dry_run_create(cp, obj)
        assert status == 201, f"{kind}: {status} {body.get('message')}"
    # The v1beta1 shape (deviceClassName on the request) is served on 1.33 too.
    for kind, obj in builders(api_version="resource.k8s.io/v1beta1").items():
        assert "deviceClassName" in obj["spec"]["spec"]["devices"]["requests"][0]
        status, body = dry_run_create(cp, obj)
        assert status == 201, f"v1beta1 {kind}: {status} {body.get('message')}"
    # v1 is not served on 1.33: the checker says so, and the apiserver has no such path.
    v1 = ct.mig_slice("1g.18gb", api_version="resource.k8s.io/v1")
    problems = cchk.check_claim_spec(v1, BETA_VERSION)
    assert any("does not serve resource.k8s.io/v1" in p.message for p in problems)
    status, _ = dry_run_create(cp, v1)
    assert status == 404


def _wrong_shapes() -> dict[str, tuple[dict[str, Any], str]]:
    """Plausible shapes that are not the API, each with a text the checker must show."""
    base = ct.gpu_with_memory(40, kubernetes_version=DEFAULT_VERSION)
    memory_cel = ccel.cel_memory_at_least(40)
    shapes: dict[str, tuple[dict[str, Any], str]] = {}

    attrs = copy.deepcopy(base)
    exact = attrs["spec"]["spec"]["devices"]["requests"][0]["exactly"]
    exact.pop("selectors")
    exact["attributes"] = {"memoryGB": ">=40"}
    shapes["attributes-map"] = (attrs, memory_cel)

    match_expr = ct.gpu_pair_same_product(kubernetes_version=DEFAULT_VERSION)
    match_expr["spec"]["spec"]["devices"]["constraints"] = [
        {
            "requests": ["gpus"],
            "matchExpression": {"key": "productName", "operator": "In", "values": ["H200"]},
        }
    ]
    shapes["match-expression"] = (match_expr, "matchAttribute: gpu.nvidia.com/productName")

    flat = copy.deepcopy(base)
    req = flat["spec"]["spec"]["devices"]["requests"][0]
    req.update(req.pop("exactly"))
    shapes["device-class-on-v1-request"] = (flat, "under exactly")

    not_cel = copy.deepcopy(base)
    not_cel["spec"]["spec"]["devices"]["requests"][0]["exactly"]["selectors"] = [
        {"matchLabels": {"gpu.nvidia.com/memory": "40Gi"}}
    ]
    shapes["selector-not-cel"] = (not_cel, memory_cel)

    bad_cel = copy.deepcopy(base)
    bad_cel["spec"]["spec"]["devices"]["requests"][0]["exactly"]["selectors"] = [
        {"cel": {"expression": "device.capacity['gpu.nvidia.com'].memory >= quantity('40Gi')"}}
    ]
    shapes["quantity-compared-with-operator"] = (bad_cel, "compareTo(quantity('40Gi')) >= 0")

    undeclared = copy.deepcopy(base)
    undeclared["spec"]["spec"]["devices"]["requests"][0]["exactly"]["selectors"] = [
        {"cel": {"expression": "memoryGB >= 40"}}
    ]
    shapes["undeclared-variable"] = (undeclared, memory_cel)

    syntax = copy.deepcopy(base)
    syntax["spec"]["spec"]["devices"]["requests"][0]["exactly"]["selectors"] = [
        {"cel": {"expression": "device.capacity['gpu.nvidia.com'].memory.compareTo("}}
    ]
    shapes["cel-syntax-error"] = (syntax, "does not parse")
    return shapes


@pytest.mark.parametrize("control_plane", [DEFAULT_VERSION], indirect=True)
def test_wrong_shapes_are_refused_by_checker_and_apiserver(control_plane: ControlPlane) -> None:
    for name, (obj, fix) in _wrong_shapes().items():
        errors = [p for p in cchk.check_claim_spec(obj) if p.severity == cprob.ERROR]
        assert errors, f"{name}: the checker found nothing"
        assert any(fix in p.message for p in errors), f"{name}: {[str(p) for p in errors]}"
        status, body = dry_run_create(control_plane, obj)
        print(f"{name}: apiserver {status}: {body.get('message', '')[:200]}")
        assert 400 <= status < 500, f"{name}: apiserver accepted it ({status})"


@pytest.mark.parametrize("control_plane", [DEFAULT_VERSION], indirect=True)
def test_matchexpression_constraint_is_rejected_by_the_apiserver(
    control_plane: ControlPlane,
) -> None:
    obj, _ = _wrong_shapes()["match-expression"]
    status, body = dry_run_create(control_plane, obj)
    assert status in (400, 422), body
    assert "matchExpression" in body["message"] or "matchAttribute" in body["message"]
    # Without strict field validation the unknown field is dropped and the constraint left
    # empty is still invalid: the shape cannot slip through either way.
    status, body = dry_run_create(control_plane, obj, field_validation="Ignore")
    assert status == 422, body
    assert "matchAttribute" in body["message"]


@pytest.mark.parametrize("control_plane", [DEFAULT_VERSION], indirect=True)
def test_attributes_map_is_silently_dropped_without_strict_validation(
    control_plane: ControlPlane,
) -> None:
    """Why the checker matters: without strict field validation kube-apiserver accepts the
    made-up ``attributes`` map and stores a request for *any* GPU."""
    obj, _ = _wrong_shapes()["attributes-map"]
    status, body = dry_run_create(control_plane, obj, field_validation="Ignore")
    assert status == 201, body
    stored = body["spec"]["spec"]["devices"]["requests"][0]["exactly"]
    assert "attributes" not in stored
    assert "selectors" not in stored


@pytest.mark.parametrize("control_plane", [DEFAULT_VERSION], indirect=True)
def test_checker_fix_is_accepted(control_plane: ControlPlane) -> None:
    """The CEL the checker proposes for the attributes map is what the builder writes and
    what the apiserver accepts."""
    obj, _ = _wrong_shapes()["attributes-map"]
    exact = obj["spec"]["spec"]["devices"]["requests"][0]["exactly"]
    suggested = ccel.suggest_cel(exact.pop("attributes"))
    assert suggested == ccel.cel_memory_at_least(40)
    exact["selectors"] = [{"cel": {"expression": suggested}}]
    assert cchk.check_claim_spec(obj) == []
    status, body = dry_run_create(control_plane, obj)
    assert status == 201, body.get("message")


@pytest.mark.parametrize("control_plane", [DEFAULT_VERSION], indirect=True)
def test_role_applies_the_templates_and_is_idempotent(
    control_plane: ControlPlane, tmp_path: Any
) -> None:
    """roles/claim_templates builds the items for the release it reads from the apiserver
    and applies them; a second run changes nothing."""
    playbook = tmp_path / "claims.yml"
    playbook.write_text(
        "- hosts: localhost\n  gather_facts: false\n  roles:\n"
        "    - gpufleet.cluster.claim_templates\n"
    )
    inventory = tmp_path / "inventory.ini"
    inventory.write_text(
        "localhost ansible_connection=local "
        'ansible_python_interpreter="{{ ansible_playbook_python }}"\n'
    )
    items = [
        {"kind": "mig-slice", "profile": "1g.18gb", "name": "role-mig"},
        {"kind": "gpu-with-memory", "min_memory_gib": 80, "name": "role-80g"},
        {"kind": "shared-gpu", "strategy": "MPS", "name": "role-mps"},
    ]
    extravars = {
        "claim_templates_items": items,
        "claim_templates_kubeconfig": str(control_plane.kubeconfig),
    }
    changed: list[bool] = []

    def on_event(event: Any) -> None:
        data = event.get("event_data") or {}
        if data.get("task") == "Claims | Create the missing ResourceClaimTemplates" and event.get(
            "event"
        ) in ("runner_on_ok", "runner_on_failed", "runner_on_skipped"):
            changed.append(bool((data.get("res") or {}).get("changed")))

    for _ in range(2):
        out = io.StringIO()
        result = runner.run_playbook(
            str(playbook),
            str(inventory),
            extravars=extravars,
            console=Console(file=out, width=300),
            on_event=on_event,
            artifact_root=tmp_path / "artifacts",
        )
        assert result.status == EXIT_OK, out.getvalue()[-3000:]
    assert changed == [True, False]  # the second run creates nothing
    stored = control_plane.get_json(
        "/apis/resource.k8s.io/v1/namespaces/default/resourceclaimtemplates"
    )
    names = {o["metadata"]["name"]: o for o in stored["items"]}
    assert {"role-mig", "role-80g", "role-mps"} <= set(names)
    assert names["role-80g"]["spec"]["spec"]["devices"]["requests"][0]["exactly"]["selectors"] == [
        {"cel": {"expression": ccel.cel_memory_at_least(80)}}
    ]
    # a changed item for an existing name is refused, naming it and the fix
    out = io.StringIO()
    extravars["claim_templates_items"] = [
        {"kind": "gpu-with-memory", "min_memory_gib": 40, "name": "role-80g"}
    ]
    refused: list[str] = []

    def on_refusal(event: Any) -> None:
        data = event.get("event_data") or {}
        if event.get("event") == "runner_item_on_failed":
            refused.append(" ".join(str((data.get("res") or {}).get("msg", "")).split()))

    result = runner.run_playbook(
        str(playbook),
        str(inventory),
        extravars=extravars,
        console=Console(file=out, width=300),
        on_event=on_refusal,
        artifact_root=tmp_path / "artifacts",
    )
    assert result.status == EXIT_FAILED
    assert any("default/role-80g exists with another spec" in m for m in refused), refused
