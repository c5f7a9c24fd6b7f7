"""The benchmark's audit log reader (``tests/bench/cluster.py`` ``AuditLog``): the
background requests of a run, those kube-apiserver made to itself and the watches that
ended, which are not the measured command's."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from tests.bench import cluster

pytestmark = pytest.mark.unit


def line(verb: str, user: str, resource: str = "", uri: str = "", sub: str = "") -> bytes:
    ref = {"resource": resource, **({"subresource": sub} if sub else {})} if resource else None
    return json.dumps(
        {
            "verb": verb,
            "user": {"username": user},
            "requestURI": uri or f"/api/v1/{resource}",
            **({"objectRef": ref} if ref else {}),
        }
    ).encode()


def test_the_background_is_kube_apiservers_own_requests_and_the_watches(tmp_path: Path) -> None:
    own = cluster.APISERVER_USER
    lines = [
        line("update", own, "leases"),
        line("update", own, "leases"),
        line("get", own, uri="/openapi/v3"),
        line("watch", "kwok", "pods"),
        line("list", "kubernetes-admin", "pods"),  # the command's
        line("patch", "kubernetes-admin", "nodes"),  # the command's
        line("patch", "kwok", "nodes", sub="status"),
        b'{"verb":"upd',  # a line still being written
        b"[]",
    ]
    log = tmp_path / "audit.log"
    log.write_bytes(b"\n".join(lines[:2]) + b"\n")
    audit = cluster.AuditLog(log)
    audit.mark()
    with open(log, "ab") as fh:
        fh.write(b"\n".join(lines[2:]) + b"\n")

    assert audit.since_mark() == Counter({"GET openapi/v3": 1, "WATCH pods": 1})
    assert audit.since_mark(lines) == Counter(
        {"PUT leases": 2, "GET openapi/v3": 1, "WATCH pods": 1}
    )
    # the rise of apiserver_request_total less the background: the command's requests
    before = Counter({"PUT leases": 10})
    after = Counter({"PUT leases": 12, "GET openapi/v3": 1, "WATCH pods": 1, "LIST pods": 3})
    got = cluster.request_delta(before, after, audit.since_mark(lines))
    assert (got.total, got.by_kind) == (3, {"LIST pods": 3})


def test_a_floor_of_patches_needs_the_nodes_put_back_first() -> None:
    from tests.bench.floor import PatchRequest

    sent = cluster.Measured(
        ["x"], 0, 1.0, 1.0, cluster.Requests(0, {}, 0), "", "",
        patches=[PatchRequest("/api/v1/nodes/n1", {"metadata": {}})],
    )  # fmt: skip
    with pytest.raises(ValueError, match="1 node patches"):
        cluster.measure_floor(None, sent)  # type: ignore[arg-type]
