"""Kueue release manifests as the module reads them, shared by the install and filter tests."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml
from ansible_collections.gpufleet.cluster.plugins.module_utils.kueue import versions as kv

RELEASE = kv.kueue_release("0.17.0")


def _module_manifests() -> tuple[list[dict], dict]:
    """Kueue's own manager Deployment and Configuration from the module source, named
    as its config/default kustomization names them (prefix kueue-)."""
    cache = os.environ.get("GOMODCACHE") or str(
        Path(os.environ.get("GOPATH") or Path.home() / "go") / "pkg" / "mod"
    )
    manager = Path(cache) / "sigs.k8s.io" / "kueue@v0.17.0" / "config" / "components" / "manager"
    if not manager.is_dir():
        pytest.skip("sigs.k8s.io/kueue@v0.17.0 is not in the Go module cache")
    docs = [d for d in yaml.safe_load_all((manager / "manager.yaml").read_text()) if d]
    deployment = next(d for d in docs if d["kind"] == "Deployment")
    deployment["metadata"]["name"] = "kueue-controller-manager"
    config_text = (manager / "controller_manager_config.yaml").read_text()
    cm = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "kueue-manager-config", "namespace": "kueue-system"},
        "data": {"controller_manager_config.yaml": config_text},
    }
    api = {"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService", "metadata": {}}
    return [deployment, cm, api], yaml.safe_load(config_text)
