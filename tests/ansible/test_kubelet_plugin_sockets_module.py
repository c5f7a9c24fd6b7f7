"""Module kubelet_plugin_sockets run by ansible-playbook on localhost against real Unix
sockets laid out as the kubelet's plugin registry and plugins directory: a live service
socket, a stale registration socket; its answer, as the validate role registers it, makes
hosts.plugin-sockets warn; a bad timeout is refused naming the option."""

from __future__ import annotations

import socket
import tempfile
from pathlib import Path

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.validate import driver_root as vdr
from ansible_collections.gpufleet.cluster.plugins.module_utils.validate import hosts as vh

from tests.ansible.test_config_gate_modules import play

pytestmark = pytest.mark.ansible


def test_the_module_tells_live_from_stale_sockets(tmp_path: Path) -> None:
    with tempfile.TemporaryDirectory(prefix="kps-", dir="/tmp") as tmp:
        reg, plugins = Path(tmp, "reg"), Path(tmp, "plugins")
        (plugins / "gpu.nvidia.com").mkdir(parents=True)
        reg.mkdir()
        live = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        live.bind(str(plugins / "gpu.nvidia.com" / "dra.sock"))
        live.listen(4)
        stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        stale.bind(str(reg / "gpu.nvidia.com-reg.sock"))
        stale.close()
        args = {"registry_dir": str(reg), "plugins_dir": str(plugins)}
        try:
            ok, bad = play(
                tmp_path,
                "sockets",
                [
                    {
                        "name": "read",
                        "gpufleet.cluster.kubelet_plugin_sockets": {
                            "drivers": ["gpu.nvidia.com", "compute-domain.nvidia.com"],
                            **args,
                        },
                    },
                    {
                        "name": "bad timeout",
                        "gpufleet.cluster.kubelet_plugin_sockets": {
                            "drivers": ["gpu.nvidia.com"],
                            "timeout": 0,
                            **args,
                        },
                        "ignore_errors": True,
                    },
                ],
            )
        finally:
            live.close()
    assert ok["changed"] is False and not ok["_failed"]
    assert [(Path(s["path"]).name, s["listening"]) for s in ok["sockets"]] == [
        ("gpu.nvidia.com-reg.sock", False),
        ("dra.sock", True),
    ]
    assert bad["_failed"] and "timeout=0" in bad["msg"]
    c = vdr.plugin_sockets_check([vh.normalize_host({"host": "gpu-1", "plugin_sockets": ok})])
    assert c.status == "warn", [p.message for p in c.problems]
