"""What the per-node modules ship. AnsiballZ packs, with a module, every module_utils file
its imports reach (ansible-core's ``recursive_finder`` reads every import statement of the
source, those inside functions too), and runs it on each node of a play. The modules below
run on every node, so each closure is pinned: a new import that drags, say, the version
model's release tables (``dra/release_data.py``, ``dra/releases/``) or the API client into
a node's payload fails here, naming the module and the files it added.

The closure is read from the source (``tests/unit/plugin_imports.closure``):
``from <PREFIX>.<package>[.<module>] import name`` to a module or to a name of a module,
transitively, at any depth of a file (lazy imports count, as they do for AnsiballZ)."""

from __future__ import annotations

import pytest

from tests.unit.plugin_imports import PLUGINS, PREFIX, closure, imported

pytestmark = pytest.mark.unit

#: Module -> the collection files (relative to plugins/) its payload holds.
NODE_PAYLOADS: dict[str, set[str]] = {
    "upgrade_node_state": {
        "modules/upgrade_node_state.py",
        "module_utils/common/fields.py",  # a device's fields (dra.resource_versions)
        "module_utils/common/http_exchange.py",  # one deadline per API request (kube.client)
        "module_utils/common/limits.py",
        "module_utils/dra/resource_versions.py",
        "module_utils/kube/client.py",
        "module_utils/cluster/node_state.py",
        "module_utils/upgrade/node_api.py",
        "module_utils/upgrade/record.py",
    },
    "upgrade_packages": {
        "modules/upgrade_packages.py",
        "module_utils/common/files.py",
    },
    "upgrade_kubelet_health": {
        "modules/upgrade_kubelet_health.py",
    },
    "dra_gate_audit_facts": {
        "modules/dra_gate_audit_facts.py",
        "module_utils/common/http_exchange.py",  # one deadline per metrics endpoint
        "module_utils/common/limits.py",
        "module_utils/common/messages.py",
        "module_utils/dra/core.py",
        "module_utils/gate_audit/facts.py",
        "module_utils/gate_audit/metrics.py",
        "module_utils/gate_audit/terms.py",
        "module_utils/host/processes.py",
        "module_utils/kube/command_line.py",
        "module_utils/kube/flags.py",
        "module_utils/kube/kubelet_config.py",
        "module_utils/kube/manifests.py",
    },
    "gpu_facts": {
        "modules/gpu_facts.py",
        "module_utils/host/gpu_facts.py",
        "module_utils/mig/profiles.py",
        "module_utils/mig/tables.py",
        "module_utils/nvidia/gpu.py",
        "module_utils/nvidia/nvml.py",
        "module_utils/nvidia/smi.py",
    },
    "host_commands": {
        "modules/host_commands.py",
        "module_utils/host/commands.py",
    },
    "path_stat": {
        "modules/path_stat.py",
        "module_utils/host/paths.py",
    },
    "kubelet_plugin_sockets": {
        "modules/kubelet_plugin_sockets.py",
        "module_utils/host/plugin_sockets.py",
    },
}


@pytest.mark.parametrize("module", sorted(NODE_PAYLOADS))
def test_a_node_module_ships_the_files_it_pins(module: str) -> None:
    got = closure(f"modules/{module}.py")
    want = NODE_PAYLOADS[module]
    assert got == want, (
        f"{module} now ships {len(got)} collection files: added {sorted(got - want)}, "
        f"dropped {sorted(want - got)}"
    )


def test_the_scan_follows_module_and_name_imports_at_any_depth() -> None:
    source = (
        f"from {PREFIX}.upgrade import node_api as ua\n"
        "def lazy():\n"
        f"    from {PREFIX}.dra.core import parse_version\n"
    )
    assert imported(source) == {"module_utils/upgrade/node_api.py", "module_utils/dra/core.py"}
    assert "module_utils/dra/release_data.py" in closure("module_utils/dra/api.py")


def test_no_pinned_payload_holds_the_release_tables_or_names_a_missing_file() -> None:
    for module, files in NODE_PAYLOADS.items():
        assert all((PLUGINS / f).is_file() for f in files), module
        assert not {f for f in files if "/dra/release" in f}, module
