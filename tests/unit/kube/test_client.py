"""The pieces of the API client that need no server: shared options, messages that name the
server without credentials, retries, list decoding and the kubeconfig check
(``plugins/module_utils/kube/client.py``). Requests to servers are tested in
``tests/integration`` and ``tests/unit/hostile``."""

from __future__ import annotations

import gc
import json
from pathlib import Path
from typing import Any, TypedDict

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
        lambda item: {"trimmed": item["metadata"]["name"]},
    )
    assert rest == {"kind": "PodList", "metadata": {"resourceVersion": "5"}}
    assert items == [{"trimmed": "p"}]


def test_decode_list_refuses_what_is_no_list_response() -> None:
    with pytest.raises(ValueError, match="must be a JSON object"):
        vk.decode_list(b"[1]", lambda item: None)
    with pytest.raises(ValueError):
        vk.decode_list(b'{"items": [1,', lambda item: None)


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


# ------------------------------------------------------------------ the fast decoder


def page(*items: Any, **members: Any) -> bytes:
    """A list response as kube-apiserver writes it: compact JSON and a newline."""
    doc = {"kind": "List", "metadata": {"continue": "t"}, **members, "items": list(items)}
    return json.dumps(doc, separators=(",", ":")).encode() + b"\n"


def by_json(data: bytes, trim: Any = None) -> tuple[dict, list]:
    """``decode_list``'s result without msgspec."""
    items: list[Any] = []
    module, vk.msgspec = vk.msgspec, None
    try:
        rest = vk.decode_list(data, items.append, trim)
    finally:
        vk.msgspec = module
    return rest, items


class Named(TypedDict, total=False):
    name: Any


def test_the_fast_decoder_keeps_what_the_schema_names_and_skips_the_rest() -> None:
    data = page({"name": "a", "spec": {"big": [1] * 50}}, {"other": 1}, {"name": None})
    rest, items = vk.fast_page(data, None, Named)
    assert items == [{"name": "a"}, {}, {"name": None}]
    assert rest == {"kind": "List", "metadata": {"continue": "t"}}


def test_an_item_the_schema_or_the_trim_refuses_is_kept_as_json_keeps_it() -> None:
    def trim(item: dict[str, Any]) -> dict[str, Any]:
        return {"name": item["name"].upper()}  # AttributeError on a name that is no str

    data = page({"name": "a", "x": 1}, {"name": 5, "x": 2}, {"name": ["b"], "x": 3}, 7)
    rest, items = vk.fast_page(data, trim, Named)
    # a number fits Any but the trim refuses it; a list too; 7 is no object
    assert items == [{"name": "A"}, {"name": 5, "x": 2}, {"name": ["b"], "x": 3}, 7]
    assert (rest, items) == by_json(data, trim)


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(b'{"items":[{"name":"a\\ud800"}]}', id="lone-surrogate-escape"),
        pytest.param(b'{"items":[{"n":NaN}]}', id="nan"),
        pytest.param(b'{"metadata":{"n":-Infinity},"items":[]}', id="infinity-in-metadata"),
        pytest.param(b'{"items":[1],"items":[2]}', id="items-twice"),
        pytest.param(b'{"items": [1], "items": [2]}', id="items-twice-with-blanks"),
        pytest.param(b'{"items":[1],\n "items" : [2 ] }', id="items-twice-other-blanks"),
        pytest.param(b'{"\\u0069tems":[{"a":1}]}', id="escaped-key"),
        pytest.param(b'{"items":null}', id="items-null"),
        pytest.param(b'{"items":{"a":1}}', id="items-an-object"),
        pytest.param(b'\xef\xbb\xbf{"items":[]}', id="byte-order-mark"),
        pytest.param(b'{"items":[' + b"[" * 3000 + b"]" * 3000 + b"]}", id="deep"),
    ],
)
def test_a_page_the_fast_decoder_does_not_take_goes_to_json(data: bytes) -> None:
    assert vk.fast_page(data, None, None) is None
    items: list[Any] = []
    try:
        expected: Any = by_json(data)
    except (ValueError, RecursionError) as err:
        expected = type(err)
    try:
        got: Any = (vk.decode_list(data, items.append), items)
    except (ValueError, RecursionError) as err:
        got = type(err)
    assert got == expected


def test_a_number_beyond_a_float_is_read_by_json_as_infinity() -> None:
    data = b'{"items":[{"n":1e400},{"n":1}]}'
    assert vk.fast_page(data, None, None) == by_json(data) == ({}, [{"n": float("inf")}, {"n": 1}])


@pytest.mark.parametrize("indent", [None, 1, "\t"])
def test_a_page_with_blanks_between_its_members_is_taken(indent: Any) -> None:
    doc = {"kind": "L", "metadata": {"a b": " c\t"}, "items": [{"x": [1, " "]}, {"y": "\n"}]}
    data = b"\r\n " + json.dumps(doc, indent=indent).encode() + b"\n"
    assert vk.fast_page(data, None, None) == by_json(data)


def test_both_lists_of_a_page_that_names_items_twice_are_read() -> None:
    items: list[Any] = []
    vk.decode_list(b'{"items":[1],"items":[2]}', items.append)
    assert items == [1, 2]


def test_a_lone_surrogate_escape_becomes_the_replacement_character_either_way() -> None:
    data = page({"name": "x\\ud800y"}).replace(b"\\\\ud800", b"\\ud800")
    items: list[Any] = []
    vk.decode_list(data, items.append)
    assert items == [{"name": "x\ufffdy"}] == by_json(data)[1]


def test_without_msgspec_the_json_path_decodes_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(vk, "msgspec", None)
    assert vk.fast_page(page({"a": 1}), None, None) is None
    items: list[Any] = []
    assert vk.decode_list(page({"a": 1}), items.append, None, Named) == {
        "kind": "List",
        "metadata": {"continue": "t"},
    }
    assert items == [{"a": 1}]  # the schema is the fast decoder's only


@pytest.mark.parametrize(
    "value",
    [2**70, -(2**64), 0.1, 5e-324, 1.7976931348623157e308, -0.0, "é\u2028\x00", True, None],
)
def test_numbers_and_strings_decode_as_json_decodes_them(value: Any) -> None:
    data = page({"v": value, "w": [value, {"x": value}]})
    assert vk.fast_page(data, None, None) == by_json(data)


def test_the_blanks_around_an_answer_are_counted_from_both_ends() -> None:
    assert vk._edge_blanks(b'\r\n {"a": 1} \n') == 5
    assert vk._edge_blanks(b'{"a":1}') == 0
    assert vk._edge_blanks(b" \t\n") == 3
