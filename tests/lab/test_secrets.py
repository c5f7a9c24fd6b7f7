"""No token, key or kubeconfig content in what a real ``gpufleet lab up`` and ``gpufleet up``
leave behind: the ansible-runner artifacts (``<cache>/runs``: job events, stdout, the
inventory and variables ansible-runner was given) and the lab's own files.

The secrets are read from the lab's first control-plane node after the runs: every
bootstrap token (``kube-system`` Secrets of type ``bootstrap.kubernetes.io/token``), the
private keys under ``/etc/kubernetes/pki`` and the client key of ``admin.conf``. The test
fails naming the file and the kind of secret found in it.
"""

from __future__ import annotations

import base64
import subprocess
from pathlib import Path

import pytest
import yaml

from gpufleet.runner import _cache_dir

from .running import GPUFLEET, LAB_ENV, Lab

pytestmark = [pytest.mark.lab, pytest.mark.slow]

INVENTORY = Path(__file__).resolve().parents[2] / "inventory" / "lab"


def _secrets(lab: Lab) -> dict[str, str]:
    """kind -> secret text, read from the cluster and the first control-plane node."""
    out: dict[str, str] = {}
    tokens = lab.kubectl_json(
        "get",
        "secrets",
        "-n",
        "kube-system",
        "--field-selector",
        "type=bootstrap.kubernetes.io/token",
    )
    for item in tokens["items"]:
        data = item.get("data") or {}
        token_id = base64.b64decode(data.get("token-id", "")).decode()
        token_secret = base64.b64decode(data.get("token-secret", "")).decode()
        if token_id and token_secret:
            out[f"bootstrap token {token_id}"] = f"{token_id}.{token_secret}"
            out[f"bootstrap token secret {token_id}"] = token_secret
    cp = next(n["name"] for n in lab.status["nodes"] if n["role"] == "control-plane")
    keys = lab.node_exec(
        cp, "sh", "-c", "ls /etc/kubernetes/pki/*.key /etc/kubernetes/pki/etcd/*.key"
    )
    for path in keys.split():
        text = lab.node_exec(cp, "cat", path)
        body = "".join(line for line in text.splitlines() if "PRIVATE KEY" not in line)
        out[f"private key {path}"] = body[:64]
    admin = yaml.safe_load(lab.node_exec(cp, "cat", "/etc/kubernetes/admin.conf"))
    key_data = admin["users"][0]["user"]["client-key-data"]
    out["admin.conf client-key-data"] = key_data[:64]
    out["admin.conf client key"] = "".join(
        line
        for line in base64.b64decode(key_data).decode().splitlines()
        if "PRIVATE KEY" not in line
    )[:64]
    return out


def _files() -> list[Path]:
    roots = [_cache_dir() / "runs", _cache_dir() / "labs" / LAB_ENV["GPUFLEET_LAB_NAME"]]
    files = [p for root in roots if root.is_dir() for p in root.rglob("*") if p.is_file()]
    # The lab's kubeconfig is the admin credential on purpose (mode 0600); nothing else.
    return [p for p in files if p.name != "kubeconfig"]


def test_no_token_or_key_in_runner_artifacts_or_lab_files(lab: Lab) -> None:
    up = subprocess.run(
        [str(GPUFLEET), "up", "-i", str(INVENTORY), "-e", "site_validate=false"],
        env=lab.env(),
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )
    assert up.returncode == 0, up.stdout[-3000:] + up.stderr[-3000:]
    secrets = _secrets(lab)
    assert any(k.startswith("bootstrap token") for k in secrets), "no bootstrap token to look for"
    files = _files()
    assert any("job_events" in str(p) for p in files), "no ansible-runner artifacts were kept"
    found = []
    for path in files:
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        for kind, value in secrets.items():
            if value and value in text:
                found.append(f"{path}: {kind}")
    assert not found, "secrets in the artifacts:\n  " + "\n  ".join(found)
