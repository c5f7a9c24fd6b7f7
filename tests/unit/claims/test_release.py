"""Releasing a leaked ResourceClaim (plugins/module_utils/claims/release.py): the requests,
their order and bodies, and a conflict that stops the rest."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.claims import gc as cgc
from ansible_collections.gpufleet.cluster.plugins.module_utils.claims import release as rel
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube import client as vk

from tests.unit.validate_objects import claim

BASE = "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims"


class ApiServer:
    """Answers each write with the object written, its resourceVersion one higher (as the
    API server does); ``refuse`` maps (method, path) to the HTTP status that refuses it."""

    def __init__(self, refuse: dict[tuple[str, str], int] | None = None) -> None:
        self.calls: list[tuple[str, str, Any]] = []
        self.refuse = refuse or {}

    def request(self, method: str, path: str, body: Any = None, **_: Any) -> Any:
        self.calls.append((method, path, copy.deepcopy(body)))
        if (method, path) in self.refuse:
            raise vk.KubeError(self.refuse[(method, path)], "the object has been modified")
        if method == "DELETE":
            return {"kind": "Status", "status": "Success"}
        meta = body["metadata"]
        return {
            **body,
            "metadata": {**meta, "resourceVersion": str(int(meta["resourceVersion"]) + 1)},
        }


def _leaked(**kwargs: Any) -> tuple[dict[str, Any], cgc.GcAction]:
    c = claim("train", allocated=[("gpu-1", "gpu-0")], reserved_for=[("trainer", "u-1")], **kwargs)
    (action,) = cgc.plan_gc([c], [])
    return c, action


@pytest.mark.unit
def test_a_release_puts_the_status_then_drops_the_finalizer_on_what_came_back() -> None:
    c, action = _leaked()
    api = ApiServer()
    made = rel.release_claim(api, "v1", c, action)  # type: ignore[arg-type]
    assert made == [("PUT", f"{BASE}/train/status"), ("PUT", f"{BASE}/train")]
    (_, _, status_body), (_, _, claim_body) = api.calls
    assert status_body["status"] == {"reservedFor": []}
    assert status_body["metadata"]["resourceVersion"] == "1"  # as listed: a 409 if it moved
    assert claim_body["metadata"]["finalizers"] == []
    assert claim_body["metadata"]["resourceVersion"] == "2"  # the status write's answer
    assert claim_body["status"] == {"reservedFor": []}


@pytest.mark.unit
def test_a_generated_claim_is_deleted_with_preconditions_of_the_last_write() -> None:
    c, action = _leaked(owner_pod=("trainer", "u-1"))
    assert action.delete
    api = ApiServer()
    made = rel.release_claim(api, "v1", c, action)  # type: ignore[arg-type]
    assert [m for m, _ in made] == ["PUT", "PUT", "DELETE"]
    method, path, body = api.calls[-1]
    assert (method, path) == ("DELETE", f"{BASE}/train")
    assert body == {
        "apiVersion": "v1",
        "kind": "DeleteOptions",
        "preconditions": {"uid": "uid-claim-train", "resourceVersion": "3"},
    }


@pytest.mark.unit
def test_a_claim_changed_since_the_list_is_not_touched_further() -> None:
    c, action = _leaked(owner_pod=("trainer", "u-1"))
    api = ApiServer(refuse={("PUT", f"{BASE}/train/status"): 409})
    with pytest.raises(vk.KubeError) as err:
        rel.release_claim(api, "v1", c, action)  # type: ignore[arg-type]
    assert err.value.status == 409
    assert [(m, p) for m, p, _ in api.calls] == [("PUT", f"{BASE}/train/status")]


@pytest.mark.unit
def test_the_path_names_the_served_version() -> None:
    assert rel.claim_path("v1beta2", "team-a", "c") == (
        "/apis/resource.k8s.io/v1beta2/namespaces/team-a/resourceclaims/c"
    )
