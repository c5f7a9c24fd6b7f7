"""The pieces of the API client that need no server: shared options, messages that name the
server without credentials, retries, list decoding and the kubeconfig check
(``plugins/module_utils/kube/client.py``). Requests to servers are tested in
``tests/integration`` and ``tests/unit/hostile``."""

from __future__ import annotations

import gc
from pathlib import Path

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.kube import client as vk

pytestmark = pytest.mark.unit

SERVER = "https://h:6443"


def test_kube_auth_argspec_is_a_new_copy_per_call() -> None:
    spec = vk.kube_auth_argspec()
    assert spec == {"kubeconfig": {"type": "path"}, "context": {"type": "str"}}
    spec["kubeconfig"]["type"] = "str"
    assert vk.kube_auth_argspec()["kubeconfig"] == {"type": "path"}


def test_shown_url_hides_credentials_and_keeps_the_server() -> None:
    assert (
        vk.shown_url("https://user:tok@host:6443/path?token=abc")
        == "https://***@host:6443/path?***"
    )
    assert vk.shown_url("https://host:6443") == "https://host:6443"


def test_unreachable_tells_a_timeout_from_a_refused_connection() -> None:
    timed_out = vk.unreachable(SERVER, TimeoutError("timed out"), (5.0, 30.0))
    assert "sent no answer within 30 s" in timed_out
    refused = vk.unreachable(SERVER, ConnectionRefusedError(111, "refused"), (5.0, 30.0))
    assert "cannot be reached" in refused and "refused" in refused
    for message in (timed_out, refused):
        assert message.startswith(f"the API server {SERVER} ")
        assert f"curl -k {SERVER}/version" in message


def test_a_read_that_timed_out_is_never_retried() -> None:
    retries = vk.no_read_retries()
    assert (retries.connect, retries.read, retries.status) == (2, 0, 0)


def test_decode_list_hands_over_each_trimmed_item_and_returns_the_rest() -> None:
    items: list[dict] = []
    rest = vk.decode_list(
        b'{"kind": "PodList", "metadata": {"resourceVersion": "5"},'
        b' "items": [{"metadata": {"name": "p", "managedFields": [{}]}}]}',
        items.append,
        vk.strip_managed_fields,
    )
    assert rest == {"kind": "PodList", "metadata": {"resourceVersion": "5"}}
    assert items == [{"metadata": {"name": "p"}}]


def test_decode_list_refuses_what_is_no_list_response() -> None:
    with pytest.raises(ValueError, match="must be a JSON object"):
        vk.decode_list(b"[1]", lambda item: None)
    with pytest.raises(ValueError):
        vk.decode_list(b'{"items": [1,', lambda item: None)


def test_strip_managed_fields_keeps_everything_else() -> None:
    obj = {"metadata": {"name": "x", "labels": {"a": "b"}, "managedFields": [{}]}, "spec": {}}
    assert vk.strip_managed_fields(obj) == {
        "metadata": {"name": "x", "labels": {"a": "b"}},
        "spec": {},
    }


def test_gc_paused_restores_the_collector() -> None:
    assert gc.isenabled()
    with vk.gc_paused():
        assert not gc.isenabled()
    assert gc.isenabled()


def test_check_kubeconfig_names_the_file_and_the_fix(tmp_path: Path) -> None:
    good = tmp_path / "config"
    good.write_text("apiVersion: v1\nkind: Config\n")
    vk.check_kubeconfig(str(good))
    listed = tmp_path / "list"
    listed.write_text("- a\n")
    with pytest.raises(vk.KubeError, match=f"{listed} holds a list, not a kubeconfig"):
        vk.check_kubeconfig(str(listed))
    with pytest.raises(vk.KubeError, match="is a directory") as err:
        vk.check_kubeconfig(str(tmp_path))
    assert err.value.status is None
