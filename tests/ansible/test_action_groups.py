"""meta/runtime.yml's action group ``kube_auth``: one ``module_defaults`` entry gives the
kubeconfig to every module that extends the ``kube_auth`` doc fragment. Each module runs for
real (ansible-playbook on localhost) with only the group's default naming an empty
kubeconfig, and its refusal must name that file: the default reached it."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.ansible.test_config_gate_modules import play

pytestmark = pytest.mark.ansible

ROOT = Path(__file__).resolve().parents[2]
GROUP = "group/gpufleet.cluster.kube_auth"

#: The least arguments each module takes before it reads the kubeconfig.
ARGS: dict[str, dict[str, Any]] = {
    "dra_gate_audit": {"facts": {}},
    "dra_validate": {},
    # a private directory of the test's own: the module judges it before the kubeconfig
    "dra_validate_listing": {"listing_file": "{tmp}/listing-dir/listing"},
    "gpu_node_labels": {"nodes": []},
    "gpu_path_move": {"nodes": ["gpu-1"], "to": "dra"},
    "gpu_path_plan": {"pool": "gpu_a", "to": "dra", "hosts": [{"host": "gpu-1", "node": "gpu-1"}]},
    "kubeadm_config_gates": {},
    "upgrade_node_state": {"node": "gpu-1"},
    "upgrade_plan": {"target": "1.38.0", "hosts": []},
    "upgrade_uncordon": {"node": "gpu-1"},
}


def fragment_users() -> set[str]:
    """The modules whose documentation extends the kube_auth fragment."""
    found = set()
    for path in sorted((ROOT / "plugins" / "modules").glob("*.py")):
        module = importlib.import_module(
            f"ansible_collections.gpufleet.cluster.plugins.modules.{path.stem}"
        )
        doc = yaml.safe_load(getattr(module, "DOCUMENTATION", "") or "{}") or {}
        if "gpufleet.cluster.kube_auth" in (doc.get("extends_documentation_fragment") or []):
            found.add(path.stem)
    return found


def test_the_group_is_every_module_with_the_kube_auth_options() -> None:
    runtime = yaml.safe_load((ROOT / "meta" / "runtime.yml").read_text())
    assert set(runtime["action_groups"]["kube_auth"]) == fragment_users()
    assert set(ARGS) == fragment_users()


def test_module_defaults_of_the_group_reach_every_module(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "empty-kubeconfig"
    kubeconfig.write_text("")
    (tmp_path / "listing-dir").mkdir(mode=0o700)
    tasks = [
        {
            "name": name,
            "module_defaults": {GROUP: {"kubeconfig": str(kubeconfig)}},
            f"gpufleet.cluster.{name}": {
                key: value.replace("{tmp}", str(tmp_path)) if isinstance(value, str) else value
                for key, value in args.items()
            },
            "ignore_errors": True,
        }
        for name, args in ARGS.items()
    ]
    results = play(tmp_path, "kube-auth-group", tasks)
    for name, res in zip(ARGS, results, strict=True):
        assert res["_failed"], (name, res)
        assert str(kubeconfig) in res["msg"], (name, res["msg"])
