"""Hostile inputs shared by the hostile-input tests: the bytes of hostile files
(``CONTENTS``), the CLI runner with its environment (``invoke``), the refusal contract
(``assert_refused``: exit 2, no traceback, the option, variable or file named) and the
ResourceClaim objects the API server refuses (``CHECK_CASES``)."""

from __future__ import annotations

import json
from typing import Any

from ansible_collections.gpufleet.cluster.plugins.module_utils.common import limits as ig
from click.testing import CliRunner, Result

from gpufleet.cli import main

DEEP = 20_000


#: name -> the bytes of a hostile file (None: the kind is not a plain file).
CONTENTS: dict[str, bytes] = {
    "binary": b"\xff\xfe\x00\x01\x02binary",
    "latin1": "name: caf\xe9\n".encode("latin-1"),
    "deep-json": b"[" * DEEP + b"]" * DEEP,
    "deep-yaml": b"a: " + b"{b: " * DEEP + b"1" + b"}" * DEEP,
    "alias-bomb": (
        b"a: &a [x, x, x, x, x, x, x, x, x, x]\n"
        + b"".join(
            f"b{i}: &b{i} [{', '.join(['*' + ('a' if i == 1 else f'b{i - 1}')] * 10)}]\n".encode()
            for i in range(1, 9)
        )
    ),
    "self-alias": b"a: &a [*a]\n",
    "oversized": b"a: b\n" * (ig.MAX_TEXT_BYTES // 5 + 10),
    "unclosed": b"a: [1, 2\nb: {c: \n",
    "bad-scalar": b"a: 2001-13-45\n",
    "huge-int": b"a: " + b"9" * 5000 + b"\n",
    "empty": b"",
}


FILE_KINDS = (*CONTENTS, "directory", "missing", "dev-zero")


def invoke(
    hostile: dict[str, str], argv: list[str], env: dict[str, str] | None = None, **kw: Any
) -> Result:
    base = {"GPUFLEET_CACHE": hostile["cache"], "COLUMNS": "2000", "KUBECONFIG": ""}
    return CliRunner().invoke(main, argv, env={**base, **(env or {})}, **kw)


def assert_refused(result: Result, names: tuple[str, ...], code: int = 2) -> None:
    """Exit ``code``, no traceback, and one of ``names`` (option, variable, file) in the
    message."""
    out = result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), (
        f"{type(result.exception).__name__}: {result.exception}\n{out}"
    )
    assert "Traceback" not in out, out
    assert result.exit_code == code, out
    flat = " ".join(out.split())
    assert any(n in flat for n in names), (names, out)


def fill(argv: list[str], hostile: dict[str, str], path: str = "") -> list[str]:
    return [
        a.replace("{F}", path)
        .replace("{INV}", hostile["inventory"])
        .replace("{KC}", hostile["kubeconfig"])
        for a in argv
    ]


# -------------------------------------------------------------- claims check: the content


def _claim(**top: Any) -> str:
    obj = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "gpu", "namespace": "default"},
        "spec": {
            "spec": {
                "devices": {
                    "requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]
                }
            }
        },
    }
    for key, value in top.items():
        if value is None:
            obj.pop(key, None)
        else:
            obj[key] = value
    return json.dumps(obj)


CHECK_CASES: dict[str, tuple[str, str]] = {
    "nested-map-label": (
        _claim(metadata={"name": "gpu", "labels": {"team": {"a": "b"}}}),
        "metadata.labels.team",
    ),
    "list-label": (_claim(metadata={"name": "gpu", "labels": {"team": [1]}}), "metadata.labels"),
    "labels-not-a-map": (_claim(metadata={"name": "gpu", "labels": ["a"]}), "metadata.labels"),
    "bad-label-key": (_claim(metadata={"name": "gpu", "labels": {"a b": "c"}}), "metadata.labels"),
    "unknown-top-level": (_claim(bogus=1), "bogus"),
    "status-on-template": (_claim(status={}), "status"),
    "metadata-a-list": (_claim(metadata=["gpu"]), "metadata"),
    "bad-name": (_claim(metadata={"name": "GPU_1"}), "metadata.name"),
    "bad-namespace": (_claim(metadata={"name": "gpu", "namespace": "a.b"}), "metadata.namespace"),
    "annotation-int": (
        _claim(metadata={"name": "gpu", "annotations": {"a": 1}}),
        "metadata.annotations.a",
    ),
}
